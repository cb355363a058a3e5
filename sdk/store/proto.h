/*
 * sdk/store/proto.h - the store's wire format, shared by the server, the
 * client and the fuzz target.  Not part of the public API.
 *
 * A frame is a 4-byte big-endian payload length and a payload that is one
 * msgpack map with string keys.  Every map has "v" (HERD_STORE_PROTOCOL_VERSION)
 * and "t" (the message type); unknown keys are ignored, so fields can be
 * added without a new version.  Payloads are limited to
 * HERD__STORE_FRAME_MAX bytes, and to HERD__STORE_FRAME_MAX_PREAUTH until
 * the connection has authenticated.
 *
 * The conversation:
 *
 *   server: {v, t:"hello", nonce: 32 random bytes Ns}
 *   client: {v, t:"auth", nonce: 32 random bytes Nc,
 *            mac: HMAC-SHA256(secret, Ns || Nc || "herd-store/1 client")}
 *   server: {v, t:"auth_ok", mac: HMAC-SHA256(secret, Nc || Ns || "herd-store/1 server")}
 *        or {v, t:"error", st: HERD_EAUTH, msg} and the connection closes.
 *
 * then requests, each with a client-chosen "id" that its reply repeats
 * (replies to waiting requests come when the wait ends, so they may
 * overtake each other):
 *
 *   set  {id, key, val}              -> reply {id, st}
 *   get  {id, key, ms}               -> reply {id, st, val}   (waits up to ms)
 *   add  {id, key, delta}            -> reply {id, st, n: new value}
 *   cas  {id, key, exp?, val}        -> reply {id, st, n: swapped 0|1, val?: current}
 *                                        (no "exp", or nil: the key must be absent)
 *   del  {id, key}                   -> reply {id, st, n: existed 0|1}
 *   wait {id, keys: [key...], ms}    -> reply {id, st}
 *   keys {id, key: prefix, maybe ""} -> reply {id, st, keys: [key...]}
 *                                        (HERD_ENORESOURCE beyond HERD_STORE_KEYS_MAX)
 *
 * "st" is a herd_status; a failed request's reply carries "msg", and a
 * timed-out get or wait's carries "missing": the keys still absent.  Keys
 * and values travel as msgpack bin (str is accepted too).  A request that
 * breaks these rules is answered with {t:"error", st, msg} and the
 * connection closes.
 */
#ifndef HERD_STORE_PROTO_H
#define HERD_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "herd/store.h"

#include "auth.h"
#include "buf.h"
#include "wire.h"

#define HERD__STORE_FRAME_MAX (64u * 1024u * 1024u)
#define HERD__STORE_FRAME_MAX_PREAUTH 256u
#define HERD__STORE_LABEL_CLIENT "herd-store/1 client"
#define HERD__STORE_LABEL_SERVER "herd-store/1 server"

/*
 * A payload may hold at most this many msgpack objects.  msgpack-c allocates
 * arrays and maps by their declared size before reading their items, so
 * payloads are checked by herd__msgpack_check first: no declared count may
 * exceed what the bytes left could hold, and the total is capped here,
 * which bounds the memory one frame can make the decoder take.
 */
#define HERD__STORE_MAX_OBJECTS (2 * HERD_STORE_WAIT_MAX_KEYS + 64)
#define HERD__STORE_MAX_DEPTH 8

/* Message types, X(enum suffix, name on the wire). */
#define HERD__STORE_TYPES(X) \
	X(HELLO, "hello")    \
	X(AUTH, "auth")      \
	X(AUTH_OK, "auth_ok") \
	X(ERROR, "error")    \
	X(REPLY, "reply")    \
	X(SET, "set")        \
	X(GET, "get")        \
	X(ADD, "add")        \
	X(CAS, "cas")        \
	X(DEL, "del")        \
	X(WAIT, "wait")      \
	X(KEYS, "keys")

typedef enum herd__store_type {
	HERD__STORE_T_UNKNOWN = 0,
#define HERD__STORE_TYPE_ENUM_(name, wire) HERD__STORE_T_##name,
	HERD__STORE_TYPES(HERD__STORE_TYPE_ENUM_)
#undef HERD__STORE_TYPE_ENUM_
	HERD__STORE_T_COUNT
} herd__store_type;

/* The wire name of a type ("set"); "?" for unknown ones. */
const char *herd__store_type_name(herd__store_type type);

/* A borrowed byte string. */
typedef struct herd__store_bytes {
	const uint8_t *p;
	size_t n;
} herd__store_bytes;

/*
 * Looks at the pending bytes of b for a frame: *payload_len is the length
 * of its payload once the whole frame is there (the frame takes 4 more
 * bytes), else SIZE_MAX.  A frame announcing an empty payload or one over
 * limit gives HERD_EFORMAT, as soon as its length prefix is there.
 */
herd_status herd__store_frame_peek(const herd__buf *b, size_t limit, size_t *payload_len);

/* Field bits of herd__store_msg.has. */
enum {
	HERD__STORE_F_ID = 1u << 0,
	HERD__STORE_F_KEY = 1u << 1,
	HERD__STORE_F_KEYS = 1u << 2,
	HERD__STORE_F_VAL = 1u << 3,
	HERD__STORE_F_EXP = 1u << 4,
	HERD__STORE_F_DELTA = 1u << 5,
	HERD__STORE_F_MS = 1u << 6,
	HERD__STORE_F_ST = 1u << 7,
	HERD__STORE_F_N = 1u << 8,
	HERD__STORE_F_MSG = 1u << 9,
	HERD__STORE_F_NONCE = 1u << 10,
	HERD__STORE_F_MAC = 1u << 11,
	HERD__STORE_F_MISSING = 1u << 12
};

/*
 * A decoded message.  Its byte strings point into the payload it was
 * decoded from, which must outlive it; free with herd__store_msg_free.
 */
typedef struct herd__store_msg {
	msgpack_unpacked up;
	herd__store_type type;
	uint32_t has;
	uint64_t id;
	herd__store_bytes key, val, exp, msg, nonce, mac;
	int64_t delta, ms, st, n;
	const msgpack_object *keys;     /* nkeys str/bin objects */
	size_t nkeys;
	const msgpack_object *missing;  /* nmissing str/bin objects */
	size_t nmissing;
} herd__store_msg;

/*
 * Decodes a payload.  HERD_EFORMAT for anything but a map with string keys
 * and fields of the right types (unknown types included), HERD_EVERSION for
 * a "v" other than HERD_STORE_PROTOCOL_VERSION.  On failure m needs no free.
 */
herd_status herd__store_msg_decode(herd__store_msg *m, const void *data, size_t len);

/* Frees what decoding allocated.  Accepts a zeroed message. */
void herd__store_msg_free(herd__store_msg *m);

/* Item i of a checked array of str/bin objects. */
herd__store_bytes herd__store_msg_item(const msgpack_object *items, size_t i);

/*
 * Checks that a decoded message is a well-formed request (a known op with
 * its fields, keys of 1..HERD_STORE_KEY_MAX bytes, values within
 * HERD_STORE_VALUE_MAX, 1..HERD_STORE_WAIT_MAX_KEYS keys for wait).
 * HERD_EFORMAT with the reason.
 */
herd_status herd__store_request_check(const herd__store_msg *m);

/* An encoder of one frame, appended to a buffer (see frame.h). */
typedef herd__frame_enc herd__store_enc;

/* Starts a frame of the given type at the end of buf: writes "v" and "t". */
void herd__store_enc_begin(herd__store_enc *e, herd__buf *buf, herd__store_type type);
void herd__store_enc_uint(herd__store_enc *e, const char *name, uint64_t value);
void herd__store_enc_int(herd__store_enc *e, const char *name, int64_t value);
void herd__store_enc_bin(herd__store_enc *e, const char *name, const void *p, size_t n);
void herd__store_enc_str(herd__store_enc *e, const char *name, const char *s);
/* A field holding an array of n byte strings, added with herd__store_enc_item. */
void herd__store_enc_array(herd__store_enc *e, const char *name, size_t n);
void herd__store_enc_item(herd__store_enc *e, const void *p, size_t n);

/*
 * Finishes the frame: fills in its length and field count.  On failure
 * (out of memory, a payload over HERD__STORE_FRAME_MAX) the frame is taken
 * off the buffer again and the status says why.
 */
herd_status herd__store_enc_end(herd__store_enc *e);

/*
 * Writes key quoted for a message into out: "job/x", with non-printable
 * bytes escaped and long keys cut short with "...".
 */
void herd__store_quote(char *out, size_t cap, const void *key, size_t len);

#endif /* HERD_STORE_PROTO_H */
