/*
 * sdk/alloc/bind.c - the plan itself: ranks on the chosen sets, each bound
 * to its nearest NICs and the CPUs of its GPUs' NUMA nodes, with warnings.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc/planner.h"

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
			return herd__planner_link_class(l);
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
static herd_status bind_nics(herd_plan *plan, herd_plan_rank_info *r, const herd_node *node,
			     size_t gpu, size_t *uses)
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
		cls = herd__planner_link_class(l);
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

const char *herd__planner_numa_cpus(const herd_node *node, int os_index)
{
	for (size_t i = 0; i < node->nnuma; i++)
		if (node->numa[i].os_index == os_index && node->numa[i].cpus != NULL)
			return node->numa[i].cpus;
	return NULL;
}

/* The rank's NUMA node and CPUs: one NUMA node's, the union of several. */
static herd_status bind_cpus(herd_plan *plan, herd_plan_rank_info *r, const herd_node *node)
{
	herd__text t = { 0 };
	char *cpus = NULL;
	herd_status st;

	r->numa_node = r->gpus[0].numa_node;
	for (size_t g = 0; g < r->ngpus; g++) {
		int numa = r->gpus[g].numa_node;
		const char *list = numa >= 0 ? herd__planner_numa_cpus(node, numa) : NULL;
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
	const herd_alloc_gpu_status *s = nc->status[g];
	char pids[160] = "";
	size_t len = 0;
	int shown = s->processes < HERD_ALLOC_GPU_STATUS_MAX_PIDS ? s->processes
								 : HERD_ALLOC_GPU_STATUS_MAX_PIDS;

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
herd_status herd__planner_build(const struct planner *p, herd_plan *plan, struct pick *picks,
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
			herd_plan_gpu_info *pg = &plan->gpus[gi + a];

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
					int c = herd__planner_link_class(blk->links[a * k + b]);

					points += herd__planner_class_points[c];
					pairs++;
				}
			}
			if (nc->status[pg->index] != NULL && nc->cand[picks[i].ch.set[a]].busy)
				HERD_CHECK(warn_busy(plan, nc, pg->index));
		}
		HERD_CHECK(herd__calloc(&uses, herd_node_nic_count(node) + 1, sizeof(size_t),
					"a plan"));
		for (size_t a = 0; a < k; a += (size_t)p->R, ri++) {
			herd_plan_rank_info *r = &plan->ranks[ri];

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

