/*
 * examples/replica.c - a model server to put behind `herd serve`: HTTP/1.1
 * with keep-alive, one thread per connection.
 *
 * The "model" is a small two-layer perceptron with fixed weights (from
 * the seed): a request's body (or its path, for a GET) is hashed into an
 * input vector, run through the model, and the answer is JSON with the
 * replica's index and the output's checksum.  --work-ms stands for the
 * accelerator's time per batch: at most --concurrency requests compute at
 * once, each taking that long, so a replica serves at most concurrency *
 * 1000 / work-ms requests a second, and a load beyond waits in line.
 *
 *   herd serve --replicas 2-4 --port 8080 --health /health --target 4 \
 *       -- build/bin/example_replica --work-ms 20
 *
 * Endpoints: GET /health (200 once the model is loaded), anything else:
 * an inference (HEAD: its headers).  Keep-alive unless the client says
 * close (or speaks HTTP/1.0); a body over 64 KiB gets 413, a chunked one
 * 501, and the connection closes.  It listens on $HERD_LISTEN:$HERD_PORT (herd serve sets
 * them; --bind and --port override; defaults 127.0.0.1:8000).
 * --start-delay MS: the model takes that long to load before the port
 * opens.  SIGTERM: it stops accepting, finishes the requests it has (10 s
 * at most), closes its connections and exits 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DIM 64
#define HIDDEN 128
#define REQ_MAX 65536

static float w1[HIDDEN][DIM], w2[HIDDEN];
static int work_ms = 5, replica;
static sem_t slots;
static atomic_int active, stopping;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void init_model(unsigned seed)
{
	for (int h = 0; h < HIDDEN; h++) {
		for (int d = 0; d < DIM; d++)
			w1[h][d] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
		w2[h] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
	}
}

/* The model on bytes: FNV-1a of each of DIM slices as the input. */
static double infer(const char *in, size_t len)
{
	float x[DIM], y = 0;

	for (int d = 0; d < DIM; d++) {
		uint32_t hsh = 2166136261u ^ (uint32_t)d;

		for (size_t i = (size_t)d; i < len; i += DIM)
			hsh = (hsh ^ (unsigned char)in[i]) * 16777619u;
		x[d] = (float)(hsh % 1000) / 1000.0f;
	}
	for (int h = 0; h < HIDDEN; h++) {
		float a = 0;

		for (int d = 0; d < DIM; d++)
			a += w1[h][d] * x[d];
		y += w2[h] * tanhf(a);
	}
	return y;
}

/* What read_request found besides a request. */
#define REQ_CLOSED 0         /* the peer closed, or idle at a stop */
#define REQ_BROKEN (-1)      /* a read failed */
#define REQ_TOO_BIG (-2)     /* over REQ_MAX: 413 */
#define REQ_CHUNKED (-3)     /* a chunked body, which this server does not take: 501 */
#define REQ_BAD (-4)         /* a Content-Length that is not a number: 400 */

/* A header's value (name with its colon, lower case) within the headers, or NULL. */
static const char *header(const char *buf, const char *end, const char *name)
{
	for (const char *h = strcasestr(buf, name); h != NULL && h < end;
	     h = strcasestr(h + 1, name))
		if (h > buf && h[-1] == '\n')
			return h + strlen(name);
	return NULL;
}

/* Reads until a whole request (headers and Content-Length body) is in buf. */
static ssize_t read_request(int fd, char *buf, size_t *have, size_t *body_at, size_t *body_len)
{
	for (;;) {
		char *end = memmem(buf, *have, "\r\n\r\n", 4);

		if (end != NULL) {
			const char *cl = header(buf, end, "content-length:");
			const char *te = header(buf, end, "transfer-encoding:");
			unsigned long long n = 0;
			char *stop = NULL;

			if (te != NULL)
				return REQ_CHUNKED;
			*body_at = (size_t)(end + 4 - buf);
			if (cl != NULL) {
				errno = 0;
				n = strtoull(cl, &stop, 10);
				if (errno != 0 || stop == cl || (*stop != '\r' && *stop != ' '))
					return REQ_BAD;
			}
			if (n > REQ_MAX - 1 - *body_at)
				return REQ_TOO_BIG;
			*body_len = (size_t)n;
			if (*have >= *body_at + *body_len)
				return (ssize_t)(*body_at + *body_len);
		}
		if (*have >= REQ_MAX - 1)
			return REQ_TOO_BIG;
		{
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int rc = poll(&p, 1, 200);
			ssize_t n;

			if (rc == 0 || (rc < 0 && errno == EINTR)) {
				if (atomic_load(&stopping) && *have == 0)
					return REQ_CLOSED;   /* idle at a stop: close */
				continue;
			}
			n = read(fd, buf + *have, REQ_MAX - 1 - *have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n == 0 ? REQ_CLOSED : REQ_BROKEN;
			*have += (size_t)n;
			buf[*have] = '\0';
		}
	}
}

static const char *reason(int code)
{
	/* The codes this server answers: 200, 413, 501, and 400. */
	return code == 200 ? "OK" : code == 413 ? "Content Too Large"
	       : code == 501 ? "Not Implemented" : "Bad Request";
}

/* The answer; with_body false for a HEAD (its headers say the length all the same). */
static void answer(int fd, int code, const char *body, bool with_body, bool close_after)
{
	char head[256];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: %s\r\n\r\n", code, reason(code),
			 strlen(body), close_after ? "close" : "keep-alive");

	if (send(fd, head, (size_t)n, MSG_NOSIGNAL | (with_body ? MSG_MORE : 0)) < 0 ||
	    (with_body && send(fd, body, strlen(body), MSG_NOSIGNAL) < 0))
		return;
}

/* Whether the client asked to close after this request (HTTP/1.0 unless keep-alive). */
static bool wants_close(const char *buf, size_t head_len)
{
	const char *end = buf + head_len, *c = header(buf, end, "connection:");
	const char *line_end = memchr(buf, '\r', head_len);
	bool v10 = line_end != NULL && line_end - buf >= 8 && memcmp(line_end - 8, "HTTP/1.0", 8) == 0;

	while (c != NULL && *c == ' ')
		c++;
	if (c != NULL && strncasecmp(c, "close", 5) == 0)
		return true;
	return v10 && (c == NULL || strncasecmp(c, "keep-alive", 10) != 0);
}

static void *connection(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc(REQ_MAX);
	size_t have = 0;

	while (buf != NULL) {
		size_t body_at = 0, body_len = 0;
		ssize_t used = read_request(fd, buf, &have, &body_at, &body_len);
		char out[256];
		bool health, head, close_after;

		if (used == REQ_TOO_BIG || used == REQ_CHUNKED || used == REQ_BAD) {
			int code = used == REQ_TOO_BIG ? 413 : used == REQ_CHUNKED ? 501 : 400;

			snprintf(out, sizeof(out), "{\"replica\":%d,\"error\":\"%s\"}", replica,
				 reason(code));
			answer(fd, code, out, true, true);
			break;
		}
		if (used <= 0)
			break;
		head = strncmp(buf, "HEAD ", 5) == 0;
		health = strncmp(buf, head ? "HEAD /health " : "GET /health ", head ? 13 : 12) == 0;
		close_after = wants_close(buf, body_at);
		atomic_fetch_add(&active, 1);
		if (health) {
			snprintf(out, sizeof(out), "{\"replica\":%d,\"ok\":true}", replica);
		} else {
			double t0, y;
			const char *in = body_len > 0 ? buf + body_at : buf;
			size_t len = body_len > 0 ? body_len : strcspn(buf, "\r");

			while (sem_wait(&slots) != 0 && errno == EINTR)
				;
			t0 = now_s();
			y = infer(in, len);
			while (now_s() - t0 < work_ms / 1000.0)
				usleep(500);
			sem_post(&slots);
			snprintf(out, sizeof(out), "{\"replica\":%d,\"y\":%.6f}", replica, y);
		}
		close_after = close_after || atomic_load(&stopping);
		answer(fd, 200, out, !head, close_after);
		atomic_fetch_sub(&active, 1);
		memmove(buf, buf + used, have - (size_t)used);
		have -= (size_t)used;
		if (close_after)
			break;
	}
	free(buf);
	close(fd);
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stopping, 1);
}

int main(int argc, char **argv)
{
	const char *bind_to = getenv("HERD_LISTEN"), *port_env = getenv("HERD_PORT");
	const char *rep = getenv("HERD_REPLICA");
	int port = port_env != NULL ? atoi(port_env) : 8000, concurrency = 1, start_delay = 0;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct sigaction act = { .sa_handler = on_term, .sa_flags = SA_RESTART };
	int one = 1, lfd;
	double stop_at;

	replica = rep != NULL ? atoi(rep) : 0;
	if (bind_to == NULL)
		bind_to = "127.0.0.1";
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v != NULL && strcmp(argv[i], "--work-ms") == 0)
			work_ms = atoi(v);
		else if (v != NULL && strcmp(argv[i], "--concurrency") == 0)
			concurrency = atoi(v);
		else if (v != NULL && strcmp(argv[i], "--start-delay") == 0)
			start_delay = atoi(v);
		else if (v != NULL && strcmp(argv[i], "--port") == 0)
			port = atoi(v);
		else if (v != NULL && strcmp(argv[i], "--bind") == 0)
			bind_to = v;
		else {
			fprintf(stderr, "replica: unknown option %s (--work-ms, --concurrency, "
				"--start-delay, --port, --bind)\n", argv[i]);
			return 2;
		}
		i++;
	}
	if (work_ms < 0 || concurrency < 1 || port < 1 || port > 65535 ||
	    inet_pton(AF_INET, bind_to, &sa.sin_addr) != 1) {
		fprintf(stderr, "replica: a bad --work-ms, --concurrency, --port or --bind\n");
		return 2;
	}
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	signal(SIGPIPE, SIG_IGN);
	sem_init(&slots, 0, (unsigned)concurrency);
	init_model(1);
	if (start_delay > 0)
		usleep((useconds_t)start_delay * 1000);
	sa.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 512) != 0) {
		fprintf(stderr, "replica %d: cannot listen on %s:%d: %s\n", replica, bind_to, port,
			strerror(errno));
		return 1;
	}
	printf("replica %d listening on %s:%d (work %d ms, %d at once)\n", replica, bind_to, port,
	       work_ms, concurrency);
	fflush(stdout);
	while (!atomic_load(&stopping)) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		pthread_t t;
		int c;

		if (poll(&p, 1, 200) <= 0)
			continue;
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, connection, (void *)(intptr_t)c) != 0)
			close(c);
		else
			pthread_detach(t);
	}
	close(lfd);
	/* Finish what is in flight, 10 s at most. */
	stop_at = now_s() + 10;
	while (atomic_load(&active) > 0 && now_s() < stop_at)
		usleep(10 * 1000);
	printf("replica %d stopped: %d requests unfinished\n", replica, atomic_load(&active));
	return 0;
}
