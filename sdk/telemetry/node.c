/*
 * sdk/telemetry/node.c - the node's part of a sample, from /proc and /sys:
 * the host name, CPU busy time per core (/proc/stat) and load
 * (/proc/loadavg), memory (/proc/meminfo), bytes per network interface
 * (/proc/net/dev) and per whole disk (/proc/diskstats).
 *
 * The kernel's figures are counters since boot; a rate is the difference
 * between this read and the previous one, over the time between them
 * (the sample's period_ms, which the sampler sets before the read), so
 * the first read of a herd__tnode has every rate at -1.  CPU busy is a
 * ratio of two differences of the same clock ticks and needs no time.
 *
 * The files are read whole into one buffer kept between reads and parsed
 * strictly: a line that is not what the kernel writes is an error naming
 * the file and the line, and so is a file cut short inside a line.  A file
 * that does not exist leaves its part empty (counts 0, figures -1).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "net.h"
#include "telemetry_internal.h"
#include "topo/probe.h"

/* /proc/stat of a machine with thousands of interrupts is some hundred KiB. */
#define NODE_FILE_MAX (16u << 20)

/* Tick counters of one CPU line at the previous read. */
typedef struct prev_cpu {
	int id;                  /* N of "cpuN" */
	uint64_t busy, total;
} prev_cpu;

/* Counters of one interface or disk at the previous read. */
typedef struct prev_dev {
	char name[HERD_NAME_LEN];
	uint64_t a, b;           /* rx and tx bytes; read and write bytes */
	uint64_t ticks;          /* disks: milliseconds with I/O in flight */
} prev_dev;

struct herd__tnode {
	char root[PATH_MAX];     /* "" for this machine's "/" */
	char path[PATH_MAX + 64];
	char *buf;               /* the file being parsed, NUL-terminated */
	size_t cap;
	bool have_cpu;           /* the whole node's line was read last time */
	prev_cpu cpu;
	int ncores;
	prev_cpu cores[HERD_TELEMETRY_MAX_CPUS];
	bool have_devs;          /* nets and disks below are from a previous read */
	int nnets, ndisks;
	prev_dev nets[HERD_TELEMETRY_MAX_NETS];
	prev_dev disks[HERD_TELEMETRY_MAX_DISKS];
};

herd_status herd__tnode_open(herd__tnode **out, const char *root)
{
	herd__tnode *n;
	size_t len;

	*out = NULL;
	if (root == NULL)
		root = "/";
	len = strlen(root);
	while (len > 0 && root[len - 1] == '/')
		len--;
	if (len >= PATH_MAX)
		return herd__error(HERD_EINVAL, "telemetry: the root directory \"%.64s...\" is too "
				   "long", root);
	HERD_CHECK(herd__calloc(&n, 1, sizeof(*n), "a node sampler"));
	memcpy(n->root, root, len);
	n->root[len] = '\0';
	*out = n;
	return HERD_OK;
}

void herd__tnode_close(herd__tnode *n)
{
	if (n == NULL)
		return;
	free(n->buf);
	free(n);
}

/* ---- reading ----------------------------------------------------------- */

/* n->path = root/rel. */
static const char *path_of(herd__tnode *n, const char *rel)
{
	snprintf(n->path, sizeof(n->path), "%s/%s", n->root, rel);
	return n->path;
}

/*
 * The file root/rel into n->buf (NUL-terminated), its length in *len.
 * HERD_ENOTFOUND, raising nothing, when it does not exist; HERD_EIO when
 * it cannot be read; HERD_EFORMAT when it is too large or its last line
 * is cut short (the kernel ends every line of these files).
 */
static herd_status read_file(herd__tnode *n, const char *rel, size_t *len)
{
	const char *path = path_of(n, rel);
	size_t got = 0;
	int fd, err;

	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return HERD_ENOTFOUND;
		return herd__error_errno(HERD_EIO, errno, "cannot open %s", path);
	}
	for (;;) {
		ssize_t r;

		if (got + 1 >= n->cap) {
			size_t cap = n->cap > 0 ? 2 * n->cap : 16384;
			char *p;

			if (n->cap > NODE_FILE_MAX) {
				close(fd);
				return herd__error(HERD_EFORMAT, "%s is larger than %u bytes", path,
						   NODE_FILE_MAX);
			}
			p = realloc(n->buf, cap);
			if (p == NULL) {
				close(fd);
				return herd__error(HERD_ENOMEM, "out of memory reading %s", path);
			}
			n->buf = p;
			n->cap = cap;
		}
		r = read(fd, n->buf + got, n->cap - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = errno;
			close(fd);
			return herd__error_errno(HERD_EIO, err, "cannot read %s", path);
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	n->buf[got] = '\0';
	if (memchr(n->buf, '\0', got) != NULL)
		return herd__error(HERD_EFORMAT, "%s: a NUL byte in the text", path);
	if (got > 0 && n->buf[got - 1] != '\n') {
		int line = 1;

		for (size_t i = 0; i < got; i++)
			line += n->buf[i] == '\n';
		return herd__error(HERD_EFORMAT, "%s: line %d is cut short (the file ends inside "
				   "it)", path, line);
	}
	*len = got;
	return HERD_OK;
}

/* ---- lines and numbers ------------------------------------------------- */

/* The lines of the file in n->buf, numbered from 1. */
typedef struct lines {
	const char *path;
	char *next;              /* the rest of the text */
	char *line;              /* the current line, its '\n' replaced by NUL */
	int no;
} lines;

static void lines_init(lines *l, herd__tnode *n)
{
	l->path = n->path;
	l->next = n->buf;
	l->line = NULL;
	l->no = 0;
}

/* The next line into l->line; false at the end.  read_file made sure that
 * every line ends in '\n'. */
static bool lines_next(lines *l)
{
	char *nl;

	if (l->next == NULL || *l->next == '\0')
		return false;
	nl = strchr(l->next, '\n');
	*nl = '\0';
	l->line = l->next;
	l->next = nl + 1;
	l->no++;
	return true;
}

/* HERD_EFORMAT: "<path>: line <no>: <why>: "<the line>"". */
static herd_status bad_line(const lines *l, const char *why)
{
	size_t len = strlen(l->line);

	return herd__error(HERD_EFORMAT, "%s: line %d: %s: \"%.*s%s\"", l->path, l->no, why,
			   (int)(len > 80 ? 80 : len), l->line, len > 80 ? "..." : "");
}

static char *skip_blanks(char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/*
 * A decimal counter after blanks at *p, *p moved past it; false when there
 * is none, it does not end at a blank or the end of the line, or it is
 * beyond 64 bits.
 */
static bool scan_u64(char **p, uint64_t *v)
{
	char *s = skip_blanks(*p);
	uint64_t x = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	if (*s != '\0' && *s != ' ' && *s != '\t')
		return false;
	*v = x;
	*p = s;
	return true;
}

/* Up to max counters after *p into v; how many there were, or -1 when
 * something else follows them. */
static int scan_counters(char *p, uint64_t *v, int max)
{
	int k = 0;

	for (;;) {
		p = skip_blanks(p);
		if (*p == '\0')
			return k;
		if (k == max) {
			uint64_t ignored;

			/* More than asked for (a newer kernel's columns): still numbers. */
			if (!scan_u64(&p, &ignored))
				return -1;
			continue;
		}
		if (!scan_u64(&p, &v[k]))
			return -1;
		k++;
	}
}

/* Change of a counter per second over period_ms; -1 without a previous
 * figure or a period, or when the counter went back (a reset). */
static double rate(bool have_prev, uint64_t prev, uint64_t now, int64_t period_ms)
{
	if (!have_prev || period_ms <= 0 || now < prev)
		return -1;
	return (double)(now - prev) * 1000.0 / (double)period_ms;
}

/* ---- the host's name --------------------------------------------------- */

static herd_status read_host(herd__tnode *n, herd_telemetry_sample *s)
{
	herd_status st;
	size_t len = 0;

	if (n->root[0] == '\0')
		return herd__net_host_short(s->host, sizeof(s->host));
	st = read_file(n, "proc/sys/kernel/hostname", &len);
	if (st == HERD_ENOTFOUND)
		return HERD_OK;
	HERD_CHECK(st);
	if (len > 0)
		n->buf[len - 1] = '\0';
	if (len == 0 || len > sizeof(s->host) || strpbrk(n->buf, " \t\n") != NULL)
		return herd__error(HERD_EFORMAT, "%s: line 1: expected a host name of 1 to %zu "
				   "characters", n->path, sizeof(s->host) - 1);
	memcpy(s->host, n->buf, len);
	s->host[strcspn(s->host, ".")] = '\0';
	return HERD_OK;
}

/* ---- /proc/stat -------------------------------------------------------- */

/*
 * Busy and total ticks of a "cpu" line's counters (user nice system idle
 * iowait irq softirq steal guest guest_nice; kernels before 2.6.11 stop
 * after iowait or earlier).  guest and guest_nice are already counted in
 * user and nice.  Waiting for I/O is idle time.
 */
static void cpu_ticks(const uint64_t *v, int k, uint64_t *busy, uint64_t *total)
{
	uint64_t idle = v[3] + (k > 4 ? v[4] : 0), sum = 0;

	for (int i = 0; i < k && i < 8; i++)
		sum += v[i];
	*total = sum;
	*busy = sum - idle;
}

/* Percent busy between two reads; -1 when no tick passed. */
static double busy_pct(const prev_cpu *prev, uint64_t busy, uint64_t total)
{
	double pct;

	if (total <= prev->total)
		return -1;
	/* A counter that went back (iowait does on some kernels) counts as no time. */
	pct = busy <= prev->busy ? 0
				 : 100.0 * (double)(busy - prev->busy) / (double)(total - prev->total);
	return pct > 100 ? 100 : pct;
}

/* The previous figures of CPU id, at position i when it did not move. */
static const prev_cpu *prev_core(const herd__tnode *n, int i, int id)
{
	if (i < n->ncores && n->cores[i].id == id)
		return &n->cores[i];
	for (int j = 0; j < n->ncores; j++)
		if (n->cores[j].id == id)
			return &n->cores[j];
	return NULL;
}

static herd_status read_stat(herd__tnode *n, herd_telemetry_sample *s)
{
	prev_cpu cores[HERD_TELEMETRY_MAX_CPUS], whole = { -1, 0, 0 };
	bool have_whole = false, seen_any = false;
	herd_status st;
	size_t len;
	lines l;
	int ncores = 0;

	st = read_file(n, "proc/stat", &len);
	if (st == HERD_ENOTFOUND) {
		n->have_cpu = false;
		n->ncores = 0;
		return HERD_OK;
	}
	HERD_CHECK(st);
	lines_init(&l, n);
	while (lines_next(&l)) {
		uint64_t v[10], busy, total;
		const prev_cpu *prev;
		char *p = l.line;
		int id = -1, k;

		if (strncmp(p, "cpu", 3) != 0)
			continue;
		p += 3;
		if (*p >= '0' && *p <= '9') {
			uint64_t u;

			if (!scan_u64(&p, &u) || u > INT_MAX)
				return bad_line(&l, "expected \"cpuN\" and its counters");
			id = (int)u;
		} else if (*p != ' ') {
			return bad_line(&l, "expected \"cpu\" or \"cpuN\" and its counters");
		}
		k = scan_counters(p, v, 10);
		if (k < 4)
			return bad_line(&l, "expected at least 4 counters of clock ticks");
		cpu_ticks(v, k, &busy, &total);
		seen_any = true;
		if (id < 0) {
			whole = (prev_cpu){ -1, busy, total };
			have_whole = true;
			continue;
		}
		if (ncores == HERD_TELEMETRY_MAX_CPUS) {
			s->dropped++;
			continue;
		}
		prev = prev_core(n, ncores, id);
		s->cpu_core[ncores] = prev != NULL ? (float)busy_pct(prev, busy, total) : -1.0f;
		cores[ncores++] = (prev_cpu){ id, busy, total };
	}
	if (!seen_any)
		return herd__error(HERD_EFORMAT, "%s: no \"cpu\" line in %d lines", n->path, l.no);
	s->ncpus = ncores;
	s->cpu_busy = have_whole && n->have_cpu ? busy_pct(&n->cpu, whole.busy, whole.total) : -1;
	n->have_cpu = have_whole;
	n->cpu = whole;
	n->ncores = ncores;
	memcpy(n->cores, cores, (size_t)ncores * sizeof(cores[0]));
	return HERD_OK;
}

/* ---- /proc/loadavg ----------------------------------------------------- */

static herd_status read_loadavg(herd__tnode *n, herd_telemetry_sample *s)
{
	herd_status st;
	size_t len;
	double load;
	char *end;
	lines l;

	st = read_file(n, "proc/loadavg", &len);
	if (st == HERD_ENOTFOUND)
		return HERD_OK;
	HERD_CHECK(st);
	lines_init(&l, n);
	if (!lines_next(&l))
		return herd__error(HERD_EFORMAT, "%s: empty, expected the load averages", n->path);
	errno = 0;
	load = strtod(l.line, &end);
	if (end == l.line || l.line[0] < '0' || l.line[0] > '9' || (*end != ' ' && *end != '\0') ||
	    errno != 0 || !isfinite(load))
		return bad_line(&l, "expected the load averages");
	s->load1 = load;
	return HERD_OK;
}

/* ---- /proc/meminfo ----------------------------------------------------- */

static herd_status read_meminfo(herd__tnode *n, herd_telemetry_sample *s)
{
	uint64_t total, available;
	herd_status st;
	size_t len;

	st = read_file(n, "proc/meminfo", &len);
	if (st == HERD_ENOTFOUND)
		return HERD_OK;
	HERD_CHECK(st);
	if (!herd__topo_meminfo_parse(n->buf, &total, &available) || total > INT64_MAX ||
	    available > INT64_MAX)
		return herd__error(HERD_EFORMAT, "%s: no line \"MemTotal: N kB\" in the file",
				   n->path);
	s->mem_total = (int64_t)total;
	/* Kernels before 3.14 have no MemAvailable line: not known, not 0. */
	s->mem_available = available > 0 || strncmp(n->buf, "MemAvailable:", 13) == 0 ||
					   strstr(n->buf, "\nMemAvailable:") != NULL
				   ? (int64_t)available
				   : -1;
	return HERD_OK;
}

/* ---- /proc/net/dev ----------------------------------------------------- */

static const prev_dev *prev_named(const prev_dev *devs, int n, int i, const char *name)
{
	if (i < n && strcmp(devs[i].name, name) == 0)
		return &devs[i];
	for (int j = 0; j < n; j++)
		if (strcmp(devs[j].name, name) == 0)
			return &devs[j];
	return NULL;
}

/*
 * Two header lines, then "  NAME: " and 16 counters: received bytes,
 * packets, errs, drop, fifo, frame, compressed, multicast, then sent
 * bytes, packets, errs, drop, fifo, colls, carrier, compressed.
 */
static herd_status read_netdev(herd__tnode *n, herd_telemetry_sample *s, int64_t period_ms,
			       prev_dev *now, int *nnow)
{
	herd_status st;
	size_t len;
	lines l;

	st = read_file(n, "proc/net/dev", &len);
	if (st == HERD_ENOTFOUND)
		return HERD_OK;
	HERD_CHECK(st);
	lines_init(&l, n);
	for (int i = 1; i <= 2; i++)
		if (!lines_next(&l) || strchr(l.line, '|') == NULL)
			return herd__error(HERD_EFORMAT, "%s: line %d: expected a header line of "
					   "\"Inter-|   Receive ...\"", n->path, i);
	while (lines_next(&l)) {
		char *colon = strchr(l.line, ':'), *name = skip_blanks(l.line);
		herd_telemetry_net *net;
		const prev_dev *prev;
		size_t name_len;
		uint64_t v[16];

		if (colon == NULL)
			return bad_line(&l, "expected \"NAME: \" and 16 counters");
		name_len = (size_t)(colon - name);
		if (name_len == 0 || name_len >= HERD_NAME_LEN || memchr(name, ' ', name_len))
			return bad_line(&l, "expected an interface name before ':'");
		if (scan_counters(colon + 1, v, 16) != 16)
			return bad_line(&l, "expected 16 counters after the interface name");
		*colon = '\0';
		if (strcmp(name, "lo") == 0)
			continue;
		if (s->nnets == HERD_TELEMETRY_MAX_NETS) {
			s->dropped++;
			continue;
		}
		net = &s->nets[s->nnets];
		memcpy(net->name, name, name_len + 1);
		net->rx_bytes = v[0];
		net->tx_bytes = v[8];
		prev = prev_named(n->nets, n->have_devs ? n->nnets : 0, s->nnets, name);
		net->rx_bps = rate(prev != NULL, prev != NULL ? prev->a : 0, v[0], period_ms);
		net->tx_bps = rate(prev != NULL, prev != NULL ? prev->b : 0, v[8], period_ms);
		memcpy(now[s->nnets].name, name, name_len + 1);
		now[s->nnets].a = v[0];
		now[s->nnets].b = v[8];
		*nnow = ++s->nnets;
	}
	return HERD_OK;
}

/* ---- /proc/diskstats --------------------------------------------------- */

/*
 * A whole disk: one /sys/block lists (partitions are not there), and not
 * a loop device or a RAM disk.  A '/' in the kernel's name ("cciss/c0d0")
 * is '!' in sysfs.
 */
static bool whole_disk(const herd__tnode *n, const char *name)
{
	/* Not n->path: that names the diskstats file for messages. */
	char path[sizeof(n->root) + 16 + HERD_NAME_LEN], *p;
	size_t at;
	struct stat sb;

	if (strncmp(name, "loop", 4) == 0 || strncmp(name, "ram", 3) == 0 ||
	    strncmp(name, "zram", 4) == 0)
		return false;
	at = (size_t)snprintf(path, sizeof(path), "%s/sys/block/", n->root);
	snprintf(path + at, sizeof(path) - at, "%s", name);
	for (p = path + at; (p = strchr(p, '/')) != NULL;)
		*p = '!';
	return stat(path, &sb) == 0;
}

/*
 * "MAJOR MINOR NAME" and at least 11 counters: reads, reads merged,
 * sectors read, ms reading, writes, writes merged, sectors written, ms
 * writing, I/Os in flight, ms with I/O in flight, weighted ms (newer
 * kernels add discards and flushes).  A sector here is 512 bytes whatever
 * the disk's own.
 */
static herd_status read_diskstats(herd__tnode *n, herd_telemetry_sample *s, int64_t period_ms,
				  prev_dev *now, int *nnow)
{
	herd_status st;
	size_t len;
	lines l;

	st = read_file(n, "proc/diskstats", &len);
	if (st == HERD_ENOTFOUND)
		return HERD_OK;
	HERD_CHECK(st);
	lines_init(&l, n);
	while (lines_next(&l)) {
		char *p = l.line, *name, *end;
		herd_telemetry_disk *disk;
		const prev_dev *prev;
		uint64_t major, minor, v[11];
		size_t name_len;

		if (!scan_u64(&p, &major) || !scan_u64(&p, &minor))
			return bad_line(&l, "expected \"MAJOR MINOR NAME\" and at least 11 counters");
		name = skip_blanks(p);
		end = name + strcspn(name, " \t");
		name_len = (size_t)(end - name);
		if (name_len == 0 || name_len >= HERD_NAME_LEN)
			return bad_line(&l, "expected a device name after \"MAJOR MINOR\"");
		if (scan_counters(end, v, 11) != 11)
			return bad_line(&l, "expected at least 11 counters after the device name");
		*end = '\0';
		if (!whole_disk(n, name))
			continue;
		if (s->ndisks == HERD_TELEMETRY_MAX_DISKS) {
			s->dropped++;
			continue;
		}
		if (v[2] > UINT64_MAX / 512 || v[6] > UINT64_MAX / 512)
			return bad_line(&l, "sector counts beyond 64 bits of bytes");
		disk = &s->disks[s->ndisks];
		memcpy(disk->name, name, name_len + 1);
		disk->read_bytes = v[2] * 512;
		disk->write_bytes = v[6] * 512;
		prev = prev_named(n->disks, n->have_devs ? n->ndisks : 0, s->ndisks, name);
		disk->read_bps = rate(prev != NULL, prev != NULL ? prev->a : 0, disk->read_bytes,
				      period_ms);
		disk->write_bps = rate(prev != NULL, prev != NULL ? prev->b : 0, disk->write_bytes,
				       period_ms);
		/* Milliseconds busy per millisecond, in percent. */
		disk->util = rate(prev != NULL, prev != NULL ? prev->ticks : 0, v[9], period_ms) / 10;
		if (disk->util > 100)
			disk->util = 100;
		if (disk->util < 0)
			disk->util = -1;
		memcpy(now[s->ndisks].name, name, name_len + 1);
		now[s->ndisks].a = disk->read_bytes;
		now[s->ndisks].b = disk->write_bytes;
		now[s->ndisks].ticks = v[9];
		*nnow = ++s->ndisks;
	}
	return HERD_OK;
}

/* ---- the whole read ---------------------------------------------------- */

herd_status herd__tnode_read(herd__tnode *n, herd_telemetry_sample *s, unsigned parts)
{
	prev_dev nets[HERD_TELEMETRY_MAX_NETS], disks[HERD_TELEMETRY_MAX_DISKS];
	int nnets = 0, ndisks = 0;
	herd_status st = HERD_OK;

	if (parts == 0)
		parts = ~0u;
	s->host[0] = '\0';
	s->cpu_busy = -1;
	s->ncpus = 0;
	s->load1 = -1;
	s->mem_total = -1;
	s->mem_available = -1;
	s->nnets = 0;
	s->ndisks = 0;
	HERD_CHECK_GOTO(read_host(n, s), st, out);
	if (parts & HERD_TELEMETRY_CPU) {
		HERD_CHECK_GOTO(read_stat(n, s), st, out);
		HERD_CHECK_GOTO(read_loadavg(n, s), st, out);
	}
	if (parts & HERD_TELEMETRY_MEM)
		HERD_CHECK_GOTO(read_meminfo(n, s), st, out);
	if (parts & HERD_TELEMETRY_NET)
		HERD_CHECK_GOTO(read_netdev(n, s, s->period_ms, nets, &nnets), st, out);
	if (parts & HERD_TELEMETRY_DISK)
		HERD_CHECK_GOTO(read_diskstats(n, s, s->period_ms, disks, &ndisks), st, out);
out:
	if (st != HERD_OK) {
		/* The next read starts afresh: rates over a gap would mislead. */
		n->have_cpu = false;
		n->ncores = 0;
		n->have_devs = false;
		return st;
	}
	memcpy(n->nets, nets, (size_t)nnets * sizeof(nets[0]));
	memcpy(n->disks, disks, (size_t)ndisks * sizeof(disks[0]));
	n->nnets = nnets;
	n->ndisks = ndisks;
	n->have_devs = true;
	return HERD_OK;
}
