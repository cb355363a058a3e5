/*
 * sdk/comm/grid_internal.h - what grid.c lends comm_grid.c.
 */
#ifndef HERD_COMM_GRID_INTERNAL_H
#define HERD_COMM_GRID_INTERNAL_H

#include "herd/common.h"

/*
 * The hosts of n ranks: node[r] = the smallest rank on hosts[r]'s host,
 * and (order may be NULL) order[0..n) = the ranks grouped by host, the
 * groups by their smallest rank, each in rank order.  *nhosts: how many.
 * O(n log n).  HERD_ENOMEM.
 */
herd_status herd__grid_hosts(const char *const *hosts, int n, int *node, int *order,
			     int *nhosts);

#endif /* HERD_COMM_GRID_INTERNAL_H */
