/*
 * herd/metrics.h - a node's telemetry and herd's own counters in the
 * Prometheus text exposition format (version 0.0.4), what `herd exporter`
 * serves at /metrics; a C program that embeds libherd serves the same
 * bytes from its own HTTP server.
 *
 *     herd_metrics *m;
 *     herd_telemetry_sample *s = malloc(sizeof(*s));  // from a started sampler
 *     char *text;
 *     size_t len;
 *     if (herd_metrics_create(&m, NULL) == HERD_OK) {
 *         herd_telemetry_latest(t, s);
 *         if (herd_metrics_write(m, s, &text, &len) == HERD_OK) {
 *             // HTTP 200, Content-Type: HERD_METRICS_CONTENT_TYPE, text
 *             free(text);
 *         }
 *         herd_metrics_free(m);
 *     }
 *
 * What it says, one family per quantity with # HELP and # TYPE (families
 * with no series left out; a figure the sample has as -1 is left out, so
 * a series never holds a made-up value):
 *
 *   - per GPU, NVIDIA's DCGM exporter's names, units and labels
 *     (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED in MiB, ... with gpu,
 *     UUID, pci_bus_id, device, modelName, Hostname), so that dashboards
 *     and alerts made for dcgm-exporter work unchanged; herd_gpu_* for
 *     what DCGM has no name for (the processes on each GPU, their job
 *     and rank; Xid events counted);
 *   - per node, herd_node_* (CPU busy, per core, load, memory, network
 *     and disk bytes), named as node_exporter names the same quantity
 *     with herd_ in front of node_;
 *   - herd's own: herd_jobs_running and herd_job_ranks (this node's
 *     processes whose environment has HERD_JOB_ID and HERD_RANK, as far as
 *     /proc lets this user read them), herd_gpu_leases (herd/lease.h) and
 *     the job holding each GPU, and the collective calls of this node's
 *     processes: herd_collective_calls_total, _bytes_total,
 *     _seconds_total by job and kind, herd_collective_errors_total by job
 *     and error.
 *
 * A job is the label herd_job, not job: Prometheus gives every series of
 * a target the label job (the scrape job's name) already.
 *
 * Collective counters: each communicator counts its calls in a small
 * file of its own in the stats directory (mapped; a call adds to a few
 * counters with plain stores), only where that directory exists.  The directory is HERD_STATS_DIR, else
 * /run/herd/stats (made mode 1777, as the lease directory, when /run/herd
 * may be made), else $XDG_RUNTIME_DIR/herd/stats (mode 0700: one user's
 * processes only).  herd_metrics_write sums the files of live
 * communicators by job, and folds those of ended ones (a file whose lock
 * nobody holds: its communicator was freed or its process died) into
 * totals it keeps, so that a job's counters never go back while the
 * herd_metrics lives; it removes such a file when this process owns it
 * (or runs as root), and stops showing a job ten minutes after its last
 * communicator ended.  The counts are what the processes wrote: in a shared directory
 * a user may write any numbers under any job into a file of their own.
 */
#ifndef HERD_METRICS_H
#define HERD_METRICS_H

#include <stddef.h>

#include "common.h"
#include "telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Content-Type of what herd_metrics_write gives. */
#define HERD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Which parts herd_metrics_write says (herd_metrics_opts.parts; 0: all). */
enum {
	HERD_METRICS_TELEMETRY = 1u << 0,   /* the sample's GPUs and node */
	HERD_METRICS_JOBS = 1u << 1,        /* herd_jobs_running, herd_job_ranks */
	HERD_METRICS_LEASES = 1u << 2,      /* herd_gpu_leases and their holders */
	HERD_METRICS_COLLECTIVES = 1u << 3  /* herd_collective_* */
};

#define HERD_METRICS_OPTS_VERSION 1

/* Options of herd_metrics_create.  A zeroed field means its default. */
typedef struct herd_metrics_opts {
	unsigned int version;       /* HERD_METRICS_OPTS_VERSION */
	unsigned parts;             /* HERD_METRICS_* bits; 0: all */
	const char *lease_dir;      /* NULL: herd_lease_dir's */
	const char *stats_dir;      /* NULL: the stats directory above */
} herd_metrics_opts;

#define HERD_METRICS_OPTS_INIT { HERD_METRICS_OPTS_VERSION, 0, NULL, NULL }

/* The writer and what it keeps between writes.  Opaque. */
typedef struct herd_metrics herd_metrics;

/*
 * A writer.  With HERD_METRICS_COLLECTIVES, makes the stats directory
 * when missing (not its parents, except /run/herd for /run/herd/stats),
 * so that the processes of this node start counting; when that fails,
 * the writer says no collective counters and herd_metrics_stats_dir says
 * why.  opts may be NULL.  Free with herd_metrics_free.
 */
HERD_EXTERN herd_status herd_metrics_create(herd_metrics **out, const herd_metrics_opts *opts);

/*
 * The stats directory read (borrowed), or NULL when collective counters
 * are off, with *why (may be NULL) saying why.
 */
HERD_EXTERN const char *herd_metrics_stats_dir(const herd_metrics *m, const char **why);

/*
 * The exposition into *out (NUL-terminated; the caller frees it with
 * herd_free) of
 * *len bytes: the sample s (NULL: herd's own counters only) and herd's
 * counters as they are now (reads /proc, the lease directory and the
 * stats directory).  Not thread-safe for one m; blocks for the reads only.
 */
HERD_EXTERN herd_status herd_metrics_write(herd_metrics *m, const herd_telemetry_sample *s,
					   char **out, size_t *len);

/* Frees the writer (the files it read stay).  Accepts NULL. */
HERD_EXTERN void herd_metrics_free(herd_metrics *m);

#ifdef __cplusplus
}
#endif

#endif /* HERD_METRICS_H */
