/*
 * sdk/alloc/planner.h - what the files of herd_alloc_plan share: the
 * planner's state, a node's candidates, the quality of a set, and the
 * steps (candidates.c, search.c, planner.c's node choice, bind.c,
 * describe.c, explain.c).  Private to sdk/alloc.
 */
#ifndef HERD_ALLOC_PLANNER_H
#define HERD_ALLOC_PLANNER_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc_internal.h"
#include "topo/pci.h"

/* Pair classes in the order of preference; NONE is "no NIC at all". */
enum { CLS_NV = 0, CLS_PIX, CLS_PXB, CLS_PHB, CLS_NODE, CLS_SYS, CLS_NONE };

/* Sets a node may offer before the search turns greedy. */
#define EXHAUSTIVE_MAX_SETS 20000
#define EXHAUSTIVE_MAX_CANDIDATES 64
#define GREEDY_MAX_SEEDS 32
/* Unavailable GPUs named one by one in a message, and nodes listed. */
#define MESSAGE_MAX_GPUS 8
#define MESSAGE_MAX_NODES 4

/* What makes a set better, compared field by field, lower first. */
struct quality {
	long busy;    /* GPUs with processes no lease accounts for */
	long worst;   /* worst pair class */
	long sum;     /* sum of pair classes */
	long nvlinks; /* minus the NVLinks between pairs */
	long nic;     /* sum of the nearest NIC's class, when near_nic */
	long numa;    /* NUMA nodes touched (negated for spread) */
	long fit;     /* free GPUs left on those NUMA nodes (negated for spread) */
};

enum { Q_BUSY, Q_WORST, Q_SUM, Q_NVLINKS, Q_NIC, Q_NUMA, Q_FIT, Q_SAME };

/* Why a GPU of a node is not a candidate. */
enum why_not {
	WHY_CANDIDATE = 0,
	WHY_EXCLUDED,
	WHY_NOT_INCLUDED,
	WHY_HELD,
	WHY_SHARED,
	WHY_UNKNOWN,
	WHY_MEMORY,
	WHY_BADUUID
};

struct cand {
	size_t gpu; /* in node->gpus */
	int numa;   /* dense index of its NUMA node among the candidates' */
	int busy;
	int nic_class; /* of its nearest NIC, CLS_NONE without one */
};

/* One node: its candidates and the links between them. */
struct node_ctx {
	const herd_node *node;
	size_t index;
	enum why_not *why;              /* per GPU of the node */
	const herd_alloc_gpu_status **status; /* per GPU, NULL when none */
	size_t ncand;
	struct cand *cand;
	unsigned char *cls; /* ncand * ncand pair classes */
	unsigned char *nvl; /* ncand * ncand NVLink counts, capped */
	int nnuma;          /* distinct NUMA nodes of the candidates */
	size_t *numa_free;  /* candidates per dense NUMA index */
	int *numa_os;       /* dense index -> os index (-1 unknown) */
};

/* The best set (and runner-up) of k candidates of one node. */
struct choice {
	bool ok;
	size_t k;
	size_t *set; /* k candidate indices, ascending */
	struct quality q;
	bool has_second;
	size_t *second;
	struct quality q2;
	bool greedy;
	unsigned long evaluated;
};

struct planner {
	const herd_cluster *cluster;
	const herd_alloc_request *req;
	long G, K, N, R;
	bool single; /* every GPU on one node */
	bool spread;
	const herd_alloc_gpu_status **sorted;
	size_t nsorted;
	struct node_ctx *nodes;
	size_t nnodes;
};

/* A node taking part in the plan, with its count and chosen set. */
struct pick {
	struct node_ctx *nc;
	struct choice ch;
};

/* Points, short codes and words of the pair classes (candidates.c). */
extern const int herd__planner_class_points[];
extern const char *const herd__planner_class_codes[];
extern const char *const herd__planner_class_words[];

/* candidates.c: pair classes, the order of quality, each node's candidates. */
int herd__planner_link_class(herd_link l);
int herd__planner_quality_diff(const struct quality *a, const struct quality *b);
int herd__planner_quality_cmp(const struct quality *a, const struct quality *b);
int herd__planner_status_cmp(const void *a, const void *b);
herd_status herd__planner_check_listed_names(const herd_cluster *cluster, const char *field,
					     const char *const *names, size_t n);
uint64_t herd__planner_gpu_free_memory(const herd_gpu *g, const herd_alloc_gpu_status *s);
herd_status herd__planner_node_prepare(const struct planner *p, struct node_ctx *nc, size_t index);
void herd__planner_node_clear(struct node_ctx *nc);
bool herd__planner_pair_ok(const struct planner *p, const struct node_ctx *nc, size_t a, size_t b);
/* search.c: the best set of k candidates of a node, and the largest set. */
void herd__planner_choice_clear(struct choice *ch);
herd_status herd__planner_search_node(const struct planner *p, const struct node_ctx *nc, size_t k,
				      struct choice *ch);
size_t herd__planner_largest_feasible(const struct planner *p, const struct node_ctx *nc);
/* describe.c: HERD_ENORESOURCE with what each node lacks. */
double herd__planner_gib(uint64_t bytes);
void herd__planner_describe_node_unavailable(herd__text *t, const struct planner *p,
					     const struct node_ctx *nc, const char *prefix);
herd_status herd__planner_no_resource(const struct planner *p, long nodes, long per_node);
herd_status herd__planner_no_resource_total(const struct planner *p, size_t total);
/* bind.c: the plan's ranks, bound to NICs and CPUs. */
const char *herd__planner_numa_cpus(const herd_node *node, int os_index);
herd_status herd__planner_build(const struct planner *p, herd_plan *plan, struct pick *picks,
				size_t npicks);
/* explain.c: the plan's explanation. */
herd_status herd__planner_explain(const struct planner *p, herd_plan *plan,
				  const struct pick *picks, size_t npicks);

#endif /* HERD_ALLOC_PLANNER_H */
