/*
 * tests/unit/test_ckpt_diskfull.c - a checkpoint directory on a small
 * tmpfs that fills in the middle of a save: the save fails with a clear
 * error on every path (synchronous, asynchronous), leaves no step behind,
 * and the previous checkpoint stays intact and restorable.  Needs root (to
 * mount); skipped (77) otherwise.
 */
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "comm_harness.h"

static char mnt[256];

static void fill_bytes(void *p, size_t n, uint64_t seed)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static int committed_and_pending(int *pending)
{
	herd_ckpt_step_info *info = NULL;
	size_t n = 0;
	int committed = 0;

	*pending = 0;
	if (herd_ckpt_list(mnt, &info, &n) != HERD_OK)
		return -1;
	for (size_t i = 0; i < n; i++) {
		committed += info[i].committed;
		*pending += !info[i].committed;
	}
	herd_free(info);
	return committed;
}

static void test_ckpt_disk_full_fails_cleanly_and_keeps_previous(void)
{
	enum { SMALL = 64 * 1024, BIG = 3 * 1024 * 1024 };
	uint8_t *small = malloc(SMALL), *big = malloc(BIG), *want = malloc(SMALL);
	uint64_t gs[1] = { SMALL }, gb[1] = { BIG };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_ckpt *ck = NULL, *ck_big = NULL;
	int64_t got = -1;
	int pending = 0;

	o.staging_bytes = 256 * 1024;
	fill_bytes(small, SMALL, 1);
	memcpy(want, small, SMALL);
	fill_bytes(big, BIG, 2);
	CHECK_OK(herd_ckpt_open(&ck, mnt, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "small", small, HERD_UINT8, 1, gs, NULL, NULL));
	CHECK_OK(herd_ckpt_save(ck, 1));
	/* One writer per directory: the first closes before the second opens. */
	CHECK_ERR(herd_ckpt_open(&ck_big, mnt, NULL, &o), HERD_EBUSY, "is being written by pid");
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);

	/* The same directory, a state larger than the file system. */
	CHECK_OK(herd_ckpt_open(&ck_big, mnt, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck_big, "small", small, HERD_UINT8, 1, gs, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck_big, "big", big, HERD_UINT8, 1, gb, NULL, NULL));
	CHECK_ERR(herd_ckpt_save(ck_big, 2), HERD_EIO, "No space left on device");
	CHECK(strstr(herd_last_error(), "saving checkpoint step 2") != NULL);
	CHECK(strstr(herd_last_error(), "rank-00000.data") != NULL);
	CHECK_INT(committed_and_pending(&pending), 1);
	CHECK_INT(pending, 0);
	/* Asynchronously: save_async stages and returns; wait reports. */
	CHECK_OK(herd_ckpt_save_async(ck_big, 3));
	CHECK_ERR(herd_ckpt_wait(ck_big), HERD_EIO, "No space left on device");
	CHECK_INT(committed_and_pending(&pending), 1);
	CHECK_INT(pending, 0);
	CHECK_OK(herd_ckpt_wait(ck_big));
	herd_ckpt_free(ck_big);

	/* The previous checkpoint is intact, and the space is back. */
	CHECK_OK(herd_ckpt_verify(mnt, 1, NULL, NULL, NULL));
	CHECK_OK(herd_ckpt_open(&ck, mnt, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "small", small, HERD_UINT8, 1, gs, NULL, NULL));
	memset(small, 0, SMALL);
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &got));
	CHECK_INT(got, 1);
	CHECK(memcmp(small, want, SMALL) == 0);
	CHECK_OK(herd_ckpt_save(ck, 4));
	CHECK_OK(herd_ckpt_verify(mnt, 4, NULL, NULL, NULL));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	free(small);
	free(big);
	free(want);
}

/* The step commits but `latest` cannot be written (no inode left for its
 * temporary file): `latest` must not be left naming the step retention
 * deletes right after. */
static void test_ckpt_latest_never_names_a_deleted_step(void)
{
	char dir[300], filler[320], latest[320], text[64] = "";
	uint8_t x[256];
	uint64_t g[1] = { sizeof(x) };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_ckpt *ck = NULL;
	herd_status st = HERD_EIO;
	int nfill = 0, freed = 0;
	int64_t step = 2;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/inodes", mnt);
	CHECK(mkdir(dir, 0755) == 0);
	CHECK(mount("herd-ckpt-inodes", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=64")
	      == 0);
	snprintf(filler, sizeof(filler), "%s/filler", dir);
	CHECK(mkdir(filler, 0755) == 0);
	o.keep_last = 1;
	memset(x, 7, sizeof(x));
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_UINT8, 1, g, NULL, NULL));
	CHECK_OK(herd_ckpt_save(ck, 1));
	/* Every inode taken... */
	for (; nfill < 200; nfill++) {
		char p[400];
		int fd;

		snprintf(p, sizeof(p), "%s/%d", filler, nfill);
		fd = open(p, O_CREAT | O_WRONLY, 0600);
		if (fd < 0)
			break;
		close(fd);
	}
	CHECK(nfill > 0 && nfill < 200);
	/* ...then given back one at a time until a save fits, which leaves
	 * none for latest's temporary file. */
	while (st != HERD_OK && freed < nfill && freed < 16) {
		char p[400];

		snprintf(p, sizeof(p), "%s/%d", filler, freed++);
		CHECK(unlink(p) == 0);
		st = herd_ckpt_save(ck, step);
		if (st != HERD_OK)
			CHECK(strstr(herd_last_error(), "No space left on device") != NULL);
	}
	CHECK_OK(st);
	snprintf(latest, sizeof(latest), "%s/latest", dir);
	f = fopen(latest, "r");
	if (f != NULL) {
		CHECK(fgets(text, sizeof(text), f) != NULL);
		fclose(f);
		/* Written after all, then it names the new step. */
		CHECK_STR(text, "step-000000000002\n");
	}
	CHECK(herd_ckpt_verify(dir, 1, NULL, NULL, NULL) != HERD_OK);   /* retention took it */
	CHECK_OK(herd_ckpt_verify(dir, 2, NULL, NULL, NULL));
	CHECK_OK(herd_ckpt_latest(dir, &step));
	CHECK_INT(step, 2);
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK(umount(dir) == 0);
	rmdir(dir);
	printf("     %d inodes given back before step 2 fit; latest %s\n", freed,
	       f != NULL ? "names it" : "removed");
}

int main(void)
{
	int rc;

	snprintf(mnt, sizeof(mnt), "/tmp/herd-ckpt-full.XXXXXX");
	if (mkdtemp(mnt) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	if (mount("herd-ckpt-test", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0) {
		fprintf(stderr, "skipped: cannot mount a tmpfs on %s: %s\n", mnt, strerror(errno));
		rmdir(mnt);
		return 77;
	}
	herd_log_set_level(HERD_LOG_ERROR);
	TEST_RUN(test_ckpt_disk_full_fails_cleanly_and_keeps_previous);
	TEST_RUN(test_ckpt_latest_never_names_a_deleted_step);
	if (umount(mnt) != 0)
		fprintf(stderr, "cannot unmount %s: %s\n", mnt, strerror(errno));
	rmdir(mnt);
	rc = TEST_DONE();
	return rc;
}
