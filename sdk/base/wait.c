/*
 * sdk/base/wait.c - spin, yield, sleep (wait.h says when and why), and the
 * futex bell that sleepers are woken by.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wait.h"

/* The spin looks at the clock once every this many passes: a look costs
 * more than a pass over shared memory. */
#define CLOCK_EVERY 16

/* Until when (herd__wait_now_ns) the CPUs are taken to be shared with
 * other work: one word for the process, as the CPUs are. */
static _Atomic int64_t busy_until_ns;

static bool busy_at(int64_t now)
{
	return now < atomic_load_explicit(&busy_until_ns, memory_order_relaxed);
}

/* The share of recent spins and yields that found other work on the CPU
 * (slow), in 1/1024ths, averaged over about the last 8: one word for the
 * process, updated without a lock (a lost update only blurs it). */
static atomic_int slow_share;

/*
 * Counts a spin that ran its course or a yield, slow or not; marks the
 * machine busy when slow ones have become common.  One slow look alone
 * proves little: another session's work, which the scheduler shares the
 * CPUs with by groups, takes the CPU now and then whatever a waiter does,
 * and yields to a peer stay cheap; busy loops of the ranks' own group make
 * most yields slow.
 */
static bool observe(bool slow, int64_t now)
{
	int r = atomic_load_explicit(&slow_share, memory_order_relaxed);

	r += ((slow ? 1024 : 0) - r) / 8;
	atomic_store_explicit(&slow_share, r, memory_order_relaxed);
	if (!slow || r <= HERD__WAIT_BUSY_SHARE)
		return false;
	atomic_store_explicit(&busy_until_ns, now + (int64_t)HERD__WAIT_BUSY_HOLD_MS * 1000000,
			      memory_order_relaxed);
	return true;
}

/* Stage 3 from now on. */
static bool to_sleep(herd__wait *w)
{
	w->sleeping = true;
	return true;
}

/*
 * Whether the peer waited for last began a wait on the CPU this thread
 * runs on, and so cannot answer while this thread spins here.  note: also
 * notes this CPU on the waiter's own bell (at the start of its wait), for
 * the peers that wait for it.
 */
static bool peer_here(herd__wait *w, bool note)
{
	int cpu = sched_getcpu();

	if (cpu < 0)
		return false;
	if (note && w->own != NULL)
		atomic_store_explicit(&w->own->cpu, cpu + 1, memory_order_relaxed);
	return w->peer != NULL &&
	       atomic_load_explicit(&w->peer->cpu, memory_order_relaxed) == cpu + 1;
}

bool herd__wait_idle(herd__wait *w)
{
	int64_t now, before;

	if (w->sleeping)
		return true;
	if (w->start_ns == 0) {
		now = herd__wait_now_ns();
		w->start_ns = w->last_ns = now;
		if (busy_at(now)) {
			w->spin_ns = w->crowded ? 0 : HERD__WAIT_SPIN_BUSY_NS;
			w->yield_ns = 0;
			w->yields = HERD__WAIT_YIELDS;
		}
		if (peer_here(w, true))
			w->spin_ns = 0;
	}
	/* 1. spin */
	if (w->spin_ns > 0) {
		if (++w->passes % CLOCK_EVERY != 0) {
			herd__wait_pause();
			return false;
		}
		now = herd__wait_now_ns();
		if (now - w->last_ns > HERD__WAIT_GAP_NS) {
			/* Taken off the CPU in the middle of the spin. */
			w->spin_ns = 0;
			if (observe(true, now))
				return to_sleep(w);
		} else if (now - w->start_ns < w->spin_ns && !peer_here(w, false)) {
			w->last_ns = now;
			herd__wait_pause();
			return false;
		} else {
			if (now - w->start_ns >= w->spin_ns)
				observe(false, now);
			w->spin_ns = 0;
		}
		w->last_ns = now;
	}
	/* 2. yield */
	before = herd__wait_now_ns();
	if (w->crowded ? before - w->start_ns >= w->yield_ns || w->yield_ns == 0
		       : w->yields >= HERD__WAIT_YIELDS)
		return to_sleep(w);
	sched_yield();
	w->yields++;
	now = herd__wait_now_ns();
	/* Other work held this CPU for a while: when that is common, more
	 * yields would hand it over again, and a sleep is woken as soon as
	 * the peer posts. */
	if (observe(now - before > HERD__WAIT_YIELD_GAP_NS, now))
		return to_sleep(w);
	w->last_ns = now;
	return false;
}

/* ---- the bell ------------------------------------------------------------- */

static long futex(atomic_uint *word, int op, unsigned int val, const struct timespec *ts)
{
	return syscall(SYS_futex, (unsigned int *)word, op, val, ts, NULL, 0);
}

uint32_t herd__bell_arm(herd__bell *b)
{
	atomic_store_explicit(&b->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&b->word, memory_order_relaxed);
}

void herd__bell_sleep(herd__bell *b, uint32_t seen, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };

	if (timeout_ms < 0)
		ts = (struct timespec){ 0, 0 };
	/* Not FUTEX_PRIVATE: the word is in memory that other processes map. */
	futex(&b->word, FUTEX_WAIT, seen, &ts);
}

void herd__bell_disarm(herd__bell *b)
{
	atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
}

void herd__bell_ring(herd__bell *b)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&b->sleeping, memory_order_relaxed))
		herd__bell_wake(b);
}

void herd__bell_wake(herd__bell *b)
{
	atomic_fetch_add(&b->word, 1);
	futex(&b->word, FUTEX_WAKE, INT_MAX, NULL);
}
