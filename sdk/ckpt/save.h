/*
 * sdk/ckpt/save.h - what the files of a save share (save.c, layout.c,
 * writer.c, commit.c, async.c): the layout records, a save's plan and
 * segments, the writer's sink, the save itself, and the phases' entry
 * points.  Private to sdk/ckpt.
 */
#ifndef HERD_CKPT_SAVE_H
#define HERD_CKPT_SAVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <xxhash.h>

#include "handle.h"

/* The most bytes the writer hands to one pwrite from the staging ring. */
#define WRITE_PIECE ((size_t)64 << 20)

enum { ITEM_TENSOR = 1, ITEM_BLOB = 2 };

/* What a rank tells the others about one registered item. */
typedef struct layout_rec {
	char name[HERD_CKPT_NAME_MAX + 1];
	int32_t kind, dtype, ndim, rule;
	uint64_t shape[HERD_CKPT_MAX_DIMS];
	uint64_t offset[HERD_CKPT_MAX_DIMS];
	uint64_t box[HERD_CKPT_MAX_DIMS];
	uint64_t size;                        /* a blob's bytes */
} layout_rec;

/* The first exchange: enough to detect ranks that disagree. */
typedef struct layout_head {
	int64_t status;
	int64_t step;
	uint64_t ntensors, nblobs;
} layout_head;

/* Everything every rank knows about a save after phase 1. */
typedef struct plan {
	int size;
	size_t nt, nb;
	layout_rec *recs;      /* size * (nt + nb): rank r's items at r * (nt + nb) */
	bool *owner;           /* size * nt: whether rank r writes tensor i */
	uint64_t chunk;
	bool sums;             /* checksums on */
} plan;

/* One segment of a rank's data file. */
typedef struct seg {
	uint64_t at, len;
	uint64_t chunk;        /* bytes per checksum */
	size_t nsums, first;   /* its checksums in the rank's array */
	const void *src;       /* this rank's bytes (own segments only) */
	int device;            /* src's GPU, -1: host memory */
} seg;

/* The writer's side: a stream of bytes into one file, hashed per chunk. */
typedef struct sink {
	int fd;
	char path[4096];
	uint64_t pos;
	const seg *segs;
	size_t nsegs, cur;
	uint64_t *sums;
	bool hashing;
	XXH3_state_t *hs;
	herd_status st;        /* the first failure; later bytes are only counted */
	char msg[1024];
	/* Peers' memory: the holders that take a copy of the stream, and
	 * the first failure of one (the stream then goes on to storage
	 * alone, when the step goes there; else the sink fails with it). */
	herd__peer_conn *peers;
	size_t npeers;
	int peer_timeout_ms;
	herd_status peer_st;
	char peer_msg[512];
} sink;

/* A save: what phases 2 and 3 need, on either thread. */
typedef struct herd__ckpt_job {
	herd_ckpt *ck;
	int64_t step;
	plan p;
	seg *segs;             /* this rank's */
	size_t nsegs, nsums;
	uint64_t total;
	char tmp[128];         /* the temporary step directory's name ("": none) */
	bool to_storage;       /* the step goes to the directory */
	bool to_peers;         /* and to peers' memory */
	bool peers_failed;     /* ... a holder failed on a rank: storage alone */
	herd__peer_key key;    /* ... as the holders know it */
	sink sk;
	/* The staging ring of an asynchronous save. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool sync_init;
	uint64_t head, tail;
	bool whole;            /* the ring holds the whole stream: write after staging */
	/* A staging copy that failed (a device's): the writer fails the save
	 * with it.  stage_msg is written before stage_st. */
	_Atomic int stage_st;
	char stage_msg[512];
	/* The writer thread's outcome. */
	herd_status st;
	char msg[1024];
	/* What it cost (herd_ckpt_get_stats): from its start to its commit,
	 * and the caller's stall so far. */
	double t_begin, t_end, stall;
} herd__ckpt_job;

/* Seconds on CLOCK_MONOTONIC. */
double herd__save_now(void);

/* The figures of job's tier (herd_ckpt_stats). */
herd_ckpt_tier_stats *herd__save_tier(herd_ckpt *ck, const herd__ckpt_job *job);

/* A save that has ended: its busy time and its whole stall, of which
 * wait seconds the caller has just waited, counted into its tier. */
void herd__save_ended(herd_ckpt *ck, herd__ckpt_job *job, double wait);

/* save.c */
void herd__save_job_free(herd__ckpt_job *job);

/* layout.c: phase 1 */
const layout_rec *herd__save_rec_of(const plan *p, int r, size_t i);
herd__ckpt_box herd__save_box_of(const layout_rec *r);
herd_status herd__save_plan_segments(const plan *p, int r, const herd_ckpt *own, seg **out,
				     size_t *nsegs, size_t *nsums, uint64_t *total);
herd_status herd__save_begin(herd_ckpt *ck, int64_t step, herd__ckpt_job **out);

/* writer.c: phase 2 */
void herd__save_sink_fail(sink *sk, herd_status st);
void herd__save_check_abort(herd__ckpt_job *job);
void herd__save_sink_put(herd__ckpt_job *job, const uint8_t *p, size_t n);
void herd__save_sink_open(herd__ckpt_job *job);
void herd__save_sink_close(herd__ckpt_job *job);

/* commit.c: phase 3 */
herd_status herd__save_finish(herd__ckpt_job *job);

/* save.c: phases 2 and 3 on the caller's thread, straight from the
 * registered memory; frees job. */
herd_status herd__save_in_place(herd__ckpt_job *job);

#endif /* HERD_CKPT_SAVE_H */
