/*
 * sdk/ckpt/box.c - N-d boxes: the arithmetic of resharding.
 *
 * A shard is a box of its global tensor stored densely in row-major order.
 * Restoring onto another sharding copies, for every pair (saved shard,
 * shard to fill) that intersects, the intersection's bytes: a sequence of
 * contiguous runs in both layouts.
 */
#include <string.h>

#include "ckpt_internal.h"

bool herd__ckpt_box_intersect(const herd__ckpt_box *a, const herd__ckpt_box *b,
			      herd__ckpt_box *out)
{
	out->ndim = a->ndim;
	for (int d = 0; d < a->ndim; d++) {
		uint64_t lo = a->offset[d] > b->offset[d] ? a->offset[d] : b->offset[d];
		uint64_t ea = a->offset[d] + a->shape[d], eb = b->offset[d] + b->shape[d];
		uint64_t hi = ea < eb ? ea : eb;

		if (hi <= lo)
			return false;
		out->offset[d] = lo;
		out->shape[d] = hi - lo;
	}
	return true;
}

/* Row-major strides in elements of a box's shape. */
static void strides(const herd__ckpt_box *b, uint64_t *st)
{
	uint64_t s = 1;

	for (int d = b->ndim - 1; d >= 0; d--) {
		st[d] = s;
		s *= b->shape[d];
	}
}

herd_status herd__ckpt_box_runs(const herd__ckpt_box *src, const herd__ckpt_box *dst,
				const herd__ckpt_box *part, size_t elem, herd__ckpt_run_fn fn,
				void *arg)
{
	uint64_t sst[HERD_CKPT_MAX_DIMS], dst_st[HERD_CKPT_MAX_DIMS];
	uint64_t idx[HERD_CKPT_MAX_DIMS] = { 0 };
	uint64_t run;
	int n = part->ndim, outer;

	for (int d = 0; d < n; d++)
		if (part->shape[d] == 0)
			return HERD_OK;
	strides(src, sst);
	strides(dst, dst_st);
	/* Dimensions whole in all three boxes merge into the run below them. */
	outer = n - 1;
	run = part->shape[n - 1];
	while (outer > 0 && part->shape[outer] == src->shape[outer] &&
	       part->shape[outer] == dst->shape[outer]) {
		outer--;
		run *= part->shape[outer];
	}
	for (;;) {
		uint64_t so = 0, dofs = 0;
		herd_status st;

		for (int d = 0; d < n; d++) {
			uint64_t c = part->offset[d] + (d < outer ? idx[d] : 0);

			so += (c - src->offset[d]) * sst[d];
			dofs += (c - dst->offset[d]) * dst_st[d];
		}
		st = fn(so * elem, dofs * elem, run * elem, arg);
		if (st != HERD_OK)
			return st;
		/* The odometer over dimensions 0..outer-1, last fastest. */
		{
			int d = outer - 1;

			while (d >= 0 && ++idx[d] == part->shape[d])
				idx[d--] = 0;
			if (d < 0)
				return HERD_OK;
		}
	}
}
