/*
 * sdk/ckpt/commit.c - phase 3 of a save: the manifest, the commit
 * protocol (every file durable on every rank, then the rename into place
 * and `latest`), and retention.
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
#include "net.h"

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

		HERD_CHECK_GOTO(herd__save_plan_segments(p, r, NULL, &segs[r], &nsegs[r], &ns, &total), st, out);
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
		const layout_rec *t0 = herd__save_rec_of(p, 0, i);
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
			s->box = herd__save_box_of(herd__save_rec_of(p, r, i));
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

		HERD_CHECK_GOTO(herd__strdup(&b->name, herd__save_rec_of(p, 0, p->nt + i)->name), st, out);
		b->rule = (herd_ckpt_blob_rule)herd__save_rec_of(p, 0, p->nt + i)->rule;
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

/*
 * The commit in peers' memory: the manifest to every node's holder, so
 * that whichever nodes survive have it.  A holder that does not take it
 * fails the save.
 */
static herd_status commit_peers(herd__ckpt_job *job, const char *data, size_t len)
{
	herd_ckpt *ck = job->ck;

	for (size_t i = 0; i < ck->nholders; i++) {
		int64_t deadline = herd__net_deadline(ck->peer_timeout_ms);
		herd__peer_conn c;
		herd_status st;

		if (ck->holders[i].port == 0)
			continue;
		st = herd__peer_connect(&c, &ck->holders[i], deadline);
		if (st == HERD_OK)
			st = herd__peer_put_manifest(&c, &job->key, data, len, deadline);
		herd__peer_close(&c);
		if (st != HERD_OK)
			return herd__error_wrap(st, "the manifest of step %" PRId64 " to peers' "
						"memory: ", job->step);
	}
	return HERD_OK;
}

/* Rank 0's part of the commit, once every file is durable and every copy held. */
static herd_status commit(herd__ckpt_job *job, const uint64_t *results, size_t stride)
{
	herd_ckpt *ck = job->ck;
	char tmpdir[4096], mpath[4096], stepdir[4096], latest[4096], name[64], text[80];
	herd__ckpt_manifest *m = NULL;
	herd_status st;
	char *data = NULL;
	size_t len = 0;

	HERD_CHECK(herd__calloc(&m, 1, sizeof(*m), "a manifest"));
	HERD_CHECK_GOTO(build_manifest(job, results, stride, m), st, out);
	HERD_CHECK_GOTO(herd__ckpt_manifest_encode(m, &data, &len), st, out);
	if (!job->to_storage) {
		st = commit_peers(job, data, len);
		goto out;
	}
	herd__ckpt_step_name(name, sizeof(name), job->step);
	HERD_CHECK_GOTO(herd__ckpt_path(tmpdir, sizeof(tmpdir), ck->dir, job->tmp), st, out);
	HERD_CHECK_GOTO(herd__ckpt_path(stepdir, sizeof(stepdir), ck->dir, name), st, out);
	HERD_CHECK_GOTO(herd__ckpt_path(latest, sizeof(latest), ck->dir, HERD__CKPT_LATEST), st,
			out);
	/* temp file, fsync, rename, fsync of the step directory */
	HERD_CHECK_GOTO(herd__ckpt_path(mpath, sizeof(mpath), tmpdir, HERD__CKPT_MANIFEST), st, out);
	HERD_CHECK_GOTO(herd__write_file_atomic(mpath, data, len, 0600), st, out);
	/* The commit point: the step appears whole, under its name. */
	HERD_CHECK_GOTO(herd__ckpt_rename_noreplace(tmpdir, stepdir), st, out);
	HERD_CHECK_GOTO(herd__fsync_dir(ck->dir), st, out);
	snprintf(text, sizeof(text), "%s\n", name);
	/* `latest` names the newest step or nothing: left naming an older one,
	 * it could name a step retention deletes next. */
	if (herd__write_file_atomic(latest, text, strlen(text), 0600) != HERD_OK) {
		herd__log_warn("checkpoint step %" PRId64 " is committed, but %s was not updated "
			       "(%s): removed it instead, until a save can write it", job->step,
			       latest, herd_last_error());
		if (unlink(latest) != 0 && errno != ENOENT)
			herd__log_warn("cannot remove %s either: %s", latest, strerror(errno));
	}
	apply_retention(ck, job->step);
	/* In memory once durable in storage: a save that failed is restored
	 * from neither. */
	if (job->to_peers && !job->peers_failed && commit_peers(job, data, len) != HERD_OK)
		herd__log_warn("%s; step %" PRId64 " is in storage alone", herd_last_error(),
			       job->step);
out:
	free(data);
	herd__ckpt_manifest_free(m);
	return st;
}

/* Phase 3 for every rank, after its file is closed.  Collective. */
herd_status herd__save_finish(herd__ckpt_job *job)
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
	/* A step that goes to storage goes there without the copies in
	 * memory that a holder failed to take (on any rank). */
	if (job->to_peers && job->to_storage) {
		herd_status peers;

		local = job->sk.peer_st != HERD_OK ? herd__error(job->sk.peer_st, "%s",
								 job->sk.peer_msg) : HERD_OK;
		peers = herd__ckpt_agree(ck, local, &failed);
		if (peers != HERD_OK && failed < 0) {
			st = peers;   /* the communicator itself failed */
			goto fail;
		}
		if (peers != HERD_OK) {
			if (ck->rank == 0)
				herd__log_warn("%s; step %" PRId64 " goes to storage alone",
					       herd_last_error(), job->step);
			job->peers_failed = true;
		}
	}
	/* Every rank knows how many checksums each rank has: the plan says. */
	for (int r = 0; r < ck->size; r++) {
		seg *segs = NULL;
		size_t nsegs, nsums;
		uint64_t total;

		HERD_CHECK_GOTO(herd__save_plan_segments(&job->p, r, NULL, &segs, &nsegs, &nsums,
							 &total), st, fail);
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
	if (ck->rank == 0 && job->tmp[0] != '\0') {
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
