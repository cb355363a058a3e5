/*
 * sdk/telemetry/sampler.c - a sampler: the node's and the GPUs' parts of a
 * sample (node.c, gpu.c) taken when asked or on a thread of its own every
 * period, into a ring of the last samples that readers walk by sequence
 * number.
 *
 * The ring is one block of ring_size samples allocated at creation; a
 * slot is overwritten in place, so a running sampler allocates nothing.
 * The thread builds each sample in a scratch sample of its own and copies
 * it into its slot under the mutex, so that a reader never sees half a
 * sample.  Its deadlines are start + k * period on CLOCK_MONOTONIC: a
 * slow sample does not shift the ones after it, and ticks missed while
 * the machine was stopped are skipped rather than caught up in a burst.
 *
 * The eventfd is kept at 1 while the newest sample is newer than the last
 * one herd_telemetry_next handed out, and at 0 otherwise, always under the
 * mutex, so that a poll on it says what a call of next would find.
 *
 * Stopping: herd_telemetry_free asks the thread to stop and waits for it,
 * up to STOP_WAIT_MS while the thread is in a read of its sources (a
 * driver call or a /proc file of a process stuck in the kernel can block
 * for good); past that it leaves the sampler to the thread ("orphaned"),
 * which frees it when the read returns and calls the callback no more.
 * The callback itself is the caller's code and is waited for.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "base.h"
#include "telemetry_internal.h"

#define DEFAULT_PERIOD_MS 1000
#define MIN_PERIOD_MS 10
#define DEFAULT_RING 300
#define STOP_WAIT_MS 5000

#define ALL_PARTS                                                                       \
	(HERD_TELEMETRY_GPU | HERD_TELEMETRY_CPU | HERD_TELEMETRY_MEM | HERD_TELEMETRY_NET | \
	 HERD_TELEMETRY_DISK | HERD_TELEMETRY_PROCS)

struct herd_telemetry {
	int period_ms;
	unsigned parts;
	herd_telemetry_fn callback;
	void *userdata;

	/* The sources; read_mu makes one sample at a time of them. */
	pthread_mutex_t read_mu;
	herd__tnode *node;
	herd__tgpu *gpu;                 /* NULL: no NVML, gpu_why says why */
	char gpu_why[sizeof(((herd_telemetry_sample *)0)->gpu_note)];
	int64_t prev_us;                 /* monotonic time of the previous sample; -1: none */
	uint64_t taken;                  /* samples made: the last one's seq */
	bool failing;                    /* the thread's last sample failed */

	/* The ring and the thread's state, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;               /* stop asked, or the thread done */
	herd_telemetry_sample *ring;
	size_t cap;
	uint64_t newest;                 /* seq of the newest sample in the ring; 0: none */
	uint64_t handed;                 /* seq of the last one next handed out */
	int efd;
	bool efd_on;
	bool started, stop, orphaned, detached;
	bool reading;                    /* the thread is in sample_into */
	bool done;                       /* the thread has left its loop */
	pthread_t thread;
	herd_telemetry_sample *scratch;  /* the thread's sample in the making */
};

/* Microseconds of CLOCK_MONOTONIC. */
static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static herd_status check_opts(const herd_telemetry_opts *o)
{
	HERD__CHECK_VERSION("herd_telemetry_create", o, herd_telemetry_opts, TELEMETRY_OPTS);
	if (o->period_ms != 0 && o->period_ms < MIN_PERIOD_MS)
		return herd__error(HERD_EINVAL, "herd_telemetry_create: period_ms %d is below the "
				   "%d ms a sampler allows (0: %d ms)", o->period_ms, MIN_PERIOD_MS,
				   DEFAULT_PERIOD_MS);
	if ((o->parts & ~(unsigned)ALL_PARTS) != 0)
		return herd__error(HERD_EINVAL, "herd_telemetry_create: parts 0x%x has bits that "
				   "are no HERD_TELEMETRY_* part (0x%x)", o->parts,
				   o->parts & ~(unsigned)ALL_PARTS);
	if (o->ring_size > SIZE_MAX / sizeof(herd_telemetry_sample))
		return herd__error(HERD_EINVAL, "herd_telemetry_create: ring_size %zu is too large",
				   o->ring_size);
	return HERD_OK;
}

/* Frees what create made (the thread, if any, is gone). */
static void destroy(herd_telemetry *t)
{
	herd__tgpu_close(t->gpu);
	herd__tnode_close(t->node);
	if (t->efd >= 0)
		close(t->efd);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	pthread_mutex_destroy(&t->read_mu);
	free(t->ring);
	free(t->scratch);
	free(t);
}

herd_status herd_telemetry_create(herd_telemetry **out, const herd_telemetry_opts *opts)
{
	return herd__telemetry_create_at(out, opts, "/");
}

herd_status herd__telemetry_create_at(herd_telemetry **out, const herd_telemetry_opts *opts,
				      const char *root)
{
	herd_telemetry_opts dflt = HERD_TELEMETRY_OPTS_INIT;
	herd_status st = HERD_OK;
	herd_telemetry *t;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_create: out is NULL");
	*out = NULL;
	if (opts == NULL)
		opts = &dflt;
	HERD_CHECK(check_opts(opts));
	HERD_CHECK(herd__calloc(&t, 1, sizeof(*t), "a telemetry sampler"));
	t->efd = -1;
	t->prev_us = -1;
	t->period_ms = opts->period_ms > 0 ? opts->period_ms : DEFAULT_PERIOD_MS;
	t->parts = opts->parts != 0 ? opts->parts : ALL_PARTS;
	t->callback = opts->callback;
	t->userdata = opts->userdata;
	t->cap = opts->ring_size > 0 ? opts->ring_size : DEFAULT_RING;
	pthread_mutex_init(&t->read_mu, NULL);
	pthread_mutex_init(&t->mu, NULL);
	herd__net_cond_init(&t->cv);
	/* calloc: the pages of slots not yet written cost no memory. */
	t->ring = calloc(t->cap, sizeof(*t->ring));
	t->scratch = malloc(sizeof(*t->scratch));
	if (t->ring == NULL || t->scratch == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory for a ring of %zu telemetry samples "
				 "(%zu bytes each)", t->cap, sizeof(*t->ring));
		goto fail;
	}
	t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->efd < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "cannot create the sampler's descriptor");
		goto fail;
	}
	HERD_CHECK_GOTO(herd__tnode_open(&t->node, root), st, fail);
	if (t->parts & (HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS)) {
		st = herd__tgpu_open(&t->gpu, opts->lease_dir, t->gpu_why, sizeof(t->gpu_why));
		if (st == HERD_EUNAVAIL) {
			t->gpu = NULL;
			st = HERD_OK;
		}
		HERD_CHECK_GOTO(st, st, fail);
	}
	*out = t;
	return HERD_OK;
fail:
	destroy(t);
	return st;
}

/* ---- one sample -------------------------------------------------------- */

/* A new sample of every part asked for into *s (read_mu held). */
static herd_status sample_into(herd_telemetry *t, herd_telemetry_sample *s)
{
	int64_t now = mono_us();
	struct timespec wall;

	memset(s, 0, sizeof(*s));
	clock_gettime(CLOCK_REALTIME, &wall);
	/* A failed sample uses no number: seq q is always in slot q - 1. */
	s->seq = t->taken + 1;
	s->time_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
	/* Rounded to the nearest millisecond; node.c's rates are over it. */
	s->period_ms = t->prev_us >= 0 ? (now - t->prev_us + 500) / 1000 : 0;
	t->prev_us = now;
	HERD_CHECK(herd__tnode_read(t->node, s, t->parts));
	if (t->parts & (HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS)) {
		if (t->gpu == NULL)
			herd__strlcpy(s->gpu_note, t->gpu_why, sizeof(s->gpu_note));
		else
			HERD_CHECK(herd__tgpu_read(t->gpu, s, t->parts));
	}
	t->taken++;
	return HERD_OK;
}

/* Puts s in the ring (mu held) and makes the descriptor readable. */
static void store(herd_telemetry *t, const herd_telemetry_sample *s)
{
	memcpy(&t->ring[(s->seq - 1) % t->cap], s, sizeof(*s));
	/* Only forward: a take that overtook a started thread's store (seq
	 * numbers are given under read_mu, stores made under mu) is newer. */
	if (s->seq > t->newest)
		t->newest = s->seq;
	if (!t->efd_on && t->newest > t->handed) {
		(void)eventfd_write(t->efd, 1);
		t->efd_on = true;
	}
}

/* The descriptor back to 0 once the last sample handed out is the newest
 * (mu held). */
static void caught_up(herd_telemetry *t)
{
	eventfd_t v;

	if (t->efd_on && t->handed >= t->newest) {
		(void)eventfd_read(t->efd, &v);
		t->efd_on = false;
	}
}

herd_status herd_telemetry_take(herd_telemetry *t, herd_telemetry_sample *out)
{
	herd_status st;
	bool started;

	if (t == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_take: %s is NULL",
				   t == NULL ? "t" : "out");
	pthread_mutex_lock(&t->read_mu);
	pthread_mutex_lock(&t->mu);
	started = t->started;
	pthread_mutex_unlock(&t->mu);
	if (started) {
		pthread_mutex_unlock(&t->read_mu);
		return herd__error(HERD_EINVAL, "telemetry: the sampler is started: its thread "
				   "takes the samples (read them as they come)");
	}
	st = sample_into(t, out);
	if (st == HERD_OK) {
		pthread_mutex_lock(&t->mu);
		store(t, out);
		pthread_mutex_unlock(&t->mu);
	}
	pthread_mutex_unlock(&t->read_mu);
	return st;
}

/* ---- the thread -------------------------------------------------------- */

/* One sample on the thread: into the ring, then to the callback, unless
 * the sampler was stopped meanwhile. */
static void thread_sample(herd_telemetry *t)
{
	herd_status st;
	bool stop;

	pthread_mutex_lock(&t->mu);
	t->reading = true;
	pthread_mutex_unlock(&t->mu);
	pthread_mutex_lock(&t->read_mu);
	st = sample_into(t, t->scratch);
	pthread_mutex_unlock(&t->read_mu);
	pthread_mutex_lock(&t->mu);
	t->reading = false;
	stop = t->stop;
	pthread_mutex_unlock(&t->mu);
	if (stop)
		return;
	if (st != HERD_OK) {
		/* Said once per run of failures; the samples resume when the source mends. */
		if (!t->failing)
			herd__log_warn("telemetry: a sample left out: %s", herd_last_error());
		t->failing = true;
		return;
	}
	t->failing = false;
	pthread_mutex_lock(&t->mu);
	store(t, t->scratch);
	stop = t->stop;
	pthread_mutex_unlock(&t->mu);
	if (t->callback != NULL && !stop)
		t->callback(t->userdata, t->scratch);
}

static void *sampler_main(void *arg)
{
	herd_telemetry *t = arg;
	int64_t period = t->period_ms, next = herd__net_now_ms();
	bool orphaned, detached;

	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		int64_t now;

		pthread_mutex_unlock(&t->mu);
		thread_sample(t);
		pthread_mutex_lock(&t->mu);
		next += period;
		now = herd__net_now_ms();
		if (next <= now)
			next += ((now - next) / period + 1) * period;
		while (!t->stop && herd__net_cond_wait_until(&t->cv, &t->mu, next) != ETIMEDOUT)
			;
	}
	t->done = true;
	orphaned = t->orphaned;
	detached = t->detached;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	/* Freed from its own callback, or given up on by free: nobody joins
	 * this thread, it frees. */
	if (orphaned) {
		if (!detached)
			pthread_detach(pthread_self());
		destroy(t);
	}
	return NULL;
}

herd_status herd_telemetry_start(herd_telemetry *t)
{
	sigset_t all, old;
	int err;

	if (t == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_start: t is NULL");
	pthread_mutex_lock(&t->mu);
	if (t->started) {
		pthread_mutex_unlock(&t->mu);
		return herd__error(HERD_EINVAL, "herd_telemetry_start: the sampler is already "
				   "started");
	}
	/* The thread takes no signals: they stay with the caller's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t->thread, NULL, sampler_main, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err == 0)
		t->started = true;
	pthread_mutex_unlock(&t->mu);
	if (err != 0)
		return herd__error_errno(HERD_ESYS, err, "cannot start the sampler's thread");
	return HERD_OK;
}

/* ---- readers ----------------------------------------------------------- */

int herd_telemetry_fd(const herd_telemetry *t)
{
	return t != NULL ? t->efd : -1;
}

herd_status herd_telemetry_next(herd_telemetry *t, uint64_t *seq, herd_telemetry_sample *out)
{
	uint64_t want, oldest;

	if (t == NULL || seq == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_next: %s is NULL",
				   t == NULL ? "t" : seq == NULL ? "seq" : "out");
	pthread_mutex_lock(&t->mu);
	if (*seq >= t->newest) {
		/* This reader has them all. */
		if (t->handed < t->newest)
			t->handed = t->newest;
		caught_up(t);
		pthread_mutex_unlock(&t->mu);
		return herd__error(HERD_ENOTFOUND, "no telemetry sample after %llu yet",
				   (unsigned long long)*seq);
	}
	want = *seq + 1;
	oldest = t->newest > t->cap ? t->newest - t->cap + 1 : 1;
	if (want < oldest)
		want = oldest;
	memcpy(out, &t->ring[(want - 1) % t->cap], sizeof(*out));
	*seq = want;
	t->handed = want;
	caught_up(t);
	pthread_mutex_unlock(&t->mu);
	return HERD_OK;
}

herd_status herd_telemetry_latest(herd_telemetry *t, herd_telemetry_sample *out)
{
	if (t == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_latest: %s is NULL",
				   t == NULL ? "t" : "out");
	pthread_mutex_lock(&t->mu);
	if (t->newest == 0) {
		pthread_mutex_unlock(&t->mu);
		return herd__error(HERD_ENOTFOUND, "no telemetry sample yet");
	}
	memcpy(out, &t->ring[(t->newest - 1) % t->cap], sizeof(*out));
	pthread_mutex_unlock(&t->mu);
	return HERD_OK;
}

void herd_telemetry_free(herd_telemetry *t)
{
	int64_t deadline = herd__net_now_ms() + STOP_WAIT_MS;
	bool started;

	if (t == NULL)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	started = t->started;
	if (started && pthread_equal(pthread_self(), t->thread)) {
		/* From the callback: the thread frees once the callback returns. */
		t->orphaned = true;
		pthread_mutex_unlock(&t->mu);
		return;
	}
	pthread_cond_broadcast(&t->cv);
	while (started && !t->done) {
		bool late = herd__net_now_ms() >= deadline;

		if (late && t->reading) {
			/* A read that does not return: the thread frees when it does. */
			herd__log_warn("telemetry: the sampler's thread is still reading its "
				       "sources after %d ms; it is left to end on its own",
				       STOP_WAIT_MS);
			t->orphaned = true;
			t->detached = true;
			pthread_detach(t->thread);
			pthread_mutex_unlock(&t->mu);
			return;
		}
		/* Past the deadline in the callback: that is the caller's code, waited for. */
		(void)herd__net_cond_wait_until(&t->cv, &t->mu,
						late ? herd__net_now_ms() + 100 : deadline);
	}
	pthread_mutex_unlock(&t->mu);
	if (started)
		pthread_join(t->thread, NULL);
	destroy(t);
}
