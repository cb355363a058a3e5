/*
 * sdk/launch/exec.c - herd_agent_exec, the node side of a job that `herd exec`
 * runs: the node protocol (launch_internal.h) over a pair of fds around one
 * node supervisor, and, for a node with a subtree (tree fan-out), the
 * relay to its children (relay.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/health.h"
#include "herd/sys/agent.h"
#include "comm/trace.h"
#include "launch_internal.h"
#include "telemetry/telemetry_internal.h"
#include "loop.h"
#include "net.h"

/* How long the launcher may take to send the spec. */
#define SPEC_TIMEOUT_MS 60000
/* Output waiting for a slow launcher beyond which ranks' pipes are left
 * unread (they then block on write, which slows them instead of this
 * process growing without bound).  Small: what is queued here when the
 * ranks are stopped still has to reach the launcher before the node
 * reports its end; the launcher holds its reader's backlog on its side. */
#define OUT_BACKLOG_MAX (1u * 1024u * 1024u)
/* How long a refusal (an error frame) may take to leave: a launcher that
 * is there reads it at once. */
#define REFUSE_TIMEOUT_MS 500

typedef struct exec_state {
	int rfd, wfd;
	herd__buf in, out;
	herd__node *node;
	herd__relay *relay;   /* NULL: a leaf */
	herd__loop loop;      /* the channel, the node's fds, the relay's children */
	herd__watcher chan_r, chan_w;
	herd_status st;       /* the first failure of the channel or the loop */
	int grace_ms;
	bool launcher_gone;   /* rfd closed: stop, and write nothing more */
	bool broken;          /* wfd failed */
	bool lines;           /* the launcher takes lines frames */
	herd_status frame_st; /* first failure encoding an event */
	const char *trace_dir; /* the ranks' HERD_TRACE_DIR, when the launcher does
				* not see it: their rings are sent as copies */
	bool rank_failed;     /* a rank of this node failed on its own (not stopped by the
			       * launcher): its rings go up before done */
	bool rank_not_ok;     /* a rank ended otherwise than exiting 0, stopped or not */
	bool stopping;        /* the launcher said stop, or is gone */
	long *pids;           /* the ranks' pids as they started (0: not yet) */
	const int *ranks;     /* the spec's global ranks, for pids' index */
	int nranks;
} exec_state;

/* How long what the node says of itself may take (NVML at a GPU fault can
 * hang): past it, the answer goes without. */
#define WORDS_MS 1500

_Static_assert(HERD__LAUNCH_RING_MAX ==
	       HERD__TRACE_HEAD_SIZE + HERD__TRACE_COPY_MAX * sizeof(herd__trace_entry),
	       "a ring frame holds one copy");

static void queue(exec_state *x, herd_status st)
{
	if (st != HERD_OK && x->frame_st == HERD_OK)
		x->frame_st = st;
}

static void ev_started(void *ud, int rank, long pid)
{
	exec_state *x = ud;

	for (int i = 0; x->pids != NULL && i < x->nranks; i++)
		if (x->ranks[i] == rank)
			x->pids[i] = pid;
	queue(x, herd__launch_enc_started(&x->out, rank, pid));
}

/* Whole lines: one lines frame, or an out frame for each to a launcher
 * that predates them. */
static void ev_output(void *ud, int rank, herd_job_stream s, const char *lines, size_t len)
{
	exec_state *x = ud;

	if (x->broken)
		return;
	if (x->lines) {
		queue(x, herd__launch_enc_lines(&x->out, rank, s, lines, len));
		return;
	}
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(lines + at, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - (lines + at)) : len - at;

		queue(x, herd__launch_enc_out(&x->out, rank, s, lines + at, n));
		at += n + 1;
	}
}

static void ev_exited(void *ud, int rank, herd_job_rank_state state, int code, int sig,
		      const char *err)
{
	exec_state *x = ud;

	if (!x->stopping &&
	    (state == HERD_JOB_RANK_SIGNALED || (state == HERD_JOB_RANK_EXITED && code != 0)))
		x->rank_failed = true;
	if (state != HERD_JOB_RANK_EXITED || code != 0)
		x->rank_not_ok = true;

	queue(x, herd__launch_enc_exited(&x->out, rank, state, code, sig, err));
}

static void ev_paused(void *ud, int rank, int sig)
{
	exec_state *x = ud;

	queue(x, herd__launch_enc_paused(&x->out, rank, sig));
}

/* Output waiting for the launcher past which ranks and children are not read. */
static bool backlogged(const exec_state *x)
{
	return x->out.len - x->out.off > OUT_BACKLOG_MAX;
}

static bool ev_full(void *ud)
{
	return backlogged(ud);
}

/* Writes what it can without blocking; false once the launcher is gone. */
static bool flush(exec_state *x)
{
	while (!x->broken && x->out.len > x->out.off) {
		ssize_t w = write(x->wfd, x->out.data + x->out.off, x->out.len - x->out.off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w <= 0) {
			x->broken = true;
			herd__buf_free(&x->out);
			return false;
		}
		herd__buf_consume(&x->out, (size_t)w);
	}
	return !x->broken;
}

/* Reads until EAGAIN; false at end of stream or on a read error. */
static bool fill(exec_state *x)
{
	for (;;) {
		ssize_t got;

		if (herd__buf_reserve(&x->in, 65536) != HERD_OK)
			return false;
		got = read(x->rfd, x->in.data + x->in.len, x->in.cap - x->in.len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (got <= 0)
			return false;
		x->in.len += (size_t)got;
	}
}

static herd_status read_spec(exec_state *x, herd__node_spec *spec)
{
	int64_t deadline = herd__net_deadline(SPEC_TIMEOUT_MS);

	for (;;) {
		struct pollfd p = { .fd = x->rfd, .events = POLLIN };
		size_t len;

		HERD_CHECK(herd__launch_frame_peek(&x->in, &len));
		if (len != SIZE_MAX) {
			HERD_CHECK(herd__launch_spec_decode(spec, x->in.data + x->in.off + 4, len));
			herd__buf_consume(&x->in, len + 4);
			return HERD_OK;
		}
		if (herd__net_now_ms() >= deadline)
			return herd__error(HERD_ETIMEDOUT, "no spec from the launcher "
					   "within %d ms", SPEC_TIMEOUT_MS);
		if (poll(&p, 1, herd__net_remaining_ms(deadline)) < 0 && errno != EINTR)
			return herd__error_errno(HERD_ESYS, errno, "waiting for the spec from the "
						 "launcher");
		if (p.revents != 0 && !fill(x))
			return herd__error(HERD_ECLOSED, "the launcher closed the "
					   "channel before sending the spec");
	}
}

static herd_status emit_ring(void *arg, const void *image, size_t len)
{
	exec_state *x = arg;

	return herd__launch_enc_ring(&x->out, image, len);
}

/* What the node says of itself, taken on a thread of its own: NVML at a
 * GPU fault may take seconds or hang, and the node's loop must not. */
typedef struct words_job {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int refs;             /* the waiter's and the thread's */
	char words[1024];
} words_job;

static void words_release(words_job *w)
{
	bool last;

	pthread_mutex_lock(&w->mu);
	last = --w->refs == 0;
	pthread_mutex_unlock(&w->mu);
	if (last) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
	}
}

static void *words_thread(void *arg)
{
	words_job *w = arg;
	char words[sizeof(w->words)];

	herd__telemetry_node_words(words, sizeof(words));
	pthread_mutex_lock(&w->mu);
	memcpy(w->words, words, sizeof(words));
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	words_release(w);
	return NULL;
}

/* herd__telemetry_node_words into out, within WORDS_MS; "" past it (the
 * thread finishes on its own). */
static void node_words(char *out, size_t cap)
{
	words_job *w = calloc(1, sizeof(*w));
	pthread_attr_t attr;
	pthread_t t;
	int64_t until = herd__net_deadline(WORDS_MS);

	out[0] = '\0';
	if (w == NULL)
		return;
	pthread_mutex_init(&w->mu, NULL);
	herd__net_cond_init(&w->cv);
	w->refs = 2;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, words_thread, w) != 0) {
		pthread_attr_destroy(&attr);
		w->refs = 1;
		words_release(w);
		return;
	}
	pthread_attr_destroy(&attr);
	pthread_mutex_lock(&w->mu);
	while (!w->done && herd__net_cond_wait_until(&w->cv, &w->mu, until) == 0)
		;
	if (w->done)
		herd__strlcpy(out, w->words, cap);
	pthread_mutex_unlock(&w->mu);
	if (!w->done)
		herd__log_warn("herd exec: what this node says of itself took over %d ms; sent "
			       "without it", WORDS_MS);
	words_release(w);
}

/*
 * The answer to rings (seq: the request's, 0 when none): copies of the
 * rings of this node's ranks, when the launcher does not see their
 * directory, and, for a failure (full: the failure's request, or its own
 * rank's before done), whole and with what the node says of itself, else
 * (a straggler round) their newest calls; then the rings frame.
 */
static void send_rings(exec_state *x, int seq, bool full)
{
	char words[1024] = "";
	int n = 0;

	if (x->broken)
		return;
	if (x->trace_dir != NULL) {
		queue(x, herd__trace_copies(x->trace_dir, full ? HERD__TRACE_COPY_MAX
								 : HERD__LAUNCH_ROUND_CALLS,
					    emit_ring, x, &n));
		herd__log_debug("herd exec: %d flight recorders of %s sent to the launcher", n,
				x->trace_dir);
	}
	if (full)
		node_words(words, sizeof(words));
	queue(x, herd__launch_enc_rings(&x->out, seq, words[0] != '\0' ? words : NULL));
}

/*
 * Whether the launcher sees the ranks' trace directory (spec env's
 * HERD_TRACE_DIR): it holds the file "launcher" with the spec's token.
 * When it does not, x->trace_dir is set and the rings travel as copies.
 */
static void trace_dir_seen(exec_state *x, const herd__node_spec *spec)
{
	const char *dir = NULL;
	char path[4096], got[80];
	ssize_t n = -1;
	int fd;

	for (size_t i = 0; spec->env != NULL && spec->env[i] != NULL; i++)
		if (strncmp(spec->env[i], "HERD_TRACE_DIR=", 15) == 0)
			dir = spec->env[i] + 15;
	if (dir == NULL || dir[0] == '\0' || spec->trace_token == NULL)
		return;
	snprintf(path, sizeof(path), "%s/launcher", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd >= 0) {
		n = read(fd, got, sizeof(got) - 1);
		close(fd);
	}
	if (n >= 0) {
		got[n] = '\0';
		if (strcmp(got, spec->trace_token) == 0)
			return;
	}
	x->trace_dir = dir;
}

/*
 * herd health at level on this node, before it says ready: HERD_EUNAVAIL
 * naming each failed check of each GPU when one fails.  A node without a
 * GPU has nothing to fail.
 */
static herd_status health_gate(int level)
{
	herd_health_opts o = HERD_HEALTH_OPTS_INIT;
	herd_health_report *r = NULL;
	char failed[2048] = "";
	size_t n = 0;
	herd_status st;

	o.level = level;
	st = herd_health_run(&r, &o);
	if (st != HERD_OK)
		return herd__error_wrap(st, "herd health could not run (level %d): ", level);
	for (size_t g = 0; g < r->ngpus; g++)
		for (size_t c = 0; c < r->gpus[g].nchecks && n < sizeof(failed); c++) {
			const herd_health_check *k = &r->gpus[g].checks[c];

			if (k->result != HERD_HEALTH_FAIL)
				continue;
			n += (size_t)snprintf(failed + n, sizeof(failed) - n, "%sGPU %d (%s) %s: %s",
					      n ? "; " : "", r->gpus[g].index, r->gpus[g].bus_id,
					      k->name, k->detail);
		}
	herd_health_free(r);
	if (n > 0)
		return herd__error(HERD_EUNAVAIL, HERD__HEALTH_REFUSED " (level %d) failed: %s", level,
				   failed);
	return HERD_OK;
}

/* Obeys the commands that have arrived. */
static herd_status commands(exec_state *x)
{
	for (;;) {
		herd__launch_msg m;
		size_t len;

		HERD_CHECK(herd__launch_frame_peek(&x->in, &len));
		if (len == SIZE_MAX)
			return HERD_OK;
		HERD_CHECK(herd__launch_msg_decode(&m, x->in.data + x->in.off + 4, len));
		/* Commands go on to the subtree as they came. */
		if ((m.type == HERD__LAUNCH_T_SIGNAL || m.type == HERD__LAUNCH_T_STOP ||
		     m.type == HERD__LAUNCH_T_GO || m.type == HERD__LAUNCH_T_RINGS) &&
		    x->relay != NULL)
			herd__relay_command(x->relay, (const char *)x->in.data + x->in.off + 4, len);
		if (m.type == HERD__LAUNCH_T_GO) {
			herd_status gst = herd__node_go(x->node);

			/* The node failed: said before any rank's end, as a spec refused. */
			if (gst != HERD_OK) {
				queue(x, herd__launch_enc_error(&x->out, gst, herd_last_error()));
				herd__node_stop(x->node, 0);
			}
		} else if (m.type == HERD__LAUNCH_T_SIGNAL) {
			herd__node_signal(x->node, (int)m.sig);
		} else if (m.type == HERD__LAUNCH_T_STOP) {
			x->stopping = true;
			herd__node_stop(x->node, (int)m.grace);
		} else if (m.type == HERD__LAUNCH_T_RINGS) {
			send_rings(x, (int)m.seq, m.seq > 0);
		} else if (m.type == HERD__LAUNCH_T_RELAY && x->relay != NULL) {
			herd_status st = herd__relay_down(x->relay, &m);

			if (st != HERD_OK) {
				herd__launch_msg_free(&m);
				return st;
			}
		} else {
			herd__launch_type t = m.type;

			herd__launch_msg_free(&m);
			return herd__error(HERD_EFORMAT, "unexpected %s frame from the "
					   "launcher", herd__launch_type_name(t));
		}
		herd__launch_msg_free(&m);
		herd__buf_consume(&x->in, len + 4);
	}
}

/* Tells the launcher why this node cannot run (best effort) and returns st. */
static herd_status refuse(exec_state *x, herd_status st)
{
	int64_t deadline = herd__net_deadline(REFUSE_TIMEOUT_MS);
	char msg[1024];

	herd__strlcpy(msg, herd_last_error(), sizeof(msg));
	if (herd__launch_enc_error(&x->out, st, msg) == HERD_OK)
		while (flush(x) && x->out.len > x->out.off && herd__net_now_ms() < deadline) {
			struct pollfd p = { .fd = x->wfd, .events = POLLOUT };

			poll(&p, 1, herd__net_remaining_ms(deadline));
		}
	herd__error(st, "%s", msg);
	return st;
}

/* The launcher is gone (or talks nonsense): no orphans, stop the ranks. */
static void launcher_gone(exec_state *x)
{
	x->launcher_gone = true;
	x->stopping = true;
	herd__loop_unwatch(&x->loop, &x->chan_r);
	herd__node_stop(x->node, x->grace_ms);
	herd__relay_shut(x->relay, x->grace_ms);
}

static void on_channel(herd__watcher *w, short revents)
{
	exec_state *x = w->data;
	bool open = fill(x);
	herd_status cst = commands(x);

	(void)revents;
	if (cst != HERD_OK && x->st == HERD_OK)
		x->st = cst;
	if (!open || cst != HERD_OK)
		launcher_gone(x);
}

static void on_writable(herd__watcher *w, short revents)
{
	(void)revents;
	flush(w->data);
}

/* A signal handler's self-pipe: stop the ranks. */
static void on_stop(herd__watcher *w, short revents)
{
	exec_state *x = w->data;
	char c[64];

	(void)revents;
	while (read(w->fd, c, sizeof(c)) > 0)
		;
	x->stopping = true;
	herd__node_stop(x->node, x->grace_ms);
	herd__relay_shut(x->relay, x->grace_ms);
}

/* The node's rank pipes and pidfds, left unread while output is backlogged. */
static size_t node_prepare(herd__source *src, struct pollfd *fds, int *timeout_ms)
{
	exec_state *x = src->data;
	int t = herd__node_timeout(x->node);

	if (!backlogged(x)) {
		*timeout_ms = t;
		return herd__node_pollfds(x->node, fds);
	}
	/* Reap and escalate even while backlogged. */
	*timeout_ms = t < 0 || t > 100 ? 100 : t;
	return 0;
}

static void node_dispatch(herd__source *src, const struct pollfd *fds, size_t n)
{
	exec_state *x = src->data;

	herd__node_process(x->node, fds, n);
}

static herd_status serve(exec_state *x, int stop_fd)
{
	herd__watcher stop_w;
	herd__source node_src = { .max_fds = herd__node_nfds(x->node), .prepare = node_prepare,
				  .dispatch = node_dispatch, .data = x };
	bool sent_done = false;
	herd_status st;

	herd__watcher_init(&x->chan_w, x->wfd, on_writable, x);
	herd__watcher_init(&stop_w, stop_fd, on_stop, x);
	if (herd__loop_source(&x->loop, &node_src) != HERD_OK ||
	    (stop_fd >= 0 && herd__loop_watch(&x->loop, &stop_w, POLLIN) != HERD_OK) ||
	    herd__loop_watch(&x->loop, &x->chan_r, POLLIN) != HERD_OK) {
		/* herd__node_free ends the ranks. */
		herd__loop_source_stop(&x->loop, &node_src);
		herd__loop_unwatch(&x->loop, &stop_w);
		return HERD_ENOMEM;
	}
	/* Frames that came with the spec (a relay's subtree specs) are due now. */
	x->st = commands(x);
	if (x->st != HERD_OK)
		launcher_gone(x);
	for (;;) {
		if (x->frame_st != HERD_OK) {
			x->st = x->frame_st;
			herd__node_stop(x->node, 0);
		}
		if (herd__node_done(x->node) && !sent_done) {
			/* What the failed ranks' rings say, before their node
			 * goes (the launcher's request may come too late). */
			if (x->rank_failed)
				send_rings(x, 0, true);
			else if (x->trace_dir != NULL)
				herd__trace_remove_of(x->trace_dir, x->pids, (size_t)x->nranks);
			queue(x, herd__launch_enc_done(&x->out));
			sent_done = true;
		}
		/* A relay stays until its children's channels have closed.
		 * The last frames wait for the launcher as long as its channel
		 * is open: it takes them at its reader's pace, and reads on
		 * (dropping lines) once its reader has stalled, so a launcher
		 * that lives takes them; one that dies closes the channel. */
		if (sent_done && herd__relay_done(x->relay) &&
		    (!flush(x) || x->out.len == x->out.off))
			break;
		herd__relay_hold(x->relay, backlogged(x));
		st = herd__loop_watch(&x->loop, &x->chan_w,
				      !x->broken && x->out.len > x->out.off ? POLLOUT : 0);
		if (st == HERD_OK)
			st = herd__loop_run_once(&x->loop, -1);
		if (st != HERD_OK) {
			/* The loop cannot turn: herd__node_free kills and reaps
			 * the ranks, and the launcher sees the channel close. */
			x->st = st;
			break;
		}
		flush(x);
	}
	herd__loop_source_stop(&x->loop, &node_src);
	herd__loop_unwatch(&x->loop, &stop_w);
	st = x->st;
	if (st == HERD_OK && x->launcher_gone)
		st = herd__error(HERD_ECLOSED, "the launcher went away; the ranks "
				 "were stopped");
	return st;
}

herd_status herd_agent_exec(int rfd, int wfd, int stop_fd)
{
	return herd_agent_exec_ranks(rfd, wfd, stop_fd, NULL);
}

herd_status herd_agent_exec_ranks(int rfd, int wfd, int stop_fd, bool *ranks_ok)
{
	exec_state x = { .rfd = rfd, .wfd = wfd };
	herd__node_spec spec;
	herd__node_events ev = { .userdata = &x, .started = ev_started, .output = ev_output,
				 .full = ev_full, .exited = ev_exited, .paused = ev_paused };
	char host[256];
	herd_status st;

	if (ranks_ok != NULL)
		*ranks_ok = false;
	if (rfd < 0 || wfd < 0)
		return herd__error(HERD_EINVAL, "herd exec: bad channel fds %d, %d", rfd, wfd);
	herd__buf_init(&x.in, HERD__LAUNCH_FRAME_MAX + 4);
	herd__buf_init(&x.out, 0);
	herd__loop_init(&x.loop);
	herd__watcher_init(&x.chan_r, rfd, on_channel, &x);
	memset(&spec, 0, sizeof(spec));
	fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
	fcntl(wfd, F_SETFL, fcntl(wfd, F_GETFL) | O_NONBLOCK);
	st = read_spec(&x, &spec);
	if (st != HERD_OK) {
		if (st != HERD_ECLOSED)
			st = refuse(&x, st);
		goto out;
	}
	x.grace_ms = spec.grace_ms;
	x.lines = spec.lines;
	x.ranks = spec.ranks;
	x.nranks = spec.nranks;
	x.pids = calloc((size_t)(spec.nranks > 0 ? spec.nranks : 1), sizeof(*x.pids));
	trace_dir_seen(&x, &spec);
	if (spec.health > 0 && (st = health_gate(spec.health)) != HERD_OK) {
		st = refuse(&x, st);
		goto out;
	}
	if (gethostname(host, sizeof(host)) != 0)
		herd__strlcpy(host, "?", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	/* Checked before ready: the launcher says go only once every node
	 * is, so a node that refuses leaves no rank started anywhere. */
	st = herd__node_create(&x.node, &spec, &ev);
	if (st != HERD_OK) {
		st = refuse(&x, st);
		goto out;
	}
	HERD_CHECK_GOTO(herd__launch_enc_ready(&x.out, host, (long)getpid(), x.trace_dir != NULL),
			st, out);
	flush(&x);
	/* The subtree's ssh connections go up while the launcher waits. */
	if (spec.nsub > 0) {
		st = herd__relay_start(&x.relay, &spec, &x.out, &x.loop);
		if (st != HERD_OK) {
			st = refuse(&x, st);
			goto out;
		}
	}
	flush(&x);
	st = serve(&x, stop_fd);
	if (ranks_ok != NULL)
		*ranks_ok = st == HERD_OK && !x.rank_not_ok;
out:
	herd__relay_free(x.relay);
	free(x.pids);
	herd__loop_free(&x.loop);
	herd__node_free(x.node);
	herd__node_spec_free(&spec);
	herd__buf_free(&x.in);
	herd__buf_free(&x.out);
	return st;
}
