/*
 * The planner (herd_alloc_plan) on the fixtures: the GPU sets it picks for
 * typical requests on a DGX H100 and a PCIe workstation, with some GPUs
 * already leased (fragmented), over several nodes, and the reasons it
 * gives when a request cannot be met; the bindings and environment of
 * each rank; bad requests.  Pure: no files but the fixtures.
 */
#include "test_alloc_util.h"

static herd_alloc_request request(int gpus)
{
	herd_alloc_request r = HERD_ALLOC_REQUEST_INIT;

	r.gpus = gpus;
	return r;
}

/* Plans req on c with states s[0..n); the plan, or NULL with the error raised. */
static herd_plan *plan_of(const herd_cluster *c, const herd_alloc_request *req,
			  const herd_alloc_gpu_status *s, size_t n)
{
	herd_plan *p = NULL;

	if (herd_alloc_plan(&p, c, req, s, n) != HERD_OK)
		return NULL;
	return p;
}

static void test_alloc_plan_pcie_same_numa_picks_one_socket_under_one_switch(void)
{
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	herd_alloc_request req = request(2);
	herd_link l;
	herd_plan *p;

	req.link = HERD_ALLOC_LINK_SAME_NUMA;
	p = plan_of(c, &req, NULL, 0);
	CHECK(p != NULL);
	CHECK_STR(plan_gpus(p), "0,1");
	CHECK_OK(herd_plan_link(p, 0, 1, &l));
	CHECK_INT(l.kind, HERD_LINK_PIX);
	CHECK(strstr(herd_plan_explain(p), "all on NUMA node 0, that is one socket") != NULL);
	CHECK(strstr(herd_plan_explain(p), "runner-up: GPU2, GPU3") != NULL);
	CHECK(strstr(herd_plan_explain(p), "its worst link is PIX where the runner-up's is NODE") !=
	      NULL);
	CHECK(herd_plan_score(p) == 60.0);
	CHECK_STR(test_plan_rank(p, 0)->cpus, "0-31,64-95");
	CHECK_INT(test_plan_rank(p, 1)->numa_node, 0);
	herd_plan_free(p);
	herd_cluster_free(c);
}

static void test_alloc_plan_pcie_prefers_switch_then_bridge_then_socket(void)
{
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	const herd_node *node = test_node(c, 0);
	herd_alloc_gpu_status *s = free_states(node);
	herd_alloc_request req = request(2);
	herd_plan *p;

	/* Free machine: the pair under one switch. */
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "0,1");
	herd_plan_free(p);
	/* GPU0 leased: 2-3 (NODE, one socket) beats 1-2 and 1-3 (SYS). */
	hold_state(s, 0, "j1");
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "2,3");
	CHECK(strstr(herd_plan_explain(p), "GPU0 held by job j1 (pid 4242, user ann)") != NULL);
	herd_plan_free(p);
	/* Three GPUs: both of the switch pair and one more, the lowest. */
	s[0].state = HERD_LEASE_FREE;
	req.gpus = 3;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "0,1,2");
	herd_plan_free(p);
	free(s);
	herd_cluster_free(c);
}

static void test_alloc_plan_pcie_fragmented_same_numa_says_why_not(void)
{
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	const herd_node *node = test_node(c, 0);
	herd_alloc_gpu_status *s = free_states(node);
	herd_alloc_request req = request(2);
	herd_plan *p = NULL;

	req.link = HERD_ALLOC_LINK_SAME_NUMA;
	hold_state(s, 0, "42");
	hold_state(s, 2, "43");
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, node->ngpus), HERD_ENORESOURCE,
		  "need 2 GPUs sharing a NUMA node on one node; node pcie-4gpu has 2 free of 4 "
		  "but at most 1 on one NUMA node; not available: GPU0 held by job 42 (pid 4242, "
		  "user ann), GPU2 held by job 43");
	CHECK(p == NULL);
	/* No NVLink at all on this machine. */
	s[0].state = s[2].state = HERD_LEASE_FREE;
	req.link = HERD_ALLOC_LINK_NVLINK;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, node->ngpus), HERD_ENORESOURCE,
		  "need 2 NVLink-connected GPUs on one node; node pcie-4gpu has 4 free of 4 but "
		  "at most 1 NVLink-connected");
	free(s);
	herd_cluster_free(c);
}

static void test_alloc_plan_dgx_all_eight_are_nv18(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	herd_alloc_request req = request(8);
	char buf[HERD_NODE_LINK_CODE_LEN];
	herd_plan *p;

	req.gpus_per_node = 8;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "0,1,2,3,4,5,6,7");
	for (size_t i = 0; i < 8; i++)
		for (size_t j = 0; j < 8; j++)
			CHECK_STR(herd_plan_link_code(p, i, j, buf), i == j ? "X" : "NV18");
	CHECK(herd_plan_score(p) == 100.0);
	CHECK_INT(herd_plan_rank_count(p), 8);
	CHECK_INT(test_plan_rank(p, 5)->local_rank, 5);
	CHECK_STR(test_plan_rank(p, 5)->nic, "mlx5_5");
	CHECK_INT(test_plan_rank(p, 5)->nic_link.kind, HERD_LINK_PIX);
	CHECK_STR(test_plan_rank(p, 5)->cpus, "56-111,168-223");
	herd_plan_free(p);
	herd_cluster_free(c);
}

static void test_alloc_plan_dgx_nine_on_one_node_fails_with_reason(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	herd_alloc_request req = request(9);
	herd_plan *p = NULL;

	req.gpus_per_node = 9;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_ENORESOURCE,
		  "need 9 GPUs on one node; node dgx-h100 has 8 free of 8");
	req.gpus_per_node = 0;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_ENORESOURCE,
		  "need 9 GPUs; the inventory has 8 free: node dgx-h100 has 8 free of 8");
	req.link = HERD_ALLOC_LINK_NVLINK;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_ENORESOURCE,
		  "need 9 NVLink-connected GPUs on one node");
	CHECK(p == NULL);
	herd_cluster_free(c);
}

static void test_alloc_plan_dgx_fragmented_keeps_a_socket_whole(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	const herd_node *node = test_node(c, 0);
	herd_alloc_gpu_status *s = free_states(node);
	herd_alloc_request req = request(4);
	herd_plan *p;

	req.link = HERD_ALLOC_LINK_NVLINK;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "0,1,2,3");
	herd_plan_free(p);
	/* 0-2 leased: four NVLinked GPUs on one socket rather than 3+4..6. */
	hold_state(s, 0, "a");
	hold_state(s, 1, "a");
	hold_state(s, 2, "a");
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "4,5,6,7");
	CHECK(strstr(herd_plan_explain(p), "it uses fewer NUMA nodes (1 vs 2)") != NULL);
	herd_plan_free(p);
	/* Two: one socket, the lowest pair there. */
	req.gpus = 2;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "4,5");
	herd_plan_free(p);
	/* One: best fit, the GPU left alone on socket 0. */
	req.gpus = 1;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "3");
	herd_plan_free(p);
	/* Five NVLinked: four free on one socket and one on the other will do. */
	req.gpus = 5;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "3,4,5,6,7");
	herd_plan_free(p);
	req.gpus = 6;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, node->ngpus), HERD_ENORESOURCE,
		  "need 6 NVLink-connected GPUs on one node; node dgx-h100 has 5 free of 8");
	free(s);
	herd_cluster_free(c);
}

static void test_alloc_plan_spread_uses_both_sockets(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	herd_alloc_request req = request(2);
	herd_plan *p;

	req.policy = HERD_ALLOC_SPREAD;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "0,4");
	herd_plan_free(p);
	herd_cluster_free(c);
}

static void test_alloc_plan_exclude_include_and_names(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	herd_alloc_request req = request(4);
	const char *by_bus[] = { "0000:1B:00.0" }; /* case and form normalized */
	const char *by_short_bus[] = { "43:00.0" };
	const char *by_uuid[] = { "gpu-f4b1b646-33be-40f5-915c-61236c88c537" };
	const char *by_host[] = { "dgx-h100" };
	const char *unknown[] = { "GPU-nope" };
	const char *only[] = { "0000:9d:00.0", "GPU-5625871b-82b9-4fbc-91ba-7257dabe22ca" };
	herd_plan *p = NULL;

	req.link = HERD_ALLOC_LINK_NVLINK;
	req.exclude = by_bus;
	req.nexclude = 1;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "4,5,6,7");
	herd_plan_free(p);
	req.gpus = 2;
	req.exclude = by_short_bus;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "0,2");
	herd_plan_free(p);
	req.exclude = by_uuid;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "0,1");
	herd_plan_free(p);
	req.exclude = by_host;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_ENORESOURCE,
		  "node dgx-h100 has 0 free of 8; not available: GPU0 excluded");
	req.exclude = unknown;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "exclude[0] 'GPU-nope' names no GPU");
	req.exclude = NULL;
	req.nexclude = 0;
	req.include = only;
	req.ninclude = 2;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "4,5");
	herd_plan_free(p);
	req.gpus = 3;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_ENORESOURCE, "GPU0 not granted");
	herd_cluster_free(c);
}

static void test_alloc_plan_memory_processes_shared_and_unknown(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	const herd_node *node = test_node(c, 0);
	herd_alloc_gpu_status *s = free_states(node);
	herd_alloc_request req = request(1);
	herd_plan *p = NULL;

	/* Too little free memory on GPU0 (NVML says 10 GiB). */
	s[0].free_memory_bytes = (int64_t)10 << 30;
	req.min_free_memory_bytes = (uint64_t)40 << 30;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "1");
	herd_plan_free(p);
	req.min_free_memory_bytes = (uint64_t)100 << 30;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, node->ngpus), HERD_ENORESOURCE,
		  "GPU0 too little free memory (10.0 GiB free, need 100.0 GiB)");
	req.min_free_memory_bytes = 0;
	s[0].free_memory_bytes = -1;
	/* Foreign processes on GPU1: last choice, and a warning when chosen. */
	s[1].processes = 2;
	s[1].pids[0] = 1234;
	s[1].pids[1] = 5678;
	req.gpus = 1;
	req.exclude = (const char *[]){ "0000:1b:00.0" };
	req.nexclude = 1;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_STR(plan_gpus(p), "2");
	CHECK_INT(herd_plan_warning_count(p), 0);
	herd_plan_free(p);
	req.exclude = NULL;
	req.nexclude = 0;
	req.gpus = 8;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_INT(herd_plan_warning_count(p), 1);
	CHECK(p != NULL &&
	      strstr(test_plan_warning(p, 0),
		     "GPU1 of dgx-h100 (GPU-da60fb1c-eb7a-4995-9588-532d4242aadb, "
		     "0000:43:00.0) already runs 2 compute processes (pids 1234, 5678) "
		     "that no herd lease accounts for") != NULL);
	herd_plan_free(p);
	s[1].processes = -1;
	/* Shared leases: not for an exclusive request, fine for a shared one. */
	req.gpus = 8;
	s[7].state = HERD_LEASE_SHARED;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, node->ngpus), HERD_ENORESOURCE,
		  "GPU7 shared by other jobs");
	req.shared = 1;
	p = plan_of(c, &req, s, node->ngpus);
	CHECK_INT(herd_plan_gpu_count(p), 8);
	herd_plan_free(p);
	/* An unusable lease file: never handed out, and said why. */
	s[3].state = HERD_LEASE_UNKNOWN;
	snprintf(s[3].note, sizeof(s[3].note), "x.lock is not a regular file");
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, node->ngpus), HERD_ENORESOURCE,
		  "GPU3 lease file unusable (x.lock is not a regular file)");
	free(s);
	herd_cluster_free(c);
}

/*
 * near_nic: of two GPUs equal in every other way, the one whose host
 * bridge the only NIC sits under (PHB, against SYS for the other).
 */
static void test_alloc_plan_near_nic_prefers_the_gpu_beside_the_nic(void)
{
	static const char json[] =
		"{\"v\":1,\"nodes\":[{\"hostname\":\"two\",\"cpu_model\":\"\",\"packages\":2,"
		"\"cores\":2,\"threads\":2,\"memory_bytes\":1,\"memory_available_bytes\":1,"
		"\"numa\":[{\"os_index\":0,\"memory_bytes\":1,\"cpus\":\"0\"},"
		"{\"os_index\":1,\"memory_bytes\":1,\"cpus\":\"1\"}],\"gpus\":["
		"{\"uuid\":\"GPU-0\",\"name\":\"g\",\"pci\":{\"bus_id\":\"0000:10:00.0\","
		"\"host_bridge\":\"0000:0f\",\"numa_node\":0,\"switches\":[]},\"memory_bytes\":1,"
		"\"cc_major\":9,\"cc_minor\":0,\"nvswitch_links\":0,\"nvlinks\":[]},"
		"{\"uuid\":\"GPU-1\",\"name\":\"g\",\"pci\":{\"bus_id\":\"0000:90:00.0\","
		"\"host_bridge\":\"0000:8f\",\"numa_node\":1,\"switches\":[]},\"memory_bytes\":1,"
		"\"cc_major\":9,\"cc_minor\":0,\"nvswitch_links\":0,\"nvlinks\":[]}],"
		"\"netdevs\":[{\"name\":\"eth1\",\"state\":\"up\",\"mtu\":1500,\"speed_mbps\":-1,"
		"\"addrs\":[\"10.0.0.2/24\"],\"pci\":{\"bus_id\":\"0000:91:00.0\","
		"\"host_bridge\":\"0000:8f\",\"numa_node\":1,\"switches\":[]}}],\"rdma\":[]}]}";
	herd_alloc_request req = request(1);
	herd_cluster *c = NULL;
	herd_plan *p;

	CHECK_OK(herd_cluster_decode(&c, json, strlen(json), "near-nic test"));
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "0");
	CHECK_INT(test_plan_rank(p, 0)->nic_link.kind, HERD_LINK_SYS);
	herd_plan_free(p);
	req.near_nic = 1;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "1");
	CHECK_STR(test_plan_rank(p, 0)->nic, "eth1");
	CHECK_INT(test_plan_rank(p, 0)->nic_link.kind, HERD_LINK_PHB);
	CHECK_STR(test_plan_rank(p, 0)->socket_ifname, "=eth1");
	CHECK(strstr(herd_plan_explain(p), "its GPUs are nearer a NIC") != NULL);
	herd_plan_free(p);
	herd_cluster_free(c);
}

static void test_alloc_plan_ranks_with_two_gpus_and_their_environment(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	herd_alloc_request req = request(8);
	herd_plan *p;
	const herd_plan_rank_info *rank = NULL;
	const herd_plan_gpu_info *gpu = NULL;
	char **env = NULL;

	req.gpus_per_rank = 2;
	p = plan_of(c, &req, NULL, 0);
	CHECK_INT(herd_plan_rank_count(p), 4);
	CHECK_INT(test_plan_rank(p, 1)->ngpus, 2);
	CHECK_INT(test_plan_rank(p, 1)->gpus[0].index, 2);
	CHECK_INT(test_plan_rank(p, 1)->gpus[1].index, 3);
	CHECK_INT(test_plan_gpu(p, 3)->rank, 1);
	CHECK_ERR(herd_plan_rank(p, 4, &rank), HERD_EINVAL,
		  "herd_plan_rank: rank 4 is out of range: the plan has 4 ranks");
	CHECK(rank == NULL);
	CHECK_ERR(herd_plan_gpu(p, 8, &gpu), HERD_EINVAL,
		  "herd_plan_gpu: GPU 8 is out of range: the plan has 8 GPUs");
	CHECK(gpu == NULL);
	CHECK_OK(herd_plan_rank_env(p, 1, &env));
	CHECK_STR(env[0], "CUDA_VISIBLE_DEVICES=GPU-f4b1b646-33be-40f5-915c-61236c88c537,"
			  "GPU-13a5bf07-da1b-4950-a0c4-0eb788718c96");
	CHECK_STR(env[1], "CUDA_DEVICE_ORDER=PCI_BUS_ID");
	CHECK_STR(env[2], "NCCL_IB_HCA==mlx5_2:1");
	CHECK_STR(env[3], "NCCL_SOCKET_IFNAME==eno3");
	CHECK(env[4] == NULL);
	herd_free(env);
	CHECK_ERR(herd_plan_rank_env(p, 4, &env), HERD_EINVAL, "rank 4 out of range");
	herd_plan_free(p);
	herd_cluster_free(c);

	/* A workstation without RDMA: only the socket interface. */
	c = load_fixture("pcie-4gpu.json");
	req = request(1);
	p = plan_of(c, &req, NULL, 0);
	CHECK_OK(herd_plan_rank_env(p, 0, &env));
	CHECK_STR(env[0], "CUDA_VISIBLE_DEVICES=GPU-b039ee16-9646-4718-8f3d-9a4de6cf02bb");
	CHECK_STR(env[2], "NCCL_SOCKET_IFNAME==eno1");
	CHECK(env[3] == NULL);
	CHECK_STR(test_plan_rank(p, 0)->ib_hca, "");
	herd_free(env);
	/* The plan owns its strings: it outlives the inventory. */
	herd_cluster_free(c);
	CHECK_STR(test_plan_rank(p, 0)->hostname, "pcie-4gpu");
	CHECK_STR(test_plan_gpu(p, 0)->pci_bus_id, "0000:1a:00.0");
	herd_plan_free(p);
}

static void test_alloc_plan_several_nodes_pack_spread_and_fixed(void)
{
	herd_cluster *c = multi_node("dgx-h100.json", "dgx-h100", "dgx", 2);
	const herd_node *a = test_node(c, 0);
	herd_alloc_gpu_status *s = free_states(a);
	herd_alloc_request req = request(16);
	char buf[HERD_NODE_LINK_CODE_LEN];
	herd_link l;
	herd_plan *p = NULL;

	req.gpus_per_node = 8;
	p = plan_of(c, &req, NULL, 0);
	CHECK_INT(herd_plan_node_count(p), 2);
	CHECK_STR(test_plan_rank(p, 8)->hostname, "dgx-b");
	CHECK_INT(test_plan_rank(p, 8)->node_rank, 1);
	CHECK_INT(test_plan_rank(p, 8)->local_rank, 0);
	CHECK_STR(herd_plan_link_code(p, 0, 8, buf), "NET");
	CHECK_STR(herd_plan_link_code(p, 8, 9, buf), "NV18");
	CHECK_ERR(herd_plan_link(p, 0, 8, &l), HERD_ENOTFOUND, "different nodes (dgx-a, dgx-b)");
	herd_plan_free(p);
	/* Pack: a whole node and half of the other. */
	req.gpus = 12;
	req.gpus_per_node = 0;
	p = plan_of(c, &req, NULL, 0);
	CHECK_STR(plan_gpus(p), "dgx-a:0,dgx-a:1,dgx-a:2,dgx-a:3,dgx-a:4,dgx-a:5,dgx-a:6,dgx-a:7,"
				"dgx-b:0,dgx-b:1,dgx-b:2,dgx-b:3");
	herd_plan_free(p);
	/* Pack: 4 fit on one node; with dgx-a fragmented, that is dgx-b. */
	req.gpus = 4;
	for (size_t i = 0; i < 6; i++)
		hold_state(s, i, "other");
	p = plan_of(c, &req, s, a->ngpus);
	CHECK_STR(plan_gpus(p), "0,1,2,3");
	CHECK_STR(test_plan_gpu(p, 0)->hostname, "dgx-b");
	herd_plan_free(p);
	/* Best fit: 2 go where 2 are left. */
	req.gpus = 2;
	p = plan_of(c, &req, s, a->ngpus);
	CHECK_STR(plan_gpus(p), "6,7");
	CHECK_STR(test_plan_gpu(p, 0)->hostname, "dgx-a");
	herd_plan_free(p);
	/* Spread: one node each, as far as it goes. */
	req.gpus = 4;
	req.policy = HERD_ALLOC_SPREAD;
	p = plan_of(c, &req, s, a->ngpus);
	CHECK_STR(plan_gpus(p), "dgx-a:6,dgx-a:7,dgx-b:0,dgx-b:4");
	herd_plan_free(p);
	/* Fixed: 2 nodes with 4 each cannot be had. */
	req.policy = HERD_ALLOC_PACK;
	req.gpus = 8;
	req.nodes = 2;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, a->ngpus), HERD_ENORESOURCE,
		  "need 2 nodes with 4 GPUs each; node dgx-b has 8 free of 8, node dgx-a has 2 "
		  "free of 8");
	free(s);
	herd_cluster_free(c);
}

static void test_alloc_plan_reason_names_the_one_node_with_room(void)
{
	herd_cluster *c = multi_node("dgx-h100.json", "dgx-h100", "gpu", 3);
	herd_alloc_gpu_status *s = calloc(24, sizeof(*s));
	herd_alloc_request req = request(4);
	herd_plan *p = NULL;

	for (size_t n = 0; n < 3; n++) {
		const herd_node *node = test_node(c, n);

		for (size_t g = 0; g < 8; g++) {
			herd_alloc_gpu_status *x = &s[n * 8 + g];

			snprintf(x->uuid, sizeof(x->uuid), "%s", node->gpus[g].uuid);
			x->processes = -1;
			x->free_memory_bytes = -1;
			/* gpu-b keeps GPUs 6 and 7; everything else is held. */
			if (!(n == 1 && g >= 6))
				x->state = HERD_LEASE_EXCLUSIVE;
		}
	}
	req.link = HERD_ALLOC_LINK_NVLINK;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, s, 24), HERD_ENORESOURCE,
		  "need 4 NVLink-connected GPUs on one node; node gpu-b has 2 free of 8, the "
		  "others 0");
	free(s);
	herd_cluster_free(c);
}

static void test_alloc_plan_bad_requests_are_einval(void)
{
	herd_cluster *c = load_fixture("dgx-h100.json");
	herd_cluster *none = load_fixture("cpu-only.json");
	herd_alloc_request req = request(2);
	herd_plan *p = (herd_plan *)&req; /* must come back NULL */

	req.gpus = -1;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "gpus is -1; expected 0 to 65536");
	CHECK(p == NULL);
	req.gpus = 1000000;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL, "gpus is 1000000");
	req.gpus = 0;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL, "ask for at least one GPU");
	req.gpus = 8;
	req.gpus_per_node = 3;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "gpus (8) is not a multiple of gpus_per_node (3)");
	req.gpus_per_node = -4;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL, "gpus_per_node is -4");
	req.gpus_per_node = 4;
	req.nodes = 3;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "gpus (8) is not gpus_per_node (4) x nodes (3)");
	req.nodes = 0;
	req.link = HERD_ALLOC_LINK_SAME_NODE;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "link 'same-node' asks for one node");
	req.link = (herd_alloc_link)42;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL, "link is 42");
	req.link = HERD_ALLOC_LINK_ANY;
	req.gpus_per_node = 0;
	req.gpus_per_rank = 3;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "gpus_per_rank (3) must divide");
	req.gpus_per_rank = 0;
	req.version = 0;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL, "HERD_ALLOC_REQUEST_INIT");
	req.version = HERD_ALLOC_REQUEST_VERSION;
	req.nexclude = 1;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 0), HERD_EINVAL,
		  "nexclude is 1 but exclude is NULL");
	req.nexclude = 0;
	CHECK_ERR(herd_alloc_plan(&p, c, &req, NULL, 3), HERD_EINVAL, "status is NULL");
	CHECK_ERR(herd_alloc_plan(&p, c, NULL, NULL, 0), HERD_EINVAL, "request is NULL");
	CHECK_ERR(herd_alloc_plan(&p, NULL, &req, NULL, 0), HERD_EINVAL, "cluster is NULL");
	CHECK_ERR(herd_alloc_plan(NULL, c, &req, NULL, 0), HERD_EINVAL, "out is NULL");
	/* No GPU at all: says why, as discovery did. */
	req.gpus = 1;
	CHECK_ERR(herd_alloc_plan(&p, none, &req, NULL, 0), HERD_ENORESOURCE,
		  "node cpu-only has 0 free of 0 (no GPU: NVIDIA driver not found)");
	CHECK(p == NULL);
	herd_cluster_free(none);
	herd_cluster_free(c);
}

static void test_alloc_plan_names_and_accessors(void)
{
	herd_alloc_link link = HERD_ALLOC_LINK_ANY;
	const herd_plan_rank_info *rank = NULL;
	const herd_plan_gpu_info *gpu = NULL;
	const char *warning = NULL;
	char buf[HERD_NODE_LINK_CODE_LEN];

	CHECK_OK(herd_alloc_link_parse("same-numa", &link));
	CHECK_INT(link, HERD_ALLOC_LINK_SAME_NUMA);
	CHECK_STR(herd_alloc_link_name(HERD_ALLOC_LINK_NVLINK), "nvlink");
	CHECK_ERR(herd_alloc_link_parse("nvlnk", &link), HERD_EINVAL,
		  "unknown link demand 'nvlnk': expected any, same-node, nvlink or same-numa");
	CHECK_STR(herd_lease_state_name(HERD_LEASE_SHARED), "shared");
	CHECK_INT(herd_plan_rank_count(NULL), 0);
	CHECK_ERR(herd_plan_rank(NULL, 0, &rank), HERD_EINVAL,
		  "herd_plan_rank: plan and rank must not be NULL");
	CHECK(rank == NULL);
	CHECK_ERR(herd_plan_gpu(NULL, 0, &gpu), HERD_EINVAL, "herd_plan_gpu: plan and GPU");
	CHECK(gpu == NULL);
	CHECK_ERR(herd_plan_warning(NULL, 0, &warning), HERD_EINVAL, "herd_plan_warning");
	CHECK(warning == NULL);
	CHECK_STR(herd_plan_explain(NULL), "");
	CHECK_STR(herd_plan_link_code(NULL, 0, 0, buf), "?");
	CHECK_INT(herd_plan_held(NULL), 0);
	herd_plan_release(NULL);
	herd_plan_free(NULL);
}

/* HERD_INVENTORY stands for this node's hardware when no file is given. */
static void test_alloc_discover_honours_herd_inventory(void)
{
	char path[4096];
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *c = NULL;
	size_t index = 99;

	fixture_path("dgx-h100.json", path, sizeof(path));
	setenv("HERD_INVENTORY", path, 1);
	CHECK_OK(herd_cluster_discover(&c, NULL));
	CHECK(c != NULL && strcmp(test_node(c, 0)->hostname, "dgx-h100") == 0);
	CHECK_OK(herd_alloc_this_node(c, &index));
	CHECK_INT(index, 0);
	herd_cluster_free(c);
	/* The option wins over the variable. */
	fixture_path("pcie-4gpu.json", path, sizeof(path));
	opts.inventory = path;
	CHECK_OK(herd_cluster_discover(&c, &opts));
	CHECK(c != NULL && strcmp(test_node(c, 0)->hostname, "pcie-4gpu") == 0);
	herd_cluster_free(c);
	setenv("HERD_INVENTORY", "/nonexistent/inventory.json", 1);
	CHECK_ERR(herd_cluster_discover(&c, NULL), HERD_ENOTFOUND, "/nonexistent/inventory.json");
	unsetenv("HERD_INVENTORY");
	/* Several nodes, none of them this host. */
	c = multi_node("dgx-h100.json", "dgx-h100", "far", 2);
	CHECK_ERR(herd_alloc_this_node(c, &index), HERD_ENOTFOUND,
		  "none of the inventory's 2 nodes is this host");
	herd_cluster_free(c);
}

int main(void)
{
	unsetenv("HERD_INVENTORY");
	TEST_RUN(test_alloc_plan_pcie_same_numa_picks_one_socket_under_one_switch);
	TEST_RUN(test_alloc_plan_pcie_prefers_switch_then_bridge_then_socket);
	TEST_RUN(test_alloc_plan_pcie_fragmented_same_numa_says_why_not);
	TEST_RUN(test_alloc_plan_dgx_all_eight_are_nv18);
	TEST_RUN(test_alloc_plan_dgx_nine_on_one_node_fails_with_reason);
	TEST_RUN(test_alloc_plan_dgx_fragmented_keeps_a_socket_whole);
	TEST_RUN(test_alloc_plan_spread_uses_both_sockets);
	TEST_RUN(test_alloc_plan_exclude_include_and_names);
	TEST_RUN(test_alloc_plan_memory_processes_shared_and_unknown);
	TEST_RUN(test_alloc_plan_near_nic_prefers_the_gpu_beside_the_nic);
	TEST_RUN(test_alloc_plan_ranks_with_two_gpus_and_their_environment);
	TEST_RUN(test_alloc_plan_several_nodes_pack_spread_and_fixed);
	TEST_RUN(test_alloc_plan_reason_names_the_one_node_with_room);
	TEST_RUN(test_alloc_plan_bad_requests_are_einval);
	TEST_RUN(test_alloc_plan_names_and_accessors);
	TEST_RUN(test_alloc_discover_honours_herd_inventory);
	return TEST_DONE();
}
