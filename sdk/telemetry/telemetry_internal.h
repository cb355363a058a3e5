/*
 * sdk/telemetry/telemetry_internal.h - the parts of a sampler, one file
 * per source: gpu.c (NVML: the GPUs and the processes on them), node.c
 * (/proc and /sys: CPUs, memory, network, disks), and sampler.c that runs
 * them on a period into the ring.  Internal to libherd.
 */
#ifndef HERD_TELEMETRY_INTERNAL_H
#define HERD_TELEMETRY_INTERNAL_H

#include "herd/telemetry.h"

/* ---- gpu.c: NVML ---------------------------------------------------------- */

/* An NVML session with the counters of the previous read (for rates). */
typedef struct herd__tgpu herd__tgpu;

/*
 * Opens NVML (sdk/topo's loader).  HERD_EUNAVAIL, with why[] set as
 * discovery says it ("NVIDIA driver not found: ..."), when there is no
 * NVML or no GPU; other codes are real errors.  lease_dir: NULL for the
 * default (herd_lease_dir).
 */
herd_status herd__tgpu_open(herd__tgpu **out, const char *lease_dir, char *why, size_t cap);

/*
 * Fills s->gpus and s->ngpus (HERD_TELEMETRY_GPU in parts) and s->procs
 * and s->nprocs (HERD_TELEMETRY_PROCS), with rates over the time since
 * the previous read (-1 on the first).  A GPU that stops answering keeps
 * its identity with -1 figures.  Never fails for a missing figure.
 */
herd_status herd__tgpu_read(herd__tgpu *g, herd_telemetry_sample *s, unsigned parts);

/* Closes NVML and frees.  Accepts NULL. */
void herd__tgpu_close(herd__tgpu *g);

/* ---- node.c: /proc and /sys ---------------------------------------------- */

/* The counters of the previous read, for rates. */
typedef struct herd__tnode herd__tnode;

/* root: "/" for this machine, else a directory holding proc/ and sys/
 * (tests give fixed files). */
herd_status herd__tnode_open(herd__tnode **out, const char *root);

/*
 * Fills the host, CPU, memory, network and disk parts that parts asks for
 * (0: all), the rates over s->period_ms, which the caller sets to the
 * milliseconds since the previous read (0: none, rates -1).  A malformed
 * file is HERD_EFORMAT naming it and the line; the next read's rates then
 * start afresh.
 */
herd_status herd__tnode_read(herd__tnode *n, herd_telemetry_sample *s, unsigned parts);

void herd__tnode_close(herd__tnode *n);

/* ---- words.c ---------------------------------------------------------------- */

/*
 * What this node says of itself when a job fails, into out (cap bytes,
 * "" when nothing): each GPU's last Xid in the kernel log (with what it
 * means when it is one of a failing GPU), each GPU slowed down for a fault
 * (hardware slowdown, thermal slowdowns, the power brake), and each
 * network card that is up but has lost its link, joined with "; ".  One NVML sample:
 * milliseconds per GPU.
 */
void herd__telemetry_node_words(char *out, size_t cap);

/* ---- sampler.c ------------------------------------------------------------ */

/* herd_telemetry_create reading /proc and /sys under root ("/": this
 * machine's; tests give a tree of fixed files). */
herd_status herd__telemetry_create_at(herd_telemetry **out, const herd_telemetry_opts *opts,
				      const char *root);

#endif /* HERD_TELEMETRY_INTERNAL_H */
