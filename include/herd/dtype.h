/*
 * herd/dtype.h - element types: what collectives (herd/comm.h) move and
 * reduce and what checkpoints (herd/ckpt.h) store.  Values are stable once
 * released.
 */
#ifndef HERD_DTYPE_H
#define HERD_DTYPE_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Element types.  The narrow floating types (float16, bfloat16 and the two
 * 8-bit floats of Hopper) reduce through float32 and are rounded to
 * nearest even once, at the end.  float8_e4m3 is the OCP E4M3 format that
 * CUDA's __nv_fp8_e4m3, NCCL's ncclFloat8e4m3 and PyTorch's float8_e4m3fn
 * carry: no infinities, a NaN at S.1111.111, largest finite 448;
 * float8_e5m2 (__nv_fp8_e5m2, ncclFloat8e5m2, float8_e5m2) has infinities
 * and NaNs as IEEE types do, largest finite 57344.  Rounding into an 8-bit
 * float saturates as CUDA's conversions to them do (__NV_SATFINITE): a
 * value beyond the largest finite one, infinity included, becomes the
 * largest finite one of its sign; a NaN stays a NaN.
 */
typedef enum herd_dtype {
	HERD_INT8 = 0,
	HERD_UINT8 = 1,
	HERD_INT32 = 2,
	HERD_UINT32 = 3,
	HERD_INT64 = 4,
	HERD_UINT64 = 5,
	HERD_FLOAT16 = 6,
	HERD_BFLOAT16 = 7,
	HERD_FLOAT32 = 8,
	HERD_FLOAT64 = 9,
	HERD_FLOAT8_E4M3 = 10,
	HERD_FLOAT8_E5M2 = 11,
	HERD_DTYPE_COUNT
} herd_dtype;

/* Size of one element in bytes; 0 for an unknown type. */
HERD_EXTERN size_t herd_dtype_size(herd_dtype dtype);

/* Whether dtype is a floating type (true) or an integer one (false); false
 * for an unknown type. */
HERD_EXTERN bool herd_dtype_is_float(herd_dtype dtype);

/* "float32", "bfloat16", ...; "unknown" for an unknown type. */
HERD_EXTERN const char *herd_dtype_name(herd_dtype dtype);

/* Parses a type name ("float32"; also "float", "half", "bf16", "int", "double",
 * "fp8_e4m3", "float8_e4m3fn"...). */
HERD_EXTERN herd_status herd_dtype_parse(const char *name, herd_dtype *out);

/*
 * A narrow floating type (float16, bfloat16, float8_e4m3, float8_e5m2) to
 * float32, count elements from src to dst, exactly; and float32 to one of
 * them, rounding to nearest even (into float16 and bfloat16 overflow gives
 * infinity; into the 8-bit floats it saturates, as above; a NaN stays a
 * NaN, quieted).  The conversions herd's reductions of these types use.
 * HERD_EINVAL for another dtype or a NULL buffer with count > 0.
 */
HERD_EXTERN herd_status herd_dtype_to_float32(const void *src, float *dst, size_t count,
					      herd_dtype dtype);
HERD_EXTERN herd_status herd_dtype_from_float32(const float *src, void *dst, size_t count,
						herd_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* HERD_DTYPE_H */
