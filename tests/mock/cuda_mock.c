/*
 * tests/mock/cuda_mock.c - a stand-in libcuda.so.1 for machines with no
 * GPU, so that libherd's device path (sdk/base/device.c) and its NCCL
 * transport run in CI against tests/mock/nccl_mock.c.  One "GPU" whose
 * memory is host memory from cuMemAlloc_v2; streams and events on the
 * host's clock: work the stand-in NCCL queues on a stream makes the stream
 * busy until a time (or for ever), and an event recorded on it is ready
 * from then.  HERD_MOCK_CUDA=copy-fail makes device-to-host copies fail,
 * upload-fail host-to-device ones.  Contexts: the primary one and those
 * cuCtxCreate_v2 makes (a program's own), current per thread; copies,
 * page-locking, making, recording and destroying streams and events need
 * one current, as with the driver (CUDA_ERROR_INVALID_CONTEXT otherwise).
 * Only the entry points libherd and the tests use, with the ABI of cuda.h.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
	OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_CONTEXT = 201, NOT_READY = 600,
	ILLEGAL_ADDRESS = 700, ALLOCS = 256, CONTEXTS = 8
};

struct CUstream_st {
	int64_t busy_until_ms;      /* INT64_MAX: never done */
};

struct CUevent_st {
	int64_t ready_ms;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char *p;
	size_t n;
} allocs[ALLOCS];
static int context;             /* the one primary context, by address */
static int own[CONTEXTS];       /* contexts cuCtxCreate_v2 made, by address */
static int nown;
static _Thread_local void *current;

/* CUDA_ERROR_INVALID_CONTEXT when no context is current on this thread. */
#define NEED_CONTEXT() \
	do { \
		if (current == NULL) \
			return INVALID_CONTEXT; \
	} while (0)

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

CUresult cuInit(unsigned int flags)
{
	return flags == 0 ? OK : INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return OK;
}

CUresult cuGetErrorString(CUresult rc, const char **s)
{
	*s = rc == NOT_READY ? "device not ready" : rc == OUT_OF_MEMORY ? "out of memory"
	     : rc == ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
	     : rc == INVALID_CONTEXT ? "invalid device context" : "invalid argument";
	return OK;
}

CUresult cuGetErrorName(CUresult rc, const char **s)
{
	*s = rc == NOT_READY ? "CUDA_ERROR_NOT_READY" : rc == OUT_OF_MEMORY
	     ? "CUDA_ERROR_OUT_OF_MEMORY" : rc == ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
	     : rc == INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT" : "CUDA_ERROR_INVALID_VALUE";
	return OK;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
	if (ordinal != 0)
		return INVALID_VALUE;
	*dev = 0;
	return OK;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	*ctx = &context;
	return dev == 0 ? OK : INVALID_VALUE;
}

/* A context of the program's own on dev (the tests' stand-in for one a
 * library or a program made), current from now on this thread. */
CUresult cuCtxCreate_v2(void **ctx, unsigned int flags, int dev)
{
	(void)flags;
	if (dev != 0)
		return INVALID_VALUE;
	pthread_mutex_lock(&mu);
	*ctx = nown < CONTEXTS ? &own[nown++] : NULL;
	pthread_mutex_unlock(&mu);
	if (*ctx == NULL)
		return OUT_OF_MEMORY;
	current = *ctx;
	return OK;
}

CUresult cuCtxSetCurrent(void *ctx)
{
	int known = ctx == &context || ctx == NULL;

	for (int i = 0; i < CONTEXTS && !known; i++)
		known = ctx == &own[i];
	if (!known)
		return INVALID_CONTEXT;
	current = ctx;
	return OK;
}

CUresult cuCtxGetCurrent(void **ctx)
{
	*ctx = current;
	return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
	CUresult rc = OUT_OF_MEMORY;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < ALLOCS; i++) {
		if (allocs[i].p != NULL)
			continue;
		allocs[i].p = calloc(1, n > 0 ? n : 1);
		allocs[i].n = n;
		*dptr = (CUdeviceptr)(uintptr_t)allocs[i].p;
		rc = allocs[i].p != NULL ? OK : OUT_OF_MEMORY;
		break;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult rc = INVALID_VALUE;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < ALLOCS; i++) {
		if ((uintptr_t)allocs[i].p != dptr || dptr == 0)
			continue;
		free(allocs[i].p);
		allocs[i].p = NULL;
		rc = OK;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags)
{
	NEED_CONTEXT();
	return p != NULL && n > 0 && (flags & ~1u) == 0 ? OK : INVALID_VALUE;
}

CUresult cuMemHostUnregister(void *p)
{
	NEED_CONTEXT();
	return p != NULL ? OK : INVALID_VALUE;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	const char *m = getenv("HERD_MOCK_CUDA");

	NEED_CONTEXT();
	if (m != NULL && strcmp(m, "copy-fail") == 0)
		return ILLEGAL_ADDRESS;
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	const char *m = getenv("HERD_MOCK_CUDA");

	NEED_CONTEXT();
	if (m != NULL && strcmp(m, "upload-fail") == 0)
		return ILLEGAL_ADDRESS;
	memcpy((void *)(uintptr_t)dst, src, n);
	return OK;
}

/* Memory type 2 (device) and ordinal 0 inside an allocation; zeros, and
 * success, for anything else, as the driver answers for host memory. */
CUresult cuPointerGetAttributes(unsigned int n, int *attrs, void **data, CUdeviceptr ptr)
{
	int dev = 0;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < ALLOCS; i++)
		if (allocs[i].p != NULL && ptr >= (uintptr_t)allocs[i].p &&
		    ptr < (uintptr_t)allocs[i].p + allocs[i].n)
			dev = 1;
	pthread_mutex_unlock(&mu);
	for (unsigned int k = 0; k < n; k++) {
		switch (attrs[k]) {
		case 2:         /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
			*(unsigned int *)data[k] = dev ? 2u : 0u;
			break;
		case 8:         /* CU_POINTER_ATTRIBUTE_IS_MANAGED */
			*(int *)data[k] = 0;
			break;
		case 9:         /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
			*(int *)data[k] = dev ? 0 : -2;
			break;
		default:
			return INVALID_VALUE;
		}
	}
	return OK;
}

CUresult cuStreamCreate(struct CUstream_st **s, unsigned int flags)
{
	(void)flags;
	NEED_CONTEXT();
	*s = calloc(1, sizeof(**s));
	return *s != NULL ? OK : OUT_OF_MEMORY;
}

CUresult cuStreamDestroy_v2(struct CUstream_st *s)
{
	NEED_CONTEXT();
	free(s);
	return OK;
}

CUresult cuEventCreate(struct CUevent_st **e, unsigned int flags)
{
	(void)flags;
	NEED_CONTEXT();
	*e = calloc(1, sizeof(**e));
	return *e != NULL ? OK : OUT_OF_MEMORY;
}

CUresult cuEventDestroy_v2(struct CUevent_st *e)
{
	NEED_CONTEXT();
	free(e);
	return OK;
}

CUresult cuEventRecord(struct CUevent_st *e, struct CUstream_st *s)
{
	NEED_CONTEXT();
	pthread_mutex_lock(&mu);
	e->ready_ms = s != NULL ? s->busy_until_ms : 0;
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuEventQuery(struct CUevent_st *e)
{
	int64_t ready;

	pthread_mutex_lock(&mu);
	ready = e->ready_ms;
	pthread_mutex_unlock(&mu);
	return ready <= now_ms() ? OK : NOT_READY;
}

/* For the stand-in NCCL: work queued on s ends at until_ms (INT64_MAX:
 * never), after whatever it queued before. */
void herd_mock_stream_busy(struct CUstream_st *s, int64_t until_ms)
{
	pthread_mutex_lock(&mu);
	if (until_ms > s->busy_until_ms)
		s->busy_until_ms = until_ms;
	pthread_mutex_unlock(&mu);
}
