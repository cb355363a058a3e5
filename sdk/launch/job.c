/*
 * sdk/launch/job.c - the launcher: herd_job_launch and the job's supervisor
 * thread, which starts every run (a fresh store server, the nodes' ranks),
 * watches the nodes, records the first failure, stops the others with a
 * grace period and restarts the job while restarts remain.
 *
 * Stale keys.  Every run, the first and each restart, gets a store server
 * of its own on a new port (HERD_STORE changes with it), so a restarted
 * rank never reads what a rank of an earlier run wrote.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "herd/cluster.h"
#include "herd/exclude.h"
#include "herd/store.h"
#include "herd/trace.h"
#include "comm/trace.h"
#include "auth.h"

#include "engine.h"
#include "holders.h"
#include "launch_internal.h"
#include "remote.h"
#include "net.h"

#define DEFAULT_START_TIMEOUT_MS 60000
/* The most nodes of an elastic job, and ranks per node; its most ranks. */
#define ELASTIC_MAX 65536
#define ELASTIC_MAX_RANKS 1000000
#define DEFAULT_GRACE_MS 5000
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
/* Lines of stderr kept per rank for the failure summary, and their length. */
#define TAIL_LINES 20
#define TAIL_LINE_MAX 1024
/* How long a node may take beyond the grace period to report its ranks
 * gone before the launcher gives up on it. */
#define STOP_SLACK_MS 5000
/* Bytes of a helper's (ssh's) stderr kept for messages. */
#define HELPER_ERR_MAX HERD__LAUNCH_LINK_ERR_MAX
#define MAX_PENDING_SIGNALS 64
/* Output queued for a slow reader before lines are dropped. */
#define OUTPUT_QUEUE_MAX ((size_t)16 << 20)
/* How long the first failure waits for a better one to blame (a rank
 * killed by a signal, whose peers' errors can reach the launcher first). */
#define SETTLE_MS 250
/* A failure settled this long with nodes still stopping is said at once. */
#define ANNOUNCE_MS 100
/* How long a failure waits for copies of the rings of nodes that do not
 * share the trace directory, at most (one cut off never sends them). */
#define RINGS_WAIT_MS 2000
/* How long a node an elastic job excluded for losing contact has to
 * answer `herd probe` at a restart to be taken back. */
#define READMIT_PROBE_MS 3000

struct rank_info {
	herd_job_rank_status st;   /* host points into the node list, error into strings */
	char *prefix;              /* its lines' prefix, formatted once (zeros after it,
				      to SMALL_COPY bytes at least) */
	size_t prefix_len;
	char *tail[TAIL_LINES];
	int tail_next, tail_n;
	int paused;            /* the signal that stopped it, 0 when not stopped */
};

/* One node of the current run. */
struct node_rt {
	herd__launch_node *node;
	herd__launch_link *link;       /* its `herd exec` (a thread, a child or a remote
					  one) as the engine watches it; NULL when a
					  relay above it carries its frames */
	size_t h;                      /* the engine's helper for it, when link */
	size_t via;                    /* the node whose channel carries its frames:
					  itself, or a first-level relay above it */
	size_t nsub;                   /* nodes it relays to: the next nsub */
	bool ready, closed, done;
	bool copies;                   /* it sends copies of its rings (not sharing the
					  launcher's trace directory) */
	bool rings_in;                 /* it answered the last rings command */
	const char *words;             /* what it said of itself then (job strings); NULL */
	const char *fault;             /* why the node itself failed this run: contact
					  lost, not up in time (job strings); NULL */
	int reported;                  /* ranks started or failed to start */
	int ended;                     /* ranks that exited */
};

/* One of the job's nodes, across its runs (herd_job_node). */
struct member {
	herd_job_node_role role;
	int node_rank;                 /* in the current run; -1 */
	int faults;                    /* runs whose blamed rank was on it */
	const char *why;               /* HERD_JOB_NODE_OUT: why (job strings) */
	double since;                  /* ... when, by this job; 0 */
	int out_run;                   /* ... after which run (job->runs) */
	bool lost;                     /* out for losing contact: asked again at restarts */
};

struct herd_job {
	herd_job_spec spec;            /* deep copy; strings and arrays below */
	char **argv, **env;
	char *hosts, *workdir, *log_dir, *prefix, *herd_program, *exclude;
	const herd__launch_backend *backend;
	herd__launch_node *nodes;      /* the current run's, placed */
	size_t nnodes;
	/* Every node of the job (resolved, less the excluded at launch), in
	 * order, and where each stands; the ranks' hosts point at pool's. */
	herd__launch_node *pool;
	struct member *members;
	size_t npool;
	bool elastic;                  /* spec.max_nodes > 0 */
	int rank_cap;                  /* ranks allocated: the largest world size */
	char id[64];
	char trace_dir[PATH_MAX];  /* the ranks' HERD_TRACE_DIR: their flight recorders */
	char trace_token[40];      /* in trace_dir/launcher: a node that reads it there
				    * shares the directory; others send copies */
	bool rings_asked;          /* this run's failure asked the nodes for their rings */
	int rings_seq;             /* that request's number (the answers echo it) */
	int blamed;                /* the rank the failure names; -1: none */
	int64_t rings_until;       /* the failure settles once they are in, or at this */
	herd__straggle straggle;   /* the straggler rounds over them (comm/trace.h) */
	int straggle_ms;           /* HERD_STRAGGLER_CHECK */
	int64_t straggle_at;       /* the next round; 0: not yet up */
	char secret[HERD_STORE_SECRET_BUF];
	int nranks;

	pthread_t thread;
	bool thread_started;
	int wake[2];
	int over_fd;                   /* eventfd, readable once over (herd_job_fd) */

	/* Shared with the API calls, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rank_info *ranks;
	int restart_count;
	bool launched, over, kill_req;
	bool late_signal;              /* a signal came once the job was failing or killed */
	int end_sig;                   /* a signal that ends the job came (herd_job_signal):
					  no restart after it */
	int stopped_by;                /* it came before the ranks started: the run was
					  stopped with it, and the job ends 128 + it */
	int interrupted;               /* herd_job_interrupt's signal: the job ends
					  128 + it, its ranks' ends no failure */
	bool interrupt_go;             /* ... not yet applied by the supervisor */
	bool interrupt_kill;           /* a second herd_job_interrupt: SIGKILL now */
	bool int_kill_sent;            /* ... asked for (the output is not waited for) */
	bool limit_hit;                /* spec.time_limit_ms ran out */
	const char *ended_ranks;       /* the ranks that an interrupt or the limit
					  stopped, "0-3,5" (kept) */
	herd_job_state state;          /* how it ended, once over */
	herd_status launch_st;
	char *launch_err;
	int exit_status;
	const char *failure;
	int first_failed;              /* rank, -1 none */
	int blamed_pause;              /* the stop signal of a blamed stopped rank, or 0 */
	/* The failure to blame while the settle window is open: -1 none. */
	int candidate;
	int64_t candidate_at;
	int pending[MAX_PENDING_SIGNALS];
	int npending;
	/* Every string handed out (errors, summaries), freed with the job. */
	char **strings;
	size_t nstrings, capstrings;

	/* The supervisor thread's own. */
	struct node_rt *rt;
	herd__engine *engine;          /* the run's channels */
	herd__holders *holders;        /* spec.ckpt_peers: the nodes' checkpoint holders */
	char **run_env;                /* env with the run's HERD_CKPT_*; NULL: env */
	herd__watcher wake_w;
	herd_store_server *store;
	bool stopping;
	bool killed;                   /* herd_job_kill's stop was sent */
	int64_t limit_at;              /* the time limit's deadline; 0 none */
	int64_t interrupt_kill_at;     /* the interrupt's grace ends: SIGKILL; 0 none */
	bool int_seen;                 /* the interrupt was applied */
	bool int_before_start;         /* ... before this run's ranks were told to start */
	int64_t stop_deadline;         /* nodes silent past this are given up */
	int64_t announce_at;           /* a failure said early, if nodes still stop then */
	char start_err[1024];          /* why a node failed to come up */
	bool went;                     /* this run's go was sent */
	herd__outq *outq;              /* the default output's writer, or NULL */
	herd__watcher room_w;          /* the writer has room again (outq) */
	int ctl_fd;                    /* the control socket (herd jobs); -1: none */
	char ctl_path[108];
	herd__watcher ctl_w;
	double t_start;                /* when it was launched, Unix seconds */
	int runs;                      /* runs begun, restarts and start retries alike */
	bool held;                     /* the nodes' frames are not read: outq is backlogged */
	size_t resume_next;            /* the node whose held frames are taken first */
	char *batch;                   /* prefixed lines on their way to outq */
	size_t batch_len;
	uint64_t batch_lines;
	herd_job_stream batch_stream;
};

/* ---- small helpers ----------------------------------------------------------- */

/* A string kept until herd_job_free, under mu; NULL when memory ran out. */
static const char *vkeep(herd_job *job, const char *f, va_list ap) HERD_PRINTF(2, 0);
static const char *vkeep(herd_job *job, const char *f, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, f, ap) < 0)
		return NULL;
	if (job->nstrings == job->capstrings) {
		size_t nc = job->capstrings ? 2 * job->capstrings : 16;
		char **nv = realloc(job->strings, nc * sizeof(char *));

		if (nv == NULL) {
			free(s);
			return NULL;
		}
		job->strings = nv;
		job->capstrings = nc;
	}
	job->strings[job->nstrings++] = s;
	return s;
}

static const char *keep(herd_job *job, const char *f, ...) HERD_PRINTF(2, 3);
static const char *keep(herd_job *job, const char *f, ...)
{
	va_list ap;
	const char *s;

	va_start(ap, f);
	s = vkeep(job, f, ap);
	va_end(ap);
	return s;
}

/* keep, from the supervisor thread, taking mu. */
static const char *keep_locked(herd_job *job, const char *f, ...) HERD_PRINTF(2, 3);
static const char *keep_locked(herd_job *job, const char *f, ...)
{
	va_list ap;
	const char *s;

	va_start(ap, f);
	pthread_mutex_lock(&job->mu);
	s = vkeep(job, f, ap);
	pthread_mutex_unlock(&job->mu);
	va_end(ap);
	return s;
}

static void wake(herd_job *job)
{
	char c = 1;

	if (write(job->wake[1], &c, 1) < 0) {
		/* The pipe is full: the thread has wake-ups pending anyway. */
	}
}

/* The job is over (under mu): wakes herd_job_wait and makes herd_job_fd
 * readable for good. */
/* The control socket goes when the job is over: it no longer runs. */
static void control_close(herd_job *job)
{
	if (job->ctl_fd < 0)
		return;
	close(job->ctl_fd);
	job->ctl_fd = -1;
	unlink(job->ctl_path);
}

static void set_over(herd_job *job)
{
	control_close(job);
	job->over = true;
	pthread_cond_broadcast(&job->cv);
	if (job->over_fd >= 0 && eventfd_write(job->over_fd, 1) != 0) {
		/* Cannot overflow: written once. */
	}
}

static int status_of(const herd_job_rank_status *r)
{
	switch (r->state) {
	case HERD_JOB_RANK_EXITED: return r->exit_code;
	case HERD_JOB_RANK_SIGNALED: return 128 + r->signal;
	/* 126: there but not executable, 127: not found (an earlier herd
	 * exec says 127 for both). */
	case HERD_JOB_RANK_FAILED_START: return r->exit_code != 0 ? r->exit_code : 127;
	default: return 0;
	}
}

static bool failed(const herd_job_rank_status *r)
{
	return status_of(r) != 0;
}

/*
 * The ranks not ended yet (pending or running), as "0-3,5", kept until
 * herd_job_free; NULL when there is none.  Under mu.
 */
static const char *live_ranks(herd_job *job)
{
	char buf[512];
	size_t o = 0;

	buf[0] = '\0';
	for (int r = 0; r < job->nranks && o < sizeof(buf); r++) {
		herd_job_rank_state s = job->ranks[r].st.state;
		int last = r;

		if (s != HERD_JOB_RANK_PENDING && s != HERD_JOB_RANK_RUNNING)
			continue;
		while (last + 1 < job->nranks &&
		       (job->ranks[last + 1].st.state == HERD_JOB_RANK_PENDING ||
			job->ranks[last + 1].st.state == HERD_JOB_RANK_RUNNING))
			last++;
		if (last == r)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%d", o ? "," : "", r);
		else
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%d-%d", o ? "," : "", r,
					      last);
		r = last;
	}
	if (o >= sizeof(buf))
		memcpy(buf + sizeof(buf) - 4, "...", 4);
	return buf[0] != '\0' ? keep(job, "%s", buf) : NULL;
}

/* "0:05", "1:30:00", "2-00:00:00": a time limit as srun writes one, with
 * the fraction of a second when there is one ("0:00.5"). */
static void format_limit(char *out, size_t cap, int ms)
{
	int s = ms / 1000, frac = ms % 1000;
	int d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
	size_t o;

	if (d > 0)
		o = (size_t)snprintf(out, cap, "%d-%02d:%02d:%02d", d, h, m, sec);
	else if (h > 0)
		o = (size_t)snprintf(out, cap, "%d:%02d:%02d", h, m, sec);
	else
		o = (size_t)snprintf(out, cap, "%d:%02d", m, sec);
	if (frac != 0 && o < cap) {
		snprintf(out + o, cap - o, ".%03d", frac);
		for (size_t k = strlen(out); k > o && out[k - 1] == '0'; k--)
			out[k - 1] = '\0';
	}
}

/* The name of a signal herd_job_interrupt takes. */
static const char *interrupt_name(int sig)
{
	switch (sig) {
	case SIGINT: return "SIGINT";
	case SIGTERM: return "SIGTERM";
	case SIGHUP: return "SIGHUP";
	case SIGQUIT: return "SIGQUIT";
	default: return NULL;
	}
}

/* ---- spec ------------------------------------------------------------------ */

herd_status herd__launch_strv_copy(char ***out, const char *const *v, const char *what)
{
	size_t n = 0;

	*out = NULL;
	while (v != NULL && v[n] != NULL)
		n++;
	HERD_CHECK(herd__calloc(out, n + 1, sizeof(char *), what));
	for (size_t i = 0; i < n; i++)
		HERD_CHECK(herd__strdup(&(*out)[i], v[i]));
	return HERD_OK;
}

/*
 * The ranks' extra environment: this process's HERD_* and NCCL_* variables
 * (those a rank's communicator and NCCL read: HERD_TIMEOUT,
 * HERD_SOCKET_IFNAME, NCCL_DEBUG, ...), less the rank contract's and those
 * spec_env names, then spec_env.  Remote ranks start from the environment
 * of a fresh ssh session or of srun, so they get the settings a local rank
 * inherits.
 */
static herd_status job_env(char ***out, const char *const *spec_env)
{
	size_t n = 0, nspec = 0, k = 0;

	*out = NULL;
	while (spec_env != NULL && spec_env[nspec] != NULL)
		nspec++;
	for (size_t i = 0; environ[i] != NULL; i++)
		n++;
	HERD_CHECK(herd__calloc(out, n + nspec + 1, sizeof(char *), "the job's env"));
	for (size_t i = 0; environ[i] != NULL; i++) {
		const char *e = environ[i];
		size_t len = strcspn(e, "=");
		bool named = false;

		if ((strncmp(e, "HERD_", 5) != 0 && strncmp(e, "NCCL_", 5) != 0) || e[len] != '=' ||
		    herd__launch_contract_name(e))
			continue;
		for (size_t j = 0; j < nspec && !named; j++)
			named = strncmp(spec_env[j], e, len) == 0 && spec_env[j][len] == '=';
		if (!named)
			HERD_CHECK(herd__strdup(&(*out)[k++], e));
	}
	for (size_t j = 0; j < nspec; j++)
		HERD_CHECK(herd__strdup(&(*out)[k++], spec_env[j]));
	return HERD_OK;
}

void herd__launch_strv_free(char **v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

static herd_status check_spec(const herd_job_spec *s)
{
	if (s == NULL)
		return herd__error(HERD_EINVAL, "herd_job_launch: spec is NULL");
	HERD__CHECK_VERSION("herd_job_launch", s, herd_job_spec, JOB_SPEC);
	if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0')
		return herd__error(HERD_EINVAL, "herd_job_spec.argv: expected a program and its "
				   "arguments, NULL-terminated");
	if (s->version >= 4 && (s->min_nodes != 0 || s->max_nodes != 0)) {
		if (s->min_nodes < 1 || s->max_nodes < s->min_nodes)
			return herd__error(HERD_EINVAL, "herd_job_spec: min_nodes %d, max_nodes %d; "
					   "expected 1 <= min_nodes <= max_nodes (or both 0: not "
					   "elastic)", s->min_nodes, s->max_nodes);
		if (s->per_node < 1)
			return herd__error(HERD_EINVAL, "herd_job_spec.per_node is %d; an elastic "
					   "job (max_nodes %d) needs the ranks per node, 1 or more",
					   s->per_node, s->max_nodes);
		if (s->nranks != 0)
			return herd__error(HERD_EINVAL, "herd_job_spec.nranks is %d; an elastic job's "
					   "world size follows its nodes (per_node times the nodes "
					   "in), so nranks must be 0", s->nranks);
		if (s->max_nodes > ELASTIC_MAX || s->per_node > ELASTIC_MAX)
			return herd__error(HERD_EINVAL, "herd_job_spec: max_nodes %d, per_node %d; "
					   "expected at most %d each", s->max_nodes, s->per_node,
					   ELASTIC_MAX);
	} else if (s->nranks < 1) {
		return herd__error(HERD_EINVAL, "herd_job_spec.nranks is %d; expected 1 or more",
				   s->nranks);
	}
	if (s->version >= 5 && (s->ckpt_peers < 0 || s->ckpt_peers > 64))
		return herd__error(HERD_EINVAL, "herd_job_spec.ckpt_peers is %d; expected 0 (none) "
				   "to 64", s->ckpt_peers);
	if (s->version >= 5 && s->ckpt_peers > 0 && s->where != HERD_JOB_HOSTS &&
	    s->where != HERD_JOB_HOSTFILE)
		return herd__error(HERD_EINVAL, "herd_job_spec.ckpt_peers: checkpoint holders start "
				   "over ssh, on the nodes of hosts or a hostfile (not %s)",
				   s->where == HERD_JOB_SLURM ? "a Slurm allocation"
				   : s->where == HERD_JOB_K8S ? "a Kubernetes job's pods"
				   : "this node alone");
	if (s->per_node < 0)
		return herd__error(HERD_EINVAL, "herd_job_spec.per_node is %d; expected 0 (fill "
				   "each node's slots) or more", s->per_node);
	if (s->gpus_per_rank < 0 || s->gpus_per_rank > HERD_ALLOC_MAX_GPUS_PER_NODE)
		return herd__error(HERD_EINVAL, "herd_job_spec.gpus_per_rank is %d; expected 0 "
				   "to %d", s->gpus_per_rank, HERD_ALLOC_MAX_GPUS_PER_NODE);
	if (s->start_timeout_ms < 0 || s->grace_ms < 0 || s->restarts < 0 ||
	    s->connect_timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_job_spec: %s is negative; expected 0 (the "
				   "default) or more", s->start_timeout_ms < 0 ? "start_timeout_ms"
				   : s->grace_ms < 0 ? "grace_ms" : s->restarts < 0 ? "restarts"
				   : "connect_timeout_ms");
	if (s->version >= 3 && (s->health_check < 0 || s->health_check > 2))
		return herd__error(HERD_EINVAL, "herd_job_spec.health_check is %d; expected 0 "
				   "(none), 1 or 2", s->health_check);
	if (s->version >= 2 && s->time_limit_ms < 0)
		return herd__error(HERD_EINVAL, "herd_job_spec.time_limit_ms is %d; expected 0 "
				   "(no limit) or more", s->time_limit_ms);
	if ((unsigned)s->where > HERD_JOB_K8S)
		return herd__error(HERD_EINVAL, "herd_job_spec.where is %d; expected a "
				   "herd_job_where", (int)s->where);
	if ((s->where == HERD_JOB_HOSTS || s->where == HERD_JOB_HOSTFILE ||
	     s->where == HERD_JOB_K8S) && (s->hosts == NULL || s->hosts[0] == '\0'))
		return herd__error(HERD_EINVAL, "herd_job_spec.hosts: expected a %s",
				   s->where == HERD_JOB_HOSTS ? "hostlist expression"
				   : s->where == HERD_JOB_K8S ? "hostlist of the pods' names"
				   : "hostfile path");
	for (size_t i = 0; s->env != NULL && s->env[i] != NULL; i++) {
		const char *eq = strchr(s->env[i], '=');

		if (eq == NULL || eq == s->env[i])
			return herd__error(HERD_EINVAL, "herd_job_spec.env[%zu] is \"%s\"; expected "
					   "NAME=value", i, s->env[i]);
	}
	return herd__launch_check_prefix(s->prefix, "herd_job_spec.prefix");
}

herd_status herd__launch_check_prefix(const char *prefix, const char *field)
{
	/* Only %h, %r and %% mean something; any other % is a typo that
	 * would otherwise print as it is.  The message quotes what follows
	 * the % as it was written: nothing at the end, a whole UTF-8
	 * character, a control byte as \xNN. */
	for (const char *p = prefix; p != NULL && (p = strchr(p, '%')) != NULL; p += 2) {
		const unsigned char *c = (const unsigned char *)p + 1;
		char what[16] = "";
		size_t n = 1;

		if (*c == 'h' || *c == 'r' || *c == '%')
			continue;
		if (*c >= 0xc0)
			while (n < 4 && (c[n] & 0xc0) == 0x80)
				n++;
		if (*c == '\0')
			n = 0;
		if (*c != '\0' && (*c < 0x20 || *c == 0x7f))
			snprintf(what, sizeof(what), "\\x%02x", *c);
		else
			snprintf(what, sizeof(what), "%.*s", (int)n, (const char *)c);
		return herd__error(HERD_EINVAL, "%s \"%s\": '%%%s' at column %zu is not %%h "
				   "(host), %%r (rank) or %%%% (a %%)", field, prefix, what,
				   (size_t)(p - prefix) + 1);
	}
	return HERD_OK;
}

static herd_status copy_spec(herd_job *job, const herd_job_spec *s)
{
	const char *prog = s->herd_program;

	/* A version 1 spec ends before time_limit_ms, a version 2 before
	 * exclude, a version 3 before min_nodes, a version 4 before ckpt_peers. */
	if (s->version >= 5)
		job->spec = *s;
	else
		memcpy(&job->spec, s, s->version >= 4 ? offsetof(herd_job_spec, ckpt_peers)
				      : s->version >= 3 ? offsetof(herd_job_spec, min_nodes)
				      : s->version >= 2 ? offsetof(herd_job_spec, exclude)
				      : offsetof(herd_job_spec, time_limit_ms));
	job->spec.version = HERD_JOB_SPEC_VERSION;
	HERD_CHECK(herd__launch_strv_copy(&job->argv, s->argv, "the job's argv"));
	HERD_CHECK(job_env(&job->env, s->env));
	HERD_CHECK(herd__strdup(&job->hosts, s->hosts));
	HERD_CHECK(herd__strdup(&job->exclude, job->spec.exclude));
	job->spec.exclude = job->exclude;
	HERD_CHECK(herd__strdup(&job->workdir, s->workdir));
	HERD_CHECK(herd__strdup(&job->log_dir, s->log_dir));
	HERD_CHECK(herd__strdup(&job->prefix, s->prefix != NULL ? s->prefix : HERD_JOB_PREFIX_DEFAULT));
	if (prog == NULL || prog[0] == '\0')
		prog = herd__param_str(HERD__P_PROGRAM);
	if (prog == NULL || prog[0] == '\0')
		prog = "herd";
	HERD_CHECK(herd__strdup(&job->herd_program, prog));
	job->spec.argv = (const char *const *)job->argv;
	job->spec.env = (const char *const *)job->env;
	job->spec.hosts = job->hosts;
	job->spec.workdir = job->workdir;
	job->spec.log_dir = job->log_dir;
	job->spec.prefix = job->prefix;
	job->spec.herd_program = job->herd_program;
	if (job->spec.start_timeout_ms == 0)
		job->spec.start_timeout_ms = DEFAULT_START_TIMEOUT_MS;
	if (job->spec.grace_ms == 0)
		job->spec.grace_ms = DEFAULT_GRACE_MS;
	if (job->spec.connect_timeout_ms == 0)
		job->spec.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
	return HERD_OK;
}

/* ---- output -------------------------------------------------------------------- */

/* The prefix of a line, spec->prefix with %h, %r and %% expanded. */
size_t herd_job_format_prefix(char *out, size_t cap, const char *format, const char *host,
			      int rank)
{
	size_t o = 0;

	if (out == NULL || cap == 0)
		return 0;
	if (format == NULL)
		format = HERD_JOB_PREFIX_DEFAULT;
	if (host == NULL)
		host = "?";
	for (const char *p = format; *p != '\0' && o + 1 < cap; p++) {
		int n = 0;

		if (p[0] == '%' && p[1] == 'h') {
			n = snprintf(out + o, cap - o, "%s", host);
			p++;
		} else if (p[0] == '%' && p[1] == 'r') {
			n = snprintf(out + o, cap - o, "%d", rank);
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			out[o] = '%';
			n = 1;
			p++;
		} else {
			out[o] = *p;
			n = 1;
		}
		if (n < 0 || (size_t)n >= cap - o)
			break;
		o += (size_t)n;
	}
	out[o] = '\0';
	return o;
}

#define PREFIX_MAX 512
/* Copies of at most this many bytes are made as copies of exactly this many
 * (a few moves, not a call): the prefix and the line of most flood lines. */
#define SMALL_COPY 16
/* Prefixed lines gathered before they go to the writer's queue in one push
 * (the batch is empty between frames). */
#define BATCH_BYTES ((size_t)64 << 10)
#define BATCH_CAP (BATCH_BYTES + PREFIX_MAX + HERD_JOB_LINE_MAX + 2 + 2 * SMALL_COPY)

static void keep_tail(struct rank_info *ri, const char *line, size_t len)
{
	char *s;

	if (len > TAIL_LINE_MAX)
		len = TAIL_LINE_MAX;
	s = malloc(len + 1);
	if (s == NULL)
		return;
	memcpy(s, line, len);
	s[len] = '\0';
	free(ri->tail[ri->tail_next]);
	ri->tail[ri->tail_next] = s;
	ri->tail_next = (ri->tail_next + 1) % TAIL_LINES;
	if (ri->tail_n < TAIL_LINES)
		ri->tail_n++;
}

/* The last TAIL_LINES lines of data (whole lines, each ending in '\n')
 * into the rank's stderr tail. */
static void keep_tail_of(herd_job *job, struct rank_info *ri, const char *data, size_t len)
{
	size_t start[TAIL_LINES], n = 0, end = len;

	while (n < TAIL_LINES && end > 0) {
		const char *nl = end > 1 ? memrchr(data, '\n', end - 1) : NULL;

		start[n++] = nl != NULL ? (size_t)(nl - data) + 1 : 0;
		end = start[n - 1];
	}
	pthread_mutex_lock(&job->mu);
	for (size_t i = n; i-- > 0;) {
		const char *line = data + start[i];
		const char *nl = memchr(line, '\n', len - start[i]);

		keep_tail(ri, line, (size_t)(nl - line));
	}
	pthread_mutex_unlock(&job->mu);
}

/* The end of the line at p (its '\n', which end - 1 is): most lines of a
 * flood are a few bytes, shorter than the call to memchr. */
static const char *line_end(const char *p, const char *end)
{
	for (int i = 0; i < 16; i++, p++)
		if (*p == '\n')
			return p;
	return memchr(p, '\n', (size_t)(end - p));
}

/* The gathered lines go to the writer. */
static void batch_flush(herd_job *job)
{
	if (job->batch_len == 0)
		return;
	herd__outq_push(job->outq, job->batch_stream, job->batch, job->batch_len,
			job->batch_lines);
	job->batch_len = 0;
	job->batch_lines = 0;
}

/*
 * Whole lines of a rank (data: each line ending in '\n', at most
 * HERD_JOB_LINE_MAX bytes without it): the stderr tail, then the caller's
 * output callback line by line, or the default output: each line with its
 * prefix, many to one push into the writer's queue.
 */
static void on_lines(herd_job *job, int rank, herd_job_stream stream, const char *data,
		     size_t len)
{
	struct rank_info *ri = &job->ranks[rank];

	if (stream == HERD_JOB_STDERR)
		keep_tail_of(job, ri, data, len);
	if (job->spec.output == NULL)
		return;
	if (job->spec.output != herd_job_output_stdio) {
		for (size_t at = 0; at < len;) {
			const char *nl = memchr(data + at, '\n', len - at);
			size_t n = (size_t)(nl - (data + at));

			job->spec.output(job->spec.output_userdata, rank, ri->st.host, stream,
					 data + at, n);
			at += n + 1;
		}
		return;
	}
	job->batch_stream = stream;
	for (size_t at = 0; at < len;) {
		const char *nl = line_end(data + at, data + len);
		size_t n = (size_t)(nl - (data + at)) + 1;
		char *o;

		if (job->batch_len + ri->prefix_len + n + 2 * SMALL_COPY > BATCH_CAP)
			batch_flush(job);
		o = job->batch + job->batch_len;
		/* Whole SMALL_COPY bytes where they are there to read: what
		 * goes beyond is overwritten next, or left after batch_len. */
		if (ri->prefix_len <= SMALL_COPY)
			memcpy(o, ri->prefix, SMALL_COPY);
		else
			memcpy(o, ri->prefix, ri->prefix_len);
		o += ri->prefix_len;
		if (n <= SMALL_COPY && at + SMALL_COPY <= len)
			memcpy(o, data + at, SMALL_COPY);
		else
			memcpy(o, data + at, n);
		job->batch_len += ri->prefix_len + n;
		job->batch_lines++;
		at += n;
		if (job->batch_len >= BATCH_BYTES)
			batch_flush(job);
	}
	batch_flush(job);
}

/* One line, without its newline (an out frame). */
static void on_output(herd_job *job, int rank, herd_job_stream stream, const char *line,
		      size_t len)
{
	struct rank_info *ri = &job->ranks[rank];

	if (stream == HERD_JOB_STDERR) {
		pthread_mutex_lock(&job->mu);
		keep_tail(ri, line, len);
		pthread_mutex_unlock(&job->mu);
	}
	if (job->spec.output != herd_job_output_stdio) {
		if (job->spec.output != NULL)
			job->spec.output(job->spec.output_userdata, rank, ri->st.host, stream,
					 line, len);
		return;
	}
	/* With its prefix and newline, as a line of a lines frame. */
	job->batch_stream = stream;
	memcpy(job->batch, ri->prefix, ri->prefix_len);
	memcpy(job->batch + ri->prefix_len, line, len);
	job->batch[ri->prefix_len + len] = '\n';
	job->batch_len = ri->prefix_len + len + 1;
	job->batch_lines = 1;
	batch_flush(job);
}

/* ---- rank events ------------------------------------------------------------------- */

static void on_started(herd_job *job, struct node_rt *nr, int rank, long pid)
{
	pthread_mutex_lock(&job->mu);
	job->ranks[rank].st.pid = pid;
	job->ranks[rank].st.state = HERD_JOB_RANK_RUNNING;
	pthread_mutex_unlock(&job->mu);
	nr->reported++;
}

/*
 * Whether failure a is to be blamed before b, which came first: a rank
 * killed by a signal nobody in the job sent before one that exited with
 * an error, which is most often its peers' report of that death.
 */
static bool blame_before(const herd_job_rank_status *a, const herd_job_rank_status *b)
{
	return a->state == HERD_JOB_RANK_SIGNALED && b->state != HERD_JOB_RANK_SIGNALED;
}

/* The first-failure summary: who, how, and the last lines of its stderr. */
static void summarize(herd_job *job, const struct rank_info *ri)
{
	const herd_job_rank_status *r = &ri->st;
	size_t cap = 512 + (size_t)ri->tail_n * (TAIL_LINE_MAX + PREFIX_MAX + 8);
	char *s = malloc(cap), how[PATH_MAX + 128];
	size_t o;

	if (s == NULL)
		return;
	if (r->state == HERD_JOB_RANK_SIGNALED)
		snprintf(how, sizeof(how), "was killed by signal %d (%s)", r->signal,
			 strsignal(r->signal));
	else if (r->state == HERD_JOB_RANK_FAILED_START)
		snprintf(how, sizeof(how), "failed to start: %s", r->error ? r->error : "?");
	else if (r->error != NULL)
		snprintf(how, sizeof(how), "exited with code %d: %s", r->exit_code, r->error);
	else
		snprintf(how, sizeof(how), "exited with code %d", r->exit_code);
	if (r->pid > 0)
		o = (size_t)snprintf(s, cap, "rank %d on %s (pid %ld) %s", r->rank, r->host, r->pid,
				     how);
	else
		o = (size_t)snprintf(s, cap, "rank %d on %s %s", r->rank, r->host, how);
	if (job->restart_count > 0 && o < cap)
		o += (size_t)snprintf(s + o, cap - o, " (restart %d)", job->restart_count);
	if (ri->tail_n == 0 && r->state != HERD_JOB_RANK_FAILED_START && o < cap)
		o += (size_t)snprintf(s + o, cap - o, "; it wrote nothing on stderr");
	else if (ri->tail_n > 0 && o < cap)
		o += (size_t)snprintf(s + o, cap - o, "; last lines of its stderr:");
	for (int i = 0; i < ri->tail_n && o < cap; i++) {
		int k = (ri->tail_next - ri->tail_n + i + TAIL_LINES) % TAIL_LINES;

		o += (size_t)snprintf(s + o, cap - o, "\n  %s", ri->tail[k]);
	}
	if (keep(job, "%s", s) != NULL)
		job->failure = job->strings[job->nstrings - 1];
	job->blamed = r->rank;
	free(s);
}

/* The summary for a stopped rank blamed for its peers' failure (peer). */
static void summarize_paused(herd_job *job, const struct rank_info *ri,
			     const struct rank_info *peer)
{
	char said[TAIL_LINE_MAX + 32];

	/* The peer's last line on stderr, else how it ended. */
	if (peer->tail_n > 0)
		snprintf(said, sizeof(said), "said: %s",
			 peer->tail[(peer->tail_next - 1 + TAIL_LINES) % TAIL_LINES]);
	else
		snprintf(said, sizeof(said), "exited with code %d", peer->st.exit_code);
	if (keep(job, "rank %d on %s (pid %ld) was stopped by signal %d (%s) and did not "
		 "answer; rank %d %s", ri->st.rank, ri->st.host, ri->st.pid, ri->paused,
		 strsignal(ri->paused), peer->st.rank, said) != NULL)
		job->failure = job->strings[job->nstrings - 1];
	job->blamed = ri->st.rank;
}

/*
 * The ranks' flight recorders name a culprit other than the first rank to
 * fail (cand, which exited: it noticed), one whose recorder was read and
 * is missing from the call the others waited in: the summary names it,
 * and what cand said.  false when they name none (or cand).  The exit
 * status stays cand's.
 */
static bool summarize_culprit(herd_job *job, const struct rank_info *cand)
{
	herd_trace_culprit c;
	char said[TAIL_LINE_MAX + 32], its[TAIL_LINE_MAX + 40] = "", kept[1024];
	const struct rank_info *ci;
	herd_status st;

	/* A rank killed, or one that did not start, is the cause itself. */
	if (job->trace_dir[0] == '\0' || cand->st.state != HERD_JOB_RANK_EXITED)
		return false;
	/* The reading's own errors are not the caller's to see. */
	herd__strlcpy(kept, herd_last_error(), sizeof(kept));
	st = herd_trace_blame(job->trace_dir, &c);
	herd__error(HERD_OK, "%s", kept);
	if (st != HERD_OK || c.size != job->nranks || c.rank < 0 || c.rank >= job->nranks ||
	    c.rank == cand->st.rank || c.pid == 0)
		return false;
	if (cand->tail_n > 0)
		snprintf(said, sizeof(said), "said: %s",
			 cand->tail[(cand->tail_next - 1 + TAIL_LINES) % TAIL_LINES]);
	else
		snprintf(said, sizeof(said), "exited with code %d", cand->st.exit_code);
	/* What the culprit said last, where it may say why it did not call. */
	ci = &job->ranks[c.rank];
	if (ci->tail_n > 0)
		snprintf(its, sizeof(its), "; its last line on stderr: %s",
			 ci->tail[(ci->tail_next - 1 + TAIL_LINES) % TAIL_LINES]);
	if (keep(job, "rank %d on %s (pid %ld) %s%s%s; rank %d, the first to fail, %s",
		 c.rank, ci->st.host, ci->st.pid, c.what,
		 c.count > 1 ? " (and other ranks: herd trace)" : "", its, cand->st.rank,
		 said) == NULL)
		return false;
	job->failure = job->strings[job->nstrings - 1];
	job->blamed = c.rank;
	return true;
}

static void on_paused(herd_job *job, int rank, int sig)
{
	pthread_mutex_lock(&job->mu);
	job->ranks[rank].paused = sig;
	pthread_mutex_unlock(&job->mu);
}

/* err: errlen bytes, not necessarily NUL-terminated (a frame's field). */
static void on_exited(herd_job *job, struct node_rt *nr, int rank, herd_job_rank_state state,
		      int code, int sig, const char *err, size_t errlen)
{
	struct rank_info *ri = &job->ranks[rank];

	pthread_mutex_lock(&job->mu);
	if (ri->st.state == HERD_JOB_RANK_PENDING)
		nr->reported++;
	ri->st.state = state;
	ri->st.exit_code = state == HERD_JOB_RANK_SIGNALED ? 0 : code;
	ri->st.signal = state == HERD_JOB_RANK_SIGNALED ? sig : 0;
	ri->st.error = err != NULL ? keep(job, "%.*s", (int)errlen, err) : NULL;
	/* The blame waits for the settle window: a killed rank's peers may
	 * report their own failure (caused by its death) first. */
	if (failed(&ri->st) && job->first_failed < 0 && !job->stopping && job->interrupted == 0) {
		if (job->candidate < 0) {
			job->candidate = rank;
			job->candidate_at = herd__net_now_ms();
		} else if (blame_before(&ri->st, &job->ranks[job->candidate].st)) {
			job->candidate = rank;
		}
	}
	pthread_mutex_unlock(&job->mu);
	nr->ended++;
}

/*
 * Ends the settle window when it has run out (or at once with force):
 * the candidate becomes the failure the job reports.  Under mu.
 */
/* Whether a node of the job sends copies of its rings (it does not share
 * the launcher's trace directory). */
static bool copies_from_nodes(const herd_job *job)
{
	for (size_t i = 0; i < job->nnodes; i++)
		if (job->rt[i].copies)
			return true;
	return false;
}

/* Copies of rings asked for at the failure that have not all come, and
 * may still (before job->rings_until): the culprit is looked for in them. */
static bool rings_due(const herd_job *job)
{
	if (!job->rings_asked || herd__net_now_ms() >= job->rings_until)
		return false;
	for (size_t i = 0; i < job->nnodes; i++)
		if (job->rt[i].copies && !job->rt[i].rings_in && !job->rt[i].closed)
			return true;
	return false;
}

static void settle(herd_job *job, bool force)
{
	if (job->candidate < 0 || job->first_failed >= 0)
		return;
	if (!force && (herd__net_now_ms() < job->candidate_at + SETTLE_MS || rings_due(job)))
		return;
	/* Its peers gave up on a stopped rank: that one did not answer. */
	if (job->ranks[job->candidate].st.state == HERD_JOB_RANK_EXITED) {
		for (int r = 0; r < job->nranks; r++) {
			struct rank_info *ri = &job->ranks[r];

			if (ri->paused != 0 && ri->st.state == HERD_JOB_RANK_RUNNING) {
				summarize_paused(job, ri, &job->ranks[job->candidate]);
				job->first_failed = r;
				job->blamed_pause = ri->paused;
				return;
			}
		}
	}
	job->first_failed = job->candidate;
	if (!summarize_culprit(job, &job->ranks[job->candidate]))
		summarize(job, &job->ranks[job->candidate]);
}

static void settle_locked(herd_job *job, bool force)
{
	pthread_mutex_lock(&job->mu);
	settle(job, force);
	pthread_mutex_unlock(&job->mu);
}

/* ---- channels -------------------------------------------------------------------- */

/* The helper's last words for a message: "" or ": <text>" on one line. */
static const char *helper_says(struct node_rt *nr, char *buf, size_t cap)
{
	return nr->link != NULL ? herd__launch_link_says(nr->link, buf, cap) : "";
}

/* What the helper said, unless it only repeats why (herd exec prints the
 * error it also sent). */
static const char *helper_adds(struct node_rt *nr, const char *why, char *buf, size_t cap)
{
	const char *says = helper_says(nr, buf, cap), *last = says, *p;

	while ((p = strstr(last, "herd exec: ")) != NULL)
		last = p + strlen("herd exec: ");
	return last[0] != '\0' && strstr(why, last) != NULL ? "" : says;
}

/* Ranks a lost node never reported are counted as failed there. */
static void node_lost(herd_job *job, struct node_rt *nr, const char *why)
{
	char says[HELPER_ERR_MAX + 8], err[HELPER_ERR_MAX + 256];

	snprintf(err, sizeof(err), "lost contact with node %s (%s)%s", nr->node->host, why,
		 helper_says(nr, says, sizeof(says)));
	for (int i = 0; i < nr->node->nranks; i++) {
		int rank = nr->node->ranks[i];
		herd_job_rank_state s = job->ranks[rank].st.state;

		if (s == HERD_JOB_RANK_PENDING || s == HERD_JOB_RANK_RUNNING)
			on_exited(job, nr, rank, HERD_JOB_RANK_EXITED, 255, 0, err, strlen(err));
	}
	nr->closed = true;
	nr->done = true;
}

static bool node_up(const struct node_rt *nr)
{
	return nr->ready && nr->reported == nr->node->nranks;
}

/*
 * A node failed: why becomes the launch error when the run was not up yet,
 * its channel (if it has one) is closed, its ranks count as lost, and so
 * does every node reached through it (a relay's subtree).
 */
static void node_fail(herd_job *job, struct node_rt *nr, const char *why)
{
	char says[HELPER_ERR_MAX + 8];

	if (!nr->done && !node_up(nr) && job->start_err[0] == '\0')
		snprintf(job->start_err, sizeof(job->start_err), "node %s: %.900s%s",
			 nr->node->host, why, helper_adds(nr, why, says, sizeof(says)));
	if (nr->link != NULL)
		herd__engine_close(job->engine, nr->h, HERD_OK, NULL);
	if (!nr->done) {
		node_lost(job, nr, why);
		if (nr->fault == NULL)
			nr->fault = keep_locked(job, "%s%s", node_up(nr) || job->went ? "lost "
						"contact with it: " : "it did not come up: ", why);
	}
	nr->closed = true;
	for (size_t i = 0; i < job->nnodes; i++) {
		struct node_rt *d = &job->rt[i];
		char lost[1200];

		if (d == nr || d->via != (size_t)(nr - job->rt) || d->closed)
			continue;
		snprintf(lost, sizeof(lost), "relay node %s was lost: %.900s", nr->node->host, why);
		if (!node_up(d) && job->start_err[0] == '\0')
			snprintf(job->start_err, sizeof(job->start_err), "node %s: %.900s",
				 d->node->host, lost);
		node_lost(job, d, lost);
	}
}

static bool rank_on_node(const struct node_rt *nr, int64_t rank)
{
	for (int i = 0; i < nr->node->nranks; i++)
		if (nr->node->ranks[i] == rank)
			return true;
	return false;
}

static bool channel_event(herd_job *job, struct node_rt *nr, const herd__launch_msg *m,
			  char *why, size_t cap);

/*
 * A frame of another node that a first-level relay passed up: handled as if
 * that node had sent it; a node that breaks the protocol or reports an
 * error is lost on its own, not the relay.
 */
static bool relayed_event(herd_job *job, struct node_rt *relay, const herd__launch_msg *m,
			  char *why, size_t cap)
{
	struct node_rt *nr;
	herd__launch_msg inner;
	char iwhy[1024] = "";

	if (m->node < 0 || (size_t)m->node >= job->nnodes ||
	    job->rt[m->node].via != (size_t)(relay - job->rt) || &job->rt[m->node] == relay) {
		snprintf(why, cap, "it relayed a frame of node %lld, which is not in its subtree",
			 (long long)m->node);
		return false;
	}
	nr = &job->rt[m->node];
	if (nr->closed)
		return true;  /* lost already: what it still says comes too late */
	if (herd__launch_msg_decode(&inner, m->frame, m->frame_len) != HERD_OK) {
		node_fail(job, nr, herd_last_error());
		return true;
	}
	if (inner.type == HERD__LAUNCH_T_RELAY) {
		snprintf(iwhy, sizeof(iwhy), "it sent a relay frame inside a relay frame");
	} else if (channel_event(job, nr, &inner, iwhy, sizeof(iwhy))) {
		herd__launch_msg_free(&inner);
		/* Reached through a relay, a node is finished at its done. */
		if (nr->done)
			nr->closed = true;
		return true;
	}
	herd__launch_msg_free(&inner);
	node_fail(job, nr, iwhy);
	return true;
}

/* Handles one event frame; false when the node broke the protocol. */
static bool channel_event(herd_job *job, struct node_rt *nr, const herd__launch_msg *m,
			  char *why, size_t cap)
{
	switch (m->type) {
	case HERD__LAUNCH_T_READY:
		nr->ready = true;
		nr->copies = m->copies != 0;
		return true;
	case HERD__LAUNCH_T_RINGS:
		/* The failure's request answered; a straggler round's answer,
		 * or one left from before, is not. */
		if (job->rings_asked && m->seq == job->rings_seq)
			nr->rings_in = true;
		/* What the node says of itself: its first words of the run
		 * (at the failure, or before done), one string a node. */
		if (m->msg_len > 0 && nr->words == NULL) {
			pthread_mutex_lock(&job->mu);
			nr->words = keep(job, "%.*s", (int)m->msg_len, m->msg);
			pthread_mutex_unlock(&job->mu);
		}
		return true;
	case HERD__LAUNCH_T_ERROR:
		snprintf(why, cap, "%s: %.*s", herd_status_name((herd_status)m->st),
			 (int)m->msg_len, m->msg);
		return false;
	case HERD__LAUNCH_T_STARTED:
	case HERD__LAUNCH_T_OUT:
	case HERD__LAUNCH_T_LINES:
	case HERD__LAUNCH_T_EXITED:
	case HERD__LAUNCH_T_PAUSED:
		if (!rank_on_node(nr, m->rank)) {
			snprintf(why, cap, "it reported rank %lld, which is not one of its own",
				 (long long)m->rank);
			return false;
		}
		if (m->type == HERD__LAUNCH_T_STARTED)
			on_started(job, nr, (int)m->rank, (long)m->pid);
		else if (m->type == HERD__LAUNCH_T_OUT)
			on_output(job, (int)m->rank, (herd_job_stream)m->s, m->data, m->data_len);
		else if (m->type == HERD__LAUNCH_T_LINES)
			on_lines(job, (int)m->rank, (herd_job_stream)m->s, m->data, m->data_len);
		else if (m->type == HERD__LAUNCH_T_PAUSED)
			on_paused(job, (int)m->rank, (int)m->sig);
		else
			on_exited(job, nr, (int)m->rank, (herd_job_rank_state)m->state,
				  (int)m->code, (int)m->sig, m->err_len > 0 ? m->err : NULL,
				  m->err_len);
		return true;
	case HERD__LAUNCH_T_DONE:
		nr->done = true;
		return true;
	case HERD__LAUNCH_T_RING:
		/* A copy that cannot be kept is a ring not read, not a
		 * node to give up on. */
		if (job->trace_dir[0] != '\0' &&
		    herd__trace_keep_copy(job->trace_dir, m->data, m->data_len) != HERD_OK)
			herd__log_warn("job %s: node %s sent a flight recorder that is not kept: %s",
				       job->id, nr->node->host, herd_last_error());
		return true;
	case HERD__LAUNCH_T_RELAY:
		if (nr->via == (size_t)(nr - job->rt))
			return relayed_event(job, nr, m, why, cap);
		/* fall through */
	default:
		snprintf(why, cap, "it sent a %s frame", herd__launch_type_name(m->type));
		return false;
	}
}

/*
 * Whether the nodes' frames are to wait (recheck: until when at most): the
 * writer's queue is over half full while its reader takes what it writes.
 * Never while the job is stopping: its end is not to wait for a reader.
 */
static bool output_backlogged(herd_job *job, int64_t *recheck)
{
	int64_t at = 0;

	if (job->outq == NULL || job->stopping || !herd__outq_backlogged(job->outq, &at))
		return false;
	if (recheck != NULL)
		*recheck = at;
	return true;
}

/* Frames from a node's channel (the engine's input). */
static void channel_input(void *userdata, size_t h, herd__buf *in)
{
	herd_job *job = userdata;
	struct node_rt *nr;
	size_t first, count;
	char why[1024] = "";

	herd__engine_nodes(job->engine, h, &first, &count);
	nr = &job->rt[first];
	while (!nr->closed) {
		herd__launch_msg m;
		const char *payload;
		size_t len;

		if (herd__launch_link_frame(nr->link, &payload, &len) != HERD_OK) {
			snprintf(why, sizeof(why), "%s", herd_last_error());
			node_fail(job, nr, why);
			return;
		}
		if (len == SIZE_MAX)
			break;
		/* The rest waits, and no node is read, until the writer has
		 * room (resume_input); the last frames of a channel that ended
		 * are taken at once. */
		if (!herd__engine_input_ended(job->engine, h) && output_backlogged(job, NULL)) {
			job->held = true;
			herd__engine_hold_input(job->engine, true);
			break;
		}
		if (herd__launch_msg_decode(&m, payload, len) != HERD_OK) {
			snprintf(why, sizeof(why), "%s", herd_last_error());
			node_fail(job, nr, why);
			return;
		}
		if (!channel_event(job, nr, &m, why, sizeof(why))) {
			herd__launch_msg_free(&m);
			node_fail(job, nr, why);
			return;
		}
		herd__launch_msg_free(&m);
		herd__buf_consume(in, len + 4);
	}
}

/*
 * The writer has room again (or its reader stalled): the nodes are read
 * again, starting with the frames that waited, a different node first
 * each time so that one node's output does not keep the others' waiting.
 */
static void resume_input(herd_job *job)
{
	size_t nh = herd__engine_helpers(job->engine);

	job->held = false;
	herd__engine_hold_input(job->engine, false);
	for (size_t k = 0; k < job->nnodes && !job->held; k++) {
		size_t i = (job->resume_next + k) % job->nnodes;
		struct node_rt *nr = &job->rt[i];

		if (nr->via != i || nr->link == NULL || nr->closed ||
		    nr->link->in.len == nr->link->in.off)
			continue;
		channel_input(job, nr->h, &nr->link->in);
	}
	/* Then each channel, from the same place on: what a node sent
	 * since (its control frames behind its output among it) is not
	 * kept waiting behind the first watched node's flood. */
	for (size_t k = 0; k < nh && !job->held; k++)
		herd__engine_read(job->engine, (job->resume_next + k) % nh);
	job->resume_next = (job->resume_next + 1) % job->nnodes;
}

static void on_room(herd__watcher *w, short revents)
{
	eventfd_t v;

	(void)revents;
	(void)eventfd_read(w->fd, &v);
}

/* A node's channel ended or broke (the engine's verdict). */
static void channel_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	herd_job *job = userdata;
	size_t first, count;

	herd__engine_nodes(job->engine, h, &first, &count);
	if (!job->rt[first].closed)
		node_fail(job, &job->rt[first], end->why);
}

static void channel_write(herd_job *job, struct node_rt *nr)
{
	herd__engine_flush(job->engine, nr->h);
}

/* ---- runs ---------------------------------------------------------------------- */

/* One command (stop with grace arg, signal arg, go, rings with seq arg) to every node the
 * launcher talks to directly; relays pass it on to their subtrees. */
static void command_all(herd_job *job, herd__launch_type type, int arg)
{
	for (size_t i = 0; i < job->nnodes; i++) {
		struct node_rt *nr = &job->rt[i];
		herd_status st;

		if (nr->via != i || nr->closed)
			continue;
		st = type == HERD__LAUNCH_T_STOP ? herd__launch_enc_stop(&nr->link->out, arg)
		     : type == HERD__LAUNCH_T_SIGNAL ? herd__launch_enc_signal(&nr->link->out, arg)
		     : type == HERD__LAUNCH_T_RINGS ? herd__launch_enc_rings(&nr->link->out, arg, NULL)
		     : herd__launch_enc_go(&nr->link->out);
		if (st == HERD_OK)
			channel_write(job, nr);
	}
}

/*
 * A failure is said at the end of the job; when nodes are still stopping
 * their ranks ANNOUNCE_MS after it was settled (a node cut off keeps the
 * launcher up to its grace period; ranks slow to exit, a moment), it is
 * said at once as well, with the nodes it waits for.
 */
static void announce(herd_job *job)
{
	int64_t left = job->stop_deadline - herd__net_now_ms();
	char hosts[512];
	size_t o = 0;
	int waiting = 0;

	hosts[0] = '\0';
	for (size_t i = 0; i < job->nnodes; i++) {
		if (job->rt[i].closed)
			continue;
		if (waiting++ < 4 && o < sizeof(hosts))
			o += (size_t)snprintf(hosts + o, sizeof(hosts) - o, "%s%s", o ? ", " : "",
					      job->rt[i].node->host);
	}
	if (waiting == 0)
		return;
	if (waiting > 4 && o < sizeof(hosts))
		snprintf(hosts + o, sizeof(hosts) - o, " and %d more", waiting - 4);
	pthread_mutex_lock(&job->mu);
	herd__log_warn("job %s failed: %s; waiting up to %.0f s for %s to stop %s ranks",
		       job->id, job->failure != NULL ? job->failure : "a rank failed",
		       left > 0 ? (double)left / 1000 : 0.0, hosts, waiting == 1 ? "its" : "their");
	pthread_mutex_unlock(&job->mu);
}

static void stop_all(herd_job *job, int grace_ms)
{
	int64_t hard = herd__net_deadline(grace_ms + STOP_SLACK_MS);

	if (!job->stopping || hard < job->stop_deadline)
		job->stop_deadline = hard;
	job->stopping = true;
	command_all(job, HERD__LAUNCH_T_STOP, grace_ms);
}

/* A port nobody listens on now, for MASTER_PORT. */
static int free_port(const char *host)
{
	char addr[HERD_NET_ADDR_LEN];
	int fd, port = 0;

	if (herd__net_listen(&fd, host, 0) != HERD_OK)
		return 29500;
	if (herd__net_local_addr(fd, addr, &port) != HERD_OK)
		port = 29500;
	close(fd);
	return port;
}

/*
 * The launcher's address as the nodes reach it: HERD_LAUNCH_ADDR, else the
 * source address the kernel picks to reach the first node, else the host
 * name.
 */
static void advertise_host(const char *first_node, char *out, size_t cap)
{
	const char *env = herd__param_str(HERD__P_LAUNCH_ADDR);

	if (env != NULL && env[0] != '\0') {
		herd__strlcpy(out, env, cap);
		return;
	}
	if (herd__net_source_addr(first_node, out, cap))
		return;
	if (gethostname(out, cap) != 0)
		herd__strlcpy(out, "localhost", cap);
}

static void node_spec_of(herd_job *job, const herd__launch_node *node, const char *store,
			 const char *maddr, int mport, herd__node_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->job_id = job->id;
	s->store = (char *)store;
	s->secret = job->secret;
	s->host = node->host;
	s->master_addr = (char *)maddr;
	s->master_port = mport;
	s->restart_count = job->restart_count;
	s->job_start_ms = (int64_t)(job->t_start * 1000);
	s->world_size = job->nranks;
	s->nnodes = (int)job->nnodes;
	s->node_rank = node->node_rank;
	s->nranks = node->nranks;
	s->ranks = node->ranks;
	s->argv = job->argv;
	s->env = job->run_env != NULL ? job->run_env : job->env;
	s->workdir = job->workdir;
	s->log_dir = job->log_dir;
	s->grace_ms = job->spec.grace_ms;
	s->gpus_per_rank = job->spec.gpus_per_rank;
	s->lines = true;
	s->trace_token = job->trace_token[0] != '\0' ? job->trace_token : NULL;
	s->health = job->spec.health_check;
}

/*
 * Lays nodes [first, first + n) out as subtrees (herd__launch_tree_group):
 * each group's head is reached through via (top: the head is a first-level
 * node and its own via), and relays to the rest of its group.
 */
static void tree_layout(herd_job *job, size_t first, size_t n, int width, bool top, size_t via)
{
	size_t g = herd__launch_tree_groups(n, width);

	for (size_t k = 0; k < g; k++) {
		size_t off, len, head;

		herd__launch_tree_group(n, width, k, &off, &len);
		head = first + off;
		job->rt[head].via = top ? head : via;
		job->rt[head].nsub = len - 1;
		if (len > 1)
			tree_layout(job, head + 1, len - 1, width, false, top ? head : via);
	}
}

static void free_rt(herd_job *job)
{
	/* Its channel closed, each `herd exec` stops its ranks and ends. */
	herd__engine_free(job->engine, STOP_SLACK_MS);
	job->engine = NULL;
	free(job->rt);
	job->rt = NULL;
	herd_store_server_free(job->store);
	job->store = NULL;
}

/*
 * Starts `herd exec` for every node through the backend (a thread, a child,
 * or a remote process; a relay's subtree through its relay) and sends
 * each its spec.
 */
static herd_status start_nodes(herd_job *job, const char *store, const char *adv,
			       const char *bind, const char *maddr, int mport, int64_t deadline)
{
	herd_status st;
	herd__launch_channel *ch = NULL;
	herd__launch_tree tree = { 0 };
	bool *direct = NULL;
	herd__buf tmp;
	herd__launch_ctx ctx = {
		.spec = &job->spec, .job_id = job->id, .secret = job->secret,
		.store_addr = store, .advertise_host = adv, .bind_host = bind,
		.herd_program = job->herd_program, .restart_count = job->restart_count,
		.world_size = job->nranks, .nodes = job->nodes, .nnodes = job->nnodes,
		.deadline = deadline,
	};

	herd__buf_init(&tmp, 0);
	if (job->backend->tree != NULL)
		HERD_CHECK_GOTO(job->backend->tree(&ctx, &tree), st, tree_out);
	HERD_CHECK_GOTO(herd__calloc(&direct, job->nnodes, sizeof(*direct),
				     "the job's first-level nodes"), st, tree_out);
	if (tree.width > 0)
		tree_layout(job, 0, job->nnodes, tree.width, true, 0);
	for (size_t i = 0; i < job->nnodes; i++)
		direct[i] = job->rt[i].via == i;
	ctx.direct = direct;
	HERD_CHECK_GOTO(herd__calloc(&ch, job->nnodes, sizeof(*ch), "the job's channels"),
			st, tree_out);
	st = job->backend->start(&ctx, ch);
	for (size_t i = 0; st == HERD_OK && i < job->nnodes; i++) {
		struct node_rt *nr = &job->rt[i];

		if (!direct[i])
			continue;
		st = herd__engine_attach(job->engine, &ch[i], i, 1 + nr->nsub,
					 HERD__LAUNCH_FRAME_MAX + 4, &nr->h);
		if (st != HERD_OK) {
			for (size_t k = i + 1; k < job->nnodes; k++)
				if (direct[k])
					herd__remote_channel_abort(&ch[k], 1000);
			break;
		}
		nr->link = herd__engine_link(job->engine, nr->h);
	}
	/* Node order: a relay's own spec goes before its subtree's. */
	for (size_t i = 0; st == HERD_OK && i < job->nnodes; i++) {
		struct node_rt *nr = &job->rt[i];
		herd__node_spec s;
		char **sub = NULL;

		node_spec_of(job, nr->node, store, maddr, mport, &s);
		if (nr->nsub > 0) {
			st = herd__calloc(&sub, nr->nsub + 1, sizeof(*sub), "a relay's hosts");
			if (st != HERD_OK)
				break;
			for (size_t k = 0; k < nr->nsub; k++)
				sub[k] = job->nodes[i + 1 + k].host;
			s.nsub = (int)nr->nsub;
			s.sub = sub;
			s.width = tree.width;
			s.rsh = tree.argv;
			s.rcmd = tree.cmd;
		}
		if (direct[i]) {
			st = herd__launch_enc_spec(&nr->link->out, &s);
		} else {
			herd__buf_consume(&tmp, tmp.len - tmp.off);
			st = herd__launch_enc_spec(&tmp, &s);
			if (st == HERD_OK)
				st = herd__launch_enc_relay(&job->rt[nr->via].link->out, (int)i,
							    (const char *)tmp.data + tmp.off + 4,
							    tmp.len - tmp.off - 4);
		}
		free(sub);
	}
	for (size_t i = 0; st == HERD_OK && i < job->nnodes; i++)
		if (direct[i])
			channel_write(job, &job->rt[i]);
tree_out:
	free(ch);
	free(direct);
	herd__buf_free(&tmp);
	herd__launch_tree_free(&tree);
	return st;
}

/* The signals that ask a program to end (herd_job_signal). */
static bool ending_signal(int sig)
{
	return sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGTERM ||
	       sig == SIGKILL;
}

/* Requests of the API calls (the wake pipe), applied on the supervisor thread. */
static double real_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The hosts of the current (or last) run's nodes, "h1,h2,h4", into out. */
static void run_hosts(const herd_job *job, char *out, size_t cap)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < job->nnodes && o < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "", job->nodes[i].host);
}

/* The job's state for herd jobs: what it is doing now. */
static const char *control_state(const herd_job *job)
{
	if (job->interrupted != 0 || job->kill_req)
		return "stopping";
	if (job->first_failed >= 0 || job->candidate >= 0 || job->limit_hit)
		return "failing";
	return job->launched ? "running" : "starting";
}

/* The answer to status: the job, and each rank's host, pid and state. */
static void control_status(herd_job *job, json_t *o)
{
	json_t *ranks = json_array();
	char cmd[512] = "", hosts[512];
	size_t c = 0;

	for (size_t i = 0; job->argv[i] != NULL && c < sizeof(cmd); i++)
		c += (size_t)snprintf(cmd + c, sizeof(cmd) - c, "%s%s", i ? " " : "", job->argv[i]);
	run_hosts(job, hosts, sizeof(hosts));
	pthread_mutex_lock(&job->mu);
	json_object_set_new(o, "id", json_string(job->id));
	json_object_set_new(o, "kind", json_string("job"));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "command", json_stringn(cmd, strnlen(cmd, sizeof(cmd))));
	json_object_set_new(o, "hosts", json_stringn(hosts, strnlen(hosts, sizeof(hosts))));
	json_object_set_new(o, "nodes", json_integer((json_int_t)job->nnodes));
	json_object_set_new(o, "ranks", json_integer(job->nranks));
	json_object_set_new(o, "state", json_string(control_state(job)));
	json_object_set_new(o, "restarts", json_integer(job->restart_count));
	json_object_set_new(o, "started", json_real(job->t_start));
	json_object_set_new(o, "age", json_real(real_now() - job->t_start));
	for (int r = 0; ranks != NULL && r < job->nranks; r++) {
		const herd_job_rank_status *st = &job->ranks[r].st;
		json_t *one = json_object();

		if (one == NULL)
			break;
		json_object_set_new(one, "rank", json_integer(r));
		json_object_set_new(one, "host", json_string(st->host != NULL ? st->host : ""));
		json_object_set_new(one, "pid", json_integer(st->pid));
		json_object_set_new(one, "state", json_string(herd_job_rank_state_name(st->state)));
		json_array_append_new(ranks, one);
	}
	json_object_set_new(o, "rank_states", ranks);
	if (job->elastic) {
		json_t *members = json_array();

		json_object_set_new(o, "min_nodes", json_integer(job->spec.min_nodes));
		json_object_set_new(o, "max_nodes", json_integer(job->spec.max_nodes));
		for (size_t i = 0; members != NULL && i < job->npool; i++) {
			const struct member *m = &job->members[i];
			json_t *one = json_object();

			if (one == NULL)
				break;
			json_object_set_new(one, "host", json_string(job->pool[i].host));
			json_object_set_new(one, "role", json_string(herd_job_node_role_name(m->role)));
			if (m->role == HERD_JOB_NODE_OUT && m->why != NULL)
				json_object_set_new(one, "why", json_string(m->why));
			json_array_append_new(members, one);
		}
		json_object_set_new(o, "members", members);
	}
	pthread_mutex_unlock(&job->mu);
}

/* The answer to a request on the control socket (control.c). */
static char *control_answer(void *arg, const char *request)
{
	herd_job *job = arg;
	json_t *o = json_object();
	char *text;

	if (o == NULL)
		return NULL;
	if (strcmp(request, "stop") == 0) {
		herd_job_interrupt(job, SIGINT);
		json_object_set_new(o, "stopping", json_true());
	} else if (strcmp(request, "status") == 0) {
		control_status(job, o);
	} else if (strncmp(request, "scale", 5) == 0 || strncmp(request, "restart", 7) == 0) {
		json_object_set_new(o, "error", json_string("a job of ranks, not a service (herd "
							    "serve): it has no replicas to scale "
							    "or restart"));
	} else {
		json_object_set_new(o, "error", json_string("unknown request (status, stop)"));
	}
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

static void on_control(herd__watcher *w, short revents)
{
	(void)revents;
	herd__control_serve(w->fd, control_answer, w->data);
}

static void on_wake(herd__watcher *w, short revents)
{
	herd_job *job = w->data;
	int sigs[MAX_PENDING_SIGNALS], n, int_sig;
	bool kill_req, int_kill;
	char c[64];

	(void)revents;
	while (read(job->wake[0], c, sizeof(c)) > 0)
		;
	pthread_mutex_lock(&job->mu);
	n = job->npending;
	memcpy(sigs, job->pending, (size_t)n * sizeof(int));
	job->npending = 0;
	kill_req = job->kill_req;
	int_sig = job->interrupt_go ? job->interrupted : 0;
	job->interrupt_go = false;
	/* None was running when it came; this run's ranks, if any, are. */
	if (int_sig != 0 && job->ended_ranks == NULL && job->went)
		job->ended_ranks = live_ranks(job);
	int_kill = job->interrupt_kill;
	job->interrupt_kill = false;
	pthread_mutex_unlock(&job->mu);
	if (int_sig != 0) {
		/* herd_job_interrupt: the signal now, SIGKILL after the grace
		 * period; before the ranks were told to start, none starts. */
		job->int_seen = true;
		if (!job->went && !job->stopping) {
			job->int_before_start = true;
			stop_all(job, job->spec.grace_ms);
		} else {
			command_all(job, HERD__LAUNCH_T_SIGNAL, int_sig);
			job->interrupt_kill_at = herd__net_deadline(job->spec.grace_ms);
		}
	}
	if (int_kill)
		stop_all(job, 0);
	for (int i = 0; i < n; i++) {
		/* The ranks have not been told to start: a signal that ends the
		 * job stops the run instead, so that none starts. */
		if (ending_signal(sigs[i]) && !job->went && !job->stopping) {
			pthread_mutex_lock(&job->mu);
			job->stopped_by = sigs[i];
			pthread_mutex_unlock(&job->mu);
			stop_all(job, job->spec.grace_ms);
			continue;
		}
		command_all(job, HERD__LAUNCH_T_SIGNAL, sigs[i]);
	}
	if (kill_req && !job->killed) {
		job->killed = true;
		stop_all(job, job->spec.grace_ms);
	}
}

/* Starts one run: the store, then every node.  Nothing is left on failure. */
/*
 * With spec.ckpt_peers: the run's nodes' checkpoint holders (started for
 * the nodes that have none), and the run's environment that names them.
 */
static herd_status holders_for_run(herd_job *job)
{
	const char **hosts = NULL;
	char *list = NULL, notes[1024];
	size_t nenv = 0;
	herd_status st;

	herd__launch_strv_free(job->run_env);
	job->run_env = NULL;
	if (job->spec.ckpt_peers <= 0 || job->nnodes < 2)
		return HERD_OK;
	if (job->holders == NULL)
		HERD_CHECK(herd__holders_create(&job->holders, job->backend, job->herd_program));
	HERD_CHECK(herd__calloc(&hosts, job->nnodes + 1, sizeof(*hosts), "the run's nodes"));
	for (size_t i = 0; i < job->nnodes; i++)
		hosts[i] = job->nodes[i].host;
	st = herd__holders_ensure(job->holders, hosts, job->nnodes, job->spec.start_timeout_ms,
				  &list, notes, sizeof(notes));
	free(hosts);
	HERD_CHECK(st);
	if (notes[0] != '\0')
		herd__log_warn("job %s: %s", job->id, notes);
	while (job->env != NULL && job->env[nenv] != NULL)
		nenv++;
	st = herd__calloc(&job->run_env, nenv + 3, sizeof(char *), "the run's environment");
	for (size_t i = 0; st == HERD_OK && i < nenv; i++)
		st = herd__strdup(&job->run_env[i], job->env[i]);
	if (st == HERD_OK && (asprintf(&job->run_env[nenv], "HERD_CKPT_PEERS=%d",
				       job->spec.ckpt_peers) < 0 ||
			      asprintf(&job->run_env[nenv + 1], "HERD_CKPT_HOLDERS=%s", list) < 0)) {
		job->run_env[nenv] = job->run_env[nenv + 1] = NULL;
		st = herd__error(HERD_ENOMEM, "out of memory for the run's environment");
	}
	free(list);
	return st;
}

/* The holders end with the job (each with its channel). */
static void stop_holders(herd_job *job)
{
	herd__holders_free(job->holders);
	job->holders = NULL;
	herd__launch_strv_free(job->run_env);
	job->run_env = NULL;
}

static herd_status run_begin(herd_job *job, int64_t deadline)
{
	herd_store_server_opts so = HERD_STORE_SERVER_OPTS_INIT;
	bool remote = job->backend->remote;
	char adv[256], store[300];
	const char *maddr, *bind;
	int mport;
	herd_status st;

	job->start_err[0] = '\0';
	job->stopping = false;
	job->went = false;
	job->announce_at = 0;
	/* A restart's rounds begin afresh; the last run's straggler is
	 * no longer named. */
	if (job->straggle.warned >= 0 && job->trace_dir[0] != '\0')
		herd__trace_mark(job->trace_dir, job->straggle.warned, 0);
	job->straggle = (herd__straggle)HERD__STRAGGLE_INIT;
	job->rings_asked = false;
	pthread_mutex_lock(&job->mu);
	job->first_failed = job->candidate = job->blamed = -1;
	job->late_signal = false;
	job->blamed_pause = 0;
	job->failure = NULL;
	for (int r = 0; r < job->nranks; r++) {
		struct rank_info *ri = &job->ranks[r];

		ri->st.pid = 0;
		ri->st.state = HERD_JOB_RANK_PENDING;
		ri->st.exit_code = ri->st.signal = 0;
		ri->st.error = NULL;
		for (int k = 0; k < TAIL_LINES; k++) {
			free(ri->tail[k]);
			ri->tail[k] = NULL;
		}
		ri->tail_n = ri->tail_next = ri->paused = 0;
	}
	pthread_mutex_unlock(&job->mu);

	/* The store and the connect-back socket listen only where the nodes
	 * reach this launcher, unless HERD_LAUNCH_BIND says otherwise. */
	if (remote)
		advertise_host(job->nodes[0].host, adv, sizeof(adv));
	else
		herd__strlcpy(adv, "127.0.0.1", sizeof(adv));
	bind = herd__param_str(HERD__P_LAUNCH_BIND);
	if (bind == NULL || bind[0] == '\0')
		bind = adv;
	so.host = bind;
	so.secret = job->secret;
	st = herd_store_server_start(&job->store, &so);
	if (st != HERD_OK) {
		char why[1024];

		herd__strlcpy(why, herd_last_error(), sizeof(why));
		st = herd__error(st, "the job's store: %s (%s; HERD_LAUNCH_BIND=0.0.0.0 listens on "
				 "every interface)", why,
				 bind != adv ? "HERD_LAUNCH_BIND"
				 : remote && herd__param_str(HERD__P_LAUNCH_ADDR) != NULL
				 ? "HERD_LAUNCH_ADDR, where the nodes reach this launcher"
				 : "the address the nodes reach this launcher at");
		goto fail;
	}
	snprintf(store, sizeof(store), strchr(adv, ':') != NULL ? "[%s]:%d" : "%s:%d", adv,
		 herd_store_server_port(job->store));
	maddr = remote ? job->nodes[0].host : "127.0.0.1";
	mport = free_port(bind);

	HERD_CHECK_GOTO(herd__calloc(&job->rt, job->nnodes, sizeof(*job->rt), "the job's nodes"),
			st, fail);
	for (size_t i = 0; i < job->nnodes; i++) {
		job->rt[i].node = &job->nodes[i];
		job->rt[i].via = i;
	}
	{
		herd__engine_client client = { .userdata = job, .input = channel_input,
					       .ended = channel_ended };

		HERD_CHECK_GOTO(herd__engine_create(&job->engine, job->backend, &client, NULL), st, fail);
		herd__watcher_init(&job->wake_w, job->wake[0], on_wake, job);
		HERD_CHECK_GOTO(herd__loop_watch(herd__engine_loop(job->engine), &job->wake_w,
						 POLLIN), st, fail);
		job->held = false;
		if (job->ctl_fd >= 0) {
			herd__watcher_init(&job->ctl_w, job->ctl_fd, on_control, job);
			HERD_CHECK_GOTO(herd__loop_watch(herd__engine_loop(job->engine),
							 &job->ctl_w, POLLIN), st, fail);
		}
		if (job->outq != NULL) {
			herd__watcher_init(&job->room_w, herd__outq_fd(job->outq), on_room, job);
			HERD_CHECK_GOTO(herd__loop_watch(herd__engine_loop(job->engine),
							 &job->room_w, POLLIN), st, fail);
		}
	}
	HERD_CHECK_GOTO(holders_for_run(job), st, fail);
	HERD_CHECK_GOTO(start_nodes(job, store, adv, bind, maddr, mport, deadline), st, fail);
	return HERD_OK;
fail:
	free_rt(job);
	return st;
}

/*
 * A run that could not start is ended without waiting on its helpers: each
 * one's channel closes and its process (ssh, srun) gets SIGTERM now and
 * SIGKILL half a second later (herd__engine_kill), so that the error comes
 * within half a second of its deadline, not after a helper that lingers (ssh
 * still connecting) has been waited for.  A node thread of this process
 * stops its ranks and ends as its channel closes.
 */
static void abort_run(herd_job *job)
{
	for (size_t i = 0; i < job->nnodes; i++)
		if (job->rt[i].via == i && job->rt[i].link != NULL)
			herd__engine_kill(job->engine, job->rt[i].h);
}

static bool node_done(const struct node_rt *nr)
{
	return nr->closed;
}

/*
 * A straggler round over the ranks' flight recorders (comm/trace.h), every
 * HERD_STRAGGLER_CHECK seconds while the run is up: a rank late in five
 * rounds in a row is said on the launcher's stderr, once, and marked in
 * its rings for as long as it stays named (herd exporter, herd top).
 */
static void straggle_round(herd_job *job)
{
	char host[256], why[512];
	int rank, before = job->straggle.warned;

	job->straggle_at = herd__net_now_ms() + job->straggle_ms;
	if (job->trace_dir[0] == '\0')
		return;
	/* The nodes that do not share the trace directory send copies,
	 * for the next round. */
	if (copies_from_nodes(job))
		command_all(job, HERD__LAUNCH_T_RINGS, 0);
	if (herd__trace_straggle(job->trace_dir, job->nranks, &job->straggle, &rank, host,
				 sizeof(host), why, sizeof(why)))
		herd__log_warn("job %s: rank %d on %s is a straggler: %s", job->id, rank, host,
			       why);
	if (before >= 0 && before != job->straggle.warned)
		herd__trace_mark(job->trace_dir, before, 0);
	if (job->straggle.warned >= 0)
		herd__trace_mark(job->trace_dir, job->straggle.warned,
				 job->straggle.late_ns > 1 ? (int64_t)job->straggle.late_ns : 1);
}

/*
 * Watches a run until every node is done.  *up turns true once every node
 * is up and every rank reported; a node that fails before that ends the
 * run with the error returned (the run is not torn down here).
 */
static herd_status run_watch(herd_job *job, int64_t deadline, bool *up)
{
	herd_status st = HERD_OK;

	for (;;) {
		bool all_done = true, all_up = true, all_ready = true;
		int64_t wake = -1;

		for (size_t i = 0; i < job->nnodes; i++) {
			struct node_rt *nr = &job->rt[i];

			all_done = all_done && node_done(nr);
			all_ready = all_ready && nr->ready;
			all_up = all_up && nr->ready && nr->reported == nr->node->nranks;
		}
		if (!job->went && all_ready && !job->stopping && job->first_failed < 0 &&
		    job->start_err[0] == '\0') {
			/* every node checked its spec: the ranks may start */
			job->went = true;
			command_all(job, HERD__LAUNCH_T_GO, 0);
		}
		if (!*up && job->start_err[0] != '\0') {
			st = herd__error(HERD_EUNAVAIL, "%s", job->start_err);
			abort_run(job);
			break;
		}
		if (*up && job->straggle_at > 0 && herd__net_now_ms() >= job->straggle_at &&
		    !job->stopping && job->first_failed < 0)
			straggle_round(job);
		if (!*up && all_up) {
			*up = true;
			job->straggle_at = herd__net_now_ms() + job->straggle_ms;
			/* The time limit counts from the first run's start. */
			if (job->spec.time_limit_ms > 0 && job->limit_at == 0)
				job->limit_at = herd__net_deadline(job->spec.time_limit_ms);
			if (job->restart_count == 0) {
				pthread_mutex_lock(&job->mu);
				job->launched = true;
				job->launch_st = HERD_OK;
				pthread_cond_broadcast(&job->cv);
				pthread_mutex_unlock(&job->mu);
			}
		}
		if (all_done) {
			/* A restart stopped by the limit or an interrupt as it
			 * started ends the job as they say, not as a failure. */
			if (!*up && !job->limit_hit && !job->int_seen) {
				st = herd__error(HERD_EUNAVAIL, "a node ended before all its ranks "
						 "were started");
			}
			break;
		}
		if (!*up && herd__net_now_ms() >= deadline) {
			char hosts[512] = "";
			size_t o = 0;

			for (size_t i = 0; i < job->nnodes && o < sizeof(hosts); i++) {
				struct node_rt *nr = &job->rt[i];
				char says[HELPER_ERR_MAX + 8];

				if (nr->ready && nr->reported == nr->node->nranks)
					continue;
				if (nr->fault == NULL)
					nr->fault = keep_locked(job, "it did not come up: its "
								"supervisor was not up by the "
								"start deadline");
				o += (size_t)snprintf(hosts + o, sizeof(hosts) - o, "%s%s%s",
						      o ? ", " : "", nr->node->host,
						      helper_says(nr, says, sizeof(says)));
			}
			st = herd__error(HERD_ETIMEDOUT, "node supervisor not up within %d ms on "
					 "%s", job->spec.start_timeout_ms, hosts);
			abort_run(job);
			break;
		}
		/* The rings of the nodes that do not share the trace
		 * directory come while the failure settles. */
		if (job->candidate >= 0 && !job->rings_asked) {
			job->rings_asked = true;
			job->rings_until = herd__net_deadline(RINGS_WAIT_MS);
			job->rings_seq++;
			for (size_t i = 0; i < job->nnodes; i++)
				job->rt[i].rings_in = false;
			command_all(job, HERD__LAUNCH_T_RINGS, job->rings_seq);
		}
		settle_locked(job, all_done);
		if (!job->stopping && job->first_failed >= 0) {
			stop_all(job, job->spec.grace_ms);
			job->announce_at = herd__net_now_ms() + ANNOUNCE_MS;
		}
		if (job->announce_at > 0 && herd__net_now_ms() >= job->announce_at) {
			job->announce_at = 0;
			announce(job);
		}
		if (job->interrupt_kill_at > 0 && herd__net_now_ms() >= job->interrupt_kill_at) {
			job->interrupt_kill_at = 0;
			stop_all(job, 0);
		}
		if (job->limit_at > 0 && !job->stopping && !job->int_seen &&
		    herd__net_now_ms() >= job->limit_at) {
			pthread_mutex_lock(&job->mu);
			/* Ranks that have all ended before the limit are not
			 * stopped by it, whatever their nodes still say. */
			if (job->interrupted == 0 && (job->ended_ranks = live_ranks(job)) != NULL)
				job->limit_hit = true;
			pthread_mutex_unlock(&job->mu);
			if (job->limit_hit)
				stop_all(job, job->spec.grace_ms);
		}
		if (job->stopping && herd__net_now_ms() >= job->stop_deadline) {
			for (size_t i = 0; i < job->nnodes; i++) {
				struct node_rt *nr = &job->rt[i];

				if (nr->closed)
					continue;
				if (nr->link != NULL) {
					if (nr->link->ch.pid > 0)
						kill(nr->link->ch.pid, SIGKILL);
					herd__engine_close(job->engine, nr->h, HERD_OK, NULL);
				}
				node_lost(job, nr, "it did not stop its ranks within the grace "
					  "period");
				if (nr->fault == NULL)
					nr->fault = keep_locked(job, "lost contact with it: it did "
								"not stop its ranks within "
								"the grace period");
			}
		}

		if (!*up)
			wake = deadline;
		if (job->stopping && (wake < 0 || job->stop_deadline < wake))
			wake = job->stop_deadline;
		if (job->announce_at > 0 && (wake < 0 || job->announce_at < wake))
			wake = job->announce_at;
		if (job->interrupt_kill_at > 0 && (wake < 0 || job->interrupt_kill_at < wake))
			wake = job->interrupt_kill_at;
		/* A limit passed with no rank running (they ended, a restart is
		 * to come) is looked at again when something happens. */
		if (job->limit_at > herd__net_now_ms() && !job->stopping && !job->int_seen &&
		    (wake < 0 || job->limit_at < wake))
			wake = job->limit_at;
		if (job->candidate >= 0 && job->first_failed < 0 &&
		    (wake < 0 || job->candidate_at + SETTLE_MS < wake))
			wake = job->candidate_at + SETTLE_MS;
		if (job->first_failed < 0 && rings_due(job) && (wake < 0 || job->rings_until < wake))
			wake = job->rings_until;
		if (*up && job->straggle_at > 0 && !job->stopping && job->first_failed < 0 &&
		    (wake < 0 || job->straggle_at < wake))
			wake = job->straggle_at;
		if (job->held) {
			int64_t recheck;

			if (!output_backlogged(job, &recheck)) {
				resume_input(job);
				continue;
			}
			if (wake < 0 || recheck < wake)
				wake = recheck;
		}
		st = herd__engine_run_once(job->engine, wake);
		if (st != HERD_OK) {
			herd__error_wrap(st, "in the job's supervisor: ");
			break;
		}
	}
	settle_locked(job, true);
	return st;
}

/* Whether the output still queued is to be abandoned: a signal or a kill
 * came for the job while it waited for its reader, or a signal came once it
 * was failing (the launcher is being told to end). */
static bool output_give_up(void *arg)
{
	herd_job *job = arg;
	bool give_up;

	pthread_mutex_lock(&job->mu);
	give_up = job->kill_req || job->npending > 0 || job->late_signal || job->int_kill_sent;
	pthread_mutex_unlock(&job->mu);
	return give_up;
}

static void finish(herd_job *job)
{
	char limit[32];

	/* The ranks are done; what they wrote goes out before the job is
	 * over, unless the launcher is told to stop waiting for its reader. */
	herd__outq_drain(job->outq, output_give_up, job);
	pthread_mutex_lock(&job->mu);
	job->state = HERD_JOB_FAILED;
	if (job->blamed_pause != 0) {
		/* As a shell says of a stopped job: 128 + the signal. */
		job->exit_status = 128 + job->blamed_pause;
	} else if (job->first_failed >= 0) {
		job->exit_status = status_of(&job->ranks[job->first_failed].st);
	} else if (job->limit_hit) {
		format_limit(limit, sizeof(limit), job->spec.time_limit_ms);
		job->exit_status = HERD_JOB_EXIT_TIME_LIMIT;
		job->state = HERD_JOB_TIME_LIMIT;
		if (job->ended_ranks != NULL)
			job->failure = keep(job, "time limit of %s reached; %s %s stopped", limit,
					    strpbrk(job->ended_ranks, "-,") != NULL ? "ranks"
					    : "rank", job->ended_ranks);
		else
			job->failure = keep(job, "time limit of %s reached", limit);
	} else if (job->interrupted != 0 && job->int_seen &&
		   (job->ended_ranks != NULL || job->int_before_start)) {
		job->exit_status = 128 + job->interrupted;
		job->state = HERD_JOB_INTERRUPTED;
		if (job->int_before_start)
			job->failure = keep(job, "interrupted by %s before its ranks started",
					    interrupt_name(job->interrupted));
		else
			job->failure = keep(job, "interrupted by %s; %s %s stopped",
					    interrupt_name(job->interrupted),
					    strpbrk(job->ended_ranks, "-,") != NULL ? "ranks" : "rank",
					    job->ended_ranks);
	} else if (job->killed) {
		job->exit_status = 128 + SIGTERM;
		job->state = HERD_JOB_STOPPED;
		job->failure = keep(job, "stopped before it finished");
	} else if (job->stopped_by != 0) {
		job->exit_status = 128 + job->stopped_by;
		job->state = HERD_JOB_STOPPED;
		job->failure = keep(job, "stopped by signal %d (%s) before its ranks started",
				    job->stopped_by, strsignal(job->stopped_by));
	} else {
		job->exit_status = 0;
		job->state = HERD_JOB_SUCCEEDED;
		/* Nothing to look into: the flight recorders go. */
		herd__trace_dir_remove(job->trace_dir);
	}
	set_over(job);
	pthread_mutex_unlock(&job->mu);
}

/*
 * What the blamed rank's node said of itself when asked at the failure
 * (its GPUs' last Xid, slowdowns, links down) joins the failure's words.
 */
static void say_node_words(herd_job *job)
{
	pthread_mutex_lock(&job->mu);
	for (size_t i = 0; job->blamed >= 0 && job->failure != NULL && i < job->nnodes; i++) {
		const struct node_rt *nr = &job->rt[i];

		if (nr->words == NULL || !rank_on_node(nr, job->blamed))
			continue;
		if (keep(job, "%s%sits node %s: %s", job->failure,
			 strchr(job->failure, '\n') != NULL ? "\n  " : "; ", nr->node->host,
			 nr->words) != NULL)
			job->failure = job->strings[job->nstrings - 1];
		break;
	}
	pthread_mutex_unlock(&job->mu);
}

/* ---- membership --------------------------------------------------------------------- */

/*
 * Every node of the pool starts in the job, an elastic job's beyond
 * max_nodes as spares; the ranks are allocated for the largest world.
 */
static herd_status members_init(herd_job *job)
{
	size_t in = 0;

	job->elastic = job->spec.max_nodes > 0;
	if (job->elastic && job->npool < (size_t)job->spec.min_nodes)
		return herd__error(HERD_ENORESOURCE, "herd_job_spec.min_nodes is %d, but the job "
				   "has %zu node%s", job->spec.min_nodes, job->npool,
				   job->npool == 1 ? "" : "s");
	HERD_CHECK(herd__calloc(&job->members, job->npool, sizeof(*job->members),
				"the job's nodes"));
	for (size_t i = 0; i < job->npool; i++) {
		struct member *m = &job->members[i];

		m->node_rank = -1;
		m->role = !job->elastic || in < (size_t)job->spec.max_nodes ? HERD_JOB_NODE_IN
									   : HERD_JOB_NODE_SPARE;
		in += m->role == HERD_JOB_NODE_IN;
	}
	if (job->elastic) {
		int64_t cap = (int64_t)job->spec.per_node *
			      (int64_t)(job->npool < (size_t)job->spec.max_nodes ? job->npool
					: (size_t)job->spec.max_nodes);

		if (cap > ELASTIC_MAX_RANKS)
			return herd__error(HERD_EINVAL, "herd_job_spec: per_node %d on %zu nodes is "
					   "%lld ranks; expected at most %d", job->spec.per_node,
					   job->npool, (long long)cap, ELASTIC_MAX_RANKS);
		job->rank_cap = (int)cap;
	} else {
		job->rank_cap = job->spec.nranks;
	}
	return herd__calloc(&job->ranks, (size_t)job->rank_cap, sizeof(*job->ranks),
			    "the job's ranks");
}

/* The pool node a run's node is (by name: a host given twice is one
 * node); every run's node is one of them. */
static size_t pool_of(const herd_job *job, const char *host)
{
	size_t i = 0;

	while (i + 1 < job->npool && strcmp(job->pool[i].host, host) != 0)
		i++;
	return i;
}

static size_t count_role(const herd_job *job, herd_job_node_role role)
{
	size_t n = 0;

	for (size_t i = 0; i < job->npool; i++)
		n += job->members[i].role == role;
	return n;
}

/*
 * The next run's nodes: a copy of the pool's nodes in the job, the ranks
 * placed on them (a fixed job's nranks; an elastic one's per_node on
 * each), and each rank's identity and prefix.  The pool's nodes left
 * without a rank are spares.
 */
static herd_status place_run(herd_job *job)
{
	herd__launch_node *nodes = NULL;
	size_t n = 0;
	int nranks;
	herd_status st;

	HERD_CHECK(herd__calloc(&nodes, job->npool, sizeof(*nodes), "the run's nodes"));
	for (size_t i = 0; i < job->npool; i++) {
		if (job->members[i].role != HERD_JOB_NODE_IN)
			continue;
		nodes[n].slots = job->pool[i].slots;
		HERD_CHECK_GOTO(herd__strdup(&nodes[n++].host, job->pool[i].host), st, fail);
	}
	nranks = job->elastic ? job->spec.per_node * (int)n : job->spec.nranks;
	HERD_CHECK_GOTO(herd__launch_place(nodes, &n, nranks, job->spec.per_node), st, fail);
	pthread_mutex_lock(&job->mu);
	herd__launch_nodes_free(job->nodes, job->nnodes);
	job->nodes = nodes;
	job->nnodes = n;
	job->nranks = nranks;
	for (size_t i = 0; i < job->npool; i++) {
		job->members[i].node_rank = -1;
		if (job->members[i].role == HERD_JOB_NODE_IN)
			job->members[i].role = HERD_JOB_NODE_SPARE;
	}
	for (size_t i = 0; i < n; i++) {
		size_t p = pool_of(job, nodes[i].host);

		job->members[p].role = HERD_JOB_NODE_IN;
		job->members[p].node_rank = nodes[i].node_rank;
		for (int k = 0; k < nodes[i].nranks; k++) {
			struct rank_info *ri = &job->ranks[nodes[i].ranks[k]];
			char prefix[PREFIX_MAX];

			ri->st.rank = nodes[i].ranks[k];
			ri->st.node_rank = nodes[i].node_rank;
			ri->st.local_rank = k;
			ri->st.host = job->pool[p].host;
			ri->prefix_len = herd_job_format_prefix(prefix, sizeof(prefix), job->prefix,
								ri->st.host, ri->st.rank);
			free(ri->prefix);
			ri->prefix = calloc(ri->prefix_len + 1 + SMALL_COPY, 1);
			if (ri->prefix == NULL) {
				pthread_mutex_unlock(&job->mu);
				return herd__error(HERD_ENOMEM, "out of memory for a rank's prefix");
			}
			memcpy(ri->prefix, prefix, ri->prefix_len);
		}
	}
	pthread_mutex_unlock(&job->mu);
	return HERD_OK;
fail:
	herd__launch_nodes_free(nodes, job->npool);
	return st;
}

/* The hosts of the nodes in the job, "h1,h2,h4", into out. */
static void hosts_in(const herd_job *job, char *out, size_t cap)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < job->npool && o < cap; i++)
		if (job->members[i].role == HERD_JOB_NODE_IN)
			o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? "," : "",
					      job->pool[i].host);
}

/* Whether a node's fault is the health gate's refusal (a verdict on its
 * GPUs), not a node that did not answer. */
static bool refused_by_gate(const char *fault)
{
	return fault != NULL && strstr(fault, HERD__HEALTH_REFUSED) != NULL;
}

/* How a node left the job (exclude_member). */
enum out_kind {
	OUT_LOST,      /* contact lost, or it did not come up: asked again at restarts */
	OUT_FOR_GOOD,  /* its own failures: out for this job */
	OUT_SLURM      /* Slurm took it out of service: Slurm says when it is back */
};

/*
 * Excludes pool node p for why: out of the job and, unless Slurm took it
 * out (kind), onto the excluded nodes' list with the job's id and the
 * reason (a list that cannot be written is said; the node is out of this
 * job all the same).
 */
static void exclude_member(herd_job *job, size_t p, const char *why, enum out_kind kind)
{
	struct member *m = &job->members[p];
	char reason[256];

	snprintf(reason, sizeof(reason), "job %s: %s", job->id, why);
	pthread_mutex_lock(&job->mu);
	m->role = HERD_JOB_NODE_OUT;
	m->node_rank = -1;
	m->why = keep(job, "%s", why);
	m->since = real_now();
	m->out_run = job->runs;
	m->lost = kind == OUT_LOST;
	pthread_mutex_unlock(&job->mu);
	herd__log_warn("job %s: node %s excluded: %s", job->id, job->pool[p].host, why);
	if (kind != OUT_SLURM && herd_exclude_add(job->pool[p].host, reason, NULL) != HERD_OK)
		herd__log_warn("job %s: node %s is not on the excluded nodes' list: %s", job->id,
			       job->pool[p].host, herd_last_error());
}

/*
 * Takes pool node p back off the excluded nodes' list, if what is there is
 * still this job's entry (not one the user or another job wrote since).
 */
static void unlist_member(herd_job *job, size_t p)
{
	herd_exclude_entry *v = NULL;
	size_t n = 0;
	char mine[96];
	bool ours = false;

	snprintf(mine, sizeof(mine), "job %s: ", job->id);
	if (herd_exclude_list(&v, &n) != HERD_OK)
		return;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].host, job->pool[p].host) == 0)
			ours = strncmp(v[i].reason, mine, strlen(mine)) == 0;
	herd_free(v);
	if (ours && herd_exclude_remove(job->pool[p].host, NULL) != HERD_OK)
		herd__log_warn("job %s: node %s stays on the excluded nodes' list: %s", job->id,
			       job->pool[p].host, herd_last_error());
}

/* "the first run" or "restart N", for messages. */
static const char *run_name(const herd_job *job, char *buf, size_t cap)
{
	if (job->restart_count == 0)
		return "the first run";
	snprintf(buf, cap, "restart %d", job->restart_count);
	return buf;
}

/*
 * After a run that failed (started: its ranks had started; else it did not
 * come up), the nodes at fault are excluded: those it lost contact with or
 * that did not come up (nr->fault), those Slurm has taken out of service
 * (an allocation's), and the node of the rank to blame when it says its
 * hardware failed, or is blamed for the second time.  When every node of
 * the run lost contact or did not come up, the launcher's side is the
 * likelier cause (its address, a firewall) and none is excluded.  Returns
 * how many were.
 */
static size_t judge(herd_job *job, bool started)
{
	size_t out = 0, lost = 0;
	int blamed = job->blamed >= 0 ? job->blamed : job->first_failed;
	char buf[32], **hosts = NULL, **slurm = NULL;
	const char *run = run_name(job, buf, sizeof(buf));

	for (size_t i = 0; i < job->nnodes; i++)
		lost += job->rt[i].fault != NULL && !refused_by_gate(job->rt[i].fault);
	if (job->nnodes > 1 && lost == job->nnodes) {
		herd__log_warn("job %s: every node lost contact or did not come up: the launcher's "
			       "side (HERD_LAUNCH_ADDR, a firewall) is the likelier cause; none is "
			       "excluded", job->id);
		return 0;
	}
	if (job->spec.where == HERD_JOB_SLURM &&
	    herd__calloc(&hosts, job->nnodes, sizeof(*hosts), "the nodes' names") == HERD_OK &&
	    herd__calloc(&slurm, job->nnodes, sizeof(*slurm), "Slurm's words") == HERD_OK) {
		for (size_t i = 0; i < job->nnodes; i++)
			hosts[i] = job->nodes[i].host;
		herd__slurm_unfit(hosts, job->nnodes, slurm);
	}
	for (size_t i = 0; i < job->nnodes; i++) {
		const struct node_rt *nr = &job->rt[i];
		size_t p = pool_of(job, nr->node->host);
		bool is_blamed = started && blamed >= 0 && rank_on_node(nr, blamed);
		enum out_kind kind = OUT_FOR_GOOD;
		int faults;
		char why[1024];

		/* A node lost explains the failure: a rank elsewhere that failed
		 * first (its collective's peer died) is not counted against its
		 * node, unless that node says its hardware failed. */
		pthread_mutex_lock(&job->mu);
		faults = job->members[p].faults += is_blamed && lost == 0;
		pthread_mutex_unlock(&job->mu);
		if (nr->fault != NULL) {
			snprintf(why, sizeof(why), "%s (%s)", nr->fault, run);
			if (!refused_by_gate(nr->fault))
				kind = OUT_LOST;
		} else if (slurm != NULL && slurm[i] != NULL) {
			snprintf(why, sizeof(why), "%.900s (%s)", slurm[i], run);
			kind = OUT_SLURM;
		} else if (is_blamed && nr->words != NULL) {
			snprintf(why, sizeof(why), "its rank %d failed the job (%s), and the node "
				 "says: %s", blamed, run, nr->words);
		} else if (is_blamed && lost == 0 && faults >= 2) {
			snprintf(why, sizeof(why), "a rank on it failed the job %d times (rank %d "
				 "in %s)", faults, blamed, run);
		} else {
			continue;
		}
		exclude_member(job, p, why, kind);
		out++;
	}
	for (size_t i = 0; slurm != NULL && i < job->nnodes; i++)
		free(slurm[i]);
	free(slurm);
	free(hosts);
	return out;
}

/* Whether pool node i is one to ask again: out for losing contact, in a
 * run before the one that just ended. */
static bool asked_again(const herd_job *job, size_t i)
{
	const struct member *m = &job->members[i];

	return m->role == HERD_JOB_NODE_OUT && m->lost && m->out_run < job->runs;
}

/*
 * Asks the nodes this job excluded for losing contact in an earlier run
 * whether they answer again (`herd probe`, READMIT_PROBE_MS; over ssh, not
 * in a Slurm allocation or on this node): those that do are taken off the
 * list and back as spares.
 */
static void readmit(herd_job *job)
{
	herd_cluster_discover_opts d = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *c = NULL;
	char hosts[4096] = "", kept[1024];
	size_t o = 0;

	if (job->spec.where != HERD_JOB_HOSTS && job->spec.where != HERD_JOB_HOSTFILE)
		return;
	for (size_t i = 0; i < job->npool && o < sizeof(hosts); i++)
		if (asked_again(job, i))
			o += (size_t)snprintf(hosts + o, sizeof(hosts) - o, "%s%s", o ? "," : "",
					      job->pool[i].host);
	if (o == 0 || o >= sizeof(hosts))
		return;
	d.hosts = hosts;
	d.timeout_ms = READMIT_PROBE_MS;
	d.herd_program = job->herd_program;
	herd__strlcpy(kept, herd_last_error(), sizeof(kept));
	if (herd_cluster_discover(&c, &d) == HERD_OK) {
		for (size_t i = 0; i < job->npool; i++) {
			struct member *m = &job->members[i];
			bool answered = asked_again(job, i);

			for (size_t f = 0; answered && f < herd_cluster_failure_count(c); f++) {
				const char *h = NULL, *r = NULL;

				answered = herd_cluster_failure(c, f, &h, &r) != HERD_OK ||
					   strcmp(h, job->pool[i].host) != 0;
			}
			if (!answered)
				continue;
			herd__log_warn("job %s: node %s answers again: taken back", job->id,
				       job->pool[i].host);
			unlist_member(job, i);
			pthread_mutex_lock(&job->mu);
			m->role = HERD_JOB_NODE_SPARE;
			m->why = NULL;
			m->since = 0;
			m->lost = false;
			pthread_mutex_unlock(&job->mu);
		}
	}
	herd_cluster_free(c);
	herd__error(HERD_OK, "%s", kept);
}

/*
 * An elastic job's nodes for its next run, after judge: with probe, the
 * nodes excluded earlier for losing contact that answer again come back
 * as spares (readmit); then spares fill the job up to max_nodes.  false,
 * with why and no role changed, when fewer than min_nodes would remain.
 */
static bool refill(herd_job *job, bool probe, char *why, size_t cap)
{
	char was[4096], now[4096];
	size_t in, spares;

	run_hosts(job, was, sizeof(was));   /* the last run's, to say what changes */
	if (probe && count_role(job, HERD_JOB_NODE_IN) < (size_t)job->spec.max_nodes)
		readmit(job);
	in = count_role(job, HERD_JOB_NODE_IN);
	spares = count_role(job, HERD_JOB_NODE_SPARE);
	if (in + spares < (size_t)job->spec.min_nodes) {
		hosts_in(job, now, sizeof(now));
		snprintf(why, cap, "%zu node%s left (%.900s), fewer than the minimum of %d",
			 in + spares, in + spares == 1 ? "" : "s", in + spares > 0 ? now : "none",
			 job->spec.min_nodes);
		return false;
	}
	for (size_t i = 0; i < job->npool && in < (size_t)job->spec.max_nodes; i++)
		if (job->members[i].role == HERD_JOB_NODE_SPARE) {
			pthread_mutex_lock(&job->mu);
			job->members[i].role = HERD_JOB_NODE_IN;
			pthread_mutex_unlock(&job->mu);
			in++;
		}
	hosts_in(job, now, sizeof(now));
	if (strcmp(was, now) != 0)
		herd__log_warn("job %s: nodes now %s (%zu of %d-%d; %zu ranks)", job->id, now, in,
			       job->spec.min_nodes, job->spec.max_nodes,
			       in * (size_t)job->spec.per_node);
	return true;
}

/* Whether the caller has asked the job to end (no restart, no retry). */
static bool end_asked(herd_job *job)
{
	bool asked;

	pthread_mutex_lock(&job->mu);
	asked = job->kill_req || job->end_sig != 0 || job->stopped_by != 0 || job->limit_hit ||
		job->interrupted != 0;
	pthread_mutex_unlock(&job->mu);
	return asked;
}

/* The failure's words end with why the job was not restarted. */
static void not_restarted(herd_job *job, const char *why)
{
	const char *f;

	herd__log_warn("job %s: not restarted: %s", job->id, why);
	pthread_mutex_lock(&job->mu);
	f = keep(job, "%s; not restarted: %s", job->failure != NULL ? job->failure
		 : "a rank failed", why);
	if (f != NULL)
		job->failure = f;
	pthread_mutex_unlock(&job->mu);
}

/*
 * A run of an elastic job did not come up: the nodes that failed to are
 * excluded and the run is tried again without them (not a restart; each
 * try leaves out one node more, and the nodes left out are asked again
 * only at a restart).  false when no node is to blame, the caller asked
 * the job to end, or too few nodes remain (then why says so).
 */
static bool start_again(herd_job *job, char *why, size_t cap)
{
	why[0] = '\0';
	if (job->rt == NULL || end_asked(job))
		return false;
	/* A fixed job fails; the nodes the health gate refused go on the
	 * list all the same. */
	for (size_t i = 0; !job->elastic && i < job->nnodes; i++)
		if (refused_by_gate(job->rt[i].fault))
			exclude_member(job, pool_of(job, job->rt[i].node->host), job->rt[i].fault,
				       OUT_FOR_GOOD);
	if (!job->elastic || judge(job, false) == 0)
		return false;
	free_rt(job);
	if (!refill(job, false, why, cap))
		return false;
	if (place_run(job) != HERD_OK) {
		snprintf(why, cap, "%s", herd_last_error());
		return false;
	}
	return true;
}

static void *supervise(void *arg)
{
	herd_job *job = arg;

	for (;;) {
		/* A health check runs before a node says ready: its time is
		 * added (level 1 checks each GPU in seconds, level 2 burns). */
		int64_t deadline = herd__net_deadline(job->spec.start_timeout_ms +
						      (job->spec.health_check == 1 ? 60000
						       : job->spec.health_check == 2 ? 300000 : 0));
		bool up = false, restart = false;
		char why[1024];
		herd_status st;

		job->runs++;
		st = run_begin(job, deadline);
		if (st == HERD_OK)
			st = run_watch(job, deadline, &up);
		if (st == HERD_OK)
			say_node_words(job);
		if (st != HERD_OK) {
			char msg[2048], err[1024];

			herd__strlcpy(err, herd_last_error(), sizeof(err));
			if (start_again(job, why, sizeof(why)))
				continue;
			snprintf(msg, sizeof(msg), "%s%s%s", err, why[0] != '\0' ? "; " : "", why);
			herd__outq_drain(job->outq, output_give_up, job);
			pthread_mutex_lock(&job->mu);
			job->state = HERD_JOB_FAILED;
			if (job->restart_count == 0 && !job->launched) {
				job->launch_st = st;
				job->launch_err = strdup(msg);
				job->launched = true;
				set_over(job);
				pthread_mutex_unlock(&job->mu);
				free_rt(job);
				stop_holders(job);
				return NULL;
			}
			if (job->first_failed < 0)
				job->failure = keep(job, "restart %d did not start: %s",
						    job->restart_count, msg);
			pthread_mutex_unlock(&job->mu);
			free_rt(job);
			stop_holders(job);
			pthread_mutex_lock(&job->mu);
			job->exit_status = 1;
			if (job->first_failed >= 0)
				job->exit_status = status_of(&job->ranks[job->first_failed].st);
			set_over(job);
			pthread_mutex_unlock(&job->mu);
			return NULL;
		}
		pthread_mutex_lock(&job->mu);
		/* A failure restarts the job, unless the caller asked it to end
		 * (herd_job_kill, or a signal that ends a program): the ranks'
		 * deaths from that signal are no failure to recover from. */
		if (job->first_failed >= 0 && !job->kill_req && job->end_sig == 0 &&
		    job->stopped_by == 0 && !job->limit_hit &&
		    job->restart_count < job->spec.restarts) {
			/* The failure may end in the rank's own words: the restart
			 * is a line of its own, not read as theirs. */
			herd__log_warn("job %s: %s", job->id,
				       job->failure != NULL ? job->failure : "a rank failed");
			restart = true;
		}
		pthread_mutex_unlock(&job->mu);
		/* An elastic job's nodes at fault go, whatever comes next. */
		if (job->elastic && job->first_failed >= 0 && !end_asked(job))
			judge(job, true);
		free_rt(job);
		if (restart && job->elastic && !refill(job, true, why, sizeof(why))) {
			not_restarted(job, why);
			restart = false;
		}
		if (restart && job->elastic && place_run(job) != HERD_OK) {
			snprintf(why, sizeof(why), "%s", herd_last_error());
			not_restarted(job, why);
			restart = false;
		}
		if (!restart)
			break;
		pthread_mutex_lock(&job->mu);
		herd__log_warn("job %s: restarting every rank (restart %d of %d)", job->id,
			       job->restart_count + 1, job->spec.restarts);
		job->restart_count++;
		pthread_mutex_unlock(&job->mu);
	}
	stop_holders(job);
	finish(job);
	return NULL;
}

/* ---- the API ------------------------------------------------------------------------ */

/* A random token in trace_dir/launcher, for the nodes to tell whether
 * they share the directory (launch_internal.h, "Flight recorders"). */
static herd_status trace_token(herd_job *job)
{
	unsigned char r[16];
	char path[PATH_MAX + 16];
	herd_status st;

	HERD_CHECK(herd__auth_random(r, sizeof(r)));
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(job->trace_token + 2 * i, 3, "%02x", r[i]);
	snprintf(path, sizeof(path), "%s/launcher", job->trace_dir);
	st = herd__write_file_atomic(path, job->trace_token, strlen(job->trace_token), 0600);
	if (st != HERD_OK)
		job->trace_token[0] = '\0';
	return st;
}

/*
 * The job's trace directory, BASE/JOB_ID, where each rank keeps its
 * flight recorder (herd/trace.h): BASE is HERD_TRACE_DIR as the job's
 * environment gives it, else $XDG_RUNTIME_DIR/herd/trace, else
 * /tmp/herd-trace-UID.  Made here (the ranks of other nodes make theirs);
 * the ranks get it as HERD_TRACE_DIR in job->env.
 */
static herd_status trace_dir(herd_job *job)
{
	const char *given = NULL;
	char base[PATH_MAX], entry[PATH_MAX + 32], **env;
	size_t n = 0, at = SIZE_MAX;
	int len;

	for (; job->env[n] != NULL; n++)
		if (strncmp(job->env[n], "HERD_TRACE_DIR=", 15) == 0) {
			at = n;
			given = job->env[n] + 15;
		}
	herd__trace_base(given, base, sizeof(base));
	len = snprintf(job->trace_dir, sizeof(job->trace_dir), "%s/%s", base, job->id);
	if (len < 0 || (size_t)len >= sizeof(job->trace_dir))
		return herd__error(HERD_EINVAL, "HERD_TRACE_DIR: %.64s...: too long a directory name",
				   base);
	snprintf(entry, sizeof(entry), "HERD_TRACE_DIR=%s", job->trace_dir);
	if (herd__mkdirs(job->trace_dir, 0700) != HERD_OK)
		herd__log_warn("job %s: no flight recorders kept: %s", job->id, herd_last_error());
	else if (trace_token(job) != HERD_OK)
		herd__log_warn("job %s: the flight recorders of other nodes will not be copied "
			       "here: %s", job->id, herd_last_error());
	if (at != SIZE_MAX) {
		free(job->env[at]);
		job->env[at] = NULL;
		return herd__strdup(&job->env[at], entry);
	}
	env = realloc(job->env, (n + 2) * sizeof(*env));
	if (env == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for the job's environment");
	env[n + 1] = NULL;
	job->env = env;
	job->spec.env = (const char *const *)env;
	return herd__strdup(&env[n], entry);
}

herd_status herd__launch_new_id(char *id, size_t cap)
{
	unsigned char r[4];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, r, sizeof(r)) : -1;

	if (fd >= 0)
		close(fd);
	if (got != (ssize_t)sizeof(r))
		return herd__error(HERD_ESYS, "reading /dev/urandom for the job id");
	snprintf(id, cap, "%lx-%02x%02x%02x%02x", (unsigned long)time(NULL), r[0], r[1], r[2],
		 r[3]);
	return HERD_OK;
}

herd_status herd_job_place(const herd_job_spec *spec, char ***hosts, int *nranks)
{
	const herd__launch_backend *backend = NULL;
	herd__launch_node *nodes = NULL;
	size_t n = 0, bytes = 0;
	char left_out[1024], **block, *p;
	int count;
	herd_status st;

	if (hosts == NULL || nranks == NULL)
		return herd__error(HERD_EINVAL, "herd_job_place: hosts or nranks is NULL");
	*hosts = NULL;
	*nranks = 0;
	HERD_CHECK(check_spec(spec));
	HERD_CHECK(herd__launch_backend_for(spec->where, &backend));
	HERD_CHECK(backend->resolve(spec, &nodes, &n));
	HERD_CHECK_GOTO(herd__exclude_filter(&nodes, &n, spec->exclude, left_out,
					     sizeof(left_out)), st, out);
	if (n == 0) {
		st = herd__error(HERD_EUNAVAIL, "every node is excluded: %s (herd exclude ls lists "
				 "them)", left_out);
		goto out;
	}
	if (spec->max_nodes > 0) {
		if (n < (size_t)spec->min_nodes) {
			st = herd__error(HERD_ENORESOURCE, "herd_job_spec.min_nodes is %d, but the "
					 "job has %zu node%s", spec->min_nodes, n, n == 1 ? "" : "s");
			goto out;
		}
		for (size_t i = (size_t)spec->max_nodes; i < n; i++) {
			free(nodes[i].host);
			nodes[i].host = NULL;
		}
		n = n < (size_t)spec->max_nodes ? n : (size_t)spec->max_nodes;
	}
	count = spec->max_nodes > 0 ? spec->per_node * (int)n : spec->nranks;
	HERD_CHECK_GOTO(herd__launch_place(nodes, &n, count, spec->per_node), st, out);
	for (size_t i = 0; i < n; i++)
		bytes += (size_t)nodes[i].nranks * (strlen(nodes[i].host) + 1);
	block = malloc((size_t)count * sizeof(char *) + bytes);
	if (block == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory for %d ranks' hosts", count);
		goto out;
	}
	p = (char *)(block + count);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < nodes[i].nranks; k++) {
			size_t len = strlen(nodes[i].host) + 1;

			block[nodes[i].ranks[k]] = memcpy(p, nodes[i].host, len);
			p += len;
		}
	*hosts = block;
	*nranks = count;
	st = HERD_OK;
out:
	herd__launch_nodes_free(nodes, n);
	return st;
}

/* herd_job_launch, or with member_id a service's replica (launch_internal.h). */
static herd_status launch(herd_job **out, const herd_job_spec *spec, const char *member_id)
{
	herd_job *job = NULL;
	char left_out[1024];
	sigset_t all, old;
	herd_status st;
	int rc;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_job_launch: out is NULL");
	*out = NULL;
	HERD_CHECK(check_spec(spec));
	HERD_CHECK(herd__calloc(&job, 1, sizeof(*job), "a job"));
	job->wake[0] = job->wake[1] = -1;
	job->over_fd = -1;
	job->ctl_fd = -1;
	job->first_failed = job->candidate = job->blamed = -1;
	pthread_mutex_init(&job->mu, NULL);
	herd__net_cond_init(&job->cv);
	HERD_CHECK_GOTO(copy_spec(job, spec), st, fail);
	HERD_CHECK_GOTO(herd__launch_backend_for(spec->where, &job->backend), st, fail);
	HERD_CHECK_GOTO(job->backend->resolve(&job->spec, &job->pool, &job->npool), st, fail);
	HERD_CHECK_GOTO(herd__exclude_filter(&job->pool, &job->npool, job->spec.exclude, left_out,
					     sizeof(left_out)), st, fail);
	if (left_out[0] != '\0') {
		if (member_id == NULL)
			herd__log_warn("nodes left out of the job, as excluded: %s", left_out);
		if (job->npool == 0) {
			st = herd__error(HERD_EUNAVAIL, "every node is excluded: %s (herd exclude "
					 "ls lists them)", left_out);
			goto fail;
		}
	}
	HERD_CHECK_GOTO(members_init(job), st, fail);
	HERD_CHECK_GOTO(place_run(job), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&job->batch, BATCH_CAP, 1, "the output batch"), st, fail);
	if (member_id != NULL) {
		snprintf(job->id, sizeof(job->id), "%s", member_id);
	} else {
		HERD_CHECK_GOTO(herd__launch_new_id(job->id, sizeof(job->id)), st, fail);
		HERD_CHECK_GOTO(trace_dir(job), st, fail);
	}
	job->t_start = real_now();
	if (member_id == NULL &&
	    herd__control_listen(job->id, &job->ctl_fd, job->ctl_path, sizeof(job->ctl_path)) !=
	    HERD_OK)
		herd__log_warn("job %s: herd jobs will not list it: %s", job->id, herd_last_error());
	job->straggle = (herd__straggle)HERD__STRAGGLE_INIT;
	job->straggle_ms = 10000;
	HERD_CHECK_GOTO(herd__param_ms(HERD__P_STRAGGLER_CHECK, &job->straggle_ms), st, fail);
	if (spec->where == HERD_JOB_K8S)
		HERD_CHECK_GOTO(herd__read_secret_file(herd__param_str(HERD__P_JOB_SECRET_FILE),
						       job->secret, sizeof(job->secret)), st, fail);
	else
		HERD_CHECK_GOTO(herd_store_secret_generate(job->secret), st, fail);
	if (pipe2(job->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		st = herd__error_errno(HERD_ESYS, errno, "cannot create the job's wake-up pipe");
		goto fail;
	}
	job->over_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (job->over_fd < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "cannot create the descriptor that tells "
				       "the job is over");
		goto fail;
	}
	/* The thread takes no process signals (the program's handlers run
	 * elsewhere), and a SIGPIPE from a channel stays pending on it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	st = spec->output == herd_job_output_stdio ? herd__outq_start(&job->outq, OUTPUT_QUEUE_MAX)
						   : HERD_OK;
	rc = st == HERD_OK ? pthread_create(&job->thread, NULL, supervise, job) : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (st != HERD_OK)
		goto fail;
	if (rc != 0) {
		st = herd__error_errno(HERD_ESYS, rc, "cannot start the job's supervisor thread");
		goto fail;
	}
	job->thread_started = true;
	pthread_mutex_lock(&job->mu);
	while (!job->launched)
		pthread_cond_wait(&job->cv, &job->mu);
	st = job->launch_st;
	pthread_mutex_unlock(&job->mu);
	if (st != HERD_OK) {
		st = herd__error(st, "%s", job->launch_err != NULL ? job->launch_err
								 : "the job did not start");
		goto fail;
	}
	*out = job;
	return HERD_OK;
fail:
	/* A job that did not launch has no recorder worth keeping (its
	 * error says why); its directory, the token in it, goes. */
	if (job->trace_dir[0] != '\0')
		herd__trace_dir_remove(job->trace_dir);
	herd_job_free(job);
	return st;
}

herd_status herd_job_launch(herd_job **out, const herd_job_spec *spec)
{
	return launch(out, spec, NULL);
}

herd_status herd__job_launch_member(herd_job **out, const herd_job_spec *spec, const char *id)
{
	return launch(out, spec, id);
}

herd_status herd_job_wait(herd_job *job, int timeout_ms, int *exit_status)
{
	int64_t deadline = herd__net_deadline(timeout_ms);
	herd_status st = HERD_OK;

	if (job == NULL)
		return herd__error(HERD_EINVAL, "herd_job_wait: job is NULL");
	HERD_CHECK(herd__check_timeout("herd_job_wait", timeout_ms));
	pthread_mutex_lock(&job->mu);
	while (!job->over) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&job->cv, &job->mu);
		} else if (herd__net_cond_wait_until(&job->cv, &job->mu, deadline) == ETIMEDOUT &&
			   !job->over) {
			st = herd__error(HERD_ETIMEDOUT, "job %s still running after %d ms", job->id,
					 timeout_ms);
			break;
		}
	}
	if (st == HERD_OK && exit_status != NULL)
		*exit_status = job->exit_status;
	pthread_mutex_unlock(&job->mu);
	return st;
}

int herd_job_fd(const herd_job *job)
{
	if (job == NULL)
		return herd__error(HERD_EINVAL, "herd_job_fd: job is NULL"), -1;
	return job->over_fd;
}

void herd_job_output_stdio(void *userdata, int rank, const char *host, herd_job_stream stream,
			   const char *line, size_t len)
{
	char head[512];
	struct iovec iov[3] = { { head, 0 }, { (void *)line, len }, { "\n", 1 } };

	iov[0].iov_len = herd_job_format_prefix(head, sizeof(head), (const char *)userdata, host,
						rank);
	/* One write per line: lines of different ranks never mix. */
	if (writev(stream == HERD_JOB_STDERR ? STDERR_FILENO : STDOUT_FILENO, iov, 3) < 0) {
		/* A sink has no caller to report to; a closed stdout loses the line. */
	}
}

herd_status herd_job_signal(herd_job *job, int sig)
{
	herd_status st = HERD_OK;

	if (job == NULL)
		return herd__error(HERD_EINVAL, "herd_job_signal: job is NULL");
	if (sig < 1 || sig > 64)
		return herd__error(HERD_EINVAL, "herd_job_signal: %d is not a signal number", sig);
	pthread_mutex_lock(&job->mu);
	if (!job->over) {
		if (job->npending == MAX_PENDING_SIGNALS)
			st = herd__error(HERD_EBUSY, "%d signals already waiting to be delivered "
					 "to job %s", MAX_PENDING_SIGNALS, job->id);
		else
			job->pending[job->npending++] = sig;
		if (st == HERD_OK && ending_signal(sig))
			job->end_sig = sig;
		/* The job is ending anyway: its output need not wait for a
		 * reader that has stopped reading (output_give_up). */
		if (job->first_failed >= 0 || job->kill_req)
			job->late_signal = true;
	}
	pthread_mutex_unlock(&job->mu);
	if (st == HERD_OK)
		wake(job);
	return st;
}

herd_status herd_job_interrupt(herd_job *job, int sig)
{
	if (job == NULL)
		return herd__error(HERD_EINVAL, "herd_job_interrupt: job is NULL");
	if (interrupt_name(sig) == NULL)
		return herd__error(HERD_EINVAL, "herd_job_interrupt: signal %d is not SIGINT, "
				   "SIGTERM, SIGHUP or SIGQUIT", sig);
	pthread_mutex_lock(&job->mu);
	if (!job->over) {
		/* Whatever else it does, no restart follows. */
		job->end_sig = sig;
		if (job->interrupted != 0) {
			job->interrupt_kill = job->int_kill_sent = true;
		} else {
			job->interrupted = sig;
			job->interrupt_go = true;
			job->ended_ranks = live_ranks(job);
			/* Every rank has ended: the job's end stands (finish),
			 * and its output is not waited for; a restart about to
			 * begin is kept from starting its ranks. */
			if (job->ended_ranks == NULL)
				job->late_signal = true;
		}
	}
	pthread_mutex_unlock(&job->mu);
	wake(job);
	return HERD_OK;
}

herd_status herd_job_kill(herd_job *job)
{
	if (job == NULL)
		return herd__error(HERD_EINVAL, "herd_job_kill: job is NULL");
	pthread_mutex_lock(&job->mu);
	if (!job->over)
		job->kill_req = true;
	pthread_mutex_unlock(&job->mu);
	wake(job);
	return herd_job_wait(job, HERD_TIMEOUT_NONE, NULL);
}

int herd_job_size(const herd_job *job)
{
	herd_job *j = (herd_job *)job;
	int n;

	if (job == NULL)
		return 0;
	pthread_mutex_lock(&j->mu);
	n = job->nranks;
	pthread_mutex_unlock(&j->mu);
	return n;
}

size_t herd_job_nodes(const herd_job *job)
{
	return job != NULL ? job->npool : 0;
}

herd_status herd_job_node(const herd_job *job, size_t i, herd_job_node_status *out)
{
	herd_job *j = (herd_job *)job;
	const struct member *m;

	if (job == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_job_node: %s is NULL",
				   job == NULL ? "job" : "out");
	if (i >= job->npool)
		return herd__error(HERD_EINVAL, "herd_job_node: node %zu of a job of %zu nodes", i,
				   job->npool);
	pthread_mutex_lock(&j->mu);
	m = &job->members[i];
	out->host = job->pool[i].host;
	out->role = m->role;
	out->node_rank = m->node_rank;
	out->faults = m->faults;
	out->why = m->role == HERD_JOB_NODE_OUT ? m->why : NULL;
	out->since = m->role == HERD_JOB_NODE_OUT ? m->since : 0;
	pthread_mutex_unlock(&j->mu);
	return HERD_OK;
}

const char *herd_job_node_role_name(herd_job_node_role role)
{
	switch (role) {
	case HERD_JOB_NODE_IN: return "in";
	case HERD_JOB_NODE_SPARE: return "spare";
	case HERD_JOB_NODE_OUT: return "out";
	}
	return "?";
}

herd_status herd_job_rank(const herd_job *job, int rank, herd_job_rank_status *out)
{
	herd_job *j = (herd_job *)job;

	if (job == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_job_rank: %s is NULL",
				   job == NULL ? "job" : "out");
	pthread_mutex_lock(&j->mu);
	if (rank < 0 || rank >= job->nranks) {
		int n = job->nranks;

		pthread_mutex_unlock(&j->mu);
		return herd__error(HERD_EINVAL, "herd_job_rank: rank %d of a job of %d ranks",
				   rank, n);
	}
	*out = job->ranks[rank].st;
	pthread_mutex_unlock(&j->mu);
	return HERD_OK;
}

const char *herd_job_trace_dir(const herd_job *job)
{
	return job != NULL && job->trace_dir[0] != '\0' ? job->trace_dir : NULL;
}

const char *herd_job_id(const herd_job *job)
{
	return job != NULL ? job->id : NULL;
}

int herd_job_restart_count(const herd_job *job)
{
	herd_job *j = (herd_job *)job;
	int n;

	if (job == NULL)
		return 0;
	pthread_mutex_lock(&j->mu);
	n = job->restart_count;
	pthread_mutex_unlock(&j->mu);
	return n;
}

const char *herd_job_failure(const herd_job *job)
{
	herd_job *j = (herd_job *)job;
	const char *f;

	if (job == NULL)
		return NULL;
	pthread_mutex_lock(&j->mu);
	f = job->failure;
	pthread_mutex_unlock(&j->mu);
	return f;
}

void herd_job_free(herd_job *job)
{
	if (job == NULL)
		return;
	if (job->thread_started) {
		herd_job_kill(job);
		pthread_join(job->thread, NULL);
	}
	free_rt(job);
	control_close(job);
	herd__outq_free(job->outq);
	for (int r = 0; job->ranks != NULL && r < job->rank_cap; r++) {
		for (int k = 0; k < TAIL_LINES; k++)
			free(job->ranks[r].tail[k]);
		free(job->ranks[r].prefix);
	}
	free(job->ranks);
	for (size_t i = 0; i < job->nstrings; i++)
		free(job->strings[i]);
	free(job->strings);
	herd__launch_nodes_free(job->nodes, job->nnodes);
	herd__launch_nodes_free(job->pool, job->npool);
	free(job->members);
	herd__launch_strv_free(job->argv);
	herd__launch_strv_free(job->env);
	free(job->hosts);
	free(job->exclude);
	free(job->workdir);
	free(job->log_dir);
	free(job->prefix);
	free(job->herd_program);
	free(job->launch_err);
	free(job->batch);
	if (job->wake[0] >= 0)
		close(job->wake[0]);
	if (job->wake[1] >= 0)
		close(job->wake[1]);
	if (job->over_fd >= 0)
		close(job->over_fd);
	pthread_cond_destroy(&job->cv);
	pthread_mutex_destroy(&job->mu);
	free(job);
}

herd_job_state herd_job_get_state(const herd_job *job)
{
	herd_job *j = (herd_job *)job;
	herd_job_state s;

	if (job == NULL)
		return HERD_JOB_RUNNING;
	pthread_mutex_lock(&j->mu);
	s = job->over ? job->state : HERD_JOB_RUNNING;
	pthread_mutex_unlock(&j->mu);
	return s;
}

const char *herd_job_state_name(herd_job_state state)
{
	switch (state) {
	case HERD_JOB_RUNNING: return "running";
	case HERD_JOB_SUCCEEDED: return "succeeded";
	case HERD_JOB_FAILED: return "failed";
	case HERD_JOB_TIME_LIMIT: return "time_limit";
	case HERD_JOB_INTERRUPTED: return "interrupted";
	case HERD_JOB_STOPPED: return "stopped";
	}
	return "?";
}

const char *herd_job_rank_state_name(herd_job_rank_state state)
{
	switch (state) {
	case HERD_JOB_RANK_PENDING: return "pending";
	case HERD_JOB_RANK_RUNNING: return "running";
	case HERD_JOB_RANK_EXITED: return "exited";
	case HERD_JOB_RANK_SIGNALED: return "signaled";
	case HERD_JOB_RANK_FAILED_START: return "failed to start";
	}
	return "?";
}
