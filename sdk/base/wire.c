/*
 * sdk/base/wire.c - length-prefixed msgpack frames and their envelope (see
 * wire.h).
 */
#include <string.h>

#include "wire.h"

uint32_t herd__be32_load(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void herd__be32_store(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

herd_status herd__frame_peek(const herd__buf *b, size_t limit, const char *what,
			     size_t *payload_len)
{
	size_t pending = b->len - b->off;
	const char *sep = what != NULL ? ": " : "";
	uint32_t n;

	*payload_len = SIZE_MAX;
	if (what == NULL)
		what = "";
	if (pending < 4)
		return HERD_OK;
	n = herd__be32_load(b->data + b->off);
	if (n == 0)
		return herd__error(HERD_EFORMAT, "%s%sframe with an empty payload", what, sep);
	if (n > limit)
		return herd__error(HERD_EFORMAT, "%s%sframe of %lu bytes exceeds the limit of "
				   "%zu bytes", what, sep, (unsigned long)n, limit);
	if (pending - 4 >= n)
		*payload_len = n;
	return HERD_OK;
}

void herd__frame_begin(herd__frame_enc *e, herd__buf *buf)
{
	/* Length prefix, then a map32 header whose count is filled in at the end. */
	static const uint8_t head[9] = { 0, 0, 0, 0, 0xdf, 0, 0, 0, 0 };

	e->buf = buf;
	/* Relative to the pending bytes: growing the buffer may move them to
	 * the front (herd__buf_reserve), which would leave an absolute offset
	 * pointing into the wrong bytes. */
	e->start = buf->len - buf->off;
	e->nfields = 0;
	/* A failure belongs to the frame it happened in (see herd__frame_end). */
	buf->failed = HERD_OK;
	msgpack_packer_init(&e->pk, buf, herd__buf_write);
	herd__buf_write(buf, (const char *)head, sizeof(head));
}

void herd__frame_key(herd__frame_enc *e, const char *name)
{
	size_t n = strlen(name);

	e->nfields++;
	msgpack_pack_str(&e->pk, n);
	msgpack_pack_str_body(&e->pk, name, n);
}

void herd__frame_str(herd__frame_enc *e, const char *name, const char *s, size_t n)
{
	herd__frame_key(e, name);
	msgpack_pack_str(&e->pk, n);
	msgpack_pack_str_body(&e->pk, s, n);
}

void herd__frame_int(herd__frame_enc *e, const char *name, int64_t v)
{
	herd__frame_key(e, name);
	msgpack_pack_int64(&e->pk, v);
}

void herd__frame_bin(herd__frame_enc *e, const char *name, const void *p, size_t n)
{
	herd__frame_key(e, name);
	msgpack_pack_bin(&e->pk, n);
	msgpack_pack_bin_body(&e->pk, p, n);
}

herd_status herd__frame_end(herd__frame_enc *e, size_t limit, const char *what)
{
	herd__buf *b = e->buf;
	size_t start = b->off + e->start, payload;

	if (b->failed != HERD_OK) {
		b->failed = HERD_OK;
		b->len = start;
		return herd__error(HERD_ENOMEM, "%s: out of memory encoding a frame", what);
	}
	payload = b->len - start - 4;
	if (payload > limit) {
		b->len = start;
		return herd__error(HERD_EINVAL, "%s: frame of %zu bytes exceeds the limit of "
				   "%zu bytes", what, payload, limit);
	}
	herd__be32_store(b->data + start, (uint32_t)payload);
	herd__be32_store(b->data + start + 5, e->nfields);
	return HERD_OK;
}

/* ---- the envelope ------------------------------------------------------- */

void herd__wire_begin(const herd__wire_proto *p, herd__frame_enc *e, herd__buf *buf, int type)
{
	herd__frame_begin(e, buf);
	herd__frame_key(e, "v");
	msgpack_pack_uint64(&e->pk, p->version);
	herd__frame_str(e, "t", p->types[type], strlen(p->types[type]));
}

const msgpack_object *herd__wire_field(const msgpack_object *root, const char *name)
{
	int count;   /* at most 1: herd__wire_open refused duplicate keys */

	return herd__msgpack_map_get(root, name, &count);
}

/* Bytes of a key or name in messages: at most 32 of them. */
static int shown(size_t n)
{
	return (int)(n > 32 ? 32 : n);
}

herd_status herd__wire_open(const herd__wire_proto *p, msgpack_unpacked *up, const void *data,
			    size_t len, int *type)
{
	const msgpack_object *root, *v, *t;
	size_t off = 0;
	herd_status st;
	int rc;

	msgpack_unpacked_init(up);
	st = herd__msgpack_check(data, len, &p->limits);
	if (st != HERD_OK) {
		char why[256];

		herd__strlcpy(why, herd_last_error(), sizeof(why));
		return herd__error(st, "%s: %s", p->name, why);
	}
	rc = msgpack_unpack_next(up, data, len, &off);
	if (rc != MSGPACK_UNPACK_SUCCESS || off != len)
		return rc == MSGPACK_UNPACK_NOMEM_ERROR
			? herd__error(HERD_ENOMEM, "%s: out of memory decoding a frame", p->name)
			: herd__error(HERD_EFORMAT, "%s: frame is not one msgpack object", p->name);
	root = &up->data;
	if (root->type != MSGPACK_OBJECT_MAP)
		return herd__error(HERD_EFORMAT, "%s: frame is not a msgpack map", p->name);
	for (uint32_t i = 0; i < root->via.map.size; i++) {
		const msgpack_object *k = &root->via.map.ptr[i].key;

		if (k->type != MSGPACK_OBJECT_STR)
			return herd__error(HERD_EFORMAT, "%s: a key is not a string", p->name);
		for (uint32_t j = 0; j < i; j++) {
			const msgpack_object *o = &root->via.map.ptr[j].key;

			if (o->via.str.size == k->via.str.size &&
			    memcmp(o->via.str.ptr, k->via.str.ptr, k->via.str.size) == 0)
				return herd__error(HERD_EFORMAT, "%s: key \"%.*s\" appears twice",
						   p->name, shown(k->via.str.size), k->via.str.ptr);
		}
	}
	v = herd__wire_field(root, "v");
	t = herd__wire_field(root, "t");
	if (v == NULL || t == NULL)
		return herd__error(HERD_EFORMAT, "%s: frame without \"%s\"", p->name,
				   v == NULL ? "v" : "t");
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return herd__error(HERD_EFORMAT, "%s: \"v\" is not an integer", p->name);
	if (v->via.u64 != p->version)
		return herd__error(HERD_EVERSION, "%s: format version %llu, this herd speaks "
				   "version %u%s%s%s", p->name, (unsigned long long)v->via.u64,
				   p->version, p->version_hint ? " (" : "",
				   p->version_hint ? p->version_hint : "", p->version_hint ? ")" : "");
	if (t->type != MSGPACK_OBJECT_STR && t->type != MSGPACK_OBJECT_BIN)
		return herd__error(HERD_EFORMAT, "%s: \"t\" is not a string", p->name);
	for (int i = 1; i < p->ntypes; i++) {
		size_t n = t->type == MSGPACK_OBJECT_STR ? t->via.str.size : t->via.bin.size;
		const char *s = t->type == MSGPACK_OBJECT_STR ? t->via.str.ptr : t->via.bin.ptr;

		if (strlen(p->types[i]) == n && memcmp(p->types[i], s, n) == 0) {
			*type = i;
			return HERD_OK;
		}
	}
	return herd__error(HERD_EFORMAT, "%s: unknown frame type \"%.*s\"", p->name,
			   shown(t->type == MSGPACK_OBJECT_STR ? t->via.str.size : t->via.bin.size),
			   t->type == MSGPACK_OBJECT_STR ? t->via.str.ptr : t->via.bin.ptr);
}
