/*
 * sdk/ckpt/box.c - N-d boxes: the arithmetic of resharding.
 *
 * A shard is a box of its global tensor stored densely in row-major order.
 * Restoring onto another sharding copies, for every pair (saved shard,
 * shard to fill) that intersects, the intersection's bytes: a sequence of
 * contiguous runs in both layouts.  Saving and decoding check that the
 * shards of a tensor do not overlap (herd__ckpt_boxes_overlap).
 */
#include <stdlib.h>
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

/* The boxes of herd__ckpt_boxes_overlap, for the comparisons of qsort_r. */
typedef struct box_list {
	const char *base;
	size_t stride;
	int dim;
} box_list;

static const herd__ckpt_box *box_at(const box_list *l, size_t i)
{
	return (const herd__ckpt_box *)(const void *)(l->base + i * l->stride);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_by_offset(const void *a, const void *b, void *arg)
{
	const box_list *l = arg;
	uint64_t x = box_at(l, *(const size_t *)a)->offset[l->dim];
	uint64_t y = box_at(l, *(const size_t *)b)->offset[l->dim];

	return (x > y) - (x < y);
}

herd_status herd__ckpt_boxes_overlap(const void *boxes, size_t stride, size_t n,
				     uint64_t budget, int *found, size_t *a, size_t *b)
{
	box_list l = { boxes, stride, 0 };
	size_t *order = NULL, best = 0;
	uint64_t *offs = NULL, done = 0;
	herd_status st = HERD_OK;
	int ndim;

	*found = 0;
	if (n < 2)
		return HERD_OK;
	ndim = box_at(&l, 0)->ndim;
	HERD_CHECK_GOTO(herd__calloc(&order, n, sizeof(size_t), "shard boxes"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&offs, n, sizeof(uint64_t), "shard boxes"), st, out);
	/* The dimension along which the boxes spread most: fewest boxes
	 * meet at any one place along it. */
	for (int d = 0; d < ndim; d++) {
		size_t distinct = 1;

		for (size_t i = 0; i < n; i++)
			offs[i] = box_at(&l, i)->offset[d];
		qsort(offs, n, sizeof(uint64_t), cmp_u64);
		for (size_t i = 1; i < n; i++)
			distinct += offs[i] != offs[i - 1];
		if (distinct > best) {
			best = distinct;
			l.dim = d;
		}
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(size_t), cmp_by_offset, &l);
	/* Two boxes can meet only where their ranges along l.dim meet: past
	 * the end of box x along it, no later box meets x. */
	for (size_t x = 0; x < n && *found == 0; x++) {
		const herd__ckpt_box *bx = box_at(&l, order[x]);
		uint64_t end = bx->offset[l.dim] + bx->shape[l.dim];

		for (size_t y = x + 1; y < n && box_at(&l, order[y])->offset[l.dim] < end; y++) {
			herd__ckpt_box meet;

			if (budget != 0 && ++done > budget) {
				*found = -1;
				break;
			}
			if (herd__ckpt_box_intersect(bx, box_at(&l, order[y]), &meet)) {
				*found = 1;
				*a = order[x] < order[y] ? order[x] : order[y];
				*b = order[x] < order[y] ? order[y] : order[x];
				break;
			}
		}
	}
out:
	free(order);
	free(offs);
	return st;
}
