/*
 * shell/cmd_links.c - the fabric check of `herd discover --links`: one rank
 * on every node measures each other node, in rounds in which every node
 * talks to one peer, over herd's TCP transport.
 *
 * The rounds are the circle method of a round-robin tournament: with m
 * players (the nodes, and a bye when their count is odd), in round k node
 * m-1 meets node k and every other node r meets (2k - r) mod (m-1), so the
 * m(m-1)/2 pairs take m-1 rounds and each node is busy with one peer at a
 * time.  Per pair: 200 round trips of 8 bytes after 20 untimed (half the
 * round trip is the latency), then BYTES each way at once, 4 times after
 * a warm-up (the bandwidth is one direction's).  Rank 0 gathers the figures and prints
 * them as lines "pair A B LATENCY_US GBPS"; the launching herd names the
 * ranks' hosts, compares each pair with the median and flags the slow.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "herd.h"
#include "shell.h"

#define LAT_WARMUP 20
#define LAT_ROUND_TRIPS 200
#define BW_REPEATS 4
/* A pair under this share of the median bandwidth, or over this multiple
 * of the median latency and SLOW_LAT_US beyond it, is slow. */
#define SLOW_BW 0.75
#define SLOW_LAT 3.0
#define SLOW_LAT_US 50.0

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The peer of rank r in round k of m players (m even); >= n: a bye. */
static int partner(int r, int k, int m)
{
	if (r == m - 1)
		return k;
	if (r == k)
		return m - 1;
	return ((2 * k - r) % (m - 1) + (m - 1)) % (m - 1);
}

/* Latency (us) and one direction's bandwidth (GB/s) between this rank and p. */
static herd_status measure(herd_comm *comm, int p, unsigned char *out, unsigned char *in,
			   size_t bytes, double *lat_us, double *gbps)
{
	int me = herd_comm_rank(comm);
	herd_status st = HERD_OK;
	double t0 = now_s();

	/* The first round trips and the first exchange warm up, untimed. */
	for (int i = -LAT_WARMUP; i < LAT_ROUND_TRIPS && st == HERD_OK; i++) {
		if (i == 0)
			t0 = now_s();
		if (me < p) {
			st = herd_comm_send(comm, out, 8, HERD_UINT8, p);
			if (st == HERD_OK)
				st = herd_comm_recv(comm, in, 8, HERD_UINT8, p);
		} else {
			st = herd_comm_recv(comm, in, 8, HERD_UINT8, p);
			if (st == HERD_OK)
				st = herd_comm_send(comm, out, 8, HERD_UINT8, p);
		}
	}
	*lat_us = (now_s() - t0) / LAT_ROUND_TRIPS / 2 * 1e6;
	for (int i = -1; i < BW_REPEATS && st == HERD_OK; i++) {
		if (i == 0)
			t0 = now_s();
		st = herd_comm_sendrecv(comm, out, bytes, p, in, bytes, p, HERD_UINT8);
	}
	*gbps = (double)bytes * BW_REPEATS / (now_s() - t0) / 1e9;
	return st;
}

/* `herd probe --links BYTES`: one rank of the check. */
int links_rank(size_t bytes)
{
	herd_comm_opts o = HERD_COMM_OPTS_INIT;
	herd_comm *comm = NULL;
	unsigned char *out = NULL, *in = NULL;
	double *mine = NULL, *all = NULL;
	herd_status st;
	int n, m, r;

	/* The fabric between nodes, also where they share a host. */
	o.transport = "tcp";
	if (herd_comm_init_env(&comm, &o) != HERD_OK) {
		shell_message("herd probe --links", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	n = herd_comm_size(comm);
	r = herd_comm_rank(comm);
	m = n + (n & 1);
	out = calloc(bytes > 8 ? bytes : 8, 1);
	in = calloc(bytes > 8 ? bytes : 8, 1);
	mine = calloc((size_t)(3 * (m - 1) + 1), sizeof(double));
	all = calloc((size_t)n * (size_t)(3 * (m - 1) + 1), sizeof(double));
	if (out == NULL || in == NULL || mine == NULL || all == NULL) {
		st = HERD_ENOMEM;
		shell_message("herd probe --links", "out of memory");
		goto out;
	}
	st = HERD_OK;
	for (int k = 0; k < m - 1 && st == HERD_OK; k++) {
		int p = partner(r, k, m);

		mine[3 * k] = -1;
		st = herd_comm_barrier(comm);
		if (st == HERD_OK && p < n) {
			mine[3 * k] = p;
			st = measure(comm, p, out, in, bytes, &mine[3 * k + 1], &mine[3 * k + 2]);
		}
	}
	if (st == HERD_OK)
		st = herd_comm_gather(comm, mine, all, (size_t)(3 * (m - 1) + 1), HERD_FLOAT64, 0);
	if (st != HERD_OK) {
		shell_message("herd probe --links", shell_last_error());
		goto out;
	}
	if (r == 0)
		for (int a = 0; a < n; a++)
			for (int k = 0; k < m - 1; k++) {
				const double *e = all + (size_t)a * (size_t)(3 * (m - 1) + 1) + 3 * k;

				if (e[0] > a)
					printf("pair %d %d %.3f %.4f\n", a, (int)e[0], e[1], e[2]);
			}
	fflush(stdout);
out:
	herd_comm_finalize(comm);
	free(all);
	free(mine);
	free(in);
	free(out);
	return st == HERD_OK ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}

/* ---- the launching side ---------------------------------------------------- */

typedef struct pair {
	int a, b;
	double lat_us, gbps;
} pair;

typedef struct collect {
	char *text;          /* rank 0's stdout */
	size_t len, cap;
	bool oom;
} collect;

static void on_line(void *userdata, int rank, const char *host, herd_job_stream stream,
		    const char *line, size_t len)
{
	collect *c = userdata;

	if (stream == HERD_JOB_STDERR || rank != 0) {
		fprintf(stderr, "[%s:%d] %.*s\n", host != NULL ? host : "?", rank, (int)len, line);
		return;
	}
	if (c->len + len + 2 > c->cap) {
		size_t cap = (c->cap + len + 2) * 2;
		char *p = realloc(c->text, cap);

		if (p == NULL) {
			c->oom = true;
			return;
		}
		c->text = p;
		c->cap = cap;
	}
	memcpy(c->text + c->len, line, len);
	c->len += len;
	c->text[c->len++] = '\n';
	c->text[c->len] = '\0';
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static bool is_slow(const pair *p, double mlat, double mbw)
{
	return p->gbps < SLOW_BW * mbw ||
	       (p->lat_us > SLOW_LAT * mlat && p->lat_us > mlat + SLOW_LAT_US);
}

static double median_of(const pair *p, size_t n, bool lat)
{
	double *v = calloc(n + 1, sizeof(double)), m;

	if (v == NULL)
		return 0;
	for (size_t i = 0; i < n; i++)
		v[i] = lat ? p[i].lat_us : p[i].gbps;
	qsort(v, n, sizeof(double), cmp_double);
	m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	free(v);
	return m;
}

int links_check(const herd_cluster *cluster, bool slurm, size_t bytes, int timeout_s)
{
	size_t n = herd_cluster_node_count(cluster);
	const char **names = calloc(n + 1, sizeof(*names));
	int status;

	if (names == NULL) {
		shell_message("herd discover", "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	if (n < 2) {
		shell_message("herd discover", "--links needs two nodes that answered");
		free(names);
		return SHELL_EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++) {
		const herd_node *node = NULL;

		names[i] = herd_cluster_node(cluster, i, &node) == HERD_OK ? node->hostname : NULL;
	}
	status = links_run(names, n, slurm && herd_cluster_failure_count(cluster) == 0, bytes,
			   timeout_s, stdout, NULL, 0);
	free(names);
	return status;
}

int links_run(const char *const *names, size_t n, bool slurm, size_t bytes, int timeout_s,
	      FILE *report, char *culprits, size_t cap)
{
	size_t npairs = 0, used = 0;
	const char *program = shell_env("HERD_PROGRAM");
	char size[32], *hosts = NULL;
	const char *argv[5];
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	collect c = { 0 };
	pair *pairs = NULL;
	herd_job *job = NULL;
	int status = SHELL_EXIT_FAILURE, code = -1;

	if (culprits != NULL && cap > 0)
		culprits[0] = '\0';
	if (program == NULL || program[0] == '\0')
		program = "herd";
	if (herd_hostlist_compress(names, n, &hosts) != HERD_OK) {
		shell_message("herd discover", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	snprintf(size, sizeof(size), "%zu", bytes);
	argv[0] = program;
	argv[1] = "probe";
	argv[2] = "--links";
	argv[3] = size;
	argv[4] = NULL;
	spec.argv = argv;
	spec.nranks = (int)n;
	spec.per_node = 1;
	spec.where = slurm ? HERD_JOB_SLURM : HERD_JOB_HOSTS;
	spec.hosts = hosts;
	spec.output = on_line;
	spec.output_userdata = &c;
	if (herd_job_launch(&job, &spec) != HERD_OK) {
		shell_message("herd discover --links", shell_last_error());
		goto out;
	}
	if (herd_job_wait(job, timeout_s * 1000 * (int)n, &code) != HERD_OK) {
		shell_message("herd discover --links", "the check ran past its time; stopping it");
		herd_job_kill(job);
		goto out;
	}
	if (code != 0 || c.oom) {
		const char *why = herd_job_failure(job);

		shell_message("herd discover --links", why != NULL ? why : "the check failed");
		goto out;
	}
	pairs = calloc(n * n / 2 + 1, sizeof(*pairs));
	for (const char *l = c.text; pairs != NULL && l != NULL && *l != '\0';) {
		pair p;

		if (sscanf(l, "pair %d %d %lf %lf", &p.a, &p.b, &p.lat_us, &p.gbps) == 4 &&
		    p.a >= 0 && p.b > p.a && (size_t)p.b < n && npairs < n * n / 2 + 1)
			pairs[npairs++] = p;
		l = strchr(l, '\n');
		l = l != NULL ? l + 1 : NULL;
	}
	if (npairs != n * (n - 1) / 2) {
		shell_message("herd discover --links", "the check reported too few pairs");
		goto out;
	}
	{
		double mlat = median_of(pairs, npairs, true), mbw = median_of(pairs, npairs, false);
		herd_job_rank_status ra, rb;
		int slow = 0, wa = 4;

		for (size_t i = 0; i < n; i++)
			if ((int)strlen(names[i]) > wa)
				wa = (int)strlen(names[i]);
		fprintf(report, "\nLINKS  herd TCP, %zu bytes each way at once, 8-byte round trips\n",
			bytes);
		fprintf(report, "%-*s  %-*s  %10s  %8s  %s\n", wa, "A", wa, "B", "latency us", "GB/s",
			"of median");
		for (size_t i = 0; i < npairs; i++) {
			const pair *p = &pairs[i];
			bool bad = is_slow(p, mlat, mbw);

			if (herd_job_rank(job, p->a, &ra) != HERD_OK ||
			    herd_job_rank(job, p->b, &rb) != HERD_OK)
				continue;
			fprintf(report, "%-*s  %-*s  %10.1f  %8.3f  %5.0f%%%s\n", wa, ra.host, wa,
				rb.host, p->lat_us, p->gbps, 100 * p->gbps / mbw, bad ? "  SLOW" : "");
			slow += bad;
		}
		fprintf(report, "median: %.1f us, %.3f GB/s; %d of %zu pairs slow (under %.0f%% of the "
			"median bandwidth, or over %.0fx its latency and %.0f us beyond it)\n", mlat,
			mbw, slow, npairs, 100 * SLOW_BW, SLOW_LAT, SLOW_LAT_US);
		/* A node in every one of its pairs slow is the likely culprit. */
		for (size_t x = 0; x < n && slow > 0; x++) {
			int bad = 0;

			for (size_t i = 0; i < npairs; i++)
				if ((pairs[i].a == (int)x || pairs[i].b == (int)x) &&
				    is_slow(&pairs[i], mlat, mbw))
					bad++;
			if (bad != (int)n - 1 || n <= 2 || herd_job_rank(job, (int)x, &ra) != HERD_OK)
				continue;
			fprintf(report, "warning: %s: every link of it is slow (a cable, port or NIC "
				"of this node?)\n", ra.host);
			if (culprits != NULL && used < cap)
				used += (size_t)snprintf(culprits + used, cap - used, "%s%s",
							 used ? "," : "", ra.host);
		}
		status = slow > 0 ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
	}
out:
	herd_job_free(job);
	free(pairs);
	free(c.text);
	herd_free(hosts);
	return status;
}
