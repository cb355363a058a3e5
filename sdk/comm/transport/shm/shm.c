/*
 * sdk/comm/transport/shm/shm.c - the shared-memory transport between the ranks of one
 * host, and its entry of the transport table (herd__shm_transport,
 * transport.h): it joins the pairs of one host where neither rank asked
 * for TCP, and its futex is the communicator's doorbell.
 *
 * Each rank creates one POSIX shared memory segment, its inbox,
 * "/herd.<pid>.<communicator id>.<rank>": a header page, then one ring per
 * local peer (sender).  A ring is single-producer single-consumer: NSLOTS
 * slots of up to SLOT_MAX bytes (see below), a head (slots published, written by the
 * sender) and a tail (slots released, written by the receiver), C11
 * atomics with release/acquire.  A message starts in a fresh slot with its
 * header (padded to HDR_ROOM bytes) and continues over as many slots as it
 * needs; the receiver copies or reduces straight out of the slot into its
 * destination (herd__rx_deliver), then releases the slot.  Slot payloads
 * are multiples of 64 bytes, so reductions always see whole elements.
 *
 * Waiting: the header holds the rank's doorbell, a futex word and its
 * `sleeping` flag (herd__bell, sdk/base/wait.h).  A rank with nothing to
 * do spins, yields, then (p2p.c, direct.c, as wait.h says) raises the
 * flag, checks its links once more, and sleeps on the doorbell for at most
 * 100 ms.  A sender that publishes a slot, or a receiver that frees one,
 * rings the other rank's doorbell (increment + FUTEX_WAKE) only when that
 * rank sleeps; the flag and the ring positions are ordered with seq_cst
 * fences (Dekker), so no wake-up is lost and a wait that never sleeps
 * costs no system call.  Ranks that share their CPUs with each other or
 * with other work therefore sleep instead of spinning each other out of
 * the CPU.
 *
 * The header pages also hold the rank's board, where the direct
 * collectives (direct.c) publish their calls; after the rings come
 * HERD__STAGE_SLOTS staging slots of HERD__STAGE_BYTES, where they put
 * the results that the peers copy out.  At attach each rank probes whether
 * it can read every local peer's memory with process_vm_readv (cma_ok),
 * which those collectives need.  The header also holds the owner's CPU
 * affinity: the ranks of the host count as outnumbering its CPUs only
 * when they outnumber the union of their affinities (group_cpus).
 *
 * Segment names vanish as soon as every local peer has mapped them (a
 * MAPPED frame on the control connection), so a crash after init leaves
 * nothing in /dev/shm; what a rank killed during init left there is
 * removed by the next communicator created on the host (sweep_stale).
 * Peer deaths are noticed by the monitor (control connection, pidfd),
 * which rings the doorbell of the rank it breaks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "comm/transport/shm/shm.h"
#include "wait.h"

#define SHM_MAGIC 0x316d687364726568ull   /* "herdshm1" */
#define SHM_VERSION 6
/* Ring geometry: NSLOTS slots of SLOT_MAX bytes (4 MiB per ring) while an
 * inbox stays within INBOX_BUDGET; with many local peers the slots shrink
 * (down to SLOT_MIN) so that the memory reserved per rank stays bounded.
 * Measured on 2 cores, 2 ranks, 64 MiB each way: 8 x 64 KiB to 8 x 2 MiB
 * (and 4 to 64 slots) all land at 3.5-4.4 GB/s per direction, bound by the
 * two copies; 8 x 512 KiB is kept for headroom on bigger machines. */
#define NSLOTS 8u
#define SLOT_MAX (512u * 1024u)
#define SLOT_MIN (64u * 1024u)
#define INBOX_BUDGET ((size_t)32 << 20)
#define PAGE 4096u
#define HDR_ROOM 64u
/* The inbox header's pages: the header, with the board's small slots. */
#define HDR_BYTES ((sizeof(inbox_hdr) + PAGE - 1) / PAGE * PAGE)
/* The CPUs an inbox header can name: 1024, as a cpu_set_t does. */
#define CPU_WORDS 16

typedef struct inbox_hdr {
	_Atomic uint64_t magic;            /* set last, with release */
	uint32_t version, nrings, nslots, slot_size;
	int32_t owner_rank, owner_pid;
	uint64_t owner_addr;               /* where the owner mapped this page */
	uint64_t owner_pidns;              /* inode of the owner's pid namespace */
	uint64_t stage_off;                /* where the staging slots start */
	_Atomic uint32_t cma_ok;           /* attach: 1 = the owner reads every peer */
	uint64_t cpus[CPU_WORDS];          /* the owner's CPU affinity, a bit per CPU */
	alignas(64) herd__bell bell;       /* the doorbell (wait.h) */
	alignas(64) herd__board board;     /* direct.c */
} inbox_hdr;

typedef struct ring {
	alignas(64) _Atomic uint64_t head;
	alignas(64) _Atomic uint64_t tail;
	alignas(64) uint32_t len[NSLOTS];  /* bytes in each slot, set before head moves */
} ring;

_Static_assert(sizeof(ring) <= PAGE, "a ring's header fits a page");
_Static_assert(sizeof(herd__wire_hdr) <= HDR_ROOM, "a message header fits its room");

struct herd__shm {
	char name[96];           /* this rank's segment */
	bool linked;             /* its name still exists */
	uint8_t *own;
	size_t own_size;
	uint8_t **maps;          /* [size]: the inboxes of the local peers */
	size_t *map_size;
	int *lpos;               /* [size]: position among the ranks sharing memory, or -1 */
	int ngroup;
	bool cma_all;            /* every rank of the group reads every other's memory */
};

typedef struct shm_link {
	herd__link base;
	ring *tx;                /* in the peer's inbox: this rank writes */
	uint8_t *tx_data;
	uint32_t tx_nslots, tx_slot;
	ring *rx;                /* in this rank's inbox: the peer writes */
	uint8_t *rx_data;
	uint64_t tx_head, rx_tail;
	inbox_hdr *peer_hdr;
} shm_link;

/* Wakes the owner of h if it sleeps.  The bell's fence orders the
 * caller's head/tail store before its look at the owner's flag. */
static void ring_doorbell(inbox_hdr *h)
{
	herd__bell_ring(&h->bell);
}

static inbox_hdr *own_hdr(const herd_comm *comm)
{
	return (inbox_hdr *)comm->shm->own;
}

/* Whether this transport joins the pair (this rank, peer). */
static bool shm_pair(const herd_comm *comm, int peer)
{
	return comm->peers[peer].via == &herd__shm_transport;
}

uint32_t herd__shm_arm(herd_comm *comm)
{
	return herd__bell_arm(&own_hdr(comm)->bell);
}

void herd__shm_sleep(herd_comm *comm, uint32_t seen, int timeout_ms)
{
	herd__bell_sleep(&own_hdr(comm)->bell, seen, timeout_ms);
}

void herd__shm_disarm(herd_comm *comm)
{
	herd__bell_disarm(&own_hdr(comm)->bell);
}

/* Where this process maps the segment of rank `rank`, or NULL. */
static uint8_t *segment_of(const herd_comm *comm, int rank)
{
	const herd__shm *s = comm->shm;

	if (s == NULL)
		return NULL;
	return rank == comm->rank ? s->own : s->maps[rank];
}

herd__board *herd__shm_board(const herd_comm *comm, int rank)
{
	uint8_t *m = segment_of(comm, rank);

	return m != NULL ? &((inbox_hdr *)m)->board : NULL;
}

uint8_t *herd__shm_stage(const herd_comm *comm, int rank)
{
	uint8_t *m = segment_of(comm, rank);

	return m != NULL ? m + ((inbox_hdr *)m)->stage_off : NULL;
}

herd__bell *herd__shm_bell(const herd_comm *comm, int rank)
{
	uint8_t *m = segment_of(comm, rank);

	return m != NULL ? &((inbox_hdr *)m)->bell : NULL;
}

void herd__shm_wake(herd_comm *comm, int rank)
{
	if (comm->shm != NULL && comm->shm->maps[rank] != NULL)
		ring_doorbell((inbox_hdr *)comm->shm->maps[rank]);
}

bool herd__shm_pending(const herd_comm *comm, int peer, herd__wire_hdr *hdr)
{
	const shm_link *s = (const shm_link *)comm->peers[peer].link;
	const inbox_hdr *own = own_hdr(comm);
	uint32_t idx;

	if (s == NULL || !shm_pair(comm, peer) ||
	    atomic_load_explicit(&s->rx->head, memory_order_acquire) == s->rx_tail)
		return false;
	idx = (uint32_t)(s->rx_tail % own->nslots);
	if (s->rx->len[idx] < HDR_ROOM)
		return false;
	memcpy(hdr, s->rx_data + (size_t)idx * own->slot_size, sizeof(*hdr));
	return true;
}

bool herd__shm_cma_all(const herd_comm *comm)
{
	return comm->shm != NULL && comm->shm->cma_all;
}

/* The doorbell's ring: wakes this rank's own sleeper. */
static void shm_ring_self(herd_comm *comm)
{
	inbox_hdr *h;

	if (comm->shm == NULL || comm->shm->own == NULL)
		return;
	h = own_hdr(comm);
	herd__bell_wake(&h->bell);
}

/* ---- the link ------------------------------------------------------------- */

static herd_status shm_try_send(herd__link *link, herd__tx *tx, bool *progressed)
{
	shm_link *s = (shm_link *)link;
	const size_t hlen = sizeof(tx->hdr);

	while (!tx->done) {
		uint64_t tail = atomic_load_explicit(&s->tx->tail, memory_order_acquire);
		uint32_t idx;
		uint8_t *slot;
		size_t room = s->tx_slot, used = 0, chunk, from;

		if (s->tx_head - tail >= s->tx_nslots)
			break;
		idx = (uint32_t)(s->tx_head % s->tx_nslots);
		slot = s->tx_data + (size_t)idx * s->tx_slot;
		if (tx->off == 0) {
			memcpy(slot, &tx->hdr, hlen);
			used = HDR_ROOM;
			tx->off = hlen;
		}
		from = tx->off - hlen;
		chunk = tx->len - from < room - used ? tx->len - from : room - used;
		if (chunk > 0)
			memcpy(slot + used, tx->buf + from, chunk);
		s->tx->len[idx] = (uint32_t)(used + chunk);
		atomic_store_explicit(&s->tx->head, ++s->tx_head, memory_order_release);
		tx->off += chunk;
		tx->done = tx->off == hlen + tx->len;
		*progressed = true;
		ring_doorbell(s->peer_hdr);
	}
	return HERD_OK;
}

static herd_status shm_try_recv(herd__link *link, herd__rx *rx, bool *progressed)
{
	shm_link *s = (shm_link *)link;
	herd_comm *comm = link->comm;
	inbox_hdr *own = own_hdr(comm);

	while (!rx->done) {
		uint64_t head = atomic_load_explicit(&s->rx->head, memory_order_acquire);
		uint32_t idx;
		const uint8_t *p;
		size_t n;

		if (head == s->rx_tail)
			break;
		idx = (uint32_t)(s->rx_tail % own->nslots);
		p = s->rx_data + (size_t)idx * own->slot_size;
		n = s->rx->len[idx];
		if (n > own->slot_size)
			return herd__error(HERD_EFORMAT, "rank %d wrote a slot of %zu bytes into a "
					   "ring of %u-byte slots", link->peer, n, own->slot_size);
		if (!rx->hdr_ok) {
			if (n < HDR_ROOM)
				return herd__error(HERD_EFORMAT, "rank %d sent a message without a "
						   "header", link->peer);
			memcpy(&rx->hdr, p, sizeof(rx->hdr));
			rx->hdr_got = sizeof(rx->hdr);
			HERD_CHECK(rx->check(rx, rx->ctx));
			p += HDR_ROOM;
			n -= HDR_ROOM;
		}
		if (n > rx->len - rx->off)
			return herd__error(HERD_EFORMAT, "rank %d sent %zu bytes more than its "
					   "message header announced", link->peer,
					   n - (rx->len - rx->off));
		herd__rx_deliver(rx, p, n);
		atomic_store_explicit(&s->rx->tail, ++s->rx_tail, memory_order_release);
		rx->done = rx->off == rx->len;
		*progressed = true;
		ring_doorbell(s->peer_hdr);
	}
	return HERD_OK;
}

static int shm_fd(const herd__link *link)
{
	(void)link;
	return -1;
}

static void shm_shutdown(herd__link *link)
{
	/* Nothing to unblock: waiters sleep on the doorbell, which abort rings. */
	(void)link;
}

static void shm_close(herd__link *link)
{
	free(link);
}

static const herd__link_ops shm_ops = {
	.name = "shm",
	.try_send = shm_try_send,
	.try_recv = shm_try_recv,
	.fd = shm_fd,
	.shutdown = shm_shutdown,
	.close = shm_close,
};

/* ---- segments ------------------------------------------------------------- */

static void segment_name(const herd_comm *comm, int rank, char *buf, size_t cap)
{
	snprintf(buf, cap, "/herd.%d.%s.%d", (int)comm->peers[rank].pid, comm->id_hex, rank);
}

static size_t ring_bytes(const inbox_hdr *h)
{
	return PAGE + (size_t)h->nslots * h->slot_size;
}

/* Ring of sender `from` in the inbox of `to`: senders in rank order. */
static ring *ring_at(const herd__shm *s, uint8_t *inbox, int to, int from)
{
	int idx = s->lpos[from] < s->lpos[to] ? s->lpos[from] : s->lpos[from] - 1;

	return (ring *)(inbox + HDR_BYTES + (size_t)idx * ring_bytes((const inbox_hdr *)inbox));
}

/* The slot size for an inbox of nrings rings. */
static uint32_t slot_size_for(int nrings)
{
	uint32_t slot = SLOT_MAX;

	while (slot > SLOT_MIN && (size_t)nrings * NSLOTS * slot > INBOX_BUDGET)
		slot /= 2;
	return slot;
}

/*
 * A segment whose creator is gone: named "herd.<pid>.<id>.<rank>", owned
 * by this user, its pid no longer exists, and either its header says it
 * was made in this pid namespace (a pid of another namespace may be alive
 * there), or its header was never finished and the file is older than any
 * init lasts.  Anything else is left alone.
 */
static bool segment_is_stale(const char *name, uint64_t pidns, time_t now)
{
	char path[300], *end;
	long pid;
	struct stat sb;
	inbox_hdr h;
	bool stale = false;
	int fd;

	if (strncmp(name, "herd.", 5) != 0)
		return false;
	errno = 0;
	pid = strtol(name + 5, &end, 10);
	if (errno != 0 || end == name + 5 || *end != '.' || pid <= 0 || pid > INT32_MAX)
		return false;
	if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
		return false;
	snprintf(path, sizeof(path), "/%s", name);
	fd = shm_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0)
		return false;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid()) {
		memset(&h, 0, sizeof(h));
		if (sb.st_size >= (off_t)sizeof(h) && pread(fd, &h, sizeof(h), 0) ==
							     (ssize_t)sizeof(h) &&
		    atomic_load(&h.magic) == SHM_MAGIC)
			stale = h.owner_pid == (int32_t)pid && pidns != 0 && h.owner_pidns == pidns;
		else
			stale = now - sb.st_mtime > 600;
	}
	close(fd);
	return stale;
}

static void sweep_stale(uint64_t pidns)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	time_t now = time(NULL);
	int seen = 0;

	if (d == NULL)
		return;
	/* Bounded: a /dev/shm with many thousands of entries is not searched
	 * to its end on every init. */
	while ((e = readdir(d)) != NULL && seen++ < 4096) {
		char path[300];

		if (!segment_is_stale(e->d_name, pidns, now))
			continue;
		snprintf(path, sizeof(path), "/%s", e->d_name);
		if (shm_unlink(path) == 0)
			herd__log_info("removed /dev/shm/%s, left by process %.*s that is gone",
				       e->d_name, (int)strcspn(e->d_name + 5, "."), e->d_name + 5);
	}
	closedir(d);
}

/* This process's CPU affinity as bits (none known: empty). */
static void affinity_words(uint64_t words[CPU_WORDS])
{
	cpu_set_t set;

	memset(words, 0, CPU_WORDS * sizeof(uint64_t));
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_WORDS * 64 && c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			words[c / 64] |= UINT64_C(1) << (c % 64);
}

/*
 * The CPUs that this rank and the ranks sharing its memory may run on
 * together: the union of their affinities.  Ranks that a launcher bound
 * to a core each (mpirun, srun --cpu-bind) see one CPU apiece, yet do not
 * outnumber the CPUs; the waits (sdk/base/wait.h) compare the ranks of
 * this kernel with this count.
 */
static int group_cpus(const herd_comm *comm)
{
	uint64_t all[CPU_WORDS] = { 0 };
	int n = 0;

	for (int j = 0; j < comm->size; j++) {
		const inbox_hdr *h = (const inbox_hdr *)segment_of(comm, j);

		if (h == NULL)
			continue;
		for (int w = 0; w < CPU_WORDS; w++)
			all[w] |= h->cpus[w];
	}
	for (int w = 0; w < CPU_WORDS; w++)
		n += __builtin_popcountll(all[w]);
	return n;
}

/* HERD__SETUP_CREATE: this rank's inbox (rings from its local peers),
 * before the mesh. */
static herd_status shm_create(herd_comm *comm, int64_t deadline)
{
	herd__shm *s;
	inbox_hdr *h;
	bool any = false;
	uint32_t slot;
	size_t stage_off;
	int fd, rc;

	(void)deadline;
	for (int j = 0; j < comm->size; j++)
		any = any || shm_pair(comm, j);
	if (!any)
		return HERD_OK;   /* no local peer: nothing to share */
	HERD_CHECK(herd__calloc(&s, 1, sizeof(*s), "shared memory state"));
	comm->shm = s;
	HERD_CHECK(herd__calloc(&s->maps, (size_t)comm->size, sizeof(*s->maps), "shm maps"));
	HERD_CHECK(herd__calloc(&s->map_size, (size_t)comm->size, sizeof(size_t), "shm maps"));
	HERD_CHECK(herd__calloc(&s->lpos, (size_t)comm->size, sizeof(int), "shm maps"));
	for (int j = 0; j < comm->size; j++)
		s->lpos[j] = j == comm->rank || shm_pair(comm, j) ? s->ngroup++ : -1;

	sweep_stale(comm->peers[comm->rank].pidns);
	segment_name(comm, comm->rank, s->name, sizeof(s->name));
	slot = slot_size_for(s->ngroup - 1);
	stage_off = HDR_BYTES + (size_t)(s->ngroup - 1) * (PAGE + (size_t)NSLOTS * slot);
	s->own_size = stage_off + (size_t)HERD__STAGE_SLOTS * HERD__STAGE_BYTES;
	fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot create shared memory segment "
					 "/dev/shm%s", s->name);
	s->linked = true;
	/* Reserve the memory now: a tmpfs that fills up later would kill the
	 * process with SIGBUS instead of failing here. */
	rc = ftruncate(fd, (off_t)s->own_size) != 0 ? errno
						     : posix_fallocate(fd, 0, (off_t)s->own_size);
	if (rc != 0) {
		struct statvfs vfs;
		unsigned long long avail = 0;

		close(fd);
		if (statvfs("/dev/shm", &vfs) == 0)
			avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
		return herd__error_errno(HERD_ENORESOURCE, rc, "cannot reserve %zu bytes of shared "
					 "memory for /dev/shm%s (%llu bytes free there; a container "
					 "may need a larger --shm-size, or set HERD_TRANSPORT=tcp)",
					 s->own_size, s->name, avail);
	}
	s->own = mmap(NULL, s->own_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rc = errno;
	close(fd);
	if (s->own == MAP_FAILED) {
		s->own = NULL;
		return herd__error_errno(HERD_ESYS, rc, "cannot map /dev/shm%s", s->name);
	}
	h = (inbox_hdr *)s->own;
	h->version = SHM_VERSION;
	h->nrings = (uint32_t)(s->ngroup - 1);
	h->nslots = NSLOTS;
	h->slot_size = slot;
	h->owner_rank = comm->rank;
	h->owner_pid = comm->peers[comm->rank].pid;
	h->owner_addr = (uint64_t)(uintptr_t)s->own;
	h->owner_pidns = comm->peers[comm->rank].pidns;
	h->stage_off = stage_off;
	affinity_words(h->cpus);
	atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
	return HERD_OK;
}

static herd_status map_peer(herd_comm *comm, int j)
{
	herd__shm *s = comm->shm;
	char name[96];
	struct stat sb;
	inbox_hdr *h;
	int fd, err;

	segment_name(comm, j, name, sizeof(name));
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot open the shared memory of rank "
					 "%d (host %s), /dev/shm%s", j, comm->peers[j].host, name);
	if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < HDR_BYTES) {
		close(fd);
		return herd__error(HERD_EFORMAT, "/dev/shm%s is too small", name);
	}
	s->map_size[j] = (size_t)sb.st_size;
	s->maps[j] = mmap(NULL, s->map_size[j], PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (s->maps[j] == MAP_FAILED) {
		s->maps[j] = NULL;
		return herd__error_errno(HERD_ESYS, err, "cannot map /dev/shm%s", name);
	}
	h = (inbox_hdr *)s->maps[j];
	if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_MAGIC ||
	    h->version != SHM_VERSION || h->nrings != (uint32_t)(s->ngroup - 1) ||
	    h->nslots == 0 || h->nslots > NSLOTS || h->slot_size < 4096 ||
	    h->slot_size % 64 != 0 ||
	    h->stage_off < HDR_BYTES + (size_t)h->nrings * ring_bytes(h) ||
	    h->stage_off % PAGE != 0 || h->stage_off > s->map_size[j] ||
	    s->map_size[j] - h->stage_off < (size_t)HERD__STAGE_SLOTS * HERD__STAGE_BYTES)
		return herd__error(HERD_EFORMAT, "/dev/shm%s of rank %d is not a herd inbox of "
				   "this version and shape", name, j);
	return HERD_OK;
}

/*
 * Whether process_vm_readv reads every local peer's memory: the magic of
 * its inbox, at the address where it mapped it.  It fails where the peers
 * are in another pid namespace, where a security module or seccomp forbids
 * it, or where a peer is not dumpable; the direct collectives are then off.
 */
static bool cma_probe(herd_comm *comm)
{
	for (int j = 0; j < comm->size; j++) {
		const inbox_hdr *ph;
		uint64_t magic = 0;
		struct iovec local = { &magic, sizeof(magic) }, remote;

		if (!shm_pair(comm, j))
			continue;
		if (!comm->peers[j].same_pidns)
			return false;
		ph = (const inbox_hdr *)comm->shm->maps[j];
		remote.iov_base = (void *)(uintptr_t)ph->owner_addr;
		remote.iov_len = sizeof(magic);
		if (process_vm_readv((pid_t)comm->peers[j].pid, &local, 1, &remote, 1, 0) !=
			    (ssize_t)sizeof(magic) || magic != SHM_MAGIC) {
			herd__log_debug("rank %d cannot read the memory of rank %d (pid %d): %s; "
					"single-copy collectives are off", comm->rank, j,
					(int)comm->peers[j].pid, strerror(errno));
			return false;
		}
	}
	return true;
}

/* HERD__SETUP_ATTACH: maps the peers' inboxes, makes the links, and
 * unlinks this rank's segment once every local peer has mapped it.  After
 * the mesh, whose control connections carry the MAPPED frames. */
static herd_status shm_attach(herd_comm *comm, int64_t deadline)
{
	herd__shm *s = comm->shm;

	if (s == NULL)
		return HERD_OK;
	for (int j = 0; j < comm->size; j++) {
		shm_link *l;
		inbox_hdr *ph;
		ring *tx;

		if (!shm_pair(comm, j))
			continue;
		HERD_CHECK(map_peer(comm, j));
		HERD_CHECK(herd__calloc(&l, 1, sizeof(*l), "a shared memory link"));
		ph = (inbox_hdr *)s->maps[j];
		tx = ring_at(s, s->maps[j], j, comm->rank);
		l->base.ops = &shm_ops;
		l->base.comm = comm;
		l->base.peer = j;
		l->tx = tx;
		l->tx_data = (uint8_t *)tx + PAGE;
		l->tx_nslots = ph->nslots;
		l->tx_slot = ph->slot_size;
		l->rx = ring_at(s, s->own, comm->rank, j);
		l->rx_data = (uint8_t *)l->rx + PAGE;
		l->peer_hdr = ph;
		comm->peers[j].link = &l->base;
	}
	/* Whether this rank can read each peer's memory, published before the
	 * MAPPED frames, after which each rank reads every peer's answer. */
	atomic_store(&own_hdr(comm)->cma_ok, cma_probe(comm) ? 1u : 0u);
	/* Every peer tells every other it has mapped; then names can go. */
	for (int j = 0; j < comm->size; j++)
		if (shm_pair(comm, j))
			HERD_CHECK(herd__ctl_send(comm, j, HERD__CTL_MAPPED, NULL, 0));
	for (int j = 0; j < comm->size; j++)
		if (shm_pair(comm, j))
			HERD_CHECK(herd__ctl_expect(comm, j, HERD__CTL_MAPPED, deadline));
	s->cma_all = atomic_load(&own_hdr(comm)->cma_ok) != 0;
	for (int j = 0; j < comm->size; j++)
		if (shm_pair(comm, j))
			s->cma_all = s->cma_all &&
				     atomic_load(&((inbox_hdr *)s->maps[j])->cma_ok) != 0;
	if (group_cpus(comm) > comm->ncpus)
		comm->ncpus = group_cpus(comm);
	if (shm_unlink(s->name) != 0)
		herd__log_warn("cannot remove /dev/shm%s: %s", s->name, strerror(errno));
	s->linked = false;
	return HERD_OK;
}

static void shm_free(herd_comm *comm)
{
	herd__shm *s = comm->shm;

	if (s == NULL)
		return;
	if (s->linked)
		shm_unlink(s->name);
	if (s->own != NULL)
		munmap(s->own, s->own_size);
	for (int j = 0; s->maps != NULL && j < comm->size; j++)
		if (s->maps[j] != NULL)
			munmap(s->maps[j], s->map_size[j]);
	free(s->maps);
	free(s->map_size);
	free(s->lpos);
	free(s);
	comm->shm = NULL;
}

/* ---- the transport ------------------------------------------------------ */

/* Same host (name, boot and /dev/shm), and neither rank asked for TCP. */
static bool shm_can_connect(const herd_comm *comm, int peer)
{
	const herd__peer *p = &comm->peers[peer];

	return p->same_host && p->transport == HERD__TRANSPORT_AUTO &&
	       comm->cfg.transport == HERD__TRANSPORT_AUTO;
}

static const herd__doorbell shm_bell = {
	.arm = herd__shm_arm,
	.sleep = herd__shm_sleep,
	.disarm = herd__shm_disarm,
	.ring = shm_ring_self,
	.of = herd__shm_bell,
};

const herd__transport herd__shm_transport = {
	.name = "shm",
	.can_connect = shm_can_connect,
	.setup = {
		[HERD__SETUP_CREATE] = shm_create,
		[HERD__SETUP_ATTACH] = shm_attach,
		[HERD__SETUP_COLL] = herd__shm_coll_init,
	},
	.bell = &shm_bell,
	.free = shm_free,
};
