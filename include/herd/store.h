/*
 * herd/store.h - the rendezvous key-value store where the ranks of a job
 * meet: they publish addresses and ids under keys, wait for each other's
 * keys, and count arrivals with atomic counters.
 *
 * Two stores sit behind one handle type, herd_store:
 *
 *   - a TCP store: a server (herd_store_server, a thread that any process can
 *     host; the launcher hosts one per job) and clients that connect to it
 *     (herd_store_connect).  Every connection first proves, in both
 *     directions, that it holds the job secret (HERD_JOB_SECRET) by a
 *     challenge-response with HMAC-SHA256; a client that fails, sends
 *     garbage or stays silent is dropped while the server keeps serving the
 *     others.
 *   - a file store on a directory that every rank can see (a shared file
 *     system), for clusters where no port is free (herd_store_open_file).
 *     It has no secret: the directory's permissions are its protection.
 *
 * Keys are NUL-terminated strings of 1 to HERD_STORE_KEY_MAX bytes (the
 * prefix of the handle included).  Values are byte strings of up to
 * HERD_STORE_VALUE_MAX bytes, possibly empty.  herd_store_add keeps its
 * counter as the value's decimal text ("42"), so herd_store_get reads it.
 *
 * Nothing hangs.  Every call has a deadline: the handle's timeout
 * (herd_store_opts.timeout_ms), or for the calls that wait for keys
 * (herd_store_get, herd_store_wait) their timeout_ms argument.  A deadline
 * that expires gives HERD_ETIMEDOUT with a message naming the keys still
 * missing and the store (server address or directory); a get or wait whose
 * server never answers at all (a hung process) gives up 2 s after its
 * deadline, leaving the server time to report the missing keys itself.
 * A server that dies or stops gives HERD_ECLOSED at once, not at the
 * deadline, and every later call on that connection gives HERD_ECLOSED too
 * (there is no reconnection: the store of a job lives as long as the job).
 *
 * Threads: a herd_store handle may be used from several threads at once.
 * TCP requests from different threads share the one connection: each is
 * written whole under a lock and the replies are matched to their requests,
 * so a thread blocked in herd_store_get does not hold up another thread's
 * herd_store_set on the same handle.  herd_store_free must not race with
 * calls on the same handle.
 *
 * Processes: handles and servers do not cross fork().  A child opens its own
 * handles.  A process that runs a server thread (or any thread of its own)
 * and forks should exec in the child right away, as posix_spawn does: the
 * child is a copy taken while other threads may have held locks.
 *
 * The wire format (for other implementations): every frame is a 4-byte
 * big-endian length and a msgpack map with a "v" (format version) key; see
 * sdk/store/proto.h.
 */
#ifndef HERD_STORE_H
#define HERD_STORE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the store's wire format spoken by this library. */
#define HERD_STORE_PROTOCOL_VERSION 1

/* Longest key, in bytes, the handle's prefix included. */
#define HERD_STORE_KEY_MAX 4096

/* Largest value, in bytes. */
#define HERD_STORE_VALUE_MAX (16u * 1024u * 1024u)

/* Most keys one herd_store_wait may name. */
#define HERD_STORE_WAIT_MAX_KEYS 4096

/* Size of the buffer herd_store_secret_generate fills (64 hex digits + NUL). */
#define HERD_STORE_SECRET_BUF 65

/* A handle on a store, TCP or file.  Opaque. */
typedef struct herd_store herd_store;

/* A TCP store server running on its own thread.  Opaque. */
typedef struct herd_store_server herd_store_server;

#define HERD_STORE_SERVER_OPTS_VERSION 1

/* Options of herd_store_server_start.  A zeroed field means its default. */
typedef struct herd_store_server_opts {
	unsigned int version;   /* HERD_STORE_SERVER_OPTS_VERSION */
	/* Address to listen on: a numeric IPv4 or IPv6 address or a host name.
	 * NULL means "127.0.0.1", reachable from this node only; a launcher
	 * whose ranks run on other nodes passes "0.0.0.0" or "::" (every
	 * connection still has to authenticate). */
	const char *host;
	/* TCP port; 0 picks a free one (read it with herd_store_server_port). */
	int port;
	/* The job secret clients must prove they hold.  NULL means the value
	 * of HERD_JOB_SECRET; one of the two must be set and non-empty.
	 * Copied: the caller may free it after the call. */
	const char *secret;
	/* How long a new connection may take to authenticate before it is
	 * dropped; 0 means 5000 ms. */
	int auth_timeout_ms;
} herd_store_server_opts;

#define HERD_STORE_SERVER_OPTS_INIT { HERD_STORE_SERVER_OPTS_VERSION, NULL, 0, NULL, 0 }

/*
 * Starts a store server: binds and listens in the calling thread (so a port
 * in use or an unknown host is reported here, as HERD_EIO or HERD_EINVAL),
 * then serves on a thread of its own until herd_store_server_free.  *out
 * belongs to the caller.  opts may be NULL only when HERD_JOB_SECRET is set.
 * The keys live in the server's memory and vanish with it.
 */
HERD_EXTERN herd_status herd_store_server_start(herd_store_server **out,
						const herd_store_server_opts *opts);

/* The TCP port the server listens on.  Thread-safe. */
HERD_EXTERN int herd_store_server_port(const herd_store_server *server);

/*
 * The address the server listens on, as herd_store_connect takes it:
 * "127.0.0.1:4242", "[::1]:4242".  A wildcard bind gives "0.0.0.0:4242" or
 * "[::]:4242", which a launcher replaces with the node's host name before
 * handing it to ranks on other nodes.  Borrowed from the server; thread-safe.
 */
HERD_EXTERN const char *herd_store_server_address(const herd_store_server *server);

/*
 * Stops the server: its thread ends, every connection is closed (clients
 * waiting in get or wait get HERD_ECLOSED at once), the keys are freed.
 * Blocks until the thread has ended (normally milliseconds).  Accepts NULL.
 */
HERD_EXTERN void herd_store_server_free(herd_store_server *server);

#define HERD_STORE_OPTS_VERSION 1

/* Options of herd_store_connect and herd_store_open_file.  Zero means default. */
typedef struct herd_store_opts {
	unsigned int version;   /* HERD_STORE_OPTS_VERSION */
	/* TCP: the job secret; NULL means HERD_JOB_SECRET.  Copied.  The
	 * file store ignores it. */
	const char *secret;
	/* Deadline of each call, and the default wait of get and wait;
	 * 0 means 300000 ms (five minutes, for ranks that start slowly). */
	int timeout_ms;
	/* TCP: how long herd_store_connect keeps trying (a refused
	 * connection is retried, as the server may not be up yet) and
	 * authenticating; 0 means the same as timeout_ms. */
	int connect_timeout_ms;
} herd_store_opts;

#define HERD_STORE_OPTS_INIT { HERD_STORE_OPTS_VERSION, NULL, 0, 0 }

/*
 * Connects to a store server and authenticates, both ways: the server
 * proves it holds the secret too.  address is "host:port", "[v6addr]:port"
 * or NULL for the value of HERD_STORE.  opts may be NULL.  Blocks up to
 * connect_timeout_ms.  Fails with HERD_EAUTH when the secrets differ (or
 * the server cannot prove it holds the secret), HERD_EVERSION when the
 * server speaks another format version, HERD_ETIMEDOUT when no server
 * answered in time (the message says why the last attempt failed),
 * HERD_EINVAL for a malformed address or a missing secret.  *out (NULL on
 * failure) is freed with herd_store_free.  Thread-safe.
 */
HERD_EXTERN herd_status herd_store_connect(herd_store **out, const char *address,
					   const herd_store_opts *opts);

/*
 * Opens a file store on directory dir, creating it (mode 0700, parents
 * included) when missing.  One file per key, under a name that encodes the
 * key, so no key can name a file outside dir; a set is a write to a
 * temporary file renamed into place; add, compare_set, set and delete
 * serialize on flock(2) of dir/lock (which NFS maps to its own locks);
 * get and wait poll with a backoff of 1 to 100 ms.  opts may be NULL.
 * Thread-safe.  Closing the handle leaves the files; whoever owns the job
 * removes dir when it ends.
 */
HERD_EXTERN herd_status herd_store_open_file(herd_store **out, const char *dir,
					     const herd_store_opts *opts);

/*
 * A handle that puts prefix in front of every key it is given
 * ("job7/comm0/" + "rank3" is the key "job7/comm0/rank3"); a prefix handle
 * of a prefix handle stacks both.  It shares the parent's connection or
 * directory, which lives until the last handle on it is freed: parent and
 * child may be freed in any order.  The child inherits the parent's
 * timeout.  Never blocks; thread-safe.  *out is freed with herd_store_free.
 */
HERD_EXTERN herd_status herd_store_prefix(herd_store **out, herd_store *parent,
					  const char *prefix);

/*
 * Sets key to the len bytes at value (value may be NULL when len is 0),
 * replacing any value, and wakes every get and wait on the key.  Blocks for
 * one round trip, up to the handle's timeout.
 */
HERD_EXTERN herd_status herd_store_set(herd_store *store, const char *key,
				       const void *value, size_t len);

/*
 * Reads key, waiting up to timeout_ms until it exists (0: do not wait;
 * HERD_TIMEOUT_DEFAULT: the handle's timeout; HERD_TIMEOUT_NONE: no
 * deadline).  On success *value
 * receives a copy of the bytes, followed by a NUL that *len does not count,
 * to be freed with herd_free; on failure *value is NULL and *len 0.  A key
 * still missing at the deadline gives HERD_ETIMEDOUT naming the key and the
 * store.  len may be NULL.
 */
HERD_EXTERN herd_status herd_store_get(herd_store *store, const char *key, int timeout_ms,
				       void **value, size_t *len);

/*
 * Adds delta to the counter at key, atomically, and stores the result in
 * *result (may be NULL).  A missing key counts as 0.  A value that is not a
 * decimal integer gives HERD_EFORMAT, an overflow of int64_t HERD_EINVAL;
 * the key is then left unchanged.  Wakes the get and wait on the key.
 */
HERD_EXTERN herd_status herd_store_add(herd_store *store, const char *key, int64_t delta,
				       int64_t *result);

/*
 * Atomically: when key holds exactly the expected bytes, sets it to the
 * desired bytes.  expected == NULL (with expected_len 0) expects the key to
 * be absent, so the call creates it only if nobody has; a non-NULL expected
 * with expected_len 0 expects an empty value.  *swapped (may be NULL) is
 * true when the value was replaced, else false; either way the call
 * succeeds.
 * current (may be NULL) receives the key's value after the call, the
 * desired bytes when swapped (NUL-terminated, freed with herd_free), or
 * NULL when the key is absent; current_len its length (may be NULL).
 */
HERD_EXTERN herd_status herd_store_compare_set(herd_store *store, const char *key,
					       const void *expected, size_t expected_len,
					       const void *desired, size_t desired_len,
					       bool *swapped, void **current, size_t *current_len);

/*
 * Deletes key.  *existed (may be NULL) is true when it was there, else
 * false; a missing key is not an error.
 */
HERD_EXTERN herd_status herd_store_delete(herd_store *store, const char *key, bool *existed);

/*
 * Waits until every one of the nkeys keys exists (1 to
 * HERD_STORE_WAIT_MAX_KEYS of them), up to timeout_ms (0: check once;
 * HERD_TIMEOUT_DEFAULT: the handle's timeout; HERD_TIMEOUT_NONE: no deadline).  HERD_ETIMEDOUT names
 * the keys still missing.
 */
HERD_EXTERN herd_status herd_store_wait(herd_store *store, const char *const *keys,
					size_t nkeys, int timeout_ms);

/* The most keys one herd_store_keys lists. */
#define HERD_STORE_KEYS_MAX 4096

/*
 * The keys of the store that start with prefix ("" or NULL: every key),
 * as the handle names them (a prefix handle's keys without its prefix),
 * in byte order: *keys receives a NULL-terminated array of *n strings, in
 * one block freed with herd_free.  More than HERD_STORE_KEYS_MAX matching
 * keys give HERD_ENORESOURCE (list a longer prefix).  Blocks for one round
 * trip (TCP) or one read of the directory (file store), up to the
 * handle's timeout.  On failure *keys is NULL and *n 0.
 */
HERD_EXTERN herd_status herd_store_keys(herd_store *store, const char *prefix, char ***keys,
					size_t *n);

/*
 * Frees a handle.  The connection (or directory handle) closes when its last
 * handle is freed.  No call may be running on this handle meanwhile.
 * Accepts NULL.
 */
HERD_EXTERN void herd_store_free(herd_store *store);

/*
 * Writes a fresh job secret, 32 random bytes from OpenSSL's generator as 64
 * lower-case hex digits and a NUL, into out.  For launchers that set
 * HERD_JOB_SECRET.  Thread-safe.
 */
HERD_EXTERN herd_status herd_store_secret_generate(char out[HERD_STORE_SECRET_BUF]);

#ifdef __cplusplus
}
#endif

#endif /* HERD_STORE_H */
