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
 * Not done: a tree fan-out (herd exec relaying to a subtree of hosts).
 * The launcher holds one ssh process and three descriptors per node,
 * which suits jobs up to a few hundred hosts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000
/* Room for the remote command line: the quoted program and its arguments. */
#define REMOTE_CMD_MAX 4200

static herd_status ssh_resolve(const herd_job_spec *spec, herd__launch_node **nodes,
			       size_t *nnodes)
{
	if (spec->where == HERD_JOB_HOSTFILE)
		return herd__remote_nodes_from_hostfile(spec->hosts, nodes, nnodes);
	return herd__remote_nodes_from_hostlist(spec->hosts, nodes, nnodes);
}

static herd_status ssh_start(const herd__launch_ctx *ctx, herd__launch_channel *channels)
{
	enum { FIXED_ARGS = 16 };
	const char *argv[HERD__REMOTE_MAX_ARGS + FIXED_ARGS + 1];
	const char *ssh = getenv("HERD_SSH");
	char extra[4096], timeout[48], remote[REMOTE_CMD_MAX], quoted[REMOTE_CMD_MAX - 32];
	int ms = ctx->spec->connect_timeout_ms > 0 ? ctx->spec->connect_timeout_ms
						   : DEFAULT_CONNECT_TIMEOUT_MS;
	size_t nextra = 0, n = 0, host_at;
	herd_status st = HERD_OK;

	for (size_t i = 0; i < ctx->nnodes; i++)
		channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	if (!herd__remote_shell_quote(ctx->herd_program, quoted, sizeof(quoted)))
		return herd__error(HERD_EINVAL, "herd_program \"%.60s...\" is too long",
				   ctx->herd_program);
	snprintf(remote, sizeof(remote), "%s exec --stdio", quoted);
	/* ssh counts whole seconds; round up so the limit is never shorter. */
	snprintf(timeout, sizeof(timeout), "ConnectTimeout=%d", (ms + 999) / 1000);

	argv[n++] = ssh != NULL && ssh[0] != '\0' ? ssh : "ssh";
	HERD_CHECK(herd__remote_env_args("HERD_SSH_ARGS", extra, sizeof(extra), argv + n,
					 HERD__REMOTE_MAX_ARGS, &nextra));
	n += nextra;
	argv[n++] = "-o";
	argv[n++] = "BatchMode=yes";
	argv[n++] = "-o";
	argv[n++] = timeout;
	argv[n++] = "-o";
	argv[n++] = "ServerAliveInterval=5";
	argv[n++] = "-o";
	argv[n++] = "ServerAliveCountMax=3";
	argv[n++] = "-T";
	/* Host names are checked not to start with '-'; "--" makes sure. */
	argv[n++] = "--";
	host_at = n++;
	argv[n++] = remote;
	argv[n] = NULL;

	for (size_t i = 0; i < ctx->nnodes; i++) {
		argv[host_at] = ctx->nodes[i].host;
		st = herd__launch_spawn_helper(argv, NULL, &channels[i]);
		if (st != HERD_OK) {
			herd__error_wrap(st, "node %s: starting ssh: ", ctx->nodes[i].host);
			break;
		}
	}
	if (st != HERD_OK)
		for (size_t i = 0; i < ctx->nnodes; i++)
			herd__remote_channel_abort(&channels[i], 1000);
	return st;
}

const herd__launch_backend herd__launch_backend_ssh = {
	.name = "ssh",
	.remote = true,
	.resolve = ssh_resolve,
	.start = ssh_start,
};
