/*
 * bench/trace_record.c - what the flight recorder (sdk/comm/trace.h) adds
 * to a call, alone: the entry a call begins and the end it records (with
 * the coarse clock it reads), N times into a ring of 1024 entries in
 * shared memory, as a communicator's thread writes them.  The call's own
 * start time is read anyway; it is passed in, not timed.
 *
 *   bench_trace_record [N]    N calls recorded (default 20000000)
 *
 * Prints "record_ns MEAN" (per call, the best of 5 runs) and exits 0; 1
 * when it cannot map memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "comm/trace.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	size_t len = HERD__TRACE_HEAD_SIZE + 1024 * sizeof(herd__trace_entry);
	herd__trace t = { 0 };
	double best = 0;
	void *p;

	if (n <= 0) {
		fprintf(stderr, "usage: bench_trace_record [N]\n");
		return 1;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	t.head = p;
	t.ring = (herd__trace_entry *)((char *)p + HERD__TRACE_HEAD_SIZE);
	t.cap = 1024;
	for (int run = 0; run < 5; run++) {
		double t0 = now_ns(), ns;

		for (long i = 1; i <= n; i++) {
			herd__trace_entry *e = herd__trace_begin(&t, (uint64_t)i, (uint64_t)i, 1, 8, 1,
								 -1, 2, -1, 5, (uint64_t)i);

			herd__trace_end(e, HERD_OK, herd__trace_now_coarse());
		}
		ns = (now_ns() - t0) / (double)n;
		if (run == 0 || ns < best)
			best = ns;
	}
	printf("record_ns %.2f\n", best);
	munmap(p, len);
	return 0;
}
