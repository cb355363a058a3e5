/*
 * tests/mock/nvml_mock.c - a stand-in libnvidia-ml.so.1 for machines with no
 * GPU, so that discovery's real NVML path (dlopen, symbol lookup, bus id
 * normalization, NVLink counting) runs in CI.  It reports three H100s in an
 * order that is not PCI order:
 *   index 0  0000:9A:00.0  6 links to 0000:1B:00.0, 12 links to NVSwitches
 *   index 1  0000:1B:00.0  6 links to 0000:9A:00.0, 12 links to NVSwitches
 *   index 2  0000:5D:00.0  no NVLink
 * The ABI matches nvml.h (API version 12) for the entry points used.  The
 * health queries at the end report healthy idle GPUs unless told a fault;
 * the telemetry queries report fixed idle figures unless a test gives
 * others in a state file (HERD_NVML_MOCK_STATE, below).  Built with
 * NVML_MOCK_OLD it plays an old driver that lacks the newer entry points.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct mock_gpu *nvmlDevice_t;

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

enum { OK = 0, INVALID_ARGUMENT = 2, LINKS = 18 };

struct mock_gpu {
	const char *bus_id;
	int peer;          /* index of the directly linked GPU, -1 for none */
	int direct_links;  /* links 0..direct_links-1 go to the peer */
	int switch_links;  /* the next ones go to NVSwitches */
};

static struct mock_gpu gpus[] = {
	{ "00000000:9A:00.0", 1, 6, 12 },
	{ "00000000:1B:00.0", 0, 6, 12 },
	{ "00000000:5D:00.0", -1, 0, 0 },
};
#define NGPUS ((unsigned int)(sizeof(gpus) / sizeof(gpus[0])))

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *on);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int *type);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
						 nvmlPciInfo_t *p);

nvmlReturn_t nvmlSystemGetDriverVersion(char *s, unsigned int n);
nvmlReturn_t nvmlSystemGetDriverVersion(char *s, unsigned int n)
{
	snprintf(s, n, "999.88.77");
	return OK;
}

nvmlReturn_t nvmlInit_v2(void) { return OK; }
nvmlReturn_t nvmlShutdown(void) { return OK; }

const char *nvmlErrorString(nvmlReturn_t r)
{
	return r == INVALID_ARGUMENT ? "Invalid Argument" : "Unknown Error";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = NGPUS;
	return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (i >= NGPUS)
		return INVALID_ARGUMENT;
	*d = &gpus[i];
	return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n)
{
	snprintf(s, n, "GPU-%08x-1111-2222-3333-444444444444", (unsigned int)(d - gpus));
	return OK;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n)
{
	snprintf(s, n, "NVIDIA H100 80GB HBM3");
	return OK;
}

static void fill_pci(nvmlPciInfo_t *p, const char *bus_id)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->busId, sizeof(p->busId), "%s", bus_id);
	snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%s", bus_id + 4);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
	fill_pci(p, d->bus_id);
	return OK;
}

static nvmlReturn_t figure(nvmlDevice_t d, const char *key, unsigned long long dflt,
			   unsigned long long *out);

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	unsigned long long used;
	nvmlReturn_t r = figure(d, "mem_used", 0, &used);

	if (r != OK)
		return r;
	m->total = 85520809984ull;
	m->used = used < m->total ? used : m->total;
	m->free = m->total - m->used;
	return OK;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
	*major = 9;
	*minor = 0;
	return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *on)
{
	if (link >= LINKS)
		return INVALID_ARGUMENT;
	*on = (int)link < d->direct_links + d->switch_links;
	return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int *type)
{
	if (link >= LINKS)
		return INVALID_ARGUMENT;
	*type = (int)link < d->direct_links ? 0 /* GPU */ : 2 /* switch */;
	return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
						 nvmlPciInfo_t *p)
{
	if (link >= LINKS)
		return INVALID_ARGUMENT;
	fill_pci(p, (int)link < d->direct_links ? gpus[d->peer].bus_id : "00000000:C5:00.0");
	return OK;
}

/*
 * The figures of the GPU at index i, from the file HERD_NVML_MOCK_STATE
 * names, read at every call so that a test can change them between two
 * samples.  Lines (later ones win):
 *   gpu I KEY VALUE [KEY VALUE ...]   VALUE a number (0x.. too), or "na":
 *                                     that query answers NOT_SUPPORTED
 *   proc I PID MEMBYTES [graphics]    a process on GPU I (compute unless
 *                                     "graphics"); MEMBYTES "na": unknown
 * Keys: util mem_util mem_used power_mw power_limit_mw energy_mj temp
 * sm_clock mem_clock throttle ecc_sbe ecc_dbe pcie_tx_kbps pcie_rx_kbps
 * (nvmlDeviceGetPcieThroughput), pcie_tx_bytes pcie_rx_bytes nvlink_tx_kib
 * nvlink_rx_kib (counters of nvmlDeviceGetFieldValues), counter_time_us
 * (their timestamp; else the time of the call), lost (nonzero: every
 * figure query answers GPU_IS_LOST), stall_ms (the utilization query
 * sleeps that long first, as a driver call on a GPU that fell off the bus
 * can).  A key not given keeps its idle value.
 */
enum { NOT_SUPPORTED = 3, INSUFFICIENT_SIZE = 7, GPU_IS_LOST = 15 };

/* 1 and *v when the state gives key for d, -1 for "na", 0 when it does not. */
static int state(nvmlDevice_t d, const char *key, unsigned long long *v)
{
	const char *path = getenv("HERD_NVML_MOCK_STATE");
	char line[4096];
	int found = 0;
	FILE *f;

	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *save = NULL, *w = strtok_r(line, " \t\n", &save), *k, *val;

		if (w == NULL || strcmp(w, "gpu") != 0 ||
		    (w = strtok_r(NULL, " \t\n", &save)) == NULL ||
		    strtol(w, NULL, 10) != (long)(d - gpus))
			continue;
		while ((k = strtok_r(NULL, " \t\n", &save)) != NULL &&
		       (val = strtok_r(NULL, " \t\n", &save)) != NULL) {
			if (strcmp(k, key) != 0)
				continue;
			found = strcmp(val, "na") == 0 ? -1 : 1;
			if (found > 0)
				*v = strtoull(val, NULL, 0);
		}
	}
	fclose(f);
	return found;
}

/* A figure query's answer: the state's value for key, else dflt. */
static nvmlReturn_t figure(nvmlDevice_t d, const char *key, unsigned long long dflt,
			   unsigned long long *out)
{
	unsigned long long lost = 0;
	int r;

	if (state(d, "lost", &lost) > 0 && lost != 0)
		return GPU_IS_LOST;
	*out = dflt;
	r = state(d, key, out);
	return r < 0 ? NOT_SUPPORTED : OK;
}

static nvmlReturn_t figure_u(nvmlDevice_t d, const char *key, unsigned int dflt, unsigned int *out)
{
	unsigned long long v;
	nvmlReturn_t r = figure(d, key, dflt, &v);

	if (r == OK)
		*out = (unsigned int)v;
	return r;
}

/*
 * The health queries: every GPU healthy and idle, unless
 * HERD_NVML_MOCK_FAULT names a fault of the GPU at index 1:
 *   ecc      2 uncorrected errors since the driver loaded
 *   rows     a row remapping pending
 *   thermal  a hardware thermal slowdown, at 90 C of a slowdown at 87 C
 *   pcie     a link of 8 lanes in a slot of 16
 */

static int fault(nvmlDevice_t d, const char *what)
{
	const char *f = getenv("HERD_NVML_MOCK_FAULT");

	return d == &gpus[1] && f != NULL && strcmp(f, what) == 0;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *cur, int *pending)
{
	(void)d;
	*cur = *pending = 1;
	return OK;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
					 unsigned long long *n)
{
	if (counter == 1) {
		*n = type == 0 ? 5 : 0;
		return OK;
	}
	return figure(d, type == 0 ? "ecc_sbe" : "ecc_dbe", type == 1 && fault(d, "ecc") ? 2 : 0, n);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
				       unsigned int *pending, unsigned int *failed)
{
	*corr = 1;
	*unc = 0;
	*pending = (unsigned int)fault(d, "rows");
	*failed = 0;
	return OK;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
	(void)sensor;
	return figure_u(d, "temp", fault(d, "thermal") ? 90 : 41, t);
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int which, unsigned int *t)
{
	(void)d;
	*t = which == 1 ? 87 : 92;
	return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	return figure_u(d, "power_mw", 72000, mw);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
	return figure_u(d, "power_limit_mw", 700000, mw);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	return figure_u(d, type == 2 ? "mem_clock" : "sm_clock", type == 2 ? 2619 : 345, mhz);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	(void)d;
	*mhz = type == 2 ? 2619 : 1980;
	return OK;
}

#ifndef NVML_MOCK_OLD
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
	return figure(d, "throttle", fault(d, "thermal") ? 0x40 : 0x1, r);
}
#endif

/* The name before R535, which drivers still export. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r)
{
	return figure(d, "throttle", fault(d, "thermal") ? 0x40 : 0x1, r);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *g)
{
	(void)d;
	*g = 5;
	return OK;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *w)
{
	*w = fault(d, "pcie") ? 8 : 16;
	return OK;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *g)
{
	(void)d;
	*g = 5;
	return OK;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *w)
{
	(void)d;
	*w = 16;
	return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t d, unsigned int *bits)
{
	(void)d;
	*bits = 5120;
	return OK;
}

/* ---- telemetry: utilization, energy, counters, processes ------------------- */

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
	unsigned int fieldId, scopeId;
	long long timestamp, latencyUsec;
	int valueType;            /* 3: unsigned long long */
	nvmlReturn_t nvmlReturn;
	union {
		double dVal;
		unsigned long long ullVal;
	} value;
} nvmlFieldValue_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	unsigned long long stall = 0;
	nvmlReturn_t r;

	if (state(d, "stall_ms", &stall) > 0 && stall > 0) {
		struct timespec ts = { (time_t)(stall / 1000), (long)(stall % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	r = figure_u(d, "util", 0, &u->gpu);

	return r == OK ? figure_u(d, "mem_util", 0, &u->memory) : r;
}

/* A process list of GPU d: the state's "proc" lines of that GPU and kind. */
static nvmlReturn_t procs(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *out,
			  int graphics)
{
	const char *path = getenv("HERD_NVML_MOCK_STATE");
	unsigned long long lost = 0;
	unsigned int n = 0;
	char line[256];
	FILE *f;

	if (state(d, "lost", &lost) > 0 && lost != 0)
		return GPU_IS_LOST;
	f = path != NULL ? fopen(path, "r") : NULL;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		char kind[16] = "", mem[32];
		unsigned int gpu, pid;

		if (sscanf(line, "proc %u %u %31s %15s", &gpu, &pid, mem, kind) < 3 ||
		    gpu != (unsigned int)(d - gpus) || (strcmp(kind, "graphics") == 0) != graphics)
			continue;
		if (n < *count) {
			out[n].pid = pid;
			out[n].usedGpuMemory = strcmp(mem, "na") == 0 ? ~0ull : strtoull(mem, NULL, 0);
			out[n].gpuInstanceId = out[n].computeInstanceId = ~0u;
		}
		n++;
	}
	if (f != NULL)
		fclose(f);
	if (n > *count) {
		*count = n;
		return INSUFFICIENT_SIZE;
	}
	*count = n;
	return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_t *out)
{
	return procs(d, count, out, 0);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
						      nvmlProcessInfo_t *out)
{
	return procs(d, count, out, 1);
}

#ifndef NVML_MOCK_OLD

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_t *out)
{
	return procs(d, count, out, 0);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
						      nvmlProcessInfo_t *out)
{
	return procs(d, count, out, 1);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
	return figure(d, "energy_mj", 5000000, mj);
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned int *kbps)
{
	return figure_u(d, counter == 0 ? "pcie_tx_kbps" : "pcie_rx_kbps", 0, kbps);
}

/* NVLink data counters in KiB (fields 138 and 139, scopeId UINT_MAX: all
 * links) and PCIe byte counters (197, 198); no NVLink, no NVLink fields. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v)
{
	struct timeval tv;
	unsigned long long now;

	gettimeofday(&tv, NULL);
	now = (unsigned long long)tv.tv_sec * 1000000ull + (unsigned long long)tv.tv_usec;
	for (int i = 0; i < n; i++) {
		const char *key = v[i].fieldId == 138 ? "nvlink_tx_kib" : v[i].fieldId == 139 ?
				  "nvlink_rx_kib" : v[i].fieldId == 197 ? "pcie_tx_bytes" :
				  v[i].fieldId == 198 ? "pcie_rx_bytes" : NULL;
		unsigned long long t = now;

		v[i].valueType = 3;
		v[i].latencyUsec = 0;
		if (key == NULL || (v[i].fieldId < 140 && (d->direct_links + d->switch_links == 0 ||
							    v[i].scopeId != 0xffffffffu))) {
			v[i].nvmlReturn = NOT_SUPPORTED;
			continue;
		}
		v[i].nvmlReturn = figure(d, key, 0, &v[i].value.ullVal);
		(void)figure(d, "counter_time_us", now, &t);
		v[i].timestamp = (long long)t;
	}
	return OK;
}

#endif /* !NVML_MOCK_OLD */
