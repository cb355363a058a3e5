/*
 * tests/unit/test_telemetry.c - the sampler of herd/telemetry.h: the node's
 * part read from fixed /proc and /sys trees (tests/fixtures/telemetry/t0,
 * then t1: exact counters and rates), malformed and missing files, this
 * machine's own /proc, the sampler's ring, descriptor, thread and
 * callback, and the msgpack and JSON forms of a sample.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <msgpack.h>

#include "test.h"

#include "mpjson.h"
#include "telemetry/telemetry_internal.h"

static const char *source_dir(void)
{
	const char *d = getenv("HERD_SOURCE_DIR");

	return d != NULL ? d : ".";
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* poll(fd) for up to ms: 1 readable, 0 not. */
static int readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r > 0 && (p.revents & POLLIN) ? 1 : 0;
}

static herd_telemetry_sample *new_sample(void)
{
	herd_telemetry_sample *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		perror("calloc");
		exit(1);
	}
	return s;
}

/* root/rel holds text (root and the directories between made). */
static void put_file(const char *root, const char *rel, const char *text)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	mkdir(root, 0755);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash != NULL;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* link (a symbolic link) now points at target. */
static void point_link(const char *link, const char *target)
{
	char tmp[512];

	snprintf(tmp, sizeof(tmp), "%s.new", link);
	unlink(tmp);
	if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
		perror(link);
		exit(1);
	}
}

/* link now points at the fixture tree name. */
static void point_at(const char *link, const char *name)
{
	char target[512];

	snprintf(target, sizeof(target), "%s/tests/fixtures/telemetry/%s", source_dir(), name);
	point_link(link, target);
}

static const herd_telemetry_net *net_named(const herd_telemetry_sample *s, const char *name)
{
	for (int i = 0; i < s->nnets; i++)
		if (strcmp(s->nets[i].name, name) == 0)
			return &s->nets[i];
	return NULL;
}

/* ---- node.c on fixed files ---------------------------------------------- */

static void test_node_fixture_first_read_has_counters_and_no_rates(void)
{
	char *dir = make_tmpdir(), link[512];
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	snprintf(link, sizeof(link), "%s/root", dir);
	point_at(link, "t0");
	CHECK_OK(herd__tnode_open(&n, link));
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK_STR(s->host, "node-a");
	CHECK(s->cpu_busy == -1);
	CHECK_INT(s->ncpus, 2);
	CHECK(s->cpu_core[0] == -1.0f && s->cpu_core[1] == -1.0f);
	CHECK(s->load1 == 0.5);
	CHECK_INT(s->mem_total, 16384000LL * 1024);
	CHECK_INT(s->mem_available, 8192000LL * 1024);
	/* lo left out; wlan0 written without a space after the colon */
	CHECK_INT(s->nnets, 3);
	CHECK_STR(s->nets[0].name, "eth0");
	CHECK_INT(s->nets[0].rx_bytes, 1000000);
	CHECK_INT(s->nets[0].tx_bytes, 200000);
	CHECK(s->nets[0].rx_bps == -1 && s->nets[0].tx_bps == -1);
	CHECK_STR(s->nets[1].name, "ib0");
	CHECK_STR(s->nets[2].name, "wlan0");
	CHECK_INT(s->nets[2].rx_bytes, 12345);
	CHECK_INT(s->nets[2].tx_bytes, 678);
	/* loop0, ram0 and the partition sda1 left out */
	CHECK_INT(s->ndisks, 2);
	CHECK_STR(s->disks[0].name, "sda");
	CHECK_INT(s->disks[0].read_bytes, 20000LL * 512);
	CHECK_INT(s->disks[0].write_bytes, 40000LL * 512);
	CHECK(s->disks[0].read_bps == -1 && s->disks[0].write_bps == -1);
	CHECK(s->disks[0].util == -1);
	CHECK_STR(s->disks[1].name, "nvme0n1");
	CHECK_INT(s->disks[1].write_bytes, 300000LL * 512);
	CHECK_INT(s->dropped, 0);
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

static void test_node_fixture_second_read_gives_exact_rates(void)
{
	char *dir = make_tmpdir(), link[512];
	herd_telemetry_sample *s = new_sample();
	const herd_telemetry_net *net;
	herd__tnode *n = NULL;

	snprintf(link, sizeof(link), "%s/root", dir);
	point_at(link, "t0");
	CHECK_OK(herd__tnode_open(&n, link));
	CHECK_OK(herd__tnode_read(n, s, 0));
	point_at(link, "t1");
	memset(s, 0, sizeof(*s));
	s->period_ms = 2000;
	CHECK_OK(herd__tnode_read(n, s, 0));
	/* Node: 500 busy ticks of 2000; cpu0: 400 of 1000 (its 50 guest ticks
	 * are in user already); cpu1: 100 of 1000. */
	CHECK(s->cpu_busy == 25.0);
	CHECK_INT(s->ncpus, 2);
	CHECK(s->cpu_core[0] == 40.0f);
	CHECK(s->cpu_core[1] == 10.0f);
	CHECK(s->load1 == 1.25);
	CHECK_INT(s->mem_available, 4096000LL * 1024);
	CHECK_INT(s->nnets, 4);
	net = net_named(s, "eth0");
	CHECK(net != NULL && net->rx_bytes == 3000000 && net->rx_bps == 1000000.0 &&
	      net->tx_bps == 500.0);
	net = net_named(s, "ib0");
	CHECK(net != NULL && net->rx_bps == 2048.0 && net->tx_bps == 0.0);
	net = net_named(s, "wlan0");
	CHECK(net != NULL && net->rx_bps == 0.0 && net->tx_bps == 0.0);
	/* New since the first read: no rate yet. */
	net = net_named(s, "docker0");
	CHECK(net != NULL && net->rx_bytes == 1500 && net->rx_bps == -1 && net->tx_bps == -1);
	CHECK_INT(s->ndisks, 2);
	CHECK_STR(s->disks[0].name, "sda");
	CHECK_INT(s->disks[0].read_bytes, 24000LL * 512);
	CHECK(s->disks[0].read_bps == 4000.0 * 512 / 2);
	CHECK(s->disks[0].write_bps == 400.0 * 512 / 2);
	CHECK(s->disks[0].util == 25.0);      /* 500 ms of I/O in 2000 */
	CHECK_STR(s->disks[1].name, "nvme0n1");
	CHECK(s->disks[1].read_bps == 0.0);
	CHECK(s->disks[1].write_bps == 2000.0 * 512 / 2);
	CHECK(s->disks[1].util == 100.0);     /* 2400 ms in 2000: capped */
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

static void test_node_parts_read_only_what_is_asked(void)
{
	char path[512];
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	snprintf(path, sizeof(path), "%s/tests/fixtures/telemetry/t0", source_dir());
	CHECK_OK(herd__tnode_open(&n, path));
	CHECK_OK(herd__tnode_read(n, s, HERD_TELEMETRY_NET));
	CHECK_STR(s->host, "node-a");
	CHECK_INT(s->nnets, 3);
	CHECK_INT(s->ncpus, 0);
	CHECK(s->cpu_busy == -1 && s->load1 == -1);
	CHECK_INT(s->mem_total, -1);
	CHECK_INT(s->mem_available, -1);
	CHECK_INT(s->ndisks, 0);
	herd__tnode_close(n);
	free(s);
}

static void test_node_missing_files_leave_parts_empty(void)
{
	char *dir = make_tmpdir();
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	CHECK_OK(herd__tnode_open(&n, dir));
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK_STR(s->host, "");
	CHECK_INT(s->ncpus, 0);
	CHECK(s->cpu_busy == -1 && s->load1 == -1);
	CHECK_INT(s->mem_total, -1);
	CHECK_INT(s->mem_available, -1);
	CHECK_INT(s->nnets, 0);
	CHECK_INT(s->ndisks, 0);
	/* A kernel without MemAvailable (before 3.14): not known, not 0. */
	put_file(dir, "proc/meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n");
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK_INT(s->mem_total, 1024000);
	CHECK_INT(s->mem_available, -1);
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

/* A root holding one file rel with text must fail to read with code,
 * naming the file and the line in needle. */
static void check_malformed(const char *rel, const char *text, const char *needle)
{
	char *dir = make_tmpdir(), want[600];
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	put_file(dir, rel, text);
	snprintf(want, sizeof(want), "%s/%s%s", dir, rel, needle);
	CHECK_OK(herd__tnode_open(&n, dir));
	CHECK_ERR(herd__tnode_read(n, s, 0), HERD_EFORMAT, want);
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

static void test_node_malformed_files_are_named_with_their_line(void)
{
	check_malformed("proc/stat", "cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\ncpu1 12 abc 3 4\n",
			": line 3: expected at least 4 counters");
	check_malformed("proc/stat", "cpu  1 2 3 4 5\ncpu0 1 2\n",
			": line 2: expected at least 4 counters");
	check_malformed("proc/stat", "cpux 1 2 3 4\n", ": line 1: expected \"cpu\" or \"cpuN\"");
	check_malformed("proc/stat", "cpu  1 2 3 4 99999999999999999999\n", ": line 1:");
	check_malformed("proc/stat", "intr 1 2\nctxt 3\n", ": no \"cpu\" line in 2 lines");
	/* Cut short: the last line has no end. */
	check_malformed("proc/stat", "cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\ncpu1 1 2",
			": line 3 is cut short");
	check_malformed("proc/loadavg", "high 0.1 0.1 1/2 3\n",
			": line 1: expected the load averages");
	check_malformed("proc/meminfo", "MemFree: 10 kB\n", ": no line \"MemTotal: N kB\"");
	check_malformed("proc/net/dev", "Inter-| Receive | Transmit\n", ": line 2: expected a "
			"header line");
	check_malformed("proc/net/dev", "Inter-|\n face |\n  eth0 1 2 3\n",
			": line 3: expected \"NAME: \" and 16 counters");
	check_malformed("proc/net/dev", "Inter-|\n face |\n  eth0: 1 2 3 4 5 6 7 8 9\n",
			": line 3: expected 16 counters");
	check_malformed("proc/diskstats", "   8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n   8 1 sdb 1 2 3\n",
			": line 2: expected at least 11 counters");
	check_malformed("proc/diskstats", "   8 x sda 1 2 3 4 5 6 7 8 9 10 11\n",
			": line 1: expected \"MAJOR MINOR NAME\"");
	check_malformed("proc/sys/kernel/hostname", "two words\n", ": line 1: expected a host "
			"name");
}

/* Linux allows 64 characters (HOST_NAME_MAX); a sample keeps the short
 * name, as Slurm, hostfiles and herd's launchers write it. */
static void test_node_long_and_qualified_host_names(void)
{
	static const char long_name[] = "n234567890123456789012345678901234567890123456789012345678901234";
	char *dir = make_tmpdir();
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	CHECK_INT(strlen(long_name), 64);
	put_file(dir, "proc/sys/kernel/hostname", "n234567890123456789012345678901234567890"
		 "123456789012345678901234\n");
	CHECK_OK(herd__tnode_open(&n, dir));
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK_STR(s->host, long_name);
	put_file(dir, "proc/sys/kernel/hostname", "gpu-node-07.cluster.example.org\n");
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK_STR(s->host, "gpu-node-07");
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

static void test_node_failed_read_starts_rates_afresh(void)
{
	char *dir = make_tmpdir();
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	put_file(dir, "proc/stat", "cpu  100 0 100 800 0\ncpu0 100 0 100 800 0\n");
	CHECK_OK(herd__tnode_open(&n, dir));
	CHECK_OK(herd__tnode_read(n, s, 0));
	put_file(dir, "proc/stat", "cpu  100 0 100 800 0\ncpu0 1");
	CHECK_ERR(herd__tnode_read(n, s, 0), HERD_EFORMAT, "cut short");
	put_file(dir, "proc/stat", "cpu  200 0 100 900 0\ncpu0 200 0 100 900 0\n");
	s->period_ms = 1000;
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK(s->cpu_busy == -1);
	CHECK(s->cpu_core[0] == -1.0f);
	put_file(dir, "proc/stat", "cpu  300 0 100 1200 0\ncpu0 300 0 100 1200 0\n");
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK(s->cpu_busy == 25.0);
	CHECK(s->cpu_core[0] == 25.0f);
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

static void test_node_items_past_the_caps_are_counted_as_dropped(void)
{
	char *dir = make_tmpdir(), text[8192];
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;
	size_t k = 0;

	k += (size_t)snprintf(text + k, sizeof(text) - k, "Inter-|\n face |\n");
	for (int i = 0; i < HERD_TELEMETRY_MAX_NETS + 2; i++)
		k += (size_t)snprintf(text + k, sizeof(text) - k,
				      "eth%d: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", i);
	put_file(dir, "proc/net/dev", text);
	CHECK_OK(herd__tnode_open(&n, dir));
	CHECK_OK(herd__tnode_read(n, s, 0));
	CHECK_INT(s->nnets, HERD_TELEMETRY_MAX_NETS);
	CHECK_STR(s->nets[HERD_TELEMETRY_MAX_NETS - 1].name, "eth15");
	CHECK_INT(s->dropped, 2);
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

static void test_node_disk_with_a_slash_is_found_in_sysfs(void)
{
	char *dir = make_tmpdir();
	herd_telemetry_sample *s = new_sample();
	herd__tnode *n = NULL;

	/* The kernel's "cciss/c0d0" is "cciss!c0d0" under /sys/block. */
	put_file(dir, "sys/block/cciss!c0d0/dev", "104:0\n");
	put_file(dir, "proc/diskstats", " 104 0 cciss/c0d0 1 0 8 1 2 0 16 1 0 5 5\n"
		 " 104 1 cciss/c0d0p1 1 0 8 1 2 0 16 1 0 5 5\n");
	CHECK_OK(herd__tnode_open(&n, dir));
	CHECK_OK(herd__tnode_read(n, s, HERD_TELEMETRY_DISK));
	CHECK_INT(s->ndisks, 1);
	CHECK_STR(s->disks[0].name, "cciss/c0d0");
	CHECK_INT(s->disks[0].read_bytes, 8 * 512);
	CHECK_INT(s->disks[0].write_bytes, 16 * 512);
	herd__tnode_close(n);
	free(s);
	rm_tree(dir);
}

/* ---- this machine ------------------------------------------------------- */

static void test_sampler_reads_this_machine(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *a = new_sample(), *b = new_sample();
	herd_telemetry *t = NULL;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	char host[HERD_NAME_LEN] = "";

	gethostname(host, sizeof(host) - 1);
	CHECK_OK(herd_telemetry_create(&t, &o));
	CHECK_OK(herd_telemetry_take(t, a));
	sleep_ms(300);
	CHECK_OK(herd_telemetry_take(t, b));
	CHECK_INT(a->seq, 1);
	CHECK_INT(b->seq, 2);
	CHECK_INT(a->period_ms, 0);
	CHECK(b->period_ms >= 300 && b->period_ms < 60000);
	CHECK(b->time_ms > INT64_C(1600000000000));
	CHECK_STR(b->host, host);
	CHECK_INT(b->ncpus, online < HERD_TELEMETRY_MAX_CPUS ? online : HERD_TELEMETRY_MAX_CPUS);
	CHECK(a->cpu_busy == -1);
	CHECK(b->cpu_busy >= 0 && b->cpu_busy <= 100);
	for (int i = 0; i < b->ncpus; i++)
		CHECK(b->cpu_core[i] == -1.0f || (b->cpu_core[i] >= 0 && b->cpu_core[i] <= 100));
	CHECK(b->load1 >= 0);
	CHECK(b->mem_total > 0);
	CHECK(b->mem_available >= 0 && b->mem_available <= b->mem_total);
	CHECK(net_named(b, "lo") == NULL);
	for (int i = 0; i < b->nnets; i++)
		CHECK(b->nets[i].rx_bps >= 0 || net_named(a, b->nets[i].name) == NULL);
	for (int i = 0; i < b->ndisks; i++)
		CHECK(b->disks[i].util == -1 || (b->disks[i].util >= 0 && b->disks[i].util <= 100));
	/* Without GPUs the sample says why. */
	CHECK(b->ngpus > 0 || b->gpu_note[0] != '\0');
	herd_telemetry_free(t);
	free(a);
	free(b);
}

/* ---- the ring, the descriptor, the thread -------------------------------- */

static void test_sampler_ring_skips_overwritten_samples(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *s = new_sample();
	herd_telemetry *t = NULL;
	uint64_t seq = 0;

	o.ring_size = 3;
	o.parts = HERD_TELEMETRY_CPU | HERD_TELEMETRY_MEM;
	CHECK_OK(herd_telemetry_create(&t, &o));
	CHECK_INT(readable(herd_telemetry_fd(t), 0), 0);
	CHECK_ERR(herd_telemetry_latest(t, s), HERD_ENOTFOUND, "no telemetry sample yet");
	CHECK_ERR(herd_telemetry_next(t, &seq, s), HERD_ENOTFOUND, "no telemetry sample after 0");
	for (int i = 0; i < 5; i++)
		CHECK_OK(herd_telemetry_take(t, s));
	CHECK_INT(readable(herd_telemetry_fd(t), 0), 1);
	CHECK_OK(herd_telemetry_latest(t, s));
	CHECK_INT(s->seq, 5);
	/* 1 and 2 were overwritten: the oldest kept is 3. */
	CHECK_OK(herd_telemetry_next(t, &seq, s));
	CHECK_INT(seq, 3);
	CHECK_INT(s->seq, 3);
	CHECK_INT(readable(herd_telemetry_fd(t), 0), 1);
	CHECK_OK(herd_telemetry_next(t, &seq, s));
	CHECK_INT(s->seq, 4);
	CHECK_OK(herd_telemetry_next(t, &seq, s));
	CHECK_INT(s->seq, 5);
	CHECK_INT(seq, 5);
	CHECK_INT(readable(herd_telemetry_fd(t), 0), 0);
	CHECK_ERR(herd_telemetry_next(t, &seq, s), HERD_ENOTFOUND, "after 5");
	CHECK_OK(herd_telemetry_take(t, s));
	CHECK_INT(readable(herd_telemetry_fd(t), 0), 1);
	/* A reader that already has everything clears it too. */
	seq = 6;
	CHECK_ERR(herd_telemetry_next(t, &seq, s), HERD_ENOTFOUND, "after 6");
	CHECK_INT(readable(herd_telemetry_fd(t), 0), 0);
	herd_telemetry_free(t);
	free(s);
}

static void test_sampler_refuses_bad_options_and_calls(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry *t = NULL;
	herd_telemetry_sample *s = new_sample();
	uint64_t seq = 0;

	o.period_ms = 5;
	CHECK_ERR(herd_telemetry_create(&t, &o), HERD_EINVAL, "period_ms 5 is below the 10 ms");
	CHECK(t == NULL);
	o.period_ms = 0;
	o.parts = 1u << 12;
	CHECK_ERR(herd_telemetry_create(&t, &o), HERD_EINVAL, "parts 0x1000");
	o.parts = 0;
	o.version = 99;
	CHECK_ERR(herd_telemetry_create(&t, &o), HERD_EINVAL, "HERD_TELEMETRY_OPTS_INIT");
	CHECK_ERR(herd_telemetry_create(NULL, NULL), HERD_EINVAL, "out is NULL");
	CHECK_ERR(herd_telemetry_take(NULL, s), HERD_EINVAL, "t is NULL");
	CHECK_ERR(herd_telemetry_next(NULL, &seq, s), HERD_EINVAL, "t is NULL");
	CHECK_INT(herd_telemetry_fd(NULL), -1);
	herd_telemetry_free(NULL);
	free(s);
}

typedef struct counter {
	atomic_int calls;
	atomic_int out_of_order;
	uint64_t last;           /* written on the sampler's thread only */
} counter;

static void count_sample(void *userdata, const herd_telemetry_sample *s)
{
	counter *c = userdata;

	if (s->seq != c->last + 1)
		atomic_fetch_add(&c->out_of_order, 1);
	c->last = s->seq;
	atomic_fetch_add(&c->calls, 1);
}

static void test_sampler_thread_feeds_fd_next_and_callback(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *s = new_sample();
	herd_telemetry *t = NULL;
	counter c = { 0 };
	uint64_t seq = 0, prev = 0;
	int64_t deadline;
	int got = 0;

	o.period_ms = 20;
	o.ring_size = 64;
	o.parts = HERD_TELEMETRY_CPU | HERD_TELEMETRY_MEM | HERD_TELEMETRY_NET;
	o.callback = count_sample;
	o.userdata = &c;
	CHECK_OK(herd_telemetry_create(&t, &o));
	CHECK_OK(herd_telemetry_start(t));
	CHECK_ERR(herd_telemetry_start(t), HERD_EINVAL, "already started");
	CHECK_ERR(herd_telemetry_take(t, s), HERD_EINVAL, "the sampler is started");
	/* Five samples through the descriptor, each newer than the last. */
	deadline = now_ms() + 20000;
	while (got < 5 && now_ms() < deadline) {
		if (!readable(herd_telemetry_fd(t), 1000))
			continue;
		while (herd_telemetry_next(t, &seq, s) == HERD_OK) {
			CHECK(s->seq == seq && seq > prev);
			CHECK(s->mem_total > 0);
			CHECK(s->seq == 1 ? s->period_ms == 0 : s->period_ms > 0);
			prev = seq;
			got++;
		}
	}
	CHECK(got >= 5);
	CHECK_OK(herd_telemetry_latest(t, s));
	CHECK(s->seq >= prev);
	herd_telemetry_free(t);
	/* The thread is gone: no call after free. */
	got = atomic_load(&c.calls);
	CHECK(got >= 5);
	sleep_ms(100);
	CHECK_INT(atomic_load(&c.calls), got);
	CHECK_INT(atomic_load(&c.out_of_order), 0);
	free(s);
}

static void test_sampler_free_wakes_the_thread_at_once(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry *t = NULL;
	int64_t start;

	o.period_ms = 600000;   /* ten minutes to the second sample */
	o.parts = HERD_TELEMETRY_MEM;
	CHECK_OK(herd_telemetry_create(&t, &o));
	CHECK_OK(herd_telemetry_start(t));
	CHECK_INT(readable(herd_telemetry_fd(t), 10000), 1);
	start = now_ms();
	herd_telemetry_free(t);
	/* A no-hang bound, far below the period. */
	CHECK(now_ms() - start < 5000);
}

typedef struct self_free {
	herd_telemetry *t;
	atomic_int done;
} self_free;

static void free_from_callback(void *userdata, const herd_telemetry_sample *s)
{
	self_free *f = userdata;

	(void)s;
	herd_telemetry_free(f->t);
	atomic_store(&f->done, 1);
}

static void test_sampler_freed_from_its_callback(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	self_free f = { NULL, 0 };
	int64_t deadline;

	o.period_ms = 10;
	o.parts = HERD_TELEMETRY_MEM;
	o.callback = free_from_callback;
	o.userdata = &f;
	CHECK_OK(herd_telemetry_create(&f.t, &o));
	CHECK_OK(herd_telemetry_start(f.t));
	deadline = now_ms() + 10000;
	while (!atomic_load(&f.done) && now_ms() < deadline)
		sleep_ms(5);
	CHECK_INT(atomic_load(&f.done), 1);
}

static void test_sampler_on_fixtures_numbers_only_good_samples(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *s = new_sample();
	char *dir = make_tmpdir(), link[512], bad[512];
	herd_telemetry *t = NULL;
	uint64_t seq = 0;

	snprintf(link, sizeof(link), "%s/root", dir);
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	put_file(bad, "proc/stat", "cpu  1 2 3 4\ncpu0 1 2");
	point_at(link, "t0");
	o.parts = HERD_TELEMETRY_CPU | HERD_TELEMETRY_MEM;
	CHECK_OK(herd__telemetry_create_at(&t, &o, link));
	CHECK_OK(herd_telemetry_take(t, s));
	CHECK_INT(s->seq, 1);
	CHECK_STR(s->host, "node-a");
	point_at(link, "t1");
	CHECK_OK(herd_telemetry_take(t, s));
	CHECK_INT(s->seq, 2);
	CHECK(s->cpu_busy == 25.0 && s->cpu_core[0] == 40.0f && s->cpu_core[1] == 10.0f);
	point_link(link, bad);
	CHECK_ERR(herd_telemetry_take(t, s), HERD_EFORMAT, "/root/proc/stat: line 2 is cut short");
	point_at(link, "t1");
	CHECK_OK(herd_telemetry_take(t, s));
	CHECK_INT(s->seq, 3);
	CHECK(s->cpu_busy == -1);   /* afresh after the failure */
	for (uint64_t want = 1; want <= 3; want++) {
		CHECK_OK(herd_telemetry_next(t, &seq, s));
		CHECK_INT(seq, want);
		CHECK_INT(s->seq, want);
	}
	CHECK_ERR(herd_telemetry_next(t, &seq, s), HERD_ENOTFOUND, "after 3");
	herd_telemetry_free(t);
	free(s);
	rm_tree(dir);
}

static void test_sampler_thread_resumes_when_a_file_mends(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *s = new_sample();
	char *dir = make_tmpdir(), link[512], bad[512];
	herd_log_level level = herd_log_get_level();
	herd_telemetry *t = NULL;
	uint64_t seq = 0;

	snprintf(link, sizeof(link), "%s/root", dir);
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	put_file(bad, "proc/loadavg", "x\n");
	point_link(link, bad);
	o.period_ms = 10;
	o.parts = HERD_TELEMETRY_CPU;
	CHECK_OK(herd__telemetry_create_at(&t, &o, link));
	herd_log_set_level(HERD_LOG_ERROR);   /* the thread's warning is expected */
	CHECK_OK(herd_telemetry_start(t));
	/* Every sample fails: nothing to read. */
	CHECK_INT(readable(herd_telemetry_fd(t), 200), 0);
	CHECK_ERR(herd_telemetry_latest(t, s), HERD_ENOTFOUND, "no telemetry sample yet");
	point_at(link, "t0");
	CHECK_INT(readable(herd_telemetry_fd(t), 10000), 1);
	CHECK_OK(herd_telemetry_next(t, &seq, s));
	CHECK_INT(seq, 1);
	CHECK(s->load1 == 0.5);
	herd_telemetry_free(t);
	herd_log_set_level(level);
	free(s);
	rm_tree(dir);
}

/* ---- pack, unpack, JSON ------------------------------------------------- */

/* A sample with every kind of figure, -1s and fractions among them. */
static herd_telemetry_sample *full_sample(void)
{
	herd_telemetry_sample *s = new_sample();
	herd_telemetry_gpu *g;

	s->seq = 42;
	s->time_ms = 1700000000123;
	s->period_ms = 1000;
	strcpy(s->host, "gpu-node-07");
	s->cpu_busy = 37.123456789012345;
	s->ncpus = 4;
	s->cpu_core[0] = 12.3f;
	s->cpu_core[1] = -1.0f;
	s->cpu_core[2] = 100.0f;
	s->cpu_core[3] = 1e-7f;
	s->load1 = 0.1;
	s->mem_total = INT64_C(1) << 40;
	s->mem_available = -1;
	s->ngpus = 2;
	for (int i = 0; i < 2; i++) {
		g = &s->gpus[i];
		g->index = i;
		snprintf(g->uuid, sizeof(g->uuid), "GPU-0000000%d-1111-2222-3333-444444444444", i);
		snprintf(g->bus_id, sizeof(g->bus_id), "0000:%02x:00.0", 0x1b + i);
		strcpy(g->name, "NVIDIA H100 80GB HBM3");
		g->util_gpu = 99.5;
		g->util_mem = -1;
		g->mem_used = 1234567890;
		g->mem_total = 85899345920;
		g->power_w = 312.25;
		g->power_limit_w = 700;
		g->energy_mj = -1;
		g->temp_c = 61;
		g->sm_clock_mhz = 1980;
		g->mem_clock_mhz = 2619;
		g->throttle = 0x4;
		g->ecc_sbe = 0;
		g->ecc_dbe = -1;
		g->xid = 79;
		g->xid_count = 2;
		g->pcie_tx_bps = 1.5e9;
		g->pcie_rx_bps = -1;
		g->nvlink_tx_bps = 2.25e11;
		g->nvlink_rx_bps = 0;
	}
	s->nprocs = 1;
	s->procs[0].gpu = 1;
	s->procs[0].pid = 4242;
	s->procs[0].mem_used = -1;
	strcpy(s->procs[0].job, "job-17");
	s->procs[0].rank = 3;
	strcpy(s->procs[0].comm, "python3");
	s->nnets = 1;
	strcpy(s->nets[0].name, "ib0");
	s->nets[0].rx_bytes = UINT64_MAX;
	s->nets[0].tx_bytes = 5;
	s->nets[0].rx_bps = -1;
	s->nets[0].tx_bps = 1e-300;
	s->ndisks = 1;
	strcpy(s->disks[0].name, "nvme0n1");
	s->disks[0].read_bytes = 512;
	s->disks[0].write_bytes = 0;
	s->disks[0].read_bps = 256;
	s->disks[0].write_bps = -1;
	s->disks[0].util = 33.333333333333336;
	s->dropped = 3;
	return s;
}

static void test_codec_round_trip_is_exact(void)
{
	herd_telemetry_sample *s = full_sample(), *back = new_sample();
	void *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;

	CHECK_OK(herd_telemetry_pack(s, &a, &alen));
	CHECK_OK(herd_telemetry_unpack(a, alen, back));
	/* Every byte, the -1s, float and double fractions and padding alike. */
	CHECK(memcmp(s, back, sizeof(*s)) == 0);
	CHECK(back->cpu_core[0] == 12.3f && back->cpu_core[1] == -1.0f);
	CHECK(back->cpu_busy == 37.123456789012345);
	CHECK(back->nets[0].tx_bps == 1e-300);
	CHECK(back->mem_available == -1);
	/* Equal samples, equal bytes. */
	CHECK_OK(herd_telemetry_pack(back, &b, &blen));
	CHECK(alen == blen && memcmp(a, b, alen) == 0);
	herd_free(a);
	herd_free(b);
	free(s);
	free(back);
}

static void test_codec_round_trip_of_a_real_sample(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_telemetry_sample *s = new_sample(), *back = new_sample();
	herd_telemetry *t = NULL;
	void *buf = NULL;
	size_t len = 0;

	CHECK_OK(herd_telemetry_create(&t, &o));
	CHECK_OK(herd_telemetry_take(t, s));
	CHECK_OK(herd_telemetry_take(t, s));
	CHECK_OK(herd_telemetry_pack(s, &buf, &len));
	CHECK_OK(herd_telemetry_unpack(buf, len, back));
	CHECK(memcmp(s, back, sizeof(*s)) == 0);
	herd_free(buf);
	herd_telemetry_free(t);
	free(s);
	free(back);
}

/* A map written by hand into out: {"v": version} and, when key is given,
 * key: "abc". */
static size_t pack_map(char *out, size_t cap, int version, const char *key)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t n;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, key != NULL ? 2 : 1);
	msgpack_pack_str(&pk, 1);
	msgpack_pack_str_body(&pk, "v", 1);
	msgpack_pack_int(&pk, version);
	if (key != NULL) {
		msgpack_pack_str(&pk, strlen(key));
		msgpack_pack_str_body(&pk, key, strlen(key));
		msgpack_pack_str(&pk, 3);
		msgpack_pack_str_body(&pk, "abc", 3);
	}
	n = sb.size < cap ? sb.size : cap;
	memcpy(out, sb.data, n);
	msgpack_sbuffer_destroy(&sb);
	return n;
}

/* s as JSON with from replaced by to, back to msgpack: unpacking it fails
 * with code and needle. */
static void check_edited(const herd_telemetry_sample *s, const char *from, const char *to,
			 herd_status code, const char *needle)
{
	herd_telemetry_sample *out = new_sample();
	char *json = NULL, *edited, *at, *mp = NULL;
	size_t mp_len = 0;

	CHECK_OK(herd_telemetry_json(s, &json));
	at = json != NULL ? strstr(json, from) : NULL;
	CHECK(at != NULL);
	if (at != NULL) {
		edited = malloc(strlen(json) + strlen(to) + 1);
		sprintf(edited, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
		CHECK_OK(herd__mpjson_to_msgpack(edited, strlen(edited), 1 << 20, &mp, &mp_len));
		CHECK_ERR(herd_telemetry_unpack(mp, mp_len, out), code, needle);
		free(edited);
		free(mp);
	}
	herd_free(json);
	free(out);
}

static void test_codec_refusals_name_the_path(void)
{
	herd_telemetry_sample *s = full_sample(), *out = new_sample();
	char raw[256], *json = NULL;
	void *buf = NULL;
	size_t len = 0, n;

	n = pack_map(raw, sizeof(raw), 1, "seq");
	CHECK_ERR(herd_telemetry_unpack(raw, n, out), HERD_EFORMAT,
		  "telemetry sample: seq: expected");
	/* JSON's integers here stop at INT64_MAX. */
	CHECK_ERR(herd_telemetry_json(s, &json), HERD_EFORMAT,
		  "the integer 18446744073709551615 is above 9223372036854775807");
	CHECK(json == NULL);
	s->nets[0].rx_bytes = (uint64_t)INT64_MAX;
	check_edited(s, "\"period_ms\":1000", "\"period_ms\":-5", HERD_EFORMAT,
		     "telemetry sample: period_ms: expected an integer in 0..");
	check_edited(s, "\"comm\":\"python3\"", "\"comm\":7", HERD_EFORMAT,
		     "telemetry sample: procs[0].comm: expected a string");
	check_edited(s, "\"cpu_core\":[", "\"cpu_core\":[\"x\",", HERD_EFORMAT,
		     "telemetry sample: cpu_core[0]: expected a number, got a string");
	check_edited(s, "\"v\":1", "\"v\":3", HERD_EVERSION, "version 3 is newer");
	n = pack_map(raw, sizeof(raw), HERD_TELEMETRY_FORMAT_VERSION + 1, NULL);
	CHECK_ERR(herd_telemetry_unpack(raw, n, out), HERD_EVERSION,
		  "telemetry format version 2 is newer than version 1");
	n = pack_map(raw, sizeof(raw), 1, NULL);
	CHECK_ERR(herd_telemetry_unpack(raw, n, out), HERD_EFORMAT,
		  "missing required key \"seq\"");
	CHECK_ERR(herd_telemetry_unpack("\x81\xa1x\x01", 4, out), HERD_EFORMAT,
		  "missing required key \"v\"");
	CHECK_ERR(herd_telemetry_unpack("", 0, out), HERD_EFORMAT, "empty");
	/* Cut short. */
	CHECK_OK(herd_telemetry_pack(s, &buf, &len));
	CHECK_ERR(herd_telemetry_unpack(buf, len - 7, out), HERD_EFORMAT, "telemetry sample: ");
	herd_free(buf);
	/* What the decoder would refuse is not packed. */
	s->procs[0].gpu = 2;
	CHECK_ERR(herd_telemetry_pack(s, &buf, &len), HERD_EINVAL,
		  "procs[0].gpu: 2 is not the index of one of the sample's 2 GPUs");
	CHECK(buf == NULL && len == 0);
	s->procs[0].gpu = 0;
	s->ncpus = HERD_TELEMETRY_MAX_CPUS + 1;
	CHECK_ERR(herd_telemetry_pack(s, &buf, &len), HERD_EINVAL, "ncpus is 513, not within 0..512");
	s->ncpus = 1;
	memset(s->host, 'x', sizeof(s->host));
	CHECK_ERR(herd_telemetry_pack(s, &buf, &len), HERD_EINVAL, "host");
	free(s);
	free(out);
}

static void test_codec_json_is_one_line(void)
{
	herd_telemetry_sample *s = new_sample();
	char *json = NULL;

	s->seq = 7;
	s->time_ms = 1000;
	strcpy(s->host, "n1");
	s->cpu_busy = -1;
	s->ncpus = 2;
	s->cpu_core[0] = 50.0f;
	s->cpu_core[1] = -1.0f;
	s->load1 = 0.5;
	s->mem_total = 2048;
	s->mem_available = -1;
	strcpy(s->gpu_note, "no GPU");
	CHECK_OK(herd_telemetry_json(s, &json));
	CHECK_STR(json, "{\"v\":1,\"seq\":7,\"time_ms\":1000,\"period_ms\":0,\"host\":\"n1\","
		  "\"cpu_busy\":-1.0,\"cpu_core\":[50.0,-1.0],\"load1\":0.5,\"mem_total\":2048,"
		  "\"mem_available\":-1,\"gpus\":[],\"gpu_note\":\"no GPU\",\"procs\":[],"
		  "\"nets\":[],\"disks\":[],\"dropped\":0}");
	herd_free(json);
	free(s);
}

int main(void)
{
	TEST_RUN(test_node_fixture_first_read_has_counters_and_no_rates);
	TEST_RUN(test_node_fixture_second_read_gives_exact_rates);
	TEST_RUN(test_node_parts_read_only_what_is_asked);
	TEST_RUN(test_node_missing_files_leave_parts_empty);
	TEST_RUN(test_node_malformed_files_are_named_with_their_line);
	TEST_RUN(test_node_long_and_qualified_host_names);
	TEST_RUN(test_node_failed_read_starts_rates_afresh);
	TEST_RUN(test_node_items_past_the_caps_are_counted_as_dropped);
	TEST_RUN(test_node_disk_with_a_slash_is_found_in_sysfs);
	TEST_RUN(test_sampler_reads_this_machine);
	TEST_RUN(test_sampler_ring_skips_overwritten_samples);
	TEST_RUN(test_sampler_refuses_bad_options_and_calls);
	TEST_RUN(test_sampler_thread_feeds_fd_next_and_callback);
	TEST_RUN(test_sampler_free_wakes_the_thread_at_once);
	TEST_RUN(test_sampler_freed_from_its_callback);
	TEST_RUN(test_sampler_on_fixtures_numbers_only_good_samples);
	TEST_RUN(test_sampler_thread_resumes_when_a_file_mends);
	TEST_RUN(test_codec_round_trip_is_exact);
	TEST_RUN(test_codec_round_trip_of_a_real_sample);
	TEST_RUN(test_codec_refusals_name_the_path);
	TEST_RUN(test_codec_json_is_one_line);
	return TEST_DONE();
}
