/*
 * sdk/ckpt/ckpt_internal.h - the checkpoint model shared by the writer,
 * the reader and the tools: the manifest of a step (files, tensors,
 * shards, chunks and their checksums, blobs), its strict decoder and its
 * encoder, step directory names, box arithmetic for resharding, and the
 * verification of a step.  Not part of the public API.
 *
 * docs/checkpoint.md describes the format these types mirror.
 */
#ifndef HERD_CKPT_INTERNAL_H
#define HERD_CKPT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "herd/ckpt.h"

/* Version of the manifest format this library writes and reads. */
#define HERD__CKPT_MANIFEST_VERSION 1

/* File names inside a step directory, and in the checkpoint directory. */
#define HERD__CKPT_MANIFEST "manifest.msgpack"
#define HERD__CKPT_LATEST "latest"
#define HERD__CKPT_STEP_PREFIX "step-"
#define HERD__CKPT_TMP_PREFIX ".tmp-step-"   /* a save in progress */
#define HERD__CKPT_DEL_PREFIX ".del-step-"   /* a step being deleted */
/* A committed step that does not verify, moved aside by the writer:
 * "step-000000000042.damaged-20250102T030405Z" (a "-2", "-3", ... after
 * the time when that name is taken), with a note inside that says why.
 * Never a step (not the canonical name), never removed by herd. */
#define HERD__CKPT_DAMAGED_TAG ".damaged-"
#define HERD__CKPT_DAMAGED_NOTE "damaged.txt"

/* Bounds that a manifest must respect: beyond real use, low enough that a
 * value outside them is certainly corrupt or hostile. */
#define HERD__CKPT_MANIFEST_MAX (256u * 1024u * 1024u)
#define HERD__CKPT_MAX_RANKS (1 << 20)
#define HERD__CKPT_MAX_ITEMS (1 << 24)        /* files, tensors, shards, blobs */
#define HERD__CKPT_MAX_DIM (UINT64_C(1) << 48)
#define HERD__CKPT_MAX_BYTES (UINT64_C(1) << 62)  /* of a tensor, a file */
#define HERD__CKPT_CHUNK_MIN 4096u
#define HERD__CKPT_CHUNK_MAX (1u << 30)
#define HERD__CKPT_CHUNK_DEFAULT (4u << 20)

/* An N-d box: a shard's place in its global tensor. */
typedef struct herd__ckpt_box {
	int ndim;
	uint64_t offset[HERD_CKPT_MAX_DIMS];
	uint64_t shape[HERD_CKPT_MAX_DIMS];
} herd__ckpt_box;

/* A data file of a step. */
typedef struct herd__ckpt_file {
	char *name;          /* a safe relative name: herd__ckpt_name_is_safe_file */
	int rank;            /* the rank that wrote it */
	uint64_t size;       /* its exact size in bytes */
} herd__ckpt_file;

/* One saved shard: its box, where its bytes are, their chunk checksums. */
typedef struct herd__ckpt_shard {
	herd__ckpt_box box;
	uint32_t file;       /* index into the manifest's files */
	uint64_t at;         /* byte offset in the file */
	uint64_t len;        /* bytes: volume(box) * dtype size */
	uint64_t *sums;      /* nsums = ceil(len / chunk_bytes); NULL without checksums */
	size_t nsums;
} herd__ckpt_shard;

typedef struct herd__ckpt_tensor {
	char *name;
	herd_dtype dtype;
	int ndim;
	uint64_t shape[HERD_CKPT_MAX_DIMS];
	uint64_t bytes;      /* of the global tensor */
	herd__ckpt_shard *shards;
	size_t nshards;
} herd__ckpt_tensor;

/* One saved rank's bytes of a blob. */
typedef struct herd__ckpt_blob_part {
	int rank;
	uint32_t file;
	uint64_t at, len;
	uint64_t sum;        /* of all len bytes; 0 without checksums */
} herd__ckpt_blob_part;

typedef struct herd__ckpt_blob {
	char *name;
	herd_ckpt_blob_rule rule;
	herd__ckpt_blob_part *parts;   /* one per saved rank, by rank */
	size_t nparts;
} herd__ckpt_blob;

/* The manifest of one step.  Everything is owned by it. */
typedef struct herd__ckpt_manifest {
	int64_t step;
	int ranks;                     /* the world size that saved it */
	int64_t time;                  /* seconds since the epoch */
	herd_ckpt_checksum checksum;   /* XXH3 or NONE */
	uint64_t chunk_bytes;
	herd__ckpt_file *files;
	size_t nfiles;
	herd__ckpt_tensor *tensors;
	size_t ntensors;
	herd__ckpt_blob *blobs;
	size_t nblobs;
	/* The decoder's indices of the tensors and blobs sorted by name, for
	 * lookups in log time; NULL in a manifest built otherwise (lookups
	 * then scan). */
	size_t *tensor_order, *blob_order;
} herd__ckpt_manifest;

/* ---- manifest ---------------------------------------------------------- */

/*
 * Decodes a manifest file's bytes.  Strict: the trailing self-checksum must
 * match (HERD_EFORMAT "checksum mismatch" otherwise), then the msgpack is
 * checked before unpacking, every field has its type and range, names are
 * safe, every shard and blob part lies within its file's size, shards have
 * the chunk sums their length needs, and sizes are computed without
 * overflow.  Unknown keys are ignored; a newer "v" gives HERD_EVERSION.
 * Messages start with origin and name the field ("tensors[2].shards[0].at").
 * Reads nothing but data[0..len).  *out is freed with
 * herd__ckpt_manifest_free.
 */
herd_status herd__ckpt_manifest_decode(herd__ckpt_manifest **out, const void *data, size_t len,
				       const char *origin);

/* Encodes m (which must be valid) with its trailing checksum; *out freed
 * with free. */
herd_status herd__ckpt_manifest_encode(const herd__ckpt_manifest *m, char **out, size_t *len);

/* Reads and decodes STEPDIR/manifest.msgpack, opened as
 * herd__ckpt_open_file does: HERD_EFORMAT "PATH: it is a FIFO, not a
 * regular file" (as for a data file), HERD_ENOTFOUND when it is missing. */
herd_status herd__ckpt_manifest_load(herd__ckpt_manifest **out, const char *stepdir);

/* Frees a manifest; accepts NULL. */
void herd__ckpt_manifest_free(herd__ckpt_manifest *m);

/* The tensor or blob called name; NULL when absent.  Log time in a
 * decoded manifest. */
const herd__ckpt_tensor *herd__ckpt_manifest_tensor(const herd__ckpt_manifest *m,
						    const char *name);
const herd__ckpt_blob *herd__ckpt_manifest_blob(const herd__ckpt_manifest *m, const char *name);

/* ---- names ------------------------------------------------------------- */

/* A tensor or blob name: 1..HERD_CKPT_NAME_MAX printable ASCII bytes. */
bool herd__ckpt_name_is_valid(const char *s, size_t n);

/* A data file name: [A-Za-z0-9_.-], 1..64 bytes, not starting with '.'
 * (so never "." or ".." and never a path). */
bool herd__ckpt_name_is_safe_file(const char *s, size_t n);

/* "step-000000000042" into buf[cap]. */
void herd__ckpt_step_name(char *buf, size_t cap, int64_t step);

/* Parses the step from a name that begins with prefix followed by 1..12
 * digits, then end or '.'; false otherwise. */
bool herd__ckpt_parse_step(const char *name, const char *prefix, int64_t *step);

/* Whether name is a step moved aside (HERD__CKPT_DAMAGED_TAG): the
 * canonical name of a step, the tag, then at least one byte; *step gets
 * the step. */
bool herd__ckpt_parse_damaged(const char *name, int64_t *step);

/* "rank-00003.data" into buf[cap]. */
void herd__ckpt_rank_file_name(char *buf, size_t cap, int rank);

/* ---- steps of a directory --------------------------------------------- */

/*
 * The committed steps of dir (step-N directories holding a manifest, of
 * whatever kind: one that cannot be read is reported by whoever reads
 * it), ascending, in *out (free) and *count.  No manifest is decoded.
 */
herd_status herd__ckpt_committed_steps(const char *dir, int64_t **out, size_t *count);

/*
 * Moves the committed step `step` of dir aside, as
 * step-N.damaged-TIME (UTC), never replacing anything: when that name is
 * taken (a second damage of the step within a second), "-2", "-3", ...
 * follow.  why (one line) is written into it as HERD__CKPT_DAMAGED_NOTE,
 * dir is fsynced, and `latest`, when it named the step, is made to name
 * the newest committed step left (or removed when none is).  The path
 * moved to goes into aside[cap].  Only the writer of dir (rank 0, which
 * holds dir/.lock) calls it.  HERD_EIO naming both paths when the rename
 * fails; what follows the rename fails only with warnings.
 */
herd_status herd__ckpt_move_aside(const char *dir, int64_t step, const char *why, char *aside,
				  size_t cap);

/*
 * What a message about step, absent from dir, adds when steps moved aside
 * carry its number: "; a step of that number that did not verify was moved
 * aside as DIR/step-...damaged-..." (the newest such, and how many there are);
 * "" when none does.
 */
void herd__ckpt_aside_note(const char *dir, int64_t step, char *buf, size_t cap);

/* Renames from to to (paths), refusing to replace what is there:
 * HERD_EEXIST when to exists, HERD_EIO naming both on another failure. */
herd_status herd__ckpt_rename_noreplace(const char *from, const char *to);

/* ---- boxes ------------------------------------------------------------- */

/* Elements of a box (or a shape), 0 when a dimension is 0; false when the
 * product overflows limit. */
bool herd__ckpt_volume(const uint64_t *shape, int ndim, uint64_t limit, uint64_t *out);

/* The intersection of a and b (same ndim); false when empty. */
bool herd__ckpt_box_intersect(const herd__ckpt_box *a, const herd__ckpt_box *b,
			      herd__ckpt_box *out);

/*
 * Whether two of n boxes of the same ndim overlap; box i is at
 * (const char *)boxes + i * stride.  The boxes are sorted along the
 * dimension where their offsets take the most distinct values, and each
 * is compared only with the boxes that begin before it ends along it: n
 * log n for the shardings of rows or of columns, n times the side for a
 * grid of blocks.  budget bounds the comparisons (0: none).  *found gets
 * 1 with the pair in *a < *b, 0 when no two overlap, -1 when the budget
 * ran out first.  HERD_ENOMEM is the one error.
 */
herd_status herd__ckpt_boxes_overlap(const void *boxes, size_t stride, size_t n,
				     uint64_t budget, int *found, size_t *a, size_t *b);

/*
 * Calls fn for every contiguous run of the box `part` inside both src (a
 * box stored row-major) and dst (another), in increasing order of the
 * source offset: run bytes at src_off in src's bytes go to dst_off in
 * dst's bytes.  part lies inside both.  Runs merge trailing dimensions
 * that are whole in src, dst and part.  Stops at fn's first error.
 */
typedef herd_status (*herd__ckpt_run_fn)(uint64_t src_off, uint64_t dst_off, uint64_t len,
					 void *arg);
herd_status herd__ckpt_box_runs(const herd__ckpt_box *src, const herd__ckpt_box *dst,
				const herd__ckpt_box *part, size_t elem, herd__ckpt_run_fn fn,
				void *arg);

/* ---- checksums and reading -------------------------------------------- */

/* The chunk checksum of len bytes (XXH3, 64 bits). */
uint64_t herd__ckpt_sum(const void *p, size_t len);

/* "0123456789abcdef" (16 digits + NUL) into buf[17]. */
void herd__ckpt_sum_hex(char *buf, uint64_t sum);

/* pread of exactly len bytes; HERD_EIO naming path on error or short file. */
herd_status herd__ckpt_pread(int fd, void *buf, size_t len, uint64_t off, const char *path);

/*
 * Opens name (relative to the directory dfd, or a path with AT_FDCWD) for
 * reading, without following a link (O_NOFOLLOW) or waiting on a FIFO or
 * a device (O_NONBLOCK, then fstat of what was opened): 0 with *fd and
 * *size when it is a regular file; else -1, why in words ("it is a FIFO,
 * not a regular file", "cannot open: Permission denied") and *err the
 * errno of a failed call (0 when the file is of another kind).
 */
int herd__ckpt_open_file(int dfd, const char *name, int *fd, uint64_t *size, int *err,
			 char *why, size_t cap);

/*
 * Opens data file name of a step (dfd: the step directory) for reading,
 * without following a link or waiting on a FIFO: 0 with *fd when it is a
 * regular file of the manifest's size, else -1 and why ("a FIFO, not a
 * regular file", "the file has 10 bytes, the manifest says 24").
 */
int herd__ckpt_data_open(int dfd, const char *name, uint64_t size, int *fd, char *why,
			 size_t cap);

/* How a read on another thread went (that thread cannot raise an error). */
typedef struct herd__ckpt_read_result {
	int err;             /* 0, an errno, or -1: the file ended early */
	uint64_t at;         /* where the read failed */
	int64_t bad;         /* the first chunk whose sum differs, -1 none */
	uint64_t sum;        /* that chunk's sum */
} herd__ckpt_read_result;

/* herd__ckpt_pread's error for a read that failed as r says. */
herd_status herd__ckpt_read_error(const herd__ckpt_read_result *r, size_t len, const char *path);

/*
 * herd__ckpt_pread of len bytes at off into buf, then *sum gets their
 * checksum (herd__ckpt_sum; sum NULL: none).  Sequential reads are left
 * to the kernel's own read-ahead: telling it more (POSIX_FADV_WILLNEED on
 * the next chunks) made restores from disk a third slower.
 */
herd_status herd__ckpt_pread_sum(int fd, void *buf, size_t len, uint64_t off, const char *path,
				 uint64_t *sum);

/*
 * A thread that reads and verifies a run of chunks while its caller reads
 * and verifies the run before it (or, in a synchronous save, hashes what
 * its caller writes), so that a verified restore reads two
 * sequential streams at once, each on its own file description (its own
 * read-ahead), and hashes on two cores.  Measured on bench/ckpt_compare.sh's
 * virtual disk, 1 GiB in 4 MiB chunks with the page cache dropped, medians
 * of 7: two such streams 0.66-0.80 s, one stream 0.73-1.70 s, one stream
 * whose chunks a second thread hashes 1.2-2.1 s.  One job at a time: post
 * a run, leave its bytes alone, wait for the result before posting the
 * next.  A wait is bounded by the reads of one run of a regular file and
 * their hashing.  When the thread cannot be started, post does the job
 * inline.  Stop joins the thread (after the job posted, if any) and is
 * needed after every start.
 */
typedef struct herd__ckpt_hasher {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool inited, running;
	bool busy;           /* a job is posted and not done yet */
	bool stop;
	int fd;
	uint8_t *p;
	uint64_t off, len, chunk;
	const uint64_t *sums;
	uint64_t *out;       /* hash only: the sums go here */
	herd__ckpt_read_result res;   /* of the last job */
} herd__ckpt_hasher;

void herd__ckpt_hasher_start(herd__ckpt_hasher *h);
/*
 * Reads len bytes at off of fd into p, chunk bytes at a time (the last
 * chunk may be shorter), and checks chunk i against sums[i]; stops at the
 * first read error or mismatch.
 */
void herd__ckpt_hasher_post(herd__ckpt_hasher *h, int fd, void *p, uint64_t off, uint64_t len,
			    uint64_t chunk, const uint64_t *sums);
/*
 * Hashes len bytes at p, chunk bytes at a time (the last chunk may be
 * shorter), into out[0], out[1], ...: what a synchronous save does while
 * its caller writes the same bytes.
 */
void herd__ckpt_hasher_post_sums(herd__ckpt_hasher *h, const void *p, uint64_t len,
				 uint64_t chunk, uint64_t *out);
herd__ckpt_read_result herd__ckpt_hasher_wait(herd__ckpt_hasher *h);
void herd__ckpt_hasher_stop(herd__ckpt_hasher *h);

/*
 * Verifies every byte of the step in stepdir against the manifest m,
 * calling fn for each problem (see herd_ckpt_verify).  *problems gets the
 * count, *unreadable (may be NULL) how many of them are reads that failed
 * (rather than a file missing, of another size, or bytes that differ).
 * HERD_OK when none, HERD_EFORMAT naming the first otherwise.  Only the
 * data files f with f % nparts == part are read (nparts 1: all), so that
 * the ranks of a job can verify a step together, each its share.
 */
herd_status herd__ckpt_verify_data(const char *stepdir, const herd__ckpt_manifest *m,
				   size_t part, size_t nparts, herd_ckpt_problem_fn fn, void *arg,
				   size_t *problems, size_t *unreadable);

/*
 * This rank's share of verifying committed step `step` of dir: its
 * manifest (checksum, structure, the step it names) and the data files f
 * with f % nparts == part.  HERD_OK when they verify; HERD_EFORMAT, naming
 * the first problem, when they do not (the step is damaged: what a
 * restore takes for damaged); other codes when it cannot tell
 * (HERD_EVERSION: a newer format; HERD_EIO: reads that failed, and no
 * other problem; HERD_ENOTFOUND).
 */
herd_status herd__ckpt_verify_share(const char *dir, int64_t step, size_t part, size_t nparts);

/* rm -r of dir_name inside parent (no symlinks followed); best effort for
 * what it cannot remove, which it reports. */
herd_status herd__ckpt_remove_tree(const char *parent, const char *name);

/* Whether dir/name, named like a step or a temporary step, is a directory
 * (not a symbolic link to one): what herd itself makes.  Anything else is
 * left alone, with a warning naming it. */
bool herd__ckpt_is_ours(const char *dir, const char *name);

#endif /* HERD_CKPT_INTERNAL_H */
