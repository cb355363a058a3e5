/*
 * shell/lua_store.c - herd.store, the Lua face of the rendezvous store: a
 * herd.StoreServer (herd_store_server) and a herd.Store (herd_store).
 *
 *   local srv <close> = herd.store.serve{secret = "s3cret"}   -- 127.0.0.1, a free port
 *   local s = assert(herd.store.connect(srv:address(), "s3cret"))
 *   s:set("cfg", {lr = 0.1, layers = {4, 8}})   -- a table: msgpack
 *   s:get_value("cfg").lr                        -- 0.1
 *   s:set("name", "run7"); s:get("name")         -- bytes as they are
 *   s:add("arrived", 1)                          -- 1, 2, ... (decimal text)
 *   s:wait({"a", "b"}, 10)
 *   s:keys("rank/")                              -- {"rank/0", "rank/1"}: byte order
 *   local js = herd.store.env()                  -- the job's own store
 *
 * A value is bytes, so that C programs and other tools read what a script
 * writes: set stores a string as it is and any other value (a number, a
 * boolean, a table) as its msgpack encoding; get returns the bytes as a
 * string, and get_value decodes msgpack back into the Lua value.  Counters
 * (add) are decimal text, which get returns and tonumber reads.
 *
 * Timeouts are seconds (a number; nil: the handle's own deadline, five
 * minutes unless connect's timeout option says otherwise).  A key still
 * missing at its deadline, a server that went away or refused the secret
 * return nil, herd's message and the status name; a wrong argument raises.
 */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

#define LHERD_STORE "herd.Store"
#define LHERD_STORE_SERVER "herd.StoreServer"

typedef struct lstore {
	herd_store *store;  /* NULL once closed */
} lstore;

typedef struct lserver {
	herd_store_server *server;  /* NULL once closed */
} lserver;

static const lherd_type store_type, server_type;

herd_store *lherd_check_store(lua_State *L, int arg)
{
	return ((lstore *)lherd_check(L, arg, &store_type))->store;
}

static void store_release(lua_State *L)
{
	lstore *s = (lstore *)lua_touserdata(L, 1);

	herd_store_free(s->store);
	s->store = NULL;
}

static void server_release(lua_State *L)
{
	lserver *s = (lserver *)lua_touserdata(L, 1);

	herd_store_server_free(s->server);
	s->server = NULL;
}

static void server_describe(lua_State *L)
{
	lua_pushstring(L, herd_store_server_address(((lserver *)lua_touserdata(L, 1))->server));
}

static const char *check_key(lua_State *L, int arg)
{
	size_t len;
	const char *k = luaL_checklstring(L, arg, &len);

	luaL_argcheck(L, len >= 1 && strlen(k) == len, arg,
		      "a key is a non-empty string without NUL bytes");
	return k;
}

/* ------------------------------------------------------------ methods */

/* s:set(key, value) -> true: a string as it is, any other value as msgpack. */
static int store_set(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	const char *key = check_key(L, 2);
	const char *bytes;
	size_t len;

	luaL_checkany(L, 3);
	if (lua_type(L, 3) == LUA_TSTRING)
		lua_pushvalue(L, 3);
	else
		lherd_msgpack_push(L, 3);
	bytes = lua_tolstring(L, -1, &len);
	return lherd_result(L, herd_store_set(s, key, bytes, len));
}

/* Reads key into a string on the stack; 1, or the failure triple (3). */
static int get_bytes(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	const char *key = check_key(L, 2);
	int ms = lherd_check_seconds(L, 3, HERD_TIMEOUT_DEFAULT);
	void **held = lherd_hold(L, NULL);
	size_t len = 0;
	herd_status st = herd_store_get(s, key, ms, held, &len);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushlstring(L, (const char *)*held, len);
	lherd_drop(L, -2);
	return 1;
}

/* s:get(key[, seconds]) -> the bytes, waiting until the key exists. */
static int store_get(lua_State *L)
{
	return get_bytes(L);
}

/* s:get_value(key[, seconds]) -> the value set from Lua (msgpack decoded). */
static int store_get_value(lua_State *L)
{
	size_t len;
	const char *bytes;

	if (get_bytes(L) != 1)
		return 3;
	bytes = lua_tolstring(L, -1, &len);
	if (!lherd_msgpack_decode(L, bytes, len))
		return lherd_failf(L, HERD_EFORMAT, "key '%s' does not hold a msgpack value "
				   "(%d bytes)", lua_tostring(L, 2), (int)len);
	return 1;
}

/* s:add(key, delta) -> the counter's new value. */
static int store_add(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	const char *key = check_key(L, 2);
	lua_Integer delta = luaL_optinteger(L, 3, 1);
	int64_t v = 0;
	herd_status st = herd_store_add(s, key, (int64_t)delta, &v);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushinteger(L, (lua_Integer)v);
	return 1;
}

/* s:delete(key) -> whether it existed. */
static int store_delete(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	bool existed = false;
	herd_status st = herd_store_delete(s, check_key(L, 2), &existed);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, existed);
	return 1;
}

/* s:wait(keys[, seconds]) -> true once every key exists (keys: a string or an array). */
static int store_wait(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	int ms = lherd_check_seconds(L, 3, HERD_TIMEOUT_DEFAULT);
	lua_Integer n;
	const char **keys;

	if (lua_type(L, 2) == LUA_TSTRING) {
		const char *k = check_key(L, 2);

		return lherd_result(L, herd_store_wait(s, &k, 1, ms));
	}
	luaL_checktype(L, 2, LUA_TTABLE);
	n = luaL_len(L, 2);
	luaL_argcheck(L, n >= 1 && n <= HERD_STORE_WAIT_MAX_KEYS, 2,
		      "1 to 4096 keys expected");
	keys = (const char **)lua_newuserdatauv(L, (size_t)n * sizeof(*keys), 1);
	lua_pushvalue(L, 2); /* keeps the strings alive */
	lua_setiuservalue(L, -2, 1);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_geti(L, 2, i);
		if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
			luaL_argerror(L, 2, lua_pushfstring(L, "key %I is not a non-empty string", i));
		keys[i - 1] = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	return lherd_result(L, herd_store_wait(s, keys, (size_t)n, ms));
}

/* s:keys([prefix]) -> the keys that start with prefix, in byte order. */
static int store_keys(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	const char *prefix = luaL_optstring(L, 2, "");
	void **held = lherd_hold(L, NULL);
	size_t n = 0;
	herd_status st = herd_store_keys(s, prefix, (char ***)held, &n);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_createtable(L, n < INT32_MAX ? (int)n : 0, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, ((char **)*held)[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lherd_drop(L, -2);
	return 1;
}

/* s:prefix(p) -> a store whose keys are prefixed with p (sharing the connection). */
static int store_prefix(lua_State *L)
{
	herd_store *s = lherd_check_store(L, 1);
	const char *p = luaL_checkstring(L, 2);
	lstore *c = (lstore *)lherd_new(L, &store_type, sizeof(*c), 0);
	herd_status st = herd_store_prefix(&c->store, s, p);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

static int server_address(lua_State *L)
{
	lserver *s = (lserver *)lherd_check(L, 1, &server_type);

	lua_pushstring(L, herd_store_server_address(s->server));
	return 1;
}

static int server_port(lua_State *L)
{
	lserver *s = (lserver *)lherd_check(L, 1, &server_type);

	lua_pushinteger(L, herd_store_server_port(s->server));
	return 1;
}

/* ------------------------------------------------------------ herd.store */

static const char *const serve_options[] = { "host", "port", "secret", NULL };
static const char *const connect_options[] = { "timeout", "connect_timeout", NULL };

/* herd.store.serve{host =, port =, secret =} -> a herd.StoreServer; the
 * secret defaults to HERD_JOB_SECRET, else a fresh one (srv.secret). */
static int lstore_serve(lua_State *L)
{
	herd_store_server_opts o = HERD_STORE_SERVER_OPTS_INIT;
	char fresh[HERD_STORE_SECRET_BUF];
	lserver *s;
	herd_status st;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, serve_options);
		o.host = lherd_opt_string(L, 1, "host");
		o.secret = lherd_opt_string(L, 1, "secret");
		o.port = (int)lherd_opt_integer(L, 1, "port", 0, 65535, 0);
	}
	if (o.secret == NULL && shell_env("HERD_JOB_SECRET") == NULL) {
		st = herd_store_secret_generate(fresh);
		if (st != HERD_OK)
			return lherd_fail(L, st);
		o.secret = fresh;
	}
	s = (lserver *)lherd_new(L, &server_type, sizeof(*s), 1);
	lua_pushstring(L, o.secret != NULL ? o.secret : shell_env("HERD_JOB_SECRET"));
	lua_setiuservalue(L, -2, 1);
	st = herd_store_server_start(&s->server, &o);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

/* srv.secret: the secret clients must hold. */
static int server_secret(lua_State *L)
{
	lherd_check(L, 1, &server_type);
	lua_getiuservalue(L, 1, 1);
	return 1;
}

static void server_fields(lua_State *L)
{
	lua_newtable(L);
	lua_pushcfunction(L, server_secret);
	lua_setfield(L, -2, "secret");
}

/* herd.store.connect(address, secret[, {timeout =, connect_timeout =}]) ->
 * a herd.Store; address nil: HERD_STORE, secret nil: HERD_JOB_SECRET. */
static int lstore_connect(lua_State *L)
{
	herd_store_opts o = HERD_STORE_OPTS_INIT;
	const char *addr = luaL_optstring(L, 1, NULL);
	lstore *s;
	herd_status st;

	o.secret = luaL_optstring(L, 2, NULL);
	if (!lua_isnoneornil(L, 3)) {
		luaL_checktype(L, 3, LUA_TTABLE);
		lherd_check_keys(L, 3, connect_options);
		o.timeout_ms = lherd_opt_ms(L, 3, "timeout");
		o.connect_timeout_ms = lherd_opt_ms(L, 3, "connect_timeout");
	}
	s = (lstore *)lherd_new(L, &store_type, sizeof(*s), 0);
	st = herd_store_connect(&s->store, addr, &o);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

/* herd.store.env() -> the job's store (HERD_STORE, HERD_JOB_SECRET). */
static int lstore_env(lua_State *L)
{
	lstore *s;
	herd_status st;

	if (shell_env("HERD_STORE") == NULL) {
		lua_pushnil(L);
		lua_pushliteral(L, "HERD_STORE is not set: this process is not a rank of a herd job");
		lua_pushstring(L, herd_status_name(HERD_EINVAL));
		return 3;
	}
	s = (lstore *)lherd_new(L, &store_type, sizeof(*s), 0);
	st = herd_store_connect(&s->store, NULL, NULL);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

static const luaL_Reg store_methods[] = {
	{ "set", store_set },
	{ "get", store_get },
	{ "get_value", store_get_value },
	{ "add", store_add },
	{ "delete", store_delete },
	{ "wait", store_wait },
	{ "keys", store_keys },
	{ "prefix", store_prefix },
	{ NULL, NULL }
};

static const luaL_Reg server_methods[] = {
	{ "address", server_address },
	{ "port", server_port },
	{ NULL, NULL }
};

static const lherd_type store_type = {
	.name = LHERD_STORE,
	.methods = store_methods,
	.release = store_release,
};

static const lherd_type server_type = {
	.name = LHERD_STORE_SERVER,
	.methods = server_methods,
	.fields = server_fields,
	.release = server_release,
	.describe = server_describe,
};

void lherd_open_store(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{ "serve", lstore_serve },
		{ "connect", lstore_connect },
		{ "env", lstore_env },
		{ NULL, NULL }
	};

	lherd_register(L, &store_type);
	lherd_register(L, &server_type);
	luaL_newlib(L, funcs);
	lua_setfield(L, -2, "store");
}
