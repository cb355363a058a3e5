/*
 * sdk/comm/algo/algo.h - the collective algorithms, and the helpers they
 * share (util.c).  Private to sdk/comm/algo and to tune.c, which picks
 * one per call.
 *
 * Every algorithm is a herd__op_fn: it reads its arguments from the
 * herd__op that ops.c validated, moves data only with herd__p2p_exchange
 * and learns who it is only from herd_comm_rank, herd_comm_size and
 * herd__comm_place.  So an algorithm runs the same over shared memory, TCP
 * or a test's stand-in.  Each runs a call of two ranks or more and one
 * element or more: tune.c gives the others to herd__algo_local.
 */
#ifndef HERD_COMM_ALGO_H
#define HERD_COMM_ALGO_H

#include <stdbool.h>
#include <stddef.h>

#include "comm/comm_internal.h"

/*
 * The bandwidth algorithms work through the data in slices whose blocks
 * (what one step sends to one peer) are at most this many bytes, so that a
 * slice stays in cache between its steps and a step moves enough to hide
 * its synchronization.
 */
#define HERD__ALGO_BLOCK (1024u * 1024u)

/*
 * The ring allreduce's block when some pair of the communicator talks TCP:
 * every byte then goes through two kernel copies, which cost least when
 * what they copy is still in cache.  With 4 ranks on 2 cores (all on
 * loopback), 256 KiB blocks took about 10% less CPU per 128 MiB allreduce
 * than 1 MiB ones (128 KiB ones took more again: more steps to wait on).
 */
#define HERD__ALGO_BLOCK_TCP (256u * 1024u)

/* The block size in force: HERD__ALGO_BLOCK.  Tests lower it to run many
 * slices through little data; nothing else writes it. */
extern size_t herd__algo_block_bytes;

/* Elements of a given size per block, at least one. */
static inline size_t herd__algo_block_elems(size_t elsize)
{
	size_t n = herd__algo_block_bytes / elsize;

	return n > 0 ? n : 1;
}

/* The most ranks the one-shot allreduce runs on (its transfers are on the
 * stack). */
#define HERD__ONESHOT_RANKS 16

/* The choices of tune.c's table, by operation; each name says how. */
herd_status herd__algo_local(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allreduce_oneshot(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allreduce_rd(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allreduce_hd(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allreduce_ring(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allreduce_hier(herd_comm *comm, const herd__op *op);
herd_status herd__algo_reduce_scatter_hier(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allgather_hier(herd_comm *comm, const herd__op *op);
herd_status herd__algo_reduce_binomial(herd_comm *comm, const herd__op *op);
herd_status herd__algo_reduce_ring(herd_comm *comm, const herd__op *op);
herd_status herd__algo_broadcast_binomial(herd_comm *comm, const herd__op *op);
herd_status herd__algo_broadcast_chain(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allgather_bruck(herd_comm *comm, const herd__op *op);
herd_status herd__algo_allgather_ring(herd_comm *comm, const herd__op *op);
herd_status herd__algo_reduce_scatter_rd(herd_comm *comm, const herd__op *op);
herd_status herd__algo_reduce_scatter_ring(herd_comm *comm, const herd__op *op);
herd_status herd__algo_alltoall_oneshot(herd_comm *comm, const herd__op *op);
herd_status herd__algo_alltoall_pairwise(herd_comm *comm, const herd__op *op);
herd_status herd__algo_gather(herd_comm *comm, const herd__op *op);
herd_status herd__algo_scatter(herd_comm *comm, const herd__op *op);
herd_status herd__algo_send(herd_comm *comm, const herd__op *op);
herd_status herd__algo_recv(herd_comm *comm, const herd__op *op);
herd_status herd__algo_sendrecv(herd_comm *comm, const herd__op *op);
herd_status herd__algo_barrier(herd_comm *comm, const herd__op *op);

/* ---- helpers (util.c) ----------------------------------------------------- */

/* (a mod p) for a possibly negative a. */
static inline int herd__algo_mod(int a, int p)
{
	int m = a % p;

	return m < 0 ? m + p : m;
}

/*
 * One exchange of at most one send (slen bytes of sbuf to `to`) and one
 * receive (rlen bytes from `from` into dst, reduced with `with` unless it is
 * NULL).  An empty side is left out, as the peer leaves it out too; with
 * both empty nothing happens.
 */
herd_status herd__algo_xchg(herd_comm *comm, int to, const void *sbuf, size_t slen, int from,
			    void *dst, const void *with, size_t rlen, herd_dtype dtype,
			    herd_redop op);

/*
 * Positions host by host (herd__place.host_ranks: hosts in the order of
 * their lowest ranks, each host's ranks in rank order), where rings and
 * chains run, so that they cross between hosts once per host whatever the
 * numbering: this rank's position, and the rank at position i (any
 * integer, taken mod p).  The identity on one host.
 */
int herd__algo_pos(const herd_comm *comm);
int herd__algo_at(const herd_comm *comm, int i);

/*
 * The order the binomial trees of a rooted call run in: the root, the
 * other ranks of its host, then the other hosts one after the other
 * (each host's ranks together, in host_ranks order).  A tree over it is
 * two-level where hosts hold a power of two ranks each (a tree between
 * one rank per host, then one inside each host) and close to it
 * elsewhere, whatever the numbering.  This rank's place in it for a given
 * root, and the rank at place v (0 <= v < p).  (rank - root) mod p on one
 * host.
 */
int herd__algo_tree_pos(const herd_comm *comm, int root);
int herd__algo_tree_at(const herd_comm *comm, int root, int v);

/* malloc that raises HERD_ENOMEM naming what the memory was for. */
herd_status herd__algo_alloc(void *out_ptr, size_t bytes, const char *what);


/* The element-wise operation of a reduction (AVG is SUM, scaled after). */
static inline herd_redop herd__algo_elem_op(herd_redop op)
{
	return op == HERD_AVG ? HERD_SUM : op;
}

/* ---- engines shared between the operations ------------------------------- */

/*
 * Where the p blocks of a ring step live, in elements from a buffer's start:
 * with stride 0, block b is part b of n elements split by herd__split_even
 * (allreduce, reduce); otherwise block b starts at b * stride and has n
 * elements (reduce_scatter, allgather).
 */
typedef struct herd__ring_layout {
	size_t n;
	size_t stride;
} herd__ring_layout;

static inline void herd__ring_block(const herd__ring_layout *l, int p, int b, size_t *off,
				    size_t *len)
{
	if (l->stride != 0) {
		*off = (size_t)b * l->stride;
		*len = l->n;
	} else {
		herd__split_even(l->n, p, b, off, len);
	}
}

/* The largest block of a layout, in elements. */
size_t herd__ring_max_block(const herd__ring_layout *l, int p);

/*
 * A ring reduce-scatter in progress: p - 1 steps, each sending one block to
 * the next rank and reducing one from the previous, after which this
 * rank's block (block `rank`) is reduced over all ranks and stored at own.
 * The partial results of other blocks go to work (laid out like in) when
 * work is not NULL, else alternately to the two halves of tmp (2 * max
 * block elements).  in may equal work, and own may equal the own block of
 * in or work.  op is SUM, PROD, MIN or MAX.
 */
typedef struct herd__ring_rs {
	herd__ring_layout l;
	const void *in;
	void *work, *tmp, *own;
	herd_dtype dtype;
	herd_redop op;
	const void *prev;      /* what the previous step produced */
} herd__ring_rs;

/* The send and the receive of step k of rs (0 <= k < p - 1); either may
 * have length 0, when its block is empty. */
void herd__ring_rs_step(herd__ring_rs *rs, herd_comm *comm, int k, herd__xfer *send,
			herd__xfer *recv);

/* The send and the receive of step k of a ring allgather in place on buf,
 * where block `rank` is this rank's and p - 1 steps pass the others on. */
void herd__ring_ag_step(const herd__ring_layout *l, void *buf, herd_dtype dtype,
			herd_comm *comm, int k, herd__xfer *send, herd__xfer *recv);

/* Exchanges the non-empty ones of the given sends and receives (all with
 * the ring neighbours), keeping their order. */
herd_status herd__ring_exchange(herd_comm *comm, herd__xfer *sends, size_t nsends,
				herd__xfer *recvs, size_t nrecvs);

/* A whole ring reduce-scatter (see herd__ring_rs). */
herd_status herd__ring_reduce_scatter(herd_comm *comm, herd__ring_rs *rs);

/* A whole ring allgather in place. */
herd_status herd__ring_allgather(herd_comm *comm, const herd__ring_layout *l, void *buf,
				 herd_dtype dtype);

/*
 * Recursive-doubling allreduce of count elements (log2 p steps of whole
 * vectors; a non-power-of-two size folds the extra ranks in first and out
 * last).  in may equal out; tmp holds count elements.  op is SUM, PROD,
 * MIN or MAX; every rank ends with the same bits.
 */
herd_status herd__rd_allreduce(herd_comm *comm, const void *in, void *out, void *tmp,
			       size_t count, herd_dtype dtype, herd_redop op);

/*
 * One-shot allreduce: every rank's vector to every other rank in a
 * single exchange, reduced locally (tune.c takes it for the tiniest
 * vectors on three ranks or more), with narrow-type
 * widening and AVG; the result is reduced in rank order, so it has the same
 * bits on every rank.  in may equal out.
 */
herd_status herd__oneshot_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				    herd_dtype dtype, herd_redop op);

/*
 * Bruck allgather in place: ceil(log2 p) steps, each doubling the run of
 * blocks (this rank's first) that a rank holds.  Blocks of count elements;
 * block `rank` of buf is this rank's.
 */
herd_status herd__bruck_allgather(herd_comm *comm, void *buf, size_t count, herd_dtype dtype);

/*
 * Allreduce by recursive doubling, with narrow-type widening and AVG:
 * the whole of what herd__algo_allreduce does for small counts, also used
 * by reduce_scatter for small counts.
 */
herd_status herd__rd_allreduce_full(herd_comm *comm, const void *in, void *out, size_t count,
				    herd_dtype dtype, herd_redop op);

#endif /* HERD_COMM_ALGO_H */
