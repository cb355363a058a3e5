/*
 * kernels/cuda_util.h - what the .cu files of kernels/ share: herd's error
 * for a CUDA failure, the element types as templates (storage type, the
 * type arithmetic is done in, the unsigned twin for wrap-around), and the
 * reductions, written once for every type as sdk/comm/reduce.c has them.
 */
#ifndef HERD_KERNELS_CUDA_UTIL_H
#define HERD_KERNELS_CUDA_UTIL_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>

extern "C" {
#include "base.h"
}
#include "kernels.h"

/* HERD_ENODEV where no GPU can be used at all, HERD_EIO for any other CUDA
 * failure; the message is "what: CUDA's text (its error name)". */
herd_status herd__k_cuda_error(cudaError_t rc, const char *what);

#define HERD_K_CUDA(call, what)                                   \
	do {                                                      \
		cudaError_t herd__k_rc_ = (call);                  \
		if (herd__k_rc_ != cudaSuccess)                    \
			return herd__k_cuda_error(herd__k_rc_, what); \
	} while (0)

/* The threads of a block, and blocks per multiprocessor for a grid that
 * stays resident (a grid-stride loop does the rest). */
#define HERD_K_THREADS 256
#define HERD_K_BLOCKS_PER_SM 8

/* How many blocks to launch for `work` threads' worth of work; what names
 * the kernel in an error ("the fill kernel"). */
herd_status herd__k_grid(const char *what, size_t work, unsigned *blocks);

/* ---- element types --------------------------------------------------------- */

/* S: how an element is stored; C: the type its arithmetic is done in;
 * U: C's unsigned twin (C itself for floating point). */
template <typename S_, typename C_> struct herd_kt {
	using S = S_;
	using C = C_;
	using U = typename std::conditional<std::is_integral<C_>::value,
					    std::make_unsigned<C_>, std::common_type<C_>>::type::type;
	static constexpr bool integral = std::is_integral<C_>::value;
	static constexpr bool is_signed = std::is_signed<C_>::value;
	__device__ static C widen(S s) { return (C)s; }
	__device__ static S narrow(C c) { return (S)c; }
};

struct herd_kt_f16 : herd_kt<uint16_t, float> {
	__device__ static float widen(uint16_t s) { return __half2float(__ushort_as_half(s)); }
	__device__ static uint16_t narrow(float c) { return __half_as_ushort(__float2half_rn(c)); }
};

struct herd_kt_bf16 : herd_kt<uint16_t, float> {
	__device__ static float widen(uint16_t s)
	{
		return __bfloat162float(__ushort_as_bfloat16(s));
	}
	__device__ static uint16_t narrow(float c)
	{
		return __bfloat16_as_ushort(__float2bfloat16_rn(c));
	}
};

/* The 8-bit floats: to float through half (exact), and back saturating as
 * herd's host conversions do (__NV_SATFINITE, nearest even). */
template <__nv_fp8_interpretation_t F> struct herd_kt_fp8 : herd_kt<uint8_t, float> {
	__device__ static float widen(uint8_t s)
	{
		return __half2float(__half(__nv_cvt_fp8_to_halfraw(s, F)));
	}
	__device__ static uint8_t narrow(float c)
	{
		return __nv_cvt_float_to_fp8(c, __NV_SATFINITE, F);
	}
};
using herd_kt_e4m3 = herd_kt_fp8<__NV_E4M3>;
using herd_kt_e5m2 = herd_kt_fp8<__NV_E5M2>;

/* X(DTYPE, traits) for every type herd reduces. */
#define HERD_K_TYPES(X)                              \
	X(INT8, (herd_kt<int8_t, int8_t>))           \
	X(UINT8, (herd_kt<uint8_t, uint8_t>))        \
	X(INT32, (herd_kt<int32_t, int32_t>))        \
	X(UINT32, (herd_kt<uint32_t, uint32_t>))     \
	X(INT64, (herd_kt<int64_t, int64_t>))        \
	X(UINT64, (herd_kt<uint64_t, uint64_t>))     \
	X(FLOAT16, (herd_kt_f16))                    \
	X(BFLOAT16, (herd_kt_bf16))                  \
	X(FLOAT32, (herd_kt<float, float>))          \
	X(FLOAT64, (herd_kt<double, double>))        \
	X(FLOAT8_E4M3, (herd_kt_e4m3))               \
	X(FLOAT8_E5M2, (herd_kt_e5m2))

#define HERD_K_UNPAREN(...) __VA_ARGS__

/* ---- the reductions ---------------------------------------------------------- */

/* x OP y, as reduce.c's RED_* macros: integers wrap in the unsigned twin;
 * MIN and MAX give a NaN on either side back. */
template <typename D, int OP> __device__ __forceinline__ typename D::C
herd__k_combine(typename D::C x, typename D::C y)
{
	using C = typename D::C;
	using U = typename D::U;

	if constexpr (OP == HERD_SUM) {
		if constexpr (D::integral)
			return (C)((U)x + (U)y);
		else
			return x + y;
	} else if constexpr (OP == HERD_PROD) {
		if constexpr (D::integral)
			return (C)((U)x * (U)y);
		else
			return x * y;
	} else if constexpr (OP == HERD_MIN) {
		if constexpr (D::integral)
			return x < y ? x : y;
		else
			return (x != x || x < y) ? x : y;
	} else {
		if constexpr (D::integral)
			return x > y ? x : y;
		else
			return (x != x || x > y) ? x : y;
	}
}

/* AVG's division, as reduce.c's scale: integers of up to 32 bits through
 * double (exact truncation), the others in their own type.  Floating point
 * divides by a power of two as a product with its inverse, which is exact
 * and rounds the same real number, so the bits are the division's. */
template <typename D> __device__ __forceinline__ typename D::C herd__k_scale(typename D::C x, int n)
{
	using C = typename D::C;

	if constexpr (D::integral && sizeof(C) <= 4)
		return (C)((double)x / (double)n);
	else if constexpr (D::integral)
		return x / (C)n;
	else
		return (n & (n - 1)) == 0 ? x * ((C)1 / (C)n) : x / (C)n;
}

#endif /* HERD_KERNELS_CUDA_UTIL_H */
