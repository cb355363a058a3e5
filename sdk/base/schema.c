/*
 * sdk/base/schema.c - the one encoder and the one decoder of the field
 * tables of schema.h.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

/* ---- C values of any width ---------------------------------------------- */

/* A C unsigned integer of size bytes (1, 2, 4 or 8). */
static uint64_t load_uint(const void *p, size_t size)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64 = 0;

	switch (size) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&u64, p, sizeof(u64));
		return u64;
	}
}

/* A signed one: the bits above size's sign bit are copies of it. */
static int64_t load_int(const void *p, size_t size)
{
	uint64_t u = load_uint(p, size);

	if (size < sizeof(u) && (u >> (8 * size - 1)) != 0)
		u |= ~UINT64_C(0) << (8 * size);
	return (int64_t)u;
}

/* Stores v (which the range checked to fit) into a C integer of size bytes. */
static void store_uint(void *p, size_t size, uint64_t v)
{
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (size) {
	case 1:
		memcpy(p, &u8, 1);
		break;
	case 2:
		memcpy(p, &u16, 2);
		break;
	case 4:
		memcpy(p, &u32, 4);
		break;
	default:
		memcpy(p, &v, sizeof(v));
		break;
	}
}

static void *at(void *obj, size_t offset)
{
	return (char *)obj + offset;
}

static const void *cat(const void *obj, size_t offset)
{
	return (const char *)obj + offset;
}

static size_t item_size(const herd__schema_field *f)
{
	return f->sub != NULL ? f->sub->size : f->item->size;
}

/* An array's items and their count (capped at what an inline array holds). */
static const void *array_items(const herd__schema_field *f, const void *obj, size_t *n)
{
	const void *count = cat(obj, f->count_offset);
	int64_t c = load_int(count, f->count_size);

	/* A count is a size_t, or an int (negative: none). */
	if (f->count_size == sizeof(size_t))
		*n = (size_t)load_uint(count, f->count_size);
	else
		*n = c < 0 ? 0 : (size_t)c;
	if (f->inline_cap > 0) {
		if (*n > f->inline_cap)
			*n = f->inline_cap;
		return cat(obj, f->offset);
	}
	return *(void *const *)cat(obj, f->offset);
}

/* ---- encoder ------------------------------------------------------------ */

static void pack_struct(msgpack_packer *pk, const herd__schema *s, const void *obj, size_t extra);

static void pack_text(msgpack_packer *pk, const char *s, size_t n)
{
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pack_value(msgpack_packer *pk, const herd__schema_field *f, const void *p,
		       const void *obj)
{
	const char *s;
	size_t n = 0;

	switch (f->type) {
	case HERD__SCHEMA_T_INT:
		msgpack_pack_int64(pk, load_int(p, f->size));
		break;
	case HERD__SCHEMA_T_UINT:
		msgpack_pack_uint64(pk, load_uint(p, f->size));
		break;
	case HERD__SCHEMA_T_BOOL:
		if (*(const bool *)p)
			msgpack_pack_true(pk);
		else
			msgpack_pack_false(pk);
		break;
	case HERD__SCHEMA_T_DOUBLE:
		msgpack_pack_double(pk, *(const double *)p);
		break;
	case HERD__SCHEMA_T_CHARS:
		pack_text(pk, p, strnlen(p, f->size));
		break;
	case HERD__SCHEMA_T_STR:
		s = *(const char *const *)p;
		if (s == NULL && (f->flags & HERD__SCHEMA_NULLABLE))
			msgpack_pack_nil(pk);
		else
			pack_text(pk, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
		break;
	case HERD__SCHEMA_T_BYTES:
		n = (size_t)load_uint(cat(obj, f->count_offset), f->count_size);
		msgpack_pack_bin(pk, n);
		msgpack_pack_bin_body(pk, *(const void *const *)p, n);
		break;
	case HERD__SCHEMA_T_ENUM:
		for (const herd__schema_name *e = f->names; e->name != NULL; e++)
			if (e->value == (int)load_int(p, f->size)) {
				pack_text(pk, e->name, strlen(e->name));
				return;
			}
		msgpack_pack_nil(pk);   /* no name: the decoder refuses it */
		break;
	case HERD__SCHEMA_T_VALUE:
		f->codec->pack(pk, p);
		break;
	case HERD__SCHEMA_T_CONST:
		if (f->str != NULL)
			pack_text(pk, f->str, strlen(f->str));
		else
			msgpack_pack_int64(pk, f->min);
		break;
	case HERD__SCHEMA_T_STRUCT:
		pack_struct(pk, f->sub, p, 0);
		break;
	case HERD__SCHEMA_T_ARRAY: {
		const char *items = array_items(f, obj, &n);

		msgpack_pack_array(pk, n);
		for (size_t i = 0; i < n; i++) {
			const void *item = items + i * item_size(f);

			if (f->sub != NULL)
				pack_struct(pk, f->sub, item, 0);
			else
				pack_value(pk, f->item, item, NULL);
		}
		break;
	}
	}
}

static bool omitted(const herd__schema_field *f, const void *obj)
{
	size_t n = 0;

	if (!(f->flags & HERD__SCHEMA_OMIT_EMPTY) || f->type != HERD__SCHEMA_T_ARRAY)
		return false;
	array_items(f, obj, &n);
	return n == 0;
}

static void pack_struct(msgpack_packer *pk, const herd__schema *s, const void *obj, size_t extra)
{
	size_t n = extra;

	for (size_t i = 0; i < s->nfields; i++)
		n += !omitted(&s->fields[i], obj);
	msgpack_pack_map(pk, n);
	for (size_t i = 0; i < s->nfields; i++) {
		const herd__schema_field *f = &s->fields[i];

		if (omitted(f, obj))
			continue;
		pack_text(pk, f->key, strlen(f->key));
		pack_value(pk, f, cat(obj, f->offset), obj);
	}
}

void herd__schema_pack(msgpack_packer *pk, const herd__schema *s, const void *obj, size_t extra)
{
	pack_struct(pk, s, obj, extra);
}

/* ---- decoder ------------------------------------------------------------ */

herd_status herd__schema_fail(herd__schema_dec *d, const char *key, const char *fmt, ...)
{
	char msg[512];
	size_t mark = d->walk.len;
	herd_status st;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (key != NULL)
		mark = herd__mpwalk_key(&d->walk, key);
	st = herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "%s", msg);
	herd__mpwalk_pop(&d->walk, mark);
	return st;
}

static herd_status unpack_struct(herd__schema_dec *d, const herd__schema *s,
				 const msgpack_object *o, void *obj, void *parent);

/* A string of at most max bytes in the form f asks for. */
static herd_status unpack_text(herd__schema_dec *d, const herd__schema_field *f,
			       const msgpack_object *o, size_t max, const char **s, size_t *n)
{
	HERD_CHECK(herd__mpwalk_str(&d->walk, o, max, s, n));
	if (f->form != NULL && !f->form->valid(*s, *n))
		return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected %s, got \"%.*s\"%s",
					 f->form->what, (int)(*n > 64 ? 64 : *n), *s,
					 *n > 64 ? "..." : "");
	return HERD_OK;
}

static herd_status unpack_enum(herd__schema_dec *d, const herd__schema_field *f,
			       const msgpack_object *o, void *p)
{
	char expected[256];
	const char *s = NULL;
	size_t n = 0, k = 0;

	HERD_CHECK(herd__mpwalk_str(&d->walk, o, SIZE_MAX, &s, &n));
	for (const herd__schema_name *e = f->names; e->name != NULL; e++) {
		if (strlen(e->name) == n && memcmp(e->name, s, n) == 0) {
			store_uint(p, f->size, (uint64_t)(int64_t)e->value);
			return HERD_OK;
		}
	}
	/* "a", "b" or "c" */
	expected[0] = '\0';
	for (const herd__schema_name *e = f->names; e->name != NULL && k < sizeof(expected); e++)
		k += (size_t)snprintf(expected + k, sizeof(expected) - k, "%s\"%s\"",
				      e == f->names ? "" : e[1].name == NULL ? " or " : ", ", e->name);
	return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected %s", expected);
}

static herd_status unpack_array(herd__schema_dec *d, const herd__schema_field *f,
				const msgpack_object *o, void *obj, void *parent);

/* The value o of field f (at p inside obj); the path is at the value. */
static herd_status unpack_value(herd__schema_dec *d, const herd__schema_field *f,
				const msgpack_object *o, void *p, void *obj, void *parent)
{
	int64_t lo = f->min, v = 0;
	uint64_t hi = f->max, u = 0;
	const char *s = NULL;
	size_t n = 0;
	char *copy;

	switch (f->type) {
	case HERD__SCHEMA_T_INT:
	case HERD__SCHEMA_T_UINT:
		if (f->limits != NULL)
			f->limits(d, obj, parent, &lo, &hi);
		if (f->type == HERD__SCHEMA_T_UINT) {
			HERD_CHECK(herd__mpwalk_uint(&d->walk, o, (uint64_t)lo, hi, &u));
		} else {
			HERD_CHECK(herd__mpwalk_int(&d->walk, o, lo, (int64_t)hi, &v));
			u = (uint64_t)v;
		}
		store_uint(p, f->size, u);
		return HERD_OK;
	case HERD__SCHEMA_T_BOOL:
		if (o->type != MSGPACK_OBJECT_BOOLEAN)
			return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected a boolean, got %s",
						 herd__mpwalk_kind(o));
		*(bool *)p = o->via.boolean;
		return HERD_OK;
	case HERD__SCHEMA_T_DOUBLE:
		if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
			*(double *)p = o->via.f64;
		else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			*(double *)p = (double)o->via.u64;
		else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			*(double *)p = (double)o->via.i64;
		else
			return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected a number, got %s",
						 herd__mpwalk_kind(o));
		return HERD_OK;
	case HERD__SCHEMA_T_CHARS:
		HERD_CHECK(unpack_text(d, f, o, f->size - 1, &s, &n));
		memcpy(p, s, n);
		((char *)p)[n] = '\0';
		return HERD_OK;
	case HERD__SCHEMA_T_STR:
		if ((f->flags & HERD__SCHEMA_NULLABLE) && o->type == MSGPACK_OBJECT_NIL)
			return HERD_OK;
		if ((f->flags & HERD__SCHEMA_NULLABLE) && o->type != MSGPACK_OBJECT_STR)
			return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected a string or null, "
						 "got %s", herd__mpwalk_kind(o));
		HERD_CHECK(unpack_text(d, f, o, (size_t)f->max, &s, &n));
		copy = malloc(n + 1);
		if (copy == NULL)
			return herd__error(HERD_ENOMEM, "out of memory decoding a string of %zu bytes",
					   n);
		memcpy(copy, s, n);
		copy[n] = '\0';
		*(char **)p = copy;
		return HERD_OK;
	case HERD__SCHEMA_T_BYTES:
		if (o->type != MSGPACK_OBJECT_BIN)
			return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected binary data, got %s",
						 herd__mpwalk_kind(o));
		if (o->via.bin.size > f->max)
			return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "expected at most %" PRIu64
						 " bytes, got %" PRIu32, f->max, o->via.bin.size);
		copy = NULL;
		HERD_CHECK(herd__calloc(&copy, o->via.bin.size + 1, 1, f->key));
		memcpy(copy, o->via.bin.ptr, o->via.bin.size);
		*(void **)p = copy;
		store_uint(at(obj, f->count_offset), f->count_size, o->via.bin.size);
		return HERD_OK;
	case HERD__SCHEMA_T_ENUM:
		return unpack_enum(d, f, o, p);
	case HERD__SCHEMA_T_VALUE:
		return f->codec->unpack(&d->walk, o, p);
	case HERD__SCHEMA_T_CONST:
		return HERD_OK;
	case HERD__SCHEMA_T_STRUCT:
		return unpack_struct(d, f->sub, o, p, obj);
	case HERD__SCHEMA_T_ARRAY:
		return unpack_array(d, f, o, obj, parent);
	}
	return herd__error(HERD_EINTERNAL, "schema: field \"%s\" of an unknown type", f->key);
}

/*
 * The items are allocated zeroed and stored with their count before they
 * are decoded, so that whatever a failure leaves half-built is reachable
 * by the owner's free.
 */
static herd_status unpack_array(herd__schema_dec *d, const herd__schema_field *f,
				const msgpack_object *o, void *obj, void *parent)
{
	int64_t lo = f->min;
	uint64_t hi = f->max;
	size_t n = 0, size = item_size(f);
	char *items;

	if (f->limits != NULL)
		f->limits(d, obj, parent, &lo, &hi);
	HERD_CHECK(herd__mpwalk_array(&d->walk, o, (size_t)lo, (size_t)hi, &n));
	if (f->inline_cap > 0) {
		items = at(obj, f->offset);
	} else {
		items = NULL;
		HERD_CHECK(herd__calloc(&items, n, size, f->key));
		*(void **)at(obj, f->offset) = items;
	}
	store_uint(at(obj, f->count_offset), f->count_size, n);
	for (size_t i = 0; i < n; i++) {
		size_t mark = herd__mpwalk_index(&d->walk, i);
		herd_status st;

		if (f->sub != NULL)
			st = unpack_struct(d, f->sub, &o->via.array.ptr[i], items + i * size, obj);
		else
			st = unpack_value(d, f->item, &o->via.array.ptr[i], items + i * size, obj,
					  parent);
		herd__mpwalk_pop(&d->walk, mark);
		HERD_CHECK(st);
	}
	return HERD_OK;
}

static herd_status unpack_field(herd__schema_dec *d, const herd__schema_field *f,
				const msgpack_object *map, void *obj, void *parent)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark;

	HERD_CHECK(herd__mpwalk_lookup(&d->walk, map, f->key, &o));
	if (o == NULL) {
		if (!(f->flags & HERD__SCHEMA_OPTIONAL) && f->since <= d->version &&
		    f->type != HERD__SCHEMA_T_CONST)
			return herd__mpwalk_fail(&d->walk, HERD_EFORMAT, "missing required key \"%s\"",
						 f->key);
		if (f->type == HERD__SCHEMA_T_INT || f->type == HERD__SCHEMA_T_UINT)
			store_uint(at(obj, f->offset), f->size, (uint64_t)f->def);
		return HERD_OK;
	}
	mark = herd__mpwalk_key(&d->walk, f->key);
	st = unpack_value(d, f, o, at(obj, f->offset), obj, parent);
	if (st == HERD_OK && f->check != NULL)
		st = f->check(d, obj, parent);
	herd__mpwalk_pop(&d->walk, mark);
	return st;
}

static herd_status unpack_struct(herd__schema_dec *d, const herd__schema *s,
				 const msgpack_object *o, void *obj, void *parent)
{
	HERD_CHECK(herd__mpwalk_map(&d->walk, o, s->max_keys));
	for (size_t i = 0; i < s->nfields; i++)
		HERD_CHECK(unpack_field(d, &s->fields[i], o, obj, parent));
	return s->check != NULL ? s->check(d, obj, parent) : HERD_OK;
}

herd_status herd__schema_unpack(herd__schema_dec *d, const herd__schema *s,
				const msgpack_object *o, void *obj)
{
	return unpack_struct(d, s, o, obj, NULL);
}

/* ---- freeing ------------------------------------------------------------ */

static void free_value(const herd__schema_field *f, void *p, void *obj)
{
	size_t n = 0;
	char *items;

	switch (f->type) {
	case HERD__SCHEMA_T_STR:
	case HERD__SCHEMA_T_BYTES:
		free(*(void **)p);
		*(void **)p = NULL;
		if (f->type == HERD__SCHEMA_T_BYTES && obj != NULL)
			store_uint(at(obj, f->count_offset), f->count_size, 0);
		break;
	case HERD__SCHEMA_T_STRUCT:
		herd__schema_free(f->sub, p);
		break;
	case HERD__SCHEMA_T_ARRAY:
		items = (char *)array_items(f, obj, &n);
		for (size_t i = 0; items != NULL && i < n; i++) {
			if (f->sub != NULL)
				herd__schema_free(f->sub, items + i * item_size(f));
			else
				free_value(f->item, items + i * item_size(f), NULL);
		}
		if (f->inline_cap == 0) {
			free(items);
			*(void **)p = NULL;
		}
		store_uint(at(obj, f->count_offset), f->count_size, 0);
		break;
	default:
		break;
	}
}

void herd__schema_free(const herd__schema *s, void *obj)
{
	for (size_t i = 0; i < s->nfields; i++)
		free_value(&s->fields[i], at(obj, s->fields[i].offset), obj);
}

herd_status herd__schema_version(herd__schema_dec *d, const msgpack_object *root,
				 const char *what, const char *doc, unsigned newest)
{
	herd__mpwalk *w = &d->walk;
	const msgpack_object *v;
	int64_t version = 0;
	herd_status st;
	size_t mark;

	HERD_CHECK(herd__mpwalk_lookup(w, root, "v", &v));
	if (v == NULL)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "missing required key \"v\" (the %s "
					 "format version): not %s", what, doc);
	mark = herd__mpwalk_key(w, "v");
	st = herd__mpwalk_int(w, v, 1, INT64_MAX, &version);
	if (st == HERD_OK && version > (int64_t)newest)
		st = herd__mpwalk_fail(w, HERD_EVERSION, "%s format version %" PRId64 " is newer "
				       "than version %u, the newest this library reads", what,
				       version, newest);
	herd__mpwalk_pop(w, mark);
	HERD_CHECK(st);
	d->version = (unsigned)version;
	return HERD_OK;
}
