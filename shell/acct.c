/*
 * shell/acct.c - the accounting log: one JSON line per job that herd
 * launch or herd.launch ran, appended when the job ends, and the reading
 * of it that herd acct lists (shell/cmd_acct.c).
 *
 * The log is $HERD_ACCT_LOG, else ${XDG_STATE_HOME:-$HOME/.local/state}/
 * herd/acct.jsonl; HERD_ACCT_LOG set but empty keeps none.  Its directory
 * is made (mode 0700) when missing, the file (mode 0600) too.  A record is
 * appended with one write(2) while the writer holds flock(LOCK_EX) on the
 * file, so that launchers ending at once never mix their lines; a write
 * that falls short is cut off again (ftruncate to the size before it), so
 * a full disk leaves no torn line.  The log must be the user's own: a
 * file owned by someone else, one that group or others may write, or one
 * that is not a regular file is not written, with a warning; the job's
 * exit status never depends on the log.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

/* The command kept in a record: at most this many arguments and bytes. */
#define ACCT_ARGS_MAX 64
#define ACCT_ARG_BYTES_MAX 4096
/* How long a writer waits for another's lock before it gives up. */
#define ACCT_LOCK_WAIT_MS 5000

char *shell_acct_path(void)
{
	const char *env = herd_env_get("HERD_ACCT_LOG");
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char *path = NULL;
	int n;

	if (env != NULL)
		return env[0] != '\0' ? strdup(env) : NULL;
	if (state != NULL && state[0] == '/')
		n = asprintf(&path, "%s/herd/acct.jsonl", state);
	else if (home != NULL && home[0] != '\0')
		n = asprintf(&path, "%s/.local/state/herd/acct.jsonl", home);
	else
		return NULL;
	return n < 0 ? NULL : path;
}

/* mkdir -p of the directories above path, each new one 0700.  0, or an errno. */
static int make_parents(const char *path)
{
	char *dir = strdup(path);
	int err = 0;

	if (dir == NULL)
		return ENOMEM;
	for (char *p = dir + 1; *p != '\0' && err == 0; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			err = errno;
		*p = '/';
	}
	free(dir);
	return err;
}

/* "herd launch: warning: accounting log PATH: what" on stderr. */
static void acct_warn(const char *path, const char *what, const char *why)
{
	fprintf(stderr, "%s: warning: accounting log %s: %s%s%s; this job is not recorded\n",
		shell_command, path, what, why != NULL ? ": " : "", why != NULL ? why : "");
}

/* A JSON string of s even when s is not UTF-8: bytes that are not become '?'. */
static json_t *json_text(const char *s)
{
	json_t *v = json_string(s);
	char *copy;

	if (v != NULL || s == NULL)
		return v != NULL ? v : json_null();
	copy = strdup(s);
	if (copy == NULL)
		return NULL;
	for (char *p = copy; *p != '\0'; p++)
		if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
			*p = '?';
	v = json_string(copy);
	free(copy);
	return v;
}

/* The job's hosts in rank order, compressed as scontrol writes them. */
static json_t *job_hosts(const herd_job *job)
{
	int n = herd_job_size(job);
	const char **names = calloc((size_t)(n > 0 ? n : 1), sizeof(*names));
	size_t k = 0;
	char *expr = NULL;
	json_t *v;

	if (names == NULL)
		return NULL;
	for (int i = 0; i < n; i++) {
		herd_job_rank_status r;
		bool seen = false;

		if (herd_job_rank(job, i, &r) != HERD_OK || r.host == NULL)
			continue;
		for (size_t j = 0; j < k && !seen; j++)
			seen = strcmp(names[j], r.host) == 0;
		if (!seen)
			names[k++] = r.host;
	}
	v = k > 0 && herd_hostlist_compress(names, k, &expr) == HERD_OK ? json_text(expr)
									 : json_string("");
	herd_free(expr);
	free(names);
	return v;
}

/* The command, bounded: ACCT_ARGS_MAX arguments of ACCT_ARG_BYTES_MAX bytes in all. */
static json_t *job_command(int argc, const char *const *argv, int *cut)
{
	json_t *a = json_array();
	size_t bytes = 0;

	*cut = 0;
	for (int i = 0; a != NULL && i < argc; i++) {
		size_t len = strlen(argv[i]);

		if (i >= ACCT_ARGS_MAX || bytes + len > ACCT_ARG_BYTES_MAX) {
			*cut = argc - i;
			break;
		}
		bytes += len;
		json_array_append_new(a, json_text(argv[i]));
	}
	return a;
}

/* Seconds rounded to milliseconds, as the log keeps times. */
static json_t *json_ms(double s)
{
	return json_real(round(s * 1000.0) / 1000.0);
}

/* GPU-hours rounded to a nanohour (3.6 us of one GPU). */
static json_t *json_hours(double h)
{
	return json_real(round(h * 1e9) / 1e9);
}

/* The record of j as one line of JSON with its newline (malloc), or NULL. */
static char *acct_line(const shell_acct_job *j)
{
	const herd_job *job = j->job;
	struct passwd pw, *res = NULL;
	char pwbuf[4096], *text, *line;
	int cut;
	json_t *doc;
	size_t len;

	if (getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) != 0)
		res = NULL;
	doc = json_object();
	if (doc == NULL)
		return NULL;
	json_object_set_new(doc, "v", json_integer(SHELL_ACCT_VERSION));
	json_object_set_new(doc, "job_id", json_text(herd_job_id(job)));
	json_object_set_new(doc, "user", res != NULL ? json_text(res->pw_name) : json_null());
	json_object_set_new(doc, "uid", json_integer((json_int_t)getuid()));
	json_object_set_new(doc, "argv", job_command(j->argc, j->argv, &cut));
	if (cut > 0)
		json_object_set_new(doc, "argv_cut", json_integer(cut));
	json_object_set_new(doc, "hosts", job_hosts(job));
	json_object_set_new(doc, "ranks", json_integer(herd_job_size(job)));
	json_object_set_new(doc, "gpus", json_integer(j->gpus));
	json_object_set_new(doc, "start", json_ms(j->start));
	json_object_set_new(doc, "end", json_ms(j->start + j->elapsed));
	json_object_set_new(doc, "elapsed", json_ms(j->elapsed));
	json_object_set_new(doc, "state", json_string(herd_job_state_name(herd_job_get_state(job))));
	json_object_set_new(doc, "exit_status", json_integer(j->exit_status));
	json_object_set_new(doc, "restarts", json_integer(herd_job_restart_count(job)));
	json_object_set_new(doc, "gpu_hours_held", json_hours(j->gpus * j->elapsed / 3600.0));
	json_object_set_new(doc, "gpu_hours_used",
			    isnan(j->gpu_hours_used) ? json_null() : json_hours(j->gpu_hours_used));
	text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	json_decref(doc);
	if (text == NULL)
		return NULL;
	len = strlen(text);
	line = malloc(len + 2);
	if (line != NULL) {
		memcpy(line, text, len);
		line[len] = '\n';
		line[len + 1] = '\0';
	}
	free(text);
	return line;
}

/* flock(LOCK_EX) within ACCT_LOCK_WAIT_MS.  0, or an errno. */
static int lock_within(int fd)
{
	struct timespec pause = { 0, 2 * 1000 * 1000 };

	for (int waited = 0;; waited += 2) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return errno;
		if (waited >= ACCT_LOCK_WAIT_MS)
			return ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
}

/* Appends line to the log at path as the top of the file says.  0, or -1 (warned). */
static int append_line(const char *path, const char *line)
{
	size_t len = strlen(line);
	struct stat sb;
	ssize_t n;
	int fd, err;

	err = make_parents(path);
	if (err != 0) {
		acct_warn(path, "cannot make its directory", strerror(err));
		return -1;
	}
	/* A FIFO or a device there is said as what it is (and O_NONBLOCK:
	 * one put there after this look must not hold the launcher in open). */
	if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		acct_warn(path, "not a regular file", NULL);
		return -1;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		acct_warn(path, "cannot open it", strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		acct_warn(path, "not a regular file", NULL);
		goto fail;
	}
	if (sb.st_uid != getuid()) {
		acct_warn(path, "owned by another user (uid differs), not written", NULL);
		goto fail;
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		char msg[96];

		snprintf(msg, sizeof(msg), "group or others may write it (mode %04o; chmod 600 it)",
			 (unsigned)(sb.st_mode & 07777));
		acct_warn(path, msg, NULL);
		goto fail;
	}
	err = lock_within(fd);
	if (err != 0) {
		acct_warn(path, "cannot lock it", err == ETIMEDOUT ? "another writer held it for 5 s"
								   : strerror(err));
		goto fail;
	}
	/* The size under the lock: where a short write is cut back to. */
	if (fstat(fd, &sb) != 0) {
		acct_warn(path, "cannot read its size", strerror(errno));
		goto fail;
	}
	n = write(fd, line, len);
	if (n != (ssize_t)len) {
		err = n < 0 ? errno : ENOSPC;
		if (n > 0 && ftruncate(fd, sb.st_size) != 0)
			acct_warn(path, "a record was cut short and could not be taken back",
				  strerror(errno));
		else
			acct_warn(path, "cannot write it", strerror(err));
		goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	return -1;
}

int shell_acct_append(const shell_acct_job *j)
{
	char *path = shell_acct_path(), *line;
	int rc;

	if (path == NULL)
		return 0;
	line = acct_line(j);
	if (line == NULL) {
		acct_warn(path, "out of memory building the record", NULL);
		free(path);
		return -1;
	}
	rc = append_line(path, line);
	free(line);
	free(path);
	return rc;
}

double shell_wall_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double shell_mono_time(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
