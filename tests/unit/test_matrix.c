/*
 * tests/unit/test_matrix.c - the topology matrix (the legend of
 * `nvidia-smi topo -m`) of each fixture, written out in full, and of
 * hand-built nodes for the cases the fixtures do not reach.
 */
#include "test.h"
#include "topo/inventory.h"

static herd_cluster *load_fixture(const char *name)
{
	const char *root = getenv("HERD_SOURCE_DIR");
	herd_cluster *c = NULL;
	char path[4096];

	snprintf(path, sizeof(path), "%s/tests/fixtures/inventory/%s", root ? root : ".", name);
	if (herd_cluster_load(&c, path) != HERD_OK) {
		fprintf(stderr, "cannot load fixture: %s\n", herd_last_error());
		exit(1);
	}
	return c;
}

static const char *gpu_link(const herd_node *node, size_t i, size_t j, char *buf)
{
	herd_link link = { HERD_LINK_SYS, -1 };

	CHECK_OK(herd_node_gpu_link(node, i, j, &link));
	return herd_node_link_code(link, buf);
}

static const char *gpu_nic_link(const herd_node *node, size_t i, size_t j, char *buf)
{
	herd_link link = { HERD_LINK_SYS, -1 };

	CHECK_OK(herd_node_gpu_nic_link(node, i, j, &link));
	CHECK_INT(link.nvlinks, 0);
	return herd_node_link_code(link, buf);
}

/* Every cell of an n x m matrix; rows and columns named in failures. */
#define CHECK_MATRIX(node, fn, n, m, expected)                                          \
	do {                                                                            \
		char buf_[HERD_NODE_LINK_CODE_LEN];                                           \
		for (size_t i_ = 0; i_ < (n); i_++)                                     \
			for (size_t j_ = 0; j_ < (m); j_++) {                           \
				const char *got_ = fn(node, i_, j_, buf_);              \
				test_checks++;                                          \
				if (strcmp(got_, expected[i_][j_]) != 0)                \
					TEST_FAIL_("%s %s(%zu, %zu) = %s, expected %s",  \
						   (node)->hostname, #fn, i_, j_, got_,  \
						   expected[i_][j_]);                    \
			}                                                               \
	} while (0)

static void test_dgx_h100_matrix(void)
{
	static const char *const gpu_gpu[8][8] = {
		{ "X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18" },
		{ "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18" },
		{ "NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18" },
		{ "NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18" },
		{ "NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18", "NV18" },
		{ "NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18", "NV18" },
		{ "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X", "NV18" },
		{ "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "X" },
	};
	/* Each GPU shares a PCIe switch with its own NIC. */
	static const char *const gpu_nic[8][8] = {
		{ "PIX", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS" },
		{ "NODE", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS" },
		{ "NODE", "NODE", "PIX", "NODE", "SYS", "SYS", "SYS", "SYS" },
		{ "NODE", "NODE", "NODE", "PIX", "SYS", "SYS", "SYS", "SYS" },
		{ "SYS", "SYS", "SYS", "SYS", "PIX", "NODE", "NODE", "NODE" },
		{ "SYS", "SYS", "SYS", "SYS", "NODE", "PIX", "NODE", "NODE" },
		{ "SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "NODE" },
		{ "SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "NODE", "PIX" },
	};
	herd_cluster *c = load_fixture("dgx-h100.json");
	const herd_node *node = test_node(c, 0);
	const herd_pci_loc *pci = NULL;
	const char *name = NULL;
	char expect[16];

	CHECK_INT(node->ngpus, 8);
	CHECK_INT(herd_node_nic_count(node), 8);
	for (size_t j = 0; j < 8; j++) {
		CHECK_OK(herd_node_nic(node, j, &name, &pci));
		snprintf(expect, sizeof(expect), "mlx5_%zu", j);
		CHECK_STR(name, expect);
		CHECK(pci == &node->rdma[j].pci);
	}
	CHECK_MATRIX(node, gpu_link, 8, 8, gpu_gpu);
	CHECK_MATRIX(node, gpu_nic_link, 8, 8, gpu_nic);
	herd_cluster_free(c);
}

static void test_pcie_4gpu_matrix(void)
{
	static const char *const gpu_gpu[4][4] = {
		{ "X", "PIX", "SYS", "SYS" },
		{ "PIX", "X", "SYS", "SYS" },
		{ "SYS", "SYS", "X", "NODE" },
		{ "SYS", "SYS", "NODE", "X" },
	};
	/* The one NIC is on socket 0, under a host bridge of its own. */
	static const char *const gpu_nic[4][1] = { { "NODE" }, { "NODE" }, { "SYS" }, { "SYS" } };
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	const herd_node *node = test_node(c, 0);
	const char *name = NULL;

	/* Without RDMA devices the NICs are the netdevs on a PCI function:
	 * not lo, not docker0. */
	CHECK_INT(node->nrdma, 0);
	CHECK_INT(node->nnetdevs, 3);
	CHECK_INT(herd_node_nic_count(node), 1);
	CHECK_OK(herd_node_nic(node, 0, &name, NULL));
	CHECK_STR(name, "eno1");
	CHECK_MATRIX(node, gpu_link, 4, 4, gpu_gpu);
	CHECK_MATRIX(node, gpu_nic_link, 4, 1, gpu_nic);
	herd_cluster_free(c);
}

static void test_cpu_only_has_nics_and_no_gpu(void)
{
	herd_cluster *c = load_fixture("cpu-only.json");
	const herd_node *node = test_node(c, 0);
	const char *name = NULL;
	herd_link link;

	CHECK_INT(herd_node_nic_count(node), 2);
	CHECK_OK(herd_node_nic(node, 1, &name, NULL));
	CHECK_STR(name, "eno2");
	CHECK_ERR(herd_node_gpu_link(node, 0, 0, &link), HERD_EINVAL,
		  "GPU index 0 is out of range: node cpu-only has 0 GPUs");
	CHECK_ERR(herd_node_gpu_nic_link(node, 0, 0, &link), HERD_EINVAL, "GPU index 0");
	CHECK_ERR(herd_node_nic(node, 2, &name, NULL), HERD_EINVAL,
		  "NIC index 2 is out of range: node cpu-only has 2 NICs");
	herd_cluster_free(c);
}

static herd_pci_loc loc(const char *bus_id, const char *host_bridge, int numa,
			const char *sw0, const char *sw1)
{
	herd_pci_loc pci;

	memset(&pci, 0, sizeof(pci));
	herd__strlcpy(pci.bus_id, bus_id, sizeof(pci.bus_id));
	herd__strlcpy(pci.host_bridge, host_bridge, sizeof(pci.host_bridge));
	pci.numa_node = numa;
	if (sw0 != NULL)
		herd__strlcpy(pci.switches[pci.nswitches++], sw0, HERD_PCI_ID_LEN);
	if (sw1 != NULL)
		herd__strlcpy(pci.switches[pci.nswitches++], sw1, HERD_PCI_ID_LEN);
	return pci;
}

/*
 * A node built by hand: switch trees two deep (PXB), devices straight under
 * a host bridge (PHB), unknown NUMA nodes, direct NVLinks, and NVSwitch
 * links of unequal counts.
 */
static void test_hand_built_topologies(void)
{
	static const char *const gpu_gpu[8][8] = {
		/*   A       B       C       D       E       F       G       H   */
		{ "X", "NV4", "PXB", "PHB", "NODE", "SYS", "SYS", "SYS" },   /* A */
		{ "NV4", "X", "PXB", "PHB", "NODE", "SYS", "SYS", "SYS" },   /* B */
		{ "PXB", "PXB", "X", "PHB", "NODE", "SYS", "SYS", "SYS" },   /* C */
		{ "PHB", "PHB", "PHB", "X", "NODE", "SYS", "SYS", "SYS" },   /* D */
		{ "NODE", "NODE", "NODE", "NODE", "X", "SYS", "SYS", "SYS" }, /* E */
		{ "SYS", "SYS", "SYS", "SYS", "SYS", "X", "NV14", "NV12" },  /* F */
		{ "SYS", "SYS", "SYS", "SYS", "SYS", "NV14", "X", "NV12" },  /* G */
		{ "SYS", "SYS", "SYS", "SYS", "SYS", "NV12", "NV12", "X" },  /* H */
	};
	static const char *const gpu_nic[8][2] = {
		{ "PIX", "SYS" }, { "PXB", "SYS" }, { "PXB", "SYS" }, { "PHB", "SYS" },
		{ "NODE", "SYS" }, { "SYS", "SYS" }, { "SYS", "SYS" }, { "SYS", "SYS" },
	};
	herd_nvlink a_links[] = { { "0000:13:00.0", 4 } };
	herd_nvlink b_links[] = { { "0000:12:00.0", 4 } };
	herd_nvlink f_links[] = { { "0000:92:00.0", 2 } };
	herd_nvlink g_links[] = { { "0000:91:00.0", 2 } };
	herd_gpu gpus[8];
	herd_rdma_device rdma[2];
	herd_node node;
	herd_link link;

	memset(gpus, 0, sizeof(gpus));
	memset(rdma, 0, sizeof(rdma));
	memset(&node, 0, sizeof(node));
	/* A and B under different second-level switches of one switch; C
	 * right under the first switch; D straight under the host bridge. */
	gpus[0].pci = loc("0000:12:00.0", "0000:10", 0, "0000:11:00.0", "0000:12:00.0");
	gpus[1].pci = loc("0000:13:00.0", "0000:10", 0, "0000:11:00.0", "0000:13:00.0");
	gpus[2].pci = loc("0000:14:00.0", "0000:10", 0, "0000:11:00.0", NULL);
	gpus[3].pci = loc("0000:15:00.0", "0000:10", 0, NULL, NULL);
	gpus[4].pci = loc("0000:40:00.0", "0000:3f", 0, NULL, NULL);
	/* F, G, H: NUMA unknown, so never NODE, even with each other. */
	gpus[5].pci = loc("0000:91:00.0", "0000:90", -1, NULL, NULL);
	gpus[6].pci = loc("0000:92:00.0", "0000:90", -1, "0000:91:10.0", NULL);
	gpus[7].pci = loc("0000:a1:00.0", "", -1, NULL, NULL);
	gpus[0].nvlinks = a_links, gpus[0].nnvlinks = 1;
	gpus[1].nvlinks = b_links, gpus[1].nnvlinks = 1;
	gpus[5].nvlinks = f_links, gpus[5].nnvlinks = 1;
	gpus[6].nvlinks = g_links, gpus[6].nnvlinks = 1;
	gpus[5].nvswitch_links = 18;
	gpus[6].nvswitch_links = 12;
	gpus[7].nvswitch_links = 12;
	/* NIC 0 next to A under A's second-level switch; NIC 1 with no PCI
	 * function (a software RDMA device). */
	herd__strlcpy(rdma[0].name, "mlx5_0", sizeof(rdma[0].name));
	rdma[0].pci = loc("0000:12:00.1", "0000:10", 0, "0000:11:00.0", "0000:12:00.0");
	herd__strlcpy(rdma[1].name, "rxe0", sizeof(rdma[1].name));
	rdma[1].pci = loc("", "", -1, NULL, NULL);
	node.hostname = "synth";
	node.gpus = gpus, node.ngpus = 8;
	node.rdma = rdma, node.nrdma = 2;

	CHECK_MATRIX(&node, gpu_link, 8, 8, gpu_gpu);
	CHECK_MATRIX(&node, gpu_nic_link, 8, 2, gpu_nic);
	CHECK_OK(herd_node_gpu_link(&node, 5, 6, &link));
	CHECK_INT(link.kind, HERD_LINK_NVLINK);
	CHECK_INT(link.nvlinks, 14);
	CHECK_ERR(herd_node_gpu_link(&node, 0, 9, &link), HERD_EINVAL,
		  "GPU index 9 is out of range: node synth has 8 GPUs");
	CHECK_ERR(herd_node_gpu_link(&node, 8, 0, &link), HERD_EINVAL, "GPU index 8");
	CHECK_ERR(herd_node_gpu_nic_link(&node, 0, 2, &link), HERD_EINVAL,
		  "NIC index 2 is out of range: node synth has 2 NICs");
	CHECK_ERR(herd_node_gpu_link(NULL, 0, 0, &link), HERD_EINVAL, "NULL");
	CHECK_ERR(herd_node_gpu_link(&node, 0, 0, NULL), HERD_EINVAL, "NULL");
	CHECK_INT(herd_node_nic_count(NULL), 0);
}

static void test_link_str(void)
{
	static const struct {
		herd_link link;
		const char *str;
	} cases[] = {
		{ { HERD_LINK_SELF, 0 }, "X" },    { { HERD_LINK_NVLINK, 18 }, "NV18" },
		{ { HERD_LINK_NVLINK, 4 }, "NV4" }, { { HERD_LINK_PIX, 0 }, "PIX" },
		{ { HERD_LINK_PXB, 0 }, "PXB" },   { { HERD_LINK_PHB, 0 }, "PHB" },
		{ { HERD_LINK_NODE, 0 }, "NODE" }, { { HERD_LINK_SYS, 0 }, "SYS" },
		{ { (herd_link_kind)42, 0 }, "?" },
	};
	char buf[HERD_NODE_LINK_CODE_LEN];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_STR(herd_node_link_code(cases[i].link, buf), cases[i].str);
	CHECK(herd_node_link_code(cases[0].link, buf) == buf);
}

int main(void)
{
	TEST_RUN(test_dgx_h100_matrix);
	TEST_RUN(test_pcie_4gpu_matrix);
	TEST_RUN(test_cpu_only_has_nics_and_no_gpu);
	TEST_RUN(test_hand_built_topologies);
	TEST_RUN(test_link_str);
	return TEST_DONE();
}
