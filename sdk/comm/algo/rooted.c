/*
 * sdk/comm/algo/rooted.c - the collectives with a root: broadcast, reduce,
 * gather, scatter.  Ranks are renumbered relative to the root, host by
 * host (herd__algo_tree_pos, herd__algo_pos), so every tree and chain is
 * rooted at 0 and crosses between hosts as few times as it can.
 *
 *  - broadcast: a binomial tree for small messages (log2 p steps, a
 *    parent sends to all its children at once); for large ones a chain
 *    0 -> 1 -> ... -> p-1 pipelined in chunks, where every rank receives
 *    chunk c+1 while forwarding chunk c, so each link carries the message
 *    once and the time is (chunks + p - 2) chunk steps.
 *  - reduce: a binomial tree for small messages; for large ones the ring
 *    reduce-scatter followed by a gather of the blocks to the root, slice
 *    by slice, so that no rank sends more than about its share.
 *  - gather, scatter: linear: the root exchanges with every rank at once
 *    in one step, which the transport progresses in parallel.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

static herd_status bcast_binomial(herd_comm *comm, void *buf, size_t bytes, int root)
{
	int p = herd_comm_size(comm);
	int vr = herd__algo_tree_pos(comm, root), mask = 1, nchild = 0;
	herd__xfer children[32];

	while (mask < p) {
		if (vr & mask) {
			HERD_CHECK(herd__algo_xchg(comm, -1, NULL, 0,
						   herd__algo_tree_at(comm, root, vr - mask), buf,
						   NULL, bytes, HERD_UINT8, HERD_SUM));
			break;
		}
		mask <<= 1;
	}
	for (mask >>= 1; mask > 0; mask >>= 1) {
		if (vr + mask < p) {
			memset(&children[nchild], 0, sizeof(children[nchild]));
			children[nchild].peer = herd__algo_tree_at(comm, root, vr + mask);
			children[nchild].buf = buf;
			children[nchild].len = bytes;
			nchild++;
		}
	}
	if (nchild == 0)
		return HERD_OK;
	return herd__p2p_exchange(comm, children, (size_t)nchild, NULL, 0);
}

static herd_status bcast_chain(herd_comm *comm, const void *src, void *buf, size_t bytes,
			       int root)
{
	/* The chain runs host by host (herd__algo_pos) from the root on. */
	int p = herd_comm_size(comm), pos = herd__algo_pos(comm), root_pos = 0;
	int vr, prev, next;
	size_t chunk = herd__algo_block_elems(1), nchunks = (bytes + chunk - 1) / chunk;
	const char *from;
	char *to = buf;

	while (root_pos < p - 1 && herd__algo_at(comm, root_pos) != root)
		root_pos++;
	vr = herd__algo_mod(pos - root_pos, p);
	prev = vr > 0 ? herd__algo_at(comm, pos - 1) : -1;
	next = vr < p - 1 ? herd__algo_at(comm, pos + 1) : -1;
	from = vr == 0 ? src : buf;
	/* at step t, rank vr sends chunk t - vr and receives chunk t - vr + 1 */
	for (size_t t = 0; t < nchunks + (size_t)p - 2; t++) {
		bool do_send = next >= 0 && t >= (size_t)vr && t - (size_t)vr < nchunks;
		bool do_recv = prev >= 0 && t + 1 >= (size_t)vr && t + 1 - (size_t)vr < nchunks;
		size_t sc = do_send ? t - (size_t)vr : 0, rc = do_recv ? t + 1 - (size_t)vr : 0;
		size_t slen = do_send ? (sc + 1 < nchunks ? chunk : bytes - sc * chunk) : 0;
		size_t rlen = do_recv ? (rc + 1 < nchunks ? chunk : bytes - rc * chunk) : 0;

		HERD_CHECK(herd__algo_xchg(comm, do_send ? next : -1, from + sc * chunk, slen,
					   do_recv ? prev : -1, to + rc * chunk, NULL, rlen,
					   HERD_UINT8, HERD_SUM));
	}
	return HERD_OK;
}

/* The root's data into its receive buffer first (tune.c leaves out the
 * empty call and the lone rank). */
static void *bcast_prepare(herd_comm *comm, const herd__op *op, size_t *bytes)
{
	*bytes = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);
	if (herd_comm_rank(comm) == op->fp.root && op->sendbuf != op->recvbuf)
		memcpy(op->recvbuf, op->sendbuf, *bytes);
	return op->recvbuf;
}

herd_status herd__algo_broadcast_binomial(herd_comm *comm, const herd__op *op)
{
	size_t bytes;
	void *buf = bcast_prepare(comm, op, &bytes);

	return bcast_binomial(comm, buf, bytes, op->fp.root);
}

herd_status herd__algo_broadcast_chain(herd_comm *comm, const herd__op *op)
{
	size_t bytes;
	void *buf = bcast_prepare(comm, op, &bytes);

	return bcast_chain(comm, herd_comm_rank(comm) == op->fp.root ? op->sendbuf : buf, buf,
			   bytes, op->fp.root);
}

/*
 * Binomial reduce: at step mask a rank whose relative number has that bit
 * sends its partial result to vr - mask and is done; the others receive
 * from vr + mask (when it exists) and reduce.  Children are received one
 * at a time, as their sinks reduce into the same buffer.
 */
herd_status herd__algo_reduce_binomial(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm), root = op->fp.root;
	int vr = herd__algo_tree_pos(comm, root);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	herd_redop redop = (herd_redop)op->fp.redop, eop = herd__algo_elem_op(redop);
	bool widen = herd__dtype_widens(dtype, redop);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t bytes = op->count * herd_dtype_size(wdt);
	bool has_child = !(vr & 1) && vr + 1 < p;
	const void *acc = op->sendbuf;
	void *accbuf = r == root ? op->recvbuf : NULL, *scratch = NULL;
	herd_status st = HERD_OK;

	if (widen) {
		HERD_CHECK(herd__algo_alloc(&scratch, bytes, "a float32 copy of a reduce"));
		herd__narrow_to_float(scratch, op->sendbuf, op->count, dtype);
		acc = accbuf = scratch;
	} else if (r != root && has_child) {
		HERD_CHECK(herd__algo_alloc(&scratch, bytes, "the partial result of a reduce"));
		accbuf = scratch;
	}
	for (int mask = 1; mask < p; mask <<= 1) {
		if (vr & mask) {
			HERD_CHECK_GOTO(herd__algo_xchg(comm, herd__algo_tree_at(comm, root, vr - mask),
							acc, bytes,
							-1, NULL, NULL, 0, wdt, eop),
					st, out);
			break;
		}
		if (vr + mask < p) {
			HERD_CHECK_GOTO(herd__algo_xchg(comm, -1, NULL, 0,
							herd__algo_tree_at(comm, root, vr + mask),
							accbuf, acc, bytes, wdt, eop),
					st, out);
			acc = accbuf;
		}
	}
	if (r == root) {
		if (redop == HERD_AVG)
			herd__reduce_scale(accbuf, op->count, wdt, p);
		if (widen)
			herd__float_to_narrow(op->recvbuf, scratch, op->count, dtype);
	}
out:
	free(scratch);
	return st;
}

/*
 * Ring reduce-scatter then gather, per slice of p blocks.  Only the root
 * writes recvbuf; the other ranks keep partial blocks in scratch.
 * narrow-type SUM/PROD/AVG widen the slice and each rank rounds its
 * own block before sending it to the root.
 */
herd_status herd__algo_reduce_ring(herd_comm *comm, const herd__op *op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm), root = op->fp.root;
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	herd_redop redop = (herd_redop)op->fp.redop;
	bool widen = herd__dtype_widens(dtype, redop);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt);
	size_t count = op->count, block = herd__algo_block_elems(wes);
	size_t slice = block * (size_t)p;
	size_t n_max = count < slice ? count : slice, b_max = n_max / (size_t)p + 1;
	const char *in = op->sendbuf;
	char *out = op->recvbuf;
	/* scratch: two partial blocks and the own block (work type), the
	 * widened slice (float32), the own block rounded (narrow type) */
	size_t tmp_bytes = 3 * b_max * wes, wide_bytes = widen ? n_max * wes : 0;
	size_t own_bytes = b_max * es;
	herd__xfer *gather = NULL;
	char *scratch;
	herd_status st = HERD_OK;

	HERD_CHECK(herd__algo_alloc(&scratch, tmp_bytes + wide_bytes + own_bytes,
				    "the partial blocks of a reduce"));
	if (r == root)
		HERD_CHECK_GOTO(herd__algo_alloc(&gather, (size_t)p * sizeof(*gather),
						 "the gather of a reduce"),
				st, out);
	for (size_t s0 = 0; s0 < count; s0 += slice) {
		herd__ring_layout l = { count - s0 < slice ? count - s0 : slice, 0 };
		const char *sin = in + s0 * es;
		char *own = scratch + 2 * b_max * wes;
		char *wide = scratch + tmp_bytes, *own_narrow = wide + wide_bytes;
		size_t ooff, olen, ng = 0;
		herd__ring_rs rs;

		herd__ring_block(&l, p, r, &ooff, &olen);
		if (widen) {
			herd__narrow_to_float((float *)wide, sin, l.n, dtype);
			sin = wide;
		} else if (r == root) {
			own = out + (s0 + ooff) * es;
		}
		rs = (herd__ring_rs){ .l = l, .in = sin, .tmp = scratch, .own = own, .dtype = wdt,
				      .op = herd__algo_elem_op(redop) };
		HERD_CHECK_GOTO(herd__ring_reduce_scatter(comm, &rs), st, out);
		if (redop == HERD_AVG)
			herd__reduce_scale(own, olen, wdt, p);
		if (widen) {
			if (r == root)
				own_narrow = out + (s0 + ooff) * es;
			herd__float_to_narrow(own_narrow, (const float *)own, olen, dtype);
		} else {
			own_narrow = own;
		}
		if (r != root) {
			HERD_CHECK_GOTO(herd__algo_xchg(comm, root, own_narrow, olen * es, -1, NULL,
							NULL, 0, dtype, HERD_SUM),
					st, out);
			continue;
		}
		for (int b = 0; b < p; b++) {
			size_t off, len;

			herd__ring_block(&l, p, b, &off, &len);
			if (b == r || len == 0)
				continue;
			memset(&gather[ng], 0, sizeof(gather[ng]));
			gather[ng].peer = b;
			gather[ng].len = len * es;
			gather[ng].sink.dst = out + (s0 + off) * es;
			gather[ng].sink.dtype = dtype;
			gather[ng].sink.op = HERD_SUM;
			ng++;
		}
		if (ng > 0)
			HERD_CHECK_GOTO(herd__p2p_exchange(comm, NULL, 0, gather, ng), st, out);
	}
out:
	free(gather);
	free(scratch);
	return st;
}

/* Root: one exchange with every other rank (sends when scatter, else
 * receives); the root's own block is copied. */
static herd_status rooted_linear(herd_comm *comm, const herd__op *op, bool scatter)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm), root = op->fp.root;
	size_t block = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);
	herd__xfer *x;
	size_t n = 0;
	herd_status st;

	if (block == 0)
		return HERD_OK;
	if (r != root)
		return scatter ? herd__algo_xchg(comm, -1, NULL, 0, root, op->recvbuf, NULL, block,
						 HERD_UINT8, HERD_SUM)
			       : herd__algo_xchg(comm, root, op->sendbuf, block, -1, NULL, NULL, 0,
						 HERD_UINT8, HERD_SUM);
	if (scatter && op->recvbuf != (const char *)op->sendbuf + (size_t)r * block)
		memcpy(op->recvbuf, (const char *)op->sendbuf + (size_t)r * block, block);
	if (!scatter && op->sendbuf != (char *)op->recvbuf + (size_t)r * block)
		memcpy((char *)op->recvbuf + (size_t)r * block, op->sendbuf, block);
	if (p == 1)
		return HERD_OK;
	HERD_CHECK(herd__algo_alloc(&x, (size_t)p * sizeof(*x), "the transfers of a gather"));
	for (int b = 0; b < p; b++) {
		if (b == r)
			continue;
		memset(&x[n], 0, sizeof(x[n]));
		x[n].peer = b;
		x[n].len = block;
		if (scatter) {
			x[n].buf = (const char *)op->sendbuf + (size_t)b * block;
		} else {
			x[n].sink.dst = (char *)op->recvbuf + (size_t)b * block;
			x[n].sink.dtype = HERD_UINT8;
			x[n].sink.op = HERD_SUM;
		}
		n++;
	}
	st = scatter ? herd__p2p_exchange(comm, x, n, NULL, 0)
		     : herd__p2p_exchange(comm, NULL, 0, x, n);
	free(x);
	return st;
}

herd_status herd__algo_gather(herd_comm *comm, const herd__op *op)
{
	return rooted_linear(comm, op, false);
}

herd_status herd__algo_scatter(herd_comm *comm, const herd__op *op)
{
	return rooted_linear(comm, op, true);
}
