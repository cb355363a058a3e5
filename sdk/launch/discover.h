/*
 * sdk/launch/discover.h - the relay of a discovery over an ssh tree
 * (`herd probe --text --forward GROUP`).  Internal to libherd and the herd
 * program.
 */
#ifndef HERD_LAUNCH_DISCOVER_H
#define HERD_LAUNCH_DISCOVER_H

#include "herd/cluster.h"

/*
 * This node's inventory, then those of the hosts of the hostlist forward,
 * probed over ssh within timeout_ms each (program: herd there), merged
 * into *out with this node first and the hosts that failed among its
 * failures, as herd_cluster_discover merges.
 */
herd_status herd__discover_relay(const char *forward, int timeout_ms, const char *program,
				 herd_cluster **out);

#endif /* HERD_LAUNCH_DISCOVER_H */
