/*
 * shell/lua_object.c - the one way every herd type is made in Lua: a full
 * userdata whose first member is the handle it owns (NULL once closed), a
 * metatable built from an lherd_type, one idempotent release reached from
 * obj:close(), __close and __gc, and a holder for what libherd hands over
 * while it is being copied into Lua values.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "lua_herd.h"

/* ------------------------------------------------------------ checking */

/*
 * Which metatable is each type's, by address: an open-addressed table in a
 * userdata anchored in the registry, found through the state's extra
 * space (which its coroutines copy).  A type check is then the object's
 * metatable compared with a pointer: the registry lookup under the type's
 * address, a hash and a compare through the API, cost more than the rest
 * of an 8-byte collective's binding.  The extra space is not initialized
 * by Lua: the first lherd_register (lherd_open_object's, the first thing
 * luaopen_herd does) sets it in the main thread, whose extra space every
 * later coroutine copies, so herd must be opened before the state makes a
 * coroutine.  A type not in
 * the table takes the registry lookup (lherd_register puts every
 * metatable there too).
 */
#define MT_SLOTS 64

typedef struct mt_table {
	const lherd_type *type[MT_SLOTS];
	const void *mt[MT_SLOTS];
} mt_table;

static const char mt_table_key = 0;

static size_t mt_hash(const lherd_type *t)
{
	return (size_t)(((uintptr_t)t >> 3) * 0x9e3779b97f4a7c15u >> 32) % MT_SLOTS;
}

/* The slot of t in m: where it is, or where it would go; -1 when full. */
static int mt_slot(const mt_table *m, const lherd_type *t)
{
	size_t h = mt_hash(t);

	for (size_t i = 0; i < MT_SLOTS; i++) {
		size_t k = (h + i) % MT_SLOTS;

		if (m->type[k] == t || m->type[k] == NULL)
			return (int)k;
	}
	return -1;
}

/* The table, in the registry and in the main thread's extra space. */
static void mt_open(lua_State *L)
{
	mt_table *m;
	lua_State *main;

	if (lua_rawgetp(L, LUA_REGISTRYINDEX, &mt_table_key) == LUA_TUSERDATA) {
		lua_pop(L, 1);
		return;
	}
	lua_pop(L, 1);
	m = (mt_table *)lua_newuserdatauv(L, sizeof(*m), 0);
	memset(m, 0, sizeof(*m));
	lua_rawsetp(L, LUA_REGISTRYINDEX, &mt_table_key);
	lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
	main = lua_tothread(L, -1);
	lua_pop(L, 1);
	*(mt_table **)lua_getextraspace(main) = m;
	*(mt_table **)lua_getextraspace(L) = m;
}

/* Records the metatable on top as t's. */
static void mt_remember(lua_State *L, const lherd_type *t)
{
	mt_table *m;
	int k;

	mt_open(L);
	m = *(mt_table **)lua_getextraspace(L);
	if ((k = mt_slot(m, t)) >= 0) {
		m->type[k] = t;
		m->mt[k] = lua_topointer(L, -1);
	}
}

void *lherd_test(lua_State *L, int arg, const lherd_type *t)
{
	void *p = lua_touserdata(L, arg);
	const mt_table *m = *(mt_table **)lua_getextraspace(L);
	int k;
	bool same;

	if (p == NULL || !lua_getmetatable(L, arg))
		return NULL;
	if ((k = mt_slot(m, t)) >= 0 && m->type[k] == t) {
		same = lua_topointer(L, -1) == m->mt[k];
		lua_pop(L, 1);
	} else {
		lua_rawgetp(L, LUA_REGISTRYINDEX, t);
		same = lua_rawequal(L, -1, -2);
		lua_pop(L, 2);
	}
	return same ? p : NULL;
}

/*
 * What the value at arg is, for a type error: a herd object by its type's
 * name, anything else by its Lua type.  luaL_typeerror would take any
 * metatable's __name, so that a table given a herd type's metatable
 * (setmetatable({}, getmetatable(buf))) would be "herd.Buffer expected,
 * got herd.Buffer"; only a full userdata is named by its __name here.
 */
static const char *actual_name(lua_State *L, int arg, const lherd_type *t)
{
	const char *name = NULL;

	arg = lua_absindex(L, arg);
	if (lua_type(L, arg) == LUA_TUSERDATA &&
	    luaL_getmetafield(L, arg, "__name") != LUA_TNIL) {
		if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), t->name) != 0)
			name = lua_tostring(L, -1);  /* stays on the stack until the raise */
		else
			lua_pop(L, 1);
	}
	if (name == NULL)
		name = lua_type(L, arg) == LUA_TLIGHTUSERDATA ? "light userdata"
							      : luaL_typename(L, arg);
	return name;
}

void *lherd_to(lua_State *L, int arg, const lherd_type *t)
{
	void *p = lherd_test(L, arg, t);

	if (p == NULL)
		luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", t->name,
						      actual_name(L, arg, t)));
	return p;
}

void *lherd_check(lua_State *L, int arg, const lherd_type *t)
{
	void **obj = (void **)lherd_to(L, arg, t);

	if (*obj == NULL)
		luaL_error(L, "attempt to use a closed %s", t->name);
	return obj;
}

void *lherd_new(lua_State *L, const lherd_type *t, size_t size, int nuv)
{
	void *obj = lua_newuserdatauv(L, size, nuv);

	memset(obj, 0, size);
	luaL_setmetatable(L, t->name);
	return obj;
}

/* ----------------------------------------------------------- metamethods */

/* The type of the object at 1: upvalue 1 of every generic metamethod. */
static const lherd_type *upvalue_type(lua_State *L)
{
	return (const lherd_type *)lua_touserdata(L, lua_upvalueindex(1));
}

/* obj:close() -> true; a second close raises, as for a file. */
static int generic_close(lua_State *L)
{
	const lherd_type *t = upvalue_type(L);

	lherd_check(L, 1, t);
	lua_settop(L, 1);
	t->release(L);
	lua_pushboolean(L, 1);
	return 1;
}

/* __gc and __close: release what is still held; silent when closed. */
static int generic_gc(lua_State *L)
{
	const lherd_type *t = upvalue_type(L);
	void **obj = (void **)lherd_to(L, 1, t);

	lua_settop(L, 1);
	if (*obj != NULL)
		t->release(L);
	return 0;
}

/* __tostring: "herd.Job (closed)", or the type's own text with the address. */
static int generic_tostring(lua_State *L)
{
	const lherd_type *t = upvalue_type(L);
	void **obj = (void **)lherd_to(L, 1, t);

	if (t->release != NULL && *obj == NULL) {
		lua_pushfstring(L, "%s (closed)", t->name);
		return 1;
	}
	if (t->describe == NULL) {
		lua_pushfstring(L, "%s (%p)", t->name, (void *)obj);
		return 1;
	}
	lua_settop(L, 1);
	t->describe(L);
	lua_pushfstring(L, "%s (%s) (%p)", t->name, lua_tostring(L, -1), (void *)obj);
	return 1;
}

/*
 * __index: upvalue 1 the methods, upvalue 2 the field getters (functions
 * called with the object), upvalue 3 the type, whose item takes number
 * keys.  An unknown key is nil, as for a table.
 */
static int object_index(lua_State *L)
{
	const lherd_type *t = (const lherd_type *)lua_touserdata(L, lua_upvalueindex(3));

	lua_settop(L, 2);
	if (t->item != NULL && lua_type(L, 2) == LUA_TNUMBER)
		return t->item(L);
	lua_pushvalue(L, 2);
	if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
		return 1;
	lua_pushvalue(L, 2);
	if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNIL)
		return 1;
	lua_pushvalue(L, 1);
	lua_call(L, 1, 1);
	return 1;
}

static void set_generic(lua_State *L, const lherd_type *t, lua_CFunction fn,
			const char *name)
{
	lua_pushlightuserdata(L, (void *)t);
	lua_pushcclosure(L, fn, 1);
	lua_setfield(L, -2, name);
}

void lherd_register(lua_State *L, const lherd_type *t)
{
	if (!luaL_newmetatable(L, t->name)) {
		lua_pop(L, 1);
		return;
	}
	lua_pushvalue(L, -1);
	lua_rawsetp(L, LUA_REGISTRYINDEX, t); /* for lherd_test */
	mt_remember(L, t);
	/* methods: the type's own, and close when it holds something */
	lua_newtable(L);
	if (t->release != NULL)
		set_generic(L, t, generic_close, "close");
	if (t->methods != NULL)
		luaL_setfuncs(L, t->methods, 0);
	/* getters */
	if (t->fields != NULL)
		t->fields(L);
	else
		lua_newtable(L);
	/* __members: every method and field by kind, for the REPL's completion
	 * and printing (mt, methods, getters, members) */
	lua_newtable(L);
	for (int i = -3; i <= -2; i++) {
		lua_pushnil(L);
		while (lua_next(L, i - 1)) {
			lua_pop(L, 1);
			lua_pushvalue(L, -1);
			if (i == -3)
				lua_pushliteral(L, "method");
			else
				lua_pushliteral(L, "field");
			lua_rawset(L, -4);
		}
	}
	lua_setfield(L, -4, "__members");
	lua_pushlightuserdata(L, (void *)t);
	lua_pushcclosure(L, object_index, 3);
	lua_setfield(L, -2, "__index");
	if (t->release != NULL) {
		set_generic(L, t, generic_gc, "__gc");
		set_generic(L, t, generic_gc, "__close");
	}
	set_generic(L, t, generic_tostring, "__tostring");
	if (t->meta != NULL)
		luaL_setfuncs(L, t->meta, 0);
	lua_pop(L, 1);
}

/* --------------------------------------------------------------- holders */

/*
 * A holder owns memory that libherd handed over (freed with herd_free, or
 * with the function given) while it is copied into Lua values, so that an
 * error raised by the copy (out of memory) cannot leak it.
 */
typedef struct lholder {
	void *p;
	void (*release)(void *);
} lholder;

static void release_holder(lua_State *L)
{
	lholder *h = (lholder *)lua_touserdata(L, 1);

	h->release(h->p);
	h->p = NULL;
}

static const lherd_type holder_type = {
	.name = "herd.Held",
	.release = release_holder,
};

void **lherd_hold(lua_State *L, void (*release)(void *))
{
	lholder *h = (lholder *)lherd_new(L, &holder_type, sizeof(*h), 0);

	h->release = release != NULL ? release : herd_free;
	return &h->p;
}

void lherd_open_object(lua_State *L)
{
	lherd_register(L, &holder_type);
}

void lherd_drop(lua_State *L, int idx)
{
	lholder *h = (lholder *)lherd_to(L, idx, &holder_type);

	if (h->p != NULL)
		h->release(h->p);
	h->p = NULL;
}
