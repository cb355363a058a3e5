/*
 * The communicator under faults, with real processes: a rank killed with
 * SIGKILL in the middle of exchanges, a rank that does not arrive, abort
 * from another thread, a peer that leaves without finalize or exits
 * without destroy, an init that not every rank joins.  Each over shared
 * memory and over TCP, with the times measured against the contract.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/syscall.h>

#include "comm_harness.h"

static const char *const transports[] = { "auto", "tcp" };

typedef struct fault_args {
	char scope[64];
	const char *transport;
	int victim;
	int size;               /* the communicator's size, when not the process count */
} fault_args;

static int64_t kill_time_ms;

/* ---- a rank killed during exchanges --------------------------------------- */

static void killed_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	const size_t bytes = 1u << 20;
	uint8_t *send = malloc(bytes), *recv = malloc(bytes);
	herd_comm *comm = NULL;
	herd_status st = HERD_OK;
	int64_t until;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm == NULL || send == NULL || recv == NULL)
		goto out;
	fill(send, bytes, rank);
	/* Ring exchanges until the victim's death stops them. */
	until = now_ms() + 20000;
	while (st == HERD_OK && now_ms() < until)
		st = ring_call(comm, send, recv, bytes);
	report_status(rank, st, now_ms(), 0);
	CHECK_ERR(st, HERD_EPEER, "rank 2 (host");
	/* Every later call says the same. */
	CHECK_ERR(ring_call(comm, send, recv, 16), HERD_EPEER, "rank 2 (host");
out:
	herd_comm_free(comm);
	free(send);
	free(recv);
}

static void kill_victim(const pid_t *pids, int size, void *arg)
{
	const fault_args *a = arg;

	(void)size;
	sleep_ms(700);
	kill_time_ms = now_ms();
	kill(pids[a->victim], SIGKILL);
}

static void test_comm_killed_rank_gives_epeer_to_every_survivor_within_2s(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t], .victim = 2 };
		rank_result res[4];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "killed");
		CHECK_INT(run_ranks(4, killed_rank, &a, 30000, kill_victim, &a, 1u << 2, res), 0);
		for (int r = 0; r < 4; r++) {
			if (r == a.victim)
				continue;
			CHECK(res[r].valid);
			CHECK_INT(res[r].status, HERD_EPEER);
			CHECK(strstr(res[r].msg, "rank 2 (host") != NULL);
			CHECK(res[r].t_ms - kill_time_ms < 2500);
			printf("     %s: rank %d returned %lld ms after the kill: %s\n", a.transport, r,
			       (long long)(res[r].t_ms - kill_time_ms), res[r].msg);
		}
	}
}

/* The survivors are idle when the victim dies; their next call fails at once. */
static void idle_killed_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[64], r[64];
	int64_t t0;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm == NULL)
		return;
	CHECK_OK(ring_call(comm, s, r, sizeof(r)));
	CHECK_OK(herd_comm_async_error(comm));
	if (rank == a->victim) {
		sleep_ms(10000);     /* killed meanwhile */
		return;
	}
	/* Between calls the death shows in the asynchronous error, without a
	 * call: the monitor noticed (the victim dies at 700 ms). */
	for (int i = 0; i < 300 && herd_comm_async_error(comm) == HERD_OK; i++)
		sleep_ms(10);
	CHECK_ERR(herd_comm_async_error(comm), HERD_EPEER, "rank 1 (host");
	sleep_ms(500);
	t0 = now_ms();
	CHECK_ERR(ring_call(comm, s, r, sizeof(r)), HERD_EPEER, "rank 1 (host");
	CHECK_ERR(herd__comm_broken(comm), HERD_EPEER, "died");
	CHECK(now_ms() - t0 < 100);
	herd_comm_free(comm);
}

static void test_comm_death_of_an_idle_peer_fails_the_next_call_at_once(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t], .victim = 1 };

		harness_scope(a.scope, sizeof(a.scope), "idlekill");
		CHECK_INT(run_ranks(3, idle_killed_rank, &a, 30000, kill_victim, &a, 1u << 1, NULL),
			  0);
	}
}

/* ---- a rank that does not arrive ------------------------------------------ */

static void late_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[64], r[64 * 4];
	herd_status st;
	int64_t t0;

	setenv("HERD_TIMEOUT", "1", 1);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 0));
	if (comm == NULL)
		return;
	CHECK_OK(all_call(comm, s, r, sizeof(s)));
	if (rank == 2)
		sleep_ms(2500);
	t0 = now_ms();
	st = all_call(comm, s, r, sizeof(s));
	report_status(rank, st, now_ms() - t0, 0);
	CHECK_INT(st, HERD_ETIMEDOUT);
	if (rank != 2) {
		CHECK(now_ms() - t0 < 2500);
		CHECK_ERR(st, HERD_ETIMEDOUT, "alltoall #2 timed out after 1.");
		CHECK_ERR(st, HERD_ETIMEDOUT, "rank 2 (host");
		CHECK_ERR(st, HERD_ETIMEDOUT, "did not arrive; its last completed call was "
			  "#1 alltoall");
	}
	herd_comm_free(comm);
}

static void test_comm_rank_that_does_not_call_gives_etimedout_naming_it(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t] };
		rank_result res[4];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "late");
		CHECK_INT(run_ranks(4, late_rank, &a, 30000, NULL, NULL, 0, res), 0);
		printf("     %s: rank 0 after %lld ms: %s\n", a.transport, (long long)res[0].t_ms,
		       res[0].msg);
		printf("     %s: rank 2, late: %s\n", a.transport, res[2].msg);
	}
}

/* ---- abort ---------------------------------------------------------------- */

static void abort_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[4096], r[4096];

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	CHECK_OK(ring_call(comm, s, r, sizeof(r)));
	if (rank == 0) {
		abort_ctx c = { comm, 0 };
		pthread_t t;
		herd_status st;
		int64_t t_ret;

		pthread_create(&t, NULL, abort_later, &c);
		st = ring_call(comm, s, r, sizeof(r));    /* rank 1 is not there */
		t_ret = now_ms();
		pthread_join(t, NULL);
		report_status(rank, st, t_ret - c.t_abort, 0);
		CHECK_ERR(st, HERD_EABORTED, "aborted on rank 0");
		CHECK(t_ret - c.t_abort < 100);
		CHECK_INT(ring_call(comm, s, r, sizeof(r)), HERD_EABORTED);
		CHECK_OK(herd_comm_abort(comm));   /* idempotent */
		CHECK_ERR(herd_comm_abort(NULL), HERD_EINVAL, "herd_comm_abort: comm is NULL");
	} else {
		sleep_ms(1000);
		CHECK_ERR(ring_call(comm, s, r, sizeof(r)), HERD_EPEER, "rank 0 (host");
		CHECK_ERR(herd__comm_broken(comm), HERD_EPEER, "aborted");
	}
	herd_comm_free(comm);
}

static void test_comm_abort_from_another_thread_returns_eaborted_within_100ms(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t] };
		rank_result res[2];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "abort");
		CHECK_INT(run_ranks(2, abort_rank, &a, 30000, NULL, NULL, 0, res), 0);
		printf("     %s: the pending call returned %lld ms after abort\n", a.transport,
		       (long long)res[0].t_ms);
	}
}

/* ---- leaving -------------------------------------------------------------- */

static void leaving_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[1024], r[1024];
	int64_t t0;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	CHECK_OK(ring_call(comm, s, r, sizeof(r)));
	if (rank == 0) {
		herd_comm_free(comm);    /* without finalize, while rank 1 waits */
		return;
	}
	t0 = now_ms();
	CHECK_ERR(ring_call(comm, s, r, sizeof(r)), HERD_EPEER,
		  "rank 0 (host");
	CHECK_ERR(herd__comm_broken(comm), HERD_EPEER, "destroyed its communicator");
	CHECK(now_ms() - t0 < 1000);
	herd_comm_free(comm);
}

static void test_comm_peer_destroyed_without_finalize_gives_epeer_not_a_hang(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t] };

		harness_scope(a.scope, sizeof(a.scope), "leaving");
		CHECK_INT(run_ranks(2, leaving_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

static void clean_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[1 << 16], r[1 << 16];

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	for (int i = 0; i < 5; i++)
		CHECK_OK(ring_call(comm, s, r, sizeof(r)));
	CHECK_OK(herd_comm_finalize(comm));
	if (rank != 0) {
		/* Rank 0 has gone meanwhile, cleanly: that breaks nothing here. */
		sleep_ms(400);
		CHECK_OK(herd__comm_broken(comm));
	}
	herd_comm_free(comm);
}

static void test_comm_clean_finalize_and_destroy_breaks_no_peer(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t] };

		harness_scope(a.scope, sizeof(a.scope), "clean");
		CHECK_INT(run_ranks(3, clean_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

static void exiting_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[1024], r[1024 * 3];
	int64_t t0;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	CHECK_OK(all_call(comm, s, r, sizeof(s)));
	if (rank == 1) {
		sleep_ms(200);
		_exit(0);    /* no destroy: to the others, a death */
	}
	t0 = now_ms();
	CHECK_ERR(all_call(comm, s, r, sizeof(s)), HERD_EPEER, "rank 1 (host");
	CHECK_ERR(herd__comm_broken(comm), HERD_EPEER, "died");
	CHECK(now_ms() - t0 < 2000);
	herd_comm_free(comm);
}

static void test_comm_exit_without_destroy_counts_as_a_death(void)
{
	for (size_t t = 0; t < 2; t++) {
		fault_args a = { .transport = transports[t] };

		harness_scope(a.scope, sizeof(a.scope), "exiting");
		CHECK_INT(run_ranks(3, exiting_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

/* ---- init ----------------------------------------------------------------- */

/* Rank 0 of the next test is slow right where init opens its pidfds: this
 * executable's syscall() stands before the C library's and waits first. */
static int slow_pidfd_ms;

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long arg[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		arg[i] = va_arg(ap, long);
	va_end(ap);
	if (real == NULL)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
#ifdef SYS_pidfd_open
	if (nr == SYS_pidfd_open && slow_pidfd_ms > 0)
		sleep_ms(slow_pidfd_ms);
#endif
	return real(nr, arg[0], arg[1], arg[2], arg[3], arg[4], arg[5]);
}

/* Ranks 1 and 2 finish init, destroy and exit while rank 0 is still in the
 * tail of its own init: a peer that left cleanly is no failure, whenever
 * this rank gets to look at it; one that exited without destroy is a death. */
static void hurried_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = NULL;

	if (rank == 0)
		slow_pidfd_ms = 150;
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	if (rank == a->victim)
		_exit(0);    /* no destroy: a death, however early */
	if (rank == 0) {
		sleep_ms(300);
		if (a->victim > 0)
			CHECK_ERR(herd__comm_broken(comm), HERD_EPEER, "rank 2 (host");
		else
			CHECK_OK(herd__comm_broken(comm));
	}
	herd_comm_free(comm);
}

static void test_comm_peer_leaving_while_a_rank_finishes_init_is_left_or_dead_as_it_went(void)
{
	for (size_t t = 0; t < 2; t++)
		for (int victim = -1; victim <= 2; victim += 3) {
			fault_args a = { .transport = transports[t], .victim = victim };

			harness_scope(a.scope, sizeof(a.scope), "hurried");
			CHECK_INT(run_ranks(3, hurried_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
		}
}


static void partial_init_rank(int rank, int size, void *arg)
{
	const fault_args *a = arg;
	herd_comm *comm = (herd_comm *)1;
	int64_t t0 = now_ms();

	(void)size;
	CHECK_ERR(harness_comm(&comm, a->scope, rank, a->size, a->transport, 1000),
		  HERD_ETIMEDOUT, "rank 2 did not join");
	CHECK(comm == NULL);
	CHECK(now_ms() - t0 < 3000);
}

static void test_comm_init_times_out_naming_the_ranks_that_did_not_join(void)
{
	fault_args a = { .transport = "auto", .size = 3 };

	harness_scope(a.scope, sizeof(a.scope), "partial");
	CHECK_INT(run_ranks(2, partial_init_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
}

int main(void)
{
	harness_start();
	TEST_RUN(test_comm_killed_rank_gives_epeer_to_every_survivor_within_2s);
	TEST_RUN(test_comm_death_of_an_idle_peer_fails_the_next_call_at_once);
	TEST_RUN(test_comm_rank_that_does_not_call_gives_etimedout_naming_it);
	TEST_RUN(test_comm_abort_from_another_thread_returns_eaborted_within_100ms);
	TEST_RUN(test_comm_peer_destroyed_without_finalize_gives_epeer_not_a_hang);
	TEST_RUN(test_comm_clean_finalize_and_destroy_breaks_no_peer);
	TEST_RUN(test_comm_exit_without_destroy_counts_as_a_death);
	TEST_RUN(test_comm_peer_leaving_while_a_rank_finishes_init_is_left_or_dead_as_it_went);
	TEST_RUN(test_comm_init_times_out_naming_the_ranks_that_did_not_join);
	harness_stop();
	return TEST_DONE();
}
