/*
 * sdk/store/file.c - the file store: one file per key in a directory that
 * every rank sees.
 *
 * Layout of the directory:
 *   k-<key, percent-encoded>   a key's value; bytes other than A-Z a-z 0-9 _ -
 *                              become %XX, so no key can make a '/' or a
 *                              name of its own like ".."
 *   h-<sha256 of the key>      the same, for keys whose encoding is too long
 *                              for a file name
 *   n-<sha256 of the key>      such a key itself, for listings (written before
 *                              its h- file, removed after it)
 *   t-<random>                 a value being written, renamed into place
 *   lock                       flock(2)ed by every change
 *
 * Readers never lock: a value file is only ever replaced whole by rename,
 * so a reader sees the old value or the new one.  Changes lock, so that
 * add and compare_set read and write as one step, and set and delete
 * cannot slip in between.  Waiting is polling, with a backoff, since
 * shared file systems do not deliver change notifications across nodes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "backend.h"
#include "base.h"
#include "net.h"
#include "proto.h"

/* Encoded names longer than this are replaced by the key's hash (NAME_MAX is 255). */
#define NAME_ENCODED_MAX 200
#define NAME_LEN 256
#define POLL_MIN_MS 1
#define POLL_MAX_MS 100
#define LOCK_POLL_MAX_US 5000
#define SHOWN_KEYS 8

typedef struct file_store {
	herd__store_backend base;
	char where[PATH_MAX + 16];   /* "file store DIR", for messages */
	int dirfd;
} file_store;

/* ---- names and files ------------------------------------------------------ */

static void key_name(const char *key, char name[NAME_LEN])
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 2, n = strlen(key);

	memcpy(name, "k-", 2);
	for (size_t i = 0; i < n && o <= NAME_ENCODED_MAX; i++) {
		unsigned char c = (unsigned char)key[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-') {
			name[o++] = (char)c;
		} else {
			name[o++] = '%';
			name[o++] = hex[c >> 4];
			name[o++] = hex[c & 15];
		}
	}
	if (o <= NAME_ENCODED_MAX) {
		name[o] = '\0';
		return;
	}
	{
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int mdlen = 0;

		memcpy(name, "h-", 2);
		o = 2;
		if (EVP_Digest(key, n, md, &mdlen, EVP_sha256(), NULL) != 1)
			mdlen = 0; /* cannot happen; "h-" alone is still a name inside dir */
		for (unsigned int i = 0; i < mdlen; i++) {
			name[o++] = hex[md[i] >> 4];
			name[o++] = hex[md[i] & 15];
		}
		name[o] = '\0';
	}
}

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Sleeps for the backoff (or until deadline) and doubles the backoff. */
static void backoff(int *ms, int64_t deadline)
{
	int left = herd__net_remaining_ms(deadline);

	nap_ms(*ms < left ? *ms : left);
	*ms = *ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : *ms * 2;
}

/*
 * Reads the value file name: *value (malloc'd, NUL-terminated) and *len, or
 * *value NULL when the key does not exist.
 */
static herd_status read_value(file_store *s, const char *name, void **value, size_t *len)
{
	herd_status st = HERD_OK;
	struct stat sb;
	char *buf = NULL;
	size_t got = 0;
	int fd;

	*value = NULL;
	*len = 0;
	fd = openat(s->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return HERD_OK;
		return herd__error_errno(HERD_EIO, errno, "%s: cannot open %s", s->where, name);
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > HERD_STORE_VALUE_MAX) {
		st = herd__error(HERD_EFORMAT, "%s: %s is not a value file of at most %u bytes",
				 s->where, name, HERD_STORE_VALUE_MAX);
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (buf == NULL) {
		st = herd__error(HERD_ENOMEM, "%s: out of memory reading %s", s->where, name);
		goto out;
	}
	/* Value files are never changed in place, so the size holds. */
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			st = herd__error_errno(HERD_EIO, n < 0 ? errno : EIO, "%s: cannot read %s",
					       s->where, name);
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*value = buf;
	*len = got;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return st;
}

/* Replaces the value file name with len bytes: a temporary file, then rename. */
static herd_status write_value(file_store *s, const char *name, const void *value, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t rnd[8];
	char tmp[32];
	const char *p = value;
	herd_status st = HERD_OK;
	int fd;

	HERD_CHECK(herd__auth_random(rnd, sizeof(rnd)));
	memcpy(tmp, "t-", 2);
	for (size_t i = 0; i < sizeof(rnd); i++) {
		tmp[2 + 2 * i] = hex[rnd[i] >> 4];
		tmp[3 + 2 * i] = hex[rnd[i] & 15];
	}
	tmp[2 + 2 * sizeof(rnd)] = '\0';
	fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return herd__error_errno(HERD_EIO, errno, "%s: cannot create %s", s->where, tmp);
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st = herd__error_errno(HERD_EIO, errno, "%s: cannot write %s", s->where, tmp);
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	/* close reports what NFS could not write back. */
	if (close(fd) != 0 && st == HERD_OK)
		st = herd__error_errno(HERD_EIO, errno, "%s: cannot write %s", s->where, tmp);
	if (st == HERD_OK && renameat(s->dirfd, tmp, s->dirfd, name) != 0)
		st = herd__error_errno(HERD_EIO, errno, "%s: cannot rename %s to %s", s->where, tmp,
				       name);
	if (st != HERD_OK)
		unlinkat(s->dirfd, tmp, 0);
	return st;
}

/* write_value for key, whose file is name: a hashed name gets its key
 * written beside it first (n-<hash>), so that a listing can name it. */
static herd_status write_keyed(file_store *s, const char *key, const char *name,
			       const void *value, size_t len)
{
	if (name[0] == 'h') {
		char kname[NAME_LEN];

		memcpy(kname, name, NAME_LEN);
		kname[0] = 'n';
		HERD_CHECK(write_value(s, kname, key, strlen(key)));
	}
	return write_value(s, name, value, len);
}

/* Takes the directory's lock before deadline; *fd is closed to release it. */
static herd_status lock_dir(file_store *s, int timeout_ms, const char *what, int *fd)
{
	int64_t deadline = herd__net_deadline(timeout_ms);
	long wait_us = 100;

	*fd = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return herd__error_errno(HERD_EIO, errno, "%s: cannot open its lock file",
					 s->where);
	for (;;) {
		struct timespec ts;

		if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
			return HERD_OK;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			herd_status st = herd__error_errno(HERD_EIO, errno, "%s: cannot lock its "
							   "lock file", s->where);

			close(*fd);
			*fd = -1;
			return st;
		}
		if (herd__net_now_ms() >= deadline) {
			close(*fd);
			*fd = -1;
			return herd__error(HERD_ETIMEDOUT, "%s: its lock file stayed locked by "
					   "another process for %d ms (%s)", s->where, timeout_ms,
					   what);
		}
		ts.tv_sec = 0;
		ts.tv_nsec = wait_us * 1000;
		nanosleep(&ts, NULL);
		wait_us = wait_us * 2 > LOCK_POLL_MAX_US ? LOCK_POLL_MAX_US : wait_us * 2;
	}
}

static void unlock_dir(int fd)
{
	close(fd);
}

static void describe(char *what, size_t cap, const char *op, const char *key)
{
	char q[200];

	herd__store_quote(q, sizeof(q), key, strlen(key));
	snprintf(what, cap, "%s of key %s", op, q);
}

/* ---- operations ---------------------------------------------------------- */

static herd_status file_set(herd__store_backend *b, const char *key, const void *value,
			    size_t len, int timeout_ms)
{
	file_store *s = (file_store *)b;
	char name[NAME_LEN], what[256];
	herd_status st;
	int lock;

	key_name(key, name);
	describe(what, sizeof(what), "set", key);
	HERD_CHECK(lock_dir(s, timeout_ms, what, &lock));
	st = write_keyed(s, key, name, value, len);
	unlock_dir(lock);
	return st;
}

static herd_status file_get(herd__store_backend *b, const char *key, int timeout_ms,
			    void **value, size_t *len)
{
	file_store *s = (file_store *)b;
	int64_t deadline = herd__net_deadline(timeout_ms);
	char name[NAME_LEN];
	int pause = POLL_MIN_MS;

	key_name(key, name);
	for (;;) {
		HERD_CHECK(read_value(s, name, value, len));
		if (*value != NULL)
			return HERD_OK;
		if (herd__net_now_ms() >= deadline) {
			herd__store_bytes k = { (const uint8_t *)key, strlen(key) };

			return herd__store_missing_error(s->where, timeout_ms, 1, 1, &k, 1);
		}
		backoff(&pause, deadline);
	}
}

static herd_status file_add(herd__store_backend *b, const char *key, int64_t delta,
			    int64_t *result, int timeout_ms)
{
	file_store *s = (file_store *)b;
	char name[NAME_LEN], what[256], text[HERD__STORE_COUNTER_LEN];
	void *cur = NULL;
	size_t len;
	herd_status st;
	int lock;

	key_name(key, name);
	describe(what, sizeof(what), "add", key);
	HERD_CHECK(lock_dir(s, timeout_ms, what, &lock));
	HERD_CHECK_GOTO(read_value(s, name, &cur, &len), st, out);
	st = herd__store_counter_add(cur, len, delta, result, text);
	if (st != HERD_OK) {
		herd__error_wrap(st, "%s: %s: ", s->where, what);
		goto out;
	}
	st = write_keyed(s, key, name, text, strlen(text));
out:
	unlock_dir(lock);
	free(cur);
	return st;
}

static herd_status file_compare_set(herd__store_backend *b, const char *key,
				    const void *expected, size_t expected_len,
				    const void *desired, size_t desired_len, bool *swapped,
				    void **current, size_t *current_len, int timeout_ms)
{
	file_store *s = (file_store *)b;
	char name[NAME_LEN], what[256];
	void *cur = NULL;
	size_t len = 0;
	herd_status st;
	int lock, match;

	key_name(key, name);
	describe(what, sizeof(what), "compare_set", key);
	HERD_CHECK(lock_dir(s, timeout_ms, what, &lock));
	HERD_CHECK_GOTO(read_value(s, name, &cur, &len), st, out);
	if (expected == NULL)
		match = cur == NULL;
	else
		match = cur != NULL && len == expected_len &&
			(len == 0 || memcmp(cur, expected, len) == 0);
	if (match) {
		char *copy = malloc(desired_len + 1);

		if (copy == NULL) {
			st = herd__error(HERD_ENOMEM, "out of memory copying a value");
			goto out;
		}
		HERD_CHECK_GOTO(write_keyed(s, key, name, desired, desired_len), st, out);
		if (desired_len > 0)
			memcpy(copy, desired, desired_len);
		copy[desired_len] = '\0';
		free(cur);
		cur = copy;
		len = desired_len;
	}
	*swapped = match;
	*current = cur;
	*current_len = len;
	cur = NULL;
	st = HERD_OK;
out:
	unlock_dir(lock);
	free(cur);
	return st;
}

static herd_status file_del(herd__store_backend *b, const char *key, bool *existed,
			    int timeout_ms)
{
	file_store *s = (file_store *)b;
	char name[NAME_LEN], what[256];
	herd_status st = HERD_OK;
	int lock;

	key_name(key, name);
	describe(what, sizeof(what), "delete", key);
	HERD_CHECK(lock_dir(s, timeout_ms, what, &lock));
	*existed = 1;
	if (unlinkat(s->dirfd, name, 0) != 0) {
		*existed = 0;
		if (errno != ENOENT)
			st = herd__error_errno(HERD_EIO, errno, "%s: cannot remove %s (%s)",
					       s->where, name, what);
	}
	if (st == HERD_OK && name[0] == 'h') {
		name[0] = 'n';
		if (unlinkat(s->dirfd, name, 0) != 0 && errno != ENOENT)
			st = herd__error_errno(HERD_EIO, errno, "%s: cannot remove %s (%s)",
					       s->where, name, what);
	}
	unlock_dir(lock);
	return st;
}

static herd_status file_wait(herd__store_backend *b, const char *const *keys, size_t nkeys,
			     int timeout_ms)
{
	file_store *s = (file_store *)b;
	int64_t deadline = herd__net_deadline(timeout_ms);
	int pause = POLL_MIN_MS;

	for (;;) {
		herd__store_bytes shown[SHOWN_KEYS];
		size_t missing = 0;

		for (size_t i = 0; i < nkeys; i++) {
			char name[NAME_LEN];
			struct stat sb;

			key_name(keys[i], name);
			if (fstatat(s->dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
				continue;
			if (errno != ENOENT)
				return herd__error_errno(HERD_EIO, errno, "%s: cannot stat %s",
							 s->where, name);
			if (missing < SHOWN_KEYS) {
				shown[missing].p = (const uint8_t *)keys[i];
				shown[missing].n = strlen(keys[i]);
			}
			missing++;
		}
		if (missing == 0)
			return HERD_OK;
		if (herd__net_now_ms() >= deadline)
			return herd__store_missing_error(s->where, timeout_ms, nkeys, missing, shown,
							 missing < SHOWN_KEYS ? missing : SHOWN_KEYS);
		backoff(&pause, deadline);
	}
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The key of a k- name (percent-decoded) into key; false when malformed. */
static bool name_key(const char *name, char key[NAME_LEN])
{
	size_t o = 0;

	for (const char *p = name + 2; *p != '\0'; p++) {
		if (*p == '%') {
			int hi = hexval(p[1]), lo = hi >= 0 ? hexval(p[2]) : -1;

			if (lo < 0 || (hi == 0 && lo == 0))
				return false;
			key[o++] = (char)(hi << 4 | lo);
			p += 2;
		} else {
			key[o++] = *p;
		}
	}
	key[o] = '\0';
	return o > 0;
}

/* Lists the directory: k- names decoded, h- names through their n- file. */
static herd_status file_keys(herd__store_backend *b, const char *prefix,
			     herd__store_keylist *list, int timeout_ms)
{
	file_store *s = (file_store *)b;
	size_t plen = strlen(prefix);
	herd_status st = HERD_OK;
	struct dirent *d;
	DIR *dir;
	int fd;

	(void)timeout_ms; /* one read of the directory, as a get */
	fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
		st = herd__error_errno(HERD_EIO, errno, "%s: cannot list the directory", s->where);
		if (fd >= 0)
			close(fd);
		return st;
	}
	while (st == HERD_OK && (errno = 0, d = readdir(dir)) != NULL) {
		char key[NAME_LEN];
		void *long_key = NULL;
		size_t len = 0;

		if (d->d_name[0] == 'k' && d->d_name[1] == '-') {
			if (!name_key(d->d_name, key))
				continue; /* not a name this store writes */
			if (strncmp(key, prefix, plen) == 0)
				st = herd__store_keylist_add(list, key, strlen(key), prefix, s->where);
		} else if (d->d_name[0] == 'h' && d->d_name[1] == '-') {
			char kname[NAME_LEN];

			snprintf(kname, sizeof(kname), "n-%s", d->d_name + 2);
			st = read_value(s, kname, &long_key, &len);
			if (st == HERD_OK && long_key == NULL)
				continue; /* deleted meanwhile */
			if (st == HERD_OK && len >= plen && memcmp(long_key, prefix, plen) == 0)
				st = herd__store_keylist_add(list, long_key, len, prefix, s->where);
			free(long_key);
		}
	}
	if (st == HERD_OK && errno != 0)
		st = herd__error_errno(HERD_EIO, errno, "%s: cannot list the directory", s->where);
	closedir(dir);
	return st;
}

static void file_destroy(herd__store_backend *b)
{
	file_store *s = (file_store *)b;

	if (s->dirfd >= 0)
		close(s->dirfd);
	free(s);
}

static const herd__store_ops file_ops = {
	.set = file_set,
	.get = file_get,
	.add = file_add,
	.compare_set = file_compare_set,
	.del = file_del,
	.wait = file_wait,
	.keys = file_keys,
	.destroy = file_destroy,
};

herd_status herd__store_file_open(herd__store_backend **out, const char *dir,
				  const herd_store_opts *opts)
{
	file_store *s;
	herd_status st;

	(void)opts;
	*out = NULL;
	st = herd__mkdirs(dir, 0700);
	if (st != HERD_OK)
		return herd__error_wrap(st, "file store: ");
	HERD_CHECK(herd__calloc(&s, 1, sizeof(*s), "a file store"));
	s->base.ops = &file_ops;
	snprintf(s->where, sizeof(s->where), "file store %s", dir);
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0) {
		st = herd__error_errno(HERD_EIO, errno, "file store: cannot open directory %s",
				       dir);

		free(s);
		return st;
	}
	*out = &s->base;
	return HERD_OK;
}
