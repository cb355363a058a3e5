/*
 * sdk/comm/trace.h - the flight recorder of a communicator: a ring of its
 * last calls (collective and point-to-point), always on, kept where it
 * outlives the process.  Internal to libherd; the file format is
 * documented in docs/reliability.md ("The flight recorder") and read by
 * herd/trace.h.
 *
 * Where: with HERD_TRACE_DIR set (the launcher sets it for every job), a
 * file of its own in that directory, ID.RANK.trace (ID the communicator's
 * id in hex), mapped shared: what the rank wrote stays in the file when it
 * is stopped, killed or wedged, and a reader on its node sees it live.
 * Without the variable, or when the file cannot be made, the same ring in
 * anonymous memory, for this process only.
 *
 * The file: a header of one page (herd__trace_head), then cap entries
 * (herd__trace_entry).  Entry number k (from 0, in call order) sits in
 * slot k % cap; head.next counts the entries started.  The writer is the
 * one thread that runs the communicator's calls (core.h, rule 2): it sets
 * a slot's seq to 0, fills it, then stores seq with release; it ends an
 * entry by storing end_ns, status and then state with release.  A reader
 * copies a slot and keeps it only when seq reads the same before and
 * after (the slot was not being rewritten meanwhile).
 *
 * The cost of a call: a read of the coarse monotonic clock at its end,
 * some plain stores to one cache line and three release stores
 * (bench/trace_cost.sh; bench/RESULTS.md has the measurement).
 */
#ifndef HERD_COMM_TRACE_H
#define HERD_COMM_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "herd/common.h"

#define HERD__TRACE_MAGIC 0x31525448u /* "HTR1" */
#define HERD__TRACE_VERSION 2
#define HERD__TRACE_HEAD_SIZE 4096
/* The entries of a ring by default (HERD_TRACE_RING, herd_comm_opts' trace_ring). */
#define HERD__TRACE_DEFAULT_RING 1024
#define HERD__TRACE_MAX_RING (1 << 20)

/* An entry's state. */
enum { HERD__TRACE_ENTERED = 1, HERD__TRACE_DONE = 2, HERD__TRACE_FAILED = 3 };

/* The communicator's state, in the header. */
enum { HERD__TRACE_OPEN = 1, HERD__TRACE_CLOSED = 2, HERD__TRACE_BROKEN = 3 };

typedef struct herd__trace_entry {
	_Atomic uint64_t seq;       /* the call's number (from 1); 0: being written */
	uint64_t cseq;              /* its collective number (a p2p call: the last one's) */
	uint64_t count;             /* elements, as the caller gave them */
	uint64_t start_ns;          /* CLOCK_MONOTONIC of this host */
	uint64_t end_ns;            /* 0 while in the call; CLOCK_MONOTONIC_COARSE's,
				     * which may read a little before start_ns */
	int32_t peer;               /* the peer or root; -1: none */
	int32_t status;             /* herd_status it ended with */
	uint8_t kind;               /* herd__op_kind */
	uint8_t dtype;              /* herd_dtype */
	uint8_t redop;              /* of the reducing operations, a herd_redop; HERD_SUM is 0 */
	uint8_t device;             /* 1: device buffers (NCCL) */
	_Atomic uint8_t state;      /* HERD__TRACE_ENTERED, DONE, FAILED */
	uint8_t algo;               /* the algorithm's number (herd__tune_algo_name); 0: none */
	uint8_t pad[10];
} herd__trace_entry;

typedef struct herd__trace_head {
	uint32_t magic;             /* HERD__TRACE_MAGIC */
	uint32_t version;           /* HERD__TRACE_VERSION */
	uint32_t head_size;         /* HERD__TRACE_HEAD_SIZE */
	uint32_t entry_size;        /* sizeof(herd__trace_entry) */
	uint32_t cap;               /* entries in the ring */
	int32_t rank, size;
	int32_t pid;
	int64_t mono_to_real_ns;    /* CLOCK_REALTIME - CLOCK_MONOTONIC at open */
	char id[64];                /* the communicator's id, hex */
	char host[256];             /* this rank's host name, short */
	char job[64];               /* HERD_JOB_ID, "" when none */
	_Atomic uint64_t next;      /* entries started */
	_Atomic int32_t state;      /* HERD__TRACE_OPEN, CLOSED, BROKEN */
	int32_t fail_status;        /* BROKEN: the status it broke with */
	char fail_msg[1024];        /* BROKEN: its message */
	_Atomic int64_t late_ns;    /* written by herd launch while it names this rank a
				     * straggler: how much later than the others' median it
				     * arrives at the collectives; 0: not named */
	/* A copy (herd__trace_copies), carried to the launcher's node: when
	 * it was taken (CLOCK_REALTIME, ns) and the state of the rank's
	 * process that its node saw then ('R', 'S', 'T', 'D', ...; 'X'
	 * gone).  0 in the rank's own file. */
	int64_t copied_ns;
	char copied_proc;
	/* What the communicator is, when it was named (a grid's group:
	 * "tp group 1"), and this rank's rank in the communicator it was
	 * split from (-1: none).  "" and 0 in a ring written before the
	 * names were kept: a reader takes parent_rank only with a name. */
	char name[64];
	int32_t parent_rank;
} herd__trace_head;

_Static_assert(sizeof(herd__trace_entry) == 64, "a trace entry is one cache line");
_Static_assert(sizeof(herd__trace_head) <= HERD__TRACE_HEAD_SIZE, "the trace header fits a page");

typedef struct herd__trace {
	herd__trace_head *head;
	herd__trace_entry *ring;
	uint32_t cap;
	size_t map_len;
	char path[4096];            /* "" when anonymous */
} herd__trace;

/*
 * Opens the ring of a communicator, of cap entries (0: no recorder): in
 * HERD_TRACE_DIR when set, else in memory.  Never fails a communicator:
 * when nothing can be mapped, t->head stays NULL and nothing is recorded
 * (a file that cannot be made is said at warning level).
 */
void herd__trace_open(herd__trace *t, const char *id, int rank, int size, const char *host,
		      uint32_t cap);

/*
 * The rings of a directory as copies for another node (a node's `herd
 * exec` sends them to the launcher when the two do not share the
 * directory): each regular *.trace file of this user in dir, read as
 * herd_trace_report reads it, is made into one image, the header and its
 * newest entries (at most max_calls, and HERD__TRACE_COPY_MAX) in call
 * order, with
 * copied_ns and copied_proc set, and passed to emit.  *count: the images
 * emitted.  Files that are not rings are passed over; the first error of
 * emit is returned.
 */
#define HERD__TRACE_COPY_MAX 8192
herd_status herd__trace_copies(const char *dir, size_t max_calls,
			       herd_status (*emit)(void *arg, const void *image, size_t len),
			       void *arg, int *count);
/*
 * Keeps a copy another node sent in dir as ID.RANK.trace (replacing an
 * older copy of it, by rename; not synced: scratch for the next read):
 * HERD_EFORMAT when image is not a ring of this format or its id is not
 * hex, HERD_EIO when it cannot be written.
 */
herd_status herd__trace_keep_copy(const char *dir, const void *image, size_t len);
/*
 * The base of the jobs' trace directories, into out (cap bytes): given
 * (HERD_TRACE_DIR as a job's environment gives it) when set and not
 * empty, else $XDG_RUNTIME_DIR/herd/trace, else /tmp/herd-trace-UID.
 */
void herd__trace_base(const char *given, char *out, size_t cap);
/* Removes the rings in dir of the processes pids[0..n) (their header's
 * pid), then dir if nothing else is left in it: a node's own, in a
 * directory that may hold other nodes' rings too. */
void herd__trace_remove_of(const char *dir, const long *pids, size_t n);
/* Removes a job's trace directory, dir: its rings (*.trace*), its
 * "launcher" token (herd launch), then dir itself if nothing else is
 * left in it. */
void herd__trace_dir_remove(const char *dir);
/* Names the communicator in the header (herd__comm_set_name). */
void herd__trace_name(herd__trace *t, const char *name, int parent_rank);

/* Marks the ring CLOSED (the communicator was freed), unmaps it. */
void herd__trace_close(herd__trace *t);

/* The communicator broke with st and msg: said in the header. */
void herd__trace_broken(herd__trace *t, herd_status st, const char *msg);

/* A call starts: its entry, to pass to herd__trace_end; NULL when not recording. */
static inline herd__trace_entry *herd__trace_begin(herd__trace *t, uint64_t seq, uint64_t cseq,
						   uint8_t kind, uint8_t dtype, uint8_t redop,
						   int32_t peer, uint64_t count, int device,
						   uint8_t algo, uint64_t now_ns)
{
	uint64_t k;
	herd__trace_entry *e;

	if (t->head == NULL)
		return NULL;
	k = atomic_load_explicit(&t->head->next, memory_order_relaxed);
	e = &t->ring[k % t->cap];
	atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
	atomic_store_explicit(&e->state, HERD__TRACE_ENTERED, memory_order_relaxed);
	e->cseq = cseq;
	e->count = count;
	e->start_ns = now_ns;
	e->end_ns = 0;
	e->peer = peer;
	e->status = 0;
	e->kind = kind;
	e->dtype = dtype;
	e->redop = redop;
	e->device = device >= 0;
	e->algo = algo;
	atomic_store_explicit(&e->seq, seq, memory_order_release);
	atomic_store_explicit(&t->head->next, k + 1, memory_order_release);
	return e;
}

/* CLOCK_MONOTONIC_COARSE in ns: the last tick of CLOCK_MONOTONIC's (up
 * to a few ms behind it), for the end of an entry. */
static inline uint64_t herd__trace_now_coarse(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The call ended with st at now_ns. */
static inline void herd__trace_end(herd__trace_entry *e, herd_status st, uint64_t now_ns)
{
	if (e == NULL)
		return;
	e->end_ns = now_ns;
	e->status = (int32_t)st;
	atomic_store_explicit(&e->state, st == HERD_OK ? HERD__TRACE_DONE : HERD__TRACE_FAILED,
			      memory_order_release);
}

/*
 * Straggler detection over a job's rings (trace_read.c), one round at a
 * time: the collective calls every rank of the job's communicator
 * completed since the last round, and each rank's mean time inside them.
 * The rank that arrives last waits least: a rank whose mean is the
 * lowest, below the others' median by 2.5 ms and by a fifteenth of the
 * mean step (the time from one call to the next), is this round's late
 * rank.
 * (An entry's end comes from the coarse clock, up to a tick early: the
 * means are off by as much on every rank, so their differences hold.)
 * The same rank late in HERD__STRAGGLE_ROUNDS rounds in a row (a round of
 * fewer than 10 calls does not count either way) is a straggler, said
 * once until as many rounds in a row find nobody late.
 */
#define HERD__STRAGGLE_ROUNDS 5

typedef struct herd__straggle {
	uint64_t last_cseq;         /* the calls looked at so far */
	int rank;                   /* the late rank of the rounds in a row; -1 none */
	int streak;                 /* rounds in a row it was late */
	int warned;                 /* the straggler said; -1 none */
	int calm;                   /* since, rounds in a row that found nobody late */
	double late_ns;             /* how late warned arrived, the last round it was late */
} herd__straggle;

#define HERD__STRAGGLE_INIT { 0, -1, 0, -1, 0, 0 }

/*
 * One round over the rings of dir, for a job of nranks: true when it
 * makes a rank a straggler (*rank, host, and why: "it arrived last at the
 * collectives (allreduce last), 6.0 ms after the others' median, ...").
 * Raises nothing: a round that cannot read the rings does not count.
 */
bool herd__trace_straggle(const char *dir, int nranks, herd__straggle *s, int *rank,
			  char *host, size_t host_cap, char *why, size_t why_cap);

/*
 * The straggler mark: herd launch writes late_ns (0: no longer named) into
 * the header of every ring of rank in dir, where the node's readers find
 * it (herd exporter, the GPU processes of a telemetry sample).  Raises
 * nothing: a ring that cannot be written goes unmarked.
 */
void herd__trace_mark(const char *dir, int rank, int64_t late_ns);

/*
 * The mark of the rank whose process is pid, from the rings of dir (the
 * HERD_TRACE_DIR of its environment): the most late_ns of its open rings
 * (regular files its user owns, with its pid); 0 when none is marked, -1
 * when it has no ring there.  Raises nothing.
 */
int64_t herd__trace_marked(const char *dir, int rank, long pid);

#endif /* HERD_COMM_TRACE_H */
