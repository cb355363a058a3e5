/*
 * sdk/comm/algo/util.c - what the collective algorithms share: the calls
 * that need no peer, one-send-one-receive steps, scratch memory.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

size_t herd__algo_block_bytes = HERD__ALGO_BLOCK;
/*
 * The calls whose result needs no peer: an empty one, or one of a single
 * rank (its own data to its own buffer).  tune.c sends them here before
 * the table, so the other algorithms start from two ranks and one element.
 */
herd_status herd__algo_local(herd_comm *comm, const herd__op *op)
{
	size_t bytes = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);

	/* one rank: every kind's result is its own data, where it asked */
	if (bytes > 0 && op->recvbuf != op->sendbuf)
		memcpy(op->recvbuf, op->sendbuf, bytes);
	return HERD_OK;
}

herd_status herd__algo_xchg(herd_comm *comm, int to, const void *sbuf, size_t slen, int from,
			    void *dst, const void *with, size_t rlen, herd_dtype dtype,
			    herd_redop op)
{
	herd__xfer send = { 0 }, recv = { 0 };
	size_t nsend = 0, nrecv = 0;

	if (to >= 0 && slen > 0) {
		send.peer = to;
		send.buf = sbuf;
		send.len = slen;
		nsend = 1;
	}
	if (from >= 0 && rlen > 0) {
		recv.peer = from;
		recv.len = rlen;
		recv.sink.dst = dst;
		recv.sink.reduce_with = with;
		recv.sink.dtype = dtype;
		recv.sink.op = herd__algo_elem_op(op);
		nrecv = 1;
	}
	if (nsend == 0 && nrecv == 0)
		return HERD_OK;
	return herd__p2p_exchange(comm, &send, nsend, &recv, nrecv);
}

herd_status herd__algo_alloc(void *out_ptr, size_t bytes, const char *what)
{
	void *p = malloc(bytes ? bytes : 1);

	if (p == NULL)
		return herd__error(HERD_ENOMEM, "out of memory allocating %zu bytes for %s", bytes,
				   what);
	memcpy(out_ptr, &p, sizeof(p));
	return HERD_OK;
}

int herd__algo_pos(const herd_comm *comm)
{
	const herd__place *pl = herd__comm_place(comm);
	int r = herd_comm_rank(comm);

	if (pl->nhosts < 2)
		return r;
	for (int i = pl->host_start[pl->host_of[r]]; i < pl->host_start[pl->host_of[r] + 1]; i++)
		if (pl->host_ranks[i] == r)
			return i;
	return r;
}

int herd__algo_at(const herd_comm *comm, int i)
{
	const herd__place *pl = herd__comm_place(comm);

	i = herd__algo_mod(i, herd_comm_size(comm));
	return pl->nhosts < 2 ? i : pl->host_ranks[i];
}

/* Where the root's host's ranks start in host_ranks, how many, and the
 * root's index among them. */
static void root_host(const herd__place *pl, int root, int *start, int *n, int *k)
{
	int h = pl->host_of[root];

	*start = pl->host_start[h];
	*n = pl->host_start[h + 1] - *start;
	*k = 0;
	while (*k < *n - 1 && pl->host_ranks[*start + *k] != root)
		(*k)++;
}

int herd__algo_tree_pos(const herd_comm *comm, int root)
{
	const herd__place *pl = herd__comm_place(comm);
	int r = herd_comm_rank(comm), p = herd_comm_size(comm), i, start, n, k;

	if (pl->nhosts < 2)
		return herd__algo_mod(r - root, p);
	i = herd__algo_pos(comm);
	root_host(pl, root, &start, &n, &k);
	if (i >= start && i < start + n)
		return herd__algo_mod(i - start - k, n);
	return n + (i < start ? i : i - n);
}

int herd__algo_tree_at(const herd_comm *comm, int root, int v)
{
	const herd__place *pl = herd__comm_place(comm);
	int p = herd_comm_size(comm), start, n, k;

	if (pl->nhosts < 2)
		return herd__algo_mod(v + root, p);
	root_host(pl, root, &start, &n, &k);
	if (v < n)
		return pl->host_ranks[start + herd__algo_mod(v + k, n)];
	v -= n;
	return pl->host_ranks[v < start ? v : v + n];
}
