/*
 * shell/options.c - what the subcommands share to read their command
 * lines: numbers and sizes, an option's value in its three spellings, the
 * nearest of some names to a mistyped word, and the usage error every
 * command ends a bad command line with.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

		if (d < best_d || (strncmp(word, name, strlen(word)) == 0 && best == NULL)) {
			best = name;
			best_d = d;
		}
	}
	return best;
}

const char *shell_env(const char *name)
{
	const char *v = herd_env_get(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}
