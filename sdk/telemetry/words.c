/*
 * sdk/telemetry/words.c - what a node says of itself when a job fails: its
 * GPUs' last Xid in the kernel log and the clock slowdowns of a fault
 * (NVML), and its network cards that have lost their link, in a few words for
 * the launcher's summary.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "telemetry_internal.h"
#include "topo/kernel_log.h"
#include "topo/nvml.h"

/* The first line of /sys/class/net/IF/FILE into buf; false when none. */
static bool net_read(const char *ifname, const char *file, char *buf, size_t cap)
{
	char path[512];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", ifname, file);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	ok = fgets(buf, (int)cap, f) != NULL;
	fclose(f);
	return ok;
}

/*
 * The network cards (interfaces of a device: Ethernet, InfiniBand; not
 * bridges or veths) that are up but have lost their link: set up by the
 * administrator (IFF_UP in flags), their operstate down.
 */
static size_t links_down(char *out, size_t cap, size_t o)
{
	DIR *d = opendir("/sys/class/net");
	struct dirent *de;

	if (d == NULL)
		return o;
	while ((de = readdir(d)) != NULL && o < cap) {
		char path[512], state[32], flags[32];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/device", de->d_name);
		if (access(path, F_OK) != 0 || !net_read(de->d_name, "flags", flags, sizeof(flags)) ||
		    (strtoul(flags, NULL, 16) & 0x1) == 0 ||
		    !net_read(de->d_name, "operstate", state, sizeof(state)) ||
		    strncmp(state, "down", 4) != 0)
			continue;
		o += (size_t)snprintf(out + o, cap - o, "%s%s has lost its link", o ? "; " : "",
				      de->d_name);
	}
	closedir(d);
	return o;
}

void herd__telemetry_node_words(char *out, size_t cap)
{
	herd_telemetry_sample *s = NULL;
	herd__tgpu *g = NULL;
	char why[256];
	size_t o = 0;

	out[0] = '\0';
	if (herd__calloc(&s, 1, sizeof(*s), "a telemetry sample") == HERD_OK &&
	    herd__tgpu_open(&g, NULL, why, sizeof(why)) == HERD_OK &&
	    herd__tgpu_read(g, s, HERD_TELEMETRY_GPU) == HERD_OK) {
		for (int i = 0; i < s->ngpus && o < cap; i++) {
			const herd_telemetry_gpu *gpu = &s->gpus[i];
			const char *fatal = gpu->xid > 0 ? herd__xid_fatal((int)gpu->xid) : NULL;
			char slow[160];

			if (gpu->xid > 0)
				o += (size_t)snprintf(out + o, cap - o, "%sGPU %d (%s): its last Xid in "
						      "the kernel log is %lld%s%s%s", o ? "; " : "",
						      gpu->index, gpu->bus_id, (long long)gpu->xid,
						      fatal != NULL ? " (" : "",
						      fatal != NULL ? fatal : "",
						      fatal != NULL ? ")" : "");
			herd__nvml_slowdowns(gpu->throttle > 0 ? (unsigned long long)gpu->throttle : 0,
					     slow, sizeof(slow));
			if (slow[0] != '\0' && o < cap)
				o += (size_t)snprintf(out + o, cap - o, "%sGPU %d (%s) is slowed down: %s",
						      o ? "; " : "", gpu->index, gpu->bus_id, slow);
		}
	}
	herd__tgpu_close(g);
	free(s);
	if (o < cap)
		links_down(out, cap, o);
	/* The words end within cap, whatever was cut. */
	out[cap - 1] = '\0';
}
