/*
 * sdk/base/net.h - TCP socket helpers with deadlines, and the monotonic
 * clock that deadlines are measured on.  Not part of the public API.
 *
 * Deadlines are absolute times in milliseconds of herd__net_now_ms().
 * Sockets come back non-blocking and close-on-exec; every send uses
 * MSG_NOSIGNAL, so a peer that went away gives HERD_ECLOSED, never SIGPIPE.
 */
#ifndef HERD_NET_H
#define HERD_NET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "herd/common.h"

/* Room for "[ffff:...:ffff%ifname]:65535" and its NUL. */
#define HERD_NET_ADDR_LEN 96

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t herd__net_now_ms(void);

/* The deadline timeout_ms from now; negative timeouts give "now". */
int64_t herd__net_deadline(int timeout_ms);

/* Milliseconds left until deadline, clamped to [0, INT32_MAX], for poll(). */
int herd__net_remaining_ms(int64_t deadline);

/* A condition variable whose timed waits run on CLOCK_MONOTONIC, the clock
 * of the deadlines, so that setting the wall clock moves none of them. */
void herd__net_cond_init(pthread_cond_t *cv);

/* pthread_cond_timedwait until deadline (mu held); ETIMEDOUT once past it. */
int herd__net_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline);

/*
 * This host's short name (the kernel's, up to the first '.'), as Slurm,
 * hostfiles and herd's launchers write host names, into buf[cap].
 * HERD_ESYS, buf empty, when the kernel does not say.
 */
herd_status herd__net_host_short(char *buf, size_t cap);

/*
 * Splits "host:port", "[v6addr]:port" into host (NUL-terminated, brackets
 * removed) and port (1..65535).  HERD_EINVAL with a message quoting the text
 * when malformed.
 */
herd_status herd__net_parse_hostport(const char *text, char *host, size_t host_cap,
				     int *port);

/*
 * Connects to host:port (every address the name resolves to is tried),
 * retrying refused and unreachable attempts with a backoff until deadline:
 * a server may still be starting.  *fd is non-blocking, with TCP_NODELAY
 * and keepalive probes that notice a vanished peer host within about 30 s.
 * HERD_ETIMEDOUT names the address and the last attempt's error.  Name
 * resolution itself is not bounded by the deadline; numeric addresses
 * never block.
 */
herd_status herd__net_connect(int *fd, const char *host, int port, int64_t deadline);

/*
 * A non-blocking listening socket bound to host:port (port 0: ephemeral),
 * with SO_REUSEADDR.
 */
herd_status herd__net_listen(int *fd, const char *host, int port);

/*
 * Whether interface name matches spec, in NCCL_SOCKET_IFNAME's syntax
 * (HERD_SOCKET_IFNAME): a comma-separated list of name prefixes ("eth,ib"),
 * of exact names after a leading '=' ("=eth0"), either excluded instead
 * with a leading '^' ("^docker,lo", "^=eth1").
 */
bool herd__net_if_matches(const char *spec, const char *name);

/*
 * The IPv4 addresses of this host's interfaces that are up, as
 * "a:port,b:port" in out (cap bytes) and their number in *count: those
 * spec matches (loopback only when spec names it), or with spec NULL
 * every one; ordinary interfaces first, then container and VM bridges and
 * virtual pairs (docker0 carries 172.17.0.1 on every Docker host), then
 * loopback, so that peers try the likely ones first.
 */
herd_status herd__net_if_addrs(const char *spec, int port, char *out, size_t cap, int *count);

/*
 * The IPv4 source address this host's routes give toward host (a name or
 * a numeric address), numeric, into out: the interface that faces it.  A
 * datagram socket's connect, which sends nothing.  false when host does
 * not resolve or no route leads there.
 */
bool herd__net_source_addr(const char *host, char *out, size_t cap);

/* The local address of a socket as "a.b.c.d:port" or "[v6]:port", and its port. */
herd_status herd__net_local_addr(int fd, char addr[HERD_NET_ADDR_LEN], int *port);

/* The peer of a connected socket, formatted the same way; "?" on failure. */
void herd__net_peer_addr(int fd, char addr[HERD_NET_ADDR_LEN]);

/*
 * Sends all len bytes before deadline.  HERD_ECLOSED when the peer has gone,
 * HERD_ETIMEDOUT when the deadline passes (some bytes may have been sent).
 * peer names the other end in messages.
 */
herd_status herd__net_send_all(int fd, const void *data, size_t len, int64_t deadline,
			       const char *peer);

/*
 * Waits until some bytes can be read or deadline passes, then reads up to
 * cap of them.  *got is 0 only when the deadline passed (status HERD_OK);
 * end of stream and resets give HERD_ECLOSED naming peer.
 */
herd_status herd__net_recv_some(int fd, void *buf, size_t cap, size_t *got, int64_t deadline,
				const char *peer);

/*
 * TCP_NODELAY, and keepalive probes that notice a peer host gone silent
 * within about 30 s.  Best effort: failures are ignored.
 */
void herd__net_tune(int fd);

/* Makes fd non-blocking; HERD_ESYS on failure. */
herd_status herd__net_set_nonblock(int fd);

#endif /* HERD_NET_H */
