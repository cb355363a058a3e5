/*
 * sdk/comm/monitor.c - the control connections and the monitor thread.
 *
 * Every rank holds one control connection to every peer, beside the data
 * links.  Nothing but small frames travels on it, so the monitor thread can
 * read it at any time, whatever the data links are doing:
 *
 *   - a peer process that dies closes it (the kernel does that for a killed
 *     process), and the monitor breaks the communicator within
 *     milliseconds, whether or not this rank was exchanging data with that
 *     peer at the time; a peer on this host is watched through a pidfd as
 *     well;
 *   - destroy sends BYE first, so that a clean exit is not taken for a
 *     crash; abort sends ABORT;
 *   - a rank whose call failed (mismatch, timeout, a dead peer, or a
 *     peer's FAILED) sends FAILED with its status and message, once, so
 *     that peers blocked on it return too instead of waiting for their
 *     deadline, and learn the cause before they see this rank exit;
 *   - QUERY / STATUS: a rank whose call timed out asks every peer what it
 *     is doing, for the message that names who did not arrive.
 *
 * A frame is {uint32 magic, uint16 type, uint16 payload length} and the
 * payload, at most CTL_PAYLOAD_MAX bytes, in host byte order.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base.h"
#include "comm/core.h"
#include "net.h"

#define CTL_MAGIC 0x4c544348u      /* "HCTL" */
#define CTL_PAYLOAD_MAX HERD__CTL_PAYLOAD_MAX
#define CTL_WRITE_WAIT_MS 200
#define MONITOR_TICK_MS 1000

typedef herd__ctl_hdr ctl_hdr;

typedef struct ctl_status {
	uint32_t token;
	uint8_t entered_kind, done_kind, busy, pad;
	uint64_t entered_seq, entered_cseq, done_seq;
} ctl_status;

/* Whether h heads a control frame at all. */
static bool hdr_ok(const herd__ctl_hdr *h)
{
	return h->magic == CTL_MAGIC && h->len <= CTL_PAYLOAD_MAX;
}

long herd__ctl_frame(const uint8_t *buf, size_t len, herd__ctl_hdr *h, const uint8_t **payload)
{
	if (len < sizeof(*h))
		return 0;
	memcpy(h, buf, sizeof(*h));
	if (!hdr_ok(h))
		return -1;
	if (len - sizeof(*h) < h->len)
		return 0;
	*payload = buf + sizeof(*h);
	return (long)(sizeof(*h) + h->len);
}

bool herd__ctl_failed_parse(const uint8_t *payload, size_t len, herd_status *code,
			    const char **text, int *text_len)
{
	int32_t c;

	if (len < sizeof(c) || len > CTL_PAYLOAD_MAX)
		return false;
	memcpy(&c, payload, sizeof(c));
	/* A timeout or a mismatch is the same here; anything else (a local
	 * error over there) is a failed peer. */
	*code = c == HERD_ETIMEDOUT || c == HERD_EMISMATCH ? (herd_status)c : HERD_EPEER;
	*text = (const char *)payload + sizeof(c);
	*text_len = (int)(len - sizeof(c));
	return true;
}

/* Writes a frame whole (ctl_mu held): a frame cut short would leave the
 * stream out of step, so a short wait for room is allowed. */
static herd_status ctl_write(herd_comm *comm, int peer, uint32_t type, const void *payload,
			     size_t len)
{
	uint8_t frame[sizeof(ctl_hdr) + CTL_PAYLOAD_MAX];
	ctl_hdr h;
	int64_t deadline = herd__net_deadline(CTL_WRITE_WAIT_MS);
	int fd = comm->peers[peer].ctl_fd;
	size_t off = 0, total;

	if (fd < 0)
		return HERD_OK;
	if (len > CTL_PAYLOAD_MAX)
		len = CTL_PAYLOAD_MAX;
	h = (ctl_hdr){ CTL_MAGIC, (uint16_t)type, (uint16_t)len };
	total = sizeof(h) + len;
	memcpy(frame, &h, sizeof(h));
	if (len > 0)
		memcpy(frame + sizeof(h), payload, len);
	while (off < total) {
		ssize_t n = send(fd, frame + off, total - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		struct pollfd pfd = { fd, POLLOUT, 0 };

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return herd__error_errno(HERD_ECLOSED, errno, "control connection to rank %d",
						 peer);
		if (poll(&pfd, 1, herd__net_remaining_ms(deadline)) <= 0 &&
		    herd__net_now_ms() >= deadline)
			return herd__error(HERD_ETIMEDOUT, "rank %d does not read its control "
					   "connection", peer);
	}
	return HERD_OK;
}

herd_status herd__ctl_send(herd_comm *comm, int peer, uint32_t type, const void *payload,
			   size_t len)
{
	herd_status st;

	pthread_mutex_lock(&comm->ctl_mu);
	st = ctl_write(comm, peer, type, payload, len);
	pthread_mutex_unlock(&comm->ctl_mu);
	return st;
}

void herd__ctl_abort(herd_comm *comm)
{
	ctl_hdr h = { CTL_MAGIC, HERD__CTL_ABORT, 0 };

	/* A timed-out call asking its peers what they do stops asking. */
	pthread_mutex_lock(&comm->mon_mu);
	pthread_cond_broadcast(&comm->mon_cv);
	pthread_mutex_unlock(&comm->mon_mu);

	pthread_mutex_lock(&comm->ctl_mu);
	for (int j = 0; j < comm->size; j++) {
		int fd = comm->peers[j].ctl_fd;

		if (fd < 0)
			continue;
		/* One try: a peer that does not read still sees the shutdown. */
		if (send(fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			herd__log_debug("abort: no ABORT frame to rank %d: %s", j, strerror(errno));
		shutdown(fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&comm->ctl_mu);
}

/* Reads exactly n bytes before deadline (init only). */
static herd_status read_exact(herd_comm *comm, int peer, void *buf, size_t n, int64_t deadline)
{
	char who[HERD__COMM_HOST_MAX + 32];
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(comm->peers[peer].ctl_fd, (uint8_t *)buf + got, n - got,
				 MSG_DONTWAIT);
		struct pollfd pfd = { comm->peers[peer].ctl_fd, POLLIN, 0 };

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return herd__error(HERD_EPEER, "%s closed its control connection during init",
					   herd__comm_who(comm, peer, who, sizeof(who)));
		if (poll(&pfd, 1, herd__net_remaining_ms(deadline)) == 0)
			return herd__error(HERD_ETIMEDOUT, "%s did not finish joining the "
					   "communicator in time",
					   herd__comm_who(comm, peer, who, sizeof(who)));
	}
	return HERD_OK;
}

herd_status herd__ctl_expect(herd_comm *comm, int peer, uint32_t want, int64_t deadline)
{
	uint8_t payload[CTL_PAYLOAD_MAX];
	ctl_hdr h;

	HERD_CHECK(read_exact(comm, peer, &h, sizeof(h), deadline));
	if (!hdr_ok(&h) || h.type != want)
		return herd__error(HERD_EFORMAT, "rank %d sent control frame type %u during init, "
				   "expected %u", peer, h.type, want);
	return read_exact(comm, peer, payload, h.len, deadline);
}

/* ---- the monitor thread --------------------------------------------------- */

/* A peer that will not answer the current query any more. */
static void query_resolve(herd_comm *comm, int j)
{
	herd__peer *p = &comm->peers[j];

	pthread_mutex_lock(&comm->mon_mu);
	if (comm->query_sent != 0 && !p->resolved) {
		p->resolved = true;
		comm->query_answers++;
		pthread_cond_broadcast(&comm->mon_cv);
	}
	pthread_mutex_unlock(&comm->mon_mu);
}

static void peer_dead(herd_comm *comm, int j, const char *why)
{
	herd__peer *p = &comm->peers[j];
	char doing[HERD__COMM_MSG_MAX / 2];

	if (p->dead || atomic_load(&p->left))
		return;
	p->dead = true;
	query_resolve(comm, j);
	herd__comm_doing(comm, doing, sizeof(doing));
	/* Passed on: a peer that has not seen it yet learns the cause from this
	 * rank rather than only that this rank left. */
	if (comm->name[0] != '\0' && comm->parent != NULL)
		herd__comm_fail_msg(comm, HERD_EPEER, true, "%s: rank %d (host %s, pid %d, in %s, "
				    "rank %d of its parent) died: %s", doing, j, p->host, (int)p->pid,
				    comm->name, comm->parent[j], why);
	else
		herd__comm_fail_msg(comm, HERD_EPEER, true, "%s: rank %d (host %s, pid %d) died: %s",
				    doing, j, p->host, (int)p->pid, why);
}

static void on_frame(herd_comm *comm, int j, const ctl_hdr *h, const uint8_t *payload)
{
	herd__peer *p = &comm->peers[j];
	char doing[HERD__COMM_MSG_MAX / 2];

	switch (h->type) {
	case HERD__CTL_BYE:
		atomic_store(&p->left, 1);
		query_resolve(comm, j);
		/* A rank waiting on it through shared memory checks `left`. */
		herd__comm_ring(comm);
		break;
	case HERD__CTL_ABORT:
		p->dead = true;
		query_resolve(comm, j);
		herd__comm_doing(comm, doing, sizeof(doing));
		herd__comm_fail_msg(comm, HERD_EPEER, false, "%s: rank %d (host %s) aborted its "
				    "communicator", doing, j, p->host);
		break;
	case HERD__CTL_FAILED: {
		herd_status code;
		const char *text;
		int text_len;

		if (!herd__ctl_failed_parse(payload, h->len, &code, &text, &text_len))
			break;
		/* Passed on too (once): a peer that has not heard yet must not
		 * learn of it only from this rank's exit. */
		herd__comm_doing(comm, doing, sizeof(doing));
		herd__comm_fail_msg(comm, code, true, "%s: rank %d (host %s) failed first: %.*s",
				    doing, j, p->host, text_len, text);
		break;
	}
	case HERD__CTL_QUERY: {
		ctl_status s = { 0 };

		if (h->len < sizeof(s.token))
			break;
		memcpy(&s.token, payload, sizeof(s.token));
		s.entered_seq = atomic_load(&comm->st_entered_seq);
		s.entered_cseq = atomic_load(&comm->st_entered_cseq);
		s.entered_kind = (uint8_t)atomic_load(&comm->st_entered_kind);
		s.done_seq = atomic_load(&comm->st_done_seq);
		s.done_kind = (uint8_t)atomic_load(&comm->st_done_kind);
		s.busy = (uint8_t)atomic_load(&comm->st_busy);
		(void)herd__ctl_send(comm, j, HERD__CTL_STATUS, &s, sizeof(s));
		break;
	}
	case HERD__CTL_STATUS: {
		ctl_status s;

		if (h->len < sizeof(s))
			break;
		memcpy(&s, payload, sizeof(s));
		pthread_mutex_lock(&comm->mon_mu);
		if (s.token == comm->query_sent && !p->resolved) {
			p->answer.entered_seq = s.entered_seq;
			p->answer.entered_cseq = s.entered_cseq;
			p->answer.entered_kind = s.entered_kind;
			p->answer.done_seq = s.done_seq;
			p->answer.done_kind = s.done_kind;
			p->answer.busy = s.busy;
			p->answered = p->resolved = true;
			comm->query_answers++;
			pthread_cond_broadcast(&comm->mon_cv);
		}
		pthread_mutex_unlock(&comm->mon_mu);
		break;
	}
	default:
		break;
	}
}

/* Reads what peer j sent on its control connection and acts on each frame. */
static void ctl_read(herd_comm *comm, int j)
{
	herd__peer *p = &comm->peers[j];

	while (!p->ctl_eof) {
		ssize_t n = recv(p->ctl_fd, p->ctl_in + p->ctl_in_len,
				 sizeof(p->ctl_in) - p->ctl_in_len, MSG_DONTWAIT);
		size_t off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			char why[160];

			if (n == 0 || errno == ECONNRESET)
				snprintf(why, sizeof(why), "its control connection closed without a "
					 "goodbye (the process died, or exited without destroying "
					 "its communicator)");
			else
				snprintf(why, sizeof(why), "its control connection failed (%s): the "
					 "host or the network between went away", strerror(errno));
			p->ctl_eof = true;
			query_resolve(comm, j);
			peer_dead(comm, j, why);
			return;
		}
		p->ctl_in_len += (size_t)n;
		for (;;) {
			ctl_hdr h;
			const uint8_t *payload = NULL;
			long used = herd__ctl_frame(p->ctl_in + off, p->ctl_in_len - off, &h,
						    &payload);

			if (used < 0) {
				p->ctl_eof = true;
				peer_dead(comm, j, "it sent garbage on its control connection");
				return;
			}
			if (used == 0)
				break;
			on_frame(comm, j, &h, payload);
			off += (size_t)used;
		}
		memmove(p->ctl_in, p->ctl_in + off, p->ctl_in_len - off);
		p->ctl_in_len -= off;
	}
}

void herd__comm_tell_peers(herd_comm *comm)
{
	uint8_t payload[CTL_PAYLOAD_MAX];
	int32_t code;
	size_t len;
	bool go;

	pthread_mutex_lock(&comm->fail_mu);
	go = comm->fail_propagate && !comm->fail_told;
	comm->fail_propagate = false;
	comm->fail_told = comm->fail_told || go;
	code = (int32_t)atomic_load(&comm->status);
	len = strnlen(comm->fail_msg, sizeof(payload) - sizeof(code));
	memcpy(payload, &code, sizeof(code));
	memcpy(payload + sizeof(code), comm->fail_msg, len);
	pthread_mutex_unlock(&comm->fail_mu);
	if (!go)
		return;
	/* (A peer whose connection is gone already fails the send at once.) */
	for (int j = 0; j < comm->size; j++)
		if (comm->peers[j].ctl_fd >= 0)
			(void)herd__ctl_send(comm, j, HERD__CTL_FAILED, payload, sizeof(code) + len);
}

/* Sends a query that a timed-out call asked for. */
static void send_query(herd_comm *comm)
{
	uint32_t token;

	pthread_mutex_lock(&comm->mon_mu);
	token = comm->query_token;
	if (token == comm->query_sent) {
		pthread_mutex_unlock(&comm->mon_mu);
		return;
	}
	comm->query_sent = token;
	comm->query_answers = 0;
	comm->query_expect = 0;
	for (int j = 0; j < comm->size; j++) {
		herd__peer *p = &comm->peers[j];

		p->answered = false;
		/* Peers gone already are not waited for. */
		p->resolved = p->ctl_fd < 0 || p->ctl_eof || p->dead || atomic_load(&p->left);
		comm->query_expect += !p->resolved;
	}
	pthread_cond_broadcast(&comm->mon_cv);
	pthread_mutex_unlock(&comm->mon_mu);
	for (int j = 0; j < comm->size; j++)
		if (!comm->peers[j].resolved)
			(void)herd__ctl_send(comm, j, HERD__CTL_QUERY, &token, sizeof(token));
}

/* Where pidfds are not available: whether the local peers' pids still
 * exist, once a tick (their control connections tell first anyway). */
static void check_pids(herd_comm *comm)
{
	for (int j = 0; j < comm->size; j++) {
		herd__peer *p = &comm->peers[j];
		char why[64];

		if (j == comm->rank || !p->same_pidns || p->pidfd >= 0 || p->dead ||
		    atomic_load(&p->left))
			continue;
		if (kill((pid_t)p->pid, 0) == 0 || errno != ESRCH)
			continue;
		ctl_read(comm, j);
		snprintf(why, sizeof(why), "process %d is gone", (int)p->pid);
		peer_dead(comm, j, why);
	}
}

static void *monitor_main(void *arg)
{
	herd_comm *comm = arg;
	struct pollfd *fds = NULL;
	int *owner = NULL;
	size_t cap = 2 * (size_t)comm->size + 1;

	fds = calloc(cap, sizeof(*fds));
	owner = calloc(cap, sizeof(*owner));
	if (fds == NULL || owner == NULL) {
		herd__comm_fail_msg(comm, HERD_ENOMEM, false, "out of memory in the monitor "
				    "thread of rank %d", comm->rank);
		free(fds);
		free(owner);
		return NULL;
	}
	while (!atomic_load(&comm->mon_stop)) {
		nfds_t n = 0;
		int rc;

		fds[n++] = (struct pollfd){ comm->mon_fd, POLLIN, 0 };
		for (int j = 0; j < comm->size; j++) {
			herd__peer *p = &comm->peers[j];

			if (p->ctl_fd >= 0 && !p->ctl_eof) {
				owner[n] = j;
				fds[n++] = (struct pollfd){ p->ctl_fd, POLLIN, 0 };
			}
			if (p->pidfd >= 0 && !p->dead && !atomic_load(&p->left)) {
				owner[n] = -2 - j;
				fds[n++] = (struct pollfd){ p->pidfd, POLLIN, 0 };
			}
		}
		rc = poll(fds, n, MONITOR_TICK_MS);
		if (rc < 0 && errno != EINTR) {
			herd__log_warn("rank %d cannot watch its peers: %s", comm->rank, strerror(errno));
			usleep(10000);
			continue;
		}
		if (fds[0].revents) {
			uint64_t v;
			ssize_t r = read(comm->mon_fd, &v, sizeof(v));

			(void)r;
		}
		for (nfds_t i = 1; i < n; i++)
			if (fds[i].revents && owner[i] >= 0)
				ctl_read(comm, owner[i]);
		for (nfds_t i = 1; i < n; i++) {
			int j = -2 - owner[i];
			char why[64];

			if (!fds[i].revents || owner[i] >= 0)
				continue;
			/* A goodbye may sit unread beside the exit. */
			ctl_read(comm, j);
			snprintf(why, sizeof(why), "process %d exited", (int)comm->peers[j].pid);
			peer_dead(comm, j, why);
		}
		if (rc == 0)
			check_pids(comm);
		herd__comm_tell_peers(comm);
		send_query(comm);
	}
	herd__comm_tell_peers(comm);
	free(fds);
	free(owner);
	return NULL;
}

void herd__monitor_kick(herd_comm *comm)
{
	uint64_t one = 1;

	if (comm->mon_fd >= 0) {
		ssize_t n = write(comm->mon_fd, &one, sizeof(one));

		(void)n;
	}
}

herd_status herd__monitor_start(herd_comm *comm)
{
	HERD_CHECK(herd__comm_thread_start(&comm->monitor, monitor_main, comm, "monitor"));
	comm->monitor_started = true;
	return HERD_OK;
}

void herd__monitor_stop(herd_comm *comm)
{
	if (!comm->monitor_started)
		return;
	atomic_store(&comm->mon_stop, true);
	herd__monitor_kick(comm);
	pthread_join(comm->monitor, NULL);
	comm->monitor_started = false;
}

void herd__monitor_query(herd_comm *comm, int wait_ms, herd__call_state *states, bool *answered)
{
	int64_t deadline = herd__net_deadline(wait_ms);
	uint32_t token;

	if (!comm->monitor_started)
		return;
	pthread_mutex_lock(&comm->mon_mu);
	token = ++comm->query_token;
	if (token == 0)
		token = ++comm->query_token;
	pthread_mutex_unlock(&comm->mon_mu);
	herd__monitor_kick(comm);

	pthread_mutex_lock(&comm->mon_mu);
	while (!(comm->query_sent == token && comm->query_answers >= comm->query_expect) &&
	       !atomic_load(&comm->aborted) && herd__net_now_ms() < deadline) {
		herd__net_cond_wait_until(&comm->mon_cv, &comm->mon_mu, deadline);
	}
	herd__log_debug("rank %d: query %u: %d of %d peers answered in %d ms", comm->rank, token,
			comm->query_sent == token ? comm->query_answers : 0, comm->query_expect,
			wait_ms - herd__net_remaining_ms(deadline));
	if (comm->query_sent == token)
		for (int j = 0; j < comm->size; j++) {
			answered[j] = comm->peers[j].answered;
			if (answered[j])
				states[j] = comm->peers[j].answer;
		}
	pthread_mutex_unlock(&comm->mon_mu);
}
