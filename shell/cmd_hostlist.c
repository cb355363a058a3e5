/*
 * shell/cmd_hostlist.c - `herd hostlist expand|compress|count`: Slurm's
 * hostlist expressions ("node[01-04,7],gpu[1-2]") through
 * herd_hostlist_expand and herd_hostlist_compress, printed as
 * `scontrol show hostnames` and `scontrol show hostlist` print them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd.h"
#include "shell.h"

static const char hostlist_usage[] =
	"usage: herd hostlist expand EXPR\n"
	"       herd hostlist compress NAMES...\n"
	"       herd hostlist count EXPR\n"
	"\n"
	"Slurm's hostlist expressions, as scontrol prints them:\n"
	"  expand    one name per line, in the expression's order, repeats kept\n"
	"            (scontrol show hostnames)\n"
	"  compress  the names (arguments, each a name or a comma-separated list)\n"
	"            as one expression: runs of numbered names with the same prefix,\n"
	"            suffix and width in brackets, in the order first seen\n"
	"            (scontrol show hostlist)\n"
	"  count     how many names the expression holds\n"
	"Brackets take numbers and ranges (lo-hi, zero-padded keeps its width);\n"
	"several brackets in a name multiply out (a[1-2]b[1-2]: a1b1 a1b2 a2b1\n"
	"a2b2).  Beyond Slurm, herd takes text after a bracket (node[1-3]-ib).\n"
	"Exit status:\n"
	"  0    the names, the expression or the count was printed\n"
	"  2    a usage error, or a malformed expression or name (said on stderr)\n";

static int expand(const char *expr, bool count_only)
{
	char **names = NULL;
	size_t n = 0;

	if (herd_hostlist_expand(expr, &names, &n) != HERD_OK)
		return shell_usage_error("hostlist", "%s", shell_last_error());
	if (count_only)
		printf("%zu\n", n);
	for (size_t i = 0; !count_only && i < n; i++)
		printf("%s\n", names[i]);
	herd_free(names);
	return SHELL_EXIT_OK;
}

static int compress(int argc, char **argv)
{
	const char **names = NULL;
	char *copy = NULL, *expr = NULL;
	size_t len = 0, n = 0, cap = 0;
	int status = SHELL_EXIT_FAILURE;

	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	copy = malloc(len + 1);
	if (copy == NULL)
		goto out;
	len = 0;
	for (int i = 0; i < argc; i++) {
		size_t m = strlen(argv[i]);

		memcpy(copy + len, argv[i], m);
		copy[len + m] = ',';
		len += m + 1;
	}
	copy[len] = '\0';
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		if (n == cap) {
			const char **grown = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));

			if (grown == NULL)
				goto out;
			names = grown;
		}
		names[n++] = t;
	}
	if (n == 0) {
		status = shell_usage_error("hostlist", "%s", "compress: no names given");
		goto out;
	}
	if (herd_hostlist_compress(names, n, &expr) != HERD_OK) {
		status = shell_usage_error("hostlist", "%s", shell_last_error());
		goto out;
	}
	printf("%s\n", expr);
	status = SHELL_EXIT_OK;
out:
	if (status == SHELL_EXIT_FAILURE)
		shell_message("herd hostlist", "out of memory");
	herd_free(expr);
	free(names);
	free(copy);
	return status;
}

int cmd_hostlist(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : NULL;

	if (verb != NULL && (strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0)) {
		fputs(hostlist_usage, stdout);
		return SHELL_EXIT_OK;
	}
	if (verb == NULL)
		return shell_usage_error("hostlist", "%s", "expand, compress or count?");
	if (strcmp(verb, "compress") == 0)
		return compress(argc - 2, argv + 2);
	if (strcmp(verb, "expand") != 0 && strcmp(verb, "count") != 0)
		return shell_usage_error("hostlist", "unknown action '%s' (expand, compress, count)",
					 verb);
	if (argc != 3)
		return shell_usage_error("hostlist", argc < 3 ? "%s: which expression?"
						: "%s takes one expression", verb);
	return expand(argv[2], strcmp(verb, "count") == 0);
}
