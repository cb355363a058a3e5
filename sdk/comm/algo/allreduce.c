/*
 * sdk/comm/algo/allreduce.c - allreduce: for tiny vectors on more than two
 * ranks a one-shot exchange (everyone sends to everyone, one step),
 * recursive doubling for small vectors (latency: log2 p steps), ring
 * reduce-scatter + ring allgather for large ones (bandwidth: each rank
 * sends and receives 2(p-1)/p of the vector, the least possible).
 *
 * The ring goes through the vector in slices of p blocks of at most
 * HERD__ALGO_BLOCK bytes (HERD__ALGO_BLOCK_TCP when some pair of the
 * communicator talks TCP): a slice's reduce-scatter leaves its blocks in
 * cache for its allgather, and the sink reduces straight from the
 * transport into recvbuf, so the only passes over memory are reading
 * sendbuf and writing recvbuf.  The allgather of one slice shares its
 * exchanges with the reduce-scatter of the next.
 *
 * Where some pair talks TCP and every rank is on this host, with 4, 8, 16
 * ... ranks, reduce-scatter by recursive halving and allgather by
 * recursive doubling (Rabenseifner) replace the ring: the same bytes per
 * rank, 2 log2 p steps per slice instead of 2(p - 1), each an exchange
 * between two partners; with 2 ranks the ring's merged steps do as well,
 * so it stays; between hosts too (with several ranks a host, halving sends
 * more across the hosts).  tune.c makes the choice; the figures behind
 * it are in bench/RESULTS.md, "The direct path's thresholds".
 *
 * narrow-type (float16, bfloat16, float8) SUM/PROD/AVG reduce in float32 and round once:
 * each slice is widened into a float32 scratch slice, reduce-scattered
 * there, and each rank rounds its own block into recvbuf (after the AVG
 * division), so the allgather moves the narrow type.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

/*
 * The slices the bandwidth algorithms cut, p blocks of at most
 * HERD__ALGO_BLOCK bytes, or HERD__ALGO_BLOCK_TCP when any pair of the
 * communicator uses TCP (every rank must cut the same slices, and every
 * rank sees the pairs alike: herd__place.any_tcp); and for a widened type,
 * a float32 slice to reduce in (*wide, NULL otherwise; the caller frees it).
 */
static herd_status slice_setup(herd_comm *comm, size_t count, size_t wes, bool widen,
			       size_t *slice, float **wide)
{
	size_t block = herd__algo_block_elems(wes);

	if (block > HERD__ALGO_BLOCK_TCP / wes && herd__comm_place(comm)->any_tcp)
		block = HERD__ALGO_BLOCK_TCP / wes;
	*slice = block * (size_t)herd_comm_size(comm);
	*wide = NULL;
	if (widen)
		HERD_CHECK(herd__algo_alloc(wide, (count < *slice ? count : *slice) * wes,
					    "a float32 slice of a narrow-type allreduce"));
	return HERD_OK;
}

/*
 * Slice s runs its reduce-scatter in the same exchanges as the allgather
 * of slice s - 1: step k of both goes to the right neighbour as two
 * messages, so the ring synchronizes (S + 1)(p - 1) times for S slices
 * instead of 2S(p - 1), and every exchange both reduces and copies.
 */
static herd_status ring_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				  herd_dtype dtype, herd_redop op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	bool widen = herd__dtype_widens(dtype, op);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt), slice, nslices;
	const char *cin = in;
	char *cout = out, *ag_buf = NULL;
	herd__ring_layout ag_l = { 0, 0 };
	herd__ring_rs rs;
	float *wide = NULL;
	herd_status st = HERD_OK;

	HERD_CHECK(slice_setup(comm, count, wes, widen, &slice, &wide));
	nslices = (count + slice - 1) / slice;
	for (size_t s = 0; s <= nslices; s++) {
		size_t s0 = s * slice, ooff = 0, olen = 0;

		if (s < nslices) {
			memset(&rs, 0, sizeof(rs));
			rs.l.n = count - s0 < slice ? count - s0 : slice;
			rs.in = cin + s0 * es;
			rs.work = cout + s0 * es;
			rs.dtype = wdt;
			rs.op = herd__algo_elem_op(op);
			if (widen) {
				herd__narrow_to_float(wide, rs.in, rs.l.n, dtype);
				rs.in = rs.work = wide;
			}
			herd__ring_block(&rs.l, p, r, &ooff, &olen);
			rs.own = (char *)rs.work + ooff * wes;
		}
		for (int k = 0; k < p - 1; k++) {
			herd__xfer sends[2], recvs[2];
			size_t n = 0;

			if (ag_buf != NULL) {
				herd__ring_ag_step(&ag_l, ag_buf, dtype, comm, k, &sends[n], &recvs[n]);
				n++;
			}
			if (s < nslices) {
				herd__ring_rs_step(&rs, comm, k, &sends[n], &recvs[n]);
				n++;
			}
			HERD_CHECK_GOTO(herd__ring_exchange(comm, sends, n, recvs, n), st, out);
		}
		ag_buf = NULL;
		if (s == nslices)
			break;
		/* this rank's block of slice s is complete: finish it */
		if (op == HERD_AVG)
			herd__reduce_scale(rs.own, olen, wdt, p);
		if (widen)
			herd__float_to_narrow((cout + (s0 + ooff) * es),
					    (const float *)rs.own, olen, dtype);
		ag_l = rs.l;
		ag_buf = cout + s0 * es;
	}
out:
	free(wide);
	return st;
}

/* Blocks [lo, hi) of a slice of n elements split into p blocks: the element
 * offset and count. */
static void block_range(size_t n, int p, int lo, int hi, size_t *off, size_t *len)
{
	size_t last_off, last_len;

	herd__split_even(n, p, lo, off, len);
	herd__split_even(n, p, hi - 1, &last_off, &last_len);
	*len = last_off + last_len - *off;
}

/*
 * Recursive halving, then doubling, slice by slice (the slices of the
 * ring), by position host by host (herd__algo_pos: r below is this rank's
 * position, and blocks are numbered by position).  Halving at distance
 * d = p/2 .. 1: this rank and the rank at position r ^ d split
 * the blocks they both still hold; each keeps the half on its side of d
 * (the upper one when bit d of its position is set), sends the other and
 * reduces the partner's half into its own.  After log2 p steps this rank
 * holds block r complete; doubling at d = 1 .. p/2 swaps what each holds
 * with the rank at r ^ d, so the holdings double back to the whole slice.
 * Every block is reduced by one rank only, so every rank gets the same
 * bits.
 */
static herd_status hd_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				herd_dtype dtype, herd_redop op)
{
	/* positions host by host (blocks are numbered by position too) */
	int p = herd_comm_size(comm), r = herd__algo_pos(comm);
	bool widen = herd__dtype_widens(dtype, op);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt), slice;
	herd_redop eop = herd__algo_elem_op(op);
	const char *cin = in;
	char *cout = out;
	float *wide = NULL;
	herd_status st = HERD_OK;

	HERD_CHECK(slice_setup(comm, count, wes, widen, &slice, &wide));
	for (size_t s0 = 0; s0 < count; s0 += slice) {
		size_t n = count - s0 < slice ? count - s0 : slice, off, len;
		const char *src = cin + s0 * es;
		char *work = cout + s0 * es;
		int lo = 0, hi = p;

		if (widen) {
			herd__narrow_to_float(wide, src, n, dtype);
			src = work = (char *)wide;
		}
		for (int d = p / 2; d >= 1; d /= 2) {
			int mid = lo + (hi - lo) / 2, keep_lo = r & d ? mid : lo;
			int keep_hi = r & d ? hi : mid, give_lo = r & d ? lo : mid;
			int give_hi = r & d ? mid : hi;
			/* the first step reads the input, later ones the partial sums */
			const char *from = d == p / 2 ? src : work;
			size_t koff, klen, goff, glen;
			int peer = herd__algo_at(comm, r ^ d);

			block_range(n, p, keep_lo, keep_hi, &koff, &klen);
			block_range(n, p, give_lo, give_hi, &goff, &glen);
			HERD_CHECK_GOTO(herd__algo_xchg(comm, peer, from + goff * wes, glen * wes, peer,
							work + koff * wes, from + koff * wes,
							klen * wes, wdt, eop), st, out);
			lo = keep_lo;
			hi = keep_hi;
		}
		/* this rank's block of the slice is complete: finish it */
		herd__split_even(n, p, r, &off, &len);
		if (op == HERD_AVG)
			herd__reduce_scale(work + off * wes, len, wdt, p);
		if (widen)
			herd__float_to_narrow((cout + (s0 + off) * es),
					    (const float *)work + off, len, dtype);
		for (int d = 1; d < p; d *= 2) {
			int peer_lo = r & d ? lo - d : hi, peer_hi = r & d ? lo : hi + d;
			size_t moff, mlen, poff, plen;
			int peer = herd__algo_at(comm, r ^ d);

			block_range(n, p, lo, hi, &moff, &mlen);
			block_range(n, p, peer_lo, peer_hi, &poff, &plen);
			HERD_CHECK_GOTO(herd__algo_xchg(comm, peer, cout + (s0 + moff) * es, mlen * es,
							peer, cout + (s0 + poff) * es, NULL, plen * es,
							dtype, HERD_SUM), st, out);
			lo = lo < peer_lo ? lo : peer_lo;
			hi = hi > peer_hi ? hi : peer_hi;
		}
	}
out:
	free(wide);
	return st;
}

/* The choices of tune.c, each a whole allreduce of more than one rank
 * and at least one element. */

herd_status herd__algo_allreduce_oneshot(herd_comm *comm, const herd__op *op)
{
	return herd__oneshot_allreduce(comm, op->sendbuf, op->recvbuf, op->count,
				       (herd_dtype)op->fp.dtype, (herd_redop)op->fp.redop);
}

herd_status herd__algo_allreduce_rd(herd_comm *comm, const herd__op *op)
{
	return herd__rd_allreduce_full(comm, op->sendbuf, op->recvbuf, op->count,
				       (herd_dtype)op->fp.dtype, (herd_redop)op->fp.redop);
}

herd_status herd__algo_allreduce_hd(herd_comm *comm, const herd__op *op)
{
	return hd_allreduce(comm, op->sendbuf, op->recvbuf, op->count, (herd_dtype)op->fp.dtype,
			    (herd_redop)op->fp.redop);
}

herd_status herd__algo_allreduce_ring(herd_comm *comm, const herd__op *op)
{
	return ring_allreduce(comm, op->sendbuf, op->recvbuf, op->count, (herd_dtype)op->fp.dtype,
			      (herd_redop)op->fp.redop);
}
