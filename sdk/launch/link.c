/*
 * sdk/launch/link.c - the launcher's end of one `herd exec` channel: its
 * buffers, reading and writing without blocking, the helper's stderr tail
 * for messages, and reaping the helper.  Used by the launcher for each node
 * it reaches (job.c) and by a relay for each child (relay.c).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch_internal.h"
#include "net.h"

void herd__launch_link_init(herd__launch_link *l)
{
	memset(l, 0, sizeof(*l));
	l->ch = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	herd__buf_init(&l->in, HERD__LAUNCH_FRAME_MAX + 4);
	herd__buf_init(&l->out, 0);
}

void herd__launch_link_attach(herd__launch_link *l, const herd__launch_channel *ch)
{
	int fds[3] = { ch->rfd, ch->wfd, ch->errfd };

	for (int k = 0; k < 3; k++)
		if (fds[k] >= 0)
			fcntl(fds[k], F_SETFL, fcntl(fds[k], F_GETFL) | O_NONBLOCK);
	l->ch = *ch;
}

static void err_feed(herd__launch_link *l, const char *p, size_t n)
{
	const size_t max = HERD__LAUNCH_LINK_ERR_MAX;

	if (n >= max) {
		p += n - (max - 1);
		n = max - 1;
	}
	if (l->err_len + n >= max) {
		size_t drop = l->err_len + n - (max - 1);

		memmove(l->err, l->err + drop, l->err_len - drop);
		l->err_len -= drop;
	}
	memcpy(l->err + l->err_len, p, n);
	l->err_len += n;
	l->err[l->err_len] = '\0';
}

/* Bytes one fill reads at most: a helper that writes as fast as it is read
 * (a node thread of this process) would otherwise never let the read loop
 * see EAGAIN, and the frames would pile up unhandled. */
#define FILL_MAX ((size_t)1 << 20)

void herd__launch_link_read_err(herd__launch_link *l)
{
	char buf[4096];

	/* Bounded as a fill is: a helper that floods its stderr must not keep
	 * the loop here while the other helpers wait. */
	for (size_t taken = 0; l->ch.errfd >= 0 && taken < FILL_MAX;) {
		ssize_t got = read(l->ch.errfd, buf, sizeof(buf));

		if (got < 0 && errno == EINTR)
			continue;
		if (got > 0) {
			err_feed(l, buf, (size_t)got);
			taken += (size_t)got;
			continue;
		}
		/* Its end, or a descriptor that will not read again. */
		if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			close(l->ch.errfd);
			l->ch.errfd = -1;
		}
		return;
	}
}

const char *herd__launch_link_says(const herd__launch_link *l, char *buf, size_t cap)
{
	size_t n = l->err_len;

	while (n > 0 && (l->err[n - 1] == '\n' || l->err[n - 1] == '\r' || l->err[n - 1] == ' '))
		n--;
	if (n == 0)
		return "";
	snprintf(buf, cap, ": %.*s", (int)n, l->err);
	for (char *c = buf; *c != '\0'; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	return buf;
}

/* n bytes for a message: "1 MiB", "64 KiB", "1000 bytes". */
static const char *show_bytes(size_t n, char *buf, size_t cap)
{
	if (n >= ((size_t)1 << 20) && n % ((size_t)1 << 20) == 0)
		snprintf(buf, cap, "%zu MiB", n >> 20);
	else if (n >= 1024 && n % 1024 == 0)
		snprintf(buf, cap, "%zu KiB", n >> 10);
	else
		snprintf(buf, cap, "%zu bytes", n);
	return buf;
}

herd_status herd__launch_link_fill(herd__launch_link *l)
{
	for (size_t taken = 0; taken < FILL_MAX;) {
		size_t held = l->in.len - l->in.off, room = 65536;
		uint8_t *to;
		uint8_t probe;
		ssize_t got;

		/* At the limit: what was read is the caller's to consume first;
		 * if it has not, one more byte says whether the helper is done
		 * (end of stream) or has printed more than may be held. */
		if (l->in.max != 0 && held >= l->in.max) {
			if (taken > 0)
				return HERD_OK;
			to = &probe;
			room = 1;
		} else {
			if (l->in.max != 0 && room > l->in.max - held)
				room = l->in.max - held;
			HERD_CHECK(herd__buf_reserve(&l->in, room));
			to = l->in.data + l->in.len;
		}
		got = read(l->ch.rfd, to, room);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return HERD_OK;
		if (got > 0 && to == &probe) {
			char size[32];

			return herd__error(HERD_EFORMAT, "printed more than %s on its stdout, the "
					   "most herd reads from it; stopped reading it",
					   show_bytes(l->in.max, size, sizeof(size)));
		}
		if (got > 0) {
			l->in.len += (size_t)got;
			taken += (size_t)got;
			continue;
		}
		/* A helper that ended (ssh exits 255 when it cannot connect)
		 * has left its last words in its stderr pipe. */
		if (got == 0) {
			if (!l->err_elsewhere)
				herd__launch_link_read_err(l);
			return herd__error(HERD_ECLOSED, "its herd exec ended");
		}
		return herd__error_errno(HERD_ESYS, errno, "reading its channel");
	}
	return HERD_OK;
}

herd_status herd__launch_link_frame(herd__launch_link *l, const char **payload, size_t *len)
{
	herd_status st = herd__launch_frame_peek(&l->in, len);

	*payload = NULL;
	if (st != HERD_OK)
		HERD_CHECK(herd__launch_text_error(&l->in, l->framed));
	HERD_CHECK(st);
	if (*len != SIZE_MAX) {
		*payload = (const char *)l->in.data + l->in.off + 4;
		l->framed = true;
	}
	return HERD_OK;
}

/*
 * The helper closed its end (it exited, or never got going: ssh that cannot
 * connect writes its reason and exits 255).  Its last words may still be on
 * their way, so its stderr is read until it ends or wait_ms pass, and the
 * end is reported as the read side reports it.
 */
static herd_status helper_gone(herd__launch_link *l, int wait_ms)
{
	int64_t deadline = herd__net_deadline(wait_ms);

	for (;;) {
		struct pollfd pfd;
		int64_t left;

		herd__launch_link_read_err(l);
		left = deadline - herd__net_now_ms();
		if (l->ch.errfd < 0 || left <= 0)
			break;
		pfd = (struct pollfd){ .fd = l->ch.errfd, .events = POLLIN };
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			break;
	}
	return herd__error(HERD_ECLOSED, "its herd exec ended");
}

herd_status herd__launch_link_flush(herd__launch_link *l)
{
	while (l->out.len > l->out.off && l->ch.wfd >= 0) {
		ssize_t w = write(l->ch.wfd, l->out.data + l->out.off, l->out.len - l->out.off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return HERD_OK;
		if (w < 0 && errno == EPIPE)
			return helper_gone(l, HERD__LAUNCH_LINK_GONE_WAIT_MS);
		if (w <= 0)
			return herd__error_errno(HERD_ESYS, w < 0 ? errno : EPIPE,
						 "writing its channel");
		herd__buf_consume(&l->out, (size_t)w);
	}
	return HERD_OK;
}

size_t herd__launch_link_pollfds(const herd__launch_link *l, struct pollfd *fds, bool read)
{
	size_t n = 0;

	if (read && l->ch.rfd >= 0)
		fds[n++] = (struct pollfd){ .fd = l->ch.rfd, .events = POLLIN };
	if (l->ch.errfd >= 0)
		fds[n++] = (struct pollfd){ .fd = l->ch.errfd, .events = POLLIN };
	if (l->ch.wfd >= 0 && l->out.len > l->out.off)
		fds[n++] = (struct pollfd){ .fd = l->ch.wfd, .events = POLLOUT };
	return n;
}

void herd__launch_channel_close_fds(herd__launch_channel *ch)
{
	if (ch->rfd >= 0)
		close(ch->rfd);
	if (ch->wfd >= 0 && ch->wfd != ch->rfd)
		close(ch->wfd);
	if (ch->errfd >= 0)
		close(ch->errfd);
	ch->rfd = ch->wfd = ch->errfd = -1;
}

void herd__launch_link_close(herd__launch_link *l)
{
	herd__launch_channel_close_fds(&l->ch);
}

void herd__launch_link_reap(herd__launch_link *l, int wait_ms)
{
	int64_t deadline = herd__net_deadline(wait_ms);

	if (l->ch.joinable) {
		/* A node thread (local.c): its socket closed, it stops its ranks,
		 * SIGKILL after their grace period, and ends. */
		pthread_join(l->ch.thread, NULL);
		l->ch.joinable = false;
	}
	if (l->ch.pid <= 0)
		return;
	for (;;) {
		pid_t got = waitpid(l->ch.pid, NULL, WNOHANG);

		if (got == l->ch.pid || (got < 0 && errno != EINTR))
			break;
		if (got == 0 && herd__net_now_ms() >= deadline) {
			kill(l->ch.pid, SIGKILL);
			while (waitpid(l->ch.pid, NULL, 0) < 0 && errno == EINTR)
				;
			break;
		}
		if (got == 0) {
			struct timespec ts = { 0, 10 * 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	l->ch.pid = 0;
}

void herd__launch_link_free(herd__launch_link *l)
{
	herd__launch_link_close(l);
	herd__buf_free(&l->in);
	herd__buf_free(&l->out);
}
