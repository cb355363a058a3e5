/*
 * shell/options.c - what the subcommands share to read their command
 * lines: numbers and sizes, an option's value in its three spellings, the
 * nearest of some names to a mistyped word, and the usage error every
 * command ends a bad command line with.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "herd.h"
#include "shell.h"

int shell_parse_bytes(const char *s, uint64_t *out)
{
	return herd_size_parse(s, out) == HERD_OK ? 0 : -1;
}

int shell_parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

int shell_usage_error(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "herd %s: ", cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'herd %s --help' for more information.\n", cmd);
	return SHELL_EXIT_USAGE;
}

/* "--opt VALUE", "--opt=VALUE" (and "-g N", "-gN" for short ones). */
int shell_option_value(int argc, char **argv, int *i, const char *name, const char **out)
{
	size_t len = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, name, len) != 0)
		return 0;
	if (a[len] == '=' && name[1] == '-') {
		*out = a + len + 1;
		return 1;
	}
	if (a[len] != '\0') {
		if (name[1] != '-') { /* -g4 */
			*out = a + len;
			return 1;
		}
		return 0;
	}
	if (*i + 1 >= argc)
		return -1;
	*out = argv[++*i];
	return 1;
}

/* Edit distance of a and b (short words only). */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[32];

	if (la >= 32 || lb >= 32)
		return 32;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

const char *shell_nearest(const char *word, const char *const *first, size_t count,
			  size_t stride)
{
	const char *best = NULL;
	size_t best_d = 3;

	for (size_t i = 0; i < count; i++) {
		const char *name = *(const char *const *)((const char *)first + i * stride);
		size_t d = distance(word, name);

		/* The nearest within two edits; else the first the word begins. */
		if (d < best_d) {
			best = name;
			best_d = d;
		} else if (best == NULL && strncmp(word, name, strlen(word)) == 0) {
			best = name;
		}
	}
	return best;
}

const char *shell_env(const char *name)
{
	const char *v = herd_env_get(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

int shell_parse_time_limit(const char *s, int max_ms, int *ms)
{
	long f[4] = { 0, 0, 0, 0 }, days = 0, secs;
	const char *p = s, *dash = strchr(s, '-');
	int n = 0;

	if (strcasecmp(s, "UNLIMITED") == 0 || strcasecmp(s, "INFINITE") == 0) {
		*ms = 0;
		return 0;
	}
	if (dash != NULL) {
		char *end;

		if (dash == s || !isdigit((unsigned char)*s))
			return -1;
		errno = 0;
		days = strtol(s, &end, 10);
		if (errno != 0 || end != dash || days > 100000)
			return -1;
		p = dash + 1;
	}
	/* Fields of digits between colons: at most three. */
	for (;;) {
		char *end;

		if (n == 3 || !isdigit((unsigned char)*p))
			return -1;
		errno = 0;
		f[n++] = strtol(p, &end, 10);
		if (errno != 0 || f[n - 1] > 100000000)
			return -1;
		if (*end == '\0')
			break;
		if (*end != ':')
			return -1;
		p = end + 1;
	}
	/* Every field after the first is a count below 60 (hours below 24
	 * after days). */
	for (int i = 1; i < n; i++)
		if (f[i] > 59)
			return -1;
	if (dash != NULL) {
		/* D-HH, D-HH:MM, D-HH:MM:SS */
		if (f[0] > 23)
			return -1;
		secs = days * 86400 + f[0] * 3600 + f[1] * 60 + f[2];
	} else if (n == 1) {
		secs = f[0] * 60;                              /* minutes */
	} else if (n == 2) {
		secs = f[0] * 60 + f[1];                       /* MM:SS */
	} else {
		secs = f[0] * 3600 + f[1] * 60 + f[2];         /* HH:MM:SS */
	}
	if (secs > max_ms / 1000)
		return -1;
	*ms = (int)(secs * 1000);
	return 0;
}

/* ---- command lines as getopt_long will read them ---------------------------------- */

/* Whether name begins with the typed name (len bytes), '_' and '-' alike. */
static bool name_begins(const char *typed, size_t len, const char *name)
{
	for (size_t i = 0; i < len; i++) {
		char a = typed[i] == '_' ? '-' : typed[i], b = name[i] == '_' ? '-' : name[i];

		if (name[i] == '\0' || a != b)
			return false;
	}
	return true;
}

/* Whether the typed name (len bytes) is name, '_' and '-' alike. */
static bool same_name(const char *typed, size_t len, const char *name)
{
	return name_begins(typed, len, name) && name[len] == '\0';
}

/* The habit whose name is the argument's option part (len bytes), or NULL. */
static const shell_habit *find_habit(const shell_habit *habits, const char *arg, size_t len)
{
	for (const shell_habit *h = habits; h != NULL && h->name != NULL; h++) {
		bool two = arg[1] == '-', htwo = h->name[1] == '-';

		if (two == htwo && same_name(arg + 1 + two, len - 1 - two, h->name + 1 + htwo))
			return h;
	}
	return NULL;
}

/* Argument i becomes p1 p2 p3 (NULL: nothing), what the user typed noted
 * beside it.  -1 when out of memory. */
static int rewrite(shell_args *a, int i, const char *p1, const char *p2, const char *p3)
{
	char *s = NULL;

	if (asprintf(&s, "%s%s%s", p1, p2 != NULL ? p2 : "", p3 != NULL ? p3 : "") < 0)
		return -1;
	a->owned[a->nowned] = s;
	a->typed[a->nowned++] = a->argv[i];
	a->argv[i] = s;
	return 0;
}

/* Drops argument i (a flag with nothing to do). */
static void drop(shell_args *a, int i)
{
	memmove(a->argv + i, a->argv + i + 1, (size_t)(a->argc - i) * sizeof(*a->argv));
	a->argc--;
}

/*
 * Argument i, whose option part is habit h: rewritten to the
 * command's option, with an attached value (val, or NULL) kept, or
 * refused.  Sets *skip when the value is the next argument.  0, or the
 * exit status (said).
 */
static int apply_habit(const char *cmd, shell_args *a, int i, const char *val,
		       const shell_habit *h, int *skip)
{
	*skip = 0;
	if (h->with == NULL) {
		char msg[1024];

		/* A long flag as typed (--rdzv_backend); a short one by its
		 * own name: in a cluster (-uo) the typed text begins with
		 * another. */
		const char *arg = a->argv[i];

		if (h->name[1] == '-')
			snprintf(msg, sizeof(msg), "%.*s is %s", (int)strcspn(arg, "="), arg, h->why);
		else
			snprintf(msg, sizeof(msg), "%s is %s", h->name, h->why);
		return shell_usage_error(cmd, "%s", msg);
	}
	if (val != NULL && !h->has_arg)
		return shell_usage_error(cmd, "option '%s' takes no value", h->name);
	if (h->has_arg && val == NULL) {
		if (i + 1 >= a->argc)
			return shell_usage_error(cmd, "option '%s' needs a value", h->name);
		*skip = 1;
	}
	if (h->with[0] == '\0') {
		/* Nothing to do: gone, with its value. */
		if (*skip)
			drop(a, i);
		drop(a, i);
		*skip = -1;
		return 0;
	}
	/* "--ntasks=4" as "--np=4", "-xFOO" as "--env=FOO" */
	if (rewrite(a, i, h->with, val != NULL && h->with[1] == '-' ? "=" : NULL, val) != 0)
		return shell_usage_error(cmd, "out of memory%s", "");
	return 0;
}

/* Whether name begins with the typed one (len bytes, '_' and '-' alike)
 * and goes on. */
static bool longer_name(const char *typed, size_t len, const char *name)
{
	return name_begins(typed, len, name) && name[len] != '\0';
}

/* "--restarts" or "--hosts or --hostfile": the options that begin with
 * the typed name (len bytes), for "did you mean". */
static void prefixed(const struct option *longopts, const char *typed, size_t len, char *out,
		     size_t cap)
{
	size_t o = 0, n = 0, total = 0;

	out[0] = '\0';
	for (const struct option *l = longopts; l->name != NULL; l++)
		total += longer_name(typed, len, l->name);
	for (const struct option *l = longopts; l->name != NULL && o < cap; l++) {
		if (!longer_name(typed, len, l->name))
			continue;
		n++;
		o += (size_t)snprintf(out + o, cap - o, "%s--%s", n == 1 ? "" : n == total ? " or "
				      : ", ", l->name);
	}
}

/* A long option, argument i: 0 (with *skip 1 when its value is the next
 * argument, -1 when it was dropped), or the exit status (said). */
static int check_long(const char *cmd, shell_args *a, int i, const struct option *longopts,
		      const shell_habit *habits, int *skip)
{
	const char *arg = a->argv[i], *eq = strchr(arg, '=');
	size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
	const shell_habit *h;
	char msg[512], near[256];

	*skip = 0;
	for (const struct option *l = longopts; l->name != NULL; l++) {
		if (!same_name(arg + 2, len - 2, l->name))
			continue;
		if (l->has_arg == no_argument && eq != NULL)
			return shell_usage_error(cmd, "option '--%s' takes no value", l->name);
		if (l->has_arg == required_argument && eq == NULL) {
			if (i + 1 >= a->argc)
				return shell_usage_error(cmd, "option '--%s' needs a value", l->name);
			*skip = 1;
		}
		/* torchrun's "--nproc_per_node" as getopt_long finds it */
		if (strncmp(arg + 2, l->name, len - 2) != 0 && rewrite(a, i, "--", l->name, eq) != 0)
			return shell_usage_error(cmd, "out of memory%s", "");
		return 0;
	}
	h = find_habit(habits, arg, len);
	if (h != NULL)
		return apply_habit(cmd, a, i, eq != NULL ? eq + 1 : NULL, h, skip);
	prefixed(longopts, arg + 2, len - 2, near, sizeof(near));
	if (near[0] != '\0')
		snprintf(msg, sizeof(msg), "unrecognized option '%.*s' (options are never abbreviated: "
			 "%s?)", (int)len, arg, near);
	else
		snprintf(msg, sizeof(msg), "unrecognized option '%.*s'", (int)len, arg);
	return shell_usage_error(cmd, "%s", msg);
}

/* Short options, argument i ("-n4", "-ul", "-c"): as check_long. */
static int check_short(const char *cmd, shell_args *a, int i, const char *shortopts,
		       const shell_habit *habits, int *skip)
{
	const char *arg = a->argv[i];

	*skip = 0;
	for (size_t k = 1; arg[k] != '\0'; k++) {
		const char *p = arg[k] != ':' ? strchr(shortopts, arg[k]) : NULL;
		char name[3] = { '-', arg[k], '\0' };

		if (p == NULL) {
			const shell_habit *h = find_habit(habits, name, 2);

			/* A flag of another tool, as the first of its argument
			 * ("-x FOO", "-xFOO", "-c 4"). */
			if (h != NULL && (h->with == NULL || (k == 1 && (h->has_arg || arg[2] == '\0'))))
				return apply_habit(cmd, a, i, k == 1 && arg[2] != '\0' && h->has_arg
						   ? arg + 2 : NULL, h, skip);
			return shell_usage_error(cmd, "unrecognized option '%s'", name);
		}
		if (p[1] != ':')
			continue;
		/* Its value: the rest of the argument, or the next one. */
		if (arg[k + 1] == '\0' && p[2] != ':') {
			if (i + 1 >= a->argc)
				return shell_usage_error(cmd, "option '%s' needs a value", name);
			*skip = 1;
		}
		return 0;
	}
	return 0;
}

int shell_args_check(const char *cmd, int argc, char **argv, const char *shortopts,
		     const struct option *longopts, const shell_habit *habits, shell_args *out)
{
	bool in_order = shortopts[0] == '+';
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->argc = argc;
	out->argv = calloc((size_t)argc + 1, sizeof(*out->argv));
	out->owned = calloc((size_t)argc + 1, sizeof(*out->owned));
	out->typed = calloc((size_t)argc + 1, sizeof(*out->typed));
	if (out->argv == NULL || out->owned == NULL || out->typed == NULL)
		return shell_usage_error(cmd, "out of memory%s", "");
	memcpy(out->argv, argv, (size_t)argc * sizeof(*argv));
	while (*shortopts == '+' || *shortopts == '-' || *shortopts == ':')
		shortopts++;
	for (int i = 1; i < out->argc && rc == 0; i++) {
		const char *arg = out->argv[i];
		const shell_habit *h;
		int skip = 0;

		if (strcmp(arg, "--") == 0)
			break;
		if (arg[0] != '-' || arg[1] == '\0') {
			if (in_order)
				break;
			continue;
		}
		/* A whole argument that is another tool's flag: "-np", "-x". */
		if (arg[1] != '-' && (h = find_habit(habits, arg, strlen(arg))) != NULL)
			rc = apply_habit(cmd, out, i, NULL, h, &skip);
		else if (arg[1] == '-')
			rc = check_long(cmd, out, i, longopts, habits, &skip);
		else
			rc = check_short(cmd, out, i, shortopts, habits, &skip);
		/* A dropped argument: the next one took its place. */
		i += skip;
	}
	return rc;
}

void shell_args_free(shell_args *a)
{
	for (size_t i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->typed);
	free(a->argv);
	memset(a, 0, sizeof(*a));
}

const char *shell_args_option(const shell_args *a, const struct option *longopts, int c,
			      int li, char *buf, size_t cap)
{
	/* The option's own argument: before its value when that is apart. */
	int at = optarg != NULL && optind >= 2 && optarg == a->argv[optind - 1] ? optind - 2
		 : optind - 1;

	for (size_t i = 0; at >= 0 && i < a->nowned; i++)
		if (a->argv[at] == a->owned[i]) {
			snprintf(buf, cap, "%.*s", (int)strcspn(a->typed[i], "="), a->typed[i]);
			return buf;
		}
	if (li >= 0)
		snprintf(buf, cap, "--%s", longopts[li].name);
	else
		snprintf(buf, cap, "-%c", c);
	return buf;
}
