/*
 * shell/cmd_exporter.c - herd exporter: this node's telemetry for
 * Prometheus over HTTP (GET /metrics, herd_telemetry_exposition's text).
 *
 * One thread polls the listening socket, the clients and the sampler's
 * descriptor.  The text is built once per sample and copied into each
 * answer, so a scrape costs a copy and a write.  Every connection answers
 * one request and closes (Connection: close); its head is at most
 * HEAD_MAX bytes and it has CONN_DEADLINE_MS from accept to its last byte
 * sent; at most MAX_CLIENTS are served at once (more wait in the backlog).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "herd/telemetry.h"
#include "shell.h"

#define HEAD_MAX 8192
#define CONN_DEADLINE_MS 5000
#define MAX_CLIENTS 64
#define DEFAULT_LISTEN "127.0.0.1:9400"

static const char exporter_usage[] =
	"usage: herd exporter [--listen ADDR:PORT] [--period MS]\n"
	"\n"
	"Serves this node's telemetry in the Prometheus text format: GET /metrics\n"
	"answers the newest sample (GPUs under the DCGM exporter's names and labels,\n"
	"DCGM_FI_DEV_GPU_UTIL, ...; the node under herd_node_*; the GPU processes\n"
	"and their jobs under herd_gpu_*, herd_job_ranks).  Stops at SIGTERM or SIGINT.\n"
	"  --listen ADDR:PORT  the address to serve on (default 127.0.0.1:9400, the\n"
	"                      DCGM exporter's port, loopback only; 0.0.0.0:9400 for\n"
	"                      every interface, [::1]:9400 for IPv6)\n"
	"  --period MS         milliseconds between samples (default 1000, 10 to 3600000)\n"
	"Exit status:\n"
	"  0    stopped by SIGTERM or SIGINT\n"
	"  1    the address cannot be listened on, or this node cannot be sampled\n"
	"  2    a usage error\n";

static const char short_options[] = ":h";

static const struct option long_options[] = {
	{ "listen", required_argument, NULL, 'l' },
	{ "period", required_argument, NULL, 'p' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static const char index_page[] =
	"<!DOCTYPE html>\n<html><head><title>herd exporter</title></head><body>\n"
	"<h1>herd exporter</h1>\n<p><a href=\"/metrics\">/metrics</a>: this node's telemetry in "
	"the Prometheus text format.</p>\n</body></html>\n";

typedef struct client {
	int fd;
	int64_t deadline;    /* monotonic ms */
	size_t len;          /* bytes of the head read */
	char head[HEAD_MAX + 1];
	int phase;           /* READING the head, WRITING the answer, DRAINING what
				the client still sends after it (so that closing
				does not reset the answer away) */
	char *out;           /* the answer, once the head is read */
	size_t out_len, out_off;
} client;

enum { READING, WRITING, DRAINING };

typedef struct exporter {
	int lfd;
	herd_telemetry *tel;
	uint64_t seq;
	char *text;          /* the exposition of the newest sample */
	size_t text_len;
	herd_telemetry_sample *sample;
	client *clients[MAX_CLIENTS];
	int nclients;
} exporter;

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ADDR:PORT (ADDR may be [IPv6]) into a bound, listening socket; -1 after saying why. */
static int listen_on(const char *spec)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	const char *h = spec;
	size_t hlen;
	struct addrinfo hints, *ai = NULL;
	int port, fd, one = 1, rc;

	if (colon == NULL || shell_parse_int(colon + 1, 0, 65535, &port) != 0) {
		shell_usage_error("exporter", "--listen %s: expected ADDR:PORT (127.0.0.1:9400)",
				  spec);
		return -2;
	}
	hlen = (size_t)(colon - spec);
	if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
		h = spec + 1;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(host)) {
		shell_usage_error("exporter", "--listen %s: expected ADDR:PORT (127.0.0.1:9400)",
				  spec);
		return -2;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0) {
		shell_usage_error("exporter", "--listen %s: expected a numeric address and port "
				  "(127.0.0.1:9400, [::1]:9400)", spec);
		return -2;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		int err = errno;

		fprintf(stderr, "herd exporter: --listen %s: %s\n", spec,
			err == EADDRINUSE ? "address already in use" : strerror(err));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* The address fd listens on, as ADDR:PORT or [ADDR]:PORT (the port --listen's 0 chose). */
static void bound_address(int fd, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(out, cap, "[%s]:%d", host, port);
		return;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	}
	snprintf(out, cap, "%s:%d", host, port);
}

/* The newest sample's text, when a newer sample than the one served came. */
static int refresh(exporter *e)
{
	uint64_t seq = e->seq;
	herd_status st;
	char *text = NULL;
	size_t len = 0;
	int got = 0;

	while ((st = herd_telemetry_next(e->tel, &seq, e->sample)) == HERD_OK)
		got = 1;
	if (st != HERD_ENOTFOUND) {
		fprintf(stderr, "herd exporter: %s\n", herd_last_error());
		return -1;
	}
	if (!got)
		return 0;
	e->seq = seq;
	if (herd_telemetry_exposition(e->sample, &text, &len) != HERD_OK) {
		fprintf(stderr, "herd exporter: %s\n", herd_last_error());
		return -1;
	}
	free(e->text);
	e->text = text;
	e->text_len = len;
	return 0;
}

static void client_close(exporter *e, int i)
{
	client *c = e->clients[i];

	close(c->fd);
	free(c->out);
	free(c);
	e->clients[i] = e->clients[--e->nclients];
}

/* The answer: status line, headers, and body (left out for HEAD). */
static void answer(client *c, const char *status, const char *type, const char *extra,
		   const char *body, size_t body_len, int head_only)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
			 "Connection: close\r\n\r\n",
			 status, type, body_len, extra);
	size_t total = (size_t)n + (head_only ? 0 : body_len);

	c->out = malloc(total);
	if (c->out == NULL)
		return; /* still READING: closed as a failed client */
	c->phase = WRITING;
	memcpy(c->out, hdr, (size_t)n);
	if (!head_only)
		memcpy(c->out + n, body, body_len);
	c->out_len = total;
	c->out_off = 0;
}

static void answer_text(client *c, const char *status, const char *extra, const char *msg)
{
	answer(c, status, "text/plain; charset=utf-8", extra, msg, strlen(msg), 0);
}

/* The head is complete in c->head: the answer to it. */
static void serve(exporter *e, client *c)
{
	char method[16], target[HEAD_MAX], version[16];
	char *line_end = strpbrk(c->head, "\r\n");
	int head_only;

	*line_end = '\0';
	if (sscanf(c->head, "%15s %8191s %15s", method, target, version) != 3 ||
	    (strcmp(version, "HTTP/1.0") != 0 && strcmp(version, "HTTP/1.1") != 0) ||
	    target[0] != '/') {
		answer_text(c, "400 Bad Request", "", "bad request\n");
		return;
	}
	head_only = strcmp(method, "HEAD") == 0;
	if (strcmp(method, "GET") != 0 && !head_only) {
		answer_text(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n",
			    "method not allowed: GET /metrics\n");
		return;
	}
	target[strcspn(target, "?#")] = '\0';
	if (strcmp(target, "/metrics") == 0)
		answer(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", "", e->text,
		       e->text_len, head_only);
	else if (strcmp(target, "/") == 0)
		answer(c, "200 OK", "text/html; charset=utf-8", "", index_page,
		       sizeof(index_page) - 1, head_only);
	else
		answer_text(c, "404 Not Found", "", "not found: GET /metrics\n");
}

/* Reads what the client sent; 0 to keep it, -1 to close it. */
static int client_read(exporter *e, client *c)
{
	char junk[4096];
	ssize_t n;

	if (c->phase == DRAINING) {
		n = recv(c->fd, junk, sizeof(junk), 0);
		return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)) ? 0 : -1;
	}
	n = recv(c->fd, c->head + c->len, HEAD_MAX - c->len, 0);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1; /* closed before a whole head */
	c->len += (size_t)n;
	c->head[c->len] = '\0';
	if (strstr(c->head, "\r\n\r\n") != NULL || strstr(c->head, "\n\n") != NULL)
		serve(e, c);
	else if (c->len == HEAD_MAX)
		answer_text(c, "431 Request Header Fields Too Large", "",
			    "request head over 8 KiB\n");
	else if (memchr(c->head, '\0', c->len) != NULL)
		answer_text(c, "400 Bad Request", "", "bad request\n");
	return c->phase == WRITING || c->len < HEAD_MAX ? 0 : -1;
}

/* Sends what is left of the answer, then drains; 0 to keep the client, -1 to close it. */
static int client_write(client *c)
{
	ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	c->out_off += (size_t)n;
	if (c->out_off == c->out_len) {
		shutdown(c->fd, SHUT_WR);
		c->phase = DRAINING;
	}
	return 0;
}

static void accept_clients(exporter *e)
{
	while (e->nclients < MAX_CLIENTS) {
		int fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		client *c;

		if (fd < 0)
			return; /* EAGAIN, or a connection reset before accept */
		c = malloc(sizeof(*c));
		if (c == NULL) {
			close(fd);
			return;
		}
		c->fd = fd;
		c->deadline = now_ms() + CONN_DEADLINE_MS;
		c->len = 0;
		c->head[0] = '\0';
		c->phase = READING;
		c->out = NULL;
		c->out_len = c->out_off = 0;
		e->clients[e->nclients++] = c;
	}
}

static int serve_loop(exporter *e, const sigset_t *unblocked)
{
	struct pollfd pfd[MAX_CLIENTS + 2];

	while (!stop_signal) {
		int64_t now = now_ms(), next = now + 60000;
		int n = 0, tfd = herd_telemetry_fd(e->tel);
		struct timespec ts;

		pfd[n++] = (struct pollfd){ .fd = tfd, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = e->nclients < MAX_CLIENTS ? e->lfd : -1,
					    .events = POLLIN };
		for (int i = 0; i < e->nclients; i++) {
			client *c = e->clients[i];

			pfd[n++] = (struct pollfd){ .fd = c->fd,
						    .events = c->phase == WRITING ? POLLOUT : POLLIN };
			if (c->deadline < next)
				next = c->deadline;
		}
		ts.tv_sec = next > now ? (next - now) / 1000 : 0;
		ts.tv_nsec = next > now ? (long)((next - now) % 1000) * 1000000 : 0;
		if (ppoll(pfd, (nfds_t)n, &ts, unblocked) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "herd exporter: waiting for connections and samples: %s\n", strerror(errno));
			return SHELL_EXIT_FAILURE;
		}
		if ((pfd[0].revents & POLLIN) && refresh(e) != 0)
			return SHELL_EXIT_FAILURE;
		/* Clients first, from the end: client_close moves the last into i. */
		now = now_ms();
		for (int i = e->nclients - 1; i >= 0; i--) {
			client *c = e->clients[i];
			short rev = pfd[2 + i].revents;
			int rc = 0;

			int was = c->phase;

			if (rev & (POLLIN | POLLOUT | POLLERR | POLLHUP))
				rc = was == WRITING ? client_write(c) : client_read(e, c);
			if (rc == 0 && was == READING && c->phase == WRITING)
				rc = client_write(c); /* the answer at once, mostly whole */
			if (rc != 0 || now >= c->deadline)
				client_close(e, i);
		}
		if (pfd[1].revents & POLLIN)
			accept_clients(e);
	}
	return SHELL_EXIT_OK;
}

int cmd_exporter(int argc, char **argv)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	const char *listen_spec = DEFAULT_LISTEN;
	exporter e = { .lfd = -1 };
	shell_args args;
	struct sigaction sa;
	sigset_t block, unblocked, old;
	char where[INET6_ADDRSTRLEN + 16];
	int c, status;

	status = shell_args_check("exporter", argc, argv, short_options, long_options, NULL, &args);
	if (status != 0) {
		shell_args_free(&args);
		return status;
	}
	opterr = 0;
	optind = 1;
	while (status == 0 &&
	       (c = getopt_long(args.argc, args.argv, short_options, long_options, NULL)) != -1) {
		if (c == 'h') {
			fputs(exporter_usage, stdout);
			shell_args_free(&args);
			return SHELL_EXIT_OK;
		} else if (c == 'l') {
			listen_spec = optarg;
		} else if (c == 'p') {
			if (shell_parse_int(optarg, 10, 3600000, &o.period_ms) != 0)
				status = shell_usage_error("exporter", "--period %s: expected "
							   "milliseconds from 10 to 3600000", optarg);
		} else if (c == ':') {
			status = shell_usage_error("exporter", "option '%s' needs a value",
						   args.argv[optind - 1]);
		} else {
			status = shell_usage_error("exporter", "unrecognized option '%s'",
						   args.argv[optind - 1]);
		}
	}
	if (status == 0 && optind < args.argc)
		status = shell_usage_error("exporter", "unexpected argument '%s'", args.argv[optind]);
	if (status != 0) {
		shell_args_free(&args);
		return status;
	}

	/* SIGTERM and SIGINT only while in ppoll: no stop is lost between checks. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &old);
	unblocked = old;
	sigdelset(&unblocked, SIGTERM);
	sigdelset(&unblocked, SIGINT);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	status = SHELL_EXIT_FAILURE;
	e.lfd = listen_on(listen_spec);
	if (e.lfd < 0) {
		status = e.lfd == -2 ? SHELL_EXIT_USAGE : SHELL_EXIT_FAILURE;
		goto out;
	}
	o.ring_size = 4;
	e.sample = malloc(sizeof(*e.sample));
	if (e.sample == NULL) {
		fprintf(stderr, "herd exporter: out of memory\n");
		goto out;
	}
	/* The first sample before serving, so that /metrics always has one. */
	if (herd_telemetry_create(&e.tel, &o) != HERD_OK ||
	    herd_telemetry_take(e.tel, e.sample) != HERD_OK ||
	    herd_telemetry_exposition(e.sample, &e.text, &e.text_len) != HERD_OK ||
	    herd_telemetry_start(e.tel) != HERD_OK) {
		fprintf(stderr, "herd exporter: %s\n", herd_last_error());
		goto out;
	}
	e.seq = e.sample->seq;
	bound_address(e.lfd, where, sizeof(where));
	fprintf(stderr, "herd exporter: serving http://%s/metrics\n", where);
	status = serve_loop(&e, &unblocked);
out:
	while (e.nclients > 0)
		client_close(&e, e.nclients - 1);
	herd_telemetry_free(e.tel);
	if (e.lfd >= 0)
		close(e.lfd);
	free(e.text);
	free(e.sample);
	shell_args_free(&args);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}
