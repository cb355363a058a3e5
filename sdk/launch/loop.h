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
 * timer, its own included: a watcher stopped during a turn gets no further
 * callback in that turn.  A loop is used by one thread.
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

struct herd__loop {
	herd__watcher **w;
	size_t nw, capw;
	herd__timer **t;
	size_t nt, capt;
	struct pollfd *fds;
	size_t *owner;
	size_t capfds;
	bool dirty;            /* a stopped watcher or timer left a hole */
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

/*
 * One turn: polls the started watchers until a descriptor is ready, the
 * first timer is due or until (a herd__net_now_ms() time; -1: no limit
 * but the timers), then calls the watchers that are ready and the timers
 * that are due (each timer stops before its callback runs).  With nothing
 * to wait for and no limit it returns at once.  HERD_ESYS when poll fails
 * (not for EINTR).
 */
herd_status herd__loop_run_once(herd__loop *l, int64_t until);

#endif /* HERD_LAUNCH_LOOP_H */
