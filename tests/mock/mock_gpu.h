/*
 * tests/mock/mock_gpu.h - what a test does with the NVIDIA driver as a
 * CUDA program would: device memory (cuMemAlloc), a stream
 * (cuStreamCreate) and contexts of its own (cuCtxCreate), through dlopen,
 * so that the test links nothing but libherd.  The driver is the stand-in
 * (tests/mock/cuda_mock.c) in the tests here, the real one in the gpu
 * tests (which use the contexts only).
 */
#ifndef HERD_TEST_MOCK_GPU_H
#define HERD_TEST_MOCK_GPU_H

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* An entry point of the driver ctest put first on LD_LIBRARY_PATH. */
static inline void *mock_driver_sym(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	return h != NULL ? dlsym(h, name) : NULL;
}

/* bytes of "device" memory, or NULL. */
static inline void *dev_alloc(size_t bytes)
{
	int (*alloc)(unsigned long long *, size_t);
	void *sym = mock_driver_sym("cuMemAlloc_v2");
	unsigned long long p = 0;

	memcpy(&alloc, &sym, sizeof(sym));
	if (alloc == NULL || alloc(&p, bytes) != 0)
		return NULL;
	return (void *)(uintptr_t)p;
}

/* A context of the program's own on GPU dev, current on this thread from
 * now on (cuCtxCreate), or NULL. */
static inline void *dev_own_context_on(int dev)
{
	int (*create)(void **, unsigned int, int);
	void *sym = mock_driver_sym("cuCtxCreate_v2"), *ctx = NULL;

	memcpy(&create, &sym, sizeof(sym));
	if (create == NULL || create(&ctx, 0, dev) != 0)
		return NULL;
	return ctx;
}

static inline void *dev_own_context(void)
{
	return dev_own_context_on(0);
}

/* The context current on this thread (cuCtxGetCurrent). */
static inline void *dev_current_context(void)
{
	int (*get)(void **);
	void *sym = mock_driver_sym("cuCtxGetCurrent"), *ctx = NULL;

	memcpy(&get, &sym, sizeof(sym));
	if (get == NULL || get(&ctx) != 0)
		return NULL;
	return ctx;
}

/* A stream in a context of the program's own, as cudaStreamCreate would
 * give in a program that set its device, or NULL. */
static inline struct CUstream_st *dev_stream(void)
{
	int (*create)(struct CUstream_st **, unsigned int);
	void *sym = mock_driver_sym("cuStreamCreate");
	struct CUstream_st *s = NULL;

	memcpy(&create, &sym, sizeof(sym));
	if (dev_current_context() == NULL && dev_own_context() == NULL)
		return NULL;
	if (create == NULL || create(&s, 1) != 0)
		return NULL;
	return s;
}

#endif /* HERD_TEST_MOCK_GPU_H */
