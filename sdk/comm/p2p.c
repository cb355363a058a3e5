/*
 * sdk/comm/p2p.c - herd__p2p_exchange: any number of sends and receives,
 * to and from different peers, progressed together until all are done.
 *
 * Each message is a herd__wire_hdr and its payload on the ordered stream of
 * one direction of one pair; messages to (or from) the same peer in one
 * exchange go in array order, one after the other, while messages to
 * different peers all move at once.  Nothing blocks on one peer: every
 * pass calls try_send / try_recv on every active message, so a ring where
 * every rank sends first cannot deadlock.
 *
 * Receivers check the header against their own call (check_header): a
 * collective compares every field of the fingerprint and its collective
 * number, a point-to-point call the dtype and the byte count only.
 *
 * Waiting, when a pass moved nothing: spin for SPIN_NS (a reply a
 * microsecond away costs no system call; with more ranks on the host than
 * CPUs, yielding the CPU on every pass), then sleep on what can wake the
 * exchange: the doorbell futex when only shared-memory links are pending
 * (100 ms at most, so `left` peers and the deadline are looked at), poll on
 * the TCP sockets and the communicator's wake eventfd otherwise (1 ms
 * slices when shared memory is pending too).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "comm/core.h"
#include "net.h"

/* Measured on a 2-core VM: without the spin an 8-byte shared-memory
 * ping-pong took 38 us one way (a futex wake-up per hop), with 50 us of
 * spin 0.7-1 us; 7 ranks on 2 cores did ring steps in 10-20 us either way,
 * so the spin does not starve oversubscribed ranks. */
#define SPIN_NS 50000
/* With more ranks than CPUs and only TCP between them (HERD_TRANSPORT=tcp
 * on one host), a rank that goes to sleep in poll often leaves its CPU
 * idle while the rank it waits for sits on the other CPU's run queue, and
 * waking an idle virtual CPU is slow: yielding for longer keeps the CPU
 * busy.  4 ranks on 2 cores, 128 MiB allreduce over loopback TCP, medians
 * of 7: 50 us 221 ms, 200 us 210 ms, 500 us 216 ms. */
#define SPIN_NS_TCP_OVERSUBSCRIBED 200000
#define SLEEP_MAX_MS 100
#define POLL_MAX_MS 1000
#define MIXED_POLL_MS 1
/* Passes that moved bytes between two looks at the clock. */
#define DEADLINE_CHECK_EVERY 256
/* How long a failed data link waits for the control connection's word on
 * why (see settle). */
#define SETTLE_MS 200

typedef struct p2p_scratch {
	int *last;               /* [size]: last message seen per peer, -1 */
	int *fd_slot;            /* [size]: index in pfds per peer, -1 */
	struct pollfd *pfds;     /* [size + 1] */
	int *waiting;            /* [size] */
} p2p_scratch;

herd_status herd__p2p_init(herd_comm *comm)
{
	p2p_scratch *s;
	size_t n = (size_t)comm->size;

	HERD_CHECK(herd__calloc(&s, 1, sizeof(*s), "exchange scratch"));
	comm->p2p_scratch = s;
	HERD_CHECK(herd__calloc(&s->last, n, sizeof(int), "exchange scratch"));
	HERD_CHECK(herd__calloc(&s->fd_slot, n, sizeof(int), "exchange scratch"));
	HERD_CHECK(herd__calloc(&s->pfds, n + 1, sizeof(*s->pfds), "exchange scratch"));
	HERD_CHECK(herd__calloc(&s->waiting, n, sizeof(int), "exchange scratch"));
	for (size_t i = 0; i < n; i++)
		s->last[i] = s->fd_slot[i] = -1;
	return HERD_OK;
}

void herd__p2p_free(herd_comm *comm)
{
	p2p_scratch *s = comm->p2p_scratch;

	if (s == NULL)
		return;
	free(s->last);
	free(s->fd_slot);
	free(s->pfds);
	free(s->waiting);
	free(s);
	comm->p2p_scratch = NULL;
}

/* ---- the sink ------------------------------------------------------------- */

void herd__rx_deliver(herd__rx *rx, const void *data, size_t n)
{
	uint8_t *dst = (uint8_t *)rx->sink.dst + rx->off;

	if (n == 0)
		return;
	if (rx->sink.reduce_with == NULL) {
		if (dst != data)
			memmove(dst, data, n);
	} else {
		herd__reduce(dst, (const uint8_t *)rx->sink.reduce_with + rx->off, data,
			     n / rx->elsize, rx->sink.dtype, rx->sink.op);
	}
	rx->off += n;
}

/* ---- checks --------------------------------------------------------------- */

static herd_status check_header(herd__rx *rx, void *ctx)
{
	herd_comm *comm = ctx;
	const herd__op *op = comm->op;
	const herd__wire_hdr *h = &rx->hdr;
	char me[HERD__COMM_HOST_MAX + 32], peer[HERD__COMM_HOST_MAX + 32];
	char mine[160], theirs[160], extra[96] = "";
	herd__fp tfp;
	bool ok;

	herd__comm_who(comm, rx->peer, peer, sizeof(peer));
	if (h->magic != HERD__WIRE_MAGIC || h->version != HERD__WIRE_VERSION)
		return herd__error(HERD_EFORMAT, "%s sent something that is not a herd message "
				   "header (magic %#" PRIx32 ", version %u): the byte streams are "
				   "out of step", peer, h->magic, h->version);
	if (herd__op_is_p2p(op->fp.kind) || herd__op_is_p2p(h->kind))
		ok = herd__op_is_p2p(op->fp.kind) && herd__op_is_p2p(h->kind) &&
		     h->dtype == op->fp.dtype && h->len == rx->len;
	else
		ok = h->kind == op->fp.kind && h->dtype == op->fp.dtype &&
		     h->redop == op->fp.redop && h->root == op->fp.root &&
		     h->count == op->fp.count && h->cseq == comm->op_cseq && h->len == rx->len;
	if (ok) {
		rx->hdr_ok = true;
		return HERD_OK;
	}
	tfp.seq = h->seq;
	tfp.kind = h->kind;
	tfp.dtype = h->dtype;
	tfp.redop = h->redop;
	tfp.root = h->root;
	tfp.count = h->count;
	herd__fp_format(&op->fp, mine, sizeof(mine));
	herd__fp_format(&tfp, theirs, sizeof(theirs));
	if (!herd__op_is_p2p(op->fp.kind) && !herd__op_is_p2p(h->kind) &&
	    h->cseq != comm->op_cseq)
		snprintf(extra, sizeof(extra), " (collective call %" PRIu64 " here, %" PRIu64
			 " there)", comm->op_cseq, h->cseq);
	return herd__error(HERD_EMISMATCH, "mismatched calls: %s is in %s and expects %zu bytes "
			   "from %s, which sent %" PRIu64 " bytes for its %s%s",
			   herd__comm_who(comm, comm->rank, me, sizeof(me)), mine, rx->len, peer,
			   h->len, theirs, extra);
}

static herd_status validate(herd_comm *comm, const herd__xfer *sends, size_t nsends,
			    const herd__xfer *recvs, size_t nrecvs)
{
	if (comm->op == NULL)
		return herd__error(HERD_EINVAL, "herd__p2p_exchange called outside a call "
				   "(herd__comm_run or herd__comm_submit)");
	if ((nsends > 0 && sends == NULL) || (nrecvs > 0 && recvs == NULL))
		return herd__error(HERD_EINVAL, "herd__p2p_exchange: NULL array with a count");
	for (size_t i = 0; i < nsends; i++) {
		if (sends[i].peer < 0 || sends[i].peer >= comm->size)
			return herd__error(HERD_EINVAL, "herd__p2p_exchange: send %zu to rank %d of "
					   "%d", i, sends[i].peer, comm->size);
		if (sends[i].buf == NULL && sends[i].len > 0)
			return herd__error(HERD_EINVAL, "herd__p2p_exchange: send %zu of %zu bytes "
					   "from NULL", i, sends[i].len);
	}
	for (size_t i = 0; i < nrecvs; i++) {
		const herd__sink *k = &recvs[i].sink;

		if (recvs[i].peer < 0 || recvs[i].peer >= comm->size)
			return herd__error(HERD_EINVAL, "herd__p2p_exchange: receive %zu from rank "
					   "%d of %d", i, recvs[i].peer, comm->size);
		if (k->dst == NULL && recvs[i].len > 0)
			return herd__error(HERD_EINVAL, "herd__p2p_exchange: receive %zu of %zu bytes "
					   "into NULL", i, recvs[i].len);
		if (k->reduce_with != NULL) {
			size_t es = herd_dtype_size(k->dtype);

			if (es == 0 || (unsigned)k->op > HERD_MAX || recvs[i].len % es != 0)
				return herd__error(HERD_EINVAL, "herd__p2p_exchange: receive %zu "
						   "reduces %zu bytes of dtype %d with op %d", i,
						   recvs[i].len, (int)k->dtype, (int)k->op);
		}
	}
	return HERD_OK;
}

/* Messages to and from the rank itself: the k-th send feeds the k-th receive. */
static herd_status self_copies(herd_comm *comm, const herd__xfer *sends, size_t nsends,
			       const herd__xfer *recvs, size_t nrecvs)
{
	size_t i = 0, k = 0;

	for (;;) {
		herd__rx rx;

		while (i < nsends && sends[i].peer != comm->rank)
			i++;
		while (k < nrecvs && recvs[k].peer != comm->rank)
			k++;
		if (i == nsends && k == nrecvs)
			return HERD_OK;
		if (i == nsends || k == nrecvs)
			return herd__error(HERD_EINVAL, "herd__p2p_exchange: a %s to the rank "
					   "itself without a matching %s", i < nsends ? "send" :
					   "receive", i < nsends ? "receive" : "send");
		if (sends[i].len != recvs[k].len)
			return herd__error(HERD_EINVAL, "herd__p2p_exchange: the rank sends %zu bytes "
					   "to itself but receives %zu", sends[i].len, recvs[k].len);
		memset(&rx, 0, sizeof(rx));
		rx.sink = recvs[k].sink;
		rx.elsize = rx.sink.reduce_with != NULL ? herd_dtype_size(rx.sink.dtype) : 1;
		herd__rx_deliver(&rx, sends[i].buf, sends[i].len);
		i++;
		k++;
	}
}

/* ---- the exchange --------------------------------------------------------- */

typedef struct exchange {
	herd_comm *comm;
	const herd__xfer *sends, *recvs;
	herd__tx *tx;
	herd__rx *rx;
	int *tnext, *rnext;      /* next message to the same peer, -1 */
	int *tact, *ract;        /* active messages: the first pending one per peer */
	size_t ntact, nract;
	int failed_peer;         /* whose link failed in the last pass */
	void *mem;
} exchange;

/* Links each message to the next one with the same peer; the first of each
 * peer is active. */
static void chain(const herd__xfer *x, size_t n, int self, int *last, int *next, int *act,
		  size_t *nact)
{
	for (size_t i = 0; i < n; i++) {
		int p = x[i].peer;

		next[i] = -1;
		if (p == self)
			continue;
		if (last[p] < 0)
			act[(*nact)++] = (int)i;
		else
			next[last[p]] = (int)i;
		last[p] = (int)i;
	}
	for (size_t i = 0; i < n; i++)
		last[x[i].peer] = -1;
}

static herd_status setup(exchange *x, herd_comm *comm, const herd__xfer *sends, size_t nsends,
			 const herd__xfer *recvs, size_t nrecvs)
{
	p2p_scratch *s = comm->p2p_scratch;
	const herd__op *op = comm->op;
	size_t bytes = nsends * (sizeof(herd__tx) + 2 * sizeof(int)) +
		       nrecvs * (sizeof(herd__rx) + 2 * sizeof(int));
	uint8_t *m;

	memset(x, 0, sizeof(*x));
	x->comm = comm;
	x->sends = sends;
	x->recvs = recvs;
	HERD_CHECK(herd__calloc(&x->mem, 1, bytes > 0 ? bytes : 1, "an exchange"));
	m = x->mem;
	x->tx = (herd__tx *)m;
	m += nsends * sizeof(herd__tx);
	x->rx = (herd__rx *)m;
	m += nrecvs * sizeof(herd__rx);
	x->tnext = (int *)m;
	x->tact = x->tnext + nsends;
	x->rnext = x->tact + nsends;
	x->ract = x->rnext + nrecvs;
	for (size_t i = 0; i < nsends; i++) {
		herd__tx *t = &x->tx[i];

		t->hdr.magic = HERD__WIRE_MAGIC;
		t->hdr.version = HERD__WIRE_VERSION;
		t->hdr.kind = (uint8_t)op->fp.kind;
		t->hdr.dtype = op->fp.dtype;
		t->hdr.redop = op->fp.redop;
		t->hdr.root = op->fp.root;
		t->hdr.seq = op->fp.seq;
		t->hdr.cseq = comm->op_cseq;
		t->hdr.count = op->fp.count;
		t->hdr.len = sends[i].len;
		t->buf = sends[i].buf;
		t->len = sends[i].len;
	}
	for (size_t i = 0; i < nrecvs; i++) {
		herd__rx *r = &x->rx[i];

		r->peer = recvs[i].peer;
		r->len = recvs[i].len;
		r->sink = recvs[i].sink;
		r->elsize = r->sink.reduce_with != NULL ? herd_dtype_size(r->sink.dtype) : 1;
		r->check = check_header;
		r->ctx = comm;
	}
	chain(sends, nsends, comm->rank, s->last, x->tnext, x->tact, &x->ntact);
	chain(recvs, nrecvs, comm->rank, s->last, x->rnext, x->ract, &x->nract);
	return HERD_OK;
}

static herd__link *link_of(const exchange *x, int peer)
{
	return x->comm->peers[peer].link;
}

/* One pass over the active messages. */
static herd_status pass(exchange *x, bool *progressed)
{
	for (size_t k = 0; k < x->ntact;) {
		int i = x->tact[k];
		herd__link *l = link_of(x, x->sends[i].peer);

		x->failed_peer = x->sends[i].peer;
		HERD_CHECK(l->ops->try_send(l, &x->tx[i], progressed));
		if (!x->tx[i].done) {
			k++;
			continue;
		}
		/* The next message to this peer takes its place (and a try now). */
		if (x->tnext[i] >= 0)
			x->tact[k] = x->tnext[i];
		else
			x->tact[k] = x->tact[--x->ntact];
	}
	for (size_t k = 0; k < x->nract;) {
		int i = x->ract[k];
		herd__link *l = link_of(x, x->recvs[i].peer);

		x->failed_peer = x->recvs[i].peer;
		HERD_CHECK(l->ops->try_recv(l, &x->rx[i], progressed));
		if (!x->rx[i].done) {
			k++;
			continue;
		}
		if (x->rnext[i] >= 0)
			x->ract[k] = x->rnext[i];
		else
			x->ract[k] = x->ract[--x->nract];
	}
	return HERD_OK;
}

/* The peers still owed bytes, for a timeout message. */
static size_t waiting_peers(const exchange *x, int *out)
{
	p2p_scratch *s = x->comm->p2p_scratch;
	size_t n = 0;

	for (size_t k = 0; k < x->ntact + x->nract; k++) {
		int p = k < x->ntact ? x->sends[x->tact[k]].peer
				     : x->recvs[x->ract[k - x->ntact]].peer;

		if (s->last[p] < 0) {
			s->last[p] = 0;
			out[n++] = p;
		}
	}
	for (size_t i = 0; i < n; i++)
		s->last[out[i]] = -1;
	return n;
}

/* Whether a pending shared-memory message has a peer that said goodbye. */
static int left_peer(const exchange *x)
{
	for (size_t k = 0; k < x->ntact + x->nract; k++) {
		int p = k < x->ntact ? x->sends[x->tact[k]].peer
				     : x->recvs[x->ract[k - x->ntact]].peer;

		if (link_of(x, p)->ops->fd(link_of(x, p)) < 0 &&
		    atomic_load(&x->comm->peers[p].left))
			return p;
	}
	return -1;
}

/* The error for a peer that said goodbye while this call needed it. */
herd_status herd__p2p_left_error(herd_comm *comm, int peer)
{
	char me[HERD__COMM_HOST_MAX + 32], who[HERD__COMM_HOST_MAX + 32];

	return herd__error(HERD_EPEER, "%s #%" PRIu64 " failed on %s: %s destroyed its "
			   "communicator while this call still exchanged data with it",
			   herd__op_name((herd__op_kind)comm->op->fp.kind), comm->op->fp.seq,
			   herd__comm_who(comm, comm->rank, me, sizeof(me)),
			   herd__comm_who(comm, peer, who, sizeof(who)));
}

/*
 * A data link failed (the peer's end closed).  Its control connection,
 * which the monitor reads, usually tells why a moment later: a FAILED
 * frame (it failed first, and that message is the one to give), ABORT,
 * BYE, or its own closing.  Waits a little for that word.
 */
static herd_status settle(herd_comm *comm, herd_status st, int peer)
{
	char msg[HERD__COMM_MSG_MAX];
	int64_t until = herd__net_now_ms() + SETTLE_MS;

	if (st != HERD_EPEER)
		return st;
	herd__strlcpy(msg, herd_last_error(), sizeof(msg));
	while (atomic_load(&comm->status) == HERD_OK &&
	       !atomic_load(&comm->peers[peer].left) && herd__net_now_ms() < until) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	if (atomic_load(&comm->status) != HERD_OK)
		return herd__comm_broken(comm);
	if (atomic_load(&comm->peers[peer].left))
		return herd__p2p_left_error(comm, peer);
	return herd__error(st, "%s", msg);
}

/* Collects the sockets to poll; *shm when a shared-memory link is pending. */
static nfds_t collect_fds(const exchange *x, bool *shm)
{
	p2p_scratch *s = x->comm->p2p_scratch;
	nfds_t n = 0;

	*shm = false;
	for (size_t k = 0; k < x->ntact + x->nract; k++) {
		bool send = k < x->ntact;
		int p = send ? x->sends[x->tact[k]].peer : x->recvs[x->ract[k - x->ntact]].peer;
		int fd = link_of(x, p)->ops->fd(link_of(x, p));

		if (fd < 0) {
			*shm = true;
			continue;
		}
		if (s->fd_slot[p] < 0) {
			s->fd_slot[p] = (int)n;
			s->pfds[n++] = (struct pollfd){ fd, 0, 0 };
		}
		s->pfds[s->fd_slot[p]].events |= send ? POLLOUT : POLLIN;
	}
	for (size_t k = 0; k < x->ntact + x->nract; k++) {
		int p = k < x->ntact ? x->sends[x->tact[k]].peer
				     : x->recvs[x->ract[k - x->ntact]].peer;

		s->fd_slot[p] = -1;
	}
	s->pfds[n++] = (struct pollfd){ x->comm->wake_fd, POLLIN, 0 };
	return n;
}

static herd_status run_exchange(exchange *x)
{
	herd_comm *comm = x->comm;
	p2p_scratch *s = comm->p2p_scratch;
	int64_t idle_since = 0;
	unsigned int busy_passes = 0, spins = 0;
	uint32_t seen = 0;
	bool armed = false, left_seen = false;
	bool oversubscribed = comm->ncpus > 0 && comm->nkernel > comm->ncpus;
	int64_t spin_ns = oversubscribed && comm->shm == NULL ? SPIN_NS_TCP_OVERSUBSCRIBED
							       : SPIN_NS;

	while (x->ntact + x->nract > 0) {
		bool progressed = false, shm;
		herd_status st;
		nfds_t nfds;
		int left;

		st = pass(x, &progressed);
		if (st != HERD_OK) {
			if (armed)
				herd__shm_disarm(comm);
			return settle(comm, st, x->failed_peer);
		}
		if (x->ntact + x->nract == 0)
			break;
		if (progressed) {
			if (armed) {
				herd__shm_disarm(comm);
				armed = false;
			}
			idle_since = 0;
			if (++busy_passes % DEADLINE_CHECK_EVERY == 0 &&
			    herd__net_now_ms() >= comm->op_deadline)
				return herd__comm_timeout(comm, s->waiting, waiting_peers(x, s->waiting));
			continue;
		}
		if (atomic_load(&comm->status) != HERD_OK) {
			if (armed)
				herd__shm_disarm(comm);
			return herd__comm_broken(comm);
		}
		if (idle_since == 0)
			idle_since = herd__comm_now_ns();
		/* The clock every 16 idle passes only: it costs more than a pass.
		 * With more ranks on this host than CPUs, the peer waited for may
		 * wait for this CPU: give it away on every pass. */
		if (!armed && (++spins % 16 != 0 || herd__comm_now_ns() - idle_since < spin_ns)) {
			if (oversubscribed || spins % 64 == 0)
				sched_yield();
			else
				herd__comm_cpu_relax();
			continue;
		}
		if (herd__net_now_ms() >= comm->op_deadline) {
			if (armed)
				herd__shm_disarm(comm);
			return herd__comm_timeout(comm, s->waiting, waiting_peers(x, s->waiting));
		}
		left = left_peer(x);
		if (left >= 0) {
			/* Its last bytes may have landed just before its goodbye. */
			if (!left_seen) {
				left_seen = true;
				continue;
			}
			if (armed)
				herd__shm_disarm(comm);
			return herd__p2p_left_error(comm, left);
		}
		nfds = collect_fds(x, &shm);
		if (shm && nfds == 1) {
			int ms = herd__net_remaining_ms(comm->op_deadline);

			if (!armed) {
				/* Announce the sleep, then look once more before it. */
				seen = herd__shm_arm(comm);
				armed = true;
				continue;
			}
			herd__shm_sleep(comm, seen, ms < SLEEP_MAX_MS ? ms + 1 : SLEEP_MAX_MS);
			herd__shm_disarm(comm);
			armed = false;
		} else {
			int ms = herd__net_remaining_ms(comm->op_deadline);

			if (armed) {
				herd__shm_disarm(comm);
				armed = false;
			}
			if (shm)
				ms = MIXED_POLL_MS;
			else if (ms >= POLL_MAX_MS)
				ms = POLL_MAX_MS;
			else
				ms++;
			if (poll(s->pfds, nfds, ms) < 0 && errno != EINTR)
				return herd__error_errno(HERD_ESYS, errno, "poll");
		}
		idle_since = 0;
	}
	return HERD_OK;
}

herd_status herd__p2p_exchange(herd_comm *comm, const herd__xfer *sends, size_t nsends,
			       const herd__xfer *recvs, size_t nrecvs)
{
	exchange x;
	herd_status st;

	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd__p2p_exchange: comm is NULL");
	HERD_CHECK(herd__comm_broken(comm));
	HERD_CHECK(validate(comm, sends, nsends, recvs, nrecvs));
	HERD_CHECK(self_copies(comm, sends, nsends, recvs, nrecvs));
	HERD_CHECK(setup(&x, comm, sends, nsends, recvs, nrecvs));
	st = run_exchange(&x);
	free(x.mem);
	if (st != HERD_OK)
		st = herd__comm_fail(comm, st, true);
	return st;
}
