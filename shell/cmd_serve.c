/*
 * shell/cmd_serve.c - `herd serve`: MIN to MAX replicas of a command
 * behind HAProxy, until Ctrl-C or `herd job stop` (herd_serve_start and
 * friends, herd/serve.h).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd.h"
#include "shell.h"

static const char usage_text[] =
	"usage: herd serve --port PORT [options] [--] CMD [ARGS...]\n"
	"Runs replicas of CMD behind HAProxy, the service's front door on\n"
	"BIND:PORT: each replica is a process of its own (its index in\n"
	"HERD_REPLICA, from 0; the port to listen on in HERD_PORT, the address in\n"
	"HERD_LISTEN), put in the balancer once its health check passes, taken\n"
	"out and restarted alone when it fails.  Every decision is printed on\n"
	"stderr; replicas' lines on stdout and stderr, prefixed [host:rINDEX].\n"
	"Runs until Ctrl-C or herd job stop ID; herd job status|scale|restart ID\n"
	"act on it (herd jobs lists it).  Needs HAProxy 2.0 or newer (HERD_HAPROXY,\n"
	"else haproxy in PATH).\n"
	"  --port PORT             the front door's port (required)\n"
	"  --bind ADDR             the front door's address (default 127.0.0.1)\n"
	"  --replicas N|MIN-MAX    replicas (default 1); with a range, MIN at the\n"
	"                          start, and herd job scale or --target move them\n"
	"                          within it\n"
	"  --target N              scale with demand: N requests in flight per\n"
	"                          replica (at replicas and queued for one, as\n"
	"                          HAProxy counts them), within MIN-MAX\n"
	"  --cooldown SEC          scale down only when fewer replicas would have\n"
	"                          done for this long (default 30)\n"
	"  --replica-port P        replica i listens on P + i (default PORT + 1)\n"
	"  --replica-conns N       requests a replica takes at once; the rest wait\n"
	"                          in HAProxy's queue (default: no limit)\n"
	"  --health PATH|tcp       the check: an HTTP GET of PATH answering 2xx or\n"
	"                          3xx, or a TCP connect (default tcp)\n"
	"  --start-timeout SEC     start to first passed check (default 60)\n"
	"  --grace SEC             draining: requests in flight finish within SEC,\n"
	"                          then SIGTERM, and SIGKILL SEC later (default 10)\n"
	"  --restarts N            restarts of a replica in a row, each after a\n"
	"                          back-off from 1 s doubling to 30 s (default 3);\n"
	"                          failing again after them, it is left down; 60 s\n"
	"                          ready starts a new row\n"
	"  --hosts EXPR            replicas on a hostlist, over ssh, e.g. node[01-04]\n"
	"  --hostfile FILE         replicas on the hosts of FILE, over ssh\n"
	"  --slurm                 replicas on the nodes of this Slurm allocation\n"
	"  --gpus-per-replica G    lease and bind G GPUs per replica\n"
	"  --env NAME=VALUE        set NAME in every replica's environment\n"
	"  --prefix FMT            line prefix, %h host, %r replica (default\n"
	"                          \"[%h:r%r] \")\n"
	"  --no-prefix             no prefix\n"
	"  -h, --help              this help\n"
	"Signals: SIGINT (Ctrl-C), SIGTERM or SIGHUP drain and stop every\n"
	"replica, then HAProxy; another one kills the replicas at once.\n"
	"Exit status:\n"
	"  0    stopped (a signal, herd job stop)\n"
	"  1    every replica failed for good, or HAProxy ended\n"
	"  2    a usage error\n"
	"  125  the service did not start (HAProxy missing or too old, the port\n"
	"       taken, a node that cannot be resolved)\n";

#define SERVE_EXIT_OWN 125
#define COUNT_MAX 1024
#define SECONDS_MAX 2.0e6

enum {
	OPT_PORT = 256, OPT_BIND, OPT_REPLICAS, OPT_TARGET, OPT_COOLDOWN, OPT_REPLICA_PORT,
	OPT_REPLICA_CONNS, OPT_HEALTH, OPT_START_TIMEOUT, OPT_GRACE, OPT_RESTARTS, OPT_HOSTS,
	OPT_HOSTFILE, OPT_SLURM, OPT_GPUS, OPT_ENV, OPT_PREFIX, OPT_NO_PREFIX
};

static const struct option options[] = {
	{ "port", required_argument, NULL, OPT_PORT },
	{ "bind", required_argument, NULL, OPT_BIND },
	{ "replicas", required_argument, NULL, OPT_REPLICAS },
	{ "target", required_argument, NULL, OPT_TARGET },
	{ "cooldown", required_argument, NULL, OPT_COOLDOWN },
	{ "replica-port", required_argument, NULL, OPT_REPLICA_PORT },
	{ "replica-conns", required_argument, NULL, OPT_REPLICA_CONNS },
	{ "health", required_argument, NULL, OPT_HEALTH },
	{ "start-timeout", required_argument, NULL, OPT_START_TIMEOUT },
	{ "grace", required_argument, NULL, OPT_GRACE },
	{ "restarts", required_argument, NULL, OPT_RESTARTS },
	{ "hosts", required_argument, NULL, OPT_HOSTS },
	{ "hostfile", required_argument, NULL, OPT_HOSTFILE },
	{ "slurm", no_argument, NULL, OPT_SLURM },
	{ "gpus-per-replica", required_argument, NULL, OPT_GPUS },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "prefix", required_argument, NULL, OPT_PREFIX },
	{ "no-prefix", no_argument, NULL, OPT_NO_PREFIX },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int usage(const char *opt, const char *v, const char *expected)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s %s: expected %s", opt, v, expected);
	return shell_usage_error("serve", "%s", msg);
}

static int count(const char *opt, const char *v, int min, int max, int *out)
{
	char what[64];

	if (shell_parse_int(v, min, max, out) == 0)
		return 0;
	snprintf(what, sizeof(what), "a whole number from %d to %d", min, max);
	return usage(opt, v, what);
}

static int seconds(const char *opt, const char *v, int *ms)
{
	char *end;
	double s;

	errno = 0;
	s = strtod(v, &end);
	if (end == v || *end != '\0' || errno != 0 || !isfinite(s) || s <= 0 || s > SECONDS_MAX)
		return usage(opt, v, "a number of seconds above 0");
	*ms = (int)ceil(s * 1000.0);
	return 0;
}

static void print_event(void *userdata, const char *line)
{
	(void)userdata;
	fprintf(stderr, "herd serve: %s\n", line);
}

int cmd_serve(int argc, char **argv)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	herd_serve_spec spec = HERD_SERVE_SPEC_INIT;
	const char **env = NULL, *prefix = "[%h:r%r] ";
	size_t nenv = 0;
	shell_args args;
	herd_serve *svc = NULL;
	bool failed = false;
	int c, li, status, sig_fd;
	char opt[64];

	status = shell_args_check("serve", argc, argv, "+h", options, NULL, &args);
	if (status != 0) {
		shell_args_free(&args);
		return status;
	}
	env = calloc((size_t)argc + 1, sizeof(*env));
	if (env == NULL) {
		shell_args_free(&args);
		return SHELL_EXIT_FAILURE;
	}
	opterr = 0;
	optind = 1;
	while (status == 0 && (c = getopt_long(args.argc, args.argv, "+h", options, &li)) != -1) {
		const char *v = optarg;

		if (c != 'h' && c != '?')
			shell_args_option(&args, options, c, li, opt, sizeof(opt));
		switch (c) {
		case 'h':
			fputs(usage_text, stdout);
			status = -1;
			break;
		case OPT_PORT:
			status = count(opt, v, 1, 65535, &spec.port);
			break;
		case OPT_BIND:
			spec.bind = v;
			break;
		case OPT_REPLICAS: {
			const char *dash = strchr(v, '-');
			char lo[16];

			if (dash == NULL) {
				status = count(opt, v, 1, COUNT_MAX, &spec.min_replicas);
				spec.max_replicas = spec.min_replicas;
				break;
			}
			snprintf(lo, sizeof(lo), "%.*s", (int)(dash - v) < 15 ? (int)(dash - v) : 15, v);
			if (shell_parse_int(lo, 1, COUNT_MAX, &spec.min_replicas) != 0 ||
			    shell_parse_int(dash + 1, 1, COUNT_MAX, &spec.max_replicas) != 0 ||
			    spec.max_replicas < spec.min_replicas)
				status = usage(opt, v, "N, or MIN-MAX with 1 <= MIN <= MAX <= 1024");
			break;
		}
		case OPT_TARGET:
			status = count(opt, v, 1, 1000000, &spec.target);
			break;
		case OPT_COOLDOWN:
			status = seconds(opt, v, &spec.cooldown_ms);
			break;
		case OPT_REPLICA_PORT:
			status = count(opt, v, 1, 65535, &spec.replica_port);
			break;
		case OPT_REPLICA_CONNS:
			status = count(opt, v, 1, 1000000, &spec.replica_conns);
			break;
		case OPT_HEALTH:
			if (strcmp(v, "tcp") != 0 && (v[0] != '/' || strpbrk(v, " \t#") != NULL))
				status = usage(opt, v, "an HTTP path (/health) or tcp");
			spec.health = v;
			break;
		case OPT_START_TIMEOUT:
			status = seconds(opt, v, &spec.start_timeout_ms);
			break;
		case OPT_GRACE:
			status = seconds(opt, v, &spec.grace_ms);
			break;
		case OPT_RESTARTS:
			status = count(opt, v, 0, 1000000, &spec.restarts);
			break;
		case OPT_HOSTS:
		case OPT_HOSTFILE:
		case OPT_SLURM:
			if (spec.where != HERD_JOB_LOCAL) {
				status = shell_usage_error("serve", "%s: one of --hosts, --hostfile "
							   "and --slurm", opt);
				break;
			}
			spec.where = c == OPT_HOSTS ? HERD_JOB_HOSTS : c == OPT_HOSTFILE
				     ? HERD_JOB_HOSTFILE : HERD_JOB_SLURM;
			spec.hosts = v;
			break;
		case OPT_GPUS:
			status = count(opt, v, 1, 1024, &spec.gpus_per_replica);
			break;
		case OPT_ENV:
			if (strchr(v, '=') == NULL || v[0] == '=')
				status = usage(opt, v, "NAME=VALUE");
			env[nenv++] = v;
			break;
		case OPT_PREFIX:
			prefix = v;
			break;
		case OPT_NO_PREFIX:
			prefix = "";
			break;
		default:
			status = shell_usage_error("serve", "unrecognized option '%s'",
						   args.argv[optind - 1]);
			break;
		}
	}
	if (status == 0 && spec.port == 0)
		status = shell_usage_error("serve", "%s", "--port PORT is required: the front "
					   "door's port");
	if (status == 0 && optind >= args.argc)
		status = shell_usage_error("serve", "%s", "no command: herd serve [options] -- CMD "
					   "[ARGS...]");
	if (status == 0 && (spec.replica_port ? spec.replica_port : spec.port + 1) +
			   spec.max_replicas - 1 > 65535) {
		char msg[160];

		snprintf(msg, sizeof(msg), "the ports of %d replica%s from %d go beyond 65535: "
			 "give a lower --replica-port (default --port + 1)", spec.max_replicas,
			 spec.max_replicas == 1 ? "" : "s",
			 spec.replica_port ? spec.replica_port : spec.port + 1);
		status = shell_usage_error("serve", "%s", msg);
	}
	if (status == 0 && spec.replica_port > 0 && spec.port >= spec.replica_port &&
	    spec.port < spec.replica_port + spec.max_replicas) {
		char msg[160];

		snprintf(msg, sizeof(msg), "--port %d is among the replicas' ports, %d to %d "
			 "(--replica-port)", spec.port, spec.replica_port,
			 spec.replica_port + spec.max_replicas - 1);
		status = shell_usage_error("serve", "%s", msg);
	}
	if (status == 0 && spec.target > 0 && spec.min_replicas == spec.max_replicas)
		status = shell_usage_error("serve", "--target needs a range to scale in: "
					   "--replicas MIN-MAX (it is %s)", "one count");
	if (status != 0) {
		free(env);
		shell_args_free(&args);
		return status < 0 ? SHELL_EXIT_OK : status;
	}
	spec.argv = (const char *const *)args.argv + optind;
	spec.env = env;
	spec.output = herd_job_output_stdio;
	spec.output_userdata = (void *)prefix;
	spec.event = print_event;
	sig_fd = shell_signals_catch("herd serve", sigs, sizeof(sigs) / sizeof(*sigs));
	signal(SIGPIPE, SIG_IGN);
	if (sig_fd < 0 || herd_serve_start(&svc, &spec) != HERD_OK) {
		if (sig_fd >= 0)
			fprintf(stderr, "herd serve: %s\n", herd_last_error());
		free(env);
		shell_args_free(&args);
		return SERVE_EXIT_OWN;
	}
	fprintf(stderr, "herd serve: service %s (herd job status %s)\n", herd_serve_id(svc),
		herd_serve_id(svc));
	/* Signals: the first drains and stops, another kills the replicas at once. */
	for (int stops = 0;;) {
		struct pollfd p[2] = { { .fd = sig_fd, .events = POLLIN },
				       { .fd = herd_serve_fd(svc), .events = POLLIN } };

		if (herd_serve_wait(svc, 0, &failed) == HERD_OK)
			break;
		if (poll(p, 2, -1) > 0 && (p[0].revents & POLLIN)) {
			char s[16];
			ssize_t n = read(sig_fd, s, sizeof(s));

			for (ssize_t i = 0; i < n; i++, stops++) {
				fprintf(stderr, "herd serve: %s: %s service %s%s\n",
					s[i] == SIGINT ? "SIGINT" : s[i] == SIGTERM ? "SIGTERM" : "SIGHUP",
					stops == 0 ? "stopping" : "killing the replicas of",
					herd_serve_id(svc), stops == 0 ? " (another signal kills its "
					"replicas at once)" : "");
				herd_serve_interrupt(svc);
			}
		}
	}
	if (failed)
		fprintf(stderr, "herd serve: %s\n", herd_serve_failure(svc));
	herd_serve_free(svc);
	free(env);
	shell_args_free(&args);
	return failed ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
}
