/*
 * sdk/launch/pods.c - the backend of nodes that start themselves: the
 * pods of a Kubernetes Indexed Job (herd/k8s.h).  Nothing is started from
 * here: every pod runs `herd k8s node`, whose `herd exec` connects back to
 * this launcher (in pod 0) at the pods' port, proves the job's secret and
 * names itself by its stable name (JOB-INDEX.SERVICE), as srun's tasks do
 * under the Slurm backend (connect.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "connect.h"
#include "launch_internal.h"
#include "net.h"
#include "param.h"
#include "remote.h"

/* The pods: spec->hosts, their names as a hostlist (job-[0-3].job). */
static herd_status pods_resolve(const herd_job_spec *spec, herd__launch_node **nodes,
				size_t *nnodes)
{
	return herd__remote_nodes_from_hostlist(spec->hosts, nodes, nnodes);
}

/* Waits for every pod's `herd exec` on the pods' port, until the start deadline. */
static herd_status pods_start(const herd__launch_ctx *ctx, herd__launch_channel *channels)
{
	long port = 0;
	int lfd = -1;
	herd_status st;

	for (size_t i = 0; i < ctx->nnodes; i++)
		channels[i] = (herd__launch_channel)HERD__LAUNCH_CHANNEL_INIT;
	HERD_CHECK(herd__param_int(HERD__P_K8S_PORT, &port));
	st = herd__net_listen(&lfd, ctx->bind_host, (int)port);
	if (st != HERD_OK)
		return herd__error_wrap(st, "the pods' port %s:%ld (HERD_K8S_PORT): ",
					ctx->bind_host, port);
	herd__log_debug("launch: job %s waits for %zu pods on port %ld", ctx->job_id,
			ctx->nnodes, port);
	st = herd__connect_accept(lfd, ctx->secret, ctx->nodes, ctx->nnodes, channels, NULL, -1,
				  NULL, ctx->deadline);
	close(lfd);
	if (st != HERD_OK)
		return herd__error_wrap(st, "launch --k8s: ");
	return HERD_OK;
}

const herd__launch_backend herd__launch_backend_pods = {
	.name = "k8s",
	.remote = true,
	.resolve = pods_resolve,
	.start = pods_start,
};
