/*
 * sdk/topo/check.c - herd_cluster_check: what differs between the nodes
 * of an inventory in a way that breaks or slows training.
 *
 * Each check gives every node a value (a string: "8x NVIDIA H100 80GB
 * HBM3", "580.95.05"; NULL where the check does not apply).  When the
 * nodes do not all agree, the most common value is the norm and each other
 * value one warning naming its nodes as a hostlist.  ECC and PCIe width
 * are judged per GPU.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"
#include "inventory.h"

#define VALUE_MAX 512

typedef void (*value_fn)(const herd_node *node, char *out, size_t cap);

typedef struct checker {
	const herd_cluster *c;
	herd_cluster_warning_fn fn;
	void *userdata;
	long count;
	bool failed;
	char (*values)[VALUE_MAX];
	const char **names;
} checker;

/* Reports the nodes whose flag is set, as a hostlist, with msg. */
static void warn(checker *k, const bool *which, const char *msg)
{
	size_t n = 0;
	char *list = NULL;

	for (size_t i = 0; i < k->c->nnodes; i++)
		if (which[i])
			k->names[n++] = k->c->nodes[i].hostname != NULL ? k->c->nodes[i].hostname
									 : "?";
	if (n == 0)
		return;
	if (herd__hostlist_compress(&list, k->names, n) != HERD_OK) {
		k->failed = true;
		return;
	}
	k->count++;
	if (k->fn != NULL)
		k->fn(k->userdata, list, msg);
	free(list);
}

/* One check by value: every value other than the most common is a warning. */
static void by_value(checker *k, const char *what, value_fn value)
{
	size_t n = k->c->nnodes, best = SIZE_MAX, best_count = 0, others;
	bool *which = NULL;

	for (size_t i = 0; i < n; i++)
		value(&k->c->nodes[i], k->values[i], VALUE_MAX);
	for (size_t i = 0; i < n; i++) {
		size_t same = 0;

		if (k->values[i][0] == '\0')
			continue;
		for (size_t j = 0; j < n; j++)
			same += strcmp(k->values[i], k->values[j]) == 0;
		if (same > best_count) {
			best = i;
			best_count = same;
		}
	}
	if (best == SIZE_MAX || herd__calloc(&which, n, sizeof(*which), "a check") != HERD_OK) {
		k->failed |= best != SIZE_MAX;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char msg[3 * VALUE_MAX];
		size_t count = 0;
		bool seen = false;

		if (k->values[i][0] == '\0' || strcmp(k->values[i], k->values[best]) == 0)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(k->values[i], k->values[j]) == 0;
		if (seen)
			continue;
		for (size_t j = 0; j < n; j++) {
			which[j] = strcmp(k->values[i], k->values[j]) == 0;
			count += which[j];
		}
		others = best_count;
		snprintf(msg, sizeof(msg), "%s differs: %s on %zu %s, %s on %zu other%s", what,
			 k->values[i], count, count == 1 ? "node" : "nodes", k->values[best],
			 others, others == 1 ? "" : "s");
		warn(k, which, msg);
	}
	free(which);
}

/* ---- the values --------------------------------------------------------- */

static void gpu_model(const herd_node *node, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < node->ngpus && len < cap; i++) {
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(node->gpus[i].name, node->gpus[j].name) == 0;
		if (!seen)
			len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " + " : "",
						node->gpus[i].name);
	}
}

static void gpu_count(const herd_node *node, char *out, size_t cap)
{
	snprintf(out, cap, "%zu %s", node->ngpus, node->ngpus == 1 ? "GPU" : "GPUs");
}

static void gpu_driver(const herd_node *node, char *out, size_t cap)
{
	snprintf(out, cap, "%s", node->ngpus > 0 && node->gpu_driver != NULL
					 ? node->gpu_driver : "");
	if (out[0] != '\0') {
		char tmp[VALUE_MAX];

		snprintf(tmp, sizeof(tmp), "driver %s", out);
		snprintf(out, cap, "%s", tmp);
	}
}

static void cuda_driver(const herd_node *node, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s", node->cuda_driver != NULL ? "CUDA " : "",
		 node->cuda_driver != NULL ? node->cuda_driver : "");
}

static void nccl(const herd_node *node, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s", node->nccl != NULL ? "NCCL " : "",
		 node->nccl != NULL ? node->nccl : "");
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* n values, sorted, as "400 Gb/s x8, 100 Gb/s" (largest first), unit after each. */
static void counted(int64_t *v, size_t n, const char *unit, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	qsort(v, n, sizeof(*v), cmp_i64);
	for (size_t i = n; i > 0 && len < cap;) {
		size_t j = i;

		while (j > 0 && v[j - 1] == v[i - 1])
			j--;
		len += (size_t)snprintf(out + len, cap - len, "%s%" PRId64 "%s", len ? ", " : "",
					v[i - 1], unit);
		if (i - j > 1 && len < cap)
			len += (size_t)snprintf(out + len, cap - len, " x%zu", i - j);
		i = j;
	}
}

/* What a node's fabric runs at: its active RDMA ports, else its PCI
 * interfaces that are up (and say their speed). */
static void nic_speeds(const herd_node *node, char *out, size_t cap)
{
	int64_t v[64];
	size_t n = 0;

	for (size_t i = 0; i < node->nrdma; i++)
		for (size_t p = 0; p < node->rdma[i].nports && n < 64; p++)
			if (strcmp(node->rdma[i].ports[p].state, "active") == 0)
				v[n++] = node->rdma[i].ports[p].rate_gbps;
	if (n > 0) {
		counted(v, n, " Gb/s", out, cap);
		return;
	}
	for (size_t i = 0; i < node->nnetdevs && n < 64; i++) {
		const herd_netdev *d = &node->netdevs[i];

		if (d->pci.bus_id[0] != '\0' && strcmp(d->state, "up") == 0 && d->speed_mbps >= 0)
			v[n++] = d->speed_mbps;
	}
	counted(v, n, " Mb/s", out, cap);
}

/* The MTUs of the PCI interfaces that are up. */
static void nic_mtus(const herd_node *node, char *out, size_t cap)
{
	int64_t v[64];
	size_t n = 0;

	for (size_t i = 0; i < node->nnetdevs && n < 64; i++) {
		const herd_netdev *d = &node->netdevs[i];

		if (d->pci.bus_id[0] != '\0' && strcmp(d->state, "up") == 0)
			v[n++] = d->mtu;
	}
	counted(v, n, "", out, cap);
	if (out[0] != '\0') {
		char tmp[VALUE_MAX];

		snprintf(tmp, sizeof(tmp), "MTU %s", out);
		snprintf(out, cap, "%s", tmp);
	}
}

static void rdma_presence(const herd_node *node, char *out, size_t cap)
{
	snprintf(out, cap, "%s", node->nrdma > 0 ? "RDMA devices" : "no RDMA device");
}

/* ---- per GPU ------------------------------------------------------------ */

static void ecc_off(checker *k, bool *which)
{
	bool any = false;

	for (size_t i = 0; i < k->c->nnodes; i++) {
		which[i] = false;
		for (size_t g = 0; g < k->c->nodes[i].ngpus; g++)
			which[i] |= k->c->nodes[i].gpus[g].ecc == 0;
		any |= which[i];
	}
	if (any)
		warn(k, which, "ECC is off on some GPUs (memory errors go unnoticed; "
			       "nvidia-smi -e 1 and a reset turn it on)");
}

/* A GPU whose link is narrower than the widest of GPUs of its model. */
static void pcie_narrow(checker *k, bool *which)
{
	const herd_cluster *c = k->c;

	for (size_t i = 0; i < c->nnodes; i++)
		for (size_t g = 0; g < c->nodes[i].ngpus; g++) {
			const herd_gpu *gpu = &c->nodes[i].gpus[g];
			int widest = 0;
			char msg[VALUE_MAX];

			if (gpu->pcie_width <= 0)
				continue;
			for (size_t j = 0; j < c->nnodes; j++)
				for (size_t h = 0; h < c->nodes[j].ngpus; h++)
					if (strcmp(c->nodes[j].gpus[h].name, gpu->name) == 0 &&
					    c->nodes[j].gpus[h].pcie_width > widest)
						widest = c->nodes[j].gpus[h].pcie_width;
			if (gpu->pcie_width >= widest)
				continue;
			for (size_t j = 0; j < c->nnodes; j++)
				which[j] = j == i;
			snprintf(msg, sizeof(msg), "GPU %s (%s) runs a PCIe x%d link, its siblings "
				 "x%d", gpu->pci.bus_id, gpu->name, gpu->pcie_width, widest);
			warn(k, which, msg);
		}
}

long herd_cluster_check(const herd_cluster *cluster, herd_cluster_warning_fn fn, void *userdata)
{
	checker k = { cluster, fn, userdata, 0, false, NULL, NULL };
	bool *which = NULL;
	size_t n = cluster != NULL ? cluster->nnodes : 0;

	if (cluster == NULL) {
		herd__error(HERD_EINVAL, "herd_cluster_check: cluster is NULL");
		return -1;
	}
	if (n < 2)
		return 0;
	if (herd__calloc(&k.values, n, sizeof(*k.values), "a check") != HERD_OK ||
	    herd__calloc(&k.names, n, sizeof(*k.names), "a check") != HERD_OK ||
	    herd__calloc(&which, n, sizeof(*which), "a check") != HERD_OK) {
		free(k.values);
		free(k.names);
		return -1;
	}
	by_value(&k, "GPU model", gpu_model);
	by_value(&k, "GPU count", gpu_count);
	by_value(&k, "GPU driver", gpu_driver);
	by_value(&k, "CUDA driver version", cuda_driver);
	by_value(&k, "NCCL", nccl);
	by_value(&k, "NIC speed", nic_speeds);
	by_value(&k, "NIC MTU", nic_mtus);
	by_value(&k, "RDMA", rdma_presence);
	ecc_off(&k, which);
	pcie_narrow(&k, which);
	free(which);
	free(k.values);
	free(k.names);
	if (k.failed) {
		herd__error(HERD_ENOMEM, "out of memory comparing the nodes");
		return -1;
	}
	return k.count;
}
