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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device.h"
#include "handle.h"
#include "net.h"

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
	if (sf->dfd < 0)
		return herd__error(HERD_EINTERNAL, "%s/%s: not fetched from peers' memory", sf->dir,
				   file->name);
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

/*
 * The saved part of blob rb that this rank restores (*p), by its rule;
 * HERD_EMISMATCH when the step has no such blob or the rule forbids it.
 */
static herd_status blob_part(const herd_ckpt *ck, const herd__ckpt_manifest *m,
			     const herd__ckpt_reg_blob *rb, const char *where,
			     const herd__ckpt_blob **out, size_t *p)
{
	const herd__ckpt_blob *b = herd__ckpt_manifest_blob(m, rb->name);

	*out = b;
	*p = (size_t)ck->rank;
	if (b == NULL)
		return herd__error(HERD_EMISMATCH, "checkpoint step %" PRId64 " in %s has no blob "
				   "\"%s\"", m->step, where, rb->name);
	if (m->ranks != ck->size) {
		if (rb->rule == HERD_CKPT_BLOB_STRICT)
			return herd__error(HERD_EMISMATCH, "blob \"%s\" was saved by %d ranks and "
					   "may only be restored by as many (its rule is strict), "
					   "not by %d", rb->name, m->ranks, ck->size);
		*p = rb->rule == HERD_CKPT_BLOB_RANK0 ? 0 : (size_t)ck->rank % (size_t)m->ranks;
	}
	if (b->parts[*p].len != rb->size)
		return herd__error(HERD_EMISMATCH, "blob \"%s\": saved rank %zu wrote %" PRIu64
				   " bytes, rank %d registered %zu", rb->name, *p,
				   b->parts[*p].len, ck->rank, rb->size);
	return HERD_OK;
}

/* The manifest's tensor for rt, of the same type and shape; HERD_EMISMATCH otherwise. */
static herd_status tensor_of(const herd__ckpt_manifest *m, const herd__ckpt_reg_tensor *rt,
			     const char *where, const herd__ckpt_tensor **out)
{
	const herd__ckpt_tensor *t = herd__ckpt_manifest_tensor(m, rt->name);

	*out = t;
	if (t == NULL)
		return herd__error(HERD_EMISMATCH, "checkpoint step %" PRId64 " in %s has no "
				   "tensor \"%s\"", m->step, where, rt->name);
	if (t->dtype != rt->dtype || t->ndim != rt->box.ndim ||
	    memcmp(t->shape, rt->shape, sizeof(uint64_t) * (size_t)t->ndim) != 0)
		return herd__error(HERD_EMISMATCH, "checkpoint step %" PRId64 ": tensor \"%s\" "
				   "was saved as %s with %d dimensions (first %" PRIu64 "), "
				   "registered as %s with %d (first %" PRIu64 ")", m->step,
				   rt->name, herd_dtype_name(t->dtype), t->ndim, t->shape[0],
				   herd_dtype_name(rt->dtype), rt->box.ndim, rt->shape[0]);
	return HERD_OK;
}

/* This rank's part of restoring the step whose files sf holds (where: for messages). */
static herd_status restore_from(herd_ckpt *ck, step_files *sf, const char *where)
{
	herd_status st = HERD_OK;
	herd__ckpt_hasher hasher;
	uint8_t *buf = NULL;

	herd__ckpt_hasher_start(&hasher);
	HERD_CHECK_GOTO(herd__calloc(&buf, sf->m->chunk_bytes, 1, "a chunk buffer"), st, out);
	for (size_t i = 0; i < ck->ntensors; i++) {
		const herd__ckpt_reg_tensor *rt = &ck->tensors[i];
		const herd__ckpt_tensor *t;

		HERD_CHECK_GOTO(tensor_of(sf->m, rt, where, &t), st, out);
		if (rt->device < 0)
			st = fill_box(sf, t, &rt->box, rt->data, buf, &hasher);
		else
			st = fill_device(ck, sf, t, rt, buf, &hasher);
		if (st != HERD_OK)
			goto out;
	}
	for (size_t i = 0; i < ck->nblobs; i++) {
		const herd__ckpt_blob *b;
		size_t p;

		HERD_CHECK_GOTO(blob_part(ck, sf->m, &ck->blobs[i], where, &b, &p), st, out);
		HERD_CHECK_GOTO(read_blob(sf, b, p, ck->blobs[i].data), st, out);
	}
out:
	herd__ckpt_hasher_stop(&hasher);
	free(buf);
	return st;
}

/* This rank's part of restoring one step from storage. */
static herd_status restore_step(herd_ckpt *ck, int64_t step)
{
	herd_status st;
	step_files sf;

	HERD_CHECK(step_open(&sf, ck->dir, step));
	st = restore_from(ck, &sf, ck->dir);
	step_close(&sf);
	return st;
}

/* ---- restoring from peers' memory ----------------------------------------- */

/* How long a holder has to answer what it holds. */
#define SURVEY_MS 3000
/* The most bytes one fetch asks for. */
#define FETCH_PIECE ((uint64_t)64 << 20)

/* What rank 0 found in the holders, as it tells the others. */
typedef struct peer_plan {
	int64_t step;            /* the step to restore from memory; -1: from storage */
	herd__peer_key key;      /* its save */
	int64_t peers_step;      /* the newest complete step in memory; -1: none */
	int64_t storage_step;    /* the newest committed step in storage; -1: none */
	uint64_t mlen;           /* the manifest's bytes, broadcast next */
	int32_t nfiles;          /* then, per saved rank, the holder that serves it */
	char why[384];
} peer_plan;

/* What the holders hold: each one's list (NULL: it did not answer). */
typedef struct survey {
	herd__peer_step **steps;
	size_t *nsteps;
	char unreachable[256];   /* the hosts that did not answer */
} survey;

static void survey_free(survey *sv, size_t n)
{
	for (size_t i = 0; sv->steps != NULL && i < n; i++)
		herd__peer_steps_free(sv->steps[i], sv->nsteps[i]);
	free(sv->steps);
	free(sv->nsteps);
}

/* Appends item to the list in buf ("a, b, c"), cut short where it does not fit. */
static void list_add(char *buf, size_t cap, const char *item)
{
	size_t o = strlen(buf);

	if (o > 0 && o + 2 < cap)
		herd__strlcpy(buf + o, ", ", cap - o);
	o = strlen(buf);
	if (o + 1 < cap)
		herd__strlcpy(buf + o, item, cap - o);
}

static bool key_is(const herd__peer_key *a, const herd__peer_key *b)
{
	return a->ns == b->ns && a->step == b->step && a->id == b->id;
}

/* Holder i's entry of save k, or NULL. */
static const herd__peer_step *held_by(const survey *sv, size_t i, const herd__peer_key *k)
{
	for (size_t j = 0; sv->steps[i] != NULL && j < sv->nsteps[i]; j++)
		if (key_is(&sv->steps[i][j].key, k))
			return &sv->steps[i][j];
	return NULL;
}

/* The holder of save k's saved rank `rank` (size bytes) that serves the fewest so far. */
static int32_t holder_of(const herd_ckpt *ck, const survey *sv, const herd__peer_key *k,
			 int rank, uint64_t size, const int *load)
{
	int32_t best = -1;

	for (size_t i = 0; i < ck->nholders; i++) {
		const herd__peer_step *s = held_by(sv, i, k);

		for (size_t f = 0; s != NULL && f < s->nfiles; f++)
			if (s->ranks[f] == rank && s->sizes[f] == size &&
			    (best < 0 || load[i] < load[best]))
				best = (int32_t)i;
	}
	return best;
}

/* Asks every holder what it holds, each within SURVEY_MS. */
static void survey_ask(herd_ckpt *ck, survey *sv, herd__peer_key **cand, size_t *ncand,
		       size_t *answered)
{
	for (size_t i = 0; i < ck->nholders; i++) {
		int64_t deadline = herd__net_deadline(SURVEY_MS);
		herd__peer_conn c;

		if (ck->holders[i].port == 0)
			continue;
		if (herd__peer_connect(&c, &ck->holders[i], deadline) == HERD_OK &&
		    herd__peer_list(&c, &sv->steps[i], &sv->nsteps[i], deadline) == HERD_OK) {
			(*answered)++;
			for (size_t k = 0; k < sv->nsteps[i]; k++) {
				herd__peer_key *grown;

				if (!sv->steps[i][k].manifest || sv->steps[i][k].key.ns != ck->peer_ns)
					continue;
				grown = realloc(*cand, (*ncand + 1) * sizeof(**cand));
				if (grown == NULL)
					break;
				*cand = grown;
				(*cand)[(*ncand)++] = sv->steps[i][k].key;
			}
		} else {
			herd__log_info("checkpoint restore: %s", herd_last_error());
			list_add(sv->unreachable, sizeof(sv->unreachable), ck->holders[i].host);
		}
		herd__peer_close(&c);
	}
}

/* Newest step first; one save's entries next to each other. */
static int cmp_newest(const void *a, const void *b)
{
	const herd__peer_key *x = a, *y = b;

	if (x->step != y->step)
		return x->step > y->step ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Save k's manifest from any holder that lists it: *data, *len and decoded *m. */
static bool survey_manifest(herd_ckpt *ck, const survey *sv, const herd__peer_key *k,
			    char **data, size_t *len, herd__ckpt_manifest **m)
{
	for (size_t i = 0; i < ck->nholders; i++) {
		const herd__peer_step *s = held_by(sv, i, k);
		int64_t deadline = herd__net_deadline(ck->peer_timeout_ms);
		herd__peer_conn c;

		if (s == NULL || !s->manifest)
			continue;
		if (herd__peer_connect(&c, &ck->holders[i], deadline) == HERD_OK &&
		    herd__peer_fetch_manifest(&c, k, data, len, deadline) == HERD_OK &&
		    herd__ckpt_manifest_decode(m, *data, *len, "a manifest in peers' memory") ==
			    HERD_OK && (*m)->step == k->step) {
			herd__peer_close(&c);
			return true;
		}
		herd__log_warn("checkpoint step %" PRId64 " in peers' memory, from %s: %s", k->step,
			       ck->holders[i].host, herd_last_error());
		herd__peer_close(&c);
		free(*data);
		*data = NULL;
		herd__ckpt_manifest_free(*m);
		*m = NULL;
	}
	return false;
}

/*
 * Rank 0: asks every holder what it holds and finds the newest save of
 * this handle whose manifest and every saved rank's data are held by
 * holders that answered; *source (per saved rank, the holder to fetch
 * from) and *manifest (its bytes) for it.  plan->step stays -1 when it
 * restores from storage; why says why, either way.
 */
static void survey_holders(herd_ckpt *ck, peer_plan *plan, int32_t **source, char **manifest)
{
	herd__peer_key *cand = NULL;
	size_t ncand = 0, answered = 0;
	int *load = NULL;
	survey sv = { 0 };
	char missing[256] = "";

	if (herd__calloc(&sv.steps, ck->nholders, sizeof(*sv.steps), "a survey") != HERD_OK ||
	    herd__calloc(&sv.nsteps, ck->nholders, sizeof(size_t), "a survey") != HERD_OK ||
	    herd__calloc(&load, ck->nholders, sizeof(int), "a survey") != HERD_OK) {
		snprintf(plan->why, sizeof(plan->why), "%s", herd_last_error());
		goto out;
	}
	survey_ask(ck, &sv, &cand, &ncand, &answered);
	if (answered == 0) {
		snprintf(plan->why, sizeof(plan->why), "no checkpoint holder answered (%s)",
			 sv.unreachable[0] ? sv.unreachable : "none is named");
		goto out;
	}
	if (ncand > 1)
		qsort(cand, ncand, sizeof(*cand), cmp_newest);
	for (size_t a = 0; a < ncand && plan->peers_step < 0; a++) {
		herd__ckpt_manifest *m = NULL;
		char *data = NULL;
		size_t len = 0;
		bool whole = true;

		if (a > 0 && key_is(&cand[a], &cand[a - 1]))
			continue;
		if (!survey_manifest(ck, &sv, &cand[a], &data, &len, &m))
			continue;
		free(*source);
		*source = NULL;
		memset(load, 0, ck->nholders * sizeof(int));
		if (herd__calloc(source, m->nfiles + 1, sizeof(int32_t), "a survey") != HERD_OK)
			whole = false;
		for (size_t f = 0; whole && f < m->nfiles; f++) {
			int32_t i = holder_of(ck, &sv, &cand[a], m->files[f].rank, m->files[f].size,
					      load);

			if (i < 0) {
				if (missing[0] == '\0')
					snprintf(missing, sizeof(missing), "step %" PRId64 " in peers' "
						 "memory lacks saved rank %d's data", cand[a].step,
						 m->files[f].rank);
				whole = false;
				break;
			}
			(*source)[f] = i;
			load[i]++;
		}
		if (whole) {
			plan->peers_step = cand[a].step;
			plan->key = cand[a];
			plan->nfiles = (int32_t)m->nfiles;
			plan->mlen = len;
			*manifest = data;
			data = NULL;
		}
		free(data);
		herd__ckpt_manifest_free(m);
	}
	if (plan->peers_step < 0) {
		snprintf(plan->why, sizeof(plan->why), "peers' memory holds no complete step%s%s%s%s",
			 missing[0] ? " (" : "", missing, missing[0] ? ")" : "",
			 sv.unreachable[0] ? "; no answer from the holder on " : "");
		if (sv.unreachable[0])
			herd__strlcpy(plan->why + strlen(plan->why), sv.unreachable,
				      sizeof(plan->why) - strlen(plan->why));
	} else if (plan->storage_step > plan->peers_step) {
		snprintf(plan->why, sizeof(plan->why), "storage's step %" PRId64 " is newer than "
			 "the newest complete step in peers' memory, %" PRId64, plan->storage_step,
			 plan->peers_step);
	} else {
		plan->step = plan->peers_step;
		if (plan->storage_step < 0)
			snprintf(plan->why, sizeof(plan->why), "storage holds no step; peers' memory "
				 "holds step %" PRId64, plan->step);
		else if (plan->storage_step < plan->step)
			snprintf(plan->why, sizeof(plan->why), "step %" PRId64 " in peers' memory is "
				 "newer than storage's newest, step %" PRId64, plan->step,
				 plan->storage_step);
		else
			snprintf(plan->why, sizeof(plan->why), "step %" PRId64 " is in peers' memory "
				 "and in storage; memory is read first", plan->step);
	}
out:
	if (plan->step < 0) {
		free(*source);
		*source = NULL;
		free(*manifest);
		*manifest = NULL;
		plan->nfiles = 0;
		plan->mlen = 0;
	}
	survey_free(&sv, ck->nholders);
	free(cand);
	free(load);
}

/* Byte ranges of one saved file that this rank needs. */
typedef struct range {
	uint64_t lo, hi;
} range;

typedef struct ranges {
	range *r;
	size_t n;
	const herd__ckpt_shard *shard;   /* while collecting a shard's runs */
	uint64_t chunk;
	herd_status st;
} ranges;

static void add_range(ranges *rs, uint64_t lo, uint64_t hi)
{
	range *grown;

	if (rs->st != HERD_OK || hi <= lo)
		return;
	if (rs->n > 0 && rs->r[rs->n - 1].hi >= lo && rs->r[rs->n - 1].lo <= lo) {
		if (hi > rs->r[rs->n - 1].hi)
			rs->r[rs->n - 1].hi = hi;
		return;
	}
	grown = realloc(rs->r, (rs->n + 1) * sizeof(*grown));
	if (grown == NULL) {
		rs->st = herd__error(HERD_ENOMEM, "out of memory for the ranges to fetch");
		return;
	}
	rs->r = grown;
	rs->r[rs->n].lo = lo;
	rs->r[rs->n++].hi = hi;
}

/* A run of a shard that this rank reads: the whole chunks around it. */
static herd_status need_run(uint64_t src_off, uint64_t dst_off, uint64_t len, void *arg)
{
	ranges *rs = arg;
	const herd__ckpt_shard *s = rs->shard;
	uint64_t lo = src_off / rs->chunk * rs->chunk;
	uint64_t hi = (src_off + len + rs->chunk - 1) / rs->chunk * rs->chunk;

	(void)dst_off;
	add_range(rs, s->at + lo, s->at + (hi < s->len ? hi : s->len));
	return rs->st;
}

static int cmp_range(const void *a, const void *b)
{
	const range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges each file's ranges. */
static void merge_ranges(ranges *rs)
{
	size_t n = 0;

	if (rs->n == 0)
		return;
	qsort(rs->r, rs->n, sizeof(range), cmp_range);
	for (size_t i = 1; i < rs->n; i++) {
		if (rs->r[i].lo <= rs->r[n].hi) {
			if (rs->r[i].hi > rs->r[n].hi)
				rs->r[n].hi = rs->r[i].hi;
		} else {
			rs->r[++n] = rs->r[i];
		}
	}
	rs->n = n + 1;
}

/* What this rank reads of each saved file of m: the chunks its shards and blobs meet. */
static herd_status needed(const herd_ckpt *ck, const herd__ckpt_manifest *m, ranges *per_file)
{
	for (size_t i = 0; i < ck->ntensors; i++) {
		const herd__ckpt_reg_tensor *rt = &ck->tensors[i];
		const herd__ckpt_tensor *t;

		HERD_CHECK(tensor_of(m, rt, "peers' memory", &t));
		for (size_t j = 0; j < t->nshards; j++) {
			const herd__ckpt_shard *s = &t->shards[j];
			ranges *rs = &per_file[s->file];
			herd__ckpt_box part;

			if (!herd__ckpt_box_intersect(&s->box, &rt->box, &part))
				continue;
			rs->shard = s;
			rs->chunk = m->chunk_bytes;
			HERD_CHECK(herd__ckpt_box_runs(&s->box, &rt->box, &part,
						       herd_dtype_size(t->dtype), need_run, rs));
		}
	}
	for (size_t i = 0; i < ck->nblobs; i++) {
		const herd__ckpt_blob *b;
		size_t p;

		HERD_CHECK(blob_part(ck, m, &ck->blobs[i], "peers' memory", &b, &p));
		add_range(&per_file[b->parts[p].file], b->parts[p].at,
			  b->parts[p].at + b->parts[p].len);
		HERD_CHECK(per_file[b->parts[p].file].st);
	}
	for (size_t f = 0; f < m->nfiles; f++) {
		HERD_CHECK(per_file[f].st);
		merge_ranges(&per_file[f]);
	}
	return HERD_OK;
}

/*
 * Fetches the ranges of saved file f from holder h into a memory file of
 * the file's size (sparse: only what is fetched takes memory).
 */
static herd_status fetch_file(herd__peer_conn *c, const herd__ckpt_file *file,
			      const herd__peer_key *k, const ranges *rs, int fd, uint64_t *bytes,
			      int timeout_ms)
{
	uint8_t *map;
	herd_status st = HERD_OK;

	if (ftruncate(fd, (off_t)file->size) != 0)
		return herd__error_errno(HERD_ENOMEM, errno, "cannot size a memory file for %s",
					 file->name);
	if (rs->n == 0 || file->size == 0)
		return HERD_OK;
	map = mmap(NULL, (size_t)file->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return herd__error_errno(HERD_ENOMEM, errno, "cannot map a memory file for %s",
					 file->name);
	for (size_t i = 0; i < rs->n && st == HERD_OK; i++) {
#ifdef MADV_POPULATE_WRITE
		/* The pages at once, rather than a fault each as the bytes come. */
		uint64_t lo = rs->r[i].lo & ~(uint64_t)4095;

		(void)madvise(map + lo, (size_t)(rs->r[i].hi - lo), MADV_POPULATE_WRITE);
#endif
		/* In pieces, each with a deadline of its own. */
		for (uint64_t at = rs->r[i].lo; at < rs->r[i].hi && st == HERD_OK; at += FETCH_PIECE) {
			uint64_t n = rs->r[i].hi - at < FETCH_PIECE ? rs->r[i].hi - at : FETCH_PIECE;

			st = herd__peer_fetch(c, k, file->rank, at, n, map + at,
					      herd__net_deadline(timeout_ms));
			if (st == HERD_OK)
				*bytes += n;
		}
	}
	munmap(map, (size_t)file->size);
	return st;
}

/*
 * Every rank: the step of the plan from peers' memory.  The chunks this
 * rank needs come into memory files standing for the step's data files,
 * and the restore reads and verifies them as it reads storage.
 */
static herd_status restore_peers(herd_ckpt *ck, const peer_plan *plan, const int32_t *source,
				 const char *mdata)
{
	herd__peer_conn *conns = NULL;
	ranges *per_file = NULL;
	step_files sf;
	herd_status st;

	memset(&sf, 0, sizeof(sf));
	sf.dfd = -1;
	snprintf(sf.dir, sizeof(sf.dir), "peers' memory (step %" PRId64 ")", plan->step);
	HERD_CHECK_GOTO(herd__ckpt_manifest_decode(&sf.m, mdata, (size_t)plan->mlen,
						   "a manifest in peers' memory"), st, out);
	if (sf.m->nfiles != (size_t)plan->nfiles) {
		st = herd__error(HERD_EFORMAT, "the manifest of step %" PRId64 " in peers' memory "
				 "lists %zu files, not %d", plan->step, sf.m->nfiles, plan->nfiles);
		goto out;
	}
	HERD_CHECK_GOTO(herd__calloc(&sf.fds, 2 * sf.m->nfiles + 1, sizeof(int), "files"), st,
			out);
	sf.fds2 = sf.fds + sf.m->nfiles;
	for (size_t f = 0; f < 2 * sf.m->nfiles; f++)
		sf.fds[f] = -1;
	HERD_CHECK_GOTO(herd__calloc(&per_file, sf.m->nfiles + 1, sizeof(*per_file), "ranges"),
			st, out);
	HERD_CHECK_GOTO(herd__calloc(&conns, ck->nholders + 1, sizeof(*conns), "connections"),
			st, out);
	for (size_t i = 0; i < ck->nholders; i++)
		conns[i].fd = -1;
	HERD_CHECK_GOTO(needed(ck, sf.m, per_file), st, out);
	for (size_t f = 0; f < sf.m->nfiles; f++) {
		int32_t h = source[f];
		char name[32];

		if (per_file[f].n == 0)
			continue;   /* no chunk of it is this rank's: no file (1,024 of them would
				     * be as many descriptors) */
		snprintf(name, sizeof(name), "herd-ckpt-%zu", f);
		sf.fds[f] = memfd_create(name, MFD_CLOEXEC);
		if (sf.fds[f] < 0) {
			st = herd__error_errno(HERD_ENOMEM, errno, "cannot create a memory file");
			goto out;
		}
		if (conns[h].fd < 0) {
			HERD_CHECK_GOTO(herd__peer_connect(&conns[h], &ck->holders[h],
							   herd__net_deadline(ck->peer_timeout_ms)),
					st, out);
			list_add(ck->last.from, sizeof(ck->last.from), ck->holders[h].host);
		}
		HERD_CHECK_GOTO(fetch_file(&conns[h], &sf.m->files[f], &plan->key, &per_file[f],
					   sf.fds[f], &ck->last.bytes, ck->peer_timeout_ms), st, out);
	}
	for (size_t i = 0; i < ck->nholders; i++)
		herd__peer_close(&conns[i]);
	st = restore_from(ck, &sf, "peers' memory");
out:
	for (size_t i = 0; conns != NULL && i < ck->nholders; i++)
		herd__peer_close(&conns[i]);
	free(conns);
	for (size_t f = 0; per_file != NULL && f < sf.m->nfiles; f++)
		free(per_file[f].r);
	free(per_file);
	step_close(&sf);
	return st;
}

/*
 * The restore of the newest step from peers' memory, when it holds one at
 * least as new as storage's: HERD_OK with *restored, or HERD_ENOTFOUND
 * (then ck->last.why says why storage is next).  newest: storage's newest
 * committed step (rank 0; -1: none).  Collective.
 */
static herd_status try_peers(herd_ckpt *ck, int64_t newest, int64_t *restored)
{
	peer_plan plan;
	int32_t *source = NULL;
	char *mdata = NULL;
	herd_status st;
	int failed;

	memset(&plan, 0, sizeof(plan));
	plan.step = plan.peers_step = -1;
	plan.storage_step = newest;
	if (ck->rank == 0)
		survey_holders(ck, &plan, &source, &mdata);
	HERD_CHECK_GOTO(herd__ckpt_bcast(ck, &plan, sizeof(plan)), st, out);
	plan.why[sizeof(plan.why) - 1] = '\0';
	ck->last.storage_step = plan.storage_step;
	ck->last.peers_step = plan.peers_step;
	herd__strlcpy(ck->last.why, plan.why, sizeof(ck->last.why));
	if (plan.step < 0) {
		st = HERD_ENOTFOUND;
		goto out;
	}
	if (ck->rank != 0 &&
	    (herd__calloc(&source, (size_t)plan.nfiles + 1, sizeof(int32_t), "a plan") != HERD_OK ||
	     herd__calloc(&mdata, (size_t)plan.mlen + 1, 1, "a manifest") != HERD_OK))
		st = HERD_ENOMEM;
	else
		st = HERD_OK;
	st = herd__ckpt_agree(ck, st, &failed);
	if (st != HERD_OK && failed >= 0) {
		snprintf(ck->last.why, sizeof(ck->last.why), "no memory for the restore from "
			 "peers' memory: %.300s", herd_last_error());
		st = HERD_ENOTFOUND;
	}
	if (st != HERD_OK)
		goto out;
	HERD_CHECK_GOTO(herd__ckpt_bcast(ck, source, (size_t)plan.nfiles * sizeof(int32_t)), st,
			out);
	HERD_CHECK_GOTO(herd__ckpt_bcast(ck, mdata, (size_t)plan.mlen), st, out);
	for (int32_t f = 0; f < plan.nfiles; f++)
		if (source[f] < 0 || (size_t)source[f] >= ck->nholders) {
			st = herd__error(HERD_EINTERNAL, "a restore plan names holder %d of %zu",
					 source[f], ck->nholders);
			break;
		}
	st = herd__ckpt_agree(ck, st == HERD_OK ? restore_peers(ck, &plan, source, mdata) : st,
			      &failed);
	if (st == HERD_OK) {
		*restored = plan.step;
		ck->last.tier = HERD_CKPT_TIER_PEERS;
		goto out;
	}
	if (failed < 0)
		goto out;   /* the communicator failed: nothing more to try */
	herd__error_wrap(st, "restoring checkpoint step %" PRId64 " from peers' memory: ",
			 plan.step);
	if (ck->rank == 0)
		herd__log_warn("%s; restoring from storage instead", herd_last_error());
	snprintf(ck->last.why, sizeof(ck->last.why), "the restore of step %" PRId64 " from "
		 "peers' memory failed: %.300s", plan.step, herd_last_error());
	ck->last.from[0] = '\0';
	ck->last.bytes = 0;
	st = HERD_ENOTFOUND;
out:
	free(source);
	free(mdata);
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
	int64_t t0;
	int failed;

	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_restore: ck is NULL");
	if (restored != NULL)
		*restored = -1;
	HERD_CHECK(herd__ckpt_join(ck));
	if (step != HERD_CKPT_LATEST && (step < 0 || step > HERD_CKPT_STEP_MAX))
		return herd__error(HERD_EINVAL, "herd_ckpt_restore: step %" PRId64 " is outside "
				   "0..%" PRId64, step, HERD_CKPT_STEP_MAX);
	t0 = herd__net_now_ms();
	memset(&ck->last, 0, sizeof(ck->last));
	ck->last.step = ck->last.storage_step = ck->last.peers_step = -1;
	/* Rank 0 lists the candidates, so that every rank tries the same ones. */
	if (ck->rank == 0 && step == HERD_CKPT_LATEST)
		local = herd__ckpt_committed_steps(ck->dir, &steps, &nsteps);
	HERD_CHECK_GOTO(herd__ckpt_agree(ck, local, &failed), st, out);
	if (step == HERD_CKPT_LATEST && herd__ckpt_to_peers(ck)) {
		int64_t got = -1;

		st = try_peers(ck, nsteps > 0 ? steps[nsteps - 1] : -1, &got);
		if (st == HERD_OK) {
			if (restored != NULL)
				*restored = got;
			ck->last.step = got;
			goto out;
		}
		if (st != HERD_ENOTFOUND)
			goto out;
	} else {
		snprintf(ck->last.why, sizeof(ck->last.why), "%s",
			 step != HERD_CKPT_LATEST ? "a step was asked for by number"
			 : "no copies in peers' memory (peer_copies, herd launch --ckpt-peers)");
	}
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
			ck->last.tier = HERD_CKPT_TIER_STORAGE;
			ck->last.step = cand;
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
	ck->last.seconds = (double)(herd__net_now_ms() - t0) / 1000.0;
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
