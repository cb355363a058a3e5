/*
 * kernels/reduce.cu - element-wise reductions of up to HERD__K_MAX_SRCS
 * arrays into one, and casts between the floating-point types.
 *
 * The reduction is memory-bound: nsrc arrays read once, one written once.
 * Each thread moves 16 bytes per access and keeps HERD_K_UNROLL of them in
 * flight per source before combining, over a resident grid that strides
 * through the arrays; what is left past the last whole 16 bytes (or all of
 * it, when a pointer is not 16-byte aligned) goes element by element.
 */
#include "cuda_util.h"

#define HERD_K_UNROLL 4

typedef struct srcs {
	const void *p[HERD__K_MAX_SRCS];
} srcs;

template <typename D> union vec16 {
	uint4 raw;
	typename D::S e[16 / sizeof(typename D::S)];
};

template <typename D, int OP>
__global__ void __launch_bounds__(HERD_K_THREADS)
reduce_kernel(void *dst_, srcs s, int nsrc, size_t nvec, size_t count, int div)
{
	using S = typename D::S;
	using C = typename D::C;
	constexpr int V = 16 / sizeof(S);
	const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	const size_t nthr = (size_t)gridDim.x * blockDim.x;

	for (size_t base = 0; base < nvec; base += nthr * HERD_K_UNROLL) {
		vec16<D> in[HERD_K_UNROLL];
		C acc[HERD_K_UNROLL][V];

#pragma unroll
		for (int u = 0; u < HERD_K_UNROLL; u++) {
			size_t v = base + u * nthr + tid;

			if (v < nvec)
				in[u].raw = ((const uint4 *)s.p[0])[v];
		}
#pragma unroll
		for (int u = 0; u < HERD_K_UNROLL; u++)
#pragma unroll
			for (int e = 0; e < V; e++)
				acc[u][e] = D::widen(in[u].e[e]);
		for (int k = 1; k < nsrc; k++) {
#pragma unroll
			for (int u = 0; u < HERD_K_UNROLL; u++) {
				size_t v = base + u * nthr + tid;

				if (v < nvec)
					in[u].raw = ((const uint4 *)s.p[k])[v];
			}
#pragma unroll
			for (int u = 0; u < HERD_K_UNROLL; u++)
#pragma unroll
				for (int e = 0; e < V; e++)
					acc[u][e] = herd__k_combine<D, OP>(acc[u][e],
									  D::widen(in[u].e[e]));
		}
#pragma unroll
		for (int u = 0; u < HERD_K_UNROLL; u++) {
			size_t v = base + u * nthr + tid;
			vec16<D> out;

			if (v >= nvec)
				continue;
#pragma unroll
			for (int e = 0; e < V; e++)
				out.e[e] = D::narrow(div > 1 ? herd__k_scale<D>(acc[u][e], div) : acc[u][e]);
			((uint4 *)dst_)[v] = out.raw;
		}
	}
	for (size_t i = nvec * V + tid; i < count; i += nthr) {
		C acc = D::widen(((const S *)s.p[0])[i]);

		for (int k = 1; k < nsrc; k++)
			acc = herd__k_combine<D, OP>(acc, D::widen(((const S *)s.p[k])[i]));
		((S *)dst_)[i] = D::narrow(div > 1 ? herd__k_scale<D>(acc, div) : acc);
	}
}

template <typename D, int OP>
static herd_status reduce_launch(void *dst, const srcs &s, int nsrc, size_t count, int div,
				 cudaStream_t stream)
{
	constexpr size_t V = 16 / sizeof(typename D::S);
	bool aligned = ((uintptr_t)dst & 15) == 0;
	size_t nvec;
	unsigned blocks;

	for (int k = 0; k < nsrc; k++)
		aligned = aligned && ((uintptr_t)s.p[k] & 15) == 0;
	nvec = aligned ? count / V : 0;
	HERD_CHECK(herd__k_grid("the reduction kernel",
				nvec > 0 ? (nvec + HERD_K_UNROLL - 1) / HERD_K_UNROLL
					 : count - nvec * V,
				&blocks));
	reduce_kernel<D, OP><<<blocks, HERD_K_THREADS, 0, stream>>>(dst, s, nsrc, nvec, count, div);
	HERD_K_CUDA(cudaGetLastError(), "launching the reduction kernel");
	return HERD_OK;
}

template <typename D>
static herd_status reduce_op(void *dst, const srcs &s, int nsrc, size_t count, herd_redop op,
			     cudaStream_t stream)
{
	switch (op) {
	case HERD_SUM:
		return reduce_launch<D, HERD_SUM>(dst, s, nsrc, count, 1, stream);
	case HERD_AVG:
		return reduce_launch<D, HERD_SUM>(dst, s, nsrc, count, nsrc, stream);
	case HERD_PROD:
		return reduce_launch<D, HERD_PROD>(dst, s, nsrc, count, 1, stream);
	case HERD_MIN:
		return reduce_launch<D, HERD_MIN>(dst, s, nsrc, count, 1, stream);
	case HERD_MAX:
		return reduce_launch<D, HERD_MAX>(dst, s, nsrc, count, 1, stream);
	default:
		return herd__error(HERD_EINVAL, "herd__k_reduce: unknown reduction %d", (int)op);
	}
}

extern "C" herd_status herd__k_reduce(void *dst, const void *const *src_list, int nsrc,
				     size_t count, herd_dtype dtype, herd_redop op,
				     herd__kstream stream)
{
	srcs s = {};

	if (nsrc < 1 || nsrc > HERD__K_MAX_SRCS)
		return herd__error(HERD_EINVAL, "herd__k_reduce: nsrc is %d, expected 1 to %d",
				   nsrc, HERD__K_MAX_SRCS);
	if (count == 0)
		return HERD_OK;
	if (dst == NULL || src_list == NULL)
		return herd__error(HERD_EINVAL, "herd__k_reduce: %s is NULL",
				   dst == NULL ? "dst" : "srcs");
	for (int k = 0; k < nsrc; k++) {
		if (src_list[k] == NULL)
			return herd__error(HERD_EINVAL, "herd__k_reduce: srcs[%d] is NULL", k);
		s.p[k] = src_list[k];
	}
	switch (dtype) {
#define REDUCE_CASE(DT, TRAITS)                                                        \
	case HERD_##DT:                                                                \
		return reduce_op<HERD_K_UNPAREN TRAITS>(dst, s, nsrc, count, op,       \
							(cudaStream_t)stream);
		HERD_K_TYPES(REDUCE_CASE)
#undef REDUCE_CASE
	default:
		return herd__error(HERD_EINVAL, "herd__k_reduce: unknown datatype %d", (int)dtype);
	}
}

template <typename D>
static herd_status divide_launch(void *buf, const srcs &s, size_t count, int div,
				 cudaStream_t stream)
{
	return reduce_launch<D, HERD_SUM>(buf, s, 1, count, div, stream);
}

extern "C" herd_status herd__k_divide(void *buf, size_t count, herd_dtype dtype, int div,
				     herd__kstream stream)
{
	srcs s = {};

	if (div < 1)
		return herd__error(HERD_EINVAL, "herd__k_divide: div is %d, expected 1 or more",
				   div);
	if (count == 0 || div == 1)
		return HERD_OK;
	if (buf == NULL)
		return herd__error(HERD_EINVAL, "herd__k_divide: buf is NULL");
	s.p[0] = buf;
	switch (dtype) {
#define DIVIDE_CASE(DT, TRAITS)                                                        \
	case HERD_##DT:                                                                \
		return divide_launch<HERD_K_UNPAREN TRAITS>(buf, s, count, div,        \
							    (cudaStream_t)stream);
		HERD_K_TYPES(DIVIDE_CASE)
#undef DIVIDE_CASE
	default:
		return herd__error(HERD_EINVAL, "herd__k_divide: unknown datatype %d", (int)dtype);
	}
}

/* ---- casts ------------------------------------------------------------------- */

/* Every floating-point value of herd's types is exact in double, so a cast
 * widens to double and rounds once into the destination type. */
template <typename D> __device__ __forceinline__ double to_double(typename D::S s)
{
	return (double)D::widen(s);
}

template <typename D> __device__ __forceinline__ typename D::S from_double(double d);
template <> __device__ __forceinline__ uint16_t from_double<herd_kt_f16>(double d)
{
	return __half_as_ushort(__double2half(d));
}
template <> __device__ __forceinline__ uint16_t from_double<herd_kt_bf16>(double d)
{
	return __bfloat16_as_ushort(__double2bfloat16(d));
}
template <> __device__ __forceinline__ float from_double<herd_kt<float, float>>(double d)
{
	return __double2float_rn(d);
}
template <> __device__ __forceinline__ double from_double<herd_kt<double, double>>(double d)
{
	return d;
}
template <> __device__ __forceinline__ uint8_t from_double<herd_kt_e4m3>(double d)
{
	return __nv_cvt_double_to_fp8(d, __NV_SATFINITE, __NV_E4M3);
}
template <> __device__ __forceinline__ uint8_t from_double<herd_kt_e5m2>(double d)
{
	return __nv_cvt_double_to_fp8(d, __NV_SATFINITE, __NV_E5M2);
}

template <typename TO, typename FROM>
__global__ void __launch_bounds__(HERD_K_THREADS)
cast_kernel(void *dst, const void *src, size_t count)
{
	const size_t nthr = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += nthr)
		((typename TO::S *)dst)[i] =
			from_double<TO>(to_double<FROM>(((const typename FROM::S *)src)[i]));
}

/* X(DTYPE, traits) for the types a cast takes. */
#define HERD_K_FLOAT_TYPES(X)                     \
	X(FLOAT16, (herd_kt_f16))                 \
	X(BFLOAT16, (herd_kt_bf16))               \
	X(FLOAT32, (herd_kt<float, float>))       \
	X(FLOAT64, (herd_kt<double, double>))     \
	X(FLOAT8_E4M3, (herd_kt_e4m3))            \
	X(FLOAT8_E5M2, (herd_kt_e5m2))

template <typename TO>
static herd_status cast_from(void *dst, const void *src, herd_dtype from, size_t count,
			     cudaStream_t stream)
{
	unsigned blocks;

	HERD_CHECK(herd__k_grid("the cast kernel", count, &blocks));
	switch (from) {
#define CAST_CASE(DT, TRAITS)                                                                 \
	case HERD_##DT:                                                                       \
		cast_kernel<TO, HERD_K_UNPAREN TRAITS><<<blocks, HERD_K_THREADS, 0, stream>>>( \
			dst, src, count);                                                     \
		break;
		HERD_K_FLOAT_TYPES(CAST_CASE)
#undef CAST_CASE
	default:
		return HERD_EINVAL;
	}
	HERD_K_CUDA(cudaGetLastError(), "launching the cast kernel");
	return HERD_OK;
}


extern "C" herd_status herd__k_cast(void *dst, herd_dtype to, const void *src, herd_dtype from,
				   size_t count, herd__kstream stream)
{
	if (!herd_dtype_is_float(to) || !herd_dtype_is_float(from))
		return herd__error(HERD_EINVAL, "herd__k_cast: %s to %s: casts are between "
				   "the floating types (float16, bfloat16, float32, float64, "
				   "float8_e4m3, float8_e5m2)",
				   herd_dtype_name(from), herd_dtype_name(to));
	if (count == 0)
		return HERD_OK;
	if (dst == NULL || src == NULL)
		return herd__error(HERD_EINVAL, "herd__k_cast: %s is NULL",
				   dst == NULL ? "dst" : "src");
	switch (to) {
#define CAST_TO(DT, TRAITS)                                                                 \
	case HERD_##DT:                                                                     \
		return cast_from<HERD_K_UNPAREN TRAITS>(dst, src, from, count,              \
							(cudaStream_t)stream);
		HERD_K_FLOAT_TYPES(CAST_TO)
#undef CAST_TO
	default:
		return HERD_EINVAL;
	}
}
