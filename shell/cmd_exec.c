/*
 * shell/cmd_exec.c - `herd exec --stdio`, the node-side helper the launcher
 * starts on every node (over ssh, through srun, or as a local child): the
 * node protocol on stdin and stdout, the node's ranks below it
 * (herd_job_exec).  When the launcher goes away, or this process gets
 * SIGTERM, SIGINT or SIGHUP, the ranks are stopped before it exits: no
 * orphans.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

static int stop_pipe[2] = { -1, -1 };

static void on_stop_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(stop_pipe[1], &c, 1) < 0) {
		/* Full: a stop is pending already. */
	}
	errno = saved;
}

int cmd_exec(int argc, char **argv)
{
	static const int stops[] = { SIGTERM, SIGINT, SIGHUP };
	struct sigaction sa;
	herd_status st;

	if (argc != 2 || strcmp(argv[1], "--stdio") != 0) {
		fprintf(stderr, "usage: herd exec --stdio\n"
			"  the node side of herd launch: reads a node spec from stdin and\n"
			"  streams the ranks' events to stdout (not for interactive use)\n");
		return SHELL_EXIT_USAGE;
	}
	/* The launcher's death (a local launcher) stops the ranks too. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* A vanished launcher shows as a failed write, not a death. */
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "herd exec: pipe: %s\n", strerror(errno));
		return SHELL_EXIT_FAILURE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stops) / sizeof(*stops); i++)
		sigaction(stops[i], &sa, NULL);
	if (getppid() == 1)
		on_stop_signal(SIGTERM);  /* orphaned before prctl */
	st = herd_job_exec(STDIN_FILENO, STDOUT_FILENO, stop_pipe[0]);
	if (st == HERD_OK)
		return SHELL_EXIT_OK;
	fprintf(stderr, "herd exec: %s\n", herd_last_error());
	return SHELL_EXIT_FAILURE;
}
