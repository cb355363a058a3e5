/*
 * sdk/ckpt/peer.c - the holder of checkpoint copies in a node's memory
 * and the ranks' side of its protocol (peer.h).
 *
 * Frames are base/wire.h's (a length, one msgpack map with "v" and "t");
 * bulk bytes (a rank's data, a manifest) follow their frame raw, so that
 * they are neither copied into a frame nor bounded by its size.  The
 * holder serves each connection on a thread of its own, with blocking
 * calls under deadlines: a client that stops sending is dropped at
 * PEER_IDLE_MS.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "auth.h"
#include "herd/sys/agent.h"
#include "ckpt/peer.h"
#include "ckpt_internal.h"
#include "net.h"
#include "wire.h"

#define FRAME_MAX (1u << 20)
/* Before a connection has proved the token: a nonce and a MAC. */
#define AUTH_FRAME_MAX 512u
#define LABEL_CLIENT "herd ckpt peer: client"
#define LABEL_HOLDER "herd ckpt peer: holder"
/* A connection that sends nothing for this long is dropped by the holder. */
#define PEER_IDLE_MS 120000
/* Most connections a holder serves at once. */
#define MAX_CONNS 256

enum {
	T_UNKNOWN, T_HELLO, T_AUTH, T_OK, T_ERROR, T_PUT, T_MANIFEST, T_LIST, T_LISTING,
	T_FETCH, T_DATA, T_COUNT
};

static const char *const type_names[T_COUNT] = {
	"", "hello", "auth", "ok", "error", "put", "manifest", "list", "listing", "fetch", "data",
};

static const herd__wire_proto proto = {
	.name = "checkpoint peer protocol",
	.version = 1,
	.types = type_names,
	.ntypes = T_COUNT,
	.limits = { .max_depth = 1, .max_objects = 32 },
};

/* ---- frames on a blocking socket ------------------------------------------ */

typedef struct msg {
	msgpack_unpacked up;
	bool opened;
	uint8_t *payload;
	int type;
} msg;

static void msg_free(msg *m)
{
	if (m->opened)
		msgpack_unpacked_destroy(&m->up);
	free(m->payload);
	memset(m, 0, sizeof(*m));
}

/*
 * len bytes by deadline, or, with idle_ms > 0, each read given idle_ms: a
 * stream that stalls fails, one that flows does not.
 */
static herd_status recv_bytes(int fd, void *buf, size_t len, int64_t deadline, int idle_ms,
			      const char *peer)
{
	uint8_t *p = buf;

	while (len > 0) {
		size_t got = 0;

		HERD_CHECK(herd__net_recv_some(fd, p, len, &got, idle_ms > 0
					       ? herd__net_deadline(idle_ms) : deadline, peer));
		if (got == 0 && idle_ms > 0)
			return herd__error(HERD_ETIMEDOUT, "%s sent nothing for %d s", peer,
					   idle_ms / 1000);
		if (got == 0)
			return herd__error(HERD_ETIMEDOUT, "%s: no answer in time", peer);
		p += got;
		len -= got;
	}
	return HERD_OK;
}

/* A frame of at most max bytes. */
static herd_status recv_msg_max(int fd, msg *m, int64_t deadline, const char *peer, uint32_t max)
{
	uint8_t head[4];
	uint32_t len;
	herd_status st;

	memset(m, 0, sizeof(*m));
	HERD_CHECK(recv_bytes(fd, head, sizeof(head), deadline, 0, peer));
	len = herd__be32_load(head);
	if (len == 0 || len > max)
		return herd__error(HERD_EFORMAT, "%s: %s: a frame of %" PRIu32 " bytes", peer,
				   proto.name, len);
	HERD_CHECK(herd__calloc(&m->payload, len, 1, "a frame"));
	HERD_CHECK(recv_bytes(fd, m->payload, len, deadline, 0, peer));
	m->opened = true;
	st = herd__wire_open(&proto, &m->up, m->payload, len, &m->type);
	if (st != HERD_OK)
		return herd__error_wrap(st, "%s: ", peer);
	return HERD_OK;
}

static herd_status recv_msg(int fd, msg *m, int64_t deadline, const char *peer)
{
	return recv_msg_max(fd, m, deadline, peer, FRAME_MAX);
}

static herd_status send_msg(int fd, herd__frame_enc *e, herd__buf *b, int64_t deadline,
			    const char *peer)
{
	herd_status st = herd__frame_end(e, FRAME_MAX, proto.name);

	if (st == HERD_OK)
		st = herd__net_send_all(fd, b->data + b->off, b->len - b->off, deadline, peer);
	herd__buf_free(b);
	return st;
}

static bool field_int(const msg *m, const char *name, int64_t *out)
{
	const msgpack_object *o = herd__wire_field(&m->up.data, name);

	if (o != NULL && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
		*out = (int64_t)o->via.u64;
		return true;
	}
	if (o != NULL && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*out = o->via.i64;
		return true;
	}
	return false;
}

static const uint8_t *field_bin(const msg *m, const char *name, size_t *n)
{
	const msgpack_object *o = herd__wire_field(&m->up.data, name);

	*n = 0;
	if (o != NULL && (o->type == MSGPACK_OBJECT_BIN || o->type == MSGPACK_OBJECT_STR)) {
		*n = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size : o->via.str.size;
		return (const uint8_t *)(o->type == MSGPACK_OBJECT_BIN ? o->via.bin.ptr
					 : o->via.str.ptr);
	}
	return NULL;
}

static herd_status send_error(int fd, herd_status code, const char *text, int64_t deadline,
			      const char *peer)
{
	herd__buf b = { 0 };
	herd__frame_enc e;

	herd__wire_begin(&proto, &e, &b, T_ERROR);
	herd__frame_int(&e, "st", code);
	herd__frame_str(&e, "msg", text, strlen(text));
	return send_msg(fd, &e, &b, deadline, peer);
}

static herd_status send_ok(int fd, int64_t deadline, const char *peer)
{
	herd__buf b = { 0 };
	herd__frame_enc e;

	herd__wire_begin(&proto, &e, &b, T_OK);
	return send_msg(fd, &e, &b, deadline, peer);
}

/* An answer that must be `want`: an error frame becomes the holder's error. */
static herd_status expect(herd__peer_conn *c, msg *m, int want, int64_t deadline)
{
	herd_status st = recv_msg(c->fd, m, deadline, c->name);
	int64_t code = HERD_EIO;
	size_t n;
	const uint8_t *text;

	if (st != HERD_OK)
		return st;
	if (m->type == want)
		return HERD_OK;
	if (m->type != T_ERROR)
		return herd__error(HERD_EFORMAT, "%s answered \"%s\" where \"%s\" was due", c->name,
				   type_names[m->type], type_names[want]);
	text = field_bin(m, "msg", &n);
	(void)field_int(m, "st", &code);
	if (code >= HERD_OK || code < -1000)
		code = HERD_EIO;
	if (text == NULL)
		return herd__error((herd_status)code, "%s refused, giving no reason", c->name);
	return herd__error((herd_status)code, "%s: %.*s", c->name, (int)(n < 900 ? n : 900),
			   (const char *)text);
}

/* ---- the holders' list -------------------------------------------------------- */

herd_status herd__peer_parse(const char *list, herd__peer_addr **out, size_t *n)
{
	herd__peer_addr *a = NULL;
	size_t count = 1, i = 0;
	const char *p = list;

	*out = NULL;
	*n = 0;
	for (const char *q = list; *q != '\0'; q++)
		count += *q == ',';
	HERD_CHECK(herd__calloc(&a, count, sizeof(*a), "the checkpoint holders"));
	for (i = 0; i < count; i++) {
		const char *end = strchr(p, ','), *slash, *colon;
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		char port[8];
		long v;
		char *stop;

		if (len == 1 && p[0] == '-')
			goto next;
		slash = memchr(p, '/', len);
		colon = slash != NULL ? slash : NULL;
		while (colon != NULL && colon > p && colon[-1] != ':')
			colon--;
		if (slash == NULL || colon == NULL || colon - 1 == p ||
		    (size_t)(colon - 1 - p) > HERD__PEER_HOST_MAX ||
		    (size_t)(slash - colon) >= sizeof(port) || slash == colon ||
		    (size_t)(p + len - slash - 1) != HERD__PEER_TOKEN_LEN)
			goto bad;
		memcpy(a[i].host, p, (size_t)(colon - 1 - p));
		memcpy(port, colon, (size_t)(slash - colon));
		port[slash - colon] = '\0';
		v = strtol(port, &stop, 10);
		if (*stop != '\0' || v < 1 || v > 65535)
			goto bad;
		a[i].port = (int)v;
		memcpy(a[i].token, slash + 1, HERD__PEER_TOKEN_LEN);
next:
		p = end != NULL ? end + 1 : p + len;
		continue;
bad:
		free(a);
		return herd__error(HERD_EINVAL, "HERD_CKPT_HOLDERS: entry %zu (\"%.*s\") is not "
				   "HOST:PORT/TOKEN or -", i + 1, (int)(len < 80 ? len : 80), p);
	}
	*out = a;
	*n = count;
	return HERD_OK;
}

/* ---- the ranks' side ---------------------------------------------------------- */

void herd__peer_close(herd__peer_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

herd_status herd__peer_connect(herd__peer_conn *c, const herd__peer_addr *a, int64_t deadline)
{
	uint8_t hn[HERD__AUTH_NONCE_LEN], cn[HERD__AUTH_NONCE_LEN], mac[HERD__AUTH_MAC_LEN];
	const uint8_t *got;
	herd__buf b = { 0 };
	herd__frame_enc e;
	herd_status st;
	msg m = { 0 };
	size_t n;

	c->fd = -1;
	snprintf(c->name, sizeof(c->name), "the checkpoint holder on %s", a->host);
	HERD_CHECK(herd__net_connect(&c->fd, a->host, a->port, deadline));
	HERD_CHECK_GOTO(expect(c, &m, T_HELLO, deadline), st, fail);
	got = field_bin(&m, "nonce", &n);
	if (got == NULL || n != sizeof(hn)) {
		st = herd__error(HERD_EFORMAT, "%s: its greeting has no challenge", c->name);
		goto fail;
	}
	memcpy(hn, got, sizeof(hn));
	msg_free(&m);
	HERD_CHECK_GOTO(herd__auth_random(cn, sizeof(cn)), st, fail);
	herd__auth_mac(mac, a->token, strlen(a->token), hn, cn, LABEL_CLIENT);
	herd__wire_begin(&proto, &e, &b, T_AUTH);
	herd__frame_bin(&e, "nonce", cn, sizeof(cn));
	herd__frame_bin(&e, "mac", mac, sizeof(mac));
	HERD_CHECK_GOTO(send_msg(c->fd, &e, &b, deadline, c->name), st, fail);
	HERD_CHECK_GOTO(expect(c, &m, T_OK, deadline), st, fail);
	herd__auth_mac(mac, a->token, strlen(a->token), cn, hn, LABEL_HOLDER);
	got = field_bin(&m, "mac", &n);
	if (got == NULL || !herd__auth_mac_equal(mac, got, n)) {
		st = herd__error(HERD_EAUTH, "%s did not prove that it knows its token "
				 "(HERD_CKPT_HOLDERS)", c->name);
		goto fail;
	}
	msg_free(&m);
	return HERD_OK;
fail:
	msg_free(&m);
	herd__peer_close(c);
	return st;
}

static void frame_key(herd__frame_enc *e, const herd__peer_key *k)
{
	herd__frame_int(e, "ns", (int64_t)k->ns);
	herd__frame_int(e, "step", k->step);
	herd__frame_int(e, "id", (int64_t)k->id);
}

/* A put or a manifest announced (rank -1: a manifest), and the holder's word that it takes it. */
static herd_status announce(herd__peer_conn *c, int type, const herd__peer_key *k, int rank,
			    uint64_t size, int64_t deadline)
{
	herd__buf b = { 0 };
	herd__frame_enc e;
	herd_status st;
	msg m;

	herd__wire_begin(&proto, &e, &b, type);
	frame_key(&e, k);
	if (rank >= 0)
		herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "size", (int64_t)size);
	HERD_CHECK(send_msg(c->fd, &e, &b, deadline, c->name));
	st = expect(c, &m, T_OK, deadline);
	msg_free(&m);
	return st;
}

herd_status herd__peer_put_begin(herd__peer_conn *c, const herd__peer_key *k, int rank,
				 uint64_t size, int64_t deadline)
{
	return announce(c, T_PUT, k, rank, size, deadline);
}

herd_status herd__peer_put_bytes(herd__peer_conn *c, const void *p, size_t n, int64_t deadline)
{
	return herd__net_send_all(c->fd, p, n, deadline, c->name);
}

herd_status herd__peer_put_end(herd__peer_conn *c, int64_t deadline)
{
	msg m;
	herd_status st = expect(c, &m, T_OK, deadline);

	msg_free(&m);
	return st;
}

/* A manifest: the holder's word that it takes it, the bytes, its word that it holds them. */
herd_status herd__peer_put_manifest(herd__peer_conn *c, const herd__peer_key *k,
				    const void *data, size_t len, int64_t deadline)
{
	HERD_CHECK(announce(c, T_MANIFEST, k, -1, len, deadline));
	HERD_CHECK(herd__peer_put_bytes(c, data, len, deadline));
	return herd__peer_put_end(c, deadline);
}

void herd__peer_steps_free(herd__peer_step *s, size_t n)
{
	for (size_t i = 0; s != NULL && i < n; i++) {
		free(s[i].ranks);
		free(s[i].sizes);
	}
	free(s);
}

static uint64_t be64_load(const uint8_t *p)
{
	return (uint64_t)herd__be32_load(p) << 32 | herd__be32_load(p + 4);
}

static void be64_store(uint8_t *p, uint64_t v)
{
	herd__be32_store(p, (uint32_t)(v >> 32));
	herd__be32_store(p + 4, (uint32_t)v);
}

/* A listing's records: ns, step, id, manifest (0/1), files, then (rank, size) per file. */
#define REC_HEAD 40

herd_status herd__peer_list(herd__peer_conn *c, herd__peer_step **out, size_t *n,
			    int64_t deadline)
{
	herd__peer_step *s = NULL;
	herd__buf b = { 0 };
	herd__frame_enc e;
	herd_status st;
	const uint8_t *p, *end;
	size_t len, count = 0;
	msg m;

	*out = NULL;
	*n = 0;
	herd__wire_begin(&proto, &e, &b, T_LIST);
	HERD_CHECK(send_msg(c->fd, &e, &b, deadline, c->name));
	HERD_CHECK_GOTO(expect(c, &m, T_LISTING, deadline), st, out);
	p = field_bin(&m, "steps", &len);
	end = p + len;
	while (p != NULL && (size_t)(end - p) >= REC_HEAD) {
		herd__peer_step *grown, *one;
		uint64_t nf = be64_load(p + 32);

		if (nf > (uint64_t)(end - p - REC_HEAD) / 16)
			break;
		grown = realloc(s, (count + 1) * sizeof(*s));
		if (grown == NULL) {
			st = herd__error(HERD_ENOMEM, "out of memory for a holder's list");
			goto out;
		}
		s = grown;
		one = &s[count++];
		memset(one, 0, sizeof(*one));
		one->key.ns = be64_load(p);
		one->key.step = (int64_t)be64_load(p + 8);
		one->key.id = be64_load(p + 16);
		one->manifest = be64_load(p + 24) != 0;
		one->nfiles = (size_t)nf;
		p += REC_HEAD;
		if (herd__calloc(&one->ranks, nf + 1, sizeof(int32_t), "a holder's list") != HERD_OK ||
		    herd__calloc(&one->sizes, nf + 1, sizeof(uint64_t), "a holder's list") != HERD_OK) {
			st = HERD_ENOMEM;
			goto out;
		}
		for (uint64_t k = 0; k < nf; k++, p += 16) {
			one->ranks[k] = (int32_t)be64_load(p);
			one->sizes[k] = be64_load(p + 8);
		}
	}
	if (p != end) {
		st = herd__error(HERD_EFORMAT, "%s: its list of saves is malformed", c->name);
		goto out;
	}
	*out = s;
	*n = count;
	s = NULL;
	st = HERD_OK;
out:
	herd__peer_steps_free(s, count);
	msg_free(&m);
	return st;
}

/* A fetch: rank -1 is the manifest (at, len ignored: all of it). */
static herd_status fetch(herd__peer_conn *c, const herd__peer_key *k, int rank, uint64_t at,
			 uint64_t len, void **dst, size_t *got, int64_t deadline)
{
	herd__buf b = { 0 };
	herd__frame_enc e;
	herd_status st;
	int64_t size = -1;
	msg m;

	herd__wire_begin(&proto, &e, &b, T_FETCH);
	frame_key(&e, k);
	herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "at", (int64_t)at);
	herd__frame_int(&e, "len", (int64_t)len);
	HERD_CHECK(send_msg(c->fd, &e, &b, deadline, c->name));
	st = expect(c, &m, T_DATA, deadline);
	if (st == HERD_OK && (!field_int(&m, "size", &size) || size < 0 ||
			      (rank >= 0 && (uint64_t)size != len) ||
			      (rank < 0 && (uint64_t)size > HERD__CKPT_MANIFEST_MAX)))
		st = herd__error(HERD_EFORMAT, "%s sent %" PRId64 " bytes where %" PRIu64 " were "
				 "asked for", c->name, size, len);
	msg_free(&m);
	if (st != HERD_OK)
		return st;
	if (*dst == NULL)
		HERD_CHECK(herd__calloc(dst, (size_t)size + 1, 1, "a manifest"));
	*got = (size_t)size;
	return recv_bytes(c->fd, *dst, (size_t)size, deadline, 0, c->name);
}

herd_status herd__peer_fetch_manifest(herd__peer_conn *c, const herd__peer_key *k, char **data,
				      size_t *len, int64_t deadline)
{
	void *p = NULL;
	herd_status st = fetch(c, k, -1, 0, 0, &p, len, deadline);

	if (st != HERD_OK) {
		free(p);
		p = NULL;
	}
	*data = p;
	return st;
}

herd_status herd__peer_fetch(herd__peer_conn *c, const herd__peer_key *k, int rank, uint64_t at,
			     uint64_t len, void *dst, int64_t deadline)
{
	size_t got;

	return fetch(c, k, rank, at, len, &dst, &got, deadline);
}

/* ---- the holder ---------------------------------------------------------------- */

/* Bytes held: a rank's data of a save, or its manifest (rank -1). */
typedef struct held {
	int32_t rank;
	uint64_t size;
	uint8_t *data;          /* mmap'ed (size > 0) */
	int refs;               /* the save's, and each fetch in progress */
} held;

/* One save: its key, and what of it is here. */
typedef struct held_step {
	herd__peer_key key;
	bool manifest;          /* committed */
	uint64_t seq;           /* ... the holder's count of commits then */
	held **items;
	size_t n;
} held_step;

typedef struct holder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char token[HERD__PEER_TOKEN_LEN + 1];
	uint64_t budget, bytes;   /* bytes: held and reserved for puts in progress */
	int keep;                 /* committed saves kept per namespace */
	uint64_t commits;         /* commits so far: each save's seq */
	held_step *steps;         /* by namespace, then step */
	size_t nsteps;
	int conns[MAX_CONNS];     /* -1: free */
	size_t live;
} holder;

typedef struct conn_arg {
	holder *h;
	size_t slot;
	char peer[HERD_NET_ADDR_LEN + 16];
} conn_arg;

static uint8_t *map_bytes(uint64_t size)
{
	void *p;

	if (size == 0)
		size = 1;
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Drops one reference; the last frees the bytes and their share of the budget.  Locked. */
static void unref(holder *h, held *x)
{
	if (--x->refs > 0)
		return;
	munmap(x->data, x->size == 0 ? 1 : (size_t)x->size);
	h->bytes -= x->size;
	free(x);
}

/* unref, taking the lock. */
static void release(holder *h, held *x)
{
	pthread_mutex_lock(&h->mu);
	unref(h, x);
	pthread_mutex_unlock(&h->mu);
}

static void drop_step(holder *h, size_t i)
{
	held_step *s = &h->steps[i];

	for (size_t k = 0; k < s->n; k++)
		unref(h, s->items[k]);
	free(s->items);
	memmove(s, s + 1, (h->nsteps - i - 1) * sizeof(*s));
	h->nsteps--;
}

static bool same_key(const herd__peer_key *a, const herd__peer_key *b)
{
	return a->ns == b->ns && a->step == b->step && a->id == b->id;
}

static held_step *find_step(holder *h, const herd__peer_key *k)
{
	for (size_t i = 0; i < h->nsteps; i++)
		if (same_key(&h->steps[i].key, k))
			return &h->steps[i];
	return NULL;
}

/* The save of namespace ns committed last; SIZE_MAX when none.  Locked. */
static size_t newest_committed(const holder *h, uint64_t ns)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < h->nsteps; i++)
		if (h->steps[i].key.ns == ns && h->steps[i].manifest &&
		    (best == SIZE_MAX || h->steps[i].seq > h->steps[best].seq))
			best = i;
	return best;
}

/*
 * Drops the oldest save of k's namespace that drop(save, k) says to
 * (never the one committed last, unless any); false when none.  Locked.
 */
static bool drop_first_of(holder *h, const herd__peer_key *k,
			  bool (*drop)(const held_step *s, const herd__peer_key *k), bool any)
{
	size_t keep = any ? SIZE_MAX : newest_committed(h, k->ns), victim = SIZE_MAX;

	for (size_t i = 0; i < h->nsteps; i++) {
		const held_step *s = &h->steps[i];

		if (s->key.ns != k->ns || i == keep || same_key(&s->key, k) || !drop(s, k))
			continue;
		if (victim == SIZE_MAX || s->key.step < h->steps[victim].key.step)
			victim = i;
	}
	if (victim == SIZE_MAX)
		return false;
	drop_step(h, victim);
	return true;
}

static bool drop_first(holder *h, const herd__peer_key *k,
		       bool (*drop)(const held_step *s, const herd__peer_key *k))
{
	return drop_first_of(h, k, drop, false);
}

/*
 * What a restarted run left: newer steps and the same step saved before
 * (the job has gone back to an older one: they will never be its newest
 * again, even the one committed last), and saves never committed.
 */
static bool stale(const held_step *s, const herd__peer_key *k)
{
	return s->key.step >= k->step;
}

static bool left_behind(const held_step *s, const herd__peer_key *k)
{
	return s->key.step >= k->step || !s->manifest;
}

/* Any other save (under the budget's pressure: oldest first). */
static bool any(const held_step *s, const herd__peer_key *k)
{
	(void)s;
	(void)k;
	return true;
}

/* Committed saves older than k's (at a commit, beyond the ones kept). */
static bool older_committed(const held_step *s, const herd__peer_key *k)
{
	return s->manifest && s->key.step < k->step;
}

/* Uncommitted saves older than k's (a commit: they will never be). */
static bool older_partial(const held_step *s, const herd__peer_key *k)
{
	return !s->manifest && s->key.step < k->step;
}

/*
 * Room for size more bytes of save k: what restarted runs left goes, then
 * older saves while over the budget, never the newest committed one.
 * Locked.  false, with why, when the budget does not allow it even then.
 */
static bool reserve(holder *h, const herd__peer_key *k, uint64_t size, char *why, size_t cap)
{
	while (drop_first_of(h, k, stale, true))
		;
	while (drop_first(h, k, left_behind))
		;
	while (h->bytes + size > h->budget && drop_first(h, k, any))
		;
	if (h->bytes + size > h->budget) {
		snprintf(why, cap, "holding %" PRIu64 " more bytes of step %" PRId64 " would take "
			 "%" PRIu64 " bytes, over this holder's budget of %" PRIu64 " "
			 "(HERD_CKPT_PEER_BYTES)", size, k->step, h->bytes + size, h->budget);
		return false;
	}
	h->bytes += size;
	return true;
}

/* Counts the committed saves of k's namespace. */
static size_t committed(const holder *h, uint64_t ns)
{
	size_t n = 0;

	for (size_t i = 0; i < h->nsteps; i++)
		n += h->steps[i].key.ns == ns && h->steps[i].manifest;
	return n;
}

/*
 * Puts x into save k (a copy of the same rank replaced); a manifest
 * commits the save, and the saves it makes obsolete go.  Locked.  false
 * when it cannot (out of memory: x stays the caller's).
 */
static bool insert(holder *h, const herd__peer_key *k, held *x)
{
	held_step *s = find_step(h, k);
	held **grown;

	if (s == NULL) {
		held_step *more = realloc(h->steps, (h->nsteps + 1) * sizeof(*more));

		if (more == NULL)
			return false;
		h->steps = more;
		s = &h->steps[h->nsteps++];
		memset(s, 0, sizeof(*s));
		s->key = *k;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->items[i]->rank == x->rank) {
			unref(h, s->items[i]);
			s->items[i] = x;
			goto placed;
		}
	grown = realloc(s->items, (s->n + 1) * sizeof(*grown));
	if (grown == NULL)
		return false;
	s->items = grown;
	s->items[s->n++] = x;
placed:
	if (x->rank < 0) {
		s->manifest = true;
		s->seq = ++h->commits;
		while (drop_first(h, k, older_partial))
			;
		while (committed(h, k->ns) > (size_t)h->keep && drop_first(h, k, older_committed))
			;
	}
	return true;
}

static bool field_key(const msg *m, herd__peer_key *k)
{
	int64_t ns, id;

	if (!field_int(m, "ns", &ns) || !field_int(m, "step", &k->step) || k->step < 0 ||
	    !field_int(m, "id", &id))
		return false;
	k->ns = (uint64_t)ns;
	k->id = (uint64_t)id;
	return true;
}

/*
 * A put or a manifest: the holder's word that it takes the bytes, the
 * bytes, its word that it holds them.  A refusal comes before any byte,
 * so the stream stays in step.
 */
static herd_status serve_put(holder *h, int fd, const msg *m, bool manifest, const char *peer)
{
	int64_t deadline = herd__net_deadline(PEER_IDLE_MS);
	int64_t rank = -1, size;
	herd__peer_key k;
	char why[512];
	held *x = NULL;
	herd_status st;
	bool ok;

	if (!field_key(m, &k) || !field_int(m, "size", &size) || size < 0 ||
	    (!manifest && (!field_int(m, "rank", &rank) || rank < 0 ||
			   rank >= HERD__CKPT_MAX_RANKS)))
		return send_error(fd, HERD_EFORMAT, "a put without its save, rank or size",
				  deadline, peer);
	if ((manifest && (uint64_t)size > HERD__CKPT_MANIFEST_MAX) ||
	    (uint64_t)size > HERD__CKPT_MAX_BYTES)
		return send_error(fd, HERD_EFORMAT, "a put larger than a checkpoint's file may be",
				  deadline, peer);
	pthread_mutex_lock(&h->mu);
	ok = reserve(h, &k, (uint64_t)size, why, sizeof(why));
	pthread_mutex_unlock(&h->mu);
	if (!ok)
		return send_error(fd, HERD_ENORESOURCE, why, deadline, peer);
	if (herd__calloc(&x, 1, sizeof(*x), "a held copy") != HERD_OK ||
	    (x->data = map_bytes((uint64_t)size)) == NULL) {
		free(x);
		pthread_mutex_lock(&h->mu);
		h->bytes -= (uint64_t)size;
		pthread_mutex_unlock(&h->mu);
		return send_error(fd, HERD_ENOMEM, "out of memory for the copy", deadline, peer);
	}
	x->rank = (int32_t)rank;
	x->size = (uint64_t)size;
	x->refs = 1;
	HERD_CHECK_GOTO(send_ok(fd, deadline, peer), st, fail);
	HERD_CHECK_GOTO(recv_bytes(fd, x->data, (size_t)size, 0, PEER_IDLE_MS, peer), st, fail);
	pthread_mutex_lock(&h->mu);
	ok = insert(h, &k, x);
	if (!ok)
		unref(h, x);
	pthread_mutex_unlock(&h->mu);
	if (!ok)
		return send_error(fd, HERD_ENOMEM, "out of memory for the list of saves", deadline,
				  peer);
	return send_ok(fd, herd__net_deadline(PEER_IDLE_MS), peer);
fail:
	release(h, x);
	return st;
}

static herd_status serve_list(holder *h, int fd, const char *peer)
{
	int64_t deadline = herd__net_deadline(PEER_IDLE_MS);
	herd__buf b = { 0 };
	herd__frame_enc e;
	uint8_t *rec = NULL;
	size_t len = 0, cap = 0;
	herd_status st = HERD_OK;

	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < h->nsteps; i++)
		cap += REC_HEAD + 16 * h->steps[i].n;
	if (herd__calloc(&rec, cap + 1, 1, "a list of saves") != HERD_OK)
		st = HERD_ENOMEM;
	for (size_t i = 0; st == HERD_OK && i < h->nsteps; i++) {
		const held_step *s = &h->steps[i];
		uint64_t files = 0;
		size_t head = len;

		len += REC_HEAD;
		for (size_t k = 0; k < s->n; k++) {
			if (s->items[k]->rank < 0)
				continue;
			be64_store(rec + len, (uint64_t)s->items[k]->rank);
			be64_store(rec + len + 8, s->items[k]->size);
			len += 16;
			files++;
		}
		be64_store(rec + head, s->key.ns);
		be64_store(rec + head + 8, (uint64_t)s->key.step);
		be64_store(rec + head + 16, s->key.id);
		be64_store(rec + head + 24, s->manifest);
		be64_store(rec + head + 32, files);
	}
	pthread_mutex_unlock(&h->mu);
	if (st != HERD_OK) {
		free(rec);
		return send_error(fd, st, "out of memory for the list", deadline, peer);
	}
	herd__wire_begin(&proto, &e, &b, T_LISTING);
	herd__frame_bin(&e, "steps", rec, len);
	free(rec);
	if (len + 64 > FRAME_MAX) {
		herd__buf_free(&b);
		return send_error(fd, HERD_ENORESOURCE, "the list of saves is larger than a frame",
				  deadline, peer);
	}
	return send_msg(fd, &e, &b, deadline, peer);
}

static herd_status serve_fetch(holder *h, int fd, const msg *m, const char *peer)
{
	int64_t deadline = herd__net_deadline(PEER_IDLE_MS);
	int64_t rank, at, len;
	herd__buf b = { 0 };
	herd__peer_key k;
	herd__frame_enc e;
	held_step *s;
	held *x = NULL;
	herd_status st;
	char why[160];

	if (!field_key(m, &k) || !field_int(m, "rank", &rank) || !field_int(m, "at", &at) ||
	    !field_int(m, "len", &len) || at < 0 || len < 0)
		return send_error(fd, HERD_EFORMAT, "a fetch without its save, rank or range",
				  deadline, peer);
	pthread_mutex_lock(&h->mu);
	s = find_step(h, &k);
	for (size_t i = 0; s != NULL && i < s->n; i++)
		if (s->items[i]->rank == (rank < 0 ? -1 : rank))
			x = s->items[i];
	if (x != NULL)
		x->refs++;
	pthread_mutex_unlock(&h->mu);
	if (x == NULL) {
		if (rank < 0)
			snprintf(why, sizeof(why), "step %" PRId64 ": its manifest is not held here",
				 k.step);
		else
			snprintf(why, sizeof(why), "step %" PRId64 ": saved rank %" PRId64 " is not "
				 "held here", k.step, rank);
		return send_error(fd, HERD_ENOTFOUND, why, deadline, peer);
	}
	if (rank < 0) {
		at = 0;
		len = (int64_t)x->size;
	}
	if ((uint64_t)at > x->size || (uint64_t)len > x->size - (uint64_t)at) {
		snprintf(why, sizeof(why), "bytes %" PRId64 " to %" PRId64 " are beyond the %"
			 PRIu64 " held", at, at + len, x->size);
		st = send_error(fd, HERD_EINVAL, why, deadline, peer);
		goto out;
	}
	herd__wire_begin(&proto, &e, &b, T_DATA);
	herd__frame_int(&e, "size", len);
	st = send_msg(fd, &e, &b, deadline, peer);
	if (st == HERD_OK)
		st = herd__net_send_all(fd, x->data + at, (size_t)len, herd__net_deadline(
						PEER_IDLE_MS + (int)((uint64_t)len >> 20 < 1000000
								     ? ((uint64_t)len >> 20) * 1000
								     : 1000000000)), peer);
out:
	release(h, x);
	return st;
}

/* The handshake, from the holder's side. */
static herd_status serve_auth(holder *h, int fd, const char *peer)
{
	int64_t deadline = herd__net_deadline(10000);
	uint8_t hn[HERD__AUTH_NONCE_LEN], cn[HERD__AUTH_NONCE_LEN], mac[HERD__AUTH_MAC_LEN];
	const uint8_t *got, *gmac;
	herd__buf b = { 0 };
	herd__frame_enc e;
	herd_status st;
	size_t n, nm;
	msg m;

	HERD_CHECK(herd__auth_random(hn, sizeof(hn)));
	herd__wire_begin(&proto, &e, &b, T_HELLO);
	herd__frame_bin(&e, "nonce", hn, sizeof(hn));
	HERD_CHECK(send_msg(fd, &e, &b, deadline, peer));
	st = recv_msg_max(fd, &m, deadline, peer, AUTH_FRAME_MAX);
	if (st != HERD_OK || m.type != T_AUTH) {
		msg_free(&m);
		return st != HERD_OK ? st : herd__error(HERD_EAUTH, "%s did not authenticate", peer);
	}
	got = field_bin(&m, "nonce", &n);
	gmac = field_bin(&m, "mac", &nm);
	if (got == NULL || n != sizeof(cn)) {
		msg_free(&m);
		return herd__error(HERD_EAUTH, "%s sent no challenge", peer);
	}
	memcpy(cn, got, sizeof(cn));
	herd__auth_mac(mac, h->token, strlen(h->token), hn, cn, LABEL_CLIENT);
	if (gmac == NULL || !herd__auth_mac_equal(mac, gmac, nm)) {
		msg_free(&m);
		(void)send_error(fd, HERD_EAUTH, "wrong token", deadline, peer);
		return herd__error(HERD_EAUTH, "%s does not know this holder's token", peer);
	}
	msg_free(&m);
	herd__auth_mac(mac, h->token, strlen(h->token), cn, hn, LABEL_HOLDER);
	OPENSSL_cleanse(hn, sizeof(hn));
	herd__wire_begin(&proto, &e, &b, T_OK);
	herd__frame_bin(&e, "mac", mac, sizeof(mac));
	return send_msg(fd, &e, &b, deadline, peer);
}

static void *serve(void *arg)
{
	conn_arg *a = arg;
	holder *h = a->h;
	int fd = h->conns[a->slot];
	herd_status st = serve_auth(h, fd, a->peer);

	while (st == HERD_OK) {
		msg m;

		st = recv_msg(fd, &m, herd__net_deadline(PEER_IDLE_MS), a->peer);
		if (st != HERD_OK) {
			msg_free(&m);
			break;
		}
		switch (m.type) {
		case T_PUT:
		case T_MANIFEST:
			st = serve_put(h, fd, &m, m.type == T_MANIFEST, a->peer);
			break;
		case T_LIST:
			st = serve_list(h, fd, a->peer);
			break;
		case T_FETCH:
			st = serve_fetch(h, fd, &m, a->peer);
			break;
		default:
			st = send_error(fd, HERD_EFORMAT, "not a request", herd__net_deadline(1000),
					a->peer);
			if (st == HERD_OK)
				st = HERD_EFORMAT;
		}
		msg_free(&m);
	}
	if (st != HERD_ECLOSED)
		herd__log_debug("checkpoint holder: %s", herd_last_error());
	pthread_mutex_lock(&h->mu);
	close(fd);
	h->conns[a->slot] = -1;
	h->live--;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	free(a);
	return NULL;
}

static void accept_one(holder *h, int lfd)
{
	pthread_attr_t attr;
	pthread_t t;
	conn_arg *a = NULL;
	size_t slot = MAX_CONNS;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < MAX_CONNS && slot == MAX_CONNS; i++)
		if (h->conns[i] < 0)
			slot = i;
	if (slot < MAX_CONNS && herd__calloc(&a, 1, sizeof(*a), "a connection") == HERD_OK) {
		h->conns[slot] = fd;
		h->live++;
	}
	pthread_mutex_unlock(&h->mu);
	if (a == NULL) {
		close(fd);   /* full: the client's connect sees it closed */
		return;
	}
	a->h = h;
	a->slot = slot;
	herd__net_peer_addr(fd, a->peer);
	herd__net_tune(fd);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, serve, a) != 0) {
		pthread_mutex_lock(&h->mu);
		h->conns[slot] = -1;
		h->live--;
		pthread_mutex_unlock(&h->mu);
		close(fd);
		free(a);
	}
	pthread_attr_destroy(&attr);
}

herd_status herd__peer_hold(int in_fd, int out_fd, const herd__peer_hold_opts *o)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[HERD__PEER_TOKEN_LEN / 2];
	char addr[HERD_NET_ADDR_LEN], line[128];
	holder *h = NULL;
	herd_status st;
	int lfd = -1, port, n;

	if (o->steps < 1 || o->steps > 2 || o->budget == 0)
		return herd__error(HERD_EINVAL, "a checkpoint holder keeps 1 or 2 steps (not %d) "
				   "in a budget of at least a byte", o->steps);
	HERD_CHECK(herd__calloc(&h, 1, sizeof(*h), "a checkpoint holder"));
	pthread_mutex_init(&h->mu, NULL);
	herd__net_cond_init(&h->cv);
	h->budget = o->budget;
	h->keep = o->steps;
	for (size_t i = 0; i < MAX_CONNS; i++)
		h->conns[i] = -1;
	HERD_CHECK_GOTO(herd__auth_random(raw, sizeof(raw)), st, out);
	for (size_t i = 0; i < sizeof(raw); i++) {
		h->token[2 * i] = hex[raw[i] >> 4];
		h->token[2 * i + 1] = hex[raw[i] & 15];
	}
	HERD_CHECK_GOTO(herd__net_listen(&lfd, o->bind, 0), st, out);
	HERD_CHECK_GOTO(herd__net_local_addr(lfd, addr, &port), st, out);
	n = snprintf(line, sizeof(line), "hold %d %s\n", port, h->token);
	if (write(out_fd, line, (size_t)n) != n) {
		st = herd__error_errno(HERD_EIO, errno, "checkpoint holder: cannot write its address");
		goto out;
	}
	for (;;) {
		struct pollfd p[2] = { { lfd, POLLIN, 0 }, { in_fd, POLLIN, 0 } };
		char sink[256];

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			st = herd__error_errno(HERD_ESYS, errno, "checkpoint holder: poll");
			break;
		}
		if (p[1].revents != 0) {
			ssize_t got = read(in_fd, sink, sizeof(sink));

			if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
				st = HERD_OK;   /* the launcher closed the channel */
				break;
			}
		}
		if (p[0].revents & POLLIN)
			accept_one(h, lfd);
	}
out:
	if (lfd >= 0)
		close(lfd);
	/* The connections end; their threads let go of the holder. */
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < MAX_CONNS; i++)
		if (h->conns[i] >= 0)
			shutdown(h->conns[i], SHUT_RDWR);
	{
		int64_t deadline = herd__net_deadline(5000);

		while (h->live > 0 && herd__net_cond_wait_until(&h->cv, &h->mu, deadline) == 0)
			;
	}
	if (h->live > 0) {
		/* A thread stuck past the deadline keeps the holder: the process ends anyway. */
		pthread_mutex_unlock(&h->mu);
		return st;
	}
	while (h->nsteps > 0)
		drop_step(h, h->nsteps - 1);
	free(h->steps);
	pthread_mutex_unlock(&h->mu);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	OPENSSL_cleanse(h->token, sizeof(h->token));
	free(h);
	return st;
}

herd_status herd_agent_ckpt_hold(int in_fd, int out_fd, const char *bind, uint64_t budget,
				 int steps)
{
	herd__peer_hold_opts o = { bind, budget, steps };

	if (in_fd < 0 || out_fd < 0)
		return herd__error(HERD_EINVAL, "herd_agent_ckpt_hold: in_fd and out_fd are required");
	if (o.steps == 0) {
		long v = 1;

		HERD_CHECK(herd__param_int(HERD__P_CKPT_PEER_STEPS, &v));
		o.steps = (int)v;
	}
	if (o.budget == 0 && herd__param_str(HERD__P_CKPT_PEER_BYTES) != NULL)
		HERD_CHECK(herd__param_size(HERD__P_CKPT_PEER_BYTES, &o.budget));
	if (o.budget == 0) {
		long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);

		o.budget = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 4
			   : (uint64_t)1 << 30;
	}
	return herd__peer_hold(in_fd, out_fd, &o);
}
