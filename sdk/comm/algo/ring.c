/*
 * sdk/comm/algo/ring.c - the ring: reduce-scatter and allgather in p - 1
 * steps each, every step sending one block to the next rank while the
 * previous rank's block arrives.  Each rank sends and receives (p-1)/p of
 * the data per phase, which is optimal for bandwidth; the sink reduces
 * straight from the transport into the destination, so no step copies.
 *
 * Numbering: at reduce-scatter step k rank r sends block r-k-1 and
 * receives block r-k-2, so after p-1 steps it holds block r complete; at
 * allgather step k it sends block r-k and receives block r-k-1.
 *
 * The steps are built one at a time (herd__ring_rs_step,
 * herd__ring_ag_step) so that a caller can run the steps of two rings in
 * one exchange, as the pipelined allreduce does.
 *
 * The ring runs through the ranks host by host (herd__place.host_ranks:
 * hosts in the order of their lowest ranks, each host's ranks in rank
 * order), so that it crosses between hosts once per host whatever order
 * the ranks were numbered in (a cyclic placement would cross at every
 * step).  Positions on the ring replace ranks in the numbering above;
 * blocks keep their owners' rank numbers.
 */
#include <string.h>

#include "comm/algo/algo.h"

size_t herd__ring_max_block(const herd__ring_layout *l, int p)
{
	if (l->stride != 0)
		return l->n;
	return l->n / (size_t)p + (l->n % (size_t)p ? 1 : 0);
}

static void set_send(herd__xfer *x, int peer, const void *buf, size_t len)
{
	memset(x, 0, sizeof(*x));
	x->peer = peer;
	x->buf = buf;
	x->len = len;
}

static void set_recv(herd__xfer *x, int peer, void *dst, const void *with, size_t len,
		     herd_dtype dtype, herd_redop op)
{
	memset(x, 0, sizeof(*x));
	x->peer = peer;
	x->len = len;
	x->sink.dst = dst;
	x->sink.reduce_with = with;
	x->sink.dtype = dtype;
	x->sink.op = op;
}

void herd__ring_rs_step(herd__ring_rs *rs, herd_comm *comm, int k, herd__xfer *send,
			herd__xfer *recv)
{
	int p = herd_comm_size(comm), r = herd__algo_pos(comm);
	int sb = herd__algo_at(comm, r - k - 1), rb = herd__algo_at(comm, r - k - 2);
	size_t es = herd_dtype_size(rs->dtype), soff, slen, roff, rlen;
	const char *in = rs->in;
	const char *src;
	char *dst;

	herd__ring_block(&rs->l, p, sb, &soff, &slen);
	herd__ring_block(&rs->l, p, rb, &roff, &rlen);
	src = k == 0 ? in + soff * es : rs->prev;
	if (k == p - 2)
		dst = rs->own;
	else if (rs->work != NULL)
		dst = (char *)rs->work + roff * es;
	else
		dst = (char *)rs->tmp + (size_t)(k % 2) * herd__ring_max_block(&rs->l, p) * es;
	set_send(send, herd__algo_at(comm, r + 1), src, slen * es);
	set_recv(recv, herd__algo_at(comm, r - 1), dst, in + roff * es, rlen * es, rs->dtype,
		 rs->op);
	rs->prev = dst;
}

void herd__ring_ag_step(const herd__ring_layout *l, void *buf, herd_dtype dtype,
			herd_comm *comm, int k, herd__xfer *send, herd__xfer *recv)
{
	int p = herd_comm_size(comm), r = herd__algo_pos(comm);
	int sb = herd__algo_at(comm, r - k), rb = herd__algo_at(comm, r - k - 1);
	size_t es = herd_dtype_size(dtype), soff, slen, roff, rlen;
	char *cbuf = buf;

	herd__ring_block(l, p, sb, &soff, &slen);
	herd__ring_block(l, p, rb, &roff, &rlen);
	set_send(send, herd__algo_at(comm, r + 1), cbuf + soff * es, slen * es);
	set_recv(recv, herd__algo_at(comm, r - 1), cbuf + roff * es, NULL, rlen * es, dtype,
		 HERD_SUM);
}

herd_status herd__ring_exchange(herd_comm *comm, herd__xfer *sends, size_t nsends,
				herd__xfer *recvs, size_t nrecvs)
{
	size_t ns = 0, nr = 0;

	for (size_t i = 0; i < nsends; i++)
		if (sends[i].len > 0)
			sends[ns++] = sends[i];
	for (size_t i = 0; i < nrecvs; i++)
		if (recvs[i].len > 0)
			recvs[nr++] = recvs[i];
	if (ns == 0 && nr == 0)
		return HERD_OK;
	return herd__p2p_exchange(comm, sends, ns, recvs, nr);
}

herd_status herd__ring_reduce_scatter(herd_comm *comm, herd__ring_rs *rs)
{
	int p = herd_comm_size(comm);

	if (p == 1) {
		size_t off, len, es = herd_dtype_size(rs->dtype);

		herd__ring_block(&rs->l, p, 0, &off, &len);
		if (rs->own != (const char *)rs->in + off * es && len > 0)
			memmove(rs->own, (const char *)rs->in + off * es, len * es);
		return HERD_OK;
	}
	for (int k = 0; k < p - 1; k++) {
		herd__xfer send, recv;

		herd__ring_rs_step(rs, comm, k, &send, &recv);
		HERD_CHECK(herd__ring_exchange(comm, &send, 1, &recv, 1));
	}
	return HERD_OK;
}

herd_status herd__ring_allgather(herd_comm *comm, const herd__ring_layout *l, void *buf,
				 herd_dtype dtype)
{
	int p = herd_comm_size(comm);

	for (int k = 0; k < p - 1; k++) {
		herd__xfer send, recv;

		herd__ring_ag_step(l, buf, dtype, comm, k, &send, &recv);
		HERD_CHECK(herd__ring_exchange(comm, &send, 1, &recv, 1));
	}
	return HERD_OK;
}
