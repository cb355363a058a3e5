/*
 * sdk/base/mpwalk.c - the schema walker and packer helpers of mpwalk.h.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mpwalk.h"
#include "msgpack_check.h"

static void path_set(herd__mpwalk *w, size_t mark, const char *fmt, ...) HERD_PRINTF(3, 4);

static void path_set(herd__mpwalk *w, size_t mark, const char *fmt, ...)
{
	size_t room = sizeof(w->path) - mark;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(w->path + mark, room, fmt, ap);
	va_end(ap);
	w->len = mark + (n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1);
}

size_t herd__mpwalk_key(herd__mpwalk *w, const char *key)
{
	size_t mark = w->len;

	path_set(w, mark, "%s%s", mark > 0 ? "." : "", key);
	return mark;
}

size_t herd__mpwalk_index(herd__mpwalk *w, size_t i)
{
	size_t mark = w->len;

	path_set(w, mark, "[%zu]", i);
	return mark;
}

void herd__mpwalk_pop(herd__mpwalk *w, size_t mark)
{
	w->len = mark;
	w->path[mark] = '\0';
}

herd_status herd__mpwalk_fail(const herd__mpwalk *w, herd_status code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return herd__error(code, "%s: %s: %s", w->origin, w->len > 0 ? w->path : "top level",
			   msg);
}

const char *herd__mpwalk_kind(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return "null";
	case MSGPACK_OBJECT_BOOLEAN:
		return "a boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return "an integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return "a float";
	case MSGPACK_OBJECT_STR:
		return "a string";
	case MSGPACK_OBJECT_ARRAY:
		return "an array";
	case MSGPACK_OBJECT_MAP:
		return "a map";
	case MSGPACK_OBJECT_BIN:
		return "binary data";
	case MSGPACK_OBJECT_EXT:
		return "an extension value";
	}
	return "an unknown value";
}

herd_status herd__mpwalk_lookup(herd__mpwalk *w, const msgpack_object *map, const char *key,
				const msgpack_object **out)
{
	int count;

	*out = herd__msgpack_map_get(map, key, &count);
	if (count > 1)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "key \"%s\" appears twice", key);
	return HERD_OK;
}

herd_status herd__mpwalk_map(herd__mpwalk *w, const msgpack_object *o, size_t max_keys)
{
	if (o->type != MSGPACK_OBJECT_MAP)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a map, got %s",
					 herd__mpwalk_kind(o));
	if (o->via.map.size > max_keys)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a map of at most %zu keys, got %"
					 PRIu32 " keys", max_keys, o->via.map.size);
	return HERD_OK;
}

herd_status herd__mpwalk_array(herd__mpwalk *w, const msgpack_object *o, size_t lo, size_t hi,
			       size_t *n)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected an array, got %s",
					 herd__mpwalk_kind(o));
	if (o->via.array.size < lo || o->via.array.size > hi) {
		if (lo == 0)
			return herd__mpwalk_fail(w, HERD_EFORMAT, "expected an array of at most %zu "
						 "items, got %" PRIu32 " items", hi,
						 o->via.array.size);
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected an array of %zu..%zu items, got %"
					 PRIu32, lo, hi, o->via.array.size);
	}
	*n = o->via.array.size;
	return HERD_OK;
}

herd_status herd__mpwalk_int(herd__mpwalk *w, const msgpack_object *o, int64_t lo, int64_t hi,
			     int64_t *out)
{
	char got[24];

	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 <= (uint64_t)hi && (lo <= 0 || o->via.u64 >= (uint64_t)lo)) {
			*out = (int64_t)o->via.u64;
			return HERD_OK;
		}
		snprintf(got, sizeof(got), "%" PRIu64, o->via.u64);
	} else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		if (o->via.i64 >= lo && o->via.i64 <= hi) {
			*out = o->via.i64;
			return HERD_OK;
		}
		snprintf(got, sizeof(got), "%" PRId64, o->via.i64);
	} else {
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected an integer, got %s",
					 herd__mpwalk_kind(o));
	}
	return herd__mpwalk_fail(w, HERD_EFORMAT, "expected an integer in %" PRId64 "..%" PRId64
				 ", got %s", lo, hi, got);
}

herd_status herd__mpwalk_uint(herd__mpwalk *w, const msgpack_object *o, uint64_t lo,
			      uint64_t hi, uint64_t *out)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a non-negative integer, got %s",
					 herd__mpwalk_kind(o));
	if (o->via.u64 < lo || o->via.u64 > hi)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected an integer in %" PRIu64 "..%"
					 PRIu64 ", got %" PRIu64, lo, hi, o->via.u64);
	*out = o->via.u64;
	return HERD_OK;
}

herd_status herd__mpwalk_str(herd__mpwalk *w, const msgpack_object *o, size_t max,
			     const char **s, size_t *n)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a string of at most %zu bytes, "
					 "got %s", max, herd__mpwalk_kind(o));
	*s = o->via.str.ptr;
	*n = o->via.str.size;
	if (*n > max)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a string of at most %zu bytes, "
					 "got one of %zu bytes", max, *n);
	/* C strings end at a NUL: one inside would silently cut the value. */
	if (memchr(*s, '\0', *n) != NULL)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "the string contains a NUL byte");
	return HERD_OK;
}

herd_status herd__mpwalk_get_int(herd__mpwalk *w, const msgpack_object *map, const char *key,
				 int64_t lo, int64_t hi, int64_t *out)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark;

	HERD_CHECK(herd__mpwalk_lookup(w, map, key, &o));
	if (o == NULL)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "missing required key \"%s\"", key);
	mark = herd__mpwalk_key(w, key);
	st = herd__mpwalk_int(w, o, lo, hi, out);
	herd__mpwalk_pop(w, mark);
	return st;
}

void herd__mp_pack_str(msgpack_packer *pk, const char *s)
{
	size_t n;

	if (s == NULL) {
		msgpack_pack_nil(pk);
		return;
	}
	n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}
