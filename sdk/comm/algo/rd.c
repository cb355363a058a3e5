/*
 * sdk/comm/algo/rd.c - the latency algorithms: recursive doubling for
 * allreduce, Bruck for allgather.  Both take ceil(log2 p) steps (recursive
 * doubling two more when p is not a power of two), each moving whole
 * vectors, which is what small messages want.  For the tiniest vectors a
 * one-shot allreduce takes a single step, at the price of p - 1 messages
 * per rank.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

/*
 * Ranks are taken by position, host by host (herd__algo_pos), so that the
 * first steps pair ranks of one host and fewer cross between hosts.
 * Positions below 2 * rem, rem = p - (largest power of two <= p), pair up
 * first: the even one hands its vector to the odd one and waits for the
 * result at the end.  The remaining p2 ranks ("new ranks" 0..p2-1) run the
 * doubling: at step m each exchanges its partial result with new rank
 * (new ^ m) and reduces.
 *
 * A step sends the current vector while the reduction of the received one
 * is written, so each result goes to the buffer the step does not send
 * from: out and tmp alternate, arranged so that the last result lands in
 * out.
 */
herd_status herd__rd_allreduce(herd_comm *comm, const void *in, void *out, void *tmp,
			       size_t count, herd_dtype dtype, herd_redop op)
{
	/* positions host by host: the early steps stay inside a host */
	int p = herd_comm_size(comm), r = herd__algo_pos(comm);
	int up = herd__algo_at(comm, r + 1), down = herd__algo_at(comm, r - 1);
	size_t bytes = count * herd_dtype_size(dtype);
	int p2 = 1, rem, newrank, steps = 0, done = 0;
	const char *cur = in;

	while (p2 * 2 <= p)
		p2 *= 2;
	rem = p - p2;
	if (r < 2 * rem)
		newrank = r % 2 ? r / 2 : -1;
	else
		newrank = r - rem;
	if (newrank >= 0) {
		steps = r < 2 * rem ? 1 : 0;
		for (int m = 1; m < p2; m <<= 1)
			steps++;
	}
	if (bytes == 0)
		return HERD_OK;
	if (steps % 2 == 1 && in == out) {
		/* the first result goes to out, which the first step sends */
		memcpy(tmp, in, bytes);
		cur = tmp;
	}

#define RD_NEXT_DST() ((steps - ++done) % 2 == 0 ? (char *)out : (char *)tmp)
	if (r < 2 * rem) {
		if (r % 2 == 0) {
			HERD_CHECK(herd__algo_xchg(comm, up, cur, bytes, -1, NULL, NULL, 0, dtype, op));
		} else {
			char *dst = RD_NEXT_DST();

			HERD_CHECK(herd__algo_xchg(comm, -1, NULL, 0, down, dst, cur, bytes, dtype, op));
			cur = dst;
		}
	}
	if (newrank >= 0) {
		for (int m = 1; m < p2; m <<= 1) {
			int pn = newrank ^ m;
			int partner = herd__algo_at(comm, pn < rem ? pn * 2 + 1 : pn + rem);
			char *dst = RD_NEXT_DST();

			HERD_CHECK(herd__algo_xchg(comm, partner, cur, bytes, partner, dst, cur, bytes,
						   dtype, op));
			cur = dst;
		}
		if (steps == 0 && out != in)
			memcpy(out, in, bytes);  /* p == 1 */
	}
#undef RD_NEXT_DST
	if (r < 2 * rem) {
		if (r % 2 == 1)
			HERD_CHECK(herd__algo_xchg(comm, down, out, bytes, -1, NULL, NULL, 0, dtype, op));
		else
			HERD_CHECK(herd__algo_xchg(comm, -1, NULL, 0, up, out, NULL, bytes, dtype, op));
	}
	return HERD_OK;
}

/* Small calls keep their scratch on the stack: no allocation on the
 * latency path. */
#define RD_STACK_BYTES 4096

herd_status herd__rd_allreduce_full(herd_comm *comm, const void *in, void *out, size_t count,
				    herd_dtype dtype, herd_redop op)
{
	int p = herd_comm_size(comm);
	herd_redop eop = herd__algo_elem_op(op);
	bool widen = herd__dtype_widens(dtype, op);
	size_t bytes = count * (widen ? 2 * sizeof(float) : herd_dtype_size(dtype));
	_Alignas(64) unsigned char stack[RD_STACK_BYTES];
	void *scratch = stack;
	herd_status st;

	if (count == 0)
		return HERD_OK;
	if (bytes > sizeof(stack))
		HERD_CHECK(herd__algo_alloc(&scratch, bytes, widen ? "float32 copies of a "
					    "narrow-type allreduce" : "the partial results of "
					    "an allreduce"));
	if (widen) {
		float *wide = scratch;

		herd__narrow_to_float(wide, in, count, dtype);
		st = herd__rd_allreduce(comm, wide, wide, wide + count, count, HERD_FLOAT32, eop);
		if (st == HERD_OK) {
			if (op == HERD_AVG)
				herd__reduce_scale(wide, count, HERD_FLOAT32, p);
			herd__float_to_narrow(out, wide, count, dtype);
		}
	} else {
		st = herd__rd_allreduce(comm, in, out, scratch, count, dtype, eop);
		if (st == HERD_OK && op == HERD_AVG)
			herd__reduce_scale(out, count, dtype, p);
	}
	if (scratch != stack)
		free(scratch);
	return st;
}

/*
 * Every rank's vector lands in slot j of `all` (the rank's own is copied
 * there, so that in may equal out), then out = all[0] op all[1] op ...
 * in rank order.  narrow-type SUM/PROD/AVG widen the p vectors into
 * float32 first and round the result once.
 */
herd_status herd__oneshot_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				    herd_dtype dtype, herd_redop op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	bool widen = herd__dtype_widens(dtype, op);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	herd_redop eop = herd__algo_elem_op(op);
	size_t bytes = count * herd_dtype_size(dtype), wbytes = count * herd_dtype_size(wdt);
	size_t need = (size_t)p * bytes + (widen ? (size_t)p * wbytes : 0);
	_Alignas(64) unsigned char stack[RD_STACK_BYTES];
	herd__xfer sends[HERD__ONESHOT_RANKS], recvs[HERD__ONESHOT_RANKS];
	unsigned char *all = stack, *work, *acc;
	size_t n = 0;
	herd_status st;

	if (count == 0)
		return HERD_OK;
	if (p > HERD__ONESHOT_RANKS)
		return herd__error(HERD_EINTERNAL, "one-shot allreduce on %d ranks (at most %d)", p,
				   HERD__ONESHOT_RANKS);
	if (need > sizeof(stack))
		HERD_CHECK(herd__algo_alloc(&all, need, "a one-shot allreduce"));
	memcpy(all + (size_t)r * bytes, in, bytes);
	for (int j = 0; j < p; j++) {
		if (j == r)
			continue;
		memset(&sends[n], 0, sizeof(sends[n]));
		sends[n].peer = j;
		sends[n].buf = in;
		sends[n].len = bytes;
		memset(&recvs[n], 0, sizeof(recvs[n]));
		recvs[n].peer = j;
		recvs[n].len = bytes;
		recvs[n].sink.dst = all + (size_t)j * bytes;
		recvs[n].sink.dtype = dtype;
		recvs[n].sink.op = HERD_SUM;
		n++;
	}
	st = herd__p2p_exchange(comm, sends, n, recvs, n);
	if (st == HERD_OK) {
		work = all;
		if (widen) {
			work = all + (size_t)p * bytes;
			herd__narrow_to_float((float *)work, all, (size_t)p * count,
					    dtype);
		}
		acc = widen ? work : out;
		herd__reduce(acc, work, work + wbytes, count, wdt, eop);
		for (int j = 2; j < p; j++)
			herd__reduce(acc, acc, work + (size_t)j * wbytes, count, wdt, eop);
		if (op == HERD_AVG)
			herd__reduce_scale(acc, count, wdt, p);
		if (widen)
			herd__float_to_narrow(out, (const float *)acc, count, dtype);
	}
	if (all != stack)
		free(all);
	return st;
}

/* Adds the one or two pieces of the run of n blocks from block `first`,
 * wrapping at p, to xfers (sends when send, else receives into buf). */
static size_t bruck_pieces(herd__xfer *x, int peer, bool send, char *buf, int first, int n,
			   int p, size_t block, herd_dtype dtype)
{
	size_t k = 0;
	int end = first + n;

	for (int piece = 0; piece < 2; piece++) {
		int from = piece == 0 ? first : 0;
		int to = piece == 0 ? (end < p ? end : p) : end - p;

		if (to <= from)
			continue;
		memset(&x[k], 0, sizeof(x[k]));
		x[k].peer = peer;
		x[k].len = (size_t)(to - from) * block;
		if (send) {
			x[k].buf = buf + (size_t)from * block;
		} else {
			x[k].sink.dst = buf + (size_t)from * block;
			x[k].sink.dtype = dtype;
			x[k].sink.op = HERD_SUM;
		}
		k++;
	}
	return k;
}

/*
 * Step d = 1, 2, 4, ...: rank r holds blocks r .. r+d-1 (mod p), sends
 * the first min(d, p-d) of them to rank r-d and receives as many from
 * rank r+d, which are blocks r+d onward.  Blocks land at their final
 * places, so a run that wraps past block p-1 travels as two messages,
 * split at the same block by sender and receiver.
 */
herd_status herd__bruck_allgather(herd_comm *comm, void *buf, size_t count, herd_dtype dtype)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	size_t block = count * herd_dtype_size(dtype);

	if (block == 0)
		return HERD_OK;
	for (int d = 1; d < p; d <<= 1) {
		int n = d < p - d ? d : p - d;
		herd__xfer sends[2], recvs[2];
		size_t ns, nr;

		ns = bruck_pieces(sends, herd__algo_mod(r - d, p), true, buf, r, n, p, block, dtype);
		nr = bruck_pieces(recvs, herd__algo_mod(r + d, p), false, buf,
				  herd__algo_mod(r + d, p), n, p, block, dtype);
		HERD_CHECK(herd__p2p_exchange(comm, sends, ns, recvs, nr));
	}
	return HERD_OK;
}
