/*
 * sdk/launch/ssh.c - the ssh backend: nodes from a hostlist expression or
 * a hostfile, and on each one `herd exec --stdio` started through the
 * OpenSSH client, its stdin and stdout the node's channel:
 *
 *   ssh [$HERD_SSH_ARGS] -o BatchMode=yes -o ConnectTimeout=S
 *       -o ServerAliveInterval=5 -o ServerAliveCountMax=3 -T -- HOST
 *       'HERD_PROGRAM' exec --stdio
 *
 * Every node's ssh is started at once and the launcher's one poll loop
 * waits for all of them, so starting a job on N hosts costs about one ssh
 * connection, not N in a row.  BatchMode makes a host that wants a
 * password fail instead of prompting; ConnectTimeout bounds an
 * unreachable one, whose ssh then exits 255 with its reason on stderr,
 * which the launcher quotes with the host's name.  ServerAlive probes
 * notice a host that vanished mid-job within about 15 s.
 *
 * HERD_SSH_ARGS adds client options first, so they win over the defaults
 * above (ssh keeps the first value of an option): "-F ~/cluster.ssh",
 * "-l user", "-o ProxyJump=gw".  The ssh program is $HERD_SSH, else "ssh"
 * in PATH.
 *
 * A tree beyond a few dozen hosts.  With more than HERD_SSH_TREE_MIN hosts
 * (default 32) the launcher starts ssh only to HERD_SSH_TREE_WIDTH
 * first-level nodes (default: the square root of the host count, at
 * least 2), and each of their `herd exec` starts `herd exec` on its
 * children with this same ssh command line, relaying spec frames down and
 * events up (launch_internal.h, "Tree fan-out").  The launcher then holds
 * width channels instead of one per host, and a 1000-host job is two
 * levels deep.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000

static herd_status ssh_resolve(const herd_job_spec *spec, herd__launch_node **nodes,
			       size_t *nnodes)
{
	if (spec->where == HERD_JOB_HOSTFILE)
		return herd__remote_nodes_from_hostfile(spec->hosts, nodes, nnodes);
	return herd__remote_nodes_from_hostlist(spec->hosts, nodes, nnodes);
}

herd_status herd__ssh_cmd_build(herd__ssh_cmd *c, int connect_timeout_ms, const char *program,
				const char *args)
{
	const char *ssh = herd__param_str(HERD__P_SSH);
	int ms = connect_timeout_ms > 0 ? connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	size_t nextra = 0, n = 0;

	if (!herd__remote_shell_quote(program, c->quoted, sizeof(c->quoted)))
		return herd__error(HERD_EINVAL, "herd_program \"%.60s...\" is too long", program);
	n = (size_t)snprintf(c->remote, sizeof(c->remote), "%s %s", c->quoted, args);
	if (n >= sizeof(c->remote))
		return herd__error(HERD_EINVAL, "the remote command line (%zu bytes) is longer than "
				   "%zu", n, sizeof(c->remote) - 1);
	n = 0;
	/* ssh counts whole seconds; round up so the limit is never shorter. */
	snprintf(c->timeout, sizeof(c->timeout), "ConnectTimeout=%d", (ms + 999) / 1000);

	c->argv[n++] = ssh != NULL ? ssh : "ssh";
	HERD_CHECK(herd__param_words(HERD__P_SSH_ARGS, c->extra, sizeof(c->extra), c->argv + n,
				     HERD__REMOTE_MAX_ARGS, &nextra));
	n += nextra;
	c->argv[n++] = "-o";
	c->argv[n++] = "BatchMode=yes";
	c->argv[n++] = "-o";
	c->argv[n++] = c->timeout;
	c->argv[n++] = "-o";
	c->argv[n++] = "ServerAliveInterval=5";
	c->argv[n++] = "-o";
	c->argv[n++] = "ServerAliveCountMax=3";
	c->argv[n++] = "-T";
	/* Host names are checked not to start with '-'; "--" makes sure. */
	c->argv[n++] = "--";
	c->host_at = n++;
	c->argv[n++] = c->remote;
	c->argv[n] = NULL;
	return HERD_OK;
}

herd_status herd__ssh_tree_width(size_t n, long *width)
{
	long min, sq = 2;

	HERD_CHECK(herd__param_int(HERD__P_SSH_TREE_MIN, &min));
	while (sq * sq < (long)n)
		sq++;
	*width = sq;    /* HERD_SSH_TREE_WIDTH's default: the square root */
	HERD_CHECK(herd__param_int(HERD__P_SSH_TREE_WIDTH, width));
	if (n <= (size_t)min)
		*width = (long)n;
	return HERD_OK;
}

herd_status herd__remote_relay_words(const char *program, const char **words, size_t max,
				     size_t *n)
{
	const char *ssh = herd__param_str(HERD__P_SSH);
	const char *ssh_args = herd__param_str(HERD__P_SSH_ARGS);

	*n = 0;
	if (max < 6)
		return herd__error(HERD_EINVAL, "the herd program or the ssh settings are too long");
	words[(*n)++] = "--program";
	words[(*n)++] = program;
	if (ssh != NULL) {
		words[(*n)++] = "--ssh";
		words[(*n)++] = ssh;
	}
	if (ssh_args != NULL) {
		words[(*n)++] = "--ssh-args";
		words[(*n)++] = ssh_args;
	}
	return HERD_OK;
}

/* A word as the remote shell is to read it: as it is when it needs no quotes. */
static bool shell_word(const char *w, char *out, size_t cap)
{
	bool plain = w[0] != '\0';

	for (const char *c = w; *c != '\0' && plain; c++)
		plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			(*c >= '0' && *c <= '9') || strchr("-_./:=,@%+", *c) != NULL;
	if (!plain)
		return herd__remote_shell_quote(w, out, cap);
	return (size_t)snprintf(out, cap, "%s", w) < cap;
}

/* ssh to run->hosts[0] running run's command. */
static herd_status ssh_run(const herd__launch_run *run, herd__launch_channel *ch)
{
	herd__ssh_cmd *c = NULL;
	char *args = NULL;
	size_t len = 0, cap = HERD__SSH_REMOTE_MAX;
	herd_status st;

	*ch = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	HERD_CHECK(herd__calloc(&c, 1, sizeof(*c), "the ssh command line"));
	HERD_CHECK_GOTO(herd__calloc(&args, cap, 1, "the ssh command line"), st, out);
	for (size_t i = 0; i < run->nwords; i++) {
		if (len + 1 >= cap || !shell_word(run->words[i], args + len + (i > 0),
						  cap - len - (i > 0))) {
			st = herd__error(HERD_EINVAL, "the remote command line is longer than %zu "
					 "bytes", cap - 1);
			goto out;
		}
		if (i > 0)
			args[len] = ' ';
		len += strlen(args + len);
	}
	HERD_CHECK_GOTO(herd__ssh_cmd_build(c, run->connect_timeout_ms, run->program, args), st,
			out);
	c->argv[c->host_at] = run->hosts[0];
	st = herd__launch_spawn_helper(c->argv, NULL, ch);
out:
	free(args);
	free(c);
	return st;
}

static herd_status ssh_cmd_build(const herd__launch_ctx *ctx, herd__ssh_cmd *c)
{
	return herd__ssh_cmd_build(c, ctx->spec->connect_timeout_ms, ctx->herd_program,
				   "exec --stdio");
}

static herd_status ssh_start(const herd__launch_ctx *ctx, herd__launch_channel *channels)
{
	herd__ssh_cmd *c = NULL;
	herd_status st = HERD_OK;

	for (size_t i = 0; i < ctx->nnodes; i++)
		channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	HERD_CHECK(herd__calloc(&c, 1, sizeof(*c), "the ssh command line"));
	HERD_CHECK_GOTO(ssh_cmd_build(ctx, c), st, out);
	for (size_t i = 0; i < ctx->nnodes; i++) {
		if (ctx->direct != NULL && !ctx->direct[i])
			continue;  /* a relay above it starts it */
		c->argv[c->host_at] = ctx->nodes[i].host;
		st = herd__launch_spawn_helper(c->argv, NULL, &channels[i]);
		if (st != HERD_OK) {
			herd__error_wrap(st, "node %s: starting ssh: ", ctx->nodes[i].host);
			break;
		}
	}
	if (st != HERD_OK)
		for (size_t i = 0; i < ctx->nnodes; i++)
			herd__remote_channel_abort(&channels[i], 1000);
out:
	free(c);
	return st;
}

static herd_status ssh_tree(const herd__launch_ctx *ctx, herd__launch_tree *t)
{
	herd__ssh_cmd *c = NULL;
	long width;
	size_t n = 0;
	herd_status st;

	memset(t, 0, sizeof(*t));
	HERD_CHECK(herd__ssh_tree_width(ctx->nnodes, &width));
	if (width >= (long)ctx->nnodes)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&c, 1, sizeof(*c), "the ssh command line"));
	HERD_CHECK_GOTO(ssh_cmd_build(ctx, c), st, out);
	HERD_CHECK_GOTO(herd__calloc(&t->argv, c->host_at + 1, sizeof(char *),
				     "the relays' ssh command line"), st, out);
	for (; n < c->host_at; n++)
		HERD_CHECK_GOTO(herd__strdup(&t->argv[n], c->argv[n]), st, out);
	HERD_CHECK_GOTO(herd__strdup(&t->cmd, c->remote), st, out);
	t->width = (int)width;
out:
	if (st != HERD_OK)
		herd__launch_tree_free(t);
	free(c);
	return st;
}

const herd__launch_backend herd__launch_backend_ssh = {
	.name = "ssh",
	.remote = true,
	.resolve = ssh_resolve,
	.start = ssh_start,
	.tree = ssh_tree,
	.run = ssh_run,
};
