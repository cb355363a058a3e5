/*
 * kernels/fill.cu - the benchmark's data: fill and verify on the device,
 * as nccl-tests does, so that checking a 1 GiB result costs one pass over
 * device memory and no copy to the host.
 *
 * Rank r's element i is a small integer w(seed, i, r) chosen per operation
 * so that the reduction over the ranks is exact in every type:
 *   SUM, MIN, MAX  -2..2 (unsigned types 0..4);
 *   AVG            -1..1 (unsigned 0..2) times nranks, so the mean is whole;
 *   PROD           1 or 2 (a quarter of them 2), and for signed types a
 *                  quarter negative: the product is a power of two, exact
 *                  in every floating-point type (it may overflow float16's
 *                  range to infinity, there as in the reduction).
 * verify computes each expected element from those values on its own
 * (integers in the unsigned twin, wrapping as herd defines; floating point
 * in double, exact for these values) and counts the elements whose bits
 * differ.
 */
#include "cuda_util.h"

__device__ __forceinline__ uint32_t mix(uint64_t seed, size_t i)
{
	uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

template <typename D> __device__ __forceinline__ int64_t value(int op, uint32_t h, int r, int n)
{
	constexpr bool sign = !D::integral || D::is_signed;
	uint32_t k = h + 7u * (uint32_t)r;

	switch (op) {
	case HERD_PROD: {
		int64_t v = (k >> 2) % 4 == 0 ? 2 : 1;

		return sign && (k >> 4) % 4 == 0 ? -v : v;
	}
	case HERD_AVG:
		return (sign ? (int64_t)(k % 3) - 1 : (int64_t)(k % 3)) * n;
	default:
		return sign ? (int64_t)(k % 5) - 2 : (int64_t)(k % 5);
	}
}

template <typename D>
__global__ void __launch_bounds__(HERD_K_THREADS)
fill_kernel(void *buf, size_t count, int op, int rank, int nranks, uint64_t seed)
{
	const size_t nthr = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += nthr)
		((typename D::S *)buf)[i] =
			D::narrow((typename D::C)value<D>(op, mix(seed, i), rank, nranks));
}

template <typename D> __device__ typename D::S expected(int op, uint32_t h, int nranks)
{
	using C = typename D::C;
	using U = typename D::U;

	if constexpr (D::integral) {
		U acc = (U)(C)value<D>(op, h, 0, nranks);

		for (int r = 1; r < nranks; r++) {
			C x = (C)value<D>(op, h, r, nranks);

			if (op == HERD_PROD)
				acc = (U)(acc * (U)x);
			else if (op == HERD_MIN)
				acc = (U)((C)acc < x ? (C)acc : x);
			else if (op == HERD_MAX)
				acc = (U)((C)acc > x ? (C)acc : x);
			else
				acc = (U)(acc + (U)x);
		}
		return D::narrow(op == HERD_AVG ? herd__k_scale<D>((C)acc, nranks) : (C)acc);
	} else {
		double acc = (double)value<D>(op, h, 0, nranks);

		for (int r = 1; r < nranks; r++) {
			double x = (double)value<D>(op, h, r, nranks);

			if (op == HERD_PROD)
				acc *= x;
			else if (op == HERD_MIN)
				acc = acc < x ? acc : x;
			else if (op == HERD_MAX)
				acc = acc > x ? acc : x;
			else
				acc += x;
		}
		return D::narrow((C)(op == HERD_AVG ? acc / nranks : acc));
	}
}

template <typename D>
__global__ void __launch_bounds__(HERD_K_THREADS)
verify_kernel(const void *buf, size_t count, int op, int nranks, uint64_t seed,
	      unsigned long long *wrong)
{
	const size_t nthr = (size_t)gridDim.x * blockDim.x;
	unsigned long long mine = 0;
	unsigned sum;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += nthr) {
		typename D::S got = ((const typename D::S *)buf)[i];

		mine += got != expected<D>(op, mix(seed, i), nranks);
	}
	/* One atomic per warp that found something. */
	sum = __reduce_add_sync(0xffffffffu, (unsigned)(mine < 0xffffffffull ? mine : 0xffffffffull));
	if ((threadIdx.x & 31) == 0 && sum != 0)
		atomicAdd(wrong, (unsigned long long)sum);
}

static herd_status check_args(const char *fn, const void *buf, herd_dtype dtype, herd_redop op,
			      int rank, int nranks)
{
	if (buf == NULL)
		return herd__error(HERD_EINVAL, "%s: buf is NULL", fn);
	if ((unsigned)dtype >= HERD_DTYPE_COUNT)
		return herd__error(HERD_EINVAL, "%s: unknown datatype %d", fn, (int)dtype);
	if ((unsigned)op >= HERD_REDOP_COUNT)
		return herd__error(HERD_EINVAL, "%s: unknown reduction %d", fn, (int)op);
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return herd__error(HERD_EINVAL, "%s: rank %d of %d ranks", fn, rank, nranks);
	return HERD_OK;
}

extern "C" herd_status herd__k_fill(void *buf, size_t count, herd_dtype dtype, herd_redop op,
				   int rank, int nranks, uint64_t seed, herd__kstream stream)
{
	unsigned blocks;

	if (count == 0)
		return HERD_OK;
	HERD_CHECK(check_args("herd__k_fill", buf, dtype, op, rank, nranks));
	HERD_CHECK(herd__k_grid("the fill kernel", count, &blocks));
	switch (dtype) {
#define FILL_CASE(DT, TRAITS)                                                               \
	case HERD_##DT:                                                                     \
		fill_kernel<HERD_K_UNPAREN TRAITS><<<blocks, HERD_K_THREADS, 0,             \
						    (cudaStream_t)stream>>>(buf, count, op,  \
									    rank, nranks, seed); \
		break;
		HERD_K_TYPES(FILL_CASE)
#undef FILL_CASE
	default:
		break;
	}
	HERD_K_CUDA(cudaGetLastError(), "launching the fill kernel");
	return HERD_OK;
}

extern "C" herd_status herd__k_verify(const void *buf, size_t count, herd_dtype dtype,
				     herd_redop op, int nranks, uint64_t seed, uint64_t *wrong,
				     herd__kstream stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	unsigned long long *dev = NULL, host = 0;
	cudaError_t rc;
	unsigned blocks;

	if (wrong == NULL)
		return herd__error(HERD_EINVAL, "herd__k_verify: wrong is NULL");
	*wrong = 0;
	if (count == 0)
		return HERD_OK;
	HERD_CHECK(check_args("herd__k_verify", buf, dtype, op, 0, nranks));
	HERD_CHECK(herd__k_grid("the verify kernel", count, &blocks));
	HERD_K_CUDA(cudaMallocAsync((void **)&dev, sizeof(*dev), s),
		    "the verify kernel: allocating its counter");
	rc = cudaMemsetAsync(dev, 0, sizeof(*dev), s);
	if (rc == cudaSuccess) {
		switch (dtype) {
#define VERIFY_CASE(DT, TRAITS)                                                              \
	case HERD_##DT:                                                                      \
		verify_kernel<HERD_K_UNPAREN TRAITS><<<blocks, HERD_K_THREADS, 0, s>>>(      \
			buf, count, op, nranks, seed, dev);                                  \
		break;
			HERD_K_TYPES(VERIFY_CASE)
#undef VERIFY_CASE
		default:
			break;
		}
		rc = cudaGetLastError();
	}
	if (rc == cudaSuccess)
		rc = cudaMemcpyAsync(&host, dev, sizeof(host), cudaMemcpyDeviceToHost, s);
	(void)cudaFreeAsync(dev, s);
	if (rc == cudaSuccess)
		rc = cudaStreamSynchronize(s);
	if (rc != cudaSuccess)
		return herd__k_cuda_error(rc, "the verify kernel");
	*wrong = host;
	return HERD_OK;
}
