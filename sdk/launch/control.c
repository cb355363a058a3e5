/*
 * sdk/launch/control.c - the control socket of a running job: where it
 * listens (one Unix socket per job in a directory of this user's), how a
 * request is served on it, and the client side (herd_jobs_status,
 * herd_jobs_stop; herd/job.h).
 *
 * A request is one line ("status", "stop"; a service's also "scale N",
 * "restart", "restart rolling"), the answer one JSON
 * document and a newline; then the server closes the connection.  Only
 * a peer of the same user is answered (SO_PEERCRED), on top of the
 * directory's and the socket's modes (0700, 0600).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "herd/jobs.h"
#include "launch_internal.h"
#include "net.h"

/* How long a request may take to arrive, and an answer to leave (a local
 * client sends at once and reads at once: these bound one that stalls,
 * which holds up the job's loop that long), and the requests served a
 * turn of that loop. */
#define REQUEST_MS 200
#define ANSWER_MS 500
#define SERVE_MAX 4
/* The most bytes of a request line, and of an answer a client reads. */
#define REQUEST_MAX 64
#define ANSWER_MAX (4u << 20)
#define SOCK_SUFFIX ".sock"

herd_status herd_jobs_dir(char *out, size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat sb;
	int len;

	if (out == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "herd_jobs_dir: out is NULL");
	/* An XDG_RUNTIME_DIR inherited where it does not exist (a Slurm
	 * node's) falls back to /tmp, as it would unset. */
	if (xdg != NULL && xdg[0] == '/' && access(xdg, W_OK | X_OK) == 0)
		len = snprintf(out, cap, "%s/herd/jobs", xdg);
	else
		len = snprintf(out, cap, "/tmp/herd-jobs-%u", (unsigned)getuid());
	if (len < 0 || (size_t)len >= cap)
		return herd__error(HERD_EINVAL, "the jobs' directory: too long a name");
	HERD_CHECK(herd__mkdirs(out, 0700));
	/* Another user's directory, or one others may write into, is not
	 * where this user's jobs are found. */
	if (lstat(out, &sb) != 0)
		return herd__error_errno(HERD_EIO, errno, "%s", out);
	if (!S_ISDIR(sb.st_mode) || sb.st_uid != getuid() || (sb.st_mode & 0077) != 0)
		return herd__error(HERD_EINVAL, "%s: not a directory of this user's alone (mode "
				   "%o, owner %u): the jobs' control sockets are not kept there",
				   out, (unsigned)(sb.st_mode & 07777), (unsigned)sb.st_uid);
	return HERD_OK;
}

/* DIR/ID.sock into addr; HERD_EINVAL when it does not fit. */
static herd_status sock_addr(const char *id, struct sockaddr_un *addr)
{
	char dir[sizeof(addr->sun_path)];
	int len;

	HERD_CHECK(herd_jobs_dir(dir, sizeof(dir)));
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	len = snprintf(addr->sun_path, sizeof(addr->sun_path), "%s/%s" SOCK_SUFFIX, dir, id);
	if (len < 0 || (size_t)len >= sizeof(addr->sun_path))
		return herd__error(HERD_EINVAL, "%s/%s" SOCK_SUFFIX ": too long for a Unix socket",
				   dir, id);
	return HERD_OK;
}

herd_status herd__control_listen(const char *id, int *fd, char *path, size_t cap)
{
	struct sockaddr_un addr, tmp;
	char final[sizeof(addr.sun_path)];
	int s, len;

	*fd = -1;
	path[0] = '\0';
	HERD_CHECK(sock_addr(id, &addr));
	/* Bound and listening under a name herd jobs does not look at, then
	 * renamed into place: a lister never finds it not yet listening. */
	herd__strlcpy(final, addr.sun_path, sizeof(final));
	tmp = addr;
	len = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.new", final);
	if (len < 0 || (size_t)len >= sizeof(tmp.sun_path))
		return herd__error(HERD_EINVAL, "%s.new: too long for a Unix socket", final);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return herd__error_errno(HERD_ESYS, errno, "a control socket");
	/* A job id is new: what has its name is a leftover. */
	unlink(tmp.sun_path);
	if (bind(s, (struct sockaddr *)&tmp, sizeof(tmp)) != 0 ||
	    chmod(tmp.sun_path, 0600) != 0 || listen(s, 16) != 0 ||
	    rename(tmp.sun_path, final) != 0) {
		herd_status st = herd__error_errno(HERD_ESYS, errno, "listening on %s", final);

		close(s);
		unlink(tmp.sun_path);
		return st;
	}
	*fd = s;
	herd__strlcpy(path, final, cap);
	return HERD_OK;
}

/* Writes len bytes to fd by deadline. */
static bool write_by(int fd, const char *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		/* send, not write: a peer gone is EPIPE, never SIGPIPE. */
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);

		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return false;
		if (herd__net_now_ms() >= deadline ||
		    poll(&p, 1, herd__net_remaining_ms(deadline)) < 0)
			return false;
	}
	return true;
}

void herd__control_serve(int lfd, char *(*answer)(void *arg, const char *request), void *arg)
{
	for (int k = 0; k < SERVE_MAX; k++) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		int64_t deadline = herd__net_deadline(REQUEST_MS);
		char req[REQUEST_MAX + 1];
		size_t n = 0;
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		char *reply;

		if (c < 0)
			return;
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
		    cred.uid != getuid()) {
			close(c);
			continue;
		}
		/* One line, by the deadline. */
		while (n < REQUEST_MAX && memchr(req, '\n', n) == NULL) {
			struct pollfd p = { .fd = c, .events = POLLIN };
			ssize_t got = read(c, req + n, REQUEST_MAX - n);

			if (got > 0) {
				n += (size_t)got;
				continue;
			}
			if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
			    herd__net_now_ms() >= deadline ||
			    poll(&p, 1, herd__net_remaining_ms(deadline)) <= 0)
				break;
		}
		req[n] = '\0';
		req[strcspn(req, "\r\n")] = '\0';
		reply = answer(arg, req);
		if (reply != NULL) {
			(void)write_by(c, reply, strlen(reply), herd__net_deadline(ANSWER_MS));
			(void)write_by(c, "\n", 1, herd__net_deadline(ANSWER_MS));
		}
		free(reply);
		close(c);
	}
}

/* ---- the client ---------------------------------------------------------------- */

/* Asks the job at path; *json (malloc) its answer.  HERD_ENOTFOUND when
 * nobody listens there (a launcher that died left it). */
static herd_status ask(const char *path, const char *request, char **json)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int64_t deadline = herd__net_deadline(REQUEST_MS + ANSWER_MS + 1000);
	herd__buf b;
	int s;

	*json = NULL;
	if (strlen(path) >= sizeof(addr.sun_path))
		return herd__error(HERD_EINVAL, "%s: too long for a Unix socket", path);
	memcpy(addr.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return herd__error_errno(HERD_ESYS, errno, "a socket");
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) != 0 && errno != EINPROGRESS &&
	    errno != EAGAIN) {
		herd_status st = errno == ECONNREFUSED || errno == ENOENT
			? herd__error(HERD_ENOTFOUND, "%s: no job answers there", path)
			: herd__error_errno(HERD_ESYS, errno, "connecting to %s", path);

		close(s);
		return st;
	}
	herd__buf_init(&b, ANSWER_MAX);
	if (!write_by(s, request, strlen(request), deadline) || !write_by(s, "\n", 1, deadline)) {
		close(s);
		return herd__error(HERD_ECLOSED, "%s: the job did not take the request", path);
	}
	for (;;) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		ssize_t got;

		if (herd__buf_reserve(&b, 4096) != HERD_OK) {
			close(s);
			herd__buf_free(&b);
			return herd__error(HERD_EFORMAT, "%s: an answer over %u bytes", path,
					   ANSWER_MAX);
		}
		got = read(s, b.data + b.len, b.cap - b.len);
		if (got > 0) {
			b.len += (size_t)got;
			continue;
		}
		if (got == 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			close(s);
			herd__buf_free(&b);
			return herd__error_errno(HERD_ECLOSED, errno, "reading from %s", path);
		}
		if (herd__net_now_ms() >= deadline ||
		    poll(&p, 1, herd__net_remaining_ms(deadline)) < 0) {
			close(s);
			herd__buf_free(&b);
			return herd__error(HERD_ETIMEDOUT, "%s: no answer within %d ms", path,
					   REQUEST_MS + ANSWER_MS + 1000);
		}
	}
	close(s);
	if (b.len == 0) {
		herd__buf_free(&b);
		return herd__error(HERD_ECLOSED, "%s: the job closed the connection", path);
	}
	if (herd__buf_append(&b, "", 1) != HERD_OK) {
		herd__buf_free(&b);
		return HERD_ENOMEM;
	}
	*json = (char *)b.data;
	return HERD_OK;
}

static herd_status ask_job(const char *id, const char *request, json_t **out)
{
	struct sockaddr_un addr;
	json_error_t jerr;
	char *text = NULL;
	herd_status st;

	*out = NULL;
	HERD_CHECK(herd__check_job_id(id));
	HERD_CHECK(sock_addr(id, &addr));
	st = ask(addr.sun_path, request, &text);
	if (st == HERD_ENOTFOUND)
		return herd__error(HERD_ENOTFOUND, "no running job %s of this user here (herd jobs "
				   "lists them)", id);
	HERD_CHECK(st);
	*out = json_loads(text, 0, &jerr);
	free(text);
	if (*out == NULL)
		return herd__error(HERD_EFORMAT, "job %s answered what is not JSON: %s", id,
				   jerr.text);
	if (json_is_object(*out) && json_is_string(json_object_get(*out, "error"))) {
		st = herd__error(HERD_EINVAL, "job %s: %s", id,
				 json_string_value(json_object_get(*out, "error")));
		json_decref(*out);
		*out = NULL;
	}
	return st;
}

herd_status herd_jobs_status(const char *id, char **json)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	json_t *all, *one;
	struct dirent *de;
	herd_status st;
	DIR *d;

	if (json == NULL)
		return herd__error(HERD_EINVAL, "herd_jobs_status: json is NULL");
	*json = NULL;
	if (id != NULL) {
		HERD_CHECK(ask_job(id, "status", &one));
		*json = json_dumps(one, JSON_COMPACT);
		json_decref(one);
		return *json != NULL ? HERD_OK : herd__error(HERD_ENOMEM, "out of memory");
	}
	HERD_CHECK(herd_jobs_dir(dir, sizeof(dir)));
	if ((d = opendir(dir)) == NULL)
		return herd__error_errno(HERD_EIO, errno, "cannot read %s", dir);
	all = json_array();
	for (int k = 0; all != NULL && (de = readdir(d)) != NULL && k < 65536; k++) {
		size_t n = strlen(de->d_name), m = strlen(SOCK_SUFFIX);
		char jid[64];

		if (n <= m || n - m >= sizeof(jid) || strcmp(de->d_name + n - m, SOCK_SUFFIX) != 0)
			continue;
		memcpy(jid, de->d_name, n - m);
		jid[n - m] = '\0';
		st = ask_job(jid, "status", &one);
		if (st == HERD_OK) {
			json_array_append_new(all, one);
		} else if (st == HERD_ENOTFOUND) {
			/* A launcher that died left its socket: nobody answers. */
			char path[sizeof(dir) + 256];

			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
	}
	closedir(d);
	if (all == NULL)
		return herd__error(HERD_ENOMEM, "out of memory");
	*json = json_dumps(all, JSON_COMPACT);
	json_decref(all);
	return *json != NULL ? HERD_OK : herd__error(HERD_ENOMEM, "out of memory");
}

herd_status herd_jobs_scale(const char *id, int n)
{
	char req[32];
	json_t *a = NULL;

	snprintf(req, sizeof(req), "scale %d", n);
	HERD_CHECK(ask_job(id, req, &a));
	json_decref(a);
	return HERD_OK;
}

herd_status herd_jobs_restart(const char *id, bool rolling)
{
	json_t *a = NULL;

	HERD_CHECK(ask_job(id, rolling ? "restart rolling" : "restart", &a));
	json_decref(a);
	return HERD_OK;
}

herd_status herd_jobs_stop(const char *id)
{
	json_t *a = NULL;

	HERD_CHECK(ask_job(id, "stop", &a));
	json_decref(a);
	return HERD_OK;
}
