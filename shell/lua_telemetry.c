/*
 * shell/lua_telemetry.c - herd.telemetry: what this node's GPUs, CPUs,
 * memory, network and disks are doing (herd/telemetry.h), each sample as
 * a table; a sampler of this node on a period; a watch of many nodes.
 *
 *   local s = herd.telemetry.sample()              -- one sample now
 *   local t <close> = herd.telemetry.sampler{ period = 500, ring = 60 }
 *   local x = t:next(2)                            -- the next, 2 s at most
 *   for s in t:samples() do ... end                -- those that wait
 *   local w <close> = herd.telemetry.watch{ hosts = "node[01-04]" }
 *   local s, node = w:next(5)
 *
 * A sample's table has the keys of the packed sample (herd_telemetry_pack:
 * the C struct's field names; the arrays hold their items, the counts are
 * their lengths), made by one converter from the struct for all three,
 * so a figure the source does not give is -1 here as in C.
 * herd.telemetry.sample() keeps a sampler for the Lua state, so that the
 * rates of a call are over the time since the previous call.
 */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

#define LHERD_TELEMETRY "herd.Telemetry"
#define LHERD_TELEMETRY_WATCH "herd.TelemetryWatch"

void lherd_push_telemetry(lua_State *L, const herd_telemetry_sample *s)
{
	void **held = lherd_hold(L, free);
	size_t len = 0;

	if (herd_telemetry_pack(s, held, &len) != HERD_OK)
		luaL_error(L, "%s", shell_last_error());
	if (!lherd_msgpack_decode(L, (const char *)*held, len))
		luaL_error(L, "a packed sample that does not decode");
	lherd_drop(L, -2);
	lua_remove(L, -2);
	/* The format version is the wire's, not the sample's. */
	lua_pushnil(L);
	lua_setfield(L, -2, "v");
}

/* Waits until fd is readable: false at the deadline (lherd_now_ms's), or when
 * a signal came (Ctrl-C: the shell's hook raises "interrupted!" next). */
static bool wait_readable(int fd, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - lherd_now_ms();
		int r;

		if (left < 0)
			left = 0;
		r = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r > 0)
			return true;
		if (r == 0 || errno == EINTR || left == 0)
			return false;
	}
}

/* ---------------------------------------------------------- herd.Telemetry */

typedef struct lsampler {
	herd_telemetry *t;              /* NULL once closed */
	uint64_t seq;                   /* the last sample next() gave */
	int period_ms;
	size_t ring;
	herd_telemetry_sample s;        /* where samples are copied to */
} lsampler;

static const lherd_type sampler_type;

static lsampler *check_sampler(lua_State *L, int arg)
{
	return (lsampler *)lherd_check(L, arg, &sampler_type);
}

static void sampler_release(lua_State *L)
{
	lsampler *t = (lsampler *)lua_touserdata(L, 1);

	herd_telemetry_free(t->t);
	t->t = NULL;
}

static void sampler_describe(lua_State *L)
{
	lsampler *t = (lsampler *)lua_touserdata(L, 1);

	lua_pushfstring(L, "every %d ms, %d kept, at sample %d", t->period_ms, (int)t->ring,
			(int)t->seq);
}

/* t:next([seconds]) -> the oldest sample newer than the last one given, or
 * nil when none comes within seconds (default: none waits now). */
static int sampler_next(lua_State *L)
{
	lsampler *t = check_sampler(L, 1);
	int ms = lherd_check_seconds(L, 2, 0);
	int64_t deadline = lherd_now_ms() + ms;

	for (;;) {
		if (herd_telemetry_next(t->t, &t->seq, &t->s) == HERD_OK) {
			lherd_push_telemetry(L, &t->s);
			return 1;
		}
		if (ms == 0 || !wait_readable(herd_telemetry_fd(t->t), deadline))
			break;
	}
	lua_pushnil(L);
	return 1;
}

/* t:latest() -> the newest sample in the ring, or nil before the first. */
static int sampler_latest(lua_State *L)
{
	lsampler *t = check_sampler(L, 1);

	if (herd_telemetry_latest(t->t, &t->s) != HERD_OK) {
		lua_pushnil(L);
		return 1;
	}
	lherd_push_telemetry(L, &t->s);
	return 1;
}

/* The iterator of t:samples(): next() without waiting. */
static int sampler_iter(lua_State *L)
{
	lua_settop(L, 0);
	lua_pushvalue(L, lua_upvalueindex(1));
	return sampler_next(L);
}

/* for s in t:samples() do ... end: the samples that wait now, oldest first. */
static int sampler_samples(lua_State *L)
{
	check_sampler(L, 1);
	lua_settop(L, 1);
	lua_pushcclosure(L, sampler_iter, 1);
	return 1;
}

/* t:fd() -> the descriptor readable while a sample waits (poll it, do not read it). */
static int sampler_fd(lua_State *L)
{
	lua_pushinteger(L, herd_telemetry_fd(check_sampler(L, 1)->t));
	return 1;
}

static const luaL_Reg sampler_methods[] = {
	{ "next", sampler_next },
	{ "latest", sampler_latest },
	{ "samples", sampler_samples },
	{ "fd", sampler_fd },
	{ NULL, NULL }
};

static const lherd_type sampler_type = {
	.name = LHERD_TELEMETRY,
	.methods = sampler_methods,
	.release = sampler_release,
	.describe = sampler_describe,
};

static const char *const sampler_options[] = { "period", "ring", NULL };

/* herd.telemetry.sampler([{period = MS, ring = N}]) -> herd.Telemetry, its
 * thread started, or nil, msg, status. */
static int l_sampler(lua_State *L)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	lsampler *t;
	herd_status st;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, sampler_options);
		o.period_ms = (int)lherd_opt_integer(L, 1, "period", 10, 24 * 3600 * 1000, 1000);
		o.ring_size = (size_t)lherd_opt_integer(L, 1, "ring", 1, 1000000, 300);
	} else {
		o.period_ms = 1000;
		o.ring_size = 300;
	}
	t = (lsampler *)lherd_new(L, &sampler_type, sizeof(*t), 0);
	t->period_ms = o.period_ms;
	t->ring = o.ring_size;
	st = herd_telemetry_create(&t->t, &o);
	if (st == HERD_OK && (st = herd_telemetry_start(t->t)) != HERD_OK) {
		herd_telemetry_free(t->t);
		t->t = NULL;
	}
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

/* herd.telemetry.sample() -> this node's sample now, its rates over the
 * time since the previous call (-1 on the first), or nil, msg, status.
 * The sampler it takes them with is the Lua state's own, made at the first
 * call and kept in upvalue 1 (a table holding it at [1]); it is never
 * started, so no thread runs for it. */
static int l_sample(lua_State *L)
{
	lsampler *t;
	herd_status st;

	luaL_argcheck(L, lua_isnone(L, 1), 1, "herd.telemetry.sample takes no argument");
	if (lua_rawgeti(L, lua_upvalueindex(1), 1) == LUA_TUSERDATA) {
		t = (lsampler *)lua_touserdata(L, -1);
	} else {
		herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;

		lua_pop(L, 1);
		o.ring_size = 1;
		t = (lsampler *)lherd_new(L, &sampler_type, sizeof(*t), 0);
		t->ring = 1;
		st = herd_telemetry_create(&t->t, &o);
		if (st != HERD_OK)
			return lherd_fail(L, st);
		lua_pushvalue(L, -1);
		lua_rawseti(L, lua_upvalueindex(1), 1);
	}
	st = herd_telemetry_take(t->t, &t->s);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	t->seq = t->s.seq;
	lherd_push_telemetry(L, &t->s);
	return 1;
}

/* ----------------------------------------------------- herd.TelemetryWatch */

typedef struct lwatch {
	herd_telemetry_watch *w;        /* NULL once closed */
	herd_telemetry_sample s;
} lwatch;

static const lherd_type watch_type;

static lwatch *check_watch(lua_State *L, int arg)
{
	return (lwatch *)lherd_check(L, arg, &watch_type);
}

static void watch_release(lua_State *L)
{
	lwatch *w = (lwatch *)lua_touserdata(L, 1);

	herd_telemetry_watch_free(w->w);
	w->w = NULL;
}

static void watch_describe(lua_State *L)
{
	lwatch *w = (lwatch *)lua_touserdata(L, 1);

	lua_pushfstring(L, "%d nodes, %d live", (int)herd_telemetry_watch_nodes(w->w),
			(int)herd_telemetry_watch_live(w->w));
}

/* w:next([seconds]) -> sample, node (its place in w:nodes(), from 1), or
 * nil when none comes within seconds (default: none waits now). */
static int watch_next(lua_State *L)
{
	lwatch *w = check_watch(L, 1);
	int ms = lherd_check_seconds(L, 2, 0);
	int64_t deadline = lherd_now_ms() + ms;
	size_t node = 0;

	for (;;) {
		if (herd_telemetry_watch_next(w->w, &node, &w->s) == HERD_OK) {
			lherd_push_telemetry(L, &w->s);
			lua_pushinteger(L, (lua_Integer)node + 1);
			return 2;
		}
		/* Every node failed: nothing more will come. */
		if (ms == 0 || herd_telemetry_watch_live(w->w) == 0 ||
		    !wait_readable(herd_telemetry_watch_fd(w->w), deadline))
			break;
	}
	lua_pushnil(L);
	return 1;
}

static int watch_iter(lua_State *L)
{
	lua_settop(L, 0);
	lua_pushvalue(L, lua_upvalueindex(1));
	return watch_next(L);
}

/* for s, node in w:samples() do ... end: the samples that wait now. */
static int watch_samples(lua_State *L)
{
	check_watch(L, 1);
	lua_settop(L, 1);
	lua_pushcclosure(L, watch_iter, 1);
	return 1;
}

/* w:nodes() -> {{host, state, why, samples, lost, last_ms}, ...}. */
static int watch_nodes(lua_State *L)
{
	lwatch *w = check_watch(L, 1);
	size_t n = herd_telemetry_watch_nodes(w->w);

	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		herd_telemetry_node nd;

		if (herd_telemetry_watch_node(w->w, i, &nd) != HERD_OK)
			continue;
		lua_createtable(L, 0, 6);
		lherd_set_string(L, "host", nd.host);
		lherd_set_string(L, "state", herd_telemetry_node_state_name(nd.state));
		lherd_set_nonempty(L, "why", nd.why);
		lherd_set_integer(L, "samples", (lua_Integer)nd.samples);
		lherd_set_integer(L, "lost", (lua_Integer)nd.lost);
		lherd_set_integer(L, "last_ms", nd.last_ms);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

/* w:live() -> the nodes starting or streaming. */
static int watch_live(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)herd_telemetry_watch_live(check_watch(L, 1)->w));
	return 1;
}

static int watch_fd(lua_State *L)
{
	lua_pushinteger(L, herd_telemetry_watch_fd(check_watch(L, 1)->w));
	return 1;
}

static const luaL_Reg watch_methods[] = {
	{ "next", watch_next },
	{ "samples", watch_samples },
	{ "nodes", watch_nodes },
	{ "live", watch_live },
	{ "fd", watch_fd },
	{ NULL, NULL }
};

static const lherd_type watch_type = {
	.name = LHERD_TELEMETRY_WATCH,
	.methods = watch_methods,
	.release = watch_release,
	.describe = watch_describe,
};

static const char *const watch_options[] = { "hosts", "hostfile", "slurm", "period", NULL };

/* herd.telemetry.watch([{hosts | hostfile | slurm = true, period = MS}]) ->
 * herd.TelemetryWatch, or nil, msg, status. */
static int l_watch(lua_State *L)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	lwatch *w;
	herd_status st;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, watch_options);
		o.hosts = lherd_opt_string(L, 1, "hosts");
		o.hostfile = lherd_opt_string(L, 1, "hostfile");
		if (lua_getfield(L, 1, "slurm") != LUA_TNIL) {
			if (!lua_isboolean(L, -1))
				return luaL_argerror(L, 1, "option 'slurm' must be a boolean");
			o.slurm = lua_toboolean(L, -1);
		}
		lua_pop(L, 1);
		luaL_argcheck(L, (o.hosts != NULL) + (o.hostfile != NULL) + o.slurm <= 1, 1,
			      "options 'hosts', 'hostfile' and 'slurm' exclude each other");
		o.period_ms = (int)lherd_opt_integer(L, 1, "period", 100, 24 * 3600 * 1000, 1000);
	}
	w = (lwatch *)lherd_new(L, &watch_type, sizeof(*w), 0);
	st = herd_telemetry_watch_start(&w->w, &o);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

void lherd_open_telemetry(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "sampler", l_sampler },
		{ "watch", l_watch },
		{ NULL, NULL }
	};

	lherd_register(L, &sampler_type);
	lherd_register(L, &watch_type);
	luaL_newlib(L, funcs);
	lua_newtable(L);
	lua_pushcclosure(L, l_sample, 1);
	lua_setfield(L, -2, "sample");
	lua_setfield(L, -2, "telemetry");
}
