/*
 * sdk/comm/algo/allgather.c - allgather: Bruck for small blocks
 * (ceil(log2 p) steps), the ring for large ones (p - 1 steps, each rank
 * sending and receiving (p-1)/p of the result, which is optimal), slice by
 * slice along the blocks so that what a step receives is still in cache
 * when the next step forwards it.
 */
#include <string.h>

#include "comm/algo/algo.h"

/* This rank's own block into place (tune.c leaves out the empty call and
 * the lone rank); the receive buffer. */
static char *own_block(herd_comm *comm, const herd__op *op)
{
	size_t block = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);
	char *out = op->recvbuf, *mine = out + (size_t)herd_comm_rank(comm) * block;

	if (op->sendbuf != mine)
		memcpy(mine, op->sendbuf, block);
	return out;
}

herd_status herd__algo_allgather_bruck(herd_comm *comm, const herd__op *op)
{
	return herd__bruck_allgather(comm, own_block(comm, op), op->count,
				     (herd_dtype)op->fp.dtype);
}

herd_status herd__algo_allgather_ring(herd_comm *comm, const herd__op *op)
{
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	size_t es = herd_dtype_size(dtype), count = op->count;
	size_t chunk = herd__algo_block_elems(es);
	char *out = own_block(comm, op);

	for (size_t c0 = 0; c0 < count; c0 += chunk) {
		herd__ring_layout l = { count - c0 < chunk ? count - c0 : chunk, count };

		HERD_CHECK(herd__ring_allgather(comm, &l, out + c0 * es, dtype));
	}
	return HERD_OK;
}
