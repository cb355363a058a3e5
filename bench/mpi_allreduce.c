/*
 * bench/mpi_allreduce.c - MPI_Allreduce (float32, sum) timed the way
 * `herd bench allreduce` times herd_comm_allreduce, printed in the same
 * columns, so that bench/compare.sh can put the two side by side.
 *
 *   mpirun -n 4 --mca btl self,vader bench_mpi_allreduce -b 8 -e 128M -f 8 -n 20 -w 5 -c 1
 *
 * Per size, out-of-place then in-place (MPI_IN_PLACE): fill the inputs,
 * warmup calls, a barrier, iters timed calls; the time is the elapsed time
 * over iters, the maximum over ranks, in microseconds; algbw = bytes / time,
 * busbw = algbw * 2(n-1)/n (nccl-tests).  With -c 1 one more call is
 * checked against the exact sums of the integer-valued inputs
 * 1 + (index + 3 * rank) % 5 (the values herd bench uses).
 *
 * With -j 1 it prints, instead of the table, the JSON lines of
 * `herd bench --json`, with "median_us" and "p99_us" measured as herd
 * bench measures them: each timed call timed by itself from the end of the
 * one before, each rank's median and 99th percentile (nearest rank) of
 * its calls, the slowest rank's.  bench/busy_compare.sh reads them.
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct args {
	size_t minbytes, maxbytes;
	long factor;
	int iters, warmup, check, json;
};

static int parse_size(const char *s, size_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned long long mult = 1;
	if (*end == 'K' || *end == 'k')
		mult = 1ull << 10;
	else if (*end == 'M' || *end == 'm')
		mult = 1ull << 20;
	else if (*end == 'G' || *end == 'g')
		mult = 1ull << 30;
	if (mult > 1)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		return -1;
	*out = (size_t)(v * mult);
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	*a = (struct args){ 32u << 20, 32u << 20, 2, 20, 5, 1, 0 };
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL || o[0] != '-' || o[1] == '\0' || o[2] != '\0')
			return -1;
		i++;
		int bad = 0;
		switch (o[1]) {
		case 'b': bad = parse_size(v, &a->minbytes); break;
		case 'e': bad = parse_size(v, &a->maxbytes); break;
		case 'f': a->factor = atol(v); bad = a->factor < 2; break;
		case 'n': a->iters = atoi(v); bad = a->iters < 1; break;
		case 'w': a->warmup = atoi(v); bad = a->warmup < 0; break;
		case 'c': a->check = atoi(v); break;
		case 'j': a->json = atoi(v); break;
		default: bad = 1; break;
		}
		if (bad)
			return -1;
	}
	return a->minbytes <= a->maxbytes ? 0 : -1;
}

static float value(int rank, size_t i)
{
	return (float)(1 + (i + 3 * (size_t)rank) % 5);
}

static void fill(float *buf, size_t count, int rank)
{
	for (size_t i = 0; i < count; i++)
		buf[i] = value(rank, i);
}

static long long check(const float *buf, size_t count, int nranks)
{
	long long wrong = 0;
	for (size_t i = 0; i < count; i++) {
		float want = 0;
		for (int r = 0; r < nranks; r++)
			want += value(r, i);
		wrong += buf[i] != want;
	}
	return wrong;
}

struct result {
	double us, algbw, busbw;
	double median_us, p99_us;   /* -j 1 */
	long long wrong;
};

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* -j 1: this rank's median and 99th percentile of n call times (sorted
 * in place), then the slowest rank's of each. */
static void percentiles(double *t, int n, struct result *res)
{
	int k = (int)((double)n * 0.99);
	double q[2];

	qsort(t, (size_t)n, sizeof(double), cmp_double);
	if ((double)k < (double)n * 0.99)
		k++;
	q[0] = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	q[1] = t[k > 0 ? k - 1 : 0];
	MPI_Allreduce(MPI_IN_PLACE, q, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	res->median_us = q[0];
	res->p99_us = q[1];
}

static void run(const struct args *a, float *send, float *recv, size_t count, int inplace,
		int rank, int n, double *call_us, struct result *res)
{
	const void *sb = inplace ? MPI_IN_PLACE : (const void *)send;
	float *in = inplace ? recv : send;
	fill(in, count, rank);
	for (int i = 0; i < a->warmup; i++)
		MPI_Allreduce(sb, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	if (call_us != NULL) {
		double prev = t0;
		for (int i = 0; i < a->iters; i++) {
			MPI_Allreduce(sb, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			double t = MPI_Wtime();
			call_us[i] = (t - prev) * 1e6;
			prev = t;
		}
	} else {
		for (int i = 0; i < a->iters; i++)
			MPI_Allreduce(sb, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
	double us = (MPI_Wtime() - t0) * 1e6 / a->iters;
	MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	res->median_us = res->p99_us = -1;
	if (call_us != NULL)
		percentiles(call_us, a->iters, res);
	res->us = us;
	res->algbw = (double)(count * sizeof(float)) / 1e9 / (us * 1e-6);
	res->busbw = res->algbw * 2.0 * (n - 1) / n;
	res->wrong = 0;
	if (!a->check)
		return;
	fill(in, count, rank);
	if (!inplace)
		memset(recv, 0, count * sizeof(float));
	MPI_Allreduce(sb, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	long long wrong = check(recv, count, n);
	MPI_Allreduce(&wrong, &res->wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

static void json_result(const struct args *a, const char *key, const struct result *r)
{
	printf(",\"%s\":{\"time_us\":%.3f,\"median_us\":%.3f,\"p99_us\":%.3f,"
	       "\"algbw\":%.6g,\"busbw\":%.6g,\"wrong\":", key, r->us, r->median_us, r->p99_us,
	       r->algbw, r->busbw);
	if (a->check)
		printf("%lld}", r->wrong);
	else
		printf("null}");
}

static void print_result(const struct args *a, const struct result *r)
{
	char t[32];
	if (r->us >= 10000.0)
		snprintf(t, sizeof(t), "%7.0f", r->us);
	else if (r->us >= 100.0)
		snprintf(t, sizeof(t), "%7.1f", r->us);
	else
		snprintf(t, sizeof(t), "%7.2f", r->us);
	printf("  %7s  %6.2f  %6.2f", t, r->algbw, r->busbw);
	if (a->check)
		printf("  %5lld", r->wrong);
	else
		printf("  %5s", "N/A");
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	struct args a;
	if (parse_args(argc, argv, &a) != 0) {
		if (rank == 0)
			fprintf(stderr, "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] "
				"[-w WARMUP] [-c 0|1] [-j 0|1]\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	size_t maxcount = a.maxbytes / sizeof(float);
	if (maxcount > (size_t)INT32_MAX) {
		if (rank == 0)
			fprintf(stderr, "%s: -e is too large for an int count\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	float *send = NULL, *recv = NULL;
	size_t bytes = maxcount * sizeof(float) + 64;
	if (posix_memalign((void **)&send, 4096, bytes) || posix_memalign((void **)&recv, 4096, bytes)) {
		fprintf(stderr, "%s: cannot allocate 2 x %zu bytes\n", argv[0], bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(send, 0, bytes);
	memset(recv, 0, bytes);
	double *call_us = NULL;
	if (a.json && (call_us = calloc((size_t)a.iters, sizeof(double))) == NULL) {
		fprintf(stderr, "%s: cannot allocate the times of %d calls\n", argv[0], a.iters);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	if (rank == 0 && !a.json) {
		char version[MPI_MAX_LIBRARY_VERSION_STRING], host[256] = "?";
		int len = 0;
		MPI_Get_library_version(version, &len);
		char *nl = strchr(version, ',');
		if (nl)
			*nl = '\0';
		gethostname(host, sizeof(host) - 1);
		printf("# mpi allreduce: %d ranks on %s, %s\n", n, host, version);
		printf("#  minBytes %zu maxBytes %zu step: %ld(factor) warmup iters: %d iters: %d "
		       "validation: %d\n", a.minbytes, a.maxbytes, a.factor, a.warmup, a.iters,
		       a.check);
		printf("#\n"
		       "#                                                              out-of-place"
		       "                       in-place\n"
		       "#       size         count      type   redop    root"
		       "     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
		       "#        (B)    (elements)                          "
		       "     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
		fflush(stdout);
	}
	double bw = 0;
	int nbw = 0;
	long long wrong = 0;
	for (size_t size = a.minbytes; size <= a.maxbytes; size *= (size_t)a.factor) {
		size_t count = size / sizeof(float);
		struct result r[2];
		for (int inplace = 0; inplace < 2; inplace++) {
			run(&a, send, recv, count, inplace, rank, n, call_us, &r[inplace]);
			bw += r[inplace].busbw;
			nbw++;
			wrong += r[inplace].wrong;
		}
		if (rank == 0 && a.json) {
			printf("{\"op\":\"allreduce\",\"ranks\":%d,\"size\":%zu,\"count\":%zu,"
			       "\"type\":\"float32\",\"redop\":\"sum\",\"root\":-1", n,
			       count * sizeof(float), count);
			json_result(&a, "out_of_place", &r[0]);
			json_result(&a, "in_place", &r[1]);
			printf("}\n");
			fflush(stdout);
		} else if (rank == 0) {
			printf("%12zu  %12zu  %8s  %6s  %6d", count * sizeof(float), count, "float32",
			       "sum", -1);
			print_result(&a, &r[0]);
			print_result(&a, &r[1]);
			printf("\n");
			fflush(stdout);
		}
		if (size == 0)
			break;
	}
	if (rank == 0 && !a.json) {
		if (a.check)
			printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g\n#\n", nbw ? bw / nbw : 0.0);
	}
	free(send);
	free(recv);
	free(call_us);
	MPI_Finalize();
	return wrong ? 1 : 0;
}
