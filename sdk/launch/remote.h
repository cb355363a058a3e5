/*
 * sdk/launch/remote.h - what the remote backends (ssh.c, slurm.c) share:
 * nodes from a hostlist or hostfile, extra helper arguments from the
 * environment, shell quoting for a remote command line, and undoing a
 * half-started set of channels.  Internal to libherd.
 */
#ifndef HERD_LAUNCH_REMOTE_H
#define HERD_LAUNCH_REMOTE_H

#include "launch_internal.h"

/* Most words in HERD_SSH_ARGS / HERD_SRUN_ARGS. */
#define HERD__REMOTE_MAX_ARGS 64

/*
 * The job's nodes from a hostlist expression (slots unknown: 0) or an
 * Open MPI / DeepSpeed hostfile (its slots), as backend->resolve gives
 * them.  A host listed twice in an expression is HERD_EFORMAT (one node
 * supervisor per host); in a hostfile its slots add up.
 */
herd_status herd__remote_nodes_from_hostlist(const char *expr, herd__launch_node **nodes,
					      size_t *nnodes);
herd_status herd__remote_nodes_from_hostfile(const char *path, herd__launch_node **nodes,
					      size_t *nnodes);

/*
 * s quoted for a POSIX shell ('...' with ' written '\''), into out; false
 * when it does not fit.
 */
bool herd__remote_shell_quote(const char *s, char *out, size_t cap);

/* Room for the remote command line: the quoted program and its arguments. */
#define HERD__SSH_REMOTE_MAX 16384

/*
 * The OpenSSH client's command line that runs `PROGRAM ARGS` (PROGRAM
 * quoted for the remote shell, ARGS as given) on a host, as the ssh
 * backend starts `herd exec` (ssh.c): argv[host_at] is to be set to the
 * host.  connect_timeout_ms 0: the backend's default.
 */
typedef struct herd__ssh_cmd {
	const char *argv[HERD__REMOTE_MAX_ARGS + 16 + 1];
	size_t host_at;
	char extra[4096], timeout[48], remote[HERD__SSH_REMOTE_MAX];
	char quoted[HERD__SSH_REMOTE_MAX - 64];
} herd__ssh_cmd;

herd_status herd__ssh_cmd_build(herd__ssh_cmd *c, int connect_timeout_ms, const char *program,
				const char *args);

/*
 * The width of an ssh tree over n nodes, as the launch makes it: n (flat)
 * up to HERD_SSH_TREE_MIN nodes (default 32), else HERD_SSH_TREE_WIDTH
 * (default the square root of n, at least 2).  HERD_EINVAL naming a bad
 * setting.
 */
herd_status herd__ssh_tree_width(size_t n, long *width);

/*
 * What a relay (a node that reaches its group over ssh on this process's
 * behalf: `herd bcast --receive`, `herd probe --text --forward`) needs to
 * know of this process's settings, which ssh does not carry: the words
 * "--program HERD" and, when set, "--ssh PROG" and "--ssh-args WORDS",
 * into words[0..*n) (at most max; pointing at program and the
 * environment).  HERD_EINVAL when they do not fit.
 */
herd_status herd__remote_relay_words(const char *program, const char **words, size_t max,
				     size_t *n);

/*
 * Closes a channel's fds and ends its helper process: SIGTERM to its
 * process group, SIGKILL after wait_ms, reaped.  The channel is reset.
 */
void herd__remote_channel_abort(herd__launch_channel *ch, int wait_ms);

#endif /* HERD_LAUNCH_REMOTE_H */
