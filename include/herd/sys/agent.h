/*
 * herd/sys/agent.h - the node side of herd's own protocols: what the herd
 * program runs on a node when a launcher, a discovery or a broadcast
 * reaches it (`herd exec`, `herd probe --forward`, `herd probe --watch`,
 * `herd bcast --receive`).
 *
 * As libgit2's git2/sys/ headers, this one is not part of herd.h: it is
 * for a program that acts as herd's node-side helper, which is the herd
 * program; an application that launches jobs, discovers a cluster or
 * broadcasts a file uses herd/job.h, herd/cluster.h and herd/bcast.h,
 * whose calls start these entry points on the nodes.  The wire formats behind them belong to
 * one version of libherd: the launcher and every node must run the same.
 *
 * These calls own the process's standard streams where they say so (their
 * protocol runs on stdin and stdout, their reports go to stdout): they are
 * a program's main work, not a library call among others.  Each blocks
 * until its work is done; none is thread-safe with itself.
 */
#ifndef HERD_SYS_AGENT_H
#define HERD_SYS_AGENT_H

#include <stdint.h>

#include "herd/cluster.h"
#include "herd/common.h"
#include "herd/telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The node side of a job: what `herd exec` runs on every node the launcher
 * starts it on (over ssh, through srun, or as a local child).  Reads the
 * node's spec from rfd (the launcher writes it first), starts that node's
 * ranks, writes their events (started, output lines, exits) to wfd and
 * obeys the launcher's signal and stop commands, until every rank has
 * ended.  `herd exec` runs it on its main thread; a local job on a thread
 * of the launcher, with every signal blocked.  When rfd closes (the
 * launcher died, ssh dropped) or stop_fd (may be -1) becomes readable (a
 * signal handler's self-pipe), it stops the ranks: SIGTERM, then SIGKILL
 * after the job's grace period.  Ranks are forked from the calling thread,
 * which must live until they end (it is their parent for
 * PR_SET_PDEATHSIG); the caller ignores SIGPIPE or blocks it.  The
 * descriptors stay the caller's to close.  Blocks until the ranks are gone.
 * HERD_OK when the node ran to its end, HERD_ECLOSED when the launcher
 * went away, the launcher-visible error otherwise (a malformed spec, GPUs
 * that cannot be leased).
 */
HERD_EXTERN herd_status herd_agent_exec(int rfd, int wfd, int stop_fd);

/*
 * herd_agent_exec, and *ranks_ok (may be NULL) true when every rank of
 * this node exited 0: false when one failed or was stopped because the
 * job failed elsewhere (a Kubernetes pod then fails too, so that its Job
 * retries it with the others).
 */
HERD_EXTERN herd_status herd_agent_exec_ranks(int rfd, int wfd, int stop_fd, bool *ranks_ok);

/*
 * The node's end of a connect-back channel, for launchers that start
 * `herd exec` where its stdio cannot be the channel (Slurm: srun merges
 * every task's output into one stream).  Connects to the launcher at addr
 * ("host:port"), proves knowledge of the job secret (secret, or when NULL
 * HERD_JOB_SECRET) and checks that the launcher knows it too, and names
 * this node (node, or when NULL $SLURMD_NODENAME, else the host name), so
 * that the launcher hands it that node's spec.  On success *fd is the
 * connected socket, for herd_agent_exec(*fd, *fd, stop_fd); the caller
 * closes it.  Blocks at most timeout_ms (HERD_TIMEOUT_DEFAULT: 60 s; 0,
 * HERD_TIMEOUT_NONE and other negative values are HERD_EINVAL: a launcher
 * that never answers must not hold a node).  HERD_EAUTH when either
 * side's proof fails, HERD_ETIMEDOUT, HERD_EINVAL for a malformed addr.
 */
HERD_EXTERN herd_status herd_agent_connect(int *fd, const char *addr, const char *secret,
					   const char *node, int timeout_ms);

/*
 * The relay of a discovery over an ssh tree (`herd probe --text --forward
 * GROUP`): this node's inventory, then those of the hosts of the hostlist
 * forward, probed over ssh within timeout_ms each (a positive count;
 * program: the herd program there), merged into *out with this node first
 * and the hosts that failed among its failures, as herd_cluster_discover
 * merges.  *out is the caller's, freed with herd_cluster_free; NULL on
 * failure.
 */
HERD_EXTERN herd_status herd_agent_discover_relay(herd_cluster **out, const char *forward,
						  int timeout_ms, const char *program);

/*
 * The node side of herd_bcast (`herd bcast --receive`): first checks dest
 * (nothing there, or a regular file, which the copy replaces; a device, a
 * FIFO, a symbolic link or a directory is refused) and makes a temporary
 * file beside it, and says so on stdout before it reads a byte:
 * "herd-bcast ready", or, when it cannot keep a copy and has no hosts to
 * forward to, "herd-bcast fail . REASON" and returns HERD_OK without
 * reading stdin.  Then receives the file on stdin (bytes, then its
 * XXH3-64 as 8 bytes little endian) into the temporary file, verified,
 * renamed to dest with mode; forwards the same stream to the hosts of the
 * hostlist forward (NULL: none) over ssh, each running this with no
 * forward (program: the herd program there), and gives each of them
 * timeout_ms (a positive count) to take or say something.  Prints one line
 * per host on stdout, "herd-bcast ok HOST" or "herd-bcast fail HOST
 * REASON", this node's HOST being ".".  HERD_OK once every line is out,
 * whatever they say; an error for bad arguments or a sender that went
 * away.  When stop_fd (may be -1) becomes readable (a signal handler's
 * self-pipe), it removes its temporary file, stops its group's receivers
 * and returns HERD_EABORTED.  The caller ignores SIGPIPE, so that a sender
 * gone before the first word is a failed write, and the temporary file is
 * removed.
 */
HERD_EXTERN herd_status herd_agent_bcast_receive(const char *dest, uint64_t bytes, int mode,
						 const char *forward, const char *program,
						 int timeout_ms, int stop_fd);

/*
 * The node side of a telemetry watch (`herd probe --watch`,
 * herd_telemetry_watch_start): samples this node every period_ms (100 or
 * more; the sampler's thread) and writes each sample to out_fd as one
 * record of format (herd_telemetry_record).  It stops and returns HERD_OK
 * when in_fd reaches its end or fails (the watcher is gone: ssh closed it;
 * what comes before is read and dropped; -1: no such end), when out_fd
 * breaks (EPIPE: the caller ignores SIGPIPE), when stop_fd (-1: none)
 * becomes readable (a signal handler's self-pipe; the record under way is
 * written whole first, within 1 s), or once count records (0: no limit)
 * have been written.  It never blocks on an out_fd that is a pipe or a
 * socket (made non-blocking during the call, its flags restored after): a
 * sample taken while the record before is not all written is dropped and
 * counted in *dropped (may be NULL; the watcher sees the gap in seq), so
 * that one record at most waits beyond what out_fd's pipe holds; when
 * out_fd takes nothing for 10 s or 10 periods, whichever is longer, while
 * a record waits, it gives up with HERD_ETIMEDOUT.  A terminal or a file
 * is written to as it is (its flags may be shared with other processes).
 * HERD_EINVAL for a bad argument, the sampler's error when it cannot
 * start.
 */
HERD_EXTERN herd_status herd_agent_telemetry_watch(int in_fd, int out_fd, int stop_fd,
						   int period_ms, uint64_t count,
						   herd_telemetry_record format,
						   uint64_t *dropped);

/*
 * A node's holder of checkpoint copies (`herd ckpt hold`), which `herd
 * launch --ckpt-peers K` starts on each node of the job for the job's
 * whole life, so that the copies outlive a failed run's ranks (herd/ckpt.h,
 * the tier in peers' memory).  Listens on TCP (bind: an address, NULL:
 * every interface), writes "hold PORT TOKEN\n" to out_fd (TOKEN: 32 hex
 * digits that every connection must prove knowing; the launcher passes
 * both to the ranks in HERD_CKPT_HOLDERS), then keeps the newest `steps`
 * committed steps (1 or 2; 0: HERD_CKPT_PEER_STEPS, else 1) of the
 * ranks' copies, and the steps arriving,
 * in at most budget bytes of memory
 * (0: HERD_CKPT_PEER_BYTES, else a quarter of the node's memory) until
 * in_fd reaches its end: the launcher closed the channel.  Returns HERD_OK
 * then; HERD_EINVAL for a bad argument, an error when it cannot listen.
 */
HERD_EXTERN herd_status herd_agent_ckpt_hold(int in_fd, int out_fd, const char *bind,
					     uint64_t budget, int steps);

#ifdef __cplusplus
}
#endif

#endif /* HERD_SYS_AGENT_H */
