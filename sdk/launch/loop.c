/*
 * sdk/launch/loop.c - the watcher loop (loop.h).  Watchers, timers and
 * sources sit in sets of pointers; stopping one leaves a hole that the next turn
 * closes, so a callback may stop anything, itself included, while the
 * turn walks the arrays.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "loop.h"
#include "net.h"

void herd__loop_init(herd__loop *l)
{
	memset(l, 0, sizeof(*l));
	l->w.slot_off = offsetof(herd__watcher, slot);
	l->t.slot_off = offsetof(herd__timer, slot);
	l->s.slot_off = offsetof(herd__source, slot);
}

static size_t *slot_of(const herd__loop_set *set, void *item)
{
	return (size_t *)(void *)((char *)item + set->slot_off);
}

/* Adds item (not yet in the set), growing the array as needed. */
static herd_status set_add(herd__loop_set *set, void *item, const char *what)
{
	if (*slot_of(set, item) != 0)
		return HERD_OK;
	if (set->n == set->cap) {
		size_t cap = set->cap != 0 ? 2 * set->cap : 16;
		void **p = realloc(set->p, cap * sizeof(*p));

		if (p == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's %s", what);
		set->p = p;
		set->cap = cap;
	}
	set->p[set->n++] = item;
	*slot_of(set, item) = set->n;
	return HERD_OK;
}

/* Takes item out, leaving a hole for the next turn to close. */
static void set_remove(herd__loop *l, herd__loop_set *set, void *item)
{
	size_t *slot = slot_of(set, item);

	if (*slot == 0)
		return;
	set->p[*slot - 1] = NULL;
	*slot = 0;
	l->dirty = true;
}

static void set_compact(herd__loop_set *set)
{
	size_t j = 0;

	for (size_t i = 0; i < set->n; i++)
		if (set->p[i] != NULL) {
			set->p[j] = set->p[i];
			*slot_of(set, set->p[j]) = j + 1;
			j++;
		}
	set->n = j;
}

static void set_free(herd__loop_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		if (set->p[i] != NULL)
			*slot_of(set, set->p[i]) = 0;
	free(set->p);
}

void herd__loop_free(herd__loop *l)
{
	set_free(&l->w);
	set_free(&l->t);
	set_free(&l->s);
	free(l->fds);
	free(l->owner);
	free(l->src_at);
	free(l->src_n);
	herd__loop_init(l);
}

void herd__watcher_init(herd__watcher *w, int fd, herd__watcher_cb cb, void *data)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->cb = cb;
	w->data = data;
}

herd_status herd__loop_watch(herd__loop *l, herd__watcher *w, short events)
{
	w->events = events;
	return set_add(&l->w, w, "watchers");
}

void herd__loop_unwatch(herd__loop *l, herd__watcher *w)
{
	set_remove(l, &l->w, w);
}

void herd__timer_init(herd__timer *t, herd__timer_cb cb, void *data)
{
	memset(t, 0, sizeof(*t));
	t->cb = cb;
	t->data = data;
}

herd_status herd__loop_timer(herd__loop *l, herd__timer *t, int64_t due)
{
	t->due = due;
	return set_add(&l->t, t, "timers");
}

void herd__loop_timer_stop(herd__loop *l, herd__timer *t)
{
	set_remove(l, &l->t, t);
}

herd_status herd__loop_source(herd__loop *l, herd__source *s)
{
	return set_add(&l->s, s, "sources");
}

void herd__loop_source_stop(herd__loop *l, herd__source *s)
{
	set_remove(l, &l->s, s);
}

/* Closes the holes that stopped watchers, timers and sources left. */
static void compact(herd__loop *l)
{
	if (!l->dirty)
		return;
	set_compact(&l->w);
	set_compact(&l->t);
	set_compact(&l->s);
	l->dirty = false;
}

/* Room in the poll set for every watcher and every source's descriptors. */
static herd_status reserve(herd__loop *l)
{
	size_t want = l->w.n;

	for (size_t i = 0; i < l->s.n; i++)
		want += ((herd__source *)l->s.p[i])->max_fds;
	if (l->capfds < want) {
		struct pollfd *fds = realloc(l->fds, want * sizeof(*fds));
		size_t *owner;

		if (fds == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's poll set");
		l->fds = fds;
		owner = realloc(l->owner, want * sizeof(*owner));
		if (owner == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's poll set");
		l->owner = owner;
		l->capfds = want;
	}
	if (l->capsrc < l->s.n) {
		size_t *at = realloc(l->src_at, l->s.n * sizeof(*at)), *n;

		if (at == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's poll set");
		l->src_at = at;
		n = realloc(l->src_n, l->s.n * sizeof(*n));
		if (n == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's poll set");
		l->src_n = n;
		l->capsrc = l->s.n;
	}
	return HERD_OK;
}

static int64_t earlier(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

herd_status herd__loop_run_once(herd__loop *l, int64_t until)
{
	int64_t wake = until, now = herd__net_now_ms();
	size_t nfds = 0, nt, ns;
	int r;

	compact(l);
	HERD_CHECK(reserve(l));
	for (size_t i = 0; i < l->w.n; i++) {
		const herd__watcher *w = l->w.p[i];

		if (w->events == 0 || w->fd < 0)
			continue;
		l->fds[nfds] = (struct pollfd){ .fd = w->fd, .events = w->events };
		l->owner[nfds++] = i;
	}
	ns = l->s.n;
	for (size_t i = 0; i < ns; i++) {
		herd__source *src = l->s.p[i];
		int t = -1;

		l->src_at[i] = nfds;
		l->src_n[i] = src->prepare(src, l->fds + nfds, &t);
		for (size_t k = 0; k < l->src_n[i]; k++)
			l->owner[nfds + k] = SIZE_MAX;
		nfds += l->src_n[i];
		if (t >= 0)
			wake = earlier(wake, now + t);
	}
	for (size_t i = 0; i < l->t.n; i++)
		wake = earlier(wake, ((herd__timer *)l->t.p[i])->due);
	if (nfds == 0 && wake < 0)
		return HERD_OK;
	r = poll(l->fds, (nfds_t)nfds, wake < 0 ? -1 : herd__net_remaining_ms(wake));
	if (r < 0 && errno != EINTR)
		return herd__error_errno(HERD_ESYS, errno, "waiting for the nodes' events");
	for (size_t j = 0; r > 0 && j < nfds; j++) {
		herd__watcher *w;

		if (l->fds[j].revents == 0 || l->owner[j] == SIZE_MAX)
			continue;
		w = l->w.p[l->owner[j]];
		/* Stopped, paused (events 0) or its descriptor changed by an
		 * earlier callback. */
		if (w == NULL || w->events == 0 || w->fd != l->fds[j].fd)
			continue;
		w->cb(w, l->fds[j].revents);
	}
	for (size_t i = 0; i < ns; i++) {
		herd__source *src = l->s.p[i];

		if (src != NULL)
			src->dispatch(src, l->fds + l->src_at[i], l->src_n[i]);
	}
	now = herd__net_now_ms();
	nt = l->t.n;
	for (size_t i = 0; i < nt; i++) {
		herd__timer *t = l->t.p[i];

		if (t == NULL || t->due > now)
			continue;
		herd__loop_timer_stop(l, t);
		t->cb(t);
	}
	return HERD_OK;
}
