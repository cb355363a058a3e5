/*
 * sdk/topo/probe.c - discovery of this node: herd__cluster_probe, the
 * order in which the probes run, and the small helpers they share (sysfs
 * reads, notes).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/device.h"
#include "herd_config.h"
#include "probe.h"

herd_status herd__cluster_probe(herd_cluster **out)
{
	herd_cluster *cluster = NULL;
	herd_status st;

	*out = NULL;
	HERD_CHECK(herd__cluster_new(&cluster, 1));
	st = herd__node_probe(&cluster->nodes[0]);
	if (st != HERD_OK) {
		herd_cluster_free(cluster);
		return st;
	}
	*out = cluster;
	return HERD_OK;
}

/*
 * NVML first: it alone knows NVLink.  The CUDA runtime is the fallback for
 * machines where NVML is missing or broken; when both fail the note keeps
 * both reasons, since either may be the one a person has to fix.
 */
static herd_status probe_gpus(struct hwloc_topology *topo, herd_node *node)
{
	char nvml_why[HERD_TOPO_WHY_LEN] = "";
	char cuda_why[HERD_TOPO_WHY_LEN] = "";
	char **note = &HERD_MUT(char *, node->gpu_note);
	herd_status st;

	st = herd__topo_probe_nvml(topo, node, nvml_why, sizeof(nvml_why));
	if (st == HERD_OK)
		return nvml_why[0] != '\0' ? herd__topo_note_append(note, "%s", nvml_why)
					   : HERD_OK;
	if (st != HERD_EUNAVAIL)
		return st;
	st = herd__topo_probe_cudart(topo, node, cuda_why, sizeof(cuda_why));
	if (st == HERD_OK)
		return herd__topo_note_append(note,
					      "GPUs listed by the CUDA runtime, NVLink unknown: "
					      "NVML unavailable (%s)%s%s",
					      nvml_why, cuda_why[0] != '\0' ? "; " : "", cuda_why);
	if (st != HERD_EUNAVAIL)
		return st;
	return herd__topo_note_append(note, "no GPU: %s; CUDA runtime: %s", nvml_why, cuda_why);
}

/* ncclGetVersion, the one entry point the probe needs. */
struct nccl_version_api {
	int (*get_version)(int *);
};

/*
 * The GPU software of a node with GPUs: the CUDA version its driver
 * supports, and the NCCL a process here loads (the one libherd's device
 * collectives would use).
 */
static herd_status probe_gpu_software(herd_node *node)
{
	static const herd__dl_symbol syms[] = {
		HERD__DL_SYM(struct nccl_version_api, ncclGetVersion, get_version, true),
	};
	struct nccl_version_api api = { NULL };
	int cuda = herd__cudart_driver_version(), v = 0;
	char text[32], why[256];
	void *lib;

	if (node->ngpus == 0)
		return HERD_OK;
	if (cuda > 0) {
		snprintf(text, sizeof(text), "%d.%d", cuda / 1000, cuda % 1000 / 10);
		HERD_CHECK(herd__strdup(&HERD_MUT(char *, node->cuda_driver), text));
	}
	lib = herd__dl_open(HERD_NCCL_LIBRARY, syms, 1, &api, why, sizeof(why));
	if (lib != NULL && api.get_version(&v) == 0 && v > 0)
		snprintf(text, sizeof(text), "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	else
		text[0] = '\0';
	if (lib != NULL)
		dlclose(lib);
	return text[0] != '\0' ? herd__strdup(&HERD_MUT(char *, node->nccl), text) : HERD_OK;
}

herd_status herd__node_probe(herd_node *node)
{
	struct hwloc_topology *topo = NULL;
	herd_status st;

	HERD_CHECK_GOTO(herd__topo_probe_hostname(node), st, out);
	HERD_CHECK_GOTO(herd__topo_hwloc_open(&topo, NULL), st, out);
	HERD_CHECK_GOTO(herd__topo_probe_cpus(topo, node), st, out);
	HERD_CHECK_GOTO(herd__topo_probe_numa(topo, node), st, out);
	if (!herd__topo_probe_memory(node))
		node->memory_bytes = herd__topo_hwloc_memory(topo);
	HERD_CHECK_GOTO(probe_gpus(topo, node), st, out);
	HERD_CHECK_GOTO(probe_gpu_software(node), st, out);
	HERD_CHECK_GOTO(herd__topo_probe_netdevs(topo, node), st, out);
	HERD_CHECK_GOTO(herd__topo_probe_rdma(topo, node), st, out);
	herd__log_debug("probed %s: %d threads, %zu NUMA nodes, %zu GPUs, %zu netdevs, "
			"%zu RDMA devices", node->hostname, node->threads, node->nnuma,
			node->ngpus, node->nnetdevs, node->nrdma);
out:
	herd__topo_hwloc_close(topo);
	if (st != HERD_OK)
		herd__node_clear(node);
	return st;
}

static int gpu_compare(const void *a, const void *b)
{
	return herd__topo_pci_compare(((const herd_gpu *)a)->pci.bus_id,
				      ((const herd_gpu *)b)->pci.bus_id);
}

void herd__topo_sort_gpus(herd_node *node)
{
	if (node->ngpus > 1)
		qsort(HERD_MUT(herd_gpu *, node->gpus), node->ngpus, sizeof(herd_gpu),
		      gpu_compare);
}

bool herd__topo_read_line(const char *path, char *buf, size_t cap)
{
	ssize_t n;
	int fd;

	if (cap == 0)
		return false;
	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	do
		n = read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

void herd__topo_why_append(char *why, size_t cap, const char *fmt, ...)
{
	size_t used = strnlen(why, cap);
	va_list ap;

	if (used + 1 >= cap)
		return;
	if (used > 0)
		used += (size_t)snprintf(why + used, cap - used, "; ");
	if (used + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(why + used, cap - used, fmt, ap);
	va_end(ap);
}

herd_status herd__topo_note_append(char **note, const char *fmt, ...)
{
	size_t old = *note != NULL ? strlen(*note) : 0;
	size_t sep = old > 0 ? 2 : 0;
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return herd__error(HERD_EINTERNAL, "cannot format a discovery note");
	p = realloc(*note, old + sep + (size_t)n + 1);
	if (p == NULL)
		return herd__error(HERD_ENOMEM, "out of memory writing a discovery note");
	memcpy(p + old, "; ", sep);
	va_start(ap, fmt);
	vsnprintf(p + old + sep, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*note = p;
	return HERD_OK;
}

const char *herd_device_versions(char buf[HERD_DEVICE_VERSIONS_LEN])
{
	char driver[64], why[128], cuda_s[40] = "";
	int cuda = herd__cudart_driver_version();
	bool have = herd__nvml_driver_version(driver, sizeof(driver), why, sizeof(why));

	if (cuda > 0)
		snprintf(cuda_s, sizeof(cuda_s), " (CUDA %d.%d)", cuda / 1000, cuda % 1000 / 10);
	snprintf(buf, HERD_DEVICE_VERSIONS_LEN, "%s%s; %s%s%s",
		 HERD_HAVE_CUDA ? "built with CUDA " HERD_CUDA_VERSION_STRING : "built without CUDA",
		 HERD_HAVE_NCCL ? " and NCCL " HERD_NCCL_VERSION_STRING : ", without NCCL",
		 have ? "driver " : "", have ? driver : why, cuda_s);
	return buf;
}
