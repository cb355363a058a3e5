/*
 * tests/mock/nvml_mock.c - a stand-in libnvidia-ml.so.1 for machines with no
 * GPU, so that discovery's real NVML path (dlopen, symbol lookup, bus id
 * normalization, NVLink counting) runs in CI.  It reports three H100s in an
 * order that is not PCI order:
 *   index 0  0000:9A:00.0  6 links to 0000:1B:00.0, 12 links to NVSwitches
 *   index 1  0000:1B:00.0  6 links to 0000:9A:00.0, 12 links to NVSwitches
 *   index 2  0000:5D:00.0  no NVLink
 * The ABI matches nvml.h (API version 12) for the entry points used.  The
 * health queries at the end report healthy idle GPUs unless told a fault.
 */
#include <stdio.h>
#include <string.h>

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

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	m->total = 85520809984ull;
	m->free = m->total;
	m->used = 0;
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
 * The health queries: every GPU healthy and idle, unless
 * HERD_NVML_MOCK_FAULT names a fault of the GPU at index 1:
 *   ecc      2 uncorrected errors since the driver loaded
 *   rows     a row remapping pending
 *   thermal  a hardware thermal slowdown, at 90 C of a slowdown at 87 C
 *   pcie     a link of 8 lanes in a slot of 16
 */
#include <stdlib.h>

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
	*n = type == 1 && fault(d, "ecc") ? 2 : type == 0 && counter == 1 ? 5 : 0;
	return OK;
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
	*t = fault(d, "thermal") ? 90 : 41;
	return OK;
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int which, unsigned int *t)
{
	(void)d;
	*t = which == 1 ? 87 : 92;
	return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	(void)d;
	*mw = 72000;
	return OK;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
	(void)d;
	*mw = 700000;
	return OK;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	(void)d;
	*mhz = type == 2 ? 2619 : 345;
	return OK;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	(void)d;
	*mhz = type == 2 ? 2619 : 1980;
	return OK;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
	*r = fault(d, "thermal") ? 0x40 : 0x1;
	return OK;
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
