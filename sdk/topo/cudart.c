/*
 * sdk/topo/cudart.c - GPUs from the CUDA runtime, the second source after
 * NVML: it names GPUs (bus id, UUID, memory, compute capability) but knows
 * nothing of NVLink.  libherd links the static runtime, so this works
 * wherever a driver does, NVML or not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd_config.h"
#include "probe.h"

#if HERD_HAVE_CUDA

#include <cuda_runtime_api.h>

/* The UUID as nvidia-smi and NVML print it. */
static void cuda_uuid_format(const cudaUUID_t *uuid, char out[HERD_NAME_LEN])
{
	const unsigned char *b = (const unsigned char *)uuid->bytes;

	snprintf(out, HERD_NAME_LEN,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		 b[12], b[13], b[14], b[15]);
}

/* Fills *gpu for CUDA device i; false (why[] says so) when it cannot. */
static bool cuda_gpu(struct hwloc_topology *topo, int i, herd_gpu *gpu, char *why, size_t cap)
{
	struct cudaDeviceProp prop;
	char bus[64], bus_id[HERD_PCI_ID_LEN];
	cudaError_t rc;

	memset(&prop, 0, sizeof(prop));
	gpu->ecc = -1;   /* the runtime's ECCEnabled is not read: NVML's is the one kept */
	rc = cudaGetDeviceProperties(&prop, i);
	if (rc == cudaSuccess)
		rc = cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), i);
	if (rc != cudaSuccess || !herd__topo_pci_normalize(bus, bus_id)) {
		herd__topo_why_append(why, cap, "CUDA device %d left out: %s", i,
				      rc != cudaSuccess ? cudaGetErrorString(rc) : "no PCI bus id");
		cudaGetLastError();
		return false;
	}
	herd__topo_pci_locate(topo, bus_id, &gpu->pci);
	cuda_uuid_format(&prop.uuid, gpu->uuid);
	herd__strlcpy(gpu->name, prop.name, sizeof(gpu->name));
	gpu->memory_bytes = prop.totalGlobalMem;
	gpu->cc_major = prop.major;
	gpu->cc_minor = prop.minor;
	return true;
}

herd_status herd__topo_probe_cudart(struct hwloc_topology *topo, herd_node *node,
				    char *why, size_t cap)
{
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");
	herd_gpu *gpus = NULL;
	cudaError_t rc;
	int count = 0;

	why[0] = '\0';
	rc = cudaGetDeviceCount(&count);
	if (rc != cudaSuccess || count <= 0) {
		snprintf(why, cap, "%s",
			 rc != cudaSuccess ? cudaGetErrorString(rc) : "it sees no GPU");
		/* Clear the runtime's last error, lest a later CUDA caller in
		 * this process take it for its own. */
		cudaGetLastError();
		return HERD_EUNAVAIL;
	}
	HERD_CHECK(herd__calloc(&gpus, (size_t)count, sizeof(*gpus), "GPUs"));
	HERD_MUT(herd_gpu *, node->gpus) = gpus;
	for (int i = 0; i < count; i++)
		if (cuda_gpu(topo, i, &gpus[node->ngpus], why, cap))
			node->ngpus++;
	if (node->ngpus == 0) {
		free(gpus);
		HERD_MUT(herd_gpu *, node->gpus) = NULL;
		return HERD_EUNAVAIL;
	}
	herd__topo_sort_gpus(node);
	/* The runtime sees only these; NVML would have seen them all. */
	if (visible != NULL)
		herd__topo_why_append(why, cap, "CUDA_VISIBLE_DEVICES=%s hides any others", visible);
	return HERD_OK;
}

int herd__cudart_device_of(const char *bus_id)
{
	int count = 0;

	if (cudaGetDeviceCount(&count) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	for (int i = 0; i < count; i++) {
		char bus[64], norm[HERD_PCI_ID_LEN];

		if (cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), i) == cudaSuccess &&
		    herd__topo_pci_normalize(bus, norm) && strcmp(norm, bus_id) == 0)
			return i;
	}
	cudaGetLastError();
	return -1;
}

int herd__cudart_driver_version(void)
{
	int v = 0;

	if (cudaDriverGetVersion(&v) != cudaSuccess)
		v = 0;
	cudaGetLastError();
	return v;
}

#else /* !HERD_HAVE_CUDA */

int herd__cudart_driver_version(void)
{
	return 0;
}

int herd__cudart_device_of(const char *bus_id)
{
	(void)bus_id;
	return -1;
}

herd_status herd__topo_probe_cudart(struct hwloc_topology *topo, herd_node *node,
				    char *why, size_t cap)
{
	snprintf(why, cap, "libherd was built without CUDA");
	return HERD_EUNAVAIL;
}

#endif /* HERD_HAVE_CUDA */
