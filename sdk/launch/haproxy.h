/*
 * sdk/launch/haproxy.h - a service's front door (haproxy.c): HAProxy
 * started with a backend of server slots, driven through its runtime API
 * on an admin socket, read through its statistics.  Internal to libherd.
 */
#ifndef HERD_LAUNCH_HAPROXY_H
#define HERD_LAUNCH_HAPROXY_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "herd/common.h"
#include "base.h"

/* The oldest HAProxy herd drives: retry-on came in 2.0. */
#define HERD__HAPROXY_MIN_MAJOR 2
#define HERD__HAPROXY_MIN_MINOR 0

typedef struct herd__haproxy_conf {
	const char *bind;          /* the front door's address */
	int port;
	int slots;                 /* servers r1..rSLOTS, in maintenance at first */
	const char *health;        /* "/path": HTTP GET; NULL or "tcp": a connect */
	int replica_conns;         /* a server's maxconn; 0: none */
	int queue_ms;              /* how long a request may wait for a server */
} herd__haproxy_conf;

/* One slot's (or the backend's) figures from `show stat`. */
typedef struct herd__haproxy_stat {
	long long qcur;            /* requests queued */
	long long scur;            /* requests at the server */
	long long req_tot;         /* requests sent to it (HTTP) */
	long long errors;          /* 5xx answers, failed connections, failed answers */
	bool up;                   /* UP (its check passes), not in maintenance or draining */
	char status[24];           /* HAProxy's word: UP, DOWN, MAINT, DRAIN, "UP 1/2"... */
} herd__haproxy_stat;

typedef struct herd__haproxy {
	pid_t pid;                 /* 0 when not running */
	char dir[PATH_MAX];        /* its configuration, socket and log; this user's only */
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char log[PATH_MAX + 16];
	char version[32];
} herd__haproxy;

/*
 * The HAProxy of HERD_HAPROXY (else "haproxy" in PATH): its version into
 * ver ("2.6.12").  HERD_EUNAVAIL when it cannot be run or is older than
 * 2.0, saying which and how to install it.
 */
herd_status herd__haproxy_check(const char *program, char *ver, size_t cap);

/*
 * Writes the configuration into a new directory of this user's, starts
 * HAProxy on it (in the foreground, its output into the directory's log)
 * and waits, within 10 s, until its admin socket answers.  HERD_EBUSY
 * when it cannot bind the front door; other failures quote its log.
 */
herd_status herd__haproxy_start(herd__haproxy *hp, const herd__haproxy_conf *c);

/* One command on the admin socket; what HAProxy answered into reply (may be NULL). */
herd_status herd__haproxy_cmd(herd__haproxy *hp, char *reply, size_t cap, const char *fmt, ...)
	HERD_PRINTF(4, 5);

/* Slot s (from 0): its server's address, or its admin state ("ready",
 * "drain", "maint"). */
herd_status herd__haproxy_slot_addr(herd__haproxy *hp, int s, const char *addr, int port);
herd_status herd__haproxy_slot_state(herd__haproxy *hp, int s, const char *state);

/* The figures of slots[0..n) and of the backend as a whole. */
herd_status herd__haproxy_stats(herd__haproxy *hp, herd__haproxy_stat *slots, int n,
				herd__haproxy_stat *backend);

/* Whether it still runs; when not, why (its status and its log's last line). */
bool herd__haproxy_running(herd__haproxy *hp, char *why, size_t cap);

/* Ends it (SIGTERM, SIGKILL 2 s later), reaps it and removes its directory. */
void herd__haproxy_stop(herd__haproxy *hp);

#endif /* HERD_LAUNCH_HAPROXY_H */
