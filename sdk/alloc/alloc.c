/*
 * sdk/alloc/alloc.c - herd_alloc: this node's GPUs for a request.  Reads
 * the leases and NVML's view, narrows to Slurm's grant, plans, and takes
 * the plan's leases; a lease lost to a concurrent job means re-reading and
 * re-planning, a bounded number of times.  The one place that reads the
 * environment for allocation (Slurm's variables).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_internal.h"

/* Lost races re-planned before giving up, beyond opts->wait_ms. */
#define RACE_RETRIES 25

herd_status herd_alloc_this_node(const herd_cluster *cluster, size_t *index)
{
	char host[256];
	size_t n;

	if (cluster == NULL || index == NULL)
		return herd__error(HERD_EINVAL, "herd_alloc_this_node: cluster and index must not "
						"be NULL");
	n = herd_cluster_node_count(cluster);
	if (n == 1) {
		*index = 0;
		return HERD_OK;
	}
	if (gethostname(host, sizeof(host)) != 0)
		return herd__error_errno(HERD_ESYS, errno, "cannot get the host name");
	host[sizeof(host) - 1] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (herd__alloc_host_matches(herd__cluster_node(cluster, i)->hostname, host)) {
			*index = i;
			return HERD_OK;
		}
	}
	return herd__error(HERD_ENOTFOUND, "none of the inventory's %zu nodes is this host (%s)", n,
			   host);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The request's include list, narrowed to Slurm's grant on this node. */
struct grant {
	const char **names;
	size_t n;
};

static herd_status slurm_grant(const herd_cluster *cluster, size_t local,
			       const herd_alloc_request *req, struct grant *out, bool *restricted)
{
	const herd_node *node = herd__cluster_node(cluster, local);
	size_t nnodes = herd_cluster_node_count(cluster), count = 0, *granted = NULL;
	herd_alloc_slurm_env env = { getenv("SLURM_JOB_ID"), getenv("SLURM_STEP_GPUS"),
			       getenv("SLURM_JOB_GPUS"), getenv("CUDA_VISIBLE_DEVICES") };
	herd_status st;
	bool inside = false;

	*restricted = false;
	HERD_CHECK(herd__calloc(&granted, node->ngpus + 1, sizeof(size_t), "Slurm's GPUs"));
	st = herd_alloc_slurm_gpus(node, &env, granted, &count, &inside);
	if (st != HERD_OK || !inside)
		goto out;
	*restricted = true;
	if (count == 0) {
		st = herd__error(
			HERD_ENORESOURCE,
			"Slurm job %s granted no GPU on this node (%s): "
			"ask for GPUs with --gpus or --gres=gpu:N",
			env.job_id,
			env.cuda_visible_devices != NULL
				? "CUDA_VISIBLE_DEVICES is empty"
				: "no SLURM_STEP_GPUS, SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES");
		goto out;
	}
	/* This node's granted GPUs (those the request also includes), and the
	 * other nodes whole: only this node's grant is known here. */
	HERD_CHECK_GOTO(herd__calloc(&out->names, count + nnodes, sizeof(char *), "Slurm's GPUs"),
			st, out);
	for (size_t i = 0; i < count; i++) {
		const herd_gpu *g = &node->gpus[granted[i]];
		bool keep = req->ninclude == 0;

		for (size_t k = 0; k < req->ninclude && !keep; k++)
			keep = herd__alloc_names_gpu(node, g, req->include[k]);
		if (keep)
			out->names[out->n++] = g->uuid;
	}
	for (size_t i = 0; i < nnodes; i++) {
		const char *h = herd__cluster_node(cluster, i)->hostname;
		bool keep = req->ninclude == 0;

		for (size_t k = 0; k < req->ninclude && !keep; k++)
			keep = herd__alloc_host_matches(h, req->include[k]);
		if (i != local && keep && h != NULL)
			out->names[out->n++] = h;
	}
	if (out->n == 0)
		st = herd__error(HERD_ENORESOURCE,
				 "none of the GPUs Slurm job %s granted on this "
				 "node is in the request's include list",
				 env.job_id);
out:
	free(granted);
	return st;
}

/* Takes the plan's leases: one node, this one. */
static herd_status hold(herd_plan *plan, size_t local, const herd_alloc_request *req,
			const herd_lease_opts *lo)
{
	const char **uuids = NULL;
	herd_lease *lease = NULL;
	herd_status st;

	if (herd_plan_node_count(plan) != 1 || plan->gpus[0].node != local)
		return herd__error(HERD_EINVAL,
				   "the plan uses %zu node%s and only this node's GPUs "
				   "can be leased here; plan with plan_only (each node's leases "
				   "are taken on that node by herd exec)",
				   herd_plan_node_count(plan),
				   herd_plan_node_count(plan) == 1 ? " other than this one" : "s");
	HERD_CHECK(herd__calloc(&uuids, herd_plan_gpu_count(plan), sizeof(char *), "a lease"));
	for (size_t i = 0; i < herd_plan_gpu_count(plan); i++)
		uuids[i] = plan->gpus[i].uuid;
	st = herd_lease_acquire(&lease, uuids, herd_plan_gpu_count(plan), req->shared, lo);
	free(uuids);
	if (st == HERD_OK)
		herd__plan_attach_lease(plan, lease);
	return st;
}

/* Whether waiting could help: some GPU is held (or its lease unknown). */
static bool any_in_use(const herd_alloc_gpu_status *status, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (status[i].state != HERD_LEASE_FREE)
			return true;
	return false;
}

herd_status herd_alloc(herd_plan **out, const herd_cluster *cluster,
		       const herd_alloc_request *request, const herd_alloc_opts *opts)
{
	static const herd_alloc_opts defaults = HERD_ALLOC_OPTS_INIT;
	herd_lease_opts lo = HERD_LEASE_OPTS_INIT;
	herd_alloc_request req;
	struct grant grant = { NULL, 0 };
	herd_alloc_gpu_status *status = NULL;
	size_t nstatus = 0, local = 0;
	bool have_local, restricted = false;
	unsigned int seed = (unsigned int)getpid() ^ (unsigned int)now_ms();
	long deadline;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_alloc: out is NULL");
	*out = NULL;
	if (cluster == NULL)
		return herd__error(HERD_EINVAL, "herd_alloc: cluster is NULL");
	if (opts == NULL)
		opts = &defaults;
	HERD__CHECK_VERSION("herd_alloc", opts, herd_alloc_opts, ALLOC_OPTS);
	if (opts->wait_ms < 0)
		return herd__error(HERD_EINVAL, "herd_alloc: wait_ms is %d; expected 0 or more",
				   opts->wait_ms);
	HERD_CHECK(herd__alloc_request_check(request));
	req = *request;
	lo.dir = opts->lease_dir;
	lo.job_id = opts->job_id;
	have_local = herd_alloc_this_node(cluster, &local) == HERD_OK;
	if (!have_local && !opts->plan_only)
		return herd__error_wrap(HERD_ENOTFOUND,
					"only this node's GPUs can be leased "
					"(plan_only plans without leases): ");
	if (have_local && !opts->ignore_slurm) {
		HERD_CHECK_GOTO(slurm_grant(cluster, local, request, &grant, &restricted), st, out);
		if (restricted) {
			req.include = grant.names;
			req.ninclude = grant.n;
		}
	}
	deadline = now_ms() + opts->wait_ms;
	for (int races = 0;;) {
		herd_plan *plan = NULL;

		if (have_local) {
			const herd_node *node = herd__cluster_node(cluster, local);

			free(status);
			status = NULL;
			st = herd_alloc_gpu_status_query(node, &lo, &status, &nstatus);
			if (st != HERD_OK)
				goto out;
		}
		st = herd_alloc_plan(&plan, cluster, &req, status, nstatus);
		if (st == HERD_ENORESOURCE && now_ms() < deadline && any_in_use(status, nstatus)) {
			sleep_ms(20 + rand_r(&seed) % 30);
			continue;
		}
		if (st != HERD_OK)
			goto out;
		if (!opts->plan_only) {
			st = hold(plan, local, &req, &lo);
			if (st == HERD_EBUSY && (++races < RACE_RETRIES || now_ms() < deadline)) {
				herd_plan_free(plan);
				sleep_ms(1 + rand_r(&seed) % 10);
				continue;
			}
			if (st != HERD_OK) {
				herd_plan_free(plan);
				goto out;
			}
			for (size_t i = 0; i < herd_plan_warning_count(plan); i++)
				herd__log_warn("%s", plan->warnings[i]);
		}
		*out = plan;
		break;
	}
out:
	free(status);
	free(grant.names);
	return st;
}
