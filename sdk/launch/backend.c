/*
 * sdk/launch/backend.c - the table of launch backends, keyed by where a
 * job runs.
 */
#include <stdlib.h>
#include <string.h>

#include "launch_internal.h"

herd_status herd__launch_backend_for(herd_job_where where, const herd__launch_backend **out)
{
	*out = NULL;
	switch (where) {
	case HERD_JOB_LOCAL:
		*out = &herd__launch_backend_local;
		break;
	case HERD_JOB_HOSTS:
	case HERD_JOB_HOSTFILE:
		*out = &herd__launch_backend_ssh;
		break;
	case HERD_JOB_SLURM:
		*out = &herd__launch_backend_slurm;
		break;
	case HERD_JOB_K8S:
		*out = &herd__launch_backend_pods;
		break;
	}
	if (*out == NULL)
		return herd__error(HERD_EUNAVAIL, "launch: no backend for %s in this build",
				   where == HERD_JOB_SLURM ? "Slurm (HERD_JOB_SLURM)"
				   : where == HERD_JOB_HOSTS ? "a hostlist (HERD_JOB_HOSTS, ssh)"
				   : where == HERD_JOB_HOSTFILE ? "a hostfile (HERD_JOB_HOSTFILE, ssh)"
				   : "this value of herd_job_spec.where");
	return HERD_OK;
}
