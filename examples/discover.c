/*
 * examples/discover.c - print the GPUs of this node (or of an inventory
 * file) and how each pair is connected.
 *
 *   build/bin/example_discover [INVENTORY.json]
 */
#include <stdio.h>

#include <herd.h>

int main(int argc, char **argv)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *cluster;
	char code[HERD_NODE_LINK_CODE_LEN];

	if (argc > 1)
		opts.inventory = argv[1];
	if (herd_cluster_discover(&cluster, &opts) != HERD_OK) {
		fprintf(stderr, "example_discover: %s\n", herd_last_error());
		return 1;
	}
	for (size_t n = 0; n < herd_cluster_node_count(cluster); n++) {
		const herd_node *node;

		if (herd_cluster_node(cluster, n, &node) != HERD_OK)
			break;
		printf("%s: %d threads, %zu GPUs\n", node->hostname, node->threads, node->ngpus);
		if (node->ngpus == 0 && node->gpu_note != NULL)
			printf("  %s\n", node->gpu_note);
		for (size_t i = 0; i < node->ngpus; i++) {
			printf("  GPU%zu %s %s:", i, node->gpus[i].pci.bus_id, node->gpus[i].name);
			for (size_t j = 0; j < node->ngpus; j++) {
				herd_link link;

				if (herd_node_gpu_link(node, i, j, &link) == HERD_OK)
					printf(" %s", herd_node_link_code(link, code));
			}
			printf("\n");
		}
	}
	herd_cluster_free(cluster);
	return 0;
}
