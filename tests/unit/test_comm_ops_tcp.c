/*
 * The public collectives end to end over TCP (opts.transport "tcp", as
 * HERD_TRANSPORT=tcp would): every operation x element type x reduction on
 * 1, 2, 3, 4 and 7 processes, counts 0, 1, 1009 and several MiB, in place
 * and out of place, with ring and with recursive doubling forced, and
 * allreduce and the large cases also with the algorithm chosen by size
 * (comm_ops_cases.h).  test_comm_ops.c runs the same over shared memory.
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

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	harness_start();
	TEST_RUN(test_comm_ops_over_tcp_with_the_algorithm_chosen_by_size);
	TEST_RUN(test_comm_ops_over_tcp_with_ring_forced);
	TEST_RUN(test_comm_ops_over_tcp_with_recursive_doubling_forced);
	harness_stop();
	return TEST_DONE();
}
