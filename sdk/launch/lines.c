/*
 * sdk/launch/lines.c - herd_job_lines, the bounded queue of output lines
 * between a job's supervisor thread and whoever reads them at its own pace
 * (the shell's job:lines(), a C program's own reader).
 *
 * The lines wait in a ring of pointers, so that each one is a single
 * allocation the reader frees with herd_free.  The eventfd is kept at 1
 * while a line waits or the queue is closed and at 0 otherwise, always
 * under the mutex, so that a poll on it says what a pop would find.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base.h"
#include "herd/job.h"
#include "net.h"

/* Slots of the ring when the first line comes; it doubles when full. */
#define RING_FIRST 64

struct herd_job_lines {
	pthread_mutex_t mu;
	pthread_cond_t cv;         /* a line queued, or closed */
	herd_job_line **ring;
	size_t cap, head, n;       /* n lines from ring[head], wrapping at cap */
	size_t bytes, max;
	uint64_t dropped, dropped_bytes;
	bool closed;
	int efd;
};

herd_status herd_job_lines_create(herd_job_lines **out, size_t max_bytes)
{
	herd_job_lines *q;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_job_lines_create: out is NULL");
	*out = NULL;
	if (max_bytes == 0)
		return herd__error(HERD_EINVAL, "herd_job_lines_create: max_bytes is 0 (the most "
				   "bytes of text the queue holds)");
	HERD_CHECK(herd__calloc(&q, 1, sizeof(*q), "a line queue"));
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->efd < 0) {
		int err = errno;

		free(q);
		return herd__error_errno(HERD_ESYS, err, "cannot create the line queue's descriptor");
	}
	q->max = max_bytes;
	pthread_mutex_init(&q->mu, NULL);
	herd__net_cond_init(&q->cv);
	*out = q;
	return HERD_OK;
}

/* A free slot at the back of the ring (mu held); false when memory ran out. */
static bool ring_room(herd_job_lines *q)
{
	size_t cap = q->cap > 0 ? 2 * q->cap : RING_FIRST;
	herd_job_line **ring;

	if (q->n < q->cap)
		return true;
	ring = malloc(cap * sizeof(*ring));
	if (ring == NULL)
		return false;
	for (size_t i = 0; i < q->n; i++)
		ring[i] = q->ring[(q->head + i) % q->cap];
	free(q->ring);
	q->ring = ring;
	q->cap = cap;
	q->head = 0;
	return true;
}

/* One allocation: the line, its text and NUL, then its host. */
static herd_job_line *line_new(int rank, const char *host, herd_job_stream stream,
			       const char *text, size_t len)
{
	size_t hlen = host != NULL ? strlen(host) + 1 : 0;
	herd_job_line *l = malloc(sizeof(*l) + len + 1 + hlen);

	if (l == NULL)
		return NULL;
	l->rank = rank;
	l->stream = stream;
	l->len = len;
	memcpy(l->text, text, len);
	l->text[len] = '\0';
	l->host = NULL;
	if (host != NULL)
		l->host = memcpy(l->text + len + 1, host, hlen);
	return l;
}

bool herd_job_lines_push(herd_job_lines *q, int rank, const char *host, herd_job_stream stream,
			 const char *text, size_t len)
{
	herd_job_line *l = NULL;

	if (q == NULL)
		return false;
	pthread_mutex_lock(&q->mu);
	if (!q->closed && len <= q->max - q->bytes && ring_room(q))
		l = line_new(rank, host, stream, text, len);
	if (l == NULL) {
		q->dropped++;
		q->dropped_bytes += len;
		pthread_mutex_unlock(&q->mu);
		return false;
	}
	q->ring[(q->head + q->n) % q->cap] = l;
	if (q->n++ == 0)
		(void)eventfd_write(q->efd, 1);
	q->bytes += len;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return true;
}

herd_status herd_job_lines_pop(herd_job_lines *q, int timeout_ms, herd_job_line **out)
{
	int64_t deadline = herd__net_deadline(timeout_ms);
	herd_status st = HERD_OK;
	herd_job_line *l;

	if (out != NULL)
		*out = NULL;
	if (q == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_job_lines_pop: %s is NULL",
				   q == NULL ? "q" : "out");
	HERD_CHECK(herd__check_timeout("herd_job_lines_pop", timeout_ms));
	pthread_mutex_lock(&q->mu);
	while (q->n == 0 && !q->closed) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&q->cv, &q->mu);
		} else if (herd__net_cond_wait_until(&q->cv, &q->mu, deadline) == ETIMEDOUT &&
			   q->n == 0 && !q->closed) {
			st = herd__error(HERD_ETIMEDOUT, "no line within %d ms",
					 timeout_ms);
			break;
		}
	}
	if (st == HERD_OK && q->closed)
		st = herd__error(HERD_ECLOSED, "the line queue is closed");
	if (st == HERD_OK) {
		l = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->bytes -= l->len;
		if (--q->n == 0) {
			eventfd_t v;

			(void)eventfd_read(q->efd, &v);
		}
		*out = l;
	}
	pthread_mutex_unlock(&q->mu);
	return st;
}

void herd_job_lines_close(herd_job_lines *q)
{
	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	if (!q->closed) {
		q->closed = true;
		if (q->n == 0)
			(void)eventfd_write(q->efd, 1);
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
}

int herd_job_lines_fd(const herd_job_lines *q)
{
	return q != NULL ? q->efd : -1;
}

void herd_job_lines_counts(const herd_job_lines *q, size_t *lines, size_t *bytes,
			   uint64_t *dropped, uint64_t *dropped_bytes)
{
	herd_job_lines *m = (herd_job_lines *)q;   /* the mutex, for a snapshot */
	size_t n = 0, b = 0;
	uint64_t d = 0, db = 0;

	if (m != NULL) {
		pthread_mutex_lock(&m->mu);
		n = m->n;
		b = m->bytes;
		d = m->dropped;
		db = m->dropped_bytes;
		pthread_mutex_unlock(&m->mu);
	}
	if (lines != NULL)
		*lines = n;
	if (bytes != NULL)
		*bytes = b;
	if (dropped != NULL)
		*dropped = d;
	if (dropped_bytes != NULL)
		*dropped_bytes = db;
}

void herd_job_lines_free(herd_job_lines *q)
{
	if (q == NULL)
		return;
	for (size_t i = 0; i < q->n; i++)
		free(q->ring[(q->head + i) % q->cap]);
	free(q->ring);
	close(q->efd);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

void herd_job_output_lines(void *userdata, int rank, const char *host, herd_job_stream stream,
			   const char *line, size_t len)
{
	(void)herd_job_lines_push((herd_job_lines *)userdata, rank, host, stream, line, len);
}
