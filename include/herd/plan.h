/*
 * herd/plan.h - a placement plan, as herd_alloc_plan and herd_alloc
 * (herd/alloc.h) make it: the ranks, their GPUs, CPUs and NIC, and why
 * (herd/alloc.h explains the placement and the binding).  A plan that
 * herd_alloc made also holds the leases of its GPUs (herd/lease.h).
 */
#ifndef HERD_PLAN_H
#define HERD_PLAN_H

#include "common.h"
#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A plan: ranks, their GPUs, CPUs and NICs, and why.  Opaque. */
typedef struct herd_plan herd_plan;

/* One GPU of a plan (herd_plan_gpu).  Borrowed from the plan. */
typedef struct herd_plan_gpu_info {
	int rank;                   /* the rank it belongs to */
	size_t node;                /* the node's index in the inventory */
	const char *hostname;
	size_t index;               /* in the node's gpus[] (PCI bus order) */
	const char *uuid;
	const char *pci_bus_id;
	int numa_node;              /* -1 when unknown */
} herd_plan_gpu_info;

/* One rank of a plan (herd_plan_rank).  Borrowed from the plan. */
typedef struct herd_plan_rank_info {
	int rank;                   /* 0-based, node by node */
	size_t node;                /* the node's index in the inventory */
	const char *hostname;
	int node_rank;              /* the node's place among the plan's nodes */
	int local_rank;             /* the rank's place on its node */
	size_t ngpus;
	const herd_plan_gpu_info *gpus; /* in PCI bus order */
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
} herd_plan_rank_info;

/* Number of ranks, GPUs and distinct nodes of a plan. */
HERD_EXTERN size_t herd_plan_rank_count(const herd_plan *plan);
HERD_EXTERN size_t herd_plan_gpu_count(const herd_plan *plan);
HERD_EXTERN size_t herd_plan_node_count(const herd_plan *plan);

/*
 * Rank i (0-based) into *rank, borrowed from the plan.  HERD_EINVAL naming
 * i and the count when i is out of range (*rank NULL then).
 */
HERD_EXTERN herd_status herd_plan_rank(const herd_plan *plan, size_t i,
				       const herd_plan_rank_info **rank);

/*
 * GPU i of the plan (ranks' GPUs in rank order) into *gpu, borrowed from
 * the plan.  HERD_EINVAL naming i and the count when i is out of range
 * (*gpu NULL then).
 */
HERD_EXTERN herd_status herd_plan_gpu(const herd_plan *plan, size_t i,
				      const herd_plan_gpu_info **gpu);

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
HERD_EXTERN const char *herd_plan_link_code(const herd_plan *plan, size_t i, size_t j,
					    char buf[HERD_NODE_LINK_CODE_LEN]);

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
 * that no lease accounts for: a stale job?): how many, and warning i into
 * *text, borrowed from the plan.  HERD_EINVAL naming i and the count when
 * i is out of range (*text NULL then).
 */
HERD_EXTERN size_t herd_plan_warning_count(const herd_plan *plan);
HERD_EXTERN herd_status herd_plan_warning(const herd_plan *plan, size_t i, const char **text);

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

#ifdef __cplusplus
}
#endif

#endif /* HERD_PLAN_H */
