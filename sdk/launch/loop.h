/*
 * sdk/launch/loop.h - the one poll loop of sdk/launch, in the shape of
 * libuv's uv__io_poll: a watcher per descriptor, timers on the monotonic
 * clock of herd__net_now_ms, and one turn that polls every watcher until
 * the first timer is due and then runs the callbacks of what is ready.
 * Internal to libherd.
 *
 * Watchers and timers are the caller's memory, embedded in the objects
 * they belong to (as libuv's uv__io_t); the loop keeps pointers to them
 * while they are started.  A callback may start and stop any watcher or
 * timer, its own included: a watcher stopped during a turn, or whose events
 * were set to 0, gets no further callback in that turn.  A loop is used by one thread.
 */
#ifndef HERD_LAUNCH_LOOP_H
#define HERD_LAUNCH_LOOP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "herd/common.h"

typedef struct herd__loop herd__loop;
typedef struct herd__watcher herd__watcher;
typedef struct herd__timer herd__timer;
typedef struct herd__source herd__source;

/* revents: what poll said of the descriptor (POLLIN, POLLOUT, POLLHUP...). */
typedef void (*herd__watcher_cb)(herd__watcher *w, short revents);
typedef void (*herd__timer_cb)(herd__timer *t);

struct herd__watcher {
	int fd;
	short events;          /* POLLIN and/or POLLOUT; 0: kept but not polled */
	herd__watcher_cb cb;
	void *data;            /* the caller's */
	size_t slot;           /* the loop's: index + 1, 0 when stopped */
};

struct herd__timer {
	int64_t due;           /* herd__net_now_ms() time */
	herd__timer_cb cb;
	void *data;
	size_t slot;
};

/*
 * A source of descriptors that change from turn to turn (a node's rank
 * pipes and pidfds), as glib's GSource: prepare adds them to the poll set
 * each turn, dispatch gets them back with revents, every turn.
 */
struct herd__source {
	size_t max_fds;        /* most fds prepare adds */
	/* Fills fds[0..max_fds) (returns how many) and *timeout_ms: when
	 * dispatch must run even with nothing ready (-1: only then). */
	size_t (*prepare)(herd__source *s, struct pollfd *fds, int *timeout_ms);
	void (*dispatch)(herd__source *s, const struct pollfd *fds, size_t n);
	void *data;
	size_t slot;
};

/* Started watchers, timers or sources: pointers to them, NULL where one
 * stopped (until the next turn closes the hole); slot_off locates each
 * one's slot field. */
typedef struct herd__loop_set {
	void **p;
	size_t n, cap, slot_off;
} herd__loop_set;

struct herd__loop {
	herd__loop_set w, t, s;   /* watchers, timers, sources */
	struct pollfd *fds;
	size_t *owner;            /* per pollfd: its watcher, or SIZE_MAX for a source's */
	size_t *src_at;           /* per source: its first pollfd and how many */
	size_t *src_n;
	size_t capfds, capsrc;
	bool dirty;               /* a stopped watcher, timer or source left a hole */
};

void herd__loop_init(herd__loop *l);
/* Forgets every watcher and timer (they are not called) and frees the loop's memory. */
void herd__loop_free(herd__loop *l);

/* A watcher of fd for events, calling cb with data; not yet started. */
void herd__watcher_init(herd__watcher *w, int fd, herd__watcher_cb cb, void *data);
/* Starts w with events (or changes them when started).  HERD_ENOMEM. */
herd_status herd__loop_watch(herd__loop *l, herd__watcher *w, short events);
/* Stops w (no callback after this); a stopped watcher is left as it is. */
void herd__loop_unwatch(herd__loop *l, herd__watcher *w);
static inline bool herd__watcher_active(const herd__watcher *w)
{
	return w->slot != 0;
}

void herd__timer_init(herd__timer *t, herd__timer_cb cb, void *data);
/* Starts t (again) to run at due.  HERD_ENOMEM. */
herd_status herd__loop_timer(herd__loop *l, herd__timer *t, int64_t due);
void herd__loop_timer_stop(herd__loop *l, herd__timer *t);
static inline bool herd__timer_active(const herd__timer *t)
{
	return t->slot != 0;
}

/* Starts s (its max_fds, prepare and dispatch set).  HERD_ENOMEM. */
herd_status herd__loop_source(herd__loop *l, herd__source *s);
void herd__loop_source_stop(herd__loop *l, herd__source *s);

/*
 * One turn: polls the started watchers and sources until a descriptor is ready, the
 * first timer is due or until (a herd__net_now_ms() time; -1: no limit
 * but the timers), then calls the watchers that are ready, every source's
 * dispatch, and the timers that are due (each timer stops before its callback runs).  With nothing
 * to wait for and no limit it returns at once.  HERD_ESYS when poll fails
 * (not for EINTR).
 */
herd_status herd__loop_run_once(herd__loop *l, int64_t until);

#endif /* HERD_LAUNCH_LOOP_H */
