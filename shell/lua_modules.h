/* The Lua modules of lua/, compiled into the herd program. */
#ifndef HERD_SHELL_LUA_MODULES_H
#define HERD_SHELL_LUA_MODULES_H

#include <stddef.h>

struct herd_lua_module {
	const char *name;   /* "herd.pretty" for lua/herd_pretty.lua */
	const char *source;
	size_t len;
};

/* Terminated by an entry whose name is NULL. */
extern const struct herd_lua_module herd_lua_modules[];

#endif
