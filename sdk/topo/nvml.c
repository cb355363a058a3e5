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
};

static const struct nvml_symbol {
	const char *name;
	size_t offset;
	bool required;
} nvml_symbols[] = {
	{ "nvmlInit_v2", offsetof(struct nvml_api, init), true },
	{ "nvmlShutdown", offsetof(struct nvml_api, shutdown), true },
	{ "nvmlErrorString", offsetof(struct nvml_api, error_string), true },
	{ "nvmlDeviceGetCount_v2", offsetof(struct nvml_api, device_count), true },
	{ "nvmlDeviceGetHandleByIndex_v2", offsetof(struct nvml_api, handle_by_index), true },
	{ "nvmlDeviceGetUUID", offsetof(struct nvml_api, uuid), true },
	{ "nvmlDeviceGetName", offsetof(struct nvml_api, name), true },
	{ "nvmlDeviceGetPciInfo_v3", offsetof(struct nvml_api, pci_info), true },
	{ "nvmlDeviceGetMemoryInfo", offsetof(struct nvml_api, memory_info), true },
	{ "nvmlDeviceGetCudaComputeCapability", offsetof(struct nvml_api, cuda_cc), true },
	{ "nvmlDeviceGetNvLinkState", offsetof(struct nvml_api, nvlink_state), false },
	{ "nvmlDeviceGetNvLinkRemotePciInfo_v2", offsetof(struct nvml_api, nvlink_remote_pci),
	  false },
	{ "nvmlDeviceGetNvLinkRemoteDeviceType", offsetof(struct nvml_api, nvlink_remote_type),
	  false },
	{ "nvmlSystemGetDriverVersion", offsetof(struct nvml_api, driver_version), false },
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
	const char *err;

	p->lib = dlopen(HERD_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (p->lib == NULL) {
		err = dlerror();
		snprintf(p->why, p->cap, "NVIDIA driver not found (%s)",
			 err != NULL ? err : HERD_NVML_LIBRARY ": cannot be loaded");
		return false;
	}
	for (size_t i = 0; i < sizeof(nvml_symbols) / sizeof(nvml_symbols[0]); i++) {
		const struct nvml_symbol *s = &nvml_symbols[i];
		void *sym = dlsym(p->lib, s->name);

		if (sym == NULL && s->required) {
			snprintf(p->why, p->cap, "NVIDIA driver too old: %s lacks %s",
				 HERD_NVML_LIBRARY, s->name);
			dlclose(p->lib);
			p->lib = NULL;
			return false;
		}
		/* POSIX guarantees a data pointer from dlsym converts to a
		 * function pointer; memcpy says so without a cast ISO C lacks. */
		memcpy((char *)&p->api + s->offset, &sym, sizeof(sym));
	}
	return true;
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
		herd__topo_why_append(p->why, p->cap, "GPU %s: nvmlDeviceGetUUID: %s", bus_id,
				      nvml_err(p, rc));
	if (api->name(dev, text, sizeof(text)) == NVML_SUCCESS)
		herd__strlcpy(gpu->name, text, sizeof(gpu->name));
	if (api->memory_info(dev, &mem) == NVML_SUCCESS)
		gpu->memory_bytes = mem.total;
	if (api->cuda_cc(dev, &gpu->cc_major, &gpu->cc_minor) != NVML_SUCCESS)
		gpu->cc_major = gpu->cc_minor = 0;
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
		snprintf(p->why, p->cap, "NVML: nvmlDeviceGetCount_v2: %s", nvml_err(p, rc));
		return HERD_EUNAVAIL;
	}
	if (count == 0) {
		snprintf(p->why, p->cap, "NVML: the NVIDIA driver sees no GPU");
		return HERD_EUNAVAIL;
	}
	if (!nvml_has_nvlink(&p->api))
		herd__topo_why_append(p->why, p->cap, "NVLink unknown: %s lacks the NVLink queries",
				      HERD_NVML_LIBRARY);
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
	nvmlReturn_t rc;

	why[0] = '\0';
	if (!nvml_load(&p))
		return HERD_EUNAVAIL;
	rc = p.api.init();
	if (rc != NVML_SUCCESS) {
		snprintf(why, cap, "NVML: nvmlInit_v2: %s", nvml_err(&p, rc));
		dlclose(p.lib);
		return HERD_EUNAVAIL;
	}
	st = nvml_gpus(&p, node);
	p.api.shutdown();
	dlclose(p.lib);
	return st;
}

bool herd__nvml_driver_version(char *out, size_t cap, char *why, size_t why_cap)
{
	struct nvml_probe p = { .why = why, .cap = why_cap };
	char text[96] = "";
	nvmlReturn_t rc;

	out[0] = why[0] = '\0';
	if (!nvml_load(&p))
		return false;
	rc = p.api.init();
	if (rc == NVML_SUCCESS) {
		rc = p.api.driver_version != NULL ? p.api.driver_version(text, sizeof(text))
						  : NVML_SUCCESS;
		p.api.shutdown();
	}
	if (rc != NVML_SUCCESS)
		snprintf(why, why_cap, "NVML: %s", nvml_err(&p, rc));
	else if (text[0] == '\0')
		snprintf(why, why_cap, "%s lacks nvmlSystemGetDriverVersion", HERD_NVML_LIBRARY);
	else
		herd__strlcpy(out, text, cap);
	dlclose(p.lib);
	return out[0] != '\0';
}
