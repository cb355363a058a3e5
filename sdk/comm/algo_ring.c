/*
 * sdk/comm/algo_ring.c - the ring: reduce-scatter and allgather in p - 1
 * steps each, every step sending one block to the next rank while the
 * previous rank's block arrives.  Each rank sends and receives (p-1)/p of
 * the data per phase, which is optimal for bandwidth; the sink reduces
 * straight from the transport into the destination, so no step copies.
 *
 * Numbering: at reduce-scatter step k rank r sends block r-k-1 and
 * receives block r-k-2, so after p-1 steps it holds block r complete; at
 * allgather step k it sends block r-k and receives block r-k-1.
 */
#include <string.h>

#include "comm/algo.h"

size_t herd__ring_max_block(const herd__ring_layout *l, int p)
{
	if (l->stride != 0)
		return l->n;
	return l->n / (size_t)p + (l->n % (size_t)p ? 1 : 0);
}

herd_status herd__ring_reduce_scatter(herd_comm *comm, const herd__ring_layout *l,
				      const void *in, void *work, void *tmp, void *own,
				      herd_dtype dtype, herd_redop op)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	int right = herd__algo_mod(r + 1, p), left = herd__algo_mod(r - 1, p);
	size_t es = herd_dtype_size(dtype), tmp_half = herd__ring_max_block(l, p) * es;
	const char *cin = in;
	char *cwork = work, *ctmp = tmp;
	const char *prev = NULL;

	if (p == 1) {
		size_t off, len;

		herd__ring_block(l, p, 0, &off, &len);
		if (own != cin + off * es && len > 0)
			memmove(own, cin + off * es, len * es);
		return HERD_OK;
	}
	for (int k = 0; k < p - 1; k++) {
		int sb = herd__algo_mod(r - k - 1, p), rb = herd__algo_mod(r - k - 2, p);
		size_t soff, slen, roff, rlen;
		const char *src;
		char *dst;

		herd__ring_block(l, p, sb, &soff, &slen);
		herd__ring_block(l, p, rb, &roff, &rlen);
		src = k == 0 ? cin + soff * es : prev;
		if (k == p - 2)
			dst = own;
		else if (cwork != NULL)
			dst = cwork + roff * es;
		else
			dst = ctmp + (size_t)(k % 2) * tmp_half;
		HERD_CHECK(herd__algo_xchg(comm, right, src, slen * es, left, dst, cin + roff * es,
					   rlen * es, dtype, op));
		prev = dst;
	}
	return HERD_OK;
}

herd_status herd__ring_allgather(herd_comm *comm, const herd__ring_layout *l, void *buf,
				 herd_dtype dtype)
{
	int p = herd_comm_size(comm), r = herd_comm_rank(comm);
	int right = herd__algo_mod(r + 1, p), left = herd__algo_mod(r - 1, p);
	size_t es = herd_dtype_size(dtype);
	char *cbuf = buf;

	for (int k = 0; k < p - 1; k++) {
		int sb = herd__algo_mod(r - k, p), rb = herd__algo_mod(r - k - 1, p);
		size_t soff, slen, roff, rlen;

		herd__ring_block(l, p, sb, &soff, &slen);
		herd__ring_block(l, p, rb, &roff, &rlen);
		HERD_CHECK(herd__algo_xchg(comm, right, cbuf + soff * es, slen * es, left,
					   cbuf + roff * es, NULL, rlen * es, dtype, HERD_SUM));
	}
	return HERD_OK;
}
