/*
 * kernels/probe.cu - the device, its errors, its grid, and the copy-
 * bandwidth probe.
 */
#include <stdlib.h>

#include "cuda_util.h"

herd_status herd__k_cuda_error(cudaError_t rc, const char *what)
{
	bool no_gpu = rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver ||
		      rc == cudaErrorDevicesUnavailable || rc == cudaErrorInitializationError;

	/* A sticky error stays; the others are cleared, lest the next caller
	 * take them for its own. */
	(void)cudaGetLastError();
	return herd__error(no_gpu ? HERD_ENODEV : HERD_EIO, "%s: %s (%s)", what,
			   cudaGetErrorString(rc), cudaGetErrorName(rc));
}

herd_status herd__k_grid(const char *what, size_t work, unsigned *blocks)
{
	int dev = 0, sms = 0;
	size_t want = (work + HERD_K_THREADS - 1) / HERD_K_THREADS;
	cudaError_t rc = cudaGetDevice(&dev);

	if (rc == cudaSuccess)
		rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (rc != cudaSuccess)
		return herd__error_wrap(herd__k_cuda_error(rc, "finding the current CUDA device"),
					"%s: ", what);
	if (want > (size_t)sms * HERD_K_BLOCKS_PER_SM)
		want = (size_t)sms * HERD_K_BLOCKS_PER_SM;
	*blocks = want > 0 ? (unsigned)want : 1u;
	return HERD_OK;
}

extern "C" herd_status herd__k_device_count(int *count)
{
	*count = 0;
	HERD_K_CUDA(cudaGetDeviceCount(count), "counting the GPUs");
	if (*count <= 0)
		return herd__error(HERD_ENODEV, "the CUDA runtime sees no GPU");
	return HERD_OK;
}

extern "C" herd_status herd__k_set_device(int index)
{
	HERD_K_CUDA(cudaSetDevice(index), "choosing the GPU");
	return HERD_OK;
}

extern "C" herd_status herd__k_sync(herd__kstream stream)
{
	HERD_K_CUDA(cudaStreamSynchronize((cudaStream_t)stream), "waiting for the GPU");
	return HERD_OK;
}

extern "C" herd_status herd__k_alloc(void **p, size_t bytes)
{
	cudaError_t rc;

	*p = NULL;
	rc = cudaMalloc(p, bytes > 0 ? bytes : 1);
	if (rc == cudaErrorMemoryAllocation) {
		(void)cudaGetLastError();
		return herd__error(HERD_ENOMEM, "allocating %zu bytes on the GPU: %s (%s)", bytes,
				   cudaGetErrorString(rc), cudaGetErrorName(rc));
	}
	HERD_K_CUDA(rc, "allocating GPU memory");
	rc = cudaMemset(*p, 0, bytes > 0 ? bytes : 1);
	if (rc != cudaSuccess) {
		(void)cudaFree(*p);
		*p = NULL;
		return herd__k_cuda_error(rc, "clearing GPU memory");
	}
	return HERD_OK;
}

extern "C" void herd__k_free(void *p)
{
	if (p != NULL)
		(void)cudaFree(p);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* Times the copies; buffers are the caller's. */
static herd_status time_copies(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
			       int repeats, float *ms, cudaStream_t s, cudaEvent_t a, cudaEvent_t b)
{
	HERD_K_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s), "the untimed copy");
	for (int i = 0; i < repeats; i++) {
		HERD_K_CUDA(cudaEventRecord(a, s), "timing a copy");
		HERD_K_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s), "a timed copy");
		HERD_K_CUDA(cudaEventRecord(b, s), "timing a copy");
		HERD_K_CUDA(cudaEventSynchronize(b), "waiting for a timed copy");
		HERD_K_CUDA(cudaEventElapsedTime(&ms[i], a, b), "timing a copy");
	}
	return HERD_OK;
}

extern "C" herd_status herd__k_copy_bandwidth(herd__kcopy kind, size_t bytes, int repeats,
					     double *gbps)
{
	void *dev1 = NULL, *dev2 = NULL, *host = NULL;
	cudaEvent_t a = NULL, b = NULL;
	cudaStream_t s = NULL;
	float *ms = NULL;
	herd_status st = HERD_OK;
	cudaError_t rc;

	*gbps = 0;
	if (bytes == 0 || repeats < 1 || repeats > 100000)
		return herd__error(HERD_EINVAL, "herd__k_copy_bandwidth: %zu bytes %d times: "
				   "expected at least 1 byte, 1 to 100000 times", bytes, repeats);
	if (kind != HERD__KCOPY_D2D && kind != HERD__KCOPY_H2D && kind != HERD__KCOPY_D2H)
		return herd__error(HERD_EINVAL, "herd__k_copy_bandwidth: unknown copy %d", (int)kind);
	ms = (float *)calloc((size_t)repeats, sizeof(*ms));
	if (ms == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for the copy-bandwidth probe");
	rc = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (rc == cudaSuccess)
		rc = cudaEventCreate(&a);
	if (rc == cudaSuccess)
		rc = cudaEventCreate(&b);
	if (rc == cudaSuccess)
		rc = cudaMalloc(&dev1, bytes);
	if (rc == cudaSuccess && kind == HERD__KCOPY_D2D)
		rc = cudaMalloc(&dev2, bytes);
	if (rc == cudaSuccess && kind != HERD__KCOPY_D2D)
		rc = cudaMallocHost(&host, bytes);
	/* Never time zeros or unwritten memory. */
	if (rc == cudaSuccess)
		rc = cudaMemsetAsync(dev1, 0x5a, bytes, s);
	if (rc != cudaSuccess) {
		st = herd__k_cuda_error(rc, "the copy-bandwidth probe: setting up");
	} else if (kind == HERD__KCOPY_D2D) {
		st = time_copies(dev2, dev1, bytes, cudaMemcpyDeviceToDevice, repeats, ms, s, a, b);
	} else if (kind == HERD__KCOPY_H2D) {
		memset(host, 0xa5, bytes);
		st = time_copies(dev1, host, bytes, cudaMemcpyHostToDevice, repeats, ms, s, a, b);
	} else {
		st = time_copies(host, dev1, bytes, cudaMemcpyDeviceToHost, repeats, ms, s, a, b);
	}
	if (st == HERD_OK) {
		double med;

		qsort(ms, (size_t)repeats, sizeof(*ms), cmp_float);
		med = repeats % 2 ? ms[repeats / 2] : (ms[repeats / 2 - 1] + ms[repeats / 2]) / 2.0;
		if (med <= 0)
			st = herd__error(HERD_EIO, "the copy-bandwidth probe: the copies took no "
					 "time");
		else
			*gbps = (double)bytes * (kind == HERD__KCOPY_D2D ? 2.0 : 1.0) / (med * 1e6);
	}
	if (s != NULL)
		(void)cudaStreamSynchronize(s);
	cudaFree(dev1);
	cudaFree(dev2);
	cudaFreeHost(host);
	if (a != NULL)
		cudaEventDestroy(a);
	if (b != NULL)
		cudaEventDestroy(b);
	if (s != NULL)
		cudaStreamDestroy(s);
	free(ms);
	return st;
}
