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
 *   put       step, saved rank, size, then that many raw bytes: the rank's
 *             data file of the step, byte for byte as on disk;
 *   manifest  step, then the step's manifest (as on disk): the step is
 *             committed in memory once its manifest is there;
 *   list      the steps held: for each, whether its manifest is there, and
 *             the saved ranks whose data is there whole, with their sizes;
 *   fetch     the manifest of a step, or bytes [at, at + len) of a saved
 *             rank's data.
 *
 * The holder keeps the newest `steps` steps (1 or 2) and at most `budget`
 * bytes: a put of a newer step drops the oldest steps, except the newest
 * step with a manifest; a put that would still go over the budget is
 * refused, with both figures.  What a restore reads is verified against
 * the manifest's checksums, as a read from storage is.
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

/* A put: the header now, the size bytes with herd__peer_put_bytes, then
 * herd__peer_put_end waits for the holder's word that it holds them. */
herd_status herd__peer_put_begin(herd__peer_conn *c, int64_t step, int rank, uint64_t size,
				 int64_t deadline);
herd_status herd__peer_put_bytes(herd__peer_conn *c, const void *p, size_t n, int64_t deadline);
herd_status herd__peer_put_end(herd__peer_conn *c, int64_t deadline);

/* The manifest of step (its bytes as on disk). */
herd_status herd__peer_put_manifest(herd__peer_conn *c, int64_t step, const void *data,
				    size_t len, int64_t deadline);

/* One step a holder holds. */
typedef struct herd__peer_step {
	int64_t step;
	bool manifest;
	size_t nfiles;             /* saved ranks held whole */
	int32_t *ranks;            /* their numbers */
	uint64_t *sizes;           /* their sizes */
} herd__peer_step;

void herd__peer_steps_free(herd__peer_step *s, size_t n);

/* The steps the holder holds, oldest first; *out freed with herd__peer_steps_free. */
herd_status herd__peer_list(herd__peer_conn *c, herd__peer_step **out, size_t *n,
			    int64_t deadline);

/* The manifest of step: *data (malloc'ed) and *len. */
herd_status herd__peer_fetch_manifest(herd__peer_conn *c, int64_t step, char **data,
				      size_t *len, int64_t deadline);

/* Bytes [at, at + len) of saved rank's data of step into dst. */
herd_status herd__peer_fetch(herd__peer_conn *c, int64_t step, int rank, uint64_t at,
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
 * closes every connection and returns.  HERD_OK at that end; an error when
 * it cannot listen.
 */
herd_status herd__peer_hold(int in_fd, int out_fd, const herd__peer_hold_opts *o);

#endif /* HERD_CKPT_PEER_H */
