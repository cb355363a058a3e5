/*
 * tests/unit/test_grid.c - herd/grid.h: the layout of named dimensions
 * over ranks taken node by node, checked against a reference enumeration
 * for every order of the dimensions on 8 and 12 ranks (one node, nodes of
 * 4 in rank order, nodes whose ranks interleave), the groups along each
 * dimension, dp made up where it is missing, every bad grid refused by
 * name, and ranks grouped by host.
 */
#include "test.h"

#include "comm/grid_internal.h"

/* The ranks node by node, as the grid must take them. */
static void node_order(int n, const int *node, int *order)
{
	int k = 0;

	for (int r = 0; r < n; r++) {
		bool first = true;

		for (int q = 0; q < r && first; q++)
			first = node == NULL ? false : node[q] != node[r];
		if (!first && r > 0)
			continue;
		for (int q = r; q < n; q++)
			if (node == NULL ? q == r || false : node[q] == node[r])
				order[k++] = q;
		if (node == NULL)
			for (int q = r + 1; q < n; q++)
				order[k++] = q;
	}
}

/* Checks g against the reference: position p (mixed radix, dims[0]
 * fastest) is order[p]; groups vary one coordinate. */
static void check_layout(const herd_grid *g, const herd_grid_dim *dims, size_t nd, int n,
			 const int *node)
{
	int order[64], coords[HERD_GRID_MAX_DIMS], ranks[64], rank;

	node_order(n, node, order);
	CHECK_INT((int)herd_grid_ndims(g), (int)nd);
	for (int p = 0; p < n; p++) {
		int q = p, r = order[p];

		for (size_t d = 0; d < nd; d++) {
			int want = q % dims[d].size;

			q /= dims[d].size;
			CHECK_OK(herd_grid_coords(g, r, coords));
			CHECK_INT(coords[d], want);
		}
		CHECK_OK(herd_grid_rank(g, coords, &rank));
		CHECK_INT(rank, r);
		for (size_t d = 0; d < nd; d++) {
			int stride = 1, group = -1;

			for (size_t e = 0; e < d; e++)
				stride *= dims[e].size;
			CHECK_OK(herd_grid_group(g, d, r, ranks, &group));
			for (int c = 0; c < dims[d].size; c++) {
				int base = p - coords[d] * stride;

				CHECK_INT(ranks[c], order[base + c * stride]);
			}
			CHECK(group >= 0 && group < n / dims[d].size);
		}
	}
}

/* The places of node[0..n) (NULL: one node), one set each. */
static const herd_grid_place *places(const int *node, int n, herd_grid_place *place)
{
	if (node == NULL)
		return NULL;
	for (int r = 0; r < n; r++) {
		place[r].node = node[r];
		place[r].nvset = 0;
	}
	return place;
}

/* Every order of the dims of sizes, on n ranks placed by node. */
static void all_orders(const int *sizes, const char *const *names, size_t nd, int n,
		       const int *node)
{
	int perm[HERD_GRID_MAX_DIMS], c[HERD_GRID_MAX_DIMS] = { 0 }, count = 0;
	size_t i = 0;

	for (size_t k = 0; k < nd; k++)
		perm[k] = (int)k;
	for (;;) {
		herd_grid_dim dims[HERD_GRID_MAX_DIMS];
		herd_grid_place place[64];
		herd_grid *g = NULL;
		char order[64] = "";

		for (size_t k = 0; k < nd; k++) {
			snprintf(dims[k].name, sizeof(dims[k].name), "%s", names[perm[k]]);
			dims[k].size = sizes[perm[k]];
			snprintf(order + strlen(order), sizeof(order) - strlen(order), "%s%s",
				 k ? "-" : "", names[perm[k]]);
		}
		CHECK_OK(herd_grid_create(&g, dims, nd, order, n, places(node, n, place)));
		if (g != NULL)
			check_layout(g, dims, nd, n, node);
		herd_grid_free(g);
		count++;
		/* Heap's algorithm, iterative. */
		while (i < nd && c[i] >= (int)i) {
			c[i] = 0;
			i++;
		}
		if (i >= nd)
			break;
		{
			int j = i % 2 == 0 ? 0 : c[i], t = perm[j];

			perm[j] = perm[i];
			perm[i] = t;
		}
		c[i]++;
		i = 0;
	}
	CHECK(count >= 1);
}

static void test_every_order(void)
{
	static const char *const names[] = { "tp", "pp", "dp" };
	static const int s8[] = { 2, 2, 2 }, s12[] = { 2, 3, 2 }, s12b[] = { 4, 3, 1 };
	int two_nodes[8] = { 0, 0, 0, 0, 1, 1, 1, 1 };
	int interleaved[8] = { 5, 9, 5, 9, 5, 9, 5, 9 };
	int three_nodes[12] = { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2 };
	int mixed[12] = { 2, 1, 0, 2, 1, 0, 2, 1, 0, 2, 1, 0 };

	all_orders(s8, names, 3, 8, NULL);
	all_orders(s8, names, 3, 8, two_nodes);
	all_orders(s8, names, 3, 8, interleaved);
	all_orders(s12, names, 3, 12, NULL);
	all_orders(s12, names, 3, 12, three_nodes);
	all_orders(s12, names, 3, 12, mixed);
	all_orders(s12b, names, 3, 12, mixed);
}

/* tp inside a node: tp=4 on 2 nodes of 4 whose ranks interleave. */
static void test_inner_on_a_node(void)
{
	herd_grid_dim dims[2] = { { "tp", 4 }, { "pp", 2 } };
	int node[8] = { 0, 1, 0, 1, 0, 1, 0, 1 }, ranks[4], group;
	herd_grid_place place[8];
	herd_grid *g = NULL;

	CHECK_OK(herd_grid_create(&g, dims, 2, NULL, 8, places(node, 8, place)));
	if (g == NULL)
		return;
	CHECK_OK(herd_grid_group(g, 0, 3, ranks, &group));
	CHECK_INT(ranks[0], 1);
	CHECK_INT(ranks[1], 3);
	CHECK_INT(ranks[2], 5);
	CHECK_INT(ranks[3], 7);
	CHECK_INT(group, 1);
	CHECK_OK(herd_grid_group(g, 1, 0, ranks, &group));
	CHECK_INT(ranks[0], 0);
	CHECK_INT(ranks[1], 1);
	herd_grid_free(g);
}

static void test_dp_made_up(void)
{
	herd_grid_dim dims[HERD_GRID_MAX_DIMS];
	size_t nd = 0, d = 99;
	herd_grid *g = NULL;

	CHECK_OK(herd_grid_parse("tp=8,pp=2", dims, HERD_GRID_MAX_DIMS, &nd));
	CHECK_INT((int)nd, 2);
	CHECK_OK(herd_grid_create(&g, dims, nd, NULL, 32, NULL));
	if (g == NULL)
		return;
	CHECK_INT((int)herd_grid_ndims(g), 3);
	CHECK_STR(herd_grid_dim_at(g, 1)->name, "dp");
	CHECK_INT(herd_grid_dim_at(g, 1)->size, 2);
	CHECK_STR(herd_grid_dim_at(g, 2)->name, "pp");
	CHECK_OK(herd_grid_find(g, "pp", &d));
	CHECK_INT((int)d, 2);
	CHECK_ERR(herd_grid_find(g, "ep", &d), HERD_ENOTFOUND, "no dimension ep (it has tp, dp, pp)");
	herd_grid_free(g);
	CHECK_OK(herd_grid_parse("tp=2,cp=2", dims, HERD_GRID_MAX_DIMS, &nd));
	CHECK_OK(herd_grid_create(&g, dims, nd, NULL, 8, NULL));
	CHECK(g != NULL && strcmp(herd_grid_dim_at(g, 2)->name, "dp") == 0);
	herd_grid_free(g);
}

static void test_bad_grids(void)
{
	herd_grid_dim dims[HERD_GRID_MAX_DIMS];
	size_t nd = 0;
	herd_grid *g = NULL;
	int coords[2] = { 0, 5 }, r;

	CHECK_ERR(herd_grid_parse("tp", dims, 8, &nd), HERD_EINVAL, "\"tp\" is not NAME=SIZE");
	CHECK_ERR(herd_grid_parse("tp=0", dims, 8, &nd), HERD_EINVAL, "the size of tp is \"0\"");
	CHECK_ERR(herd_grid_parse("tp=-2", dims, 8, &nd), HERD_EINVAL, "the size of tp is \"-2\"");
	CHECK_ERR(herd_grid_parse("tp=2x", dims, 8, &nd), HERD_EINVAL, "the size of tp is \"2x\"");
	CHECK_ERR(herd_grid_parse("tp=2,tp=2", dims, 8, &nd), HERD_EINVAL, "tp is given twice");
	CHECK_ERR(herd_grid_parse("2p=2", dims, 8, &nd), HERD_EINVAL, "is not a dimension's name");
	CHECK_ERR(herd_grid_parse("tp=2,", dims, 8, &nd), HERD_EINVAL, "ends with ','");
	CHECK_ERR(herd_grid_parse("", dims, 8, &nd), HERD_EINVAL, "no dimension");
	CHECK_ERR(herd_grid_parse("a=1,b=1,c=1", dims, 2, &nd), HERD_EINVAL, "more than 2");
	CHECK_OK(herd_grid_parse("tp=3,pp=2", dims, 8, &nd));
	CHECK_ERR(herd_grid_create(&g, dims, nd, NULL, 8, NULL), HERD_EINVAL,
		  "grid tp=3,pp=2 multiplies to 6 ranks; the job has 8");
	CHECK_OK(herd_grid_parse("tp=4,dp=4", dims, 8, &nd));
	CHECK_ERR(herd_grid_create(&g, dims, nd, NULL, 8, NULL), HERD_EINVAL, "multiplies to 16 ranks");
	dims[0].size = 0;
	CHECK_ERR(herd_grid_create(&g, dims, nd, NULL, 8, NULL), HERD_EINVAL, "tp is 0");
	CHECK(g == NULL);
	CHECK_OK(herd_grid_parse("tp=2,pp=2", dims, 8, &nd));
	CHECK_OK(herd_grid_create(&g, dims, nd, NULL, 4, NULL));
	CHECK_ERR(herd_grid_coords(g, 4, coords), HERD_EINVAL, "rank 4 of a grid of 4");
	CHECK_ERR(herd_grid_rank(g, coords, &r), HERD_EINVAL, "pp coordinate 5 of 2");
	herd_grid_free(g);
}

/* The hosts of ranks: each numbered by its smallest rank, the ranks host by host. */
static void test_hosts_grouped(void)
{
	const char *hosts[7] = { "b", "a", "b", "c", "a", "b", "c" };
	int node[7], order[7], n = 0;
	const int want_node[7] = { 0, 1, 0, 3, 1, 0, 3 }, want_order[7] = { 0, 2, 5, 1, 4, 3, 6 };

	CHECK_OK(herd__grid_hosts(hosts, 7, node, order, &n));
	CHECK_INT(n, 3);
	for (int r = 0; r < 7; r++) {
		CHECK_INT(node[r], want_node[r]);
		CHECK_INT(order[r], want_order[r]);
	}
}

int main(void)
{
	TEST_RUN(test_every_order);
	TEST_RUN(test_inner_on_a_node);
	TEST_RUN(test_dp_made_up);
	TEST_RUN(test_bad_grids);
	TEST_RUN(test_hosts_grouped);
	return TEST_DONE();
}
