/*
 * sdk/comm/algo_util.c - what the collective algorithms share: the choice
 * between latency and bandwidth algorithms, one-send-one-receive steps,
 * scratch memory.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo.h"

size_t herd__algo_block_bytes = HERD__ALGO_BLOCK;
size_t herd__direct_min_bytes = HERD__DIRECT_MIN;

herd__algo_kind herd__algo_pick(const herd_comm *comm, size_t bytes)
{
	const char *algo = herd__comm_algo(comm);

	if (algo != NULL && strcmp(algo, "ring") == 0)
		return HERD__ALGO_BANDWIDTH;
	if (algo != NULL && strcmp(algo, "rd") == 0)
		return HERD__ALGO_LATENCY;
	return bytes < HERD__ALGO_SMALL ? HERD__ALGO_LATENCY : HERD__ALGO_BANDWIDTH;
}

bool herd__algo_auto(const herd_comm *comm)
{
	const char *algo = herd__comm_algo(comm);

	return algo == NULL || (strcmp(algo, "ring") != 0 && strcmp(algo, "rd") != 0);
}

herd_status herd__algo_xchg(herd_comm *comm, int to, const void *sbuf, size_t slen, int from,
			    void *dst, const void *with, size_t rlen, herd_dtype dtype,
			    herd_redop op)
{
	herd__xfer send = { 0 }, recv = { 0 };
	size_t nsend = 0, nrecv = 0;

	if (to >= 0 && slen > 0) {
		send.peer = to;
		send.buf = sbuf;
		send.len = slen;
		nsend = 1;
	}
	if (from >= 0 && rlen > 0) {
		recv.peer = from;
		recv.len = rlen;
		recv.sink.dst = dst;
		recv.sink.reduce_with = with;
		recv.sink.dtype = dtype;
		recv.sink.op = herd__algo_elem_op(op);
		nrecv = 1;
	}
	if (nsend == 0 && nrecv == 0)
		return HERD_OK;
	return herd__p2p_exchange(comm, &send, nsend, &recv, nrecv);
}

herd_status herd__algo_alloc(void *out_ptr, size_t bytes, const char *what)
{
	void *p = malloc(bytes ? bytes : 1);

	if (p == NULL)
		return herd__error(HERD_ENOMEM, "out of memory allocating %zu bytes for %s", bytes,
				   what);
	memcpy(out_ptr, &p, sizeof(p));
	return HERD_OK;
}

bool herd__algo_widens(herd_dtype dtype, herd_redop op)
{
	return (dtype == HERD_FLOAT16 || dtype == HERD_BFLOAT16) &&
	       (op == HERD_SUM || op == HERD_PROD || op == HERD_AVG);
}
