/*
 * sdk/launch/output.c - the job's output to stdout and stderr, written by
 * a thread of its own.
 *
 * The supervisor must never wait on a reader: a pipe nobody reads (`herd
 * launch ... | (sleep 15)`), a terminal stopped with Ctrl-S, a stuck tee.
 * It queues each line here and goes on; the writer thread does the
 * blocking writes, one write per line, in order.  What is queued is
 * bounded: a line that does not fit is dropped and counted, and once the
 * queue has room again the writer says on stderr how many lines and bytes
 * were dropped.  At the end the job waits for the queue to empty, unless
 * told to give up (a signal to the launcher), and says what it did not
 * write.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_internal.h"
#include "net.h"

struct out_line {
	struct out_line *next;
	int fd;
	size_t len;
	char data[];
};

struct herd__outq {
	pthread_mutex_t mu;
	pthread_cond_t cv;            /* a line queued, written, or stop */
	struct out_line *head, *tail;
	size_t bytes, max;
	bool writing, stop;
	uint64_t dropped, dropped_bytes;   /* not yet said */
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

static void free_line(void *p)
{
	free(p);
}

static void *writer(void *arg)
{
	herd__outq *q = arg;

	/* Cancelled only inside a write (herd__outq_free), never holding mu. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		struct out_line *l;
		uint64_t dropped = 0, dropped_bytes = 0;
		size_t len;

		pthread_mutex_lock(&q->mu);
		while (q->head == NULL && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		l = q->head;
		if (l == NULL) {
			pthread_mutex_unlock(&q->mu);
			return NULL;
		}
		q->head = l->next;
		if (q->head == NULL)
			q->tail = NULL;
		q->writing = true;
		pthread_mutex_unlock(&q->mu);

		len = l->len;
		pthread_cleanup_push(free_line, l);
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		write_all(l->fd, l->data, l->len);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		pthread_cleanup_pop(1);

		pthread_mutex_lock(&q->mu);
		q->bytes -= len;
		q->writing = false;
		/* Room again: say what could not wait. */
		if (q->head == NULL && q->dropped > 0) {
			dropped = q->dropped;
			dropped_bytes = q->dropped_bytes;
			q->dropped = q->dropped_bytes = 0;
		}
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mu);
		if (dropped > 0)
			say_dropped(dropped, dropped_bytes, "the reader of the job's output did not "
				    "keep up");
	}
}

herd_status herd__outq_start(herd__outq **out, size_t max_bytes)
{
	herd__outq *q;
	int rc;

	*out = NULL;
	HERD_CHECK(herd__calloc(&q, 1, sizeof(*q), "the output queue"));
	q->max = max_bytes;
	pthread_mutex_init(&q->mu, NULL);
	herd__net_cond_init(&q->cv);
	rc = pthread_create(&q->thread, NULL, writer, q);
	if (rc != 0) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return herd__error_errno(HERD_ESYS, rc, "herd_job_launch: output thread");
	}
	*out = q;
	return HERD_OK;
}

void herd__outq_push(herd__outq *q, int fd, const char *data, size_t len)
{
	struct out_line *l = NULL;

	pthread_mutex_lock(&q->mu);
	if (q->bytes + len <= q->max)
		l = malloc(sizeof(*l) + len);
	if (l == NULL) {
		q->dropped++;
		q->dropped_bytes += len;
		pthread_mutex_unlock(&q->mu);
		return;
	}
	l->next = NULL;
	l->fd = fd;
	l->len = len;
	memcpy(l->data, data, len);
	if (q->tail != NULL)
		q->tail->next = l;
	else
		q->head = l;
	q->tail = l;
	q->bytes += len;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void herd__outq_drain(herd__outq *q, bool (*give_up)(void *arg), void *arg)
{
	uint64_t lines = 0, bytes = 0;

	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	while (q->head != NULL || q->writing) {
		bool stop;

		herd__net_cond_wait_until(&q->cv, &q->mu, herd__net_deadline(100));
		/* give_up takes the job's lock: never under this one. */
		pthread_mutex_unlock(&q->mu);
		stop = give_up(arg);
		pthread_mutex_lock(&q->mu);
		if (stop)
			break;
	}
	for (struct out_line *l = q->head; l != NULL; l = l->next) {
		lines++;
		bytes += l->len;
	}
	lines += q->dropped;
	bytes += q->dropped_bytes;
	q->dropped = q->dropped_bytes = 0;
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
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	/* What is left is not waited for (herd__outq_drain does that). */
	while (q->head != NULL) {
		struct out_line *l = q->head;

		q->head = l->next;
		free(l);
	}
	q->tail = NULL;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	/* A write blocked on a reader that never reads is a cancellation point. */
	pthread_cancel(q->thread);
	pthread_join(q->thread, NULL);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
