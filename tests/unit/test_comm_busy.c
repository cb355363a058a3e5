/*
 * Waiting on a busy machine (sdk/base/wait.h): with busy loops taking the
 * CPUs, allreduce and store exchanges between real rank processes still
 * give exact results and end; a rank that waits for a late peer gives its
 * CPU up instead of spinning it away; and a rank asleep on its futex
 * doorbell still learns of its peer's death within the bound of the
 * fault tests; ranks bound to a core each (as mpirun binds them) do not
 * count as outnumbering the CPUs.  Over shared memory (the direct small
 * allreduce and the rings) and TCP.
 */
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "comm/transport/shm/shm.h"
#include "comm_harness.h"

static const char *const transports[] = { "auto", "tcp" };

typedef struct busy_args {
	char scope[64];
	const char *transport;
	int calls;
	int victim;
	int late_ms;            /* how late the last rank comes to each call */
	bool ring;              /* a ring exchange (p2p.c), not an allreduce */
} busy_args;

/* ---- busy loops ----------------------------------------------------------- */

#define MAX_HOGS 8

static pid_t hogs[MAX_HOGS];
static int nhogs;

/* Starts n processes that spin for ever (until stop_hogs kills them, or
 * this process dies). */
static void start_hogs(int n)
{
	fflush(stdout);
	fflush(stderr);
	for (nhogs = 0; nhogs < n && nhogs < MAX_HOGS; nhogs++) {
		pid_t p = fork();

		if (p == 0) {
			volatile unsigned long x = 0;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				x++;
		}
		hogs[nhogs] = p;
	}
}

static void stop_hogs(void)
{
	for (int i = 0; i < nhogs; i++) {
		if (hogs[i] <= 0)
			continue;
		kill(hogs[i], SIGKILL);
		waitpid(hogs[i], NULL, 0);
	}
	nhogs = 0;
}

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

/* ---- exact results under load --------------------------------------------- */

/* Element i of rank r's input in call k: small integers, exact sums. */
static float in_value(int r, size_t i, int k)
{
	return (float)((i * 7 + (size_t)r * 3 + (size_t)k) % 61);
}

/*
 * calls allreduces of 8 B, 512 B and 4 KiB (the direct small allreduce on
 * shared memory) and, every 50th call, 256 KiB (the large one), every
 * result checked; then 40 rounds of a store exchange: each rank sets its
 * key of the round and reads every other rank's.
 */
static void loaded_rank(int rank, int size, void *arg)
{
	const busy_args *a = arg;
	static const size_t counts[] = { 2, 128, 1024 };
	const size_t big = 64 * 1024;
	float *in = malloc(big * sizeof(float)), *out = malloc(big * sizeof(float));
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	herd_store *store = NULL;
	herd_comm *comm = NULL;
	size_t wrong = 0;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 60000));
	if (comm == NULL || in == NULL || out == NULL)
		goto out;
	for (int k = 0; k < a->calls && wrong == 0; k++) {
		size_t n = k % 50 == 49 ? big : counts[k % 3];
		herd_status st;

		for (size_t i = 0; i < n; i++)
			in[i] = in_value(rank, i, k);
		st = herd_comm_allreduce(comm, in, out, n, HERD_FLOAT32, HERD_SUM);
		if (st != HERD_OK) {
			CHECK_OK(st);
			break;
		}
		for (size_t i = 0; i < n; i++) {
			float want = 0;

			for (int r = 0; r < size; r++)
				want += in_value(r, i, k);
			if (out[i] != want && wrong++ == 0)
				printf("     rank %d, call %d (%zu floats): element %zu is %g, "
				       "expected %g\n", rank, k, n, i, out[i], want);
		}
	}
	CHECK_INT(wrong, 0);

	so.secret = HARNESS_SECRET;
	so.timeout_ms = 60000;
	CHECK_OK(herd_store_connect(&store, harness_address(), &so));
	for (int round = 0; store != NULL && round < 40; round++) {
		char key[128], want[64];

		snprintf(key, sizeof(key), "%sx/%d/%d", a->scope, round, rank);
		snprintf(want, sizeof(want), "%d:%d", round, rank);
		CHECK_OK(herd_store_set(store, key, want, strlen(want)));
		for (int r = 0; r < size; r++) {
			void *v = NULL;
			size_t len = 0;

			snprintf(key, sizeof(key), "%sx/%d/%d", a->scope, round, r);
			snprintf(want, sizeof(want), "%d:%d", round, r);
			CHECK_OK(herd_store_get(store, key, 60000, &v, &len));
			CHECK(v != NULL && len == strlen(want) && memcmp(v, want, len) == 0);
			herd_free(v);
		}
	}
	CHECK_OK(herd_comm_finalize(comm));
out:
	herd_store_free(store);
	herd_comm_free(comm);
	free(in);
	free(out);
}

static void test_comm_allreduce_and_store_under_busy_loops_are_exact_and_end(void)
{
	static const int sizes[] = { 2, 4 };

	start_hogs(online_cpus());
	for (size_t s = 0; s < 2; s++) {
		for (size_t t = 0; t < 2; t++) {
			busy_args a = { .transport = transports[t], .calls = 1500 };
			int64_t t0 = now_ms();

			harness_scope(a.scope, sizeof(a.scope), "busy");
			/* No bound but "it ends": 60 s for what takes a second or
			 * two under this load. */
			CHECK_INT(run_ranks(sizes[s], loaded_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
			printf("     %d ranks, %s, %d busy loops: %d calls and 40 store rounds in "
			       "%lld ms\n", sizes[s], a.transport, nhogs, a.calls,
			       (long long)(now_ms() - t0));
		}
	}
	stop_hogs();
}

/* ---- the CPU of a waiting rank ------------------------------------------- */

/*
 * Rank size-1 comes a.late_ms late to each of a.calls small allreduces;
 * rank 0 reports the CPU time its thread spent in them.
 */
static void late_peer_rank(int rank, int size, void *arg)
{
	const busy_args *a = arg;
	herd_comm *comm = NULL;
	float v = 1, sum = 0;
	struct timespec c0, c1;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm == NULL)
		return;
	CHECK_OK(herd_comm_barrier(comm));
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (int k = 0; k < a->calls; k++) {
		if (rank == size - 1)
			sleep_ms(a->late_ms);
		CHECK_OK(herd_comm_allreduce(comm, &v, &sum, 1, HERD_FLOAT32, HERD_SUM));
		CHECK(sum == (float)size);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	report_status(rank, HERD_OK, 0, (double)(c1.tv_sec - c0.tv_sec) * 1e3 +
					(double)(c1.tv_nsec - c0.tv_nsec) / 1e6);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_comm_rank_waiting_for_a_late_peer_gives_up_its_cpu(void)
{
	for (size_t t = 0; t < 2; t++) {
		busy_args a = { .transport = transports[t], .calls = 20, .late_ms = 30 };
		rank_result res[2];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "late");
		CHECK_INT(run_ranks(2, late_peer_rank, &a, 30000, NULL, NULL, 0, res), 0);
		CHECK(res[0].valid);
		/* 20 waits of 30 ms: a spin of 50 us and a few yields each
		 * before the sleep come to a few ms of CPU; spinning through
		 * the waits would take most of the 600 ms.  A no-waste bound,
		 * not a timing: 60 ms. */
		CHECK(res[0].value < 60.0);
		printf("     %s: rank 0 used %.2f ms of CPU over %d waits of %d ms\n",
		       a.transport, res[0].value, a.calls, a.late_ms);
	}
}

/* ---- a peer's death while asleep on the doorbell -------------------------- */

static int64_t kill_time_ms;

/* Rank 0 calls, the victim (rank 1) joins but never calls: rank 0 waits
 * until the victim is killed. */
static void sleeper_rank(int rank, int size, void *arg)
{
	const busy_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[64] = { 0 }, r[64];
	float v = 1, sum = 0;
	herd_status st;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm == NULL)
		return;
	if (rank == a->victim) {
		sleep_ms(20000);     /* killed meanwhile */
		herd_comm_free(comm);
		return;
	}
	st = a->ring ? ring_call(comm, s, r, sizeof(r))
		     : herd_comm_allreduce(comm, &v, &sum, 1, HERD_FLOAT32, HERD_SUM);
	report_status(rank, st, now_ms(), 0);
	CHECK_ERR(st, HERD_EPEER, "rank 1 (host");
	herd_comm_free(comm);
}

/* The system call that thread `pid` is in ("202 0x..." for futex on
 * x86_64), or -1 when it is running or unknown. */
static long syscall_of(pid_t pid)
{
	char path[64], buf[256];
	FILE *f;
	long nr = -1;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -2;
	if (fgets(buf, sizeof(buf), f) != NULL && buf[0] >= '0' && buf[0] <= '9')
		nr = strtol(buf, NULL, 10);
	fclose(f);
	return nr;
}

static bool saw_futex;

/* Waits (10 s at most) until rank 0's main thread sleeps in futex, then
 * kills the victim. */
static void kill_when_asleep(const pid_t *pids, int size, void *arg)
{
	const busy_args *a = arg;
	int64_t until = now_ms() + 10000;
	int seen = 0;

	(void)size;
	saw_futex = false;
	/* Several looks in a row: the wait wakes every 100 ms to look at its
	 * deadline and peers. */
	while (now_ms() < until && seen < 3) {
		seen = syscall_of(pids[0]) == SYS_futex ? seen + 1 : 0;
		sleep_ms(5);
	}
	saw_futex = seen == 3;
	kill_time_ms = now_ms();
	kill(pids[a->victim], SIGKILL);
}

static void test_comm_peer_killed_while_a_rank_sleeps_on_the_doorbell_gives_epeer_within_2s(void)
{
	if (syscall_of(getpid()) == -2)
		TEST_SKIP("/proc/PID/syscall cannot be read here");
	/* The direct small allreduce and a ring exchange over the shared
	 * memory rings: both sleep on the futex doorbell. */
	for (int ring = 0; ring < 2; ring++) {
		busy_args a = { .transport = "auto", .victim = 1, .ring = ring };
		rank_result res[2];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "futexkill");
		CHECK_INT(run_ranks(2, sleeper_rank, &a, 30000, kill_when_asleep, &a, 1u << 1, res),
			  0);
		CHECK(saw_futex);
		CHECK(res[0].valid);
		CHECK_INT(res[0].status, HERD_EPEER);
		/* The call's own deadline is 30 s away: the death, not it. */
		CHECK(res[0].t_ms - kill_time_ms < 2000);
		printf("     %s: rank 0 asleep in futex, returned %lld ms after the kill: %s\n",
		       ring ? "ring exchange" : "small allreduce",
		       (long long)(res[0].t_ms - kill_time_ms), res[0].msg);
	}
}

/* ---- ranks bound to a core each ----------------------------------------- */

/* The CPUs this process may run on, in order, into cpus; their count. */
static int allowed_cpus(int *cpus, int cap)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < cap; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

/* Each rank binds itself to one allowed CPU (rank modulo 2), as mpirun and
 * srun --cpu-bind=cores do, then joins: the CPUs the ranks of the host may
 * use together are both, not the one each sees. */
static void bound_rank(int rank, int size, void *arg)
{
	const busy_args *a = arg;
	herd_comm *comm = NULL;
	int cpus[2];
	cpu_set_t one;
	float v = 1, sum = 0;

	CHECK_INT(allowed_cpus(cpus, 2), 2);
	CPU_ZERO(&one);
	CPU_SET(cpus[rank % 2], &one);
	CHECK_INT(sched_setaffinity(0, sizeof(one), &one), 0);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm == NULL)
		return;
	CHECK_INT(comm->ncpus, 2);
	CHECK_OK(herd_comm_allreduce(comm, &v, &sum, 1, HERD_FLOAT32, HERD_SUM));
	CHECK(sum == (float)size);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_comm_ranks_bound_to_a_core_each_count_the_cpus_of_all(void)
{
	int cpus[2];

	if (allowed_cpus(cpus, 2) < 2)
		TEST_SKIP("needs 2 CPUs");
	/* 2 ranks on 2 CPUs: one each, not crowded; 3 on 2: crowded. */
	for (int size = 2; size <= 3; size++) {
		busy_args a = { .transport = "auto" };

		harness_scope(a.scope, sizeof(a.scope), "bound");
		CHECK_INT(run_ranks(size, bound_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

int main(void)
{
	harness_start();
	TEST_RUN(test_comm_allreduce_and_store_under_busy_loops_are_exact_and_end);
	TEST_RUN(test_comm_rank_waiting_for_a_late_peer_gives_up_its_cpu);
	TEST_RUN(test_comm_peer_killed_while_a_rank_sleeps_on_the_doorbell_gives_epeer_within_2s);
	TEST_RUN(test_comm_ranks_bound_to_a_core_each_count_the_cpus_of_all);
	harness_stop();
	return TEST_DONE();
}
