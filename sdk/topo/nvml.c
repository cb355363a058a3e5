/*
 * sdk/topo/nvml.c - GPUs and NVLinks from NVML, loaded with dlopen so that
 * libherd has no link-time dependency on the driver and runs where there
 * is none.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

/*
 * The few NVML types used, with the ABI of nvml.h (NVML API version 12,
 * unchanged since the _v2/_v3 entry points below were introduced).
 */
typedef enum nvmlReturn_enum { NVML_SUCCESS = 0 } nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef enum nvmlEnableState_enum {
	NVML_FEATURE_DISABLED = 0,
	NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;
typedef enum nvmlIntNvLinkDeviceType_enum {
	NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
	NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
	NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
	NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct nvmlPciInfo_st {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

/*
 * NVML_NVLINK_MAX_LINKS is 18 today; links past a device's last one answer
 * NVML_ERROR_INVALID_ARGUMENT, so asking about a few more is harmless and
 * keeps working when a GPU generation adds links.
 */
#define HERD_NVML_MAX_LINKS 32

#define HERD_NVML_LIBRARY "libnvidia-ml.so.1"

struct nvml_api {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*device_count)(unsigned int *);
	nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*memory_info)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*cuda_cc)(nvmlDevice_t, int *, int *);
	/* NVLink entry points; NULL in drivers too old to have them. */
	nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
	nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
	nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned int,
					   nvmlIntNvLinkDeviceType_t *);
	nvmlReturn_t (*driver_version)(char *, unsigned int);
	/* for herd health; NULL where the driver lacks them */
	nvmlReturn_t (*ecc_mode)(nvmlDevice_t, nvmlEnableState_t *, nvmlEnableState_t *);
	nvmlReturn_t (*ecc_total)(nvmlDevice_t, int, int, unsigned long long *);
	nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
				      unsigned int *);
	nvmlReturn_t (*retired_pending)(nvmlDevice_t, nvmlEnableState_t *);
	nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*temperature_threshold)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*clock_events)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*throttle_reasons)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*pcie_max_gen)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*pcie_max_width)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*bus_width)(nvmlDevice_t, unsigned int *);
};

#define NVML_SYM(fn, field, required) HERD__DL_SYM(struct nvml_api, fn, field, required)

static const herd__dl_symbol nvml_symbols[] = {
	NVML_SYM(nvmlInit_v2, init, true),
	NVML_SYM(nvmlShutdown, shutdown, true),
	NVML_SYM(nvmlErrorString, error_string, true),
	NVML_SYM(nvmlDeviceGetCount_v2, device_count, true),
	NVML_SYM(nvmlDeviceGetHandleByIndex_v2, handle_by_index, true),
	NVML_SYM(nvmlDeviceGetUUID, uuid, true),
	NVML_SYM(nvmlDeviceGetName, name, true),
	NVML_SYM(nvmlDeviceGetPciInfo_v3, pci_info, true),
	NVML_SYM(nvmlDeviceGetMemoryInfo, memory_info, true),
	NVML_SYM(nvmlDeviceGetCudaComputeCapability, cuda_cc, true),
	NVML_SYM(nvmlDeviceGetNvLinkState, nvlink_state, false),
	NVML_SYM(nvmlDeviceGetNvLinkRemotePciInfo_v2, nvlink_remote_pci, false),
	NVML_SYM(nvmlDeviceGetNvLinkRemoteDeviceType, nvlink_remote_type, false),
	NVML_SYM(nvmlSystemGetDriverVersion, driver_version, false),
	NVML_SYM(nvmlDeviceGetEccMode, ecc_mode, false),
	NVML_SYM(nvmlDeviceGetTotalEccErrors, ecc_total, false),
	NVML_SYM(nvmlDeviceGetRemappedRows, remapped_rows, false),
	NVML_SYM(nvmlDeviceGetRetiredPagesPendingStatus, retired_pending, false),
	NVML_SYM(nvmlDeviceGetTemperature, temperature, false),
	NVML_SYM(nvmlDeviceGetTemperatureThreshold, temperature_threshold, false),
	NVML_SYM(nvmlDeviceGetPowerUsage, power_usage, false),
	NVML_SYM(nvmlDeviceGetEnforcedPowerLimit, power_limit, false),
	NVML_SYM(nvmlDeviceGetClockInfo, clock, false),
	NVML_SYM(nvmlDeviceGetMaxClockInfo, max_clock, false),
	NVML_SYM(nvmlDeviceGetCurrentClocksEventReasons, clock_events, false),
	NVML_SYM(nvmlDeviceGetCurrentClocksThrottleReasons, throttle_reasons, false),
	NVML_SYM(nvmlDeviceGetCurrPcieLinkGeneration, pcie_gen, false),
	NVML_SYM(nvmlDeviceGetCurrPcieLinkWidth, pcie_width, false),
	NVML_SYM(nvmlDeviceGetMaxPcieLinkGeneration, pcie_max_gen, false),
	NVML_SYM(nvmlDeviceGetMaxPcieLinkWidth, pcie_max_width, false),
	NVML_SYM(nvmlDeviceGetMemoryBusWidth, bus_width, false),
};

/* One probe: the loaded library, the topology, and what to tell the caller. */
struct nvml_probe {
	void *lib;
	struct nvml_api api;
	struct hwloc_topology *topo;
	char *why;
	size_t cap;
};

static const char *nvml_err(const struct nvml_probe *p, nvmlReturn_t rc)
{
	const char *s = p->api.error_string(rc);

	return s != NULL ? s : "unknown NVML error";
}

static bool nvml_load(struct nvml_probe *p)
{
	char why[256];

	p->lib = herd__dl_open(HERD_NVML_LIBRARY, nvml_symbols,
			       sizeof(nvml_symbols) / sizeof(nvml_symbols[0]), &p->api, why,
			       sizeof(why));
	if (p->lib == NULL)
		snprintf(p->why, p->cap, "%s: %s", strstr(why, "lacks") != NULL ?
			 "NVIDIA driver too old" : "NVIDIA driver not found", why);
	return p->lib != NULL;
}

/* Loads and initializes NVML; false, with why[] set, when it cannot. */
static bool nvml_open(struct nvml_probe *p)
{
	nvmlReturn_t rc;

	if (!nvml_load(p))
		return false;
	rc = p->api.init();
	if (rc != NVML_SUCCESS) {
		snprintf(p->why, p->cap, "NVML cannot start: %s", nvml_err(p, rc));
		dlclose(p->lib);
		p->lib = NULL;
		return false;
	}
	return true;
}

static void nvml_close(struct nvml_probe *p)
{
	p->api.shutdown();
	dlclose(p->lib);
	p->lib = NULL;
}

static bool nvml_has_nvlink(const struct nvml_api *api)
{
	return api->nvlink_state != NULL && api->nvlink_remote_pci != NULL &&
	       api->nvlink_remote_type != NULL;
}

/* A bus id from NVML: the 8-digit busId field, else the legacy one. */
static bool nvml_bus_id(const nvmlPciInfo_t *pci, char out[HERD_PCI_ID_LEN])
{
	char legacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE + 1];
	char full[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE + 1];

	/* NVML fills these NUL-terminated; copies make sure of it. */
	memcpy(full, pci->busId, sizeof(pci->busId));
	full[sizeof(pci->busId)] = '\0';
	memcpy(legacy, pci->busIdLegacy, sizeof(pci->busIdLegacy));
	legacy[sizeof(pci->busIdLegacy)] = '\0';
	return herd__topo_pci_normalize(full, out) || herd__topo_pci_normalize(legacy, out);
}

static int nvlink_compare(const void *a, const void *b)
{
	return herd__topo_pci_compare(((const herd_nvlink *)a)->peer_bus_id,
				      ((const herd_nvlink *)b)->peer_bus_id);
}

static void nvlink_count(herd_nvlink *peers, size_t *npeers, const char *peer)
{
	for (size_t i = 0; i < *npeers; i++) {
		if (strcmp(peers[i].peer_bus_id, peer) == 0) {
			peers[i].links++;
			return;
		}
	}
	memcpy(peers[*npeers].peer_bus_id, peer, HERD_PCI_ID_LEN);
	peers[(*npeers)++].links = 1;
}

/*
 * Active links only: a link to a GPU counts toward that peer, a link to an
 * NVSwitch toward the fabric.  A link that fails to answer is skipped:
 * one bad link must not hide the others.
 */
static herd_status nvml_nvlinks(struct nvml_probe *p, nvmlDevice_t dev, herd_gpu *gpu)
{
	const struct nvml_api *api = &p->api;
	herd_nvlink peers[HERD_NVML_MAX_LINKS];
	herd_nvlink *links = NULL;
	size_t npeers = 0;

	if (!nvml_has_nvlink(api))
		return HERD_OK;
	for (unsigned int link = 0; link < HERD_NVML_MAX_LINKS; link++) {
		nvmlEnableState_t active = NVML_FEATURE_DISABLED;
		nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
		nvmlPciInfo_t remote;
		char peer[HERD_PCI_ID_LEN];

		if (api->nvlink_state(dev, link, &active) != NVML_SUCCESS ||
		    active != NVML_FEATURE_ENABLED ||
		    api->nvlink_remote_type(dev, link, &type) != NVML_SUCCESS)
			continue;
		if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
			gpu->nvswitch_links++;
			continue;
		}
		memset(&remote, 0, sizeof(remote));
		if (type != NVML_NVLINK_DEVICE_TYPE_GPU ||
		    api->nvlink_remote_pci(dev, link, &remote) != NVML_SUCCESS ||
		    !nvml_bus_id(&remote, peer))
			continue;
		nvlink_count(peers, &npeers, peer);
	}
	if (npeers == 0)
		return HERD_OK;
	qsort(peers, npeers, sizeof(peers[0]), nvlink_compare);
	HERD_CHECK(herd__calloc(&links, npeers, sizeof(*links), "NVLink peers"));
	memcpy(links, peers, npeers * sizeof(*links));
	HERD_MUT(herd_nvlink *, gpu->nvlinks) = links;
	gpu->nnvlinks = npeers;
	return HERD_OK;
}

/* ECC mode and PCIe link of a GPU, where the driver says (else unknown). */
static void nvml_gpu_links(const struct nvml_api *api, nvmlDevice_t dev, herd_gpu *gpu)
{
	nvmlEnableState_t cur, pending;
	unsigned int v;

	gpu->ecc = -1;
	if (api->ecc_mode != NULL && api->ecc_mode(dev, &cur, &pending) == NVML_SUCCESS)
		gpu->ecc = cur != 0;
	if (api->pcie_gen != NULL && api->pcie_gen(dev, &v) == NVML_SUCCESS && v <= 16)
		gpu->pcie_gen = (int)v;
	if (api->pcie_width != NULL && api->pcie_width(dev, &v) == NVML_SUCCESS && v <= 64)
		gpu->pcie_width = (int)v;
	if (api->pcie_max_gen != NULL && api->pcie_max_gen(dev, &v) == NVML_SUCCESS && v <= 16)
		gpu->pcie_max_gen = (int)v;
	if (api->pcie_max_width != NULL && api->pcie_max_width(dev, &v) == NVML_SUCCESS &&
	    v <= 64)
		gpu->pcie_max_width = (int)v;
}

/*
 * Fills *gpu for device index i.  *ok is false when the GPU cannot be
 * keyed by its bus id, and so is left out (why[] says so).
 */
static herd_status nvml_gpu(struct nvml_probe *p, unsigned int i, herd_gpu *gpu, bool *ok)
{
	const struct nvml_api *api = &p->api;
	char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE + NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char bus_id[HERD_PCI_ID_LEN];
	nvmlDevice_t dev = NULL;
	nvmlPciInfo_t pci;
	nvmlMemory_t mem;
	nvmlReturn_t rc;

	*ok = false;
	memset(&pci, 0, sizeof(pci));
	rc = api->handle_by_index(i, &dev);
	if (rc == NVML_SUCCESS)
		rc = api->pci_info(dev, &pci);
	if (rc != NVML_SUCCESS || !nvml_bus_id(&pci, bus_id)) {
		herd__topo_why_append(p->why, p->cap, "NVML GPU %u left out: %s", i,
				      rc != NVML_SUCCESS ? nvml_err(p, rc) : "no PCI bus id");
		return HERD_OK;
	}
	herd__topo_pci_locate(p->topo, bus_id, &gpu->pci);
	rc = api->uuid(dev, text, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
	if (rc == NVML_SUCCESS)
		herd__strlcpy(gpu->uuid, text, sizeof(gpu->uuid));
	else
		herd__topo_why_append(p->why, p->cap, "GPU %s: no UUID: %s", bus_id,
				      nvml_err(p, rc));
	if (api->name(dev, text, sizeof(text)) == NVML_SUCCESS)
		herd__strlcpy(gpu->name, text, sizeof(gpu->name));
	if (api->memory_info(dev, &mem) == NVML_SUCCESS)
		gpu->memory_bytes = mem.total;
	if (api->cuda_cc(dev, &gpu->cc_major, &gpu->cc_minor) != NVML_SUCCESS)
		gpu->cc_major = gpu->cc_minor = 0;
	nvml_gpu_links(api, dev, gpu);
	*ok = true;
	return nvml_nvlinks(p, dev, gpu);
}

static herd_status nvml_gpus(struct nvml_probe *p, herd_node *node)
{
	unsigned int count = 0;
	herd_gpu *gpus = NULL;
	nvmlReturn_t rc;
	bool ok;

	rc = p->api.device_count(&count);
	if (rc != NVML_SUCCESS) {
		snprintf(p->why, p->cap, "NVML cannot count the GPUs: %s", nvml_err(p, rc));
		return HERD_EUNAVAIL;
	}
	if (count == 0) {
		snprintf(p->why, p->cap, "NVML: the NVIDIA driver sees no GPU");
		return HERD_EUNAVAIL;
	}
	if (!nvml_has_nvlink(&p->api))
		herd__topo_why_append(p->why, p->cap, "NVLink unknown: %s lacks the NVLink queries",
				      HERD_NVML_LIBRARY);
	if (p->api.driver_version != NULL) {
		char text[96] = "";

		if (p->api.driver_version(text, sizeof(text)) == NVML_SUCCESS && text[0] != '\0')
			HERD_CHECK(herd__strdup(&HERD_MUT(char *, node->gpu_driver), text));
	}
	HERD_CHECK(herd__calloc(&gpus, count, sizeof(*gpus), "GPUs"));
	HERD_MUT(herd_gpu *, node->gpus) = gpus;
	for (unsigned int i = 0; i < count; i++) {
		HERD_CHECK(nvml_gpu(p, i, &gpus[node->ngpus], &ok));
		if (ok)
			node->ngpus++;
	}
	if (node->ngpus == 0) {
		/* Leave nothing behind for the CUDA runtime's attempt. */
		free(gpus);
		HERD_MUT(herd_gpu *, node->gpus) = NULL;
		return HERD_EUNAVAIL;
	}
	herd__topo_sort_gpus(node);
	return HERD_OK;
}

herd_status herd__topo_probe_nvml(struct hwloc_topology *topo, herd_node *node,
				  char *why, size_t cap)
{
	struct nvml_probe p = { .topo = topo, .why = why, .cap = cap };
	herd_status st;

	why[0] = '\0';
	if (!nvml_open(&p))
		return HERD_EUNAVAIL;
	st = nvml_gpus(&p, node);
	nvml_close(&p);
	return st;
}

bool herd__nvml_driver_version(char *out, size_t cap, char *why, size_t why_cap)
{
	struct nvml_probe p = { .why = why, .cap = why_cap };
	char text[96] = "";
	nvmlReturn_t rc;

	out[0] = why[0] = '\0';
	if (!nvml_open(&p))
		return false;
	rc = p.api.driver_version != NULL ? p.api.driver_version(text, sizeof(text))
					  : NVML_SUCCESS;
	if (rc != NVML_SUCCESS)
		snprintf(why, why_cap, "NVML: %s", nvml_err(&p, rc));
	else if (text[0] == '\0')
		snprintf(why, why_cap, "%s lacks nvmlSystemGetDriverVersion", HERD_NVML_LIBRARY);
	else
		herd__strlcpy(out, text, cap);
	nvml_close(&p);
	return out[0] != '\0';
}

/* ---- herd health: the driver's view of each GPU ------------------------------ */

enum {
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	MEMORY_ERROR_CORRECTED = 0,
	MEMORY_ERROR_UNCORRECTED = 1,
	ECC_VOLATILE = 0,
	ECC_AGGREGATE = 1,
	TEMPERATURE_GPU = 0,
	THRESHOLD_SLOWDOWN = 1,
	CLOCK_SM = 1,
	CLOCK_MEM = 2
};

/* The clock event reasons of nvml.h (nvmlClocksEventReason*). */
static const struct clock_reason {
	unsigned long long bit;
	const char *name;
	herd_health_result result;
} clock_reasons[] = {
	{ 0x1ull, "idle", HERD_HEALTH_PASS },
	{ 0x2ull, "application clocks", HERD_HEALTH_PASS },
	{ 0x4ull, "software power cap", HERD_HEALTH_PASS },
	{ 0x8ull, "hardware slowdown", HERD_HEALTH_FAIL },
	{ 0x10ull, "sync boost", HERD_HEALTH_PASS },
	{ 0x20ull, "software thermal slowdown", HERD_HEALTH_WARN },
	{ 0x40ull, "hardware thermal slowdown", HERD_HEALTH_FAIL },
	{ 0x80ull, "hardware power brake", HERD_HEALTH_FAIL },
	{ 0x100ull, "display clock setting", HERD_HEALTH_PASS },
};

/* A query's outcome: it answered, the GPU or driver cannot say, or it failed. */
#define NVML_CALL(p, fn, ...) ((p)->api.fn != NULL ? (p)->api.fn(__VA_ARGS__) \
						   : (nvmlReturn_t)NVML_ERROR_FUNCTION_NOT_FOUND)

static bool nvml_unsupported(nvmlReturn_t rc)
{
	return rc == (nvmlReturn_t)NVML_ERROR_NOT_SUPPORTED ||
	       rc == (nvmlReturn_t)NVML_ERROR_FUNCTION_NOT_FOUND;
}

/* A check that could not be read: SKIP when the GPU cannot say, FAIL when
 * the driver failed to answer. */
static herd_status health_unread(struct nvml_probe *p, herd_health_gpu *g, const char *name,
				 const char *what, nvmlReturn_t rc)
{
	return herd__health_add(g, name, nvml_unsupported(rc) ? HERD_HEALTH_SKIP : HERD_HEALTH_FAIL,
				0, "", "%s: %s", what, nvml_unsupported(rc) ? "not supported here"
									     : nvml_err(p, rc));
}

static herd_status health_ecc(struct nvml_probe *p, nvmlDevice_t d, herd_health_gpu *g)
{
	nvmlEnableState_t cur = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
	unsigned long long vc = 0, vu = 0, ac = 0, au = 0;
	nvmlReturn_t rc = NVML_CALL(p, ecc_mode, d, &cur, &pending);

	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "ecc", "the ECC mode", rc);
	if (cur != NVML_FEATURE_ENABLED)
		return herd__health_add(g, "ecc", HERD_HEALTH_WARN, 0, "", "ECC is off%s",
					pending == NVML_FEATURE_ENABLED ? " (on after a reset)" : "");
	rc = NVML_CALL(p, ecc_total, d, MEMORY_ERROR_UNCORRECTED, ECC_VOLATILE, &vu);
	if (rc == NVML_SUCCESS)
		rc = NVML_CALL(p, ecc_total, d, MEMORY_ERROR_CORRECTED, ECC_VOLATILE, &vc);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "ecc", "the ECC error counts", rc);
	(void)NVML_CALL(p, ecc_total, d, MEMORY_ERROR_UNCORRECTED, ECC_AGGREGATE, &au);
	(void)NVML_CALL(p, ecc_total, d, MEMORY_ERROR_CORRECTED, ECC_AGGREGATE, &ac);
	return herd__health_add(g, "ecc", vu > 0 ? HERD_HEALTH_FAIL : au > 0 ? HERD_HEALTH_WARN
									  : HERD_HEALTH_PASS,
				(double)vu, "errors", "on; uncorrected %llu since the driver "
				"loaded (%llu ever), corrected %llu (%llu ever)", vu, au, vc, ac);
}

static herd_status health_rows(struct nvml_probe *p, nvmlDevice_t d, herd_health_gpu *g)
{
	unsigned int corr = 0, unc = 0, pending = 0, failed = 0;
	nvmlEnableState_t retired = NVML_FEATURE_DISABLED;
	nvmlReturn_t rc = NVML_CALL(p, remapped_rows, d, &corr, &unc, &pending, &failed);

	if (rc == NVML_SUCCESS)
		return herd__health_add(g, "memory-rows", failed || pending ? HERD_HEALTH_FAIL
									   : HERD_HEALTH_PASS,
					(double)(corr + unc), "rows", "rows remapped: %u (%u for "
					"uncorrectable errors)%s", corr + unc, unc,
					failed ? "; a remapping failed: replace the GPU"
					: pending ? "; a remapping is pending: reset the GPU" : "");
	if (!nvml_unsupported(rc))
		return health_unread(p, g, "memory-rows", "the remapped rows", rc);
	/* GPUs before Ampere retire pages instead. */
	rc = NVML_CALL(p, retired_pending, d, &retired);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "memory-rows", "the retired pages",
				     rc);
	return herd__health_add(g, "memory-rows", retired == NVML_FEATURE_ENABLED ?
				HERD_HEALTH_FAIL : HERD_HEALTH_PASS, 0, "",
				retired == NVML_FEATURE_ENABLED ? "a page retirement is pending: "
				"reset the GPU" : "no page retirement pending");
}

static herd_status health_temperature(struct nvml_probe *p, nvmlDevice_t d, herd_health_gpu *g)
{
	unsigned int t = 0, slow = 0;
	nvmlReturn_t rc = NVML_CALL(p, temperature, d, TEMPERATURE_GPU, &t);

	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "temperature", "the temperature", rc);
	if (NVML_CALL(p, temperature_threshold, d, THRESHOLD_SLOWDOWN, &slow) != NVML_SUCCESS ||
	    slow == 0)
		return herd__health_add(g, "temperature", HERD_HEALTH_PASS, t, "C",
					"%u C (no slowdown threshold given)", t);
	return herd__health_add(g, "temperature", t >= slow ? HERD_HEALTH_FAIL :
				t + 5 >= slow ? HERD_HEALTH_WARN : HERD_HEALTH_PASS, t, "C",
				"%u C, slowdown at %u C", t, slow);
}

static herd_status health_power(struct nvml_probe *p, nvmlDevice_t d, herd_health_gpu *g)
{
	unsigned int mw = 0, limit = 0;
	nvmlReturn_t rc = NVML_CALL(p, power_usage, d, &mw);

	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "power", "the power draw", rc);
	if (NVML_CALL(p, power_limit, d, &limit) != NVML_SUCCESS || limit == 0)
		return herd__health_add(g, "power", HERD_HEALTH_PASS, mw / 1000.0, "W",
					"%.0f W", mw / 1000.0);
	return herd__health_add(g, "power", mw > limit + limit / 20 ? HERD_HEALTH_WARN
								   : HERD_HEALTH_PASS,
				mw / 1000.0, "W", "%.0f W of a %.0f W limit", mw / 1000.0,
				limit / 1000.0);
}

static herd_status health_clocks(struct nvml_probe *p, nvmlDevice_t d, herd_health_gpu *g)
{
	unsigned int sm = 0, sm_max = 0, mem = 0, mem_max = 0;
	unsigned long long reasons = 0;
	herd_health_result worst = HERD_HEALTH_PASS;
	char names[160] = "";
	nvmlReturn_t rc = NVML_CALL(p, clock, d, CLOCK_SM, &sm);

	if (rc != NVML_SUCCESS)
		HERD_CHECK(health_unread(p, g, "clocks", "the clocks", rc));
	else {
		(void)NVML_CALL(p, max_clock, d, CLOCK_SM, &sm_max);
		(void)NVML_CALL(p, clock, d, CLOCK_MEM, &mem);
		(void)NVML_CALL(p, max_clock, d, CLOCK_MEM, &mem_max);
		HERD_CHECK(herd__health_add(g, "clocks", HERD_HEALTH_PASS, sm, "MHz",
					    "SM %u of %u MHz, memory %u of %u MHz", sm, sm_max,
					    mem, mem_max));
	}
	rc = NVML_CALL(p, clock_events, d, &reasons);
	if (rc == (nvmlReturn_t)NVML_ERROR_FUNCTION_NOT_FOUND)
		rc = NVML_CALL(p, throttle_reasons, d, &reasons);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "clock-events", "the clock event reasons",
				     rc);
	for (size_t i = 0; i < sizeof(clock_reasons) / sizeof(clock_reasons[0]); i++) {
		const struct clock_reason *c = &clock_reasons[i];
		size_t n = strlen(names);

		if (!(reasons & c->bit))
			continue;
		snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "", c->name);
		if (c->result > worst)
			worst = c->result;
	}
	return herd__health_add(g, "clock-events", worst, 0, "", "%s (0x%llx)",
				names[0] ? names : "none", reasons);
}

/* GB/s per lane and direction of PCIe generations 1 to 6, after encoding. */
static const double pcie_lane_gbps[] = { 0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563 };

static herd_status health_pcie(struct nvml_probe *p, nvmlDevice_t d, herd_health_gpu *g,
			       double *link_gbps)
{
	unsigned int gen = 0, width = 0, max_gen = 0, max_width = 0;
	nvmlReturn_t rc = NVML_CALL(p, pcie_gen, d, &gen);

	if (rc == NVML_SUCCESS)
		rc = NVML_CALL(p, pcie_width, d, &width);
	if (rc == NVML_SUCCESS)
		rc = NVML_CALL(p, pcie_max_gen, d, &max_gen);
	if (rc == NVML_SUCCESS)
		rc = NVML_CALL(p, pcie_max_width, d, &max_width);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "pcie", "the PCIe link", rc);
	if (max_gen < sizeof(pcie_lane_gbps) / sizeof(pcie_lane_gbps[0]))
		*link_gbps = pcie_lane_gbps[max_gen] * max_width;
	return herd__health_add(g, "pcie", width < max_width ? HERD_HEALTH_FAIL :
				gen < max_gen ? HERD_HEALTH_WARN : HERD_HEALTH_PASS, width, "lanes",
				"gen %u x%u of gen %u x%u%s", gen, width, max_gen, max_width,
				width < max_width ? ": fewer lanes than the slot has"
				: gen < max_gen ? " (a link may slow down while idle)" : "");
}

/* The memory's own rate: the memory clock's maximum, twice per cycle, times the bus width. */
static double memory_gbps(struct nvml_probe *p, nvmlDevice_t d)
{
	unsigned int bits = 0, mhz = 0;

	if (NVML_CALL(p, bus_width, d, &bits) != NVML_SUCCESS ||
	    NVML_CALL(p, max_clock, d, CLOCK_MEM, &mhz) != NVML_SUCCESS)
		return 0;
	return (double)mhz * 1e6 * 2.0 * bits / 8.0 / 1e9;
}

static herd_status health_gpu(struct nvml_probe *p, unsigned int i, herd_health_gpu *g,
			      herd__health_ref *ref)
{
	nvmlDevice_t d = NULL;
	nvmlPciInfo_t pci;
	char bus[HERD_PCI_ID_LEN];
	nvmlReturn_t rc;

	g->index = (int)i;
	memset(&pci, 0, sizeof(pci));
	rc = p->api.handle_by_index(i, &d);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "nvml", "finding the GPU", rc);
	if (p->api.pci_info(d, &pci) == NVML_SUCCESS && nvml_bus_id(&pci, bus))
		herd__strlcpy(g->bus_id, bus, sizeof(g->bus_id));
	(void)p->api.uuid(d, g->uuid, sizeof(g->uuid));
	(void)p->api.name(d, g->name, sizeof(g->name));
	ref->memory_gbps = memory_gbps(p, d);
	HERD_CHECK(health_ecc(p, d, g));
	HERD_CHECK(health_rows(p, d, g));
	HERD_CHECK(health_temperature(p, d, g));
	HERD_CHECK(health_power(p, d, g));
	HERD_CHECK(health_clocks(p, d, g));
	return health_pcie(p, d, g, &ref->link_gbps);
}

herd_status herd__nvml_health(herd_health_report *r, herd__health_ref **refs, char *why,
			      size_t cap)
{
	struct nvml_probe p = { .why = why, .cap = cap };
	unsigned int count = 0;
	herd_status st = HERD_OK;
	nvmlReturn_t rc;

	why[0] = '\0';
	if (!nvml_open(&p))
		return HERD_EUNAVAIL;
	rc = p.api.device_count(&count);
	if (rc != NVML_SUCCESS || count == 0) {
		snprintf(why, cap, "NVML: %s", rc != NVML_SUCCESS ? nvml_err(&p, rc)
							       : "the NVIDIA driver sees no GPU");
		st = HERD_EUNAVAIL;
	}
	if (st == HERD_OK)
		st = herd__calloc(&r->gpus, count, sizeof(*r->gpus), "the GPUs' health");
	if (st == HERD_OK)
		st = herd__calloc(refs, count, sizeof(**refs), "the GPUs' reference rates");
	for (unsigned int i = 0; st == HERD_OK && i < count; i++) {
		r->ngpus++;
		st = health_gpu(&p, i, &r->gpus[i], &(*refs)[i]);
	}
	nvml_close(&p);
	return st;
}
