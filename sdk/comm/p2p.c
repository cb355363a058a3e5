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
 * Where a pair has several TCP connections (HERD_SOCKET_STREAMS), a
 * message of STRIPE_MIN bytes or more travels as pieces, one per
 * connection, each with its own header: sender and receiver cut it alike
 * from its length (stripe()), and each connection keeps its pieces in
 * message order, so the pieces of one message move at once and land
 * where they belong.
 *
 * Receivers check the header against their own call (check_header): a
 * collective compares every field of the fingerprint and its collective
 * number, a point-to-point call the dtype and the byte count only.
 *
 * Waiting, when a pass moved nothing: spin, then yield (sdk/base/wait.h:
 * a reply a microsecond away costs no system call; with more ranks on the
 * host than CPUs, or on a machine busy with other work, the CPU is given
 * up at once or soon), then sleep on what can wake the exchange: the
 * communicator's doorbell (comm->bell, the shared-memory
 * transport's futex) when only links without a descriptor are pending
 * (100 ms at most, so `left` peers and the deadline are looked at), poll on
 * the links' sockets and the communicator's wake eventfd otherwise (1 ms
 * slices when a link without a descriptor is pending too).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "comm/core.h"
#include "net.h"
#include "wait.h"

/* The spin is wait.h's (HERD__WAIT_SPIN_NS).  Measured on a 2-core VM:
 * without it an 8-byte shared-memory ping-pong took 38 us one way (a
 * futex wake-up per hop), with 50 us of spin 0.7-1 us; 7 ranks on 2 cores
 * did ring steps in 10-20 us either way.
 * With more ranks than CPUs and only TCP between them (HERD_TRANSPORT=tcp
 * on one host), a rank that goes to sleep in poll often leaves its CPU
 * idle while the rank it waits for sits on the other CPU's run queue, and
 * waking an idle virtual CPU is slow: yielding for longer keeps the CPU
 * busy.  4 ranks on 2 cores, 128 MiB allreduce over loopback TCP, medians
 * of 7: 50 us 221 ms, 200 us 210 ms, 500 us 216 ms. */
#define SPIN_NS_TCP_CROWDED 200000
#define SLEEP_MAX_MS HERD__WAIT_SLEEP_MAX_MS
#define POLL_MAX_MS 1000
#define MIXED_POLL_MS 1
/* Passes that moved bytes between two looks at the clock. */
#define DEADLINE_CHECK_EVERY 256
/* How long a failed data link waits for the control connection's word on
 * why (see settle). */
#define SETTLE_MS 200

/* Below this many bytes a message travels whole on a pair's first
 * connection; from it, in up to one piece per connection of at least
 * this many bytes. */
#define STRIPE_MIN (64u * 1024u)

/* Data links are numbered peer * HERD__STREAMS_MAX + stream. */
#define LINK_ID(peer, stream) ((peer) * HERD__STREAMS_MAX + (stream))

typedef struct p2p_scratch {
	int *last;               /* [size * STREAMS_MAX]: last message seen per link, -1 */
	int *fd_slot;            /* [size * STREAMS_MAX]: index in pfds per link, -1 */
	struct pollfd *pfds;     /* [size * STREAMS_MAX + 1] */
	int *waiting;            /* [size] */
} p2p_scratch;

herd_status herd__p2p_init(herd_comm *comm)
{
	p2p_scratch *s;
	size_t n = (size_t)comm->size * HERD__STREAMS_MAX;

	HERD_CHECK(herd__calloc(&s, 1, sizeof(*s), "exchange scratch"));
	comm->p2p_scratch = s;
	HERD_CHECK(herd__calloc(&s->last, n, sizeof(int), "exchange scratch"));
	HERD_CHECK(herd__calloc(&s->fd_slot, n, sizeof(int), "exchange scratch"));
	HERD_CHECK(herd__calloc(&s->pfds, n + 1, sizeof(*s->pfds), "exchange scratch"));
	HERD_CHECK(herd__calloc(&s->waiting, (size_t)comm->size, sizeof(int),
				"exchange scratch"));
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
		return herd__error(HERD_EINVAL, "herd__p2p_exchange: called outside a collective "
				   "call");
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
	herd__tx *tx;            /* [ntx]: the sends, cut into pieces */
	herd__rx *rx;            /* [nrx] */
	int *tpeer, *tlink;      /* each send piece's peer and link id */
	int *rlink;              /* each receive piece's link id */
	size_t ntx, nrx;
	int *tnext, *rnext;      /* next piece on the same link, -1 */
	int *tact, *ract;        /* active pieces: the first pending one per link */
	size_t ntact, nract;
	int failed_peer;         /* whose link failed in the last pass */
	void *mem;
} exchange;

/*
 * How a message of len bytes with peer travels: in *n pieces of *piece
 * bytes (the last one shorter), piece k on the pair's connection k.  Cut
 * at multiples of 64 bytes, so that no element straddles two pieces.  A
 * message to the rank itself stays whole.
 */
static void stripe(const herd_comm *comm, int peer, size_t len, int *n, size_t *piece)
{
	int links = peer == comm->rank ? 1 : herd__comm_streams(comm, peer);
	size_t want = len / STRIPE_MIN;

	if (links <= 1 || want < 2) {
		*n = 1;
		*piece = len;
		return;
	}
	if (want > (size_t)links)
		want = (size_t)links;
	*piece = ((len + want - 1) / want + 63) / 64 * 64;
	*n = (int)((len + *piece - 1) / *piece);
}

/* Links each piece to the next one on the same link; the first of each
 * link is active.  Pieces with the rank itself (link -1) take no part. */
static void chain(const int *link, size_t n, int *last, int *next, int *act, size_t *nact)
{
	for (size_t i = 0; i < n; i++) {
		int l = link[i];

		next[i] = -1;
		if (l < 0)
			continue;
		if (last[l] < 0)
			act[(*nact)++] = (int)i;
		else
			next[last[l]] = (int)i;
		last[l] = (int)i;
	}
	for (size_t i = 0; i < n; i++)
		if (link[i] >= 0)
			last[link[i]] = -1;
}

static size_t count_pieces(const herd_comm *comm, const herd__xfer *x, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		int k;
		size_t piece;

		stripe(comm, x[i].peer, x[i].len, &k, &piece);
		total += (size_t)k;
	}
	return total;
}

static herd_status setup(exchange *x, herd_comm *comm, const herd__xfer *sends, size_t nsends,
			 const herd__xfer *recvs, size_t nrecvs)
{
	p2p_scratch *s = comm->p2p_scratch;
	const herd__op *op = comm->op;
	size_t ntx = count_pieces(comm, sends, nsends), nrx = count_pieces(comm, recvs, nrecvs);
	size_t bytes = ntx * (sizeof(herd__tx) + 5 * sizeof(int)) +
		       nrx * (sizeof(herd__rx) + 3 * sizeof(int));
	size_t t = 0, r = 0;
	uint8_t *m;

	memset(x, 0, sizeof(*x));
	x->comm = comm;
	x->ntx = ntx;
	x->nrx = nrx;
	HERD_CHECK(herd__calloc(&x->mem, 1, bytes > 0 ? bytes : 1, "an exchange"));
	m = x->mem;
	x->tx = (herd__tx *)m;
	m += ntx * sizeof(herd__tx);
	x->rx = (herd__rx *)m;
	m += nrx * sizeof(herd__rx);
	x->tpeer = (int *)m;
	x->tlink = x->tpeer + ntx;
	x->tnext = x->tlink + ntx;
	x->tact = x->tnext + ntx;
	x->rlink = x->tact + ntx;
	x->rnext = x->rlink + nrx;
	x->ract = x->rnext + nrx;
	for (size_t i = 0; i < nsends; i++) {
		int n, self = sends[i].peer == comm->rank;
		size_t piece;

		stripe(comm, sends[i].peer, sends[i].len, &n, &piece);
		for (int k = 0; k < n; k++, t++) {
			herd__tx *tx = &x->tx[t];
			size_t off = (size_t)k * piece;

			tx->hdr.magic = HERD__WIRE_MAGIC;
			tx->hdr.version = HERD__WIRE_VERSION;
			tx->hdr.kind = (uint8_t)op->fp.kind;
			tx->hdr.dtype = op->fp.dtype;
			tx->hdr.redop = op->fp.redop;
			tx->hdr.root = op->fp.root;
			tx->hdr.seq = op->fp.seq;
			tx->hdr.cseq = comm->op_cseq;
			tx->hdr.count = op->fp.count;
			tx->len = k + 1 < n ? piece : sends[i].len - off;
			tx->hdr.len = tx->len;
			tx->buf = sends[i].buf == NULL ? NULL : (const uint8_t *)sends[i].buf + off;
			x->tpeer[t] = sends[i].peer;
			x->tlink[t] = self ? -1 : LINK_ID(sends[i].peer, k);
		}
	}
	for (size_t i = 0; i < nrecvs; i++) {
		int n, self = recvs[i].peer == comm->rank;
		size_t piece;

		stripe(comm, recvs[i].peer, recvs[i].len, &n, &piece);
		for (int k = 0; k < n; k++, r++) {
			herd__rx *rx = &x->rx[r];
			size_t off = (size_t)k * piece;

			rx->peer = recvs[i].peer;
			rx->len = k + 1 < n ? piece : recvs[i].len - off;
			rx->sink = recvs[i].sink;
			if (off > 0) {
				rx->sink.dst = (uint8_t *)rx->sink.dst + off;
				if (rx->sink.reduce_with != NULL)
					rx->sink.reduce_with = (const uint8_t *)rx->sink.reduce_with +
							       off;
			}
			rx->elsize = rx->sink.reduce_with != NULL ? herd_dtype_size(rx->sink.dtype) : 1;
			rx->check = check_header;
			rx->ctx = comm;
			x->rlink[r] = self ? -1 : LINK_ID(recvs[i].peer, k);
		}
	}
	chain(x->tlink, ntx, s->last, x->tnext, x->tact, &x->ntact);
	chain(x->rlink, nrx, s->last, x->rnext, x->ract, &x->nract);
	return HERD_OK;
}

static herd__link *link_of(const exchange *x, int id)
{
	return herd__comm_link(x->comm, id / HERD__STREAMS_MAX, id % HERD__STREAMS_MAX);
}

/* The peer of active piece k (sends first, then receives). */
static int active_peer(const exchange *x, size_t k)
{
	return k < x->ntact ? x->tpeer[x->tact[k]] : x->rx[x->ract[k - x->ntact]].peer;
}

/* The link id of active piece k. */
static int active_link(const exchange *x, size_t k)
{
	return k < x->ntact ? x->tlink[x->tact[k]] : x->rlink[x->ract[k - x->ntact]];
}

/* One pass over the active pieces. */
static herd_status pass(exchange *x, bool *progressed)
{
	for (size_t k = 0; k < x->ntact;) {
		int i = x->tact[k];
		herd__link *l = link_of(x, x->tlink[i]);

		x->failed_peer = x->tpeer[i];
		HERD_CHECK(l->ops->try_send(l, &x->tx[i], progressed));
		if (!x->tx[i].done) {
			k++;
			continue;
		}
		/* The next piece on this link takes its place (and a try now). */
		if (x->tnext[i] >= 0)
			x->tact[k] = x->tnext[i];
		else
			x->tact[k] = x->tact[--x->ntact];
	}
	for (size_t k = 0; k < x->nract;) {
		int i = x->ract[k];
		herd__link *l = link_of(x, x->rlink[i]);

		x->failed_peer = x->rx[i].peer;
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
		int p = active_peer(x, k);

		if (s->last[LINK_ID(p, 0)] < 0) {
			s->last[LINK_ID(p, 0)] = 0;
			out[n++] = p;
		}
	}
	for (size_t i = 0; i < n; i++)
		s->last[LINK_ID(out[i], 0)] = -1;
	return n;
}

/* Whether a pending shared-memory message has a peer that said goodbye. */
static int left_peer(const exchange *x)
{
	for (size_t k = 0; k < x->ntact + x->nract; k++) {
		int p = active_peer(x, k);
		herd__link *l = link_of(x, active_link(x, k));

		if (l->ops->fd(l) < 0 && atomic_load(&x->comm->peers[p].left))
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

/* Collects the sockets to poll; *bell when a link without one (it signals
 * on the doorbell) is pending. */
static nfds_t collect_fds(const exchange *x, bool *bell)
{
	p2p_scratch *s = x->comm->p2p_scratch;
	nfds_t n = 0;

	*bell = false;
	for (size_t k = 0; k < x->ntact + x->nract; k++) {
		bool send = k < x->ntact;
		int id = active_link(x, k);
		int fd = link_of(x, id)->ops->fd(link_of(x, id));

		if (fd < 0) {
			*bell = true;
			continue;
		}
		if (s->fd_slot[id] < 0) {
			s->fd_slot[id] = (int)n;
			s->pfds[n++] = (struct pollfd){ fd, 0, 0 };
		}
		s->pfds[s->fd_slot[id]].events |= send ? POLLOUT : POLLIN;
	}
	for (size_t k = 0; k < x->ntact + x->nract; k++)
		s->fd_slot[active_link(x, k)] = -1;
	s->pfds[n++] = (struct pollfd){ x->comm->wake_fd, POLLIN, 0 };
	return n;
}

/* Begins a wait (wait.h) for the first pending piece's peer. */
static void wait_begin(const exchange *x, herd__wait *w, int64_t spin_ns, bool crowded)
{
	herd_comm *comm = x->comm;
	const herd__doorbell *bell = comm->bell;

	herd__wait_start(w, spin_ns, crowded);
	if (bell != NULL && bell->of != NULL && x->ntact + x->nract > 0)
		herd__wait_bells(w, bell->of(comm, comm->rank), bell->of(comm, active_peer(x, 0)));
}

static herd_status run_exchange(exchange *x)
{
	herd_comm *comm = x->comm;
	p2p_scratch *s = comm->p2p_scratch;
	const herd__doorbell *bell = comm->bell;
	unsigned int busy_passes = 0;
	uint32_t seen = 0;
	bool armed = false, left_seen = false;
	bool crowded = comm->ncpus > 0 && comm->nkernel > comm->ncpus;
	/* No doorbell: every link is a socket. */
	int64_t spin_ns = crowded && bell == NULL ? SPIN_NS_TCP_CROWDED : HERD__WAIT_SPIN_NS;
	herd__wait w;

	wait_begin(x, &w, spin_ns, crowded);
	while (x->ntact + x->nract > 0) {
		bool progressed = false, on_bell;
		herd_status st;
		nfds_t nfds;
		int left;

		st = pass(x, &progressed);
		if (st != HERD_OK) {
			if (armed)
				bell->disarm(comm);
			return settle(comm, st, x->failed_peer);
		}
		if (x->ntact + x->nract == 0)
			break;
		if (progressed) {
			if (armed) {
				bell->disarm(comm);
				armed = false;
			}
			wait_begin(x, &w, spin_ns, crowded);
			if (++busy_passes % DEADLINE_CHECK_EVERY == 0 &&
			    herd__net_now_ms() >= comm->op_deadline)
				return herd__comm_timeout(comm, s->waiting, waiting_peers(x, s->waiting));
			continue;
		}
		if (atomic_load(&comm->status) != HERD_OK) {
			if (armed)
				bell->disarm(comm);
			return herd__comm_broken(comm);
		}
		/* Spin, then yield (wait.h); past them, sleep below. */
		if (!armed && !herd__wait_idle(&w))
			continue;
		if (herd__net_now_ms() >= comm->op_deadline) {
			if (armed)
				bell->disarm(comm);
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
				bell->disarm(comm);
			return herd__p2p_left_error(comm, left);
		}
		nfds = collect_fds(x, &on_bell);
		if (on_bell && nfds == 1) {
			int ms = herd__net_remaining_ms(comm->op_deadline);

			if (!armed) {
				/* Announce the sleep, then look once more before it. */
				seen = bell->arm(comm);
				armed = true;
				continue;
			}
			bell->sleep(comm, seen, ms < SLEEP_MAX_MS ? ms + 1 : SLEEP_MAX_MS);
			bell->disarm(comm);
			armed = false;
		} else {
			int ms = herd__net_remaining_ms(comm->op_deadline);

			if (armed) {
				bell->disarm(comm);
				armed = false;
			}
			if (on_bell)
				ms = MIXED_POLL_MS;
			else if (ms >= POLL_MAX_MS)
				ms = POLL_MAX_MS;
			else
				ms++;
			if (poll(s->pfds, nfds, ms) < 0 && errno != EINTR)
				return herd__error_errno(HERD_ESYS, errno, "waiting for the peers' "
							 "data");
		}
		/* Woken (or a slice of the sleep over): spin again first. */
		wait_begin(x, &w, spin_ns, crowded);
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
