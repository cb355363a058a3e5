/*
 * sdk/comm/comm_internal.h - the contract between the communicator core
 * (lifecycle, call numbering, deadlines, failures, progress: core.c,
 * monitor.c, p2p.c; its transports under transport/) and the collective
 * algorithms (algo/), with ops.c describing each call and tune.c choosing
 * its algorithm between them.
 *
 * The algorithms see the communicator only through this header: they
 * read each call as a herd__op, and move data with herd__p2p_exchange,
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
	HERD__OP_FINALIZE,
	HERD__OP_GROUP,        /* device calls run as one NCCL group, a collective among them */
	HERD__OP_GROUP_P2P     /* ... of sends and receives only */
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
	int device;           /* the buffers' GPU, or -1 for host memory */
	uint8_t algo;         /* run's number (herd__tune_pick), for the flight recorder */
	bool queued;          /* stream-ordered: queued on stream, not waited for */
	void *stream;         /* the caller's cudaStream_t (NULL: the legacy default) */
};

/*
 * Runs op on the calling thread after every pending nonblocking call has
 * completed, assigning its sequence number and deadline, and records its
 * completion (for the timeout report).  A broken communicator returns its
 * error at once.
 */
herd_status herd__comm_run(herd_comm *comm, herd__op *op);

/* Runs a call on device memory (op->device) through NCCL
 * (transport/nccl.c): the run of every such call.  herd__nccl_check says
 * first, without running anything, whether it can: NCCL loaded, the
 * datatype carried, the communicator's GPU, point to point after the
 * first device collective. */
herd_status herd__nccl_check(const herd_comm *comm, const herd__op *op);
herd_status herd__nccl_run(herd_comm *comm, const herd__op *op);

/* Queues op for the background thread and returns a request for it. */
herd_status herd__comm_submit(herd_comm *comm, herd__op *op, herd_comm_request **req);

/*
 * A transport that runs whole collectives among every rank of a
 * communicator itself, rather than passing messages for an algorithm (the
 * shared-memory transport's direct single-copy allreduce; a GPU
 * transport's collectives).  tune.c offers its entries to the calls that
 * fit; the core tells it of every call as the call begins.
 */
typedef struct herd__coll_ops {
	const char *name;
	/* Publishes the call this rank enters, before its algorithm runs, so
	 * that a peer waiting inside the transport sees a mismatch instead of
	 * waiting.  Called by the core on the thread that runs the call. */
	void (*enter)(herd_comm *comm, const herd__op *op, uint64_t cseq);
	/* Allreduce of at most small_max bytes, and of any size. */
	herd__op_fn allreduce_small;
	size_t small_max;
	herd__op_fn allreduce;
	/* Frees what the transport keeps for the communicator. */
	void (*free)(herd_comm *comm);
} herd__coll_ops;

/* The class of an algorithm, which the "algo" option may force. */
typedef enum herd__algo_class {
	HERD__CLASS_ANY = 0,        /* the only algorithm of its call; "auto" as a force */
	HERD__CLASS_LATENCY,        /* "rd": recursive doubling, Bruck, binomial trees */
	HERD__CLASS_BANDWIDTH,      /* "ring": ring, pipelined chain, pairwise steps */
	HERD__CLASS_TUNED,          /* "auto" only: one-shot, halving-doubling, a transport's */
	HERD__CLASS_HIER            /* "hier" as a force: the two-level algorithms at every
				     * size where the hosts allow, "auto" elsewhere */
} herd__algo_class;

/*
 * What the choice of an algorithm depends on besides the call: fixed at
 * init and alike on every rank (each rank sees every pair the same way).
 */
typedef struct herd__place {
	int force;                  /* herd__algo_class: ANY ("auto"), LATENCY or BANDWIDTH */
	bool one_host;              /* every rank is on this host */
	bool any_tcp;               /* some pair of the communicator talks TCP */
	const herd__coll_ops *coll; /* a transport that runs collectives, or NULL */
	/* The hosts, for the two-level algorithms: numbered in the order of
	 * their lowest ranks; host h's ranks, in rank order, are
	 * host_ranks[host_start[h] .. host_start[h + 1]). */
	int nhosts;
	int max_local;              /* the most ranks on one host */
	const int *host_of;         /* [size] */
	const int *host_start;      /* [nhosts + 1] */
	const int *host_ranks;      /* [size] */
	/* The links between hosts, for tune.c's cost model (nhosts > 1): the
	 * one-way time of a small message and the time per byte, in seconds,
	 * rank 0's figures on every rank (links.c). */
	double net_lat_s, net_byte_s;
	int net_from;               /* herd__net_from */
	char net_if[16];            /* HERD__NET_INTERFACE: the interface's name */
} herd__place;

/* Where herd__place's link figures come from. */
typedef enum herd__net_from {
	HERD__NET_NONE = 0,         /* one host: no link between hosts */
	HERD__NET_GIVEN,            /* HERD_NET_LINK=LATENCY_US,GBIT_PER_S on rank 0 */
	HERD__NET_MEASURED,         /* HERD_NET_LINK=measure: measured at init */
	HERD__NET_INTERFACE,        /* the speed of rank 0's interface toward the next host */
	HERD__NET_ASSUMED           /* that interface says no speed: 10 Gbit/s assumed */
} herd__net_from;

/* Where place's link figures come from, in words ("HERD_NET_LINK",
 * "measured at init", "the speed of eth0", ...), in buf.  tune.c. */
const char *herd__tune_links_from(const herd__place *pl, char *buf, size_t cap);

/* The communicator's placement (core.c; a test's stand-in has its own). */
const herd__place *herd__comm_place(const herd_comm *comm);

/*
 * The algorithm for op, from the one table of tune.c: operation x size x
 * placement.  Every rank of a call picks the same.  Its number, as the
 * flight recorder keeps it, into *algo: 1 + its row in its operation's
 * table, or HERD__ALGO_LOCAL.
 */
herd__op_fn herd__tune_pick(const herd_comm *comm, const herd__op *op, uint8_t *algo);

/* The numbers of an algorithm besides its row's: none known, the call
 * that needs no peer, a device call (NCCL). */
enum { HERD__ALGO_NONE = 0, HERD__ALGO_LOCAL = 254, HERD__ALGO_NCCL = 255 };

/* The name of algorithm number algo of operation kind ("ring",
 * "recursive doubling", "NCCL"); NULL when it names none. */
const char *herd__tune_algo_name(int kind, uint8_t algo);

/*
 * Which algorithm herd__tune_pick takes for op and why, in buf: the call's
 * size, the placement, the force, the algorithm's name, and each row
 * passed over with its reason ("16777216 bytes (sized as 16777216) on 4
 * ranks, 2 hosts with at most 2 ranks, algo auto: two-level; passed over
 * one-shot: below 1025 bytes, ...").
 */
void herd__tune_explain(const herd_comm *comm, const herd__op *op, char *buf, size_t cap);

/* From this many bytes, "auto" allreduce takes a collective transport's
 * large allreduce (HERD__TUNE_COLL_MIN).  Tests lower it to take that path
 * with little data; nothing else writes it. */
extern size_t herd__tune_coll_min;

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

/* Block b of n elements split as evenly as possible into p blocks: the
 * first n % p blocks have one element more. */
static inline void herd__split_even(size_t n, int p, int b, size_t *off, size_t *len)
{
	size_t base = n / (size_t)p, rem = n % (size_t)p, ub = (size_t)b;

	*off = ub * base + (ub < rem ? ub : rem);
	*len = base + (ub < rem ? 1 : 0);
}

/* Reduction kernels (reduce.c).  dst[i] = a[i] OP b[i] for count elements;
 * dst may alias a or b.  AVG is not accepted here. */
void herd__reduce(void *dst, const void *a, const void *b, size_t count, herd_dtype dtype,
		  herd_redop op);

/* buf[i] /= n, for AVG after a SUM. */
void herd__reduce_scale(void *buf, size_t count, herd_dtype dtype, int n);

/* The narrow floating types, which reduce through float32: float16,
 * bfloat16, float8_e4m3, float8_e5m2. */
static inline bool herd__dtype_narrow(herd_dtype dtype)
{
	return dtype == HERD_FLOAT16 || dtype == HERD_BFLOAT16 || dtype == HERD_FLOAT8_E4M3 ||
	       dtype == HERD_FLOAT8_E5M2;
}

/* Whether a reduction of dtype by op runs in float32 and rounds once at the
 * end: SUM, PROD and AVG of a narrow type (MIN and MAX pick an operand,
 * exactly, in the type itself). */
static inline bool herd__dtype_widens(herd_dtype dtype, herd_redop op)
{
	return herd__dtype_narrow(dtype) && (op == HERD_SUM || op == HERD_PROD || op == HERD_AVG);
}

/* A narrow type <-> float32, count elements; into the narrow type round to
 * nearest even (herd/dtype.h says how each overflows). */
void herd__narrow_to_float(float *dst, const void *src, size_t count, herd_dtype dtype);
void herd__float_to_narrow(void *dst, const float *src, size_t count, herd_dtype dtype);

/* memcpy whose stores bypass the cache (reduce.c), and the fence that
 * orders them before later stores. */
void herd__copy_stream(void *dst, const void *src, size_t n);
void herd__stream_fence(void);

#endif /* HERD_COMM_INTERNAL_H */
