/*
 * herd/hostlist.h - Slurm's hostlist expressions, read and written.
 */
#ifndef HERD_HOSTLIST_H
#define HERD_HOSTLIST_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Hostlist expressions, as Slurm writes them ("node[01-04,07]",
 * "a[1-2]b[3-4]", "login,gpu[1-2]"; a range keeps the width of its low
 * end: "[08-10]" is 08 09 10).  herd_hostlist_expand gives the names in
 * order, duplicates kept, as one block freed with herd_free (*names points
 * at n strings inside it); empty items are dropped as Slurm drops them
 * ("a,,b" is a b, "n[1-2]," is n1 n2); HERD_EFORMAT with the column of
 * what is wrong, also beyond 65536 names and for an expression that names
 * no host (",").  herd_hostlist_compress writes names back as
 * `scontrol show hostlist` does, order kept, so that Slurm and
 * herd_hostlist_expand read them back: neighbouring names that differ in
 * their trailing number share a bracket, a number one above the last
 * continues a range when both are unpadded or have the range's padded
 * width ("n[08-10]", "n[9-11]", "n[09,010]"), a name with text after its
 * number stays whole (*expr freed with herd_free); HERD_EINVAL naming a
 * name an expression cannot hold.  Beyond Slurm, expand also takes text
 * after a bracket ("node[1-2]-ib").
 */
HERD_EXTERN herd_status herd_hostlist_expand(const char *expr, char ***names, size_t *n);
HERD_EXTERN herd_status herd_hostlist_compress(const char *const *names, size_t n,
					       char **expr);
#ifdef __cplusplus
}
#endif

#endif /* HERD_HOSTLIST_H */
