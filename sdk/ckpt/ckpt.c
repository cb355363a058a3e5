/*
 * sdk/ckpt/ckpt.c - the checkpoint handle: open, close, registration.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "device.h"
#include "handle.h"

herd_status herd__ckpt_path(char *buf, size_t cap, const char *dir, const char *name)
{
	int n = snprintf(buf, cap, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= cap)
		return herd__error(HERD_EINVAL, "path too long: %s/%s", dir, name);
	return HERD_OK;
}

/*
 * Removes what interrupted saves and deletions left: temporary step
 * directories, steps half deleted, temporary `latest` files.  None of them
 * is ever read, so removing them is only about space.
 */
static herd_status sweep(const char *dir)
{
	herd_status st = HERD_OK;
	struct dirent *e;
	DIR *d = opendir(dir);

	if (d == NULL)
		return herd__error_errno(HERD_EIO, errno, "cannot list %s", dir);
	while ((e = readdir(d)) != NULL) {
		int64_t step;

		if ((herd__ckpt_parse_step(e->d_name, HERD__CKPT_TMP_PREFIX, &step) ||
		     herd__ckpt_parse_step(e->d_name, HERD__CKPT_DEL_PREFIX, &step)) &&
		    herd__ckpt_is_ours(dir, e->d_name)) {
			herd_status s2 = herd__ckpt_remove_tree(dir, e->d_name);

			if (s2 != HERD_OK && st == HERD_OK)
				st = s2;
		} else if (strncmp(e->d_name, HERD__CKPT_LATEST ".tmp.", 11) == 0) {
			char path[4096];

			if (herd__ckpt_path(path, sizeof(path), dir, e->d_name) == HERD_OK)
				unlink(path);
		}
	}
	closedir(d);
	return st;
}

/* HERD_CKPT_STAGING_BYTES, or, with a warning, its default when it is
 * not a positive size: a setting of speed does not fail a save. */
static size_t staging_bytes(void)
{
	uint64_t v = 0;

	if (herd__param_size(HERD__P_CKPT_STAGING_BYTES, &v) != HERD_OK)
		herd__log_warn("%s; using %" PRIu64, herd_last_error(), v);
	return (size_t)v;
}

/*
 * One writer per checkpoint directory: rank 0 of a job that opens it
 * holds flock(2) on DIR/.lock until it closes (or dies), with a line that
 * names it; another job's open is refused with that line, before it could
 * sweep the first job's save in flight or apply its own retention.
 */
static herd_status lock_writer(const char *dir, int *out)
{
	char path[PATH_MAX], holder[256];
	const char *job = herd__param_str(HERD__P_JOB_ID);
	struct stat sb;
	ssize_t got;
	int fd, n;

	*out = -1;
	HERD_CHECK(herd__ckpt_path(path, sizeof(path), dir, ".lock"));
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
	if (fd < 0)
		return herd__error_errno(HERD_EIO, errno, "cannot open %s", path);
	/* A FIFO or a device there would take the writer's line (or hold it). */
	if (fstat(fd, &sb) != 0) {
		int err = errno;

		close(fd);
		return herd__error_errno(HERD_EIO, err, "cannot stat %s", path);
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return herd__error(HERD_EIO, "%s is %s, not a regular file: remove it", path,
				   herd__file_kind(sb.st_mode));
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;

		got = pread(fd, holder, sizeof(holder) - 1, 0);
		close(fd);
		if (err != EWOULDBLOCK)
			return herd__error_errno(HERD_EIO, err, "cannot lock %s", path);
		holder[got > 0 ? got : 0] = '\0';
		holder[strcspn(holder, "\n")] = '\0';
		return herd__error(HERD_EBUSY, "checkpoint directory %s is being written by %s; "
				   "one job writes a directory at a time (herd ckpt ls and verify "
				   "read it meanwhile)", dir, holder[0] != '\0' ? holder
				   : "another process");
	}
	gethostname(holder, 64);
	holder[63] = '\0';
	n = snprintf(path, sizeof(path), "pid %ld on %s%s%s%s\n", (long)getpid(), holder,
		     job != NULL ? " (job " : "", job != NULL ? job : "", job != NULL ? ")" : "");
	if (ftruncate(fd, 0) != 0 || pwrite(fd, path, (size_t)n, 0) != n)
		herd__log_warn("%s/.lock: cannot record the writer: %s", dir, strerror(errno));
	*out = fd;
	return HERD_OK;
}

/*
 * The tier in peers' memory: on when copies are asked for (opts, else
 * HERD_CKPT_PEERS) and the launcher named the holders of two nodes or
 * more; the copies go to at most every other node.
 */
static herd_status peer_setup(herd_ckpt *ck, const herd_ckpt_opts *o)
{
	const char *list = herd__param_str(HERD__P_CKPT_HOLDERS);
	const char *node = herd__param_str(HERD__P_NODE_RANK);
	long k = o->peer_copies, every = o->storage_every;
	char *stop;
	long nr;

	if (k == 0)
		HERD_CHECK(herd__param_int(HERD__P_CKPT_PEERS, &k));
	if (every == 0)
		HERD_CHECK(herd__param_int(HERD__P_CKPT_STORAGE_EVERY, &every));
	ck->storage_every = (int)every;
	ck->peer_ns = XXH3_64bits(ck->dir, strlen(ck->dir));
	HERD_CHECK(herd__param_ms(HERD__P_TIMEOUT, &ck->peer_timeout_ms));
	if (k <= 0 || list == NULL || list[0] == '\0')
		return HERD_OK;
	if (node == NULL || (nr = strtol(node, &stop, 10), *stop != '\0') || nr < 0)
		return herd__error(HERD_EINVAL, "HERD_CKPT_HOLDERS is set, but HERD_NODE_RANK (%s) "
				   "is not a node's number", node != NULL ? node : "unset");
	HERD_CHECK(herd__peer_parse(list, &ck->holders, &ck->nholders));
	if ((size_t)nr >= ck->nholders)
		return herd__error(HERD_EINVAL, "HERD_NODE_RANK %ld is beyond the %zu nodes of "
				   "HERD_CKPT_HOLDERS", nr, ck->nholders);
	ck->node_rank = (int)nr;
	ck->peer_copies = ck->nholders < 2 ? 0 : (int)(k < (long)ck->nholders - 1 ? k
						       : (long)ck->nholders - 1);
	return HERD_OK;
}

bool herd__ckpt_to_peers(const herd_ckpt *ck)
{
	return ck->peer_copies > 0;
}

bool herd__ckpt_to_storage(const herd_ckpt *ck, int64_t step)
{
	return !herd__ckpt_to_peers(ck) || ck->storage_every <= 1 || step % ck->storage_every == 0;
}

const char *herd_ckpt_tier_name(herd_ckpt_tier tier)
{
	switch (tier) {
	case HERD_CKPT_TIER_STORAGE:
		return "storage";
	case HERD_CKPT_TIER_PEERS:
		return "peers' memory";
	default:
		return "none";
	}
}

herd_status herd_ckpt_last_restore(const herd_ckpt *ck, herd_ckpt_restore_info *out)
{
	if (ck == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_last_restore: ck and out must not be NULL");
	*out = ck->last;
	return HERD_OK;
}

herd_status herd_ckpt_open(herd_ckpt **out, const char *dir, herd_comm *comm,
			   const herd_ckpt_opts *opts)
{
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_status st = HERD_OK, local = HERD_OK;
	herd_ckpt *ck = NULL;
	int failed;

	if (out == NULL || dir == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_open: out and dir must not be NULL");
	*out = NULL;
	if (opts != NULL) {
		HERD__CHECK_VERSION("herd_ckpt_open", opts, herd_ckpt_opts, CKPT_OPTS);
		memcpy(&o, opts, opts->version >= 2 ? sizeof(o)
				 : offsetof(herd_ckpt_opts, peer_copies));
		o.version = HERD_CKPT_OPTS_VERSION;
	}
	if (o.peer_copies < -1 || o.storage_every < 0)
		return herd__error(HERD_EINVAL, "herd_ckpt_open: peer_copies (%d) must be -1 or "
				   "more, storage_every (%d) 0 or more", o.peer_copies,
				   o.storage_every);
	if (o.keep_last < 0 || o.keep_every < 0)
		return herd__error(HERD_EINVAL, "herd_ckpt_open: keep_last (%d) and keep_every (%d) "
				   "must not be negative", o.keep_last, o.keep_every);
	if (o.checksum != HERD_CKPT_CHECKSUM_DEFAULT && o.checksum != HERD_CKPT_CHECKSUM_XXH3 &&
	    o.checksum != HERD_CKPT_CHECKSUM_NONE)
		return herd__error(HERD_EINVAL, "herd_ckpt_open: unknown checksum %d", (int)o.checksum);
	if (o.chunk_bytes != 0 &&
	    (o.chunk_bytes < HERD__CKPT_CHUNK_MIN || o.chunk_bytes > HERD__CKPT_CHUNK_MAX))
		return herd__error(HERD_EINVAL, "herd_ckpt_open: chunk_bytes %zu is outside %u..%u",
				   o.chunk_bytes, HERD__CKPT_CHUNK_MIN, HERD__CKPT_CHUNK_MAX);
	HERD_CHECK(herd__calloc(&ck, 1, sizeof(*ck), "a checkpoint handle"));
	ck->lock_fd = -1;
	HERD_CHECK_GOTO(herd__strdup(&ck->dir, dir), st, out);
	ck->comm = comm;
	ck->rank = comm != NULL ? herd_comm_rank(comm) : 0;
	ck->size = comm != NULL ? herd_comm_size(comm) : 1;
	ck->keep_last = o.keep_last;
	ck->keep_every = o.keep_every;
	ck->staging_bytes = o.staging_bytes != 0
				    ? o.staging_bytes
				    : staging_bytes();
	ck->checksum = o.checksum == HERD_CKPT_CHECKSUM_NONE ? HERD_CKPT_CHECKSUM_NONE
							     : HERD_CKPT_CHECKSUM_XXH3;
	ck->chunk_bytes = o.chunk_bytes != 0 ? o.chunk_bytes : HERD__CKPT_CHUNK_DEFAULT;
	ck->last.step = ck->last.storage_step = ck->last.peers_step = -1;
	local = peer_setup(ck, &o);
	{
		/* Every rank saves to the same tiers, or the saves' collectives
		 * would part ways: rank 0's settings are the job's, and so is
		 * its name for the directory (a rank that spells it otherwise
		 * keeps its copies under the same namespace). */
		int64_t mine[4] = { ck->peer_copies, ck->storage_every, (int64_t)ck->nholders,
				    (int64_t)ck->peer_ns };
		int64_t r0[4];

		memcpy(r0, mine, sizeof(r0));
		HERD_CHECK_GOTO(herd__ckpt_bcast(ck, r0, sizeof(r0)), st, out);
		ck->peer_ns = (uint64_t)r0[3];
		if (local == HERD_OK && memcmp(mine, r0, 3 * sizeof(int64_t)) != 0)
			local = herd__error(HERD_EMISMATCH, "this rank has peer_copies %" PRId64
					    ", storage_every %" PRId64 " and %" PRId64 " checkpoint "
					    "holders, rank 0 %" PRId64 ", %" PRId64 " and %" PRId64
					    ": the ranks' options or HERD_CKPT_* differ", mine[0],
					    mine[1], mine[2], r0[0], r0[1], r0[2]);
	}
	/* Rank 0 prepares the directory; the others learn the outcome. */
	if (ck->rank == 0 && local == HERD_OK) {
		local = herd__mkdirs(dir, 0700);
		if (local == HERD_OK)
			local = lock_writer(dir, &ck->lock_fd);
		if (local == HERD_OK)
			local = sweep(dir);
	}
	HERD_CHECK_GOTO(herd__ckpt_agree(ck, local, &failed), st, out);
	*out = ck;
	ck = NULL;
out:
	if (ck != NULL) {
		if (ck->lock_fd >= 0)
			close(ck->lock_fd);
		free(ck->holders);
		free(ck->dir);
		free(ck);
	}
	return st;
}

void herd_ckpt_free(herd_ckpt *ck)
{
	if (ck == NULL)
		return;
	(void)herd__ckpt_join(ck);   /* its outcome is herd_ckpt_wait's to report */
	herd__ckpt_ring_free(ck);
	if (ck->lock_fd >= 0)
		close(ck->lock_fd);
	free(ck->tensors);
	free(ck->blobs);
	free(ck->names);
	free(ck->holders);
	free(ck->dir);
	free(ck);
}

const char *herd_ckpt_dir(const herd_ckpt *ck)
{
	return ck != NULL ? ck->dir : NULL;
}

/*
 * The names registered, tensors and blobs together, in an open-addressing
 * hash table at most half full, so that registering n items takes time in
 * n, not n squared (an import registers every tensor of a file).  A slot
 * holds 0 (empty) or 1 + (index << 1 | is_blob).  The hash is seeded at
 * random, so that names from a file cannot be chosen to collide.
 */
static const char *slot_name(const herd_ckpt *ck, size_t v)
{
	size_t i = (v - 1) >> 1;

	return (v - 1) & 1 ? ck->blobs[i].name : ck->tensors[i].name;
}

/* Where name is in the table, or the empty slot where it would go. */
static size_t names_slot(const herd_ckpt *ck, const char *name)
{
	size_t mask = ck->names_cap - 1;
	size_t i = (size_t)XXH3_64bits_withSeed(name, strlen(name), ck->names_seed) & mask;

	while (ck->names[i] != 0 && strcmp(slot_name(ck, ck->names[i]), name) != 0)
		i = (i + 1) & mask;
	return i;
}

/* Whether name is already registered, as a tensor or a blob. */
static bool registered(const herd_ckpt *ck, const char *name)
{
	return ck->names_cap > 0 && ck->names[names_slot(ck, name)] != 0;
}

/* Makes room in the table for one more name. */
static herd_status names_grow(herd_ckpt *ck)
{
	size_t n = ck->ntensors + ck->nblobs, cap = ck->names_cap ? ck->names_cap * 2 : 64;
	size_t *old = ck->names;

	if (ck->names_cap != 0 && n + 1 <= ck->names_cap / 2)
		return HERD_OK;
	/* Without the kernel's randomness, the clock and an address. */
	if (ck->names_cap == 0 &&
	    getrandom(&ck->names_seed, sizeof(ck->names_seed), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(ck->names_seed))
		ck->names_seed = (uint64_t)time(NULL) * UINT64_C(0x9e3779b97f4a7c15) ^
				 (uint64_t)(uintptr_t)ck;
	HERD_CHECK(herd__calloc(&ck->names, cap, sizeof(size_t), "the checkpoint's name table"));
	ck->names_cap = cap;
	for (size_t i = 0; i < ck->ntensors; i++)
		ck->names[names_slot(ck, ck->tensors[i].name)] = 1 + (i << 1);
	for (size_t i = 0; i < ck->nblobs; i++)
		ck->names[names_slot(ck, ck->blobs[i].name)] = 1 + (i << 1 | 1);
	free(old);
	return HERD_OK;
}

static herd_status check_name(const herd_ckpt *ck, const char *fn, const char *name)
{
	if (name == NULL || !herd__ckpt_name_is_valid(name, strlen(name)))
		return herd__error(HERD_EINVAL, "%s: name \"%.64s\" must be 1..%d printable ASCII "
				   "characters", fn, name != NULL ? name : "(null)",
				   HERD_CKPT_NAME_MAX);
	if (registered(ck, name))
		return herd__error(HERD_EEXIST, "%s: \"%s\" is already registered", fn, name);
	if (ck->busy)
		return herd__error(HERD_EBUSY, "%s: \"%s\": an asynchronous save is in flight; "
				   "register before a save starts or after it has finished", fn, name);
	return HERD_OK;
}

/* Grows an array of items of size bytes to hold one more. */
static herd_status grow(void *items, size_t n, size_t *cap, size_t size)
{
	void *p;
	size_t ncap;

	if (n < *cap)
		return HERD_OK;
	ncap = *cap ? *cap * 2 : 8;
	p = realloc(*(void **)items, ncap * size);
	if (p == NULL)
		return herd__error(HERD_ENOMEM, "out of memory registering checkpoint state");
	*(void **)items = p;
	*cap = ncap;
	return HERD_OK;
}

herd_status herd_ckpt_add_tensor(herd_ckpt *ck, const char *name, void *data, herd_dtype dtype,
				 int ndim, const uint64_t *global_shape, const uint64_t *offset,
				 const uint64_t *shape)
{
	herd__ckpt_reg_tensor t;
	uint64_t vol;

	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: ck is NULL");
	HERD_CHECK(check_name(ck, "herd_ckpt_add_tensor", name));
	if (herd_dtype_size(dtype) == 0)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": unknown dtype %d",
				   name, (int)dtype);
	if (ndim < 1 || ndim > HERD_CKPT_MAX_DIMS || global_shape == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": ndim %d must be "
				   "1..%d, with a global shape", name, ndim, HERD_CKPT_MAX_DIMS);
	if ((offset == NULL) != (shape == NULL))
		return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": offset and shape "
				   "are both given or both NULL", name);
	memset(&t, 0, sizeof(t));
	herd__strlcpy(t.name, name, sizeof(t.name));
	t.data = data;
	(void)herd__dev_where(data, &t.device);
	t.dtype = dtype;
	t.box.ndim = ndim;
	for (int d = 0; d < ndim; d++) {
		t.shape[d] = global_shape[d];
		t.box.offset[d] = offset != NULL ? offset[d] : 0;
		t.box.shape[d] = shape != NULL ? shape[d] : global_shape[d];
		if (t.shape[d] > HERD__CKPT_MAX_DIM)
			return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": dimension %d: "
					   "the global size %" PRIu64 " is over the limit of 2^48 "
					   "(%" PRIu64 ")", name, d, t.shape[d], HERD__CKPT_MAX_DIM);
		if (t.box.shape[d] > t.shape[d] || t.box.offset[d] > t.shape[d] - t.box.shape[d])
			return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": dimension %d: "
					   "the shard (%" PRIu64 " at %" PRIu64 ") does not lie within "
					   "the global size %" PRIu64, name, d, t.box.shape[d],
					   t.box.offset[d], t.shape[d]);
	}
	if (!herd__ckpt_volume(t.shape, ndim, HERD__CKPT_MAX_BYTES / herd_dtype_size(dtype), &vol))
		return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": the global tensor is "
				   "too large", name);
	herd__ckpt_volume(t.box.shape, ndim, UINT64_MAX, &vol);
	t.bytes = vol * herd_dtype_size(dtype);
	if (t.bytes > 0 && data == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_tensor: \"%s\": data is NULL", name);
	HERD_CHECK(names_grow(ck));
	HERD_CHECK(grow(&ck->tensors, ck->ntensors, &ck->cap_tensors, sizeof(t)));
	ck->names[names_slot(ck, t.name)] = 1 + (ck->ntensors << 1);
	ck->tensors[ck->ntensors++] = t;
	return HERD_OK;
}

herd_status herd_ckpt_add_blob(herd_ckpt *ck, const char *name, void *data, size_t size,
			       herd_ckpt_blob_rule rule)
{
	herd__ckpt_reg_blob b;
	int dev;

	if (ck == NULL)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_blob: ck is NULL");
	HERD_CHECK(check_name(ck, "herd_ckpt_add_blob", name));
	if (data == NULL || size == 0 || size > HERD_CKPT_BLOB_MAX)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_blob: \"%s\": %zu bytes at %p; a blob "
				   "is 1..%u bytes", name, size, data, HERD_CKPT_BLOB_MAX);
	if (herd__dev_where(data, &dev) == HERD__MEM_DEVICE)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_blob: \"%s\": %p is GPU %d's memory; "
				   "a blob is host memory (a tensor may be on a GPU)", name, data,
				   dev);
	if (rule != HERD_CKPT_BLOB_SAME_RANK && rule != HERD_CKPT_BLOB_RANK0 &&
	    rule != HERD_CKPT_BLOB_STRICT)
		return herd__error(HERD_EINVAL, "herd_ckpt_add_blob: \"%s\": unknown rule %d", name,
				   (int)rule);
	memset(&b, 0, sizeof(b));
	herd__strlcpy(b.name, name, sizeof(b.name));
	b.data = data;
	b.size = size;
	b.rule = rule;
	HERD_CHECK(names_grow(ck));
	HERD_CHECK(grow(&ck->blobs, ck->nblobs, &ck->cap_blobs, sizeof(b)));
	ck->names[names_slot(ck, b.name)] = 1 + (ck->nblobs << 1 | 1);
	ck->blobs[ck->nblobs++] = b;
	return HERD_OK;
}
