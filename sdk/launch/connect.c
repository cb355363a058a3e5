/*
 * sdk/launch/connect.c - connect-back channels (connect.h): the launcher
 * accepting and authenticating its nodes, and herd_agent_connect, the node's
 * side.
 *
 * Every frame of the handshake is read exactly, header then payload, never
 * more: the node protocol follows on the same socket, and its first bytes
 * must stay in the socket for the reader that comes next.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "herd/job.h"
#include "herd/sys/agent.h"

#include "connect.h"
#include "loop.h"
#include "auth.h"
#include "net.h"
#include "wire.h"
#include "topo/hostlist.h"

#define FRAME_BUF (4 + HERD__CONNECT_FRAME_MAX)
/* How long a node waits for its launcher by default (HERD_TIMEOUT_DEFAULT). */
#define CONNECT_DEFAULT_MS 60000
/* Output of the helper kept for messages. */
#define HELPER_OUT_MAX 8192

/* The handshake's frames, on base/wire.c's envelope. */
enum { T_UNKNOWN, T_HELLO, T_AUTH, T_AUTH_OK, T_ERROR, T_COUNT };

static const char *const type_names[T_COUNT] = { "?", "hello", "auth", "auth_ok", "error" };

static const herd__wire_proto proto = {
	.name = "connect-back",
	.version = 1,
	.types = type_names,
	.ntypes = T_COUNT,
	.limits = { .max_depth = 1, .max_objects = 32 },
};

/* One decoded handshake frame; the bytes point into up. */
typedef struct cb_msg {
	msgpack_unpacked up;
	int type;
	const uint8_t *nonce, *mac, *key;
	size_t nonce_n, mac_n, key_n;
} cb_msg;

/* A byte-string (or string) field, NULL and 0 when absent or of another type. */
static const uint8_t *field_bytes(const msgpack_object *root, const char *name, size_t *n)
{
	const msgpack_object *o = herd__wire_field(root, name);

	*n = 0;
	if (o != NULL && o->type == MSGPACK_OBJECT_BIN) {
		*n = o->via.bin.size;
		return (const uint8_t *)o->via.bin.ptr;
	}
	if (o != NULL && o->type == MSGPACK_OBJECT_STR) {
		*n = o->via.str.size;
		return (const uint8_t *)o->via.str.ptr;
	}
	return NULL;
}

static herd_status cb_decode(cb_msg *m, const void *data, size_t len)
{
	memset(m, 0, sizeof(*m));
	HERD_CHECK(herd__wire_open(&proto, &m->up, data, len, &m->type));
	m->nonce = field_bytes(&m->up.data, "nonce", &m->nonce_n);
	m->mac = field_bytes(&m->up.data, "mac", &m->mac_n);
	m->key = field_bytes(&m->up.data, "key", &m->key_n);
	return HERD_OK;
}

static void cb_free(cb_msg *m)
{
	if (m->up.zone != NULL)
		msgpack_unpacked_destroy(&m->up);
	memset(m, 0, sizeof(*m));
}

/* Finishes one handshake frame and sends it whole before deadline. */
static herd_status send_frame(int fd, herd__frame_enc *e, herd__buf *b, int64_t deadline,
			      const char *peer)
{
	herd_status st = herd__frame_end(e, HERD__CONNECT_FRAME_MAX, proto.name);

	if (st == HERD_OK)
		st = herd__net_send_all(fd, b->data + b->off, b->len - b->off, deadline, peer);
	herd__buf_free(b);
	return st;
}

static herd_status send_hello(int fd, const uint8_t nonce[HERD__AUTH_NONCE_LEN],
			      int64_t deadline, const char *peer)
{
	herd__buf b = { 0 };
	herd__frame_enc e;

	herd__wire_begin(&proto, &e, &b, T_HELLO);
	herd__frame_bin(&e, "nonce", nonce, HERD__AUTH_NONCE_LEN);
	return send_frame(fd, &e, &b, deadline, peer);
}

static void send_refusal(int fd, herd_status code, const char *msg, const char *peer)
{
	herd__buf b = { 0 };
	herd__frame_enc e;

	herd__wire_begin(&proto, &e, &b, T_ERROR);
	herd__frame_int(&e, "st", code);
	herd__frame_str(&e, "msg", msg, strlen(msg));
	/* Best effort: the connection closes either way. */
	(void)send_frame(fd, &e, &b, herd__net_deadline(100), peer);
}

/* ---- the launcher's side ----------------------------------------------------- */

/*
 * Connections half-way through authentication sit in a fixed table (their
 * watchers and timers are in the loop, so a slot never moves); a free
 * slot has fd -1.
 */
struct conn {
	struct acceptor *a;
	int fd;
	uint8_t nonce[HERD__AUTH_NONCE_LEN];
	uint8_t frame[FRAME_BUF];
	size_t have;
	int64_t deadline;
	char peer[HERD_NET_ADDR_LEN];
	herd__watcher w;
	herd__timer timer;
};

struct acceptor {
	const char *secret;
	const herd__launch_node *nodes;
	size_t nnodes, connected;
	herd__launch_channel *channels;
	struct conn pending[HERD__CONNECT_MAX_PENDING];
	herd__loop loop;
	herd__watcher listen, helper;
	herd__buf *helper_out;
	const char *helper_name;
	herd_status st;               /* the first failure that ends the wait */
	char why[1024];               /* its message */
};

static void drop(struct conn *c)
{
	herd__loop_unwatch(&c->a->loop, &c->w);
	herd__loop_timer_stop(&c->a->loop, &c->timer);
	close(c->fd);
	c->fd = -1;
}

/* The job's nodes not connected yet, as a hostlist, into out. */
static void missing_nodes(const struct acceptor *a, char *out, size_t cap)
{
	const char **names = NULL;
	char *joined = NULL;
	size_t n = 0;

	out[0] = '\0';
	if (herd__calloc(&names, a->nnodes + 1, sizeof(*names), "a node list") != HERD_OK)
		return;
	for (size_t i = 0; i < a->nnodes; i++)
		if (a->channels[i].rfd < 0)
			names[n++] = a->nodes[i].host;
	if (herd__hostlist_compress(&joined, names, n) == HERD_OK)
		herd__strlcpy(out, joined, cap);
	free(joined);
	free(names);
}

/* Checks an "auth" frame; *node is the node's index, or the call fails. */
static herd_status check_auth(struct acceptor *a, struct conn *c, size_t *node, bool *fatal)
{
	const uint8_t *payload = c->frame + 4;
	uint8_t want[HERD__AUTH_MAC_LEN];
	char name[HERD__HOSTNAME_MAX + 1], all[512];
	cb_msg m;
	herd_status st = HERD_OK;
	size_t i;

	*fatal = false;
	st = cb_decode(&m, payload, c->have - 4);
	if (st != HERD_OK) {
		cb_free(&m);
		return st;
	}
	if (m.type != T_AUTH || m.nonce_n != HERD__AUTH_NONCE_LEN ||
	    m.mac_n != HERD__AUTH_MAC_LEN || m.key_n == 0 || m.key_n > HERD__HOSTNAME_MAX) {
		st = herd__error(HERD_EAUTH, "connection from %s: not a herd node's answer",
				 c->peer);
		goto out;
	}
	herd__auth_mac(want, a->secret, strlen(a->secret), c->nonce, m.nonce,
		       HERD__CONNECT_LABEL_NODE);
	if (!herd__auth_mac_equal(want, m.mac, m.mac_n)) {
		st = herd__error(HERD_EAUTH, "connection from %s: wrong job secret", c->peer);
		goto out;
	}
	/* From here on it knows the secret: it is one of ours, and what it
	 * says about itself is to be believed. */
	memcpy(name, m.key, m.key_n);
	name[m.key_n] = '\0';
	for (i = 0; i < a->nnodes; i++)
		if (strcmp(a->nodes[i].host, name) == 0 && a->channels[i].rfd < 0)
			break;
	if (i == a->nnodes) {
		bool twice = false;

		for (size_t k = 0; k < a->nnodes; k++)
			twice = twice || strcmp(a->nodes[k].host, name) == 0;
		missing_nodes(a, all, sizeof(all));
		*fatal = true;
		st = twice ? herd__error(HERD_EUNAVAIL, "node %s connected back twice (from %s)",
					 name, c->peer)
			   : herd__error(HERD_EUNAVAIL,
					 "a node connected back from %s as \"%s\", which is not "
					 "one of the nodes still expected (%s)",
					 c->peer, name, all);
		goto out;
	}
	*node = i;
	herd__auth_mac(want, a->secret, strlen(a->secret), m.nonce, c->nonce,
		       HERD__CONNECT_LABEL_LAUNCHER);
	{
		herd__buf b = { 0 };
		herd__frame_enc e;

		herd__wire_begin(&proto, &e, &b, T_AUTH_OK);
		herd__frame_bin(&e, "mac", want, sizeof(want));
		st = send_frame(c->fd, &e, &b, c->deadline, c->peer);
	}
out:
	cb_free(&m);
	OPENSSL_cleanse(want, sizeof(want));
	return st;
}

/* Reads what a pending connection has sent; drops it when it fails. */
static void on_pending(herd__watcher *w, short revents)
{
	struct conn *c = w->data;
	struct acceptor *a = c->a;
	size_t need, node = 0;
	bool fatal = false;
	herd_status st;
	ssize_t got;

	(void)revents;
	if (c->have < 4) {
		need = 4 - c->have;
	} else {
		size_t len = (size_t)herd__be32_load(c->frame);

		if (len == 0 || len > HERD__CONNECT_FRAME_MAX) {
			herd__log_debug("launch: connection from %s: a %zu-byte frame before "
					"authentication; dropped", c->peer, len);
			drop(c);
			return;
		}
		need = 4 + len - c->have;
	}
	got = recv(c->fd, c->frame + c->have, need, 0);
	if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (got <= 0) {
		drop(c);
		return;
	}
	c->have += (size_t)got;
	if (c->have < 4 || c->have < 4 + (size_t)herd__be32_load(c->frame))
		return;
	st = check_auth(a, c, &node, &fatal);
	if (st != HERD_OK) {
		herd__log_debug("launch: %s", herd_last_error());
		send_refusal(c->fd, HERD_EAUTH, "refused", c->peer);
		drop(c);
		if (fatal && a->st == HERD_OK) {
			a->st = st;
			herd__strlcpy(a->why, herd_last_error(), sizeof(a->why));
		}
		return;
	}
	herd__loop_unwatch(&a->loop, &c->w);
	herd__loop_timer_stop(&a->loop, &c->timer);
	a->channels[node].rfd = a->channels[node].wfd = c->fd;
	a->connected++;
	c->fd = -1;
}

static void on_auth_timeout(herd__timer *t)
{
	struct conn *c = t->data;

	herd__log_debug("launch: connection from %s did not authenticate in time; dropped",
			c->peer);
	drop(c);
}

static void on_listen(herd__watcher *w, short revents)
{
	struct acceptor *a = w->data;

	(void)revents;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c = NULL;

		if (fd < 0)
			return;
		for (size_t i = 0; i < HERD__CONNECT_MAX_PENDING && c == NULL; i++)
			if (a->pending[i].fd < 0)
				c = &a->pending[i];
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->have = 0;
		c->deadline = herd__net_deadline(HERD__CONNECT_AUTH_TIMEOUT_MS);
		herd__net_peer_addr(fd, c->peer);
		herd__net_tune(fd);
		c->w.fd = fd;
		if (herd__auth_random(c->nonce, sizeof(c->nonce)) != HERD_OK ||
		    send_hello(fd, c->nonce, c->deadline, c->peer) != HERD_OK ||
		    herd__loop_watch(&a->loop, &c->w, POLLIN) != HERD_OK ||
		    herd__loop_timer(&a->loop, &c->timer, c->deadline) != HERD_OK) {
			drop(c);
			continue;
		}
	}
}

/* Keeps the helper's last HELPER_OUT_MAX bytes; false at its end. */
static bool helper_read(int fd, herd__buf *out)
{
	char buf[4096];

	for (;;) {
		ssize_t got = read(fd, buf, sizeof(buf));

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK;
		if (got == 0)
			return false;
		if (out != NULL) {
			if (out->len - out->off + (size_t)got > HELPER_OUT_MAX)
				herd__buf_consume(out, out->len - out->off);
			(void)herd__buf_append(out, buf, (size_t)got);
		}
	}
}

/* The process that starts the nodes (srun) has more to say, or has ended. */
static void on_helper(herd__watcher *w, short revents)
{
	struct acceptor *a = w->data;
	char missing[512];

	(void)revents;
	if (helper_read(w->fd, a->helper_out) || a->st != HERD_OK)
		return;
	missing_nodes(a, missing, sizeof(missing));
	a->st = HERD_EUNAVAIL;
	snprintf(a->why, sizeof(a->why), "%s ended before %s connected back", a->helper_name,
		 missing);
}

herd_status herd__connect_accept(int lfd, const char *secret, const herd__launch_node *nodes,
				 size_t nnodes, herd__launch_channel *channels,
				 const char *helper_name, int helper_fd, herd__buf *helper_out,
				 int64_t deadline)
{
	struct acceptor *a = NULL;
	char missing[512];
	herd_status st = HERD_OK;

	for (size_t i = 0; i < nnodes; i++)
		channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	HERD_CHECK(herd__calloc(&a, 1, sizeof(*a), "the connect-back state"));
	a->secret = secret;
	a->nodes = nodes;
	a->nnodes = nnodes;
	a->channels = channels;
	a->helper_out = helper_out;
	a->helper_name = helper_name;
	herd__loop_init(&a->loop);
	for (size_t i = 0; i < HERD__CONNECT_MAX_PENDING; i++) {
		struct conn *c = &a->pending[i];

		c->a = a;
		c->fd = -1;
		herd__watcher_init(&c->w, -1, on_pending, c);
		herd__timer_init(&c->timer, on_auth_timeout, c);
	}
	herd__watcher_init(&a->listen, lfd, on_listen, a);
	herd__watcher_init(&a->helper, helper_fd, on_helper, a);
	HERD_CHECK_GOTO(herd__loop_watch(&a->loop, &a->listen, POLLIN), st, out);
	if (helper_fd >= 0)
		HERD_CHECK_GOTO(herd__loop_watch(&a->loop, &a->helper, POLLIN), st, out);
	while (a->connected < nnodes && a->st == HERD_OK) {
		if (herd__net_now_ms() >= deadline) {
			missing_nodes(a, missing, sizeof(missing));
			st = herd__error(HERD_ETIMEDOUT,
					 "%zu of %zu nodes did not connect back within the start "
					 "timeout: %s",
					 nnodes - a->connected, nnodes, missing);
			goto out;
		}
		st = herd__loop_run_once(&a->loop, deadline);
		if (st != HERD_OK) {
			herd__error_wrap(st, "launch: ");
			goto out;
		}
	}
	st = a->st;
	if (st != HERD_OK)
		herd__error(st, "%s", a->why);
out:
	for (size_t i = 0; i < HERD__CONNECT_MAX_PENDING; i++)
		if (a->pending[i].fd >= 0)
			drop(&a->pending[i]);
	herd__loop_free(&a->loop);
	if (st != HERD_OK) {
		for (size_t i = 0; i < nnodes; i++) {
			if (channels[i].rfd >= 0)
				close(channels[i].rfd);
			channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
		}
	}
	free(a);
	return st;
}

/* ---- the node's side ------------------------------------------------------------- */

/* Reads one whole handshake frame and decodes it (payload kept in frame). */
static herd_status recv_frame(int fd, uint8_t frame[FRAME_BUF], cb_msg *m, int64_t deadline,
			      const char *peer)
{
	size_t have = 0, want = 4;

	while (have < want) {
		size_t got = 0;

		HERD_CHECK(herd__net_recv_some(fd, frame + have, want - have, &got, deadline, peer));
		if (got == 0)
			return herd__error(HERD_ETIMEDOUT, "%s: no answer during the connect-back "
					   "handshake", peer);
		have += got;
		if (have == 4) {
			size_t len = (size_t)herd__be32_load(frame);

			if (len == 0 || len > HERD__CONNECT_FRAME_MAX)
				return herd__error(HERD_EFORMAT, "%s: not a herd launcher (a "
						   "%zu-byte frame)", peer, len);
			want = 4 + len;
		}
	}
	return cb_decode(m, frame + 4, want - 4);
}

herd_status herd_agent_connect(int *fd, const char *addr, const char *secret, const char *node,
			       int timeout_ms)
{
	int64_t deadline;
	uint8_t frame[FRAME_BUF], lnonce[HERD__AUTH_NONCE_LEN], nnonce[HERD__AUTH_NONCE_LEN];
	uint8_t mac[HERD__AUTH_MAC_LEN];
	char host[HERD_NET_ADDR_LEN], name[HERD__HOSTNAME_MAX + 1], peer[HERD_NET_ADDR_LEN + 40];
	cb_msg m;
	herd__buf b = { 0 };
	herd__frame_enc e;
	herd_status st;
	int port, s = -1;

	memset(&m, 0, sizeof(m));
	if (fd == NULL || addr == NULL)
		return herd__error(HERD_EINVAL, "herd exec --connect: fd and addr are required");
	*fd = -1;
	if (timeout_ms <= 0 && timeout_ms != HERD_TIMEOUT_DEFAULT)
		return herd__error(HERD_EINVAL, "herd exec --connect: timeout_ms %d is neither a "
				   "positive count nor HERD_TIMEOUT_DEFAULT", timeout_ms);
	deadline = herd__net_deadline(timeout_ms > 0 ? timeout_ms : CONNECT_DEFAULT_MS);
	HERD_CHECK(herd__auth_secret(secret, &secret));
	if (node == NULL || node[0] == '\0')
		node = getenv("SLURMD_NODENAME");
	if (node == NULL || node[0] == '\0') {
		if (gethostname(name, sizeof(name)) != 0)
			return herd__error_errno(HERD_ESYS, errno, "herd exec --connect: gethostname");
		name[sizeof(name) - 1] = '\0';
		node = name;
	}
	if (strlen(node) > HERD__HOSTNAME_MAX)
		return herd__error(HERD_EINVAL, "herd exec --connect: node name \"%.40s...\" is "
				   "too long", node);
	HERD_CHECK(herd__net_parse_hostport(addr, host, sizeof(host), &port));
	snprintf(peer, sizeof(peer), "launcher %s", addr);
	HERD_CHECK_GOTO(herd__net_connect(&s, host, port, deadline), st, fail);
	HERD_CHECK_GOTO(recv_frame(s, frame, &m, deadline, peer), st, fail);
	if (m.type != T_HELLO || m.nonce_n != HERD__AUTH_NONCE_LEN) {
		st = herd__error(HERD_EFORMAT, "%s: not a herd launcher (its greeting has no "
				 "challenge)", peer);
		goto fail;
	}
	memcpy(lnonce, m.nonce, sizeof(lnonce));
	cb_free(&m);
	HERD_CHECK_GOTO(herd__auth_random(nnonce, sizeof(nnonce)), st, fail);
	herd__auth_mac(mac, secret, strlen(secret), lnonce, nnonce, HERD__CONNECT_LABEL_NODE);
	herd__wire_begin(&proto, &e, &b, T_AUTH);
	herd__frame_bin(&e, "nonce", nnonce, sizeof(nnonce));
	herd__frame_bin(&e, "mac", mac, sizeof(mac));
	herd__frame_bin(&e, "key", node, strlen(node));
	HERD_CHECK_GOTO(send_frame(s, &e, &b, deadline, peer), st, fail);
	st = recv_frame(s, frame, &m, deadline, peer);
	if (st == HERD_ECLOSED) {
		st = herd__error(HERD_EAUTH, "%s closed the connection: it refused this node "
				 "(is HERD_JOB_SECRET the job's?)", peer);
		goto fail;
	}
	if (st != HERD_OK)
		goto fail;
	if (m.type == T_ERROR) {
		st = herd__error(HERD_EAUTH, "%s refused node %s (is HERD_JOB_SECRET the job's?)",
				 peer, node);
		goto fail;
	}
	herd__auth_mac(mac, secret, strlen(secret), nnonce, lnonce, HERD__CONNECT_LABEL_LAUNCHER);
	if (m.type != T_AUTH_OK || !herd__auth_mac_equal(mac, m.mac, m.mac_n)) {
		st = herd__error(HERD_EAUTH, "%s did not prove that it knows the job secret",
				 peer);
		goto fail;
	}
	cb_free(&m);
	*fd = s;
	return HERD_OK;
fail:
	cb_free(&m);
	herd__buf_free(&b);
	if (s >= 0)
		close(s);
	return st;
}
