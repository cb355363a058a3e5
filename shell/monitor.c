/*
 * shell/monitor.c - herd launch --monitor: a sampler of this node
 * (herd/telemetry.h) whose callback, on the sampler's thread, records for
 * each running rank of the job on this node its CPU use and its GPUs'
 * figures; at the end a summary (stderr), and with --monitor-out DIR the
 * series (CSV, JSON), the summary (JSON), and the plots and the page that
 * lua/herd_report.lua makes from them (docs/telemetry.md, "Job reports").
 *
 * A rank's CPU use: the utime + stime (and cutime + cstime, the children
 * it has reaped) of its process and every descendant (/proc/PID/stat),
 * as a difference between two samples over the wall time between them,
 * in percent of one core.  A rank's GPUs: those its CUDA_VISIBLE_DEVICES
 * names (read from /proc/PID/environ of the rank's process: herd's plan
 * gives UUIDs; an index counts the node's GPUs in PCI bus order, as
 * CUDA_DEVICE_ORDER=PCI_BUS_ID does), and those on which NVML lists a
 * process of its tree.
 *
 * Ranks on other nodes (ssh and Slurm launches): a watch
 * (herd_telemetry_watch, `herd probe --watch` on those nodes) streams their
 * samples; a remote rank's GPUs are those on which NVML lists a process
 * of this job with its rank (the sample's procs, named from the process's
 * HERD_JOB_ID and HERD_RANK).  A sample has no CPU figure per process, so
 * a remote rank's CPU use is not known.
 *
 * Threads: the sampler's callback and the watch's reader (a thread of the
 * monitor) record under mu; shell_monitor_finish stops both (joining
 * their threads) before it reads the series.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd.h"
#include "herd/telemetry.h"
#include "lua_herd.h"
#include "shell.h"

/* The series keep at most this many rows (32 bytes each); beyond, the
 * summary and the files cover the run up to there, and say so. */
#define ROWS_MAX 2000000
/* Distinct GPUs a job's ranks may be seen on. */
#define GPUS_MAX 64

/* A GPU under IDLE_PCT busy is idle; under BUSY_PCT, not busy; a CPU at
 * SATURATED_PCT of a core or more is saturated. */
#define IDLE_PCT 5.0
#define BUSY_PCT 50.0
#define SATURATED_PCT 90.0

/* The files of --monitor-out, the plots and page after the series. */
static const char *const out_files[] = {
	"series.csv", "series.json", "summary.json", "gpu_util.svg", "gpu_memory.svg",
	"cpu.svg", "power.svg", "report.html",
};

struct mon_gpu {
	char uuid[HERD_NAME_LEN];
	char name[HERD_NAME_LEN];
	char bus_id[HERD_PCI_ID_LEN];
	int index;                 /* NVML's */
	int64_t mem_total;
};

/* One rank at one sample on one of its GPUs (gpu -1: it has none). */
struct mon_row {
	uint32_t sample;
	int32_t rank;
	int32_t pid;
	int16_t gpu;               /* into gpus[] */
	float cpu;                 /* % of one core; -1 unknown */
	float util, mem_util;      /* %; -1 unknown */
	float power;               /* W; -1 unknown */
	int64_t mem_used;          /* bytes; -1 unknown */
};

struct mon_sample {
	int node;                  /* 0: this node; 1 + the watch's index of another */
	double t;                  /* seconds since the job started */
	double dt;                 /* seconds this sample stands for */
	int64_t unix_ms;
};

struct mon_rank {
	long pid;                  /* whose ticks these are */
	unsigned long long ticks;
	double at;                 /* CLOCK_MONOTONIC of the ticks */
	bool have;
	long env_pid;              /* whose CUDA_VISIBLE_DEVICES visible holds */
	char *visible;             /* NULL: not set */
};

/* One process of /proc. */
struct proc {
	long pid, ppid;
	unsigned long long ticks;  /* utime + stime + cutime + cstime */
	signed char in;            /* for the rank being walked: 0 unknown, 1 in, -1 out */
};

struct shell_monitor {
	herd_telemetry *tel;
	herd_job *job;             /* set once launched; read on the sampler's thread */
	int period_ms;
	double start;              /* Unix seconds */
	herd_job_where where;
	bool all_local;
	pthread_mutex_t mu;        /* what follows, from the sampler's and the watch's threads */
	/* the other nodes' samples */
	herd_telemetry_watch *watch;
	pthread_t reader;
	bool reading;
	bool watched;              /* the watch started */
	bool local_rows;           /* a rank of this node was recorded */
	int nnodes;                /* 1 + the highest node of a sample */
	volatile bool stop;
	herd_telemetry_sample *remote_sample;
	char watch_note[512];      /* why the other nodes were not watched */
	char host[256];            /* this node's short name */
	char sample_host[HERD_HOST_LEN];
	char gpu_note[128];
	int node_gpus;             /* GPUs the node's last sample held */
	int nranks;
	struct mon_rank *ranks;
	bool *remote;              /* per rank: on another node, not sampled */
	struct mon_gpu gpus[GPUS_MAX];
	int ngpus;
	struct mon_sample *samples;
	size_t nsamples, cap_samples;
	struct mon_row *rows;
	size_t nrows, cap_rows;
	bool truncated;
	struct proc *procs;
	size_t nprocs, cap_procs;
	long clk_tck;
	double scan_at;            /* CLOCK_MONOTONIC of the last scan of /proc */
	/* at the end: the rows of rank r are rows[order[first[r] .. first[r + 1] - 1]],
	 * in sample order */
	size_t *order, *first;
};

/* ------------------------------------------------------------ /proc */

static int by_pid(const void *a, const void *b)
{
	long x = ((const struct proc *)a)->pid, y = ((const struct proc *)b)->pid;

	return (x > y) - (x < y);
}

/* Every process of this node with its parent and CPU ticks, sorted by pid. */
static void scan_procs(shell_monitor *m)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	m->nprocs = 0;
	m->scan_at = shell_mono_time();
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[300], buf[1024], *p;
		unsigned long long ut, st;
		long long cut, cst;
		struct proc *pr;
		ssize_t n;
		int fd;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* after the command's closing parenthesis: state ppid ... (fields 3-17) */
		p = strrchr(buf, ')');
		if (p == NULL)
			continue;
		if (m->nprocs == m->cap_procs) {
			size_t nc = m->cap_procs ? 2 * m->cap_procs : 512;
			struct proc *np = realloc(m->procs, nc * sizeof(*np));

			if (np == NULL)
				break;
			m->procs = np;
			m->cap_procs = nc;
		}
		pr = &m->procs[m->nprocs];
		if (sscanf(p + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
			   &pr->ppid, &ut, &st, &cut, &cst) != 5)
			continue;
		pr->pid = strtol(e->d_name, NULL, 10);
		pr->ticks = ut + st + (unsigned long long)(cut > 0 ? cut : 0) +
			    (unsigned long long)(cst > 0 ? cst : 0);
		pr->in = 0;
		m->nprocs++;
	}
	closedir(d);
	qsort(m->procs, m->nprocs, sizeof(*m->procs), by_pid);
}

static struct proc *find_proc(shell_monitor *m, long pid)
{
	struct proc key = { .pid = pid };

	return bsearch(&key, m->procs, m->nprocs, sizeof(*m->procs), by_pid);
}

/* Whether p descends from root (or is root), with the answers kept in ->in. */
static bool in_tree(shell_monitor *m, struct proc *p, long root)
{
	struct proc *chain[64];
	int n = 0, v = -1;

	for (struct proc *q = p; q != NULL; q = find_proc(m, q->ppid)) {
		if (q->in != 0 || q->pid == root) {
			v = q->pid == root ? 1 : q->in;
			break;
		}
		/* deeper than the chain holds: not counted, and not remembered */
		if (n == (int)(sizeof(chain) / sizeof(*chain)))
			return false;
		chain[n++] = q;
		if (q->ppid <= 1)
			break;
	}
	for (int i = 0; i < n; i++)
		chain[i]->in = (signed char)v;
	return v == 1;
}

/* Resets the tree marks of the last rank walked. */
static void clear_tree(shell_monitor *m)
{
	for (size_t i = 0; i < m->nprocs; i++)
		m->procs[i].in = 0;
}

/* The CUDA_VISIBLE_DEVICES of process pid (malloc), NULL when unset or unreadable. */
static char *read_visible(long pid)
{
	static const char name[] = "CUDA_VISIBLE_DEVICES=";
	char path[64], *buf, *v = NULL;
	size_t len = 0, cap = 1 << 16;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	while (buf != NULL && (n = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap) {
			char *nb = cap < (1u << 22) ? realloc(buf, 2 * cap + 1) : NULL;

			if (nb == NULL)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	if (buf == NULL)
		return NULL;
	buf[len] = '\0';
	for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
		if (strncmp(buf + i, name, sizeof(name) - 1) == 0)
			v = strdup(buf + i + sizeof(name) - 1);
	free(buf);
	return v;
}

/* ------------------------------------------------------------ sampling */

/* The entry of the sample's GPU g in m->gpus, added when new; -1 when full. */
static int gpu_id(shell_monitor *m, const herd_telemetry_gpu *g)
{
	for (int i = 0; i < m->ngpus; i++)
		if (strcmp(m->gpus[i].uuid, g->uuid) == 0)
			return i;
	if (m->ngpus == GPUS_MAX)
		return -1;
	snprintf(m->gpus[m->ngpus].uuid, sizeof(m->gpus[0].uuid), "%s", g->uuid);
	snprintf(m->gpus[m->ngpus].name, sizeof(m->gpus[0].name), "%s", g->name);
	snprintf(m->gpus[m->ngpus].bus_id, sizeof(m->gpus[0].bus_id), "%s", g->bus_id);
	m->gpus[m->ngpus].index = g->index;
	m->gpus[m->ngpus].mem_total = g->mem_total;
	return m->ngpus++;
}

/* The sample's GPU that a CUDA_VISIBLE_DEVICES entry names, or -1. */
static int visible_gpu(const herd_telemetry_sample *s, const char *tok, size_t len)
{
	char *end;
	long k;
	int match = -1;

	if (len == 0)
		return -1;
	if (strncmp(tok, "GPU-", 4) == 0 || strncmp(tok, "MIG-", 4) == 0) {
		/* a UUID, or a prefix of one as CUDA takes it (when it names one GPU) */
		for (int g = 0; g < s->ngpus; g++)
			if (strncmp(s->gpus[g].uuid, tok, len) == 0) {
				if (match >= 0)
					return -1;
				match = g;
			}
		return match;
	}
	k = strtol(tok, &end, 10);
	if (end != tok + len || k < 0 || k >= s->ngpus)
		return -1;
	/* the k-th GPU in PCI bus order */
	for (int g = 0; g < s->ngpus; g++) {
		int before = 0;

		for (int h = 0; h < s->ngpus; h++)
			before += strcmp(s->gpus[h].bus_id, s->gpus[g].bus_id) < 0;
		if (before == k)
			return g;
	}
	return -1;
}

static bool add_sample(shell_monitor *m, const herd_telemetry_sample *s, int node)
{
	struct mon_sample *x;

	if (m->nsamples == m->cap_samples) {
		size_t nc = m->cap_samples ? 2 * m->cap_samples : 256;
		struct mon_sample *ns = realloc(m->samples, nc * sizeof(*ns));

		if (ns == NULL)
			return false;
		m->samples = ns;
		m->cap_samples = nc;
	}
	x = &m->samples[m->nsamples];
	x->node = node;
	if (node + 1 > m->nnodes)
		m->nnodes = node + 1;
	x->unix_ms = s->time_ms;
	x->t = s->time_ms / 1000.0 - m->start;
	x->dt = (s->period_ms > 0 ? s->period_ms : m->period_ms) / 1000.0;
	return true;
}

static struct mon_row *add_row(shell_monitor *m)
{
	if (m->nrows == ROWS_MAX) {
		m->truncated = true;
		return NULL;
	}
	if (m->nrows == m->cap_rows) {
		size_t nc = m->cap_rows ? 2 * m->cap_rows : 1024;
		struct mon_row *nr = realloc(m->rows, nc * sizeof(*nr));

		if (nr == NULL) {
			m->truncated = true;
			return NULL;
		}
		m->rows = nr;
		m->cap_rows = nc;
	}
	return &m->rows[m->nrows++];
}

static bool local_host(const shell_monitor *m, const char *host)
{
	return m->all_local || host == NULL || strcmp(host, m->host) == 0 ||
	       strcmp(host, m->sample_host) == 0 || strcmp(host, "localhost") == 0;
}

/* The CPU use of rank i's tree (% of one core; -1 on its first sample) and
 * its GPUs (bits of the sample's gpus[]). */
static double rank_tree(shell_monitor *m, int i, long pid, const herd_telemetry_sample *s,
			uint32_t *gpus)
{
	struct mon_rank *r = &m->ranks[i];
	unsigned long long ticks = 0;
	double now = m->scan_at, cpu = -1;
	struct proc *root = find_proc(m, pid);

	*gpus = 0;
	if (root == NULL)
		return -1;
	clear_tree(m);
	for (size_t k = 0; k < m->nprocs; k++)
		if (in_tree(m, &m->procs[k], pid))
			ticks += m->procs[k].ticks;
	if (r->have && r->pid == pid && now > r->at && ticks >= r->ticks)
		cpu = 100.0 * (double)(ticks - r->ticks) / (double)m->clk_tck / (now - r->at);
	r->pid = pid;
	r->ticks = ticks;
	r->at = now;
	r->have = true;
	for (int k = 0; k < s->nprocs; k++) {
		struct proc *p = find_proc(m, (long)s->procs[k].pid);

		if (p != NULL && s->procs[k].gpu >= 0 && s->procs[k].gpu < s->ngpus &&
		    in_tree(m, p, pid))
			*gpus |= 1u << s->procs[k].gpu;
	}
	if (r->env_pid != pid) {
		free(r->visible);
		r->visible = read_visible(pid);
		r->env_pid = pid;
	}
	for (const char *v = r->visible; v != NULL && *v != '\0';) {
		size_t len = strcspn(v, ",");
		int g = visible_gpu(s, v, len);

		if (g >= 0)
			*gpus |= 1u << g;
		v += len + (v[len] == ',');
	}
	return cpu;
}

static float fig(double v)
{
	return v >= 0 && isfinite(v) ? (float)v : -1.0f;
}

static void record_local(shell_monitor *m, const herd_telemetry_sample *s);

static void on_sample(void *userdata, const herd_telemetry_sample *s)
{
	shell_monitor *m = userdata;

	if (m->job == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	record_local(m, s);
	pthread_mutex_unlock(&m->mu);
}

/*
 * Rank i's rows at sample s: one per GPU of the rank (gpus, a bit per
 * index in s), or one without a GPU when it has none; cpu is its figure.
 */
static void add_rows(shell_monitor *m, const herd_telemetry_sample *s, int i, long pid,
		     uint32_t gpus, float cpu)
{
	for (int g = -1; g < s->ngpus && g < 32; g++) {
		const herd_telemetry_gpu *x = g >= 0 ? &s->gpus[g] : NULL;
		struct mon_row *row;
		int id = -1;

		if (g < 0 ? gpus != 0 : !(gpus & (1u << g)))
			continue;
		if (x != NULL && (id = gpu_id(m, x)) < 0)
			continue;
		row = add_row(m);
		if (row == NULL)
			return;
		*row = (struct mon_row){ .sample = (uint32_t)m->nsamples, .rank = i,
					 .pid = (int32_t)pid, .gpu = (int16_t)id, .cpu = cpu,
					 .util = -1, .mem_util = -1, .power = -1, .mem_used = -1 };
		if (x != NULL) {
			row->util = fig(x->util_gpu);
			row->mem_util = fig(x->util_mem);
			row->power = fig(x->power_w);
			row->mem_used = x->mem_used;
		}
	}
}

/* The local ranks at sample s. */
static void record_local(shell_monitor *m, const herd_telemetry_sample *s)
{
	bool added = false;

	snprintf(m->sample_host, sizeof(m->sample_host), "%s", s->host);
	if (s->ngpus == 0 && s->gpu_note[0] != '\0')
		snprintf(m->gpu_note, sizeof(m->gpu_note), "%s", s->gpu_note);
	m->node_gpus = s->ngpus;
	scan_procs(m);
	for (int i = 0; i < m->nranks; i++) {
		herd_job_rank_status r;
		uint32_t gpus;
		double cpu;

		if (herd_job_rank(m->job, i, &r) != HERD_OK || r.state != HERD_JOB_RANK_RUNNING ||
		    r.pid <= 0)
			continue;
		if (!local_host(m, r.host)) {
			m->remote[i] = true;
			continue;
		}
		cpu = rank_tree(m, i, r.pid, s, &gpus);
		if (!added && !(added = add_sample(m, s, 0)))
			return;
		m->local_rows = true;
		add_rows(m, s, i, r.pid, gpus, fig(cpu));
	}
	if (added)
		m->nsamples++;
}

/*
 * A sample of another node: each rank running there, with the GPUs on
 * which NVML lists a process of this job and rank; no CPU figure.
 */
static void record_remote(shell_monitor *m, const herd_telemetry_sample *s, size_t node)
{
	const char *id = herd_job_id(m->job);
	bool added = false;

	if (local_host(m, s->host))
		return;
	for (int i = 0; i < m->nranks; i++) {
		herd_job_rank_status r;
		uint32_t gpus = 0;

		if (herd_job_rank(m->job, i, &r) != HERD_OK || r.state != HERD_JOB_RANK_RUNNING ||
		    r.host == NULL || strcmp(r.host, s->host) != 0)
			continue;
		for (int k = 0; k < s->nprocs; k++)
			if (s->procs[k].rank == i && strcmp(s->procs[k].job, id) == 0 &&
			    s->procs[k].gpu >= 0 && s->procs[k].gpu < s->ngpus && s->procs[k].gpu < 32)
				gpus |= 1u << s->procs[k].gpu;
		if (!added && !(added = add_sample(m, s, (int)node + 1)))
			return;
		add_rows(m, s, i, r.pid, gpus, -1);
	}
	if (added)
		m->nsamples++;
}

/* The watch's reader: every sample of the other nodes, until stop. */
static void *read_watch(void *arg)
{
	shell_monitor *m = arg;
	size_t node;

	while (!m->stop) {
		if (herd_telemetry_watch_wait(m->watch, 200) != HERD_OK)
			continue;
		while (herd_telemetry_watch_next(m->watch, &node, m->remote_sample) == HERD_OK) {
			pthread_mutex_lock(&m->mu);
			record_remote(m, m->remote_sample, node);
			pthread_mutex_unlock(&m->mu);
		}
	}
	return NULL;
}

/*
 * Watches the nodes of the job's ranks that are not this one: over ssh
 * (their hostlist), or in a Slurm allocation its nodes (this one's
 * samples are left out).  A watch that cannot start leaves a note.
 */
static void watch_others(shell_monitor *m)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	const char **names = calloc((size_t)m->nranks + 1, sizeof(*names));
	size_t n = 0;
	char *expr = NULL;

	if (names == NULL)
		return;
	for (int i = 0; i < m->nranks; i++) {
		herd_job_rank_status r;
		bool seen = false;

		if (herd_job_rank(m->job, i, &r) != HERD_OK || local_host(m, r.host))
			continue;
		m->remote[i] = true;
		for (size_t k = 0; k < n && !seen; k++)
			seen = strcmp(names[k], r.host) == 0;
		if (!seen)
			names[n++] = r.host;
	}
	if (n == 0) {
		free(names);
		return;
	}
	o.period_ms = m->period_ms < 100 ? 100 : m->period_ms;
	if (m->where == HERD_JOB_SLURM)
		o.slurm = true;
	else if (herd_hostlist_compress(names, n, &expr) == HERD_OK)
		o.hosts = expr;
	free(names);
	m->remote_sample = malloc(sizeof(*m->remote_sample));
	if (m->remote_sample == NULL || (o.hosts == NULL && !o.slurm)) {
		snprintf(m->watch_note, sizeof(m->watch_note), "out of memory");
	} else if (herd_telemetry_watch_start(&m->watch, &o) != HERD_OK) {
		snprintf(m->watch_note, sizeof(m->watch_note), "%s", shell_last_error());
		m->watch = NULL;
	} else if (pthread_create(&m->reader, NULL, read_watch, m) != 0) {
		snprintf(m->watch_note, sizeof(m->watch_note), "cannot start a thread");
		herd_telemetry_watch_free(m->watch);
		m->watch = NULL;
	} else {
		m->reading = true;
		m->watched = true;
	}
	herd_free(expr);
}

/* Stops the watch's reader and the watch; the nodes that failed, in note. */
static void stop_watch(shell_monitor *m)
{
	size_t k = 0;

	if (m->reading) {
		m->stop = true;
		pthread_join(m->reader, NULL);
		m->reading = false;
	}
	if (m->watch == NULL)
		return;
	for (size_t i = 0; i < herd_telemetry_watch_nodes(m->watch) && k + 1 < sizeof(m->watch_note);
	     i++) {
		herd_telemetry_node node;

		if (herd_telemetry_watch_node(m->watch, i, &node) != HERD_OK ||
		    node.state == HERD_TELEMETRY_NODE_STREAMING ||
		    node.state == HERD_TELEMETRY_NODE_STARTING || local_host(m, node.host))
			continue;
		k += (size_t)snprintf(m->watch_note + k, sizeof(m->watch_note) - k, "%s%s: %s%s%s",
				      k ? "; " : "", node.host,
				      herd_telemetry_node_state_name(node.state),
				      node.why[0] ? ": " : "", node.why);
	}
	herd_telemetry_watch_free(m->watch);
	m->watch = NULL;
}

/* ------------------------------------------------------------ the API */

int shell_monitor_prepare_dir(const char *dir)
{
	char *path = NULL;
	struct stat sb;
	size_t len = strlen(dir);

	if (len == 0) {
		fprintf(stderr, "%s: --monitor-out needs a directory\n", shell_command);
		return -1;
	}
	/* mkdir -p */
	path = strdup(dir);
	if (path == NULL)
		return -1;
	for (char *p = path + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(path, 0777) != 0 && errno != EEXIST) {
			fprintf(stderr, "%s: --monitor-out %s: cannot make %s: %s\n", shell_command,
				dir, path, strerror(errno));
			free(path);
			return -1;
		}
		*p = c;
		if (c == '\0')
			break;
	}
	free(path);
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(dir, W_OK | X_OK) != 0) {
		fprintf(stderr, "%s: --monitor-out %s: %s\n", shell_command, dir,
			stat(dir, &sb) != 0 ? strerror(errno) : !S_ISDIR(sb.st_mode)
			? "not a directory" : "this user cannot write into it");
		return -1;
	}
	for (size_t i = 0; i < sizeof(out_files) / sizeof(*out_files); i++) {
		char file[4096];

		snprintf(file, sizeof(file), "%s/%s", dir, out_files[i]);
		if (herd_file_check(file) != HERD_OK) {
			fprintf(stderr, "%s: --monitor-out %s\n", shell_command, shell_last_error());
			return -1;
		}
	}
	return 0;
}

int shell_monitor_create(shell_monitor **out, int period_ms, herd_job_where where)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	shell_monitor *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (m == NULL) {
		fprintf(stderr, "%s: out of memory\n", shell_command);
		return -1;
	}
	m->period_ms = period_ms;
	m->where = where;
	m->all_local = where == HERD_JOB_LOCAL;
	pthread_mutex_init(&m->mu, NULL);
	m->clk_tck = sysconf(_SC_CLK_TCK);
	if (m->clk_tck <= 0)
		m->clk_tck = 100;
	if (gethostname(m->host, sizeof(m->host)) != 0)
		m->host[0] = '\0';
	m->host[sizeof(m->host) - 1] = '\0';
	m->host[strcspn(m->host, ".")] = '\0';
	o.period_ms = period_ms;
	o.ring_size = 4;
	o.parts = HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS | HERD_TELEMETRY_CPU;
	o.callback = on_sample;
	o.userdata = m;
	if (herd_telemetry_create(&m->tel, &o) != HERD_OK) {
		fprintf(stderr, "%s: --monitor: %s\n", shell_command, shell_last_error());
		pthread_mutex_destroy(&m->mu);
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

int shell_monitor_start(shell_monitor *m, herd_job *job, double start)
{
	m->nranks = herd_job_size(job);
	m->ranks = calloc((size_t)(m->nranks > 0 ? m->nranks : 1), sizeof(*m->ranks));
	m->remote = calloc((size_t)(m->nranks > 0 ? m->nranks : 1), sizeof(*m->remote));
	if (m->ranks == NULL || m->remote == NULL) {
		fprintf(stderr, "%s: --monitor: out of memory\n", shell_command);
		return -1;
	}
	m->start = start;
	m->job = job;
	watch_others(m);
	if (herd_telemetry_start(m->tel) != HERD_OK) {
		fprintf(stderr, "%s: --monitor: %s\n", shell_command, shell_last_error());
		m->job = NULL;
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ the summary */

struct rank_stats {
	bool sampled;
	size_t samples;
	double cpu_mean, cpu_peak;
	size_t ncpu;
	uint64_t gpus;             /* bits of m->gpus */
	double util_mean, p5, p50, p95;
	size_t nutil;
	int64_t mem_peak;          /* -1: unknown */
	bool idle_gpu;             /* idle counts the GPUs (else the CPU) */
	double idle_s, idle_pct;
	size_t sat, sat_base;
	double sat_cpu, sat_util;
};

struct summary {
	struct rank_stats *ranks;
	double duration;           /* seconds the samples stand for (the longest node's) */
	int nodes;                 /* nodes sampled */
	double used_hours;         /* NAN: no GPU utilization was read */
	int gpus_held;
	double held_hours;
	/* per rank and GPU: samples read, and under BUSY_PCT */
	size_t *gpu_n, *gpu_under;
	json_t *warnings;
	char note[512];            /* no GPU, and why */
	char remote_note[1024];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The p-th percentile of n sorted values, by the nearest rank. */
static double percentile(const double *v, size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return v[k > 0 ? k - 1 : 0];
}

/* "2-3,5" of the flagged ranks into out. */
static void rank_ranges(const bool *flag, int n, char *out, size_t cap)
{
	size_t k = 0;

	out[0] = '\0';
	for (int i = 0; i < n && k < cap; i++) {
		int j = i;

		if (!flag[i])
			continue;
		while (j + 1 < n && flag[j + 1])
			j++;
		k += (size_t)snprintf(out + k, cap - k, k ? ",%d" : "%d", i);
		if (j > i && k < cap)
			k += (size_t)snprintf(out + k, cap - k, "-%d", j);
		i = j;
	}
}

/* The statistics of one rank over its rows (rows of one sample are adjacent). */
static void rank_summary(const shell_monitor *m, int rank, struct summary *sum, double *vals)
{
	struct rank_stats *st = &sum->ranks[rank];
	size_t nv = 0, idle_n = 0, idle_base = 0;
	double cpu_sum = 0, util_sum = 0;

	st->mem_peak = -1;
	st->cpu_peak = -1;
	for (size_t i = m->first[rank], end = m->first[rank + 1]; i < end;) {
		uint32_t sample = m->rows[m->order[i]].sample;
		double u = 0, cpu = m->rows[m->order[i]].cpu;
		int64_t mem = 0;
		size_t nu = 0, j = i;
		bool mem_known = false, has_gpu = false;

		for (; j < end && m->rows[m->order[j]].sample == sample; j++) {
			const struct mon_row *r = &m->rows[m->order[j]];

			if (r->gpu < 0)
				continue;
			has_gpu = true;
			st->gpus |= 1ull << r->gpu;
			sum->gpu_n[(size_t)rank * GPUS_MAX + (size_t)r->gpu] += r->util >= 0;
			sum->gpu_under[(size_t)rank * GPUS_MAX + (size_t)r->gpu] +=
				r->util >= 0 && r->util < BUSY_PCT;
			if (r->util >= 0) {
				vals[nv++] = r->util;
				util_sum += r->util;
				u += r->util;
				nu++;
			}
			if (r->mem_used >= 0) {
				mem += r->mem_used;
				mem_known = true;
			}
		}
		st->samples++;
		if (cpu >= 0) {
			cpu_sum += cpu;
			st->ncpu++;
			if (cpu > st->cpu_peak)
				st->cpu_peak = cpu;
		}
		if (mem_known && mem > st->mem_peak)
			st->mem_peak = mem;
		if (has_gpu)
			st->idle_gpu = true;
		/* idle: the GPUs' mean under IDLE_PCT, or without a GPU the CPU */
		if (nu > 0) {
			u /= (double)nu;
			idle_base++;
			if (u < IDLE_PCT) {
				idle_n++;
				st->idle_s += m->samples[sample].dt;
			}
			if (cpu >= 0) {
				st->sat_base++;
				if (cpu >= SATURATED_PCT && u < BUSY_PCT) {
					st->sat++;
					st->sat_cpu += cpu;
					st->sat_util += u;
				}
			}
		} else if (!has_gpu && cpu >= 0) {
			idle_base++;
			if (cpu < IDLE_PCT) {
				idle_n++;
				st->idle_s += m->samples[sample].dt;
			}
		}
		i = j;
	}
	st->sampled = st->samples > 0;
	st->cpu_mean = st->ncpu > 0 ? cpu_sum / (double)st->ncpu : -1;
	st->idle_pct = idle_base > 0 ? 100.0 * (double)idle_n / (double)idle_base : -1;
	st->nutil = nv;
	if (nv > 0) {
		qsort(vals, nv, sizeof(*vals), cmp_double);
		st->util_mean = util_sum / (double)nv;
		st->p5 = percentile(vals, nv, 5);
		st->p50 = percentile(vals, nv, 50);
		st->p95 = percentile(vals, nv, 95);
	}
}

static void warn(struct summary *sum, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(struct summary *sum, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(sum->warnings, json_string(text));
}

/* GPU-hours used: each GPU's utilization over the time each sample stands
 * for, a GPU seen by two ranks at one sample counted once. */
static double used_hours(const shell_monitor *m)
{
	uint32_t last[GPUS_MAX];
	double h = 0;
	bool any = false;

	for (int g = 0; g < GPUS_MAX; g++)
		last[g] = UINT32_MAX;
	for (size_t i = 0; i < m->nrows; i++) {
		const struct mon_row *r = &m->rows[i];

		if (r->gpu < 0 || r->util < 0 || last[r->gpu] == r->sample)
			continue;
		last[r->gpu] = r->sample;
		h += r->util / 100.0 * m->samples[r->sample].dt / 3600.0;
		any = true;
	}
	return any ? h : NAN;
}

/* order and first: the rows grouped by rank, each group in sample order.  0, or -1. */
static int index_rows(shell_monitor *m)
{
	size_t n = (size_t)m->nranks;

	m->order = malloc((m->nrows > 0 ? m->nrows : 1) * sizeof(*m->order));
	m->first = calloc(n + 2, sizeof(*m->first));
	if (m->order == NULL || m->first == NULL)
		return -1;
	for (size_t i = 0; i < m->nrows; i++)
		m->first[m->rows[i].rank + 2]++;
	for (size_t r = 2; r < n + 2; r++)
		m->first[r] += m->first[r - 1];
	/* first[r + 1] counts rank r's rows placed so far, then ends as its end */
	for (size_t i = 0; i < m->nrows; i++)
		m->order[m->first[m->rows[i].rank + 1]++] = i;
	return 0;
}

static int summarize(const shell_monitor *m, struct summary *sum, double elapsed, int gpus_held)
{
	double *vals = malloc((m->nrows > 0 ? m->nrows : 1) * sizeof(*vals));
	bool any_remote = false;

	sum->ranks = calloc((size_t)(m->nranks > 0 ? m->nranks : 1), sizeof(*sum->ranks));
	sum->gpu_n = calloc((size_t)(m->nranks > 0 ? m->nranks : 1) * GPUS_MAX, sizeof(size_t));
	sum->gpu_under = calloc((size_t)(m->nranks > 0 ? m->nranks : 1) * GPUS_MAX,
				sizeof(size_t));
	sum->warnings = json_array();
	if (vals == NULL || sum->ranks == NULL || sum->gpu_n == NULL || sum->gpu_under == NULL ||
	    sum->warnings == NULL) {
		free(vals);
		return -1;
	}
	/* the time sampled: the longest of the nodes' */
	{
		double *per = calloc((size_t)(m->nnodes > 0 ? m->nnodes : 1), sizeof(*per));

		for (size_t k = 0; per != NULL && k < m->nsamples; k++)
			per[m->samples[k].node] += m->samples[k].dt;
		for (int n = 0; per != NULL && n < m->nnodes; n++) {
			sum->nodes += per[n] > 0;
			if (per[n] > sum->duration)
				sum->duration = per[n];
		}
		free(per);
	}
	for (int i = 0; i < m->nranks; i++)
		rank_summary(m, i, sum, vals);
	free(vals);
	sum->used_hours = used_hours(m);
	sum->gpus_held = gpus_held > 0 ? gpus_held : m->ngpus;
	sum->held_hours = sum->gpus_held * elapsed / 3600.0;
	/* the warnings: a GPU not busy most of the run; a CPU saturated while the GPU waited */
	for (int i = 0; i < m->nranks; i++) {
		const struct rank_stats *st = &sum->ranks[i];

		for (int g = 0; g < m->ngpus; g++) {
			size_t n = sum->gpu_n[(size_t)i * GPUS_MAX + (size_t)g];
			size_t under = sum->gpu_under[(size_t)i * GPUS_MAX + (size_t)g];

			if (n >= 2 && 2 * under > n)
				warn(sum, "GPU %d (rank %d) sat under %.0f%% busy for %.0f%% of the run",
				     m->gpus[g].index, i, BUSY_PCT, 100.0 * (double)under / (double)n);
		}
		if (st->sat_base >= 2 && 2 * st->sat > st->sat_base)
			warn(sum, "rank %d: CPU saturated (%.0f%% of a core) while its GPU%s waited "
			     "(%.0f%% busy) for %.0f%% of the run", i, st->sat_cpu / (double)st->sat,
			     __builtin_popcountll(st->gpus) > 1 ? "s" : "",
			     st->sat_util / (double)st->sat, 100.0 * (double)st->sat /
			     (double)st->sat_base);
		any_remote |= m->remote[i];
	}
	if (m->ngpus == 0 && !m->local_rows && m->watched)
		snprintf(sum->note, sizeof(sum->note), "no GPU was sampled: NVML on the job's nodes "
			 "lists no process of it");
	else if (m->ngpus == 0 && m->node_gpus == 0)
		snprintf(sum->note, sizeof(sum->note), "no GPU was sampled: %s",
			 m->gpu_note[0] != '\0' ? m->gpu_note : "this node has no GPU");
	else if (m->ngpus == 0)
		snprintf(sum->note, sizeof(sum->note), "no GPU was sampled: this node has %d "
			 "GPU%s, but no rank held one (CUDA_VISIBLE_DEVICES) or ran on one",
			 m->node_gpus, m->node_gpus == 1 ? "" : "s");
	if (any_remote) {
		char ranks[256];
		bool many;

		rank_ranges(m->remote, m->nranks, ranks, sizeof(ranks));
		many = strpbrk(ranks, ",-") != NULL;
		if (!m->watched)
			snprintf(sum->remote_note, sizeof(sum->remote_note), "rank%s %s on other nodes "
				 "%s not sampled: %s", many ? "s" : "", ranks, many ? "were" : "was",
				 m->watch_note[0] ? m->watch_note : "no watch of those nodes");
		else
			snprintf(sum->remote_note, sizeof(sum->remote_note), "rank%s %s on other "
				 "nodes: GPUs as NVML there lists this job's processes; CPU use not "
				 "sampled (a node's samples have none per process)%s%s",
				 many ? "s" : "", ranks, m->watch_note[0] ? "; " : "", m->watch_note);
	}
	return 0;
}

static void summary_free(struct summary *sum)
{
	free(sum->ranks);
	free(sum->gpu_n);
	free(sum->gpu_under);
	json_decref(sum->warnings);
}

/* Bytes as "1.5 GiB". */
static void format_bytes(char *out, size_t cap, int64_t b)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	if (b < 0) {
		snprintf(out, cap, "-");
		return;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(out, cap, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

static void format_pct(char *out, size_t cap, double v, bool known)
{
	if (known && v >= 0)
		snprintf(out, cap, "%.0f%%", v);
	else
		snprintf(out, cap, "-");
}

/* The NVML indices of a rank's GPUs, "0,1"; "-" for none. */
static void format_gpus(const shell_monitor *m, uint64_t bits, char *out, size_t cap)
{
	size_t k = 0;

	snprintf(out, cap, "-");
	for (int g = 0; g < m->ngpus && k < cap; g++)
		if (bits & (1ull << g))
			k += (size_t)snprintf(out + k, cap - k, k ? ",%d" : "%d", m->gpus[g].index);
}

static void print_summary(const shell_monitor *m, const struct summary *sum)
{
	size_t i;
	json_t *w;

	if (m->nnodes <= 1 && !m->watched)
		fprintf(stderr, "%s: job %s: %zu sample%s of this node (%s) every %d ms over %.1f s\n",
			shell_command, herd_job_id(m->job), m->nsamples, m->nsamples == 1 ? "" : "s",
			m->host, m->period_ms, sum->duration);
	else
		fprintf(stderr, "%s: job %s: %zu sample%s of %d node%s every %d ms over %.1f s\n",
			shell_command, herd_job_id(m->job), m->nsamples, m->nsamples == 1 ? "" : "s",
			sum->nodes, sum->nodes == 1 ? "" : "s", m->period_ms, sum->duration);
	fprintf(stderr, "%4s  %-12s %-6s %9s %5s %5s %5s %10s %5s %9s %9s\n", "rank", "host", "GPUs",
		"util mean", "p5", "p50", "p95", "mem peak", "idle", "CPU mean", "CPU peak");
	for (int r = 0; r < m->nranks; r++) {
		const struct rank_stats *st = &sum->ranks[r];
		herd_job_rank_status rs;
		char gpus[64], mean[16], p5[16], p50[16], p95[16], mem[32], idle[16], cm[16],
			cp[16];
		bool u = st->nutil > 0;

		if (herd_job_rank(m->job, r, &rs) != HERD_OK)
			continue;
		if (!st->sampled) {
			fprintf(stderr, "%4d  %-12s not sampled%s\n", r, rs.host != NULL ? rs.host : "?",
				m->remote[r] ? " (another node)" : " (not running at any sample)");
			continue;
		}
		format_gpus(m, st->gpus, gpus, sizeof(gpus));
		format_pct(mean, sizeof(mean), st->util_mean, u);
		format_pct(p5, sizeof(p5), st->p5, u);
		format_pct(p50, sizeof(p50), st->p50, u);
		format_pct(p95, sizeof(p95), st->p95, u);
		format_bytes(mem, sizeof(mem), st->mem_peak);
		format_pct(idle, sizeof(idle), st->idle_pct, true);
		format_pct(cm, sizeof(cm), st->cpu_mean, true);
		format_pct(cp, sizeof(cp), st->cpu_peak, true);
		fprintf(stderr, "%4d  %-12s %-6s %9s %5s %5s %5s %10s %5s %9s %9s\n", r,
			rs.host != NULL ? rs.host : "?", gpus, mean, p5, p50, p95, mem, idle, cm, cp);
	}
	fprintf(stderr, "(util: GPU utilization; idle: the share of the samples with the rank's "
		"GPUs under %.0f%% busy, or its CPU under %.0f%% of a core when it has no GPU; "
		"CPU: %% of one core)\n", IDLE_PCT, IDLE_PCT);
	if (isnan(sum->used_hours))
		fprintf(stderr, "GPU-hours: %.4f held (%d GPU%s), used not measured\n",
			sum->held_hours, sum->gpus_held, sum->gpus_held == 1 ? "" : "s");
	else
		fprintf(stderr, "GPU-hours: %.4f held (%d GPU%s), %.4f used (%.0f%% of held)\n",
			sum->held_hours, sum->gpus_held, sum->gpus_held == 1 ? "" : "s",
			sum->used_hours,
			sum->held_hours > 0 ? 100.0 * sum->used_hours / sum->held_hours : 0.0);
	if (sum->note[0] != '\0')
		fprintf(stderr, "%s\n", sum->note);
	if (sum->remote_note[0] != '\0')
		fprintf(stderr, "%s\n", sum->remote_note);
	if (m->truncated)
		fprintf(stderr, "the series stop at %zu rows: the summary covers the run up to there\n",
			m->nrows);
	json_array_foreach(sum->warnings, i, w)
		fprintf(stderr, "warning: %s\n", json_string_value(w));
}

/* A figure for JSON: null when unknown. */
static json_t *jfig(double v, bool known)
{
	return known && v >= 0 && isfinite(v) ? json_real(round(v * 1000.0) / 1000.0) : json_null();
}

static json_t *summary_json(const shell_monitor *m, const struct summary *sum, double elapsed)
{
	json_t *doc = json_object(), *ranks = json_array(), *gpus = json_array();

	for (int g = 0; g < m->ngpus; g++)
		json_array_append_new(gpus, json_pack("{s:i, s:s, s:s, s:s, s:o}", "index",
			m->gpus[g].index, "uuid", m->gpus[g].uuid, "name", m->gpus[g].name, "bus_id",
			m->gpus[g].bus_id, "mem_total_bytes", m->gpus[g].mem_total >= 0
			? json_integer(m->gpus[g].mem_total) : json_null()));
	for (int r = 0; r < m->nranks; r++) {
		const struct rank_stats *st = &sum->ranks[r];
		herd_job_rank_status rs;
		json_t *rj, *rg = json_array();
		bool u = st->nutil > 0;

		if (herd_job_rank(m->job, r, &rs) != HERD_OK)
			continue;
		for (int g = 0; g < m->ngpus; g++) {
			size_t n = sum->gpu_n[(size_t)r * GPUS_MAX + (size_t)g];

			if (!(st->gpus & (1ull << g)))
				continue;
			json_array_append_new(rg, json_pack("{s:i, s:s, s:o}", "index",
				m->gpus[g].index, "uuid", m->gpus[g].uuid, "under_busy_pct",
				jfig(n > 0 ? 100.0 * (double)sum->gpu_under[(size_t)r * GPUS_MAX +
						(size_t)g] / (double)n : -1, n > 0)));
		}
		rj = json_object();
		json_object_set_new(rj, "rank", json_integer(r));
		json_object_set_new(rj, "host", shell_json_str(rs.host));
		json_object_set_new(rj, "sampled", json_boolean(st->sampled));
		json_object_set_new(rj, "samples", json_integer((json_int_t)st->samples));
		json_object_set_new(rj, "gpus", rg);
		json_object_set_new(rj, "gpu_util_mean_pct", jfig(st->util_mean, u));
		json_object_set_new(rj, "gpu_util_p5_pct", jfig(st->p5, u));
		json_object_set_new(rj, "gpu_util_p50_pct", jfig(st->p50, u));
		json_object_set_new(rj, "gpu_util_p95_pct", jfig(st->p95, u));
		json_object_set_new(rj, "gpu_mem_peak_bytes", st->mem_peak >= 0
				    ? json_integer(st->mem_peak) : json_null());
		json_object_set_new(rj, "idle_of", json_string(st->idle_gpu ? "gpu" : "cpu"));
		json_object_set_new(rj, "idle_pct", jfig(st->idle_pct, st->sampled));
		json_object_set_new(rj, "idle_s", jfig(st->idle_s, st->sampled));
		json_object_set_new(rj, "cpu_mean_pct", jfig(st->cpu_mean, st->ncpu > 0));
		json_object_set_new(rj, "cpu_peak_pct", jfig(st->cpu_peak, st->ncpu > 0));
		json_array_append_new(ranks, rj);
	}
	json_object_set_new(doc, "v", json_integer(1));
	json_object_set_new(doc, "job_id", json_string(herd_job_id(m->job)));
	json_object_set_new(doc, "host", json_string(m->host));
	json_object_set_new(doc, "state", json_string(herd_job_state_name(
		herd_job_get_state(m->job))));
	json_object_set_new(doc, "start", json_real(round(m->start * 1000.0) / 1000.0));
	json_object_set_new(doc, "elapsed_s", json_real(round(elapsed * 1000.0) / 1000.0));
	json_object_set_new(doc, "period_ms", json_integer(m->period_ms));
	json_object_set_new(doc, "samples", json_integer((json_int_t)m->nsamples));
	json_object_set_new(doc, "nodes", json_integer(sum->nodes));
	json_object_set_new(doc, "sampled_s", json_real(round(sum->duration * 1000.0) / 1000.0));
	json_object_set_new(doc, "idle_below_pct", json_real(IDLE_PCT));
	json_object_set_new(doc, "busy_below_pct", json_real(BUSY_PCT));
	json_object_set_new(doc, "cpu_saturated_pct", json_real(SATURATED_PCT));
	json_object_set_new(doc, "gpus", gpus);
	json_object_set_new(doc, "ranks", ranks);
	json_object_set_new(doc, "gpus_held", json_integer(sum->gpus_held));
	json_object_set_new(doc, "gpu_hours_held", json_real(sum->held_hours));
	json_object_set_new(doc, "gpu_hours_used", isnan(sum->used_hours) ? json_null()
			    : json_real(sum->used_hours));
	json_object_set_new(doc, "gpu_note", sum->note[0] ? json_string(sum->note) : json_null());
	json_object_set_new(doc, "remote_note", sum->remote_note[0]
			    ? json_string(sum->remote_note) : json_null());
	json_object_set_new(doc, "truncated", json_boolean(m->truncated));
	json_object_set_new(doc, "warnings", json_incref(sum->warnings));
	return doc;
}

/* ------------------------------------------------------------ the files */

/* A figure as CSV and JSON write it: empty / null when unknown. */
static void put_fig(FILE *f, double v, const char *none, const char *fmt)
{
	if (v >= 0 && isfinite(v))
		fprintf(f, fmt, v);
	else
		fputs(none, f);
}

static int write_text(const char *dir, const char *name, char *text, size_t len, bool ok)
{
	char path[4096];
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!ok || text == NULL) {
		fprintf(stderr, "%s: --monitor-out: cannot write %s: out of memory\n", shell_command,
			path);
		rc = -1;
	} else if (herd_file_write(path, text, len, 0644) != HERD_OK) {
		fprintf(stderr, "%s: --monitor-out %s\n", shell_command, shell_last_error());
		rc = -1;
	}
	free(text);
	return rc;
}

/* series.csv: a header, then a row per sample, rank and GPU. */
static int write_csv(const shell_monitor *m, const char *dir)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool ok;

	if (f == NULL)
		return write_text(dir, "series.csv", NULL, 0, false);
	fputs("time_s,unix_time_s,rank,host,pid,cpu_pct,gpu_index,gpu_uuid,gpu_util_pct,"
	      "gpu_mem_util_pct,gpu_mem_used_bytes,gpu_power_w\n", f);
	for (size_t i = 0; i < m->nrows; i++) {
		const struct mon_row *r = &m->rows[i];
		const struct mon_sample *s = &m->samples[r->sample];
		herd_job_rank_status rs;
		const char *host = herd_job_rank(m->job, r->rank, &rs) == HERD_OK && rs.host != NULL
				   ? rs.host : "";

		fprintf(f, "%.3f,%.3f,%d,%s,%d,", s->t, s->unix_ms / 1000.0, r->rank,
			strpbrk(host, ",\"\n") ? "?" : host, r->pid);
		put_fig(f, r->cpu, "", "%.1f");
		if (r->gpu >= 0) {
			fprintf(f, ",%d,%s,", m->gpus[r->gpu].index, m->gpus[r->gpu].uuid);
			put_fig(f, r->util, "", "%.1f");
			fputc(',', f);
			put_fig(f, r->mem_util, "", "%.1f");
			fputc(',', f);
			put_fig(f, (double)r->mem_used, "", "%.0f");
			fputc(',', f);
			put_fig(f, r->power, "", "%.1f");
			fputc('\n', f);
		} else {
			fputs(",,,,,,\n", f);
		}
	}
	ok = fclose(f) == 0;
	return write_text(dir, "series.csv", text, len, ok);
}

/* One column of series.json: the rows of rank r (and GPU g, -1: its first
 * row per sample) through get. */
static void put_column(FILE *f, const shell_monitor *m, int r, int g, const char *key,
		       double (*get)(const shell_monitor *, const struct mon_row *),
		       const char *fmt)
{
	bool first = true;
	uint32_t last = UINT32_MAX;

	fprintf(f, "\"%s\":[", key);
	for (size_t i = m->first[r]; i < m->first[r + 1]; i++) {
		const struct mon_row *row = &m->rows[m->order[i]];

		if (row->rank != r || (g >= 0 ? row->gpu != g : row->sample == last))
			continue;
		last = row->sample;
		if (!first)
			fputc(',', f);
		first = false;
		put_fig(f, get(m, row), "null", fmt);
	}
	fputc(']', f);
}

static double get_t(const shell_monitor *m, const struct mon_row *r)
{
	return m->samples[r->sample].t;
}

static double get_cpu(const shell_monitor *m, const struct mon_row *r)
{
	(void)m;
	return r->cpu;
}

static double get_util(const shell_monitor *m, const struct mon_row *r)
{
	(void)m;
	return r->util;
}

static double get_mem_util(const shell_monitor *m, const struct mon_row *r)
{
	(void)m;
	return r->mem_util;
}

static double get_mem(const shell_monitor *m, const struct mon_row *r)
{
	(void)m;
	return (double)r->mem_used;
}

static double get_power(const shell_monitor *m, const struct mon_row *r)
{
	(void)m;
	return r->power;
}

/* series.json: per rank its times and CPU, and per GPU of it its figures, as columns. */
static int write_series_json(const shell_monitor *m, const char *dir)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool ok, first = true;

	if (f == NULL)
		return write_text(dir, "series.json", NULL, 0, false);
	fprintf(f, "{\"v\":1,\"job_id\":\"%s\",\"host\":\"%s\",\"start\":%.3f,\"period_ms\":%d,"
		"\"ranks\":[", herd_job_id(m->job), m->host, m->start, m->period_ms);
	for (int r = 0; r < m->nranks; r++) {
		herd_job_rank_status rs;
		bool gfirst = true;

		if (herd_job_rank(m->job, r, &rs) != HERD_OK)
			continue;
		fprintf(f, "%s{\"rank\":%d,\"host\":\"%s\",", first ? "" : ",", r,
			rs.host != NULL && !strpbrk(rs.host, "\"\\") ? rs.host : "?");
		first = false;
		put_column(f, m, r, -1, "time_s", get_t, "%.3f");
		fputc(',', f);
		put_column(f, m, r, -1, "cpu_pct", get_cpu, "%.1f");
		fputs(",\"gpus\":[", f);
		for (int g = 0; g < m->ngpus; g++) {
			bool has = false;

			for (size_t i = m->first[r]; i < m->first[r + 1] && !has; i++)
				has = m->rows[m->order[i]].gpu == g;
			if (!has)
				continue;
			fprintf(f, "%s{\"index\":%d,\"uuid\":\"%s\",", gfirst ? "" : ",",
				m->gpus[g].index, m->gpus[g].uuid);
			gfirst = false;
			put_column(f, m, r, g, "time_s", get_t, "%.3f");
			fputc(',', f);
			put_column(f, m, r, g, "util_pct", get_util, "%.1f");
			fputc(',', f);
			put_column(f, m, r, g, "mem_util_pct", get_mem_util, "%.1f");
			fputc(',', f);
			put_column(f, m, r, g, "mem_used_bytes", get_mem, "%.0f");
			fputc(',', f);
			put_column(f, m, r, g, "power_w", get_power, "%.1f");
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
	ok = fclose(f) == 0;
	return write_text(dir, "series.json", text, len, ok);
}

static int write_summary_json(const char *dir, json_t *doc)
{
	char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	size_t len = text != NULL ? strlen(text) : 0;
	char *line = text != NULL ? realloc(text, len + 2) : NULL;

	if (line == NULL) {
		free(text);
		return write_text(dir, "summary.json", NULL, 0, false);
	}
	line[len] = '\n';
	line[len + 1] = '\0';
	return write_text(dir, "summary.json", line, len + 1, true);
}

/* herd.report.write(dir), in a Lua state of its own. */
static int report_call(lua_State *L)
{
	const char *dir = lua_touserdata(L, 1);

	luaL_openlibs(L);
	luaL_requiref(L, "herd", luaopen_herd, 1);
	lua_getfield(L, -1, "report");
	lua_getfield(L, -1, "write");
	lua_pushstring(L, dir);
	lua_call(L, 1, 2);
	if (lua_isnil(L, -2))
		return lua_error(L);
	return 0;
}

static int write_report(const char *dir)
{
	lua_State *L = luaL_newstate();
	int rc = 0;

	if (L == NULL) {
		fprintf(stderr, "%s: --monitor-out %s: out of memory for the plots\n", shell_command,
			dir);
		return -1;
	}
	lua_pushcfunction(L, report_call);
	lua_pushlightuserdata(L, (void *)dir);
	if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
		fprintf(stderr, "%s: --monitor-out %s: %s\n", shell_command, dir,
			lua_isstring(L, -1) ? lua_tostring(L, -1) : "the plots could not be made");
		rc = -1;
	}
	lua_close(L);
	return rc;
}

int shell_monitor_finish(shell_monitor *m, const char *dir, double elapsed, int gpus_held,
			 double *gpu_hours_used, int *gpus)
{
	struct summary sum;
	json_t *doc = NULL;
	int rc = 0;

	*gpu_hours_used = NAN;
	*gpus = gpus_held;
	herd_telemetry_free(m->tel);
	m->tel = NULL;
	stop_watch(m);
	if (m->job == NULL)
		return 0;
	memset(&sum, 0, sizeof(sum));
	if (index_rows(m) != 0 || summarize(m, &sum, elapsed, gpus_held) != 0) {
		fprintf(stderr, "%s: --monitor: out of memory for the summary\n", shell_command);
		summary_free(&sum);
		return -1;
	}
	print_summary(m, &sum);
	*gpu_hours_used = sum.used_hours;
	*gpus = sum.gpus_held;
	if (dir != NULL) {
		doc = summary_json(m, &sum, elapsed);
		rc |= write_csv(m, dir);
		rc |= write_series_json(m, dir);
		rc |= write_summary_json(dir, doc);
		if (rc == 0)
			rc |= write_report(dir);
		json_decref(doc);
	}
	summary_free(&sum);
	return rc != 0 ? -1 : 0;
}

void shell_monitor_free(shell_monitor *m)
{
	if (m == NULL)
		return;
	herd_telemetry_free(m->tel);
	stop_watch(m);
	free(m->remote_sample);
	pthread_mutex_destroy(&m->mu);
	for (int i = 0; i < m->nranks && m->ranks != NULL; i++)
		free(m->ranks[i].visible);
	free(m->ranks);
	free(m->remote);
	free(m->samples);
	free(m->rows);
	free(m->procs);
	free(m->order);
	free(m->first);
	free(m);
}
