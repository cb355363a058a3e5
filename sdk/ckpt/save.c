/*
 * sdk/ckpt/save.c - saving a step: the layout the ranks agree on, the
 * writer with its chunk checksums, the commit protocol, retention, and the
 * asynchronous engine with its capped staging memory.
 *
 * A save runs in three phases:
 *
 *   1. begin (collective, caller's thread): the ranks exchange what they
 *      registered, check that it agrees and that the distinct shards tile
 *      every tensor, and rank 0 creates the temporary step directory;
 *   2. write (each rank alone): the rank's data file is one stream of its
 *      segments (the shards it owns, then its blobs), written in order,
 *      hashed chunk by chunk as it goes, then fsynced;
 *   3. commit (collective): the ranks agree that every file is durable,
 *      gather their sizes and checksums, and rank 0 writes the manifest,
 *      renames the step into place, fsyncs, points `latest` at it and
 *      applies retention.
 *
 * A synchronous save writes straight from the registered memory.  An
 * asynchronous one copies the stream into a ring of staging memory that
 * the writer thread drains; the caller returns when the last byte is
 * copied, and the writer thread runs phase 3 on the communicator.
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

#include "handle.h"

/* The most bytes the writer hands to one pwrite from the staging ring. */
#define WRITE_PIECE ((size_t)64 << 20)

enum { ITEM_TENSOR = 1, ITEM_BLOB = 2 };

/* What a rank tells the others about one registered item. */
typedef struct layout_rec {
	char name[HERD_CKPT_NAME_MAX + 1];
	int32_t kind, dtype, ndim, rule;
	uint64_t shape[HERD_CKPT_MAX_DIMS];
	uint64_t offset[HERD_CKPT_MAX_DIMS];
	uint64_t box[HERD_CKPT_MAX_DIMS];
	uint64_t size;                        /* a blob's bytes */
} layout_rec;

/* The first exchange: enough to detect ranks that disagree. */
typedef struct layout_head {
	int64_t status;
	int64_t step;
	uint64_t ntensors, nblobs;
} layout_head;

/* Everything every rank knows about a save after phase 1. */
typedef struct plan {
	int size;
	size_t nt, nb;
	layout_rec *recs;      /* size * (nt + nb): rank r's items at r * (nt + nb) */
	bool *owner;           /* size * nt: whether rank r writes tensor i */
	uint64_t chunk;
	bool sums;             /* checksums on */
} plan;

/* One segment of a rank's data file. */
typedef struct seg {
	uint64_t at, len;
	uint64_t chunk;        /* bytes per checksum */
	size_t nsums, first;   /* its checksums in the rank's array */
	const void *src;       /* this rank's bytes (own segments only) */
} seg;

/* The writer's side: a stream of bytes into one file, hashed per chunk. */
typedef struct sink {
	int fd;
	char path[4096];
	uint64_t pos;
	const seg *segs;
	size_t nsegs, cur;
	uint64_t *sums;
	bool hashing;
	XXH3_state_t *hs;
	herd_status st;        /* the first failure; later bytes are only counted */
	char msg[1024];
} sink;

/* A save: what phases 2 and 3 need, on either thread. */
typedef struct herd__ckpt_job {
	herd_ckpt *ck;
	int64_t step;
	plan p;
	seg *segs;             /* this rank's */
	size_t nsegs, nsums;
	uint64_t total;
	char tmp[128];         /* the temporary step directory's name */
	sink sk;
	/* The staging ring of an asynchronous save. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool sync_init;
	uint64_t head, tail;
	bool whole;            /* the ring holds the whole stream: write after staging */
	/* The writer thread's outcome. */
	herd_status st;
	char msg[1024];
} herd__ckpt_job;

static void plan_free(plan *p)
{
	free(p->recs);
	free(p->owner);
	memset(p, 0, sizeof(*p));
}

static void job_free(herd__ckpt_job *job)
{
	if (job == NULL)
		return;
	plan_free(&job->p);
	free(job->segs);
	free(job->sk.sums);
	if (job->sk.hs != NULL)
		XXH3_freeState(job->sk.hs);
	if (job->sk.fd >= 0)
		close(job->sk.fd);
	if (job->sync_init) {
		pthread_mutex_destroy(&job->mu);
		pthread_cond_destroy(&job->cv);
	}
	free(job);
}

/* ---- phase 1: the layout ---------------------------------------------- */

static const layout_rec *rec_of(const plan *p, int r, size_t i)
{
	return &p->recs[(size_t)r * (p->nt + p->nb) + i];
}

static void fill_records(const herd_ckpt *ck, layout_rec *recs)
{
	for (size_t i = 0; i < ck->ntensors; i++) {
		const herd__ckpt_reg_tensor *t = &ck->tensors[i];
		layout_rec *r = &recs[i];

		memset(r, 0, sizeof(*r));
		herd__strlcpy(r->name, t->name, sizeof(r->name));
		r->kind = ITEM_TENSOR;
		r->dtype = (int32_t)t->dtype;
		r->ndim = t->box.ndim;
		memcpy(r->shape, t->shape, sizeof(r->shape));
		memcpy(r->offset, t->box.offset, sizeof(r->offset));
		memcpy(r->box, t->box.shape, sizeof(r->box));
	}
	for (size_t i = 0; i < ck->nblobs; i++) {
		const herd__ckpt_reg_blob *b = &ck->blobs[i];
		layout_rec *r = &recs[ck->ntensors + i];

		memset(r, 0, sizeof(*r));
		herd__strlcpy(r->name, b->name, sizeof(r->name));
		r->kind = ITEM_BLOB;
		r->rule = (int32_t)b->rule;
		r->size = b->size;
	}
}

static herd__ckpt_box box_of(const layout_rec *r)
{
	herd__ckpt_box b;

	memset(&b, 0, sizeof(b));
	b.ndim = r->ndim;
	memcpy(b.offset, r->offset, sizeof(b.offset));
	memcpy(b.shape, r->box, sizeof(b.shape));
	return b;
}

static bool same_box(const layout_rec *a, const layout_rec *b)
{
	return memcmp(a->offset, b->offset, sizeof(a->offset)) == 0 &&
	       memcmp(a->box, b->box, sizeof(a->box)) == 0;
}

/* Every rank's items must match rank 0's; the result is the same everywhere. */
static herd_status check_agreement(const plan *p)
{
	for (int r = 1; r < p->size; r++)
		for (size_t i = 0; i < p->nt + p->nb; i++) {
			const layout_rec *a = rec_of(p, 0, i), *b = rec_of(p, r, i);

			if (strcmp(a->name, b->name) != 0 || a->kind != b->kind)
				return herd__error(HERD_EMISMATCH, "checkpoint item %zu is \"%s\" on rank "
						   "0 but \"%s\" on rank %d: every rank registers the "
						   "same tensors and blobs in the same order", i,
						   a->name, b->name, r);
			if (a->kind == ITEM_TENSOR &&
			    (a->dtype != b->dtype || a->ndim != b->ndim ||
			     memcmp(a->shape, b->shape, sizeof(a->shape)) != 0))
				return herd__error(HERD_EMISMATCH, "tensor \"%s\": rank %d registered "
						   "another dtype or global shape than rank 0",
						   a->name, r);
			if (a->kind == ITEM_BLOB && a->rule != b->rule)
				return herd__error(HERD_EMISMATCH, "blob \"%s\": rank %d registered "
						   "another rule than rank 0", a->name, r);
		}
	return HERD_OK;
}

/* The distinct shards of each tensor must tile it: nothing lost, nothing twice. */
static herd_status check_tiling(plan *p)
{
	for (size_t i = 0; i < p->nt; i++) {
		const layout_rec *t0 = rec_of(p, 0, i);
		uint64_t want, total = 0, vol;

		herd__ckpt_volume(t0->shape, t0->ndim, UINT64_MAX, &want);
		for (int r = 0; r < p->size; r++) {
			bool own = true;

			for (int q = 0; q < r && own; q++)
				if (same_box(rec_of(p, q, i), rec_of(p, r, i)))
					own = false;
			p->owner[(size_t)r * p->nt + i] = own;
			if (!own)
				continue;
			for (int q = 0; q < r; q++) {
				herd__ckpt_box a = box_of(rec_of(p, q, i)), b = box_of(rec_of(p, r, i)),
					       x;

				if (p->owner[(size_t)q * p->nt + i] && herd__ckpt_box_intersect(&a, &b, &x))
					return herd__error(HERD_EINVAL, "tensor \"%s\": the shards of ranks "
							   "%d and %d overlap without being equal",
							   t0->name, q, r);
			}
			herd__ckpt_volume(rec_of(p, r, i)->box, t0->ndim, UINT64_MAX, &vol);
			total += vol;
		}
		if (total != want)
			return herd__error(HERD_EINVAL, "tensor \"%s\": the ranks' shards cover %" PRIu64
					   " of its %" PRIu64 " elements", t0->name, total, want);
	}
	return HERD_OK;
}

/* Exchanges and checks the layout; fills p.  Collective. */
static herd_status exchange_layout(herd_ckpt *ck, int64_t step, herd_status local, plan *p)
{
	layout_head mine = { local, step, ck->ntensors, ck->nblobs }, *heads = NULL;
	layout_rec *recs = NULL;
	herd_status st;
	size_t n;

	memset(p, 0, sizeof(*p));
	p->size = ck->size;
	p->chunk = ck->chunk_bytes;
	p->sums = ck->checksum != HERD_CKPT_CHECKSUM_NONE;
	HERD_CHECK(herd__calloc(&heads, (size_t)ck->size, sizeof(*heads), "layouts"));
	HERD_CHECK_GOTO(herd__ckpt_allgather(ck, &mine, heads, sizeof(mine)), st, out);
	for (int r = 0; r < ck->size; r++) {
		if (heads[r].status != HERD_OK) {
			st = r == ck->rank ? (herd_status)heads[r].status
					   : herd__error((herd_status)heads[r].status, "the save of "
							 "step %" PRId64 " failed on rank %d", step, r);
			goto out;
		}
		if (heads[r].step != heads[0].step || heads[r].ntensors != heads[0].ntensors ||
		    heads[r].nblobs != heads[0].nblobs) {
			st = herd__error(HERD_EMISMATCH, "rank 0 saves step %" PRId64 " with %" PRIu64
					 " tensors and %" PRIu64 " blobs, rank %d step %" PRId64
					 " with %" PRIu64 " and %" PRIu64, heads[0].step,
					 heads[0].ntensors, heads[0].nblobs, r, heads[r].step,
					 heads[r].ntensors, heads[r].nblobs);
			goto out;
		}
	}
	p->nt = ck->ntensors;
	p->nb = ck->nblobs;
	n = p->nt + p->nb;
	HERD_CHECK_GOTO(herd__calloc(&recs, n + 1, sizeof(*recs), "layouts"), st, out);
	fill_records(ck, recs);
	HERD_CHECK_GOTO(herd__calloc(&p->recs, (size_t)ck->size * n + 1, sizeof(*recs), "layouts"),
			st, out);
	HERD_CHECK_GOTO(herd__calloc(&p->owner, (size_t)ck->size * p->nt + 1, sizeof(bool),
				     "layouts"), st, out);
	if (n > 0)
		HERD_CHECK_GOTO(herd__ckpt_allgather(ck, recs, p->recs, n * sizeof(*recs)), st, out);
	HERD_CHECK_GOTO(check_agreement(p), st, out);
	st = check_tiling(p);
out:
	free(heads);
	free(recs);
	return st;
}

/* The segments of rank r's file, in order; *nsums gets their checksums. */
static herd_status plan_segments(const plan *p, int r, const herd_ckpt *own, seg **out,
				 size_t *nsegs, size_t *nsums, uint64_t *total)
{
	seg *segs = NULL;
	uint64_t at = 0;
	size_t n = 0, sums = 0;

	HERD_CHECK(herd__calloc(&segs, p->nt + p->nb + 1, sizeof(*segs), "segments"));
	for (size_t i = 0; i < p->nt + p->nb; i++) {
		const layout_rec *rec = rec_of(p, r, i);
		seg *s = &segs[n];

		if (i < p->nt && !p->owner[(size_t)r * p->nt + i])
			continue;
		s->at = at;
		if (i < p->nt) {
			uint64_t vol;

			herd__ckpt_volume(rec->box, rec->ndim, UINT64_MAX, &vol);
			s->len = vol * herd_dtype_size((herd_dtype)rec->dtype);
			s->chunk = p->chunk;
			s->nsums = p->sums ? (size_t)((s->len + p->chunk - 1) / p->chunk) : 0;
			if (own != NULL)
				s->src = own->tensors[i].data;
		} else {
			s->len = rec->size;
			s->chunk = rec->size;
			s->nsums = 1;    /* zero without checksums: the manifest always has one */
			if (own != NULL)
				s->src = own->blobs[i - p->nt].data;
		}
		s->first = sums;
		sums += s->nsums;
		at += s->len;
		n++;
	}
	*out = segs;
	*nsegs = n;
	*nsums = sums;
	*total = at;
	return HERD_OK;
}

/* ---- phase 2: the writer ----------------------------------------------- */

static void sink_fail(sink *sk, herd_status st)
{
	if (sk->st == HERD_OK) {
		sk->st = st;
		herd__strlcpy(sk->msg, herd_last_error(), sizeof(sk->msg));
	}
}

static void sink_write(sink *sk, const uint8_t *p, size_t n, uint64_t off)
{
	while (n > 0 && sk->st == HERD_OK) {
		ssize_t w = pwrite(sk->fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			sink_fail(sk, herd__error_errno(HERD_EIO, w < 0 ? errno : ENOSPC,
							"cannot write %s at byte %" PRIu64, sk->path,
							off));
			return;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
}

/* Fails the sink once herd_ckpt_abort has been called: looked at before
 * every piece and once more before the commit. */
static void check_abort(herd__ckpt_job *job)
{
	sink *sk = &job->sk;

	if (sk->st == HERD_OK && atomic_load(&job->ck->abort_req))
		sink_fail(sk, herd__error(HERD_EABORTED, "the save of step %" PRId64 " was "
					  "aborted (herd_ckpt_abort) after %" PRIu64 " of %" PRIu64
					  " bytes", job->step, sk->pos, job->total));
}

/* Takes the next n bytes of the stream: writes them and hashes each chunk.
 * After herd_ckpt_abort the sink fails, and later bytes are only counted. */
static void sink_put(herd__ckpt_job *job, const uint8_t *p, size_t n)
{
	sink *sk = &job->sk;

	check_abort(job);
	sink_write(sk, p, n, sk->pos);
	while (n > 0) {
		const seg *s;
		uint64_t in, left, take;

		while (sk->cur < sk->nsegs && sk->pos == sk->segs[sk->cur].at + sk->segs[sk->cur].len)
			sk->cur++;
		if (sk->cur == sk->nsegs)
			return;   /* not reached: the stream is exactly the segments */
		s = &sk->segs[sk->cur];
		in = sk->pos - s->at;
		left = s->chunk - in % s->chunk;
		if (left > s->at + s->len - sk->pos)
			left = s->at + s->len - sk->pos;
		take = n < left ? n : left;
		if (sk->hashing)
			XXH3_64bits_update(sk->hs, p, (size_t)take);
		sk->pos += take;
		p += take;
		n -= (size_t)take;
		in += take;
		if (in % s->chunk == 0 || sk->pos == s->at + s->len) {
			if (sk->hashing)
				sk->sums[s->first + (in - 1) / s->chunk] = XXH3_64bits_digest(sk->hs);
			XXH3_64bits_reset(sk->hs);
		}
	}
}

/* Opens this rank's file in the temporary step directory. */
static void sink_open(herd__ckpt_job *job)
{
	herd_ckpt *ck = job->ck;
	sink *sk = &job->sk;
	char name[64];

	herd__ckpt_rank_file_name(name, sizeof(name), ck->rank);
	snprintf(sk->path, sizeof(sk->path), "%s/%s/%s", ck->dir, job->tmp, name);
	sk->segs = job->segs;
	sk->nsegs = job->nsegs;
	sk->hashing = job->p.sums;
	if (herd__calloc(&sk->sums, job->nsums + 1, sizeof(uint64_t), "checksums") != HERD_OK) {
		sink_fail(sk, HERD_ENOMEM);
		return;
	}
	sk->hs = XXH3_createState();
	if (sk->hs == NULL || XXH3_64bits_reset(sk->hs) != XXH_OK) {
		sink_fail(sk, herd__error(HERD_ENOMEM, "out of memory for a checksum state"));
		return;
	}
	sk->fd = open(sk->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (sk->fd < 0)
		sink_fail(sk, herd__error_errno(HERD_EIO, errno, "cannot create %s", sk->path));
}

/* Makes the file durable: an fsync error fails the checkpoint. */
static void sink_close(sink *sk)
{
	if (sk->fd < 0)
		return;
	if (sk->st == HERD_OK && fsync(sk->fd) != 0)
		sink_fail(sk, herd__error_errno(HERD_EIO, errno, "cannot fsync %s", sk->path));
	if (close(sk->fd) != 0 && sk->st == HERD_OK)
		sink_fail(sk, herd__error_errno(HERD_EIO, errno, "cannot close %s", sk->path));
	sk->fd = -1;
}

/* ---- phase 3: the commit ----------------------------------------------- */

static herd_status build_manifest(herd__ckpt_job *job, const uint64_t *results, size_t stride,
				  herd__ckpt_manifest *m)
{
	const plan *p = &job->p;
	herd_status st = HERD_OK;
	seg **segs = NULL;
	size_t *nsegs = NULL, *cursor = NULL;

	m->step = job->step;
	m->ranks = p->size;
	m->time = (int64_t)time(NULL);
	m->checksum = p->sums ? HERD_CKPT_CHECKSUM_XXH3 : HERD_CKPT_CHECKSUM_NONE;
	m->chunk_bytes = p->chunk;
	HERD_CHECK_GOTO(herd__calloc(&segs, (size_t)p->size, sizeof(*segs), "segments"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&nsegs, (size_t)p->size, sizeof(size_t), "segments"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&cursor, (size_t)p->size, sizeof(size_t), "segments"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&m->files, (size_t)p->size, sizeof(*m->files), "files"), st,
			out);
	m->nfiles = (size_t)p->size;
	for (int r = 0; r < p->size; r++) {
		char name[64];
		size_t ns;
		uint64_t total;

		HERD_CHECK_GOTO(plan_segments(p, r, NULL, &segs[r], &nsegs[r], &ns, &total), st, out);
		herd__ckpt_rank_file_name(name, sizeof(name), r);
		HERD_CHECK_GOTO(herd__strdup(&m->files[r].name, name), st, out);
		m->files[r].rank = r;
		m->files[r].size = results[(size_t)r * stride];
		if (m->files[r].size != total) {
			st = herd__error(HERD_EINTERNAL, "rank %d wrote %" PRIu64 " bytes, %" PRIu64
					 " were planned", r, m->files[r].size, total);
			goto out;
		}
	}
	HERD_CHECK_GOTO(herd__calloc(&m->tensors, p->nt + 1, sizeof(*m->tensors), "tensors"), st,
			out);
	m->ntensors = p->nt;
	for (size_t i = 0; i < p->nt; i++) {
		const layout_rec *t0 = rec_of(p, 0, i);
		herd__ckpt_tensor *t = &m->tensors[i];
		uint64_t vol;
		size_t n = 0;

		HERD_CHECK_GOTO(herd__strdup(&t->name, t0->name), st, out);
		t->dtype = (herd_dtype)t0->dtype;
		t->ndim = t0->ndim;
		memcpy(t->shape, t0->shape, sizeof(t->shape));
		herd__ckpt_volume(t->shape, t->ndim, UINT64_MAX, &vol);
		t->bytes = vol * herd_dtype_size(t->dtype);
		for (int r = 0; r < p->size; r++)
			n += p->owner[(size_t)r * p->nt + i];
		HERD_CHECK_GOTO(herd__calloc(&t->shards, n, sizeof(*t->shards), "shards"), st, out);
		t->nshards = n;
		n = 0;
		for (int r = 0; r < p->size; r++) {
			herd__ckpt_shard *s;
			const seg *g;

			if (!p->owner[(size_t)r * p->nt + i])
				continue;
			s = &t->shards[n++];
			g = &segs[r][cursor[r]++];
			s->box = box_of(rec_of(p, r, i));
			s->file = (uint32_t)r;
			s->at = g->at;
			s->len = g->len;
			s->nsums = g->nsums;
			HERD_CHECK_GOTO(herd__calloc(&s->sums, g->nsums, sizeof(uint64_t), "checksums"),
					st, out);
			if (g->nsums > 0)
				memcpy(s->sums, &results[(size_t)r * stride + 1 + g->first],
				       g->nsums * sizeof(uint64_t));
		}
	}
	HERD_CHECK_GOTO(herd__calloc(&m->blobs, p->nb + 1, sizeof(*m->blobs), "blobs"), st, out);
	m->nblobs = p->nb;
	for (size_t i = 0; i < p->nb; i++) {
		herd__ckpt_blob *b = &m->blobs[i];

		HERD_CHECK_GOTO(herd__strdup(&b->name, rec_of(p, 0, p->nt + i)->name), st, out);
		b->rule = (herd_ckpt_blob_rule)rec_of(p, 0, p->nt + i)->rule;
		HERD_CHECK_GOTO(herd__calloc(&b->parts, (size_t)p->size, sizeof(*b->parts), "blobs"),
				st, out);
		b->nparts = (size_t)p->size;
		for (int r = 0; r < p->size; r++) {
			const seg *g = &segs[r][cursor[r]++];

			b->parts[r].rank = r;
			b->parts[r].file = (uint32_t)r;
			b->parts[r].at = g->at;
			b->parts[r].len = g->len;
			b->parts[r].sum = results[(size_t)r * stride + 1 + g->first];
		}
	}
out:
	for (int r = 0; segs != NULL && r < p->size; r++)
		free(segs[r]);
	free(segs);
	free(nsegs);
	free(cursor);
	return st;
}

/* Renames a directory, refusing to replace an existing one. */
static herd_status rename_noreplace(const char *from, const char *to)
{
	struct stat sb;

	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return HERD_OK;
	if (errno != EINVAL && errno != ENOSYS)
		return herd__error_errno(errno == EEXIST ? HERD_EEXIST : HERD_EIO, errno,
					 "cannot rename %s to %s", from, to);
	/* A file system without RENAME_NOREPLACE: check, then rename. */
	if (stat(to, &sb) == 0)
		return herd__error(HERD_EEXIST, "cannot rename %s to %s: it exists", from, to);
	if (rename(from, to) != 0)
		return herd__error_errno(HERD_EIO, errno, "cannot rename %s to %s", from, to);
	return HERD_OK;
}

/* Deletes the committed steps that retention does not keep.  Failures are
 * warnings: the save they follow is committed. */
static void apply_retention(herd_ckpt *ck, int64_t newest)
{
	int64_t *steps = NULL;
	size_t n = 0, kept = 0;

	if (ck->keep_last <= 0)
		return;
	if (herd__ckpt_committed_steps(ck->dir, &steps, &n) != HERD_OK) {
		herd__log_warn("checkpoint retention in %s: %s", ck->dir, herd_last_error());
		return;
	}
	for (size_t k = n; k-- > 0;) {
		char name[64], del[96], from[4096], to[4096];

		if (steps[k] > newest)
			continue;
		if (kept < (size_t)ck->keep_last) {
			kept++;
			continue;
		}
		if (ck->keep_every > 0 && steps[k] % ck->keep_every == 0)
			continue;
		/* Out of sight first (one rename), then removed. */
		herd__ckpt_step_name(name, sizeof(name), steps[k]);
		snprintf(del, sizeof(del), "%s%012" PRId64 ".%ld", HERD__CKPT_DEL_PREFIX, steps[k],
			 (long)getpid());
		if (herd__ckpt_path(from, sizeof(from), ck->dir, name) != HERD_OK ||
		    herd__ckpt_path(to, sizeof(to), ck->dir, del) != HERD_OK ||
		    rename(from, to) != 0 || herd__ckpt_remove_tree(ck->dir, del) != HERD_OK)
			herd__log_warn("checkpoint retention: cannot delete %s/%s: %s", ck->dir, name,
				       errno != 0 ? strerror(errno) : herd_last_error());
	}
	if (herd__fsync_dir(ck->dir) != HERD_OK)
		herd__log_warn("checkpoint retention: %s", herd_last_error());
	free(steps);
}

/* Rank 0's part of the commit, once every file is durable. */
static herd_status commit(herd__ckpt_job *job, const uint64_t *results, size_t stride)
{
	herd_ckpt *ck = job->ck;
	char tmpdir[4096], mpath[4096], stepdir[4096], latest[4096], name[64], text[80];
	herd__ckpt_manifest *m = NULL;
	herd_status st;
	char *data = NULL;
	size_t len = 0;

	HERD_CHECK(herd__calloc(&m, 1, sizeof(*m), "a manifest"));
	herd__ckpt_step_name(name, sizeof(name), job->step);
	HERD_CHECK_GOTO(herd__ckpt_path(tmpdir, sizeof(tmpdir), ck->dir, job->tmp), st, out);
	HERD_CHECK_GOTO(herd__ckpt_path(stepdir, sizeof(stepdir), ck->dir, name), st, out);
	HERD_CHECK_GOTO(herd__ckpt_path(latest, sizeof(latest), ck->dir, HERD__CKPT_LATEST), st,
			out);
	HERD_CHECK_GOTO(build_manifest(job, results, stride, m), st, out);
	HERD_CHECK_GOTO(herd__ckpt_manifest_encode(m, &data, &len), st, out);
	/* temp file, fsync, rename, fsync of the step directory */
	HERD_CHECK_GOTO(herd__ckpt_path(mpath, sizeof(mpath), tmpdir, HERD__CKPT_MANIFEST), st, out);
	HERD_CHECK_GOTO(herd__write_file_atomic(mpath, data, len), st, out);
	/* The commit point: the step appears whole, under its name. */
	HERD_CHECK_GOTO(rename_noreplace(tmpdir, stepdir), st, out);
	HERD_CHECK_GOTO(herd__fsync_dir(ck->dir), st, out);
	snprintf(text, sizeof(text), "%s\n", name);
	/* `latest` names the newest step or nothing: left naming an older one,
	 * it could name a step retention deletes next. */
	if (herd__write_file_atomic(latest, text, strlen(text)) != HERD_OK) {
		herd__log_warn("checkpoint step %" PRId64 " is committed, but %s was not updated "
			       "(%s): removed it instead, until a save can write it", job->step,
			       latest, herd_last_error());
		if (unlink(latest) != 0 && errno != ENOENT)
			herd__log_warn("cannot remove %s either: %s", latest, strerror(errno));
	}
	apply_retention(ck, job->step);
out:
	free(data);
	herd__ckpt_manifest_free(m);
	return st;
}

/* Phase 3 for every rank, after its file is closed.  Collective. */
static herd_status finish(herd__ckpt_job *job)
{
	herd_ckpt *ck = job->ck;
	uint64_t *mine = NULL, *all = NULL;
	size_t stride = 1;
	herd_status st, local = HERD_OK;
	int failed;

	if (job->sk.st != HERD_OK)
		local = herd__error(job->sk.st, "%s", job->sk.msg);
	st = herd__ckpt_agree(ck, local, &failed);
	if (st != HERD_OK)
		goto fail;
	/* Every rank knows how many checksums each rank has: the plan says. */
	for (int r = 0; r < ck->size; r++) {
		seg *segs = NULL;
		size_t nsegs, nsums;
		uint64_t total;

		HERD_CHECK_GOTO(plan_segments(&job->p, r, NULL, &segs, &nsegs, &nsums, &total), st,
				fail);
		free(segs);
		if (nsums + 1 > stride)
			stride = nsums + 1;
	}
	HERD_CHECK_GOTO(herd__calloc(&mine, stride, sizeof(uint64_t), "checksums"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&all, stride * (size_t)ck->size, sizeof(uint64_t),
				     "checksums"), st, fail);
	mine[0] = job->total;
	if (job->nsums > 0)
		memcpy(mine + 1, job->sk.sums, job->nsums * sizeof(uint64_t));
	HERD_CHECK_GOTO(herd__ckpt_allgather(ck, mine, all, stride * sizeof(uint64_t)), st, fail);
	local = ck->rank == 0 ? commit(job, all, stride) : HERD_OK;
	st = herd__ckpt_agree(ck, local, &failed);
	if (st == HERD_OK)
		goto out;
fail:
	herd__error_wrap(st, "saving checkpoint step %" PRId64 " in %s: ", job->step, ck->dir);
	if (ck->rank == 0) {
		herd_status keep = st;
		char msg[1024];

		herd__strlcpy(msg, herd_last_error(), sizeof(msg));
		herd__ckpt_remove_tree(ck->dir, job->tmp);
		st = herd__error(keep, "%s", msg);
	}
out:
	free(mine);
	free(all);
	return st;
}

/* ---- phase 1 as a whole ------------------------------------------------ */

/* Starts a save: layout, temporary directory, this rank's file.  Collective. */
static herd_status begin(herd_ckpt *ck, int64_t step, herd__ckpt_job **out)
{
	herd_status st, local = HERD_OK;
	herd__ckpt_job *job = NULL;
	int failed;

	*out = NULL;
	atomic_store(&ck->abort_req, false);
	if (step < 0 || step > HERD_CKPT_STEP_MAX)
		local = herd__error(HERD_EINVAL, "checkpoint step %" PRId64 " is outside 0..%" PRId64,
				    step, HERD_CKPT_STEP_MAX);
	HERD_CHECK(herd__calloc(&job, 1, sizeof(*job), "a save"));
	job->ck = ck;
	job->step = step;
	job->sk.fd = -1;
	HERD_CHECK_GOTO(exchange_layout(ck, step, local, &job->p), st, fail);
	HERD_CHECK_GOTO(plan_segments(&job->p, ck->rank, ck, &job->segs, &job->nsegs, &job->nsums,
				      &job->total), st, fail);
	if (ck->rank == 0) {
		char name[64], path[4096];
		struct stat sb;

		herd__ckpt_step_name(name, sizeof(name), step);
		snprintf(job->tmp, sizeof(job->tmp), "%s%012" PRId64 ".%ld.%lld",
			 HERD__CKPT_TMP_PREFIX, step, (long)getpid(), (long long)time(NULL));
		local = herd__ckpt_path(path, sizeof(path), ck->dir, name);
		if (local == HERD_OK && stat(path, &sb) == 0)
			local = herd__error(HERD_EEXIST, "checkpoint step %" PRId64 " is already "
					    "committed in %s", step, ck->dir);
		if (local == HERD_OK)
			local = herd__ckpt_path(path, sizeof(path), ck->dir, job->tmp);
		if (local == HERD_OK && mkdir(path, 0755) != 0)
			local = herd__error_errno(HERD_EIO, errno, "cannot create %s", path);
	}
	HERD_CHECK_GOTO(herd__ckpt_agree(ck, local, &failed), st, fail);
	HERD_CHECK_GOTO(herd__ckpt_bcast(ck, job->tmp, sizeof(job->tmp)), st, fail);
	job->tmp[sizeof(job->tmp) - 1] = '\0';
	sink_open(job);
	*out = job;
	return HERD_OK;
fail:
	job_free(job);
	return st;
}

/*
 * Phase 2 and 3 of a save on the caller's thread, straight from the
 * registered memory, segment by segment; frees job.  With checksums, a
 * helper thread hashes each segment while this thread writes it (the
 * caller does not touch the memory until the save returns): hashed after
 * the write, the XXH3 pass added about 0.14 s per GiB to a save that dd
 * matched in 0.8 s.
 */
static herd_status save_in_place(herd__ckpt_job *job)
{
	herd_status st;

	if (job->sk.hashing && job->sk.st == HERD_OK && job->sk.sums != NULL) {
		herd__ckpt_hasher h;

		herd__ckpt_hasher_start(&h);
		job->sk.hashing = false;
		for (size_t i = 0; i < job->nsegs; i++) {
			const seg *sg = &job->segs[i];

			if (i > 0)
				(void)herd__ckpt_hasher_wait(&h);
			herd__ckpt_hasher_post_sums(&h, sg->src, sg->len, sg->chunk,
						    job->sk.sums + sg->first);
			sink_put(job, sg->src, (size_t)sg->len);
		}
		if (job->nsegs > 0)
			(void)herd__ckpt_hasher_wait(&h);
		herd__ckpt_hasher_stop(&h);
	} else {
		for (size_t i = 0; i < job->nsegs; i++)
			sink_put(job, job->segs[i].src, (size_t)job->segs[i].len);
	}
	check_abort(job);
	sink_close(&job->sk);
	st = finish(job);
	job_free(job);
	return st;
}

herd_status herd_ckpt_save(herd_ckpt *ck, int64_t step)
{
	herd__ckpt_job *job = NULL;

	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_save: ck is NULL");
	HERD_CHECK(herd__ckpt_join(ck));
	HERD_CHECK(begin(ck, step, &job));
	return save_in_place(job);
}

/* ---- the asynchronous engine ------------------------------------------ */

/* Staging memory is allocated in whole huge pages. */
#define RING_ALIGN ((size_t)2 << 20)

void herd__ckpt_ring_free(herd_ckpt *ck)
{
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
		sink_put(job, ck->ring + pos, (size_t)n);
		pthread_mutex_lock(&job->mu);
		job->tail += n;
		pthread_cond_broadcast(&job->cv);
		pthread_mutex_unlock(&job->mu);
	}
	check_abort(job);
	sink_close(&job->sk);
	job->st = finish(job);
	if (job->st != HERD_OK)
		herd__strlcpy(job->msg, herd_last_error(), sizeof(job->msg));
	return NULL;
}

/* Copies the stream into the ring as space frees up. */
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
	HERD_CHECK(begin(ck, step, &job));
	cap = job->total < ck->staging_bytes ? (size_t)job->total : ck->staging_bytes;
	if (cap == 0)
		cap = 1;
	/* Allocation failures here are local: the writer still has to run
	 * phase 3 with the others, so it runs with a failed sink. */
	if (cap > ck->ring_cap && ring_alloc(ck, cap) != HERD_OK)
		sink_fail(&job->sk, HERD_ENOMEM);
	if (pthread_mutex_init(&job->mu, NULL) != 0 || pthread_cond_init(&job->cv, NULL) != 0) {
		/* Without a lock there is no writer: fall back to a synchronous save. */
		herd__log_warn("herd_ckpt_save_async: cannot create a lock; saving step %" PRId64
			       " synchronously", step);
		return save_in_place(job);
	}
	job->sync_init = true;
	if (ck->ring_cap < cap) {
		/* ring_alloc said why (in the sink's message). */
		sink_fail(&job->sk, HERD_ENOMEM);
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
		herd__error_errno(HERD_ESYS, err, "herd_ckpt_save_async: cannot start the writer");
		sink_fail(&job->sk, HERD_ESYS);
		job->total = 0;
		writer_main(job);
		st = job->st;
		herd__error(st, "%s", job->msg);
		job_free(job);
		return st;
	}
	ck->busy = true;
	ck->job = job;
	if (job->total > 0)
		stage(job);
	return HERD_OK;
}

herd_status herd__ckpt_join(herd_ckpt *ck)
{
	herd__ckpt_job *job = ck->job;
	herd_status st;

	if (!ck->busy)
		return HERD_OK;
	pthread_join(ck->writer, NULL);
	ck->busy = false;
	ck->job = NULL;
	st = job->st;
	if (st != HERD_OK)
		herd__error(st, "%s", job->msg);
	job_free(job);
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
