/*
 * tests/unit/test_ckpt_damaged.c - a committed step that does not verify
 * does not end the run: a restore that passes over it moves it aside
 * (renamed step-N.damaged-TIME, with a note saying why, a warning naming
 * the new path), a save of its number then succeeds, and a save over a
 * step that verifies still fails with HERD_EEXIST.  A save that finds its
 * number taken by a damaged step moves it aside itself; a second damage of
 * the same number gets a name of its own.  Two real ranks: the damage is
 * in rank 1's file, found by rank 1 and moved by rank 0.  A reader that
 * had the step open reads on.  When no step verifies, nothing is moved
 * (the job stops on HERD_ECORRUPT); nor is a step of a newer format.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_test_files.h"
#include "comm_harness.h"

#include "ckpt/ckpt_internal.h"

static char root[256];

static void make_dir(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s", root, name);
}

/* The names of the steps of dir moved aside with number step, sorted;
 * their count. */
static int aside_names(const char *dir, int64_t step, char names[][96], int cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL) {
		int64_t s;

		if (herd__ckpt_parse_damaged(e->d_name, &s) && s == step && n < cap)
			herd__strlcpy(names[n++], e->d_name, 96);
	}
	if (d != NULL)
		closedir(d);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char t[96];

			memcpy(t, names[j], 96);
			memcpy(names[j], names[j - 1], 96);
			memcpy(names[j - 1], t, 96);
		}
	return n;
}

/* The first line of dir/name/file into buf ("" when unreadable). */
static void read_line(const char *dir, const char *name, const char *file, char *buf, size_t cap)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, name, file);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (f == NULL)
		return;
	if (fgets(buf, (int)cap, f) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static bool exists(const char *dir, const char *name)
{
	char path[1200];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &sb) == 0;
}

/* ---- one process --------------------------------------------------------- */

enum { N = 10000 };

typedef struct one {
	herd_ckpt *ck;
	float x[N];
	int64_t step, got;
	herd_status st;
} one;

static void fill_step(one *o, int step)
{
	for (int i = 0; i < N; i++)
		o->x[i] = (float)(step * 100000 + i);
}

static void restore_latest(void *arg)
{
	one *o = arg;

	o->st = herd_ckpt_restore(o->ck, HERD_CKPT_LATEST, &o->got);
}

static void save_step(void *arg)
{
	one *o = arg;

	o->st = herd_ckpt_save(o->ck, o->step);
}

static void test_ckpt_restore_moves_damaged_step_aside_and_save_reuses_its_number(void)
{
	static one o;
	static float reader_buf[N];
	herd_ckpt_opts opts = HERD_CKPT_OPTS_INIT;
	herd_ckpt_reader *reader = NULL;
	herd_ckpt_step_info *info = NULL;
	uint64_t g[1] = { N };
	char dir[300], path[600], err[8192], names[4][96], note[1024], latest[64], want[1200];
	size_t n = 0;
	int64_t step = -1;

	make_dir(dir, sizeof(dir), "restore");
	opts.chunk_bytes = 4096;
	CHECK_OK(herd_ckpt_open(&o.ck, dir, NULL, &opts));
	if (o.ck == NULL)
		return;
	CHECK_OK(herd_ckpt_add_tensor(o.ck, "w", o.x, HERD_FLOAT32, 1, g, NULL, NULL));
	for (int s = 1; s <= 3; s++) {
		fill_step(&o, s);
		CHECK_OK(herd_ckpt_save(o.ck, s));
	}
	snprintf(path, sizeof(path), "%s/step-000000000003/rank-00000.data", dir);
	ckpt_test_flip_byte(path, 2 * 4096 + 17);

	/* A reader of step 3, in another program, opened before the move. */
	CHECK_OK(herd_ckpt_reader_open(&reader, dir, 3));

	/* The restore passes over step 3 to step 2, and moves step 3 aside. */
	memset(o.x, 0, sizeof(o.x));
	ckpt_test_capture_stderr(root, restore_latest, &o, err, sizeof(err));
	CHECK_OK(o.st);
	CHECK_INT(o.got, 2);
	CHECK(o.x[9999] == 209999.0f);
	CHECK(strstr(err, "checksum mismatch") != NULL);
	CHECK(strstr(err, "trying the step before") != NULL);
	CHECK(!exists(dir, "step-000000000003"));
	CHECK_INT(aside_names(dir, 3, names, 4), 1);
	snprintf(want, sizeof(want), "checkpoint step 3 in %s does not verify: moved it aside to "
		 "%s/%s, kept for inspection", dir, dir, names[0]);
	if (strstr(err, want) == NULL)
		TEST_FAIL_("the warning lacks \"%s\": %s", want, err);
	/* The reader reads on, in the directory under its new name. */
	CHECK_ERR(herd_ckpt_reader_read(reader, "w", reader_buf, sizeof(reader_buf)), HERD_EFORMAT,
		  "\"w\" shard 0 chunk 2 (byte 8192 of the file): checksum mismatch");
	herd_ckpt_reader_free(reader);
	/* Its bytes are all there, with the reason beside them. */
	read_line(dir, names[0], HERD__CKPT_DAMAGED_NOTE, note, sizeof(note));
	CHECK(strstr(note, "step-000000000003/rank-00000.data: \"w\" shard 0 chunk 2") != NULL);
	CHECK(strstr(note, "checksum mismatch") != NULL);
	snprintf(path, sizeof(path), "%s/rank-00000.data", names[0]);
	CHECK(exists(dir, path));
	/* `latest` names the newest step left; readers see step 2. */
	read_line(dir, "", HERD__CKPT_LATEST, latest, sizeof(latest));
	CHECK_STR(latest, "step-000000000002");
	CHECK_OK(herd_ckpt_latest(dir, &step));
	CHECK_INT(step, 2);
	/* Asking for step 3 by number says where it went. */
	CHECK_ERR(herd_ckpt_verify(dir, 3, NULL, NULL, NULL), HERD_ENOTFOUND,
		  "a step of that number that did not verify was moved aside as");
	CHECK(strstr(herd_last_error(), names[0]) != NULL);
	CHECK_ERR(herd_ckpt_restore(o.ck, 3, NULL), HERD_ENOTFOUND, names[0]);
	/* The listing shows it, moved aside, never as a step to restore. */
	CHECK_OK(herd_ckpt_list(dir, &info, &n));
	CHECK_INT(n, 3);
	if (n == 3) {
		CHECK(info[0].step == 1 && info[0].committed && !info[0].moved_aside);
		CHECK(info[1].step == 2 && info[1].committed && !info[1].moved_aside);
		CHECK(info[2].step == 3 && !info[2].committed && info[2].moved_aside);
		CHECK_STR(info[2].name, names[0]);
		CHECK(info[2].manifest_ok && info[2].files_ok);
		CHECK(strstr(info[2].problem, "checksum mismatch") != NULL);
	}
	herd_free(info);

	/* The training goes on past step 3: its save succeeds. */
	fill_step(&o, 33);
	CHECK_OK(herd_ckpt_save(o.ck, 3));
	CHECK_OK(herd_ckpt_verify(dir, 3, NULL, NULL, NULL));
	memset(o.x, 0, sizeof(o.x));
	CHECK_OK(herd_ckpt_restore(o.ck, HERD_CKPT_LATEST, &o.got));
	CHECK_INT(o.got, 3);
	CHECK(o.x[5] == 3300005.0f);
	/* A step that verifies is never moved: the save fails, as always. */
	CHECK_ERR(herd_ckpt_save(o.ck, 3), HERD_EEXIST, "already committed");
	CHECK(strstr(herd_last_error(), "and it verifies") != NULL);
	CHECK_OK(herd_ckpt_verify(dir, 3, NULL, NULL, NULL));
	CHECK_INT(aside_names(dir, 3, names, 4), 1);

	/* Damaged again (its manifest this time), and found by a save, not a
	 * restore: moved aside under a name of its own. */
	snprintf(path, sizeof(path), "%s/step-000000000003/manifest.msgpack", dir);
	ckpt_test_flip_byte(path, 40);
	o.step = 3;
	fill_step(&o, 34);
	ckpt_test_capture_stderr(root, save_step, &o, err, sizeof(err));
	CHECK_OK(o.st);
	CHECK(strstr(err, "does not verify") != NULL && strstr(err, "moved it aside to") != NULL);
	CHECK_INT(aside_names(dir, 3, names, 4), 2);
	CHECK(strcmp(names[0], names[1]) != 0);
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "%s/%s", dir, names[i]);
		if (strstr(err, want) != NULL)
			break;
		if (i == 1)
			TEST_FAIL_("the warning names neither %s nor %s: %s", names[0], names[1], err);
	}
	CHECK_OK(herd_ckpt_verify(dir, 3, NULL, NULL, NULL));
	memset(o.x, 0, sizeof(o.x));
	CHECK_OK(herd_ckpt_restore(o.ck, 3, NULL));
	CHECK(o.x[5] == 3400005.0f);
	CHECK_OK(herd_ckpt_wait(o.ck));
	herd_ckpt_free(o.ck);
	o.ck = NULL;
}

/* The name a move of step at time t would take first. */
static void aside_name_at(char *buf, size_t cap, int64_t step, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, cap, "step-%012lld.damaged-%04d%02d%02dT%02d%02d%02dZ", (long long)step,
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void test_ckpt_second_damage_in_the_same_second_takes_another_name(void)
{
	static one o;
	uint64_t g[1] = { N };
	char dir[300], path[700], taken[96];
	time_t now = time(NULL);

	make_dir(dir, sizeof(dir), "collide");
	CHECK_OK(herd_ckpt_open(&o.ck, dir, NULL, NULL));
	if (o.ck == NULL)
		return;
	CHECK_OK(herd_ckpt_add_tensor(o.ck, "w", o.x, HERD_FLOAT32, 1, g, NULL, NULL));
	fill_step(&o, 5);
	CHECK_OK(herd_ckpt_save(o.ck, 5));
	/* Earlier damages of step 5 hold the names of this second and the
	 * next few, whichever second the move below happens in. */
	for (int k = 0; k < 60; k++) {
		aside_name_at(taken, sizeof(taken), 5, now + k);
		snprintf(path, sizeof(path), "%s/%s", dir, taken);
		CHECK(mkdir(path, 0700) == 0);
	}
	snprintf(path, sizeof(path), "%s/step-000000000005/rank-00000.data", dir);
	ckpt_test_flip_byte(path, 0);
	herd_log_set_level(HERD_LOG_ERROR);
	CHECK_OK(herd_ckpt_save(o.ck, 5));
	herd_log_set_level(HERD_LOG_WARN);
	{
		/* Every earlier one is untouched (empty), and the new one is a
		 * suffixed name holding the damaged bytes. */
		DIR *d = opendir(dir);
		struct dirent *e;
		int moved = 0, empty = 0;

		while (d != NULL && (e = readdir(d)) != NULL) {
			int64_t s;

			if (!herd__ckpt_parse_damaged(e->d_name, &s))
				continue;
			snprintf(path, sizeof(path), "%s/rank-00000.data", e->d_name);
			if (exists(dir, path)) {
				moved++;
				CHECK(strrchr(e->d_name, '-') > strstr(e->d_name, "Z"));
			} else {
				empty++;
			}
		}
		if (d != NULL)
			closedir(d);
		CHECK_INT(moved, 1);
		CHECK_INT(empty, 60);
	}
	CHECK_OK(herd_ckpt_verify(dir, 5, NULL, NULL, NULL));
	CHECK_OK(herd_ckpt_wait(o.ck));
	herd_ckpt_free(o.ck);
	o.ck = NULL;
}

static void test_ckpt_nothing_moves_when_no_step_verifies(void)
{
	static one o;
	uint64_t g[1] = { N };
	char dir[300], path[600], names[2][96];
	int64_t step = -1;

	make_dir(dir, sizeof(dir), "none");
	CHECK_OK(herd_ckpt_open(&o.ck, dir, NULL, NULL));
	if (o.ck == NULL)
		return;
	CHECK_OK(herd_ckpt_add_tensor(o.ck, "w", o.x, HERD_FLOAT32, 1, g, NULL, NULL));
	for (int s = 1; s <= 2; s++) {
		fill_step(&o, s);
		CHECK_OK(herd_ckpt_save(o.ck, s));
		snprintf(path, sizeof(path), "%s/step-%012d/rank-00000.data", dir, s);
		ckpt_test_flip_byte(path, 100);
	}
	herd_log_set_level(HERD_LOG_ERROR);
	CHECK_ERR(herd_ckpt_restore(o.ck, HERD_CKPT_LATEST, NULL), HERD_ECORRUPT,
		  "none of the 2 committed checkpoint steps");
	CHECK(strstr(herd_last_error(), "verifies (steps 2, 1); the newest failed: restoring "
		     "checkpoint step 2: ") != NULL);
	herd_log_set_level(HERD_LOG_WARN);
	/* A restart meets the same steps, and stops again. */
	CHECK(exists(dir, "step-000000000001") && exists(dir, "step-000000000002"));
	CHECK_INT(aside_names(dir, 1, names, 2) + aside_names(dir, 2, names, 2), 0);
	CHECK_OK(herd_ckpt_latest(dir, &step));
	CHECK_INT(step, 2);
	CHECK_OK(herd_ckpt_wait(o.ck));
	herd_ckpt_free(o.ck);
	o.ck = NULL;
}

/* Rewrites the manifest of dir/name as format version 2, with a matching
 * checksum: a step a newer herd wrote, not a damaged one. */
static void make_newer(const char *dir, const char *name)
{
	char path[700], hex[17];
	uint8_t data[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, name, HERD__CKPT_MANIFEST);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	n = pread(fd, data, sizeof(data), 0);
	CHECK(n > 20 && n < (ssize_t)sizeof(data));
	/* {"v": 1, ...}: a fixmap, then a1 76 01 */
	CHECK(n > 20 && data[1] == 0xa1 && data[2] == 'v' && data[3] == 0x01);
	if (n > 20 && n < (ssize_t)sizeof(data)) {
		data[3] = 0x02;
		herd__ckpt_sum_hex(hex, herd__ckpt_sum(data, (size_t)n - 16));
		memcpy(data + n - 16, hex, 16);
		CHECK(pwrite(fd, data, (size_t)n, 0) == n);
	}
	close(fd);
}

static void test_ckpt_step_of_a_newer_format_is_never_moved(void)
{
	static one o;
	uint64_t g[1] = { N };
	char dir[300], names[2][96];
	int64_t got = -1;

	make_dir(dir, sizeof(dir), "newer");
	CHECK_OK(herd_ckpt_open(&o.ck, dir, NULL, NULL));
	if (o.ck == NULL)
		return;
	CHECK_OK(herd_ckpt_add_tensor(o.ck, "w", o.x, HERD_FLOAT32, 1, g, NULL, NULL));
	for (int s = 1; s <= 2; s++) {
		fill_step(&o, s);
		CHECK_OK(herd_ckpt_save(o.ck, s));
	}
	make_newer(dir, "step-000000000002");
	CHECK_ERR(herd_ckpt_verify(dir, 2, NULL, NULL, NULL), HERD_EFORMAT, "newer");
	herd_log_set_level(HERD_LOG_ERROR);
	CHECK_OK(herd_ckpt_restore(o.ck, HERD_CKPT_LATEST, &got));
	herd_log_set_level(HERD_LOG_WARN);
	CHECK_INT(got, 1);
	/* Passed over, not damaged: it stays, and its number is not free. */
	CHECK(exists(dir, "step-000000000002"));
	CHECK_INT(aside_names(dir, 2, names, 2), 0);
	CHECK_ERR(herd_ckpt_save(o.ck, 2), HERD_EEXIST, "could not be verified");
	CHECK(strstr(herd_last_error(), "newer") != NULL);
	CHECK(exists(dir, "step-000000000002"));
	CHECK_INT(aside_names(dir, 2, names, 2), 0);
	CHECK_OK(herd_ckpt_wait(o.ck));
	herd_ckpt_free(o.ck);
	o.ck = NULL;
}

/* ---- two ranks -------------------------------------------------------------- */

typedef struct ranks_arg {
	char dir[300];
	char scope[64];
	int phase;
} ranks_arg;

enum { R = 4096 };   /* elements per rank: one chunk of float32 each */

static void rank_fill(float *x, int rank, int step)
{
	for (int i = 0; i < R; i++)
		x[i] = (float)(step * 1000000 + rank * R + i);
}

static void ranks_body(int rank, int size, void *arg)
{
	ranks_arg *a = arg;
	herd_ckpt_opts opts = HERD_CKPT_OPTS_INIT;
	uint64_t g[1] = { (uint64_t)R * (uint64_t)size }, off[1] = { (uint64_t)rank * R };
	uint64_t shape[1] = { R };
	static float x[R];
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;
	int64_t got = -1;

	opts.chunk_bytes = 4096;
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, a->dir, comm, &opts));
	if (ck == NULL)
		goto out;
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", x, HERD_FLOAT32, 1, g, off, shape));
	if (a->phase == 0) {
		for (int s = 2; s <= 4; s += 2) {
			rank_fill(x, rank, s);
			CHECK_OK(herd_ckpt_save(ck, s));
		}
	} else if (a->phase == 1) {
		/* Rank 1's file of step 4 is damaged: both ranks resume from
		 * step 2, and step 4 can be saved again. */
		memset(x, 0, sizeof(x));
		CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
		CHECK_INT(got, 2);
		CHECK(x[R - 1] == (float)(2 * 1000000 + rank * R + R - 1));
		rank_fill(x, rank, 44);
		CHECK_OK(herd_ckpt_save(ck, 4));
		CHECK_ERR(herd_ckpt_save(ck, 4), HERD_EEXIST, "already committed");
	} else {
		/* Damaged again; no restore this time: the save verifies, each
		 * rank its share, and rank 0 moves the step aside. */
		rank_fill(x, rank, 45);
		CHECK_OK(herd_ckpt_save(ck, 4));
		memset(x, 0, sizeof(x));
		CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
		CHECK_INT(got, 4);
		CHECK(x[7] == (float)(45 * 1000000 + rank * R + 7));
	}
	CHECK_OK(herd_ckpt_wait(ck));
out:
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_ckpt_two_ranks_damage_found_by_rank_1_moved_by_rank_0(void)
{
	ranks_arg a;
	char path[700], names[4][96], note[1024];

	memset(&a, 0, sizeof(a));
	make_dir(a.dir, sizeof(a.dir), "ranks");
	harness_scope(a.scope, sizeof(a.scope), "ckpt-damaged");
	CHECK_INT(run_ranks(2, ranks_body, &a, 60000, NULL, NULL, 0, NULL), 0);
	snprintf(path, sizeof(path), "%s/step-000000000004/rank-00001.data", a.dir);
	ckpt_test_flip_byte(path, 123);
	a.phase = 1;
	harness_scope(a.scope, sizeof(a.scope), "ckpt-damaged");
	CHECK_INT(run_ranks(2, ranks_body, &a, 60000, NULL, NULL, 0, NULL), 0);
	CHECK_INT(aside_names(a.dir, 4, names, 4), 1);
	read_line(a.dir, names[0], HERD__CKPT_DAMAGED_NOTE, note, sizeof(note));
	CHECK(strstr(note, "rank 1 (host ") != NULL);
	CHECK(strstr(note, "rank-00001.data: \"w\" shard 1 chunk 0") != NULL);
	CHECK_OK(herd_ckpt_verify(a.dir, 4, NULL, NULL, NULL));

	snprintf(path, sizeof(path), "%s/step-000000000004/rank-00001.data", a.dir);
	ckpt_test_flip_byte(path, 4000);
	a.phase = 2;
	harness_scope(a.scope, sizeof(a.scope), "ckpt-damaged");
	CHECK_INT(run_ranks(2, ranks_body, &a, 60000, NULL, NULL, 0, NULL), 0);
	CHECK_INT(aside_names(a.dir, 4, names, 4), 2);
	CHECK_OK(herd_ckpt_verify(a.dir, 4, NULL, NULL, NULL));
}

int main(void)
{
	char cmd[300];

	snprintf(root, sizeof(root), "/tmp/herd-ckpt-damaged.XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	harness_start();
	TEST_RUN(test_ckpt_restore_moves_damaged_step_aside_and_save_reuses_its_number);
	TEST_RUN(test_ckpt_second_damage_in_the_same_second_takes_another_name);
	TEST_RUN(test_ckpt_nothing_moves_when_no_step_verifies);
	TEST_RUN(test_ckpt_step_of_a_newer_format_is_never_moved);
	TEST_RUN(test_ckpt_two_ranks_damage_found_by_rank_1_moved_by_rank_0);
	harness_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (test_failures == 0 && system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
	return TEST_DONE();
}
