/* A program outside herd's tree: it sees only the installed headers and library. */
#include <stdio.h>

#include <herd.h>

int main(int argc, char **argv)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *cluster = NULL;
	const herd_node *node;
	char link[HERD_NODE_LINK_CODE_LEN];
	herd_link l;

	if (argc != 2) {
		fprintf(stderr, "usage: consumer INVENTORY\n");
		return 2;
	}
	opts.inventory = argv[1];
	if (herd_cluster_discover(&cluster, &opts) != HERD_OK) {
		fprintf(stderr, "consumer: %s\n", herd_last_error());
		return 1;
	}
	if (herd_cluster_node(cluster, 0, &node) != HERD_OK ||
	    herd_node_gpu_link(node, 0, 1, &l) != HERD_OK) {
		fprintf(stderr, "consumer: %s\n", herd_last_error());
		herd_cluster_free(cluster);
		return 1;
	}
	printf("herd %s: %s has %zu GPUs, GPU0-GPU1 %s\n", herd_version(), node->hostname,
	       node->ngpus, herd_node_link_code(l, link));
	herd_cluster_free(cluster);
	return 0;
}
