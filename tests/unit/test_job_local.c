/*
 * tests/unit/test_job_local.c - the job API on the local backend, with real
 * ranks (sh, sleep): the environment contract, whole lines with stdout and
 * stderr apart, exit codes and signals, exec failures, placement refusals,
 * kill with a grace period, wait deadlines, restarts and log files.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#include "launch/launch_internal.h"

#define MAX_LINES 256

struct line {
	int rank;
	herd_job_stream stream;
	char *text;
	size_t len;
};

struct capture {
	pthread_mutex_t mu;
	struct line lines[MAX_LINES];
	int n;
	char host[256];
};

static void capture_line(void *ud, int rank, const char *host, herd_job_stream stream,
			 const char *line, size_t len)
{
	struct capture *c = ud;

	pthread_mutex_lock(&c->mu);
	if (c->n < MAX_LINES) {
		struct line *l = &c->lines[c->n++];

		l->rank = rank;
		l->stream = stream;
		l->text = malloc(len + 1);
		memcpy(l->text, line, len);
		l->text[len] = '\0';
		l->len = len;
		snprintf(c->host, sizeof(c->host), "%s", host);
	}
	pthread_mutex_unlock(&c->mu);
}

static void capture_init(struct capture *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
}

static void capture_free(struct capture *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->lines[i].text);
	pthread_mutex_destroy(&c->mu);
}

/* The text of the k-th line of rank on stream (0-based), or NULL. */
static const char *line_of(struct capture *c, int rank, herd_job_stream s, int k)
{
	const char *found = NULL;

	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < c->n && found == NULL; i++)
		if (c->lines[i].rank == rank && c->lines[i].stream == s && k-- == 0)
			found = c->lines[i].text;
	pthread_mutex_unlock(&c->mu);
	return found;
}

static int count_lines(struct capture *c, int rank, herd_job_stream s)
{
	int n = 0;

	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < c->n; i++)
		if (c->lines[i].rank == rank && c->lines[i].stream == s)
			n++;
	pthread_mutex_unlock(&c->mu);
	return n;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Waits (5 s at most) until ranks 0 and 1 have each printed a line. */
static void wait_first_lines(struct capture *c)
{
	for (int i = 0; i < 500 && (count_lines(c, 0, HERD_JOB_STDOUT) == 0 ||
				    count_lines(c, 1, HERD_JOB_STDOUT) == 0); i++)
		sleep_ms(10);
}

/* A test's spec runs argv as nranks ranks, its output going to c. */
static void setup(herd_job_spec *spec, struct capture *c, const char **argv, int nranks)
{
	capture_init(c);
	spec->argv = argv;
	spec->nranks = nranks;
}

/* Runs argv as nranks ranks to the end; returns the exit status, -1 on error. */
static int run(herd_job_spec *spec, struct capture *c, herd_job **keep_job)
{
	herd_job *job = NULL;
	int status = -1;

	spec->output = capture_line;
	spec->output_userdata = c;
	CHECK_OK(herd_job_launch(&job, spec));
	if (job == NULL)
		return -1;
	CHECK_OK(herd_job_wait(job, 60000, &status));
	if (keep_job != NULL)
		*keep_job = job;
	else
		herd_job_free(job);
	return status;
}

/*
 * Rank r of job has ended in state, with value its exit code (exited,
 * failed to start) or the signal that ended it (signaled).
 */
static void check_rank_end(herd_job *job, int r, herd_job_rank_state state, int value)
{
	herd_job_rank_status rs;

	CHECK_OK(herd_job_rank(job, r, &rs));
	CHECK_INT(rs.rank, r);
	CHECK_INT(rs.state, state);
	if (state == HERD_JOB_RANK_SIGNALED)
		CHECK_INT(rs.signal, value);
	else
		CHECK_INT(rs.exit_code, value);
}

static void test_job_every_rank_sees_the_environment_contract(void)
{
	const char *argv[] = { "sh", "-c",
		"echo \"$HERD_RANK $HERD_WORLD_SIZE $HERD_LOCAL_RANK $HERD_LOCAL_WORLD_SIZE "
		"$HERD_NODE_RANK $HERD_NNODES $HERD_RESTART_COUNT\"; "
		"echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
		"$TORCHELASTIC_RESTART_COUNT\"; "
		"echo \"$HERD_JOB_ID\"; echo \"$HERD_JOB_SECRET\"; echo \"$HERD_STORE\"; "
		"echo \"$MASTER_PORT\"; echo \"$EXTRA $HERD_NNODES\"", NULL };
	const char *env[] = { "EXTRA=hello world", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 3);
	spec.env = env;
	CHECK_INT(run(&spec, &c, &job), 0);
	if (job == NULL)
		goto out;
	for (int r = 0; r < 3; r++) {
		char want[256];
		const char *id = line_of(&c, r, HERD_JOB_STDOUT, 2);
		const char *secret = line_of(&c, r, HERD_JOB_STDOUT, 3);
		const char *store = line_of(&c, r, HERD_JOB_STDOUT, 4);
		const char *port = line_of(&c, r, HERD_JOB_STDOUT, 5);
		herd_job_rank_status rs;

		snprintf(want, sizeof(want), "%d 3 %d 3 0 1 0", r, r);
		CHECK_STR(line_of(&c, r, HERD_JOB_STDOUT, 0), want);
		snprintf(want, sizeof(want), "%d %d 3 3 0 127.0.0.1 0", r, r);
		CHECK_STR(line_of(&c, r, HERD_JOB_STDOUT, 1), want);
		CHECK_STR(id, herd_job_id(job));
		CHECK(secret != NULL && strlen(secret) == 64 &&
		      strspn(secret, "0123456789abcdef") == 64);
		CHECK(store != NULL && strncmp(store, "127.0.0.1:", 10) == 0 &&
		      atoi(store + 10) > 0);
		CHECK(port != NULL && atoi(port) > 0 && atoi(port) < 65536);
		CHECK_STR(line_of(&c, r, HERD_JOB_STDOUT, 6), "hello world 1");
		CHECK_INT(count_lines(&c, r, HERD_JOB_STDERR), 0);
		CHECK_OK(herd_job_rank(job, r, &rs));
		CHECK_INT(rs.rank, r);
		CHECK_INT(rs.local_rank, r);
		CHECK_INT(rs.node_rank, 0);
		CHECK_INT(rs.state, HERD_JOB_RANK_EXITED);
		CHECK_INT(rs.exit_code, 0);
		CHECK(rs.pid > 0);
		CHECK_STR(rs.host, c.host);
		/* Every rank got the same secret and store. */
		CHECK_STR(secret, line_of(&c, 0, HERD_JOB_STDOUT, 3));
		CHECK_STR(store, line_of(&c, 0, HERD_JOB_STDOUT, 4));
	}
	CHECK_INT(herd_job_size(job), 3);
	CHECK(herd_job_failure(job) == NULL);
	herd_job_free(job);
out:
	capture_free(&c);
}

static void test_job_output_arrives_as_whole_lines_with_streams_apart(void)
{
	/* A line written in many small pieces, with pauses, is still one line;
	 * an overlong one is cut at HERD_JOB_LINE_MAX. */
	const char *argv[] = { "sh", "-c",
		"for i in 1 2 3 4 5 6 7 8; do printf ab; echo e$i >&2; sleep 0.02; done; echo; "
		"head -c 70000 /dev/zero | tr '\\0' x; echo; printf tail", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	const char *l;

	setup(&spec, &c, argv, 1);
	CHECK_INT(run(&spec, &c, NULL), 0);
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 0), "abababababababab");
	l = line_of(&c, 0, HERD_JOB_STDOUT, 1);
	CHECK(l != NULL && strlen(l) == HERD_JOB_LINE_MAX && strspn(l, "x") == HERD_JOB_LINE_MAX);
	l = line_of(&c, 0, HERD_JOB_STDOUT, 2);
	CHECK(l != NULL && strlen(l) == 70000 - HERD_JOB_LINE_MAX);
	/* The last line, without a newline, comes out at the end. */
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 3), "tail");
	CHECK_INT(count_lines(&c, 0, HERD_JOB_STDOUT), 4);
	CHECK_INT(count_lines(&c, 0, HERD_JOB_STDERR), 8);
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDERR, 0), "e1");
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDERR, 7), "e8");
	capture_free(&c);
}

static void test_job_exit_code_of_first_failed_rank_with_summary(void)
{
	const char *argv[] = { "sh", "-c",
		"if [ $RANK = 1 ]; then echo first >&2; echo 'went wrong' >&2; exit 5; fi; "
		"sleep 30", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	int64_t t0 = now_ms();

	setup(&spec, &c, argv, 3);
	spec.grace_ms = 2000;
	CHECK_INT(run(&spec, &c, &job), 5);
	/* The others were stopped, not waited for. */
	CHECK(now_ms() - t0 < 15000);
	if (job != NULL) {
		const char *f = herd_job_failure(job);

		CHECK(f != NULL && strstr(f, "rank 1 on ") != NULL);
		CHECK(f != NULL && strstr(f, "exited with code 5") != NULL);
		CHECK(f != NULL && strstr(f, "\n  first\n  went wrong") != NULL);
		check_rank_end(job, 1, HERD_JOB_RANK_EXITED, 5);
		check_rank_end(job, 0, HERD_JOB_RANK_SIGNALED, SIGTERM);
		herd_job_free(job);
	}
	capture_free(&c);
}

static void test_job_rank_killed_by_signal_gives_128_plus_signal(void)
{
	const char *argv[] = { "sh", "-c", "kill -KILL $$", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 1);
	CHECK_INT(run(&spec, &c, &job), 128 + SIGKILL);
	if (job != NULL) {
		check_rank_end(job, 0, HERD_JOB_RANK_SIGNALED, SIGKILL);
		CHECK(strstr(herd_job_failure(job), "killed by signal 9") != NULL);
		herd_job_free(job);
	}
	capture_free(&c);
}

static void test_job_exec_failure_is_127_on_every_rank(void)
{
	const char *argv[] = { "herd-no-such-program-xyz", "arg", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 3);
	CHECK_INT(run(&spec, &c, &job), 127);
	for (int r = 0; job != NULL && r < 3; r++) {
		herd_job_rank_status rs;

		CHECK_OK(herd_job_rank(job, r, &rs));
		CHECK_INT(rs.state, HERD_JOB_RANK_FAILED_START);
		CHECK_INT(rs.exit_code, 127);
		CHECK_STR(rs.error, "exec \"herd-no-such-program-xyz\": No such file or directory");
	}
	herd_job_free(job);
	capture_free(&c);
}

/*
 * A command that is there but cannot be executed (no execute permission,
 * a directory) fails to start with 126, as a shell says of it; 127 is for
 * one that is not there.
 */
static void test_job_exec_of_what_cannot_be_executed_is_126(void)
{
	char *dir = make_tmpdir(), file[512];
	const char *argv[] = { file, NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	FILE *f;

	snprintf(file, sizeof(file), "%s/script", dir);
	f = fopen(file, "w");
	CHECK(f != NULL);
	if (f == NULL)
		goto out;
	fputs("#!/bin/sh\necho ran\n", f);
	fclose(f);
	CHECK(chmod(file, 0644) == 0);
	for (int k = 0; k < 2; k++) {
		char want[600];

		/* The file without the execute bit, then the directory. */
		if (k == 1)
			snprintf(file, sizeof(file), "%s", dir);
		setup(&spec, &c, argv, 2);
		CHECK_INT(run(&spec, &c, &job), 126);
		snprintf(want, sizeof(want), "exec \"%s\": Permission denied (%s)", file,
			 k == 0 ? "no execute permission" : "a directory");
		for (int r = 0; job != NULL && r < 2; r++) {
			herd_job_rank_status rs;

			CHECK_OK(herd_job_rank(job, r, &rs));
			CHECK_INT(rs.state, HERD_JOB_RANK_FAILED_START);
			CHECK_INT(rs.exit_code, 126);
			CHECK_STR(rs.error, want);
		}
		CHECK_INT(count_lines(&c, 0, HERD_JOB_STDOUT), 0);
		herd_job_free(job);
		job = NULL;
		capture_free(&c);
	}
out:
	rm_tree(dir);
}

static void test_job_bad_workdir_fails_start_with_chdir_message(void)
{
	const char *argv[] = { "true", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	herd_job_rank_status rs;

	setup(&spec, &c, argv, 1);
	spec.workdir = "/nonexistent/herd-dir";
	CHECK_INT(run(&spec, &c, &job), 127);
	if (job != NULL) {
		CHECK_OK(herd_job_rank(job, 0, &rs));
		CHECK_STR(rs.error, "chdir to /nonexistent/herd-dir failed: No such file or "
			  "directory");
		herd_job_free(job);
	}
	capture_free(&c);
}

static void test_job_more_ranks_than_slots_refused_before_start(void)
{
	const char *argv[] = { "sh", "-c", "touch started", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	herd_job *job = (herd_job *)1;
	herd__launch_node *nodes = NULL;
	size_t n = 3;

	/* The local node is one node: 3 ranks at 2 per node need 2. */
	spec.argv = argv;
	spec.nranks = 3;
	spec.per_node = 2;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_ENORESOURCE, "need 2 nodes; there are 1");
	CHECK(job == NULL);

	/* Placement over nodes with slots. */
	CHECK_OK(herd__calloc(&nodes, 3, sizeof(*nodes), "test"));
	nodes[0].slots = 2;
	nodes[1].slots = 1;
	nodes[2].slots = 4;
	for (int i = 0; i < 3; i++) {
		char h[8];

		snprintf(h, sizeof(h), "n%d", i);
		CHECK_OK(herd__strdup(&nodes[i].host, h));
	}
	CHECK_ERR(herd__launch_place(nodes, &n, 8, 0), HERD_ENORESOURCE, "7 slots in all");
	CHECK_ERR(herd__launch_place(nodes, &n, 3, 2), HERD_ENORESOURCE, "node n1 has 1 slots");
	CHECK_OK(herd__launch_place(nodes, &n, 4, 0));
	CHECK_INT(n, 3);
	CHECK_INT(nodes[0].nranks, 2);
	CHECK_INT(nodes[0].ranks[1], 1);
	CHECK_INT(nodes[1].nranks, 1);
	CHECK_INT(nodes[1].ranks[0], 2);
	CHECK_INT(nodes[2].nranks, 1);
	CHECK_INT(nodes[2].ranks[0], 3);
	CHECK_INT(nodes[2].node_rank, 2);
	/* Nodes left without ranks are dropped. */
	CHECK_OK(herd__launch_place(nodes, &n, 2, 0));
	CHECK_INT(n, 1);
	CHECK_STR(nodes[0].host, "n0");
	herd__launch_nodes_free(nodes, n);

	/* Unknown slots spread evenly. */
	n = 2;
	CHECK_OK(herd__calloc(&nodes, 2, sizeof(*nodes), "test"));
	CHECK_OK(herd__strdup(&nodes[0].host, "a"));
	CHECK_OK(herd__strdup(&nodes[1].host, "b"));
	CHECK_OK(herd__launch_place(nodes, &n, 5, 0));
	CHECK_INT(nodes[0].nranks, 3);
	CHECK_INT(nodes[1].nranks, 2);
	CHECK_INT(nodes[1].ranks[0], 3);
	herd__launch_nodes_free(nodes, n);
}

static void test_job_bad_spec_names_the_field(void)
{
	const char *argv[] = { "true", NULL };
	const char *env[] = { "NOEQUALS", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	herd_job *job = NULL;

	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "herd_job_spec.argv");
	spec.argv = argv;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "herd_job_spec.nranks is 0");
	spec.nranks = 1;
	spec.env = env;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "herd_job_spec.env[0]");
	spec.env = NULL;
	spec.version = 0;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "HERD_JOB_SPEC_INIT");
}

/* Whether pid is gone (or a zombie nobody will see again). */
static int gone(long pid)
{
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void test_job_kill_stops_sleeping_ranks_within_grace(void)
{
	const char *argv[] = { "sleep", "1000", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	long pids[3] = { 0, 0, 0 };
	int status = -1;
	int64_t t0;

	setup(&spec, &c, argv, 3);
	spec.grace_ms = 1000;
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL)
		goto out;
	for (int r = 0; r < 3; r++) {
		herd_job_rank_status rs;

		CHECK_OK(herd_job_rank(job, r, &rs));
		CHECK_INT(rs.state, HERD_JOB_RANK_RUNNING);
		pids[r] = rs.pid;
		CHECK(rs.pid > 0 && !gone(rs.pid));
	}
	/* A wait with a deadline returns while the job runs. */
	t0 = now_ms();
	CHECK_ERR(herd_job_wait(job, 200, &status), HERD_ETIMEDOUT, "still running");
	CHECK(now_ms() - t0 >= 190);
	t0 = now_ms();
	CHECK_OK(herd_job_kill(job));
	/* sleep dies of SIGTERM at once; the bound is grace + slack. */
	CHECK(now_ms() - t0 < 1000 + 3000);
	CHECK_OK(herd_job_wait(job, 0, &status));
	CHECK_INT(status, 128 + SIGTERM);
	for (int r = 0; r < 3; r++) {
		check_rank_end(job, r, HERD_JOB_RANK_SIGNALED, SIGTERM);
		CHECK(gone(pids[r]));
	}
	herd_job_free(job);
out:
	capture_free(&c);
}

static void test_job_ranks_ignoring_sigterm_get_sigkill_after_grace(void)
{
	const char *argv[] = { "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done",
			       NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	int status = -1;
	int64_t t0;

	setup(&spec, &c, argv, 2);
	spec.grace_ms = 700;
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL)
		goto out;
	wait_first_lines(&c);
	CHECK_INT(count_lines(&c, 1, HERD_JOB_STDOUT), 1);
	t0 = now_ms();
	CHECK_OK(herd_job_kill(job));
	CHECK(now_ms() - t0 >= 650);
	CHECK(now_ms() - t0 < 700 + 3000);
	CHECK_OK(herd_job_wait(job, 0, &status));
	for (int r = 0; r < 2; r++)
		check_rank_end(job, r, HERD_JOB_RANK_SIGNALED, SIGKILL);
	herd_job_free(job);
out:
	capture_free(&c);
}

static void test_job_signal_reaches_every_rank(void)
{
	const char *argv[] = { "sh", "-c", "trap 'echo got USR1; exit 0' USR1; echo ready; "
			       "while :; do sleep 0.05; done", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	int status = -1;

	setup(&spec, &c, argv, 2);
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL)
		goto out;
	wait_first_lines(&c);
	CHECK_OK(herd_job_signal(job, SIGUSR1));
	CHECK_OK(herd_job_wait(job, 20000, &status));
	CHECK_INT(status, 0);
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 1), "got USR1");
	CHECK_STR(line_of(&c, 1, HERD_JOB_STDOUT, 1), "got USR1");
	CHECK_ERR(herd_job_signal(job, 0), HERD_EINVAL, "not a signal");
	herd_job_free(job);
out:
	capture_free(&c);
}

/*
 * SIGTERM through herd_job_signal ends the job whatever spec.restarts
 * says: the ranks' deaths from it are not a failure to restart from.  The
 * job ends with the rank's status, 128 + SIGTERM, after one run.
 */
static void test_job_sigterm_ends_the_job_without_a_restart(void)
{
	const char *argv[] = { "sh", "-c", "echo run $HERD_RESTART_COUNT; exec sleep 30", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	int status = -1;

	setup(&spec, &c, argv, 2);
	spec.restarts = 3;
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL)
		goto out;
	wait_first_lines(&c);
	CHECK_OK(herd_job_signal(job, SIGTERM));
	CHECK_OK(herd_job_wait(job, 20000, &status));
	CHECK_INT(status, 128 + SIGTERM);
	CHECK_INT(herd_job_restart_count(job), 0);
	CHECK_INT(count_lines(&c, 0, HERD_JOB_STDOUT), 1);
	CHECK_INT(count_lines(&c, 1, HERD_JOB_STDOUT), 1);
	check_rank_end(job, 0, HERD_JOB_RANK_SIGNALED, SIGTERM);
	herd_job_free(job);
out:
	capture_free(&c);
}

/*
 * At the time limit the ranks still running are stopped as after a failure:
 * the job ends with HERD_JOB_EXIT_TIME_LIMIT, state HERD_JOB_TIME_LIMIT, a
 * summary naming the limit and the ranks, and no restart.
 */
static void test_job_time_limit_stops_the_ranks_with_124(void)
{
	const char *argv[] = { "sh", "-c", "echo run $HERD_RESTART_COUNT; exec sleep 30", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 2);
	spec.restarts = 3;
	spec.time_limit_ms = 500;
	CHECK_INT(run(&spec, &c, &job), HERD_JOB_EXIT_TIME_LIMIT);
	if (job != NULL) {
		CHECK_INT(herd_job_get_state(job), HERD_JOB_TIME_LIMIT);
		CHECK_STR(herd_job_state_name(herd_job_get_state(job)), "time_limit");
		CHECK_STR(herd_job_failure(job), "time limit of 0:00.5 reached; ranks 0-1 stopped");
		CHECK_INT(herd_job_restart_count(job), 0);
		for (int r = 0; r < 2; r++)
			check_rank_end(job, r, HERD_JOB_RANK_SIGNALED, SIGTERM);
		herd_job_free(job);
	}
	CHECK_INT(count_lines(&c, 0, HERD_JOB_STDOUT), 1);
	capture_free(&c);
}

/* A job that ends before its limit ends as it would without one. */
static void test_job_time_limit_leaves_a_job_that_ends_before_it(void)
{
	const char *fail_argv[] = { "sh", "-c", "exit 3", NULL };
	const char *ok_argv[] = { "true", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, fail_argv, 2);
	spec.time_limit_ms = 60000;
	CHECK_INT(run(&spec, &c, &job), 3);
	if (job != NULL) {
		CHECK_INT(herd_job_get_state(job), HERD_JOB_FAILED);
		CHECK(strstr(herd_job_failure(job), "exited with code 3") != NULL);
		herd_job_free(job);
	}
	capture_free(&c);
	setup(&spec, &c, ok_argv, 2);
	CHECK_INT(run(&spec, &c, &job), 0);
	if (job != NULL) {
		CHECK_INT(herd_job_get_state(job), HERD_JOB_SUCCEEDED);
		CHECK(herd_job_failure(job) == NULL);
		herd_job_free(job);
	}
	capture_free(&c);
}

/*
 * The limit is the whole job's: a run that fails is restarted with what is
 * left of it, so runs of 1 s that always fail, with 10 restarts and a limit
 * of 2.5 s, end at the limit after a few runs (a limit per run would let
 * all eleven fail, status 1).
 */
static void test_job_time_limit_is_not_reset_by_restarts(void)
{
	const char *argv[] = { "sh", "-c", "echo run $HERD_RESTART_COUNT; sleep 1; exit 1", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 1);
	spec.restarts = 10;
	spec.time_limit_ms = 2500;
	CHECK_INT(run(&spec, &c, &job), HERD_JOB_EXIT_TIME_LIMIT);
	if (job != NULL) {
		CHECK_INT(herd_job_get_state(job), HERD_JOB_TIME_LIMIT);
		CHECK(herd_job_restart_count(job) <= 2);
		CHECK(strstr(herd_job_failure(job), "time limit of 0:02.5 reached") != NULL);
		herd_job_free(job);
	}
	capture_free(&c);
}

/*
 * herd_job_interrupt: the signal reaches every rank, the job ends as
 * interrupted (128 + the signal, whatever the ranks did with it), and no
 * restart follows; a signal that is not one of the four is refused.
 */
static void test_job_interrupt_ends_the_job_with_128_plus_signal(void)
{
	const char *argv[] = { "sh", "-c", "trap 'echo got INT; exit 0' INT; echo ready; "
			       "while :; do sleep 0.05; done", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	int status = -1;

	setup(&spec, &c, argv, 2);
	spec.restarts = 2;
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL)
		goto out;
	wait_first_lines(&c);
	CHECK_ERR(herd_job_interrupt(job, SIGUSR1), HERD_EINVAL, "is not SIGINT, SIGTERM, SIGHUP");
	CHECK_INT(herd_job_get_state(job), HERD_JOB_RUNNING);
	CHECK_OK(herd_job_interrupt(job, SIGINT));
	CHECK_OK(herd_job_wait(job, 20000, &status));
	CHECK_INT(status, 128 + SIGINT);
	CHECK_INT(herd_job_get_state(job), HERD_JOB_INTERRUPTED);
	CHECK_STR(herd_job_failure(job), "interrupted by SIGINT; ranks 0-1 stopped");
	CHECK_INT(herd_job_restart_count(job), 0);
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 1), "got INT");
	CHECK_STR(line_of(&c, 1, HERD_JOB_STDOUT, 1), "got INT");
	/* Once over, its end stands. */
	CHECK_OK(herd_job_interrupt(job, SIGTERM));
	CHECK_INT(herd_job_get_state(job), HERD_JOB_INTERRUPTED);
	herd_job_free(job);
out:
	capture_free(&c);
}

/*
 * Ranks that ignore SIGINT and SIGTERM: one interrupt ends them with
 * SIGKILL after the grace period; a second one at once, long before it.
 */
static void test_job_interrupt_kills_what_ignores_it(void)
{
	const char *argv[] = { "sh", "-c", "trap '' INT TERM; echo ready; while :; do sleep 1; done",
			       NULL };

	for (int twice = 0; twice < 2; twice++) {
		herd_job_spec spec = HERD_JOB_SPEC_INIT;
		struct capture c;
		herd_job *job = NULL;
		int status = -1;

		setup(&spec, &c, argv, 2);
		/* once: the grace ends it; twice: the second call, long before */
		spec.grace_ms = twice ? 600000 : 500;
		spec.output = capture_line;
		spec.output_userdata = &c;
		CHECK_OK(herd_job_launch(&job, &spec));
		if (job == NULL) {
			capture_free(&c);
			continue;
		}
		wait_first_lines(&c);
		CHECK_OK(herd_job_interrupt(job, SIGTERM));
		if (twice)
			CHECK_OK(herd_job_interrupt(job, SIGTERM));
		CHECK_OK(herd_job_wait(job, 30000, &status));
		CHECK_INT(status, 128 + SIGTERM);
		CHECK_INT(herd_job_get_state(job), HERD_JOB_INTERRUPTED);
		for (int r = 0; r < 2; r++)
			check_rank_end(job, r, HERD_JOB_RANK_SIGNALED, SIGKILL);
		herd_job_free(job);
		capture_free(&c);
	}
}

/* herd_job_kill: state HERD_JOB_STOPPED, a summary in words. */
static void test_job_kill_is_a_stop(void)
{
	const char *argv[] = { "sleep", "30", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 1);
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job != NULL) {
		CHECK_OK(herd_job_kill(job));
		CHECK_INT(herd_job_get_state(job), HERD_JOB_STOPPED);
		CHECK_STR(herd_job_failure(job), "stopped before it finished");
		herd_job_free(job);
	}
	capture_free(&c);
}

/* A version 1 spec ends before time_limit_ms, which is not read; a
 * negative limit is refused. */
static void test_job_spec_versions_and_time_limit(void)
{
	const char *argv[] = { "true", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 1);
	spec.time_limit_ms = -1;
	spec.output = capture_line;
	spec.output_userdata = &c;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "herd_job_spec.time_limit_ms is -1");
	spec.version = 1;
	CHECK_INT(run(&spec, &c, NULL), 0);
	capture_free(&c);
}

static void test_job_restarts_with_restart_count(void)
{
	const char *argv[] = { "sh", "-c", "echo run $HERD_RESTART_COUNT "
			       "$TORCHELASTIC_RESTART_COUNT; exit 2", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 1);
	spec.restarts = 2;
	CHECK_INT(run(&spec, &c, &job), 2);
	CHECK_INT(count_lines(&c, 0, HERD_JOB_STDOUT), 3);
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 0), "run 0 0");
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 1), "run 1 1");
	CHECK_STR(line_of(&c, 0, HERD_JOB_STDOUT, 2), "run 2 2");
	if (job != NULL) {
		CHECK_INT(herd_job_restart_count(job), 2);
		CHECK(strstr(herd_job_failure(job), "(restart 2)") != NULL);
		herd_job_free(job);
	}
	capture_free(&c);
}

static void test_job_restart_succeeds_after_failure(void)
{
	/* The first run fails, the second succeeds: status 0. */
	const char *argv[] = { "sh", "-c", "[ $HERD_RESTART_COUNT -ge 1 ]", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;

	setup(&spec, &c, argv, 2);
	spec.restarts = 3;
	CHECK_INT(run(&spec, &c, &job), 0);
	if (job != NULL) {
		CHECK_INT(herd_job_restart_count(job), 1);
		CHECK(herd_job_failure(job) == NULL);
		herd_job_free(job);
	}
	capture_free(&c);
}

/* herd_job_fd turns readable when the job ends, not before, and stays so;
 * herd_job_wait then returns at once. */
static void test_job_fd_turns_readable_when_the_job_is_over(void)
{
	const char *argv[] = { "sh", "-c", "sleep 0.3", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	herd_job *job = NULL;
	struct pollfd p;
	int status = -1;

	setup(&spec, &c, argv, 2);
	CHECK_INT(herd_job_fd(NULL), -1);
	CHECK_OK(herd_job_launch(&job, &spec));
	if (job == NULL)
		return;
	p = (struct pollfd){ .fd = herd_job_fd(job), .events = POLLIN };
	CHECK(p.fd >= 0);
	CHECK_INT(poll(&p, 1, 0), 0);
	CHECK_ERR(herd_job_wait(job, 0, &status), HERD_ETIMEDOUT, "still running");
	CHECK_INT(poll(&p, 1, 30000), 1);
	CHECK(p.revents & POLLIN);
	CHECK_OK(herd_job_wait(job, 0, &status));
	CHECK_INT(status, 0);
	CHECK_INT(poll(&p, 1, 0), 1);
	herd_job_free(job);
}

/* With no output sink, rank output goes nowhere: libherd writes to the
 * caller's stdout and stderr only when asked (herd_job_output_stdio). */
static void test_job_output_goes_nowhere_unless_asked(void)
{
	const char *argv[] = { "sh", "-c", "echo to-stdout; echo to-stderr >&2", NULL };
	FILE *f = tmpfile();   /* an unnamed file: nothing to clean up */
	int fd = f != NULL ? fileno(f) : -1, saved[2] = { dup(STDOUT_FILENO), dup(STDERR_FILENO) };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	herd_job *job = NULL;
	char buf[256];
	ssize_t n;
	int status = -1;

	CHECK(fd >= 0 && saved[0] >= 0 && saved[1] >= 0);
	if (fd < 0 || saved[0] < 0 || saved[1] < 0)
		return;
	spec.argv = argv;
	spec.nranks = 2;
	fflush(stdout);
	fflush(stderr);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (herd_job_launch(&job, &spec) == HERD_OK) {
		herd_job_wait(job, 30000, &status);
		herd_job_free(job);
	}
	/* ... and asked: the same lines, prefixed, through the standard sink */
	spec.output = herd_job_output_stdio;
	spec.prefix = "<%r> ";
	if (herd_job_launch(&job, &spec) == HERD_OK) {
		herd_job_wait(job, 30000, NULL);
		herd_job_free(job);
	}
	dup2(saved[0], STDOUT_FILENO);
	dup2(saved[1], STDERR_FILENO);
	close(saved[0]);
	close(saved[1]);
	CHECK_INT(status, 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	fclose(f);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(strstr(buf, "<0> to-stdout\n") != NULL && strstr(buf, "<1> to-stdout\n") != NULL);
	CHECK(strstr(buf, "<0> to-stderr\n") != NULL && strstr(buf, "<1> to-stderr\n") != NULL);
	/* four lines, all from the second job */
	CHECK_INT(strlen(buf), 4 * strlen("<0> to-stdout\n"));
}

static void test_job_log_dir_gets_per_rank_files(void)
{
	const char *argv[] = { "sh", "-c", "echo out of $RANK; echo err of $RANK >&2", NULL };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	struct capture c;
	char dir[] = "/tmp/herd-test-logs-XXXXXX", path[128], *text = NULL;
	size_t len;

	setup(&spec, &c, argv, 2);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/logs", dir);
	spec.log_dir = path;
	CHECK_INT(run(&spec, &c, NULL), 0);
	for (int r = 0; r < 2; r++) {
		char want[64];

		snprintf(path, sizeof(path), "%s/logs/rank.%d.out", dir, r);
		CHECK_OK(herd__read_file(path, 4096, &text, &len));
		snprintf(want, sizeof(want), "out of %d\n", r);
		CHECK_STR(text, want);
		free(text);
		unlink(path);
		snprintf(path, sizeof(path), "%s/logs/rank.%d.err", dir, r);
		CHECK_OK(herd__read_file(path, 4096, &text, &len));
		snprintf(want, sizeof(want), "err of %d\n", r);
		CHECK_STR(text, want);
		free(text);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/logs", dir);
	rmdir(path);
	rmdir(dir);
	capture_free(&c);
}

/*
 * An elastic spec: its fields checked; on this one node, per_node ranks;
 * a rank that fails the job twice gets its node excluded (onto a list of
 * the test's own), and with none left the job is not restarted again.
 */
static void test_job_elastic_spec_and_a_node_blamed_twice(void)
{
	/* Rank 0 fails first, so that it is the one blamed (rank 1 is then stopped). */
	const char *argv[] = { "sh", "-c", "echo $HERD_RANK of $HERD_WORLD_SIZE; "
			       "[ $HERD_RANK = 0 ] || sleep 2; exit 3", NULL };
	char list[64];
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	herd_job_node_status n;
	struct capture c;
	herd_job *job = NULL;
	int fd;

	/* The test's own list, a new file of this process's. */
	snprintf(list, sizeof(list), "/tmp/herd-test-exclude.%ld", (long)getpid());
	fd = open(list, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	close(fd);
	setenv("HERD_EXCLUDE_FILE", list, 1);
	setup(&spec, &c, argv, 2);
	spec.max_nodes = 1;
	spec.min_nodes = 1;
	spec.per_node = 2;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "an elastic job's world size follows");
	spec.nranks = 0;
	spec.per_node = 0;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "per_node is 0; an elastic job");
	spec.per_node = 2;
	spec.min_nodes = 2;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_EINVAL, "min_nodes 2, max_nodes 1");
	spec.max_nodes = 3;
	CHECK_ERR(herd_job_launch(&job, &spec), HERD_ENORESOURCE,
		  "min_nodes is 2, but the job has 1 node");
	/* A version 3 spec has no such fields: whatever follows is not read. */
	spec.version = 3;
	spec.nranks = 1;
	CHECK_INT(run(&spec, &c, NULL), 3);
	capture_free(&c);
	capture_init(&c);
	spec.version = HERD_JOB_SPEC_VERSION;
	spec.nranks = 0;
	spec.min_nodes = 1;
	spec.restarts = 3;
	CHECK_INT(run(&spec, &c, &job), 3);
	if (job == NULL)
		goto out;
	CHECK_INT(herd_job_size(job), 2);
	CHECK_STR(line_of(&c, 1, HERD_JOB_STDOUT, 0), "1 of 2");
	CHECK_INT(herd_job_restart_count(job), 1);
	CHECK(strstr(herd_job_failure(job), "not restarted: 0 nodes left (none), fewer than "
		     "the minimum of 1") != NULL);
	CHECK_INT((int)herd_job_nodes(job), 1);
	CHECK_OK(herd_job_node(job, 0, &n));
	CHECK_INT(n.role, HERD_JOB_NODE_OUT);
	CHECK_INT(n.faults, 2);
	CHECK_STR(n.why, "a rank on it failed the job 2 times (rank 0 in restart 1)");
	CHECK(n.since > 0);
	CHECK_STR(herd_job_node_role_name(n.role), "out");
	CHECK_ERR(herd_job_node(job, 1, &n), HERD_EINVAL, "node 1 of a job of 1 nodes");
	herd_job_free(job);
	/* A fixed job's node is in, and has no reason. */
	spec.min_nodes = spec.max_nodes = 0;
	spec.nranks = 1;
	spec.restarts = 0;
	unlink(list);
	job = NULL;
	CHECK_INT(run(&spec, &c, &job), 3);
	if (job == NULL)
		goto out;
	CHECK_OK(herd_job_node(job, 0, &n));
	CHECK_INT(n.role, HERD_JOB_NODE_IN);
	CHECK_INT(n.node_rank, 0);
	CHECK(n.why == NULL);
	herd_job_free(job);
out:
	capture_free(&c);
	unlink(list);
	unsetenv("HERD_EXCLUDE_FILE");
}

int main(void)
{
	/* The tests' sh, sleep and tr come from PATH. */
	TEST_RUN(test_job_every_rank_sees_the_environment_contract);
	TEST_RUN(test_job_output_arrives_as_whole_lines_with_streams_apart);
	TEST_RUN(test_job_exit_code_of_first_failed_rank_with_summary);
	TEST_RUN(test_job_rank_killed_by_signal_gives_128_plus_signal);
	TEST_RUN(test_job_exec_failure_is_127_on_every_rank);
	TEST_RUN(test_job_exec_of_what_cannot_be_executed_is_126);
	TEST_RUN(test_job_bad_workdir_fails_start_with_chdir_message);
	TEST_RUN(test_job_more_ranks_than_slots_refused_before_start);
	TEST_RUN(test_job_bad_spec_names_the_field);
	TEST_RUN(test_job_kill_stops_sleeping_ranks_within_grace);
	TEST_RUN(test_job_ranks_ignoring_sigterm_get_sigkill_after_grace);
	TEST_RUN(test_job_signal_reaches_every_rank);
	TEST_RUN(test_job_sigterm_ends_the_job_without_a_restart);
	TEST_RUN(test_job_time_limit_stops_the_ranks_with_124);
	TEST_RUN(test_job_time_limit_leaves_a_job_that_ends_before_it);
	TEST_RUN(test_job_time_limit_is_not_reset_by_restarts);
	TEST_RUN(test_job_interrupt_ends_the_job_with_128_plus_signal);
	TEST_RUN(test_job_interrupt_kills_what_ignores_it);
	TEST_RUN(test_job_kill_is_a_stop);
	TEST_RUN(test_job_spec_versions_and_time_limit);
	TEST_RUN(test_job_restarts_with_restart_count);
	TEST_RUN(test_job_restart_succeeds_after_failure);
	TEST_RUN(test_job_log_dir_gets_per_rank_files);
	TEST_RUN(test_job_fd_turns_readable_when_the_job_is_over);
	TEST_RUN(test_job_output_goes_nowhere_unless_asked);
	TEST_RUN(test_job_elastic_spec_and_a_node_blamed_twice);
	return TEST_DONE();
}
