/*
 * sdk/telemetry/exposition.c - the Prometheus text format, version 0.0.4
 * (prometheus.io/docs/instrumenting/exposition_formats): "# HELP" and
 * "# TYPE" once per family before its series, label values escaped
 * (backslash, double quote, newline), values as Go's ParseFloat reads
 * them; and the families of one telemetry sample.
 *
 * GPU families follow NVIDIA's dcgm-exporter: the names, types, units and
 * help texts of its etc/default-counters.csv (DCGM_FI_DEV_SM_CLOCK,
 * DCGM_FI_DEV_MEM_CLOCK, DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE,
 * DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, DCGM_FI_DEV_GPU_UTIL,
 * DCGM_FI_DEV_MEM_COPY_UTIL, DCGM_FI_DEV_XID_ERRORS, DCGM_FI_DEV_FB_USED,
 * DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL), of its
 * etc/dcp-metrics-included.csv for the rates in bytes per second
 * (DCGM_FI_PROF_PCIE_TX_BYTES, _RX_BYTES, DCGM_FI_PROF_NVLINK_TX_BYTES,
 * _RX_BYTES), and DCGM's field names for the rest (DCGM_FI_DEV_FB_TOTAL,
 * DCGM_FI_DEV_ENFORCED_POWER_LIMIT, DCGM_FI_DEV_CLOCKS_EVENT_REASONS);
 * its label set, in its order: gpu (NVML's index), UUID, pci_bus_id
 * (NVML's form, "00000000:1B:00.0"), device ("nvidia0": the device
 * minor number; left out when the driver's /proc does not say), modelName,
 * Hostname.  Its counters keep DCGM's names, which lack the "_total" that
 * promtool's style check asks of counters, and modelName is not
 * snake_case: dashboards made for dcgm-exporter find them as they are.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "telemetry/exposition.h"

#define MIB 1048576.0

static void put(herd__expo *x, const char *s, size_t n)
{
	herd_status st;

	if (x->failed != HERD_OK)
		return;
	st = herd__buf_append(&x->buf, s, n);
	if (st != HERD_OK)
		x->failed = st;
}

static void puts_(herd__expo *x, const char *s)
{
	put(x, s, strlen(s));
}

void herd__expo_family(herd__expo *x, const char *name, const char *type, const char *help)
{
	x->name = name;
	x->type = type;
	x->help = help;
}

void herd__labels_reset(herd__labels *l)
{
	l->len = 0;
	l->text[0] = '\0';
}

/* Appends s to l, or nothing when it does not fit whole. */
static int labels_put(herd__labels *l, const char *s, size_t n)
{
	if (l->len + n + 2 > sizeof(l->text))
		return -1;
	memcpy(l->text + l->len, s, n);
	l->len += n;
	l->text[l->len] = '\0';
	return 0;
}

/* The length of the UTF-8 sequence at p (1 to 4), 0 when it is not one:
 * a stray continuation byte, a sequence cut short, an overlong form, a
 * surrogate or a code point past U+10FFFF. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n;
	uint32_t c;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, c = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, c = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, c = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
	    (n == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;
	return n;
}

/*
 * A label: its value escaped as the exposition format asks, every byte
 * that does not begin a valid UTF-8 sequence written as '?' (a value comes
 * from processes' names, environments and files any user can write, and
 * Prometheus refuses a whole scrape over one invalid label value), and a
 * value too long for the room left cut at a character's boundary.
 */
void herd__labels_add(herd__labels *l, const char *name, const char *value)
{
	size_t mark = l->len;
	char esc[2];

	if (labels_put(l, l->len == 0 ? "{" : ",", 1) != 0 ||
	    labels_put(l, name, strlen(name)) != 0 || labels_put(l, "=\"", 2) != 0)
		goto cut;
	for (const char *p = value; *p != '\0';) {
		size_t n = utf8_len((const unsigned char *)p);
		int r;

		if (*p == '\\' || *p == '"' || *p == '\n') {
			esc[0] = '\\';
			esc[1] = *p == '\n' ? 'n' : *p;
			r = labels_put(l, esc, 2);
		} else {
			r = labels_put(l, n > 0 ? p : "?", n > 0 ? n : 1);
		}
		if (r != 0)
			break; /* a value cut short is still a value */
		p += n > 0 ? n : 1;
	}
	if (labels_put(l, "\"", 1) == 0)
		return;
cut:
	l->len = mark;
	l->text[mark] = '\0';
}

void herd__labels_addi(herd__labels *l, const char *name, int64_t value)
{
	char v[24];

	snprintf(v, sizeof(v), "%" PRId64, value);
	herd__labels_add(l, name, v);
}

/* The start of a series: the family's header first, once. */
static void series(herd__expo *x, const herd__labels *l)
{
	if (x->type != NULL) {
		puts_(x, "# HELP ");
		puts_(x, x->name);
		put(x, " ", 1);
		puts_(x, x->help);
		puts_(x, "\n# TYPE ");
		puts_(x, x->name);
		put(x, " ", 1);
		puts_(x, x->type);
		put(x, "\n", 1);
		x->type = x->help = NULL;
	}
	puts_(x, x->name);
	if (l != NULL && l->len > 0) {
		put(x, l->text, l->len);
		put(x, "}", 1);
	}
	put(x, " ", 1);
}

void herd__expo_value(herd__expo *x, const herd__labels *l, double v)
{
	char b[40];

	if (isnan(v)) {
		snprintf(b, sizeof(b), "NaN");
	} else if (isinf(v)) {
		snprintf(b, sizeof(b), v > 0 ? "+Inf" : "-Inf");
	} else if (fabs(v) < 9e15 && v == (double)(int64_t)v) {
		snprintf(b, sizeof(b), "%" PRId64, (int64_t)v);
	} else {
		/* The shortest of two that reads back as v. */
		snprintf(b, sizeof(b), "%.15g", v);
		if (strtod(b, NULL) != v)
			snprintf(b, sizeof(b), "%.17g", v);
	}
	series(x, l);
	puts_(x, b);
	put(x, "\n", 1);
}

void herd__expo_int(herd__expo *x, const herd__labels *l, int64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "%" PRId64 "\n", v);
	series(x, l);
	puts_(x, b);
}

/* ---- the sample -------------------------------------------------------------- */

/* One per-GPU figure: a double or an int64_t field of herd_telemetry_gpu,
 * divided by div (1: as it is); a negative value is unknown. */
typedef struct gpu_family {
	const char *name, *type, *help;
	size_t off;
	int is_int;
	double div;
} gpu_family;

#define DBL(name, type, field, div, help) \
	{ name, type, help, offsetof(herd_telemetry_gpu, field), 0, div }
#define I64(name, type, field, div, help) \
	{ name, type, help, offsetof(herd_telemetry_gpu, field), 1, div }

/* DCGM's, in default-counters.csv's order, then dcp-metrics-included.csv's. */
static const gpu_family dcgm_families[] = {
	DBL("DCGM_FI_DEV_SM_CLOCK", "gauge", sm_clock_mhz, 1, "SM clock frequency (in MHz)."),
	DBL("DCGM_FI_DEV_MEM_CLOCK", "gauge", mem_clock_mhz, 1,
	    "Memory clock frequency (in MHz)."),
	DBL("DCGM_FI_DEV_GPU_TEMP", "gauge", temp_c, 1, "GPU temperature (in C)."),
	DBL("DCGM_FI_DEV_POWER_USAGE", "gauge", power_w, 1, "Power draw (in W)."),
	DBL("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", power_limit_w, 1,
	    "Power limit the driver enforces (in W)."),
	I64("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", energy_mj, 1,
	    "Total energy consumption since boot (in mJ)."),
	DBL("DCGM_FI_DEV_GPU_UTIL", "gauge", util_gpu, 1, "GPU utilization (in %)."),
	DBL("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", util_mem, 1, "Memory utilization (in %)."),
	I64("DCGM_FI_DEV_XID_ERRORS", "gauge", xid, 1,
	    "Value of the last XID error encountered."),
	I64("DCGM_FI_DEV_FB_USED", "gauge", mem_used, MIB, "Framebuffer memory used (in MiB)."),
	I64("DCGM_FI_DEV_FB_TOTAL", "gauge", mem_total, MIB,
	    "Framebuffer memory total (in MiB)."),
	I64("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", ecc_sbe, 1,
	    "Total number of single-bit volatile ECC errors."),
	I64("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", ecc_dbe, 1,
	    "Total number of double-bit volatile ECC errors."),
	I64("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", throttle, 1,
	    "Clock throttle reasons (NVML's clock event reasons bit mask)."),
	DBL("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", pcie_tx_bps, 1,
	    "The rate of data transmitted over the PCIe bus, in bytes per second."),
	DBL("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", pcie_rx_bps, 1,
	    "The rate of data received over the PCIe bus, in bytes per second."),
	DBL("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", nvlink_tx_bps, 1,
	    "The rate of data transmitted over NVLink, all links, in bytes per second."),
	DBL("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", nvlink_rx_bps, 1,
	    "The rate of data received over NVLink, all links, in bytes per second."),
};

static double gpu_figure(const herd_telemetry_gpu *g, const gpu_family *f)
{
	const char *p = (const char *)g + f->off;
	double v;

	if (f->is_int) {
		int64_t i;

		memcpy(&i, p, sizeof(i));
		v = (double)i;
	} else {
		memcpy(&v, p, sizeof(v));
	}
	return v < 0 ? -1 : v / f->div;
}

/* "0000:1b:00.0" as NVML writes bus ids, "00000000:1B:00.0". */
static void nvml_bus_id(const char *bus_id, char *out, size_t cap)
{
	unsigned dom, bus, dev, fn;
	char end;

	if (sscanf(bus_id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &end) == 4)
		snprintf(out, cap, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
	else
		herd__strlcpy(out, bus_id, cap);
}

static void dcgm_labels(herd__labels *l, const herd_telemetry_sample *s,
			const herd_telemetry_gpu *g, int minor)
{
	char bus[32];

	herd__labels_reset(l);
	herd__labels_addi(l, "gpu", g->index);
	herd__labels_add(l, "UUID", g->uuid);
	nvml_bus_id(g->bus_id, bus, sizeof(bus));
	herd__labels_add(l, "pci_bus_id", bus);
	if (minor >= 0) {
		char dev[24];

		snprintf(dev, sizeof(dev), "nvidia%d", minor);
		herd__labels_add(l, "device", dev);
	}
	herd__labels_add(l, "modelName", g->name);
	herd__labels_add(l, "Hostname", s->host);
}

void herd__expo_gpu_labels(herd__labels *l, const herd_telemetry_gpu *g)
{
	herd__labels_reset(l);
	herd__labels_addi(l, "gpu", g->index);
	herd__labels_add(l, "UUID", g->uuid);
}

static void gpu_families(herd__expo *x, const herd_telemetry_sample *s, const int *minors)
{
	int ngpus = s->ngpus < HERD_TELEMETRY_MAX_GPUS ? s->ngpus : HERD_TELEMETRY_MAX_GPUS;
	int nprocs = s->nprocs < HERD_TELEMETRY_MAX_PROCS ? s->nprocs : HERD_TELEMETRY_MAX_PROCS;
	herd__labels l;

	for (size_t f = 0; f < sizeof(dcgm_families) / sizeof(dcgm_families[0]); f++) {
		const gpu_family *fam = &dcgm_families[f];

		herd__expo_family(x, fam->name, fam->type, fam->help);
		for (int i = 0; i < ngpus; i++) {
			double v = gpu_figure(&s->gpus[i], fam);
			int64_t iv;

			if (v < 0)
				continue;
			dcgm_labels(&l, s, &s->gpus[i], minors[i]);
			/* Counts as they are, past 2^53 too; MiB whole, as DCGM's. */
			if (fam->div == MIB) {
				herd__expo_int(x, &l, (int64_t)v);
			} else if (fam->is_int && fam->div == 1) {
				memcpy(&iv, (const char *)&s->gpus[i] + fam->off, sizeof(iv));
				herd__expo_int(x, &l, iv);
			} else {
				herd__expo_value(x, &l, v);
			}
		}
	}

	/* default-counters.csv's DCGM_FI_DEV_FB_FREE: the total less the used. */
	herd__expo_family(x, "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).");
	for (int i = 0; i < ngpus; i++) {
		const herd_telemetry_gpu *g = &s->gpus[i];

		if (g->mem_total < 0 || g->mem_used < 0 || g->mem_used > g->mem_total)
			continue;
		dcgm_labels(&l, s, g, minors[i]);
		herd__expo_int(x, &l, (int64_t)((g->mem_total - g->mem_used) / (int64_t)MIB));
	}

	herd__expo_family(x, "herd_gpu_xid_events_total", "counter",
			  "Xid events of the GPU in the kernel log since the exporter started.");
	for (int i = 0; i < ngpus; i++) {
		if (s->gpus[i].xid_count < 0)
			continue;
		herd__expo_gpu_labels(&l, &s->gpus[i]);
		herd__expo_int(x, &l, s->gpus[i].xid_count);
	}
	herd__expo_family(x, "herd_gpu_processes", "gauge",
			  "Processes using the GPU (NVML's compute and graphics processes).");
	for (int i = 0; i < ngpus; i++) {
		int n = 0;

		for (int p = 0; p < nprocs; p++)
			n += s->procs[p].gpu == i;
		herd__expo_gpu_labels(&l, &s->gpus[i]);
		herd__expo_int(x, &l, n);
	}
	/* Two families over the same label sets: who, and how much memory. */
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0)
			herd__expo_family(x, "herd_gpu_process_info", "gauge",
					  "A process on the GPU, with its job and rank (1).");
		else
			herd__expo_family(x, "herd_gpu_process_memory_bytes", "gauge",
					  "GPU memory a process uses (in bytes).");
		for (int p = 0; p < nprocs; p++) {
			const herd_telemetry_proc *pr = &s->procs[p];

			if (pr->gpu < 0 || pr->gpu >= ngpus || (pass == 1 && pr->mem_used < 0))
				continue;
			herd__expo_gpu_labels(&l, &s->gpus[pr->gpu]);
			herd__labels_addi(&l, "pid", pr->pid);
			herd__labels_add(&l, "command", pr->comm);
			herd__labels_add(&l, "herd_job", pr->job);
			if (pr->rank >= 0)
				herd__labels_addi(&l, "rank", pr->rank);
			herd__expo_int(x, &l, pass == 0 ? 1 : pr->mem_used);
		}
	}
}

/* What node_exporter calls node_X is herd_node_X here, where the meaning is
 * the same. */
static void node_families(herd__expo *x, const herd_telemetry_sample *s)
{
	int ncpus = s->ncpus < HERD_TELEMETRY_MAX_CPUS ? s->ncpus : HERD_TELEMETRY_MAX_CPUS;
	int nnets = s->nnets < HERD_TELEMETRY_MAX_NETS ? s->nnets : HERD_TELEMETRY_MAX_NETS;
	int ndisks = s->ndisks < HERD_TELEMETRY_MAX_DISKS ? s->ndisks : HERD_TELEMETRY_MAX_DISKS;
	herd__labels l;

	herd__expo_family(x, "herd_node_cpu_busy_percent", "gauge",
			  "Percent of the node's CPU time busy over the sampler's last period.");
	if (s->cpu_busy >= 0)
		herd__expo_value(x, NULL, s->cpu_busy);
	herd__expo_family(x, "herd_node_cpu_core_busy_percent", "gauge",
			  "Percent of a CPU's time busy over the sampler's last period.");
	for (int c = 0; c < ncpus; c++) {
		if (!(s->cpu_core[c] >= 0))
			continue;
		herd__labels_reset(&l);
		herd__labels_addi(&l, "cpu", c);
		herd__expo_value(x, &l, s->cpu_core[c]);
	}
	herd__expo_family(x, "herd_node_load1", "gauge", "1m load average.");
	if (s->load1 >= 0)
		herd__expo_value(x, NULL, s->load1);
	herd__expo_family(x, "herd_node_memory_total_bytes", "gauge",
			  "Memory of the node (MemTotal, in bytes).");
	if (s->mem_total >= 0)
		herd__expo_int(x, NULL, s->mem_total);
	herd__expo_family(x, "herd_node_memory_available_bytes", "gauge",
			  "Memory available to start programs (MemAvailable, in bytes).");
	if (s->mem_available >= 0)
		herd__expo_int(x, NULL, s->mem_available);

	for (int pass = 0; pass < 2; pass++) {
		herd__expo_family(x, pass == 0 ? "herd_node_network_receive_bytes_total"
					       : "herd_node_network_transmit_bytes_total",
				  "counter", pass == 0 ? "Bytes received by the interface."
						       : "Bytes sent by the interface.");
		for (int i = 0; i < nnets; i++) {
			herd__labels_reset(&l);
			herd__labels_add(&l, "device", s->nets[i].name);
			herd__expo_int(x, &l, (int64_t)(pass == 0 ? s->nets[i].rx_bytes
								  : s->nets[i].tx_bytes));
		}
	}
	for (int pass = 0; pass < 3; pass++) {
		static const char *const names[] = { "herd_node_disk_read_bytes_total",
						     "herd_node_disk_written_bytes_total",
						     "herd_node_disk_busy_percent" };
		static const char *const helps[] = {
			"Bytes read from the disk.", "Bytes written to the disk.",
			"Percent of the sampler's last period with I/O in flight on the disk."
		};

		herd__expo_family(x, names[pass], pass < 2 ? "counter" : "gauge", helps[pass]);
		for (int i = 0; i < ndisks; i++) {
			const herd_telemetry_disk *d = &s->disks[i];

			if (pass == 2 && !(d->util >= 0))
				continue;
			herd__labels_reset(&l);
			herd__labels_add(&l, "device", d->name);
			if (pass == 2)
				herd__expo_value(x, &l, d->util);
			else
				herd__expo_int(x, &l, (int64_t)(pass == 0 ? d->read_bytes
									 : d->write_bytes));
		}
	}
	herd__expo_family(x, "herd_node_gpus", "gauge", "GPUs the sampler found (NVML).");
	herd__expo_int(x, NULL, s->ngpus);
	herd__expo_family(x, "herd_telemetry_sample_timestamp_seconds", "gauge",
			  "When the sample shown was taken (Unix time).");
	herd__expo_value(x, NULL, (double)s->time_ms / 1000.0);
	herd__expo_family(x, "herd_telemetry_dropped_items", "gauge",
			  "GPUs, CPUs, interfaces, disks or processes beyond the sample's room.");
	herd__expo_int(x, NULL, s->dropped);
}

void herd__expo_sample(herd__expo *x, const herd_telemetry_sample *s, const int *minors)
{
	gpu_families(x, s, minors);
	node_families(x, s);
}
