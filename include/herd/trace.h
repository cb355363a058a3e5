/*
 * herd/trace.h - the flight recorders of a job read back: which call each
 * rank of each communicator completed last, which it is in, and who is
 * missing from the next call (the wavefront).
 *
 * Every communicator keeps a ring of its last calls (herd_comm_opts'
 * trace_ring, HERD_TRACE_RING, 1024 by default); with HERD_TRACE_DIR set,
 * as `herd launch` sets it for its ranks, the ring is a file of that
 * directory, ID.RANK.trace, which stays readable when the rank is stopped,
 * killed or wedged.  The format is in docs/reliability.md ("The flight
 * recorder").
 *
 * The wavefront of a communicator: the next call is the highest
 * collective number any rank entered.  Each rank is then one of
 *   entered     in the next call, or past it
 *   not called  its last call completed and it has not called the next
 *               one: a hang in the application (it is elsewhere)
 *   stuck       inside an earlier call
 *   failed      its last call, an earlier one, failed
 *   stopped     its process is stopped (SIGSTOP, a debugger)
 *   gone        its process ended without closing the communicator
 *   not read    no file of it was found
 *   named       the rank that did not answer the others (below)
 * and the culprits are the ranks missing from the next call.  When every
 * rank entered it and none completed it, the hang is in communication (a
 * link, a peer's transport) and the ranks named are those stopped or gone,
 * if any.  When no rank is a cause itself (only ranks whose calls failed,
 * or a hang in communication with nobody stopped or gone), the failed
 * ranks' messages vote for the host whose ranks did not answer them, and
 * that host's rank named most is the culprit.  Process states are known
 * for ranks on this host only.
 *
 *     char *text = NULL;
 *     if (herd_trace_report("/tmp/herd-trace/JOB", HERD_TRACE_TEXT, &text) == HERD_OK)
 *         fputs(text, stdout);
 *     free(text);
 */
#ifndef HERD_TRACE_H
#define HERD_TRACE_H

#include <stddef.h>

#include "herd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum herd_trace_format {
	HERD_TRACE_TEXT = 0,        /* lines for people */
	HERD_TRACE_JSON = 1,        /* one JSON document (docs/reliability.md) */
} herd_trace_format;

/*
 * The wavefront of every communicator whose rings are in path (a .trace
 * file, or a directory of them), as text or JSON, into *out (malloc, the
 * caller frees).  HERD_ENOTFOUND when path holds no ring; HERD_EFORMAT
 * naming the file when one is not a ring of this format.
 */
HERD_EXTERN herd_status herd_trace_report(const char *path, herd_trace_format format,
					  char **out);

/*
 * The last ncalls calls (1 to 1048576) each rank of each communicator in
 * path recorded, newest first, as text or JSON, into *out (malloc, the
 * caller frees): each call's operation and number, datatype and count,
 * reduction, root or peer, the algorithm that ran it, and how it went
 * ("done in 1.5 ms, 3.1 s ago"; "done in under 4 ms" for a call shorter
 * than a tick of the coarse clock that ends an entry; "inside for 31.20
 * s"; "failed (HERD_ETIMEDOUT) after ...").  Errors as
 * herd_trace_report's.
 */
HERD_EXTERN herd_status herd_trace_calls(const char *path, int ncalls, herd_trace_format format,
					 char **out);

/*
 * The trace directory herd launch keeps for job job_id on this node, into
 * out (cap bytes): BASE/JOB_ID, where BASE is HERD_TRACE_DIR as this
 * process's environment gives it, else $XDG_RUNTIME_DIR/herd/trace, else
 * /tmp/herd-trace-UID.  While the job runs, it holds the rings of the
 * job's ranks on this node and the copies the launcher was sent of the
 * others' (at a failure, and every HERD_STRAGGLER_CHECK seconds, from the
 * nodes that do not share the directory); a job that failed keeps it.
 * HERD_EINVAL for a job id that is not one (empty, a path, starting
 * with '.', over 63 characters) or a directory name over cap.
 */
HERD_EXTERN herd_status herd_trace_job_dir(const char *job_id, char *out, size_t cap);
/* Who a job's rings blame. */
typedef struct herd_trace_culprit {
	int rank;                   /* the first culprit; -1 when none */
	int count;                  /* culprits in all */
	int size;                   /* the ranks of its communicator */
	long pid;                   /* its pid, 0 when not known */
	char host[256];
	char what[512];             /* "did not call allreduce #50: its last completed call
				     * was allreduce #49, 3.1 s before", ... */
} herd_trace_culprit;

/*
 * The culprit to name first of the communicators of dir (the first
 * communicator with one, the largest first) into *out: the rank named,
 * else the first that is a cause itself (not called, stuck, stopped,
 * gone, not read), else the first whose call failed.  HERD_ENOTFOUND when
 * dir holds no ring, or none names a culprit.
 */
HERD_EXTERN herd_status herd_trace_blame(const char *dir, herd_trace_culprit *out);

#ifdef __cplusplus
}
#endif

#endif /* HERD_TRACE_H */
