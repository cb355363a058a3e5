/*
 * sdk/base/wire.h - the frames and envelope that both of herd's wire
 * protocols use (the store's, sdk/store/proto.h, and the node protocol,
 * sdk/launch): a 4-byte big-endian payload length, then one msgpack map of
 * unique string keys, with "v" the protocol's version and "t" the message
 * type by name.  This file holds the length prefix, the encoder that fills
 * in the map header once the fields are written, and the decoding of the
 * envelope; each protocol decodes its own fields.  Not part of the public
 * API.
 */
#ifndef HERD_BASE_WIRE_H
#define HERD_BASE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "base.h"
#include "buf.h"
#include "msgpack_check.h"

uint32_t herd__be32_load(const uint8_t *p);
void herd__be32_store(uint8_t *p, uint32_t v);

/*
 * Looks at the pending bytes of b for a frame: *payload_len is the length
 * of its payload once the whole frame is there (the frame takes 4 more
 * bytes), else SIZE_MAX.  A frame announcing an empty payload or one over
 * limit gives HERD_EFORMAT as soon as its length prefix is there; what
 * (may be NULL) prefixes the message ("node protocol: frame ...").
 */
herd_status herd__frame_peek(const herd__buf *b, size_t limit, const char *what,
			     size_t *payload_len);

/* An encoder of one frame, appended to a buffer. */
typedef struct herd__frame_enc {
	herd__buf *buf;
	size_t start;        /* offset of the frame's length prefix from buf's off */
	uint32_t nfields;
	msgpack_packer pk;   /* writes with herd__buf_write */
} herd__frame_enc;

/* Starts a frame at the end of buf: the length prefix and the map header. */
void herd__frame_begin(herd__frame_enc *e, herd__buf *buf);

/* Writes a field's key and counts the field; its value is packed next with e->pk. */
void herd__frame_key(herd__frame_enc *e, const char *name);

/* A field with a string value of n bytes. */
void herd__frame_str(herd__frame_enc *e, const char *name, const char *s, size_t n);

/* A field with an integer value. */
void herd__frame_int(herd__frame_enc *e, const char *name, int64_t v);

/* A field with a byte-string (bin) value. */
void herd__frame_bin(herd__frame_enc *e, const char *name, const void *p, size_t n);

/*
 * Finishes the frame: fills in its length and field count.  On failure (out
 * of memory: HERD_ENOMEM; a payload over limit: HERD_EINVAL) the frame is
 * taken off the buffer again and the message, prefixed with what, says why.
 */
herd_status herd__frame_end(herd__frame_enc *e, size_t limit, const char *what);

/* A protocol, as its envelope is checked. */
typedef struct herd__wire_proto {
	const char *name;              /* "node protocol": prefixes every message */
	unsigned int version;          /* the "v" this herd speaks */
	const char *version_hint;      /* said after a version mismatch, or NULL */
	const char *const *types;      /* "t" names by type number; [0] is unknown */
	int ntypes;
	herd__msgpack_limits limits;   /* what a payload may hold */
} herd__wire_proto;

/* Starts a frame of p with its "v" and "t" (type's name) fields. */
void herd__wire_begin(const herd__wire_proto *p, herd__frame_enc *e, herd__buf *buf, int type);

/*
 * Checks a payload (herd__msgpack_check), unpacks it into *up (the caller
 * destroys it, whatever the outcome) and checks the envelope: a map of
 * unique string keys, "v" equal to p->version (HERD_EVERSION otherwise),
 * "t" one of p->types (*type).  HERD_EFORMAT, HERD_ENOMEM, prefixed with
 * p->name.
 */
herd_status herd__wire_open(const herd__wire_proto *p, msgpack_unpacked *up, const void *data,
			    size_t len, int *type);

/* The value of key name in an opened payload's map, NULL when absent. */
const msgpack_object *herd__wire_field(const msgpack_object *root, const char *name);

#endif /* HERD_BASE_WIRE_H */
