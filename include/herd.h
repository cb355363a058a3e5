/*
 * herd.h - libherd, an embeddable GPU cluster SDK.
 *
 * Include this one header to get the whole public API.  Each area has its
 * own header under herd/:
 *
 *   herd/common.h    status codes, herd_last_error(), versions, logging
 *   herd/cluster.h   discovery: nodes, CPUs, memory, GPUs, NICs, topology
 */
#ifndef HERD_H
#define HERD_H

#include "herd/common.h"
#include "herd/cluster.h"

#endif /* HERD_H */
