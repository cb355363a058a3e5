/*
 * bench/gloo_allreduce.cc - Gloo's ring-chunked allreduce (float32, sum)
 * over its TCP transport, timed the way `herd bench allreduce` times
 * herd_comm_allreduce and printed in the same columns, for bench/compare.sh.
 *
 *   bench_gloo_allreduce --np 4 -b 16M -e 128M -f 8 -n 20 -w 5 -c 1
 *
 * --np N forks N ranks on this host; they meet in a gloo FileStore in a
 * fresh temporary directory and connect a full mesh over TCP on 127.0.0.1.
 * Across hosts (bench/multihost_compare.sh) each rank is a process of its
 * own: --rank R --np N --store DIR --addr IP, DIR a directory every host
 * sees, IP the address this rank listens on.
 * gloo::AllreduceRingChunked reduces in place (the buffer is input and
 * output), so its figures are in the in-place columns and the out-of-place
 * ones say N/A.  Per size: fill, warmup calls, a barrier, iters timed calls;
 * the time is the elapsed time over iters, the maximum over ranks (a gloo
 * max-allreduce), in microseconds; busbw = algbw * 2(n-1)/n.  With -c 1 one
 * more call is checked against the exact sums of 1 + (index + 3 * rank) % 5.
 */
#include <gloo/allreduce_ring.h>
#include <gloo/config.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Args {
	size_t minbytes = 32u << 20, maxbytes = 32u << 20;
	long factor = 2;
	int iters = 20, warmup = 5, check = 1, np = 1;
	int rank = -1;                  /* one rank of a job across hosts */
	std::string store, addr = "127.0.0.1";
};

bool parse_size(const char *s, size_t *out)
{
	char *end = nullptr;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return false;
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
	*out = static_cast<size_t>(v * mult);
	return *end == '\0';
}

bool parse_args(int argc, char **argv, Args *a)
{
	for (int i = 1; i < argc; i++) {
		std::string o = argv[i];
		if (i + 1 >= argc)
			return false;
		const char *v = argv[++i];
		if (o == "-b") {
			if (!parse_size(v, &a->minbytes))
				return false;
		} else if (o == "-e") {
			if (!parse_size(v, &a->maxbytes))
				return false;
		} else if (o == "-f") {
			a->factor = atol(v);
		} else if (o == "-n") {
			a->iters = atoi(v);
		} else if (o == "-w") {
			a->warmup = atoi(v);
		} else if (o == "-c") {
			a->check = atoi(v);
		} else if (o == "--np") {
			a->np = atoi(v);
		} else if (o == "--rank") {
			a->rank = atoi(v);
		} else if (o == "--store") {
			a->store = v;
		} else if (o == "--addr") {
			a->addr = v;
		} else {
			return false;
		}
	}
	return a->minbytes <= a->maxbytes && a->factor >= 2 && a->iters >= 1 &&
	       a->warmup >= 0 && a->np >= 1 && a->rank < a->np &&
	       (a->rank < 0) == a->store.empty();
}

float value(int rank, size_t i)
{
	return static_cast<float>(1 + (i + 3 * static_cast<size_t>(rank)) % 5);
}

double now_s()
{
	using clock = std::chrono::steady_clock;
	return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

/* The maximum over ranks of a double. */
double max_over_ranks(const std::shared_ptr<gloo::Context> &ctx, double v)
{
	std::vector<double *> ptrs{ &v };
	gloo::AllreduceRing<double> max(ctx, ptrs, 1, gloo::ReductionFunction<double>::max);
	max.run();
	return v;
}

double sum_over_ranks(const std::shared_ptr<gloo::Context> &ctx, double v)
{
	std::vector<double *> ptrs{ &v };
	gloo::AllreduceRing<double> sum(ctx, ptrs, 1, gloo::ReductionFunction<double>::sum);
	sum.run();
	return v;
}

void print_header(int n, const Args &a)
{
	char host[256] = "?";
	gethostname(host, sizeof(host) - 1);
	printf("# gloo allreduce_ring_chunked: %d ranks on %s, transport tcp (gloo %d.%d.%d)\n", n,
	       host, GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
	printf("#  minBytes %zu maxBytes %zu step: %ld(factor) warmup iters: %d iters: %d "
	       "validation: %d\n",
	       a.minbytes, a.maxbytes, a.factor, a.warmup, a.iters, a.check);
	printf("#\n"
	       "#                                                              out-of-place"
	       "                       in-place\n"
	       "#       size         count      type   redop    root"
	       "     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
	       "#        (B)    (elements)                          "
	       "     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
	fflush(stdout);
}

int run_rank(int rank, const Args &a, const std::string &dir)
{
	gloo::rendezvous::FileStore store(dir);
	gloo::transport::tcp::attr attr(a.addr.c_str());
	auto dev = gloo::transport::tcp::CreateDevice(attr);
	auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, a.np);
	ctx->setTimeout(std::chrono::seconds(300));
	ctx->connectFullMesh(store, dev);
	int n = a.np;

	size_t maxcount = a.maxbytes / sizeof(float);
	void *mem = nullptr;
	if (posix_memalign(&mem, 4096, maxcount * sizeof(float) + 64) != 0)
		throw std::bad_alloc();
	float *buf = static_cast<float *>(mem);
	memset(buf, 0, maxcount * sizeof(float) + 64);

	if (rank == 0)
		print_header(n, a);
	gloo::BarrierAllToAll barrier(ctx);
	double bw = 0;
	int nbw = 0;
	double wrong_total = 0;
	for (size_t size = a.minbytes; size <= a.maxbytes; size *= static_cast<size_t>(a.factor)) {
		size_t count = size / sizeof(float);
		std::vector<float *> ptrs{ buf };
		gloo::AllreduceRingChunked<float> algo(ctx, ptrs, static_cast<int>(count));
		for (size_t i = 0; i < count; i++)
			buf[i] = value(rank, i);
		for (int i = 0; i < a.warmup; i++)
			algo.run();
		barrier.run();
		double t0 = now_s();
		for (int i = 0; i < a.iters; i++)
			algo.run();
		double us = max_over_ranks(ctx, (now_s() - t0) * 1e6 / a.iters);
		double algbw = static_cast<double>(count * sizeof(float)) / 1e9 / (us * 1e-6);
		double busbw = algbw * 2.0 * (n - 1) / n;
		bw += busbw;
		nbw++;
		double wrong = 0;
		if (a.check) {
			for (size_t i = 0; i < count; i++)
				buf[i] = value(rank, i);
			algo.run();
			for (size_t i = 0; i < count; i++) {
				float want = 0;
				for (int r = 0; r < n; r++)
					want += value(r, i);
				wrong += buf[i] != want;
			}
			wrong = sum_over_ranks(ctx, wrong);
			wrong_total += wrong;
		}
		if (rank == 0) {
			char t[32];
			if (us >= 10000.0)
				snprintf(t, sizeof(t), "%7.0f", us);
			else if (us >= 100.0)
				snprintf(t, sizeof(t), "%7.1f", us);
			else
				snprintf(t, sizeof(t), "%7.2f", us);
			printf("%12zu  %12zu  %8s  %6s  %6d  %7s  %6s  %6s  %5s  %7s  %6.2f  %6.2f",
			       count * sizeof(float), count, "float32", "sum", -1, "N/A", "N/A", "N/A",
			       "N/A", t, algbw, busbw);
			if (a.check)
				printf("  %5.0f\n", wrong);
			else
				printf("  %5s\n", "N/A");
			fflush(stdout);
		}
		if (size == 0)
			break;
	}
	if (rank == 0) {
		if (a.check)
			printf("# Out of bounds values : %.0f %s\n", wrong_total,
			       wrong_total > 0 ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g\n#\n", nbw ? bw / nbw : 0.0);
		fflush(stdout);
	}
	barrier.run();
	free(mem);
	return wrong_total > 0 ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	Args a;
	if (!parse_args(argc, argv, &a)) {
		fprintf(stderr, "usage: %s [--np N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] "
			"[-w WARMUP] [-c 0|1]\n"
			"       %s --rank R --np N --store DIR [--addr IP] [-b ...]\n", argv[0],
			argv[0]);
		return 2;
	}
	if (a.rank >= 0) {
		try {
			return run_rank(a.rank, a, a.store);
		} catch (const std::exception &e) {
			fprintf(stderr, "gloo rank %d: %s\n", a.rank, e.what());
			return 1;
		}
	}
	char dir[] = "/tmp/herd-gloo-XXXXXX";
	if (mkdtemp(dir) == nullptr) {
		perror("mkdtemp");
		return 1;
	}
	fflush(stdout);
	std::vector<pid_t> pids;
	for (int r = 0; r < a.np; r++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			break;
		}
		if (pid == 0) {
			int status = 1;
			try {
				status = run_rank(r, a, dir);
			} catch (const std::exception &e) {
				fprintf(stderr, "gloo rank %d: %s\n", r, e.what());
			}
			fflush(stdout);
			_exit(status);
		}
		pids.push_back(pid);
	}
	int failed = static_cast<int>(pids.size()) != a.np;
	for (pid_t pid : pids) {
		int st = 0;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	std::error_code ec;
	std::filesystem::remove_all(dir, ec);
	return failed;
}
