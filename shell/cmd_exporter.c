/*
 * shell/cmd_exporter.c - herd exporter: this node's telemetry and herd's
 * own counters over HTTP in Prometheus' text format (herd/metrics.h),
 * GPU figures under DCGM exporter's names.
 *
 * One thread serves: a poll loop over the listening socket, a signalfd
 * for SIGTERM and SIGINT, and at most MAX_CONNS connections, each with a
 * deadline for the whole exchange and a bounded request; the sampler
 * (herd/telemetry.h) runs on its own thread on its period, so that a
 * scrape costs the copy of the latest sample and the reading of herd's
 * counters, not a sample.  HTTP/1.0 and 1.1, one request per connection
 * (Connection: close).
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

static const char exporter_usage[] =
	"usage: herd exporter [--listen ADDR:PORT] [--period MS]\n"
	"\n"
	"Serves this node's GPU and node telemetry and herd's own counters (jobs,\n"
	"GPU leases, collective calls) over HTTP at /metrics, in Prometheus' text\n"
	"format, GPU figures under NVIDIA's DCGM exporter names and labels\n"
	"(DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...). It binds to the loopback\n"
	"address only, unless --listen says otherwise.\n"
	"  --listen ADDR:PORT  where to listen (default 127.0.0.1:9400, DCGM\n"
	"                      exporter's port); 0.0.0.0:PORT or :PORT: every IPv4\n"
	"                      interface, [::]:PORT: every interface; port 0: a free\n"
	"                      one\n"
	"  --period MS         milliseconds between samples (default 1000, 100 to\n"
	"                      3600000); a scrape serves the latest sample\n"
	"Once listening it prints the address it serves on standard output.\n"
	"Collective counters come from $HERD_STATS_DIR, else /run/herd/stats (made\n"
	"here when missing, mode 1777), else $XDG_RUNTIME_DIR/herd/stats.\n"
	"SIGTERM or SIGINT (Ctrl-C) stops it.\n"
	"Exit status:\n"
	"  0    stopped by SIGTERM or SIGINT\n"
	"  1    it cannot listen (the port is taken, the address is not this\n"
	"       host's) or cannot sample\n"
	"  2    a usage error\n";

#define DEFAULT_LISTEN "127.0.0.1:9400"
/* Connections served at once; more wait in the listen queue. */
#define MAX_CONNS 16
/* A request's line and headers; a longer one is answered 431. */
#define REQUEST_MAX 8192
/* The whole exchange of one connection, reading and writing. */
#define CONN_DEADLINE_MS 10000

typedef struct conn {
	int fd;                     /* -1: free */
	char in[REQUEST_MAX];
	size_t inlen;
	char *out;                  /* the response, once the request is whole */
	size_t outlen, outoff;
	bool draining;              /* sent and shut down: reading to the end */
	int64_t deadline;
} conn;

typedef struct server {
	herd_telemetry *t;
	herd_metrics *m;
	herd_telemetry_sample *sample;
	conn conns[MAX_CONNS];
} server;

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int usage_error(const char *fmt, const char *arg)
{
	return shell_usage_error("exporter", fmt, arg);
}

/*
 * "HOST:PORT", "[V6]:PORT" or ":PORT" into *res (getaddrinfo's); 0, or
 * SHELL_EXIT_USAGE after saying what is wrong.
 */
static int parse_listen(const char *arg, struct addrinfo **res)
{
	struct addrinfo hints;
	char host[256], msg[512];
	const char *colon, *port;
	char *end;
	long p;
	int rc;

	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');

		if (close == NULL || close[1] != ':' || (size_t)(close - arg - 1) >= sizeof(host))
			return usage_error("--listen %s: expected ADDR:PORT ([ADDR]:PORT for IPv6)", arg);
		snprintf(host, sizeof(host), "%.*s", (int)(close - arg - 1), arg + 1);
		port = close + 2;
	} else {
		colon = strrchr(arg, ':');
		if (colon == NULL || (size_t)(colon - arg) >= sizeof(host) ||
		    memchr(arg, ':', (size_t)(colon - arg)) != NULL)
			return usage_error("--listen %s: expected ADDR:PORT ([ADDR]:PORT for IPv6)", arg);
		snprintf(host, sizeof(host), "%.*s", (int)(colon - arg), arg);
		port = colon + 1;
	}
	errno = 0;
	p = strtol(port, &end, 10);
	if (errno != 0 || end == port || *end != '\0' || p < 0 || p > 65535)
		return usage_error("--listen %s: the port must be a number from 0 to 65535", arg);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	hints.ai_family = host[0] == '\0' ? AF_INET : AF_UNSPEC;
	rc = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, res);
	if (rc != 0) {
		snprintf(msg, sizeof(msg), "--listen %s: %s", arg,
			 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return usage_error("%s", msg);
	}
	return 0;
}

/* "127.0.0.1:9400" or "[::1]:9400" of a bound socket. */
static void sock_name(int fd, char *buf, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, cap, "?");
		return;
	}
	snprintf(buf, cap, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

/* The listening socket; -1 after saying why on stderr. */
static int listen_on(const char *arg, const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	char msg[512];

	if (fd < 0) {
		snprintf(msg, sizeof(msg), "cannot make a socket for --listen %s: %s", arg,
			 strerror(errno));
		shell_message(shell_command, msg);
		return -1;
	}
	/* A restart reuses the port at once, past its old connections'
	 * TIME_WAIT; a port another socket listens on is still refused. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
		int err = errno;

		snprintf(msg, sizeof(msg), "cannot listen on %s (--listen): %s%s", arg, strerror(err),
			 err == EADDRINUSE ? "; another program has that port: give another with "
					     "--listen ADDR:PORT"
			 : err == EADDRNOTAVAIL ? "; that address is not one of this host's" : "");
		shell_message(shell_command, msg);
		close(fd);
		return -1;
	}
	return fd;
}

static const char index_html[] =
	"<!DOCTYPE html>\n<html><head><title>herd exporter</title></head><body>\n"
	"<h1>herd exporter</h1>\n"
	"<p>This node's GPU and node telemetry and herd's counters, in Prometheus' text "
	"format: <a href=\"/metrics\">/metrics</a>.</p>\n</body></html>\n";

/* The whole response into c->out: status line, headers, body (none for HEAD). */
static void respond(conn *c, const char *version, int code, const char *reason,
		    const char *type, const char *extra, const char *body, size_t len, bool head)
{
	int n = snprintf(NULL, 0, "%s %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "%sConnection: close\r\n\r\n", version, code, reason, type, len, extra);
	size_t total = (size_t)n + (head ? 0 : len);

	c->out = malloc(total + 1);
	if (c->out == NULL) {
		c->outlen = 0;
		return;
	}
	snprintf(c->out, (size_t)n + 1, "%s %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		 "%sConnection: close\r\n\r\n", version, code, reason, type, len, extra);
	if (!head)
		memcpy(c->out + n, body, len);
	c->outlen = total;
	c->outoff = 0;
}

static void respond_text(conn *c, const char *version, int code, const char *reason,
			 const char *extra, const char *text, bool head)
{
	respond(c, version, code, reason, "text/plain; charset=utf-8", extra, text, strlen(text),
		head);
}

/* The scrape: the latest sample (none yet: herd's counters only) and the
 * counters as they are. */
static void serve_metrics(server *s, conn *c, const char *version, bool head)
{
	herd_status st = herd_telemetry_latest(s->t, s->sample);
	char *text = NULL, msg[600];
	size_t len = 0;

	if (herd_metrics_write(s->m, st == HERD_OK ? s->sample : NULL, &text, &len) != HERD_OK) {
		snprintf(msg, sizeof(msg), "cannot write the metrics: %s\n", shell_last_error());
		respond_text(c, version, 500, "Internal Server Error", "", msg, head);
		return;
	}
	respond(c, version, 200, "OK", HERD_METRICS_CONTENT_TYPE, "", text, len, head);
	free(text);
}

/* The request in c->in is whole: the response into c->out. */
static void handle(server *s, conn *c)
{
	char method[16], target[1024], ver[8], version[16];
	bool head;
	size_t plen;

	c->in[c->inlen < REQUEST_MAX ? c->inlen : REQUEST_MAX - 1] = '\0';
	if (sscanf(c->in, "%15[A-Z] %1023[^ \r\n] HTTP/%7[0-9.]", method, target, ver) != 3 ||
	    (strcmp(ver, "1.0") != 0 && strcmp(ver, "1.1") != 0)) {
		respond_text(c, "HTTP/1.1", 400, "Bad Request", "",
			     "a request line METHOD PATH HTTP/1.0 or HTTP/1.1 was expected\n", false);
		return;
	}
	snprintf(version, sizeof(version), "HTTP/%s", ver);
	head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		respond_text(c, version, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
			     "only GET and HEAD\n", false);
		return;
	}
	plen = strcspn(target, "?#");
	if (plen == 8 && strncmp(target, "/metrics", 8) == 0)
		serve_metrics(s, c, version, head);
	else if (plen == 1 && target[0] == '/')
		respond(c, version, 200, "OK", "text/html; charset=utf-8", "", index_html,
			sizeof(index_html) - 1, head);
	else
		respond_text(c, version, 404, "Not Found", "", "not found: the metrics are at "
			     "/metrics\n", head);
}

static void conn_close(conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
}

/* Whether the request's header has ended (a blank line). */
static bool header_done(const conn *c)
{
	for (size_t i = 0; i + 1 < c->inlen; i++)
		if (c->in[i] == '\n' && (c->in[i + 1] == '\n' ||
					 (c->in[i + 1] == '\r' && i + 2 < c->inlen &&
					  c->in[i + 2] == '\n')))
			return true;
	return false;
}

static void on_readable(server *s, conn *c)
{
	char sink[4096];
	ssize_t r;

	if (c->draining) {
		r = recv(c->fd, sink, sizeof(sink), 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	r = recv(c->fd, c->in + c->inlen, REQUEST_MAX - c->inlen, 0);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		conn_close(c); /* gone before asking */
		return;
	}
	c->inlen += (size_t)r;
	if (header_done(c))
		handle(s, c);
	else if (c->inlen == REQUEST_MAX)
		respond_text(c, "HTTP/1.1", 431, "Request Header Fields Too Large", "",
			     "the request is longer than 8192 bytes\n", false);
	if (c->out == NULL && (header_done(c) || c->inlen == REQUEST_MAX))
		conn_close(c); /* out of memory for the response */
}

static void on_writable(conn *c)
{
	ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

	if (w < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(c);
		return;
	}
	c->outoff += (size_t)w;
	if (c->outoff < c->outlen)
		return;
	/* Sent: let the client read it before the close, even with bytes of
	 * its request unread here (a close would reset the connection). */
	shutdown(c->fd, SHUT_WR);
	free(c->out);
	c->out = NULL;
	c->draining = true;
}

static void accept_all(server *s, int lfd)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		conn *c = &s->conns[i];
		int fd;

		if (c->fd >= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN, or a connection that went away */
		c->fd = fd;
		c->inlen = 0;
		c->out = NULL;
		c->draining = false;
		c->deadline = mono_ms() + CONN_DEADLINE_MS;
	}
}

/* Serves until SIGTERM or SIGINT. */
static int serve(server *s, int lfd, int sfd)
{
	struct pollfd pfd[2 + MAX_CONNS];
	int who[2 + MAX_CONNS];

	for (;;) {
		int n = 0, nfree = 0, timeout = -1;
		int64_t now = mono_ms();

		pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (int i = 0; i < MAX_CONNS; i++) {
			conn *c = &s->conns[i];

			if (c->fd >= 0 && now >= c->deadline)
				conn_close(c); /* too slow to ask or to read */
			if (c->fd < 0) {
				nfree++;
				continue;
			}
			who[n] = i;
			pfd[n++] = (struct pollfd){ .fd = c->fd,
						    .events = c->out != NULL ? POLLOUT : POLLIN };
			if (timeout < 0 || c->deadline - now < timeout)
				timeout = (int)(c->deadline - now);
		}
		/* Full: new connections wait in the listen queue. */
		if (nfree > 0) {
			who[n] = -1;
			pfd[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "herd exporter: waiting for connections: %s\n", strerror(errno));
			return SHELL_EXIT_FAILURE;
		}
		if (pfd[0].revents & POLLIN)
			return SHELL_EXIT_OK;
		for (int k = 1; k < n; k++) {
			conn *c;

			if (pfd[k].revents == 0)
				continue;
			if (who[k] < 0) {
				accept_all(s, lfd);
				continue;
			}
			c = &s->conns[who[k]];
			if (c->out != NULL && (pfd[k].revents & (POLLOUT | POLLERR | POLLHUP)))
				on_writable(c);
			else if (c->out == NULL)
				on_readable(s, c);
		}
	}
}

static const struct option long_options[] = {
	{ "listen", required_argument, NULL, 'L' },
	{ "period", required_argument, NULL, 'p' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* The command line into *listen and *period; -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, const char **listen_arg, int *period)
{
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(exporter_usage, stdout);
			return SHELL_EXIT_OK;
		case 'L':
			*listen_arg = optarg;
			break;
		case 'p':
			if (shell_parse_int(optarg, 100, 3600000, period) != 0)
				return usage_error("--period %s: expected milliseconds from 100 to "
						   "3600000", optarg);
			break;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unrecognized option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return -1;
}

int cmd_exporter(int argc, char **argv)
{
	herd_telemetry_opts to = HERD_TELEMETRY_OPTS_INIT;
	const char *listen_arg = DEFAULT_LISTEN, *why, *dir;
	struct addrinfo *ai = NULL;
	server *s = NULL;
	shell_args args;
	sigset_t stop;
	int status, lfd = -1, sfd = -1, period = 1000;
	char where[300];

	status = shell_args_check("exporter", argc, argv, "h", long_options, NULL, &args);
	if (status == 0)
		status = parse_args(args.argc, args.argv, &listen_arg, &period);
	shell_args_free(&args);
	if (status >= 0)
		return status;
	if ((status = parse_listen(listen_arg, &ai)) != 0)
		return status;
	status = SHELL_EXIT_FAILURE;
	/* Blocked before any thread starts, so that every thread leaves them
	 * to the signalfd. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
	s = calloc(1, sizeof(*s));
	for (int i = 0; s != NULL && i < MAX_CONNS; i++)
		s->conns[i].fd = -1;
	if (sfd < 0 || s == NULL || (s->sample = malloc(sizeof(*s->sample))) == NULL) {
		shell_message(shell_command, sfd < 0 ? "cannot make a signal descriptor"
						     : "out of memory");
		goto out;
	}
	lfd = listen_on(listen_arg, ai);
	if (lfd < 0)
		goto out;
	to.period_ms = period;
	to.ring_size = 2;
	if (herd_metrics_create(&s->m, NULL) != HERD_OK ||
	    herd_telemetry_create(&s->t, &to) != HERD_OK || herd_telemetry_start(s->t) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		goto out;
	}
	sock_name(lfd, where, sizeof(where));
	dir = herd_metrics_stats_dir(s->m, &why);
	printf("herd exporter: serving http://%s/metrics (collective counters: %s%s)\n", where,
	       dir != NULL ? dir : "off, ", dir != NULL ? "" : why);
	fflush(stdout);
	status = serve(s, lfd, sfd);
out:
	if (s != NULL) {
		for (int i = 0; i < MAX_CONNS; i++)
			conn_close(&s->conns[i]);
		herd_telemetry_free(s->t);
		herd_metrics_free(s->m);
		free(s->sample);
		free(s);
	}
	if (lfd >= 0)
		close(lfd);
	if (sfd >= 0)
		close(sfd);
	freeaddrinfo(ai);
	return status;
}
