/*
 * shell/cmd_discover.c - `herd discover`: what is in this node (or in an
 * inventory file), as a readable summary, as JSON, or saved to a file.
 *
 * The summary gives, per node: host, CPU model and counts, NUMA nodes,
 * memory, GPUs (or why there are none), NICs, RDMA devices (or why there are
 * none), and when there are GPUs the topology matrix in the layout of
 * `nvidia-smi topo -m`.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "herd.h"
#include "herd/sys/agent.h"
#include "shell.h"

static const char discover_usage[] =
	"usage: herd discover [--json] [--save FILE [--format json|msgpack]]\n"
	"                     [--inventory FILE | --hosts EXPR | --hostfile FILE |\n"
	"                      --slurm] [--timeout SEC]\n"
	"  --json             print the inventory as JSON instead of a summary\n"
	"  --save FILE        also write the inventory to FILE, in the format its\n"
	"                     name says: *.json JSON, *.msgpack or *.mpk msgpack\n"
	"  --format F         the format of --save whatever its name: json, msgpack\n"
	"  --inventory FILE   read this inventory file (JSON or msgpack) instead\n"
	"                     of probing this node\n"
	"  --hosts EXPR       probe these nodes over ssh (a hostlist: node[01-04])\n"
	"  --hostfile FILE    probe the hosts of an Open MPI / DeepSpeed hostfile\n"
	"  --slurm            probe the nodes of this Slurm allocation (one srun step)\n"
	"  --timeout SEC      give each node SEC seconds to answer (default 30)\n"
	"  --links            then measure every pair of nodes that answered (herd TCP:\n"
	"                     latency and bandwidth, each node with one peer at a\n"
	"                     time) and flag the pairs slow against the median\n"
	"  --links-bytes SIZE bytes each way per bandwidth exchange (default 64M)\n"
	"Many nodes: nodes of one hardware shape on one line, then warnings about\n"
	"differences that break or slow training, then the nodes that did not\n"
	"answer and why.\n"
	"Exit status:\n"
	"  0    the inventory was printed (every node answered; with --links, no\n"
	"       pair is slow)\n"
	"  1    some nodes did not answer, --save could not write, or with\n"
	"       --links a pair is slow or the check failed\n"
	"  2    a usage error, an --inventory, --hosts or --hostfile that cannot\n"
	"       be read, or no node answered\n";

static const char probe_usage[] =
	"usage: herd probe [--text | --json] [--forward HOSTS [--timeout S]] | --links BYTES\n"
	"       herd probe --watch [--period MS] [--count N] [--text | --json]\n"
	"  This node's inventory on standard output, for herd discover on other\n"
	"  nodes: msgpack, or --text (lines of base64, what herd discover --hosts\n"
	"  runs) or --json.  --forward: also those hosts' (a relay of herd discover\n"
	"  over an ssh tree).  --links BYTES: one rank of herd discover --links.\n"
	"  --watch        this node's telemetry instead: a sample every --period\n"
	"                 MS (default 1000, at least 100), each as a record: a\n"
	"                 4-byte big-endian length and the msgpack sample, or with\n"
	"                 --text base64 lines (for srun), with --json a JSON line;\n"
	"                 until stdin ends (when it is a pipe, a socket or a\n"
	"                 terminal: ssh's end), stdout breaks, SIGTERM, SIGINT or\n"
	"                 SIGHUP, or --count N records written.  A reader that falls\n"
	"                 behind loses samples (the gaps in seq); one that takes\n"
	"                 nothing for 10 s (or 10 periods) ends it\n"
	"Exit status:\n"
	"  0    the inventory was printed (with --links, the rank's pairs measured;\n"
	"       with --watch, the stream ran until one of its ends)\n"
	"  1    this node, or a host it relays for, could not be probed, or with\n"
	"       --watch the reader took nothing for 10 s\n"
	"  2    a usage error\n";

struct discover_args {
	int json;
	const char *save;
	const char *format;
	const char *inventory;
	const char *hosts, *hostfile;
	int slurm;
	int timeout_s;
	int links;
	uint64_t links_bytes;
};

static double gib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

static const char *plural(long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* ------------------------------------------------------------- summary */

static void print_cpus(const herd_node *n)
{
	printf("CPU: %s\n", n->cpu_model && n->cpu_model[0] ? n->cpu_model : "unknown model");
	printf("CPUs: %d (%d %s, %d %s, %d %s)\n", n->threads, n->packages,
	       plural(n->packages, "package", "packages"), n->cores,
	       plural(n->cores, "core", "cores"), n->threads,
	       plural(n->threads, "thread", "threads"));
	printf("NUMA nodes: %zu\n", n->nnuma);
	for (size_t i = 0; i < n->nnuma; i++) {
		const herd_numa_node *m = &n->numa[i];
		printf("  node %d: %.1f GiB, CPUs %s\n", m->os_index, gib(m->memory_bytes),
		       m->cpus && m->cpus[0] ? m->cpus : "none");
	}
	printf("Memory: %.1f GiB total, %.1f GiB available\n", gib(n->memory_bytes),
	       gib(n->memory_available_bytes));
}

static void print_gpus(const herd_node *n)
{
	if (n->ngpus == 0) {
		if (n->gpu_note)
			printf("GPUs: none \xe2\x80\x94 %s\n", n->gpu_note);
		else
			printf("GPUs: none\n");
		return;
	}
	printf("GPUs: %zu\n", n->ngpus);
	int wname = 4;
	for (size_t i = 0; i < n->ngpus; i++) {
		int len = (int)strlen(n->gpus[i].name);
		if (len > wname)
			wname = len;
	}
	for (size_t i = 0; i < n->ngpus; i++) {
		const herd_gpu *g = &n->gpus[i];
		char numa[16];
		if (g->pci.numa_node >= 0)
			snprintf(numa, sizeof(numa), "%d", g->pci.numa_node);
		else
			snprintf(numa, sizeof(numa), "?");
		printf("  GPU%-3zu %-*s  %6.1f GiB  cc %d.%d  %s  NUMA %s  %s\n", i, wname,
		       g->name, gib(g->memory_bytes), g->cc_major, g->cc_minor,
		       g->pci.bus_id, numa, g->uuid);
	}
	if (n->gpu_note)
		printf("  note: %s\n", n->gpu_note);
}

static void format_speed(const herd_netdev *d, char *buf, size_t cap)
{
	if (d->speed_mbps >= 0)
		snprintf(buf, cap, "%" PRId64 " Mb/s", d->speed_mbps);
	else
		snprintf(buf, cap, "speed ?");
}

static void print_nics(const herd_node *n)
{
	printf("NICs: %zu\n", n->nnetdevs);
	int wname = 4, wspeed = 1, wmtu = 1;
	char buf[32];
	for (size_t i = 0; i < n->nnetdevs; i++) {
		const herd_netdev *d = &n->netdevs[i];
		int len = (int)strlen(d->name);
		if (len > wname)
			wname = len;
		format_speed(d, buf, sizeof(buf));
		if ((int)strlen(buf) > wspeed)
			wspeed = (int)strlen(buf);
		len = snprintf(buf, sizeof(buf), "%d", d->mtu);
		if (len > wmtu)
			wmtu = len;
	}
	for (size_t i = 0; i < n->nnetdevs; i++) {
		const herd_netdev *d = &n->netdevs[i];
		char speed[32];
		format_speed(d, speed, sizeof(speed));
		/* Pad the MTU only when something follows it on the line. */
		int more = d->pci.bus_id[0] || d->naddrs > 0;
		printf("  %-*s  %-7s  %*s  mtu %-*d", wname, d->name, d->state, wspeed,
		       speed, more ? wmtu : 0, d->mtu);
		if (d->pci.bus_id[0])
			printf("  %s", d->pci.bus_id);
		for (size_t k = 0; k < d->naddrs; k++)
			printf("%s%s", k == 0 ? "  " : ", ", d->addrs[k]);
		printf("\n");
	}
}

static void print_rdma(const herd_node *n)
{
	if (n->nrdma == 0) {
		if (n->rdma_note)
			printf("RDMA: none \xe2\x80\x94 %s\n", n->rdma_note);
		else
			printf("RDMA: none\n");
		return;
	}
	printf("RDMA: %zu %s\n", n->nrdma, plural((long)n->nrdma, "device", "devices"));
	for (size_t i = 0; i < n->nrdma; i++) {
		const herd_rdma_device *d = &n->rdma[i];
		printf("  %s", d->name);
		if (d->netdev[0])
			printf(" (%s)", d->netdev);
		if (d->pci.bus_id[0])
			printf("  %s", d->pci.bus_id);
		if (d->pci.numa_node >= 0)
			printf("  NUMA %d", d->pci.numa_node);
		printf("\n");
		for (size_t k = 0; k < d->nports; k++) {
			const herd_rdma_port *p = &d->ports[k];
			printf("    port %d: %s, %s, %d Gb/s\n", p->port, p->state,
			       p->link_layer, p->rate_gbps);
		}
	}
	if (n->rdma_note)
		printf("  note: %s\n", n->rdma_note);
}

/* ------------------------------------------------------ topology matrix */

/* The CPUs of the NUMA node numbered os_index, "N/A" when unknown. */
static const char *numa_cpus(const herd_node *n, int os_index)
{
	for (size_t i = 0; i < n->nnuma; i++)
		if (n->numa[i].os_index == os_index && n->numa[i].cpus)
			return n->numa[i].cpus;
	return "N/A";
}

static void print_cell(const char *s, int width)
{
	printf("%-*s", width, s);
}

/* The matrix of `nvidia-smi topo -m`: GPU rows, GPU then NIC columns. */
static void print_matrix(const herd_node *n)
{
	size_t ngpu = n->ngpus;
	size_t nnic = herd_node_nic_count(n);
	char label[32];
	char buf[HERD_NODE_LINK_CODE_LEN];
	int cell = 6; /* widest code is "NV18"-like; header "GPU10" */
	snprintf(label, sizeof(label), "GPU%zu", ngpu > 0 ? ngpu - 1 : 0);
	if ((int)strlen(label) + 2 > cell)
		cell = (int)strlen(label) + 2;
	snprintf(label, sizeof(label), "NIC%zu", nnic > 0 ? nnic - 1 : 0);
	if ((int)strlen(label) + 2 > cell)
		cell = (int)strlen(label) + 2;
	int waff = (int)strlen("CPU Affinity") + 2;
	for (size_t i = 0; i < ngpu; i++) {
		int len = (int)strlen(numa_cpus(n, n->gpus[i].pci.numa_node)) + 2;
		if (len > waff)
			waff = len;
	}

	printf("\nTopology:\n");
	print_cell("", cell);
	for (size_t j = 0; j < ngpu; j++) {
		snprintf(label, sizeof(label), "GPU%zu", j);
		print_cell(label, cell);
	}
	for (size_t j = 0; j < nnic; j++) {
		snprintf(label, sizeof(label), "NIC%zu", j);
		print_cell(label, cell);
	}
	print_cell("CPU Affinity", waff);
	printf("NUMA Affinity\n");

	for (size_t i = 0; i < ngpu; i++) {
		snprintf(label, sizeof(label), "GPU%zu", i);
		print_cell(label, cell);
		for (size_t j = 0; j < ngpu; j++) {
			herd_link link;
			const char *code = herd_node_gpu_link(n, i, j, &link) == HERD_OK
				? herd_node_link_code(link, buf) : "?";
			print_cell(code, cell);
		}
		for (size_t j = 0; j < nnic; j++) {
			herd_link link;
			const char *code = herd_node_gpu_nic_link(n, i, j, &link) == HERD_OK
				? herd_node_link_code(link, buf) : "?";
			print_cell(code, cell);
		}
		int numa = n->gpus[i].pci.numa_node;
		print_cell(numa_cpus(n, numa), waff);
		if (numa >= 0)
			printf("%d\n", numa);
		else
			printf("N/A\n");
	}

	printf("\nLegend:\n\n"
	       "  X    = Self\n"
	       "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
	       "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
	       "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
	       "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
	       "  PIX  = Connection traversing at most a single PCIe bridge\n"
	       "  NV#  = Connection traversing a bonded set of # NVLinks\n");
	if (nnic > 0) {
		printf("\nNIC Legend:\n\n");
		for (size_t j = 0; j < nnic; j++) {
			const char *name = NULL;
			const herd_pci_loc *pci = NULL;
			if (herd_node_nic(n, j, &name, &pci) != HERD_OK)
				name = "?";
			printf("  NIC%zu: %s\n", j, name ? name : "?");
		}
	}
}

static void print_node(const herd_node *n)
{
	printf("Host: %s\n", n->hostname ? n->hostname : "?");
	print_cpus(n);
	print_gpus(n);
	print_nics(n);
	print_rdma(n);
	if (n->ngpus > 0)
		print_matrix(n);
}

/* this_node: the summary of a probe of this node, which also says what GPU
 * software libherd was built with and the driver it found (not so for an
 * inventory file, whose node may be another machine). */
static void print_summary(const herd_cluster *cluster, bool this_node)
{
	size_t count = herd_cluster_node_count(cluster);
	for (size_t i = 0; i < count; i++) {
		const herd_node *node = NULL;

		if (herd_cluster_node(cluster, i, &node) != HERD_OK)
			continue;
		if (count > 1)
			printf("%s== node %zu of %zu ==\n", i ? "\n" : "", i + 1, count);
		print_node(node);
	}
	if (this_node) {
		char text[HERD_DEVICE_VERSIONS_LEN];

		printf("GPU software: %s\n", herd_device_versions(text));
	}
}

/* ----------------------------------------------------------- many nodes */

static void format_bytes(uint64_t b, char *out, size_t cap)
{
	if (b >= (1ull << 40))
		snprintf(out, cap, "%.1f TiB", (double)b / (double)(1ull << 40));
	else
		snprintf(out, cap, "%.0f GiB", gib(b));
}

/* The GPUs of a node in a few words: "8x NVIDIA H100 80GB HBM3 NV18 all-to-all". */
static void gpu_shape(const herd_node *n, char *out, size_t cap)
{
	int all = n->ngpus > 0, links = 0, direct = 0;

	if (n->ngpus == 0) {
		snprintf(out, cap, "no GPU");
		return;
	}
	for (size_t i = 0; i < n->ngpus; i++) {
		const herd_gpu *g = &n->gpus[i];

		if (g->nvswitch_links <= 0)
			all = 0;
		else if (links == 0 || g->nvswitch_links < links)
			links = g->nvswitch_links;
		direct |= g->nnvlinks > 0;
	}
	if (all)
		snprintf(out, cap, "%zux %s NV%d all-to-all", n->ngpus, n->gpus[0].name, links);
	else
		snprintf(out, cap, "%zux %s %s", n->ngpus, n->gpus[0].name,
			 direct ? "NVLink pairs" : "PCIe");
}

/* The fabric side: active RDMA ports, else PCI interfaces that are up. */
static void nic_shape(const herd_node *n, char *out, size_t cap)
{
	size_t ports = 0, up = 0;
	int rate = -1;
	const char *layer = "";
	int64_t speed = -2;

	for (size_t i = 0; i < n->nrdma; i++)
		for (size_t p = 0; p < n->rdma[i].nports; p++)
			if (strcmp(n->rdma[i].ports[p].state, "active") == 0) {
				ports++;
				if (rate < 0 || n->rdma[i].ports[p].rate_gbps > rate) {
					rate = n->rdma[i].ports[p].rate_gbps;
					layer = n->rdma[i].ports[p].link_layer;
				}
			}
	if (ports > 0) {
		snprintf(out, cap, "%zux RDMA %d Gb/s %s", ports, rate,
			 strcmp(layer, "infiniband") == 0 ? "InfiniBand"
			 : strcmp(layer, "ethernet") == 0 ? "RoCE" : layer);
		return;
	}
	for (size_t i = 0; i < n->nnetdevs; i++)
		if (n->netdevs[i].pci.bus_id[0] != '\0' && strcmp(n->netdevs[i].state, "up") == 0) {
			up++;
			if (n->netdevs[i].speed_mbps > speed)
				speed = n->netdevs[i].speed_mbps;
		}
	if (up == 0)
		snprintf(out, cap, "no RDMA, no PCI NIC up");
	else if (speed >= 0)
		snprintf(out, cap, "no RDMA, %zux NIC %g Gb/s", up, (double)speed / 1000.0);
	else
		snprintf(out, cap, "no RDMA, %zux NIC", up);
}

static void node_shape(const herd_node *n, char *out, size_t cap)
{
	char mem[32], gpus[160], nics[96];

	format_bytes(n->memory_bytes, mem, sizeof(mem));
	gpu_shape(n, gpus, sizeof(gpus));
	nic_shape(n, nics, sizeof(nics));
	snprintf(out, cap, "%dx %s %d cores  %s  %s  %s", n->packages,
		 n->cpu_model && n->cpu_model[0] ? n->cpu_model : "unknown CPU", n->cores, mem,
		 gpus, nics);
}

static void print_warning(void *userdata, const char *nodes, const char *message)
{
	(void)userdata;
	printf("warning: %s: %s\n", nodes, message);
}

/* Nodes of one shape on one line, as sinfo groups them; then warnings. */
static int print_cluster(const herd_cluster *cluster)
{
	size_t n = herd_cluster_node_count(cluster), groups = 0;
	char (*shape)[512] = calloc(n + 1, sizeof(*shape));
	const char **names = calloc(n + 1, sizeof(*names));
	const char **hosts = calloc(n + 1, sizeof(*hosts));
	size_t *group = calloc(n + 1, sizeof(*group));
	int width = 5, status = SHELL_EXIT_OK;
	char **lists = calloc(n + 1, sizeof(*lists));

	if (shape == NULL || names == NULL || hosts == NULL || group == NULL || lists == NULL) {
		shell_message(shell_command, "out of memory");
		status = SHELL_EXIT_FAILURE;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const herd_node *node = NULL;

		if (herd_cluster_node(cluster, i, &node) != HERD_OK) {
			shell_message(shell_command, shell_last_error());
			status = SHELL_EXIT_FAILURE;
			goto out;
		}
		node_shape(node, shape[i], sizeof(shape[i]));
		names[i] = node->hostname;
		group[i] = i;
		for (size_t j = 0; j < i; j++)
			if (strcmp(shape[i], shape[j]) == 0) {
				group[i] = group[j];
				break;
			}
	}
	for (size_t g = 0; g < n; g++) {
		size_t k = 0;

		if (group[g] != g)
			continue;
		for (size_t i = 0; i < n; i++)
			if (group[i] == g)
				hosts[k++] = names[i];
		if (herd_hostlist_compress(hosts, k, &lists[g]) != HERD_OK) {
			shell_message(shell_command, shell_last_error());
			status = SHELL_EXIT_FAILURE;
			goto out;
		}
		if ((int)strlen(lists[g]) > width)
			width = (int)strlen(lists[g]);
		groups++;
	}
	printf("%-*s  %5s  %s\n", width, "NODES", "COUNT", "SHAPE");
	for (size_t g = 0; g < n; g++) {
		size_t k = 0;

		if (group[g] != g)
			continue;
		for (size_t i = 0; i < n; i++)
			k += group[i] == g;
		printf("%-*s  %5zu  %s\n", width, lists[g], k, shape[g]);
	}
	if (herd_cluster_check(cluster, print_warning, NULL) < 0) {
		shell_message(shell_command, shell_last_error());
		status = SHELL_EXIT_FAILURE;
	}
	(void)groups;
out:
	for (size_t i = 0; i < n && lists != NULL; i++)
		herd_free(lists[i]);
	free(lists);
	free(group);
	free(hosts);
	free(names);
	free(shape);
	return status;
}

/* On a terminal: "discover: 12 done, 1 failed, 3 pending" on one line. */
static void show_progress(void *userdata, size_t done, size_t failed, size_t pending)
{
	(void)userdata;
	fprintf(stderr, "\rdiscover: %zu done, %zu failed, %zu pending\033[K", done, failed,
		pending);
	if (pending == 0)
		fputs("\r\033[K", stderr);
	fflush(stderr);
}

/* The nodes that did not answer, on stderr; the exit status they make. */
static int report_failures(const herd_cluster *cluster)
{
	size_t n = herd_cluster_failure_count(cluster);

	for (size_t i = 0; i < n; i++) {
		const char *host = NULL, *reason = NULL;

		if (herd_cluster_failure(cluster, i, &host, &reason) == HERD_OK)
			fprintf(stderr, "herd discover: %s: %s\n", host, reason);
	}
	return n > 0 ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
}

/* ------------------------------------------------------------- command */

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "herd discover: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'herd discover --help' for more information.\n");
	return SHELL_EXIT_USAGE;
}

/* Takes the value of an option given as "--opt VALUE" or "--opt=VALUE". */
static int option_value(int argc, char **argv, int *i, const char *name,
			const char **out)
{
	size_t len = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, len) != 0)
		return 0;
	if (a[len] == '=') {
		*out = a + len + 1;
		return 1;
	}
	if (a[len] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*out = argv[++*i];
	return 1;
}

/* Parses argv; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct discover_args *args)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int r;
		if (strcmp(a, "--json") == 0) {
			args->json = 1;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(discover_usage, stdout);
			return SHELL_EXIT_OK;
		} else if ((r = option_value(argc, argv, &i, "--save", &args->save)) != 0) {
			if (r < 0 || args->save[0] == '\0')
				return usage_error("option '%s' needs a file name", "--save");
		} else if ((r = option_value(argc, argv, &i, "--format", &args->format)) != 0) {
			if (r < 0 || (strcmp(args->format, "json") != 0 &&
				      strcmp(args->format, "msgpack") != 0))
				return usage_error("--format takes json or msgpack, not '%s'",
						   r < 0 ? "" : args->format);
		} else if ((r = option_value(argc, argv, &i, "--inventory",
					     &args->inventory)) != 0) {
			if (r < 0 || args->inventory[0] == '\0')
				return usage_error("option '%s' needs a file name",
						   "--inventory");
		} else if ((r = option_value(argc, argv, &i, "--hosts", &args->hosts)) != 0) {
			if (r < 0 || args->hosts[0] == '\0')
				return usage_error("option '%s' needs a hostlist (node[01-04])",
						   "--hosts");
		} else if ((r = option_value(argc, argv, &i, "--hostfile", &args->hostfile)) != 0) {
			if (r < 0 || args->hostfile[0] == '\0')
				return usage_error("option '%s' needs a file name", "--hostfile");
		} else if (strcmp(a, "--slurm") == 0) {
			args->slurm = 1;
		} else if (strcmp(a, "--links") == 0) {
			args->links = 1;
		} else if ((r = option_value(argc, argv, &i, "--links-bytes", &v)) != 0) {
			if (r < 0 || shell_parse_bytes(v, &args->links_bytes) != 0 ||
			    args->links_bytes < 8 || args->links_bytes > (1ull << 32))
				return usage_error("--links-bytes takes a size from 8 bytes to 4G, "
						   "not '%s'", r < 0 ? "" : v);
		} else if ((r = option_value(argc, argv, &i, "--timeout", &v)) != 0) {
			if (r < 0 || shell_parse_int(v, 1, 86400, &args->timeout_s) != 0)
				return usage_error("--timeout takes whole seconds from 1 to 86400, "
						   "not '%s'", r < 0 ? "" : v);
		} else if (a[0] == '-') {
			return usage_error("unrecognized option '%s'", a);
		} else {
			return usage_error("unexpected argument '%s'", a);
		}
	}
	if (args->format != NULL && args->save == NULL)
		return usage_error("--format says how --save writes; give --save FILE%s", "");
	if ((args->inventory != NULL) + (args->hosts != NULL) + (args->hostfile != NULL) +
	    args->slurm > 1)
		return usage_error("%s", "--inventory, --hosts, --hostfile and --slurm each name "
				   "what to discover: give one");
	if (args->timeout_s > 0 && args->hosts == NULL && args->hostfile == NULL && !args->slurm)
		return usage_error("%s", "--timeout is for many nodes: give --hosts, --hostfile "
				   "or --slurm");
	if ((args->links || args->links_bytes > 0) && args->hosts == NULL &&
	    args->hostfile == NULL && !args->slurm)
		return usage_error("%s", "--links measures between nodes: give --hosts, --hostfile "
				   "or --slurm");
	if (args->links && args->json)
		return usage_error("%s", "--links prints a table; it has no JSON form yet (leave "
				   "out --json)");
	return -1;
}

/* The format of --save: --format, else the file's extension. */
static int save_format(const struct discover_args *args, herd_cluster_format *out)
{
	const char *dot = strrchr(args->save, '.');

	if (args->format != NULL)
		*out = strcmp(args->format, "json") == 0 ? HERD_CLUSTER_FORMAT_JSON
							  : HERD_CLUSTER_FORMAT_MSGPACK;
	else if (dot != NULL && strcasecmp(dot, ".json") == 0)
		*out = HERD_CLUSTER_FORMAT_JSON;
	else if (dot != NULL && (strcasecmp(dot, ".msgpack") == 0 || strcasecmp(dot, ".mpk") == 0))
		*out = HERD_CLUSTER_FORMAT_MSGPACK;
	else
		return usage_error("--save %s: its name does not say the format; end it in .json "
				   "or .msgpack, or add --format json|msgpack", args->save);
	return -1;
}

static int print_json(const herd_cluster *cluster)
{
	void *data = NULL;
	size_t len = 0;
	if (herd_cluster_encode(cluster, HERD_CLUSTER_FORMAT_JSON, &data, &len) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	fwrite(data, 1, len, stdout);
	herd_free(data);
	return SHELL_EXIT_OK;
}

int cmd_discover(int argc, char **argv)
{
	struct discover_args args = { 0 };
	herd_cluster_format format = HERD_CLUSTER_FORMAT_AUTO;
	int status = parse_args(argc, argv, &args);
	if (status < 0 && args.save != NULL)
		status = save_format(&args, &format);
	if (status >= 0)
		return status;

	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	bool many = args.hosts != NULL || args.hostfile != NULL || args.slurm;
	opts.inventory = args.inventory;
	opts.hosts = args.hosts;
	opts.hostfile = args.hostfile;
	opts.slurm = args.slurm;
	opts.timeout_ms = args.timeout_s * 1000;
	if (many && isatty(STDERR_FILENO))
		opts.progress = show_progress;
	herd_cluster *cluster = NULL;
	herd_status st = herd_cluster_discover(&cluster, &opts);
	if (st != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		/* A bad input file (a hostfile that is missing or not a regular
		 * file included) or setting is the caller's to fix, as a usage
		 * error is; no node answering is exit status 2 too. */
		return args.inventory || st == HERD_EFORMAT || st == HERD_EUNAVAIL ||
				       st == HERD_EINVAL ||
				       (args.hostfile != NULL && st == HERD_ENOTFOUND)
			       ? SHELL_EXIT_USAGE : SHELL_EXIT_FAILURE;
	}

	status = SHELL_EXIT_OK;
	if (args.save && herd_cluster_save(cluster, args.save, format) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		status = SHELL_EXIT_FAILURE;
	}
	if (status == SHELL_EXIT_OK) {
		if (args.json)
			status = print_json(cluster);
		else if (many || herd_cluster_node_count(cluster) > 1)
			status = print_cluster(cluster);
		else
			print_summary(cluster, args.inventory == NULL &&
					   shell_env("HERD_INVENTORY") == NULL);
	}
	if (status == SHELL_EXIT_OK)
		status = report_failures(cluster);
	if (args.links && (status == SHELL_EXIT_OK || status == SHELL_EXIT_FAILURE)) {
		int s = links_check(cluster, args.slurm, args.links_bytes > 0
							  ? (size_t)args.links_bytes : 64u << 20,
				    args.timeout_s > 0 ? args.timeout_s : 30);

		if (s != SHELL_EXIT_OK)
			status = s;
	}
	herd_cluster_free(cluster);
	return status;
}

/*
 * Whether stdin's end means the watcher is gone: a pipe or a socket (ssh's,
 * the engine's), or a terminal (Ctrl-D).  /dev/null or a file (srun's
 * other tasks, nohup, a batch script) ends at once and says nothing.
 */
static bool stdin_tells_the_end(void)
{
	struct stat sb;

	if (fstat(STDIN_FILENO, &sb) != 0)
		return false;
	return S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode) || isatty(STDIN_FILENO);
}

/*
 * `herd probe --watch [--period MS] [--count N] [--text | --json]`: this
 * node's samples as records on stdout (herd_agent_telemetry_watch) until
 * stdin ends (when it can tell), stdout breaks, a signal that asks to end,
 * or N records.
 */
static int probe_watch(int argc, char **argv)
{
	static const int stops[] = { SIGTERM, SIGINT, SIGHUP };
	herd_telemetry_record format = HERD_TELEMETRY_RECORD_FRAME;
	int period_ms = 1000;
	unsigned long long count = 0;
	int stop_fd;
	herd_status st;

	for (int i = 1; i < argc; i++) {
		const char *v;
		char *end;
		int rc;

		if (strcmp(argv[i], "--watch") == 0) {
			continue;
		} else if (strcmp(argv[i], "--text") == 0) {
			format = HERD_TELEMETRY_RECORD_TEXT;
		} else if (strcmp(argv[i], "--json") == 0) {
			format = HERD_TELEMETRY_RECORD_JSON;
		} else if ((rc = shell_option_value(argc, argv, &i, "--period", &v)) != 0) {
			if (rc < 0)
				return shell_usage_error("probe", "option '%s' needs a value",
							 "--period");
			if (shell_parse_int(v, 100, 24 * 3600 * 1000, &period_ms) != 0)
				return shell_usage_error("probe", "--period %s: milliseconds from 100 "
							 "(ten samples a second at most) to 24 h", v);
		} else if ((rc = shell_option_value(argc, argv, &i, "--count", &v)) != 0) {
			if (rc < 0)
				return shell_usage_error("probe", "option '%s' needs a value",
							 "--count");
			errno = 0;
			count = strtoull(v, &end, 10);
			if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || count == 0)
				return shell_usage_error("probe", "--count %s: a number of samples, 1 "
							 "or more", v);
		} else {
			return shell_usage_error("probe", argv[i][0] == '-'
					? "unrecognized option '%s' (with --watch: --period, --count, "
					  "--text, --json)"
					: "unexpected argument '%s'", argv[i]);
		}
	}
	/* A reader gone is a failed write (EPIPE), and ends the stream quietly. */
	signal(SIGPIPE, SIG_IGN);
	stop_fd = shell_signals_catch("herd probe", stops, sizeof(stops) / sizeof(*stops));
	if (stop_fd < 0)
		return SHELL_EXIT_FAILURE;
	st = herd_agent_telemetry_watch(stdin_tells_the_end() ? STDIN_FILENO : -1, STDOUT_FILENO,
					stop_fd, period_ms,
					(uint64_t)count, format, NULL);
	if (st != HERD_OK) {
		shell_message("herd probe", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	return SHELL_EXIT_OK;
}

/* `herd probe`: this node's inventory, for herd discover on another node. */
int cmd_probe(int argc, char **argv)
{
	herd_cluster_format format = HERD_CLUSTER_FORMAT_MSGPACK;
	herd_cluster *cluster = NULL;
	void *data = NULL;
	size_t len = 0;
	int status = SHELL_EXIT_OK;

	const char *forward = NULL, *program = shell_env("HERD_PROGRAM");
	int secs = 30;

	bool help = false, watch = false;

	for (int i = 1; i < argc; i++) {
		help |= strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0;
		watch |= strcmp(argv[i], "--watch") == 0;
	}
	if (watch && !help)
		return probe_watch(argc, argv);
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && (strcmp(argv[i], "--forward") == 0 ||
				     strcmp(argv[i], "--program") == 0 || strcmp(argv[i], "--ssh") == 0 ||
				     strcmp(argv[i], "--ssh-args") == 0 ||
				     strcmp(argv[i], "--timeout") == 0)) {
			/* A relay of a discovery over an ssh tree, with the settings
			 * of the herd that reached it. */
			const char *v = argv[++i];

			if (argv[i - 1][2] == 'f')
				forward = v;
			else if (argv[i - 1][2] == 'p')
				program = v;
			else if (argv[i - 1][2] == 't') {
				if (shell_parse_int(v, 1, 86400, &secs) != 0) {
					return shell_usage_error("probe", "--timeout %s: whole "
								 "seconds, please", v);
				}
			} else
				setenv(argv[i - 1][5] == '\0' ? "HERD_SSH" : "HERD_SSH_ARGS", v, 1);
		} else if (strcmp(argv[i], "--links") == 0 && i + 1 < argc) {
			uint64_t bytes = 0;

			if (shell_parse_bytes(argv[i + 1], &bytes) != 0 || bytes < 8 ||
			    bytes > (1ull << 32) || i + 2 != argc) {
				return shell_usage_error("probe", "%s", "--links takes one size, "
							 "from 8 bytes to 4G");
			}
			return links_rank((size_t)bytes);
		} else if (strcmp(argv[i], "--text") == 0) {
			format = HERD_CLUSTER_FORMAT_TEXT;
		} else if (strcmp(argv[i], "--json") == 0) {
			format = HERD_CLUSTER_FORMAT_JSON;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(probe_usage, stdout);
			return SHELL_EXIT_OK;
		} else if (strcmp(argv[i], "--period") == 0 || strcmp(argv[i], "--count") == 0 ||
			   strncmp(argv[i], "--period=", 9) == 0 || strncmp(argv[i], "--count=", 8) == 0) {
			return shell_usage_error("probe", "%s is for a stream of samples: add --watch",
						 argv[i]);
		} else {
			return shell_usage_error("probe", "unrecognized argument '%s'", argv[i]);
		}
	}
	if (program == NULL || program[0] == '\0')
		program = "herd";
	if ((forward != NULL ? herd_agent_discover_relay(&cluster, forward, secs * 1000, program)
			     : herd_cluster_discover(&cluster, NULL)) != HERD_OK ||
	    herd_cluster_encode(cluster, format, &data, &len) != HERD_OK) {
		shell_message("herd probe", shell_last_error());
		herd_cluster_free(cluster);
		return SHELL_EXIT_FAILURE;
	}
	fwrite(data, 1, len, stdout);   /* a failure is said by main */
	herd_free(data);
	herd_cluster_free(cluster);
	return status;
}
