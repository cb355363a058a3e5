/*
 * sdk/ckpt/restore.c - restoring a step into the registered state, with
 * resharding, and reading checkpoint directories without a communicator
 * (list, latest, verify, the reader).
 *
 * Resharding: for every registered tensor, every saved shard that
 * intersects this rank's shard contributes the intersection, a sequence of
 * contiguous runs (box.c).  The runs are read chunk by chunk; every chunk
 * touched is read whole and its checksum verified before any of its bytes
 * is used, and a chunk that a run covers entirely is read straight into
 * the destination and verified there.  A run of whole chunks is read in
 * two halves at once, one on a thread of the restore (split_run).  A
 * device tensor is read in slabs into host memory, each slab copied to the
 * device on a thread of its own while the next is read (fill_device).
 *
 * Agreement: each rank verifies what it reads; the ranks then agree on the
 * outcome (herd__ckpt_agree).  A step that fails verification on any rank
 * is skipped by all of them for the step before it; once a step restores,
 * rank 0 moves the damaged steps it passed over aside (aside.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device.h"
#include "handle.h"

/* An open step: its manifest and its files, opened as they are needed. */
typedef struct step_files {
	char dir[4096];        /* the step directory */
	herd__ckpt_manifest *m;
	int dfd;
	int *fds;              /* -1: not open yet */
	int *fds2;             /* second descriptions of the same files, -1: none
				* (the upper half of the fds allocation) */
} step_files;

static void step_close(step_files *sf)
{
	if (sf->fds != NULL)
		for (size_t i = 0; i < sf->m->nfiles; i++) {
			if (sf->fds[i] >= 0)
				close(sf->fds[i]);
			if (sf->fds2[i] >= 0)
				close(sf->fds2[i]);
		}
	free(sf->fds);
	if (sf->dfd >= 0)
		close(sf->dfd);
	herd__ckpt_manifest_free(sf->m);
	memset(sf, 0, sizeof(*sf));
	sf->dfd = -1;
}

static herd_status step_open(step_files *sf, const char *dir, int64_t step)
{
	char name[64];
	herd_status st;

	memset(sf, 0, sizeof(*sf));
	sf->dfd = -1;
	herd__ckpt_step_name(name, sizeof(name), step);
	HERD_CHECK(herd__ckpt_path(sf->dir, sizeof(sf->dir), dir, name));
	sf->dfd = open(sf->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sf->dfd < 0) {
		int err = errno;
		char note[4400] = "";

		if (err != ENOENT)
			return herd__error_errno(HERD_EIO, err, "checkpoint step %" PRId64 ": cannot "
						 "open %s", step, sf->dir);
		herd__ckpt_aside_note(dir, step, note, sizeof(note));
		return herd__error(HERD_ENOTFOUND, "checkpoint step %" PRId64 ": there is no %s%s",
				   step, sf->dir, note);
	}
	HERD_CHECK_GOTO(herd__ckpt_manifest_load(&sf->m, sf->dir), st, fail);
	if (sf->m->step != step) {
		st = herd__error(HERD_EFORMAT, "%s/%s: the manifest is that of step %" PRId64,
				 sf->dir, HERD__CKPT_MANIFEST, sf->m->step);
		goto fail;
	}
	HERD_CHECK_GOTO(herd__calloc(&sf->fds, 2 * sf->m->nfiles + 1, sizeof(int), "files"), st,
			fail);
	sf->fds2 = sf->fds + sf->m->nfiles;
	for (size_t i = 0; i < sf->m->nfiles; i++)
		sf->fds[i] = sf->fds2[i] = -1;
	return HERD_OK;
fail:
	step_close(sf);
	return st;
}

/* The descriptor of file f, opened inside the step directory only. */
static herd_status step_fd(step_files *sf, uint32_t f, int *fd)
{
	const herd__ckpt_file *file = &sf->m->files[f];
	char why[160];

	if (sf->fds[f] >= 0) {
		*fd = sf->fds[f];
		return HERD_OK;
	}
	if (herd__ckpt_data_open(sf->dfd, file->name, file->size, &sf->fds[f], why,
				 sizeof(why)) != 0)
		return herd__error(HERD_EFORMAT, "%s/%s: %s", sf->dir, file->name, why);
	*fd = sf->fds[f];
	return HERD_OK;
}

/*
 * A second open file description of file f (already open by step_fd), so
 * that a second reader has read-ahead of its own: the same inode, reopened
 * through /proc.  Without /proc, the first description serves both.
 */
static int step_fd2(step_files *sf, uint32_t f)
{
	char path[64];

	if (sf->fds2[f] < 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", sf->fds[f]);
		sf->fds2[f] = open(path, O_RDONLY | O_CLOEXEC);
	}
	return sf->fds2[f] >= 0 ? sf->fds2[f] : sf->fds[f];
}

/* ---- copying runs of a saved shard ------------------------------------ */

typedef struct copier {
	step_files *sf;
	const char *what;              /* the tensor's name */
	const herd__ckpt_shard *shard;
	size_t shard_index;
	int fd;
	uint64_t chunk;
	bool verify;
	uint8_t *dst;
	uint8_t *buf;                  /* one chunk */
	int64_t loaded;                /* the chunk in buf, -1 none */
	herd__ckpt_hasher *hasher;
	uint64_t from, to;             /* the chunks the hasher thread has: from..to-1 */
} copier;

static herd_status mismatch(const copier *c, uint64_t k, uint64_t got)
{
	return herd__error(HERD_EFORMAT, "%s/%s: \"%s\" shard %zu chunk %" PRIu64 " (byte %" PRIu64
			   " of the file): checksum mismatch: expected %016" PRIx64 ", got %016"
			   PRIx64, c->sf->dir, c->sf->m->files[c->shard->file].name, c->what,
			   c->shard_index, k, c->shard->at + k * c->chunk, c->shard->sums[k], got);
}

static void file_path(const copier *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", c->sf->dir, c->sf->m->files[c->shard->file].name);
}

/* Waits for the chunks the hasher thread reads, if any, and checks them. */
static herd_status check_pending(copier *c)
{
	herd__ckpt_read_result r;
	uint64_t from = c->from, end;

	if (c->from == c->to)
		return HERD_OK;
	r = herd__ckpt_hasher_wait(c->hasher);
	end = c->to * c->chunk < c->shard->len ? c->to * c->chunk : c->shard->len;
	c->from = c->to = 0;
	if (r.err != 0) {
		char path[4200];

		file_path(c, path, sizeof(path));
		return herd__ckpt_read_error(&r, (size_t)(c->shard->at + end - r.at), path);
	}
	return r.bad < 0 ? HERD_OK : mismatch(c, from + (uint64_t)r.bad, r.sum);
}

/* Reads chunk k (n bytes) into p and verifies it. */
static herd_status read_chunk(copier *c, uint64_t k, uint8_t *p, uint64_t n, const char *path)
{
	uint64_t got = 0;

	HERD_CHECK(herd__ckpt_pread_sum(c->fd, p, (size_t)n, c->shard->at + k * c->chunk, path,
					&got));
	return got == c->shard->sums[k] ? HERD_OK : mismatch(c, k, got);
}

/*
 * At chunk k, the start of a run of m >= 2 whole chunks that go straight
 * into the destination at p: the hasher thread takes the second half,
 * which it reads and verifies while this thread does the first.  The
 * thread's half is checked when this thread gets to it, and before the
 * shard is done, so no restore succeeds with an unverified byte; a problem
 * in the first half is reported before one in the second, as when
 * everything ran in series.
 */
static void split_run(copier *c, uint64_t k, uint64_t m, uint8_t *p)
{
	uint64_t first = k + (m + 1) / 2, start = first * c->chunk;
	uint64_t end = (k + m) * c->chunk < c->shard->len ? (k + m) * c->chunk : c->shard->len;

	c->from = first;
	c->to = k + m;
	herd__ckpt_hasher_post(c->hasher, step_fd2(c->sf, c->shard->file),
			       p + (start - k * c->chunk), c->shard->at + start, end - start,
			       c->chunk, c->shard->sums + first);
}

static herd_status copy_run(uint64_t src_off, uint64_t dst_off, uint64_t len, void *arg)
{
	copier *c = arg;
	char path[4200];

	file_path(c, path, sizeof(path));
	if (!c->verify)
		return herd__ckpt_pread(c->fd, c->dst + dst_off, (size_t)len, c->shard->at + src_off,
					path);
	while (len > 0) {
		uint64_t k = src_off / c->chunk, cstart = k * c->chunk;
		uint64_t cend = cstart + c->chunk < c->shard->len ? cstart + c->chunk : c->shard->len;
		uint64_t n = cend - src_off < len ? cend - src_off : len;

		if (src_off == cstart && n == cend - cstart) {
			/* The run covers the chunk: read and verify it in place. */
			uint8_t *p = c->dst + dst_off;

			if (c->from != c->to && k == c->from) {
				/* The hasher thread's half: check it, go past it. */
				uint64_t end = c->to * c->chunk < c->shard->len ? c->to * c->chunk
										: c->shard->len;

				HERD_CHECK(check_pending(c));
				n = end - src_off;
			} else {
				/* Whole chunks from k to the end of the run. */
				uint64_t m = src_off + len >= c->shard->len
						     ? (c->shard->len - cstart + c->chunk - 1) / c->chunk
						     : (src_off + len) / c->chunk - k;

				if (c->hasher != NULL && c->from == c->to && m >= 2)
					split_run(c, k, m, p);
				HERD_CHECK(read_chunk(c, k, p, n, path));
			}
		} else {
			if (c->loaded != (int64_t)k) {
				c->loaded = -1;
				HERD_CHECK(read_chunk(c, k, c->buf, cend - cstart, path));
				c->loaded = (int64_t)k;
			}
			memcpy(c->dst + dst_off, c->buf + (src_off - cstart), (size_t)n);
		}
		src_off += n;
		dst_off += n;
		len -= n;
	}
	return HERD_OK;
}

/*
 * Fills the box dst (at dst_data) of tensor t from every saved shard it
 * meets.  hasher: NULL hashes every chunk in series.
 */
static herd_status fill_box(step_files *sf, const herd__ckpt_tensor *t, const herd__ckpt_box *dst,
			    void *dst_data, uint8_t *buf, herd__ckpt_hasher *hasher)
{
	size_t elem = herd_dtype_size(t->dtype);

	for (size_t j = 0; j < t->nshards; j++) {
		const herd__ckpt_shard *s = &t->shards[j];
		copier c = { sf, t->name, s, j, -1, sf->m->chunk_bytes,
			     sf->m->checksum != HERD_CKPT_CHECKSUM_NONE, dst_data, buf, -1,
			     hasher, 0, 0 };
		herd__ckpt_box part;
		herd_status st, last;

		if (!herd__ckpt_box_intersect(&s->box, dst, &part))
			continue;
		HERD_CHECK(step_fd(sf, s->file, &c.fd));
		st = herd__ckpt_box_runs(&s->box, dst, &part, elem, copy_run, &c);
		/* Whatever happened, the hasher must be done with the last chunk. */
		last = check_pending(&c);
		HERD_CHECK(st);
		HERD_CHECK(last);
	}
	return HERD_OK;
}

/*
 * One slab's copy to the device, on a thread of its own.  A copy that
 * fails is HERD_ENODEV, with the driver's words: the GPU, not the step,
 * is at fault, so a restore of the latest step does not go on to older
 * ones (is_damage).
 */
typedef struct slab_copy {
	pthread_t thread;
	bool running;
	int device;
	void *dst;
	const void *src;
	size_t n;
	const char *what;
	herd_status st;
	char msg[512];
} slab_copy;

static void *slab_copy_main(void *arg)
{
	slab_copy *sc = arg;

	sc->st = herd__dev_use(sc->device);
	if (sc->st == HERD_OK)
		sc->st = herd__dev_from_host(sc->dst, sc->src, sc->n, sc->what);
	if (sc->st != HERD_OK) {
		sc->st = HERD_ENODEV;
		herd__strlcpy(sc->msg, herd_last_error(), sizeof(sc->msg));
	}
	return NULL;
}

/* Starts the copy sc describes; without a thread, makes it here. */
static herd_status slab_copy_start(slab_copy *sc)
{
	if (pthread_create(&sc->thread, NULL, slab_copy_main, sc) == 0) {
		sc->running = true;
		return HERD_OK;
	}
	slab_copy_main(sc);
	return sc->st == HERD_OK ? HERD_OK : herd__error(sc->st, "%s", sc->msg);
}

/* Waits for the copy sc started, if any; its outcome. */
static herd_status slab_copy_wait(slab_copy *sc)
{
	if (!sc->running)
		return HERD_OK;
	pthread_join(sc->thread, NULL);
	sc->running = false;
	return sc->st == HERD_OK ? HERD_OK : herd__error(sc->st, "%s", sc->msg);
}

/*
 * A device tensor's shard: read and verified on the host in slabs of whole
 * rows (along the first dimension), then copied to the device.  Two slabs
 * of at most half the staging size each take turns: one is copied to the
 * device (page-locked where the driver allows) while the next is read
 * into the other, so that the host memory it takes is bounded and the
 * copies hide behind the reads.
 */
static herd_status fill_device(herd_ckpt *ck, step_files *sf, const herd__ckpt_tensor *t,
			       const herd__ckpt_reg_tensor *rt, uint8_t *buf,
			       herd__ckpt_hasher *hasher)
{
	uint64_t rows = rt->box.shape[0], row = rows > 0 ? rt->bytes / rows : 0, per, i = 0;
	size_t half = ck->staging_bytes / 2, slabs;
	slab_copy sc[2] = { { .running = false }, { .running = false } };
	uint8_t *host = NULL;
	herd_status st = HERD_OK, done;
	bool pinned;

	if (rt->bytes == 0)
		return HERD_OK;
	per = row > 0 && half / row > 0 ? half / row : 1;
	if (per > rows)
		per = rows;
	slabs = per < rows ? 2 : 1;
	HERD_CHECK(herd__calloc(&host, slabs * (size_t)(per * row), 1,
				"host slabs of a device tensor"));
	pinned = herd__dev_pin(rt->device, host, slabs * (size_t)(per * row));
	for (uint64_t r0 = 0; r0 < rows && st == HERD_OK; r0 += per, i++) {
		slab_copy *c = &sc[i % 2];
		uint8_t *h = host + (i % 2) * per * row;
		herd__ckpt_box slab = rt->box;

		slab.offset[0] += r0;
		slab.shape[0] = rows - r0 < per ? rows - r0 : per;
		/* This slab's memory is free once its copy two slabs ago is. */
		st = slab_copy_wait(c);
		if (st == HERD_OK)
			st = fill_box(sf, t, &slab, h, buf, hasher);
		if (st == HERD_OK) {
			*c = (slab_copy){ .device = rt->device, .dst = (uint8_t *)rt->data + r0 * row,
					  .src = h, .n = (size_t)(slab.shape[0] * row),
					  .what = rt->name };
			st = slab_copy_start(c);
		}
	}
	/* The first failure is the one to report; every copy is waited for. */
	for (int k = 0; k < 2; k++) {
		done = slab_copy_wait(&sc[(i + (uint64_t)k) % 2]);
		if (st == HERD_OK)
			st = done;
	}
	if (pinned)
		herd__dev_unpin(rt->device, host);
	free(host);
	return st;
}

/* Reads part p of a blob into dst, verified. */
static herd_status read_blob(step_files *sf, const herd__ckpt_blob *b, size_t p, void *dst)
{
	const herd__ckpt_blob_part *part = &b->parts[p];
	char path[4200];
	uint64_t got;
	int fd = -1;

	HERD_CHECK(step_fd(sf, part->file, &fd));
	snprintf(path, sizeof(path), "%s/%s", sf->dir, sf->m->files[part->file].name);
	if (sf->m->checksum == HERD_CKPT_CHECKSUM_NONE)
		return herd__ckpt_pread(fd, dst, (size_t)part->len, part->at, path);
	HERD_CHECK(herd__ckpt_pread_sum(fd, dst, (size_t)part->len, part->at, path, &got));
	if (got != part->sum)
		return herd__error(HERD_EFORMAT, "%s: blob \"%s\" of rank %zu (byte %" PRIu64 " of the "
				   "file): checksum mismatch: expected %016" PRIx64 ", got %016" PRIx64,
				   path, b->name, p, part->at, part->sum, got);
	return HERD_OK;
}

/* ---- restore ------------------------------------------------------------ */

/* This rank's part of restoring one step. */
static herd_status restore_step(herd_ckpt *ck, int64_t step)
{
	herd_status st = HERD_OK;
	herd__ckpt_hasher hasher;
	step_files sf;
	uint8_t *buf = NULL;

	HERD_CHECK(step_open(&sf, ck->dir, step));
	herd__ckpt_hasher_start(&hasher);
	HERD_CHECK_GOTO(herd__calloc(&buf, sf.m->chunk_bytes, 1, "a chunk buffer"), st, out);
	for (size_t i = 0; i < ck->ntensors; i++) {
		const herd__ckpt_reg_tensor *rt = &ck->tensors[i];
		const herd__ckpt_tensor *t = herd__ckpt_manifest_tensor(sf.m, rt->name);

		if (t == NULL) {
			st = herd__error(HERD_EMISMATCH, "checkpoint step %" PRId64 " in %s has no "
					 "tensor \"%s\"", step, ck->dir, rt->name);
			goto out;
		}
		if (t->dtype != rt->dtype || t->ndim != rt->box.ndim ||
		    memcmp(t->shape, rt->shape, sizeof(uint64_t) * (size_t)t->ndim) != 0) {
			st = herd__error(HERD_EMISMATCH, "checkpoint step %" PRId64 ": tensor \"%s\" "
					 "was saved as %s with %d dimensions (first %" PRIu64 "), "
					 "registered as %s with %d (first %" PRIu64 ")", step,
					 rt->name, herd_dtype_name(t->dtype), t->ndim, t->shape[0],
					 herd_dtype_name(rt->dtype), rt->box.ndim, rt->shape[0]);
			goto out;
		}
		if (rt->device < 0) {
			HERD_CHECK_GOTO(fill_box(&sf, t, &rt->box, rt->data, buf, &hasher), st, out);
			continue;
		}
		st = fill_device(ck, &sf, t, rt, buf, &hasher);
		if (st != HERD_OK)
			goto out;
	}
	for (size_t i = 0; i < ck->nblobs; i++) {
		const herd__ckpt_reg_blob *rb = &ck->blobs[i];
		const herd__ckpt_blob *b = herd__ckpt_manifest_blob(sf.m, rb->name);
		size_t p = (size_t)ck->rank;

		if (b == NULL) {
			st = herd__error(HERD_EMISMATCH, "checkpoint step %" PRId64 " in %s has no blob "
					 "\"%s\"", step, ck->dir, rb->name);
			goto out;
		}
		if (sf.m->ranks != ck->size) {
			if (rb->rule == HERD_CKPT_BLOB_STRICT) {
				st = herd__error(HERD_EMISMATCH, "blob \"%s\" was saved by %d ranks and "
						 "may only be restored by as many (its rule is strict), "
						 "not by %d", rb->name, sf.m->ranks, ck->size);
				goto out;
			}
			p = rb->rule == HERD_CKPT_BLOB_RANK0 ? 0 : (size_t)ck->rank % (size_t)sf.m->ranks;
		}
		if (b->parts[p].len != rb->size) {
			st = herd__error(HERD_EMISMATCH, "blob \"%s\": saved rank %zu wrote %" PRIu64
					 " bytes, rank %d registered %zu", rb->name, p,
					 b->parts[p].len, ck->rank, rb->size);
			goto out;
		}
		HERD_CHECK_GOTO(read_blob(&sf, b, p, rb->data), st, out);
	}
out:
	herd__ckpt_hasher_stop(&hasher);
	free(buf);
	step_close(&sf);
	return st;
}

/* Failures that make a step unusable, so that the one before is tried. */
static bool is_damage(herd_status st)
{
	return st == HERD_EFORMAT || st == HERD_EIO || st == HERD_EVERSION || st == HERD_ENOTFOUND;
}

/* A step that a restore passed over because it does not verify. */
typedef struct passed_over {
	int64_t step;
	char why[1024];
} passed_over;

/* Remembers a damaged step (rank 0, which moves them aside); out of
 * memory, it stays where it is, as one a restore cannot tell damaged. */
static void remember_damaged(passed_over **list, size_t *n, int64_t step)
{
	passed_over *p = realloc(*list, (*n + 1) * sizeof(**list));

	if (p == NULL) {
		herd__log_warn("out of memory: checkpoint step %" PRId64 " will not be moved aside",
			       step);
		return;
	}
	*list = p;
	p[*n].step = step;
	herd__strlcpy(p[*n].why, herd_last_error(), sizeof(p[*n].why));
	(*n)++;
}

/*
 * Rank 0, once a restore found a step that verifies: the newer steps it
 * passed over because they do not verify are moved aside, so that the
 * program's next saves of their numbers find them free.  A failure to
 * move one is a warning: the restore succeeded, and a save of that number
 * verifies the step again and moves it then.
 */
static void move_damaged_aside(herd_ckpt *ck, const passed_over *list, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char aside[4096];

		if (herd__ckpt_move_aside(ck->dir, list[i].step, list[i].why, aside,
					  sizeof(aside)) == HERD_OK)
			herd__log_warn("checkpoint step %" PRId64 " in %s does not verify: moved it "
				       "aside to %s, kept for inspection (herd ckpt ls lists it); "
				       "a save of step %" PRId64 " writes it anew", list[i].step,
				       ck->dir, aside, list[i].step);
		else
			herd__log_warn("checkpoint step %" PRId64 " in %s does not verify, and %s; a "
				       "save of step %" PRId64 " tries again", list[i].step, ck->dir,
				       herd_last_error(), list[i].step);
	}
}

herd_status herd_ckpt_restore(herd_ckpt *ck, int64_t step, int64_t *restored)
{
	int64_t *steps = NULL;
	size_t nsteps = 0, next;
	herd_status st, local = HERD_OK;
	char first_failure[1024] = "", tried[256] = "";
	passed_over *damaged = NULL;
	size_t ntried = 0, ndamaged = 0;
	int failed;

	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_restore: ck is NULL");
	if (restored != NULL)
		*restored = -1;
	HERD_CHECK(herd__ckpt_join(ck));
	if (step != HERD_CKPT_LATEST && (step < 0 || step > HERD_CKPT_STEP_MAX))
		return herd__error(HERD_EINVAL, "herd_ckpt_restore: step %" PRId64 " is outside "
				   "0..%" PRId64, step, HERD_CKPT_STEP_MAX);
	/* Rank 0 lists the candidates, so that every rank tries the same ones. */
	if (ck->rank == 0 && step == HERD_CKPT_LATEST)
		local = herd__ckpt_committed_steps(ck->dir, &steps, &nsteps);
	HERD_CHECK_GOTO(herd__ckpt_agree(ck, local, &failed), st, out);
	next = nsteps;
	for (;;) {
		int64_t cand = step;

		if (step == HERD_CKPT_LATEST) {
			cand = ck->rank == 0 && next > 0 ? steps[--next] : -1;
			HERD_CHECK_GOTO(herd__ckpt_bcast(ck, &cand, sizeof(cand)), st, out);
			if (cand < 0 && ntried == 0) {
				st = herd__error(HERD_ENOTFOUND, "no committed checkpoint step in %s "
						 "(there is none)", ck->dir);
				goto out;
			}
			/* Steps exist and none verifies: not a fresh start. */
			if (cand < 0 && ntried == 1) {
				st = herd__error(HERD_ECORRUPT, "the only committed checkpoint step in "
						 "%s does not verify (step %s): %s", ck->dir, tried,
						 first_failure);
				goto out;
			}
			if (cand < 0) {
				st = herd__error(HERD_ECORRUPT, "none of the %zu committed checkpoint "
						 "steps in %s verifies (steps %s); the newest failed: %s",
						 ntried, ck->dir, tried, first_failure);
				goto out;
			}
		}
		st = herd__ckpt_agree(ck, restore_step(ck, cand), &failed);
		if (st == HERD_OK) {
			if (restored != NULL)
				*restored = cand;
			if (ck->rank == 0)
				move_damaged_aside(ck, damaged, ndamaged);
			goto out;
		}
		herd__error_wrap(st, "restoring checkpoint step %" PRId64 ": ", cand);
		if (step != HERD_CKPT_LATEST || !is_damage(st) || failed < 0)
			goto out;
		if (first_failure[0] == '\0')
			herd__strlcpy(first_failure, herd_last_error(), sizeof(first_failure));
		/* Damaged, as opposed to unreadable for now (HERD_EIO) or of a
		 * newer format (HERD_EVERSION): moved aside if an older step
		 * verifies.  When none does, nothing moves: the job stops on
		 * HERD_ECORRUPT, and a restart meets the same steps. */
		if (ck->rank == 0 && st == HERD_EFORMAT)
			remember_damaged(&damaged, &ndamaged, cand);
		/* The steps tried, newest first: "8, 7, 6", cut short with "...". */
		{
			size_t o = strlen(tried);

			if (o + 24 < sizeof(tried))
				snprintf(tried + o, sizeof(tried) - o, "%s%" PRId64, o ? ", " : "", cand);
			else if (tried[o - 1] != '.')
				herd__strlcpy(tried + o, ", ...", sizeof(tried) - o);
		}
		ntried++;
		if (ck->rank == 0)
			herd__log_warn("%s; trying the step before", herd_last_error());
	}
out:
	free(steps);
	free(damaged);
	return st;
}

/* ---- without a communicator -------------------------------------------- */

/* Sum of the sizes of the regular files in dir/name. */
static uint64_t dir_bytes(const char *dir, const char *name)
{
	char path[4096];
	uint64_t total = 0;
	struct dirent *e;
	DIR *d;

	if (herd__ckpt_path(path, sizeof(path), dir, name) != HERD_OK || (d = opendir(path)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		struct stat sb;

		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(sb.st_mode))
			total += (uint64_t)sb.st_size;
	}
	closedir(d);
	return total;
}

/* Whether every file m lists is in the step directory path, a regular
 * file of the size m gives; the first that is not, in problem. */
static bool files_as_listed(const char *path, const herd__ckpt_manifest *m, char *problem,
			    size_t cap)
{
	for (size_t i = 0; i < m->nfiles; i++) {
		char fpath[4200];
		struct stat sb;

		snprintf(fpath, sizeof(fpath), "%s/%s", path, m->files[i].name);
		if (lstat(fpath, &sb) != 0) {
			snprintf(problem, cap, "%s: %s", m->files[i].name,
				 errno == ENOENT ? "missing" : strerror(errno));
			return false;
		}
		if (!S_ISREG(sb.st_mode)) {
			snprintf(problem, cap, "%s is %s, not a regular file", m->files[i].name,
				 herd__file_kind(sb.st_mode));
			return false;
		}
		if ((uint64_t)sb.st_size != m->files[i].size) {
			snprintf(problem, cap, "%s has %" PRIu64 " bytes, the manifest says %" PRIu64,
				 m->files[i].name, (uint64_t)sb.st_size, m->files[i].size);
			return false;
		}
	}
	return true;
}

/* The note of a step moved aside, path: its first line, into buf. */
static void read_note(const char *path, char *buf, size_t cap)
{
	char npath[4200], why[160];
	uint64_t size;
	ssize_t got = -1;
	int fd, err;

	snprintf(npath, sizeof(npath), "%s/%s", path, HERD__CKPT_DAMAGED_NOTE);
	if (herd__ckpt_open_file(AT_FDCWD, npath, &fd, &size, &err, why, sizeof(why)) == 0) {
		got = pread(fd, buf, cap - 1, 0);
		close(fd);
	}
	buf[got > 0 ? got : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0] == '\0')
		snprintf(buf, cap, "it did not verify (%s says no more)", HERD__CKPT_DAMAGED_NOTE);
}

static int cmp_info(const void *a, const void *b)
{
	const herd_ckpt_step_info *x = a, *y = b;

	if (x->step != y->step)
		return (x->step > y->step) - (x->step < y->step);
	return strcmp(x->name, y->name);
}

herd_status herd_ckpt_list(const char *dir, herd_ckpt_step_info **out, size_t *count)
{
	herd_ckpt_step_info *items = NULL;
	herd_status st = HERD_OK;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	if (out == NULL || count == NULL || dir == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_list: dir, out and count must not be NULL");
	*out = NULL;
	*count = 0;
	d = opendir(dir);
	if (d == NULL)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "cannot list the checkpoint directory %s", dir);
	while ((e = readdir(d)) != NULL) {
		herd_ckpt_step_info *it;
		herd__ckpt_manifest *m = NULL;
		char canon[64], path[4096];
		bool committed = false, aside = false, path_ok;
		int64_t step;

		if (herd__ckpt_parse_damaged(e->d_name, &step)) {
			aside = true;
		} else if (herd__ckpt_parse_step(e->d_name, HERD__CKPT_STEP_PREFIX, &step)) {
			herd__ckpt_step_name(canon, sizeof(canon), step);
			if (strcmp(canon, e->d_name) != 0)
				continue;
			committed = true;
		} else if (herd__ckpt_parse_step(e->d_name, HERD__CKPT_TMP_PREFIX, &step)) {
			committed = false;
		} else {
			continue;
		}
		if (!herd__ckpt_is_ours(dir, e->d_name))
			continue;
		if (strlen(e->d_name) >= sizeof(it->name))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			herd_ckpt_step_info *p = realloc(items, ncap * sizeof(*p));

			if (p == NULL) {
				st = herd__error(HERD_ENOMEM, "out of memory listing %s", dir);
				goto out;
			}
			items = p;
			cap = ncap;
		}
		it = &items[n++];
		memset(it, 0, sizeof(*it));
		it->step = step;
		it->moved_aside = aside;
		herd__strlcpy(it->name, e->d_name, sizeof(it->name));
		it->bytes = dir_bytes(dir, e->d_name);
		path_ok = herd__ckpt_path(path, sizeof(path), dir, e->d_name) == HERD_OK;
		if (path_ok && herd__ckpt_manifest_load(&m, path) == HERD_OK) {
			it->manifest_ok = true;
			it->ranks = m->ranks;
			it->tensors = (int)m->ntensors;
			it->blobs = (int)m->nblobs;
			it->time = m->time;
			it->files_ok = files_as_listed(path, m, it->problem, sizeof(it->problem));
		} else {
			herd__strlcpy(it->problem, herd_last_error(), sizeof(it->problem));
		}
		/* Moved aside: why, as the move wrote it. */
		if (aside && path_ok)
			read_note(path, it->problem, sizeof(it->problem));
		/* A committed step is one renamed into place with its manifest. */
		if (committed) {
			char mpath[4200];

			struct stat sb;

			snprintf(mpath, sizeof(mpath), "%s/%s", path, HERD__CKPT_MANIFEST);
			it->committed = lstat(mpath, &sb) == 0;
		}
		herd__ckpt_manifest_free(m);
	}
	if (n > 1)
		qsort(items, n, sizeof(*items), cmp_info);
	*out = items;
	*count = n;
	items = NULL;
out:
	free(items);
	closedir(d);
	return st;
}

herd_status herd_ckpt_latest(const char *dir, int64_t *step)
{
	int64_t *steps = NULL;
	size_t n = 0;

	if (dir == NULL || step == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_latest: dir and step must not be NULL");
	HERD_CHECK(herd__ckpt_committed_steps(dir, &steps, &n));
	if (n == 0) {
		free(steps);
		return herd__error(HERD_ENOTFOUND, "no committed checkpoint step in %s", dir);
	}
	*step = steps[n - 1];
	free(steps);
	return HERD_OK;
}

/* Resolves HERD_CKPT_LATEST. */
static herd_status resolve(const char *dir, int64_t step, int64_t *out)
{
	if (step == HERD_CKPT_LATEST)
		return herd_ckpt_latest(dir, out);
	if (step < 0 || step > HERD_CKPT_STEP_MAX)
		return herd__error(HERD_EINVAL, "checkpoint step %" PRId64 " is outside 0..%" PRId64,
				   step, HERD_CKPT_STEP_MAX);
	*out = step;
	return HERD_OK;
}

herd_status herd_ckpt_verify(const char *dir, int64_t step, herd_ckpt_problem_fn fn, void *arg,
			     size_t *problems)
{
	char name[64], stepdir[4096], note[4400];
	herd__ckpt_manifest *m = NULL;
	struct stat sb;
	herd_status st;

	if (problems != NULL)
		*problems = 0;
	if (dir == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_verify: dir is NULL");
	HERD_CHECK(resolve(dir, step, &step));
	herd__ckpt_step_name(name, sizeof(name), step);
	HERD_CHECK(herd__ckpt_path(stepdir, sizeof(stepdir), dir, name));
	if (lstat(stepdir, &sb) != 0 && errno == ENOENT) {
		herd__ckpt_aside_note(dir, step, note, sizeof(note));
		return herd__error(HERD_ENOTFOUND, "checkpoint step %" PRId64 ": there is no %s%s",
				   step, stepdir, note);
	}
	st = herd__ckpt_manifest_load(&m, stepdir);
	if (st == HERD_EFORMAT || st == HERD_EVERSION) {
		/* The manifest itself is the problem: report it like any other. */
		char msg[1024], prefix[PATH_MAX + 64];
		size_t n = (size_t)snprintf(prefix, sizeof(prefix), "%s/%s: ", stepdir,
					    HERD__CKPT_MANIFEST);
		herd_ckpt_problem p = { HERD__CKPT_MANIFEST, NULL, -1, -1, -1, msg };

		herd__strlcpy(msg, herd_last_error(), sizeof(msg));
		/* The problem names its file; its message need not say it again. */
		if (n < sizeof(prefix) && strncmp(msg, prefix, n) == 0)
			p.message = msg + n;
		if (fn != NULL)
			fn(arg, &p);
		if (problems != NULL)
			*problems = 1;
		return herd__error(HERD_EFORMAT, "%s", msg);
	}
	HERD_CHECK(st);
	st = herd__ckpt_verify_data(stepdir, m, 0, 1, fn, arg, problems, NULL);
	herd__ckpt_manifest_free(m);
	return st;
}

/* ---- the reader ---------------------------------------------------------- */

struct herd_ckpt_reader {
	step_files sf;
	uint8_t *buf;
	/* Started by the first read and kept until the reader is freed: a
	 * thread per read would cost more than reading a small tensor. */
	herd__ckpt_hasher hasher;
	bool hasher_on;
};

herd_status herd_ckpt_reader_open(herd_ckpt_reader **out, const char *dir, int64_t step)
{
	herd_ckpt_reader *r = NULL;
	herd_status st;

	if (out == NULL || dir == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_open: out and dir must not be NULL");
	*out = NULL;
	HERD_CHECK(resolve(dir, step, &step));
	HERD_CHECK(herd__calloc(&r, 1, sizeof(*r), "a checkpoint reader"));
	HERD_CHECK_GOTO(step_open(&r->sf, dir, step), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&r->buf, r->sf.m->chunk_bytes, 1, "a chunk buffer"), st, fail);
	*out = r;
	return HERD_OK;
fail:
	free(r);
	return st;
}

void herd_ckpt_reader_free(herd_ckpt_reader *r)
{
	if (r == NULL)
		return;
	if (r->hasher_on)
		herd__ckpt_hasher_stop(&r->hasher);
	step_close(&r->sf);
	free(r->buf);
	free(r);
}

int64_t herd_ckpt_reader_step(const herd_ckpt_reader *r)
{
	return r->sf.m->step;
}

int herd_ckpt_reader_ranks(const herd_ckpt_reader *r)
{
	return r->sf.m->ranks;
}

int64_t herd_ckpt_reader_time(const herd_ckpt_reader *r)
{
	return r->sf.m->time;
}

size_t herd_ckpt_reader_tensor_count(const herd_ckpt_reader *r)
{
	return r->sf.m->ntensors;
}

herd_status herd_ckpt_reader_tensor(const herd_ckpt_reader *r, size_t i,
				    herd_ckpt_tensor_info *info)
{
	const herd__ckpt_tensor *t;

	if (r == NULL || info == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_tensor: r and info must not be "
				   "NULL");
	if (i >= r->sf.m->ntensors)
		return herd__error(HERD_EINVAL,
				   "herd_ckpt_reader_tensor: tensor %zu is out of range: the step "
				   "has %zu",
				   i, r->sf.m->ntensors);
	t = &r->sf.m->tensors[i];
	memset(info, 0, sizeof(*info));
	info->name = t->name;
	info->dtype = t->dtype;
	info->ndim = t->ndim;
	memcpy(info->shape, t->shape, sizeof(info->shape));
	info->shards = t->nshards;
	info->bytes = t->bytes;
	return HERD_OK;
}

herd_status herd_ckpt_reader_find(const herd_ckpt_reader *r, const char *name, size_t *index)
{
	const herd__ckpt_tensor *t;

	if (r == NULL || name == NULL || index == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_find: NULL argument");
	t = herd__ckpt_manifest_tensor(r->sf.m, name);
	if (t == NULL)
		return herd__error(HERD_ENOTFOUND, "%s: no tensor \"%s\"", r->sf.dir, name);
	*index = (size_t)(t - r->sf.m->tensors);
	return HERD_OK;
}

herd_status herd_ckpt_reader_read(herd_ckpt_reader *r, const char *name, void *buf, size_t cap)
{
	const herd__ckpt_tensor *t;
	herd__ckpt_box whole;
	size_t i;

	if (r == NULL || name == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_read: NULL argument");
	HERD_CHECK(herd_ckpt_reader_find(r, name, &i));
	t = &r->sf.m->tensors[i];
	if (cap < t->bytes || (buf == NULL && t->bytes > 0))
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_read: \"%s\" has %" PRIu64 " bytes, "
				   "the buffer %zu", name, t->bytes, cap);
	memset(&whole, 0, sizeof(whole));
	whole.ndim = t->ndim;
	memcpy(whole.shape, t->shape, sizeof(whole.shape));
	if (!r->hasher_on) {
		herd__ckpt_hasher_start(&r->hasher);
		r->hasher_on = true;
	}
	return fill_box(&r->sf, t, &whole, buf, r->buf, &r->hasher);
}

size_t herd_ckpt_reader_blob_count(const herd_ckpt_reader *r)
{
	return r->sf.m->nblobs;
}

herd_status herd_ckpt_reader_blob(const herd_ckpt_reader *r, size_t i, herd_ckpt_blob_info *info)
{
	if (r == NULL || info == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_blob: r and info must not be NULL");
	if (i >= r->sf.m->nblobs)
		return herd__error(HERD_EINVAL,
				   "herd_ckpt_reader_blob: blob %zu is out of range: the step has %zu",
				   i, r->sf.m->nblobs);
	info->name = r->sf.m->blobs[i].name;
	info->rule = r->sf.m->blobs[i].rule;
	info->ranks = (int)r->sf.m->blobs[i].nparts;
	return HERD_OK;
}

herd_status herd_ckpt_reader_read_blob(herd_ckpt_reader *r, const char *name, int rank,
				       void *buf, size_t cap, size_t *len)
{
	const herd__ckpt_blob *b;

	if (r == NULL || name == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_reader_read_blob: NULL argument");
	b = herd__ckpt_manifest_blob(r->sf.m, name);
	if (b == NULL)
		return herd__error(HERD_ENOTFOUND, "%s: no blob \"%s\"", r->sf.dir, name);
	if (rank < 0 || (size_t)rank >= b->nparts)
		return herd__error(HERD_EINVAL, "blob \"%s\": rank %d; the step was saved by %zu ranks",
				   name, rank, b->nparts);
	if (len != NULL)
		*len = (size_t)b->parts[rank].len;
	if (cap < b->parts[rank].len || buf == NULL)
		return herd__error(HERD_EINVAL, "blob \"%s\" of rank %d has %" PRIu64 " bytes, the "
				   "buffer %zu", name, rank, b->parts[rank].len, cap);
	return read_blob(&r->sf, b, (size_t)rank, buf);
}
