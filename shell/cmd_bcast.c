/*
 * shell/cmd_bcast.c - `herd bcast FILE DEST`: a file to every node
 * (herd_bcast), and its node side, `herd bcast --receive`.  A receiver
 * stopped by SIGTERM, SIGINT or SIGHUP removes its temporary file and
 * then dies of the signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd.h"
#include "herd/sys/agent.h"
#include "shell.h"

static const char bcast_usage[] =
	"usage: herd bcast [--hosts EXPR | --hostfile FILE | --slurm] [--timeout SEC]\n"
	"                  FILE DEST\n"
	"  Copies FILE to the absolute path DEST on every node, as Slurm's sbcast:\n"
	"  over ssh (beyond 32 nodes as a tree, each first-level node forwarding to\n"
	"  its group), or inside a Slurm allocation through one srun step.  Each\n"
	"  node first refuses a DEST that is not a regular file (a device, a FIFO, a\n"
	"  symbolic link) before the file is streamed, verifies the bytes' XXH3 sum,\n"
	"  then fsyncs and renames its copy into place with FILE's mode; a node that\n"
	"  fails is named on stderr with the reason and the others keep their copies.\n"
	"  --hosts EXPR       the nodes, a hostlist (node[01-04])\n"
	"  --hostfile FILE    the hosts of an Open MPI / DeepSpeed hostfile\n"
	"  --slurm            the nodes of this Slurm allocation (the default inside one)\n"
	"  --timeout SEC      a node that takes or says nothing this long fails (30)\n"
	"  --receive DEST ... the node side, which herd bcast runs on every node\n"
	"                     (not for interactive use)\n"
	"Exit status:\n"
	"  0    every node has the file\n"
	"  1    some nodes have not (each named on stderr with the reason), or FILE\n"
	"       changed while it was sent\n"
	"  2    a usage error, a FILE or --hostfile that cannot be read, or\n"
	"       nodes that cannot be named (a malformed --hosts)\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "herd bcast: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'herd bcast --help' for more information.\n");
	return SHELL_EXIT_USAGE;
}

static void on_result(void *userdata, const char *host, herd_status status, const char *error)
{
	(void)userdata;
	if (status != HERD_OK)
		fprintf(stderr, "herd bcast: %s: %s\n", host, error != NULL ? error : "failed");
}

static int stop_pipe[2] = { -1, -1 };
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	int saved = errno;

	if (stop_signal == 0)
		stop_signal = sig;
	if (write(stop_pipe[1], "", 1) < 0) {
		/* Full: a stop is pending already. */
	}
	errno = saved;
}

/* The receiver's stops: a signal handler's self-pipe, read by the receiver. */
static int stops_catch(void)
{
	static const int stops[] = { SIGTERM, SIGINT, SIGHUP };
	struct sigaction sa;

	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stops) / sizeof(*stops); i++)
		sigaction(stops[i], &sa, NULL);
	return 0;
}

/* A stop that came: the process ends of the signal, as it would have. */
static void stops_raise(void)
{
	int sig = stop_signal;

	if (sig == 0)
		return;
	fflush(stdout);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* `herd bcast --receive DEST --bytes N --mode OCT --timeout SEC [--forward HOSTS
 * [--program HERD] [--ssh PROG] [--ssh-args WORDS]]` */
static int receive(int argc, char **argv)
{
	const char *dest = NULL, *forward = NULL, *program = shell_env("HERD_PROGRAM");
	uint64_t bytes = UINT64_MAX;
	long mode = -1;
	int secs = 30;
	herd_status st;

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		char *end = NULL;

		if (strcmp(a, "--receive") == 0)
			dest = v;
		else if (strcmp(a, "--bytes") == 0)
			bytes = strtoull(v, &end, 10);
		else if (strcmp(a, "--mode") == 0)
			mode = strtol(v, &end, 8);
		else if (strcmp(a, "--forward") == 0)
			forward = v;
		else if (strcmp(a, "--program") == 0)
			program = v;
		else if (strcmp(a, "--ssh") == 0 || strcmp(a, "--ssh-args") == 0)
			/* The sender's ssh settings, for a relay's group. */
			setenv(a[5] == '\0' ? "HERD_SSH" : "HERD_SSH_ARGS", v, 1);
		else if (strcmp(a, "--timeout") == 0 && shell_parse_int(v, 1, 86400, &secs) == 0)
			continue;
		else
			return usage_error("--receive: unexpected '%s'", a);
		if (end != NULL && (*end != '\0' || end == v))
			return usage_error("--receive: '%s' is not a number", v);
	}
	if (dest == NULL || bytes == UINT64_MAX || mode < 0 || mode > 07777 || argc % 2 == 0)
		return usage_error("%s", "--receive needs DEST, --bytes N and --mode OCTAL");
	/* A sender gone shows as a failed write, and the temporary file goes. */
	signal(SIGPIPE, SIG_IGN);
	if (stops_catch() != 0) {
		fprintf(stderr, "herd bcast: cannot create the pipe that tells of signals: %s\n",
			strerror(errno));
		return SHELL_EXIT_FAILURE;
	}
	st = herd_agent_bcast_receive(dest, bytes, (int)mode, forward,
				      program != NULL && program[0] != '\0' ? program : "herd",
				      secs * 1000, stop_pipe[0]);
	stops_raise();
	if (st != HERD_OK) {
		shell_message("herd bcast", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	return SHELL_EXIT_OK;
}

int cmd_bcast(int argc, char **argv)
{
	herd_bcast_opts o = HERD_BCAST_OPTS_INIT;
	const char *args[2] = { NULL, NULL };
	int nargs = 0, kinds = 0, secs = 0;

	if (argc > 1 && strcmp(argv[1], "--receive") == 0)
		return receive(argc, argv);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(bcast_usage, stdout);
			return SHELL_EXIT_OK;
		} else if (strcmp(a, "--hosts") == 0 || strcmp(a, "--hostfile") == 0) {
			if (i + 1 >= argc || argv[i + 1][0] == '\0')
				return usage_error("option '%s' needs a value", a);
			o.where = a[6] == 'f' ? HERD_JOB_HOSTFILE : HERD_JOB_HOSTS;
			o.hosts = argv[++i];
			kinds++;
		} else if (strcmp(a, "--slurm") == 0) {
			o.where = HERD_JOB_SLURM;
			kinds++;
		} else if (strcmp(a, "--timeout") == 0) {
			if (i + 1 >= argc || shell_parse_int(argv[i + 1], 1, 86400, &secs) != 0)
				return usage_error("--timeout takes whole seconds from 1 to 86400, not "
						   "'%s'", i + 1 < argc ? argv[i + 1] : "");
			o.timeout_ms = secs * 1000;
			i++;
		} else if (a[0] == '-' && a[1] != '\0') {
			return usage_error("unrecognized option '%s'", a);
		} else if (nargs < 2) {
			args[nargs++] = a;
		} else {
			return usage_error("unexpected argument '%s'", a);
		}
	}
	if (kinds > 1)
		return usage_error("%s", "--hosts, --hostfile and --slurm each name the nodes: give "
				   "one");
	if (kinds == 0) {
		const char *job = getenv("SLURM_JOB_ID");

		if (job == NULL || job[0] == '\0')
			return usage_error("%s", "which nodes? give --hosts, --hostfile or --slurm");
		o.where = HERD_JOB_SLURM;
	}
	if (nargs < 2)
		return usage_error("%s", "give FILE and DEST");
	if (args[1][0] != '/')
		return usage_error("DEST %s: give an absolute path (the nodes do not share this "
				   "directory)", args[1]);
	o.result = on_result;
	switch (herd_bcast(args[0], args[1], &o)) {
	case HERD_OK:
		return SHELL_EXIT_OK;
	case HERD_EPEER:
		/* The nodes were named one by one. */
		return SHELL_EXIT_FAILURE;
	case HERD_EINVAL:
	case HERD_EFORMAT:
	case HERD_ENOTFOUND:
	case HERD_EUNAVAIL:
		shell_message("herd bcast", shell_last_error());
		return SHELL_EXIT_USAGE;
	default:
		shell_message("herd bcast", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
}
