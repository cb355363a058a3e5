/*
 * sdk/comm/comm_grid.c - a grid laid on a communicator (herd/grid.h,
 * herd_comm_grid_create): one exchange of what each rank makes of the grid, its
 * host and its GPU's links, then the grid laid node by node and NVLink
 * set by set, and a split per dimension.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "comm/core.h"
#include "comm/grid_internal.h"
#include "herd/alloc.h"
#include "herd/cluster.h"
#include "herd/grid.h"

/* The GPUs of a node whose links a rank sends: more are not linked. */
#define ROW_MAX 64

/* What each rank sends the others, once. */
typedef struct grid_record {
	int32_t status;              /* herd_status of the grid as this rank made it */
	int32_t gpu;                 /* its GPU in its node's inventory; -1: none known */
	int32_t ngpus;               /* the entries of the row below */
	uint8_t kind[ROW_MAX];       /* herd_link_kind from its GPU to each of the node's */
	uint8_t nvlinks[ROW_MAX];
	char text[384];              /* the grid ("tp=2,dp=2,pp=2"), or what is wrong with it */
} grid_record;

struct herd_comm_grid {
	herd_grid *layout;
	herd_comm *group[HERD_GRID_MAX_DIMS];
	bool taken[HERD_GRID_MAX_DIMS];
	char *explanation;
};

/* Everyone's records, for the links between ranks. */
typedef struct grid_links {
	const grid_record *rec;
	const int *node;             /* rank -> its host's number */
} grid_links;

/* This rank's GPU: the first of CUDA_VISIBLE_DEVICES, in this node's inventory. */
static void find_gpu(grid_record *rec)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	herd_cluster *cluster = NULL;
	const herd_node *node = NULL;
	char first[HERD_NAME_LEN];
	size_t at, len;
	char *end = NULL;
	long index;

	rec->gpu = -1;
	if (cvd == NULL || cvd[0] == '\0')
		return;
	len = strcspn(cvd, ",");
	snprintf(first, sizeof(first), "%.*s", (int)len, cvd);
	if (herd_cluster_discover(&cluster, NULL) != HERD_OK ||
	    herd_alloc_this_node(cluster, &at) != HERD_OK ||
	    herd_cluster_node(cluster, at, &node) != HERD_OK) {
		herd__log_debug("grid: this rank's GPU (CUDA_VISIBLE_DEVICES=%s) is not known: %s",
				cvd, herd_last_error());
		herd_cluster_free(cluster);
		return;
	}
	index = strtol(first, &end, 10);
	if (end == first || *end != '\0')
		for (index = 0; index < (long)node->ngpus &&
				strcmp(node->gpus[index].uuid, first) != 0; index++)
			;
	if (index >= 0 && index < (long)node->ngpus && index < ROW_MAX) {
		rec->gpu = (int32_t)index;
		rec->ngpus = (int32_t)(node->ngpus < ROW_MAX ? node->ngpus : ROW_MAX);
		for (int j = 0; j < rec->ngpus; j++) {
			herd_link l = { HERD_LINK_SYS, 0 };

			herd_node_gpu_link(node, (size_t)index, (size_t)j, &l);
			rec->kind[j] = (uint8_t)l.kind;
			rec->nvlinks[j] = (uint8_t)l.nvlinks;
		}
	}
	herd_cluster_free(cluster);
}

static int rank_link(void *arg, int a, int b, char code[HERD_GRID_LINK_LEN])
{
	const grid_links *x = arg;
	const grid_record *ra = &x->rec[a], *rb = &x->rec[b];
	herd_link l;

	if (x->node[a] != x->node[b])
		return herd_grid_link_class(NULL, false, code);
	if (ra->gpu < 0 || rb->gpu < 0 || rb->gpu >= ra->ngpus)
		return herd_grid_link_class(NULL, true, code);
	l.kind = ra->gpu == rb->gpu ? HERD_LINK_SELF : (herd_link_kind)ra->kind[rb->gpu];
	l.nvlinks = ra->gpu == rb->gpu ? 0 : ra->nvlinks[rb->gpu];
	return herd_grid_link_class(&l, true, code);
}

/* The grid as given, in order, into rec: its text, or what is wrong. */
static void make_record(grid_record *rec, const herd_grid_dim *dims, size_t ndims,
			const char *order, int size)
{
	herd_grid *g = NULL;
	herd_status st = herd_grid_create(&g, dims, ndims, order, size, NULL);

	rec->status = (int32_t)st;
	if (st != HERD_OK) {
		snprintf(rec->text, sizeof(rec->text), "%s", herd_last_error());
		return;
	}
	for (size_t d = 0, o = 0; d < herd_grid_ndims(g) && o < sizeof(rec->text); d++)
		o += (size_t)snprintf(rec->text + o, sizeof(rec->text) - o, "%s%s=%d", d ? "," : "",
				      herd_grid_dim_at(g, d)->name, herd_grid_dim_at(g, d)->size);
	herd_grid_free(g);
}

/* The verdict on everyone's records: the first rank at fault, or two that differ. */
static herd_status agree(const grid_record *all, int size)
{
	for (int r = 0; r < size; r++)
		if (all[r].status != HERD_OK)
			return herd__error((herd_status)all[r].status, "grid: rank %d: %s", r,
					   all[r].text);
	for (int r = 1; r < size; r++)
		if (strcmp(all[r].text, all[0].text) != 0)
			return herd__error(HERD_EMISMATCH, "grid: the ranks' grids differ: rank 0 "
					   "has %s, rank %d %s", all[0].text, r, all[r].text);
	return HERD_OK;
}

/* Whether ranks a and b of one host have GPUs that NVLink joins (or one GPU). */
static bool nvlinked(const grid_links *x, int a, int b)
{
	const grid_record *ra = &x->rec[a], *rb = &x->rec[b];

	return ra->gpu >= 0 && rb->gpu >= 0 && rb->gpu < ra->ngpus &&
	       (ra->gpu == rb->gpu || ra->kind[rb->gpu] == HERD_LINK_NVLINK);
}

/*
 * Each rank's place: its host, and its NVLink set there, named by its
 * smallest rank (-1: the ranks whose GPU is not known).  order: the ranks
 * host by host (herd__grid_hosts); the sets are found within each host.
 */
static void find_places(const grid_links *x, int size, const int *order,
			herd_grid_place *place)
{
	for (int r = 0; r < size; r++) {
		place[r].node = x->node[r];
		place[r].nvset = x->rec[r].gpu >= 0 ? r : -1;
	}
	for (int s = 0, e; s < size; s = e) {
		for (e = s + 1; e < size && x->node[order[e]] == x->node[order[s]]; e++)
			;
		/* A host's ranks: join the sets of every linked pair. */
		for (int i = s; i < e; i++)
			for (int j = i + 1; j < e; j++) {
				int a = order[i], b = order[j], lo, hi;

				if (!nvlinked(x, a, b) || place[a].nvset == place[b].nvset)
					continue;
				lo = place[a].nvset < place[b].nvset ? place[a].nvset : place[b].nvset;
				hi = place[a].nvset < place[b].nvset ? place[b].nvset : place[a].nvset;
				for (int k = s; k < e; k++)
					if (place[order[k]].nvset == hi)
						place[order[k]].nvset = lo;
			}
	}
}

/* Ranks of a host that each see every GPU claim the same first one: which
 * each uses is not known then.  order: the ranks host by host. */
static void forget_shared_gpus(grid_record *all, const int *node, const int *order, int size,
			       int *shared)
{
	for (int r = 0; r < size; r++)
		shared[r] = 0;
	for (int s = 0, e; s < size; s = e) {
		for (e = s + 1; e < size && node[order[e]] == node[order[s]]; e++)
			;
		for (int i = s; i < e; i++)
			for (int j = i + 1; j < e; j++)
				if (all[order[i]].gpu >= 0 && all[order[i]].gpu == all[order[j]].gpu)
					shared[order[i]] = shared[order[j]] = 1;
	}
	for (int r = 0; r < size; r++)
		if (shared[r])
			all[r].gpu = -1;
}

/* The explanation, and its warnings said at rank 0. */
static herd_status explain(herd_comm_grid *g, const char *const *hosts, const grid_links *x,
			   int rank)
{
	char *text = NULL, *warn = NULL;
	herd__text all = { 0 };

	HERD_CHECK(herd_grid_explain(g->layout, hosts, rank_link, (void *)x, false, &text, &warn));
	herd__text_printf(&all, "%s", text);
	for (const char *p = warn; *p != '\0';) {
		size_t len = strcspn(p, "\n");

		herd__text_printf(&all, "warning: %.*s\n", (int)len, p);
		if (rank == 0)
			herd__log_warn("grid: %.*s", (int)len, p);
		p += len + (p[len] == '\n');
	}
	free(text);
	free(warn);
	return herd__text_take(&all, &g->explanation);
}

herd_status herd_comm_grid_create(herd_comm_grid **out, herd_comm *comm,
				  const herd_grid_dim *dims, size_t ndims, const char *order)
{
	herd_comm_grid *g = NULL;
	grid_record mine, *all = NULL;
	herd_grid_place *place = NULL;
	const char **hosts = NULL;
	int *node = NULL, *ranks = NULL, *byhost = NULL, size, rank, nhosts = 0;
	int coords[HERD_GRID_MAX_DIMS];
	grid_links x;
	herd_status st;

	/* dims NULL is refused with the others' knowledge, in the exchange. */
	if (out == NULL || comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_grid_create: out or comm is NULL");
	*out = NULL;
	size = herd_comm_size(comm);
	rank = herd_comm_rank(comm);
	memset(&mine, 0, sizeof(mine));
	make_record(&mine, dims, ndims, order, size);
	if (mine.status == HERD_OK)
		find_gpu(&mine);
	HERD_CHECK(herd__calloc(&all, (size_t)size, sizeof(*all), "a grid's exchange"));
	HERD_CHECK_GOTO(herd__calloc(&node, (size_t)size, sizeof(int), "a grid"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&hosts, (size_t)size, sizeof(char *), "a grid"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&place, (size_t)size, sizeof(*place), "a grid"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&ranks, (size_t)size, sizeof(int), "a grid"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&byhost, (size_t)size, sizeof(int), "a grid"), st, out);
	HERD_CHECK_GOTO(herd_comm_allgather(comm, &mine, all, sizeof(mine), HERD_UINT8), st, out);
	HERD_CHECK_GOTO(agree(all, size), st, out);
	for (int r = 0; r < size; r++)
		herd_comm_host(comm, r, &hosts[r]);
	HERD_CHECK_GOTO(herd__grid_hosts(hosts, size, node, byhost, &nhosts), st, out);
	forget_shared_gpus(all, node, byhost, size, ranks);   /* ranks: scratch here */
	x.rec = all;
	x.node = node;
	find_places(&x, size, byhost, place);
	HERD_CHECK_GOTO(herd__calloc(&g, 1, sizeof(*g), "a grid"), st, out);
	HERD_CHECK_GOTO(herd_grid_create(&g->layout, dims, ndims, order, size, place), st, out);
	herd_grid_coords(g->layout, rank, coords);
	for (size_t d = 0; d < herd_grid_ndims(g->layout); d++) {
		int group = 0;
		char name[64];

		herd_grid_group(g->layout, d, rank, ranks, &group);
		snprintf(name, sizeof(name), "%s group %d", herd_grid_dim_at(g->layout, d)->name,
			 group);
		HERD_CHECK_GOTO(herd__comm_split_named(&g->group[d], comm, group, coords[d], name),
				st, out);
	}
	HERD_CHECK_GOTO(explain(g, hosts, &x, rank), st, out);
	*out = g;
	g = NULL;
out:
	herd_comm_grid_free(g);
	free(all);
	free(node);
	free(ranks);
	free(byhost);
	free(hosts);
	free(place);
	return st;
}

const herd_grid *herd_comm_grid_layout(const herd_comm_grid *g)
{
	return g != NULL ? g->layout : NULL;
}

/* The dimension named name of g into *d. */
static herd_status find_dim(const herd_comm_grid *g, const char *name, const char *fn, size_t *d)
{
	if (g == NULL || name == NULL)
		return herd__error(HERD_EINVAL, "%s: g or name is NULL", fn);
	HERD_CHECK(herd_grid_find(g->layout, name, d));
	if (g->taken[*d])
		return herd__error(HERD_ENOTFOUND, "the grid's %s group was taken out of it: the "
				   "caller that took it holds it", name);
	return HERD_OK;
}

herd_status herd_comm_grid_group(const herd_comm_grid *g, const char *name, herd_comm **group)
{
	size_t d;

	if (group == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_grid_group: group is NULL");
	*group = NULL;
	HERD_CHECK(find_dim(g, name, "herd_comm_grid_group", &d));
	*group = g->group[d];
	return HERD_OK;
}

herd_status herd_comm_grid_take(herd_comm_grid *g, const char *name, herd_comm **group)
{
	size_t d;

	if (group == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_grid_take: group is NULL");
	*group = NULL;
	HERD_CHECK(find_dim(g, name, "herd_comm_grid_take", &d));
	*group = g->group[d];
	g->group[d] = NULL;
	g->taken[d] = true;
	return HERD_OK;
}

const char *herd_comm_grid_explain(const herd_comm_grid *g)
{
	return g != NULL && g->explanation != NULL ? g->explanation : "";
}

void herd_comm_grid_free(herd_comm_grid *g)
{
	if (g == NULL)
		return;
	for (size_t d = 0; d < HERD_GRID_MAX_DIMS; d++)
		herd_comm_free(g->group[d]);
	herd_grid_free(g->layout);
	free(g->explanation);
	free(g);
}
