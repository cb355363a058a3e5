/*
 * herd/alloc.h - GPU allocation: which GPUs, CPU cores and NIC every rank
 * gets, why, and leases that keep two jobs from ever sharing a GPU by
 * accident.
 *
 * Three pieces, usable apart:
 *
 *   - The planner, herd_alloc_plan: a pure function of (inventory, request,
 *     the current use of the GPUs) to a plan.  It reads no file and no
 *     clock, so plans can be made and tested for machines you are not on.
 *   - Leases, herd_lease_*: one lock file per GPU UUID in a per-node lease
 *     directory, held with flock(2) by the process that owns the
 *     allocation.
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
 * Leases.  The lease directory is opts' lease_dir, else $HERD_LEASE_DIR,
 * else /run/herd when it exists or this process may create it (mode 1777,
 * shared by every user of the node), else $XDG_RUNTIME_DIR/herd (mode 0700:
 * it protects one user's jobs from each other only).  An administrator
 * makes the node-wide one with `install -d -m 1777 /run/herd` or a
 * tmpfiles.d line.  The directory must be local to the node (tmpfs) or on
 * a file system whose flock is coherent; UUIDs are unique, so one
 * directory serves any number of nodes.
 *
 * In it, <uuid>.lock ("GPU-8f2c....lock") is the lease of that GPU.  A
 * holder keeps the file open with flock(LOCK_EX) (LOCK_SH for a shared
 * lease) for as long as it owns the GPU; the kernel drops the lock when
 * the last descriptor closes, so a holder killed by any signal frees its
 * GPUs at once, with no daemon and nothing to clean up.  Descriptors are
 * close-on-exec: a program the holder execs does not hold the lease, a
 * child it only forks does until it closes or execs.  flock, not fcntl
 * locks: a process that opens and closes the file again (to read a
 * record) keeps its flock, where closing any descriptor drops all its
 * fcntl locks on the file.  Lock files are created on first use (mode
 * 0644: every user can open them to lock them, only their creator can
 * write them) and never deleted: deleting a
 * file that someone may hold or be about to lock would let a second
 * process lock a new file of the same name while the first still holds
 * the old one.  Releasing a lease empties the file and closes it.  After
 * taking a lock the holder checks that the name still leads to the file it
 * locked, and starts again if someone replaced it.
 *
 * Leases of one request are taken in ascending UUID order, each with a
 * non-blocking lock; when one is busy, those already taken are released.
 * Nobody ever waits while holding a lease, so two jobs racing for
 * overlapping GPUs cannot deadlock, and a request never holds part of its
 * GPUs.
 *
 * The record.  After locking, an exclusive holder that may write the file
 * writes into it, as text, "herd-lease v=1" on the first line and then
 * key=value lines: uuid, job, pid, user, uid, host, since (Unix seconds),
 * mode.  The record only says who holds the lease; the lock says whether
 * anyone does.  A reader treats a file whose lock nobody holds as free
 * whatever it contains (a killed holder leaves its record behind), believes
 * a record only when its pid is the one /proc/locks shows holding the lock
 * (else it names that pid, with a note that the record is not the
 * holder's), and treats a locked file without a readable record as held by
 * someone unknown.
 *
 * What a lease protects against: two herd jobs (or any programs that take
 * the lease) ever using one GPU at once, and a GPU staying taken after its
 * holder died.  What it does not: a program that uses a GPU without taking
 * its lease (the lock is advisory; CUDA knows nothing of it); a user who
 * holds a lease on purpose and never lets go (whoever may open the file
 * may lock it); and the text of a record, which the file's owner may write
 * as they like (only the pid is checked against the kernel).  Shared holders write no
 * record (there may be several at once).  Readers test the lock with
 * non-blocking locks of their own that last microseconds, so they can make
 * a concurrent lease attempt fail for a moment; herd_alloc retries those
 * (re-planning each time), a bounded number of times.
 *
 * Slurm.  Inside an allocation (SLURM_JOB_ID set) only the GPUs Slurm
 * granted are candidates; see herd_alloc_slurm_gpus for how its numbers
 * are read.
 */
#ifndef HERD_ALLOC_H
#define HERD_ALLOC_H

#include "cluster.h"
#include "common.h"

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
HERD_EXTERN const char *herd_alloc_link_str(herd_alloc_link link);

/* The inverse of herd_alloc_link_str; HERD_EINVAL naming the choices. */
HERD_EXTERN herd_status herd_alloc_link_parse(const char *name, herd_alloc_link *out);

/* Who holds a GPU's lease. */
typedef enum herd_lease_state {
	HERD_LEASE_FREE = 0,
	HERD_LEASE_SHARED = 1,     /* by one or more shared holders */
	HERD_LEASE_EXCLUSIVE = 2,
	HERD_LEASE_UNKNOWN = 3     /* the lease file is unusable: see note */
} herd_lease_state;

#define HERD_GPU_STATUS_MAX_PIDS 8

/*
 * What is known about the use of one GPU now: its lease, and what NVML
 * shows running on it.  herd_gpu_status_query fills these for a node; a
 * caller planning for another machine may fill them itself (zeroed, then
 * uuid and what it knows; processes and free_memory_bytes -1 when unknown).
 */
typedef struct herd_gpu_status {
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
	int64_t pids[HERD_GPU_STATUS_MAX_PIDS]; /* the first few of them */
	/* NVML's free memory; -1 when not known. */
	int64_t free_memory_bytes;
} herd_gpu_status;

/* "free", "shared", "exclusive", "unknown". */
HERD_EXTERN const char *herd_lease_state_str(herd_lease_state state);

/* --------------------------------------------------------------- plans */

/* A plan: ranks, their GPUs, CPUs and NICs, and why.  Opaque. */
typedef struct herd_plan herd_plan;

/* One GPU of a plan.  Borrowed from the plan. */
typedef struct herd_plan_gpu {
	int rank;                   /* the rank it belongs to */
	size_t node;                /* the node's index in the inventory */
	const char *hostname;
	size_t index;               /* in the node's gpus[] (PCI bus order) */
	const char *uuid;
	const char *pci_bus_id;
	int numa_node;              /* -1 when unknown */
} herd_plan_gpu;

/* One rank of a plan.  Borrowed from the plan. */
typedef struct herd_plan_rank {
	int rank;                   /* 0-based, node by node */
	size_t node;                /* the node's index in the inventory */
	const char *hostname;
	int node_rank;              /* the node's place among the plan's nodes */
	int local_rank;             /* the rank's place on its node */
	size_t ngpus;
	const herd_plan_gpu *gpus;  /* in PCI bus order */
	int numa_node;              /* of its GPUs; -1 unknown or several */
	/* CPUs to pin the rank to, as Linux lists them; "" when its GPUs'
	 * NUMA node is unknown (leave it unpinned). */
	const char *cpus;
	/* The NIC nearest its first GPU (an RDMA device, else a netdev),
	 * "" when the node has none; nic_link is the matrix link to it. */
	const char *nic;
	herd_link nic_link;
	/* Values for NCCL_IB_HCA ("=mlx5_0:1") and NCCL_SOCKET_IFNAME
	 * ("=eno1"); "" when there is nothing to suggest. */
	const char *ib_hca;
	const char *socket_ifname;
} herd_plan_rank;

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
					const herd_gpu_status *status, size_t nstatus);

/* Number of ranks, GPUs and distinct nodes of a plan. */
HERD_EXTERN size_t herd_plan_rank_count(const herd_plan *plan);
HERD_EXTERN size_t herd_plan_gpu_count(const herd_plan *plan);
HERD_EXTERN size_t herd_plan_node_count(const herd_plan *plan);

/* Rank i (0-based), borrowed from the plan; NULL when out of range. */
HERD_EXTERN const herd_plan_rank *herd_plan_rank_at(const herd_plan *plan, size_t i);

/* GPU i of the plan (ranks' GPUs in rank order); NULL when out of range. */
HERD_EXTERN const herd_plan_gpu *herd_plan_gpu_at(const herd_plan *plan, size_t i);

/*
 * The link between the plan's GPUs i and j.  GPUs on different nodes have
 * no matrix link: HERD_ENOTFOUND.
 */
HERD_EXTERN herd_status herd_plan_link(const herd_plan *plan, size_t i, size_t j,
				       herd_link *out);

/*
 * The matrix code between the plan's GPUs i and j ("X", "NV18", "PIX"),
 * "NET" for GPUs on different nodes, "?" out of range.  Returns buf.
 */
HERD_EXTERN const char *herd_plan_link_str(const herd_plan *plan, size_t i, size_t j,
					   char buf[HERD_LINK_STR_LEN]);

/*
 * How good the GPUs' links are, 0..100: the mean over pairs of GPUs on one
 * node of NV# 100, PIX 60, PXB 50, PHB 40, NODE 30, SYS 10; 100 when no
 * two GPUs share a node.  Comparable between plans of one request.
 */
HERD_EXTERN double herd_plan_score(const herd_plan *plan);

/*
 * Why the plan is what it is, as lines of text: the request, the
 * candidates of each node and why others were left out, the chosen set and
 * what made it best, the runner-up, and each rank's binding.  Borrowed
 * from the plan; never NULL.
 */
HERD_EXTERN const char *herd_plan_explain(const herd_plan *plan);

/*
 * Warnings about the chosen GPUs (compute processes NVML shows on a GPU
 * that no lease accounts for: a stale job?).  Borrowed; NULL out of range.
 */
HERD_EXTERN size_t herd_plan_warning_count(const herd_plan *plan);
HERD_EXTERN const char *herd_plan_warning(const herd_plan *plan, size_t i);

/*
 * The environment of rank i: a NULL-terminated array of "NAME=value"
 * strings, in one block freed with herd_free: CUDA_VISIBLE_DEVICES,
 * CUDA_DEVICE_ORDER, and NCCL_IB_HCA / NCCL_SOCKET_IFNAME when the plan
 * has a value for them.  The launcher adds the rank's identity.
 */
HERD_EXTERN herd_status herd_plan_rank_env(const herd_plan *plan, size_t i, char ***env);

/* Whether the plan holds leases on its GPUs. */
HERD_EXTERN bool herd_plan_held(const herd_plan *plan);

/*
 * Releases the plan's leases, if any; the plan stays readable.  Idempotent;
 * never fails.  Not thread-safe against other calls on the same plan.
 */
HERD_EXTERN void herd_plan_release(herd_plan *plan);

/* Releases the plan's leases and frees it.  Accepts NULL. */
HERD_EXTERN void herd_plan_free(herd_plan *plan);

/* -------------------------------------------------------------- leases */

#define HERD_LEASE_OPTS_VERSION 1

/* Options of the lease functions.  A zeroed field means its default. */
typedef struct herd_lease_opts {
	unsigned int version;       /* HERD_LEASE_OPTS_VERSION */
	/* The lease directory; NULL for the default (top of the file). */
	const char *dir;
	/* The job written in records; NULL means $HERD_JOB_ID, else
	 * $SLURM_JOB_ID, else "-". */
	const char *job_id;
} herd_lease_opts;

#define HERD_LEASE_OPTS_INIT { HERD_LEASE_OPTS_VERSION, NULL, NULL }

/*
 * Writes the lease directory that opts (NULL for defaults) resolves to
 * into buf[cap].  Creates nothing.  HERD_EUNAVAIL when there is none
 * (no /run/herd, no right to create it, no $XDG_RUNTIME_DIR).
 */
HERD_EXTERN herd_status herd_lease_dir(const herd_lease_opts *opts, char *buf, size_t cap);

/* Leases held by this process.  Opaque. */
typedef struct herd_lease herd_lease;

/*
 * Takes the leases of the n GPUs named by uuids, exclusive or shared, all
 * or none: in ascending UUID order, each lock non-blocking (retried for a
 * few milliseconds, which a reader's probe never outlasts); when one is
 * held, the ones taken are released and HERD_EBUSY names the GPU and its
 * holder.  Creates the directory (not its parents) when missing, mode 1777
 * for /run/herd and 0700 for any other.  A lease file that is not a
 * regular file or is a symbolic link, or a UUID that cannot name a file,
 * gives HERD_EINVAL naming it; an unusable directory gives HERD_ESYS.
 * Never blocks for long; thread-safe.  *out is released with
 * herd_lease_free, or by the process's death.
 */
HERD_EXTERN herd_status herd_lease_acquire(herd_lease **out, const char *const *uuids,
					   size_t n, bool shared,
					   const herd_lease_opts *opts);

/* Number of GPUs a lease holds. */
HERD_EXTERN size_t herd_lease_count(const herd_lease *lease);

/* Releases the leases (empties the records, unlocks).  Accepts NULL. */
HERD_EXTERN void herd_lease_free(herd_lease *lease);

/*
 * The status of every GPU of node, in the node's order, into *out
 * (herd_free) and *n: lease state and record from the lease directory,
 * processes and free memory from NVML where a driver knows the GPU's UUID.
 * A missing directory means every GPU is free; an unusable lease file makes
 * that GPU HERD_LEASE_UNKNOWN with a note, not a failure.  Fails with
 * HERD_ESYS when the directory exists but cannot be read.  Creates
 * nothing; its lock probes last microseconds (see the top of the file).
 */
HERD_EXTERN herd_status herd_gpu_status_query(const herd_node *node,
					      const herd_lease_opts *opts,
					      herd_gpu_status **out, size_t *n);

/* --------------------------------------------------------------- Slurm */

/* The environment values Slurm gives a job or step (NULL when unset). */
typedef struct herd_slurm_env {
	const char *job_id;         /* SLURM_JOB_ID */
	const char *step_gpus;      /* SLURM_STEP_GPUS */
	const char *job_gpus;       /* SLURM_JOB_GPUS */
	const char *cuda_visible_devices; /* CUDA_VISIBLE_DEVICES */
} herd_slurm_env;

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
					      const herd_slurm_env *env,
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
