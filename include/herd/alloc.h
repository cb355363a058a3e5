/*
 * herd/alloc.h - GPU allocation: which GPUs, CPU cores and NIC every rank
 * gets, why, and leases that keep two jobs from ever sharing a GPU by
 * accident.
 *
 * Three pieces, usable apart:
 *
 *   - The planner, herd_alloc_plan: a pure function of (inventory, request,
 *     the current use of the GPUs) to a plan (herd/plan.h).  It reads no
 *     file and no clock, so plans can be made and tested for machines you
 *     are not on.
 *   - Leases, herd_lease_* (herd/lease.h): one lock file per GPU UUID in a
 *     per-node lease directory, held with flock(2) by the process that
 *     owns the allocation.
 *   - herd_alloc, which joins them for this node: reads the leases (and
 *     NVML's view of running processes, where a driver is), honours the
 *     GPUs a Slurm allocation granted, plans, and takes the leases of the
 *     plan, all or nothing.
 *
 * Placement.  Every GPU of a plan is one rank's (gpus_per_rank GPUs per
 * rank, 1 by default).  On one node the planner prefers, in this order:
 * GPUs without foreign compute processes; then the set whose worst pair is
 * best in the order NV# < PIX < PXB < PHB < NODE < SYS (NVLink, then one
 * PCIe switch, then one host bridge, then one socket); then the smaller sum
 * of pair classes, then more NVLinks; then, when near_nic is asked, GPUs
 * with a closer NIC; then fewer NUMA nodes (more with HERD_ALLOC_SPREAD);
 * then best fit: the set that leaves the fewest free GPUs stranded on the
 * NUMA nodes it touches (most with SPREAD); then the lowest GPU indices.
 * Across nodes, HERD_ALLOC_PACK fills as few nodes as it can and prefers
 * the node with the fewest free GPUs left over (best fit, so whole nodes
 * stay whole); HERD_ALLOC_SPREAD uses as many nodes as it can.  Sets are
 * searched exhaustively while a node has at most 64 candidates offering at
 * most 20000 sets, greedily (from several seeds) beyond.
 *
 * Binding.  Each rank's CPU set is the CPU list of the NUMA node of its
 * GPUs (what `nvidia-smi topo -m` calls CPU Affinity; the launcher applies
 * it with hwloc); its NIC is the nearest one in the topology matrix, passed
 * to NCCL as NCCL_IB_HCA (an RDMA device with an active port) and
 * NCCL_SOCKET_IFNAME (the nearest up interface that has an address), both
 * with NCCL's "=" prefix for exact names.  CUDA_VISIBLE_DEVICES lists the
 * rank's GPUs by UUID in PCI bus order, with CUDA_DEVICE_ORDER=PCI_BUS_ID:
 * a UUID means the same GPU whatever order CUDA enumerates in and inside a
 * device cgroup (Slurm's ConstrainDevices) that renumbers what it shows.
 *
 * Slurm.  Inside an allocation (SLURM_JOB_ID set) only the GPUs Slurm
 * granted are candidates; see herd_alloc_slurm_gpus for how its numbers
 * are read.
 */
#ifndef HERD_ALLOC_H
#define HERD_ALLOC_H

#include "cluster.h"
#include "common.h"
#include "lease.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Most GPUs one request may ask for, and most on one node. */
#define HERD_ALLOC_MAX_GPUS 65536
#define HERD_ALLOC_MAX_GPUS_PER_NODE 4096

/* What the chosen GPUs of a node must have in common. */
typedef enum herd_alloc_link {
	HERD_ALLOC_LINK_ANY = 0,       /* nothing: the best the nodes offer */
	HERD_ALLOC_LINK_SAME_NODE = 1, /* all GPUs on one node */
	HERD_ALLOC_LINK_NVLINK = 2,    /* every pair NV# (so one node) */
	HERD_ALLOC_LINK_SAME_NUMA = 3  /* all on one NUMA node (one socket) */
} herd_alloc_link;

/* How GPUs are laid over nodes (and NUMA nodes); see the top of the file. */
typedef enum herd_alloc_policy {
	HERD_ALLOC_PACK = 0,
	HERD_ALLOC_SPREAD = 1
} herd_alloc_policy;

#define HERD_ALLOC_REQUEST_VERSION 1

/*
 * What a job asks for.  A zeroed field means its default.  With
 * gpus_per_node and nodes both 0, a connectivity demand other than ANY puts
 * every GPU on one node, and ANY fills nodes as the policy says.  With
 * link set and several nodes, the demand holds for the GPUs of each node.
 */
typedef struct herd_alloc_request {
	unsigned int version;   /* HERD_ALLOC_REQUEST_VERSION */
	/* GPUs in all, 1..HERD_ALLOC_MAX_GPUS; 0 means gpus_per_node * nodes. */
	int gpus;
	/* GPUs on each node used; 0 means any.  Must divide gpus. */
	int gpus_per_node;
	/* Nodes to use; 0 means as the policy and gpus_per_node decide. */
	int nodes;
	/* GPUs of each rank, on one node; 0 means 1. */
	int gpus_per_rank;
	/* Each GPU must have at least this much memory free: its memory
	 * less what NVML said was in use (its whole memory when not known). */
	uint64_t min_free_memory_bytes;
	herd_alloc_link link;
	/* Prefer GPUs closer to a NIC (after the demands on GPU links). */
	bool near_nic;
	/* Shared instead of exclusive: the GPUs may be shared with other
	 * shared holders, never with an exclusive one. */
	bool shared;
	herd_alloc_policy policy;
	/* Never use these: GPU UUIDs, PCI bus ids or host names. */
	const char *const *exclude;
	size_t nexclude;
	/* Use only these (GPU UUIDs, PCI bus ids or host names); none means
	 * every GPU is a candidate.  herd_alloc sets it from Slurm's grant. */
	const char *const *include;
	size_t ninclude;
} herd_alloc_request;

#define HERD_ALLOC_REQUEST_INIT \
	{ HERD_ALLOC_REQUEST_VERSION, 0, 0, 0, 0, 0, HERD_ALLOC_LINK_ANY, 0, 0, \
	  HERD_ALLOC_PACK, NULL, 0, NULL, 0 }

/* "any", "same-node", "nvlink", "same-numa"; "?" for other values. */
HERD_EXTERN const char *herd_alloc_link_name(herd_alloc_link link);

/* The inverse of herd_alloc_link_name; HERD_EINVAL naming the choices. */
HERD_EXTERN herd_status herd_alloc_link_parse(const char *name, herd_alloc_link *out);

#define HERD_ALLOC_GPU_STATUS_MAX_PIDS 8

/*
 * What is known about the use of one GPU now: its lease, and what NVML
 * shows running on it.  herd_alloc_gpu_status_query fills these for a
 * node; a caller planning for another machine may fill them itself
 * (zeroed, then uuid and what it knows; processes and free_memory_bytes -1
 * when unknown).
 */
typedef struct herd_alloc_gpu_status {
	char uuid[HERD_NAME_LEN];
	herd_lease_state state;
	/* From an exclusive holder's record; "" and 0 when unknown. */
	char job[HERD_NAME_LEN];
	int64_t pid;
	char user[HERD_NAME_LEN];
	char host[HERD_NAME_LEN];
	int64_t since;              /* Unix time the lease was taken */
	/* Why the state is UNKNOWN, or what was odd about the record. */
	char note[160];
	/* NVML's compute processes on the GPU; -1 when not known. */
	int processes;
	int64_t pids[HERD_ALLOC_GPU_STATUS_MAX_PIDS]; /* the first few of them */
	/* NVML's free memory; -1 when not known. */
	int64_t free_memory_bytes;
} herd_alloc_gpu_status;

/*
 * The status of every GPU of node, in the node's order, into *out
 * (herd_free) and *n: lease state and record from the lease directory,
 * processes and free memory from NVML where a driver knows the GPU's UUID.
 * A missing directory means every GPU is free; an unusable lease file makes
 * that GPU HERD_LEASE_UNKNOWN with a note, not a failure.  Fails with
 * HERD_ESYS when the directory exists but cannot be read.  Creates
 * nothing; its lock probes last microseconds (see herd/lease.h).
 */
HERD_EXTERN herd_status herd_alloc_gpu_status_query(const herd_node *node,
						    const herd_lease_opts *opts,
						    herd_alloc_gpu_status **out, size_t *n);

/*
 * Plans request over cluster, given what is known of the GPUs' use:
 * status[0..nstatus) (any order, matched by UUID; GPUs without an entry
 * are free).  A GPU is a candidate when it is not excluded, is included
 * (when include is given), is free (or shared with a shared request), and
 * has min_free_memory_bytes free.  Pure: reads nothing but its arguments;
 * thread-safe.  *out, freed with herd_plan_free, copies what it needs and
 * does not refer to cluster.  A malformed request gives HERD_EINVAL; one
 * the candidates cannot meet gives HERD_ENORESOURCE and a message that
 * says why ("need 4 NVLink-connected GPUs on one node; node gpu07 has 2
 * free, the others 0").  On failure *out is NULL.
 */
HERD_EXTERN herd_status herd_alloc_plan(herd_plan **out, const herd_cluster *cluster,
					const herd_alloc_request *request,
					const herd_alloc_gpu_status *status, size_t nstatus);

/* --------------------------------------------------------------- Slurm */

/* The environment values Slurm gives a job or step (NULL when unset). */
typedef struct herd_alloc_slurm_env {
	const char *job_id;         /* SLURM_JOB_ID */
	const char *step_gpus;      /* SLURM_STEP_GPUS */
	const char *job_gpus;       /* SLURM_JOB_GPUS */
	const char *cuda_visible_devices; /* CUDA_VISIBLE_DEVICES */
} herd_alloc_slurm_env;

/*
 * The GPUs of node that a Slurm allocation granted, from its environment
 * values: writes their indices in node->gpus (ascending) to
 * granted[0..*count) (granted has room for node->ngpus) and whether the
 * process is inside an allocation to *inside.  Pure; thread-safe.
 *
 * Outside an allocation (no job_id) every GPU is granted.  Inside one,
 * SLURM_STEP_GPUS (else SLURM_JOB_GPUS) lists the granted GPUs by Slurm's
 * index: the position of the GPU in the node's gres.conf order, which with
 * AutoDetect=nvml (or device files listed in /dev/nvidiaN order on machines
 * where minor numbers follow the bus) is PCI bus order, the order of
 * node->gpus.  This is the assumption (older Slurm releases wrote the
 * /dev/nvidiaN minor number instead, which follows the same order on
 * machines whose minor numbers follow the bus); a gres.conf that lists GPUs
 * in another order needs Flags=env_uuid (Slurm 26.05+: UUIDs, which are
 * read as such) or a list of UUIDs in include.  The index is read against
 * the node's whole GPU list; an inventory probed inside the job's device
 * cgroup shows only the granted GPUs, which is recognized when it shows as
 * many as Slurm granted and CUDA_VISIBLE_DEVICES is 0..n-1 (then all of
 * them are granted), and is an error otherwise.  Slurm sets
 * CUDA_VISIBLE_DEVICES to the same indices, or to 0..n-1 when
 * ConstrainDevices renumbers the GPUs; either form agrees with the list.
 * A CUDA_VISIBLE_DEVICES the user narrowed further (indices among
 * Slurm's, positions in Slurm's list, or UUIDs) narrows the grant; one
 * that fits none of these is HERD_EINVAL.
 * Without SLURM_*_GPUS, CUDA_VISIBLE_DEVICES alone is read as Slurm's
 * indices (or UUIDs).  With none of them, the allocation granted no GPU
 * (*count 0).  "NoDevFiles", an index past the node's GPUs, a UUID the node
 * lacks or a MIG device give HERD_EINVAL / HERD_ENOTFOUND naming the
 * variable.
 */
HERD_EXTERN herd_status herd_alloc_slurm_gpus(const herd_node *node,
					      const herd_alloc_slurm_env *env,
					      size_t *granted, size_t *count,
					      bool *inside);

/* ---------------------------------------------- allocation on this node */

/*
 * The node of cluster that is this machine: the only node of a one-node
 * inventory (a recorded inventory, as HERD_INVENTORY gives, stands for this
 * node's hardware), else the node whose host name is this host's (short
 * names match long ones).  HERD_ENOTFOUND when none is.
 */
HERD_EXTERN herd_status herd_alloc_this_node(const herd_cluster *cluster, size_t *index);

#define HERD_ALLOC_OPTS_VERSION 1

/* Options of herd_alloc.  A zeroed field means its default. */
typedef struct herd_alloc_opts {
	unsigned int version;       /* HERD_ALLOC_OPTS_VERSION */
	/* The lease directory and job id (herd_lease_opts). */
	const char *lease_dir;
	const char *job_id;
	/* Keep trying this long while the request cannot be met because
	 * GPUs are held; 0 means fail at once (a lost race is still
	 * retried, a bounded number of times). */
	int wait_ms;
	/* Plan against the leases but take none (offline planning,
	 * `herd alloc`).  A multi-node plan can only be made this way: each
	 * node's leases are taken on that node. */
	bool plan_only;
	/* Ignore the Slurm environment. */
	bool ignore_slurm;
} herd_alloc_opts;

#define HERD_ALLOC_OPTS_INIT { HERD_ALLOC_OPTS_VERSION, NULL, NULL, 0, 0, 0 }

/*
 * Plans request for this node's GPUs (herd_alloc_this_node; a multi-node
 * cluster plans over all its nodes, with only this node's use known) and,
 * unless opts->plan_only, takes the leases of the plan's GPUs, which the
 * plan then holds until herd_plan_release, herd_plan_free or the process
 * dies.  Candidates are also limited to Slurm's grant inside an allocation
 * (environment read here, once) and GPUs NVML shows busy come last.  A
 * race lost to another job re-plans.  opts may be NULL.  Blocks up to
 * opts->wait_ms (plus a bounded race retry).  Thread-safe.  *out is NULL on
 * failure, with nothing held.
 */
HERD_EXTERN herd_status herd_alloc(herd_plan **out, const herd_cluster *cluster,
				   const herd_alloc_request *request,
				   const herd_alloc_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* HERD_ALLOC_H */
