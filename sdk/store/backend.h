/*
 * sdk/store/backend.h - what a store implementation (TCP client, file
 * store) provides behind herd_store.  Not part of the public API.
 *
 * herd_store (store.c) checks arguments, adds the handle's prefix to keys
 * and resolves timeouts; a backend gets full keys, valid arguments and a
 * timeout in milliseconds (>= 0), and raises errors whose messages name the
 * store (its address or directory) and the keys.  A backend is shared by a
 * handle and its prefix handles, and destroyed when the last one is freed.
 */
#ifndef HERD_STORE_BACKEND_H
#define HERD_STORE_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "herd/store.h"
#include "proto.h"

typedef struct herd__store_backend herd__store_backend;

/* What a listing of keys collects: n malloc'd NUL-terminated keys. */
typedef struct herd__store_keylist {
	char **v;
	size_t n, cap;
} herd__store_keylist;

/* Adds a copy of the len bytes at key; HERD_ENOMEM, or HERD_ENORESOURCE
 * past HERD_STORE_KEYS_MAX (the message names prefix and where). */
herd_status herd__store_keylist_add(herd__store_keylist *list, const void *key, size_t len,
				    const char *prefix, const char *where);

typedef struct herd__store_ops {
	herd_status (*set)(herd__store_backend *b, const char *key, const void *value,
			   size_t len, int timeout_ms);
	/* *value: malloc'd, NUL-terminated. */
	herd_status (*get)(herd__store_backend *b, const char *key, int timeout_ms,
			   void **value, size_t *len);
	herd_status (*add)(herd__store_backend *b, const char *key, int64_t delta,
			   int64_t *result, int timeout_ms);
	/* expected NULL: expect the key absent.  *current as for get, NULL if absent. */
	herd_status (*compare_set)(herd__store_backend *b, const char *key,
				   const void *expected, size_t expected_len,
				   const void *desired, size_t desired_len, bool *swapped,
				   void **current, size_t *current_len, int timeout_ms);
	herd_status (*del)(herd__store_backend *b, const char *key, bool *existed,
			   int timeout_ms);
	herd_status (*wait)(herd__store_backend *b, const char *const *keys, size_t nkeys,
			    int timeout_ms);
	/* The full keys that start with prefix (at most HERD_STORE_KEYS_MAX,
	 * else HERD_ENORESOURCE), each added to list, unordered. */
	herd_status (*keys)(herd__store_backend *b, const char *prefix, herd__store_keylist *list,
			    int timeout_ms);
	/* Optional: the local address of the connection to the store (numeric,
	 * no port), for a backend that has one. */
	herd_status (*local_addr)(herd__store_backend *b, char *addr, size_t cap);
	void (*destroy)(herd__store_backend *b);
} herd__store_ops;

/* The head of every backend struct. */
struct herd__store_backend {
	const herd__store_ops *ops;
	atomic_int refs;
	int timeout_ms;   /* the handle's timeout, resolved */
};

/*
 * The address this process reaches the store from (the source address of
 * its TCP connection: the interface that faces the store's host), into
 * addr (cap bytes).  HERD_EUNAVAIL for a store without a connection (a
 * file store).  For the communicator's choice of interface (comm/core.c).
 */
herd_status herd__store_local_addr(const herd_store *s, char *addr, size_t cap);

/* Resolves the options shared by both stores: version check, defaults. */
herd_status herd__store_opts_resolve(const herd_store_opts *opts, herd_store_opts *out);

/* Connects a TCP store backend (store/client.c); opts already resolved. */
herd_status herd__store_tcp_connect(herd__store_backend **out, const char *address,
				    const herd_store_opts *opts);

/* Opens a file store backend (store/file.c); opts already resolved. */
herd_status herd__store_file_open(herd__store_backend **out, const char *dir,
				  const herd_store_opts *opts);

/*
 * Raises HERD_ETIMEDOUT for a get or wait: "<where>: key "a" not set within
 * 500 ms" or "<where>: 2 of 3 keys not set within 500 ms: "a", "b"".
 * shown[0..nshown) are the first missing keys, nmissing counts them all.
 */
herd_status herd__store_missing_error(const char *where, int timeout_ms, size_t nkeys,
				      size_t nmissing, const herd__store_bytes *shown,
				      size_t nshown);

/* How many connections a server holds now (for tests).  Thread-safe. */
size_t herd__store_server_connections(herd_store_server *server);

/*
 * The counter arithmetic of herd_store_add, shared by the server and the
 * file store: cur (NULL when the key is absent, counting as 0) must be a
 * decimal int64 ("-12"); the sum, written as decimal text into
 * text[HERD__STORE_COUNTER_LEN], goes to *sum.  HERD_EFORMAT or HERD_EINVAL
 * (overflow) with a message quoting the value.
 */
#define HERD__STORE_COUNTER_LEN 24
herd_status herd__store_counter_add(const void *cur, size_t cur_len, int64_t delta,
				    int64_t *sum, char text[HERD__STORE_COUNTER_LEN]);

#endif /* HERD_STORE_BACKEND_H */
