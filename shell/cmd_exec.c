/*
 * shell/cmd_exec.c - `herd exec --stdio`, the node-side helper the launcher
 * starts on every node (over ssh, through srun, or as a local child): the
 * node protocol on stdin and stdout, the node's ranks below it
 * (herd_agent_exec).  When the launcher goes away, or this process gets
 * SIGTERM, SIGINT or SIGHUP, the ranks are stopped before it exits: no
 * orphans.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "herd.h"
#include "herd/sys/agent.h"
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

/* What is wrong with a command line that is neither form. */
static int usage_error(int argc, char **argv)
{
	if (argc < 2)
		return shell_usage_error("exec", "%s", "give --stdio or --connect HOST:PORT (the "
					 "node side of herd launch, not for interactive use)");
	if (strcmp(argv[1], "--connect") == 0 && argc < 3)
		return shell_usage_error("exec", "option '%s' needs HOST:PORT", argv[1]);
	if (strcmp(argv[1], "--connect") == 0 && argc >= 4 && strcmp(argv[3], "--node") == 0)
		return argc == 4 ? shell_usage_error("exec", "option '%s' needs a name", argv[3])
				 : shell_usage_error("exec", "unexpected argument '%s'", argv[5]);
	if (strcmp(argv[1], "--connect") == 0)
		return shell_usage_error("exec", argv[3][0] == '-' ? "unrecognized option '%s'"
					 : "unexpected argument '%s'", argv[3]);
	if (strcmp(argv[1], "--stdio") == 0)
		return shell_usage_error("exec", argv[2][0] == '-' ? "unrecognized option '%s'"
					 : "unexpected argument '%s'", argv[2]);
	return shell_usage_error("exec", argv[1][0] == '-' ? "unrecognized option '%s'"
				 : "unexpected argument '%s'", argv[1]);
}

int cmd_exec(int argc, char **argv)
{
	static const int stops[] = { SIGTERM, SIGINT, SIGHUP };
	struct sigaction sa;
	herd_status st;
	/* --connect HOST:PORT [--node NAME]: the channel is a socket to the
	 * launcher (Slurm's srun leaves no stdio per node), HERD_JOB_SECRET
	 * proving who we are. */
	bool connect = (argc == 3 || (argc == 5 && strcmp(argv[3], "--node") == 0)) &&
		       strcmp(argv[1], "--connect") == 0;
	int rfd = STDIN_FILENO, wfd = STDOUT_FILENO;

	static const char usage[] =
		"usage: herd exec --stdio\n"
		"       herd exec --connect HOST:PORT [--node NAME]\n"
		"  the node side of herd launch: reads a node spec from stdin (or\n"
		"  from the launcher at HOST:PORT, authenticated with HERD_JOB_SECRET)\n"
		"  and streams the ranks' events back (not for interactive use)\n"
		"Exit status:\n"
		"  0    the node's ranks ran and their events reached the launcher\n"
		"  1    the launcher could not be reached or went away, or the ranks\n"
		"       could not be run (said on stderr)\n"
		"  2    a usage error\n";

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		return SHELL_EXIT_OK;
	}
	if (!connect && (argc != 2 || strcmp(argv[1], "--stdio") != 0))
		return usage_error(argc, argv);
	/* The launcher's death (a local launcher) stops the ranks too. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* A vanished launcher shows as a failed write, not a death. */
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "herd exec: cannot create the pipe that tells of signals: %s\n",
			strerror(errno));
		return SHELL_EXIT_FAILURE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stops) / sizeof(*stops); i++)
		sigaction(stops[i], &sa, NULL);
	if (getppid() == 1)
		on_stop_signal(SIGTERM);  /* orphaned before prctl */
	if (connect) {
		st = herd_agent_connect(&rfd, argv[2], NULL, argc == 5 ? argv[4] : NULL,
					HERD_TIMEOUT_DEFAULT);
		if (st != HERD_OK) {
			fprintf(stderr, "herd exec: %s\n", shell_last_error());
			return SHELL_EXIT_FAILURE;
		}
		wfd = rfd;
	}
	st = herd_agent_exec(rfd, wfd, stop_pipe[0]);
	if (st == HERD_OK)
		return SHELL_EXIT_OK;
	fprintf(stderr, "herd exec: %s\n", shell_last_error());
	return SHELL_EXIT_FAILURE;
}
