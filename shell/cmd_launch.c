/*
 * shell/cmd_launch.c - `herd launch`: run N ranks of a command on this node,
 * the nodes of a hostlist or hostfile (ssh) or a Slurm allocation, with
 * prefixed output, a first-failure summary and the failed rank's exit
 * status (herd_job_launch and friends).
 *
 * Signals: SIGINT, SIGTERM and SIGHUP are forwarded to every rank; the
 * second one stops the job (SIGTERM, then SIGKILL after the grace period).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

static const char usage_text[] =
	"usage: herd launch -n N [options] [--] CMD [ARGS...]\n"
	"Runs N ranks of CMD; every output line is prefixed [host:rank].  A CMD\n"
	"ending in .lua runs as `herd CMD`: Lua ranks.\n"
	"  -n, --np N              number of ranks (required)\n"
	"  --per-node K            ranks per node (default: fill each node's slots)\n"
	"  --hosts EXPR            run over ssh on a hostlist, e.g. node[01-04]\n"
	"  --hostfile FILE         run over ssh on the hosts of FILE (host slots=N)\n"
	"  --slurm                 run on the nodes of this Slurm allocation (srun)\n"
	"  --gpus-per-rank G       lease and bind G GPUs per rank\n"
	"  --restarts R            restart the whole job up to R times after a failure\n"
	"  --log-dir DIR           also write DIR/rank.N.out and DIR/rank.N.err\n"
	"  --timeout SEC           deadline for every rank to be started (default 60)\n"
	"  --grace SEC             SIGTERM to SIGKILL when stopping (default 5)\n"
	"  --prefix FMT            line prefix, %h host, %r rank (default \"[%h:%r] \")\n"
	"  --no-prefix             no prefix\n"
	"Exit status: 0 when every rank exited 0, else the first failed rank's\n"
	"(128+N for signal N, 127 when it could not be started); 1 or 2 when the\n"
	"job could not be launched.\n"
	"Every rank sees HERD_RANK, HERD_WORLD_SIZE, HERD_LOCAL_RANK, HERD_NODE_RANK,\n"
	"HERD_STORE, HERD_JOB_ID, HERD_JOB_SECRET, HERD_RESTART_COUNT and torchrun's\n"
	"RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (see README.md).\n";

enum {
	OPT_PER_NODE = 256, OPT_HOSTS, OPT_HOSTFILE, OPT_SLURM, OPT_GPUS, OPT_RESTARTS,
	OPT_LOG_DIR, OPT_TIMEOUT, OPT_GRACE, OPT_PREFIX, OPT_NO_PREFIX
};

static const struct option options[] = {
	{ "np", required_argument, NULL, 'n' },
	{ "per-node", required_argument, NULL, OPT_PER_NODE },
	{ "hosts", required_argument, NULL, OPT_HOSTS },
	{ "hostfile", required_argument, NULL, OPT_HOSTFILE },
	{ "slurm", no_argument, NULL, OPT_SLURM },
	{ "gpus-per-rank", required_argument, NULL, OPT_GPUS },
	{ "restarts", required_argument, NULL, OPT_RESTARTS },
	{ "log-dir", required_argument, NULL, OPT_LOG_DIR },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "grace", required_argument, NULL, OPT_GRACE },
	{ "prefix", required_argument, NULL, OPT_PREFIX },
	{ "no-prefix", no_argument, NULL, OPT_NO_PREFIX },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(sig_pipe[1], &c, 1) < 0) {
		/* Full: enough signals are pending. */
	}
	errno = saved;
}

static int parse_count(const char *opt, const char *v, int min, int *out)
{
	if (shell_parse_int(v, min, 1000000, out) != 0) {
		fprintf(stderr, "herd launch: %s %s: expected an integer of at least %d\n", opt, v,
			min);
		return -1;
	}
	return 0;
}

static int parse_seconds(const char *opt, const char *v, int *ms)
{
	char *end;
	double s;

	errno = 0;
	s = strtod(v, &end);
	if (end == v || *end != '\0' || errno != 0 || !isfinite(s) || s < 0 || s > 2.0e6) {
		fprintf(stderr, "herd launch: %s %s: expected a number of seconds\n", opt, v);
		return -1;
	}
	*ms = (int)ceil(s * 1000.0);
	if (*ms == 0)
		*ms = 1;  /* 0 would mean "the default" */
	return 0;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Every rank that could not be started says so, with its host and rank. */
static void report_failed_starts(const herd_job *job)
{
	for (int i = 0; i < herd_job_size(job); i++) {
		herd_rank_status r;

		if (herd_job_rank(job, i, &r) == HERD_OK && r.state == HERD_RANK_FAILED_START)
			fprintf(stderr, "herd launch: [%s:%d] %s\n", r.host, r.rank,
				r.error != NULL ? r.error : "failed to start");
	}
}

/* Waits for the job, forwarding signals; returns its exit status. */
static int supervise(herd_job *job)
{
	int status = 0, forwarded = 0;

	for (;;) {
		struct pollfd p = { .fd = sig_pipe[0], .events = POLLIN };
		herd_status st = herd_job_wait(job, 0, &status);

		if (st == HERD_OK)
			return status;
		if (st != HERD_ETIMEDOUT) {
			fprintf(stderr, "herd launch: %s\n", herd_last_error());
			return SHELL_EXIT_FAILURE;
		}
		if (poll(&p, 1, 100) > 0) {
			char sigs[16];
			ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));

			for (ssize_t i = 0; i < n; i++) {
				if (forwarded++ == 0) {
					herd_job_signal(job, sigs[i]);
					continue;
				}
				fprintf(stderr, "herd launch: stopping job %s\n", herd_job_id(job));
				herd_job_kill(job);
			}
		}
	}
}

int cmd_launch(int argc, char **argv)
{
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	const char **cmd = NULL;
	char self[PATH_MAX];
	int c, where_set = 0, status;
	herd_status st;
	herd_job *job = NULL;
	struct sigaction sa;
	static const int forward[] = { SIGINT, SIGTERM, SIGHUP };

	opterr = 0;
	optind = 1;
	/* "+": options end at the command, whose own options are its own. */
	while ((c = getopt_long(argc, argv, "+n:h", options, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_count("-n", optarg, 1, &spec.nranks) != 0)
				return SHELL_EXIT_USAGE;
			break;
		case OPT_PER_NODE:
			if (parse_count("--per-node", optarg, 1, &spec.per_node) != 0)
				return SHELL_EXIT_USAGE;
			break;
		case OPT_HOSTS:
		case OPT_HOSTFILE:
		case OPT_SLURM:
			if (where_set++) {
				fprintf(stderr, "herd launch: give one of --hosts, --hostfile and "
					"--slurm\n");
				return SHELL_EXIT_USAGE;
			}
			spec.where = c == OPT_HOSTS ? HERD_JOB_HOSTS
				     : c == OPT_HOSTFILE ? HERD_JOB_HOSTFILE : HERD_JOB_SLURM;
			spec.hosts = c == OPT_SLURM ? NULL : optarg;
			break;
		case OPT_GPUS:
			if (parse_count("--gpus-per-rank", optarg, 0, &spec.gpus_per_rank) != 0)
				return SHELL_EXIT_USAGE;
			break;
		case OPT_RESTARTS:
			if (parse_count("--restarts", optarg, 0, &spec.restarts) != 0)
				return SHELL_EXIT_USAGE;
			break;
		case OPT_LOG_DIR:
			spec.log_dir = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_seconds("--timeout", optarg, &spec.start_timeout_ms) != 0)
				return SHELL_EXIT_USAGE;
			break;
		case OPT_GRACE:
			if (parse_seconds("--grace", optarg, &spec.grace_ms) != 0)
				return SHELL_EXIT_USAGE;
			break;
		case OPT_PREFIX:
			spec.prefix = optarg;
			break;
		case OPT_NO_PREFIX:
			spec.prefix = "";
			break;
		case 'h':
			fputs(usage_text, stdout);
			return SHELL_EXIT_OK;
		default:
			fprintf(stderr, "herd launch: unknown option or missing value: %s\n%s",
				argv[optind - 1], usage_text);
			return SHELL_EXIT_USAGE;
		}
	}
	if (spec.nranks == 0 || optind >= argc) {
		fprintf(stderr, "herd launch: %s\n%s", spec.nranks == 0 ? "-n N is required"
			: "no command to run", usage_text);
		return SHELL_EXIT_USAGE;
	}
	if (spec.where == HERD_JOB_LOCAL) {
		/* Local nodes run this very program (`herd exec`, Lua ranks). */
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n > 0) {
			self[n] = '\0';
			spec.herd_program = self;
		}
	}
	cmd = calloc((size_t)(argc - optind) + 2, sizeof(*cmd));
	if (cmd == NULL) {
		fprintf(stderr, "herd launch: out of memory\n");
		return SHELL_EXIT_FAILURE;
	}
	{
		int k = 0;

		if (ends_with(argv[optind], ".lua")) {
			const char *prog = spec.herd_program ? spec.herd_program : getenv("HERD_PROGRAM");

			cmd[k++] = prog != NULL && prog[0] != '\0' ? prog : "herd";
		}
		for (int i = optind; i < argc; i++)
			cmd[k++] = argv[i];
		cmd[k] = NULL;
	}
	spec.argv = cmd;

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "herd launch: pipe: %s\n", strerror(errno));
		free(cmd);
		return SHELL_EXIT_FAILURE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forward) / sizeof(*forward); i++)
		sigaction(forward[i], &sa, NULL);
	/* A closed stdout shows as failed writes, not a dead launcher. */
	signal(SIGPIPE, SIG_IGN);

	st = herd_job_launch(&job, &spec);
	if (st != HERD_OK) {
		fprintf(stderr, "herd launch: %s\n", herd_last_error());
		free(cmd);
		return st == HERD_EINVAL || st == HERD_EFORMAT ? SHELL_EXIT_USAGE
							       : SHELL_EXIT_FAILURE;
	}
	status = supervise(job);
	report_failed_starts(job);
	if (herd_job_failure(job) != NULL)
		fprintf(stderr, "herd launch: job %s failed: %s\n", herd_job_id(job),
			herd_job_failure(job));
	herd_job_free(job);
	free(cmd);
	fflush(stdout);
	return status;
}
