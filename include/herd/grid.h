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

#include "common.h"

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

/*
 * The grid of dims[0..ndims) (innermost first) over nranks ranks, rank r
 * on node node[r] (any numbering; NULL: one node).  When no dimension is
 * named "dp" and the sizes' product divides nranks with a quotient above
 * 1, a "dp" of that quotient is added before "pp" (Megatron's place),
 * else last.  HERD_EINVAL when the sizes do not multiply to nranks (saying
 * both), a size is below 1, a name is bad or repeated, or there are more
 * than HERD_GRID_MAX_DIMS.  Free with herd_grid_free.
 */
HERD_EXTERN herd_status herd_grid_create(herd_grid **out, const herd_grid_dim *dims,
					 size_t ndims, int nranks, const int *node);
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

#ifdef __cplusplus
}
#endif

#endif /* HERD_GRID_H */
