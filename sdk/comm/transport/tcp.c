/*
 * sdk/comm/transport/tcp.c - the TCP side of a communicator: the listening socket,
 * the mesh of authenticated connections made at init (a control
 * connection to every peer, a data connection to every peer not reached
 * through shared memory), and the TCP data link; the TCP transport's
 * entry of the table (herd__tcp_transport, transport.h), which joins any
 * pair.
 *
 * Connecting: rank r connects to every rank below it and accepts from every
 * rank above it.  Both ends of a new connection send a HELLO at once
 * (kind, from, to, communicator id, a fresh 32-byte nonce), then a PROOF:
 * HMAC-SHA256(key, peer's nonce || own nonce || "herd-comm/1 FROM->TO KIND"),
 * the key being the communicator's random key that rank 0 put in the
 * (authenticated) store.  Each checks the other's proof, so both prove
 * they hold the key and neither proof can be replayed.  base/auth.h's HMAC
 * does the hashing.
 *
 * The data link: non-blocking sockets with TCP_NODELAY, progressed with
 * sendmsg (header and payload in one call) and recv.  Copies are received
 * straight into the destination; reductions go through a small bounce
 * buffer (BOUNCE_CAP), whole elements at a time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base.h"
#include "comm/core.h"
#include "store/backend.h"
#include "net.h"
#include "auth.h"

#define HELLO_MAGIC 0x48445248u     /* "HRDH" */
#define HELLO_VERSION 1
#define KIND_CTL 1
#define KIND_DATA 2
/*
 * Reductions receive into this much bounce buffer at a time and reduce it
 * at once, while it is still in L1/L2: with 4 ranks on 2 cores, a 32 KiB
 * bounce took 10-15% less CPU per 128 MiB allreduce than a 1 MiB one (the
 * kernel's copy and the reduction then both hit cache).
 */
#define BOUNCE_CAP (32u * 1024u)
/* Bytes one try_send / try_recv moves at most, so that one busy link does
 * not starve the others of an exchange. */
#define TRY_BUDGET (8u << 20)
/* When a peer publishes several addresses, how long each may take. */
#define CANDIDATE_CONNECT_MS 3000

typedef struct hello {
	uint32_t magic;
	uint16_t version;
	uint8_t kind;
	uint8_t pad;
	int32_t from, to;
	uint8_t id[HERD__COMM_ID_LEN];
	uint8_t nonce[HERD__AUTH_NONCE_LEN];
	uint8_t pad2[8];
} hello;

_Static_assert(sizeof(hello) == 64, "a hello is 64 bytes");

/* ---- listening ------------------------------------------------------------ */

/* Listens on ip (a numeric IPv4 address) and publishes it alone. */
static herd_status listen_on(int *fd, const char *ip, char *addrs, size_t cap)
{
	char local[HERD_NET_ADDR_LEN];
	int port = 0;
	herd_status st;

	HERD_CHECK(herd__net_listen(fd, ip, 0));
	st = herd__net_local_addr(*fd, local, &port);
	if (st == HERD_OK && (size_t)snprintf(addrs, cap, "%s:%d", ip, port) >= cap)
		st = herd__error(HERD_EINTERNAL, "the address %s:%d is too long", ip, port);
	if (st != HERD_OK) {
		close(*fd);
		*fd = -1;
	}
	return st;
}

/* Listens on every interface and publishes every address, likely ones
 * first (herd__net_if_addrs' order); ifname NULL or a HERD_SOCKET_IFNAME. */
static herd_status listen_any(int *fd, const char *ifname, char *addrs, size_t cap)
{
	char local[HERD_NET_ADDR_LEN];
	int port = 0, count = 0;
	herd_status st;

	HERD_CHECK(herd__net_listen(fd, "0.0.0.0", 0));
	st = herd__net_local_addr(*fd, local, &port);
	if (st == HERD_OK)
		st = herd__net_if_addrs(ifname, port, addrs, cap, &count);
	if (st == HERD_OK && count == 0)
		st = herd__error(HERD_EUNAVAIL, "no network interface is up");
	if (st != HERD_OK) {
		close(*fd);
		*fd = -1;
	}
	return st;
}

/* An IPv4 address outside 127/8: one that other hosts may reach. */
static bool ipv4_routable(const char *ip)
{
	struct in_addr a;

	return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) != 127;
}

/*
 * HERD__SETUP_LISTEN: the listening socket (comm->listen_fd) and the
 * addresses peers may reach it at (this rank's addrs, "a.b.c.d:port,...").
 * It binds to one address, not to every interface: the interfaces
 * HERD_SOCKET_IFNAME names (every one of them when it names several), else
 * the one this rank reaches the job's store from.  When that route is
 * loopback (or the store has no connection), listen_fd stays -1 and addrs
 * empty: the rank publishes no address with its info record, and
 * tcp_addrs decides once the peers are known.
 */
static herd_status tcp_listen(herd_comm *comm, int64_t deadline)
{
	const char *ifname = comm->cfg.ifname[0] != '\0' ? comm->cfg.ifname : NULL;
	char *addrs = comm->peers[comm->rank].addrs, via[HERD_NET_ADDR_LEN];
	size_t cap = sizeof(comm->peers[comm->rank].addrs);
	int *fd = &comm->listen_fd, count = 0;

	(void)deadline;
	*fd = -1;
	addrs[0] = '\0';
	if (ifname != NULL) {
		HERD_CHECK(herd__net_if_addrs(ifname, 1, addrs, cap, &count));
		if (count == 0)
			return herd__error(HERD_EINVAL, "socket interface \"%s\" (HERD_SOCKET_IFNAME "
					   "or herd_comm_opts.socket_ifname, NCCL_SOCKET_IFNAME's "
					   "syntax) matches no interface of this host that is up with "
					   "an IPv4 address", ifname);
		if (count > 1)
			return listen_any(fd, ifname, addrs, cap);
		*strchr(addrs, ':') = '\0';
		herd__strlcpy(via, addrs, sizeof(via));
		return listen_on(fd, via, addrs, cap);
	}
	/* The interface this rank reaches the job's store through faces the
	 * rest of the job (as NCCL's bootstrap takes the interface on
	 * NCCL_COMM_ID's subnet).  A loopback route says nothing of other
	 * hosts: tcp_addrs decides once the peers are known. */
	if (herd__store_local_addr(comm->store, via, sizeof(via)) == HERD_OK &&
	    ipv4_routable(via))
		return listen_on(fd, via, addrs, cap);
	herd_clear_error();
	return HERD_OK;
}

/* The source address this host uses toward a peer's first published address. */
static bool route_toward(const char *peer_addrs, char *ip, size_t cap)
{
	char first[HERD__COMM_ADDRS_MAX], host[HERD_NET_ADDR_LEN];
	int port;

	herd__strlcpy(first, peer_addrs, sizeof(first));
	if (strchr(first, ',') != NULL)
		*strchr(first, ',') = '\0';
	if (herd__net_parse_hostport(first, host, sizeof(host), &port) != HERD_OK) {
		herd_clear_error();
		return false;
	}
	return herd__net_source_addr(host, ip, cap);
}

/*
 * The deferred choice, after the info records: 127.0.0.1 when every peer
 * is on this host; else the address this host routes from toward the
 * first remote peer's published address; else (no peer published one)
 * every interface, likely addresses first.
 */
static herd_status listen_late(herd_comm *comm, int *fd, char *addrs, size_t cap)
{
	char ip[INET_ADDRSTRLEN];
	bool alone = true;

	for (int j = 0; j < comm->size; j++)
		alone = alone && (j == comm->rank || comm->peers[j].same_host);
	if (alone)
		return listen_on(fd, "127.0.0.1", addrs, cap);
	for (int j = 0; j < comm->size; j++)
		if (j != comm->rank && !comm->peers[j].same_host && comm->peers[j].addrs[0] != '\0' &&
		    route_toward(comm->peers[j].addrs, ip, sizeof(ip)) && ipv4_routable(ip))
			return listen_on(fd, ip, addrs, cap);
	return listen_any(fd, NULL, addrs, cap);
}

/*
 * HERD__SETUP_ADDRS: where ranks that chose no listening address at first
 * (tcp_listen) listen: each publishes "addr/RANK" once the info records
 * are in, and the others read it.
 */
static herd_status tcp_addrs(herd_comm *comm, int64_t deadline)
{
	herd__peer *me = &comm->peers[comm->rank];
	char key[32];

	if (comm->listen_fd < 0) {
		HERD_CHECK(listen_late(comm, &comm->listen_fd, me->addrs, sizeof(me->addrs)));
		snprintf(key, sizeof(key), "addr/%d", comm->rank);
		HERD_CHECK(herd_store_set(comm->store, key, me->addrs, strlen(me->addrs)));
	}
	for (int j = 0; j < comm->size; j++) {
		herd__peer *p = &comm->peers[j];
		void *val = NULL;
		size_t len = 0;

		if (j == comm->rank || p->addrs[0] != '\0')
			continue;
		snprintf(key, sizeof(key), "addr/%d", j);
		HERD_CHECK(herd_store_get(comm->store, key, herd__net_remaining_ms(deadline), &val,
					  &len));
		if (len == 0 || len >= sizeof(p->addrs) || memchr(val, '\0', len) != NULL) {
			free(val);
			return herd__error(HERD_EFORMAT, "rank %d (host %s) published a listening "
					   "address of %zu bytes", j, p->host, len);
		}
		memcpy(p->addrs, val, len);
		p->addrs[len] = '\0';
		free(val);
	}
	return HERD_OK;
}

/* ---- connecting ----------------------------------------------------------- */

/* Connects to one of the addresses peer j published: its loopback one when
 * it is on this host, else each in turn. */
static herd_status connect_peer(herd_comm *comm, int j, int64_t deadline, int *fd)
{
	const herd__peer *p = &comm->peers[j];
	char list[HERD__COMM_ADDRS_MAX], *save = NULL, *tok;
	herd_status st = herd__error(HERD_EINVAL, "rank %d published no address", j);
	int ntok = 0;

	herd__strlcpy(list, p->addrs, sizeof(list));
	for (const char *c = list; *c != '\0'; c++)
		ntok += *c == ',';
	ntok++;
	for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save),
	     ntok--) {
		char host[HERD_NET_ADDR_LEN];
		int port;
		int64_t until = deadline;

		if (herd__net_parse_hostport(tok, host, sizeof(host), &port) != HERD_OK)
			continue;
		/* On this host, its loopback address; elsewhere, never a loopback
		 * address (that would reach some process here). */
		if (p->same_host && strstr(p->addrs, "127.0.0.1:") != NULL &&
		    strcmp(host, "127.0.0.1") != 0)
			continue;
		if (!p->same_host && strncmp(host, "127.", 4) == 0)
			continue;
		if (ntok > 1 && herd__net_now_ms() + CANDIDATE_CONNECT_MS < deadline)
			until = herd__net_now_ms() + CANDIDATE_CONNECT_MS;
		st = herd__net_connect(fd, host, port, until);
		if (st == HERD_OK)
			return HERD_OK;
	}
	return herd__error_wrap(st, "cannot reach rank %d (host %s) at %s: ", j, p->host,
				p->addrs);
}

typedef struct hs {
	int fd;
	int peer;                /* -1 until an inbound HELLO names it */
	int kind;
	int stage;               /* 0: reading HELLO, 1: reading PROOF, 2: done */
	uint8_t out[sizeof(hello) + HERD__AUTH_MAC_LEN];
	size_t out_len, out_off;
	uint8_t in[sizeof(hello)];
	size_t in_got;
	uint8_t nonce[HERD__AUTH_NONCE_LEN];
	uint8_t peer_nonce[HERD__AUTH_NONCE_LEN];
} hs;

bool herd__tcp_hello_check(const void *in, size_t len, const uint8_t *id, int rank, int size,
			   int *from, int *kind, uint8_t *nonce)
{
	hello m;

	if (len != sizeof(m))
		return false;
	memcpy(&m, in, sizeof(m));
	if (m.magic != HELLO_MAGIC || m.version != HELLO_VERSION ||
	    memcmp(m.id, id, sizeof(m.id)) != 0 || m.to != rank ||
	    m.kind < KIND_CTL || m.kind >= KIND_DATA + HERD__STREAMS_MAX)
		return false;
	/* Outbound: the peer called must answer for the same kind of link.
	 * Inbound: only a higher rank calls a lower one. */
	if (*from >= 0 ? (m.from != *from || m.kind != *kind)
		       : (m.from <= rank || m.from >= size))
		return false;
	*from = m.from;
	*kind = m.kind;
	memcpy(nonce, m.nonce, sizeof(m.nonce));
	return true;
}

/* Queues this rank's HELLO to h->peer. */
static void queue_hello(herd_comm *comm, hs *h)
{
	hello m;

	memset(&m, 0, sizeof(m));
	m.magic = HELLO_MAGIC;
	m.version = HELLO_VERSION;
	m.kind = (uint8_t)h->kind;
	m.from = comm->rank;
	m.to = h->peer;
	memcpy(m.id, comm->id, sizeof(m.id));
	memcpy(m.nonce, h->nonce, sizeof(m.nonce));
	memcpy(h->out + h->out_len, &m, sizeof(m));
	h->out_len += sizeof(m);
}

/* Starts a handshake: an outbound connection (peer >= 0) speaks first; an
 * inbound one answers once the HELLO has said who is calling. */
static herd_status hs_begin(herd_comm *comm, hs *h, int fd, int peer, int kind)
{
	memset(h, 0, sizeof(*h));
	h->fd = fd;
	h->peer = peer;
	h->kind = kind;
	HERD_CHECK(herd__auth_random(h->nonce, sizeof(h->nonce)));
	if (peer >= 0)
		queue_hello(comm, h);
	return HERD_OK;
}

static void proof(const herd_comm *comm, uint8_t out[HERD__AUTH_MAC_LEN], int from, int to,
		  int kind, const uint8_t *first, const uint8_t *second)
{
	char label[64];

	if (kind <= KIND_DATA)
		snprintf(label, sizeof(label), "herd-comm/1 %d->%d %s", from, to,
			 kind == KIND_CTL ? "ctl" : "data");
	else
		snprintf(label, sizeof(label), "herd-comm/1 %d->%d data.%d", from, to,
			 kind - KIND_DATA);
	herd__auth_mac(out, comm->key, sizeof(comm->key), first, second, label);
}

/*
 * Moves a handshake along.  Returns HERD_OK (h->stage 2 when done), or an
 * error: the connection is then dropped (an inbound stray) or the init
 * fails (a known peer).
 */
static herd_status hs_step(herd_comm *comm, hs *h, bool *taken)
{
	char who[HERD__COMM_HOST_MAX + 32];

	while (h->out_off < h->out_len) {
		ssize_t n = send(h->fd, h->out + h->out_off, h->out_len - h->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			h->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		return herd__error_errno(HERD_EPEER, errno, "connection handshake with rank %d",
					 h->peer);
	}
	while (h->stage < 2) {
		size_t want = h->stage == 0 ? sizeof(hello) : HERD__AUTH_MAC_LEN;
		ssize_t n = recv(h->fd, h->in + h->in_got, want - h->in_got, MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return HERD_OK;
		if (n <= 0)
			return herd__error(HERD_EPEER, "%s closed the connection during the "
					   "handshake (it refused this rank's proof, or failed)",
					   h->peer >= 0 ? herd__comm_who(comm, h->peer, who,
									   sizeof(who))
							: "a peer");
		h->in_got += (size_t)n;
		if (h->in_got < want)
			continue;
		h->in_got = 0;
		if (h->stage == 0) {
			int from = h->peer, kind = h->kind;

			if (!herd__tcp_hello_check(h->in, sizeof(h->in), comm->id, comm->rank,
						   comm->size, &from, &kind, h->peer_nonce))
				return herd__error(HERD_EAUTH, "a connection sent a HELLO that is not "
						   "for this communicator and rank");
			if (h->peer < 0) {
				/* An inbound connection: which slot it fills is checked by the
				 * caller once the proof is in. */
				h->peer = from;
				h->kind = kind;
				queue_hello(comm, h);
			}
			proof(comm, h->out + h->out_len, comm->rank, h->peer, h->kind, h->peer_nonce,
			      h->nonce);
			h->out_len += HERD__AUTH_MAC_LEN;
			h->stage = 1;
			return hs_step(comm, h, taken);
		}
		{
			uint8_t want_mac[HERD__AUTH_MAC_LEN];

			proof(comm, want_mac, h->peer, comm->rank, h->kind, h->nonce, h->peer_nonce);
			if (!herd__auth_mac_equal(want_mac, h->in, HERD__AUTH_MAC_LEN))
				return herd__error(HERD_EAUTH, "%s failed to prove it holds the "
						   "communicator's key",
						   herd__comm_who(comm, h->peer, who, sizeof(who)));
			h->stage = 2;
		}
	}
	(void)taken;
	return HERD_OK;
}

/*
 * TCP_NODELAY, and socket buffers left to the kernel's autotuning: an
 * explicit SO_SNDBUF/SO_RCVBUF turns autotuning off and is capped by
 * net.core.[rw]mem_max (often 4 MiB or less), while autotuning grows to
 * net.ipv4.tcp_[rw]mem's maximum (32 MiB here and on most distributions).
 * On loopback, 1 and 4 MiB explicit buffers measured no better than
 * autotuning (1.5 GB/s per direction either way); between namespaces on
 * links shaped to 1 Gbit/s, one autotuned connection per pair carries an
 * allreduce at 96% of the link's bound (bench/RESULTS.md).  Where one
 * connection cannot fill a link, HERD_SOCKET_STREAMS opens several per
 * pair (the mesh below; p2p.c cuts large messages across them).
 */
static void set_data_socket_options(int fd)
{
	int on = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/*
 * A control connection to a peer on another host also watches that host:
 * keepalive probes after 2 s of silence, 1 s apart, 3 of them, and at most
 * 5 s for sent bytes to be acknowledged, so that a host that vanishes
 * (power, network) breaks the connection within about 5 s.  The kernel
 * answers probes for a stopped process, so a debugger's pause is no death.
 */
static void set_control_socket_options(int fd)
{
	int on = 1, idle = 2, intvl = 1, cnt = 3;
	unsigned int user_timeout_ms = 5000;

	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
			 sizeof(user_timeout_ms));
}

static herd_status tcp_link_new(herd_comm *comm, int peer, int fd, herd__link **out);

/* The TCP data connections of the pair with peer: none when another
 * transport joins it (shared memory). */
static int data_links(const herd_comm *comm, int peer)
{
	return comm->peers[peer].via == &herd__tcp_transport ? herd__comm_streams(comm, peer) : 0;
}

/*
 * HERD__SETUP_CONNECT: connects and authenticates the control connection
 * to every peer, and the TCP data links of every pair this transport
 * joins; then closes the listening socket, which no peer needs any more.
 */
static herd_status tcp_mesh(herd_comm *comm, int64_t deadline)
{
	int listen_fd = comm->listen_fd;
	hs *conns = NULL;
	struct pollfd *pfds = NULL;
	size_t n = 0, cap = 0, expect = 0, done = 0;
	char who[HERD__COMM_HOST_MAX + 32];
	herd_status st = HERD_OK;

	for (int j = 0; j < comm->size; j++)
		if (j != comm->rank)
			expect += 1 + (size_t)data_links(comm, j);
	cap = expect + 16;
	HERD_CHECK(herd__calloc(&conns, cap, sizeof(*conns), "connection handshakes"));
	HERD_CHECK_GOTO(herd__calloc(&pfds, cap + 1, sizeof(*pfds), "connection handshakes"),
			st, out);
	for (size_t i = 0; i < cap; i++)
		conns[i].fd = -1;

	/* Outbound: to every lower rank, a control connection and the data
	 * connections (none over shared memory). */
	for (int j = 0; j < comm->rank; j++) {
		for (int kind = KIND_CTL; kind < KIND_DATA + data_links(comm, j); kind++) {
			int fd;

			HERD_CHECK_GOTO(connect_peer(comm, j, deadline, &fd), st, out);
			if (kind >= KIND_DATA)
				set_data_socket_options(fd);
			st = hs_begin(comm, &conns[n], fd, j, kind);
			n++;
			if (st != HERD_OK)
				goto out;
		}
	}

	while (done < expect) {
		nfds_t np = 0;
		int rc;

		pfds[np++] = (struct pollfd){ listen_fd, POLLIN, 0 };
		for (size_t i = 0; i < n; i++) {
			short ev = POLLIN;

			if (conns[i].fd < 0 || conns[i].stage == 2)
				continue;
			if (conns[i].out_off < conns[i].out_len)
				ev |= POLLOUT;
			pfds[np++] = (struct pollfd){ conns[i].fd, ev, 0 };
		}
		rc = poll(pfds, np, herd__net_remaining_ms(deadline));
		if (rc < 0 && errno != EINTR) {
			st = herd__error_errno(HERD_ESYS, errno, "waiting for the connections "
					       "with the peers");
			goto out;
		}
		if (rc == 0 && herd__net_now_ms() >= deadline)
			break;
		/* New inbound connections. */
		for (;;) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd < 0)
				break;
			if (n == cap) {
				close(fd);
				continue;
			}
			set_data_socket_options(fd);
			HERD_CHECK_GOTO(hs_begin(comm, &conns[n], fd, -1, 0), st, out);
			n++;
		}
		done = 0;
		for (size_t i = 0; i < n; i++) {
			hs *h = &conns[i];
			bool inbound = h->peer < 0 || h->peer > comm->rank;
			herd_status hst;

			if (h->fd < 0)
				continue;
			if (h->stage < 2 || h->out_off < h->out_len) {
				hst = hs_step(comm, h, NULL);
				if (hst != HERD_OK) {
					if (!inbound) {
						st = hst;
						goto out;
					}
					/* Not one of ours, or not proven: drop it, keep waiting. */
					herd__log_warn("rank %d dropped an incoming connection: %s",
						       comm->rank, herd_last_error());
					close(h->fd);
					h->fd = -1;
					continue;
				}
			}
			if (h->stage == 2 && h->out_off == h->out_len && inbound &&
			    h->kind - KIND_DATA >= data_links(comm, h->peer)) {
				/* A data connection this pair does not use. */
				herd__log_warn("rank %d dropped data connection %d from rank %d: "
					       "the pair uses %d", comm->rank, h->kind - KIND_DATA,
					       h->peer, data_links(comm, h->peer));
				close(h->fd);
				h->fd = -1;
				continue;
			}
			if (h->stage == 2 && h->out_off == h->out_len) {
				/* A duplicate of a connection already made is dropped. */
				for (size_t k = 0; k < i; k++)
					if (conns[k].fd >= 0 && conns[k].peer == h->peer &&
					    conns[k].kind == h->kind && conns[k].stage == 2) {
						close(h->fd);
						h->fd = -1;
						break;
					}
				if (h->fd >= 0)
					done++;
			}
		}
	}
	if (done < expect) {
		char list[512];
		size_t o = 0;

		list[0] = '\0';
		for (int j = 0; j < comm->size; j++) {
			int have = 0, need = 1 + data_links(comm, j);

			if (j == comm->rank)
				continue;
			for (size_t i = 0; i < n; i++)
				if (conns[i].fd >= 0 && conns[i].peer == j && conns[i].stage == 2)
					have++;
			if (have < need && o + 40 < sizeof(list))
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s",
						      o > 0 ? ", " : "",
						      herd__comm_who(comm, j, who, sizeof(who)));
		}
		st = herd__error(HERD_ETIMEDOUT, HERD__COMM_JOINING " timed out on %s connecting to "
				 "its peers: no connection with %s",
				 herd__comm_who(comm, comm->rank, who, sizeof(who)), list);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		hs *h = &conns[i];

		if (h->fd < 0)
			continue;
		if (h->kind == KIND_CTL) {
			set_control_socket_options(h->fd);
			comm->peers[h->peer].ctl_fd = h->fd;
		} else {
			herd__link *link;
			int k = h->kind - KIND_DATA;

			HERD_CHECK_GOTO(tcp_link_new(comm, h->peer, h->fd, &link), st, out);
			if (k == 0)
				comm->peers[h->peer].link = link;
			else
				comm->peers[h->peer].more[k - 1] = link;
		}
		h->fd = -1;
	}
out:
	for (size_t i = 0; i < n; i++)
		if (conns[i].fd >= 0)
			close(conns[i].fd);
	free(conns);
	free(pfds);
	close(listen_fd);
	comm->listen_fd = -1;
	return st;
}

/* ---- the data link -------------------------------------------------------- */

typedef struct tcp_link {
	herd__link base;
	int fd;
	uint8_t *bounce;         /* reductions: received bytes not yet reduced */
	size_t bfill;
} tcp_link;

/* The peer's end failed: a message that names it and what was under way. */
static herd_status peer_gone(tcp_link *t, int err, const char *doing, size_t left)
{
	herd_comm *comm = t->base.comm;
	herd__peer *p = &comm->peers[t->base.peer];
	char me[HERD__COMM_HOST_MAX + 32], call[160];

	herd__comm_who(comm, comm->rank, me, sizeof(me));
	if (comm->op != NULL)
		snprintf(call, sizeof(call), "%s #%" PRIu64,
			 herd__op_name((herd__op_kind)comm->op->fp.kind), comm->op->fp.seq);
	else
		snprintf(call, sizeof(call), "a call");
	if (atomic_load(&p->left))
		return herd__error(HERD_EPEER, "%s failed on %s: rank %d (host %s) destroyed its "
				   "communicator while %zu bytes were still to %s it", call, me,
				   t->base.peer, p->host, left, doing);
	return herd__error(HERD_EPEER, "%s failed on %s: rank %d (host %s, pid %d) closed its "
			   "connection (%s) with %zu bytes still to %s it: it died, aborted or "
			   "exited", call, me, t->base.peer, p->host, (int)p->pid,
			   err != 0 ? strerror(err) : "end of stream", left, doing);
}

static herd_status tcp_try_send(herd__link *link, herd__tx *tx, bool *progressed)
{
	tcp_link *t = (tcp_link *)link;
	const size_t hlen = sizeof(tx->hdr), total = hlen + tx->len;
	size_t budget = TRY_BUDGET;

	while (tx->off < total && budget > 0) {
		struct iovec iov[2];
		struct msghdr mh;
		int niov = 0;
		ssize_t n;

		if (tx->off < hlen) {
			iov[niov].iov_base = (uint8_t *)&tx->hdr + tx->off;
			iov[niov++].iov_len = hlen - tx->off;
			if (tx->len > 0) {
				iov[niov].iov_base = (void *)tx->buf;
				iov[niov++].iov_len = tx->len;
			}
		} else {
			iov[niov].iov_base = (void *)(tx->buf + (tx->off - hlen));
			iov[niov++].iov_len = total - tx->off;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)niov;
		n = sendmsg(t->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			tx->off += (size_t)n;
			budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
			*progressed = true;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		return peer_gone(t, n < 0 ? errno : 0, "send to", total - tx->off);
	}
	tx->done = tx->off == total;
	return HERD_OK;
}

static herd_status tcp_try_recv(herd__link *link, herd__rx *rx, bool *progressed)
{
	tcp_link *t = (tcp_link *)link;
	const size_t hlen = sizeof(rx->hdr);
	size_t budget = TRY_BUDGET;

	while (!rx->done && budget > 0) {
		ssize_t n;

		if (rx->hdr_got < hlen) {
			n = recv(t->fd, (uint8_t *)&rx->hdr + rx->hdr_got, hlen - rx->hdr_got,
				 MSG_DONTWAIT);
			if (n > 0) {
				rx->hdr_got += (size_t)n;
				*progressed = true;
				if (rx->hdr_got == hlen) {
					HERD_CHECK(rx->check(rx, rx->ctx));
					rx->done = rx->len == 0;
				}
				continue;
			}
		} else if (rx->sink.reduce_with == NULL) {
			size_t want = rx->len - rx->off;
			uint8_t *dst = (uint8_t *)rx->sink.dst + rx->off;

			n = recv(t->fd, dst, want < budget ? want : budget, MSG_DONTWAIT);
			if (n > 0) {
				herd__rx_deliver(rx, dst, (size_t)n);
				budget -= (size_t)n;
				*progressed = true;
				rx->done = rx->off == rx->len;
				continue;
			}
		} else {
			size_t want = rx->len - rx->off - t->bfill, usable;

			if (t->bounce == NULL) {
				t->bounce = malloc(BOUNCE_CAP);
				if (t->bounce == NULL)
					return herd__error(HERD_ENOMEM, "out of memory for a receive "
							   "buffer of %u bytes", BOUNCE_CAP);
			}
			if (want > BOUNCE_CAP - t->bfill)
				want = BOUNCE_CAP - t->bfill;
			n = recv(t->fd, t->bounce + t->bfill, want, MSG_DONTWAIT);
			if (n > 0) {
				t->bfill += (size_t)n;
				usable = t->bfill - t->bfill % rx->elsize;
				herd__rx_deliver(rx, t->bounce, usable);
				memmove(t->bounce, t->bounce + usable, t->bfill - usable);
				t->bfill -= usable;
				budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
				*progressed = true;
				rx->done = rx->off == rx->len;
				continue;
			}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		return peer_gone(t, n < 0 ? errno : 0, "receive from",
				 rx->hdr_got < hlen ? rx->len + hlen - rx->hdr_got : rx->len - rx->off);
	}
	return HERD_OK;
}

static int tcp_fd(const herd__link *link)
{
	return ((const tcp_link *)link)->fd;
}

static void tcp_shutdown(herd__link *link)
{
	shutdown(((tcp_link *)link)->fd, SHUT_RDWR);
}

static void tcp_close(herd__link *link)
{
	tcp_link *t = (tcp_link *)link;

	close(t->fd);
	free(t->bounce);
	free(t);
}

static const herd__link_ops tcp_ops = {
	.name = "tcp",
	.try_send = tcp_try_send,
	.try_recv = tcp_try_recv,
	.fd = tcp_fd,
	.shutdown = tcp_shutdown,
	.close = tcp_close,
};

static herd_status tcp_link_new(herd_comm *comm, int peer, int fd, herd__link **out)
{
	tcp_link *t;

	HERD_CHECK(herd__calloc(&t, 1, sizeof(*t), "a TCP link"));
	t->base.ops = &tcp_ops;
	t->base.comm = comm;
	t->base.peer = peer;
	t->fd = fd;
	*out = &t->base;
	return HERD_OK;
}

/* ---- the transport ------------------------------------------------------ */

static bool tcp_can_connect(const herd_comm *comm, int peer)
{
	(void)comm;
	(void)peer;
	return true;
}

/* The fewer of the two ranks' HERD_SOCKET_STREAMS. */
static int tcp_streams(const herd_comm *comm, int peer)
{
	int mine = comm->peers[comm->rank].streams, theirs = comm->peers[peer].streams;

	return mine < theirs ? mine : theirs;
}

/* The listening socket of an init that failed before the mesh. */
static void tcp_free(herd_comm *comm)
{
	if (comm->listen_fd >= 0)
		close(comm->listen_fd);
	comm->listen_fd = -1;
}

const herd__transport herd__tcp_transport = {
	.name = "tcp",
	.can_connect = tcp_can_connect,
	.streams = tcp_streams,
	.sockets = true,
	.setup = {
		[HERD__SETUP_LISTEN] = tcp_listen,
		[HERD__SETUP_ADDRS] = tcp_addrs,
		[HERD__SETUP_CONNECT] = tcp_mesh,
	},
	.free = tcp_free,
};
