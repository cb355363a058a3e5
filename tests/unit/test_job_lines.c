/*
 * tests/unit/test_job_lines.c - herd_job_lines, the bounded queue of output
 * lines: FIFO order across threads, the byte bound and its drop counts, pop
 * deadlines, close waking a waiting pop, the descriptor for a caller's poll,
 * what a line carries, and the queue as the output callback of a real job.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test.h"

#define PRODUCERS 4
#define PER_PRODUCER 2000

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the queue's descriptor is readable now. */
static bool fd_readable(const herd_job_lines *q)
{
	struct pollfd p = { .fd = herd_job_lines_fd(q), .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

struct producer {
	herd_job_lines *q;
	int rank;
	int refused;
};

/* Pushes "RANK SEQ" lines 0 .. PER_PRODUCER - 1 as rank. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	char text[32];

	for (int i = 0; i < PER_PRODUCER; i++) {
		int n = snprintf(text, sizeof(text), "%d %d", p->rank, i);

		if (!herd_job_lines_push(p->q, p->rank, "h", HERD_JOB_STDOUT, text, (size_t)n))
			p->refused++;
	}
	return NULL;
}

static void test_job_lines_keep_each_producers_order_across_threads(void)
{
	herd_job_lines *q;
	pthread_t threads[PRODUCERS];
	struct producer prod[PRODUCERS];
	int next[PRODUCERS] = { 0 }, got = 0, out_of_order = 0, garbled = 0;
	herd_job_line *l;

	CHECK_OK(herd_job_lines_create(&q, 1 << 20));
	for (int i = 0; i < PRODUCERS; i++) {
		prod[i] = (struct producer){ q, i, 0 };
		pthread_create(&threads[i], NULL, produce, &prod[i]);
	}
	while (got < PRODUCERS * PER_PRODUCER &&
	       herd_job_lines_pop(q, 10000, &l) == HERD_OK) {
		int rank = -1, seq = -1;

		if (sscanf(l->text, "%d %d", &rank, &seq) != 2 || rank != l->rank || rank < 0 ||
		    rank >= PRODUCERS)
			garbled++;
		else if (seq != next[rank]++)
			out_of_order++;
		herd_free(l);
		got++;
	}
	for (int i = 0; i < PRODUCERS; i++) {
		pthread_join(threads[i], NULL);
		CHECK_INT(prod[i].refused, 0);
		CHECK_INT(next[i], PER_PRODUCER);
	}
	CHECK_INT(got, PRODUCERS * PER_PRODUCER);
	CHECK_INT(garbled, 0);
	CHECK_INT(out_of_order, 0);
	CHECK_ERR(herd_job_lines_pop(q, 0, &l), HERD_ETIMEDOUT, "no line within 0 ms");
	CHECK(l == NULL);
	herd_job_lines_free(q);
}

static void test_job_lines_drop_what_passes_the_byte_bound_and_count_it(void)
{
	herd_job_lines *q;
	herd_job_line *l;
	size_t lines, bytes;
	uint64_t dropped, dropped_bytes;

	CHECK_OK(herd_job_lines_create(&q, 10));
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "12345", 5));
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "6789", 4));
	CHECK(!herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "ab", 2));   /* 11 > 10 */
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "x", 1));     /* exactly 10 */
	CHECK(!herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "y", 1));
	CHECK(!herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "0123456789a", 11));
	herd_job_lines_counts(q, &lines, &bytes, &dropped, &dropped_bytes);
	CHECK_INT(lines, 3);
	CHECK_INT(bytes, 10);
	CHECK_INT(dropped, 3);
	CHECK_INT(dropped_bytes, 14);

	/* A pop makes room again; the drops stay counted. */
	CHECK_OK(herd_job_lines_pop(q, 0, &l));
	CHECK_STR(l->text, "12345");
	herd_free(l);
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "abcde", 5));
	herd_job_lines_counts(q, &lines, &bytes, &dropped, &dropped_bytes);
	CHECK_INT(lines, 3);
	CHECK_INT(bytes, 10);
	CHECK_INT(dropped, 3);
	CHECK_INT(dropped_bytes, 14);

	/* Closed: every push drops, and nothing more is handed out. */
	herd_job_lines_close(q);
	CHECK(!herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "z", 1));
	CHECK_ERR(herd_job_lines_pop(q, 0, &l), HERD_ECLOSED, "closed");
	herd_job_lines_counts(q, &lines, NULL, &dropped, NULL);
	CHECK_INT(lines, 3);
	CHECK_INT(dropped, 4);
	herd_job_lines_free(q);   /* with the 3 lines still in it */

	herd_job_lines_counts(NULL, &lines, &bytes, &dropped, &dropped_bytes);
	CHECK_INT(lines + bytes + dropped + dropped_bytes, 0);
	CHECK_ERR(herd_job_lines_create(&q, 0), HERD_EINVAL, "max_bytes is 0");
	CHECK(q == NULL);
	CHECK(!herd_job_lines_push(NULL, 0, NULL, HERD_JOB_STDOUT, "a", 1));
	herd_job_lines_free(NULL);
	herd_job_lines_close(NULL);
}

static void test_job_lines_pop_times_out_at_its_deadline(void)
{
	herd_job_lines *q;
	herd_job_line *l = NULL;
	int64_t t0;

	CHECK_OK(herd_job_lines_create(&q, 100));
	t0 = now_ms();
	CHECK_ERR(herd_job_lines_pop(q, 150, &l), HERD_ETIMEDOUT, "no line within 150 ms");
	CHECK(now_ms() - t0 >= 150);
	CHECK(now_ms() - t0 < 5000);
	CHECK(l == NULL);
	t0 = now_ms();
	CHECK_ERR(herd_job_lines_pop(q, 0, &l), HERD_ETIMEDOUT, "no line within 0 ms");
	CHECK(now_ms() - t0 < 1000);
	CHECK_ERR(herd_job_lines_pop(q, -3, &l), HERD_EINVAL, "timeout of -3 ms");
	CHECK_ERR(herd_job_lines_pop(q, 0, NULL), HERD_EINVAL, "out is NULL");
	CHECK_ERR(herd_job_lines_pop(NULL, 0, &l), HERD_EINVAL, "q is NULL");
	herd_job_lines_free(q);
}

struct waiter {
	herd_job_lines *q;
	herd_status st;
	herd_job_line *line;
	int64_t waited_ms;
};

static void *pop_waiting(void *arg)
{
	struct waiter *w = arg;
	int64_t t0 = now_ms();

	w->st = herd_job_lines_pop(w->q, 30000, &w->line);
	w->waited_ms = now_ms() - t0;
	return NULL;
}

static void test_job_lines_close_wakes_a_pop_waiting_in_another_thread(void)
{
	struct waiter w = { 0 }, w2 = { 0 };
	pthread_t t, t2;

	CHECK_OK(herd_job_lines_create(&w.q, 100));
	w2.q = w.q;
	pthread_create(&t, NULL, pop_waiting, &w);
	pthread_create(&t2, NULL, pop_waiting, &w2);
	usleep(200 * 1000);
	herd_job_lines_close(w.q);
	herd_job_lines_close(w.q);   /* idempotent */
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	CHECK_INT(w.st, HERD_ECLOSED);
	CHECK_INT(w2.st, HERD_ECLOSED);
	CHECK(w.line == NULL && w2.line == NULL);
	CHECK(w.waited_ms >= 150 && w.waited_ms < 10000);
	CHECK(w2.waited_ms >= 150 && w2.waited_ms < 10000);
	herd_job_lines_free(w.q);
}

static void test_job_lines_fd_is_readable_while_a_line_waits(void)
{
	herd_job_lines *q;
	herd_job_line *l;

	CHECK_OK(herd_job_lines_create(&q, 100));
	CHECK(herd_job_lines_fd(q) >= 0);
	CHECK_INT(herd_job_lines_fd(NULL), -1);
	CHECK(!fd_readable(q));
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "a", 1));
	CHECK(fd_readable(q));
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "b", 1));
	CHECK_OK(herd_job_lines_pop(q, 0, &l));
	herd_free(l);
	CHECK(fd_readable(q));   /* "b" still waits */
	CHECK_OK(herd_job_lines_pop(q, 0, &l));
	CHECK_STR(l->text, "b");
	herd_free(l);
	CHECK(!fd_readable(q));
	/* A dropped line makes nothing readable. */
	CHECK(!herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "too long", 101));
	CHECK(!fd_readable(q));
	herd_job_lines_close(q);
	CHECK(fd_readable(q));   /* so that a poller finds out */
	herd_job_lines_free(q);
}

static void test_job_lines_carry_rank_host_stream_and_text(void)
{
	herd_job_lines *q;
	herd_job_line *l;
	static const char text[] = "one\0two";   /* a NUL inside is kept */

	CHECK_OK(herd_job_lines_create(&q, 1000));
	CHECK(herd_job_lines_push(q, 7, "node07", HERD_JOB_STDERR, text, sizeof(text) - 1));
	CHECK(herd_job_lines_push(q, 0, NULL, HERD_JOB_STDOUT, "", 0));
	CHECK_OK(herd_job_lines_pop(q, HERD_TIMEOUT_DEFAULT, &l));
	CHECK_INT(l->rank, 7);
	CHECK_STR(l->host, "node07");
	CHECK_INT(l->stream, HERD_JOB_STDERR);
	CHECK_INT(l->len, 7);
	CHECK(memcmp(l->text, text, 7) == 0);
	CHECK_INT(l->text[7], '\0');
	/* The host lives in the line's own allocation. */
	CHECK(l->host > l->text && l->host < (const char *)l + sizeof(*l) + l->len + 1 + 7);
	herd_free(l);
	CHECK_OK(herd_job_lines_pop(q, HERD_TIMEOUT_NONE, &l));
	CHECK_INT(l->rank, 0);
	CHECK(l->host == NULL);
	CHECK_INT(l->stream, HERD_JOB_STDOUT);
	CHECK_INT(l->len, 0);
	CHECK_STR(l->text, "");
	herd_free(l);
	herd_job_lines_free(q);
}

static void test_job_lines_as_the_output_callback_of_a_local_job(void)
{
	const char *argv[] = { "sh", "-c", "echo a; echo b >&2", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	herd_job_lines *q;
	herd_job *job = NULL;
	herd_job_rank_status rs;
	herd_job_line *l;
	int status = -1, out = 0, err = 0;

	CHECK_OK(herd_job_lines_create(&q, 1 << 20));
	spec.argv = argv;
	spec.nranks = 1;
	spec.output = herd_job_output_lines;
	spec.output_userdata = q;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL) {
		herd_job_lines_free(q);
		return;
	}
	CHECK_OK(herd_job_wait(job, 30000, &status));
	CHECK_INT(status, 0);
	CHECK_OK(herd_job_rank(job, 0, &rs));
	/* stdout and stderr are read apart: each keeps its own order only. */
	for (int i = 0; i < 2; i++) {
		CHECK_OK(herd_job_lines_pop(q, 5000, &l));
		if (l == NULL)
			break;
		CHECK_INT(l->rank, 0);
		CHECK_STR(l->host, rs.host);
		if (l->stream == HERD_JOB_STDOUT) {
			out++;
			CHECK_STR(l->text, "a");
		} else {
			err++;
			CHECK_INT(l->stream, HERD_JOB_STDERR);
			CHECK_STR(l->text, "b");
		}
		CHECK_INT(l->len, 1);
		herd_free(l);
	}
	CHECK_INT(out, 1);
	CHECK_INT(err, 1);
	CHECK_ERR(herd_job_lines_pop(q, 0, &l), HERD_ETIMEDOUT, "no line");
	herd_job_free(job);
	herd_job_lines_free(q);
}

int main(void)
{
	TEST_RUN(test_job_lines_keep_each_producers_order_across_threads);
	TEST_RUN(test_job_lines_drop_what_passes_the_byte_bound_and_count_it);
	TEST_RUN(test_job_lines_pop_times_out_at_its_deadline);
	TEST_RUN(test_job_lines_close_wakes_a_pop_waiting_in_another_thread);
	TEST_RUN(test_job_lines_fd_is_readable_while_a_line_waits);
	TEST_RUN(test_job_lines_carry_rank_host_stream_and_text);
	TEST_RUN(test_job_lines_as_the_output_callback_of_a_local_job);
	return TEST_DONE();
}
