/*
 * shell/cmd_top.c - herd top: this node's GPUs, CPUs, memory and network
 * from the telemetry sampler (herd/telemetry.h), as a live view on a
 * terminal, one plain-text snapshot (--once) or a stream of JSON lines
 * (--json).
 *
 * The live view is a frame of lines, made by the same code that prints
 * --once: on each new sample or key the frame is made again and only the
 * lines that differ from the previous frame are written (cursor addressing,
 * erase to the end of the line), so the screen does not flicker; SIGWINCH
 * redraws it all at the new size.  Keys are read from stdin in raw mode,
 * in the same poll as the sampler's descriptor and a pipe the signal
 * handlers write to, so that q, SIGINT, SIGTERM and SIGHUP all leave
 * through one path that gives the terminal back as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "herd/telemetry.h"
#include "shell.h"

static const char top_usage[] =
	"usage: herd top [--once] [--json] [--count N] [--period MS]\n"
	"\n"
	"This node's GPUs, CPUs, memory and network, refreshed every period.\n"
	"  --once        one snapshot as plain text (two samples a period apart,\n"
	"                so that rates are real), then exit\n"
	"  --json        one JSON line per sample (the fields of herd.telemetry)\n"
	"  --count N     with --json, stop after N samples (default: until a signal)\n"
	"  --period MS   milliseconds between samples (default 1000, at least 10)\n"
	"On a terminal: q quits, s cycles the sort key (index, util, memory, power,\n"
	"temp), / filters the GPU lines (type text, Enter applies, Esc clears; a\n"
	"line shows when the host, the GPU's name or a job on it contains the text),\n"
	"? shows the keys.  Columns are left out, in a fixed order, to fit a narrow\n"
	"terminal ($COLUMNS, when set, is the width).\n"
	"Exit status:\n"
	"  0    q was pressed, the snapshot was printed, or --count samples were\n"
	"       written\n"
	"  1    the sampler could not run, or the output could not be written\n"
	"  2    a usage error (the live view needs a terminal on stdout)\n"
	"  128+S  stopped by signal S (130 for SIGINT, 143 for SIGTERM)\n";

enum { SORT_INDEX, SORT_UTIL, SORT_MEMORY, SORT_POWER, SORT_TEMP, SORT_COUNT };
static const char *const sort_names[SORT_COUNT] = { "index", "util", "memory", "power", "temp" };

#define LINE_MAX_LEN 512
#define FRAME_MAX_LINES 64
#define FILTER_LEN 64

/* What the view shows, besides the sample. */
typedef struct top_view {
	int period_ms;
	int sort;
	char filter[FILTER_LEN];   /* "" for none */
	int editing;               /* typing a filter into edit */
	char edit[FILTER_LEN];
	int help;                  /* the keys shown */
	int live;
	int width;                 /* 0: no limit */
} top_view;

typedef struct top_frame {
	int n;
	char line[FRAME_MAX_LINES][LINE_MAX_LEN];
} top_frame;

/* ------------------------------------------------------------- numbers */

static void fmt_bar(char *out, size_t size, double pct, int width)
{
	int fill = pct < 0 ? 0 : (int)(pct * width / 100.0 + 0.5);

	if (fill > width)
		fill = width;
	if ((size_t)width + 3 > size)
		width = (int)size - 3;
	out[0] = '[';
	for (int i = 0; i < width; i++)
		out[1 + i] = i < fill ? '#' : '.';
	out[1 + width] = ']';
	out[2 + width] = '\0';
}

static void fmt_rate(char *out, size_t size, double bps)
{
	static const char *const units[] = { "B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s" };
	int u = 0;

	if (bps < 0) {
		snprintf(out, size, "-");
		return;
	}
	while (bps >= 1024 && u < 4) {
		bps /= 1024;
		u++;
	}
	snprintf(out, size, u == 0 ? "%.0f %s" : "%.1f %s", bps, units[u]);
}

static double gib(int64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* ------------------------------------------------------------- columns */

/*
 * A line is a row of columns; when it is wider than the view, columns are
 * left out in the order of their drop rank (1 first; 0 never), then what is
 * left is cut at the width.
 */
typedef struct column {
	char text[160];
	int drop;
} column;

static void col_set(column *c, int drop, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void col_set(column *c, int drop, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->text, sizeof(c->text), fmt, ap);
	va_end(ap);
	c->drop = drop;
}

static size_t join(char *out, const column *cols, int n, int max_drop)
{
	size_t len = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (cols[i].drop != 0 && cols[i].drop <= max_drop)
			continue;
		len += (size_t)snprintf(out + len, LINE_MAX_LEN - len, "%s%s", len > 0 ? "  " : "",
					cols[i].text);
		if (len >= LINE_MAX_LEN)
			len = LINE_MAX_LEN - 1;
	}
	return len;
}

/* The least drop rank at which the columns fit width (0: no limit). */
static int fit_level(const column *cols, int n, int width)
{
	char out[LINE_MAX_LEN];
	int max_drop = 0, d;

	for (int i = 0; i < n; i++)
		if (cols[i].drop > max_drop)
			max_drop = cols[i].drop;
	for (d = 0; d < max_drop && width > 0; d++)
		if (join(out, cols, n, d) <= (size_t)width)
			break;
	return width > 0 ? d : 0;
}

static void fit(char *out, const column *cols, int n, int width)
{
	join(out, cols, n, fit_level(cols, n, width));
}

/* --------------------------------------------------------------- frame */

static void add_line(top_frame *f, const char *text)
{
	if (f->n < FRAME_MAX_LINES)
		snprintf(f->line[f->n++], LINE_MAX_LEN, "%s", text);
}

static void header_line(top_frame *f, const herd_telemetry_sample *s, const top_view *v)
{
	column c[6];
	char clock[16] = "-";
	time_t secs = (time_t)(s->time_ms / 1000);
	struct tm tm;
	char line[LINE_MAX_LEN];

	if (localtime_r(&secs, &tm) != NULL)
		strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	col_set(&c[0], 0, "herd top  %s", s->host);
	col_set(&c[1], 0, "%s #%llu", clock, (unsigned long long)s->seq);
	col_set(&c[2], 3, "period %d ms", v->period_ms);
	col_set(&c[3], 0, "sort %s", sort_names[v->sort]);
	col_set(&c[4], 2, "filter %s", v->filter[0] != '\0' ? v->filter : "none");
	col_set(&c[5], 1, "? keys");
	fit(line, c, v->live ? 6 : 5, v->width);
	add_line(f, line);
}

static void node_line(top_frame *f, const herd_telemetry_sample *s, const top_view *v)
{
	column c[6];
	char bar[32], rx[24], tx[24], line[LINE_MAX_LEN];
	double rxs = -1, txs = -1, mem_pct = -1;
	int64_t used = s->mem_total - s->mem_available;

	for (int i = 0; i < s->nnets; i++) {
		if (s->nets[i].rx_bps >= 0)
			rxs = (rxs < 0 ? 0 : rxs) + s->nets[i].rx_bps;
		if (s->nets[i].tx_bps >= 0)
			txs = (txs < 0 ? 0 : txs) + s->nets[i].tx_bps;
	}
	fmt_rate(rx, sizeof(rx), rxs);
	fmt_rate(tx, sizeof(tx), txs);
	if (s->cpu_busy >= 0)
		col_set(&c[0], 0, "CPU %5.1f%%", s->cpu_busy);
	else
		col_set(&c[0], 0, "CPU     -");
	fmt_bar(bar, sizeof(bar), s->cpu_busy, 10);
	col_set(&c[1], 2, "%s", bar);
	if (s->load1 >= 0)
		col_set(&c[2], 3, "load %.2f", s->load1);
	else
		col_set(&c[2], 3, "load -");
	if (s->mem_total > 0 && s->mem_available >= 0) {
		mem_pct = 100.0 * (double)used / (double)s->mem_total;
		col_set(&c[3], 0, "mem %.1f/%.1f GiB", gib(used), gib(s->mem_total));
	} else {
		col_set(&c[3], 0, "mem -");
	}
	fmt_bar(bar, sizeof(bar), mem_pct, 10);
	col_set(&c[4], 1, "%s", bar);
	col_set(&c[5], 4, "net rx %s tx %s", rx, tx);
	fit(line, c, 6, v->width);
	add_line(f, line);
}

/* The jobs on GPU g, "job:rank" each, or "-". */
static void gpu_jobs(char *out, size_t size, const herd_telemetry_sample *s, int g)
{
	size_t len = 0;

	out[0] = '\0';
	for (int i = 0; i < s->nprocs && len + 1 < size; i++) {
		const herd_telemetry_proc *p = &s->procs[i];

		if (p->gpu != g)
			continue;
		if (p->job[0] == '\0')
			len += (size_t)snprintf(out + len, size - len, "%spid %lld", len ? "," : "",
						(long long)p->pid);
		else if (p->rank >= 0)
			len += (size_t)snprintf(out + len, size - len, "%s%s:%d", len ? "," : "",
						p->job, p->rank);
		else
			len += (size_t)snprintf(out + len, size - len, "%s%s", len ? "," : "", p->job);
		if (len >= size)
			len = size - 1;
	}
	if (out[0] == '\0')
		snprintf(out, size, "-");
}

/* "NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3" */
static const char *short_name(const char *name)
{
	return strncmp(name, "NVIDIA ", 7) == 0 ? name + 7 : name;
}

static void fmt_num(char *out, size_t size, double v, const char *unit)
{
	if (v < 0)
		snprintf(out, size, "-");
	else
		snprintf(out, size, "%.0f%s", v, unit);
}

#define GPU_COLUMNS 10

/* The columns of GPU g's line; drop ranks: the bars, the clock, the name,
 * the power, the temperature, in that order. */
static void gpu_columns(column *c, const herd_telemetry_sample *s, int g)
{
	const herd_telemetry_gpu *x = &s->gpus[g];
	char ubar[32], mbar[32], jobs[128], pw[16], lim[16], temp[16], clk[16];
	double mem_pct = x->mem_total > 0 && x->mem_used >= 0
				 ? 100.0 * (double)x->mem_used / (double)x->mem_total
				 : -1;

	gpu_jobs(jobs, sizeof(jobs), s, g);
	fmt_bar(ubar, sizeof(ubar), x->util_gpu, 10);
	fmt_bar(mbar, sizeof(mbar), mem_pct, 10);
	fmt_num(pw, sizeof(pw), x->power_w, "");
	fmt_num(lim, sizeof(lim), x->power_limit_w, "");
	fmt_num(temp, sizeof(temp), x->temp_c, "");
	fmt_num(clk, sizeof(clk), x->sm_clock_mhz, "");
	col_set(&c[0], 0, "GPU%-2d", x->index);
	col_set(&c[1], 4, "%-16.16s", short_name(x->name));
	col_set(&c[2], 2, "%s", ubar);
	if (x->util_gpu >= 0)
		col_set(&c[3], 0, "%3.0f%%", x->util_gpu);
	else
		col_set(&c[3], 0, "  -%%");
	col_set(&c[4], 1, "%s", mbar);
	if (x->mem_used >= 0 && x->mem_total > 0)
		col_set(&c[5], 0, "%5.1f/%.1f GiB", gib(x->mem_used), gib(x->mem_total));
	else
		col_set(&c[5], 0, "    -/- GiB");
	col_set(&c[6], 5, "%4s/%s W", pw, lim);
	col_set(&c[7], 6, "%3s C", temp);
	col_set(&c[8], 3, "%4s MHz", clk);
	col_set(&c[9], 0, "%s", jobs);
}

static int contains(const char *hay, const char *needle)
{
	return strcasestr(hay, needle) != NULL;
}

static int gpu_shown(const herd_telemetry_sample *s, int g, const char *filter)
{
	if (filter[0] == '\0' || contains(s->host, filter) || contains(s->gpus[g].name, filter))
		return 1;
	for (int i = 0; i < s->nprocs; i++)
		if (s->procs[i].gpu == g && contains(s->procs[i].job, filter))
			return 1;
	return 0;
}

static double sort_value(const herd_telemetry_gpu *x, int key)
{
	switch (key) {
	case SORT_UTIL: return x->util_gpu;
	case SORT_MEMORY: return (double)x->mem_used;
	case SORT_POWER: return x->power_w;
	case SORT_TEMP: return x->temp_c;
	default: return -x->index;
	}
}

static void make_frame(top_frame *f, const herd_telemetry_sample *s, const top_view *v)
{
	int order[HERD_TELEMETRY_MAX_GPUS], n = 0, level = 0;
	column c[GPU_COLUMNS];
	char line[LINE_MAX_LEN];

	f->n = 0;
	header_line(f, s, v);
	node_line(f, s, v);
	for (int g = 0; g < s->ngpus && g < HERD_TELEMETRY_MAX_GPUS; g++)
		if (gpu_shown(s, g, v->filter))
			order[n++] = g;
	/* largest first (index: smallest first), ties by index; few lines */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0; j--) {
			const herd_telemetry_gpu *a = &s->gpus[order[j - 1]], *b = &s->gpus[order[j]];
			double va = sort_value(a, v->sort), vb = sort_value(b, v->sort);
			int t = order[j];

			if (va > vb || (va == vb && a->index < b->index))
				break;
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	if (s->ngpus == 0) {
		snprintf(line, sizeof(line), "no GPUs: %s", s->gpu_note);
		add_line(f, line);
	} else if (n == 0) {
		snprintf(line, sizeof(line), "no GPU matches \"%s\"", v->filter);
		add_line(f, line);
	}
	/* one drop rank for every GPU line, so that their columns line up */
	for (int i = 0; i < n; i++) {
		int need;

		gpu_columns(c, s, order[i]);
		need = fit_level(c, GPU_COLUMNS, v->width);
		if (need > level)
			level = need;
	}
	for (int i = 0; i < n; i++) {
		gpu_columns(c, s, order[i]);
		join(line, c, GPU_COLUMNS, level);
		add_line(f, line);
	}
	if (v->editing) {
		snprintf(line, sizeof(line), "filter: %s_", v->edit);
		add_line(f, line);
	}
	if (v->help) {
		add_line(f, "keys: q quit   s sort (index, util, memory, power, temp)");
		add_line(f, "      / filter (Enter applies, Esc clears)   ? these keys");
	}
	if (v->width > 0)
		for (int i = 0; i < f->n; i++)
			if (strlen(f->line[i]) > (size_t)v->width)
				f->line[i][v->width] = '\0';
}

/* ------------------------------------------------------------ terminal */

static int signal_pipe[2] = { -1, -1 };
static volatile sig_atomic_t caught_signal;

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (sig != SIGWINCH)
		caught_signal = sig;
	if (write(signal_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already waiting */
	}
	errno = saved;
}

static const int handled[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
#define NHANDLED ((int)(sizeof(handled) / sizeof(handled[0])))

typedef struct top_term {
	struct sigaction old[NHANDLED];
	int signals;          /* handlers installed */
	struct termios saved;
	int raw;              /* stdin in raw mode */
	int screen;           /* the alternate screen entered */
} top_term;

static int signals_install(top_term *tt)
{
	struct sigaction sa;

	if (pipe(signal_pipe) != 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		int fl = fcntl(signal_pipe[i], F_GETFL);

		fcntl(signal_pipe[i], F_SETFL, fl | O_NONBLOCK);
		fcntl(signal_pipe[i], F_SETFD, FD_CLOEXEC);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	caught_signal = 0;
	for (int i = 0; i < NHANDLED; i++)
		sigaction(handled[i], &sa, &tt->old[i]);
	tt->signals = 1;
	return 0;
}

/* Gives back what top_enter took: the screen, the cursor, cooked mode, the
 * signal handlers. */
static void term_restore(top_term *tt)
{
	if (tt->screen) {
		fputs("\033[?25h\033[?1049l", stdout);
		fflush(stdout);
		tt->screen = 0;
	}
	if (tt->raw) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &tt->saved);
		tt->raw = 0;
	}
	if (tt->signals) {
		for (int i = 0; i < NHANDLED; i++)
			sigaction(handled[i], &tt->old[i], NULL);
		tt->signals = 0;
	}
	for (int i = 0; i < 2; i++) {
		if (signal_pipe[i] >= 0)
			close(signal_pipe[i]);
		signal_pipe[i] = -1;
	}
}

static int term_enter(top_term *tt)
{
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &tt->saved) == 0) {
		struct termios raw = tt->saved;

		/* keys one by one, unechoed; Ctrl-C still a signal */
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | IEXTEN);
		raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
			return -1;
		tt->raw = 1;
	}
	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	tt->screen = 1;
	return fflush(stdout) == 0 ? 0 : -1;
}

static int view_width(void)
{
	const char *cols = getenv("COLUMNS");
	struct winsize ws;
	int w;

	if (cols != NULL && shell_parse_int(cols, 1, LINE_MAX_LEN - 1, &w) == 0)
		return w;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col < LINE_MAX_LEN ? ws.ws_col : LINE_MAX_LEN - 1;
	return 0;
}

static int view_height(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
		return ws.ws_row < FRAME_MAX_LINES ? ws.ws_row : FRAME_MAX_LINES;
	return FRAME_MAX_LINES;
}

/* Writes the lines of f that differ from prev (all of them when full),
 * erases prev's lines past f's end; prev becomes f. */
static int draw(const top_frame *f, top_frame *prev, int full)
{
	int rows = view_height();

	if (full)
		fputs("\033[H\033[2J", stdout);
	for (int i = 0; i < f->n && i < rows; i++)
		if (full || i >= prev->n || strcmp(f->line[i], prev->line[i]) != 0)
			printf("\033[%d;1H%s\033[K", i + 1, f->line[i]);
	for (int i = f->n; i < prev->n && i < rows && !full; i++)
		printf("\033[%d;1H\033[K", i + 1);
	*prev = *f;
	return fflush(stdout) == 0 ? 0 : -1;
}

/* One key (or a run of bytes read at once) into the view; 1 to quit. */
static int on_keys(top_view *v, const char *buf, ssize_t n)
{
	for (ssize_t i = 0; i < n; i++) {
		unsigned char k = (unsigned char)buf[i];

		if (k == 27 && i + 1 < n && (buf[i + 1] == '[' || buf[i + 1] == 'O')) {
			/* an arrow or function key: skip its sequence */
			i += 2;
			while (i < n && !(buf[i] >= 0x40 && buf[i] <= 0x7e))
				i++;
			continue;
		}
		if (v->editing) {
			size_t len = strlen(v->edit);

			if (k == '\r' || k == '\n') {
				snprintf(v->filter, sizeof(v->filter), "%s", v->edit);
				v->editing = 0;
			} else if (k == 27) {
				v->filter[0] = v->edit[0] = '\0';
				v->editing = 0;
			} else if (k == 127 || k == 8) {
				if (len > 0)
					v->edit[len - 1] = '\0';
			} else if (k >= 32 && k < 127 && len + 1 < sizeof(v->edit)) {
				v->edit[len] = (char)k;
				v->edit[len + 1] = '\0';
			}
			continue;
		}
		switch (k) {
		case 'q':
		case 'Q':
			return 1;
		case 's':
			v->sort = (v->sort + 1) % SORT_COUNT;
			break;
		case '/':
			v->editing = 1;
			snprintf(v->edit, sizeof(v->edit), "%s", v->filter);
			break;
		case 27:
			v->filter[0] = '\0';
			break;
		case '?':
			v->help = !v->help;
			break;
		default:
			break;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- modes */

static herd_status sampler_new(herd_telemetry **t, int period_ms)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;

	o.period_ms = period_ms;
	o.ring_size = 8;
	return herd_telemetry_create(t, &o);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sampler_error(void)
{
	shell_message(shell_command, shell_last_error());
	return SHELL_EXIT_FAILURE;
}

/* The live view: 0 on q, 128+S on a signal, 1 on a failure. */
static int run_live(herd_telemetry *t, herd_telemetry_sample *s, top_view *v)
{
	top_term tt = { .signals = 0 };
	top_frame *f = calloc(2, sizeof(*f));
	uint64_t seq = 0;
	int have = 0, full = 1, status = -1, keys = isatty(STDIN_FILENO);

	if (f == NULL || signals_install(&tt) != 0 || term_enter(&tt) != 0) {
		term_restore(&tt);
		free(f);
		shell_message(shell_command, "cannot set up the terminal");
		return SHELL_EXIT_FAILURE;
	}
	if (herd_telemetry_start(t) != HERD_OK) {
		term_restore(&tt);
		free(f);
		return sampler_error();
	}
	while (status < 0) {
		struct pollfd p[3] = {
			{ .fd = signal_pipe[0], .events = POLLIN },
			{ .fd = herd_telemetry_fd(t), .events = POLLIN },
			{ .fd = keys ? STDIN_FILENO : -1, .events = POLLIN },
		};
		int changed = 0;

		if (poll(p, 3, -1) < 0 && errno != EINTR) {
			status = SHELL_EXIT_FAILURE;
			break;
		}
		if (p[0].revents & POLLIN) {
			char buf[16];

			while (read(signal_pipe[0], buf, sizeof(buf)) > 0)
				;
			if (caught_signal != 0) {
				status = 128 + caught_signal;
				break;
			}
			full = changed = 1;
		}
		while (herd_telemetry_next(t, &seq, s) == HERD_OK)
			have = changed = 1;
		if (p[2].revents & (POLLIN | POLLHUP)) {
			char buf[64];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

			if (n > 0 && on_keys(v, buf, n)) {
				status = SHELL_EXIT_OK;
				break;
			}
			if (n == 0 && (p[2].revents & POLLHUP))
				keys = 0;
			changed = 1;
		}
		if (changed && have) {
			/* one column short of the edge: a character written in the
			 * last column leaves the cursor where erasing would take it */
			v->width = view_width();
			if (v->width > 1)
				v->width--;
			make_frame(&f[0], s, v);
			if (draw(&f[0], &f[1], full) != 0)
				status = SHELL_EXIT_FAILURE;
			full = 0;
		}
	}
	term_restore(&tt);
	free(f);
	return status;
}

/* --json: a line per sample. */
static int run_json(herd_telemetry *t, herd_telemetry_sample *s, long count)
{
	top_term tt = { .signals = 0 };
	uint64_t seq = 0;
	long written = 0;
	int status = -1;

	if (signals_install(&tt) != 0) {
		shell_message(shell_command, "cannot set up the signal handlers");
		return SHELL_EXIT_FAILURE;
	}
	if (herd_telemetry_start(t) != HERD_OK) {
		term_restore(&tt);
		return sampler_error();
	}
	while (status < 0) {
		struct pollfd p[2] = {
			{ .fd = signal_pipe[0], .events = POLLIN },
			{ .fd = herd_telemetry_fd(t), .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			status = SHELL_EXIT_FAILURE;
			break;
		}
		if (caught_signal != 0) {
			status = 128 + caught_signal;
			break;
		}
		while (status < 0 && herd_telemetry_next(t, &seq, s) == HERD_OK) {
			char *line = NULL;

			if (herd_telemetry_json(s, &line) != HERD_OK) {
				status = sampler_error();
				break;
			}
			if (printf("%s\n", line) < 0 || fflush(stdout) != 0) {
				status = errno == EPIPE ? 128 + SIGPIPE : SHELL_EXIT_FAILURE;
				if (status != 128 + SIGPIPE)
					shell_message(shell_command, "cannot write the output");
			}
			herd_free(line);
			if (status < 0 && count > 0 && ++written >= count)
				status = SHELL_EXIT_OK;
		}
		if (p[0].revents & POLLIN) {
			char buf[16];

			while (read(signal_pipe[0], buf, sizeof(buf)) > 0)
				;
		}
	}
	term_restore(&tt);
	return status;
}

/* --once: two samples a period apart, the second printed. */
static int run_once(herd_telemetry *t, herd_telemetry_sample *s, top_view *v)
{
	top_term tt = { .signals = 0 };
	top_frame *f;
	int64_t deadline;
	int status = SHELL_EXIT_OK;

	if (herd_telemetry_take(t, s) != HERD_OK)
		return sampler_error();
	if (signals_install(&tt) != 0) {
		shell_message(shell_command, "cannot set up the signal handlers");
		return SHELL_EXIT_FAILURE;
	}
	deadline = now_ms() + v->period_ms;
	for (int64_t left; caught_signal == 0 && (left = deadline - now_ms()) > 0;) {
		struct pollfd p = { .fd = signal_pipe[0], .events = POLLIN };

		if (poll(&p, 1, (int)left) > 0) {
			char buf[16];

			while (read(signal_pipe[0], buf, sizeof(buf)) > 0)
				;
		}
	}
	if (caught_signal != 0)
		status = 128 + caught_signal;
	term_restore(&tt);
	if (status != SHELL_EXIT_OK)
		return status;
	if (herd_telemetry_take(t, s) != HERD_OK)
		return sampler_error();
	f = malloc(sizeof(*f));
	if (f == NULL) {
		shell_message(shell_command, "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	v->width = view_width();
	make_frame(f, s, v);
	for (int i = 0; i < f->n; i++)
		printf("%s\n", f->line[i]);
	free(f);
	if (fflush(stdout) != 0) {
		shell_message(shell_command, "cannot write the output");
		return SHELL_EXIT_FAILURE;
	}
	return SHELL_EXIT_OK;
}

int cmd_top(int argc, char **argv)
{
	top_view v = { .period_ms = 1000 };
	herd_telemetry *t = NULL;
	herd_telemetry_sample *s;
	int once = 0, json = 0, count = 0, status;

	for (int i = 1; i < argc; i++) {
		const char *val;
		int rc;

		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(top_usage, stdout);
			return SHELL_EXIT_OK;
		} else if (strcmp(argv[i], "--once") == 0) {
			once = 1;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if ((rc = shell_option_value(argc, argv, &i, "--count", &val)) != 0) {
			if (rc < 0 || shell_parse_int(val, 1, 1000000000, &count) != 0)
				return shell_usage_error("top", "--count %s: expected a whole number "
							 "from 1", rc < 0 ? "needs a value" : val);
		} else if ((rc = shell_option_value(argc, argv, &i, "--period", &val)) != 0) {
			if (rc < 0 || shell_parse_int(val, 10, 3600000, &v.period_ms) != 0)
				return shell_usage_error("top", "--period %s: expected milliseconds "
							 "from 10 to 3600000",
							 rc < 0 ? "needs a value" : val);
		} else {
			return shell_usage_error("top", argv[i][0] == '-' ? "unrecognized option '%s'"
								       : "unexpected argument '%s'",
						 argv[i]);
		}
	}
	if (once && json)
		return shell_usage_error("top", "%s: --once and --json do not go together", "--json");
	if (count > 0 && !json)
		return shell_usage_error("top", "%s: only with --json", "--count");
	if (!once && !json && !isatty(STDOUT_FILENO))
		return shell_usage_error("top", "%s", "stdout is not a terminal: use --once for "
					 "a snapshot or --json for a stream");
	s = malloc(sizeof(*s));
	if (s == NULL) {
		shell_message(shell_command, "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	if (sampler_new(&t, v.period_ms) != HERD_OK) {
		free(s);
		return sampler_error();
	}
	v.live = !once && !json;
	if (once)
		status = run_once(t, s, &v);
	else if (json)
		status = run_json(t, s, count);
	else
		status = run_live(t, s, &v);
	herd_telemetry_free(t);
	free(s);
	return status;
}
