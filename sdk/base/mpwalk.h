/*
 * sdk/base/mpwalk.h - the walker under the decoder of schema.h, with
 * which herd reads msgpack documents (inventories, checkpoint manifests,
 * the communicator's info record): it keeps the path of the value it reads
 * ("nodes[0].gpus[3].pci.bus_id") and checks each value's type and range,
 * with errors that name the document and the path; and a packer helper.
 * Input is checked by herd__msgpack_check before msgpack-c unpacks it.
 * Not part of the public API.
 */
#ifndef HERD_BASE_MPWALK_H
#define HERD_BASE_MPWALK_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "base.h"

/* Where a reader is: its document ("tests/x.json") and the value's path. */
typedef struct herd__mpwalk {
	const char *origin;
	size_t len;
	char path[160];
} herd__mpwalk;

/* Steps the path into ".key" or "[i]"; each returns the mark that
 * herd__mpwalk_pop goes back to. */
size_t herd__mpwalk_key(herd__mpwalk *w, const char *key);
size_t herd__mpwalk_index(herd__mpwalk *w, size_t i);
void herd__mpwalk_pop(herd__mpwalk *w, size_t mark);

/* Raises code with "<origin>: <path>: <message>" ("top level" for the
 * root). */
herd_status herd__mpwalk_fail(const herd__mpwalk *w, herd_status code, const char *fmt, ...)
	HERD_PRINTF(3, 4);

/* "a map", "an integer", ...: what o is, for messages. */
const char *herd__mpwalk_kind(const msgpack_object *o);

/* The value of key in map, NULL when absent; a key given twice is refused
 * (readers disagree on which one wins). */
herd_status herd__mpwalk_lookup(herd__mpwalk *w, const msgpack_object *map, const char *key,
				const msgpack_object **out);

/* The value at the path is a map of at most max_keys keys; an array of
 * lo..hi items (*n); an integer in lo..hi; a non-negative one in lo..hi;
 * a string of at most max bytes with no NUL inside (*s, *n, not
 * terminated).  HERD_EFORMAT naming what was expected and what came. */
herd_status herd__mpwalk_map(herd__mpwalk *w, const msgpack_object *o, size_t max_keys);
herd_status herd__mpwalk_array(herd__mpwalk *w, const msgpack_object *o, size_t lo, size_t hi,
			       size_t *n);
herd_status herd__mpwalk_int(herd__mpwalk *w, const msgpack_object *o, int64_t lo, int64_t hi,
			     int64_t *out);
herd_status herd__mpwalk_uint(herd__mpwalk *w, const msgpack_object *o, uint64_t lo,
			      uint64_t hi, uint64_t *out);
herd_status herd__mpwalk_str(herd__mpwalk *w, const msgpack_object *o, size_t max,
			     const char **s, size_t *n);

/*
 * The same for the value of a required key of map, its path stepped into
 * while the value is checked: a missing key is an error naming it (a
 * format version, read before the rest of a document).
 */
herd_status herd__mpwalk_get_int(herd__mpwalk *w, const msgpack_object *map, const char *key,
				 int64_t lo, int64_t hi, int64_t *out);

/* Packs s as a msgpack string (NULL as nil). */
void herd__mp_pack_str(msgpack_packer *pk, const char *s);

#endif /* HERD_BASE_MPWALK_H */
