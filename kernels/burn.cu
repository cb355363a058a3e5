/*
 * kernels/burn.cu - the burn test: cuBLAS matrix products on small-integer
 * inputs, each checked against a reference product computed once by a
 * plain tiled kernel here.  cuBLAS is loaded with dlopen, as NVML is, so
 * that libherd loads where the CUDA toolkit's libraries are absent.
 */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

#include "cuda_util.h"

#define TILE 16

/* C = A B, column-major, n x n, n a multiple of TILE. */
__global__ void gemm_ref(float *c, const float *a, const float *b, int n)
{
	__shared__ float as[TILE][TILE + 1], bs[TILE][TILE + 1];
	int row = blockIdx.x * TILE + threadIdx.x, col = blockIdx.y * TILE + threadIdx.y;
	float acc = 0;

	for (int t = 0; t < n; t += TILE) {
		as[threadIdx.y][threadIdx.x] = a[(size_t)(t + threadIdx.y) * n + row];
		bs[threadIdx.y][threadIdx.x] = b[(size_t)col * n + t + threadIdx.x];
		__syncthreads();
#pragma unroll
		for (int k = 0; k < TILE; k++)
			acc += as[k][threadIdx.x] * bs[threadIdx.y][k];
		__syncthreads();
	}
	c[(size_t)col * n + row] = acc;
}

__global__ void __launch_bounds__(HERD_K_THREADS)
count_diff(const float *x, const float *y, size_t count, unsigned long long *wrong)
{
	const size_t nthr = (size_t)gridDim.x * blockDim.x;
	unsigned mine = 0, sum;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += nthr)
		mine += __float_as_uint(x[i]) != __float_as_uint(y[i]);
	sum = __reduce_add_sync(0xffffffffu, mine);
	if ((threadIdx.x & 31) == 0 && sum != 0)
		atomicAdd(wrong, (unsigned long long)sum);
}

struct cublas_api {
	void *lib;
	decltype(&cublasCreate_v2) create;
	decltype(&cublasDestroy_v2) destroy;
	decltype(&cublasSgemm_v2) sgemm;
};

static herd_status cublas_load(cublas_api *api)
{
	char name[32];
	const char *err;

	snprintf(name, sizeof(name), "libcublas.so.%d", CUDART_VERSION / 1000);
	api->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (api->lib == NULL) {
		err = dlerror();
		return herd__error(HERD_EUNAVAIL, "the burn test needs cuBLAS: %s",
				   err != NULL ? err : name);
	}
	api->create = (decltype(api->create))dlsym(api->lib, "cublasCreate_v2");
	api->destroy = (decltype(api->destroy))dlsym(api->lib, "cublasDestroy_v2");
	api->sgemm = (decltype(api->sgemm))dlsym(api->lib, "cublasSgemm_v2");
	if (api->create == NULL || api->destroy == NULL || api->sgemm == NULL) {
		dlclose(api->lib);
		api->lib = NULL;
		return herd__error(HERD_EUNAVAIL, "%s lacks cublasCreate_v2, cublasDestroy_v2 or "
				   "cublasSgemm_v2", name);
	}
	return HERD_OK;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The products, checked, until `seconds` have passed; 8 between looks at the clock. */
static herd_status burn_loop(const cublas_api *api, cublasHandle_t h, float *a, float *b,
			     float *c, const float *ref, int n, double seconds,
			     unsigned long long *dev_wrong, herd__kburn *out)
{
	const float one = 1, zero = 0;
	size_t count = (size_t)n * n;
	unsigned blocks;
	double t0 = now_s();

	HERD_CHECK(herd__k_grid("the burn", count, &blocks));
	do {
		for (int i = 0; i < 8; i++) {
			cublasStatus_t cs = api->sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a,
						       n, b, n, &zero, c, n);

			if (cs != CUBLAS_STATUS_SUCCESS)
				return herd__error(HERD_EIO, "the burn: a cuBLAS matrix product "
						   "failed with status %d", (int)cs);
			count_diff<<<blocks, HERD_K_THREADS>>>(c, ref, count, dev_wrong);
			out->iterations++;
		}
		HERD_K_CUDA(cudaDeviceSynchronize(), "the burn: the products");
	} while (now_s() - t0 < seconds);
	out->seconds = now_s() - t0;
	return HERD_OK;
}

extern "C" herd_status herd__k_burn(double seconds, int n, herd__kburn *out)
{
	cublas_api api = {};
	cublasHandle_t h = NULL;
	float *a = NULL, *b = NULL, *c = NULL, *ref = NULL;
	unsigned long long *dev_wrong = NULL, wrong = 0;
	size_t bytes = (size_t)n * n * sizeof(float);
	herd_status st = HERD_OK;
	cudaError_t rc;

	memset(out, 0, sizeof(*out));
	out->n = n;
	if (n < TILE || n % TILE != 0 || n > 32768 || !(seconds >= 0 && seconds <= 3600))
		return herd__error(HERD_EINVAL, "herd__k_burn: order %d for %g s: expected a "
				   "multiple of %d up to 32768, for 0 to 3600 s", n, seconds, TILE);
	HERD_CHECK(cublas_load(&api));
	rc = cudaMalloc((void **)&a, bytes);
	if (rc == cudaSuccess)
		rc = cudaMalloc((void **)&b, bytes);
	if (rc == cudaSuccess)
		rc = cudaMalloc((void **)&c, bytes);
	if (rc == cudaSuccess)
		rc = cudaMalloc((void **)&ref, bytes);
	if (rc == cudaSuccess)
		rc = cudaMalloc((void **)&dev_wrong, sizeof(*dev_wrong));
	if (rc == cudaSuccess)
		rc = cudaMemset(dev_wrong, 0, sizeof(*dev_wrong));
	if (rc != cudaSuccess) {
		st = herd__k_cuda_error(rc, "the burn: allocating the matrices");
		goto out;
	}
	/* Small integers in -2..2: every sum of products is exact in float32. */
	st = herd__k_fill(a, (size_t)n * n, HERD_FLOAT32, HERD_SUM, 0, 1, 11, NULL);
	if (st == HERD_OK)
		st = herd__k_fill(b, (size_t)n * n, HERD_FLOAT32, HERD_SUM, 0, 1, 12, NULL);
	if (st != HERD_OK)
		goto out;
	gemm_ref<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(ref, a, b, n);
	rc = cudaGetLastError();
	if (rc != cudaSuccess) {
		st = herd__k_cuda_error(rc, "the burn: the reference product");
		goto out;
	}
	if (api.create(&h) != CUBLAS_STATUS_SUCCESS) {
		st = herd__error(HERD_EIO, "the burn: cannot create a cuBLAS handle");
		goto out;
	}
	st = burn_loop(&api, h, a, b, c, ref, n, seconds, dev_wrong, out);
	if (st == HERD_OK) {
		rc = cudaMemcpy(&wrong, dev_wrong, sizeof(wrong), cudaMemcpyDeviceToHost);
		if (rc != cudaSuccess)
			st = herd__k_cuda_error(rc, "the burn: reading the count");
		out->wrong = wrong;
		out->tflops = out->seconds > 0 ? 2.0 * n * (double)n * n * out->iterations /
							 out->seconds / 1e12
					       : 0;
	}
out:
	if (h != NULL)
		api.destroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	cudaFree(ref);
	cudaFree(dev_wrong);
	if (api.lib != NULL)
		dlclose(api.lib);
	return st;
}
