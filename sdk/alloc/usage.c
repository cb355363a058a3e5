/*
 * sdk/alloc/usage.c - what NVML says runs on a GPU (compute processes) and
 * how much of its memory is free, for the warning about stale jobs and the
 * free-memory demand.  NVML is loaded with dlopen, as sdk/topo/nvml.c
 * does, so that libherd runs where there is no driver: there every figure
 * stays unknown (-1).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "alloc_internal.h"

/* The ABI of nvml.h for the entry points below (NVML API version 12). */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef struct nvmlMemory_st {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

/* nvmlProcessInfo_v1_t, of nvmlDeviceGetComputeRunningProcesses. */
struct nvml_proc_v1 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
};

/* nvmlProcessInfo_t (v2 layout), of the _v2 and _v3 entry points. */
struct nvml_proc_v2 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
};

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);

struct nvml_usage_api {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
	nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
	procs_fn procs;
	size_t proc_size;
};

#define USAGE_MAX_PROCS 64

static void *symbol(void *lib, const char *name)
{
	return dlsym(lib, name);
}

/* Loads the entry points; false when the driver or one of them is missing. */
static bool load(void *lib, struct nvml_usage_api *api)
{
	void *p;

	static const struct {
		const char *name;
		size_t size;
	} procs[] = {
		{ "nvmlDeviceGetComputeRunningProcesses_v3", sizeof(struct nvml_proc_v2) },
		{ "nvmlDeviceGetComputeRunningProcesses_v2", sizeof(struct nvml_proc_v2) },
		{ "nvmlDeviceGetComputeRunningProcesses", sizeof(struct nvml_proc_v1) },
	};

	memset(api, 0, sizeof(*api));
	/* POSIX lets a dlsym result become a function pointer; memcpy says so
	 * without the cast ISO C lacks. */
	if ((p = symbol(lib, "nvmlInit_v2")) == NULL)
		return false;
	memcpy(&api->init, &p, sizeof(p));
	if ((p = symbol(lib, "nvmlShutdown")) == NULL)
		return false;
	memcpy(&api->shutdown, &p, sizeof(p));
	if ((p = symbol(lib, "nvmlDeviceGetHandleByUUID")) == NULL)
		return false;
	memcpy(&api->by_uuid, &p, sizeof(p));
	if ((p = symbol(lib, "nvmlDeviceGetMemoryInfo")) != NULL)
		memcpy(&api->memory, &p, sizeof(p));
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if ((p = symbol(lib, procs[i].name)) != NULL) {
			memcpy(&api->procs, &p, sizeof(p));
			api->proc_size = procs[i].size;
			break;
		}
	}
	return true;
}

static void usage_one(const struct nvml_usage_api *api, herd_alloc_gpu_status *s)
{
	unsigned char buf[USAGE_MAX_PROCS * sizeof(struct nvml_proc_v2)];
	unsigned int count = USAGE_MAX_PROCS;
	nvmlDevice_t dev;
	nvmlMemory_t mem;
	nvmlReturn_t rc;

	if (api->by_uuid(s->uuid, &dev) != NVML_SUCCESS)
		return; /* a GPU the driver does not know: a recorded inventory */
	if (api->memory != NULL && api->memory(dev, &mem) == NVML_SUCCESS)
		s->free_memory_bytes =
			mem.free > (unsigned long long)INT64_MAX ? INT64_MAX : (int64_t)mem.free;
	if (api->procs == NULL)
		return;
	rc = api->procs(dev, &count, buf);
	if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
		return;
	s->processes = (int)count;
	if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
		count = 0; /* more than we asked for: the count, without pids */
	for (unsigned int i = 0; i < count && i < HERD_ALLOC_GPU_STATUS_MAX_PIDS; i++) {
		unsigned int pid;

		memcpy(&pid, buf + i * api->proc_size, sizeof(pid));
		s->pids[i] = pid;
	}
}

void herd__alloc_usage(herd_alloc_gpu_status *status, size_t n)
{
	struct nvml_usage_api api;
	void *lib;

	if (n == 0)
		return;
	lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		herd__dl_forget();
		return;
	}
	if (load(lib, &api) && api.init() == NVML_SUCCESS) {
		for (size_t i = 0; i < n; i++)
			usage_one(&api, &status[i]);
		api.shutdown();
	}
	herd__dl_forget();   /* a symbol missing */
	dlclose(lib);
}
