/*
 * shell/cmd_launch.c - `herd launch`: run N ranks of a command on this node,
 * the nodes of a hostlist or hostfile (ssh) or a Slurm allocation, with
 * prefixed output, a first-failure summary and the failed rank's exit
 * status (herd_job_launch and friends).
 *
 * Signals: SIGINT, SIGTERM and SIGHUP are forwarded to every rank and end
 * the job (no restart follows them, herd_job_signal); the second one stops
 * it (SIGTERM, then SIGKILL after the grace period).
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

#include <jansson.h>

#include "herd.h"
#include "shell.h"

static const char usage_text[] =
	"usage: herd launch -n N [options] [--] CMD [ARGS...]\n"
	"Runs N ranks of CMD; every output line is prefixed [host:rank].  A CMD\n"
	"ending in .lua runs as `herd CMD`: Lua ranks; a CMD named herd runs this\n"
	"herd program (the one on the nodes' PATH or $HERD_PROGRAM over ssh and Slurm).\n"
	"  -n, --np N              number of ranks (required)\n"
	"  --per-node K            ranks per node (default: fill each node's slots)\n"
	"  --hosts EXPR            run over ssh on a hostlist, e.g. node[01-04]\n"
	"  --hostfile FILE         run over ssh on the hosts of FILE (host slots=N)\n"
	"  --slurm                 run on the nodes of this Slurm allocation (srun)\n"
	"  --gpus-per-rank G       lease and bind G GPUs per rank\n"
	"  --restarts R            restart the whole job up to R times after a failure\n"
	"                          (not after SIGINT, SIGTERM or SIGHUP to herd launch)\n"
	"  --env NAME=VALUE        set NAME in every rank's environment (repeatable);\n"
	"                          it wins over herd's own variables, as an exported\n"
	"                          MASTER_ADDR or MASTER_PORT does\n"
	"  -u, --unbuffered        ranks' stdout line-buffered (C stdio through\n"
	"                          coreutils' libstdbuf, PYTHONUNBUFFERED=1), so a\n"
	"                          rank that is killed loses no finished line\n"
	"  --log-dir DIR           also write DIR/rank.N.out and DIR/rank.N.err\n"
	"  --json-summary FILE     at the end, write the job's summary to FILE as JSON:\n"
	"                          job id, exit status, restarts, first failure, and\n"
	"                          each rank's host, pid, state, exit code or signal\n"
	"                          (a new file renamed over FILE; FILE must not be a\n"
	"                          device, FIFO or link: checked before the job runs)\n"
	"  --timeout SEC           deadline for every rank to be started (default 60)\n"
	"  --grace SEC             SIGTERM to SIGKILL when stopping (default 5)\n"
	"  --prefix FMT            line prefix, %h host, %r rank (default \"[%h:%r] \")\n"
	"  --no-prefix             no prefix\n"
	"  -l, --label             srun's prefix: \"RANK: \"\n"
	"Aliases for flags of torchrun and srun, with herd's meaning:\n"
	"  --nproc-per-node, --ntasks-per-node K   --per-node K\n"
	"  -N, --nodes, --nnodes M                 M nodes: -n is M times --per-node,\n"
	"                                          or --per-node is -n / M rounded up\n"
	"  --max-restarts R                        --restarts R (the whole job)\n"
	"  --gpus-per-task G                       --gpus-per-rank G\n"
	"  -w, --nodelist EXPR                     --hosts EXPR (over ssh, not srun)\n"
	"Exit status (as timeout(1) keeps its own apart from the command's):\n"
	"  0        every rank exited 0\n"
	"  N        the first failed rank's status: its exit code, 128+S for\n"
	"           signal S, 255 when its node was lost\n"
	"  125      herd launch itself failed: a usage error, a placement that\n"
	"           cannot be met, a node that cannot be reached at the start\n"
	"  126/127  a rank's command is not executable / not found\n"
	"Every rank sees HERD_RANK, HERD_WORLD_SIZE, HERD_LOCAL_RANK, HERD_NODE_RANK,\n"
	"HERD_STORE, HERD_JOB_ID, HERD_JOB_SECRET, HERD_RESTART_COUNT and torchrun's\n"
	"RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (see README.md).\n";

enum {
	OPT_PER_NODE = 256, OPT_HOSTS, OPT_HOSTFILE, OPT_SLURM, OPT_GPUS, OPT_RESTARTS,
	OPT_LOG_DIR, OPT_TIMEOUT, OPT_GRACE, OPT_PREFIX, OPT_NO_PREFIX, OPT_ENV, OPT_SUMMARY
};

static const struct option options[] = {
	{ "np", required_argument, NULL, 'n' },
	{ "per-node", required_argument, NULL, OPT_PER_NODE },
	{ "nproc-per-node", required_argument, NULL, OPT_PER_NODE },
	{ "ntasks-per-node", required_argument, NULL, OPT_PER_NODE },
	{ "hosts", required_argument, NULL, OPT_HOSTS },
	{ "nodelist", required_argument, NULL, OPT_HOSTS },
	{ "nodes", required_argument, NULL, 'N' },
	{ "nnodes", required_argument, NULL, 'N' },
	{ "hostfile", required_argument, NULL, OPT_HOSTFILE },
	{ "slurm", no_argument, NULL, OPT_SLURM },
	{ "gpus-per-rank", required_argument, NULL, OPT_GPUS },
	{ "gpus-per-task", required_argument, NULL, OPT_GPUS },
	{ "restarts", required_argument, NULL, OPT_RESTARTS },
	{ "max-restarts", required_argument, NULL, OPT_RESTARTS },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "unbuffered", no_argument, NULL, 'u' },
	{ "log-dir", required_argument, NULL, OPT_LOG_DIR },
	{ "json-summary", required_argument, NULL, OPT_SUMMARY },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "grace", required_argument, NULL, OPT_GRACE },
	{ "prefix", required_argument, NULL, OPT_PREFIX },
	{ "no-prefix", no_argument, NULL, OPT_NO_PREFIX },
	{ "label", no_argument, NULL, 'l' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* The launcher's variables that ranks keep when exported: torchrun's
 * contract names a user may set for a program that expects them. */
static const char *const kept_exports[] = { "MASTER_ADDR", "MASTER_PORT" };

/* herd launch's own failures, apart from its ranks' statuses (timeout(1)
 * and env(1) use 125 for theirs). */
#define LAUNCH_EXIT_OWN 125

/* What -u adds: coreutils' stdbuf library line-buffers C stdio. */
#define STDBUF_LIB "/usr/libexec/coreutils/libstdbuf.so"

/* The rank environment entries of the command line, NULL-terminated;
 * owned[] holds those built here. */
struct env_list {
	const char **v;
	char *owned[2];
	size_t n, cap, nowned;
};

static int env_add(struct env_list *e, const char *entry)
{
	if (e->n + 2 > e->cap) {
		size_t nc = e->cap ? 2 * e->cap : 16;
		const char **nv = realloc(e->v, nc * sizeof(*nv));

		if (nv == NULL)
			return -1;
		e->v = nv;
		e->cap = nc;
	}
	e->v[e->n++] = entry;
	e->v[e->n] = NULL;
	return 0;
}

static int env_has(const struct env_list *e, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, len) == 0 && e->v[i][len] == '=')
			return 1;
	return 0;
}

/* The entry "NAME=value" of this process's environment, or NULL. */
static const char *environ_entry(const char *name)
{
	size_t len = strlen(name);

	for (char **e = environ; *e != NULL; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=' && (*e)[len + 1] != '\0')
			return *e;
	return NULL;
}

/*
 * Adds NAME=ADD joined to this process's value of NAME (ADD first when
 * first, with ':' between), unless --env set NAME.  -1 when out of memory.
 */
static int env_extend(struct env_list *e, const char *name, const char *add, bool first)
{
	const char *old = getenv(name);
	size_t len = strlen(name) + strlen(add) + (old != NULL ? strlen(old) : 0) + 3;
	char *entry;

	if (env_has(e, name) || e->nowned == sizeof(e->owned) / sizeof(e->owned[0]))
		return 0;
	if (old == NULL)
		old = "";
	entry = malloc(len);
	if (entry == NULL)
		return -1;
	e->owned[e->nowned++] = entry;
	snprintf(entry, len, "%s=%s%s%s", name, first ? add : old,
		 old[0] != '\0' ? ":" : "", first ? old : add);
	return env_add(e, entry);
}

/* Exported MASTER_*, then what -u needs, after the --env entries (which
 * win).  -1 when out of memory. */
static int env_finish(struct env_list *e, int unbuffered)
{
	static const char *const unbuffered_env[] = { "_STDBUF_O=L", "PYTHONUNBUFFERED=1" };

	for (size_t i = 0; i < sizeof(kept_exports) / sizeof(*kept_exports); i++) {
		const char *entry = environ_entry(kept_exports[i]);

		if (entry != NULL && !env_has(e, kept_exports[i]) && env_add(e, entry) != 0)
			return -1;
	}
	if (!unbuffered)
		return 0;
	for (size_t i = 0; i < sizeof(unbuffered_env) / sizeof(*unbuffered_env); i++)
		if (env_add(e, unbuffered_env[i]) != 0)
			return -1;
	if (access(STDBUF_LIB, R_OK) != 0) {
		fprintf(stderr, "herd launch: -u: %s is missing (Debian coreutils): C programs "
			"keep their stdout buffered; Python's is unbuffered\n", STDBUF_LIB);
		return 0;
	}
	/* A rank built with AddressSanitizer refuses to start when another
	 * library is loaded before its runtime; libstdbuf only sets the
	 * buffering of stdout, so that check is turned off. */
	if (env_extend(e, "LD_PRELOAD", STDBUF_LIB, true) != 0 ||
	    env_extend(e, "ASAN_OPTIONS", "verify_asan_link_order=0", false) != 0)
		return -1;
	return 0;
}

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

/* The largest count a launch option takes (ranks, nodes, GPUs, restarts). */
#define COUNT_MAX 1000000
/* The longest --timeout and --grace: about 23 days. */
#define SECONDS_MAX 2.0e6

static int parse_count(const char *opt, const char *v, int min, int *out)
{
	if (shell_parse_int(v, min, COUNT_MAX, out) != 0) {
		fprintf(stderr, "herd launch: %s %s: expected a whole number from %d to %d\n",
			opt, v, min, COUNT_MAX);
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
	if (end == v || *end != '\0' || errno != 0 || !isfinite(s) || s < 0 || s > SECONDS_MAX) {
		fprintf(stderr, "herd launch: %s %s: expected a number of seconds from 0 to %.0f\n",
			opt, v, SECONDS_MAX);
		return -1;
	}
	*ms = (int)ceil(s * 1000.0);
	if (*ms == 0)
		*ms = 1;  /* 0 would mean "the default" */
	return 0;
}

/* Every rank that could not be started says so, with its host and rank. */
static void report_failed_starts(const herd_job *job)
{
	for (int i = 0; i < herd_job_size(job); i++) {
		herd_job_rank_status r;

		if (herd_job_rank(job, i, &r) == HERD_OK && r.state == HERD_JOB_RANK_FAILED_START)
			fprintf(stderr, "herd launch: [%s:%d] %s\n", r.host, r.rank,
				r.error != NULL ? r.error : "failed to start");
	}
}

/* Waits for the job, forwarding signals; returns its exit status.  Sleeps
 * on the job's descriptor and the signal pipe, with no period. */
static int supervise(herd_job *job)
{
	int status = 0, forwarded = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = sig_pipe[0], .events = POLLIN },
				       { .fd = herd_job_fd(job), .events = POLLIN } };
		herd_status st = herd_job_wait(job, 0, &status);

		if (st == HERD_OK)
			return status;
		if (st != HERD_ETIMEDOUT) {
			fprintf(stderr, "herd launch: %s\n", herd_last_error());
			return LAUNCH_EXIT_OWN;
		}
		if (poll(p, 2, -1) > 0 && (p[0].revents & POLLIN)) {
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

/*
 * --json-summary: the job's end as JSON in path (job NULL: it did not
 * start, and error says why), written as every result file of herd is: a
 * new file renamed over path (herd_file_write).  0, or -1 (said) when the
 * file cannot be written.
 */
static int write_summary(const char *path, const herd_job *job, int status, const char *error)
{
	json_t *ranks = json_array(), *doc;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	for (int i = 0; job != NULL && i < herd_job_size(job); i++) {
		herd_job_rank_status r;

		if (herd_job_rank(job, i, &r) != HERD_OK)
			continue;
		json_array_append_new(ranks, json_pack(
			"{s:i, s:i, s:i, s:o, s:o, s:s, s:o, s:o, s:o}", "rank", r.rank, "node_rank",
			r.node_rank, "local_rank", r.local_rank, "host", shell_json_str(r.host),
			"pid", r.pid > 0 ? json_integer(r.pid) : json_null(), "state",
			herd_job_rank_state_name(r.state),
			"exit_code",
			r.state == HERD_JOB_RANK_EXITED || r.state == HERD_JOB_RANK_FAILED_START
				? json_integer(r.exit_code) : json_null(),
			"signal", r.signal > 0 ? json_integer(r.signal) : json_null(),
			"error", shell_json_str(r.error)));
	}
	doc = json_pack("{s:i, s:o, s:b, s:i, s:o, s:o, s:o}", "v", 1, "job_id",
			shell_json_str(job != NULL ? herd_job_id(job) : NULL), "started", job != NULL,
			"exit_status", status, "restarts",
			job != NULL ? json_integer(herd_job_restart_count(job)) : json_null(),
			"failure", shell_json_str(job != NULL ? herd_job_failure(job) : error),
			"ranks", ranks);
	f = open_memstream(&text, &len);
	if (f == NULL) {
		fprintf(stderr, "herd launch: --json-summary %s: %s\n", path, strerror(errno));
		json_decref(doc);
		return -1;
	}
	rc = shell_json_write(f, doc);
	if (fclose(f) != 0 || rc != 0) {
		fprintf(stderr, "herd launch: --json-summary %s: out of memory\n", path);
		rc = -1;
	} else if (herd_file_write(path, text, len, 0644) != HERD_OK) {
		fprintf(stderr, "herd launch: --json-summary %s\n", herd_last_error());
		rc = -1;
	}
	free(text);
	return rc;
}

/*
 * libherd's message with the spec's field names as the options that set
 * them ("herd_job_spec.hosts" -> "--hosts"), into buf.
 */
static const char *in_options(const char *msg, const herd_job_spec *spec, char *buf, size_t cap)
{
	static const struct { const char *field, *option; } names[] = {
		{ "herd_job_spec.nranks", "-n" },
		{ "herd_job_spec.per_node", "--per-node" },
		{ "herd_job_spec.gpus_per_rank", "--gpus-per-rank" },
		{ "herd_job_spec.restarts", "--restarts" },
		{ "herd_job_spec.env", "--env" },
		{ "herd_job_spec.log_dir", "--log-dir" },
		{ "herd_job_spec.prefix", "--prefix" },
		{ "herd_job_spec.argv", "the command" },
	};
	size_t k = 0;

	for (const char *p = msg; *p != '\0' && k + 1 < cap;) {
		const char *with = NULL;
		size_t skip = 0;

		if (strncmp(p, "herd_job_spec.hosts", 19) == 0) {
			with = spec->where == HERD_JOB_HOSTFILE ? "--hostfile" : "--hosts";
			skip = 19;
		}
		for (size_t i = 0; with == NULL && i < sizeof(names) / sizeof(*names); i++)
			if (strncmp(p, names[i].field, strlen(names[i].field)) == 0) {
				with = names[i].option;
				skip = strlen(names[i].field);
			}
		if (with == NULL) {
			buf[k++] = *p++;
			continue;
		}
		k += (size_t)snprintf(buf + k, cap - k, "%s", with);
		if (k >= cap)
			k = cap - 1;
		p += skip;
	}
	buf[k] = '\0';
	return buf;
}

/* One line and a hint, as a usage error says it. */
static int usage_error(const char *fmt, const char *arg)
{
	fputs("herd launch: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'herd launch --help' for more information.\n", stderr);
	return -1;
}

/*
 * The command line into spec and e.  0, 1 for --help (printed), -1 for a
 * usage error (said).
 */
static int parse_args(int argc, char **argv, herd_job_spec *spec, struct env_list *e,
		      int *unbuffered, const char **summary)
{
	int c, li, where_set = 0, nodes = 0;
	char opt[40];

	opterr = 0;
	optind = 1;
	/* "+": options end at the command, whose own options are its own. */
	while ((li = -1, c = getopt_long(argc, argv, "+n:N:w:ulh", options, &li)) != -1) {
		/* The option as the user typed it, for messages (aliases too). */
		if (li >= 0)
			snprintf(opt, sizeof(opt), "--%s", options[li].name);
		else
			snprintf(opt, sizeof(opt), "-%c", c);
		switch (c) {
		case 'n':
			if (parse_count(opt, optarg, 1, &spec->nranks) != 0)
				return -1;
			break;
		case OPT_PER_NODE:
			if (parse_count(opt, optarg, 1, &spec->per_node) != 0)
				return -1;
			break;
		case 'N':
			if (parse_count(opt, optarg, 1, &nodes) != 0)
				return -1;
			break;
		case 'w':
			c = OPT_HOSTS;
			/* fall through */
		case OPT_HOSTS:
		case OPT_HOSTFILE:
		case OPT_SLURM:
			if (where_set++)
				return usage_error("give one of --hosts (-w), --hostfile and "
						   "--slurm%s", "");
			spec->where = c == OPT_HOSTS ? HERD_JOB_HOSTS
				      : c == OPT_HOSTFILE ? HERD_JOB_HOSTFILE : HERD_JOB_SLURM;
			spec->hosts = c == OPT_SLURM ? NULL : optarg;
			break;
		case OPT_GPUS:
			if (parse_count(opt, optarg, 0, &spec->gpus_per_rank) != 0)
				return -1;
			break;
		case OPT_RESTARTS:
			if (parse_count(opt, optarg, 0, &spec->restarts) != 0)
				return -1;
			break;
		case OPT_LOG_DIR:
			spec->log_dir = optarg;
			break;
		case OPT_SUMMARY:
			if (optarg[0] == '\0')
				return usage_error("--json-summary needs a file name%s", "");
			/* Before the job runs: a run is not lost to a path that
			 * cannot take its summary. */
			if (herd_file_check(optarg) != HERD_OK) {
				fprintf(stderr, "herd launch: --json-summary %s\n", herd_last_error());
				return -1;
			}
			*summary = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_seconds("--timeout", optarg, &spec->start_timeout_ms) != 0)
				return -1;
			break;
		case OPT_GRACE:
			if (parse_seconds("--grace", optarg, &spec->grace_ms) != 0)
				return -1;
			break;
		case OPT_PREFIX:
			spec->prefix = optarg;
			break;
		case OPT_NO_PREFIX:
			spec->prefix = "";
			break;
		case 'l':
			spec->prefix = "%r: ";
			break;
		case 'u':
			*unbuffered = 1;
			break;
		case OPT_ENV:
			if (strchr(optarg, '=') == NULL || optarg[0] == '=')
				return usage_error("--env %s: expected NAME=VALUE", optarg);
			if (env_add(e, optarg) != 0)
				return usage_error("out of memory%s", "");
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 1;
		default:
			return usage_error("unknown option or missing value: %s", argv[optind - 1]);
		}
	}
	/* torchrun's --nnodes and srun's -N: so many nodes, the ranks spread
	 * evenly (-n from them and --per-node when -n is not given). */
	if (nodes > 0 && spec->nranks == 0 && spec->per_node > 0)
		spec->nranks = nodes * spec->per_node;
	else if (nodes > 0 && spec->nranks > 0 && spec->per_node == 0)
		spec->per_node = (spec->nranks + nodes - 1) / nodes;
	if (nodes > 0 && spec->nranks > nodes * spec->per_node)
		return usage_error("-n is more than -N/--nodes times --per-node%s", "");
	if (spec->nranks == 0)
		return usage_error("-n N is required (or -N M with --per-node K)%s", "");
	if (optind >= argc)
		return usage_error("no command to run%s", "");
	return 0;
}

int cmd_launch(int argc, char **argv)
{
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct env_list extra = { NULL, { NULL, NULL }, 0, 0, 0 };
	const char **cmd = NULL, *summary = NULL;
	char self[PATH_MAX];
	int rc, unbuffered = 0, status = LAUNCH_EXIT_OWN;
	herd_status st;
	herd_job *job = NULL;
	struct sigaction sa;
	static const int forward[] = { SIGINT, SIGTERM, SIGHUP };

	rc = parse_args(argc, argv, &spec, &extra, &unbuffered, &summary);
	if (rc != 0) {
		status = rc > 0 ? SHELL_EXIT_OK : LAUNCH_EXIT_OWN;
		goto out;
	}
	/* Local nodes run this very program (`herd exec`, Lua ranks). */
	if (spec.where == HERD_JOB_LOCAL)
		spec.herd_program = shell_self_program(self, sizeof(self));
	cmd = shell_rank_argv(argc - optind, argv + optind, spec.herd_program);
	if (cmd == NULL || env_finish(&extra, unbuffered) != 0) {
		fprintf(stderr, "herd launch: out of memory\n");
		goto out;
	}
	spec.argv = cmd;
	spec.env = extra.v;
	spec.output = herd_job_output_stdio;

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "herd launch: cannot create the pipe that tells of signals: %s\n",
			strerror(errno));
		goto out;
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
		char msg[2048];

		in_options(herd_last_error(), &spec, msg, sizeof(msg));
		fprintf(stderr, "herd launch: %s\n", msg);
		if (summary != NULL)
			write_summary(summary, NULL, status, msg);
		goto out;
	}
	status = supervise(job);
	report_failed_starts(job);
	if (herd_job_failure(job) != NULL)
		fprintf(stderr, "herd launch: job %s failed: %s\n", herd_job_id(job),
			herd_job_failure(job));
	if (summary != NULL && write_summary(summary, job, status, NULL) != 0 && status == 0)
		status = LAUNCH_EXIT_OWN;
	herd_job_free(job);
	fflush(stdout);
out:
	free(cmd);
	free(extra.v);
	for (size_t i = 0; i < extra.nowned; i++)
		free(extra.owned[i]);
	return status;
}
