/*
 * bench/nccl_allreduce.c - the raw NCCL peer of `herd bench allreduce
 * --device gpu`: ncclAllReduce of float32 sum on one process's GPUs (one
 * rank per visible GPU, ncclCommInitAll, each on its own stream), timed as
 * herd bench times a call (warmup calls, then ITERS calls, the elapsed
 * time over ITERS, out of place then in place), the sizes of herd bench's
 * -b/-e/-f sweep.  BLOCKING 0 (default) queues the calls and waits once
 * after them, as nccl-tests and `herd bench --device gpu -z 0` do; 1 waits
 * after each call, as -z 1.  One JSON line per size, as `herd bench
 * --json` prints:
 *
 *   bench_nccl_allreduce MINBYTES MAXBYTES FACTOR ITERS WARMUP [BLOCKING]
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAXDEV 8

#define CK(call)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (call);                                                  \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "bench_nccl_allreduce: %s: %s\n", #call,          \
				cudaGetErrorString(e_));                                   \
			exit(1);                                                          \
		}                                                                         \
	} while (0)
#define NK(call)                                                                          \
	do {                                                                              \
		ncclResult_t r_ = (call);                                                 \
		if (r_ != ncclSuccess) {                                                  \
			fprintf(stderr, "bench_nccl_allreduce: %s: %s\n", #call,          \
				ncclGetErrorString(r_));                                   \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ndev;
static ncclComm_t comms[MAXDEV];
static cudaStream_t streams[MAXDEV];
static float *send[MAXDEV], *recv[MAXDEV];

static void sync_all(void)
{
	for (int d = 0; d < ndev; d++) {
		CK(cudaSetDevice(d));
		CK(cudaStreamSynchronize(streams[d]));
	}
}

/* n calls on every GPU, in one group each, then all streams synchronized
 * (blocking: after each call). */
static void calls(size_t count, int inplace, int n, int blocking)
{
	for (int i = 0; i < n; i++) {
		NK(ncclGroupStart());
		for (int d = 0; d < ndev; d++)
			NK(ncclAllReduce(inplace ? recv[d] : send[d], recv[d], count, ncclFloat32,
					 ncclSum, comms[d], streams[d]));
		NK(ncclGroupEnd());
		if (blocking)
			sync_all();
	}
	sync_all();
}

int main(int argc, char **argv)
{
	size_t minb, maxb;
	int factor, iters, warmup, blocking, devs[MAXDEV], version;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: bench_nccl_allreduce MINBYTES MAXBYTES FACTOR ITERS WARMUP "
			"[BLOCKING]\n");
		return 2;
	}
	minb = strtoull(argv[1], NULL, 10);
	maxb = strtoull(argv[2], NULL, 10);
	factor = atoi(argv[3]);
	iters = atoi(argv[4]);
	warmup = atoi(argv[5]);
	blocking = argc == 7 ? atoi(argv[6]) : 0;
	if (minb < 4 || maxb < minb || factor < 2 || iters < 1 || warmup < 0 || blocking < 0 ||
	    blocking > 1) {
		fprintf(stderr, "bench_nccl_allreduce: bad arguments\n");
		return 2;
	}
	CK(cudaGetDeviceCount(&ndev));
	if (ndev > MAXDEV)
		ndev = MAXDEV;
	for (int d = 0; d < ndev; d++) {
		devs[d] = d;
		CK(cudaSetDevice(d));
		CK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
		CK(cudaMalloc((void **)&send[d], maxb));
		CK(cudaMalloc((void **)&recv[d], maxb));
		CK(cudaMemset(send[d], 0, maxb));
		CK(cudaMemset(recv[d], 0, maxb));
	}
	NK(ncclGetVersion(&version));
	NK(ncclCommInitAll(comms, ndev, devs));
	fprintf(stderr, "bench_nccl_allreduce: NCCL %d.%d.%d, %d GPU%s\n", version / 10000,
		version / 100 % 100, version % 100, ndev, ndev > 1 ? "s" : "");
	for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
		size_t count = bytes / sizeof(float);
		double us[2];

		for (int inplace = 0; inplace < 2; inplace++) {
			double t0;

			calls(count, inplace, warmup, blocking);
			t0 = now_s();
			calls(count, inplace, iters, blocking);
			us[inplace] = (now_s() - t0) / iters * 1e6;
		}
		printf("{\"bytes\":%zu,\"ranks\":%d,\"out_of_place\":{\"time_us\":%.3f,\"busbw\":%.3f},"
		       "\"in_place\":{\"time_us\":%.3f,\"busbw\":%.3f}}\n", bytes, ndev, us[0],
		       (double)bytes / (us[0] * 1e3) * (ndev > 1 ? 2.0 * (ndev - 1) / ndev : 1.0),
		       us[1], (double)bytes / (us[1] * 1e3) * (ndev > 1 ? 2.0 * (ndev - 1) / ndev : 1.0));
		fflush(stdout);
		if (bytes > maxb / (size_t)factor)
			break;
	}
	for (int d = 0; d < ndev; d++)
		ncclCommDestroy(comms[d]);
	return 0;
}
