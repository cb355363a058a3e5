/*
 * The direct allreduce of sdk/comm/transport/shm/direct.c (ranks of one host reading
 * each other's buffers and pushing or staging the results, and the small
 * allreduce through the shared boards), with real processes: exact
 * results at the sizes and shapes that matter to it (slices of unequal
 * and zero length, many chunks, in place, out of place and mixed, many
 * rounds through the staging slots, streaming stores, float16 widening,
 * AVG), and its failures: a rank killed in the middle of single-copy
 * transfers, mismatched calls, a rank that does not arrive, abort from
 * another thread.  test_comm_ops.c covers every dtype and operation
 * through the same path.
 */
#include <pthread.h>

#include "comm/transport/shm/shm.h"
#include "comm_harness.h"

typedef struct direct_args {
	char scope[64];
	size_t count;
	int victim;
	int kill_ms;            /* when the parent kills the victim */
	bool out_of_place;
} direct_args;

/* Element i of rank r's input: small integers, so every sum is exact. */
static float in_value(int r, size_t i)
{
	return (float)((i * 7 + (size_t)r * 3) % 61);
}

static float sum_value(int p, size_t i)
{
	float s = 0;

	for (int r = 0; r < p; r++)
		s += in_value(r, i);
	return s;
}

static size_t check_sums(const float *got, size_t n, int p)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++)
		if (got[i] != sum_value(p, i) && bad++ == 0)
			printf("     element %zu: %g, expected %g\n", i, got[i], sum_value(p, i));
	return bad;
}

/* ---- results -------------------------------------------------------------- */

/*
 * Every rank in place (the push), none, and only the even ranks, out of
 * place by the staging and by the push (which every rank must choose
 * alike); with the full chunk and with 4 KiB chunks, which go round the
 * staging slots hundreds of times.
 */
static void sums_rank(int rank, int size, void *arg)
{
	const direct_args *a = arg;
	/* 0..p-1 elements leave slices empty; 1024 floats fill a small slot,
	 * 1025 are the first large call; 3 MiB + 3 crosses chunks unevenly;
	 * 8 MiB + 20 bytes is written with streaming stores. */
	const size_t counts[] = { 1,   (size_t)size - 1, 255, 256, HERD__BOARD_SMALL / 4,
				  HERD__BOARD_SMALL / 4 + 1, 65536 + 3, (3u << 18) + 3,
				  (2u << 20) + 5 };
	const size_t chunks[] = { herd__direct_chunk_bytes, 4096 };
	herd_comm *comm = NULL;
	float *in = NULL, *out = NULL;
	size_t most = (2u << 20) + 5;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 30000));
	in = malloc(most * sizeof(float));
	out = malloc(most * sizeof(float));
	if (comm == NULL || in == NULL || out == NULL)
		goto out;
	CHECK(herd__comm_place(comm)->coll != NULL);
	/* Take the large path from the first byte past the small one. */
	herd__tune_coll_min = HERD__BOARD_SMALL + 1;
	for (size_t c = 0; c < 2; c++) {
		herd__direct_chunk_bytes = chunks[c];
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			size_t n = counts[k];

			if (n == 0)
				continue;
			/* 0, 3: none in place; 1: all; 2, 4: the even ranks; 3, 4: pushed */
			for (int mode = 0; mode < 5; mode++) {
				bool inplace = mode == 1 || ((mode == 2 || mode == 4) &&
							     rank % 2 == 0);

				herd__direct_push_max = mode >= 3 ? SIZE_MAX : 0;
				for (size_t i = 0; i < n; i++) {
					in[i] = in_value(rank, i);
					out[i] = -1;
				}
				CHECK_OK(herd_comm_allreduce(comm, in, inplace ? in : out, n,
							     HERD_FLOAT32, HERD_SUM));
				if (check_sums(inplace ? in : out, n, size) != 0) {
					CHECK(false);
					printf("     rank %d: %zu floats, chunk %zu, %s, %s\n", rank, n,
					       chunks[c], inplace ? "in place" : "out of place",
					       mode >= 3 ? "pushed" : "staged");
				}
			}
		}
	}
	herd__direct_chunk_bytes = chunks[0];
	/* float16 through float32, and AVG on integers: rounded once (staged,
	 * out of place: the push reduces the same way, in reduce_chunk_into). */
	herd__direct_push_max = 0;
	{
		const size_t n = 300000;
		uint16_t *h = malloc(n * sizeof(*h)), *hsum = malloc(n * sizeof(*hsum));
		int32_t *v = malloc(n * sizeof(*v)), *avg = malloc(n * sizeof(*avg));

		CHECK(h != NULL && hsum != NULL && v != NULL && avg != NULL);
		for (size_t i = 0; h != NULL && hsum != NULL && v != NULL && avg != NULL && i < n;
		     i++) {
			float f = in_value(rank, i) / 4.0f;

			herd__float_to_narrow(&h[i], &f, 1, HERD_FLOAT16);
			v[i] = (int32_t)(i % 1000) * size + rank;
			if (i + 1 < n)
				continue;
			CHECK_OK(herd_comm_allreduce(comm, h, hsum, n, HERD_FLOAT16, HERD_SUM));
			CHECK_OK(herd_comm_allreduce(comm, v, avg, n, HERD_INT32, HERD_AVG));
			for (size_t k = 0; k < n; k += 997) {
				float got;

				herd__narrow_to_float(&got, &hsum[k], 1, HERD_FLOAT16);
				CHECK(got == sum_value(size, k) / 4.0f);
				/* the sum of (k % 1000) * p + r over r, divided by p */
				CHECK_INT(avg[k], (int32_t)(k % 1000) * size + (size - 1) / 2);
			}
		}
		free(h);
		free(hsum);
		free(v);
		free(avg);
	}
out:
	free(in);
	free(out);
	herd_comm_free(comm);
}

static void test_comm_direct_allreduce_sums_exactly_at_every_shape(void)
{
	for (int p = 2; p <= 4; p++) {
		direct_args a = { 0 };

		harness_scope(a.scope, sizeof(a.scope), "dsums");
		CHECK_INT(run_ranks(p, sums_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
	}
}

/* Back-to-back small calls reuse the two slots of each board while peers
 * may still read them; many calls with changing values catch a slot
 * overwritten too early. */
static void small_rank(int rank, int size, void *arg)
{
	const direct_args *a = arg;
	herd_comm *comm = NULL;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 30000));
	if (comm == NULL)
		return;
	for (int64_t k = 0; k < 20000; k++) {
		int64_t v[3] = { k + rank, k * rank, 1 }, s[3];

		if (herd_comm_allreduce(comm, v, s, 3, HERD_INT64, HERD_SUM) != HERD_OK ||
		    s[0] != k * size + (int64_t)size * (size - 1) / 2 ||
		    s[1] != k * (int64_t)size * (size - 1) / 2 || s[2] != size) {
			CHECK(false);
			printf("     call %lld on rank %d: %lld %lld %lld\n", (long long)k, rank,
			       (long long)s[0], (long long)s[1], (long long)s[2]);
			break;
		}
	}
	herd_comm_free(comm);
}

static void test_comm_direct_small_allreduce_reuses_slots_safely(void)
{
	for (int p = 2; p <= 3; p++) {
		direct_args a = { 0 };

		harness_scope(a.scope, sizeof(a.scope), "dsmall");
		CHECK_INT(run_ranks(p, small_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
	}
}

/* ---- failures ------------------------------------------------------------- */

static int64_t kill_time_ms;

static void killed_rank(int rank, int size, void *arg)
{
	const direct_args *a = arg;
	float *buf = malloc(a->count * sizeof(float));
	float *res = a->out_of_place ? malloc(a->count * sizeof(float)) : buf;
	herd_comm *comm = NULL;
	herd_status st = HERD_OK;
	int64_t until;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 30000));
	if (comm == NULL || buf == NULL || res == NULL)
		goto out;
	for (size_t i = 0; i < a->count; i++)
		buf[i] = 1;
	until = now_ms() + 20000;
	while (st == HERD_OK && now_ms() < until)
		st = herd_comm_allreduce(comm, buf, res, a->count, HERD_FLOAT32, HERD_MAX);
	report_status(rank, st, now_ms(), 0);
	CHECK_ERR(st, HERD_EPEER, "rank 2 (host");
out:
	herd_comm_free(comm);
	if (res != buf)
		free(res);
	free(buf);
}

static void kill_victim(const pid_t *pids, int size, void *arg)
{
	const direct_args *a = arg;

	(void)size;
	sleep_ms(a->kill_ms);
	kill_time_ms = now_ms();
	kill(pids[a->victim], SIGKILL);
}

static void test_comm_direct_allreduce_peer_killed_mid_transfer_gives_epeer_within_2s(void)
{
	/* 32 MiB: the survivors are in single-copy transfers most of the time
	 * (killed once every rank has been calling for a while), in place
	 * (pushing into the peers) and out of place (copying out of their
	 * staging slots, or waiting for them); 3 floats: in the small
	 * allreduce's flag waits. */
	const size_t counts[] = { (size_t)8 << 20, (size_t)8 << 20, 3 };
	const int kill_ms[] = { 3000, 2000, 700 };
	const bool oop[] = { false, true, false };

	for (size_t k = 0; k < 3; k++) {
		direct_args a = { .count = counts[k], .victim = 2, .kill_ms = kill_ms[k],
				  .out_of_place = oop[k] };
		rank_result res[4];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "dkilled");
		CHECK_INT(run_ranks(4, killed_rank, &a, 30000, kill_victim, &a, 1u << 2, res), 0);
		for (int r = 0; r < 4; r++) {
			if (r == a.victim)
				continue;
			CHECK(res[r].valid);
			CHECK_INT(res[r].status, HERD_EPEER);
			CHECK(res[r].t_ms - kill_time_ms < 2000);
			printf("     %zu floats: rank %d returned %lld ms after the kill: %s\n",
			       a.count, r, (long long)(res[r].t_ms - kill_time_ms), res[r].msg);
		}
	}
}

static void mismatch_rank(int rank, int size, void *arg)
{
	const direct_args *a = arg;
	herd_comm *comm = NULL;
	float *buf = calloc(2 * a->count, sizeof(float));
	herd_status st;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 10000));
	if (comm == NULL || buf == NULL)
		goto out;
	if (rank == 0)
		st = herd_comm_allreduce(comm, buf, buf, 2 * a->count, HERD_FLOAT32, HERD_SUM);
	else if (rank == 1)
		st = herd_comm_broadcast(comm, buf, buf, a->count, HERD_FLOAT32, 1);
	else
		st = herd_comm_allreduce(comm, buf, buf, a->count, HERD_FLOAT32, HERD_SUM);
	report_status(rank, st, now_ms(), 0);
	/* Whoever sees it first names both calls; the others hear of it (the
	 * root of the broadcast may finish its own call first). */
	if (rank != 1)
		CHECK_INT(st, HERD_EMISMATCH);
	CHECK_ERR(herd_comm_allreduce(comm, buf, buf, 4, HERD_FLOAT32, HERD_SUM), HERD_EMISMATCH,
		  "mismatched calls");
out:
	free(buf);
	herd_comm_free(comm);
}

static void test_comm_direct_allreduce_mismatched_calls_give_emismatch(void)
{
	const size_t counts[] = { 1u << 20, 2 };

	for (size_t k = 0; k < 2; k++) {
		direct_args a = { .count = counts[k] };
		rank_result res[3];
		bool named = false;

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "dmismatch");
		CHECK_INT(run_ranks(3, mismatch_rank, &a, 30000, NULL, NULL, 0, res), 0);
		for (int r = 0; r < 3; r++)
			named = named || (strstr(res[r].msg, "allreduce float32 sum") != NULL &&
					  strstr(res[r].msg, "mismatched calls") != NULL);
		CHECK(named);
		printf("     %zu floats: rank 0 says: %s\n", a.count, res[0].msg);
	}
}

static void late_rank(int rank, int size, void *arg)
{
	const direct_args *a = arg;
	herd_comm *comm = NULL;
	float *buf = calloc(a->count, sizeof(float));
	herd_status st;
	int64_t t0;

	setenv("HERD_TIMEOUT", "1", 1);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 0));
	if (comm == NULL || buf == NULL)
		goto out;
	CHECK_OK(herd_comm_allreduce(comm, buf, buf, a->count, HERD_FLOAT32, HERD_SUM));
	if (rank == 1)
		sleep_ms(2500);
	t0 = now_ms();
	st = herd_comm_allreduce(comm, buf, buf, a->count, HERD_FLOAT32, HERD_SUM);
	CHECK_INT(st, HERD_ETIMEDOUT);
	if (rank != 1) {
		CHECK(now_ms() - t0 < 2500);
		CHECK_ERR(st, HERD_ETIMEDOUT, "allreduce #2 timed out after 1.");
		CHECK_ERR(st, HERD_ETIMEDOUT, "rank 1 (host");
	}
out:
	free(buf);
	herd_comm_free(comm);
}

static void test_comm_direct_allreduce_rank_that_does_not_call_gives_etimedout(void)
{
	const size_t counts[] = { 1u << 20, 2 };

	for (size_t k = 0; k < 2; k++) {
		direct_args a = { .count = counts[k] };

		harness_scope(a.scope, sizeof(a.scope), "dlate");
		CHECK_INT(run_ranks(3, late_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

static void abort_rank(int rank, int size, void *arg)
{
	const direct_args *a = arg;
	herd_comm *comm = NULL;
	float *buf = calloc(a->count, sizeof(float));

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 20000));
	if (comm == NULL || buf == NULL)
		goto out;
	CHECK_OK(herd_comm_allreduce(comm, buf, buf, a->count, HERD_FLOAT32, HERD_SUM));
	if (rank == 0) {
		abort_ctx c = { comm, 0 };
		pthread_t t;
		herd_status st;
		int64_t t_ret;

		pthread_create(&t, NULL, abort_later, &c);
		st = herd_comm_allreduce(comm, buf, buf, a->count, HERD_FLOAT32, HERD_SUM);
		t_ret = now_ms();
		pthread_join(t, NULL);
		CHECK_ERR(st, HERD_EABORTED, "aborted on rank 0");
		CHECK(t_ret - c.t_abort < 100);
	} else {
		sleep_ms(1000);
		CHECK_ERR(herd_comm_allreduce(comm, buf, buf, a->count, HERD_FLOAT32, HERD_SUM),
			  HERD_EPEER, "rank 0 (host");
	}
out:
	free(buf);
	herd_comm_free(comm);
}

static void test_comm_direct_allreduce_abort_from_another_thread_returns_within_100ms(void)
{
	const size_t counts[] = { 1u << 20, 2 };

	for (size_t k = 0; k < 2; k++) {
		direct_args a = { .count = counts[k] };

		harness_scope(a.scope, sizeof(a.scope), "dabort");
		CHECK_INT(run_ranks(2, abort_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

int main(void)
{
	harness_start();
	TEST_RUN(test_comm_direct_allreduce_sums_exactly_at_every_shape);
	TEST_RUN(test_comm_direct_small_allreduce_reuses_slots_safely);
	TEST_RUN(test_comm_direct_allreduce_peer_killed_mid_transfer_gives_epeer_within_2s);
	TEST_RUN(test_comm_direct_allreduce_mismatched_calls_give_emismatch);
	TEST_RUN(test_comm_direct_allreduce_rank_that_does_not_call_gives_etimedout);
	TEST_RUN(test_comm_direct_allreduce_abort_from_another_thread_returns_within_100ms);
	harness_stop();
	return TEST_DONE();
}
