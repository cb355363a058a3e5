/*
 * sdk/base/file.c - memory and file helpers that raise herd errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

void herd_free(void *ptr)
{
	free(ptr);
}

herd_status herd__calloc(void *out_ptr, size_t n, size_t size, const char *what)
{
	void *p;

	if (n == 0 || size == 0) {
		*(void **)out_ptr = NULL;
		return HERD_OK;
	}
	p = calloc(n, size);
	if (p == NULL)
		return herd__error(HERD_ENOMEM, "out of memory allocating %zu x %zu bytes for %s",
				   n, size, what);
	*(void **)out_ptr = p;
	return HERD_OK;
}

herd_status herd__strdup(char **out, const char *s)
{
	*out = NULL;
	if (s == NULL)
		return HERD_OK;
	*out = strdup(s);
	if (*out == NULL)
		return herd__error(HERD_ENOMEM, "out of memory copying a string of %zu bytes",
				   strlen(s));
	return HERD_OK;
}

void herd__strlcpy(char *dst, const char *src, size_t cap)
{
	size_t n;

	if (cap == 0)
		return;
	n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

const char *herd__file_kind(unsigned int mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFSOCK: return "a socket";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

herd_status herd__read_file(const char *path, size_t max_len, char **out, size_t *len)
{
	herd_status st = HERD_OK;
	struct stat sb;
	char *buf = NULL;
	size_t cap, got = 0;
	int fd;

	*out = NULL;
	*len = 0;
	/* O_NONBLOCK: opening a FIFO or a device must not wait for a writer. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "cannot open %s", path);
	if (fstat(fd, &sb) != 0) {
		st = herd__error_errno(HERD_EIO, errno, "cannot stat %s", path);
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = herd__error(HERD_EIO, "%s is %s, not a regular file", path,
				 herd__file_kind(sb.st_mode));
		goto out;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	/* Regular files report their size; pipes and /proc files do not. */
	cap = (S_ISREG(sb.st_mode) && sb.st_size > 0) ? (size_t)sb.st_size : 4096;
	if (cap > max_len + 1)
		cap = max_len + 1;
	buf = malloc(cap + 1);
	if (buf == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory reading %s", path);
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (got == cap) {
			size_t bigger = cap * 2 > max_len + 1 ? max_len + 1 : cap * 2;
			char *p = bigger > cap ? realloc(buf, bigger + 1) : NULL;

			if (p == NULL) {
				st = herd__error(HERD_ENOMEM, "out of memory reading %s", path);
				goto out;
			}
			buf = p;
			cap = bigger;
		}
		n = read(fd, buf + got, cap - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			st = herd__error_errno(HERD_EIO, errno, "cannot read %s", path);
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > max_len) {
			st = herd__error(HERD_EFORMAT, "%s is larger than the limit of %zu bytes",
					 path, max_len);
			goto out;
		}
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return st;
}

static herd_status write_all(int fd, const void *data, size_t len, const char *path)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		/* a regular file that takes no byte of a non-empty write is full */
		if (n <= 0)
			return herd__error_errno(HERD_EIO, n < 0 ? errno : ENOSPC, "cannot write %s",
						 path);
		p += n;
		len -= (size_t)n;
	}
	return HERD_OK;
}

static herd_status fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		herd__strlcpy(dir, ".", sizeof(dir));
	else if (slash == path)
		herd__strlcpy(dir, "/", sizeof(dir));
	else
		herd__strlcpy(dir, path, (size_t)(slash - path) + 1 < sizeof(dir)
						 ? (size_t)(slash - path) + 1 : sizeof(dir));
	return herd__fsync_dir(dir);
}

herd_status herd__mkdirs(const char *dir, mode_t mode)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);
	struct stat sb;

	if (n == 0 || n >= sizeof(path))
		return herd__error(HERD_EINVAL, "directory \"%.64s\": empty or too long", dir);
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, mode) != 0 && errno != EEXIST)
			return herd__error_errno(HERD_EIO, errno, "cannot create directory %s", path);
		path[i] = dir[i];
	}
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return herd__error(HERD_EIO, "%s is not a directory", dir);
	return HERD_OK;
}

herd_status herd__fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return herd__error_errno(HERD_EIO, errno, "cannot open directory %s", dir);
	/* EINVAL: a file system that cannot sync directories (nothing to do) */
	if (fsync(fd) != 0 && errno != EINVAL) {
		int err = errno;

		close(fd);
		return herd__error_errno(HERD_EIO, err, "cannot fsync directory %s", dir);
	}
	close(fd);
	return HERD_OK;
}

herd_status herd__check_replaceable(const char *path)
{
	struct stat sb;

	if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode))
		return HERD_OK;
	return herd__error(HERD_EINVAL, "%s exists and is %s: a new file replaces only a "
			   "regular file (remove it first, or name another path)", path,
			   herd__file_kind(sb.st_mode));
}

/* The write by rename of both below; durable: the file and its
 * directory synced. */
static herd_status write_by_rename(const char *path, const void *data, size_t len, mode_t mode,
				   bool durable)
{
	char tmp[PATH_MAX];
	herd_status st;
	int fd, n;

	HERD_CHECK(herd__check_replaceable(path));
	/* A name of this process's; one a crashed process of the same pid
	 * left (pid 1 in a container) is passed over, never written. */
	fd = -1;
	errno = EEXIST;
	for (int k = 0; k < 100 && fd < 0 && errno == EEXIST; k++) {
		n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%d", path, (long)getpid(), k);
		if (n < 0 || (size_t)n >= sizeof(tmp))
			return herd__error(HERD_EINVAL, "path too long: %s", path);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	}
	if (fd < 0)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "cannot create %s", tmp);
	st = write_all(fd, data, len, tmp);
	if (st == HERD_OK && durable && fsync(fd) != 0)
		st = herd__error_errno(HERD_EIO, errno, "cannot fsync %s", tmp);
	if (close(fd) != 0 && st == HERD_OK)
		st = herd__error_errno(HERD_EIO, errno, "cannot close %s", tmp);
	if (st == HERD_OK && rename(tmp, path) != 0)
		st = herd__error_errno(HERD_EIO, errno, "cannot rename %s to %s", tmp, path);
	if (st != HERD_OK) {
		unlink(tmp);
		return st;
	}
	return durable ? fsync_parent(path) : HERD_OK;
}

herd_status herd__write_file_atomic(const char *path, const void *data, size_t len,
				    mode_t mode)
{
	return write_by_rename(path, data, len, mode, true);
}

herd_status herd__write_file_scratch(const char *path, const void *data, size_t len,
				     mode_t mode)
{
	return write_by_rename(path, data, len, mode, false);
}

herd_status herd__check_job_id(const char *id)
{
	size_t n = id != NULL ? strlen(id) : 0;

	if (n == 0 || n > 63 || strchr(id, '/') != NULL || id[0] == '.')
		return herd__error(HERD_EINVAL, "'%.80s' is not a job id (herd launch prints it: "
				   "job 6b0b9f07-ea5bcbf5; herd jobs lists them)",
				   id != NULL ? id : "");
	return HERD_OK;
}

herd_status herd_file_check(const char *path)
{
	if (path == NULL || path[0] == '\0')
		return herd__error(HERD_EINVAL, "herd_file_check: an empty path");
	return herd__check_replaceable(path);
}

herd_status herd_file_write(const char *path, const void *data, size_t len, unsigned int mode)
{
	if (path == NULL || path[0] == '\0' || (data == NULL && len > 0))
		return herd__error(HERD_EINVAL, "herd_file_write: an empty path, or no data");
	if ((mode & ~07777u) != 0)
		return herd__error(HERD_EINVAL, "herd_file_write: mode %o is not a file mode",
				   mode);
	return herd__write_file_atomic(path, data, len, (mode_t)mode);
}

herd_status herd__read_secret_file(const char *path, char *out, size_t cap)
{
	char *text = NULL;
	size_t len = 0, n;
	herd_status st;

	if (path == NULL || path[0] == '\0')
		return herd__error(HERD_EINVAL, "HERD_JOB_SECRET_FILE is not set: a Kubernetes "
				   "job's secret is read from the file its Secret is mounted as");
	st = herd__read_file(path, 4096, &text, &len);
	if (st != HERD_OK)
		return herd__error_wrap(HERD_EINVAL, "the job's secret (HERD_JOB_SECRET_FILE): ");
	n = strspn(text, "0123456789abcdef");
	if (n != 64 || (len != 64 && !(len == 65 && text[64] == '\n')) || cap < 65) {
		explicit_bzero(text, len);
		free(text);
		return herd__error(HERD_EINVAL, "the job's secret in %s (HERD_JOB_SECRET_FILE): "
				   "expected 64 lower-case hex digits", path);
	}
	memcpy(out, text, 64);
	out[64] = '\0';
	explicit_bzero(text, len);
	free(text);
	return HERD_OK;
}
