/*
 * herd/ckpt.h - save and restore the sharded state of a distributed
 * program, atomically across all ranks, verified on load, and resharded
 * when the job resumes on a different number of ranks.
 *
 * A checkpoint handle (herd_ckpt) joins a checkpoint directory and a
 * communicator.  Each rank registers the state it holds:
 *
 *   - named tensors: a pointer to this rank's shard in host memory, the
 *     element type, the shape of the whole (global) tensor, and where the
 *     shard sits in it (an offset and a shape, an N-d box).  A tensor that
 *     every rank holds whole is registered with no offset and shape;
 *   - named blobs: a few bytes per rank (RNG state, a data loader's
 *     position), with a rule for restoring them onto a different number of
 *     ranks.
 *
 * herd_ckpt_save(step) writes all of it as the step's directory; once it
 * returns HERD_OK the step is committed on every rank, durably.  A crash at
 * any instant (of any rank, of the machine) leaves the committed steps
 * intact; a step whose save did not complete is never chosen by a restore.
 * herd_ckpt_restore fills the registered tensors and blobs from the newest
 * step that is complete and verifies (or from a given step), reading only
 * the parts of the saved shards that overlap this rank's shards: a
 * checkpoint saved by 4 ranks restores onto 2, 3 or 8 ranks that shard the
 * same global tensors differently.
 *
 * On disk (docs/checkpoint.md has the whole format):
 *
 *   DIR/step-000000000100/rank-00000.data  each rank's shards and blobs
 *   DIR/step-000000000100/manifest.msgpack every tensor's type, shape,
 *                                          shards, file, offset, length
 *                                          and a checksum per chunk; the
 *                                          manifest checksums itself
 *   DIR/latest                             "step-000000000100\n"
 *   DIR/step-000000000200.damaged-20250102T030405Z
 *                                          a step that did not verify,
 *                                          moved aside (never read, never
 *                                          removed by herd)
 *
 * Commit protocol: every rank writes into a temporary step directory and
 * fsyncs its data file; the ranks report to rank 0 through the
 * communicator; rank 0 writes the manifest (temporary file, fsync, rename),
 * fsyncs the step directory, renames it into place, fsyncs DIR, and
 * replaces `latest` atomically.  The rename of the step directory is the
 * commit point; `latest` may lag it by one step after a crash, so readers
 * take the newest committed step directory, and `latest` is a hint for
 * people and other tools.  Any write or fsync error fails the save on
 * every rank and leaves no step behind.
 *
 * Collective calls: herd_ckpt_open, herd_ckpt_save, herd_ckpt_save_async,
 * herd_ckpt_wait, herd_ckpt_restore and herd_ckpt_free (with a save in
 * flight) are collective over the handle's communicator: every rank makes
 * them in the same order
 * with the same step.  They return the same status on every rank (a
 * failure on one rank fails the call everywhere, with a message naming
 * that rank).  They inherit the communicator's deadline and its failure
 * reporting (a dead peer gives HERD_EPEER), so nothing hangs.
 *
 * Threads: one handle is used by one thread at a time.  While an
 * asynchronous save is in flight, a background writer thread drives the
 * handle's communicator: that communicator must be one of its own (from
 * herd_comm_split, or a herd_comm_init of its own), never one the program
 * uses for its own collectives.  The read-only functions at the end
 * (list, latest, verify, the reader) need no communicator and may run in
 * any process, including while a job writes the directory.
 *
 * Memory: registered pointers are borrowed; they must stay valid, and the
 * tensors' bytes unchanged during herd_ckpt_save and until
 * herd_ckpt_save_async returns (after that the program may modify them:
 * the data is in staging memory).  Tensors may be host or GPU memory
 * (herd_ckpt_add_tensor).
 */
#ifndef HERD_CKPT_H
#define HERD_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"
#include "common.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A checkpoint directory joined by the ranks of a communicator.  Opaque. */
typedef struct herd_ckpt herd_ckpt;

/* For herd_ckpt_restore, herd_ckpt_verify and herd_ckpt_reader_open: the
 * newest committed step (that verifies, for restore). */
#define HERD_CKPT_LATEST (-1)

/* Most dimensions of a tensor. */
#define HERD_CKPT_MAX_DIMS 8

/* Longest tensor or blob name, in bytes.  Names are 1..HERD_CKPT_NAME_MAX
 * bytes of printable ASCII (no control characters). */
#define HERD_CKPT_NAME_MAX 255

/* Largest blob, in bytes. */
#define HERD_CKPT_BLOB_MAX (16u * 1024u * 1024u)

/* Largest step number; steps are 0..HERD_CKPT_STEP_MAX. */
#define HERD_CKPT_STEP_MAX INT64_C(999999999999)

/* Chunk checksums.  DEFAULT is XXH3 (64-bit xxHash3 of every chunk). */
typedef enum herd_ckpt_checksum {
	HERD_CKPT_CHECKSUM_DEFAULT = 0,
	HERD_CKPT_CHECKSUM_XXH3 = 1,
	HERD_CKPT_CHECKSUM_NONE = 2
} herd_ckpt_checksum;

/*
 * What a blob restores from when the checkpoint was saved by a different
 * number of ranks.  With the same number, rank r always gets the blob that
 * rank r saved.
 */
typedef enum herd_ckpt_blob_rule {
	/* Rank r gets the blob of saved rank r mod (saved ranks). */
	HERD_CKPT_BLOB_SAME_RANK = 0,
	/* Every rank gets the blob of saved rank 0. */
	HERD_CKPT_BLOB_RANK0 = 1,
	/* Restoring onto a different number of ranks is an error
	 * (HERD_EMISMATCH). */
	HERD_CKPT_BLOB_STRICT = 2
} herd_ckpt_blob_rule;

#define HERD_CKPT_OPTS_VERSION 2

/* Options of herd_ckpt_open.  A zero field means its documented default. */
typedef struct herd_ckpt_opts {
	unsigned int version;       /* HERD_CKPT_OPTS_VERSION */
	/* Retention: after a save commits, keep the newest keep_last
	 * committed steps (0: keep every step). */
	int keep_last;
	/* Retention: also keep every step that is a multiple of keep_every
	 * (0: none).  Retention deletes only after the newer step is durable. */
	int keep_every;
	/* Most bytes of staging memory an asynchronous save holds (default
	 * HERD_CKPT_STAGING_BYTES, else 256 MiB).  When the state is larger,
	 * herd_ckpt_save_async stages it in pieces as the writer drains them. */
	size_t staging_bytes;
	/* Checksums of the data (default XXH3). */
	herd_ckpt_checksum checksum;
	/* Bytes covered by one checksum (default 4 MiB; at least 4 KiB).  A
	 * restore reads and verifies whole chunks. */
	size_t chunk_bytes;
	/* Version 2.  The tier in peers' memory: copies of each rank's data
	 * of a step kept in the host memory of its own node and of this many
	 * other nodes, by the holders that `herd launch --ckpt-peers K`
	 * starts on the job's nodes (HERD_CKPT_HOLDERS).  0: HERD_CKPT_PEERS (which that option sets;
	 * default 0); -1: none.  More than the job's other nodes: one copy on
	 * each of them.  Without holders (a job of one node, a launcher that
	 * started none) saves go to storage alone. */
	int peer_copies;
	/* Version 2.  With peer copies: a save goes to storage too only when
	 * its step is a multiple of storage_every (0: HERD_CKPT_STORAGE_EVERY,
	 * default 1: every save).  The other saves are in peers' memory only. */
	int storage_every;
} herd_ckpt_opts;

#define HERD_CKPT_OPTS_INIT { HERD_CKPT_OPTS_VERSION, 0, 0, 0, HERD_CKPT_CHECKSUM_DEFAULT, 0, 0, 0 }

/*
 * Opens the checkpoint directory dir (created, with its parents, when
 * missing) for the ranks of comm.  comm is borrowed and must outlive the
 * handle; NULL means a world of one rank (a single process, no
 * communicator).  One job writes a directory at a time: rank 0 holds an
 * flock(2) on dir/.lock (with a line naming its pid, host and HERD_JOB_ID)
 * from open to close, and an open while another process holds it fails on
 * every rank with HERD_EBUSY naming the holder.  Rank 0 then removes what
 * interrupted saves and deletions left behind (temporary step
 * directories; steps moved aside stay).  opts may be NULL.  Collective.
 */
HERD_EXTERN herd_status herd_ckpt_open(herd_ckpt **out, const char *dir, herd_comm *comm,
				       const herd_ckpt_opts *opts);

/*
 * Frees the handle.  An asynchronous save in flight is waited for first
 * (collective then) and its outcome dropped: call herd_ckpt_wait before to
 * learn it.  Accepts NULL.
 */
HERD_EXTERN void herd_ckpt_free(herd_ckpt *ck);

/*
 * Registers a tensor.  data is this rank's shard, dense and row-major,
 * prod(shape) elements of dtype.  global_shape has ndim (1..
 * HERD_CKPT_MAX_DIMS) dimensions; the shard is the box of the given shape
 * at offset in the global tensor.  offset and shape both NULL: the shard
 * is the whole tensor (replicated on every rank that registers it so).
 * Local (not collective), but at save time every rank must have
 * registered the same tensors, in the same order, with the same dtype and
 * global shape, and the distinct shards must tile each global tensor
 * exactly (identical shards on several ranks are written once).  A name
 * registered twice gives HERD_EEXIST.  data is borrowed.
 *
 * data may be a GPU's memory (the NVIDIA driver says where it is, as for
 * collectives).  A save copies a device tensor into the staging memory
 * (opts.staging_bytes, page-locked for the driver's copies once a device
 * tensor is registered) while the writer writes what is staged, so
 * herd_ckpt_save of a state with device tensors runs as
 * herd_ckpt_save_async followed by herd_ckpt_wait, and an asynchronous
 * save returns once the device bytes are staged; checksums are of the
 * host bytes.  A failed device copy fails the save on every rank with the
 * driver's words.  A restore reads and verifies the shard on the host, in
 * slabs of whole rows of at most half the staging size, and copies each to
 * the device while the next is read; a failed copy fails the restore with
 * HERD_ENODEV and the driver's words (older steps are not tried).
 */
HERD_EXTERN herd_status herd_ckpt_add_tensor(herd_ckpt *ck, const char *name, void *data,
					     herd_dtype dtype, int ndim,
					     const uint64_t *global_shape,
					     const uint64_t *offset, const uint64_t *shape);

/*
 * Registers a blob: size bytes at data (1..HERD_CKPT_BLOB_MAX), saved per
 * rank and restored by rule.  A restore requires the saved blob to have
 * the same size (HERD_EMISMATCH otherwise).  Local; every rank registers
 * the same blob names in the same order.  data is borrowed.
 */
HERD_EXTERN herd_status herd_ckpt_add_blob(herd_ckpt *ck, const char *name, void *data,
					   size_t size, herd_ckpt_blob_rule rule);

/*
 * Saves the registered state as step (0..HERD_CKPT_STEP_MAX) and commits
 * it; returns once the step is durable on disk, or failed and left
 * nothing behind.  An asynchronous save in flight is waited for first.
 * Then applies retention.
 *
 * A step of that number already committed is verified first, every rank
 * reading its share of it (the data files of saved ranks r, r + size,
 * ...): when it verifies, it is kept and the save fails with HERD_EEXIST
 * ("already committed ..., and it verifies"); when it does not
 * (HERD_EFORMAT: damaged), rank 0 moves it aside, as herd_ckpt_restore
 * does, with a warning naming where, and the save goes on; when it cannot
 * be verified for another reason (a newer format, a read error), it is
 * kept and the save fails with HERD_EEXIST saying why.  Collective.
 */
HERD_EXTERN herd_status herd_ckpt_save(herd_ckpt *ck, int64_t step);

/*
 * Starts saving step in the background.  Returns once every registered
 * byte is copied into staging memory (in pieces when opts.staging_bytes
 * is smaller than the state: then it returns when the last piece is
 * staged); a writer thread writes, fsyncs and commits.  A save in flight
 * is waited for first.  Collective.  The outcome comes from herd_ckpt_wait
 * (or the next collective call on the handle, when an earlier background
 * save failed and no wait collected it: that call then returns the
 * failure and does nothing else).
 */
HERD_EXTERN herd_status herd_ckpt_save_async(herd_ckpt *ck, int64_t step);

/*
 * Aborts the save in flight on this rank (from any thread; not
 * collective): its writer stops writing at its next piece, the step is
 * not committed and its files are removed, and herd_ckpt_wait (or the
 * synchronous save) returns HERD_EABORTED here and the failure, naming this
 * rank, on the others.  Committed steps are left alone.  Does nothing when
 * no save is in flight or it has already written everything; the next save
 * starts afresh.  HERD_EINVAL when ck is NULL.
 */
HERD_EXTERN herd_status herd_ckpt_abort(herd_ckpt *ck);

/*
 * Waits for the asynchronous save in flight and returns its status
 * (HERD_OK when none).  Collective.
 */
HERD_EXTERN herd_status herd_ckpt_wait(herd_ckpt *ck);

/*
 * Fills the registered tensors and blobs from step, or with
 * HERD_CKPT_LATEST from the newest committed step that verifies on every
 * rank: each rank verifies the checksum of every chunk it reads (and the
 * manifest's), the ranks agree on the outcome, and a step that fails is
 * reported as a warning (log level warn) and skipped for the one before.
 * The ranks together read every chunk of the state they restore, so every
 * restored byte was verified.  *restored (may be NULL) gets the step.
 * HERD_ENOTFOUND when there is no committed step (a fresh start);
 * HERD_ECORRUPT when steps exist and none verifies (the message names
 * them and the newest one's fault): not a fresh start, and starting over
 * would write over them.
 *
 * Once a step older than the newest restores, rank 0 moves each newer
 * step that it passed over as damaged (HERD_EFORMAT: a checksum mismatch,
 * a missing or short file, a bad manifest) aside: renamed to
 * step-N.damaged-TIME (UTC, "-2", "-3", ... after it when that name is
 * taken; a rename never replaces anything), with damaged.txt inside saying
 * why, and `latest` made to name the newest step left; a warning names
 * the new path.  So the program's next save of that number succeeds, and
 * the damaged bytes stay for inspection (herd_ckpt_list lists them);
 * herd never removes them.  A step passed over for another reason
 * (HERD_EIO, HERD_EVERSION) stays, and so do all steps when none verifies.
 * A failure to move one is a warning.  HERD_EMISMATCH when a
 * registered tensor or blob is missing from the step or differs in type or
 * shape (no fallback then).  On failure the registered memory may have
 * been partly overwritten.  Collective.
 */
HERD_EXTERN herd_status herd_ckpt_restore(herd_ckpt *ck, int64_t step, int64_t *restored);

/* The handle's directory; borrowed from the handle. */
HERD_EXTERN const char *herd_ckpt_dir(const herd_ckpt *ck);

/* ---- the tier in peers' memory ----------------------------------------- */

/*
 * With peer copies (opts.peer_copies and the job's holders), a save sends
 * this rank's data of the step, the bytes of its data file, to the holder
 * of its own node and to those of the next peer_copies nodes in node
 * order, after the staging copy of an asynchronous save, from the writer
 * thread; rank 0 then sends the step's manifest to every holder, and the
 * step is committed in memory.  Any peer_copies nodes may be lost at once
 * and every rank's data is still held: by its own node's holder, or by
 * one of the others' (a node without a holder sends one copy more
 * elsewhere).  A holder keeps the newest committed step, or two
 * (HERD_CKPT_PEER_STEPS), and the steps arriving, within its budget
 * (HERD_CKPT_PEER_BYTES).  A holder that refuses or cannot be reached
 * fails a save that goes to peers' memory only, as a write error would;
 * a save that also goes to storage goes there alone, with a warning.  Only steps that are multiples of opts.storage_every also
 * go to storage.
 *
 * herd_ckpt_restore of HERD_CKPT_LATEST asks the holders of the job's
 * nodes which steps they hold.  When a step's manifest and every saved
 * rank's data are held somewhere, and that step is at least as new as the
 * newest committed step in storage, the ranks restore from memory: each
 * fetches the chunks it needs, verifies their checksums as it would read
 * them from storage, and reshards as from storage.  Otherwise, or when the
 * restore from memory fails (a holder lost meanwhile, a checksum that
 * does not match: a warning says so), they restore from storage.
 */

/* Where a restore read its step from. */
typedef enum herd_ckpt_tier {
	HERD_CKPT_TIER_NONE = 0,      /* no restore yet, or none succeeded */
	HERD_CKPT_TIER_STORAGE = 1,   /* the checkpoint directory */
	HERD_CKPT_TIER_PEERS = 2      /* other nodes' memory */
} herd_ckpt_tier;

/* What the last herd_ckpt_restore on this rank did. */
typedef struct herd_ckpt_restore_info {
	herd_ckpt_tier tier;
	int64_t step;            /* the step restored; -1 when none */
	double seconds;          /* the restore's wall time on this rank */
	uint64_t bytes;          /* bytes this rank fetched from peers' memory */
	int64_t storage_step;    /* the newest committed step in storage; -1: none */
	int64_t peers_step;      /* the newest complete step in peers' memory; -1: none */
	char why[384];           /* why that tier, in words */
	char from[256];          /* peers: the hosts whose holders sent data */
} herd_ckpt_restore_info;

/* ---- what saves cost, and the interval ---------------------------------- */

/* The saves of one tier, as this rank's training loop saw them. */
typedef struct herd_ckpt_tier_stats {
	uint64_t saves;            /* saves that ended (a save in flight: once it has) */
	/* Seconds the caller spent in herd_ckpt_save, herd_ckpt_save_async
	 * (the staging copy) and in waiting for these saves to end (the wait
	 * at the next save, or in herd_ckpt_wait): the stall of training. */
	double stall_s;
	double stall_max_s;        /* the longest one save's */
	/* Seconds from each save's start to its commit, background included:
	 * a save must end before the next begins. */
	double busy_s;
} herd_ckpt_tier_stats;

typedef struct herd_ckpt_stats {
	herd_ckpt_tier_stats peers;     /* saves to peers' memory only */
	herd_ckpt_tier_stats storage;   /* saves that went to storage (with or
					 * without copies in memory) */
} herd_ckpt_stats;

/* What this rank's saves cost so far, per tier.  Local. */
HERD_EXTERN herd_status herd_ckpt_get_stats(const herd_ckpt *ck, herd_ckpt_stats *out);

/*
 * A model of checkpointed training under failures (Young 1974, Daly
 * 2006): saves that stall training save_s seconds each, every interval
 * seconds of training; failures at random, mttf_s apart on average; each
 * costs lost_s (finding it, restarting, restoring) plus the training done
 * since the last save.
 */
typedef struct herd_ckpt_interval_model {
	double save_s;             /* C: the stall of one save, > 0 */
	double lost_s;             /* R: a failure's cost besides lost work, >= 0 */
	double mttf_s;             /* M: the mean time to failure, > 0 */
	/* The most of the training time that saves may stall (CheckFreq's
	 * bound on its overhead); 0: 0.035. */
	double max_overhead;
	/* The shortest interval: a save's time in the background (busy_s per
	 * save), since a save waits for the one before; 0: none. */
	double min_interval_s;
} herd_ckpt_interval_model;

typedef struct herd_ckpt_interval_choice {
	double interval_s;         /* seconds of training between saves */
	double young_s;            /* Young's sqrt(2 C M), for reference */
	double optimum_s;          /* the interval that minimises Daly's expected time */
	double overhead;           /* save_s / interval_s */
	/* The expected effective training time ratio at interval_s: the
	 * fraction of wall time spent on steps that are kept, Daly's
	 * interval / (M e^(R/M) (e^((interval + C)/M) - 1)). */
	double ettr;
	/* What set the interval when not the optimum: "the overhead bound"
	 * or "the save's own time"; "" when the optimum did. */
	char bound[32];
} herd_ckpt_interval_choice;

/*
 * The interval that minimises the expected wall time of the model (the
 * exact optimum of Daly's first-order model, found numerically), raised
 * to save_s / max_overhead and to min_interval_s when shorter, and its
 * expected effective training time ratio.  HERD_EINVAL naming a field out
 * of range.
 */
HERD_EXTERN herd_status herd_ckpt_interval(const herd_ckpt_interval_model *m,
					   herd_ckpt_interval_choice *out);

/* The expected effective training time ratio of the model at any interval
 * (0 for an interval or model out of range). */
HERD_EXTERN double herd_ckpt_ettr(const herd_ckpt_interval_model *m, double interval_s);

/*
 * This job's model for a tier, from what this rank measured: save_s the
 * mean stall of its saves to the tier, min_interval_s their mean busy
 * time, lost_s HERD_CKPT_RESTART_COST (default 30 s: finding the failure
 * and restarting) plus the last restore's time when it was from this
 * tier; mttf_s from HERD_CKPT_MTTF (a rate the user gives: seconds, or
 * with m, h, d), else from this job's failures so far (HERD_JOB_START,
 * which herd launch sets, to now, over HERD_RESTART_COUNT).  source[cap]
 * says where mttf_s came from.  HERD_ENOTFOUND when there is no save of
 * the tier yet, or neither a rate nor a failure to measure one from.
 * Local.
 */
HERD_EXTERN herd_status herd_ckpt_model(const herd_ckpt *ck, herd_ckpt_tier tier,
					herd_ckpt_interval_model *out, char *source, size_t cap);

/* The tier name: "storage", "peers' memory", "none". */
HERD_EXTERN const char *herd_ckpt_tier_name(herd_ckpt_tier tier);

/* What the last herd_ckpt_restore on this rank did (tier NONE before any).
 * Local. */
HERD_EXTERN herd_status herd_ckpt_last_restore(const herd_ckpt *ck,
					       herd_ckpt_restore_info *out);

/* ---- reading a checkpoint directory without a communicator ------------ */

/* One step directory, as herd_ckpt_list finds it. */
typedef struct herd_ckpt_step_info {
	int64_t step;
	/* Whether the step is committed (renamed into place with its
	 * manifest); false for what an interrupted save left behind, and for
	 * a step moved aside. */
	bool committed;
	/* Whether this is a committed step that did not verify and was moved
	 * aside by a restore or a save (named step-N.damaged-TIME, see
	 * herd_ckpt_restore): kept for inspection, never restored, never
	 * removed by herd; problem says why it was moved. */
	bool moved_aside;
	/* The directory's name inside DIR. */
	char name[64];
	/* Bytes of its files. */
	uint64_t bytes;
	/* Ranks that saved it, tensors and blobs in it (from the manifest;
	 * 0 when it cannot be read, as for an uncommitted step). */
	int ranks;
	int tensors;
	int blobs;
	/* Seconds since the epoch when it was saved (0 when unknown). */
	int64_t time;
	/* Whether the manifest decoded and its checksum matched (the data is
	 * not read: herd_ckpt_verify does that). */
	bool manifest_ok;
	/* Whether every file the manifest lists is there, a regular file of
	 * the size it gives (false when the manifest cannot be read); what is
	 * wrong, when not, in problem ("rank-00001.data is missing"). */
	bool files_ok;
	char problem[512];
} herd_ckpt_step_info;

/*
 * Lists the step directories of dir, committed and not, and the steps
 * moved aside (moved_aside; after the step of their number), oldest first.
 * *out is an array of *count entries freed with herd_free (NULL when
 * empty).  Reads only manifests, and checks what is cheap: every file
 * present with the size the manifest says; checksums are not read
 * (herd_ckpt_verify).  Local, thread-safe.
 */
HERD_EXTERN herd_status herd_ckpt_list(const char *dir, herd_ckpt_step_info **out,
				       size_t *count);

/*
 * The newest committed step of dir (without verifying its data): a step
 * directory with a manifest, which need not be readable (a FIFO in its
 * place makes a damaged step, that reading it reports, not one to skip).
 * HERD_ENOTFOUND when there is none.  Local.
 */
HERD_EXTERN herd_status herd_ckpt_latest(const char *dir, int64_t *step);

/* One problem found by herd_ckpt_verify. */
typedef struct herd_ckpt_problem {
	/* The file inside the step directory ("rank-00002.data",
	 * "manifest.msgpack"). */
	const char *file;
	/* The tensor or blob whose bytes are wrong; NULL for the manifest or
	 * a whole file (missing, wrong size). */
	const char *tensor;
	/* Index of the shard in the tensor (of the rank's part of a blob),
	 * and of the chunk in the shard; -1 when not applicable. */
	int64_t shard;
	int64_t chunk;
	/* Byte offset of the chunk in the file; -1 when not applicable. */
	int64_t offset;
	/* What is wrong, in words. */
	const char *message;
} herd_ckpt_problem;

/* Called once per problem with the caller's userdata; the strings live
 * until it returns. */
typedef void (*herd_ckpt_problem_fn)(void *userdata, const herd_ckpt_problem *problem);

/*
 * Verifies a step of dir (or HERD_CKPT_LATEST: the newest committed one):
 * the manifest's checksum and structure (a manifest that is not a regular
 * file is a problem of the step, "it is a FIFO, not a regular file", as a
 * data file's would be), every data file's size, and the checksum of every
 * chunk of every tensor and blob.  Calls fn (may be
 * NULL) for each problem; *problems (may be NULL) gets their count.
 * Returns HERD_OK when the step is intact, HERD_EFORMAT when it is not
 * (the message names the first problem's file, tensor and chunk), other
 * codes when it cannot be read at all.  Local.
 */
HERD_EXTERN herd_status herd_ckpt_verify(const char *dir, int64_t step,
					 herd_ckpt_problem_fn fn, void *userdata,
					 size_t *problems);

/* A read-only view of one committed step.  Opaque. */
typedef struct herd_ckpt_reader herd_ckpt_reader;

/* A tensor of a step, as herd_ckpt_reader_tensor describes it. */
typedef struct herd_ckpt_tensor_info {
	const char *name;            /* borrowed from the reader */
	herd_dtype dtype;
	int ndim;
	uint64_t shape[HERD_CKPT_MAX_DIMS];   /* global shape */
	size_t shards;               /* distinct shards saved */
	uint64_t bytes;              /* bytes of the global tensor */
} herd_ckpt_tensor_info;

/* A blob of a step. */
typedef struct herd_ckpt_blob_info {
	const char *name;            /* borrowed from the reader */
	herd_ckpt_blob_rule rule;
	int ranks;                   /* saved ranks, each with its own bytes */
} herd_ckpt_blob_info;

/*
 * Opens step of dir (HERD_CKPT_LATEST: the newest committed step) for
 * reading: decodes and checks its manifest.  Data is read, and verified,
 * only by herd_ckpt_reader_read and herd_ckpt_reader_read_blob.  Local;
 * one reader is used by one thread at a time.  From its first
 * herd_ckpt_reader_read until it is freed, a reader keeps one thread of
 * its own, its second reading stream (docs/checkpoint.md).
 */
HERD_EXTERN herd_status herd_ckpt_reader_open(herd_ckpt_reader **out, const char *dir,
					      int64_t step);

/* Frees a reader.  Accepts NULL. */
HERD_EXTERN void herd_ckpt_reader_free(herd_ckpt_reader *r);

/* The step, the ranks that saved it, and its save time (seconds since
 * the epoch). */
HERD_EXTERN int64_t herd_ckpt_reader_step(const herd_ckpt_reader *r);
HERD_EXTERN int herd_ckpt_reader_ranks(const herd_ckpt_reader *r);
HERD_EXTERN int64_t herd_ckpt_reader_time(const herd_ckpt_reader *r);

/* Number of tensors, and tensor i (0..count-1; HERD_EINVAL beyond). */
HERD_EXTERN size_t herd_ckpt_reader_tensor_count(const herd_ckpt_reader *r);
HERD_EXTERN herd_status herd_ckpt_reader_tensor(const herd_ckpt_reader *r, size_t i,
						herd_ckpt_tensor_info *info);

/* Index of the tensor called name; HERD_ENOTFOUND when absent. */
HERD_EXTERN herd_status herd_ckpt_reader_find(const herd_ckpt_reader *r, const char *name,
					      size_t *index);

/*
 * Reads the whole global tensor called name into buf (cap bytes, at least
 * its bytes; row-major), assembling it from its shards and verifying the
 * checksum of every chunk.  HERD_EFORMAT names file, tensor and chunk of
 * a mismatch.
 */
HERD_EXTERN herd_status herd_ckpt_reader_read(herd_ckpt_reader *r, const char *name,
					      void *buf, size_t cap);

/* Number of blobs, and blob i. */
HERD_EXTERN size_t herd_ckpt_reader_blob_count(const herd_ckpt_reader *r);
HERD_EXTERN herd_status herd_ckpt_reader_blob(const herd_ckpt_reader *r, size_t i,
					      herd_ckpt_blob_info *info);

/*
 * Reads the blob called name that saved rank `rank` wrote into buf (cap
 * bytes), verified; *len gets its size.  HERD_EINVAL when cap is too
 * small (*len still set).
 */
HERD_EXTERN herd_status herd_ckpt_reader_read_blob(herd_ckpt_reader *r, const char *name,
						   int rank, void *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* HERD_CKPT_H */
