/*
 * sdk/comm/algo_allgather.c - allgather: Bruck for small blocks
 * (ceil(log2 p) steps), the ring for large ones (p - 1 steps, each rank
 * sending and receiving (p-1)/p of the result, which is optimal), slice by
 * slice along the blocks so that what a step receives is still in cache
 * when the next step forwards it.
 */
#include <string.h>

#include "comm/algo.h"

herd_status herd__algo_allgather(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	size_t es = herd_dtype_size(dtype), count = op->count, block = count * es;
	size_t chunk = herd__algo_block_elems(es);
	char *out = op->recvbuf;

	if (count == 0)
		return HERD_OK;
	if (op->sendbuf != out + (size_t)r * block)
		memcpy(out + (size_t)r * block, op->sendbuf, block);
	if (p == 1)
		return HERD_OK;
	if (herd__algo_pick(comm, block * (size_t)p) == HERD__ALGO_LATENCY)
		return herd__bruck_allgather(comm, out, count, dtype);
	for (size_t c0 = 0; c0 < count; c0 += chunk) {
		herd__ring_layout l = { count - c0 < chunk ? count - c0 : chunk, count };

		HERD_CHECK(herd__ring_allgather(comm, &l, out + c0 * es, dtype));
	}
	return HERD_OK;
}
