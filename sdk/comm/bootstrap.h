/*
 * sdk/comm/bootstrap.h - a job's store at an address every rank derives
 * (bootstrap.c), for ranks started by an engine that names none: Slurm's
 * srun, Open MPI's mpirun, torchrun serving its own agent store.
 */
#ifndef HERD_COMM_BOOTSTRAP_H
#define HERD_COMM_BOOTSTRAP_H

#include <stddef.h>

#include "herd/store.h"

/* How many consecutive ports rank 0 may take, and the others try. */
#define HERD__BOOT_PORTS 8

typedef struct herd__boot {
	char host[256];   /* where rank 0 runs, as the other ranks reach it */
	char tag[300];    /* the job and step, the same on every rank: "slurm:42.0" */
	char secret[65];  /* hex HMAC-SHA256, from herd__boot_secret */
} herd__boot;

/* The k-th port (0 <= k < HERD__BOOT_PORTS) for tag, in [20000, 60000). */
int herd__boot_port(const char *tag, int k);

/*
 * The job secret for tag into out (64 hex digits and a NUL; cap >= 65):
 * HMAC-SHA256 keyed with shared_key (what the engine shares with the
 * job's ranks only) or, when that is NULL or empty, with the user's
 * secret file ~/.herd/secret, created (0600, in a 0700 directory) when
 * missing.  HERD_EINVAL when that file can be read by others or is not a
 * regular file of this user.
 */
herd_status herd__boot_secret(const char *shared_key, const char *tag, char *out, size_t cap);

/* Rank 0: serves the store on the first of the derived ports it can bind. */
herd_status herd__boot_serve(herd_store_server **out, const herd__boot *b);

/*
 * Another rank: tries the derived ports in turn until one authenticates
 * with the job's secret or timeout_ms pass (HERD_ETIMEDOUT, naming the
 * host, the ports and the last failure).  addr receives the address of
 * the store found.
 */
herd_status herd__boot_connect(herd_store **out, const herd__boot *b, int timeout_ms,
			       char *addr, size_t cap);

#endif
