/*
 * Connect-back channels (sdk/launch/connect.h and herd_agent_connect): nodes
 * on threads connect to a real listening socket on loopback; each gets the
 * channel of the node it names, whatever the order they arrive in; a wrong
 * secret is refused on both sides, a launcher that does not know the
 * secret is refused by the node, an unknown node name and the end of the
 * helper fail the wait with what happened, and a node that never comes
 * makes it time out naming it.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "herd/sys/agent.h"
#include "launch/connect.h"
#include "net.h"
#include "store/proto.h"
#include "test.h"

#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct node_thread {
	pthread_t t;
	char addr[64];
	const char *secret, *name;
	herd_status st;
	char err[512];
};

/* A node: connects, then writes its name on the channel and closes it. */
static void *node_main(void *arg)
{
	struct node_thread *n = arg;
	int fd = -1;

	n->st = herd_agent_connect(&fd, n->addr, n->secret, n->name, 5000);
	if (n->st != HERD_OK) {
		herd__strlcpy(n->err, herd_last_error(), sizeof(n->err));
		return NULL;
	}
	n->st = herd__net_send_all(fd, n->name, strlen(n->name), herd__net_deadline(5000), "test");
	close(fd);
	return NULL;
}

static void node_start(struct node_thread *n, int port, const char *secret, const char *name)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->addr, sizeof(n->addr), "127.0.0.1:%d", port);
	n->secret = secret;
	n->name = name;
	CHECK(pthread_create(&n->t, NULL, node_main, n) == 0);
}

static int listen_here(int *port)
{
	char addr[HERD_NET_ADDR_LEN];
	int fd = -1;

	CHECK_OK(herd__net_listen(&fd, "127.0.0.1", 0));
	CHECK_OK(herd__net_local_addr(fd, addr, port));
	return fd;
}

static void make_nodes(herd__launch_node *nodes, const char *const *names, size_t n)
{
	memset(nodes, 0, n * sizeof(*nodes));
	for (size_t i = 0; i < n; i++)
		nodes[i].host = (char *)names[i];
}

/* What the node on channel ch wrote before closing it. */
static const char *read_all(const herd__launch_channel *ch)
{
	static char buf[64];
	size_t have = 0;

	for (;;) {
		size_t got = 0;

		if (herd__net_recv_some(ch->rfd, buf + have, sizeof(buf) - 1 - have, &got,
					herd__net_deadline(5000), "node") != HERD_OK || got == 0)
			break;
		have += got;
	}
	buf[have] = '\0';
	return buf;
}

static void test_connect_each_node_gets_the_channel_of_its_name(void)
{
	static const char *const names[] = { "node1", "node2", "node3" };
	herd__launch_node nodes[3];
	herd__launch_channel ch[3];
	struct node_thread t[3];
	int port = 0, lfd = listen_here(&port);

	make_nodes(nodes, names, 3);
	/* They arrive in another order than the job lists them. */
	node_start(&t[0], port, SECRET, "node3");
	node_start(&t[1], port, SECRET, "node1");
	node_start(&t[2], port, SECRET, "node2");
	CHECK_OK(herd__connect_accept(lfd, SECRET, nodes, 3, ch, "srun", -1, NULL,
				      herd__net_deadline(10000)));
	for (int i = 0; i < 3; i++) {
		CHECK(ch[i].rfd >= 0 && ch[i].rfd == ch[i].wfd);
		CHECK_INT(ch[i].errfd, -1);
		CHECK_STR(read_all(&ch[i]), names[i]);
		close(ch[i].rfd);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i].t, NULL);
		CHECK_OK(t[i].st);
	}
	close(lfd);
}

static void test_connect_wrong_secret_is_refused_and_the_node_is_missed(void)
{
	static const char *const names[] = { "node1" };
	herd__launch_node nodes[1];
	herd__launch_channel ch[1];
	struct node_thread t;
	int port = 0, lfd = listen_here(&port);
	int64_t start = herd__net_now_ms();

	make_nodes(nodes, names, 1);
	node_start(&t, port, "not-the-job-secret", "node1");
	CHECK_ERR(herd__connect_accept(lfd, SECRET, nodes, 1, ch, "srun", -1, NULL,
				       herd__net_deadline(1500)),
		  HERD_ETIMEDOUT, "1 of 1 nodes did not connect back within the start timeout: node1");
	CHECK(herd__net_now_ms() - start < 5000);
	CHECK_INT(ch[0].rfd, -1);
	pthread_join(t.t, NULL);
	CHECK_INT(t.st, HERD_EAUTH);
	CHECK(strstr(t.err, "refused node node1 (is HERD_JOB_SECRET the job's?)") != NULL);
	close(lfd);
}

/* A launcher that does not know the secret: greets, then answers anything. */
static void *impostor_main(void *arg)
{
	int lfd = *(int *)arg, fd = -1;
	uint8_t nonce[HERD__AUTH_NONCE_LEN] = { 1 }, mac[HERD__AUTH_MAC_LEN] = { 2 }, junk[256];
	int64_t deadline = herd__net_deadline(5000);
	herd__buf b = { 0 };
	herd__store_enc e;
	size_t got = 0;

	for (int i = 0; i < 500 && fd < 0; i++) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			usleep(10000);
	}
	if (fd < 0)
		return NULL;
	herd__store_enc_begin(&e, &b, HERD__STORE_T_HELLO);
	herd__store_enc_bin(&e, "nonce", nonce, sizeof(nonce));
	(void)herd__store_enc_end(&e);
	(void)herd__net_send_all(fd, b.data + b.off, b.len - b.off, deadline, "node");
	herd__buf_free(&b);
	/* Whatever the node answers, "auth_ok" with a MAC made up. */
	(void)herd__net_recv_some(fd, junk, sizeof(junk), &got, deadline, "node");
	herd__store_enc_begin(&e, &b, HERD__STORE_T_AUTH_OK);
	herd__store_enc_bin(&e, "mac", mac, sizeof(mac));
	(void)herd__store_enc_end(&e);
	(void)herd__net_send_all(fd, b.data + b.off, b.len - b.off, deadline, "node");
	(void)herd__net_recv_some(fd, junk, sizeof(junk), &got, deadline, "node");
	herd__buf_free(&b);
	close(fd);
	return NULL;
}

static void test_connect_node_refuses_a_launcher_without_the_secret(void)
{
	int port = 0, lfd = listen_here(&port), fd = -1;
	char addr[64];
	pthread_t t;

	CHECK(pthread_create(&t, NULL, impostor_main, &lfd) == 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	CHECK_ERR(herd_agent_connect(&fd, addr, SECRET, "node1", 5000), HERD_EAUTH,
		  "did not prove that it knows the job secret");
	CHECK_INT(fd, -1);
	pthread_join(t, NULL);
	close(lfd);
}

static void test_connect_unknown_node_name_fails_the_wait(void)
{
	static const char *const names[] = { "node1", "node2" };
	herd__launch_node nodes[2];
	herd__launch_channel ch[2];
	struct node_thread t;
	int port = 0, lfd = listen_here(&port);

	make_nodes(nodes, names, 2);
	node_start(&t, port, SECRET, "node9");
	CHECK_ERR(herd__connect_accept(lfd, SECRET, nodes, 2, ch, "srun", -1, NULL,
				       herd__net_deadline(10000)),
		  HERD_EUNAVAIL, "as \"node9\", which is not one of the nodes still expected (node[1-2])");
	CHECK_INT(ch[0].rfd, -1);
	CHECK_INT(ch[1].rfd, -1);
	pthread_join(t.t, NULL);
	close(lfd);
}

static void test_connect_helper_end_fails_the_wait_with_its_words(void)
{
	static const char *const names[] = { "node1", "node2" };
	static const char said[] = "srun: error: Unable to create step for job 7\n";
	herd__launch_node nodes[2];
	herd__launch_channel ch[2];
	herd__buf out = { 0 };
	int port = 0, lfd = listen_here(&port), p[2];
	char *text = NULL;
	size_t len = 0;

	make_nodes(nodes, names, 2);
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], said, sizeof(said) - 1) == (ssize_t)(sizeof(said) - 1));
	close(p[1]);
	CHECK_ERR(herd__connect_accept(lfd, SECRET, nodes, 2, ch, "srun", p[0], &out,
				       herd__net_deadline(10000)),
		  HERD_EUNAVAIL, "srun ended before node[1-2] connected back");
	CHECK_OK(herd__buf_take(&out, "srun's output", &text, &len));
	CHECK_STR(text, said);
	free(text);
	herd__buf_free(&out);
	close(p[0]);
	close(lfd);
}

static void test_connect_bad_arguments(void)
{
	int fd = 5;

	CHECK_ERR(herd_agent_connect(&fd, "no-port", SECRET, "n1", 1000), HERD_EINVAL, "no-port");
	CHECK_INT(fd, -1);
	CHECK_ERR(herd_agent_connect(NULL, "127.0.0.1:1", SECRET, "n1", 1000), HERD_EINVAL,
		  "fd and addr are required");
	unsetenv("HERD_JOB_SECRET");
	CHECK_ERR(herd_agent_connect(&fd, "127.0.0.1:1", NULL, "n1", 1000), HERD_EINVAL,
		  "HERD_JOB_SECRET");
	/* A launcher that never answers must not hold a node: always a deadline. */
	CHECK_ERR(herd_agent_connect(&fd, "127.0.0.1:1", SECRET, "n1", 0), HERD_EINVAL,
		  "timeout_ms 0 is neither a positive count nor HERD_TIMEOUT_DEFAULT");
	CHECK_ERR(herd_agent_connect(&fd, "127.0.0.1:1", SECRET, "n1", HERD_TIMEOUT_NONE),
		  HERD_EINVAL, "timeout_ms -1");
}

int main(void)
{
	TEST_RUN(test_connect_each_node_gets_the_channel_of_its_name);
	TEST_RUN(test_connect_wrong_secret_is_refused_and_the_node_is_missed);
	TEST_RUN(test_connect_node_refuses_a_launcher_without_the_secret);
	TEST_RUN(test_connect_unknown_node_name_fails_the_wait);
	TEST_RUN(test_connect_helper_end_fails_the_wait_with_its_words);
	TEST_RUN(test_connect_bad_arguments);
	return TEST_DONE();
}
