/*
 * shell/lua_telemetry.c - herd.telemetry: this node's samples
 * (herd/telemetry.h) as plain Lua tables.
 *
 *   local s = herd.telemetry.sample()            -- one sample, now
 *   print(s.host, s.cpu_busy, #s.gpus, s.gpu_note)
 *   local t <close> = herd.telemetry.sampler{ period = 500, ring = 60 }
 *   local x = t:next(2)                          -- the next sample, waiting up to 2 s
 *
 * A sample's table has the fields of herd_telemetry_sample under the same
 * names; gpus, procs, nets and disks are arrays of tables with the fields
 * of their structs, cpu_core an array of numbers (index 1 is core 0).
 * One converter makes them all, from one table of field descriptions per
 * struct.  herd.telemetry.sample() uses a sampler of its own, kept for the
 * Lua state, so that the rates of a call are over the time since the
 * previous call (-1 on the first).  A herd.Telemetry is a started sampler:
 * next() and latest() return nil when there is no sample (yet), close()
 * may be called again, and __gc and __close close it.
 */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "herd/telemetry.h"
#include "lua_herd.h"

#define LHERD_TELEMETRY "herd.Telemetry"

/* ------------------------------------------------------- struct -> table */

/*
 * A sample as a table: the codec's msgpack map (herd_telemetry_pack, the
 * one description of a sample's fields) decoded as herd.msgpack decodes,
 * less its format version, plus the counts of the C struct (ncpus, ngpus,
 * ...), which the map's arrays imply.  Raises on failure, leaking nothing.
 */
static void push_sample(lua_State *L, const herd_telemetry_sample *s)
{
	void **held = lherd_hold(L, free);
	size_t len;
	herd_status st = herd_telemetry_pack(s, held, &len);

	if (st != HERD_OK)
		luaL_error(L, "%s", herd_last_error());
	if (!lherd_msgpack_decode(L, (const char *)*held, len))
		luaL_error(L, "telemetry: a packed sample does not decode");
	lherd_drop(L, -2);
	lua_remove(L, -2);
	lua_pushnil(L);
	lua_setfield(L, -2, "v");
	lua_pushinteger(L, s->ncpus);
	lua_setfield(L, -2, "ncpus");
	lua_pushinteger(L, s->ngpus);
	lua_setfield(L, -2, "ngpus");
	lua_pushinteger(L, s->nprocs);
	lua_setfield(L, -2, "nprocs");
	lua_pushinteger(L, s->nnets);
	lua_setfield(L, -2, "nnets");
	lua_pushinteger(L, s->ndisks);
	lua_setfield(L, -2, "ndisks");
}

/* Scratch room for one sample (some tens of kilobytes), collected by Lua. */
static herd_telemetry_sample *new_scratch(lua_State *L)
{
	return (herd_telemetry_sample *)lua_newuserdatauv(L, sizeof(herd_telemetry_sample), 0);
}

/* ----------------------------------------------------------- herd.Telemetry */

typedef struct ltelemetry {
	herd_telemetry *t;      /* NULL once closed */
	uint64_t seq;           /* the last sample next() returned */
	int period_ms;
} ltelemetry;

static const lherd_type telemetry_type;

static void telemetry_release(lua_State *L)
{
	ltelemetry *x = (ltelemetry *)lua_touserdata(L, 1);

	herd_telemetry_free(x->t);
	x->t = NULL;
}

/* t:close() -> true; again, true as well. */
static int telemetry_close(lua_State *L)
{
	ltelemetry *x = (ltelemetry *)lherd_to(L, 1, &telemetry_type);

	if (x->t != NULL) {
		lua_settop(L, 1);
		telemetry_release(L);
	}
	lua_pushboolean(L, 1);
	return 1;
}

/* t:next([seconds]) -> the oldest sample newer than the last one returned,
 * waiting up to seconds (default 0) for one; nil when none came. */
static int telemetry_next(lua_State *L)
{
	ltelemetry *x = (ltelemetry *)lherd_check(L, 1, &telemetry_type);
	int wait_ms = lherd_check_seconds(L, 2, 0);
	int64_t deadline = lherd_now_ms() + wait_ms;
	herd_telemetry_sample *s = new_scratch(L);

	for (;;) {
		struct pollfd p = { .fd = herd_telemetry_fd(x->t), .events = POLLIN };
		int64_t left;

		if (herd_telemetry_next(x->t, &x->seq, s) == HERD_OK) {
			push_sample(L, s);
			return 1;
		}
		left = deadline - lherd_now_ms();
		/* a signal (Ctrl-C) ends the wait too */
		if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno == EINTR))
			break;
	}
	lua_pushnil(L);
	return 1;
}

/* t:latest() -> the newest sample, or nil before the first. */
static int telemetry_latest(lua_State *L)
{
	ltelemetry *x = (ltelemetry *)lherd_check(L, 1, &telemetry_type);
	herd_telemetry_sample *s = new_scratch(L);

	if (herd_telemetry_latest(x->t, s) != HERD_OK) {
		lua_pushnil(L);
		return 1;
	}
	push_sample(L, s);
	return 1;
}

/* t:fd() -> the descriptor readable while a sample waits for next(). */
static int telemetry_fd(lua_State *L)
{
	ltelemetry *x = (ltelemetry *)lherd_check(L, 1, &telemetry_type);

	lua_pushinteger(L, herd_telemetry_fd(x->t));
	return 1;
}

static void telemetry_describe(lua_State *L)
{
	ltelemetry *x = (ltelemetry *)lua_touserdata(L, 1);

	lua_pushfstring(L, "every %d ms", x->period_ms);
}

static const luaL_Reg telemetry_methods[] = {
	{ "next", telemetry_next },
	{ "latest", telemetry_latest },
	{ "fd", telemetry_fd },
	{ "close", telemetry_close },
	{ NULL, NULL }
};

static const lherd_type telemetry_type = {
	.name = LHERD_TELEMETRY,
	.methods = telemetry_methods,
	.release = telemetry_release,
	.describe = telemetry_describe,
};

/* ----------------------------------------------------------- herd.telemetry */

static const char *const sampler_options[] = { "period", "ring", NULL };

/* herd.telemetry.sampler{period = MS, ring = N} -> a started herd.Telemetry,
 * or nil, msg, status. */
static int ltelemetry_sampler(lua_State *L)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	ltelemetry *x;
	herd_status st;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, sampler_options);
		o.period_ms = (int)lherd_opt_integer(L, 1, "period", 10, 3600000, 1000);
		o.ring_size = (size_t)lherd_opt_integer(L, 1, "ring", 1, 100000, 300);
	}
	x = (ltelemetry *)lherd_new(L, &telemetry_type, sizeof(*x), 0);
	x->period_ms = o.period_ms > 0 ? o.period_ms : 1000;
	st = herd_telemetry_create(&x->t, &o);
	if (st == HERD_OK) {
		st = herd_telemetry_start(x->t);
		if (st != HERD_OK) {
			herd_telemetry_free(x->t);
			x->t = NULL;
		}
	}
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

/* The state's own sampler for herd.telemetry.sample(), made at the first
 * call (upvalue 1: a table holding it at [1]). */
static herd_telemetry *own_sampler(lua_State *L, herd_status *st)
{
	ltelemetry *x;

	*st = HERD_OK;
	if (lua_rawgeti(L, lua_upvalueindex(1), 1) == LUA_TUSERDATA) {
		x = (ltelemetry *)lua_touserdata(L, -1);
		lua_pop(L, 1);
		return x->t;
	}
	lua_pop(L, 1);
	x = (ltelemetry *)lherd_new(L, &telemetry_type, sizeof(*x), 0);
	*st = herd_telemetry_create(&x->t, NULL);
	if (*st != HERD_OK) {
		lua_pop(L, 1);
		return NULL;
	}
	lua_rawseti(L, lua_upvalueindex(1), 1);
	return x->t;
}

/* herd.telemetry.sample() -> this node's sample now (rates since the
 * previous call), or nil, msg, status. */
static int ltelemetry_sample(lua_State *L)
{
	herd_telemetry_sample *s;
	herd_telemetry *t;
	herd_status st;

	lua_settop(L, 0);
	t = own_sampler(L, &st);
	if (t == NULL)
		return lherd_fail(L, st);
	s = new_scratch(L);
	st = herd_telemetry_take(t, s);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	push_sample(L, s);
	return 1;
}

void lherd_open_telemetry(lua_State *L)
{
	lherd_register(L, &telemetry_type);
	lua_createtable(L, 0, 2);
	lua_newtable(L);
	lua_pushcclosure(L, ltelemetry_sample, 1);
	lua_setfield(L, -2, "sample");
	lua_pushcfunction(L, ltelemetry_sampler);
	lua_setfield(L, -2, "sampler");
	lua_setfield(L, -2, "telemetry");
}
