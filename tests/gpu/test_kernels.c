/*
 * kernels/ on a GPU: every reduction of every type against the host's
 * (sdk/comm/reduce.c) bit for bit, the casts against the host's
 * conversions, the benchmark's fill and verify against the reduction, and
 * the arguments refused.  Without a GPU it checks that a launch says
 * HERD_ENODEV with CUDA's own words, then exits with ctest's skip code.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "comm/comm_internal.h"
#include "kernels.h"

#define COUNT 100003    /* odd: the element-wise tail runs too */

static const herd_redop ops[] = { HERD_SUM, HERD_PROD, HERD_MIN, HERD_MAX, HERD_AVG };

static bool is_narrow(herd_dtype t)
{
	return t == HERD_FLOAT16 || t == HERD_BFLOAT16 || t == HERD_FLOAT8_E4M3 ||
	       t == HERD_FLOAT8_E5M2;
}

static bool is_float(herd_dtype t)
{
	return is_narrow(t) || t == HERD_FLOAT32 || t == HERD_FLOAT64;
}

/* Random values of type t: any bits for integers; for floating point
 * values in [-8, 8) with a NaN, infinities and a negative zero among them. */
static void random_fill(void *buf, size_t n, herd_dtype t, uint64_t seed)
{
	float *f;

	if (!is_float(t)) {
		test_fill_bytes(buf, n * herd_dtype_size(t), seed);
		return;
	}
	f = malloc(n * sizeof(*f));
	CHECK(f != NULL);
	if (f == NULL)
		return;
	srand((unsigned)seed);
	for (size_t i = 0; i < n; i++)
		f[i] = (float)(rand() % 4096) / 256.0f - 8.0f;
	f[7] = NAN;
	f[11] = INFINITY;
	f[13] = -INFINITY;
	f[17] = -0.0f;
	if (is_narrow(t))
		herd__float_to_narrow(buf, f, n, t);
	else if (t == HERD_FLOAT32)
		memcpy(buf, f, n * sizeof(*f));
	else
		for (size_t i = 0; i < n; i++)
			((double *)buf)[i] = (double)f[i] + (double)(i % 3) / 1024.0;
	free(f);
}

/* What the host makes of the same reduction: pairwise in the type, then
 * the AVG scale; float16 and bfloat16 widened, reduced in float32 and
 * rounded once. */
static void host_reduce(void *dst, void *const *src, int nsrc, size_t n, herd_dtype t,
			herd_redop op)
{
	herd_redop pair = op == HERD_AVG ? HERD_SUM : op;

	if (is_narrow(t)) {
		float *acc = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));

		herd__narrow_to_float(acc, src[0], n, t);
		for (int k = 1; k < nsrc; k++) {
			herd__narrow_to_float(x, src[k], n, t);
			herd__reduce(acc, acc, x, n, HERD_FLOAT32, pair);
		}
		if (op == HERD_AVG)
			herd__reduce_scale(acc, n, HERD_FLOAT32, nsrc);
		herd__float_to_narrow(dst, acc, n, t);
		free(acc);
		free(x);
		return;
	}
	memcpy(dst, src[0], n * herd_dtype_size(t));
	for (int k = 1; k < nsrc; k++)
		herd__reduce(dst, dst, src[k], n, t, pair);
	if (op == HERD_AVG)
		herd__reduce_scale(dst, n, t, nsrc);
}

static bool element_isnan(const void *buf, size_t i, herd_dtype t)
{
	const uint16_t *h = buf;

	const uint8_t *b = buf;

	switch (t) {
	case HERD_FLOAT8_E4M3:   /* S.1111.111 only */
		return (b[i] & 0x7f) == 0x7f;
	case HERD_FLOAT8_E5M2:   /* S.11111.xx, xx not 0 */
		return (b[i] & 0x7c) == 0x7c && (b[i] & 0x03) != 0;
	case HERD_FLOAT16:
		return (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff) != 0;
	case HERD_BFLOAT16:
		return (h[i] & 0x7f80) == 0x7f80 && (h[i] & 0x7f) != 0;
	case HERD_FLOAT32:
		return isnan(((const float *)buf)[i]);
	case HERD_FLOAT64:
		return isnan(((const double *)buf)[i]);
	default:
		return false;
	}
}

/* Elements that differ, a NaN matching any NaN (the device and the host
 * may give different NaN bits). */
static size_t differences(const void *a, const void *b, size_t n, herd_dtype t, size_t *first)
{
	size_t sz = herd_dtype_size(t), bad = 0;

	for (size_t i = 0; i < n; i++) {
		bool nan_a = element_isnan(a, i, t), nan_b = element_isnan(b, i, t);

		if (nan_a && nan_b)
			continue;
		if (nan_a != nan_b || memcmp((const char *)a + i * sz, (const char *)b + i * sz,
					     sz) != 0) {
			if (bad++ == 0)
				*first = i;
		}
	}
	return bad;
}

/* One reduction on the device against the host; `skew` elements into
 * every buffer, so that 0 takes the 16-byte path and 1 the narrow one. */
static void check_reduce(herd_dtype t, herd_redop op, int nsrc, size_t skew)
{
	size_t sz = herd_dtype_size(t), n = COUNT, bytes = (n + skew) * sz, first = 0, bad;
	void *host[4], *dev[4], *want = malloc(bytes), *got = malloc(bytes);
	const void *srcs[4];
	void *out;

	CHECK(cudaMalloc(&out, bytes) == cudaSuccess);
	for (int k = 0; k < nsrc; k++) {
		host[k] = malloc(bytes);
		CHECK(cudaMalloc(&dev[k], bytes) == cudaSuccess);
		random_fill((char *)host[k] + skew * sz, n, t, 1000u * (unsigned)t + 10u * k + 1);
		CHECK(cudaMemcpy(dev[k], host[k], bytes, cudaMemcpyHostToDevice) == cudaSuccess);
		srcs[k] = (char *)dev[k] + skew * sz;
		host[k] = (char *)host[k] + skew * sz;
	}
	host_reduce(want, host, nsrc, n, t, op);
	CHECK_OK(herd__k_reduce((char *)out + skew * sz, srcs, nsrc, n, t, op, NULL));
	CHECK(cudaMemcpy(got, (char *)out + skew * sz, n * sz, cudaMemcpyDeviceToHost) ==
	      cudaSuccess);
	bad = differences(got, want, n, t, &first);
	if (bad != 0)
		fprintf(stderr, "  %s %s of %d (offset %zu): %zu of %zu elements differ, the "
			"first at %zu\n", herd_dtype_name(t), herd_redop_name(op), nsrc, skew, bad,
			n, first);
	CHECK(bad == 0);
	for (int k = 0; k < nsrc; k++) {
		free((char *)host[k] - skew * sz);
		cudaFree(dev[k]);
	}
	cudaFree(out);
	free(want);
	free(got);
}

static void test_kernels_reduce_matches_the_host_for_every_type_and_operation(void)
{
	for (int t = 0; t < HERD_DTYPE_COUNT; t++)
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			check_reduce((herd_dtype)t, ops[o], 2, 0);
			check_reduce((herd_dtype)t, ops[o], 3, 1);
			check_reduce((herd_dtype)t, ops[o], 4, 0);
			check_reduce((herd_dtype)t, ops[o], 1, 0);
		}
}

/* In place: dst is the first source. */
static void test_kernels_reduce_in_place(void)
{
	size_t n = COUNT;
	float *h = malloc(n * sizeof(float)), *d0, *d1;
	const void *srcs[2];

	for (size_t i = 0; i < n; i++)
		h[i] = (float)(i % 100);
	CHECK(cudaMalloc((void **)&d0, n * sizeof(float)) == cudaSuccess);
	CHECK(cudaMalloc((void **)&d1, n * sizeof(float)) == cudaSuccess);
	cudaMemcpy(d0, h, n * sizeof(float), cudaMemcpyHostToDevice);
	cudaMemcpy(d1, h, n * sizeof(float), cudaMemcpyHostToDevice);
	srcs[0] = d0;
	srcs[1] = d1;
	CHECK_OK(herd__k_reduce(d0, srcs, 2, n, HERD_FLOAT32, HERD_SUM, NULL));
	cudaMemcpy(h, d0, n * sizeof(float), cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < n; i++)
		if (h[i] != (float)(2 * (i % 100))) {
			CHECK(h[i] == (float)(2 * (i % 100)));
			break;
		}
	cudaFree(d0);
	cudaFree(d1);
	free(h);
}

static void check_cast(herd_dtype to, herd_dtype from)
{
	size_t n = COUNT, first = 0, bad;
	float *f = malloc(n * sizeof(float));
	void *src = malloc(n * 8), *want = malloc(n * 8), *got = malloc(n * 8), *dsrc, *ddst;

	random_fill(f, n, HERD_FLOAT32, 77);
	/* A tie (float16's halfway point), and values past each type's range. */
	f[19] = 1.0f + 1.0f / 2048.0f;
	f[23] = 1e30f;
	f[29] = 1e-30f;
	/* the source in its type, and the host's conversion through float32 */
	if (is_narrow(from))
		herd__float_to_narrow(src, f, n, from);
	else if (from == HERD_FLOAT32)
		memcpy(src, f, n * sizeof(float));
	else
		for (size_t i = 0; i < n; i++)
			((double *)src)[i] = (double)f[i];
	if (is_narrow(from))
		herd__narrow_to_float(f, src, n, from);
	if (is_narrow(to))
		herd__float_to_narrow(want, f, n, to);
	else if (to == HERD_FLOAT32)
		memcpy(want, f, n * sizeof(float));
	else
		for (size_t i = 0; i < n; i++)
			((double *)want)[i] = (double)f[i];
	CHECK(cudaMalloc(&dsrc, n * 8) == cudaSuccess);
	CHECK(cudaMalloc(&ddst, n * 8) == cudaSuccess);
	cudaMemcpy(dsrc, src, n * herd_dtype_size(from), cudaMemcpyHostToDevice);
	CHECK_OK(herd__k_cast(ddst, to, dsrc, from, n, NULL));
	cudaMemcpy(got, ddst, n * herd_dtype_size(to), cudaMemcpyDeviceToHost);
	bad = differences(got, want, n, to, &first);
	if (bad != 0)
		fprintf(stderr, "  cast %s to %s: %zu elements differ, the first at %zu\n",
			herd_dtype_name(from), herd_dtype_name(to), bad, first);
	CHECK(bad == 0);
	cudaFree(dsrc);
	cudaFree(ddst);
	free(f);
	free(src);
	free(want);
	free(got);
}

static void test_kernels_cast_rounds_as_the_host_does(void)
{
	const herd_dtype fl[] = { HERD_FLOAT16, HERD_BFLOAT16, HERD_FLOAT32, HERD_FLOAT64 };

	/* Every pair whose source values are exact in float32 (all of them,
	 * as random_fill makes float64 data here from float32). */
	for (size_t a = 0; a < 4; a++)
		for (size_t b = 0; b < 4; b++)
			check_cast(fl[a], fl[b]);
	CHECK_ERR(herd__k_cast((void *)8, HERD_INT32, (void *)8, HERD_FLOAT32, 4, NULL),
		  HERD_EINVAL, "float32 to int32: casts are between");
}

/* Four ranks' data reduced on the device verify with no wrong element; one
 * changed element is one wrong. */
static void test_kernels_fill_and_verify_agree_with_the_reduction(void)
{
	size_t n = COUNT;

	for (int t = 0; t < HERD_DTYPE_COUNT; t++)
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			size_t sz = herd_dtype_size((herd_dtype)t);
			void *d[4];
			const void *srcs[4];
			uint64_t wrong = 99;
			uint8_t byte;

			for (int r = 0; r < 4; r++) {
				CHECK(cudaMalloc(&d[r], n * sz) == cudaSuccess);
				CHECK_OK(herd__k_fill(d[r], n, (herd_dtype)t, ops[o], r, 4, 42, NULL));
				srcs[r] = d[r];
			}
			CHECK_OK(herd__k_reduce(d[0], srcs, 4, n, (herd_dtype)t, ops[o], NULL));
			CHECK_OK(herd__k_verify(d[0], n, (herd_dtype)t, ops[o], 4, 42, &wrong, NULL));
			if (wrong != 0)
				fprintf(stderr, "  %s %s: %llu wrong\n", herd_dtype_name((herd_dtype)t),
					herd_redop_name(ops[o]), (unsigned long long)wrong);
			CHECK(wrong == 0);
			/* a different seed is wrong almost everywhere */
			CHECK_OK(herd__k_verify(d[0], n, (herd_dtype)t, ops[o], 4, 43, &wrong, NULL));
			if (wrong <= n / 10)
				fprintf(stderr, "  %s %s: only %llu wrong with another seed\n",
					herd_dtype_name((herd_dtype)t), herd_redop_name(ops[o]),
					(unsigned long long)wrong);
			CHECK(wrong > n / 10);
			cudaMemcpy(&byte, (char *)d[0] + 500 * sz, 1, cudaMemcpyDeviceToHost);
			byte ^= 1;
			cudaMemcpy((char *)d[0] + 500 * sz, &byte, 1, cudaMemcpyHostToDevice);
			CHECK_OK(herd__k_verify(d[0], n, (herd_dtype)t, ops[o], 4, 42, &wrong, NULL));
			CHECK(wrong == 1);
			for (int r = 0; r < 4; r++)
				cudaFree(d[r]);
		}
}

static void test_kernels_refuse_bad_arguments(void)
{
	const void *srcs[HERD__K_MAX_SRCS + 1] = { 0 };
	uint64_t wrong;

	CHECK_ERR(herd__k_reduce((void *)16, srcs, 0, 4, HERD_FLOAT32, HERD_SUM, NULL), HERD_EINVAL,
		  "nsrc is 0, expected 1 to 8");
	CHECK_ERR(herd__k_reduce((void *)16, srcs, 9, 4, HERD_FLOAT32, HERD_SUM, NULL), HERD_EINVAL,
		  "nsrc is 9");
	CHECK_ERR(herd__k_reduce((void *)16, srcs, 2, 4, HERD_FLOAT32, HERD_SUM, NULL), HERD_EINVAL,
		  "srcs[0] is NULL");
	srcs[0] = srcs[1] = (void *)16;
	CHECK_ERR(herd__k_reduce((void *)16, srcs, 2, 4, (herd_dtype)99, HERD_SUM, NULL),
		  HERD_EINVAL, "unknown datatype 99");
	CHECK_ERR(herd__k_fill((void *)16, 4, HERD_FLOAT32, HERD_SUM, 4, 4, 1, NULL), HERD_EINVAL,
		  "rank 4 of 4 ranks");
	CHECK_ERR(herd__k_verify((void *)16, 4, HERD_FLOAT32, HERD_SUM, 0, 1, &wrong, NULL),
		  HERD_EINVAL, "of 0 ranks");
	CHECK_ERR(herd__k_copy_bandwidth(HERD__KCOPY_D2D, 0, 5, &(double){ 0 }), HERD_EINVAL,
		  "expected at least 1 byte");
}

static void test_kernels_copy_probe_gives_a_rate(void)
{
	const herd__kcopy kinds[] = { HERD__KCOPY_D2D, HERD__KCOPY_H2D, HERD__KCOPY_D2H };

	for (size_t k = 0; k < 3; k++) {
		double gbps = 0;

		CHECK_OK(herd__k_copy_bandwidth(kinds[k], 64u << 20, 5, &gbps));
		CHECK(gbps > 0 && isfinite(gbps));
		printf("     copy %zu: %.1f GB/s\n", k, gbps);
	}
}

/* No GPU: a launch is refused with CUDA's reason, as HERD_ENODEV. */
static void test_kernels_without_a_gpu_say_enodev(void)
{
	const void *srcs[2] = { (void *)16, (void *)32 };
	herd_status st = herd__k_reduce((void *)16, srcs, 2, 4, HERD_FLOAT32, HERD_SUM, NULL);

	CHECK_INT(st, HERD_ENODEV);
	CHECK(strncmp(herd_last_error(), "the reduction kernel: ", 22) == 0);
	CHECK(strstr(herd_last_error(), "(cuda") != NULL);
	printf("     %s\n", herd_last_error());
}

int main(void)
{
	int n = 0;
	herd_status st = herd__k_device_count(&n);

	if (st == HERD_ENODEV) {
		TEST_RUN(test_kernels_without_a_gpu_say_enodev);
		if (test_failures == 0) {
			printf("skipped: no GPU here (%s)\n", herd_last_error());
			return 77;
		}
		return TEST_DONE();
	}
	CHECK_OK(st);
	TEST_RUN(test_kernels_refuse_bad_arguments);
	TEST_RUN(test_kernels_reduce_matches_the_host_for_every_type_and_operation);
	TEST_RUN(test_kernels_reduce_in_place);
	TEST_RUN(test_kernels_cast_rounds_as_the_host_does);
	TEST_RUN(test_kernels_fill_and_verify_agree_with_the_reduction);
	TEST_RUN(test_kernels_copy_probe_gives_a_rate);
	return TEST_DONE();
}
