/*
 * bench/bench_telemetry.c - what telemetry costs the node it watches.
 *
 *   bench_telemetry [-n TAKES] [-s SECONDS] [-p PERIOD_MS]
 *
 * First the CPU time of one sample: TAKES samples (default 200) taken one
 * after another with herd_telemetry_take, each timed on the thread's CPU
 * clock (CLOCK_THREAD_CPUTIME_ID, user and system time of the reads) and
 * on the monotonic clock; the median, 10th and 90th percentiles.  Then a
 * started sampler every PERIOD_MS (default 1000: 1 Hz) for SECONDS
 * (default 20) while this program's main thread sleeps: the process's
 * CPU time over that wall time (getrusage), as a percentage of one core.
 * Every part is sampled (GPUs too, when NVML is there).  Exits 1 with the
 * error on stderr when a call fails, 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <herd.h>

static double seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double rusage_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The q-quantile of n sorted values (nearest rank). */
static double quantile(const double *v, int n, double q)
{
	int i = (int)(q * (n - 1) + 0.5);

	return v[i];
}

static int fail(const char *what, herd_status st)
{
	fprintf(stderr, "bench_telemetry: %s: %s: %s\n", what, herd_status_name(st),
		herd_last_error());
	return 1;
}

static int positive(const char *opt, const char *text, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > 1000000) {
		fprintf(stderr, "bench_telemetry: %s %s: expected a whole number from 1 to "
			"1000000\n", opt, text);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *s = malloc(sizeof(*s));
	herd_telemetry *t = NULL;
	int takes = 200, secs = 20, period = 1000, c;
	double *cpu, *wall, cpu0, t0, used, elapsed;
	struct timespec nap;
	herd_status st;

	while ((c = getopt(argc, argv, "n:s:p:")) != -1) {
		int bad = 0;

		if (c == 'n')
			bad = positive("-n", optarg, &takes);
		else if (c == 's')
			bad = positive("-s", optarg, &secs);
		else if (c == 'p')
			bad = positive("-p", optarg, &period);
		else
			bad = -1;
		if (bad != 0) {
			fprintf(stderr, "usage: bench_telemetry [-n TAKES] [-s SECONDS] "
				"[-p PERIOD_MS]\n");
			return 2;
		}
	}
	cpu = calloc((size_t)takes, sizeof(*cpu));
	wall = calloc((size_t)takes, sizeof(*wall));
	if (s == NULL || cpu == NULL || wall == NULL) {
		fprintf(stderr, "bench_telemetry: out of memory\n");
		return 1;
	}

	st = herd_telemetry_create(&t, &o);
	if (st != HERD_OK)
		return fail("creating a sampler", st);
	for (int i = 0; i < takes; i++) {
		double c0 = seconds(CLOCK_THREAD_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);

		st = herd_telemetry_take(t, s);
		if (st != HERD_OK)
			return fail("taking a sample", st);
		cpu[i] = seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
		wall[i] = seconds(CLOCK_MONOTONIC) - w0;
	}
	qsort(cpu, (size_t)takes, sizeof(*cpu), cmp_double);
	qsort(wall, (size_t)takes, sizeof(*wall), cmp_double);
	printf("host %s: %d CPUs, %d interfaces, %d disks, %d GPUs%s%s\n", s->host, s->ncpus,
	       s->nnets, s->ndisks, s->ngpus, s->gpu_note[0] != '\0' ? " - " : "", s->gpu_note);
	printf("one sample (%d takes): CPU time median %.1f us (p10 %.1f, p90 %.1f), "
	       "wall median %.1f us\n", takes, quantile(cpu, takes, 0.5) * 1e6,
	       quantile(cpu, takes, 0.1) * 1e6, quantile(cpu, takes, 0.9) * 1e6,
	       quantile(wall, takes, 0.5) * 1e6);
	herd_telemetry_free(t);
	t = NULL;

	o.period_ms = period;
	st = herd_telemetry_create(&t, &o);
	if (st != HERD_OK)
		return fail("creating a sampler", st);
	cpu0 = rusage_seconds();
	t0 = seconds(CLOCK_MONOTONIC);
	st = herd_telemetry_start(t);
	if (st != HERD_OK)
		return fail("starting the sampler", st);
	nap.tv_sec = secs;
	nap.tv_nsec = 0;
	while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
		;
	used = rusage_seconds() - cpu0;
	elapsed = seconds(CLOCK_MONOTONIC) - t0;
	st = herd_telemetry_latest(t, s);
	if (st != HERD_OK)
		return fail("reading the sampler", st);
	printf("sampler every %d ms for %.1f s: %llu samples, CPU time %.1f ms = %.3f%% of one "
	       "core\n", period, elapsed, (unsigned long long)s->seq, used * 1e3,
	       100.0 * used / elapsed);
	herd_telemetry_free(t);
	free(s);
	free(cpu);
	free(wall);
	return 0;
}
