/*
 * Checkpoints of device tensors, with the stand-in libcuda.so.1 of
 * tests/mock (whose device memory is host memory, so the test can look
 * at it): a save stages device bytes through the staging ring while the
 * writer writes (a ring smaller than the state included), a restore reads
 * and verifies on the host and copies back; blobs stay host memory.
 */
#include "test.h"

#include "mock_gpu.h"


/* A device tensor of 3 MiB and a host one, saved with a 1 MiB ring
 * (synchronously and in the background), and restored into fresh device
 * memory: the same bytes.  The saves run on a thread with no context
 * current, the restores on one with a context of the program's own: both
 * find their thread as they left it. */
static void test_device_tensors_save_and_restore(void)
{
	enum { N = 3 << 18 };   /* floats: 3 MiB */
	const uint64_t shape[1] = { N }, hshape[1] = { 64 };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	float *dev = dev_alloc(N * sizeof(float)), *back = dev_alloc(N * sizeof(float));
	float host[64], host_back[64];
	uint64_t step_blob = 7, blob_back = 0;
	herd_ckpt *ck = NULL;
	int64_t restored = -1;
	void *mine;
	char *dir;

	CHECK(dev != NULL && back != NULL);
	if (dev == NULL || back == NULL)
		return;
	dir = make_tmpdir();
	for (size_t i = 0; i < N; i++)
		dev[i] = (float)i * 0.25f;
	for (size_t i = 0; i < 64; i++)
		host[i] = (float)i;
	o.staging_bytes = 1u << 20;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", dev, HERD_FLOAT32, 1, shape, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "h", host, HERD_FLOAT32, 1, hshape, NULL, NULL));
	CHECK_OK(herd_ckpt_add_blob(ck, "step", &step_blob, sizeof(step_blob),
				    HERD_CKPT_BLOB_SAME_RANK));
	CHECK_ERR(herd_ckpt_add_blob(ck, "bad", back, 16, HERD_CKPT_BLOB_SAME_RANK), HERD_EINVAL,
		  "a blob is host memory");
	CHECK(dev_current_context() == NULL);
	CHECK_OK(herd_ckpt_save(ck, 1));
	for (size_t i = 0; i < N; i++)
		dev[i] = -1.0f;
	CHECK_OK(herd_ckpt_save_async(ck, 2));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	ck = NULL;
	CHECK(dev_current_context() == NULL);

	/* restore step 1 into fresh memory */
	mine = dev_own_context();
	CHECK(mine != NULL);
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", back, HERD_FLOAT32, 1, shape, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "h", host_back, HERD_FLOAT32, 1, hshape, NULL, NULL));
	CHECK_OK(herd_ckpt_add_blob(ck, "step", &blob_back, sizeof(blob_back),
				    HERD_CKPT_BLOB_SAME_RANK));
	CHECK_OK(herd_ckpt_restore(ck, 1, &restored));
	CHECK_INT(restored, 1);
	CHECK(memcmp(host, host_back, sizeof(host)) == 0);
	CHECK_INT(blob_back, 7);
	{
		size_t bad = 0;

		for (size_t i = 0; i < N; i++)
			bad += back[i] != (float)i * 0.25f;
		CHECK_INT(bad, 0);
	}
	/* and the background save of step 2 */
	CHECK_OK(herd_ckpt_restore(ck, 2, &restored));
	CHECK_INT(restored, 2);
	CHECK(back[0] == -1.0f && back[N - 1] == -1.0f);
	herd_ckpt_free(ck);
	CHECK(dev_current_context() == mine);
	rm_tree(dir);
}

/* A 2-D device tensor saved whole and restored as a shard of rows, in
 * slabs of half the staging size (8 rows of 4000 bytes in 32 KiB: four
 * slabs, the two host buffers taking turns). */
static void test_device_shard_restores_in_slabs(void)
{
	enum { R = 64, C = 1000 };
	const uint64_t shape[2] = { R, C }, off[2] = { 16, 0 }, part[2] = { 32, C };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	float *whole = dev_alloc(R * C * sizeof(float)), *half = dev_alloc(32 * C * sizeof(float));
	herd_ckpt *ck = NULL;
	int64_t restored = -1;
	size_t bad = 0;
	char *dir;

	CHECK(whole != NULL && half != NULL);
	if (whole == NULL || half == NULL)
		return;
	dir = make_tmpdir();
	for (size_t i = 0; i < (size_t)R * C; i++)
		whole[i] = (float)i;
	o.staging_bytes = 64 << 10;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "m", whole, HERD_FLOAT32, 2, shape, NULL, NULL));
	CHECK_OK(herd_ckpt_save(ck, 5));
	herd_ckpt_free(ck);
	ck = NULL;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "m", half, HERD_FLOAT32, 2, shape, off, part));
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &restored));
	CHECK_INT(restored, 5);
	for (size_t i = 0; i < (size_t)32 * C; i++)
		bad += half[i] != (float)(16 * C + i);
	CHECK_INT(bad, 0);
	herd_ckpt_free(ck);
	rm_tree(dir);
}

/* A device copy that fails fails the save with the driver's words, and
 * commits nothing. */
static void test_failed_device_copy_fails_the_save(void)
{
	const uint64_t shape[1] = { 1 << 16 };
	float *dev = dev_alloc(sizeof(float) << 16);
	herd_ckpt_step_info *steps = NULL;
	herd_ckpt *ck = NULL;
	size_t n = 99;
	char *dir = make_tmpdir();

	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", dev, HERD_FLOAT32, 1, shape, NULL, NULL));
	setenv("HERD_MOCK_CUDA", "copy-fail", 1);
	CHECK_ERR(herd_ckpt_save(ck, 3), HERD_EIO,
		  "staging a device tensor: copying 262144 bytes from the GPU");
	unsetenv("HERD_MOCK_CUDA");
	CHECK_OK(herd_ckpt_list(dir, &steps, &n));
	CHECK_INT(n, 0);
	herd_free(steps);
	herd_ckpt_free(ck);
	rm_tree(dir);
}

/* A copy to the device that fails fails the restore with the driver's
 * words as HERD_ENODEV, after every copy started has finished, and the
 * step is not taken for damaged: no older step is tried. */
static void test_failed_device_copy_fails_the_restore(void)
{
	enum { R = 64, C = 1000 };
	const uint64_t shape[2] = { R, C };
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	float *m = dev_alloc(R * C * sizeof(float));
	herd_ckpt *ck = NULL;
	int64_t restored = 99;
	char *dir;

	CHECK(m != NULL);
	if (m == NULL)
		return;
	dir = make_tmpdir();
	o.staging_bytes = 64 << 10;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "m", m, HERD_FLOAT32, 2, shape, NULL, NULL));
	CHECK_OK(herd_ckpt_save(ck, 1));
	CHECK_OK(herd_ckpt_save(ck, 2));
	setenv("HERD_MOCK_CUDA", "upload-fail", 1);
	CHECK_ERR(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &restored), HERD_ENODEV,
		  "restoring checkpoint step 2: ");
	CHECK(strstr(herd_last_error(), "bytes to the GPU: ") != NULL);
	CHECK_INT(restored, -1);
	unsetenv("HERD_MOCK_CUDA");
	CHECK_OK(herd_ckpt_restore(ck, HERD_CKPT_LATEST, &restored));
	CHECK_INT(restored, 2);
	herd_ckpt_free(ck);
	rm_tree(dir);
}

int main(void)
{
	TEST_RUN(test_device_tensors_save_and_restore);
	TEST_RUN(test_device_shard_restores_in_slabs);
	TEST_RUN(test_failed_device_copy_fails_the_save);
	TEST_RUN(test_failed_device_copy_fails_the_restore);
	return TEST_DONE();
}
