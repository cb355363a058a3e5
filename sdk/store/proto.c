/*
 * sdk/store/proto.c - frames and messages of the store's wire format (see
 * proto.h); the handshake's cryptography is base/auth.c's.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base.h"
#include "wire.h"
#include "msgpack_check.h"
#include "proto.h"

static const char *const type_names[HERD__STORE_T_COUNT] = {
	[HERD__STORE_T_UNKNOWN] = "?",
#define HERD__STORE_TYPE_NAME_(name, wire) [HERD__STORE_T_##name] = wire,
	HERD__STORE_TYPES(HERD__STORE_TYPE_NAME_)
#undef HERD__STORE_TYPE_NAME_
};

const char *herd__store_type_name(herd__store_type type)
{
	if ((unsigned)type >= HERD__STORE_T_COUNT)
		return "?";
	return type_names[type];
}

/* ---- frames ----------------------------------------------------------- */

herd_status herd__store_frame_peek(const herd__buf *b, size_t limit, size_t *payload_len)
{
	return herd__frame_peek(b, limit, NULL, payload_len);
}

/* ---- decoding --------------------------------------------------------- */

static int get_bytes(const msgpack_object *o, herd__store_bytes *out)
{
	if (o->type == MSGPACK_OBJECT_BIN) {
		out->p = (const uint8_t *)o->via.bin.ptr;
		out->n = o->via.bin.size;
		return 1;
	}
	if (o->type == MSGPACK_OBJECT_STR) {
		out->p = (const uint8_t *)o->via.str.ptr;
		out->n = o->via.str.size;
		return 1;
	}
	return 0;
}

static int get_int(const msgpack_object *o, int64_t *out)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
		*out = (int64_t)o->via.u64;
		return 1;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*out = o->via.i64;
		return 1;
	}
	return 0;
}

static int get_byte_array(const msgpack_object *o, const msgpack_object **items, size_t *n)
{
	herd__store_bytes b;

	if (o->type != MSGPACK_OBJECT_ARRAY)
		return 0;
	for (uint32_t i = 0; i < o->via.array.size; i++)
		if (!get_bytes(&o->via.array.ptr[i], &b))
			return 0;
	*items = o->via.array.ptr;
	*n = o->via.array.size;
	return 1;
}

/* How each known field is decoded, and where it lands in herd__store_msg. */
enum field_kind { FIELD_UINT, FIELD_INT, FIELD_BYTES, FIELD_BYTES_OR_NIL, FIELD_ARRAY };

static const struct field {
	const char *name;
	uint32_t bit;
	enum field_kind kind;
	size_t offset;   /* of the value; FIELD_ARRAY: of the items pointer */
	size_t count;    /* FIELD_ARRAY: offset of the item count */
} fields[] = {
	{ "id", HERD__STORE_F_ID, FIELD_UINT, offsetof(herd__store_msg, id), 0 },
	{ "key", HERD__STORE_F_KEY, FIELD_BYTES, offsetof(herd__store_msg, key), 0 },
	{ "val", HERD__STORE_F_VAL, FIELD_BYTES, offsetof(herd__store_msg, val), 0 },
	/* nil, like leaving "exp" out, expects the key to be absent. */
	{ "exp", HERD__STORE_F_EXP, FIELD_BYTES_OR_NIL, offsetof(herd__store_msg, exp), 0 },
	{ "msg", HERD__STORE_F_MSG, FIELD_BYTES, offsetof(herd__store_msg, msg), 0 },
	{ "nonce", HERD__STORE_F_NONCE, FIELD_BYTES, offsetof(herd__store_msg, nonce), 0 },
	{ "mac", HERD__STORE_F_MAC, FIELD_BYTES, offsetof(herd__store_msg, mac), 0 },
	{ "delta", HERD__STORE_F_DELTA, FIELD_INT, offsetof(herd__store_msg, delta), 0 },
	{ "ms", HERD__STORE_F_MS, FIELD_INT, offsetof(herd__store_msg, ms), 0 },
	{ "st", HERD__STORE_F_ST, FIELD_INT, offsetof(herd__store_msg, st), 0 },
	{ "n", HERD__STORE_F_N, FIELD_INT, offsetof(herd__store_msg, n), 0 },
	{ "keys", HERD__STORE_F_KEYS, FIELD_ARRAY, offsetof(herd__store_msg, keys),
	  offsetof(herd__store_msg, nkeys) },
	{ "missing", HERD__STORE_F_MISSING, FIELD_ARRAY, offsetof(herd__store_msg, missing),
	  offsetof(herd__store_msg, nmissing) },
};

/*
 * Decodes one named field into m and sets *bit to its flag (0 for nil or
 * for a field this version does not know); 0 when its value has the wrong
 * type.
 */
static int decode_field(herd__store_msg *m, const char *name, size_t nlen,
			const msgpack_object *o, uint32_t *bit)
{
	char *base = (char *)m;

	*bit = 0;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const struct field *f = &fields[i];

		if (strlen(f->name) != nlen || memcmp(f->name, name, nlen) != 0)
			continue;
		switch (f->kind) {
		case FIELD_UINT:
			if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
				return 0;
			*(uint64_t *)(base + f->offset) = o->via.u64;
			break;
		case FIELD_INT:
			if (!get_int(o, (int64_t *)(base + f->offset)))
				return 0;
			break;
		case FIELD_BYTES_OR_NIL:
			if (o->type == MSGPACK_OBJECT_NIL)
				return 1;
			/* fall through */
		case FIELD_BYTES:
			if (!get_bytes(o, (herd__store_bytes *)(base + f->offset)))
				return 0;
			break;
		case FIELD_ARRAY:
			if (!get_byte_array(o, (const msgpack_object **)(base + f->offset),
					    (size_t *)(base + f->count)))
				return 0;
			break;
		}
		*bit = f->bit;
		return 1;
	}
	return 1;
}

/* The store protocol's envelope. */
static const herd__wire_proto proto = {
	.name = "store protocol",
	.version = HERD_STORE_PROTOCOL_VERSION,
	.types = type_names,
	.ntypes = HERD__STORE_T_COUNT,
	.limits = { .max_depth = HERD__STORE_MAX_DEPTH, .max_objects = HERD__STORE_MAX_OBJECTS },
};

/* The fields of an opened message ("v" and "t" are the envelope's). */
static herd_status decode_fields(herd__store_msg *m, const msgpack_object *root)
{
	for (uint32_t i = 0; i < root->via.map.size; i++) {
		const msgpack_object_kv *kv = &root->via.map.ptr[i];
		const char *name = kv->key.via.str.ptr;
		size_t nlen = kv->key.via.str.size;
		uint32_t bit;

		if (nlen == 1 && (name[0] == 'v' || name[0] == 't'))
			continue;
		if (!decode_field(m, name, nlen, &kv->val, &bit))
			return herd__error(HERD_EFORMAT, "store protocol: message field \"%.*s\" has "
					   "the wrong type", (int)(nlen > 32 ? 32 : nlen), name);
		m->has |= bit;
	}
	return HERD_OK;
}

herd_status herd__store_msg_decode(herd__store_msg *m, const void *data, size_t len)
{
	herd_status st;
	int type = HERD__STORE_T_UNKNOWN;

	memset(m, 0, sizeof(*m));
	HERD_CHECK_GOTO(herd__wire_open(&proto, &m->up, data, len, &type), st, fail);
	m->type = (herd__store_type)type;
	HERD_CHECK_GOTO(decode_fields(m, &m->up.data), st, fail);
	return HERD_OK;
fail:
	herd__store_msg_free(m);
	return st;
}

void herd__store_msg_free(herd__store_msg *m)
{
	if (m->up.zone != NULL)
		msgpack_unpacked_destroy(&m->up);
	memset(m, 0, sizeof(*m));
}

herd__store_bytes herd__store_msg_item(const msgpack_object *items, size_t i)
{
	herd__store_bytes b = { NULL, 0 };

	(void)get_bytes(&items[i], &b);
	return b;
}

static herd_status check_key(herd__store_bytes key, const char *op)
{
	if (key.n == 0 || key.n > HERD_STORE_KEY_MAX)
		return herd__error(HERD_EFORMAT, "%s request with a key of %zu bytes (1 to %d "
				   "allowed)", op, key.n, HERD_STORE_KEY_MAX);
	return HERD_OK;
}

herd_status herd__store_request_check(const herd__store_msg *m)
{
	static const uint32_t needs[HERD__STORE_T_COUNT] = {
		[HERD__STORE_T_SET] = HERD__STORE_F_KEY | HERD__STORE_F_VAL,
		[HERD__STORE_T_GET] = HERD__STORE_F_KEY | HERD__STORE_F_MS,
		[HERD__STORE_T_ADD] = HERD__STORE_F_KEY | HERD__STORE_F_DELTA,
		[HERD__STORE_T_CAS] = HERD__STORE_F_KEY | HERD__STORE_F_VAL,
		[HERD__STORE_T_DEL] = HERD__STORE_F_KEY,
		[HERD__STORE_T_WAIT] = HERD__STORE_F_KEYS | HERD__STORE_F_MS,
		/* "key" is the prefix, which may be empty: every key */
		[HERD__STORE_T_KEYS] = HERD__STORE_F_KEY,
	};
	const char *op = herd__store_type_name(m->type);
	uint32_t need;

	if ((unsigned)m->type >= HERD__STORE_T_COUNT || needs[m->type] == 0)
		return herd__error(HERD_EFORMAT, "message of type \"%s\" is not a request", op);
	need = needs[m->type] | HERD__STORE_F_ID;
	if ((m->has & need) != need)
		return herd__error(HERD_EFORMAT, "%s request lacks a field it needs", op);
	if ((m->has & HERD__STORE_F_KEY) && !(m->type == HERD__STORE_T_KEYS && m->key.n == 0))
		HERD_CHECK(check_key(m->key, op));
	if ((m->has & HERD__STORE_F_VAL) && m->val.n > HERD_STORE_VALUE_MAX)
		return herd__error(HERD_EFORMAT, "%s request with a value of %zu bytes (at most %u)",
				   op, m->val.n, HERD_STORE_VALUE_MAX);
	if ((m->has & HERD__STORE_F_EXP) && m->exp.n > HERD_STORE_VALUE_MAX)
		return herd__error(HERD_EFORMAT, "cas request with an expected value of %zu bytes",
				   m->exp.n);
	if ((m->has & HERD__STORE_F_MS) && (m->ms < 0 || m->ms > INT32_MAX))
		return herd__error(HERD_EFORMAT, "%s request with a timeout of %lld ms", op,
				   (long long)m->ms);
	if (m->type == HERD__STORE_T_WAIT) {
		if (m->nkeys == 0 || m->nkeys > HERD_STORE_WAIT_MAX_KEYS)
			return herd__error(HERD_EFORMAT, "wait request for %zu keys (1 to %d allowed)",
					   m->nkeys, HERD_STORE_WAIT_MAX_KEYS);
		for (size_t i = 0; i < m->nkeys; i++)
			HERD_CHECK(check_key(herd__store_msg_item(m->keys, i), op));
	}
	return HERD_OK;
}

/* ---- encoding --------------------------------------------------------- */

void herd__store_enc_begin(herd__store_enc *e, herd__buf *buf, herd__store_type type)
{
	herd__wire_begin(&proto, e, buf, (int)type);
}

void herd__store_enc_uint(herd__store_enc *e, const char *name, uint64_t value)
{
	herd__frame_key(e, name);
	msgpack_pack_uint64(&e->pk, value);
}

void herd__store_enc_int(herd__store_enc *e, const char *name, int64_t value)
{
	herd__frame_int(e, name, value);
}

void herd__store_enc_bin(herd__store_enc *e, const char *name, const void *p, size_t n)
{
	herd__frame_bin(e, name, p, n);
}

void herd__store_enc_str(herd__store_enc *e, const char *name, const char *s)
{
	herd__frame_str(e, name, s, strlen(s));
}

void herd__store_enc_array(herd__store_enc *e, const char *name, size_t n)
{
	herd__frame_key(e, name);
	msgpack_pack_array(&e->pk, n);
}

void herd__store_enc_item(herd__store_enc *e, const void *p, size_t n)
{
	msgpack_pack_bin(&e->pk, n);
	msgpack_pack_bin_body(&e->pk, p, n);
}

herd_status herd__store_enc_end(herd__store_enc *e)
{
	return herd__frame_end(e, HERD__STORE_FRAME_MAX, "store protocol");
}

herd_status herd_store_secret_generate(char out[HERD_STORE_SECRET_BUF])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[32];

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_store_secret_generate: out is NULL");
	HERD_CHECK(herd__auth_random(raw, sizeof(raw)));
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[64] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return HERD_OK;
}

void herd__store_quote(char *out, size_t cap, const void *key, size_t len)
{
	const uint8_t *k = key;
	size_t o = 0, i;

	if (cap < 8) {
		if (cap > 0)
			out[0] = '\0';
		return;
	}
	out[o++] = '"';
	for (i = 0; i < len; i++) {
		char esc[8];
		size_t n;

		if (k[i] == '"' || k[i] == '\\')
			n = (size_t)snprintf(esc, sizeof(esc), "\\%c", k[i]);
		else if (k[i] < 0x20 || k[i] >= 0x7f)
			n = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", k[i]);
		else
			n = (size_t)snprintf(esc, sizeof(esc), "%c", k[i]);
		/* Keep room for a closing quote, "..." and the NUL. */
		if (o + n + 5 > cap)
			break;
		memcpy(out + o, esc, n);
		o += n;
	}
	out[o++] = '"';
	if (i < len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}
