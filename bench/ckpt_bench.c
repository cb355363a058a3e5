/*
 * bench/ckpt_bench.c - checkpoint save and restore against dd and plain
 * reads of the same number of bytes on the same filesystem, in one run:
 *
 *   write     dd if=SRC of=DIR/dd.out bs=4M conv=fdatasync  (SRC: a file of
 *             the same random bytes as the state, read into the page cache
 *             first, so both write the same data)
 *             vs herd_ckpt_save of one tensor of those bytes (XXH3 sums)
 *   read      after dropping the page cache: read(2) of dd.out into the
 *             state's buffer 4 MiB at a time (the verdict: the same bytes
 *             into the same memory as the restore), and dd of it to
 *             /dev/null, shown for reference (dd reads every block into the
 *             same 4 MiB buffer, which stays in cache, and delivers the data
 *             nowhere: on this VM that alone makes it 10-30% faster than
 *             read(2) into 1 GiB of memory)
 *             vs herd_ckpt_restore of the step (every chunk verified)
 *   async     memcpy of the state into a buffer of its size, used for
 *             nothing else, so that it is written once a repeat as herd's
 *             staging memory is (on this VM a buffer that other work has
 *             just written takes a copy markedly faster than one that sat
 *             idle), vs the time herd_ckpt_save_async blocks its caller
 *             (staging as large as the state, kept between saves)
 *   device    with --device gpu (a build with CUDA): the same bytes in GPU
 *             memory, saved by herd_ckpt_save (staged to the host while
 *             the writer writes) beside dd's write, and restored into GPU
 *             memory (read and verified on the host, copied to the GPU
 *             while the next slab is read) beside read(2) into host
 *             memory: the target is the host restore's, 90%
 *   checksums herd_ckpt_save with XXH3 vs with no checksums, in wall time
 *             (the verdict: a synchronous save hashes on a helper thread
 *             beside the write, so the CPU time of the hashing is not time
 *             added to the save), and in user CPU time, shown for reference
 *             (the disk's noise does not blur it; on a disk whose speed
 *             changes from one write to the next, run the benchmark on a
 *             tmpfs as well to see the wall-time cost without that noise)
 *
 * Each measurement runs once per repeat, round-robin, after a warm-up
 * round; figures are medians over the repeats.  The page cache is dropped
 * (echo 3 > /proc/sys/vm/drop_caches, as root) before every read; where
 * that is not allowed the reads are from memory, and the output says so.
 * Writes start after sync(2).
 *
 * usage: bench_ckpt DIR [--bytes SIZE] [--repeats N] [--device host|gpu]
 *   DIR is created; the benchmark needs about 5 x SIZE bytes free on its
 *   filesystem and as much memory (bench/ckpt_compare.sh checks, and
 *   removes DIR afterwards).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>

#include "herd.h"
#if HERD_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

extern char **environ;

#define IO_BLOCK (4u << 20)
#define MAX_REPEATS 50

enum {
	T_DD_WRITE, T_SAVE, T_SAVE_NOSUM, T_SAVE_CPU, T_NOSUM_CPU, T_READ, T_DD_READ, T_RESTORE,
	T_MEMCPY, T_ASYNC_BLOCK, T_ASYNC_TOTAL, T_DEV_SAVE, T_DEV_RESTORE, T_COUNT
};

static const char *const t_names[T_COUNT] = {
	"dd_write", "save", "save_nosum", "save_user", "nosum_user", "read", "dd_read", "restore",
	"memcpy", "async_block", "async_total", "dev_save", "dev_restore"
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * User CPU seconds this process has used: the checksums' cost.  System
 * time is left out: it is the kernel's page cache work, the same with and
 * without checksums, and on this machine as noisy as the disk.
 */
static double cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_ckpt: %s\n", what);
	exit(1);
}

static void die_herd(const char *what)
{
	fprintf(stderr, "bench_ckpt: %s: %s\n", what, herd_last_error());
	exit(1);
}

/* "1G", "512M", "4096" */
static uint64_t parse_size(const char *s)
{
	uint64_t v = 0;

	if (herd_size_parse(s, &v) != HERD_OK || v == 0)
		die("--bytes takes a size such as 1G, 512M or a number of bytes");
	return v;
}

/* GPU memory for the device rows (--device gpu), or an exit saying why. */
static char *gpu_state(const char *state, uint64_t bytes)
{
#if HERD_BENCH_CUDA
	void *p = NULL;

	if (cudaMalloc(&p, bytes) != cudaSuccess ||
	    cudaMemcpy(p, state, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
		die("--device gpu: cannot put the state in GPU memory");
	return p;
#else
	(void)state;
	(void)bytes;
	die("--device gpu: this bench_ckpt was built without CUDA");
	return NULL;
#endif
}

/* Zeroes the GPU state, so that a restore must fill it. */
static void gpu_clear(char *dev, uint64_t bytes)
{
#if HERD_BENCH_CUDA
	if (cudaMemset(dev, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
		die("cudaMemset of the GPU state failed");
#else
	(void)dev;
	(void)bytes;
#endif
}

/* Whether the GPU state holds state's bytes (copied back through buf). */
static bool gpu_same(const char *dev, const char *state, char *buf, uint64_t bytes)
{
#if HERD_BENCH_CUDA
	if (cudaMemcpy(buf, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
		die("cudaMemcpy of the GPU state failed");
	return memcmp(buf, state, bytes) == 0;
#else
	(void)dev;
	(void)state;
	(void)buf;
	(void)bytes;
	return false;
#endif
}

/* Whether the page cache could be dropped. */
static bool drop_caches(void)
{
	int fd;
	bool ok;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return false;
	ok = write(fd, "3\n", 2) == 2;
	close(fd);
	return ok;
}

/*
 * Runs argv, returns its wall time; exits on failure.  posix_spawn, not
 * fork: a fork would mark every page of the state copy-on-write, and each
 * first write to it afterwards (the memcpy, the staging copy) would take
 * a page fault that has nothing to do with what is measured.
 */
static double run(char *const argv[])
{
	double t0 = now();
	int status;
	pid_t pid;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		die("cannot start dd");
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench_ckpt: %s failed\n", argv[0]);
		exit(1);
	}
	return now() - t0;
}

/* Reads path whole into buf (cap bytes), IO_BLOCK at a time. */
static double read_file(const char *path, char *buf, uint64_t bytes)
{
	double t0 = now();
	uint64_t at = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		die("cannot open a file to read");
	while (at < bytes) {
		size_t n = bytes - at < IO_BLOCK ? (size_t)(bytes - at) : IO_BLOCK;
		ssize_t r = read(fd, buf + at, n);

		if (r <= 0)
			die("short read");
		at += (uint64_t)r;
	}
	close(fd);
	return now() - t0;
}

static void write_file(const char *path, const char *buf, uint64_t bytes)
{
	uint64_t at = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		die("cannot create the source file");
	while (at < bytes) {
		size_t n = bytes - at < IO_BLOCK ? (size_t)(bytes - at) : IO_BLOCK;
		ssize_t w = write(fd, buf + at, n);

		if (w <= 0)
			die("cannot write the source file");
		at += (uint64_t)w;
	}
	if (fsync(fd) != 0)
		die("cannot fsync the source file");
	close(fd);
}

/* Removes a step directory (files only inside). */
static void remove_step(const char *dir, int64_t step)
{
	char path[4096], f[4400];
	struct dirent *e;
	DIR *d;

	if (snprintf(path, sizeof(path), "%s/step-%012" PRId64, dir, step) >= (int)sizeof(path))
		return;
	d = opendir(path);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		unlink(f);
	}
	closedir(d);
	rmdir(path);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_REPEATS];

	memcpy(s, v, (size_t)n * sizeof(double));
	qsort(s, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static herd_ckpt *open_ckpt(const char *dir, herd_ckpt_checksum sum, size_t staging,
			    char *state, uint64_t bytes)
{
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_ckpt *ck = NULL;
	uint64_t shape[1] = { bytes };

	o.checksum = sum;
	o.staging_bytes = staging;
	if (herd_ckpt_open(&ck, dir, NULL, &o) != HERD_OK)
		die_herd(dir);
	if (herd_ckpt_add_tensor(ck, "state", state, HERD_UINT8, 1, shape, NULL, NULL) != HERD_OK)
		die_herd("registering the state");
	return ck;
}

static const char *verdict(bool met)
{
	return met ? "met" : "MISSED";
}

int main(int argc, char **argv)
{
	uint64_t bytes = UINT64_C(1) << 30;
	int repeats = 5;
	const char *dir = NULL;
	char src[4096], ddout[4096], dsum[4096], dnosum[4096], dasync[4096], ddev[4096];
	char ddcount[64], ddof[4200], ddif[4200], ddread_if[4200];
	double t[T_COUNT][MAX_REPEATS], med[T_COUNT];
	herd_ckpt *ck_sum, *ck_nosum, *ck_async, *ck_dev = NULL;
	char *state, *copy, *target, *dev = NULL;
	bool dropped = true, gpu = false;
	int kinds, ncols;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc)
			bytes = parse_size(argv[++i]);
		else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
			repeats = atoi(argv[++i]);
		else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
			 (strcmp(argv[i + 1], "gpu") == 0 || strcmp(argv[i + 1], "host") == 0))
			gpu = strcmp(argv[++i], "gpu") == 0;
		else if (argv[i][0] != '-' && dir == NULL)
			dir = argv[i];
		else
			die("usage: bench_ckpt DIR [--bytes SIZE] [--repeats N] [--device host|gpu]");
	}
	/* with a GPU, a fourth writer and reader take turns with the others */
	kinds = gpu ? 4 : 3;
	ncols = gpu ? T_COUNT : T_DEV_SAVE;
	if (dir == NULL || repeats < 1 || repeats > MAX_REPEATS)
		die("usage: bench_ckpt DIR [--bytes SIZE] [--repeats N (1..50)]");
	if (bytes % IO_BLOCK != 0)
		die("--bytes must be a multiple of 4 MiB (dd's block)");
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die("cannot create DIR");
	snprintf(src, sizeof(src), "%s/src.bin", dir);
	snprintf(ddout, sizeof(ddout), "%s/dd.out", dir);
	snprintf(dsum, sizeof(dsum), "%s/ckpt-xxh3", dir);
	snprintf(dnosum, sizeof(dnosum), "%s/ckpt-none", dir);
	snprintf(dasync, sizeof(dasync), "%s/ckpt-async", dir);
	snprintf(ddev, sizeof(ddev), "%s/ckpt-gpu", dir);
	snprintf(ddcount, sizeof(ddcount), "count=%" PRIu64, bytes / IO_BLOCK);
	snprintf(ddif, sizeof(ddif), "if=%s", src);
	snprintf(ddof, sizeof(ddof), "of=%s", ddout);
	snprintf(ddread_if, sizeof(ddread_if), "if=%s", ddout);

	/* The state: random bytes (incompressible), and its copy target. */
	state = malloc(bytes);
	copy = malloc(bytes);
	target = malloc(bytes);
	if (state == NULL || copy == NULL || target == NULL)
		die("cannot allocate the state");
	for (uint64_t i = 0; i < bytes; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(state + i, &x, 8);
	}
	memset(copy, 1, bytes);
	memset(target, 1, bytes);
	write_file(src, state, bytes);

	ck_sum = open_ckpt(dsum, HERD_CKPT_CHECKSUM_XXH3, 0, state, bytes);
	ck_nosum = open_ckpt(dnosum, HERD_CKPT_CHECKSUM_NONE, 0, state, bytes);
	ck_async = open_ckpt(dasync, HERD_CKPT_CHECKSUM_XXH3, (size_t)bytes, state, bytes);
	if (gpu) {
		dev = gpu_state(state, bytes);
		ck_dev = open_ckpt(ddev, HERD_CKPT_CHECKSUM_XXH3, 0, dev, bytes);
	}

	printf("# bench_ckpt: %" PRIu64 " bytes (%.2f GiB) in %s, %d repeats after a warm-up "
	       "round\n", bytes, (double)bytes / (1 << 30), dir, repeats);
	printf("# seconds per run:\n# %-6s", "repeat");
	for (int k = 0; k < ncols; k++)
		printf(" %12s", t_names[k]);
	printf("\n");
	for (int r = -1; r < repeats; r++) {
		char *dd_write[] = { "dd", ddif, ddof, "bs=4M", ddcount, "conv=fdatasync",
				     "status=none", NULL };
		char *dd_read[] = { "dd", ddread_if, "of=/dev/null", "bs=4M", "status=none", NULL };
		int64_t step = r + 1;
		double v[T_COUNT] = { 0 }, t0;

		/* write: dd from the cached source, herd with and without sums;
		 * the order turns with the repeat, so that a disk that slows
		 * down after a burst of writes weighs on all three alike */
		read_file(src, copy, bytes);
		for (int j = 0; j < kinds; j++) {
			int which = (j + (r < 0 ? 0 : r)) % kinds;

			double c0;

			sync();
			t0 = now();
			c0 = cpu();
			if (which == 0) {
				run(dd_write);
				v[T_DD_WRITE] = now() - t0;
			} else if (which == 3) {
				if (herd_ckpt_save(ck_dev, step) != HERD_OK)
					die_herd("herd_ckpt_save of GPU memory");
				v[T_DEV_SAVE] = now() - t0;
			} else if (herd_ckpt_save(which == 1 ? ck_sum : ck_nosum, step) != HERD_OK) {
				die_herd("herd_ckpt_save");
			} else {
				v[which == 1 ? T_SAVE : T_SAVE_NOSUM] = now() - t0;
				v[which == 1 ? T_SAVE_CPU : T_NOSUM_CPU] = cpu() - c0;
			}
		}

		/* read: from the disk when the cache can be dropped; turning too */
		if (gpu)
			gpu_clear(dev, bytes);
		for (int j = 0; j < kinds; j++) {
			int which = (j + (r < 0 ? 0 : r)) % kinds;

			dropped &= drop_caches();
			t0 = now();
			if (which == 0) {
				read_file(ddout, copy, bytes);
				v[T_READ] = now() - t0;
			} else if (which == 3) {
				if (herd_ckpt_restore(ck_dev, step, NULL) != HERD_OK)
					die_herd("herd_ckpt_restore into GPU memory");
				v[T_DEV_RESTORE] = now() - t0;
			} else if (which == 1) {
				run(dd_read);
				v[T_DD_READ] = now() - t0;
			} else if (herd_ckpt_restore(ck_sum, step, NULL) != HERD_OK) {
				die_herd("herd_ckpt_restore");
			} else {
				v[T_RESTORE] = now() - t0;
			}
		}
		read_file(ddout, copy, bytes);
		if (memcmp(state, copy, bytes) != 0)
			die("the restored state differs from the bytes read back from dd's file");
		if (gpu && !gpu_same(dev, state, copy, bytes))
			die("the state restored into GPU memory differs from the saved bytes");

		/* async: a copy of the state vs the caller's wait */
		sync();
		t0 = now();
		memcpy(target, state, bytes);
		v[T_MEMCPY] = now() - t0;
		t0 = now();
		if (herd_ckpt_save_async(ck_async, step) != HERD_OK)
			die_herd("herd_ckpt_save_async");
		v[T_ASYNC_BLOCK] = now() - t0;
		if (herd_ckpt_wait(ck_async) != HERD_OK)
			die_herd("herd_ckpt_wait");
		v[T_ASYNC_TOTAL] = now() - t0;

		unlink(ddout);
		remove_step(dsum, step);
		remove_step(dnosum, step);
		remove_step(dasync, step);
		if (gpu)
			remove_step(ddev, step);
		if (r < 0)
			printf("# %-6s", "warmup");
		else
			printf("  %-6d", r + 1);
		for (int k = 0; k < T_COUNT; k++) {
			if (k < ncols)
				printf(" %12.4f", v[k]);
			if (r >= 0)
				t[k][r] = v[k];
		}
		printf("\n");
		fflush(stdout);
	}
	for (int k = 0; k < T_COUNT; k++)
		med[k] = median(t[k], repeats);
	{
		double gb = (double)bytes / 1e9;
		double plain = med[T_READ], rd_dd = med[T_DD_READ] / med[T_RESTORE];
		double w = med[T_DD_WRITE] / med[T_SAVE], rd = plain / med[T_RESTORE];
		double a = med[T_ASYNC_BLOCK] / med[T_MEMCPY];
		double c = (med[T_SAVE] - med[T_SAVE_NOSUM]) / med[T_SAVE];
		double cc = (med[T_SAVE_CPU] - med[T_NOSUM_CPU]) / med[T_SAVE];

		printf("# medians of %d repeats; page cache %s before reads\n", repeats,
		       dropped ? "dropped" : "NOT dropped (not root?): reads are from memory");
		printf("write      dd %.3f GB/s, herd save %.3f GB/s: %.1f%% of dd (target >= 90%%): "
		       "%s\n", gb / med[T_DD_WRITE], gb / med[T_SAVE], 100 * w, verdict(w >= 0.9));
		printf("read       plain read(2) %.3f GB/s, restore+verify %.3f GB/s: %.1f%% of plain "
		       "(target >= 90%%): %s; dd to /dev/null %.3f GB/s (restore %.1f%% of it)\n",
		       gb / plain, gb / med[T_RESTORE], 100 * rd, verdict(rd >= 0.9),
		       gb / med[T_DD_READ], 100 * rd_dd);
		printf("async      memcpy %.3f s, save_async blocks %.3f s: %.2fx (target <= 1.10x): "
		       "%s; whole async save %.3f s\n", med[T_MEMCPY], med[T_ASYNC_BLOCK], a,
		       verdict(a <= 1.1), med[T_ASYNC_TOTAL]);
		printf("checksums  save %.3f s with XXH3, %.3f s without: %.1f%% of save time "
		       "(target <= 10%%): %s; user CPU %.3f s with, %.3f s without (%.1f%% of the "
		       "save time, on another core)\n", med[T_SAVE], med[T_SAVE_NOSUM], 100 * c,
		       verdict(c <= 0.1), med[T_SAVE_CPU], med[T_NOSUM_CPU], 100 * cc);
		if (gpu) {
			double dw = med[T_DD_WRITE] / med[T_DEV_SAVE], dr = plain / med[T_DEV_RESTORE];

			printf("device     save from GPU memory %.3f GB/s: %.1f%% of dd's write; "
			       "restore+verify into GPU memory %.3f GB/s: %.1f%% of plain read(2) "
			       "(target >= 90%%): %s\n", gb / med[T_DEV_SAVE], 100 * dw,
			       gb / med[T_DEV_RESTORE], 100 * dr, verdict(dr >= 0.9));
		}
	}
	if (herd_ckpt_wait(ck_sum) != HERD_OK || herd_ckpt_wait(ck_nosum) != HERD_OK ||
	    herd_ckpt_wait(ck_async) != HERD_OK)
		die_herd("herd_ckpt_wait");
	herd_ckpt_free(ck_sum);
	herd_ckpt_free(ck_nosum);
	herd_ckpt_free(ck_async);
	herd_ckpt_free(ck_dev);
#if HERD_BENCH_CUDA
	if (dev != NULL)
		cudaFree(dev);
#endif
	unlink(src);
	free(state);
	free(copy);
	free(target);
	return 0;
}
