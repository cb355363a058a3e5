/*
 * sdk/launch/exec.h - the node side of a job, for the herd program's
 * `herd exec` only: internal to herd (not exported by libherd.so), linked
 * into the herd program from the static library.  Needs only the public
 * headers.
 */
#ifndef HERD_LAUNCH_EXEC_H
#define HERD_LAUNCH_EXEC_H

#include "herd/job.h"

/*
 * The node side of a job: what `herd exec` runs on every node the launcher
 * starts it on (over ssh, through srun, or as a local child).  Reads the
 * node's spec from rfd (the launcher writes it first), starts that node's
 * ranks, writes their events (started, output lines, exits) to wfd and
 * obeys the launcher's signal and stop commands, until every rank has
 * ended.  `herd exec` runs it on its main thread; a local job on a thread
 * of the launcher (local.c), with every signal blocked.  When rfd closes
 * (the launcher died, ssh dropped) or stop_fd (may be -1) becomes readable (a signal handler's self-pipe), it stops
 * the ranks: SIGTERM, then SIGKILL after the job's grace period.  Ranks
 * are forked from the calling thread, which must live until they end (it
 * is their parent for PR_SET_PDEATHSIG); the caller ignores SIGPIPE or
 * blocks it.  Blocks until the ranks are gone.
 * HERD_OK when the node ran to its end, HERD_ECLOSED when the launcher
 * went away, the launcher-visible error otherwise (a malformed spec, GPUs
 * that cannot be leased).  The wire format is internal to one herd
 * version: launcher and nodes must run the same.
 */
herd_status herd__job_exec(int rfd, int wfd, int stop_fd);

/*
 * The node's end of a connect-back channel, for launchers that start
 * `herd exec` where its stdio cannot be the channel (Slurm: srun merges
 * every task's output into one stream).  Connects to the launcher at addr
 * ("host:port"), proves knowledge of the job secret (secret, or when NULL
 * HERD_JOB_SECRET) and checks that the launcher knows it too, and names
 * this node (node, or when NULL $SLURMD_NODENAME, else the host name), so
 * the launcher hands it that node's spec.  On success *fd is the
 * connected socket, for herd__job_exec(*fd, *fd, stop_fd); the caller
 * closes it.  Blocks at most timeout_ms (<= 0: 60000).  HERD_EAUTH when
 * either side's proof fails, HERD_ETIMEDOUT, HERD_EINVAL for a malformed
 * addr.
 */
herd_status herd__job_connect(int *fd, const char *addr, const char *secret,
			     const char *node, int timeout_ms);

#endif /* HERD_LAUNCH_EXEC_H */
