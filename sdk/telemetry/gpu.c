/*
 * sdk/telemetry/gpu.c - the GPU part of a sample: NVML's figures of each
 * GPU through sdk/topo's NVML session (topo/nvml.h), the Xid records the
 * kernel log gains (topo/kernel_log.h), and the processes on each GPU,
 * named with their job and rank from their environment or the GPU's lease
 * record (alloc's reader).
 *
 * Every figure comes from one NVML query; a query the driver lacks (an
 * entry point left NULL) or refuses leaves its figure at -1.  Counters
 * (NVLink, PCIe bytes) become rates over the time between two reads, by
 * NVML's own timestamps of the two values where it gives them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "base.h"
#include "comm/trace.h"
#include "telemetry_internal.h"
#include "topo/kernel_log.h"
#include "topo/nvml.h"

/* The most of a process's /proc/PID/environ read. */
#define ENVIRON_MAX (64 * 1024)
/* Entries of NVML's process lists asked for at first, and at most. */
#define PROCS_FIRST 64
#define PROCS_MAX 4096
/* The inode of the initial pid namespace (the kernel's PROC_PID_INIT_INO). */
#define PID_INIT_INO 0xEFFFFFFCu
/* Reads of the kernel log at open (its history) and per sample after. */
#define KLOG_READS_AT_OPEN 1000000L
#define KLOG_READS_PER_READ 10000L

/* A counter of the driver's and its previous value, for a rate. */
struct counter {
	bool have;
	uint64_t value;
	int64_t nvml_us;        /* when NVML read it, microseconds since 1970; 0: not given */
	int64_t mono_ns;        /* when we read it */
};

enum { C_NVLINK_TX, C_NVLINK_RX, C_PCIE_TX, C_PCIE_RX, C_COUNT };

/* The fields asked of nvmlDeviceGetFieldValues, in the order above, and
 * what turns each counter into bytes. */
static const struct {
	unsigned int id;
	unsigned int scope;
	double bytes;
} counter_fields[C_COUNT] = {
	{ NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, UINT_MAX, 1024.0 },    /* KiB, all links */
	{ NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, UINT_MAX, 1024.0 },
	{ NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0, 1.0 },
	{ NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0, 1.0 },
};

struct tgpu_dev {
	herd__nvml_gpu nv;
	char uuid[HERD_NAME_LEN];
	char name[HERD_NAME_LEN];
	int64_t xid, xid_count;
	struct counter counters[C_COUNT];
};

struct herd__tgpu {
	herd__nvml nvml;
	struct tgpu_dev *gpus;
	size_t ngpus;
	herd__klog log;
	bool log_open;
	bool counting;              /* false while the log's history is read */
	bool host_pids;             /* this /proc names the pids NVML gives */
	char *lease_dir;            /* NULL: herd_lease_dir's default */
	nvmlProcessInfo_t *procs;   /* NVML's process lists land here */
	unsigned int procs_cap;
	char *env_buf;              /* ENVIRON_MAX + 1 bytes */
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t clamp_u64(unsigned long long v)
{
	return v > (unsigned long long)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* ---- Xid ------------------------------------------------------------------------ */

static void xid_line(const char *line, void *arg)
{
	herd__tgpu *g = arg;

	if (!herd__xid_line(line))
		return;
	for (size_t i = 0; i < g->ngpus; i++) {
		int code = herd__xid_of(line, g->gpus[i].nv.bus_id);

		if (code <= 0)
			continue;
		g->gpus[i].xid = code;
		if (g->counting)
			g->gpus[i].xid_count++;
	}
}

/* ---- open and close ------------------------------------------------------------- */

void herd__tgpu_close(herd__tgpu *g)
{
	if (g == NULL)
		return;
	if (g->log_open)
		herd__klog_close(&g->log);
	herd__nvml_close(&g->nvml);
	free(g->gpus);
	free(g->lease_dir);
	free(g->procs);
	free(g->env_buf);
	free(g);
}

/*
 * NVML gives pids as the host's initial pid namespace numbers them; in
 * another (a container's), /proc/PID is some other process or none, and
 * naming a process from it would be a guess.
 */
static bool in_init_pid_namespace(void)
{
	struct stat sb;

	return stat("/proc/self/ns/pid", &sb) == 0 && sb.st_ino == PID_INIT_INO;
}

/* A GPU's identity, read once: NVML's index and bus id, UUID and name. */
static void gpu_identity(herd__tgpu *g, struct tgpu_dev *d, const herd__nvml_gpu *nv)
{
	char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

	d->nv = *nv;
	if (g->nvml.api.uuid(nv->dev, text, sizeof(text)) == NVML_SUCCESS) {
		text[sizeof(text) - 1] = '\0';
		herd__strlcpy(d->uuid, text, sizeof(d->uuid));
	}
	if (g->nvml.api.name(nv->dev, text, sizeof(text)) == NVML_SUCCESS) {
		text[sizeof(text) - 1] = '\0';
		herd__strlcpy(d->name, text, sizeof(d->name));
	}
}

herd_status herd__tgpu_open(herd__tgpu **out, const char *lease_dir, char *why, size_t cap)
{
	herd__nvml_gpu *found = NULL;
	herd__tgpu *g = NULL;
	char log_why[300];
	size_t n = 0;
	herd_status st;

	if (out == NULL || why == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "GPU telemetry: out and why must not be NULL");
	*out = NULL;
	why[0] = '\0';
	HERD_CHECK(herd__calloc(&g, 1, sizeof(*g), "a GPU sampler"));
	g->log.fd = -1;
	if (!herd__nvml_open(&g->nvml, why, cap)) {
		free(g);
		return herd__error(HERD_EUNAVAIL, "%s", why);
	}
	st = herd__nvml_gpus(&g->nvml, &found, &n, why, cap);
	if (st == HERD_EUNAVAIL)
		st = herd__error(HERD_EUNAVAIL, "%s", why);
	if (st == HERD_OK)
		st = herd__calloc(&g->gpus, n, sizeof(*g->gpus), "GPUs");
	if (st == HERD_OK && lease_dir != NULL)
		st = herd__strdup(&g->lease_dir, lease_dir);
	if (st == HERD_OK)
		st = herd__calloc(&g->procs, PROCS_FIRST, sizeof(*g->procs), "GPU processes");
	if (st == HERD_OK)
		st = herd__calloc(&g->env_buf, ENVIRON_MAX + 1, 1, "a process environment");
	if (st != HERD_OK) {
		free(found);
		herd__tgpu_close(g);
		return st;
	}
	g->procs_cap = PROCS_FIRST;
	g->host_pids = in_init_pid_namespace();
	for (size_t i = 0; i < n; i++)
		gpu_identity(g, &g->gpus[i], &found[i]);
	g->ngpus = n;
	free(found);
	/* The last Xid of each GPU from the log's history; count from now on. */
	g->log_open = herd__klog_open(&g->log, log_why, sizeof(log_why));
	if (g->log_open)
		herd__klog_read(&g->log, xid_line, g, false, KLOG_READS_AT_OPEN);
	else
		herd__log_debug("GPU telemetry: no Xid events: %s", log_why);
	g->counting = true;
	*out = g;
	return HERD_OK;
}

/* ---- figures -------------------------------------------------------------------- */

/* A field's value as an unsigned 64-bit counter; false when it has none. */
static bool field_u64(const nvmlFieldValue_t *f, uint64_t *out)
{
	if (f->nvmlReturn != NVML_SUCCESS)
		return false;
	switch (f->valueType) {
	case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
		*out = f->value.ullVal;
		return true;
	case NVML_VALUE_TYPE_UNSIGNED_LONG:
		*out = f->value.ulVal;
		return sizeof(unsigned long) == 8;
	case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
		*out = (uint64_t)f->value.sllVal;
		return f->value.sllVal >= 0;
	default:
		/* a 32-bit counter wraps within a second at link speeds: no rate */
		return false;
	}
}

/*
 * The rate of counter c in bytes per second since its previous value, and
 * c moved on to f's value; -1 on the first value, after a gap, or when the
 * counter went back (a driver reload).
 */
static double counter_rate(struct counter *c, const nvmlFieldValue_t *f, double bytes,
			   int64_t now_ns)
{
	struct counter prev = *c;
	uint64_t v;
	double dt;

	if (!field_u64(f, &v)) {
		c->have = false;
		return -1;
	}
	c->have = true;
	c->value = v;
	c->nvml_us = f->timestamp > 0 ? f->timestamp : 0;
	c->mono_ns = now_ns;
	if (!prev.have || v < prev.value)
		return -1;
	if (c->nvml_us > 0 && prev.nvml_us > 0 && c->nvml_us > prev.nvml_us)
		dt = (double)(c->nvml_us - prev.nvml_us) / 1e6;
	else
		dt = (double)(now_ns - prev.mono_ns) / 1e9;
	return dt > 0 ? (double)(v - prev.value) * bytes / dt : -1;
}

static void gpu_counters(herd__tgpu *g, struct tgpu_dev *d, herd_telemetry_gpu *o,
			 int64_t now_ns)
{
	nvmlFieldValue_t f[C_COUNT];
	double rate[C_COUNT];
	unsigned int kb;

	memset(f, 0, sizeof(f));
	for (int i = 0; i < C_COUNT; i++) {
		f[i].fieldId = counter_fields[i].id;
		f[i].scopeId = counter_fields[i].scope;
	}
	/* NVLink and PCIe asked apart: a driver without the PCIe counters
	 * must not cost the NVLink ones. */
	for (int i = 0; i < C_COUNT; i += 2)
		if (HERD__NVML_CALL(&g->nvml, field_values, d->nv.dev, 2, &f[i]) != NVML_SUCCESS)
			f[i].nvmlReturn = f[i + 1].nvmlReturn = NVML_ERROR_FUNCTION_NOT_FOUND;
	for (int i = 0; i < C_COUNT; i++)
		rate[i] = counter_rate(&d->counters[i], &f[i], counter_fields[i].bytes, now_ns);
	o->nvlink_tx_bps = rate[C_NVLINK_TX];
	o->nvlink_rx_bps = rate[C_NVLINK_RX];
	o->pcie_tx_bps = rate[C_PCIE_TX];
	o->pcie_rx_bps = rate[C_PCIE_RX];
	/*
	 * Without PCIe byte counters, NVML's throughput query: a count over
	 * its own 20 ms window, in KB/s (nvml.h), so there on every read.
	 */
	if (!d->counters[C_PCIE_TX].have &&
	    HERD__NVML_CALL(&g->nvml, pcie_throughput, d->nv.dev, NVML_PCIE_UTIL_TX_BYTES, &kb) ==
		    NVML_SUCCESS)
		o->pcie_tx_bps = kb * 1024.0;
	if (!d->counters[C_PCIE_RX].have &&
	    HERD__NVML_CALL(&g->nvml, pcie_throughput, d->nv.dev, NVML_PCIE_UTIL_RX_BYTES, &kb) ==
		    NVML_SUCCESS)
		o->pcie_rx_bps = kb * 1024.0;
}

static void gpu_figures(herd__tgpu *g, struct tgpu_dev *d, herd_telemetry_gpu *o, int64_t now_ns)
{
	herd__nvml *n = &g->nvml;
	nvmlDevice_t dev = d->nv.dev;
	nvmlUtilization_t u;
	nvmlMemory_t m;
	unsigned long long ull;
	unsigned int v;
	nvmlReturn_t rc;

	if (HERD__NVML_CALL(n, utilization, dev, &u) == NVML_SUCCESS) {
		o->util_gpu = u.gpu;
		o->util_mem = u.memory;
	}
	if (HERD__NVML_CALL(n, memory_info, dev, &m) == NVML_SUCCESS) {
		o->mem_used = clamp_u64(m.used);
		o->mem_total = clamp_u64(m.total);
	}
	if (HERD__NVML_CALL(n, power_usage, dev, &v) == NVML_SUCCESS)
		o->power_w = v / 1000.0;
	if (HERD__NVML_CALL(n, power_limit, dev, &v) == NVML_SUCCESS)
		o->power_limit_w = v / 1000.0;
	if (HERD__NVML_CALL(n, energy, dev, &ull) == NVML_SUCCESS)
		o->energy_mj = clamp_u64(ull);
	if (HERD__NVML_CALL(n, temperature, dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
		o->temp_c = v;
	if (HERD__NVML_CALL(n, clock, dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
		o->sm_clock_mhz = v;
	if (HERD__NVML_CALL(n, clock, dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
		o->mem_clock_mhz = v;
	/* nvmlDeviceGetCurrentClocksEventReasons replaced ...ThrottleReasons (R535). */
	rc = HERD__NVML_CALL(n, clock_events, dev, &ull);
	if (rc == NVML_ERROR_FUNCTION_NOT_FOUND)
		rc = HERD__NVML_CALL(n, throttle_reasons, dev, &ull);
	if (rc == NVML_SUCCESS)
		o->throttle = clamp_u64(ull);
	if (HERD__NVML_CALL(n, ecc_total, dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
			    &ull) == NVML_SUCCESS)
		o->ecc_sbe = clamp_u64(ull);
	if (HERD__NVML_CALL(n, ecc_total, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
			    NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
		o->ecc_dbe = clamp_u64(ull);
	gpu_counters(g, d, o, now_ns);
}

/* The GPU's identity, every figure -1 (unknown) and its Xid state. */
static void gpu_blank(const herd__tgpu *g, const struct tgpu_dev *d, herd_telemetry_gpu *o)
{
	memset(o, 0, sizeof(*o));
	o->index = (int)d->nv.index;
	herd__strlcpy(o->uuid, d->uuid, sizeof(o->uuid));
	herd__strlcpy(o->bus_id, d->nv.bus_id, sizeof(o->bus_id));
	herd__strlcpy(o->name, d->name, sizeof(o->name));
	o->util_gpu = o->util_mem = -1;
	o->mem_used = o->mem_total = -1;
	o->power_w = o->power_limit_w = -1;
	o->energy_mj = -1;
	o->temp_c = o->sm_clock_mhz = o->mem_clock_mhz = -1;
	o->throttle = o->ecc_sbe = o->ecc_dbe = -1;
	o->xid = g->log_open ? d->xid : -1;
	o->xid_count = g->log_open ? d->xid_count : -1;
	o->pcie_tx_bps = o->pcie_rx_bps = o->nvlink_tx_bps = o->nvlink_rx_bps = -1;
}

/* ---- processes ------------------------------------------------------------------ */

/* Copies src, at most cap - 1 bytes, control characters made '?'. */
static void copy_clean(char *dst, size_t cap, const char *src, size_t len)
{
	size_t n = 0;

	for (; n < len && src[n] != '\0' && n + 1 < cap; n++)
		dst[n] = (unsigned char)src[n] < 0x20 || src[n] == 0x7f ? '?' : src[n];
	dst[n] = '\0';
}

/* A small file of /proc, or -1. */
static ssize_t read_proc(int64_t pid, const char *what, char *buf, size_t cap)
{
	char path[64];
	size_t have = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/%s", (long long)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	while (have < cap) {
		ssize_t r = read(fd, buf + have, cap - have);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		have += (size_t)r;
	}
	close(fd);
	return (ssize_t)have;
}

static int parse_rank(const char *s)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno == 0 && *end == '\0' && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

/*
 * The job and rank in the environment the process started with: HERD_JOB_ID
 * and HERD_RANK, else SLURM_JOB_ID and SLURM_PROCID, else RANK (torchrun)
 * with no job; and a herd rank's straggler mark, from its flight recorder
 * in HERD_TRACE_DIR.  False when /proc does not let us read it or it names
 * none.
 */
static bool proc_env(herd__tgpu *g, herd_telemetry_proc *p)
{
	static const char *const keys[] = { "HERD_JOB_ID=", "HERD_RANK=", "SLURM_JOB_ID=",
					     "SLURM_PROCID=", "RANK=", "HERD_TRACE_DIR=" };
	const char *val[6] = { NULL, NULL, NULL, NULL, NULL, NULL };
	ssize_t n = read_proc(p->pid, "environ", g->env_buf, ENVIRON_MAX);
	size_t at = 0;

	if (n <= 0)
		return false;
	/* Only entries ended by their NUL: the last of a cut read is left out. */
	while (at < (size_t)n) {
		const char *e = g->env_buf + at;
		const char *nul = memchr(e, '\0', (size_t)n - at);

		if (nul == NULL)
			break;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strncmp(e, keys[k], strlen(keys[k])) == 0)
				val[k] = e + strlen(keys[k]);
		at = (size_t)(nul - g->env_buf) + 1;
	}
	for (size_t k = 0; k < 4; k += 2) {
		if (val[k] != NULL && val[k][0] != '\0') {
			copy_clean(p->job, sizeof(p->job), val[k], strlen(val[k]));
			p->rank = parse_rank(val[k + 1]);
			if (k == 0 && val[5] != NULL && p->rank >= 0) {
				int64_t late = herd__trace_marked(val[5], p->rank, (long)p->pid);

				p->late_ms = late > 0 ? (double)late / 1e6 : 0;
			}
			return true;
		}
	}
	if (parse_rank(val[4]) >= 0) {
		p->rank = parse_rank(val[4]);
		return true;
	}
	return false;
}

/* The job in the lease record of the GPU, "" when it has none (read once
 * per GPU and sample). */
static void lease_job(herd__tgpu *g, const struct tgpu_dev *d, char job[HERD_NAME_LEN])
{
	herd_lease_opts o = HERD_LEASE_OPTS_INIT;
	herd_alloc_gpu_status st;

	job[0] = '\0';
	if (d->uuid[0] == '\0')
		return;
	o.dir = g->lease_dir;
	memset(&st, 0, sizeof(st));
	herd__strlcpy(st.uuid, d->uuid, sizeof(st.uuid));
	if (herd__lease_query(&o, &st, 1) != HERD_OK || st.state != HERD_LEASE_EXCLUSIVE)
		return;
	/* a holder without a job id writes "-" */
	if (strcmp(st.job, "-") != 0)
		herd__strlcpy(job, st.job, HERD_NAME_LEN);
}

/* The entries of one of NVML's process lists into g->procs; *count 0 when
 * the driver lacks the list or fails. */
static herd_status list_procs(herd__tgpu *g, herd__nvml_procs_fn fn, nvmlDevice_t dev,
			      unsigned int *count, int *untold)
{
	*count = 0;
	for (int tries = 0; fn != NULL && tries < 4; tries++) {
		unsigned int n = g->procs_cap;
		nvmlReturn_t rc = fn(dev, &n, g->procs);
		nvmlProcessInfo_t *more;

		if (rc == NVML_SUCCESS) {
			*count = n < g->procs_cap ? n : g->procs_cap;
			return HERD_OK;
		}
		if (rc != NVML_ERROR_INSUFFICIENT_SIZE || n <= g->procs_cap)
			return HERD_OK;
		if (g->procs_cap >= PROCS_MAX) {
			*untold += (int)(n > INT_MAX / 2 ? INT_MAX / 2 : n);
			return HERD_OK;
		}
		/* a few more than asked for: the list may grow meanwhile */
		n = n + 16 < PROCS_MAX ? n + 16 : PROCS_MAX;
		more = realloc(g->procs, n * sizeof(*more));
		if (more == NULL)
			return herd__error(HERD_ENOMEM, "out of memory listing %u GPU processes", n);
		g->procs = more;
		g->procs_cap = n;
	}
	return HERD_OK;
}

struct proc_ctx {
	struct tgpu_dev *d;
	int gpu;
	int first;                  /* the GPU's first entry in s->procs */
	bool lease_read;
	char lease[HERD_NAME_LEN];
};

static void proc_add(herd__tgpu *g, struct proc_ctx *c, const nvmlProcessInfo_t *info,
		     herd_telemetry_sample *s)
{
	herd_telemetry_proc *p;
	char comm[64];
	ssize_t n;

	/* A process in both lists (compute and graphics) is listed once. */
	for (int i = c->first; i < s->nprocs; i++)
		if (s->procs[i].pid == (int64_t)info->pid)
			return;
	if (s->nprocs >= HERD_TELEMETRY_MAX_PROCS) {
		s->dropped++;
		return;
	}
	p = &s->procs[s->nprocs++];
	memset(p, 0, sizeof(*p));
	p->gpu = c->gpu;
	p->pid = info->pid;
	p->mem_used = info->usedGpuMemory == NVML_VALUE_NOT_AVAILABLE_ULL
			      ? -1 : clamp_u64(info->usedGpuMemory);
	p->rank = -1;
	n = g->host_pids ? read_proc(p->pid, "comm", comm, sizeof(comm) - 1) : -1;
	if (n > 0) {
		while (n > 0 && comm[n - 1] == '\n')
			n--;
		copy_clean(p->comm, sizeof(p->comm), comm, (size_t)n);
	}
	if (g->host_pids && proc_env(g, p))
		return;
	if (!c->lease_read) {
		lease_job(g, c->d, c->lease);
		c->lease_read = true;
	}
	herd__strlcpy(p->job, c->lease, sizeof(p->job));
}

static herd_status gpu_procs(herd__tgpu *g, int gpu, herd_telemetry_sample *s)
{
	struct tgpu_dev *d = &g->gpus[gpu];
	herd__nvml_api *api = &g->nvml.api;
	herd__nvml_procs_fn lists[2] = {
		api->compute_procs_v3 != NULL ? api->compute_procs_v3 : api->compute_procs_v2,
		api->graphics_procs_v3 != NULL ? api->graphics_procs_v3 : api->graphics_procs_v2,
	};
	struct proc_ctx c = { .d = d, .gpu = gpu, .first = s->nprocs };

	for (int l = 0; l < 2; l++) {
		unsigned int count = 0;

		HERD_CHECK(list_procs(g, lists[l], d->nv.dev, &count, &s->dropped));
		for (unsigned int i = 0; i < count; i++)
			proc_add(g, &c, &g->procs[i], s);
	}
	return HERD_OK;
}

/* ---- a read --------------------------------------------------------------------- */

herd_status herd__tgpu_read(herd__tgpu *g, herd_telemetry_sample *s, unsigned parts)
{
	bool figures = (parts & HERD_TELEMETRY_GPU) != 0;
	size_t n;
	int64_t now;

	if (g == NULL || s == NULL)
		return herd__error(HERD_EINVAL, "GPU telemetry: reading with no sampler or sample");
	s->ngpus = 0;
	s->nprocs = 0;
	if (!figures && (parts & HERD_TELEMETRY_PROCS) == 0)
		return HERD_OK;
	if (figures && g->log_open)
		herd__klog_read(&g->log, xid_line, g, false, KLOG_READS_PER_READ);
	n = g->ngpus < HERD_TELEMETRY_MAX_GPUS ? g->ngpus : HERD_TELEMETRY_MAX_GPUS;
	s->dropped += (int)(g->ngpus - n);
	now = mono_ns();
	for (size_t i = 0; i < n; i++) {
		gpu_blank(g, &g->gpus[i], &s->gpus[i]);
		if (figures)
			gpu_figures(g, &g->gpus[i], &s->gpus[i], now);
		else
			s->gpus[i].xid = s->gpus[i].xid_count = -1;
	}
	s->ngpus = (int)n;
	if (parts & HERD_TELEMETRY_PROCS)
		for (size_t i = 0; i < n; i++)
			HERD_CHECK(gpu_procs(g, (int)i, s));
	return HERD_OK;
}
