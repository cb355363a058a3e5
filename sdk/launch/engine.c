/*
 * sdk/launch/engine.c - the remote-run engine (engine.h): helpers on many
 * nodes, each watched by up to three watchers (stdout, stdin, stderr) and
 * two timers (its deadline, and the wait for its exit once its output has
 * ended) in one loop.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "net.h"
#include "remote.h"
#include "topo/hostlist.h"

/* How long a helper ended by the engine gets between SIGTERM and SIGKILL:
 * short, so that a deadline's error comes within half a second of it even
 * when the helper ignores SIGTERM (ssh and srun end on it at once). */
#define ABORT_WAIT_MS 500
/* How often an exit is looked for once a helper's output has ended. */
#define REAP_POLL_MS 5
#define DEFAULT_IN_MAX ((size_t)1 << 20)
/* Most words of a command, the relay's settings included. */
#define MAX_WORDS 64
/* A one-step helper: what each task's stderr keeps (its last lines), what
 * srun's own lines keep, and the longest label ("  1234567: ") a line may
 * start with before it can be sorted. */
#define STEP_ERR_MAX ((size_t)1 << 16)
#define STEP_SAID_MAX ((size_t)1 << 20)
#define LABEL_MAX 24
/* Bytes of a one-step helper's stdout or stderr read at most per turn. */
#define STEP_READ_MAX ((size_t)1 << 20)
/* No line of a one-step stream is in progress (out_task, err_task). */
#define AT_LINE_START (-2L)

typedef enum helper_state { PLANNED, RUNNING, ENDED } helper_state;

typedef struct helper {
	herd__engine *e;
	size_t index;
	herd__launch_link link;
	herd__watcher rw, ww, ew;       /* stdout, stdin, stderr */
	herd__timer deadline, reap;
	size_t first, count;
	char *forward;                  /* a relay's group beyond itself, or NULL */
	int patience_ms;
	helper_state state;
	bool attached;                  /* a backend's channel: not reaped here */
	int64_t kill_at;                /* ended by the engine: SIGKILL then, if still there */
	bool want_write;
	bool eof;                       /* its stdout ended: what in holds is the last */
	size_t in_max;
} helper;

struct herd__engine {
	const herd__launch_backend *be;
	herd__engine_client client;
	herd__loop own, *loop;          /* the loop: its own, or the client's */
	bool hold;
	helper **h;
	size_t n, cap;
	size_t next;                    /* the next planned helper to start */
	size_t running, live;
	herd__engine_cmd cmd;           /* the fan-out's command (hosts borrowed) */
	herd_status start_st;           /* a one-step helper that could not start */
	char start_why[1024];
	/* A one-step helper's output sorted by task, and the step's own lines. */
	herd__buf *node_out, *node_err, said, err_part;
	bool *node_over;                /* a task printed more than the command's in_max */
	long out_task, err_task;        /* the task whose line is in progress (AT_LINE_START:
					 * none; -1: srun's own) on stdout and on stderr */
	size_t nnode_bufs;
};

/* ---- ending ------------------------------------------------------------------- */

static void unwatch_all(helper *p)
{
	herd__loop *l = p->e->loop;

	herd__loop_unwatch(l, &p->rw);
	herd__loop_unwatch(l, &p->ww);
	herd__loop_unwatch(l, &p->ew);
	herd__loop_timer_stop(l, &p->deadline);
	herd__loop_timer_stop(l, &p->reap);
}

/*
 * Ends p's process without waiting for it: its channel closed, SIGTERM to
 * its process group now, SIGKILL ABORT_WAIT_MS later if it is still there;
 * the reap timer collects it (herd__engine_free at the latest), so that no
 * turn of the loop blocks on a helper that is slow to die.
 */
static void terminate(helper *p)
{
	herd__launch_link_close(&p->link);
	if (p->link.ch.pid <= 0 || p->kill_at != 0)
		return;
	kill(-p->link.ch.pid, SIGTERM);
	p->kill_at = herd__net_now_ms() + ABORT_WAIT_MS;
	(void)herd__loop_timer(p->e->loop, &p->reap, herd__net_now_ms() + REAP_POLL_MS);
}

static void finish(helper *p, herd_status st, int wstatus, const char *why)
{
	herd__engine *e = p->e;
	herd__engine_end end = { st, wstatus, why != NULL ? why : "" };

	if (p->state == ENDED)
		return;
	unwatch_all(p);
	e->running -= p->state == RUNNING;
	e->live--;
	p->state = ENDED;
	/* A process of ours that is not known to have ended is ended. */
	if (!p->attached && st != HERD_OK)
		terminate(p);
	else
		herd__launch_link_close(&p->link);
	if (e->client.ended != NULL)
		e->client.ended(e->client.userdata, p->index, &end);
}

/* Ends h without telling the client (it knows). */
static void finish_quietly(herd__engine *e, helper *p)
{
	herd__engine_client quiet = e->client;

	e->client.ended = NULL;
	finish(p, HERD_OK, -1, "");
	e->client = quiet;
}

void herd__engine_close(herd__engine *e, size_t h, herd_status st, const char *why)
{
	helper *p = e->h[h];

	if (p->state == ENDED)
		return;
	if (st != HERD_OK) {
		finish(p, st, -1, why);
		return;
	}
	finish_quietly(e, p);
	if (!p->attached)
		terminate(p);
}

void herd__engine_kill(herd__engine *e, size_t h)
{
	helper *p = e->h[h];

	finish_quietly(e, p);
	terminate(p);
}

/*
 * Once stdout and stderr have both ended: an attached channel is closed;
 * a process of ours is reaped (looked for again shortly while it lingers).
 */
static void maybe_done(helper *p)
{
	int wstatus = 0;
	pid_t got;

	if (p->state != RUNNING || p->link.ch.rfd >= 0 || p->link.ch.errfd >= 0)
		return;
	if (p->attached || p->link.ch.pid <= 0) {
		finish(p, p->attached ? HERD_ECLOSED : HERD_OK, -1, "its output ended");
		return;
	}
	got = waitpid(p->link.ch.pid, &wstatus, WNOHANG);
	if (got == p->link.ch.pid) {
		p->link.ch.pid = 0;
		finish(p, HERD_OK, wstatus, NULL);
	} else if (got < 0 && errno != EINTR) {
		char why[128];

		snprintf(why, sizeof(why), "cannot collect its exit status: %s", strerror(errno));
		p->link.ch.pid = 0;
		finish(p, HERD_ESYS, -1, why);
	} else if (herd__loop_timer(p->e->loop, &p->reap,
				    herd__net_now_ms() + REAP_POLL_MS) != HERD_OK) {
		finish(p, HERD_ENOMEM, -1, herd_last_error());
	}
}

/* A process the engine ended: reaped when gone, SIGKILLed at kill_at. */
static void reap_ended(helper *p)
{
	pid_t got = waitpid(p->link.ch.pid, NULL, WNOHANG);

	if (got == p->link.ch.pid || (got < 0 && errno != EINTR)) {
		p->link.ch.pid = 0;
		return;
	}
	if (herd__net_now_ms() >= p->kill_at)
		kill(-p->link.ch.pid, SIGKILL);
	(void)herd__loop_timer(p->e->loop, &p->reap, herd__net_now_ms() + REAP_POLL_MS);
}

static void on_reap(herd__timer *t)
{
	helper *p = t->data;

	if (p->state == ENDED) {
		if (p->link.ch.pid > 0)
			reap_ended(p);
		return;
	}
	maybe_done(p);
}

static void on_deadline(herd__timer *t)
{
	helper *p = t->data;
	char why[96];

	snprintf(why, sizeof(why), "no answer within %d s", (p->patience_ms + 999) / 1000);
	finish(p, HERD_ETIMEDOUT, -1, why);
}

/* ---- a one-step helper's lines ------------------------------------------------------ */

/*
 * A line of srun --label's output: "  T: text" (the task number padded to
 * the widest); *task -1 for a line of srun's own.
 */
static void split_label(const char *line, size_t n, long *task, const char **text, size_t *len)
{
	size_t i = 0;
	long t = 0;

	*task = -1;
	*text = line;
	*len = n;
	while (i < n && line[i] == ' ')
		i++;
	if (i == n || line[i] < '0' || line[i] > '9')
		return;
	for (; i < n && line[i] >= '0' && line[i] <= '9' && t < 10000000; i++)
		t = t * 10 + (line[i] - '0');
	if (i + 1 >= n || line[i] != ':' || line[i + 1] != ' ')
		return;
	*task = t;
	*text = line + i + 2;
	*len = n - i - 2;
}

/*
 * Appends to a buffer that keeps the last of what it is given (a task's
 * stderr, srun's own lines): the oldest bytes go to make room.
 */
static void append_tail(herd__buf *b, const char *p, size_t n)
{
	size_t held = b->len - b->off;

	if (n >= b->max) {
		herd__buf_consume(b, held);
		p += n - (b->max - 1);
		n = b->max - 1;
		held = 0;
	}
	if (held + n > b->max)
		herd__buf_consume(b, held + n - b->max);
	(void)herd__buf_append(b, p, n);
}

/*
 * A piece of task's line (task -1: srun's own), and its end when ended.
 * A task's stdout holds at most the command's in_max bytes: beyond that
 * the task is marked (herd__engine_node_over) and the rest dropped.
 */
static void to_task(herd__engine *e, long task, bool err, const char *text, size_t n,
		    bool ended)
{
	herd__buf *to;

	if (task < 0 || (size_t)task >= e->nnode_bufs) {
		append_tail(&e->said, text, n);
		if (ended)
			append_tail(&e->said, "\n", 1);
		return;
	}
	if (err) {
		append_tail(&e->node_err[task], text, n);
		if (ended)
			append_tail(&e->node_err[task], "\n", 1);
		return;
	}
	to = &e->node_out[task];
	if (e->node_over[task])
		return;
	if (herd__buf_append(to, text, n) != HERD_OK ||
	    (ended && herd__buf_append(to, "\n", 1) != HERD_OK))
		e->node_over[task] = true;
}

/*
 * Sorts buf (all of it at its end) into the tasks' buffers as it comes:
 * each line goes to the task its label names, and a line that has not
 * ended yet goes in pieces to the task whose label began it, so that
 * nothing but a label in the making is kept back.
 */
static void sort_lines(herd__engine *e, herd__buf *buf, bool err, bool all)
{
	const char *data = (const char *)buf->data + buf->off;
	size_t len = buf->len - buf->off, at = 0;
	long *task = err ? &e->err_task : &e->out_task;

	while (at < len) {
		const char *line = data + at, *nl = memchr(line, '\n', len - at), *text = line;
		size_t n = nl != NULL ? (size_t)(nl - line) : len - at, tl = n;
		long t = *task;

		if (t == AT_LINE_START) {
			/* A label is read whole: wait for the rest of a short start. */
			if (nl == NULL && !all && n < LABEL_MAX)
				break;
			split_label(line, n, &t, &text, &tl);
		}
		to_task(e, t, err, text, tl, nl != NULL);
		*task = nl != NULL ? AT_LINE_START : t;
		at += n + (nl != NULL);
	}
	herd__buf_consume(buf, at);
}

static bool one_step(const helper *p)
{
	return p->e->nnode_bufs > 0;
}

/* ---- watchers ------------------------------------------------------------------------ */

static void on_stdout(herd__watcher *w, short revents)
{
	helper *p = w->data;
	herd__engine *e = p->e;
	char why[1024] = "";
	herd_status st;

	(void)revents;
	st = herd__launch_link_fill(&p->link);
	if (st != HERD_OK) {
		snprintf(why, sizeof(why), "%s%s",
			 p->attached || st == HERD_EFORMAT ? "" : "reading its output: ",
			 herd_last_error());
		p->eof = true;
	}
	/* Its last words first: a client that gives up on it quotes them. */
	if (!one_step(p))
		herd__launch_link_read_err(&p->link);
	/* What arrived before an end is handled first. */
	if (one_step(p))
		sort_lines(e, &p->link.in, false, st != HERD_OK);
	else if (e->client.input != NULL && p->link.in.len > p->link.in.off)
		e->client.input(e->client.userdata, p->index, &p->link.in);
	if (p->state != RUNNING || st == HERD_OK)
		return;
	if (p->attached || st != HERD_ECLOSED) {
		finish(p, st, -1, why);
		return;
	}
	herd__loop_unwatch(e->loop, &p->rw);
	close(p->link.ch.rfd);
	if (p->link.ch.wfd == p->link.ch.rfd) {
		herd__loop_unwatch(e->loop, &p->ww);
		p->link.ch.wfd = -1;
	}
	p->link.ch.rfd = -1;
	if (p->link.ch.errfd < 0)
		herd__loop_unwatch(e->loop, &p->ew);
	maybe_done(p);
}

/*
 * srun's stderr, labelled too: read (at most STEP_READ_MAX a turn) and
 * sorted into the tasks' buffers as it comes, so that what is held stays
 * bounded however much a task prints.
 */
static void read_step_err(helper *p)
{
	herd__engine *e = p->e;
	herd__launch_link *l = &p->link;

	for (size_t taken = 0; l->ch.errfd >= 0 && taken < STEP_READ_MAX;) {
		ssize_t got;

		if (herd__buf_reserve(&e->err_part, 65536) != HERD_OK)
			break;
		got = read(l->ch.errfd, e->err_part.data + e->err_part.len, 65536);
		if (got < 0 && errno == EINTR)
			continue;
		if (got > 0) {
			e->err_part.len += (size_t)got;
			taken += (size_t)got;
			sort_lines(e, &e->err_part, true, false);
			continue;
		}
		if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			close(l->ch.errfd);
			l->ch.errfd = -1;
		}
		break;
	}
	sort_lines(e, &e->err_part, true, l->ch.errfd < 0);
}

static void on_stderr(herd__watcher *w, short revents)
{
	helper *p = w->data;
	herd__engine *e = p->e;
	herd__launch_link *l = &p->link;

	(void)revents;
	if (!one_step(p))
		herd__launch_link_read_err(l);
	else
		read_step_err(p);
	if (l->ch.errfd < 0) {
		herd__loop_unwatch(e->loop, &p->ew);
		maybe_done(p);
	}
}

static void update_write_watch(helper *p)
{
	herd__launch_link *l = &p->link;
	bool want = l->ch.wfd >= 0 && (p->want_write || l->out.len > l->out.off);

	if (p->state != RUNNING)
		return;
	if (!want) {
		herd__loop_unwatch(p->e->loop, &p->ww);
		return;
	}
	p->ww.fd = l->ch.wfd;
	if (herd__loop_watch(p->e->loop, &p->ww, POLLOUT) != HERD_OK)
		finish(p, HERD_ENOMEM, -1, herd_last_error());
}

static void on_stdin(herd__watcher *w, short revents)
{
	helper *p = w->data;
	herd__engine *e = p->e;

	(void)revents;
	if (p->link.out.len > p->link.out.off) {
		herd__engine_flush(e, p->index);
		if (p->state != RUNNING)
			return;
	}
	if (p->want_write && e->client.writable != NULL)
		e->client.writable(e->client.userdata, p->index);
	update_write_watch(p);
}

/* ---- helpers ---------------------------------------------------------------------- */

static herd_status add_helper(herd__engine *e, size_t first, size_t count, size_t in_max,
			      helper **out)
{
	helper *p = NULL;

	if (e->n == e->cap) {
		size_t cap = e->cap != 0 ? 2 * e->cap : 16;
		helper **h = realloc(e->h, cap * sizeof(*h));

		if (h == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the helpers");
		e->h = h;
		e->cap = cap;
	}
	HERD_CHECK(herd__calloc(&p, 1, sizeof(*p), "a helper"));
	p->e = e;
	p->index = e->n;
	p->first = first;
	p->count = count;
	p->in_max = in_max != 0 ? in_max : DEFAULT_IN_MAX;
	herd__launch_link_init(&p->link);
	herd__buf_init(&p->link.in, p->in_max);
	herd__watcher_init(&p->rw, -1, on_stdout, p);
	herd__watcher_init(&p->ww, -1, on_stdin, p);
	herd__watcher_init(&p->ew, -1, on_stderr, p);
	herd__timer_init(&p->deadline, on_deadline, p);
	herd__timer_init(&p->reap, on_reap, p);
	p->state = PLANNED;
	e->h[e->n++] = p;
	e->live++;
	*out = p;
	return HERD_OK;
}

/* Watches a helper's channel, now running. */
static herd_status watch(helper *p, const herd__launch_channel *ch)
{
	herd__engine *e = p->e;

	herd__launch_link_attach(&p->link, ch);
	p->state = RUNNING;
	e->running++;
	p->rw.fd = p->link.ch.rfd;
	p->ew.fd = p->link.ch.errfd;
	if (p->rw.fd >= 0)
		HERD_CHECK(herd__loop_watch(e->loop, &p->rw, e->hold ? 0 : POLLIN));
	if (p->ew.fd >= 0)
		HERD_CHECK(herd__loop_watch(e->loop, &p->ew, POLLIN));
	if (p->patience_ms > 0)
		HERD_CHECK(herd__loop_timer(e->loop, &p->deadline,
					    herd__net_deadline(p->patience_ms)));
	return HERD_OK;
}

herd_status herd__engine_attach(herd__engine *e, const herd__launch_channel *ch, size_t first,
				size_t count, size_t in_max, size_t *h)
{
	herd__launch_channel own = *ch;
	helper *p;

	if (add_helper(e, first, count, in_max, &p) != HERD_OK) {
		/* The channel is the engine's whatever happens: ended here. */
		herd__launch_link l;

		herd__launch_link_init(&l);
		l.ch = own;
		herd__launch_link_close(&l);
		herd__launch_link_reap(&l, ABORT_WAIT_MS);
		herd__launch_link_free(&l);
		return HERD_ENOMEM;
	}
	p->attached = true;
	*h = p->index;
	if (watch(p, ch) != HERD_OK) {
		finish(p, HERD_ENOMEM, -1, herd_last_error());
		return HERD_ENOMEM;
	}
	/* Nothing planned before it waits for it. */
	if (e->next == p->index)
		e->next++;
	return HERD_OK;
}

/* Starts a planned helper through the backend; a failure ends it. */
static void start(helper *p)
{
	herd__engine *e = p->e;
	const herd__engine_cmd *c = &e->cmd;
	const char *words[MAX_WORDS + 8];
	char buf[8192];
	size_t n = 0, k = 0;
	herd__launch_channel ch;
	herd__launch_run run;
	herd_status st;

	st = c->words(c->userdata, p->forward, words, MAX_WORDS, &n, buf, sizeof(buf));
	if (st == HERD_OK && p->forward != NULL)
		st = herd__remote_relay_words(c->program, words + n, MAX_WORDS + 8 - n, &k);
	if (st != HERD_OK) {
		finish(p, st, -1, herd_last_error());
		return;
	}
	memset(&run, 0, sizeof(run));
	run.program = c->program;
	run.words = words;
	run.nwords = n + k;
	run.input = c->input;
	run.connect_timeout_ms = c->timeout_ms < 10000 ? c->timeout_ms : 0;
	run.hosts = c->hosts + p->first;
	run.nhosts = one_step(p) ? p->count : 1;
	st = e->be->run(&run, &ch);
	if (st != HERD_OK) {
		/* One step for every node: the command itself cannot run. */
		if (one_step(p) && e->start_st == HERD_OK) {
			e->start_st = st;
			herd__strlcpy(e->start_why, herd_last_error(), sizeof(e->start_why));
		}
		finish(p, st, -1, herd_last_error());
		return;
	}
	if (watch(p, &ch) != HERD_OK) {
		p->link.ch = ch;
		finish(p, HERD_ENOMEM, -1, herd_last_error());
		return;
	}
	/* The command reads nothing: its stdin closes now. */
	if (!c->input)
		herd__engine_close_input(e, p->index);
	if (e->client.started != NULL)
		e->client.started(e->client.userdata, p->index);
}

herd_status herd__engine_fanout(herd__engine *e, const herd__engine_cmd *cmd)
{
	size_t n = cmd->nhosts, groups;
	long width;
	helper *p;

	if (e->be == NULL || e->be->run == NULL)
		return herd__error(HERD_EUNAVAIL, "the %s backend cannot run a command on nodes",
				   e->be != NULL ? e->be->name : "(no)");
	if (e->cmd.hosts != NULL)
		return herd__error(HERD_EINVAL, "an engine runs one command");
	e->cmd = *cmd;
	if (e->be->one_step) {
		size_t in_max = cmd->in_max != 0 ? cmd->in_max : DEFAULT_IN_MAX;

		HERD_CHECK(herd__calloc(&e->node_out, n + 1, sizeof(herd__buf), "the tasks' output"));
		HERD_CHECK(herd__calloc(&e->node_err, n + 1, sizeof(herd__buf), "the tasks' output"));
		HERD_CHECK(herd__calloc(&e->node_over, n + 1, sizeof(bool), "the tasks' output"));
		for (size_t i = 0; i < n; i++) {
			herd__buf_init(&e->node_out[i], in_max);
			herd__buf_init(&e->node_err[i], STEP_ERR_MAX);
		}
		e->nnode_bufs = n;
		HERD_CHECK(add_helper(e, 0, n, 0, &p));
		/* Its lines are sorted into the tasks' buffers as they come: what
		 * waits in its own buffer is at most one turn's read and a label. */
		p->link.in.max = STEP_READ_MAX + 65536 + LABEL_MAX;
		/* Its stderr too, by on_stderr alone: srun's last lines
		 * ("task 1: Exited ...") often come with the end of its stdout. */
		p->link.err_elsewhere = true;
		p->patience_ms = cmd->timeout_ms;
		return HERD_OK;
	}
	width = (long)n;
	if (!cmd->flat)
		HERD_CHECK(herd__ssh_tree_width(n, &width));
	groups = herd__launch_tree_groups(n, (int)width);
	for (size_t k = 0; k < groups; k++) {
		size_t off, len;

		herd__launch_tree_group(n, (int)width, k, &off, &len);
		/* A relay answers for its group: its output may be as large as
		 * all of theirs. */
		HERD_CHECK(add_helper(e, off, len, (cmd->in_max != 0 ? cmd->in_max
							      : DEFAULT_IN_MAX) * len, &p));
		p->patience_ms = len > 1 ? 2 * cmd->timeout_ms : cmd->timeout_ms;
		if (len > 1)
			HERD_CHECK(herd__hostlist_compress(&p->forward, cmd->hosts + off + 1,
							   len - 1));
	}
	return HERD_OK;
}

herd_status herd__engine_run_once(herd__engine *e, int64_t until)
{
	size_t fanout = e->cmd.fanout != 0 ? e->cmd.fanout : SIZE_MAX;

	for (; e->next < e->n && e->running < fanout; e->next++)
		if (e->h[e->next]->state == PLANNED)
			start(e->h[e->next]);
	if (e->start_st != HERD_OK)
		return herd__error(e->start_st, "%s", e->start_why);
	return herd__loop_run_once(e->loop, until);
}

/* ---- the rest of the API -------------------------------------------------------------- */

herd_status herd__engine_create(herd__engine **out, const herd__launch_backend *be,
				const herd__engine_client *client, herd__loop *loop)
{
	herd__engine *e = NULL;

	HERD_CHECK(herd__calloc(&e, 1, sizeof(*e), "the engine"));
	e->be = be;
	e->client = *client;
	herd__loop_init(&e->own);
	e->loop = loop != NULL ? loop : &e->own;
	herd__buf_init(&e->said, STEP_SAID_MAX);
	herd__buf_init(&e->err_part, STEP_READ_MAX + 65536 + LABEL_MAX);
	e->out_task = e->err_task = AT_LINE_START;
	*out = e;
	return HERD_OK;
}

/*
 * The helpers' processes, ended side by side under one deadline: the
 * engine's own get SIGTERM now (those it ended already got theirs, and get
 * SIGKILL at their kill_at); attached ones (a job's ssh, whose channel has
 * just closed) are given until the deadline to end by themselves.  Every
 * one still there at the deadline gets SIGKILL.  So ending N helpers takes
 * reap_ms at most, not N times it.
 */
static void reap_processes(herd__engine *e, int reap_ms)
{
	int64_t deadline = herd__net_deadline(reap_ms);
	size_t left = 0;

	for (size_t i = 0; i < e->n; i++) {
		helper *p = e->h[i];

		if (p->link.ch.pid <= 0)
			continue;
		if (!p->attached && p->kill_at == 0)
			kill(-p->link.ch.pid, SIGTERM);
		left++;
	}
	while (left > 0) {
		int64_t now = herd__net_now_ms();
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		left = 0;
		for (size_t i = 0; i < e->n; i++) {
			helper *p = e->h[i];
			bool late = now >= deadline || (p->kill_at != 0 && now >= p->kill_at);
			pid_t got;

			if (p->link.ch.pid <= 0)
				continue;
			if (late)
				kill(-p->link.ch.pid, SIGKILL);
			got = waitpid(p->link.ch.pid, NULL, late ? 0 : WNOHANG);
			if (got == p->link.ch.pid || (got < 0 && errno != EINTR))
				p->link.ch.pid = 0;
			else
				left++;
		}
		if (left > 0)
			nanosleep(&ts, NULL);
	}
}

void herd__engine_free(herd__engine *e, int reap_ms)
{
	if (e == NULL)
		return;
	/* Every channel closes first, so that the helpers end side by side. */
	for (size_t i = 0; i < e->n; i++) {
		unwatch_all(e->h[i]);
		herd__launch_link_close(&e->h[i]->link);
	}
	reap_processes(e, reap_ms);
	for (size_t i = 0; i < e->n; i++) {
		helper *p = e->h[i];

		if (p->attached)
			herd__launch_link_reap(&p->link, reap_ms);
		herd__launch_link_free(&p->link);
		free(p->forward);
		free(p);
	}
	for (size_t i = 0; i < e->nnode_bufs; i++) {
		herd__buf_free(&e->node_out[i]);
		herd__buf_free(&e->node_err[i]);
	}
	free(e->node_out);
	free(e->node_err);
	free(e->node_over);
	herd__buf_free(&e->said);
	herd__buf_free(&e->err_part);
	herd__loop_free(&e->own);
	free(e->h);
	free(e);
}

herd__loop *herd__engine_loop(herd__engine *e)
{
	return e->loop;
}

void herd__engine_hold_input(herd__engine *e, bool hold)
{
	if (e->hold == hold)
		return;
	e->hold = hold;
	for (size_t i = 0; i < e->n; i++) {
		helper *p = e->h[i];

		if (p->state == RUNNING && herd__watcher_active(&p->rw) &&
		    herd__loop_watch(e->loop, &p->rw, hold ? 0 : POLLIN) != HERD_OK)
			finish(p, HERD_ENOMEM, -1, herd_last_error());
	}
}

void herd__engine_read(herd__engine *e, size_t h)
{
	helper *p = e->h[h];

	if (p->state == RUNNING && herd__watcher_active(&p->rw))
		on_stdout(&p->rw, POLLIN);
}

size_t herd__engine_helpers(const herd__engine *e)
{
	return e->n;
}

void herd__engine_nodes(const herd__engine *e, size_t h, size_t *first, size_t *count)
{
	*first = e->h[h]->first;
	*count = e->h[h]->count;
}

bool herd__engine_one_step(const herd__engine *e)
{
	return e->nnode_bufs > 0;
}

bool herd__engine_relays(const herd__engine *e, size_t h)
{
	return e->h[h]->forward != NULL;
}

size_t herd__engine_live(const herd__engine *e)
{
	return e->live;
}

bool herd__engine_input_ended(const herd__engine *e, size_t h)
{
	return e->h[h]->eof;
}

bool herd__engine_ended(const herd__engine *e, size_t h)
{
	return e->h[h]->state == ENDED;
}

bool herd__engine_started(const herd__engine *e, size_t h)
{
	return e->h[h]->state != PLANNED;
}

herd__launch_link *herd__engine_link(herd__engine *e, size_t h)
{
	return &e->h[h]->link;
}

const char *herd__engine_says(const herd__engine *e, size_t h, char *buf, size_t cap)
{
	return herd__launch_link_says(&e->h[h]->link, buf, cap);
}

void herd__engine_deadline(herd__engine *e, size_t h, int64_t at)
{
	helper *p = e->h[h];

	if (p->state != RUNNING)
		return;
	if (at < 0)
		herd__loop_timer_stop(e->loop, &p->deadline);
	else if (herd__loop_timer(e->loop, &p->deadline, at) != HERD_OK)
		finish(p, HERD_ENOMEM, -1, herd_last_error());
}

void herd__engine_flush(herd__engine *e, size_t h)
{
	helper *p = e->h[h];
	herd_status st;

	if (p->state != RUNNING)
		return;
	st = herd__launch_link_flush(&p->link);
	if (st == HERD_ECLOSED && p->link.ch.rfd >= 0) {
		/* It stopped reading (it is ending): what it wrote before may
		 * still be unread, and the read side says its end once that
		 * has been taken.  Nothing more is written to it. */
		herd__buf_free(&p->link.out);
		herd__loop_unwatch(e->loop, &p->ww);
		if (p->link.ch.wfd != p->link.ch.rfd)
			close(p->link.ch.wfd);
		p->link.ch.wfd = -1;
		return;
	}
	if (st != HERD_OK) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", herd_last_error());
		finish(p, HERD_ECLOSED, -1, why);
		return;
	}
	update_write_watch(p);
}

void herd__engine_want_write(herd__engine *e, size_t h, bool want)
{
	e->h[h]->want_write = want;
	update_write_watch(e->h[h]);
}

void herd__engine_close_input(herd__engine *e, size_t h)
{
	helper *p = e->h[h];

	if (p->link.ch.wfd < 0)
		return;
	herd__loop_unwatch(e->loop, &p->ww);
	if (p->link.ch.wfd != p->link.ch.rfd)
		close(p->link.ch.wfd);
	else
		shutdown(p->link.ch.wfd, SHUT_WR);
	p->link.ch.wfd = -1;
	p->want_write = false;
}

herd__buf *herd__engine_node_out(herd__engine *e, size_t node)
{
	return &e->node_out[node];
}

herd__buf *herd__engine_node_err(herd__engine *e, size_t node)
{
	return &e->node_err[node];
}

herd__buf *herd__engine_said(herd__engine *e)
{
	return &e->said;
}

bool herd__engine_node_over(const herd__engine *e, size_t node)
{
	return node < e->nnode_bufs && e->node_over[node];
}

const char *herd__engine_last_line(const herd__buf *b, char *out, size_t cap)
{
	size_t end = b->len, start;

	while (end > b->off && (b->data[end - 1] == '\n' || b->data[end - 1] == ' '))
		end--;
	start = end;
	while (start > b->off && b->data[start - 1] != '\n')
		start--;
	snprintf(out, cap, "%.*s", (int)(end - start), (const char *)b->data + start);
	return out;
}
