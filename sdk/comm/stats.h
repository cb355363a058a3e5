/*
 * sdk/comm/stats.h - the collective counters of a process: how many calls
 * of each kind its communicators ran, the bytes they were given, the time
 * they took and the errors they ended with, in a small file of its own
 * that `herd exporter` (herd/metrics.h) reads.  Internal to libherd.
 *
 * Where: the stats directory (herd__stats_dir: HERD_STATS_DIR, else
 * /run/herd/stats, else $XDG_RUNTIME_DIR/herd/stats).  A communicator
 * never creates it: counting is on only where the directory exists, which
 * `herd exporter` makes when it starts (or an administrator, mode 1777),
 * so that a node with no exporter collects no files.
 *
 * The file: one per communicator, PID-RANDOM.stats (RANDOM mkstemp's six
 * characters; mode 0644), one herd__stats_file, mapped shared; made at
 * the end of a successful init under a temporary name, locked with flock(LOCK_SH) on a close-on-exec
 * descriptor the communicator keeps, then renamed into place, so that a
 * reader never sees it unlocked while its communicator lives.  Freeing
 * the communicator, or the death of its process, drops the lock: a reader
 * that gets LOCK_EX knows the counts are final.
 *
 * The hot path: one thread at a time runs a communicator's calls
 * (core.h, rule 2), so the file has one writer, which adds to four
 * counters of the call's kind (and one of its error's on failure) with
 * relaxed loads and stores, plain moves, and reads the monotonic clock
 * once more than a call does anyway; nothing when counting is off.
 */
#ifndef HERD_COMM_STATS_H
#define HERD_COMM_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "herd/common.h"

#define HERD__STATS_MAGIC 0x31534448u /* "HDS1" */
#define HERD__STATS_VERSION 1
/* Indexed by herd__op_kind (1 .. 16 today); room for more. */
#define HERD__STATS_KINDS 32
/* Indexed by -herd_status (1 .. 20 today). */
#define HERD__STATS_ERRORS 32
#define HERD__STATS_JOB_LEN 64

typedef struct herd__stats_op {
	_Atomic uint64_t calls;     /* calls that ran, successful or not */
	_Atomic uint64_t bytes;     /* count x element size, as the caller gave them */
	_Atomic uint64_t ns;        /* time inside the calls (device calls queued on
				     * a stream: until queued) */
	_Atomic uint64_t errors;    /* calls that failed */
} herd__stats_op;

typedef struct herd__stats_file {
	uint32_t magic;             /* HERD__STATS_MAGIC */
	uint32_t version;           /* HERD__STATS_VERSION */
	uint32_t size;              /* sizeof(herd__stats_file) */
	int32_t rank;               /* HERD_RANK (else RANK, SLURM_PROCID); -1: none */
	int64_t pid;
	char job[HERD__STATS_JOB_LEN]; /* HERD_JOB_ID (else SLURM_JOB_ID); "": none */
	herd__stats_op ops[HERD__STATS_KINDS];
	_Atomic uint64_t errors[HERD__STATS_ERRORS]; /* failed calls by status */
} herd__stats_file;

/*
 * The stats directory into buf[cap]: HERD_STATS_DIR, else /run/herd/stats,
 * else $XDG_RUNTIME_DIR/herd/stats.  for_exporter: the first default that
 * exists or whose parent exists or may be made (the exporter makes it);
 * else the first that exists.  HERD_EUNAVAIL when none fits.
 */
herd_status herd__stats_dir(char *buf, size_t cap, int for_exporter);

/*
 * A new file for a communicator of this process, mapped, with its locked
 * descriptor in *fd; NULL (and *fd -1) when counting is off (no stats
 * directory) or the file cannot be made: counting is not worth failing a
 * communicator for.
 */
herd__stats_file *herd__stats_open(int *fd);

/* Unmaps and closes (the lock goes with the descriptor).  Accepts NULL. */
void herd__stats_close(herd__stats_file *f, int fd);

/* Monotonic nanoseconds, for the time of a call. */
uint64_t herd__stats_now_ns(void);

/* x += v by the one writer of x. */
static inline void herd__stats_bump(_Atomic uint64_t *x, uint64_t v)
{
	atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* Counts one call of kind that ran for ns and ended with st. */
static inline void herd__stats_add(herd__stats_file *f, int kind, uint64_t bytes, uint64_t ns,
				   herd_status st)
{
	herd__stats_op *o;

	if (kind <= 0 || kind >= HERD__STATS_KINDS)
		return;
	o = &f->ops[kind];
	herd__stats_bump(&o->calls, 1);
	herd__stats_bump(&o->bytes, bytes);
	herd__stats_bump(&o->ns, ns);
	if (st != HERD_OK) {
		herd__stats_bump(&o->errors, 1);
		if (-(int)st > 0 && -(int)st < HERD__STATS_ERRORS)
			herd__stats_bump(&f->errors[-(int)st], 1);
	}
}

#endif /* HERD_COMM_STATS_H */
