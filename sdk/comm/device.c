/*
 * sdk/comm/device.c - herd/device.h: GPU memory and nccl-tests' data for
 * programs that benchmark device collectives, over the kernels of
 * kernels/ (fill, verify and the CUDA runtime's device calls).  The
 * arguments are checked here, so that a message names the public call;
 * what CUDA says comes back as the kernels word it, but for a machine with
 * no GPU, which is said in discovery's words.
 */
#include "herd/device.h"

#include <stdio.h>
#include <string.h>

#include "base.h"
#include "herd_config.h"
#include "topo/probe.h"

#if HERD_HAVE_CUDA
#include "kernels.h"
#endif

bool herd_device_supported(void)
{
	return HERD_HAVE_CUDA != 0;
}

/*
 * Whether the NVIDIA driver answers, as herd discover asks it (NVML); when
 * it does not, why[] says why in discovery's words ("NVIDIA driver not
 * found: libnvidia-ml.so.1: cannot open shared object file: ...").
 */
static bool driver_answers(char *why, size_t cap)
{
	char version[64];

	return herd__nvml_driver_version(version, sizeof(version), why, cap);
}

#if HERD_HAVE_CUDA

/*
 * st of a call that found no usable GPU (HERD_ENODEV), worded as herd
 * discover words it: "no GPU: " and, where there is no driver, the
 * driver's absence, not what CUDA made of it ("CUDA driver version is
 * insufficient"); where there is one, CUDA's message.  Other statuses pass.
 */
static herd_status gpu_status(herd_status st)
{
	char why[HERD_TOPO_WHY_LEN], cuda[HERD_TOPO_WHY_LEN];

	if (st != HERD_ENODEV)
		return st;
	herd__strlcpy(cuda, herd_last_error(), sizeof(cuda));
	if (driver_answers(why, sizeof(why)))
		return herd__error(st, "no GPU: %s", cuda);
	return herd__error(st, "no GPU: %s", why);
}

/* What fill and verify refuse before any work is queued. */
static herd_status check_data(const char *fn, const void *buf, size_t count, herd_dtype dtype,
			      herd_redop op, int rank, int nranks)
{
	if (buf == NULL && count != 0)
		return herd__error(HERD_EINVAL, "%s: buf is NULL with count %zu", fn, count);
	if ((unsigned)dtype >= HERD_DTYPE_COUNT)
		return herd__error(HERD_EINVAL, "%s: dtype %d is not a herd_dtype (expected 0..%d)",
				   fn, (int)dtype, HERD_DTYPE_COUNT - 1);
	if ((unsigned)op >= HERD_REDOP_COUNT)
		return herd__error(HERD_EINVAL, "%s: op %d is not a herd_redop (expected 0..%d)",
				   fn, (int)op, HERD_REDOP_COUNT - 1);
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return herd__error(HERD_EINVAL, "%s: rank %d of %d ranks (expected 0..nranks-1, "
				   "nranks 1 or more)", fn, rank, nranks);
	return HERD_OK;
}

herd_status herd_device_count(int *count)
{
	if (count == NULL)
		return herd__error(HERD_EINVAL, "%s: count is NULL", __func__);
	return gpu_status(herd__k_device_count(count));
}

herd_status herd_device_set(int index)
{
	int n = 0;

	HERD_CHECK(gpu_status(herd__k_device_count(&n)));
	if (index < 0 || index >= n)
		return herd__error(HERD_EINVAL, "%s: GPU %d is out of range: this process sees %d "
				   "(0..%d)", __func__, index, n, n - 1);
	return gpu_status(herd__k_set_device(index));
}

herd_status herd_device_alloc(void **out, size_t bytes)
{
	if (out == NULL)
		return herd__error(HERD_EINVAL, "%s: out is NULL", __func__);
	return gpu_status(herd__k_alloc(out, bytes));
}

void herd_device_free(void *ptr)
{
	herd__k_free(ptr);
}

herd_status herd_device_fill(void *buf, size_t count, herd_dtype dtype, herd_redop op, int rank,
			     int nranks, uint64_t seed, herd_stream stream)
{
	HERD_CHECK(check_data(__func__, buf, count, dtype, op, rank, nranks));
	return gpu_status(herd__k_fill(buf, count, dtype, op, rank, nranks, seed, stream));
}

herd_status herd_device_verify(const void *buf, size_t count, herd_dtype dtype, herd_redop op,
			       int nranks, uint64_t seed, herd_stream stream, uint64_t *wrong)
{
	if (wrong == NULL)
		return herd__error(HERD_EINVAL, "%s: wrong is NULL", __func__);
	*wrong = 0;
	HERD_CHECK(check_data(__func__, buf, count, dtype, op, 0, nranks));
	return gpu_status(herd__k_verify(buf, count, dtype, op, nranks, seed, wrong, stream));
}

herd_status herd_device_sync(herd_stream stream)
{
	return gpu_status(herd__k_sync(stream));
}

#else /* !HERD_HAVE_CUDA */

static herd_status no_cuda(const char *fn)
{
	return herd__error(HERD_EUNAVAIL, "%s: this libherd was built without CUDA", fn);
}

/* Without CUDA this process sees no GPU either way; where the machine has
 * none, that is the first thing to say (as herd discover says it). */
herd_status herd_device_count(int *count)
{
	char why[HERD_TOPO_WHY_LEN];

	if (count != NULL)
		*count = 0;
	if (!driver_answers(why, sizeof(why)))
		return herd__error(HERD_ENODEV, "no GPU: %s", why);
	return no_cuda(__func__);
}

herd_status herd_device_set(int index)
{
	return no_cuda(__func__);
}

herd_status herd_device_alloc(void **out, size_t bytes)
{
	if (out != NULL)
		*out = NULL;
	return no_cuda(__func__);
}

void herd_device_free(void *ptr)
{
}

herd_status herd_device_fill(void *buf, size_t count, herd_dtype dtype, herd_redop op, int rank,
			     int nranks, uint64_t seed, herd_stream stream)
{
	return no_cuda(__func__);
}

herd_status herd_device_verify(const void *buf, size_t count, herd_dtype dtype, herd_redop op,
			       int nranks, uint64_t seed, herd_stream stream, uint64_t *wrong)
{
	if (wrong != NULL)
		*wrong = 0;
	return no_cuda(__func__);
}

herd_status herd_device_sync(herd_stream stream)
{
	return no_cuda(__func__);
}

#endif /* HERD_HAVE_CUDA */
