/*
 * sdk/topo/inventory.c - the memory of an inventory: a cluster owns its
 * nodes, a node owns every string and array it points to.
 */
#include <stdlib.h>
#include <string.h>

#include "inventory.h"
#include "schema.h"

herd_status herd__cluster_new(herd_cluster **out, size_t nnodes)
{
	herd_cluster *cluster = NULL;
	herd_status st;

	*out = NULL;
	HERD_CHECK(herd__calloc(&cluster, 1, sizeof(*cluster), "an inventory"));
	st = herd__calloc(&cluster->nodes, nnodes, sizeof(*cluster->nodes), "inventory nodes");
	if (st != HERD_OK) {
		free(cluster);
		return st;
	}
	cluster->nnodes = nnodes;
	*out = cluster;
	return HERD_OK;
}

/* What a node owns is what its table describes. */
void herd__node_clear(herd_node *node)
{
	herd__schema_free(&herd__node_schema, node);
	memset(node, 0, sizeof(*node));
}

void herd_cluster_free(herd_cluster *cluster)
{
	if (cluster == NULL)
		return;
	herd__schema_free(&herd__inventory_schema, cluster);
	free(cluster);
}

size_t herd_cluster_failure_count(const herd_cluster *cluster)
{
	return cluster == NULL ? 0 : cluster->nfailed;
}

herd_status herd_cluster_failure(const herd_cluster *cluster, size_t i, const char **host,
				 const char **reason)
{
	if (host != NULL)
		*host = NULL;
	if (reason != NULL)
		*reason = NULL;
	if (cluster == NULL || host == NULL || reason == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_failure: cluster, host and reason "
				   "must not be NULL");
	if (i >= cluster->nfailed)
		return herd__error(HERD_EINVAL, "herd_cluster_failure: failure %zu of %zu", i,
				   cluster->nfailed);
	*host = cluster->failed[i].host;
	*reason = cluster->failed[i].reason;
	return HERD_OK;
}

size_t herd_cluster_node_count(const herd_cluster *cluster)
{
	return cluster == NULL ? 0 : cluster->nnodes;
}

herd_status herd_cluster_node(const herd_cluster *cluster, size_t i, const herd_node **node)
{
	if (node != NULL)
		*node = NULL;
	if (cluster == NULL || node == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_node: cluster and node must not be "
				   "NULL");
	if (i >= cluster->nnodes)
		return herd__error(HERD_EINVAL,
				   "herd_cluster_node: node %zu is out of range: the cluster "
				   "has %zu node%s",
				   i, cluster->nnodes, cluster->nnodes == 1 ? "" : "s");
	*node = &cluster->nodes[i];
	return HERD_OK;
}
