/*
 * sdk/comm/device.c - herd/device.h: GPU memory and nccl-tests' data for
 * programs that benchmark device collectives, over the kernels of
 * kernels/ (fill, verify and the CUDA runtime's device calls).  The
 * arguments are checked here, so that a message names the public call;
 * what CUDA says comes back as the kernels word it.
 */
#include "herd/device.h"

#include "base.h"
#include "herd_config.h"

#if HERD_HAVE_CUDA
#include "kernels.h"
#endif

bool herd_device_supported(void)
{
	return HERD_HAVE_CUDA != 0;
}

#if HERD_HAVE_CUDA

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
	return herd__k_device_count(count);
}

herd_status herd_device_set(int index)
{
	int n = 0;

	HERD_CHECK(herd__k_device_count(&n));
	if (index < 0 || index >= n)
		return herd__error(HERD_EINVAL, "%s: GPU %d is out of range: this process sees %d "
				   "(0..%d)", __func__, index, n, n - 1);
	return herd__k_set_device(index);
}

herd_status herd_device_alloc(void **out, size_t bytes)
{
	if (out == NULL)
		return herd__error(HERD_EINVAL, "%s: out is NULL", __func__);
	return herd__k_alloc(out, bytes);
}

void herd_device_free(void *ptr)
{
	herd__k_free(ptr);
}

herd_status herd_device_fill(void *buf, size_t count, herd_dtype dtype, herd_redop op, int rank,
			     int nranks, uint64_t seed, herd_stream stream)
{
	HERD_CHECK(check_data(__func__, buf, count, dtype, op, rank, nranks));
	return herd__k_fill(buf, count, dtype, op, rank, nranks, seed, stream);
}

herd_status herd_device_verify(const void *buf, size_t count, herd_dtype dtype, herd_redop op,
			       int nranks, uint64_t seed, herd_stream stream, uint64_t *wrong)
{
	if (wrong == NULL)
		return herd__error(HERD_EINVAL, "%s: wrong is NULL", __func__);
	*wrong = 0;
	HERD_CHECK(check_data(__func__, buf, count, dtype, op, 0, nranks));
	return herd__k_verify(buf, count, dtype, op, nranks, seed, wrong, stream);
}

herd_status herd_device_sync(herd_stream stream)
{
	return herd__k_sync(stream);
}

#else /* !HERD_HAVE_CUDA */

static herd_status no_cuda(const char *fn)
{
	return herd__error(HERD_EUNAVAIL, "%s: this libherd was built without CUDA", fn);
}

herd_status herd_device_count(int *count)
{
	if (count != NULL)
		*count = 0;
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
