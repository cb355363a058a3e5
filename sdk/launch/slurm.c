/*
 * sdk/launch/slurm.c - the Slurm backend: the nodes of the allocation this
 * process runs in, and one srun step for the whole job that starts one
 * `herd exec` per node:
 *
 *   srun --nodes=K --ntasks=K --ntasks-per-node=1 --nodelist=LIST
 *        --kill-on-bad-exit=0 --input=none [--gres=gpu:N] [$HERD_SRUN_ARGS]
 *        HERD_PROGRAM exec --connect HOST:PORT
 *
 * srun merges every task's output into its own, so a node's stdio cannot
 * be its channel: each `herd exec` connects back to a port the launcher
 * listens on, proves it knows the job secret (which reaches it in srun's
 * environment, never on a command line) and names itself by
 * SLURMD_NODENAME (connect.h).  srun's own output (its errors, and any a
 * node's `herd exec` prints before it connects) is kept and quoted when a
 * node does not come up.
 *
 * The step asks for no CPUs or GPUs of its own (per-task requests that
 * salloc leaves in the environment are not passed on): Slurm then gives it
 * all of the job's on each node (a job with GPUs per task is the exception:
 * see step_gres), and `herd exec` plans the ranks' GPUs among those
 * SLURM_STEP_GPUS grants (herd_alloc reads the step's environment).
 * Outside an allocation the backend refuses: run under salloc or sbatch.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "connect.h"
#include "net.h"
#include "remote.h"
#include "topo/hostlist.h"

/* When the nodes did not all connect back: how long srun's last words are
 * waited for, and how long srun gets between SIGTERM and SIGKILL, so that
 * the error comes within a second of the start deadline. */
#define SAID_WAIT_MS 250
#define ABORT_WAIT_MS 500

extern char **environ;

/*
 * Reads Slurm's compressed count list ("2(x3),1": 2, 2, 2, 1) into
 * counts[0..n); it must give exactly n counts.
 */
static herd_status parse_counts(const char *var, const char *value, int *counts, size_t n)
{
	const char *p = value;
	size_t k = 0;

	while (*p != '\0') {
		long count, times = 1;
		char *end;

		if (!isdigit((unsigned char)*p))
			goto bad;
		errno = 0;
		count = strtol(p, &end, 10);
		if (errno != 0 || count < 0 || count > 1000000)
			goto bad;
		p = end;
		if (p[0] == '(' && p[1] == 'x') {
			if (!isdigit((unsigned char)p[2]))
				goto bad;
			times = strtol(p + 2, &end, 10);
			if (*end != ')' || times < 1 || (size_t)times > n - k)
				goto bad;
			p = end + 1;
		}
		for (long t = 0; t < times; t++) {
			if (k == n)
				return herd__error(HERD_EFORMAT, "%s=%s gives more counts than the %zu "
						   "nodes of the allocation", var, value, n);
			counts[k++] = (int)count;
		}
		if (*p == ',')
			p++;
		else if (*p != '\0')
			goto bad;
	}
	if (k != n)
		return herd__error(HERD_EFORMAT, "%s=%s gives %zu counts for the %zu nodes of the "
				   "allocation", var, value, k, n);
	return HERD_OK;
bad:
	return herd__error(HERD_EFORMAT, "%s=%s: column %zu: expected a count, "
			   "\"N(xM)\" or ','", var, value, (size_t)(p - value) + 1);
}

static herd_status slurm_resolve(const herd_job_spec *spec, herd__launch_node **nodes,
				 size_t *nnodes)
{
	const char *job = getenv("SLURM_JOB_ID");
	const char *list = getenv("SLURM_JOB_NODELIST");
	const char *tasks = getenv("SLURM_TASKS_PER_NODE");
	const char *cpus = getenv("SLURM_JOB_CPUS_PER_NODE");
	int *slots = NULL;
	herd_status st = HERD_OK;

	(void)spec;
	*nodes = NULL;
	*nnodes = 0;
	if (job == NULL || job[0] == '\0')
		return herd__error(HERD_EUNAVAIL,
				   "launch --slurm: not inside a Slurm allocation (SLURM_JOB_ID is "
				   "not set); run it under salloc or sbatch, e.g. "
				   "salloc -N2 --ntasks-per-node=4 herd launch --slurm ...");
	if (list == NULL || list[0] == '\0')
		list = getenv("SLURM_NODELIST");
	if (list == NULL || list[0] == '\0')
		return herd__error(HERD_EUNAVAIL, "launch --slurm: Slurm job %s: neither "
				   "SLURM_JOB_NODELIST nor SLURM_NODELIST is set", job);
	st = herd__remote_nodes_from_hostlist(list, nodes, nnodes);
	if (st != HERD_OK)
		return herd__error_wrap(st, "SLURM_JOB_NODELIST: ");
	/* Slots: the tasks Slurm planned per node, else its CPUs there. */
	if ((tasks == NULL || tasks[0] == '\0') && (cpus == NULL || cpus[0] == '\0'))
		return HERD_OK;
	HERD_CHECK_GOTO(herd__calloc(&slots, *nnodes, sizeof(int), "the nodes' slots"), st, fail);
	if (tasks != NULL && tasks[0] != '\0')
		st = parse_counts("SLURM_TASKS_PER_NODE", tasks, slots, *nnodes);
	else
		st = parse_counts("SLURM_JOB_CPUS_PER_NODE", cpus, slots, *nnodes);
	if (st != HERD_OK)
		goto fail;
	for (size_t i = 0; i < *nnodes; i++)
		(*nodes)[i].slots = slots[i];
	free(slots);
	return HERD_OK;
fail:
	free(slots);
	herd__launch_nodes_free(*nodes, *nnodes);
	*nodes = NULL;
	*nnodes = 0;
	return st;
}

/*
 * Whether srun would read name=value as a per-task request (salloc's
 * --gpus-per-task=1 leaves SLURM_GPUS_PER_TASK=1 behind): the step has one
 * task per node, and such a request would shrink it to one task's share.
 */
static bool per_task_request(const char *entry)
{
	const char *eq = strchr(entry, '=');
	static const char tail[] = "_PER_TASK";
	size_t len = eq != NULL ? (size_t)(eq - entry) : 0;

	return strncmp(entry, "SLURM_", 6) == 0 && len >= sizeof(tail) - 1 &&
	       memcmp(entry + len - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0;
}

/*
 * environ for srun: HERD_JOB_SECRET set to secret, per-task requests
 * dropped.  The array and the secret's entry are owned.
 */
static herd_status env_with_secret(const char *secret, char ***out, char **entry)
{
	size_t n = 0, k = 0;

	*out = NULL;
	if (asprintf(entry, "HERD_JOB_SECRET=%s", secret) < 0) {
		*entry = NULL;
		return herd__error(HERD_ENOMEM, "out of memory for srun's environment");
	}
	while (environ[n] != NULL)
		n++;
	HERD_CHECK(herd__calloc(out, n + 2, sizeof(char *), "srun's environment"));
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "HERD_JOB_SECRET=", 16) != 0 && !per_task_request(environ[i]))
			(*out)[k++] = environ[i];
	(*out)[k++] = *entry;
	(*out)[k] = NULL;
	return HERD_OK;
}

/*
 * The nodes of hosts[0..n) that Slurm has taken out of service: why[i]
 * (allocated; the caller frees each) is "Slurm has it drained: REASON"
 * for a node whose state is drained, draining, down, fail or failing, and
 * NULL for the others.  sinfo (HERD_SINFO), within 5 s.
 * An sinfo that cannot run or says nothing useful leaves every why[i]
 * NULL: the question is asked after a failure, which stands either way.
 */
void herd__slurm_unfit(char *const *hosts, size_t n, char **why)
{
	const char *prog = herd__param_str(HERD__P_SINFO);
	char *list = NULL, line[1024];
	const char *argv[] = { prog != NULL && prog[0] != '\0' ? prog : "sinfo", "-h", "-N",
			       "-n", NULL, "-o", "%N|%T|%E", NULL };
	herd__buf out;
	int status;
	size_t at = 0;

	for (size_t i = 0; i < n; i++)
		why[i] = NULL;
	herd__buf_init(&out, 0);
	if (n == 0 || herd__hostlist_compress(&list, (const char *const *)hosts, n) != HERD_OK)
		goto out;
	argv[4] = list;
	if (herd__launch_capture("sinfo", argv, 5000, &out, &status) != HERD_OK &&
	    out.len == 0)
		goto out;
	/* "node2|drained|repair" lines; a node's several partitions repeat it. */
	while (at < out.len) {
		size_t e = at;
		char *state, *reason;

		while (e < out.len && out.data[e] != '\n')
			e++;
		snprintf(line, sizeof(line), "%.*s", (int)(e - at), (const char *)out.data + at);
		at = e + 1;
		if ((state = strchr(line, '|')) == NULL || (reason = strchr(state + 1, '|')) == NULL)
			continue;
		*state++ = '\0';
		*reason++ = '\0';
		if (strncmp(state, "drain", 5) != 0 && strncmp(state, "down", 4) != 0 &&
		    strncmp(state, "fail", 4) != 0)
			continue;
		for (size_t i = 0; i < n; i++)
			if (why[i] == NULL && strcmp(hosts[i], line) == 0 &&
			    asprintf(&why[i], "Slurm has it %s: %s", state,
				     reason[0] != '\0' ? reason : "no reason given") < 0)
				why[i] = NULL;
	}
out:
	herd__buf_free(&out);
	free(list);
}

/*
 * Slurm's address of node host (its NodeAddr, sinfo's %o) into addr, for
 * a node whose name does not resolve here.  HERD_ENOTFOUND when sinfo
 * (HERD_SINFO, within 5 s) does not say it.
 */
herd_status herd__slurm_node_addr(const char *host, char *addr, size_t cap)
{
	const char *prog = herd__param_str(HERD__P_SINFO);
	const char *argv[] = { prog != NULL && prog[0] != '\0' ? prog : "sinfo", "-h", "-N",
			       "-n", host, "-o", "%N|%o", NULL };
	herd__buf out;
	size_t at = 0;
	int status;

	addr[0] = '\0';
	herd__buf_init(&out, 0);
	(void)herd__launch_capture("sinfo", argv, 5000, &out, &status);
	while (at < out.len && addr[0] == '\0') {
		size_t e = at;
		char line[512], *bar;

		while (e < out.len && out.data[e] != '\n')
			e++;
		snprintf(line, sizeof(line), "%.*s", (int)(e - at), (const char *)out.data + at);
		at = e + 1;
		bar = strchr(line, '|');
		if (bar != NULL && (size_t)(bar - line) == strlen(host) &&
		    strncmp(line, host, strlen(host)) == 0 && bar[1] != '\0')
			snprintf(addr, cap, "%s", bar + 1);
	}
	herd__buf_free(&out);
	return addr[0] != '\0' ? HERD_OK
	       : herd__error(HERD_ENOTFOUND, "Slurm's sinfo does not say node %s's address", host);
}

/* What srun said, on one line, for a message. */
static void srun_says(herd__buf *out, char *buf, size_t cap)
{
	size_t n = out->len - out->off;
	const char *p = (const char *)out->data + out->off;

	while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == ' '))
		n--;
	if (n > cap - 1) {
		p += n - (cap - 1);
		n = cap - 1;
	}
	if (n > 0)
		memcpy(buf, p, n);   /* nothing said: out holds no data at all */
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
}

/*
 * A job allocated with GPUs per task (salloc --gpus-per-task=G) hands each
 * step G GPUs per task unless the step asks otherwise, and this step has
 * one task per node: it asks for G times the node's tasks (the fewest of
 * any node, which every node has) with --gres=gpu:N.  false when the job
 * did not ask per task.
 */
static bool step_gres(const herd__launch_ctx *ctx, char *out, size_t cap)
{
	const char *v = getenv("SLURM_GPUS_PER_TASK");
	long per_task, tasks = 0;
	char *end;

	if (v == NULL || !isdigit((unsigned char)v[0]))
		return false;
	per_task = strtol(v, &end, 10);
	if (*end != '\0' || per_task < 1 || per_task > 1024)
		return false;
	for (size_t i = 0; i < ctx->nnodes; i++)
		if (ctx->nodes[i].slots > 0 && (tasks == 0 || ctx->nodes[i].slots < tasks))
			tasks = ctx->nodes[i].slots;
	if (tasks == 0)
		return false;
	snprintf(out, cap, "--gres=gpu:%ld", per_task * tasks);
	return true;
}

/* Most words of a command after the program. */
#define SRUN_MAX_WORDS 64

/*
 * srun's command line for a step of one task on each of hosts[0..n):
 *
 *   srun --nodes=N --ntasks=N --ntasks-per-node=1 --nodelist=LIST
 *        --kill-on-bad-exit=0 --input=all|none [--label] [GRES]
 *        [$HERD_SRUN_ARGS] PROGRAM WORDS...
 */
typedef struct srun_cmd {
	const char *argv[HERD__REMOTE_MAX_ARGS + 16 + SRUN_MAX_WORDS + 1];
	char extra[4096], nodes[64], ntasks[64];
	char *nodelist, *nodelist_arg;
} srun_cmd;

static void srun_cmd_free(srun_cmd *c)
{
	free(c->nodelist);
	free(c->nodelist_arg);
	c->nodelist = c->nodelist_arg = NULL;
}

static herd_status srun_cmd_build(srun_cmd *c, const char *const *hosts, size_t n, bool input,
				  bool label, const char *gres, const char *program,
				  const char *const *words, size_t nwords)
{
	const char *srun = herd__param_str(HERD__P_SRUN);
	size_t k = 0, nextra = 0;

	memset(c, 0, sizeof(*c));
	if (nwords > SRUN_MAX_WORDS)
		return herd__error(HERD_EINVAL, "srun's command has %zu words, more than %d",
				   nwords, SRUN_MAX_WORDS);
	HERD_CHECK(herd__hostlist_compress(&c->nodelist, hosts, n));
	if (asprintf(&c->nodelist_arg, "--nodelist=%s", c->nodelist) < 0) {
		c->nodelist_arg = NULL;
		srun_cmd_free(c);
		return herd__error(HERD_ENOMEM, "out of memory for srun's arguments");
	}
	snprintf(c->nodes, sizeof(c->nodes), "--nodes=%zu", n);
	snprintf(c->ntasks, sizeof(c->ntasks), "--ntasks=%zu", n);
	c->argv[k++] = srun != NULL && srun[0] != '\0' ? srun : "srun";
	c->argv[k++] = c->nodes;
	c->argv[k++] = c->ntasks;
	c->argv[k++] = "--ntasks-per-node=1";
	c->argv[k++] = c->nodelist_arg;
	c->argv[k++] = "--kill-on-bad-exit=0";
	c->argv[k++] = input ? "--input=all" : "--input=none";
	if (label)
		c->argv[k++] = "--label";
	if (gres != NULL)
		c->argv[k++] = gres;
	if (herd__param_words(HERD__P_SRUN_ARGS, c->extra, sizeof(c->extra), c->argv + k,
			      HERD__REMOTE_MAX_ARGS, &nextra) != HERD_OK) {
		srun_cmd_free(c);
		return HERD_EINVAL;
	}
	k += nextra;
	c->argv[k++] = program;
	for (size_t i = 0; i < nwords; i++)
		c->argv[k++] = words[i];
	c->argv[k] = NULL;
	return HERD_OK;
}

/* One step running run's command on every host, its output labelled by task. */
static herd_status slurm_run(const herd__launch_run *run, herd__launch_channel *ch)
{
	srun_cmd c;
	herd_status st;

	*ch = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	HERD_CHECK(srun_cmd_build(&c, run->hosts, run->nhosts, run->input, true, NULL,
				  run->program, run->words, run->nwords));
	st = herd__launch_spawn_helper(c.argv, NULL, ch);
	srun_cmd_free(&c);
	return st;
}

static herd_status slurm_start(const herd__launch_ctx *ctx, herd__launch_channel *channels)
{
	char gres_arg[64], connect[HERD_NET_ADDR_LEN + 300];
	char local[HERD_NET_ADDR_LEN], *secret_entry = NULL;
	char **envp = NULL;
	const char **names = NULL;
	const char *words[] = { "exec", "--connect", connect };
	herd__buf out = { 0 };
	herd__launch_channel helper = HERD__LAUNCH_CHANNEL_INIT;
	srun_cmd *c = NULL;
	int lfd = -1, port = 0, outfd = -1;
	pid_t pid = 0;
	herd_status st;

	for (size_t i = 0; i < ctx->nnodes; i++)
		channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	HERD_CHECK_GOTO(herd__calloc(&names, ctx->nnodes, sizeof(*names), "the node list"), st,
			out);
	for (size_t i = 0; i < ctx->nnodes; i++)
		names[i] = ctx->nodes[i].host;
	HERD_CHECK_GOTO(herd__net_listen(&lfd, ctx->bind_host, 0), st, out);
	HERD_CHECK_GOTO(herd__net_local_addr(lfd, local, &port), st, out);
	snprintf(connect, sizeof(connect),
		 strchr(ctx->advertise_host, ':') != NULL ? "[%s]:%d" : "%s:%d",
		 ctx->advertise_host, port);
	HERD_CHECK_GOTO(herd__calloc(&c, 1, sizeof(*c), "srun's command line"), st, out);
	HERD_CHECK_GOTO(srun_cmd_build(c, names, ctx->nnodes, false, false,
				       step_gres(ctx, gres_arg, sizeof(gres_arg)) ? gres_arg : NULL,
				       ctx->herd_program, words, 3), st, out);

	HERD_CHECK_GOTO(env_with_secret(ctx->secret, &envp, &secret_entry), st, out);
	HERD_CHECK_GOTO(herd__launch_spawn_piped("srun", c->argv, envp, &pid, &outfd), st, out);
	herd__log_debug("launch: srun step for job %s on %s, nodes connect back to %s",
			ctx->job_id, c->nodelist, connect);
	st = herd__connect_accept(lfd, ctx->secret, ctx->nodes, ctx->nnodes, channels, "srun",
				  outfd, &out, ctx->deadline);
	if (st != HERD_OK) {
		char said[1024], why[1024];

		/* Let srun finish its sentence (it may be ending right now),
		 * a moment only: the start deadline has passed or srun ended. */
		int64_t said_by = herd__net_deadline(SAID_WAIT_MS);

		for (;;) {
			struct pollfd pf = { .fd = outfd, .events = POLLIN };
			char buf[4096];
			ssize_t got;
			int wait = herd__net_remaining_ms(said_by);

			/* A pause of 50 ms: srun has said all. */
			if (wait <= 0 || poll(&pf, 1, wait < 50 ? wait : 50) <= 0)
				break;
			got = read(outfd, buf, sizeof(buf));
			if (got <= 0)
				break;
			(void)herd__buf_append(&out, buf, (size_t)got);
		}
		herd__strlcpy(why, herd_last_error(), sizeof(why));
		srun_says(&out, said, sizeof(said));
		st = herd__error(st, "launch --slurm: %s%s%s", why, said[0] ? "; srun said: " : "",
				 said);
		goto out;
	}
	/* srun serves the whole job: the launcher reaps it, and quotes what
	 * it says, through the first node's channel. */
	channels[0].errfd = outfd;
	channels[0].pid = pid;
	outfd = -1;
	pid = 0;
out:
	if (pid > 0) {
		helper.pid = pid;
		helper.errfd = outfd;
		outfd = -1;
		herd__remote_channel_abort(&helper, ABORT_WAIT_MS);
	}
	if (outfd >= 0)
		close(outfd);
	if (lfd >= 0)
		close(lfd);
	herd__buf_free(&out);
	free(envp);
	free(secret_entry);
	if (c != NULL)
		srun_cmd_free(c);
	free(c);
	free(names);
	return st;
}

const herd__launch_backend herd__launch_backend_slurm = {
	.name = "slurm",
	.remote = true,
	.resolve = slurm_resolve,
	.start = slurm_start,
	.run = slurm_run,
	.one_step = true,
};
