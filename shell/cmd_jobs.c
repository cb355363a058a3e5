/*
 * shell/cmd_jobs.c - herd jobs and herd job status|stop: this user's
 * running jobs on this node, as their launchers answer on their control
 * sockets (herd_jobs_status, herd_jobs_stop; herd/jobs.h).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd.h"
#include "shell.h"

static const char jobs_usage[] =
	"usage: herd jobs [--json]\n"
	"\n"
	"This user's running jobs on this node, as squeue lists a user's: each job\n"
	"that herd launch (or a C program, or herd.launch in Lua) runs here\n"
	"answers on its control socket in $XDG_RUNTIME_DIR/herd/jobs (else\n"
	"/tmp/herd-jobs-UID).  Columns: the job's id, its state (starting,\n"
	"running, failing, stopping), its ranks and nodes, its restarts, how long\n"
	"it has run (H:MM:SS) and its command.\n"
	"  --json     one JSON array instead, an object per job (herd job status)\n"
	"Exit status:\n"
	"  0    the jobs were listed (none is no error)\n"
	"  1    the jobs' directory cannot be read\n"
	"  2    a usage error\n";

static const char job_usage[] =
	"usage: herd job status [--json] ID\n"
	"       herd job stop ID\n"
	"       herd job scale ID N\n"
	"       herd job restart [--rolling] ID\n"
	"\n"
	"One running job or service of this user on this node (herd jobs lists\n"
	"them):\n"
	"  status    its state, command, nodes, restarts, launcher's pid, each\n"
	"            rank's host, pid and state, and an elastic job's nodes (in,\n"
	"            spare, out and why); a service's front door and each\n"
	"            replica's host, port, state, pid, restarts, requests, errors\n"
	"            and requests in flight, from HAProxy (--json: the answer)\n"
	"  stop      stop it as Ctrl-C on its herd launch would: its ranks get\n"
	"            SIGINT, and SIGKILL after the grace period; the job ends as\n"
	"            interrupted (its launcher exits 130); a service drains and\n"
	"            stops its replicas (herd serve exits 0)\n"
	"  scale     a service (herd serve): N replicas, within its MIN-MAX\n"
	"  restart   a service: every replica drained and started again; with\n"
	"            --rolling one at a time, each back in the balancer before\n"
	"            the next goes\n"
	"Exit status:\n"
	"  0    done\n"
	"  1    no running job ID of this user here, or it did not answer\n"
	"  2    a usage error\n";

static const struct option jobs_options[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "rolling", no_argument, NULL, 'r' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Seconds as H:MM:SS. */
static void hms(double s, char *buf, size_t cap)
{
	long t = s > 0 ? (long)s : 0;

	snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "?";
}

static long long num(const json_t *o, const char *key)
{
	return (long long)json_number_value(json_object_get(o, key));
}

/* --json, --rolling and the operands left after the options, or a usage status. */
static int parse(const char *cmd, int argc, char **argv, bool *json, bool *rolling,
		 shell_args *args)
{
	int c, status = shell_args_check(cmd, argc, argv, "h", jobs_options, NULL, args);

	if (status != 0)
		return status;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(args->argc, args->argv, "h", jobs_options, NULL)) != -1) {
		if (c == 'h') {
			fputs(strcmp(cmd, "jobs") == 0 ? jobs_usage : job_usage, stdout);
			return -1;
		}
		if (c == 'j') {
			*json = true;
			continue;
		}
		if (c == 'r' && strcmp(cmd, "job") == 0) {
			*rolling = true;
			continue;
		}
		status = shell_usage_error(cmd, "unrecognized option '%s'", args->argv[optind - 1]);
		return status;
	}
	return 0;
}

int cmd_jobs(int argc, char **argv)
{
	shell_args args;
	bool json = false;
	char *text = NULL;
	json_t *all;
	size_t i;
	json_t *o;
	bool rolling = false;
	int status = parse("jobs", argc, argv, &json, &rolling, &args);

	if (status != 0 || optind != args.argc) {
		if (status == 0)
			status = shell_usage_error("jobs", "unexpected argument '%s'",
						   args.argv[optind]);
		shell_args_free(&args);
		return status < 0 ? SHELL_EXIT_OK : status;
	}
	shell_args_free(&args);
	if (herd_jobs_status(NULL, &text) != HERD_OK) {
		shell_message("herd jobs", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	if (json) {
		printf("%s\n", text);
		herd_free(text);
		return fflush(stdout) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
	}
	all = json_loads(text, 0, NULL);
	herd_free(text);
	printf("%-20s %-9s %5s %5s %8s %9s  %s\n", "ID", "STATE", "RANKS", "NODES", "RESTARTS",
	       "TIME", "COMMAND");
	json_array_foreach(all, i, o) {
		char age[32];

		hms(json_number_value(json_object_get(o, "age")), age, sizeof(age));
		printf("%-20s %-9s %5lld %5lld %8lld %9s  %s\n", str(o, "id"), str(o, "state"),
		       num(o, "ranks"), num(o, "nodes"), num(o, "restarts"), age, str(o, "command"));
	}
	json_decref(all);
	return fflush(stdout) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}

/* A service's front door and replicas. */
static void print_service(const json_t *o)
{
	const json_t *r;
	char age[32];
	size_t i;

	hms(json_number_value(json_object_get(o, "age")), age, sizeof(age));
	printf("service %s: %s on %s (HAProxy %s), %lld replica%s wanted of %lld-%lld", str(o, "id"),
	       str(o, "state"), str(o, "front"), str(o, "haproxy"), num(o, "wanted"),
	       num(o, "wanted") == 1 ? "" : "s", num(o, "min_replicas"), num(o, "max_replicas"));
	if (num(o, "target") > 0)
		printf(" (target %lld in flight each)", num(o, "target"));
	printf(", up %s, pid %lld\n", age, num(o, "pid"));
	printf("command: %s\n", str(o, "command"));
	printf("in flight %lld, queued %lld\n", num(o, "in_flight"), num(o, "queued"));
	printf("%7s %-16s %5s %-9s %8s %8s %10s %7s %9s\n", "REPLICA", "HOST", "PORT", "STATE",
	       "PID", "RESTARTS", "REQUESTS", "ERRORS", "IN-FLIGHT");
	json_array_foreach(json_object_get(o, "replicas"), i, r) {
		printf("%7lld %-16s %5lld %-9s %8lld %8lld %10lld %7lld %9lld\n", num(r, "index"),
		       str(r, "host"), num(r, "port"), str(r, "state"), num(r, "pid"),
		       num(r, "restarts"), num(r, "requests"), num(r, "errors"), num(r, "in_flight"));
		if (json_object_get(r, "why") != NULL)
			printf("        last failure: %s\n", str(r, "why"));
	}
}

static void print_status(const json_t *o)
{
	const json_t *ranks = json_object_get(o, "rank_states"), *r;
	char age[32];
	size_t i;

	if (strcmp(str(o, "kind"), "service") == 0) {
		print_service(o);
		return;
	}
	hms(json_number_value(json_object_get(o, "age")), age, sizeof(age));
	printf("job %s: %s, %lld rank%s on %lld node%s (%s), %lld restart%s, up %s, launcher "
	       "pid %lld\n", str(o, "id"), str(o, "state"), num(o, "ranks"),
	       num(o, "ranks") == 1 ? "" : "s", num(o, "nodes"), num(o, "nodes") == 1 ? "" : "s",
	       str(o, "hosts"), num(o, "restarts"), num(o, "restarts") == 1 ? "" : "s", age,
	       num(o, "pid"));
	printf("command: %s\n", str(o, "command"));
	json_array_foreach(ranks, i, r) {
		printf("  rank %lld on %s", num(r, "rank"), str(r, "host"));
		if (num(r, "pid") > 0)
			printf(", pid %lld", num(r, "pid"));
		printf(": %s\n", str(r, "state"));
	}
	/* An elastic job's nodes: in, spare, or out and why. */
	if (json_object_get(o, "members") != NULL)
		printf("nodes (%lld to %lld):\n", num(o, "min_nodes"), num(o, "max_nodes"));
	json_array_foreach(json_object_get(o, "members"), i, r) {
		printf("  %s: %s", str(r, "host"), str(r, "role"));
		if (json_object_get(r, "why") != NULL)
			printf(" (%s)", str(r, "why"));
		printf("\n");
	}
}

static bool is_sub(const char *w)
{
	return strcmp(w, "status") == 0 || strcmp(w, "stop") == 0 || strcmp(w, "scale") == 0 ||
	       strcmp(w, "restart") == 0;
}

int cmd_job(int argc, char **argv)
{
	shell_args args;
	bool json = false, rolling = false;
	char *text = NULL, sub[16] = "", id[80] = "", nword[32] = "";
	int status = parse("job", argc, argv, &json, &rolling, &args), n = 0, want;
	herd_status st;

	if (status != 0) {
		shell_args_free(&args);
		return status < 0 ? SHELL_EXIT_OK : status;
	}
	want = args.argc - optind >= 1 && strcmp(args.argv[optind], "scale") == 0 ? 3 : 2;
	if (args.argc - optind != want || !is_sub(args.argv[optind])) {
		status = args.argc - optind == 0
			? shell_usage_error("job", "%s", "say status ID, stop ID, scale ID N or "
					    "restart ID (herd jobs lists the jobs)")
			: !is_sub(args.argv[optind])
			? shell_usage_error("job", "unknown subcommand '%s' (status, stop, scale, "
					    "restart)", args.argv[optind])
			: args.argc - optind == 1
			? shell_usage_error("job", "%s: name the job (herd jobs lists them)",
					    args.argv[optind])
			: want == 3 ? shell_usage_error("job", "%s", "scale ID N: the service and "
							"its replicas")
			: shell_usage_error("job", "unexpected argument '%s'", args.argv[optind + 2]);
		shell_args_free(&args);
		return status;
	}
	snprintf(sub, sizeof(sub), "%s", args.argv[optind]);
	snprintf(id, sizeof(id), "%s", args.argv[optind + 1]);
	if (want == 3)
		snprintf(nword, sizeof(nword), "%s", args.argv[optind + 2]);
	shell_args_free(&args);
	if (json && strcmp(sub, "status") != 0)
		return shell_usage_error("job", "%s", "--json goes with status");
	if (rolling && strcmp(sub, "restart") != 0)
		return shell_usage_error("job", "%s", "--rolling goes with restart");
	if (want == 3 && shell_parse_int(nword, 1, 1024, &n) != 0)
		return shell_usage_error("job", "scale ID N: N is '%s'; expected a whole number of "
					 "replicas from 1 to 1024", nword);
	if (strcmp(sub, "stop") == 0 || strcmp(sub, "scale") == 0 || strcmp(sub, "restart") == 0) {
		st = strcmp(sub, "stop") == 0 ? herd_jobs_stop(id)
		     : strcmp(sub, "scale") == 0 ? herd_jobs_scale(id, n)
		     : herd_jobs_restart(id, rolling);
		if (st != HERD_OK) {
			char who[32];

			snprintf(who, sizeof(who), "herd job %s", sub);
			shell_message(who, shell_last_error());
			return SHELL_EXIT_FAILURE;
		}
		if (strcmp(sub, "stop") == 0)
			printf("job %s: stopping\n", id);
		else if (strcmp(sub, "scale") == 0)
			printf("service %s: scaling to %d replicas\n", id, n);
		else
			printf("service %s: %s\n", id, rolling ? "rolling restart begun"
				: "restarting every replica");
		return fflush(stdout) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
	}
	st = herd_jobs_status(id, &text);
	if (st != HERD_OK) {
		shell_message("herd job status", shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	if (json) {
		printf("%s\n", text);
	} else {
		json_t *o = json_loads(text, 0, NULL);

		print_status(o);
		json_decref(o);
	}
	herd_free(text);
	return fflush(stdout) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}
