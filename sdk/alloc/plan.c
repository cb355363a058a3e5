/*
 * sdk/alloc/plan.c - the plan object: what the planner chose, read through
 * borrowed views, the environment of a rank, and the leases it may hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_internal.h"

herd_status herd__plan_new(herd_plan **out)
{
	return herd__calloc(out, 1, sizeof(herd_plan), "a plan");
}

herd_status herd__plan_strdup(herd_plan *plan, const char *s, const char **out)
{
	char *copy;

	if (plan->nstrings == plan->capstrings) {
		size_t cap = plan->capstrings ? plan->capstrings * 2 : 32;
		char **grown = realloc(plan->strings, cap * sizeof(*grown));

		if (grown == NULL)
			return herd__error(HERD_ENOMEM, "out of memory copying a plan's strings");
		plan->strings = grown;
		plan->capstrings = cap;
	}
	HERD_CHECK(herd__strdup(&copy, s != NULL ? s : ""));
	plan->strings[plan->nstrings++] = copy;
	*out = copy;
	return HERD_OK;
}

void herd__plan_attach_lease(herd_plan *plan, herd_lease *lease)
{
	plan->lease = lease;
}

size_t herd_plan_rank_count(const herd_plan *plan)
{
	return plan != NULL ? plan->nranks : 0;
}

size_t herd_plan_gpu_count(const herd_plan *plan)
{
	return plan != NULL ? plan->ngpus : 0;
}

size_t herd_plan_node_count(const herd_plan *plan)
{
	return plan != NULL ? plan->nblocks : 0;
}

/* The index check of the plan's indexed calls: fn's thing i of count. */
static herd_status check_index(const char *fn, const herd_plan *plan, const void *out,
			       const char *thing, size_t i, size_t count)
{
	if (plan == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "%s: plan and %s must not be NULL", fn, thing);
	if (i >= count)
		return herd__error(HERD_EINVAL, "%s: %s %zu is out of range: the plan has %zu %s%s",
				   fn, thing, i, count, thing, count == 1 ? "" : "s");
	return HERD_OK;
}

herd_status herd_plan_rank(const herd_plan *plan, size_t i, const herd_plan_rank_info **rank)
{
	if (rank != NULL)
		*rank = NULL;
	HERD_CHECK(check_index("herd_plan_rank", plan, rank, "rank", i,
			       herd_plan_rank_count(plan)));
	*rank = &plan->ranks[i];
	return HERD_OK;
}

herd_status herd_plan_gpu(const herd_plan *plan, size_t i, const herd_plan_gpu_info **gpu)
{
	if (gpu != NULL)
		*gpu = NULL;
	HERD_CHECK(check_index("herd_plan_gpu", plan, gpu, "GPU", i, herd_plan_gpu_count(plan)));
	*gpu = &plan->gpus[i];
	return HERD_OK;
}

/* The block holding plan GPU i (blocks are in GPU order). */
static const struct herd__plan_block *block_of(const herd_plan *plan, size_t i)
{
	for (size_t b = 0; b < plan->nblocks; b++)
		if (i >= plan->blocks[b].first && i < plan->blocks[b].first + plan->blocks[b].count)
			return &plan->blocks[b];
	return NULL;
}

herd_status herd_plan_link(const herd_plan *plan, size_t i, size_t j, herd_link *out)
{
	const struct herd__plan_block *bi, *bj;

	if (plan == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_plan_link: plan and out must not be NULL");
	if (i >= plan->ngpus || j >= plan->ngpus)
		return herd__error(HERD_EINVAL,
				   "herd_plan_link: GPU %zu or %zu out of range: the "
				   "plan has %zu GPUs",
				   i, j, plan->ngpus);
	bi = block_of(plan, i);
	bj = block_of(plan, j);
	if (bi == NULL || bi != bj)
		return herd__error(HERD_ENOTFOUND,
				   "plan GPUs %zu and %zu are on different nodes "
				   "(%s, %s): no matrix link",
				   i, j, plan->gpus[i].hostname, plan->gpus[j].hostname);
	*out = bi->links[(i - bi->first) * bi->count + (j - bi->first)];
	return HERD_OK;
}

const char *herd_plan_link_code(const herd_plan *plan, size_t i, size_t j,
				char buf[HERD_NODE_LINK_CODE_LEN])
{
	const struct herd__plan_block *bi, *bj;

	if (plan == NULL || i >= plan->ngpus || j >= plan->ngpus) {
		herd__strlcpy(buf, "?", HERD_NODE_LINK_CODE_LEN);
		return buf;
	}
	bi = block_of(plan, i);
	bj = block_of(plan, j);
	if (bi == NULL || bi != bj) {
		herd__strlcpy(buf, "NET", HERD_NODE_LINK_CODE_LEN);
		return buf;
	}
	return herd_node_link_code(bi->links[(i - bi->first) * bi->count + (j - bi->first)], buf);
}

double herd_plan_score(const herd_plan *plan)
{
	return plan != NULL ? plan->score : 0.0;
}

const char *herd_plan_explain(const herd_plan *plan)
{
	return plan != NULL && plan->explain != NULL ? plan->explain : "";
}

size_t herd_plan_warning_count(const herd_plan *plan)
{
	return plan != NULL ? plan->nwarnings : 0;
}

herd_status herd_plan_warning(const herd_plan *plan, size_t i, const char **text)
{
	if (text != NULL)
		*text = NULL;
	HERD_CHECK(check_index("herd_plan_warning", plan, text, "warning", i,
			       herd_plan_warning_count(plan)));
	*text = plan->warnings[i];
	return HERD_OK;
}

bool herd_plan_held(const herd_plan *plan)
{
	return plan != NULL && plan->lease != NULL;
}

/*
 * The rank's environment in one block: the pointer array first, then the
 * strings, so that one herd_free releases all of it.
 */
herd_status herd_plan_rank_env(const herd_plan *plan, size_t i, char ***env)
{
	const herd_plan_rank_info *r;
	herd__text cvd = { 0 };
	char *vars[5];
	size_t nvars = 0, bytes = 0;
	char **block, *p;
	herd_status st;

	if (env == NULL)
		return herd__error(HERD_EINVAL, "herd_plan_rank_env: env is NULL");
	*env = NULL;
	if (herd_plan_rank(plan, i, &r) != HERD_OK)
		return herd__error(HERD_EINVAL,
				   "herd_plan_rank_env: rank %zu out of range: the plan "
				   "has %zu ranks",
				   i, herd_plan_rank_count(plan));
	herd__text_printf(&cvd, "CUDA_VISIBLE_DEVICES=");
	for (size_t g = 0; g < r->ngpus; g++)
		herd__text_printf(&cvd, "%s%s", g ? "," : "", r->gpus[g].uuid);
	HERD_CHECK(herd__text_take(&cvd, &vars[nvars]));
	nvars++;
	vars[nvars++] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
	if (r->ib_hca[0] != '\0') {
		herd__text t = { 0 };

		herd__text_printf(&t, "NCCL_IB_HCA=%s", r->ib_hca);
		HERD_CHECK_GOTO(herd__text_take(&t, &vars[nvars]), st, out);
		nvars++;
	}
	if (r->socket_ifname[0] != '\0') {
		herd__text t = { 0 };

		herd__text_printf(&t, "NCCL_SOCKET_IFNAME=%s", r->socket_ifname);
		HERD_CHECK_GOTO(herd__text_take(&t, &vars[nvars]), st, out);
		nvars++;
	}
	for (size_t v = 0; v < nvars; v++)
		bytes += strlen(vars[v]) + 1;
	block = malloc((nvars + 1) * sizeof(char *) + bytes);
	if (block == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory for the environment of rank %zu", i);
		goto out;
	}
	p = (char *)(block + nvars + 1);
	for (size_t v = 0; v < nvars; v++) {
		size_t len = strlen(vars[v]) + 1;

		memcpy(p, vars[v], len);
		block[v] = p;
		p += len;
	}
	block[nvars] = NULL;
	*env = block;
	st = HERD_OK;
out:
	/* vars[1] is a literal; the others were allocated. */
	for (size_t v = 0; v < nvars; v++)
		if (v != 1)
			free(vars[v]);
	return st;
}

void herd_plan_release(herd_plan *plan)
{
	if (plan == NULL)
		return;
	herd_lease_free(plan->lease);
	plan->lease = NULL;
}

void herd_plan_free(herd_plan *plan)
{
	if (plan == NULL)
		return;
	herd_plan_release(plan);
	for (size_t i = 0; i < plan->nstrings; i++)
		free(plan->strings[i]);
	free(plan->strings);
	for (size_t b = 0; b < plan->nblocks; b++)
		free(plan->blocks[b].links);
	free(plan->blocks);
	for (size_t i = 0; i < plan->nwarnings; i++)
		free(plan->warnings[i]);
	free(plan->warnings);
	free(plan->ranks);
	free(plan->gpus);
	free(plan->explain);
	free(plan);
}
