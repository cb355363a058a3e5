/*
 * sdk/ckpt/aside.c - committed steps that do not verify, moved aside.
 *
 * A restore that passes over a damaged step, and a save that needs the
 * number of one, move it out of the way instead of stopping the job: the
 * step directory is renamed to step-N.damaged-TIME, which no reader takes
 * for a step (it is not a step's canonical name) and which herd never
 * removes (neither the sweep at open nor retention looks at it), so the
 * bytes stay for a person to inspect.  Only the writer of a directory
 * (rank 0, holding DIR/.lock) renames, so no two ranks or jobs rename the
 * same step; a reader that has the step open keeps reading it under its
 * new name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "handle.h"

/* Writes why, one line, as the note inside the step moved to `to`. */
static void write_note(const char *to, const char *why)
{
	char path[4200];
	size_t len = strlen(why);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", to, HERD__CKPT_DAMAGED_NOTE);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, why, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
	    fsync(fd) != 0)
		herd__log_warn("%s: cannot write why the step was moved aside: %s", path,
			       strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* `latest` named the step moved aside: it names the newest step left,
 * or nothing. */
static void repoint_latest(const char *dir, const char *moved)
{
	char path[4096], text[80], want[80];
	int64_t *steps = NULL;
	size_t n = 0;
	ssize_t got;
	int fd;

	if (herd__ckpt_path(path, sizeof(path), dir, HERD__CKPT_LATEST) != HERD_OK)
		return;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[got > 0 ? got : 0] = '\0';
	snprintf(want, sizeof(want), "%s\n", moved);
	if (strcmp(text, want) != 0)
		return;
	if (herd__ckpt_committed_steps(dir, &steps, &n) == HERD_OK && n > 0) {
		herd__ckpt_step_name(want, sizeof(want) - 1, steps[n - 1]);
		strcat(want, "\n");
		if (herd__write_file_atomic(path, want, strlen(want), 0600) != HERD_OK) {
			herd__log_warn("%s names %s, which was moved aside, and cannot be replaced "
				       "(%s): removing it", path, moved, herd_last_error());
			unlink(path);
		}
	} else if (unlink(path) != 0 && errno != ENOENT) {
		herd__log_warn("cannot remove %s, which names %s, moved aside: %s", path, moved,
			       strerror(errno));
	}
	free(steps);
}

herd_status herd__ckpt_move_aside(const char *dir, int64_t step, const char *why, char *aside,
				  size_t cap)
{
	char name[64], base[128], from[4096], to[4096];
	time_t now = time(NULL);
	herd_status st = HERD_EEXIST;
	struct tm tm;

	herd__ckpt_step_name(name, sizeof(name), step);
	HERD_CHECK(herd__ckpt_path(from, sizeof(from), dir, name));
	if (gmtime_r(&now, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	snprintf(base, sizeof(base), "%s%s%04d%02d%02dT%02d%02d%02dZ", name,
		 HERD__CKPT_DAMAGED_TAG, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec);
	/* A name taken (the step damaged twice within a second): the next. */
	for (int k = 1; k <= 1000 && st == HERD_EEXIST; k++) {
		int n = k == 1 ? snprintf(to, sizeof(to), "%s/%s", dir, base)
			       : snprintf(to, sizeof(to), "%s/%s-%d", dir, base, k);

		if (n < 0 || (size_t)n >= sizeof(to))
			return herd__error(HERD_EINVAL, "path too long: %s/%s", dir, base);
		st = herd__ckpt_rename_noreplace(from, to);
	}
	if (st != HERD_OK)
		return herd__error_wrap(st, "cannot move the damaged checkpoint step %" PRId64
					" aside: ", step);
	herd__strlcpy(aside, to, cap);
	write_note(to, why);
	if (herd__fsync_dir(dir) != HERD_OK)
		herd__log_warn("%s was moved aside to %s, but the move may not be durable yet: %s",
			       from, to, herd_last_error());
	repoint_latest(dir, name);
	return HERD_OK;
}

void herd__ckpt_aside_note(const char *dir, int64_t step, char *buf, size_t cap)
{
	char newest[256] = "";
	struct timespec when = { 0, 0 };
	size_t count = 0;
	struct dirent *e;
	DIR *d;

	buf[0] = '\0';
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct stat sb;
		int64_t s;

		if (!herd__ckpt_parse_damaged(e->d_name, &s) || s != step ||
		    fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(sb.st_mode) || strlen(e->d_name) >= sizeof(newest))
			continue;
		count++;
		/* The rename that moved it set its change time. */
		if (newest[0] == '\0' || sb.st_ctim.tv_sec > when.tv_sec ||
		    (sb.st_ctim.tv_sec == when.tv_sec &&
		     (sb.st_ctim.tv_nsec > when.tv_nsec ||
		      (sb.st_ctim.tv_nsec == when.tv_nsec && strcmp(e->d_name, newest) > 0)))) {
			when = sb.st_ctim;
			herd__strlcpy(newest, e->d_name, sizeof(newest));
		}
	}
	closedir(d);
	if (count == 1)
		snprintf(buf, cap, "; a step of that number that did not verify was moved "
			 "aside as %s/%s", dir, newest);
	else if (count > 1)
		snprintf(buf, cap, "; a step of that number that did not verify was moved "
			 "aside %zu times, the last as %s/%s", count, dir, newest);
}
