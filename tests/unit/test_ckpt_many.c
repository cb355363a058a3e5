/*
 * tests/unit/test_ckpt_many.c - checkpoints of many tensors and tensors of
 * many shards: 200,000 tensors registered, saved, restored and read back
 * by name; a duplicate name among them refused; manifests whose tensors
 * have tens of thousands of shards decoded, an overlap among them found,
 * and a layout built to defeat the overlap check's sort decoded in
 * bounded time; ranks whose shards overlap refused at save.  The counts
 * are large so that work quadratic in them would show: each case must end
 * well within a generous bound (a minute), where squared work takes many.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "comm_harness.h"

#include "ckpt/ckpt_internal.h"

static char root[256];

/* Far more than the cases need, far less than squared work takes. */
#define NO_HANG_MS 60000

/* ---- many tensors -------------------------------------------------------- */

enum { MANY = 200000 };

static void tensor_name(char *buf, size_t cap, size_t i)
{
	snprintf(buf, cap, "layers.%zu.weight", i);
}

static void test_ckpt_200k_tensors_save_restore_and_read_by_name(void)
{
	char dir[300], name[64];
	uint32_t *vals = calloc(MANY, sizeof(uint32_t));
	uint64_t one[1] = { 1 };
	herd_ckpt *ck = NULL;
	herd_ckpt_reader *r = NULL;
	int64_t t0 = now_ms(), got = -1;
	size_t wrong = 0, idx = 0;
	herd_status st = HERD_OK;
	uint32_t v = 0;

	CHECK(vals != NULL);
	if (vals == NULL)
		return;
	snprintf(dir, sizeof(dir), "%s/many", root);
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, NULL));
	for (size_t i = 0; i < MANY && ck != NULL && st == HERD_OK; i++) {
		vals[i] = (uint32_t)(i * 2654435761u);
		tensor_name(name, sizeof(name), i);
		st = herd_ckpt_add_tensor(ck, name, &vals[i], HERD_UINT32, 1, one, NULL, NULL);
	}
	CHECK_OK(st);
	/* A name already among them, as a tensor and as a blob. */
	tensor_name(name, sizeof(name), 12345);
	CHECK_ERR(herd_ckpt_add_tensor(ck, name, &v, HERD_UINT32, 1, one, NULL, NULL), HERD_EEXIST,
		  "\"layers.12345.weight\" is already registered");
	CHECK_ERR(herd_ckpt_add_blob(ck, name, &v, sizeof(v), HERD_CKPT_BLOB_RANK0), HERD_EEXIST,
		  "already registered");
	CHECK_OK(herd_ckpt_add_blob(ck, "rng", &v, sizeof(v), HERD_CKPT_BLOB_RANK0));
	CHECK_ERR(herd_ckpt_add_tensor(ck, "rng", &v, HERD_UINT32, 1, one, NULL, NULL),
		  HERD_EEXIST, "\"rng\" is already registered");
	CHECK_OK(herd_ckpt_save(ck, 7));
	memset(vals, 0, MANY * sizeof(uint32_t));
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	CHECK_INT(got, 7);
	for (size_t i = 0; i < MANY; i++)
		wrong += vals[i] != (uint32_t)(i * 2654435761u);
	CHECK_INT(wrong, 0);
	herd_ckpt_free(ck);

	/* The reader finds every tensor by name, at the index it lists. */
	CHECK_OK(herd_ckpt_reader_open(&r, dir, HERD_CKPT_LATEST));
	if (r != NULL) {
		CHECK_INT(herd_ckpt_reader_tensor_count(r), MANY);
		wrong = 0;
		for (size_t i = 0; i < MANY; i++) {
			herd_ckpt_tensor_info ti;

			if (herd_ckpt_reader_tensor(r, i, &ti) != HERD_OK ||
			    herd_ckpt_reader_find(r, ti.name, &idx) != HERD_OK || idx != i)
				wrong++;
		}
		CHECK_INT(wrong, 0);
		tensor_name(name, sizeof(name), MANY - 1);
		CHECK_OK(herd_ckpt_reader_read(r, name, &v, sizeof(v)));
		CHECK_INT(v, (uint32_t)((MANY - 1) * 2654435761u));
		CHECK_ERR(herd_ckpt_reader_find(r, "layers.x.weight", &idx), HERD_ENOTFOUND,
			  "no tensor \"layers.x.weight\"");
		herd_ckpt_reader_free(r);
	}
	CHECK(now_ms() - t0 < NO_HANG_MS);
	free(vals);
}

/* ---- tensors of many shards ---------------------------------------------- */

/*
 * A manifest of one uint8 tensor of the given shape in one file, with
 * nshards shards whose boxes the caller fills (len and at follow from
 * them, in order).  No checksums.
 */
static herd__ckpt_manifest *sharded_manifest(int ndim, const uint64_t *shape, size_t nshards)
{
	herd__ckpt_manifest *m = calloc(1, sizeof(*m));
	herd__ckpt_tensor *t;

	m->step = 1;
	m->ranks = 1;
	m->checksum = HERD_CKPT_CHECKSUM_NONE;
	m->chunk_bytes = 4096;
	m->nfiles = 1;
	m->files = calloc(1, sizeof(*m->files));
	m->files[0].name = strdup("rank-00000.data");
	m->ntensors = 1;
	m->tensors = t = calloc(1, sizeof(*m->tensors));
	t->name = strdup("w");
	t->dtype = HERD_UINT8;
	t->ndim = ndim;
	memcpy(t->shape, shape, sizeof(uint64_t) * (size_t)ndim);
	t->nshards = nshards;
	t->shards = calloc(nshards, sizeof(*t->shards));
	for (size_t i = 0; i < nshards; i++)
		t->shards[i].box.ndim = ndim;
	return m;
}

/* Sets every shard's len and at from its box, and the file's size. */
static void place_shards(herd__ckpt_manifest *m)
{
	herd__ckpt_tensor *t = &m->tensors[0];
	uint64_t at = 0;

	for (size_t i = 0; i < t->nshards; i++) {
		uint64_t vol = 0;

		herd__ckpt_volume(t->shards[i].box.shape, t->ndim, UINT64_MAX, &vol);
		t->shards[i].at = at;
		t->shards[i].len = vol;
		at += vol;
	}
	m->files[0].size = at;
}

/* Encodes m (and frees it), decodes it back; the status of the decode. */
static herd_status roundtrip(herd__ckpt_manifest *m, int64_t *ms)
{
	herd__ckpt_manifest *back = NULL;
	char *data = NULL;
	size_t len = 0;
	herd_status st;
	int64_t t0;

	place_shards(m);
	CHECK_OK(herd__ckpt_manifest_encode(m, &data, &len));
	herd__ckpt_manifest_free(m);
	t0 = now_ms();
	st = herd__ckpt_manifest_decode(&back, data, len, "many");
	*ms = now_ms() - t0;
	herd__ckpt_manifest_free(back);
	free(data);
	return st;
}

enum { SHARDS = 50000 };

/* One element per shard, shard i at i; spoil moves shard k onto k - 1. */
static herd__ckpt_manifest *row_shards(size_t spoil)
{
	uint64_t shape[1] = { SHARDS };
	herd__ckpt_manifest *m = sharded_manifest(1, shape, SHARDS);

	for (size_t i = 0; i < SHARDS; i++) {
		m->tensors[0].shards[i].box.offset[0] = i == spoil ? i - 1 : i;
		m->tensors[0].shards[i].box.shape[0] = 1;
	}
	return m;
}

/* A [2, SHARDS] tensor cut into columns: shard i holds column i. */
static herd__ckpt_manifest *column_shards(size_t spoil)
{
	uint64_t shape[2] = { 2, SHARDS };
	herd__ckpt_manifest *m = sharded_manifest(2, shape, SHARDS);

	for (size_t i = 0; i < SHARDS; i++) {
		m->tensors[0].shards[i].box.offset[1] = i == spoil ? i - 1 : i;
		m->tensors[0].shards[i].box.shape[0] = 2;
		m->tensors[0].shards[i].box.shape[1] = 1;
	}
	return m;
}

static void test_ckpt_manifest_overlap_found_among_50k_shards(void)
{
	int64_t ms = 0;

	CHECK_OK(roundtrip(row_shards(SIZE_MAX), &ms));
	CHECK(ms < NO_HANG_MS);
	/* Volumes still add up: only the overlap check sees it. */
	CHECK_ERR(roundtrip(row_shards(30001), &ms), HERD_EFORMAT,
		  "many: tensors[0].shards: shards 30000 and 30001 overlap");
	CHECK(ms < NO_HANG_MS);
	CHECK_OK(roundtrip(column_shards(SIZE_MAX), &ms));
	CHECK_ERR(roundtrip(column_shards(40000), &ms), HERD_EFORMAT,
		  "shards 39999 and 40000 overlap");
	CHECK(ms < NO_HANG_MS);
}

/*
 * A tiling no sort along one dimension takes apart: a [N, N, 2] tensor
 * whose layer 0 is cut into N columns along dimension 1 and layer 1 into
 * N rows along dimension 0.  Every box meets N others along either
 * dimension; the check's budget bounds the work, and the manifest, which
 * is valid, decodes.
 */
static void test_ckpt_manifest_adversarial_tiling_decodes_in_bounded_time(void)
{
	enum { N = 8192 };
	uint64_t shape[3] = { N, N, 2 };
	herd__ckpt_manifest *m = sharded_manifest(3, shape, 2 * N);
	herd__ckpt_shard *s = m->tensors[0].shards;
	int64_t ms = 0;

	for (size_t i = 0; i < N; i++) {
		s[i].box.offset[1] = i;
		s[i].box.shape[0] = N;
		s[i].box.shape[1] = 1;
		s[i].box.shape[2] = 1;
		s[N + i].box.offset[0] = i;
		s[N + i].box.offset[2] = 1;
		s[N + i].box.shape[0] = 1;
		s[N + i].box.shape[1] = N;
		s[N + i].box.shape[2] = 1;
	}
	CHECK_OK(roundtrip(m, &ms));
	CHECK(ms < NO_HANG_MS);
}

/* ---- ranks whose shards overlap ------------------------------------------ */

typedef struct overlap_arg {
	char dir[300];
	char scope[96];
} overlap_arg;

/* Ranks 0 and 1 hold [0, 4) and [2, 6) of 8 elements, rank 2 [6, 8). */
static void overlapping_rank(int rank, int size, void *arg)
{
	overlap_arg *a = arg;
	static const uint64_t off[3] = { 0, 2, 6 }, len[3] = { 4, 4, 2 };
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;
	uint64_t g[1] = { 8 }, o[1] = { off[rank] }, n[1] = { len[rank] };
	float x[4] = { 0 };

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, a->dir, comm, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_FLOAT32, 1, g, o, n));
	CHECK_ERR(herd_ckpt_save(ck, 1), HERD_EINVAL,
		  "tensor \"x\": the shards of ranks 0 and 1 overlap without being equal");
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_ckpt_ranks_with_overlapping_shards_cannot_save(void)
{
	overlap_arg a;

	memset(&a, 0, sizeof(a));
	snprintf(a.dir, sizeof(a.dir), "%s/overlap", root);
	harness_scope(a.scope, sizeof(a.scope), "ckpt-overlap");
	CHECK_INT(run_ranks(3, overlapping_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
}

int main(void)
{
	char cmd[300];

	snprintf(root, sizeof(root), "/tmp/herd-ckpt-many.XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	harness_start();
	TEST_RUN(test_ckpt_200k_tensors_save_restore_and_read_by_name);
	TEST_RUN(test_ckpt_manifest_overlap_found_among_50k_shards);
	TEST_RUN(test_ckpt_manifest_adversarial_tiling_decodes_in_bounded_time);
	TEST_RUN(test_ckpt_ranks_with_overlapping_shards_cannot_save);
	harness_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (test_failures == 0 && system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
	return TEST_DONE();
}
