/*
 * The communicator core with real processes: init over shared memory and
 * TCP, the point-to-point exchange (large rings, reductions into the sink,
 * ordering, mismatches), split, nonblocking calls, init from each style of
 * environment.  Bandwidth and latency are measured by bench/transport_bench.c.
 */
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "comm_harness.h"

static const char *const transports[] = { "auto", "tcp" };

/* ---- names ---------------------------------------------------------------- */

static void test_comm_fp_format_names_the_call_and_its_arguments(void)
{
	herd__fp fp = { 12, HERD__OP_ALLREDUCE, HERD_FLOAT32, HERD_SUM, -1, 1000 };
	char buf[160];

	herd__fp_format(&fp, buf, sizeof(buf));
	CHECK_STR(buf, "#12 allreduce float32 sum count=1000");
	fp = (herd__fp){ 3, HERD__OP_BROADCAST, HERD_INT64, 0, 2, 10 };
	herd__fp_format(&fp, buf, sizeof(buf));
	CHECK_STR(buf, "#3 broadcast int64 count=10 root=2");
	fp = (herd__fp){ 7, HERD__OP_BARRIER, 0, 0, -1, 0 };
	herd__fp_format(&fp, buf, sizeof(buf));
	CHECK_STR(buf, "#7 barrier");
	CHECK_STR(herd__op_name(HERD__OP_REDUCE_SCATTER), "reduce_scatter");
	CHECK_STR(herd__op_name((herd__op_kind)99), "unknown call");
	herd__fp_format(&fp, buf, 4);
	CHECK_STR(buf, "#7 ");
}

static void test_comm_options_come_from_env_unless_given(void)
{
	herd_comm_opts o = HERD_COMM_OPTS_INIT;
	herd__comm_cfg cfg;

	setenv("HERD_TIMEOUT", "1.5", 1);
	setenv("HERD_TRANSPORT", "tcp", 1);
	setenv("HERD_ALGO", "rd", 1);
	CHECK_OK(herd__comm_cfg_resolve(NULL, &cfg));
	CHECK_INT(cfg.timeout_ms, 1500);
	CHECK_INT(cfg.transport, HERD__TRANSPORT_TCP);
	CHECK_INT(cfg.algo, HERD__CLASS_LATENCY);
	o.timeout_ms = 250;
	o.transport = "auto";
	o.algo = "ring";
	CHECK_OK(herd__comm_cfg_resolve(&o, &cfg));
	CHECK_INT(cfg.timeout_ms, 250);
	CHECK_INT(cfg.transport, HERD__TRANSPORT_AUTO);
	CHECK_INT(cfg.algo, HERD__CLASS_BANDWIDTH);
	setenv("HERD_TRANSPORT", "carrier-pigeon", 1);
	CHECK_ERR(herd__comm_cfg_resolve(NULL, &cfg), HERD_EINVAL, "HERD_TRANSPORT=carrier-pigeon");
	unsetenv("HERD_TRANSPORT");
	setenv("HERD_TIMEOUT", "soon", 1);
	CHECK_ERR(herd__comm_cfg_resolve(NULL, &cfg), HERD_EINVAL, "HERD_TIMEOUT=soon");
	/* Out of range, it says the limit. */
	setenv("HERD_TIMEOUT", "1e99", 1);
	CHECK_ERR(herd__comm_cfg_resolve(NULL, &cfg), HERD_EINVAL, "at most 2000000");
	unsetenv("HERD_TIMEOUT");
	unsetenv("HERD_ALGO");
	/* The links between hosts: latency in us, rate in Gbit/s */
	setenv("HERD_NET_LINK", "5,100", 1);
	CHECK_OK(herd__comm_cfg_resolve(NULL, &cfg));
	CHECK(cfg.net_lat_us == 5.0 && cfg.net_gbit == 100.0 && !cfg.net_measure);
	setenv("HERD_NET_LINK", "measure", 1);
	CHECK_OK(herd__comm_cfg_resolve(NULL, &cfg));
	CHECK(cfg.net_measure && cfg.net_lat_us == 0);
	static const char *const bad_links[] = { "5", "5,", ",100", "0,100", "5,0", "5,100,1",
						 "-1,10", "5,1e9", "nan,1", "fast" };
	for (size_t i = 0; i < sizeof(bad_links) / sizeof(bad_links[0]); i++) {
		setenv("HERD_NET_LINK", bad_links[i], 1);
		CHECK_ERR(herd__comm_cfg_resolve(NULL, &cfg), HERD_EINVAL, "LATENCY_US,GBIT_PER_S");
	}
	unsetenv("HERD_NET_LINK");
	CHECK_OK(herd__comm_cfg_resolve(NULL, &cfg));
	CHECK_INT(cfg.timeout_ms, 300000);
	CHECK_INT(cfg.algo, HERD__CLASS_ANY);
	CHECK(cfg.net_lat_us == 0 && cfg.net_gbit == 0 && !cfg.net_measure);
	o.version = 0;
	CHECK_ERR(herd__comm_cfg_resolve(&o, &cfg), HERD_EINVAL, "HERD_COMM_OPTS_INIT");
}

/* ---- init ----------------------------------------------------------------- */

typedef struct init_args {
	char scope[64];
	const char *transport;
} init_args;

static void init_rank(int rank, int size, void *arg)
{
	const init_args *a = arg;
	int fds0 = count_fds(), threads0 = count_threads();
	herd_comm *comm = NULL;
	const char *host = NULL;
	uint8_t send[4096], recv[4096];
	int prev = (rank - 1 + size) % size;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	CHECK_INT(herd_comm_rank(comm), rank);
	CHECK_INT(herd_comm_size(comm), size);
	for (int j = 0; j < size; j++) {
		CHECK_OK(herd_comm_host(comm, j, &host));
		CHECK(host != NULL && host[0] != '\0');
	}
	CHECK_ERR(herd_comm_host(comm, size, &host), HERD_EINVAL, "is out of range");
	CHECK(host == NULL);
	/* Every pair uses the expected transport. */
	for (int j = 0; j < size; j++) {
		if (j == rank)
			continue;
		CHECK_STR(comm->peers[j].link->ops->name,
			  strcmp(a->transport, "tcp") == 0 ? "tcp" : "shm");
	}
	fill(send, sizeof(send), rank);
	for (int it = 0; it < 3; it++) {
		memset(recv, 0, sizeof(recv));
		CHECK_OK(ring_call(comm, send, recv, sizeof(recv)));
		CHECK_INT(first_wrong(recv, sizeof(recv), prev), sizeof(recv));
	}
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
	CHECK_INT(count_fds(), fds0);
	CHECK_INT(count_threads_settled(threads0), threads0);
}

static void test_comm_init_1_2_3_4_7_ranks_over_shm_and_tcp(void)
{
	static const int sizes[] = { 1, 2, 3, 4, 7 };

	for (size_t t = 0; t < 2; t++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			init_args a;
			double t0 = now_s();

			a.transport = transports[t];
			harness_scope(a.scope, sizeof(a.scope), "init");
			CHECK_INT(run_ranks(sizes[i], init_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
			printf("     init + 3 rings + finalize, %d ranks over %s: %.0f ms\n", sizes[i],
			       a.transport, (now_s() - t0) * 1000);
		}
	}
}

/* A segment as a process killed during init leaves it: created, sized, its
 * header never written.  Returns the pid that made it, now gone. */
static pid_t dead_segment(char *name, size_t cap, time_t age_s)
{
	pid_t pid;
	int ws;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct timespec ts[2];
		int fd;

		snprintf(name, cap, "/herd.%d.00000000deadbeef.0", (int)getpid());
		fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
		if (fd < 0 || ftruncate(fd, 8192) != 0)
			_exit(1);
		clock_gettime(CLOCK_REALTIME, &ts[0]);
		ts[0].tv_sec -= age_s;
		ts[1] = ts[0];
		_exit(futimens(fd, ts) == 0 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		return -1;
	snprintf(name, cap, "/herd.%d.00000000deadbeef.0", (int)pid);
	return pid;
}

static bool segment_exists(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	return access(path, F_OK) == 0;
}

static void test_comm_init_removes_segments_that_dead_processes_left(void)
{
	char old_dead[64], new_dead[64], old_alive[64];
	init_args a = { .transport = "auto" };
	int fd;

	CHECK(dead_segment(old_dead, sizeof(old_dead), 3600) > 0);
	CHECK(dead_segment(new_dead, sizeof(new_dead), 0) > 0);
	/* Old, but its process (this one) is alive. */
	snprintf(old_alive, sizeof(old_alive), "/herd.%d.00000000deadbeef.1", (int)getpid());
	fd = shm_open(old_alive, O_CREAT | O_EXCL | O_RDWR, 0600);
	CHECK(fd >= 0);
	if (fd >= 0) {
		struct timespec ts[2];

		clock_gettime(CLOCK_REALTIME, &ts[0]);
		ts[0].tv_sec -= 3600;
		ts[1] = ts[0];
		CHECK_INT(futimens(fd, ts), 0);
		close(fd);
	}
	/* old_dead is not checked here: a test running beside this one may
	 * init a communicator and sweep it away already, as it should. */
	CHECK(segment_exists(new_dead) && segment_exists(old_alive));

	harness_scope(a.scope, sizeof(a.scope), "sweep");
	CHECK_INT(run_ranks(2, init_rank, &a, 60000, NULL, NULL, 0, NULL), 0);

	/* Only the one whose maker is gone and that no init can still be
	 * finishing is removed. */
	CHECK(!segment_exists(old_dead));
	CHECK(segment_exists(new_dead));
	CHECK(segment_exists(old_alive));
	shm_unlink(old_dead);
	shm_unlink(new_dead);
	shm_unlink(old_alive);
}

static void reinit_rank(int rank, int size, void *arg)
{
	const init_args *a = arg;
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	herd_store *store = NULL;
	uint8_t send[64], recv[64];

	so.secret = HARNESS_SECRET;
	CHECK_OK(herd_store_connect(&store, harness_address(), &so));
	fill(send, sizeof(send), rank);
	/* The same store twice: the second init meets the second inits. */
	for (int round = 0; round < 2 && store != NULL; round++) {
		herd_comm *comm = NULL;

		CHECK_OK(herd_comm_init(&comm, store, rank, size, NULL));
		if (comm == NULL)
			break;
		CHECK_OK(ring_call(comm, send, recv, sizeof(recv)));
		CHECK_INT(first_wrong(recv, sizeof(recv), (rank + size - 1) % size), sizeof(recv));
		CHECK_OK(herd_comm_finalize(comm));
		herd_comm_free(comm);
		if (rank == 1)
			sleep_ms(100);
	}
	herd_store_free(store);
	(void)a;
}

static void test_comm_init_twice_on_one_store_meets_the_same_generation(void)
{
	init_args a;

	harness_scope(a.scope, sizeof(a.scope), "reinit");
	CHECK_INT(run_ranks(3, reinit_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
}

typedef struct ifname_args {
	char scope[64];
	const char *ifname;
} ifname_args;

static void ifname_rank(int rank, int size, void *arg)
{
	const ifname_args *a = arg;
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	herd_comm_opts co = HERD_COMM_OPTS_INIT;
	herd_store *root = NULL, *sub = NULL;
	herd_comm *comm = NULL;
	uint8_t s[64], r[64];

	so.secret = HARNESS_SECRET;
	CHECK_OK(herd_store_connect(&root, harness_address(), &so));
	CHECK_OK(herd_store_prefix(&sub, root, a->scope));
	co.transport = "tcp";
	co.socket_ifname = a->ifname;
	co.timeout_ms = 10000;
	if (strcmp(a->ifname, "lo") != 0) {
		CHECK_ERR(herd_comm_init(&comm, sub, rank, size, &co), HERD_EINVAL,
			  "socket interface \"nosuch0\"");
	} else {
		CHECK_OK(herd_comm_init(&comm, sub, rank, size, &co));
		if (comm != NULL) {
			/* Only the named interface is published. */
			CHECK(strncmp(comm->peers[rank].addrs, "127.0.0.1:", 10) == 0);
			CHECK(strchr(comm->peers[rank].addrs, ',') == NULL);
			fill(s, sizeof(s), rank);
			CHECK_OK(ring_call(comm, s, r, sizeof(r)));
			CHECK_INT(first_wrong(r, sizeof(r), 1 - rank), sizeof(r));
			CHECK_OK(herd_comm_finalize(comm));
		}
	}
	herd_comm_free(comm);
	herd_store_free(sub);
	herd_store_free(root);
}

static void test_comm_socket_ifname_picks_the_interface_peers_connect_to(void)
{
	static const char *const names[] = { "lo", "nosuch0" };

	for (size_t i = 0; i < 2; i++) {
		ifname_args a = { .ifname = names[i] };

		harness_scope(a.scope, sizeof(a.scope), "ifname");
		CHECK_INT(run_ranks(2, ifname_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

/* ---- exchanges ------------------------------------------------------------ */

typedef struct big_args {
	char scope[64];
	const char *transport;
	size_t bytes;
	int reps;
} big_args;

static void big_ring_rank(int rank, int size, void *arg)
{
	const big_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t *send = malloc(a->bytes), *recv = malloc(a->bytes);

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm != NULL && send != NULL && recv != NULL) {
		fill(send, a->bytes, rank);
		for (int it = 0; it < a->reps; it++) {
			memset(recv, 0, a->bytes);
			CHECK_OK(ring_call(comm, send, recv, a->bytes));
			CHECK_INT(first_wrong(recv, a->bytes, (rank + size - 1) % size), a->bytes);
		}
		CHECK_OK(herd_comm_finalize(comm));
	}
	herd_comm_free(comm);
	free(send);
	free(recv);
}

static void test_comm_ring_of_8_mib_messages_does_not_deadlock(void)
{
	for (size_t t = 0; t < 2; t++) {
		big_args a = { .transport = transports[t], .bytes = (8u << 20) + 12345, .reps = 3 };
		double t0 = now_s();

		harness_scope(a.scope, sizeof(a.scope), "bigring");
		CHECK_INT(run_ranks(4, big_ring_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
		printf("     4 ranks, 3 rings of 8 MiB over %s: %.0f ms\n", a.transport,
		       (now_s() - t0) * 1000);
	}
}

/* Reduces what it receives into a float sum; odd sizes exercise partial
 * elements on TCP. */
static herd_status reduce_run(herd_comm *comm, const herd__op *op)
{
	int r = herd_comm_rank(comm), n = herd_comm_size(comm);
	herd__xfer s = { .peer = (r + 1) % n, .buf = op->sendbuf, .len = op->count * 4 };
	herd__xfer v = { .peer = (r - 1 + n) % n, .len = op->count * 4 };

	v.sink.dst = op->recvbuf;
	v.sink.reduce_with = op->recvbuf;
	v.sink.dtype = HERD_FLOAT32;
	v.sink.op = HERD_SUM;
	return herd__p2p_exchange(comm, &s, 1, &v, 1);
}

static void reduce_rank(int rank, int size, void *arg)
{
	const big_args *a = arg;
	size_t count = a->bytes / 4;
	herd_comm *comm = NULL;
	float *send = malloc(count * 4), *acc = malloc(count * 4);
	int prev = (rank + size - 1) % size;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm != NULL && send != NULL && acc != NULL) {
		herd__op op;
		size_t bad = 0;

		for (size_t i = 0; i < count; i++) {
			send[i] = (float)(rank * 1000 + (int)(i % 977));
			acc[i] = 0.5f;
		}
		op = make_op(reduce_run, HERD__OP_ALLREDUCE, send, acc, count);
		op.fp.dtype = HERD_FLOAT32;
		op.fp.redop = HERD_SUM;
		CHECK_OK(herd__comm_run(comm, &op));
		for (size_t i = 0; i < count; i++)
			if (acc[i] != 0.5f + (float)(prev * 1000 + (int)(i % 977)))
				bad++;
		CHECK_INT(bad, 0);
		CHECK_OK(herd_comm_finalize(comm));
	}
	herd_comm_free(comm);
	free(send);
	free(acc);
}

static void test_comm_exchange_reduces_received_bytes_into_the_sink(void)
{
	for (size_t t = 0; t < 2; t++) {
		big_args a = { .transport = transports[t], .bytes = 4 * ((3u << 20) + 7) };

		harness_scope(a.scope, sizeof(a.scope), "reduce");
		CHECK_INT(run_ranks(3, reduce_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
		/* One rank: the message to itself is reduced locally. */
		harness_scope(a.scope, sizeof(a.scope), "reduce1");
		CHECK_INT(run_ranks(1, reduce_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
	}
}

/* Three messages to each peer in one exchange arrive in array order. */
static herd_status order_run(herd_comm *comm, const herd__op *op)
{
	int r = herd_comm_rank(comm), n = herd_comm_size(comm);
	const uint8_t *sb = op->sendbuf;
	uint8_t *rb = op->recvbuf;
	herd__xfer s[3], v[3];
	size_t sizes[3] = { 5, 300000, 0 };

	for (int k = 0; k < 3; k++) {
		s[k] = (herd__xfer){ .peer = (r + 1) % n, .buf = sb + k * 300000, .len = sizes[k] };
		v[k] = (herd__xfer){ .peer = (r + n - 1) % n, .len = sizes[k] };
		v[k].sink.dst = rb + k * 300000;
	}
	return herd__p2p_exchange(comm, s, 3, v, 3);
}

static void order_rank(int rank, int size, void *arg)
{
	const big_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t *send = malloc(900000), *recv = calloc(1, 900000);
	int prev = (rank + size - 1) % size;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 30000));
	if (comm != NULL && send != NULL && recv != NULL) {
		herd__op op = make_op(order_run, HERD__OP_ALLTOALL, send, recv, 0);

		for (int k = 0; k < 3; k++)
			fill(send + k * 300000, 300000, rank * 3 + k);
		CHECK_OK(herd__comm_run(comm, &op));
		CHECK_INT(first_wrong(recv, 5, prev * 3), 5);
		CHECK_INT(recv[5], 0);
		CHECK_INT(first_wrong(recv + 300000, 300000, prev * 3 + 1), 300000);
		CHECK_OK(herd_comm_finalize(comm));
	}
	herd_comm_free(comm);
	free(send);
	free(recv);
}

static void test_comm_messages_to_one_peer_keep_their_order(void)
{
	for (size_t t = 0; t < 2; t++) {
		big_args a = { .transport = transports[t] };

		harness_scope(a.scope, sizeof(a.scope), "order");
		CHECK_INT(run_ranks(3, order_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

/*
 * Several TCP connections per pair (HERD_SOCKET_STREAMS): rank 1 asks for
 * 2, the others for 4, so pairs with rank 1 use 2 and the others 4.  The
 * large messages of the reduce and order exchanges travel in pieces, one
 * per connection, cut at 64-byte boundaries (12 MiB + 28 bytes of floats
 * reduced into the sink, 300000 bytes behind a 5-byte message and before
 * an empty one), and land whole and in order; then an allreduce of a
 * vector that does not divide evenly.
 */
static void streams_rank(int rank, int size, void *arg)
{
	big_args *a = arg;
	herd_comm *comm = NULL;
	size_t n = (1u << 20) + 13;
	double *v = malloc(n * sizeof(*v));

	setenv("HERD_SOCKET_STREAMS", rank == 1 ? "2" : "4", 1);
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, "tcp", 30000));
	for (int j = 0; comm != NULL && j < size; j++) {
		int links = 0, want = j == rank ? 0 : rank == 1 || j == 1 ? 2 : 4;

		for (int k = 0; k < HERD__STREAMS_MAX && j != rank; k++)
			links += herd__comm_link(comm, j, k) != NULL;
		CHECK_INT(links, want);
		CHECK_INT(j == rank ? want : herd__comm_streams(comm, j), want);
	}
	for (size_t i = 0; v != NULL && comm != NULL && i < n; i++)
		v[i] = (double)(rank + 1) * (double)(i % 1000);
	if (v != NULL && comm != NULL) {
		size_t bad = 0;

		CHECK_OK(herd_comm_allreduce(comm, v, v, n, HERD_FLOAT64, HERD_SUM));
		for (size_t i = 0; i < n; i++)
			bad += v[i] != (double)(size * (size + 1) / 2) * (double)(i % 1000);
		CHECK_INT(bad, 0);
	}
	herd_comm_free(comm);
	free(v);
	reduce_rank(rank, size, a);
	order_rank(rank, size, a);
}

static void test_comm_tcp_streams_carry_pieces_of_large_messages(void)
{
	big_args a = { .transport = "tcp", .bytes = 4 * ((3u << 20) + 7) };

	harness_scope(a.scope, sizeof(a.scope), "streams");
	CHECK_INT(run_ranks(3, streams_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
}

static void mismatch_rank(int rank, int size, void *arg)
{
	const big_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t send[400], recv[400];
	herd__op op;
	herd_status st;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 10000));
	if (comm == NULL)
		return;
	op = make_op(ring_run, HERD__OP_ALLREDUCE, send, recv, 100);
	op.fp.dtype = HERD_FLOAT32;
	op.fp.redop = HERD_SUM;
	op.count = 400;
	if (rank == 0) {
		op.fp.kind = HERD__OP_BROADCAST;
		op.fp.redop = 0;
		op.fp.root = 0;
	}
	memset(send, 1, sizeof(send));
	st = herd__comm_run(comm, &op);
	report_status(rank, st, now_ms(), 0);
	if (rank == 1) {
		/* It received rank 0's broadcast where it expected an allreduce. */
		CHECK_ERR(st, HERD_EMISMATCH, "#1 allreduce float32 sum count=100");
		CHECK_ERR(st, HERD_EMISMATCH, "#1 broadcast float32 count=100 root=0");
		CHECK_ERR(st, HERD_EMISMATCH, "rank 0 (host");
	} else if (rank == 0) {
		CHECK_ERR(st, HERD_EMISMATCH, "#1 broadcast float32 count=100 root=0");
	}
	/* Broken for good: the next call says the same; rank 2, whose own
	 * exchange matched, hears of it from the others. */
	CHECK_ERR(ring_call(comm, send, recv, 10), HERD_EMISMATCH, "mismatched calls");
	herd_comm_free(comm);
}

static void test_comm_mismatched_fingerprint_returns_emismatch_naming_both(void)
{
	for (size_t t = 0; t < 2; t++) {
		big_args a = { .transport = transports[t] };
		rank_result res[3];

		memset(res, 0, sizeof(res));
		harness_scope(a.scope, sizeof(a.scope), "mismatch");
		CHECK_INT(run_ranks(3, mismatch_rank, &a, 30000, NULL, NULL, 0, res), 0);
		printf("     %s: rank 1 says: %s\n", a.transport, res[1].msg);
	}
}

/* ---- split ---------------------------------------------------------------- */

static void split_rank(int rank, int size, void *arg)
{
	const big_args *a = arg;
	herd_comm *comm = NULL, *sub = NULL;
	int color = rank == 4 ? HERD_COMM_SPLIT_NONE : rank % 2;
	int fds0 = count_fds();

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	CHECK_OK(herd_comm_split(&sub, comm, color, -rank));
	if (color == HERD_COMM_SPLIT_NONE) {
		CHECK(sub == NULL);
	} else if (sub != NULL) {
		/* Colors 0: {0, 2}, 1: {1, 3, 5}; keys -rank reverse the order. */
		int members = color == 0 ? 2 : 3;
		int expect = color == 0 ? (rank == 2 ? 0 : 1) : (5 - rank) / 2;
		int32_t send = rank, recv = -1;
		int prev_new = (expect + members - 1) % members;
		const char *h_sub = NULL, *h_comm = NULL;

		CHECK_INT(herd_comm_size(sub), members);
		CHECK_INT(herd_comm_rank(sub), expect);
		CHECK_OK(herd_comm_host(sub, 0, &h_sub));
		CHECK_OK(herd_comm_host(comm, 0, &h_comm));
		CHECK_STR(h_sub, h_comm);
		CHECK_OK(ring_call(sub, &send, &recv, sizeof(send)));
		/* The sender's old rank: the new ranks run old ranks backwards. */
		CHECK_INT(recv, color == 0 ? 2 - 2 * prev_new : 5 - 2 * prev_new);
		CHECK_OK(herd_comm_finalize(sub));
		herd_comm_free(sub);
	}
	/* The parent still works after the split. */
	{
		uint8_t s[16], r[16];

		fill(s, sizeof(s), rank);
		CHECK_OK(ring_call(comm, s, r, sizeof(r)));
		CHECK_INT(first_wrong(r, sizeof(r), (rank + size - 1) % size), sizeof(r));
	}
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
	CHECK_INT(count_fds(), fds0);
}

static void test_comm_split_groups_by_color_ordered_by_key(void)
{
	for (size_t t = 0; t < 2; t++) {
		big_args a = { .transport = transports[t] };

		harness_scope(a.scope, sizeof(a.scope), "split");
		CHECK_INT(run_ranks(6, split_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
	}
}

/* ---- nonblocking ---------------------------------------------------------- */

static uint64_t order_log[16];
static int order_len;

static herd_status logged_all_run(herd_comm *comm, const herd__op *op)
{
	herd_status st = all_run(comm, op);

	order_log[order_len++] = op->fp.seq;
	return st;
}

static void nonblocking_rank(int rank, int size, void *arg)
{
	const big_args *a = arg;
	herd_comm *comm = NULL;
	herd_comm_request *r1 = NULL, *r2 = NULL;
	uint8_t s1[64], b1[64 * 3], s2[256], b2[256 * 3], s3[8], b3[8 * 3];
	herd__op op;
	bool done = true;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, a->transport, 20000));
	if (comm == NULL)
		return;
	fill(s1, sizeof(s1), rank);
	fill(s2, sizeof(s2), rank + 10);
	fill(s3, sizeof(s3), rank + 20);
	if (rank == 1)
		sleep_ms(300);    /* so that rank 0's requests cannot be done at once */
	op = make_op(logged_all_run, HERD__OP_ALLTOALL, s1, b1, sizeof(s1));
	CHECK_OK(herd__comm_submit(comm, &op, &r1));
	op = make_op(logged_all_run, HERD__OP_ALLTOALL, s2, b2, sizeof(s2));
	CHECK_OK(herd__comm_submit(comm, &op, &r2));
	if (rank == 0) {
		CHECK_OK(herd_comm_request_test(r2, &done));
		CHECK_INT(done, 0);
	}
	/* A blocking call runs after the queued ones. */
	op = make_op(logged_all_run, HERD__OP_ALLTOALL, s3, b3, sizeof(s3));
	CHECK_OK(herd__comm_run(comm, &op));
	CHECK_INT(order_len, 3);
	CHECK_INT(order_log[0], 1);
	CHECK_INT(order_log[1], 2);
	CHECK_INT(order_log[2], 3);
	done = false;
	CHECK_OK(herd_comm_request_test(r2, &done));
	CHECK_INT(done, 1);
	CHECK_OK(herd_comm_request_wait(r1));
	for (int j = 0; j < size; j++) {
		CHECK_INT(first_wrong(b1 + 64 * j, 64, j), 64);
		CHECK_INT(first_wrong(b2 + 256 * j, 256, j + 10), 256);
		CHECK_INT(first_wrong(b3 + 8 * j, 8, j + 20), 8);
	}
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_comm_nonblocking_calls_complete_in_call_order(void)
{
	for (size_t t = 0; t < 2; t++) {
		big_args a = { .transport = transports[t] };

		harness_scope(a.scope, sizeof(a.scope), "nonblocking");
		CHECK_INT(run_ranks(3, nonblocking_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

/* ---- init from the environment -------------------------------------------- */

typedef struct env_args {
	const char *style;
	char port[16];
	bool secret;
} env_args;

static void clear_identity_env(void)
{
	static const char *const vars[] = {
		"HERD_RANK", "HERD_WORLD_SIZE", "HERD_STORE", "HERD_JOB_SECRET", "RANK",
		"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS",
		"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "HERD_TRANSPORT", "HERD_TIMEOUT"
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void set_int(const char *name, int v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d", v);
	setenv(name, buf, 1);
}

static void env_rank(int rank, int size, void *arg)
{
	const env_args *a = arg;
	herd_comm *comm = NULL;
	uint8_t s[32], r[32];

	clear_identity_env();
	setenv("HERD_TIMEOUT", "20", 1);
	if (a->secret)
		setenv("HERD_JOB_SECRET", HARNESS_SECRET, 1);
	if (strcmp(a->style, "herd") == 0) {
		set_int("HERD_RANK", rank);
		set_int("HERD_WORLD_SIZE", size);
		setenv("HERD_STORE", harness_address(), 1);
		/* Lower in the order: ignored when herd's variables are there. */
		set_int("SLURM_PROCID", size - 1 - rank);
		set_int("SLURM_NTASKS", size);
	} else if (strcmp(a->style, "torchrun") == 0) {
		set_int("RANK", rank);
		set_int("WORLD_SIZE", size);
		setenv("MASTER_ADDR", "127.0.0.1", 1);
		setenv("MASTER_PORT", a->port, 1);
		if (rank != 0)
			sleep_ms(50 * rank);   /* connect before or after rank 0 is up */
		else
			sleep_ms(120);
	} else if (strcmp(a->style, "slurm") == 0) {
		set_int("SLURM_PROCID", rank);
		set_int("SLURM_NTASKS", size);
		setenv("HERD_STORE", harness_address(), 1);
	} else {
		set_int("OMPI_COMM_WORLD_RANK", rank);
		set_int("OMPI_COMM_WORLD_SIZE", size);
		setenv("HERD_STORE", harness_address(), 1);
	}
	CHECK_OK(herd_comm_init_env(&comm, NULL));
	if (comm == NULL)
		return;
	CHECK_INT(herd_comm_rank(comm), rank);
	CHECK_INT(herd_comm_size(comm), size);
	fill(s, sizeof(s), rank);
	CHECK_OK(ring_call(comm, s, r, sizeof(r)));
	CHECK_INT(first_wrong(r, sizeof(r), (rank + size - 1) % size), sizeof(r));
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void test_comm_init_env_reads_each_style_of_environment(void)
{
	static const struct { const char *style; bool secret; } styles[] = {
		{ "herd", true }, { "torchrun", true }, { "torchrun", false },
		{ "slurm", true }, { "ompi", true },
	};

	for (size_t i = 0; i < sizeof(styles) / sizeof(styles[0]); i++) {
		env_args a = { .style = styles[i].style, .secret = styles[i].secret };

		snprintf(a.port, sizeof(a.port), "%d", free_port());
		CHECK_INT(run_ranks(3, env_rank, &a, 30000, NULL, NULL, 0, NULL), 0);
	}
}

static void env_error_rank(int rank, int size, void *arg)
{
	herd_comm *comm = (herd_comm *)1;

	(void)size;
	(void)arg;
	clear_identity_env();
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "HERD_RANK and HERD_WORLD_SIZE");
	CHECK(comm == NULL);
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "OMPI_COMM_WORLD_RANK");
	set_int("HERD_RANK", rank);
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "HERD_WORLD_SIZE is not");
	set_int("HERD_WORLD_SIZE", 2);
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "HERD_STORE");
	clear_identity_env();
	set_int("SLURM_PROCID", 3);
	set_int("SLURM_NTASKS", 2);
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "SLURM_PROCID=3 is not below");
	set_int("SLURM_PROCID", 1);
	unsetenv("SLURM_JOB_ID");
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "SLURM_JOB_ID is not set");
	/* A batch script: the job's task count, no step. */
	set_int("SLURM_PROCID", 0);
	set_int("SLURM_JOB_ID", 42);
	unsetenv("SLURM_STEP_ID");
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "not a task of an srun step");
	unsetenv("SLURM_JOB_ID");
	clear_identity_env();
	set_int("OMPI_COMM_WORLD_RANK", 1);
	set_int("OMPI_COMM_WORLD_SIZE", 4);
	set_int("OMPI_COMM_WORLD_LOCAL_SIZE", 2);
	setenv("OMPI_MCA_orte_num_nodes", "2", 1);
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "set MASTER_ADDR to the host of rank 0");
	unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	unsetenv("OMPI_MCA_orte_num_nodes");
	clear_identity_env();
	set_int("RANK", 0);
	set_int("WORLD_SIZE", 2);
	CHECK_ERR(herd_comm_init_env(&comm, NULL), HERD_EINVAL, "MASTER_ADDR nor MASTER_PORT");
}

static void test_comm_init_env_names_what_is_missing(void)
{
	CHECK_INT(run_ranks(1, env_error_rank, NULL, 10000, NULL, NULL, 0, NULL), 0);
}

/* ---- ranks as threads ----------------------------------------------------- */

typedef struct thread_rank {
	pthread_t thread;
	int rank, size;
	const char *transport;
	const char *scope;
	int failures;
} thread_rank;

#define T_OK(t, expr)                                                                 \
	do {                                                                          \
		herd_status st_ = (expr);                                             \
		if (st_ != HERD_OK) {                                                 \
			fprintf(stderr, "rank %d (a thread): %s: %s: %s\n", (t)->rank, #expr, \
				herd_status_name(st_), herd_last_error());            \
			(t)->failures++;                                              \
			goto out;                                                     \
		}                                                                     \
	} while (0)

/* Init, blocking and nonblocking exchanges, a split, finalize: everything a
 * rank allocates, in this process, where the leak checker sees it. */
static void *thread_rank_main(void *arg)
{
	thread_rank *t = arg;
	herd_comm *comm = NULL, *sub = NULL;
	herd_comm_request *req = NULL;
	uint8_t s[1000], r[1000];
	herd__op op;

	T_OK(t, harness_comm(&comm, t->scope, t->rank, t->size, t->transport, 20000));
	fill(s, sizeof(s), t->rank);
	T_OK(t, ring_call(comm, s, r, sizeof(r)));
	if (first_wrong(r, sizeof(r), (t->rank + t->size - 1) % t->size) != sizeof(r))
		t->failures++;
	op = make_op(ring_run, HERD__OP_ALLGATHER, s, r, sizeof(r));
	T_OK(t, herd__comm_submit(comm, &op, &req));
	T_OK(t, herd_comm_request_wait(req));
	T_OK(t, herd_comm_split(&sub, comm, t->rank % 2, t->rank));
	T_OK(t, ring_call(sub, s, r, 16));
	T_OK(t, herd_comm_finalize(sub));
	T_OK(t, herd_comm_finalize(comm));
out:
	herd_comm_free(sub);
	herd_comm_free(comm);
	return NULL;
}

static void test_comm_ranks_as_threads_of_one_process(void)
{
	for (size_t k = 0; k < 2; k++) {
		thread_rank t[4];
		char scope[64];
		int fds0 = count_fds(), threads0 = count_threads();
		pid_t self = getpid();

		harness_scope(scope, sizeof(scope), "threads");
		for (int i = 0; i < 4; i++) {
			t[i] = (thread_rank){ .rank = i, .size = 4, .transport = transports[k],
					      .scope = scope };
			CHECK_INT(pthread_create(&t[i].thread, NULL, thread_rank_main, &t[i]), 0);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(t[i].thread, NULL);
			CHECK_INT(t[i].failures, 0);
		}
		CHECK_INT(count_fds(), fds0);
		CHECK_INT(count_threads_settled(threads0), threads0);
		CHECK_INT(shm_segments_of(&self, 1, 0), 0);
	}
}

int main(void)
{
	harness_start();
	TEST_RUN(test_comm_fp_format_names_the_call_and_its_arguments);
	TEST_RUN(test_comm_options_come_from_env_unless_given);
	TEST_RUN(test_comm_init_1_2_3_4_7_ranks_over_shm_and_tcp);
	TEST_RUN(test_comm_init_removes_segments_that_dead_processes_left);
	TEST_RUN(test_comm_init_twice_on_one_store_meets_the_same_generation);
	TEST_RUN(test_comm_socket_ifname_picks_the_interface_peers_connect_to);
	TEST_RUN(test_comm_ring_of_8_mib_messages_does_not_deadlock);
	TEST_RUN(test_comm_exchange_reduces_received_bytes_into_the_sink);
	TEST_RUN(test_comm_messages_to_one_peer_keep_their_order);
	TEST_RUN(test_comm_tcp_streams_carry_pieces_of_large_messages);
	TEST_RUN(test_comm_mismatched_fingerprint_returns_emismatch_naming_both);
	TEST_RUN(test_comm_split_groups_by_color_ordered_by_key);
	TEST_RUN(test_comm_nonblocking_calls_complete_in_call_order);
	TEST_RUN(test_comm_ranks_as_threads_of_one_process);
	TEST_RUN(test_comm_init_env_reads_each_style_of_environment);
	TEST_RUN(test_comm_init_env_names_what_is_missing);
	harness_stop();
	return TEST_DONE();
}
