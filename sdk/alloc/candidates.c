/*
 * sdk/alloc/candidates.c - the planner's first step: each node's candidate GPUs (and the
 * reason for every other one), the classes of the links between them, and
 * the order of quality that sets of them are compared in.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc/planner.h"

const int herd__planner_class_points[] = { 100, 60, 50, 40, 30, 10 };

const char *const herd__planner_class_codes[] = { "NV", "PIX", "PXB", "PHB", "NODE", "SYS" };

const char *const herd__planner_class_words[] = {
	[CLS_NV] = "NVLink",
	[CLS_PIX] = "one PCIe switch",
	[CLS_PXB] = "several PCIe switches, no host bridge",
	[CLS_PHB] = "one PCIe host bridge",
	[CLS_NODE] = "host bridges of one NUMA node",
	[CLS_SYS] = "the link between sockets",
};

int herd__planner_link_class(herd_link l)
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

/* The first field in which a and b differ (Q_SAME when none). */
int herd__planner_quality_diff(const struct quality *a, const struct quality *b)
{
	const long fa[] = { a->busy, a->worst, a->sum, a->nvlinks, a->nic, a->numa, a->fit };
	const long fb[] = { b->busy, b->worst, b->sum, b->nvlinks, b->nic, b->numa, b->fit };

	for (int i = 0; i < Q_SAME; i++)
		if (fa[i] != fb[i])
			return i;
	return Q_SAME;
}

int herd__planner_quality_cmp(const struct quality *a, const struct quality *b)
{
	const long fa[] = { a->busy, a->worst, a->sum, a->nvlinks, a->nic, a->numa, a->fit };
	const long fb[] = { b->busy, b->worst, b->sum, b->nvlinks, b->nic, b->numa, b->fit };
	int i = herd__planner_quality_diff(a, b);

	if (i == Q_SAME)
		return 0;
	return fa[i] < fb[i] ? -1 : 1;
}

/* ---------------------------------------------------------- matching */

int herd__planner_status_cmp(const void *a, const void *b)
{
	const herd_alloc_gpu_status *x = *(const herd_alloc_gpu_status *const *)a;
	const herd_alloc_gpu_status *y = *(const herd_alloc_gpu_status *const *)b;

	return strcasecmp(x->uuid, y->uuid);
}

static const herd_alloc_gpu_status *find_status(const struct planner *p, const char *uuid)
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
		const herd_node *node = herd__cluster_node(cluster, i);

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

herd_status herd__planner_check_listed_names(const herd_cluster *cluster, const char *field,
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
uint64_t herd__planner_gpu_free_memory(const herd_gpu *g, const herd_alloc_gpu_status *s)
{
	if (s != NULL && s->free_memory_bytes >= 0)
		return (uint64_t)s->free_memory_bytes;
	return g->memory_bytes;
}

static enum why_not why_not(const struct planner *p, const herd_node *node, const herd_gpu *g,
			    const herd_alloc_gpu_status *s)
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
	if (herd__planner_gpu_free_memory(g, s) < req->min_free_memory_bytes)
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

		if (herd_node_gpu_nic_link(node, gpu, j, &l) == HERD_OK &&
		    herd__planner_link_class(l) < best)
			best = herd__planner_link_class(l);
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

herd_status herd__planner_node_prepare(const struct planner *p, struct node_ctx *nc, size_t index)
{
	const herd_node *node = herd__cluster_node(p->cluster, index);
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
		const herd_alloc_gpu_status *s = find_status(p, gpu->uuid);
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
			nc->cls[a * m + b] = (unsigned char)herd__planner_link_class(l);
			nc->nvl[a * m + b] =
				(unsigned char)(l.kind == HERD_LINK_NVLINK
							? (l.nvlinks > 255 ? 255 : l.nvlinks)
							: 0);
		}
	}
	return HERD_OK;
}

void herd__planner_node_clear(struct node_ctx *nc)
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
bool herd__planner_pair_ok(const struct planner *p, const struct node_ctx *nc, size_t a, size_t b)
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

