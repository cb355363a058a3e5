/*
 * shell/lua_cluster.c - herd.Cluster and herd.Node, the Lua faces of a
 * herd_cluster and of its nodes.
 *
 * A herd.Cluster is a full userdata holding the herd_cluster*; it frees it
 * through one idempotent close, reached from c:close(), __close and __gc.
 * Its user value is a table caching the herd.Node objects, so that
 * c.nodes[1] == c.nodes[1].  A herd.Node holds only its index; its user
 * value is the cluster object, which keeps the cluster alive as long as any
 * node is reachable, and every node access goes through the cluster so that
 * a node of a closed cluster raises instead of reading freed memory.
 *
 * Fields are computed on access and returned as fresh tables; a value the
 * inventory does not know (a NUMA node of -1, a speed of -1, an empty PCI
 * bus id) is left out (nil).
 */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <string.h>

#include "lua_herd.h"

typedef struct lcluster {
	herd_cluster *cluster; /* NULL once closed */
} lcluster;

typedef struct lnode {
	size_t index; /* 0-based, in the cluster */
} lnode;

/* ---------------------------------------------------------------- helpers */

/* Memory sizes fit a lua_Integer by far; clamp rather than wrap. */
static void push_bytes(lua_State *L, uint64_t value)
{
	lua_pushinteger(L, value > (uint64_t)LUA_MAXINTEGER ? LUA_MAXINTEGER
							    : (lua_Integer)value);
}

static void set_bytes(lua_State *L, const char *key, uint64_t value)
{
	push_bytes(L, value);
	lua_setfield(L, -2, key);
}

static void set_numa(lua_State *L, int numa_node)
{
	if (numa_node >= 0)
		lherd_set_integer(L, "numa_node", numa_node);
}

static void set_strings(lua_State *L, const char *key, const char *const *v,
			size_t n)
{
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, v[i] ? v[i] : "");
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, key);
}

static herd_format check_format(lua_State *L, int arg, const char *def)
{
	static const char *const names[] = { "auto", "msgpack", "json", NULL };
	static const herd_format formats[] = { HERD_FORMAT_AUTO, HERD_FORMAT_MSGPACK,
					       HERD_FORMAT_JSON };
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
	lcluster *c = (lcluster *)lherd_new(L, &cluster_type, sizeof(*c), 1);
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
static int push_encoding(lua_State *L, herd_format format)
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
	return push_encoding(L, HERD_FORMAT_JSON);
}

/* c:encode([format]) -> bytes; format "msgpack" (default) or "json". */
static int cluster_encode(lua_State *L)
{
	herd_format format = check_format(L, 2, "msgpack");
	if (format == HERD_FORMAT_AUTO)
		return luaL_argerror(L, 2, "expected \"msgpack\" or \"json\"");
	return push_encoding(L, format);
}

/* c:save(path[, format]) -> true, or nil, msg, status. */
static int cluster_save(lua_State *L)
{
	herd_cluster *cluster = check_cluster(L, 1);
	const char *path = luaL_checkstring(L, 2);
	herd_format format = check_format(L, 3, "auto");
	herd_status st = herd_cluster_save(cluster, path, format);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, 1);
	return 1;
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
	node_ref ref = { herd_cluster_node(c->cluster, n->index), n->index };
	if (ref.node == NULL)
		luaL_error(L, "node %d is not in its cluster", (int)n->index + 1);
	return ref;
}

static int node_tostring(lua_State *L)
{
	lnode *n = (lnode *)lherd_to(L, 1, &node_type);
	lua_getiuservalue(L, 1, 1);
	lcluster *c = (lcluster *)lua_touserdata(L, -1);
	const herd_node *node = (c && c->cluster)
		? herd_cluster_node(c->cluster, n->index) : NULL;
	if (node == NULL)
		lua_pushliteral(L, "herd.Node (closed)");
	else
		lua_pushfstring(L, "herd.Node %d (%s)", (int)n->index + 1,
				node->hostname ? node->hostname : "?");
	return 1;
}

static size_t check_index(lua_State *L, int arg, size_t count, const char *what)
{
	lua_Integer i = luaL_checkinteger(L, arg);
	if (i < 1 || (lua_Unsigned)i > count) {
		const char *msg = lua_pushfstring(L, "%s index %d out of range (node has %d)",
						  what, (int)i, (int)count);
		luaL_argerror(L, arg, msg);
	}
	return (size_t)(i - 1);
}

static int push_link(lua_State *L, herd_status st, herd_link link)
{
	if (st != HERD_OK)
		return lherd_fail(L, st);
	char buf[HERD_LINK_STR_LEN];
	lua_pushstring(L, herd_link_str(link, buf));
	return 1;
}

/* node:link(i, j) -> the matrix code between GPUs i and j (1-based). */
static int node_link(lua_State *L)
{
	node_ref r = check_node(L, 1);
	size_t i = check_index(L, 2, r.node->ngpus, "GPU");
	size_t j = check_index(L, 3, r.node->ngpus, "GPU");
	herd_link link;
	herd_status st = herd_node_gpu_link(r.node, i, j, &link);
	return push_link(L, st, link);
}

/* node:nic_link(i, j) -> the matrix code between GPU i and matrix NIC j. */
static int node_nic_link(lua_State *L)
{
	node_ref r = check_node(L, 1);
	size_t i = check_index(L, 2, r.node->ngpus, "GPU");
	size_t j = check_index(L, 3, herd_node_nic_count(r.node), "NIC");
	herd_link link;
	herd_status st = herd_node_gpu_nic_link(r.node, i, j, &link);
	return push_link(L, st, link);
}

/* Field getters: each pushes one value of the node. */

static void get_index(lua_State *L, node_ref r)
{
	lua_pushinteger(L, (lua_Integer)r.index + 1);
}

static void get_hostname(lua_State *L, node_ref r)
{
	lua_pushstring(L, r.node->hostname);
}

static void get_cpu_model(lua_State *L, node_ref r)
{
	lua_pushstring(L, r.node->cpu_model ? r.node->cpu_model : "");
}

static void get_packages(lua_State *L, node_ref r)
{
	lua_pushinteger(L, r.node->packages);
}

static void get_cores(lua_State *L, node_ref r)
{
	lua_pushinteger(L, r.node->cores);
}

static void get_threads(lua_State *L, node_ref r)
{
	lua_pushinteger(L, r.node->threads);
}

static void get_cpus(lua_State *L, node_ref r)
{
	lua_createtable(L, 0, 4);
	lherd_set_integer(L, "packages", r.node->packages);
	lherd_set_integer(L, "cores", r.node->cores);
	lherd_set_integer(L, "threads", r.node->threads);
	lherd_set_string(L, "model", r.node->cpu_model ? r.node->cpu_model : "");
}

static void get_numa(lua_State *L, node_ref r)
{
	lua_createtable(L, (int)r.node->nnuma, 0);
	for (size_t i = 0; i < r.node->nnuma; i++) {
		const herd_numa_node *m = &r.node->numa[i];
		lua_createtable(L, 0, 3);
		lherd_set_integer(L, "os_index", m->os_index);
		set_bytes(L, "memory_bytes", m->memory_bytes);
		lherd_set_string(L, "cpus", m->cpus ? m->cpus : "");
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

static void get_memory_bytes(lua_State *L, node_ref r)
{
	push_bytes(L, r.node->memory_bytes);
}

static void get_memory_available_bytes(lua_State *L, node_ref r)
{
	push_bytes(L, r.node->memory_available_bytes);
}

static void push_gpu(lua_State *L, const herd_gpu *g)
{
	lua_createtable(L, 0, 12);
	lherd_set_string(L, "uuid", g->uuid);
	lherd_set_string(L, "name", g->name);
	lherd_set_nonempty(L, "pci_bus_id", g->pci.bus_id);
	lherd_set_nonempty(L, "host_bridge", g->pci.host_bridge);
	set_numa(L, g->pci.numa_node);
	set_bytes(L, "memory_bytes", g->memory_bytes);
	lua_pushfstring(L, "%d.%d", g->cc_major, g->cc_minor);
	lua_setfield(L, -2, "cc");
	lherd_set_integer(L, "nvswitch_links", g->nvswitch_links);
	lua_createtable(L, (int)g->nnvlinks, 0);
	for (size_t i = 0; i < g->nnvlinks; i++) {
		lua_createtable(L, 0, 2);
		lherd_set_string(L, "peer_bus_id", g->nvlinks[i].peer_bus_id);
		lherd_set_integer(L, "links", g->nvlinks[i].links);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "nvlinks");
}

static void get_gpus(lua_State *L, node_ref r)
{
	lua_createtable(L, (int)r.node->ngpus, 0);
	for (size_t i = 0; i < r.node->ngpus; i++) {
		push_gpu(L, &r.node->gpus[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

static void get_gpu_note(lua_State *L, node_ref r)
{
	if (r.node->gpu_note)
		lua_pushstring(L, r.node->gpu_note);
	else
		lua_pushnil(L);
}

static void get_nics(lua_State *L, node_ref r)
{
	lua_createtable(L, (int)r.node->nnetdevs, 0);
	for (size_t i = 0; i < r.node->nnetdevs; i++) {
		const herd_netdev *d = &r.node->netdevs[i];
		lua_createtable(L, 0, 7);
		lherd_set_string(L, "name", d->name);
		lherd_set_string(L, "state", d->state);
		lherd_set_integer(L, "mtu", d->mtu);
		if (d->speed_mbps >= 0)
			lherd_set_integer(L, "speed_mbps", (lua_Integer)d->speed_mbps);
		set_strings(L, "addrs", d->addrs, d->naddrs);
		lherd_set_nonempty(L, "pci_bus_id", d->pci.bus_id);
		set_numa(L, d->pci.numa_node);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

static void push_rdma_port(lua_State *L, const herd_rdma_port *p)
{
	lua_createtable(L, 0, 5);
	lherd_set_integer(L, "port", p->port);
	lherd_set_string(L, "state", p->state);
	lherd_set_string(L, "link_layer", p->link_layer);
	lherd_set_integer(L, "rate_gbps", p->rate_gbps);
	set_strings(L, "gids", p->gids, p->ngids);
}

static void get_rdma(lua_State *L, node_ref r)
{
	lua_createtable(L, (int)r.node->nrdma, 0);
	for (size_t i = 0; i < r.node->nrdma; i++) {
		const herd_rdma_device *d = &r.node->rdma[i];
		lua_createtable(L, 0, 5);
		lherd_set_string(L, "name", d->name);
		lherd_set_nonempty(L, "netdev", d->netdev);
		lherd_set_nonempty(L, "pci_bus_id", d->pci.bus_id);
		set_numa(L, d->pci.numa_node);
		lua_createtable(L, (int)d->nports, 0);
		for (size_t k = 0; k < d->nports; k++) {
			push_rdma_port(L, &d->ports[k]);
			lua_rawseti(L, -2, (lua_Integer)k + 1);
		}
		lua_setfield(L, -2, "ports");
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

static void get_rdma_note(lua_State *L, node_ref r)
{
	if (r.node->rdma_note)
		lua_pushstring(L, r.node->rdma_note);
	else
		lua_pushnil(L);
}

/* The NICs of the topology matrix, in the order node:nic_link numbers them. */
static void get_matrix_nics(lua_State *L, node_ref r)
{
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
}

typedef void (*node_getter)(lua_State *L, node_ref r);

static const struct node_field {
	const char *name;
	node_getter get;
} node_fields[] = {
	{ "index", get_index },
	{ "hostname", get_hostname },
	{ "cpu_model", get_cpu_model },
	{ "packages", get_packages },
	{ "cores", get_cores },
	{ "threads", get_threads },
	{ "cpus", get_cpus },
	{ "numa", get_numa },
	{ "memory_bytes", get_memory_bytes },
	{ "memory_available_bytes", get_memory_available_bytes },
	{ "gpus", get_gpus },
	{ "gpu_note", get_gpu_note },
	{ "nics", get_nics },
	{ "rdma", get_rdma },
	{ "rdma_note", get_rdma_note },
	{ "matrix_nics", get_matrix_nics },
	{ NULL, NULL }
};

/* ------------------------------------------------------------- the types */

static int node_field_get(lua_State *L)
{
	node_ref r = check_node(L, 1);
	const struct node_field *f =
		(const struct node_field *)lua_touserdata(L, lua_upvalueindex(1));
	f->get(L, r);
	return 1;
}

static const luaL_Reg cluster_methods[] = {
	{ "save", cluster_save },
	{ "json", cluster_json },
	{ "encode", cluster_encode },
	{ NULL, NULL }
};

static void cluster_fields(lua_State *L)
{
	lua_newtable(L);
	lua_pushcfunction(L, cluster_nodes);
	lua_setfield(L, -2, "nodes");
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
	for (const struct node_field *f = node_fields; f->name; f++) {
		lua_pushlightuserdata(L, (void *)f);
		lua_pushcclosure(L, node_field_get, 1);
		lua_setfield(L, -2, f->name);
	}
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
