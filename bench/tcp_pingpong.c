/*
 * bench/tcp_pingpong.c - the round trip of 8 bytes over one TCP connection
 * (TCP_NODELAY, blocking calls), the floor a collective between two hosts
 * stands on; bench/multihost_compare.sh runs it between two namespaces.
 *
 *   bench_tcp_pingpong serve ADDR PORT        answers one client, then exits
 *   bench_tcp_pingpong ping ADDR PORT [N]     N round trips (default 20000)
 *                                             after N/10 unmeasured ones
 *
 * Both ends spin on non-blocking reads (see read8).
 * ping prints "rtt_us MEDIAN MEAN" (microseconds) and exits 0; any error
 * is printed with its cause and exits 1.  serve waits at most 60 s for its
 * client, ping at most 10 s for each answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int die(const char *what)
{
	fprintf(stderr, "bench_tcp_pingpong: %s: %s\n", what, strerror(errno));
	return 1;
}

/*
 * Reads exactly 8 bytes within timeout_ms; 0, or -1 (errno set).  It spins
 * on non-blocking reads, as herd's transport does, so that the figure is
 * the path's round trip and not the scheduler's wakeup of a sleeping
 * reader (tens of microseconds on a virtual machine).
 */
static int read8(int fd, char *buf, int timeout_ms)
{
	double deadline = now_us() + timeout_ms * 1e3;
	size_t got = 0;

	for (unsigned long spins = 1; got < 8; spins++) {
		ssize_t n = recv(fd, buf + got, 8 - got, MSG_DONTWAIT);

		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (spins % 4096 == 0 && now_us() > deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1, fd, n = argc > 4 ? atoi(argv[4]) : 20000;
	char buf[8] = "herd-pp";

	if (argc < 4 || (strcmp(argv[1], "serve") != 0 && strcmp(argv[1], "ping") != 0) ||
	    inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1 || atoi(argv[3]) <= 0 || n < 1) {
		fprintf(stderr, "usage: %s serve|ping ADDR PORT [N]\n", argv[0]);
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(argv[3]));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return die("socket");
	if (strcmp(argv[1], "serve") == 0) {
		struct pollfd p;
		int c;

		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1) != 0)
			return die("bind/listen");
		p = (struct pollfd){ fd, POLLIN, 0 };
		if (poll(&p, 1, 60000) != 1)
			return errno = ETIMEDOUT, die("no client within 60 s");
		c = accept(fd, NULL, NULL);
		if (c < 0)
			return die("accept");
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		while (read8(c, buf, 60000) == 0)
			if (write(c, buf, 8) != 8)
				return die("write");
		close(c);
		close(fd);
		return 0;
	}
	{
		int warm = n / 10, total = n + warm;
		double *rtt = malloc((size_t)n * sizeof(double)), sum = 0;

		if (rtt == NULL)
			return die("malloc");
		for (int tries = 0; connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0; tries++) {
			if (tries == 100)
				return die("connect (tried for 10 s)");
			close(fd);
			fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			usleep(100000);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (int i = 0; i < total; i++) {
			double t0 = now_us();

			if (write(fd, buf, 8) != 8 || read8(fd, buf, 10000) != 0)
				return die("round trip");
			if (i >= warm)
				rtt[i - warm] = now_us() - t0;
		}
		for (int i = 0; i < n; i++)
			sum += rtt[i];
		qsort(rtt, (size_t)n, sizeof(double), cmp_double);
		printf("rtt_us %.1f %.1f\n", rtt[n / 2], sum / n);
		free(rtt);
		close(fd);
	}
	return 0;
}
