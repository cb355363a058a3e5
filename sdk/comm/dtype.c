/*
 * sdk/comm/dtype.c - names and sizes of element types and reductions.
 *
 * One table per enum, so that a new type is one line: its size, its
 * canonical name and the aliases other tools use for it (nccl-tests, NCCL,
 * PyTorch, C).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "comm/comm_internal.h"

#define HERD_DTYPE_ALIASES_MAX 5

static const struct {
	size_t size;
	const char *name;
	const char *aliases[HERD_DTYPE_ALIASES_MAX];
} dtypes[HERD_DTYPE_COUNT] = {
	[HERD_INT8] = { 1, "int8", { "char", "i8", "schar" } },
	[HERD_UINT8] = { 1, "uint8", { "u8", "uchar", "byte" } },
	[HERD_INT32] = { 4, "int32", { "int", "i32" } },
	[HERD_UINT32] = { 4, "uint32", { "uint", "u32" } },
	[HERD_INT64] = { 8, "int64", { "i64", "long" } },
	[HERD_UINT64] = { 8, "uint64", { "u64", "ulong" } },
	[HERD_FLOAT16] = { 2, "float16", { "half", "fp16", "f16" } },
	[HERD_BFLOAT16] = { 2, "bfloat16", { "bf16" } },
	[HERD_FLOAT32] = { 4, "float32", { "float", "fp32", "f32" } },
	[HERD_FLOAT64] = { 8, "float64", { "double", "fp64", "f64" } },
	[HERD_FLOAT8_E4M3] = { 1, "float8_e4m3", { "float8_e4m3fn", "fp8_e4m3", "f8e4m3", "e4m3" } },
	[HERD_FLOAT8_E5M2] = { 1, "float8_e5m2", { "fp8_e5m2", "f8e5m2", "e5m2" } },
};

static const char *const redops[HERD_REDOP_COUNT] = {
	[HERD_SUM] = "sum", [HERD_PROD] = "prod", [HERD_MIN] = "min",
	[HERD_MAX] = "max", [HERD_AVG] = "avg",
};

size_t herd_dtype_size(herd_dtype dtype)
{
	if ((unsigned)dtype >= HERD_DTYPE_COUNT)
		return 0;
	return dtypes[dtype].size;
}

bool herd_dtype_is_float(herd_dtype dtype)
{
	return dtype == HERD_FLOAT32 || dtype == HERD_FLOAT64 || herd__dtype_narrow(dtype);
}

const char *herd_dtype_name(herd_dtype dtype)
{
	if ((unsigned)dtype >= HERD_DTYPE_COUNT)
		return "unknown";
	return dtypes[dtype].name;
}

herd_status herd_dtype_parse(const char *name, herd_dtype *out)
{
	char expected[256];
	size_t len = 0;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_dtype_parse: out is NULL");
	if (name == NULL)
		return herd__error(HERD_EINVAL, "herd_dtype_parse: name is NULL");
	for (int t = 0; t < HERD_DTYPE_COUNT; t++) {
		if (strcasecmp(name, dtypes[t].name) == 0) {
			*out = (herd_dtype)t;
			return HERD_OK;
		}
		for (int a = 0; a < HERD_DTYPE_ALIASES_MAX && dtypes[t].aliases[a]; a++) {
			if (strcasecmp(name, dtypes[t].aliases[a]) == 0) {
				*out = (herd_dtype)t;
				return HERD_OK;
			}
		}
	}
	expected[0] = '\0';
	for (int t = 0; t < HERD_DTYPE_COUNT && len < sizeof(expected); t++) {
		int n = snprintf(expected + len, sizeof(expected) - len, "%s%s", t ? ", " : "",
				 dtypes[t].name);
		if (n < 0)
			break;
		len += (size_t)n;
	}
	return herd__error(HERD_EINVAL, "unknown datatype \"%s\": expected one of %s", name,
			   expected);
}

const char *herd_redop_name(herd_redop op)
{
	if ((unsigned)op >= HERD_REDOP_COUNT)
		return "unknown";
	return redops[op];
}

herd_status herd_redop_parse(const char *name, herd_redop *out)
{
	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_redop_parse: out is NULL");
	if (name == NULL)
		return herd__error(HERD_EINVAL, "herd_redop_parse: name is NULL");
	for (int o = 0; o < HERD_REDOP_COUNT; o++) {
		if (strcasecmp(name, redops[o]) == 0) {
			*out = (herd_redop)o;
			return HERD_OK;
		}
	}
	return herd__error(HERD_EINVAL,
			   "unknown reduction \"%s\": expected one of sum, prod, min, max, avg",
			   name);
}

static herd_status check_narrow(const char *fn, const void *src, const void *dst, size_t count,
				herd_dtype dtype)
{
	if (!herd__dtype_narrow(dtype))
		return herd__error(HERD_EINVAL, "%s: dtype %s is not float16, bfloat16, "
				   "float8_e4m3 or float8_e5m2", fn, herd_dtype_name(dtype));
	if (count > 0 && (src == NULL || dst == NULL))
		return herd__error(HERD_EINVAL, "%s: %s is NULL", fn, src == NULL ? "src" : "dst");
	return HERD_OK;
}

herd_status herd_dtype_to_float32(const void *src, float *dst, size_t count, herd_dtype dtype)
{
	HERD_CHECK(check_narrow(__func__, src, dst, count, dtype));
	if (count > 0)
		herd__narrow_to_float(dst, src, count, dtype);
	return HERD_OK;
}

herd_status herd_dtype_from_float32(const float *src, void *dst, size_t count, herd_dtype dtype)
{
	HERD_CHECK(check_narrow(__func__, src, dst, count, dtype));
	if (count > 0)
		herd__float_to_narrow(dst, src, count, dtype);
	return HERD_OK;
}
