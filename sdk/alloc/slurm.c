/*
 * sdk/alloc/slurm.c - the GPUs a Slurm allocation granted, from the values
 * of its environment variables, translated to the node's GPUs (and so to
 * UUIDs).  Pure: the caller reads the environment.  What the numbers mean
 * is set out above herd_alloc_slurm_gpus in include/herd/alloc.h.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc_internal.h"

/* One variable's list: GPUs in the order given, as node indices. */
struct gpu_list {
	const char *var; /* its name, for messages */
	const char *value;
	size_t n;
	size_t *gpu;  /* node GPU index of each item */
	long *number; /* the number as written, -1 for a UUID */
	long beyond;  /* the first index past the node's GPUs, -1 when none */
};

static bool is_set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

static void list_free(struct gpu_list *l)
{
	free(l->gpu);
	free(l->number);
	l->gpu = NULL;
	l->number = NULL;
	l->n = 0;
}

static herd_status list_push(struct gpu_list *l, size_t gpu, long number, size_t cap)
{
	if (l->n >= cap)
		return herd__error(HERD_EINVAL, "%s=%s lists more GPUs than the %zu it may", l->var,
				   l->value, cap);
	l->gpu[l->n] = gpu;
	l->number[l->n++] = number;
	return HERD_OK;
}

static herd_status beyond_error(const herd_node *node, const struct gpu_list *l)
{
	return herd__error(HERD_EINVAL,
			   "%s=%s names GPU %ld, but node %s has %zu GPU%s (Slurm's index is read "
			   "as the place in PCI bus order; an inventory probed inside a device "
			   "cgroup lacks the others)",
			   l->var, l->value, l->beyond, node->hostname, node->ngpus,
			   node->ngpus == 1 ? "" : "s");
}

/*
 * Reads "0,1,4", "0-3", "GPU-<uuid>,..." into l (node indices).  An index
 * past the node's GPUs is an error, or with beyond_ok is kept (as SIZE_MAX)
 * and noted in l->beyond.
 */
static herd_status parse_list(const herd_node *node, const char *var, const char *value,
			      bool beyond_ok, struct gpu_list *l)
{
	/* Ranges could name any number of GPUs; a node has few. */
	size_t cap = node->ngpus * 2 + 16;
	const char *p = value;
	herd_status st = HERD_OK;

	memset(l, 0, sizeof(*l));
	l->var = var;
	l->value = value;
	l->beyond = -1;
	HERD_CHECK(herd__calloc(&l->gpu, cap, sizeof(size_t), "a GPU list"));
	HERD_CHECK(herd__calloc(&l->number, cap, sizeof(long), "a GPU list"));
	while (*p != '\0') {
		size_t len = strcspn(p, ",");
		char item[HERD_NAME_LEN + 1];

		while (len > 0 && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len > 0 && isspace((unsigned char)p[len - 1]))
			len--;
		if (len == 0 || len > HERD_NAME_LEN) {
			st = herd__error(HERD_EINVAL, "%s=%s: %s item", var, value,
					 len == 0 ? "an empty" : "an over-long");
			goto fail;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		if (strcasecmp(item, "NoDevFiles") == 0) {
			st = herd__error(
				HERD_EINVAL,
				"%s=%s: gres.conf names no device files for the "
				"GPUs, so Slurm cannot say which ones it granted; give them "
				"File= lines (or AutoDetect=nvml)",
				var, value);
			goto fail;
		}
		if (strncasecmp(item, "MIG-", 4) == 0) {
			st = herd__error(HERD_EINVAL,
					 "%s=%s: MIG devices (%s) are not supported: "
					 "herd allocates whole GPUs",
					 var, value, item);
			goto fail;
		}
		if (strncasecmp(item, "GPU-", 4) == 0) {
			size_t g = 0;

			while (g < node->ngpus && strcasecmp(node->gpus[g].uuid, item) != 0)
				g++;
			if (g == node->ngpus) {
				st = herd__error(HERD_ENOTFOUND,
						 "%s=%s names GPU %s, which node %s "
						 "does not have",
						 var, value, item, node->hostname);
				goto fail;
			}
			HERD_CHECK_GOTO(list_push(l, g, -1, cap), st, fail);
		} else {
			char *end;
			long lo, hi;

			/* Indices past what a node can have are malformed, which
			 * also keeps the loop below far from LONG_MAX. */
			errno = 0;
			lo = hi = isdigit((unsigned char)item[0]) ? strtol(item, &end, 10) : -1;
			if (lo >= 0 && *end == '-' && isdigit((unsigned char)end[1]))
				hi = strtol(end + 1, &end, 10);
			if (lo < 0 || *end != '\0' || hi < lo || errno != 0 ||
			    hi > HERD_ALLOC_MAX_GPUS_PER_NODE * 16L) {
				st = herd__error(HERD_EINVAL,
						 "%s=%s: '%s' is neither a GPU index nor "
						 "a GPU UUID",
						 var, value, item);
				goto fail;
			}
			if ((unsigned long)hi >= node->ngpus && l->beyond < 0)
				l->beyond = (unsigned long)lo >= node->ngpus ? lo : (long)node->ngpus;
			if (l->beyond >= 0 && !beyond_ok) {
				st = beyond_error(node, l);
				goto fail;
			}
			if ((unsigned long)(hi - lo) >= cap - l->n) {
				st = herd__error(HERD_EINVAL, "%s=%s lists more GPUs than the %zu it may",
						 var, value, cap);
				goto fail;
			}
			for (long i = lo; i <= hi; i++) {
				size_t g = (unsigned long)i < node->ngpus ? (size_t)i : SIZE_MAX;

				HERD_CHECK_GOTO(list_push(l, g, i, cap), st, fail);
			}
		}
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	return HERD_OK;
fail:
	list_free(l);
	return st;
}

static bool list_has_gpu(const struct gpu_list *l, size_t gpu)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->gpu[i] == gpu)
			return true;
	return false;
}

static bool list_has_number(const struct gpu_list *l, long number)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->number[i] == number)
			return true;
	return false;
}

/*
 * Narrows Slurm's grant by CUDA_VISIBLE_DEVICES: Slurm's own value (the
 * same indices, or 0..n-1 under ConstrainDevices) keeps all of it; a
 * narrower one keeps what it names.  mask[] is per node GPU.
 */
static herd_status narrow(const struct gpu_list *grant, const struct gpu_list *cvd, bool *mask)
{
	bool uuids = false, numbers = false, global = true, local = true;

	for (size_t i = 0; i < cvd->n; i++) {
		if (cvd->number[i] < 0) {
			uuids = true;
			if (!list_has_gpu(grant, cvd->gpu[i]))
				return herd__error(HERD_EINVAL,
						   "%s=%s names a GPU that %s=%s does not "
						   "grant",
						   cvd->var, cvd->value, grant->var, grant->value);
			continue;
		}
		numbers = true;
		global &= list_has_number(grant, cvd->number[i]);
		local &= (size_t)cvd->number[i] < grant->n;
	}
	if (uuids && numbers)
		return herd__error(HERD_EINVAL, "%s=%s mixes indices and UUIDs", cvd->var,
				   cvd->value);
	if (numbers && !global && !local)
		return herd__error(HERD_EINVAL,
				   "%s=%s fits neither of Slurm's forms for %s=%s (the "
				   "same indices, or 0..%zu under ConstrainDevices); unset it or "
				   "let Slurm set it",
				   cvd->var, cvd->value, grant->var, grant->value,
				   grant->n > 0 ? grant->n - 1 : 0);
	for (size_t i = 0; i < cvd->n; i++) {
		size_t g = cvd->gpu[i];

		/* Slurm's indices first: they read the same either way when the
		 * grant starts at 0, and a user narrowing by hand writes them. */
		if (numbers && !global)
			g = grant->gpu[cvd->number[i]];
		mask[g] = true;
	}
	return HERD_OK;
}

/* Whether a list is exactly 0, 1, ..., n-1: Slurm's form under ConstrainDevices. */
static bool is_local_form(const struct gpu_list *l, size_t n)
{
	if (l->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (l->number[i] != (long)i)
			return false;
	return true;
}

herd_status herd_alloc_slurm_gpus(const herd_node *node, const herd_alloc_slurm_env *env,
				  size_t *granted, size_t *count, bool *inside)
{
	struct gpu_list grant = { 0 }, cvd = { 0 };
	const char *var = NULL, *value = NULL;
	bool *mask = NULL;
	herd_status st = HERD_OK;

	if (node == NULL || env == NULL || count == NULL || inside == NULL ||
	    (granted == NULL && node != NULL && node->ngpus > 0))
		return herd__error(HERD_EINVAL, "herd_alloc_slurm_gpus: node, env, granted, count "
						"and inside must not be NULL");
	*count = 0;
	*inside = is_set(env->job_id);
	if (!*inside) {
		for (size_t g = 0; g < node->ngpus; g++)
			granted[(*count)++] = g;
		return HERD_OK;
	}
	if (is_set(env->step_gpus)) {
		var = "SLURM_STEP_GPUS";
		value = env->step_gpus;
	} else if (is_set(env->job_gpus)) {
		var = "SLURM_JOB_GPUS";
		value = env->job_gpus;
	}
	if (var == NULL && env->cuda_visible_devices == NULL)
		return HERD_OK; /* an allocation without GPUs */
	HERD_CHECK(herd__calloc(&mask, node->ngpus + 1, sizeof(bool), "a GPU mask"));
	if (var != NULL)
		HERD_CHECK_GOTO(parse_list(node, var, value, true, &grant), st, out);
	if (env->cuda_visible_devices != NULL)
		HERD_CHECK_GOTO(parse_list(node, "CUDA_VISIBLE_DEVICES", env->cuda_visible_devices,
					   false, &cvd),
				st, out);
	if (var != NULL && grant.beyond >= 0) {
		/* Slurm's index past the inventory's GPUs: a probe inside the
		 * job's device cgroup saw only the granted ones.  That is so when
		 * it saw as many as Slurm granted and Slurm numbered them 0..n-1
		 * for CUDA; then every GPU the node shows is granted. */
		if (env->cuda_visible_devices == NULL || !is_local_form(&cvd, node->ngpus) ||
		    grant.n != node->ngpus) {
			st = beyond_error(node, &grant);
			goto out;
		}
		for (size_t g = 0; g < node->ngpus; g++)
			mask[g] = true;
	} else if (var != NULL && env->cuda_visible_devices != NULL) {
		HERD_CHECK_GOTO(narrow(&grant, &cvd, mask), st, out);
	} else {
		const struct gpu_list *only = var != NULL ? &grant : &cvd;

		for (size_t i = 0; i < only->n; i++)
			mask[only->gpu[i]] = true;
	}
	for (size_t g = 0; g < node->ngpus; g++)
		if (mask[g])
			granted[(*count)++] = g;
out:
	list_free(&grant);
	list_free(&cvd);
	free(mask);
	return st;
}
