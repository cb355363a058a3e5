/*
 * sdk/base/msgpack_check.h - the check every msgpack input passes before
 * msgpack-c unpacks it.  Not part of the public API.
 *
 * msgpack-c trusts the bytes it unpacks: it allocates a claimed array or
 * map before reading its items, so a 5-byte header could ask for 64 GiB.
 * herd__msgpack_check walks the raw bytes first: every length and element
 * count must be backed by bytes that are really there, nesting and the
 * number of values are bounded, and nothing follows the object.  Memory
 * is then bounded by a constant factor of the input.
 *
 * (The file is not called msgpack.h: with sdk/base on the include path,
 * that name would hide msgpack-c's own <msgpack.h>.)
 */
#ifndef HERD_BASE_MSGPACK_CHECK_H
#define HERD_BASE_MSGPACK_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <msgpack.h>

#include "base.h"

/*
 * Deepest nesting of arrays and maps that can be allowed: msgpack-c's
 * unpacker has a fixed stack of 32 containers, so more could not be
 * unpacked anyway.
 */
#define HERD__MSGPACK_DEPTH_MAX 32

/* What herd__msgpack_check allows.  A zeroed field means its default. */
typedef struct herd__msgpack_limits {
	/* Containers nested at most this deep (1: a flat array or map).
	 * 0, or more than HERD__MSGPACK_DEPTH_MAX: HERD__MSGPACK_DEPTH_MAX. */
	size_t max_depth;
	/* Values in all, keys and containers counted; 0: no limit. */
	size_t max_objects;
	/* Strings must be well-formed UTF-8 (for JSON); default: any bytes. */
	bool require_utf8;
} herd__msgpack_limits;

/*
 * Checks that data holds exactly one msgpack object that is safe to unpack
 * and within limits (NULL: all defaults).  HERD_EFORMAT otherwise, with a
 * message that starts "msgpack: " and gives the byte offset of the problem.
 * Thread-safe; reads nothing beyond data[0..len).
 */
herd_status herd__msgpack_check(const void *data, size_t len, const herd__msgpack_limits *limits);

/* Whether s[0..len) is well-formed UTF-8 (no overlongs, no surrogates). */
bool herd__msgpack_utf8_valid(const char *s, size_t len);

/*
 * The value of the string key in map (a MSGPACK_OBJECT_MAP), NULL when
 * absent.  *count is how often the key appears (0, 1, or 2 for twice or
 * more), so that a strict decoder can refuse duplicates: readers disagree
 * on which one wins.
 */
const msgpack_object *herd__msgpack_map_get(const msgpack_object *map, const char *key,
					    int *count);

#endif /* HERD_BASE_MSGPACK_CHECK_H */
