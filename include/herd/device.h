/*
 * herd/device.h - GPU memory for programs that benchmark and check
 * collectives on device memory (herd/comm.h), as nccl-tests does: choose a
 * GPU, allocate its memory, fill buffers with nccl-tests' data and verify
 * a result against the exact reduction, on the GPU itself.
 *
 * The calls go through the CUDA runtime that libherd was built with, on
 * the calling thread's current device (herd_device_set; the CUDA runtime's
 * own choice, device 0 of those the process sees, until then), in the
 * device's primary context, the one herd/comm.h's device calls use.
 * A libherd built without CUDA has them all: each returns HERD_EUNAVAIL
 * ("... this libherd was built without CUDA"), which herd_device_supported
 * tells beforehand without looking at the machine, but herd_device_count
 * on a machine without an NVIDIA driver (below).  Built with CUDA, on a
 * machine with no usable GPU (none, no driver, a driver older than the
 * runtime) they return HERD_ENODEV with "no GPU: " and the reason as herd
 * discover gives it: "NVIDIA driver not found: ..." where NVML cannot be
 * loaded, else CUDA's reason; any other CUDA failure is HERD_EIO with
 * CUDA's text and error name.
 *
 * Threads: a thread's current device is its own; the calls are safe from
 * any thread on memory that no other thread frees meanwhile.
 */
#ifndef HERD_DEVICE_H
#define HERD_DEVICE_H

#include "comm.h"
#include "common.h"
#include "dtype.h"
#include "redop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this libherd was built with CUDA, so that the calls below can
 * work where a GPU is; looks at no device. */
HERD_EXTERN bool herd_device_supported(void);

#define HERD_DEVICE_VERSIONS_LEN 256

/*
 * The GPU software of this machine as libherd sees it, one line for
 * people: the CUDA toolkit and NCCL libherd was built with and the driver
 * found at run time, e.g. "built with CUDA 13.0.88 and NCCL 2.28.9; driver
 * 580.159.04 (CUDA 13.0)", "built with CUDA 13.0.88 and NCCL 2.28.9;
 * NVIDIA driver not found (...)" or "built without CUDA, without NCCL;
 * ...".  Writes into buf and returns it.
 */
HERD_EXTERN const char *herd_device_versions(char buf[HERD_DEVICE_VERSIONS_LEN]);

/* The number of GPUs this process sees (after CUDA_VISIBLE_DEVICES), at
 * least 1; HERD_ENODEV when it sees none, in either build where the
 * machine has no NVIDIA driver ("no GPU: NVIDIA driver not found: ..."),
 * so that a program built without CUDA says first that there is no GPU. */
HERD_EXTERN herd_status herd_device_count(int *count);

/*
 * Makes GPU index (CUDA's numbering of the GPUs this process sees, from 0;
 * CUDA_DEVICE_ORDER=PCI_BUS_ID, which herd launch sets, orders them by
 * PCI bus id) the calling thread's current device, for the calls below
 * and for the caller's own CUDA calls.  HERD_EINVAL for an index out of
 * range.
 */
HERD_EXTERN herd_status herd_device_set(int index);

/*
 * bytes of the current device's memory (cudaMalloc), zeroed, in *out
 * (NULL on failure), freed with herd_device_free.  bytes 0 gives a valid
 * allocation of one byte.  HERD_ENOMEM when the GPU's memory is short.
 * Blocks until the memory is zeroed.
 */
HERD_EXTERN herd_status herd_device_alloc(void **out, size_t bytes);

/* Frees memory from herd_device_alloc.  Accepts NULL; never fails. */
HERD_EXTERN void herd_device_free(void *ptr);

/*
 * nccl-tests' data, made on the GPU: fill writes rank's contribution of
 * count elements of dtype to buf (device memory), small integers chosen
 * from (seed, index, rank) so that the reduction op over nranks ranks is
 * exact in every type where the sums fit its mantissa (bfloat16's 8 bits
 * for nranks <= 64; float8_e4m3 to 8 ranks, float8_e5m2 to 4; beyond, the
 * expected value is the exact one rounded once, as herd reduces; integer
 * types wrap as defined).  verify compares buf with the reduction of all
 * nranks contributions made with the same seed and sets *wrong to the
 * number of elements that differ bit for bit.  A copy of one rank's data
 * (a broadcast, a block of an allgather) is checked as a reduction of
 * nranks 1 with that rank's seed (rank 0 of 1).  The work is queued on
 * stream (a cudaStream_t; NULL: the legacy default stream) after what is
 * there; fill returns without waiting, verify waits for its count.
 * HERD_EINVAL naming the argument for an unknown dtype or op, a rank
 * outside 0..nranks-1, or a NULL buf with a non-zero count (wrong NULL).
 */
HERD_EXTERN herd_status herd_device_fill(void *buf, size_t count, herd_dtype dtype,
					 herd_redop op, int rank, int nranks, uint64_t seed,
					 herd_stream stream);
HERD_EXTERN herd_status herd_device_verify(const void *buf, size_t count, herd_dtype dtype,
					   herd_redop op, int nranks, uint64_t seed,
					   herd_stream stream, uint64_t *wrong);

/*
 * Waits until the work queued on stream is done (NULL: the legacy default
 * stream, which also waits for the streams created blocking).  A failure
 * of that work (an illegal address, a kernel that faulted) comes back
 * here as HERD_EIO.
 */
HERD_EXTERN herd_status herd_device_sync(herd_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* HERD_DEVICE_H */
