/*
 * sdk/topo/probe.h - the probes behind herd__node_probe, one file per source
 * of facts (hwloc.c, meminfo.c, nvml.c, cudart.c, netdev.c, ibverbs.c), and
 * the small pure helpers they share.  Internal to libherd.
 *
 * A probe fills its part of a herd_node.  Absent hardware or an absent
 * driver is not an error: the probe leaves the part empty and, where the
 * node has a field for it, says why.  Errors are kept for what a person has
 * to fix (out of memory, a machine whose topology cannot be read at all).
 */
#ifndef HERD_TOPO_PROBE_H
#define HERD_TOPO_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "herd/health.h"
#include "inventory.h"
#include "pci.h"

/* hwloc's handles, named without including hwloc.h. */
struct hwloc_topology;
struct hwloc_bitmap_s;
struct sockaddr;

/* Longest note a probe hands back in its why[] buffer. */
#define HERD_TOPO_WHY_LEN 512

/* --- hwloc.c: host, CPUs, NUMA, PCI tree ------------------------------- */

/*
 * Loads a topology with every PCI bridge and device kept: this machine's
 * when xml is NULL, else the hwloc XML in xml (tests describe machines
 * they are not on that way).  Free with herd__topo_hwloc_close.
 */
herd_status herd__topo_hwloc_open(struct hwloc_topology **out, const char *xml);
void herd__topo_hwloc_close(struct hwloc_topology *topo);

/* node->hostname, from gethostname(). */
herd_status herd__topo_probe_hostname(herd_node *node);

/* node->cpu_model, packages, cores, threads. */
herd_status herd__topo_probe_cpus(struct hwloc_topology *topo, herd_node *node);

/* node->numa: os_index, local memory and CPU list of each NUMA node. */
herd_status herd__topo_probe_numa(struct hwloc_topology *topo, herd_node *node);

/* The sum of the NUMA nodes' memory, for when /proc/meminfo is unreadable. */
uint64_t herd__topo_hwloc_memory(struct hwloc_topology *topo);

/*
 * Fills *loc for the PCI function bus_id ("dddd:bb:dd.f"): host bridge,
 * NUMA node and the PCIe switches between them.  A function hwloc does not
 * know keeps its bus id, an empty host bridge, no switches and the NUMA
 * node sysfs gives (-1 when none).  Never fails.
 */
void herd__topo_pci_locate(struct hwloc_topology *topo, const char *bus_id,
			   herd_pci_loc *loc);

/* An empty location: no bus id, NUMA node -1. */
void herd__topo_pci_none(herd_pci_loc *loc);

/* A CPU set as Linux lists it ("0-15,32-47", "" when empty) into *out (malloc). */
herd_status herd__topo_cpulist_format(const struct hwloc_bitmap_s *set, char **out);

/* --- meminfo.c --------------------------------------------------------- */

/*
 * MemTotal and MemAvailable, in bytes, from the text of /proc/meminfo.
 * False unless MemTotal is there; *available is 0 when MemAvailable is not
 * (kernels before 3.14).
 */
bool herd__topo_meminfo_parse(const char *text, uint64_t *total, uint64_t *available);

/*
 * node->memory_bytes and memory_available_bytes from /proc/meminfo; false
 * (node untouched) when it cannot be read or lacks MemTotal.
 */
bool herd__topo_probe_memory(herd_node *node);

/* --- nvml.c, cudart.c: GPUs -------------------------------------------- */

/*
 * Each fills node->gpus (in bus id order) and returns HERD_OK, or leaves it
 * empty, writes why into why[cap] and returns HERD_EUNAVAIL without raising
 * an error.  Other codes are real errors (out of memory).  nvml.c also says
 * in why[] what it skipped when it did find GPUs; why[0] is '\0' otherwise.
 */
herd_status herd__topo_probe_nvml(struct hwloc_topology *topo, herd_node *node,
				  char *why, size_t cap);
herd_status herd__topo_probe_cudart(struct hwloc_topology *topo, herd_node *node,
				    char *why, size_t cap);

/* The driver's version from NVML ("580.159.04"); false with why[] set when
 * there is no NVML to ask. */
bool herd__nvml_driver_version(char *out, size_t cap, char *why, size_t why_cap);

/* --- health.c, nvml.c: herd health ------------------------------------ */

/* What a GPU's rates are measured against: the memory's own rate and the
 * PCIe link's, per direction, in GB/s (0: unknown). */
typedef struct herd__health_ref {
	double memory_gbps;
	double link_gbps;
} herd__health_ref;

/* Appends a check to g (its detail from fmt). */
herd_status herd__health_add(herd_health_gpu *g, const char *name, herd_health_result result,
			     double value, const char *unit, const char *fmt, ...)
	HERD_PRINTF(6, 7);

/* Every GPU NVML sees, with the driver's checks (ECC, memory rows,
 * temperature, power, clocks, clock events, PCIe) and *refs (one per GPU,
 * the caller's to free); HERD_EUNAVAIL with why[] when there is no NVML or
 * no GPU. */
herd_status herd__nvml_health(herd_health_report *r, herd__health_ref **refs, char *why,
			      size_t cap);

/* The CUDA device index of the GPU at bus_id; -1 when CUDA does not see
 * it (CUDA_VISIBLE_DEVICES, no driver, built without CUDA). */
int herd__cudart_device_of(const char *bus_id);

/* The CUDA version the driver supports (13000 for 13.0); 0 when there is
 * no driver or libherd was built without CUDA. */
int herd__cudart_driver_version(void);

/* Sorts node->gpus by PCI bus id. */
void herd__topo_sort_gpus(herd_node *node);

/* --- netdev.c ---------------------------------------------------------- */

/* node->netdevs, in the kernel's (ifindex) order. */
herd_status herd__topo_probe_netdevs(struct hwloc_topology *topo, herd_node *node);

/* Prefix length of a netmask (AF_INET or AF_INET6), -1 for other families. */
int herd__topo_prefix_len(const struct sockaddr *mask);

/* "10.0.0.5/24" or "fe80::1/64" into *out (malloc); *out NULL for other families. */
herd_status herd__topo_format_addr(const struct sockaddr *addr,
				   const struct sockaddr *mask, char **out);

/* --- ibverbs.c --------------------------------------------------------- */

/* node->rdma, or node->rdma_note saying why there are none. */
herd_status herd__topo_probe_rdma(struct hwloc_topology *topo, herd_node *node);

/*
 * Link rate in Gb/s from ibv_port_attr's active_width and active_speed
 * codes (4x EDR: width 2, speed 32 -> 100); 0 for unknown codes.
 */
int herd__topo_ib_rate_gbps(unsigned width, unsigned speed);

/* ibv_port_state as "active", "down", "init", ...; "unknown" otherwise. */
const char *herd__topo_ib_state_str(int state);

/* A 16-byte GID as "fe80:0000:0000:0000:0202:c9ff:fe00:0001"; buf >= 40 bytes. */
void herd__topo_gid_format(const uint8_t raw[16], char *buf);

/* --- probe.c: helpers the probes share --------------------------------- */

/*
 * The first line of a small file (a sysfs attribute), newline stripped.
 * False when it cannot be read; raises nothing, for absent files are the
 * normal case there.
 */
bool herd__topo_read_line(const char *path, char *buf, size_t cap);

/* Appends "; " and a formatted sentence to why[cap], truncating. */
void herd__topo_why_append(char *why, size_t cap, const char *fmt, ...) HERD_PRINTF(3, 4);

/* Appends "; " and a formatted sentence to a malloc'ed note (NULL starts one). */
herd_status herd__topo_note_append(char **note, const char *fmt, ...) HERD_PRINTF(2, 3);

#endif /* HERD_TOPO_PROBE_H */
