/*
 * tests/unit/test_ckpt_crash.c - crash consistency.  Saving processes are
 * killed with SIGKILL at random moments while they save step after step
 * (each step's data a function of the step); after every kill, restoring
 * the latest step must give the last committed step bit-exact (the last
 * step whose save returned, or the one in flight if its commit landed),
 * and a half-written step is never chosen.  A world of one process and a
 * world of two ranks; every round is bounded in time.
 */
#include <sys/stat.h>

#include "comm_harness.h"

#include "ckpt/ckpt_internal.h"

enum { A_N = 48 * 1024, B_N = 40000 };

static char dir1[256], dir2[256];
static char scope[64];

/* The state of a step: two tensors and a blob, all derived from it. */
typedef struct state {
	float a[A_N];
	uint8_t b[B_N];
	int64_t step;
} state;

static void make_state(state *s, int64_t step)
{
	test_fill_bytes(s->a, sizeof(s->a), (uint64_t)step);
	test_fill_bytes(s->b, sizeof(s->b), (uint64_t)step + 1000003);
	s->step = step;
}

static herd_status register_state(herd_ckpt *ck, state *s)
{
	uint64_t ga[1] = { A_N }, gb[1] = { B_N };

	HERD_CHECK(herd_ckpt_add_tensor(ck, "a", s->a, HERD_FLOAT32, 1, ga, NULL, NULL));
	HERD_CHECK(herd_ckpt_add_tensor(ck, "b", s->b, HERD_UINT8, 1, gb, NULL, NULL));
	return herd_ckpt_add_blob(ck, "step", &s->step, sizeof(s->step), HERD_CKPT_BLOB_RANK0);
}

/* Whether s holds exactly the state of step. */
static bool state_is(const state *s, int64_t step)
{
	state *want = malloc(sizeof(*want));
	bool same;

	make_state(want, step);
	same = memcmp(want, s, sizeof(*s)) == 0;
	free(want);
	return same;
}

/* Leftovers of an interrupted save: temporary step directories. */
static int leftovers(const char *dir)
{
	herd_ckpt_step_info *info = NULL;
	size_t n = 0;
	int count = 0;

	if (herd_ckpt_list(dir, &info, &n) != HERD_OK)
		return 0;
	for (size_t i = 0; i < n; i++)
		count += !info[i].committed;
	herd_free(info);
	return count;
}

/*
 * The program under test: resume from the latest step, then save the
 * following steps until killed, alternating synchronous and asynchronous
 * saves.  Reports each step whose save returned.
 */
static void save_forever(herd_comm *comm, const char *dir, void (*committed)(int64_t, void *),
			 void *arg)
{
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	state *s = calloc(1, sizeof(*s));
	herd_ckpt *ck = NULL;
	int64_t step = -1;
	herd_status st;
	int64_t deadline = now_ms() + 10000;

	o.keep_last = 3;
	o.chunk_bytes = 16384;
	o.staging_bytes = 64 * 1024;
	CHECK_OK(herd_ckpt_open(&ck, dir, comm, &o));
	CHECK_OK(register_state(ck, s));
	st = herd_ckpt_restore(ck, HERD_CKPT_LATEST, &step);
	if (st == HERD_OK)
		CHECK(state_is(s, step));
	else
		CHECK_INT(st, HERD_ENOTFOUND);
	for (int64_t next = step + 1; now_ms() < deadline; next++) {
		make_state(s, next);
		if (next % 2 == 0) {
			CHECK_OK(herd_ckpt_save(ck, next));
		} else {
			CHECK_OK(herd_ckpt_save_async(ck, next));
			CHECK_OK(herd_ckpt_wait(ck));
		}
		committed(next, arg);
	}
	herd_ckpt_free(ck);
	free(s);
}

/* After a kill: restore(latest) is the last committed step, bit-exact. */
static void check_after_kill(const char *dir, int64_t last_ok, int round)
{
	state *s = calloc(1, sizeof(*s));
	herd_ckpt *ck = NULL;
	int64_t got = -2, newest = -2;

	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, NULL));
	CHECK_OK(register_state(ck, s));
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	if (got != last_ok && got != last_ok + 1)
		TEST_FAIL_("round %d: restored step %" PRId64 ", the last committed is %" PRId64
			   " (or %" PRId64 " if its commit landed)", round, got, last_ok, last_ok + 1);
	if (!state_is(s, got))
		TEST_FAIL_("round %d: step %" PRId64 " restored, but its data differ", round, got);
	test_checks += 2;
	/* The step chosen is the newest committed one, and it verifies whole. */
	CHECK_OK(herd_ckpt_latest(dir, &newest));
	CHECK_INT(newest, got);
	CHECK_OK(herd_ckpt_verify(dir, got, NULL, NULL, NULL));
	CHECK_INT(leftovers(dir), 0);    /* open swept what the kill left */
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	free(s);
}

/* ---- one process -------------------------------------------------------- */

static void report_to_pipe(int64_t step, void *arg)
{
	int fd = *(int *)arg;
	ssize_t n = write(fd, &step, sizeof(step));

	(void)n;
}

static void test_ckpt_kill9_during_saves_single_process(void)
{
	unsigned seed = 12345;
	int64_t last_ok = -1, deadline = now_ms() + 60000;
	int rounds = 0, mid_save = 0;

	while (rounds < 60 && now_ms() < deadline) {
		int fds[2], ws;
		int64_t step;
		pid_t pid;

		CHECK(pipe(fds) == 0);
		fflush(stdout);
		fflush(stderr);
		pid = fork();
		if (pid == 0) {
			close(fds[0]);
			test_failures = 0;
			save_forever(NULL, dir1, report_to_pipe, &fds[1]);
			_exit(test_failures > 0 ? 1 : 0);
		}
		close(fds[1]);
		/* Let the child restore and save a few steps, then kill it. */
		sleep_ms(5 + (int)(rand_r(&seed) % 60));
		kill(pid, SIGKILL);
		waitpid(pid, &ws, 0);
		if (!(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL))
			TEST_FAIL_("round %d: the saving process ended with status %#x", rounds, ws);
		while (read(fds[0], &step, sizeof(step)) == (ssize_t)sizeof(step))
			last_ok = step;
		close(fds[0]);
		mid_save += leftovers(dir1) > 0;
		if (last_ok >= 0)
			check_after_kill(dir1, last_ok, rounds);
		/* A restored in-flight step becomes the base of the next round. */
		if (last_ok >= 0)
			herd_ckpt_latest(dir1, &last_ok);
		rounds++;
	}
	printf("# %d rounds, %d killed mid-save, last step %" PRId64 "\n", rounds, mid_save,
	       last_ok);
	CHECK(rounds >= 50);
	CHECK(mid_save >= 5);
	CHECK(last_ok > 0);
}

/* ---- two ranks ------------------------------------------------------------ */

static void report_to_parent(int64_t step, void *arg)
{
	int rank = *(int *)arg;

	report_status(rank, HERD_OK, step, 0);
}

static void saving_rank(int rank, int size, void *arg)
{
	herd_comm *comm = NULL;

	(void)arg;
	/* TCP: a killed rank leaves no shared memory behind. */
	CHECK_OK(harness_comm(&comm, scope, rank, size, "tcp", 20000));
	if (comm != NULL)
		save_forever(comm, dir2, report_to_parent, &rank);
	_exit(test_failures > 0 ? 1 : 0);
}

typedef struct killer {
	unsigned seed;
} killer;

static void kill_both(const pid_t *pids, int size, void *arg)
{
	killer *k = arg;

	sleep_ms(150 + (int)(rand_r(&k->seed) % 150));
	/* Stopped first, so that no rank sees the other die and fails on its own. */
	for (int i = 0; i < size; i++)
		kill(pids[i], SIGSTOP);
	for (int i = 0; i < size; i++)
		kill(pids[i], SIGKILL);
}

static void test_ckpt_kill9_during_saves_two_ranks(void)
{
	killer k = { 777 };
	int64_t last_ok = -1, deadline = now_ms() + 60000;
	int rounds = 0;

	while (rounds < 20 && now_ms() < deadline) {
		rank_result res[2];

		memset(res, 0, sizeof(res));
		harness_scope(scope, sizeof(scope), "ckpt-crash");
		CHECK_INT(run_ranks(2, saving_rank, NULL, 20000, kill_both, &k, 3u, res), 0);
		for (int r = 0; r < 2; r++)
			if (res[r].valid && res[r].t_ms > last_ok)
				last_ok = res[r].t_ms;
		if (last_ok >= 0)
			check_after_kill(dir2, last_ok, rounds);
		if (last_ok >= 0)
			herd_ckpt_latest(dir2, &last_ok);
		rounds++;
	}
	printf("# %d rounds of 2 ranks, last step %" PRId64 "\n", rounds, last_ok);
	CHECK(rounds >= 10);
	CHECK(last_ok > 0);
}

int main(void)
{
	char cmd[600];

	snprintf(dir1, sizeof(dir1), "/tmp/herd-ckpt-crash1.XXXXXX");
	snprintf(dir2, sizeof(dir2), "/tmp/herd-ckpt-crash2.XXXXXX");
	if (mkdtemp(dir1) == NULL || mkdtemp(dir2) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	herd_log_set_level(HERD_LOG_ERROR);
	harness_start();
	TEST_RUN(test_ckpt_kill9_during_saves_single_process);
	TEST_RUN(test_ckpt_kill9_during_saves_two_ranks);
	harness_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir1, dir2);
	if (test_failures == 0 && system(cmd) != 0)
		fprintf(stderr, "cannot remove the test directories\n");
	return TEST_DONE();
}
