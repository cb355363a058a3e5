/*
 * sdk/ckpt/layout.c - phase 1 of a save: the layout the ranks agree on
 * (what each registered, whether the shards tile every tensor, who writes
 * which), each rank's segments, and the start of a save.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/save.h"

/* ---- phase 1: the layout ---------------------------------------------- */

const layout_rec *herd__save_rec_of(const plan *p, int r, size_t i)
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

herd__ckpt_box herd__save_box_of(const layout_rec *r)
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

/* Orders rank indices by the box they registered for one tensor, then by
 * rank, for qsort_r. */
typedef struct box_order {
	const plan *p;
	size_t item;
} box_order;

static int cmp_box(const void *x, const void *y, void *arg)
{
	const box_order *o = arg;
	int q = *(const int *)x, r = *(const int *)y, c;
	const layout_rec *a = herd__save_rec_of(o->p, q, o->item);
	const layout_rec *b = herd__save_rec_of(o->p, r, o->item);

	c = memcmp(a->offset, b->offset, sizeof(a->offset));
	if (c == 0)
		c = memcmp(a->box, b->box, sizeof(a->box));
	return c != 0 ? c : (q > r) - (q < r);
}

/* Every rank's items must match rank 0's; the result is the same everywhere. */
static herd_status check_agreement(const plan *p)
{
	for (int r = 1; r < p->size; r++)
		for (size_t i = 0; i < p->nt + p->nb; i++) {
			const layout_rec *a = herd__save_rec_of(p, 0, i), *b = herd__save_rec_of(p, r, i);

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

/*
 * The distinct shards of each tensor must tile it: nothing lost, nothing
 * twice.  A shard is owned by the lowest rank that registered its box.
 * The ranks' boxes are sorted (rank order among equal ones) and the
 * distinct ones checked for overlap as the decoder does, so that a save
 * takes time in size log size per tensor, not size squared.
 */
static herd_status check_tiling(plan *p)
{
	herd__ckpt_box *boxes = NULL;
	int *ranks = NULL, *owners = NULL;
	herd_status st = HERD_OK;

	HERD_CHECK_GOTO(herd__calloc(&ranks, (size_t)p->size, sizeof(int), "layouts"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&owners, (size_t)p->size, sizeof(int), "layouts"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&boxes, (size_t)p->size, sizeof(*boxes), "layouts"), st, out);
	for (size_t i = 0; i < p->nt; i++) {
		const layout_rec *t0 = herd__save_rec_of(p, 0, i);
		box_order o = { p, i };
		uint64_t want, total = 0, vol;
		size_t n = 0, a = 0, b = 0;
		int found = 0;

		herd__ckpt_volume(t0->shape, t0->ndim, UINT64_MAX, &want);
		for (int r = 0; r < p->size; r++)
			ranks[r] = r;
		qsort_r(ranks, (size_t)p->size, sizeof(int), cmp_box, &o);
		for (int k = 0; k < p->size; k++) {
			int r = ranks[k];
			/* Equal boxes sort together, the lowest rank first. */
			bool own = k == 0 || !same_box(herd__save_rec_of(p, ranks[k - 1], i),
						       herd__save_rec_of(p, r, i));

			p->owner[(size_t)r * p->nt + i] = own;
			if (!own)
				continue;
			owners[n] = r;
			boxes[n++] = herd__save_box_of(herd__save_rec_of(p, r, i));
			herd__ckpt_volume(herd__save_rec_of(p, r, i)->box, t0->ndim, UINT64_MAX, &vol);
			total += vol;
		}
		HERD_CHECK_GOTO(herd__ckpt_boxes_overlap(boxes, sizeof(boxes[0]), n, 0, &found, &a,
							 &b), st, out);
		if (found == 1) {
			int q = owners[a] < owners[b] ? owners[a] : owners[b];
			int r = owners[a] < owners[b] ? owners[b] : owners[a];

			st = herd__error(HERD_EINVAL, "tensor \"%s\": the shards of ranks %d and %d "
					 "overlap without being equal", t0->name, q, r);
			goto out;
		}
		if (total != want) {
			st = herd__error(HERD_EINVAL, "tensor \"%s\": the ranks' shards cover %" PRIu64
					 " of its %" PRIu64 " elements", t0->name, total, want);
			goto out;
		}
	}
out:
	free(ranks);
	free(owners);
	free(boxes);
	return st;
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
herd_status herd__save_plan_segments(const plan *p, int r, const herd_ckpt *own, seg **out,
				     size_t *nsegs, size_t *nsums, uint64_t *total)
{
	seg *segs = NULL;
	uint64_t at = 0;
	size_t n = 0, sums = 0;

	HERD_CHECK(herd__calloc(&segs, p->nt + p->nb + 1, sizeof(*segs), "segments"));
	for (size_t i = 0; i < p->nt + p->nb; i++) {
		const layout_rec *rec = herd__save_rec_of(p, r, i);
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
			s->device = -1;
			if (own != NULL) {
				s->src = own->tensors[i].data;
				s->device = own->tensors[i].device;
			}
		} else {
			s->len = rec->size;
			s->chunk = rec->size;
			s->nsums = 1;    /* zero without checksums: the manifest always has one */
			s->device = -1;
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

/* ---- phase 1 as a whole ------------------------------------------------ */

/*
 * Makes the number step free for a save, or says why it is not.  Rank 0
 * looks whether the step is committed; when it is, every rank verifies
 * its share of it (the data files f with f % size == rank, as a restore
 * would read it together), and the ranks agree: a step that verifies is
 * kept and the save fails with HERD_EEXIST; a damaged one (HERD_EFORMAT)
 * is moved aside by rank 0, with a warning, and the save goes on.  A step
 * that cannot be told damaged (a newer format, a read error) is kept too.
 * Collective.
 */
static herd_status claim_step(herd_ckpt *ck, int64_t step)
{
	char name[64], path[4096], why[1024], aside[4096];
	herd_status st, local = HERD_OK;
	int32_t found = 0;             /* 1: a directory there, 2: something else */
	struct stat sb;
	int failed;

	herd__ckpt_step_name(name, sizeof(name), step);
	if (ck->rank == 0 && herd__ckpt_path(path, sizeof(path), ck->dir, name) == HERD_OK &&
	    lstat(path, &sb) == 0)
		found = S_ISDIR(sb.st_mode) ? 1 : 2;
	HERD_CHECK(herd__ckpt_bcast(ck, &found, sizeof(found)));
	if (found == 0)
		return HERD_OK;
	if (found == 2)
		return herd__error(HERD_EEXIST, "checkpoint step %" PRId64 " cannot be saved in %s: "
				   "%s/%s exists and is not a step directory herd made", step,
				   ck->dir, ck->dir, name);
	local = herd__ckpt_verify_share(ck->dir, step, (size_t)ck->rank, (size_t)ck->size);
	st = herd__ckpt_agree(ck, local, &failed);
	if (st == HERD_OK)
		return herd__error(HERD_EEXIST, "checkpoint step %" PRId64 " is already committed in "
				   "%s, and it verifies", step, ck->dir);
	if (failed < 0)
		return st;    /* the communicator's failure */
	if (st != HERD_EFORMAT)
		return herd__error_wrap(HERD_EEXIST, "checkpoint step %" PRId64 " is already "
					"committed in %s, and it could not be verified, so it stays: ",
					step, ck->dir);
	herd__strlcpy(why, herd_last_error(), sizeof(why));
	local = HERD_OK;
	if (ck->rank == 0) {
		local = herd__ckpt_move_aside(ck->dir, step, why, aside, sizeof(aside));
		if (local == HERD_OK)
			herd__log_warn("checkpoint step %" PRId64 " in %s does not verify (%s): moved "
				       "it aside to %s, kept for inspection (herd ckpt ls lists it), "
				       "to save step %" PRId64 " anew", step, ck->dir, why, aside, step);
	}
	return herd__ckpt_agree(ck, local, &failed);
}

/* Starts a save: layout, temporary directory, this rank's file.  Collective. */
herd_status herd__save_begin(herd_ckpt *ck, int64_t step, herd__ckpt_job **out)
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
	job->t_begin = herd__save_now();
	HERD_CHECK_GOTO(exchange_layout(ck, step, local, &job->p), st, fail);
	HERD_CHECK_GOTO(herd__save_plan_segments(&job->p, ck->rank, ck, &job->segs, &job->nsegs,
						 &job->nsums, &job->total), st, fail);
	job->to_peers = herd__ckpt_to_peers(ck);
	job->to_storage = herd__ckpt_to_storage(ck, step);
	if (job->to_storage)
		HERD_CHECK_GOTO(claim_step(ck, step), st, fail);
	if (ck->rank == 0 && job->to_storage) {
		char path[4096];

		snprintf(job->tmp, sizeof(job->tmp), "%s%012" PRId64 ".%ld.%lld",
			 HERD__CKPT_TMP_PREFIX, step, (long)getpid(), (long long)time(NULL));
		local = herd__ckpt_path(path, sizeof(path), ck->dir, job->tmp);
		if (local == HERD_OK && mkdir(path, 0700) != 0)
			local = herd__error_errno(HERD_EIO, errno, "cannot create %s", path);
	}
	HERD_CHECK_GOTO(herd__ckpt_agree(ck, local, &failed), st, fail);
	HERD_CHECK_GOTO(herd__ckpt_bcast(ck, job->tmp, sizeof(job->tmp)), st, fail);
	job->tmp[sizeof(job->tmp) - 1] = '\0';
	if (job->to_peers) {
		/* Rank 0's draw names this save to the holders. */
		job->key.ns = ck->peer_ns;
		job->key.step = step;
		if (ck->rank == 0 && getrandom(&job->key.id, sizeof(job->key.id), 0) !=
		    (ssize_t)sizeof(job->key.id))
			job->key.id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		HERD_CHECK_GOTO(herd__ckpt_bcast(ck, &job->key.id, sizeof(job->key.id)), st, fail);
	}
	herd__save_sink_open(job);
	*out = job;
	return HERD_OK;
fail:
	herd__save_job_free(job);
	return st;
}
