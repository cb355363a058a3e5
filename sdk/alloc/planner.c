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

#include "alloc/planner.h"

/* ------------------------------------------------------- node choice */

/* Capacity of a node in whole ranks' worth of GPUs. */
static size_t capacity(const struct planner *p, const struct node_ctx *nc)
{
	return nc->ncand / (size_t)p->R * (size_t)p->R;
}

/* Orders evaluated nodes: set quality, then fit, then inventory order. */
static int pick_cmp_with(const struct planner *p, const struct pick *a, const struct pick *b)
{
	int c = herd__planner_quality_cmp(&a->ch.q, &b->ch.q);
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
		HERD_CHECK_GOTO(herd__planner_search_node(p, &p->nodes[i], count, &cand.ch), st, out);
		if (!cand.ch.ok) {
			herd__planner_choice_clear(&cand.ch);
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
		st = herd__planner_no_resource(p, (long)nodes, (long)count);
		goto out;
	}
	for (size_t i = 0; i < nodes; i++) {
		picks[i] = all[i];
		memset(&all[i], 0, sizeof(all[i]));
	}
out:
	for (size_t i = 0; i < nok; i++)
		herd__planner_choice_clear(&all[i].ch);
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
		st = herd__planner_no_resource_total(p, total);
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
			return herd__planner_no_resource(p, p->N, p->K);
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

		HERD_CHECK(herd__planner_search_node(p, picks[i].nc, k, &picks[i].ch));
		if (!picks[i].ch.ok)
			return herd__error(HERD_EINTERNAL,
					   "no set of %zu GPUs on node %s, which has %zu "
					   "candidates",
					   k, picks[i].nc->node->hostname, picks[i].nc->ncand);
	}
	return HERD_OK;
}

herd_status herd_alloc_plan(herd_plan **out, const herd_cluster *cluster,
			    const herd_alloc_request *request, const herd_alloc_gpu_status *status,
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
	HERD_CHECK(herd__planner_check_listed_names(cluster, "exclude", request->exclude,
						    request->nexclude));
	HERD_CHECK(herd__planner_check_listed_names(cluster, "include", request->include,
						    request->ninclude));
	p.nnodes = herd_cluster_node_count(cluster);
	if (p.nnodes == 0)
		return herd__error(HERD_ENORESOURCE, "need %ld GPUs; the inventory has no nodes",
				   p.G);
	HERD_CHECK_GOTO(herd__calloc(&p.sorted, nstatus, sizeof(*p.sorted), "GPU states"), st, out);
	for (size_t i = 0; i < nstatus; i++)
		p.sorted[i] = &status[i];
	p.nsorted = nstatus;
	if (nstatus > 0)
		qsort(p.sorted, nstatus, sizeof(*p.sorted), herd__planner_status_cmp);
	HERD_CHECK_GOTO(herd__calloc(&p.nodes, p.nnodes, sizeof(*p.nodes), "nodes"), st, out);
	for (size_t i = 0; i < p.nnodes; i++)
		HERD_CHECK_GOTO(herd__planner_node_prepare(&p, &p.nodes[i], i), st, out);
	HERD_CHECK_GOTO(herd__calloc(&picks, p.nnodes, sizeof(*picks), "node choices"), st, out);
	HERD_CHECK_GOTO(plan_nodes(&p, picks, &npicks), st, out);
	HERD_CHECK_GOTO(herd__plan_new(&plan), st, out);
	HERD_CHECK_GOTO(herd__planner_build(&p, plan, picks, npicks), st, out);
	HERD_CHECK_GOTO(herd__planner_explain(&p, plan, picks, npicks), st, out);
	*out = plan;
	plan = NULL;
out:
	herd_plan_free(plan);
	for (size_t i = 0; picks != NULL && i < p.nnodes; i++)
		herd__planner_choice_clear(&picks[i].ch);
	free(picks);
	for (size_t i = 0; p.nodes != NULL && i < p.nnodes; i++)
		herd__planner_node_clear(&p.nodes[i]);
	free(p.nodes);
	free(p.sorted);
	return st;
}

