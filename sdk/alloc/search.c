/*
 * sdk/alloc/search.c - the planner's second step: the best set of k
 * candidates of a node, exhaustively while the node offers few sets,
 * greedily beyond, and the largest set a node could give at all.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc/planner.h"

/* ----------------------------------------------------------- search */

struct search {
	const struct planner *p;
	const struct node_ctx *nc;
	struct choice *ch;
	size_t *cur;
	size_t *touched; /* per dense NUMA index, for quality() */
	unsigned long evaluated;
};

/* The quality of the k candidates in set, given their pair figures. */
static struct quality quality_of(struct search *s, const size_t *set, size_t k, long worst,
				 long sum, long nvl)
{
	const struct node_ctx *nc = s->nc;
	struct quality q = { 0 };
	long numa = 0, fit = 0;

	q.worst = worst;
	q.sum = sum;
	q.nvlinks = -nvl;
	for (size_t i = 0; i < k; i++) {
		const struct cand *c = &nc->cand[set[i]];

		q.busy += c->busy;
		if (s->p->req->near_nic)
			q.nic += c->nic_class;
		if (s->touched[c->numa]++ == 0)
			numa++;
	}
	for (size_t i = 0; i < k; i++) {
		int d = nc->cand[set[i]].numa;

		if (s->touched[d] > 0) {
			fit += (long)(nc->numa_free[d] - s->touched[d]);
			s->touched[d] = 0;
		}
	}
	q.numa = s->p->spread ? -numa : numa;
	q.fit = s->p->spread ? -fit : fit;
	s->evaluated++;
	return q;
}

/* Keeps set as best or runner-up when it is. */
static void consider(struct search *s, const size_t *set, struct quality q)
{
	struct choice *ch = s->ch;
	size_t k = ch->k;

	if (ch->ok && memcmp(set, ch->set, k * sizeof(*set)) == 0)
		return;
	if (ch->has_second && memcmp(set, ch->second, k * sizeof(*set)) == 0)
		return;
	if (!ch->ok || herd__planner_quality_cmp(&q, &ch->q) < 0) {
		if (ch->ok) {
			memcpy(ch->second, ch->set, k * sizeof(*set));
			ch->q2 = ch->q;
			ch->has_second = true;
		}
		memcpy(ch->set, set, k * sizeof(*set));
		ch->q = q;
		ch->ok = true;
	} else if (!ch->has_second || herd__planner_quality_cmp(&q, &ch->q2) < 0) {
		memcpy(ch->second, set, k * sizeof(*set));
		ch->q2 = q;
		ch->has_second = true;
	}
}

static void exhaustive(struct search *s, size_t depth, size_t start, long worst, long sum, long nvl)
{
	const struct node_ctx *nc = s->nc;
	size_t k = s->ch->k, m = nc->ncand;

	if (depth == k) {
		consider(s, s->cur, quality_of(s, s->cur, k, worst, sum, nvl));
		return;
	}
	for (size_t c = start; c + (k - depth) <= m; c++) {
		long w = worst, su = sum, nv = nvl;
		bool ok = true;

		for (size_t d = 0; d < depth && ok; d++) {
			size_t o = s->cur[d];

			ok = herd__planner_pair_ok(s->p, nc, o, c);
			if (nc->cls[o * m + c] > w)
				w = nc->cls[o * m + c];
			su += nc->cls[o * m + c];
			nv += nc->nvl[o * m + c];
		}
		if (!ok)
			continue;
		s->cur[depth] = c;
		exhaustive(s, depth + 1, c + 1, w, su, nv);
	}
}

static int size_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Grows a set from each of a few seeds, adding each time the candidate
 * that keeps the demand and adds the least (busy, worst class, class sum,
 * NVLinks).  maxc/sumc/nvc hold, per candidate, its figures against the
 * set so far.
 */
static herd_status greedy(struct search *s)
{
	const struct node_ctx *nc = s->nc;
	size_t k = s->ch->k, m = nc->ncand;
	size_t seeds = m < GREEDY_MAX_SEEDS ? m : GREEDY_MAX_SEEDS;
	long *maxc = NULL, *sumc = NULL, *nvc = NULL;
	bool *in = NULL, *okc = NULL;
	herd_status st;

	HERD_CHECK_GOTO(herd__calloc(&maxc, m, sizeof(long), "the search"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&sumc, m, sizeof(long), "the search"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&nvc, m, sizeof(long), "the search"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&in, m, sizeof(bool), "the search"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&okc, m, sizeof(bool), "the search"), st, out);
	for (size_t si = 0; si < seeds; si++) {
		size_t seed = si * m / seeds, n = 0;
		long worst = 0, sum = 0, nvl = 0;

		for (size_t c = 0; c < m; c++) {
			maxc[c] = sumc[c] = nvc[c] = 0;
			in[c] = false;
			okc[c] = true;
		}
		for (;;) {
			size_t pick = seed;

			if (n > 0) {
				bool found = false;

				for (size_t c = 0; c < m; c++) {
					if (in[c] || !okc[c])
						continue;
					if (!found || nc->cand[c].busy < nc->cand[pick].busy ||
					    (nc->cand[c].busy == nc->cand[pick].busy &&
					     (maxc[c] < maxc[pick] ||
					      (maxc[c] == maxc[pick] &&
					       (sumc[c] < sumc[pick] ||
						(sumc[c] == sumc[pick] && nvc[c] > nvc[pick])))))) {
						pick = c;
						found = true;
					}
				}
				if (!found)
					break;
			}
			in[pick] = true;
			s->cur[n++] = pick;
			if (maxc[pick] > worst)
				worst = maxc[pick];
			sum += sumc[pick];
			nvl += nvc[pick];
			if (n == k)
				break;
			for (size_t c = 0; c < m; c++) {
				unsigned char cl = nc->cls[pick * m + c];

				if (cl > maxc[c])
					maxc[c] = cl;
				sumc[c] += cl;
				nvc[c] += nc->nvl[pick * m + c];
				if (!herd__planner_pair_ok(s->p, nc, pick, c))
					okc[c] = false;
			}
		}
		if (n < k)
			continue;
		qsort(s->cur, k, sizeof(size_t), size_cmp);
		consider(s, s->cur, quality_of(s, s->cur, k, worst, sum, nvl));
	}
	st = HERD_OK;
out:
	free(maxc);
	free(sumc);
	free(nvc);
	free(in);
	free(okc);
	return st;
}

/* C(m, k), or limit + 1 when it passes limit. */
static unsigned long sets_count(size_t m, size_t k, unsigned long limit)
{
	unsigned long long c = 1;

	if (k > m)
		return 0;
	if (k > m - k)
		k = m - k;
	for (size_t i = 1; i <= k; i++) {
		c = c * (m - k + i) / i;
		if (c > limit)
			return limit + 1;
	}
	return (unsigned long)c;
}

void herd__planner_choice_clear(struct choice *ch)
{
	free(ch->set);
	free(ch->second);
	memset(ch, 0, sizeof(*ch));
}

/* The best set of k candidates of nc into *ch (ch->ok false when none). */
herd_status herd__planner_search_node(const struct planner *p, const struct node_ctx *nc, size_t k,
				      struct choice *ch)
{
	struct search s = { p, nc, ch, NULL, NULL, 0 };
	herd_status st = HERD_OK;

	memset(ch, 0, sizeof(*ch));
	ch->k = k;
	if (k == 0 || k > nc->ncand)
		return HERD_OK;
	HERD_CHECK_GOTO(herd__calloc(&ch->set, k, sizeof(size_t), "a GPU set"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&ch->second, k, sizeof(size_t), "a GPU set"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&s.cur, k, sizeof(size_t), "a GPU set"), st, out);
	HERD_CHECK_GOTO(
		herd__calloc(&s.touched, (size_t)nc->nnuma + 1, sizeof(size_t), "a GPU set"), st,
		out);
	if (nc->ncand <= EXHAUSTIVE_MAX_CANDIDATES &&
	    sets_count(nc->ncand, k, EXHAUSTIVE_MAX_SETS) <= EXHAUSTIVE_MAX_SETS) {
		exhaustive(&s, 0, 0, 0, 0, 0);
	} else {
		ch->greedy = true;
		HERD_CHECK_GOTO(greedy(&s), st, out);
	}
	ch->evaluated = s.evaluated;
out:
	free(s.cur);
	free(s.touched);
	if (st != HERD_OK)
		herd__planner_choice_clear(ch);
	return st;
}

/*
 * The largest set of candidates that meets the link demand, for messages:
 * exact (a small clique search) up to 64 candidates, a greedy bound above.
 */
static size_t max_clique(uint64_t cand, const uint64_t *adj, size_t size, size_t best)
{
	while (cand != 0) {
		int v;

		if (size + (size_t)__builtin_popcountll(cand) <= best)
			return best;
		v = __builtin_ctzll(cand);
		cand &= cand - 1;
		best = max_clique(cand & adj[v], adj, size + 1, best);
	}
	return size > best ? size : best;
}

size_t herd__planner_largest_feasible(const struct planner *p, const struct node_ctx *nc)
{
	size_t m = nc->ncand, best = 0;

	if (p->req->link == HERD_ALLOC_LINK_ANY || p->req->link == HERD_ALLOC_LINK_SAME_NODE)
		return m;
	if (p->req->link == HERD_ALLOC_LINK_SAME_NUMA) {
		for (int d = 0; d < nc->nnuma; d++)
			if (nc->numa_os[d] >= 0 && nc->numa_free[d] > best)
				best = nc->numa_free[d];
		return best;
	}
	if (m <= 64) {
		uint64_t adj[64] = { 0 };

		for (size_t a = 0; a < m; a++)
			for (size_t b = 0; b < m; b++)
				if (a != b && herd__planner_pair_ok(p, nc, a, b))
					adj[a] |= (uint64_t)1 << b;
		return max_clique(m == 64 ? ~(uint64_t)0 : ((uint64_t)1 << m) - 1, adj, 0, 0);
	}
	/* Beyond: greedy from a few seeds, a lower bound. */
	for (size_t si = 0; si < GREEDY_MAX_SEEDS; si++) {
		size_t seed = si * m / GREEDY_MAX_SEEDS, n = 0;
		size_t *set = malloc(m * sizeof(size_t));

		if (set == NULL)
			return best;
		set[n++] = seed;
		for (size_t c = 0; c < m; c++) {
			bool ok = c != seed;

			for (size_t o = 0; ok && o < n; o++)
				ok = herd__planner_pair_ok(p, nc, set[o], c);
			if (ok)
				set[n++] = c;
		}
		free(set);
		if (n > best)
			best = n;
	}
	return best;
}

