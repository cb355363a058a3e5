/*
 * sdk/base/wait.h - waiting for what another process writes: a peer's flag
 * or sequence number in shared memory, or bytes on a socket.  The one
 * mechanism behind every wait of the host transports (sdk/comm/p2p.c for
 * shared memory and TCP, sdk/comm/transport/shm/direct.c).  Not part of
 * the public API.
 *
 * A wait spins while the answer is likely to come sooner than a sleep and
 * its wake-up would take, then gives the CPU up: it yields it a few times
 * (a peer queued on this CPU runs at once), then sleeps on what the peer
 * signals: a futex word (herd__bell) or, for sockets, poll.
 *
 *     herd__wait w;
 *
 *     herd__wait_start(&w, HERD__WAIT_SPIN_NS, crowded);
 *     herd__wait_bells(&w, own_bell, peer_bell);
 *     while (!ready()) {
 *             if (!herd__wait_idle(&w))
 *                     continue;             spun or yielded: look again
 *             check the deadline and the peers, then sleep:
 *             seen = herd__bell_arm(own_bell);
 *             if (!ready())
 *                     herd__bell_sleep(own_bell, seen, ms);
 *             herd__bell_disarm(own_bell);
 *     }
 *
 * The stages of one wait, as herd__wait_idle walks them:
 *  1. spin: look again after a pause instruction, for spin_ns measured on
 *     the clock (every few looks), not counted in iterations.  A peer that
 *     is running answers a small call within a microsecond or two; a sleep
 *     and its wake-up cost tens (a futex round trip on a 2-vCPU VM: 38 us),
 *     so spinning about that long loses at most twice the best choice.  No
 *     spin where it cannot pay: where the ranks of this kernel outnumber
 *     its CPUs (`crowded`: the peer may need this very CPU), and where the
 *     peer waited for last began a wait on the CPU this waiter runs on
 *     (each waiter notes its CPU on its bell: the peer is queued behind
 *     this waiter, or asleep).
 *  2. yield: sched_yield, HERD__WAIT_YIELDS times, or while crowded for
 *     spin_ns: a peer on this CPU's run queue runs now, and the yield comes
 *     back as soon as it waits in turn.
 *  3. sleep: herd__wait_idle says true, and again on every later idle
 *     pass, until herd__wait_start begins the next wait.
 *
 * A busy machine.  A spin that finds it was taken off the CPU (two looks
 * at the clock more than HERD__WAIT_GAP_NS apart), or a yield that comes
 * back after HERD__WAIT_YIELD_GAP_NS (other work ran on this CPU
 * meanwhile), shows that the CPUs are shared with other work.  Once more
 * than a quarter of the recent spins and yields of the process show it
 * (HERD__WAIT_BUSY_SHARE: another session's work takes the CPU now and
 * then whatever a waiter does, while busy loops among the ranks' own
 * processes make most yields slow), the machine counts as busy.  Then the
 * peer waited for is often off its CPU, waiting for its turn, and a long
 * spin burns the time slice that the peer or the other work could use;
 * worse, a yield hands the CPU to the other work for its whole slice (the
 * scheduler pushes the yielder back by a slice), while a sleeper is woken,
 * ahead of a CPU hog, as soon as the peer posts.  For
 * HERD__WAIT_BUSY_HOLD_MS after such a sign, every wait of the process
 * spins HERD__WAIT_SPIN_BUSY_NS at most (crowded: not at all) and sleeps
 * without yielding; the first wait after that spins and yields in full
 * again, which shows whether the other work is still there.  Measured
 * with 2 busy loops on 2 vCPUs, allreduce of 8 B to 4 KiB, the 99th
 * percentile per call: 2 ranks 1-20 us with this, 0.3-4 ms with the yields
 * kept; 4 ranks 0.5-4 ms against 8-21 ms.
 *
 * Nothing here knows deadlines: a caller looks at its deadline, and at
 * its peers' death, before every sleep, and sleeps in slices
 * (HERD__WAIT_SLEEP_MAX_MS at most) that end at its deadline.
 */
#ifndef HERD_WAIT_H
#define HERD_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The spin of a wait on an idle machine (see the top of this file). */
#define HERD__WAIT_SPIN_NS 50000
/* The spin while the machine is busy: a peer that is running still
 * answers a small call within it (3, 10 and 50 us measured alike with 2
 * ranks and 2 busy loops on 2 vCPUs). */
#define HERD__WAIT_SPIN_BUSY_NS 10000
/* Yields after the spin, with a CPU per rank. */
#define HERD__WAIT_YIELDS 4
/* Two looks at the clock this far apart within a spin: the waiter was off
 * the CPU while other work ran. */
#define HERD__WAIT_GAP_NS 200000
/* A yield that comes back this late: other work held the CPU.  A yield
 * that a busy loop answers lasts about a scheduler slice (1-3 ms); one
 * that a peer rank answers, the peer's work until it waits in turn, which
 * in bulk transfers reaches hundreds of microseconds (4 ranks on 2 cores,
 * 128 MiB over TCP, lost 10-25% with the spin's 200 us here). */
#define HERD__WAIT_YIELD_GAP_NS 1000000
/* The share of the recent spins and yields (in 1/1024ths, about the last
 * 8) that must have seen such a gap before the machine counts as busy. */
#define HERD__WAIT_BUSY_SHARE 256
/* How long the machine then counts as busy for every wait of the process. */
#define HERD__WAIT_BUSY_HOLD_MS 200
/* The longest single sleep of a caller, so that it looks at its deadline
 * and its peers at least this often. */
#define HERD__WAIT_SLEEP_MAX_MS 100

/* Monotonic time in nanoseconds. */
static inline int64_t herd__wait_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A pause between looks at shared memory in a spin. */
static inline void herd__wait_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

typedef struct herd__bell herd__bell;

/* One wait's state: on the caller's stack, begun by herd__wait_start. */
typedef struct herd__wait {
	herd__bell *own;         /* the waiter's bell, where it notes its CPU; or NULL */
	const herd__bell *peer;  /* the bell of the peer waited for, or NULL */
	int64_t spin_ns;         /* spin this long (0: no spin) */
	int64_t yield_ns;        /* crowded: yield this long */
	int64_t start_ns;        /* the first idle pass; 0 before it */
	int64_t last_ns;         /* the last look at the clock */
	unsigned int passes;     /* idle passes */
	unsigned int yields;
	bool crowded;
	bool sleeping;           /* stage 3 reached */
} herd__wait;

/*
 * Begins a wait (and begins it again after progress): spin for spin_ns,
 * or, crowded (more ranks on this kernel than CPUs), yield for spin_ns
 * instead.  Costs no system call.
 */
static inline void herd__wait_start(herd__wait *w, int64_t spin_ns, bool crowded)
{
	w->own = NULL;
	w->peer = NULL;
	w->spin_ns = crowded ? 0 : spin_ns;
	w->yield_ns = crowded ? spin_ns : 0;
	w->start_ns = 0;
	w->last_ns = 0;
	w->passes = 0;
	w->yields = 0;
	w->crowded = crowded;
	w->sleeping = false;
}

/*
 * Names the bells of a wait just begun: the waiter's own, where it notes
 * the CPU it waits on, and the one of the peer it waits for (either may be
 * NULL).  A peer that last waited on this very CPU cannot answer while
 * this waiter spins there (it is queued behind it, or asleep): the wait
 * then skips its spin, and yields or sleeps at once.
 */
static inline void herd__wait_bells(herd__wait *w, herd__bell *own, const herd__bell *peer)
{
	w->own = own;
	w->peer = peer;
}

/*
 * A pass that found nothing to do: pauses, or yields the CPU, and returns
 * false (look again); true when the wait has reached its sleep, which the
 * caller then does, after its checks.  Not thread-safe on one w; any
 * number of threads may each have their own.
 */
bool herd__wait_idle(herd__wait *w);

/*
 * A futex word in memory that peers map (MAP_SHARED), and the flag with
 * which its owner says it sleeps on it.  A peer that publishes something
 * the owner may wait for rings the bell: a store, a full fence, and an
 * increment and FUTEX_WAKE only when the flag is up, so that a wait that
 * never sleeps costs neither side a system call.  The owner raises the
 * flag (arm), looks at what it waits for once more, sleeps, and lowers the
 * flag (disarm); the fences on both sides order each one's store before
 * its load of the other's (Dekker), so no wake-up is lost.  Zeroed memory
 * is a valid bell.
 */
struct herd__bell {
	atomic_uint word;      /* the futex word, raised by every ring that wakes */
	atomic_uint sleeping;  /* 1 while the owner is armed */
	atomic_int cpu;        /* 1 + the CPU of the owner's latest wait; 0 unknown */
};

/* The owner, before its last look: raises the flag; returns the word to
 * sleep on. */
uint32_t herd__bell_arm(herd__bell *b);

/* The owner: sleeps while the word is still `seen`, timeout_ms at most
 * (a ring, a signal or a spurious wake-up end it sooner). */
void herd__bell_sleep(herd__bell *b, uint32_t seen, int timeout_ms);

/* The owner: lowers the flag after its sleep (or instead of it). */
void herd__bell_disarm(herd__bell *b);

/* A peer, after its store: wakes the owner if it is armed.  The fence
 * orders the caller's earlier stores before the look at the flag. */
void herd__bell_ring(herd__bell *b);

/* Wakes the owner whether armed or not (abort, a peer's death: any thread). */
void herd__bell_wake(herd__bell *b);

#endif /* HERD_WAIT_H */
