/*
 * sdk/telemetry/exposition.c - a sample in the Prometheus text exposition
 * format 0.0.4: the GPU families under the names and labels of NVIDIA's
 * DCGM exporter, the node's under herd_node_*, the GPU processes and
 * their jobs under herd_*.  A figure the sample does not know (-1) is
 * left out, and a family with no series at all is not written.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "buf.h"
#include "telemetry_internal.h"

/* The text of a sample is some hundreds of KiB at most (caps of telemetry.h). */
#define EXPOSITION_MAX (8u << 20)

/* A GPU's label set: six labels of at most a few escaped names each. */
#define LABELS_MAX (8 * HERD_NAME_LEN)

static void put(herd__buf *b, const char *fmt, ...) HERD_PRINTF(2, 3);

static void put(herd__buf *b, const char *fmt, ...)
{
	char line[2 * LABELS_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		/* Longer than any line written here: fail the text, never cut it. */
		if (b->failed == HERD_OK)
			b->failed = HERD_EFORMAT;
		return;
	}
	herd__buf_write(b, line, (size_t)n);
}

/* A label value with \, " and newline escaped, into out (always terminated). */
static void escape_label(char *out, size_t cap, const char *v)
{
	size_t o = 0;

	for (; *v != '\0' && o + 3 < cap; v++) {
		if (*v == '\\' || *v == '"') {
			out[o++] = '\\';
			out[o++] = *v;
		} else if (*v == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *v;
		}
	}
	out[o] = '\0';
}

static void family(herd__buf *b, const char *name, const char *type, const char *help)
{
	put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A number as Prometheus reads it: integers exact, others to 17 digits. */
static void put_value(herd__buf *b, const char *name, const char *labels, double v)
{
	if (labels[0] != '\0')
		put(b, "%s{%s} %.17g\n", name, labels, v);
	else
		put(b, "%s %.17g\n", name, v);
}

/* ---- GPUs --------------------------------------------------------------- */

enum { F_DOUBLE, F_INT, F_MIB_USED, F_MIB_FREE };

typedef struct gpu_family {
	const char *name;
	const char *type;
	const char *help;
	int kind;
	size_t off;         /* of the field in herd_telemetry_gpu */
} gpu_family;

#define GD(field) F_DOUBLE, offsetof(herd_telemetry_gpu, field)
#define GI(field) F_INT, offsetof(herd_telemetry_gpu, field)

static const gpu_family gpu_families[] = {
	{ "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", GD(util_gpu) },
	{ "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", GD(util_mem) },
	{ "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", F_MIB_USED, 0 },
	{ "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", F_MIB_FREE, 0 },
	{ "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", GD(power_w) },
	{ "DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).",
	  GD(power_limit_w) },
	{ "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
	  "Total energy consumption since boot (in mJ).", GI(energy_mj) },
	{ "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", GD(temp_c) },
	{ "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", GD(sm_clock_mhz) },
	{ "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
	  GD(mem_clock_mhz) },
	{ "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
	  "Current clock throttle reasons (a bit mask).", GI(throttle) },
	{ "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
	  "Total number of single-bit volatile ECC errors.", GI(ecc_sbe) },
	{ "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
	  "Total number of double-bit volatile ECC errors.", GI(ecc_dbe) },
	{ "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
	  GI(xid) },
	{ "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
	  "The rate of data transmitted over the PCIe bus - including both protocol headers "
	  "and data payloads - in bytes per second.",
	  GD(pcie_tx_bps) },
	{ "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
	  "The rate of data received over the PCIe bus - including both protocol headers "
	  "and data payloads - in bytes per second.",
	  GD(pcie_rx_bps) },
	{ "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge",
	  "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
	  GD(nvlink_tx_bps) },
	{ "DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge",
	  "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
	  GD(nvlink_rx_bps) },
};

/* The figure of one family for one GPU; 0 when the GPU does not know it. */
static int gpu_value(const gpu_family *f, const herd_telemetry_gpu *g, double *v)
{
	const char *p = (const char *)g + f->off;
	double d;
	int64_t i;

	switch (f->kind) {
	case F_DOUBLE:
		memcpy(&d, p, sizeof(d));
		if (d < 0)
			return 0;
		*v = d;
		return 1;
	case F_INT:
		memcpy(&i, p, sizeof(i));
		if (i < 0)
			return 0;
		*v = (double)i;
		return 1;
	case F_MIB_USED:
		if (g->mem_used < 0)
			return 0;
		*v = (double)(g->mem_used / (1024 * 1024));
		return 1;
	default: /* F_MIB_FREE */
		if (g->mem_used < 0 || g->mem_total < 0 || g->mem_total < g->mem_used)
			return 0;
		*v = (double)((g->mem_total - g->mem_used) / (1024 * 1024));
		return 1;
	}
}

/* The DCGM exporter's labels of GPU i: gpu, UUID, device, modelName, Hostname, pciBusID. */
static void gpu_labels(char *out, size_t cap, const herd_telemetry_sample *s, int i)
{
	const herd_telemetry_gpu *g = &s->gpus[i];
	char uuid[2 * HERD_NAME_LEN], name[2 * HERD_NAME_LEN], host[2 * HERD_NAME_LEN];
	char bus[2 * HERD_PCI_ID_LEN];

	escape_label(uuid, sizeof(uuid), g->uuid);
	escape_label(name, sizeof(name), g->name);
	escape_label(host, sizeof(host), s->host);
	escape_label(bus, sizeof(bus), g->bus_id);
	snprintf(out, cap,
		 "gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\",modelName=\"%s\",Hostname=\"%s\",pciBusID=\"%s\"",
		 g->index, uuid, g->index, name, host, bus);
}

static void put_gpus(herd__buf *b, const herd_telemetry_sample *s,
		     char (*labels)[LABELS_MAX])
{
	for (size_t f = 0; f < sizeof(gpu_families) / sizeof(gpu_families[0]); f++) {
		const gpu_family *fam = &gpu_families[f];
		int header = 0;

		for (int i = 0; i < s->ngpus; i++) {
			double v;

			if (!gpu_value(fam, &s->gpus[i], &v))
				continue;
			if (!header) {
				family(b, fam->name, fam->type, fam->help);
				header = 1;
			}
			put_value(b, fam->name, labels[i], v);
		}
	}
}

/* ---- GPU processes and jobs --------------------------------------------- */

static void put_procs(herd__buf *b, const herd_telemetry_sample *s,
		      char (*labels)[LABELS_MAX])
{
	int njobs = 0, header = 0;

	if (s->ngpus > 0) {
		family(b, "herd_gpu_processes", "gauge", "Processes using the GPU.");
		for (int i = 0; i < s->ngpus; i++) {
			int n = 0;

			char uuid[2 * HERD_NAME_LEN], line[3 * HERD_NAME_LEN];

			for (int p = 0; p < s->nprocs; p++)
				n += s->procs[p].gpu == i;
			escape_label(uuid, sizeof(uuid), s->gpus[i].uuid);
			snprintf(line, sizeof(line), "gpu=\"%d\",UUID=\"%s\"", s->gpus[i].index, uuid);
			put_value(b, "herd_gpu_processes", line, n);
		}
	}
	for (int p = 0; p < s->nprocs; p++) {
		const herd_telemetry_proc *pr = &s->procs[p];
		char job[2 * HERD_NAME_LEN], comm[64], uuid[2 * HERD_NAME_LEN];
		char line[LABELS_MAX];

		if (pr->gpu < 0 || pr->gpu >= s->ngpus)
			continue;
		if (!header++)
			family(b, "herd_gpu_process", "gauge",
			       "A process using the GPU, with its herd or Slurm job and rank (always 1).");
		escape_label(job, sizeof(job), pr->job);
		escape_label(comm, sizeof(comm), pr->comm);
		escape_label(uuid, sizeof(uuid), s->gpus[pr->gpu].uuid);
		snprintf(line, sizeof(line),
			 "gpu=\"%d\",UUID=\"%s\",pid=\"%" PRId64 "\",comm=\"%s\",job=\"%s\",rank=\"%d\"",
			 s->gpus[pr->gpu].index, uuid, pr->pid, comm, job, pr->rank);
		put_value(b, "herd_gpu_process", line, 1);
	}

	/* herd_job_ranks: the distinct ranks of each job seen on this node's GPUs. */
	for (int p = 0; p < s->nprocs; p++) {
		const herd_telemetry_proc *pr = &s->procs[p];
		char job[2 * HERD_NAME_LEN], line[3 * HERD_NAME_LEN];
		int seen = 0, ranks = 0;

		if (pr->job[0] == '\0')
			continue;
		for (int q = 0; q < p && !seen; q++)
			seen = strcmp(s->procs[q].job, pr->job) == 0;
		if (seen)
			continue;
		/* Count each rank of this job once (a rank may hold several GPUs). */
		for (int q = p; q < s->nprocs; q++) {
			int dup = 0;

			if (strcmp(s->procs[q].job, pr->job) != 0)
				continue;
			for (int r = p; r < q && !dup; r++)
				dup = strcmp(s->procs[r].job, pr->job) == 0 &&
				      s->procs[r].rank == s->procs[q].rank &&
				      s->procs[r].pid == s->procs[q].pid;
			if (!dup)
				ranks++;
		}
		if (njobs++ == 0)
			family(b, "herd_job_ranks", "gauge",
			       "Processes of the job (one per rank) using GPUs of this node.");
		escape_label(job, sizeof(job), pr->job);
		snprintf(line, sizeof(line), "job=\"%s\"", job);
		put_value(b, "herd_job_ranks", line, ranks);
	}
}

/* ---- the node ----------------------------------------------------------- */

static void put_node(herd__buf *b, const herd_telemetry_sample *s)
{
	char line[3 * HERD_NAME_LEN], dev[2 * HERD_NAME_LEN];

	if (s->cpu_busy >= 0) {
		family(b, "herd_node_cpu_busy_percent", "gauge",
		       "Percent of the last period the node's CPUs were busy, all together.");
		put_value(b, "herd_node_cpu_busy_percent", "", s->cpu_busy);
		family(b, "herd_node_cpu_core_busy_percent", "gauge",
		       "Percent of the last period each CPU was busy.");
		for (int c = 0; c < s->ncpus; c++) {
			snprintf(line, sizeof(line), "cpu=\"%d\"", c);
			put_value(b, "herd_node_cpu_core_busy_percent", line, s->cpu_core[c]);
		}
	}
	if (s->load1 >= 0) {
		family(b, "herd_node_load1", "gauge", "1-minute load average.");
		put_value(b, "herd_node_load1", "", s->load1);
	}
	if (s->mem_total >= 0) {
		family(b, "herd_node_memory_total_bytes", "gauge", "Memory of the node (MemTotal).");
		put_value(b, "herd_node_memory_total_bytes", "", (double)s->mem_total);
	}
	if (s->mem_available >= 0) {
		family(b, "herd_node_memory_available_bytes", "gauge",
		       "Memory available to start new programs (MemAvailable).");
		put_value(b, "herd_node_memory_available_bytes", "", (double)s->mem_available);
	}

	static const struct {
		const char *name, *help;
		int disk;
		size_t off;
	} counters[] = {
		{ "herd_node_network_receive_bytes_total", "Bytes received by the interface.",
		  0, offsetof(herd_telemetry_net, rx_bytes) },
		{ "herd_node_network_transmit_bytes_total", "Bytes sent by the interface.",
		  0, offsetof(herd_telemetry_net, tx_bytes) },
		{ "herd_node_disk_read_bytes_total", "Bytes read from the disk.",
		  1, offsetof(herd_telemetry_disk, read_bytes) },
		{ "herd_node_disk_written_bytes_total", "Bytes written to the disk.",
		  1, offsetof(herd_telemetry_disk, write_bytes) },
	};
	for (size_t k = 0; k < sizeof(counters) / sizeof(counters[0]); k++) {
		int n = counters[k].disk ? s->ndisks : s->nnets;

		if (n <= 0)
			continue;
		family(b, counters[k].name, "counter", counters[k].help);
		for (int i = 0; i < n; i++) {
			const char *base = counters[k].disk ? (const char *)&s->disks[i]
							    : (const char *)&s->nets[i];
			const char *name = counters[k].disk ? s->disks[i].name : s->nets[i].name;
			uint64_t v;

			memcpy(&v, base + counters[k].off, sizeof(v));
			escape_label(dev, sizeof(dev), name);
			snprintf(line, sizeof(line), "device=\"%s\"", dev);
			put(b, "%s{%s} %" PRIu64 "\n", counters[k].name, line, v);
		}
	}
}

herd_status herd_telemetry_exposition(const herd_telemetry_sample *s, char **out, size_t *len)
{
	char (*labels)[LABELS_MAX];
	herd__buf b;
	herd_status st;

	if (s == NULL || out == NULL)
		return herd__error(HERD_EINVAL,
				   "telemetry exposition: the sample and the output are required");
	*out = NULL;
	if (len != NULL)
		*len = 0;
	if (s->ngpus < 0 || s->ngpus > HERD_TELEMETRY_MAX_GPUS || s->nprocs < 0 ||
	    s->nprocs > HERD_TELEMETRY_MAX_PROCS || s->ncpus < 0 ||
	    s->ncpus > HERD_TELEMETRY_MAX_CPUS || s->nnets < 0 ||
	    s->nnets > HERD_TELEMETRY_MAX_NETS || s->ndisks < 0 ||
	    s->ndisks > HERD_TELEMETRY_MAX_DISKS)
		return herd__error(HERD_EINVAL,
				   "telemetry exposition: sample %" PRIu64
				   ": a count is outside telemetry.h's caps",
				   s->seq);
	labels = calloc(HERD_TELEMETRY_MAX_GPUS, sizeof(*labels));
	if (labels == NULL)
		return herd__error(HERD_ENOMEM, "telemetry exposition: out of memory");
	for (int i = 0; i < s->ngpus; i++)
		gpu_labels(labels[i], sizeof(labels[i]), s, i);

	herd__buf_init(&b, EXPOSITION_MAX);
	put_gpus(&b, s, labels);
	put_procs(&b, s, labels);
	put_node(&b, s);
	free(labels);
	size_t n = 0;
	st = herd__buf_take(&b, "telemetry exposition", out, &n);
	if (st == HERD_OK && len != NULL)
		*len = n;
	return st;
}
