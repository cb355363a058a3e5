/*
 * sdk/base/mpjson.c - msgpack bytes <-> JSON text (msgpack-c <-> jansson),
 * with the checks that make both safe on hostile input.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mpjson.h"

void herd__mpjson_buf_init(herd__mpjson_buf *buf, size_t max)
{
	memset(buf, 0, sizeof(*buf));
	buf->max = max;
}

int herd__mpjson_buf_write(void *data, const char *bytes, size_t len)
{
	herd__mpjson_buf *buf = data;

	if (buf->failed != HERD_OK)
		return -1;
	if (len > buf->max - buf->len) {
		buf->failed = HERD_EFORMAT;
		return -1;
	}
	/* Keep one byte spare for the NUL that herd__mpjson_buf_take adds. */
	if (len >= buf->cap - buf->len) {
		size_t cap = buf->cap ? buf->cap : 256;
		char *p;

		while (cap - buf->len <= len && cap <= SIZE_MAX / 2)
			cap *= 2;
		p = cap - buf->len > len ? realloc(buf->data, cap) : NULL;
		if (p == NULL) {
			buf->failed = HERD_ENOMEM;
			return -1;
		}
		buf->data = p;
		buf->cap = cap;
	}
	memcpy(buf->data + buf->len, bytes, len);
	buf->len += len;
	return 0;
}

herd_status herd__mpjson_buf_take(herd__mpjson_buf *buf, const char *what,
				  char **out, size_t *len)
{
	herd_status st = buf->failed;

	*out = NULL;
	*len = 0;
	/* Nothing written still hands back an empty, NUL-terminated string. */
	if (st == HERD_OK && buf->data == NULL) {
		buf->data = malloc(1);
		if (buf->data == NULL)
			st = HERD_ENOMEM;
	}
	if (st == HERD_ENOMEM) {
		st = herd__error(HERD_ENOMEM, "out of memory writing %s (%zu bytes so far)",
				 what, buf->len);
	} else if (st != HERD_OK) {
		st = herd__error(st, "%s would exceed the limit of %zu bytes", what, buf->max);
	} else {
		buf->data[buf->len] = '\0';
		*out = buf->data;
		*len = buf->len;
		buf->data = NULL;
	}
	free(buf->data);
	herd__mpjson_buf_init(buf, buf->max);
	return st;
}

bool herd__mpjson_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		unsigned int c = *p;
		uint32_t cp, min;
		size_t n;

		if (c < 0x80) {
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1, cp = c & 0x1f, min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if ((size_t)(end - p) <= n)
			return false;
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		p += n + 1;
	}
	return true;
}

/* What one msgpack value's leading bytes say about it. */
typedef struct mp_head {
	size_t hdr;         /* the type byte and its length or count field */
	uint64_t payload;   /* bytes that follow the header (string, number...) */
	uint64_t items;     /* values nested inside: elements, or 2 per map entry */
	bool container;
	bool str;           /* the payload is a string, which must be UTF-8 */
	const char *name;   /* for messages */
} mp_head;

static uint64_t read_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/*
 * Reads the header of the value at p (avail bytes readable).  The ranges
 * and sizes are those of the msgpack specification's format table.
 */
static herd_status mp_head_read(const uint8_t *p, size_t avail, size_t off, mp_head *h)
{
	uint8_t b = p[0];
	size_t field = 0; /* bytes of the length/count field after the type byte */
	enum { FIXED, STR, BIN, EXT, ARRAY, MAP } kind = FIXED;
	static const char *const names[] = { "value", "string", "binary value",
					     "extension value", "array", "map" };

	memset(h, 0, sizeof(*h));
	h->hdr = 1;
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
		/* fixint, nil, false, true: the type byte is the whole value */
	} else if (b <= 0x8f) {
		kind = MAP, h->items = 2u * (b & 0x0f);
	} else if (b <= 0x9f) {
		kind = ARRAY, h->items = b & 0x0f;
	} else if (b <= 0xbf) {
		kind = STR, h->payload = b & 0x1f;
	} else if (b >= 0xc4 && b <= 0xc6) {
		kind = BIN, field = (size_t)1 << (b - 0xc4);
	} else if (b >= 0xc7 && b <= 0xc9) {
		kind = EXT, field = (size_t)1 << (b - 0xc7);
	} else if (b == 0xca || b == 0xcb) {
		h->payload = b == 0xca ? 4 : 8;
	} else if (b >= 0xcc && b <= 0xd3) {
		h->payload = (uint64_t)1 << ((b - 0xcc) & 3);
	} else if (b >= 0xd4 && b <= 0xd8) {
		h->payload = 1 + ((uint64_t)1 << (b - 0xd4)); /* fixext: type + data */
	} else if (b >= 0xd9 && b <= 0xdb) {
		kind = STR, field = (size_t)1 << (b - 0xd9);
	} else if (b == 0xdc || b == 0xdd) {
		kind = ARRAY, field = b == 0xdc ? 2 : 4;
	} else if (b == 0xde || b == 0xdf) {
		kind = MAP, field = b == 0xde ? 2 : 4;
	} else {
		return herd__error(HERD_EFORMAT, "msgpack: byte 0x%02x at offset %zu is not a "
				   "valid type", b, off);
	}
	if (field > avail - 1)
		return herd__error(HERD_EFORMAT, "msgpack: truncated: the header at offset %zu "
				   "needs %zu bytes, %zu remain", off, field + 1, avail);
	h->hdr += field;
	switch (kind) {
	case STR:
	case BIN:
		if (field > 0)
			h->payload = read_be(p + 1, field);
		break;
	case EXT:
		h->payload = read_be(p + 1, field) + 1; /* the ext type byte */
		break;
	case ARRAY:
		if (field > 0)
			h->items = read_be(p + 1, field);
		break;
	case MAP:
		if (field > 0)
			h->items = 2 * read_be(p + 1, field);
		break;
	case FIXED:
		break;
	}
	h->container = kind == ARRAY || kind == MAP;
	h->str = kind == STR;
	h->name = names[kind];
	return HERD_OK;
}

herd_status herd__mpjson_check(const void *data, size_t len)
{
	const uint8_t *bytes = data;
	/* Values still due in each open container; level 0 is the top value. */
	uint64_t due[HERD_MPJSON_MAX_DEPTH + 1];
	size_t depth = 0, off = 0, start;
	mp_head h;

	if (len == 0)
		return herd__error(HERD_EFORMAT, "msgpack: no data");
	due[0] = 1;
	for (;;) {
		while (due[depth] == 0 && depth > 0)
			depth--;
		if (due[depth] == 0)
			break;
		due[depth]--;
		if (off == len)
			return herd__error(HERD_EFORMAT, "msgpack: truncated: %zu bytes end in the "
					   "middle of the data", len);
		start = off;
		HERD_CHECK(mp_head_read(bytes + off, len - off, off, &h));
		if (h.payload > len - off - h.hdr)
			return herd__error(HERD_EFORMAT, "msgpack: truncated: the %s at offset %zu "
					   "claims %" PRIu64 " bytes, %zu remain", h.name, off,
					   h.payload, len - off - h.hdr);
		if (h.str && !herd__mpjson_utf8_valid((const char *)bytes + off + h.hdr,
						      (size_t)h.payload))
			return herd__error(HERD_EFORMAT, "msgpack: the string at offset %zu is "
					   "not valid UTF-8", off);
		if (h.container && depth >= HERD_MPJSON_MAX_DEPTH)
			return herd__error(HERD_EFORMAT, "msgpack: containers nested deeper than "
					   "%d at offset %zu", HERD_MPJSON_MAX_DEPTH, off);
		off += h.hdr + (size_t)h.payload;
		/* Every nested value takes at least one byte: a count that the
		 * remaining bytes cannot hold is a lie, refused before msgpack-c
		 * would allocate room for it. */
		if (h.items > len - off)
			return herd__error(HERD_EFORMAT, "msgpack: truncated: the %s at offset %zu "
					   "claims %" PRIu64 " values, only %zu bytes remain",
					   h.name, start, h.items, len - off);
		if (h.items > 0)
			due[++depth] = h.items;
	}
	if (off != len)
		return herd__error(HERD_EFORMAT, "msgpack: %zu bytes of trailing data after the "
				   "object at offset %zu", len - off, off);
	return HERD_OK;
}

herd_status herd__mpjson_unpack(msgpack_unpacked *out, const void *data, size_t len)
{
	msgpack_unpack_return rc;
	size_t off = 0;

	HERD_CHECK(herd__mpjson_check(data, len));
	rc = msgpack_unpack_next(out, data, len, &off);
	if (rc == MSGPACK_UNPACK_NOMEM_ERROR)
		return herd__error(HERD_ENOMEM, "out of memory unpacking %zu bytes of msgpack", len);
	if ((rc != MSGPACK_UNPACK_SUCCESS && rc != MSGPACK_UNPACK_EXTRA_BYTES) || off != len)
		return herd__error(HERD_EINTERNAL, "msgpack-c refused data that passed herd's "
				   "check (status %d, %zu of %zu bytes)", (int)rc, off, len);
	return HERD_OK;
}

static herd_status too_deep(void)
{
	return herd__error(HERD_EFORMAT, "arrays and objects nested deeper than %d levels",
			   HERD_MPJSON_MAX_DEPTH);
}

/* Packs a JSON value; depth counts the containers around it. */
static herd_status pack_json(msgpack_packer *pk, json_t *j, int depth)
{
	const char *key;
	size_t key_len, i;
	json_t *v;

	switch (json_typeof(j)) {
	case JSON_OBJECT:
		if (depth >= HERD_MPJSON_MAX_DEPTH)
			return too_deep();
		msgpack_pack_map(pk, json_object_size(j));
		json_object_keylen_foreach(j, key, key_len, v) {
			msgpack_pack_str_with_body(pk, key, key_len);
			HERD_CHECK(pack_json(pk, v, depth + 1));
		}
		return HERD_OK;
	case JSON_ARRAY:
		if (depth >= HERD_MPJSON_MAX_DEPTH)
			return too_deep();
		msgpack_pack_array(pk, json_array_size(j));
		json_array_foreach(j, i, v)
			HERD_CHECK(pack_json(pk, v, depth + 1));
		return HERD_OK;
	case JSON_STRING:
		msgpack_pack_str_with_body(pk, json_string_value(j), json_string_length(j));
		return HERD_OK;
	case JSON_INTEGER:
		/* msgpack-c picks the shortest form, so equal values give equal bytes. */
		msgpack_pack_int64(pk, json_integer_value(j));
		return HERD_OK;
	case JSON_REAL:
		msgpack_pack_double(pk, json_real_value(j));
		return HERD_OK;
	case JSON_TRUE:
		msgpack_pack_true(pk);
		return HERD_OK;
	case JSON_FALSE:
		msgpack_pack_false(pk);
		return HERD_OK;
	case JSON_NULL:
		msgpack_pack_nil(pk);
		return HERD_OK;
	}
	return herd__error(HERD_EINTERNAL, "jansson value of unknown type %d", (int)json_typeof(j));
}

herd_status herd__mpjson_to_msgpack(const char *json, size_t json_len, size_t max_len,
				    char **out, size_t *out_len)
{
	herd_status st = HERD_OK;
	herd__mpjson_buf buf;
	msgpack_packer pk;
	json_error_t jerr;
	json_t *root = NULL;

	*out = NULL;
	*out_len = 0;
	herd__mpjson_buf_init(&buf, max_len);
	if (json_len > max_len)
		return herd__error(HERD_EFORMAT, "JSON text of %zu bytes exceeds the limit of %zu "
				   "bytes", json_len, max_len);
	/* Duplicate keys are refused: msgpack would keep both, JSON readers
	 * disagree on which wins. */
	root = json_loadb(json, json_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES |
			  JSON_ALLOW_NUL, &jerr);
	if (root == NULL)
		return herd__error(HERD_EFORMAT, "JSON: line %d, column %d: %s", jerr.line,
				   jerr.column, jerr.text);
	msgpack_packer_init(&pk, &buf, herd__mpjson_buf_write);
	HERD_CHECK_GOTO(pack_json(&pk, root, 0), st, out);
	st = herd__mpjson_buf_take(&buf, "msgpack", out, out_len);
out:
	free(buf.data);
	json_decref(root);
	return st;
}

static const char *mp_kind(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_BIN ? "binary data" : "an extension value";
}

/* The JSON form of a msgpack object; depth counts the containers around it. */
static herd_status json_of(const msgpack_object *o, int depth, json_t **out)
{
	herd_status st = HERD_OK;
	json_t *j = NULL, *child = NULL;

	*out = NULL;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		j = json_null();
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		j = json_boolean(o->via.boolean);
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 > INT64_MAX)
			return herd__error(HERD_EFORMAT, "the integer %" PRIu64 " is above %" PRId64
					   " and has no JSON form here", o->via.u64, INT64_MAX);
		j = json_integer((json_int_t)o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		j = json_integer((json_int_t)o->via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		if (!isfinite(o->via.f64))
			return herd__error(HERD_EFORMAT, "the float %g has no JSON form", o->via.f64);
		j = json_real(o->via.f64);
		break;
	case MSGPACK_OBJECT_STR:
		j = json_stringn(o->via.str.ptr, o->via.str.size);
		break;
	case MSGPACK_OBJECT_ARRAY:
		if (depth >= HERD_MPJSON_MAX_DEPTH)
			return too_deep();
		j = json_array();
		for (uint32_t i = 0; j != NULL && i < o->via.array.size; i++) {
			HERD_CHECK_GOTO(json_of(&o->via.array.ptr[i], depth + 1, &child), st, fail);
			if (json_array_append_new(j, child) != 0)
				goto nomem;
		}
		break;
	case MSGPACK_OBJECT_MAP:
		if (depth >= HERD_MPJSON_MAX_DEPTH)
			return too_deep();
		j = json_object();
		for (uint32_t i = 0; j != NULL && i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];

			if (kv->key.type != MSGPACK_OBJECT_STR) {
				st = herd__error(HERD_EFORMAT, "a map key that is not a string has "
						 "no JSON form");
				goto fail;
			}
			if (json_object_getn(j, kv->key.via.str.ptr, kv->key.via.str.size)) {
				st = herd__error(HERD_EFORMAT, "duplicate map key \"%.*s\"",
						 (int)(kv->key.via.str.size > 64 ? 64
						       : kv->key.via.str.size), kv->key.via.str.ptr);
				goto fail;
			}
			HERD_CHECK_GOTO(json_of(&kv->val, depth + 1, &child), st, fail);
			if (json_object_setn_new(j, kv->key.via.str.ptr, kv->key.via.str.size,
						 child) != 0)
				goto nomem;
		}
		break;
	case MSGPACK_OBJECT_BIN:
	case MSGPACK_OBJECT_EXT:
		return herd__error(HERD_EFORMAT, "%s has no JSON form", mp_kind(o));
	}
	if (j == NULL)
		goto nomem;
	*out = j;
	return HERD_OK;
nomem:
	st = herd__error(HERD_ENOMEM, "out of memory converting msgpack to JSON");
fail:
	json_decref(j);
	return st;
}

static int dump_to_buf(const char *bytes, size_t len, void *buf)
{
	return herd__mpjson_buf_write(buf, bytes, len);
}

herd_status herd__mpjson_to_json(const void *data, size_t len, size_t max_len,
				 char **out, size_t *out_len)
{
	herd_status st = HERD_OK;
	herd__mpjson_buf buf;
	msgpack_unpacked u;
	json_t *root = NULL;

	*out = NULL;
	*out_len = 0;
	if (len > max_len)
		return herd__error(HERD_EFORMAT, "msgpack data of %zu bytes exceeds the limit of "
				   "%zu bytes", len, max_len);
	herd__mpjson_buf_init(&buf, max_len);
	msgpack_unpacked_init(&u);
	HERD_CHECK_GOTO(herd__mpjson_unpack(&u, data, len), st, out);
	HERD_CHECK_GOTO(json_of(&u.data, 0, &root), st, out);
	/* A failed dump leaves its reason in buf (too big, or out of memory). */
	if (json_dump_callback(root, dump_to_buf, &buf, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
			       JSON_ENCODE_ANY) != 0 && buf.failed == HERD_OK)
		buf.failed = HERD_ENOMEM;
	herd__mpjson_buf_write(&buf, "\n", 1);
	st = herd__mpjson_buf_take(&buf, "JSON text", out, out_len);
out:
	free(buf.data);
	json_decref(root);
	msgpack_unpacked_destroy(&u);
	return st;
}
