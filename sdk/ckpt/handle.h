/*
 * sdk/ckpt/handle.h - the checkpoint handle, shared by the save path
 * (save.c), the restore path (restore.c) and open/close (ckpt.c).  Not part
 * of the public API.
 */
#ifndef HERD_CKPT_HANDLE_H
#define HERD_CKPT_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>

#include "ckpt_internal.h"
#include "ckpt/peer.h"

/* A registered tensor: this rank's shard of a global tensor. */
typedef struct herd__ckpt_reg_tensor {
	char name[HERD_CKPT_NAME_MAX + 1];
	void *data;
	herd_dtype dtype;
	uint64_t shape[HERD_CKPT_MAX_DIMS];   /* global */
	herd__ckpt_box box;                   /* this rank's shard */
	uint64_t bytes;                       /* of the shard */
	int device;                           /* data's GPU, -1: host memory */
} herd__ckpt_reg_tensor;

typedef struct herd__ckpt_reg_blob {
	char name[HERD_CKPT_NAME_MAX + 1];
	void *data;
	size_t size;
	herd_ckpt_blob_rule rule;
} herd__ckpt_reg_blob;

/* What every rank broadcasts or gathers to agree on an outcome. */
typedef struct herd__ckpt_verdict {
	int32_t status;
	int32_t rank;          /* the rank the message comes from */
	int64_t value;         /* a step, a nonce */
	char text[128];        /* a name */
	char msg[1024];
} herd__ckpt_verdict;

struct herd_ckpt {
	char *dir;
	int lock_fd;           /* rank 0: DIR/.lock, flock'ed while open; else -1 */
	herd_comm *comm;       /* borrowed; NULL: a world of one rank */
	int rank, size;
	int keep_last, keep_every;
	size_t staging_bytes;
	herd_ckpt_checksum checksum;
	uint64_t chunk_bytes;

	herd__ckpt_reg_tensor *tensors;
	size_t ntensors, cap_tensors;
	herd__ckpt_reg_blob *blobs;
	size_t nblobs, cap_blobs;
	size_t *names;         /* a hash table of both lists' names (ckpt.c) */
	size_t names_cap;      /* its slots: 0 or a power of two */
	uint64_t names_seed;   /* its hash's seed */

	/* The asynchronous save in flight, if any. */
	bool busy;
	atomic_bool abort_req;   /* herd_ckpt_abort: the save in flight stops writing */
	pthread_t writer;
	struct herd__ckpt_job *job;
	uint8_t *ring;         /* staging memory, kept between saves (mmap) */
	bool ring_pinned;      /* page-locked for device copies (herd__dev_pin) */
	int ring_pin_device;   /* in this GPU's context, when ring_pinned */
	size_t ring_cap;       /* its usable bytes */
	size_t ring_map;       /* its mapped bytes */

	/* The tier in peers' memory (peer.h): the holders of the job's nodes
	 * in node order (HERD_CKPT_HOLDERS), none when nholders is 0. */
	herd__peer_addr *holders;
	size_t nholders;
	int node_rank;         /* this rank's node among them */
	int peer_copies;       /* copies of a step's data; 0: the tier is off */
	int storage_every;     /* steps that also go to storage: its multiples */
	int peer_timeout_ms;   /* a transfer's deadline (HERD_TIMEOUT) */
	uint64_t peer_ns;      /* the holders' namespace of this handle: a hash of dir */
	herd_ckpt_restore_info last;   /* the last restore */
	herd_ckpt_stats stats;         /* what the saves cost (interval.c) */
};

/* Whether a save of step goes to peers' memory, and to storage. */
bool herd__ckpt_to_peers(const herd_ckpt *ck);
bool herd__ckpt_to_storage(const herd_ckpt *ck, int64_t step);

/* Collectives that degrade to copies in a world of one rank. */
herd_status herd__ckpt_allgather(herd_ckpt *ck, const void *mine, void *all, size_t bytes);
herd_status herd__ckpt_bcast(herd_ckpt *ck, void *buf, size_t bytes);

/*
 * Agrees on the outcome of a step that every rank ran locally: every rank's
 * status is gathered, and when any failed, the lowest failing rank's message
 * is sent to all.  Returns HERD_OK, or the same failure on every rank (its
 * message naming that rank when it is not this one); *failed_rank gets the
 * rank (-1 when none).  A communicator failure is returned as it is.
 */
herd_status herd__ckpt_agree(herd_ckpt *ck, herd_status local, int *failed_rank);

/* Unmaps the staging memory (after the writer is joined). */
void herd__ckpt_ring_free(herd_ckpt *ck);

/* Joins the asynchronous save in flight (if any) and returns its status. */
herd_status herd__ckpt_join(herd_ckpt *ck);

/* "DIR/NAME" into buf[cap]; HERD_EINVAL when it does not fit. */
herd_status herd__ckpt_path(char *buf, size_t cap, const char *dir, const char *name);

#endif /* HERD_CKPT_HANDLE_H */
