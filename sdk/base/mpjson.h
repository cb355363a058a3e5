/*
 * sdk/base/mpjson.h - msgpack bytes <-> JSON text, for any data herd
 * serializes (inventories, checkpoint manifests, the shell's --json).
 *
 * msgpack is herd's one serialization; JSON is its face for people and
 * fixtures.  The mapping is the obvious one: maps <-> objects (keys in the
 * msgpack order), arrays, UTF-8 strings, integers, reals, true/false/null.
 * What has no JSON form is an error, never a silent change: binary and
 * extension values, map keys that are not strings, integers above
 * INT64_MAX (jansson holds int64), non-finite floats.
 *
 * Hostile input is expected.  Before msgpack-c unpacks anything,
 * herd__mpjson_check walks the raw bytes: every length and element count
 * must be backed by bytes that are really there (msgpack-c allocates a
 * claimed array before reading it, so a 5-byte header could otherwise ask
 * for 64 GiB), nesting is bounded, strings are UTF-8 and nothing follows
 * the object.  Memory is then bounded by a constant factor of the input,
 * and the input by the caller's max_len.  Not part of the public API.
 */
#ifndef HERD_BASE_MPJSON_H
#define HERD_BASE_MPJSON_H

#include <stdbool.h>
#include <stddef.h>

#include <msgpack.h>

#include "base.h"

/*
 * Deepest nesting of arrays and maps, in either format.  msgpack-c's
 * unpacker has a fixed stack of 32 containers, so more could not be
 * unpacked anyway; the limit also bounds the recursion of the converters.
 */
#define HERD_MPJSON_MAX_DEPTH 32

/*
 * A growable output buffer for msgpack_packer (and the JSON dumper) that
 * remembers a failure instead of making every pack call checked: write
 * with herd__mpjson_buf_write, then collect the bytes, or the one error,
 * with herd__mpjson_buf_take.
 */
typedef struct herd__mpjson_buf {
	char *data;
	size_t len, cap;
	size_t max;          /* refuse to grow beyond this many bytes */
	herd_status failed;  /* HERD_OK, HERD_ENOMEM, or HERD_EFORMAT (too big) */
} herd__mpjson_buf;

/* An empty buffer that will hold at most max bytes. */
void herd__mpjson_buf_init(herd__mpjson_buf *buf, size_t max);

/* A msgpack_packer_write callback appending to the herd__mpjson_buf data. */
int herd__mpjson_buf_write(void *data, const char *bytes, size_t len);

/*
 * Hands the bytes to the caller (*out, NUL-terminated, freed with free;
 * *len without the NUL), or raises the failure recorded while writing,
 * naming what was being written.  Either way the buffer is empty after.
 */
herd_status herd__mpjson_buf_take(herd__mpjson_buf *buf, const char *what,
				  char **out, size_t *len);

/* Whether s[0..len) is well-formed UTF-8 (no overlongs, no surrogates). */
bool herd__mpjson_utf8_valid(const char *s, size_t len);

/*
 * Checks that data holds exactly one msgpack object that is safe to unpack
 * (see above).  HERD_EFORMAT with the byte offset of the problem otherwise.
 */
herd_status herd__mpjson_check(const void *data, size_t len);

/*
 * herd__mpjson_check, then msgpack-c's unpack into *out, which the caller
 * has initialized with msgpack_unpacked_init and destroys with
 * msgpack_unpacked_destroy whatever this returns.  Strings in the object
 * point into data, which must outlive it.
 */
herd_status herd__mpjson_unpack(msgpack_unpacked *out, const void *data, size_t len);

/*
 * JSON text (any value at the top) to msgpack bytes.  Refuses input or
 * output longer than max_len, duplicate object keys and trailing text.
 * *out is freed with free.
 */
herd_status herd__mpjson_to_msgpack(const char *json, size_t json_len, size_t max_len,
				    char **out, size_t *out_len);

/*
 * msgpack bytes (exactly one object) to JSON text indented by 2 spaces,
 * keys in msgpack order, ending in a newline and NUL-terminated (the NUL
 * not counted in *out_len).  Refuses input or output longer than max_len.
 * *out is freed with free.
 */
herd_status herd__mpjson_to_json(const void *data, size_t len, size_t max_len,
				 char **out, size_t *out_len);

#endif /* HERD_BASE_MPJSON_H */
