/*
 * shell/lua_herd.h - the Lua bindings of libherd: the `herd` table and one
 * metatable per C object type, in the manner of Lua's liolib.c.
 *
 * Conventions of every binding: misuse (a wrong argument type, an index out
 * of range, a closed object) raises an error; an expected failure (a missing
 * or malformed file, a probe that cannot run) returns nil, a message and the
 * herd status name ("HERD_EFORMAT"), as io.open does with errno.
 */
#ifndef HERD_SHELL_LUA_HERD_H
#define HERD_SHELL_LUA_HERD_H

#include <lua.h>

#include "herd.h"

/* Metatable names, as luaL_checkudata and __name know them. */
#define LHERD_CLUSTER "herd.Cluster"
#define LHERD_NODE "herd.Node"

/*
 * Opens the `herd` module: leaves the herd table on the stack.  Registers
 * the metatables and puts the Lua modules compiled into the program in
 * package.preload.  Used with luaL_requiref, which also sets the global.
 */
int luaopen_herd(lua_State *L);

/* Creates the herd.Cluster and herd.Node metatables (once per state). */
void lherd_open_cluster(lua_State *L);

/*
 * Creates the herd.Plan metatable and sets herd.alloc and herd.gpus in the
 * herd table on top of the stack (shell/lua_alloc.c).
 */
void lherd_open_alloc(lua_State *L);

/*
 * Creates the herd.Checkpoint metatable and sets herd.checkpoint in the
 * herd table on top of the stack (shell/lua_ckpt.c).
 */
void lherd_open_ckpt(lua_State *L);

/* Adds herd.health to the herd table on top of the stack (lua_health.c). */
void lherd_open_health(lua_State *L);

/* Adds herd.hostlist (expand, compress) to the herd table on top of the
 * stack (lua_hostlist.c). */
void lherd_open_hostlist(lua_State *L);

/*
 * Pushes a new herd.Cluster that holds nothing yet and returns the slot the
 * caller stores its herd_cluster in (liolib's newprefile): the object is
 * safe to collect before the cluster exists, so nothing leaks if creating it
 * raises.  Once stored, the cluster belongs to the object, which frees it
 * when closed or collected.
 */
herd_cluster **lherd_new_cluster(lua_State *L);

/*
 * Fields of the table on top of the stack: a string (none when value is
 * NULL), a string only when not empty (the inventory's fixed-size fields
 * use "" for none), an integer.
 */
void lherd_set_string(lua_State *L, const char *key, const char *value);
void lherd_set_nonempty(lua_State *L, const char *key, const char *value);
void lherd_set_integer(lua_State *L, const char *key, lua_Integer value);

/* Pushes the status's failure triple: nil, herd_last_error(), status name. */
int lherd_fail(lua_State *L, herd_status status);

/*
 * Raises an argument error on a key of the options table at arg that is not
 * in known (NULL-terminated); the message lists the known keys.
 */
void lherd_check_keys(lua_State *L, int arg, const char *const *known);

#endif /* HERD_SHELL_LUA_HERD_H */
