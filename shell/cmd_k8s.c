/*
 * shell/cmd_k8s.c - `herd k8s manifest`: a herd job as the Kubernetes
 * objects that run it (herd_k8s_manifest); `herd k8s node`: what each of
 * those pods runs.  Pod 0 runs the job's launcher (herd launch --pods,
 * whose nodes connect back) beside its own node; every pod's node
 * connects to pod 0 by its stable name, proves the secret of the mounted
 * file and runs its ranks as herd exec does.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "herd/k8s.h"
#include "herd/sys/agent.h"
#include "shell.h"

static const char k8s_usage[] =
	"usage: herd k8s manifest [herd launch's options] [--] CMD [ARGS...]\n"
	"       herd k8s node --job NAME --nodes N --per-node K --secret-file F\n"
	"                     [--gpus-per-rank G] [--port P] [--start-timeout S]\n"
	"                     [--] CMD [ARGS...]\n"
	"  manifest   herd launch --k8s --dry-run: the job's objects for kubectl apply\n"
	"             -f -: a Secret (the job's secret, mounted as a file), a headless\n"
	"             Service (the pods' names) and an Indexed Job of -n / --per-node\n"
	"             pods (herd launch --help: --image, --namespace, --job-name,\n"
	"             --k8s-set, --per-node, --gpus-per-rank, --restarts, --env)\n"
	"  node       what each pod of that Job runs (its command): pod\n"
	"             $JOB_COMPLETION_INDEX's node joins pod 0 (NAME-0.NAME:P) as\n"
	"             NAME-INDEX.NAME with the secret of the mounted file and runs\n"
	"             its K ranks; pod 0 also runs the job's launcher\n"
	"  --job NAME           the Job's and its Service's name\n"
	"  --nodes N            the pods\n"
	"  --per-node K         ranks per pod\n"
	"  --secret-file F      the job's secret, the Secret mounted as a file\n"
	"  --gpus-per-rank G    GPUs of each rank, among the pod's\n"
	"  --port P             pod 0's port for the pods (default 29400)\n"
	"  --start-timeout S    how long the pods have to come up and join\n"
	"                       (default 600: images are pulled)\n"
	"Exit status:\n"
	"  0    the manifest was printed; node: every rank of the pod exited 0\n"
	"  1    node: a rank of the pod failed or was stopped, or the pod could\n"
	"       not join the job (pod 0 exits with herd launch's statuses: the\n"
	"       first failed rank's, 125, 126/127, 128+S)\n"
	"  2    a usage error, or a job Kubernetes would refuse (said before any\n"
	"       YAML is printed)\n";

static int usage(const char *fmt, const char *arg)
{
	return shell_usage_error("k8s", fmt, arg);
}

/* herd k8s manifest ARGS: herd launch --k8s --dry-run ARGS, one parser for both. */
static int manifest(int argc, char **argv)
{
	char **largv = calloc((size_t)argc + 4, sizeof(char *));
	int rc;

	if (largv == NULL) {
		fprintf(stderr, "herd k8s: out of memory\n");
		return SHELL_EXIT_FAILURE;
	}
	largv[0] = "launch";
	largv[1] = "--k8s";
	largv[2] = "--dry-run";
	for (int i = 0; i < argc; i++)
		largv[3 + i] = argv[i];
	rc = cmd_launch(argc + 3, largv);
	free(largv);
	/* herd launch's own failures are 125: a bad job, said before any YAML. */
	return rc == SHELL_EXIT_OK ? SHELL_EXIT_OK : SHELL_EXIT_USAGE;
}

/* This pod's node: connects to pod 0 (retrying while its name does not
 * resolve or it does not listen yet), then runs its ranks. */
static int run_node(const char *addr, const char *secret, const char *me, int start_s)
{
	time_t until = time(NULL) + start_s;
	static const int stops[] = { SIGTERM, SIGINT, SIGHUP };
	herd_status st;
	bool ok = false;
	int fd = -1, stop_fd;

	/* Kubernetes stops a pod with SIGTERM (to its first process, which
	 * has no default actions): while it waits for pod 0, it ends; after,
	 * its ranks are stopped as a launcher's stop would stop them. */
	stop_fd = shell_signals_catch("herd k8s node", stops, sizeof(stops) / sizeof(*stops));
	for (;;) {
		struct pollfd pf = { .fd = stop_fd, .events = POLLIN };

		st = herd_agent_connect(&fd, addr, secret, me, 10000);
		/* Pod 0 not up yet (its name not known yet, or not listening):
		 * again, until the start timeout; another secret: no. */
		if (st == HERD_OK || st == HERD_EAUTH || time(NULL) >= until)
			break;
		if (stop_fd >= 0 && poll(&pf, 1, 1000) > 0) {
			fprintf(stderr, "herd k8s node: %s: stopped while waiting for pod 0\n", me);
			return SHELL_EXIT_FAILURE;
		}
		if (stop_fd < 0)
			sleep(1);
	}
	if (st != HERD_OK) {
		fprintf(stderr, "herd k8s node: %s cannot join the job at %s: %s\n", me, addr,
			shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	signal(SIGPIPE, SIG_IGN);
	st = herd_agent_exec_ranks(fd, fd, stop_fd, &ok);
	close(fd);
	if (st == HERD_OK && ok)
		return SHELL_EXIT_OK;
	/* A pod whose ranks did not all exit 0 fails, so that the Job runs it
	 * again with the others. */
	if (st != HERD_OK)
		fprintf(stderr, "herd k8s node: %s\n", shell_last_error());
	else
		fprintf(stderr, "herd k8s node: %s: the job failed (its launcher, in pod 0, "
			"says why)\n", me);
	return SHELL_EXIT_FAILURE;
}

struct node_args {
	const char *job, *secret_file, *gpus, *port;
	int nodes, per_node, start_s;
};

/* herd k8s node's options into a; the index of the command, or -1 (said). */
static int node_options(int argc, char **argv, struct node_args *a)
{
	int i, r;
	const char *v;

	for (i = 0; i < argc; i++) {
		const char *arg = argv[i];
		int *count = NULL, lo = 1, hi = 100000;

		if (strcmp(arg, "--") == 0)
			return i + 1;
		if (arg[0] != '-')
			return i;
		if ((r = shell_option_value(argc, argv, &i, "--job", &a->job)) != 0) {
			v = a->job;
		} else if ((r = shell_option_value(argc, argv, &i, "--secret-file",
						   &a->secret_file)) != 0) {
			v = a->secret_file;
		} else if ((r = shell_option_value(argc, argv, &i, "--gpus-per-rank", &a->gpus)) != 0) {
			v = a->gpus;
		} else if ((r = shell_option_value(argc, argv, &i, "--port", &a->port)) != 0) {
			v = a->port;
		} else if ((r = shell_option_value(argc, argv, &i, "--nodes", &v)) != 0) {
			count = &a->nodes;
		} else if ((r = shell_option_value(argc, argv, &i, "--per-node", &v)) != 0) {
			count = &a->per_node;
			hi = 1024;
		} else if ((r = shell_option_value(argc, argv, &i, "--start-timeout", &v)) != 0) {
			count = &a->start_s;
			hi = 86400;
		} else {
			usage("unrecognized option '%s'", arg);
			return -1;
		}
		if (r < 0 || v[0] == '\0') {
			usage("option '%s' needs a value", arg);
			return -1;
		}
		if (count != NULL && shell_parse_int(v, lo, hi, count) != 0) {
			char msg[128];

			snprintf(msg, sizeof(msg), "%.40s %%s: expected a whole number from %d to %d",
				 arg, lo, hi);
			usage(msg, v);
			return -1;
		}
	}
	return i;
}

/*
 * Pod 0's launcher, here, over the pods that join it: herd launch --pods;
 * then pod 0's own node (pid) is ended too, even one still waiting to join
 * a launcher that failed before it listened.  herd launch's status.
 */
static int launch_pods(const struct node_args *a, const char *pod0, char **cmd, int ncmd,
		       pid_t pid)
{
	char pods[300], np[32], nr[32], st[32];
	char **largv = calloc((size_t)ncmd + 16, sizeof(char *));
	int la = 0, status = 0, rc = SHELL_EXIT_FAILURE;

	if (largv == NULL) {
		fprintf(stderr, "herd k8s node: out of memory\n");
	} else {
		snprintf(pods, sizeof(pods), "%s-[0-%d].%s", a->job, a->nodes - 1, a->job);
		snprintf(np, sizeof(np), "%d", a->nodes * a->per_node);
		snprintf(nr, sizeof(nr), "%d", a->per_node);
		snprintf(st, sizeof(st), "%d", a->start_s);
		setenv("HERD_LAUNCH_ADDR", pod0, 1);
		setenv("HERD_LAUNCH_BIND", "0.0.0.0", 0);
		largv[la++] = "launch";
		largv[la++] = "--pods";
		largv[la++] = pods;
		largv[la++] = "-n";
		largv[la++] = np;
		largv[la++] = "--per-node";
		largv[la++] = nr;
		largv[la++] = "--start-timeout";
		largv[la++] = st;
		if (a->gpus != NULL) {
			largv[la++] = "--gpus-per-rank";
			largv[la++] = (char *)a->gpus;
		}
		largv[la++] = "--";
		for (int k = 0; k < ncmd; k++)
			largv[la++] = cmd[k];
		largv[la] = NULL;
		rc = cmd_launch(la, largv);
		free(largv);
	}
	kill(pid, SIGTERM);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return rc;
}

static int node(int argc, char **argv)
{
	struct node_args a = { .start_s = 600, .port = "29400" };
	const char *index = getenv("JOB_COMPLETION_INDEX");
	char secret[HERD_STORE_SECRET_BUF], me[256], pod0[256], addr[300];
	int i = 0, port, first, rc;
	pid_t pid;

	first = node_options(argc, argv, &a);
	if (first < 0)
		return SHELL_EXIT_USAGE;
	if (shell_parse_int(a.port, 1, 65535, &port) != 0)
		return usage("--port %s: expected a port from 1 to 65535", a.port);
	if (first >= argc)
		return usage("%s", "no command for the ranks (herd k8s node ... -- CMD)");
	if (a.job == NULL || a.nodes == 0 || a.per_node == 0 || a.secret_file == NULL)
		return usage("%s", "node needs --job, --nodes, --per-node and --secret-file (the "
			     "manifest's command gives them)");
	if (index == NULL || shell_parse_int(index, 0, a.nodes - 1, &i) != 0)
		return usage("JOB_COMPLETION_INDEX is %s: run this in a pod of herd k8s "
			     "manifest's Job, whose index Kubernetes sets", index != NULL ? index
			     : "not set");
	/* The launcher in pod 0 reads the same file and port. */
	setenv("HERD_JOB_SECRET_FILE", a.secret_file, 1);
	setenv("HERD_K8S_PORT", a.port, 1);
	if (herd_k8s_secret(secret) != HERD_OK)
		return usage("%s", shell_last_error());
	/* An Indexed Job's pod i is NAME-i; the Service makes NAME-i.NAME its name. */
	snprintf(me, sizeof(me), "%s-%d.%s", a.job, i, a.job);
	snprintf(pod0, sizeof(pod0), "%s-0.%s", a.job, a.job);
	snprintf(addr, sizeof(addr), "%s:%s", pod0, a.port);
	if (i > 0)
		return run_node(addr, secret, me, a.start_s);
	/* Pod 0: its node in a child, the launcher here. */
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		perror("herd k8s node: fork");
		return SHELL_EXIT_FAILURE;
	}
	if (pid == 0)
		_exit(run_node(addr, secret, me, a.start_s));
	rc = launch_pods(&a, pod0, argv + first, argc - first, pid);
	explicit_bzero(secret, sizeof(secret));
	return rc;
}

int cmd_k8s(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(k8s_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? SHELL_EXIT_USAGE : SHELL_EXIT_OK;
	}
	if (strcmp(argv[1], "manifest") == 0)
		return manifest(argc - 2, argv + 2);
	if (strcmp(argv[1], "node") == 0)
		return node(argc - 2, argv + 2);
	return usage("unknown action '%s' (manifest, node)", argv[1]);
}
