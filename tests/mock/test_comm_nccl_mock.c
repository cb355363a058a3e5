/*
 * Collectives on device memory around NCCL, with real rank processes and
 * the stand-in libcuda.so.1 and libnccl.so.2 of tests/mock (ctest puts
 * them first on LD_LIBRARY_PATH): buffers the driver calls device memory
 * go to NCCL, made at the first device collective through the store; a
 * hung NCCL call returns HERD_ETIMEDOUT at the deadline naming the rank
 * that did not arrive; a peer killed during one gives HERD_EPEER within
 * seconds; NCCL's asynchronous error, a late completion and a hung init
 * behave as herd's contract says; mixed buffers are refused.
 */
#include "comm_harness.h"
#include "mock_gpu.h"

typedef struct dev_args {
	char scope[64];
	const char *mock;       /* HERD_MOCK_NCCL in every rank */
	int timeout_ms;
	int absent;             /* a rank that makes no call (-1: none) */
	int victim;             /* a rank the parent kills (-1: none) */
	int unchecked;          /* HERD_DEVICE_CHECK=0 */
} dev_args;

static void set_mock(const char *mode)
{
	if (mode != NULL)
		setenv("HERD_MOCK_NCCL", mode, 1);
	else
		unsetenv("HERD_MOCK_NCCL");
}

/* In a rank: the stand-in told a->mock, and the communicator joined
 * (checking device calls unless a->unchecked); NULL when that failed.  A
 * rank that is a->absent stays away from every call past the deadline
 * (true: the caller is done). */
static herd_comm *join(const dev_args *a, int rank, int size, bool *absent)
{
	herd_comm *comm = NULL;

	set_mock(a->mock);
	if (a->unchecked)
		setenv("HERD_DEVICE_CHECK", "0", 1);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", a->timeout_ms));
	unsetenv("HERD_DEVICE_CHECK");
	*absent = comm != NULL && rank == a->absent;
	if (*absent)
		sleep_ms(a->timeout_ms + 3000);
	return comm;
}

/* The parent: kills a->victim, if any, 1.5 s after the ranks start. */
static void kill_victim(const pid_t *pids, int size, void *arg)
{
	const dev_args *a = arg;

	(void)size;
	sleep_ms(1500);
	kill(pids[a->victim], SIGKILL);
}

/* One scenario: fn on size ranks in a fresh store scope; what each
 * reported in res (may be NULL); every rank but a->victim exits 0. */
static void run_case(dev_args *a, const char *name, int size, rank_fn fn, rank_result *res)
{
	harness_scope(a->scope, sizeof(a->scope), name);
	if (res != NULL)
		memset(res, 0, sizeof(*res) * (size_t)size);
	CHECK_INT(run_ranks(size, fn, a, 60000, a->victim >= 0 ? kill_victim : NULL, a,
			    a->victim >= 0 ? 1u << a->victim : 0, res), 0);
}

/* ---- the stand-in's log of how NCCL communicators begin and end ------------ */

static char nccl_log[256];

/* HERD_MOCK_NCCL_LOG, for the ranks of the next case: a fresh file. */
static void log_start(const char *name)
{
	snprintf(nccl_log, sizeof(nccl_log), "/tmp/herd-nccl-log-%s-%d", name, (int)getpid());
	unlink(nccl_log);
	setenv("HERD_MOCK_NCCL_LOG", nccl_log, 1);
}

/* How many times call was made, by the log: by rank R of NCCL
 * communicators of N ranks ("R/N"), or by any ("" for who); the log is
 * removed when last. */
static int log_count(const char *who, const char *call, bool last)
{
	char want[128], line[128];
	FILE *f = fopen(nccl_log, "r");
	int n = 0;

	snprintf(want, sizeof(want), ": %s\n", call);
	for (int i = 0; f != NULL && i < 10000 && fgets(line, sizeof(line), f) != NULL; i++) {
		char *colon = strchr(line, ':');

		n += colon != NULL && strcmp(colon, want) == 0 &&
		     (who[0] == '\0' || (strncmp(line + 5, who, strlen(who)) == 0 &&
					 line + 5 + strlen(who) == colon));
	}
	if (f != NULL)
		fclose(f);
	if (last) {
		unlink(nccl_log);
		unsetenv("HERD_MOCK_NCCL_LOG");
	}
	return n;
}

/* ---- the calls, mixed buffers, and what is not carried ---------------------- */

static void calls_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	enum { N = 1024 };
	float *d = dev_alloc(N * size * sizeof(float)), *d2 = dev_alloc(N * size * sizeof(float));
	float host[N];
	herd_comm *comm = NULL;
	void *mine = dev_own_context();   /* the program's: herd leaves it current */

	set_mock(NULL);
	CHECK(d != NULL && d2 != NULL && mine != NULL);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 20000));
	if (comm == NULL || d == NULL || d2 == NULL)
		goto out;
	memset(host, 0, sizeof(host));
	CHECK_OK(herd_comm_allreduce(comm, d, d, N, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_allreduce(comm, d, d2, N, HERD_BFLOAT16, HERD_AVG));
	CHECK_OK(herd_comm_reduce(comm, d, d2, N, HERD_INT64, HERD_MAX, 1));
	CHECK_OK(herd_comm_broadcast(comm, d, d, N, HERD_FLOAT8_E4M3, 0));
	CHECK_OK(herd_comm_allgather(comm, d, d2, N, HERD_FLOAT16));
	CHECK_OK(herd_comm_reduce_scatter(comm, d2, d, N, HERD_UINT8, HERD_PROD));
	CHECK(dev_current_context() == mine);
	/* host memory still goes to herd's own transports, on the same communicator */
	CHECK_OK(herd_comm_allreduce(comm, host, host, N, HERD_FLOAT32, HERD_SUM));
	CHECK_ERR(herd_comm_allreduce(comm, d, host, N, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "herd_comm_allreduce: sendbuf is in GPU memory and recvbuf in host memory");
	/* the calls with no NCCL collective, as groups of sends and receives */
	CHECK_OK(herd_comm_alltoall(comm, d, d2, N, HERD_FLOAT32));
	CHECK_OK(herd_comm_gather(comm, d, rank == 2 ? d2 : host, N, HERD_INT32, 2));
	CHECK_OK(herd_comm_scatter(comm, rank == 1 ? d2 : host, d, N, HERD_INT32, 1));
	CHECK_OK(herd_comm_sendrecv(comm, d, N, (rank + 1) % size, d2, N, (rank + size - 1) % size,
				    HERD_FLOAT64));
	if (rank == 0)
		CHECK_OK(herd_comm_send(comm, d, N, HERD_UINT8, 1));
	if (rank == 1)
		CHECK_OK(herd_comm_recv(comm, d, N, HERD_UINT8, 0));
	/* a non-root's unused receive buffer is not looked at */
	CHECK_OK(herd_comm_reduce(comm, d, rank == 0 ? d2 : host, N, HERD_FLOAT32, HERD_SUM, 0));
	CHECK_OK(herd_comm_barrier(comm));
	/* a split's device collectives make an NCCL communicator of its own */
	{
		herd_comm *half = NULL;

		CHECK_OK(herd_comm_split(&half, comm, rank % 2, rank));
		if (half != NULL)
			CHECK_OK(herd_comm_allreduce(half, d, d, N, HERD_FLOAT32, HERD_MAX));
		herd_comm_free(half);
	}
out:
	herd_comm_free(comm);
	CHECK(dev_current_context() == mine);
}

/* Groups: kept calls run as one at the end; host calls refused inside; a
 * group of sends and receives; nesting. */
static void group_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	enum { N = 512 };
	float *d = dev_alloc(N * sizeof(float)), *e = dev_alloc(N * sizeof(float)), host[N];
	herd_stream s = dev_stream();
	herd_comm *comm = NULL;
	bool absent;

	comm = join(a, rank, size, &absent);
	if (comm == NULL || d == NULL || e == NULL || s == NULL)
		goto out;
	CHECK_ERR(herd_comm_group_end(comm), HERD_EINVAL,
		  "herd_comm_group_end: no group is open");
	CHECK_OK(herd_comm_group_start(comm));
	CHECK_OK(herd_comm_allreduce(comm, d, d, N, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_group_start(comm));     /* nested */
	CHECK_OK(herd_comm_broadcast_stream(comm, e, e, N, HERD_FLOAT32, 0, s));
	CHECK_OK(herd_comm_group_end(comm));       /* inner: nothing runs yet */
	CHECK_ERR(herd_comm_allreduce(comm, host, host, N, HERD_FLOAT32, HERD_SUM), HERD_EINVAL,
		  "allreduce inside a group: a group takes calls on device memory only");
	CHECK_ERR(herd_comm_barrier(comm), HERD_EINVAL, "barrier inside a group");
	CHECK_OK(herd_comm_group_end(comm));
	/* sends and receives around a ring, in one group */
	CHECK_OK(herd_comm_group_start(comm));
	CHECK_OK(herd_comm_send(comm, d, N, HERD_FLOAT32, (rank + 1) % size));
	CHECK_OK(herd_comm_recv(comm, e, N, HERD_FLOAT32, (rank + size - 1) % size));
	CHECK_OK(herd_comm_group_end(comm));
	/* host calls after the group, on the same communicator */
	CHECK_OK(herd_comm_allreduce(comm, host, host, N, HERD_FLOAT32, HERD_SUM));
	CHECK_OK(herd_comm_async_error(comm));
out:
	herd_comm_free(comm);
}

static void test_groups_run_their_calls_at_the_end(void)
{
	dev_args a = { .absent = -1, .victim = -1, .timeout_ms = 20000 };

	run_case(&a, "nccl-group", 3, group_rank, NULL);
}

/* Groups that differ (two calls against one) are a mismatch naming both. */
static void group_mismatch_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	float *d = dev_alloc(64 * sizeof(float));
	herd_comm *comm = NULL;
	herd_status st;
	bool absent;

	comm = join(a, rank, size, &absent);
	if (comm == NULL || d == NULL)
		goto out;
	CHECK_OK(herd_comm_group_start(comm));
	for (int i = 0; i <= (rank == 0); i++)
		CHECK_OK(herd_comm_allreduce(comm, d, d, 64, HERD_FLOAT32, HERD_SUM));
	st = herd_comm_group_end(comm);
	report_status(rank, st, 0, 0);
out:
	herd_comm_free(comm);
}

static void test_differing_groups_are_a_mismatch(void)
{
	dev_args a = { .mock = "hang", .absent = -1, .victim = -1, .timeout_ms = 20000 };
	rank_result res[2];

	run_case(&a, "nccl-group-mismatch", 2, group_mismatch_rank, res);
	for (int r = 0; r < 2; r++) {
		CHECK_INT(res[r].status, HERD_EMISMATCH);
		CHECK(strstr(res[r].msg, "group of 2 calls") != NULL &&
		      strstr(res[r].msg, "group of 1 calls") != NULL);
		if (res[r].status != HERD_EMISMATCH)
			fprintf(stderr, "    rank %d: %s\n", r, res[r].msg);
	}
}

/* Point to point first: the NCCL communicator, which every rank makes at
 * once, does not exist yet. */
static void p2p_first_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	float *d = dev_alloc(64 * sizeof(float));
	herd_comm *comm = NULL;

	set_mock(NULL);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "auto", 20000));
	if (comm != NULL && d != NULL && rank == 0)
		CHECK_ERR(herd_comm_send(comm, d, 64, HERD_FLOAT32, 1), HERD_EINVAL,
			  "send on device memory: this communicator has no NCCL communicator yet");
	herd_comm_free(comm);
}

static void test_device_p2p_needs_a_collective_first(void)
{
	dev_args a = { .absent = -1, .victim = -1 };

	run_case(&a, "nccl-p2p-first", 2, p2p_first_rank, NULL);
}

/* Every call through the stand-in, which holds its caller to NCCL's
 * non-blocking contract (nothing called while the state is in progress);
 * each rank's two NCCL communicators (the communicator's and its split's)
 * end finalized and destroyed, not aborted. */
static void test_device_calls_run_through_nccl(void)
{
	dev_args a = { .absent = -1, .victim = -1 };

	log_start("calls");
	run_case(&a, "nccl-calls", 3, calls_rank, NULL);
	CHECK_INT(log_count("", "ncclCommInitRankConfig", false), 6);
	CHECK_INT(log_count("", "ncclCommFinalize", false), 6);
	CHECK_INT(log_count("", "ncclCommDestroy", false), 6);
	CHECK_INT(log_count("", "ncclCommAbort", true), 0);
}

/* ---- faults ---------------------------------------------------------------- */

static void fault_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	float *d = dev_alloc(4096 * sizeof(float));
	herd_comm *comm = NULL;
	herd_status st;
	int64_t t0;
	bool absent;

	CHECK(d != NULL);
	comm = join(a, rank, size, &absent);
	if (comm == NULL || d == NULL || absent)
		goto out;
	t0 = now_ms();
	st = herd_comm_allreduce(comm, d, d, 4096, HERD_FLOAT32, HERD_SUM);
	report_status(rank, st, now_ms() - t0, 0);
out:
	herd_comm_free(comm);
}

/* Every rank's NCCL call hangs and rank 2 never calls: ranks 0 and 1 get
 * HERD_ETIMEDOUT at the deadline (the first to reach it) plus at most
 * 1 s, naming rank 2. */
static void test_hung_call_times_out_naming_the_missing_rank(void)
{
	dev_args a = { .mock = "hang", .timeout_ms = 2000, .absent = 2, .victim = -1 };
	rank_result res[3];

	log_start("hang");
	run_case(&a, "nccl-hang", 3, fault_rank, res);
	/* the NCCL communicators ranks 0 and 1 waited in are aborted */
	CHECK_INT(log_count("0/3", "ncclCommAbort", false), 1);
	CHECK_INT(log_count("1/3", "ncclCommAbort", false), 1);
	CHECK_INT(log_count("", "ncclCommDestroy", true), 0);
	for (int r = 0; r < 2; r++) {
		CHECK(res[r].valid);
		CHECK_INT(res[r].status, HERD_ETIMEDOUT);
		CHECK(strstr(res[r].msg, "allreduce #") != NULL);
		CHECK(strstr(res[r].msg, "rank 2 (host") != NULL);
		CHECK(strstr(res[r].msg, "did not arrive") != NULL);
		/* A rank told by the first to time out hears it when that rank's
		 * deadline passed: up to the difference of their clocks' starts
		 * (a few ms, more on a busy machine) before its own. */
		CHECK(res[r].t_ms >= 1900 && res[r].t_ms <= 3000);
		/* what it returned, and when: the figure a reader wants */
		printf("    rank %d: %s after %" PRId64 " ms (deadline 2000 ms): %s\n", r,
		       herd_status_name(res[r].status), res[r].t_ms, res[r].msg);
	}
}

/* Rank 1 is killed while both wait in a hung NCCL call: rank 0 returns
 * HERD_EPEER naming it within seconds, long before its 30 s deadline. */
static void test_peer_killed_during_a_device_call_is_named(void)
{
	dev_args a = { .mock = "hang", .timeout_ms = 30000, .absent = -1, .victim = 1 };
	rank_result res[2];

	run_case(&a, "nccl-kill", 2, fault_rank, res);
	CHECK(res[0].valid);
	CHECK_INT(res[0].status, HERD_EPEER);
	CHECK(strstr(res[0].msg, "rank 1 (host") != NULL);
	CHECK(res[0].t_ms < 10000);
	if (res[0].status != HERD_EPEER || res[0].t_ms >= 10000)
		fprintf(stderr, "    rank 0 after %" PRId64 " ms: %s\n", res[0].t_ms, res[0].msg);
}

/* herd_comm_abort from another thread of rank 0 (the harness's
 * abort_later, 300 ms into a hung NCCL call): the call returns
 * HERD_EABORTED at once, rank 1's HERD_EPEER naming rank 0 within seconds
 * (30 s deadline), and both NCCL communicators are aborted. */
static void abort_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	float *d = dev_alloc(4096 * sizeof(float));
	herd_comm *comm = NULL;
	abort_ctx ab = { 0 };
	pthread_t t;
	bool absent, started = false;
	herd_status st;
	int64_t t0;

	comm = join(a, rank, size, &absent);
	if (comm == NULL || d == NULL)
		goto out;
	ab.comm = comm;
	if (rank == 0)
		started = pthread_create(&t, NULL, abort_later, &ab) == 0;
	CHECK(rank != 0 || started);
	t0 = now_ms();
	st = herd_comm_allreduce(comm, d, d, 4096, HERD_FLOAT32, HERD_SUM);
	/* rank 0: from the abort to the return */
	report_status(rank, st, now_ms() - (started ? ab.t_abort : t0), 0);
	if (started)
		pthread_join(t, NULL);
out:
	herd_comm_free(comm);
}

static void test_abort_ends_a_device_call(void)
{
	dev_args a = { .mock = "hang", .timeout_ms = 30000, .absent = -1, .victim = -1 };
	rank_result res[2];

	log_start("abort");
	run_case(&a, "nccl-abort", 2, abort_rank, res);
	CHECK_INT(log_count("0/2", "ncclCommAbort", false), 1);
	CHECK_INT(log_count("1/2", "ncclCommAbort", true), 1);
	CHECK(res[0].valid && res[1].valid);
	CHECK_INT(res[0].status, HERD_EABORTED);
	CHECK(res[0].t_ms >= 0 && res[0].t_ms < 1000);
	CHECK_INT(res[1].status, HERD_EPEER);
	CHECK(strstr(res[1].msg, "rank 0 (host") != NULL);
	CHECK(res[1].t_ms < 10000);
	for (int r = 0; r < 2; r++)
		printf("    rank %d: %s %" PRId64 " ms after %s: %s\n", r,
		       herd_status_name(res[r].status), res[r].t_ms,
		       r == 0 ? "the abort" : "its call", res[r].msg);
}

/* NCCL's asynchronous error on rank 0: HERD_EIO with NCCL's text, at once. */
static void test_async_error_is_nccls_text(void)
{
	dev_args a = { .mock = "error:0:1", .timeout_ms = 20000, .absent = -1, .victim = -1 };
	rank_result res[2];

	run_case(&a, "nccl-error", 2, fault_rank, res);
	CHECK(res[0].valid);
	CHECK_INT(res[0].status, HERD_EIO);
	CHECK(strstr(res[0].msg, "NCCL allreduce: unhandled system error") != NULL);
	CHECK(res[0].t_ms < 5000);
	if (res[0].status != HERD_EIO)
		fprintf(stderr, "    rank 0: %s\n", res[0].msg);
}

/* Calls that disagree (a count) fail with HERD_EMISMATCH naming both, at
 * once, although NCCL would wait (every stand-in call hangs here); with
 * HERD_DEVICE_CHECK=0 they are not compared. */
static void mismatch_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	float *d = dev_alloc(4096 * sizeof(float));
	herd_comm *comm = NULL;
	herd_status st;
	int64_t t0;
	bool absent;

	comm = join(a, rank, size, &absent);
	if (comm == NULL || d == NULL || absent)
		goto out;
	t0 = now_ms();
	st = herd_comm_allreduce(comm, d, d, 4096 - (size_t)rank, HERD_FLOAT32, HERD_SUM);
	report_status(rank, st, now_ms() - t0, 0);
out:
	herd_comm_free(comm);
}

static void test_disagreeing_device_calls_are_a_mismatch(void)
{
	dev_args a = { .mock = "hang", .timeout_ms = 20000, .absent = -1, .victim = -1 };
	rank_result res[2];

	run_case(&a, "nccl-mismatch", 2, mismatch_rank, res);
	for (int r = 0; r < 2; r++) {
		CHECK(res[r].valid);
		CHECK_INT(res[r].status, HERD_EMISMATCH);
		CHECK(strstr(res[r].msg, "count=4096") != NULL && strstr(res[r].msg, "count=4095"));
		CHECK(res[r].t_ms < 5000);
		if (res[r].status != HERD_EMISMATCH)
			fprintf(stderr, "    rank %d: %s\n", r, res[r].msg);
	}
	/* unchecked: the stand-in completes each call as it is */
	a.mock = NULL;
	a.unchecked = 1;
	run_case(&a, "nccl-unchecked", 2, mismatch_rank, res);
	CHECK_INT(res[0].status, HERD_OK);
	CHECK_INT(res[1].status, HERD_OK);
}

/* Stream-ordered calls return once queued; the watchdog finds their end,
 * or their deadline: then the communicator breaks with the report naming
 * the rank that never queued the call, for the next call and
 * herd_comm_async_error alike.  Unchecked, so that the ranks' host
 * threads do not meet the absent rank at each call. */
static void stream_rank(int rank, int size, void *arg)
{
	const dev_args *a = arg;
	float *d = dev_alloc(4096 * sizeof(float)), host[16];
	herd_stream s = dev_stream();
	herd_comm *comm = NULL;
	herd_status st = HERD_OK;
	int64_t t0, until;

	bool absent;

	CHECK(d != NULL && s != NULL);
	comm = join(a, rank, size, &absent);
	if (comm == NULL || d == NULL || absent)
		goto out;
	CHECK_ERR(herd_comm_allreduce_stream(comm, host, host, 16, HERD_FLOAT32, HERD_SUM, s),
		  HERD_EINVAL, "herd_comm_allreduce_stream: the buffers are in host memory");
	t0 = now_ms();
	CHECK_OK(herd_comm_allreduce_stream(comm, d, d, 4096, HERD_FLOAT32, HERD_SUM, s));
	CHECK_OK(herd_comm_broadcast_stream(comm, d, d, 4096, HERD_FLOAT32, 0, s));
	CHECK(now_ms() - t0 < 1000);
	/* within the deadline and a second, the outcome is known */
	until = t0 + a->timeout_ms + 1000;
	while (now_ms() < until && (st = herd_comm_async_error(comm)) == HERD_OK)
		sleep_ms(20);
	report_status(rank, st, now_ms() - t0, 0);
	if (st != HERD_OK)
		CHECK_ERR(herd_comm_allreduce(comm, d, d, 16, HERD_FLOAT32, HERD_SUM), st,
			  "allreduce #1 queued on a stream");
out:
	herd_comm_free(comm);
}

static void test_stream_calls_are_watched(void)
{
	dev_args a = { .mock = NULL, .timeout_ms = 1500, .absent = -1, .victim = -1,
		       .unchecked = 1 };
	rank_result res[3];

	/* done in time: no error ever */
	run_case(&a, "nccl-stream", 2, stream_rank, res);
	CHECK_INT(res[0].status, HERD_OK);
	CHECK_INT(res[1].status, HERD_OK);
	/* hung, and rank 2 never queues it */
	a.mock = "hang";
	a.absent = 2;
	run_case(&a, "nccl-stream-hang", 3, stream_rank, res);
	for (int r = 0; r < 2; r++) {
		CHECK_INT(res[r].status, HERD_ETIMEDOUT);
		CHECK(strstr(res[r].msg, "queued on a stream did not complete within") != NULL ||
		      strstr(res[r].msg, "failed first") != NULL);
		CHECK(strstr(res[r].msg, "rank 2 (host") != NULL);
		CHECK(res[r].t_ms >= 1500 && res[r].t_ms <= 2500);
		if (res[r].status != HERD_ETIMEDOUT || strstr(res[r].msg, "rank 2") == NULL)
			fprintf(stderr, "    rank %d after %" PRId64 " ms: %s\n", r, res[r].t_ms,
				res[r].msg);
	}
}

/* A call that completes late, within the deadline, succeeds. */
static void test_late_completion_succeeds(void)
{
	dev_args a = { .mock = "late:1:700", .timeout_ms = 20000, .absent = -1, .victim = -1 };
	rank_result res[2];

	run_case(&a, "nccl-late", 2, fault_rank, res);
	CHECK(res[0].valid && res[1].valid);
	CHECK_INT(res[0].status, HERD_OK);
	CHECK_INT(res[1].status, HERD_OK);
	CHECK(res[1].t_ms >= 700);
}

/* An init that never ends is bounded by the call's deadline. */
static void test_hung_init_times_out(void)
{
	dev_args a = { .mock = "init-hang:1", .timeout_ms = 2000, .absent = -1, .victim = -1 };
	rank_result res[2];

	run_case(&a, "nccl-init", 2, fault_rank, res);
	CHECK(res[1].valid);
	CHECK_INT(res[1].status, HERD_ETIMEDOUT);
	CHECK(strstr(res[1].msg, "allreduce #") != NULL);
	CHECK(res[1].t_ms >= 2000 && res[1].t_ms <= 3000);
	if (res[1].status != HERD_ETIMEDOUT)
		fprintf(stderr, "    rank 1: %s\n", res[1].msg);
}

int main(void)
{
	harness_start();
	TEST_RUN(test_device_calls_run_through_nccl);
	TEST_RUN(test_device_p2p_needs_a_collective_first);
	TEST_RUN(test_groups_run_their_calls_at_the_end);
	TEST_RUN(test_differing_groups_are_a_mismatch);
	TEST_RUN(test_hung_call_times_out_naming_the_missing_rank);
	TEST_RUN(test_peer_killed_during_a_device_call_is_named);
	TEST_RUN(test_abort_ends_a_device_call);
	TEST_RUN(test_async_error_is_nccls_text);
	TEST_RUN(test_disagreeing_device_calls_are_a_mismatch);
	TEST_RUN(test_stream_calls_are_watched);
	TEST_RUN(test_late_completion_succeeds);
	TEST_RUN(test_hung_init_times_out);
	harness_stop();
	return TEST_DONE();
}
