/*
 * sdk/ckpt/peer.h - the checkpoint tier in other nodes' memory: the
 * holder that keeps the copies (one `herd ckpt hold` per node, started by
 * the launcher for the whole job, so that the copies outlive the ranks of
 * a failed run), and the ranks' side of its protocol.  Private to
 * sdk/ckpt.
 *
 * A holder listens on TCP and prints "hold PORT TOKEN" once on stdout;
 * the launcher gives the ranks every node's holder as
 * HERD_CKPT_HOLDERS="host:port/token,..." in node order ("-" for a node
 * without one).  A connection proves the token as every herd connection
 * proves the job secret (base/auth.h), then asks:
 *
 *   put       a save's key, a saved rank, a size, then that many raw
 *             bytes: the rank's data file of the step, byte for byte as
 *             on disk;
 *   manifest  a save's key, then the step's manifest (as on disk): the
 *             save is committed in memory once its manifest is there;
 *   list      the saves held: for each, its key, whether its manifest is
 *             there, and the saved ranks whose data is there whole, with
 *             their sizes;
 *   fetch     the manifest of a save, or bytes [at, at + len) of a saved
 *             rank's data.
 *
 * A save's key is the checkpoint handle's namespace (a hash of its
 * directory: two handles of one job keep apart), the step, and an id
 * rank 0 draws at random for each save: the copies of a step saved again
 * (after a restart) never mix with the earlier save's.
 *
 * Per namespace, the holder keeps the newest `steps` (1 or 2) committed
 * saves and the saves arriving, in at most `budget` bytes: a put drops
 * the saves a restarted run left behind (every other save of its step or
 * a later one: the job went back; and saves never committed), then older
 * committed saves while over the budget, never the one committed last; a
 * put that would still go over the budget is refused, with both figures.
 * A commit drops the committed saves beyond `steps`.  What a restore reads is
 * verified against the manifest's checksums, as a read from storage is.
 */
#ifndef HERD_CKPT_PEER_H
#define HERD_CKPT_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

#define HERD__PEER_TOKEN_LEN 32       /* hex digits */
#define HERD__PEER_HOST_MAX 255

/* One node's holder, as HERD_CKPT_HOLDERS names it; port 0: none. */
typedef struct herd__peer_addr {
	char host[HERD__PEER_HOST_MAX + 1];
	int port;
	char token[HERD__PEER_TOKEN_LEN + 1];
} herd__peer_addr;

/*
 * Parses a holders' list ("host:port/token" or "-", comma-separated, in
 * node order) into *out (freed with free) and *n.  HERD_EINVAL naming the
 * entry that is malformed.
 */
herd_status herd__peer_parse(const char *list, herd__peer_addr **out, size_t *n);

/* A connection to a holder, authenticated; what messages name it by. */
typedef struct herd__peer_conn {
	int fd;
	char name[HERD__PEER_HOST_MAX + 32];   /* "the checkpoint holder on HOST" */
} herd__peer_conn;

herd_status herd__peer_connect(herd__peer_conn *c, const herd__peer_addr *a, int64_t deadline);
void herd__peer_close(herd__peer_conn *c);

/* A save, as the holders know it. */
typedef struct herd__peer_key {
	uint64_t ns;               /* the handle's: a hash of its directory */
	int64_t step;
	uint64_t id;               /* rank 0's random draw for this save */
} herd__peer_key;

/* A put: the header now, the size bytes with herd__peer_put_bytes, then
 * herd__peer_put_end waits for the holder's word that it holds them.
 * Each call's deadline is its own: a stream stalls, it does not age. */
herd_status herd__peer_put_begin(herd__peer_conn *c, const herd__peer_key *k, int rank,
				 uint64_t size, int64_t deadline);
herd_status herd__peer_put_bytes(herd__peer_conn *c, const void *p, size_t n, int64_t deadline);
herd_status herd__peer_put_end(herd__peer_conn *c, int64_t deadline);

/* The manifest of a save (its bytes as on disk): the save is committed. */
herd_status herd__peer_put_manifest(herd__peer_conn *c, const herd__peer_key *k,
				    const void *data, size_t len, int64_t deadline);

/* One save a holder holds. */
typedef struct herd__peer_step {
	herd__peer_key key;
	bool manifest;
	size_t nfiles;             /* saved ranks held whole */
	int32_t *ranks;            /* their numbers */
	uint64_t *sizes;           /* their sizes */
} herd__peer_step;

void herd__peer_steps_free(herd__peer_step *s, size_t n);

/* The saves the holder holds; *out freed with herd__peer_steps_free. */
herd_status herd__peer_list(herd__peer_conn *c, herd__peer_step **out, size_t *n,
			    int64_t deadline);

/* The manifest of a save: *data (malloc'ed) and *len. */
herd_status herd__peer_fetch_manifest(herd__peer_conn *c, const herd__peer_key *k, char **data,
				      size_t *len, int64_t deadline);

/* Bytes [at, at + len) of saved rank's data of a save into dst. */
herd_status herd__peer_fetch(herd__peer_conn *c, const herd__peer_key *k, int rank, uint64_t at,
			     uint64_t len, void *dst, int64_t deadline);

/* ---- the holder ----------------------------------------------------------- */

typedef struct herd__peer_hold_opts {
	const char *bind;          /* address to listen on; NULL: every interface */
	uint64_t budget;           /* most bytes held */
	int steps;                 /* newest steps kept: 1 or 2 */
} herd__peer_hold_opts;

/*
 * Runs a holder: listens, writes "hold PORT TOKEN\n" to out_fd, serves
 * until in_fd reaches its end (the launcher closed the channel), then
 * shuts every connection down and returns once their threads are done, or
 * after 5 s without them (the process is ending).  HERD_OK at that end;
 * an error when it cannot listen.
 */
herd_status herd__peer_hold(int in_fd, int out_fd, const herd__peer_hold_opts *o);

#endif /* HERD_CKPT_PEER_H */
