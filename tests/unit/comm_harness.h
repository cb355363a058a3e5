/*
 * tests/unit/comm_harness.h - real ranks for the communicator tests: a
 * store server process on 127.0.0.1, one process per rank forked from the
 * (single-threaded) test process, what each rank reports collected through
 * a pipe, and every rank reaped within a bounded time (what overstays is
 * killed).
 *
 * A rank's body runs in the child with the CHECK macros of test.h; the
 * child exits non-zero when one failed, and its messages go to stderr.
 */
#ifndef HERD_COMM_HARNESS_H
#define HERD_COMM_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#include "base.h"
#include "comm/comm_internal.h"
#include "comm/core.h"
#include "net.h"

#define HARNESS_SECRET "comm-test-secret-0123456789abcdef"
#define HARNESS_MAX_RANKS 16

static pid_t harness_server_pid = -1;
static int harness_server_stop = -1;
static char harness_server_addr[HERD_NET_ADDR_LEN];
static int harness_result_fd = -1;
static unsigned harness_scope_counter;

/* What a rank reports to the parent: one write, atomic on a pipe. */
typedef struct rank_result {
	int rank;
	int valid;
	int status;
	int64_t t_ms;        /* a time on CLOCK_MONOTONIC, or a duration */
	double value;        /* a measurement */
	char msg[900];
} rank_result;

static inline int64_t now_ms(void)
{
	return herd__net_now_ms();
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * Starts the store server in a process of its own, so that the test process
 * has no thread of its own when it forks ranks (a rank forked while a
 * server thread held an allocator lock would hang).  The server lives until
 * harness_stop, or until this process dies (its pipe closes).
 */
static inline void harness_start(void)
{
	int addr_pipe[2], stop_pipe[2];

	if (pipe(addr_pipe) != 0 || pipe(stop_pipe) != 0)
		exit(1);
	fflush(stdout);
	fflush(stderr);
	harness_server_pid = fork();
	if (harness_server_pid == 0) {
		herd_store_server_opts o = HERD_STORE_SERVER_OPTS_INIT;
		herd_store_server *server = NULL;
		char c;
		ssize_t n;

		close(addr_pipe[0]);
		close(stop_pipe[1]);
		o.secret = HARNESS_SECRET;
		if (herd_store_server_start(&server, &o) != HERD_OK) {
			fprintf(stderr, "cannot start the store server: %s\n", herd_last_error());
			_exit(1);
		}
		herd__strlcpy(harness_server_addr, herd_store_server_address(server),
			      sizeof(harness_server_addr));
		n = write(addr_pipe[1], harness_server_addr, sizeof(harness_server_addr));
		close(addr_pipe[1]);
		while ((n = read(stop_pipe[0], &c, 1)) < 0 && errno == EINTR)
			;
		herd_store_server_free(server);
		_exit(0);
	}
	close(addr_pipe[1]);
	close(stop_pipe[0]);
	harness_server_stop = stop_pipe[1];
	fcntl(harness_server_stop, F_SETFD, FD_CLOEXEC);
	if (read(addr_pipe[0], harness_server_addr, sizeof(harness_server_addr)) !=
	    (ssize_t)sizeof(harness_server_addr)) {
		fprintf(stderr, "the store server did not start\n");
		exit(1);
	}
	close(addr_pipe[0]);
}

static inline void harness_stop(void)
{
	close(harness_server_stop);
	waitpid(harness_server_pid, NULL, 0);
}

static inline const char *harness_address(void)
{
	return harness_server_addr;
}

/* In a rank: sends r to the parent. */
static inline void report(rank_result *r)
{
	ssize_t n;

	r->valid = 1;
	n = write(harness_result_fd, r, sizeof(*r));
	(void)n;
}

/* In a rank: reports a status with the current error message and time. */
static inline void report_status(int rank, herd_status st, int64_t t_ms, double value)
{
	rank_result r;

	memset(&r, 0, sizeof(r));
	r.rank = rank;
	r.status = st;
	r.t_ms = t_ms;
	r.value = value;
	if (st != HERD_OK)
		herd__strlcpy(r.msg, herd_last_error(), sizeof(r.msg));
	report(&r);
}

/* A fresh store scope for one run. */
static inline void harness_scope(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%u/", name, ++harness_scope_counter);
}

/* In a rank: connects to the store and joins a communicator in scope. */
static inline herd_status harness_comm(herd_comm **out, const char *scope, int rank, int size,
				const char *transport, int timeout_ms)
{
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	herd_comm_opts co = HERD_COMM_OPTS_INIT;
	herd_store *root = NULL, *sub = NULL;
	herd_status st;

	so.secret = HARNESS_SECRET;
	so.timeout_ms = 20000;
	st = herd_store_connect(&root, harness_address(), &so);
	if (st != HERD_OK)
		return st;
	st = herd_store_prefix(&sub, root, scope);
	co.transport = transport;
	co.timeout_ms = timeout_ms;
	if (st == HERD_OK)
		st = herd_comm_init(out, sub, rank, size, &co);
	/* The communicator keeps its own handle on the store. */
	herd_store_free(sub);
	herd_store_free(root);
	return st;
}

static inline int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static inline int count_fds(void)
{
	return count_dir("/proc/self/fd") - 1;   /* the directory's own fd */
}

static inline int count_threads(void)
{
	return count_dir("/proc/self/task");
}

/* The threads of this process once those joined have left /proc: a thread
 * wakes its joiner as it releases its memory, before the kernel removes its
 * task, so a count just after pthread_join may still see it.  Waits at most
 * 2 s (40 looks) for the count to come down to `want`. */
static inline int count_threads_settled(int want)
{
	int n = count_threads();

	for (int i = 0; i < 40 && n > want; i++) {
		usleep(50000);
		n = count_threads();
	}
	return n;
}

/* Shared memory segments named after one of the pids and made at or after
 * `since` (seconds since the epoch; pids get reused, and what an earlier
 * process of the same pid left is not the ranks' doing). */
static inline int shm_segments_of(const pid_t *pids, int n, time_t since)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int found = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		for (int i = 0; i < n; i++) {
			char prefix[32];

			char path[300];
			struct stat sb;

			snprintf(prefix, sizeof(prefix), "herd.%d.", (int)pids[i]);
			snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
			if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
			    stat(path, &sb) == 0 && sb.st_mtime >= since) {
				fprintf(stderr, "leftover /dev/shm/%s\n", e->d_name);
				found++;
			}
		}
	}
	closedir(d);
	return found;
}

typedef void (*rank_fn)(int rank, int size, void *arg);
typedef void (*parent_fn)(const pid_t *pids, int size, void *arg);

/*
 * Runs fn in size processes and waits up to timeout_ms for them.  Fills
 * results[rank] with what each reported last (results may be NULL).
 * parent, when set, runs in the parent once all are forked.  Ranks in
 * killed_mask may die by SIGKILL; any other rank must exit 0.  Returns the
 * number of ranks that did not.
 */
static inline int run_ranks(int size, rank_fn fn, void *arg, int timeout_ms, parent_fn parent,
		     void *parent_arg, unsigned killed_mask, rank_result *results)
{
	pid_t pids[HARNESS_MAX_RANKS];
	int status[HARNESS_MAX_RANKS], done = 0, bad = 0, fds[2];
	int64_t deadline = now_ms() + timeout_ms;
	time_t started = time(NULL) - 1;   /* file times use a coarser clock */

	if (pipe(fds) != 0)
		return size;
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < size; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(fds[0]);
			harness_result_fd = fds[1];
			test_failures = 0;
			fn(i, size, arg);
			fflush(stdout);
			fflush(stderr);
			/* _exit: the leak checker would take the parent's threads' state
			 * for leaks here; leaks are checked with ranks as threads. */
			_exit(test_failures > 0 ? 1 : 0);
		}
		status[i] = -1;
	}
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	if (parent != NULL)
		parent(pids, size, parent_arg);
	while (done < size) {
		rank_result r;
		struct pollfd pfd = { fds[0], POLLIN, 0 };

		while (read(fds[0], &r, sizeof(r)) == (ssize_t)sizeof(r))
			if (results != NULL && r.rank >= 0 && r.rank < size)
				results[r.rank] = r;
		for (int i = 0; i < size; i++) {
			int ws;

			if (status[i] != -1 || waitpid(pids[i], &ws, WNOHANG) != pids[i])
				continue;
			status[i] = ws;
			done++;
		}
		if (done == size)
			break;
		if (now_ms() >= deadline) {
			for (int i = 0; i < size; i++)
				if (status[i] == -1) {
					fprintf(stderr, "rank %d (pid %d) overstayed %d ms: killed\n", i,
						(int)pids[i], timeout_ms);
					kill(pids[i], SIGKILL);
					waitpid(pids[i], &status[i], 0);
					status[i] = 0x7f00;   /* counted as failed below */
					done++;
				}
			break;
		}
		poll(&pfd, 1, 20);
	}
	{
		rank_result r;

		while (read(fds[0], &r, sizeof(r)) == (ssize_t)sizeof(r))
			if (results != NULL && r.rank >= 0 && r.rank < size)
				results[r.rank] = r;
	}
	close(fds[0]);
	for (int i = 0; i < size; i++) {
		bool killed = WIFSIGNALED(status[i]) && WTERMSIG(status[i]) == SIGKILL;

		if ((killed_mask >> i) & 1u) {
			if (!killed && !(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0)) {
				fprintf(stderr, "rank %d: status %#x\n", i, status[i]);
				bad++;
			}
			continue;
		}
		if (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0) {
			fprintf(stderr, "rank %d (pid %d) failed: status %#x\n", i, (int)pids[i],
				status[i]);
			bad++;
		}
	}
	if (shm_segments_of(pids, size, started) != 0)
		bad++;
	return bad;
}

/* ---- abort from a second thread ------------------------------------------ */

typedef struct abort_ctx {
	herd_comm *comm;
	int64_t t_abort;   /* when abort was called */
} abort_ctx;

/* A thread body: aborts c->comm 300 ms after it starts. */
static inline void *abort_later(void *arg)
{
	abort_ctx *c = arg;

	sleep_ms(300);
	c->t_abort = now_ms();
	herd_comm_abort(c->comm);
	return NULL;
}

/* ---- tiny calls for the tests --------------------------------------------- */

/* Sends op->count bytes to the next rank, receives as many from the previous. */
static inline herd_status ring_run(herd_comm *comm, const herd__op *op)
{
	int r = herd_comm_rank(comm), n = herd_comm_size(comm);
	herd__xfer s = { .peer = (r + 1) % n, .buf = op->sendbuf, .len = op->count };
	herd__xfer v = { .peer = (r - 1 + n) % n, .len = op->count };

	v.sink.dst = op->recvbuf;
	return herd__p2p_exchange(comm, &s, 1, &v, 1);
}

/* Every rank sends op->count bytes to every rank (itself included);
 * recvbuf holds size blocks. */
static inline herd_status all_run(herd_comm *comm, const herd__op *op)
{
	int n = herd_comm_size(comm);
	herd__xfer s[HARNESS_MAX_RANKS], v[HARNESS_MAX_RANKS];

	for (int j = 0; j < n; j++) {
		s[j] = (herd__xfer){ .peer = j, .buf = op->sendbuf, .len = op->count };
		v[j] = (herd__xfer){ .peer = j, .len = op->count };
		v[j].sink.dst = (uint8_t *)op->recvbuf + (size_t)j * op->count;
	}
	return herd__p2p_exchange(comm, s, (size_t)n, v, (size_t)n);
}

static inline herd__op make_op(herd__op_fn run, herd__op_kind kind, const void *sendbuf,
			void *recvbuf, size_t bytes)
{
	herd__op op;

	memset(&op, 0, sizeof(op));
	op.run = run;
	op.fp.kind = (uint8_t)kind;
	op.fp.dtype = HERD_UINT8;
	op.fp.root = -1;
	op.fp.count = bytes;
	op.sendbuf = sendbuf;
	op.recvbuf = recvbuf;
	op.count = bytes;
	return op;
}

/* Runs one ring exchange of bytes through the core. */
static inline herd_status ring_call(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t bytes)
{
	herd__op op = make_op(ring_run, HERD__OP_ALLGATHER, sendbuf, recvbuf, bytes);

	return herd__comm_run(comm, &op);
}

static inline herd_status all_call(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t bytes)
{
	herd__op op = make_op(all_run, HERD__OP_ALLTOALL, sendbuf, recvbuf, bytes);

	return herd__comm_run(comm, &op);
}

/* A byte pattern that says who wrote it and where. */
static inline uint8_t pattern(int rank, size_t i)
{
	return (uint8_t)(rank * 31 + i * 7 + (i >> 12));
}

static inline void fill(uint8_t *buf, size_t n, int rank)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(rank, i);
}

/* The first index where buf is not rank's pattern, or n. */
static inline size_t first_wrong(const uint8_t *buf, size_t n, int rank)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != pattern(rank, i))
			return i;
	return n;
}

#endif /* HERD_COMM_HARNESS_H */
