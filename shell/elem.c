/*
 * shell/elem.c - one element of a dense array of a herd_dtype, widened to
 * a Lua-sized integer or a double and narrowed back, for the commands and
 * bindings that show or set the values of typed memory (herd ckpt,
 * herd.buffer, herd.checkpoint).
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Significant bits of a floating dtype's values (the implicit one not counted). */
static int mantissa_bits(herd_dtype dtype)
{
	switch (dtype) {
	case HERD_FLOAT16: return 10;
	case HERD_BFLOAT16: return 7;
	case HERD_FLOAT32: return 23;
	case HERD_FLOAT8_E4M3: return 3;
	case HERD_FLOAT8_E5M2: return 2;
	default: return 52;
	}
}

/*
 * Whether the decimal text reads back as f once stored in dtype: the same
 * bits, and, from 1 up, no further from f than half a step of the dtype's
 * precision, as rounding to nearest asks (an 8-bit float saturates, so
 * that 500 would otherwise read back as 448).
 */
static bool reads_back(const char *text, double f, herd_dtype dtype)
{
	unsigned char want[8], got[8];
	shell_elem e = { 0, 0, f }, t = { 0, 0, strtod(text, NULL) };

	if (fabs(t.f - f) > ldexp(fmax(fabs(f), 1.0), -(mantissa_bits(dtype) + 1)))
		return false;
	if (shell_elem_store(want, 0, dtype, e) != 0 || shell_elem_store(got, 0, dtype, t) != 0)
		return false;
	return memcmp(want, got, herd_dtype_size(dtype)) == 0;
}

void shell_elem_format(char *out, size_t size, herd_dtype dtype, shell_elem e)
{
	char sci[32], digits[20];
	int p, exp, n;

	if (e.is_int) {
		if (dtype == HERD_UINT64)
			snprintf(out, size, "%" PRIu64, (uint64_t)e.i);
		else
			snprintf(out, size, "%" PRId64, e.i);
		return;
	}
	if (isnan(e.f) || isinf(e.f)) {
		snprintf(out, size, "%s", isnan(e.f) ? "nan" : e.f < 0 ? "-inf" : "inf");
		return;
	}
	/* the fewest significant digits that read back (17 always do) */
	for (p = 1; p < 17; p++) {
		snprintf(sci, sizeof(sci), "%.*e", p - 1, e.f);
		if (reads_back(sci, e.f, dtype))
			break;
	}
	snprintf(sci, sizeof(sci), "%.*e", p - 1, e.f);
	exp = atoi(strchr(sci, 'e') + 1);
	if (exp < -4 || exp >= 16) {
		snprintf(out, size, "%.*g", p, e.f);
		return;
	}
	/* positional notation: the digits, a point where the exponent puts it,
	 * zeros where it falls outside them */
	const char *sign = signbit(e.f) ? "-" : "";
	char zeros[20];

	n = 0;
	for (const char *c = sci; *c != 'e'; c++)
		if (*c >= '0' && *c <= '9')
			digits[n++] = *c;
	digits[n] = '\0';
	memset(zeros, '0', sizeof(zeros));
	if (exp >= n - 1)
		snprintf(out, size, "%s%s%.*s", sign, digits, exp - n + 1, zeros);
	else if (exp >= 0)
		snprintf(out, size, "%s%.*s.%s", sign, exp + 1, digits, digits + exp + 1);
	else
		snprintf(out, size, "%s0.%.*s%s", sign, -exp - 1, zeros, digits);
}
