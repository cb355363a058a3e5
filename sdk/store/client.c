/*
 * sdk/store/client.c - the TCP store client: one authenticated connection
 * that several threads share.
 *
 * A request carries an id, and its thread waits for the reply with that id.
 * Replies can come out of order (a get that waits is answered when its key
 * is set), so no thread may own the socket for the length of a call.
 * Instead, under the handle's mutex, one waiting thread at a time takes the
 * reader's role: it reads whatever arrives, hands each reply to the thread
 * whose id it carries, and gives the role up when its own reply is in.
 * Sending is likewise one thread at a time, each frame written whole.
 * A reply that comes after its caller gave up is dropped by id.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "backend.h"
#include "base.h"
#include "net.h"
#include "proto.h"

/* How long after a get's or wait's own deadline the server's answer may take. */
#define REPLY_GRACE_MS 2000
#define READ_CHUNK 65536u
/* Keys named in a timeout message. */
#define SHOWN_KEYS 8

typedef struct pending {
	struct pending *next;
	uint64_t id;
	int done;
	uint8_t *payload;        /* the reply's bytes, owned */
	herd__store_msg reply;   /* decoded from payload */
} pending;

typedef struct tcp_store {
	herd__store_backend base;
	char where[HERD_NET_ADDR_LEN + 300];  /* "store host:port", for messages */
	int fd;
	atomic_uint_least64_t next_id;
	pthread_mutex_t mu;                   /* guards everything below */
	pthread_cond_t cv;                    /* a reply came, or a role was given up */
	pending *pending;
	int reading, writing;                 /* roles: one thread each */
	herd_status broken;                   /* HERD_OK while the connection works */
	char broken_msg[512];
	herd__buf in;                   /* used only by the reader */
	int connect_ms;                       /* the connect timeout, for messages */
} tcp_store;

/* ---- the connection ------------------------------------------------------ */

/* Waits on cv until woken or deadline; called with mu held. */
static void wait_until(tcp_store *s, int64_t deadline)
{
	herd__net_cond_wait_until(&s->cv, &s->mu, deadline);
}

/* Records the first reason the connection became unusable; mu held. */
static void mark_broken(tcp_store *s, herd_status st, const char *msg)
{
	if (s->broken == HERD_OK) {
		s->broken = st;
		herd__strlcpy(s->broken_msg, msg, sizeof(s->broken_msg));
	}
	pthread_cond_broadcast(&s->cv);
}

static herd_status fail_broken(tcp_store *s, const char *what)
{
	return herd__error(s->broken, "%s: %s (%s)", s->where, s->broken_msg, what);
}

/*
 * Takes the payload of the next complete frame out of in: *payload
 * (malloc'd) and *len, or *payload NULL when no frame is complete yet.
 */
static herd_status next_frame(herd__buf *in, size_t limit, uint8_t **payload, size_t *len)
{
	size_t n;

	*payload = NULL;
	*len = 0;
	HERD_CHECK(herd__store_frame_peek(in, limit, &n));
	if (n == SIZE_MAX)
		return HERD_OK;
	*payload = malloc(n);
	if (*payload == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for a reply of %zu bytes", n);
	memcpy(*payload, in->data + in->off + 4, n);
	*len = n;
	herd__buf_consume(in, 4 + n);
	return HERD_OK;
}

/* Reads some bytes into in: the rest of the frame under way, or a chunk. */
static herd_status read_more(tcp_store *s, int64_t deadline)
{
	size_t have = s->in.len - s->in.off, want = READ_CHUNK, got;

	if (have >= 4) {
		const uint8_t *p = s->in.data + s->in.off;
		size_t total = 4 + (size_t)herd__be32_load(p);

		if (total > have + READ_CHUNK && total <= HERD__STORE_FRAME_MAX + 4)
			want = total - have;
	}
	HERD_CHECK(herd__buf_reserve(&s->in, want));
	HERD_CHECK(herd__net_recv_some(s->fd, s->in.data + s->in.len, want, &got, deadline,
				       "the server"));
	s->in.len += got;
	return HERD_OK;
}

/* Hands one reply to the thread waiting for it; mu held. */
static herd_status dispatch(tcp_store *s, uint8_t *payload, size_t len)
{
	herd__store_msg m;
	pending *p;

	if (herd__store_msg_decode(&m, payload, len) != HERD_OK) {
		free(payload);
		return herd__error_wrap(HERD_EFORMAT, "the server sent a malformed reply: ");
	}
	if (m.type == HERD__STORE_T_ERROR) {
		herd_status st = (m.has & HERD__STORE_F_ST) && m.st < 0 ? (herd_status)m.st
									: HERD_EPEER;

		st = herd__error(st, "the server closed the connection: %.*s",
				 (int)(m.msg.n > 300 ? 300 : m.msg.n), (const char *)m.msg.p);
		herd__store_msg_free(&m);
		free(payload);
		return st;
	}
	if (m.type != HERD__STORE_T_REPLY || !(m.has & HERD__STORE_F_ID) ||
	    !(m.has & HERD__STORE_F_ST)) {
		herd__store_msg_free(&m);
		free(payload);
		return herd__error(HERD_EFORMAT, "the server sent a message that is not a reply");
	}
	for (p = s->pending; p != NULL; p = p->next)
		if (p->id == m.id && !p->done)
			break;
	if (p == NULL) {
		/* The reply to a call that already gave up. */
		herd__store_msg_free(&m);
		free(payload);
		return HERD_OK;
	}
	p->reply = m;
	p->payload = payload;
	p->done = 1;
	return HERD_OK;
}

/*
 * Plays the reader once: reads what arrives before deadline (with mu
 * released) and dispatches the complete replies.  Failures break the
 * connection for everyone.  mu held on entry and on return.
 */
static void read_step(tcp_store *s, int64_t deadline)
{
	herd_status st;

	s->reading = 1;
	pthread_mutex_unlock(&s->mu);
	st = read_more(s, deadline);
	pthread_mutex_lock(&s->mu);
	s->reading = 0;
	while (st == HERD_OK) {
		uint8_t *payload;
		size_t len;

		st = next_frame(&s->in, HERD__STORE_FRAME_MAX, &payload, &len);
		if (st != HERD_OK || payload == NULL)
			break;
		st = dispatch(s, payload, len);
	}
	if (st != HERD_OK)
		mark_broken(s, st, herd_last_error());
	pthread_cond_broadcast(&s->cv);
}

/*
 * Sends the request frame in req (request id) and waits until deadline for
 * its reply, which goes to *reply and *payload (free both).  HERD_OK means
 * a reply came, whatever its status.
 */
static herd_status call(tcp_store *s, const herd__buf *req, uint64_t id, int64_t deadline,
			const char *what, herd__store_msg *reply, uint8_t **payload)
{
	pending p, **pp;
	herd_status st = HERD_OK;

	memset(&p, 0, sizeof(p));
	p.id = id;
	pthread_mutex_lock(&s->mu);
	if (s->broken != HERD_OK) {
		st = fail_broken(s, what);
		pthread_mutex_unlock(&s->mu);
		return st;
	}
	p.next = s->pending;
	s->pending = &p;
	while (s->writing && s->broken == HERD_OK && herd__net_now_ms() < deadline)
		wait_until(s, deadline);
	if (s->broken != HERD_OK) {
		st = fail_broken(s, what);
		goto out;
	}
	if (s->writing) {
		st = herd__error(HERD_ETIMEDOUT, "%s: other threads' requests kept the connection "
				 "busy until the deadline (%s)", s->where, what);
		goto out;
	}
	s->writing = 1;
	pthread_mutex_unlock(&s->mu);
	st = herd__net_send_all(s->fd, req->data + req->off, req->len - req->off, deadline,
				"the server");
	pthread_mutex_lock(&s->mu);
	s->writing = 0;
	pthread_cond_broadcast(&s->cv);
	if (st != HERD_OK) {
		/* Part of the frame may be out: nothing more can be sent after it. */
		herd__error_wrap(st, "cannot send a request: ");
		mark_broken(s, HERD_ECLOSED, herd_last_error());
		st = herd__error(st, "%s: %s (%s)", s->where, s->broken_msg, what);
		goto out;
	}
	while (!p.done) {
		if (s->broken != HERD_OK) {
			st = fail_broken(s, what);
			break;
		}
		if (herd__net_now_ms() >= deadline) {
			st = herd__error(HERD_ETIMEDOUT, "%s: no reply from the server before the "
					 "deadline (%s)", s->where, what);
			break;
		}
		if (!s->reading)
			read_step(s, deadline);
		else
			wait_until(s, deadline);
	}
out:
	for (pp = &s->pending; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == &p) {
			*pp = p.next;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (p.done && st == HERD_OK) {
		*reply = p.reply;
		*payload = p.payload;
	} else if (p.done) {
		herd__store_msg_free(&p.reply);
		free(p.payload);
	}
	return st;
}

/* ---- requests ------------------------------------------------------------ */

typedef struct request {
	herd__buf buf;
	herd__store_enc enc;
	uint64_t id;
	char what[256];      /* "get of key "x"", for messages */
	herd__store_msg reply;
	uint8_t *payload;
} request;

static void begin(tcp_store *s, request *r, herd__store_type type, const char *key)
{
	char q[200];

	memset(r, 0, sizeof(*r));
	r->id = atomic_fetch_add(&s->next_id, 1);
	herd__store_enc_begin(&r->enc, &r->buf, type);
	herd__store_enc_uint(&r->enc, "id", r->id);
	if (key != NULL) {
		herd__store_quote(q, sizeof(q), key, strlen(key));
		snprintf(r->what, sizeof(r->what), "%s of key %s", herd__store_type_name(type), q);
		herd__store_enc_bin(&r->enc, "key", key, strlen(key));
	} else {
		snprintf(r->what, sizeof(r->what), "%s", herd__store_type_name(type));
	}
}

static void end(request *r)
{
	herd__store_msg_free(&r->reply);
	free(r->payload);
	herd__buf_free(&r->buf);
}

/*
 * Sends r and waits for its reply.  A reply whose status is an error other
 * than HERD_ETIMEDOUT (which get and wait explain themselves) is raised
 * with the server's message.
 */
static herd_status exchange(tcp_store *s, request *r, int64_t deadline)
{
	herd_status st;

	HERD_CHECK(herd__store_enc_end(&r->enc));
	HERD_CHECK(call(s, &r->buf, r->id, deadline, r->what, &r->reply, &r->payload));
	st = (herd_status)r->reply.st;
	if (st == HERD_OK || st == HERD_ETIMEDOUT)
		return HERD_OK;
	if (r->reply.st > 0 || strcmp(herd_status_name(st), "HERD_UNKNOWN") == 0)
		st = HERD_EPEER;
	return herd__error(st, "%s: %.*s", s->where, (int)(r->reply.msg.n > 400 ? 400 : r->reply.msg.n),
			   r->reply.msg.n ? (const char *)r->reply.msg.p : "request failed");
}

static herd_status copy_value(herd__store_bytes v, void **out, size_t *len)
{
	char *p = malloc(v.n + 1);

	if (p == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for a value of %zu bytes", v.n);
	if (v.n > 0)
		memcpy(p, v.p, v.n);
	p[v.n] = '\0';
	*out = p;
	*len = v.n;
	return HERD_OK;
}

/* The HERD_ETIMEDOUT of a get or wait, naming the keys the server reported missing. */
static herd_status missing_error(tcp_store *s, const request *r, int timeout_ms, size_t nkeys)
{
	herd__store_bytes shown[SHOWN_KEYS];
	size_t nshown = r->reply.nmissing < SHOWN_KEYS ? r->reply.nmissing : SHOWN_KEYS;

	for (size_t i = 0; i < nshown; i++)
		shown[i] = herd__store_msg_item(r->reply.missing, i);
	return herd__store_missing_error(s->where, timeout_ms, nkeys, r->reply.nmissing, shown,
					 nshown);
}

static herd_status tcp_set(herd__store_backend *b, const char *key, const void *value,
			   size_t len, int timeout_ms)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_SET, key);
	herd__store_enc_bin(&r.enc, "val", value, len);
	st = exchange(s, &r, herd__net_deadline(timeout_ms));
	if (st == HERD_OK && r.reply.st != HERD_OK)
		st = herd__error(HERD_EPEER, "%s: the server answered a set with a timeout",
				 s->where);
	end(&r);
	return st;
}

static herd_status tcp_get(herd__store_backend *b, const char *key, int timeout_ms, void **value,
			   size_t *len)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_GET, key);
	herd__store_enc_int(&r.enc, "ms", timeout_ms);
	st = exchange(s, &r, herd__net_deadline(timeout_ms) + REPLY_GRACE_MS);
	if (st == HERD_OK && r.reply.st == HERD_ETIMEDOUT)
		st = missing_error(s, &r, timeout_ms, 1);
	else if (st == HERD_OK && !(r.reply.has & HERD__STORE_F_VAL))
		st = herd__error(HERD_EPEER, "%s: the reply to a get has no value", s->where);
	else if (st == HERD_OK)
		st = copy_value(r.reply.val, value, len);
	end(&r);
	return st;
}

static herd_status tcp_add(herd__store_backend *b, const char *key, int64_t delta,
			   int64_t *result, int timeout_ms)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_ADD, key);
	herd__store_enc_int(&r.enc, "delta", delta);
	st = exchange(s, &r, herd__net_deadline(timeout_ms));
	if (st == HERD_OK && (r.reply.st != HERD_OK || !(r.reply.has & HERD__STORE_F_N)))
		st = herd__error(HERD_EPEER, "%s: the reply to an add has no count", s->where);
	else if (st == HERD_OK)
		*result = r.reply.n;
	end(&r);
	return st;
}

static herd_status tcp_compare_set(herd__store_backend *b, const char *key, const void *expected,
				   size_t expected_len, const void *desired, size_t desired_len,
				   bool *swapped, void **current, size_t *current_len,
				   int timeout_ms)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_CAS, key);
	if (expected != NULL)
		herd__store_enc_bin(&r.enc, "exp", expected, expected_len);
	herd__store_enc_bin(&r.enc, "val", desired, desired_len);
	st = exchange(s, &r, herd__net_deadline(timeout_ms));
	if (st == HERD_OK && (r.reply.st != HERD_OK || !(r.reply.has & HERD__STORE_F_N)))
		st = herd__error(HERD_EPEER, "%s: the reply to a compare_set has no outcome",
				 s->where);
	if (st == HERD_OK) {
		*swapped = r.reply.n != 0;
		if (r.reply.has & HERD__STORE_F_VAL)
			st = copy_value(r.reply.val, current, current_len);
	}
	end(&r);
	return st;
}

static herd_status tcp_del(herd__store_backend *b, const char *key, bool *existed,
			   int timeout_ms)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_DEL, key);
	st = exchange(s, &r, herd__net_deadline(timeout_ms));
	if (st == HERD_OK && (r.reply.st != HERD_OK || !(r.reply.has & HERD__STORE_F_N)))
		st = herd__error(HERD_EPEER, "%s: the reply to a delete has no outcome", s->where);
	else if (st == HERD_OK)
		*existed = r.reply.n != 0;
	end(&r);
	return st;
}

static herd_status tcp_wait(herd__store_backend *b, const char *const *keys, size_t nkeys,
			    int timeout_ms)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_WAIT, NULL);
	snprintf(r.what, sizeof(r.what), "wait for %zu keys", nkeys);
	herd__store_enc_int(&r.enc, "ms", timeout_ms);
	herd__store_enc_array(&r.enc, "keys", nkeys);
	for (size_t i = 0; i < nkeys; i++)
		herd__store_enc_item(&r.enc, keys[i], strlen(keys[i]));
	st = exchange(s, &r, herd__net_deadline(timeout_ms) + REPLY_GRACE_MS);
	if (st == HERD_OK && r.reply.st == HERD_ETIMEDOUT)
		st = missing_error(s, &r, timeout_ms, nkeys);
	end(&r);
	return st;
}

static herd_status tcp_keys(herd__store_backend *b, const char *prefix,
			    herd__store_keylist *list, int timeout_ms)
{
	tcp_store *s = (tcp_store *)b;
	herd_status st;
	request r;

	begin(s, &r, HERD__STORE_T_KEYS, prefix);
	snprintf(r.what, sizeof(r.what), "list keys");
	st = exchange(s, &r, herd__net_deadline(timeout_ms));
	if (st == HERD_OK && (r.reply.st != HERD_OK || !(r.reply.has & HERD__STORE_F_KEYS)))
		st = herd__error(HERD_EPEER, "%s: the reply to a listing of keys has no keys",
				 s->where);
	for (size_t i = 0; st == HERD_OK && i < r.reply.nkeys; i++) {
		herd__store_bytes k = herd__store_msg_item(r.reply.keys, i);

		if (k.n == 0 || memchr(k.p, '\0', k.n) != NULL)
			st = herd__error(HERD_EPEER, "%s: a listed key is empty or holds a NUL",
					 s->where);
		else
			st = herd__store_keylist_add(list, k.p, k.n, prefix, s->where);
	}
	end(&r);
	return st;
}

static void tcp_destroy(herd__store_backend *b)
{
	tcp_store *s = (tcp_store *)b;

	if (s->fd >= 0)
		close(s->fd);
	herd__buf_free(&s->in);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static herd_status tcp_local_addr(herd__store_backend *b, char *addr, size_t cap)
{
	tcp_store *s = (tcp_store *)b;
	char a[HERD_NET_ADDR_LEN];
	int port;

	HERD_CHECK(herd__net_local_addr(s->fd, a, &port));
	return herd__net_parse_hostport(a, addr, cap, &port);
}

static const herd__store_ops tcp_ops = {
	.set = tcp_set,
	.get = tcp_get,
	.add = tcp_add,
	.compare_set = tcp_compare_set,
	.del = tcp_del,
	.wait = tcp_wait,
	.keys = tcp_keys,
	.local_addr = tcp_local_addr,
	.destroy = tcp_destroy,
};

/* ---- connecting ---------------------------------------------------------- */

/* Reads one whole message before deadline, while no other thread uses s. */
static herd_status recv_msg(tcp_store *s, int64_t deadline, herd__store_msg *m,
			    uint8_t **payload)
{
	herd_status st;
	size_t len;

	for (;;) {
		HERD_CHECK(next_frame(&s->in, HERD__STORE_FRAME_MAX_PREAUTH, payload, &len));
		if (*payload != NULL)
			break;
		if (herd__net_now_ms() >= deadline)
			return herd__error(HERD_ETIMEDOUT, "no answer from the server within the "
					   "connect timeout of %d ms", s->connect_ms);
		HERD_CHECK(read_more(s, deadline));
	}
	st = herd__store_msg_decode(m, *payload, len);
	if (st != HERD_OK) {
		free(*payload);
		*payload = NULL;
		return herd__error_wrap(st, "unexpected answer (is it a herd store server of this "
					"version?): ");
	}
	return HERD_OK;
}

/* The challenge-response of proto.h, from the client's side. */
static herd_status authenticate(tcp_store *s, const char *secret, int64_t deadline)
{
	uint8_t cnonce[HERD__AUTH_NONCE_LEN], mac[HERD__AUTH_MAC_LEN];
	uint8_t snonce[HERD__AUTH_NONCE_LEN];
	herd__store_msg m;
	uint8_t *payload = NULL;
	herd__buf out = { 0 };
	herd__store_enc e;
	herd_status st;

	memset(&m, 0, sizeof(m));
	HERD_CHECK(recv_msg(s, deadline, &m, &payload));
	if (m.type != HERD__STORE_T_HELLO || !(m.has & HERD__STORE_F_NONCE) ||
	    m.nonce.n != HERD__AUTH_NONCE_LEN) {
		st = herd__error(HERD_EFORMAT, "not a herd store server (its greeting has no "
				 "challenge)");
		goto out;
	}
	memcpy(snonce, m.nonce.p, sizeof(snonce));
	herd__store_msg_free(&m);
	free(payload);
	payload = NULL;
	HERD_CHECK_GOTO(herd__auth_random(cnonce, sizeof(cnonce)), st, out);
	herd__auth_mac(mac, secret, strlen(secret), snonce, cnonce, HERD__STORE_LABEL_CLIENT);
	herd__store_enc_begin(&e, &out, HERD__STORE_T_AUTH);
	herd__store_enc_bin(&e, "nonce", cnonce, sizeof(cnonce));
	herd__store_enc_bin(&e, "mac", mac, sizeof(mac));
	HERD_CHECK_GOTO(herd__store_enc_end(&e), st, out);
	HERD_CHECK_GOTO(herd__net_send_all(s->fd, out.data, out.len, deadline, "the server"), st,
			out);
	st = recv_msg(s, deadline, &m, &payload);
	if (st == HERD_ECLOSED) {
		st = herd__error_wrap(HERD_EAUTH, "the server dropped the connection during "
				      "authentication (is HERD_JOB_SECRET the job's?): ");
		goto out;
	}
	if (st != HERD_OK)
		goto out;
	if (m.type == HERD__STORE_T_ERROR) {
		st = herd__error(HERD_EAUTH, "the server rejected the job secret (is "
				 "HERD_JOB_SECRET the job's?): %.*s",
				 (int)(m.msg.n > 300 ? 300 : m.msg.n), (const char *)m.msg.p);
		goto out;
	}
	herd__auth_mac(mac, secret, strlen(secret), cnonce, snonce, HERD__STORE_LABEL_SERVER);
	if (m.type != HERD__STORE_T_AUTH_OK || !herd__auth_mac_equal(mac, m.mac.p, m.mac.n)) {
		st = herd__error(HERD_EAUTH, "the server could not prove that it holds the job "
				 "secret");
		goto out;
	}
	st = HERD_OK;
out:
	herd__store_msg_free(&m);
	free(payload);
	herd__buf_free(&out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return st;
}

herd_status herd__store_tcp_connect(herd__store_backend **out, const char *address,
				    const herd_store_opts *opts)
{
	char host[HERD_NET_ADDR_LEN + 160];
	const char *secret;
	int64_t deadline = herd__net_deadline(opts->connect_timeout_ms);
	tcp_store *s;
	herd_status st;
	int port;

	*out = NULL;
	HERD_CHECK(herd__auth_secret(opts->secret, &secret));
	HERD_CHECK(herd__net_parse_hostport(address, host, sizeof(host), &port));
	HERD_CHECK(herd__calloc(&s, 1, sizeof(*s), "a store connection"));
	s->base.ops = &tcp_ops;
	s->fd = -1;
	s->connect_ms = opts->connect_timeout_ms;
	atomic_init(&s->next_id, 1);
	snprintf(s->where, sizeof(s->where), "store %s", address);
	{
		herd__net_cond_init(&s->cv);
		pthread_mutex_init(&s->mu, NULL);
	}
	st = herd__net_connect(&s->fd, host, port, deadline);
	if (st == HERD_OK)
		st = authenticate(s, secret, deadline);
	if (st != HERD_OK) {
		herd__error_wrap(st, "%s: ", s->where);
		tcp_destroy(&s->base);
		return st;
	}
	*out = &s->base;
	return HERD_OK;
}
