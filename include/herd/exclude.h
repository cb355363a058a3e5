/*
 * herd/exclude.h - the nodes herd_job_launch leaves out, one list for
 * every backend.
 */
#ifndef HERD_EXCLUDE_H
#define HERD_EXCLUDE_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Excluded nodes: one list for every backend, which herd_job_launch
 * leaves out of a job's nodes (a hostlist, a hostfile or a Slurm
 * allocation alike; srun then gets the nodes that remain), with what the
 * job's own herd_job_spec.exclude adds.  The list is a file of lines
 * "HOST<TAB>UNIX_SECONDS<TAB>REASON": HERD_EXCLUDE_FILE, else
 * ${XDG_STATE_HOME:-~/.local/state}/herd/exclude.  Writers lock it
 * (flock) and replace it whole.
 */
typedef struct herd_exclude_entry {
	char host[256];
	double since;               /* when it was excluded, Unix seconds */
	char reason[256];           /* why, as given; "" when none */
} herd_exclude_entry;

/* The list's path into out (cap bytes).  HERD_EUNAVAIL when neither
 * HERD_EXCLUDE_FILE, XDG_STATE_HOME nor HOME says where. */
HERD_EXTERN herd_status herd_exclude_path(char *out, size_t cap);
/* The excluded nodes, in the order they were added, into *out (free with
 * herd_free); none (or no file) is *n == 0.  HERD_EFORMAT naming the line
 * of a malformed file. */
HERD_EXTERN herd_status herd_exclude_list(herd_exclude_entry **out, size_t *n);
/* Excludes the nodes of hosts (a hostlist expression) with reason (NULL:
 * none); a node already there keeps its first time and reason.  *added
 * (may be NULL): how many were new. */
HERD_EXTERN herd_status herd_exclude_add(const char *hosts, const char *reason, size_t *added);
/* Takes the nodes of hosts (a hostlist expression) back.  *removed (may be
 * NULL): how many were there. */
HERD_EXTERN herd_status herd_exclude_remove(const char *hosts, size_t *removed);

#ifdef __cplusplus
}
#endif

#endif /* HERD_EXCLUDE_H */
