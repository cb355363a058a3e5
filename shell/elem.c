/*
 * shell/elem.c - one element of a dense array of a herd_dtype, widened to
 * a Lua-sized integer or a double and narrowed back, for the commands and
 * bindings that show or set the values of typed memory (herd ckpt,
 * herd.buffer, herd.checkpoint).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "herd.h"
#include "shell.h"

/* The element types stored as themselves: X(dtype, C type). */
#define SHELL_PLAIN_DTYPES(X)                                      \
	X(HERD_INT8, int8_t) X(HERD_UINT8, uint8_t)                \
	X(HERD_INT32, int32_t) X(HERD_UINT32, uint32_t)            \
	X(HERD_INT64, int64_t) X(HERD_UINT64, uint64_t)            \
	X(HERD_FLOAT32, float) X(HERD_FLOAT64, double)

bool shell_dtype_is_int(herd_dtype dtype)
{
	return (unsigned)dtype < HERD_DTYPE_COUNT && !herd_dtype_is_float(dtype);
}

shell_elem shell_elem_load(const void *buf, size_t i, herd_dtype dtype)
{
	shell_elem e = { shell_dtype_is_int(dtype), 0, 0.0 };
	float x;

	switch (dtype) {
#define LOAD_(code, type)                                                          \
	case code: {                                                               \
		type v;                                                            \
		memcpy(&v, (const char *)buf + i * sizeof(type), sizeof(v));       \
		if (e.is_int)                                                      \
			e.i = (int64_t)v;                                          \
		else                                                               \
			e.f = (double)v;                                           \
		break;                                                             \
	}
	SHELL_PLAIN_DTYPES(LOAD_)
#undef LOAD_
	default:
		/* the narrow floating types; an unknown type is refused (0) */
		if (herd_dtype_to_float32((const char *)buf + i * herd_dtype_size(dtype), &x, 1,
					  dtype) == HERD_OK)
			e.f = x;
		break;
	}
	return e;
}

/* Whether an integer value fits the integer dtype (uint64 takes any value:
 * Lua's integers carry its upper half as negative numbers). */
static bool int_fits(herd_dtype dtype, int64_t v)
{
	switch (dtype) {
	case HERD_INT8: return v >= INT8_MIN && v <= INT8_MAX;
	case HERD_UINT8: return v >= 0 && v <= UINT8_MAX;
	case HERD_INT32: return v >= INT32_MIN && v <= INT32_MAX;
	case HERD_UINT32: return v >= 0 && v <= UINT32_MAX;
	default: return true;
	}
}

int shell_elem_store(void *buf, size_t i, herd_dtype dtype, shell_elem e)
{
	double f = e.is_int ? (double)e.i : e.f;
	float x;

	if (shell_dtype_is_int(dtype) && !e.is_int) {
		/* A float becomes an integer only when it is one, in range. */
		if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0) || f != floor(f))
			return -1;
		e.i = (int64_t)f;
	}
	if (shell_dtype_is_int(dtype) && !int_fits(dtype, e.i))
		return -1;
	switch (dtype) {
#define STORE_(code, type)                                                         \
	case code: {                                                               \
		type v = shell_dtype_is_int(dtype) ? (type)e.i : (type)f;                \
		memcpy((char *)buf + i * sizeof(type), &v, sizeof(v));             \
		break;                                                             \
	}
	SHELL_PLAIN_DTYPES(STORE_)
#undef STORE_
	default:
		/* the narrow floating types */
		x = (float)f;
		if (herd_dtype_from_float32(&x, (char *)buf + i * herd_dtype_size(dtype), 1,
					    dtype) != HERD_OK)
			return -1;
		break;
	}
	return 0;
}
