/*
 * sdk/comm/transport/transport.h - what a transport (shared memory, TCP,
 * NCCL) provides: to the point-to-point layer (p2p.c), a link per peer
 * that moves one message at a time in each direction, without ever
 * blocking; to the core (core.c), an entry of the transport table
 * (herd__transports[], transport.c), through which it sets the transports
 * up, picks each pair's, sleeps on a doorbell, gathers device calls in
 * groups and frees them, naming none.  A transport that also runs whole
 * collectives itself offers them as a herd__coll_ops (comm_internal.h),
 * as the shared-memory transport does with its direct allreduce (shm/).
 *
 * A message is a header (herd__wire_hdr) followed by `len` payload bytes,
 * on the ordered stream of one direction of one pair.  p2p.c prepares a
 * herd__tx or herd__rx and calls try_send / try_recv until `done`; each
 * call moves what can be moved now and returns.  When nothing moved, p2p.c
 * sleeps until the link may be ready again: on the link's file descriptor
 * (TCP, poll), or on the rank's doorbell (comm->bell: the shared-memory
 * transport's futex), and on the communicator's wake eventfd, which turns
 * readable once the communicator is broken.
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
	 * signalled on the rank's doorbell (its transport's bell). */
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

/* ---- the transports, for the core (core.c) --------------------------------- */

/*
 * The steps of init that the transports take part in, in this order; the
 * core runs each step on every transport of the table that has it, in the
 * table's order, before the next step, and only when the communicator has
 * more than one rank.
 */
typedef enum herd__setup_step {
	/* Before this rank's info record goes to the store: what it publishes
	 * there (tcp: the listening socket and its addresses, peer.addrs). */
	HERD__SETUP_LISTEN = 0,
	/* After every info record, each pair's transport known: what could be
	 * chosen only then (tcp: where a rank that published no address
	 * listens, through the store). */
	HERD__SETUP_ADDRS,
	/* Before any connection: what the peers will open (shm: the inbox). */
	HERD__SETUP_CREATE,
	/* The control connection to every peer, which the tcp transport makes
	 * whatever joins the pair, and the links that need nothing else. */
	HERD__SETUP_CONNECT,
	/* After the control connections: the links that need them (shm: maps
	 * the peers' inboxes, MAPPED frames). */
	HERD__SETUP_ATTACH,
	/* Every link made: the collectives the transport runs itself, as
	 * place.coll, when it can run them for this communicator and no
	 * earlier transport of the table has offered its own. */
	HERD__SETUP_COLL,
	HERD__SETUP_STEPS
} herd__setup_step;

/*
 * How a rank sleeps until a link without a descriptor (fd -1) may be ready:
 * arm (then look at the links once more), sleep until rung or timeout_ms,
 * disarm; ring wakes this rank's own sleeper (a failure, a peer's goodbye).
 * Only the thread that runs the calls arms and sleeps; ring is
 * thread-safe.
 */
typedef struct herd__bell herd__bell;

typedef struct herd__doorbell {
	uint32_t (*arm)(herd_comm *comm);
	void (*sleep)(herd_comm *comm, uint32_t seen, int timeout_ms);
	void (*disarm)(herd_comm *comm);
	void (*ring)(herd_comm *comm);
	/* The bell of rank `rank` (this rank's own, or a local peer's), where
	 * each notes the CPU it waits on (sdk/base/wait.h); NULL if none. */
	herd__bell *(*of)(const herd_comm *comm, int rank);
} herd__doorbell;

/*
 * A transport, as the core sees it (NCCL's ncclTransport).  Any member but
 * name may be NULL (false): the transport takes no part in that.
 */
typedef struct herd__transport {
	const char *name;
	/* Whether it can join the pair (this rank, peer): both ranks decide
	 * alike, from the info records and options.  A pair takes the first
	 * transport of the table that can (NCCL's canConnect); a transport
	 * without one joins no pair (nccl: device calls only). */
	bool (*can_connect)(const herd_comm *comm, int peer);
	/* The data links of a pair it joins (tcp: HERD_SOCKET_STREAMS); 1
	 * when NULL.  Both ranks decide alike. */
	int (*streams)(const herd_comm *comm, int peer);
	/* Its links are sockets: a pair it joins makes place.any_tcp. */
	bool sockets;
	/* Its part in each step of init (herd__setup_step). */
	herd_status (*setup[HERD__SETUP_STEPS])(herd_comm *comm, int64_t deadline);
	/* Where its links signal readiness when their fd is -1: the
	 * communicator's doorbell (comm->bell) once it joins a pair. */
	const herd__doorbell *bell;
	/* Whether op is one of its calls, which a group gathers
	 * (herd_comm_group_start ... _end), and the run of such a group:
	 * op->sendbuf holds op->count herd__ops. */
	bool (*groups)(const herd__op *op);
	herd__op_fn run_group;
	/* Frees what it keeps for the communicator; after a failed init too.
	 * The core frees the transports in the reverse of the table's order,
	 * after the links. */
	void (*free)(herd_comm *comm);
} herd__transport;

/* The transports, in the order of preference, NULL-terminated
 * (transport.c).  Adding one (ibverbs) is a folder and a row there. */
extern const herd__transport *const herd__transports[];

/* The entries of the table: shm/shm.c, tcp.c, nccl.c. */
extern const herd__transport herd__shm_transport;
extern const herd__transport herd__tcp_transport;
extern const herd__transport herd__nccl_transport;

/*
 * tcp.c, for its fuzz test: checks the len bytes at in as the 64-byte
 * HELLO a connection opens with: for communicator id (HERD__COMM_ID_LEN
 * bytes) and this rank of size; from an expected peer and kind (*from >=
 * 0: an outbound connection) or from any higher rank (*from < 0: inbound,
 * then *from and *kind are set).  Copies its nonce (HERD__AUTH_NONCE_LEN
 * bytes) when true.
 */
bool herd__tcp_hello_check(const void *in, size_t len, const uint8_t *id, int rank, int size,
			   int *from, int *kind, uint8_t *nonce);

#endif /* HERD_COMM_TRANSPORT_H */
