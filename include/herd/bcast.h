/*
 * herd/bcast.h - a file to every node, as Slurm's sbcast, over the nodes
 * a job would run on (herd/job.h's herd_job_where).
 */
#ifndef HERD_BCAST_H
#define HERD_BCAST_H

#include "common.h"
#include "job.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HERD_BCAST_OPTS_VERSION 1

/* One node's outcome: host, and status with error NULL when the node has
 * the file, else the reason. */
typedef void (*herd_bcast_fn)(void *userdata, const char *host, herd_status status,
			      const char *error);

/* Options of herd_bcast.  A zeroed field means its default. */
typedef struct herd_bcast_opts {
	unsigned int version;      /* HERD_BCAST_OPTS_VERSION */
	herd_job_where where;      /* HERD_JOB_HOSTS, HERD_JOB_HOSTFILE or HERD_JOB_SLURM */
	const char *hosts;         /* the hostlist expression or the hostfile's path */
	int timeout_ms;            /* a node that takes or says nothing this long fails;
				    * default 30000 */
	const char *herd_program;  /* `herd` on the nodes; default $HERD_PROGRAM, else "herd" */
	herd_bcast_fn result;      /* each node's outcome (error NULL when it has the file) */
	void *userdata;
} herd_bcast_opts;

#define HERD_BCAST_OPTS_INIT { HERD_BCAST_OPTS_VERSION, HERD_JOB_HOSTS, NULL, 0, NULL, NULL, NULL }

/*
 * Copies the regular file `file` to the path `dest` on every node of
 * opts->where / ->hosts (a hostlist or hostfile over ssh, or the Slurm
 * allocation through one srun step whose stdin reaches every task).  Every
 * node first checks dest (nothing there, or a regular file: a device, a
 * FIFO, a symbolic link or a directory is refused there, and that node is
 * sent nothing), then receives the bytes and their XXH3-64 on the stdin of
 * `herd bcast --receive`, writes them to a temporary file beside dest,
 * checks the sum, fsyncs and renames the file into place (dest's directory
 * must exist), with file's mode.  Over ssh, beyond HERD_SSH_TREE_MIN nodes (default 32)
 * the nodes form a tree as the launch does: this process sends to
 * HERD_SSH_TREE_WIDTH first-level nodes (default the square root of the
 * count), and each of them forwards the stream to its group while it
 * writes its own copy, so no sender serves every node.  A node that fails
 * (cannot be reached, takes nothing for opts->timeout_ms, a full disk, a
 * wrong sum) is given to opts->result with its reason, and the others keep
 * their copies.  HERD_OK when every node has the file; HERD_EPEER naming
 * how many failed and the first of them otherwise; HERD_EINVAL,
 * HERD_EFORMAT, HERD_ENOTFOUND for bad arguments, hostlists or files,
 * HERD_EIO when the file cannot be read or shrinks while it is sent (then
 * no node keeps a copy).
 * Returns once every helper process it started has ended.
 */
HERD_EXTERN herd_status herd_bcast(const char *file, const char *dest, const herd_bcast_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* HERD_BCAST_H */
