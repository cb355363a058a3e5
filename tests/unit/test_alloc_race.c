/*
 * Twenty processes race for the GPUs of an 8-GPU node (the DGX H100
 * fixture standing for this node), with real leases in a temporary
 * directory:
 *
 *   - each winner checks that it alone holds each of its GPUs: it creates
 *     a marker per GPU with O_EXCL (a second holder would find it there)
 *     and reads the leases back (each must be its own); it removes the
 *     markers before it lets go;
 *   - then twenty more race to hold GPUs and stay; once all eight are
 *     held, every holder is killed with SIGKILL, and every GPU is free
 *     again at once.
 *
 * Everything is bounded: children stop by a deadline, and the parent kills
 * (by pid) any child that outlives its own.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "test_alloc_util.h"

#define RACERS 20
#define RACE_MS 2500
#define PARENT_LIMIT_MS 60000

enum {
	EXIT_DOUBLE_HOLD = 3, /* a marker was there: two holders of one GPU */
	EXIT_NOT_MINE = 4,    /* the lease read back was someone else's */
	EXIT_ERROR = 5        /* herd_alloc failed in an unexpected way */
};

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static herd_alloc_opts racer_opts(const char *dir, const char *job, int wait_ms)
{
	herd_alloc_opts o = HERD_ALLOC_OPTS_INIT;

	o.lease_dir = dir;
	o.job_id = job;
	o.wait_ms = wait_ms;
	o.ignore_slurm = 1;
	return o;
}

/* Whether every GPU of plan is leased to this process, as a reader sees it. */
static bool leases_are_mine(const herd_cluster *c, const herd_plan *plan, const char *dir,
			    const char *job)
{
	herd_lease_opts lo = HERD_LEASE_OPTS_INIT;
	herd_alloc_gpu_status *s = NULL;
	size_t n = 0;
	bool ok = true;

	lo.dir = dir;
	if (herd_alloc_gpu_status_query(test_node(c, 0), &lo, &s, &n) != HERD_OK)
		return false;
	for (size_t i = 0; i < herd_plan_gpu_count(plan); i++) {
		const herd_alloc_gpu_status *g = &s[test_plan_gpu(plan, i)->index];

		ok &= g->state == HERD_LEASE_EXCLUSIVE && g->pid == (int64_t)getpid() &&
		      strcmp(g->job, job) == 0;
	}
	herd_free(s);
	return ok;
}

static void marker_path(const char *markers, const char *uuid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", markers, uuid);
}

/* A racer: take 1 to 3 GPUs, check, hold a moment, let go; until the deadline. */
static void racer(int id, const herd_cluster *c, const char *dir, const char *markers, int out)
{
	unsigned int seed = (unsigned int)getpid();
	char job[32], path[4096];
	long deadline = now_ms() + RACE_MS;
	int wins = 0;

	snprintf(job, sizeof(job), "racer-%d", id);
	while (now_ms() < deadline) {
		herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
		herd_alloc_opts o = racer_opts(dir, job, 100);
		herd_plan *p = NULL;
		herd_status st;

		req.gpus = 1 + (int)(rand_r(&seed) % 3);
		st = herd_alloc(&p, c, &req, &o);
		if (st == HERD_ENORESOURCE || st == HERD_EBUSY)
			continue;
		if (st != HERD_OK) {
			fprintf(stderr, "racer %d: %s\n", id, herd_last_error());
			_exit(EXIT_ERROR);
		}
		for (size_t i = 0; i < herd_plan_gpu_count(p); i++) {
			int fd;

			marker_path(markers, test_plan_gpu(p, i)->uuid, path, sizeof(path));
			fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
			if (fd < 0) {
				fprintf(stderr, "racer %d: %s is held twice\n", id,
					test_plan_gpu(p, i)->uuid);
				_exit(EXIT_DOUBLE_HOLD);
			}
			close(fd);
		}
		if (!leases_are_mine(c, p, dir, job))
			_exit(EXIT_NOT_MINE);
		sleep_ms(2 + rand_r(&seed) % 8);
		if (!leases_are_mine(c, p, dir, job))
			_exit(EXIT_NOT_MINE);
		for (size_t i = 0; i < herd_plan_gpu_count(p); i++) {
			marker_path(markers, test_plan_gpu(p, i)->uuid, path, sizeof(path));
			unlink(path);
		}
		herd_plan_free(p);
		wins++;
	}
	if (write(out, &wins, sizeof(wins)) != sizeof(wins))
		_exit(EXIT_ERROR);
	_exit(0);
}

/* A holder: take GPUs (waiting up to 20 s), say how many, stay until killed. */
static void stayer(int id, const herd_cluster *c, const char *dir, int out)
{
	unsigned int seed = (unsigned int)getpid();
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_alloc_opts o;
	herd_plan *p = NULL;
	char job[32], got[8];

	snprintf(job, sizeof(job), "stayer-%d", id);
	o = racer_opts(dir, job, 20000);
	req.gpus = 1 + (int)(rand_r(&seed) % 2);
	if (herd_alloc(&p, c, &req, &o) != HERD_OK)
		_exit(0); /* outwaited: the others held on */
	memset(got, 'g', sizeof(got));
	if (write(out, got, herd_plan_gpu_count(p)) != (ssize_t)herd_plan_gpu_count(p))
		_exit(EXIT_ERROR);
	for (int i = 0; i < 600; i++)
		sleep_ms(100); /* a minute at most; the parent kills it long before */
	_exit(0);
}

/* Waits for every child, up to the deadline; then kills the rest by pid. */
static void reap(pid_t *pids, int n, int *status, long deadline)
{
	int left = n;

	while (left > 0 && now_ms() < deadline) {
		for (int i = 0; i < n; i++) {
			if (pids[i] > 0 && waitpid(pids[i], &status[i], WNOHANG) == pids[i]) {
				pids[i] = -pids[i];
				left--;
			}
		}
		sleep_ms(10);
	}
	for (int i = 0; i < n; i++) {
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &status[i], 0);
			status[i] = -1;
			pids[i] = -pids[i];
		}
	}
}

static void test_alloc_race_twenty_processes_never_share_a_gpu(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	char *dir = make_tmpdir(), *markers = make_tmpdir();
	pid_t pids[RACERS];
	int status[RACERS], fds[2], total = 0;
	long start = now_ms();

	CHECK_INT(pipe(fds), 0);
	for (int i = 0; i < RACERS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(fds[0]);
			racer(i, c, dir, markers, fds[1]);
		}
	}
	close(fds[1]);
	reap(pids, RACERS, status, start + PARENT_LIMIT_MS);
	for (int i = 0; i < RACERS; i++) {
		CHECK(WIFEXITED(status[i]));
		CHECK_INT(WIFEXITED(status[i]) ? WEXITSTATUS(status[i]) : -1, 0);
	}
	for (int wins; read(fds[0], &wins, sizeof(wins)) == sizeof(wins);)
		total += wins;
	close(fds[0]);
	printf("  %d racers won %d allocations in %ld ms\n", RACERS, total, now_ms() - start);
	/* Eight GPUs for ~2.5 s, held a few ms each: many turns, every one checked. */
	CHECK(total >= RACERS);
	/* Every marker was removed: no winner left a GPU behind. */
	CHECK_INT(rmdir(markers), 0);
	free(markers);
	rm_tree(dir);
	herd_cluster_free(c);
}

static void test_alloc_race_kill9_of_all_holders_frees_every_gpu(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	const herd_node *node = test_node(c, 0);
	char *dir = make_tmpdir();
	herd_lease_opts lo = HERD_LEASE_OPTS_INIT;
	herd_alloc_opts o = racer_opts(dir, "after", 0);
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_alloc_gpu_status *s = NULL;
	pid_t pids[RACERS];
	int status[RACERS], fds[2], held = 0;
	long deadline = now_ms() + 30000;
	herd_plan *p = NULL;
	size_t n = 0;

	CHECK_INT(pipe(fds), 0);
	for (int i = 0; i < RACERS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(fds[0]);
			stayer(i, c, dir, fds[1]);
		}
	}
	close(fds[1]);
	while (held < 8 && now_ms() < deadline) {
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		char buf[64];
		ssize_t got;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		got = read(fds[0], buf, sizeof(buf));
		if (got <= 0)
			break;
		held += (int)got;
	}
	CHECK_INT(held, 8);
	/* All eight held, each by one of the children, as the leases say. */
	lo.dir = dir;
	CHECK_OK(herd_alloc_gpu_status_query(node, &lo, &s, &n));
	for (size_t g = 0; s != NULL && g < n; g++) {
		bool by_child = false;

		for (int i = 0; i < RACERS; i++)
			by_child |= s[g].pid == pids[i];
		CHECK_INT(s[g].state, HERD_LEASE_EXCLUSIVE);
		CHECK(by_child);
		CHECK(strncmp(s[g].job, "stayer-", 7) == 0);
	}
	herd_free(s);
	s = NULL;
	/* kill -9 every child, holders and waiters alike, by pid. */
	for (int i = 0; i < RACERS; i++)
		kill(pids[i], SIGKILL);
	reap(pids, RACERS, status, now_ms() + 10000);
	for (int i = 0; i < RACERS; i++)
		CHECK(WIFSIGNALED(status[i]) ||
		      (WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0));
	close(fds[0]);
	/* Every GPU free again at once, with the dead holders' records still there. */
	CHECK_OK(herd_alloc_gpu_status_query(node, &lo, &s, &n));
	for (size_t g = 0; s != NULL && g < n; g++)
		CHECK_INT(s[g].state, HERD_LEASE_FREE);
	herd_free(s);
	req.gpus = 8;
	req.gpus_per_node = 8;
	CHECK_OK(herd_alloc(&p, c, &req, &o));
	CHECK_INT(herd_plan_gpu_count(p), 8);
	herd_plan_free(p);
	rm_tree(dir);
	herd_cluster_free(c);
}

int main(void)
{
	unsetenv("HERD_INVENTORY");
	unsetenv("SLURM_JOB_ID");
	setvbuf(stdout, NULL, _IONBF, 0);
	TEST_RUN(test_alloc_race_twenty_processes_never_share_a_gpu);
	TEST_RUN(test_alloc_race_kill9_of_all_holders_frees_every_gpu);
	return TEST_DONE();
}
