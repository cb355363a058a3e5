/*
 * sdk/topo/nvml.c - NVML, loaded with dlopen so that libherd has no
 * link-time dependency on the driver and runs where there is none: the
 * session every user of NVML opens (nvml.h), then discovery's GPUs and
 * NVLinks and herd health's driver checks.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"
#include "probe.h"

#define NVML_SYM(fn, field, required) HERD__DL_SYM(herd__nvml_api, fn, field, required)

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
	NVML_SYM(nvmlDeviceGetUtilizationRates, utilization, false),
	NVML_SYM(nvmlDeviceGetTotalEnergyConsumption, energy, false),
	NVML_SYM(nvmlDeviceGetPcieThroughput, pcie_throughput, false),
	NVML_SYM(nvmlDeviceGetFieldValues, field_values, false),
	NVML_SYM(nvmlDeviceGetComputeRunningProcesses_v3, compute_procs_v3, false),
	NVML_SYM(nvmlDeviceGetGraphicsRunningProcesses_v3, graphics_procs_v3, false),
	NVML_SYM(nvmlDeviceGetComputeRunningProcesses_v2, compute_procs_v2, false),
	NVML_SYM(nvmlDeviceGetGraphicsRunningProcesses_v2, graphics_procs_v2, false),
};

/*
 * NVML_NVLINK_MAX_LINKS is 18 today; links past a device's last one answer
 * NVML_ERROR_INVALID_ARGUMENT, so asking about a few more is harmless and
 * keeps working when a GPU generation adds links.
 */
#define HERD_NVML_MAX_LINKS 32

/* ---- the session every user of NVML opens ------------------------------------ */

const char *herd__nvml_err(const herd__nvml *n, nvmlReturn_t rc)
{
	const char *s = n->lib != NULL ? n->api.error_string(rc) : NULL;

	return s != NULL ? s : "unknown NVML error";
}

bool herd__nvml_open(herd__nvml *n, char *why, size_t cap)
{
	char text[256];
	nvmlReturn_t rc;

	memset(n, 0, sizeof(*n));
	n->lib = herd__dl_open(HERD_NVML_LIBRARY, nvml_symbols,
			       sizeof(nvml_symbols) / sizeof(nvml_symbols[0]), &n->api, text,
			       sizeof(text));
	if (n->lib == NULL) {
		snprintf(why, cap, "%s: %s", strstr(text, "lacks") != NULL ?
			 "NVIDIA driver too old" : "NVIDIA driver not found", text);
		return false;
	}
	rc = n->api.init();
	if (rc != NVML_SUCCESS) {
		snprintf(why, cap, "NVML cannot start: %s", herd__nvml_err(n, rc));
		dlclose(n->lib);
		n->lib = NULL;
		return false;
	}
	return true;
}

void herd__nvml_close(herd__nvml *n)
{
	if (n == NULL || n->lib == NULL)
		return;
	n->api.shutdown();
	dlclose(n->lib);
	n->lib = NULL;
}

bool herd__nvml_bus_id(const nvmlPciInfo_t *pci, char out[HERD_PCI_ID_LEN])
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

static int gpu_compare(const void *a, const void *b)
{
	return herd__topo_pci_compare(((const herd__nvml_gpu *)a)->bus_id,
				      ((const herd__nvml_gpu *)b)->bus_id);
}

herd_status herd__nvml_gpus(herd__nvml *n, herd__nvml_gpu **out, size_t *count, char *why,
			    size_t cap)
{
	herd__nvml_gpu *gpus = NULL;
	unsigned int total = 0;
	size_t k = 0;
	nvmlReturn_t rc;

	*out = NULL;
	*count = 0;
	rc = n->api.device_count(&total);
	if (rc != NVML_SUCCESS) {
		snprintf(why, cap, "NVML cannot count the GPUs: %s", herd__nvml_err(n, rc));
		return HERD_EUNAVAIL;
	}
	if (total == 0) {
		snprintf(why, cap, "NVML: the NVIDIA driver sees no GPU");
		return HERD_EUNAVAIL;
	}
	HERD_CHECK(herd__calloc(&gpus, total, sizeof(*gpus), "GPUs"));
	for (unsigned int i = 0; i < total; i++) {
		nvmlDevice_t dev = NULL;
		nvmlPciInfo_t pci;

		memset(&pci, 0, sizeof(pci));
		rc = n->api.handle_by_index(i, &dev);
		if (rc == NVML_SUCCESS)
			rc = n->api.pci_info(dev, &pci);
		if (rc != NVML_SUCCESS || !herd__nvml_bus_id(&pci, gpus[k].bus_id)) {
			herd__topo_why_append(why, cap, "NVML GPU %u left out: %s", i,
					      rc != NVML_SUCCESS ? herd__nvml_err(n, rc)
								 : "no PCI bus id");
			continue;
		}
		gpus[k].index = i;
		gpus[k++].dev = dev;
	}
	if (k == 0) {
		free(gpus);
		return HERD_EUNAVAIL;
	}
	qsort(gpus, k, sizeof(*gpus), gpu_compare);
	*out = gpus;
	*count = k;
	return HERD_OK;
}

/* ---- discovery ------------------------------------------------------------------ */

/* One probe: the session, the topology, and what to tell the caller. */
struct nvml_probe {
	herd__nvml n;
	struct hwloc_topology *topo;
	char *why;
	size_t cap;
};

static const char *nvml_err(const struct nvml_probe *p, nvmlReturn_t rc)
{
	return herd__nvml_err(&p->n, rc);
}

static bool nvml_has_nvlink(const herd__nvml_api *api)
{
	return api->nvlink_state != NULL && api->nvlink_remote_pci != NULL &&
	       api->nvlink_remote_type != NULL;
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
	const herd__nvml_api *api = &p->n.api;
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
		    !herd__nvml_bus_id(&remote, peer))
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
static void nvml_gpu_links(const herd__nvml_api *api, nvmlDevice_t dev, herd_gpu *gpu)
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

/* Fills *gpu for the GPU NVML knows as g. */
static herd_status nvml_gpu(struct nvml_probe *p, const herd__nvml_gpu *g, herd_gpu *gpu)
{
	const herd__nvml_api *api = &p->n.api;
	char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE + NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	nvmlMemory_t mem;
	nvmlReturn_t rc;

	herd__topo_pci_locate(p->topo, g->bus_id, &gpu->pci);
	rc = api->uuid(g->dev, text, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
	if (rc == NVML_SUCCESS)
		herd__strlcpy(gpu->uuid, text, sizeof(gpu->uuid));
	else
		herd__topo_why_append(p->why, p->cap, "GPU %s: no UUID: %s", g->bus_id,
				      nvml_err(p, rc));
	if (api->name(g->dev, text, sizeof(text)) == NVML_SUCCESS)
		herd__strlcpy(gpu->name, text, sizeof(gpu->name));
	if (api->memory_info(g->dev, &mem) == NVML_SUCCESS)
		gpu->memory_bytes = mem.total;
	if (api->cuda_cc(g->dev, &gpu->cc_major, &gpu->cc_minor) != NVML_SUCCESS)
		gpu->cc_major = gpu->cc_minor = 0;
	nvml_gpu_links(api, g->dev, gpu);
	return nvml_nvlinks(p, g->dev, gpu);
}

static herd_status nvml_gpus(struct nvml_probe *p, herd_node *node)
{
	herd__nvml_gpu *found = NULL;
	herd_gpu *gpus = NULL;
	herd_status st;
	size_t count = 0;

	if (!nvml_has_nvlink(&p->n.api))
		herd__topo_why_append(p->why, p->cap, "NVLink unknown: %s lacks the NVLink queries",
				      HERD_NVML_LIBRARY);
	HERD_CHECK(herd__nvml_gpus(&p->n, &found, &count, p->why, p->cap));
	if (p->n.api.driver_version != NULL) {
		char text[96] = "";

		if (p->n.api.driver_version(text, sizeof(text)) == NVML_SUCCESS && text[0] != '\0' &&
		    (st = herd__strdup(&HERD_MUT(char *, node->gpu_driver), text)) != HERD_OK)
			goto out;
	}
	st = herd__calloc(&gpus, count, sizeof(*gpus), "GPUs");
	if (st != HERD_OK)
		goto out;
	HERD_MUT(herd_gpu *, node->gpus) = gpus;
	for (size_t i = 0; i < count && st == HERD_OK; i++) {
		st = nvml_gpu(p, &found[i], &gpus[i]);
		node->ngpus++;
	}
	if (st == HERD_OK)
		herd__topo_sort_gpus(node);
out:
	free(found);
	return st;
}

herd_status herd__topo_probe_nvml(struct hwloc_topology *topo, herd_node *node,
				  char *why, size_t cap)
{
	struct nvml_probe p = { .topo = topo, .why = why, .cap = cap };
	herd_status st;

	why[0] = '\0';
	if (!herd__nvml_open(&p.n, p.why, p.cap))
		return HERD_EUNAVAIL;
	st = nvml_gpus(&p, node);
	herd__nvml_close(&p.n);
	return st;
}

bool herd__nvml_driver_version(char *out, size_t cap, char *why, size_t why_cap)
{
	struct nvml_probe p = { .why = why, .cap = why_cap };
	char text[96] = "";
	nvmlReturn_t rc;

	out[0] = why[0] = '\0';
	if (!herd__nvml_open(&p.n, p.why, p.cap))
		return false;
	rc = p.n.api.driver_version != NULL ? p.n.api.driver_version(text, sizeof(text))
					  : NVML_SUCCESS;
	if (rc != NVML_SUCCESS)
		snprintf(why, why_cap, "NVML: %s", nvml_err(&p, rc));
	else if (text[0] == '\0')
		snprintf(why, why_cap, "%s lacks nvmlSystemGetDriverVersion", HERD_NVML_LIBRARY);
	else
		herd__strlcpy(out, text, cap);
	herd__nvml_close(&p.n);
	return out[0] != '\0';
}

/* ---- herd health: the driver's view of each GPU ------------------------------ */


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

void herd__nvml_slowdowns(unsigned long long reasons, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(clock_reasons) / sizeof(clock_reasons[0]) && n < cap; i++)
		if ((reasons & clock_reasons[i].bit) && clock_reasons[i].result != HERD_HEALTH_PASS)
			n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "",
					      clock_reasons[i].name);
}

/* A query's outcome: it answered, the GPU or driver cannot say, or it failed. */
#define NVML_CALL(p, fn, ...) HERD__NVML_CALL(&(p)->n, fn, __VA_ARGS__)

static bool nvml_unsupported(nvmlReturn_t rc)
{
	return rc == NVML_ERROR_NOT_SUPPORTED ||
	       rc == NVML_ERROR_FUNCTION_NOT_FOUND;
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
	rc = NVML_CALL(p, ecc_total, d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &vu);
	if (rc == NVML_SUCCESS)
		rc = NVML_CALL(p, ecc_total, d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &vc);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "ecc", "the ECC error counts", rc);
	(void)NVML_CALL(p, ecc_total, d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &au);
	(void)NVML_CALL(p, ecc_total, d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &ac);
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
	nvmlReturn_t rc = NVML_CALL(p, temperature, d, NVML_TEMPERATURE_GPU, &t);

	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "temperature", "the temperature", rc);
	if (NVML_CALL(p, temperature_threshold, d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slow) != NVML_SUCCESS ||
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
	nvmlReturn_t rc = NVML_CALL(p, clock, d, NVML_CLOCK_SM, &sm);

	if (rc != NVML_SUCCESS)
		HERD_CHECK(health_unread(p, g, "clocks", "the clocks", rc));
	else {
		(void)NVML_CALL(p, max_clock, d, NVML_CLOCK_SM, &sm_max);
		(void)NVML_CALL(p, clock, d, NVML_CLOCK_MEM, &mem);
		(void)NVML_CALL(p, max_clock, d, NVML_CLOCK_MEM, &mem_max);
		HERD_CHECK(herd__health_add(g, "clocks", HERD_HEALTH_PASS, sm, "MHz",
					    "SM %u of %u MHz, memory %u of %u MHz", sm, sm_max,
					    mem, mem_max));
	}
	rc = NVML_CALL(p, clock_events, d, &reasons);
	if (rc == NVML_ERROR_FUNCTION_NOT_FOUND)
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
	    NVML_CALL(p, max_clock, d, NVML_CLOCK_MEM, &mhz) != NVML_SUCCESS)
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
	rc = p->n.api.handle_by_index(i, &d);
	if (rc != NVML_SUCCESS)
		return health_unread(p, g, "nvml", "finding the GPU", rc);
	if (p->n.api.pci_info(d, &pci) == NVML_SUCCESS && herd__nvml_bus_id(&pci, bus))
		herd__strlcpy(g->bus_id, bus, sizeof(g->bus_id));
	(void)p->n.api.uuid(d, g->uuid, sizeof(g->uuid));
	(void)p->n.api.name(d, g->name, sizeof(g->name));
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
	if (!herd__nvml_open(&p.n, p.why, p.cap))
		return HERD_EUNAVAIL;
	rc = p.n.api.device_count(&count);
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
	herd__nvml_close(&p.n);
	return st;
}
