/*
 * tests/unit/test_ckpt_basic.c - checkpoints in one process and across
 * real ranks: round trips of every dtype, blobs and their world-size rules,
 * asynchronous saves with staging smaller than the state, retention, the
 * read-only tools (list, verify, reader), corruption of a data file and of
 * a manifest, and hostile manifests.
 */
#include <dirent.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ckpt_test_files.h"
#include "comm_harness.h"

#include "ckpt/ckpt_internal.h"

static char root[256];

static void make_dir(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", root, name);
}

/* ---- round trips -------------------------------------------------------- */

static void test_ckpt_roundtrip_every_dtype_bit_exact(void)
{
	enum { N = HERD_DTYPE_COUNT };
	uint64_t shape[2] = { 37, 129 };
	void *data[N], *want[N];
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_ckpt *ck = NULL;
	char dir[300];
	int64_t got = -1;

	make_dir(dir, sizeof(dir), "dtypes");
	o.chunk_bytes = 4096;    /* many chunks per tensor */
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	for (int t = 0; t < N; t++) {
		size_t bytes = 37 * 129 * herd_dtype_size((herd_dtype)t);
		char name[32];

		data[t] = malloc(bytes);
		want[t] = malloc(bytes);
		test_fill_bytes(want[t], bytes, (uint64_t)t + 1);
		memcpy(data[t], want[t], bytes);
		snprintf(name, sizeof(name), "w.%s", herd_dtype_name((herd_dtype)t));
		CHECK_OK(herd_ckpt_add_tensor(ck, name, data[t], (herd_dtype)t, 2, shape, NULL, NULL));
	}
	CHECK_OK(herd_ckpt_save(ck, 7));
	for (int t = 0; t < N; t++)
		memset(data[t], 0, 37 * 129 * herd_dtype_size((herd_dtype)t));
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	CHECK_INT(got, 7);
	for (int t = 0; t < N; t++)
		CHECK(memcmp(data[t], want[t], 37 * 129 * herd_dtype_size((herd_dtype)t)) == 0);
	CHECK_ERR(herd_ckpt_save(ck, 7), HERD_EEXIST, "already committed");
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);

	/* The read-only view sees the same. */
	{
		herd_ckpt_reader *r = NULL;
		herd_ckpt_tensor_info info;
		size_t problems = 9;
		int64_t latest = -1;

		CHECK_OK(herd_ckpt_latest(dir, &latest));
		CHECK_INT(latest, 7);
		CHECK_OK(herd_ckpt_verify(dir, HERD_CKPT_LATEST, NULL, NULL, &problems));
		CHECK_INT(problems, 0);
		CHECK_OK(herd_ckpt_reader_open(&r, dir, HERD_CKPT_LATEST));
		if (r != NULL) {
			CHECK_INT(herd_ckpt_reader_step(r), 7);
			CHECK_INT(herd_ckpt_reader_ranks(r), 1);
			CHECK_INT(herd_ckpt_reader_tensor_count(r), N);
			CHECK_OK(herd_ckpt_reader_tensor(r, 8, &info));
			CHECK_STR(info.name, "w.float32");
			CHECK_INT(info.dtype, HERD_FLOAT32);
			CHECK_INT(info.ndim, 2);
			CHECK_INT(info.shape[1], 129);
			CHECK_INT(info.bytes, 37 * 129 * 4);
			CHECK_INT(info.shards, 1);
			memset(data[8], 0, 37 * 129 * 4);
			CHECK_OK(herd_ckpt_reader_read(r, "w.float32", data[8], 37 * 129 * 4));
			CHECK(memcmp(data[8], want[8], 37 * 129 * 4) == 0);
			CHECK_ERR(herd_ckpt_reader_read(r, "w.float32", data[8], 10), HERD_EINVAL,
				  "bytes");
			CHECK_ERR(herd_ckpt_reader_read(r, "nope", data[8], 10), HERD_ENOTFOUND, "nope");
			herd_ckpt_reader_free(r);
		}
	}
	for (int t = 0; t < N; t++) {
		free(data[t]);
		free(want[t]);
	}
}

static void test_ckpt_add_rejects_bad_registrations(void)
{
	uint64_t g[2] = { 4, 4 }, off[2] = { 2, 0 }, sh[2] = { 3, 4 };
	float x[16];
	uint8_t b[4];
	herd_ckpt *ck = NULL;
	char dir[300];

	make_dir(dir, sizeof(dir), "bad_add");
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, NULL));
	CHECK_ERR(herd_ckpt_add_tensor(ck, "w", x, HERD_FLOAT32, 2, g, off, sh), HERD_EINVAL,
		  "dimension 0");
	CHECK_ERR(herd_ckpt_add_tensor(ck, "", x, HERD_FLOAT32, 2, g, NULL, NULL), HERD_EINVAL,
		  "printable");
	CHECK_ERR(herd_ckpt_add_tensor(ck, "w", x, HERD_FLOAT32, 9, g, NULL, NULL), HERD_EINVAL,
		  "ndim");
	/* A global size over 2^48 says that is the limit. */
	CHECK_ERR(herd_ckpt_add_tensor(ck, "huge", x, HERD_FLOAT32, 2,
				       (uint64_t[]){ 4, (UINT64_C(1) << 48) + 1 },
				       (uint64_t[]){ 0, 0 }, (uint64_t[]){ 1, 1 }), HERD_EINVAL,
		  "dimension 1: the global size 281474976710657 is over the limit of 2^48 "
		  "(281474976710656)");
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", x, HERD_FLOAT32, 2, g, NULL, NULL));
	CHECK_ERR(herd_ckpt_add_blob(ck, "w", b, sizeof(b), HERD_CKPT_BLOB_RANK0), HERD_EEXIST,
		  "already registered");
	CHECK_ERR(herd_ckpt_add_blob(ck, "b", b, 0, HERD_CKPT_BLOB_RANK0), HERD_EINVAL, "blob");
	/* A shard that does not cover its tensor alone cannot be saved. */
	CHECK_OK(herd_ckpt_add_tensor(ck, "part", x, HERD_FLOAT32, 2, g, (uint64_t[]){ 0, 0 },
				      (uint64_t[]){ 2, 4 }));
	CHECK_ERR(herd_ckpt_save(ck, 1), HERD_EINVAL, "cover 8 of its 16 elements");
	CHECK_ERR(herd_ckpt_latest(dir, &(int64_t){ 0 }), HERD_ENOTFOUND, "no committed");
	CHECK_INT(count_dir(dir), 0);   /* the failed save left nothing */
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_ERR(herd_ckpt_open(&ck, "", NULL, NULL), HERD_EINVAL, "empty");
}

/* A symbolic link or a plain file named like a step or a temporary step is
 * not herd's: open's sweep and retention leave it alone and are not
 * blocked by it, and listings do not take it for a step. */
static void test_ckpt_leaves_what_it_did_not_make_alone(void)
{
	char dir[300], elsewhere[300], link0[400], linkdel[400], tmpfile[400], keep[400];
	float x[4] = { 1, 2, 3, 4 };
	uint64_t g[1] = { 4 };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_ckpt_step_info *info = NULL;
	herd_ckpt *ck = NULL;
	struct stat sb;
	size_t n = 0;
	int64_t latest = -1;
	FILE *f;

	make_dir(dir, sizeof(dir), "not_ours");
	make_dir(elsewhere, sizeof(elsewhere), "elsewhere");
	CHECK(mkdir(dir, 0755) == 0 && mkdir(elsewhere, 0755) == 0);
	snprintf(keep, sizeof(keep), "%s/precious", elsewhere);
	f = fopen(keep, "w");
	CHECK(f != NULL && fputs("mine\n", f) >= 0 && fclose(f) == 0);
	snprintf(link0, sizeof(link0), "%s/step-000000000000", dir);
	snprintf(linkdel, sizeof(linkdel), "%s/.del-step-000000000003.1", dir);
	snprintf(tmpfile, sizeof(tmpfile), "%s/.tmp-step-000000000009.1", dir);
	CHECK(symlink(elsewhere, link0) == 0 && symlink(elsewhere, linkdel) == 0);
	f = fopen(tmpfile, "w");
	CHECK(f != NULL && fclose(f) == 0);

	o.keep_last = 1;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_FLOAT32, 1, g, NULL, NULL));
	for (int64_t step = 1; step <= 3; step++)
		CHECK_OK(herd_ckpt_save(ck, step));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	/* Reopened: the sweep is not blocked either. */
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &latest));
	CHECK_INT(latest, 3);
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK(lstat(link0, &sb) == 0 && S_ISLNK(sb.st_mode));
	CHECK(lstat(linkdel, &sb) == 0 && S_ISLNK(sb.st_mode));
	CHECK(lstat(tmpfile, &sb) == 0 && S_ISREG(sb.st_mode));
	CHECK(stat(keep, &sb) == 0 && sb.st_size == 5);
	CHECK_OK(herd_ckpt_list(dir, &info, &n));
	CHECK_INT(n, 1);
	if (n == 1)
		CHECK(info[0].step == 3 && info[0].committed && info[0].files_ok);
	herd_free(info);
}

/* ---- asynchronous saves ----------------------------------------------- */

static void test_ckpt_async_stages_in_pieces_and_second_save_waits(void)
{
	enum { ROWS = 1000, COLS = 700 };    /* 2.8 MB of float32 */
	uint64_t g[2] = { ROWS, COLS };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	float *x = malloc(sizeof(float) * ROWS * COLS);
	float *first = malloc(sizeof(float) * ROWS * COLS);
	uint64_t counter = 0;
	herd_ckpt *ck = NULL;
	int64_t got = -1;
	char dir[300];

	make_dir(dir, sizeof(dir), "async");
	o.staging_bytes = 64 * 1024;    /* far smaller than the state */
	o.chunk_bytes = 16384;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_FLOAT32, 2, g, NULL, NULL));
	CHECK_OK(herd_ckpt_add_blob(ck, "counter", &counter, sizeof(counter),
				    HERD_CKPT_BLOB_SAME_RANK));
	test_fill_bytes(x, sizeof(float) * ROWS * COLS, 1);
	counter = 1;
	memcpy(first, x, sizeof(float) * ROWS * COLS);
	CHECK_OK(herd_ckpt_save_async(ck, 1));
	/* Returned: every byte is staged, so the program may change its state. */
	test_fill_bytes(x, sizeof(float) * ROWS * COLS, 2);
	counter = 2;
	CHECK_ERR(herd_ckpt_add_blob(ck, "late", &counter, 8, HERD_CKPT_BLOB_RANK0), HERD_EBUSY,
		  "in flight");
	/* A second save while the first is in flight waits for it. */
	CHECK_OK(herd_ckpt_save_async(ck, 2));
	CHECK_OK(herd_ckpt_wait(ck));
	CHECK_OK(herd_ckpt_wait(ck));   /* nothing in flight: OK */
	{
		herd_ckpt_reader *r = NULL;
		float *tmp = malloc(sizeof(float) * ROWS * COLS);
		uint64_t c = 0;
		size_t len = 0;

		CHECK_OK(herd_ckpt_reader_open(&r, dir, 1));
		if (r != NULL) {
			CHECK_OK(herd_ckpt_reader_read(r, "x", tmp, sizeof(float) * ROWS * COLS));
			CHECK(memcmp(tmp, first, sizeof(float) * ROWS * COLS) == 0);
			CHECK_OK(herd_ckpt_reader_read_blob(r, "counter", 0, &c, sizeof(c), &len));
			CHECK_INT(c, 1);
			CHECK_INT(len, 8);
			herd_ckpt_reader_free(r);
		}
		free(tmp);
	}
	memcpy(first, x, sizeof(float) * ROWS * COLS);
	memset(x, 0, sizeof(float) * ROWS * COLS);
	counter = 0;
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	CHECK_INT(got, 2);
	CHECK_INT(counter, 2);
	CHECK(memcmp(x, first, sizeof(float) * ROWS * COLS) == 0);
	CHECK_OK(herd_ckpt_verify(dir, 1, NULL, NULL, NULL));
	CHECK_OK(herd_ckpt_verify(dir, 2, NULL, NULL, NULL));
	/* close joins a save in flight. */
	CHECK_OK(herd_ckpt_save_async(ck, 3));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_ckpt_verify(dir, 3, NULL, NULL, NULL));
	free(x);
	free(first);
}

/*
 * The writer of a save, held inside its first pwrite: while hold_writes is
 * set, the next pwrite of this program says so on writer_held and waits
 * for writes_may_go.  Every other pwrite goes straight to the kernel.
 */
static atomic_bool hold_writes;
static sem_t writer_held, writes_may_go;

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (atomic_exchange(&hold_writes, false)) {
		sem_post(&writer_held);
		sem_wait(&writes_may_go);
	}
	return (ssize_t)syscall(SYS_pwrite64, fd, buf, n, off);
}

/* An asynchronous save aborted while its writer writes: not committed,
 * nothing of it left, the steps before it intact, the next save fine. */
static void test_ckpt_abort_stops_a_save_in_flight(void)
{
	enum { N = 300000 };
	uint64_t g[1] = { N };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	float *x = malloc(sizeof(float) * N);
	herd_ckpt *ck = NULL;
	herd_ckpt_step_info *steps = NULL;
	size_t nsteps = 0;
	int64_t latest = -1;
	char dir[300];

	make_dir(dir, sizeof(dir), "abort");
	CHECK(x != NULL && sem_init(&writer_held, 0, 0) == 0 &&
	      sem_init(&writes_may_go, 0, 0) == 0);
	if (x == NULL)
		return;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	if (ck == NULL)
		goto out;
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_FLOAT32, 1, g, NULL, NULL));
	test_fill_bytes(x, sizeof(float) * N, 3);
	CHECK_ERR(herd_ckpt_abort(NULL), HERD_EINVAL, "ck is NULL");
	CHECK_OK(herd_ckpt_abort(ck));     /* nothing in flight: nothing happens */
	CHECK_OK(herd_ckpt_save(ck, 4));
	atomic_store(&hold_writes, true);
	CHECK_OK(herd_ckpt_save_async(ck, 5));
	sem_wait(&writer_held);
	CHECK_OK(herd_ckpt_abort(ck));
	sem_post(&writes_may_go);
	CHECK_ERR(herd_ckpt_wait(ck), HERD_EABORTED, "step 5 was aborted after");
	CHECK_OK(herd_ckpt_latest(dir, &latest));
	CHECK_INT(latest, 4);
	CHECK_OK(herd_ckpt_list(dir, &steps, &nsteps));
	CHECK_INT(nsteps, 1);
	herd_free(steps);
	{
		/* no temporary directory of step 5 left behind */
		DIR *d = opendir(dir);
		struct dirent *e;
		int others = 0;

		while (d != NULL && (e = readdir(d)) != NULL)
			others += strstr(e->d_name, "000000000005") != NULL;
		if (d != NULL)
			closedir(d);
		CHECK_INT(others, 0);
	}
	CHECK_OK(herd_ckpt_save(ck, 6));
	CHECK_OK(herd_ckpt_verify(dir, 6, NULL, NULL, NULL));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
out:
	sem_destroy(&writer_held);
	sem_destroy(&writes_may_go);
	free(x);
}

/* ---- retention ---------------------------------------------------------- */

static void test_ckpt_retention_keeps_last_n_and_every_kth(void)
{
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_ckpt_step_info *info = NULL;
	uint64_t g[1] = { 100 };
	int32_t x[100];
	herd_ckpt *ck = NULL;
	size_t n = 0;
	char dir[300];
	int64_t want[] = { 0, 5, 10, 11, 12 };

	make_dir(dir, sizeof(dir), "retention");
	o.keep_last = 2;
	o.keep_every = 5;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_INT32, 1, g, NULL, NULL));
	for (int s = 0; s <= 12; s++) {
		for (int i = 0; i < 100; i++)
			x[i] = s * 1000 + i;
		CHECK_OK(herd_ckpt_save(ck, s));
	}
	CHECK_OK(herd_ckpt_list(dir, &info, &n));
	CHECK_INT(n, 5);
	for (size_t i = 0; i < n && i < 5; i++) {
		CHECK_INT(info[i].step, want[i]);
		CHECK(info[i].committed);
		CHECK(info[i].manifest_ok);
		CHECK_INT(info[i].ranks, 1);
		CHECK_INT(info[i].tensors, 1);
		CHECK(info[i].bytes > 400);
	}
	herd_free(info);
	CHECK_OK(herd_ckpt_restore(ck, 5, NULL));
	CHECK_INT(x[7], 5007);
	CHECK_ERR(herd_ckpt_restore(ck, 3, NULL), HERD_ENOTFOUND, "step-000000000003");
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
}

/* ---- corruption --------------------------------------------------------- */

typedef struct corrupt_case {
	herd_ckpt *ck;
	int64_t got;
	herd_status st;
} corrupt_case;

static void restore_latest(void *arg)
{
	corrupt_case *c = arg;

	c->st = herd_ckpt_restore(c->ck, HERD_CKPT_LATEST, &c->got);
}

typedef struct seen {
	int n;
	char file[64], tensor[64], message[256];
	int64_t chunk;
} seen;

static void on_problem(void *arg, const herd_ckpt_problem *p)
{
	seen *s = arg;

	if (s->n++ > 0)
		return;
	herd__strlcpy(s->file, p->file, sizeof(s->file));
	herd__strlcpy(s->tensor, p->tensor != NULL ? p->tensor : "", sizeof(s->tensor));
	herd__strlcpy(s->message, p->message, sizeof(s->message));
	s->chunk = p->chunk;
}

static void test_ckpt_corruption_is_named_and_restore_falls_back(void)
{
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	uint64_t g[1] = { 10000 };
	float x[10000];
	herd_ckpt *ck = NULL;
	char dir[300], path[400], err[4096];
	corrupt_case c;
	seen s;

	make_dir(dir, sizeof(dir), "corrupt");
	o.chunk_bytes = 4096;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "weights", x, HERD_FLOAT32, 1, g, NULL, NULL));
	for (int step = 1; step <= 3; step++) {
		for (int i = 0; i < 10000; i++)
			x[i] = (float)(step * 100000 + i);
		CHECK_OK(herd_ckpt_save(ck, step));
	}
	/* One byte of step 3's data, in its third chunk. */
	snprintf(path, sizeof(path), "%s/step-000000000003/rank-00000.data", dir);
	ckpt_test_flip_byte(path, 2 * 4096 + 17);
	memset(&s, 0, sizeof(s));
	CHECK_ERR(herd_ckpt_verify(dir, 3, on_problem, &s, NULL), HERD_EFORMAT,
		  "\"weights\" shard 0 chunk 2");
	CHECK(strstr(herd_last_error(), "step-000000000003/rank-00000.data: \"weights\" shard 0 "
		     "chunk 2 (byte 8192 of the file): checksum mismatch") != NULL);
	CHECK_INT(s.n, 1);
	CHECK_STR(s.file, "rank-00000.data");
	CHECK_STR(s.tensor, "weights");
	CHECK_INT(s.chunk, 2);
	CHECK(strstr(s.message, "checksum mismatch") != NULL);
	memset(x, 0, sizeof(x));
	c.ck = ck;
	ckpt_test_capture_stderr(root, restore_latest, &c, err, sizeof(err));
	CHECK_OK(c.st);
	CHECK_INT(c.got, 2);
	CHECK(x[9999] == 209999.0f && x[0] == 200000.0f);
	CHECK(strstr(err, "restoring checkpoint step 3") != NULL);
	CHECK(strstr(err, "chunk 2") != NULL);
	CHECK(strstr(err, "trying the step before") != NULL);

	/* One byte of step 2's manifest. */
	snprintf(path, sizeof(path), "%s/step-000000000002/manifest.msgpack", dir);
	ckpt_test_flip_byte(path, 40);
	memset(&s, 0, sizeof(s));
	CHECK_ERR(herd_ckpt_verify(dir, 2, on_problem, &s, NULL), HERD_EFORMAT, "checksum mismatch");
	CHECK(strstr(herd_last_error(), "manifest.msgpack") != NULL);
	CHECK_STR(s.file, "manifest.msgpack");
	ckpt_test_capture_stderr(root, restore_latest, &c, err, sizeof(err));
	CHECK_OK(c.st);
	CHECK_INT(c.got, 1);
	CHECK(x[5] == 100005.0f);
	CHECK(strstr(err, "step 2") != NULL && strstr(err, "manifest") != NULL);
	/* The restores moved steps 3 and 2 aside: asking for one says so. */
	CHECK_ERR(herd_ckpt_restore(ck, 3, NULL), HERD_ENOTFOUND,
		  "a step of that number that did not verify was moved aside as");
	/* Step 1 damaged too: a step exists and does not verify, which is
	 * not the fresh start HERD_ENOTFOUND means. */
	snprintf(path, sizeof(path), "%s/step-000000000001/rank-00000.data", dir);
	ckpt_test_flip_byte(path, -1);
	CHECK_ERR(herd_ckpt_restore(ck, HERD_CKPT_LATEST, NULL), HERD_ECORRUPT,
		  "the only committed checkpoint step in");
	CHECK(strstr(herd_last_error(), "does not verify (step 1): restoring checkpoint step 1: ")
	      != NULL);
	/* Asking for a damaged step itself is an error, not a fallback. */
	/* The last chunk is read by the second reader (the second half of
	 * the run): named all the same. */
	CHECK_ERR(herd_ckpt_restore(ck, 1, NULL), HERD_EFORMAT,
		  "\"weights\" shard 0 chunk 9 (byte 36864 of the file): checksum mismatch");

	/* A data file cut short after the commit: named with both sizes
	 * before anything is read. */
	CHECK_OK(herd_ckpt_save(ck, 4));
	snprintf(path, sizeof(path), "%s/step-000000000004/rank-00000.data", dir);
	CHECK_INT(truncate(path, 4 * 4096 + 100), 0);
	CHECK_ERR(herd_ckpt_restore(ck, 4, NULL), HERD_EFORMAT,
		  "rank-00000.data: the file has 16484 bytes, the manifest says 40000");
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
}

/* ---- hostile manifests -------------------------------------------------- */

/* A valid one-tensor manifest for file sizes that the caller then spoils. */
static herd__ckpt_manifest *small_manifest(void)
{
	herd__ckpt_manifest *m = calloc(1, sizeof(*m));

	m->step = 4;
	m->ranks = 1;
	m->checksum = HERD_CKPT_CHECKSUM_XXH3;
	m->chunk_bytes = 4096;
	m->nfiles = 1;
	m->files = calloc(1, sizeof(*m->files));
	m->files[0].name = strdup("rank-00000.data");
	m->files[0].size = 64;
	m->ntensors = 1;
	m->tensors = calloc(1, sizeof(*m->tensors));
	m->tensors[0].name = strdup("t");
	m->tensors[0].dtype = HERD_FLOAT32;
	m->tensors[0].ndim = 1;
	m->tensors[0].shape[0] = 16;
	m->tensors[0].nshards = 1;
	m->tensors[0].shards = calloc(1, sizeof(herd__ckpt_shard));
	m->tensors[0].shards[0].box.ndim = 1;
	m->tensors[0].shards[0].box.shape[0] = 16;
	m->tensors[0].shards[0].len = 64;
	m->tensors[0].shards[0].nsums = 1;
	m->tensors[0].shards[0].sums = calloc(1, sizeof(uint64_t));
	return m;
}

static herd_status decode_spoiled(void (*spoil)(herd__ckpt_manifest *))
{
	herd__ckpt_manifest *m = small_manifest(), *back = NULL;
	char *data = NULL;
	size_t len = 0;
	herd_status st;

	spoil(m);
	CHECK_OK(herd__ckpt_manifest_encode(m, &data, &len));
	herd__ckpt_manifest_free(m);
	st = herd__ckpt_manifest_decode(&back, data, len, "hostile");
	CHECK(st == HERD_OK || back == NULL);
	herd__ckpt_manifest_free(back);
	free(data);
	return st;
}

static void spoil_nothing(herd__ckpt_manifest *m) { (void)m; }
static void spoil_dotdot(herd__ckpt_manifest *m)
{
	free(m->files[0].name);
	m->files[0].name = strdup("../../etc/passwd");
}
static void spoil_dot(herd__ckpt_manifest *m)
{
	free(m->files[0].name);
	m->files[0].name = strdup("..");
}
static void spoil_offset(herd__ckpt_manifest *m) { m->tensors[0].shards[0].at = 8; }
static void spoil_huge_offset(herd__ckpt_manifest *m)
{
	m->tensors[0].shards[0].at = UINT64_MAX - 10;
}
static void spoil_shape(herd__ckpt_manifest *m)
{
	m->tensors[0].ndim = 3;
	m->tensors[0].shape[0] = m->tensors[0].shape[1] = m->tensors[0].shape[2] = 1ull << 40;
}
static void spoil_len(herd__ckpt_manifest *m) { m->tensors[0].shards[0].len = 60; }
static void spoil_gap(herd__ckpt_manifest *m)
{
	m->tensors[0].shards[0].box.shape[0] = 8;
	m->tensors[0].shards[0].len = 32;
}
static void spoil_name(herd__ckpt_manifest *m)
{
	free(m->tensors[0].name);
	m->tensors[0].name = strdup("a\nb");
}

static void spoil_rank(herd__ckpt_manifest *m) { m->files[0].rank = 3; }
static void spoil_sums(herd__ckpt_manifest *m)
{
	m->tensors[0].shards[0].nsums = 2;
	free(m->tensors[0].shards[0].sums);
	m->tensors[0].shards[0].sums = calloc(2, sizeof(uint64_t));
}
static void spoil_file(herd__ckpt_manifest *m) { m->tensors[0].shards[0].file = 1; }
static void spoil_ndim(herd__ckpt_manifest *m) { m->tensors[0].shards[0].box.ndim = 2; }
static void spoil_dims(herd__ckpt_manifest *m)
{
	m->tensors[0].shards[0].box.offset[0] = 8;
}

static void test_ckpt_hostile_manifests_are_rejected(void)
{
	herd__ckpt_manifest *m = NULL;

	CHECK_OK(decode_spoiled(spoil_nothing));
	CHECK_ERR(decode_spoiled(spoil_dotdot), HERD_EFORMAT, "files[0].name");
	CHECK_ERR(decode_spoiled(spoil_dot), HERD_EFORMAT, "not starting with '.'");
	CHECK_ERR(decode_spoiled(spoil_offset), HERD_EFORMAT, "past the end of rank-00000.data");
	CHECK_ERR(decode_spoiled(spoil_huge_offset), HERD_EFORMAT, "tensors[0].shards[0].at");
	CHECK_ERR(decode_spoiled(spoil_shape), HERD_EFORMAT, "tensors[0].shape");
	CHECK_ERR(decode_spoiled(spoil_len), HERD_EFORMAT, "len is 60 bytes");
	CHECK_ERR(decode_spoiled(spoil_gap), HERD_EFORMAT, "hold 8 elements");
	CHECK_ERR(decode_spoiled(spoil_name), HERD_EFORMAT, "tensors[0].name");
	/* Ranges that depend on what came before, each naming its field. */
	CHECK_ERR(decode_spoiled(spoil_rank), HERD_EFORMAT,
		  "hostile: files[0].rank: expected an integer in 0..0, got 3");
	CHECK_ERR(decode_spoiled(spoil_sums), HERD_EFORMAT,
		  "hostile: tensors[0].shards[0].sums: expected an array of 1..1 items, got 2");
	CHECK_ERR(decode_spoiled(spoil_file), HERD_EFORMAT,
		  "hostile: tensors[0].shards[0].file: expected an integer in 0..0, got 1");
	CHECK_ERR(decode_spoiled(spoil_ndim), HERD_EFORMAT,
		  "hostile: tensors[0].shards[0].offset: expected an array of 1..1 items, got 2");
	CHECK_ERR(decode_spoiled(spoil_dims), HERD_EFORMAT,
		  "hostile: tensors[0].shards[0]: dimension 0 of the shard (16 at 8) lies outside "
		  "the tensor's 16");
	CHECK_ERR(herd__ckpt_manifest_decode(&m, "\x81\xa1v\x01", 4, "short"), HERD_EFORMAT,
		  "short: truncated");
	CHECK(m == NULL);
}

/* A hostile manifest in a step directory: restore skips the step, and no
 * file outside the checkpoint directory is opened. */
static void test_ckpt_hostile_step_is_skipped(void)
{
	herd__ckpt_manifest *m = small_manifest();
	uint64_t g[1] = { 16 };
	float x[16];
	herd_ckpt *ck = NULL;
	char dir[300], path[400];
	char *data = NULL;
	size_t len = 0;
	int64_t got = -1;
	FILE *f;

	make_dir(dir, sizeof(dir), "hostile");
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "t", x, HERD_FLOAT32, 1, g, NULL, NULL));
	for (int i = 0; i < 16; i++)
		x[i] = (float)i;
	CHECK_OK(herd_ckpt_save(ck, 3));
	/* Step 4 names a file outside, with a valid checksum. */
	free(m->files[0].name);
	m->files[0].name = strdup("../step-000000000003/rank-00000.data");
	CHECK_OK(herd__ckpt_manifest_encode(m, &data, &len));
	snprintf(path, sizeof(path), "%s/step-000000000004", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/step-000000000004/manifest.msgpack", dir);
	f = fopen(path, "wb");
	fwrite(data, 1, len, f);
	fclose(f);
	memset(x, 0, sizeof(x));
	herd_log_set_level(HERD_LOG_ERROR);
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	herd_log_set_level(HERD_LOG_WARN);
	CHECK_INT(got, 3);
	CHECK(x[15] == 15.0f);
	/* Step 4 was moved aside, saying why. */
	CHECK_ERR(herd_ckpt_verify(dir, 4, NULL, NULL, NULL), HERD_ENOTFOUND, "moved aside");
	{
		herd_ckpt_step_info *info = NULL;
		size_t n = 0;

		CHECK_OK(herd_ckpt_list(dir, &info, &n));
		CHECK_INT(n, 2);
		if (n == 2) {
			CHECK(info[1].step == 4 && info[1].moved_aside && !info[1].committed);
			CHECK(strstr(info[1].problem, "files[0].name") != NULL);
		}
		herd_free(info);
	}
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	herd__ckpt_manifest_free(m);
	free(data);
}

/* ---- blobs across world sizes (real ranks) ------------------------------ */

typedef struct blob_arg {
	char dir[300];
	char scope[64];
	int saved_size;
} blob_arg;

static void blob_saver(int rank, int size, void *arg)
{
	blob_arg *a = arg;
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;
	uint64_t rng = 1000 + (uint64_t)rank, pos = 50 + (uint64_t)rank, cfg = 77;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, a->dir, comm, NULL));
	CHECK_OK(herd_ckpt_add_blob(ck, "rng", &rng, sizeof(rng), HERD_CKPT_BLOB_SAME_RANK));
	CHECK_OK(herd_ckpt_add_blob(ck, "loader", &pos, sizeof(pos), HERD_CKPT_BLOB_RANK0));
	CHECK_OK(herd_ckpt_add_blob(ck, "cfg", &cfg, sizeof(cfg), HERD_CKPT_BLOB_STRICT));
	CHECK_OK(herd_ckpt_save(ck, 10));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void blob_restorer(int rank, int size, void *arg)
{
	blob_arg *a = arg;
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;
	uint64_t rng = 0, pos = 0, cfg = 0;

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, a->dir, comm, NULL));
	CHECK_OK(herd_ckpt_add_blob(ck, "rng", &rng, sizeof(rng), HERD_CKPT_BLOB_SAME_RANK));
	CHECK_OK(herd_ckpt_add_blob(ck, "loader", &pos, sizeof(pos), HERD_CKPT_BLOB_RANK0));
	if (size == a->saved_size) {
		CHECK_OK(herd_ckpt_add_blob(ck, "cfg", &cfg, sizeof(cfg), HERD_CKPT_BLOB_STRICT));
		CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, NULL));
		CHECK_INT(rng, 1000 + rank);
		CHECK_INT(pos, 50 + rank);
		CHECK_INT(cfg, 77);
	} else {
		CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, NULL));
		CHECK_INT(rng, 1000 + rank % a->saved_size);
		CHECK_INT(pos, 50);
		CHECK_OK(herd_ckpt_add_blob(ck, "cfg", &cfg, sizeof(cfg), HERD_CKPT_BLOB_STRICT));
		/* Every rank gets the same error, naming the rule. */
		CHECK_ERR(herd_ckpt_restore(ck, HERD_CKPT_LATEST, NULL), HERD_EMISMATCH, "strict");
	}
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_ckpt_blobs_follow_their_world_size_rules(void)
{
	blob_arg a;
	int sizes[] = { 2, 1, 3 };

	memset(&a, 0, sizeof(a));
	make_dir(a.dir, sizeof(a.dir), "blobs");
	a.saved_size = 2;
	harness_scope(a.scope, sizeof(a.scope), "ckpt-blob");
	CHECK_INT(run_ranks(2, blob_saver, &a, 60000, NULL, NULL, 0, NULL), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		harness_scope(a.scope, sizeof(a.scope), "ckpt-blob");
		CHECK_INT(run_ranks(sizes[i], blob_restorer, &a, 60000, NULL, NULL, 0, NULL), 0);
	}
}

/* A rank that registers something else fails the save on every rank. */
static void mismatch_rank(int rank, int size, void *arg)
{
	blob_arg *a = arg;
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;
	uint64_t g[1] = { 4 };
	float x[4] = { 0 };

	CHECK_OK(harness_comm(&comm, a->scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, a->dir, comm, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, rank == 1 ? "other" : "x", x, HERD_FLOAT32, 1, g, NULL,
				      NULL));
	CHECK_ERR(herd_ckpt_save(ck, 1), HERD_EMISMATCH, "\"other\" on rank 1");
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_ckpt_ranks_that_disagree_fail_everywhere(void)
{
	blob_arg a;

	memset(&a, 0, sizeof(a));
	make_dir(a.dir, sizeof(a.dir), "mismatch");
	harness_scope(a.scope, sizeof(a.scope), "ckpt-mismatch");
	CHECK_INT(run_ranks(3, mismatch_rank, &a, 60000, NULL, NULL, 0, NULL), 0);
}

int main(void)
{
	char cmd[300];

	snprintf(root, sizeof(root), "/tmp/herd-ckpt-basic.XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	harness_start();
	TEST_RUN(test_ckpt_roundtrip_every_dtype_bit_exact);
	TEST_RUN(test_ckpt_add_rejects_bad_registrations);
	TEST_RUN(test_ckpt_async_stages_in_pieces_and_second_save_waits);
	TEST_RUN(test_ckpt_abort_stops_a_save_in_flight);
	TEST_RUN(test_ckpt_retention_keeps_last_n_and_every_kth);
	TEST_RUN(test_ckpt_leaves_what_it_did_not_make_alone);
	TEST_RUN(test_ckpt_corruption_is_named_and_restore_falls_back);
	TEST_RUN(test_ckpt_hostile_manifests_are_rejected);
	TEST_RUN(test_ckpt_hostile_step_is_skipped);
	TEST_RUN(test_ckpt_blobs_follow_their_world_size_rules);
	TEST_RUN(test_ckpt_ranks_that_disagree_fail_everywhere);
	harness_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (test_failures == 0 && system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
	return TEST_DONE();
}
