/*
 * shell/lua_buffer.c - herd.Buffer, typed host memory for Lua: what
 * collectives and checkpoints work on in place, with no copy through Lua
 * values.
 *
 *   local b = herd.buffer("float32", 1024)     -- zeroed
 *   b:iota(1)                                  -- 1, 2, ..., 1024
 *   b[1], #b, b.dtype, b.bytes
 *   local v = b:view(513, 512)                 -- elements 513..1024, shared
 *   herd.buffer.from("int64", {1, 2, 3}):sum() -- 6
 *
 * Elements are indexed from 1, as Lua arrays are.  A buffer's memory is a
 * block that views share: it is freed when the last buffer or view on it
 * is closed or collected (and a nonblocking collective holds it as well
 * until it completes), so no view can outlive its memory.  Integer dtypes
 * read back as Lua integers (uint64 above math.maxinteger as negative
 * ones, as Lua carries them), floating ones as floats.  A value that does
 * not fit the dtype (a fraction or an out-of-range number for an integer
 * type) raises.
 */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

struct lherd_block {
	size_t refs;
	void *data;
};

static const lherd_type buffer_type;

/* ----------------------------------------------------------- the block */

lherd_block *lherd_block_ref(lherd_block *b)
{
	b->refs++;
	return b;
}

void lherd_block_unref(lherd_block *b)
{
	if (b != NULL && --b->refs == 0) {
		free(b->data);
		free(b);
	}
}

/* The buffer's own release (close, __close, __gc): drops its block. */
static void buffer_release(lua_State *L)
{
	lherd_buffer *b = (lherd_buffer *)lua_touserdata(L, 1);

	lherd_block_unref(b->block);
	b->block = NULL;
	b->data = NULL;
}

lherd_buffer *lherd_new_buffer(lua_State *L, herd_dtype dtype, size_t count)
{
	lherd_buffer *b = (lherd_buffer *)lherd_new(L, &buffer_type, sizeof(*b), 0);
	size_t esize = herd_dtype_size(dtype);
	lherd_block *blk;

	if (count > SIZE_MAX / esize / 2)
		luaL_error(L, "a buffer of %I %s elements is too large", (lua_Integer)count,
			   herd_dtype_name(dtype));
	blk = (lherd_block *)malloc(sizeof(*blk));
	if (blk == NULL)
		luaL_error(L, "not enough memory");
	blk->refs = 1;
	/* page-aligned from a page up (as herd bench's buffers), else 64-byte;
	 * at least one element, zeroed */
	blk->data = NULL;
	if (posix_memalign(&blk->data, count * esize >= 4096 ? 4096 : 64,
			   count > 0 ? count * esize : esize) != 0) {
		free(blk);
		luaL_error(L, "not enough memory for a buffer of %I %s elements",
			   (lua_Integer)count, herd_dtype_name(dtype));
	}
	memset(blk->data, 0, count > 0 ? count * esize : esize);
	b->data = blk->data;
	b->block = blk;
	b->count = count;
	b->dtype = dtype;
	return b;
}

lherd_buffer *lherd_check_buffer(lua_State *L, int arg)
{
	return (lherd_buffer *)lherd_check(L, arg, &buffer_type);
}

lherd_buffer *lherd_test_buffer(lua_State *L, int arg)
{
	lherd_buffer *b = (lherd_buffer *)lherd_test(L, arg, &buffer_type);

	if (b != NULL && b->data == NULL)
		luaL_error(L, "attempt to use a closed %s", buffer_type.name);
	return b;
}

herd_dtype lherd_check_dtype(lua_State *L, int arg)
{
	herd_dtype dt;

	if (herd_dtype_parse(luaL_checkstring(L, arg), &dt) != HERD_OK)
		luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s'",
						      lua_tostring(L, arg)));
	return dt;
}

/* ------------------------------------------------------------ elements */

void lherd_push_elem(lua_State *L, const lherd_buffer *b, size_t i)
{
	shell_elem e = shell_elem_load(b->data, i, b->dtype);

	if (e.is_int)
		lua_pushinteger(L, (lua_Integer)e.i);
	else
		lua_pushnumber(L, (lua_Number)e.f);
}

void lherd_store_elem(lua_State *L, lherd_buffer *b, size_t i, int idx)
{
	shell_elem e = { 0, 0, 0.0 };

	if (lua_type(L, idx) != LUA_TNUMBER)
		luaL_error(L, "element %I of a %s buffer: a number expected, got %s",
			   (lua_Integer)i + 1, herd_dtype_name(b->dtype), luaL_typename(L, idx));
	if (lua_isinteger(L, idx)) {
		e.is_int = 1;
		e.i = lua_tointeger(L, idx);
	} else {
		e.f = lua_tonumber(L, idx);
	}
	if (shell_elem_store(b->data, i, b->dtype, e) != 0)
		luaL_error(L, "element %I: %s does not fit %s", (lua_Integer)i + 1,
			   luaL_tolstring(L, idx, NULL), herd_dtype_name(b->dtype));
}

/* The 0-based element of a 1-based index argument, raising when out of range. */
static size_t check_elem(lua_State *L, const lherd_buffer *b, int arg)
{
	lua_Integer i = luaL_checkinteger(L, arg);

	if (i < 1 || (lua_Unsigned)i > b->count)
		luaL_argerror(L, arg, lua_pushfstring(L, "index %I out of range (buffer has %I)",
						      i, (lua_Integer)b->count));
	return (size_t)(i - 1);
}

/* b[i] for an integer key; methods and fields otherwise (lua_object.c). */
static int buffer_item(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);

	lherd_push_elem(L, b, check_elem(L, b, 2));
	return 1;
}

static int buffer_newindex(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);

	if (!lua_isinteger(L, 2))
		return luaL_error(L, "a %s has no field '%s' to set", buffer_type.name,
				  luaL_tolstring(L, 2, NULL));
	lherd_store_elem(L, b, check_elem(L, b, 2), 3);
	return 0;
}

static int buffer_len(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lherd_check_buffer(L, 1)->count);
	return 1;
}

/* ------------------------------------------------------------- methods */

/* b:fill(v) -> b: every element v. */
static int buffer_fill(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);
	size_t esize = herd_dtype_size(b->dtype);

	luaL_checknumber(L, 2);
	if (b->count == 0)
		return lua_settop(L, 1), 1;
	lherd_store_elem(L, b, 0, 2);
	for (size_t i = 1; i < b->count; i++)
		memcpy((char *)b->data + i * esize, b->data, esize);
	lua_settop(L, 1);
	return 1;
}

/* b:iota([start = 0[, step = 1]]) -> b: element i is start + (i - 1) * step. */
static int buffer_iota(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);
	bool ints = lua_isnoneornil(L, 2) || lua_isinteger(L, 2);

	ints = ints && (lua_isnoneornil(L, 3) || lua_isinteger(L, 3));
	if (ints) {
		lua_Integer start = luaL_optinteger(L, 2, 0), step = luaL_optinteger(L, 3, 1);

		for (size_t i = 0; i < b->count; i++) {
			lua_pushinteger(L, (lua_Integer)((lua_Unsigned)start +
							 (lua_Unsigned)i * (lua_Unsigned)step));
			lherd_store_elem(L, b, i, -1);
			lua_pop(L, 1);
		}
	} else {
		lua_Number start = luaL_optnumber(L, 2, 0), step = luaL_optnumber(L, 3, 1);

		for (size_t i = 0; i < b->count; i++) {
			lua_pushnumber(L, start + (lua_Number)i * step);
			lherd_store_elem(L, b, i, -1);
			lua_pop(L, 1);
		}
	}
	lua_settop(L, 1);
	return 1;
}

enum fold { FOLD_SUM, FOLD_MIN, FOLD_MAX };

/* sum, min, max: integers (wrapping as Lua's do) for integer dtypes,
 * floats for floating ones; min and max of an empty buffer are nil. */
static int fold(lua_State *L, enum fold how)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);
	lua_Integer iacc = 0;
	double facc = 0.0;
	bool is_int = shell_dtype_is_int(b->dtype);

	if (b->count == 0 && how != FOLD_SUM) {
		lua_pushnil(L);
		return 1;
	}
	for (size_t i = 0; i < b->count; i++) {
		shell_elem e = shell_elem_load(b->data, i, b->dtype);

		if (is_int) {
			lua_Integer v = (lua_Integer)e.i;

			if (how == FOLD_SUM)
				iacc = (lua_Integer)((lua_Unsigned)iacc + (lua_Unsigned)v);
			else if (i == 0 || (how == FOLD_MIN ? v < iacc : v > iacc))
				iacc = v;
		} else if (how == FOLD_SUM) {
			facc += e.f;
		} else if (i == 0 || isnan(e.f) || (how == FOLD_MIN ? e.f < facc : e.f > facc)) {
			facc = e.f;
			if (isnan(facc))
				break;
		}
	}
	if (is_int)
		lua_pushinteger(L, iacc);
	else
		lua_pushnumber(L, facc);
	return 1;
}

static int buffer_sum(lua_State *L) { return fold(L, FOLD_SUM); }
static int buffer_min(lua_State *L) { return fold(L, FOLD_MIN); }
static int buffer_max(lua_State *L) { return fold(L, FOLD_MAX); }

/* b:copy() -> a new buffer of the same dtype and contents. */
static int buffer_copy(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);
	lherd_buffer *c = lherd_new_buffer(L, b->dtype, b->count);

	memcpy(c->data, b->data, b->count * herd_dtype_size(b->dtype));
	return 1;
}

/* b:view(first, n) -> the n elements from first (1-based), sharing b's memory. */
static int buffer_view(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);
	lua_Integer first = luaL_checkinteger(L, 2);
	lua_Integer n = luaL_optinteger(L, 3, (lua_Integer)b->count - first + 1);
	lherd_buffer *v;

	luaL_argcheck(L, first >= 1 && (lua_Unsigned)first <= b->count + 1, 2,
		      "first element out of range");
	luaL_argcheck(L, n >= 0 && (lua_Unsigned)n <= b->count - (size_t)(first - 1), 3,
		      "the view goes past the end of the buffer");
	v = (lherd_buffer *)lherd_new(L, &buffer_type, sizeof(*v), 0);
	v->block = lherd_block_ref(b->block);
	v->data = (char *)b->data + (size_t)(first - 1) * herd_dtype_size(b->dtype);
	v->count = (size_t)n;
	v->dtype = b->dtype;
	return 1;
}

/* b:totable() -> a Lua array of the values. */
static int buffer_totable(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);

	luaL_argcheck(L, b->count < INT32_MAX, 1, "too many elements for a table");
	lua_createtable(L, (int)b->count, 0);
	for (size_t i = 0; i < b->count; i++) {
		lherd_push_elem(L, b, i);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

/* b:cast(dtype) -> a new buffer of dtype; floats become integers by
 * truncation toward zero (as numpy's astype), and a value that does not
 * fit raises. */
static int buffer_cast(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);
	herd_dtype dt = lherd_check_dtype(L, 2);
	lherd_buffer *c = lherd_new_buffer(L, dt, b->count);
	bool to_int = shell_dtype_is_int(dt);

	for (size_t i = 0; i < b->count; i++) {
		shell_elem e = shell_elem_load(b->data, i, b->dtype);

		if (to_int && !e.is_int) {
			double t = trunc(e.f);

			if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0))
				return luaL_error(L, "element %I: %f does not fit %s",
						  (lua_Integer)i + 1, e.f, herd_dtype_name(dt));
			e.is_int = 1;
			e.i = (int64_t)t;
		}
		if (shell_elem_store(c->data, i, dt, e) != 0) {
			lherd_push_elem(L, b, i);
			return luaL_error(L, "element %I: %s does not fit %s", (lua_Integer)i + 1,
					  luaL_tolstring(L, -1, NULL), herd_dtype_name(dt));
		}
	}
	return 1;
}

/* ---------------------------------------------------- fields and herd.* */

static int get_dtype(lua_State *L)
{
	lua_pushstring(L, herd_dtype_name(lherd_check_buffer(L, 1)->dtype));
	return 1;
}

static int get_bytes(lua_State *L)
{
	lherd_buffer *b = lherd_check_buffer(L, 1);

	lua_pushinteger(L, (lua_Integer)(b->count * herd_dtype_size(b->dtype)));
	return 1;
}

static void buffer_fields(lua_State *L)
{
	static const luaL_Reg fields[] = {
		{ "dtype", get_dtype },
		{ "bytes", get_bytes },
		{ NULL, NULL }
	};

	luaL_newlib(L, fields);
}

static const luaL_Reg buffer_methods[] = {
	{ "fill", buffer_fill },
	{ "iota", buffer_iota },
	{ "sum", buffer_sum },
	{ "min", buffer_min },
	{ "max", buffer_max },
	{ "copy", buffer_copy },
	{ "view", buffer_view },
	{ "totable", buffer_totable },
	{ "cast", buffer_cast },
	{ NULL, NULL }
};

/* Elements __tostring shows before "...". */
#define SHOWN 8

/*
 * __tostring: "herd.Buffer(float32, 1048576) {1, 2, 3, 4, 5, 6, 7, 8, ...}",
 * as a tensor's repr: the dtype, the length and the first SHOWN values
 * (shell_elem_format's shortest text); "herd.Buffer (closed)" once closed,
 * as every herd object.
 */
static int buffer_tostring(lua_State *L)
{
	lherd_buffer *b = (lherd_buffer *)lherd_to(L, 1, &buffer_type);
	luaL_Buffer out;
	char text[48];

	if (b->data == NULL) {
		lua_pushfstring(L, "%s (closed)", buffer_type.name);
		return 1;
	}
	luaL_buffinit(L, &out);
	lua_pushfstring(L, "%s(%s, %I) {", buffer_type.name, herd_dtype_name(b->dtype),
			(lua_Integer)b->count);
	luaL_addvalue(&out);
	for (size_t i = 0; i < b->count && i < SHOWN; i++) {
		shell_elem_format(text, sizeof(text), b->dtype,
				  shell_elem_load(b->data, i, b->dtype));
		luaL_addstring(&out, i > 0 ? ", " : "");
		luaL_addstring(&out, text);
	}
	luaL_addstring(&out, b->count > SHOWN ? ", ...}" : "}");
	luaL_pushresult(&out);
	return 1;
}

static const luaL_Reg buffer_meta[] = {
	{ "__tostring", buffer_tostring },
	{ "__len", buffer_len },
	{ "__newindex", buffer_newindex },
	{ NULL, NULL }
};

static const lherd_type buffer_type = {
	.name = LHERD_BUFFER,
	.methods = buffer_methods,
	.fields = buffer_fields,
	.release = buffer_release,
	.item = buffer_item,
	.meta = buffer_meta,
};

/* herd.buffer(dtype, n) -> a zeroed buffer of n elements. */
static int lherd_buffer_call(lua_State *L)
{
	herd_dtype dt = lherd_check_dtype(L, 2);
	lua_Integer n = luaL_checkinteger(L, 3);

	luaL_argcheck(L, n >= 0, 3, "a count of 0 or more expected");
	lherd_new_buffer(L, dt, (size_t)n);
	return 1;
}

/* herd.buffer.from(dtype, values) -> a buffer holding the array's values. */
static int lherd_buffer_from(lua_State *L)
{
	herd_dtype dt = lherd_check_dtype(L, 1);
	lua_Integer n;
	lherd_buffer *b;

	luaL_checktype(L, 2, LUA_TTABLE);
	n = luaL_len(L, 2);
	b = lherd_new_buffer(L, dt, (size_t)n);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_geti(L, 2, i);
		lherd_store_elem(L, b, (size_t)i - 1, -1);
		lua_pop(L, 1);
	}
	return 1;
}

void lherd_open_buffer(lua_State *L)
{
	static const luaL_Reg funcs[] = { { "from", lherd_buffer_from }, { NULL, NULL } };

	lherd_register(L, &buffer_type);
	luaL_newlib(L, funcs);
	lua_newtable(L);
	lua_pushcfunction(L, lherd_buffer_call);
	lua_setfield(L, -2, "__call");
	lua_setmetatable(L, -2);
	lua_setfield(L, -2, "buffer");
}
