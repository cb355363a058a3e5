/*
 * sdk/base/mpjson.c - msgpack bytes <-> JSON text (msgpack-c <-> jansson),
 * with the checks that make both safe on hostile input.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "mpjson.h"

herd_status herd__mpjson_check(const void *data, size_t len)
{
	static const herd__msgpack_limits limits = {
		.max_depth = HERD_MPJSON_MAX_DEPTH,
		.require_utf8 = true,
	};

	return herd__msgpack_check(data, len, &limits);
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
	herd__buf buf;
	msgpack_packer pk;
	json_error_t jerr;
	json_t *root = NULL;

	*out = NULL;
	*out_len = 0;
	herd__buf_init(&buf, max_len);
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
	msgpack_packer_init(&pk, &buf, herd__buf_write);
	HERD_CHECK_GOTO(pack_json(&pk, root, 0), st, out);
	st = herd__buf_take(&buf, "msgpack", out, out_len);
out:
	herd__buf_free(&buf);
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
	return herd__buf_write(buf, bytes, len);
}

/* The JSON text of one msgpack object, dumped with jansson's flags, and a
 * newline after it when asked. */
static herd_status to_json(const void *data, size_t len, size_t max_len, size_t flags,
			   bool newline, char **out, size_t *out_len)
{
	herd_status st = HERD_OK;
	herd__buf buf;
	msgpack_unpacked u;
	json_t *root = NULL;

	*out = NULL;
	*out_len = 0;
	if (len > max_len)
		return herd__error(HERD_EFORMAT, "msgpack data of %zu bytes exceeds the limit of "
				   "%zu bytes", len, max_len);
	herd__buf_init(&buf, max_len);
	msgpack_unpacked_init(&u);
	HERD_CHECK_GOTO(herd__mpjson_unpack(&u, data, len), st, out);
	HERD_CHECK_GOTO(json_of(&u.data, 0, &root), st, out);
	/* A failed dump leaves its reason in buf (too big, or out of memory). */
	if (json_dump_callback(root, dump_to_buf, &buf, flags | JSON_PRESERVE_ORDER |
			       JSON_ENCODE_ANY) != 0 && buf.failed == HERD_OK)
		buf.failed = HERD_ENOMEM;
	if (newline)
		herd__buf_write(&buf, "\n", 1);
	st = herd__buf_take(&buf, "JSON text", out, out_len);
out:
	herd__buf_free(&buf);
	json_decref(root);
	msgpack_unpacked_destroy(&u);
	return st;
}

herd_status herd__mpjson_to_json(const void *data, size_t len, size_t max_len,
				 char **out, size_t *out_len)
{
	return to_json(data, len, max_len, JSON_INDENT(2), true, out, out_len);
}

herd_status herd__mpjson_to_json_line(const void *data, size_t len, size_t max_len,
				      char **out, size_t *out_len)
{
	return to_json(data, len, max_len, JSON_COMPACT, false, out, out_len);
}
