/*
 * sdk/comm/transport/shm/direct.c - allreduce among the ranks of one host by reading
 * each other's memory directly, instead of passing messages through the
 * shared-memory rings of shm.c, which copy every byte twice (sender to
 * slot, slot to destination).
 *
 * Used when every rank of the communicator is on this host and each can
 * read the others' memory with process_vm_readv (cross-memory attach, as
 * Open MPI's vader does; shm.c probes it at init).  Each rank has a board
 * (herd__board, a page of shared memory beside its inbox) where it
 * publishes what it does; only its owner writes it.
 *
 * The shared-memory transport offers them to tune.c as its collectives
 * (herd__coll_ops, "shm-direct"), and publishes every collective call's
 * fingerprint on the rank's board as the call begins (direct_enter).
 *
 * Large allreduce (direct_allreduce), call number s, p ranks, the
 * vector split into p slices, slice j reduced by rank j, chunk by chunk:
 *  1. post: each rank writes the addresses of its send and receive buffers
 *     on its board (its fingerprint is there since the call began), then
 *     addr_cseq = s (release), and reads every peer's;
 *  2. reduce and share.  For each chunk of its slice, rank r reads the
 *     chunk of every peer's send buffer into cache-sized scratch (out of
 *     place, the first peer's straight into the destination), with
 *     process_vm_readv (one kernel copy), and reduces them with its own.
 *     The result goes to every receive buffer in one of two ways, the
 *     same on every rank (each sees every rank's buffers after the post):
 *     - the push, when every rank is in place or the results pushed,
 *       p - 1 times the vector, come to at most herd__direct_push_max
 *       bytes (HERD__DIRECT_PUSH_MAX): r writes the result into its
 *       buffer and, while it is in cache, into every peer's
 *       (process_vm_writev).  In place, the lines it writes in a peer are
 *       the ones it has just read there, so they are in its cache too.
 *     - otherwise: r reduces into a staging slot of its segment (shm.c),
 *       copies it into its receive buffer and raises its `staged` count;
 *       every peer copies the chunk out of the slot into its own receive
 *       buffer and raises its `taken` count once it has every rank's chunk
 *       of that round.  Chunk t goes to slot t % HERD__STAGE_SLOTS, which r
 *       fills again only when every peer has taken round t - SLOTS.  A rank
 *       stages what it can and copies out what is there, and waits only
 *       when it can do neither.  A process_vm_writev into a peer's receive
 *       buffer would write lines that no cache holds, and pay for reading
 *       each first and pinning every page; the copies out of shared memory
 *       are plain stores, and from HERD__DIRECT_STREAM bytes streaming ones
 *       (the result then goes to memory and leaves the operands in cache).
 *       bench/RESULTS.md ("The direct path's thresholds") has the figures
 *       that put the line between staging and the push.
 *  3. done = s (release); rank r returns once every peer's done is s: until
 *     then peers may still read its send buffer and staging slots and write
 *     its receive buffer.
 * Each rank reads 1/p of every send buffer and every receive buffer gets
 * every slice: every byte crosses memory once each way, which is the least
 * an allreduce can do, and the reduction reads its operands from cache.
 * Every rank's slice j is rank j's result, bit for bit.
 *
 * Why it is safe: a rank touches a peer's buffers only between the peer's
 * post for s and its own done for s, and the peer does not return from s
 * (and so does not touch or free its buffers) before every done says s.
 * Slice j of a send buffer is read by rank j alone, chunk by chunk, and
 * chunk t of slice j of any receive buffer is written after rank j has
 * read chunk t of every send buffer (by rank j itself, or by its owner
 * after rank j raised `staged` past t), so in place nothing is overwritten
 * before it is read.  The staging counts start from zero in every call:
 * a rank clears them before it posts its buffers, when every peer has
 * finished the last call, and a peer looks at them only after it has seen
 * the post.  The peers are processes of this user that are blocked in this
 * call; one that dies is noticed by the monitor, which breaks the
 * communicator, and the reads and writes stop at the next chunk (its pid
 * cannot be handed to another process before it is reaped, and the kernel
 * hands out pids in sequence, so not within that time).
 *
 * Small allreduce (direct_allreduce_small), at most HERD__BOARD_SMALL
 * bytes: each rank copies its vector into slot[s % 2] of its board, sets
 * the slot's cseq = s, waits for every peer's slot s and reduces all slots
 * in rank order (the same bits on every rank), then sets done = s.  One
 * write and p - 1 reads of shared memory, no system call.  Two slots: a
 * rank may enter s + 1 while a peer still reads its slot s; before it
 * writes slot[s % 2] again (call s + 2 or later) it waits until every peer
 * has said done for the call that last used it.
 *
 * Waiting (sdk/base/wait.h): spin, yield a few times (at once when the
 * host's ranks outnumber its CPUs; not at all while the machine is busy
 * with other work), then sleep on the doorbell futex of shm.c; a rank that
 * publishes something wakes the peers that sleep.  A wait ends with
 * HERD_EPEER when the monitor breaks the communicator (a peer died: the
 * doorbell is rung) or the peer destroyed its communicator, HERD_EABORTED
 * on abort, HERD_ETIMEDOUT at the call's deadline naming the peer waited
 * for, HERD_EMISMATCH when the peer's board shows another call with this
 * number, or its message for another call waits in this rank's inbox.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "base.h"
#include "comm/transport/shm/shm.h"
#include "net.h"
#include "wait.h"

/*
 * From this many bytes, an out-of-place large allreduce writes its result
 * with streaming stores.  Out of place the operands and results of all the
 * ranks no longer fit the cache from a few MiB on (4 ranks of 8 MiB take
 * 64 MiB); smaller results stay in cache, where the caller is likely to
 * read them next.  Chosen by measurement: bench/RESULTS.md, "The direct
 * path's thresholds".
 */
#define HERD__DIRECT_STREAM (8u * 1024u * 1024u)

/*
 * Out of place, the push serves while the results that all the ranks push
 * into their peers, (p - 1) times the vector, come to at most this many
 * bytes, and the staging beyond: the push writes each result once into
 * every receive buffer, with no exchange of cache lines between the cores,
 * but the kernel pins every page it writes, and it loses once the buffers
 * no longer fit the cache.  Chosen by measurement: bench/RESULTS.md, "The
 * direct path's thresholds".
 */
#define HERD__DIRECT_PUSH_MAX (16u * 1024u * 1024u)

/* One scratch buffer: a chunk, and a page to place it in (scratch_near). */
#define SCRATCH_EACH (HERD__STAGE_BYTES + 4096u + 64u)

size_t herd__direct_chunk_bytes = HERD__STAGE_BYTES;
size_t herd__direct_push_max = HERD__DIRECT_PUSH_MAX;
/*
 * Spinning before yielding and sleeping on the doorbell: wait.h's, in the
 * small allreduce as in the large one.  With more ranks than CPUs, or when
 * the peer waited for last waited on this rank's CPU (each notes its CPU
 * on its doorbell), a waiting rank yields at once, so that the rank it
 * waits for runs; on a machine busy with other work it spins briefly and
 * sleeps without yielding (wait.h).
 */
#define SPIN_NS HERD__WAIT_SPIN_NS
#define SLEEP_MAX_MS HERD__WAIT_SLEEP_MAX_MS
/* How long a failed read waits for the monitor's word on why. */
#define SETTLE_MS 200

/* One thing waited for: *word >= value, on peer's board. */
typedef struct dwant {
	const _Atomic uint64_t *word;
	uint64_t value;
	int peer;
} dwant;

/* What the direct collectives keep for a communicator (its coll_state). */
struct herd__coll_state {
	uint8_t *scratch;        /* 3 * SCRATCH_EACH, made at the first large call */
	uint64_t slot_cseq[2];   /* the call that last wrote each small slot */
	/* [size]: a call each peer is known to have finished reading this
	 * rank's memory for: from its done word, or inferred (a peer that
	 * posted for call t has finished every call before t), which spares
	 * reading its done line on every call. */
	uint64_t *known_done;
	bool oversubscribed;     /* more ranks on this host than CPUs */
	/* [size] each, for the large allreduce: the peers' buffers in their
	 * memory; for timeouts: the peers waited for. */
	uint64_t *peer_in, *peer_out;
	int *peers;
	/* [size] each, for the large allreduce's rounds: which peers' chunks
	 * of the round being taken are in; and the words it may wait for. */
	bool *got;
	dwant *wants;
};

/* One call, as every step sees it. */
typedef struct dcall {
	herd_comm *comm;
	herd__coll_state *d;
	int p, r;
	uint64_t s;              /* collective number */
	herd_dtype dtype, wdt;   /* wdt: float32 for a widened narrow type */
	herd_redop op, eop;      /* eop: AVG as SUM */
	bool widen;
	size_t es, count;
	const uint8_t *in;
	uint8_t *out;
	bool stream;             /* copy_out with streaming stores */
} dcall;

/* ---- setup ---------------------------------------------------------------- */

static const herd__coll_ops direct_ops;

herd_status herd__shm_coll_init(herd_comm *comm, int64_t deadline)
{
	size_t n = (size_t)comm->size;
	herd__coll_state *d;

	(void)deadline;
	if (comm->size < 2 || !comm->place.one_host || comm->place.any_tcp ||
	    comm->place.coll != NULL || !herd__shm_cma_all(comm))
		return HERD_OK;
	HERD_CHECK(herd__calloc(&d, 1, sizeof(*d), "direct collective state"));
	comm->coll_state = d;
	comm->place.coll = &direct_ops;
	d->oversubscribed = comm->nlocal > comm->ncpus;
	HERD_CHECK(herd__calloc(&d->known_done, n, sizeof(uint64_t), "direct collective state"));
	HERD_CHECK(herd__calloc(&d->peer_in, 2 * n, sizeof(uint64_t), "direct collective state"));
	d->peer_out = d->peer_in + n;
	HERD_CHECK(herd__calloc(&d->peers, n, sizeof(int), "direct collective state"));
	HERD_CHECK(herd__calloc(&d->got, n, sizeof(bool), "direct collective state"));
	HERD_CHECK(herd__calloc(&d->wants, 2 * n, sizeof(dwant), "direct collective state"));
	return HERD_OK;
}

static void direct_free(herd_comm *comm)
{
	herd__coll_state *d = comm->coll_state;

	if (d == NULL)
		return;
	free(d->scratch);
	free(d->known_done);
	free(d->peer_in);
	free(d->peers);
	free(d->got);
	free(d->wants);
	free(d);
	comm->coll_state = NULL;
}

/* The seqlock of the call line: odd while the owner writes it. */
static void post_call(herd_comm *comm, const herd__op *op, uint64_t cseq)
{
	herd__board *b = herd__shm_board(comm, comm->rank);
	uint64_t gen = atomic_load_explicit(&b->call_gen, memory_order_relaxed);

	atomic_store_explicit(&b->call_gen, gen + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	b->call_cseq = cseq;
	b->kind = (uint8_t)op->fp.kind;
	b->dtype = op->fp.dtype;
	b->redop = op->fp.redop;
	b->root = op->fp.root;
	b->count = op->fp.count;
	atomic_store_explicit(&b->call_gen, gen + 2, memory_order_release);
}

static void direct_enter(herd_comm *comm, const herd__op *op, uint64_t cseq)
{
	if (!herd__op_is_p2p(op->fp.kind))
		post_call(comm, op, cseq);
}

/* ---- waiting -------------------------------------------------------------- */

/* Reads peer j's call line consistently: false while it is being written. */
static bool read_call(const herd__board *b, herd__board *out)
{
	uint64_t g0 = atomic_load_explicit(&b->call_gen, memory_order_acquire);

	if (g0 & 1)
		return false;
	out->call_cseq = b->call_cseq;
	out->kind = b->kind;
	out->dtype = b->dtype;
	out->redop = b->redop;
	out->root = b->root;
	out->count = b->count;
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&b->call_gen, memory_order_relaxed) == g0;
}

/* "mismatched calls: rank 0 (host h) is in #5 allreduce float32 sum
 * count=9 (collective call 5) and rank 1 (host h) <how> collective call 6,
 * allreduce float32 sum count=3".  theirs->seq is not known here. */
static herd_status mismatch(herd_comm *comm, int peer, const herd__fp *theirs,
			    uint64_t their_cseq, const char *how)
{
	char me[HERD__COMM_HOST_MAX + 32], who[HERD__COMM_HOST_MAX + 32];
	char mine[160], other[160];
	const char *o;

	herd__fp_format(&comm->op->fp, mine, sizeof(mine));
	herd__fp_format(theirs, other, sizeof(other));
	o = strchr(other, ' ');     /* past "#seq " */
	return herd__error(HERD_EMISMATCH, "mismatched calls: %s is in %s (collective call %"
			   PRIu64 ") and %s %s collective call %" PRIu64 ", %s",
			   herd__comm_who(comm, comm->rank, me, sizeof(me)), mine, comm->op_cseq,
			   herd__comm_who(comm, peer, who, sizeof(who)), how, their_cseq,
			   o != NULL ? o + 1 : other);
}

/*
 * Whether peer is visibly in another call than this one: its board shows
 * another collective with this number, or one past it (it cannot be ahead
 * while this rank still waits for its data), or a message of its for some
 * other call waits in this rank's inbox (a direct call sends none).
 */
static herd_status check_peer(herd_comm *comm, int peer)
{
	const herd__fp *fp = &comm->op->fp;
	herd__board c;
	herd__wire_hdr h;
	herd__fp theirs;

	if (herd__shm_pending(comm, peer, &h)) {
		theirs = (herd__fp){ h.seq, h.kind, h.dtype, h.redop, h.root, h.count };
		return mismatch(comm, peer, &theirs, h.cseq, "sent a message for its");
	}
	if (!read_call(herd__shm_board(comm, peer), &c) || c.call_cseq < comm->op_cseq)
		return HERD_OK;
	if (c.call_cseq == comm->op_cseq && c.kind == fp->kind && c.dtype == fp->dtype &&
	    c.redop == fp->redop && c.root == fp->root && c.count == fp->count)
		return HERD_OK;
	theirs = (herd__fp){ 0, c.kind, c.dtype, c.redop, c.root, c.count };
	return mismatch(comm, peer, &theirs, c.call_cseq, "is in");
}

static int first_ready(const dwant *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (atomic_load_explicit(w[i].word, memory_order_acquire) >= w[i].value)
			return (int)i;
	return -1;
}

/* The slower looks at the peers while waiting for them: whether one is in
 * another call (check) or has left. */
static herd_status look_at_peers(dcall *c, const dwant *w, size_t n, bool check, int *which)
{
	herd_comm *comm = c->comm;

	for (size_t i = 0; i < n; i++) {
		if (check && check_peer(comm, w[i].peer) != HERD_OK) {
			/* The peer may have posted, finished this call and gone
			 * on since the look above: what it posts comes first. */
			if ((*which = first_ready(w, n)) >= 0)
				return HERD_OK;
			return HERD_EMISMATCH;
		}
		/* Likewise a peer that posted, finished and destroyed its
		 * communicator since: what it posted still counts. */
		if (atomic_load(&comm->peers[w[i].peer].left)) {
			if ((*which = first_ready(w, n)) >= 0)
				return HERD_OK;
			return herd__p2p_left_error(comm, w[i].peer);
		}
	}
	*which = -1;
	return HERD_OK;
}

/*
 * Waits until one of w[0..n) holds; returns its index in *which.  check:
 * look for a mismatched call of the peers meanwhile (only where a peer
 * cannot legitimately be past this call).
 */
static herd_status wait_any(dcall *c, const dwant *w, size_t n, bool check, int *which)
{
	herd_comm *comm = c->comm;
	unsigned int passes = 0;
	herd__wait wt;

	herd__wait_start(&wt, SPIN_NS, c->d->oversubscribed);
	herd__wait_bells(&wt, herd__shm_bell(comm, comm->rank),
			 n > 0 ? herd__shm_bell(comm, w[0].peer) : NULL);
	for (;;) {
		uint32_t seen;
		bool sleep;
		int ms;

		if ((*which = first_ready(w, n)) >= 0)
			return HERD_OK;
		if (atomic_load_explicit(&comm->status, memory_order_relaxed) != HERD_OK)
			return herd__comm_broken(comm);
		sleep = herd__wait_idle(&wt);
		/* The slower looks every 64 spins or 4 yields (on every yield
		 * they took 4 ranks on 2 cores from 3.5-5.5 to 8-10 us at 8 B),
		 * and before every sleep. */
		if (++passes % (wt.crowded || wt.yields > 0 ? 4 : 64) != 0 && !sleep)
			continue;
		HERD_CHECK(look_at_peers(c, w, n, check, which));
		if (*which >= 0)
			return HERD_OK;
		if (!sleep)
			continue;
		if (herd__net_now_ms() >= comm->op_deadline) {
			int *peers = c->d->peers;

			for (size_t i = 0; i < n; i++)
				peers[i] = w[i].peer;
			return herd__comm_timeout(comm, peers, n);
		}
		/* Announce the sleep, look once more, sleep until a peer rings. */
		seen = herd__shm_arm(comm);
		if (first_ready(w, n) < 0 && atomic_load(&comm->status) == HERD_OK) {
			ms = herd__net_remaining_ms(comm->op_deadline);
			herd__shm_sleep(comm, seen, ms < SLEEP_MAX_MS ? ms + 1 : SLEEP_MAX_MS);
		}
		herd__shm_disarm(comm);
	}
}

static herd_status wait_word(dcall *c, int peer, const _Atomic uint64_t *word, uint64_t value,
			     bool check)
{
	dwant w = { word, value, peer };
	int which;

	if (atomic_load_explicit(word, memory_order_acquire) >= value)
		return HERD_OK;
	return wait_any(c, &w, 1, check, &which);
}

/* Waits until peer has finished reading this rank's memory for call t. */
static herd_status wait_done(dcall *c, int peer, uint64_t t)
{
	_Atomic uint64_t *w;

	if (c->d->known_done[peer] >= t)
		return HERD_OK;
	w = &herd__shm_board(c->comm, peer)->done;
	HERD_CHECK(wait_word(c, peer, w, t, false));
	c->d->known_done[peer] = atomic_load_explicit(w, memory_order_relaxed);
	return HERD_OK;
}

/* A peer that posted for call t has finished every call before it. */
static void note_posted(dcall *c, int peer, uint64_t t)
{
	if (c->d->known_done[peer] < t - 1)
		c->d->known_done[peer] = t - 1;
}

/* Stores v into *word (release) on this rank's board and wakes the peers
 * that sleep: they may wait for it. */
static void publish(dcall *c, _Atomic uint64_t *word, uint64_t v)
{
	atomic_store_explicit(word, v, memory_order_release);
	for (int j = 0; j < c->p; j++)
		if (j != c->r)
			herd__shm_wake(c->comm, j);
}

/* ---- reading and writing a peer ------------------------------------------ */

/*
 * Copies len bytes between local and addr in peer's memory: from the peer
 * (write false) or to it.  A peer that exited leaves ESRCH: the monitor,
 * which watches its pidfd and control connection, says a moment later
 * whether it died or failed, and that is the error to give.
 */
static herd_status cma_copy(dcall *c, int peer, void *local, uint64_t addr, size_t len,
			    bool write)
{
	herd_comm *comm = c->comm;
	size_t done = 0;

	while (done < len) {
		struct iovec l = { (uint8_t *)local + done, len - done };
		struct iovec r = { (void *)(uintptr_t)(addr + done), len - done };
		pid_t pid = (pid_t)comm->peers[peer].pid;
		ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
				  : process_vm_readv(pid, &l, 1, &r, 1, 0);
		char who[HERD__COMM_HOST_MAX + 32];
		int err = errno;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && err == EINTR)
			continue;
		if (n < 0 && err == ESRCH) {
			int64_t until = herd__net_now_ms() + SETTLE_MS;

			while (atomic_load(&comm->status) == HERD_OK &&
			       !atomic_load(&comm->peers[peer].left) && herd__net_now_ms() < until) {
				struct timespec ts = { 0, 1000000 };

				nanosleep(&ts, NULL);
			}
			if (atomic_load(&comm->status) != HERD_OK)
				return herd__comm_broken(comm);
			if (atomic_load(&comm->peers[peer].left))
				return herd__p2p_left_error(comm, peer);
			return herd__error(HERD_EPEER, "%s #%" PRIu64 ": %s is gone (pid %d exited) "
					   "while this rank %s its buffer",
					   herd__op_name((herd__op_kind)comm->op->fp.kind),
					   comm->op->fp.seq, herd__comm_who(comm, peer, who, sizeof(who)),
					   (int)comm->peers[peer].pid, write ? "wrote to" : "read");
		}
		return herd__error_errno(HERD_ESYS, n < 0 ? err : EFAULT, "%s #%" PRIu64 ": cannot "
					 "%s %zu bytes at %#" PRIx64 " of %s", herd__op_name(
					 (herd__op_kind)comm->op->fp.kind), comm->op->fp.seq,
					 write ? "write" : "read", len - done, addr + done,
					 herd__comm_who(comm, peer, who, sizeof(who)));
	}
	return HERD_OK;
}

/* ---- large allreduce ------------------------------------------------------ */

/* The chunks of rank j's slice (its rounds), and where the slice is. */
static size_t rounds_of(const dcall *c, int j, size_t *soff, size_t *slen)
{
	size_t step = herd__direct_chunk_bytes / herd_dtype_size(c->wdt);

	herd__split_even(c->count, c->p, j, soff, slen);
	return (*slen + step - 1) / step;
}

/* Chunk t of rank j's slice: its element offset and count; false when the
 * slice has fewer chunks. */
static bool chunk_of(const dcall *c, int j, size_t t, size_t *off, size_t *n)
{
	size_t soff, slen, step = herd__direct_chunk_bytes / herd_dtype_size(c->wdt);

	if (t >= rounds_of(c, j, &soff, &slen))
		return false;
	*off = soff + t * step;
	*n = slen - t * step < step ? slen - t * step : step;
	return true;
}

static uint8_t *stage_slot(const dcall *c, int j, size_t t)
{
	return herd__shm_stage(c->comm, j) + (t % HERD__STAGE_SLOTS) * (size_t)HERD__STAGE_BYTES;
}

/* Into this rank's receive buffer: with streaming stores when the call is
 * out of place and large (c->stream), so that the result does not push the
 * operands out of the cache on its way to memory. */
static void copy_out(const dcall *c, size_t off, const uint8_t *src, size_t n)
{
	if (c->stream)
		herd__copy_stream(c->out + off * c->es, src, n * c->es);
	else
		memcpy(c->out + off * c->es, src, n * c->es);
}

/*
 * Scratch buffer `which` (of three), placed at `apart` bytes past dst
 * within a page: a loop that stores into one buffer and loads from another
 * at the same offset in its page stalls on every such pair (4K aliasing:
 * the load is taken to depend on the store), which halved an in-place
 * allreduce of page-aligned buffers (bench/RESULTS.md).  Each buffer has
 * a page of slack for it.
 */
static uint8_t *scratch_near(dcall *c, int which, const void *dst, size_t apart)
{
	uintptr_t base = ((uintptr_t)c->d->scratch + (size_t)which * SCRATCH_EACH + 63) &
			 ~(uintptr_t)63;
	uintptr_t want = ((uintptr_t)dst + apart) & 4095 & ~(uintptr_t)63;

	return (uint8_t *)(base + ((want - (base & 4095)) & 4095));
}

/*
 * Reduces the n elements at element offset off over all ranks into dst
 * (narrow-type SUM/PROD/AVG add in float32 and round once), own
 * operand first and the peers' after it in rank order from this rank, so
 * that every element has one reducer and every rank gets its bits; dst
 * holds the running result (in place it starts as the own operand).  The
 * peers' chunks come through the scratch, but for the first peer's when dst
 * is not this rank's own operand (out of place): the kernel copies that one
 * into dst itself, which is then reduced where it lies: one pass over dst
 * less, and the kernel's copy (rep movsb) may fill whole lines without
 * reading them first, where the reduction's stores read each line they
 * write (bench/RESULTS.md, "The direct path's thresholds").
 */
static herd_status reduce_chunk_into(dcall *c, size_t off, size_t n, uint8_t *dst)
{
	uint8_t *bounce = scratch_near(c, 0, dst, 2048);
	const uint8_t *own = c->in + off * c->es;
	float *acc = (float *)scratch_near(c, 1, dst, 1024);
	float *tmp = (float *)scratch_near(c, 2, dst, 3072);

	if (c->widen)
		herd__narrow_to_float(acc, own, n, c->dtype);
	for (int k = 1; k < c->p; k++) {
		int j = (c->r + k) % c->p;
		uint64_t at = c->d->peer_in[j] + off * c->es;

		if (k == 1 && !c->widen && dst != own) {
			HERD_CHECK(cma_copy(c, j, dst, at, n * c->es, false));
			herd__reduce(dst, own, dst, n, c->dtype, c->eop);
			continue;
		}
		HERD_CHECK(cma_copy(c, j, bounce, at, n * c->es, false));
		if (c->widen) {
			herd__narrow_to_float(tmp, bounce, n, c->dtype);
			herd__reduce(acc, acc, tmp, n, HERD_FLOAT32, c->eop);
		} else {
			herd__reduce(dst, dst, bounce, n, c->dtype, c->eop);
		}
	}
	if (c->widen) {
		if (c->op == HERD_AVG)
			herd__reduce_scale(acc, n, HERD_FLOAT32, c->p);
		herd__float_to_narrow(dst, acc, n, c->dtype);
	} else if (c->op == HERD_AVG) {
		herd__reduce_scale(dst, n, c->dtype, c->p);
	}
	return HERD_OK;
}

/*
 * Round t of this rank: reduces chunk t of its slice into its staging slot
 * t % HERD__STAGE_SLOTS, copies it into its own receive buffer, and says
 * so.
 */
static herd_status stage_chunk(dcall *c, size_t t)
{
	uint8_t *slot = stage_slot(c, c->r, t);
	size_t off = 0, n = 0;

	chunk_of(c, c->r, t, &off, &n);
	HERD_CHECK(reduce_chunk_into(c, off, n, slot));
	copy_out(c, off, slot, n);
	publish(c, &herd__shm_board(c->comm, c->r)->staged, t + 1);
	return HERD_OK;
}

/* Whether every peer has copied out the round that last used the slot of
 * round t; if not, what to wait for into w[*n]. */
static bool slot_free(dcall *c, size_t t, dwant *w, size_t *n)
{
	bool free_ = true;

	if (t < HERD__STAGE_SLOTS)
		return true;
	for (int k = 1; k < c->p; k++) {
		int j = (c->r + k) % c->p;
		const _Atomic uint64_t *word = &herd__shm_board(c->comm, j)->taken;

		if (atomic_load_explicit(word, memory_order_acquire) < t - HERD__STAGE_SLOTS + 1) {
			w[(*n)++] = (dwant){ word, t - HERD__STAGE_SLOTS + 1, j };
			free_ = false;
		}
	}
	return free_;
}

/*
 * Steps 2 and 3: this rank stages its rounds and copies out every peer's,
 * whichever it can, waiting only when it can do neither.  It stages round
 * t once every peer has taken round t - HERD__STAGE_SLOTS (so the slot is
 * free); it takes round t from every peer that has one, then says so.
 */
static herd_status run_rounds(dcall *c)
{
	herd__board *own = herd__shm_board(c->comm, c->r);
	size_t soff, slen, staged = 0, taken = 0;
	/* slice 0 is the longest (herd__split_even) */
	size_t mine = rounds_of(c, c->r, &soff, &slen), all = rounds_of(c, 0, &soff, &slen);
	bool *got = c->d->got;
	dwant *w = c->d->wants;

	memset(got, 0, (size_t)c->p * sizeof(*got));
	while (staged < mine || taken < all) {
		bool moved = false, complete = true;
		size_t nw = 0;

		if (atomic_load_explicit(&c->comm->status, memory_order_relaxed) != HERD_OK)
			return herd__comm_broken(c->comm);
		if (staged < mine && slot_free(c, staged, w, &nw)) {
			HERD_CHECK(stage_chunk(c, staged++));
			moved = true;
			nw = 0;
		}
		for (int k = 1; k < c->p && taken < all; k++) {
			int j = (c->r + k) % c->p;
			const _Atomic uint64_t *word = &herd__shm_board(c->comm, j)->staged;
			size_t off, n;

			if (got[j] || !chunk_of(c, j, taken, &off, &n))
				continue;
			if (atomic_load_explicit(word, memory_order_acquire) > taken) {
				copy_out(c, off, stage_slot(c, j, taken), n);
				got[j] = true;
				moved = true;
			} else {
				w[nw++] = (dwant){ word, taken + 1, j };
				complete = false;
			}
		}
		if (taken < all && complete) {
			publish(c, &own->taken, ++taken);
			memset(got, 0, (size_t)c->p * sizeof(*got));
			moved = true;
		}
		if (!moved) {
			int which;

			HERD_CHECK(wait_any(c, w, nw, false, &which));
		}
	}
	return HERD_OK;
}

/* The push: reduces n elements at element offset off into this rank's
 * receive buffer, then writes them into every peer's. */
static herd_status reduce_chunk(dcall *c, size_t off, size_t n)
{
	uint8_t *dst = c->out + off * c->es;

	HERD_CHECK(reduce_chunk_into(c, off, n, dst));
	for (int k = 1; k < c->p; k++) {
		int j = (c->r + k) % c->p;

		HERD_CHECK(cma_copy(c, j, dst, c->d->peer_out[j] + off * c->es, n * c->es, true));
	}
	return HERD_OK;
}

/* Step 2: this rank's slice, chunk by chunk. */
static herd_status reduce_own(dcall *c)
{
	size_t off, len, step = herd__direct_chunk_bytes / herd_dtype_size(c->wdt);

	herd__split_even(c->count, c->p, c->r, &off, &len);
	for (size_t i = 0; i < len; i += step) {
		if (atomic_load_explicit(&c->comm->status, memory_order_relaxed) != HERD_OK)
			return herd__comm_broken(c->comm);
		HERD_CHECK(reduce_chunk(c, off + i, len - i < step ? len - i : step));
	}
	return HERD_OK;
}

static herd_status dcall_init(dcall *c, herd_comm *comm, const void *in, void *out,
			      size_t count, herd_dtype dtype, herd_redop op)
{
	memset(c, 0, sizeof(*c));
	c->comm = comm;
	c->d = comm->coll_state;
	c->p = comm->size;
	c->r = comm->rank;
	c->s = comm->op_cseq;
	c->dtype = dtype;
	c->op = op;
	c->eop = op == HERD_AVG ? HERD_SUM : op;
	c->widen = herd__dtype_widens(dtype, op);
	c->wdt = c->widen ? HERD_FLOAT32 : dtype;
	c->es = herd_dtype_size(dtype);
	c->count = count;
	c->in = in;
	c->out = out;
	if (comm->op == NULL || c->d == NULL)
		return herd__error(HERD_EINTERNAL, "direct allreduce outside a call, or on a "
				   "communicator without direct collectives");
	return HERD_OK;
}

static herd_status direct_allreduce(herd_comm *comm, const void *in, void *out, size_t count,
				    herd_dtype dtype, herd_redop op)
{
	herd__board *own;
	herd_status st;
	bool all_in_place = in == out, push;
	dcall c;

	HERD_CHECK(dcall_init(&c, comm, in, out, count, dtype, op));
	c.stream = in != out && count * c.es >= HERD__DIRECT_STREAM;
	if (c.d->scratch == NULL)
		HERD_CHECK(herd__calloc(&c.d->scratch, 3, SCRATCH_EACH,
					"the scratch of direct collectives"));

	/* 1. post (the fingerprint went up as the call began); the staging
	 * counts start over before the buffers go up: no peer reads them
	 * before it sees this call's buffers, and every peer has finished the
	 * last call (it said done). */
	own = herd__shm_board(comm, c.r);
	atomic_store_explicit(&own->staged, 0, memory_order_relaxed);
	atomic_store_explicit(&own->taken, 0, memory_order_relaxed);
	own->sendbuf = (uint64_t)(uintptr_t)in;
	own->recvbuf = (uint64_t)(uintptr_t)out;
	publish(&c, &own->addr_cseq, c.s);
	for (int k = 1; k < c.p; k++) {
		int j = (c.r + k) % c.p;
		herd__board *b = herd__shm_board(comm, j);

		HERD_CHECK(wait_word(&c, j, &b->addr_cseq, c.s, true));
		/* Same call, same count, or reading its buffers could overrun them. */
		HERD_CHECK(check_peer(comm, j));
		if (atomic_load_explicit(&b->addr_cseq, memory_order_acquire) != c.s)
			return herd__error(HERD_EMISMATCH, "mismatched calls: rank %d posted the "
					   "buffers of collective call %" PRIu64 " where rank %d is in "
					   "call %" PRIu64, j, atomic_load(&b->addr_cseq), c.r, c.s);
		c.d->peer_in[j] = b->sendbuf;
		c.d->peer_out[j] = b->recvbuf;
		all_in_place = all_in_place && b->sendbuf == b->recvbuf;
		note_posted(&c, j, c.s);
	}
	/* 2. reduce and push, or stage and copy out; 3. done */
	push = all_in_place || count * c.es <= herd__direct_push_max / (size_t)(c.p - 1);
	st = push ? reduce_own(&c) : run_rounds(&c);
	herd__stream_fence();
	HERD_CHECK(st);
	publish(&c, &own->done, c.s);
	for (int k = 1; k < c.p; k++)
		HERD_CHECK(wait_done(&c, (c.r + k) % c.p, c.s));
	return HERD_OK;
}

/* ---- small allreduce ------------------------------------------------------ */

static herd_status direct_allreduce_small(herd_comm *comm, const void *in, void *out,
					  size_t count, herd_dtype dtype, herd_redop op)
{
	/* float32 copies of up to HERD__BOARD_SMALL narrow elements (an 8-bit
	 * float is one byte) */
	_Alignas(64) float wide[2][HERD__BOARD_SMALL];
	herd__board *own;
	herd__board_slot *mine;
	size_t bytes = count * herd_dtype_size(dtype);
	unsigned int sl;
	dcall c;

	HERD_CHECK(dcall_init(&c, comm, in, out, count, dtype, op));
	if (bytes > HERD__BOARD_SMALL)
		return herd__error(HERD_EINTERNAL, "small direct allreduce of %zu bytes (at most "
				   "%u)", bytes, HERD__BOARD_SMALL);
	sl = (unsigned int)(c.s & 1);
	own = herd__shm_board(comm, c.r);
	mine = &own->slot[sl];
	/* The peers must be done with what this slot held last. */
	for (int j = 0; j < c.p; j++)
		if (j != c.r)
			HERD_CHECK(wait_done(&c, j, c.d->slot_cseq[sl]));
	memcpy(mine->data, in, bytes);
	mine->len = (uint32_t)bytes;
	mine->count = comm->op->fp.count;
	mine->kind = comm->op->fp.kind;
	mine->dtype = comm->op->fp.dtype;
	mine->redop = comm->op->fp.redop;
	c.d->slot_cseq[sl] = c.s;
	publish(&c, &mine->cseq, c.s);
	for (int j = 0; j < c.p; j++) {
		const herd__board_slot *t;

		if (j == c.r)
			continue;
		t = &herd__shm_board(comm, j)->slot[sl];
		HERD_CHECK(wait_word(&c, j, &t->cseq, c.s, true));
		if (atomic_load_explicit(&t->cseq, memory_order_acquire) != c.s ||
		    t->kind != mine->kind || t->dtype != mine->dtype || t->redop != mine->redop ||
		    t->count != mine->count || t->len != mine->len) {
			herd__fp theirs = { comm->op->fp.seq, t->kind, t->dtype, t->redop, -1,
					    t->count };

			HERD_CHECK(check_peer(comm, j));
			return mismatch(comm, j, &theirs, atomic_load(&t->cseq), "put data for");
		}
		note_posted(&c, j, c.s);
	}
	/* out = slot 0 op slot 1 op ... in rank order. */
	if (c.widen) {
		herd__narrow_to_float(wide[0], herd__shm_board(comm, 0)->slot[sl].data,
				    count, dtype);
		for (int j = 1; j < c.p; j++) {
			herd__narrow_to_float(wide[1], herd__shm_board(comm, j)
					    ->slot[sl].data, count, dtype);
			herd__reduce(wide[0], wide[0], wide[1], count, HERD_FLOAT32, c.eop);
		}
		if (op == HERD_AVG)
			herd__reduce_scale(wide[0], count, HERD_FLOAT32, c.p);
		herd__float_to_narrow(out, wide[0], count, dtype);
	} else {
		herd__reduce(out, herd__shm_board(comm, 0)->slot[sl].data,
			     herd__shm_board(comm, 1)->slot[sl].data, count, dtype, c.eop);
		for (int j = 2; j < c.p; j++)
			herd__reduce(out, out, herd__shm_board(comm, j)->slot[sl].data, count, dtype,
				     c.eop);
		if (op == HERD_AVG)
			herd__reduce_scale(out, count, dtype, c.p);
	}
	/* No wake-up: a peer waiting for this word waits to reuse a slot, and
	 * cannot finish its call before this rank's next post, which rings. */
	atomic_store_explicit(&own->done, c.s, memory_order_release);
	return HERD_OK;
}

/* ---- the collective transport --------------------------------------------- */

static herd_status run_small(herd_comm *comm, const herd__op *op)
{
	return direct_allreduce_small(comm, op->sendbuf, op->recvbuf, op->count,
				      (herd_dtype)op->fp.dtype, (herd_redop)op->fp.redop);
}

static herd_status run_large(herd_comm *comm, const herd__op *op)
{
	return direct_allreduce(comm, op->sendbuf, op->recvbuf, op->count,
				(herd_dtype)op->fp.dtype, (herd_redop)op->fp.redop);
}

static const herd__coll_ops direct_ops = {
	.name = "shm-direct",
	.enter = direct_enter,
	.allreduce_small = run_small,
	.small_max = HERD__BOARD_SMALL,
	.allreduce = run_large,
	.free = direct_free,
};
