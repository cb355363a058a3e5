/*
 * sdk/comm/algo/pairwise.c - the calls that are one exchange or a few: send,
 * recv, sendrecv (one message each way, sent even when empty so that
 * calls pair up one to one), alltoall (pairwise exchange), barrier
 * (dissemination).
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

/* Where empty messages point, as a transport may want a valid address. */
static char empty_byte;

static void set_send(herd__xfer *x, int peer, const void *buf, size_t len)
{
	memset(x, 0, sizeof(*x));
	x->peer = peer;
	x->buf = len > 0 ? buf : &empty_byte;
	x->len = len;
}

static void set_recv(herd__xfer *x, int peer, void *buf, size_t len, herd_dtype dtype)
{
	memset(x, 0, sizeof(*x));
	x->peer = peer;
	x->len = len;
	x->sink.dst = len > 0 ? buf : &empty_byte;
	x->sink.dtype = dtype;
	x->sink.op = HERD_SUM;
}

herd_status herd__algo_send(herd_comm *comm, const herd__op *op)
{
	herd__xfer x;

	set_send(&x, op->peer, op->sendbuf, op->count * herd_dtype_size((herd_dtype)op->fp.dtype));
	return herd__p2p_exchange(comm, &x, 1, NULL, 0);
}

herd_status herd__algo_recv(herd_comm *comm, const herd__op *op)
{
	herd__xfer x;
	herd_dtype dtype = (herd_dtype)op->fp.dtype;

	set_recv(&x, op->peer, op->recvbuf, op->count * herd_dtype_size(dtype), dtype);
	return herd__p2p_exchange(comm, NULL, 0, &x, 1);
}

herd_status herd__algo_sendrecv(herd_comm *comm, const herd__op *op)
{
	herd__xfer s, r;
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	size_t es = herd_dtype_size(dtype);

	set_send(&s, op->peer, op->sendbuf, op->count * es);
	set_recv(&r, op->peer2, op->recvbuf, op->recvcount * es, dtype);
	return herd__p2p_exchange(comm, &s, 1, &r, 1);
}

/* This rank's own block of an alltoall, copied (tune.c leaves out the
 * empty call and the lone rank); the bytes of a block. */
static size_t alltoall_own(herd_comm *comm, const herd__op *op)
{
	size_t block = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);
	size_t at = (size_t)herd_comm_rank(comm) * block;

	memcpy((char *)op->recvbuf + at, (const char *)op->sendbuf + at, block);
	return block;
}

/* Large blocks: p - 1 steps, at step s sending to rank r+s and receiving
 * from rank r-s, so that every rank is busy with exactly one peer each
 * way and no link carries two messages at once. */
herd_status herd__algo_alltoall_pairwise(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	size_t block = alltoall_own(comm, op);
	const char *in = op->sendbuf;
	char *out = op->recvbuf;

	for (int s = 1; s < p; s++) {
		int to = herd__algo_mod(r + s, p), from = herd__algo_mod(r - s, p);

		HERD_CHECK(herd__algo_xchg(comm, to, in + (size_t)to * block, block, from,
					   out + (size_t)from * block, NULL, block, HERD_UINT8,
					   HERD_SUM));
	}
	return HERD_OK;
}

/* Small blocks: every send and receive in one exchange (one step of
 * latency). */
herd_status herd__algo_alltoall_oneshot(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	size_t block = alltoall_own(comm, op);
	const char *in = op->sendbuf;
	char *out = op->recvbuf;
	herd__xfer *x;
	herd_status st;

	HERD_CHECK(herd__algo_alloc(&x, 2 * (size_t)(p - 1) * sizeof(*x),
				    "the transfers of an alltoall"));
	for (int s = 1; s < p; s++) {
		int to = herd__algo_mod(r + s, p), from = herd__algo_mod(r - s, p);

		set_send(&x[s - 1], to, in + (size_t)to * block, block);
		set_recv(&x[p - 1 + s - 1], from, out + (size_t)from * block, block, HERD_UINT8);
	}
	st = herd__p2p_exchange(comm, x, (size_t)(p - 1), x + (p - 1), (size_t)(p - 1));
	free(x);
	return st;
}

/* Dissemination: in round k every rank signals rank r + 2^k and waits for
 * rank r - 2^k; after ceil(log2 p) rounds each has heard, through some
 * chain, from every other. */
herd_status herd__algo_barrier(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);

	for (int d = 1; d < p; d <<= 1) {
		herd__xfer s, x;

		set_send(&s, herd__algo_mod(r + d, p), NULL, 0);
		set_recv(&x, herd__algo_mod(r - d, p), NULL, 0, HERD_UINT8);
		HERD_CHECK(herd__p2p_exchange(comm, &s, 1, &x, 1));
	}
	return HERD_OK;
}
