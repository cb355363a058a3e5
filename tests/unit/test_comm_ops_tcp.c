/*
 * The public collectives end to end over TCP (opts.transport "tcp", as
 * HERD_TRANSPORT=tcp would): every operation x element type x reduction on
 * 1, 2, 3, 4 and 7 processes, counts 0, 1, 1009 and several MiB, in place
 * and out of place, with ring and with recursive doubling forced, and
 * allreduce and the large cases also with the algorithm chosen by size
 * (comm_ops_cases.h).  test_comm_ops.c runs the same over shared memory.
 * Last, one ring whose pairs use shared memory and TCP at once.
 */
#include <signal.h>

#include "comm_ops_cases.h"

/* Several MiB (4 MiB of float32); less under the sanitizers, which are
 * slow. */
#ifdef __SANITIZE_ADDRESS__
#define LARGE ((size_t)1 << 18)
#else
#define LARGE ((size_t)1 << 20)
#endif

static const int sizes[] = { 1, 2, 3, 4, 7 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_comm_ops_over_tcp_with_the_algorithm_chosen_by_size(void)
{
	ops_run_sessions("tcp", "auto", LARGE, sizes, NSIZES);
}

static void test_comm_ops_over_tcp_with_ring_forced(void)
{
	ops_run_sessions("tcp", "ring", LARGE, sizes, NSIZES);
}

static void test_comm_ops_over_tcp_with_recursive_doubling_forced(void)
{
	ops_run_sessions("tcp", "rd", LARGE, sizes, NSIZES);
}

/*
 * Ranks 0-2 on shared memory with each other, 3 and 4 asking for TCP: the
 * ring runs over both transports at once, and every rank must cut the
 * vector into the same slices although the neighbours of rank 1 are both
 * on shared memory (the TCP block applies to the whole communicator).
 * 1.5 Mi float32 is several slices of either block size.
 */
#define MIXED_RANKS 5
#define MIXED_COUNT ((size_t)3 << 19)

static void mixed_rank(int rank, int size, void *arg)
{
	const char *scope = arg;
	herd_comm *comm = NULL;
	float *in = NULL, *out = NULL;
	size_t wrong = 0;

	CHECK_OK(harness_comm(&comm, scope, rank, size, rank < 3 ? "auto" : "tcp", 60000));
	in = malloc(MIXED_COUNT * sizeof(float));
	out = malloc(MIXED_COUNT * sizeof(float));
	CHECK(comm != NULL && in != NULL && out != NULL);
	if (comm == NULL || in == NULL || out == NULL)
		goto out;
	for (int inplace = 0; inplace < 2; inplace++) {
		float *dst = inplace ? in : out;

		for (size_t i = 0; i < MIXED_COUNT; i++)
			in[i] = (float)(i % 7) + (float)rank;
		CHECK_OK(herd_comm_allreduce(comm, in, dst, MIXED_COUNT, HERD_FLOAT32, HERD_SUM));
		for (size_t i = 0; i < MIXED_COUNT; i++)
			wrong += dst[i] != (float)(5 * (i % 7) + 10);
	}
	CHECK_INT(wrong, 0);
	CHECK_OK(herd_comm_finalize(comm));
out:
	herd_comm_free(comm);
	free(in);
	free(out);
}

static void test_comm_allreduce_over_shm_and_tcp_in_one_ring(void)
{
	char scope[64];

	harness_scope(scope, sizeof(scope), "mixed");
	CHECK_INT(run_ranks(MIXED_RANKS, mixed_rank, scope, 120000, NULL, NULL, 0, NULL), 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	harness_start();
	TEST_RUN(test_comm_ops_over_tcp_with_the_algorithm_chosen_by_size);
	TEST_RUN(test_comm_ops_over_tcp_with_ring_forced);
	TEST_RUN(test_comm_ops_over_tcp_with_recursive_doubling_forced);
	TEST_RUN(test_comm_allreduce_over_shm_and_tcp_in_one_ring);
	harness_stop();
	return TEST_DONE();
}
