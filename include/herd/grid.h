/*
 * herd/grid.h - the grid of a parallel job: named dimensions (tensor,
 * context, expert, data, pipeline parallelism...) whose sizes multiply to
 * the number of ranks, laid on the ranks so that the innermost dimension
 * stays inside a node.
 *
 * Dimensions are listed innermost first, as Megatron-LM's order
 * "tp-cp-ep-dp-pp" lists them: the first varies fastest from one rank to
 * the next.  The ranks are taken node by node (a node's ranks in rank
 * order, the nodes in the order of their first rank), and the grid's
 * position p (mixed radix over the sizes, the first dimension the least
 * significant digit) goes to the p-th of them.  So a dimension whose size
 * times the sizes inside it divides a node's ranks keeps each of its
 * groups on one node (a tp group of 8 on an 8-GPU node), and the
 * dimensions outside it go across nodes.
 *
 * A group along a dimension is the ranks that differ only in their
 * coordinate along it (a tp group: the ranks that hold one layer's
 * shards); there are nranks / size of them.  herd alloc --grid prints a
 * planned job's grid with the worst link of each dimension's groups.
 */
#ifndef HERD_GRID_H
#define HERD_GRID_H

#include <stddef.h>

#include "comm.h"
#include "common.h"
#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HERD_GRID_MAX_DIMS 8
#define HERD_GRID_NAME_MAX 16

typedef struct herd_grid_dim {
	char name[HERD_GRID_NAME_MAX];   /* letters, digits and '_', from a letter */
	int size;                        /* 1 or more */
} herd_grid_dim;

typedef struct herd_grid herd_grid;

/*
 * "tp=4,pp=2,dp=2" into dims[0..*ndims) (at most max), in the order
 * written.  HERD_EINVAL naming the part at fault: a missing '=', a name
 * that is not letters, digits and '_', a name given twice, a size that is
 * not a whole number of 1 or more, more than max dimensions.
 */
HERD_EXTERN herd_status herd_grid_parse(const char *text, herd_grid_dim *dims, size_t max,
					size_t *ndims);

/* Megatron-LM's order of the dimensions, innermost first: the default. */
#define HERD_GRID_MEGATRON_ORDER "tp-cp-ep-dp-pp"

/*
 * Where a rank runs, as herd_grid_create lays the grid on the ranks: its
 * node, and within the node the set of GPUs that NVLink joins its GPU to
 * (any numbering; 0 for every rank where there is no GPU, or one set).
 */
typedef struct herd_grid_place {
	int node;
	int nvset;
} herd_grid_place;

/*
 * The grid of dims[0..ndims) over nranks ranks, rank r at place[r] (NULL:
 * one node, one set).
 *
 * The dimensions are put in order, innermost first: order lists names
 * joined by '-' ("tp-dp-pp"; NULL: HERD_GRID_MEGATRON_ORDER), and a
 * dimension it does not name is HERD_EINVAL saying so.  When the order
 * names "dp", dims do not, and their sizes' product divides nranks with a
 * quotient above 1, a "dp" of that quotient is added at dp's place.
 *
 * The ranks are then taken node by node (the nodes in the order of their
 * first rank), within a node set by set (the same), within a set in rank
 * order, and the grid's position p goes to the p-th of them.
 *
 * HERD_EINVAL when the sizes do not multiply to nranks (saying both), a
 * size is below 1, a name is bad or repeated, or there are more than
 * HERD_GRID_MAX_DIMS.  Free with herd_grid_free.
 */
HERD_EXTERN herd_status herd_grid_create(herd_grid **out, const herd_grid_dim *dims,
					 size_t ndims, const char *order, int nranks,
					 const herd_grid_place *place);
HERD_EXTERN void herd_grid_free(herd_grid *grid);

HERD_EXTERN int herd_grid_size(const herd_grid *grid);      /* the ranks */
HERD_EXTERN size_t herd_grid_ndims(const herd_grid *grid);
/* Dimension d, innermost first; NULL out of range. */
HERD_EXTERN const herd_grid_dim *herd_grid_dim_at(const herd_grid *grid, size_t d);
/* The dimension named name into *d; HERD_ENOTFOUND listing the names. */
HERD_EXTERN herd_status herd_grid_find(const herd_grid *grid, const char *name, size_t *d);

/* Rank r's coordinate along each dimension into coords[0..ndims). */
HERD_EXTERN herd_status herd_grid_coords(const herd_grid *grid, int rank, int *coords);
/* The rank at coords[0..ndims) into *rank. */
HERD_EXTERN herd_status herd_grid_rank(const herd_grid *grid, const int *coords, int *rank);

/*
 * Rank r's group along dimension d: its ranks, by their coordinate along
 * d, into ranks[0..size of d), and (group may be NULL) the group's index
 * among the nranks / size groups along d, 0.., in the order of their
 * smallest rank (a split's color).
 */
HERD_EXTERN herd_status herd_grid_group(const herd_grid *grid, size_t d, int rank, int *ranks,
					int *group);

/* ---------------------------------------------------------- explanation */

#define HERD_GRID_LINK_LEN 8

/*
 * The class of the link between two ranks' GPUs, as a grid's explanation
 * names it, into code: between nodes (same_node false) "NET"; on one node
 * with link NULL (a GPU not known) "SHM", shared memory; else link's
 * matrix code ("X" for one GPU, "NV18", "PIX", "SYS"...).  Returns its
 * badness, larger worse: NET, then SHM, SYS ... PIX, NV# with fewer links
 * before more, X.
 */
HERD_EXTERN int herd_grid_link_class(const herd_link *link, bool same_node,
				     char code[HERD_GRID_LINK_LEN]);

/* The link between ranks a and b of a grid: its class into code, and its
 * badness (herd_grid_link_class). */
typedef int (*herd_grid_link_fn)(void *arg, int a, int b, char code[HERD_GRID_LINK_LEN]);

/*
 * A grid explained, into *out (malloc; the caller frees): as text, a line
 * per dimension (its size, its groups, the worst link in any of them and
 * that group), a line per group (its ranks, hosts and worst link), and a
 * line per rank (its host and coordinates); or as one JSON object
 * {"spec", "ranks", "nodes", "dims": [{"name", "size", "worst_link",
 * "groups": [{"group", "ranks", "hosts", "link"}]}], "coords": [[...]],
 * "warnings": [...]} (json true).  hosts[r]: rank r's host; link: the
 * link between two ranks.  The warnings, also into *warnings when it is
 * not NULL ("" when none; malloc, the caller frees), a line each: every
 * group of the innermost dimension, and of a dimension named "tp", whose
 * ranks are on several nodes, with its ranks, hosts and links.
 */
HERD_EXTERN herd_status herd_grid_explain(const herd_grid *grid, const char *const *hosts,
					  herd_grid_link_fn link, void *arg, bool json,
					  char **out, char **warnings);

/* ------------------------------------------------- a grid's communicators */

/* A grid laid on a communicator's ranks, with a communicator per group. */
typedef struct herd_comm_grid herd_comm_grid;

/*
 * herd_comm_grid_create lays the grid of dims[0..ndims), in order (herd_grid_create: NULL is
 * Megatron's tp-cp-ep-dp-pp, a missing dp made up), on comm's ranks and
 * makes, for every dimension, the communicator of this rank's group along
 * it (herd_comm_split: a group's ranks numbered by their coordinate along
 * the dimension).  Collective over comm; every group has every call of
 * herd/comm.h, on host and device memory, with comm's deadline; each is
 * named "tp group 1" in its messages, which give each rank's rank in comm
 * too, and in its flight recorder.
 *
 * Placement: the ranks are taken node by node (herd_comm_host), and
 * within a node by the sets of GPUs NVLink joins, so that the innermost
 * dimension stays inside a node and an NVLink set when the sizes allow.
 * A rank's GPU is the first of its CUDA_VISIBLE_DEVICES (a UUID, as herd
 * launch sets it, or an index in PCI bus order), found in this node's
 * inventory (herd_cluster_discover, which honours HERD_INVENTORY); a rank
 * without one, or whose GPU another rank of its host claims too (ranks
 * that each see every GPU), is placed and linked by its host alone.
 *
 * Every rank learns every rank's grid, GPU and links in one exchange
 * first, so that a grid which does not fit (sizes that do not multiply to
 * comm's size, a name the order lacks, a size below 1) is HERD_EINVAL on
 * every rank naming the rank and the fault, and grids that differ between
 * ranks are HERD_EMISMATCH naming two of them: no rank is left waiting.
 * The explanation (herd_comm_grid_explain) is the same on every rank, and
 * rank 0 logs its warnings (a tp group across nodes) at warning level.
 * Free with herd_comm_grid_free, before comm.
 */
HERD_EXTERN herd_status herd_comm_grid_create(herd_comm_grid **out, herd_comm *comm,
					      const herd_grid_dim *dims, size_t ndims,
					      const char *order);

/* The grid: dimensions, coordinates of any rank, ranks of any group
 * (herd_grid_coords, herd_grid_group); borrowed from g. */
HERD_EXTERN const herd_grid *herd_comm_grid_layout(const herd_comm_grid *g);

/*
 * This rank's group along the dimension named name into *group, borrowed
 * from g (freed with it); HERD_ENOTFOUND naming the dimensions.
 */
HERD_EXTERN herd_status herd_comm_grid_group(const herd_comm_grid *g, const char *name,
					     herd_comm **group);

/*
 * Takes the group along name out of g: the caller frees it
 * (herd_comm_free, before the parent communicator); g no longer has it
 * (herd_comm_grid_group: HERD_ENOTFOUND saying it was taken).
 */
HERD_EXTERN herd_status herd_comm_grid_take(herd_comm_grid *g, const char *name,
					    herd_comm **group);

/*
 * The grid explained (herd_grid_explain's text: the link classes between
 * the ranks' GPUs of each node, NET between nodes, SHM on a node whose
 * GPUs are not known), then its warnings, each line "warning: ...";
 * borrowed from g.
 */
HERD_EXTERN const char *herd_comm_grid_explain(const herd_comm_grid *g);

/* Frees the groups still in g (herd_comm_free: local) and g.  Accepts NULL. */
HERD_EXTERN void herd_comm_grid_free(herd_comm_grid *g);

#ifdef __cplusplus
}
#endif

#endif /* HERD_GRID_H */
