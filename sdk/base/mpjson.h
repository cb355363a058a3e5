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
 * herd__mpjson_check walks the raw bytes (sdk/base/msgpack_check.h): every
 * length and element count must be backed by bytes that are really there,
 * nesting is bounded, strings are UTF-8 and nothing follows the object.
 * Memory is then bounded by a constant factor of the input, and the input
 * by the caller's max_len.  Not part of the public API.
 */
#ifndef HERD_BASE_MPJSON_H
#define HERD_BASE_MPJSON_H

#include <stddef.h>

#include <msgpack.h>

#include "base.h"
#include "buf.h"
#include "msgpack_check.h"

/*
 * Deepest nesting of arrays and maps, in either format: as deep as
 * msgpack-c can unpack.  The limit also bounds the recursion of the
 * converters.
 */
#define HERD_MPJSON_MAX_DEPTH HERD__MSGPACK_DEPTH_MAX

/*
 * herd__msgpack_check with mpjson's limits: nesting up to
 * HERD_MPJSON_MAX_DEPTH, strings UTF-8.  HERD_EFORMAT with the byte offset
 * of the problem otherwise.
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

/*
 * The same as one line: no spaces between tokens and no newline at the end
 * (a record of a stream of JSON lines).
 */
herd_status herd__mpjson_to_json_line(const void *data, size_t len, size_t max_len,
				      char **out, size_t *out_len);

#endif /* HERD_BASE_MPJSON_H */
