/*
 * sdk/base/schema.h - msgpack documents described once.  Not part of the
 * public API.
 *
 * A document's C structs each get a table of fields: the key, the kind of
 * value, where it lives in the struct (offsetof), and what a valid value
 * is.  One encoder writes any table as a msgpack map, keys in table order
 * and integers in their shortest form, so equal values give equal bytes;
 * one strict decoder reads it back through the walker of mpwalk.h, whose
 * messages name the document and the path ("nodes[0].gpus[3].pci.bus_id:
 * expected a PCI bus id ...").  The decoder ignores keys it does not know
 * (a newer writer may add some within a format version), refuses a key
 * given twice, checks each known value's type and range, and refuses a
 * missing required key ("nodes[2].gpus[0]: missing required key
 * \"uuid\"").
 *
 * A table entry is written with the macros below inside braces, and the
 * rarer options follow as designated initializers:
 *
 *     static const herd__schema_field gpu_fields[] = {
 *             { HERD__SCHEMA_CHARS("uuid", herd_gpu, uuid) },
 *             { HERD__SCHEMA_INT("cc_major", herd_gpu, cc_major, 0, 255) },
 *             { HERD__SCHEMA_ARRAY("nvlinks", herd_gpu, nvlinks, nnvlinks, 0, 4096),
 *               .sub = &nvlink_schema },
 *             { HERD__SCHEMA_INT("ecc", herd_gpu, ecc, -1, 1), .flags = HERD__SCHEMA_OPTIONAL,
 *               .def = -1 },
 *     };
 *
 * What one field cannot say (a range that depends on another field, a rule
 * across fields) is said by the limits and check callbacks.
 */
#ifndef HERD_BASE_SCHEMA_H
#define HERD_BASE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "base.h"
#include "mpwalk.h"

typedef struct herd__schema herd__schema;
typedef struct herd__schema_field herd__schema_field;

/* The kinds of value. */
typedef enum herd__schema_type {
	HERD__SCHEMA_T_INT,     /* a signed C integer of .size bytes: an integer in min..max */
	HERD__SCHEMA_T_UINT,    /* an unsigned one: a non-negative integer in min..max */
	HERD__SCHEMA_T_BOOL,    /* bool */
	HERD__SCHEMA_T_DOUBLE,  /* double: a float (an integer is taken too) */
	HERD__SCHEMA_T_CHARS,   /* char[.size]: a string of at most .size - 1 bytes */
	HERD__SCHEMA_T_STR,     /* char *, owned: a string of at most .max bytes */
	HERD__SCHEMA_T_BYTES,   /* void *, owned, and its length: binary data of at most .max bytes */
	HERD__SCHEMA_T_ENUM,    /* a C enum: one of the strings of .names */
	HERD__SCHEMA_T_VALUE,   /* a value with a codec of its own (.codec) */
	HERD__SCHEMA_T_CONST,   /* written as .min, or as .str; not read (the caller checks it) */
	HERD__SCHEMA_T_STRUCT,  /* a nested struct (.sub), in place */
	HERD__SCHEMA_T_ARRAY,   /* items (.sub structs or .item scalars), count in a count field */
} herd__schema_type;

/* Flags of a field. */
enum {
	HERD__SCHEMA_OPTIONAL = 1u << 0,   /* may be absent: then .def (integers), NULL, 0 items */
	HERD__SCHEMA_NULLABLE = 1u << 1,   /* strings: nil is NULL, and NULL is written as nil */
	HERD__SCHEMA_OMIT_EMPTY = 1u << 2, /* arrays: not written when there are no items */
};

/* What a string must look like beyond its length. */
typedef struct herd__schema_form {
	const char *what;                       /* "a PCI bus id like ..." */
	bool (*valid)(const char *s, size_t n);
} herd__schema_form;

/* A name of an enum's value; tables end with { NULL, 0 }. */
typedef struct herd__schema_name {
	const char *name;
	int value;
} herd__schema_name;

/* A value kind of its own (a checksum as hex digits, a type by name). */
typedef struct herd__schema_codec {
	void (*pack)(msgpack_packer *pk, const void *value);
	/* The walker's path is at the value; errors through herd__mpwalk_fail. */
	herd_status (*unpack)(herd__mpwalk *w, const msgpack_object *o, void *value);
} herd__schema_codec;

/* A decoding in progress: what the callbacks see. */
typedef struct herd__schema_dec {
	herd__mpwalk walk;   /* the document's name and the current path */
	unsigned version;    /* the document's format version (for fields' since) */
	void *ctx;           /* the caller's: the root being built, say */
} herd__schema_dec;

/*
 * A check after a value is decoded: a field's (obj is the struct holding
 * the field, the path is at the field) or a struct's (after all its
 * fields; the path is at the struct).  parent is the struct that holds obj
 * (NULL at the root).
 */
typedef herd_status (*herd__schema_check_fn)(herd__schema_dec *d, void *obj, void *parent);

/* A range that depends on what is already decoded: integers' values,
 * arrays' counts.  *min and *max come in as the field's own. */
typedef void (*herd__schema_limits_fn)(const herd__schema_dec *d, const void *obj,
				       const void *parent, int64_t *min, uint64_t *max);

struct herd__schema_field {
	const char *key;               /* NULL for an array's item */
	herd__schema_type type;
	unsigned flags;
	unsigned since;                /* the format version the key appeared in: older
					* documents may lack it */
	size_t offset;                 /* of the value in its struct */
	size_t size;                   /* of the C value (of one item for an item) */
	int64_t min;                   /* integers: the range; arrays: the count's */
	uint64_t max;                  /* ... strings and bytes: most bytes */
	int64_t def;                   /* an absent optional integer */
	const char *str;               /* a string CONST */
	const herd__schema_form *form; /* strings: NULL for any */
	const herd__schema_name *names;       /* ENUM */
	const herd__schema_codec *codec;      /* VALUE */
	const herd__schema *sub;              /* STRUCT, and ARRAY of structs */
	const herd__schema_field *item;       /* ARRAY of scalars: one item, offset 0 */
	size_t count_offset, count_size;      /* ARRAY and BYTES: the count field */
	size_t inline_cap;             /* ARRAY: items held in place (0: a heap block) */
	herd__schema_limits_fn limits;
	herd__schema_check_fn check;
};

/* The table of one struct. */
struct herd__schema {
	size_t size;                   /* sizeof the struct */
	const herd__schema_field *fields;
	size_t nfields;
	size_t max_keys;               /* a map of at most this many keys */
	herd__schema_check_fn check;   /* after all fields, or NULL */
};

#define HERD__SCHEMA(T, fields_, max_keys_, check_) \
	{ sizeof(T), fields_, sizeof(fields_) / sizeof((fields_)[0]), max_keys_, check_ }

/* ---- table entries: member m of struct T under key ---- */

#define HERD__SCHEMA_AT_(T, m) .offset = offsetof(T, m), .size = sizeof(((T *)0)->m)
#define HERD__SCHEMA_COUNT_(T, n) \
	.count_offset = offsetof(T, n), .count_size = sizeof(((T *)0)->n)

#define HERD__SCHEMA_INT(key_, T, m, lo, hi) \
	.key = (key_), .type = HERD__SCHEMA_T_INT, HERD__SCHEMA_AT_(T, m), .min = (lo), \
	.max = (uint64_t)(hi)
#define HERD__SCHEMA_UINT(key_, T, m, lo, hi) \
	.key = (key_), .type = HERD__SCHEMA_T_UINT, HERD__SCHEMA_AT_(T, m), .min = (lo), \
	.max = (hi)
#define HERD__SCHEMA_BOOL(key_, T, m) \
	.key = (key_), .type = HERD__SCHEMA_T_BOOL, HERD__SCHEMA_AT_(T, m)
#define HERD__SCHEMA_DOUBLE(key_, T, m) \
	.key = (key_), .type = HERD__SCHEMA_T_DOUBLE, HERD__SCHEMA_AT_(T, m)
#define HERD__SCHEMA_CHARS(key_, T, m) \
	.key = (key_), .type = HERD__SCHEMA_T_CHARS, HERD__SCHEMA_AT_(T, m)
#define HERD__SCHEMA_STR(key_, T, m, most) \
	.key = (key_), .type = HERD__SCHEMA_T_STR, HERD__SCHEMA_AT_(T, m), .max = (most)
#define HERD__SCHEMA_BYTES(key_, T, m, n, most) \
	.key = (key_), .type = HERD__SCHEMA_T_BYTES, HERD__SCHEMA_AT_(T, m), \
	HERD__SCHEMA_COUNT_(T, n), .max = (most)
#define HERD__SCHEMA_ENUM(key_, T, m, names_) \
	.key = (key_), .type = HERD__SCHEMA_T_ENUM, HERD__SCHEMA_AT_(T, m), .names = (names_)
#define HERD__SCHEMA_VALUE(key_, T, m, codec_) \
	.key = (key_), .type = HERD__SCHEMA_T_VALUE, HERD__SCHEMA_AT_(T, m), .codec = (codec_)
#define HERD__SCHEMA_CONST_INT(key_, v) .key = (key_), .type = HERD__SCHEMA_T_CONST, .min = (v)
#define HERD__SCHEMA_CONST_STR(key_, s) .key = (key_), .type = HERD__SCHEMA_T_CONST, .str = (s)
#define HERD__SCHEMA_STRUCT(key_, T, m, sub_) \
	.key = (key_), .type = HERD__SCHEMA_T_STRUCT, HERD__SCHEMA_AT_(T, m), .sub = (sub_)
/* m: a pointer to the items (a heap block the struct owns); n: their count.
 * Then .sub (items are structs) or .item (scalars). */
#define HERD__SCHEMA_ARRAY(key_, T, m, n, lo, hi) \
	.key = (key_), .type = HERD__SCHEMA_T_ARRAY, HERD__SCHEMA_AT_(T, m), \
	HERD__SCHEMA_COUNT_(T, n), .min = (lo), .max = (hi)
/* m: an array of items in the struct, at most as many as it holds. */
#define HERD__SCHEMA_INLINE_ARRAY(key_, T, m, n, lo) \
	.key = (key_), .type = HERD__SCHEMA_T_ARRAY, HERD__SCHEMA_AT_(T, m), \
	HERD__SCHEMA_COUNT_(T, n), .min = (lo), \
	.max = sizeof(((T *)0)->m) / sizeof(((T *)0)->m[0]), \
	.inline_cap = sizeof(((T *)0)->m) / sizeof(((T *)0)->m[0])

/* An array's item of C type ctype:
 * { HERD__SCHEMA_ITEM(HERD__SCHEMA_T_STR, char *), .max = 4096 } */
#define HERD__SCHEMA_ITEM(type_, ctype) .type = (type_), .size = sizeof(ctype)

/* ---- the codec ---- */

/*
 * Packs obj as a map of s's fields in table order (an OMIT_EMPTY array
 * without items left out); the map's header counts extra more entries,
 * which the caller packs after.  Out of memory is the packer's to report
 * (herd__buf keeps its first failure).
 */
void herd__schema_pack(msgpack_packer *pk, const herd__schema *s, const void *obj, size_t extra);

/*
 * Decodes the map o into obj (zeroed by the caller) as s says, calling the
 * checks of fields and structs as it goes; d->walk's path is o's.  What it
 * allocated is stored in obj as soon as it is, so that after a failure
 * herd__schema_free (or the owner's own free) releases it.  HERD_EFORMAT
 * with the path, HERD_ENOMEM.
 */
herd_status herd__schema_unpack(herd__schema_dec *d, const herd__schema *s,
				const msgpack_object *o, void *obj);

/*
 * The root map's format version: its "v" key, read first, since a newer
 * format may change anything else.  Sets d->version; HERD_EFORMAT when
 * "v" is missing ("(the <what> format version): not <doc>", doc being "an
 * inventory", say) or not an integer >= 1, HERD_EVERSION when newer than
 * newest.
 */
herd_status herd__schema_version(herd__schema_dec *d, const msgpack_object *root,
				 const char *what, const char *doc, unsigned newest);

/* Frees what herd__schema_unpack allocated in obj (not obj) and zeroes those
 * fields. */
void herd__schema_free(const herd__schema *s, void *obj);

/*
 * For checks: fails with "<origin>: <path>.<key>: <message>", the path
 * stepped into key for the message (key NULL: the path as it is).
 */
herd_status herd__schema_fail(herd__schema_dec *d, const char *key, const char *fmt, ...)
	HERD_PRINTF(3, 4);

#endif /* HERD_BASE_SCHEMA_H */
