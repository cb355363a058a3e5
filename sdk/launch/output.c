/*
 * sdk/launch/output.c - the job's output to stdout and stderr, written by
 * a thread of its own.
 *
 * The supervisor must never wait on a reader: a pipe nobody reads (`herd
 * launch ... | (sleep 15)`), a terminal stopped with Ctrl-S, a stuck tee.
 * It queues each line here (a herd_job_lines) and goes on; the writer
 * thread does the blocking writes, one write per line, in order.  What is
 * queued is bounded: a line that does not fit is dropped and counted, and
 * once the queue has room again the writer says on stderr how many lines
 * and bytes were dropped.  At the end the job waits for the queue to empty, unless
 * told to give up (a signal to the launcher), and says what it did not
 * write.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "launch_internal.h"
#include "net.h"

struct herd__outq {
	herd_job_lines *lines;
	pthread_mutex_t mu;
	pthread_cond_t cv;                 /* a line written */
	uint64_t queued, written;          /* lines the queue took, and those written */
	uint64_t said, said_bytes;         /* of the queue's drops, those said */
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
	size_t n, b;
	uint64_t dropped, dropped_bytes;

	herd_job_lines_counts(q->lines, &n, &b, &dropped, &dropped_bytes);
	*lines = dropped - q->said + (waiting ? n : 0);
	*bytes = dropped_bytes - q->said_bytes + (waiting ? b : 0);
	q->said = dropped;
	q->said_bytes = dropped_bytes;
}

static void *writer(void *arg)
{
	herd__outq *q = arg;
	herd_job_line *l;

	/* Cancelled only inside a write (herd__outq_free), never holding a lock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (herd_job_lines_pop(q->lines, HERD_TIMEOUT_NONE, &l) == HERD_OK) {
		uint64_t dropped = 0, dropped_bytes = 0;
		size_t waiting;

		pthread_cleanup_push(herd_free, l);
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		write_all(l->stream == HERD_JOB_STDERR ? STDERR_FILENO : STDOUT_FILENO, l->text,
			  l->len);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		pthread_cleanup_pop(1);

		pthread_mutex_lock(&q->mu);
		q->written++;
		/* Room again: say what could not wait. */
		herd_job_lines_counts(q->lines, &waiting, NULL, NULL, NULL);
		if (waiting == 0)
			take_unsaid(q, false, &dropped, &dropped_bytes);
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mu);
		if (dropped > 0)
			say_dropped(dropped, dropped_bytes, "the reader of the job's output did not "
				    "keep up");
	}
	return NULL;   /* closed: herd__outq_free */
}

herd_status herd__outq_start(herd__outq **out, size_t max_bytes)
{
	herd__outq *q;
	herd_status st;
	int rc;

	*out = NULL;
	HERD_CHECK(herd__calloc(&q, 1, sizeof(*q), "the output queue"));
	st = herd_job_lines_create(&q->lines, max_bytes);
	if (st != HERD_OK) {
		free(q);
		return st;
	}
	pthread_mutex_init(&q->mu, NULL);
	herd__net_cond_init(&q->cv);
	rc = pthread_create(&q->thread, NULL, writer, q);
	if (rc != 0) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		herd_job_lines_free(q->lines);
		free(q);
		return herd__error_errno(HERD_ESYS, rc, "herd_job_launch: output thread");
	}
	*out = q;
	return HERD_OK;
}

void herd__outq_push(herd__outq *q, herd_job_stream stream, const char *data, size_t len)
{
	/* The writer holds mu only between writes: this never waits on a reader. */
	pthread_mutex_lock(&q->mu);
	if (herd_job_lines_push(q->lines, -1, NULL, stream, data, len))
		q->queued++;
	pthread_mutex_unlock(&q->mu);
}

void herd__outq_drain(herd__outq *q, bool (*give_up)(void *arg), void *arg)
{
	uint64_t lines, bytes;

	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	while (q->written < q->queued) {
		bool stop;

		herd__net_cond_wait_until(&q->cv, &q->mu, herd__net_deadline(100));
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
	/* What is left is not waited for (herd__outq_drain does that): the
	 * writer's pop returns HERD_ECLOSED. */
	herd_job_lines_close(q->lines);
	/* A write blocked on a reader that never reads is a cancellation point. */
	pthread_cancel(q->thread);
	pthread_join(q->thread, NULL);
	herd_job_lines_free(q->lines);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
