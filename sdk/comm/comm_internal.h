/*
 * sdk/comm/comm_internal.h - the contract between the communicator core
 * (bootstrap, transports, deadlines, failures, requests: core.c, shm.c,
 * tcp.c, ...) and the collective algorithms (ops.c, algo_*.c, reduce.c).
 *
 * The algorithms see the communicator only through this header: they
 * describe each call as a herd__op, and move data with herd__p2p_exchange,
 * which progresses any number of sends and receives to different peers at
 * once over whatever transport joins each pair.
 */
#ifndef HERD_COMM_INTERNAL_H
#define HERD_COMM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "herd/comm.h"
#include "base.h"

/* What each call is, as checked between ranks.  Kinds are stable on the wire. */
typedef enum herd__op_kind {
	HERD__OP_ALLREDUCE = 1,
	HERD__OP_REDUCE,
	HERD__OP_BROADCAST,
	HERD__OP_ALLGATHER,
	HERD__OP_REDUCE_SCATTER,
	HERD__OP_ALLTOALL,
	HERD__OP_GATHER,
	HERD__OP_SCATTER,
	HERD__OP_SEND,
	HERD__OP_RECV,
	HERD__OP_SENDRECV,
	HERD__OP_BARRIER,
	HERD__OP_SPLIT,
	HERD__OP_FINALIZE
} herd__op_kind;

/* "allreduce", ... */
const char *herd__op_name(herd__op_kind kind);

/*
 * The fingerprint of a call, carried in the header of every message it
 * sends, so that a receiver compares it with its own at no extra round
 * trip.  Point-to-point calls compare only what both ends know (dtype and
 * byte count), collectives compare all fields.
 */
typedef struct herd__fp {
	uint64_t seq;      /* the call's number on this communicator, from 1 */
	uint8_t kind;      /* herd__op_kind */
	uint8_t dtype;     /* herd_dtype */
	uint8_t redop;     /* herd_redop, 0 when none */
	int32_t root;      /* -1 when none */
	uint64_t count;    /* elements, as passed by the caller */
} herd__fp;

/* Formats a fingerprint: "#12 allreduce float32 sum count=1000". */
void herd__fp_format(const herd__fp *fp, char *buf, size_t cap);

/* One call, with its arguments, as run by the core (inline or on the
 * background thread). */
typedef struct herd__op herd__op;
typedef herd_status (*herd__op_fn)(herd_comm *comm, const herd__op *op);

struct herd__op {
	herd__op_fn run;      /* the algorithm */
	herd__fp fp;          /* seq is filled in by the core */
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	size_t recvcount;     /* sendrecv: elements to receive */
	int peer;             /* send/recv/sendrecv: destination (or source for recv) */
	int peer2;            /* sendrecv: source */
};

/*
 * Runs op on the calling thread after every pending nonblocking call has
 * completed, assigning its sequence number and deadline, and records its
 * completion (for the timeout report).  A broken communicator returns its
 * error at once.
 */
herd_status herd__comm_run(herd_comm *comm, herd__op *op);

/* Queues op for the background thread and returns a request for it. */
herd_status herd__comm_submit(herd_comm *comm, herd__op *op, herd_request **req);

/* The algorithm to use ("auto", "ring", "rd"), as configured. */
const char *herd__comm_algo(const herd_comm *comm);

/* Whether the pair (this rank, peer) talks through shared memory: same
 * host and neither side asked for TCP.  Both sides decide alike (core.c). */
bool herd__comm_uses_shm(const herd_comm *comm, int peer);

/* Whether this rank talks TCP with some peer: some pair of the
 * communicator does, and every rank sees it alike.  Inline, over the
 * calls above, so that test_comm_algos's stand-in world has it too. */
static inline bool herd__comm_any_tcp(const herd_comm *comm)
{
	for (int j = 0; j < herd_comm_size(comm); j++)
		if (j != herd_comm_rank(comm) && !herd__comm_uses_shm(comm, j))
			return true;
	return false;
}

/* How many ranks of the communicator are on this host, this one included. */
int herd__comm_nlocal(const herd_comm *comm);

/*
 * Where received bytes go: dst[i] = bytes as received (copy), or, when
 * reduce_with is set, dst[i] = reduce_with[i] OP received[i] element-wise,
 * dst may equal reduce_with.  Lengths are in bytes and, for reductions, a
 * multiple of the element size; transports hand the sink whole elements.
 */
typedef struct herd__sink {
	void *dst;
	const void *reduce_with;
	herd_dtype dtype;
	herd_redop op;         /* SUM, PROD, MIN or MAX (AVG is SUM then a scale) */
} herd__sink;

/* One send (buf, len to peer) or one receive (len from peer into sink). */
typedef struct herd__xfer {
	int peer;
	const void *buf;       /* send only */
	size_t len;            /* bytes */
	herd__sink sink;       /* receive only */
} herd__xfer;

/*
 * Performs all sends and receives concurrently and returns when all are
 * done.  Each is one message on the pair's ordered stream; its header
 * carries the current call's fingerprint and length, and a receiver whose
 * expectations differ fails with HERD_EMISMATCH naming both.  A message to
 * or from the caller itself is copied locally.  Fails with HERD_ETIMEDOUT
 * at the call's deadline, HERD_EPEER when a peer dies, HERD_EABORTED on
 * abort.
 */
herd_status herd__p2p_exchange(herd_comm *comm, const herd__xfer *sends, size_t nsends,
			       const herd__xfer *recvs, size_t nrecvs);

/*
 * Direct allreduce (direct.c): where every rank of the communicator is on
 * this host and can read the others' memory, ranks read each other's
 * buffers instead of passing messages.  herd__direct_allreduce_small takes
 * at most HERD__DIRECT_SMALL bytes and reduces them in rank order (every
 * rank gets the same bits); herd__direct_allreduce takes any size, each
 * rank reducing a slice of the vector which all then receive.  Both handle
 * float16/bfloat16 widening and AVG, in may equal out, and they fail as
 * herd__p2p_exchange does.
 */
#define HERD__DIRECT_SMALL 1024u
bool herd__direct_usable(const herd_comm *comm);
herd_status herd__direct_allreduce_small(herd_comm *comm, const void *in, void *out,
					 size_t count, herd_dtype dtype, herd_redop op);
herd_status herd__direct_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				   herd_dtype dtype, herd_redop op);

/* Reduction kernels (reduce.c).  dst[i] = a[i] OP b[i] for count elements;
 * dst may alias a or b.  AVG is not accepted here. */
void herd__reduce(void *dst, const void *a, const void *b, size_t count, herd_dtype dtype,
		  herd_redop op);

/* buf[i] /= n, for AVG after a SUM. */
void herd__reduce_scale(void *buf, size_t count, herd_dtype dtype, int n);

/* float16 / bfloat16 <-> float32, round to nearest even. */
void herd__half_to_float(float *dst, const uint16_t *src, size_t count, herd_dtype dtype);
void herd__float_to_half(uint16_t *dst, const float *src, size_t count, herd_dtype dtype);

/* memcpy whose stores bypass the cache (reduce.c), and the fence that
 * orders them before later stores. */
void herd__copy_stream(void *dst, const void *src, size_t n);
void herd__stream_fence(void);

#endif /* HERD_COMM_INTERNAL_H */
