/*
 * shell/cmd_exclude.c - herd exclude ls|add|rm: the nodes herd launch
 * leaves out, whatever the backend (herd_exclude_list, herd_exclude_add,
 * herd_exclude_remove; herd/exclude.h).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "herd.h"
#include "shell.h"

static const char exclude_usage[] =
	"usage: herd exclude ls [--json]\n"
	"       herd exclude add [--reason TEXT] EXPR\n"
	"       herd exclude rm EXPR\n"
	"\n"
	"The nodes herd launch gives no rank to, over ssh or in a Slurm allocation\n"
	"alike (srun then runs on the others): one list, the file $HERD_EXCLUDE_FILE,\n"
	"else ${XDG_STATE_HOME:-~/.local/state}/herd/exclude.  herd launch --exclude\n"
	"EXPR leaves nodes out of one job only.\n"
	"  ls        the excluded nodes: each one's host, since when, and why\n"
	"  add       exclude the nodes of EXPR (a hostlist expression: node[03-04]);\n"
	"            one already there keeps its time and reason\n"
	"  rm        take the nodes of EXPR back\n"
	"  --reason TEXT  why, for ls and for herd launch's message\n"
	"  --json     ls as one JSON array of {host, since, reason}\n"
	"Exit status:\n"
	"  0    done\n"
	"  1    the list cannot be read or written\n"
	"  2    a usage error, or a malformed expression\n";

static const struct option exclude_options[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "reason", required_argument, NULL, 'r' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int list(bool json)
{
	herd_exclude_entry *v = NULL;
	size_t n = 0;
	json_t *all;

	if (herd_exclude_list(&v, &n) != HERD_OK) {
		shell_message("herd exclude", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	if (json) {
		char *text;

		all = json_array();
		for (size_t i = 0; all != NULL && i < n; i++)
			json_array_append_new(all, json_pack("{s:s, s:f, s:s}", "host", v[i].host,
							     "since", v[i].since, "reason",
							     v[i].reason));
		text = all != NULL ? json_dumps(all, JSON_COMPACT) : NULL;
		json_decref(all);
		if (text != NULL)
			printf("%s\n", text);
		free(text);
	} else {
		printf("%-24s %-19s  %s\n", "HOST", "SINCE", "REASON");
		for (size_t i = 0; i < n; i++) {
			time_t t = (time_t)v[i].since;
			struct tm tm;
			char when[32] = "?";

			if (localtime_r(&t, &tm) != NULL)
				strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
			printf("%-24s %-19s  %s\n", v[i].host, when, v[i].reason);
		}
	}
	herd_free(v);
	return fflush(stdout) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}

int cmd_exclude(int argc, char **argv)
{
	shell_args args;
	const char *reason = NULL;
	bool json = false;
	char sub[8] = "", expr[4096] = "";
	size_t changed = 0;
	herd_status st;
	int c, status = shell_args_check("exclude", argc, argv, "h", exclude_options, NULL, &args);

	if (status != 0) {
		shell_args_free(&args);
		return status;
	}
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(args.argc, args.argv, "h", exclude_options, NULL)) != -1) {
		if (c == 'h') {
			shell_args_free(&args);
			fputs(exclude_usage, stdout);
			return SHELL_EXIT_OK;
		}
		if (c == 'j') {
			json = true;
		} else if (c == 'r') {
			reason = optarg;
		} else {
			status = shell_usage_error("exclude", "unrecognized option '%s'",
						   args.argv[optind - 1]);
			shell_args_free(&args);
			return status;
		}
	}
	if (optind < args.argc)
		snprintf(sub, sizeof(sub), "%s", args.argv[optind]);
	if (strcmp(sub, "ls") != 0 && strcmp(sub, "add") != 0 && strcmp(sub, "rm") != 0) {
		status = optind == args.argc
			? shell_usage_error("exclude", "%s", "say ls, add EXPR or rm EXPR")
			: shell_usage_error("exclude", "unknown subcommand '%s' (ls, add, rm)",
					    args.argv[optind]);
		shell_args_free(&args);
		return status;
	}
	if (args.argc - optind != (strcmp(sub, "ls") == 0 ? 1 : 2)) {
		status = strcmp(sub, "ls") == 0
			? shell_usage_error("exclude", "ls: unexpected argument '%s'",
					    args.argv[optind + 1])
			: args.argc - optind == 1
			? shell_usage_error("exclude", "%s: name the nodes (a hostlist: node[03-04])",
					    sub)
			: shell_usage_error("exclude", "one hostlist expression; unexpected '%s'",
					    args.argv[optind + 2]);
		shell_args_free(&args);
		return status;
	}
	if ((json && strcmp(sub, "ls") != 0) || (reason != NULL && strcmp(sub, "add") != 0)) {
		status = shell_usage_error("exclude", "%s", json ? "--json goes with ls"
							      : "--reason goes with add");
		shell_args_free(&args);
		return status;
	}
	if (strcmp(sub, "ls") == 0) {
		shell_args_free(&args);
		return list(json);
	}
	snprintf(expr, sizeof(expr), "%s", args.argv[optind + 1]);
	shell_args_free(&args);
	st = strcmp(sub, "add") == 0 ? herd_exclude_add(expr, reason, &changed)
				     : herd_exclude_remove(expr, &changed);
	if (st == HERD_EFORMAT)
		return shell_usage_error("exclude", "%s", shell_last_error());
	if (st != HERD_OK) {
		shell_message("herd exclude", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	printf("%zu node%s %s\n", changed, changed == 1 ? "" : "s",
	       strcmp(sub, "add") == 0 ? "excluded" : "taken back");
	return fflush(stdout) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}
