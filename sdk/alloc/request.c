/*
 * sdk/alloc/request.c - what a valid request is, and the names of links,
 * lease states and policies.
 */
#include <string.h>

#include "alloc_internal.h"

static const char *const link_names[] = {
	[HERD_ALLOC_LINK_ANY] = "any",
	[HERD_ALLOC_LINK_SAME_NODE] = "same-node",
	[HERD_ALLOC_LINK_NVLINK] = "nvlink",
	[HERD_ALLOC_LINK_SAME_NUMA] = "same-numa",
};

#define NLINKS (sizeof(link_names) / sizeof(link_names[0]))

const char *herd_alloc_link_name(herd_alloc_link link)
{
	if ((unsigned int)link >= NLINKS)
		return "?";
	return link_names[link];
}

herd_status herd_alloc_link_parse(const char *name, herd_alloc_link *out)
{
	if (name == NULL || out == NULL)
		return herd__error(HERD_EINVAL,
				   "herd_alloc_link_parse: name and out must not be NULL");
	for (size_t i = 0; i < NLINKS; i++) {
		if (strcmp(name, link_names[i]) == 0) {
			*out = (herd_alloc_link)i;
			return HERD_OK;
		}
	}
	return herd__error(HERD_EINVAL,
			   "unknown link demand '%s': expected any, same-node, nvlink or same-numa",
			   name);
}

const char *herd_lease_state_name(herd_lease_state state)
{
	switch (state) {
	case HERD_LEASE_FREE:
		return "free";
	case HERD_LEASE_SHARED:
		return "shared";
	case HERD_LEASE_EXCLUSIVE:
		return "exclusive";
	case HERD_LEASE_UNKNOWN:
		return "unknown";
	}
	return "?";
}

const char *herd__alloc_policy_str(herd_alloc_policy policy)
{
	return policy == HERD_ALLOC_SPREAD ? "spread" : "pack";
}

static herd_status check_range(const char *field, long value, long lo, long hi)
{
	if (value >= lo && value <= hi)
		return HERD_OK;
	return herd__error(HERD_EINVAL, "request: %s is %ld; expected %ld to %ld", field, value, lo,
			   hi);
}

static herd_status check_names(const char *field, const char *const *names, size_t n)
{
	if (n > 0 && names == NULL)
		return herd__error(HERD_EINVAL, "request: n%s is %zu but %s is NULL", field, n,
				   field);
	if (n > HERD_ALLOC_MAX_GPUS)
		return herd__error(HERD_EINVAL, "request: %zu names in %s; at most %d", n, field,
				   HERD_ALLOC_MAX_GPUS);
	for (size_t i = 0; i < n; i++)
		if (names[i] == NULL || names[i][0] == '\0')
			return herd__error(HERD_EINVAL, "request: %s[%zu] is %s", field, i,
					   names[i] == NULL ? "NULL" : "empty");
	return HERD_OK;
}

herd_status herd__alloc_request_check(const herd_alloc_request *req)
{
	if (req == NULL)
		return herd__error(HERD_EINVAL, "request is NULL");
	HERD__CHECK_VERSION("request", req, herd_alloc_request, ALLOC_REQUEST);
	HERD_CHECK(check_range("gpus", req->gpus, 0, HERD_ALLOC_MAX_GPUS));
	HERD_CHECK(
		check_range("gpus_per_node", req->gpus_per_node, 0, HERD_ALLOC_MAX_GPUS_PER_NODE));
	HERD_CHECK(check_range("nodes", req->nodes, 0, HERD_ALLOC_MAX_GPUS));
	HERD_CHECK(
		check_range("gpus_per_rank", req->gpus_per_rank, 0, HERD_ALLOC_MAX_GPUS_PER_NODE));
	if ((unsigned int)req->link >= NLINKS)
		return herd__error(HERD_EINVAL,
				   "request: link is %d; expected one of "
				   "HERD_ALLOC_LINK_ANY .. HERD_ALLOC_LINK_SAME_NUMA",
				   (int)req->link);
	if (req->policy != HERD_ALLOC_PACK && req->policy != HERD_ALLOC_SPREAD)
		return herd__error(HERD_EINVAL,
				   "request: policy is %d; expected HERD_ALLOC_PACK "
				   "or HERD_ALLOC_SPREAD",
				   (int)req->policy);
	HERD_CHECK(check_names("exclude", req->exclude, req->nexclude));
	HERD_CHECK(check_names("include", req->include, req->ninclude));
	if (req->gpus == 0 && (req->gpus_per_node == 0 || req->nodes == 0))
		return herd__error(HERD_EINVAL, "request: gpus is 0; ask for at least one GPU "
						"(or give gpus_per_node and nodes)");
	return HERD_OK;
}
