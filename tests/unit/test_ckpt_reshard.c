/*
 * tests/unit/test_ckpt_reshard.c - a checkpoint saved by 4 ranks (a row
 * sharding, a 2-D block sharding and a replicated tensor) restores onto 2,
 * 3 and 8 ranks that shard the same global tensors differently, and reads
 * whole from a single process.  Every element is a function of its global
 * index, so each rank checks exactly what it holds.
 */
#include "comm_harness.h"

enum { AR = 12, AC = 5, BR = 8, BC = 6, CN = 7 };

static char dir[256];
static char scope[64];

static float a_value(uint64_t i) { return (float)i * 1.5f + 0.25f; }
static double b_value(uint64_t i) { return (double)i * 0.001 + 7.0; }
static int32_t c_value(uint64_t i) { return (int32_t)(i * 11); }

/* The part of n items that rank r of size gets: lengths differ by at most one. */
static void split(uint64_t n, int r, int size, uint64_t *off, uint64_t *len)
{
	uint64_t base = n / (uint64_t)size, extra = n % (uint64_t)size;

	*off = (uint64_t)r * base + ((uint64_t)r < extra ? (uint64_t)r : extra);
	*len = base + ((uint64_t)r < extra ? 1 : 0);
}

static void saver(int rank, int size, void *arg)
{
	uint64_t ag[2] = { AR, AC }, ao[2] = { (uint64_t)rank * 3, 0 }, as[2] = { 3, AC };
	uint64_t bg[2] = { BR, BC }, bo[2] = { (uint64_t)(rank / 2) * 4, (uint64_t)(rank % 2) * 3 };
	uint64_t bs[2] = { 4, 3 }, cg[1] = { CN };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	float a[3 * AC];
	double b[4 * 3];
	int32_t c[CN];
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;

	(void)arg;
	for (uint64_t i = 0; i < 3; i++)
		for (uint64_t j = 0; j < AC; j++)
			a[i * AC + j] = a_value((ao[0] + i) * AC + j);
	for (uint64_t i = 0; i < 4; i++)
		for (uint64_t j = 0; j < 3; j++)
			b[i * 3 + j] = b_value((bo[0] + i) * BC + bo[1] + j);
	for (uint64_t i = 0; i < CN; i++)
		c[i] = c_value(i);
	o.staging_bytes = 40;       /* pieces smaller than a shard */
	o.chunk_bytes = 4096;
	CHECK_OK(harness_comm(&comm, scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, dir, comm, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "a.rows", a, HERD_FLOAT32, 2, ag, ao, as));
	CHECK_OK(herd_ckpt_add_tensor(ck, "b.blocks", b, HERD_FLOAT64, 2, bg, bo, bs));
	CHECK_OK(herd_ckpt_add_tensor(ck, "c.replicated", c, HERD_INT32, 1, cg, NULL, NULL));
	CHECK_OK(herd_ckpt_save_async(ck, 100));
	/* The state may change once save_async returns. */
	memset(a, 0, sizeof(a));
	CHECK_OK(herd_ckpt_wait(ck));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

/* Restores with rows of a and columns of b split over size ranks. */
static void restorer(int rank, int size, void *arg)
{
	uint64_t ag[2] = { AR, AC }, ao[2] = { 0, 0 }, as[2] = { 0, AC };
	uint64_t bg[2] = { BR, BC }, bo[2] = { 0, 0 }, bs[2] = { BR, 0 }, cg[1] = { CN };
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;
	float *a;
	double *b;
	int32_t c[CN];
	int64_t got = -1;

	(void)arg;
	split(AR, rank, size, &ao[0], &as[0]);
	split(BC, rank, size, &bo[1], &bs[1]);
	a = calloc(as[0] * AC + 1, sizeof(float));
	b = calloc(BR * bs[1] + 1, sizeof(double));
	memset(c, 0, sizeof(c));
	CHECK_OK(harness_comm(&comm, scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, dir, comm, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "a.rows", a, HERD_FLOAT32, 2, ag, ao, as));
	CHECK_OK(herd_ckpt_add_tensor(ck, "b.blocks", b, HERD_FLOAT64, 2, bg, bo, bs));
	CHECK_OK(herd_ckpt_add_tensor(ck, "c.replicated", c, HERD_INT32, 1, cg, NULL, NULL));
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	CHECK_INT(got, 100);
	for (uint64_t i = 0; i < as[0]; i++)
		for (uint64_t j = 0; j < AC; j++)
			if (a[i * AC + j] != a_value((ao[0] + i) * AC + j)) {
				TEST_FAIL_("rank %d/%d: a[%" PRIu64 "][%" PRIu64 "] = %g", rank, size,
					   ao[0] + i, j, (double)a[i * AC + j]);
				goto out;
			}
	for (uint64_t i = 0; i < BR; i++)
		for (uint64_t j = 0; j < bs[1]; j++)
			if (b[i * bs[1] + j] != b_value(i * BC + bo[1] + j)) {
				TEST_FAIL_("rank %d/%d: b[%" PRIu64 "][%" PRIu64 "] = %g", rank, size, i,
					   bo[1] + j, b[i * bs[1] + j]);
				goto out;
			}
	for (uint64_t i = 0; i < CN; i++)
		CHECK_INT(c[i], c_value(i));
out:
	test_checks++;
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
	free(a);
	free(b);
}

static void test_ckpt_saved_by_4_restores_onto_2_3_and_8_ranks(void)
{
	int sizes[] = { 2, 3, 8, 4 };

	harness_scope(scope, sizeof(scope), "ckpt-reshard");
	CHECK_INT(run_ranks(4, saver, NULL, 60000, NULL, NULL, 0, NULL), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		harness_scope(scope, sizeof(scope), "ckpt-reshard");
		CHECK_INT(run_ranks(sizes[i], restorer, NULL, 60000, NULL, NULL, 0, NULL), 0);
	}
}

static void test_ckpt_reader_assembles_global_tensors(void)
{
	herd_ckpt_reader *r = NULL;
	herd_ckpt_tensor_info info;
	float a[AR * AC];
	double b[BR * BC];
	size_t idx = 9;

	CHECK_OK(herd_ckpt_reader_open(&r, dir, 100));
	if (r == NULL)
		return;
	CHECK_INT(herd_ckpt_reader_ranks(r), 4);
	CHECK_OK(herd_ckpt_reader_find(r, "b.blocks", &idx));
	CHECK_INT(idx, 1);
	CHECK_OK(herd_ckpt_reader_tensor(r, idx, &info));
	CHECK_INT(info.shards, 4);
	CHECK_OK(herd_ckpt_reader_tensor(r, 2, &info));
	CHECK_INT(info.shards, 1);     /* the replicated tensor is written once */
	CHECK_OK(herd_ckpt_reader_read(r, "a.rows", a, sizeof(a)));
	CHECK_OK(herd_ckpt_reader_read(r, "b.blocks", b, sizeof(b)));
	for (uint64_t i = 0; i < AR * AC; i++)
		if (a[i] != a_value(i)) {
			TEST_FAIL_("a[%" PRIu64 "] = %g", i, (double)a[i]);
			break;
		}
	for (uint64_t i = 0; i < BR * BC; i++)
		if (b[i] != b_value(i)) {
			TEST_FAIL_("b[%" PRIu64 "] = %g", i, b[i]);
			break;
		}
	herd_ckpt_reader_free(r);
	CHECK_OK(herd_ckpt_verify(dir, 100, NULL, NULL, NULL));
}

int main(void)
{
	char cmd[300];

	snprintf(dir, sizeof(dir), "/tmp/herd-ckpt-reshard.XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	harness_start();
	TEST_RUN(test_ckpt_saved_by_4_restores_onto_2_3_and_8_ranks);
	TEST_RUN(test_ckpt_reader_assembles_global_tensors);
	harness_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (test_failures == 0 && system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return TEST_DONE();
}
