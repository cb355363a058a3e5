/*
 * sdk/comm/reduce.c - the reduction kernels on the CPU: dst = a OP b for
 * every element type and reduction, the AVG scaling, the conversions of
 * the narrow floating types (float16, bfloat16, the 8-bit floats) with
 * round-to-nearest-even, and a copy with streaming stores.
 *
 * Every kernel comes from one macro expansion over the type list and the
 * operation list (STYLE.md rule 10).  The loops are written for GCC's
 * auto-vectorizer: straight-line bodies, selects instead of branches, and
 * signed integer arithmetic done in the unsigned twin type (wrap-around,
 * never undefined behaviour).  The release build compiles with -O2, whose
 * cheap cost model vectorizes almost nothing, so this file asks for -O3
 * itself; the kernels are also cloned for AVX2 and picked at load time.
 *
 * Conventions, as NCCL and MPI have them where they say anything:
 *  - integer SUM and PROD wrap around; AVG truncates toward zero;
 *  - MIN and MAX propagate NaN (a NaN on either side gives a NaN), so the
 *    result does not depend on the order of the operands (but for which
 *    of two NaNs, or of +0 and -0, comes out);
 *  - the narrow floating types reduce through float32 and round once per
 *    call of herd__reduce (the collectives widen whole slices and round once
 *    per operation; see algo/allreduce.c).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "comm/comm_internal.h"

/* The AVX2 clones cost nothing where the CPU lacks AVX2 (the default clone
 * runs) and double the width of the loops where it has it.  Sanitizer
 * builds keep a single version, for readable reports. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__)
#define HERD_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define HERD_KERNEL
#endif

static inline float bits_to_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t float_to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/*
 * IEEE binary16 to binary32, exact.  Normal numbers only rebias the
 * exponent; Inf and NaN get the all-ones exponent, a NaN is quieted with
 * its payload kept (as the F16C instruction does, so that both paths give
 * the same bits); subnormals are renormalized by a float subtraction,
 * which is exact.  Branch-free, so that the loops around it vectorize.
 */
static inline float half_to_float1(uint16_t h)
{
	uint32_t em = (uint32_t)(h & 0x7fffu) << 13;
	uint32_t exp = em & 0x0f800000u;
	uint32_t infnan = 0u - (uint32_t)(exp == 0x0f800000u);
	uint32_t nan = infnan & (0u - (uint32_t)((h & 0x3ffu) != 0));
	uint32_t zero = 0u - (uint32_t)(exp == 0);
	uint32_t o = em + (112u << 23) + (infnan & (112u << 23));
	uint32_t sub = float_to_bits(bits_to_float(o + (1u << 23)) - bits_to_float(113u << 23));

	o = (o & ~zero) | (sub & zero) | (nan & 0x00400000u);
	return bits_to_float(o | (uint32_t)(h & 0x8000u) << 16);
}

/*
 * binary32 to binary16, rounding to nearest even.  Overflow (at and above
 * 65520) gives Inf; NaN stays NaN (quieted, upper payload bits kept);
 * results below the normal range are rounded by adding 0.5, whose ulp is
 * the half subnormal step (2^-24), so the FPU's own rounding does it.
 */
static inline uint16_t float_to_half1(float f)
{
	uint32_t u = float_to_bits(f);
	uint32_t sign = u & 0x80000000u;
	uint32_t a = u ^ sign;
	uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u);
	uint32_t big = 0u - (uint32_t)(a >= (143u << 23));
	uint32_t small = 0u - (uint32_t)(a < (113u << 23));
	uint32_t infnan = 0x7c00u | (is_nan & (0x200u | ((a >> 13) & 0x3ffu)));
	uint32_t sub = float_to_bits(bits_to_float(a) + 0.5f) - (126u << 23);
	uint32_t nrm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
	uint32_t o = (big & infnan) | (~big & ((small & sub) | (~small & nrm)));

	return (uint16_t)(o | sign >> 16);
}

static inline float bf16_to_float1(uint16_t h)
{
	return bits_to_float((uint32_t)h << 16);
}

/* binary32 to bfloat16, nearest even; overflow carries into Inf by itself. */
static inline uint16_t float_to_bf161(float f)
{
	uint32_t u = float_to_bits(f);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t nan = (u >> 16) | 0x40u;

	return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

/*
 * The 8-bit floats.  E4M3 (bias 7, 3 mantissa bits): no infinities, only
 * S.1111.111 is a NaN, largest finite 0x7E = 448.  E5M2 (bias 15, 2
 * mantissa bits): the all-ones exponent holds Inf and NaNs, largest finite
 * 0x7B = 57344.
 */
typedef struct fp8_format {
	int mbits;         /* mantissa bits */
	int bias;
	int emax;          /* exponent of the largest finite value */
	uint32_t maxnorm;  /* its code */
	bool ieee;         /* E5M2: the all-ones exponent is Inf and NaN */
} fp8_format;

static const fp8_format fp8_e4m3 = { 3, 7, 8, 0x7e, false };
static const fp8_format fp8_e5m2 = { 2, 15, 15, 0x7b, true };

/*
 * To float32, exactly, branch-free as half_to_float1 (so that the loops
 * vectorize): the exponent and mantissa shifted into place and rebiased; a
 * subnormal renormalized by a float subtraction, which is exact; the
 * all-ones exponent (E5M2) or code (E4M3) made Inf or a quiet NaN with its
 * payload kept.
 */
static inline float fp8_to_float1(uint8_t v, const fp8_format *f)
{
	uint32_t sh = 23u - (uint32_t)f->mbits, rebias = (uint32_t)(127 - f->bias) << 23;
	uint32_t em = (uint32_t)(v & 0x7fu) << sh;
	uint32_t m = v & ((1u << f->mbits) - 1u), e = (uint32_t)(v & 0x7fu) >> f->mbits;
	uint32_t eall = (uint32_t)(e == (0x7fu >> f->mbits));
	uint32_t special = 0u - (f->ieee ? eall : (uint32_t)((v & 0x7fu) == 0x7fu));
	uint32_t nan = special & (0u - (uint32_t)(m != 0 || !f->ieee));
	uint32_t zero = 0u - (uint32_t)(e == 0);
	uint32_t o = em + rebias;
	uint32_t sub = float_to_bits(bits_to_float(o + (1u << 23)) -
				     bits_to_float(rebias + (1u << 23)));
	uint32_t infnan = 0x7f800000u | (nan & (0x00400000u | m << sh));

	o = (o & ~zero) | (sub & zero);
	o = (o & ~special) | (infnan & special);
	return bits_to_float(o | (uint32_t)(v & 0x80u) << 24);
}

/*
 * From float32, rounding to nearest even, saturating (CUDA's
 * __NV_SATFINITE): beyond the largest finite value, infinity included, the
 * largest finite value of the sign; a NaN stays a NaN (E5M2: quieted, its
 * upper payload bits kept).  Zero keeps its sign.  Branch-free: a normal
 * result is rebiased and rounded on the dropped bits, a carry moving to the
 * next exponent by itself; one below the normal range is rounded by the
 * FPU, adding a power of two whose ulp is the smallest subnormal step.
 */
static inline uint8_t float_to_fp81(float x, const fp8_format *f)
{
	uint32_t u = float_to_bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
	uint32_t sh = 23u - (uint32_t)f->mbits, rebias = (uint32_t)(127 - f->bias) << 23;
	/* 2^(emin - mbits + 23): its ulp is the subnormal step 2^(emin - mbits) */
	uint32_t magic = (uint32_t)(127 + 1 - f->bias - f->mbits + 23) << 23;
	uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u);
	uint32_t big = 0u - (uint32_t)(a >= (uint32_t)(127 + f->emax + 1) << 23);
	uint32_t small = 0u - (uint32_t)(a < rebias + (1u << 23));
	uint32_t nrm = (a - rebias + (1u << (sh - 1)) - 1u + ((a >> sh) & 1u)) >> sh;
	uint32_t sub = float_to_bits(bits_to_float(a) + bits_to_float(magic)) - magic;
	uint32_t nancode = f->ieee ? 0x7eu | ((a >> sh) & 0x3u) : 0x7fu;
	uint32_t o = (small & sub) | (~small & nrm);

	o = o > f->maxnorm ? f->maxnorm : o;
	o = (big & f->maxnorm) | (~big & o);
	o = (is_nan & nancode) | (~is_nan & o);
	return (uint8_t)(sign | o);
}

/*
 * Buffers may come from a transport at any byte offset (whole elements, not
 * aligned ones) and hold bytes written as another type, so the kernels
 * access memory through these: alignment 1 and may_alias.  x86 loads and
 * stores do not care, and the vectorizer uses unaligned moves anyway.
 */
typedef float f32_u __attribute__((aligned(1), may_alias));
typedef uint16_t u16_u __attribute__((aligned(1), may_alias));
typedef uint8_t u8_u __attribute__((aligned(1), may_alias));

HERD_KERNEL static void cvt_half_to_float(f32_u *dst, const u16_u *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = half_to_float1(src[i]);
}

HERD_KERNEL static void cvt_float_to_half(u16_u *dst, const f32_u *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = float_to_half1(src[i]);
}

HERD_KERNEL static void cvt_bf16_to_float(f32_u *dst, const u16_u *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = bf16_to_float1(src[i]);
}

HERD_KERNEL static void cvt_float_to_bf16(u16_u *dst, const f32_u *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = float_to_bf161(src[i]);
}

/* One loop per format, so that its constants fold into the body. */
#define DEFINE_FP8_CVT(NAME)                                                                \
	HERD_KERNEL static void cvt_##NAME##_to_float(f32_u *dst, const u8_u *src, size_t n) \
	{                                                                                   \
		for (size_t i = 0; i < n; i++)                                              \
			dst[i] = fp8_to_float1(src[i], &fp8_##NAME);                        \
	}                                                                                   \
	HERD_KERNEL static void cvt_float_to_##NAME(u8_u *dst, const f32_u *src, size_t n)   \
	{                                                                                   \
		for (size_t i = 0; i < n; i++)                                              \
			dst[i] = float_to_fp81(src[i], &fp8_##NAME);                        \
	}
DEFINE_FP8_CVT(e4m3)
DEFINE_FP8_CVT(e5m2)

/*
 * Where the CPU has F16C (x86 since 2012), float16 converts in hardware,
 * 8 elements an instruction, several times faster than the bit
 * manipulation above; the rounding is given in the instruction (nearest
 * even), so MXCSR's mode does not matter, and NaNs come out as the
 * functions above make them.  The tails go through those functions.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define HERD_HAVE_F16C_PATH 1

__attribute__((target("avx,f16c"))) static void f16c_half_to_float(f32_u *dst,
								     const u16_u *src, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps((float *)(dst + i),
				 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
	for (; i < n; i++)
		dst[i] = half_to_float1(src[i]);
}

__attribute__((target("avx,f16c"))) static void f16c_float_to_half(u16_u *dst,
								     const f32_u *src, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps((const float *)(src + i)),
						 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		dst[i] = float_to_half1(src[i]);
}

/* CPUID says F16C and AVX, and the OS saves the YMM registers.  (Older
 * clang has no "f16c" for __builtin_cpu_supports.)  Asked once. */
static bool detect_f16c(void)
{
	unsigned int a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C) || !(c & bit_AVX) ||
	    !(c & bit_OSXSAVE))
		return false;
	__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 6u) == 6u;
}

static bool have_f16c(void)
{
	static _Atomic int known;   /* 0: not asked yet, 1: no, 2: yes */
	int k = atomic_load_explicit(&known, memory_order_relaxed);

	if (k == 0) {
		k = detect_f16c() ? 2 : 1;
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k == 2;
}
#endif

void herd__narrow_to_float(float *dst, const void *src, size_t count, herd_dtype dtype)
{
	switch (dtype) {
	case HERD_FLOAT16:
#ifdef HERD_HAVE_F16C_PATH
		if (count >= 8 && have_f16c()) {
			f16c_half_to_float((f32_u *)dst, (const u16_u *)src, count);
			return;
		}
#endif
		cvt_half_to_float((f32_u *)dst, (const u16_u *)src, count);
		break;
	case HERD_BFLOAT16:
		cvt_bf16_to_float((f32_u *)dst, (const u16_u *)src, count);
		break;
	case HERD_FLOAT8_E4M3:
		cvt_e4m3_to_float((f32_u *)dst, (const u8_u *)src, count);
		break;
	case HERD_FLOAT8_E5M2:
		cvt_e5m2_to_float((f32_u *)dst, (const u8_u *)src, count);
		break;
	default:
		break;
	}
}

void herd__float_to_narrow(void *dst, const float *src, size_t count, herd_dtype dtype)
{
	switch (dtype) {
	case HERD_FLOAT16:
#ifdef HERD_HAVE_F16C_PATH
		if (count >= 8 && have_f16c()) {
			f16c_float_to_half((u16_u *)dst, (const f32_u *)src, count);
			return;
		}
#endif
		cvt_float_to_half((u16_u *)dst, (const f32_u *)src, count);
		break;
	case HERD_BFLOAT16:
		cvt_float_to_bf16((u16_u *)dst, (const f32_u *)src, count);
		break;
	case HERD_FLOAT8_E4M3:
		cvt_float_to_e4m3((u8_u *)dst, (const f32_u *)src, count);
		break;
	case HERD_FLOAT8_E5M2:
		cvt_float_to_e5m2((u8_u *)dst, (const f32_u *)src, count);
		break;
	default:
		break;
	}
}

/*
 * The types with native arithmetic: X(DTYPE, C type, unsigned twin, kind,
 * scale).  Kind I computes in the unsigned twin so that overflow wraps;
 * kind F computes in the type.  Scale D divides in double, which truncates
 * exactly for integers of up to 32 bits (the quotient's rounding error,
 * below 2^-21/n, never crosses an integer) and vectorizes; scale N divides
 * in the type itself.
 */
#define HERD_NATIVE_TYPES(X)                                 \
	X(INT8, int8_t, uint8_t, I, D)                       \
	X(UINT8, uint8_t, uint8_t, I, D)                     \
	X(INT32, int32_t, uint32_t, I, D)                    \
	X(UINT32, uint32_t, uint32_t, I, D)                  \
	X(INT64, int64_t, uint64_t, I, N)                    \
	X(UINT64, uint64_t, uint64_t, I, N)                  \
	X(FLOAT32, float, float, F, N)                       \
	X(FLOAT64, double, double, F, N)

/* The types that reduce through float32. */
#define HERD_NARROW_TYPES(X) \
	X(FLOAT16)           \
	X(BFLOAT16)          \
	X(FLOAT8_E4M3)       \
	X(FLOAT8_E5M2)

/* The element-wise operations (AVG is SUM followed by a scale). */
#define HERD_REDOPS(X) \
	X(SUM)         \
	X(PROD)        \
	X(MIN)         \
	X(MAX)

#define RED_SUM_I(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define RED_PROD_I(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define RED_MIN_I(T, U, x, y) ((x) < (y) ? (x) : (y))
#define RED_MAX_I(T, U, x, y) ((x) > (y) ? (x) : (y))
#define RED_SUM_F(T, U, x, y) ((x) + (y))
#define RED_PROD_F(T, U, x, y) ((x) * (y))
#define RED_MIN_F(T, U, x, y) ((x) != (x) || (x) < (y) ? (x) : (y))
#define RED_MAX_F(T, U, x, y) ((x) != (x) || (x) > (y) ? (x) : (y))

#define SCALE_D(T, x, n) ((T)((double)(x) / (double)(n)))
#define SCALE_N(T, x, n) ((T)((x) / (T)(n)))

typedef void (*reduce_fn)(void *dst, const void *a, const void *b, size_t n);
typedef void (*scale_fn)(void *buf, size_t n, int div);

/* dst may equal a or b: GCC's runtime alias check lets exact aliasing take
 * the vector loop (it only rejects a distance of 1..VF-1 elements). */
#define DEFINE_REDUCE(DT, T, U, K, OP)                                              \
	HERD_KERNEL static void reduce_##DT##_##OP(void *dst_, const void *a_,     \
						   const void *b_, size_t n)       \
	{                                                                           \
		DT##_u *dst = dst_;                                                 \
		const DT##_u *a = a_, *b = b_;                                      \
		for (size_t i = 0; i < n; i++) {                                    \
			T x = a[i], y = b[i];                                       \
			dst[i] = RED_##OP##_##K(T, U, x, y);                        \
		}                                                                   \
	}

#define DEFINE_NATIVE(DT, T, U, K, S)                                         \
	typedef T DT##_u __attribute__((aligned(1), may_alias));               \
	DEFINE_REDUCE(DT, T, U, K, SUM)                                        \
	DEFINE_REDUCE(DT, T, U, K, PROD)                                       \
	DEFINE_REDUCE(DT, T, U, K, MIN)                                        \
	DEFINE_REDUCE(DT, T, U, K, MAX)                                        \
	HERD_KERNEL static void scale_##DT(void *buf_, size_t n, int div)      \
	{                                                                      \
		DT##_u *buf = buf_;                                            \
		for (size_t i = 0; i < n; i++)                                 \
			buf[i] = SCALE_##S(T, buf[i], div);                    \
	}
HERD_NATIVE_TYPES(DEFINE_NATIVE)

/* The narrow types: blocks small enough to stay in L1 are widened to
 * float32, combined by the float32 kernel and rounded back.  MIN and MAX
 * give back one of the operands exactly (widening is exact and so is
 * narrowing a value that came from the narrow type). */
#define NARROW_BLOCK 512

static void reduce_narrow(void *dst_, const void *a_, const void *b_, size_t n,
			  herd_dtype dtype, reduce_fn f32)
{
	unsigned char *dst = dst_;
	const unsigned char *a = a_, *b = b_;
	size_t es = herd_dtype_size(dtype);
	float fa[NARROW_BLOCK], fb[NARROW_BLOCK];

	for (size_t i = 0; i < n; i += NARROW_BLOCK) {
		size_t m = n - i < NARROW_BLOCK ? n - i : NARROW_BLOCK;

		herd__narrow_to_float(fa, a + i * es, m, dtype);
		herd__narrow_to_float(fb, b + i * es, m, dtype);
		f32(fa, fa, fb, m);
		herd__float_to_narrow(dst + i * es, fa, m, dtype);
	}
}

static void scale_narrow(void *buf_, size_t n, int div, herd_dtype dtype)
{
	unsigned char *buf = buf_;
	size_t es = herd_dtype_size(dtype);
	float f[NARROW_BLOCK];

	for (size_t i = 0; i < n; i += NARROW_BLOCK) {
		size_t m = n - i < NARROW_BLOCK ? n - i : NARROW_BLOCK;

		herd__narrow_to_float(f, buf + i * es, m, dtype);
		scale_FLOAT32(f, m, div);
		herd__float_to_narrow(buf + i * es, f, m, dtype);
	}
}

#define DEFINE_NARROW_OP(DT, OP)                                                     \
	static void reduce_##DT##_##OP(void *dst, const void *a, const void *b, size_t n) \
	{                                                                            \
		reduce_narrow(dst, a, b, n, HERD_##DT, reduce_FLOAT32_##OP);         \
	}
#define DEFINE_NARROW(DT)                                        \
	DEFINE_NARROW_OP(DT, SUM)                                \
	DEFINE_NARROW_OP(DT, PROD)                               \
	DEFINE_NARROW_OP(DT, MIN)                                \
	DEFINE_NARROW_OP(DT, MAX)                                \
	static void scale_##DT(void *buf, size_t n, int div)     \
	{                                                        \
		scale_narrow(buf, n, div, HERD_##DT);            \
	}
HERD_NARROW_TYPES(DEFINE_NARROW)

#define ROW_NATIVE(DT, T, U, K, S) ROW(DT)
#define ROW_NARROW(DT) ROW(DT)
#define ROW(DT)                                                                  \
	[HERD_##DT] = { [HERD_SUM] = reduce_##DT##_SUM, [HERD_PROD] = reduce_##DT##_PROD, \
			[HERD_MIN] = reduce_##DT##_MIN, [HERD_MAX] = reduce_##DT##_MAX },

static const reduce_fn reducers[HERD_DTYPE_COUNT][HERD_REDOP_COUNT] = {
	HERD_NATIVE_TYPES(ROW_NATIVE) HERD_NARROW_TYPES(ROW_NARROW)
};

#define SCALER_NATIVE(DT, T, U, K, S) [HERD_##DT] = scale_##DT,
#define SCALER_NARROW(DT) [HERD_##DT] = scale_##DT,

static const scale_fn scalers[HERD_DTYPE_COUNT] = {
	HERD_NATIVE_TYPES(SCALER_NATIVE) HERD_NARROW_TYPES(SCALER_NARROW)
};

void herd__reduce(void *dst, const void *a, const void *b, size_t count, herd_dtype dtype,
		  herd_redop op)
{
	reduce_fn fn;

	if ((unsigned)dtype >= HERD_DTYPE_COUNT || (unsigned)op >= HERD_REDOP_COUNT)
		return;
	fn = reducers[dtype][op];
	if (fn != NULL && count > 0)
		fn(dst, a, b, count);
}

void herd__reduce_scale(void *buf, size_t count, herd_dtype dtype, int n)
{
	if ((unsigned)dtype >= HERD_DTYPE_COUNT || n <= 1 || count == 0)
		return;
	scalers[dtype](buf, count, n);
}

/*
 * A copy whose destination goes to memory without passing through the
 * cache: 16-byte streaming stores (SSE2, in every x86-64 CPU) from the
 * first 16-byte boundary, plain copies for the ends.  A plain store into a
 * line that is not cached reads the line first (read for ownership) and
 * then pushes whatever it evicts; a streaming store does neither.  The
 * stores are weakly ordered: herd__stream_fence before anything another
 * thread or process may use to learn that they are done.
 */
#if defined(__x86_64__)
void herd__copy_stream(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;

	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i x0 = _mm_loadu_si128((const __m128i *)s);
		__m128i x1 = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i x2 = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i x3 = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, x0);
		_mm_stream_si128((__m128i *)(d + 16), x1);
		_mm_stream_si128((__m128i *)(d + 32), x2);
		_mm_stream_si128((__m128i *)(d + 48), x3);
	}
	memcpy(d, s, n);
}

void herd__stream_fence(void)
{
	_mm_sfence();
}
#else
void herd__copy_stream(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

void herd__stream_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}
#endif
