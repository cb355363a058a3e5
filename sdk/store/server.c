/*
 * sdk/store/server.c - the TCP store server: one thread, poll() over
 * non-blocking sockets, the keys in a hash table in memory.
 *
 * Each connection has an input and an output buffer.  A connection first
 * authenticates (proto.h), under a small frame limit and a deadline; then
 * each complete frame is one request, answered by appending a reply to its
 * output buffer.  A get or wait whose keys are missing parks a waiter,
 * which a set, add or compare_set of one of its keys releases, or its
 * deadline expires.  Anything unexpected from a client closes that
 * connection only.  An eventfd tells the thread to stop.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <xxhash.h>

#include "backend.h"
#include "base.h"
#include "net.h"
#include "proto.h"

#define DEFAULT_AUTH_TIMEOUT_MS 5000
/* A connection being closed gets this long to take its last reply. */
#define CLOSE_LINGER_MS 1000
/* Stop reading a connection's requests while this much output waits for it. */
#define OUT_HIGH_WATER (4u * 1024u * 1024u)
#define READ_CHUNK 65536u
/* After accept fails for lack of descriptors, wait this long before trying again. */
#define ACCEPT_PAUSE_MS 100

enum conn_state { CONN_AUTH, CONN_READY, CONN_CLOSING };

typedef struct conn {
	int fd;
	enum conn_state state;
	int dead;                 /* to be closed and freed by reap() */
	int64_t deadline;         /* AUTH: authenticate by; CLOSING: give up by */
	uint8_t nonce[HERD__AUTH_NONCE_LEN];
	char peer[HERD_NET_ADDR_LEN];
	herd__buf in, out;
} conn;

typedef struct waiter {
	struct waiter *prev, *next;
	conn *c;
	uint64_t id;
	int is_get;               /* get: reply with the value; wait: with "ok" */
	int64_t deadline;
	size_t nkeys;
	herd__store_bytes *keys;  /* the key bytes follow this array in one allocation */
} waiter;

typedef struct entry {
	struct entry *next;
	uint64_t hash;
	uint8_t *val;
	size_t vlen, klen;
	uint8_t key[];
} entry;

struct herd_store_server {
	pthread_t thread;
	int thread_started;
	int listen_fd, wake_fd;
	int port;
	char address[HERD_NET_ADDR_LEN];
	uint8_t *secret;
	size_t secret_len;
	int auth_timeout_ms;
	atomic_size_t nconns_public;

	/* Owned by the server thread once it runs. */
	conn **conns;
	size_t nconns, capconns;
	waiter *waiters;
	entry **buckets;
	size_t nbuckets, nentries;
	uint64_t seed;
	int64_t accept_resume;
	struct pollfd *pfds;
	size_t cappfds;
};

/* ---- the keys ---------------------------------------------------------- */

static uint64_t key_hash(const herd_store_server *srv, herd__store_bytes k)
{
	return XXH3_64bits_withSeed(k.p, k.n, srv->seed);
}

static entry **find_slot(herd_store_server *srv, herd__store_bytes k, uint64_t h)
{
	entry **pp = &srv->buckets[h & (srv->nbuckets - 1)];

	for (; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->hash == h && (*pp)->klen == k.n && memcmp((*pp)->key, k.p, k.n) == 0)
			break;
	return pp;
}

static entry *find(herd_store_server *srv, herd__store_bytes k)
{
	return *find_slot(srv, k, key_hash(srv, k));
}

static void grow_table(herd_store_server *srv)
{
	size_t n = srv->nbuckets * 2;
	entry **nb = calloc(n, sizeof(*nb));

	/* Without memory the chains just grow longer. */
	if (nb == NULL)
		return;
	for (size_t i = 0; i < srv->nbuckets; i++) {
		entry *e = srv->buckets[i], *next;

		for (; e != NULL; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	free(srv->buckets);
	srv->buckets = nb;
	srv->nbuckets = n;
}

static herd_status put(herd_store_server *srv, herd__store_bytes k, const void *v, size_t vlen)
{
	uint64_t h = key_hash(srv, k);
	entry **pp = find_slot(srv, k, h), *e = *pp;
	uint8_t *copy = malloc(vlen + 1);

	if (copy == NULL)
		return herd__error(HERD_ENOMEM, "store server out of memory for a value of %zu "
				   "bytes", vlen);
	if (vlen > 0)
		memcpy(copy, v, vlen);
	if (e == NULL) {
		e = malloc(sizeof(*e) + k.n);
		if (e == NULL) {
			free(copy);
			return herd__error(HERD_ENOMEM, "store server out of memory for a key");
		}
		e->hash = h;
		e->klen = k.n;
		memcpy(e->key, k.p, k.n);
		e->val = NULL;
		e->next = NULL;
		*pp = e;
		if (++srv->nentries > srv->nbuckets)
			grow_table(srv);
	}
	free(e->val);
	e->val = copy;
	e->vlen = vlen;
	return HERD_OK;
}

static int remove_key(herd_store_server *srv, herd__store_bytes k)
{
	entry **pp = find_slot(srv, k, key_hash(srv, k)), *e = *pp;

	if (e == NULL)
		return 0;
	*pp = e->next;
	free(e->val);
	free(e);
	srv->nentries--;
	return 1;
}

/* ---- connections ------------------------------------------------------- */

static void unpark(herd_store_server *srv, waiter *w)
{
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		srv->waiters = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	free(w);
}

/*
 * Drops a connection.  reap() closes it, and frees its waiters, after this
 * pass of the loop, so that loops over waiters may kill connections.
 */
static void kill_conn(herd_store_server *srv, conn *c, herd_log_level level, const char *why)
{
	if (c->dead)
		return;
	herd__log(level, "store server %s: dropping connection from %s: %s", srv->address,
		  c->peer, why);
	c->dead = 1;
}

/* Lets the last reply go out, then closes. */
static void close_after_flush(conn *c)
{
	c->state = CONN_CLOSING;
	c->deadline = herd__net_now_ms() + CLOSE_LINGER_MS;
}

static void flush(herd_store_server *srv, conn *c)
{
	while (!c->dead && c->out.len > c->out.off) {
		ssize_t n = send(c->fd, c->out.data + c->out.off, c->out.len - c->out.off,
				 MSG_NOSIGNAL);

		if (n > 0) {
			herd__buf_consume(&c->out, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		kill_conn(srv, c, HERD_LOG_INFO, n < 0 ? strerror(errno) : "send failed");
		return;
	}
	if (!c->dead && c->state == CONN_CLOSING)
		kill_conn(srv, c, HERD_LOG_DEBUG, "closed after its last reply");
}

/* Starts a reply to request id; finish it with end_reply. */
static void begin_reply(herd__store_enc *e, conn *c, uint64_t id, herd_status st)
{
	herd__store_enc_begin(e, &c->out, HERD__STORE_T_REPLY);
	herd__store_enc_uint(e, "id", id);
	herd__store_enc_int(e, "st", st);
}

static void end_reply(herd_store_server *srv, herd__store_enc *e, conn *c)
{
	if (herd__store_enc_end(e) != HERD_OK)
		kill_conn(srv, c, HERD_LOG_WARN, herd_last_error());
}

static void reply_status(herd_store_server *srv, conn *c, uint64_t id, herd_status st)
{
	herd__store_enc e;

	begin_reply(&e, c, id, st);
	if (st != HERD_OK)
		herd__store_enc_str(&e, "msg", herd_last_error());
	end_reply(srv, &e, c);
}

/* Answers a broken message with an error and closes the connection. */
static void reply_error_and_close(herd_store_server *srv, conn *c, herd_status st)
{
	herd__store_enc e;

	herd__log_info("store server %s: closing connection from %s: %s", srv->address,
		       c->peer, herd_last_error());
	herd__store_enc_begin(&e, &c->out, HERD__STORE_T_ERROR);
	herd__store_enc_int(&e, "st", st);
	herd__store_enc_str(&e, "msg", herd_last_error());
	if (herd__store_enc_end(&e) != HERD_OK) {
		kill_conn(srv, c, HERD_LOG_INFO, herd_last_error());
		return;
	}
	close_after_flush(c);
}

/* ---- waiting ------------------------------------------------------------- */

static void reply_value(herd_store_server *srv, conn *c, uint64_t id, const entry *en)
{
	herd__store_enc e;

	begin_reply(&e, c, id, HERD_OK);
	herd__store_enc_bin(&e, "val", en->val, en->vlen);
	end_reply(srv, &e, c);
}

/* The timeout reply of a get or wait, with the keys still missing. */
static void reply_missing(herd_store_server *srv, conn *c, uint64_t id,
			  const herd__store_bytes *keys, size_t nkeys)
{
	herd__store_enc e;
	size_t nmissing = 0;

	for (size_t i = 0; i < nkeys; i++)
		nmissing += find(srv, keys[i]) == NULL;
	begin_reply(&e, c, id, HERD_ETIMEDOUT);
	herd__store_enc_array(&e, "missing", nmissing);
	for (size_t i = 0; i < nkeys; i++)
		if (find(srv, keys[i]) == NULL)
			herd__store_enc_item(&e, keys[i].p, keys[i].n);
	end_reply(srv, &e, c);
}

static int all_present(herd_store_server *srv, const herd__store_bytes *keys, size_t nkeys)
{
	for (size_t i = 0; i < nkeys; i++)
		if (find(srv, keys[i]) == NULL)
			return 0;
	return 1;
}

static void park(herd_store_server *srv, conn *c, const herd__store_msg *m, int is_get)
{
	size_t nkeys = is_get ? 1 : m->nkeys, bytes = 0;
	herd__store_bytes *keys;
	uint8_t *p;
	waiter *w;

	for (size_t i = 0; i < nkeys; i++)
		bytes += is_get ? m->key.n : herd__store_msg_item(m->keys, i).n;
	w = malloc(sizeof(*w) + nkeys * sizeof(*keys) + bytes);
	if (w == NULL) {
		reply_status(srv, c, m->id, herd__error(HERD_ENOMEM, "store server out of "
							 "memory for a waiter"));
		return;
	}
	keys = (herd__store_bytes *)(w + 1);
	p = (uint8_t *)(keys + nkeys);
	for (size_t i = 0; i < nkeys; i++) {
		herd__store_bytes k = is_get ? m->key : herd__store_msg_item(m->keys, i);

		memcpy(p, k.p, k.n);
		keys[i].p = p;
		keys[i].n = k.n;
		p += k.n;
	}
	w->c = c;
	w->id = m->id;
	w->is_get = is_get;
	w->deadline = herd__net_now_ms() + m->ms;
	w->nkeys = nkeys;
	w->keys = keys;
	w->prev = NULL;
	w->next = srv->waiters;
	if (srv->waiters != NULL)
		srv->waiters->prev = w;
	srv->waiters = w;
}

/* Releases the waiters that key k (just set) completes. */
static void notify(herd_store_server *srv, herd__store_bytes k)
{
	waiter *w, *next;

	for (w = srv->waiters; w != NULL; w = next) {
		int involved = 0;

		next = w->next;
		if (w->c->dead)
			continue;
		for (size_t i = 0; i < w->nkeys && !involved; i++)
			involved = w->keys[i].n == k.n && memcmp(w->keys[i].p, k.p, k.n) == 0;
		if (!involved)
			continue;
		if (w->is_get)
			reply_value(srv, w->c, w->id, find(srv, k));
		else if (all_present(srv, w->keys, w->nkeys))
			reply_status(srv, w->c, w->id, HERD_OK);
		else
			continue;
		unpark(srv, w);
	}
}

/* ---- requests ------------------------------------------------------------ */

static void op_set(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	herd_status st = put(srv, m->key, m->val.p, m->val.n);

	reply_status(srv, c, m->id, st);
	if (st == HERD_OK)
		notify(srv, m->key);
}

static void op_get(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	entry *e = find(srv, m->key);

	if (e != NULL)
		reply_value(srv, c, m->id, e);
	else if (m->ms == 0)
		reply_missing(srv, c, m->id, &m->key, 1);
	else
		park(srv, c, m, 1);
}

static void op_add(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	char text[HERD__STORE_COUNTER_LEN];
	entry *e = find(srv, m->key);
	herd__store_enc enc;
	herd_status st;
	int64_t sum;

	st = herd__store_counter_add(e ? e->val : NULL, e ? e->vlen : 0, m->delta, &sum, text);
	if (st != HERD_OK) {
		char q[200];

		herd__store_quote(q, sizeof(q), m->key.p, m->key.n);
		reply_status(srv, c, m->id, herd__error_wrap(st, "add to key %s: ", q));
		return;
	}
	st = put(srv, m->key, text, strlen(text));
	if (st != HERD_OK) {
		reply_status(srv, c, m->id, st);
		return;
	}
	begin_reply(&enc, c, m->id, HERD_OK);
	herd__store_enc_int(&enc, "n", sum);
	end_reply(srv, &enc, c);
	notify(srv, m->key);
}

static void op_cas(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	entry *e = find(srv, m->key);
	int match;
	herd__store_enc enc;

	if (m->has & HERD__STORE_F_EXP)
		match = e != NULL && e->vlen == m->exp.n &&
			(m->exp.n == 0 || memcmp(e->val, m->exp.p, m->exp.n) == 0);
	else
		match = e == NULL;
	if (match) {
		herd_status st = put(srv, m->key, m->val.p, m->val.n);

		if (st != HERD_OK) {
			reply_status(srv, c, m->id, st);
			return;
		}
		e = find(srv, m->key);
	}
	begin_reply(&enc, c, m->id, HERD_OK);
	herd__store_enc_int(&enc, "n", match);
	if (e != NULL)
		herd__store_enc_bin(&enc, "val", e->val, e->vlen);
	end_reply(srv, &enc, c);
	if (match)
		notify(srv, m->key);
}

static void op_del(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	herd__store_enc enc;

	begin_reply(&enc, c, m->id, HERD_OK);
	herd__store_enc_int(&enc, "n", remove_key(srv, m->key));
	end_reply(srv, &enc, c);
}

static void op_wait(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	herd__store_enc enc;
	size_t missing = 0;

	for (size_t i = 0; i < m->nkeys; i++)
		missing += find(srv, herd__store_msg_item(m->keys, i)) == NULL;
	if (missing == 0) {
		reply_status(srv, c, m->id, HERD_OK);
		return;
	}
	if (m->ms > 0) {
		park(srv, c, m, 0);
		return;
	}
	/* Not waiting: answer at once with what is missing. */
	begin_reply(&enc, c, m->id, HERD_ETIMEDOUT);
	herd__store_enc_array(&enc, "missing", missing);
	for (size_t i = 0; i < m->nkeys; i++) {
		herd__store_bytes k = herd__store_msg_item(m->keys, i);

		if (find(srv, k) == NULL)
			herd__store_enc_item(&enc, k.p, k.n);
	}
	end_reply(srv, &enc, c);
}

/* Whether entry e's key starts with prefix p. */
static bool has_prefix(const entry *e, herd__store_bytes p)
{
	return e->klen >= p.n && (p.n == 0 || memcmp(e->key, p.p, p.n) == 0);
}

static void op_keys(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	herd__store_enc enc;
	size_t n = 0;

	for (size_t i = 0; i < srv->nbuckets; i++)
		for (const entry *e = srv->buckets[i]; e != NULL; e = e->next)
			n += has_prefix(e, m->key);
	if (n > HERD_STORE_KEYS_MAX) {
		herd__error(HERD_ENORESOURCE, "%zu keys start with \"%.*s\" (a listing holds at "
			    "most %d)", n, (int)(m->key.n > 200 ? 200 : m->key.n),
			    (const char *)m->key.p, HERD_STORE_KEYS_MAX);
		reply_status(srv, c, m->id, HERD_ENORESOURCE);
		return;
	}
	begin_reply(&enc, c, m->id, HERD_OK);
	herd__store_enc_array(&enc, "keys", n);
	for (size_t i = 0; i < srv->nbuckets; i++)
		for (const entry *e = srv->buckets[i]; e != NULL; e = e->next)
			if (has_prefix(e, m->key))
				herd__store_enc_item(&enc, e->key, e->klen);
	end_reply(srv, &enc, c);
}

typedef void (*op_fn)(herd_store_server *srv, conn *c, const herd__store_msg *m);

static const op_fn ops[HERD__STORE_T_COUNT] = {
	[HERD__STORE_T_SET] = op_set,
	[HERD__STORE_T_GET] = op_get,
	[HERD__STORE_T_ADD] = op_add,
	[HERD__STORE_T_CAS] = op_cas,
	[HERD__STORE_T_DEL] = op_del,
	[HERD__STORE_T_WAIT] = op_wait,
	[HERD__STORE_T_KEYS] = op_keys,
};

static void handle_auth(herd_store_server *srv, conn *c, const herd__store_msg *m)
{
	uint8_t want[HERD__AUTH_MAC_LEN], proof[HERD__AUTH_MAC_LEN];
	herd__store_enc e;

	if (m->type != HERD__STORE_T_AUTH || !(m->has & HERD__STORE_F_MAC) ||
	    !(m->has & HERD__STORE_F_NONCE) || m->nonce.n != HERD__AUTH_NONCE_LEN) {
		kill_conn(srv, c, HERD_LOG_INFO, "sent a message other than an authentication");
		return;
	}
	herd__auth_mac(want, srv->secret, srv->secret_len, c->nonce, m->nonce.p,
			     HERD__STORE_LABEL_CLIENT);
	if (!herd__auth_mac_equal(want, m->mac.p, m->mac.n)) {
		herd__log_warn("store server %s: connection from %s failed authentication (its "
			       "job secret differs)", srv->address, c->peer);
		herd__error(HERD_EAUTH, "authentication failed: the client's job secret is not "
			    "the server's");
		reply_error_and_close(srv, c, HERD_EAUTH);
		return;
	}
	herd__auth_mac(proof, srv->secret, srv->secret_len, m->nonce.p, c->nonce,
			     HERD__STORE_LABEL_SERVER);
	herd__store_enc_begin(&e, &c->out, HERD__STORE_T_AUTH_OK);
	herd__store_enc_bin(&e, "mac", proof, sizeof(proof));
	if (herd__store_enc_end(&e) != HERD_OK) {
		kill_conn(srv, c, HERD_LOG_WARN, herd_last_error());
		return;
	}
	c->state = CONN_READY;
}

static void handle_frame(herd_store_server *srv, conn *c, const uint8_t *payload, size_t len)
{
	herd__store_msg m;
	herd_status st;

	st = herd__store_msg_decode(&m, payload, len);
	if (st != HERD_OK) {
		if (c->state == CONN_AUTH)
			kill_conn(srv, c, HERD_LOG_INFO, herd_last_error());
		else
			reply_error_and_close(srv, c, st);
		return;
	}
	if (c->state == CONN_AUTH) {
		handle_auth(srv, c, &m);
	} else {
		st = herd__store_request_check(&m);
		if (st != HERD_OK)
			reply_error_and_close(srv, c, st);
		else
			ops[m.type](srv, c, &m);
	}
	herd__store_msg_free(&m);
}

static size_t frame_limit(const conn *c)
{
	return c->state == CONN_AUTH ? HERD__STORE_FRAME_MAX_PREAUTH : HERD__STORE_FRAME_MAX;
}

static void handle_input(herd_store_server *srv, conn *c)
{
	while (!c->dead && c->state != CONN_CLOSING) {
		size_t plen;
		herd_status st = herd__store_frame_peek(&c->in, frame_limit(c), &plen);

		if (st != HERD_OK) {
			if (c->state == CONN_AUTH)
				kill_conn(srv, c, HERD_LOG_INFO, herd_last_error());
			else
				reply_error_and_close(srv, c, st);
			return;
		}
		if (plen == SIZE_MAX)
			return;
		handle_frame(srv, c, c->in.data + c->in.off + 4, plen);
		herd__buf_consume(&c->in, 4 + plen);
	}
}

/* How many bytes to read next: the rest of a frame under way, or a chunk. */
static size_t read_want(const conn *c)
{
	size_t pending = c->in.len - c->in.off, limit = frame_limit(c) + 4;

	if (c->state == CONN_CLOSING)
		return READ_CHUNK;
	if (c->state == CONN_AUTH)
		return pending < limit ? limit - pending : 1;
	if (pending >= 4) {
		const uint8_t *p = c->in.data + c->in.off;
		size_t total = 4 + (size_t)herd__be32_load(p);

		if (total > pending + READ_CHUNK && total <= limit)
			return total - pending;
	}
	return READ_CHUNK;
}

static void conn_read(herd_store_server *srv, conn *c)
{
	/* A few reads per wake-up, so that one busy client cannot starve the rest. */
	for (int round = 0; round < 16 && !c->dead; round++) {
		size_t want = read_want(c);
		ssize_t n;

		if (herd__buf_reserve(&c->in, want) != HERD_OK) {
			kill_conn(srv, c, HERD_LOG_WARN, herd_last_error());
			return;
		}
		n = recv(c->fd, c->in.data + c->in.len, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			kill_conn(srv, c, HERD_LOG_DEBUG,
				  n == 0 ? "the client closed it" : strerror(errno));
			return;
		}
		if (c->state == CONN_CLOSING) {
			/* Read and dropped, so that closing sends FIN, not RST. */
			continue;
		}
		c->in.len += (size_t)n;
		handle_input(srv, c);
		if ((size_t)n < want || c->out.len - c->out.off >= OUT_HIGH_WATER)
			return;
	}
}

static void accept_all(herd_store_server *srv)
{
	for (;;) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		herd__store_enc e;
		conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				herd__log_warn("store server %s: cannot accept a connection: %s",
					       srv->address, strerror(errno));
				srv->accept_resume = herd__net_now_ms() + ACCEPT_PAUSE_MS;
			}
			return;
		}
		if (srv->nconns == srv->capconns) {
			size_t cap = srv->capconns ? srv->capconns * 2 : 16;
			conn **p = realloc(srv->conns, cap * sizeof(*p));

			if (p == NULL) {
				close(fd);
				return;
			}
			srv->conns = p;
			srv->capconns = cap;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL || herd__auth_random(c->nonce, sizeof(c->nonce)) != HERD_OK) {
			free(c);
			close(fd);
			return;
		}
		/* Keepalive, so that a client whose host vanished is dropped. */
		herd__net_tune(fd);
		c->fd = fd;
		c->state = CONN_AUTH;
		c->deadline = herd__net_now_ms() + srv->auth_timeout_ms;
		herd__net_peer_addr(fd, c->peer);
		srv->conns[srv->nconns++] = c;
		atomic_store(&srv->nconns_public, srv->nconns);
		herd__store_enc_begin(&e, &c->out, HERD__STORE_T_HELLO);
		herd__store_enc_bin(&e, "nonce", c->nonce, sizeof(c->nonce));
		if (herd__store_enc_end(&e) != HERD_OK)
			kill_conn(srv, c, HERD_LOG_WARN, herd_last_error());
		else
			flush(srv, c);
	}
}

/* Times out waiters and connections whose deadline has passed. */
static void expire(herd_store_server *srv, int64_t now)
{
	waiter *w, *next;

	for (w = srv->waiters; w != NULL; w = next) {
		next = w->next;
		if (w->deadline > now || w->c->dead)
			continue;
		reply_missing(srv, w->c, w->id, w->keys, w->nkeys);
		unpark(srv, w);
	}
	for (size_t i = 0; i < srv->nconns; i++) {
		conn *c = srv->conns[i];
		char why[96];

		if (c->dead || c->state == CONN_READY || c->deadline > now)
			continue;
		if (c->state == CONN_AUTH)
			snprintf(why, sizeof(why), "did not authenticate within %d ms",
				 srv->auth_timeout_ms);
		else
			snprintf(why, sizeof(why), "did not take its last reply within %d ms",
				 CLOSE_LINGER_MS);
		kill_conn(srv, c, HERD_LOG_INFO, why);
	}
}

/* The poll timeout: until the nearest deadline, -1 when there is none. */
static int poll_timeout(const herd_store_server *srv, int64_t now)
{
	int64_t next = INT64_MAX;

	for (const waiter *w = srv->waiters; w != NULL; w = w->next)
		if (w->deadline < next)
			next = w->deadline;
	for (size_t i = 0; i < srv->nconns; i++)
		if (srv->conns[i]->state != CONN_READY && srv->conns[i]->deadline < next)
			next = srv->conns[i]->deadline;
	if (srv->accept_resume > now && srv->accept_resume < next)
		next = srv->accept_resume;
	if (next == INT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return next - now > INT32_MAX ? INT32_MAX : (int)(next - now);
}

static void free_conn(conn *c)
{
	close(c->fd);
	herd__buf_free(&c->in);
	herd__buf_free(&c->out);
	free(c);
}

static void reap(herd_store_server *srv)
{
	waiter *w, *next;
	size_t kept = 0;

	for (w = srv->waiters; w != NULL; w = next) {
		next = w->next;
		if (w->c->dead)
			unpark(srv, w);
	}

	for (size_t i = 0; i < srv->nconns; i++) {
		if (srv->conns[i]->dead) {
			/* Counted out before the client can see the close. */
			atomic_fetch_sub(&srv->nconns_public, 1);
			free_conn(srv->conns[i]);
		} else {
			srv->conns[kept++] = srv->conns[i];
		}
	}
	srv->nconns = kept;
}

static int build_pollfds(herd_store_server *srv, int64_t now, size_t *nfds)
{
	size_t want = srv->nconns + 2;

	if (want > srv->cappfds) {
		struct pollfd *p = realloc(srv->pfds, want * sizeof(*p));

		if (p == NULL)
			return -1;
		srv->pfds = p;
		srv->cappfds = want;
	}
	srv->pfds[0] = (struct pollfd){ .fd = srv->wake_fd, .events = POLLIN };
	srv->pfds[1] = (struct pollfd){ .fd = srv->accept_resume > now ? -1 : srv->listen_fd,
					.events = POLLIN };
	for (size_t i = 0; i < srv->nconns; i++) {
		const conn *c = srv->conns[i];
		size_t out = c->out.len - c->out.off;
		short ev = 0;

		if (c->state == CONN_CLOSING || out < OUT_HIGH_WATER)
			ev |= POLLIN;
		if (out > 0)
			ev |= POLLOUT;
		srv->pfds[i + 2] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	*nfds = want;
	return 0;
}

static void *serve(void *arg)
{
	herd_store_server *srv = arg;

	for (;;) {
		int64_t now = herd__net_now_ms();
		size_t nfds, polled;
		int n;

		if (build_pollfds(srv, now, &nfds) != 0) {
			/* Out of memory: wait a little and try again. */
			poll(NULL, 0, 10);
			continue;
		}
		n = poll(srv->pfds, nfds, poll_timeout(srv, now));
		if (n < 0 && errno != EINTR) {
			herd__log_warn("store server %s: cannot wait for its clients: %s",
				       srv->address, strerror(errno));
			poll(NULL, 0, 10);
			continue;
		}
		if (n > 0 && srv->pfds[0].revents != 0)
			break;
		polled = nfds - 2;
		if (n > 0 && (srv->pfds[1].revents & POLLIN))
			accept_all(srv);
		for (size_t i = 0; n > 0 && i < polled; i++) {
			conn *c = srv->conns[i];
			short re = srv->pfds[i + 2].revents;

			if (!c->dead && (re & (POLLIN | POLLHUP | POLLERR)))
				conn_read(srv, c);
		}
		expire(srv, herd__net_now_ms());
		for (size_t i = 0; i < srv->nconns; i++) {
			conn *c = srv->conns[i];

			if (!c->dead && (c->out.len > c->out.off || c->state == CONN_CLOSING))
				flush(srv, c);
		}
		reap(srv);
	}
	return NULL;
}

/* ---- the public handle --------------------------------------------------- */

static herd_status check_server_opts(const herd_store_server_opts *opts)
{
	HERD__CHECK_VERSION("herd_store_server_start", opts, herd_store_server_opts,
			    STORE_SERVER_OPTS);
	if (opts->port < 0 || opts->port > 65535)
		return herd__error(HERD_EINVAL, "store server port %d is not 0 to 65535",
				   opts->port);
	if (opts->auth_timeout_ms < 0)
		return herd__error(HERD_EINVAL, "store server auth_timeout_ms is %d",
				   opts->auth_timeout_ms);
	return HERD_OK;
}

herd_status herd_store_server_start(herd_store_server **out, const herd_store_server_opts *opts)
{
	herd_store_server_opts defaults = HERD_STORE_SERVER_OPTS_INIT;
	herd_store_server *srv = NULL;
	const char *secret, *host;
	sigset_t all, old;
	herd_status st;
	int rc;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_store_server_start: out is NULL");
	*out = NULL;
	if (opts == NULL)
		opts = &defaults;
	HERD_CHECK(check_server_opts(opts));
	HERD_CHECK(herd__auth_secret(opts->secret, &secret));
	host = opts->host != NULL ? opts->host : "127.0.0.1";
	HERD_CHECK(herd__calloc(&srv, 1, sizeof(*srv), "a store server"));
	srv->listen_fd = srv->wake_fd = -1;
	srv->auth_timeout_ms = opts->auth_timeout_ms ? opts->auth_timeout_ms
						     : DEFAULT_AUTH_TIMEOUT_MS;
	srv->secret_len = strlen(secret);
	srv->secret = malloc(srv->secret_len);
	srv->nbuckets = 64;
	srv->buckets = calloc(srv->nbuckets, sizeof(*srv->buckets));
	if (srv->secret == NULL || srv->buckets == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory starting a store server");
		goto fail;
	}
	memcpy(srv->secret, secret, srv->secret_len);
	HERD_CHECK_GOTO(herd__auth_random(&srv->seed, sizeof(srv->seed)), st, fail);
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "store server: eventfd");
		goto fail;
	}
	HERD_CHECK_GOTO(herd__net_listen(&srv->listen_fd, host, opts->port), st, fail);
	HERD_CHECK_GOTO(herd__net_local_addr(srv->listen_fd, srv->address, &srv->port), st, fail);
	/* The thread takes no signals: they belong to the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&srv->thread, NULL, serve, srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		st = herd__error_errno(HERD_ESYS, rc, "store server: cannot start its thread");
		goto fail;
	}
	srv->thread_started = 1;
	herd__log_info("store server listening on %s", srv->address);
	*out = srv;
	return HERD_OK;
fail:
	herd_store_server_free(srv);
	return st;
}

int herd_store_server_port(const herd_store_server *server)
{
	return server != NULL ? server->port : 0;
}

const char *herd_store_server_address(const herd_store_server *server)
{
	return server != NULL ? server->address : "";
}

size_t herd__store_server_connections(herd_store_server *server)
{
	return atomic_load(&server->nconns_public);
}

void herd_store_server_free(herd_store_server *server)
{
	if (server == NULL)
		return;
	if (server->thread_started) {
		uint64_t one = 1;

		while (write(server->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		pthread_join(server->thread, NULL);
	}
	while (server->waiters != NULL)
		unpark(server, server->waiters);
	for (size_t i = 0; i < server->nconns; i++)
		free_conn(server->conns[i]);
	free(server->conns);
	for (size_t i = 0; i < server->nbuckets && server->buckets != NULL; i++) {
		entry *e = server->buckets[i], *next;

		for (; e != NULL; e = next) {
			next = e->next;
			free(e->val);
			free(e);
		}
	}
	free(server->buckets);
	free(server->pfds);
	if (server->listen_fd >= 0)
		close(server->listen_fd);
	if (server->wake_fd >= 0)
		close(server->wake_fd);
	if (server->secret != NULL)
		OPENSSL_cleanse(server->secret, server->secret_len);
	free(server->secret);
	free(server);
}
