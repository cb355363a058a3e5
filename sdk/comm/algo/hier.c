/*
 * sdk/comm/algo/hier.c - the two-level allreduce, for ranks on several
 * hosts with more than one rank on some: the links inside a host (shared
 * memory) are many times faster than those between hosts, so the vector
 * crosses each host's link once each way, and every rank of a host drives
 * its own part of it at the same time:
 *
 *   1. inside each host, a ring reduce-scatter: local rank k holds its
 *      block reduced over the host;
 *   2. between hosts, for each part of its block, the ranks that hold that
 *      part (one per host) allreduce it: a ring reduce-scatter, the part's
 *      own sub-block finished (AVG's division, a narrow type's rounding),
 *      a ring allgather;
 *   3. inside each host, a ring allgather of the blocks.
 *
 * Hosts may hold different numbers of ranks (3 + 1, 2 + 1 + 1): the
 * vector is cut into P parts, P the most ranks on one host, and on a host
 * of L ranks local rank k holds parts ceil(kP/L) .. ceil((k+1)P/L) - 1, a
 * contiguous block of one part or more.  So each part has one holder per
 * host, and with as many ranks on every host each rank holds one part.
 * A rank allreduces its parts in order, and so do the other holders: the
 * earliest part not done always has all its holders at it, so nothing
 * waits in a cycle.  Every element is reduced by one rank, in one order,
 * so every rank ends with the same bits.
 *
 * Each host crosses its link with (2(H-1)/H) of the vector for H hosts, as
 * a flat ring with one rank per host does; a flat ring over L ranks per
 * host sends L times that much over some host's link in all.  tune.c
 * takes it for large vectors where hosts hold several ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"

/* Some ranks of the communicator, in ring order; me is this rank's index. */
typedef struct group {
	const int *ranks;
	int n, me;
} group;

/*
 * Ring reduce-scatter over g of the blocks offs[b] .. offs[b + 1]
 * (elements): block g.me of work ends reduced over the group.  Step k
 * sends block me-k-1 (from in at the first step, else from work, where
 * the step before reduced it) and reduces block me-k-2 of in into work.
 * in may equal work.
 */
static herd_status group_rs(herd_comm *comm, const group *g, const size_t *offs, const char *in,
			    char *work, herd_dtype dtype, herd_redop op)
{
	size_t es = herd_dtype_size(dtype);
	int n = g->n, to = g->ranks[herd__algo_mod(g->me + 1, n)];
	int from = g->ranks[herd__algo_mod(g->me - 1, n)];

	if (n == 1) {
		size_t off = offs[0], len = offs[1] - offs[0];

		if (in != work && len > 0)
			memmove(work + off * es, in + off * es, len * es);
		return HERD_OK;
	}
	for (int k = 0; k < n - 1; k++) {
		int sb = herd__algo_mod(g->me - k - 1, n), rb = herd__algo_mod(g->me - k - 2, n);
		const char *src = k == 0 ? in : work;

		HERD_CHECK(herd__algo_xchg(comm, to, src + offs[sb] * es,
					   (offs[sb + 1] - offs[sb]) * es, from, work + offs[rb] * es,
					   in + offs[rb] * es, (offs[rb + 1] - offs[rb]) * es, dtype,
					   op));
	}
	return HERD_OK;
}

/* Ring allgather over g in place on buf: block g.me is this rank's. */
static herd_status group_ag(herd_comm *comm, const group *g, const size_t *offs, char *buf,
			    herd_dtype dtype)
{
	size_t es = herd_dtype_size(dtype);
	int n = g->n, to = g->ranks[herd__algo_mod(g->me + 1, n)];
	int from = g->ranks[herd__algo_mod(g->me - 1, n)];

	for (int k = 0; k < n - 1; k++) {
		int sb = herd__algo_mod(g->me - k, n), rb = herd__algo_mod(g->me - k - 1, n);

		HERD_CHECK(herd__algo_xchg(comm, to, buf + offs[sb] * es,
					   (offs[sb + 1] - offs[sb]) * es, from, buf + offs[rb] * es,
					   NULL, (offs[rb + 1] - offs[rb]) * es, dtype, HERD_SUM));
	}
	return HERD_OK;
}

/* The first part a local rank k of a host of nlocal ranks holds, of P. */
static int first_part(int k, int nlocal, int parts)
{
	return (int)(((long long)k * parts + nlocal - 1) / nlocal);
}

/* The local rank of host g that holds part j (of max_local parts). */
static int holder(const herd__place *pl, int g, int j)
{
	int gl = pl->host_start[g + 1] - pl->host_start[g];

	return (int)((long long)j * gl / pl->max_local);
}

/* This rank's host as a group: its ranks, this rank's index among them. */
static group host_group(const herd_comm *comm)
{
	const herd__place *pl = herd__comm_place(comm);
	int h = pl->host_of[herd_comm_rank(comm)];

	return (group){ pl->host_ranks + pl->host_start[h], pl->host_start[h + 1] -
			pl->host_start[h], herd__algo_pos(comm) - pl->host_start[h] };
}

/* Element offset of part j of count elements cut in P parts. */
static size_t part_off(size_t count, int parts, int j)
{
	size_t off, len;

	if (j >= parts)
		return count;
	herd__split_even(count, parts, j, &off, &len);
	return off;
}

/*
 * Where reduce_scatter's and allgather's blocks go: the p blocks (one per
 * rank) laid out part by part, and inside a part host by host, where the
 * block of rank d (local rank i of a host of L ranks) belongs to part
 * first_part(i, L, P).  Each part then holds at most one block per host,
 * and the rank that holds that part on d's host (see the top) is d
 * itself; so local rank k's parts are one contiguous run, and the holders
 * of a part, one per host, hold the blocks of that part's ranks.
 */
typedef struct slots {
	size_t *slot;           /* [p]: block d's first element */
	size_t *pstart;         /* [P + 1]: part j's first element */
	int *holders;           /* [H]: the holders of the part at hand */
	size_t *hoffs;          /* [H + 1]: its blocks, host by host */
} slots;

static herd_status slots_make(const herd__place *pl, int p, size_t n, slots *s)
{
	int nh = pl->nhosts, parts = pl->max_local;
	size_t *mem;
	size_t at = 0;

	HERD_CHECK(herd__algo_alloc(&mem, ((size_t)p + (size_t)parts + 1 + (size_t)nh + 1 +
					   (size_t)nh) * sizeof(size_t),
				    "the block layout of a two-level collective"));
	s->slot = mem;
	s->pstart = mem + p;
	s->hoffs = s->pstart + parts + 1;
	s->holders = (int *)(s->hoffs + nh + 1);
	for (int j = 0; j < parts; j++) {
		s->pstart[j] = at;
		for (int g = 0; g < nh; g++) {
			int gl = pl->host_start[g + 1] - pl->host_start[g];

			for (int i = 0; i < gl; i++) {
				if (first_part(i, gl, parts) != j)
					continue;
				s->slot[pl->host_ranks[pl->host_start[g] + i]] = at;
				at += n;
			}
		}
	}
	s->pstart[parts] = at;
	return HERD_OK;
}

/* The group of part j's holders (this rank's is the one of host h), and
 * its blocks in s->hoffs. */
static group part_group(const herd__place *pl, slots *s, int j, int h, size_t n)
{
	int parts = pl->max_local;
	size_t at = s->pstart[j];

	for (int g = 0; g < pl->nhosts; g++) {
		int gl = pl->host_start[g + 1] - pl->host_start[g], k = holder(pl, g, j);

		s->holders[g] = pl->host_ranks[pl->host_start[g] + k];
		s->hoffs[g] = at;
		/* a host whose holder's run starts before j has no block here */
		if (first_part(k, gl, parts) == j)
			at += n;
	}
	s->hoffs[pl->nhosts] = at;
	return (group){ s->holders, pl->nhosts, h };
}

/* This rank's local group, and the element bounds of the local ranks'
 * runs of parts into loffs. */
static group local_group(const herd_comm *comm, const slots *s, size_t *loffs)
{
	group local = host_group(comm);

	for (int i = 0; i <= local.n; i++)
		loffs[i] = s->pstart[first_part(i, local.n, herd__comm_place(comm)->max_local)];
	return local;
}

/* The work of a two-level reduce_scatter or allgather: the parts layout,
 * this rank's local group with its runs' bounds, and p blocks of work. */
typedef struct blocks {
	slots s;
	size_t *loffs;           /* [local ranks + 1] */
	group local;
	char *work;
} blocks;

static herd_status blocks_make(herd_comm *comm, size_t n, size_t wes, blocks *b)
{
	const herd__place *pl = herd__comm_place(comm);
	int p = herd_comm_size(comm);
	herd_status st;

	memset(b, 0, sizeof(*b));
	HERD_CHECK(slots_make(pl, p, n, &b->s));
	st = herd__algo_alloc(&b->loffs, (size_t)(p + 1) * sizeof(size_t),
			      "the parts of a two-level collective");
	if (st == HERD_OK)
		st = herd__algo_alloc(&b->work, (size_t)p * n * wes,
				      "the blocks of a two-level collective");
	if (st != HERD_OK) {
		free(b->loffs);
		free(b->s.slot);
		return st;
	}
	b->local = local_group(comm, &b->s, b->loffs);
	return HERD_OK;
}

static void blocks_free(blocks *b)
{
	free(b->work);
	free(b->loffs);
	free(b->s.slot);
}

/* For each part this rank holds, a ring among the part's holders: a
 * reduce-scatter with eop (reduce) or an allgather. */
static herd_status across_parts(herd_comm *comm, blocks *b, size_t n, herd_dtype dtype,
				herd_redop eop, bool reduce)
{
	const herd__place *pl = herd__comm_place(comm);
	int h = pl->host_of[herd_comm_rank(comm)], parts = pl->max_local;

	for (int j = first_part(b->local.me, b->local.n, parts);
	     j < first_part(b->local.me + 1, b->local.n, parts); j++) {
		group across = part_group(pl, &b->s, j, h, n);

		if (reduce)
			HERD_CHECK(group_rs(comm, &across, b->s.hoffs, b->work, b->work, dtype, eop));
		else
			HERD_CHECK(group_ag(comm, &across, b->s.hoffs, b->work, dtype));
	}
	return HERD_OK;
}

/*
 * Two-level reduce_scatter: the blocks into the parts layout (widened for
 * narrow types), a ring reduce-scatter of the parts inside the host, then
 * for each of this rank's parts a ring reduce-scatter of its blocks among
 * its holders; the block left here is this rank's.  Each host's link
 * carries the blocks of the other hosts' ranks once: (p - L) of p blocks,
 * where a ring with L ranks per host sends p - 1.
 */
herd_status herd__algo_reduce_scatter_hier(herd_comm *comm, const herd__op *op)
{
	int r = herd_comm_rank(comm), p = herd_comm_size(comm);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	herd_redop rop = (herd_redop)op->fp.redop, eop = herd__algo_elem_op(rop);
	bool widen = herd__dtype_widens(dtype, rop);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t n = op->count, es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt);
	const char *in = op->sendbuf;
	char *own;
	blocks b;
	herd_status st;

	HERD_CHECK(blocks_make(comm, n, wes, &b));
	for (int d = 0; d < p; d++) {
		if (widen)
			herd__narrow_to_float((float *)b.work + b.s.slot[d], in + (size_t)d * n * es,
					      n, dtype);
		else
			memcpy(b.work + b.s.slot[d] * es, in + (size_t)d * n * es, n * es);
	}
	HERD_CHECK_GOTO(group_rs(comm, &b.local, b.loffs, b.work, b.work, wdt, eop), st, out);
	HERD_CHECK_GOTO(across_parts(comm, &b, n, wdt, eop, true), st, out);
	own = b.work + b.s.slot[r] * wes;
	if (rop == HERD_AVG)
		herd__reduce_scale(own, n, wdt, p);
	if (widen)
		herd__float_to_narrow(op->recvbuf, (const float *)own, n, dtype);
	else
		memcpy(op->recvbuf, own, n * es);
out:
	blocks_free(&b);
	return st;
}

/*
 * Two-level allgather, the reverse: this rank's block into its slot, for
 * each of its parts a ring allgather among the part's holders, a ring
 * allgather of the parts inside the host, and the blocks out in rank
 * order.  Each host's link carries the other hosts' blocks once.
 */
herd_status herd__algo_allgather_hier(herd_comm *comm, const herd__op *op)
{
	int r = herd_comm_rank(comm), p = herd_comm_size(comm);
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	size_t n = op->count, es = herd_dtype_size(dtype);
	char *out = op->recvbuf;
	blocks b;
	herd_status st;

	HERD_CHECK(blocks_make(comm, n, es, &b));
	memcpy(b.work + b.s.slot[r] * es, op->sendbuf, n * es);
	HERD_CHECK_GOTO(across_parts(comm, &b, n, dtype, HERD_SUM, false), st, out);
	HERD_CHECK_GOTO(group_ag(comm, &b.local, b.loffs, b.work, dtype), st, out);
	for (int d = 0; d < p; d++)
		memmove(out + (size_t)d * n * es, b.work + b.s.slot[d] * es, n * es);
out:
	blocks_free(&b);
	return st;
}

herd_status herd__algo_allreduce_hier(herd_comm *comm, const herd__op *op)
{
	const herd__place *pl = herd__comm_place(comm);
	int r = herd_comm_rank(comm), p = herd_comm_size(comm);
	int h = pl->host_of[r], nh = pl->nhosts, parts = pl->max_local;
	group local = host_group(comm), across;
	int nlocal = local.n, me = local.me;
	herd_dtype dtype = (herd_dtype)op->fp.dtype;
	herd_redop rop = (herd_redop)op->fp.redop, eop = herd__algo_elem_op(rop);
	bool widen = herd__dtype_widens(dtype, rop);
	herd_dtype wdt = widen ? HERD_FLOAT32 : dtype;
	size_t count = op->count, es = herd_dtype_size(dtype), wes = herd_dtype_size(wdt);
	size_t *loffs = NULL, *hoffs = NULL;
	int *holders = NULL;
	float *wide = NULL;
	char *out = op->recvbuf, *work = out;
	const char *in = op->sendbuf;
	herd_status st;

	HERD_CHECK(herd__algo_alloc(&loffs, (size_t)(nlocal + 1 + nh + 1) * sizeof(size_t),
				    "the blocks of a two-level allreduce"));
	hoffs = loffs + nlocal + 1;
	HERD_CHECK_GOTO(herd__algo_alloc(&holders, (size_t)nh * sizeof(int),
					 "the holders of a part"), st, out);
	for (int i = 0; i <= nlocal; i++)
		loffs[i] = part_off(count, parts, first_part(i, nlocal, parts));
	if (widen) {
		HERD_CHECK_GOTO(herd__algo_alloc(&wide, count * wes, "a float32 copy of a "
						 "narrow-type allreduce"), st, out);
		herd__narrow_to_float(wide, in, count, dtype);
		in = work = (char *)wide;
	}

	/* 1: this host's sum of my block */
	HERD_CHECK_GOTO(group_rs(comm, &local, loffs, in, work, wdt, eop), st, out);

	/* 2: each of my parts with its holders on the other hosts */
	for (int j = first_part(me, nlocal, parts); j < first_part(me + 1, nlocal, parts); j++) {
		size_t off = part_off(count, parts, j), len = part_off(count, parts, j + 1) - off;
		size_t soff, slen;

		for (int g = 0; g < nh; g++)
			holders[g] = pl->host_ranks[pl->host_start[g] + holder(pl, g, j)];
		across = (group){ holders, nh, h };
		for (int g = 0; g <= nh; g++)
			hoffs[g] = off + part_off(len, nh, g);
		HERD_CHECK_GOTO(group_rs(comm, &across, hoffs, work, work, wdt, eop), st, out);
		soff = hoffs[h];
		slen = hoffs[h + 1] - soff;
		if (rop == HERD_AVG)
			herd__reduce_scale(work + soff * wes, slen, wdt, p);
		if (widen)
			herd__float_to_narrow(out + soff * es, (const float *)work + soff, slen,
					      dtype);
		HERD_CHECK_GOTO(group_ag(comm, &across, hoffs, out, dtype), st, out);
	}

	/* 3: every block to every rank of the host */
	st = group_ag(comm, &local, loffs, out, dtype);
out:
	free(wide);
	free(holders);
	free(loffs);
	return st;
}
