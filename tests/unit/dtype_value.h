/*
 * tests/unit/dtype_value.h - element i of a buffer of any herd_dtype as a
 * double, for the collective tests' failure messages and checks.
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
	case HERD_FLOAT16: case HERD_BFLOAT16: {
		float f;
		herd__half_to_float(&f, (const uint16_t *)buf + i, 1, dt);
		return f;
	}
	default: return 0;
	}
}

#endif /* HERD_TEST_DTYPE_VALUE_H */
