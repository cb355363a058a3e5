/*
 * shell/cmd_acct.c - herd acct: the jobs of the accounting log
 * (shell/acct.c) as sacct lists them, one line per job, with a line of
 * totals, or as one JSON document.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "herd.h"
#include "shell.h"

static const char usage_text[] =
	"usage: herd acct [--since T] [--until T] [--json] [--log FILE]\n"
	"Lists the jobs that herd launch and herd.launch ran, from the accounting log\n"
	"($HERD_ACCT_LOG, else ${XDG_STATE_HOME:-~/.local/state}/herd/acct.jsonl), in\n"
	"the order they started, with a line of totals: jobs, GPU-hours held (GPUs x\n"
	"elapsed) and used (measured by herd launch --monitor; '-' for jobs it did\n"
	"not sample).\n"
	"  --since T        jobs that ended at T or later\n"
	"  --until T        jobs that started at T or before\n"
	"                   T as sacct takes it: YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS]\n"
	"                   (today), local time; now, now-N or now-N{seconds|minutes|\n"
	"                   hours|days|weeks} (N seconds when no unit is given)\n"
	"  --json           one JSON document: {\"jobs\": [the records], \"totals\": {...}}\n"
	"  --log FILE       read FILE instead of the user's log\n"
	"  -h, --help       this help\n"
	"Flags of sacct, with herd's meaning:\n"
	"  -S, --starttime T    --since T\n"
	"  -E, --endtime T      --until T\n"
	"A line that is not a record is skipped with a warning naming the file and\n"
	"its line number.\n"
	"Exit status:\n"
	"  0    the jobs were listed (none, when the log does not exist yet)\n"
	"  1    the log could not be read\n"
	"  2    a usage error\n";

enum { OPT_SINCE = 256, OPT_UNTIL, OPT_JSON, OPT_LOG };

static const char short_options[] = "h";

static const struct option options[] = {
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "until", required_argument, NULL, OPT_UNTIL },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "log", required_argument, NULL, OPT_LOG },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static const shell_habit habits[] = {
	{ "-S", true, "--since", NULL },
	{ "--starttime", true, "--since", NULL },
	{ "-E", true, "--until", NULL },
	{ "--endtime", true, "--until", NULL },
	{ NULL, false, NULL, NULL }
};

/* "now", "now-N", "now+N", "now-N{seconds|minutes|hours|days|weeks}" (sacct's). */
static int parse_now(const char *s, double now, double *out)
{
	static const struct { const char *name; double secs; } units[] = {
		{ "seconds", 1 }, { "minutes", 60 }, { "hours", 3600 }, { "days", 86400 },
		{ "weeks", 604800 },
	};
	char *end;
	long n;

	if (strncmp(s, "now", 3) != 0)
		return -1;
	s += 3;
	if (*s == '\0') {
		*out = now;
		return 0;
	}
	if ((*s != '-' && *s != '+') || s[1] < '0' || s[1] > '9')
		return -1;
	errno = 0;
	n = strtol(s + 1, &end, 10);
	if (errno != 0 || n > 1000000000L)
		return -1;
	if (*end == '\0') {
		*out = now + (*s == '-' ? -1.0 : 1.0) * (double)n;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++) {
		size_t len = strlen(end);

		/* "hours", "hour" */
		if ((len == strlen(units[i].name) || len + 1 == strlen(units[i].name)) &&
		    strncmp(end, units[i].name, len) == 0) {
			*out = now + (*s == '-' ? -1.0 : 1.0) * (double)n * units[i].secs;
			return 0;
		}
	}
	return -1;
}

/* T as the help says, into Unix seconds.  0, or -1 when it is not one. */
static int parse_when(const char *s, double *out)
{
	struct tm tm;
	time_t now = time(NULL), t;
	int y, mo, d, h = 0, mi = 0, sec = 0, n = 0, k;

	if (parse_now(s, (double)now, out) == 0)
		return 0;
	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) == 3 && n == 10) {
		s += n;
		if (*s == 'T' && ((k = 0, sscanf(s + 1, "%2d:%2d:%2d%n", &h, &mi, &sec, &k) == 3 &&
				   k == 8) || (k = 0, sec = 0,
					       sscanf(s + 1, "%2d:%2d%n", &h, &mi, &k) == 2 && k == 5)))
			s += 1 + k;
		if (*s != '\0')
			return -1;
		tm.tm_year = y - 1900;
		tm.tm_mon = mo - 1;
		tm.tm_mday = d;
	} else if ((k = 0, sscanf(s, "%2d:%2d:%2d%n", &h, &mi, &sec, &k) == 3 && k == 8 &&
		    s[k] == '\0') || (k = 0, sec = 0, sscanf(s, "%2d:%2d%n", &h, &mi, &k) == 2 &&
				      k == 5 && s[k] == '\0')) {
		localtime_r(&now, &tm);
		y = tm.tm_year + 1900;
		mo = tm.tm_mon + 1;
		d = tm.tm_mday;
	} else {
		return -1;
	}
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || h < 0 ||
	    mi < 0 || sec < 0)
		return -1;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	tm.tm_isdst = -1;
	t = mktime(&tm);
	if (t == (time_t)-1 || tm.tm_mday != d)
		return -1;
	*out = (double)t;
	return 0;
}

/* What a record must hold: the key and its JSON types. */
static const struct field {
	const char *key;
	unsigned types;
} fields[] = {
	{ "job_id", 1u << JSON_STRING },
	{ "user", 1u << JSON_STRING | 1u << JSON_NULL },
	{ "uid", 1u << JSON_INTEGER },
	{ "argv", 1u << JSON_ARRAY },
	{ "hosts", 1u << JSON_STRING },
	{ "ranks", 1u << JSON_INTEGER },
	{ "gpus", 1u << JSON_INTEGER },
	{ "start", 1u << JSON_REAL | 1u << JSON_INTEGER },
	{ "end", 1u << JSON_REAL | 1u << JSON_INTEGER },
	{ "elapsed", 1u << JSON_REAL | 1u << JSON_INTEGER },
	{ "state", 1u << JSON_STRING },
	{ "exit_status", 1u << JSON_INTEGER },
	{ "gpu_hours_held", 1u << JSON_REAL | 1u << JSON_INTEGER },
	{ "gpu_hours_used", 1u << JSON_REAL | 1u << JSON_INTEGER | 1u << JSON_NULL },
};

/*
 * A line of the log as a record (new reference), or NULL with why[]
 * saying what is wrong with it.
 */
static json_t *read_record(const char *line, char *why, size_t cap)
{
	json_error_t err;
	json_t *r = json_loads(line, JSON_REJECT_DUPLICATES, &err), *v, *a;
	size_t i;

	if (r == NULL) {
		snprintf(why, cap, "not JSON (%s at column %d)", err.text, err.column);
		return NULL;
	}
	if (!json_is_object(r)) {
		snprintf(why, cap, "not a JSON object");
		goto bad;
	}
	v = json_object_get(r, "v");
	if (!json_is_integer(v)) {
		snprintf(why, cap, "no format version (\"v\")");
		goto bad;
	}
	if (json_integer_value(v) != SHELL_ACCT_VERSION) {
		snprintf(why, cap, "a record of format %lld, which this herd does not read (it "
			 "reads %d)", (long long)json_integer_value(v), SHELL_ACCT_VERSION);
		goto bad;
	}
	for (i = 0; i < sizeof(fields) / sizeof(*fields); i++) {
		v = json_object_get(r, fields[i].key);
		if (v == NULL || !(fields[i].types & (1u << json_typeof(v)))) {
			snprintf(why, cap, "\"%s\" is %s", fields[i].key,
				 v == NULL ? "missing" : "of the wrong type");
			goto bad;
		}
	}
	json_array_foreach(json_object_get(r, "argv"), i, a)
		if (!json_is_string(a)) {
			snprintf(why, cap, "\"argv\" holds something that is not a string");
			goto bad;
		}
	return r;
bad:
	json_decref(r);
	return NULL;
}

/* The records of path that ran in [since, until], in start order, into *out.
 * 0; 1 when path does not exist (*out empty); -1 (said) when it cannot be read. */
static int read_log(const char *path, double since, double until, json_t **out)
{
	FILE *f = fopen(path, "re");
	char *line = NULL, why[256];
	size_t cap = 0, lineno = 0;
	ssize_t n;
	json_t *jobs = json_array();

	*out = jobs;
	if (f == NULL) {
		if (errno == ENOENT)
			return 1;
		fprintf(stderr, "herd acct: cannot read %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		json_t *r;

		lineno++;
		if (line[n - 1] != '\n') {
			fprintf(stderr, "herd acct: warning: %s:%zu: a line cut short (no newline), "
				"skipped\n", path, lineno);
			break;
		}
		line[n - 1] = '\0';
		r = read_record(line, why, sizeof(why));
		if (r == NULL) {
			fprintf(stderr, "herd acct: warning: %s:%zu: %s, skipped\n", path, lineno, why);
			continue;
		}
		if (json_number_value(json_object_get(r, "end")) >= since &&
		    json_number_value(json_object_get(r, "start")) <= until)
			json_array_append_new(jobs, r);
		else
			json_decref(r);
	}
	if (ferror(f)) {
		fprintf(stderr, "herd acct: cannot read %s: %s\n", path, strerror(errno));
		free(line);
		fclose(f);
		return -1;
	}
	free(line);
	fclose(f);
	return 0;
}

static int by_start(const void *a, const void *b)
{
	double x = json_number_value(json_object_get(*(json_t *const *)a, "start"));
	double y = json_number_value(json_object_get(*(json_t *const *)b, "start"));

	return (x > y) - (x < y);
}

/* The records sorted by start (stable for equal starts: they keep log order). */
static void sort_jobs(json_t *jobs)
{
	size_t n = json_array_size(jobs);
	json_t **v = malloc((n > 0 ? n : 1) * sizeof(*v));

	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(jobs, i));
	/* insertion sort keeps equal starts in log order; logs are mostly sorted */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && by_start(&v[j - 1], &v[j]) > 0; j--) {
			json_t *t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	json_array_clear(jobs);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(jobs, v[i]);
	free(v);
}

/* The totals of the listed records. */
static json_t *totals(const json_t *jobs)
{
	double held = 0, used = 0, held_measured = 0;
	size_t i, measured = 0;
	json_t *r;

	json_array_foreach(jobs, i, r) {
		json_t *u = json_object_get(r, "gpu_hours_used");
		double h = json_number_value(json_object_get(r, "gpu_hours_held"));

		held += h;
		if (json_is_number(u)) {
			used += json_number_value(u);
			held_measured += h;
			measured++;
		}
	}
	return json_pack("{s:I, s:f, s:o, s:I, s:o}", "jobs", (json_int_t)json_array_size(jobs),
			 "gpu_hours_held", held, "gpu_hours_used",
			 measured > 0 ? json_real(used) : json_null(), "measured_jobs",
			 (json_int_t)measured, "used_of_held_pct",
			 measured > 0 && held_measured > 0
				 ? json_real(100.0 * used / held_measured) : json_null());
}

/* Seconds as sacct writes Elapsed: [D-]HH:MM:SS. */
static void format_elapsed(char *out, size_t cap, double secs)
{
	long s = secs > 0 ? (long)(secs + 0.5) : 0;

	if (s >= 86400)
		snprintf(out, cap, "%ld-%02ld:%02ld:%02ld", s / 86400, s / 3600 % 24, s / 60 % 60,
			 s % 60);
	else
		snprintf(out, cap, "%02ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

/* The command line of a record, each argument quoted as a shell needs it. */
static void format_command(char *out, size_t cap, const json_t *argv)
{
	size_t k = 0, i;
	json_t *a;

	out[0] = '\0';
	json_array_foreach(argv, i, a) {
		const char *s = json_string_value(a);
		bool plain = s[0] != '\0' && s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
						      "OPQRSTUVWXYZ0123456789-_./=:,+@%")] == '\0';

		if (k + 1 >= cap)
			break;
		if (i > 0)
			out[k++] = ' ';
		if (plain) {
			k += (size_t)snprintf(out + k, cap - k, "%s", s);
		} else {
			out[k++] = '\'';
			for (; *s != '\0' && k + 5 < cap; s++) {
				if (*s == '\'') {
					memcpy(out + k, "'\\''", 4);
					k += 4;
				} else {
					out[k++] = (*s == '\n' || *s == '\t') ? ' ' : *s;
				}
			}
			if (k + 1 < cap)
				out[k++] = '\'';
		}
		if (k >= cap)
			k = cap - 1;
		out[k] = '\0';
	}
}

enum { COL_ID, COL_USER, COL_START, COL_ELAPSED, COL_RANKS, COL_GPUS, COL_STATE, COL_EXIT,
       COL_HELD, COL_USED, COL_CMD, NCOLS };

static const struct { const char *title; bool right; } columns[NCOLS] = {
	{ "JobID", false }, { "User", false }, { "Start", false }, { "Elapsed", true },
	{ "Ranks", true }, { "GPUs", true }, { "State", false }, { "ExitCode", true },
	{ "GPUh held", true }, { "GPUh used", true }, { "Command", false },
};

#define CELL 64
#define CMD_CELL 4200

/* One record's cells. */
static void row_cells(const json_t *r, char cells[NCOLS][CELL], char *cmd)
{
	json_t *user = json_object_get(r, "user"), *used = json_object_get(r, "gpu_hours_used");
	time_t start = (time_t)json_number_value(json_object_get(r, "start"));
	struct tm tm;

	snprintf(cells[COL_ID], CELL, "%s", json_string_value(json_object_get(r, "job_id")));
	if (json_is_string(user))
		snprintf(cells[COL_USER], CELL, "%s", json_string_value(user));
	else
		snprintf(cells[COL_USER], CELL, "%lld",
			 (long long)json_integer_value(json_object_get(r, "uid")));
	localtime_r(&start, &tm);
	strftime(cells[COL_START], CELL, "%Y-%m-%dT%H:%M:%S", &tm);
	format_elapsed(cells[COL_ELAPSED], CELL,
		       json_number_value(json_object_get(r, "elapsed")));
	snprintf(cells[COL_RANKS], CELL, "%lld",
		 (long long)json_integer_value(json_object_get(r, "ranks")));
	snprintf(cells[COL_GPUS], CELL, "%lld",
		 (long long)json_integer_value(json_object_get(r, "gpus")));
	snprintf(cells[COL_STATE], CELL, "%s", json_string_value(json_object_get(r, "state")));
	snprintf(cells[COL_EXIT], CELL, "%lld",
		 (long long)json_integer_value(json_object_get(r, "exit_status")));
	snprintf(cells[COL_HELD], CELL, "%.4f",
		 json_number_value(json_object_get(r, "gpu_hours_held")));
	if (json_is_number(used))
		snprintf(cells[COL_USED], CELL, "%.4f", json_number_value(used));
	else
		snprintf(cells[COL_USED], CELL, "-");
	format_command(cmd, CMD_CELL, json_object_get(r, "argv"));
	cells[COL_CMD][0] = '\0';
}

static void print_row(char cells[NCOLS][CELL], const char *cmd, const int *width)
{
	for (int c = 0; c < NCOLS - 1; c++)
		printf(columns[c].right ? "%*s " : "%-*s ", width[c], cells[c]);
	printf("%s\n", cmd);
}

static void print_table(const json_t *jobs, const json_t *tot)
{
	size_t n = json_array_size(jobs), i;
	int width[NCOLS];
	char cells[NCOLS][CELL], cmd[CMD_CELL], dashes[CELL + 1];
	json_t *r, *used = json_object_get(tot, "gpu_hours_used");

	for (int c = 0; c < NCOLS; c++)
		width[c] = (int)strlen(columns[c].title);
	json_array_foreach(jobs, i, r) {
		row_cells(r, cells, cmd);
		for (int c = 0; c < NCOLS - 1; c++)
			if ((int)strlen(cells[c]) > width[c])
				width[c] = (int)strlen(cells[c]);
	}
	for (int c = 0; c < NCOLS - 1; c++)
		printf(columns[c].right ? "%*s " : "%-*s ", width[c], columns[c].title);
	printf("%s\n", columns[COL_CMD].title);
	memset(dashes, '-', CELL);
	for (int c = 0; c < NCOLS - 1; c++)
		printf("%.*s ", width[c], dashes);
	printf("%.*s\n", (int)strlen(columns[COL_CMD].title), dashes);
	json_array_foreach(jobs, i, r) {
		row_cells(r, cells, cmd);
		print_row(cells, cmd, width);
	}
	printf("total: %zu job%s, %.4f GPU-hours held", n, n == 1 ? "" : "s",
	       json_number_value(json_object_get(tot, "gpu_hours_held")));
	if (json_is_number(used)) {
		json_t *pct = json_object_get(tot, "used_of_held_pct");
		long long m = (long long)json_integer_value(json_object_get(tot, "measured_jobs"));

		printf(", %.4f used", json_number_value(used));
		if (json_is_number(pct))
			printf(" (%.0f%% of what the %lld measured job%s held)",
			       json_number_value(pct), m, m == 1 ? "" : "s");
		else
			printf(" (the %lld measured job%s held no GPU)", m, m == 1 ? "" : "s");
		printf("\n");
	} else {
		printf(", used not measured (herd launch --monitor measures it where it samples "
		       "a job's GPUs)\n");
	}
}

int cmd_acct(int argc, char **argv)
{
	shell_args args;
	double since = -INFINITY, until = INFINITY;
	const char *log = NULL;
	char *path = NULL, opt[64];
	int c, li, json = 0, status = SHELL_EXIT_OK, rc;
	json_t *jobs = NULL;

	status = shell_args_check("acct", argc, argv, short_options, options, habits, &args);
	if (status != 0)
		goto out;
	opterr = 0;
	optind = 1;
	while ((li = -1, c = getopt_long(args.argc, args.argv, short_options, options, &li)) !=
	       -1) {
		shell_args_option(&args, options, c, li, opt, sizeof(opt));
		switch (c) {
		case OPT_SINCE:
		case OPT_UNTIL:
			if (parse_when(optarg, c == OPT_SINCE ? &since : &until) != 0) {
				char msg[320];

				snprintf(msg, sizeof(msg), "%s %s: expected YYYY-MM-DD[THH:MM[:SS]], "
					 "HH:MM[:SS], now or now-N[seconds|minutes|hours|days|weeks]",
					 opt, optarg);
				status = shell_usage_error("acct", "%s", msg);
				goto out;
			}
			break;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_LOG:
			if (optarg[0] == '\0') {
				status = shell_usage_error("acct", "%s needs a file name", opt);
				goto out;
			}
			log = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			goto out;
		default:
			status = shell_usage_error("acct", "unrecognized option or missing value: %s",
						   args.argv[optind - 1]);
			goto out;
		}
	}
	if (optind < args.argc) {
		status = shell_usage_error("acct", "unexpected argument '%s'", args.argv[optind]);
		goto out;
	}
	path = log != NULL ? strdup(log) : shell_acct_path();
	if (path == NULL) {
		fprintf(stderr, "herd acct: no accounting log: %s\n",
			herd_env_get("HERD_ACCT_LOG") != NULL
				? "HERD_ACCT_LOG is set but empty (no job is recorded)"
				: "neither XDG_STATE_HOME nor HOME is set");
		status = SHELL_EXIT_FAILURE;
		goto out;
	}
	rc = read_log(path, since, until, &jobs);
	if (rc < 0 || (rc > 0 && log != NULL)) {
		if (rc > 0)
			fprintf(stderr, "herd acct: cannot read %s: %s\n", path, strerror(ENOENT));
		status = SHELL_EXIT_FAILURE;
		goto out;
	}
	sort_jobs(jobs);
	if (json) {
		json_t *doc = json_pack("{s:i, s:s, s:O, s:o}", "v", SHELL_ACCT_VERSION, "log", path,
					"jobs", jobs, "totals", totals(jobs));

		if (shell_json_emit(doc) != 0)
			status = SHELL_EXIT_FAILURE;
	} else {
		json_t *tot = totals(jobs);

		if (rc > 0)
			fprintf(stderr, "herd acct: no job recorded yet (no %s)\n", path);
		print_table(jobs, tot);
		json_decref(tot);
	}
out:
	json_decref(jobs);
	free(path);
	shell_args_free(&args);
	return status;
}
