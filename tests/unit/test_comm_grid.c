/*
 * tests/unit/test_comm_grid.c - herd_comm_grid_create on real ranks: every
 * rank's groups against a reference enumeration for every order of the
 * dimensions on 8 ranks of one host and 12 ranks of three hosts whose
 * ranks interleave (each rank in a UTS namespace of its own, named for its
 * host), with collectives on each group; the links of the recorded DGX
 * H100 (tp on one node over NV18, pp across nodes, a tp across nodes
 * warned of) and of a PCIe node with NVLink bridges (tp inside a bridged
 * pair); a bad grid and grids that differ refused on every rank; a group's
 * failure and its flight recorder naming the group.
 */
#include <sched.h>
#include <stdlib.h>

#include <jansson.h>

#include "comm_harness.h"
#include "herd/grid.h"
#include "herd/trace.h"

typedef struct grid_case {
	const char *scope_name;
	int nodes;                  /* hosts: rank r on node r % nodes (interleaved), or */
	int node_block;             /* ... r / node_block when set */
	const char *inventory;      /* HERD_INVENTORY, and GPU r % gpus of it per rank */
	int gpus;
	const char *names[3];
	int sizes[3];
	int expect[16];             /* grid position -> rank */
	const char *spec;           /* one grid (default order), instead of every order */
	const char *want[4];        /* in its explanation */
	const char *trace_dir;
} grid_case;

static int node_of(const grid_case *c, int rank)
{
	if (c->node_block > 0)
		return rank / c->node_block;
	return c->nodes > 1 ? rank % c->nodes : 0;
}

/* In a rank: its own host name, and its GPU. */
static void set_up(const grid_case *c, int rank)
{
	if (c->nodes > 1 || c->node_block > 0) {
		char host[32];

		snprintf(host, sizeof(host), "gridnode%d", node_of(c, rank));
		if (unshare(CLONE_NEWUTS) != 0 || sethostname(host, strlen(host)) != 0) {
			fprintf(stderr, "rank %d: cannot name its host %s: %s\n", rank, host,
				strerror(errno));
			exit(1);
		}
	}
	if (c->inventory != NULL) {
		json_t *doc = json_load_file(c->inventory, 0, NULL);
		json_t *gpu = json_array_get(json_object_get(json_array_get(
			json_object_get(doc, "nodes"), 0), "gpus"), (size_t)(rank % c->gpus));

		setenv("HERD_INVENTORY", c->inventory, 1);
		setenv("CUDA_VISIBLE_DEVICES", json_string_value(json_object_get(gpu, "uuid")), 1);
		json_decref(doc);
	}
	if (c->trace_dir != NULL)
		setenv("HERD_TRACE_DIR", c->trace_dir, 1);
}

/* The grid of one order checked against the reference on this rank. */
static void check_grid(herd_comm *comm, const grid_case *c, const herd_grid_dim *dims,
		       size_t nd, const char *order)
{
	int rank = herd_comm_rank(comm), size = herd_comm_size(comm), pos = -1;
	herd_comm_grid *g = NULL;

	CHECK_OK(herd_comm_grid_create(&g, comm, dims, nd, order));
	if (g == NULL)
		return;
	for (int p = 0; p < size; p++)
		if (c->expect[p] == rank)
			pos = p;
	for (size_t d = 0, stride = 1; d < nd; stride *= (size_t)dims[d].size, d++) {
		herd_comm *group = NULL;
		int coord = pos / (int)stride % dims[d].size, want[16], got[16];
		int64_t sum = 0, mine = rank, total = -1;

		CHECK_OK(herd_comm_grid_group(g, dims[d].name, &group));
		if (group == NULL)
			continue;
		CHECK_INT(herd_comm_size(group), dims[d].size);
		CHECK_INT(herd_comm_rank(group), coord);
		for (int k = 0; k < dims[d].size; k++) {
			want[k] = c->expect[pos + (k - coord) * (int)stride];
			sum += want[k];
		}
		CHECK_OK(herd_comm_allgather(group, &rank, got, 1, HERD_INT32));
		for (int k = 0; k < dims[d].size; k++)
			CHECK_INT(got[k], want[k]);
		CHECK_OK(herd_comm_allreduce(group, &mine, &total, 1, HERD_INT64, HERD_SUM));
		CHECK_INT(total, sum);
	}
	CHECK_OK(herd_comm_grid_group(g, "dp", &(herd_comm *){ NULL }));
	herd_comm_grid_free(g);
}

static void grid_rank(int rank, int size, void *arg)
{
	const grid_case *c = arg;
	herd_comm *comm = NULL;
	herd_grid_dim dims[3];
	int perm[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
			   { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
	char scope[64];

	set_up(c, rank);
	snprintf(scope, sizeof(scope), "%s/", c->scope_name);
	CHECK_OK(harness_comm(&comm, scope, rank, size, "auto", 30000));
	if (comm == NULL)
		return;
	if (c->spec != NULL) {
		herd_comm_grid *g = NULL;
		size_t nd = 0;

		CHECK_OK(herd_grid_parse(c->spec, dims, 3, &nd));
		CHECK_OK(herd_comm_grid_create(&g, comm, dims, nd, NULL));
		for (size_t d = 0; g != NULL && d < herd_grid_ndims(herd_comm_grid_layout(g)); d++) {
			const herd_grid_dim *dim = herd_grid_dim_at(herd_comm_grid_layout(g), d);
			herd_comm *group = NULL;
			int ranks[16], coords[HERD_GRID_MAX_DIMS];

			CHECK_OK(herd_comm_grid_group(g, dim->name, &group));
			CHECK_OK(herd_grid_coords(herd_comm_grid_layout(g), rank, coords));
			CHECK_OK(herd_grid_group(herd_comm_grid_layout(g), d, rank, ranks, NULL));
			CHECK_INT(ranks[coords[d]], rank);
			if (group != NULL)
				CHECK_OK(herd_comm_barrier(group));
		}
		for (int k = 0; k < 4 && c->want[k] != NULL && g != NULL; k++)
			if (strstr(herd_comm_grid_explain(g), c->want[k]) == NULL)
				TEST_FAIL_("rank %d: the explanation lacks \"%s\":\n%s", rank,
					   c->want[k], herd_comm_grid_explain(g));
		herd_comm_grid_free(g);
	} else {
		for (int o = 0; o < 6; o++) {
			char order[64];

			for (int k = 0; k < 3; k++) {
				snprintf(dims[k].name, sizeof(dims[k].name), "%s", c->names[perm[o][k]]);
				dims[k].size = c->sizes[perm[o][k]];
			}
			snprintf(order, sizeof(order), "%s-%s-%s", dims[0].name, dims[1].name,
				 dims[2].name);
			check_grid(comm, c, dims, 3, order);
		}
	}
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void test_every_order_on_8_ranks_of_one_host(void)
{
	grid_case c = { .scope_name = "grid8", .names = { "tp", "pp", "dp" },
			.sizes = { 2, 2, 2 }, .expect = { 0, 1, 2, 3, 4, 5, 6, 7 } };

	CHECK_INT(run_ranks(8, grid_rank, &c, 90000, NULL, NULL, 0, NULL), 0);
}

static void test_every_order_on_12_ranks_of_three_interleaved_hosts(void)
{
	/* Node by node: node 0 holds 0,3,6,9, node 1 1,4,7,10, node 2 the rest. */
	grid_case c = { .scope_name = "grid12", .nodes = 3, .names = { "tp", "pp", "dp" },
			.sizes = { 2, 3, 2 },
			.expect = { 0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11 } };

	CHECK_INT(run_ranks(12, grid_rank, &c, 110000, NULL, NULL, 0, NULL), 0);
}

static void test_dgx_h100_tp_on_nvlink_pp_across_nodes(void)
{
	char inv[512];
	grid_case c = { .scope_name = "griddgx", .node_block = 4, .gpus = 4,
			.spec = "tp=4,pp=2",
			.want = { "tp           4       2  NV18       ranks 0-3 on gridnode0",
				  "pp           2       4  NET        ranks 0,4 on gridnode0,gridnode1" } };
	grid_case across = c;

	snprintf(inv, sizeof(inv), "%s/tests/fixtures/inventory/dgx-h100.json",
		 getenv("HERD_SOURCE_DIR") ? getenv("HERD_SOURCE_DIR") : ".");
	c.inventory = across.inventory = inv;
	CHECK_INT(run_ranks(8, grid_rank, &c, 60000, NULL, NULL, 0, NULL), 0);
	across.scope_name = "griddgx8";
	across.spec = "tp=8";
	across.want[0] = "tp           8       1  NET";
	across.want[1] = "warning: tp group 0 (ranks 0-7) spans gridnode0,gridnode1: its links "
			 "are NET";
	across.want[2] = NULL;
	CHECK_INT(run_ranks(8, grid_rank, &across, 60000, NULL, NULL, 0, NULL), 0);
}

static void test_pcie_node_puts_tp_inside_a_bridged_pair(void)
{
	char src[512], inv[] = "/tmp/herd-grid-bridged-XXXXXX";
	json_t *doc, *gpus;
	int fd = mkstemp(inv);
	grid_case c = { .scope_name = "gridpcie", .gpus = 4, .spec = "tp=2",
			.want = { "tp           2       2  NV4        ranks 0,2 on",
				  "dp           2       2  NODE       ranks 2,3 on" } };

	/* A PCIe node whose GPUs 0 and 2, and 1 and 3, have NVLink bridges. */
	snprintf(src, sizeof(src), "%s/tests/fixtures/inventory/pcie-4gpu.json",
		 getenv("HERD_SOURCE_DIR") ? getenv("HERD_SOURCE_DIR") : ".");
	doc = json_load_file(src, 0, NULL);
	gpus = json_object_get(json_array_get(json_object_get(doc, "nodes"), 0), "gpus");
	CHECK(fd >= 0 && json_array_size(gpus) == 4);
	for (size_t i = 0; i < 4 && fd >= 0; i++) {
		json_t *peer = json_object_get(json_object_get(json_array_get(gpus, (i + 2) % 4),
							       "pci"), "bus_id");

		json_object_set_new(json_array_get(gpus, i), "nvlinks",
				    json_pack("[{s:O, s:i}]", "peer_bus_id", peer, "links", 4));
	}
	CHECK_INT(json_dumpfd(doc, fd, 0), 0);
	json_decref(doc);
	close(fd);
	c.inventory = inv;
	CHECK_INT(run_ranks(4, grid_rank, &c, 60000, NULL, NULL, 0, NULL), 0);
	unlink(inv);
}

/* ---- bad grids, a failure in a group, the flight recorder ---- */

static void bad_rank(int rank, int size, void *arg)
{
	const char *dir = arg;
	herd_comm *comm = NULL, *tp = NULL;
	herd_comm_grid *g = NULL;
	herd_grid_dim two[1] = { { "tp", 2 } }, four[1] = { { "tp", 4 } };
	herd_grid_dim three[1] = { { "tp", 3 } }, odd[1] = { { "xx", 2 } };
	herd_grid_dim zero[1] = { { "tp", 2 } };
	int64_t v = rank, out = 0;

	setenv("HERD_TRACE_DIR", dir, 1);
	CHECK_OK(harness_comm(&comm, "gridbad/", rank, size, "auto", 20000));
	if (comm == NULL)
		return;
	CHECK_ERR(herd_comm_grid_create(&g, comm, three, 1, NULL), HERD_EINVAL,
		  "grid: rank 0: grid tp=3 multiplies to 3 ranks; the job has 4");
	CHECK_ERR(herd_comm_grid_create(&g, comm, odd, 1, NULL), HERD_EINVAL,
		  "xx is not a dimension of the order tp-cp-ep-dp-pp");
	zero[0].size = rank == 2 ? 0 : 2;
	CHECK_ERR(herd_comm_grid_create(&g, comm, zero, 1, NULL), HERD_EINVAL,
		  "grid: rank 2: herd_grid_create: tp is 0");
	CHECK_ERR(herd_comm_grid_create(&g, comm, rank == 3 ? four : two, 1, NULL),
		  HERD_EMISMATCH, "the ranks' grids differ: rank 0 has tp=2,dp=2, rank 3 tp=4");
	CHECK(g == NULL);
	/* The parent still works, and a grid after the refusals. */
	CHECK_OK(herd_comm_grid_create(&g, comm, two, 1, NULL));
	CHECK_OK(herd_comm_grid_take(g, "tp", &tp));
	CHECK_ERR(herd_comm_grid_group(g, "tp", &(herd_comm *){ NULL }), HERD_ENOTFOUND,
		  "the grid's tp group was taken out of it");
	CHECK_ERR(herd_comm_grid_group(g, "pp", &(herd_comm *){ NULL }), HERD_ENOTFOUND,
		  "no dimension pp (it has tp, dp)");
	herd_comm_grid_free(g);
	CHECK_OK(herd_comm_allreduce(tp, &v, &out, 1, HERD_INT64, HERD_SUM));
	CHECK_INT(out, rank < 2 ? 1 : 5);
	if (rank == 3)
		_exit(0);   /* gone: its tp group's peer must say so, naming the group */
	if (rank == 2)
		CHECK_ERR(herd_comm_allreduce(tp, &v, &out, 1, HERD_INT64, HERD_SUM), HERD_EPEER,
			  "rank 1 (host ");
	if (rank == 2 && strstr(herd_last_error(), ", in tp group 1, rank 3 of its parent) died") == NULL)
		TEST_FAIL_("rank 2: the failure does not name the group: %s", herd_last_error());
	herd_comm_free(tp);
	herd_comm_free(comm);
}

static void test_bad_grids_fail_on_every_rank_and_groups_are_named(void)
{
	char dir[] = "/tmp/herd-grid-trace-XXXXXX", *text = NULL;
	rank_result res[4];

	CHECK(mkdtemp(dir) != NULL);
	memset(res, 0, sizeof(res));
	CHECK_INT(run_ranks(4, bad_rank, dir, 60000, NULL, NULL, 0, res), 0);
	CHECK_OK(herd_trace_report(dir, HERD_TRACE_TEXT, &text));
	if (text != NULL && (strstr(text, "(2 ranks, tp group 0)") == NULL ||
			     strstr(text, "(2 ranks, tp group 1)") == NULL ||
			     strstr(text, ", parent rank 3)") == NULL))
		TEST_FAIL_("the flight recorders do not name the groups:\n%s", text);
	free(text);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK_INT(system(cmd), 0);
	}
}

int main(void)
{
	harness_start();
	TEST_RUN(test_every_order_on_8_ranks_of_one_host);
	TEST_RUN(test_every_order_on_12_ranks_of_three_interleaved_hosts);
	TEST_RUN(test_dgx_h100_tp_on_nvlink_pp_across_nodes);
	TEST_RUN(test_pcie_node_puts_tp_inside_a_bridged_pair);
	TEST_RUN(test_bad_grids_fail_on_every_rank_and_groups_are_named);
	harness_stop();
	return TEST_DONE();
}
