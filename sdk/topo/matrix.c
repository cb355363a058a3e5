/*
 * sdk/topo/matrix.c - the topology matrix of a node, in the legend of
 * `nvidia-smi topo -m`, computed from the PCI locations and NVLinks that
 * an inventory records (so it works alike for probed and loaded nodes).
 */
#include <stdio.h>
#include <string.h>

#include "inventory.h"

const char *herd_node_link_code(herd_link link, char buf[HERD_NODE_LINK_CODE_LEN])
{
	static const char *const codes[] = {
		[HERD_LINK_SELF] = "X",   [HERD_LINK_PIX] = "PIX",   [HERD_LINK_PXB] = "PXB",
		[HERD_LINK_PHB] = "PHB",  [HERD_LINK_NODE] = "NODE", [HERD_LINK_SYS] = "SYS",
	};

	if (link.kind == HERD_LINK_NVLINK)
		snprintf(buf, HERD_NODE_LINK_CODE_LEN, "NV%d", link.nvlinks);
	else if ((unsigned int)link.kind < sizeof(codes) / sizeof(codes[0]))
		herd__strlcpy(buf, codes[link.kind], HERD_NODE_LINK_CODE_LEN);
	else
		herd__strlcpy(buf, "?", HERD_NODE_LINK_CODE_LEN);
	return buf;
}

static int switch_count(const herd_pci_loc *pci)
{
	if (pci->nswitches < 0)
		return 0;
	return pci->nswitches > HERD_PCI_MAX_SWITCHES ? HERD_PCI_MAX_SWITCHES : pci->nswitches;
}

/*
 * The PCIe path between two devices.  Under one host bridge, the switches
 * both sit below (the common prefix of their switch lists, outermost
 * first) are where their paths meet; the path crosses the deepest common
 * switch and every switch below it on either side.  No common switch means
 * the path turns at the host bridge.  An unknown host bridge is never
 * taken to be shared.
 */
static herd_link_kind pci_link(const herd_pci_loc *a, const herd_pci_loc *b)
{
	int na = switch_count(a), nb = switch_count(b), common = 0;

	if (a->host_bridge[0] == '\0' ||
	    strncmp(a->host_bridge, b->host_bridge, HERD_PCI_ID_LEN) != 0)
		return a->numa_node >= 0 && a->numa_node == b->numa_node ? HERD_LINK_NODE
									 : HERD_LINK_SYS;
	while (common < na && common < nb &&
	       strncmp(a->switches[common], b->switches[common], HERD_PCI_ID_LEN) == 0)
		common++;
	if (common == 0)
		return HERD_LINK_PHB;
	return (na - common) + (nb - common) + 1 == 1 ? HERD_LINK_PIX : HERD_LINK_PXB;
}

static herd_status check_index(const herd_node *node, const char *what, size_t i, size_t n)
{
	if (i < n)
		return HERD_OK;
	return herd__error(HERD_EINVAL, "%s index %zu is out of range: node %s has %zu %ss", what,
			   i, node->hostname ? node->hostname : "(unnamed)", n, what);
}

/* Links from GPU a to GPU b: direct ones plus those through NVSwitches. */
static int nvlink_count(const herd_gpu *a, const herd_gpu *b)
{
	int links = 0;

	for (size_t k = 0; k < a->nnvlinks; k++)
		if (strncmp(a->nvlinks[k].peer_bus_id, b->pci.bus_id, HERD_PCI_ID_LEN) == 0)
			links += a->nvlinks[k].links;
	if (a->nvswitch_links > 0 && b->nvswitch_links > 0)
		links += a->nvswitch_links < b->nvswitch_links ? a->nvswitch_links
							       : b->nvswitch_links;
	return links;
}

herd_status herd_node_gpu_link(const herd_node *node, size_t i, size_t j, herd_link *out)
{
	int links;

	if (node == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_node_gpu_link: node and out must not be NULL");
	HERD_CHECK(check_index(node, "GPU", i, node->ngpus));
	HERD_CHECK(check_index(node, "GPU", j, node->ngpus));
	out->nvlinks = 0;
	if (i == j) {
		out->kind = HERD_LINK_SELF;
		return HERD_OK;
	}
	links = nvlink_count(&node->gpus[i], &node->gpus[j]);
	if (links > 0) {
		out->kind = HERD_LINK_NVLINK;
		out->nvlinks = links;
		return HERD_OK;
	}
	out->kind = pci_link(&node->gpus[i].pci, &node->gpus[j].pci);
	return HERD_OK;
}

size_t herd_node_nic_count(const herd_node *node)
{
	size_t n = 0;

	if (node == NULL)
		return 0;
	if (node->nrdma > 0)
		return node->nrdma;
	for (size_t i = 0; i < node->nnetdevs; i++)
		if (node->netdevs[i].pci.bus_id[0] != '\0')
			n++;
	return n;
}

/* Matrix NIC j: RDMA device j, or else the j-th netdev on a PCI function. */
static herd_status find_nic(const herd_node *node, size_t j, const char **name,
			    const herd_pci_loc **pci)
{
	HERD_CHECK(check_index(node, "NIC", j, herd_node_nic_count(node)));
	if (node->nrdma > 0) {
		*name = node->rdma[j].name;
		*pci = &node->rdma[j].pci;
		return HERD_OK;
	}
	for (size_t i = 0; i < node->nnetdevs; i++) {
		if (node->netdevs[i].pci.bus_id[0] == '\0')
			continue;
		if (j-- == 0) {
			*name = node->netdevs[i].name;
			*pci = &node->netdevs[i].pci;
			return HERD_OK;
		}
	}
	return herd__error(HERD_EINTERNAL, "the NICs of node %s changed while counted",
			   node->hostname ? node->hostname : "(unnamed)");
}

herd_status herd_node_nic(const herd_node *node, size_t j, const char **name,
			  const herd_pci_loc **pci)
{
	const herd_pci_loc *nic_pci = NULL;
	const char *nic_name = NULL;

	if (name != NULL)
		*name = NULL;
	if (pci != NULL)
		*pci = NULL;
	if (node == NULL)
		return herd__error(HERD_EINVAL, "herd_node_nic: node is NULL");
	HERD_CHECK(find_nic(node, j, &nic_name, &nic_pci));
	if (name != NULL)
		*name = nic_name;
	if (pci != NULL)
		*pci = nic_pci;
	return HERD_OK;
}

herd_status herd_node_gpu_nic_link(const herd_node *node, size_t gpu, size_t nic,
				   herd_link *out)
{
	const herd_pci_loc *nic_pci = NULL;
	const char *nic_name = NULL;

	if (node == NULL || out == NULL)
		return herd__error(HERD_EINVAL,
				   "herd_node_gpu_nic_link: node and out must not be NULL");
	HERD_CHECK(check_index(node, "GPU", gpu, node->ngpus));
	HERD_CHECK(find_nic(node, nic, &nic_name, &nic_pci));
	out->kind = pci_link(&node->gpus[gpu].pci, nic_pci);
	out->nvlinks = 0;
	return HERD_OK;
}
