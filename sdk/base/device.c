/*
 * sdk/base/device.c - device memory through the NVIDIA driver's API,
 * loaded with dlopen (base/dl.c).  The few driver types used are declared
 * here with the values of cuda.h, so that a libherd built without CUDA
 * still tells a device pointer from a host one.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_NOT_READY = 600,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
	CU_MEMORYTYPE_DEVICE = 2,
	CU_STREAM_DEFAULT = 0,
	CU_MEMHOSTREGISTER_PORTABLE = 1,
	CU_EVENT_DISABLE_TIMING = 2
};

#define HERD_CUDA_DRIVER "libcuda.so.1"

struct cu_api {
	CUresult (*init)(unsigned int);
	CUresult (*device_count)(int *);
	CUresult (*error_string)(CUresult, const char **);
	CUresult (*error_name)(CUresult, const char **);
	CUresult (*pointer_attributes)(unsigned int, int *, void **, CUdeviceptr);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*ctx_get_current)(CUcontext *);
	CUresult (*stream_create)(CUstream *, unsigned int);
	CUresult (*stream_destroy)(CUstream);
	CUresult (*event_create)(CUevent *, unsigned int);
	CUresult (*event_destroy)(CUevent);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_query)(CUevent);
	CUresult (*copy_dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*copy_htod)(CUdeviceptr, const void *, size_t);
	CUresult (*host_register)(void *, size_t, unsigned int);
	CUresult (*host_unregister)(void *);
};

#define CU_SYM(fn, field) HERD__DL_SYM(struct cu_api, fn, field, true)

static const herd__dl_symbol cu_symbols[] = {
	CU_SYM(cuInit, init),
	CU_SYM(cuDeviceGetCount, device_count),
	CU_SYM(cuGetErrorString, error_string),
	CU_SYM(cuGetErrorName, error_name),
	CU_SYM(cuPointerGetAttributes, pointer_attributes),
	CU_SYM(cuDeviceGet, device_get),
	CU_SYM(cuDevicePrimaryCtxRetain, primary_retain),
	CU_SYM(cuCtxSetCurrent, ctx_set_current),
	CU_SYM(cuCtxGetCurrent, ctx_get_current),
	CU_SYM(cuStreamCreate, stream_create),
	CU_SYM(cuStreamDestroy_v2, stream_destroy),
	CU_SYM(cuEventCreate, event_create),
	CU_SYM(cuEventDestroy_v2, event_destroy),
	CU_SYM(cuEventRecord, event_record),
	CU_SYM(cuEventQuery, event_query),
	CU_SYM(cuMemcpyDtoH_v2, copy_dtoh),
	CU_SYM(cuMemcpyHtoD_v2, copy_htod),
	CU_SYM(cuMemHostRegister_v2, host_register),
	CU_SYM(cuMemHostUnregister, host_unregister),
};

/* Devices whose primary context is kept (retained once, never released). */
#define DEV_MAX 64

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t primary_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[DEV_MAX];
static struct cu_api cu;
static bool cu_ok;         /* loaded, initialized, with a GPU */
static char cu_why[512];

/* "what: text (NAME)" for a driver error. */
static herd_status cu_error(herd_status st, CUresult rc, const char *what)
{
	const char *text = NULL, *name = NULL;

	if (cu.error_string == NULL || cu.error_string(rc, &text) != CUDA_SUCCESS)
		text = NULL;
	if (cu.error_name == NULL || cu.error_name(rc, &name) != CUDA_SUCCESS)
		name = NULL;
	return herd__error(st, "%s: %s (%s)", what, text != NULL ? text : "unknown error",
			   name != NULL ? name : "CUresult");
}

static void cu_load(void)
{
	int n = 0;
	CUresult rc;

	if (herd__dl_open(HERD_CUDA_DRIVER, cu_symbols, sizeof(cu_symbols) / sizeof(cu_symbols[0]),
			  &cu, cu_why, sizeof(cu_why)) == NULL)
		return;
	rc = cu.init(0);
	if (rc == CUDA_SUCCESS)
		rc = cu.device_count(&n);
	if (rc != CUDA_SUCCESS) {
		(void)cu_error(HERD_ENODEV, rc, "the CUDA driver");
		snprintf(cu_why, sizeof(cu_why), "%s", herd_last_error());
		return;
	}
	if (n == 0) {
		snprintf(cu_why, sizeof(cu_why), "the NVIDIA driver sees no GPU");
		return;
	}
	cu_ok = true;
}

static bool cu_ready(void)
{
	pthread_once(&cu_once, cu_load);
	return cu_ok;
}

/* Why nothing here can use a GPU: HERD_ENODEV with what the driver said. */
static herd_status no_gpu(void)
{
	return herd__error(HERD_ENODEV, "no GPU: %s", cu_why);
}

/* HERD_OK, or HERD_EIO with the driver's words for what failed. */
static herd_status cu_check(CUresult rc, const char *what)
{
	return rc == CUDA_SUCCESS ? HERD_OK : cu_error(HERD_EIO, rc, what);
}

herd__mem herd__dev_where(const void *p, int *device)
{
	int attrs[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
			 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	unsigned int type = 0;
	int managed = 0, ordinal = -1;
	void *data[3] = { &type, &managed, &ordinal };
	CUresult rc;

	*device = -1;
	if (p == NULL || !cu_ready())
		return HERD__MEM_HOST;
	/* Not an error for memory the driver does not know: every attribute
	 * then reads as zero, host memory.  A driver that wants a context
	 * current to answer (a thread of the program's that never used CUDA)
	 * is asked again with GPU 0's: with unified addressing, any context
	 * knows every pointer. */
	rc = cu.pointer_attributes(3, attrs, data, (CUdeviceptr)(uintptr_t)p);
	if (rc != CUDA_SUCCESS) {
		void *saved;

		if (herd__dev_enter(0, &saved) == HERD_OK)
			rc = cu.pointer_attributes(3, attrs, data, (CUdeviceptr)(uintptr_t)p);
		herd__dev_leave(saved);
	}
	if (rc != CUDA_SUCCESS) {
		(void)cu_error(HERD_EIO, rc, "asking the CUDA driver where a buffer is");
		herd__log_warn("%s: %p taken for host memory", herd_last_error(), p);
		return HERD__MEM_HOST;
	}
	if (type != CU_MEMORYTYPE_DEVICE && !managed)
		return HERD__MEM_HOST;
	*device = ordinal;
	return HERD__MEM_DEVICE;
}

/* device's primary context, retained at its first use. */
static herd_status primary_of(int device, CUcontext *ctx)
{
	herd_status st = HERD_OK;
	CUdevice d;
	CUresult rc;

	if (!cu_ready())
		return no_gpu();
	if (device < 0 || device >= DEV_MAX)
		return herd__error(HERD_ENODEV, "GPU %d: libherd uses GPUs 0 to %d of a process",
				   device, DEV_MAX - 1);
	pthread_mutex_lock(&primary_mu);
	if (primary[device] == NULL) {
		rc = cu.device_get(&d, device);
		st = rc != CUDA_SUCCESS ? cu_error(HERD_ENODEV, rc, "finding the GPU")
					: cu_check(cu.primary_retain(&primary[device], d),
						   "making the GPU's context");
	}
	*ctx = primary[device];
	pthread_mutex_unlock(&primary_mu);
	return st;
}

herd_status herd__dev_enter(int device, void **saved)
{
	CUcontext want = NULL, cur = NULL;

	/* What is current first, so that herd__dev_leave after a failed enter
	 * leaves it in place. */
	*saved = NULL;
	if (!cu_ready())
		return no_gpu();
	if (cu.ctx_get_current(&cur) != CUDA_SUCCESS)
		cur = NULL;
	*saved = cur;
	HERD_CHECK(primary_of(device, &want));
	if (cur == want)
		return HERD_OK;
	return cu_check(cu.ctx_set_current(want), "switching to the GPU's context");
}

void herd__dev_leave(void *saved)
{
	CUcontext cur = NULL;

	if (!cu_ready() || cu.ctx_get_current(&cur) != CUDA_SUCCESS || cur == (CUcontext)saved)
		return;
	(void)cu.ctx_set_current((CUcontext)saved);
}

herd_status herd__dev_use(int device)
{
	void *saved;

	return herd__dev_enter(device, &saved);
}

herd_status herd__dev_stream_create(void **stream)
{
	*stream = NULL;
	if (!cu_ready())
		return no_gpu();
	return cu_check(cu.stream_create((CUstream *)stream, CU_STREAM_DEFAULT),
			"creating a CUDA stream");
}

void herd__dev_stream_destroy(void *stream)
{
	if (stream != NULL && cu_ready())
		(void)cu.stream_destroy((CUstream)stream);
}

herd_status herd__dev_event_create(void **event)
{
	*event = NULL;
	if (!cu_ready())
		return no_gpu();
	return cu_check(cu.event_create((CUevent *)event, CU_EVENT_DISABLE_TIMING),
			"creating a CUDA event");
}

void herd__dev_event_destroy(void *event)
{
	if (event != NULL && cu_ready())
		(void)cu.event_destroy((CUevent)event);
}

herd_status herd__dev_event_record(void *event, void *stream)
{
	if (!cu_ready())
		return no_gpu();
	return cu_check(cu.event_record((CUevent)event, (CUstream)stream),
			"recording a CUDA event");
}

herd_status herd__dev_event_query(void *event, bool *done)
{
	CUresult rc;

	*done = false;
	if (!cu_ready())
		return no_gpu();
	rc = cu.event_query((CUevent)event);
	if (rc == CUDA_ERROR_NOT_READY)
		return HERD_OK;
	*done = rc == CUDA_SUCCESS;
	return cu_check(rc, "asking whether a CUDA event happened");
}

/* One synchronous copy either way: to_host from device src into host dst,
 * else from host src into device dst. */
static herd_status dev_copy(void *dst, const void *src, size_t n, bool to_host, const char *what)
{
	CUresult rc = CUDA_SUCCESS;
	char w[256];

	if (!cu_ready())
		return herd__error(HERD_ENODEV, "%s: no GPU: %s", what, cu_why);
	if (n > 0 && to_host)
		rc = cu.copy_dtoh(dst, (CUdeviceptr)(uintptr_t)src, n);
	else if (n > 0)
		rc = cu.copy_htod((CUdeviceptr)(uintptr_t)dst, src, n);
	if (rc == CUDA_SUCCESS)
		return HERD_OK;
	snprintf(w, sizeof(w), "%s: copying %zu bytes %s", what, n,
		 to_host ? "from the GPU" : "to the GPU");
	return cu_error(HERD_EIO, rc, w);
}

herd_status herd__dev_to_host(void *dst, const void *src, size_t n, const char *what)
{
	return dev_copy(dst, src, n, true, what);
}

herd_status herd__dev_from_host(void *dst, const void *src, size_t n, const char *what)
{
	return dev_copy(dst, src, n, false, what);
}

bool herd__dev_pin(int device, void *p, size_t n)
{
	CUresult rc;
	void *saved;

	if (!cu_ready() || p == NULL || n == 0)
		return false;
	if (herd__dev_enter(device, &saved) != HERD_OK) {
		herd__dev_leave(saved);
		herd__log_debug("%s: staging memory stays pageable", herd_last_error());
		return false;
	}
	rc = cu.host_register(p, n, CU_MEMHOSTREGISTER_PORTABLE);
	herd__dev_leave(saved);
	if (rc != CUDA_SUCCESS) {
		(void)cu_error(HERD_EIO, rc, "page-locking the staging memory");
		herd__log_debug("%s: staging memory stays pageable", herd_last_error());
		return false;
	}
	return true;
}

void herd__dev_unpin(int device, void *p)
{
	void *saved;

	if (p == NULL || !cu_ready())
		return;
	if (herd__dev_enter(device, &saved) == HERD_OK)
		(void)cu.host_unregister(p);
	herd__dev_leave(saved);
}
