/*
 * sdk/ckpt/io.c - files and directories of checkpoints: exact reads,
 * directory fsync, removal of a step, renames that replace nothing, the
 * listing of committed steps, and the verification of every byte of a
 * step (or of a rank's share of them).
 *
 * Files of a step are always opened relative to the step directory
 * (openat, O_NOFOLLOW) by names the manifest decoder has checked, so a
 * manifest cannot make a reader leave its checkpoint directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_internal.h"

/* Reads len bytes at off whole; on failure fills r->err and r->at. */
static bool pread_whole(int fd, void *buf, size_t len, uint64_t off, herd__ckpt_read_result *r)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->err = n < 0 ? errno : -1;
			r->at = off;
			return false;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return true;
}

herd_status herd__ckpt_read_error(const herd__ckpt_read_result *r, size_t len, const char *path)
{
	if (r->err > 0)
		return herd__error_errno(HERD_EIO, r->err, "cannot read %s at byte %" PRIu64, path,
					 r->at);
	return herd__error(HERD_EIO, "%s ends at byte %" PRIu64 ", before the %zu bytes expected "
			   "there", path, r->at, len);
}

herd_status herd__ckpt_pread(int fd, void *buf, size_t len, uint64_t off, const char *path)
{
	herd__ckpt_read_result r = { 0, 0, -1, 0 };

	if (pread_whole(fd, buf, len, off, &r))
		return HERD_OK;
	/* What is left to read where it stopped. */
	return herd__ckpt_read_error(&r, len - (size_t)(r.at - off), path);
}

herd_status herd__ckpt_pread_sum(int fd, void *buf, size_t len, uint64_t off, const char *path,
				 uint64_t *sum)
{
	HERD_CHECK(herd__ckpt_pread(fd, buf, len, off, path));
	if (sum != NULL)
		*sum = herd__ckpt_sum(buf, len);
	return HERD_OK;
}

/* ---- the hashing thread ------------------------------------------------ */

static herd__ckpt_read_result hasher_job(const herd__ckpt_hasher *h)
{
	herd__ckpt_read_result r = { 0, 0, -1, 0 };

	for (uint64_t i = 0; i * h->chunk < h->len; i++) {
		uint64_t at = i * h->chunk, n = h->len - at < h->chunk ? h->len - at : h->chunk;
		uint64_t sum;

		if (h->out != NULL) {
			h->out[i] = herd__ckpt_sum(h->p + at, (size_t)n);
			continue;
		}
		if (!pread_whole(h->fd, h->p + at, (size_t)n, h->off + at, &r))
			break;
		sum = herd__ckpt_sum(h->p + at, (size_t)n);
		if (sum != h->sums[i]) {
			r.bad = (int64_t)i;
			r.sum = sum;
			break;
		}
	}
	return r;
}

static void *hasher_main(void *arg)
{
	herd__ckpt_hasher *h = arg;
	herd__ckpt_read_result r;

	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->busy && !h->stop)
			pthread_cond_wait(&h->cv, &h->mu);
		if (!h->busy)
			break;
		pthread_mutex_unlock(&h->mu);
		/* The caller leaves p..p+len alone until it has waited. */
		r = hasher_job(h);

		pthread_mutex_lock(&h->mu);
		h->res = r;
		h->busy = false;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

void herd__ckpt_hasher_start(herd__ckpt_hasher *h)
{
	memset(h, 0, sizeof(*h));
	if (pthread_mutex_init(&h->mu, NULL) != 0)
		return;
	if (pthread_cond_init(&h->cv, NULL) != 0) {
		pthread_mutex_destroy(&h->mu);
		return;
	}
	h->inited = true;
	/* Without a thread, post does the job inline: slower, never wrong. */
	h->running = pthread_create(&h->thread, NULL, hasher_main, h) == 0;
}

/* Hands the job in h's fields to the thread, or does it here without one. */
static void hasher_go(herd__ckpt_hasher *h, const herd__ckpt_hasher *job)
{
	if (h->running)
		pthread_mutex_lock(&h->mu);
	h->fd = job->fd;
	h->p = job->p;
	h->off = job->off;
	h->len = job->len;
	h->chunk = job->chunk;
	h->sums = job->sums;
	h->out = job->out;
	if (!h->running) {
		h->res = hasher_job(h);
		return;
	}
	h->busy = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void herd__ckpt_hasher_post(herd__ckpt_hasher *h, int fd, void *p, uint64_t off, uint64_t len,
			    uint64_t chunk, const uint64_t *sums)
{
	herd__ckpt_hasher job = { .fd = fd, .p = p, .off = off, .len = len, .chunk = chunk,
				  .sums = sums };

	hasher_go(h, &job);
}

void herd__ckpt_hasher_post_sums(herd__ckpt_hasher *h, const void *p, uint64_t len,
				 uint64_t chunk, uint64_t *out)
{
	/* Hash only: the thread never writes through p. */
	herd__ckpt_hasher job = { .fd = -1, .p = (uint8_t *)(uintptr_t)p, .len = len,
				  .chunk = chunk, .out = out };

	hasher_go(h, &job);
}

herd__ckpt_read_result herd__ckpt_hasher_wait(herd__ckpt_hasher *h)
{
	herd__ckpt_read_result r;

	if (!h->running)
		return h->res;
	/* Bounded: the reads of one run of a regular file and their hashing. */
	pthread_mutex_lock(&h->mu);
	while (h->busy)
		pthread_cond_wait(&h->cv, &h->mu);
	r = h->res;
	pthread_mutex_unlock(&h->mu);
	return r;
}

void herd__ckpt_hasher_stop(herd__ckpt_hasher *h)
{
	if (h->running) {
		pthread_mutex_lock(&h->mu);
		h->stop = true;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
		/* The thread finishes a posted chunk first, then leaves. */
		pthread_join(h->thread, NULL);
	}
	if (h->inited) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
	}
	memset(h, 0, sizeof(*h));
}

/* Removes the contents of the directory open as fd, depth levels deep at most. */
static herd_status remove_contents(int fd, const char *where, int depth)
{
	herd_status st = HERD_OK;
	struct dirent *e;
	DIR *d;
	int dup_fd = dup(fd);

	if (dup_fd < 0 || (d = fdopendir(dup_fd)) == NULL) {
		if (dup_fd >= 0)
			close(dup_fd);
		return herd__error_errno(HERD_EIO, errno, "cannot list %s", where);
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(fd, e->d_name, 0) == 0)
			continue;
		if ((errno == EISDIR || errno == EPERM) && depth > 0) {
			int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC);

			if (sub >= 0) {
				herd_status s2 = remove_contents(sub, where, depth - 1);

				close(sub);
				if (s2 == HERD_OK && unlinkat(fd, e->d_name, AT_REMOVEDIR) == 0)
					continue;
			}
		}
		if (st == HERD_OK)
			st = herd__error_errno(HERD_EIO, errno, "cannot remove %s/%s", where,
					       e->d_name);
	}
	closedir(d);
	return st;
}

bool herd__ckpt_is_ours(const char *dir, const char *name)
{
	char path[4096];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (lstat(path, &sb) != 0)
		return false;
	if (S_ISDIR(sb.st_mode))
		return true;
	herd__log_warn("checkpoint directory %s: leaving %s alone: it is named like a step but is "
		       "%s, not a directory herd made", dir, name, herd__file_kind(sb.st_mode));
	return false;
}

herd_status herd__ckpt_remove_tree(const char *parent, const char *name)
{
	char where[4096];
	herd_status st;
	int pfd, fd;

	snprintf(where, sizeof(where), "%s/%s", parent, name);
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return herd__error_errno(HERD_EIO, errno, "cannot open directory %s", parent);
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		st = errno == ENOENT ? HERD_OK
				     : herd__error_errno(HERD_EIO, errno, "cannot open %s", where);
		close(pfd);
		return st;
	}
	st = remove_contents(fd, where, 8);
	close(fd);
	if (st == HERD_OK && unlinkat(pfd, name, AT_REMOVEDIR) != 0)
		st = herd__error_errno(HERD_EIO, errno, "cannot remove %s", where);
	close(pfd);
	return st;
}

herd_status herd__ckpt_rename_noreplace(const char *from, const char *to)
{
	struct stat sb;

	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return HERD_OK;
	if (errno != EINVAL && errno != ENOSYS)
		return herd__error_errno(errno == EEXIST ? HERD_EEXIST : HERD_EIO, errno,
					 "cannot rename %s to %s", from, to);
	/* A file system without RENAME_NOREPLACE: check, then rename. */
	if (lstat(to, &sb) == 0)
		return herd__error(HERD_EEXIST, "cannot rename %s to %s: it exists", from, to);
	if (rename(from, to) != 0)
		return herd__error_errno(errno == EEXIST || errno == ENOTEMPTY ? HERD_EEXIST
									      : HERD_EIO,
					 errno, "cannot rename %s to %s", from, to);
	return HERD_OK;
}

static int cmp_step(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

herd_status herd__ckpt_committed_steps(const char *dir, int64_t **out, size_t *count)
{
	herd_status st = HERD_OK;
	int64_t *steps = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	*out = NULL;
	*count = 0;
	d = opendir(dir);
	if (d == NULL)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "cannot list the checkpoint directory %s", dir);
	while ((e = readdir(d)) != NULL) {
		char canon[64], path[4096];
		struct stat sb;
		int64_t step;

		if (!herd__ckpt_parse_step(e->d_name, HERD__CKPT_STEP_PREFIX, &step))
			continue;
		/* One spelling per step, so that a step is never listed twice. */
		herd__ckpt_step_name(canon, sizeof(canon), step);
		if (strcmp(canon, e->d_name) != 0 || !herd__ckpt_is_ours(dir, e->d_name))
			continue;
		/* Committed: a manifest is there, whatever it is.  One that
		 * cannot be read (a FIFO, a link) is a damaged step to report
		 * where it is read, not a step to leave out of the count. */
		snprintf(path, sizeof(path), "%s/%s/%s", dir, e->d_name, HERD__CKPT_MANIFEST);
		if (lstat(path, &sb) != 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			int64_t *p = realloc(steps, ncap * sizeof(*p));

			if (p == NULL) {
				st = herd__error(HERD_ENOMEM, "out of memory listing %s", dir);
				goto out;
			}
			steps = p;
			cap = ncap;
		}
		steps[n++] = step;
	}
	if (n > 1)
		qsort(steps, n, sizeof(*steps), cmp_step);
	*out = steps;
	*count = n;
	steps = NULL;
out:
	free(steps);
	closedir(d);
	return st;
}

/* ---- verification ------------------------------------------------------ */

typedef struct verifier {
	const char *stepdir;
	herd_ckpt_problem_fn fn;
	void *arg;
	size_t problems;
	size_t unreadable;      /* of them, reads that failed */
	herd_status first;      /* the first problem, raised */
	char first_msg[1024];
} verifier;

static void problem(verifier *v, const char *file, const char *tensor, int64_t shard,
		    int64_t chunk, int64_t offset, const char *fmt, ...) HERD_PRINTF(7, 8);

static void problem(verifier *v, const char *file, const char *tensor, int64_t shard,
		    int64_t chunk, int64_t offset, const char *fmt, ...)
{
	herd_ckpt_problem p;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p.file = file;
	p.tensor = tensor;
	p.shard = shard;
	p.chunk = chunk;
	p.offset = offset;
	p.message = msg;
	if (v->problems++ == 0) {
		if (tensor != NULL)
			snprintf(v->first_msg, sizeof(v->first_msg), "%s/%s: \"%s\" shard %" PRId64
				 " chunk %" PRId64 " (byte %" PRId64 " of the file): %s", v->stepdir,
				 file, tensor, shard, chunk, offset, msg);
		else
			snprintf(v->first_msg, sizeof(v->first_msg), "%s/%s: %s", v->stepdir, file,
				 msg);
	}
	if (v->fn != NULL)
		v->fn(v->arg, &p);
}

/* Checks one range of a file chunk by chunk against sums. */
static void verify_range(verifier *v, int fd, const char *file, const char *what, int64_t shard,
			 uint64_t at, uint64_t len, uint64_t chunk, const uint64_t *sums,
			 uint8_t *buf)
{
	for (uint64_t c = 0; c * chunk < len; c++) {
		uint64_t off = at + c * chunk, n = len - c * chunk < chunk ? len - c * chunk : chunk;
		char path[4096];
		uint64_t got;

		snprintf(path, sizeof(path), "%s/%s", v->stepdir, file);
		if (herd__ckpt_pread_sum(fd, buf, (size_t)n, off, path, &got) != HERD_OK) {
			v->unreadable++;
			problem(v, file, what, shard, (int64_t)c, (int64_t)off, "%s",
				herd_last_error());
			return;
		}
		if (got != sums[c])
			problem(v, file, what, shard, (int64_t)c, (int64_t)off,
				"checksum mismatch: expected %016" PRIx64 ", got %016" PRIx64, sums[c],
				got);
	}
}

int herd__ckpt_open_file(int dfd, const char *name, int *fd, uint64_t *size, int *err,
			 char *why, size_t cap)
{
	struct stat sb;

	*err = 0;
	*fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (*fd < 0) {
		*err = errno;
		/* O_NOFOLLOW's refusal of a symbolic link, in words. */
		if (*err == ELOOP && fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(sb.st_mode)) {
			*err = 0;   /* a file of another kind, not a failure to read */
			snprintf(why, cap, "it is a symbolic link, not a regular file");
		} else {
			snprintf(why, cap, "cannot open: %s", strerror(*err));
		}
		return -1;
	}
	if (fstat(*fd, &sb) != 0) {
		*err = errno;
		snprintf(why, cap, "cannot stat: %s", strerror(*err));
	} else if (!S_ISREG(sb.st_mode)) {
		snprintf(why, cap, "it is %s, not a regular file", herd__file_kind(sb.st_mode));
	} else {
		*size = (uint64_t)sb.st_size;
		return 0;
	}
	close(*fd);
	*fd = -1;
	return -1;
}

int herd__ckpt_data_open(int dfd, const char *name, uint64_t size, int *fd, char *why,
			 size_t cap)
{
	uint64_t got = 0;
	int err;

	if (herd__ckpt_open_file(dfd, name, fd, &got, &err, why, cap) != 0)
		return -1;
	if (got == size)
		return 0;
	snprintf(why, cap, "the file has %" PRIu64 " bytes, the manifest says %" PRIu64, got, size);
	close(*fd);
	*fd = -1;
	return -1;
}

herd_status herd__ckpt_verify_data(const char *stepdir, const herd__ckpt_manifest *m,
				   size_t part, size_t nparts, herd_ckpt_problem_fn fn, void *arg,
				   size_t *problems, size_t *unreadable)
{
	verifier v = { stepdir, fn, arg, 0, 0, HERD_OK, "" };
	herd_status st = HERD_OK;
	uint8_t *buf = NULL;
	int *fds = NULL;
	int dfd = -1;
	size_t bufsz = m->chunk_bytes;

	if (problems != NULL)
		*problems = 0;
	for (size_t i = 0; i < m->nblobs; i++)
		for (size_t j = 0; j < m->blobs[i].nparts; j++)
			if (m->blobs[i].parts[j].len > bufsz)
				bufsz = m->blobs[i].parts[j].len;
	HERD_CHECK_GOTO(herd__calloc(&buf, bufsz, 1, "a verification buffer"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&fds, m->nfiles + 1, sizeof(int), "file descriptors"), st,
			out);
	for (size_t f = 0; f < m->nfiles; f++)
		fds[f] = -1;
	dfd = open(stepdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		st = herd__error_errno(HERD_EIO, errno, "cannot open the step directory %s",
				       stepdir);
		goto out;
	}
	if (nparts == 0)
		nparts = 1;
	for (size_t f = part; f < m->nfiles; f += nparts) {
		char why[160];

		if (herd__ckpt_data_open(dfd, m->files[f].name, m->files[f].size, &fds[f], why,
					 sizeof(why)) != 0)
			problem(&v, m->files[f].name, NULL, -1, -1, -1, "%s", why);
	}
	if (m->checksum == HERD_CKPT_CHECKSUM_NONE)
		goto done;
	for (size_t i = 0; i < m->ntensors; i++) {
		const herd__ckpt_tensor *t = &m->tensors[i];

		for (size_t j = 0; j < t->nshards; j++) {
			const herd__ckpt_shard *s = &t->shards[j];

			if (fds[s->file] >= 0)
				verify_range(&v, fds[s->file], m->files[s->file].name, t->name,
					     (int64_t)j, s->at, s->len, m->chunk_bytes, s->sums, buf);
		}
	}
	for (size_t i = 0; i < m->nblobs; i++) {
		const herd__ckpt_blob *b = &m->blobs[i];

		for (size_t j = 0; j < b->nparts; j++) {
			const herd__ckpt_blob_part *p = &b->parts[j];

			if (fds[p->file] >= 0)
				verify_range(&v, fds[p->file], m->files[p->file].name, b->name,
					     (int64_t)j, p->at, p->len, p->len, &p->sum, buf);
		}
	}
done:
	if (problems != NULL)
		*problems = v.problems;
	if (unreadable != NULL)
		*unreadable = v.unreadable;
	if (v.problems > 0)
		st = herd__error(HERD_EFORMAT, "%s%s", v.first_msg,
				 v.problems > 1 ? " (and more problems)" : "");
out:
	for (size_t f = 0; fds != NULL && f < m->nfiles; f++)
		if (fds[f] >= 0)
			close(fds[f]);
	if (dfd >= 0)
		close(dfd);
	free(fds);
	free(buf);
	return st;
}

herd_status herd__ckpt_verify_share(const char *dir, int64_t step, size_t part, size_t nparts)
{
	char name[64], stepdir[4096];
	herd__ckpt_manifest *m = NULL;
	size_t problems = 0, unreadable = 0;
	herd_status st;

	herd__ckpt_step_name(name, sizeof(name), step);
	if ((size_t)snprintf(stepdir, sizeof(stepdir), "%s/%s", dir, name) >= sizeof(stepdir))
		return herd__error(HERD_EINVAL, "path too long: %s/%s", dir, name);
	HERD_CHECK(herd__ckpt_manifest_load(&m, stepdir));
	if (m->step != step)
		st = herd__error(HERD_EFORMAT, "%s/%s: the manifest is that of step %" PRId64,
				 stepdir, HERD__CKPT_MANIFEST, m->step);
	else
		st = herd__ckpt_verify_data(stepdir, m, part, nparts, NULL, NULL, &problems,
					    &unreadable);
	herd__ckpt_manifest_free(m);
	/* Reads that failed, and nothing else: unreadable for now, as a
	 * restore takes it (HERD_EIO), not known damaged. */
	if (st == HERD_EFORMAT && problems > 0 && unreadable == problems)
		st = herd__error_wrap(HERD_EIO, "%s", "");
	return st;
}
