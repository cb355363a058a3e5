/*
 * shell/lua_alloc.c - herd.alloc{...}, which plans GPUs for this node and
 * holds their leases, returning a herd.Plan; and herd.gpus{...}, the
 * status of this node's GPUs.
 *
 * A herd.Plan is a full userdata holding the herd_plan*; its one close
 * path, reached from plan:close(), __close and __gc, releases the
 * leases and frees the plan, so a plan held in a `local p <close>` is
 * released at the end of its block and one that is merely dropped is
 * released by the collector (the process's death releases it in any
 * case).  Fields are computed on access and returned as fresh tables.
 *
 *   local p = herd.alloc{gpus = 4, link = "nvlink", inventory = PATH}
 *   p.ranks[1].uuid, p.links[1][2], p.score, p:explain(), p:env(1)
 *   p:close()
 *
 * Options of herd.alloc: gpus, per_node, nodes, gpus_per_rank (integers);
 * link ("any", "same-node", "nvlink", "same-numa"); min_memory (bytes, or
 * a size string such as "40G"); near_nic, shared (booleans); policy
 * ("pack", "spread"); exclude, include (arrays of GPU UUIDs, PCI bus ids or
 * host names); inventory (an inventory file standing for this node);
 * lease_dir, job (strings); wait_ms (integer); hold (boolean, default
 * true: take the leases; false plans only); slurm (boolean, default true:
 * honour a Slurm allocation's grant).  An unknown option or a value of the
 * wrong type raises; a request that cannot be met, or a count out of range,
 * returns nil, a message and the status name.
 *
 * Fields of a plan: ranks (rank, host, node, node_rank, local_rank, gpu,
 * uuid, pci_bus_id, gpus, numa, cpus, nic, nic_link, ib_hca,
 * socket_ifname), gpus (rank, host, node, index, uuid, pci_bus_id, numa),
 * links (links[i][j], the matrix code between the plan's GPUs i and j),
 * score, held, nodes, warnings.  GPU indices are the node's, 0-based in
 * PCI bus order as nvidia-smi numbers them; node is the inventory's,
 * 1-based like every Lua list.  p:env(i) is the environment of
 * p.ranks[i]; p:close() lets the leases go (the plan cannot be read after).
 *
 * herd.gpus{inventory=, lease_dir=} lists the GPUs of this node: index,
 * uuid, pci_bus_id, numa, state ("free", "shared", "exclusive",
 * "unknown"), and as far as known job, pid, user, host, since (Unix time),
 * note, processes, free_memory_bytes.
 */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdbool.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

#define LHERD_PLAN "herd.Plan"

typedef struct lplan {
	herd_plan *plan; /* NULL once closed */
} lplan;

/* ------------------------------------------------------------ options */

static const char *const alloc_options[] = {
	"gpus", "per_node", "nodes", "gpus_per_rank", "link", "min_memory", "near_nic",
	"shared", "policy", "exclude", "include", "inventory", "lease_dir", "job", "wait_ms",
	"hold", "slurm", NULL
};

static const char *const gpus_options[] = { "inventory", "lease_dir", NULL };

/* Pushes field name of the options table; true when it is not nil. */
static bool get_option(lua_State *L, int arg, const char *name, int type)
{
	if (lua_getfield(L, arg, name) == LUA_TNIL) {
		lua_pop(L, 1);
		return false;
	}
	if (lua_type(L, -1) != type)
		luaL_argerror(L, arg,
			      lua_pushfstring(L, "option '%s' must be a %s, not a %s", name,
					      lua_typename(L, type), luaL_typename(L, -1)));
	return true;
}

/*
 * An integer option into *out; a value out of int's range gives the
 * request an out-of-range count, which the library reports.
 */
static void int_option(lua_State *L, int arg, const char *name, int *out)
{
	lua_Integer v;
	int isint = 0;

	if (!get_option(L, arg, name, LUA_TNUMBER))
		return;
	v = lua_tointegerx(L, -1, &isint);
	if (!isint)
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be an integer", name));
	*out = v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
	lua_pop(L, 1);
}

static bool bool_option(lua_State *L, int arg, const char *name, bool def)
{
	bool v;

	if (!get_option(L, arg, name, LUA_TBOOLEAN))
		return def;
	v = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return v;
}

/* A string option, left on the stack (so it lives) or NULL. */
static const char *string_option(lua_State *L, int arg, const char *name)
{
	if (!get_option(L, arg, name, LUA_TSTRING))
		return NULL;
	return lua_tostring(L, -1);
}

/*
 * An array of strings as a C array, in a userdata left on the stack (and
 * the table below it), so both live for the call.
 */
static const char *const *names_option(lua_State *L, int arg, const char *name, size_t *n)
{
	const char **names;
	lua_Integer len;

	*n = 0;
	if (!get_option(L, arg, name, LUA_TTABLE))
		return NULL;
	len = luaL_len(L, -1);
	if (len < 0 || len > HERD_ALLOC_MAX_GPUS)
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' has too many names", name));
	names = (const char **)lua_newuserdatauv(L, ((size_t)len + 1) * sizeof(char *), 0);
	for (lua_Integer i = 1; i <= len; i++) {
		if (lua_geti(L, -2, i) != LUA_TSTRING)
			luaL_argerror(L, arg,
				      lua_pushfstring(L, "option '%s'[%d] must be a string", name,
						      (int)i));
		/* The string stays alive in the table, which stays on the stack. */
		names[i - 1] = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	*n = (size_t)len;
	return names;
}

static void request_options(lua_State *L, int arg, herd_alloc_request *req)
{
	static const char *const policies[] = { "pack", "spread", NULL };
	const char *s;

	int_option(L, arg, "gpus", &req->gpus);
	int_option(L, arg, "per_node", &req->gpus_per_node);
	int_option(L, arg, "nodes", &req->nodes);
	int_option(L, arg, "gpus_per_rank", &req->gpus_per_rank);
	if ((s = string_option(L, arg, "link")) != NULL) {
		if (herd_alloc_link_parse(s, &req->link) != HERD_OK)
			luaL_argerror(L, arg, shell_last_error());
		lua_pop(L, 1);
	}
	if (lua_getfield(L, arg, "min_memory") != LUA_TNIL) {
		lua_Integer v;
		int isint = 0;

		if (lua_type(L, -1) == LUA_TSTRING) {
			if (shell_parse_bytes(lua_tostring(L, -1), &req->min_free_memory_bytes) !=
			    0)
				luaL_argerror(L, arg,
					      "option 'min_memory' must be a size such as "
					      "\"40G\" or a number of bytes");
		} else {
			v = lua_tointegerx(L, -1, &isint);
			if (!isint || v < 0)
				luaL_argerror(L, arg,
					      "option 'min_memory' must be a size such as "
					      "\"40G\" or a number of bytes");
			req->min_free_memory_bytes = (uint64_t)v;
		}
	}
	lua_pop(L, 1);
	req->near_nic = bool_option(L, arg, "near_nic", false);
	req->shared = bool_option(L, arg, "shared", false);
	if (get_option(L, arg, "policy", LUA_TSTRING)) {
		req->policy = luaL_checkoption(L, -1, NULL, policies) == 1 ? HERD_ALLOC_SPREAD
									   : HERD_ALLOC_PACK;
		lua_pop(L, 1);
	}
	/* These two leave their table and array on the stack. */
	req->exclude = names_option(L, arg, "exclude", &req->nexclude);
	req->include = names_option(L, arg, "include", &req->ninclude);
}

/* ---------------------------------------------------------------- plan */

static const lherd_type plan_type; /* defined with the methods, below */

static herd_plan *check_plan(lua_State *L, int arg)
{
	return ((lplan *)lherd_check(L, arg, &plan_type))->plan;
}

/* The one close path (lua_object.c calls it once): releases the leases. */
static void plan_release(lua_State *L)
{
	lplan *p = (lplan *)lua_touserdata(L, 1);

	herd_plan_free(p->plan);
	p->plan = NULL;
}

static void plan_describe(lua_State *L)
{
	herd_plan *plan = ((lplan *)lua_touserdata(L, 1))->plan;
	size_t n = herd_plan_node_count(plan);

	lua_pushfstring(L, "%d GPUs on %d node%s%s", (int)herd_plan_gpu_count(plan), (int)n,
			n == 1 ? "" : "s", herd_plan_held(plan) ? ", held" : "");
}

static void push_gpu(lua_State *L, const herd_plan_gpu_info *g)
{
	lua_createtable(L, 0, 7);
	lherd_set_integer(L, "rank", g->rank);
	lherd_set_string(L, "host", g->hostname);
	lherd_set_integer(L, "node", (lua_Integer)g->node + 1);
	lherd_set_integer(L, "index", (lua_Integer)g->index);
	lherd_set_string(L, "uuid", g->uuid);
	lherd_set_string(L, "pci_bus_id", g->pci_bus_id);
	if (g->numa_node >= 0)
		lherd_set_integer(L, "numa", g->numa_node);
}

static void push_rank(lua_State *L, const herd_plan_rank_info *r)
{
	char buf[HERD_NODE_LINK_CODE_LEN];

	lua_createtable(L, 0, 16);
	lherd_set_integer(L, "rank", r->rank);
	lherd_set_string(L, "host", r->hostname);
	lherd_set_integer(L, "node", (lua_Integer)r->node + 1);
	lherd_set_integer(L, "node_rank", r->node_rank);
	lherd_set_integer(L, "local_rank", r->local_rank);
	lherd_set_integer(L, "gpu", (lua_Integer)r->gpus[0].index);
	lherd_set_string(L, "uuid", r->gpus[0].uuid);
	lherd_set_string(L, "pci_bus_id", r->gpus[0].pci_bus_id);
	lua_createtable(L, (int)r->ngpus, 0);
	for (size_t g = 0; g < r->ngpus; g++) {
		push_gpu(L, &r->gpus[g]);
		lua_rawseti(L, -2, (lua_Integer)g + 1);
	}
	lua_setfield(L, -2, "gpus");
	if (r->numa_node >= 0)
		lherd_set_integer(L, "numa", r->numa_node);
	lherd_set_nonempty(L, "cpus", r->cpus);
	lherd_set_nonempty(L, "nic", r->nic);
	if (r->nic[0] != '\0')
		lherd_set_string(L, "nic_link", herd_node_link_code(r->nic_link, buf));
	lherd_set_nonempty(L, "ib_hca", r->ib_hca);
	lherd_set_nonempty(L, "socket_ifname", r->socket_ifname);
}

static void get_ranks(lua_State *L, herd_plan *plan)
{
	size_t n = herd_plan_rank_count(plan);

	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		const herd_plan_rank_info *r = NULL;

		if (herd_plan_rank(plan, i, &r) != HERD_OK)
			break;
		push_rank(L, r);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

static void get_gpus(lua_State *L, herd_plan *plan)
{
	size_t n = herd_plan_gpu_count(plan);

	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		const herd_plan_gpu_info *g = NULL;

		if (herd_plan_gpu(plan, i, &g) != HERD_OK)
			break;
		push_gpu(L, g);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

/* links[i][j]: the matrix code between the plan's GPUs i and j. */
static void get_links(lua_State *L, herd_plan *plan)
{
	size_t n = herd_plan_gpu_count(plan);
	char buf[HERD_NODE_LINK_CODE_LEN];

	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_createtable(L, (int)n, 0);
		for (size_t j = 0; j < n; j++) {
			lua_pushstring(L, herd_plan_link_code(plan, i, j, buf));
			lua_rawseti(L, -2, (lua_Integer)j + 1);
		}
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

static void get_score(lua_State *L, herd_plan *plan)
{
	lua_pushnumber(L, herd_plan_score(plan));
}

static void get_held(lua_State *L, herd_plan *plan)
{
	lua_pushboolean(L, herd_plan_held(plan));
}

static void get_nodes(lua_State *L, herd_plan *plan)
{
	lua_pushinteger(L, (lua_Integer)herd_plan_node_count(plan));
}

static void get_warnings(lua_State *L, herd_plan *plan)
{
	size_t n = herd_plan_warning_count(plan);

	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		const char *w = NULL;

		if (herd_plan_warning(plan, i, &w) != HERD_OK)
			break;
		lua_pushstring(L, w);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

typedef void (*plan_getter)(lua_State *L, herd_plan *plan);

static const struct plan_field {
	const char *name;
	plan_getter get;
} plan_fields[] = {
	{ "ranks", get_ranks },
	{ "gpus", get_gpus },
	{ "links", get_links },
	{ "score", get_score },
	{ "held", get_held },
	{ "nodes", get_nodes },
	{ "warnings", get_warnings },
	{ NULL, NULL }
};

/* p:explain() -> why the plan is what it is, as lines of text. */
static int plan_explain(lua_State *L)
{
	lua_pushstring(L, herd_plan_explain(check_plan(L, 1)));
	return 1;
}

/* p:env(i) -> the environment of p.ranks[i] as a table of strings. */
static int plan_env(lua_State *L)
{
	herd_plan *plan = check_plan(L, 1);
	lua_Integer i = luaL_checkinteger(L, 2);
	size_t n = herd_plan_rank_count(plan);
	char **env = NULL;
	herd_status st;

	if (i < 1 || (lua_Unsigned)i > n)
		return luaL_argerror(L, 2,
				     lua_pushfstring(L,
						     "rank index %d out of range (plan "
						     "has %d ranks)",
						     (int)i, (int)n));
	st = herd_plan_rank_env(plan, (size_t)i - 1, &env);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_newtable(L);
	for (char **e = env; *e != NULL; e++) {
		const char *eq = strchr(*e, '=');

		lua_pushlstring(L, *e, (size_t)(eq - *e));
		lua_pushstring(L, eq + 1);
		lua_rawset(L, -3);
	}
	herd_free(env);
	return 1;
}

/* p:link(i, j) -> the matrix code between the plan's GPUs i and j. */
static int plan_link(lua_State *L)
{
	herd_plan *plan = check_plan(L, 1);
	lua_Integer i = luaL_checkinteger(L, 2), j = luaL_checkinteger(L, 3);
	size_t n = herd_plan_gpu_count(plan);
	char buf[HERD_NODE_LINK_CODE_LEN];

	if (i < 1 || (lua_Unsigned)i > n)
		return luaL_argerror(L, 2, "GPU index out of range");
	if (j < 1 || (lua_Unsigned)j > n)
		return luaL_argerror(L, 3, "GPU index out of range");
	lua_pushstring(L, herd_plan_link_code(plan, (size_t)i - 1, (size_t)j - 1, buf));
	return 1;
}

static int plan_field_get(lua_State *L)
{
	herd_plan *plan = check_plan(L, 1);
	const struct plan_field *f =
		(const struct plan_field *)lua_touserdata(L, lua_upvalueindex(1));

	f->get(L, plan);
	return 1;
}

static const luaL_Reg plan_methods[] = {
	{ "explain", plan_explain },
	{ "env", plan_env },
	{ "link", plan_link },
	{ NULL, NULL }
};

static void plan_fields_push(lua_State *L)
{
	lua_newtable(L);
	for (const struct plan_field *f = plan_fields; f->name; f++) {
		lua_pushlightuserdata(L, (void *)f);
		lua_pushcclosure(L, plan_field_get, 1);
		lua_setfield(L, -2, f->name);
	}
}

static const lherd_type plan_type = {
	.name = LHERD_PLAN,
	.methods = plan_methods,
	.fields = plan_fields_push,
	.release = plan_release,
	.describe = plan_describe,
};

/* --------------------------------------------------------------- herd.* */

/* The inventory: a file (inventory option), $HERD_INVENTORY, or this node. */
static herd_status discover(const char *inventory, herd_cluster **out)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;

	opts.inventory = inventory;
	return herd_cluster_discover(out, &opts);
}

/* herd.alloc{...} -> a herd.Plan, or nil, msg, status. */
static int lherd_alloc(lua_State *L)
{
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_alloc_opts opts = HERD_ALLOC_OPTS_INIT;
	herd_cluster *cluster = NULL;
	const char *inventory;
	lplan *p;
	herd_status st;

	luaL_checktype(L, 1, LUA_TTABLE);
	lherd_check_keys(L, 1, alloc_options);
	request_options(L, 1, &req);
	inventory = string_option(L, 1, "inventory");
	opts.lease_dir = string_option(L, 1, "lease_dir");
	opts.job_id = string_option(L, 1, "job");
	int_option(L, 1, "wait_ms", &opts.wait_ms);
	opts.plan_only = !bool_option(L, 1, "hold", true);
	opts.ignore_slurm = !bool_option(L, 1, "slurm", true);
	/* Safe state before the resource: a plan object that holds nothing. */
	p = (lplan *)lherd_new(L, &plan_type, sizeof(*p), 0);
	st = discover(inventory, &cluster);
	if (st == HERD_OK)
		st = herd_alloc(&p->plan, cluster, &req, &opts);
	herd_cluster_free(cluster);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

static void push_status(lua_State *L, const herd_alloc_gpu_status *s, const herd_gpu *g,
			size_t index)
{
	lua_createtable(L, 0, 14);
	lherd_set_integer(L, "index", (lua_Integer)index);
	lherd_set_string(L, "uuid", s->uuid);
	lherd_set_string(L, "pci_bus_id", g->pci.bus_id);
	if (g->pci.numa_node >= 0)
		lherd_set_integer(L, "numa", g->pci.numa_node);
	lherd_set_string(L, "state", herd_lease_state_name(s->state));
	lherd_set_nonempty(L, "job", s->job);
	if (s->pid > 0)
		lherd_set_integer(L, "pid", (lua_Integer)s->pid);
	lherd_set_nonempty(L, "user", s->user);
	lherd_set_nonempty(L, "host", s->host);
	if (s->since > 0)
		lherd_set_integer(L, "since", (lua_Integer)s->since);
	lherd_set_nonempty(L, "note", s->note);
	if (s->processes >= 0)
		lherd_set_integer(L, "processes", s->processes);
	if (s->free_memory_bytes >= 0)
		lherd_set_integer(L, "free_memory_bytes", (lua_Integer)s->free_memory_bytes);
}

/* herd.gpus{inventory=, lease_dir=} -> array of GPU states, or nil, msg, status. */
static int lherd_gpus(lua_State *L)
{
	herd_lease_opts lo = HERD_LEASE_OPTS_INIT;
	herd_cluster **cluster;
	void **st;
	const char *inventory = NULL;
	const herd_node *node;
	size_t n = 0, local = 0;
	herd_status rc;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, gpus_options);
		inventory = string_option(L, 1, "inventory");
		lo.dir = string_option(L, 1, "lease_dir");
	}
	/* Both owners exist before what they own, so an error frees all. */
	cluster = lherd_new_cluster(L);
	st = lherd_hold(L, NULL);
	rc = discover(inventory, cluster);
	if (rc == HERD_OK)
		rc = herd_alloc_this_node(*cluster, &local);
	if (rc == HERD_OK)
		rc = herd_cluster_node(*cluster, local, &node);
	if (rc != HERD_OK)
		return lherd_fail(L, rc);
	rc = herd_alloc_gpu_status_query(node, &lo, (herd_alloc_gpu_status **)st, &n);
	if (rc != HERD_OK)
		return lherd_fail(L, rc);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		push_status(L, &((herd_alloc_gpu_status *)*st)[i], &node->gpus[i], i);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

void lherd_open_alloc(lua_State *L)
{
	lherd_register(L, &plan_type);
	/* The herd table is on top of the stack. */
	lua_pushcfunction(L, lherd_alloc);
	lua_setfield(L, -2, "alloc");
	lua_pushcfunction(L, lherd_gpus);
	lua_setfield(L, -2, "gpus");
}
