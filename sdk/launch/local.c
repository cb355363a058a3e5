/*
 * sdk/launch/local.c - the backend that runs a job on this node, whose
 * node supervisor is `herd exec`'s loop on a thread of the launcher; and
 * the helper-process spawner the remote backends share.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "herd/sys/agent.h"
#include "launch_internal.h"
#include "net.h"

extern char **environ;

/* The one node of a local job: this host, any number of slots. */
static herd_status local_resolve(const herd_job_spec *spec, herd__launch_node **nodes,
				 size_t *nnodes)
{
	char host[256];

	(void)spec;
	*nodes = NULL;
	*nnodes = 0;
	if (herd__net_host_short(host, sizeof(host)) != HERD_OK || host[0] == '\0')
		herd__strlcpy(host, "localhost", sizeof(host));
	HERD_CHECK(herd__calloc(nodes, 1, sizeof(**nodes), "the node list"));
	if (herd__strdup(&(*nodes)[0].host, host) != HERD_OK) {
		free(*nodes);
		*nodes = NULL;
		return HERD_ENOMEM;
	}
	*nnodes = 1;
	return HERD_OK;
}

/* A node thread of a start that failed: its socket closed, it sees the
 * launcher gone before any spec, and ends. */
static void close_channel(herd__launch_channel *ch)
{
	herd__launch_channel_close_fds(ch);
	if (ch->joinable)
		pthread_join(ch->thread, NULL);
	*ch = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
}

/*
 * A local node is `herd exec`'s own loop (herd_agent_exec) on a thread of
 * this process, at the other end of a socketpair: the launcher drives it
 * through the node protocol, as it drives a remote node through ssh or
 * srun, so a job has one event path.  The thread is created by the job's
 * supervisor thread and inherits its mask (every signal blocked: a SIGPIPE
 * stays pending on it), forks the ranks, and returns once they are gone:
 * when they end, or when its socket closes (it then stops them, SIGTERM and
 * SIGKILL after the grace period).
 */
static void *node_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;

	(void)herd_agent_exec(fd, fd, -1);
	close(fd);
	return NULL;
}

static herd_status local_start(const herd__launch_ctx *ctx, herd__launch_channel *channels)
{
	herd_status st = HERD_OK;
	size_t i;

	for (i = 0; i < ctx->nnodes; i++)
		channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	for (i = 0; i < ctx->nnodes && st == HERD_OK; i++) {
		herd__launch_channel *ch = &channels[i];
		int sv[2], rc;

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
			st = herd__error_errno(HERD_ESYS, errno, "node %s: socketpair",
					       ctx->nodes[i].host);
			break;
		}
		rc = pthread_create(&ch->thread, NULL, node_thread, (void *)(intptr_t)sv[1]);
		if (rc != 0) {
			close(sv[0]);
			close(sv[1]);
			st = herd__error_errno(HERD_ESYS, rc, "node %s: its supervisor thread",
					       ctx->nodes[i].host);
			break;
		}
		ch->joinable = true;
		ch->rfd = ch->wfd = sv[0];
	}
	if (st != HERD_OK)
		for (i = 0; i < ctx->nnodes; i++)
			close_channel(&channels[i]);
	return st;
}

const herd__launch_backend herd__launch_backend_local = {
	.name = "local",
	.remote = false,
	.resolve = local_resolve,
	.start = local_start,
};

/* PATH searched for argv0 before the fork, as execvp would. */
static char *find_program(const char *argv0)
{
	const char *path = getenv("PATH");

	if (strchr(argv0, '/') != NULL)
		return access(argv0, X_OK) == 0 ? strdup(argv0) : NULL;
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		char *cand = NULL;

		if (asprintf(&cand, "%.*s/%s", end == p ? 1 : (int)(end - p), end == p ? "." : p,
			     argv0) < 0)
			return NULL;
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
		if (*end == '\0')
			return NULL;
		p = end;
	}
}

herd_status herd__launch_spawn_helper(const char *const *argv, const char *const *env,
				      herd__launch_channel *ch)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	char *path = find_program(argv[0]);
	pid_t parent = getpid(), pid;
	herd_status st = HERD_OK;

	*ch = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	if (path == NULL)
		return herd__error(HERD_ENOTFOUND, "cannot run \"%s\": not found in PATH or not "
				   "executable", argv[0]);
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
	    pipe2(err, O_CLOEXEC) != 0) {
		st = herd__error_errno(HERD_ESYS, errno, "pipes for \"%s\"", argv[0]);
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "fork for \"%s\"", argv[0]);
		goto out;
	}
	if (pid == 0) {
		/* Async-signal-safe calls only: the launcher has threads. */
		sigset_t none;

		setpgid(0, 0);
		/* SIGTERM, not SIGKILL: `herd exec` stops its ranks on it. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
			_exit(127);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(in[0], STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
		    dup2(err[1], STDERR_FILENO) < 0)
			_exit(127);
		execve(path, (char *const *)argv, env != NULL ? (char *const *)env : environ);
		_exit(127);
	}
	setpgid(pid, pid);
	ch->pid = pid;
	ch->wfd = in[1];
	ch->rfd = out[0];
	ch->errfd = err[0];
	in[1] = out[0] = err[0] = -1;
out:
	for (int k = 0; k < 2; k++) {
		if (in[k] >= 0)
			close(in[k]);
		if (out[k] >= 0)
			close(out[k]);
		if (err[k] >= 0)
			close(err[k]);
	}
	free(path);
	return st;
}
