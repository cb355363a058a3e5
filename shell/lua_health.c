/*
 * shell/lua_health.c - herd.health([opts]): the per-GPU checks of
 * herd/health.h as plain Lua tables.
 *
 *   local r = herd.health{ level = 2, seconds = 3 }
 *   for _, g in ipairs(r.gpus) do print(g.index, g.result) end
 *
 * r.level, r.note (why no GPU was checked, else nil), r.gpus[i] = { index,
 * name, bus_id, uuid, result, checks = { { name, result, value, unit,
 * detail }, ... } }; results are "pass", "warn", "fail" or "skip".  A
 * failure to run at all gives nil, message, status name.
 */
#include <lauxlib.h>
#include <lua.h>

#include "herd.h"
#include "lua_herd.h"

static const char *const health_options[] = { "level", "seconds", NULL };

static void push_check(lua_State *L, const herd_health_check *c)
{
	lua_createtable(L, 0, 5);
	lherd_set_string(L, "name", c->name);
	lherd_set_string(L, "result", herd_health_result_name(c->result));
	lua_pushnumber(L, c->value);
	lua_setfield(L, -2, "value");
	lherd_set_string(L, "unit", c->unit);
	lherd_set_string(L, "detail", c->detail);
}

static void push_gpu(lua_State *L, const herd_health_gpu *g)
{
	lua_createtable(L, 0, 6);
	lherd_set_integer(L, "index", g->index);
	lherd_set_string(L, "name", g->name);
	lherd_set_string(L, "bus_id", g->bus_id);
	lherd_set_string(L, "uuid", g->uuid);
	lherd_set_string(L, "result", herd_health_result_name(g->result));
	lua_createtable(L, (int)g->nchecks, 0);
	for (size_t c = 0; c < g->nchecks; c++) {
		push_check(L, &g->checks[c]);
		lua_rawseti(L, -2, (lua_Integer)c + 1);
	}
	lua_setfield(L, -2, "checks");
}

/* The report (argument 1, a light userdata) as tables. */
static int push_report(lua_State *L)
{
	const herd_health_report *r = lua_touserdata(L, 1);

	lua_createtable(L, 0, 3);
	lherd_set_integer(L, "level", r->level);
	if (r->ngpus == 0)
		lherd_set_string(L, "note", r->note);
	lua_createtable(L, (int)r->ngpus, 0);
	for (size_t g = 0; g < r->ngpus; g++) {
		push_gpu(L, &r->gpus[g]);
		lua_rawseti(L, -2, (lua_Integer)g + 1);
	}
	lua_setfield(L, -2, "gpus");
	return 1;
}

/* herd.health([opts]) -> report, or nil, msg, status. */
static int lherd_health(lua_State *L)
{
	herd_health_opts o = { .version = HERD_HEALTH_OPTS_VERSION };
	herd_health_report *r = NULL;
	herd_status st;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, health_options);
		if (lua_getfield(L, 1, "level") != LUA_TNIL) {
			if (!lua_isinteger(L, -1))
				return luaL_argerror(L, 1, "option 'level' must be 1 or 2");
			o.level = (int)lua_tointeger(L, -1);
		}
		if (lua_getfield(L, 1, "seconds") != LUA_TNIL) {
			if (lua_type(L, -1) != LUA_TNUMBER)
				return luaL_argerror(L, 1, "option 'seconds' must be a number");
			o.burn_seconds = lua_tonumber(L, -1);
		}
		lua_pop(L, 2);
	}
	st = herd_health_run(&r, &o);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	/* The tables are built under a protected call, so that the report is
	 * freed even when building them runs out of memory. */
	lua_pushcfunction(L, push_report);
	lua_pushlightuserdata(L, r);
	st = lua_pcall(L, 1, 1, 0) == LUA_OK ? HERD_OK : HERD_ENOMEM;
	herd_health_free(r);
	if (st != HERD_OK)
		return lua_error(L);
	return 1;
}

void lherd_open_health(lua_State *L)
{
	/* The herd table is on top of the stack. */
	lua_pushcfunction(L, lherd_health);
	lua_setfield(L, -2, "health");
}
