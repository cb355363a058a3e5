/*
 * herd.h - libherd, an embeddable GPU cluster SDK.
 *
 * Include this one header to get the whole public API.  Each area has its
 * own header under herd/:
 *
 *   herd/common.h    status codes, herd_last_error(), versions, logging
 *   herd/dtype.h     element types and reductions
 *   herd/cluster.h   discovery: nodes, CPUs, memory, GPUs, NICs, topology
 *   herd/alloc.h     GPU allocation: placement plans, GPU leases, Slurm's grant
 *   herd/store.h     rendezvous key-value store: TCP server and client, file store
 *   herd/comm.h      collectives between ranks on host and device memory
 *   herd/device.h    GPU memory and nccl-tests' data, for device benchmarks
 *   herd/job.h       job launch: N ranks over nodes, watched and stopped cleanly
 *   herd/ckpt.h      checkpoints: sharded save, verified and resharded restore
 *   herd/health.h    per-GPU health checks in DCGM-style levels
 *
 * herd/sys/agent.h, not included here, holds the node side of herd's own
 * protocols, for the herd program (as libgit2's git2/sys/).
 */
#ifndef HERD_H
#define HERD_H

#include "herd/common.h"
#include "herd/dtype.h"
#include "herd/cluster.h"
#include "herd/alloc.h"
#include "herd/store.h"
#include "herd/comm.h"
#include "herd/device.h"
#include "herd/job.h"
#include "herd/ckpt.h"
#include "herd/health.h"

#endif /* HERD_H */
