/*
 * herd/jobs.h - the running jobs of this user on this node, whoever
 * launched them: what each is doing, and a way to stop one.
 */
#ifndef HERD_JOBS_H
#define HERD_JOBS_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Running jobs.  While a job runs, the process that launched it (herd
 * launch, or any program through herd_job_launch) answers on a control
 * socket of its own, ID.sock in herd_jobs_dir(), to processes of the same
 * user: what the job is and where its ranks are, and a request to stop it
 * as Ctrl-C on herd launch would (the job ends as interrupted by SIGINT).
 */

/* This user's directory of control sockets, made if missing (mode 0700):
 * $XDG_RUNTIME_DIR/herd/jobs, else /tmp/herd-jobs-UID.  HERD_EINVAL when
 * it is not this user's alone. */
HERD_EXTERN herd_status herd_jobs_dir(char *out, size_t cap);
/*
 * The status of job id (NULL: of every running job of this user on this
 * node, as a JSON array) as JSON, into *json (malloc, the caller frees):
 *   {"id", "kind" ("job"), "pid" (the launcher's), "command", "hosts", "nodes", "ranks",
 *    "state" ("starting", "running", "failing", "stopping"), "restarts",
 *    "started" (Unix seconds), "age" (seconds),
 *    "rank_states": [{"rank", "host", "pid", "state"}, ...]}
 * HERD_ENOTFOUND when no job id of this user answers here; a socket left
 * by a launcher that died is removed while listing.
 */
HERD_EXTERN herd_status herd_jobs_status(const char *id, char **json);
/* Stops job id as Ctrl-C on its launcher would.  Errors as herd_jobs_status's. */
HERD_EXTERN herd_status herd_jobs_stop(const char *id);
/*
 * A service (herd/serve.h) answers too, as a job whose status has "kind":
 * "service" and its replicas; these two act on one (a job of ranks
 * refuses them, HERD_EINVAL):
 */
/* Sets service id's replicas to n (herd_serve_scale). */
HERD_EXTERN herd_status herd_jobs_scale(const char *id, int n);
/* Restarts service id's replicas, one at a time when rolling (herd_serve_restart). */
HERD_EXTERN herd_status herd_jobs_restart(const char *id, bool rolling);

#ifdef __cplusplus
}
#endif

#endif /* HERD_JOBS_H */
