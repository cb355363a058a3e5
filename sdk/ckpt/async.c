/*
 * sdk/ckpt/async.c - the asynchronous save: the staging ring (huge pages,
 * faulted in once and kept), the writer thread that drains it and commits,
 * herd_ckpt_save_async, herd_ckpt_wait and herd_ckpt_abort.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/save.h"
#include "device.h"

/* ---- the asynchronous engine ------------------------------------------ */

/* Staging memory is allocated in whole huge pages. */
#define RING_ALIGN ((size_t)2 << 20)

void herd__ckpt_ring_free(herd_ckpt *ck)
{
	if (ck->ring_pinned)
		herd__dev_unpin(ck->ring_pin_device, ck->ring);
	ck->ring_pinned = false;
	if (ck->ring != NULL)
		munmap(ck->ring, ck->ring_map);
	ck->ring = NULL;
	ck->ring_cap = 0;
	ck->ring_map = 0;
}

/*
 * Replaces the staging memory with cap bytes, mapped and faulted in now.
 * It is kept between saves, so what it costs here is paid once: huge
 * pages where the system allows them (the staging copy is the time the
 * caller waits, and with 4 KiB pages a large part of it goes to TLB
 * misses, dearer still in a virtual machine), and every page faulted in
 * at once rather than one fault per page during the copy.  Faulting in
 * here also makes a shortage of memory an error of the save
 * (HERD_ENOMEM) instead of a process killed halfway through the copy.
 */
static herd_status ring_alloc(herd_ckpt *ck, size_t cap)
{
	size_t len = (cap + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN;
	bool faulted = false;
	uint8_t *ring;

	if (len < cap)
		return herd__error(HERD_ENOMEM, "%zu bytes of staging memory are too many", cap);
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED)
		return herd__error_errno(HERD_ENOMEM, errno, "cannot map %zu bytes of staging "
					 "memory", len);
#ifdef MADV_HUGEPAGE
	(void)madvise(ring, len, MADV_HUGEPAGE);   /* advice: 4 KiB pages work too */
#endif
#ifdef MADV_POPULATE_WRITE
	if (madvise(ring, len, MADV_POPULATE_WRITE) == 0) {
		faulted = true;
	} else if (errno != EINVAL) {
		int err = errno;

		munmap(ring, len);
		return herd__error_errno(HERD_ENOMEM, err, "cannot fault in %zu bytes of staging "
					 "memory", len);
	}
#endif
	/* Before Linux 5.14 (no MADV_POPULATE_WRITE): by hand. */
	for (size_t i = 0; !faulted && i < len; i += 4096)
		((volatile uint8_t *)ring)[i] = 0;
	herd__ckpt_ring_free(ck);
	ck->ring = ring;
	ck->ring_cap = cap;
	ck->ring_map = len;
	return HERD_OK;
}

static void *writer_main(void *arg)
{
	herd__ckpt_job *job = arg;
	herd_ckpt *ck = job->ck;
	size_t cap = ck->ring_cap;

	for (;;) {
		uint64_t pos, n;

		pthread_mutex_lock(&job->mu);
		while ((job->head == job->tail || (job->whole && job->head < job->total)) &&
		       job->tail < job->total)
			pthread_cond_wait(&job->cv, &job->mu);
		if (job->tail == job->total) {
			pthread_mutex_unlock(&job->mu);
			break;
		}
		pos = job->tail % cap;
		n = job->head - job->tail;
		pthread_mutex_unlock(&job->mu);
		if (n > cap - pos)
			n = cap - pos;
		if (n > WRITE_PIECE)
			n = WRITE_PIECE;
		/* Bytes [tail, tail + n) are the writer's until tail moves. */
		herd__save_sink_put(job, ck->ring + pos, (size_t)n);
		pthread_mutex_lock(&job->mu);
		job->tail += n;
		pthread_cond_broadcast(&job->cv);
		pthread_mutex_unlock(&job->mu);
	}
	herd__save_check_abort(job);
	herd__save_sink_close(job);
	job->st = herd__save_finish(job);
	job->t_end = herd__save_now();
	if (job->st != HERD_OK)
		herd__strlcpy(job->msg, herd_last_error(), sizeof(job->msg));
	return NULL;
}

/* The bytes of a device tensor into the ring; a failure is the writer's
 * to report (the save fails on every rank), and staging goes on, so that
 * the writer gets to the end of the stream. */
static void stage_device(herd__ckpt_job *job, uint8_t *dst, const uint8_t *src, size_t n,
			 int device)
{
	herd_status st;
	void *saved;

	if (atomic_load(&job->stage_st) != HERD_OK)
		return;
	/* on the caller's thread, whose context is left as it was */
	st = herd__dev_enter(device, &saved);
	if (st == HERD_OK)
		st = herd__dev_to_host(dst, src, n, "staging a device tensor");
	herd__dev_leave(saved);
	if (st != HERD_OK) {
		herd__strlcpy(job->stage_msg, herd_last_error(), sizeof(job->stage_msg));
		atomic_store(&job->stage_st, (int)st);
	}
}

/* Copies the stream into the ring as space frees up (from device memory
 * while the writer writes what is staged). */
static void stage(herd__ckpt_job *job)
{
	herd_ckpt *ck = job->ck;
	size_t cap = ck->ring_cap;

	for (size_t i = 0; i < job->nsegs; i++) {
		const uint8_t *src = job->segs[i].src;
		uint64_t left = job->segs[i].len;

		while (left > 0) {
			uint64_t pos, room, n;

			pthread_mutex_lock(&job->mu);
			while (job->head - job->tail == cap)
				pthread_cond_wait(&job->cv, &job->mu);
			pos = job->head % cap;
			room = cap - (job->head - job->tail);
			pthread_mutex_unlock(&job->mu);
			n = left;
			if (n > room)
				n = room;
			if (n > cap - pos)
				n = cap - pos;
			if (job->segs[i].device >= 0)
				stage_device(job, ck->ring + pos, src, (size_t)n, job->segs[i].device);
			else
				memcpy(ck->ring + pos, src, (size_t)n);
			src += n;
			left -= n;
			pthread_mutex_lock(&job->mu);
			job->head += n;
			pthread_cond_broadcast(&job->cv);
			pthread_mutex_unlock(&job->mu);
		}
	}
}

herd_status herd_ckpt_save_async(herd_ckpt *ck, int64_t step)
{
	herd__ckpt_job *job = NULL;
	herd_status st;
	size_t cap;
	int err;

	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_save_async: ck is NULL");
	HERD_CHECK(herd__ckpt_join(ck));
	HERD_CHECK(herd__save_begin(ck, step, &job));
	cap = job->total < ck->staging_bytes ? (size_t)job->total : ck->staging_bytes;
	if (cap == 0)
		cap = 1;
	/* Allocation failures here are local: the writer still has to run
	 * phase 3 with the others, so it runs with a failed sink. */
	if (cap > ck->ring_cap && ring_alloc(ck, cap) != HERD_OK)
		herd__save_sink_fail(&job->sk, HERD_ENOMEM);
	if (pthread_mutex_init(&job->mu, NULL) != 0 || pthread_cond_init(&job->cv, NULL) != 0) {
		/* Without a lock there is no writer: fall back to a synchronous save. */
		herd__log_warn("cannot create a lock for an asynchronous save; saving step "
			       "%" PRId64 " synchronously", step);
		return herd__save_in_place(job);
	}
	job->sync_init = true;
	/* Device tensors copy into page-locked memory at the link's speed. */
	for (size_t i = 0; i < ck->ntensors && ck->ring != NULL && !ck->ring_pinned; i++) {
		if (ck->tensors[i].device >= 0) {
			ck->ring_pin_device = ck->tensors[i].device;
			ck->ring_pinned = herd__dev_pin(ck->ring_pin_device, ck->ring, ck->ring_map);
		}
	}
	if (ck->ring_cap < cap) {
		/* ring_alloc said why (in the sink's message). */
		herd__save_sink_fail(&job->sk, HERD_ENOMEM);
		job->total = 0;   /* nothing is staged; the writer only commits (and fails) */
	}
	/*
	 * When the ring holds the whole stream, the writer starts once the
	 * last byte is staged rather than after the first piece.  The caller
	 * waits for the staging copy alone; a writer running beside it would
	 * take CPU time and memory bandwidth from that copy (pwrite is itself
	 * a copy, into the page cache, and the hashing reads every byte), and
	 * on a machine with few cores it lengthens the caller's wait by about
	 * as much as it gains.  When the ring is smaller than the stream, the
	 * writer must drain it as the caller fills it.
	 */
	job->whole = ck->ring_cap >= job->total;
	err = pthread_create(&ck->writer, NULL, writer_main, job);
	if (err != 0) {
		herd__error_errno(HERD_ESYS, err, "cannot start the thread that writes the "
				  "checkpoint");
		herd__save_sink_fail(&job->sk, HERD_ESYS);
		job->total = 0;
		writer_main(job);
		st = job->st;
		herd__error(st, "%s", job->msg);
		herd__save_job_free(job);
		return st;
	}
	ck->busy = true;
	ck->job = job;
	if (job->total > 0)
		stage(job);
	/* The caller's stall so far: the exchange of phase 1 and the staging
	 * copy (counted, with any wait for the save's end, once it ends). */
	job->stall = herd__save_now() - job->t_begin;
	return HERD_OK;
}

herd_status herd__ckpt_join(herd_ckpt *ck)
{
	herd__ckpt_job *job = ck->job;
	herd_status st;
	double t0;

	if (!ck->busy)
		return HERD_OK;
	t0 = herd__save_now();
	pthread_join(ck->writer, NULL);
	herd__save_ended(ck, job, herd__save_now() - t0);
	ck->busy = false;
	ck->job = NULL;
	st = job->st;
	if (st != HERD_OK)
		herd__error(st, "%s", job->msg);
	herd__save_job_free(job);
	return st;
}

herd_status herd_ckpt_abort(herd_ckpt *ck)
{
	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_abort: ck is NULL");
	atomic_store(&ck->abort_req, true);
	return HERD_OK;
}

herd_status herd_ckpt_wait(herd_ckpt *ck)
{
	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_wait: ck is NULL");
	return herd__ckpt_join(ck);
}
