/*
 * sdk/base/net.c - TCP socket helpers with deadlines.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "net.h"

int64_t herd__net_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void herd__net_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

int herd__net_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L };

	return pthread_cond_timedwait(cv, mu, &ts);
}

int64_t herd__net_deadline(int timeout_ms)
{
	return herd__net_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
}

int herd__net_remaining_ms(int64_t deadline)
{
	int64_t left = deadline - herd__net_now_ms();

	if (left < 0)
		return 0;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}

herd_status herd__net_parse_hostport(const char *text, char *host, size_t host_cap, int *port)
{
	const char *hend, *pstart;
	char *end;
	size_t hlen;
	long p;

	if (text == NULL || text[0] == '\0')
		return herd__error(HERD_EINVAL, "empty address; expected host:port");
	if (text[0] == '[') {
		hend = strchr(text, ']');
		if (hend == NULL || hend[1] != ':')
			return herd__error(HERD_EINVAL, "address \"%s\": expected [v6addr]:port",
					   text);
		text++;
		pstart = hend + 2;
	} else {
		hend = strrchr(text, ':');
		if (hend == NULL)
			return herd__error(HERD_EINVAL, "address \"%s\": expected host:port", text);
		if (memchr(text, ':', (size_t)(hend - text)) != NULL)
			return herd__error(HERD_EINVAL, "address \"%s\": an IPv6 address needs "
					   "brackets, as in [::1]:port", text);
		pstart = hend + 1;
	}
	hlen = (size_t)(hend - text);
	if (hlen == 0)
		return herd__error(HERD_EINVAL, "address \"%s\": empty host", text);
	if (hlen >= host_cap)
		return herd__error(HERD_EINVAL, "address \"%s\": host name too long", text);
	errno = 0;
	p = strtol(pstart, &end, 10);
	if (pstart[0] < '0' || pstart[0] > '9' || *end != '\0' || errno != 0 || p < 1 ||
	    p > 65535)
		return herd__error(HERD_EINVAL, "address \"%s\": port \"%s\" is not a number "
				   "from 1 to 65535", text, pstart);
	memcpy(host, text, hlen);
	host[hlen] = '\0';
	*port = (int)p;
	return HERD_OK;
}

static void format_sockaddr(const struct sockaddr *sa, char addr[HERD_NET_ADDR_LEN], int *port)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int p = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		p = ntohs(in->sin_port);
		snprintf(addr, HERD_NET_ADDR_LEN, "%s:%d", ip, p);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		p = ntohs(in6->sin6_port);
		snprintf(addr, HERD_NET_ADDR_LEN, "[%s]:%d", ip, p);
	} else {
		snprintf(addr, HERD_NET_ADDR_LEN, "?");
	}
	if (port != NULL)
		*port = p;
}

bool herd__net_source_addr(const char *host, char *out, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai = NULL;
	struct sockaddr_in src;
	socklen_t sl = sizeof(src);
	bool ok = false;
	int fd;

	if (getaddrinfo(host, "9", &hints, &ai) != 0 || ai == NULL)
		return false;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&src, &sl) == 0)
		ok = inet_ntop(AF_INET, &src.sin_addr, out, (socklen_t)cap) != NULL;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return ok;
}

herd_status herd__net_local_addr(int fd, char addr[HERD_NET_ADDR_LEN], int *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot read the address of socket %d",
					 fd);
	format_sockaddr((const struct sockaddr *)&ss, addr, port);
	return HERD_OK;
}

void herd__net_peer_addr(int fd, char addr[HERD_NET_ADDR_LEN])
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
		snprintf(addr, HERD_NET_ADDR_LEN, "?");
		return;
	}
	format_sockaddr((const struct sockaddr *)&ss, addr, NULL);
}

herd_status herd__net_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot make socket %d non-blocking", fd);
	return HERD_OK;
}

static herd_status resolve(struct addrinfo **res, const char *host, int port, int passive)
{
	struct addrinfo hints;
	char service[16];
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(host, service, &hints, res);
	if (rc != 0)
		return herd__error(HERD_EINVAL, "cannot resolve host \"%s\": %s", host,
				   rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
	return HERD_OK;
}

void herd__net_tune(int fd)
{
	int on = 1, idle = 10, intvl = 5, cnt = 4;

	/* Best effort: without them a vanished host is noticed at the deadline. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/*
 * One attempt on one address: 0 and *fd when connected, else the errno of
 * the failure (ETIMEDOUT when the deadline passed while connecting).
 */
static int connect_one(const struct addrinfo *ai, int64_t deadline, int *fd)
{
	struct pollfd pfd;
	socklen_t sl;
	int s, err = 0;

	s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		   ai->ai_protocol);
	if (s < 0)
		return errno;
	if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS) {
			err = errno;
			close(s);
			return err;
		}
		pfd.fd = s;
		pfd.events = POLLOUT;
		for (;;) {
			int n = poll(&pfd, 1, herd__net_remaining_ms(deadline));

			if (n > 0)
				break;
			if (n == 0 || errno != EINTR) {
				err = n == 0 ? ETIMEDOUT : errno;
				close(s);
				return err;
			}
		}
		sl = sizeof(err);
		if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
			err = errno;
		if (err != 0) {
			close(s);
			return err;
		}
	}
	herd__net_tune(s);
	*fd = s;
	return 0;
}

static int retryable(int err)
{
	return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH ||
	       err == ECONNRESET || err == ETIMEDOUT || err == EAGAIN || err == ECONNABORTED;
}

herd_status herd__net_connect(int *fd, const char *host, int port, int64_t deadline)
{
	struct addrinfo *res = NULL;
	int64_t start = herd__net_now_ms();
	int backoff_ms = 10, err = 0;

	*fd = -1;
	HERD_CHECK(resolve(&res, host, port, 0));
	for (;;) {
		for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
			err = connect_one(ai, deadline, fd);
			if (err == 0) {
				freeaddrinfo(res);
				return HERD_OK;
			}
		}
		if (!retryable(err) || herd__net_now_ms() >= deadline)
			break;
		/* The server may not be listening yet: try again a little later. */
		{
			int left = herd__net_remaining_ms(deadline);
			struct timespec ts;
			int nap = backoff_ms < left ? backoff_ms : left;

			ts.tv_sec = nap / 1000;
			ts.tv_nsec = (long)(nap % 1000) * 1000000;
			nanosleep(&ts, NULL);
			backoff_ms = backoff_ms * 2 > 500 ? 500 : backoff_ms * 2;
		}
	}
	freeaddrinfo(res);
	if (retryable(err))
		return herd__error(HERD_ETIMEDOUT, "cannot connect to %s port %d within %lld ms: "
				   "%s", host, port, (long long)(herd__net_now_ms() - start),
				   strerror(err));
	return herd__error_errno(HERD_EIO, err, "cannot connect to %s port %d", host, port);
}

herd_status herd__net_listen(int *fd, const char *host, int port)
{
	struct addrinfo *res = NULL;
	int err = 0, on = 1;

	*fd = -1;
	HERD_CHECK(resolve(&res, host, port, 1));
	for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       ai->ai_protocol);

		if (s < 0) {
			err = errno;
			continue;
		}
		(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || listen(s, SOMAXCONN) != 0) {
			err = errno;
			close(s);
			continue;
		}
		*fd = s;
		freeaddrinfo(res);
		return HERD_OK;
	}
	freeaddrinfo(res);
	return herd__error_errno(HERD_EIO, err, "cannot listen on %s port %d", host, port);
}

static herd_status wait_ready(int fd, short events, int64_t deadline, int *ready)
{
	struct pollfd pfd;
	int n;

	pfd.fd = fd;
	pfd.events = events;
	do
		n = poll(&pfd, 1, herd__net_remaining_ms(deadline));
	while (n < 0 && errno == EINTR && herd__net_now_ms() < deadline);
	if (n < 0 && errno != EINTR)
		return herd__error_errno(HERD_ESYS, errno, "waiting on socket %d", fd);
	*ready = n > 0;
	return HERD_OK;
}

herd_status herd__net_send_all(int fd, const void *data, size_t len, int64_t deadline,
			       const char *peer)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		int ready;

		if (n >= 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return herd__error_errno(HERD_ECLOSED, errno, "cannot send to %s", peer);
		HERD_CHECK(wait_ready(fd, POLLOUT, deadline, &ready));
		if (!ready)
			return herd__error(HERD_ETIMEDOUT, "%s did not take %zu bytes before the "
					   "deadline", peer, len);
	}
	return HERD_OK;
}

herd_status herd__net_recv_some(int fd, void *buf, size_t cap, size_t *got, int64_t deadline,
				const char *peer)
{
	*got = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, cap, 0);
		int ready;

		if (n > 0) {
			*got = (size_t)n;
			return HERD_OK;
		}
		if (n == 0)
			return herd__error(HERD_ECLOSED, "%s closed the connection", peer);
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return herd__error_errno(HERD_ECLOSED, errno, "connection to %s failed",
						 peer);
		HERD_CHECK(wait_ready(fd, POLLIN, deadline, &ready));
		if (!ready)
			return HERD_OK;
	}
}

/* ---- interfaces ------------------------------------------------------------ */

/*
 * Whether interface name matches spec, in NCCL_SOCKET_IFNAME's syntax: a
 * comma-separated list of name prefixes ("eth,ib"), of exact names after
 * a leading '=' ("=eth0"), either excluded instead with a leading '^'
 * ("^docker,lo", "^=eth1").
 */
bool herd__net_if_matches(const char *spec, const char *name)
{
	bool exclude = false, exact = false, hit = false;
	const char *p = spec;

	if (*p == '^') {
		exclude = true;
		p++;
	}
	if (*p == '=') {
		exact = true;
		p++;
	}
	while (*p != '\0' && !hit) {
		size_t n = strcspn(p, ",");

		if (n > 0)
			hit = exact ? strlen(name) == n && strncmp(name, p, n) == 0
				    : strncmp(name, p, n) == 0;
		p += n + (p[n] == ',');
	}
	return exclude ? !hit : hit;
}

/*
 * The rank of an interface in the default order: ordinary ones first, then
 * those that rarely reach another host (a container bridge, a virtual
 * pair, a VM bridge: "docker0" carries 172.17.0.1 on every host that runs
 * Docker), then loopback.
 */
static int if_rank(const struct ifaddrs *i)
{
	static const char *const virtual_prefixes[] = { "docker", "veth", "virbr", "br-",
							"cni", "flannel", "vxlan", NULL };

	if (i->ifa_flags & IFF_LOOPBACK)
		return 2;
	for (const char *const *v = virtual_prefixes; *v != NULL; v++)
		if (strncmp(i->ifa_name, *v, strlen(*v)) == 0)
			return 1;
	return 0;
}

/*
 * The IPv4 addresses of the interfaces that are up, as "a:port,b:port":
 * those spec matches (HERD_SOCKET_IFNAME's syntax, herd__net_if_matches; loopback
 * only when spec names it), or with spec NULL every one, in if_rank's
 * order, so that peers try the likely ones first.
 */
herd_status herd__net_if_addrs(const char *spec, int port, char *out, size_t cap, int *count)
{
	struct ifaddrs *ifs = NULL;
	size_t o = 0;

	*count = 0;
	out[0] = '\0';
	if (getifaddrs(&ifs) != 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot list the network interfaces");
	for (int pass = 0; pass < 3; pass++) {
		for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
			char ip[INET_ADDRSTRLEN];
			int n;

			if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
			    !(i->ifa_flags & IFF_UP) || if_rank(i) != pass)
				continue;
			if (spec != NULL && (!herd__net_if_matches(spec, i->ifa_name) ||
					     ((i->ifa_flags & IFF_LOOPBACK) && spec[0] == '^')))
				continue;
			inet_ntop(AF_INET, &((const struct sockaddr_in *)i->ifa_addr)->sin_addr, ip,
				  sizeof(ip));
			n = snprintf(out + o, cap - o, "%s%s:%d", o > 0 ? "," : "", ip, port);
			if (n < 0 || (size_t)n >= cap - o)
				break;
			o += (size_t)n;
			(*count)++;
		}
	}
	freeifaddrs(ifs);
	return HERD_OK;
}

herd_status herd__net_host_short(char *buf, size_t cap)
{
	if (cap == 0)
		return herd__error(HERD_EINVAL, "no room for the host name");
	if (gethostname(buf, cap) != 0) {
		buf[0] = '\0';
		return herd__error_errno(HERD_ESYS, errno, "cannot get the host name");
	}
	buf[cap - 1] = '\0';
	buf[strcspn(buf, ".")] = '\0';
	return HERD_OK;
}
