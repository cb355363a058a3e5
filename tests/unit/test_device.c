/*
 * herd/device.h through the public API: built without CUDA every call
 * says so (HERD_EUNAVAIL) and hands out nothing, but the count, which on a
 * machine without an NVIDIA driver says that first; built with CUDA bad
 * arguments are refused naming the call before any GPU is looked at, a
 * machine without a usable GPU is HERD_ENODEV with the driver's absence in
 * herd discover's words where there is no driver, and on
 * a GPU nccl-tests' data verifies against itself and not against another
 * seed, a GPU out of range is refused and more memory than the GPU has is
 * HERD_ENOMEM.
 */
#include "test.h"

#include "herd_config.h"
#include "topo/probe.h"

/* Whether NVML answers; why[] says why not (discovery's words). */
static bool driver_answers(char *why, size_t cap)
{
	char version[64];

	return herd__nvml_driver_version(version, sizeof(version), why, cap);
}

static void test_device_supported_says_how_libherd_was_built(void)
{
	CHECK_INT(herd_device_supported(), HERD_HAVE_CUDA != 0);
}

static void test_device_without_cuda_every_call_is_eunavail(void)
{
	int n = 5;
	void *p = &n;
	uint64_t wrong = 9;

	char why[HERD_TOPO_WHY_LEN], want[HERD_TOPO_WHY_LEN + 16];

	if (herd_device_supported())
		TEST_SKIP("libherd is built with CUDA");
	if (driver_answers(why, sizeof(why))) {
		CHECK_ERR(herd_device_count(&n), HERD_EUNAVAIL,
			  "herd_device_count: this libherd was built without CUDA");
	} else {
		snprintf(want, sizeof(want), "no GPU: %s", why);
		CHECK_ERR(herd_device_count(&n), HERD_ENODEV, want);
		CHECK(strncmp(why, "NVIDIA driver", 13) == 0 || strncmp(why, "NVML", 4) == 0);
	}
	CHECK_INT(n, 0);
	CHECK_ERR(herd_device_set(0), HERD_EUNAVAIL, "built without CUDA");
	CHECK_ERR(herd_device_alloc(&p, 64), HERD_EUNAVAIL, "herd_device_alloc");
	CHECK(p == NULL);
	CHECK_ERR(herd_device_fill(&n, 1, HERD_INT32, HERD_SUM, 0, 1, 1, NULL), HERD_EUNAVAIL,
		  "herd_device_fill: this libherd was built without CUDA");
	CHECK_ERR(herd_device_verify(&n, 1, HERD_INT32, HERD_SUM, 1, 1, NULL, &wrong),
		  HERD_EUNAVAIL, "herd_device_verify: this libherd was built without CUDA");
	CHECK_INT(wrong, 0);
	CHECK_ERR(herd_device_sync(NULL), HERD_EUNAVAIL, "herd_device_sync");
	herd_device_free(NULL);
}

static void test_device_bad_arguments_are_refused_naming_the_call(void)
{
	uint64_t wrong = 9;
	int x = 0;

	if (!herd_device_supported())
		TEST_SKIP("libherd is built without CUDA");
	CHECK_ERR(herd_device_count(NULL), HERD_EINVAL, "herd_device_count: count is NULL");
	CHECK_ERR(herd_device_alloc(NULL, 8), HERD_EINVAL, "herd_device_alloc: out is NULL");
	CHECK_ERR(herd_device_fill(NULL, 5, HERD_FLOAT32, HERD_SUM, 0, 1, 1, NULL), HERD_EINVAL,
		  "herd_device_fill: buf is NULL with count 5");
	CHECK_ERR(herd_device_fill(&x, 1, (herd_dtype)99, HERD_SUM, 0, 1, 1, NULL), HERD_EINVAL,
		  "herd_device_fill: dtype 99 is not a herd_dtype");
	CHECK_ERR(herd_device_fill(&x, 1, HERD_INT32, (herd_redop)99, 0, 1, 1, NULL), HERD_EINVAL,
		  "herd_device_fill: op 99 is not a herd_redop");
	CHECK_ERR(herd_device_fill(&x, 1, HERD_INT32, HERD_SUM, 2, 2, 1, NULL), HERD_EINVAL,
		  "herd_device_fill: rank 2 of 2 ranks");
	CHECK_ERR(herd_device_verify(&x, 1, HERD_INT32, HERD_SUM, 1, 1, NULL, NULL), HERD_EINVAL,
		  "herd_device_verify: wrong is NULL");
	CHECK_ERR(herd_device_verify(&x, 1, HERD_INT32, HERD_SUM, 0, 1, NULL, &wrong), HERD_EINVAL,
		  "herd_device_verify: rank 0 of 0 ranks");
	CHECK_INT(wrong, 0);
	/* nothing to do is done, GPU or not */
	CHECK_OK(herd_device_fill(NULL, 0, HERD_INT32, HERD_SUM, 0, 1, 1, NULL));
	CHECK_OK(herd_device_verify(NULL, 0, HERD_INT32, HERD_SUM, 1, 1, NULL, &wrong));
	herd_device_free(NULL);
}

static void test_device_without_a_gpu_is_enodev_in_discoverys_words(void)
{
	char why[HERD_TOPO_WHY_LEN], want[HERD_TOPO_WHY_LEN + 16];
	void *p = &p;
	int n = 5, x = 0;

	if (!herd_device_supported())
		TEST_SKIP("libherd is built without CUDA");
	if (herd_device_count(&n) == HERD_OK)
		TEST_SKIP("this machine has %d GPUs", n);
	/* No driver: its absence, not CUDA's "driver version is insufficient". */
	if (driver_answers(why, sizeof(why)))
		snprintf(want, sizeof(want), "no GPU: counting the GPUs: ");
	else
		snprintf(want, sizeof(want), "no GPU: %s", why);
	CHECK_ERR(herd_device_count(&n), HERD_ENODEV, want);
	CHECK_INT(n, 0);
	CHECK_ERR(herd_device_set(0), HERD_ENODEV, want);
	CHECK_ERR(herd_device_alloc(&p, 64), HERD_ENODEV, "no GPU: ");
	CHECK(p == NULL);
	/* no GPU to run on: the host address is never touched */
	CHECK(herd_device_fill(&x, 1, HERD_INT32, HERD_SUM, 0, 1, 1, NULL) == HERD_ENODEV);
}

static void test_device_fill_verifies_against_its_seed_only(void)
{
	enum { COUNT = 100003 };
	uint64_t wrong = 9;
	void *buf = NULL, *big = &wrong;
	int n = 0;

	if (!herd_device_supported())
		TEST_SKIP("libherd is built without CUDA");
	if (herd_device_count(&n) != HERD_OK)
		TEST_SKIP("%s", herd_last_error());
	CHECK_ERR(herd_device_set(n), HERD_EINVAL, "is out of range");
	CHECK_OK(herd_device_set(0));
	CHECK_OK(herd_device_alloc(&buf, COUNT * sizeof(float)));
	CHECK_OK(herd_device_fill(buf, COUNT, HERD_FLOAT32, HERD_SUM, 0, 1, 42, NULL));
	CHECK_OK(herd_device_sync(NULL));
	CHECK_OK(herd_device_verify(buf, COUNT, HERD_FLOAT32, HERD_SUM, 1, 42, NULL, &wrong));
	CHECK_INT(wrong, 0);
	CHECK_OK(herd_device_verify(buf, COUNT, HERD_FLOAT32, HERD_SUM, 1, 43, NULL, &wrong));
	CHECK(wrong > 0);
	herd_device_free(buf);
	/* a petabyte: more than any GPU has */
	CHECK_ERR(herd_device_alloc(&big, (size_t)1 << 50), HERD_ENOMEM, "bytes on the GPU");
	CHECK(big == NULL);
}

int main(void)
{
	TEST_RUN(test_device_supported_says_how_libherd_was_built);
	TEST_RUN(test_device_without_cuda_every_call_is_eunavail);
	TEST_RUN(test_device_bad_arguments_are_refused_naming_the_call);
	TEST_RUN(test_device_without_a_gpu_is_enodev_in_discoverys_words);
	TEST_RUN(test_device_fill_verifies_against_its_seed_only);
	return TEST_DONE();
}
