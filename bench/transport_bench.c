/*
 * bench/transport_bench.c - what the transports give a pair of ranks and a
 * crowded ring, through the public calls: run it under the launcher,
 *
 *   herd launch -n 2 build/bin/bench_transport            shared memory
 *   HERD_TRANSPORT=tcp herd launch -n 2 build/bin/bench_transport
 *   herd launch -n 7 build/bin/bench_transport            7 ranks, few cores
 *
 * Rank 0 prints one line: the bandwidth of a ring exchange of BYTES (each
 * rank sends BYTES to the next and receives BYTES from the previous, in one
 * herd_comm_sendrecv), per direction, over REPS exchanges after one warmup;
 * the one-way latency of an 8-byte ping-pong between ranks 0 and 1 over
 * PINGS round trips; and the time of a ring step of 64 bytes over STEPS
 * steps, which shows whether waiting ranks leave the CPU to the ranks they
 * wait for when they outnumber the cores.
 *
 * usage: bench_transport [BYTES [REPS [PINGS [STEPS]]]]
 *        defaults 64M, 8, 20000, 2000; BYTES as herd_size_parse reads it
 * Exits 1 with the error on stderr when a call fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <herd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static herd_status ring(herd_comm *c, const void *s, void *r, size_t n)
{
	int p = herd_comm_size(c), me = herd_comm_rank(c);

	return herd_comm_sendrecv(c, s, n, (me + 1) % p, r, n, (me + p - 1) % p, HERD_UINT8);
}

/* 8 bytes from rank 0 to rank 1 and back, pings times; other ranks wait. */
static herd_status pingpong(herd_comm *c, long pings)
{
	uint8_t msg[8] = { 0 };
	int me = herd_comm_rank(c), other = 1 - me;
	herd_status st = HERD_OK;

	for (long i = 0; st == HERD_OK && i < pings && me < 2; i++) {
		if (me == 0)
			st = herd_comm_send(c, msg, sizeof(msg), HERD_UINT8, other);
		if (st == HERD_OK)
			st = herd_comm_recv(c, msg, sizeof(msg), HERD_UINT8, other);
		if (st == HERD_OK && me == 1)
			st = herd_comm_send(c, msg, sizeof(msg), HERD_UINT8, other);
	}
	return st;
}

int main(int argc, char **argv)
{
	uint64_t bytes = 64u << 20;
	long reps = argc > 2 ? atol(argv[2]) : 8, pings = argc > 3 ? atol(argv[3]) : 20000;
	long steps = argc > 4 ? atol(argv[4]) : 2000;
	uint8_t *send = NULL, *recv = NULL, s64[64] = { 0 }, r64[64];
	herd_comm *c = NULL;
	double t0, bw = 0, lat = 0, step = 0;
	herd_status st;

	if ((argc > 1 && herd_size_parse(argv[1], &bytes) != HERD_OK) || bytes == 0 || reps < 1 ||
	    pings < 1 || steps < 1) {
		fprintf(stderr, "usage: bench_transport [BYTES [REPS [PINGS [STEPS]]]]\n");
		return 2;
	}
	st = herd_comm_init_env(&c, NULL);
	if (st == HERD_OK && herd_comm_size(c) < 2) {
		fprintf(stderr, "bench_transport: run 2 ranks or more (herd launch -n 2 ...)\n");
		herd_comm_free(c);
		return 2;
	}
	send = malloc(bytes);
	recv = malloc(bytes);
	if (st == HERD_OK && (send == NULL || recv == NULL))
		st = HERD_ENOMEM;
	if (st == HERD_OK) {
		memset(send, herd_comm_rank(c) + 1, bytes);
		memset(recv, 0, bytes);
		st = ring(c, send, recv, bytes);      /* warm up: page faults */
	}
	t0 = now_s();
	for (long i = 0; st == HERD_OK && i < reps; i++)
		st = ring(c, send, recv, bytes);
	bw = (double)bytes * (double)reps / (now_s() - t0) / 1e9;
	if (st == HERD_OK)
		st = pingpong(c, 1000);
	if (st == HERD_OK)
		st = herd_comm_barrier(c);
	t0 = now_s();
	if (st == HERD_OK)
		st = pingpong(c, pings);
	lat = (now_s() - t0) / (double)pings / 2 * 1e6;
	if (st == HERD_OK)
		st = herd_comm_barrier(c);
	t0 = now_s();
	for (long i = 0; st == HERD_OK && i < steps; i++)
		st = ring(c, s64, r64, sizeof(s64));
	step = (now_s() - t0) / (double)steps * 1e6;
	if (st == HERD_OK)
		st = herd_comm_finalize(c);
	if (st == HERD_OK && herd_comm_rank(c) == 0)
		printf("%d ranks, transport %s: ring exchange of %llu bytes %.2f GB/s per direction; "
		       "8-byte ping-pong %.2f us one way; ring steps of 64 bytes %.1f us\n",
		       herd_comm_size(c), getenv("HERD_TRANSPORT") ? getenv("HERD_TRANSPORT") : "auto",
		       (unsigned long long)bytes, bw, lat, step);
	if (st != HERD_OK)
		fprintf(stderr, "bench_transport: %s: %s\n", herd_status_name(st), herd_last_error());
	herd_comm_free(c);
	free(send);
	free(recv);
	return st == HERD_OK ? 0 : 1;
}
