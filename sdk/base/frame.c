/*
 * sdk/base/frame.c - length-prefixed msgpack frames (see frame.h).
 */
#include <string.h>

#include "frame.h"

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
