/*
 * sdk/topo/hostlist.h - hostlist expressions as Slurm writes them, parsed
 * and printed by herd's own code.  Internal to libherd.
 *
 * An expression is a list of items separated by commas (or blanks); an
 * empty item ("a,,b", a trailing or leading comma) is dropped, as Slurm
 * drops it, but an expression must name a host.  An item is literal text
 * with any number of bracket groups, and a group is a comma list of
 * numbers and ranges (where nothing may be empty):
 *
 *     node[01-04,07]        node01 node02 node03 node04 node07
 *     a[1-2]b[3-4]          a1b3 a1b4 a2b3 a2b4   (the last group varies fastest)
 *     rack1-n[001-003]-ib   rack1-n001-ib rack1-n002-ib rack1-n003-ib
 *     login,gpu[1-2]        login gpu1 gpu2
 *
 * A range "lo-hi" prints its numbers as wide as lo is written, so leading
 * zeros are kept ("[08-10]" is 08 09 10; "[8-10]" is 8 9 10).  Names are
 * made of letters, digits, '.', '-' and '_', and start with a letter, a
 * digit or '_' (a leading '-' would reach ssh as an option).
 */
#ifndef HERD_TOPO_HOSTLIST_H
#define HERD_TOPO_HOSTLIST_H

#include <stddef.h>

#include "herd/common.h"

/* Most names one expression may expand to; more is HERD_EFORMAT. */
#define HERD__HOSTLIST_MAX_NAMES 65536

/* Longest host name, as DNS allows. */
#define HERD__HOSTNAME_MAX 253

/* Most bracket groups in one item. */
#define HERD__HOSTLIST_MAX_GROUPS 8

/* A list of host names, in the order the expression gives them. */
typedef struct herd__hostlist {
	char **names; /* n NUL-terminated names, each its own allocation */
	size_t n, cap;
} herd__hostlist;

/*
 * Expands expr into out, which the caller frees with herd__hostlist_free
 * (after a failure it is empty).  HERD_EFORMAT when malformed, with a message that
 * quotes the expression and names the 1-based column:
 *     hostlist "node[01-": column 9: expected a number after '-'
 * and when it would expand to more than HERD__HOSTLIST_MAX_NAMES names or a
 * name longer than HERD__HOSTNAME_MAX; the size is computed before any
 * name is made, so "n[0-999999999]" is refused without allocating.
 * Duplicates are kept.
 */
herd_status herd__hostlist_expand(herd__hostlist *out, const char *expr);

/* Frees the names; the list is empty and reusable.  Accepts a zeroed list. */
void herd__hostlist_free(herd__hostlist *hl);

/*
 * Appends a copy of name to hl, checked as a name of an expression would
 * be (HERD_EINVAL naming it when it is not one).
 */
herd_status herd__hostlist_push(herd__hostlist *hl, const char *name);

/*
 * Writes names[0..n) back in Slurm's form, into a fresh string (*out, freed
 * with free): runs of names that differ only in their last number share one
 * bracket group, consecutive numbers become ranges, and the order is kept,
 * so expanding the result gives names back exactly ("node[01-04,07]").
 * HERD_EINVAL for a name that an expression cannot hold.
 */
herd_status herd__hostlist_compress(char **out, const char *const *names, size_t n);

/*
 * Whether name is a valid host name for an expression; when it is not and
 * why is not NULL, *why says what is wrong.
 */
int herd__hostlist_name_ok(const char *name, const char **why);

#endif /* HERD_TOPO_HOSTLIST_H */
