/*
 * shell/lua_msgpack.c - Lua values to msgpack and back: what the store
 * keeps for a value that is not a string, what herd.emit hands to the
 * launching script, and what c:allgather(v) and c:broadcast(v) move.
 *
 * nil, booleans, integers, floats and strings map to their msgpack kinds;
 * a table whose keys are exactly 1..n is an array, any other table a map
 * (keys and values encoded the same way).  Functions, userdata, threads,
 * tables nested deeper than LHERD_MSGPACK_DEPTH (a cycle among them) and
 * NaN keys raise.  herd.msgpack.pack and herd.msgpack.unpack expose both
 * directions.
 */
#include <lauxlib.h>
#include <lua.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"

#define LHERD_MSGPACK_DEPTH 64

static void pack(lua_State *L, int idx, msgpack_packer *pk, int depth)
{
	idx = lua_absindex(L, idx);
	switch (lua_type(L, idx)) {
	case LUA_TNIL:
		msgpack_pack_nil(pk);
		break;
	case LUA_TBOOLEAN:
		if (lua_toboolean(L, idx))
			msgpack_pack_true(pk);
		else
			msgpack_pack_false(pk);
		break;
	case LUA_TNUMBER:
		if (lua_isinteger(L, idx))
			msgpack_pack_int64(pk, (int64_t)lua_tointeger(L, idx));
		else
			msgpack_pack_double(pk, (double)lua_tonumber(L, idx));
		break;
	case LUA_TSTRING: {
		size_t len;
		const char *s = lua_tolstring(L, idx, &len);

		msgpack_pack_str(pk, len);
		msgpack_pack_str_body(pk, s, len);
		break;
	}
	case LUA_TTABLE: {
		lua_Integer n;

		if (depth >= LHERD_MSGPACK_DEPTH)
			luaL_error(L, "msgpack: tables nested more than %d deep (a cycle?)",
				   LHERD_MSGPACK_DEPTH);
		luaL_checkstack(L, 4, "msgpack");
		if (lherd_is_array(L, idx, &n)) {
			msgpack_pack_array(pk, (size_t)n);
			for (lua_Integer i = 1; i <= n; i++) {
				lua_rawgeti(L, idx, i);
				pack(L, -1, pk, depth + 1);
				lua_pop(L, 1);
			}
			break;
		}
		n = 0;
		lua_pushnil(L);
		while (lua_next(L, idx)) {
			lua_pop(L, 1);
			n++;
		}
		msgpack_pack_map(pk, (size_t)n);
		lua_pushnil(L);
		while (lua_next(L, idx)) {
			pack(L, -2, pk, depth + 1);
			pack(L, -1, pk, depth + 1);
			lua_pop(L, 1);
		}
		break;
	}
	default:
		luaL_error(L, "msgpack: a %s value cannot be encoded", luaL_typename(L, idx));
	}
}

/* The encoding of the value at idx, pushed as a string. */
void lherd_msgpack_push(lua_State *L, int idx)
{
	msgpack_sbuffer *sb;
	msgpack_packer pk;
	void **held;

	idx = lua_absindex(L, idx);
	/* held: the buffer is freed even when pack raises */
	held = lherd_hold(L, (void (*)(void *))msgpack_sbuffer_free);
	sb = msgpack_sbuffer_new();
	if (sb == NULL)
		luaL_error(L, "not enough memory");
	*held = sb;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	pack(L, idx, &pk, 0);
	lua_pushlstring(L, sb->data, sb->size);
	lherd_drop(L, -2);
	lua_remove(L, -2);
}

static void unpack(lua_State *L, const msgpack_object *o, int depth)
{
	if (depth >= LHERD_MSGPACK_DEPTH)
		luaL_error(L, "msgpack: more than %d levels of nesting", LHERD_MSGPACK_DEPTH);
	luaL_checkstack(L, 3, "msgpack");
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		lua_pushnil(L);
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		lua_pushboolean(L, o->via.boolean);
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		lua_pushinteger(L, (lua_Integer)o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		lua_pushinteger(L, (lua_Integer)o->via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		lua_pushnumber(L, (lua_Number)o->via.f64);
		break;
	case MSGPACK_OBJECT_STR:
		lua_pushlstring(L, o->via.str.ptr, o->via.str.size);
		break;
	case MSGPACK_OBJECT_BIN:
		lua_pushlstring(L, o->via.bin.ptr, o->via.bin.size);
		break;
	case MSGPACK_OBJECT_ARRAY:
		lua_createtable(L, o->via.array.size < 1u << 20 ? (int)o->via.array.size : 0, 0);
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			unpack(L, &o->via.array.ptr[i], depth + 1);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
		break;
	case MSGPACK_OBJECT_MAP:
		lua_createtable(L, 0, o->via.map.size < 1u << 20 ? (int)o->via.map.size : 0);
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			unpack(L, &o->via.map.ptr[i].key, depth + 1);
			if (lua_isnil(L, -1))
				luaL_error(L, "msgpack: a map key is nil");
			unpack(L, &o->via.map.ptr[i].val, depth + 1);
			lua_rawset(L, -3);
		}
		break;
	default:
		luaL_error(L, "msgpack: an extension value cannot be decoded");
	}
}

static void unpacked_free(void *p)
{
	msgpack_unpacked_destroy((msgpack_unpacked *)p);
	free(p);
}

int lherd_msgpack_decode(lua_State *L, const char *data, size_t len)
{
	msgpack_unpacked *u;
	void **held = lherd_hold(L, unpacked_free);
	size_t off = 0;
	msgpack_unpack_return r;

	u = (msgpack_unpacked *)malloc(sizeof(*u));
	if (u == NULL)
		return luaL_error(L, "not enough memory");
	msgpack_unpacked_init(u);
	*held = u;
	r = msgpack_unpack_next(u, data, len, &off);
	if (r != MSGPACK_UNPACK_SUCCESS || off != len) {
		lherd_drop(L, -1);
		lua_pop(L, 1);
		return 0;
	}
	unpack(L, &u->data, 0);
	lherd_drop(L, -2);
	lua_remove(L, -2);
	return 1;
}

/* herd.msgpack.pack(v) -> bytes */
static int l_pack(lua_State *L)
{
	luaL_checkany(L, 1);
	lherd_msgpack_push(L, 1);
	return 1;
}

/* herd.msgpack.unpack(bytes) -> v; raises on bytes that are not exactly one value. */
static int l_unpack(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);

	if (!lherd_msgpack_decode(L, s, len))
		return luaL_argerror(L, 1, "not one msgpack value");
	return 1;
}

void lherd_open_msgpack(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "pack", l_pack },
		{ "unpack", l_unpack },
		{ NULL, NULL }
	};

	luaL_newlib(L, funcs);
	lua_setfield(L, -2, "msgpack");
}
