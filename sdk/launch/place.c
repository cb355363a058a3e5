/*
 * sdk/launch/place.c - the node list of a job and the placement of its
 * ranks on it (see launch_internal.h).
 */
#include <stdlib.h>
#include <string.h>

#include "launch_internal.h"

void herd__launch_nodes_free(herd__launch_node *nodes, size_t n)
{
	if (nodes == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(nodes[i].host);
		free(nodes[i].ranks);
	}
	free(nodes);
}

herd_status herd__launch_place(herd__launch_node *nodes, size_t *nnodes, int nranks,
			       int per_node)
{
	size_t n = *nnodes, used = 0;
	long total = 0;
	int next = 0, even;

	if (nranks < 1)
		return herd__error(HERD_EINVAL, "placement: %d ranks; expected at least 1", nranks);
	if (per_node < 0)
		return herd__error(HERD_EINVAL, "placement: %d ranks per node; expected 0 (fill "
				   "each node's slots) or more", per_node);
	if (n == 0)
		return herd__error(HERD_ENORESOURCE, "placement: no nodes to run %d ranks on",
				   nranks);
	even = (int)((nranks + (long)n - 1) / (long)n);
	/* Capacity first, so that a refusal comes before any allocation. */
	for (size_t i = 0; i < n; i++) {
		int cap = per_node > 0 ? per_node : nodes[i].slots > 0 ? nodes[i].slots : even;

		if (per_node > 0 && nodes[i].slots > 0 && nodes[i].slots < per_node &&
		    total < nranks)
			return herd__error(HERD_ENORESOURCE, "placement: %d ranks per node, but "
					   "node %s has %d slots", per_node, nodes[i].host,
					   nodes[i].slots);
		total += cap;
	}
	if (total < nranks) {
		if (per_node > 0)
			return herd__error(HERD_ENORESOURCE, "placement: %d ranks at %d per node "
					   "need %d nodes; there are %zu", nranks, per_node,
					   (nranks + per_node - 1) / per_node, n);
		return herd__error(HERD_ENORESOURCE, "placement: %d ranks, but the %zu node%s "
				   "ha%s %ld slots in all", nranks, n, n == 1 ? "" : "s",
				   n == 1 ? "s" : "ve", total);
	}
	for (size_t i = 0; i < n; i++) {
		herd__launch_node *nd = &nodes[i];
		int cap = per_node > 0 ? per_node : nd->slots > 0 ? nd->slots : even;
		int take = nranks - next < cap ? nranks - next : cap;

		free(nd->ranks);
		nd->ranks = NULL;
		nd->nranks = 0;
		if (take <= 0)
			continue;
		HERD_CHECK(herd__calloc(&nd->ranks, (size_t)take, sizeof(int), "a node's ranks"));
		for (int r = 0; r < take; r++)
			nd->ranks[r] = next++;
		nd->nranks = take;
	}
	/* Drop the nodes left empty; node ranks count those used. */
	for (size_t i = 0; i < n; i++) {
		if (nodes[i].nranks == 0) {
			free(nodes[i].host);
			free(nodes[i].ranks);
			continue;
		}
		nodes[used] = nodes[i];
		nodes[used].node_rank = (int)used;
		used++;
	}
	*nnodes = used;
	return HERD_OK;
}
