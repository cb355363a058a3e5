/*
 * tests/unit/dtype_value.h - element i of a buffer of any herd_dtype as a
 * double, and a double stored into one, for the collective tests' inputs,
 * failure messages and checks.
 */
#ifndef HERD_TEST_DTYPE_VALUE_H
#define HERD_TEST_DTYPE_VALUE_H

#include <stdint.h>

#include "comm/comm_internal.h"

static inline double dtype_value(const void *buf, size_t i, herd_dtype dt)
{
	switch (dt) {
	case HERD_INT8: return ((const int8_t *)buf)[i];
	case HERD_UINT8: return ((const uint8_t *)buf)[i];
	case HERD_INT32: return ((const int32_t *)buf)[i];
	case HERD_UINT32: return ((const uint32_t *)buf)[i];
	case HERD_INT64: return (double)((const int64_t *)buf)[i];
	case HERD_UINT64: return (double)((const uint64_t *)buf)[i];
	case HERD_FLOAT32: return ((const float *)buf)[i];
	case HERD_FLOAT64: return ((const double *)buf)[i];
	default: {
		float f = 0;
		if (herd__dtype_narrow(dt))
			herd__narrow_to_float(&f, (const char *)buf + i * herd_dtype_size(dt), 1, dt);
		return f;
	}
	}
}

/* Stores v as element i: integers truncated, floating types rounded to
 * nearest even (through float32 for the narrow ones, exact for the few-bit
 * values the tests use before the narrow type's own rounding). */
static inline void dtype_put(void *buf, size_t i, herd_dtype dt, double v)
{
	switch (dt) {
	case HERD_INT8: ((int8_t *)buf)[i] = (int8_t)(int64_t)v; break;
	case HERD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v; break;
	case HERD_INT32: ((int32_t *)buf)[i] = (int32_t)(int64_t)v; break;
	case HERD_UINT32: ((uint32_t *)buf)[i] = (uint32_t)(int64_t)v; break;
	case HERD_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case HERD_UINT64: ((uint64_t *)buf)[i] = (uint64_t)(int64_t)v; break;
	case HERD_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case HERD_FLOAT64: ((double *)buf)[i] = v; break;
	default:
		if (herd__dtype_narrow(dt)) {
			float f = (float)v;
			herd__float_to_narrow((char *)buf + i * herd_dtype_size(dt), &f, 1, dt);
		}
		break;
	}
}

#endif /* HERD_TEST_DTYPE_VALUE_H */
