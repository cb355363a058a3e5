/*
 * sdk/comm/algo_reduce_scatter.c - reduce_scatter: for small vectors a
 * recursive-doubling allreduce of the whole input, of which each rank
 * keeps its block (log2 p steps); for large ones the ring, slice by slice
 * along the blocks, partial results in a small scratch.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

herd_status herd__algo_reduce_scatter_rd(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	size_t block = op->count * herd_dtype_size(dtype);
	herd_status st;
	char *all;

	HERD_CHECK(herd__algo_alloc(&all, block * (size_t)p, "a small reduce_scatter"));
	st = herd__rd_allreduce_full(comm, op->sendbuf, all, op->count * (size_t)p, dtype,
				     (herd_redop)op->fp.redop);
	if (st == HERD_OK)
		memcpy(op->recvbuf, all + (size_t)r * block, block);
	free(all);
	return st;
}

/*
 * Slices of up to HERD__ALGO_BLOCK bytes of every block.  Narrow-type
 * SUM/PROD/AVG widen each slice of every block into float32 scratch and
 * round the rank's own block once, at the end of its slice.
 */
herd_status herd__algo_reduce_scatter_ring(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	herd_redop redop = (herd_redop)op->fp.redop;
	bool widen = herd__dtype_widens(dtype, redop);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt);
	size_t count = op->count, chunk = herd__algo_block_elems(wes);
	size_t n_max = count < chunk ? count : chunk;
	const char *in = op->sendbuf;
	char *out = op->recvbuf;
	/* scratch: two partial blocks; with widening also the widened slices
	 * of all blocks and the own block in float32 */
	size_t tmp_len = 2 * n_max, wide_len = widen ? (size_t)p * n_max + n_max : 0;
	char *scratch, *wide;
	herd_status st = HERD_OK;

	HERD_CHECK(herd__algo_alloc(&scratch, (tmp_len + wide_len) * wes,
				    "the partial blocks of a reduce_scatter"));
	wide = scratch + tmp_len * wes;
	for (size_t c0 = 0; c0 < count; c0 += chunk) {
		size_t n = count - c0 < chunk ? count - c0 : chunk;
		herd__ring_rs rs = { .l = { n, count }, .in = in + c0 * es, .tmp = scratch,
				     .own = out + c0 * es, .dtype = wdt,
				     .op = herd__algo_elem_op(redop) };

		if (widen) {
			for (int b = 0; b < p; b++)
				herd__narrow_to_float((float *)(wide + (size_t)b * n * wes), (in + ((size_t)b * count + c0) * es),
						    n, dtype);
			rs.l.stride = n;
			rs.in = wide;
			rs.own = wide + (size_t)p * n * wes;
		}
		HERD_CHECK_GOTO(herd__ring_reduce_scatter(comm, &rs), st, out);
		if (redop == HERD_AVG)
			herd__reduce_scale(rs.own, n, wdt, p);
		if (widen)
			herd__float_to_narrow((out + c0 * es), (const float *)rs.own, n, dtype);
	}
out:
	free(scratch);
	return st;
}
