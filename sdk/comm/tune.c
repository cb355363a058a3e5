/*
 * sdk/comm/tune.c - which algorithm runs a call: one table, operation x
 * size x placement.
 *
 * A call with nothing to send, or on one rank, needs no peer and goes to
 * herd__algo_local.  Otherwise the first row of the table that fits wins:
 *
 *  - its operation is the call's;
 *  - its class is allowed: "auto" (HERD__CLASS_ANY as the force) takes any
 *    row within its size bounds; "ring" and "rd" force the bandwidth or the
 *    latency rows whatever the size, and never take a tuned one; "hier"
 *    takes a two-level row first whatever the size where the hosts allow
 *    (several, several ranks on some), and is "auto" otherwise;
 *  - the placement has what the row needs (a transport that runs whole
 *    collectives, every rank on one host, some pair over TCP, a power of
 *    two ranks, several hosts with several ranks on some) and the rank
 *    count is within its bounds;
 *  - the call's size is within its bounds, counted as what the latency
 *    algorithm moves in a step: the vector for allreduce, reduce and
 *    broadcast (0 for allreduce and reduce with fewer elements than ranks,
 *    which leave ring blocks empty), all p blocks for allgather,
 *    reduce_scatter and alltoall.
 *
 * Where the ranks are on several hosts, "auto" (and "hier" where no
 * two-level row fits) weighs the rows instead: the cost model below takes
 * the row of least estimated time among those whose placement needs are
 * met, whatever their size bounds.
 *
 * Every rank computes the same row: the call's fingerprint is checked
 * alike everywhere, and the placement (link figures included) is the same
 * on every rank.  The
 * figures behind the bounds are in bench/RESULTS.md ("The direct path's
 * thresholds").
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/algo/algo.h"

/* Below this many bytes, "auto" takes the latency algorithms. */
#define HERD__TUNE_SMALL (64u * 1024u)

/* Up to this many bytes (and from 3 to HERD__ONESHOT_RANKS ranks),
 * "auto" allreduce exchanges every vector with every rank in one step
 * instead of the log2 p (plus two) of recursive doubling. */
#define HERD__TUNE_ONESHOT_MAX 1024u

/* From this many bytes, "auto" allreduce takes a collective transport's
 * large allreduce; up to its small_max, its small one; in between the
 * rows below. */
#define HERD__TUNE_COLL_MIN (64u * 1024u)

size_t herd__tune_coll_min = HERD__TUNE_COLL_MIN;

/* What a row needs of the placement. */
enum {
	NEED_COLL = 1,          /* a transport that runs collectives */
	NEED_ONE_HOST = 2,      /* every rank on this host */
	NEED_TCP = 4,           /* some pair over TCP */
	NEED_POW2 = 8,          /* a power of two ranks */
	NEED_HOSTS = 16         /* several hosts, several ranks on some */
};

/* Size bounds, by name: each row says which apply. */
typedef enum bound {
	B_NONE = 0,
	B_SMALL,                /* HERD__TUNE_SMALL */
	B_ONESHOT,              /* HERD__TUNE_ONESHOT_MAX + 1 */
	B_COLL_SMALL,           /* the collective transport's small_max + 1 */
	B_COLL_MIN              /* herd__tune_coll_min */
} bound;

/* Where a row's algorithm is: its own function, or an entry of the
 * collective transport. */
enum { VIA_ALGO, VIA_COLL_SMALL, VIA_COLL };

/* How the cost model weighs a row's algorithm (see cost()); M_NONE:
 * it does not, and the size bounds decide. */
typedef enum model {
	M_NONE = 0,
	M_ONESHOT,              /* every vector to every rank in one step */
	M_RD,                   /* log2 p steps of whole vectors */
	M_HD,                   /* halving from distance p/2, then doubling */
	M_HIER,                 /* two-level allreduce */
	M_RING,                 /* ring allreduce */
	M_BRUCK,                /* Bruck allgather */
	M_HIER_BLOCKS,          /* two-level allgather, reduce_scatter */
	M_RING_BLOCKS,          /* ring allgather, reduce_scatter */
	M_TREE,                 /* binomial tree, root's host first */
	M_CHAIN,                /* pipelined chain, host by host */
	M_RING_REDUCE           /* ring reduce-scatter, gather to the root */
} model;

typedef struct row {
	uint8_t cls;            /* herd__algo_class */
	uint8_t need;
	uint8_t via;
	uint8_t lo, hi;         /* bound: size >= lo and size < hi; B_NONE: none */
	int min_ranks, max_ranks; /* 0: none */
	herd__op_fn run;        /* VIA_ALGO */
	const char *name;       /* what herd__tune_explain calls it */
	uint8_t model;
} row;

#define ROW(c, n, l, h, rmin, rmax, fn, nm, m) \
	{ HERD__CLASS_##c, n, VIA_ALGO, l, h, rmin, rmax, fn, nm, M_##m }
#define COLL_ROW(via, l, h, nm) { HERD__CLASS_TUNED, NEED_COLL, via, l, h, 0, 0, NULL, nm, M_NONE }

static const row allreduce_rows[] = {
	COLL_ROW(VIA_COLL_SMALL, B_NONE, B_COLL_SMALL, "shared-memory direct, small"),
	COLL_ROW(VIA_COLL, B_COLL_MIN, B_NONE, "shared-memory direct"),
	ROW(TUNED, 0, B_NONE, B_ONESHOT, 3, HERD__ONESHOT_RANKS, herd__algo_allreduce_oneshot,
	    "one-shot", ONESHOT),
	ROW(LATENCY, 0, B_NONE, B_SMALL, 0, 0, herd__algo_allreduce_rd, "recursive doubling", RD),
	ROW(TUNED, NEED_TCP | NEED_POW2, B_NONE, B_NONE, 4, 0,
	    herd__algo_allreduce_hd, "halving-doubling", HD),
	ROW(TUNED, NEED_HOSTS, B_NONE, B_NONE, 0, 0, herd__algo_allreduce_hier, "two-level", HIER),
	ROW(BANDWIDTH, 0, B_NONE, B_NONE, 0, 0, herd__algo_allreduce_ring, "ring", RING),
};

static const row reduce_rows[] = {
	ROW(LATENCY, 0, B_NONE, B_SMALL, 0, 0, herd__algo_reduce_binomial, "binomial tree", TREE),
	ROW(BANDWIDTH, 0, B_NONE, B_NONE, 0, 0, herd__algo_reduce_ring, "ring", RING_REDUCE),
};

static const row broadcast_rows[] = {
	ROW(LATENCY, 0, B_NONE, B_SMALL, 0, 0, herd__algo_broadcast_binomial, "binomial tree", TREE),
	ROW(BANDWIDTH, 0, B_NONE, B_NONE, 0, 0, herd__algo_broadcast_chain, "pipelined chain", CHAIN),
};

static const row allgather_rows[] = {
	ROW(LATENCY, 0, B_NONE, B_SMALL, 0, 0, herd__algo_allgather_bruck, "Bruck", BRUCK),
	ROW(TUNED, NEED_HOSTS, B_NONE, B_NONE, 0, 0, herd__algo_allgather_hier, "two-level",
	    HIER_BLOCKS),
	ROW(BANDWIDTH, 0, B_NONE, B_NONE, 0, 0, herd__algo_allgather_ring, "ring", RING_BLOCKS),
};

static const row reduce_scatter_rows[] = {
	ROW(LATENCY, 0, B_NONE, B_SMALL, 0, 0, herd__algo_reduce_scatter_rd, "recursive halving", RD),
	ROW(TUNED, NEED_HOSTS, B_NONE, B_NONE, 0, 0, herd__algo_reduce_scatter_hier, "two-level",
	    HIER_BLOCKS),
	ROW(BANDWIDTH, 0, B_NONE, B_NONE, 0, 0, herd__algo_reduce_scatter_ring, "ring", RING_BLOCKS),
};

static const row alltoall_rows[] = {
	ROW(LATENCY, 0, B_NONE, B_SMALL, 0, 0, herd__algo_alltoall_oneshot, "one-shot", NONE),
	ROW(BANDWIDTH, 0, B_NONE, B_NONE, 0, 0, herd__algo_alltoall_pairwise, "pairwise", NONE),
};

static const row gather_rows[] = {
	ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_gather, "direct", NONE),
};
static const row scatter_rows[] = {
	ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_scatter, "direct", NONE),
};
static const row send_rows[] = {
	ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_send, "point-to-point", NONE),
};
static const row recv_rows[] = {
	ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_recv, "point-to-point", NONE),
};
static const row sendrecv_rows[] = {
	ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_sendrecv, "point-to-point", NONE),
};
static const row barrier_rows[] = {
	ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_barrier, "dissemination", NONE),
};

/* The table, by operation: its rows in the order they are tried. */
#define ROWS(k, r) [HERD__OP_##k] = { r, sizeof(r) / sizeof(r[0]) }
static const struct {
	const row *rows;
	size_t n;
} table[] = {
	ROWS(ALLREDUCE, allreduce_rows),
	ROWS(REDUCE, reduce_rows),
	ROWS(BROADCAST, broadcast_rows),
	ROWS(ALLGATHER, allgather_rows),
	ROWS(REDUCE_SCATTER, reduce_scatter_rows),
	ROWS(ALLTOALL, alltoall_rows),
	ROWS(GATHER, gather_rows),
	ROWS(SCATTER, scatter_rows),
	ROWS(SEND, send_rows),
	ROWS(RECV, recv_rows),
	ROWS(SENDRECV, sendrecv_rows),
	ROWS(BARRIER, barrier_rows),
};

static const row local_row = ROW(ANY, 0, B_NONE, B_NONE, 0, 0, herd__algo_local,
				  "local (no peer needed)", NONE);

/* The operations whose calls with no data or one rank need no peer. */
static bool has_local(int kind)
{
	switch (kind) {
	case HERD__OP_ALLREDUCE:
	case HERD__OP_REDUCE:
	case HERD__OP_BROADCAST:
	case HERD__OP_ALLGATHER:
	case HERD__OP_REDUCE_SCATTER:
	case HERD__OP_ALLTOALL:
		return true;
	default:
		return false;
	}
}

/* The size a row's bounds are compared with (see the top). */
static size_t call_size(const herd__op *op, int p)
{
	size_t bytes = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);

	switch (op->fp.kind) {
	case HERD__OP_ALLREDUCE:
	case HERD__OP_REDUCE:
		return op->count < (size_t)p ? 0 : bytes;
	case HERD__OP_ALLGATHER:
	case HERD__OP_REDUCE_SCATTER:
	case HERD__OP_ALLTOALL:
		return bytes * (size_t)p;
	default:
		return bytes;
	}
}

static size_t bound_bytes(bound b, const herd__place *pl)
{
	switch (b) {
	case B_SMALL:
		return HERD__TUNE_SMALL;
	case B_ONESHOT:
		return HERD__TUNE_ONESHOT_MAX + 1;
	case B_COLL_SMALL:
		return pl->coll->small_max + 1;
	case B_COLL_MIN:
		return herd__tune_coll_min;
	case B_NONE:
	default:
		return 0;
	}
}

static bool costed(const herd__place *pl);

/* Why row w does not take a call of size bytes on p ranks, in buf; NULL
 * when it does. */
static const char *why_not(const row *w, const herd__place *pl, int p, size_t size, char *buf,
			   size_t cap)
{
	bool sized = !costed(pl);

	if (w->cls == HERD__CLASS_TUNED && pl->force != HERD__CLASS_ANY &&
	    pl->force != HERD__CLASS_HIER)
		return "a tuned choice, and the algorithm class is forced";
	if ((w->cls == HERD__CLASS_LATENCY || w->cls == HERD__CLASS_BANDWIDTH) &&
	    (pl->force == HERD__CLASS_LATENCY || pl->force == HERD__CLASS_BANDWIDTH)) {
		if (w->cls != pl->force)
			return "not of the forced class";
		sized = false;      /* forced: whatever the size */
	}
	if ((w->need & NEED_COLL) && pl->coll == NULL)
		return "needs a transport that runs collectives (every rank on one host)";
	if ((w->need & NEED_ONE_HOST) && !pl->one_host)
		return "needs every rank on one host";
	if ((w->need & NEED_TCP) && !pl->any_tcp)
		return "needs some pair over TCP";
	if ((w->need & NEED_POW2) && (p & (p - 1)))
		return "needs a power of two ranks";
	if ((w->need & NEED_HOSTS) && (pl->nhosts < 2 || pl->max_local < 2))
		return "needs several hosts with several ranks on some";
	if (w->min_ranks > 0 && p < w->min_ranks) {
		snprintf(buf, cap, "needs %d ranks or more", w->min_ranks);
		return buf;
	}
	if (w->max_ranks > 0 && p > w->max_ranks) {
		snprintf(buf, cap, "takes at most %d ranks", w->max_ranks);
		return buf;
	}
	if (sized && w->lo != B_NONE && size < bound_bytes(w->lo, pl)) {
		snprintf(buf, cap, "from %zu bytes", bound_bytes(w->lo, pl));
		return buf;
	}
	if (sized && w->hi != B_NONE && size >= bound_bytes(w->hi, pl)) {
		snprintf(buf, cap, "below %zu bytes", bound_bytes(w->hi, pl));
		return buf;
	}
	return NULL;
}

/* ---- the cost model ------------------------------------------------------
 *
 * Where ranks are on several hosts and the choice is "auto" (or "hier"
 * where the two-level rows do not fit), the algorithm is the one of least
 * estimated time among the rows whose placement needs are met, whatever
 * their size bounds; the rows without a model (alltoall, gather, ...)
 * keep theirs.  The estimate counts steps and the bytes the busiest link
 * carries in each: a step between hosts costs the links' one-way latency
 * plus its bytes over their rate (herd__place's figures, measured at init
 * or given by HERD_NET_LINK), where every rank of a host shares its link;
 * a step inside a host costs SHM_LAT plus its bytes at SHM_BYTE.  Host
 * numbers H, ranks per host L (the most on one), p ranks, n the call's
 * bytes (b = n / p a block of allgather and reduce_scatter):
 *
 *   one-shot            net(L (p-L) n) + (p-1) SHM_LAT (a message each)
 *   recursive doubling  lg H net(L n) + (lg p - lg H) shm(n), + 2 shm(n)
 *                       when p is no power of two (the fold)
 *   halving-doubling    2 (lg H net-latency + L (1-1/H) n net-bytes
 *                       + lg L shm(n / H)): its large halves cross first
 *   two-level           2 (L-1) shm(n / L) + 2 (H-1) net(n / H)
 *   ring                2 (p-1) net(n / p): each step crosses a host link
 *   Bruck               lg p net-latency + L (p-L) b net-bytes
 *   two-level blocks    (H-1) net(L b) + (L-1) shm(H b)
 *   ring blocks         (p-1) net(b)
 *   binomial tree       lg H net(n) + lg L shm(n)
 *   pipelined chain     (ceil(n / chunk) + p - 2) net(chunk), chunk the
 *                       smaller of n and HERD__ALGO_BLOCK
 *   ring reduce         (p-1) net(n / p) + net((p-L) n / p)
 *
 * lg is the base-2 logarithm rounded up.  Every rank has the same
 * figures (rank 0's), so every rank picks the same row.
 */

/* A step inside a host: about what one step of herd's shared-memory
 * transport takes (bench/RESULTS.md, 8-byte allreduce on one host), and
 * the copy rate of one core. */
#define SHM_LAT 1e-6
#define SHM_BYTE (1.0 / 5e9)

static bool costed(const herd__place *pl)
{
	return pl->nhosts > 1 && pl->net_from != HERD__NET_NONE &&
	       (pl->force == HERD__CLASS_ANY || pl->force == HERD__CLASS_HIER);
}

static double lg(int x)
{
	int k = 0;

	while ((1 << k) < x && k < 30)
		k++;
	return k;
}

static double cost(const row *w, const herd__place *pl, int p, size_t size)
{
	double a = pl->net_lat_s, B = pl->net_byte_s, n = (double)size, H = pl->nhosts;
	double L = pl->max_local, b = n / p, P = p, chunk;
#define NET(m) (a + (m) * B)
#define SHM(m) (SHM_LAT + (m) * SHM_BYTE)

	switch (w->model) {
	case M_ONESHOT:
		return NET(L * (P - L) * n) + (P - 1) * SHM_LAT;
	case M_RD:
		return lg(pl->nhosts) * NET(L * n) + (lg(p) - lg(pl->nhosts)) * SHM(n) +
		       ((p & (p - 1)) ? 2 * SHM(n) : 0);
	case M_HD:
		return 2 * (lg(pl->nhosts) * a + L * (1 - 1 / H) * n * B +
			    lg(pl->max_local) * SHM(n / H));
	case M_HIER:
		return 2 * (L - 1) * SHM(n / L) + 2 * (H - 1) * NET(n / H);
	case M_RING:
		return 2 * (P - 1) * NET(n / P);
	case M_BRUCK:
		return lg(p) * a + L * (P - L) * b * B;
	case M_HIER_BLOCKS:
		return (H - 1) * NET(L * b) + (L - 1) * SHM(H * b);
	case M_RING_BLOCKS:
		return (P - 1) * NET(b);
	case M_TREE:
		return lg(pl->nhosts) * NET(n) + lg(pl->max_local) * SHM(n);
	case M_CHAIN:
		chunk = n < herd__algo_block_bytes ? n : (double)herd__algo_block_bytes;
		return (ceil(n / chunk) + P - 2) * NET(chunk);
	case M_RING_REDUCE:
		return (P - 1) * NET(n / P) + NET((P - L) * n / P);
	default:
		return -1;
	}
#undef NET
#undef SHM
}

static bool fits(const row *w, const herd__place *pl, int p, size_t size)
{
	char buf[64];

	return why_not(w, pl, p, size, buf, sizeof(buf)) == NULL;
}

static const row *pick(const herd_comm *comm, const herd__place *pl, const herd__op *op)
{
	int p = herd_comm_size(comm);
	size_t size;

	if (has_local(op->fp.kind) && (p == 1 || op->count == 0))
		return &local_row;
	if (op->fp.kind >= sizeof(table) / sizeof(table[0]))
		return NULL;
	size = call_size(op, p);
	/* "hier": a two-level row whatever the size, where the hosts allow */
	for (size_t i = 0; pl->force == HERD__CLASS_HIER && i < table[op->fp.kind].n; i++) {
		const row *w = &table[op->fp.kind].rows[i];
		char why[64];

		if ((w->need & NEED_HOSTS) && why_not(w, pl, p, size, why, sizeof(why)) == NULL)
			return w;
	}
	if (costed(pl)) {
		const row *best = NULL;
		double best_cost = 0;

		for (size_t i = 0; i < table[op->fp.kind].n; i++) {
			const row *w = &table[op->fp.kind].rows[i];
			double c = cost(w, pl, p, size);

			if (c >= 0 && fits(w, pl, p, size) && (best == NULL || c < best_cost)) {
				best = w;
				best_cost = c;
			}
		}
		if (best != NULL)
			return best;
	}
	for (size_t i = 0; i < table[op->fp.kind].n; i++)
		if (fits(&table[op->fp.kind].rows[i], pl, p, size))
			return &table[op->fp.kind].rows[i];
	/* Every operation has a row of its own class or of class ANY. */
	return NULL;
}

herd__op_fn herd__tune_pick(const herd_comm *comm, const herd__op *op, uint8_t *algo)
{
	const herd__place *pl = herd__comm_place(comm);
	const row *w = pick(comm, pl, op);

	*algo = HERD__ALGO_NONE;
	if (w == NULL)
		return NULL;
	*algo = w == &local_row ? HERD__ALGO_LOCAL : (uint8_t)(w - table[op->fp.kind].rows + 1);
	switch (w->via) {
	case VIA_COLL_SMALL:
		return pl->coll->allreduce_small;
	case VIA_COLL:
		return pl->coll->allreduce;
	default:
		return w->run;
	}
}

const char *herd__tune_algo_name(int kind, uint8_t algo)
{
	if (algo == HERD__ALGO_LOCAL)
		return "local";
	if (algo == HERD__ALGO_NCCL)
		return "NCCL";
	if (kind <= 0 || (size_t)kind >= sizeof(table) / sizeof(table[0]) || algo == 0 ||
	    algo > table[kind].n)
		return NULL;
	return table[kind].rows[algo - 1].name;
}

const char *herd__tune_links_from(const herd__place *pl, char *buf, size_t cap)
{
	switch (pl->net_from) {
	case HERD__NET_GIVEN:
		snprintf(buf, cap, "HERD_NET_LINK");
		break;
	case HERD__NET_MEASURED:
		snprintf(buf, cap, "measured at init");
		break;
	case HERD__NET_INTERFACE:
		snprintf(buf, cap, "the speed of %s", pl->net_if);
		break;
	case HERD__NET_ASSUMED:
		snprintf(buf, cap, "%s reports no speed: 10 Gbit/s assumed",
			 pl->net_if[0] != '\0' ? pl->net_if : "the interface");
		break;
	default:
		snprintf(buf, cap, "none: one host");
		break;
	}
	return buf;
}

/* A time in the units that read best. */
static void fmt_time(char *buf, size_t cap, double secs)
{
	if (secs < 1e-3)
		snprintf(buf, cap, "%.1f us", secs * 1e6);
	else if (secs < 1)
		snprintf(buf, cap, "%.2f ms", secs * 1e3);
	else
		snprintf(buf, cap, "%.2f s", secs);
}

void herd__tune_explain(const herd_comm *comm, const herd__op *op, char *buf, size_t cap)
{
	const herd__place *pl = herd__comm_place(comm);
	const row *w = pick(comm, pl, op);
	int p = herd_comm_size(comm);
	size_t size = call_size(op, p), o;
	const char *cls = pl->force == HERD__CLASS_LATENCY ? "rd"
			  : pl->force == HERD__CLASS_BANDWIDTH ? "ring"
			  : pl->force == HERD__CLASS_HIER ? "hier" : "auto";
	bool by_cost;
	char t[32], from[64];

	if (cap == 0)
		return;
	snprintf(buf, cap, "%zu bytes (sized as %zu) on %d ranks, %d host%s with at most %d "
		 "ranks, algo %s: %s", op->count * herd_dtype_size((herd_dtype)op->fp.dtype), size,
		 p, pl->nhosts, pl->nhosts == 1 ? "" : "s", pl->max_local, cls,
		 w != NULL ? w->name : "none");
	if (w == NULL || w == &local_row || pl->force == HERD__CLASS_LATENCY ||
	    pl->force == HERD__CLASS_BANDWIDTH ||
	    (pl->force == HERD__CLASS_HIER && (w->need & NEED_HOSTS)))
		return;
	o = strlen(buf);
	by_cost = costed(pl) && cost(w, pl, p, size) >= 0;
	if (by_cost && o < cap) {
		fmt_time(t, sizeof(t), cost(w, pl, p, size));
		o += (size_t)snprintf(buf + o, cap - o, ", estimated %s with links between hosts of "
				      "%.1f us and %.3f GB/s (%s)", t, pl->net_lat_s * 1e6,
				      1e-9 / pl->net_byte_s, herd__tune_links_from(pl, from, sizeof(from)));
	}
	/* The rows before it, with why each passed (a reason, or its
	 * estimate); by cost, the rows after it that fit, with theirs. */
	for (size_t i = 0, k[2] = { 0, 0 }; i < table[op->fp.kind].n && o < cap; i++) {
		const row *x = &table[op->fp.kind].rows[i];
		bool after = x > w;
		const char *why;
		char reason[64];

		if (x == w)
			continue;
		why = why_not(x, pl, p, size, reason, sizeof(reason));
		if (why == NULL && by_cost && cost(x, pl, p, size) >= 0) {
			fmt_time(t, sizeof(t), cost(x, pl, p, size));
			snprintf(reason, sizeof(reason), "estimated %s", t);
			why = reason;
		} else if (after) {
			continue;
		}
		if (why == NULL)
			continue;
		o += (size_t)snprintf(buf + o, cap - o, "%s %s: %s",
				      k[after]++ > 0 ? "," : after ? "; after it" : "; passed over",
				      x->name, why);
	}
}
