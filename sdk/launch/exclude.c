/*
 * sdk/launch/exclude.c - the excluded nodes (herd/exclude.h): one list for
 * every backend, a file of "HOST<TAB>UNIX_SECONDS<TAB>REASON" lines that
 * herd exclude edits and herd_job_launch reads, and the filter that leaves
 * its nodes out of a job's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "herd/common.h"
#include "herd/hostlist.h"
#include "herd/exclude.h"
#include "launch_internal.h"

/* The most nodes the list holds, and the longest line read. */
#define EXCLUDE_MAX 65536
#define LINE_MAX_ 1024

herd_status herd_exclude_path(char *out, size_t cap)
{
	const char *env = herd__param_str(HERD__P_EXCLUDE_FILE);
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;

	if (out == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "herd_exclude_path: out is NULL");
	if (env != NULL)
		n = snprintf(out, cap, "%s", env);
	else if (state != NULL && state[0] == '/')
		n = snprintf(out, cap, "%s/herd/exclude", state);
	else if (home != NULL && home[0] != '\0')
		n = snprintf(out, cap, "%s/.local/state/herd/exclude", home);
	else
		return herd__error(HERD_EUNAVAIL, "no place for the excluded nodes: set "
				   "HERD_EXCLUDE_FILE (or XDG_STATE_HOME, HOME)");
	if (n < 0 || (size_t)n >= cap)
		return herd__error(HERD_EINVAL, "the excluded nodes' file: too long a name");
	return HERD_OK;
}

/* Parses the open file f (path for messages) into *out, *n. */
static herd_status parse(FILE *f, const char *path, herd_exclude_entry **out, size_t *n)
{
	char line[LINE_MAX_ + 2];
	size_t cap = 0;
	long lineno = 0;

	*out = NULL;
	*n = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *host = line, *since, *reason, *end;
		herd_exclude_entry *e;

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f))
			return herd__error(HERD_EFORMAT, "%s:%ld: a line over %d bytes", path, lineno,
					   LINE_MAX_);
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		since = strchr(host, '\t');
		reason = since != NULL ? strchr(since + 1, '\t') : NULL;
		if (since == NULL || reason == NULL)
			return herd__error(HERD_EFORMAT, "%s:%ld: expected HOST<TAB>SECONDS<TAB>REASON",
					   path, lineno);
		*since++ = '\0';
		*reason++ = '\0';
		if (host[0] == '\0' || strlen(host) >= sizeof(e->host))
			return herd__error(HERD_EFORMAT, "%s:%ld: no host, or one over %zu bytes", path,
					   lineno, sizeof(e->host) - 1);
		if (*n == EXCLUDE_MAX)
			return herd__error(HERD_EFORMAT, "%s: over %d nodes", path, EXCLUDE_MAX);
		if (*n == cap) {
			herd_exclude_entry *grown = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof(**out));

			if (grown == NULL)
				return herd__error(HERD_ENOMEM, "out of memory reading %s", path);
			*out = grown;
		}
		e = &(*out)[(*n)++];
		memset(e, 0, sizeof(*e));
		herd__strlcpy(e->host, host, sizeof(e->host));
		e->since = strtod(since, &end);
		if (end == since || *end != '\0')
			return herd__error(HERD_EFORMAT, "%s:%ld: '%s' is not a time in seconds", path,
					   lineno, since);
		herd__strlcpy(e->reason, reason, sizeof(e->reason));
	}
	if (ferror(f))
		return herd__error_errno(HERD_EIO, errno, "reading %s", path);
	return HERD_OK;
}

/* The list from path; a missing file is an empty list.  A link to the
 * list is followed; what is not a regular file (a FIFO that would block)
 * is refused. */
static herd_status load(const char *path, herd_exclude_entry **out, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat sb;
	FILE *f;
	herd_status st;

	*out = NULL;
	*n = 0;
	if (fd < 0)
		return errno == ENOENT ? HERD_OK
				       : herd__error_errno(HERD_EIO, errno, "cannot read %s", path);
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return herd__error(HERD_EINVAL, "%s: not a regular file (a FIFO, a device or a "
				   "directory); the excluded nodes' list must be one", path);
	}
	f = fdopen(fd, "r");
	if (f == NULL) {
		close(fd);
		return herd__error_errno(HERD_EIO, errno, "cannot read %s", path);
	}
	st = parse(f, path, out, n);
	fclose(f);
	if (st != HERD_OK) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return st;
}

herd_status herd_exclude_list(herd_exclude_entry **out, size_t *n)
{
	char path[4096];

	if (out == NULL || n == NULL)
		return herd__error(HERD_EINVAL, "herd_exclude_list: out or n is NULL");
	*out = NULL;
	*n = 0;
	HERD_CHECK(herd_exclude_path(path, sizeof(path)));
	return load(path, out, n);
}

/* Writes the list to path, whole, by rename. */
static herd_status save(const char *path, const herd_exclude_entry *v, size_t n)
{
	herd__buf b;
	herd_status st = HERD_OK;

	herd__buf_init(&b, 0);
	for (size_t i = 0; i < n && st == HERD_OK; i++) {
		char line[LINE_MAX_ + 1];
		int len = snprintf(line, sizeof(line), "%s\t%.0f\t%s\n", v[i].host, v[i].since,
				   v[i].reason);

		st = herd__buf_append(&b, line, len < (int)sizeof(line) ? (size_t)len : sizeof(line) - 1);
	}
	if (st == HERD_OK)
		st = herd__write_file_atomic(path, b.data != NULL ? (const char *)b.data : "", b.len,
					     0600);
	herd__buf_free(&b);
	return st;
}

/*
 * Edits the list under its lock: each node of hosts added (with reason)
 * or removed; *changed counts those that were not / were there.
 */
static herd_status edit(const char *hosts, bool add, const char *reason, size_t *changed)
{
	char path[4096], lock[4200];
	char **names = NULL;
	size_t nnames = 0, n = 0, count = 0;
	herd_exclude_entry *v = NULL;
	herd_status st;
	int fd;

	if (changed != NULL)
		*changed = 0;
	HERD_CHECK(herd_exclude_path(path, sizeof(path)));
	HERD_CHECK(herd_hostlist_expand(hosts, &names, &nnames));
	{
		char dir[4096], *slash;

		herd__strlcpy(dir, path, sizeof(dir));
		slash = strrchr(dir, '/');
		if (slash != NULL && slash != dir) {
			*slash = '\0';
			if ((st = herd__mkdirs(dir, 0700)) != HERD_OK) {
				herd_free(names);
				return st;
			}
		}
	}
	snprintf(lock, sizeof(lock), "%s.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		st = herd__error_errno(HERD_EIO, errno, "cannot lock %s", lock);
		if (fd >= 0)
			close(fd);
		herd_free(names);
		return st;
	}
	st = load(path, &v, &n);
	for (size_t k = 0; st == HERD_OK && k < nnames; k++) {
		size_t i;

		for (i = 0; i < n && strcmp(v[i].host, names[k]) != 0; i++)
			;
		if (add && i == n) {
			herd_exclude_entry *grown;
			struct timespec now;

			if (n == EXCLUDE_MAX) {
				st = herd__error(HERD_EINVAL, "the list would hold over %d nodes",
						 EXCLUDE_MAX);
				break;
			}
			grown = realloc(v, (n + 1) * sizeof(*v));
			if (grown == NULL) {
				st = herd__error(HERD_ENOMEM, "out of memory");
				break;
			}
			v = grown;
			memset(&v[n], 0, sizeof(v[n]));
			herd__strlcpy(v[n].host, names[k], sizeof(v[n].host));
			clock_gettime(CLOCK_REALTIME, &now);
			v[n].since = (double)now.tv_sec;
			/* A reason is one line of the file. */
			herd__strlcpy(v[n].reason, reason != NULL ? reason : "", sizeof(v[n].reason));
			for (char *c = v[n].reason; *c != '\0'; c++)
				if (*c == '\n' || *c == '\t' || *c == '\r')
					*c = ' ';
			n++;
			count++;
		} else if (!add && i < n) {
			memmove(&v[i], &v[i + 1], (n - i - 1) * sizeof(*v));
			n--;
			count++;
		}
	}
	if (st == HERD_OK && count > 0)
		st = save(path, v, n);
	if (st == HERD_OK && changed != NULL)
		*changed = count;
	free(v);
	herd_free(names);
	close(fd);
	return st;
}

herd_status herd_exclude_add(const char *hosts, const char *reason, size_t *added)
{
	if (hosts == NULL)
		return herd__error(HERD_EINVAL, "herd_exclude_add: hosts is NULL");
	return edit(hosts, true, reason, added);
}

herd_status herd_exclude_remove(const char *hosts, size_t *removed)
{
	if (hosts == NULL)
		return herd__error(HERD_EINVAL, "herd_exclude_remove: hosts is NULL");
	return edit(hosts, false, NULL, removed);
}

herd_status herd__exclude_filter(herd__launch_node **nodes, size_t *nnodes, const char *extra,
				 char *said, size_t cap)
{
	herd_exclude_entry *v = NULL;
	char **names = NULL;
	size_t n = 0, nnames = 0, kept = 0, o = 0;
	herd_status st;

	said[0] = '\0';
	st = herd_exclude_list(&v, &n);
	if (st == HERD_EUNAVAIL) {
		st = HERD_OK;
		n = 0;
	}
	HERD_CHECK(st);
	if (extra != NULL && extra[0] != '\0' &&
	    (st = herd_hostlist_expand(extra, &names, &nnames)) != HERD_OK) {
		free(v);
		return herd__error_wrap(st, "the nodes to exclude: ");
	}
	for (size_t i = 0; i < *nnodes; i++) {
		herd__launch_node *node = &(*nodes)[i];
		const char *why = NULL;

		for (size_t k = 0; k < nnames && why == NULL; k++)
			if (strcmp(names[k], node->host) == 0)
				why = "excluded for this job";
		for (size_t k = 0; k < n && why == NULL; k++)
			if (strcmp(v[k].host, node->host) == 0)
				why = v[k].reason[0] != '\0' ? v[k].reason : "excluded";
		if (why == NULL) {
			(*nodes)[kept++] = *node;
			continue;
		}
		if (o < cap)
			o += (size_t)snprintf(said + o, cap - o, "%s%s (%s)", o ? ", " : "", node->host,
					      why);
		free(node->host);
		free(node->ranks);
	}
	*nnodes = kept;
	free(v);
	herd_free(names);
	return HERD_OK;
}
