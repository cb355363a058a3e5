/*
 * sdk/launch/serve.c - a service (herd/serve.h): replicas, each a job of
 * one rank (job.c, started by herd__job_launch_member on a thread of its
 * own, as a launch may wait on ssh), behind HAProxy (haproxy.c), and the
 * service's thread that watches them, restarts them, rolls them and
 * scales them.
 *
 * A replica's life:
 *
 *   off -> starting -> ready -> draining -> stopping -> off
 *              \          \_____________________/
 *               \___ failed (exited, no check passed in time, check
 *                    failing 10 s) -> backoff -> starting, or down (no restarts left)
 *
 * Starting is the launch thread's: it starts the replica's job and asks
 * its health itself (an HTTP GET or a connect from this node, every 100
 * ms) until it passes; only then does the replica's HAProxy slot leave
 * maintenance (HAProxy takes a server that leaves maintenance as up until
 * its own first check fails: a replica not yet listening would get
 * requests).  From then on HAProxy's checks watch it.  The thread turns
 * every TICK_MS: reads HAProxy's statistics, moves each replica on, rolls,
 * scales, and publishes the status.  Everything the service does to a
 * replica happens on this thread; the API's calls leave requests under
 * the mutex and wake it.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "haproxy.h"
#include "herd/serve.h"
#include "topo/hostlist.h"
#include "launch_internal.h"
#include "loop.h"
#include "net.h"

#define SLOTS_MAX 1024
#define TICK_MS 250
#define UNHEALTHY_MS 10000
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define STABLE_MS 60000
#define EVENTS_MAX 32
#define QUEUE_MS 30000
#define CHECK_MS 1000
#define CONNECT_MS 300
#define CHECK_EVERY_MS 100
#define PREFIX_DEFAULT "[%h:r%r] "

typedef enum rstate {
	RS_OFF = 0, RS_STARTING, RS_READY, RS_DRAINING, RS_STOPPING, RS_BACKOFF, RS_DOWN
} rstate;

static const char *const rstate_names[] = { "off", "starting", "ready", "draining",
					    "stopping", "backoff", "down" };

/* What follows a replica's stop. */
typedef enum after { AFTER_OFF = 0, AFTER_START, AFTER_FAIL } after;

struct replica {
	herd_serve *svc;
	int index;
	rstate st;
	after then;
	size_t node;               /* where it runs (or ran) */
	size_t bad_node;           /* where it last failed; SIZE_MAX: nowhere */
	int port;
	herd_job *job;
	herd__watcher over;        /* its job's descriptor */
	long pid;
	int64_t since, until, down_since;
	int64_t launched_at;       /* when its launch began */
	int restarts, fails;
	unsigned gen;              /* the restart generation it was started in */
	char why[600];             /* why it failed last */
	herd__haproxy_stat stat;   /* HAProxy's figures of its slot, last read */
	/* The launch thread's: set before it starts, read after it is done. */
	bool launching;
	pthread_t thread;
	herd_job_spec jspec;
	char **env;
	char *exclude;
	char *prefix;              /* the output prefix, its %r the replica's index */
	char jid[96];
	herd_job *launched;        /* its job, when the launch started one */
	bool healthy;              /* its check passed */
	char launch_err[600];      /* why not */
	bool launch_done, cancel;  /* under svc->mu */
};

struct herd_serve {
	herd_serve_spec spec;
	char **argv, **env;
	char *hosts, *bind, *health, *workdir, *herd_program;
	char id[64];
	const herd__launch_backend *be;
	herd__launch_node *nodes;
	size_t nnodes;
	char (*addr)[64];          /* each node's address for HAProxy */
	char *hostlist;            /* the nodes, compressed, for the status */
	herd__haproxy hp;
	struct replica *r;
	int nslots;
	int wanted;
	unsigned gen;
	bool rolling;              /* under mu: request_restart reads it */
	bool stopping;
	bool killing;              /* stop without draining: replicas killed at once */
	herd__haproxy_stat backend;
	herd__haproxy_stat *stats;  /* nslots: where each turn reads the slots' figures */
	/* autoscaling: since when fewer replicas would do, and the most wanted since */
	int64_t low_since;
	int low_peak;
	long long low_peak_load;
	int64_t t_start;
	time_t started;

	pthread_t thread;
	bool thread_started;
	herd__loop loop;
	herd__watcher wake_w, ctl_w;
	herd__timer tick;
	int wake[2];
	int over_fd;
	int ctl_fd;
	char ctl_path[256];

	pthread_mutex_t mu;        /* guards what follows */
	pthread_cond_t cv;
	int req_scale;             /* -1: none */
	int req_restart;           /* 0: none, 1: all at once, 2: rolling */
	int req_stop;              /* 0: none, 1: drain and stop, 2: kill at once */
	bool stopping_seen;        /* a stop was asked: the next interrupt kills */
	herd_status start_st;      /* HAProxy's start, from the thread */
	bool start_done;
	bool over, failed;
	char failure[1024];
	char *status_json;
	int nready;
	char *events[EVENTS_MAX];
	size_t nevents;            /* ever; the ring holds the last EVENTS_MAX */
};

static void event(herd_serve *svc, const char *fmt, ...) HERD_PRINTF(2, 3);

static void event(herd_serve *svc, const char *fmt, ...)
{
	char line[1024], *copy;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	copy = strdup(line);
	pthread_mutex_lock(&svc->mu);
	free(svc->events[svc->nevents % EVENTS_MAX]);
	svc->events[svc->nevents++ % EVENTS_MAX] = copy;
	pthread_mutex_unlock(&svc->mu);
	if (svc->spec.event != NULL)
		svc->spec.event(svc->spec.event_userdata, line);
	else
		herd__log_info("service %s: %s", svc->id, line);
}

static const char *host_of(const herd_serve *svc, const struct replica *r)
{
	return svc->nodes[r->node].host;
}

static void wake(herd_serve *svc)
{
	ssize_t n = write(svc->wake[1], "w", 1);

	(void)n;   /* a full pipe wakes the thread already */
}

/* ---- the spec ------------------------------------------------------------------ */

static herd_status check_spec(const herd_serve_spec *s)
{
	if (s == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_start: spec is NULL");
	HERD__CHECK_VERSION("herd_serve_start", s, herd_serve_spec, SERVE_SPEC);
	if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0')
		return herd__error(HERD_EINVAL, "herd_serve_spec.argv: expected a program and its "
				   "arguments, NULL-terminated");
	if (s->min_replicas < 1 || s->max_replicas < s->min_replicas ||
	    s->max_replicas > SLOTS_MAX)
		return herd__error(HERD_EINVAL, "herd_serve_spec: min_replicas %d, max_replicas "
				   "%d; expected 1 <= min_replicas <= max_replicas <= %d",
				   s->min_replicas, s->max_replicas, SLOTS_MAX);
	if (s->replicas != 0 && (s->replicas < s->min_replicas || s->replicas > s->max_replicas))
		return herd__error(HERD_EINVAL, "herd_serve_spec.replicas is %d; expected %d to %d "
				   "(min_replicas to max_replicas) or 0", s->replicas,
				   s->min_replicas, s->max_replicas);
	if (s->port < 1 || s->port > 65535)
		return herd__error(HERD_EINVAL, "herd_serve_spec.port is %d; expected the front "
				   "door's port, 1 to 65535", s->port);
	if (s->replica_port < 0 || s->replica_port > 65535 ||
	    (s->replica_port ? s->replica_port : s->port + 1) + s->max_replicas - 1 > 65535)
		return herd__error(HERD_EINVAL, "herd_serve_spec.replica_port is %d: the ports of "
				   "%d replicas from it (default port + 1) go beyond 65535",
				   s->replica_port, s->max_replicas);
	{
		int first = s->replica_port ? s->replica_port : s->port + 1;

		if (s->port >= first && s->port < first + s->max_replicas)
			return herd__error(HERD_EINVAL, "herd_serve_spec.port %d is among the "
					   "replicas' ports, %d to %d (replica_port)", s->port,
					   first, first + s->max_replicas - 1);
	}
	if (s->output == herd_job_output_stdio)
		HERD_CHECK(herd__launch_check_prefix(s->output_userdata, "herd_serve_spec's "
						     "prefix (output_userdata)"));
	if (s->health != NULL && strcmp(s->health, "tcp") != 0 &&
	    (s->health[0] != '/' || strpbrk(s->health, " \t\r\n#") != NULL))
		return herd__error(HERD_EINVAL, "herd_serve_spec.health is \"%s\"; expected an "
				   "HTTP path (\"/health\", no spaces) or \"tcp\"", s->health);
	if (s->gpus_per_replica < 0 || s->start_timeout_ms < 0 || s->grace_ms < 0 ||
	    s->restarts < 0 || s->target < 0 || s->cooldown_ms < 0 || s->replica_conns < 0 ||
	    s->connect_timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_serve_spec: gpus_per_replica, "
				   "start_timeout_ms, grace_ms, restarts, target, cooldown_ms, "
				   "replica_conns and connect_timeout_ms must not be negative");
	if (s->where != HERD_JOB_LOCAL && (s->hosts == NULL || s->hosts[0] == '\0') &&
	    s->where != HERD_JOB_SLURM)
		return herd__error(HERD_EINVAL, "herd_serve_spec.hosts: the hostlist or hostfile "
				   "of the nodes is required (where is %s)",
				   s->where == HERD_JOB_HOSTS ? "HERD_JOB_HOSTS" : "HERD_JOB_HOSTFILE");
	return HERD_OK;
}

static herd_status copy_spec(herd_serve *svc, const herd_serve_spec *s)
{
	svc->spec = *s;
	HERD_CHECK(herd__launch_strv_copy(&svc->argv, s->argv, "the replicas' argv"));
	HERD_CHECK(herd__launch_strv_copy(&svc->env, s->env, "the replicas' environment"));
	HERD_CHECK(herd__strdup(&svc->hosts, s->hosts));
	HERD_CHECK(herd__strdup(&svc->bind, s->bind != NULL ? s->bind : "127.0.0.1"));
	HERD_CHECK(herd__strdup(&svc->health, s->health));
	HERD_CHECK(herd__strdup(&svc->workdir, s->workdir));
	HERD_CHECK(herd__strdup(&svc->herd_program, s->herd_program));
	svc->spec.argv = (const char *const *)svc->argv;
	svc->spec.env = (const char *const *)svc->env;
	svc->spec.hosts = svc->hosts;
	svc->spec.bind = svc->bind;
	svc->spec.health = svc->health;
	svc->spec.workdir = svc->workdir;
	svc->spec.herd_program = svc->herd_program;
	if (svc->spec.replica_port == 0)
		svc->spec.replica_port = s->port + 1;
	if (svc->spec.start_timeout_ms == 0)
		svc->spec.start_timeout_ms = 60000;
	if (svc->spec.grace_ms == 0)
		svc->spec.grace_ms = 10000;
	if (svc->spec.cooldown_ms == 0)
		svc->spec.cooldown_ms = 30000;
	if (svc->spec.output == NULL) {
		svc->spec.output = herd_job_output_stdio;
		svc->spec.output_userdata = (void *)PREFIX_DEFAULT;
	}
	svc->wanted = s->replicas != 0 ? s->replicas : s->min_replicas;
	return HERD_OK;
}

/* Each node's address as HAProxy must be given it: an IP address. */
static herd_status resolve_addrs(herd_serve *svc)
{
	HERD_CHECK(herd__calloc(&svc->addr, svc->nnodes, sizeof(*svc->addr), "the nodes' "
				"addresses"));
	for (size_t i = 0; i < svc->nnodes; i++) {
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
		struct addrinfo *ai = NULL;
		const char *host = svc->nodes[i].host, *at = strrchr(host, '@');
		char slurm_addr[256];
		int rc;

		if (svc->spec.where == HERD_JOB_LOCAL) {
			snprintf(svc->addr[i], sizeof(svc->addr[i]), "127.0.0.1");
			continue;
		}
		host = at != NULL ? at + 1 : host;
		rc = getaddrinfo(host, NULL, &hints, &ai);
		if ((rc != 0 || ai == NULL) && svc->spec.where == HERD_JOB_SLURM &&
		    herd__slurm_node_addr(host, slurm_addr, sizeof(slurm_addr)) == HERD_OK)
			rc = getaddrinfo(slurm_addr, NULL, &hints, &ai);
		if (rc != 0 || ai == NULL)
			return herd__error(HERD_EUNAVAIL, "node %s: its address for HAProxy: %s%s",
					   host, gai_strerror(rc), svc->spec.where == HERD_JOB_SLURM
					   ? " (nor does Slurm's NodeAddr resolve)" : "");
		/* IPv4 first, as HAProxy's address of a server. */
		for (struct addrinfo *p = ai; p != NULL; p = p->ai_next)
			if (p->ai_family == AF_INET || svc->addr[i][0] == '\0')
				getnameinfo(p->ai_addr, p->ai_addrlen, svc->addr[i],
					    sizeof(svc->addr[i]), NULL, 0, NI_NUMERICHOST);
		freeaddrinfo(ai);
	}
	return HERD_OK;
}

/* ---- a replica's job ------------------------------------------------------------ */

static void replica_output(void *userdata, int rank, const char *host, herd_job_stream stream,
			   const char *line, size_t len)
{
	struct replica *r = userdata;

	(void)rank;
	r->svc->spec.output(r->svc->spec.output_userdata, r->index, host, stream, line, len);
}

/*
 * One health check of r from this node within CHECK_MS: a connect, and
 * for an HTTP path a GET answered 2xx or 3xx.  true when it passed; why
 * (cap bytes) otherwise.
 */
static bool check_health(const herd_serve *svc, const struct replica *r, char *why, size_t cap)
{
	char req[512], ans[64];
	int64_t deadline = herd__net_deadline(CHECK_MS);
	size_t got = 0;
	bool ok = false;
	int fd;

	/* A refused connect is tried again until its deadline: a short one,
	 * so that a cancelled launch thread sees it soon. */
	if (herd__net_connect(&fd, svc->addr[r->node], r->port,
			      herd__net_deadline(CONNECT_MS)) != HERD_OK) {
		snprintf(why, cap, "%s", herd_last_error());
		return false;
	}
	if (svc->health == NULL || svc->health[0] != '/') {
		close(fd);
		return true;
	}
	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s:%d\r\nConnection: close\r\n"
		 "User-Agent: herd-serve\r\n\r\n", svc->health, svc->addr[r->node], r->port);
	if (herd__net_send_all(fd, req, strlen(req), deadline, "the replica") == HERD_OK) {
		while (got < sizeof(ans) - 1 && memchr(ans, '\n', got) == NULL) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			ssize_t n;

			if (poll(&p, 1, herd__net_remaining_ms(deadline)) <= 0)
				break;
			n = read(fd, ans + got, sizeof(ans) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
	}
	close(fd);
	ans[got] = '\0';
	ans[strcspn(ans, "\r\n")] = '\0';
	ok = strlen(ans) >= 12 && strncmp(ans, "HTTP/1.", 7) == 0 && (ans[9] == '2' || ans[9] == '3');
	if (!ok)
		snprintf(why, cap, "GET %s answered \"%s\"", svc->health,
			 got > 0 ? ans : "nothing");
	return ok;
}

/*
 * The launch thread: starts r's job, then checks its health every
 * CHECK_EVERY_MS until it passes, the job ends, the start deadline
 * passes or the service cancels it.
 */
/* The output prefix of r: the service's, its %r the replica's index. */
static herd_status replica_prefix(herd_serve *svc, struct replica *r)
{
	const char *f = svc->spec.output_userdata != NULL ? svc->spec.output_userdata
			: PREFIX_DEFAULT;
	size_t n = strlen(f), len = 0;
	char *p;

	free(r->prefix);
	r->prefix = NULL;
	HERD_CHECK(herd__calloc(&r->prefix, 2 * n + 16, 1, "a replica's prefix"));
	p = r->prefix;
	for (size_t i = 0; i < n; i++) {
		if (f[i] == '%' && f[i + 1] == 'r') {
			len += (size_t)sprintf(p + len, "%d", r->index);
			i++;
		} else if (f[i] == '%' && f[i + 1] == '%') {
			p[len++] = '%';
			p[len++] = '%';
			i++;
		} else {
			p[len++] = f[i];
		}
	}
	return HERD_OK;
}

static void *launch_main(void *arg)
{
	struct replica *r = arg;
	herd_serve *svc = r->svc;
	int64_t deadline = herd__net_deadline(svc->spec.start_timeout_ms);
	herd_status st = herd__job_launch_member(&r->launched, &r->jspec, r->jid);
	char why[512] = "";

	if (st != HERD_OK)
		snprintf(r->launch_err, sizeof(r->launch_err), "%s", herd_last_error());
	while (st == HERD_OK) {
		int status;
		bool cancel;

		pthread_mutex_lock(&svc->mu);
		cancel = r->cancel;
		pthread_mutex_unlock(&svc->mu);
		if (cancel)
			break;
		if (herd_job_wait(r->launched, 0, &status) == HERD_OK) {
			const char *f = herd_job_failure(r->launched);

			snprintf(r->launch_err, sizeof(r->launch_err), "%s",
				 f != NULL ? f : "it exited with status 0 before it was ready");
			break;
		}
		if (check_health(svc, r, why, sizeof(why))) {
			r->healthy = true;
			break;
		}
		if (herd__net_now_ms() >= deadline) {
			snprintf(r->launch_err, sizeof(r->launch_err), "its health check (%s) did not "
				 "pass within %.0f s of its start (last: %.300s)",
				 svc->health != NULL ? svc->health : "tcp",
				 svc->spec.start_timeout_ms / 1000.0, why);
			break;
		}
		usleep(CHECK_EVERY_MS * 1000);
	}
	pthread_mutex_lock(&svc->mu);
	r->launch_done = true;
	pthread_mutex_unlock(&svc->mu);
	wake(svc);
	return NULL;
}

static void free_launch(struct replica *r)
{
	herd__launch_strv_free(r->env);
	free(r->exclude);
	r->env = NULL;
	r->exclude = NULL;
}

/* The node with the fewest replicas, not the one r last failed on when another will do. */
static size_t place(herd_serve *svc, const struct replica *r)
{
	size_t best = SIZE_MAX;
	int best_n = 0;

	for (size_t k = 0; k < svc->nnodes; k++) {
		int n = 0;

		if (k == r->bad_node && svc->nnodes > 1)
			continue;
		for (int i = 0; i < svc->nslots; i++)
			if (&svc->r[i] != r && svc->r[i].st != RS_OFF && svc->r[i].st != RS_DOWN &&
			    svc->r[i].node == k)
				n++;
		if (best == SIZE_MAX || n < best_n) {
			best = k;
			best_n = n;
		}
	}
	return best;
}

static void fail_replica(herd_serve *svc, struct replica *r, const char *why);

/* A thread of the service's, taking no process signals (the program's
 * handlers run elsewhere).  pthread_create's error number, or 0. */
static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
static void on_over(herd__watcher *w, short revents);

/* Starts r's job on a thread of its own: launching. */
static void start_replica(herd_serve *svc, struct replica *r)
{
	herd_job_spec *js = &r->jspec;
	const char **others = NULL;
	char entry[4][96];
	size_t n = 0, nother = 0;
	herd_status st;
	int rc;

	r->node = place(svc, r);
	r->port = svc->spec.replica_port + r->index;
	r->why[0] = '\0';
	snprintf(r->jid, sizeof(r->jid), "%s-r%d", svc->id, r->index);
	snprintf(entry[0], sizeof(entry[0]), "HERD_REPLICA=%d", r->index);
	snprintf(entry[1], sizeof(entry[1]), "HERD_PORT=%d", r->port);
	snprintf(entry[2], sizeof(entry[2]), "HERD_LISTEN=%s",
		 svc->spec.where == HERD_JOB_LOCAL ? "127.0.0.1" : "0.0.0.0");
	snprintf(entry[3], sizeof(entry[3]), "HERD_SERVICE=%s", svc->id);
	while (svc->env[n] != NULL)
		n++;
	st = herd__calloc(&r->env, n + 5, sizeof(char *), "a replica's environment");
	for (size_t i = 0; st == HERD_OK && i < 4; i++)
		st = herd__strdup(&r->env[i], entry[i]);
	for (size_t i = 0; st == HERD_OK && i < n; i++)
		st = herd__strdup(&r->env[4 + i], svc->env[i]);
	/* On its node alone: the others are excluded from its job. */
	if (st == HERD_OK && svc->nnodes > 1)
		st = herd__calloc(&others, svc->nnodes, sizeof(*others), "the other nodes");
	for (size_t k = 0; st == HERD_OK && others != NULL && k < svc->nnodes; k++)
		if (k != r->node)
			others[nother++] = svc->nodes[k].host;
	if (st == HERD_OK && nother > 0)
		st = herd__hostlist_compress(&r->exclude, others, nother);
	free(others);
	if (st == HERD_OK) {
		*js = (herd_job_spec)HERD_JOB_SPEC_INIT;
		js->argv = (const char *const *)svc->argv;
		js->env = (const char *const *)r->env;
		js->nranks = 1;
		js->per_node = 1;
		js->where = svc->spec.where;
		js->hosts = svc->hosts;
		js->gpus_per_rank = svc->spec.gpus_per_replica;
		js->workdir = svc->workdir;
		js->start_timeout_ms = svc->spec.start_timeout_ms;
		js->grace_ms = svc->spec.grace_ms;
		js->herd_program = svc->herd_program;
		js->connect_timeout_ms = svc->spec.connect_timeout_ms;
		if (svc->spec.output == herd_job_output_stdio) {
			/* The job's own output queue, with the replica's index in the prefix. */
			st = replica_prefix(svc, r);
			js->output = herd_job_output_stdio;
			js->prefix = r->prefix;
		} else {
			js->output = replica_output;
			js->output_userdata = r;
		}
		js->exclude = r->exclude;
	}
	/* Out of the balancer before its address changes (a maint that did
	 * not take would leave the slot live at a replica not listening yet). */
	if (st == HERD_OK)
		st = herd__haproxy_slot_state(&svc->hp, r->index, "maint");
	if (st == HERD_OK)
		st = herd__haproxy_slot_addr(&svc->hp, r->index, svc->addr[r->node], r->port);
	if (st != HERD_OK) {
		free_launch(r);
		fail_replica(svc, r, herd_last_error());
		return;
	}
	r->launched = NULL;
	r->healthy = false;
	r->launch_err[0] = '\0';
	r->launch_done = r->cancel = false;
	r->gen = svc->gen;
	r->st = RS_STARTING;
	r->since = r->launched_at = herd__net_now_ms();
	rc = start_thread(&r->thread, launch_main, r);
	if (rc != 0) {
		free_launch(r);
		r->st = RS_OFF;
		herd__error_errno(HERD_ESYS, rc, "cannot start a thread for replica %d", r->index);
		fail_replica(svc, r, herd_last_error());
		return;
	}
	r->launching = true;
}

/* Asks r's job to end: SIGTERM, SIGKILL after grace_ms; then does `then`. */
static void stop_replica(herd_serve *svc, struct replica *r, after then)
{
	r->then = then;
	if (r->st == RS_STARTING) {
		pthread_mutex_lock(&svc->mu);
		r->cancel = true;   /* stopped once its launch thread is done */
		pthread_mutex_unlock(&svc->mu);
		return;
	}
	if (r->st == RS_STOPPING)
		return;
	(void)herd__haproxy_slot_state(&svc->hp, r->index, "maint");
	if (r->job == NULL) {
		r->st = RS_OFF;
		return;
	}
	herd_job_interrupt(r->job, SIGTERM);
	r->st = RS_STOPPING;
	r->since = herd__net_now_ms();
	r->until = r->since + svc->spec.grace_ms + 5000;
}

/* No new requests to r; those in flight finish within grace_ms; then stopped. */
static void drain_replica(herd_serve *svc, struct replica *r, after then)
{
	r->then = then;
	if (r->st == RS_STOPPING || r->st == RS_DRAINING)
		return;
	if (r->st != RS_READY) {
		stop_replica(svc, r, then);
		return;
	}
	(void)herd__haproxy_slot_state(&svc->hp, r->index, "drain");
	r->st = RS_DRAINING;
	r->since = herd__net_now_ms();
	r->until = r->since + svc->spec.grace_ms;
}

static int ready_count(const herd_serve *svc)
{
	int n = 0;

	for (int i = 0; i < svc->nslots; i++)
		n += svc->r[i].st == RS_READY;
	return n;
}

static bool all_down(const herd_serve *svc)
{
	for (int i = 0; i < svc->wanted; i++)
		if (svc->r[i].st != RS_DOWN)
			return false;
	return true;
}

static void end_service(herd_serve *svc, const char *failure)
{
	if (failure != NULL && !svc->failed) {
		pthread_mutex_lock(&svc->mu);
		svc->failed = true;
		snprintf(svc->failure, sizeof(svc->failure), "%s", failure);
		pthread_mutex_unlock(&svc->mu);
		event(svc, "failed: %s", failure);
	}
	svc->stopping = true;
}

/*
 * r failed (why): out of the balancer already; restarted after a back-off
 * while it has restarts left, else down.  A service whose every wanted
 * replica is down ends, failed.
 */
static void fail_replica(herd_serve *svc, struct replica *r, const char *why)
{
	int delay;

	if (why != r->why)
		snprintf(r->why, sizeof(r->why), "%s", why);
	r->down_since = 0;
	if (svc->stopping || r->index >= svc->wanted) {
		r->st = RS_OFF;
		return;
	}
	r->bad_node = r->node;
	if (svc->rolling && r->gen == svc->gen) {
		/* The new version fails: the others keep the old one. */
		pthread_mutex_lock(&svc->mu);
		svc->rolling = false;
		pthread_mutex_unlock(&svc->mu);
		event(svc, "rolling restart stopped: replica %d failed after its restart; the "
		      "replicas not restarted yet keep running", r->index);
	}
	if (r->fails >= svc->spec.restarts) {
		r->st = RS_DOWN;
		event(svc, "replica %d on %s failed: %s; %d failures in a row, its restarts spent: "
		      "left down", r->index, host_of(svc, r), why, r->fails + 1);
		if (all_down(svc)) {
			char f[1024];

			snprintf(f, sizeof(f), "every replica is down for good (replica %d: %.900s)",
				 r->index, why);
			end_service(svc, f);
		}
		return;
	}
	r->restarts++;
	r->fails++;
	delay = r->fails > 6 ? BACKOFF_MAX_MS : BACKOFF_MIN_MS << (r->fails - 1);
	if (delay > BACKOFF_MAX_MS)
		delay = BACKOFF_MAX_MS;
	r->st = RS_BACKOFF;
	r->since = herd__net_now_ms();
	r->until = r->since + delay;
	event(svc, "replica %d on %s failed: %s; restarting it in %.0f s (restart %d of %d in "
	      "a row)", r->index, host_of(svc, r), why, delay / 1000.0, r->fails,
	      svc->spec.restarts);
}

/* A launch thread is done: its replica ready, or its failure. */
static void launched(herd_serve *svc, struct replica *r)
{
	herd_job_rank_status rs;
	bool cancelled = r->cancel;
	herd_status st = HERD_OK;

	pthread_join(r->thread, NULL);
	r->launching = false;
	free_launch(r);
	r->job = r->launched;
	r->launched = NULL;
	if (r->job == NULL) {
		r->st = RS_OFF;
		if (!cancelled)
			fail_replica(svc, r, r->launch_err);
		return;
	}
	r->pid = herd_job_rank(r->job, 0, &rs) == HERD_OK ? rs.pid : 0;
	herd__watcher_init(&r->over, herd_job_fd(r->job), on_over, r);
	st = herd__loop_watch(&svc->loop, &r->over, POLLIN);
	if (st != HERD_OK) {
		/* Nobody would see its end: it ends now. */
		snprintf(r->launch_err, sizeof(r->launch_err), "%s", herd_last_error());
		herd_job_kill(r->job);
		herd_job_free(r->job);
		r->job = NULL;
		r->pid = 0;
		r->st = RS_OFF;
		if (!cancelled)
			fail_replica(svc, r, r->launch_err);
		return;
	}
	r->st = RS_READY;   /* as stop_replica needs it */
	if (st == HERD_OK && r->healthy && !cancelled)
		st = herd__haproxy_slot_state(&svc->hp, r->index, "ready");
	if (st != HERD_OK)
		snprintf(r->launch_err, sizeof(r->launch_err), "%s", herd_last_error());
	if (cancelled) {
		stop_replica(svc, r, r->then);
		if (svc->killing && r->job != NULL)
			herd_job_interrupt(r->job, SIGTERM);   /* the second: SIGKILL */
		return;
	}
	if (st != HERD_OK || !r->healthy) {
		snprintf(r->why, sizeof(r->why), "%s", r->launch_err);
		stop_replica(svc, r, AFTER_FAIL);
		return;
	}
	r->since = herd__net_now_ms();
	r->down_since = 0;
	event(svc, "replica %d on %s ready %.2f s after its start (port %d, pid %ld)", r->index,
	      host_of(svc, r), (double)(r->since - r->launched_at) / 1000.0, r->port, r->pid);
	if (svc->stopping || r->index >= svc->wanted)
		drain_replica(svc, r, AFTER_OFF);
}

/* r's job is over. */
static void job_over(herd_serve *svc, struct replica *r)
{
	char why[600];
	const char *f;
	int status = 0;
	bool expected = r->st == RS_STOPPING;

	herd__loop_unwatch(&svc->loop, &r->over);
	(void)herd_job_wait(r->job, 0, &status);
	f = herd_job_failure(r->job);
	snprintf(why, sizeof(why), "%s", f != NULL ? f : "it exited with status 0");
	herd_job_free(r->job);
	r->job = NULL;
	r->pid = 0;
	(void)herd__haproxy_slot_state(&svc->hp, r->index, "maint");
	if (!expected) {
		r->st = RS_OFF;
		fail_replica(svc, r, why);
		return;
	}
	r->st = RS_OFF;
	if (r->then == AFTER_FAIL) {
		snprintf(why, sizeof(why), "%s", r->why);
		r->then = AFTER_OFF;
		fail_replica(svc, r, why);
		return;
	}
	else if (r->then == AFTER_START && !svc->stopping && r->index < svc->wanted)
		start_replica(svc, r);
	r->then = AFTER_OFF;
}

/* ---- the thread's turn ---------------------------------------------------------- */

static void move_replica(herd_serve *svc, struct replica *r, int64_t now)
{
	switch (r->st) {
	case RS_READY:
		if (now - r->since >= STABLE_MS)
			r->fails = 0;
		if (r->stat.up || strncmp(r->stat.status, "DOWN", 4) != 0) {
			r->down_since = 0;
		} else if (r->down_since == 0) {
			r->down_since = now;
		} else if (now - r->down_since >= UNHEALTHY_MS) {
			snprintf(r->why, sizeof(r->why), "its health check (%s) has failed for %d s",
				 svc->health ? svc->health : "tcp", UNHEALTHY_MS / 1000);
			stop_replica(svc, r, AFTER_FAIL);
		}
		break;
	case RS_DRAINING:
		if ((r->stat.scur == 0 && r->stat.qcur == 0) || now >= r->until)
			stop_replica(svc, r, r->then);
		break;
	case RS_STOPPING:
		if (now >= r->until && r->job != NULL) {
			/* A second interrupt kills what is left at once. */
			herd_job_interrupt(r->job, SIGTERM);
			r->until = now + 5000;
		}
		break;
	case RS_BACKOFF:
		if (svc->stopping || r->index >= svc->wanted)
			r->st = RS_OFF;
		else if (now >= r->until)
			start_replica(svc, r);
		break;
	default:
		break;
	}
}

/* A rolling restart: the next replica of an older generation, once the others are settled. */
static void roll(herd_serve *svc)
{
	for (int i = 0; i < svc->wanted; i++) {
		rstate s = svc->r[i].st;

		if (s == RS_STARTING || s == RS_DRAINING || s == RS_STOPPING || s == RS_BACKOFF)
			return;
	}
	for (int i = 0; i < svc->wanted; i++)
		if (svc->r[i].st == RS_READY && svc->r[i].gen != svc->gen) {
			event(svc, "rolling restart: replica %d on %s (%d of %d)", i,
			      host_of(svc, &svc->r[i]), i + 1, svc->wanted);
			drain_replica(svc, &svc->r[i], AFTER_START);
			return;
		}
	pthread_mutex_lock(&svc->mu);
	svc->rolling = false;
	pthread_mutex_unlock(&svc->mu);
	event(svc, "rolling restart done: %d replicas ready", ready_count(svc));
}

/*
 * The replicas wanted become n.  Lowered, the slots that stay but are
 * down for good get a fresh start: the highest slots go, and a service
 * must not keep its dead ones and drain its live ones.
 */
static void set_wanted(herd_serve *svc, int n)
{
	if (n < svc->wanted)
		for (int i = 0; i < n; i++)
			if (svc->r[i].st == RS_DOWN) {
				svc->r[i].st = RS_OFF;
				svc->r[i].fails = 0;
			}
	svc->wanted = n;
	svc->low_since = 0;
}

/* Autoscaling from the requests in flight (at replicas and queued). */
static void autoscale(herd_serve *svc, int64_t now)
{
	/* The backend's scur counts the queued requests too. */
	long long load = svc->backend.scur;
	int t = svc->spec.target, want = (int)((load + t - 1) / t), serving = ready_count(svc);

	if (want < svc->spec.min_replicas)
		want = svc->spec.min_replicas;
	if (want > svc->spec.max_replicas)
		want = svc->spec.max_replicas;
	if (want > svc->wanted) {
		event(svc, "scaling up %d -> %d replicas: %lld requests in flight (%lld queued) "
		      "over %d serving, %.1f each, above the target of %d", svc->wanted, want, load,
		      svc->backend.qcur, serving, serving ? (double)load / serving : (double)load, t);
		set_wanted(svc, want);
		return;
	}
	if (want == svc->wanted) {
		svc->low_since = 0;
		return;
	}
	if (svc->low_since == 0) {
		svc->low_since = now;
		svc->low_peak = want;
		svc->low_peak_load = load;
		return;
	}
	if (want > svc->low_peak)
		svc->low_peak = want;
	if (load > svc->low_peak_load)
		svc->low_peak_load = load;
	if (now - svc->low_since < svc->spec.cooldown_ms)
		return;
	event(svc, "scaling down %d -> %d replicas: at most %lld requests in flight over the "
	      "last %.0f s, %.1f each of %d, below the target of %d", svc->wanted, svc->low_peak,
	      svc->low_peak_load, svc->spec.cooldown_ms / 1000.0,
	      (double)svc->low_peak_load / svc->wanted, svc->wanted, t);
	set_wanted(svc, svc->low_peak);
}

/* Replicas in [0, wanted) run; those beyond are drained and stopped. */
static void reconcile(herd_serve *svc)
{
	for (int i = 0; i < svc->nslots; i++) {
		struct replica *r = &svc->r[i];
		bool want = !svc->stopping && i < svc->wanted;

		if (want && r->st == RS_OFF)
			start_replica(svc, r);
		else if (!want && (r->st == RS_STARTING || r->st == RS_READY))
			drain_replica(svc, r, AFTER_OFF);
		else if (!want && (r->st == RS_BACKOFF || r->st == RS_DOWN))
			r->st = RS_OFF;
		else if (!want && r->st == RS_DRAINING)
			r->then = AFTER_OFF;
	}
}

static bool settled_off(const herd_serve *svc)
{
	for (int i = 0; i < svc->nslots; i++)
		if (svc->r[i].launching || svc->r[i].job != NULL)
			return false;
	return true;
}

static char *status_text(herd_serve *svc);

static void publish(herd_serve *svc)
{
	char *text = status_text(svc);

	pthread_mutex_lock(&svc->mu);
	if (text != NULL) {
		free(svc->status_json);
		svc->status_json = text;
	}
	svc->nready = ready_count(svc);
	pthread_cond_broadcast(&svc->cv);
	pthread_mutex_unlock(&svc->mu);
}

/* Stops every replica at once, none drained (a second interrupt). */
static void kill_all(herd_serve *svc)
{
	svc->killing = true;
	for (int i = 0; i < svc->nslots; i++) {
		struct replica *r = &svc->r[i];

		if (r->st == RS_READY || r->st == RS_DRAINING || r->st == RS_STARTING)
			stop_replica(svc, r, AFTER_OFF);
		if (r->st == RS_STOPPING && r->job != NULL) {
			herd_job_interrupt(r->job, SIGTERM);   /* the second: SIGKILL */
			r->until = herd__net_now_ms() + 5000;
		}
	}
}

/* Requests of the API's calls, taken under the mutex. */
static void take_requests(herd_serve *svc)
{
	int scale, restart, stop;

	pthread_mutex_lock(&svc->mu);
	scale = svc->req_scale;
	restart = svc->stopping ? 0 : svc->req_restart;
	stop = svc->req_stop;
	svc->req_scale = -1;
	svc->req_restart = 0;
	svc->req_stop = 0;
	if (restart == 2)
		svc->rolling = true;
	pthread_mutex_unlock(&svc->mu);
	if (stop != 0 && !svc->stopping) {
		event(svc, "stopping: draining %d replicas", ready_count(svc));
		svc->stopping = true;
	}
	if (stop == 2 && !svc->killing) {
		event(svc, "stopping at once: every replica killed");
		kill_all(svc);
	}
	if (scale >= 0 && !svc->stopping && scale != svc->wanted) {
		event(svc, "scaling %s %d -> %d replicas: asked", scale > svc->wanted ? "up" : "down",
		      svc->wanted, scale);
		set_wanted(svc, scale);
	}
	if (restart != 0 && !svc->stopping) {
		svc->gen++;
		for (int i = 0; i < svc->wanted; i++)
			if (svc->r[i].st == RS_DOWN || svc->r[i].st == RS_BACKOFF) {
				svc->r[i].st = RS_OFF;
				svc->r[i].fails = 0;
			}
		if (restart == 2) {
			event(svc, "rolling restart of %d replicas", svc->wanted);
		} else {
			event(svc, "restarting all %d replicas at once", svc->wanted);
			for (int i = 0; i < svc->wanted; i++)
				drain_replica(svc, &svc->r[i], AFTER_START);
		}
	}
}

static void turn(herd_serve *svc)
{
	int64_t now = herd__net_now_ms();
	herd__haproxy_stat backend;
	char why[600];

	for (int i = 0; i < svc->nslots; i++) {
		bool done;

		pthread_mutex_lock(&svc->mu);
		done = svc->r[i].launching && svc->r[i].launch_done;
		pthread_mutex_unlock(&svc->mu);
		if (done)
			launched(svc, &svc->r[i]);
	}
	take_requests(svc);
	if (svc->hp.pid > 0 && !herd__haproxy_running(&svc->hp, why, sizeof(why)))
		end_service(svc, why);
	/* Figures that could not be read are not zeros: the last ones stand. */
	if (svc->hp.pid > 0 &&
	    herd__haproxy_stats(&svc->hp, svc->stats, svc->nslots, &backend) == HERD_OK) {
		svc->backend = backend;
		for (int i = 0; i < svc->nslots; i++)
			svc->r[i].stat = svc->stats[i];
	}
	for (int i = 0; i < svc->nslots; i++)
		move_replica(svc, &svc->r[i], now);
	if (!svc->stopping && svc->rolling)
		roll(svc);
	if (!svc->stopping && svc->spec.target > 0)
		autoscale(svc, now);
	reconcile(svc);
	if (!svc->stopping && all_down(svc)) {
		char f[1024];

		snprintf(f, sizeof(f), "every replica is down for good (replica 0: %.900s)",
			 svc->r[0].why);
		end_service(svc, f);
		reconcile(svc);
	}
	publish(svc);
}

static void on_tick(herd__timer *t)
{
	herd_serve *svc = t->data;

	turn(svc);
	(void)herd__loop_timer(&svc->loop, &svc->tick, herd__net_now_ms() + TICK_MS);
}

static void on_wake(herd__watcher *w, short revents)
{
	herd_serve *svc = w->data;
	char buf[64];

	(void)revents;
	while (read(svc->wake[0], buf, sizeof(buf)) > 0)
		;
	turn(svc);
}

static void on_over(herd__watcher *w, short revents)
{
	struct replica *r = w->data;

	(void)revents;
	job_over(r->svc, r);
	publish(r->svc);
}

/* ---- the control socket ----------------------------------------------------------- */

static herd_status request_scale(herd_serve *svc, int n)
{
	if (n < svc->spec.min_replicas || n > svc->spec.max_replicas)
		return herd__error(HERD_EINVAL, "service %s runs %d to %d replicas: %d is beyond "
				   "them", svc->id, svc->spec.min_replicas, svc->spec.max_replicas,
				   n);
	pthread_mutex_lock(&svc->mu);
	if (svc->over || svc->stopping_seen) {
		pthread_mutex_unlock(&svc->mu);
		return herd__error(HERD_ECLOSED, "service %s is %s", svc->id,
				   svc->over ? "over" : "stopping");
	}
	svc->req_scale = n;
	pthread_mutex_unlock(&svc->mu);
	wake(svc);
	return HERD_OK;
}

static herd_status request_restart(herd_serve *svc, bool rolling)
{
	herd_status st = HERD_OK;

	pthread_mutex_lock(&svc->mu);
	if (svc->over || svc->stopping_seen)
		st = herd__error(HERD_ECLOSED, "service %s is %s", svc->id,
				 svc->over ? "over" : "stopping");
	else if (svc->rolling || svc->req_restart != 0)
		st = herd__error(HERD_EBUSY, "service %s: a restart is under way", svc->id);
	else
		svc->req_restart = rolling ? 2 : 1;
	pthread_mutex_unlock(&svc->mu);
	if (st == HERD_OK)
		wake(svc);
	return st;
}

static char *control_answer(void *arg, const char *request)
{
	herd_serve *svc = arg;
	json_t *o = NULL;
	char *text = NULL;
	int n;

	if (strcmp(request, "status") == 0)
		return status_text(svc);
	o = json_object();
	if (o == NULL)
		return NULL;
	if (strcmp(request, "stop") == 0) {
		herd_serve_interrupt(svc);
		json_object_set_new(o, "stopping", json_true());
	} else if (sscanf(request, "scale %d", &n) == 1) {
		if (request_scale(svc, n) == HERD_OK)
			json_object_set_new(o, "scaling", json_integer(n));
		else
			json_object_set_new(o, "error", json_string(herd_last_error()));
	} else if (strcmp(request, "restart") == 0 || strcmp(request, "restart rolling") == 0) {
		if (request_restart(svc, strcmp(request, "restart") != 0) == HERD_OK)
			json_object_set_new(o, "restarting", json_true());
		else
			json_object_set_new(o, "error", json_string(herd_last_error()));
	} else {
		json_object_set_new(o, "error", json_string("unknown request (status, stop, "
							    "scale N, restart [rolling])"));
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

/* ---- the status ------------------------------------------------------------------- */

static char *status_text(herd_serve *svc)
{
	json_t *o = json_object(), *reps = json_array(), *evs = json_array();
	char cmd[1024] = "", front[300];
	size_t len = 0, nodes_used = 0;
	int running = 0, restarts = 0;
	const char *state;
	char *text;

	if (o == NULL || reps == NULL || evs == NULL) {
		json_decref(o);
		json_decref(reps);
		json_decref(evs);
		return NULL;
	}
	for (size_t i = 0; svc->argv[i] != NULL && len < sizeof(cmd); i++)
		len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, "%s%s", i ? " " : "",
					svc->argv[i]);
	for (size_t k = 0; k < svc->nnodes; k++)
		for (int i = 0; i < svc->nslots; i++)
			if (svc->r[i].job != NULL && svc->r[i].node == k) {
				nodes_used++;
				break;
			}
	for (int i = 0; i < svc->nslots; i++) {
		struct replica *r = &svc->r[i];
		json_t *x;

		restarts += r->restarts;
		running += r->job != NULL;
		if (r->st == RS_OFF && r->restarts == 0 && r->stat.req_tot == 0)
			continue;
		x = json_pack("{s:i, s:s, s:i, s:s, s:I, s:i, s:I, s:I, s:I}", "index", i,
			      "host", r->st == RS_OFF && r->job == NULL && r->stat.req_tot == 0
			      ? "" : host_of(svc, r), "port", svc->spec.replica_port + i,
			      "state", rstate_names[r->st], "pid", (json_int_t)r->pid,
			      "restarts", r->restarts, "requests", (json_int_t)r->stat.req_tot,
			      "errors", (json_int_t)r->stat.errors,
			      "in_flight", (json_int_t)(r->stat.scur + r->stat.qcur));
		if (x != NULL && r->why[0] != '\0')
			json_object_set_new(x, "why", json_string(r->why));
		if (x != NULL)
			json_array_append_new(reps, x);
	}
	pthread_mutex_lock(&svc->mu);
	for (size_t k = svc->nevents > EVENTS_MAX ? svc->nevents - EVENTS_MAX : 0;
	     k < svc->nevents; k++)
		json_array_append_new(evs, json_string(svc->events[k % EVENTS_MAX]));
	state = svc->over ? (svc->failed ? "failed" : "stopped")
		: svc->stopping ? "stopping" : ready_count(svc) > 0 ? "serving" : "starting";
	pthread_mutex_unlock(&svc->mu);
	snprintf(front, sizeof(front), strchr(svc->bind, ':') ? "[%s]:%d" : "%s:%d", svc->bind,
		 svc->spec.port);
	json_object_set_new(o, "id", json_string(svc->id));
	json_object_set_new(o, "kind", json_string("service"));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "command", json_string(cmd));
	json_object_set_new(o, "hosts", json_string(svc->hostlist));
	json_object_set_new(o, "nodes", json_integer((json_int_t)nodes_used));
	json_object_set_new(o, "ranks", json_integer(running));
	json_object_set_new(o, "state", json_string(state));
	json_object_set_new(o, "restarts", json_integer(restarts));
	json_object_set_new(o, "started", json_integer((json_int_t)svc->started));
	json_object_set_new(o, "age", json_real((double)(herd__net_now_ms() - svc->t_start) /
						1000.0));
	json_object_set_new(o, "front", json_string(front));
	json_object_set_new(o, "haproxy", json_string(svc->hp.version));
	json_object_set_new(o, "min_replicas", json_integer(svc->spec.min_replicas));
	json_object_set_new(o, "max_replicas", json_integer(svc->spec.max_replicas));
	json_object_set_new(o, "wanted", json_integer(svc->wanted));
	json_object_set_new(o, "target", json_integer(svc->spec.target));
	json_object_set_new(o, "in_flight", json_integer((json_int_t)svc->backend.scur));
	json_object_set_new(o, "queued", json_integer((json_int_t)svc->backend.qcur));
	json_object_set_new(o, "replicas", reps);
	json_object_set_new(o, "events", evs);
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* ---- the thread ------------------------------------------------------------------- */

/*
 * HAProxy is started here, on the thread that outlives it: its
 * parent-death signal follows the thread that forked it.
 */
static herd_status start_haproxy(herd_serve *svc)
{
	herd__haproxy_conf hc = { 0 };

	hc.bind = svc->bind;
	hc.port = svc->spec.port;
	hc.slots = svc->nslots;
	hc.health = svc->health;
	hc.replica_conns = svc->spec.replica_conns;
	hc.queue_ms = QUEUE_MS;
	return herd__haproxy_start(&svc->hp, &hc);
}

static void *serve_main(void *arg)
{
	herd_serve *svc = arg;
	bool haproxy_stopped = false;
	herd_status st = start_haproxy(svc);

	if (st != HERD_OK)
		snprintf(svc->failure, sizeof(svc->failure), "%s", herd_last_error());
	else
		publish(svc);
	pthread_mutex_lock(&svc->mu);
	svc->start_st = st;
	svc->start_done = true;
	svc->over = st != HERD_OK;
	pthread_cond_broadcast(&svc->cv);
	pthread_mutex_unlock(&svc->mu);
	if (st != HERD_OK)
		return NULL;
	event(svc, "front door %s:%d (HAProxy %s), %d replica%s of %d-%d starting on %s",
	      svc->bind, svc->spec.port, svc->hp.version, svc->wanted,
	      svc->wanted == 1 ? "" : "s", svc->spec.min_replicas, svc->spec.max_replicas,
	      svc->hostlist);
	turn(svc);
	(void)herd__loop_timer(&svc->loop, &svc->tick, herd__net_now_ms() + TICK_MS);
	for (;;) {
		if (svc->stopping && settled_off(svc)) {
			if (!haproxy_stopped) {
				herd__haproxy_stop(&svc->hp);
				haproxy_stopped = true;
			}
			break;
		}
		if (herd__loop_run_once(&svc->loop, -1) != HERD_OK)
			usleep(10 * 1000);
	}
	if (!svc->failed)
		event(svc, "stopped");
	pthread_mutex_lock(&svc->mu);
	svc->over = true;
	pthread_mutex_unlock(&svc->mu);
	publish(svc);
	{
		uint64_t one = 1;
		ssize_t n = write(svc->over_fd, &one, sizeof(one));

		(void)n;
	}
	return NULL;
}

/* ---- the API ---------------------------------------------------------------------- */

herd_status herd_serve_start(herd_serve **out, const herd_serve_spec *spec)
{
	herd_job_spec js = HERD_JOB_SPEC_INIT;
	herd_serve *svc = NULL;
	char left_out[1024];
	const char **names = NULL;
	herd_status st;
	int rc;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_start: out is NULL");
	*out = NULL;
	HERD_CHECK(check_spec(spec));
	HERD_CHECK(herd__calloc(&svc, 1, sizeof(*svc), "a service"));
	svc->wake[0] = svc->wake[1] = svc->over_fd = svc->ctl_fd = -1;
	svc->req_scale = -1;
	pthread_mutex_init(&svc->mu, NULL);
	herd__net_cond_init(&svc->cv);
	herd__loop_init(&svc->loop);
	HERD_CHECK_GOTO(copy_spec(svc, spec), st, fail);
	HERD_CHECK_GOTO(herd__launch_new_id(svc->id, sizeof(svc->id)), st, fail);
	/* The nodes, as a job of the same where and hosts would have them. */
	js.argv = spec->argv;
	js.nranks = 1;
	js.where = spec->where;
	js.hosts = svc->hosts;
	HERD_CHECK_GOTO(herd__launch_backend_for(spec->where, &svc->be), st, fail);
	HERD_CHECK_GOTO(svc->be->resolve(&js, &svc->nodes, &svc->nnodes), st, fail);
	HERD_CHECK_GOTO(herd__exclude_filter(&svc->nodes, &svc->nnodes, NULL, left_out,
					     sizeof(left_out)), st, fail);
	if (svc->nnodes == 0) {
		st = herd__error(HERD_EUNAVAIL, "every node is excluded: %s (herd exclude ls lists "
				 "them)", left_out);
		goto fail;
	}
	HERD_CHECK_GOTO(resolve_addrs(svc), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&names, svc->nnodes, sizeof(*names), "the nodes"), st, fail);
	for (size_t k = 0; k < svc->nnodes; k++)
		names[k] = svc->nodes[k].host;
	HERD_CHECK_GOTO(herd__hostlist_compress(&svc->hostlist, names, svc->nnodes), st, fail);
	svc->nslots = spec->max_replicas;
	HERD_CHECK_GOTO(herd__calloc(&svc->r, (size_t)svc->nslots, sizeof(*svc->r), "the "
				     "replicas"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&svc->stats, (size_t)svc->nslots, sizeof(*svc->stats),
				     "the replicas' statistics"), st, fail);
	for (int i = 0; i < svc->nslots; i++) {
		svc->r[i].svc = svc;
		svc->r[i].index = i;
		svc->r[i].bad_node = SIZE_MAX;
	}
	if (pipe2(svc->wake, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    (svc->over_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "cannot make the service's descriptors");
		goto fail;
	}
	herd__watcher_init(&svc->wake_w, svc->wake[0], on_wake, svc);
	HERD_CHECK_GOTO(herd__loop_watch(&svc->loop, &svc->wake_w, POLLIN), st, fail);
	herd__timer_init(&svc->tick, on_tick, svc);
	for (int i = 0; i < svc->nslots; i++)
		herd__watcher_init(&svc->r[i].over, -1, on_over, &svc->r[i]);
	if (herd__control_listen(svc->id, &svc->ctl_fd, svc->ctl_path, sizeof(svc->ctl_path)) ==
	    HERD_OK) {
		herd__watcher_init(&svc->ctl_w, svc->ctl_fd, on_control, svc);
		HERD_CHECK_GOTO(herd__loop_watch(&svc->loop, &svc->ctl_w, POLLIN), st, fail);
	} else {
		herd__log_warn("service %s: herd jobs will not list it: %s", svc->id,
			       herd_last_error());
	}
	svc->t_start = herd__net_now_ms();
	svc->started = time(NULL);
	rc = start_thread(&svc->thread, serve_main, svc);
	if (rc != 0) {
		st = herd__error_errno(HERD_ESYS, rc, "cannot start the service's thread");
		goto fail;
	}
	svc->thread_started = true;
	pthread_mutex_lock(&svc->mu);
	while (!svc->start_done)
		pthread_cond_wait(&svc->cv, &svc->mu);
	st = svc->start_st;
	pthread_mutex_unlock(&svc->mu);
	if (st != HERD_OK) {
		st = herd__error(st, "%s", svc->failure);
		goto fail;
	}
	free(names);
	*out = svc;
	return HERD_OK;
fail:
	free(names);
	herd_serve_free(svc);
	return st;
}

/*
 * Waits, the mutex held on return, until the service is over or has n
 * replicas ready (n < 0: only over), or timeout_ms passes.
 */
static herd_status wait_for(herd_serve *svc, const char *fn, int n, int timeout_ms)
{
	int64_t deadline;

	if (svc == NULL)
		return herd__error(HERD_EINVAL, "%s: svc is NULL", fn);
	HERD_CHECK(herd__check_timeout(fn, timeout_ms));
	deadline = timeout_ms < 0 ? INT64_MAX : herd__net_deadline(timeout_ms);
	pthread_mutex_lock(&svc->mu);
	while (!svc->over && (n < 0 || svc->nready < n))
		if (herd__net_cond_wait_until(&svc->cv, &svc->mu, deadline) == ETIMEDOUT)
			break;
	return HERD_OK;
}

herd_status herd_serve_wait_ready(herd_serve *svc, int n, int timeout_ms)
{
	herd_status st = HERD_OK;

	HERD_CHECK(wait_for(svc, "herd_serve_wait_ready", n, timeout_ms));
	if (svc->over)
		st = herd__error(HERD_ECLOSED, "service %s is over%s%s", svc->id,
				 svc->failed ? ": " : "", svc->failed ? svc->failure : "");
	else if (svc->nready < n)
		st = herd__error(HERD_ETIMEDOUT, "service %s: %d of %d replicas ready after %d ms "
				 "(herd job status %s says why)", svc->id, svc->nready, n,
				 timeout_ms, svc->id);
	pthread_mutex_unlock(&svc->mu);
	return st;
}

herd_status herd_serve_status(herd_serve *svc, char **json)
{
	if (svc == NULL || json == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_status: svc or json is NULL");
	pthread_mutex_lock(&svc->mu);
	*json = svc->status_json != NULL ? strdup(svc->status_json) : NULL;
	pthread_mutex_unlock(&svc->mu);
	if (*json == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for service %s's status", svc->id);
	return HERD_OK;
}

herd_status herd_serve_scale(herd_serve *svc, int n)
{
	if (svc == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_scale: svc is NULL");
	return request_scale(svc, n);
}

herd_status herd_serve_restart(herd_serve *svc, bool rolling)
{
	if (svc == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_restart: svc is NULL");
	return request_restart(svc, rolling);
}

herd_status herd_serve_wait(herd_serve *svc, int timeout_ms, bool *failed)
{
	herd_status st = HERD_OK;

	HERD_CHECK(wait_for(svc, "herd_serve_wait", -1, timeout_ms));
	if (!svc->over)
		st = herd__error(HERD_ETIMEDOUT, "service %s still running after %d ms", svc->id,
				 timeout_ms);
	if (failed != NULL)
		*failed = svc->failed;
	pthread_mutex_unlock(&svc->mu);
	return st;
}

herd_status herd_serve_interrupt(herd_serve *svc)
{
	if (svc == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_interrupt: svc is NULL");
	pthread_mutex_lock(&svc->mu);
	svc->req_stop = svc->req_stop != 0 || svc->stopping_seen ? 2 : 1;
	svc->stopping_seen = true;
	pthread_mutex_unlock(&svc->mu);
	wake(svc);
	return HERD_OK;
}

herd_status herd_serve_stop(herd_serve *svc)
{
	if (svc == NULL)
		return herd__error(HERD_EINVAL, "herd_serve_stop: svc is NULL");
	pthread_mutex_lock(&svc->mu);
	if (svc->req_stop == 0)
		svc->req_stop = 1;
	svc->stopping_seen = true;
	pthread_mutex_unlock(&svc->mu);
	wake(svc);
	return herd_serve_wait(svc, HERD_TIMEOUT_NONE, NULL);
}

int herd_serve_fd(const herd_serve *svc)
{
	return svc != NULL ? svc->over_fd : -1;
}

const char *herd_serve_id(const herd_serve *svc)
{
	return svc != NULL ? svc->id : NULL;
}

const char *herd_serve_failure(const herd_serve *svc)
{
	bool failed;

	if (svc == NULL)
		return NULL;
	pthread_mutex_lock((pthread_mutex_t *)&svc->mu);
	failed = svc->failed;
	pthread_mutex_unlock((pthread_mutex_t *)&svc->mu);
	return failed ? svc->failure : NULL;   /* written once, before failed */
}

void herd_serve_free(herd_serve *svc)
{
	if (svc == NULL)
		return;
	if (svc->thread_started) {
		(void)herd_serve_stop(svc);
		pthread_join(svc->thread, NULL);
	}
	herd__haproxy_stop(&svc->hp);
	for (int i = 0; svc->r != NULL && i < svc->nslots; i++) {
		free_launch(&svc->r[i]);
		free(svc->r[i].prefix);
	}
	if (svc->ctl_fd >= 0) {
		close(svc->ctl_fd);
		unlink(svc->ctl_path);
	}
	if (svc->wake[0] >= 0)
		close(svc->wake[0]);
	if (svc->wake[1] >= 0)
		close(svc->wake[1]);
	if (svc->over_fd >= 0)
		close(svc->over_fd);
	herd__loop_free(&svc->loop);
	for (size_t k = 0; k < EVENTS_MAX; k++)
		free(svc->events[k]);
	herd__launch_nodes_free(svc->nodes, svc->nnodes);
	free(svc->addr);
	free(svc->hostlist);
	free(svc->r);
	free(svc->stats);
	free(svc->status_json);
	herd__launch_strv_free(svc->argv);
	herd__launch_strv_free(svc->env);
	free(svc->hosts);
	free(svc->bind);
	free(svc->health);
	free(svc->workdir);
	free(svc->herd_program);
	pthread_mutex_destroy(&svc->mu);
	pthread_cond_destroy(&svc->cv);
	free(svc);
}
