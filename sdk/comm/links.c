/*
 * sdk/comm/links.c - the figures of the links between hosts that tune.c's
 * cost model weighs algorithms with: a small message's one-way time and
 * the time per byte.
 *
 * A communicator whose ranks are on several hosts settles them at the end
 * of its init, as one exchange on every rank: rank 0 and the lowest rank
 * of the next host (hosts are numbered by their lowest ranks) time
 * PROBE_PINGS round trips of 8 bytes (the fastest, halved, is the
 * latency) and, unless rank 0 was given HERD_NET_LINK, PROBE_SENDS
 * transfers of PROBE_BYTES each answered by 8 bytes (the fastest, less
 * the round trip, over its bytes is the time per byte); then rank 0's
 * figures go to every rank down a binomial tree, so that every rank
 * weighs with the same figures and picks the same algorithm.  On a link
 * of 1 Gbit/s this takes about 20 ms, at 100 Gbit/s under 1 ms.
 *
 * One pair measured stands for every pair: the hosts of a job are alike,
 * and where they are not, HERD_NET_LINK says what to assume.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "comm/core.h"
#include "comm/algo/algo.h"

#define PROBE_PINGS 8
#define PROBE_SENDS 2
#define PROBE_BYTES (1024u * 1024u)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One message of len bytes to `to`, then len_back bytes back from it
 * (the measuring side), or the reverse (the answering side): seconds. */
static herd_status round_trip(herd_comm *comm, bool measuring, int peer, const void *out,
			      size_t len, void *in, size_t len_back, double *secs)
{
	double t0 = now_s();

	if (measuring) {
		HERD_CHECK(herd__algo_xchg(comm, peer, out, len, -1, NULL, NULL, 0, HERD_UINT8,
					   HERD_SUM));
		HERD_CHECK(herd__algo_xchg(comm, -1, NULL, 0, peer, in, NULL, len_back, HERD_UINT8,
					   HERD_SUM));
	} else {
		HERD_CHECK(herd__algo_xchg(comm, -1, NULL, 0, peer, in, NULL, len, HERD_UINT8,
					   HERD_SUM));
		HERD_CHECK(herd__algo_xchg(comm, peer, out, len_back, -1, NULL, NULL, 0,
					   HERD_UINT8, HERD_SUM));
	}
	*secs = now_s() - t0;
	return HERD_OK;
}

static herd_status probe_pair(herd_comm *comm, bool measuring, int peer, double *fig)
{
	double given = comm->cfg.net_lat_us > 0 ? 1.0 : 0.0, flag[1] = { given }, back[1] = { 0 };
	double rtt = 1e30, xfer = 1e30, t;
	char *big = NULL;
	herd_status st = HERD_OK;

	for (int i = 0; i < PROBE_PINGS; i++) {
		/* the first ping carries rank 0's "given" to its partner */
		HERD_CHECK(round_trip(comm, measuring, peer, measuring ? flag : back, sizeof(double),
				      measuring ? back : flag, sizeof(double), &t));
		rtt = t < rtt ? t : rtt;
	}
	if (flag[0] == 0.0) {
		HERD_CHECK(herd__algo_alloc(&big, PROBE_BYTES, "the link probe"));
		memset(big, 0, PROBE_BYTES);
		for (int i = 0; i < PROBE_SENDS && st == HERD_OK; i++) {
			st = round_trip(comm, measuring, peer, measuring ? (void *)big : (void *)back,
					PROBE_BYTES, measuring ? (void *)back : (void *)big,
					sizeof(double), &t);
			xfer = t < xfer ? t : xfer;
		}
		free(big);
		HERD_CHECK(st);
	}
	if (!measuring)
		return HERD_OK;
	if (given != 0.0) {
		fig[0] = comm->cfg.net_lat_us * 1e-6;
		fig[1] = 8.0 / (comm->cfg.net_gbit * 1e9);
		return HERD_OK;
	}
	fig[0] = rtt / 2;
	/* at least a byte per nanosecond's thousandth: a link no clock can
	 * tell from free stays finite */
	fig[1] = (xfer - rtt) / PROBE_BYTES;
	if (fig[1] < 1e-12)
		fig[1] = 1e-12;
	return HERD_OK;
}

herd_status herd__links_probe(herd_comm *comm, const herd__op *op)
{
	herd__place *pl = &comm->place;
	int r = comm->rank, q = pl->host_ranks[pl->host_start[1]];
	double fig[3] = { 0, 0, 0 };
	herd__op bcast;

	(void)op;
	if (r == 0 || r == q)
		HERD_CHECK(probe_pair(comm, r == 0, r == 0 ? q : 0, fig));
	if (r == 0)
		fig[2] = comm->cfg.net_lat_us > 0 ? HERD__NET_GIVEN : HERD__NET_MEASURED;
	memset(&bcast, 0, sizeof(bcast));
	bcast.fp.kind = HERD__OP_BROADCAST;
	bcast.fp.dtype = HERD_FLOAT64;
	bcast.fp.root = 0;
	bcast.count = 3;
	bcast.sendbuf = fig;
	bcast.recvbuf = fig;
	HERD_CHECK(herd__algo_broadcast_binomial(comm, &bcast));
	pl->net_lat_s = fig[0];
	pl->net_byte_s = fig[1];
	pl->net_from = (int)fig[2];
	herd__log_debug("communicator %s: links between hosts %s: %.1f us one way, %.3f GB/s",
			comm->id_hex, pl->net_from == HERD__NET_GIVEN ? "given by HERD_NET_LINK"
			: "measured", pl->net_lat_s * 1e6, 1e-9 / pl->net_byte_s);
	return HERD_OK;
}
