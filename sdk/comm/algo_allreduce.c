/*
 * sdk/comm/algo_allreduce.c - allreduce: recursive doubling for small
 * vectors (latency: log2 p steps), ring reduce-scatter + ring allgather
 * for large ones (bandwidth: each rank sends and receives 2(p-1)/p of the
 * vector, the least possible).
 *
 * The ring goes through the vector in slices of p blocks of at most
 * HERD__ALGO_BLOCK bytes: a slice's reduce-scatter leaves its blocks in
 * cache for its allgather, and the sink reduces straight from the
 * transport into recvbuf, so the only passes over memory are reading
 * sendbuf and writing recvbuf.
 *
 * float16 and bfloat16 SUM/PROD/AVG reduce in float32 and round once:
 * each slice is widened into a float32 scratch slice, reduce-scattered
 * there, and each rank rounds its own block into recvbuf (after the AVG
 * division), so the allgather moves the narrow type.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo.h"

static herd_status ring_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				  herd_dtype dtype, herd_redop op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	bool widen = herd__algo_widens(dtype, op);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	herd_redop eop = herd__algo_elem_op(op);
	size_t es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt);
	size_t block = HERD__ALGO_BLOCK / wes, slice = block * (size_t)p;
	const char *cin = in;
	char *cout = out;
	float *wide = NULL;
	herd_status st = HERD_OK;

	if (widen)
		HERD_CHECK(herd__algo_alloc(&wide, (count < slice ? count : slice) * wes,
					    "a float32 slice of a float16/bfloat16 allreduce"));
	for (size_t s0 = 0; s0 < count; s0 += slice) {
		herd__ring_layout l = { count - s0 < slice ? count - s0 : slice, 0 };
		const char *sin = cin + s0 * es;
		char *work = cout + s0 * es;
		size_t ooff, olen;

		if (widen) {
			herd__half_to_float(wide, (const uint16_t *)sin, l.n, dtype);
			sin = (const char *)wide;
			work = (char *)wide;
		}
		herd__ring_block(&l, p, r, &ooff, &olen);
		HERD_CHECK_GOTO(herd__ring_reduce_scatter(comm, &l, sin, work, NULL, work + ooff * wes,
							  wdt, eop),
				st, out);
		if (op == HERD_AVG)
			herd__reduce_scale(work + ooff * wes, olen, wdt, p);
		if (widen)
			herd__float_to_half((uint16_t *)(cout + (s0 + ooff) * es),
					    (const float *)(work + ooff * wes), olen, dtype);
		HERD_CHECK_GOTO(herd__ring_allgather(comm, &l, cout + s0 * es, dtype), st, out);
	}
out:
	free(wide);
	return st;
}

herd_status herd__algo_allreduce(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	herd_redop redop = (herd_redop)op->fp.redop;
	size_t bytes = op->count * herd_dtype_size(dtype);

	if (op->count == 0)
		return HERD_OK;
	if (p == 1) {
		if (op->recvbuf != op->sendbuf)
			memcpy(op->recvbuf, op->sendbuf, bytes);
		return HERD_OK;
	}
	/* fewer elements than ranks leaves ring blocks empty: all latency */
	if (herd__algo_pick(comm, op->count < (size_t)p ? 0 : bytes) == HERD__ALGO_LATENCY)
		return herd__rd_allreduce_full(comm, op->sendbuf, op->recvbuf, op->count, dtype,
					       redop);
	return ring_allreduce(comm, op->sendbuf, op->recvbuf, op->count, dtype, redop);
}
