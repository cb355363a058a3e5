/*
 * shell/cmd_alloc.c - `herd alloc`, which plans an allocation on this node
 * (or an inventory) against the current leases and prints it, and `herd
 * gpus`, which shows every GPU of the node and who holds it.
 *
 * `herd alloc` takes no lease: a lease lives as long as its holder, and
 * the holder of a job's leases is the job's `herd exec`.  It reads them,
 * so what it prints is what a job started now would get.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "herd.h"
#include "shell.h"

static const char alloc_usage[] =
	"usage: herd alloc -g N [--per-node K] [--nodes M] [--gpus-per-rank R]\n"
	"                  [--link any|same-node|nvlink|same-numa] [--min-memory SIZE]\n"
	"                  [--near-nic] [--shared] [--pack|--spread]\n"
	"                  [--exclude LIST] [--include LIST] [--inventory FILE]\n"
	"                  [--lease-dir DIR] [--ignore-slurm] [--explain] [--env]\n"
	"                  [--grid tp=T,pp=P,...] [--grid-order ORDER] [--json]\n"
	"  -g, --gpus N         GPUs in all (one per rank)\n"
	"  --per-node K         GPUs on each node used\n"
	"  --nodes M            nodes to use\n"
	"  --gpus-per-rank R    GPUs of each rank (default 1)\n"
	"  --link L             what each node's GPUs must share: any (default),\n"
	"                       same-node, nvlink (every pair NV#), same-numa\n"
	"  --min-memory SIZE    free memory each GPU must have (40G, 512MiB, bytes)\n"
	"  --near-nic           prefer GPUs close to a NIC\n"
	"  --shared             GPUs may be shared with other shared jobs\n"
	"  --pack, --spread     fill few nodes (default), or use many\n"
	"  --exclude LIST       never use these GPUs (UUIDs, PCI bus ids) or hosts,\n"
	"                       comma-separated\n"
	"  --include LIST       use only these\n"
	"  --inventory FILE     plan for this inventory (default: $HERD_INVENTORY,\n"
	"                       else this node)\n"
	"  --lease-dir DIR      the lease directory (default: $HERD_LEASE_DIR,\n"
	"                       /run/herd, $XDG_RUNTIME_DIR/herd)\n"
	"  --ignore-slurm       plan over every GPU, not only those a Slurm job\n"
	"                       was granted\n"
	"  --explain            say why these GPUs\n"
	"  --env                print each rank's environment (CUDA_VISIBLE_DEVICES,\n"
	"                       NCCL hints)\n"
	"  --grid SPEC          the parallel grid the planned ranks would get\n"
	"                       (tp=8,pp=2; a missing dp is what the rest makes):\n"
	"                       each dimension's groups, the worst link in each\n"
	"                       (NV18, PIX, SYS, NET), each rank's coordinates,\n"
	"                       and a warning for a tp or innermost group across\n"
	"                       nodes\n"
	"  --grid-order ORDER   the dimensions' order, innermost first (default\n"
	"                       Megatron's tp-cp-ep-dp-pp)\n"
	"  --json               the plan as one JSON document (with --explain,\n"
	"                       --env and --grid, their text, variables and grid)\n"
	"Plans against the GPUs' current leases and Slurm's grant and takes no\n"
	"lease (\"holds_leases\": false): it ends with this command.  herd.alloc in\n"
	"Lua takes the leases and holds them while its plan lives, unless\n"
	"hold = false; herd launch --gpus-per-rank holds them for the job.\n"
	"Exit status:\n"
	"  0    the plan was printed\n"
	"  1    no plan meets the request (GPUs leased, too few, too far apart),\n"
	"       or this node could not be probed\n"
	"  2    a usage error, a request the planner refuses as it stands, or an\n"
	"       inventory that cannot be read\n";

static const char gpus_usage[] =
	"usage: herd gpus [--inventory FILE] [--lease-dir DIR] [--json]\n"
	"  every GPU of this node (or of the inventory's node that stands for it)\n"
	"  and who holds its lease: job, pid, user, since; and the compute\n"
	"  processes NVML shows on it\n"
	"Exit status:\n"
	"  0    the GPUs were printed\n"
	"  1    this node or its leases could not be read\n"
	"  2    a usage error, or an inventory that cannot be read\n";

/* Names split from a comma-separated option, kept for the request. */
struct name_list {
	char *buf;
	const char **names;
	size_t n;
};

struct alloc_args {
	herd_alloc_request req;
	const char *inventory;
	const char *lease_dir;
	int explain;
	int env;
	int json;
	int ignore_slurm;
	herd_grid_dim grid[HERD_GRID_MAX_DIMS];
	size_t ngrid;
	const char *grid_order;
	struct name_list exclude, include;
};

/* ------------------------------------------------------------- parsing */

/* A count option: a whole number, 0 or more (the library checks ranges). */
static int parse_count(const char *opt, const char *value, int *out)
{
	char msg[160];

	if (shell_parse_int(value, 0, INT_MAX, out) != 0) {
		snprintf(msg, sizeof(msg), "%s needs a whole number of 0 or more, not '%.64s'", opt,
			 value);
		shell_usage_error("alloc", "%s", msg);
		return -1;
	}
	return 0;
}

static int split_names(const char *value, struct name_list *l)
{
	size_t n = 1;
	char *p;

	free(l->buf);
	free(l->names);
	memset(l, 0, sizeof(*l));
	for (const char *c = value; *c; c++)
		n += *c == ',';
	l->buf = strdup(value);
	l->names = calloc(n, sizeof(char *));
	if (l->buf == NULL || l->names == NULL)
		return -1;
	for (p = strtok(l->buf, ","); p != NULL; p = strtok(NULL, ","))
		l->names[l->n++] = p;
	return 0;
}

static void names_free(struct name_list *l)
{
	free(l->buf);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

/* Parses `herd alloc`'s argv; -1 to go on, else the exit status. */
static int parse_alloc(int argc, char **argv, struct alloc_args *a)
{
	int got_gpus = 0;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *v = NULL;
		int r;

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			fputs(alloc_usage, stdout);
			return SHELL_EXIT_OK;
		} else if (strcmp(arg, "--explain") == 0) {
			a->explain = 1;
		} else if (strcmp(arg, "--env") == 0) {
			a->env = 1;
		} else if (strcmp(arg, "--json") == 0) {
			a->json = 1;
		} else if (strcmp(arg, "--ignore-slurm") == 0) {
			a->ignore_slurm = 1;
		} else if (strcmp(arg, "--near-nic") == 0) {
			a->req.near_nic = 1;
		} else if (strcmp(arg, "--shared") == 0) {
			a->req.shared = 1;
		} else if (strcmp(arg, "--pack") == 0) {
			a->req.policy = HERD_ALLOC_PACK;
		} else if (strcmp(arg, "--spread") == 0) {
			a->req.policy = HERD_ALLOC_SPREAD;
		} else if ((r = shell_option_value(argc, argv, &i, "--gpus", &v)) != 0 ||
			   (r = shell_option_value(argc, argv, &i, "-g", &v)) != 0) {
			if (r < 0)
				return shell_usage_error("alloc", "option '%s' needs a count", arg);
			if (parse_count("-g", v, &a->req.gpus) != 0)
				return SHELL_EXIT_USAGE;
			got_gpus = 1;
		} else if ((r = shell_option_value(argc, argv, &i, "--per-node", &v)) != 0) {
			if (r < 0 || parse_count("--per-node", v, &a->req.gpus_per_node) != 0)
				return r < 0 ? shell_usage_error("alloc", "option '%s' needs a count", arg)
					     : SHELL_EXIT_USAGE;
			/* 0 is the library's "unset"; typed, it is a mistake. */
			if (a->req.gpus_per_node == 0)
				return shell_usage_error("alloc", "--per-node 0: expected 1 or more GPUs on "
						   "each node used (leave it out to let the planner "
						   "choose)%s", "");
		} else if ((r = shell_option_value(argc, argv, &i, "--nodes", &v)) != 0) {
			if (r < 0 || parse_count("--nodes", v, &a->req.nodes) != 0)
				return r < 0 ? shell_usage_error("alloc", "option '%s' needs a count", arg)
					     : SHELL_EXIT_USAGE;
			if (a->req.nodes == 0)
				return shell_usage_error("alloc", "--nodes 0: expected 1 or more nodes (leave "
						   "it out to let the planner choose)%s", "");
		} else if ((r = shell_option_value(argc, argv, &i, "--gpus-per-rank", &v)) != 0) {
			if (r < 0 || parse_count("--gpus-per-rank", v, &a->req.gpus_per_rank) != 0)
				return r < 0 ? shell_usage_error("alloc", "option '%s' needs a count", arg)
					     : SHELL_EXIT_USAGE;
		} else if ((r = shell_option_value(argc, argv, &i, "--link", &v)) != 0) {
			if (r < 0)
				return shell_usage_error("alloc", "option '%s' needs a value", arg);
			if (herd_alloc_link_parse(v, &a->req.link) != HERD_OK)
				return shell_usage_error("alloc", "%s", shell_last_error());
		} else if ((r = shell_option_value(argc, argv, &i, "--min-memory", &v)) != 0) {
			if (r < 0 || shell_parse_bytes(v, &a->req.min_free_memory_bytes) != 0)
				return shell_usage_error("alloc", "--min-memory needs a size (40G, 512MiB, bytes), not "
					"'%s'",
					r < 0 ? "" : v);
		} else if ((r = shell_option_value(argc, argv, &i, "--exclude", &v)) != 0 ||
			   (r = shell_option_value(argc, argv, &i, "--include", &v)) != 0) {
			struct name_list *l = arg[2] == 'e' ? &a->exclude : &a->include;

			if (r < 0 || v[0] == '\0')
				return shell_usage_error("alloc", "option '%s' needs a list",
						   arg);
			if (split_names(v, l) != 0) {
				shell_message(shell_command, "out of memory");
				return SHELL_EXIT_FAILURE;
			}
		} else if ((r = shell_option_value(argc, argv, &i, "--grid", &v)) != 0) {
			if (r < 0)
				return shell_usage_error("alloc", "option '%s' needs a grid (tp=8,pp=2)",
							 arg);
			if (herd_grid_parse(v, a->grid, HERD_GRID_MAX_DIMS, &a->ngrid) != HERD_OK)
				return shell_usage_error("alloc", "--grid: %s", shell_last_error());
		} else if ((r = shell_option_value(argc, argv, &i, "--grid-order", &a->grid_order)) != 0) {
			if (r < 0 || a->grid_order[0] == '\0')
				return shell_usage_error("alloc", "option '%s' needs an order (tp-dp-pp)",
							 "--grid-order");
		} else if ((r = shell_option_value(argc, argv, &i, "--inventory", &a->inventory)) != 0) {
			if (r < 0 || a->inventory[0] == '\0')
				return shell_usage_error("alloc", "option '%s' needs a file name", "--inventory");
		} else if ((r = shell_option_value(argc, argv, &i, "--lease-dir", &a->lease_dir)) != 0) {
			if (r < 0 || a->lease_dir[0] == '\0')
				return shell_usage_error("alloc", "option '%s' needs a directory", "--lease-dir");
		} else if (arg[0] == '-') {
			return shell_usage_error("alloc", "unrecognized option '%s'", arg);
		} else {
			return shell_usage_error("alloc", "unexpected argument '%s'", arg);
		}
	}
	if (!got_gpus && (a->req.gpus_per_node == 0 || a->req.nodes == 0))
		return shell_usage_error("alloc", "%s",
				   "say how many GPUs: -g N (or --per-node K with --nodes M)");
	a->req.exclude = a->exclude.names;
	a->req.nexclude = a->exclude.n;
	a->req.include = a->include.names;
	a->req.ninclude = a->include.n;
	return -1;
}

/* --------------------------------------------------------------- output */

static int max_int(int a, int b)
{
	return a > b ? a : b;
}

static int width_of(const char *s)
{
	return (int)strlen(s);
}

static void gpu_label(const herd_plan *plan, size_t i, char *buf, size_t cap)
{
	const herd_plan_gpu_info *g = NULL;

	if (herd_plan_gpu(plan, i, &g) != HERD_OK)
		snprintf(buf, cap, "?");
	else if (herd_plan_node_count(plan) > 1)
		snprintf(buf, cap, "%s:GPU%zu", g->hostname, g->index);
	else
		snprintf(buf, cap, "GPU%zu", g->index);
}

static void print_table(const herd_plan *plan)
{
	size_t nr = herd_plan_rank_count(plan);
	int wh = 4, wu = 4, wc = 4;
	char buf[64], link[HERD_NODE_LINK_CODE_LEN];

	for (size_t i = 0; i < nr; i++) {
		const herd_plan_rank_info *r = NULL;

		if (herd_plan_rank(plan, i, &r) != HERD_OK)
			continue;
		wh = max_int(wh, width_of(r->hostname));
		wc = max_int(wc, width_of(r->cpus[0] ? r->cpus : "-"));
		for (size_t g = 0; g < r->ngpus; g++)
			wu = max_int(wu, width_of(r->gpus[g].uuid));
	}
	printf("%-4s  %-*s  %-3s  %-*s  %-12s  %-4s  %-*s  %s\n", "rank", wh, "host", "GPU", wu,
	       "UUID", "PCI bus id", "NUMA", wc, "CPUs", "NIC");
	for (size_t i = 0; i < nr; i++) {
		const herd_plan_rank_info *r = NULL;

		if (herd_plan_rank(plan, i, &r) != HERD_OK)
			continue;
		for (size_t g = 0; g < r->ngpus; g++) {
			const herd_plan_gpu_info *pg = &r->gpus[g];
			char numa[16] = "?";

			if (pg->numa_node >= 0)
				snprintf(numa, sizeof(numa), "%d", pg->numa_node);
			if (g == 0)
				printf("%-4d  %-*s  ", r->rank, wh, r->hostname);
			else
				printf("%-4s  %-*s  ", "", wh, "");
			printf("%-3zu  %-*s  %-12s  %-4s  ", pg->index, wu, pg->uuid,
			       pg->pci_bus_id, numa);
			if (g > 0) {
				printf("\n");
				continue;
			}
			if (r->nic[0] != '\0')
				snprintf(buf, sizeof(buf), "%s (%s)", r->nic,
					 herd_node_link_code(r->nic_link, link));
			else
				snprintf(buf, sizeof(buf), "-");
			printf("%-*s  %s\n", wc, r->cpus[0] ? r->cpus : "-", buf);
		}
	}
}

static void print_links(const herd_plan *plan)
{
	size_t n = herd_plan_gpu_count(plan);
	char label[96], code[HERD_NODE_LINK_CODE_LEN];
	int cell = 6;

	for (size_t i = 0; i < n; i++) {
		gpu_label(plan, i, label, sizeof(label));
		cell = max_int(cell, width_of(label) + 2);
	}
	printf("\nLinks:\n%-*s", cell, "");
	for (size_t j = 0; j < n; j++) {
		gpu_label(plan, j, label, sizeof(label));
		printf("%-*s", j + 1 < n ? cell : 0, label);
	}
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		gpu_label(plan, i, label, sizeof(label));
		printf("%-*s", cell, label);
		for (size_t j = 0; j < n; j++)
			printf("%-*s", j + 1 < n ? cell : 0, herd_plan_link_code(plan, i, j, code));
		printf("\n");
	}
}

static int print_env(const herd_plan *plan)
{
	printf("\nEnvironment:\n");
	for (size_t i = 0; i < herd_plan_rank_count(plan); i++) {
		char **env = NULL;

		if (herd_plan_rank_env(plan, i, &env) != HERD_OK) {
			shell_message(shell_command, shell_last_error());
			return SHELL_EXIT_FAILURE;
		}
		printf("rank %zu:", i);
		for (char **e = env; *e != NULL; e++)
			printf(" %s", *e);
		printf("\n");
		herd_free(env);
	}
	return SHELL_EXIT_OK;
}

static void print_plan(const herd_plan *plan)
{
	size_t nn = herd_plan_node_count(plan), ng = herd_plan_gpu_count(plan);
	const herd_plan_gpu_info *g0 = NULL;

	printf("Plan: %zu GPU%s, %zu rank%s on %zu node%s", ng, ng == 1 ? "" : "s",
	       herd_plan_rank_count(plan), herd_plan_rank_count(plan) == 1 ? "" : "s", nn,
	       nn == 1 ? "" : "s");
	if (nn == 1 && herd_plan_gpu(plan, 0, &g0) == HERD_OK)
		printf(" (%s)", g0->hostname);
	printf(", score %.1f\n\n", herd_plan_score(plan));
	print_table(plan);
	print_links(plan);
}

/* ---- --json: the same facts as the tables, for programs ---- */

static json_t *json_gpu(const herd_plan_gpu_info *g)
{
	return json_pack("{s:I, s:o, s:o, s:i}", "index", (json_int_t)g->index, "uuid",
			 shell_json_str(g->uuid), "pci_bus_id", shell_json_str(g->pci_bus_id),
			 "numa_node", g->numa_node);
}

/* A rank's environment as an object; NULL when it cannot be had (said). */
static json_t *json_env(const herd_plan *plan, size_t i)
{
	json_t *o = json_object();
	char **env = NULL;

	if (herd_plan_rank_env(plan, i, &env) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		json_decref(o);
		return NULL;
	}
	for (char **e = env; o != NULL && *e != NULL; e++) {
		char *eq = strchr(*e, '=');

		if (eq != NULL) {
			*eq = '\0';
			json_object_set_new(o, *e, json_string(eq + 1));
		}
	}
	herd_free(env);
	return o;
}

static json_t *json_rank(const herd_plan *plan, size_t i, int env)
{
	const herd_plan_rank_info *r = NULL;
	char link[HERD_NODE_LINK_CODE_LEN];
	json_t *gpus, *o;

	if (herd_plan_rank(plan, i, &r) != HERD_OK)
		return NULL;
	gpus = json_array();
	for (size_t k = 0; gpus != NULL && k < r->ngpus; k++)
		json_array_append_new(gpus, json_gpu(&r->gpus[k]));
	o = json_pack("{s:i, s:o, s:i, s:i, s:o, s:i, s:o, s:o, s:o, s:o, s:o}", "rank", r->rank,
		      "host", shell_json_str(r->hostname), "node_rank", r->node_rank,
		      "local_rank", r->local_rank, "gpus", gpus, "numa_node", r->numa_node,
		      "cpus", shell_json_str(r->cpus), "nic", shell_json_str(r->nic), "nic_link",
		      shell_json_str(r->nic[0] != '\0' ? herd_node_link_code(r->nic_link, link)
							: NULL),
		      "nccl_ib_hca", shell_json_str(r->ib_hca), "nccl_socket_ifname",
		      shell_json_str(r->socket_ifname));
	if (o != NULL && env) {
		json_t *e = json_env(plan, i);

		if (e == NULL) {
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, "env", e);
	}
	return o;
}

static int print_grid(const herd_plan *plan, const struct alloc_args *a, json_t **doc);

static int print_plan_json(const herd_plan *plan, const struct alloc_args *a)
{
	int explain = a->explain, env = a->env;
	json_t *ranks = json_array(), *warnings = json_array(), *doc;

	for (size_t i = 0; ranks != NULL && i < herd_plan_rank_count(plan); i++) {
		json_t *r = json_rank(plan, i, env);

		if (r == NULL) {
			json_decref(ranks);
			json_decref(warnings);
			return SHELL_EXIT_FAILURE;
		}
		json_array_append_new(ranks, r);
	}
	for (size_t i = 0; warnings != NULL && i < herd_plan_warning_count(plan); i++) {
		const char *w = NULL;

		if (herd_plan_warning(plan, i, &w) == HERD_OK)
			json_array_append_new(warnings, json_string(w));
	}
	doc = json_pack("{s:i, s:I, s:I, s:I, s:f, s:b, s:o, s:o}", "v", 1, "ngpus",
			(json_int_t)herd_plan_gpu_count(plan), "nranks",
			(json_int_t)herd_plan_rank_count(plan), "nnodes",
			(json_int_t)herd_plan_node_count(plan), "score", herd_plan_score(plan),
			"holds_leases", herd_plan_held(plan) != 0, "ranks", ranks, "warnings",
			warnings);
	if (doc != NULL && explain)
		json_object_set_new(doc, "explain", json_string(herd_plan_explain(plan)));
	if (doc != NULL && a->ngrid > 0) {
		json_t *grid = NULL;
		int status = print_grid(plan, a, &grid);

		if (status != SHELL_EXIT_OK) {
			json_decref(doc);
			return status;
		}
		json_object_set_new(doc, "grid", grid);
	}
	return shell_json_emit(doc) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}

/* ---- --grid: the planned ranks' parallel grid ---- */

/* A grid that does not fit the plan's ranks, refused before anything is printed. */
static int check_grid(const herd_plan *plan, const struct alloc_args *a)
{
	herd_grid *g = NULL;

	if (herd_grid_create(&g, a->grid, a->ngrid, a->grid_order,
			     (int)herd_plan_rank_count(plan), NULL) != HERD_OK)
		return shell_usage_error("alloc", "--grid: %s", shell_last_error());
	herd_grid_free(g);
	return SHELL_EXIT_OK;
}

/* The grid over the plan's ranks (shell_grid_print); with json, into *doc. */
static int print_grid(const herd_plan *plan, const struct alloc_args *a, json_t **doc)
{
	int n = (int)herd_plan_rank_count(plan), status;
	const char **hosts = calloc((size_t)n + 1, sizeof(char *));
	const herd_plan **plans = calloc((size_t)n + 1, sizeof(*plans));
	size_t *index = calloc((size_t)n + 1, sizeof(size_t));
	size_t *base = calloc((size_t)n + 1, sizeof(size_t)), k = 0;
	shell_grid_ranks g = { n, hosts, plans, index, base };

	if (hosts == NULL || plans == NULL || index == NULL || base == NULL) {
		shell_message(shell_command, "out of memory");
		status = SHELL_EXIT_FAILURE;
		goto out;
	}
	for (int r = 0; r < n; r++) {
		const herd_plan_rank_info *ri = NULL;

		hosts[r] = "?";
		plans[r] = plan;
		index[r] = (size_t)r;
		base[r] = k;
		if (herd_plan_rank(plan, (size_t)r, &ri) == HERD_OK) {
			k += ri->ngpus;
			hosts[r] = ri->hostname;
		}
	}
	if (doc == NULL)
		printf("\n");
	status = shell_grid_print("alloc", "--grid: %s", a->grid, a->ngrid, a->grid_order, &g, doc);
out:
	free(hosts);
	free(plans);
	free(index);
	free(base);
	return status;
}

/* The exit status of a failed library call: bad input is a usage error. */
static int failure(herd_status st)
{
	shell_message(shell_command, shell_last_error());
	return st == HERD_EINVAL || st == HERD_EFORMAT || st == HERD_EVERSION ? SHELL_EXIT_USAGE
									      : SHELL_EXIT_FAILURE;
}

static herd_status load(const char *inventory, herd_cluster **out)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;

	opts.inventory = inventory;
	return herd_cluster_discover(out, &opts);
}

int cmd_alloc(int argc, char **argv)
{
	struct alloc_args a;
	herd_alloc_opts opts = HERD_ALLOC_OPTS_INIT;
	herd_cluster *cluster = NULL;
	herd_plan *plan = NULL;
	herd_status st;
	int status;

	memset(&a, 0, sizeof(a));
	a.req = (herd_alloc_request)HERD_ALLOC_REQUEST_INIT;
	status = parse_alloc(argc, argv, &a);
	if (status >= 0)
		goto out;
	st = load(a.inventory, &cluster);
	if (st != HERD_OK) {
		status = a.inventory || shell_env("HERD_INVENTORY") ? SHELL_EXIT_USAGE
									     : SHELL_EXIT_FAILURE;
		shell_message(shell_command, shell_last_error());
		goto out;
	}
	opts.plan_only = 1;
	opts.lease_dir = a.lease_dir;
	opts.ignore_slurm = a.ignore_slurm;
	st = herd_alloc(&plan, cluster, &a.req, &opts);
	if (st != HERD_OK) {
		status = failure(st);
		goto out;
	}
	if (a.ngrid > 0 && (status = check_grid(plan, &a)) != SHELL_EXIT_OK)
		goto out;
	for (size_t i = 0; i < herd_plan_warning_count(plan); i++) {
		const char *w = NULL;

		if (herd_plan_warning(plan, i, &w) == HERD_OK)
			fprintf(stderr, "%s: warning: %s\n", shell_command, w);
	}
	if (a.json) {
		status = print_plan_json(plan, &a);
		goto out;
	}
	print_plan(plan);
	status = a.ngrid > 0 ? print_grid(plan, &a, NULL) : SHELL_EXIT_OK;
	if (status != SHELL_EXIT_OK)
		goto out;
	if (a.explain)
		printf("\nWhy:\n%s", herd_plan_explain(plan));
	if (a.env)
		status = print_env(plan);
	status = status;
out:
	herd_plan_free(plan);
	herd_cluster_free(cluster);
	names_free(&a.exclude);
	names_free(&a.include);
	return status;
}

/* ----------------------------------------------------------------- gpus */

static void format_since(int64_t since, char *buf, size_t cap)
{
	time_t t = (time_t)since;
	struct tm tm;

	if (since <= 0 || localtime_r(&t, &tm) == NULL ||
	    strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, cap, "-");
}

static void print_gpus(const herd_node *node, const herd_alloc_gpu_status *st, size_t n,
		       const char *dir)
{
	int wu = 4, wj = 3, wuser = 4;

	printf("Host: %s\nLeases: %s\n", node->hostname, dir);
	if (n == 0) {
		printf("GPUs: none%s%s\n", node->gpu_note ? " \xe2\x80\x94 " : "",
		       node->gpu_note ? node->gpu_note : "");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		wu = max_int(wu, width_of(st[i].uuid));
		wj = max_int(wj, width_of(st[i].job));
		wuser = max_int(wuser, width_of(st[i].user));
	}
	printf("%-3s  %-*s  %-12s  %-4s  %-9s  %-*s  %-7s  %-*s  %-19s  %s\n", "GPU", wu, "UUID",
	       "PCI bus id", "NUMA", "lease", wj, "job", "pid", wuser, "user", "since", "procs");
	for (size_t i = 0; i < n; i++) {
		const herd_alloc_gpu_status *s = &st[i];
		const herd_gpu *g = &node->gpus[i];
		char numa[16] = "?", pid[24] = "-", since[32] = "-", procs[16] = "?";
		bool holder = s->state == HERD_LEASE_EXCLUSIVE && s->pid > 0;

		if (g->pci.numa_node >= 0)
			snprintf(numa, sizeof(numa), "%d", g->pci.numa_node);
		if (holder)
			snprintf(pid, sizeof(pid), "%lld", (long long)s->pid);
		if (holder)
			format_since(s->since, since, sizeof(since));
		if (s->processes >= 0)
			snprintf(procs, sizeof(procs), "%d", s->processes);
		printf("%-3zu  %-*s  %-12s  %-4s  %-9s  %-*s  %-7s  %-*s  %-19s  %s", i, wu,
		       s->uuid, g->pci.bus_id, numa, herd_lease_state_name(s->state), wj,
		       holder && s->job[0] ? s->job : "-", pid, wuser,
		       holder && s->user[0] ? s->user : "-", since, procs);
		if (s->state != HERD_LEASE_FREE && s->note[0] != '\0')
			printf("  (%s)", s->note);
		printf("\n");
	}
}

static int print_gpus_json(const herd_node *node, const herd_alloc_gpu_status *st, size_t n,
			   const char *dir)
{
	json_t *gpus = json_array(), *doc;

	for (size_t i = 0; gpus != NULL && i < n; i++) {
		const herd_alloc_gpu_status *s = &st[i];
		bool holder = s->state == HERD_LEASE_EXCLUSIVE && s->pid > 0;
		json_t *pids = s->processes >= 0 ? json_array() : json_null();

		for (int k = 0; k < s->processes && k < HERD_ALLOC_GPU_STATUS_MAX_PIDS; k++)
			json_array_append_new(pids, json_integer((json_int_t)s->pids[k]));
		json_array_append_new(gpus, json_pack(
			"{s:I, s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			"index", (json_int_t)i, "uuid", s->uuid, "pci_bus_id",
			node->gpus[i].pci.bus_id, "numa_node", node->gpus[i].pci.numa_node, "lease",
			herd_lease_state_name(s->state),
			"job", holder && s->job[0] ? json_string(s->job) : json_null(),
			"pid", holder ? json_integer((json_int_t)s->pid) : json_null(),
			"user", holder && s->user[0] ? json_string(s->user) : json_null(),
			"host", holder && s->host[0] ? json_string(s->host) : json_null(),
			"since", holder && s->since > 0 ? json_integer((json_int_t)s->since)
							  : json_null(),
			"note", s->note[0] ? json_string(s->note) : json_null(),
			"processes", s->processes >= 0 ? json_integer(s->processes) : json_null(),
			"pids", pids,
			"free_memory_bytes", s->free_memory_bytes >= 0
				? json_integer((json_int_t)s->free_memory_bytes) : json_null()));
	}
	doc = json_pack("{s:i, s:s, s:s, s:o, s:o}", "v", 1, "host", node->hostname, "lease_dir",
			dir, "gpus", gpus, "note", shell_json_str(n == 0 ? node->gpu_note : NULL));
	return shell_json_emit(doc) == 0 ? SHELL_EXIT_OK : SHELL_EXIT_FAILURE;
}

int cmd_gpus(int argc, char **argv)
{
	herd_lease_opts lo = HERD_LEASE_OPTS_INIT;
	const char *inventory = NULL;
	herd_cluster *cluster = NULL;
	herd_alloc_gpu_status *st = NULL;
	size_t n = 0, local = 0;
	const herd_node *node = NULL;
	char dir[4096];
	int status = SHELL_EXIT_FAILURE, json = 0;

	for (int i = 1; i < argc; i++) {
		int r;

		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(gpus_usage, stdout);
			return SHELL_EXIT_OK;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if ((r = shell_option_value(argc, argv, &i, "--inventory", &inventory)) != 0) {
			if (r < 0 || inventory[0] == '\0')
				return shell_usage_error("gpus", "option '%s' needs a file name", "--inventory");
		} else if ((r = shell_option_value(argc, argv, &i, "--lease-dir", &lo.dir)) != 0) {
			if (r < 0 || lo.dir[0] == '\0')
				return shell_usage_error("gpus", "option '%s' needs a directory", "--lease-dir");
		} else {
			return shell_usage_error("gpus", argv[i][0] == '-' ? "unrecognized option '%s'"
							     : "unexpected argument '%s'",
					   argv[i]);
		}
	}
	if (load(inventory, &cluster) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		return inventory || shell_env("HERD_INVENTORY") ? SHELL_EXIT_USAGE
									       : SHELL_EXIT_FAILURE;
	}
	if (herd_alloc_this_node(cluster, &local) != HERD_OK ||
	    herd_cluster_node(cluster, local, &node) != HERD_OK ||
	    herd_lease_dir(&lo, dir, sizeof(dir)) != HERD_OK ||
	    herd_alloc_gpu_status_query(node, &lo, &st, &n) != HERD_OK) {
		shell_message(shell_command, shell_last_error());
		goto out;
	}
	if (json) {
		status = print_gpus_json(node, st, n, dir);
	} else {
		print_gpus(node, st, n, dir);
		status = SHELL_EXIT_OK;
	}
out:
	herd_free(st);
	herd_cluster_free(cluster);
	return status;
}
