/*
 * sdk/launch/output.c - the job's output to stdout and stderr, written by
 * a thread of its own.
 *
 * The supervisor must never wait on a reader: a pipe nobody reads (`herd
 * launch ... | (sleep 15)`), a terminal stopped with Ctrl-S, a stuck tee.
 * It queues whole lines here and goes on; the writer thread does the
 * blocking writes, in order.  Lines are queued in chunks of many lines
 * (a copy per batch, not an allocation per line) and written many to a
 * write, cut only between lines; into a pipe or a socket at most PIPE_BUF
 * bytes a write unless one line is longer: a write of a pipe that size is
 * atomic, so the lines never mix with what another writer of the same pipe
 * writes (a file, a terminal and /dev/null take a whole write at once:
 * into them, up to 16 KiB a write).
 *
 * What is queued is bounded: lines that do not fit are dropped and counted,
 * and once the queue has emptied the writer says on stderr how many lines
 * and bytes were dropped.  Before it comes to that, the supervisor is told
 * to take no more output while the queue is over half full and its reader
 * takes what is written (herd__outq_backlogged): the nodes then stop
 * reading their ranks' pipes and the ranks wait in write, as they would on
 * a pipe, so that a reader that keeps up loses nothing.  A reader that has
 * taken nothing for HERD__OUTQ_STALL_MS is stalled: the supervisor reads
 * on, and lines beyond the bound are dropped.  At the end the job waits for the
 * queue to empty, unless told to give up (a signal to the launcher), and
 * says what it did not write.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch_internal.h"
#include "net.h"

/* Bytes of a chunk that lines are added to until it is full. */
#define CHUNK_BYTES ((size_t)64 << 10)

struct chunk {
	struct chunk *next;
	herd_job_stream stream;
	size_t len, cap;
	uint64_t lines;
	char data[];
};

struct herd__outq {
	pthread_mutex_t mu;
	pthread_cond_t cv;                 /* lines queued, or closed */
	pthread_cond_t written_cv;         /* a chunk written */
	struct chunk *head, *tail;         /* waiting; the one being written is off the list */
	struct chunk *spare;               /* a written chunk of CHUNK_BYTES, for the next */
	size_t bytes, max;                 /* bytes not written yet, and their bound */
	uint64_t queued, written;          /* lines the queue took, and those written */
	uint64_t dropped, dropped_bytes;
	uint64_t said, said_bytes;         /* of the drops, those said */
	int64_t progress_at;               /* when the writer last finished a write or began */
	bool want_room;                    /* the supervisor waits for room (room_fd) */
	bool closed;
	size_t piece_max[2];               /* most bytes a write, stdout and stderr */
	int room_fd;
	pthread_t thread;
};

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;   /* a closed stdout must not stop the job */
		p += w;
		n -= (size_t)w;
	}
}

static void say_dropped(uint64_t lines, uint64_t bytes, const char *why)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "herd launch: %llu lines (%llu bytes) of the ranks' "
			 "output dropped: %s\n", (unsigned long long)lines,
			 (unsigned long long)bytes, why);

	if (n > 0)
		write_all(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/*
 * Takes the lines and bytes not written that are still to be said (mu
 * held): the drops not said yet and, with waiting, the lines still queued.
 */
static void take_unsaid(herd__outq *q, bool waiting, uint64_t *lines, uint64_t *bytes)
{
	*lines = q->dropped - q->said + (waiting ? q->queued - q->written : 0);
	*bytes = q->dropped_bytes - q->said_bytes + (waiting ? q->bytes : 0);
	q->said = q->dropped;
	q->said_bytes = q->dropped_bytes;
}

/* Bytes a write into a file, a terminal or /dev/null: small enough that a
 * slow terminal (an ssh session over a thin link) finishes one well within
 * HERD__OUTQ_STALL_MS, and is not taken for a stalled reader. */
#define PIECE_MAX_NOT_PIPE ((size_t)16 << 10)

/* The most bytes a write into fd that keeps lines whole among other
 * writers: PIPE_BUF for a pipe or a socket, else PIECE_MAX_NOT_PIPE. */
static size_t piece_max_of(int fd)
{
	struct stat sb;

	if (fstat(fd, &sb) != 0 || S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode))
		return PIPE_BUF;
	return PIECE_MAX_NOT_PIPE;
}

/* The length of the next write of c from off: whole lines, at most max
 * bytes unless the first line alone is longer. */
static size_t piece(const struct chunk *c, size_t off, size_t max)
{
	const char *p = c->data + off, *nl;
	size_t left = c->len - off;

	if (left <= max)
		return left;
	nl = memrchr(p, '\n', max);
	if (nl != NULL)
		return (size_t)(nl - p) + 1;
	nl = memchr(p + max, '\n', left - max);
	return nl != NULL ? (size_t)(nl - p) + 1 : left;
}

/* A write of n bytes is done (mu held): room for the supervisor again? */
static void wrote(herd__outq *q, size_t n)
{
	q->bytes -= n;
	q->progress_at = herd__net_now_ms();
	if (q->want_room && q->bytes <= q->max / 2) {
		q->want_room = false;
		(void)eventfd_write(q->room_fd, 1);
	}
}

/* Writes c piece by piece, telling the queue after each piece; c is freed
 * if the thread is cancelled inside a write. */
static void write_chunk(herd__outq *q, struct chunk *c)
{
	bool err = c->stream == HERD_JOB_STDERR;
	int fd = err ? STDERR_FILENO : STDOUT_FILENO;

	pthread_cleanup_push(free, c);
	for (size_t off = 0; off < c->len;) {
		size_t n = piece(c, off, q->piece_max[err]);

		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		write_all(fd, c->data + off, n);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		off += n;
		pthread_mutex_lock(&q->mu);
		wrote(q, n);
		pthread_mutex_unlock(&q->mu);
	}
	pthread_cleanup_pop(0);
}

static void *writer(void *arg)
{
	herd__outq *q = arg;

	/* Cancelled only inside a write (herd__outq_free), never holding a lock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct chunk *c;
		uint64_t dropped = 0, dropped_bytes = 0;

		while (q->head == NULL && !q->closed)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->closed)
			break;    /* what is left is not waited for: herd__outq_free */
		c = q->head;
		q->head = c->next;
		if (q->head == NULL)
			q->tail = NULL;
		q->progress_at = herd__net_now_ms();
		pthread_mutex_unlock(&q->mu);

		write_chunk(q, c);
		pthread_mutex_lock(&q->mu);
		q->written += c->lines;
		/* Kept for the next lines rather than freed and allocated again. */
		if (q->spare == NULL && c->cap == CHUNK_BYTES) {
			q->spare = c;
			c = NULL;
		}
		/* Emptied: say what could not wait. */
		if (q->head == NULL)
			take_unsaid(q, false, &dropped, &dropped_bytes);
		pthread_cond_broadcast(&q->written_cv);
		pthread_mutex_unlock(&q->mu);
		free(c);
		if (dropped > 0)
			say_dropped(dropped, dropped_bytes, "the reader of the job's output did not "
				    "keep up");
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

herd_status herd__outq_start(herd__outq **out, size_t max_bytes)
{
	herd__outq *q;
	int rc;

	*out = NULL;
	HERD_CHECK(herd__calloc(&q, 1, sizeof(*q), "the output queue"));
	q->max = max_bytes;
	q->room_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	q->piece_max[0] = piece_max_of(STDOUT_FILENO);
	q->piece_max[1] = piece_max_of(STDERR_FILENO);
	if (q->room_fd < 0) {
		int err = errno;

		free(q);
		return herd__error_errno(HERD_ESYS, err, "cannot create the descriptor of the "
					 "ranks' output queue");
	}
	pthread_mutex_init(&q->mu, NULL);
	herd__net_cond_init(&q->cv);
	herd__net_cond_init(&q->written_cv);
	rc = pthread_create(&q->thread, NULL, writer, q);
	if (rc != 0) {
		pthread_cond_destroy(&q->cv);
		pthread_cond_destroy(&q->written_cv);
		pthread_mutex_destroy(&q->mu);
		close(q->room_fd);
		free(q);
		return herd__error_errno(HERD_ESYS, rc, "cannot start the thread that writes the "
					 "ranks' output");
	}
	*out = q;
	return HERD_OK;
}

void herd__outq_push(herd__outq *q, herd_job_stream stream, const char *data, size_t len,
		     uint64_t nlines)
{
	struct chunk *t;

	if (len == 0)
		return;
	/* The writer holds mu only between writes: this never waits on a reader. */
	pthread_mutex_lock(&q->mu);
	t = q->tail;
	/* Work for an idle writer: its reader has had no time to stall. */
	if (q->bytes == 0)
		q->progress_at = herd__net_now_ms();
	if (q->closed || len > q->max - q->bytes) {
		q->dropped += nlines;
		q->dropped_bytes += len;
		pthread_mutex_unlock(&q->mu);
		return;
	}
	if (t == NULL || t->stream != stream || t->cap - t->len < len) {
		size_t cap = len > CHUNK_BYTES ? len : CHUNK_BYTES;

		if (cap == CHUNK_BYTES && q->spare != NULL) {
			t = q->spare;
			q->spare = NULL;
		} else {
			t = malloc(sizeof(*t) + cap);
		}
		if (t == NULL) {
			q->dropped += nlines;
			q->dropped_bytes += len;
			pthread_mutex_unlock(&q->mu);
			return;
		}
		t->next = NULL;
		t->stream = stream;
		t->len = 0;
		t->cap = cap;
		t->lines = 0;
		if (q->tail != NULL)
			q->tail->next = t;
		else
			q->head = t;
		q->tail = t;
	}
	memcpy(t->data + t->len, data, len);
	t->len += len;
	t->lines += nlines;
	q->bytes += len;
	q->queued += nlines;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

bool herd__outq_backlogged(herd__outq *q, int64_t *recheck_at)
{
	bool full;

	pthread_mutex_lock(&q->mu);
	full = q->bytes > q->max / 2 &&
	       herd__net_now_ms() < q->progress_at + HERD__OUTQ_STALL_MS;
	if (full) {
		q->want_room = true;
		*recheck_at = q->progress_at + HERD__OUTQ_STALL_MS;
	}
	pthread_mutex_unlock(&q->mu);
	return full;
}

int herd__outq_fd(const herd__outq *q)
{
	return q->room_fd;
}

void herd__outq_drain(herd__outq *q, bool (*give_up)(void *arg), void *arg)
{
	uint64_t lines, bytes;

	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	while (q->written < q->queued) {
		bool stop;

		herd__net_cond_wait_until(&q->written_cv, &q->mu, herd__net_deadline(100));
		/* give_up takes the job's lock: never under this one. */
		pthread_mutex_unlock(&q->mu);
		stop = give_up(arg);
		pthread_mutex_lock(&q->mu);
		if (stop)
			break;
	}
	take_unsaid(q, true, &lines, &bytes);
	pthread_mutex_unlock(&q->mu);
	if (lines > 0) {
		struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };

		/* Said only where it cannot block. */
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
			say_dropped(lines, bytes, "the job ended and the reader of its output "
				    "stopped reading");
	}
}

void herd__outq_free(herd__outq *q)
{
	if (q == NULL)
		return;
	/* What is left is not waited for (herd__outq_drain does that). */
	pthread_mutex_lock(&q->mu);
	q->closed = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	/* A write blocked on a reader that never reads is a cancellation point. */
	pthread_cancel(q->thread);
	pthread_join(q->thread, NULL);
	while (q->head != NULL) {
		struct chunk *c = q->head;

		q->head = c->next;
		free(c);
	}
	free(q->spare);
	close(q->room_fd);
	pthread_cond_destroy(&q->cv);
	pthread_cond_destroy(&q->written_cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
