/*
 * shell/lua_hostlist.c - herd.hostlist: Slurm's hostlist expressions, both
 * ways (herd_hostlist_expand and herd_hostlist_compress of herd/cluster.h).
 *
 *   herd.hostlist.expand("node[01-03],login")  --> { "node01", "node02", "node03", "login" }
 *   herd.hostlist.compress{ "n1", "n2", "n4" }  --> "n[1-2,4]"
 *
 * A malformed expression, or a name an expression cannot hold, gives nil,
 * the message (with the column) and the status name; an argument of the
 * wrong type raises.
 */
#include <lauxlib.h>
#include <lua.h>
#include <limits.h>
#include <stdlib.h>

#include "herd.h"
#include "lua_herd.h"

static int hostlist_expand(lua_State *L)
{
	const char *expr = luaL_checkstring(L, 1);
	char **names = NULL;
	size_t n = 0;
	herd_status st = herd_hostlist_expand(expr, &names, &n);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_createtable(L, n > INT_MAX ? 0 : (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, names[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	herd_free(names);
	return 1;
}

static int hostlist_compress(lua_State *L)
{
	lua_Integer n;
	const char **names;
	char *expr = NULL;
	herd_status st;

	luaL_checktype(L, 1, LUA_TTABLE);
	n = luaL_len(L, 1);
	/* The names live as long as the table, which stays on the stack. */
	names = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(*names), 0);
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_rawgeti(L, 1, i) != LUA_TSTRING)
			return luaL_error(L, "bad argument #1 to 'compress' (item %d is a %s, "
					  "not a host name)", (int)i, luaL_typename(L, -1));
		names[i - 1] = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	st = herd_hostlist_compress(names, (size_t)n, &expr);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushstring(L, expr);
	herd_free(expr);
	return 1;
}

static const luaL_Reg hostlist_funcs[] = {
	{ "expand", hostlist_expand },
	{ "compress", hostlist_compress },
	{ NULL, NULL }
};

void lherd_open_hostlist(lua_State *L)
{
	luaL_newlib(L, hostlist_funcs);
	lua_setfield(L, -2, "hostlist");
}
