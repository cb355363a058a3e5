/*
 * sdk/base/msgpack_check.c - the walk over raw msgpack bytes that makes
 * unpacking them with msgpack-c safe (see msgpack_check.h).
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "msgpack_check.h"

bool herd__msgpack_utf8_valid(const char *s, size_t len)
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
	bool str;           /* the payload is a string, which may have to be UTF-8 */
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
 * Reads the header of the value at p (avail bytes readable, avail > 0).
 * The ranges and sizes are those of the msgpack specification's format
 * table.
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

herd_status herd__msgpack_check(const void *data, size_t len, const herd__msgpack_limits *limits)
{
	static const herd__msgpack_limits defaults = { 0 };
	const uint8_t *bytes = data;
	/* Values still due in each open container; level 0 is the top value. */
	uint64_t due[HERD__MSGPACK_DEPTH_MAX + 1];
	size_t max_depth, depth = 0, off = 0, objects = 0, start;
	mp_head h;

	if (limits == NULL)
		limits = &defaults;
	max_depth = limits->max_depth;
	if (max_depth == 0 || max_depth > HERD__MSGPACK_DEPTH_MAX)
		max_depth = HERD__MSGPACK_DEPTH_MAX;
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
		if (limits->max_objects != 0 && ++objects > limits->max_objects)
			return herd__error(HERD_EFORMAT, "msgpack: more than %zu values, the value at "
					   "offset %zu is one too many", limits->max_objects, off);
		start = off;
		HERD_CHECK(mp_head_read(bytes + off, len - off, off, &h));
		if (h.payload > len - off - h.hdr)
			return herd__error(HERD_EFORMAT, "msgpack: truncated: the %s at offset %zu "
					   "claims %" PRIu64 " bytes, %zu remain", h.name, off,
					   h.payload, len - off - h.hdr);
		if (h.str && limits->require_utf8 &&
		    !herd__msgpack_utf8_valid((const char *)bytes + off + h.hdr, (size_t)h.payload))
			return herd__error(HERD_EFORMAT, "msgpack: the string at offset %zu is "
					   "not valid UTF-8", off);
		if (h.container && depth >= max_depth)
			return herd__error(HERD_EFORMAT, "msgpack: containers nested deeper than "
					   "%zu at offset %zu", max_depth, off);
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

const msgpack_object *herd__msgpack_map_get(const msgpack_object *map, const char *key,
					    int *count)
{
	const msgpack_object *found = NULL;
	size_t n = strlen(key);

	*count = 0;
	for (uint32_t i = 0; i < map->via.map.size && *count < 2; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;

		if (k->type != MSGPACK_OBJECT_STR || k->via.str.size != n ||
		    memcmp(k->via.str.ptr, key, n) != 0)
			continue;
		if (++*count == 1)
			found = &map->via.map.ptr[i].val;
	}
	return found;
}
