/*
 * sdk/launch/capture.c - short commands the launcher runs and reads: sinfo
 * after a failure, srun's step, `haproxy -v`.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_internal.h"
#include "net.h"

/* launch_internal.h.  (srun's step has no parent-death signal: when the
 * launcher dies, its sockets close, every `herd exec` stops its ranks and
 * exits, and the step ends with them.) */
herd_status herd__launch_spawn_piped(const char *what, const char *const *argv, char *const *envp,
			       pid_t *pid, int *outfd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int p[2], rc;

	*pid = 0;
	*outfd = -1;
	if (pipe2(p, O_CLOEXEC) != 0)
		return herd__error_errno(HERD_ESYS, errno, "a pipe for %s", what);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					       POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawnp(pid, argv[0], &fa, &attr, (char *const *)argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		*pid = 0;
		return herd__error_errno(rc == ENOENT ? HERD_ENOTFOUND : HERD_ESYS, rc,
					 "cannot run \"%s\" (%s)", argv[0], what);
	}
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	*outfd = p[0];
	return HERD_OK;
}

herd_status herd__launch_capture(const char *what, const char *const *argv, int timeout_ms,
				 herd__buf *out, int *wstatus)
{
	extern char **environ;
	int64_t deadline = herd__net_deadline(timeout_ms);
	herd_status st = HERD_OK;
	pid_t pid = 0;
	int fd = -1;

	*wstatus = -1;
	HERD_CHECK(herd__launch_spawn_piped(what, argv, environ, &pid, &fd));
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - herd__net_now_ms();
		ssize_t got;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
			st = herd__error(HERD_ETIMEDOUT, "%s (%s) did not finish within %d ms",
					 what, argv[0], timeout_ms);
			break;
		}
		if (herd__buf_reserve(out, 4096) != HERD_OK) {
			st = herd__error(HERD_ENOMEM, "out of memory for what %s printed", what);
			break;
		}
		got = read(fd, out->data + out->len, 4096);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			break;
		out->len += (size_t)got;
	}
	close(fd);
	if (st != HERD_OK)
		kill(-pid, SIGKILL);
	while (waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
		;
	return st;
}
