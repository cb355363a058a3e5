/*
 * bench/kernel_bench.c - herd's reduction kernel against the device's own
 * copy, on one GPU, in the same run.
 *
 *   build/bin/bench_kernels [--bytes N[K|M|G]] [--repeats R]
 *
 * The peer is cudaMemcpy device to device (herd__k_copy_bandwidth): it
 * reads N bytes and writes N, the most a memory-bound kernel can hope to
 * move per second.  Each reduction reads nsrc arrays of N bytes and writes
 * one, so its rate counts (nsrc + 1) * N bytes; the ratio of the two rates
 * is how close the kernel comes to the memory's limit.  Every timed
 * reduction is checked: its sources come from herd__k_fill as ranks 0..nsrc-1
 * and the result is verified on the device (#wrong must be 0).  The host
 * copies (pinned, one direction at a time) are printed for reference.
 * Times are CUDA events around each call, median of R after one untimed
 * call.  Exit status 0 when every result verified.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define MAX_SRCS HERD__K_MAX_SRCS

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

static int cuda_ok(cudaError_t rc, const char *what)
{
	if (rc == cudaSuccess)
		return 1;
	fprintf(stderr, "bench_kernels: %s: %s\n", what, cudaGetErrorString(rc));
	return 0;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v <= 0)
		return 0;
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	case '\0': break;
	default: return 0;
	}
	return (size_t)v;
}

typedef struct row {
	herd_dtype dtype;
	herd_redop op;
	int nsrc;
} row;

static const row rows[] = {
	{ HERD_FLOAT32, HERD_SUM, 2 },  { HERD_BFLOAT16, HERD_SUM, 2 },
	{ HERD_FLOAT16, HERD_SUM, 2 },  { HERD_FLOAT64, HERD_SUM, 2 },
	{ HERD_INT32, HERD_SUM, 2 },    { HERD_FLOAT32, HERD_MAX, 2 },
	{ HERD_FLOAT32, HERD_AVG, 4 },  { HERD_FLOAT32, HERD_SUM, 8 },
};

int main(int argc, char **argv)
{
	size_t bytes = (size_t)1 << 30;
	int repeats = 20, failed = 0, dev = 0, drv = 0, rt = 0;
	void *src[MAX_SRCS] = { 0 }, *dst = NULL;
	struct cudaDeviceProp prop;
	cudaEvent_t a, b;
	double copy = 0, h2d = 0, d2h = 0, f32_ratio = 0;
	float *ms;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
			bytes = parse_size(argv[++i]);
		} else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
			repeats = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: bench_kernels [--bytes N[K|M|G]] [--repeats R]\n");
			return 2;
		}
	}
	if (bytes < 64 || repeats < 1 || repeats > 10000) {
		fprintf(stderr, "bench_kernels: --bytes must be at least 64 and --repeats 1 to "
			"10000\n");
		return 2;
	}
	bytes &= ~(size_t)63;
	if (!cuda_ok(cudaGetDevice(&dev), "cudaGetDevice") ||
	    !cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"))
		return 2;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	printf("# bench_kernels on %s (sm_%d%d, %d SMs, %.0f MiB L2), CUDA driver %d.%d, runtime "
	       "%d.%d\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
	       prop.l2CacheSize / 1048576.0, drv / 1000, drv % 1000 / 10, rt / 1000,
	       rt % 1000 / 10);
	printf("# %zu bytes per array, median of %d\n", bytes, repeats);
	if (herd__k_copy_bandwidth(HERD__KCOPY_D2D, bytes, repeats, &copy) != HERD_OK ||
	    herd__k_copy_bandwidth(HERD__KCOPY_H2D, bytes / 4, repeats, &h2d) != HERD_OK ||
	    herd__k_copy_bandwidth(HERD__KCOPY_D2H, bytes / 4, repeats, &d2h) != HERD_OK) {
		fprintf(stderr, "bench_kernels: %s\n", herd_last_error());
		return 2;
	}
	ms = calloc((size_t)repeats, sizeof(*ms));
	for (int k = 0; k < MAX_SRCS; k++)
		if (!cuda_ok(cudaMalloc(&src[k], bytes), "cudaMalloc"))
			return 2;
	if (ms == NULL || !cuda_ok(cudaMalloc(&dst, bytes), "cudaMalloc") ||
	    !cuda_ok(cudaEventCreate(&a), "cudaEventCreate") ||
	    !cuda_ok(cudaEventCreate(&b), "cudaEventCreate"))
		return 2;
	printf("%-28s %10s %10s %8s %7s\n", "operation", "time(us)", "GB/s", "of copy", "#wrong");
	printf("%-28s %10.1f %10.1f %8s %7s\n", "copy device to device", 2.0 * bytes / copy / 1e3,
	       copy, "1.00", "-");
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const row *w = &rows[r];
		size_t count = bytes / herd_dtype_size(w->dtype);
		const void *srcs[MAX_SRCS];
		uint64_t wrong = 0;
		double med, gbps;
		char name[64];

		for (int k = 0; k < w->nsrc; k++) {
			srcs[k] = src[k];
			if (herd__k_fill(src[k], count, w->dtype, w->op, k, w->nsrc, 7, NULL) != HERD_OK)
				goto fail;
		}
		if (herd__k_reduce(dst, srcs, w->nsrc, count, w->dtype, w->op, NULL) != HERD_OK)
			goto fail;
		for (int i = 0; i < repeats; i++) {
			cudaEventRecord(a, NULL);
			herd__k_reduce(dst, srcs, w->nsrc, count, w->dtype, w->op, NULL);
			cudaEventRecord(b, NULL);
			if (!cuda_ok(cudaEventSynchronize(b), "the reduction"))
				return 2;
			cudaEventElapsedTime(&ms[i], a, b);
		}
		if (herd__k_verify(dst, count, w->dtype, w->op, w->nsrc, 7, &wrong, NULL) != HERD_OK)
			goto fail;
		qsort(ms, (size_t)repeats, sizeof(*ms), cmp_float);
		med = repeats % 2 ? ms[repeats / 2] : (ms[repeats / 2 - 1] + ms[repeats / 2]) / 2.0;
		gbps = (double)bytes * (w->nsrc + 1) / (med * 1e6);
		if (r == 0)
			f32_ratio = gbps / copy;
		snprintf(name, sizeof(name), "reduce %s %s %d->1", herd_dtype_name(w->dtype),
			 herd_redop_name(w->op), w->nsrc);
		printf("%-28s %10.1f %10.1f %8.2f %7llu\n", name, med * 1e3, gbps, gbps / copy,
		       (unsigned long long)wrong);
		failed += wrong != 0;
	}
	printf("%-28s %10.1f %10.1f %8s %7s\n", "copy host to device (pinned)",
	       bytes / 4 / h2d / 1e3, h2d, "-", "-");
	printf("%-28s %10.1f %10.1f %8s %7s\n", "copy device to host (pinned)",
	       bytes / 4 / d2h / 1e3, d2h, "-", "-");
	printf("# reduce float32 sum at %.2f of the device-to-device copy's rate\n", f32_ratio);
	return failed ? 1 : 0;
fail:
	fprintf(stderr, "bench_kernels: %s\n", herd_last_error());
	return 2;
}
