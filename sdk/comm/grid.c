/*
 * sdk/comm/grid.c - the grid of a parallel job (herd/grid.h): named
 * dimensions laid on ranks taken node by node, the first dimension
 * varying fastest.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "herd/grid.h"

struct herd_grid {
	herd_grid_dim dims[HERD_GRID_MAX_DIMS];
	size_t ndims;
	int nranks;
	int *order;                   /* grid position -> rank */
	int *pos;                     /* rank -> grid position */
	int *group[HERD_GRID_MAX_DIMS]; /* rank -> its group's index along d */
};

static herd_status check_name(const char *name, size_t len, const char *where)
{
	if (len == 0 || len >= HERD_GRID_NAME_MAX || !isalpha((unsigned char)name[0]))
		return herd__error(HERD_EINVAL, "%s: \"%.*s\" is not a dimension's name (a letter, "
				   "then letters, digits or '_', at most %d)", where, (int)len, name,
				   HERD_GRID_NAME_MAX - 1);
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '_')
			return herd__error(HERD_EINVAL, "%s: \"%.*s\" is not a dimension's name "
					   "(letters, digits or '_')", where, (int)len, name);
	return HERD_OK;
}

herd_status herd_grid_parse(const char *text, herd_grid_dim *dims, size_t max, size_t *ndims)
{
	const char *p = text;

	if (text == NULL || dims == NULL || ndims == NULL)
		return herd__error(HERD_EINVAL, "herd_grid_parse: text, dims or ndims is NULL");
	*ndims = 0;
	while (*p != '\0') {
		size_t len = strcspn(p, ",");
		const char *eq = memchr(p, '=', len);
		char *end = NULL;
		long size;

		if (eq == NULL)
			return herd__error(HERD_EINVAL, "grid \"%s\": \"%.*s\" is not NAME=SIZE", text,
					   (int)len, p);
		HERD_CHECK(check_name(p, (size_t)(eq - p), "grid"));
		size = strtol(eq + 1, &end, 10);
		if (end == eq + 1 || end != p + len || size < 1 || size > 1 << 24)
			return herd__error(HERD_EINVAL, "grid \"%s\": the size of %.*s is \"%.*s\"; "
					   "expected a whole number of 1 or more", text,
					   (int)(eq - p), p, (int)(p + len - eq - 1), eq + 1);
		if (*ndims == max)
			return herd__error(HERD_EINVAL, "grid \"%s\": more than %zu dimensions", text,
					   max);
		for (size_t i = 0; i < *ndims; i++)
			if (strlen(dims[i].name) == (size_t)(eq - p) &&
			    strncmp(dims[i].name, p, (size_t)(eq - p)) == 0)
				return herd__error(HERD_EINVAL, "grid \"%s\": %.*s is given twice", text,
						   (int)(eq - p), p);
		snprintf(dims[*ndims].name, sizeof(dims[*ndims].name), "%.*s", (int)(eq - p), p);
		dims[(*ndims)++].size = (int)size;
		p += len;
		if (*p == ',') {
			p++;
			if (*p == '\0')
				return herd__error(HERD_EINVAL, "grid \"%s\": ends with ','", text);
		}
	}
	if (*ndims == 0)
		return herd__error(HERD_EINVAL, "grid \"%s\": no dimension (expected tp=4,pp=2...)",
				   text);
	return HERD_OK;
}

void herd_grid_free(herd_grid *grid)
{
	if (grid == NULL)
		return;
	free(grid->order);
	free(grid->pos);
	for (size_t d = 0; d < HERD_GRID_MAX_DIMS; d++)
		free(grid->group[d]);
	free(grid);
}

/* The dims, with dp added where it is missing and the sizes leave room for it. */
static herd_status complete_dims(herd_grid *g, const herd_grid_dim *dims, size_t ndims,
				 int nranks)
{
	long long product = 1;
	size_t pp = ndims, k = 0;
	bool has_dp = false;
	char names[HERD_GRID_MAX_DIMS * (HERD_GRID_NAME_MAX + 4)] = "";

	if (ndims == 0 || ndims > HERD_GRID_MAX_DIMS)
		return herd__error(HERD_EINVAL, "herd_grid_create: %zu dimensions; expected 1 to %d",
				   ndims, HERD_GRID_MAX_DIMS);
	for (size_t i = 0; i < ndims; i++) {
		HERD_CHECK(check_name(dims[i].name, strnlen(dims[i].name, HERD_GRID_NAME_MAX),
				      "herd_grid_create"));
		if (dims[i].size < 1)
			return herd__error(HERD_EINVAL, "herd_grid_create: %s is %d; a dimension's "
					   "size is 1 or more", dims[i].name, dims[i].size);
		for (size_t j = 0; j < i; j++)
			if (strcmp(dims[i].name, dims[j].name) == 0)
				return herd__error(HERD_EINVAL, "herd_grid_create: %s is given twice",
						   dims[i].name);
		product *= dims[i].size;
		if (product > (1ll << 30))
			return herd__error(HERD_EINVAL, "herd_grid_create: the sizes multiply to "
					   "more than 2^30");
		has_dp = has_dp || strcmp(dims[i].name, "dp") == 0;
		if (strcmp(dims[i].name, "pp") == 0)
			pp = i;
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s=%d",
			 i ? "," : "", dims[i].name, dims[i].size);
	}
	if (!has_dp && product < nranks && nranks % product == 0) {
		if (ndims == HERD_GRID_MAX_DIMS)
			return herd__error(HERD_EINVAL, "herd_grid_create: no room for dp beside %s",
					   names);
		for (size_t i = 0; i <= ndims; i++) {
			if (i == pp) {
				snprintf(g->dims[k].name, sizeof(g->dims[k].name), "dp");
				g->dims[k++].size = (int)(nranks / product);
			}
			if (i < ndims)
				g->dims[k++] = dims[i];
		}
		g->ndims = k;
		return HERD_OK;
	}
	if (product != nranks)
		return herd__error(HERD_EINVAL, "grid %s multiplies to %lld ranks; the job has %d%s",
				   names, product, nranks, has_dp ? "" : " (and dp cannot make up "
				   "the rest: it does not divide)");
	memcpy(g->dims, dims, ndims * sizeof(*dims));
	g->ndims = ndims;
	return HERD_OK;
}

herd_status herd_grid_create(herd_grid **out, const herd_grid_dim *dims, size_t ndims,
			     int nranks, const int *node)
{
	herd_grid *g = NULL;
	int *seen = NULL, *nodes = NULL, nnodes = 0, at = 0;
	herd_status st;

	if (out == NULL || dims == NULL)
		return herd__error(HERD_EINVAL, "herd_grid_create: out or dims is NULL");
	*out = NULL;
	if (nranks < 1)
		return herd__error(HERD_EINVAL, "herd_grid_create: %d ranks; expected 1 or more",
				   nranks);
	HERD_CHECK(herd__calloc(&g, 1, sizeof(*g), "a grid"));
	HERD_CHECK_GOTO(complete_dims(g, dims, ndims, nranks), st, fail);
	g->nranks = nranks;
	HERD_CHECK_GOTO(herd__calloc(&g->order, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&g->pos, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&seen, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&nodes, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	/* The nodes in the order of their first rank, each node's ranks in order. */
	for (int r = 0; r < nranks; r++) {
		int k;

		for (k = 0; k < nnodes && (node != NULL ? node[nodes[k]] != node[r] : false); k++)
			;
		if (k == nnodes)
			nodes[nnodes++] = r;   /* the node's first rank stands for it */
	}
	for (int k = 0; k < nnodes; k++)
		for (int r = nodes[k]; r < nranks; r++)
			if (!seen[r] && (node == NULL || node[r] == node[nodes[k]])) {
				seen[r] = 1;
				g->pos[r] = at;
				g->order[at++] = r;
			}
	for (size_t d = 0; d < g->ndims; d++) {
		int ngroups = 0, *first = NULL;

		HERD_CHECK_GOTO(herd__calloc(&g->group[d], (size_t)nranks, sizeof(int), "a grid"), st,
				fail);
		HERD_CHECK_GOTO(herd__calloc(&first, (size_t)nranks, sizeof(int), "a grid"), st,
				fail);
		for (int p = 0; p < nranks; p++)
			first[p] = -1;
		for (int r = 0; r < nranks; r++) {
			int coords[HERD_GRID_MAX_DIMS], key;

			herd_grid_coords(g, r, coords);
			coords[d] = 0;
			herd_grid_rank(g, coords, &key);
			key = g->pos[key];
			if (first[key] < 0)
				first[key] = ngroups++;
			g->group[d][r] = first[key];
		}
		free(first);
	}
	free(seen);
	free(nodes);
	*out = g;
	return HERD_OK;
fail:
	free(seen);
	free(nodes);
	herd_grid_free(g);
	return st;
}

int herd_grid_size(const herd_grid *grid)
{
	return grid != NULL ? grid->nranks : 0;
}

size_t herd_grid_ndims(const herd_grid *grid)
{
	return grid != NULL ? grid->ndims : 0;
}

const herd_grid_dim *herd_grid_dim_at(const herd_grid *grid, size_t d)
{
	return grid != NULL && d < grid->ndims ? &grid->dims[d] : NULL;
}

herd_status herd_grid_find(const herd_grid *grid, const char *name, size_t *d)
{
	char names[HERD_GRID_MAX_DIMS * (HERD_GRID_NAME_MAX + 2)] = "";

	if (grid == NULL || name == NULL || d == NULL)
		return herd__error(HERD_EINVAL, "herd_grid_find: grid, name or d is NULL");
	for (size_t i = 0; i < grid->ndims; i++) {
		if (strcmp(grid->dims[i].name, name) == 0) {
			*d = i;
			return HERD_OK;
		}
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 i ? ", " : "", grid->dims[i].name);
	}
	return herd__error(HERD_ENOTFOUND, "the grid has no dimension %s (it has %s)", name,
			   names);
}

static herd_status check_rank(const herd_grid *grid, int rank, const char *fn)
{
	if (grid == NULL)
		return herd__error(HERD_EINVAL, "%s: grid is NULL", fn);
	if (rank < 0 || rank >= grid->nranks)
		return herd__error(HERD_EINVAL, "%s: rank %d of a grid of %d", fn, rank,
				   grid->nranks);
	return HERD_OK;
}

herd_status herd_grid_coords(const herd_grid *grid, int rank, int *coords)
{
	int p;

	HERD_CHECK(check_rank(grid, rank, "herd_grid_coords"));
	p = grid->pos[rank];
	for (size_t d = 0; d < grid->ndims; d++) {
		coords[d] = p % grid->dims[d].size;
		p /= grid->dims[d].size;
	}
	return HERD_OK;
}

herd_status herd_grid_rank(const herd_grid *grid, const int *coords, int *rank)
{
	int p = 0;

	if (grid == NULL || coords == NULL || rank == NULL)
		return herd__error(HERD_EINVAL, "herd_grid_rank: grid, coords or rank is NULL");
	for (size_t d = grid->ndims; d-- > 0;) {
		if (coords[d] < 0 || coords[d] >= grid->dims[d].size)
			return herd__error(HERD_EINVAL, "herd_grid_rank: %s coordinate %d of %d",
					   grid->dims[d].name, coords[d], grid->dims[d].size);
		p = p * grid->dims[d].size + coords[d];
	}
	*rank = grid->order[p];
	return HERD_OK;
}

herd_status herd_grid_group(const herd_grid *grid, size_t d, int rank, int *ranks, int *group)
{
	int coords[HERD_GRID_MAX_DIMS];

	HERD_CHECK(check_rank(grid, rank, "herd_grid_group"));
	if (d >= grid->ndims)
		return herd__error(HERD_EINVAL, "herd_grid_group: dimension %zu of %zu", d,
				   grid->ndims);
	herd_grid_coords(grid, rank, coords);
	for (int c = 0; c < grid->dims[d].size; c++) {
		coords[d] = c;
		herd_grid_rank(grid, coords, &ranks[c]);
	}
	if (group != NULL)
		*group = grid->group[d][rank];
	return HERD_OK;
}
