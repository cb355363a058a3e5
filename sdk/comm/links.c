/*
 * sdk/comm/links.c - the figures of the links between hosts that tune.c's
 * cost model weighs algorithms with: a small message's one-way time and
 * the time per byte.
 *
 * A communicator whose ranks are on several hosts settles them at the end
 * of its init, as one exchange of every rank, from rank 0's view:
 *
 *  - HERD_NET_LINK=LATENCY_US,GBIT_PER_S: as given;
 *  - otherwise the speed of rank 0's interface toward the lowest rank of
 *    the next host (hosts are numbered by their lowest ranks), as the
 *    kernel reports it (/sys/class/net/IF/speed), and DEFAULT_LAT_US, a
 *    TCP hop through two kernels; 10 Gbit/s where the interface reports
 *    none.  So the same machines give the same figures, the same choices
 *    and the same bits in every run;
 *  - HERD_NET_LINK=measure: measured between those two ranks (rank 0
 *    tells the other in one message whether it measures):
 *    PROBE_PINGS round trips of 8 bytes (the fastest, halved, is the
 *    latency) and PROBE_SENDS transfers of PROBE_BYTES each answered by 8
 *    bytes (the fastest, less the round trip, over its bytes is the time
 *    per byte); about 20 ms on a link of 1 Gbit/s.  A measurement varies
 *    from run to run, and where it tips a choice, so do a float
 *    reduction's last bits.
 *
 * Then rank 0's figures go to every rank down a binomial tree, so that
 * every rank weighs with the same figures and picks the same algorithm.
 * One pair stands for every pair: the hosts of a job are alike, and where
 * they are not, HERD_NET_LINK says what to assume.
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base.h"
#include "comm/core.h"
#include "comm/algo/algo.h"

#define DEFAULT_LAT_US 20.0
#define DEFAULT_GBIT 10.0
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

/*
 * Rank 0 tells its partner q whether it measures (one message: q cannot
 * know rank 0's HERD_NET_LINK); when it does, the two time PROBE_PINGS
 * round trips and PROBE_SENDS transfers, and rank 0's fig gets the
 * latency and the time per byte.
 */
static herd_status probe_pair(herd_comm *comm, bool measuring, int peer, double *fig)
{
	double flag[1] = { comm->cfg.net_measure ? 1.0 : 0.0 }, back[1] = { 0 };
	double rtt = 1e30, xfer = 1e30, t;
	char *big = NULL;
	herd_status st = HERD_OK;

	if (measuring)
		HERD_CHECK(herd__algo_xchg(comm, peer, flag, sizeof(flag), -1, NULL, NULL, 0,
					   HERD_UINT8, HERD_SUM));
	else
		HERD_CHECK(herd__algo_xchg(comm, -1, NULL, 0, peer, flag, NULL, sizeof(flag),
					   HERD_UINT8, HERD_SUM));
	if (flag[0] == 0.0)
		return HERD_OK;
	for (int i = 0; i < PROBE_PINGS; i++) {
		HERD_CHECK(round_trip(comm, measuring, peer, back, sizeof(double), back,
				      sizeof(double), &t));
		rtt = t < rtt ? t : rtt;
	}
	HERD_CHECK(herd__algo_alloc(&big, PROBE_BYTES, "the link probe"));
	memset(big, 0, PROBE_BYTES);
	for (int i = 0; i < PROBE_SENDS && st == HERD_OK; i++) {
		st = round_trip(comm, measuring, peer, measuring ? (void *)big : (void *)back,
				PROBE_BYTES, measuring ? (void *)back : (void *)big, sizeof(double),
				&t);
		xfer = t < xfer ? t : xfer;
	}
	free(big);
	HERD_CHECK(st);
	if (!measuring)
		return HERD_OK;
	fig[0] = rtt / 2;
	/* at least a byte per nanosecond's thousandth: a link no clock can
	 * tell from free stays finite */
	fig[1] = (xfer - rtt) / PROBE_BYTES;
	if (fig[1] < 1e-12)
		fig[1] = 1e-12;
	return HERD_OK;
}

/*
 * The interface of this rank's end of the connection fd, into name, and its
 * speed in Gbit/s; 0 when the kernel reports none (virtual interfaces may
 * report -1).
 */
static double interface_speed(int fd, char *name, size_t cap)
{
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	struct ifaddrs *ifs = NULL;
	char path[64 + IF_NAMESIZE], *text = NULL;
	size_t tlen = 0;
	double mbit = 0;

	name[0] = '\0';
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&me, &len) != 0 ||
	    me.sin_family != AF_INET || getifaddrs(&ifs) != 0)
		return 0;
	for (const struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next)
		if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
		    ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
		    me.sin_addr.s_addr) {
			herd__strlcpy(name, i->ifa_name, cap);
			break;
		}
	freeifaddrs(ifs);
	if (name[0] == '\0')
		return 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
	if (herd__read_file(path, 64, &text, &tlen) == HERD_OK)
		mbit = strtod(text, NULL);
	free(text);
	herd_clear_error();
	return mbit > 0 ? mbit / 1000 : 0;
}

/* Rank 0's figures when it measures none: given, or its interface's. */
static void settled_figures(herd_comm *comm, int q, double *fig, char *ifname, size_t cap)
{
	double gbit;

	if (comm->cfg.net_lat_us > 0) {
		fig[0] = comm->cfg.net_lat_us * 1e-6;
		fig[1] = 8.0 / (comm->cfg.net_gbit * 1e9);
		fig[2] = HERD__NET_GIVEN;
		return;
	}
	gbit = interface_speed(comm->peers[q].ctl_fd, ifname, cap);
	fig[0] = DEFAULT_LAT_US * 1e-6;
	fig[1] = 8.0 / ((gbit > 0 ? gbit : DEFAULT_GBIT) * 1e9);
	fig[2] = gbit > 0 ? HERD__NET_INTERFACE : HERD__NET_ASSUMED;
}

herd_status herd__links_probe(herd_comm *comm, const herd__op *op)
{
	herd__place *pl = &comm->place;
	int r = comm->rank, q = pl->host_ranks[pl->host_start[1]];
	/* latency, time per byte, where from; the interface's name */
	struct {
		double fig[3];
		char ifname[sizeof(pl->net_if)];
	} m;
	herd__op bcast;
	char from[64];

	(void)op;
	memset(&m, 0, sizeof(m));
	if (r == 0 || r == q)
		HERD_CHECK(probe_pair(comm, r == 0, r == 0 ? q : 0, m.fig));
	if (r == 0 && comm->cfg.net_measure)
		m.fig[2] = HERD__NET_MEASURED;
	else if (r == 0)
		settled_figures(comm, q, m.fig, m.ifname, sizeof(m.ifname));
	memset(&bcast, 0, sizeof(bcast));
	bcast.fp.kind = HERD__OP_BROADCAST;
	bcast.fp.dtype = HERD_UINT8;
	bcast.fp.root = 0;
	bcast.count = sizeof(m);
	bcast.sendbuf = &m;
	bcast.recvbuf = &m;
	HERD_CHECK(herd__algo_broadcast_binomial(comm, &bcast));
	pl->net_lat_s = m.fig[0];
	pl->net_byte_s = m.fig[1];
	pl->net_from = (int)m.fig[2];
	m.ifname[sizeof(m.ifname) - 1] = '\0';
	herd__strlcpy(pl->net_if, m.ifname, sizeof(pl->net_if));
	herd__log_debug("communicator %s: links between hosts (%s): %.1f us one way, %.3f GB/s",
			comm->id_hex, herd__tune_links_from(pl, from, sizeof(from)),
			pl->net_lat_s * 1e6, 1e-9 / pl->net_byte_s);
	return HERD_OK;
}
