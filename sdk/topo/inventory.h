/*
 * sdk/topo/inventory.h - the inventory model inside libherd.
 *
 * A herd_cluster owns an array of herd_node.  Every pointer inside a node
 * (strings, arrays, the strings inside arrays) is a separate heap block
 * owned by that node, freed by herd__node_clear; the public header shows
 * them as const because callers only borrow them.  Code that builds a node
 * (the probes, the decoder) allocates with malloc/calloc and stores through
 * the HERD_MUT() cast.
 */
#ifndef HERD_TOPO_INVENTORY_H
#define HERD_TOPO_INVENTORY_H

#include "herd/cluster.h"
#include "base.h"

/* Casts a borrowed const pointer field of a node back to the owner's view. */
#define HERD_MUT(type, field) (*(type *)(void *)&(field))

/* A node a discovery could not inventory, and why. */
typedef struct herd__cluster_failed {
	char *host, *reason;
} herd__cluster_failed;

struct herd_cluster {
	size_t nnodes;
	herd_node *nodes;
	size_t nfailed;
	herd__cluster_failed *failed;
};

/* Node i < cluster->nnodes: herd_cluster_node without its checks, for
 * libherd's own loops over the nodes. */
static inline const herd_node *herd__cluster_node(const herd_cluster *cluster, size_t i)
{
	return &cluster->nodes[i];
}

/* A cluster of nnodes zeroed nodes. */
herd_status herd__cluster_new(herd_cluster **out, size_t nnodes);

/* Frees everything a node owns and zeroes it. */
void herd__node_clear(herd_node *node);

/* Probes this machine into a cluster of one node (herd_cluster_discover's
 * work when it has no file to load and no other nodes to ask). */
herd_status herd__cluster_probe(herd_cluster **out);

/* Probes this machine into *node (zeroed by the caller). */
herd_status herd__node_probe(herd_node *node);

/*
 * Upper bounds enforced by the decoder, so that a hostile inventory cannot
 * make libherd allocate without limit.
 */
#define HERD_INVENTORY_MAX_BYTES (64u << 20)
#define HERD_INVENTORY_MAX_NODES 65536
#define HERD_INVENTORY_MAX_ITEMS 4096  /* GPUs, NICs, NUMA nodes, ports... per node */
#define HERD_INVENTORY_MAX_STRING 4096

/*
 * The most one node's answer to a discovery (`herd probe --text`) may be:
 * its inventory's text is a few KiB (7.6 KiB for a DGX H100 with its 8
 * GPUs, 8 RDMA NICs, 2 NUMA nodes and topology matrix), so 1 MiB leaves
 * room for machines many times larger, while a node that prints without
 * end is stopped there instead of filling the launcher's memory.
 */
#define HERD__INVENTORY_NODE_TEXT_MAX ((size_t)1 << 20)

/*
 * The inventory format's field tables (fields.c), with which encode.c
 * writes and decode.c reads an inventory: the root (a herd_cluster; its
 * "v" is written, and checked by the decoder before the rest) and one
 * node.  herd__schema_free of a node frees what it owns.
 */
typedef struct herd__schema herd__schema;
extern const herd__schema herd__inventory_schema;
extern const herd__schema herd__node_schema;

/* The text form (HERD_CLUSTER_FORMAT_TEXT): its first line's start, and the bytes
 * of msgpack in each base64 line (76 characters). */
#define HERD__INVENTORY_TEXT_MAGIC "herd-probe 1 "
#define HERD__INVENTORY_TEXT_LINE 57

#endif /* HERD_TOPO_INVENTORY_H */
