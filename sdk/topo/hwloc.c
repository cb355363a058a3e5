/*
 * sdk/topo/hwloc.c - what hwloc knows about this machine: the host name,
 * CPUs, NUMA nodes, and where a PCI function sits in the PCI tree.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "probe.h"

/* Deeper PCIe switch chains than this do not exist in real machines. */
#define HERD_PCI_WALK_MAX 32

/*
 * hwloc components left out, for they act inside the caller's process: the
 * GPU and display ones initialize CUDA, OpenCL or ROCm (herd asks NVML
 * itself), x86 binds the calling thread to every CPU in turn to run cpuid,
 * and the libpciaccess one leaks on every load.  hwloc's Linux component
 * reads the same CPUs and PCI tree from sysfs and /proc/cpuinfo.
 */
static const char *const hwloc_skipped[] = { "cuda", "nvml", "opencl", "rsmi", "levelzero",
					     "gl", "pci", "x86" };

herd_status herd__topo_hwloc_open(struct hwloc_topology **out, const char *xml)
{
	hwloc_topology_t topo = NULL;
	int err;

	*out = NULL;
	if (hwloc_topology_init(&topo) != 0)
		return herd__error_errno(HERD_ENOMEM, errno, "hwloc: cannot create a topology");
	for (size_t i = 0; i < sizeof(hwloc_skipped) / sizeof(hwloc_skipped[0]); i++)
		if (hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
						  hwloc_skipped[i]) != 0)
			herd__log_debug("hwloc: cannot leave out component %s", hwloc_skipped[i]);
	/*
	 * Every bridge and PCI function is kept, for the switch walk needs the
	 * whole path; OS devices (disks, netdevs) are not needed.  Disallowed
	 * CPUs are kept: the inventory records the machine, not the cgroup
	 * this process happens to run in.
	 */
	if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) != 0 ||
	    hwloc_topology_set_type_filter(topo, HWLOC_OBJ_OS_DEVICE,
					   HWLOC_TYPE_FILTER_KEEP_NONE) != 0 ||
	    hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0 ||
	    (xml != NULL && hwloc_topology_set_xmlbuffer(topo, xml, (int)strlen(xml) + 1) != 0) ||
	    hwloc_topology_load(topo) != 0) {
		err = errno;
		hwloc_topology_destroy(topo);
		return herd__error_errno(HERD_ESYS, err, "hwloc: cannot read the topology of %s",
					 xml != NULL ? "the XML given" : "this machine");
	}
	*out = topo;
	return HERD_OK;
}

void herd__topo_hwloc_close(struct hwloc_topology *topo)
{
	if (topo != NULL)
		hwloc_topology_destroy(topo);
}

herd_status herd__topo_probe_hostname(herd_node *node)
{
	char name[HOST_NAME_MAX + 1];

	if (gethostname(name, sizeof(name)) != 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot get the host name: gethostname");
	name[sizeof(name) - 1] = '\0';
	return herd__strdup(&HERD_MUT(char *, node->hostname), name);
}

static int count_of(hwloc_topology_t topo, hwloc_obj_type_t type)
{
	int n = hwloc_get_nbobjs_by_type(topo, type);

	return n > 0 ? n : 0;
}

herd_status herd__topo_probe_cpus(struct hwloc_topology *topo, herd_node *node)
{
	const char *model = NULL;
	int packages = count_of(topo, HWLOC_OBJ_PACKAGE);

	for (int i = 0; i < packages && model == NULL; i++)
		model = hwloc_obj_get_info_by_name(
			hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, (unsigned)i), "CPUModel");
	node->threads = count_of(topo, HWLOC_OBJ_PU);
	node->cores = count_of(topo, HWLOC_OBJ_CORE);
	/* Some VMs and architectures report no package or no core; a machine
	 * has at least one package, and a PU with no core is its own core. */
	node->packages = packages > 0 ? packages : 1;
	if (node->cores == 0)
		node->cores = node->threads;
	return herd__strdup(&HERD_MUT(char *, node->cpu_model), model != NULL ? model : "");
}

herd_status herd__topo_cpulist_format(const struct hwloc_bitmap_s *set, char **out)
{
	char *list = NULL;

	*out = NULL;
	if (set == NULL || hwloc_bitmap_iszero(set))
		return herd__strdup(out, "");
	if (hwloc_bitmap_list_asprintf(&list, set) < 0 || list == NULL)
		return herd__error(HERD_ENOMEM, "out of memory formatting a CPU list");
	*out = list;
	return HERD_OK;
}

herd_status herd__topo_probe_numa(struct hwloc_topology *topo, herd_node *node)
{
	int n = count_of(topo, HWLOC_OBJ_NUMANODE);
	herd_numa_node *numa = NULL;

	HERD_CHECK(herd__calloc(&numa, (size_t)n, sizeof(*numa), "NUMA nodes"));
	/* Owned by the node at once, so that a failure below frees it. */
	HERD_MUT(herd_numa_node *, node->numa) = numa;
	node->nnuma = (size_t)n;
	for (int i = 0; i < n; i++) {
		hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);

		numa[i].os_index = (int)obj->os_index;
		numa[i].memory_bytes = obj->attr->numanode.local_memory;
		HERD_CHECK(herd__topo_cpulist_format(obj->cpuset, &HERD_MUT(char *, numa[i].cpus)));
	}
	return HERD_OK;
}

uint64_t herd__topo_hwloc_memory(struct hwloc_topology *topo)
{
	return hwloc_get_root_obj(topo)->total_memory;
}

void herd__topo_pci_none(herd_pci_loc *loc)
{
	memset(loc, 0, sizeof(*loc));
	loc->numa_node = -1;
}

static bool is_bridge(hwloc_obj_t obj, hwloc_obj_bridge_type_t upstream)
{
	return obj != NULL && obj->type == HWLOC_OBJ_BRIDGE &&
	       obj->attr->bridge.upstream_type == upstream;
}

static void format_bus_id(const struct hwloc_pcidev_attr_s *pci, char out[HERD_PCI_ID_LEN])
{
	snprintf(out, HERD_PCI_ID_LEN, "%04x:%02x:%02x.%x", (unsigned)pci->domain,
		 (unsigned)pci->bus, (unsigned)pci->dev, (unsigned)pci->func);
}

/*
 * The switches above a device, walked up from it.  The bridge right above
 * a device is either a root port (when the host bridge is its parent) or a
 * switch's downstream port, and the bridge above a downstream port is that
 * switch's upstream port, which names the switch.  Above the upstream port
 * the walk goes on from the next root or downstream port.
 */
static void locate_switches(hwloc_obj_t dev, herd_pci_loc *loc)
{
	char inner_first[HERD_PCI_WALK_MAX][HERD_PCI_ID_LEN];
	hwloc_obj_t down = dev->parent;
	int n = 0;

	while (n < HERD_PCI_WALK_MAX && is_bridge(down, HWLOC_OBJ_BRIDGE_PCI)) {
		hwloc_obj_t up = down->parent;

		if (!is_bridge(up, HWLOC_OBJ_BRIDGE_PCI))
			break;
		format_bus_id(&up->attr->bridge.upstream.pci, inner_first[n++]);
		down = up->parent;
	}
	/* The matrix compares paths from the host bridge down, so when a path
	 * is too long to keep whole, its outermost switches are kept. */
	if (n > HERD_PCI_MAX_SWITCHES)
		herd__log_debug("%s sits below %d PCIe switches; keeping the outermost %d",
				loc->bus_id, n, HERD_PCI_MAX_SWITCHES);
	for (int i = 0; i < n && i < HERD_PCI_MAX_SWITCHES; i++)
		memcpy(loc->switches[i], inner_first[n - 1 - i], HERD_PCI_ID_LEN);
	loc->nswitches = n < HERD_PCI_MAX_SWITCHES ? n : HERD_PCI_MAX_SWITCHES;
}

static void locate_host_bridge(hwloc_obj_t dev, herd_pci_loc *loc)
{
	for (hwloc_obj_t obj = dev->parent; obj != NULL; obj = obj->parent) {
		if (is_bridge(obj, HWLOC_OBJ_BRIDGE_HOST)) {
			snprintf(loc->host_bridge, sizeof(loc->host_bridge), "%04x:%02x",
				 (unsigned)obj->attr->bridge.downstream.pci.domain,
				 (unsigned)obj->attr->bridge.downstream.pci.secondary_bus);
			return;
		}
	}
}

/* The NUMA node of the CPU-side object the PCI tree hangs from, when one. */
static int locate_numa(hwloc_topology_t topo, hwloc_obj_t dev)
{
	hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topo, dev);

	if (cpu_side == NULL || cpu_side->nodeset == NULL ||
	    hwloc_bitmap_weight(cpu_side->nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(cpu_side->nodeset);
}

static int sysfs_numa_node(const char *bus_id)
{
	char path[PATH_MAX], line[32];
	char *end;
	long v;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus_id);
	if (!herd__topo_read_line(path, line, sizeof(line)))
		return -1;
	v = strtol(line, &end, 10);
	return end != line && v >= 0 && v < INT_MAX ? (int)v : -1;
}

void herd__topo_pci_locate(struct hwloc_topology *topo, const char *bus_id,
			   herd_pci_loc *loc)
{
	unsigned domain, bus, dev, fn;
	hwloc_obj_t obj;

	herd__topo_pci_none(loc);
	if (!herd__topo_pci_normalize(bus_id, loc->bus_id) ||
	    sscanf(loc->bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
		return;
	obj = hwloc_get_pcidev_by_busid(topo, domain, bus, dev, fn);
	if (obj == NULL) {
		herd__log_debug("PCI function %s is not in the hwloc topology", loc->bus_id);
		loc->numa_node = sysfs_numa_node(loc->bus_id);
		return;
	}
	locate_host_bridge(obj, loc);
	locate_switches(obj, loc);
	loc->numa_node = locate_numa(topo, obj);
}
