/*
 * shell/bench_data.c - values, expected results and sizes of `herd bench`
 * (see bench_data.h for the value patterns and why they are exact).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bench_data.h"

bench_pattern bench_pattern_for(int reduces, herd_redop op)
{
	if (!reduces)
		return BENCH_COPY;
	switch (op) {
	case HERD_SUM:
	case HERD_AVG:
		return BENCH_REDUCE_SUM;
	case HERD_PROD:
		return BENCH_REDUCE_PROD;
	default:
		return BENCH_REDUCE_MINMAX;
	}
}

static unsigned value(bench_pattern pat, int rank, size_t index)
{
	size_t r = (size_t)rank;
	switch (pat) {
	case BENCH_REDUCE_SUM:
		return 1u + (unsigned)((index + 3 * r) % 5);
	case BENCH_REDUCE_PROD:
		return 1u + (unsigned)((index + r) % 2);
	default:
		return 1u + (unsigned)((index + 13 * r) % 97);
	}
}

/* ------------------------------------------------------------ elements */


static int is_signed_int(herd_dtype dtype)
{
	return dtype == HERD_INT8 || dtype == HERD_INT32 || dtype == HERD_INT64;
}

/* Integer types: the low bits of v, two's complement (a wrap, as C's). */
static void store_int(void *buf, size_t i, herd_dtype dtype, uint64_t v)
{
	switch (dtype) {
	case HERD_INT8:
	case HERD_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case HERD_INT32:
	case HERD_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	default:
		((uint64_t *)buf)[i] = v;
		break;
	}
}

/* An integer element, sign-extended for signed types. */
static int64_t load_int_signed(const void *buf, herd_dtype dtype)
{
	switch (dtype) {
	case HERD_INT8:
		return *(const int8_t *)buf;
	case HERD_INT32:
		return *(const int32_t *)buf;
	default:
		return *(const int64_t *)buf;
	}
}

static uint64_t load_int_unsigned(const void *buf, herd_dtype dtype)
{
	switch (dtype) {
	case HERD_UINT8:
		return *(const uint8_t *)buf;
	case HERD_UINT32:
		return *(const uint32_t *)buf;
	default:
		return *(const uint64_t *)buf;
	}
}

void bench_store(void *buf, size_t i, herd_dtype dtype, double v)
{
	float f = (float)v;

	switch (dtype) {
	case HERD_FLOAT16:
	case HERD_BFLOAT16:
	case HERD_FLOAT8_E4M3:
	case HERD_FLOAT8_E5M2:
		herd_dtype_from_float32(&f, (char *)buf + i * herd_dtype_size(dtype), 1, dtype);
		break;
	case HERD_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	case HERD_FLOAT64:
		((double *)buf)[i] = v;
		break;
	default:
		store_int(buf, i, dtype, (uint64_t)(int64_t)v);
		break;
	}
}

/* The values repeat along the index with this period. */
static size_t period(bench_pattern pat)
{
	return pat == BENCH_REDUCE_SUM ? 5 : pat == BENCH_REDUCE_PROD ? 2 : 97;
}

#define BENCH_PERIOD_MAX 97

/* Repeats one period of elements, table[k] for index0 + k, along buf: the
 * first period, then doubling copies of what is written (a multiple of the
 * period until the last). */
static void repeat(void *buf, size_t count, size_t es, const unsigned char *table, size_t per)
{
	unsigned char *p = buf;
	size_t done = count < per ? count : per;
	memcpy(p, table, done * es);
	while (done < count) {
		size_t n = count - done < done ? count - done : done;
		memcpy(p + done * es, p, n * es);
		done += n;
	}
}

/* Counts the elements of buf that differ from the repeated table, a whole
 * period at a time while they match. */
static size_t compare(const void *buf, size_t count, size_t es, const unsigned char *table,
		      size_t per)
{
	const unsigned char *p = buf;
	size_t wrong = 0;
	for (size_t i = 0; i < count; i += per) {
		size_t n = count - i < per ? count - i : per;
		if (memcmp(p + i * es, table, n * es) == 0)
			continue;
		for (size_t k = 0; k < n; k++)
			if (memcmp(p + (i + k) * es, table + k * es, es) != 0)
				wrong++;
	}
	return wrong;
}

void bench_fill(void *buf, size_t count, herd_dtype dtype, bench_pattern pat, int rank,
		size_t index0)
{
	size_t es = herd_dtype_size(dtype);
	unsigned char table[BENCH_PERIOD_MAX * 8];
	size_t per = period(pat);
	for (size_t k = 0; k < per; k++)
		bench_store(table, k, dtype, value(pat, rank, index0 + k));
	repeat(buf, count, es, table, per);
}

void bench_clear(void *buf, size_t count, herd_dtype dtype)
{
	memset(buf, 0, count * herd_dtype_size(dtype));
}

size_t bench_check_copy(const void *buf, size_t count, herd_dtype dtype, bench_pattern pat,
			int src, size_t index0)
{
	size_t es = herd_dtype_size(dtype);
	unsigned char table[BENCH_PERIOD_MAX * 8];
	size_t per = period(pat);
	for (size_t k = 0; k < per; k++)
		bench_store(table, k, dtype, value(pat, src, index0 + k));
	return compare(buf, count, es, table, per);
}

/*
 * The exact result of op over nranks at one index, written to out.
 * Integers reduce modulo 2^64 and wrap to their width, as C arithmetic in
 * the type does; floats reduce in double, exact for these values, and are
 * rounded once to the type.
 */
static void expected(void *out, herd_dtype dtype, herd_redop op, int nranks, size_t index)
{
	bench_pattern pat = bench_pattern_for(1, op);
	if (herd_dtype_is_float(dtype)) {
		double acc = value(pat, 0, index);
		for (int r = 1; r < nranks; r++) {
			double v = value(pat, r, index);
			switch (op) {
			case HERD_PROD: acc *= v; break;
			case HERD_MIN: acc = v < acc ? v : acc; break;
			case HERD_MAX: acc = v > acc ? v : acc; break;
			default: acc += v; break;
			}
		}
		if (op == HERD_AVG)
			acc /= nranks;
		bench_store(out, 0, dtype, acc);
		return;
	}
	uint64_t acc = value(pat, 0, index);
	for (int r = 1; r < nranks; r++) {
		uint64_t v = value(pat, r, index);
		switch (op) {
		case HERD_PROD: acc *= v; break;
		/* The values are small and positive: signedness cannot matter. */
		case HERD_MIN: acc = v < acc ? v : acc; break;
		case HERD_MAX: acc = v > acc ? v : acc; break;
		default: acc += v; break;
		}
	}
	store_int(out, 0, dtype, acc);
	if (op == HERD_AVG) {
		/* The sum wraps in the type first, then divides toward zero. */
		if (is_signed_int(dtype))
			store_int(out, 0, dtype,
				  (uint64_t)(load_int_signed(out, dtype) / nranks));
		else
			store_int(out, 0, dtype,
				  load_int_unsigned(out, dtype) / (uint64_t)nranks);
	}
}

size_t bench_check_reduce(const void *buf, size_t count, herd_dtype dtype, herd_redop op,
			  int nranks, size_t index0)
{
	size_t es = herd_dtype_size(dtype);
	unsigned char table[BENCH_PERIOD_MAX * 8];
	size_t per = period(bench_pattern_for(1, op));
	for (size_t k = 0; k < per; k++)
		expected(table + k * es, dtype, op, nranks, index0 + k);
	return compare(buf, count, es, table, per);
}

int bench_parse_size(const char *s, size_t *out)
{
	uint64_t v;

	if (herd_size_parse(s, &v) != HERD_OK || v > SIZE_MAX)
		return -1;
	*out = (size_t)v;
	return 0;
}
