/*
 * sdk/launch/connect.h - connect-back channels: for backends whose helper
 * cannot carry one channel per node on its stdio (srun multiplexes every
 * task's output into one stream), the launcher listens on a TCP port and
 * each node's `herd exec --connect HOST:PORT` connects to it.  Internal to
 * libherd; the node's side is herd_agent_connect (herd/sys/agent.h), which
 * the herd program calls.
 *
 * Before the node protocol, both ends prove they know the job secret with
 * the handshake of base/auth.h, in frames of base/wire.c's envelope (the
 * same bytes as the store's greeting, under labels of their own, so neither
 * a store MAC nor a stray process can pass):
 *
 *   launcher: {v, t:"hello", nonce: Nl}
 *   node:     {v, t:"auth", nonce: Nn, key: node name,
 *              mac: HMAC-SHA256(secret, Nl || Nn || "herd-launch/1 node")}
 *   launcher: {v, t:"auth_ok", mac: HMAC-SHA256(secret, Nn || Nl || "herd-launch/1 launcher")}
 *          or {v, t:"error", st, msg} and the connection closes.
 *
 * then node protocol frames (launch_internal.h) in both directions, the
 * spec first.  The node names itself (SLURMD_NODENAME under Slurm), and
 * the launcher gives the socket to the job's node of that name.
 */
#ifndef HERD_LAUNCH_CONNECT_H
#define HERD_LAUNCH_CONNECT_H

#include "launch_internal.h"

/* Largest handshake frame payload. */
#define HERD__CONNECT_FRAME_MAX 256u

#define HERD__CONNECT_LABEL_NODE "herd-launch/1 node"
#define HERD__CONNECT_LABEL_LAUNCHER "herd-launch/1 launcher"

/* Connections that may be half-way through authentication at once. */
#define HERD__CONNECT_MAX_PENDING 64
/* How long one connection may take to authenticate. */
#define HERD__CONNECT_AUTH_TIMEOUT_MS 10000

/*
 * Accepts connections on the listening socket lfd until every one of
 * nodes[0..nnodes) has connected and authenticated, and puts each node's
 * socket into channels[i] (rfd = wfd = the socket, non-blocking).
 * Connections that fail to authenticate are closed and do not count.
 *
 * helper_fd, when not -1, is the output of the process that starts the
 * nodes (helper_name: "srun"); what it writes is kept in helper_out (its
 * last few kilobytes), and its end before every node has
 * connected fails the wait (HERD_EUNAVAIL, quoting it), as does an
 * authenticated node naming a host that is not in nodes or came already.
 * HERD_ETIMEDOUT at deadline, naming the nodes still missing.  On failure
 * the sockets accepted so far are closed and channels[] reset.
 */
herd_status herd__connect_accept(int lfd, const char *secret, const herd__launch_node *nodes,
				 size_t nnodes, herd__launch_channel *channels,
				 const char *helper_name, int helper_fd, herd__buf *helper_out,
				 int64_t deadline);

#endif /* HERD_LAUNCH_CONNECT_H */
