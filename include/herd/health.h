/*
 * herd/health.h - per-GPU health checks, in levels as DCGM's diagnostic
 * has them.
 *
 * Level 1 (seconds): the driver's view of each GPU through NVML (ECC mode
 * and error counts, remapped rows or retired pages, temperature against
 * the slowdown threshold, power against the limit, clocks, the clock
 * event reasons, the PCIe link against its maximum) and a copy-bandwidth
 * probe (device to device against the memory's own rate, host to device
 * and back against the PCIe link's).  Level 2 adds a burn: float32 matrix
 * products through cuBLAS for a few seconds, every product checked.  At
 * every level, last, the Xid events the kernel log holds for each GPU (the
 * NVIDIA driver's "NVRM: Xid (PCI:...)" records in /dev/kmsg, or in the
 * file HERD_KERNEL_LOG names, a saved dmesg for instance), those the
 * checks just caused included: FAIL for an Xid of a failing GPU or memory
 * (48, 61-64, 74, 79, 92, 94, 95, 119, 120, 140), WARN for the others
 * (13, 31, 43, ...: mostly an application's faults), SKIP when the log
 * cannot be read.
 *
 * Each check ends PASS, WARN (worth a look, not a fault: a link trained
 * below its maximum while idle), FAIL, or SKIP (it could not run here, and
 * says why).  A GPU passes when none of its checks failed.
 *
 *     herd_health_report *r;
 *     if (herd_health_run(&r, &(herd_health_opts){ .level = 2 }) == HERD_OK) {
 *         for (size_t g = 0; g < r->ngpus; g++) ...
 *         herd_health_free(r);
 *     }
 */
#ifndef HERD_HEALTH_H
#define HERD_HEALTH_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum herd_health_result {
	HERD_HEALTH_PASS = 0,
	HERD_HEALTH_WARN = 1,
	HERD_HEALTH_FAIL = 2,
	HERD_HEALTH_SKIP = 3
} herd_health_result;

/* "pass", "warn", "fail", "skip". */
HERD_EXTERN const char *herd_health_result_name(herd_health_result r);

typedef struct herd_health_check {
	char name[24];              /* "ecc", "temperature", "copy-d2d", "burn", ... */
	herd_health_result result;
	double value;               /* the main figure, in unit; 0 when none */
	char unit[12];              /* "C", "W", "GB/s", "TFLOP/s", "" */
	char detail[200];           /* the figures and the reason, for people */
} herd_health_check;

typedef struct herd_health_gpu {
	int index;                  /* NVML's (and, by bus order, CUDA's) index */
	char uuid[64];
	char name[96];
	char bus_id[16];            /* "0000:1b:00.0", "" when unknown */
	herd_health_check *checks;
	size_t nchecks;
	herd_health_result result;  /* the worst of its checks, SKIP counting below PASS */
} herd_health_gpu;

typedef struct herd_health_report {
	int level;
	herd_health_gpu *gpus;
	size_t ngpus;
	char note[256];             /* why no GPU could be checked, when ngpus is 0 */
} herd_health_report;

#define HERD_HEALTH_OPTS_VERSION 1

/* Options of herd_health_run.  A zeroed field means its default. */
typedef struct herd_health_opts {
	unsigned int version;       /* HERD_HEALTH_OPTS_VERSION */
	int level;                  /* 1 or 2; 0: 1 */
	double burn_seconds;        /* level 2's burn per GPU; 0: 5 */
	int burn_order;             /* the matrices' order; 0: 8192 */
	size_t copy_bytes;          /* the copy probe's size; 0: 1 GiB (256 MiB over PCIe) */
} herd_health_opts;

#define HERD_HEALTH_OPTS_INIT { HERD_HEALTH_OPTS_VERSION, 0, 0, 0, 0 }

/*
 * Runs the checks of opts->level on every GPU of this node (NVML's list,
 * else CUDA's) and fills *out, to be freed with herd_health_free.  No GPU
 * at all is not an error: the report has ngpus 0 and says why in note.
 * HERD_EINVAL names a bad option.
 */
HERD_EXTERN herd_status herd_health_run(herd_health_report **out, const herd_health_opts *opts);

HERD_EXTERN void herd_health_free(herd_health_report *report);

#ifdef __cplusplus
}
#endif

#endif /* HERD_HEALTH_H */
