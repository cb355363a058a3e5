/*
 * shell/cmd_launch.c - `herd launch`: run N ranks of a command on this node,
 * the nodes of a hostlist or hostfile (ssh) or a Slurm allocation, with
 * prefixed output, a first-failure summary and the failed rank's exit
 * status (herd_job_launch and friends).
 *
 * Signals: SIGINT, SIGTERM and SIGHUP interrupt the job: each goes to
 * every rank, ranks still running after the grace period get SIGKILL, no
 * restart follows, and herd launch exits 128 + the signal
 * (herd_job_interrupt); another within KILL_WINDOW_MS kills what is left
 * at once, as srun's second Ctrl-C does.
 */
#include <dirent.h>
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
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "herd.h"
#include "herd/k8s.h"
#include "shell.h"

static const char usage_text[] =
	"usage: herd launch -n N [options] [--] CMD [ARGS...]\n"
	"Runs N ranks of CMD; every output line is prefixed [host:rank].  A CMD\n"
	"ending in .lua runs as `herd CMD`: Lua ranks; a CMD named herd runs this\n"
	"herd program (the one on the nodes' PATH or $HERD_PROGRAM over ssh and Slurm).\n"
	"Options are never abbreviated: a prefix of one is refused.\n"
	"  -n, --np N              number of ranks (required, unless -N and --per-node\n"
	"                          give it, or --per-node alone on this node)\n"
	"  --per-node K            ranks per node (default: fill each node's slots);\n"
	"                          without -n or -N on this node: K ranks\n"
	"  --hosts EXPR            run over ssh on a hostlist, e.g. node[01-04]\n"
	"  --hostfile FILE         run over ssh on the hosts of FILE (host slots=N)\n"
	"  --slurm                 run on the nodes of this Slurm allocation (srun)\n"
	"  --k8s --dry-run         print the job as Kubernetes objects (a Secret, a\n"
	"                          headless Service, an Indexed Job of -n / --per-node\n"
	"                          pods) for kubectl apply -f -, and run nothing\n"
	"  --image IMAGE           with --k8s: the pods' image, with herd in it\n"
	"  --namespace NS          with --k8s: the objects' namespace\n"
	"  --job-name NAME         with --k8s: their name (default herd-XXXXXXXX)\n"
	"  --k8s-set PATH=VALUE    with --k8s: nodeSelector.KEY=V,\n"
	"                          toleration=KEY[=V]:EFFECT, requests.NAME=Q,\n"
	"                          limits.NAME=Q, serviceAccountName=N,\n"
	"                          priorityClassName=N, schedulerName=N, label.KEY=V,\n"
	"                          annotation.KEY=V (repeatable)\n"
	"  --pods EXPR             the pods of a Kubernetes Job, a hostlist of their\n"
	"                          names, each of which connects back (herd k8s node\n"
	"                          runs this in pod 0; herd k8s manifest)\n"
	"  --nodes MIN-MAX         elastic: on MIN to MAX of the nodes, --per-node K\n"
	"                          ranks each (default 1; no -n: the world size\n"
	"                          follows the nodes); the nodes beyond MAX are\n"
	"                          spares; a node at fault is excluded and the job\n"
	"                          restarts on the rest (--restarts R) while MIN\n"
	"                          remain (torchrun's --nnodes MIN:MAX too)\n"
	"  --health-check[=1|2]    before any rank starts, every node runs herd health\n"
	"                          at that level (default 1) and refuses the job when\n"
	"                          a GPU of it fails a check; the launch then fails\n"
	"                          (125) naming the node and the checks; with --hosts\n"
	"                          or --hostfile, first the fabric check of herd\n"
	"                          discover --links: a node whose every link is slow\n"
	"                          is refused alike; refused nodes go on herd\n"
	"                          exclude's list (an elastic job runs without them)\n"
	"  --exclude EXPR          give no rank to the nodes of EXPR (a hostlist), as\n"
	"                          srun --exclude; the nodes of herd exclude's list\n"
	"                          are always left out\n"
	"  --gpus-per-rank G       lease and bind G GPUs per rank\n"
	"  --grid SPEC             print the parallel grid the ranks would get\n"
	"                          (tp=4,pp=2; laid as a running job's, the worst\n"
	"                          link of each group, --gpus-per-rank planned on\n"
	"                          this node's inventory for every node) and run\n"
	"                          nothing\n"
	"  --grid-order ORDER      its dimensions' order, innermost first (default\n"
	"                          Megatron's tp-cp-ep-dp-pp)\n"
	"  --restarts R            restart the whole job up to R times after a failure\n"
	"                          (not after a signal to herd launch or the time limit)\n"
	"  --ckpt-peers K          keep K copies of each rank's checkpoint data in\n"
	"                          other nodes' memory (with --hosts or --hostfile):\n"
	"                          a holder (herd ckpt hold) runs on every node for\n"
	"                          the job's life, and a restart restores from it\n"
	"                          when it holds a step at least as new as storage's\n"
	"  --env NAME=VALUE        set NAME in every rank's environment (repeatable);\n"
	"                          it wins over herd's own variables, as an exported\n"
	"                          MASTER_ADDR or MASTER_PORT does; --env NAME passes\n"
	"                          this process's value of NAME\n"
	"  -u, --unbuffered        ranks' stdout line-buffered (C stdio through\n"
	"                          coreutils' libstdbuf, PYTHONUNBUFFERED=1), so a\n"
	"                          rank that is killed loses no finished line\n"
	"  --log-dir DIR           also write DIR/rank.N.out and DIR/rank.N.err\n"
	"  --json-summary FILE     at the end, write the job's summary to FILE as JSON:\n"
	"                          job id, exit status, state, time limit, restarts,\n"
	"                          first failure, and each rank's host, pid, state,\n"
	"                          exit code or signal (a new file renamed over\n"
	"                          FILE; FILE must not be a device, FIFO or link:\n"
	"                          checked before the job runs)\n"
	"  --monitor               sample this node's ranks while the job runs (CPU use\n"
	"                          of each rank's processes; its GPUs' utilization,\n"
	"                          memory and power) and print a summary at the end:\n"
	"                          per rank mean and p5/p50/p95 GPU utilization, GPU\n"
	"                          memory peak, idle time, CPU use; GPU-hours held\n"
	"                          and used; warnings (docs/telemetry.md)\n"
	"  --monitor-period MS     milliseconds between samples (default 1000, from 10)\n"
	"  --monitor-out DIR       --monitor, and write DIR/series.csv, series.json,\n"
	"                          summary.json, an SVG plot per metric and\n"
	"                          report.html, a page that needs no network\n"
	"  -t, --time LIMIT        the job's wall-clock limit as srun writes it:\n"
	"                          minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or\n"
	"                          D-HH:MM:SS; it counts from the start of the ranks\n"
	"                          and restarts do not reset it.  At the limit the\n"
	"                          ranks are stopped (SIGTERM, SIGKILL after --grace)\n"
	"  --timeout SEC           the same limit in seconds (mpirun's --timeout)\n"
	"  --start-timeout SEC     deadline for every rank to be started (default 60)\n"
	"  --grace SEC             SIGTERM to SIGKILL when stopping (default 5)\n"
	"  --prefix FMT            line prefix, %h host, %r rank (default \"[%h:%r] \")\n"
	"  --no-prefix             no prefix\n"
	"  -l, --label             srun's prefix: \"RANK: \"\n"
	"  -h, --help              this help\n"
	"Flags of torchrun, mpirun and srun, with herd's meaning (with '_' for '-'\n"
	"too, as torchrun writes them):\n"
	"  --nproc-per-node, --ntasks-per-node, --npernode, -npernode K\n"
	"                               --per-node K\n"
	"  -N, --nodes, --nnodes M      M nodes: -n is M times --per-node, or\n"
	"                               --per-node is -n / M rounded up\n"
	"  --standalone                 -N 1\n"
	"  --ntasks N, -np N            -n N\n"
	"  -x NAME[=VALUE]              --env NAME[=VALUE]\n"
	"  -hostfile, --machinefile, -machinefile F\n"
	"                               --hostfile F\n"
	"  --max-restarts R             --restarts R (the whole job)\n"
	"  --gpus-per-task G            --gpus-per-rank G\n"
	"  -w, --nodelist EXPR          --hosts EXPR (over ssh, not srun)\n"
	"  --tag-output                 the default prefix\n"
	"  --no-python                  nothing: CMD runs as given\n"
	"Refused, naming the option of herd launch that does the job: torchrun's\n"
	"--rdzv-endpoint, --rdzv-backend, --rdzv-id, --master-addr, --master-port,\n"
	"--node-rank, -m/--module; mpirun's -H/--host/-host, --map-by, --bind-to,\n"
	"--rank-by; srun's -c/--cpus-per-task, -G/--gpus, --gpus-per-node, --gres,\n"
	"-p/--partition, -A/--account, -o/--output, --export, --mpi.\n"
	"Signals: SIGINT (Ctrl-C), SIGTERM or SIGHUP to herd launch goes to every\n"
	"rank and ends the job: no restart, and ranks still running after --grace\n"
	"get SIGKILL; another within 3 s kills them at once.\n"
	"Exit status (as timeout(1) keeps its own apart from the command's):\n"
	"  0        every rank exited 0\n"
	"  N        the first failed rank's status: its exit code, 128+S for\n"
	"           signal S, 255 when its node was lost\n"
	"  124      the time limit (--time, --timeout) was reached\n"
	"  125      herd launch itself failed: a usage error, a placement that\n"
	"           cannot be met, a node that cannot be reached at the start\n"
	"           or fails --health-check;\n"
	"           or every rank exited 0 but --json-summary or --monitor-out\n"
	"           could not be written\n"
	"  126/127  a rank's command is not executable / not found\n"
	"  128+S    herd launch was interrupted by signal S: 130 SIGINT, 143\n"
	"           SIGTERM, 129 SIGHUP (unless a rank had failed before)\n"
	"Every rank sees HERD_RANK, HERD_WORLD_SIZE, HERD_LOCAL_RANK, HERD_NODE_RANK,\n"
	"HERD_STORE, HERD_JOB_ID, HERD_JOB_SECRET, HERD_RESTART_COUNT and torchrun's\n"
	"RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (see README.md).\n"
	"Every job is recorded when it ends in the accounting log that herd acct\n"
	"lists ($HERD_ACCT_LOG, else ${XDG_STATE_HOME:-~/.local/state}/herd/acct.jsonl).\n";

enum {
	OPT_PER_NODE = 256, OPT_HOSTS, OPT_HOSTFILE, OPT_SLURM, OPT_GPUS, OPT_RESTARTS,
	OPT_CKPT_PEERS,
	OPT_LOG_DIR, OPT_TIMEOUT, OPT_START_TIMEOUT, OPT_GRACE, OPT_PREFIX, OPT_NO_PREFIX,
	OPT_ENV, OPT_SUMMARY, OPT_STANDALONE, OPT_TAG_OUTPUT, OPT_NO_PYTHON, OPT_MONITOR,
	OPT_MONITOR_PERIOD, OPT_MONITOR_OUT, OPT_EXCLUDE, OPT_HEALTH, OPT_GRID, OPT_GRID_ORDER,
	OPT_PODS, OPT_K8S, OPT_DRY_RUN, OPT_IMAGE, OPT_NAMESPACE, OPT_K8S_SET, OPT_JOB_NAME
};

static const char short_options[] = "+n:N:w:t:ulh";

static const struct option options[] = {
	{ "np", required_argument, NULL, 'n' },
	{ "ntasks", required_argument, NULL, 'n' },
	{ "per-node", required_argument, NULL, OPT_PER_NODE },
	{ "nproc-per-node", required_argument, NULL, OPT_PER_NODE },
	{ "ntasks-per-node", required_argument, NULL, OPT_PER_NODE },
	{ "npernode", required_argument, NULL, OPT_PER_NODE },
	{ "hosts", required_argument, NULL, OPT_HOSTS },
	{ "nodelist", required_argument, NULL, OPT_HOSTS },
	{ "nodes", required_argument, NULL, 'N' },
	{ "nnodes", required_argument, NULL, 'N' },
	{ "standalone", no_argument, NULL, OPT_STANDALONE },
	{ "hostfile", required_argument, NULL, OPT_HOSTFILE },
	{ "slurm", no_argument, NULL, OPT_SLURM },
	{ "pods", required_argument, NULL, OPT_PODS },
	{ "k8s", no_argument, NULL, OPT_K8S },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "namespace", required_argument, NULL, OPT_NAMESPACE },
	{ "k8s-set", required_argument, NULL, OPT_K8S_SET },
	{ "job-name", required_argument, NULL, OPT_JOB_NAME },
	{ "exclude", required_argument, NULL, OPT_EXCLUDE },
	{ "health-check", optional_argument, NULL, OPT_HEALTH },
	{ "gpus-per-rank", required_argument, NULL, OPT_GPUS },
	{ "gpus-per-task", required_argument, NULL, OPT_GPUS },
	{ "grid", required_argument, NULL, OPT_GRID },
	{ "grid-order", required_argument, NULL, OPT_GRID_ORDER },
	{ "restarts", required_argument, NULL, OPT_RESTARTS },
	{ "max-restarts", required_argument, NULL, OPT_RESTARTS },
	{ "ckpt-peers", required_argument, NULL, OPT_CKPT_PEERS },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "unbuffered", no_argument, NULL, 'u' },
	{ "log-dir", required_argument, NULL, OPT_LOG_DIR },
	{ "json-summary", required_argument, NULL, OPT_SUMMARY },
	{ "monitor", no_argument, NULL, OPT_MONITOR },
	{ "monitor-period", required_argument, NULL, OPT_MONITOR_PERIOD },
	{ "monitor-out", required_argument, NULL, OPT_MONITOR_OUT },
	{ "time", required_argument, NULL, 't' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "start-timeout", required_argument, NULL, OPT_START_TIMEOUT },
	{ "grace", required_argument, NULL, OPT_GRACE },
	{ "prefix", required_argument, NULL, OPT_PREFIX },
	{ "no-prefix", no_argument, NULL, OPT_NO_PREFIX },
	{ "tag-output", no_argument, NULL, OPT_TAG_OUTPUT },
	{ "label", no_argument, NULL, 'l' },
	{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

#define HOSTS_INSTEAD "herd launch takes --hosts EXPR (a hostlist: node[01-04], or a,b,c) or " \
	"--hostfile FILE (host slots=N lines)"
#define NODES_GIVE "give the nodes with --hosts, --hostfile or --slurm"
#define PLACE_INSTEAD "herd launch fills each node's slots in rank order, --per-node K at a " \
	"time, and with --gpus-per-rank G binds each rank to its GPUs' NUMA node"
#define ALLOC_INSTEAD "run herd launch --slurm inside an allocation that has it (salloc " \
	"... herd launch --slurm ...)"
#define CPUS_SAY "srun's CPUs per task; herd launch has no CPU count per rank: with " \
	"--gpus-per-rank G each rank is bound to its GPUs' NUMA node"
#define GPUS_SAY "srun's GPU count for the whole job; herd launch takes --gpus-per-rank G"
#define OUTPUT_SAY "srun's output file; herd launch writes every rank's output to " \
	"DIR/rank.N.out and .err with --log-dir DIR"
#define RDZV_SAY "torchrun's rendezvous; herd launch hosts the job's rendezvous itself: " \
	NODES_GIVE

/* Flags of mpirun, srun and torchrun that herd launch reads as its own
 * (single-dash words that getopt_long would take for -n p), or answers
 * with the option that does the job. */
static const shell_habit habits[] = {
	{ "-np", true, "-n", NULL },
	{ "-x", true, "--env", NULL },
	{ "-hostfile", true, "--hostfile", NULL },
	{ "-machinefile", true, "--hostfile", NULL },
	{ "--machinefile", true, "--hostfile", NULL },
	{ "-npernode", true, "--per-node", NULL },
	{ "-H", true, NULL, "mpirun's host list; " HOSTS_INSTEAD },
	{ "--host", true, NULL, "mpirun's host list; " HOSTS_INSTEAD },
	{ "-host", true, NULL, "mpirun's host list; " HOSTS_INSTEAD },
	{ "--map-by", true, NULL, "mpirun's placement; " PLACE_INSTEAD },
	{ "--bind-to", true, NULL, "mpirun's binding; " PLACE_INSTEAD },
	{ "--rank-by", true, NULL, "mpirun's rank order; " PLACE_INSTEAD },
	{ "-c", true, NULL, CPUS_SAY },
	{ "--cpus-per-task", true, NULL, CPUS_SAY },
	{ "--gpus", true, NULL, GPUS_SAY },
	{ "-G", true, NULL, GPUS_SAY },
	{ "--gpus-per-node", true, NULL, "srun's GPUs per node; herd launch takes "
	  "--gpus-per-rank G (a node of K ranks gets K*G)" },
	{ "--gres", true, NULL, "srun's generic resources; herd launch takes --gpus-per-rank G "
	  "for GPUs" },
	{ "-p", true, NULL, "srun's partition; " ALLOC_INSTEAD },
	{ "--partition", true, NULL, "srun's partition; " ALLOC_INSTEAD },
	{ "-A", true, NULL, "srun's account; " ALLOC_INSTEAD },
	{ "--account", true, NULL, "srun's account; " ALLOC_INSTEAD },
	{ "-o", true, NULL, OUTPUT_SAY },
	{ "--output", true, NULL, OUTPUT_SAY },
	{ "--mpi", true, NULL, "srun's MPI plugin; herd launch needs none: it gives each rank "
	  "its rendezvous itself (HERD_RANK, HERD_WORLD_SIZE, HERD_STORE and torchrun's RANK, "
	  "WORLD_SIZE, MASTER_ADDR)" },
	{ "--export", true, NULL, "srun's environment list; herd launch takes --env NAME=VALUE "
	  "or --env NAME (repeatable), and its ranks inherit this environment" },
	{ "--rdzv-endpoint", true, NULL, RDZV_SAY },
	{ "--rdzv-backend", true, NULL, RDZV_SAY },
	{ "--rdzv-id", true, NULL, RDZV_SAY },
	{ "--master-addr", true, NULL, "torchrun's; herd launch sets MASTER_ADDR (the first "
	  "node) and MASTER_PORT itself, and an exported one or --env MASTER_ADDR=HOST wins" },
	{ "--master-port", true, NULL, "torchrun's; herd launch sets MASTER_ADDR and "
	  "MASTER_PORT (a free port) itself, and an exported one or --env MASTER_PORT=P wins" },
	{ "--node-rank", true, NULL, "torchrun's, for a command run on each node; herd "
	  "launch starts every node itself: " NODES_GIVE },
	{ "-m", false, NULL, "torchrun's module flag; herd launch runs CMD as given: "
	  "herd launch ... python -m MODULE" },
	{ "--module", false, NULL, "torchrun's module flag; herd launch runs CMD as given: "
	  "herd launch ... python -m MODULE" },
	{ NULL, false, NULL, NULL }
};

/* The launcher's variables that ranks keep when exported: torchrun's
 * contract names a user may set for a program that expects them. */
static const char *const kept_exports[] = { "MASTER_ADDR", "MASTER_PORT" };

/* herd launch's own failures, apart from its ranks' statuses (timeout(1)
 * and env(1) use 125 for theirs). */
#define LAUNCH_EXIT_OWN 125

/* --health-check's fabric check: herd probe's deadline per node, the bytes
 * each way per pair (a quick check: a quarter of herd discover --links'),
 * the seconds per node the check may take. */
#define GATE_PROBE_MS 10000
#define GATE_LINK_BYTES ((size_t)16 << 20)
#define GATE_LINK_S 60

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

/* The entry "NAME=value" of this process's environment, or NULL; with
 * empty, one with an empty value too. */
static const char *environ_entry(const char *name, bool empty)
{
	size_t len = strlen(name);

	for (char **e = environ; *e != NULL; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=' &&
		    (empty || (*e)[len + 1] != '\0'))
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
		const char *entry = environ_entry(kept_exports[i], false);

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

/* The read end of the pipe that tells of the signals forwarded to the job. */
static int sig_fd = -1;

/* The largest count a launch option takes (ranks, nodes, GPUs, restarts). */
#define COUNT_MAX 1000000
/* The longest --timeout and --grace: about 23 days. */
#define SECONDS_MAX 2.0e6
/* --monitor-period: the sampler's shortest period, and an hour. */
#define MONITOR_MS_MIN 10
#define MONITOR_MS_MAX 3600000
#define MONITOR_MS_DEFAULT 1000

static int usage_error(const char *fmt, const char *arg);

static int parse_count(const char *opt, const char *v, int min, int *out)
{
	char msg[256];

	if (shell_parse_int(v, min, COUNT_MAX, out) != 0) {
		snprintf(msg, sizeof(msg), "%s %s: expected a whole number from %d to %d", opt, v,
			 min, COUNT_MAX);
		return usage_error("%s", msg);
	}
	return 0;
}

/* Seconds into *ms; 0 is 1 ms (0 would mean "the default"), or with
 * zero_none 0 (no limit). */
static int parse_seconds(const char *opt, const char *v, int *ms, bool zero_none)
{
	char *end, msg[256];
	double s;

	errno = 0;
	s = strtod(v, &end);
	if (end == v || *end != '\0' || errno != 0 || !isfinite(s) || s < 0 || s > SECONDS_MAX) {
		snprintf(msg, sizeof(msg), "%s %s: expected a number of seconds from 0 to %.0f", opt,
			 v, SECONDS_MAX);
		return usage_error("%s", msg);
	}
	*ms = (int)ceil(s * 1000.0);
	if (*ms == 0 && !zero_none)
		*ms = 1;
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

/* How long after an interrupt another one kills the ranks at once. */
#define KILL_WINDOW_MS 3000

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *signal_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

/*
 * Waits for the job, sleeping on its descriptor and the signal pipe, with
 * no period; returns its exit status.  A signal interrupts the job
 * (herd_job_interrupt); another within KILL_WINDOW_MS kills its ranks at
 * once; one after that window opens a new one.
 */
static int supervise(herd_job *job)
{
	int status = 0;
	bool interrupted = false;
	int64_t window = 0;    /* until when another signal kills */

	for (;;) {
		struct pollfd p[2] = { { .fd = sig_fd, .events = POLLIN },
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
			ssize_t n = read(sig_fd, sigs, sizeof(sigs));

			for (ssize_t i = 0; i < n; i++) {
				const char *name = signal_name(sigs[i]);

				if (window > 0 && now_ms() < window) {
					fprintf(stderr, "herd launch: %s again: killing the ranks of job "
						"%s\n", name, herd_job_id(job));
					herd_job_interrupt(job, sigs[i]);
					window = 0;
					continue;
				}
				if (!interrupted)
					herd_job_interrupt(job, sigs[i]);
				interrupted = true;
				window = now_ms() + KILL_WINDOW_MS;
				fprintf(stderr, "herd launch: %s: stopping job %s (one more within %d s "
					"kills its ranks at once)\n", name, herd_job_id(job),
					KILL_WINDOW_MS / 1000);
			}
		}
	}
}

/*
 * --json-summary: the job's end as JSON in path (job NULL: it did not
 * start, and error says why), with its time limit (0: none) and how it
 * ended (state), written as every result file of herd is: a
 * new file renamed over path (herd_file_write).  0, or -1 (said) when the
 * file cannot be written.
 */
static int write_summary(const char *path, const herd_job *job, int time_limit_ms, int status,
			 const char *error)
{
	json_t *ranks = json_array(), *nodes = json_array(), *doc;
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
	for (size_t i = 0; job != NULL && i < herd_job_nodes(job); i++) {
		herd_job_node_status n;

		if (herd_job_node(job, i, &n) != HERD_OK)
			continue;
		json_array_append_new(nodes, json_pack("{s:s, s:s, s:o}", "host", n.host, "role",
						       herd_job_node_role_name(n.role), "why",
						       shell_json_str(n.why)));
	}
	doc = json_pack("{s:i, s:o, s:b, s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "v", 1, "job_id",
			shell_json_str(job != NULL ? herd_job_id(job) : NULL), "started", job != NULL,
			"exit_status", status, "state",
			shell_json_str(job != NULL ? herd_job_state_name(herd_job_get_state(job))
				       : NULL),
			"time_limit_s", time_limit_ms > 0 ? json_real(time_limit_ms / 1000.0)
			: json_null(), "restarts",
			job != NULL ? json_integer(herd_job_restart_count(job)) : json_null(),
			"failure", shell_json_str(job != NULL ? herd_job_failure(job) : error),
			"ranks", ranks, "nodes", nodes);
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
 * The job's end: the monitor's summary and files (a report that cannot be
 * written turns a status of 0 into LAUNCH_EXIT_OWN, as --json-summary
 * does), then its record in the accounting log, with the job's own status.
 */
static void account(const herd_job *job, const herd_job_spec *spec, shell_monitor *mon,
		    const char *out_dir, int argc, const char *const *argv, double start,
		    double elapsed, int job_status, int *status)
{
	shell_acct_job a = { .job = job, .argc = argc, .argv = argv,
			     .gpus = herd_job_size(job) * spec->gpus_per_rank, .start = start,
			     .elapsed = elapsed, .exit_status = job_status,
			     .gpu_hours_used = NAN };

	if (mon != NULL && shell_monitor_finish(mon, out_dir, elapsed, a.gpus, &a.gpu_hours_used,
						&a.gpus) != 0 && *status == 0)
		*status = LAUNCH_EXIT_OWN;
	shell_acct_append(&a);
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
		{ "herd_job_spec.min_nodes", "--nodes MIN" },
		{ "herd_job_spec.max_nodes", "--nodes MAX" },
		{ "herd_job_spec.gpus_per_rank", "--gpus-per-rank" },
		{ "herd_job_spec.restarts", "--restarts" },
		{ "herd_job_spec.ckpt_peers", "--ckpt-peers" },
		{ "herd_job_spec.time_limit_ms", "--time" },
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

/* --env NAME=VALUE, or --env NAME (mpirun's -x NAME): this process's
 * value.  0, or -1 (said). */
static int env_option(struct env_list *e, const char *opt, const char *v)
{
	const char *entry = v;
	char msg[512];

	if (v[0] == '=' || v[0] == '\0') {
		snprintf(msg, sizeof(msg), "%s %s: expected NAME=VALUE (or NAME: this process's "
			 "value)", opt, v);
		return usage_error("%s", msg);
	}
	if (strchr(v, '=') == NULL) {
		entry = environ_entry(v, true);
		if (entry == NULL) {
			snprintf(msg, sizeof(msg), "%s %s: %s is not set here; give %s=VALUE", opt, v,
				 v, v);
			return usage_error("%s", msg);
		}
	}
	if (env_add(e, entry) != 0)
		return usage_error("out of memory%s", "");
	return 0;
}

/* What the command line says beside the spec. */
#define K8S_SET_MAX 256

struct launch_args {
	int unbuffered;
	const char *summary;
	int nodes;             /* -N, --nnodes, --standalone; 0 none */
	int min_nodes, max_nodes;  /* --nodes MIN-MAX; 0 none */
	char nodes_opt[64], nodes_arg[64];  /* ... as typed, for messages */
	const char *limit_opt; /* the option that set the time limit */
	bool monitor;          /* --monitor, --monitor-out */
	int monitor_ms;        /* --monitor-period; 0: the default */
	const char *monitor_out;
	herd_grid_dim grid[HERD_GRID_MAX_DIMS];  /* --grid: print it, run nothing */
	size_t ngrid;
	const char *grid_order;
	/* --k8s: the job's Kubernetes objects (--dry-run: printed) */
	bool k8s, dry_run;
	const char *image, *namespace_, *job_name;
	const char *k8s_set[K8S_SET_MAX + 1];
	size_t nk8s_set;
};

/*
 * -N/--nodes/--nnodes: M nodes, or MIN-MAX (srun) and MIN:MAX (torchrun),
 * an elastic job; MIN equal to MAX is M nodes.
 */
static int nodes_option(const char *opt, const char *v, struct launch_args *la)
{
	const char *sep = v[0] != '\0' ? strpbrk(v + 1, "-:") : NULL;
	char lo[32], msg[256];
	int min, max;

	if (sep == NULL)
		return parse_count(opt, v, 1, &la->nodes);
	snprintf(lo, sizeof(lo), "%.*s", (int)(sep - v) < 31 ? (int)(sep - v) : 31, v);
	if (shell_parse_int(lo, 1, COUNT_MAX, &min) != 0 ||
	    shell_parse_int(sep + 1, 1, COUNT_MAX, &max) != 0 || max < min) {
		snprintf(msg, sizeof(msg), "%s %s: expected M, or MIN-MAX (MIN:MAX) with 1 <= "
			 "MIN <= MAX <= %d", opt, v, COUNT_MAX);
		return usage_error("%s", msg);
	}
	if (min == max) {
		la->nodes = min;
		return 0;
	}
	la->min_nodes = min;
	la->max_nodes = max;
	snprintf(la->nodes_opt, sizeof(la->nodes_opt), "%s", opt);
	snprintf(la->nodes_arg, sizeof(la->nodes_arg), "%s", v);
	return 0;
}

/*
 * The command line into spec and e; the command is argv + *cmd_at.  0, 1
 * for --help (printed), -1 for a usage error (said).
 */
static int parse_args(shell_args *a, herd_job_spec *spec, struct env_list *e,
		      struct launch_args *la, int *cmd_at)
{
	int c, li, where_set = 0, n;
	char opt[64];

	opterr = 0;
	optind = 1;
	/* "+": options end at the command, whose own options are its own. */
	while ((li = -1, c = getopt_long(a->argc, a->argv, short_options, options, &li)) != -1) {
		/* The option as the user typed it, for messages (aliases too). */
		shell_args_option(a, options, c, li, opt, sizeof(opt));
		switch (c) {
		case 'n':
			if (parse_count(opt, optarg, 1, &n) != 0)
				return -1;
			/* -n, --np, --ntasks and -np are one option */
			if (spec->nranks != 0 && spec->nranks != n) {
				char msg[160];

				snprintf(msg, sizeof(msg), "%s %s: the number of ranks is %d already",
					 opt, optarg, spec->nranks);
				return usage_error("%s", msg);
			}
			spec->nranks = n;
			break;
		case OPT_PER_NODE:
			if (parse_count(opt, optarg, 1, &spec->per_node) != 0)
				return -1;
			break;
		case 'N':
			if (nodes_option(opt, optarg, la) != 0)
				return -1;
			break;
		case OPT_STANDALONE:
			la->nodes = 1;
			break;
		case 'w':
			c = OPT_HOSTS;
			/* fall through */
		case OPT_HOSTS:
		case OPT_HOSTFILE:
		case OPT_SLURM:
		case OPT_PODS:
			if (where_set++)
				return usage_error("give one of --hosts (-w), --hostfile, --slurm and "
						   "--pods%s", "");
			spec->where = c == OPT_HOSTS ? HERD_JOB_HOSTS
				      : c == OPT_HOSTFILE ? HERD_JOB_HOSTFILE
				      : c == OPT_PODS ? HERD_JOB_K8S : HERD_JOB_SLURM;
			spec->hosts = c == OPT_SLURM ? NULL : optarg;
			break;
		case OPT_EXCLUDE:
			spec->exclude = optarg;
			break;
		case OPT_GRID:
			if (herd_grid_parse(optarg, la->grid, HERD_GRID_MAX_DIMS, &la->ngrid) != HERD_OK)
				return usage_error("--grid: %s", shell_last_error());
			break;
		case OPT_GRID_ORDER:
			la->grid_order = optarg;
			break;
		case OPT_K8S:
			la->k8s = true;
			break;
		case OPT_DRY_RUN:
			la->dry_run = true;
			break;
		case OPT_IMAGE:
			la->image = optarg;
			break;
		case OPT_NAMESPACE:
			la->namespace_ = optarg;
			break;
		case OPT_JOB_NAME:
			la->job_name = optarg;
			break;
		case OPT_K8S_SET:
			if (la->nk8s_set == K8S_SET_MAX)
				return usage_error("--k8s-set: at most %s", "256");
			la->k8s_set[la->nk8s_set++] = optarg;
			break;
		case OPT_HEALTH:
			if (optarg == NULL)
				spec->health_check = 1;
			else if (strcmp(optarg, "1") == 0 || strcmp(optarg, "2") == 0)
				spec->health_check = optarg[0] - '0';
			else
				return usage_error("--health-check=%s: the level is 1 or 2", optarg);
			break;
		case OPT_GPUS:
			if (parse_count(opt, optarg, 0, &spec->gpus_per_rank) != 0)
				return -1;
			break;
		case OPT_RESTARTS:
			if (parse_count(opt, optarg, 0, &spec->restarts) != 0)
				return -1;
			break;
		case OPT_CKPT_PEERS:
			if (parse_count(opt, optarg, 1, &spec->ckpt_peers) != 0)
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
			la->summary = optarg;
			break;
		case 't':
		case OPT_TIMEOUT:
			/* --time and --timeout are one limit, in srun's and mpirun's
			 * words. */
			if (la->limit_opt != NULL && strcmp(la->limit_opt, opt) != 0) {
				char msg[160];

				snprintf(msg, sizeof(msg), "%s and %s both set the job's time limit; "
					 "give one", la->limit_opt, opt);
				return usage_error("%s", msg);
			}
			la->limit_opt = c == 't' ? (li >= 0 ? "--time" : "-t") : "--timeout";
			if (c == OPT_TIMEOUT) {
				if (parse_seconds(opt, optarg, &spec->time_limit_ms, true) != 0)
					return -1;
			} else if (shell_parse_time_limit(optarg, (int)SECONDS_MAX * 1000,
							  &spec->time_limit_ms) != 0) {
				char msg[256];

				snprintf(msg, sizeof(msg), "%s %s: expected srun's minutes, MM:SS, "
					 "HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, at most 23-03:33:20",
					 opt, optarg);
				return usage_error("%s", msg);
			}
			break;
		case OPT_MONITOR:
			la->monitor = true;
			break;
		case OPT_MONITOR_PERIOD:
			if (shell_parse_int(optarg, MONITOR_MS_MIN, MONITOR_MS_MAX,
					    &la->monitor_ms) != 0) {
				char msg[160];

				snprintf(msg, sizeof(msg), "%s %s: expected milliseconds from %d to %d",
					 opt, optarg, MONITOR_MS_MIN, MONITOR_MS_MAX);
				return usage_error("%s", msg);
			}
			break;
		case OPT_MONITOR_OUT:
			if (optarg[0] == '\0')
				return usage_error("%s needs a directory", opt);
			la->monitor = true;
			la->monitor_out = optarg;
			break;
		case OPT_START_TIMEOUT:
			if (parse_seconds(opt, optarg, &spec->start_timeout_ms, false) != 0)
				return -1;
			break;
		case OPT_GRACE:
			if (parse_seconds(opt, optarg, &spec->grace_ms, false) != 0)
				return -1;
			break;
		case OPT_PREFIX:
			spec->prefix = optarg;
			break;
		case OPT_NO_PREFIX:
			spec->prefix = "";
			break;
		case OPT_TAG_OUTPUT:
			spec->prefix = NULL;
			break;
		case OPT_NO_PYTHON:
			break;
		case 'l':
			spec->prefix = "%r: ";
			break;
		case 'u':
			la->unbuffered = 1;
			break;
		case OPT_ENV:
			if (env_option(e, opt, optarg) != 0)
				return -1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 1;
		default:
			/* shell_args_check has said what it refuses */
			return usage_error("unrecognized option or missing value: %s",
					   a->argv[optind - 1]);
		}
	}
	if (la->monitor_ms > 0 && !la->monitor)
		return usage_error("--monitor-period needs --monitor or --monitor-out%s", "");
	/* An elastic job: its world size follows its nodes. */
	if (la->max_nodes > 0) {
		char msg[256];

		if (spec->nranks != 0) {
			snprintf(msg, sizeof(msg), "%s %s with -n %d: an elastic job's world size "
				 "follows its nodes (--per-node K times the nodes in); give "
				 "--per-node instead of -n", la->nodes_opt, la->nodes_arg,
				 spec->nranks);
			return usage_error("%s", msg);
		}
		if (spec->where == HERD_JOB_LOCAL) {
			snprintf(msg, sizeof(msg), "%s %s: an elastic job runs on --hosts, "
				 "--hostfile or --slurm", la->nodes_opt, la->nodes_arg);
			return usage_error("%s", msg);
		}
		if (la->nodes > 0) {
			snprintf(msg, sizeof(msg), "%s %s and a fixed number of nodes (-N, --nodes, "
				 "--nnodes, --standalone): give one", la->nodes_opt, la->nodes_arg);
			return usage_error("%s", msg);
		}
		if (spec->per_node == 0)
			spec->per_node = 1;
		spec->min_nodes = la->min_nodes;
		spec->max_nodes = la->max_nodes;
	}
	/* torchrun's --nproc-per-node K alone (its --nnodes is 1 unless
	 * given): one node of K ranks, on this node. */
	if (la->max_nodes == 0 && la->nodes == 0 && spec->nranks == 0 && spec->per_node > 0 &&
	    spec->where == HERD_JOB_LOCAL)
		la->nodes = 1;
	/* torchrun's --nnodes and srun's -N: so many nodes, the ranks spread
	 * evenly (-n from them and --per-node when -n is not given). */
	if (la->nodes > 0 && spec->nranks == 0 && spec->per_node > 0)
		spec->nranks = la->nodes * spec->per_node;
	else if (la->nodes > 0 && spec->nranks > 0 && spec->per_node == 0)
		spec->per_node = (spec->nranks + la->nodes - 1) / la->nodes;
	if (la->nodes > 0 && spec->nranks > la->nodes * spec->per_node)
		return usage_error("-n is more than -N/--nodes times --per-node%s", "");
	if (spec->nranks == 0 && la->max_nodes == 0)
		return usage_error("-n N is required (or -N M with --per-node K)%s", "");
	if (!la->k8s && (la->dry_run || la->image || la->namespace_ || la->job_name ||
			 la->nk8s_set > 0))
		return usage_error("%s goes with --k8s", la->dry_run ? "--dry-run"
				   : la->image ? "--image" : la->namespace_ ? "--namespace"
				   : la->job_name ? "--job-name" : "--k8s-set");
	if (la->k8s && where_set)
		return usage_error("--k8s runs the ranks in a Kubernetes Job's pods: --hosts, "
				   "--hostfile, --slurm and --pods do not go with it%s", "");
	/* What the pods' command does not carry is refused, not dropped. */
	if (la->k8s) {
		const char *no = la->limit_opt != NULL ? la->limit_opt
				 : spec->log_dir != NULL ? "--log-dir"
				 : la->summary != NULL ? "--json-summary"
				 : la->monitor ? "--monitor"
				 : spec->start_timeout_ms > 0 ? "--start-timeout"
				 : spec->grace_ms > 0 ? "--grace"
				 : spec->prefix != NULL ? "--prefix, --no-prefix or -l"
				 : la->unbuffered ? "-u"
				 : spec->ckpt_peers > 0 ? "--ckpt-peers"
				 : spec->health_check > 0 ? "--health-check"
				 : spec->exclude != NULL ? "--exclude"
				 : la->ngrid > 0 ? "--grid" : NULL;

		if (no != NULL)
			return usage_error("--k8s: %s is not carried into the Job's pods (herd k8s "
					   "node runs them with herd's defaults)", no);
	}
	if (la->k8s && la->max_nodes > 0)
		return usage_error("--k8s: an elastic job (%s MIN-MAX) is not one Indexed Job",
				   la->nodes_opt);
	if (la->k8s && !la->dry_run)
		return usage_error("--k8s prints the job's objects with --dry-run; submit them "
				   "with kubectl apply -f -%s", "");
	if (la->k8s && la->image == NULL)
		return usage_error("--k8s needs --image IMAGE, the pods' image with herd in it%s",
				   "");
	if (optind >= a->argc)
		return usage_error("no command to run%s", "");
	*cmd_at = optind;
	return 0;
}

/* ---- --grid ---------------------------------------------------------------- */

/*
 * Each rank's GPUs where --gpus-per-rank is given: planned, as each node
 * plans its own ranks' (herd launch leases them the same way), on this
 * node's inventory (HERD_INVENTORY, else this node) taken for every
 * node's; a plan per number of ranks on a node.  -1 after saying why when
 * they cannot be planned, as the launch would fail.
 */
static int grid_gpus(const herd_job_spec *spec, shell_grid_ranks *g, herd_plan **plans,
		     const herd_plan **plan, size_t *index, size_t *base)
{
	herd_cluster *cluster = NULL;
	int rc = 0;

	if (spec->gpus_per_rank <= 0)
		return 0;
	if (herd_cluster_discover(&cluster, NULL) != HERD_OK) {
		fprintf(stderr, "herd launch: --grid: GPUs for the ranks: %s\n", shell_last_error());
		return -1;
	}
	for (int r = 0; r < g->n && rc == 0; r++) {
		int k = 0, local = 0;

		for (int q = 0; q < g->n; q++)
			if (strcmp(g->hosts[q], g->hosts[r]) == 0) {
				local += q < r;
				k++;
			}
		if (plans[k] == NULL) {
			herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
			herd_alloc_opts ao = HERD_ALLOC_OPTS_INIT;

			req.gpus_per_rank = spec->gpus_per_rank;
			req.gpus = spec->gpus_per_rank * k;
			req.link = HERD_ALLOC_LINK_SAME_NODE;
			ao.plan_only = true;
			if (herd_alloc(&plans[k], cluster, &req, &ao) != HERD_OK) {
				fprintf(stderr, "herd launch: --grid: %d GPUs for %d ranks on %s: %s\n",
					req.gpus, k, g->hosts[r], shell_last_error());
				rc = -1;
				continue;
			}
		}
		plan[r] = plans[k];
		index[r] = (size_t)local;
		base[r] = (size_t)local * (size_t)spec->gpus_per_rank;
	}
	g->plan = plan;
	g->index = index;
	g->base = base;
	herd_cluster_free(cluster);
	return rc;
}

/* herd launch --grid: the grid the job's ranks would get; nothing runs. */
static int print_launch_grid(const herd_job_spec *spec, const struct launch_args *la)
{
	char **hosts = NULL, msg[2048];
	herd_plan **plans = NULL;
	const herd_plan **plan = NULL;
	size_t *index = NULL, *base = NULL;
	shell_grid_ranks g = { 0 };
	int n = 0, status = LAUNCH_EXIT_OWN;

	if (herd_job_place(spec, &hosts, &n) != HERD_OK) {
		fprintf(stderr, "herd launch: %s\n", in_options(herd_last_error(), spec, msg,
								sizeof(msg)));
		return LAUNCH_EXIT_OWN;
	}
	g.n = n;
	g.hosts = (const char **)hosts;
	plans = calloc((size_t)n + 1, sizeof(*plans));
	plan = calloc((size_t)n + 1, sizeof(*plan));
	index = calloc((size_t)n + 1, sizeof(*index));
	base = calloc((size_t)n + 1, sizeof(*base));
	if (plans == NULL || plan == NULL || index == NULL || base == NULL) {
		fprintf(stderr, "herd launch: out of memory\n");
		goto out;
	}
	if (grid_gpus(spec, &g, plans, plan, index, base) != 0)
		goto out;
	if (shell_grid_print("launch", "--grid: %s", la->grid, la->ngrid, la->grid_order, &g,
			     NULL) == SHELL_EXIT_OK)
		status = SHELL_EXIT_OK;
out:
	for (int k = 0; plans != NULL && k <= n; k++)
		herd_plan_free(plans[k]);
	free(plans);
	free(plan);
	free(index);
	free(base);
	free(hosts);
	return status;
}

/* ---- --k8s ------------------------------------------------------------------ */

/* herd launch --k8s --dry-run: the job's Kubernetes objects, printed. */
static int print_k8s(const herd_job_spec *spec, const struct env_list *e,
		     const struct launch_args *la, const char *const *argv)
{
	herd_k8s_opts o = HERD_K8S_OPTS_INIT;
	char name[64], id[HERD_STORE_SECRET_BUF], *yaml = NULL;
	const char **env = calloc(e->n + 1, sizeof(*env));
	int per_node = spec->per_node > 0 ? spec->per_node : 1;

	if (env == NULL) {
		fprintf(stderr, "herd launch: out of memory\n");
		return LAUNCH_EXIT_OWN;
	}
	for (size_t i = 0; i < e->n; i++)
		env[i] = e->v[i];
	if (spec->nranks % per_node != 0) {
		free(env);
		char msg[128];

		snprintf(msg, sizeof(msg), "--k8s: -n %d is not a multiple of --per-node %d: a pod "
			 "holds --per-node ranks", spec->nranks, per_node);
		usage_error("%s", msg);
		return LAUNCH_EXIT_OWN;
	}
	o.nodes = spec->nranks / per_node;
	o.per_node = per_node;
	o.gpus_per_rank = spec->gpus_per_rank;
	o.restarts = spec->restarts;
	o.image = la->image;
	o.namespace_ = la->namespace_;
	o.argv = argv;
	o.env = env;
	o.set = la->k8s_set;
	o.name = la->job_name;
	if (o.name == NULL) {
		/* herd-XXXXXXXX, drawn: a name Kubernetes takes. */
		if (herd_store_secret_generate(id) != HERD_OK) {
			free(env);
			fprintf(stderr, "herd launch: %s\n", shell_last_error());
			return LAUNCH_EXIT_OWN;
		}
		snprintf(name, sizeof(name), "herd-%.8s", id);
		o.name = name;
	}
	if (herd_k8s_manifest(&o, &yaml) != HERD_OK) {
		free(env);
		usage_error("--k8s: %s", shell_last_error());
		return LAUNCH_EXIT_OWN;
	}
	fputs(yaml, stdout);
	free(yaml);
	free(env);
	return SHELL_EXIT_OK;
}

/* Whether host is among v[0..n) or names[0..nnames). */
static bool excluded(const char *host, const herd_exclude_entry *v, size_t n, char **names,
		     size_t nnames)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].host, host) == 0)
			return true;
	for (size_t i = 0; i < nnames; i++)
		if (strcmp(names[i], host) == 0)
			return true;
	return false;
}

/*
 * --health-check's fabric check, over ssh: the nodes that answer herd
 * probe and are not excluded measure each other as herd discover --links
 * does (GATE_LINK_BYTES each way); a node whose every link is slow goes on
 * the excluded nodes' list, and the check's report to stderr.  A fixed job
 * is then refused (-1, said); an elastic one runs without it (0).  Fewer
 * than three nodes name no culprit: nothing is checked.
 */
static int fabric_gate(const herd_job_spec *spec)
{
	herd_cluster_discover_opts d = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *c = NULL;
	herd_exclude_entry *v = NULL;
	char **extra = NULL, culprits[1024] = "", *text = NULL;
	const char **names = NULL;
	size_t nv = 0, nextra = 0, n = 0, len = 0;
	FILE *report = NULL;
	int rc = 0;

	if (spec->where == HERD_JOB_HOSTS)
		d.hosts = spec->hosts;
	else
		d.hostfile = spec->hosts;
	d.timeout_ms = GATE_PROBE_MS;
	if (herd_cluster_discover(&c, &d) != HERD_OK)
		return 0;   /* none answers: the launch says so */
	if (herd_exclude_list(&v, &nv) != HERD_OK)
		nv = 0;
	if (spec->exclude != NULL && herd_hostlist_expand(spec->exclude, &extra, &nextra) != HERD_OK)
		nextra = 0;
	names = calloc(herd_cluster_node_count(c) + 1, sizeof(*names));
	for (size_t i = 0; names != NULL && i < herd_cluster_node_count(c); i++) {
		const herd_node *node = NULL;

		if (herd_cluster_node(c, i, &node) == HERD_OK &&
		    !excluded(node->hostname, v, nv, extra, nextra))
			names[n++] = node->hostname;
	}
	if (n >= 3 && (report = open_memstream(&text, &len)) != NULL) {
		links_run(names, n, false, GATE_LINK_BYTES, GATE_LINK_S, report, culprits,
			  sizeof(culprits));
		fclose(report);
	}
	if (culprits[0] != '\0') {
		static const char reason[] = "the fabric check: every link of it is slow";

		fprintf(stderr, "herd launch: --health-check: the fabric check:%s", text);
		if (herd_exclude_add(culprits, reason, NULL) != HERD_OK)
			fprintf(stderr, "herd launch: %s\n", herd_last_error());
		fprintf(stderr, spec->max_nodes > 0 ? "herd launch: node %s excluded: %s\n"
			: "herd launch: node %s: %s (herd exclude rm takes it back)\n",
			culprits, reason);
		rc = spec->max_nodes > 0 ? 0 : -1;
	}
	free(text);
	free(names);
	herd_free(v);
	herd_free(extra);
	herd_cluster_free(c);
	return rc;
}

/* Whether dir holds a flight recorder (*.trace). */
static bool has_traces(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;

	while (d != NULL && !found && (de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		found = n > 6 && strcmp(de->d_name + n - 6, ".trace") == 0;
	}
	if (d != NULL)
		closedir(d);
	return found;
}

int cmd_launch(int argc, char **argv)
{
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct env_list extra = { NULL, { NULL, NULL }, 0, 0, 0 };
	struct launch_args la = { 0 };
	shell_args args;
	const char **cmd = NULL;
	char self[PATH_MAX];
	int rc, cmd_at = 0, status = LAUNCH_EXIT_OWN;
	herd_status st;
	herd_job *job = NULL;
	shell_monitor *mon = NULL;
	double start, t0, elapsed;
	int job_status;
	static const int forward[] = { SIGINT, SIGTERM, SIGHUP };

	/* Every option in full, and other tools' flags read or answered,
	 * before getopt_long would take a prefix for an option. */
	rc = shell_args_check("launch", argc, argv, short_options, options, habits, &args);
	if (rc == 0)
		rc = parse_args(&args, &spec, &extra, &la, &cmd_at);
	else
		rc = -1;
	if (rc != 0) {
		status = rc > 0 ? SHELL_EXIT_OK : LAUNCH_EXIT_OWN;
		goto out;
	}
	if (la.k8s) {
		status = print_k8s(&spec, &extra, &la, (const char *const *)args.argv + cmd_at);
		goto out;
	}
	/* Local nodes run this very program (`herd exec`, Lua ranks). */
	if (spec.where == HERD_JOB_LOCAL)
		spec.herd_program = shell_self_program(self, sizeof(self));
	cmd = shell_rank_argv(args.argc - cmd_at, args.argv + cmd_at, spec.herd_program);
	if (cmd == NULL || env_finish(&extra, la.unbuffered) != 0) {
		fprintf(stderr, "herd launch: out of memory\n");
		goto out;
	}
	spec.argv = cmd;
	spec.env = extra.v;
	spec.output = herd_job_output_stdio;
	if (la.ngrid > 0) {
		status = print_launch_grid(&spec, &la);
		goto out;
	}
	/* The monitor's directory and sampler before the job: a run is not
	 * lost to a report that cannot be made. */
	if (la.monitor_out != NULL && shell_monitor_prepare_dir(la.monitor_out) != 0)
		goto out;
	if (la.monitor && shell_monitor_create(&mon, la.monitor_ms > 0 ? la.monitor_ms
					       : MONITOR_MS_DEFAULT,
					       spec.where) != 0)
		goto out;

	sig_fd = shell_signals_catch("herd launch", forward, sizeof(forward) / sizeof(*forward));
	if (sig_fd < 0)
		goto out;
	/* A closed stdout shows as failed writes, not a dead launcher. */
	signal(SIGPIPE, SIG_IGN);

	if (spec.health_check > 0 &&
	    (spec.where == HERD_JOB_HOSTS || spec.where == HERD_JOB_HOSTFILE) &&
	    fabric_gate(&spec) != 0)
		goto out;
	start = shell_wall_time();
	t0 = shell_mono_time();
	st = herd_job_launch(&job, &spec);
	if (st != HERD_OK) {
		char msg[2048];

		in_options(herd_last_error(), &spec, msg, sizeof(msg));
		fprintf(stderr, "herd launch: %s\n", msg);
		if (la.summary != NULL)
			write_summary(la.summary, NULL, spec.time_limit_ms, status, msg);
		goto out;
	}
	if (mon != NULL && shell_monitor_start(mon, job, start) != 0) {
		shell_monitor_free(mon);
		mon = NULL;
	}
	status = supervise(job);
	elapsed = shell_mono_time() - t0;
	job_status = status;
	report_failed_starts(job);
	/* A rank's failure, or how else it ended: the time limit, an
	 * interrupt, a stop. */
	if (herd_job_failure(job) != NULL)
		fprintf(stderr, herd_job_get_state(job) == HERD_JOB_FAILED
			? "herd launch: job %s failed: %s\n" : "herd launch: job %s: %s\n",
			herd_job_id(job), herd_job_failure(job));
	/* The nodes the job excluded, and why. */
	for (size_t i = 0; i < herd_job_nodes(job); i++) {
		herd_job_node_status n;

		if (herd_job_node(job, i, &n) == HERD_OK && n.role == HERD_JOB_NODE_OUT &&
		    n.since > 0)
			fprintf(stderr, "herd launch: job %s: node %s was excluded: %s\n",
				herd_job_id(job), n.host, n.why != NULL ? n.why : "?");
	}
	if (herd_job_get_state(job) == HERD_JOB_FAILED && herd_job_trace_dir(job) != NULL &&
	    has_traces(herd_job_trace_dir(job)))
		fprintf(stderr, "herd launch: the ranks' flight recorders: herd trace %s\n",
			herd_job_trace_dir(job));
	if (la.summary != NULL &&
	    write_summary(la.summary, job, spec.time_limit_ms, status, NULL) != 0 && status == 0)
		status = LAUNCH_EXIT_OWN;
	account(job, &spec, mon, la.monitor_out, args.argc - cmd_at,
		(const char *const *)args.argv + cmd_at, start, elapsed, job_status, &status);
	herd_job_free(job);
	fflush(stdout);
out:
	shell_monitor_free(mon);
	free(cmd);
	free(extra.v);
	for (size_t i = 0; i < extra.nowned; i++)
		free(extra.owned[i]);
	shell_args_free(&args);
	return status;
}
