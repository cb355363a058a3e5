/*
 * sdk/ckpt/writer.c - phase 2 of a save: the sink that writes a rank's
 * stream into its data file, hashing it chunk by chunk, and stops at
 * herd_ckpt_abort.
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

/* ---- phase 2: the writer ----------------------------------------------- */

void herd__save_sink_fail(sink *sk, herd_status st)
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
			herd__save_sink_fail(sk, herd__error_errno(HERD_EIO, w < 0 ? errno : ENOSPC,
								   "cannot write %s at byte %"
								   PRIu64, sk->path, off));
			return;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
}

/* Fails the sink once herd_ckpt_abort has been called: looked at before
 * every piece and once more before the commit. */
void herd__save_check_abort(herd__ckpt_job *job)
{
	sink *sk = &job->sk;
	herd_status staged = (herd_status)atomic_load(&job->stage_st);

	if (sk->st == HERD_OK && staged != HERD_OK)
		herd__save_sink_fail(sk, herd__error(staged, "%s", job->stage_msg));
	if (sk->st == HERD_OK && atomic_load(&job->ck->abort_req))
		herd__save_sink_fail(sk, herd__error(HERD_EABORTED, "the save of step %" PRId64
						     " was aborted after %"
						     PRIu64 " of %" PRIu64 " bytes", job->step,
						     sk->pos, job->total));
}

/*
 * A holder failed: the copies in memory stop.  A step that goes to
 * storage goes on there (the commit warns), one that does not fails.
 */
static void peer_fail(herd__ckpt_job *job, herd_status st)
{
	sink *sk = &job->sk;

	if (sk->peer_st == HERD_OK) {
		sk->peer_st = herd__error_wrap(st, "a copy of step %" PRId64 " in peers' memory: ",
					       job->step);
		herd__strlcpy(sk->peer_msg, herd_last_error(), sizeof(sk->peer_msg));
	}
	for (size_t i = 0; i < sk->npeers; i++)
		herd__peer_close(&sk->peers[i]);
	sk->npeers = 0;
	if (!job->to_storage)
		herd__save_sink_fail(sk, herd__error(sk->peer_st, "%s", sk->peer_msg));
}

/* Takes the next n bytes of the stream: writes them and hashes each chunk.
 * After herd_ckpt_abort the sink fails, and later bytes are only counted. */
void herd__save_sink_put(herd__ckpt_job *job, const uint8_t *p, size_t n)
{
	sink *sk = &job->sk;

	herd__save_check_abort(job);
	/* A piece to the file, then to each peer: neither waits on the other
	 * for long, and each send has a deadline of its own. */
	for (size_t o = 0; o < n; o += WRITE_PIECE) {
		size_t k = n - o < WRITE_PIECE ? n - o : WRITE_PIECE;

		if (sk->fd >= 0)
			sink_write(sk, p + o, k, sk->pos + o);
		for (size_t i = 0; i < sk->npeers && sk->st == HERD_OK; i++)
			if (herd__peer_put_bytes(&sk->peers[i], p + o, k,
						 herd__net_deadline(sk->peer_timeout_ms)) != HERD_OK)
				peer_fail(job, HERD_EIO);
	}
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

/*
 * Connects to the holder of this rank's node (the local copy) and to those
 * of the next peer_copies nodes after it (in node order, skipping those
 * without a holder; one more when its own node has none), and announces
 * the stream to each.  Losing any peer_copies nodes then leaves a copy of
 * every rank's data.
 */
static void peers_open(herd__ckpt_job *job)
{
	herd_ckpt *ck = job->ck;
	sink *sk = &job->sk;
	size_t n = ck->nholders, want = (size_t)ck->peer_copies + 1, others = 0;

	sk->peer_timeout_ms = ck->peer_timeout_ms;
	if (herd__calloc(&sk->peers, want, sizeof(*sk->peers), "the peers' connections") !=
	    HERD_OK) {
		peer_fail(job, HERD_ENOMEM);
		return;
	}
	for (size_t d = 0; d < n && sk->npeers < want; d++) {
		const herd__peer_addr *a = &ck->holders[((size_t)ck->node_rank + d) % n];
		herd__peer_conn *c = &sk->peers[sk->npeers];
		int64_t deadline = herd__net_deadline(ck->peer_timeout_ms);

		if (a->port == 0)
			continue;   /* (its own node: one more elsewhere) */
		others += d > 0;
		if (herd__peer_connect(c, a, deadline) != HERD_OK ||
		    herd__peer_put_begin(c, &job->key, ck->rank, job->total, deadline) != HERD_OK) {
			herd__peer_close(c);
			peer_fail(job, HERD_EIO);
			return;
		}
		sk->npeers++;
	}
	if (others == 0)
		peer_fail(job, herd__error(HERD_EUNAVAIL, "no other node of the job's %zu has a "
					   "checkpoint holder (HERD_CKPT_HOLDERS): no copy can be "
					   "kept off this rank's node", n));
}

/* Opens this rank's file in the temporary step directory. */
void herd__save_sink_open(herd__ckpt_job *job)
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
		herd__save_sink_fail(sk, HERD_ENOMEM);
		return;
	}
	sk->hs = XXH3_createState();
	if (sk->hs == NULL || XXH3_64bits_reset(sk->hs) != XXH_OK) {
		herd__save_sink_fail(sk, herd__error(HERD_ENOMEM, "out of memory for a checksum state"));
		return;
	}
	if (job->to_storage) {
		sk->fd = open(sk->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (sk->fd < 0)
			herd__save_sink_fail(sk, herd__error_errno(HERD_EIO, errno, "cannot create %s",
								   sk->path));
	}
	if (job->to_peers && sk->st == HERD_OK)
		peers_open(job);
}

/* The peers' words that they hold the whole stream, and their connections closed. */
static void peers_close(herd__ckpt_job *job)
{
	sink *sk = &job->sk;

	for (size_t i = 0; i < sk->npeers; i++)
		if (sk->st == HERD_OK &&
		    herd__peer_put_end(&sk->peers[i], herd__net_deadline(sk->peer_timeout_ms)) !=
			    HERD_OK) {
			peer_fail(job, HERD_EIO);
			break;
		}
	for (size_t i = 0; i < sk->npeers; i++)
		herd__peer_close(&sk->peers[i]);
	free(sk->peers);
	sk->peers = NULL;
	sk->npeers = 0;
}

/* Waits for the peers to hold their copies, and makes the file durable
 * (an fsync error fails the checkpoint). */
void herd__save_sink_close(herd__ckpt_job *job)
{
	sink *sk = &job->sk;

	peers_close(job);
	if (sk->fd < 0)
		return;
	if (sk->st == HERD_OK && fsync(sk->fd) != 0)
		herd__save_sink_fail(sk, herd__error_errno(HERD_EIO, errno, "cannot fsync %s", sk->path));
	if (close(sk->fd) != 0 && sk->st == HERD_OK)
		herd__save_sink_fail(sk, herd__error_errno(HERD_EIO, errno, "cannot close %s", sk->path));
	sk->fd = -1;
}
