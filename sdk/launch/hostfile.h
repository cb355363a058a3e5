/*
 * sdk/launch/hostfile.h - hostfiles in the Open MPI / DeepSpeed form.
 * Internal to libherd.
 *
 *     # comment (to the end of any line)
 *     node01 slots=8
 *     node02 slots=8 max_slots=16
 *     node03                      # one slot
 *
 * One host per line, then "key=value" fields: slots (the ranks it takes,
 * default 1) and max_slots (or max-slots; read, checked to be at least
 * slots, otherwise unused: herd never oversubscribes).  A host listed
 * twice is one node whose slots add up, at the place it was first listed,
 * as Open MPI does (max_slots adds up too when every line gave one).
 * Names follow the rules of sdk/topo/hostlist.h.
 */
#ifndef HERD_LAUNCH_HOSTFILE_H
#define HERD_LAUNCH_HOSTFILE_H

#include <stddef.h>

#include "herd/common.h"

/* Most slots one host may have, and most hosts in one file. */
#define HERD__HOSTFILE_MAX_SLOTS 65536
#define HERD__HOSTFILE_MAX_HOSTS 65536

/* Largest hostfile read, in bytes. */
#define HERD__HOSTFILE_MAX_BYTES (16u * 1024u * 1024u)

typedef struct herd__hostfile_host {
	char *name;
	int slots;
	int max_slots; /* 0 when not given */
	int line;      /* where it was first listed */
} herd__hostfile_host;

/* The hosts of a hostfile, in the order first listed. */
typedef struct herd__hostfile {
	herd__hostfile_host *hosts;
	size_t n, cap;
} herd__hostfile;

/*
 * Reads the hostfile at path into out (freed by the caller with
 * herd__hostfile_free; empty after a failure).  HERD_EFORMAT with
 * "PATH:LINE:COLUMN: what was expected" for a malformed line, and for a
 * file with no hosts or over HERD__HOSTFILE_MAX_BYTES; HERD_ENOTFOUND
 * when there is no such file, HERD_EINVAL when path is not a regular file
 * (a FIFO, a device, a directory: a wrong argument, never waited on),
 * HERD_EIO when it cannot be read.
 */
herd_status herd__hostfile_load(herd__hostfile *out, const char *path);

/*
 * Parses len bytes of hostfile text; origin names it in messages (a path).
 * As herd__hostfile_load otherwise.
 */
herd_status herd__hostfile_parse(herd__hostfile *out, const char *text, size_t len,
				 const char *origin);

/* Frees the hosts; accepts a zeroed hostfile. */
void herd__hostfile_free(herd__hostfile *hf);

/* The sum of the slots of all hosts. */
size_t herd__hostfile_slots(const herd__hostfile *hf);

#endif /* HERD_LAUNCH_HOSTFILE_H */
