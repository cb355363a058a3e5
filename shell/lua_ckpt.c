/*
 * shell/lua_ckpt.c - herd.checkpoint(dir, comm, opts), the Lua face of a
 * herd_ckpt: a herd.Checkpoint.
 *
 *   local ck <close> = herd.checkpoint("ckpt", herd.comm(), {keep_last = 3})
 *   local w = herd.buffer("float32", 6)
 *   ck:add("w", w, {shape = {2, 3}})  -- saved from and restored into w's memory
 *   ck:add("bias", {0.5, 0.25})        -- a Lua array: float64 unless dtype says
 *   ck:add("part", p, {dtype = "float64", global = {8}, offset = {4}, shape = {4}})
 *   assert(ck:save(100))              -- or ck:save_async(100) ... ck:wait()
 *   local step = ck:restore()         -- the newest step that verifies; fills w
 *
 * A tensor is a herd.Buffer or a Lua array of numbers.  A buffer is saved
 * from its own memory and restored into it, with no copy through Lua
 * values (its dtype is the tensor's; the checkpoint holds its memory while
 * registered); the training loop's collectives and its checkpoints use the
 * same memory.  An array is registered with a C buffer of the tensor's
 * dtype that the checkpoint owns; save and save_async copy the array into
 * it first (each value converted to the dtype: floating types round to
 * nearest, integer types take integral values in range, else it raises),
 * and restore copies the buffer back into the array, element by element,
 * only once the restore succeeded: a failed restore leaves the arrays as
 * they were (a buffer is written by the restore itself).  Integer dtypes
 * come back as Lua integers (uint64 above math.maxinteger as negative
 * ones, as Lua does), floating ones as floats.  The array keeps its
 * length: #values must be the shard's element count at every save.
 *
 * comm is nil (a world of one process) or a herd.Comm: its ranks save and
 * restore together (herd.comm() is the job's).  The checkpoint keeps the
 * Comm object alive and leaves it open.  Every rank calls herd.checkpoint,
 * add, save, restore and close in the same order.
 *
 * Options: keep_last, keep_every (integers), staging_bytes, chunk_bytes
 * (integers or sizes such as "64M"), checksum ("xxh3" or "none"),
 * peer_copies (copies in other nodes' memory, with herd launch
 * --ckpt-peers; -1: none) and storage_every (integers).
 * ck:last_restore() says which tier the last restore read and why, and
 * ck:stats() what the saves cost, per tier.
 *
 * Misuse (a wrong type, an unknown option or dtype, an array whose length
 * or values do not fit, a closed checkpoint) raises; a failure of the
 * library (an unreadable directory, a dead peer, no step to restore)
 * returns nil, the message and the status name.  One close path, reached
 * from ck:close(), __close and __gc, waits for a save in flight and frees
 * the checkpoint; ck:close() also returns that save's outcome, which
 * __close and __gc say on stderr when it is a failure, and then the
 * program's exit status is 1 rather than 0 (lherd_ckpt_lost).  The
 * shell's os.exit closes the state (shell/main.c), so a save in flight at
 * os.exit is finished, or said, as at the end of a script.
 */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

#define LHERD_CHECKPOINT "herd.Checkpoint"

/* A registered tensor: the C buffer the library reads and fills. */
typedef struct ltensor {
	char *name;
	void *data;            /* owned, or a herd.Buffer's memory */
	size_t count;          /* elements of the shard */
	herd_dtype dtype;
	lherd_block *block;    /* the buffer's block, held; NULL for an array */
} ltensor;

typedef struct lckpt {
	herd_ckpt *ck;         /* NULL once closed */
	herd_comm *comm;       /* a herd.Comm's (user value 2); NULL for a world of one */
	ltensor *t;
	size_t n, cap;
} lckpt;

static const char *const ckpt_options[] = {
	"keep_last", "keep_every", "staging_bytes", "chunk_bytes", "checksum", "peer_copies",
	"storage_every", NULL
};

static const char *const add_options[] = { "dtype", "shape", "global", "offset", NULL };

/* ------------------------------------------------------------ options */

/* An integer option of 0 or more, or a size string ("64M") when sizes. */
static lua_Integer count_option(lua_State *L, int arg, const char *name, bool sizes)
{
	lua_Integer v = 0;
	int isint = 0;

	if (lua_getfield(L, arg, name) == LUA_TNIL) {
		lua_pop(L, 1);
		return 0;
	}
	if (sizes && lua_type(L, -1) == LUA_TSTRING) {
		uint64_t bytes;

		if (shell_parse_bytes(lua_tostring(L, -1), &bytes) != 0 ||
		    bytes > (uint64_t)LUA_MAXINTEGER)
			luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a size such "
							      "as \"64M\" or a number of bytes",
							      name));
		v = (lua_Integer)bytes;
	} else {
		v = lua_tointegerx(L, -1, &isint);
		if (!isint || v < 0)
			luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be an integer "
							      "of 0 or more", name));
	}
	lua_pop(L, 1);
	return v;
}

static void ckpt_opts(lua_State *L, int arg, herd_ckpt_opts *o)
{
	static const char *const sums[] = { "xxh3", "none", NULL };
	static const herd_ckpt_checksum sum_codes[] = { HERD_CKPT_CHECKSUM_XXH3,
							HERD_CKPT_CHECKSUM_NONE };
	lua_Integer v;

	lherd_check_keys(L, arg, ckpt_options);
	v = count_option(L, arg, "keep_last", false);
	o->keep_last = v > INT_MAX ? INT_MAX : (int)v;
	v = count_option(L, arg, "keep_every", false);
	o->keep_every = v > INT_MAX ? INT_MAX : (int)v;
	o->staging_bytes = (size_t)count_option(L, arg, "staging_bytes", true);
	o->chunk_bytes = (size_t)count_option(L, arg, "chunk_bytes", true);
	v = count_option(L, arg, "storage_every", false);
	o->storage_every = v > INT_MAX ? INT_MAX : (int)v;
	if (lua_getfield(L, arg, "peer_copies") != LUA_TNIL) {
		lua_Integer k;
		int isint;

		k = lua_tointegerx(L, -1, &isint);
		if (!isint || k < -1 || k > 64)
			luaL_argerror(L, arg, "option 'peer_copies' must be an integer from -1 to 64");
		o->peer_copies = (int)k;
	}
	lua_pop(L, 1);
	if (lua_getfield(L, arg, "checksum") != LUA_TNIL) {
		const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
		int i = 0;

		while (sums[i] != NULL && strcmp(sums[i], s) != 0)
			i++;
		if (sums[i] == NULL)
			luaL_argerror(L, arg, "option 'checksum' must be \"xxh3\" or \"none\"");
		o->checksum = sum_codes[i];
	}
	lua_pop(L, 1);
}

/* An array of 1..HERD_CKPT_MAX_DIMS sizes; returns its length. */
static int dims_option(lua_State *L, int arg, const char *name, uint64_t *out)
{
	lua_Integer n;

	if (lua_getfield(L, arg, name) != LUA_TTABLE)
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be an array of sizes",
						      name));
	n = luaL_len(L, -1);
	if (n < 1 || n > HERD_CKPT_MAX_DIMS)
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' has %d dimensions; 1..%d "
						      "are possible", name, (int)n,
						      HERD_CKPT_MAX_DIMS));
	for (lua_Integer d = 1; d <= n; d++) {
		int isint = 0;
		lua_Integer v;

		lua_geti(L, -1, d);
		v = lua_tointegerx(L, -1, &isint);
		if (!isint || v < 0)
			luaL_argerror(L, arg, lua_pushfstring(L, "option '%s'[%d] must be an "
							      "integer of 0 or more", name, (int)d));
		out[d - 1] = (uint64_t)v;
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	return (int)n;
}

/* ----------------------------------------------------------- the object */

static const lherd_type ckpt_type; /* defined with the methods, below */

static lckpt *check_open(lua_State *L, int arg)
{
	return (lckpt *)lherd_check(L, arg, &ckpt_type);
}

/*
 * The one close path; idempotent.  Returns the status of the save in
 * flight.  The communicator is the caller's herd.Comm, left as it is.
 */
static herd_status ckpt_release(lckpt *c)
{
	herd_status st = HERD_OK;

	if (c->ck != NULL) {
		st = herd_ckpt_wait(c->ck);
		herd_ckpt_free(c->ck);
	}
	c->ck = NULL;
	c->comm = NULL;
	for (size_t i = 0; i < c->n; i++) {
		free(c->t[i].name);
		if (c->t[i].block != NULL)
			lherd_block_unref(c->t[i].block);
		else
			free(c->t[i].data);
	}
	free(c->t);
	c->t = NULL;
	c->n = c->cap = 0;
	return st;
}

/* Whether a save in flight failed where no caller could be told (below). */
static bool lost_save;

bool lherd_ckpt_lost(void)
{
	return lost_save;
}

/*
 * __gc and __close: no barrier (the collector runs at no agreed point).
 * A save in flight is finished first (herd_ckpt_wait: bounded by the
 * writes and by the communicator's deadline); when it fails, nobody is
 * left to return its status to, so it is said on stderr and the program
 * exits non-zero (lherd_ckpt_lost).  Its temporary directory is removed
 * by the failed save itself.
 */
static void ckpt_drop(lua_State *L)
{
	lckpt *c = (lckpt *)lua_touserdata(L, 1);
	char msg[1200];

	if (ckpt_release(c) == HERD_OK)
		return;
	snprintf(msg, sizeof(msg), "a checkpoint save in flight when its checkpoint was "
		 "closed did not complete: %s", shell_last_error());
	shell_message(shell_progname, msg);
	lost_save = true;
}

/* ck:close() -> true, or nil, msg, status of the save that was in flight. */
static int ckpt_close(lua_State *L)
{
	herd_status st = ckpt_release(check_open(L, 1));

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, 1);
	return 1;
}

static void ckpt_describe(lua_State *L)
{
	lckpt *c = (lckpt *)lua_touserdata(L, 1);

	lua_pushfstring(L, "%s, %d tensors", herd_ckpt_dir(c->ck), (int)c->n);
}

/* ck:rank(), ck:size(): this process's place among the checkpoint's ranks. */
static int ckpt_rank(lua_State *L)
{
	lckpt *c = check_open(L, 1);

	lua_pushinteger(L, c->comm != NULL ? herd_comm_rank(c->comm) : 0);
	return 1;
}

static int ckpt_size(lua_State *L)
{
	lckpt *c = check_open(L, 1);

	lua_pushinteger(L, c->comm != NULL ? herd_comm_size(c->comm) : 1);
	return 1;
}

static int ckpt_dir(lua_State *L)
{
	lua_pushstring(L, herd_ckpt_dir(check_open(L, 1)->ck));
	return 1;
}

/*
 * ck:add(name, values, {dtype=, shape=, global=, offset=}) -> true, or
 * nil, msg, status.  dtype defaults to float64, shape to {#values}; global
 * and offset place the shard in the global tensor (both or neither).
 */
static int ckpt_add(lua_State *L)
{
	lckpt *c = check_open(L, 1);
	const char *name = luaL_checkstring(L, 2);
	uint64_t shape[HERD_CKPT_MAX_DIMS], global[HERD_CKPT_MAX_DIMS], offset[HERD_CKPT_MAX_DIMS];
	herd_dtype dtype = HERD_FLOAT64;
	int ndim = 1, gdim = 0, odim = 0;
	uint64_t count = 1;
	lherd_buffer *buf;
	lua_Integer values;
	ltensor *t;
	herd_status st;

	buf = lherd_test_buffer(L, 3);
	if (buf == NULL)
		luaL_checktype(L, 3, LUA_TTABLE);
	values = buf != NULL ? (lua_Integer)buf->count : luaL_len(L, 3);
	shape[0] = (uint64_t)values;
	if (buf != NULL)
		dtype = buf->dtype;
	if (!lua_isnoneornil(L, 4)) {
		luaL_checktype(L, 4, LUA_TTABLE);
		lherd_check_keys(L, 4, add_options);
		if (lua_getfield(L, 4, "dtype") != LUA_TNIL &&
		    (lua_type(L, -1) != LUA_TSTRING ||
		     herd_dtype_parse(lua_tostring(L, -1), &dtype) != HERD_OK))
			luaL_argerror(L, 4, lua_pushfstring(L, "option 'dtype': unknown type '%s'",
							    luaL_tolstring(L, -1, NULL)));
		lua_pop(L, 1);
		if (buf != NULL && dtype != buf->dtype)
			luaL_argerror(L, 4, lua_pushfstring(L, "option 'dtype': the buffer holds %s",
							    herd_dtype_name(buf->dtype)));
		if (lua_getfield(L, 4, "shape") != LUA_TNIL)
			ndim = dims_option(L, 4, "shape", shape);
		lua_pop(L, 1);
		if (lua_getfield(L, 4, "global") != LUA_TNIL)
			gdim = dims_option(L, 4, "global", global);
		lua_pop(L, 1);
		if (lua_getfield(L, 4, "offset") != LUA_TNIL)
			odim = dims_option(L, 4, "offset", offset);
		lua_pop(L, 1);
	}
	if ((gdim == 0) != (odim == 0) || (gdim != 0 && (gdim != ndim || odim != ndim)))
		luaL_argerror(L, 4, "options 'global' and 'offset' come together, with as many "
			      "dimensions as 'shape'");
	for (int d = 0; d < ndim; d++) {
		if (shape[d] != 0 && count > (uint64_t)LUA_MAXINTEGER / shape[d])
			luaL_argerror(L, 4, "the shard is too large");
		count *= shape[d];
	}
	if (count != (uint64_t)values)
		luaL_argerror(L, 3, lua_pushfstring(L, "tensor '%s': the %s has %d values; its "
						    "shape holds %d", name, buf ? "buffer" : "array",
						    (int)values, (int)count));
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 8;
		ltensor *p = realloc(c->t, ncap * sizeof(*p));

		if (p == NULL)
			return luaL_error(L, "not enough memory");
		c->t = p;
		c->cap = ncap;
	}
	t = &c->t[c->n];
	memset(t, 0, sizeof(*t));
	t->count = (size_t)count;
	t->dtype = dtype;
	t->name = strdup(name);
	/* a buffer is saved and restored in place; an array through a copy */
	t->data = buf != NULL ? buf->data : calloc(count > 0 ? (size_t)count : 1,
						   herd_dtype_size(dtype));
	if (t->name == NULL || t->data == NULL) {
		free(t->name);
		if (buf == NULL)
			free(t->data);
		return luaL_error(L, "not enough memory for tensor '%s'", name);
	}
	st = gdim ? herd_ckpt_add_tensor(c->ck, name, t->data, dtype, ndim, global, offset, shape)
		  : herd_ckpt_add_tensor(c->ck, name, t->data, dtype, ndim, shape, NULL, NULL);
	if (st != HERD_OK) {
		free(t->name);
		if (buf == NULL)
			free(t->data);
		return lherd_fail(L, st);
	}
	if (buf != NULL)
		t->block = lherd_block_ref(buf->block);
	c->n++;
	/* The array lives as long as the checkpoint: user value [i] = values. */
	lua_getiuservalue(L, 1, 1);
	lua_pushvalue(L, 3);
	lua_rawseti(L, -2, (lua_Integer)c->n);
	lua_pop(L, 1);
	lua_pushboolean(L, 1);
	return 1;
}

/* Copies every registered array into its buffer; raises on a misfit. */
static void copy_in(lua_State *L, lckpt *c)
{
	lua_getiuservalue(L, 1, 1);
	for (size_t i = 0; i < c->n; i++) {
		ltensor *t = &c->t[i];
		lua_Integer len;

		if (t->block != NULL)
			continue; /* a herd.Buffer: saved from its own memory */
		lua_rawgeti(L, -1, (lua_Integer)i + 1);
		len = luaL_len(L, -1);
		if (len != (lua_Integer)t->count)
			luaL_error(L, "tensor '%s': the array has %d values; its shape holds %d",
				   t->name, (int)len, (int)t->count);
		for (size_t j = 0; j < t->count; j++) {
			shell_elem e = { 0, 0, 0.0 };
			int isnum = 0;

			lua_geti(L, -1, (lua_Integer)j + 1);
			if (lua_isinteger(L, -1)) {
				e.is_int = 1;
				e.i = lua_tointeger(L, -1);
			} else {
				e.f = lua_tonumberx(L, -1, &isnum);
				if (!isnum || lua_type(L, -1) != LUA_TNUMBER)
					luaL_error(L, "tensor '%s'[%d]: a number expected, got %s",
						   t->name, (int)j + 1, luaL_typename(L, -1));
			}
			if (shell_elem_store(t->data, j, t->dtype, e) != 0)
				luaL_error(L, "tensor '%s'[%d]: %s does not fit %s", t->name,
					   (int)j + 1, luaL_tolstring(L, -1, NULL),
					   herd_dtype_name(t->dtype));
			lua_pop(L, 1);
		}
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

/* Copies every buffer back into its array. */
static void copy_out(lua_State *L, lckpt *c)
{
	lua_getiuservalue(L, 1, 1);
	for (size_t i = 0; i < c->n; i++) {
		ltensor *t = &c->t[i];

		if (t->block != NULL)
			continue; /* a herd.Buffer: restored into its own memory */
		lua_rawgeti(L, -1, (lua_Integer)i + 1);
		for (size_t j = 0; j < t->count; j++) {
			shell_elem e = shell_elem_load(t->data, j, t->dtype);

			if (e.is_int)
				lua_pushinteger(L, (lua_Integer)e.i);
			else
				lua_pushnumber(L, (lua_Number)e.f);
			lua_seti(L, -2, (lua_Integer)j + 1);
		}
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

static int64_t check_step(lua_State *L, int arg)
{
	lua_Integer step = luaL_checkinteger(L, arg);

	luaL_argcheck(L, step >= 0 && step <= HERD_CKPT_STEP_MAX, arg,
		      "a step is 0..999999999999");
	return (int64_t)step;
}

/* ck:save(step) -> true once committed on every rank, or nil, msg, status. */
static int ckpt_save(lua_State *L)
{
	lckpt *c = check_open(L, 1);
	int64_t step = check_step(L, 2);

	copy_in(L, c);
	return lherd_result(L, herd_ckpt_save(c->ck, step));
}

/* ck:save_async(step): returns once the values are staged; ck:wait() gives
 * the outcome. */
static int ckpt_save_async(lua_State *L)
{
	lckpt *c = check_open(L, 1);
	int64_t step = check_step(L, 2);

	copy_in(L, c);
	return lherd_result(L, herd_ckpt_save_async(c->ck, step));
}

static int ckpt_wait(lua_State *L)
{
	return lherd_result(L, herd_ckpt_wait(check_open(L, 1)->ck));
}

/* ck:restore([step]) -> the restored step, or nil, msg, status. */
static int ckpt_restore(lua_State *L)
{
	lckpt *c = check_open(L, 1);
	int64_t step = lua_isnoneornil(L, 2) ? HERD_CKPT_LATEST : check_step(L, 2);
	int64_t got = -1;
	herd_status st = herd_ckpt_restore(c->ck, step, &got);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	copy_out(L, c);
	lua_pushinteger(L, (lua_Integer)got);
	return 1;
}

/*
 * ck:last_restore() -> {tier = "storage" | "peers' memory" | "none", step,
 * seconds, bytes, storage_step, peers_step, why, from}: the last restore
 * on this rank.
 */
static int ckpt_last_restore(lua_State *L)
{
	herd_ckpt_restore_info ri;

	(void)herd_ckpt_last_restore(check_open(L, 1)->ck, &ri);
	lua_createtable(L, 0, 8);
	lua_pushstring(L, herd_ckpt_tier_name(ri.tier));
	lua_setfield(L, -2, "tier");
	lua_pushinteger(L, (lua_Integer)ri.step);
	lua_setfield(L, -2, "step");
	lua_pushnumber(L, ri.seconds);
	lua_setfield(L, -2, "seconds");
	lua_pushinteger(L, (lua_Integer)ri.bytes);
	lua_setfield(L, -2, "bytes");
	lua_pushinteger(L, (lua_Integer)ri.storage_step);
	lua_setfield(L, -2, "storage_step");
	lua_pushinteger(L, (lua_Integer)ri.peers_step);
	lua_setfield(L, -2, "peers_step");
	lua_pushstring(L, ri.why);
	lua_setfield(L, -2, "why");
	lua_pushstring(L, ri.from);
	lua_setfield(L, -2, "from");
	return 1;
}

static void push_tier_stats(lua_State *L, const herd_ckpt_tier_stats *t, const char *name)
{
	lua_createtable(L, 0, 4);
	lua_pushinteger(L, (lua_Integer)t->saves);
	lua_setfield(L, -2, "saves");
	lua_pushnumber(L, t->stall_s);
	lua_setfield(L, -2, "stall");
	lua_pushnumber(L, t->stall_max_s);
	lua_setfield(L, -2, "stall_max");
	lua_pushnumber(L, t->busy_s);
	lua_setfield(L, -2, "busy");
	lua_setfield(L, -2, name);
}

/* ck:stats() -> {peers = {saves, stall, stall_max, busy}, storage = {...}} (seconds). */
static int ckpt_stats(lua_State *L)
{
	herd_ckpt_stats st;

	(void)herd_ckpt_get_stats(check_open(L, 1)->ck, &st);
	lua_createtable(L, 0, 2);
	push_tier_stats(L, &st.peers, "peers");
	push_tier_stats(L, &st.storage, "storage");
	return 1;
}

/* herd.checkpoint(dir [, comm [, opts]]) -> a herd.Checkpoint, or nil, msg, status. */
static int lherd_checkpoint(lua_State *L)
{
	const char *dir = luaL_checkstring(L, 1);
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	herd_comm *comm = lua_isnoneornil(L, 2) ? NULL : lherd_check_comm(L, 2);
	herd_status st;
	lckpt *c;

	if (!lua_isnoneornil(L, 3)) {
		luaL_checktype(L, 3, LUA_TTABLE);
		ckpt_opts(L, 3, &o);
	}
	/* Safe state before the resources: an object that holds nothing.
	 * User values: 1 the registered arrays and buffers, 2 the herd.Comm. */
	c = (lckpt *)lherd_new(L, &ckpt_type, sizeof(*c), 2);
	lua_newtable(L);
	lua_setiuservalue(L, -2, 1);
	lua_pushvalue(L, 2);
	lua_setiuservalue(L, -2, 2);
	c->comm = comm;
	st = herd_ckpt_open(&c->ck, dir, c->comm, &o);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

static const luaL_Reg ckpt_methods[] = {
	{ "add", ckpt_add },
	{ "save", ckpt_save },
	{ "save_async", ckpt_save_async },
	{ "wait", ckpt_wait },
	{ "restore", ckpt_restore },
	{ "close", ckpt_close },
	{ "rank", ckpt_rank },
	{ "size", ckpt_size },
	{ "dir", ckpt_dir },
	{ "last_restore", ckpt_last_restore },
	{ "stats", ckpt_stats },
	{ NULL, NULL }
};

static const lherd_type ckpt_type = {
	.name = LHERD_CHECKPOINT,
	.methods = ckpt_methods,
	.release = ckpt_drop,
	.describe = ckpt_describe,
};

void lherd_open_ckpt(lua_State *L)
{
	lherd_register(L, &ckpt_type);
	/* The herd table is on top of the stack. */
	lua_pushcfunction(L, lherd_checkpoint);
	lua_setfield(L, -2, "checkpoint");
}
