/*
 * sdk/alloc/alloc_internal.h - what the files of sdk/alloc share: the plan
 * object, a text builder for messages and explanations, and the NVML
 * usage probe.  Internal to libherd.
 *
 *   request.c   request validation, names of links, states and policies
 *   planner.c   herd_alloc_plan: the steps in order, and the choice of nodes
 *   planner.h   the planner's state, shared by the files of its steps:
 *   candidates.c  each node's candidate GPUs, pair classes, set quality
 *   search.c    the best set of k candidates of a node
 *   bind.c      the plan: ranks bound to NICs and CPUs
 *   describe.c  what each node lacks, when a request cannot be met
 *   explain.c   why each node and set was chosen
 *   plan.c      the plan object: accessors, rank environment, free
 *   lease.c     lease files: directory, acquire, release, status query
 *   slurm.c     Slurm's granted GPUs from its environment values
 *   usage.c     NVML's compute processes and free memory (dlopen)
 *   alloc.c     herd_alloc: this node, Slurm, plan, lease, retry
 */
#ifndef HERD_ALLOC_INTERNAL_H
#define HERD_ALLOC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "herd/alloc.h"
#include "base.h"
#include "topo/inventory.h"

/* ------------------------------------------------------------- plan */

/* The links between the plan's GPUs on one node: a count x count matrix. */
struct herd__plan_block {
	size_t node;         /* in the inventory */
	size_t first, count; /* the plan's GPUs first..first+count-1 */
	herd_link *links;    /* count * count */
};

struct herd_plan {
	size_t nranks;
	herd_plan_rank_info *ranks;
	size_t ngpus;
	herd_plan_gpu_info *gpus;
	size_t nblocks;
	struct herd__plan_block *blocks;
	double score;
	char *explain;
	size_t nwarnings;
	char **warnings;
	/* Every string the views point to, freed with the plan. */
	size_t nstrings, capstrings;
	char **strings;
	herd_lease *lease; /* NULL when not held */
};

/* An empty plan (nothing chosen yet). */
herd_status herd__plan_new(herd_plan **out);

/* A copy of s owned by the plan (s NULL gives ""). */
herd_status herd__plan_strdup(herd_plan *plan, const char *s, const char **out);

/* Gives the plan the leases of its GPUs. */
void herd__plan_attach_lease(herd_plan *plan, herd_lease *lease);

/* ------------------------------------------------------------ request */

/* Checks a request's fields; HERD_EINVAL naming the first bad one. */
herd_status herd__alloc_request_check(const herd_alloc_request *req);

/* "pack" or "spread". */
const char *herd__alloc_policy_str(herd_alloc_policy policy);

/*
 * Whether a host name names a node's host: exactly, or by the first label
 * when one of the two is a short name ("gpu07" and "gpu07.cluster").
 */
bool herd__alloc_host_matches(const char *host, const char *name);

/* Whether name (a UUID, PCI bus id or host name) names GPU g of node. */
bool herd__alloc_names_gpu(const herd_node *node, const herd_gpu *g, const char *name);

/* ------------------------------------------------------------- leases */

/*
 * Whether a UUID can name a lease file: 1 to 63 characters of letters,
 * digits, '-', '_', '.', ':' not starting with '.'.  An inventory is
 * input, and its UUIDs become file names.
 */
bool herd__lease_uuid_ok(const char *uuid);

/*
 * The lease of each GPU that st[0..n) names by uuid (the rest of each is
 * filled): its state and its holder's record, as
 * herd_alloc_gpu_status_query reads them, without NVML's figures
 * (processes and free memory stay -1).  Reads only; creates nothing.  A
 * missing directory leaves every GPU free; HERD_ESYS when it exists but
 * cannot be read, HERD_EUNAVAIL when there is no lease directory at all.
 */
herd_status herd__lease_query(const herd_lease_opts *opts, herd_alloc_gpu_status *st, size_t n);

/* The descriptors whose flock(2) locks are the lease: a process that
 * inherits them holds the lease until it closes them too. */
size_t herd__lease_fds(const herd_lease *lease, const int **fds);

/* ------------------------------------------------------------- usage */

/*
 * Fills processes, pids and free_memory_bytes of each status from NVML,
 * looked up by UUID; leaves them -1 (unknown) where there is no driver or
 * the driver does not know the UUID.  Never fails.
 */
void herd__alloc_usage(herd_alloc_gpu_status *status, size_t n);

#endif /* HERD_ALLOC_INTERNAL_H */
