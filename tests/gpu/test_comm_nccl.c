/*
 * Collectives on device memory with the real NCCL, one rank per GPU of
 * this machine (as many as it has, up to 8): every datatype and reduction
 * of allreduce checked by the verify kernel, in place and out of place;
 * reduce_scatter, allgather and broadcast by their results; the
 * stream-ordered form on the default stream; a group of a blocking and a
 * stream-ordered allreduce; a split's and a grid group's own NCCL
 * communicator; the caller's own context left current; and a hung peer
 * (one rank that never calls)
 * timing out with the report.  Without a GPU or NCCL it exits with ctest's
 * skip code and says why.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_harness.h"
#include "herd/grid.h"
#include "herd_config.h"
#include "kernels.h"
#include "mock_gpu.h"

#define COUNT 1000003

static const herd_redop ops[] = { HERD_SUM, HERD_PROD, HERD_MIN, HERD_MAX, HERD_AVG };

typedef struct gpu_args {
	char scope[64];
	int absent;           /* a rank that makes no call (-1: none) */
} gpu_args;

/* On one rank every reduction of x is x: the first elements of y that
 * differ from x, in hex, for the failure's message. */
static void show_differences(const void *x, const void *y, herd_dtype dt)
{
	size_t sz = herd_dtype_size(dt), bytes = (size_t)COUNT * sz, shown = 0;
	unsigned char *hx = malloc(bytes), *hy = malloc(bytes);

	if (hx != NULL && hy != NULL && cudaMemcpy(hx, x, bytes, cudaMemcpyDeviceToHost) ==
	    cudaSuccess && cudaMemcpy(hy, y, bytes, cudaMemcpyDeviceToHost) == cudaSuccess) {
		for (size_t i = 0; i < COUNT && shown < 4; i++) {
			if (memcmp(hx + i * sz, hy + i * sz, sz) == 0)
				continue;
			fprintf(stderr, "    element %zu: input", i);
			for (size_t b = sz; b-- > 0;)
				fprintf(stderr, "%s%02x", b + 1 == sz ? " " : "", hx[i * sz + b]);
			fprintf(stderr, ", result");
			for (size_t b = sz; b-- > 0;)
				fprintf(stderr, "%s%02x", b + 1 == sz ? " " : "", hy[i * sz + b]);
			fprintf(stderr, "\n");
			shown++;
		}
	}
	free(hx);
	free(hy);
}

static void gpu_rank(int rank, int size, void *arg)
{
	const gpu_args *a = arg;
	herd_comm *comm = NULL;
	void *x = NULL, *y = NULL;
	uint64_t wrong;

	CHECK_OK(herd__k_set_device(rank));
	CHECK_OK(herd__k_alloc(&x, (size_t)COUNT * 8 * (size_t)size));
	CHECK_OK(herd__k_alloc(&y, (size_t)COUNT * 8 * (size_t)size));
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", a->absent >= 0 ? 3000 : 60000));
	if (comm == NULL || x == NULL || y == NULL)
		goto out;
	if (a->absent >= 0) {
		herd_status st;
		int64_t t0 = now_ms();

		if (rank == a->absent) {
			sleep_ms(6000);
			goto out;
		}
		st = herd_comm_allreduce(comm, x, x, COUNT, HERD_FLOAT32, HERD_SUM);
		report_status(rank, st, now_ms() - t0, 0);
		goto out;
	}
	for (int t = 0; t < HERD_DTYPE_COUNT; t++) {
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			herd_dtype dt = (herd_dtype)t;
			herd_redop op = ops[o];

			if ((dt == HERD_FLOAT8_E4M3 || dt == HERD_FLOAT8_E5M2) && size > 4)
				continue;   /* sums beyond the 8-bit mantissas: NCCL rounds per step */
			herd_status st;

			wrong = 1;
			CHECK_OK(herd__k_fill(x, COUNT, dt, op, rank, size, 7, NULL));
			st = herd_comm_allreduce(comm, x, y, COUNT, dt, op);
			/* an NCCL older than 2.24 has no 8-bit floats, and says so */
			if (st == HERD_EUNAVAIL && herd_dtype_size(dt) == 1 && herd_dtype_is_float(dt))
				continue;
			CHECK_OK(st);
			CHECK_OK(herd__k_verify(y, COUNT, dt, op, size, 7, &wrong, NULL));
			if (wrong != 0) {
				TEST_FAIL_("allreduce %s %s out of place: %llu wrong",
					   herd_dtype_name(dt), herd_redop_name(op),
					   (unsigned long long)wrong);
				if (size == 1)
					show_differences(x, y, dt);
			}
			wrong = 1;
			CHECK_OK(herd__k_fill(y, COUNT, dt, op, rank, size, 8, NULL));
			CHECK_OK(herd_comm_allreduce_stream(comm, y, y, COUNT, dt, op, NULL));
			CHECK_OK(herd__k_verify(y, COUNT, dt, op, size, 8, &wrong, NULL));
			if (wrong != 0)
				TEST_FAIL_("allreduce_stream %s %s in place: %llu wrong",
					   herd_dtype_name(dt), herd_redop_name(op),
					   (unsigned long long)wrong);
		}
	}
	/* reduce_scatter then allgather: every block back, reduced */
	CHECK_OK(herd__k_fill(x, (size_t)COUNT * (size_t)size, HERD_FLOAT32, HERD_SUM, rank, size,
			      9, NULL));
	CHECK_OK(herd_comm_reduce_scatter(comm, x, (float *)y + (size_t)rank * COUNT, COUNT,
					  HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_allgather(comm, (float *)y + (size_t)rank * COUNT, y, COUNT,
				     HERD_FLOAT32));
	wrong = 1;
	CHECK_OK(herd__k_verify(y, (size_t)COUNT * (size_t)size, HERD_FLOAT32, HERD_SUM, size, 9,
				&wrong, NULL));
	CHECK_INT(wrong, 0);
	CHECK_OK(herd_comm_async_error(comm));
out:
	herd_comm_free(comm);
	herd__k_free(x);
	herd__k_free(y);
}

/* verify's count of wrong elements of buf, as the reduction of op over
 * nranks ranks' fills with seed; 1 when verify itself failed. */
static uint64_t wrong_in(const void *buf, herd_redop op, int nranks, uint64_t seed)
{
	uint64_t wrong = 1;

	CHECK_OK(herd__k_verify(buf, COUNT, HERD_FLOAT32, op, nranks, seed, &wrong, NULL));
	return wrong;
}

static void extra_rank(int rank, int size, void *arg)
{
	const gpu_args *a = arg;
	herd_comm *comm = NULL, *half = NULL;
	void *x = NULL, *y = NULL, *mine;

	CHECK_OK(herd__k_set_device(rank));
	CHECK_OK(herd__k_alloc(&x, (size_t)COUNT * 4));
	CHECK_OK(herd__k_alloc(&y, (size_t)COUNT * 4));
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 60000));
	if (comm == NULL || x == NULL || y == NULL)
		goto out;
	/* a group: a blocking and a stream-ordered allreduce, run as one */
	CHECK_OK(herd__k_fill(x, COUNT, HERD_FLOAT32, HERD_SUM, rank, size, 11, NULL));
	CHECK_OK(herd__k_fill(y, COUNT, HERD_FLOAT32, HERD_MAX, rank, size, 12, NULL));
	CHECK_OK(herd_comm_group_start(comm));
	CHECK_OK(herd_comm_allreduce(comm, x, x, COUNT, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_allreduce_stream(comm, y, y, COUNT, HERD_FLOAT32, HERD_MAX, NULL));
	CHECK_OK(herd_comm_group_end(comm));
	CHECK_INT(wrong_in(x, HERD_SUM, size, 11), 0);
	CHECK_INT(wrong_in(y, HERD_MAX, size, 12), 0);
	/* a split by parity: an NCCL communicator of its own */
	CHECK_OK(herd_comm_split(&half, comm, rank % 2, rank));
	if (half != NULL) {
		int hr = herd_comm_rank(half), hs = herd_comm_size(half);

		CHECK_OK(herd__k_fill(x, COUNT, HERD_FLOAT32, HERD_SUM, hr, hs, 13, NULL));
		CHECK_OK(herd_comm_allreduce(half, x, x, COUNT, HERD_FLOAT32, HERD_SUM));
		CHECK_INT(wrong_in(x, HERD_SUM, hs, 13), 0);
	}
	/* a grid's group: an NCCL communicator of its own, as a split's */
	{
		herd_grid_dim tp[1] = { { "tp", 1 } };
		herd_comm_grid *g = NULL;
		herd_comm *group = NULL;

		tp[0].size = size;
		CHECK_OK(herd_comm_grid_create(&g, comm, tp, 1, NULL));
		CHECK_OK(herd_comm_grid_group(g, "tp", &group));
		if (group != NULL) {
			CHECK_OK(herd__k_fill(x, COUNT, HERD_FLOAT32, HERD_SUM, herd_comm_rank(group),
					      size, 14, NULL));
			CHECK_OK(herd_comm_allreduce(group, x, x, COUNT, HERD_FLOAT32, HERD_SUM));
			CHECK_INT(wrong_in(x, HERD_SUM, size, 14), 0);
		}
		herd_comm_grid_free(g);
	}
	/* a context of the program's own, current during a call, stays current;
	 * then the primary one again, which the kernels here use */
	mine = dev_own_context_on(rank);
	if (mine == NULL) {
		printf("note: rank %d: cuCtxCreate_v2 made no context; the context check "
		       "did not run\n", rank);
	} else {
		CHECK_OK(herd_comm_allreduce(comm, y, y, COUNT, HERD_FLOAT32, HERD_MAX));
		CHECK(dev_current_context() == mine);
		CHECK_OK(herd__k_set_device(rank));
		CHECK_INT(wrong_in(y, HERD_MAX, size, 12), 0);
	}
	CHECK_OK(herd_comm_async_error(comm));
out:
	herd_comm_free(half);
	herd_comm_free(comm);
	herd__k_free(x);
	herd__k_free(y);
}

static int ngpus;

static void test_groups_splits_and_contexts(void)
{
	gpu_args a = { .absent = -1 };

	harness_scope(a.scope, sizeof(a.scope), "gpu-extra");
	CHECK_INT(run_ranks(ngpus, extra_rank, &a, 300000, NULL, NULL, 0, NULL), 0);
}

static void test_device_collectives_verify(void)
{
	gpu_args a = { .absent = -1 };

	harness_scope(a.scope, sizeof(a.scope), "gpu-nccl");
	CHECK_INT(run_ranks(ngpus, gpu_rank, &a, 600000, NULL, NULL, 0, NULL), 0);
}

/* Two GPUs or more: one rank stays away; the others time out naming it. */
static void test_absent_rank_times_out(void)
{
	gpu_args a = { .absent = 1 };
	rank_result res[8];

	if (ngpus < 2)
		TEST_SKIP("one GPU: no peer to stay away");
	harness_scope(a.scope, sizeof(a.scope), "gpu-absent");
	memset(res, 0, sizeof(res));
	CHECK_INT(run_ranks(ngpus, gpu_rank, &a, 120000, NULL, NULL, 0, res), 0);
	CHECK_INT(res[0].status, HERD_ETIMEDOUT);
	CHECK(strstr(res[0].msg, "rank 1 (host") != NULL);
	CHECK(res[0].t_ms <= 4000);
}

/* The GPUs, counted in a child: CUDA initialized here would not work in
 * the ranks forked after (CUDA does not survive fork). */
static int count_gpus(char *why, size_t cap)
{
	struct { int n; char msg[400]; } r = { 0, "" };
	int fds[2], ws;
	pid_t pid;

	if (pipe(fds) != 0)
		return 0;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		if (herd__k_device_count(&r.n) != HERD_OK)
			herd__strlcpy(r.msg, herd_last_error(), sizeof(r.msg));
		if (write(fds[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], &r, sizeof(r)) != (ssize_t)sizeof(r))
		snprintf(r.msg, sizeof(r.msg), "could not ask a child process");
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &ws, 0);
	herd__strlcpy(why, r.msg, cap);
	return r.n;
}

int main(void)
{
	char why[400];

	ngpus = count_gpus(why, sizeof(why));
	if (ngpus <= 0) {
		printf("skipped: no GPU here (%s)\n", why);
		return 77;
	}
#if !HERD_HAVE_NCCL
	printf("skipped: this libherd was built without NCCL\n");
	return 77;
#endif
	if (ngpus > 8)
		ngpus = 8;
	harness_start();
	TEST_RUN(test_device_collectives_verify);
	TEST_RUN(test_groups_splits_and_contexts);
	TEST_RUN(test_absent_rank_times_out);
	harness_stop();
	return TEST_DONE();
}
