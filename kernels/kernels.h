/*
 * kernels/kernels.h - herd's CUDA kernels behind C launchers.  Internal:
 * built only when libherd is built with CUDA (HERD_HAVE_CUDA), and called
 * by herd's own code, benchmarks and tests, never by users.
 *
 * Every launcher takes device pointers and a stream (NULL: the legacy
 * default stream), queues its work on that stream and returns without
 * waiting, except where it says it synchronises.  A CUDA failure comes
 * back as HERD_ENODEV when there is no usable GPU (no device, no driver,
 * a driver older than the runtime) and HERD_EIO otherwise, with the CUDA
 * error's own text in herd_last_error(); a bad argument is HERD_EINVAL
 * naming it.  Nothing here exits or prints.
 *
 * Semantics are the host's (sdk/comm/reduce.c), so that a reduction gives
 * the same bits wherever it runs: integer SUM and PROD wrap around, AVG
 * truncates toward zero, MIN and MAX propagate NaN, the narrow floating
 * types (float16, bfloat16, float8_e4m3, float8_e5m2) reduce through
 * float32 and round once per call, into the 8-bit floats saturating.
 */
#ifndef HERD_KERNELS_H
#define HERD_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "herd/dtype.h"
#include "herd/redop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A cudaStream_t, without making every includer include the runtime's header. */
typedef struct CUstream_st *herd__kstream;

/* The most sources one herd__k_reduce call combines. */
#define HERD__K_MAX_SRCS 8

/*
 * dst[i] = srcs[0][i] OP srcs[1][i] OP ... OP srcs[nsrc-1][i], for count
 * elements, 1 <= nsrc <= HERD__K_MAX_SRCS (nsrc 1 copies, or divides for
 * AVG).  AVG sums and divides by nsrc.  dst may be one of the sources.
 * The narrow floating types accumulate in float32 and round once at the end.
 * Any alignment works; 16-byte aligned pointers take the wide path.
 */
herd_status herd__k_reduce(void *dst, const void *const *srcs, int nsrc, size_t count,
			  herd_dtype dtype, herd_redop op, herd__kstream stream);

/*
 * buf[i] /= div for count elements, in place, as AVG divides a sum: the
 * integer types truncate toward zero, the narrow floats divide in float32
 * and round once.  div >= 1.
 */
herd_status herd__k_divide(void *buf, size_t count, herd_dtype dtype, int div,
			  herd__kstream stream);

/*
 * dst[i] = src[i] converted from one floating-point type to another
 * (float16, bfloat16, float32, float64, float8_e4m3, float8_e5m2; the same
 * type copies), rounding to nearest even once, NaN and infinities kept
 * (into the 8-bit floats an infinity saturates).  Integer types are refused.
 */
herd_status herd__k_cast(void *dst, herd_dtype to, const void *src, herd_dtype from,
			size_t count, herd__kstream stream);

/*
 * The benchmark's data, as nccl-tests makes it: small integers from
 * (seed, index, rank), chosen per operation so that the reduction over
 * nranks ranks is exact in every type where the sums fit its mantissa
 * (bfloat16's 8 bits for nranks <= 64; float8_e4m3 to 8 ranks, float8_e5m2
 * to 4; beyond, the expected value is the exact one rounded once, as herd
 * reduces; integer types wrap as defined).
 * fill writes rank's contribution; verify compares buf with the reduction
 * of all nranks contributions and sets *wrong to the number of elements
 * that differ bit for bit.  verify synchronises the stream.
 */
herd_status herd__k_fill(void *buf, size_t count, herd_dtype dtype, herd_redop op, int rank,
			int nranks, uint64_t seed, herd__kstream stream);
herd_status herd__k_verify(const void *buf, size_t count, herd_dtype dtype, herd_redop op,
			  int nranks, uint64_t seed, uint64_t *wrong, herd__kstream stream);

/* Which copy herd__k_copy_bandwidth times. */
typedef enum herd__kcopy {
	HERD__KCOPY_D2D = 0,   /* device to device, one GPU */
	HERD__KCOPY_H2D = 1,   /* pinned host to device */
	HERD__KCOPY_D2H = 2    /* device to pinned host */
} herd__kcopy;

/*
 * The copy-bandwidth probe: times `repeats` copies of `bytes` on the
 * current device with CUDA events after one untimed copy, and gives the
 * median rate in GB/s (1e9 bytes per second).  Device to device counts the
 * bytes read plus the bytes written, as a memory bandwidth; the host copies
 * count the bytes moved once, as a link bandwidth.  Allocates and frees its
 * own buffers; synchronises.
 */
herd_status herd__k_copy_bandwidth(herd__kcopy kind, size_t bytes, int repeats, double *gbps);

/* The number of CUDA devices this process sees; HERD_ENODEV (with CUDA's
 * reason) when it sees none. */
herd_status herd__k_device_count(int *count);

/* Makes CUDA device `index` current for the calling thread. */
herd_status herd__k_set_device(int index);

/* Waits until the work queued on stream is done (NULL: the legacy default
 * stream, which also waits for the streams created blocking). */
herd_status herd__k_sync(herd__kstream stream);

/* bytes of the current device's memory (cudaMalloc), zeroed (HERD_ENOMEM
 * when the device's memory is short); and freed. */
herd_status herd__k_alloc(void **p, size_t bytes);
void herd__k_free(void *p);

/* What herd__k_burn did. */
typedef struct herd__kburn {
	int n;                  /* the matrices' order */
	long iterations;        /* products computed */
	double seconds;         /* wall time of the loop */
	double tflops;          /* 2 n^3 iterations / seconds, in 1e12 per second */
	uint64_t wrong;         /* elements of any product that differ from the reference */
} herd__kburn;

/*
 * The burn test: float32 matrix products of order n through cuBLAS
 * (loaded at run time, libcublas.so.<CUDA major>) on the current device
 * for about `seconds`, each compared element for element with a product
 * computed once by herd's own kernel.  The inputs are small integers, so
 * every correct product is exact and any difference is a fault.
 * HERD_EUNAVAIL when cuBLAS cannot be loaded.  Synchronises.
 */
herd_status herd__k_burn(double seconds, int n, herd__kburn *out);

#ifdef __cplusplus
}
#endif

#endif /* HERD_KERNELS_H */
