/*
 * sdk/launch/bcast.c - herd_bcast, a file to every node, and its node side
 * (`herd bcast --receive`, herd_agent_bcast_receive).
 *
 * A receiver first checks its DEST (nothing there, or a regular file,
 * which its copy replaces by rename: never a device, a FIFO, a link or a
 * directory) and makes its temporary file beside it, then says
 * "herd-bcast ready"; one that cannot write its copy and has no group to
 * forward to says "herd-bcast fail . REASON" instead and keeps none of
 * the file (it reads what it is sent to the end and drops it: under one
 * srun step the stream goes to every task).  The sender streams to a
 * receiver only once it is ready.
 * The stream a receiver reads on stdin is the file's bytes and then their
 * XXH3-64 (8 bytes, little endian), so that the sender reads the file once.
 * The sender writes each chunk to every receiver's pipe before it reads the
 * next (the slowest receiver sets the pace, a failed one is dropped), and
 * a relay writes the chunk to its own temporary file as well.  When the
 * stream ends every receiver checks the sum, fsyncs, renames its copy into
 * place and prints a line per host it answers for ("herd-bcast ok HOST" or
 * "herd-bcast fail HOST REASON", "." for itself); the sender reads those
 * lines, and names a host whose receiver said nothing with what its ssh or
 * srun said.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "herd/bcast.h"
#include "herd/sys/agent.h"
#include "engine.h"
#include "net.h"
#include "remote.h"
#include "topo/hostlist.h"

#define CHUNK ((size_t)4 << 20)
#define DEFAULT_TIMEOUT_MS 30000
#define REAP_MS 1000
#define POLL_MS 100
#define LINE "herd-bcast "

/* ---- the stream ------------------------------------------------------------ */

typedef struct source {
	int fd;
	const char *name;          /* the file, for messages; NULL: the stream on stdin */
	int stop_fd;               /* readable: stop (a signal came); -1: none */
	uint64_t data, got;        /* the file's bytes, and of the stream read so far */
	bool relay;                /* the sum comes in the stream (else it is made here) */
	bool seekable;             /* a regular file: each peer is fed from it at its
				    * own pace (sendfile), after a pass for the sum */
	XXH3_state_t *hash;
	uint8_t trailer[8];        /* the sum as the stream carries it */
	int timeout_ms;            /* --timeout: a peer that takes nothing that long fails */
	int read_ms;               /* how long a read waits for a byte; 0: timeout_ms */
} source;

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The next piece of the stream into buf: *n > 0 bytes, or an error. */
static herd_status source_next(source *s, uint8_t *buf, size_t cap, size_t *n)
{
	uint64_t total = s->data + 8;
	size_t want = total - s->got < cap ? (size_t)(total - s->got) : cap;
	ssize_t got;

	*n = 0;
	if (!s->relay && s->got >= s->data) {
		/* The sum, made here, after the last byte. */
		put_le64(s->trailer, XXH3_64bits_digest(s->hash));
		memcpy(buf, s->trailer + (s->got - s->data), (size_t)(total - s->got));
		*n = (size_t)(total - s->got);
		s->got = total;
		return HERD_OK;
	}
	if (!s->relay && want > s->data - s->got)
		want = (size_t)(s->data - s->got);
	for (;;) {
		struct pollfd pf[2] = { { .fd = s->fd, .events = POLLIN },
					{ .fd = s->stop_fd, .events = POLLIN } };
		int r = poll(pf, s->stop_fd >= 0 ? 2 : 1, s->read_ms > 0 ? s->read_ms : s->timeout_ms);

		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0 && s->stop_fd >= 0 && pf[1].revents != 0)
			return herd__error(HERD_EABORTED, "stopped by a signal (after %" PRIu64
					   " of %" PRIu64 " bytes)", s->got, total);
		if (r == 0)
			return herd__error(HERD_ETIMEDOUT, "nothing to read for %d s (after %" PRIu64
					   " of %" PRIu64 " bytes)",
					   ((s->read_ms > 0 ? s->read_ms : s->timeout_ms) + 999) / 1000,
					   s->got, total);
		got = read(s->fd, buf, want);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		break;
	}
	if (got < 0)
		return herd__error_errno(HERD_EIO, errno, "reading the file");
	if (got == 0)
		return herd__error(HERD_EIO, "the stream ended after %" PRIu64 " of %" PRIu64
				   " bytes", s->got, total);
	/* The file's part is hashed; a relay keeps the sum it was sent. */
	if (s->got < s->data) {
		size_t data = s->data - s->got < (uint64_t)got ? (size_t)(s->data - s->got)
							       : (size_t)got;

		XXH3_64bits_update(s->hash, buf, data);
		if ((size_t)got > data)
			memcpy(s->trailer, buf + data, (size_t)got - data);
	} else {
		memcpy(s->trailer + (s->got - s->data), buf, (size_t)got);
	}
	s->got += (uint64_t)got;
	*n = (size_t)got;
	return HERD_OK;
}

/*
 * A write to a receiver that died raises SIGPIPE for this thread: it is
 * blocked while the stream runs (the write fails with EPIPE instead), and
 * one that this raised is taken back after, so that the program's own
 * disposition never sees it.
 */
static void sigpipe_block(sigset_t *old, bool *was_pending)
{
	sigset_t pipe, pending;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, old);
	sigpending(&pending);
	*was_pending = sigismember(&pending, SIGPIPE) == 1;
}

/* A seekable source that ends before its size when it was opened. */
static herd_status source_shrank(const source *s)
{
	struct stat sb;

	if (fstat(s->fd, &sb) != 0)
		return herd__error_errno(HERD_EIO, errno, "cannot stat %s", s->name);
	return herd__error(HERD_EIO, "%s shrank while it was sent (%lld of its %" PRIu64
			   " bytes are left)", s->name, (long long)sb.st_size, s->data);
}

/* The sum of a seekable source, read once before it is sent. */
static herd_status file_sum(source *s, uint8_t *buf, size_t cap)
{
	for (uint64_t at = 0; at < s->data;) {
		size_t want = s->data - at < cap ? (size_t)(s->data - at) : cap;
		ssize_t got = pread(s->fd, buf, want, (off_t)at);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return herd__error_errno(HERD_EIO, errno, "cannot read %s", s->name);
		if (got == 0)
			return source_shrank(s);
		XXH3_64bits_update(s->hash, buf, (size_t)got);
		at += (uint64_t)got;
	}
	put_le64(s->trailer, XXH3_64bits_digest(s->hash));
	s->got = s->data + 8;
	return HERD_OK;
}

static void sigpipe_restore(const sigset_t *old, bool was_pending)
{
	const struct timespec zero = { 0, 0 };
	sigset_t pipe, pending;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigpending(&pending);
	if (!was_pending && sigismember(&pending, SIGPIPE) == 1)
		(void)sigtimedwait(&pipe, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/*
 * Writes to a receiver (its stdin wfd, sent bytes so far) what it lacks of
 * the stream: from the shared chunk buf (stream bytes pos..pos+len), or,
 * from a seekable source, the file at its own offset (sendfile, no copy
 * through this process) and then the sum.  write's result.
 */
static ssize_t feed(int wfd, uint64_t sent, const source *src, const uint8_t *buf, uint64_t pos,
		    size_t len)
{
	if (!src->seekable)
		return write(wfd, buf + (sent - pos), (size_t)(pos + len - sent));
	if (sent < src->data) {
		off_t off = (off_t)sent;
		size_t n = src->data - sent < (1u << 20) ? (size_t)(src->data - sent)
							 : (size_t)1 << 20;

		return sendfile(wfd, src->fd, &off, n);
	}
	return write(wfd, src->trailer + (sent - src->data), (size_t)(src->data + 8 - sent));
}

/* ---- receivers this process sends to, through the engine -------------------------- */

typedef struct peer {
	uint64_t sent;
	bool ready;                /* it said "ready": it takes the stream */
	bool closed;               /* its stdin is closed: it has the whole stream, or
				    * refused its DEST and takes none of it */
	bool ended;
	herd__engine_end end;      /* how it ended (why copied below) */
	char why[1200];
} peer;

typedef struct sender {
	herd__engine *engine;
	peer *peers;
	size_t np;
	source *src;
	const uint8_t *buf;
	uint64_t pos;              /* the chunk in buf: stream bytes pos..pos+len */
	size_t len;
	const char *dest;
	int mode;
	int64_t words_by;          /* one srun step: when the tasks that said nothing yet
				    * are no longer waited for (0: no task is ready yet) */
	herd_status failed;        /* the source failed in a callback (failed_why says how) */
	char failed_why[PATH_MAX + 200];
	herd__watcher stop;        /* the source's stop_fd */
	bool stopped;
} sender;

/* How long peer h may take nothing: a relay may itself wait the timeout on one of its group. */
static int patience(const sender *s, size_t h)
{
	return herd__engine_relays(s->engine, h) ? 2 * s->src->timeout_ms : s->src->timeout_ms;
}

static bool peer_open(const peer *p)
{
	return !p->closed && !p->ended;
}

static void peer_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	sender *s = userdata;
	peer *p = &s->peers[h];

	p->ended = true;
	p->end = *end;
	if (end->st == HERD_ETIMEDOUT)
		snprintf(p->why, sizeof(p->why), p->closed ? "no word within %d s of the last byte"
						 : p->ready ? "took nothing for %d s"
							    : "no word within %d s of its start",
			 (patience(s, h) + 999) / 1000);
	else if (end->st != HERD_OK)
		snprintf(p->why, sizeof(p->why), "%s", end->why);
	p->end.why = p->why;
}

/* Writes what it lacks of the stream to a receiver whose stdin takes more. */
static void peer_writable(void *userdata, size_t h)
{
	sender *s = userdata;
	peer *p = &s->peers[h];
	ssize_t w;

	if (!peer_open(p) || s->failed != HERD_OK)
		return;
	w = feed(herd__engine_link(s->engine, h)->ch.wfd, p->sent, s->src, s->buf, s->pos, s->len);
	if (w == 0 && s->src->seekable && p->sent < s->src->data) {
		/* sendfile found the end of the file before its size. */
		s->failed = source_shrank(s->src);
		snprintf(s->failed_why, sizeof(s->failed_why), "%s", herd_last_error());
		herd__engine_want_write(s->engine, h, false);
		return;
	}
	if (w > 0) {
		p->sent += (uint64_t)w;
		herd__engine_deadline(s->engine, h, herd__net_deadline(patience(s, h)));
	} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
		char said[HERD__LAUNCH_LINK_ERR_MAX + 8], why[HERD__LAUNCH_LINK_ERR_MAX + 100];

		herd__launch_link_read_err(herd__engine_link(s->engine, h));
		snprintf(why, sizeof(why), "stopped taking the file after %" PRIu64 " bytes%s",
			 p->sent, herd__engine_says(s->engine, h, said, sizeof(said)));
		herd__engine_close(s->engine, h, HERD_EIO, why);
		return;
	}
	/* One that has all there is waits for the others, not idles. */
	if (p->sent >= s->pos + s->len) {
		herd__engine_want_write(s->engine, h, false);
		herd__engine_deadline(s->engine, h, -1);
	}
}

/* Every open receiver has taken the chunk. */
static bool chunk_taken(const sender *s)
{
	for (size_t i = 0; i < s->np; i++)
		if (peer_open(&s->peers[i]) && s->peers[i].sent < s->pos + s->len)
			return false;
	return true;
}

/* A new chunk (or the whole stream) for receiver h. */
static void offer(sender *s, size_t h)
{
	if (!peer_open(&s->peers[h]) || !s->peers[h].ready || !herd__engine_started(s->engine, h))
		return;
	herd__engine_want_write(s->engine, h, true);
	herd__engine_deadline(s->engine, h, herd__net_deadline(patience(s, h)));
}

/*
 * The first word a receiver says of itself in b: 1 for "herd-bcast ready"
 * (it takes the stream), -1 for "herd-bcast fail . REASON" before that (it
 * refused its DEST and takes nothing), 0 when it has said neither yet.
 */
static int first_word(const herd__buf *b)
{
	const char *text = (const char *)b->data + b->off;
	size_t len = b->len - b->off, at = 0;

	while (at < len) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t n;

		if (nl == NULL)
			return 0;
		n = (size_t)(nl - line);
		at += n + 1;
		if (n == strlen(LINE "ready") && memcmp(line, LINE "ready", n) == 0)
			return 1;
		if (n > strlen(LINE "fail . ") && memcmp(line, LINE "fail . ", strlen(LINE "fail . ")) == 0)
			return -1;
	}
	return 0;
}

/* A receiver's word: streamed to once ready, let go when it refused. */
static void take_word(sender *s, size_t h, int word)
{
	peer *p = &s->peers[h];

	if (word == 0 || p->ready || !peer_open(p))
		return;
	if (word > 0) {
		p->ready = true;
		offer(s, h);
		return;
	}
	/* Its outcome is in its line; it ends without reading. */
	p->closed = true;
	herd__engine_close_input(s->engine, h);
	herd__engine_deadline(s->engine, h, herd__net_deadline(patience(s, h)));
}

static void peer_input(void *userdata, size_t h, herd__buf *in)
{
	sender *s = userdata;

	if (!s->peers[h].ready)
		take_word(s, h, first_word(in));
}

/*
 * One srun step has one stdin for all its tasks: it is streamed to once
 * every task has said its word, or, after the first said "ready", when
 * the others have had the command's timeout to say one (the tasks that
 * did not are named at the end, from what they and srun said).
 */
static void step_words(sender *s)
{
	size_t first, count, ready = 0, said = 0;

	if (!herd__engine_one_step(s->engine) || s->np == 0 || s->peers[0].ready ||
	    !peer_open(&s->peers[0]))
		return;
	herd__engine_nodes(s->engine, 0, &first, &count);
	for (size_t t = 0; t < count; t++) {
		int w = first_word(herd__engine_node_out(s->engine, t));

		ready += w > 0;
		said += w != 0;
	}
	if (ready > 0 && s->words_by == 0) {
		/* The step's own deadline no longer applies: one task waits. */
		s->words_by = herd__net_deadline(patience(s, 0));
		herd__engine_deadline(s->engine, 0, -1);
	}
	if (said == count || (ready > 0 && herd__net_now_ms() >= s->words_by))
		take_word(s, 0, ready > 0 ? 1 : -1);
}

static void on_stop(herd__watcher *w, short revents)
{
	sender *s = w->data;

	(void)revents;
	s->stopped = true;
}

/* The file's part of the chunk to this node's own copy (a relay's). */
static void copy_chunk(const sender *s, int outfd, char *out_err, size_t out_cap)
{
	size_t data;

	if (outfd < 0 || out_err[0] != '\0' || s->pos >= s->src->data)
		return;
	data = s->src->data - s->pos < s->len ? (size_t)(s->src->data - s->pos) : s->len;
	for (size_t off = 0; off < data;) {
		ssize_t w = pwrite(outfd, s->buf + off, data - off, (off_t)(s->pos + off));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(out_err, out_cap, "writing: %s", w < 0 ? strerror(errno)
								  : "no progress");
			return;
		}
		off += (size_t)w;
	}
}

/*
 * Sends the stream of src to every receiver the engine starts (and to the
 * file outfd, >= 0, with *out_err its first write error), then waits for
 * every receiver to end.  HERD_OK, or the source's failure (the receivers
 * are then stopped).
 */
static herd_status pump(sender *s, int outfd, char *out_err, size_t out_cap)
{
	source *src = s->src;
	uint64_t total = src->data + 8;
	uint8_t *buf = NULL;
	herd_status st = HERD_OK;
	bool pipe_pending;
	sigset_t mask;

	sigpipe_block(&mask, &pipe_pending);
	HERD_CHECK_GOTO(herd__calloc(&buf, CHUNK, 1, "the stream's buffer"), st, out);
	s->buf = buf;
	if (src->seekable) {
		/* The sum first; then the whole stream is there for every receiver. */
		HERD_CHECK_GOTO(file_sum(src, buf, CHUNK), st, out);
		s->len = (size_t)total;
	}
	for (;;) {
		if (chunk_taken(s) && s->pos + s->len < total && !src->seekable) {
			s->pos += s->len;
			s->len = 0;
			HERD_CHECK_GOTO(source_next(src, buf, CHUNK, &s->len), st, out);
			copy_chunk(s, outfd, out_err, out_cap);
			for (size_t i = 0; i < s->np; i++)
				offer(s, i);
			continue;
		}
		if (chunk_taken(s) && s->pos + s->len == total)
			for (size_t i = 0; i < s->np; i++)
				if (peer_open(&s->peers[i]) && herd__engine_started(s->engine, i)) {
					s->peers[i].closed = true;
					herd__engine_close_input(s->engine, i);
					herd__engine_deadline(s->engine, i,
							      herd__net_deadline(patience(s, i)));
				}
		if (herd__engine_live(s->engine) == 0) {
			/* Nobody listens: a relay still reads the stream for its copy. */
			if (s->pos + s->len == total)
				break;
			continue;
		}
		HERD_CHECK_GOTO(herd__engine_run_once(s->engine, s->words_by > 0 && !s->peers[0].ready
								     ? s->words_by : -1), st, out);
		step_words(s);
		if (s->failed != HERD_OK) {
			st = herd__error(s->failed, "%s", s->failed_why);
			goto out;
		}
		if (s->stopped) {
			st = herd__error(HERD_EABORTED, "stopped by a signal");
			goto out;
		}
	}
out:
	if (st != HERD_OK) {
		char why[1024];

		snprintf(why, sizeof(why), "stopped: %s", herd_last_error());
		for (size_t i = 0; i < s->np; i++)
			herd__engine_close(s->engine, i, st, why);
	}
	free(buf);
	s->buf = NULL;
	sigpipe_restore(&mask, pipe_pending);
	return st;
}

/* ---- outcomes ------------------------------------------------------------------ */

typedef struct outcome {
	const char *host;
	char *error;               /* NULL: it has the file */
	bool known;
} outcome;

static void set_outcome(outcome *o, bool ok, const char *reason)
{
	if (o->known)
		return;
	o->known = true;
	o->error = ok ? NULL : strdup(reason != NULL && reason[0] != '\0' ? reason : "failed");
}

/* Why receiver h's process gave no line for a node, from its exit and stderr. */
static void peer_why(const sender *s, size_t h, char *out, size_t cap)
{
	const peer *p = &s->peers[h];
	char said[HERD__LAUNCH_LINK_ERR_MAX + 8];
	const char *words = herd__engine_says(s->engine, h, said, sizeof(said));
	int ws = p->end.wstatus;

	if (p->end.st != HERD_OK)
		snprintf(out, cap, "%s", p->why);
	else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 255 && strncmp(words, ": ssh:", 6) == 0)
		snprintf(out, cap, "%s", words + 2);
	else if (WIFEXITED(ws))
		snprintf(out, cap, "its receiver exited %d without a word%s", WEXITSTATUS(ws), words);
	else
		snprintf(out, cap, "its receiver ended by signal %d%s",
			 WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, words);
}

/*
 * The outcomes of lines ("herd-bcast ok|fail HOST [REASON]", HOST "." for
 * the receiver's own node self) answering for nodes [first, first + count).
 */
static void read_lines(const herd__buf *b, size_t self, size_t first, size_t count, outcome *all)
{
	const char *text = (const char *)b->data + b->off;
	size_t len = b->len - b->off, at = 0;

	while (at < len) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - line) : len - at;
		char host[HERD_NAME_LEN * 4] = "", word[8] = "", copy[2048];
		int used = 0;

		at += n + 1;
		if (n <= strlen(LINE) || memcmp(line, LINE, strlen(LINE)) != 0)
			continue;
		snprintf(copy, sizeof(copy), "%.*s", (int)(n - strlen(LINE)), line + strlen(LINE));
		if (sscanf(copy, "%7s %255s %n", word, host, &used) < 2)
			continue;
		for (size_t i = first; i < first + count; i++) {
			bool me = strcmp(host, ".") == 0;

			if ((me && i == self) || (!me && strcmp(all[i].host, host) == 0)) {
				set_outcome(&all[i], strcmp(word, "ok") == 0, used > 0 ? copy + used : "");
				break;
			}
		}
	}
}

/* The outcomes of receiver h's nodes: from its lines, else why it said none. */
static void read_outcomes(sender *s, size_t h, outcome *all)
{
	size_t first, count;
	char why[1200];

	herd__engine_nodes(s->engine, h, &first, &count);
	if (herd__engine_one_step(s->engine)) {
		/* One srun step: task t answers for node t. */
		for (size_t t = 0; t < count; t++) {
			const herd__buf *err = herd__engine_node_err(s->engine, t);
			char said[600];

			read_lines(herd__engine_node_out(s->engine, t), t, t, 1, all);
			if (all[t].known)
				continue;
			herd__engine_last_line(err->len > err->off ? err
						: herd__engine_said(s->engine), said, sizeof(said));
			if (s->peers[h].end.st != HERD_OK)
				set_outcome(&all[t], false, s->peers[h].why);
			else
				set_outcome(&all[t], false, said[0] != '\0' ? said
							    : "its srun task said nothing");
		}
		return;
	}
	read_lines(&herd__engine_link(s->engine, h)->in, first, first, count, all);
	peer_why(s, h, why, sizeof(why));
	for (size_t i = first; i < first + count; i++) {
		char msg[1400];

		if (all[i].known)
			continue;
		if (i == first)
			snprintf(msg, sizeof(msg), "%s", why);
		else
			snprintf(msg, sizeof(msg), "not reached: its relay %s failed: %s",
				 all[first].host, why);
		set_outcome(&all[i], false, msg);
	}
}

/* ---- starting receivers ------------------------------------------------------------ */

/* `herd bcast --receive DEST --bytes N --mode M --timeout S [--forward GROUP]`. */
static herd_status receive_words(void *userdata, const char *forward, const char **words,
				 size_t max, size_t *n, char *buf, size_t cap)
{
	const sender *s = userdata;
	int k = snprintf(buf, cap, "%" PRIu64 "%c%04o%c%d", s->src->data, '\0', s->mode, '\0',
			 (s->src->timeout_ms + 999) / 1000);

	(void)max;
	if (k < 0 || (size_t)k >= cap)
		return herd__error(HERD_EINVAL, "the receiver's arguments are too long");
	*n = 0;
	words[(*n)++] = "bcast";
	words[(*n)++] = "--receive";
	words[(*n)++] = s->dest;
	words[(*n)++] = "--bytes";
	words[(*n)++] = buf;
	words[(*n)++] = "--mode";
	words[(*n)++] = buf + strlen(buf) + 1;
	words[(*n)++] = "--timeout";
	words[*n] = words[*n - 2] + strlen(words[*n - 2]) + 1;
	(*n)++;
	if (forward != NULL) {
		words[(*n)++] = "--forward";
		words[(*n)++] = forward;
	}
	return HERD_OK;
}

/*
 * Runs the receivers on hosts[0..n) through backend be (flat: ssh to each,
 * never a tree) and pumps the stream to them; all[] gets every host's
 * outcome.  HERD_OK once every receiver has ended, the source's failure
 * otherwise.
 */
static herd_status send_all(const herd__launch_backend *be, bool flat, const char *const *hosts,
			    size_t n, source *src, const char *dest, int mode, const char *program,
			    int outfd, char *out_err, size_t out_cap, outcome *all)
{
	herd__engine_client client = { .input = peer_input, .writable = peer_writable,
				       .ended = peer_ended };
	sender s = { .src = src, .dest = dest, .mode = mode };
	herd__engine_cmd cmd = { .hosts = hosts, .nhosts = n, .program = program,
				 .words = receive_words, .userdata = &s, .input = true,
				 .timeout_ms = src->timeout_ms, .flat = flat,
				 .in_max = (size_t)1 << 20 };
	herd_status st;

	client.userdata = &s;
	HERD_CHECK(herd__engine_create(&s.engine, be, &client, NULL));
	if (src->stop_fd >= 0) {
		s.stop = (herd__watcher){ .fd = src->stop_fd, .cb = on_stop, .data = &s };
		HERD_CHECK_GOTO(herd__loop_watch(herd__engine_loop(s.engine), &s.stop, POLLIN), st,
				out);
	}
	HERD_CHECK_GOTO(herd__engine_fanout(s.engine, &cmd), st, out);
	s.np = herd__engine_helpers(s.engine);
	HERD_CHECK_GOTO(herd__calloc(&s.peers, s.np + 1, sizeof(*s.peers), "the receivers"), st,
			out);
	st = pump(&s, outfd, out_err, out_cap);
	for (size_t h = 0; st == HERD_OK && h < s.np; h++)
		read_outcomes(&s, h, all);
out:
	herd__engine_free(s.engine, REAP_MS);
	free(s.peers);
	return st;
}

/* The node side's own copy: a temporary file beside dest. */
typedef struct copy {
	char tmp[PATH_MAX], err[PATH_MAX + 512];
	int fd;
} copy;

static void copy_open(copy *c, const char *dest, int mode)
{
	int n = snprintf(c->tmp, sizeof(c->tmp), "%s.herd-bcast.XXXXXX", dest);

	c->err[0] = '\0';
	c->fd = -1;
	if (n < 0 || (size_t)n >= sizeof(c->tmp)) {
		snprintf(c->err, sizeof(c->err), "%s: the path is too long", dest);
		c->tmp[0] = '\0';
		return;
	}
	/* The rename would replace a device, a FIFO or a link at DEST: never. */
	if (herd__check_replaceable(dest) != HERD_OK) {
		snprintf(c->err, sizeof(c->err), "%s", herd_last_error());
		c->tmp[0] = '\0';
		return;
	}
	c->fd = mkostemp(c->tmp, O_CLOEXEC);
	if (c->fd < 0) {
		snprintf(c->err, sizeof(c->err), "cannot create a file beside %s: %s", dest,
			 strerror(errno));
		c->tmp[0] = '\0';
		return;
	}
	if (fchmod(c->fd, (mode_t)mode) != 0)
		snprintf(c->err, sizeof(c->err), "chmod %s: %s", c->tmp, strerror(errno));
}

/* Verifies, fsyncs and renames the copy into place; c->err says what failed. */
static void copy_finish(copy *c, const source *src, const char *dest)
{
	uint64_t want = get_le64(src->trailer), got = XXH3_64bits_digest(src->hash);
	char dir[PATH_MAX], *slash;

	if (c->err[0] == '\0' && want != got)
		snprintf(c->err, sizeof(c->err), "checksum mismatch: sent %016" PRIx64 ", received "
			 "%016" PRIx64, want, got);
	if (c->err[0] == '\0' && fsync(c->fd) != 0)
		snprintf(c->err, sizeof(c->err), "fsync %s: %s", c->tmp, strerror(errno));
	if (c->fd >= 0 && close(c->fd) != 0 && c->err[0] == '\0')
		snprintf(c->err, sizeof(c->err), "close %s: %s", c->tmp, strerror(errno));
	c->fd = -1;
	/* Again: something else may have taken DEST's name since the start. */
	if (c->err[0] == '\0' && herd__check_replaceable(dest) != HERD_OK)
		snprintf(c->err, sizeof(c->err), "%s", herd_last_error());
	if (c->err[0] == '\0' && rename(c->tmp, dest) != 0)
		snprintf(c->err, sizeof(c->err), "rename to %s: %s", dest, strerror(errno));
	if (c->err[0] != '\0') {
		if (c->tmp[0] != '\0')
			unlink(c->tmp);
		return;
	}
	herd__strlcpy(dir, dest, sizeof(dir));
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash != NULL)
		*slash = '\0';
	else
		herd__strlcpy(dir, ".", sizeof(dir));
	if (herd__fsync_dir(dir) != HERD_OK)
		snprintf(c->err, sizeof(c->err), "%s", herd_last_error());
}

/* ---- the node side ------------------------------------------------------------------ */

/*
 * A refusing receiver's stdin, read to the stream's end (bytes and its
 * sum) and dropped, in an srun task: under one step (--input=all) the stream goes to
 * every task whatever it said, and srun holds each piece until every node
 * has taken it, so a task that ended early stalls the others' copies after
 * a MiB.  Ends at end of stream, on a stop, or after idle_ms of nothing.
 * Over ssh a refused node's stdin is its own: it is not read.
 */
static void drain_stream(int fd, int stop_fd, uint64_t bytes, int idle_ms)
{
	static char sink[65536];
	uint64_t left = bytes + 8;

	while (left > 0) {
		struct pollfd pf[2] = { { .fd = fd, .events = POLLIN },
					{ .fd = stop_fd, .events = POLLIN } };
		int r = poll(pf, stop_fd >= 0 ? 2 : 1, idle_ms);
		ssize_t got;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (stop_fd >= 0 && pf[1].revents != 0))
			return;
		got = read(fd, sink, left < sizeof(sink) ? (size_t)left : sizeof(sink));
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return;
		left -= (uint64_t)got;
	}
}

herd_status herd_agent_bcast_receive(const char *dest, uint64_t bytes, int mode,
				     const char *forward, const char *program, int timeout_ms,
				     int stop_fd)
{
	herd__hostlist hl = { 0 };
	outcome *all = NULL;
	/* What feeds this node (the sender, or a relay) may itself wait the
	 * timeout on a stalled peer before it drops it and goes on: this node
	 * waits twice that for its next byte. */
	source src = { STDIN_FILENO, NULL, stop_fd, bytes, 0, true, false, NULL, { 0 },
		       timeout_ms, 2 * timeout_ms };
	copy c;
	herd_status st;

	if (forward != NULL)
		HERD_CHECK(herd__hostlist_expand(&hl, forward));
	src.hash = XXH3_createState();
	if (src.hash == NULL) {
		herd__hostlist_free(&hl);
		return herd__error(HERD_ENOMEM, "out of memory");
	}
	XXH3_64bits_reset(src.hash);
	HERD_CHECK_GOTO(herd__calloc(&all, hl.n + 1, sizeof(*all), "outcomes"), st, out);
	for (size_t i = 0; i < hl.n; i++)
		all[i].host = hl.names[i];
	copy_open(&c, dest, mode);
	/* Its word, before a byte is read: a node that cannot keep a copy and
	 * has no group to forward to takes none of the file. */
	if (c.err[0] != '\0' && hl.n == 0) {
		if (c.fd >= 0)
			close(c.fd);
		if (c.tmp[0] != '\0')
			unlink(c.tmp);
		printf(LINE "fail . %s\n", c.err);
		fflush(stdout);
		/* A task of an srun step shares the step's one stdin. */
		if (getenv("SLURM_STEP_ID") != NULL)
			drain_stream(STDIN_FILENO, stop_fd, bytes, 2 * timeout_ms);
		goto out;
	}
	printf(LINE "ready\n");
	if (fflush(stdout) != 0) {
		st = herd__error_errno(HERD_ECLOSED, errno, "the sender went away");
		if (c.fd >= 0)
			close(c.fd);
		if (c.tmp[0] != '\0')
			unlink(c.tmp);
		goto out;
	}
	/* Its group is reached flat, each node over ssh. */
	st = send_all(&herd__launch_backend_ssh, true, (const char *const *)hl.names, hl.n, &src,
		      dest, mode, program, c.fd, c.err, sizeof(c.err), all);
	if (st != HERD_OK) {
		/* The sender is gone: nobody to tell. */
		if (c.fd >= 0)
			close(c.fd);
		if (c.tmp[0] != '\0')
			unlink(c.tmp);
		goto out;
	}
	copy_finish(&c, &src, dest);
	printf(LINE "%s . %s\n", c.err[0] == '\0' ? "ok" : "fail", c.err);
	for (size_t i = 0; i < hl.n; i++)
		printf(LINE "%s %s %s\n", all[i].error == NULL ? "ok" : "fail", all[i].host,
		       all[i].error != NULL ? all[i].error : "");
	fflush(stdout);
out:
	for (size_t i = 0; i < hl.n && all != NULL; i++)
		free(all[i].error);
	free(all);
	XXH3_freeState(src.hash);
	herd__hostlist_free(&hl);
	return st;
}

/* ---- the sender ------------------------------------------------------------------------ */

herd_status herd_bcast(const char *file, const char *dest, const herd_bcast_opts *opts)
{
	const herd__launch_backend *be;
	herd__launch_node *nodes = NULL;
	herd_job_spec spec;
	const char **names = NULL;
	const char *program;
	outcome *all = NULL;
	source src = { -1, file, -1, 0, 0, false, true, NULL, { 0 }, DEFAULT_TIMEOUT_MS, 0 };
	struct stat sb;
	size_t n = 0, failed = 0;
	int mode;
	herd_status st;

	if (file == NULL || dest == NULL || opts == NULL)
		return herd__error(HERD_EINVAL, "herd_bcast: file, dest and opts must not be NULL");
	HERD__CHECK_VERSION("herd_bcast", opts, herd_bcast_opts, BCAST_OPTS);
	if (dest[0] != '/')
		return herd__error(HERD_EINVAL, "destination %s: an absolute path, please (the "
				   "nodes' working directories are not this one's)", dest);
	if (opts->where != HERD_JOB_HOSTS && opts->where != HERD_JOB_HOSTFILE &&
	    opts->where != HERD_JOB_SLURM)
		return herd__error(HERD_EINVAL, "herd_bcast: opts.where: hosts, a hostfile or "
				   "Slurm");
	if (opts->timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_bcast: timeout_ms %d is negative",
				   opts->timeout_ms);
	if (opts->timeout_ms > 0)
		src.timeout_ms = opts->timeout_ms;
	program = opts->herd_program != NULL && opts->herd_program[0] != '\0'
			  ? opts->herd_program
			  : herd__param_str(HERD__P_PROGRAM) != NULL
				    ? herd__param_str(HERD__P_PROGRAM)
				    : "herd";
	src.fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (src.fd < 0)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "cannot open %s", file);
	if (fstat(src.fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(src.fd);
		return herd__error(HERD_EINVAL, "%s is %s, not a regular file", file,
				   herd__file_kind(sb.st_mode));
	}
	src.data = (uint64_t)sb.st_size;
	mode = (int)(sb.st_mode & 07777);
	src.hash = XXH3_createState();
	if (src.hash == NULL) {
		close(src.fd);
		return herd__error(HERD_ENOMEM, "out of memory");
	}
	XXH3_64bits_reset(src.hash);
	memset(&spec, 0, sizeof(spec));
	spec.where = opts->where;
	spec.hosts = opts->hosts;
	HERD_CHECK_GOTO(herd__launch_backend_for(spec.where, &be), st, out);
	HERD_CHECK_GOTO(be->resolve(&spec, &nodes, &n), st, out);
	HERD_CHECK_GOTO(herd__calloc(&names, n + 1, sizeof(*names), "the nodes"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&all, n + 1, sizeof(*all), "outcomes"), st, out);
	for (size_t i = 0; i < n; i++)
		names[i] = all[i].host = nodes[i].host;
	st = send_all(be, false, names, n, &src, dest, mode, program, -1, NULL, 0, all);
	if (st != HERD_OK)
		goto out;       /* its message names the file or the node */
	for (size_t i = 0; i < n; i++) {
		failed += all[i].error != NULL;
		if (opts->result != NULL)
			opts->result(opts->userdata, all[i].host,
				     all[i].error == NULL ? HERD_OK : HERD_EIO, all[i].error);
	}
	if (failed > 0) {
		size_t i = 0;

		while (all[i].error == NULL)
			i++;
		st = herd__error(HERD_EPEER, "%zu of %zu nodes have no copy of %s; the "
				 "first, %s: %s", failed, n, file, all[i].host, all[i].error);
	}
out:
	for (size_t i = 0; i < n && all != NULL; i++)
		free(all[i].error);
	free(all);
	free(names);
	herd__launch_nodes_free(nodes, n);
	XXH3_freeState(src.hash);
	close(src.fd);
	return st;
}
