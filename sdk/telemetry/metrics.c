/*
 * sdk/telemetry/metrics.c - herd_metrics (herd/metrics.h): the sample's
 * families (exposition.c) and herd's own, read at each write: the jobs of
 * this node's processes (/proc/PID/environ), the GPU leases
 * (sdk/alloc's reader) and the collective counters of this node's
 * processes (the files of sdk/comm/stats.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "base.h"
#include "comm/comm_internal.h"
#include "comm/stats.h"
#include "comm/trace.h"
#include "herd/metrics.h"
#include "telemetry/exposition.h"

/* How long a job's collective counters stay shown after its last process
 * ended: long enough for any scrape interval to see the final counts. */
#define JOB_KEEP_MS (10 * 60 * 1000)
/* The most of one process's environment read. */
#define ENVIRON_MAX (4u << 20)

/* The counts of one process or job. */
typedef struct counts {
	uint64_t calls[HERD__STATS_KINDS], bytes[HERD__STATS_KINDS], ns[HERD__STATS_KINDS],
		errors[HERD__STATS_KINDS];
	uint64_t by_status[HERD__STATS_ERRORS];
} counts;

/* A stats file of the directory. */
typedef struct stats_entry {
	char name[256];
	dev_t dev;
	ino_t ino;
	int fd;                     /* -1 once folded */
	const herd__stats_file *map;
	char job[HERD__STATS_JOB_LEN];
	counts last;                /* as last read */
	bool folded;                /* its process ended and its counts are in its job's */
	bool seen;                  /* in the directory at this write */
} stats_entry;

/* A job's collective counters. */
typedef struct job_entry {
	char job[HERD__STATS_JOB_LEN];
	counts ended;               /* of its communicators that ended */
	counts sum;                 /* ended and live, at this write */
	int live;                   /* its live communicators at this write */
	int64_t gone_ms;            /* when it was first seen without a live process; 0: has one */
} job_entry;

struct herd_metrics {
	unsigned parts;
	herd_lease_opts lease;
	char lease_dir[4096];
	char stats_dir[4096];       /* "" when collective counters are off */
	char stats_why[4400];
	struct {
		char uuid[HERD_NAME_LEN];
		int minor;
	} minors[HERD_TELEMETRY_MAX_GPUS];
	int nminors;
	char *env;                  /* scratch for a process's environment */
	size_t env_cap;
	stats_entry *files;
	size_t nfiles, files_cap;
	job_entry *jobs;
	size_t njobs, jobs_cap;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the stats directory --------------------------------------------------- */

/* mkdir of one level, with mode made exact (the umask narrows mkdir's). */
static int make_dir(const char *path, mode_t mode)
{
	struct stat sb;

	if (stat(path, &sb) == 0)
		return S_ISDIR(sb.st_mode) ? 0 : (errno = ENOTDIR, -1);
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return -1;
	return chmod(path, mode) == 0 || errno == EPERM ? 0 : -1;
}

static void stats_setup(herd_metrics *m, const char *given)
{
	char dir[4096];
	herd_status st;

	if (given != NULL && given[0] != '\0') {
		herd__strlcpy(dir, given, sizeof(dir));
	} else if ((st = herd__stats_dir(dir, sizeof(dir), 1)) != HERD_OK) {
		snprintf(m->stats_why, sizeof(m->stats_why), "%s", herd_last_error());
		return;
	}
	/* The node-wide one is open to every user, as the lease directory. */
	if (strcmp(dir, "/run/herd/stats") == 0) {
		if (make_dir("/run/herd", 01777) != 0 || make_dir(dir, 01777) != 0)
			goto fail;
	} else if (make_dir(dir, 0700) != 0) {
		char parent[4096], *slash;

		/* $XDG_RUNTIME_DIR/herd/stats: herd/ too. */
		herd__strlcpy(parent, dir, sizeof(parent));
		slash = strrchr(parent, '/');
		if (errno != ENOENT || given != NULL || slash == NULL || slash == parent)
			goto fail;
		*slash = '\0';
		if (make_dir(parent, 0700) != 0 || make_dir(dir, 0700) != 0)
			goto fail;
	}
	herd__strlcpy(m->stats_dir, dir, sizeof(m->stats_dir));
	return;
fail:
	snprintf(m->stats_why, sizeof(m->stats_why), "cannot make the directory %s: %s", dir,
		 strerror(errno));
}

herd_status herd_metrics_create(herd_metrics **out, const herd_metrics_opts *opts)
{
	herd_metrics *m;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_metrics_create: out is NULL");
	*out = NULL;
	if (opts != NULL)
		HERD__CHECK_VERSION("metrics options", opts, herd_metrics_opts, METRICS_OPTS);
	HERD_CHECK(herd__calloc(&m, 1, sizeof(*m), "the metrics writer"));
	m->parts = opts != NULL && opts->parts != 0 ? opts->parts : ~0u;
	m->lease.version = HERD_LEASE_OPTS_VERSION;
	if (opts != NULL && opts->lease_dir != NULL) {
		herd__strlcpy(m->lease_dir, opts->lease_dir, sizeof(m->lease_dir));
		m->lease.dir = m->lease_dir;
	}
	if (m->parts & HERD_METRICS_COLLECTIVES)
		stats_setup(m, opts != NULL ? opts->stats_dir : NULL);
	else
		snprintf(m->stats_why, sizeof(m->stats_why), "not asked for");
	*out = m;
	return HERD_OK;
}

const char *herd_metrics_stats_dir(const herd_metrics *m, const char **why)
{
	if (why != NULL)
		*why = m == NULL ? "no metrics writer" : m->stats_dir[0] ? "" : m->stats_why;
	return m != NULL && m->stats_dir[0] != '\0' ? m->stats_dir : NULL;
}

static void entry_close(stats_entry *e)
{
	if (e->map != NULL)
		munmap((void *)e->map, sizeof(*e->map));
	if (e->fd >= 0)
		close(e->fd);
	e->map = NULL;
	e->fd = -1;
}

void herd_metrics_free(herd_metrics *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->nfiles; i++)
		entry_close(&m->files[i]);
	free(m->files);
	free(m->jobs);
	free(m->env);
	free(m);
}

/* ---- collective counters ------------------------------------------------------ */

static void read_counts(const herd__stats_file *f, counts *c)
{
	for (int k = 0; k < HERD__STATS_KINDS; k++) {
		c->calls[k] = atomic_load_explicit(&f->ops[k].calls, memory_order_relaxed);
		c->bytes[k] = atomic_load_explicit(&f->ops[k].bytes, memory_order_relaxed);
		c->ns[k] = atomic_load_explicit(&f->ops[k].ns, memory_order_relaxed);
		c->errors[k] = atomic_load_explicit(&f->ops[k].errors, memory_order_relaxed);
	}
	for (int e = 0; e < HERD__STATS_ERRORS; e++)
		c->by_status[e] = atomic_load_explicit(&f->errors[e], memory_order_relaxed);
}

static void add_counts(counts *to, const counts *c)
{
	for (int k = 0; k < HERD__STATS_KINDS; k++) {
		to->calls[k] += c->calls[k];
		to->bytes[k] += c->bytes[k];
		to->ns[k] += c->ns[k];
		to->errors[k] += c->errors[k];
	}
	for (int e = 0; e < HERD__STATS_ERRORS; e++)
		to->by_status[e] += c->by_status[e];
}

static job_entry *job_of(herd_metrics *m, const char *job)
{
	for (size_t i = 0; i < m->njobs; i++)
		if (strcmp(m->jobs[i].job, job) == 0)
			return &m->jobs[i];
	if (m->njobs == m->jobs_cap) {
		size_t cap = m->jobs_cap ? 2 * m->jobs_cap : 16;
		job_entry *j = realloc(m->jobs, cap * sizeof(*j));

		if (j == NULL)
			return NULL;
		m->jobs = j;
		m->jobs_cap = cap;
	}
	memset(&m->jobs[m->njobs], 0, sizeof(m->jobs[0]));
	herd__strlcpy(m->jobs[m->njobs].job, job, sizeof(m->jobs[0].job));
	return &m->jobs[m->njobs++];
}

/* Opens and maps a new file of the directory; false when it is not (yet) one. */
static bool entry_open(int dirfd, const char *name, stats_entry *e)
{
	herd__stats_file *f;
	struct stat sb;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return false;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(*f) ||
	    (f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		close(fd);
		return false;
	}
	if (f->magic != HERD__STATS_MAGIC || f->version != HERD__STATS_VERSION ||
	    f->size != sizeof(*f)) {
		munmap(f, sizeof(*f));
		close(fd);
		return false;
	}
	memset(e, 0, sizeof(*e));
	herd__strlcpy(e->name, name, sizeof(e->name));
	e->dev = sb.st_dev;
	e->ino = sb.st_ino;
	e->fd = fd;
	e->map = f;
	/* The writer's bytes, checked: a job name ends within its field. */
	memcpy(e->job, f->job, sizeof(e->job));
	e->job[sizeof(e->job) - 1] = '\0';
	return true;
}

static stats_entry *entry_find(herd_metrics *m, const char *name)
{
	for (size_t i = 0; i < m->nfiles; i++)
		if (strcmp(m->files[i].name, name) == 0)
			return &m->files[i];
	return NULL;
}

/* Reads the directory: new files opened, live ones read, ended ones
 * folded into their job (and removed when ours), gone ones forgotten. */
static void scan_stats(herd_metrics *m)
{
	bool root = geteuid() == 0;
	int dirfd = open(m->stats_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int64_t now = now_ms();
	struct dirent *d;
	DIR *dir;
	size_t w;

	for (size_t i = 0; i < m->nfiles; i++)
		m->files[i].seen = false;
	dir = dirfd >= 0 ? fdopendir(dirfd) : NULL;
	while (dir != NULL && (d = readdir(dir)) != NULL) {
		size_t n = strlen(d->d_name);
		stats_entry *e;

		if (d->d_name[0] == '.' || n < 7 || n >= sizeof(e->name) ||
		    strcmp(d->d_name + n - 6, ".stats") != 0)
			continue;
		e = entry_find(m, d->d_name);
		if (e == NULL) {
			stats_entry fresh;

			if (!entry_open(dirfd, d->d_name, &fresh))
				continue;
			if (m->nfiles == m->files_cap) {
				size_t cap = m->files_cap ? 2 * m->files_cap : 32;
				stats_entry *f = realloc(m->files, cap * sizeof(*f));

				if (f == NULL) {
					entry_close(&fresh);
					continue;
				}
				m->files = f;
				m->files_cap = cap;
			}
			m->files[m->nfiles] = fresh;
			e = &m->files[m->nfiles++];
		}
		e->seen = true;
		if (e->folded)
			continue;
		read_counts(e->map, &e->last);
		/* Nobody holds its lock: its process ended, and these counts are
		 * its last. */
		if (flock(e->fd, LOCK_EX | LOCK_NB) == 0) {
			struct stat sb;
			job_entry *j = job_of(m, e->job);

			read_counts(e->map, &e->last);
			if (j == NULL)
				continue; /* out of memory: try again at the next write */
			add_counts(&j->ended, &e->last);
			e->folded = true;
			if (fstat(e->fd, &sb) == 0 && (sb.st_uid == geteuid() || root) &&
			    unlinkat(dirfd, e->name, 0) == 0)
				e->seen = false; /* dropped below */
			entry_close(e);
		}
	}
	if (dir != NULL)
		closedir(dir);
	else if (dirfd >= 0)
		close(dirfd);

	/* A file gone while its process lived (someone removed it): its counts
	 * as last read stay with its job.  Then the live ones by job. */
	for (size_t j = 0; j < m->njobs; j++) {
		m->jobs[j].sum = m->jobs[j].ended;
		m->jobs[j].live = 0;
	}
	for (size_t i = w = 0; i < m->nfiles; i++) {
		stats_entry *e = &m->files[i];
		job_entry *j = e->folded ? NULL : job_of(m, e->job);

		if (!e->seen) {
			/* Folded already, or gone from under its live process. */
			if (j != NULL) {
				add_counts(&j->ended, &e->last);
				add_counts(&j->sum, &e->last);
			}
			entry_close(e);
			continue;
		}
		if (j != NULL) {
			add_counts(&j->sum, &e->last);
			j->live++;
		}
		m->files[w++] = *e;
	}
	m->nfiles = w;
	for (size_t j = w = 0; j < m->njobs; j++) {
		job_entry *je = &m->jobs[j];

		if (je->live > 0)
			je->gone_ms = 0;
		else if (je->gone_ms == 0)
			je->gone_ms = now;
		else if (now - je->gone_ms > JOB_KEEP_MS)
			continue;
		m->jobs[w++] = *je;
	}
	m->njobs = w;
}

/* "timedout" for HERD_ETIMEDOUT. */
static void error_name(int code, char *buf, size_t cap)
{
	const char *n = herd_status_name((herd_status)code);
	size_t i;

	if (strncmp(n, "HERD_E", 6) == 0)
		n += 6;
	else if (strncmp(n, "HERD_", 5) == 0)
		n += 5;
	for (i = 0; n[i] != '\0' && i + 1 < cap; i++)
		buf[i] = (char)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] - 'A' + 'a' : n[i]);
	buf[i] = '\0';
}

static void collective_families(herd_metrics *m, herd__expo *x)
{
	static const struct {
		const char *name, *help;
	} fams[] = {
		{ "herd_collective_calls_total", "Collective and point-to-point calls run." },
		{ "herd_collective_bytes_total",
		  "Bytes the calls were given (count times element size)." },
		{ "herd_collective_seconds_total", "Time spent in the calls (in seconds)." },
		{ "herd_collective_failures_total", "Calls that failed." },
	};
	herd__labels l;

	scan_stats(m);
	for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
		herd__expo_family(x, fams[f].name, "counter", fams[f].help);
		for (size_t j = 0; j < m->njobs; j++) {
			const counts *c = &m->jobs[j].sum;

			for (int k = 1; k < HERD__STATS_KINDS; k++) {
				if (c->calls[k] == 0)
					continue;
				herd__labels_reset(&l);
				herd__labels_add(&l, "herd_job", m->jobs[j].job);
				herd__labels_add(&l, "kind", herd__op_name((herd__op_kind)k));
				if (f == 2)
					herd__expo_value(x, &l, (double)c->ns[k] / 1e9);
				else
					herd__expo_int(x, &l, (int64_t)(f == 0 ? c->calls[k] :
									f == 1 ? c->bytes[k] :
										 c->errors[k]));
			}
		}
	}
	herd__expo_family(x, "herd_collective_errors_total", "counter",
			  "Calls that failed, by the error they ended with.");
	for (size_t j = 0; j < m->njobs; j++) {
		for (int e = 1; e < HERD__STATS_ERRORS; e++) {
			char name[32];

			if (m->jobs[j].sum.by_status[e] == 0)
				continue;
			error_name(-e, name, sizeof(name));
			herd__labels_reset(&l);
			herd__labels_add(&l, "herd_job", m->jobs[j].job);
			herd__labels_add(&l, "error", name);
			herd__expo_int(x, &l, (int64_t)m->jobs[j].sum.by_status[e]);
		}
	}
	herd__expo_family(x, "herd_collective_communicators", "gauge",
			  "Live communicators of the job that count calls.");
	for (size_t j = 0; j < m->njobs; j++) {
		herd__labels_reset(&l);
		herd__labels_add(&l, "herd_job", m->jobs[j].job);
		herd__expo_int(x, &l, m->jobs[j].live);
	}
}

/* ---- jobs from /proc ------------------------------------------------------------ */

typedef struct job_rank {
	char job[HERD_NAME_LEN];
	long rank;
	int64_t late_ns;            /* its flight recorder's straggler mark; -1: no ring */
} job_rank;

static int job_rank_cmp(const void *a, const void *b)
{
	const job_rank *x = a, *y = b;
	int c = strcmp(x->job, y->job);

	return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* The whole of /proc/PID/environ into m->env; its length, or -1. */
static ssize_t read_environ(herd_metrics *m, const char *pid)
{
	char path[300];
	size_t len = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t r;

		if (len + 1 >= m->env_cap) {
			size_t cap = m->env_cap ? 2 * m->env_cap : 65536;
			char *e;

			if (cap > ENVIRON_MAX || (e = realloc(m->env, cap)) == NULL)
				break;
			m->env = e;
			m->env_cap = cap;
		}
		r = read(fd, m->env + len, m->env_cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (m->env == NULL)
		return -1;
	m->env[len] = '\0';
	return (ssize_t)len;
}

/* This node's processes with HERD_JOB_ID and HERD_RANK, as (job, rank)
 * pairs in *out (malloc), sorted and without repeats, each with the
 * straggler mark of its ring in HERD_TRACE_DIR (the most of its
 * processes': a rank's children share its environment, not its ring). */
static size_t scan_jobs(herd_metrics *m, job_rank **out)
{
	job_rank *pairs = NULL;
	size_t n = 0, cap = 0;
	struct dirent *d;
	DIR *proc = opendir("/proc");

	*out = NULL;
	while (proc != NULL && (d = readdir(proc)) != NULL) {
		const char *job = NULL, *rank = NULL, *trace = NULL;
		ssize_t len;
		char *end;
		long r;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		len = read_environ(m, d->d_name);
		for (ssize_t i = 0; i < len; i += (ssize_t)strlen(m->env + i) + 1) {
			if (strncmp(m->env + i, "HERD_JOB_ID=", 12) == 0)
				job = m->env + i + 12;
			else if (strncmp(m->env + i, "HERD_RANK=", 10) == 0)
				rank = m->env + i + 10;
			else if (strncmp(m->env + i, "HERD_TRACE_DIR=", 15) == 0)
				trace = m->env + i + 15;
		}
		if (job == NULL || rank == NULL || job[0] == '\0')
			continue;
		errno = 0;
		r = strtol(rank, &end, 10);
		if (errno != 0 || end == rank || *end != '\0' || r < 0 || r > INT_MAX)
			continue;
		if (n == cap) {
			job_rank *p = realloc(pairs, (cap ? 2 * cap : 64) * sizeof(*p));

			if (p == NULL)
				break;
			pairs = p;
			cap = cap ? 2 * cap : 64;
		}
		herd__strlcpy(pairs[n].job, job, sizeof(pairs[n].job));
		pairs[n].rank = r;
		pairs[n++].late_ns = trace != NULL
			? herd__trace_marked(trace, (int)r, strtol(d->d_name, NULL, 10)) : -1;
	}
	if (proc != NULL)
		closedir(proc);
	if (n > 1)
		qsort(pairs, n, sizeof(*pairs), job_rank_cmp);
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		if (w == 0 || job_rank_cmp(&pairs[w - 1], &pairs[i]) != 0)
			pairs[w++] = pairs[i];
		else if (pairs[i].late_ns > pairs[w - 1].late_ns)
			pairs[w - 1].late_ns = pairs[i].late_ns;
	}
	*out = pairs;
	return w;
}

static void job_families(herd_metrics *m, herd__expo *x)
{
	job_rank *pairs;
	size_t n = scan_jobs(m, &pairs), jobs = 0;
	herd__labels l;

	for (size_t i = 0; i < n; i++)
		jobs += i == 0 || strcmp(pairs[i].job, pairs[i - 1].job) != 0;
	herd__expo_family(x, "herd_jobs_running", "gauge",
			  "herd jobs with ranks on this node (processes with HERD_JOB_ID and "
			  "HERD_RANK).");
	herd__expo_int(x, NULL, (int64_t)jobs);
	herd__expo_family(x, "herd_job_ranks", "gauge", "Ranks of the job on this node.");
	for (size_t i = 0, k; i < n; i = k) {
		for (k = i; k < n && strcmp(pairs[k].job, pairs[i].job) == 0; k++)
			;
		herd__labels_reset(&l);
		herd__labels_add(&l, "herd_job", pairs[i].job);
		herd__expo_int(x, &l, (int64_t)(k - i));
	}
	herd__expo_family(x, "herd_straggler_seconds", "gauge",
			  "How much later than the others' median the rank arrives at the job's "
			  "collectives while herd launch names it a straggler (its flight "
			  "recorder's mark); 0 when not named.");
	for (size_t i = 0; i < n; i++) {
		if (pairs[i].late_ns < 0)
			continue;
		herd__labels_reset(&l);
		herd__labels_add(&l, "herd_job", pairs[i].job);
		herd__labels_addi(&l, "rank", pairs[i].rank);
		herd__expo_value(x, &l, (double)pairs[i].late_ns / 1e9);
	}
	free(pairs);
}

/* ---- leases ------------------------------------------------------------------------ */

static void lease_families(herd_metrics *m, herd__expo *x, const herd_telemetry_sample *s)
{
	herd_alloc_gpu_status st[HERD_TELEMETRY_MAX_GPUS];
	int n = s->ngpus < HERD_TELEMETRY_MAX_GPUS ? s->ngpus : HERD_TELEMETRY_MAX_GPUS;
	int count[4] = { 0, 0, 0, 0 };
	herd__labels l;

	for (int i = 0; i < n; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		herd__strlcpy(st[i].uuid, s->gpus[i].uuid, sizeof(st[i].uuid));
	}
	/* No lease directory at all: nothing to say. */
	if (herd__lease_query(&m->lease, st, (size_t)n) != HERD_OK)
		return;
	for (int i = 0; i < n; i++)
		if ((unsigned)st[i].state < 4)
			count[st[i].state]++;
	herd__expo_family(x, "herd_gpu_leases", "gauge",
			  "GPUs of this node by the state of their herd lease.");
	for (int k = 0; k < 4; k++) {
		herd__labels_reset(&l);
		herd__labels_add(&l, "state", herd_lease_state_name((herd_lease_state)k));
		herd__expo_int(x, &l, count[k]);
	}
	herd__expo_family(x, "herd_gpu_lease_holder", "gauge",
			  "The holder of a GPU's lease: its job and user, from the lease record (1).");
	for (int i = 0; i < n; i++) {
		if (st[i].state == HERD_LEASE_FREE)
			continue;
		herd__expo_gpu_labels(&l, &s->gpus[i]);
		herd__labels_add(&l, "state", herd_lease_state_name(st[i].state));
		herd__labels_add(&l, "herd_job", st[i].job);
		herd__labels_add(&l, "user", st[i].user);
		herd__expo_int(x, &l, 1);
	}
}

/* ---- the sample ---------------------------------------------------------------------- */

/* The device minor number of a GPU (its /dev/nvidiaN), as the driver's
 * /proc/driver/nvidia/gpus/BUS/information says it; -1 when it does not. */
static int read_minor(const char *bus_id)
{
	char path[320], line[256];
	int minor = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/driver/nvidia/gpus/%s/information", bus_id);
	f = fopen(path, "re");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Device Minor: %d", &minor) == 1)
			break;
	fclose(f);
	return minor;
}

static void sample_minors(herd_metrics *m, const herd_telemetry_sample *s, int *minors)
{
	int n = s->ngpus < HERD_TELEMETRY_MAX_GPUS ? s->ngpus : HERD_TELEMETRY_MAX_GPUS;

	for (int i = 0; i < n; i++) {
		int k;

		for (k = 0; k < m->nminors; k++)
			if (strcmp(m->minors[k].uuid, s->gpus[i].uuid) == 0)
				break;
		if (k == m->nminors) {
			if (m->nminors == HERD_TELEMETRY_MAX_GPUS)
				m->nminors = 0; /* another set of GPUs: start again */
			k = m->nminors++;
			herd__strlcpy(m->minors[k].uuid, s->gpus[i].uuid, sizeof(m->minors[k].uuid));
			m->minors[k].minor = read_minor(s->gpus[i].bus_id);
		}
		minors[i] = m->minors[k].minor;
	}
}

herd_status herd_metrics_write(herd_metrics *m, const herd_telemetry_sample *s, char **out,
			       size_t *len)
{
	int minors[HERD_TELEMETRY_MAX_GPUS];
	herd__expo x;

	if (out == NULL || len == NULL)
		return herd__error(HERD_EINVAL, "herd_metrics_write: out and len must not be NULL");
	*out = NULL;
	*len = 0;
	if (m == NULL)
		return herd__error(HERD_EINVAL, "herd_metrics_write: m is NULL");
	memset(&x, 0, sizeof(x));
	herd__buf_init(&x.buf, 0);
	if (s != NULL && (m->parts & HERD_METRICS_TELEMETRY)) {
		sample_minors(m, s, minors);
		herd__expo_sample(&x, s, minors);
	}
	if (m->parts & HERD_METRICS_JOBS)
		job_families(m, &x);
	if (s != NULL && (m->parts & HERD_METRICS_LEASES))
		lease_families(m, &x, s);
	if ((m->parts & HERD_METRICS_COLLECTIVES) && m->stats_dir[0] != '\0')
		collective_families(m, &x);
	if (x.failed != HERD_OK) {
		herd__buf_free(&x.buf);
		return herd__error(x.failed, "the metrics text: out of memory");
	}
	/* An empty text is a valid exposition too. */
	if (herd__buf_reserve(&x.buf, 1) != HERD_OK) {
		herd__buf_free(&x.buf);
		return herd__error(HERD_ENOMEM, "the metrics text: out of memory");
	}
	return herd__buf_take(&x.buf, "the metrics text", out, len);
}
