/*
 * Discovery of the local node (herd_cluster_discover, herd__node_probe) and
 * the pure helpers behind it.  The probe tests assert what is true on any
 * Linux machine, GPU or not; the PCI walk is checked against a synthetic
 * hwloc topology with known switches.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hwloc.h>

#include "topo/probe.h"
#include "test.h"

static herd_cluster *discover_here(void)
{
	herd_cluster *cluster = NULL;

	CHECK_OK(herd_cluster_discover(&cluster, NULL));
	CHECK(cluster != NULL);
	CHECK_INT(herd_cluster_node_count(cluster), 1);
	return cluster;
}

static uint64_t meminfo_total_bytes(void)
{
	unsigned long long kib = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib * 1024;
}

/* Number of CPUs in a Linux CPU list ("0-15,32-47" -> 32); -1 if malformed. */
static long cpulist_count(const char *list)
{
	long count = 0;

	while (*list != '\0') {
		char *end;
		long lo = strtol(list, &end, 10), hi = lo;

		if (end == list)
			return -1;
		if (*end == '-') {
			list = end + 1;
			hi = strtol(list, &end, 10);
			if (end == list || hi < lo)
				return -1;
		}
		count += hi - lo + 1;
		list = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return -1;
	}
	return count;
}

static void test_discover_probes_host_cpus_and_memory(void)
{
	herd_cluster *cluster = discover_here();
	const herd_node *node = test_node(cluster, 0);
	char host[256] = "";

	CHECK(node != NULL);
	if (node == NULL)
		goto out;
	CHECK_INT(gethostname(host, sizeof(host)), 0);
	CHECK_STR(node->hostname, host);
	CHECK(node->cpu_model != NULL);
	CHECK_INT(node->threads, sysconf(_SC_NPROCESSORS_ONLN));
	CHECK(node->cores >= 1 && node->cores <= node->threads);
	CHECK(node->packages >= 1 && node->packages <= node->cores);
	CHECK_INT(node->memory_bytes, meminfo_total_bytes());
	CHECK(node->memory_available_bytes > 0);
	CHECK(node->memory_available_bytes <= node->memory_bytes);
out:
	herd_cluster_free(cluster);
}

static void test_discover_numa_nodes_cover_every_cpu(void)
{
	herd_cluster *cluster = discover_here();
	const herd_node *node = test_node(cluster, 0);
	long cpus = 0;
	size_t with_cpus = 0;

	if (node == NULL)
		goto out;
	CHECK(node->nnuma >= 1);
	for (size_t i = 0; i < node->nnuma; i++) {
		long n;

		CHECK(node->numa[i].cpus != NULL);
		if (node->numa[i].cpus == NULL)
			continue;
		n = cpulist_count(node->numa[i].cpus);
		CHECK(n >= 0);
		if (n > 0) {
			with_cpus++;
			cpus += n;
		}
		CHECK(node->numa[i].os_index >= 0);
	}
	CHECK(with_cpus >= 1);
	CHECK_INT(cpus, node->threads);
out:
	herd_cluster_free(cluster);
}

static void test_discover_lists_loopback_with_its_address(void)
{
	herd_cluster *cluster = discover_here();
	const herd_node *node = test_node(cluster, 0);
	const herd_netdev *lo = NULL;
	bool has_127 = false;

	if (node == NULL)
		goto out;
	for (size_t i = 0; i < node->nnetdevs; i++)
		if (strcmp(node->netdevs[i].name, "lo") == 0)
			lo = &node->netdevs[i];
	CHECK(lo != NULL);
	if (lo == NULL)
		goto out;
	CHECK(lo->state[0] != '\0');
	CHECK(lo->mtu > 0);
	for (size_t i = 0; i < lo->naddrs; i++)
		if (strcmp(lo->addrs[i], "127.0.0.1/8") == 0)
			has_127 = true;
	CHECK(has_127);
	/* lo is virtual: no PCI function, no NUMA node. */
	CHECK_STR(lo->pci.bus_id, "");
	CHECK_INT(lo->pci.numa_node, -1);
out:
	herd_cluster_free(cluster);
}

static void test_discover_netdevs_on_pci_name_a_real_function(void)
{
	herd_cluster *cluster = discover_here();
	const herd_node *node = test_node(cluster, 0);

	for (size_t i = 0; node != NULL && i < node->nnetdevs; i++) {
		const herd_pci_loc *pci = &node->netdevs[i].pci;
		char path[128], norm[HERD_PCI_ID_LEN];

		if (pci->bus_id[0] == '\0')
			continue;
		CHECK(herd__topo_pci_normalize(pci->bus_id, norm));
		CHECK_STR(pci->bus_id, norm);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", pci->bus_id);
		CHECK_INT(access(path, F_OK), 0);
		CHECK(pci->host_bridge[0] != '\0');
	}
	herd_cluster_free(cluster);
}

static void test_discover_says_why_gpus_are_absent(void)
{
	herd_cluster *cluster = discover_here();
	const herd_node *node = test_node(cluster, 0);

	if (node == NULL)
		goto out;
	if (node->ngpus == 0) {
		CHECK(node->gpu_note != NULL && node->gpu_note[0] != '\0');
		CHECK(node->gpu_note != NULL && strncmp(node->gpu_note, "no GPU: ", 8) == 0);
		CHECK(node->gpus == NULL);
	}
	for (size_t i = 0; i < node->ngpus; i++) {
		char norm[HERD_PCI_ID_LEN];

		CHECK(herd__topo_pci_normalize(node->gpus[i].pci.bus_id, norm));
		CHECK_STR(node->gpus[i].pci.bus_id, norm);
		CHECK(strncmp(node->gpus[i].uuid, "GPU-", 4) == 0);
		CHECK(node->gpus[i].memory_bytes > 0);
		if (i > 0)
			CHECK(herd__topo_pci_compare(node->gpus[i - 1].pci.bus_id,
						     node->gpus[i].pci.bus_id) < 0);
	}
	printf("      gpus: %zu, gpu_note: %s\n", node->ngpus,
	       node->gpu_note != NULL ? node->gpu_note : "(none)");
out:
	herd_cluster_free(cluster);
}

static void test_discover_says_why_rdma_is_absent(void)
{
	herd_cluster *cluster = discover_here();
	const herd_node *node = test_node(cluster, 0);

	if (node == NULL)
		goto out;
	if (node->nrdma == 0)
		CHECK(node->rdma_note != NULL && node->rdma_note[0] != '\0');
	for (size_t i = 0; i < node->nrdma; i++)
		for (size_t p = 0; p < node->rdma[i].nports; p++)
			CHECK(node->rdma[i].ports[p].port >= 1);
	printf("      rdma: %zu, rdma_note: %s\n", node->nrdma,
	       node->rdma_note != NULL ? node->rdma_note : "(none)");
out:
	herd_cluster_free(cluster);
}

static void test_discover_missing_inventory_fails_enotfound_naming_it(void)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *cluster = (herd_cluster *)&opts; /* must be reset to NULL */

	opts.inventory = "/nonexistent/herd-inventory.json";
	CHECK_ERR(herd_cluster_discover(&cluster, &opts), HERD_ENOTFOUND,
		  "/nonexistent/herd-inventory.json");
	CHECK(cluster == NULL);
}

static void test_discover_rejects_misuse(void)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	herd_cluster *cluster = NULL;

	CHECK_ERR(herd_cluster_discover(NULL, NULL), HERD_EINVAL, "out is NULL");
	opts.version = 99;
	CHECK_ERR(herd_cluster_discover(&cluster, &opts), HERD_EINVAL,
		  "herd_cluster_discover_opts.version is 99");
	CHECK(cluster == NULL);
}

static void test_pci_normalize_gives_lower_case_four_digit_domain(void)
{
	char out[HERD_PCI_ID_LEN];

	CHECK(herd__topo_pci_normalize("00000000:18:00.0", out));
	CHECK_STR(out, "0000:18:00.0");
	CHECK(herd__topo_pci_normalize("0000:3B:00.0", out));
	CHECK_STR(out, "0000:3b:00.0");
	CHECK(herd__topo_pci_normalize("00000001:C1:1F.7", out));
	CHECK_STR(out, "0001:c1:1f.7");
	CHECK(herd__topo_pci_normalize("18:00.1", out));
	CHECK_STR(out, "0000:18:00.1");
	/* VMD domains have five digits; they are kept whole. */
	CHECK(herd__topo_pci_normalize("10000:e0:00.0", out));
	CHECK_STR(out, "10000:e0:00.0");

	CHECK(!herd__topo_pci_normalize("", out));
	CHECK_STR(out, "");
	CHECK(!herd__topo_pci_normalize(NULL, out));
	CHECK(!herd__topo_pci_normalize("0000:18:00", out));
	CHECK(!herd__topo_pci_normalize("0000:18:20.0", out));  /* device > 0x1f */
	CHECK(!herd__topo_pci_normalize("0000:18:00.8", out));  /* function > 7 */
	CHECK(!herd__topo_pci_normalize("0000:18:00.0x", out));
	CHECK(!herd__topo_pci_normalize("0000:180:00.0", out));
	CHECK(!herd__topo_pci_normalize("pci0000:00", out));
	CHECK(!herd__topo_pci_normalize("100000000:00:00.0", out));
}

static void test_pci_compare_orders_numerically(void)
{
	CHECK(herd__topo_pci_compare("0000:18:00.0", "0000:3b:00.0") < 0);
	CHECK(herd__topo_pci_compare("0000:3b:00.0", "0001:00:00.0") < 0);
	CHECK(herd__topo_pci_compare("ffff:00:00.0", "10000:00:00.0") < 0);
	CHECK(herd__topo_pci_compare("0000:18:00.1", "0000:18:00.0") > 0);
	CHECK(herd__topo_pci_compare("00000000:18:00.0", "0000:18:00.0") == 0);
	CHECK(herd__topo_pci_compare("0000:18:00.0", "junk") < 0);
}

static void test_meminfo_parse_reads_total_and_available(void)
{
	uint64_t total = 1, avail = 1;

	CHECK(herd__topo_meminfo_parse("MemTotal:       24684092 kB\n"
				       "MemFree:        24124360 kB\n"
				       "MemAvailable:   24313196 kB\n"
				       "Buffers:            2 kB\n",
				       &total, &avail));
	CHECK_INT(total, 24684092ull * 1024);
	CHECK_INT(avail, 24313196ull * 1024);
	/* Kernels before 3.14 have no MemAvailable. */
	CHECK(herd__topo_meminfo_parse("MemTotal: 1000 kB\nMemFree: 10 kB\n", &total, &avail));
	CHECK_INT(total, 1024000);
	CHECK_INT(avail, 0);
	CHECK(!herd__topo_meminfo_parse("MemFree: 10 kB\n", &total, &avail));
	CHECK(!herd__topo_meminfo_parse("", &total, &avail));
	CHECK(!herd__topo_meminfo_parse("MemTotalX: 5 kB\n", &total, &avail));
}

static void test_cpulist_format_prints_ranges_like_linux(void)
{
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	char *list = NULL;

	CHECK_OK(herd__topo_cpulist_format(set, &list));
	CHECK_STR(list, "");
	free(list);
	hwloc_bitmap_set_range(set, 0, 15);
	hwloc_bitmap_set_range(set, 32, 47);
	CHECK_OK(herd__topo_cpulist_format(set, &list));
	CHECK_STR(list, "0-15,32-47");
	free(list);
	hwloc_bitmap_only(set, 3);
	CHECK_OK(herd__topo_cpulist_format(set, &list));
	CHECK_STR(list, "3");
	free(list);
	hwloc_bitmap_free(set);
}

static void test_format_addr_writes_address_and_prefix(void)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET }, m4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 }, m6 = { .sin6_family = AF_INET6 };
	struct sockaddr other = { .sa_family = AF_UNIX };
	char *s = NULL;

	inet_pton(AF_INET, "10.0.0.5", &a4.sin_addr);
	inet_pton(AF_INET, "255.255.255.0", &m4.sin_addr);
	CHECK_INT(herd__topo_prefix_len((struct sockaddr *)&m4), 24);
	CHECK_OK(herd__topo_format_addr((struct sockaddr *)&a4, (struct sockaddr *)&m4, &s));
	CHECK_STR(s, "10.0.0.5/24");
	free(s);
	/* A point-to-point address may come without a mask. */
	CHECK_OK(herd__topo_format_addr((struct sockaddr *)&a4, NULL, &s));
	CHECK_STR(s, "10.0.0.5/32");
	free(s);

	inet_pton(AF_INET6, "fe80::1", &a6.sin6_addr);
	inet_pton(AF_INET6, "ffff:ffff:ffff:ffff::", &m6.sin6_addr);
	CHECK_INT(herd__topo_prefix_len((struct sockaddr *)&m6), 64);
	CHECK_OK(herd__topo_format_addr((struct sockaddr *)&a6, (struct sockaddr *)&m6, &s));
	CHECK_STR(s, "fe80::1/64");
	free(s);

	CHECK_INT(herd__topo_prefix_len(&other), -1);
	CHECK_OK(herd__topo_format_addr(&other, NULL, &s));
	CHECK(s == NULL);
}

static void test_ib_rate_state_and_gid_formatting(void)
{
	static const uint8_t gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
					 0x02, 0x02, 0xc9, 0xff, 0xfe, 0x00, 0x00, 0x01 };
	char text[40];

	CHECK_INT(herd__topo_ib_rate_gbps(2, 32), 100);  /* 4x EDR */
	CHECK_INT(herd__topo_ib_rate_gbps(2, 64), 200);  /* 4x HDR */
	CHECK_INT(herd__topo_ib_rate_gbps(2, 128), 400); /* 4x NDR */
	CHECK_INT(herd__topo_ib_rate_gbps(2, 16), 56);   /* 4x FDR */
	CHECK_INT(herd__topo_ib_rate_gbps(2, 4), 40);    /* 4x QDR */
	CHECK_INT(herd__topo_ib_rate_gbps(16, 64), 100); /* 2x HDR */
	CHECK_INT(herd__topo_ib_rate_gbps(8, 4), 120);   /* 12x QDR */
	CHECK_INT(herd__topo_ib_rate_gbps(1, 1), 2);     /* 1x SDR, 2.5 rounded down */
	CHECK_INT(herd__topo_ib_rate_gbps(3, 32), 0);
	CHECK_INT(herd__topo_ib_rate_gbps(2, 0), 0);

	CHECK_STR(herd__topo_ib_state_str(4), "active");
	CHECK_STR(herd__topo_ib_state_str(1), "down");
	CHECK_STR(herd__topo_ib_state_str(2), "init");
	CHECK_STR(herd__topo_ib_state_str(42), "unknown");
	CHECK_STR(herd__topo_ib_state_str(-1), "unknown");

	herd__topo_gid_format(gid, text);
	CHECK_STR(text, "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
}

static void test_notes_join_sentences_with_semicolons(void)
{
	char *note = NULL;
	char why[24] = "";

	CHECK_OK(herd__topo_note_append(&note, "first %d", 1));
	CHECK_STR(note, "first 1");
	CHECK_OK(herd__topo_note_append(&note, "second"));
	CHECK_STR(note, "first 1; second");
	free(note);

	herd__topo_why_append(why, sizeof(why), "a");
	herd__topo_why_append(why, sizeof(why), "b%s", "c");
	CHECK_STR(why, "a; bc");
	herd__topo_why_append(why, sizeof(why), "a sentence far too long to fit");
	CHECK_INT(strlen(why), sizeof(why) - 1);
	CHECK(strncmp(why, "a; bc; a sentence", 17) == 0);
}

static void test_sysfs_helpers_read_lines_and_find_pci_functions(void)
{
	char line[256], host[256] = "", bus[HERD_PCI_ID_LEN] = "x";

	CHECK_INT(gethostname(host, sizeof(host)), 0);
	CHECK(herd__topo_read_line("/proc/sys/kernel/hostname", line, sizeof(line)));
	CHECK_STR(line, host);
	CHECK(!herd__topo_read_line("/nonexistent/attr", line, sizeof(line)));
	CHECK_STR(line, "");
	/* Virtual devices have no device link; a missing path is not one. */
	CHECK(!herd__topo_sysfs_pci_function("/sys/class/net/lo/device", bus));
	CHECK_STR(bus, "");
	CHECK(!herd__topo_sysfs_pci_function("/nonexistent", bus));
}

/*
 * Two packages, each with a NUMA node and a host bridge.  Under host
 * bridge 0000:00: root port 00:01.0 -> switch (upstream port 01:00.0) ->
 * downstream port 02:00.0 -> GPU 03:00.0, and downstream port 02:01.0 ->
 * a second switch (upstream 04:00.0, downstream 05:00.0) -> GPU 06:00.0;
 * an integrated device 00:05.0 on the root bus; root port 00:02.0 -> NIC
 * 10:00.0.  Under host bridge 0000:80: root port 80:01.0 -> GPU 81:00.0.
 */
static const char two_socket_xml[] =
	"<topology version=\"2.0\">\n"
	"  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000000f\" complete_cpuset=\"0x0000000f\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\">\n"
	"    <object type=\"Package\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
	"      <info name=\"CPUModel\" value=\"Test CPU\"/>\n"
	"      <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" local_memory=\"1073741824\"/>\n"
	"      <object type=\"Core\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
	"        <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
	"      </object>\n"
	"      <object type=\"Core\" os_index=\"1\" cpuset=\"0x00000002\" complete_cpuset=\"0x00000002\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\">\n"
	"        <object type=\"PU\" os_index=\"1\" cpuset=\"0x00000002\" complete_cpuset=\"0x00000002\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
	"      </object>\n"
	"      <object type=\"Bridge\" bridge_type=\"0-1\" bridge_pci=\"0000:[00-1f]\">\n"
	"        <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[01-06]\" pci_busid=\"0000:00:01.0\" pci_type=\"0604 [8086:0000] [0000:0000] 00\">\n"
	"          <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[02-06]\" pci_busid=\"0000:01:00.0\" pci_type=\"0604 [1000:c030] [0000:0000] 00\">\n"
	"            <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[03-03]\" pci_busid=\"0000:02:00.0\" pci_type=\"0604 [1000:c030] [0000:0000] 00\">\n"
	"              <object type=\"PCIDev\" pci_busid=\"0000:03:00.0\" pci_type=\"0302 [10de:2330] [10de:16c1] a1\"/>\n"
	"            </object>\n"
	"            <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[04-06]\" pci_busid=\"0000:02:01.0\" pci_type=\"0604 [1000:c030] [0000:0000] 00\">\n"
	"              <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[05-06]\" pci_busid=\"0000:04:00.0\" pci_type=\"0604 [1000:c030] [0000:0000] 00\">\n"
	"                <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[06-06]\" pci_busid=\"0000:05:00.0\" pci_type=\"0604 [1000:c030] [0000:0000] 00\">\n"
	"                  <object type=\"PCIDev\" pci_busid=\"0000:06:00.0\" pci_type=\"0302 [10de:2330] [10de:16c1] a1\"/>\n"
	"                </object>\n"
	"              </object>\n"
	"            </object>\n"
	"          </object>\n"
	"        </object>\n"
	"        <object type=\"PCIDev\" pci_busid=\"0000:00:05.0\" pci_type=\"0880 [8086:09a2] [0000:0000] 04\"/>\n"
	"        <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[10-10]\" pci_busid=\"0000:00:02.0\" pci_type=\"0604 [8086:0000] [0000:0000] 00\">\n"
	"          <object type=\"PCIDev\" pci_busid=\"0000:10:00.0\" pci_type=\"0207 [15b3:1021] [15b3:0041] 00\"/>\n"
	"        </object>\n"
	"      </object>\n"
	"    </object>\n"
	"    <object type=\"Package\" os_index=\"1\" cpuset=\"0x0000000c\" complete_cpuset=\"0x0000000c\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
	"      <info name=\"CPUModel\" value=\"Test CPU\"/>\n"
	"      <object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x0000000c\" complete_cpuset=\"0x0000000c\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" local_memory=\"2147483648\"/>\n"
	"      <object type=\"Core\" os_index=\"2\" cpuset=\"0x00000004\" complete_cpuset=\"0x00000004\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
	"        <object type=\"PU\" os_index=\"2\" cpuset=\"0x00000004\" complete_cpuset=\"0x00000004\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\"/>\n"
	"      </object>\n"
	"      <object type=\"Core\" os_index=\"3\" cpuset=\"0x00000008\" complete_cpuset=\"0x00000008\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\">\n"
	"        <object type=\"PU\" os_index=\"3\" cpuset=\"0x00000008\" complete_cpuset=\"0x00000008\" nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\"/>\n"
	"      </object>\n"
	"      <object type=\"Bridge\" bridge_type=\"0-1\" bridge_pci=\"0000:[80-8f]\">\n"
	"        <object type=\"Bridge\" bridge_type=\"1-1\" bridge_pci=\"0000:[81-81]\" pci_busid=\"0000:80:01.0\" pci_type=\"0604 [8086:0000] [0000:0000] 00\">\n"
	"          <object type=\"PCIDev\" pci_busid=\"0000:81:00.0\" pci_type=\"0302 [10de:2330] [10de:16c1] a1\"/>\n"
	"        </object>\n"
	"      </object>\n"
	"    </object>\n"
	"  </object>\n"
	"</topology>\n";

static struct hwloc_topology *load_two_socket(void)
{
	struct hwloc_topology *topo = NULL;

	CHECK_OK(herd__topo_hwloc_open(&topo, two_socket_xml));
	return topo;
}

static void test_pci_locate_names_switches_by_upstream_port(void)
{
	struct hwloc_topology *topo = load_two_socket();
	herd_pci_loc loc;

	if (topo == NULL)
		return;
	herd__topo_pci_locate(topo, "0000:03:00.0", &loc);
	CHECK_STR(loc.bus_id, "0000:03:00.0");
	CHECK_STR(loc.host_bridge, "0000:00");
	CHECK_INT(loc.numa_node, 0);
	CHECK_INT(loc.nswitches, 1);
	CHECK_STR(loc.switches[0], "0000:01:00.0");

	/* NVML's spelling of the same kind of id finds the device too. */
	herd__topo_pci_locate(topo, "00000000:06:00.0", &loc);
	CHECK_STR(loc.bus_id, "0000:06:00.0");
	CHECK_STR(loc.host_bridge, "0000:00");
	CHECK_INT(loc.nswitches, 2);
	CHECK_STR(loc.switches[0], "0000:01:00.0");
	CHECK_STR(loc.switches[1], "0000:04:00.0");

	/* A root port is not a switch, nor is the root bus. */
	herd__topo_pci_locate(topo, "0000:10:00.0", &loc);
	CHECK_STR(loc.host_bridge, "0000:00");
	CHECK_INT(loc.nswitches, 0);
	herd__topo_pci_locate(topo, "0000:00:05.0", &loc);
	CHECK_STR(loc.host_bridge, "0000:00");
	CHECK_INT(loc.nswitches, 0);
	CHECK_INT(loc.numa_node, 0);

	herd__topo_pci_locate(topo, "0000:81:00.0", &loc);
	CHECK_STR(loc.host_bridge, "0000:80");
	CHECK_INT(loc.numa_node, 1);
	CHECK_INT(loc.nswitches, 0);
	herd__topo_hwloc_close(topo);
}

static void test_pci_locate_keeps_unknown_functions_unplaced(void)
{
	struct hwloc_topology *topo = load_two_socket();
	herd_pci_loc loc;

	if (topo == NULL)
		return;
	herd__topo_pci_locate(topo, "0000:99:00.0", &loc);
	CHECK_STR(loc.bus_id, "0000:99:00.0");
	CHECK_STR(loc.host_bridge, "");
	CHECK_INT(loc.nswitches, 0);
	CHECK_INT(loc.numa_node, -1);
	herd__topo_pci_locate(topo, "not a bus id", &loc);
	CHECK_STR(loc.bus_id, "");
	CHECK_INT(loc.numa_node, -1);
	herd__topo_hwloc_close(topo);
}

static void test_cpu_and_numa_probes_read_the_topology(void)
{
	struct hwloc_topology *topo = load_two_socket();
	herd_node node;

	if (topo == NULL)
		return;
	memset(&node, 0, sizeof(node));
	CHECK_OK(herd__topo_probe_cpus(topo, &node));
	CHECK_OK(herd__topo_probe_numa(topo, &node));
	CHECK_STR(node.cpu_model, "Test CPU");
	CHECK_INT(node.packages, 2);
	CHECK_INT(node.cores, 4);
	CHECK_INT(node.threads, 4);
	CHECK_INT(node.nnuma, 2);
	if (node.nnuma == 2) {
		CHECK_INT(node.numa[0].os_index, 0);
		CHECK_STR(node.numa[0].cpus, "0-1");
		CHECK_INT(node.numa[0].memory_bytes, 1ull << 30);
		CHECK_INT(node.numa[1].os_index, 1);
		CHECK_STR(node.numa[1].cpus, "2-3");
		CHECK_INT(node.numa[1].memory_bytes, 2ull << 30);
	}
	CHECK_INT(herd__topo_hwloc_memory(topo), 3ull << 30);
	herd__node_clear(&node);
	herd__topo_hwloc_close(topo);
}

int main(void)
{
	TEST_RUN(test_discover_probes_host_cpus_and_memory);
	TEST_RUN(test_discover_numa_nodes_cover_every_cpu);
	TEST_RUN(test_discover_lists_loopback_with_its_address);
	TEST_RUN(test_discover_netdevs_on_pci_name_a_real_function);
	TEST_RUN(test_discover_says_why_gpus_are_absent);
	TEST_RUN(test_discover_says_why_rdma_is_absent);
	TEST_RUN(test_discover_missing_inventory_fails_enotfound_naming_it);
	TEST_RUN(test_discover_rejects_misuse);
	TEST_RUN(test_pci_normalize_gives_lower_case_four_digit_domain);
	TEST_RUN(test_pci_compare_orders_numerically);
	TEST_RUN(test_meminfo_parse_reads_total_and_available);
	TEST_RUN(test_cpulist_format_prints_ranges_like_linux);
	TEST_RUN(test_format_addr_writes_address_and_prefix);
	TEST_RUN(test_ib_rate_state_and_gid_formatting);
	TEST_RUN(test_notes_join_sentences_with_semicolons);
	TEST_RUN(test_sysfs_helpers_read_lines_and_find_pci_functions);
	TEST_RUN(test_pci_locate_names_switches_by_upstream_port);
	TEST_RUN(test_pci_locate_keeps_unknown_functions_unplaced);
	TEST_RUN(test_cpu_and_numa_probes_read_the_topology);
	return TEST_DONE();
}
