/*
 * shell/lua_cluster.c - herd.Cluster and herd.Node, the Lua faces of a
 * herd_cluster and of its nodes.
 *
 * A herd.Cluster is a full userdata holding the herd_cluster*; it frees it
 * through one idempotent close, reached from c:close(), __close and __gc.
 * Its user values are a table caching the herd.Node objects, so that
 * c.nodes[1] == c.nodes[1], and the decoded JSON inventory.  A herd.Node
 * holds only its index; its user value is the cluster object, which keeps
 * the cluster alive as long as any node is reachable, and every node
 * access goes through the cluster so that a node of a closed cluster
 * raises instead of reading freed memory.
 *
 * A node's fields are the keys of its object in the JSON inventory, with
 * the same values (docs/inventory.md: netdevs, pci.bus_id, cc_major, -1
 * for unknown, null fields absent), returned as fresh tables on each
 * access.  GPU and NIC indices count from 0, as nvidia-smi, CUDA and the
 * GPU0 labels do: node.gpus[1] is GPU 0 (its index field says so), and
 * node:link(0, 1) is the link between GPU 0 and GPU 1.
 */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

typedef struct lcluster {
	herd_cluster *cluster; /* NULL once closed */
} lcluster;

typedef struct lnode {
	size_t index; /* 0-based, in the cluster */
} lnode;

/* ---------------------------------------------------------------- helpers */

static herd_cluster_format check_format(lua_State *L, int arg, const char *def)
{
	static const char *const names[] = { "auto", "msgpack", "json", "text", NULL };
	static const herd_cluster_format formats[] = {
		HERD_CLUSTER_FORMAT_AUTO, HERD_CLUSTER_FORMAT_MSGPACK, HERD_CLUSTER_FORMAT_JSON,
		HERD_CLUSTER_FORMAT_TEXT
	};
	return formats[luaL_checkoption(L, arg, def, names)];
}

/* ---------------------------------------------------------------- cluster */

/* Defined at the end, with the methods (a tentative definition). */
static const lherd_type cluster_type, node_type;

/* The cluster of argument arg, raising when it was closed (liolib's tofile). */
static herd_cluster *check_cluster(lua_State *L, int arg)
{
	return ((lcluster *)lherd_check(L, arg, &cluster_type))->cluster;
}

herd_cluster **lherd_new_cluster(lua_State *L)
{
	/* user values: 1 the node objects, 2 the decoded inventory */
	lcluster *c = (lcluster *)lherd_new(L, &cluster_type, sizeof(*c), 2);
	return &c->cluster;
}

/* The one close path (lua_object.c calls it once). */
static void cluster_release(lua_State *L)
{
	lcluster *c = (lcluster *)lua_touserdata(L, 1);
	herd_cluster_free(c->cluster);
	c->cluster = NULL;
}

static void cluster_describe(lua_State *L)
{
	lcluster *c = (lcluster *)lua_touserdata(L, 1);
	size_t n = herd_cluster_node_count(c->cluster);
	lua_pushfstring(L, "%d node%s", (int)n, n == 1 ? "" : "s");
}

/* Pushes the encoding of the cluster as a string, or the failure triple. */
static int push_encoding(lua_State *L, herd_cluster_format format)
{
	herd_cluster *cluster = check_cluster(L, 1);
	void **data = lherd_hold(L, NULL);
	size_t len = 0;
	herd_status st = herd_cluster_encode(cluster, format, data, &len);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushlstring(L, (const char *)*data, len);
	lherd_drop(L, -2);
	return 1;
}

/* c:json() -> the inventory as JSON text. */
static int cluster_json(lua_State *L)
{
	return push_encoding(L, HERD_CLUSTER_FORMAT_JSON);
}

/* c:encode([format]) -> bytes; format "msgpack" (default) or "json". */
static int cluster_encode(lua_State *L)
{
	herd_cluster_format format;

	check_cluster(L, 1);   /* the object first, as every method checks it */
	format = check_format(L, 2, "msgpack");
	if (format == HERD_CLUSTER_FORMAT_AUTO)
		return luaL_argerror(L, 2, "expected \"msgpack\", \"json\" or \"text\"");
	return push_encoding(L, format);
}

/* c:save(path[, format]) -> true, or nil, msg, status. */
static int cluster_save(lua_State *L)
{
	herd_cluster *cluster = check_cluster(L, 1);
	const char *path = luaL_checkstring(L, 2);
	herd_cluster_format format = check_format(L, 3, "auto");
	return lherd_result(L, herd_cluster_save(cluster, path, format));
}

static void push_node(lua_State *L, int cluster_idx, size_t index);

/* The cached node objects (the cluster's user value), created on first use. */
static void push_node_cache(lua_State *L, int cluster_idx)
{
	cluster_idx = lua_absindex(L, cluster_idx);
	if (lua_getiuservalue(L, cluster_idx, 1) == LUA_TTABLE)
		return;
	lua_pop(L, 1);
	size_t n = herd_cluster_node_count(check_cluster(L, cluster_idx));
	lua_createtable(L, n > INT_MAX ? 0 : (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		push_node(L, cluster_idx, i);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_pushvalue(L, -1);
	lua_setiuservalue(L, cluster_idx, 1);
}

/* c.nodes: a fresh array of the cluster's (cached) herd.Node objects. */
static int cluster_nodes(lua_State *L)
{
	size_t n = herd_cluster_node_count(check_cluster(L, 1));
	push_node_cache(L, 1);
	lua_createtable(L, n > INT_MAX ? 0 : (int)n, 0);
	for (size_t i = 1; i <= n; i++) {
		lua_rawgeti(L, -2, (lua_Integer)i);
		lua_rawseti(L, -2, (lua_Integer)i);
	}
	return 1;
}

/* cluster.failed -> {{host = ..., reason = ...}, ...}: the nodes a
 * discovery could not inventory. */
static int cluster_failed(lua_State *L)
{
	herd_cluster *c = check_cluster(L, 1);
	size_t n = herd_cluster_failure_count(c);

	lua_createtable(L, n > INT_MAX ? 0 : (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		const char *host = NULL, *reason = NULL;

		if (herd_cluster_failure(c, i, &host, &reason) != HERD_OK)
			break;
		lua_createtable(L, 0, 2);
		lherd_set_string(L, "host", host);
		lherd_set_string(L, "reason", reason);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

static void push_warning(void *userdata, const char *nodes, const char *message)
{
	lua_State *L = userdata;

	lua_createtable(L, 0, 2);
	lherd_set_string(L, "nodes", nodes);
	lherd_set_string(L, "message", message);
	lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}

/* cluster:warnings() -> {{nodes = "node[02]", message = "..."}, ...}
 * (herd_cluster_check), or nil, msg, status. */
static int cluster_warnings(lua_State *L)
{
	herd_cluster *c = check_cluster(L, 1);

	lua_newtable(L);
	if (herd_cluster_check(c, push_warning, L) < 0)
		return lherd_fail(L, HERD_ENOMEM);
	return 1;
}

/* ------------------------------------------------------------------- node */

typedef struct node_ref {
	const herd_node *node;
	size_t index;
} node_ref;

static void push_node(lua_State *L, int cluster_idx, size_t index)
{
	cluster_idx = lua_absindex(L, cluster_idx);
	lnode *n = (lnode *)lherd_new(L, &node_type, sizeof(*n), 1);
	n->index = index;
	lua_pushvalue(L, cluster_idx);
	lua_setiuservalue(L, -2, 1);
}

/* The node of argument arg, through its cluster, which must be open. */
static node_ref check_node(lua_State *L, int arg)
{
	lnode *n = (lnode *)lherd_to(L, arg, &node_type);
	lua_getiuservalue(L, arg, 1);
	/* The node's user value keeps the cluster object alive. */
	lcluster *c = (lcluster *)lua_touserdata(L, -1);
	lua_pop(L, 1);
	if (c == NULL || c->cluster == NULL)
		luaL_error(L, "attempt to use a node of a closed cluster");
	node_ref ref = { NULL, n->index };
	if (herd_cluster_node(c->cluster, n->index, &ref.node) != HERD_OK)
		luaL_error(L, "node %d is not in its cluster", (int)n->index + 1);
	return ref;
}

static int node_tostring(lua_State *L)
{
	lnode *n = (lnode *)lherd_to(L, 1, &node_type);
	lua_getiuservalue(L, 1, 1);
	lcluster *c = (lcluster *)lua_touserdata(L, -1);
	const herd_node *node = NULL;
	if (c == NULL || c->cluster == NULL ||
	    herd_cluster_node(c->cluster, n->index, &node) != HERD_OK)
		lua_pushliteral(L, "herd.Node (closed)");
	else
		lua_pushfstring(L, "herd.Node %d (%s)", (int)n->index + 1,
				node->hostname ? node->hostname : "?");
	return 1;
}

/* A GPU or NIC index argument, 0-based as nvidia-smi and the GPU0 labels. */
static size_t check_index(lua_State *L, int arg, size_t count, const char *what)
{
	lua_Integer i = luaL_checkinteger(L, arg);
	if (i < 0 || (lua_Unsigned)i >= count) {
		const char *msg = lua_pushfstring(L, "%s index %d out of range (node has %d: "
						  "0..%d)", what, (int)i, (int)count,
						  (int)count - 1);
		luaL_argerror(L, arg, msg);
	}
	return (size_t)i;
}

static int push_link(lua_State *L, herd_status st, herd_link link)
{
	if (st != HERD_OK)
		return lherd_fail(L, st);
	char buf[HERD_NODE_LINK_CODE_LEN];
	lua_pushstring(L, herd_node_link_code(link, buf));
	return 1;
}

/* node:link(i, j) -> the matrix code between GPUs i and j (GPU indices, from 0). */
static int node_link(lua_State *L)
{
	node_ref r = check_node(L, 1);
	size_t i = check_index(L, 2, r.node->ngpus, "GPU");
	size_t j = check_index(L, 3, r.node->ngpus, "GPU");
	herd_link link;
	herd_status st = herd_node_gpu_link(r.node, i, j, &link);
	return push_link(L, st, link);
}

/* node:nic_link(i, j) -> the matrix code between GPU i and matrix NIC j (from 0). */
static int node_nic_link(lua_State *L)
{
	node_ref r = check_node(L, 1);
	size_t i = check_index(L, 2, r.node->ngpus, "GPU");
	size_t j = check_index(L, 3, herd_node_nic_count(r.node), "NIC");
	herd_link link;
	herd_status st = herd_node_gpu_nic_link(r.node, i, j, &link);
	return push_link(L, st, link);
}

/*
 * Fields.  A node's fields are its object in the cluster's JSON inventory
 * (herd_cluster_encode), decoded once per cluster and kept in the
 * cluster's user value 2, so that Lua names every field as the inventory
 * does (docs/inventory.md); each access returns a fresh copy.  Besides
 * them: index (the node's place in c.nodes, from 1), and matrix_nics (the
 * names of the NICs of the topology matrix, in node:nic_link's order);
 * every GPU table also has index, its GPU index (from 0).
 */

/* The decoded inventory of the cluster object at idx, pushed. */
static void push_inventory(lua_State *L, int idx)
{
	herd_cluster *cluster = check_cluster(L, idx);
	size_t len = 0;
	void **data, **json;
	herd_status st;

	idx = lua_absindex(L, idx);
	if (lua_getiuservalue(L, idx, 2) == LUA_TTABLE)
		return;
	lua_pop(L, 1);
	data = lherd_hold(L, NULL);
	st = herd_cluster_encode(cluster, HERD_CLUSTER_FORMAT_JSON, data, &len);
	if (st != HERD_OK)
		luaL_error(L, "cannot encode the cluster: %s", shell_last_error());
	json = lherd_hold(L, lherd_json_release);
	*json = lherd_json_parse((const char *)*data, len);
	if (*json == NULL)
		luaL_error(L, "cannot read the cluster's own JSON back");
	lherd_push_json(L, *json);
	lherd_drop(L, -2);
	lherd_drop(L, -3);
	lua_replace(L, -3);
	lua_pop(L, 1);
	lua_pushvalue(L, -1);
	lua_setiuservalue(L, idx, 2);
}

/* A deep copy of the table (or value) on top, replacing it. */
static void deep_copy(lua_State *L, int depth)
{
	int src;

	if (lua_type(L, -1) != LUA_TTABLE)
		return;
	luaL_checkstack(L, 4, "copy");
	if (depth > 32)
		luaL_error(L, "inventory nested too deep");
	src = lua_gettop(L);
	lua_createtable(L, (int)lua_rawlen(L, src), 0);
	lua_pushnil(L);
	while (lua_next(L, src)) {
		deep_copy(L, depth + 1);
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, -4);
	}
	lua_remove(L, src);
}

static int node_json_field(lua_State *L)
{
	node_ref r = check_node(L, 1);
	const char *key = lua_tostring(L, lua_upvalueindex(1));

	lua_getiuservalue(L, 1, 1);
	push_inventory(L, -1);
	lua_getfield(L, -1, "nodes");
	lua_rawgeti(L, -1, (lua_Integer)r.index + 1);
	lua_getfield(L, -1, key);
	deep_copy(L, 0);
	if (strcmp(key, "gpus") == 0 && lua_istable(L, -1)) {
		for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
			lua_rawgeti(L, -1, i);
			lherd_set_integer(L, "index", i - 1);
			lua_pop(L, 1);
		}
	}
	return 1;
}

static int node_index(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)check_node(L, 1).index + 1);
	return 1;
}

/* The NICs of the topology matrix, in the order node:nic_link numbers them. */
static int node_matrix_nics(lua_State *L)
{
	node_ref r = check_node(L, 1);
	size_t n = herd_node_nic_count(r.node);
	lua_createtable(L, (int)n, 0);
	for (size_t j = 0; j < n; j++) {
		const char *name = NULL;
		const herd_pci_loc *pci = NULL;
		if (herd_node_nic(r.node, j, &name, &pci) != HERD_OK)
			break;
		lua_pushstring(L, name ? name : "");
		lua_rawseti(L, -2, (lua_Integer)j + 1);
	}
	return 1;
}

/* The keys of a node in the JSON inventory (docs/inventory.md). */
static const char *const node_json_keys[] = {
	"hostname", "cpu_model", "packages", "cores", "threads", "memory_bytes",
	"memory_available_bytes", "numa", "gpus", "gpu_note", "netdevs", "rdma", "rdma_note",
	"gpu_driver", "cuda_driver", "nccl", NULL
};

/* ------------------------------------------------------------- the types */

static const luaL_Reg cluster_methods[] = {
	{ "save", cluster_save },
	{ "json", cluster_json },
	{ "encode", cluster_encode },
	{ "warnings", cluster_warnings },
	{ NULL, NULL }
};

static void cluster_fields(lua_State *L)
{
	lua_newtable(L);
	lua_pushcfunction(L, cluster_nodes);
	lua_setfield(L, -2, "nodes");
	lua_pushcfunction(L, cluster_failed);
	lua_setfield(L, -2, "failed");
}

static const luaL_Reg node_methods[] = {
	{ "link", node_link },
	{ "nic_link", node_nic_link },
	{ NULL, NULL }
};

static const luaL_Reg node_metamethods[] = {
	{ "__tostring", node_tostring },
	{ NULL, NULL }
};

static void node_fields_push(lua_State *L)
{
	lua_newtable(L);
	for (const char *const *k = node_json_keys; *k != NULL; k++) {
		lua_pushstring(L, *k);
		lua_pushcclosure(L, node_json_field, 1);
		lua_setfield(L, -2, *k);
	}
	lua_pushcfunction(L, node_index);
	lua_setfield(L, -2, "index");
	lua_pushcfunction(L, node_matrix_nics);
	lua_setfield(L, -2, "matrix_nics");
}

static const lherd_type cluster_type = {
	.name = LHERD_CLUSTER,
	.methods = cluster_methods,
	.fields = cluster_fields,
	.release = cluster_release,
	.describe = cluster_describe,
};

/* A node holds no handle of its own: its cluster's close is its close. */
static const lherd_type node_type = {
	.name = LHERD_NODE,
	.methods = node_methods,
	.fields = node_fields_push,
	.meta = node_metamethods,
};

void lherd_open_cluster(lua_State *L)
{
	lherd_register(L, &cluster_type);
	lherd_register(L, &node_type);
}
