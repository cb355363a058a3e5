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
#include <string.h>

#include "herd/telemetry.h"
#include "lua_herd.h"

#define LHERD_TELEMETRY "herd.Telemetry"

/* ------------------------------------------------------- struct -> table */

enum { F_INT, F_I64, F_U64, F_DBL, F_STR };

typedef struct lfield {
	const char *name;
	int kind;
	size_t off;
} lfield;

#define FIELD(type, name, kind) { #name, kind, offsetof(type, name) }

static const lfield gpu_fields[] = {
	FIELD(herd_telemetry_gpu, index, F_INT),
	FIELD(herd_telemetry_gpu, uuid, F_STR),
	FIELD(herd_telemetry_gpu, bus_id, F_STR),
	FIELD(herd_telemetry_gpu, name, F_STR),
	FIELD(herd_telemetry_gpu, util_gpu, F_DBL),
	FIELD(herd_telemetry_gpu, util_mem, F_DBL),
	FIELD(herd_telemetry_gpu, mem_used, F_I64),
	FIELD(herd_telemetry_gpu, mem_total, F_I64),
	FIELD(herd_telemetry_gpu, power_w, F_DBL),
	FIELD(herd_telemetry_gpu, power_limit_w, F_DBL),
	FIELD(herd_telemetry_gpu, energy_mj, F_I64),
	FIELD(herd_telemetry_gpu, temp_c, F_DBL),
	FIELD(herd_telemetry_gpu, sm_clock_mhz, F_DBL),
	FIELD(herd_telemetry_gpu, mem_clock_mhz, F_DBL),
	FIELD(herd_telemetry_gpu, throttle, F_I64),
	FIELD(herd_telemetry_gpu, ecc_sbe, F_I64),
	FIELD(herd_telemetry_gpu, ecc_dbe, F_I64),
	FIELD(herd_telemetry_gpu, xid, F_I64),
	FIELD(herd_telemetry_gpu, xid_count, F_I64),
	FIELD(herd_telemetry_gpu, pcie_tx_bps, F_DBL),
	FIELD(herd_telemetry_gpu, pcie_rx_bps, F_DBL),
	FIELD(herd_telemetry_gpu, nvlink_tx_bps, F_DBL),
	FIELD(herd_telemetry_gpu, nvlink_rx_bps, F_DBL),
	{ NULL, 0, 0 }
};

static const lfield proc_fields[] = {
	FIELD(herd_telemetry_proc, gpu, F_INT),
	FIELD(herd_telemetry_proc, pid, F_I64),
	FIELD(herd_telemetry_proc, mem_used, F_I64),
	FIELD(herd_telemetry_proc, job, F_STR),
	FIELD(herd_telemetry_proc, rank, F_INT),
	FIELD(herd_telemetry_proc, comm, F_STR),
	{ NULL, 0, 0 }
};

static const lfield net_fields[] = {
	FIELD(herd_telemetry_net, name, F_STR),
	FIELD(herd_telemetry_net, rx_bytes, F_U64),
	FIELD(herd_telemetry_net, tx_bytes, F_U64),
	FIELD(herd_telemetry_net, rx_bps, F_DBL),
	FIELD(herd_telemetry_net, tx_bps, F_DBL),
	{ NULL, 0, 0 }
};

static const lfield disk_fields[] = {
	FIELD(herd_telemetry_disk, name, F_STR),
	FIELD(herd_telemetry_disk, read_bytes, F_U64),
	FIELD(herd_telemetry_disk, write_bytes, F_U64),
	FIELD(herd_telemetry_disk, read_bps, F_DBL),
	FIELD(herd_telemetry_disk, write_bps, F_DBL),
	FIELD(herd_telemetry_disk, util, F_DBL),
	{ NULL, 0, 0 }
};

/* The sample's own scalars; its arrays follow in push_sample. */
static const lfield sample_fields[] = {
	FIELD(herd_telemetry_sample, seq, F_U64),
	FIELD(herd_telemetry_sample, time_ms, F_I64),
	FIELD(herd_telemetry_sample, period_ms, F_I64),
	FIELD(herd_telemetry_sample, host, F_STR),
	FIELD(herd_telemetry_sample, cpu_busy, F_DBL),
	FIELD(herd_telemetry_sample, ncpus, F_INT),
	FIELD(herd_telemetry_sample, load1, F_DBL),
	FIELD(herd_telemetry_sample, mem_total, F_I64),
	FIELD(herd_telemetry_sample, mem_available, F_I64),
	FIELD(herd_telemetry_sample, ngpus, F_INT),
	FIELD(herd_telemetry_sample, gpu_note, F_STR),
	FIELD(herd_telemetry_sample, nprocs, F_INT),
	FIELD(herd_telemetry_sample, nnets, F_INT),
	FIELD(herd_telemetry_sample, ndisks, F_INT),
	FIELD(herd_telemetry_sample, dropped, F_INT),
	{ NULL, 0, 0 }
};

/* Sets the fields of the struct at p into the table on top of the stack. */
static void set_fields(lua_State *L, const void *p, const lfield *f)
{
	for (; f->name != NULL; f++) {
		const char *at = (const char *)p + f->off;

		switch (f->kind) {
		case F_INT: {
			int v;

			memcpy(&v, at, sizeof(v));
			lua_pushinteger(L, v);
			break;
		}
		case F_I64: {
			int64_t v;

			memcpy(&v, at, sizeof(v));
			lua_pushinteger(L, (lua_Integer)v);
			break;
		}
		case F_U64: {
			uint64_t v;

			memcpy(&v, at, sizeof(v));
			lua_pushinteger(L, (lua_Integer)v);
			break;
		}
		case F_DBL: {
			double v;

			memcpy(&v, at, sizeof(v));
			lua_pushnumber(L, v);
			break;
		}
		default:
			lua_pushstring(L, at);
			break;
		}
		lua_setfield(L, -2, f->name);
	}
}

/* t[key] = an array of n tables, the structs at first, size bytes apart. */
static void set_array(lua_State *L, const char *key, const void *first, int n, size_t size,
		      const lfield *f)
{
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		lua_createtable(L, 0, 8);
		set_fields(L, (const char *)first + (size_t)i * size, f);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, key);
}

static void push_sample(lua_State *L, const herd_telemetry_sample *s)
{
	lua_createtable(L, 0, 20);
	set_fields(L, s, sample_fields);
	lua_createtable(L, s->ncpus, 0);
	for (int i = 0; i < s->ncpus && i < HERD_TELEMETRY_MAX_CPUS; i++) {
		lua_pushnumber(L, s->cpu_core[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "cpu_core");
	set_array(L, "gpus", s->gpus, s->ngpus, sizeof(s->gpus[0]), gpu_fields);
	set_array(L, "procs", s->procs, s->nprocs, sizeof(s->procs[0]), proc_fields);
	set_array(L, "nets", s->nets, s->nnets, sizeof(s->nets[0]), net_fields);
	set_array(L, "disks", s->disks, s->ndisks, sizeof(s->disks[0]), disk_fields);
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
