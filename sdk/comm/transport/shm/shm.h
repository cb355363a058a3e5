/*
 * sdk/comm/transport/shm/shm.h - what the shared-memory transport's files
 * share: the board, the staging slots and the doorbell of each rank's
 * segment (shm.c), used by the direct collectives (direct.c), which shm.c
 * offers in the transport's entry of the table (transport.h).
 */
#ifndef HERD_COMM_SHM_H
#define HERD_COMM_SHM_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comm/core.h"
#include "wait.h"

/*
 * shm.c: the board of rank `rank` (this rank's own, or a local peer's), a
 * page of shared memory beside its inbox where the direct collectives
 * (direct.c) publish what they do; NULL when the rank is not local.
 */
struct herd__board *herd__shm_board(const herd_comm *comm, int rank);

/*
 * shm.c: the staging slots of rank `rank` (HERD__STAGE_SLOTS of
 * HERD__STAGE_BYTES, in its segment, mapped by every local peer), where a
 * direct allreduce puts the chunks of its result for the peers to copy;
 * NULL when the rank is not local.
 */
#define HERD__STAGE_SLOTS 4u
#define HERD__STAGE_BYTES (256u * 1024u)
uint8_t *herd__shm_stage(const herd_comm *comm, int rank);

/* shm.c: sleeping on the rank's doorbell futex, where shared-memory links
 * (and the direct collectives) signal readiness: arm (then check again),
 * sleep, disarm.  The transport's doorbell (herd__doorbell) for p2p.c. */
uint32_t herd__shm_arm(herd_comm *comm);
void herd__shm_sleep(herd_comm *comm, uint32_t seen, int timeout_ms);
void herd__shm_disarm(herd_comm *comm);

/* shm.c: the doorbell of rank `rank` (this rank's own, or a local
 * peer's), where each also notes the CPU it waits on; NULL when the rank
 * is not local. */
herd__bell *herd__shm_bell(const herd_comm *comm, int rank);

/* shm.c: wakes local peer `rank` if it sleeps on its doorbell.  The
 * caller's earlier stores are ordered before the look at its flag. */
void herd__shm_wake(herd_comm *comm, int rank);

/* shm.c: whether a message from local peer `rank` waits, unread, at the
 * head of this rank's inbox; its header into *hdr. */
bool herd__shm_pending(const herd_comm *comm, int rank, herd__wire_hdr *hdr);

/* shm.c: whether this rank can read the memory of every local peer with
 * process_vm_readv, as measured at attach, and so could every peer. */
bool herd__shm_cma_all(const herd_comm *comm);

/* ---- the direct collectives (direct.c) ------------------------------------- */

/* HERD__SETUP_COLL: makes the direct collectives the communicator's
 * collective transport (place.coll) when every rank is on this host, every
 * pair talks shared memory, every rank can read every other's memory and
 * no earlier transport offered its own; else leaves place.coll as it is.
 * After the shared-memory links are made (attach). */
herd_status herd__shm_coll_init(herd_comm *comm, int64_t deadline);

/*
 * What a rank publishes on its board, read by its local peers.  Each group
 * of fields is written by the owner only, on its own cache line.
 */
/* The small direct allreduce's most bytes.  2 ranks on 2 cores: 2 and 4
 * KiB took 0.7 and 0.9-1.05 us here against 1.2-1.7 and 1.9-2.1 us through
 * recursive doubling over the rings (bench/RESULTS.md). */
#define HERD__BOARD_SMALL 4096u

typedef struct herd__board_slot {
	alignas(64) _Atomic uint64_t cseq;  /* the call whose data this is; set last */
	uint64_t count;                     /* its fingerprint, compared by readers */
	uint32_t len;
	uint8_t kind, dtype, redop, pad;
	uint8_t data[HERD__BOARD_SMALL];    /* from byte 24: a few bytes share the line */
} herd__board_slot;

typedef struct herd__board {
	/* The current collective: its number and fingerprint, under a
	 * seqlock (call_gen is odd while the owner writes them). */
	alignas(64) _Atomic uint64_t call_gen;
	uint64_t call_cseq;
	uint8_t kind, dtype, redop;
	int32_t root;
	uint64_t count;
	/* A large direct allreduce: its buffers, in the owner's memory, valid
	 * for call addr_cseq (set after them, with release). */
	alignas(64) _Atomic uint64_t addr_cseq;
	uint64_t sendbuf, recvbuf;
	/* The large allreduce's staging, counted from 0 in every call: the
	 * rounds of its result the owner has put in its staging slots, and
	 * the rounds it has copied out of every peer's. */
	alignas(64) _Atomic uint64_t staged;
	alignas(64) _Atomic uint64_t taken;
	/* The last call in which the owner finished reading its peers'
	 * memory and their staging slots. */
	alignas(64) _Atomic uint64_t done;
	/* Small allreduce data, by call parity (direct.c says why two). */
	herd__board_slot slot[2];
} herd__board;

/* The chunk of the direct allreduce in force: HERD__STAGE_BYTES.  Tests
 * lower it (to a multiple of 8) to run many rounds through the staging
 * slots with little data; nothing else writes it. */
extern size_t herd__direct_chunk_bytes;

/* Out of place, the direct allreduce pushes its results into the peers'
 * receive buffers while p - 1 times the vector comes to at most this many
 * bytes, and stages them beyond (direct.c): HERD__DIRECT_PUSH_MAX.
 * Tests set it to 0 or SIZE_MAX to take one way at every size; nothing
 * else writes it. */
extern size_t herd__direct_push_max;

#endif /* HERD_COMM_SHM_H */
