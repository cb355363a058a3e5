/*
 * The public collectives' contract beyond the results: bad arguments give
 * HERD_EINVAL naming the call, the argument and its value (and leave the
 * communicator working), NULL buffers are fine with count 0 and where a
 * buffer is ignored, nonblocking calls run and complete in call order,
 * calls that disagree between ranks fail instead of hanging.  How fast
 * allreduce is, is bench/compare.sh's (herd bench allreduce).
 */
#include <signal.h>

#include "comm_ops_cases.h"

static ops_session session(const char *name)
{
	ops_session s = { .transport = "auto", .algo = "auto" };

	harness_scope(s.scope, sizeof(s.scope), name);
	return s;
}

static void test_comm_ops_null_comm_is_einval_for_every_call(void)
{
	float a[4] = { 0 }, b[4];
	herd_comm_request *req = NULL;

	CHECK_ERR(herd_comm_allreduce(NULL, a, b, 4, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: comm is NULL");
	CHECK_ERR(herd_comm_reduce(NULL, a, b, 4, HERD_FLOAT32, HERD_SUM, 0), HERD_EINVAL,
		  "herd_comm_reduce: comm is NULL");
	CHECK_ERR(herd_comm_broadcast(NULL, a, b, 4, HERD_FLOAT32, 0), HERD_EINVAL,
		  "herd_comm_broadcast: comm is NULL");
	CHECK_ERR(herd_comm_allgather(NULL, a, b, 1, HERD_FLOAT32), HERD_EINVAL,
		  "herd_comm_allgather: comm is NULL");
	CHECK_ERR(herd_comm_reduce_scatter(NULL, a, b, 1, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_reduce_scatter: comm is NULL");
	CHECK_ERR(herd_comm_alltoall(NULL, a, b, 1, HERD_FLOAT32), HERD_EINVAL,
		  "herd_comm_alltoall: comm is NULL");
	CHECK_ERR(herd_comm_gather(NULL, a, b, 1, HERD_FLOAT32, 0), HERD_EINVAL,
		  "herd_comm_gather: comm is NULL");
	CHECK_ERR(herd_comm_scatter(NULL, a, b, 1, HERD_FLOAT32, 0), HERD_EINVAL,
		  "herd_comm_scatter: comm is NULL");
	CHECK_ERR(herd_comm_send(NULL, a, 4, HERD_FLOAT32, 0), HERD_EINVAL,
		  "herd_comm_send: comm is NULL");
	CHECK_ERR(herd_comm_recv(NULL, b, 4, HERD_FLOAT32, 0), HERD_EINVAL,
		  "herd_comm_recv: comm is NULL");
	CHECK_ERR(herd_comm_sendrecv(NULL, a, 4, 0, b, 4, 0, HERD_FLOAT32), HERD_EINVAL,
		  "herd_comm_sendrecv: comm is NULL");
	CHECK_ERR(herd_comm_barrier(NULL), HERD_EINVAL, "herd_comm_barrier: comm is NULL");
	CHECK_ERR(herd_comm_iallreduce(NULL, a, b, 4, HERD_FLOAT32, HERD_SUM, &req), HERD_EINVAL,
		  "herd_comm_iallreduce: comm is NULL");
	CHECK(req == NULL);
	CHECK_ERR(herd_comm_ireduce(NULL, a, b, 4, HERD_FLOAT32, HERD_SUM, 0, &req), HERD_EINVAL,
		  "herd_comm_ireduce: comm is NULL");
	CHECK_ERR(herd_comm_ibroadcast(NULL, a, b, 4, HERD_FLOAT32, 0, &req), HERD_EINVAL,
		  "herd_comm_ibroadcast: comm is NULL");
	CHECK_ERR(herd_comm_iallgather(NULL, a, b, 1, HERD_FLOAT32, &req), HERD_EINVAL,
		  "herd_comm_iallgather: comm is NULL");
	CHECK_ERR(herd_comm_ireduce_scatter(NULL, a, b, 1, HERD_FLOAT32, HERD_SUM, &req),
		  HERD_EINVAL, "herd_comm_ireduce_scatter: comm is NULL");
	CHECK_ERR(herd_comm_ialltoall(NULL, a, b, 1, HERD_FLOAT32, &req), HERD_EINVAL,
		  "herd_comm_ialltoall: comm is NULL");
	CHECK_ERR(herd_comm_igather(NULL, a, b, 1, HERD_FLOAT32, 0, &req), HERD_EINVAL,
		  "herd_comm_igather: comm is NULL");
	CHECK_ERR(herd_comm_iscatter(NULL, a, b, 1, HERD_FLOAT32, 0, &req), HERD_EINVAL,
		  "herd_comm_iscatter: comm is NULL");
	CHECK_ERR(herd_comm_ibarrier(NULL, &req), HERD_EINVAL, "herd_comm_ibarrier: comm is NULL");
	CHECK(req == NULL);
}

/* Both ranks make the same bad calls (all refused before any message),
 * then good ones. */
static void bad_args_rank(int rank, int size, void *arg)
{
	ops_session *s = arg;
	herd_comm *c = NULL;
	float a[8] = { 0 }, b[8] = { 0 };
	herd_comm_request *req = (herd_comm_request *)&req;
	int other = 1 - rank;

	CHECK_OK(ops_comm(&c, s, rank, size));
	if (c == NULL)
		return;
	/* types, reductions */
	CHECK_ERR(herd_comm_allreduce(c, a, b, 8, (herd_dtype)42, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: dtype 42 is not a herd_dtype");
	CHECK_ERR(herd_comm_allreduce(c, a, b, 8, (herd_dtype)-1, HERD_SUM), HERD_EINVAL,
		  "dtype -1");
	CHECK_ERR(herd_comm_allreduce(c, a, b, 8, HERD_FLOAT32, (herd_redop)9), HERD_EINVAL,
		  "herd_comm_allreduce: op 9 is not a herd_redop");
	CHECK_ERR(herd_comm_reduce_scatter(c, a, b, 4, HERD_FLOAT32, HERD_REDOP_COUNT), HERD_EINVAL,
		  "herd_comm_reduce_scatter: op 5");
	CHECK_ERR(herd_comm_broadcast(c, a, b, 8, HERD_DTYPE_COUNT, 0), HERD_EINVAL,
		  "herd_comm_broadcast: dtype 12 is not a herd_dtype (expected 0..11, "
		  "int8..float8_e5m2)");
	/* NULL buffers with elements */
	CHECK_ERR(herd_comm_allreduce(c, NULL, b, 8, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: sendbuf is NULL with count 8");
	CHECK_ERR(herd_comm_allreduce(c, a, NULL, 8, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: recvbuf is NULL with count 8");
	CHECK_ERR(herd_comm_allgather(c, a, NULL, 1, HERD_INT8), HERD_EINVAL, "recvbuf is NULL");
	CHECK_ERR(herd_comm_alltoall(c, NULL, b, 1, HERD_INT8), HERD_EINVAL, "sendbuf is NULL");
	CHECK_ERR(herd_comm_send(c, NULL, 3, HERD_INT8, other), HERD_EINVAL,
		  "herd_comm_send: buf is NULL with count 3");
	CHECK_ERR(herd_comm_broadcast(c, a, NULL, 8, HERD_FLOAT32, 0), HERD_EINVAL,
		  "herd_comm_broadcast: recvbuf is NULL");
	/* counts whose bytes do not fit */
	CHECK_ERR(herd_comm_allreduce(c, a, b, SIZE_MAX / 2, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: count 9223372036854775807 of float32 is more than PTRDIFF_MAX");
	CHECK_ERR(herd_comm_allreduce(c, a, b, SIZE_MAX, HERD_INT8, HERD_SUM), HERD_EINVAL,
		  "more than PTRDIFF_MAX");
	CHECK_ERR(herd_comm_allgather(c, a, b, (SIZE_MAX >> 3) / 2 + 1, HERD_FLOAT64), HERD_EINVAL,
		  "of float64 times 2 ranks is more than PTRDIFF_MAX");
	CHECK_ERR(herd_comm_sendrecv(c, a, 1, other, b, SIZE_MAX / 4, other, HERD_FLOAT32),
		  HERD_EINVAL, "herd_comm_sendrecv: recvcount");
	/* roots and peers */
	CHECK_ERR(herd_comm_reduce(c, a, b, 8, HERD_FLOAT32, HERD_SUM, 2), HERD_EINVAL,
		  "herd_comm_reduce: root 2 is out of range for a communicator of 2 ranks");
	CHECK_ERR(herd_comm_broadcast(c, a, b, 8, HERD_FLOAT32, -1), HERD_EINVAL,
		  "herd_comm_broadcast: root -1 is out of range");
	CHECK_ERR(herd_comm_gather(c, a, b, 4, HERD_FLOAT32, 7), HERD_EINVAL,
		  "herd_comm_gather: root 7");
	CHECK_ERR(herd_comm_scatter(c, a, b, 4, HERD_FLOAT32, 1000), HERD_EINVAL,
		  "herd_comm_scatter: root 1000");
	CHECK_ERR(herd_comm_send(c, a, 8, HERD_FLOAT32, 2), HERD_EINVAL,
		  "herd_comm_send: peer 2 is out of range");
	CHECK_ERR(herd_comm_recv(c, b, 8, HERD_FLOAT32, -3), HERD_EINVAL,
		  "herd_comm_recv: peer -3 is out of range");
	CHECK_ERR(herd_comm_send(c, a, 8, HERD_FLOAT32, rank), HERD_EINVAL,
		  "is the calling rank itself");
	CHECK_ERR(herd_comm_recv(c, b, 8, HERD_FLOAT32, rank), HERD_EINVAL,
		  "is the calling rank itself");
	CHECK_ERR(herd_comm_sendrecv(c, a, 8, 5, b, 8, other, HERD_FLOAT32), HERD_EINVAL,
		  "herd_comm_sendrecv: dst 5");
	CHECK_ERR(herd_comm_sendrecv(c, a, 8, other, b, 8, -1, HERD_FLOAT32), HERD_EINVAL,
		  "herd_comm_sendrecv: src -1");
	CHECK_ERR(herd_comm_sendrecv(c, a, 8, rank, b, 8, other, HERD_FLOAT32), HERD_EINVAL,
		  "must also be received from itself");
	CHECK_ERR(herd_comm_sendrecv(c, a, 8, rank, b, 4, rank, HERD_FLOAT32), HERD_EINVAL,
		  "sendcount 8 and recvcount 4 differ");
	/* overlaps other than the in-place forms */
	CHECK_ERR(herd_comm_allreduce(c, a, a + 1, 4, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: sendbuf and recvbuf overlap");
	CHECK_ERR(herd_comm_allgather(c, b + 1, b, 4, HERD_FLOAT32), HERD_EINVAL,
		  "sendbuf == recvbuf + rank * count");
	CHECK_ERR(herd_comm_reduce_scatter(c, b, b + 1, 4, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "recvbuf == sendbuf + rank * count");
	CHECK_ERR(herd_comm_alltoall(c, a, a, 4, HERD_FLOAT32), HERD_EINVAL,
		  "alltoall has no in-place form");
	CHECK_ERR(herd_comm_sendrecv(c, a, 4, other, a + 2, 4, other, HERD_FLOAT32), HERD_EINVAL,
		  "overlap");
	if (rank == 0) {
		CHECK_ERR(herd_comm_reduce(c, a, a + 2, 4, HERD_FLOAT32, HERD_SUM, 0), HERD_EINVAL,
			  "herd_comm_reduce: sendbuf and recvbuf overlap");
		CHECK_ERR(herd_comm_gather(c, b + 1, b, 4, HERD_FLOAT32, 0), HERD_EINVAL,
			  "herd_comm_gather: sendbuf and recvbuf overlap");
	}
	/* nonblocking forms: the same checks, and no request */
	CHECK_ERR(herd_comm_iallreduce(c, a, b, 8, HERD_FLOAT32, HERD_SUM, NULL), HERD_EINVAL,
		  "herd_comm_iallreduce: req is NULL");
	CHECK_ERR(herd_comm_iallreduce(c, a, b, 8, (herd_dtype)77, HERD_SUM, &req), HERD_EINVAL,
		  "herd_comm_iallreduce: dtype 77");
	CHECK(req == NULL);
	CHECK_ERR(herd_comm_ireduce(c, a, b, 8, HERD_FLOAT32, HERD_SUM, 9, &req), HERD_EINVAL,
		  "herd_comm_ireduce: root 9");
	CHECK_ERR(herd_comm_ibroadcast(c, NULL, NULL, 8, HERD_FLOAT32, 0, &req), HERD_EINVAL,
		  "herd_comm_ibroadcast: recvbuf is NULL");
	CHECK_ERR(herd_comm_iallgather(c, a, b, 4, HERD_FLOAT32, NULL), HERD_EINVAL,
		  "herd_comm_iallgather: req is NULL");
	CHECK_ERR(herd_comm_ireduce_scatter(c, a, b, 4, HERD_FLOAT32, (herd_redop)-2, &req),
		  HERD_EINVAL, "herd_comm_ireduce_scatter: op -2");
	CHECK_ERR(herd_comm_ialltoall(c, a, a, 4, HERD_FLOAT32, &req), HERD_EINVAL,
		  "herd_comm_ialltoall: sendbuf and recvbuf overlap");
	CHECK_ERR(herd_comm_igather(c, a, b, 4, HERD_FLOAT32, 2, &req), HERD_EINVAL,
		  "herd_comm_igather: root 2");
	CHECK_ERR(herd_comm_iscatter(c, a, b, 4, HERD_FLOAT32, -1, &req), HERD_EINVAL,
		  "herd_comm_iscatter: root -1");
	CHECK_ERR(herd_comm_ibarrier(c, NULL), HERD_EINVAL, "herd_comm_ibarrier: req is NULL");
	CHECK(req == NULL);

	/* The communicator still works, and NULL is fine with count 0 and
	 * where a buffer is ignored. */
	ops_allreduce(c, HERD_FLOAT32, HERD_SUM, 8, false, "after bad calls");
	CHECK_OK(herd_comm_allreduce(c, NULL, NULL, 0, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_allgather(c, NULL, NULL, 0, HERD_INT64));
	if (rank == 0) {
		CHECK_OK(herd_comm_send(c, NULL, 0, HERD_INT8, other));
		CHECK_OK(herd_comm_recv(c, NULL, 0, HERD_INT8, other));
	} else {
		CHECK_OK(herd_comm_recv(c, NULL, 0, HERD_INT8, other));
		CHECK_OK(herd_comm_send(c, NULL, 0, HERD_INT8, other));
	}
	ops_fill(a, rank, 0, 8, HERD_FLOAT32, HERD_SUM);
	CHECK_OK(herd_comm_reduce(c, a, rank == 1 ? b : NULL, 8, HERD_FLOAT32, HERD_SUM, 1));
	if (rank == 1)
		OPS_VERIFY("reduce with NULL recvbuf off the root", b, 8, HERD_FLOAT32,
			   ops_expected(2, i, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_broadcast(c, rank == 0 ? a : NULL, b, 8, HERD_FLOAT32, 0));
	OPS_VERIFY("broadcast with NULL sendbuf off the root", b, 8, HERD_FLOAT32,
		   (double)ops_input(0, i, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_scatter(c, rank == 0 ? a : NULL, b, 4, HERD_FLOAT32, 0));
	OPS_VERIFY("scatter with NULL sendbuf off the root", b, 4, HERD_FLOAT32,
		   (double)ops_input(0, (size_t)rank * 4 + i, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_gather(c, a, rank == 1 ? b : NULL, 4, HERD_FLOAT32, 1));
	if (rank == 1)
		OPS_VERIFY("gather with NULL recvbuf off the root", b, 8, HERD_FLOAT32,
			   (double)ops_input((int)(i / 4), i % 4, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_finalize(c));
	herd_comm_free(c);
}

static void test_comm_ops_bad_arguments_are_einval_and_harmless(void)
{
	ops_session s = session("badargs");

	CHECK_INT(run_ranks(2, bad_args_rank, &s, 60000, NULL, NULL, 0, NULL), 0);
}

/* Ten nonblocking calls of different kinds, then a wait on the last: the
 * others must be complete by then, as calls run in call order. */
static void nonblocking_rank(int rank, int size, void *arg)
{
	ops_session *s = arg;
	enum { N = 1009, NREQ = 10, BIG = 300000 };
	herd_comm *c = NULL;
	herd_comm_request *req[NREQ];
	float *ar_in = ops_alloc(N * 4), *ar_out = ops_alloc(N * 4);
	int32_t *bc = ops_alloc(BIG * 4);
	double *rs_in = ops_alloc((size_t)size * N * 8), *rs_out = ops_alloc(N * 8);
	int64_t *ag_out = ops_alloc((size_t)size * N * 8), *ag_in = ops_alloc(N * 8);
	uint8_t *a2a_in = ops_alloc((size_t)size * N), *a2a_out = ops_alloc((size_t)size * N);
	uint16_t *red = ops_alloc(N * 2), *red_out = ops_alloc(N * 2);
	float *big_in = ops_alloc(BIG * 4), *big_out = ops_alloc(BIG * 4);
	float *ga_out = ops_alloc((size_t)size * N * 4), *sc_out = ops_alloc(N * 4);
	int done = 0;
	bool last;

	CHECK_OK(ops_comm(&c, s, rank, size));
	if (c == NULL)
		return;
	ops_fill(ar_in, rank, 0, N, HERD_FLOAT32, HERD_SUM);
	if (rank == 0)
		ops_fill(bc, 0, 0, BIG, HERD_INT32, HERD_SUM);
	ops_fill(rs_in, rank, 0, (size_t)size * N, HERD_FLOAT64, HERD_MAX);
	ops_fill(ag_in, rank, 0, N, HERD_INT64, HERD_SUM);
	ops_fill(a2a_in, rank, 0, (size_t)size * N, HERD_UINT8, HERD_SUM);
	ops_fill(red, rank, 0, N, HERD_BFLOAT16, HERD_SUM);
	ops_fill(big_in, rank, 0, BIG, HERD_FLOAT32, HERD_SUM);
	CHECK_OK(herd_comm_iallreduce(c, ar_in, ar_out, N, HERD_FLOAT32, HERD_SUM, &req[0]));
	CHECK_OK(herd_comm_ibroadcast(c, bc, bc, BIG, HERD_INT32, 0, &req[1]));
	CHECK_OK(herd_comm_ireduce_scatter(c, rs_in, rs_out, N, HERD_FLOAT64, HERD_MAX, &req[2]));
	CHECK_OK(herd_comm_iallgather(c, ag_in, ag_out, N, HERD_INT64, &req[3]));
	CHECK_OK(herd_comm_ialltoall(c, a2a_in, a2a_out, N, HERD_UINT8, &req[4]));
	CHECK_OK(herd_comm_ireduce(c, red, red_out, N, HERD_BFLOAT16, HERD_SUM, size - 1, &req[5]));
	CHECK_OK(herd_comm_igather(c, ar_in, ga_out, N, HERD_FLOAT32, 0, &req[6]));
	CHECK_OK(herd_comm_iscatter(c, big_in, sc_out, N, HERD_FLOAT32, size - 1, &req[7]));
	CHECK_OK(herd_comm_ibarrier(c, &req[8]));
	CHECK_OK(herd_comm_iallreduce(c, big_in, big_out, BIG, HERD_FLOAT32, HERD_SUM, &req[9]));
	CHECK_OK(herd_comm_request_wait(req[9]));
	for (int k = 0; k < NREQ - 1; k++) {
		bool d = false;

		CHECK_OK(herd_comm_request_test(req[k], &d));
		CHECK_INT(d, 1);
		done += d;
	}
	CHECK_INT(done, NREQ - 1);
	OPS_VERIFY("iallreduce", ar_out, N, HERD_FLOAT32, ops_expected(size, i, HERD_FLOAT32, HERD_SUM));
	OPS_VERIFY("ibroadcast", bc, BIG, HERD_INT32, (double)ops_input(0, i, HERD_INT32, HERD_SUM));
	OPS_VERIFY("ireduce_scatter", rs_out, N, HERD_FLOAT64,
		   ops_expected(size, (size_t)rank * N + i, HERD_FLOAT64, HERD_MAX));
	OPS_VERIFY("iallgather", ag_out, (size_t)size * N, HERD_INT64,
		   (double)ops_input((int)(i / N), i % N, HERD_INT64, HERD_SUM));
	OPS_VERIFY("ialltoall", a2a_out, (size_t)size * N, HERD_UINT8,
		   (double)ops_input((int)(i / N), (size_t)rank * N + i % N, HERD_UINT8, HERD_SUM));
	if (rank == size - 1)
		OPS_VERIFY("ireduce", red_out, N, HERD_BFLOAT16,
			   ops_expected(size, i, HERD_BFLOAT16, HERD_SUM));
	if (rank == 0)
		OPS_VERIFY("igather", ga_out, (size_t)size * N, HERD_FLOAT32,
			   (double)ops_input((int)(i / N), i % N, HERD_FLOAT32, HERD_SUM));
	OPS_VERIFY("iscatter", sc_out, N, HERD_FLOAT32,
		   (double)ops_input(size - 1, (size_t)rank * N + i, HERD_FLOAT32, HERD_SUM));
	OPS_VERIFY("iallreduce (big)", big_out, BIG, HERD_FLOAT32,
		   ops_expected(size, i, HERD_FLOAT32, HERD_SUM));

	/* A blocking call waits for the queue: after it the request is done. */
	CHECK_OK(herd_comm_iallreduce(c, ar_in, ar_out, N, HERD_FLOAT32, HERD_MAX, &req[0]));
	CHECK_OK(herd_comm_barrier(c));
	last = false;
	CHECK_OK(herd_comm_request_test(req[0], &last));
	CHECK_INT(last, 1);
	OPS_VERIFY("iallreduce max", ar_out, N, HERD_FLOAT32,
		   ops_expected(size, i, HERD_FLOAT32, HERD_MAX));
	CHECK_OK(herd_comm_finalize(c));
	herd_comm_free(c);
	free(ar_in), free(ar_out), free(bc), free(rs_in), free(rs_out), free(ag_out), free(ag_in);
	free(a2a_in), free(a2a_out), free(red), free(red_out), free(big_in), free(big_out);
	free(ga_out), free(sc_out);
}

static void test_comm_ops_nonblocking_calls_complete_in_call_order(void)
{
	static const int sizes[] = { 1, 2, 3, 4 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ops_session s = session("nonblocking");

		CHECK_INT(run_ranks(sizes[i], nonblocking_rank, &s, 60000, NULL, NULL, 0, NULL), 0);
	}
}

/* Rank 0 passes one more element than rank 1: both must fail, not hang. */
static void mismatch_rank(int rank, int size, void *arg)
{
	ops_session *s = arg;
	herd_comm *c = NULL;
	float a[101] = { 0 }, b[101];
	herd_status st;

	CHECK_OK(ops_comm(&c, s, rank, size));
	if (c == NULL)
		return;
	st = herd_comm_allreduce(c, a, b, rank == 0 ? 101 : 100, HERD_FLOAT32, HERD_SUM);
	CHECK_INT(st, HERD_EMISMATCH);
	if (st == HERD_EMISMATCH)
		CHECK(strstr(herd_last_error(), "allreduce") != NULL);
	herd_comm_free(c);
}

static void test_comm_ops_counts_that_differ_between_ranks_return_emismatch(void)
{
	static const char *const algos[] = { "ring", "rd" };

	for (int a = 0; a < 2; a++) {
		ops_session s = session("mismatch");

		s.algo = algos[a];
		CHECK_INT(run_ranks(2, mismatch_rank, &s, 30000, NULL, NULL, 0, NULL), 0);
	}
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	harness_start();
	TEST_RUN(test_comm_ops_null_comm_is_einval_for_every_call);
	TEST_RUN(test_comm_ops_bad_arguments_are_einval_and_harmless);
	TEST_RUN(test_comm_ops_nonblocking_calls_complete_in_call_order);
	TEST_RUN(test_comm_ops_counts_that_differ_between_ranks_return_emismatch);
	harness_stop();
	return TEST_DONE();
}
