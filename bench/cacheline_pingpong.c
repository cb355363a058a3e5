/*
 * bench/cacheline_pingpong.c - the round trip of one cache line between
 * two processes on this machine: each spins until the other has written
 * its line, then writes its own.  Half of it is the least a call that must
 * see a peer's data can take on shared memory (an allreduce of 8 bytes on
 * 2 ranks), whatever the library.
 *
 *   bench_cacheline_pingpong [N]    N round trips (default 2000000)
 *
 * Prints "roundtrip_ns MEAN" and exits 0; 1 when it cannot map memory or
 * fork.  The child gives up after 10 s without a ping, so neither side
 * outlives a lost peer.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Spins until *w is v; false after 10 s. */
static int wait_for(_Atomic long *w, long v)
{
	double start = 0;

	for (unsigned long spins = 0; atomic_load_explicit(w, memory_order_acquire) != v; spins++) {
		if ((spins & 0xffff) != 0xffff)
			continue;
		if (start == 0)
			start = now_ns();
		else if (now_ns() - start > 10e9)
			return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	_Atomic long *ping, *pong;
	double t0;
	pid_t child;
	int status = 0;
	void *m;

	if (n < 1) {
		fprintf(stderr, "bench_cacheline_pingpong: N must be at least 1\n");
		return 1;
	}
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("bench_cacheline_pingpong: mmap");
		return 1;
	}
	ping = m;
	pong = (_Atomic long *)((char *)m + 128);    /* lines of their own */
	child = fork();
	if (child < 0) {
		perror("bench_cacheline_pingpong: fork");
		return 1;
	}
	if (child == 0) {
		for (long i = 1; i <= n; i++) {
			if (!wait_for(ping, i))
				_exit(1);
			atomic_store_explicit(pong, i, memory_order_release);
		}
		_exit(0);
	}
	t0 = now_ns();
	for (long i = 1; i <= n; i++) {
		atomic_store_explicit(ping, i, memory_order_release);
		if (!wait_for(pong, i)) {
			fprintf(stderr, "bench_cacheline_pingpong: no answer for 10 s\n");
			break;
		}
	}
	printf("roundtrip_ns %.1f\n", (now_ns() - t0) / (double)n);
	waitpid(child, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
