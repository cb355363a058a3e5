/*
 * sdk/alloc/describe.c - the planner's messages when a request cannot be
 * met: what each node lacks, and why its GPUs are not candidates.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc/planner.h"

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

double herd__planner_gib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* "GPU3 held by job 42 (pid 77, user ann)" and the like. */
static void describe_unavailable(herd__text *t, const struct planner *p, const struct node_ctx *nc,
				 size_t g)
{
	const herd_alloc_gpu_status *s = nc->status[g];
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
				  herd__planner_gib(herd__planner_gpu_free_memory(gpu, s)),
				  herd__planner_gib(p->req->min_free_memory_bytes));
		break;
	default:
		break;
	}
}

/* "; not available: GPU0 held by ..., GPU2 excluded" for one node. */
void herd__planner_describe_node_unavailable(herd__text *t, const struct planner *p,
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
			size_t f = herd__planner_largest_feasible(p, nc);

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
		herd__planner_describe_node_unavailable(t, p, &p->nodes[0], "; not available: ");
	free(order);
	return HERD_OK;
}

/* HERD_ENORESOURCE with the text t and each node's reasons after sep. */
static herd_status no_resource(herd__text *t, const struct planner *p, long per_node,
			       const char *sep)
{
	char *msg = NULL;
	herd_status st = describe_nodes(t, p, per_node, sep);

	if (st != HERD_OK) {
		herd__text_free(t);
		return st;
	}
	HERD_CHECK(herd__text_take(t, &msg));
	st = herd__error(HERD_ENORESOURCE, "%s", msg);
	free(msg);
	return st;
}

herd_status herd__planner_no_resource(const struct planner *p, long nodes, long per_node)
{
	herd__text t = { 0 };

	describe_need(&t, p, nodes, per_node);
	return no_resource(&t, p, per_node, "; ");
}

herd_status herd__planner_no_resource_total(const struct planner *p, size_t total)
{
	herd__text t = { 0 };

	herd__text_printf(&t, "need %ld GPU%s; the inventory has %zu free", p->G,
			  p->G == 1 ? "" : "s", total);
	if (p->R > 1)
		herd__text_printf(&t, " (in whole groups of %ld per rank)", p->R);
	return no_resource(&t, p, 0, ": ");
}

