/*
 * sdk/launch/loop.c - the watcher loop (loop.h).  Watchers and timers sit
 * in arrays of pointers; stopping one leaves a hole that the next turn
 * closes, so a callback may stop anything, itself included, while the
 * turn walks the arrays.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "loop.h"
#include "net.h"

void herd__loop_init(herd__loop *l)
{
	memset(l, 0, sizeof(*l));
}

void herd__loop_free(herd__loop *l)
{
	for (size_t i = 0; i < l->nw; i++)
		if (l->w[i] != NULL)
			l->w[i]->slot = 0;
	for (size_t i = 0; i < l->nt; i++)
		if (l->t[i] != NULL)
			l->t[i]->slot = 0;
	for (size_t i = 0; i < l->ns; i++)
		if (l->s[i] != NULL)
			l->s[i]->slot = 0;
	free(l->w);
	free(l->t);
	free(l->s);
	free(l->fds);
	free(l->owner);
	free(l->src_at);
	free(l->src_n);
	memset(l, 0, sizeof(*l));
}

/* Grows an array of pointers to hold one more. */
static herd_status grow(void *arr, size_t n, size_t *cap, const char *what)
{
	void **a = *(void ***)arr;
	size_t c = *cap != 0 ? 2 * *cap : 16;

	if (n < *cap)
		return HERD_OK;
	a = realloc(a, c * sizeof(*a));
	if (a == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for the loop's %s", what);
	*(void ***)arr = a;
	*cap = c;
	return HERD_OK;
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
	if (w->slot != 0)
		return HERD_OK;
	HERD_CHECK(grow(&l->w, l->nw, &l->capw, "watchers"));
	l->w[l->nw++] = w;
	w->slot = l->nw;
	return HERD_OK;
}

void herd__loop_unwatch(herd__loop *l, herd__watcher *w)
{
	if (w->slot == 0)
		return;
	l->w[w->slot - 1] = NULL;
	w->slot = 0;
	l->dirty = true;
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
	if (t->slot != 0)
		return HERD_OK;
	HERD_CHECK(grow(&l->t, l->nt, &l->capt, "timers"));
	l->t[l->nt++] = t;
	t->slot = l->nt;
	return HERD_OK;
}

void herd__loop_timer_stop(herd__loop *l, herd__timer *t)
{
	if (t->slot == 0)
		return;
	l->t[t->slot - 1] = NULL;
	t->slot = 0;
	l->dirty = true;
}

herd_status herd__loop_source(herd__loop *l, herd__source *s)
{
	if (s->slot != 0)
		return HERD_OK;
	HERD_CHECK(grow(&l->s, l->ns, &l->caps, "sources"));
	l->s[l->ns++] = s;
	s->slot = l->ns;
	return HERD_OK;
}

void herd__loop_source_stop(herd__loop *l, herd__source *s)
{
	if (s->slot == 0)
		return;
	l->s[s->slot - 1] = NULL;
	s->slot = 0;
	l->dirty = true;
}

/* Closes the holes that stopped watchers and timers left. */
static void compact(herd__loop *l)
{
	size_t j = 0;

	if (!l->dirty)
		return;
	for (size_t i = 0; i < l->nw; i++)
		if (l->w[i] != NULL) {
			l->w[j] = l->w[i];
			l->w[j]->slot = j + 1;
			j++;
		}
	l->nw = j;
	j = 0;
	for (size_t i = 0; i < l->nt; i++)
		if (l->t[i] != NULL) {
			l->t[j] = l->t[i];
			l->t[j]->slot = j + 1;
			j++;
		}
	l->nt = j;
	j = 0;
	for (size_t i = 0; i < l->ns; i++)
		if (l->s[i] != NULL) {
			l->s[j] = l->s[i];
			l->s[j]->slot = j + 1;
			j++;
		}
	l->ns = j;
	l->dirty = false;
}

/* Room in the poll set for every watcher and every source's descriptors. */
static herd_status reserve(herd__loop *l)
{
	size_t want = l->nw;

	for (size_t i = 0; i < l->ns; i++)
		want += l->s[i]->max_fds;
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
	if (l->capsrc < l->ns) {
		size_t *at = realloc(l->src_at, l->ns * sizeof(*at)), *n;

		if (at == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's poll set");
		l->src_at = at;
		n = realloc(l->src_n, l->ns * sizeof(*n));
		if (n == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for the loop's poll set");
		l->src_n = n;
		l->capsrc = l->ns;
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
	for (size_t i = 0; i < l->nw; i++) {
		if (l->w[i]->events == 0 || l->w[i]->fd < 0)
			continue;
		l->fds[nfds] = (struct pollfd){ .fd = l->w[i]->fd, .events = l->w[i]->events };
		l->owner[nfds++] = i;
	}
	ns = l->ns;
	for (size_t i = 0; i < ns; i++) {
		int t = -1;

		l->src_at[i] = nfds;
		l->src_n[i] = l->s[i]->prepare(l->s[i], l->fds + nfds, &t);
		for (size_t k = 0; k < l->src_n[i]; k++)
			l->owner[nfds + k] = SIZE_MAX;
		nfds += l->src_n[i];
		if (t >= 0)
			wake = earlier(wake, now + t);
	}
	for (size_t i = 0; i < l->nt; i++)
		wake = earlier(wake, l->t[i]->due);
	if (nfds == 0 && wake < 0)
		return HERD_OK;
	r = poll(l->fds, (nfds_t)nfds, wake < 0 ? -1 : herd__net_remaining_ms(wake));
	if (r < 0 && errno != EINTR)
		return herd__error_errno(HERD_ESYS, errno, "poll");
	for (size_t j = 0; r > 0 && j < nfds; j++) {
		herd__watcher *w;

		if (l->fds[j].revents == 0 || l->owner[j] == SIZE_MAX)
			continue;
		w = l->w[l->owner[j]];
		/* Stopped, or its descriptor changed, by an earlier callback. */
		if (w == NULL || w->fd != l->fds[j].fd)
			continue;
		w->cb(w, l->fds[j].revents);
	}
	for (size_t i = 0; i < ns; i++)
		if (l->s[i] != NULL)
			l->s[i]->dispatch(l->s[i], l->fds + l->src_at[i], l->src_n[i]);
	now = herd__net_now_ms();
	nt = l->nt;
	for (size_t i = 0; i < nt; i++) {
		herd__timer *t = l->t[i];

		if (t == NULL || t->due > now)
			continue;
		herd__loop_timer_stop(l, t);
		t->cb(t);
	}
	return HERD_OK;
}
