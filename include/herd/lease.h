/*
 * herd/lease.h - GPU leases: one lock file per GPU UUID in a per-node
 * lease directory, held with flock(2) by the process that owns the
 * allocation, so that two jobs never share a GPU by accident.  herd_alloc
 * (herd/alloc.h) takes them for the GPUs of its plan.
 *
 * The lease directory is herd_lease_opts' dir (herd_alloc_opts'
 * lease_dir), else $HERD_LEASE_DIR, else /run/herd when it exists or this
 * process may create it (mode 1777, shared by every user of the node),
 * else $XDG_RUNTIME_DIR/herd (mode 0700: it protects one user's jobs from
 * each other only).  An administrator
 * makes the node-wide one with `install -d -m 1777 /run/herd` or a
 * tmpfiles.d line.  The directory must be local to the node (tmpfs) or on
 * a file system whose flock is coherent; UUIDs are unique, so one
 * directory serves any number of nodes.
 *
 * In it, <uuid>.lock ("GPU-8f2c....lock") is the lease of that GPU.  A
 * holder keeps the file open with flock(LOCK_EX) (LOCK_SH for a shared
 * lease) for as long as it owns the GPU; the kernel drops the lock when
 * the last descriptor closes, so a holder killed by any signal frees its
 * GPUs at once, with no daemon and nothing to clean up.  Descriptors are
 * close-on-exec: a program the holder execs does not hold the lease, a
 * child it only forks does until it closes or execs.  flock, not fcntl
 * locks: a process that opens and closes the file again (to read a
 * record) keeps its flock, where closing any descriptor drops all its
 * fcntl locks on the file.  Lock files are created on first use (mode
 * 0644: every user can open them to lock them, only their creator can
 * write them) and never deleted: deleting a
 * file that someone may hold or be about to lock would let a second
 * process lock a new file of the same name while the first still holds
 * the old one.  Releasing a lease empties the file and closes it.  After
 * taking a lock the holder checks that the name still leads to the file it
 * locked, and starts again if someone replaced it.
 *
 * Leases of one request are taken in ascending UUID order, each with a
 * non-blocking lock; when one is busy, those already taken are released.
 * Nobody ever waits while holding a lease, so two jobs racing for
 * overlapping GPUs cannot deadlock, and a request never holds part of its
 * GPUs.
 *
 * The record.  After locking, an exclusive holder that may write the file
 * writes into it, as text, "herd-lease v=1" on the first line and then
 * key=value lines: uuid, job, pid, user, uid, host, since (Unix seconds),
 * mode.  The record only says who holds the lease; the lock says whether
 * anyone does.  A reader treats a file whose lock nobody holds as free
 * whatever it contains (a killed holder leaves its record behind), believes
 * a record only when its pid is the one /proc/locks shows holding the lock
 * (else it names that pid, with a note that the record is not the
 * holder's), and treats a locked file without a readable record as held by
 * someone unknown.
 *
 * What a lease protects against: two herd jobs (or any programs that take
 * the lease) ever using one GPU at once, and a GPU staying taken after its
 * holder died.  What it does not: a program that uses a GPU without taking
 * its lease (the lock is advisory; CUDA knows nothing of it); a user who
 * holds a lease on purpose and never lets go (whoever may open the file
 * may lock it); and the text of a record, which the file's owner may write
 * as they like (only the pid is checked against the kernel).  Shared holders write no
 * record (there may be several at once).  Readers test the lock with
 * non-blocking locks of their own that last microseconds, so they can make
 * a concurrent lease attempt fail for a moment; herd_alloc retries those
 * (re-planning each time), a bounded number of times.
 */
#ifndef HERD_LEASE_H
#define HERD_LEASE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Who holds a GPU's lease. */
typedef enum herd_lease_state {
	HERD_LEASE_FREE = 0,
	HERD_LEASE_SHARED = 1,     /* by one or more shared holders */
	HERD_LEASE_EXCLUSIVE = 2,
	HERD_LEASE_UNKNOWN = 3     /* the lease file is unusable: see note */
} herd_lease_state;

/* "free", "shared", "exclusive", "unknown". */
HERD_EXTERN const char *herd_lease_state_name(herd_lease_state state);

#define HERD_LEASE_OPTS_VERSION 1

/* Options of the lease functions.  A zeroed field means its default. */
typedef struct herd_lease_opts {
	unsigned int version;       /* HERD_LEASE_OPTS_VERSION */
	/* The lease directory; NULL for the default (top of the file). */
	const char *dir;
	/* The job written in records; NULL means $HERD_JOB_ID, else
	 * $SLURM_JOB_ID, else "-". */
	const char *job_id;
} herd_lease_opts;

#define HERD_LEASE_OPTS_INIT { HERD_LEASE_OPTS_VERSION, NULL, NULL }

/*
 * Writes the lease directory that opts (NULL for defaults) resolves to
 * into buf[cap].  Creates nothing.  HERD_EUNAVAIL when there is none
 * (no /run/herd, no right to create it, no $XDG_RUNTIME_DIR).
 */
HERD_EXTERN herd_status herd_lease_dir(const herd_lease_opts *opts, char *buf, size_t cap);

/* Leases held by this process.  Opaque. */
typedef struct herd_lease herd_lease;

/*
 * Takes the leases of the n GPUs named by uuids, exclusive or shared, all
 * or none: in ascending UUID order, each lock non-blocking (retried for a
 * few milliseconds, which a reader's probe never outlasts); when one is
 * held, the ones taken are released and HERD_EBUSY names the GPU and its
 * holder.  Creates the directory (not its parents) when missing, mode 1777
 * for /run/herd and 0700 for any other.  A lease file that is not a
 * regular file or is a symbolic link, or a UUID that cannot name a file,
 * gives HERD_EINVAL naming it; an unusable directory gives HERD_ESYS.
 * Never blocks for long; thread-safe.  *out is released with
 * herd_lease_free, or by the process's death.
 */
HERD_EXTERN herd_status herd_lease_acquire(herd_lease **out, const char *const *uuids,
					   size_t n, bool shared,
					   const herd_lease_opts *opts);

/* Number of GPUs a lease holds. */
HERD_EXTERN size_t herd_lease_gpu_count(const herd_lease *lease);

/* Releases the leases (empties the records, unlocks).  Accepts NULL. */
HERD_EXTERN void herd_lease_free(herd_lease *lease);

#ifdef __cplusplus
}
#endif

#endif /* HERD_LEASE_H */
