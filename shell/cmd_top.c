/*
 * shell/cmd_top.c - herd top: a live view of what the GPUs, CPUs, memory
 * and network of this node, or of many, are doing (herd/telemetry.h's
 * watch); --once for one snapshot, --json for the samples as JSON lines.
 *
 * Every mode reads one herd_telemetry_watch: this node through a sampler
 * in this process, or the nodes of a hostlist, hostfile or Slurm
 * allocation each through `herd probe --watch`.  The view is made as an
 * array of plain lines (render), the same for --once and the live view;
 * the live view keeps the lines it last drew and writes only those that
 * changed, each with cursor addressing, on the terminal's alternate
 * screen.  Signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP)
 * reach the loop through a pipe, so the terminal is restored on the loop's
 * one way out, whatever ends it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

static const char top_usage[] =
	"usage: herd top [--once] [--json [--count N]] [--period MS]\n"
	"                [--hosts EXPR | --hostfile F | --slurm] [--sort KEY] [--filter TEXT]\n"
	"\n"
	"What the GPUs, CPUs, memory and network of this node, or of many, are doing:\n"
	"a line per node (CPU busy, load, memory, network rates), then a line per GPU\n"
	"(utilization, memory, power of its limit, temperature, SM clock, the job:rank\n"
	"of the process on it, \"late N ms\" while herd launch names that rank a\n"
	"straggler), redrawn at every sample until q.\n"
	"  --once          print one snapshot (two samples a period apart; with --json,\n"
	"                  a line of JSON per node) and exit\n"
	"  --json          each sample as a line of JSON (as herd probe writes them),\n"
	"                  until stopped\n"
	"  --count N       with --json, stop after N samples of every node\n"
	"  --period MS     milliseconds between samples (default 1000, at least 100)\n"
	"  --hosts EXPR    the nodes of a hostlist, over ssh (each streams with herd probe)\n"
	"  --hostfile F    the hosts of an Open MPI / DeepSpeed hostfile, over ssh\n"
	"  --slurm         the nodes of this Slurm allocation (one srun step)\n"
	"  --sort KEY      each node's GPUs by index (default), or the highest first by\n"
	"                  util, memory, power or temp\n"
	"  --filter TEXT   only the nodes and GPUs whose host, GPU name or job holds TEXT\n"
	"                  (any case)\n"
	"Keys: q quit; s the next sort key; / or f a filter (Enter keeps it, Esc drops\n"
	"it); Esc no filter; ? or h the keys.  A narrow terminal drops the SM clock,\n"
	"then the GPU name, power, temperature and job, rather than wrap.\n"
	"Exit status:\n"
	"  0    q, or SIGINT, SIGTERM, SIGHUP or SIGQUIT; --once: every node shown;\n"
	"       --json: --count samples of every node, or a signal\n"
	"  1    a node gave no sample or failed (said on stderr), or the terminal\n"
	"       could not be set up or written\n"
	"  2    a usage error (the live view without a terminal too), a --hosts or\n"
	"       --hostfile that cannot be read, or --slurm outside an allocation\n"
	"  141  the reader of --once or --json went away, as yes | head\n";

#define MIN_PERIOD_MS 100
#define MAX_PERIOD_MS (24 * 3600 * 1000)
/* The widest line drawn; a wider terminal gets this much. */
#define MAX_COLS 1000
/* --once: the first sample comes at once, the second a period later; a
 * node has the watch's start deadline (30 s) for its first, and this
 * much is the bound of the whole wait beyond those. */
#define ONCE_SLACK_MS 5000
#define START_MS 30000

enum sort_key { SORT_INDEX, SORT_UTIL, SORT_MEMORY, SORT_POWER, SORT_TEMP, NSORT };
static const char *const sort_names[NSORT] = { "index", "util", "memory", "power", "temp" };

typedef struct top_node {
	herd_telemetry_node info;      /* state and reason, as the watch last said */
	herd_telemetry_sample *s;      /* its latest sample; NULL before the first */
	uint64_t got;                  /* samples received */
	bool said;                     /* its failure said on stderr */
} top_node;

typedef struct top {
	herd_telemetry_watch *w;
	size_t n;
	top_node *nodes;
	herd_telemetry_sample *scratch;
	char what[160];                /* the nodes, for the header */
	int period_ms;
	enum sort_key sort;
	char filter[64];
	bool editing;                  /* typing the filter */
	bool help;                     /* the keys shown */
	int cols, rows;
} top;

/* ---- lines of text -------------------------------------------------------- */

/* A line being made: at most cap columns, one byte each (the text is ASCII). */
typedef struct lbuf {
	char s[MAX_COLS + 1];
	int len, cap;
} lbuf;

static void lb_init(lbuf *b, int cap)
{
	b->len = 0;
	b->cap = cap < MAX_COLS ? cap : MAX_COLS;
	b->s[0] = '\0';
}

/* A figure as whole units and its unit into text, "-" when the source
 * does not give it (-1); returns text. */
static const char *figure(char *text, size_t cap, double v, const char *unit)
{
	if (v < 0)
		snprintf(text, cap, "-");
	else
		snprintf(text, cap, "%.0f%s", v, unit);
	return text;
}

/* text padded or cut to width (left- or right-aligned); what comes from a
 * sample (a job id from some process's environment) may hold anything, so
 * every byte that is not printable ASCII is shown as '?'. */
static void put(lbuf *b, const char *text, int width, bool right)
{
	int tl = (int)strlen(text), pad;

	if (tl > width)
		tl = width;
	pad = width - tl;
	for (int i = 0; i < width && b->len < b->cap; i++) {
		int k = right ? i - pad : i;
		unsigned char c = k >= 0 && k < tl ? (unsigned char)text[k] : ' ';

		b->s[b->len++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	b->s[b->len] = '\0';
}

/* The line with trailing blanks dropped, as a new string (NULL: no memory). */
static char *lb_take(lbuf *b)
{
	while (b->len > 0 && b->s[b->len - 1] == ' ')
		b->len--;
	b->s[b->len] = '\0';
	return strdup(b->s);
}

/* An array of lines. */
typedef struct lines {
	char **v;
	int n, cap;
	bool failed;                   /* out of memory on the way */
} lines;

static void add_line(lines *l, lbuf *b)
{
	char *s = lb_take(b);

	if (s == NULL || (l->n == l->cap && (l->cap = l->cap ? 2 * l->cap : 64,
					     l->v = realloc(l->v, (size_t)l->cap * sizeof(*l->v))) == NULL)) {
		free(s);
		l->failed = true;
		l->n = l->cap = 0;
		return;
	}
	l->v[l->n++] = s;
}

static void lines_free(lines *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* ---- figures as text -------------------------------------------------------- */

/*
 * A bar of width columns: "[|||||      42.0%]", filled for pct of 100, the
 * text at its right end inside; a pct below 0 (not known) fills nothing.
 */
static void bar(lbuf *b, int width, double pct, const char *text)
{
	char s[MAX_COLS + 1];
	int inner = width - 2, tl = (int)strlen(text), fill;

	if (inner < 1) {
		put(b, text, width, true);
		return;
	}
	fill = pct <= 0 ? 0 : pct >= 100 ? inner : (int)(pct / 100.0 * inner + 0.5);
	s[0] = '[';
	for (int i = 0; i < inner; i++)
		s[1 + i] = i < fill ? '|' : ' ';
	if (tl > inner)
		tl = inner;
	memcpy(s + 1 + inner - tl, text, (size_t)tl);
	s[width - 1] = ']';
	s[width] = '\0';
	put(b, s, width, false);
}

/* Bytes as GiB, "12.3"; "-" for not known. */
static void gib(char *out, size_t cap, int64_t bytes)
{
	if (bytes < 0)
		snprintf(out, cap, "-");
	else
		snprintf(out, cap, "%.1f", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

/* "used/totalG" and the share used (-1: not known). */
static double mem_text(char *out, size_t cap, int64_t used, int64_t total)
{
	char u[32], t[32];

	gib(u, sizeof(u), used);
	gib(t, sizeof(t), total);
	snprintf(out, cap, "%s/%sG", u, t);
	return used >= 0 && total > 0 ? 100.0 * (double)used / (double)total : -1;
}

/* A rate in bytes per second, "340kB/s", "1.2MB/s" (decimal units, as
 * network rates are said); "-" for not known. */
static void rate(char *out, size_t cap, double bps)
{
	static const char *const unit[] = { "B/s", "kB/s", "MB/s", "GB/s", "TB/s" };
	int u = 0;

	if (bps < 0) {
		snprintf(out, cap, "-");
		return;
	}
	while (bps >= 999.5 && u < 4) {
		bps /= 1000.0;
		u++;
	}
	snprintf(out, cap, u == 0 || bps >= 9.95 ? "%.0f%s" : "%.1f%s", bps, unit[u]);
}

/* ---- columns ------------------------------------------------------------------ */

typedef struct colspec {
	const char *head;
	int min, max;                  /* columns; min < max: it takes what is left */
	bool right;
} colspec;

/*
 * The widths of n columns (0: left out) in avail columns after indent,
 * one blank between two: the columns of drop are left out in that order
 * until the others fit at their least, then the flexible ones share what
 * is left, each up to its most.
 */
static void layout(const colspec *c, int n, const int *drop, int ndrop, int avail, int indent,
		   int *w)
{
	bool on[16];
	int need = 0, extra, nflex = 0;

	for (int i = 0; i < n; i++)
		on[i] = true;
	for (int k = 0;; k++) {
		int count = 0;

		need = indent;
		for (int i = 0; i < n; i++)
			if (on[i])
				need += c[i].min + (count++ > 0);
		if (need <= avail || k == ndrop)
			break;
		on[drop[k]] = false;
	}
	for (int i = 0; i < n; i++) {
		w[i] = on[i] ? c[i].min : 0;
		nflex += on[i] && c[i].max > c[i].min;
	}
	extra = avail - need;
	/* Rounds: each flexible column takes its share of what is left, up to its most. */
	while (extra > 0 && nflex > 0) {
		int share = extra / nflex > 0 ? extra / nflex : 1, given = 0;

		nflex = 0;
		for (int i = 0; i < n && extra > 0; i++) {
			int add;

			if (!on[i] || w[i] >= c[i].max)
				continue;
			add = c[i].max - w[i] < share ? c[i].max - w[i] : share;
			if (add > extra)
				add = extra;
			w[i] += add;
			extra -= add;
			given += add;
			nflex += w[i] < c[i].max;
		}
		if (given == 0)
			break;
	}
}

/* The GPU line's columns, and the order they go in a narrow terminal. */
enum { G_IDX, G_NAME, G_UTIL, G_MEM, G_POWER, G_TEMP, G_SM, G_JOB, G_N };
static const colspec gpu_cols[G_N] = {
	[G_IDX] = { "GPU", 3, 3, true },
	[G_NAME] = { "NAME", 14, 14, false },
	[G_UTIL] = { "UTIL", 9, 24, false },
	[G_MEM] = { "MEMORY", 13, 30, false },
	[G_POWER] = { "POWER", 9, 9, true },
	[G_TEMP] = { "TEMP", 4, 4, true },
	[G_SM] = { "SM MHz", 6, 6, true },
	[G_JOB] = { "JOB:RANK", 8, 36, false },
};
static const int gpu_drop[] = { G_SM, G_NAME, G_POWER, G_TEMP, G_JOB };
#define GPU_INDENT 2

/* The node line's columns, likewise. */
enum { N_HOST, N_CPU, N_LOAD, N_MEM, N_NET, N_N };
static const colspec node_cols[N_N] = {
	[N_HOST] = { "NODE", 4, 24, false },
	[N_CPU] = { "cpu", 14, 28, false },
	[N_LOAD] = { "load", 10, 10, false },
	[N_MEM] = { "mem", 17, 32, false },
	[N_NET] = { "net", 28, 28, false },
};
static const int node_drop[] = { N_NET, N_LOAD };

/* ---- the view ------------------------------------------------------------------ */

/* The GPU name without the vendor's words: "H100 80GB HBM3". */
static const char *short_name(const char *name)
{
	static const char *const words[] = { "NVIDIA ", "Tesla " };

	for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
		if (strncmp(name, words[i], strlen(words[i])) == 0)
			name += strlen(words[i]);
	return name;
}

/* Who holds GPU g (its place in s->gpus): "job:rank", "+N" for more
 * processes, and "late N ms" when herd launch names one of them a
 * straggler; "-" when none. */
static void holder(char *out, size_t cap, const herd_telemetry_sample *s, int g)
{
	const herd_telemetry_proc *first = NULL;
	int more = 0;
	double late = 0;
	char one[HERD_NAME_LEN + 64], mark[32] = "";

	for (int i = 0; i < s->nprocs; i++) {
		if (s->procs[i].gpu != g)
			continue;
		if (s->procs[i].late_ms > late)
			late = s->procs[i].late_ms;
		if (first == NULL)
			first = &s->procs[i];
		else
			more++;
	}
	if (late > 0)
		snprintf(mark, sizeof(mark), " late %.*f ms", late < 10 ? 1 : 0, late);
	if (first == NULL) {
		snprintf(out, cap, "-");
		return;
	}
	if (first->job[0] != '\0' && first->rank >= 0)
		snprintf(one, sizeof(one), "%s:%d", first->job, first->rank);
	else if (first->job[0] != '\0')
		snprintf(one, sizeof(one), "%s", first->job);
	else if (first->rank >= 0)
		snprintf(one, sizeof(one), "rank %d", first->rank);
	else if (first->comm[0] != '\0')
		snprintf(one, sizeof(one), "%s[%" PRId64 "]", first->comm, first->pid);
	else
		snprintf(one, sizeof(one), "pid %" PRId64, first->pid);
	if (more > 0)
		snprintf(out, cap, "%s +%d%s", one, more, mark);
	else
		snprintf(out, cap, "%s%s", one, mark);
}

static bool matches(const char *text, const char *filter)
{
	return filter[0] == '\0' || strcasestr(text, filter) != NULL;
}

/* Whether GPU g of s is shown under the filter (its node's host aside). */
static bool gpu_matches(const top *t, const herd_telemetry_sample *s, int g)
{
	char who[HERD_NAME_LEN + 80];

	holder(who, sizeof(who), s, g);
	return matches(s->gpus[g].name, t->filter) || (strcmp(who, "-") != 0 &&
						      matches(who, t->filter));
}

/* A sort figure of GPU g: higher first; -1 (not known) last. */
static double sort_value(const herd_telemetry_gpu *g, enum sort_key k)
{
	switch (k) {
	case SORT_UTIL:
		return g->util_gpu;
	case SORT_MEMORY:
		return (double)g->mem_used;
	case SORT_POWER:
		return g->power_w;
	case SORT_TEMP:
		return g->temp_c;
	default:
		return -(double)g->index;
	}
}

/* The order of s's GPUs under key k, into order[] (places in s->gpus). */
static void sort_gpus(const herd_telemetry_sample *s, enum sort_key k, int *order)
{
	for (int i = 0; i < s->ngpus; i++)
		order[i] = i;
	/* An insertion sort: sixteen GPUs at most; ties by index. */
	for (int i = 1; i < s->ngpus; i++) {
		int v = order[i], j = i;

		while (j > 0) {
			const herd_telemetry_gpu *a = &s->gpus[order[j - 1]], *b = &s->gpus[v];
			double va = sort_value(a, k), vb = sort_value(b, k);

			if (va > vb || (va == vb && a->index <= b->index))
				break;
			order[j] = order[j - 1];
			j--;
		}
		order[j] = v;
	}
}

static void gpu_line(lines *out, const herd_telemetry_sample *s, int g, const int *w, int cap)
{
	const herd_telemetry_gpu *gpu = &s->gpus[g];
	char text[160];
	double pct;
	lbuf b;
	bool first = true;

	lb_init(&b, cap);
	put(&b, "", GPU_INDENT, false);
	for (int c = 0; c < G_N; c++) {
		if (w[c] == 0)
			continue;
		if (!first)
			put(&b, "", 1, false);
		first = false;
		switch (c) {
		case G_IDX:
			snprintf(text, sizeof(text), "%d", gpu->index);
			put(&b, text, w[c], true);
			break;
		case G_NAME:
			put(&b, short_name(gpu->name), w[c], false);
			break;
		case G_UTIL:
			if (gpu->util_gpu < 0)
				snprintf(text, sizeof(text), "-");
			else
				snprintf(text, sizeof(text), "%.0f%%", gpu->util_gpu);
			bar(&b, w[c], gpu->util_gpu, text);
			break;
		case G_MEM:
			pct = mem_text(text, sizeof(text), gpu->mem_used, gpu->mem_total);
			bar(&b, w[c], pct, text);
			break;
		case G_POWER:
			if (gpu->power_w < 0)
				snprintf(text, sizeof(text), "-");
			else if (gpu->power_limit_w > 0)
				snprintf(text, sizeof(text), "%.0f/%.0fW", gpu->power_w, gpu->power_limit_w);
			else
				snprintf(text, sizeof(text), "%.0fW", gpu->power_w);
			put(&b, text, w[c], true);
			break;
		case G_TEMP:
			put(&b, figure(text, sizeof(text), gpu->temp_c, "C"), w[c], true);
			break;
		case G_SM:
			put(&b, figure(text, sizeof(text), gpu->sm_clock_mhz, ""), w[c], true);
			break;
		case G_JOB:
			holder(text, sizeof(text), s, g);
			put(&b, text, w[c], false);
			break;
		}
	}
	add_line(out, &b);
}

static void node_line(lines *out, const top_node *nd, const int *w, int cap)
{
	const herd_telemetry_sample *s = nd->s;
	char text[160], rx[32], tx[32];
	double rxs = -1, txs = -1, pct;
	bool first = true;
	lbuf b;

	for (int i = 0; i < s->nnets; i++) {
		if (s->nets[i].rx_bps >= 0)
			rxs = (rxs < 0 ? 0 : rxs) + s->nets[i].rx_bps;
		if (s->nets[i].tx_bps >= 0)
			txs = (txs < 0 ? 0 : txs) + s->nets[i].tx_bps;
	}
	lb_init(&b, cap);
	for (int c = 0; c < N_N; c++) {
		if (w[c] == 0)
			continue;
		if (!first)
			put(&b, "", 1, false);
		first = false;
		switch (c) {
		case N_HOST:
			put(&b, nd->info.host, w[c], false);
			break;
		case N_CPU:
			put(&b, "cpu ", 4, false);
			if (s->cpu_busy < 0)
				snprintf(text, sizeof(text), "-");
			else
				snprintf(text, sizeof(text), "%.1f%%", s->cpu_busy);
			bar(&b, w[c] - 4, s->cpu_busy, text);
			break;
		case N_LOAD:
			snprintf(text, sizeof(text), "load %.2f", s->load1);
			put(&b, s->load1 < 0 ? "load -" : text, w[c], false);
			break;
		case N_MEM:
			put(&b, "mem ", 4, false);
			pct = mem_text(text, sizeof(text), s->mem_available >= 0 && s->mem_total >= 0
				       ? s->mem_total - s->mem_available : -1, s->mem_total);
			bar(&b, w[c] - 4, pct, text);
			break;
		case N_NET:
			rate(rx, sizeof(rx), rxs);
			rate(tx, sizeof(tx), txs);
			snprintf(text, sizeof(text), "net rx %s tx %s", rx, tx);
			put(&b, text, w[c], false);
			break;
		}
	}
	add_line(out, &b);
}

/* A line of text alone, cut to cap. */
static void text_line(lines *out, int cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void text_line(lines *out, int cap, const char *fmt, ...)
{
	char text[MAX_COLS + 1];
	va_list ap;
	lbuf b;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	lb_init(&b, cap);
	put(&b, text, cap, false);
	add_line(out, &b);
}

static const char *const help_lines[] = {
	"Keys:",
	"  q         quit (Ctrl-C too)",
	"  s         the next sort key: index, util, memory, power, temp",
	"  / or f    a filter: type text (host, GPU name or job); Enter keeps it, Esc drops it",
	"  Esc       no filter",
	"  ? or h    these keys; any key goes back",
	"  Ctrl-L    draw the screen anew",
	NULL
};

/*
 * The view as lines of at most cap columns: the header (with the keys'
 * hint when live), the GPU columns' names, then each node shown under the
 * filter: its line, and a line per GPU in the sort's order, or the note
 * of a node without GPUs, or the state of a node with no sample.
 */
static void render(const top *t, lines *out, int cap, bool live)
{
	int gw[G_N], nw[N_N], order[HERD_TELEMETRY_MAX_GPUS], host_w = 4, shown = 0;
	colspec ncols[N_N];
	int64_t newest = 0;
	char when[32] = "--:--:--", period[32], head[MAX_COLS + 1];
	bool any_gpu = false;
	size_t hl;

	memcpy(ncols, node_cols, sizeof(ncols));
	for (size_t i = 0; i < t->n; i++) {
		const top_node *nd = &t->nodes[i];
		int l = (int)strlen(nd->info.host);

		host_w = l > host_w ? l : host_w;
		if (nd->s != NULL) {
			newest = nd->s->time_ms > newest ? nd->s->time_ms : newest;
			any_gpu |= nd->s->ngpus > 0;
		}
	}
	ncols[N_HOST].min = ncols[N_HOST].max = host_w < 24 ? host_w : 24;
	layout(gpu_cols, G_N, gpu_drop, (int)(sizeof(gpu_drop) / sizeof(*gpu_drop)), cap,
	       GPU_INDENT, gw);
	layout(ncols, N_N, node_drop, (int)(sizeof(node_drop) / sizeof(*node_drop)), cap, 0, nw);

	if (newest > 0) {
		time_t secs = (time_t)(newest / 1000);
		struct tm tm;

		if (localtime_r(&secs, &tm) != NULL)
			strftime(when, sizeof(when), "%H:%M:%S", &tm);
	}
	if (t->period_ms % 1000 == 0)
		snprintf(period, sizeof(period), "%d s", t->period_ms / 1000);
	else if (t->period_ms > 1000)
		snprintf(period, sizeof(period), "%.1f s", t->period_ms / 1000.0);
	else
		snprintf(period, sizeof(period), "%d ms", t->period_ms);
	snprintf(head, sizeof(head), "herd top  %s  %s  every %s  sort: %s%s%s%s", t->what, when,
		 period, sort_names[t->sort], t->filter[0] != '\0' || t->editing ? "  filter: " : "",
		 t->filter, t->editing ? "_" : "");
	hl = strlen(head);
	if (live && (int)hl + 14 <= cap)
		snprintf(head + hl, sizeof(head) - hl, "%*s", cap - (int)hl, "? for the keys");
	text_line(out, cap, "%s", head);
	if (live && t->help) {
		for (int i = 0; help_lines[i] != NULL; i++)
			text_line(out, cap, "%s", help_lines[i]);
		return;
	}
	if (any_gpu) {
		lbuf b;
		bool first = true;

		lb_init(&b, cap);
		put(&b, "", GPU_INDENT, false);
		for (int c = 0; c < G_N; c++) {
			if (gw[c] == 0)
				continue;
			if (!first)
				put(&b, "", 1, false);
			first = false;
			put(&b, gpu_cols[c].head, gw[c], gpu_cols[c].right);
		}
		add_line(out, &b);
	}
	for (size_t i = 0; i < t->n; i++) {
		const top_node *nd = &t->nodes[i];
		const herd_telemetry_sample *s = nd->s;
		bool host_ok = matches(nd->info.host, t->filter), some = false;

		if (nd->info.state >= HERD_TELEMETRY_NODE_UNREACHABLE || s == NULL) {
			if (!host_ok)
				continue;
			if (nd->info.state >= HERD_TELEMETRY_NODE_UNREACHABLE)
				text_line(out, cap, "%-*s %s: %s", nw[N_HOST], nd->info.host,
					  herd_telemetry_node_state_name(nd->info.state), nd->info.why);
			else
				text_line(out, cap, "%-*s starting", nw[N_HOST], nd->info.host);
			shown++;
			continue;
		}
		for (int g = 0; g < s->ngpus && !host_ok && !some; g++)
			some = gpu_matches(t, s, g);
		if (!host_ok && !some)
			continue;
		shown++;
		node_line(out, nd, nw, cap);
		if (s->ngpus == 0) {
			text_line(out, cap, "  no GPU: %s", s->gpu_note[0] != '\0' ? s->gpu_note
									 : "none found");
			continue;
		}
		sort_gpus(s, t->sort, order);
		for (int k = 0; k < s->ngpus; k++)
			if (host_ok || gpu_matches(t, s, order[k]))
				gpu_line(out, s, order[k], gw, cap);
	}
	if (shown == 0 && t->filter[0] != '\0')
		text_line(out, cap, "no node or GPU matches \"%s\"", t->filter);
}

/* ---- the watch ---------------------------------------------------------------- */

/* The nodes' states as the watch says them now; a node's failure said
 * on stderr, once, when say. */
static void read_states(top *t, bool say)
{
	for (size_t i = 0; i < t->n; i++) {
		top_node *nd = &t->nodes[i];

		if (herd_telemetry_watch_node(t->w, i, &nd->info) != HERD_OK)
			continue;
		if (say && !nd->said && nd->info.state >= HERD_TELEMETRY_NODE_UNREACHABLE) {
			fprintf(stderr, "herd top: %s: %s: %s\n", nd->info.host,
				herd_telemetry_node_state_name(nd->info.state), nd->info.why);
			nd->said = true;
		}
	}
}

/* Keeps the newest sample of each node of those that wait, then reads
 * the nodes' states. */
static void take(top *t)
{
	size_t node;

	while (herd_telemetry_watch_next(t->w, &node, t->scratch) == HERD_OK) {
		top_node *nd = &t->nodes[node];

		if (nd->s == NULL && (nd->s = malloc(sizeof(*nd->s))) == NULL)
			continue;
		memcpy(nd->s, t->scratch, sizeof(*nd->s));
		nd->got++;
	}
	read_states(t, false);
}

static void top_free(top *t)
{
	herd_telemetry_watch_free(t->w);
	for (size_t i = 0; i < t->n; i++)
		free(t->nodes[i].s);
	free(t->nodes);
	free(t->scratch);
}

/* ---- signals ------------------------------------------------------------------- */

/* The pipe through which the loop hears of a signal (shell_signals_catch). */
static int sig_fd = -1;

static int signals_init(bool live)
{
	/* SIGQUIT too: Ctrl-\ ends the live view with the terminal given back. */
	static const int stops[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	static const int view[] = { SIGWINCH, SIGTSTP };

	sig_fd = shell_signals_catch("herd top", stops, sizeof(stops) / sizeof(*stops));
	if (sig_fd >= 0 && live)
		sig_fd = shell_signals_catch("herd top", view, sizeof(view) / sizeof(*view));
	return sig_fd < 0 ? -1 : 0;
}

/* The signals that came since the last call, as a mask of bits 1 << sig. */
static unsigned long signals_read(void)
{
	unsigned long mask = 0;
	char buf[64];
	ssize_t n;

	while ((n = read(sig_fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] > 0 && buf[i] < 64)
				mask |= 1ul << buf[i];
	return mask;
}

#define STOP_SIGNALS ((1ul << SIGINT) | (1ul << SIGTERM) | (1ul << SIGHUP) | (1ul << SIGQUIT))

/* ---- --json and --once ------------------------------------------------------------ */

/* Whether every node is done: count samples (0: never), or failed. */
static bool all_done(const top *t, uint64_t count, uint64_t *failed)
{
	bool done = true;

	*failed = 0;
	for (size_t i = 0; i < t->n; i++) {
		const top_node *nd = &t->nodes[i];

		if (nd->info.state >= HERD_TELEMETRY_NODE_UNREACHABLE)
			(*failed)++;
		else if (count == 0 || nd->got < count)
			done = false;
	}
	return done;
}

/* Waits for the watch or a signal, at most timeout_ms; a stopping signal
 * gives 1. */
static int wait_event(top *t, int timeout_ms)
{
	struct pollfd p[2] = { { .fd = herd_telemetry_watch_fd(t->w), .events = POLLIN },
			       { .fd = sig_fd, .events = POLLIN } };

	if (poll(p, 2, timeout_ms) < 0 && errno != EINTR)
		return 0;
	return (signals_read() & STOP_SIGNALS) != 0;
}

/* --json: each sample as a line, as it comes. */
static int run_json(top *t, uint64_t count)
{
	uint64_t failed = 0;
	size_t node;

	for (;;) {
		while (herd_telemetry_watch_next(t->w, &node, t->scratch) == HERD_OK) {
			char *json = NULL;

			if (count > 0 && t->nodes[node].got >= count)
				continue;
			t->nodes[node].got++;
			if (herd_telemetry_json(t->scratch, &json) != HERD_OK) {
				shell_message("herd top", shell_last_error());
				return SHELL_EXIT_FAILURE;
			}
			fputs(json, stdout);
			free(json);
			if (putchar('\n') == EOF || fflush(stdout) != 0)
				return SHELL_EXIT_FAILURE;   /* said by main's check of stdout */
		}
		read_states(t, true);
		if (all_done(t, count, &failed))
			break;
		if (wait_event(t, 1000))
			break;
	}
	return failed > 0 ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
}

/* The width of --once's lines: the terminal's, else $COLUMNS, else all. */
static int once_cols(void)
{
	struct winsize ws;
	const char *env = getenv("COLUMNS");
	int c;

	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col < MAX_COLS ? ws.ws_col : MAX_COLS;
	if (env != NULL && shell_parse_int(env, 1, MAX_COLS, &c) == 0)
		return c;
	return MAX_COLS;
}

/* --once: each node's second sample (its rates over one period), or its failure. */
static int run_once(top *t, bool json)
{
	int64_t deadline_ms = (int64_t)START_MS + 2 * t->period_ms + ONCE_SLACK_MS;
	struct timespec t0, now;
	uint64_t failed = 0;
	lines out = { 0 };
	int status;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int64_t spent;

		take(t);
		if (all_done(t, 2, &failed))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		spent = (int64_t)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (spent >= deadline_ms)
			break;
		if (wait_event(t, (int)(deadline_ms - spent)))
			return SHELL_EXIT_OK;   /* stopped before a snapshot: nothing to show */
	}
	/* Nodes that gave no second sample in time are said, as failed ones are. */
	for (size_t i = 0; i < t->n; i++) {
		top_node *nd = &t->nodes[i];

		if (nd->info.state >= HERD_TELEMETRY_NODE_UNREACHABLE) {
			fprintf(stderr, "herd top: %s: %s: %s\n", nd->info.host,
				herd_telemetry_node_state_name(nd->info.state), nd->info.why);
		} else if (nd->got < 2) {
			fprintf(stderr, "herd top: %s: %s within %.0f s\n", nd->info.host,
				nd->got == 0 ? "no sample" : "no second sample",
				(double)deadline_ms / 1000.0);
			failed++;
		}
	}
	status = failed > 0 ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
	if (json) {
		for (size_t i = 0; i < t->n; i++) {
			char *line = NULL;

			if (t->nodes[i].s == NULL)
				continue;
			if (herd_telemetry_json(t->nodes[i].s, &line) != HERD_OK) {
				shell_message("herd top", shell_last_error());
				return SHELL_EXIT_FAILURE;
			}
			printf("%s\n", line);
			free(line);
		}
		return status;
	}
	render(t, &out, once_cols(), false);
	if (out.failed) {
		shell_message("herd top", "out of memory making the view");
		return SHELL_EXIT_FAILURE;
	}
	for (int i = 0; i < out.n; i++)
		printf("%s\n", out.v[i]);
	lines_free(&out);
	return status;
}

/* ---- the live view ----------------------------------------------------------------- */

static struct termios saved_tio;
static bool in_view;

/* Writes all of len bytes to the terminal; -1 on an error. */
static int term_write(const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(STDOUT_FILENO, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = STDOUT_FILENO, .events = POLLOUT };

			if (poll(&pf, 1, 5000) <= 0)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Keys one at a time, no echo, signals kept (Ctrl-C is SIGINT, Ctrl-Z
 * SIGTSTP); the alternate screen, the cursor hidden. */
static int term_enter(void)
{
	static const char enter[] = "\033[?1049h\033[?25l";
	struct termios raw = saved_tio;

	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | IEXTEN);
	raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
		return -1;
	in_view = true;
	return term_write(enter, sizeof(enter) - 1);
}

/* The terminal as it was: attributes off, cursor shown, alternate screen left. */
static void term_leave(void)
{
	static const char leave[] = "\033[0m\033[?25h\033[?1049l";

	if (!in_view)
		return;
	in_view = false;
	(void)term_write(leave, sizeof(leave) - 1);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
}

static void term_size(top *t)
{
	struct winsize ws;

	t->cols = 80;
	t->rows = 24;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
		t->cols = ws.ws_col < MAX_COLS ? ws.ws_col : MAX_COLS;
		t->rows = ws.ws_row;
	}
}

/* A growing buffer of what is written to the terminal at once. */
typedef struct obuf {
	char *p;
	size_t len, cap;
} obuf;

static void ob_add(obuf *o, const char *s, size_t n)
{
	if (o->p == NULL && o->cap != 0)
		return;   /* out of memory before: this frame is lost */
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *p;

		while (cap < o->len + n + 1)
			cap *= 2;
		if ((p = realloc(o->p, cap)) == NULL) {
			free(o->p);
			o->p = NULL;
			o->cap = 1;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

/*
 * Draws lines on the screen where prev (the lines on it now) differs: a
 * changed line is written at its row and the rest of the row cleared;
 * rows that had a line and have none now are cleared.  The header (row 1)
 * in reverse video, as wide as the screen.  Lines past the screen's
 * height give way to a line that says how many are left out.  Returns -1
 * when the terminal could not be written.
 */
static int draw(const top *t, lines *now, lines *prev, bool all)
{
	obuf o = { 0 };
	int rows = now->n, rc;
	char more[MAX_COLS + 1];

	if (rows > t->rows) {
		snprintf(more, sizeof(more), "... %d more lines (a filter, / or f, shows fewer)",
			 now->n - (t->rows - 1));
		free(now->v[t->rows - 1]);
		now->v[t->rows - 1] = strndup(more, (size_t)t->cols);
		for (int i = t->rows; i < now->n; i++)
			free(now->v[i]);
		now->n = rows = t->rows;
		if (now->v[rows - 1] == NULL)
			now->v[rows - 1] = strdup("");
		if (now->v[rows - 1] == NULL)
			now->n = rows = rows - 1;
	}
	if (all)
		ob_add(&o, "\033[H\033[2J", 7);
	for (int i = 0; i < rows || i < prev->n; i++) {
		char at[32];
		int n;

		if (!all && i < rows && i < prev->n && strcmp(now->v[i], prev->v[i]) == 0)
			continue;
		if (all && i >= rows)
			break;
		n = snprintf(at, sizeof(at), "\033[%d;1H", i + 1);
		ob_add(&o, at, (size_t)n);
		if (i >= rows) {
			ob_add(&o, "\033[K", 3);
			continue;
		}
		if (i == 0) {
			char head[MAX_COLS + 1];

			snprintf(head, sizeof(head), "%-*s", t->cols, now->v[0]);
			ob_add(&o, "\033[7m", 4);
			ob_add(&o, head, strlen(head));
			ob_add(&o, "\033[0m", 4);
		} else {
			ob_add(&o, now->v[i], strlen(now->v[i]));
			ob_add(&o, "\033[K", 3);
		}
	}
	if (o.p == NULL && o.cap != 0)
		return -1;
	rc = o.len > 0 ? term_write(o.p, o.len) : 0;
	free(o.p);
	lines_free(prev);
	*prev = *now;
	memset(now, 0, sizeof(*now));
	return rc;
}

/* What a key asks of the view. */
enum key_result { KEY_NONE, KEY_QUIT, KEY_REDRAW };

/* The bytes read from the terminal, as keys. */
static enum key_result keys(top *t, const unsigned char *k, ssize_t n)
{
	enum key_result r = KEY_NONE;

	for (ssize_t i = 0; i < n; i++) {
		unsigned char c = k[i];

		if (c == 0x1b && i + 1 < n && (k[i + 1] == '[' || k[i + 1] == 'O')) {
			/* An escape sequence (an arrow key): its final byte ends it. */
			for (i += 2; i < n && !(k[i] >= 0x40 && k[i] <= 0x7e); i++)
				;
			continue;
		}
		if (t->help) {
			t->help = false;
			continue;
		}
		if (t->editing) {
			size_t l = strlen(t->filter);

			if (c == '\r' || c == '\n') {
				t->editing = false;
			} else if (c == 0x1b) {
				t->editing = false;
				t->filter[0] = '\0';
			} else if (c == 0x7f || c == 0x08) {
				if (l > 0)
					t->filter[l - 1] = '\0';
			} else if (c >= 0x20 && c < 0x7f && l + 1 < sizeof(t->filter)) {
				t->filter[l] = (char)c;
				t->filter[l + 1] = '\0';
			}
			continue;
		}
		switch (c) {
		case 'q':
		case 'Q':
			return KEY_QUIT;
		case 's':
			t->sort = (enum sort_key)((t->sort + 1) % NSORT);
			break;
		case '/':
		case 'f':
			t->editing = true;
			t->filter[0] = '\0';
			break;
		case 0x1b:
			t->filter[0] = '\0';
			break;
		case '?':
		case 'h':
			t->help = true;
			break;
		case 0x0c:   /* Ctrl-L */
			r = KEY_REDRAW;
			break;
		default:
			break;
		}
	}
	return r;
}

/* The live view until q, a signal that ends it, or a terminal error. */
static int run_live(top *t)
{
	lines now = { 0 }, prev = { 0 };
	bool all = true;
	int status = SHELL_EXIT_OK;

	if (tcgetattr(STDIN_FILENO, &saved_tio) != 0 || term_enter() != 0) {
		term_leave();
		fprintf(stderr, "herd top: cannot set up the terminal: %s\n", strerror(errno));
		return SHELL_EXIT_FAILURE;
	}
	term_size(t);
	for (;;) {
		struct pollfd p[3] = { { .fd = herd_telemetry_watch_fd(t->w), .events = POLLIN },
				       { .fd = STDIN_FILENO, .events = POLLIN },
				       { .fd = sig_fd, .events = POLLIN } };
		unsigned long sigs;
		bool quit = false;

		take(t);
		render(t, &now, t->cols, true);
		if (now.failed || draw(t, &now, &prev, all) != 0) {
			term_leave();
			fprintf(stderr, "herd top: %s\n", now.failed ? "out of memory making the view"
				: "cannot write to the terminal");
			status = SHELL_EXIT_FAILURE;
			break;
		}
		all = false;
		/* A second at most: the nodes' states are read again then too. */
		if (poll(p, 3, 1000) < 0 && errno != EINTR) {
			term_leave();
			fprintf(stderr, "herd top: cannot wait for samples and keys: %s\n",
				strerror(errno));
			status = SHELL_EXIT_FAILURE;
			break;
		}
		if (p[1].revents & (POLLHUP | POLLERR)) {
			term_leave();
			fprintf(stderr, "herd top: the terminal went away\n");
			status = SHELL_EXIT_FAILURE;
			break;
		}
		if (p[1].revents & POLLIN) {
			unsigned char k[64];
			ssize_t n = read(STDIN_FILENO, k, sizeof(k));

			if (n > 0) {
				enum key_result r = keys(t, k, n);

				quit = r == KEY_QUIT;
				all = r == KEY_REDRAW;
			} else if (n == 0) {
				quit = true;   /* the terminal's end of input */
			}
		}
		sigs = signals_read();
		if (quit || (sigs & STOP_SIGNALS))
			break;
		if (sigs & (1ul << SIGWINCH)) {
			term_size(t);
			all = true;
		}
		if (sigs & (1ul << SIGTSTP)) {
			/* Ctrl-Z: the shell's terminal back, stopped; anew on SIGCONT. */
			struct sigaction dfl, mine;

			term_leave();
			memset(&dfl, 0, sizeof(dfl));
			dfl.sa_handler = SIG_DFL;
			sigaction(SIGTSTP, &dfl, &mine);
			raise(SIGTSTP);
			sigaction(SIGTSTP, &mine, NULL);
			if (term_enter() != 0) {
				term_leave();
				fprintf(stderr, "herd top: cannot set up the terminal again\n");
				status = SHELL_EXIT_FAILURE;
				break;
			}
			term_size(t);
			all = true;
		}
	}
	term_leave();
	lines_free(&now);
	lines_free(&prev);
	return status;
}

/* ---- the command ------------------------------------------------------------------- */

int cmd_top(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "count", required_argument, NULL, 'c' },
		{ "period", required_argument, NULL, 'p' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "hostfile", required_argument, NULL, 'F' },
		{ "slurm", no_argument, NULL, 'S' },
		{ "sort", required_argument, NULL, 's' },
		{ "filter", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	herd_telemetry_watch_opts wo = HERD_TELEMETRY_WATCH_OPTS_INIT;
	top t;
	shell_args a;
	bool once = false, json = false, sorted = false;
	unsigned long long count = 0;
	int c, li, status;
	herd_status st;

	memset(&t, 0, sizeof(t));
	t.period_ms = 1000;
	if (shell_args_check("top", argc, argv, "+h", longopts, NULL, &a) != 0) {
		shell_args_free(&a);
		return SHELL_EXIT_USAGE;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(a.argc, a.argv, "+h", longopts, &li)) != -1) {
		char *end;

		switch (c) {
		case 'h':
			shell_args_free(&a);
			fputs(top_usage, stdout);
			return SHELL_EXIT_OK;
		case 'o':
			once = true;
			break;
		case 'j':
			json = true;
			break;
		case 'c':
			errno = 0;
			count = strtoull(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' || optarg[0] == '-' ||
			    count == 0) {
				status = shell_usage_error("top", "--count %s: a number of samples, 1 or "
							   "more", optarg);
				goto usage;
			}
			break;
		case 'p':
			if (shell_parse_int(optarg, MIN_PERIOD_MS, MAX_PERIOD_MS, &t.period_ms) != 0) {
				status = shell_usage_error("top", "--period %s: milliseconds from 100 "
							   "(ten samples a second at most) to 24 h",
							   optarg);
				goto usage;
			}
			break;
		case 'H':
			wo.hosts = optarg;
			break;
		case 'F':
			wo.hostfile = optarg;
			break;
		case 'S':
			wo.slurm = true;
			break;
		case 's':
			for (t.sort = 0; t.sort < NSORT && strcmp(sort_names[t.sort], optarg) != 0;
			     t.sort++)
				;
			if (t.sort == NSORT) {
				status = shell_usage_error("top", "--sort %s: expected index, util, memory, "
							   "power or temp", optarg);
				goto usage;
			}
			sorted = true;
			break;
		case 'f':
			if (strlen(optarg) >= sizeof(t.filter)) {
				status = shell_usage_error("top", "--filter %s: at most 63 characters",
							   optarg);
				goto usage;
			}
			snprintf(t.filter, sizeof(t.filter), "%s", optarg);
			break;
		default:
			status = shell_usage_error("top", "unrecognized option '%s'",
						   a.argv[optind - 1]);
			goto usage;
		}
	}
	if (optind < a.argc) {
		status = shell_usage_error("top", "unexpected argument '%s'", a.argv[optind]);
		goto usage;
	}
	if ((wo.hosts != NULL) + (wo.hostfile != NULL) + wo.slurm > 1) {
		status = shell_usage_error("top", "%s", "--hosts, --hostfile and --slurm each name "
					   "the nodes; give one");
		goto usage;
	}
	if ((wo.hosts != NULL && wo.hosts[0] == '\0') ||
	    (wo.hostfile != NULL && wo.hostfile[0] == '\0')) {
		status = shell_usage_error("top", "option '%s' needs a value", wo.hosts != NULL
					   ? "--hosts" : "--hostfile");
		goto usage;
	}
	if (count > 0 && !json) {
		status = shell_usage_error("top", "%s", "--count is for --json (samples of every "
					   "node); --once takes one snapshot");
		goto usage;
	}
	if (count > 0 && once) {
		status = shell_usage_error("top", "%s", "--count and --once: give one (--once "
					   "prints one record of every node)");
		goto usage;
	}
	if (json && (sorted || t.filter[0] != '\0')) {
		status = shell_usage_error("top", "%s is for the view; --json writes every sample",
					   sorted ? "--sort" : "--filter");
		goto usage;
	}
	if (!once && !json && (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))) {
		status = shell_usage_error("top", "standard %s is not a terminal, which the live "
					   "view needs: --once prints one snapshot, --json a line "
					   "per sample", isatty(STDOUT_FILENO) ? "input" : "output");
		goto usage;
	}
	shell_args_free(&a);

	if (wo.hosts != NULL)
		snprintf(t.what, sizeof(t.what), "%s", wo.hosts);
	else if (wo.hostfile != NULL)
		snprintf(t.what, sizeof(t.what), "the hosts of %s", wo.hostfile);
	else if (wo.slurm)
		snprintf(t.what, sizeof(t.what), "Slurm job %s", shell_env("SLURM_JOB_ID") != NULL
			 ? shell_env("SLURM_JOB_ID") : "?");
	wo.period_ms = t.period_ms;
	if (signals_init(!once && !json) != 0)
		return SHELL_EXIT_FAILURE;
	t.scratch = malloc(sizeof(*t.scratch));
	if (t.scratch == NULL) {
		shell_message("herd top", "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	st = herd_telemetry_watch_start(&t.w, &wo);
	if (st != HERD_OK) {
		shell_message("herd top", shell_last_error());
		free(t.scratch);
		return st == HERD_EFORMAT || st == HERD_ENOTFOUND || st == HERD_EUNAVAIL ||
		       st == HERD_EINVAL ? SHELL_EXIT_USAGE : SHELL_EXIT_FAILURE;
	}
	t.n = herd_telemetry_watch_nodes(t.w);
	t.nodes = calloc(t.n, sizeof(*t.nodes));
	if (t.nodes == NULL) {
		shell_message("herd top", "out of memory");
		herd_telemetry_watch_free(t.w);
		free(t.scratch);
		return SHELL_EXIT_FAILURE;
	}
	read_states(&t, false);
	if (t.what[0] == '\0') {
		snprintf(t.what, sizeof(t.what), "%s", t.n > 0 ? t.nodes[0].info.host : "");
	} else if (t.n > 1) {
		char what[sizeof(t.what)];

		memcpy(what, t.what, sizeof(what));
		snprintf(t.what, sizeof(t.what), "%zu nodes: %.*s", t.n, (int)sizeof(what) - 32,
			 what);
	}
	if (once)
		status = run_once(&t, json);
	else if (json)
		status = run_json(&t, count);
	else
		status = run_live(&t);
	top_free(&t);
	return status;
usage:
	shell_args_free(&a);
	return status;
}
