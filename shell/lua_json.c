/*
 * shell/lua_json.c - JSON for Lua through jansson: herd.json.encode(v
 * [, {indent =}]) and herd.json.decode(text), and the C side that
 * herd.bench reads its records with.
 *
 * A table whose keys are exactly 1..n is an array (an empty table is an
 * empty array), any other table an object with string keys (a number key
 * is written as its text); integers stay integers; NaN and infinities,
 * functions, userdata and tables nested deeper than 64 raise.  Decoding
 * gives tables for objects and arrays; a field that is null is absent, and
 * a null element of an array is herd.json.null (so the array keeps its
 * length), which encode writes as null too.
 */
#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"

#define JSON_DEPTH 64

/* The sentinel that stands for null inside arrays. */
static const char null_key = 'n';

void lherd_json_release(void *p)
{
	json_decref((json_t *)p);
}

static void push_value(lua_State *L, const json_t *v, int depth)
{
	luaL_checkstack(L, 4, "json");
	if (depth > JSON_DEPTH)
		luaL_error(L, "json: nested more than %d deep", JSON_DEPTH);
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *x;

		lua_createtable(L, 0, (int)json_object_size(v));
		json_object_foreach((json_t *)v, k, x) {
			if (json_is_null(x))
				continue;
			push_value(L, x, depth + 1);
			lua_setfield(L, -2, k);
		}
		break;
	}
	case JSON_ARRAY:
		lua_createtable(L, (int)json_array_size(v), 0);
		for (size_t i = 0; i < json_array_size(v); i++) {
			push_value(L, json_array_get(v, i), depth + 1);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
		break;
	case JSON_STRING:
		lua_pushlstring(L, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		lua_pushinteger(L, (lua_Integer)json_integer_value(v));
		break;
	case JSON_REAL:
		lua_pushnumber(L, json_real_value(v));
		break;
	case JSON_TRUE:
		lua_pushboolean(L, 1);
		break;
	case JSON_FALSE:
		lua_pushboolean(L, 0);
		break;
	default:
		lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key);
	}
}

void *lherd_json_parse(const char *text, size_t len)
{
	return json_loadb(text, len, JSON_DECODE_ANY, NULL);
}

void lherd_push_json(lua_State *L, const void *value)
{
	push_value(L, (const json_t *)value, 0);
}

/* The JSON of the value at idx, new (NULL only when out of memory). */
static json_t *to_json(lua_State *L, int idx, int depth)
{
	idx = lua_absindex(L, idx);
	switch (lua_type(L, idx)) {
	case LUA_TNIL:
		return json_null();
	case LUA_TBOOLEAN:
		return json_boolean(lua_toboolean(L, idx));
	case LUA_TNUMBER:
		if (lua_isinteger(L, idx))
			return json_integer((json_int_t)lua_tointeger(L, idx));
		if (!isfinite(lua_tonumber(L, idx)))
			luaL_error(L, "json: %s cannot be encoded", lua_tostring(L, idx));
		return json_real(lua_tonumber(L, idx));
	case LUA_TSTRING: {
		size_t len;
		const char *s = lua_tolstring(L, idx, &len);

		return json_stringn_nocheck(s, len);
	}
	case LUA_TLIGHTUSERDATA:
		lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key);
		if (lua_rawequal(L, -1, idx)) {
			lua_pop(L, 1);
			return json_null();
		}
		lua_pop(L, 1);
		break;
	case LUA_TTABLE: {
		lua_Integer n;
		void **held;
		json_t *out;

		if (depth >= JSON_DEPTH)
			luaL_error(L, "json: tables nested more than %d deep (a cycle?)", JSON_DEPTH);
		luaL_checkstack(L, 6, "json");
		held = lherd_hold(L, lherd_json_release);
		if (lherd_is_array(L, idx, &n)) {
			*held = out = json_array();
			for (lua_Integer i = 1; out != NULL && i <= n; i++) {
				lua_rawgeti(L, idx, i);
				json_array_append_new(out, to_json(L, -1, depth + 1));
				lua_pop(L, 1);
			}
		} else {
			*held = out = json_object();
			lua_pushnil(L);
			while (out != NULL && lua_next(L, idx)) {
				int kt = lua_type(L, -2);

				if (kt != LUA_TSTRING && kt != LUA_TNUMBER)
					luaL_error(L, "json: a %s key cannot be encoded",
						   luaL_typename(L, -2));
				lua_pushvalue(L, -2);
				json_object_set_new(out, lua_tostring(L, -1), to_json(L, -2, depth + 1));
				lua_pop(L, 2);
			}
		}
		*held = NULL; /* the caller owns it now */
		lua_pop(L, 1);
		return out;
	}
	default:
		break;
	}
	luaL_error(L, "json: a %s value cannot be encoded", luaL_typename(L, idx));
	return NULL;
}

/* herd.json.encode(v[, {indent = n, sort = true}]) -> text */
static int l_encode(lua_State *L)
{
	size_t flags = JSON_ENCODE_ANY | JSON_COMPACT;
	void **held;
	char *text;

	luaL_checkany(L, 1);
	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		if (lua_getfield(L, 2, "indent") != LUA_TNIL) {
			lua_Integer i = luaL_checkinteger(L, -1);

			luaL_argcheck(L, i >= 0 && i <= 31, 2, "option 'indent' is 0..31");
			flags = JSON_ENCODE_ANY | JSON_INDENT(i);
		}
		lua_pop(L, 1);
		if (lua_getfield(L, 2, "sort") != LUA_TNIL && lua_toboolean(L, -1))
			flags |= JSON_SORT_KEYS;
		lua_pop(L, 1);
	}
	held = lherd_hold(L, lherd_json_release);
	*held = to_json(L, 1, 0);
	text = *held != NULL ? json_dumps((json_t *)*held, flags) : NULL;
	if (text == NULL)
		return luaL_error(L, "json: not enough memory");
	lua_pushstring(L, text);
	free(text);
	return 1;
}

/* herd.json.decode(text) -> value, or nil, "line L column C: why", "HERD_EFORMAT" */
static int l_decode(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	void **held = lherd_hold(L, lherd_json_release);
	json_error_t err;

	*held = json_loadb(s, len, JSON_DECODE_ANY, &err);
	if (*held == NULL) {
		lua_pushnil(L);
		lua_pushfstring(L, "line %d column %d: %s", err.line, err.column, err.text);
		lua_pushstring(L, herd_status_name(HERD_EFORMAT));
		return 3;
	}
	lherd_push_json(L, *held);
	return 1;
}

void lherd_open_json(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "encode", l_encode },
		{ "decode", l_decode },
		{ NULL, NULL }
	};

	luaL_newlib(L, funcs);
	lua_pushlightuserdata(L, (void *)&null_key);
	lua_pushvalue(L, -1);
	lua_rawsetp(L, LUA_REGISTRYINDEX, &null_key);
	lua_setfield(L, -2, "null");
	lua_setfield(L, -2, "json");
}
