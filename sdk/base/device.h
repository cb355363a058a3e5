/*
 * sdk/base/device.h - GPU memory as libherd meets it in a caller's
 * pointers, through the NVIDIA driver's API (libcuda.so.1) loaded at run
 * time: libherd runs, and treats every pointer as host memory, where there
 * is no driver or no GPU.
 *
 * Calls are thread-safe; the driver is loaded and initialized (cuInit) at
 * the first call that needs it, once.  Errors are HERD_ENODEV when no GPU
 * can be used at all and HERD_EIO for a failing driver call, with the
 * driver's own text ("cuStreamCreate: out of memory (CUDA_ERROR_...)").
 */
#ifndef HERD_BASE_DEVICE_H
#define HERD_BASE_DEVICE_H

#include <stdbool.h>

#include "base.h"

/* Where memory is. */
typedef enum herd__mem {
	HERD__MEM_HOST = 0,     /* pageable or pinned host memory, or no GPU here */
	HERD__MEM_DEVICE = 1    /* a GPU's memory, or managed memory */
} herd__mem;

/* Where p points; for device memory the device's ordinal (CUDA's, in this
 * process's CUDA_VISIBLE_DEVICES) in *device. */
herd__mem herd__dev_where(const void *p, int *device);

/* Makes device's primary context current on the calling thread, as
 * cudaSetDevice does, so that the CUDA runtime and NCCL act on it: for
 * libherd's own threads.  The primary context is retained once per
 * device and kept for the life of the process, as the runtime does. */
herd_status herd__dev_use(int device);

/* The same on a caller's thread, around libherd's work there: *saved gets
 * the context that was current, which herd__dev_leave makes current again,
 * so that a caller working on another device (or context) finds it as it
 * left it.  Nothing is switched when device's context is current already. */
herd_status herd__dev_enter(int device, void **saved);
void herd__dev_leave(void *saved);

/* A stream of the current device that, as the legacy default stream's
 * neighbours do, runs after the work queued before it there (and the
 * streams created blocking), and events without timing, to learn when
 * work queued on a stream is done without blocking. */
herd_status herd__dev_stream_create(void **stream);
void herd__dev_stream_destroy(void *stream);
herd_status herd__dev_event_create(void **event);
void herd__dev_event_destroy(void *event);
herd_status herd__dev_event_record(void *event, void *stream);
/* *done: whether the work before the event's record has completed. */
herd_status herd__dev_event_query(void *event, bool *done);

/* Page-locks n bytes of host memory at p for the driver (cuMemHostRegister,
 * portable to every context, made in device's), so that copies to and from
 * a device run at the link's speed; false when it cannot (an optimization:
 * copies work without it).  herd__dev_unpin, given the same device, undoes
 * it.  The calling thread's context is left as it was. */
bool herd__dev_pin(int device, void *p, size_t n);
void herd__dev_unpin(int device, void *p);

/* Copies n bytes from device to host memory, or from host to device
 * memory, on the calling thread's current context (herd__dev_use); returns
 * when the copy is done.  what names the copy in an error. */
herd_status herd__dev_to_host(void *dst, const void *src, size_t n, const char *what);
herd_status herd__dev_from_host(void *dst, const void *src, size_t n, const char *what);

#endif /* HERD_BASE_DEVICE_H */
