/*
 * sdk/alloc/explain.c - the plan's explanation: the request as understood,
 * the candidates, and why each node and set was chosen over the others.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc/planner.h"

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
	herd__text_printf(t, ", link %s, %s, %s", herd_alloc_link_name(req->link),
			  req->shared ? "shared" : "exclusive",
			  herd__alloc_policy_str(req->policy));
	if (req->near_nic)
		herd__text_printf(t, ", near a NIC");
	if (req->min_free_memory_bytes > 0)
		herd__text_printf(t, ", at least %.1f GiB free per GPU",
				  herd__planner_gib(req->min_free_memory_bytes));
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
		herd__planner_describe_node_unavailable(t, p, nc, "; not available: ");
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
	herd__text_printf(t, "worst link %s (%s)", herd__planner_class_codes[q->worst],
			  herd__planner_class_words[q->worst]);
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
	if (herd__planner_numa_cpus(node, nc->numa_os[d]) != NULL)
		herd__text_printf(t, " (CPUs %s)", herd__planner_numa_cpus(node, nc->numa_os[d]));
}

static void explain_reason(herd__text *t, const struct planner *p, const struct choice *ch)
{
	const struct quality *a = &ch->q, *b = &ch->q2;
	const char *const *cls = herd__planner_class_codes;

	switch (herd__planner_quality_diff(a, b)) {
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
	char buf[HERD_NODE_LINK_CODE_LEN];

	for (size_t i = 0; i < plan->nranks; i++) {
		const herd_plan_rank_info *r = &plan->ranks[i];

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
					  herd_node_link_code(r->nic_link, buf));
		else
			herd__text_printf(t, ", no NIC");
		if (r->ib_hca[0] != '\0')
			herd__text_printf(t, ", IB device %s", r->ib_hca + 1);
		if (r->socket_ifname[0] != '\0')
			herd__text_printf(t, ", socket interface %s", r->socket_ifname + 1);
		herd__text_printf(t, "\n");
	}
}

herd_status herd__planner_explain(const struct planner *p, herd_plan *plan,
				  const struct pick *picks, size_t npicks)
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

