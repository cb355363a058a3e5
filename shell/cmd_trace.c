/*
 * shell/cmd_trace.c - herd trace: the flight recorders of a job read back
 * (herd/trace.h), as the wavefront of each communicator.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

static const char trace_usage[] =
	"usage: herd trace [--json] [--calls N] FILE|DIR\n"
	"       herd trace [--json] [--calls N] --live JOB\n"
	"\n"
	"The flight recorders of a job (each rank's ring of its last calls, the\n"
	"ID.RANK.trace files herd launch keeps in its trace directory) as the\n"
	"wavefront of each communicator: the next call, the ranks that entered it,\n"
	"and for each missing rank the last call it completed, how long ago, and\n"
	"whether it is stuck inside a call, stopped, gone, or has not called (a\n"
	"hang in the application).  Process states are read for the ranks of this\n"
	"host.\n"
	"  --calls N  each rank's last N calls instead, newest first: the operation\n"
	"             and its number, datatype and count, reduction, root or peer,\n"
	"             the algorithm, and how it went (done in how long, how long ago;\n"
	"             still inside; failed with what)\n"
	"  --json     one JSON document instead (docs/reliability.md)\n"
	"  --live JOB the rings of job JOB (its id, as herd launch says it) in the\n"
	"             trace directory herd launch keeps for it on this node\n"
	"             (HERD_TRACE_DIR/JOB, else $XDG_RUNTIME_DIR/herd/trace/JOB, else\n"
	"             /tmp/herd-trace-UID/JOB), while it runs: its ranks here, read\n"
	"             as they are, and the copies of other nodes' rings the launcher\n"
	"             was sent (every HERD_STRAGGLER_CHECK seconds, from nodes that do\n"
	"             not share the directory), said with their age\n"
	"Exit status:\n"
	"  0    every rank of every communicator entered its next call\n"
	"  1    some rank is missing from a call, or did not answer the others in\n"
	"       a hang in communication (the report names it; with --calls too),\n"
	"       or the recorders could not be read\n"
	"  2    a usage error\n";

static const struct option trace_options[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "calls", required_argument, NULL, 'c' },
	{ "live", required_argument, NULL, 'l' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int cmd_trace(int argc, char **argv)
{
	herd_trace_format format = HERD_TRACE_TEXT;
	herd_trace_culprit who;
	shell_args args;
	char *text = NULL, live[4096] = "";
	const char *path;
	int c, status, ncalls = 0;

	status = shell_args_check("trace", argc, argv, "h", trace_options, NULL, &args);
	if (status != 0) {
		shell_args_free(&args);
		return status;
	}
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(args.argc, args.argv, "h", trace_options, NULL)) != -1) {
		if (c == 'h') {
			shell_args_free(&args);
			fputs(trace_usage, stdout);
			return SHELL_EXIT_OK;
		}
		if (c == 'j') {
			format = HERD_TRACE_JSON;
			continue;
		}
		if (c == 'l') {
			if (herd_trace_job_dir(optarg, live, sizeof(live)) == HERD_OK)
				continue;
			snprintf(live, sizeof(live), "--live %s: %s", optarg, shell_last_error());
			shell_args_free(&args);
			return shell_usage_error("trace", "%s", live);
		}
		if (c == 'c') {
			if (shell_parse_int(optarg, 1, 1 << 20, &ncalls) == 0)
				continue;
			shell_args_free(&args);
			return shell_usage_error("trace", "--calls %s: a count of calls from 1 to "
						 "1048576", optarg);
		}
		shell_args_free(&args);
		return shell_usage_error("trace", "unrecognized option '%s'", argv[optind - 1]);
	}
	if (live[0] != '\0' && optind < args.argc) {
		status = shell_usage_error("trace", "--live names the job: no FILE|DIR with it "
					   "('%s')", args.argv[optind]);
		shell_args_free(&args);
		return status;
	}
	if (live[0] == '\0' && optind + 1 != args.argc) {
		status = optind == args.argc
			? shell_usage_error("trace", "%s", "name a trace file or directory (herd launch "
					    "says where it kept them)")
			: shell_usage_error("trace", "unexpected argument '%s'", args.argv[optind + 1]);
		shell_args_free(&args);
		return status;
	}
	path = live[0] != '\0' ? live : args.argv[optind];
	if (live[0] != '\0' && access(live, F_OK) != 0) {
		fprintf(stderr, "herd trace: --live: no trace directory %s: job %s is not running "
			"here (or not under this HERD_TRACE_DIR), or it ended and succeeded\n",
			live, strrchr(live, '/') + 1);
		shell_args_free(&args);
		return SHELL_EXIT_FAILURE;
	}
	if ((ncalls > 0 ? herd_trace_calls(path, ncalls, format, &text)
			: herd_trace_report(path, format, &text)) != HERD_OK) {
		shell_message("herd trace", shell_last_error());
		shell_args_free(&args);
		return SHELL_EXIT_FAILURE;
	}
	fputs(text, stdout);
	if (format == HERD_TRACE_JSON)
		fputc('\n', stdout);
	free(text);
	status = herd_trace_blame(path, &who) == HERD_OK ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
	shell_args_free(&args);
	if (fflush(stdout) != 0)
		return SHELL_EXIT_FAILURE;
	return status;
}
