/*
 * The TCP store: the shared contract against a server on 127.0.0.1, then
 * what only a network store has to survive: wrong secrets, garbage, huge
 * length prefixes, silent clients, servers that die, hang or stop.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "base.h"
#include "store/backend.h"
#include "store/proto.h"
#include "store_contract.h"

#define SECRET "unit-test-secret-0123456789abcdef"

/*
 * The contract's server runs in a child process started before this one
 * has any thread: a process that forks while another of its threads may
 * hold a lock (the allocator's, under ASan) can hand its children a lock
 * nobody will release, and the contract forks clients.
 */
static char server_addr[64];
static int server_port;

static herd_status connect_with(herd_store **out, const char *address, const char *secret,
				int timeout_ms, int connect_timeout_ms)
{
	herd_store_opts o = HERD_STORE_OPTS_INIT;

	o.secret = secret;
	o.timeout_ms = timeout_ms;
	o.connect_timeout_ms = connect_timeout_ms;
	return herd_store_connect(out, address, &o);
}

static herd_status contract_open(herd_store **out, int timeout_ms)
{
	return connect_with(out, server_addr, SECRET, timeout_ms, 5000);
}

static const char *contract_where(void)
{
	return server_addr;
}

static herd_status start_server(herd_store_server **out, int auth_timeout_ms)
{
	herd_store_server_opts o = HERD_STORE_SERVER_OPTS_INIT;

	o.secret = SECRET;
	o.auth_timeout_ms = auth_timeout_ms;
	return herd_store_server_start(out, &o);
}

/* ---- raw sockets, to play a misbehaving client ---------------------------- */

static int raw_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		TEST_FAIL_("raw connect to port %d: %s", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Reads exactly n bytes from a socket or pipe within timeout_ms; 0 on success. */
static int raw_read(int fd, void *buf, size_t n, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&pfd, 1, herd__net_remaining_ms(deadline)) <= 0)
			return -1;
		r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Reads one frame's payload (at most cap bytes) into buf; its length, or -1. */
static long raw_read_frame(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
	uint8_t head[4];
	uint32_t n;

	if (raw_read(fd, head, 4, timeout_ms) != 0)
		return -1;
	n = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
	if (n > cap || raw_read(fd, buf, n, timeout_ms) != 0)
		return -1;
	return (long)n;
}

static int raw_send(int fd, const void *p, size_t n)
{
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/*
 * Reads and discards until the server closes the connection.  Milliseconds
 * until then, or -1 when it is still open after timeout_ms.
 */
static long raw_wait_closed(int fd, int timeout_ms)
{
	int64_t t0 = now_ms(), deadline = t0 + timeout_ms;
	char buf[4096];

	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&pfd, 1, herd__net_remaining_ms(deadline)) <= 0)
			return -1;
		r = recv(fd, buf, sizeof(buf), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return (long)(now_ms() - t0);
		if (r < 0)
			return -1;
	}
}

/* Authenticates a raw socket as a well-behaved client would; 0 on success. */
static int raw_auth(int fd, const char *secret)
{
	uint8_t buf[HERD__STORE_FRAME_MAX_PREAUTH], cnonce[HERD__AUTH_NONCE_LEN];
	uint8_t snonce[HERD__AUTH_NONCE_LEN], mac[HERD__AUTH_MAC_LEN];
	herd__buf out = { 0 };
	herd__store_enc e;
	herd__store_msg m;
	long n;
	int ok;

	n = raw_read_frame(fd, buf, sizeof(buf), 2000);
	if (n <= 0 || herd__store_msg_decode(&m, buf, (size_t)n) != HERD_OK)
		return -1;
	ok = m.type == HERD__STORE_T_HELLO && m.nonce.n == sizeof(snonce);
	if (ok)
		memcpy(snonce, m.nonce.p, sizeof(snonce));
	herd__store_msg_free(&m);
	if (!ok)
		return -1;
	memset(cnonce, 7, sizeof(cnonce));
	herd__auth_mac(mac, secret, strlen(secret), snonce, cnonce, HERD__STORE_LABEL_CLIENT);
	herd__store_enc_begin(&e, &out, HERD__STORE_T_AUTH);
	herd__store_enc_bin(&e, "nonce", cnonce, sizeof(cnonce));
	herd__store_enc_bin(&e, "mac", mac, sizeof(mac));
	ok = herd__store_enc_end(&e) == HERD_OK && raw_send(fd, out.data, out.len) == 0;
	herd__buf_free(&out);
	if (!ok)
		return -1;
	n = raw_read_frame(fd, buf, sizeof(buf), 2000);
	if (n <= 0 || herd__store_msg_decode(&m, buf, (size_t)n) != HERD_OK)
		return -1;
	herd__auth_mac(mac, secret, strlen(secret), cnonce, snonce, HERD__STORE_LABEL_SERVER);
	ok = m.type == HERD__STORE_T_AUTH_OK && herd__auth_mac_equal(mac, m.mac.p, m.mac.n);
	herd__store_msg_free(&m);
	return ok ? 0 : -1;
}

/* ---- a client that must keep working while others misbehave -------------- */

static herd_store *good;

struct parked_get {
	pthread_t t;
	const char *key;
	herd_status st;
	char value[32];
};

static void *parked_get_run(void *arg)
{
	struct parked_get *g = arg;
	void *v = NULL;

	g->st = herd_store_get(good, g->key, 5000, &v, NULL);
	if (v != NULL)
		herd__strlcpy(g->value, v, sizeof(g->value));
	herd_free(v);
	return NULL;
}

/* Parks a get on the good client, to be released by good_check_release. */
static void good_park(struct parked_get *g, const char *key)
{
	memset(g, 0, sizeof(*g));
	g->key = key;
	CHECK_INT(pthread_create(&g->t, NULL, parked_get_run, g), 0);
	sleep_ms(50);
}

/* The good client still works, and its parked get is released by a set. */
static void good_check_release(struct parked_get *g)
{
	void *v = NULL;

	CHECK_OK(herd_store_set(good, "alive", "yes", 3));
	CHECK_OK(herd_store_get(good, "alive", 0, &v, NULL));
	CHECK_STR((char *)v, "yes");
	herd_free(v);
	CHECK_OK(herd_store_set(good, g->key, "released", 8));
	pthread_join(g->t, NULL);
	CHECK_INT(g->st, HERD_OK);
	CHECK_STR(g->value, "released");
	CHECK_OK(herd_store_delete(good, g->key, NULL));
}

/* ---- tests --------------------------------------------------------------- */

static void test_store_tcp_wrong_secret_gets_eauth_and_server_keeps_serving(void)
{
	struct parked_get g;
	herd_store *bad = (herd_store *)1;
	int64_t t0;

	good_park(&g, "park-secret");
	t0 = now_ms();
	CHECK_ERR(connect_with(&bad, server_addr, "not-the-secret", 5000,
			       3000), HERD_EAUTH, "rejected the job secret");
	CHECK(strstr(herd_last_error(), server_addr) != NULL);
	CHECK(bad == NULL);
	CHECK(now_ms() - t0 < 1000);
	good_check_release(&g);
}

/* A hello frame of format version 2: {"v": 2, "t": "hello"}. */
static const uint8_t hello_v2[] = { 0, 0, 0, 12, 0x82, 0xa1, 'v', 0x02, 0xa1, 't',
				    0xa5, 'h', 'e', 'l', 'l', 'o' };

struct impostor {
	int lfd;
	int future;   /* greet in format version 2, else fake the proof */
};

/*
 * Plays a server that greets and then claims success without knowing the
 * secret, or one from a future version.
 */
static void *impostor_run(void *arg)
{
	struct impostor *im = arg;
	uint8_t nonce[HERD__AUTH_NONCE_LEN], buf[256], fake[HERD__AUTH_MAC_LEN];
	herd__buf out = { 0 };
	herd__store_enc e;
	int fd;

	fd = accept(im->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	if (im->future) {
		raw_send(fd, hello_v2, sizeof(hello_v2));
		raw_wait_closed(fd, 2000);
		close(fd);
		return NULL;
	}
	memset(nonce, 1, sizeof(nonce));
	memset(fake, 2, sizeof(fake));
	herd__store_enc_begin(&e, &out, HERD__STORE_T_HELLO);
	herd__store_enc_bin(&e, "nonce", nonce, sizeof(nonce));
	herd__store_enc_end(&e);
	if (raw_send(fd, out.data, out.len) == 0 && raw_read_frame(fd, buf, sizeof(buf), 2000) > 0) {
		out.len = out.off = 0;
		herd__store_enc_begin(&e, &out, HERD__STORE_T_AUTH_OK);
		herd__store_enc_bin(&e, "mac", fake, sizeof(fake));
		herd__store_enc_end(&e);
		raw_send(fd, out.data, out.len);
		raw_wait_closed(fd, 2000);
	}
	herd__buf_free(&out);
	close(fd);
	return NULL;
}

/* Connects to an impostor; the status of herd_store_connect. */
static herd_status connect_to_impostor(int future)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	herd_store *c = (herd_store *)1;
	struct impostor im = { socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), future };
	char addr[64], msg[1024];
	herd_status st;
	pthread_t t;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_INT(bind(im.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_INT(listen(im.lfd, 4), 0);
	CHECK_INT(getsockname(im.lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	CHECK_INT(pthread_create(&t, NULL, impostor_run, &im), 0);
	st = connect_with(&c, addr, SECRET, 2000, 2000);
	herd__strlcpy(msg, herd_last_error(), sizeof(msg));
	CHECK(c == NULL);
	pthread_join(t, NULL);
	close(im.lfd);
	herd__error(st, "%s", msg);
	return st;
}

static void test_store_tcp_client_rejects_a_server_that_cannot_prove_the_secret(void)
{
	CHECK_ERR(connect_to_impostor(0), HERD_EAUTH,
		  "could not prove that it holds the job secret");
}

static void test_store_tcp_client_rejects_another_format_version(void)
{
	CHECK_ERR(connect_to_impostor(1), HERD_EVERSION, "format version 2");
}

static void test_store_tcp_serves_many_clients_at_once(void)
{
	enum { N = 64 };
	herd_store *c[N] = { NULL };
	const char *keys[N];
	char names[N][16];
	herd_store *all = NULL;

	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "many/%d", i);
		keys[i] = names[i];
		CHECK_OK(contract_open(&c[i], 5000));
	}
	for (int i = 0; i < N && c[i] != NULL; i++)
		CHECK_OK(herd_store_set(c[i], names[i], "here", 4));
	CHECK_OK(contract_open(&all, 5000));
	CHECK_OK(herd_store_wait(all, keys, N, 2000));
	herd_store_free(all);
	for (int i = 0; i < N; i++)
		herd_store_free(c[i]);
}

static void test_store_tcp_client_rejects_a_server_without_the_secret(void)
{
	herd_store_server_opts o = HERD_STORE_SERVER_OPTS_INIT;
	herd_store_server *other = NULL;
	herd_store *c = NULL;

	/* The server checks the client, and the client checks the server: here the
	 * server refuses first, and the client reports it as an authentication failure. */
	o.secret = "another-jobs-secret";
	CHECK_OK(herd_store_server_start(&other, &o));
	CHECK_ERR(connect_with(&c, herd_store_server_address(other), SECRET, 2000, 2000),
		  HERD_EAUTH, "secret");
	CHECK(c == NULL);
	herd_store_server_free(other);
}

static void test_store_tcp_garbage_before_auth_is_dropped(void)
{
	static const char junk[] = "\x00\x00\x00\x10GET / HTTP/1.1\r\n\r\n";
	struct parked_get g;
	uint8_t hello[256];
	long took;
	int fd;

	good_park(&g, "park-garbage");
	fd = raw_connect(server_port);
	if (fd < 0)
		return;
	CHECK(raw_read_frame(fd, hello, sizeof(hello), 2000) > 0);
	CHECK_INT(raw_send(fd, junk, sizeof(junk) - 1), 0);
	took = raw_wait_closed(fd, 2000);
	CHECK(took >= 0 && took < 1000);
	printf("  [timing] a client sending garbage before authenticating was dropped after "
	       "%ld ms\n", took);
	close(fd);
	good_check_release(&g);
}

static void test_store_tcp_4gb_length_prefix_is_dropped(void)
{
	static const uint8_t huge[4] = { 0xff, 0xff, 0xff, 0xff };
	struct parked_get g;
	uint8_t reply[512];
	long took, n;
	int fd;

	good_park(&g, "park-4gb");
	/* Before authentication: dropped without a word. */
	fd = raw_connect(server_port);
	if (fd < 0)
		return;
	CHECK_INT(raw_send(fd, huge, 4), 0);
	took = raw_wait_closed(fd, 2000);
	CHECK(took >= 0 && took < 1000);
	printf("  [timing] a 4 GB length prefix before authentication was dropped after %ld ms\n",
	       took);
	close(fd);
	/* After authentication: answered with an error, then dropped. */
	fd = raw_connect(server_port);
	if (fd < 0)
		return;
	CHECK_INT(raw_auth(fd, SECRET), 0);
	CHECK_INT(raw_send(fd, huge, 4), 0);
	n = raw_read_frame(fd, reply, sizeof(reply), 2000);
	CHECK(n > 0);
	if (n > 0) {
		herd__store_msg m;

		CHECK_OK(herd__store_msg_decode(&m, reply, (size_t)n));
		CHECK_INT(m.type, HERD__STORE_T_ERROR);
		CHECK_INT(m.st, HERD_EFORMAT);
		CHECK(m.msg.n > 0 && memmem(m.msg.p, m.msg.n, "exceeds the limit", 17) != NULL);
		herd__store_msg_free(&m);
	}
	CHECK(raw_wait_closed(fd, 2000) >= 0);
	close(fd);
	good_check_release(&g);
}

static void test_store_tcp_garbage_after_auth_is_answered_and_dropped(void)
{
	static const uint8_t not_a_map[] = { 0, 0, 0, 3, 0x93, 1, 2 };      /* [1, 2, ...] */
	static const uint8_t bad_array[] = { 0, 0, 0, 5, 0xdd, 0xff, 0xff, 0xff, 0xff };
	const uint8_t *cases[] = { not_a_map, bad_array };
	size_t lens[] = { sizeof(not_a_map), sizeof(bad_array) };
	struct parked_get g;

	good_park(&g, "park-after-auth");
	for (int i = 0; i < 2; i++) {
		uint8_t reply[512];
		int fd = raw_connect(server_port);
		long n;

		if (fd < 0)
			return;
		CHECK_INT(raw_auth(fd, SECRET), 0);
		CHECK_INT(raw_send(fd, cases[i], lens[i]), 0);
		n = raw_read_frame(fd, reply, sizeof(reply), 2000);
		CHECK(n > 0);
		CHECK(raw_wait_closed(fd, 2000) >= 0);
		close(fd);
	}
	good_check_release(&g);
}

static void test_store_tcp_silent_client_is_dropped_at_the_auth_deadline(void)
{
	herd_store_server *strict = NULL;
	herd_store *c = NULL;
	uint8_t hello[256];
	long took;
	int fd;

	CHECK_OK(start_server(&strict, 300));
	if (strict == NULL)
		return;
	fd = raw_connect(herd_store_server_port(strict));
	if (fd >= 0) {
		CHECK(raw_read_frame(fd, hello, sizeof(hello), 2000) > 0);
		took = raw_wait_closed(fd, 3000);
		CHECK(took >= 200 && took < 1500);
		printf("  [timing] a silent client was dropped %ld ms after the greeting (auth "
		       "deadline 300 ms)\n", took);
		close(fd);
	}
	/* Meanwhile and afterwards, real clients get through. */
	CHECK_OK(connect_with(&c, herd_store_server_address(strict), SECRET, 2000, 2000));
	CHECK_OK(herd_store_set(c, "k", "v", 1));
	herd_store_free(c);
	herd_store_server_free(strict);
}

/* One of the 16 processes of the 4,096-client test: 256 clients connect at
 * once with the others, each sets its key and reads it back, then the
 * first waits for every process's "ready" key.  Exits 0, or 1 after
 * printing what failed. */
static void load_child(int child, int nchild, int per)
{
	herd_store **c = calloc((size_t)per, sizeof(*c));
	const char **keys = calloc((size_t)nchild, sizeof(*keys));
	char key[64], *v = NULL;
	size_t len = 0;

	if (c == NULL || keys == NULL)
		_exit(1);
	for (int i = 0; i < per; i++)
		if (contract_open(&c[i], 60000) != HERD_OK) {
			fprintf(stderr, "child %d, client %d: %s\n", child, i, herd_last_error());
			_exit(1);
		}
	for (int i = 0; i < per; i++) {
		snprintf(key, sizeof(key), "load/%d/%d", child, i);
		if (herd_store_set(c[i], key, key, strlen(key)) != HERD_OK ||
		    herd_store_get(c[i], key, 60000, (void **)&v, &len) != HERD_OK ||
		    len != strlen(key) || memcmp(v, key, len) != 0) {
			fprintf(stderr, "child %d, client %d: %s\n", child, i, herd_last_error());
			_exit(1);
		}
		herd_free(v);
		v = NULL;
	}
	snprintf(key, sizeof(key), "load/ready/%d", child);
	if (herd_store_set(c[0], key, "1", 1) != HERD_OK)
		_exit(1);
	for (int k = 0; k < nchild; k++) {
		char *name = malloc(32);

		if (name == NULL)
			_exit(1);
		snprintf(name, 32, "load/ready/%d", k);
		keys[k] = name;
	}
	if (herd_store_wait(c[per - 1], keys, (size_t)nchild, 60000) != HERD_OK) {
		fprintf(stderr, "child %d: wait: %s\n", child, herd_last_error());
		_exit(1);
	}
	for (int i = 0; i < per; i++)
		herd_store_free(c[i]);
	_exit(0);
}

/* 4,096 clients of one server at once (16 processes of 256, connecting
 * together), each setting, getting and waiting: none is refused or reset
 * (PyTorch's TCPStore has been reported failing at 1,536 ranks). */
static void test_store_tcp_serves_4096_clients_at_once(void)
{
	enum { NCHILD = 16, PER = 256 };
	pid_t pids[NCHILD];
	struct rlimit rl;
	int ok = 0;

	/* The server's end of every connection lives in this process. */
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur < NCHILD * PER + 256) {
		if (rl.rlim_max < NCHILD * PER + 256) {
			TEST_SKIP("the descriptor limit (hard %llu) is below 4,352",
				  (unsigned long long)rl.rlim_max);
		}
		rl.rlim_cur = NCHILD * PER + 256;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	fflush(NULL);
	for (int k = 0; k < NCHILD; k++) {
		pids[k] = fork();
		if (pids[k] == 0)
			load_child(k, NCHILD, PER);
	}
	for (int k = 0; k < NCHILD; k++) {
		int ws = 0;

		if (pids[k] > 0 && waitpid(pids[k], &ws, 0) == pids[k] && WIFEXITED(ws) &&
		    WEXITSTATUS(ws) == 0)
			ok++;
	}
	CHECK_INT(ok, NCHILD);
	printf("  %d clients in %d processes connected at once, set, got and waited: "
	       "%d processes of %d succeeded\n", NCHILD * PER, NCHILD, ok, NCHILD);
}

static pid_t fork_server_auth(int *port, int auth_timeout_ms);

/* 500 connections that never authenticate (silent, or stopped half way
 * through a frame) do not stall the job's own clients, and the server
 * drops each at its authentication deadline.  The server runs in a child,
 * so that this process holds only the client ends. */
static void test_store_tcp_500_idle_connections_do_not_stall_clients(void)
{
	enum { IDLE = 500 };
	static int fds[IDLE];
	herd_store *c = NULL;
	struct rlimit rl;
	char addr[64], *v = NULL;
	size_t len = 0;
	int port = 0, open_ = 0, dropped = 0;
	pid_t pid;

	/* The default limit of 1024 descriptors holds 500 and the rest. */
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur < 2 * IDLE + 64 && rl.rlim_max >= 2 * IDLE + 64) {
		rl.rlim_cur = 2 * IDLE + 64;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	pid = fork_server_auth(&port, 1500);
	CHECK(pid > 0 && port > 0);
	if (pid <= 0 || port <= 0)
		return;
	for (int i = 0; i < IDLE; i++) {
		fds[i] = raw_connect(port);
		open_ += fds[i] >= 0;
		/* Every tenth sends the first two bytes of a frame's length. */
		if (fds[i] >= 0 && i % 10 == 0)
			CHECK(send(fds[i], "\0\0", 2, MSG_NOSIGNAL) == 2);
	}
	CHECK_INT(open_, IDLE);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	/* With all of them open, a client connects, writes and reads. */
	CHECK_OK(connect_with(&c, addr, SECRET, 2000, 2000));
	if (c != NULL) {
		CHECK_OK(herd_store_set(c, "k", "v", 1));
		CHECK_OK(herd_store_get(c, "k", 1000, (void **)&v, &len));
		CHECK(len == 1 && v != NULL && v[0] == 'v');
		herd_free(v);
		herd_store_free(c);
	}
	/* And the server drops every one of them (bounded: 5 s in all). */
	for (int i = 0; i < IDLE; i++)
		if (fds[i] >= 0) {
			dropped += raw_wait_closed(fds[i], i == 0 ? 5000 : 100) >= 0;
			close(fds[i]);
		}
	CHECK_INT(dropped, IDLE);
	printf("  %d idle connections open; a client connected, set and got; the server "
	       "dropped all %d at its deadline\n", open_, dropped);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A child process hosting a server; its port comes back through a pipe. */
static pid_t fork_server(int *port)
{
	return fork_server_auth(port, 0);
}

/* The same with the server's authentication deadline (0: the default). */
static pid_t fork_server_auth(int *port, int auth_timeout_ms)
{
	int fds[2];
	pid_t pid;

	*port = 0;
	if (pipe(fds) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		herd_store_server *srv = NULL;
		int p = 0;

		close(fds[0]);
		if (start_server(&srv, auth_timeout_ms) == HERD_OK)
			p = herd_store_server_port(srv);
		if (write(fds[1], &p, sizeof(p)) != sizeof(p))
			_exit(1);
		close(fds[1]);
		/* Bounded: the test kills it long before. */
		sleep_ms(30000);
		_exit(0);
	}
	close(fds[1]);
	if (pid > 0 && raw_read(fds[0], port, sizeof(*port), 5000) != 0)
		*port = 0;
	close(fds[0]);
	return pid;
}

struct killer {
	pid_t pid;
	int sig;
	int delay_ms;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;

	sleep_ms(k->delay_ms);
	kill(k->pid, k->sig);
	return NULL;
}

static void test_store_tcp_killed_server_gives_eclosed_at_once(void)
{
	struct killer k;
	herd_store *c = NULL;
	char addr[64];
	void *v = NULL;
	pthread_t t;
	int64_t t0, took;
	int port;
	pid_t pid = fork_server(&port);

	CHECK(pid > 0 && port > 0);
	if (pid <= 0 || port <= 0) {
		if (pid > 0)
			reap_child(pid, 0);
		return;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	CHECK_OK(connect_with(&c, addr, SECRET, 10000, 5000));
	CHECK_OK(herd_store_set(c, "k", "v", 1));
	/* A get waiting up to 10 s; the server is killed 300 ms into it. */
	k = (struct killer){ pid, SIGKILL, 300 };
	CHECK_INT(pthread_create(&t, NULL, kill_later, &k), 0);
	t0 = now_ms();
	CHECK_ERR(herd_store_get(c, "never", 10000, &v, NULL), HERD_ECLOSED, addr);
	took = now_ms() - t0;
	CHECK(strstr(herd_last_error(), "never") != NULL);
	CHECK(took >= 250 && took < 1500);
	printf("  [timing] kill -9 of the server 300 ms into a 10 s get: HERD_ECLOSED %lld ms "
	       "after the kill (%s)\n", (long long)(took - 300), herd_last_error());
	pthread_join(t, NULL);
	/* Every later call fails at once too. */
	t0 = now_ms();
	CHECK_ERR(herd_store_set(c, "k", "v", 1), HERD_ECLOSED, addr);
	CHECK(now_ms() - t0 < 100);
	herd_store_free(c);
	CHECK_INT(reap_child(pid, 5000), -1);
}

static void test_store_tcp_hung_server_times_out_at_the_deadline(void)
{
	herd_store *c = NULL;
	char addr[64];
	int64_t t0, took;
	int port;
	pid_t pid = fork_server(&port);

	CHECK(pid > 0 && port > 0);
	if (pid <= 0 || port <= 0) {
		if (pid > 0)
			reap_child(pid, 0);
		return;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	CHECK_OK(connect_with(&c, addr, SECRET, 300, 5000));
	CHECK_OK(herd_store_set(c, "k", "v", 1));
	/* A stopped server keeps its sockets open but never answers. */
	kill(pid, SIGSTOP);
	for (int i = 0; i < 200; i++) {
		int status;

		if (waitpid(pid, &status, WUNTRACED | WNOHANG) == pid && WIFSTOPPED(status))
			break;
		sleep_ms(5);
	}
	t0 = now_ms();
	CHECK_ERR(herd_store_set(c, "k", "w", 1), HERD_ETIMEDOUT, "no reply");
	took = now_ms() - t0;
	CHECK(strstr(herd_last_error(), addr) != NULL);
	CHECK(strstr(herd_last_error(), "\"k\"") != NULL);
	CHECK(took >= 290 && took < 1300);
	printf("  [timing] a stopped server: set with a 300 ms timeout gave HERD_ETIMEDOUT after "
	       "%lld ms\n", (long long)took);
	kill(pid, SIGKILL);
	kill(pid, SIGCONT);
	CHECK_INT(reap_child(pid, 5000), -1);
	/* The reply never came: the connection is still usable for nothing but ECLOSED. */
	CHECK(herd_store_set(c, "k", "x", 1) != HERD_OK);
	herd_store_free(c);
}

struct waiting_get {
	herd_store *c;
	herd_status st;
	int64_t took;
};

static void *waiting_get_run(void *arg)
{
	struct waiting_get *w = arg;
	int64_t t0 = now_ms();
	void *v = NULL;

	w->st = herd_store_get(w->c, "never", 10000, &v, NULL);
	w->took = now_ms() - t0;
	herd_free(v);
	return NULL;
}

static void test_store_tcp_stopped_server_releases_waiting_clients(void)
{
	herd_store_server *srv = NULL;
	struct waiting_get w = { 0 };
	pthread_t t;
	int64_t t0;

	CHECK_OK(start_server(&srv, 0));
	if (srv == NULL)
		return;
	CHECK_OK(connect_with(&w.c, herd_store_server_address(srv), SECRET, 10000, 2000));
	CHECK_INT(pthread_create(&t, NULL, waiting_get_run, &w), 0);
	sleep_ms(200);
	t0 = now_ms();
	herd_store_server_free(srv);
	CHECK(now_ms() - t0 < 500);
	pthread_join(t, NULL);
	CHECK_INT(w.st, HERD_ECLOSED);
	CHECK(w.took < 1500);
	printf("  [timing] herd_store_server_free released a 10 s get after %lld ms\n",
	       (long long)w.took);
	herd_store_free(w.c);
}

static void test_store_tcp_connect_retries_until_its_deadline(void)
{
	herd_store *c = (herd_store *)1;
	int64_t t0, took;
	int fd, port;

	/* A port with nothing listening: bind one, note it, close it. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_in sa = { .sin_family = AF_INET };
		socklen_t sl = sizeof(sa);

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		CHECK_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		CHECK_INT(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
		port = ntohs(sa.sin_port);
		close(fd);
	}
	{
		char addr[64];

		snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
		t0 = now_ms();
		CHECK_ERR(connect_with(&c, addr, SECRET, 5000, 300), HERD_ETIMEDOUT, "refused");
		took = now_ms() - t0;
		CHECK(strstr(herd_last_error(), addr) != NULL);
		CHECK(c == NULL);
		CHECK(took >= 290 && took < 1300);
		printf("  [timing] connect to a closed port with a 300 ms deadline gave up after "
		       "%lld ms\n", (long long)took);
	}
}

static void test_store_tcp_connect_to_a_mute_listener_times_out(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	herd_store *c = NULL;
	char addr[64];
	int64_t t0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	/* It accepts (the kernel does) but never greets. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_INT(listen(fd, 4), 0);
	CHECK_INT(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	t0 = now_ms();
	CHECK_ERR(connect_with(&c, addr, SECRET, 5000, 300), HERD_ETIMEDOUT, addr);
	CHECK(now_ms() - t0 < 1300);
	close(fd);
}

static void test_store_tcp_parses_addresses(void)
{
	char host[64];
	int port = 0;

	CHECK_OK(herd__net_parse_hostport("127.0.0.1:29500", host, sizeof(host), &port));
	CHECK_STR(host, "127.0.0.1");
	CHECK_INT(port, 29500);
	CHECK_OK(herd__net_parse_hostport("[::1]:80", host, sizeof(host), &port));
	CHECK_STR(host, "::1");
	CHECK_INT(port, 80);
	CHECK_OK(herd__net_parse_hostport("node-7.cluster:1", host, sizeof(host), &port));
	CHECK_STR(host, "node-7.cluster");
	CHECK_ERR(herd__net_parse_hostport("localhost", host, sizeof(host), &port), HERD_EINVAL,
		  "host:port");
	CHECK_ERR(herd__net_parse_hostport("::1:80", host, sizeof(host), &port), HERD_EINVAL,
		  "brackets");
	CHECK_ERR(herd__net_parse_hostport("[::1:80", host, sizeof(host), &port), HERD_EINVAL,
		  "[v6addr]:port");
	CHECK_ERR(herd__net_parse_hostport("h:0", host, sizeof(host), &port), HERD_EINVAL,
		  "1 to 65535");
	CHECK_ERR(herd__net_parse_hostport("h:65536", host, sizeof(host), &port), HERD_EINVAL,
		  "1 to 65535");
	CHECK_ERR(herd__net_parse_hostport("h:12x", host, sizeof(host), &port), HERD_EINVAL,
		  "not a number");
	CHECK_ERR(herd__net_parse_hostport(":80", host, sizeof(host), &port), HERD_EINVAL,
		  "empty host");
	{
		herd_store *c = (herd_store *)1;

		CHECK_ERR(connect_with(&c, "nonsense", SECRET, 1000, 1000), HERD_EINVAL,
			  "\"nonsense\": expected host:port");
		CHECK(c == NULL);
	}
}

static void test_store_tcp_serves_ipv6_loopback(void)
{
	herd_store_server_opts o = HERD_STORE_SERVER_OPTS_INIT;
	herd_store_server *srv = NULL;
	herd_store *c = NULL;
	void *v = NULL;

	o.host = "::1";
	o.secret = SECRET;
	if (herd_store_server_start(&srv, &o) != HERD_OK)
		TEST_SKIP("no IPv6 loopback here: %s", herd_last_error());
	CHECK(strncmp(herd_store_server_address(srv), "[::1]:", 6) == 0);
	CHECK_OK(connect_with(&c, herd_store_server_address(srv), SECRET, 2000, 2000));
	CHECK_OK(herd_store_set(c, "k", "v6", 2));
	CHECK_OK(herd_store_get(c, "k", 0, &v, NULL));
	CHECK_STR((char *)v, "v6");
	herd_free(v);
	herd_store_free(c);
	herd_store_server_free(srv);
}

static void test_store_tcp_reads_secret_and_address_from_the_environment(void)
{
	herd_store_server *srv = NULL;
	herd_store *c = NULL;
	void *v = NULL;

	CHECK_INT(setenv("HERD_JOB_SECRET", "env-secret", 1), 0);
	CHECK_OK(herd_store_server_start(&srv, NULL));
	if (srv == NULL)
		return;
	CHECK_INT(setenv("HERD_STORE", herd_store_server_address(srv), 1), 0);
	CHECK_OK(herd_store_connect(&c, NULL, NULL));
	CHECK_OK(herd_store_set(c, "k", "env", 3));
	CHECK_OK(herd_store_get(c, "k", 0, &v, NULL));
	CHECK_STR((char *)v, "env");
	herd_free(v);
	herd_store_free(c);
	herd_store_server_free(srv);
	unsetenv("HERD_STORE");
	unsetenv("HERD_JOB_SECRET");
	CHECK_ERR(herd_store_connect(&c, NULL, NULL), HERD_EINVAL, "HERD_STORE");
}

static void test_store_tcp_server_checks_its_options(void)
{
	herd_store_server_opts o = HERD_STORE_SERVER_OPTS_INIT;
	herd_store_server *srv = (herd_store_server *)1;
	herd_store_opts co = HERD_STORE_OPTS_INIT;
	herd_store *c = NULL;

	unsetenv("HERD_JOB_SECRET");
	CHECK_ERR(herd_store_server_start(&srv, &o), HERD_EINVAL, "HERD_JOB_SECRET");
	CHECK(srv == NULL);
	o.secret = "";
	CHECK_ERR(herd_store_server_start(&srv, &o), HERD_EINVAL, "no job secret");
	o.secret = SECRET;
	o.port = server_port;
	CHECK_ERR(herd_store_server_start(&srv, &o), HERD_EIO, "cannot listen");
	o.port = 70000;
	CHECK_ERR(herd_store_server_start(&srv, &o), HERD_EINVAL, "70000");
	o.port = 0;
	o.version = 0;
	CHECK_ERR(herd_store_server_start(&srv, &o), HERD_EINVAL, "HERD_STORE_SERVER_OPTS_INIT");
	o.version = HERD_STORE_SERVER_OPTS_VERSION;
	o.host = "no-such-host.invalid";
	CHECK(herd_store_server_start(&srv, &o) != HERD_OK);
	CHECK(srv == NULL);
	co.version = 99;
	CHECK_ERR(herd_store_connect(&c, server_addr, &co), HERD_EINVAL,
		  "HERD_STORE_OPTS_INIT");
	herd_store_server_free(NULL);
}

static void test_store_secret_generate_gives_distinct_hex(void)
{
	char a[HERD_STORE_SECRET_BUF], b[HERD_STORE_SECRET_BUF];

	CHECK_OK(herd_store_secret_generate(a));
	CHECK_OK(herd_store_secret_generate(b));
	CHECK_INT(strlen(a), 64);
	CHECK(strspn(a, "0123456789abcdef") == 64);
	CHECK(strcmp(a, b) != 0);
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;

	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static void test_store_tcp_leaks_no_descriptors_or_threads(void)
{
	int fds0 = count_dir("/proc/self/fd"), tasks0 = count_dir("/proc/self/task");
	herd_store_server *srv = NULL;
	herd_store *c[3] = { NULL, NULL, NULL }, *p = NULL;
	void *v = NULL;

	CHECK_OK(start_server(&srv, 300));
	if (srv == NULL)
		return;
	for (int i = 0; i < 2; i++)
		CHECK_OK(connect_with(&c[i], herd_store_server_address(srv), SECRET, 2000, 2000));
	CHECK_OK(herd_store_prefix(&p, c[0], "x/"));
	CHECK_OK(herd_store_set(p, "k", "v", 1));
	CHECK_ERR(herd_store_get(c[1], "missing", 50, &v, NULL), HERD_ETIMEDOUT, "missing");
	CHECK_ERR(connect_with(&c[2], herd_store_server_address(srv), "wrong", 2000, 2000),
		  HERD_EAUTH, "secret");
	/* A silent raw client too, dropped by the server. */
	{
		int fd = raw_connect(herd_store_server_port(srv));

		CHECK(raw_wait_closed(fd, 2000) >= 0);
		close(fd);
	}
	/* The refused client's connection closes right after its error reply. */
	for (int i = 0; i < 100 && herd__store_server_connections(srv) != 2; i++)
		sleep_ms(10);
	CHECK_INT(herd__store_server_connections(srv), 2);
	herd_store_free(c[0]);
	herd_store_free(c[1]);
	CHECK_OK(herd_store_get(p, "k", 0, &v, NULL)); /* the prefix handle keeps it open */
	herd_free(v);
	herd_store_free(p);
	herd_store_server_free(srv);
	CHECK_INT(count_dir("/proc/self/fd"), fds0);
	CHECK_INT(count_dir("/proc/self/task"), tasks0);
}

/*
 * Starts the contract's server in a child; it serves until the returned
 * pipe closes (or for two minutes at most).
 */
static pid_t fork_main_server(int *keep_alive)
{
	int up[2], alive[2];
	pid_t pid;

	if (pipe(up) != 0 || pipe(alive) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		herd_store_server *srv = NULL;
		struct pollfd pfd = { alive[0], POLLIN, 0 };
		int port = 0;

		close(up[0]);
		close(alive[1]);
		if (start_server(&srv, 0) == HERD_OK)
			port = herd_store_server_port(srv);
		if (write(up[1], &port, sizeof(port)) != sizeof(port))
			_exit(1);
		close(up[1]);
		poll(&pfd, 1, 120000);
		herd_store_server_free(srv);
		_exit(0);
	}
	close(up[1]);
	close(alive[0]);
	if (pid < 0 || raw_read(up[0], &server_port, sizeof(server_port), 10000) != 0 ||
	    server_port <= 0) {
		close(up[0]);
		close(alive[1]);
		return -1;
	}
	close(up[0]);
	snprintf(server_addr, sizeof(server_addr), "127.0.0.1:%d", server_port);
	*keep_alive = alive[1];
	return pid;
}

int main(void)
{
	int keep_alive = -1, rc;
	pid_t server_pid;

	/* Faults stay quiet unless HERD_LOG asks for them. */
	if (getenv("HERD_LOG") == NULL)
		herd_log_set_level(HERD_LOG_ERROR);
	server_pid = fork_main_server(&keep_alive);
	if (server_pid < 0) {
		fprintf(stderr, "cannot start the store server\n");
		return 1;
	}
	if (contract_open(&good, 10000) != HERD_OK) {
		fprintf(stderr, "cannot connect: %s\n", herd_last_error());
		return 1;
	}
	run_store_contract();
	TEST_RUN(test_store_tcp_wrong_secret_gets_eauth_and_server_keeps_serving);
	TEST_RUN(test_store_tcp_client_rejects_a_server_without_the_secret);
	TEST_RUN(test_store_tcp_client_rejects_a_server_that_cannot_prove_the_secret);
	TEST_RUN(test_store_tcp_client_rejects_another_format_version);
	TEST_RUN(test_store_tcp_serves_many_clients_at_once);
	TEST_RUN(test_store_tcp_garbage_before_auth_is_dropped);
	TEST_RUN(test_store_tcp_4gb_length_prefix_is_dropped);
	TEST_RUN(test_store_tcp_garbage_after_auth_is_answered_and_dropped);
	TEST_RUN(test_store_tcp_silent_client_is_dropped_at_the_auth_deadline);
	TEST_RUN(test_store_tcp_500_idle_connections_do_not_stall_clients);
	TEST_RUN(test_store_tcp_serves_4096_clients_at_once);
	TEST_RUN(test_store_tcp_killed_server_gives_eclosed_at_once);
	TEST_RUN(test_store_tcp_hung_server_times_out_at_the_deadline);
	TEST_RUN(test_store_tcp_stopped_server_releases_waiting_clients);
	TEST_RUN(test_store_tcp_connect_retries_until_its_deadline);
	TEST_RUN(test_store_tcp_connect_to_a_mute_listener_times_out);
	TEST_RUN(test_store_tcp_parses_addresses);
	TEST_RUN(test_store_tcp_serves_ipv6_loopback);
	TEST_RUN(test_store_tcp_reads_secret_and_address_from_the_environment);
	TEST_RUN(test_store_tcp_server_checks_its_options);
	TEST_RUN(test_store_secret_generate_gives_distinct_hex);
	TEST_RUN(test_store_tcp_leaks_no_descriptors_or_threads);
	herd_store_free(good);
	close(keep_alive);
	rc = TEST_DONE();
	if (reap_child(server_pid, 10000) != 0) {
		fprintf(stderr, "the store server process did not exit cleanly\n");
		rc = 1;
	}
	return rc;
}
