/*
 * sdk/launch/bcast.c - herd_bcast, a file to every node, and its node side
 * (`herd bcast --receive`, herd__bcast_receive).
 *
 * The stream a receiver reads on stdin is the file's bytes and then their
 * XXH3-64 (8 bytes, little endian), so that the sender reads the file once.
 * The sender writes each chunk to every receiver's pipe before it reads the
 * next (the slowest receiver sets the pace, a failed one is dropped), and
 * a relay writes the chunk to its own temporary file as well.  When the
 * stream ends every receiver checks the sum, fsyncs, renames its copy into
 * place and prints a line per host it answers for ("herd-bcast ok HOST" or
 * "herd-bcast fail HOST REASON", "." for itself); the sender reads those
 * lines, and names a host whose receiver said nothing with what its ssh or
 * srun said.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "bcast.h"
#include "net.h"
#include "remote.h"
#include "topo/hostlist.h"

#define CHUNK ((size_t)4 << 20)
#define DEFAULT_TIMEOUT_MS 30000
#define REAP_MS 1000
#define POLL_MS 100
#define LINE "herd-bcast "

/* ---- the stream ------------------------------------------------------------ */

typedef struct source {
	int fd;
	uint64_t data, got;        /* the file's bytes, and of the stream read so far */
	bool relay;                /* the sum comes in the stream (else it is made here) */
	bool seekable;             /* a regular file: each peer is fed from it at its
				    * own pace (sendfile), after a pass for the sum */
	XXH3_state_t *hash;
	uint8_t trailer[8];        /* the sum as the stream carries it */
	int timeout_ms;            /* --timeout: a peer that takes nothing that long fails */
	int read_ms;               /* how long a read waits for a byte; 0: timeout_ms */
} source;

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The next piece of the stream into buf: *n > 0 bytes, or an error. */
static herd_status source_next(source *s, uint8_t *buf, size_t cap, size_t *n)
{
	uint64_t total = s->data + 8;
	size_t want = total - s->got < cap ? (size_t)(total - s->got) : cap;
	ssize_t got;

	*n = 0;
	if (!s->relay && s->got >= s->data) {
		/* The sum, made here, after the last byte. */
		put_le64(s->trailer, XXH3_64bits_digest(s->hash));
		memcpy(buf, s->trailer + (s->got - s->data), (size_t)(total - s->got));
		*n = (size_t)(total - s->got);
		s->got = total;
		return HERD_OK;
	}
	if (!s->relay && want > s->data - s->got)
		want = (size_t)(s->data - s->got);
	for (;;) {
		struct pollfd pf = { .fd = s->fd, .events = POLLIN };
		int r = poll(&pf, 1, s->read_ms > 0 ? s->read_ms : s->timeout_ms);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return herd__error(HERD_ETIMEDOUT, "nothing to read for %d s (after %" PRIu64
					   " of %" PRIu64 " bytes)",
					   ((s->read_ms > 0 ? s->read_ms : s->timeout_ms) + 999) / 1000,
					   s->got, total);
		got = read(s->fd, buf, want);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		break;
	}
	if (got < 0)
		return herd__error_errno(HERD_EIO, errno, "reading the file");
	if (got == 0)
		return herd__error(HERD_EIO, "the stream ended after %" PRIu64 " of %" PRIu64
				   " bytes", s->got, total);
	/* The file's part is hashed; a relay keeps the sum it was sent. */
	if (s->got < s->data) {
		size_t data = s->data - s->got < (uint64_t)got ? (size_t)(s->data - s->got)
							       : (size_t)got;

		XXH3_64bits_update(s->hash, buf, data);
		if ((size_t)got > data)
			memcpy(s->trailer, buf + data, (size_t)got - data);
	} else {
		memcpy(s->trailer + (s->got - s->data), buf, (size_t)got);
	}
	s->got += (uint64_t)got;
	*n = (size_t)got;
	return HERD_OK;
}

/* ---- receivers this process sends to -------------------------------------------- */

typedef struct peer {
	const char *host;          /* as reached; "srun" for the Slurm step */
	size_t first, count;       /* its nodes in the node array, itself first */
	char *forward;             /* the rest of them as a hostlist (a relay), or NULL */
	herd__launch_link link;
	uint64_t sent;
	int64_t idle_since;
	bool closed, ended;
	int wstatus;
	char *why;                 /* it failed as a whole */
} peer;

static void peer_fail(peer *p, const char *fmt, ...) HERD_PRINTF(2, 3);

static void peer_fail(peer *p, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = herd__vformat(fmt, ap);
	va_end(ap);
	if (p->why == NULL)
		p->why = s;
	else
		free(s);
	herd__remote_channel_abort(&p->link.ch, REAP_MS);
	p->closed = p->ended = true;
	p->wstatus = -1;
}

static void peer_close_input(peer *p)
{
	if (p->link.ch.wfd >= 0) {
		close(p->link.ch.wfd);
		p->link.ch.wfd = -1;
	}
	p->closed = true;
	p->idle_since = herd__net_now_ms();
}

/* Reads what a peer printed; notices its end. */
static void peer_service(peer *p)
{
	pid_t got;

	if (p->ended)
		return;
	if (p->link.ch.rfd >= 0) {
		herd_status st = herd__launch_link_fill(&p->link);

		if (st != HERD_OK && st != HERD_ECLOSED) {
			peer_fail(p, "reading what it says: %s", herd_last_error());
			return;
		}
		if (st == HERD_ECLOSED) {
			close(p->link.ch.rfd);
			p->link.ch.rfd = -1;
		}
	}
	herd__launch_link_read_err(&p->link);
	if (p->link.ch.rfd >= 0 || p->link.ch.errfd >= 0 || !p->closed)
		return;
	got = waitpid(p->link.ch.pid, &p->wstatus, WNOHANG);
	if (got == p->link.ch.pid || (got < 0 && errno != EINTR)) {
		p->link.ch.pid = 0;
		p->ended = true;
	}
}

/*
 * A write to a receiver that died raises SIGPIPE for this thread: it is
 * blocked while the stream runs (the write fails with EPIPE instead), and
 * one that this raised is taken back after, so that the program's own
 * disposition never sees it.
 */
static void sigpipe_block(sigset_t *old, bool *was_pending)
{
	sigset_t pipe, pending;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, old);
	sigpending(&pending);
	*was_pending = sigismember(&pending, SIGPIPE) == 1;
}

/* The sum of a seekable source, read once before it is sent. */
static herd_status file_sum(source *s, uint8_t *buf, size_t cap)
{
	for (uint64_t at = 0; at < s->data;) {
		size_t want = s->data - at < cap ? (size_t)(s->data - at) : cap;
		ssize_t got = pread(s->fd, buf, want, (off_t)at);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? herd__error_errno(HERD_EIO, errno, "reading the file")
				       : herd__error(HERD_EIO, "the file shrank while it was sent");
		XXH3_64bits_update(s->hash, buf, (size_t)got);
		at += (uint64_t)got;
	}
	put_le64(s->trailer, XXH3_64bits_digest(s->hash));
	s->got = s->data + 8;
	return HERD_OK;
}

/*
 * Writes to peer p what it lacks of the stream: from the shared chunk
 * buf (stream bytes pos..pos+len), or, from a seekable source, the file at
 * its own offset (sendfile, no copy through this process) and then the
 * sum.  write's result.
 */
static ssize_t feed(peer *p, const source *src, const uint8_t *buf, uint64_t pos, size_t len)
{
	if (!src->seekable)
		return write(p->link.ch.wfd, buf + (p->sent - pos), (size_t)(pos + len - p->sent));
	if (p->sent < src->data) {
		off_t off = (off_t)p->sent;
		size_t n = src->data - p->sent < (1u << 20) ? (size_t)(src->data - p->sent)
							      : (size_t)1 << 20;

		return sendfile(p->link.ch.wfd, src->fd, &off, n);
	}
	return write(p->link.ch.wfd, src->trailer + (p->sent - src->data),
		     (size_t)(src->data + 8 - p->sent));
}

static void sigpipe_restore(const sigset_t *old, bool was_pending)
{
	const struct timespec zero = { 0, 0 };
	sigset_t pipe, pending;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigpending(&pending);
	if (!was_pending && sigismember(&pending, SIGPIPE) == 1)
		(void)sigtimedwait(&pipe, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/*
 * Sends the stream of src to every peer (and to the file outfd, >= 0, with
 * *out_err its first write error), then waits for every peer to end.
 * HERD_OK, or the source's failure (the peers are then stopped).
 */
static herd_status pump(peer *peers, size_t np, source *src, int outfd, char *out_err,
			size_t out_cap)
{
	uint64_t total = src->data + 8, pos = 0;
	struct pollfd *fds = NULL;
	size_t *owner = NULL, len = 0;
	uint8_t *buf = NULL;
	herd_status st = HERD_OK;
	bool waiting = true, pipe_pending;
	sigset_t mask;

	sigpipe_block(&mask, &pipe_pending);
	HERD_CHECK_GOTO(herd__calloc(&buf, CHUNK, 1, "the stream's buffer"), st, out);
	if (src->seekable) {
		/* The sum first; then the whole stream is there for every peer. */
		HERD_CHECK_GOTO(file_sum(src, buf, CHUNK), st, out);
		len = (size_t)total;
	}
	HERD_CHECK_GOTO(herd__calloc(&fds, 3 * np + 1, sizeof(*fds), "poll"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&owner, 3 * np + 1, sizeof(*owner), "poll"), st, out);
	for (size_t i = 0; i < np; i++)
		peers[i].idle_since = herd__net_now_ms();
	while (waiting) {
		bool taken = true, live = false;
		int64_t now;
		size_t nfds = 0;

		for (size_t i = 0; i < np; i++)
			if (!peers[i].closed && peers[i].sent < pos + len)
				taken = false;
		if (taken && pos + len < total && !src->seekable) {
			pos += len;
			len = 0;
			st = source_next(src, buf, CHUNK, &len);
			if (st != HERD_OK)
				break;
			/* The file's part to this node's own copy. */
			if (outfd >= 0 && out_err[0] == '\0' && pos < src->data) {
				size_t data = src->data - pos < len ? (size_t)(src->data - pos) : len;

				for (size_t off = 0; off < data;) {
					ssize_t w = pwrite(outfd, buf + off, data - off,
							   (off_t)(pos + off));

					if (w < 0 && errno == EINTR)
						continue;
					if (w <= 0) {
						snprintf(out_err, out_cap, "writing: %s",
							 w < 0 ? strerror(errno) : "no progress");
						break;
					}
					off += (size_t)w;
				}
			}
			now = herd__net_now_ms();
			for (size_t i = 0; i < np; i++)
				peers[i].idle_since = now;
			continue;
		}
		if (taken && pos + len == total)
			for (size_t i = 0; i < np; i++)
				if (!peers[i].closed)
					peer_close_input(&peers[i]);
		for (size_t i = 0; i < np; i++) {
			peer *p = &peers[i];
			size_t k;

			if (p->ended)
				continue;
			live = true;
			if (!p->closed && p->sent < pos + len && p->link.ch.wfd >= 0) {
				fds[nfds] = (struct pollfd){ .fd = p->link.ch.wfd, .events = POLLOUT };
				owner[nfds++] = i;
			}
			k = herd__launch_link_pollfds(&p->link, fds + nfds, true);
			for (size_t j = 0; j < k; j++)
				owner[nfds + j] = i;
			nfds += k;
		}
		if (!live) {
			/* Nobody listens: a relay still reads the stream for its copy. */
			if (pos + len == total)
				waiting = false;
			continue;
		}
		if (poll(fds, (nfds_t)nfds, POLL_MS) < 0 && errno != EINTR) {
			st = herd__error_errno(HERD_ESYS, errno, "poll");
			break;
		}
		now = herd__net_now_ms();
		for (size_t j = 0; j < nfds; j++) {
			peer *p = &peers[owner[j]];
			ssize_t w;

			if (fds[j].fd != p->link.ch.wfd || p->closed || fds[j].revents == 0)
				continue;
			w = feed(p, src, buf, pos, len);
			if (w > 0) {
				p->sent += (uint64_t)w;
				p->idle_since = now;
			} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
				char said[HERD__LAUNCH_LINK_ERR_MAX + 8];

				herd__launch_link_read_err(&p->link);
				peer_fail(p, "stopped taking the file after %" PRIu64 " bytes%s",
					  p->sent, herd__launch_link_says(&p->link, said,
									  sizeof(said)));
			}
		}
		for (size_t i = 0; i < np; i++) {
			peer *p = &peers[i];
			/* A relay may itself wait the timeout on one of its group. */
			int patience = p->forward != NULL ? 2 * src->timeout_ms : src->timeout_ms;

			peer_service(p);
			/* One that has all there is waits for the others, not idles. */
			if (!p->closed && p->sent >= pos + len)
				p->idle_since = now;
			if (!p->ended && now - p->idle_since > patience)
				peer_fail(p, p->closed ? "no word within %d s of the last byte"
						       : "took nothing for %d s",
					  (patience + 999) / 1000);
		}
	}
out:
	for (size_t i = 0; i < np; i++)
		if (!peers[i].ended)
			peer_fail(&peers[i], "stopped: %s", st != HERD_OK ? herd_last_error()
									  : "the sender gave up");
	free(owner);
	free(fds);
	free(buf);
	sigpipe_restore(&mask, pipe_pending);
	return st;
}

/* ---- outcomes ------------------------------------------------------------------ */

typedef struct outcome {
	const char *host;
	char *error;               /* NULL: it has the file */
	bool known;
} outcome;

static void set_outcome(outcome *o, bool ok, const char *reason)
{
	if (o->known)
		return;
	o->known = true;
	o->error = ok ? NULL : strdup(reason != NULL && reason[0] != '\0' ? reason : "failed");
}

/* Why a peer's process gave no line for host, from its exit and stderr. */
static void peer_why(const peer *p, char *out, size_t cap)
{
	char said[HERD__LAUNCH_LINK_ERR_MAX + 8];
	const char *words = herd__launch_link_says(&p->link, said, sizeof(said));

	if (p->why != NULL)
		snprintf(out, cap, "%s", p->why);
	else if (WIFEXITED(p->wstatus) && WEXITSTATUS(p->wstatus) == 255 &&
		 strncmp(words, ": ssh:", 6) == 0)
		snprintf(out, cap, "%s", words + 2);
	else if (WIFEXITED(p->wstatus))
		snprintf(out, cap, "its receiver exited %d without a word%s",
			 WEXITSTATUS(p->wstatus), words);
	else
		snprintf(out, cap, "its receiver ended by signal %d%s",
			 WIFSIGNALED(p->wstatus) ? WTERMSIG(p->wstatus) : 0, words);
}

/*
 * The outcomes of a peer's nodes from its lines.  labelled: srun --label
 * lines, task t answering for node first + t.
 */
static void read_outcomes(const peer *p, outcome *all, bool labelled)
{
	const char *text = (const char *)p->link.in.data + p->link.in.off;
	size_t len = p->link.in.len - p->link.in.off, at = 0;
	char why[1024];

	while (at < len) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - line) : len - at;
		char host[HERD_NAME_LEN * 4] = "", word[8] = "";
		const char *reason = "";
		size_t task = 0, first = p->first;
		int used = 0;

		at += n + 1;
		if (labelled) {
			while (n > 0 && *line == ' ')
				line++, n--;
			if (sscanf(line, "%zu: %n", &task, &used) < 1 || used == 0 ||
			    task >= p->count)
				continue;
			line += used;
			n -= (size_t)used;
			first += task;
		}
		if (n <= strlen(LINE) || memcmp(line, LINE, strlen(LINE)) != 0)
			continue;
		{
			char copy[2048];

			snprintf(copy, sizeof(copy), "%.*s", (int)(n - strlen(LINE)),
				 line + strlen(LINE));
			used = 0;
			if (sscanf(copy, "%7s %255s %n", word, host, &used) < 2)
				continue;
			reason = used > 0 ? copy + used : "";
			for (size_t i = p->first; i < p->first + p->count; i++) {
				bool me = strcmp(host, ".") == 0;

				if ((me && i == (labelled ? first : p->first)) ||
				    (!me && strcmp(all[i].host, host) == 0)) {
					set_outcome(&all[i], strcmp(word, "ok") == 0, reason);
					break;
				}
			}
		}
	}
	peer_why(p, why, sizeof(why));
	for (size_t i = p->first; i < p->first + p->count; i++) {
		char msg[1200];

		if (all[i].known)
			continue;
		if (i == p->first || labelled)
			snprintf(msg, sizeof(msg), "%s", why);
		else
			snprintf(msg, sizeof(msg), "not reached: its relay %s failed: %s", p->host,
				 why);
		set_outcome(&all[i], false, msg);
	}
}

/* ---- starting receivers ------------------------------------------------------------ */

/* The receiver's arguments; a relay's end with herd__remote_relay_args. */
static herd_status receive_args(char *out, size_t cap, const char *program, const char *dest,
				uint64_t bytes, int mode, const char *forward, int timeout_ms)
{
	char qdest[PATH_MAX + 64], qfwd[4200], relay[3 * HERD__SSH_REMOTE_MAX];
	int n;

	if (!herd__remote_shell_quote(dest, qdest, sizeof(qdest)) ||
	    (forward != NULL && !herd__remote_shell_quote(forward, qfwd, sizeof(qfwd))))
		return herd__error(HERD_EINVAL, "the destination or the node list is too long");
	relay[0] = '\0';
	if (forward != NULL)
		HERD_CHECK(herd__remote_relay_args(relay, sizeof(relay), program));
	n = snprintf(out, cap, "bcast --receive %s --bytes %" PRIu64 " --mode %04o --timeout %d"
		     "%s%s%s", qdest, bytes, mode, (timeout_ms + 999) / 1000,
		     forward != NULL ? " --forward " : "", forward != NULL ? qfwd : "", relay);
	if (n < 0 || (size_t)n >= cap)
		return herd__error(HERD_EINVAL, "the destination or the node list is too long");
	return HERD_OK;
}

static herd_status start_ssh(peer *p, const char *program, const char *dest, uint64_t bytes,
			     int mode, int timeout_ms)
{
	herd__ssh_cmd *cmd = NULL;
	herd__launch_channel ch;
	char args[4 * HERD__SSH_REMOTE_MAX];
	herd_status st;

	herd__launch_link_init(&p->link);
	herd__buf_init(&p->link.in, 1 << 20);
	HERD_CHECK(receive_args(args, sizeof(args), program, dest, bytes, mode, p->forward,
				timeout_ms));
	HERD_CHECK(herd__calloc(&cmd, 1, sizeof(*cmd), "the ssh command line"));
	st = herd__ssh_cmd_build(cmd, timeout_ms < 10000 ? timeout_ms : 0, program, args);
	if (st == HERD_OK) {
		cmd->argv[cmd->host_at] = p->host;
		st = herd__launch_spawn_helper(cmd->argv, NULL, &ch);
	}
	free(cmd);
	if (st != HERD_OK) {
		p->why = strdup(herd_last_error());
		p->closed = p->ended = true;
		return HERD_OK;
	}
	herd__launch_link_attach(&p->link, &ch);
	return HERD_OK;
}

/* The node side's own copy: a temporary file beside dest. */
typedef struct copy {
	char tmp[PATH_MAX], err[PATH_MAX + 512];
	int fd;
} copy;

static void copy_open(copy *c, const char *dest, int mode)
{
	int n = snprintf(c->tmp, sizeof(c->tmp), "%s.herd-bcast.XXXXXX", dest);

	c->err[0] = '\0';
	c->fd = -1;
	if (n < 0 || (size_t)n >= sizeof(c->tmp)) {
		snprintf(c->err, sizeof(c->err), "%s: the path is too long", dest);
		return;
	}
	c->fd = mkostemp(c->tmp, O_CLOEXEC);
	if (c->fd < 0) {
		snprintf(c->err, sizeof(c->err), "cannot create a file beside %s: %s", dest,
			 strerror(errno));
		c->tmp[0] = '\0';
		return;
	}
	if (fchmod(c->fd, (mode_t)mode) != 0)
		snprintf(c->err, sizeof(c->err), "chmod %s: %s", c->tmp, strerror(errno));
}

/* Verifies, fsyncs and renames the copy into place; c->err says what failed. */
static void copy_finish(copy *c, const source *src, const char *dest)
{
	uint64_t want = get_le64(src->trailer), got = XXH3_64bits_digest(src->hash);
	char dir[PATH_MAX], *slash;

	if (c->err[0] == '\0' && want != got)
		snprintf(c->err, sizeof(c->err), "checksum mismatch: sent %016" PRIx64 ", received "
			 "%016" PRIx64, want, got);
	if (c->err[0] == '\0' && fsync(c->fd) != 0)
		snprintf(c->err, sizeof(c->err), "fsync %s: %s", c->tmp, strerror(errno));
	if (c->fd >= 0 && close(c->fd) != 0 && c->err[0] == '\0')
		snprintf(c->err, sizeof(c->err), "close %s: %s", c->tmp, strerror(errno));
	c->fd = -1;
	if (c->err[0] == '\0' && rename(c->tmp, dest) != 0)
		snprintf(c->err, sizeof(c->err), "rename to %s: %s", dest, strerror(errno));
	if (c->err[0] != '\0') {
		if (c->tmp[0] != '\0')
			unlink(c->tmp);
		return;
	}
	herd__strlcpy(dir, dest, sizeof(dir));
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash != NULL)
		*slash = '\0';
	else
		herd__strlcpy(dir, ".", sizeof(dir));
	if (herd__fsync_dir(dir) != HERD_OK)
		snprintf(c->err, sizeof(c->err), "%s", herd_last_error());
}

/* The peers of a flat fan-out to names[0..n), one node each. */
static herd_status flat_peers(const char *const *names, size_t n, peer **out)
{
	peer *p = NULL;

	HERD_CHECK(herd__calloc(&p, n + 1, sizeof(*p), "the receivers"));
	for (size_t i = 0; i < n; i++) {
		p[i].host = names[i];
		p[i].first = i;
		p[i].count = 1;
		herd__launch_link_init(&p[i].link);
	}
	*out = p;
	return HERD_OK;
}

static void peers_free(peer *p, size_t n)
{
	for (size_t i = 0; i < n && p != NULL; i++) {
		herd__launch_link_free(&p[i].link);
		free(p[i].forward);
		free(p[i].why);
	}
	free(p);
}

/* ---- the node side ------------------------------------------------------------------ */

herd_status herd__bcast_receive(const char *dest, uint64_t bytes, int mode, const char *forward,
				const char *program, int timeout_ms)
{
	herd__hostlist hl = { 0 };
	outcome *all = NULL;
	peer *peers = NULL;
	/* What feeds this node (the sender, or a relay) may itself wait the
	 * timeout on a stalled peer before it drops it and goes on: this node
	 * waits twice that for its next byte. */
	source src = { STDIN_FILENO, bytes, 0, true, false, NULL, { 0 }, timeout_ms,
		       2 * timeout_ms };
	copy c;
	herd_status st;

	if (forward != NULL)
		HERD_CHECK(herd__hostlist_expand(&hl, forward));
	src.hash = XXH3_createState();
	if (src.hash == NULL) {
		herd__hostlist_free(&hl);
		return herd__error(HERD_ENOMEM, "out of memory");
	}
	XXH3_64bits_reset(src.hash);
	HERD_CHECK_GOTO(flat_peers((const char *const *)hl.names, hl.n, &peers), st, out);
	HERD_CHECK_GOTO(herd__calloc(&all, hl.n + 1, sizeof(*all), "outcomes"), st, out);
	copy_open(&c, dest, mode);
	for (size_t i = 0; i < hl.n; i++) {
		all[i].host = hl.names[i];
		HERD_CHECK_GOTO(start_ssh(&peers[i], program, dest, bytes, mode, timeout_ms), st,
				out);
	}
	st = pump(peers, hl.n, &src, c.fd, c.err, sizeof(c.err));
	if (st != HERD_OK) {
		/* The sender is gone: nobody to tell. */
		if (c.fd >= 0)
			close(c.fd);
		if (c.tmp[0] != '\0')
			unlink(c.tmp);
		goto out;
	}
	copy_finish(&c, &src, dest);
	printf(LINE "%s . %s\n", c.err[0] == '\0' ? "ok" : "fail", c.err);
	for (size_t i = 0; i < hl.n; i++) {
		read_outcomes(&peers[i], all, false);
		printf(LINE "%s %s %s\n", all[i].error == NULL ? "ok" : "fail", all[i].host,
		       all[i].error != NULL ? all[i].error : "");
	}
	fflush(stdout);
out:
	for (size_t i = 0; i < hl.n && all != NULL; i++)
		free(all[i].error);
	free(all);
	peers_free(peers, hl.n);
	XXH3_freeState(src.hash);
	herd__hostlist_free(&hl);
	return st;
}

/* ---- the sender ------------------------------------------------------------------------ */

static herd_status start_srun(peer *p, const char *program, const char *const *names, size_t n,
			      const char *dest, uint64_t bytes, int mode, int timeout_ms)
{
	enum { FIXED_ARGS = 24 };
	const char *argv[HERD__REMOTE_MAX_ARGS + FIXED_ARGS + 1];
	const char *srun = herd__param_str(HERD__P_SRUN);
	char extra[4096], nodes_arg[64], ntasks_arg[64], size[32], modes[16], secs[16];
	char *nodelist = NULL, *nodelist_arg = NULL;
	herd__launch_channel ch;
	size_t nextra = 0, k = 0;
	herd_status st;

	herd__launch_link_init(&p->link);
	herd__buf_init(&p->link.in, 1 << 24);
	HERD_CHECK(herd__hostlist_compress(&nodelist, names, n));
	if (asprintf(&nodelist_arg, "--nodelist=%s", nodelist) < 0) {
		free(nodelist);
		return herd__error(HERD_ENOMEM, "out of memory for srun's arguments");
	}
	snprintf(nodes_arg, sizeof(nodes_arg), "--nodes=%zu", n);
	snprintf(ntasks_arg, sizeof(ntasks_arg), "--ntasks=%zu", n);
	snprintf(size, sizeof(size), "%" PRIu64, bytes);
	snprintf(modes, sizeof(modes), "%04o", mode);
	snprintf(secs, sizeof(secs), "%d", (timeout_ms + 999) / 1000);
	argv[k++] = srun != NULL ? srun : "srun";
	argv[k++] = nodes_arg;
	argv[k++] = ntasks_arg;
	argv[k++] = "--ntasks-per-node=1";
	argv[k++] = nodelist_arg;
	argv[k++] = "--kill-on-bad-exit=0";
	argv[k++] = "--input=all";
	argv[k++] = "--label";
	st = herd__param_words(HERD__P_SRUN_ARGS, extra, sizeof(extra), argv + k,
			       HERD__REMOTE_MAX_ARGS, &nextra);
	k += nextra;
	argv[k++] = program;
	argv[k++] = "bcast";
	argv[k++] = "--receive";
	argv[k++] = dest;
	argv[k++] = "--bytes";
	argv[k++] = size;
	argv[k++] = "--mode";
	argv[k++] = modes;
	argv[k++] = "--timeout";
	argv[k++] = secs;
	argv[k] = NULL;
	if (st == HERD_OK)
		st = herd__launch_spawn_helper(argv, NULL, &ch);
	free(nodelist_arg);
	free(nodelist);
	HERD_CHECK(st);
	herd__launch_link_attach(&p->link, &ch);
	return HERD_OK;
}

herd_status herd_bcast(const char *file, const char *dest, const herd_bcast_opts *opts)
{
	const herd__launch_backend *be;
	herd__launch_node *nodes = NULL;
	herd_job_spec spec;
	const char **names = NULL;
	const char *program;
	outcome *all = NULL;
	peer *peers = NULL;
	source src = { -1, 0, 0, false, true, NULL, { 0 }, DEFAULT_TIMEOUT_MS, 0 };
	struct stat sb;
	size_t n = 0, np = 0, failed = 0;
	long width;
	int mode;
	herd_status st;

	if (file == NULL || dest == NULL || opts == NULL)
		return herd__error(HERD_EINVAL, "herd_bcast: file, dest and opts must not be NULL");
	HERD__CHECK_VERSION("herd_bcast", opts, herd_bcast_opts, BCAST_OPTS);
	if (dest[0] != '/')
		return herd__error(HERD_EINVAL, "herd_bcast: dest %s: an absolute path, please (the "
				   "nodes' working directories are not this one's)", dest);
	if (opts->where != HERD_JOB_HOSTS && opts->where != HERD_JOB_HOSTFILE &&
	    opts->where != HERD_JOB_SLURM)
		return herd__error(HERD_EINVAL, "herd_bcast: opts.where: hosts, a hostfile or "
				   "Slurm");
	if (opts->timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_bcast: timeout_ms %d is negative",
				   opts->timeout_ms);
	if (opts->timeout_ms > 0)
		src.timeout_ms = opts->timeout_ms;
	program = opts->herd_program != NULL && opts->herd_program[0] != '\0'
			  ? opts->herd_program
			  : herd__param_str(HERD__P_PROGRAM) != NULL
				    ? herd__param_str(HERD__P_PROGRAM)
				    : "herd";
	src.fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (src.fd < 0)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "herd_bcast: cannot open %s", file);
	if (fstat(src.fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(src.fd);
		return herd__error(HERD_EINVAL, "herd_bcast: %s is %s, not a regular file", file,
				   herd__file_kind(sb.st_mode));
	}
	src.data = (uint64_t)sb.st_size;
	mode = (int)(sb.st_mode & 07777);
	src.hash = XXH3_createState();
	if (src.hash == NULL) {
		close(src.fd);
		return herd__error(HERD_ENOMEM, "out of memory");
	}
	XXH3_64bits_reset(src.hash);
	memset(&spec, 0, sizeof(spec));
	spec.where = opts->where;
	spec.hosts = opts->hosts;
	HERD_CHECK_GOTO(herd__launch_backend_for(spec.where, &be), st, out);
	HERD_CHECK_GOTO(be->resolve(&spec, &nodes, &n), st, out);
	HERD_CHECK_GOTO(herd__calloc(&names, n + 1, sizeof(*names), "the nodes"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&all, n + 1, sizeof(*all), "outcomes"), st, out);
	for (size_t i = 0; i < n; i++)
		names[i] = all[i].host = nodes[i].host;
	if (opts->where == HERD_JOB_SLURM) {
		/* One srun step: its stdin reaches every task (--input=all). */
		HERD_CHECK_GOTO(herd__calloc(&peers, 1, sizeof(*peers), "the receivers"), st, out);
		np = 1;
		peers[0].host = "srun";
		peers[0].count = n;
		HERD_CHECK_GOTO(start_srun(&peers[0], program, names, n, dest, src.data, mode,
					   src.timeout_ms), st, out);
	} else {
		HERD_CHECK_GOTO(herd__ssh_tree_width(n, &width), st, out);
		np = herd__launch_tree_groups(n, (int)width);
		HERD_CHECK_GOTO(herd__calloc(&peers, np + 1, sizeof(*peers), "the receivers"), st,
				out);
		for (size_t k = 0; k < np; k++) {
			peer *p = &peers[k];

			herd__launch_tree_group(n, (int)width, k, &p->first, &p->count);
			p->host = names[p->first];
			if (p->count > 1)
				HERD_CHECK_GOTO(herd__hostlist_compress(&p->forward, names + p->first + 1,
									p->count - 1), st, out);
		}
		for (size_t k = 0; k < np; k++)
			HERD_CHECK_GOTO(start_ssh(&peers[k], program, dest, src.data, mode,
						  src.timeout_ms), st, out);
	}
	st = pump(peers, np, &src, -1, NULL, 0);
	if (st != HERD_OK) {
		herd__error_wrap(st, "herd_bcast: %s: ", file);
		goto out;
	}
	for (size_t k = 0; k < np; k++)
		read_outcomes(&peers[k], all, opts->where == HERD_JOB_SLURM);
	for (size_t i = 0; i < n; i++) {
		failed += all[i].error != NULL;
		if (opts->result != NULL)
			opts->result(opts->userdata, all[i].host,
				     all[i].error == NULL ? HERD_OK : HERD_EIO, all[i].error);
	}
	if (failed > 0) {
		size_t i = 0;

		while (all[i].error == NULL)
			i++;
		st = herd__error(HERD_EPEER, "herd_bcast: %zu of %zu nodes have no copy of %s; the "
				 "first, %s: %s", failed, n, file, all[i].host, all[i].error);
	}
out:
	for (size_t i = 0; i < n && all != NULL; i++)
		free(all[i].error);
	free(all);
	peers_free(peers, np);
	free(names);
	herd__launch_nodes_free(nodes, n);
	XXH3_freeState(src.hash);
	close(src.fd);
	return st;
}
