/*
 * sdk/alloc/planner.c - herd_alloc_plan: from an inventory, a request and
 * what is known of the GPUs' use, to a plan and the reasons for it.
 *
 * Three steps.  Each node's candidates: the GPUs the request may use, with
 * the reason for every other one (kept for messages).  Then, for the count
 * of GPUs a node should give, the best set of its candidates under the
 * ordering that alloc.h describes: exhaustively while a node offers few
 * sets, greedily beyond.  Then the nodes: one, a fixed number with a fixed
 * count each, or as many as packing or spreading takes.  Nothing here
 * reads a file, the clock or the environment.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc_internal.h"
#include "topo/probe.h"

/* Pair classes in the order of preference; NONE is "no NIC at all". */
enum { CLS_NV = 0, CLS_PIX, CLS_PXB, CLS_PHB, CLS_NODE, CLS_SYS, CLS_NONE };

static const int class_points[] = { 100, 60, 50, 40, 30, 10 };

static const char *const class_codes[] = { "NV", "PIX", "PXB", "PHB", "NODE", "SYS" };

static const char *const class_words[] = {
	[CLS_NV] = "NVLink",
	[CLS_PIX] = "one PCIe switch",
	[CLS_PXB] = "several PCIe switches, no host bridge",
	[CLS_PHB] = "one PCIe host bridge",
	[CLS_NODE] = "host bridges of one NUMA node",
	[CLS_SYS] = "the link between sockets",
};

/* Sets a node may offer before the search turns greedy. */
#define EXHAUSTIVE_MAX_SETS 20000
#define EXHAUSTIVE_MAX_CANDIDATES 64
#define GREEDY_MAX_SEEDS 32
/* Unavailable GPUs named one by one in a message, and nodes listed. */
#define MESSAGE_MAX_GPUS 8
#define MESSAGE_MAX_NODES 4

static int link_class(herd_link l)
{
	switch (l.kind) {
	case HERD_LINK_SELF:
	case HERD_LINK_NVLINK:
		return CLS_NV;
	case HERD_LINK_PIX:
		return CLS_PIX;
	case HERD_LINK_PXB:
		return CLS_PXB;
	case HERD_LINK_PHB:
		return CLS_PHB;
	case HERD_LINK_NODE:
		return CLS_NODE;
	case HERD_LINK_SYS:
		return CLS_SYS;
	}
	return CLS_SYS;
}

/* What makes a set better, compared field by field, lower first. */
struct quality {
	long busy;    /* GPUs with processes no lease accounts for */
	long worst;   /* worst pair class */
	long sum;     /* sum of pair classes */
	long nvlinks; /* minus the NVLinks between pairs */
	long nic;     /* sum of the nearest NIC's class, when near_nic */
	long numa;    /* NUMA nodes touched (negated for spread) */
	long fit;     /* free GPUs left on those NUMA nodes (negated for spread) */
};

enum { Q_BUSY, Q_WORST, Q_SUM, Q_NVLINKS, Q_NIC, Q_NUMA, Q_FIT, Q_SAME };

/* The first field in which a and b differ (Q_SAME when none). */
static int quality_diff(const struct quality *a, const struct quality *b)
{
	const long fa[] = { a->busy, a->worst, a->sum, a->nvlinks, a->nic, a->numa, a->fit };
	const long fb[] = { b->busy, b->worst, b->sum, b->nvlinks, b->nic, b->numa, b->fit };

	for (int i = 0; i < Q_SAME; i++)
		if (fa[i] != fb[i])
			return i;
	return Q_SAME;
}

static int quality_cmp(const struct quality *a, const struct quality *b)
{
	const long fa[] = { a->busy, a->worst, a->sum, a->nvlinks, a->nic, a->numa, a->fit };
	const long fb[] = { b->busy, b->worst, b->sum, b->nvlinks, b->nic, b->numa, b->fit };
	int i = quality_diff(a, b);

	if (i == Q_SAME)
		return 0;
	return fa[i] < fb[i] ? -1 : 1;
}

/* Why a GPU of a node is not a candidate. */
enum why_not {
	WHY_CANDIDATE = 0,
	WHY_EXCLUDED,
	WHY_NOT_INCLUDED,
	WHY_HELD,
	WHY_SHARED,
	WHY_UNKNOWN,
	WHY_MEMORY,
	WHY_BADUUID
};

struct cand {
	size_t gpu; /* in node->gpus */
	int numa;   /* dense index of its NUMA node among the candidates' */
	int busy;
	int nic_class; /* of its nearest NIC, CLS_NONE without one */
};

/* One node: its candidates and the links between them. */
struct node_ctx {
	const herd_node *node;
	size_t index;
	enum why_not *why;              /* per GPU of the node */
	const herd_gpu_status **status; /* per GPU, NULL when none */
	size_t ncand;
	struct cand *cand;
	unsigned char *cls; /* ncand * ncand pair classes */
	unsigned char *nvl; /* ncand * ncand NVLink counts, capped */
	int nnuma;          /* distinct NUMA nodes of the candidates */
	size_t *numa_free;  /* candidates per dense NUMA index */
	int *numa_os;       /* dense index -> os index (-1 unknown) */
};

/* The best set (and runner-up) of k candidates of one node. */
struct choice {
	bool ok;
	size_t k;
	size_t *set; /* k candidate indices, ascending */
	struct quality q;
	bool has_second;
	size_t *second;
	struct quality q2;
	bool greedy;
	unsigned long evaluated;
};

struct planner {
	const herd_cluster *cluster;
	const herd_alloc_request *req;
	long G, K, N, R;
	bool single; /* every GPU on one node */
	bool spread;
	const herd_gpu_status **sorted;
	size_t nsorted;
	struct node_ctx *nodes;
	size_t nnodes;
};

/* ---------------------------------------------------------- matching */

static int status_cmp(const void *a, const void *b)
{
	const herd_gpu_status *x = *(const herd_gpu_status *const *)a;
	const herd_gpu_status *y = *(const herd_gpu_status *const *)b;

	return strcasecmp(x->uuid, y->uuid);
}

static const herd_gpu_status *find_status(const struct planner *p, const char *uuid)
{
	size_t lo = 0, hi = p->nsorted;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcasecmp(uuid, p->sorted[mid]->uuid);

		if (c == 0)
			return p->sorted[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

bool herd__alloc_host_matches(const char *host, const char *name)
{
	size_t lh, ln;

	if (host == NULL)
		return false;
	if (strcasecmp(host, name) == 0)
		return true;
	lh = strcspn(host, ".");
	ln = strcspn(name, ".");
	if ((host[lh] == '\0') == (name[ln] == '\0'))
		return false; /* both short or both long, and they differ */
	return lh == ln && strncasecmp(host, name, lh) == 0;
}

static bool gpu_matches(const herd_gpu *g, const char *name)
{
	char bus[HERD_PCI_ID_LEN];

	if (strcasecmp(g->uuid, name) == 0)
		return true;
	return herd__topo_pci_normalize(name, bus) && strcasecmp(bus, g->pci.bus_id) == 0;
}

/* Whether name names some GPU or node of the cluster. */
static bool names_something(const herd_cluster *cluster, const char *name)
{
	size_t n = herd_cluster_node_count(cluster);

	for (size_t i = 0; i < n; i++) {
		const herd_node *node = herd_cluster_node(cluster, i);

		if (herd__alloc_host_matches(node->hostname, name))
			return true;
		for (size_t g = 0; g < node->ngpus; g++)
			if (gpu_matches(&node->gpus[g], name))
				return true;
	}
	return false;
}

bool herd__alloc_names_gpu(const herd_node *node, const herd_gpu *g, const char *name)
{
	return herd__alloc_host_matches(node->hostname, name) || gpu_matches(g, name);
}

static bool listed(const char *const *names, size_t n, const herd_node *node, const herd_gpu *g)
{
	for (size_t i = 0; i < n; i++)
		if (herd__alloc_names_gpu(node, g, names[i]))
			return true;
	return false;
}

static herd_status check_listed_names(const herd_cluster *cluster, const char *field,
				      const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!names_something(cluster, names[i]))
			return herd__error(
				HERD_EINVAL,
				"request: %s[%zu] '%s' names no GPU (UUID or PCI bus id) "
				"and no node of the inventory",
				field, i, names[i]);
	return HERD_OK;
}

/* ------------------------------------------------------- candidates */

/* Free memory of a GPU: NVML's when known, else all of it. */
static uint64_t gpu_free_memory(const herd_gpu *g, const herd_gpu_status *s)
{
	if (s != NULL && s->free_memory_bytes >= 0)
		return (uint64_t)s->free_memory_bytes;
	return g->memory_bytes;
}

static enum why_not why_not(const struct planner *p, const herd_node *node, const herd_gpu *g,
			    const herd_gpu_status *s)
{
	const herd_alloc_request *req = p->req;

	if (!herd__lease_uuid_ok(g->uuid))
		return WHY_BADUUID;
	if (listed(req->exclude, req->nexclude, node, g))
		return WHY_EXCLUDED;
	if (req->ninclude > 0 && !listed(req->include, req->ninclude, node, g))
		return WHY_NOT_INCLUDED;
	if (s != NULL) {
		if (s->state == HERD_LEASE_UNKNOWN)
			return WHY_UNKNOWN;
		if (s->state == HERD_LEASE_EXCLUSIVE)
			return WHY_HELD;
		if (s->state == HERD_LEASE_SHARED && !req->shared)
			return WHY_SHARED;
	}
	if (gpu_free_memory(g, s) < req->min_free_memory_bytes)
		return WHY_MEMORY;
	return WHY_CANDIDATE;
}

/* The class of the nearest matrix NIC of GPU gpu of node. */
static int nearest_nic_class(const herd_node *node, size_t gpu)
{
	size_t n = herd_node_nic_count(node);
	int best = CLS_NONE;

	for (size_t j = 0; j < n; j++) {
		herd_link l;

		if (herd_node_gpu_nic_link(node, gpu, j, &l) == HERD_OK && link_class(l) < best)
			best = link_class(l);
	}
	return best;
}

static int dense_numa(struct node_ctx *nc, int os_index)
{
	for (int i = 0; i < nc->nnuma; i++)
		if (nc->numa_os[i] == os_index)
			return i;
	nc->numa_os[nc->nnuma] = os_index;
	return nc->nnuma++;
}

static herd_status node_prepare(const struct planner *p, struct node_ctx *nc, size_t index)
{
	const herd_node *node = herd_cluster_node(p->cluster, index);
	size_t m = 0;

	nc->node = node;
	nc->index = index;
	if (node->ngpus == 0)
		return HERD_OK;
	if (node->ngpus > HERD_ALLOC_MAX_GPUS_PER_NODE)
		return herd__error(HERD_EINVAL, "node %s has %zu GPUs; at most %d are supported",
				   node->hostname, node->ngpus, HERD_ALLOC_MAX_GPUS_PER_NODE);
	HERD_CHECK(herd__calloc(&nc->why, node->ngpus, sizeof(*nc->why), "GPU states"));
	HERD_CHECK(herd__calloc(&nc->status, node->ngpus, sizeof(*nc->status), "GPU states"));
	HERD_CHECK(herd__calloc(&nc->cand, node->ngpus, sizeof(*nc->cand), "candidates"));
	HERD_CHECK(herd__calloc(&nc->numa_os, node->ngpus, sizeof(int), "NUMA nodes"));
	HERD_CHECK(herd__calloc(&nc->numa_free, node->ngpus, sizeof(size_t), "NUMA nodes"));
	for (size_t g = 0; g < node->ngpus; g++) {
		const herd_gpu *gpu = &node->gpus[g];
		const herd_gpu_status *s = find_status(p, gpu->uuid);
		struct cand *c;

		nc->status[g] = s;
		nc->why[g] = why_not(p, node, gpu, s);
		if (nc->why[g] != WHY_CANDIDATE)
			continue;
		c = &nc->cand[m++];
		c->gpu = g;
		c->numa = dense_numa(nc, gpu->pci.numa_node);
		nc->numa_free[c->numa]++;
		/* Processes on a GPU nobody leased: someone else's job. */
		c->busy = s != NULL && s->processes > 0 && s->state == HERD_LEASE_FREE;
		c->nic_class = nearest_nic_class(node, g);
	}
	nc->ncand = m;
	if (m == 0)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&nc->cls, m * m, 1, "GPU links"));
	HERD_CHECK(herd__calloc(&nc->nvl, m * m, 1, "GPU links"));
	for (size_t a = 0; a < m; a++) {
		for (size_t b = 0; b < m; b++) {
			herd_link l;

			HERD_CHECK(herd_node_gpu_link(node, nc->cand[a].gpu, nc->cand[b].gpu, &l));
			nc->cls[a * m + b] = (unsigned char)link_class(l);
			nc->nvl[a * m + b] =
				(unsigned char)(l.kind == HERD_LINK_NVLINK
							? (l.nvlinks > 255 ? 255 : l.nvlinks)
							: 0);
		}
	}
	return HERD_OK;
}

static void node_clear(struct node_ctx *nc)
{
	free(nc->why);
	free(nc->status);
	free(nc->cand);
	free(nc->cls);
	free(nc->nvl);
	free(nc->numa_os);
	free(nc->numa_free);
	memset(nc, 0, sizeof(*nc));
}

/* Whether candidates a and b may be in one set under the link demand. */
static bool pair_ok(const struct planner *p, const struct node_ctx *nc, size_t a, size_t b)
{
	switch (p->req->link) {
	case HERD_ALLOC_LINK_NVLINK:
		return nc->cls[a * nc->ncand + b] == CLS_NV;
	case HERD_ALLOC_LINK_SAME_NUMA:
		return nc->cand[a].numa == nc->cand[b].numa && nc->numa_os[nc->cand[a].numa] >= 0;
	default:
		return true;
	}
}

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
	if (!ch->ok || quality_cmp(&q, &ch->q) < 0) {
		if (ch->ok) {
			memcpy(ch->second, ch->set, k * sizeof(*set));
			ch->q2 = ch->q;
			ch->has_second = true;
		}
		memcpy(ch->set, set, k * sizeof(*set));
		ch->q = q;
		ch->ok = true;
	} else if (!ch->has_second || quality_cmp(&q, &ch->q2) < 0) {
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

			ok = pair_ok(s->p, nc, o, c);
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
				if (!pair_ok(s->p, nc, pick, c))
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

static void choice_clear(struct choice *ch)
{
	free(ch->set);
	free(ch->second);
	memset(ch, 0, sizeof(*ch));
}

/* The best set of k candidates of nc into *ch (ch->ok false when none). */
static herd_status search_node(const struct planner *p, const struct node_ctx *nc, size_t k,
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
		choice_clear(ch);
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

static size_t largest_feasible(const struct planner *p, const struct node_ctx *nc)
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
				if (a != b && pair_ok(p, nc, a, b))
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
				ok = pair_ok(p, nc, set[o], c);
			if (ok)
				set[n++] = c;
		}
		free(set);
		if (n > best)
			best = n;
	}
	return best;
}

/* ------------------------------------------------------------ messages */

static const char *why_words(enum why_not w)
{
	switch (w) {
	case WHY_EXCLUDED:
		return "excluded";
	case WHY_NOT_INCLUDED:
		return "not granted";
	case WHY_HELD:
		return "held";
	case WHY_SHARED:
		return "shared by other jobs";
	case WHY_UNKNOWN:
		return "lease file unusable";
	case WHY_MEMORY:
		return "too little free memory";
	case WHY_BADUUID:
		return "UUID unusable as a lease name";
	case WHY_CANDIDATE:
		break;
	}
	return "free";
}

static double gib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* "GPU3 held by job 42 (pid 77, user ann)" and the like. */
static void describe_unavailable(herd__text *t, const struct planner *p, const struct node_ctx *nc,
				 size_t g)
{
	const herd_gpu_status *s = nc->status[g];
	const herd_gpu *gpu = &nc->node->gpus[g];

	herd__text_printf(t, "GPU%zu %s", g, why_words(nc->why[g]));
	switch (nc->why[g]) {
	case WHY_HELD:
		/* "-" is the job of a holder that was given none. */
		if (s->job[0] != '\0' && strcmp(s->job, "-") != 0)
			herd__text_printf(t, " by job %s%s", s->job, s->pid > 0 ? " (pid " : "");
		else if (s->pid > 0)
			herd__text_printf(t, " by a process (pid ");
		else
			herd__text_printf(t, " by an unknown holder");
		if (s->pid > 0)
			herd__text_printf(t, "%lld%s%s)", (long long)s->pid,
					  s->user[0] ? ", user " : "", s->user);
		break;
	case WHY_UNKNOWN:
		if (s->note[0] != '\0')
			herd__text_printf(t, " (%s)", s->note);
		break;
	case WHY_MEMORY:
		herd__text_printf(t, " (%.1f GiB free, need %.1f GiB)",
				  gib(gpu_free_memory(gpu, s)), gib(p->req->min_free_memory_bytes));
		break;
	default:
		break;
	}
}

/* "; not available: GPU0 held by ..., GPU2 excluded" for one node. */
static void describe_node_unavailable(herd__text *t, const struct planner *p,
				      const struct node_ctx *nc, const char *prefix)
{
	size_t shown = 0, total = 0;

	for (size_t g = 0; g < nc->node->ngpus; g++) {
		if (nc->why[g] == WHY_CANDIDATE)
			continue;
		total++;
		if (shown >= MESSAGE_MAX_GPUS)
			continue;
		herd__text_printf(t, "%s", shown == 0 ? prefix : ", ");
		describe_unavailable(t, p, nc, g);
		shown++;
	}
	if (total > shown)
		herd__text_printf(t, " and %zu more", total - shown);
}

/* What the request needs, as the start of a message. */
static void describe_need(herd__text *t, const struct planner *p, long nodes, long per_node)
{
	const char *adj = "", *tail = "";

	if (p->req->link == HERD_ALLOC_LINK_NVLINK)
		adj = "NVLink-connected ";
	else if (p->req->link == HERD_ALLOC_LINK_SAME_NUMA)
		tail = " sharing a NUMA node";
	if (p->req->min_free_memory_bytes > 0)
		tail = p->req->link == HERD_ALLOC_LINK_SAME_NUMA
			       ? " sharing a NUMA node, each with enough free memory"
			       : " with enough free memory each";
	if (nodes <= 1)
		herd__text_printf(t, "need %ld %sGPU%s%s on one node", per_node, adj,
				  per_node == 1 ? "" : "s", tail);
	else
		herd__text_printf(t, "need %ld nodes with %ld %sGPU%s%s each", nodes, per_node, adj,
				  per_node == 1 ? "" : "s", tail);
}

static int node_order_by_free(const void *a, const void *b)
{
	const struct node_ctx *x = *(const struct node_ctx *const *)a;
	const struct node_ctx *y = *(const struct node_ctx *const *)b;

	if (x->ncand != y->ncand)
		return x->ncand > y->ncand ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * The per-node part of a message: the nodes with the most candidates, how
 * many of them meet the demand, and the others' count.
 */
static herd_status describe_nodes(herd__text *t, const struct planner *p, long per_node,
				  const char *lead)
{
	const struct node_ctx **order = NULL;
	size_t shown = 0, rest_max = 0;

	HERD_CHECK(herd__calloc(&order, p->nnodes, sizeof(*order), "a message"));
	for (size_t i = 0; i < p->nnodes; i++)
		order[i] = &p->nodes[i];
	qsort(order, p->nnodes, sizeof(*order), node_order_by_free);
	for (size_t i = 0; i < p->nnodes; i++) {
		const struct node_ctx *nc = order[i];

		if (shown >= MESSAGE_MAX_NODES || (nc->ncand == 0 && p->nnodes > 1 && shown > 0)) {
			if (nc->ncand > rest_max)
				rest_max = nc->ncand;
			continue;
		}
		herd__text_printf(t, "%snode %s has %zu free of %zu", shown ? ", " : lead,
				  nc->node->hostname, nc->ncand, nc->node->ngpus);
		if (per_node > 0 && nc->ncand >= (size_t)per_node &&
		    p->req->link != HERD_ALLOC_LINK_ANY &&
		    p->req->link != HERD_ALLOC_LINK_SAME_NODE) {
			size_t f = largest_feasible(p, nc);

			herd__text_printf(t, " but at most %zu %s", f,
					  p->req->link == HERD_ALLOC_LINK_NVLINK
						  ? "NVLink-connected"
						  : "on one NUMA node");
		}
		if (nc->node->ngpus == 0 && nc->node->gpu_note != NULL)
			herd__text_printf(t, " (%s)", nc->node->gpu_note);
		shown++;
	}
	if (shown < p->nnodes) {
		if (rest_max == 0)
			herd__text_printf(t, ", the others 0");
		else
			herd__text_printf(t, ", %zu more nodes with at most %zu free",
					  p->nnodes - shown, rest_max);
	}
	if (p->nnodes == 1)
		describe_node_unavailable(t, p, &p->nodes[0], "; not available: ");
	free(order);
	return HERD_OK;
}

static herd_status no_resource(const struct planner *p, long nodes, long per_node)
{
	herd__text t = { 0 };
	char *msg = NULL;
	herd_status st;

	describe_need(&t, p, nodes, per_node);
	st = describe_nodes(&t, p, per_node, "; ");
	if (st != HERD_OK) {
		herd__text_free(&t);
		return st;
	}
	HERD_CHECK(herd__text_take(&t, &msg));
	st = herd__error(HERD_ENORESOURCE, "%s", msg);
	free(msg);
	return st;
}

static herd_status no_resource_total(const struct planner *p, size_t total)
{
	herd__text t = { 0 };
	char *msg = NULL;
	herd_status st;

	herd__text_printf(&t, "need %ld GPU%s; the inventory has %zu free", p->G,
			  p->G == 1 ? "" : "s", total);
	if (p->R > 1)
		herd__text_printf(&t, " (in whole groups of %ld per rank)", p->R);
	st = describe_nodes(&t, p, 0, ": ");
	if (st != HERD_OK) {
		herd__text_free(&t);
		return st;
	}
	HERD_CHECK(herd__text_take(&t, &msg));
	st = herd__error(HERD_ENORESOURCE, "%s", msg);
	free(msg);
	return st;
}

/* ------------------------------------------------------- node choice */

/* A node taking part in the plan, with its count and chosen set. */
struct pick {
	struct node_ctx *nc;
	struct choice ch;
};

/* Capacity of a node in whole ranks' worth of GPUs. */
static size_t capacity(const struct planner *p, const struct node_ctx *nc)
{
	return nc->ncand / (size_t)p->R * (size_t)p->R;
}

/* Orders evaluated nodes: set quality, then fit, then inventory order. */
static int pick_cmp_with(const struct planner *p, const struct pick *a, const struct pick *b)
{
	int c = quality_cmp(&a->ch.q, &b->ch.q);
	size_t la, lb;

	if (c != 0)
		return c;
	la = a->nc->ncand - a->ch.k;
	lb = b->nc->ncand - b->ch.k;
	if (la != lb)
		return (la < lb) != p->spread ? -1 : 1;
	return a->nc->index < b->nc->index ? -1 : 1;
}

/*
 * count GPUs on each of nodes nodes: evaluate every node that has room,
 * keep the best nodes.  *picks receives nodes entries.
 */
static herd_status choose_fixed(const struct planner *p, size_t nodes, size_t count,
				struct pick *picks)
{
	struct pick *all = NULL;
	size_t nok = 0;
	herd_status st = HERD_OK;

	HERD_CHECK(herd__calloc(&all, p->nnodes, sizeof(*all), "node choices"));
	for (size_t i = 0; i < p->nnodes; i++) {
		struct pick cand = { &p->nodes[i], { 0 } };

		if (capacity(p, &p->nodes[i]) < count)
			continue;
		HERD_CHECK_GOTO(search_node(p, &p->nodes[i], count, &cand.ch), st, out);
		if (!cand.ch.ok) {
			choice_clear(&cand.ch);
			continue;
		}
		/* Insertion keeps all[] sorted best first. */
		size_t at = nok;

		while (at > 0 && pick_cmp_with(p, &cand, &all[at - 1]) < 0) {
			all[at] = all[at - 1];
			at--;
		}
		all[at] = cand;
		nok++;
	}
	if (nok < nodes) {
		st = no_resource(p, (long)nodes, (long)count);
		goto out;
	}
	for (size_t i = 0; i < nodes; i++) {
		picks[i] = all[i];
		memset(&all[i], 0, sizeof(all[i]));
	}
out:
	for (size_t i = 0; i < nok; i++)
		choice_clear(&all[i].ch);
	free(all);
	return st;
}

static int order_by_capacity(const void *a, const void *b, bool desc)
{
	const struct pick *x = a, *y = b;
	size_t cx = x->ch.k, cy = y->ch.k; /* k holds the capacity while choosing */

	if (cx != cy)
		return (cx > cy) == desc ? -1 : 1;
	return x->nc->index < y->nc->index ? -1 : 1;
}

static int by_capacity_desc(const void *a, const void *b)
{
	return order_by_capacity(a, b, true);
}

/*
 * G GPUs with no count per node and no link demand, over several nodes:
 * PACK takes the roomiest nodes until the rest fits, and the rest goes to
 * the tightest node it fits in; SPREAD deals one rank's GPUs to each node
 * in turn.  *picks (nnodes entries) receives the counts in ch.k; *npicks
 * how many nodes.
 */
static herd_status choose_counts(const struct planner *p, struct pick *picks, size_t *npicks)
{
	size_t total = 0, n = 0, left = (size_t)p->G;
	struct pick *all = NULL;
	herd_status st = HERD_OK;

	*npicks = 0;
	HERD_CHECK(herd__calloc(&all, p->nnodes, sizeof(*all), "node choices"));
	for (size_t i = 0; i < p->nnodes; i++) {
		all[i].nc = &p->nodes[i];
		all[i].ch.k = capacity(p, &p->nodes[i]);
		total += all[i].ch.k;
	}
	if (total < (size_t)p->G) {
		st = no_resource_total(p, total);
		goto out;
	}
	qsort(all, p->nnodes, sizeof(*all), by_capacity_desc);
	if (!p->spread) {
		for (size_t i = 0; i < p->nnodes && left > 0; i++) {
			size_t best = i;

			if (all[i].ch.k >= left) {
				/* The rest fits: the tightest node that holds it. */
				for (size_t j = i; j < p->nnodes; j++)
					if (all[j].ch.k >= left && all[j].ch.k < all[best].ch.k)
						best = j;
				picks[n] = all[best];
				picks[n++].ch.k = left;
				left = 0;
				break;
			}
			picks[n++] = all[i];
			left -= all[i].ch.k;
		}
	} else {
		size_t *given = NULL;

		HERD_CHECK_GOTO(herd__calloc(&given, p->nnodes, sizeof(size_t), "node choices"), st,
				out);
		while (left > 0) {
			for (size_t i = 0; i < p->nnodes && left > 0; i++) {
				if (given[i] + (size_t)p->R <= all[i].ch.k) {
					given[i] += (size_t)p->R;
					left -= (size_t)p->R;
				}
			}
		}
		for (size_t i = 0; i < p->nnodes; i++) {
			if (given[i] == 0)
				continue;
			picks[n] = all[i];
			picks[n++].ch.k = given[i];
		}
		free(given);
	}
	*npicks = n;
out:
	free(all);
	return st;
}

/* --------------------------------------------------------- the plan */

/* Whether netdev d is up and has an address other than link-local. */
static bool netdev_addressed(const herd_netdev *d)
{
	if (strcmp(d->state, "up") != 0 && strcmp(d->state, "unknown") != 0)
		return false;
	for (size_t i = 0; i < d->naddrs; i++)
		if (d->addrs[i] != NULL && strncasecmp(d->addrs[i], "fe80:", 5) != 0 &&
		    strncmp(d->addrs[i], "169.254.", 8) != 0)
			return true;
	return false;
}

/* The first active port of an RDMA device, 0 when none is. */
static int rdma_active_port(const herd_rdma_device *d)
{
	for (size_t i = 0; i < d->nports; i++)
		if (strcmp(d->ports[i].state, "active") == 0)
			return d->ports[i].port;
	return 0;
}

/*
 * The class of the PCI path from GPU gpu to the device at loc: the matrix's
 * when a matrix NIC sits on the same PCI function (an RDMA device and its
 * netdev do), else from host bridge and NUMA node alone.
 */
static int pci_class_to(const herd_node *node, size_t gpu, const herd_pci_loc *loc)
{
	const herd_pci_loc *g = &node->gpus[gpu].pci;
	size_t n = herd_node_nic_count(node);

	for (size_t j = 0; j < n; j++) {
		const herd_pci_loc *nic_pci = NULL;
		herd_link l;

		if (herd_node_nic(node, j, NULL, &nic_pci) == HERD_OK &&
		    strcmp(nic_pci->bus_id, loc->bus_id) == 0 &&
		    herd_node_gpu_nic_link(node, gpu, j, &l) == HERD_OK)
			return link_class(l);
	}
	if (loc->host_bridge[0] != '\0' && strcmp(loc->host_bridge, g->host_bridge) == 0)
		return CLS_PHB;
	if (loc->numa_node >= 0 && loc->numa_node == g->numa_node)
		return CLS_NODE;
	return CLS_SYS;
}

/* Whether matrix NIC j can carry traffic: an active port, or an up link. */
static bool nic_usable(const herd_node *node, size_t j)
{
	if (node->nrdma > 0)
		return j < node->nrdma && rdma_active_port(&node->rdma[j]) > 0;
	for (size_t i = 0; i < node->nnetdevs; i++) {
		if (node->netdevs[i].pci.bus_id[0] == '\0')
			continue;
		if (j-- == 0)
			return strcmp(node->netdevs[i].state, "up") == 0;
	}
	return false;
}

/*
 * The NICs of a rank whose first GPU is gpu: the nearest matrix NIC (ties
 * to usable ones, then the least used by the plan's earlier ranks on the
 * node), the nearest RDMA device with an active port, the nearest
 * addressed interface.  uses[] counts per matrix NIC.
 */
static herd_status bind_nics(herd_plan *plan, herd_plan_rank *r, const herd_node *node, size_t gpu,
			     size_t *uses)
{
	size_t n = herd_node_nic_count(node), best = n;
	int best_cls = CLS_NONE, best_rdma_cls = CLS_NONE, best_if_cls = CLS_NONE;
	bool best_usable = false;
	const herd_rdma_device *rdma = NULL;
	const herd_netdev *ifc = NULL;
	char buf[HERD_NAME_LEN + 16];

	r->nic_link.kind = HERD_LINK_SYS;
	r->nic_link.nvlinks = 0;
	for (size_t j = 0; j < n; j++) {
		const char *name = NULL;
		const herd_pci_loc *loc = NULL;
		herd_link l;
		bool usable;
		int cls;

		if (herd_node_nic(node, j, &name, &loc) != HERD_OK ||
		    herd_node_gpu_nic_link(node, gpu, j, &l) != HERD_OK)
			continue;
		cls = link_class(l);
		usable = nic_usable(node, j);
		if (best == n || cls < best_cls ||
		    (cls == best_cls &&
		     (usable > best_usable || (usable == best_usable && uses[j] < uses[best])))) {
			best = j;
			best_cls = cls;
			best_usable = usable;
			r->nic_link = l;
		}
	}
	if (best < n) {
		const char *name = NULL;

		HERD_CHECK(herd_node_nic(node, best, &name, NULL));
		uses[best]++;
		HERD_CHECK(herd__plan_strdup(plan, name, &r->nic));
	} else {
		HERD_CHECK(herd__plan_strdup(plan, "", &r->nic));
	}
	for (size_t i = 0; i < node->nrdma; i++) {
		int cls = pci_class_to(node, gpu, &node->rdma[i].pci);

		if (rdma_active_port(&node->rdma[i]) > 0 && cls < best_rdma_cls) {
			best_rdma_cls = cls;
			rdma = &node->rdma[i];
		}
	}
	if (rdma != NULL) {
		snprintf(buf, sizeof(buf), "=%s:%d", rdma->name, rdma_active_port(rdma));
		HERD_CHECK(herd__plan_strdup(plan, buf, &r->ib_hca));
	} else {
		HERD_CHECK(herd__plan_strdup(plan, "", &r->ib_hca));
	}
	for (size_t i = 0; i < node->nnetdevs; i++) {
		const herd_netdev *d = &node->netdevs[i];
		int cls;

		if (d->pci.bus_id[0] == '\0' || !netdev_addressed(d))
			continue;
		cls = pci_class_to(node, gpu, &d->pci);
		if (cls < best_if_cls) {
			best_if_cls = cls;
			ifc = d;
		}
	}
	if (ifc != NULL) {
		snprintf(buf, sizeof(buf), "=%s", ifc->name);
		HERD_CHECK(herd__plan_strdup(plan, buf, &r->socket_ifname));
	} else {
		HERD_CHECK(herd__plan_strdup(plan, "", &r->socket_ifname));
	}
	return HERD_OK;
}

static const char *numa_cpus(const herd_node *node, int os_index)
{
	for (size_t i = 0; i < node->nnuma; i++)
		if (node->numa[i].os_index == os_index && node->numa[i].cpus != NULL)
			return node->numa[i].cpus;
	return NULL;
}

/* The rank's NUMA node and CPUs: one NUMA node's, the union of several. */
static herd_status bind_cpus(herd_plan *plan, herd_plan_rank *r, const herd_node *node)
{
	herd__text t = { 0 };
	char *cpus = NULL;
	herd_status st;

	r->numa_node = r->gpus[0].numa_node;
	for (size_t g = 0; g < r->ngpus; g++) {
		int numa = r->gpus[g].numa_node;
		const char *list = numa >= 0 ? numa_cpus(node, numa) : NULL;
		bool seen = false;

		if (list == NULL) {
			herd__text_free(&t);
			r->numa_node = -1;
			return herd__plan_strdup(plan, "", &r->cpus);
		}
		if (numa != r->numa_node)
			r->numa_node = -1;
		for (size_t h = 0; h < g; h++)
			seen |= r->gpus[h].numa_node == numa;
		if (!seen)
			herd__text_printf(&t, "%s%s", t.len ? "," : "", list);
	}
	HERD_CHECK(herd__text_take(&t, &cpus));
	st = herd__plan_strdup(plan, cpus, &r->cpus);
	free(cpus);
	return st;
}

static herd_status add_warning(herd_plan *plan, const char *fmt, ...) HERD_PRINTF(2, 3);

static herd_status add_warning(herd_plan *plan, const char *fmt, ...)
{
	char buf[512];
	char **grown;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	grown = realloc(plan->warnings, (plan->nwarnings + 1) * sizeof(*grown));
	if (grown == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for a plan's warnings");
	plan->warnings = grown;
	return herd__strdup(&plan->warnings[plan->nwarnings++], buf);
}

static herd_status warn_busy(herd_plan *plan, const struct node_ctx *nc, size_t g)
{
	const herd_gpu_status *s = nc->status[g];
	char pids[160] = "";
	size_t len = 0;
	int shown =
		s->processes < HERD_GPU_STATUS_MAX_PIDS ? s->processes : HERD_GPU_STATUS_MAX_PIDS;

	for (int i = 0; i < shown && len < sizeof(pids); i++)
		len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%lld", i ? ", " : "",
					(long long)s->pids[i]);
	return add_warning(plan,
			   "GPU%zu of %s (%s, %s) already runs %d compute process%s (pid%s %s) "
			   "that no herd lease accounts for: a stale job?",
			   g, nc->node->hostname, nc->node->gpus[g].uuid,
			   nc->node->gpus[g].pci.bus_id, s->processes,
			   s->processes == 1 ? "" : "es", shown == 1 ? "" : "s", pids);
}

static int pick_by_index(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;

	return x->nc->index < y->nc->index ? -1 : x->nc->index > y->nc->index;
}

/* Fills the plan's GPUs, ranks, link blocks and score from the picks. */
static herd_status build(const struct planner *p, herd_plan *plan, struct pick *picks,
			 size_t npicks)
{
	size_t ngpus = 0, gi = 0, ri = 0, pairs = 0;
	long points = 0;

	qsort(picks, npicks, sizeof(*picks), pick_by_index);
	for (size_t i = 0; i < npicks; i++)
		ngpus += picks[i].ch.k;
	HERD_CHECK(herd__calloc(&plan->gpus, ngpus, sizeof(*plan->gpus), "a plan"));
	HERD_CHECK(
		herd__calloc(&plan->ranks, ngpus / (size_t)p->R, sizeof(*plan->ranks), "a plan"));
	HERD_CHECK(herd__calloc(&plan->blocks, npicks, sizeof(*plan->blocks), "a plan"));
	plan->ngpus = ngpus;
	plan->nranks = ngpus / (size_t)p->R;
	plan->nblocks = npicks;
	for (size_t i = 0; i < npicks; i++) {
		const struct node_ctx *nc = picks[i].nc;
		const herd_node *node = nc->node;
		struct herd__plan_block *blk = &plan->blocks[i];
		size_t k = picks[i].ch.k, *uses = NULL;
		const char *host;
		herd_status st;

		HERD_CHECK(herd__plan_strdup(plan, node->hostname, &host));
		blk->node = nc->index;
		blk->first = gi;
		blk->count = k;
		HERD_CHECK(herd__calloc(&blk->links, k * k, sizeof(herd_link), "a plan"));
		for (size_t a = 0; a < k; a++) {
			const herd_gpu *gpu = &node->gpus[nc->cand[picks[i].ch.set[a]].gpu];
			herd_plan_gpu *pg = &plan->gpus[gi + a];

			pg->rank = (int)(ri + a / (size_t)p->R);
			pg->node = nc->index;
			pg->hostname = host;
			pg->index = nc->cand[picks[i].ch.set[a]].gpu;
			pg->numa_node = gpu->pci.numa_node;
			HERD_CHECK(herd__plan_strdup(plan, gpu->uuid, &pg->uuid));
			HERD_CHECK(herd__plan_strdup(plan, gpu->pci.bus_id, &pg->pci_bus_id));
			for (size_t b = 0; b < k; b++) {
				size_t gb = nc->cand[picks[i].ch.set[b]].gpu;

				HERD_CHECK(herd_node_gpu_link(node, pg->index, gb,
							      &blk->links[a * k + b]));
				if (b > a) {
					points += class_points[link_class(blk->links[a * k + b])];
					pairs++;
				}
			}
			if (nc->status[pg->index] != NULL && nc->cand[picks[i].ch.set[a]].busy)
				HERD_CHECK(warn_busy(plan, nc, pg->index));
		}
		HERD_CHECK(herd__calloc(&uses, herd_node_nic_count(node) + 1, sizeof(size_t),
					"a plan"));
		for (size_t a = 0; a < k; a += (size_t)p->R, ri++) {
			herd_plan_rank *r = &plan->ranks[ri];

			r->rank = (int)ri;
			r->node = nc->index;
			r->hostname = host;
			r->node_rank = (int)i;
			r->local_rank = (int)(a / (size_t)p->R);
			r->ngpus = (size_t)p->R;
			r->gpus = &plan->gpus[gi + a];
			st = bind_cpus(plan, r, node);
			if (st == HERD_OK)
				st = bind_nics(plan, r, node, r->gpus[0].index, uses);
			if (st != HERD_OK) {
				free(uses);
				return st;
			}
		}
		free(uses);
		gi += k;
	}
	plan->score = pairs > 0 ? (double)points / (double)pairs : 100.0;
	return HERD_OK;
}

/* ------------------------------------------------------------ explain */

static void explain_request(herd__text *t, const struct planner *p)
{
	const herd_alloc_request *req = p->req;

	herd__text_printf(t, "request: %ld GPU%s", p->G, p->G == 1 ? "" : "s");
	if (req->gpus_per_node > 0)
		herd__text_printf(t, ", %d per node", req->gpus_per_node);
	if (req->nodes > 0)
		herd__text_printf(t, ", %d node%s", req->nodes, req->nodes == 1 ? "" : "s");
	if (p->R > 1)
		herd__text_printf(t, ", %ld per rank", p->R);
	herd__text_printf(t, ", link %s, %s, %s", herd_alloc_link_str(req->link),
			  req->shared ? "shared" : "exclusive",
			  herd__alloc_policy_str(req->policy));
	if (req->near_nic)
		herd__text_printf(t, ", near a NIC");
	if (req->min_free_memory_bytes > 0)
		herd__text_printf(t, ", at least %.1f GiB free per GPU",
				  gib(req->min_free_memory_bytes));
	for (size_t i = 0; i < req->nexclude; i++)
		herd__text_printf(t, "%s%s", i ? ", " : ", excluding ", req->exclude[i]);
	if (req->ninclude > 0)
		herd__text_printf(t, ", only %zu named GPU%s or node%s", req->ninclude,
				  req->ninclude == 1 ? "" : "s", req->ninclude == 1 ? "" : "s");
	herd__text_printf(t, "\n");
}

static void explain_candidates(herd__text *t, const struct planner *p)
{
	size_t shown = 0;

	for (size_t i = 0; i < p->nnodes; i++) {
		const struct node_ctx *nc = &p->nodes[i];

		if (p->nnodes > MESSAGE_MAX_NODES * 2 && nc->ncand == 0)
			continue;
		if (shown++ >= MESSAGE_MAX_NODES * 2) {
			herd__text_printf(t, "  (%zu more nodes)\n", p->nnodes - shown + 1);
			break;
		}
		herd__text_printf(t, "node %s: %zu GPU%s, %zu candidate%s", nc->node->hostname,
				  nc->node->ngpus, nc->node->ngpus == 1 ? "" : "s", nc->ncand,
				  nc->ncand == 1 ? "" : "s");
		if (nc->node->ngpus == 0 && nc->node->gpu_note != NULL)
			herd__text_printf(t, " (%s)", nc->node->gpu_note);
		describe_node_unavailable(t, p, nc, "; not available: ");
		herd__text_printf(t, "\n");
	}
}

static void explain_set(herd__text *t, const struct node_ctx *nc, const size_t *set, size_t k)
{
	for (size_t a = 0; a < k; a++)
		herd__text_printf(t, "%sGPU%zu", a ? ", " : "", nc->cand[set[a]].gpu);
}

/* "worst link PIX (one PCIe switch)" for a set. */
static void explain_links(herd__text *t, const struct node_ctx *nc, const size_t *set, size_t k,
			  const struct quality *q)
{
	int minnv = 0;

	if (k < 2)
		return;
	if (q->worst == CLS_NV) {
		for (size_t a = 0; a < k; a++)
			for (size_t b = a + 1; b < k; b++) {
				int n = nc->nvl[set[a] * nc->ncand + set[b]];

				if (minnv == 0 || n < minnv)
					minnv = n;
			}
		herd__text_printf(t, "every pair NVLink (NV%d or more)", minnv);
		return;
	}
	herd__text_printf(t, "worst link %s (%s)", class_codes[q->worst], class_words[q->worst]);
}

static void explain_numa(herd__text *t, const struct node_ctx *nc, const size_t *set, size_t k)
{
	const herd_node *node = nc->node;
	int d = nc->cand[set[0]].numa;
	bool one = true;

	for (size_t a = 1; a < k; a++)
		one &= nc->cand[set[a]].numa == d;
	if (!one) {
		herd__text_printf(t, "NUMA nodes");
		for (int n = 0; n < nc->nnuma; n++) {
			bool used = false;

			for (size_t a = 0; a < k; a++)
				used |= nc->cand[set[a]].numa == n;
			if (used)
				herd__text_printf(t, " %d", nc->numa_os[n]);
		}
		return;
	}
	if (nc->numa_os[d] < 0) {
		herd__text_printf(t, "NUMA node unknown");
		return;
	}
	herd__text_printf(t, "%s NUMA node %d", k > 1 ? "all on" : "on", nc->numa_os[d]);
	if (node->packages > 0 && (size_t)node->packages == node->nnuma)
		herd__text_printf(t, ", that is one socket");
	if (numa_cpus(node, nc->numa_os[d]) != NULL)
		herd__text_printf(t, " (CPUs %s)", numa_cpus(node, nc->numa_os[d]));
}

static void explain_reason(herd__text *t, const struct planner *p, const struct choice *ch)
{
	const struct quality *a = &ch->q, *b = &ch->q2;
	const char *const *cls = class_codes;

	switch (quality_diff(a, b)) {
	case Q_BUSY:
		herd__text_printf(t, "it has fewer GPUs running foreign processes (%ld vs %ld)",
				  a->busy, b->busy);
		break;
	case Q_WORST:
		herd__text_printf(t, "its worst link is %s where the runner-up's is %s",
				  cls[a->worst], cls[b->worst]);
		break;
	case Q_SUM:
		herd__text_printf(t, "more of its pairs are close (class sum %ld vs %ld)", a->sum,
				  b->sum);
		break;
	case Q_NVLINKS:
		herd__text_printf(t, "it has more NVLinks (%ld vs %ld)", -a->nvlinks, -b->nvlinks);
		break;
	case Q_NIC:
		herd__text_printf(t, "its GPUs are nearer a NIC");
		break;
	case Q_NUMA:
		herd__text_printf(t, "it uses %s NUMA nodes (%ld vs %ld)",
				  p->spread ? "more" : "fewer", p->spread ? -a->numa : a->numa,
				  p->spread ? -b->numa : b->numa);
		break;
	case Q_FIT:
		if (p->spread)
			herd__text_printf(t, "it leaves more free GPUs beside it (spread)");
		else
			herd__text_printf(t,
					  "it leaves fewer free GPUs stranded beside it "
					  "(best fit: %ld vs %ld)",
					  a->fit, b->fit);
		break;
	default:
		herd__text_printf(t, "a tie, broken by the lowest GPU indices");
		break;
	}
}

static void explain_choice(herd__text *t, const struct planner *p, const struct pick *pk)
{
	const struct node_ctx *nc = pk->nc;
	const struct choice *ch = &pk->ch;

	herd__text_printf(t, "chose on %s: ", nc->node->hostname);
	explain_set(t, nc, ch->set, ch->k);
	herd__text_printf(t, " - ");
	explain_numa(t, nc, ch->set, ch->k);
	if (ch->k > 1) {
		herd__text_printf(t, "; ");
		explain_links(t, nc, ch->set, ch->k, &ch->q);
	}
	if (p->req->link == HERD_ALLOC_LINK_SAME_NUMA)
		herd__text_printf(t, "; same-numa asked for one NUMA node");
	else if (p->req->link == HERD_ALLOC_LINK_NVLINK)
		herd__text_printf(t, "; nvlink asked for NVLink between every pair");
	herd__text_printf(t, "\n");
	if (ch->has_second) {
		herd__text_printf(t, "  runner-up: ");
		explain_set(t, nc, ch->second, ch->k);
		herd__text_printf(t, " - ");
		explain_numa(t, nc, ch->second, ch->k);
		if (ch->k > 1) {
			herd__text_printf(t, "; ");
			explain_links(t, nc, ch->second, ch->k, &ch->q2);
		}
		herd__text_printf(t, "\n  chosen because ");
		explain_reason(t, p, ch);
		herd__text_printf(t, "\n");
	} else {
		herd__text_printf(t, "  the only set of %zu that %s offers\n", ch->k,
				  nc->node->hostname);
	}
	if (ch->greedy)
		herd__text_printf(t, "  (%zu candidates: searched greedily, %lu sets weighed)\n",
				  nc->ncand, ch->evaluated);
}

static void explain_ranks(herd__text *t, const herd_plan *plan)
{
	char buf[HERD_LINK_STR_LEN];

	for (size_t i = 0; i < plan->nranks; i++) {
		const herd_plan_rank *r = &plan->ranks[i];

		herd__text_printf(t, "rank %d: %s GPU", r->rank, r->hostname);
		for (size_t g = 0; g < r->ngpus; g++)
			herd__text_printf(t, "%s%zu", g ? "," : "", r->gpus[g].index);
		if (r->cpus[0] != '\0')
			herd__text_printf(t, ", CPUs %s", r->cpus);
		else
			herd__text_printf(t, ", CPUs not pinned (NUMA node unknown)");
		if (r->numa_node >= 0)
			herd__text_printf(t, " (NUMA %d)", r->numa_node);
		if (r->nic[0] != '\0')
			herd__text_printf(t, ", NIC %s (%s)", r->nic,
					  herd_link_str(r->nic_link, buf));
		else
			herd__text_printf(t, ", no NIC");
		if (r->ib_hca[0] != '\0')
			herd__text_printf(t, ", IB device %s", r->ib_hca + 1);
		if (r->socket_ifname[0] != '\0')
			herd__text_printf(t, ", socket interface %s", r->socket_ifname + 1);
		herd__text_printf(t, "\n");
	}
}

static herd_status explain(const struct planner *p, herd_plan *plan, const struct pick *picks,
			   size_t npicks)
{
	herd__text t = { 0 };

	explain_request(&t, p);
	explain_candidates(&t, p);
	if (npicks > 1) {
		herd__text_printf(&t, "nodes: ");
		for (size_t i = 0; i < npicks; i++)
			herd__text_printf(&t, "%s%s (%zu)", i ? ", " : "",
					  picks[i].nc->node->hostname, picks[i].ch.k);
		herd__text_printf(&t, " - %s\n",
				  p->spread ? "spread over as many nodes as have room"
					    : "packed into as few nodes as hold them, fullest fit");
	}
	for (size_t i = 0; i < npicks; i++)
		explain_choice(&t, p, &picks[i]);
	explain_ranks(&t, plan);
	for (size_t i = 0; i < plan->nwarnings; i++)
		herd__text_printf(&t, "warning: %s\n", plan->warnings[i]);
	herd__text_printf(&t, "score %.1f\n", plan->score);
	return herd__text_take(&t, &plan->explain);
}

/* ------------------------------------------------------------ entry */

static herd_status normalize(struct planner *p)
{
	const herd_alloc_request *req = p->req;

	p->K = req->gpus_per_node;
	p->N = req->nodes;
	p->R = req->gpus_per_rank > 0 ? req->gpus_per_rank : 1;
	p->G = req->gpus > 0 ? req->gpus : p->K * p->N;
	p->spread = req->policy == HERD_ALLOC_SPREAD;
	if (p->G > HERD_ALLOC_MAX_GPUS)
		return herd__error(HERD_EINVAL,
				   "request: gpus_per_node %ld x nodes %ld is %ld GPUs; "
				   "at most %d",
				   p->K, p->N, p->G, HERD_ALLOC_MAX_GPUS);
	if (p->K > 0 && p->N > 0 && p->K * p->N != p->G)
		return herd__error(HERD_EINVAL,
				   "request: gpus (%ld) is not gpus_per_node (%ld) x "
				   "nodes (%ld)",
				   p->G, p->K, p->N);
	if (p->K > 0 && p->G % p->K != 0)
		return herd__error(HERD_EINVAL,
				   "request: gpus (%ld) is not a multiple of "
				   "gpus_per_node (%ld)",
				   p->G, p->K);
	if (p->K == 0 && p->N > 0 && p->G % p->N != 0)
		return herd__error(HERD_EINVAL,
				   "request: %ld GPUs do not split evenly over %ld "
				   "nodes; give gpus_per_node",
				   p->G, p->N);
	if (p->K == 0 && p->N > 0)
		p->K = p->G / p->N;
	if (p->K > 0 && p->N == 0)
		p->N = p->G / p->K;
	if (p->G % p->R != 0 || (p->K > 0 && p->K % p->R != 0))
		return herd__error(HERD_EINVAL,
				   "request: gpus_per_rank (%ld) must divide the GPUs "
				   "of each node (%ld)",
				   p->R, p->K > 0 ? p->K : p->G);
	if (req->link == HERD_ALLOC_LINK_SAME_NODE && p->N > 1)
		return herd__error(HERD_EINVAL,
				   "request: link 'same-node' asks for one node, but "
				   "%ld GPUs at %ld per node take %ld nodes",
				   p->G, p->K, p->N);
	p->single = p->N == 1 || (p->K == 0 && req->link != HERD_ALLOC_LINK_ANY);
	if (p->single && p->K == 0) {
		p->K = p->G;
		p->N = 1;
	}
	if (p->K > HERD_ALLOC_MAX_GPUS_PER_NODE)
		return herd__error(HERD_EINVAL, "request: %ld GPUs on one node; at most %d", p->K,
				   HERD_ALLOC_MAX_GPUS_PER_NODE);
	return HERD_OK;
}

/* Single node with K == 0 and link ANY: one node if one holds them all. */
static herd_status try_one_node(const struct planner *p, struct pick *pk, bool *found)
{
	*found = false;
	for (size_t i = 0; i < p->nnodes; i++)
		if (capacity(p, &p->nodes[i]) >= (size_t)p->G) {
			herd_status st = choose_fixed(p, 1, (size_t)p->G, pk);

			if (st == HERD_OK)
				*found = true;
			return st;
		}
	return HERD_OK;
}

static herd_status plan_nodes(const struct planner *p, struct pick *picks, size_t *npicks)
{
	bool found = false;

	*npicks = 0;
	if (p->K > 0) {
		if ((size_t)p->N > p->nnodes)
			return no_resource(p, p->N, p->K);
		HERD_CHECK(choose_fixed(p, (size_t)p->N, (size_t)p->K, picks));
		*npicks = (size_t)p->N;
		return HERD_OK;
	}
	/* Any link, any number of nodes: one node when packing and one holds it. */
	if (!p->spread || p->nnodes == 1) {
		HERD_CHECK(try_one_node(p, picks, &found));
		if (found) {
			*npicks = 1;
			return HERD_OK;
		}
	}
	HERD_CHECK(choose_counts(p, picks, npicks));
	for (size_t i = 0; i < *npicks; i++) {
		size_t k = picks[i].ch.k;

		HERD_CHECK(search_node(p, picks[i].nc, k, &picks[i].ch));
		if (!picks[i].ch.ok)
			return herd__error(HERD_EINTERNAL,
					   "no set of %zu GPUs on node %s, which has %zu "
					   "candidates",
					   k, picks[i].nc->node->hostname, picks[i].nc->ncand);
	}
	return HERD_OK;
}

herd_status herd_alloc_plan(herd_plan **out, const herd_cluster *cluster,
			    const herd_alloc_request *request, const herd_gpu_status *status,
			    size_t nstatus)
{
	struct planner p = { 0 };
	struct pick *picks = NULL;
	size_t npicks = 0;
	herd_plan *plan = NULL;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_alloc_plan: out is NULL");
	*out = NULL;
	if (cluster == NULL)
		return herd__error(HERD_EINVAL, "herd_alloc_plan: cluster is NULL");
	if (nstatus > 0 && status == NULL)
		return herd__error(HERD_EINVAL,
				   "herd_alloc_plan: nstatus is %zu but status is NULL", nstatus);
	HERD_CHECK(herd__alloc_request_check(request));
	p.cluster = cluster;
	p.req = request;
	HERD_CHECK(normalize(&p));
	HERD_CHECK(check_listed_names(cluster, "exclude", request->exclude, request->nexclude));
	HERD_CHECK(check_listed_names(cluster, "include", request->include, request->ninclude));
	p.nnodes = herd_cluster_node_count(cluster);
	if (p.nnodes == 0)
		return herd__error(HERD_ENORESOURCE, "need %ld GPUs; the inventory has no nodes",
				   p.G);
	HERD_CHECK_GOTO(herd__calloc(&p.sorted, nstatus, sizeof(*p.sorted), "GPU states"), st, out);
	for (size_t i = 0; i < nstatus; i++)
		p.sorted[i] = &status[i];
	p.nsorted = nstatus;
	if (nstatus > 0)
		qsort(p.sorted, nstatus, sizeof(*p.sorted), status_cmp);
	HERD_CHECK_GOTO(herd__calloc(&p.nodes, p.nnodes, sizeof(*p.nodes), "nodes"), st, out);
	for (size_t i = 0; i < p.nnodes; i++)
		HERD_CHECK_GOTO(node_prepare(&p, &p.nodes[i], i), st, out);
	HERD_CHECK_GOTO(herd__calloc(&picks, p.nnodes, sizeof(*picks), "node choices"), st, out);
	HERD_CHECK_GOTO(plan_nodes(&p, picks, &npicks), st, out);
	HERD_CHECK_GOTO(herd__plan_new(&plan), st, out);
	HERD_CHECK_GOTO(build(&p, plan, picks, npicks), st, out);
	HERD_CHECK_GOTO(explain(&p, plan, picks, npicks), st, out);
	*out = plan;
	plan = NULL;
out:
	herd_plan_free(plan);
	for (size_t i = 0; picks != NULL && i < p.nnodes; i++)
		choice_clear(&picks[i].ch);
	free(picks);
	for (size_t i = 0; p.nodes != NULL && i < p.nnodes; i++)
		node_clear(&p.nodes[i]);
	free(p.nodes);
	free(p.sorted);
	return st;
}
