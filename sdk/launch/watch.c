/*
 * sdk/launch/watch.c - telemetry streams from many nodes: the watch
 * (herd_telemetry_watch_*, herd/telemetry.h), one more client of the
 * remote-run engine (engine.h), and its node side (`herd probe --watch`,
 * herd_agent_telemetry_watch).
 *
 * The node side samples its node on the sampler's thread and writes each
 * sample as a record on its stdout (a frame: 4-byte big-endian length and
 * the packed sample; or, for srun's labelled lines, the packed sample in
 * base64 lines between "herd-telemetry 1" and "end").  Its writes never
 * block: a sample taken while the record before is not all written is
 * dropped (the gap in seq says so to the watcher), so that one record at
 * most waits beyond what the pipe holds, and a stdout that takes nothing
 * for long is given up.  It ends by itself, exit status 0, when its stdin
 * ends: that is how a watch stops it, through ssh or srun, and how it
 * notices a watcher that went away.
 *
 * The watch resolves the nodes as discovery does and asks the engine for
 * `herd probe --watch` on each (flat over ssh: every node streams to the
 * watcher directly; or one srun step, whose labelled lines the engine
 * sorts by task), on a thread of its own that runs the engine's loop.
 * Each node has one timer in that loop: its start deadline, then, once
 * it streams, its stall deadline, moved on by each sample.  Samples go,
 * packed, into a bounded queue under a mutex; an eventfd tells the caller.
 * With no nodes named, the one node is this one: a sampler in this process
 * whose descriptor the same loop watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "herd/sys/agent.h"
#include "herd/telemetry.h"
#include "engine.h"
#include "net.h"
#include "wire.h"

#define DEFAULT_PERIOD_MS 1000
#define MIN_PERIOD_MS 100
#define MAX_PERIOD_MS (24 * 3600 * 1000)
#define DEFAULT_START_MS 30000
/* A stall is three periods without a sample, and this much for the way. */
#define STALL_SLACK_MS 2000
/* Node side: a stdout that takes nothing this long (or ten periods) is given up. */
#define OUT_STALL_MS 10000
/* Asked to stop, how long the record under way may take to be written whole. */
#define FINISH_MS 1000
/* The samples a node-side sampler keeps: the writer takes each at once. */
#define NODE_RING 8
/* free: how long the helpers get to end by themselves once their stdin is
 * closed, and then the engine's reaping. */
#define STOP_WAIT_MS 2000
#define REAP_MS 1000
/* The text record: its first line, and the bytes of the map in each base64
 * line (76 characters). */
#define TEXT_MAGIC "herd-telemetry 1"
#define TEXT_LINE 57
/* A node's output that the engine holds: one whole record, in either form. */
#define NODE_IN_MAX ((size_t)HERD_TELEMETRY_RECORD_MAX * 3)

/* ---- records ------------------------------------------------------------------ */

/* Appends s as one record of format to out. */
static herd_status record_append(herd__buf *out, const herd_telemetry_sample *s,
				 herd_telemetry_record format)
{
	void *mp = NULL;
	char *json = NULL;
	size_t len = 0, at = out->len;
	herd_status st;

	if (format == HERD_TELEMETRY_RECORD_JSON) {
		HERD_CHECK(herd_telemetry_json(s, &json));
		st = herd__buf_append(out, json, strlen(json));
		if (st == HERD_OK)
			st = herd__buf_append(out, "\n", 1);
		free(json);
		return st;
	}
	HERD_CHECK(herd_telemetry_pack(s, &mp, &len));
	if (len == 0 || len > HERD_TELEMETRY_RECORD_MAX) {
		free(mp);
		return herd__error(HERD_EINVAL, "a packed sample of %zu bytes: records hold 1 to "
				   "%u bytes", len, HERD_TELEMETRY_RECORD_MAX);
	}
	if (format == HERD_TELEMETRY_RECORD_FRAME) {
		uint8_t prefix[4];

		herd__be32_store(prefix, (uint32_t)len);
		st = herd__buf_append(out, prefix, 4);
		if (st == HERD_OK)
			st = herd__buf_append(out, mp, len);
	} else {
		unsigned char line[TEXT_LINE * 4 / 3 + 4];

		st = herd__buf_append(out, TEXT_MAGIC "\n", strlen(TEXT_MAGIC) + 1);
		for (size_t k = 0; k < len && st == HERD_OK; k += TEXT_LINE) {
			size_t n = len - k < TEXT_LINE ? len - k : TEXT_LINE;
			int got = EVP_EncodeBlock(line, (const unsigned char *)mp + k, (int)n);

			line[got] = '\n';
			st = herd__buf_append(out, line, (size_t)got + 1);
		}
		if (st == HERD_OK)
			st = herd__buf_append(out, "end\n", 4);
	}
	free(mp);
	if (st != HERD_OK && out->len > at)
		out->len = at;  /* no half record */
	return st;
}

/*
 * The next text record at the front of b: its map's bytes into *mp
 * (malloc'd) and *mp_len, and *used the bytes it took; *used 0 when it has
 * not all come yet.  HERD_EFORMAT, saying what is wrong, for text that is
 * not a record.
 */
static herd_status text_record(const herd__buf *b, bool ended, uint8_t **mp, size_t *mp_len,
			       size_t *used)
{
	const char *text = (const char *)b->data + b->off;
	size_t len = b->len - b->off, at, magic = strlen(TEXT_MAGIC), n = 0;
	const char *nl = memchr(text, '\n', len < magic + 1 ? len : magic + 1);
	uint8_t *out;

	*mp = NULL;
	*mp_len = 0;
	*used = 0;
	if (nl == NULL) {
		if (len <= magic && memcmp(text, TEXT_MAGIC, len) == 0 && !ended)
			return HERD_OK;
		goto not_record;
	}
	if ((size_t)(nl - text) != magic || memcmp(text, TEXT_MAGIC, magic) != 0)
		goto not_record;
	at = magic + 1;
	/* Each base64 line decodes to at most TEXT_LINE bytes. */
	HERD_CHECK(herd__calloc(&out, len / 4 * 3 + 4, 1, "a record"));
	while (at < len) {
		const char *line = text + at, *e = memchr(line, '\n', len - at);
		size_t k = e != NULL ? (size_t)(e - line) : len - at;
		int got;

		if (e == NULL) {
			free(out);
			if (ended)
				return herd__error(HERD_EFORMAT, "a text record cut short");
			if (k > TEXT_LINE * 4 / 3)
				return herd__error(HERD_EFORMAT, "a text record's line is not base64");
			return HERD_OK;
		}
		at += k + 1;
		if (k == 3 && memcmp(line, "end", 3) == 0) {
			if (n == 0) {
				free(out);
				return herd__error(HERD_EFORMAT, "a text record with no data");
			}
			*mp = out;
			*mp_len = n;
			*used = at;
			return HERD_OK;
		}
		got = k > 0 && k % 4 == 0 && k <= TEXT_LINE * 4 / 3
			      ? EVP_DecodeBlock(out + n, (const unsigned char *)line, (int)k)
			      : -1;
		if (got < 0 || n + (size_t)got > HERD_TELEMETRY_RECORD_MAX + 3) {
			free(out);
			return herd__error(HERD_EFORMAT, got < 0 ? "a text record's line is not "
					   "base64" : "a text record over %u bytes",
					   HERD_TELEMETRY_RECORD_MAX);
		}
		/* EVP_DecodeBlock counts the padding as zero bytes. */
		n += (size_t)got - (size_t)(line[k - 1] == '=') - (size_t)(k > 1 && line[k - 2] == '=');
	}
	free(out);
	return HERD_OK;
not_record: {
		char quote[128];

		if (herd__launch_frame_text(b, quote, sizeof(quote)))
			return herd__error(HERD_EFORMAT, "printed '%s' where a record must start",
					   quote);
		return herd__error(HERD_EFORMAT, "printed bytes that are not a text record where "
				   "one must start");
	}
}

/* ---- the node side ------------------------------------------------------------ */

typedef struct node_side {
	herd_telemetry *t;
	herd_telemetry_sample *s;
	herd__buf out;
	int out_fd;
	int64_t waiting_since;      /* when out last took bytes or began to wait */
	uint64_t seq, dropped, written;
	bool nonblocking;           /* out_fd made non-blocking (a pipe or socket) */
} node_side;

/* Writes what out_fd takes.  *gone: it broke (EPIPE). */
static herd_status node_flush(node_side *n, bool *gone)
{
	while (n->out.len > n->out.off) {
		ssize_t w = write(n->out_fd, n->out.data + n->out.off, n->out.len - n->out.off);

		if (w > 0) {
			herd__buf_consume(&n->out, (size_t)w);
			n->waiting_since = herd__net_now_ms();
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return HERD_OK;
		if (w < 0 && errno == EPIPE) {
			*gone = true;
			return HERD_OK;
		}
		return herd__error_errno(HERD_EIO, w < 0 ? errno : EIO, "writing a record");
	}
	return HERD_OK;
}

/* Asked to stop: the record under way written whole, so that the reader
 * (a file of --json lines, say) does not end on half of one; FINISH_MS at
 * most. */
static void node_finish(node_side *n, bool *gone)
{
	int64_t deadline = herd__net_now_ms() + FINISH_MS;

	while (n->out.len > n->out.off && !*gone) {
		struct pollfd p = { .fd = n->out_fd, .events = POLLOUT };
		int left = herd__net_remaining_ms(deadline);

		if (left == 0 || (poll(&p, 1, left) < 0 && errno != EINTR))
			return;
		if (node_flush(n, gone) != HERD_OK)
			return;
	}
}

/* The samples that have come: each written, or dropped when too much waits. */
static herd_status node_take(node_side *n, uint64_t count, herd_telemetry_record format)
{
	while ((count == 0 || n->written < count) &&
	       herd_telemetry_next(n->t, &n->seq, n->s) == HERD_OK) {
		if (n->out.len > n->out.off) {
			n->dropped++;
			continue;
		}
		n->waiting_since = herd__net_now_ms();
		HERD_CHECK(record_append(&n->out, n->s, format));
		n->written++;
	}
	return HERD_OK;
}

/* One read of in_fd (poll said it is ready: it does not block), its bytes
 * dropped: true at its end, or when it fails. */
static bool input_ended(int fd)
{
	char scratch[4096];
	ssize_t r;

	do {
		r = read(fd, scratch, sizeof(scratch));
	} while (r < 0 && errno == EINTR);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

herd_status herd_agent_telemetry_watch(int in_fd, int out_fd, int stop_fd, int period_ms,
				       uint64_t count, herd_telemetry_record format,
				       uint64_t *dropped)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	node_side n = { .out_fd = out_fd };
	struct stat sb;
	int out_flags = -1, stall_ms;
	bool gone = false, in_watched = in_fd >= 0;
	herd_status st = HERD_OK;

	if (dropped != NULL)
		*dropped = 0;
	if (period_ms < MIN_PERIOD_MS || period_ms > MAX_PERIOD_MS)
		return herd__error(HERD_EINVAL, "herd_agent_telemetry_watch: a period of %d ms; "
				   "give %d ms to 24 h", period_ms, MIN_PERIOD_MS);
	if (out_fd < 0 || (format != HERD_TELEMETRY_RECORD_FRAME &&
			   format != HERD_TELEMETRY_RECORD_TEXT &&
			   format != HERD_TELEMETRY_RECORD_JSON))
		return herd__error(HERD_EINVAL, "herd_agent_telemetry_watch: %s",
				   out_fd < 0 ? "no descriptor to write to" : "an unknown record format");
	stall_ms = 10 * period_ms > OUT_STALL_MS ? 10 * period_ms : OUT_STALL_MS;
	herd__buf_init(&n.out, 0);
	o.period_ms = period_ms;
	o.ring_size = NODE_RING;
	HERD_CHECK_GOTO(herd__calloc(&n.s, 1, sizeof(*n.s), "a sample"), st, out);
	HERD_CHECK_GOTO(herd_telemetry_create(&n.t, &o), st, out);
	/* Non-blocking only where a reader can stall it and nobody else is
	 * likely to share it: a pipe or a socket (a terminal's flags are the
	 * shell's too; a file does not stall). */
	if (fstat(out_fd, &sb) != 0) {
		st = herd__error_errno(HERD_EIO, errno, "the descriptor to write records to");
		goto out;
	}
	n.nonblocking = S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode);
	out_flags = n.nonblocking ? fcntl(out_fd, F_GETFL) : -1;
	if (n.nonblocking &&
	    (out_flags < 0 || fcntl(out_fd, F_SETFL, out_flags | O_NONBLOCK) != 0)) {
		st = herd__error_errno(HERD_EIO, errno, "the descriptor to write records to");
		out_flags = -1;
		goto out;
	}
	HERD_CHECK_GOTO(herd_telemetry_start(n.t), st, out);
	for (;;) {
		struct pollfd pf[4];
		bool waiting = n.out.len > n.out.off;
		nfds_t k = 0;
		int timeout = -1, r;

		pf[k++] = (struct pollfd){ .fd = herd_telemetry_fd(n.t), .events = POLLIN };
		pf[k++] = (struct pollfd){ .fd = waiting ? out_fd : -1, .events = POLLOUT };
		pf[k++] = (struct pollfd){ .fd = in_watched ? in_fd : -1, .events = POLLIN };
		pf[k++] = (struct pollfd){ .fd = stop_fd, .events = POLLIN };
		if (count != 0 && n.written >= count)
			pf[0].fd = -1;
		if (waiting) {
			timeout = herd__net_remaining_ms(n.waiting_since + stall_ms);
			if (timeout == 0) {
				st = herd__error(HERD_ETIMEDOUT, "the reader took nothing for %d s "
						 "(%" PRIu64 " samples dropped meanwhile)",
						 stall_ms / 1000, n.dropped);
				break;
			}
		}
		r = poll(pf, k, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st = herd__error_errno(HERD_ESYS, errno, "waiting for samples");
			break;
		}
		if (pf[3].revents != 0) {
			node_finish(&n, &gone);
			break;
		}
		if (pf[2].revents & POLLNVAL)
			in_watched = false;
		else if (pf[2].revents != 0 && input_ended(in_fd))
			break;
		if (pf[0].revents != 0)
			HERD_CHECK_GOTO(node_take(&n, count, format), st, out);
		HERD_CHECK_GOTO(node_flush(&n, &gone), st, out);
		if (gone || (count != 0 && n.written >= count && n.out.len == n.out.off))
			break;
	}
out:
	herd_telemetry_free(n.t);
	if (out_flags >= 0)
		(void)fcntl(out_fd, F_SETFL, out_flags);
	if (dropped != NULL)
		*dropped = n.dropped;
	herd__buf_free(&n.out);
	free(n.s);
	return st;
}

/* ---- the watch ------------------------------------------------------------------ */

typedef struct wnode {
	struct herd_telemetry_watch *w;
	const char *host;               /* as reached (the resolved node's) */
	herd_telemetry_node_state state;
	char why[512];
	uint64_t samples, lost, last_seq;
	int64_t last_ms;
	herd__timer timer;              /* its start deadline, then its stall deadline */
	size_t helper;                  /* its engine helper; SIZE_MAX until started */
} wnode;

typedef struct queued {
	size_t node;
	void *data;                     /* the packed sample */
	size_t len;
} queued;

struct herd_telemetry_watch {
	wnode *nodes;
	size_t n;
	herd__launch_node *lnodes;
	const char **names;             /* the nodes' hosts, for the engine */
	const herd__launch_backend *be; /* NULL: this node, in process */
	int period_ms, start_ms, stall_ms;
	const char *program;

	/* The watch's thread: its engine, its loop's watchers and timers. */
	pthread_t thread;
	bool joinable;
	herd__engine *engine;
	herd_telemetry *sampler;        /* this node's, without nodes */
	uint64_t sampler_seq;
	herd__watcher sampler_w, stop_w;
	herd__timer stop_timer;
	int stop_fd;                    /* eventfd: free asks the thread to stop */
	bool stopping, stop_due;
	herd_telemetry_sample *scratch;

	/* Shared with the caller's threads, under mu: the queue, the nodes'
	 * states and counts, the caller's descriptor. */
	pthread_mutex_t mu;
	queued *q;
	size_t qcap, qhead, qlen;
	int fd;                         /* eventfd, readable for the caller */
	bool signalled;
	size_t live;
};

/* Makes the caller's descriptor readable (under mu). */
static void notify(herd_telemetry_watch *w)
{
	if (!w->signalled && eventfd_write(w->fd, 1) == 0)
		w->signalled = true;
}

static bool failed(const wnode *nd)
{
	return nd->state >= HERD_TELEMETRY_NODE_UNREACHABLE;
}

static void node_fail(wnode *nd, herd_telemetry_node_state state, const char *fmt, ...)
	HERD_PRINTF(3, 4);

/* nd has failed for good: its state and reason, its timer stopped. */
static void node_fail(wnode *nd, herd_telemetry_node_state state, const char *fmt, ...)
{
	herd_telemetry_watch *w = nd->w;
	va_list ap;

	if (failed(nd) || w->stopping)
		return;
	if (w->engine != NULL)
		herd__loop_timer_stop(herd__engine_loop(w->engine), &nd->timer);
	pthread_mutex_lock(&w->mu);
	nd->state = state;
	va_start(ap, fmt);
	vsnprintf(nd->why, sizeof(nd->why), fmt, ap);
	va_end(ap);
	w->live--;
	notify(w);
	pthread_mutex_unlock(&w->mu);
}

/* Ends nd's own helper (ssh to it alone), quietly: nd has said why. */
static void node_stop_helper(wnode *nd)
{
	herd_telemetry_watch *w = nd->w;

	if (nd->helper != SIZE_MAX && !herd__engine_one_step(w->engine) &&
	    !herd__engine_ended(w->engine, nd->helper))
		herd__engine_close(w->engine, nd->helper, HERD_OK, NULL);
}

static void node_arm(wnode *nd, int ms)
{
	herd__loop *l = herd__engine_loop(nd->w->engine);

	if (herd__loop_timer(l, &nd->timer, herd__net_now_ms() + ms) != HERD_OK)
		node_fail(nd, HERD_TELEMETRY_NODE_ENDED, "watching it: %s", herd_last_error());
}

/* A timer that fires this much after it was due found this process
 * stopped (Ctrl-Z, SIGSTOP) or starved, not the node late. */
#define LATE_WAKE_MS 1000

static void on_node_timer(herd__timer *t)
{
	wnode *nd = t->data;
	herd_telemetry_watch *w = nd->w;

	/* What came meanwhile is read first: the node gets its deadline
	 * again from now. */
	if (herd__net_now_ms() - t->due > LATE_WAKE_MS) {
		node_arm(nd, nd->samples == 0 ? w->start_ms : w->stall_ms);
		return;
	}
	if (nd->samples == 0)
		node_fail(nd, HERD_TELEMETRY_NODE_NOT_STARTED, "no sample within %d.%d s",
			  w->start_ms / 1000, w->start_ms % 1000 / 100);
	else
		node_fail(nd, HERD_TELEMETRY_NODE_STALLED, "no sample for %d.%d s after sample %"
			  PRIu64, w->stall_ms / 1000, w->stall_ms % 1000 / 100, nd->last_seq);
	node_stop_helper(nd);
}

/*
 * A sample of nd (decoded into s; payload its packed bytes, copied into
 * the queue): counted, its node's deadline moved on, queued.  A seq that
 * does not move on is a bad record.
 */
static void node_sample(wnode *nd, const herd_telemetry_sample *s, const void *payload,
			size_t len)
{
	herd_telemetry_watch *w = nd->w;
	queued e = { .node = (size_t)(nd - w->nodes), .len = len };

	if (s->seq <= nd->last_seq) {
		node_fail(nd, HERD_TELEMETRY_NODE_BAD_RECORD, "sample %" PRIu64 " after sample %"
			  PRIu64 ": its seq must grow", s->seq, nd->last_seq);
		node_stop_helper(nd);
		return;
	}
	e.data = malloc(len);
	if (e.data == NULL) {
		node_fail(nd, HERD_TELEMETRY_NODE_ENDED, "out of memory for its samples");
		node_stop_helper(nd);
		return;
	}
	memcpy(e.data, payload, len);
	node_arm(nd, w->stall_ms);
	pthread_mutex_lock(&w->mu);
	if (nd->state == HERD_TELEMETRY_NODE_STARTING)
		nd->state = HERD_TELEMETRY_NODE_STREAMING;
	nd->lost += s->seq - nd->last_seq - 1;
	nd->last_seq = s->seq;
	nd->samples++;
	nd->last_ms = s->time_ms;
	if (w->qlen == w->qcap) {
		queued *old = &w->q[w->qhead];

		w->nodes[old->node].lost++;
		free(old->data);
		w->qhead = (w->qhead + 1) % w->qcap;
		w->qlen--;
	}
	w->q[(w->qhead + w->qlen) % w->qcap] = e;
	w->qlen++;
	notify(w);
	pthread_mutex_unlock(&w->mu);
}

/* A record of nd: decoded, else nd has a bad record. */
static void node_record(wnode *nd, const void *payload, size_t len)
{
	herd_telemetry_watch *w = nd->w;

	if (failed(nd) || w->stopping)
		return;
	if (herd_telemetry_unpack(payload, len, w->scratch) != HERD_OK) {
		node_fail(nd, HERD_TELEMETRY_NODE_BAD_RECORD, "record %" PRIu64 ": %s",
			  nd->samples + 1, herd_last_error());
		node_stop_helper(nd);
		return;
	}
	node_sample(nd, w->scratch, payload, len);
}

/* ---- the engine's client -------------------------------------------------------- */

static void on_started(void *userdata, size_t h)
{
	herd_telemetry_watch *w = userdata;
	size_t first, count;

	/* The nodes' own timers say when one is late: not the engine's. */
	herd__engine_deadline(w->engine, h, -1);
	herd__engine_nodes(w->engine, h, &first, &count);
	for (size_t i = first; i < first + count; i++) {
		w->nodes[i].helper = h;
		if (!failed(&w->nodes[i]))
			node_arm(&w->nodes[i], w->start_ms);
	}
}

/* Frames from one node's ssh. */
static void on_input(void *userdata, size_t h, herd__buf *in)
{
	herd_telemetry_watch *w = userdata;
	size_t first, count;
	wnode *nd;

	herd__engine_nodes(w->engine, h, &first, &count);
	nd = &w->nodes[first];
	while (!failed(nd) && in->len > in->off) {
		size_t plen;

		if (herd__launch_text_error(in, nd->samples > 0) != HERD_OK ||
		    herd__frame_peek(in, HERD_TELEMETRY_RECORD_MAX, NULL, &plen) != HERD_OK) {
			node_fail(nd, HERD_TELEMETRY_NODE_BAD_RECORD, "%s", herd_last_error());
			node_stop_helper(nd);
			break;
		}
		if (plen == SIZE_MAX)
			return;
		node_record(nd, in->data + in->off + 4, plen);
		herd__buf_consume(in, plen + 4);
	}
	/* A failed node's output is not read any more. */
	herd__buf_consume(in, in->len - in->off);
}

/* Text records of one srun task, as the engine has sorted them. */
static void step_input(herd_telemetry_watch *w, size_t t, bool ended)
{
	herd__buf *b = herd__engine_node_out(w->engine, t);
	wnode *nd = &w->nodes[t];

	while (!failed(nd) && b->len > b->off) {
		uint8_t *mp = NULL;
		size_t mp_len = 0, used = 0;

		if (text_record(b, ended, &mp, &mp_len, &used) != HERD_OK) {
			node_fail(nd, HERD_TELEMETRY_NODE_BAD_RECORD, "%s", herd_last_error());
			break;
		}
		if (used == 0)
			return;
		node_record(nd, mp, mp_len);
		free(mp);
		herd__buf_consume(b, used);
	}
	herd__buf_consume(b, b->len - b->off);
}

/* A node's helper ended before it was asked to stop: why, in words. */
static void ssh_ended(herd_telemetry_watch *w, size_t h, wnode *nd, const herd__engine_end *end)
{
	char said[HERD__LAUNCH_LINK_ERR_MAX + 8];
	const char *words = herd__engine_says(w->engine, h, said, sizeof(said));
	herd_telemetry_node_state late = nd->samples > 0 ? HERD_TELEMETRY_NODE_ENDED
							 : HERD_TELEMETRY_NODE_NOT_STARTED;
	int ws = end->wstatus;

	if (end->st == HERD_EFORMAT) {
		node_fail(nd, HERD_TELEMETRY_NODE_BAD_RECORD, "%s", end->why);
	} else if (end->st == HERD_ETIMEDOUT) {
		node_fail(nd, late, "%s", end->why);
	} else if (end->st != HERD_OK) {
		node_fail(nd, HERD_TELEMETRY_NODE_UNREACHABLE, "%s", end->why);
	} else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 255) {
		/* ssh's own words start "ssh: " already. */
		node_fail(nd, HERD_TELEMETRY_NODE_UNREACHABLE, "%s%s",
			  strncmp(words, ": ssh:", 6) == 0 ? "" : "ssh",
			  words[0] == '\0' ? ": exit status 255"
			  : strncmp(words, ": ssh:", 6) == 0 ? words + 2 : words);
	} else if (WIFEXITED(ws)) {
		node_fail(nd, late, "herd probe --watch exited %d%s", WEXITSTATUS(ws), words);
	} else {
		node_fail(nd, late, "ssh ended by signal %d%s", WTERMSIG(ws), words);
	}
}

/* The srun step ended: each node still watched with its task's last words. */
static void step_ended(herd_telemetry_watch *w, const herd__engine_end *end)
{
	for (size_t t = 0; t < w->n; t++) {
		wnode *nd = &w->nodes[t];
		const herd__buf *err = herd__engine_node_err(w->engine, t);
		char why[600] = "";

		step_input(w, t, true);
		if (failed(nd))
			continue;
		herd__engine_last_line(err->len > err->off ? err : herd__engine_said(w->engine), why,
				       sizeof(why));
		if (end->st != HERD_OK && end->st != HERD_ETIMEDOUT && nd->samples == 0)
			node_fail(nd, HERD_TELEMETRY_NODE_UNREACHABLE, "%s", end->why);
		else
			node_fail(nd, nd->samples > 0 ? HERD_TELEMETRY_NODE_ENDED
				  : HERD_TELEMETRY_NODE_NOT_STARTED, "its srun task ended%s%s",
				  why[0] ? ": " : "", why);
	}
}

static void on_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	herd_telemetry_watch *w = userdata;
	size_t first, count;

	if (w->stopping)
		return;
	if (herd__engine_one_step(w->engine)) {
		step_ended(w, end);
		return;
	}
	herd__engine_nodes(w->engine, h, &first, &count);
	/* What came before the end is handled first. */
	on_input(w, h, &herd__engine_link(w->engine, h)->in);
	if (!failed(&w->nodes[first]))
		ssh_ended(w, h, &w->nodes[first], end);
}

/* ---- this node, in process --------------------------------------------------------- */

static void on_sampler(herd__watcher *wt, short revents)
{
	herd_telemetry_watch *w = wt->data;
	wnode *nd = &w->nodes[0];

	(void)revents;
	while (!failed(nd) && herd_telemetry_next(w->sampler, &w->sampler_seq, w->scratch) ==
				      HERD_OK) {
		void *mp = NULL;
		size_t len = 0;

		if (herd_telemetry_pack(w->scratch, &mp, &len) != HERD_OK) {
			node_fail(nd, HERD_TELEMETRY_NODE_ENDED, "packing its sample: %s",
				  herd_last_error());
			break;
		}
		node_sample(nd, w->scratch, mp, len);
		free(mp);
	}
	if (failed(nd))
		herd__loop_unwatch(herd__engine_loop(w->engine), wt);
}

/* ---- the thread ------------------------------------------------------------------ */

static void on_stop_due(herd__timer *t)
{
	herd_telemetry_watch *w = t->data;

	w->stop_due = true;
}

/* free asks: every helper's stdin closes, so that each ends by itself. */
static void on_stop(herd__watcher *wt, short revents)
{
	herd_telemetry_watch *w = wt->data;
	herd__loop *l = herd__engine_loop(w->engine);
	eventfd_t v;

	(void)revents;
	(void)eventfd_read(w->stop_fd, &v);
	herd__loop_unwatch(l, wt);
	herd__loop_unwatch(l, &w->sampler_w);
	for (size_t i = 0; i < w->n; i++)
		herd__loop_timer_stop(l, &w->nodes[i].timer);
	w->stopping = true;
	for (size_t h = 0; h < herd__engine_helpers(w->engine); h++)
		if (!herd__engine_ended(w->engine, h))
			herd__engine_close_input(w->engine, h);
	if (herd__loop_timer(l, &w->stop_timer, herd__net_now_ms() + STOP_WAIT_MS) != HERD_OK)
		w->stop_due = true;
}

/* Every node not failed yet fails with why (the watch itself cannot go on). */
static void fail_all(herd_telemetry_watch *w, const char *why)
{
	for (size_t i = 0; i < w->n; i++)
		node_fail(&w->nodes[i], herd__engine_one_step(w->engine) || w->be == NULL
			  ? HERD_TELEMETRY_NODE_ENDED : HERD_TELEMETRY_NODE_UNREACHABLE, "%s", why);
}

static void *watch_main(void *arg)
{
	herd_telemetry_watch *w = arg;
	herd__loop *l = herd__engine_loop(w->engine);

	if (w->sampler != NULL)
		node_arm(&w->nodes[0], w->start_ms);
	while (!w->stop_due && !(w->stopping && herd__engine_live(w->engine) == 0)) {
		herd_status st = herd__engine_run_once(w->engine, -1);

		if (st != HERD_OK) {
			char why[1024];

			herd__strlcpy(why, herd_last_error(), sizeof(why));
			fail_all(w, why);
			/* Nothing left to run: wait for free. */
			if (!w->stopping) {
				struct pollfd pf = { .fd = w->stop_fd, .events = POLLIN };

				while (poll(&pf, 1, -1) < 0 && errno == EINTR)
					;
			}
			break;
		}
		if (herd__engine_one_step(w->engine) && !w->stopping)
			for (size_t t = 0; t < w->n; t++)
				step_input(w, t, false);
	}
	herd__loop_timer_stop(l, &w->stop_timer);
	herd__engine_free(w->engine, REAP_MS);
	w->engine = NULL;
	return NULL;
}

/* ---- the calls ------------------------------------------------------------------- */

const char *herd_telemetry_node_state_name(herd_telemetry_node_state state)
{
	static const char *const names[] = { "starting", "streaming", "unreachable",
					     "not started", "stalled", "ended", "bad record" };

	if ((unsigned)state >= sizeof(names) / sizeof(*names))
		return "?";
	return names[state];
}

/* `herd probe --watch --period MS`, and --text for srun's lines. */
static herd_status watch_words(void *userdata, const char *forward, const char **words,
			       size_t max, size_t *n, char *buf, size_t cap)
{
	const herd_telemetry_watch *w = userdata;

	(void)forward;
	(void)max;
	snprintf(buf, cap, "%d", w->period_ms);
	*n = 0;
	words[(*n)++] = "probe";
	words[(*n)++] = "--watch";
	words[(*n)++] = "--period";
	words[(*n)++] = buf;
	if (w->be->one_step)
		words[(*n)++] = "--text";
	return HERD_OK;
}

static herd_status check_opts(const herd_telemetry_watch_opts *o)
{
	const char *fn = "herd_telemetry_watch_start";

	HERD__CHECK_VERSION(fn, o, herd_telemetry_watch_opts, TELEMETRY_WATCH_OPTS);
	if ((o->hosts != NULL) + (o->hostfile != NULL) + (o->slurm != 0) > 1)
		return herd__error(HERD_EINVAL, "%s: hosts, hostfile and slurm are different ways to "
				   "name the nodes; give one", fn);
	if (o->period_ms != 0 && (o->period_ms < MIN_PERIOD_MS || o->period_ms > MAX_PERIOD_MS))
		return herd__error(HERD_EINVAL, "%s: period_ms %d: give %d ms to 24 h", fn,
				   o->period_ms, MIN_PERIOD_MS);
	if (o->start_timeout_ms < 0 || o->stall_ms < 0)
		return herd__error(HERD_EINVAL, "%s: %s %d is negative", fn,
				   o->start_timeout_ms < 0 ? "start_timeout_ms" : "stall_ms",
				   o->start_timeout_ms < 0 ? o->start_timeout_ms : o->stall_ms);
	return HERD_OK;
}

/* The nodes of o: this one (local), or those of a hostlist, hostfile or allocation. */
static herd_status resolve(herd_telemetry_watch *w, const herd_telemetry_watch_opts *o)
{
	herd_job_spec spec;

	memset(&spec, 0, sizeof(spec));
	if (o == NULL || (o->hosts == NULL && o->hostfile == NULL && !o->slurm))
		return herd__launch_backend_local.resolve(&spec, &w->lnodes, &w->n);
	spec.where = o->slurm ? HERD_JOB_SLURM : o->hostfile ? HERD_JOB_HOSTFILE : HERD_JOB_HOSTS;
	spec.hosts = o->hostfile != NULL ? o->hostfile : o->hosts;
	HERD_CHECK(herd__launch_backend_for(spec.where, &w->be));
	return w->be->resolve(&spec, &w->lnodes, &w->n);
}

/* This node's sampler, its thread started with every signal blocked. */
static herd_status start_sampler(herd_telemetry_watch *w)
{
	herd_telemetry_opts so = HERD_TELEMETRY_OPTS_INIT;
	sigset_t all, old;
	herd_status st;

	so.period_ms = w->period_ms;
	so.ring_size = NODE_RING;
	HERD_CHECK(herd_telemetry_create(&w->sampler, &so));
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	st = herd_telemetry_start(w->sampler);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (st != HERD_OK)
		return st;
	herd__watcher_init(&w->sampler_w, herd_telemetry_fd(w->sampler), on_sampler, w);
	return herd__loop_watch(herd__engine_loop(w->engine), &w->sampler_w, POLLIN);
}

/* The helpers, planned: `herd probe --watch` on every node at once, flat. */
static herd_status start_helpers(herd_telemetry_watch *w)
{
	herd__engine_cmd cmd = { .program = w->program, .words = watch_words, .userdata = w,
				 .input = true, .timeout_ms = w->start_ms, .flat = true,
				 .in_max = NODE_IN_MAX };

	/* The engine borrows the list. */
	HERD_CHECK(herd__calloc(&w->names, w->n + 1, sizeof(*w->names), "the node list"));
	for (size_t i = 0; i < w->n; i++)
		w->names[i] = w->nodes[i].host;
	cmd.hosts = w->names;
	cmd.nhosts = w->n;
	return herd__engine_fanout(w->engine, &cmd);
}

static void watch_destroy(herd_telemetry_watch *w)
{
	herd_telemetry_free(w->sampler);
	herd__engine_free(w->engine, REAP_MS);
	for (size_t k = 0; k < w->qlen; k++)
		free(w->q[(w->qhead + k) % w->qcap].data);
	free(w->q);
	if (w->fd >= 0)
		close(w->fd);
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	pthread_mutex_destroy(&w->mu);
	herd__launch_nodes_free(w->lnodes, w->n);
	free(w->names);
	free(w->nodes);
	free(w->scratch);
	free(w);
}

herd_status herd_telemetry_watch_start(herd_telemetry_watch **out,
				       const herd_telemetry_watch_opts *opts)
{
	herd__engine_client client = { .started = on_started, .input = on_input,
				       .ended = on_ended };
	herd_telemetry_watch *w = NULL;
	sigset_t all, old;
	herd_status st;
	int rc;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_watch_start: out is NULL");
	*out = NULL;
	if (opts != NULL)
		HERD_CHECK(check_opts(opts));
	HERD_CHECK(herd__calloc(&w, 1, sizeof(*w), "a watch"));
	w->fd = w->stop_fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	w->period_ms = opts != NULL && opts->period_ms > 0 ? opts->period_ms : DEFAULT_PERIOD_MS;
	w->start_ms = opts != NULL && opts->start_timeout_ms > 0 ? opts->start_timeout_ms
								 : DEFAULT_START_MS;
	w->stall_ms = opts != NULL && opts->stall_ms > 0 ? opts->stall_ms
							 : 3 * w->period_ms + STALL_SLACK_MS;
	w->program = opts != NULL && opts->herd_program != NULL && opts->herd_program[0] != '\0'
			     ? opts->herd_program
			     : herd__param_str(HERD__P_PROGRAM) != NULL
				       ? herd__param_str(HERD__P_PROGRAM)
				       : "herd";
	HERD_CHECK_GOTO(resolve(w, opts), st, fail);
	w->qcap = opts != NULL && opts->queue > 0 ? opts->queue : 64 + 4 * w->n;
	HERD_CHECK_GOTO(herd__calloc(&w->nodes, w->n, sizeof(*w->nodes), "the nodes"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&w->q, w->qcap, sizeof(*w->q), "the queue"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&w->scratch, 1, sizeof(*w->scratch), "a sample"), st, fail);
	for (size_t i = 0; i < w->n; i++) {
		wnode *nd = &w->nodes[i];

		nd->w = w;
		nd->host = w->lnodes[i].host;
		nd->helper = SIZE_MAX;
		herd__timer_init(&nd->timer, on_node_timer, nd);
	}
	w->live = w->n;
	w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->fd < 0 || w->stop_fd < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "the watch's event descriptors");
		goto fail;
	}
	/* Made here for the errors of the call; the thread owns them from its start on. */
	client.userdata = w;
	HERD_CHECK_GOTO(herd__engine_create(&w->engine, w->be, &client, NULL), st, fail);
	herd__timer_init(&w->stop_timer, on_stop_due, w);
	herd__watcher_init(&w->stop_w, w->stop_fd, on_stop, w);
	herd__watcher_init(&w->sampler_w, -1, on_sampler, w);
	HERD_CHECK_GOTO(herd__loop_watch(herd__engine_loop(w->engine), &w->stop_w, POLLIN), st,
			fail);
	if (w->be == NULL)
		HERD_CHECK_GOTO(start_sampler(w), st, fail);
	else
		HERD_CHECK_GOTO(start_helpers(w), st, fail);
	/* The thread forks the helpers (their parent-death signal follows it)
	 * and takes no signal of the caller's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->thread, NULL, watch_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		st = herd__error_errno(HERD_ESYS, rc, "the watch's thread");
		goto fail;
	}
	w->joinable = true;
	*out = w;
	return HERD_OK;
fail:
	watch_destroy(w);
	return st;
}

int herd_telemetry_watch_fd(const herd_telemetry_watch *w)
{
	return w != NULL ? w->fd : -1;
}

herd_status herd_telemetry_watch_next(herd_telemetry_watch *w, size_t *node,
				      herd_telemetry_sample *out)
{
	queued e;
	eventfd_t v;
	herd_status st;

	if (w == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_watch_next: %s is NULL",
				   w == NULL ? "the watch" : "out");
	pthread_mutex_lock(&w->mu);
	if (w->qlen == 0) {
		if (w->signalled && eventfd_read(w->fd, &v) == 0)
			w->signalled = false;
		pthread_mutex_unlock(&w->mu);
		return herd__error(HERD_ENOTFOUND, "no sample waits");
	}
	e = w->q[w->qhead];
	w->qhead = (w->qhead + 1) % w->qcap;
	w->qlen--;
	pthread_mutex_unlock(&w->mu);
	st = herd_telemetry_unpack(e.data, e.len, out);
	free(e.data);
	if (st != HERD_OK)
		return st;
	herd__strlcpy(out->host, w->nodes[e.node].host, sizeof(out->host));
	if (node != NULL)
		*node = e.node;
	return HERD_OK;
}

herd_status herd_telemetry_watch_wait(herd_telemetry_watch *w, int timeout_ms)
{
	struct pollfd pf;
	int64_t deadline;
	int r;

	if (w == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_watch_wait: the watch is NULL");
	HERD_CHECK(herd__check_timeout("herd_telemetry_watch_wait", timeout_ms));
	deadline = timeout_ms >= 0 ? herd__net_deadline(timeout_ms) : -1;
	pf.fd = w->fd;
	pf.events = POLLIN;
	do {
		r = poll(&pf, 1, deadline >= 0 ? herd__net_remaining_ms(deadline) : -1);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return herd__error_errno(HERD_ESYS, errno, "waiting for the watch");
	if (r == 0)
		return herd__error(HERD_ETIMEDOUT, "no sample and no change within %d ms",
				   timeout_ms);
	return HERD_OK;
}

size_t herd_telemetry_watch_nodes(const herd_telemetry_watch *w)
{
	return w != NULL ? w->n : 0;
}

herd_status herd_telemetry_watch_node(herd_telemetry_watch *w, size_t i,
				      herd_telemetry_node *out)
{
	const wnode *nd;

	if (w == NULL || out == NULL || i >= w->n)
		return herd__error(HERD_EINVAL, "herd_telemetry_watch_node: %s",
				   w == NULL ? "the watch is NULL" : out == NULL ? "out is NULL"
				   : "no such node");
	nd = &w->nodes[i];
	pthread_mutex_lock(&w->mu);
	out->host = nd->host;
	out->state = nd->state;
	memcpy(out->why, nd->why, sizeof(out->why));
	out->samples = nd->samples;
	out->lost = nd->lost;
	out->last_ms = nd->last_ms;
	pthread_mutex_unlock(&w->mu);
	return HERD_OK;
}

size_t herd_telemetry_watch_live(herd_telemetry_watch *w)
{
	size_t live;

	if (w == NULL)
		return 0;
	pthread_mutex_lock(&w->mu);
	live = w->live;
	pthread_mutex_unlock(&w->mu);
	return live;
}

void herd_telemetry_watch_free(herd_telemetry_watch *w)
{
	if (w == NULL)
		return;
	if (w->joinable) {
		(void)eventfd_write(w->stop_fd, 1);
		pthread_join(w->thread, NULL);
	}
	watch_destroy(w);
}
