/*
 * sdk/comm/transport/transport.h - what a transport (shared memory, TCP)
 * provides to the point-to-point layer (p2p.c): a link per peer that moves
 * one message at a time in each direction, without ever blocking; and how
 * the core sets the transports up.  A transport that also runs whole
 * collectives itself offers them as a herd__coll_ops (comm_internal.h),
 * as the shared-memory transport does with its direct allreduce (shm/).
 *
 * A message is a header (herd__wire_hdr) followed by `len` payload bytes,
 * on the ordered stream of one direction of one pair.  p2p.c prepares a
 * herd__tx or herd__rx and calls try_send / try_recv until `done`; each
 * call moves what can be moved now and returns.  When nothing moved, p2p.c
 * sleeps until the link may be ready again: on the link's file descriptor
 * (TCP, poll), or on the rank's doorbell futex (shared memory, shm.c's
 * herd__shm_arm / herd__shm_sleep), and on the communicator's wake
 * eventfd, which turns readable once the communicator is broken.
 *
 * Errors: a peer that closed its end gives HERD_EPEER naming the rank and
 * host; a header that does not match the receiver's call gives whatever
 * rx->check returns (HERD_EMISMATCH).  Links are used by one thread at a
 * time (the one running the communicator's current call), except
 * `shutdown`, which any thread may call (abort).
 */
#ifndef HERD_COMM_TRANSPORT_H
#define HERD_COMM_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm_internal.h"

/* "HRDM" in memory on a little-endian host; a peer of the other byte order
 * fails the magic check instead of being misread. */
#define HERD__WIRE_MAGIC 0x4d445248u
#define HERD__WIRE_VERSION 1

/*
 * The header of every message, in host byte order (the ranks of a job share
 * one).  fp fields as in herd__fp; cseq numbers the sender's collective
 * calls (p2p calls do not advance it), so that skipped or extra collective
 * calls are caught even when point-to-point calls made the plain call
 * numbers of two ranks differ.
 */
typedef struct herd__wire_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t kind;
	uint8_t dtype;
	uint8_t redop;
	int32_t root;
	uint32_t reserved;
	uint64_t seq;
	uint64_t cseq;
	uint64_t count;
	uint64_t len;         /* payload bytes */
} herd__wire_hdr;

_Static_assert(sizeof(herd__wire_hdr) == 48, "the wire header is 48 bytes");

typedef struct herd__link herd__link;
typedef struct herd__rx herd__rx;

/* One outgoing message.  `off` counts header and payload bytes moved. */
typedef struct herd__tx {
	herd__wire_hdr hdr;
	const uint8_t *buf;
	size_t len;
	size_t off;
	bool done;
} herd__tx;

/*
 * One incoming message.  The transport fills hdr, then calls check (which
 * compares it with the receiver's call and sets elsize), then hands the
 * payload to the sink in pieces of whole elements with herd__rx_deliver.
 */
struct herd__rx {
	int peer;
	herd__wire_hdr hdr;
	size_t hdr_got;
	bool hdr_ok;          /* set by check when the header matches */
	size_t len;           /* payload bytes expected */
	herd__sink sink;
	size_t elsize;        /* 1 when copying, the element size when reducing */
	size_t off;           /* payload bytes delivered to the sink */
	bool done;
	herd_status (*check)(herd__rx *rx, void *ctx);
	void *ctx;
};

/* Delivers n payload bytes at rx->off to the sink (copy or reduce) and
 * advances rx->off.  n is a multiple of rx->elsize.  In p2p.c. */
void herd__rx_deliver(herd__rx *rx, const void *data, size_t n);

typedef struct herd__link_ops {
	const char *name;
	/* Moves what can be moved now; *progressed when some bytes moved. */
	herd_status (*try_send)(herd__link *link, herd__tx *tx, bool *progressed);
	herd_status (*try_recv)(herd__link *link, herd__rx *rx, bool *progressed);
	/* The descriptor to poll for readiness, or -1 when readiness is
	 * signalled on the rank's doorbell futex (shm.c). */
	int (*fd)(const herd__link *link);
	/* Unblocks the link for good (abort); thread-safe, idempotent. */
	void (*shutdown)(herd__link *link);
	/* Frees the link.  Accepts a link that was shut down. */
	void (*close)(herd__link *link);
} herd__link_ops;

/* The head of every link. */
struct herd__link {
	const herd__link_ops *ops;
	herd_comm *comm;
	int peer;
};

/* ---- setting the transports up, for the core (core.c) --------------------- */

/*
 * tcp.c: the listening socket and the addresses peers may reach it at
 * (addrs, "a.b.c.d:port,...").  It binds to one address, not to every
 * interface: the interfaces HERD_SOCKET_IFNAME names (every one of them
 * when it names several), else the one this rank reaches the job's store
 * from.  When that route is loopback (or the store has no connection),
 * *fd stays -1 and addrs empty: the rank publishes no address with its
 * info record, and herd__tcp_listen_late decides once the peers are known.
 */
herd_status herd__tcp_listen(herd_comm *comm, int *fd, char *addrs, size_t cap);

/*
 * tcp.c: the deferred choice, after the info records: 127.0.0.1 when every
 * peer is on this host; else the address this host routes from toward the
 * first remote peer's published address; else (no peer published one)
 * every interface, likely addresses first.
 */
herd_status herd__tcp_listen_late(herd_comm *comm, int *fd, char *addrs, size_t cap);

/*
 * tcp.c: checks the len bytes at in as the 64-byte HELLO a connection
 * opens with: for communicator id (HERD__COMM_ID_LEN bytes) and this rank
 * of size; from an expected peer and kind (*from >= 0: an outbound
 * connection) or from any higher rank (*from < 0: inbound, then *from and
 * *kind are set).  Copies its nonce (HERD__AUTH_NONCE_LEN bytes) when true.
 */
bool herd__tcp_hello_check(const void *in, size_t len, const uint8_t *id, int rank, int size,
			   int *from, int *kind, uint8_t *nonce);

/* tcp.c: connects and authenticates the control connection to every peer,
 * and a TCP data link to every peer whose link is not shared memory. */
herd_status herd__tcp_mesh(herd_comm *comm, int listen_fd, int64_t deadline);

/* shm/shm.c: this rank's inbox (rings from its local peers), before the mesh. */
herd_status herd__shm_create(herd_comm *comm);

/* shm/shm.c: maps the peers' inboxes, makes the links, and unlinks this rank's
 * segment once every local peer has mapped it.  After the mesh. */
herd_status herd__shm_attach(herd_comm *comm, int64_t deadline);

void herd__shm_destroy(herd_comm *comm);

/* shm/shm.c: sleeping on the rank's doorbell futex, where shared-memory
 * links (and the direct collectives) signal readiness: arm (then check
 * again), sleep, disarm; ring_self wakes this rank's own sleeper. */
uint32_t herd__shm_arm(herd_comm *comm);
void herd__shm_sleep(herd_comm *comm, uint32_t seen, int timeout_ms);
void herd__shm_disarm(herd_comm *comm);
void herd__shm_ring_self(herd_comm *comm);

/* shm/direct.c: makes the shared-memory transport the communicator's
 * collective transport (place.coll) when every rank is on this host, every
 * pair talks shared memory and every rank can read every other's memory;
 * else leaves place.coll as it is.  After herd__shm_attach. */
herd_status herd__shm_coll_init(herd_comm *comm);

#endif /* HERD_COMM_TRANSPORT_H */
