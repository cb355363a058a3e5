/*
 * sdk/launch/holders.h - a job's checkpoint holders (holders.c): one
 * `herd ckpt hold` per node, for the job's whole life.  Internal to
 * libherd.
 */
#ifndef HERD_LAUNCH_HOLDERS_H
#define HERD_LAUNCH_HOLDERS_H

#include "launch_internal.h"

typedef struct herd__holders herd__holders;

/* The holders of a job over backend be (program: herd on the nodes); none started yet. */
herd_status herd__holders_create(herd__holders **out, const herd__launch_backend *be,
				 const char *program);

/*
 * Makes sure each of hosts[0..n) (a run's nodes, in node order) has a
 * holder: those whose holder ended since are started again, and those
 * never started are started, all at once, each given timeout_ms to print
 * its port.  *list (malloc'ed) gets HERD_CKPT_HOLDERS for the run: the
 * holders in node order, "-" for a node without one, and notes (notes_cap
 * bytes) why each such node has none ("" when all have one).  A holder
 * that does not start is no failure of the run: its node's copies go
 * elsewhere.
 */
herd_status herd__holders_ensure(herd__holders *hs, const char *const *hosts, size_t n,
				 int timeout_ms, char **list, char *notes, size_t notes_cap);

/* Closes every holder's channel (each ends with its input) and frees.  Accepts NULL. */
void herd__holders_free(herd__holders *hs);

#endif /* HERD_LAUNCH_HOLDERS_H */
