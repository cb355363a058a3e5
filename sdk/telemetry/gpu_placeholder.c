/*
 * sdk/telemetry/gpu_placeholder.c - the GPU part of a sampler while this
 * build has no NVML reader: every sampler says so in its samples'
 * gpu_note and has no GPUs.  gpu.c replaces this file.
 */
#include <stdio.h>

#include "base.h"
#include "telemetry_internal.h"

herd_status herd__tgpu_open(herd__tgpu **out, const char *lease_dir, char *why, size_t cap)
{
	(void)lease_dir;
	*out = NULL;
	snprintf(why, cap, "GPU telemetry not built");
	return HERD_EUNAVAIL;
}

herd_status herd__tgpu_read(herd__tgpu *g, herd_telemetry_sample *s, unsigned parts)
{
	(void)g;
	(void)parts;
	s->ngpus = 0;
	s->nprocs = 0;
	return herd__error(HERD_EUNAVAIL, "GPU telemetry not built");
}

void herd__tgpu_close(herd__tgpu *g)
{
	(void)g;
}
