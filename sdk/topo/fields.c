/*
 * sdk/topo/fields.c - the inventory format, described once: the field
 * table of each struct of the model (keys, kinds, ranges, string forms),
 * with which encode.c writes an inventory and decode.c reads one
 * (docs/inventory.md shows the same keys).
 *
 * The order of a table is the order of the keys in canonical msgpack (that
 * of the C structs).  Key names are the C field names, so the JSON reads
 * like cluster.h.  Keys added within format version 1 are optional: a
 * file written before them reads as "unknown".
 */
#include <stdbool.h>

#include "inventory.h"
#include "schema.h"

/*
 * Bounds of integer fields, far beyond real machines but low enough that
 * a value outside them is certainly corrupt.  Byte counts stop at
 * INT64_MAX so that every inventory also has a JSON form.
 */
#define MAX_CPUS (1 << 20)      /* packages, cores, threads */
#define MAX_NUMA_INDEX 65535    /* Linux allows at most 1024 NUMA nodes */
#define MAX_MTU (1 << 20)
#define MAX_RATE_GBPS (1 << 20)
#define MAX_RDMA_PORT 255       /* port numbers are a uint8_t in libibverbs */
#define MAX_CC 255
#define MAX_NVLINKS 64
#define MAX_BYTES INT64_MAX
#define MAX_PCIE_GEN 16
#define MAX_PCIE_WIDTH 64
#define MAX_ITEMS HERD_INVENTORY_MAX_ITEMS
#define MAX_STRING HERD_INVENTORY_MAX_STRING

/* ---- string forms ---- */

static bool lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "dddd:bb:dd.f": domain, bus, device (00-1f), function (0-7). */
static bool valid_bus_id(const char *s, size_t n)
{
	return n == 12 && lower_hex(s, 4) && s[4] == ':' && lower_hex(s + 5, 2) &&
	       s[7] == ':' && lower_hex(s + 8, 2) && s[8] <= '1' && s[10] == '.' &&
	       s[11] >= '0' && s[11] <= '7';
}

static bool valid_bus_id_or_empty(const char *s, size_t n)
{
	return n == 0 || valid_bus_id(s, n);
}

/* "dddd:bb", the root bus of a host bridge; empty when unknown. */
static bool valid_host_bridge(const char *s, size_t n)
{
	return n == 0 || (n == 7 && lower_hex(s, 4) && s[4] == ':' && lower_hex(s + 5, 2));
}

static bool parse_cpu(const char *s, size_t n, size_t *i, uint32_t *v)
{
	size_t start = *i;

	*v = 0;
	while (*i < n && s[*i] >= '0' && s[*i] <= '9' && *i - start < 9)
		*v = *v * 10 + (uint32_t)(s[(*i)++] - '0');
	return *i > start && (*i == n || s[*i] < '0' || s[*i] > '9');
}

/* A Linux CPU list, "0-15,32-47"; empty for a NUMA node without CPUs. */
static bool valid_cpulist(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0)
		return true;
	for (;;) {
		uint32_t first, last;

		if (!parse_cpu(s, n, &i, &first))
			return false;
		if (i < n && s[i] == '-') {
			i++;
			if (!parse_cpu(s, n, &i, &last) || last < first)
				return false;
		}
		if (i == n)
			return true;
		if (s[i++] != ',')
			return false;
	}
}

static bool valid_non_empty(const char *s, size_t n)
{
	(void)s;
	return n > 0;
}

static const herd__schema_form bus_id_form = {
	"a PCI bus id like \"0000:18:00.0\" (lower-case hex)", valid_bus_id
};
static const herd__schema_form nic_bus_id_form = {
	"a PCI bus id like \"0000:18:00.0\" (lower-case hex), or \"\" for a virtual device",
	valid_bus_id_or_empty
};
static const herd__schema_form host_bridge_form = {
	"a host bridge like \"0000:17\" (lower-case hex), or \"\"", valid_host_bridge
};
static const herd__schema_form cpulist_form = { "a CPU list like \"0-15,32-47\"", valid_cpulist };
static const herd__schema_form name_form = { "a non-empty string", valid_non_empty };

/* ---- the tables ---- */

/* Items of string arrays. */
static const herd__schema_field switch_item = {
	HERD__SCHEMA_ITEM(HERD__SCHEMA_T_CHARS, char[HERD_PCI_ID_LEN]), .form = &bus_id_form
};
static const herd__schema_field string_item = {
	HERD__SCHEMA_ITEM(HERD__SCHEMA_T_STR, char *), .max = MAX_STRING
};

/* A PCI location: a GPU's has a bus id, a NIC's may have none. */
#define PCI_FIELDS(bus_form)                                                           \
	{ HERD__SCHEMA_CHARS("bus_id", herd_pci_loc, bus_id), .form = (bus_form) },     \
	{ HERD__SCHEMA_CHARS("host_bridge", herd_pci_loc, host_bridge),                 \
	  .form = &host_bridge_form },                                                  \
	{ HERD__SCHEMA_INT("numa_node", herd_pci_loc, numa_node, -1, MAX_NUMA_INDEX) },  \
	{ HERD__SCHEMA_INLINE_ARRAY("switches", herd_pci_loc, switches, nswitches, 0),  \
	  .item = &switch_item }

static const herd__schema_field gpu_pci_fields[] = { PCI_FIELDS(&bus_id_form) };
static const herd__schema_field nic_pci_fields[] = { PCI_FIELDS(&nic_bus_id_form) };
static const herd__schema gpu_pci_schema =
	HERD__SCHEMA(herd_pci_loc, gpu_pci_fields, MAX_ITEMS, NULL);
static const herd__schema nic_pci_schema =
	HERD__SCHEMA(herd_pci_loc, nic_pci_fields, MAX_ITEMS, NULL);

static const herd__schema_field numa_fields[] = {
	{ HERD__SCHEMA_INT("os_index", herd_numa_node, os_index, 0, MAX_NUMA_INDEX) },
	{ HERD__SCHEMA_INT("memory_bytes", herd_numa_node, memory_bytes, 0, MAX_BYTES) },
	{ HERD__SCHEMA_STR("cpus", herd_numa_node, cpus, MAX_STRING), .form = &cpulist_form },
};
static const herd__schema numa_schema =
	HERD__SCHEMA(herd_numa_node, numa_fields, MAX_ITEMS, NULL);

static const herd__schema_field nvlink_fields[] = {
	{ HERD__SCHEMA_CHARS("peer_bus_id", herd_nvlink, peer_bus_id), .form = &bus_id_form },
	{ HERD__SCHEMA_INT("links", herd_nvlink, links, 0, MAX_NVLINKS) },
};
static const herd__schema nvlink_schema =
	HERD__SCHEMA(herd_nvlink, nvlink_fields, MAX_ITEMS, NULL);

/* An integer key added within version 1: absent is def, "unknown". */
#define ADDED_INT(key, T, m, lo, hi, def_) \
	{ HERD__SCHEMA_INT(key, T, m, lo, hi), .flags = HERD__SCHEMA_OPTIONAL, .def = (def_) }

static const herd__schema_field gpu_fields[] = {
	{ HERD__SCHEMA_CHARS("uuid", herd_gpu, uuid) },
	{ HERD__SCHEMA_CHARS("name", herd_gpu, name) },
	{ HERD__SCHEMA_STRUCT("pci", herd_gpu, pci, &gpu_pci_schema) },
	{ HERD__SCHEMA_INT("memory_bytes", herd_gpu, memory_bytes, 0, MAX_BYTES) },
	{ HERD__SCHEMA_INT("cc_major", herd_gpu, cc_major, 0, MAX_CC) },
	{ HERD__SCHEMA_INT("cc_minor", herd_gpu, cc_minor, 0, MAX_CC) },
	{ HERD__SCHEMA_INT("nvswitch_links", herd_gpu, nvswitch_links, 0, MAX_NVLINKS) },
	{ HERD__SCHEMA_ARRAY("nvlinks", herd_gpu, nvlinks, nnvlinks, 0, MAX_ITEMS),
	  .sub = &nvlink_schema },
	ADDED_INT("ecc", herd_gpu, ecc, -1, 1, -1),
	ADDED_INT("pcie_gen", herd_gpu, pcie_gen, 0, MAX_PCIE_GEN, 0),
	ADDED_INT("pcie_width", herd_gpu, pcie_width, 0, MAX_PCIE_WIDTH, 0),
	ADDED_INT("pcie_max_gen", herd_gpu, pcie_max_gen, 0, MAX_PCIE_GEN, 0),
	ADDED_INT("pcie_max_width", herd_gpu, pcie_max_width, 0, MAX_PCIE_WIDTH, 0),
};
static const herd__schema gpu_schema = HERD__SCHEMA(herd_gpu, gpu_fields, MAX_ITEMS, NULL);

static const herd__schema_field netdev_fields[] = {
	{ HERD__SCHEMA_CHARS("name", herd_netdev, name), .form = &name_form },
	{ HERD__SCHEMA_CHARS("state", herd_netdev, state) },
	{ HERD__SCHEMA_INT("mtu", herd_netdev, mtu, 0, MAX_MTU) },
	{ HERD__SCHEMA_INT("speed_mbps", herd_netdev, speed_mbps, -1, INT64_MAX) },
	{ HERD__SCHEMA_ARRAY("addrs", herd_netdev, addrs, naddrs, 0, MAX_ITEMS),
	  .item = &string_item },
	{ HERD__SCHEMA_STRUCT("pci", herd_netdev, pci, &nic_pci_schema) },
};
static const herd__schema netdev_schema =
	HERD__SCHEMA(herd_netdev, netdev_fields, MAX_ITEMS, NULL);

static const herd__schema_field rdma_port_fields[] = {
	{ HERD__SCHEMA_INT("port", herd_rdma_port, port, 1, MAX_RDMA_PORT) },
	{ HERD__SCHEMA_CHARS("state", herd_rdma_port, state) },
	{ HERD__SCHEMA_CHARS("link_layer", herd_rdma_port, link_layer) },
	{ HERD__SCHEMA_INT("rate_gbps", herd_rdma_port, rate_gbps, 0, MAX_RATE_GBPS) },
	{ HERD__SCHEMA_ARRAY("gids", herd_rdma_port, gids, ngids, 0, MAX_ITEMS),
	  .item = &string_item },
};
static const herd__schema rdma_port_schema =
	HERD__SCHEMA(herd_rdma_port, rdma_port_fields, MAX_ITEMS, NULL);

static const herd__schema_field rdma_fields[] = {
	{ HERD__SCHEMA_CHARS("name", herd_rdma_device, name), .form = &name_form },
	{ HERD__SCHEMA_CHARS("netdev", herd_rdma_device, netdev) },
	{ HERD__SCHEMA_STRUCT("pci", herd_rdma_device, pci, &nic_pci_schema) },
	{ HERD__SCHEMA_ARRAY("ports", herd_rdma_device, ports, nports, 0, MAX_ITEMS),
	  .sub = &rdma_port_schema },
};
static const herd__schema rdma_schema =
	HERD__SCHEMA(herd_rdma_device, rdma_fields, MAX_ITEMS, NULL);

/* A note: a string, or null or absent for "nothing to say" (NULL). */
#define NOTE(key, m)                                               \
	{ HERD__SCHEMA_STR(key, herd_node, m, MAX_STRING),         \
	  .flags = HERD__SCHEMA_OPTIONAL | HERD__SCHEMA_NULLABLE }

static const herd__schema_field node_fields[] = {
	{ HERD__SCHEMA_STR("hostname", herd_node, hostname, MAX_STRING),
	  .form = &name_form },
	{ HERD__SCHEMA_STR("cpu_model", herd_node, cpu_model, MAX_STRING) },
	{ HERD__SCHEMA_INT("packages", herd_node, packages, 0, MAX_CPUS) },
	{ HERD__SCHEMA_INT("cores", herd_node, cores, 0, MAX_CPUS) },
	{ HERD__SCHEMA_INT("threads", herd_node, threads, 0, MAX_CPUS) },
	{ HERD__SCHEMA_INT("memory_bytes", herd_node, memory_bytes, 0, MAX_BYTES) },
	{ HERD__SCHEMA_INT("memory_available_bytes", herd_node, memory_available_bytes, 0,
			   MAX_BYTES) },
	{ HERD__SCHEMA_ARRAY("numa", herd_node, numa, nnuma, 0, MAX_ITEMS),
	  .sub = &numa_schema },
	{ HERD__SCHEMA_ARRAY("gpus", herd_node, gpus, ngpus, 0, MAX_ITEMS),
	  .sub = &gpu_schema },
	NOTE("gpu_note", gpu_note),
	{ HERD__SCHEMA_ARRAY("netdevs", herd_node, netdevs, nnetdevs, 0, MAX_ITEMS),
	  .sub = &netdev_schema },
	{ HERD__SCHEMA_ARRAY("rdma", herd_node, rdma, nrdma, 0, MAX_ITEMS),
	  .sub = &rdma_schema },
	NOTE("rdma_note", rdma_note),
	/* Added within version 1. */
	NOTE("gpu_driver", gpu_driver),
	NOTE("cuda_driver", cuda_driver),
	NOTE("nccl", nccl),
};
const herd__schema herd__node_schema = HERD__SCHEMA(herd_node, node_fields, MAX_ITEMS, NULL);

static const herd__schema_field failed_fields[] = {
	{ HERD__SCHEMA_STR("host", herd__cluster_failed, host, MAX_STRING),
	  .form = &name_form },
	{ HERD__SCHEMA_STR("reason", herd__cluster_failed, reason, MAX_STRING) },
};
static const herd__schema failed_schema =
	HERD__SCHEMA(herd__cluster_failed, failed_fields, MAX_ITEMS, NULL);

/* "v" is checked by decode.c before anything else; "failed" only when a
 * discovery left some nodes out. */
static const herd__schema_field cluster_fields[] = {
	{ HERD__SCHEMA_CONST_INT("v", HERD_CLUSTER_INVENTORY_VERSION) },
	{ HERD__SCHEMA_ARRAY("nodes", herd_cluster, nodes, nnodes, 0, HERD_INVENTORY_MAX_NODES),
	  .sub = &herd__node_schema },
	{ HERD__SCHEMA_ARRAY("failed", herd_cluster, failed, nfailed, 0,
			     HERD_INVENTORY_MAX_NODES),
	  .sub = &failed_schema, .flags = HERD__SCHEMA_OPTIONAL | HERD__SCHEMA_OMIT_EMPTY },
};
const herd__schema herd__inventory_schema =
	HERD__SCHEMA(herd_cluster, cluster_fields, MAX_ITEMS, NULL);
