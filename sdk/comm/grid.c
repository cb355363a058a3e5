/*
 * sdk/comm/grid.c - the grid of a parallel job (herd/grid.h): named
 * dimensions laid on ranks taken node by node, the first dimension
 * varying fastest.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base.h"
#include "comm/grid_internal.h"
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
					   "expected a whole number from 1 to %d", text,
					   (int)(eq - p), p, (int)(p + len - eq - 1), eq + 1, 1 << 24);
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

/* The place of name in order ("tp-cp-ep-dp-pp"), -1 when it is not there. */
static int order_index(const char *order, const char *name)
{
	size_t len = strlen(name);
	int k = 0;

	for (const char *p = order; *p != '\0'; k++) {
		size_t n = strcspn(p, "-");

		if (n == len && strncmp(p, name, len) == 0)
			return k;
		p += n;
		p += *p == '-';
	}
	return -1;
}

/* Checks order: names joined by '-', none twice. */
static herd_status check_order(const char *order)
{
	char names[HERD_GRID_MAX_DIMS * 4][HERD_GRID_NAME_MAX];
	int k = 0;

	for (const char *p = order;; k++) {
		size_t n = strcspn(p, "-");

		HERD_CHECK(check_name(p, n, "grid order"));
		if (k == (int)(sizeof(names) / sizeof(names[0])))
			return herd__error(HERD_EINVAL, "grid order \"%s\": more than %zu names", order,
					   sizeof(names) / sizeof(names[0]));
		snprintf(names[k], sizeof(names[k]), "%.*s", (int)n, p);
		for (int j = 0; j < k; j++)
			if (strcmp(names[j], names[k]) == 0)
				return herd__error(HERD_EINVAL, "grid order \"%s\": %s is given twice",
						   order, names[k]);
		p += n;
		if (*p == '\0')
			return HERD_OK;
		p++;
	}
}

/* The dims in order, with dp added where it is missing and the sizes leave room for it. */
static herd_status complete_dims(herd_grid *g, const herd_grid_dim *dims, size_t ndims,
				 const char *order, int nranks)
{
	long long product = 1;
	size_t k = 0;
	bool has_dp = false;
	int at[HERD_GRID_MAX_DIMS + 1], dp_at;
	char names[HERD_GRID_MAX_DIMS * (HERD_GRID_NAME_MAX + 4)] = "";

	if (ndims == 0 || ndims > HERD_GRID_MAX_DIMS)
		return herd__error(HERD_EINVAL, "herd_grid_create: %zu dimensions; expected 1 to %d",
				   ndims, HERD_GRID_MAX_DIMS);
	if (order == NULL)
		order = HERD_GRID_MEGATRON_ORDER;
	HERD_CHECK(check_order(order));
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
		at[i] = order_index(order, dims[i].name);
		if (at[i] < 0)
			return herd__error(HERD_EINVAL, "grid: %s is not a dimension of the order %s "
					   "(name it in the order, innermost first)", dims[i].name,
					   order);
		product *= dims[i].size;
		if (product > (1ll << 30))
			return herd__error(HERD_EINVAL, "herd_grid_create: the sizes multiply to "
					   "more than 2^30");
		has_dp = has_dp || strcmp(dims[i].name, "dp") == 0;
	}
	/* Insertion by the place in the order: at most 8 dimensions. */
	dp_at = order_index(order, "dp");
	for (size_t n = 0; n < ndims; n++) {
		size_t best = 0;
		int best_at = -1;

		for (size_t i = 0; i < ndims; i++)
			if (at[i] >= 0 && (best_at < 0 || at[i] < best_at)) {
				best = i;
				best_at = at[i];
			}
		if (!has_dp && dp_at >= 0 && dp_at < best_at && product < nranks &&
		    nranks % product == 0) {
			if (ndims == HERD_GRID_MAX_DIMS)
				return herd__error(HERD_EINVAL, "herd_grid_create: no room for dp");
			snprintf(g->dims[k].name, sizeof(g->dims[k].name), "dp");
			g->dims[k++].size = (int)(nranks / product);
			has_dp = true;
			product = nranks;
		}
		g->dims[k++] = dims[best];
		at[best] = -1;
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s=%d",
			 n ? "," : "", dims[best].name, dims[best].size);
	}
	if (!has_dp && dp_at >= 0 && product < nranks && nranks % product == 0) {
		if (ndims == HERD_GRID_MAX_DIMS)
			return herd__error(HERD_EINVAL, "herd_grid_create: no room for dp");
		snprintf(g->dims[k].name, sizeof(g->dims[k].name), "dp");
		g->dims[k++].size = (int)(nranks / product);
		product = nranks;
	}
	g->ndims = k;
	if (product == nranks)
		return HERD_OK;
	if (product > nranks || has_dp)
		return herd__error(HERD_EINVAL, "grid %s multiplies to %lld ranks; the job has %d",
				   names, product, nranks);
	if (dp_at < 0)
		return herd__error(HERD_EINVAL, "grid %s multiplies to %lld ranks; the job has %d "
				   "(and the order %s names no dp to make up the rest)", names,
				   product, nranks, order);
	return herd__error(HERD_EINVAL, "grid %s multiplies to %lld ranks; the job has %d (and dp "
			   "cannot make up the rest: %d is not a multiple of %lld)", names, product,
			   nranks, nranks, product);
}

/* Whether ranks a and b are in one node (sets: and one set). */
static bool same_place(const herd_grid_place *place, int a, int b, bool sets)
{
	return place == NULL || (place[a].node == place[b].node &&
				 (!sets || place[a].nvset == place[b].nvset));
}

herd_status herd_grid_create(herd_grid **out, const herd_grid_dim *dims, size_t ndims,
			     const char *order, int nranks, const herd_grid_place *place)
{
	herd_grid *g = NULL;
	int *seen = NULL, *firsts = NULL, nfirst = 0, at = 0;
	herd_status st;

	if (out == NULL || dims == NULL)
		return herd__error(HERD_EINVAL, "herd_grid_create: out or dims is NULL");
	*out = NULL;
	if (nranks < 1)
		return herd__error(HERD_EINVAL, "herd_grid_create: %d ranks; expected 1 or more",
				   nranks);
	HERD_CHECK(herd__calloc(&g, 1, sizeof(*g), "a grid"));
	HERD_CHECK_GOTO(complete_dims(g, dims, ndims, order, nranks), st, fail);
	g->nranks = nranks;
	HERD_CHECK_GOTO(herd__calloc(&g->order, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&g->pos, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&seen, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&firsts, (size_t)nranks, sizeof(int), "a grid"), st, fail);
	/* The first rank of each set, in rank order; then for each node (at
	 * its first rank's set), its sets in that order, each set's ranks. */
	for (int r = 0; r < nranks; r++) {
		int k;

		for (k = 0; k < nfirst && !same_place(place, firsts[k], r, true); k++)
			;
		if (k == nfirst)
			firsts[nfirst++] = r;
	}
	for (int k = 0; k < nfirst; k++) {
		if (seen[firsts[k]])
			continue;   /* its node was taken whole already */
		for (int j = k; j < nfirst; j++) {
			if (!same_place(place, firsts[j], firsts[k], false))
				continue;
			for (int r = firsts[j]; r < nranks; r++)
				if (!seen[r] && same_place(place, r, firsts[j], true)) {
					seen[r] = 1;
					g->pos[r] = at;
					g->order[at++] = r;
				}
		}
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
	free(firsts);
	*out = g;
	return HERD_OK;
fail:
	free(seen);
	free(firsts);
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

/* ---- hosts ------------------------------------------------------------------ */

typedef struct host_rank {
	const char *host;
	int rank;
} host_rank;

static int by_host_then_rank(const void *a, const void *b)
{
	const host_rank *x = a, *y = b;
	int c = strcmp(x->host, y->host);

	return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static int by_first_rank(const void *a, const void *b)
{
	const int *x = a, *y = b;

	return (x[0] > y[0]) - (x[0] < y[0]);
}

herd_status herd__grid_hosts(const char *const *hosts, int n, int *node, int *order,
			     int *nhosts)
{
	host_rank *v = NULL;
	int *spans = NULL, nspans = 0, at = 0;

	HERD_CHECK(herd__calloc(&v, (size_t)n + 1, sizeof(*v), "a grid's hosts"));
	if (herd__calloc(&spans, 2 * (size_t)n + 2, sizeof(int), "a grid's hosts") != HERD_OK) {
		free(v);
		return HERD_ENOMEM;
	}
	for (int r = 0; r < n; r++)
		v[r] = (host_rank){ hosts[r], r };
	qsort(v, (size_t)n, sizeof(*v), by_host_then_rank);
	/* Each host's run: its smallest rank and where the run starts. */
	for (int i = 0; i < n; i++) {
		if (i == 0 || strcmp(v[i].host, v[i - 1].host) != 0) {
			spans[2 * nspans] = v[i].rank;
			spans[2 * nspans + 1] = i;
			nspans++;
		}
		node[v[i].rank] = spans[2 * (nspans - 1)];
	}
	if (order != NULL) {
		qsort(spans, (size_t)nspans, 2 * sizeof(int), by_first_rank);
		for (int k = 0; k < nspans; k++)
			for (int i = spans[2 * k + 1]; i < n && v[i].rank >= 0 &&
			     node[v[i].rank] == spans[2 * k]; i++)
				order[at++] = v[i].rank;
	}
	*nhosts = nspans;
	free(v);
	free(spans);
	return HERD_OK;
}

/* ---- explanation ---------------------------------------------------------- */

#define NET_BADNESS 100000
#define SHM_BADNESS 90000

int herd_grid_link_class(const herd_link *link, bool same_node, char code[HERD_GRID_LINK_LEN])
{
	if (!same_node) {
		snprintf(code, HERD_GRID_LINK_LEN, "NET");
		return NET_BADNESS;
	}
	if (link == NULL) {
		snprintf(code, HERD_GRID_LINK_LEN, "SHM");
		return SHM_BADNESS;
	}
	herd_node_link_code(*link, code);
	return (int)link->kind * 1000 - (link->kind == HERD_LINK_NVLINK ? link->nvlinks : 0);
}

typedef struct explainer {
	const herd_grid *g;
	const char *const *hosts;
	herd_grid_link_fn link;
	void *arg;
	int *ranks;          /* a group's, size of the largest dimension */
	int *node;           /* rank -> its host's number */
	int nnodes;
} explainer;

/* The worst link in ranks[0..n) into code, and its badness. */
static int group_link(const explainer *x, const int *ranks, int n, char *code)
{
	int worst = -1;

	snprintf(code, HERD_GRID_LINK_LEN, "-");
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++) {
			char c[HERD_GRID_LINK_LEN];
			int bad = x->link(x->arg, ranks[a], ranks[b], c);

			if (bad > worst) {
				worst = bad;
				memcpy(code, c, HERD_GRID_LINK_LEN);
			}
		}
	return worst;
}

/* "0-7" or "0,8,16" into t; and "dgx01,dgx02", the hosts, into h. */
static void group_words(const explainer *x, const int *ranks, int n, herd__text *t,
			herd__text *h)
{
	bool run = n > 2;

	for (int k = 1; k < n; k++)
		run = run && ranks[k] == ranks[k - 1] + 1;
	if (run)
		herd__text_printf(t, "%d-%d", ranks[0], ranks[n - 1]);
	else
		for (int k = 0; k < n; k++)
			herd__text_printf(t, "%s%d", k ? "," : "", ranks[k]);
	for (int k = 0; k < n; k++) {
		bool dup = false;

		for (int j = 0; j < k && !dup; j++)
			dup = x->node[ranks[j]] == x->node[ranks[k]];
		if (!dup)
			herd__text_printf(h, "%s%s", k ? "," : "", x->hosts[ranks[k]]);
	}
}

/* Builds the text (or the JSON object in *doc) and the warnings. */
static herd_status explain(explainer *x, herd__text *out, json_t *doc, herd__text *warn)
{
	const herd_grid *g = x->g;
	int n = g->nranks;
	herd__text spec = { 0 };
	json_t *dims = NULL, *coords = NULL, *warns = NULL;
	herd_status st = HERD_OK;

	for (size_t d = 0; d < g->ndims; d++)
		herd__text_printf(&spec, "%s%s=%d", d ? " x " : "", g->dims[d].name,
				  g->dims[d].size);
	if (spec.failed) {
		herd__text_free(&spec);
		return herd__error(HERD_ENOMEM, "out of memory for a grid's explanation");
	}
	if (doc != NULL) {
		dims = json_array();
		coords = json_array();
		warns = json_array();
		json_object_set_new(doc, "spec", json_string(spec.s));
		json_object_set_new(doc, "ranks", json_integer(n));
		json_object_set_new(doc, "nodes", json_integer(x->nnodes));
		json_object_set_new(doc, "dims", dims);
		json_object_set_new(doc, "coords", coords);
		json_object_set_new(doc, "warnings", warns);
	} else {
		herd__text_printf(out, "grid %s over %d ranks on %d node%s (innermost first)\n"
				  "%-8s %5s %7s  %-10s %s\n", spec.s, n, x->nnodes,
				  x->nnodes == 1 ? "" : "s", "dim", "size", "groups", "worst link",
				  "in the group of");
	}
	herd__text_free(&spec);
	for (size_t d = 0; d < g->ndims; d++) {
		const herd_grid_dim *dim = &g->dims[d];
		int worst = -1, worst_rank = 0, group;
		char code[HERD_GRID_LINK_LEN], wcode[HERD_GRID_LINK_LEN] = "-";
		herd__text lines = { 0 }, rt = { 0 }, ht = { 0 };
		json_t *groups = doc != NULL ? json_array() : NULL;

		for (int r = 0; r < n; r++) {
			int bad;

			herd_grid_group(g, d, r, x->ranks, &group);
			if (x->ranks[0] != r)
				continue;   /* each group once, at its rank of coordinate 0 */
			bad = group_link(x, x->ranks, dim->size, code);
			rt.len = ht.len = 0;
			group_words(x, x->ranks, dim->size, &rt, &ht);
			if (rt.failed || ht.failed)
				break;
			if (bad > worst) {
				worst = bad;
				worst_rank = r;
				memcpy(wcode, code, sizeof(wcode));
			}
			if ((d == 0 || strcmp(dim->name, "tp") == 0) && bad >= NET_BADNESS &&
			    dim->size > 1)
				herd__text_printf(warn, "%s group %d (ranks %s) spans %s: its links are "
						  "NET, not a node's\n", dim->name, group, rt.s, ht.s);
			if (groups != NULL) {
				json_t *members = json_array();

				for (int m = 0; m < dim->size; m++)
					json_array_append_new(members, json_integer(x->ranks[m]));
				json_array_append_new(groups, json_pack("{s:i, s:o, s:s, s:s}", "group",
					group, "ranks", members, "hosts", ht.s, "link", code));
			} else {
				herd__text_printf(&lines, "  %s group %d: ranks %s on %s: %s\n",
						  dim->name, group, rt.s, ht.s, code);
			}
		}
		herd_grid_group(g, d, worst_rank, x->ranks, NULL);
		rt.len = ht.len = 0;
		group_words(x, x->ranks, dim->size, &rt, &ht);
		if (doc != NULL)
			json_array_append_new(dims, json_pack("{s:s, s:i, s:s, s:o}", "name",
				dim->name, "size", dim->size, "worst_link", dim->size > 1 ? wcode : "-",
				"groups", groups));
		else if (!rt.failed && !ht.failed)
			herd__text_printf(out, "%-8s %5d %7d  %-10s ranks %s on %s\n%s", dim->name,
					  dim->size, n / dim->size, dim->size > 1 ? wcode : "-", rt.s,
					  ht.s, lines.s != NULL ? lines.s : "");
		if (rt.failed || ht.failed || lines.failed)
			st = herd__error(HERD_ENOMEM, "out of memory for a grid's explanation");
		herd__text_free(&rt);
		herd__text_free(&ht);
		herd__text_free(&lines);
		if (st != HERD_OK)
			return st;
	}
	if (doc == NULL) {
		herd__text_printf(out, "%-6s %-16s", "rank", "host");
		for (size_t d = 0; d < g->ndims; d++)
			herd__text_printf(out, " %4s", g->dims[d].name);
		herd__text_printf(out, "\n");
	}
	for (int r = 0; r < n; r++) {
		int c[HERD_GRID_MAX_DIMS];
		json_t *row = coords != NULL ? json_array() : NULL;

		herd_grid_coords(g, r, c);
		if (doc == NULL)
			herd__text_printf(out, "%-6d %-16s", r, x->hosts[r]);
		for (size_t d = 0; d < g->ndims; d++)
			if (row != NULL)
				json_array_append_new(row, json_integer(c[d]));
			else
				herd__text_printf(out, " %4d", c[d]);
		if (row != NULL)
			json_array_append_new(coords, row);
		else
			herd__text_printf(out, "\n");
	}
	if (warns != NULL && warn->s != NULL)
		for (const char *p = warn->s; *p != '\0';) {
			size_t len = strcspn(p, "\n");

			json_array_append_new(warns, json_stringn(p, len));
			p += len + (p[len] == '\n');
		}
	return st;
}

herd_status herd_grid_explain(const herd_grid *grid, const char *const *hosts,
			      herd_grid_link_fn link, void *arg, bool json, char **out,
			      char **warnings)
{
	explainer x = { grid, hosts, link, arg, NULL, NULL, 0 };
	herd__text text = { 0 }, warn = { 0 };
	json_t *doc = NULL;
	int maxsize = 1;
	herd_status st;

	if (out != NULL)
		*out = NULL;
	if (warnings != NULL)
		*warnings = NULL;
	if (grid == NULL || hosts == NULL || link == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_grid_explain: grid, hosts, link or out is NULL");
	for (size_t d = 0; d < grid->ndims; d++)
		if (grid->dims[d].size > maxsize)
			maxsize = grid->dims[d].size;
	HERD_CHECK_GOTO(herd__calloc(&x.ranks, (size_t)maxsize, sizeof(int), "a grid"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&x.node, (size_t)grid->nranks, sizeof(int), "a grid"), st,
			out);
	HERD_CHECK_GOTO(herd__grid_hosts(hosts, grid->nranks, x.node, NULL, &x.nnodes), st, out);
	if (json && (doc = json_object()) == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory for a grid's explanation");
		goto out;
	}
	HERD_CHECK_GOTO(explain(&x, &text, doc, &warn), st, out);
	if (doc != NULL) {
		*out = json_dumps(doc, JSON_COMPACT);
		if (*out == NULL) {
			st = herd__error(HERD_ENOMEM, "out of memory for a grid's explanation");
			goto out;
		}
	} else {
		HERD_CHECK_GOTO(herd__text_take(&text, out), st, out);
	}
	if (warnings != NULL) {
		st = herd__text_take(&warn, warnings);
		if (st != HERD_OK) {
			free(*out);
			*out = NULL;
		}
	}
out:
	json_decref(doc);
	herd__text_free(&text);
	herd__text_free(&warn);
	free(x.ranks);
	free(x.node);
	return st;
}
