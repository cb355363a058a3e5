/*
 * sdk/launch/haproxy.c - a service's front door: HAProxy, started in the
 * foreground as this process's child with a configuration herd writes,
 * and driven at run time through its admin socket (the runtime API:
 * `set server`, `show stat`), never reloaded.
 *
 * The backend is a fixed set of server slots (server-template r1..rN),
 * all in maintenance at first; a replica's slot gets its address, and
 * "ready" once herd's own check of it passed (HAProxy takes a server that
 * leaves maintenance as up at once).  Drain: no new request; maint: none.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "haproxy.h"
#include "herd/jobs.h"
#include "launch_internal.h"
#include "net.h"

#define BACKEND "replicas"
#define START_MS 10000
#define CMD_MS 2000
#define STOP_MS 2000
#define CHECK_INTER "500ms"
/* The most bytes of a `show stat` answer (a few hundred a slot). */
#define STATS_MAX (4u << 20)

static const char *program_of(void)
{
	const char *p = herd__param_str(HERD__P_HAPROXY);

	return p != NULL && p[0] != '\0' ? p : "haproxy";
}

herd_status herd__haproxy_check(const char *program, char *ver, size_t cap)
{
	const char *argv[] = { program != NULL ? program : program_of(), "-v", NULL };
	herd__buf out;
	herd_status st;
	int wstatus, major = 0, minor = 0;
	const char *at = NULL;
	char line[160];

	ver[0] = '\0';
	herd__buf_init(&out, 0);
	st = herd__launch_capture("HAProxy", argv, 5000, &out, &wstatus);
	if (st == HERD_ENOTFOUND) {
		herd__buf_free(&out);
		return herd__error(HERD_EUNAVAIL, "HAProxy is not installed here (no \"%s\" in "
				   "PATH): install it (Debian: apt install haproxy), or set "
				   "HERD_HAPROXY to its path", argv[0]);
	}
	if (st == HERD_OK && herd__buf_append(&out, "", 1) != HERD_OK)
		st = herd__error(HERD_ENOMEM, "out of memory reading %s -v", argv[0]);
	if (st != HERD_OK) {
		herd__buf_free(&out);
		return herd__error_wrap(HERD_EUNAVAIL, "HAProxy (%s -v): ", argv[0]);
	}
	/* "HAProxy version 2.6.12-1 ..." (before 2.0: "HA-Proxy version 1.8.19"). */
	at = strstr((const char *)out.data, "roxy version ");
	if (at == NULL || sscanf(at, "roxy version %d.%d", &major, &minor) != 2) {
		snprintf(line, sizeof(line), "%.*s", (int)strcspn((const char *)out.data, "\n"),
			 (const char *)out.data);
		herd__buf_free(&out);
		return herd__error(HERD_EUNAVAIL, "%s -v printed \"%s\", not HAProxy's version: "
				   "is HERD_HAPROXY an HAProxy?", argv[0], line);
	}
	snprintf(ver, cap, "%.*s", (int)strcspn(at + 13, " \n-"), at + 13);
	herd__buf_free(&out);
	if (major < HERD__HAPROXY_MIN_MAJOR ||
	    (major == HERD__HAPROXY_MIN_MAJOR && minor < HERD__HAPROXY_MIN_MINOR))
		return herd__error(HERD_EUNAVAIL, "%s is HAProxy %s; herd needs %d.%d or newer "
				   "(retry-on): install a newer one (Debian 11 and later have "
				   "it), or set HERD_HAPROXY to one", argv[0], ver,
				   HERD__HAPROXY_MIN_MAJOR, HERD__HAPROXY_MIN_MINOR);
	return HERD_OK;
}

static herd_status write_conf(const herd__haproxy *hp, const herd__haproxy_conf *c,
			      const char *path)
{
	bool v6 = strchr(c->bind, ':') != NULL;
	FILE *f;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		if (fd >= 0)
			close(fd);
		return herd__error_errno(HERD_EIO, errno, "cannot write %s", path);
	}
	fprintf(f, "# written by herd serve; driven through the admin socket\n"
		   "global\n"
		   "\tstats socket %s mode 600 level admin\n"
		   "defaults\n"
		   "\tmode http\n"
		   "\ttimeout connect 2s\n"
		   "\ttimeout client 300s\n"
		   "\ttimeout server 300s\n"
		   "\ttimeout http-keep-alive 10s\n"
		   "\ttimeout queue %dms\n"
		   "\ttimeout check 2s\n"
		   "\tretries 3\n"
		   "\toption redispatch 1\n"
		   "\toption http-buffer-request\n"
		   "\tretry-on conn-failure empty-response\n"
		   "frontend door\n"
		   "\tbind %s%s%s:%d\n"
		   "\tdefault_backend " BACKEND "\n"
		   "backend " BACKEND "\n"
		   "\tbalance leastconn\n",
		hp->sock, c->queue_ms, v6 ? "[" : "", c->bind, v6 ? "]" : "", c->port);
	if (c->health != NULL && c->health[0] == '/')
		fprintf(f, "\toption httpchk GET %s\n", c->health);
	/* A connection a replica refuses marks it down at once: leastconn
	 * would otherwise send the retries to the dead one, which has no
	 * connections; its check brings it back. */
	fprintf(f, "\tdefault-server check inter " CHECK_INTER " fall 2 rise 1 observe layer4 "
		"error-limit 1 on-error mark-down");
	if (c->replica_conns > 0)
		fprintf(f, " maxconn %d", c->replica_conns);
	fprintf(f, "\n\tserver-template r 1-%d 127.0.0.1:1 disabled\n", c->slots);
	if (fclose(f) != 0)
		return herd__error_errno(HERD_EIO, errno, "cannot write %s", path);
	return HERD_OK;
}

/* The last line of the log that says something, for messages. */
static void log_tail(const herd__haproxy *hp, char *out, size_t cap)
{
	char buf[4096];
	int fd = open(hp->log, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0;
	off_t size;

	out[0] = '\0';
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > 0)
		n = pread(fd, buf, sizeof(buf) - 1, size > (off_t)sizeof(buf) - 1
			  ? size - (off_t)sizeof(buf) + 1 : 0);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	/* The first [ALERT] when there is one (the others follow from it). */
	{
		char *alert = strstr(buf, "[ALERT]"), *line;

		line = alert != NULL ? alert : strrchr(buf, '\n') != NULL ? strrchr(buf, '\n') + 1
									  : buf;
		snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
	}
}

bool herd__haproxy_running(herd__haproxy *hp, char *why, size_t cap)
{
	int wstatus;
	pid_t got;
	char tail[512];

	if (hp->pid <= 0) {
		snprintf(why, cap, "HAProxy is not running");
		return false;
	}
	got = waitpid(hp->pid, &wstatus, WNOHANG);
	if (got == 0)
		return true;
	hp->pid = 0;
	log_tail(hp, tail, sizeof(tail));
	if (got > 0 && WIFSIGNALED(wstatus))
		snprintf(why, cap, "HAProxy was killed by signal %d%s%.400s", WTERMSIG(wstatus),
			 tail[0] ? ": " : "", tail);
	else
		snprintf(why, cap, "HAProxy exited with status %d%s%.400s",
			 got > 0 && WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
			 tail[0] ? ": " : "", tail);
	return false;
}

/* Forks HAProxy on conf: its own process group, SIGTERM when this thread
 * ends, output into the log.  Between fork and exec, only
 * async-signal-safe calls (the caller has threads). */
static herd_status spawn(herd__haproxy *hp, const char *conf)
{
	const char *prog = program_of();
	const char *argv[] = { prog, "-db", "-f", conf, NULL };
	int logfd = open(hp->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pid_t parent = getpid(), pid;

	if (logfd < 0 || nullfd < 0) {
		int err = errno;

		if (logfd >= 0)
			close(logfd);
		if (nullfd >= 0)
			close(nullfd);
		return herd__error_errno(HERD_ESYS, err, "cannot open %s for HAProxy", hp->log);
	}
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		dup2(nullfd, STDIN_FILENO);
		dup2(logfd, STDOUT_FILENO);
		dup2(logfd, STDERR_FILENO);
		execvp(prog, (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	close(nullfd);
	if (pid < 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot start HAProxy (%s)", prog);
	hp->pid = pid;
	return HERD_OK;
}

herd_status herd__haproxy_start(herd__haproxy *hp, const herd__haproxy_conf *c)
{
	char jobs[sizeof(hp->sock)], conf[PATH_MAX + 16], why[600];
	int64_t deadline;
	herd_status st;

	memset(hp, 0, sizeof(*hp));
	HERD_CHECK(herd__haproxy_check(NULL, hp->version, sizeof(hp->version)));
	HERD_CHECK(herd_jobs_dir(jobs, sizeof(jobs)));
	/* A fresh directory of this user's, named by mkdtemp from its template. */
	if ((size_t)snprintf(hp->dir, sizeof(hp->dir), "%s/haproxy-XXXXXX", jobs) >=
	    sizeof(hp->dir) || mkdtemp(hp->dir) == NULL) {
		st = herd__error_errno(HERD_EIO, errno, "cannot make a directory for HAProxy "
				       "in %s", jobs);
		hp->dir[0] = '\0';
		return st;
	}
	if ((size_t)snprintf(hp->sock, sizeof(hp->sock), "%s/admin.sock", hp->dir) >=
	    sizeof(hp->sock)) {
		herd__haproxy_stop(hp);
		return herd__error(HERD_EINVAL, "%s/admin.sock: too long for a Unix socket "
				   "(set XDG_RUNTIME_DIR shorter)", hp->dir);
	}
	snprintf(hp->log, sizeof(hp->log), "%s/haproxy.log", hp->dir);
	snprintf(conf, sizeof(conf), "%s/haproxy.cfg", hp->dir);
	HERD_CHECK_GOTO(write_conf(hp, c, conf), st, fail);
	HERD_CHECK_GOTO(spawn(hp, conf), st, fail);
	deadline = herd__net_deadline(START_MS);
	for (;;) {
		if (!herd__haproxy_running(hp, why, sizeof(why))) {
			st = strstr(why, "cannot bind") != NULL || strstr(why, "Address already") != NULL
				? herd__error(HERD_EBUSY, "the front door %s:%d cannot be opened "
					      "(is the port taken?): %s", c->bind, c->port, why)
				: herd__error(HERD_EUNAVAIL, "HAProxy did not start: %s", why);
			goto fail;
		}
		if (access(hp->sock, F_OK) == 0 &&
		    herd__haproxy_cmd(hp, NULL, 0, "show info") == HERD_OK)
			return HERD_OK;
		if (herd__net_now_ms() >= deadline) {
			st = herd__error(HERD_ETIMEDOUT, "HAProxy's admin socket %s did not answer "
					 "within %d ms", hp->sock, START_MS);
			goto fail;
		}
		usleep(20 * 1000);
	}
fail:
	herd__haproxy_stop(hp);
	return st;
}

/* Sends line, reads the answer until HAProxy closes, within CMD_MS. */
static herd_status ask(herd__haproxy *hp, const char *line, herd__buf *out)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int64_t deadline = herd__net_deadline(CMD_MS);
	size_t sent = 0, len = strlen(line);
	herd_status st = HERD_OK;
	int s;

	memcpy(addr.sun_path, hp->sock, strlen(hp->sock) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return herd__error_errno(HERD_ESYS, errno, "a socket for HAProxy");
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) != 0 && errno != EINPROGRESS &&
	    errno != EAGAIN) {
		st = herd__error_errno(HERD_ECLOSED, errno, "HAProxy's admin socket %s", hp->sock);
		close(s);
		return st;
	}
	while (st == HERD_OK) {
		bool writing = sent < len;
		struct pollfd p = { .fd = s, .events = writing ? POLLOUT : POLLIN };
		ssize_t n;

		if (poll(&p, 1, herd__net_remaining_ms(deadline)) <= 0) {
			if (herd__net_now_ms() >= deadline)
				st = herd__error(HERD_ETIMEDOUT, "HAProxy did not answer \"%.60s\" "
						 "within %d ms", line, CMD_MS);
			continue;
		}
		if (writing) {
			n = send(s, line + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				st = herd__error_errno(HERD_ECLOSED, errno, "writing to HAProxy");
			continue;
		}
		if (herd__buf_reserve(out, 8192) != HERD_OK || out->len > STATS_MAX) {
			st = herd__error(HERD_EFORMAT, "HAProxy answered over %u bytes", STATS_MAX);
			continue;
		}
		n = read(s, out->data + out->len, 8192);
		if (n > 0)
			out->len += (size_t)n;
		else if (n == 0)
			break;
		else if (errno != EAGAIN && errno != EINTR)
			st = herd__error_errno(HERD_ECLOSED, errno, "reading from HAProxy");
	}
	close(s);
	if (st == HERD_OK && herd__buf_append(out, "", 1) != HERD_OK)
		st = herd__error(HERD_ENOMEM, "out of memory for HAProxy's answer");
	return st;
}

herd_status herd__haproxy_cmd(herd__haproxy *hp, char *reply, size_t cap, const char *fmt, ...)
{
	char line[512];
	herd__buf out;
	herd_status st;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		return herd__error(HERD_EINVAL, "an HAProxy command over %zu bytes", sizeof(line));
	line[n] = '\n';
	line[n + 1] = '\0';
	herd__buf_init(&out, 0);
	st = ask(hp, line, &out);
	if (st == HERD_OK && reply != NULL)
		snprintf(reply, cap, "%s", (const char *)out.data);
	herd__buf_free(&out);
	return st;
}

/* A `set server` answered: nothing, or a note that it changed something. */
static herd_status set_server(herd__haproxy *hp, int s, const char *what)
{
	char reply[512];
	const char *p;

	HERD_CHECK(herd__haproxy_cmd(hp, reply, sizeof(reply), "set server " BACKEND "/r%d %s",
				     s + 1, what));
	for (p = reply; isspace((unsigned char)*p); p++)
		;
	if (*p == '\0' || strstr(p, "changed from") != NULL || strncmp(p, "no need", 7) == 0)
		return HERD_OK;
	return herd__error(HERD_EINVAL, "HAProxy refused \"set server " BACKEND "/r%d %s\": "
			   "%.*s", s + 1, what, (int)strcspn(p, "\n"), p);
}

herd_status herd__haproxy_slot_addr(herd__haproxy *hp, int s, const char *addr, int port)
{
	char what[128];

	snprintf(what, sizeof(what), "addr %s port %d", addr, port);
	return set_server(hp, s, what);
}

herd_status herd__haproxy_slot_state(herd__haproxy *hp, int s, const char *state)
{
	char what[32];

	snprintf(what, sizeof(what), "state %s", state);
	return set_server(hp, s, what);
}

/* The column of name in `show stat`'s header, or -1. */
static int column(char *const *cols, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(cols[i], name) == 0)
			return i;
	return -1;
}

/* Splits line at commas in place: at most max fields. */
static int split(char *line, char **f, int max)
{
	int n = 0;

	while (n < max) {
		f[n++] = line;
		line = strchr(line, ',');
		if (line == NULL)
			break;
		*line++ = '\0';
	}
	return n;
}

static long long field(char *const *f, int n, int col)
{
	return col >= 0 && col < n ? strtoll(f[col], NULL, 10) : 0;
}

herd_status herd__haproxy_stats(herd__haproxy *hp, herd__haproxy_stat *slots, int n,
				herd__haproxy_stat *backend)
{
	enum { MAXF = 256 };
	static const char *const names[] = { "pxname", "svname", "qcur", "scur", "req_tot",
					     "hrsp_5xx", "econ", "eresp", "status" };
	char *cols[MAXF], *f[MAXF], *line, *save = NULL;
	int ncols = 0, at[9];
	herd__buf out;
	herd_status st;

	memset(slots, 0, (size_t)n * sizeof(*slots));
	memset(backend, 0, sizeof(*backend));
	herd__buf_init(&out, 0);
	HERD_CHECK_GOTO(ask(hp, "show stat\n", &out), st, done);
	line = strtok_r((char *)out.data, "\n", &save);
	if (line == NULL || strncmp(line, "# ", 2) != 0) {
		st = herd__error(HERD_EFORMAT, "HAProxy's statistics begin \"%.60s\", not their "
				 "header", line != NULL ? line : "");
		goto done;
	}
	ncols = split(line + 2, cols, MAXF);
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if ((at[i] = column(cols, ncols, names[i])) < 0) {
			st = herd__error(HERD_EFORMAT, "HAProxy's statistics have no %s column",
					 names[i]);
			goto done;
		}
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		int nf = split(line, f, MAXF), slot = -1;
		herd__haproxy_stat *s;

		if (nf <= at[8] || strcmp(f[at[0]], BACKEND) != 0)
			continue;
		if (strcmp(f[at[1]], "BACKEND") == 0)
			s = backend;
		else if (sscanf(f[at[1]], "r%d", &slot) == 1 && slot >= 1 && slot <= n)
			s = &slots[slot - 1];
		else
			continue;
		s->qcur = field(f, nf, at[2]);
		s->scur = field(f, nf, at[3]);
		s->req_tot = field(f, nf, at[4]);
		s->errors = field(f, nf, at[5]) + field(f, nf, at[6]) + field(f, nf, at[7]);
		snprintf(s->status, sizeof(s->status), "%s", f[at[8]]);
		s->up = strncmp(s->status, "UP", 2) == 0;
	}
	st = HERD_OK;
done:
	herd__buf_free(&out);
	return st;
}

void herd__haproxy_stop(herd__haproxy *hp)
{
	char path[PATH_MAX + 16];

	if (hp->pid > 0) {
		int64_t deadline = herd__net_deadline(STOP_MS);
		int wstatus;

		kill(hp->pid, SIGTERM);
		while (waitpid(hp->pid, &wstatus, WNOHANG) == 0) {
			if (herd__net_now_ms() >= deadline) {
				kill(-hp->pid, SIGKILL);
				waitpid(hp->pid, &wstatus, 0);
				break;
			}
			usleep(10 * 1000);
		}
		hp->pid = 0;
	}
	if (hp->dir[0] == '\0')
		return;
	snprintf(path, sizeof(path), "%s/haproxy.cfg", hp->dir);
	unlink(path);
	unlink(hp->sock);
	unlink(hp->log);
	rmdir(hp->dir);
	hp->dir[0] = '\0';
}
