/*
 * shell/lua_herd.c - the `herd` table: herd.version(), herd.discover(), and
 * the Lua modules compiled into the program (package.preload).
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "lua_herd.h"
#include "shell.h"
#include "lua_modules.h"

int lherd_fail(lua_State *L, herd_status status)
{
	const char *msg = shell_last_error();

	lua_pushnil(L);
	lua_pushstring(L, msg[0] != '\0' ? msg : herd_status_describe(status));
	lua_pushstring(L, herd_status_name(status));
	return 3;
}

int lherd_failf(lua_State *L, herd_status status, const char *fmt, ...)
{
	va_list ap;

	lua_pushnil(L);
	va_start(ap, fmt);
	lua_pushvfstring(L, fmt, ap);
	va_end(ap);
	lua_pushstring(L, herd_status_name(status));
	return 3;
}

int64_t lherd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lherd_check_seconds(lua_State *L, int arg, int absent)
{
	lua_Number t;

	if (lua_isnoneornil(L, arg))
		return absent;
	t = luaL_checknumber(L, arg);
	luaL_argcheck(L, t >= 0 && t < INT32_MAX / 1000.0, arg, "seconds, 0 or more");
	return (int)(t * 1000.0 + 0.5);
}

bool lherd_is_array(lua_State *L, int idx, lua_Integer *n)
{
	lua_Integer count = 0, len = (lua_Integer)lua_rawlen(L, idx);

	idx = lua_absindex(L, idx);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > len) {
			lua_pop(L, 1);
			return false;
		}
		count++;
	}
	*n = len;
	return count == len;
}

int lherd_result(lua_State *L, herd_status st)
{
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, 1);
	return 1;
}

void lherd_check_keys(lua_State *L, int arg, const char *const *known)
{
	lua_pushnil(L);
	while (lua_next(L, arg)) {
		const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
		bool found = false;

		lua_pop(L, 1);
		for (const char *const *k = known; key != NULL && *k != NULL && !found; k++)
			found = strcmp(key, *k) == 0;
		if (!found) {
			const char *list, *name;
			luaL_Buffer b;

			luaL_buffinit(L, &b);
			for (const char *const *k = known; *k != NULL; k++) {
				luaL_addstring(&b, k == known ? "" : ", ");
				luaL_addstring(&b, *k);
			}
			luaL_pushresult(&b);
			/* One at a time: the order C evaluates arguments in is unspecified,
			 * and luaL_tolstring pushes. */
			list = lua_tostring(L, -1);
			name = luaL_tolstring(L, -2, NULL);
			luaL_argerror(L, arg, lua_pushfstring(L, "unknown option '%s' (known: %s)",
							      name, list));
		}
	}
}

/* Pushes option name of the table at arg when it is set; raises when it is
 * of another type than want. */
static bool opt_get(lua_State *L, int arg, const char *name, int want)
{
	if (lua_getfield(L, arg, name) == LUA_TNIL) {
		lua_pop(L, 1);
		return false;
	}
	if (lua_type(L, -1) != want)
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a %s, not a %s", name,
						      lua_typename(L, want), luaL_typename(L, -1)));
	return true;
}

const char *lherd_opt_string(lua_State *L, int arg, const char *name)
{
	const char *s;

	if (!opt_get(L, arg, name, LUA_TSTRING))
		return NULL;
	s = lua_tostring(L, -1);
	lua_pop(L, 1); /* the options table keeps the string alive */
	return s;
}

lua_Integer lherd_opt_integer(lua_State *L, int arg, const char *name, lua_Integer min,
			      lua_Integer max, lua_Integer def)
{
	lua_Integer v;
	int isint = 0;

	if (!opt_get(L, arg, name, LUA_TNUMBER))
		return def;
	v = lua_tointegerx(L, -1, &isint);
	if (!isint || v < min || v > max)
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a whole number from "
						      "%I to %I", name, min, max));
	lua_pop(L, 1);
	return v;
}

int lherd_opt_ms(lua_State *L, int arg, const char *name)
{
	lua_Number t;

	if (!opt_get(L, arg, name, LUA_TNUMBER))
		return 0;
	t = lua_tonumber(L, -1);
	if (!(t > 0 && t < 2e6))
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' is seconds, more than 0 "
						      "(at most 2000000)", name));
	lua_pop(L, 1);
	return (int)(t * 1000.0 + 0.5);
}

void lherd_set_string(lua_State *L, const char *key, const char *value)
{
	if (value == NULL)
		return;
	lua_pushstring(L, value);
	lua_setfield(L, -2, key);
}

void lherd_set_nonempty(lua_State *L, const char *key, const char *value)
{
	if (value != NULL && value[0] != '\0')
		lherd_set_string(L, key, value);
}

void lherd_set_integer(lua_State *L, const char *key, lua_Integer value)
{
	lua_pushinteger(L, value);
	lua_setfield(L, -2, key);
}

static const char *const discover_options[] = { "inventory", "hosts", "hostfile", "slurm",
						 "timeout", NULL };

/* herd.version() -> the library's version string ("0.1.0"). */
static int lherd_version(lua_State *L)
{
	lua_pushstring(L, herd_version());
	return 1;
}

/*
 * herd.discover([opts]) -> a herd.Cluster, or nil, msg, status.
 * opts.inventory: load this inventory file instead of probing this node;
 * opts.hosts (a hostlist), opts.hostfile or opts.slurm (true): probe those
 * nodes instead (herd_cluster_discover), each given opts.timeout seconds;
 * the nodes that did not answer are the cluster's failed list.  An
 * unknown option is misuse and raises, so that a misspelt key does not
 * silently probe the local machine instead of loading a file.
 */
static int lherd_discover(lua_State *L)
{
	herd_cluster_discover_opts opts = HERD_CLUSTER_DISCOVER_OPTS_INIT;
	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		lherd_check_keys(L, 1, discover_options);
		opts.inventory = lherd_opt_string(L, 1, "inventory");
		opts.hosts = lherd_opt_string(L, 1, "hosts");
		opts.hostfile = lherd_opt_string(L, 1, "hostfile");
		if (lua_getfield(L, 1, "slurm") != LUA_TNIL) {
			if (!lua_isboolean(L, -1))
				return luaL_argerror(L, 1, "option 'slurm' must be a boolean");
			opts.slurm = lua_toboolean(L, -1);
		}
		lua_pop(L, 1);
		opts.timeout_ms = lherd_opt_ms(L, 1, "timeout");
	}
	herd_cluster **slot = lherd_new_cluster(L);
	herd_status st = herd_cluster_discover(slot, &opts);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	return 1;
}

/* Whether v is a whole number from 0 to INT32_MAX; *out: it. */
static bool whole(const char *v, lua_Integer *out)
{
	char *end;
	long long x;

	if (v == NULL || *v == '\0')
		return false;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (*end != '\0' || errno != 0 || x < 0 || x > INT32_MAX)
		return false;
	*out = (lua_Integer)x;
	return true;
}

/* herd's variable p when it is a whole number, else the first of the other
 * tools' variables that is, else def. */
static lua_Integer env_int(const char *setting, const char *const *names, lua_Integer def)
{
	lua_Integer x;

	if (whole(shell_env(setting), &x))
		return x;
	for (; *names != NULL; names++)
		if (whole(getenv(*names), &x))
			return x;
	return def;
}

/*
 * herd.rank, herd.size, herd.local_rank, herd.host: this process's place
 * in its job, as herd launch (HERD_*), torchrun, Slurm or Open MPI set it;
 * rank 0 of 1 outside a job.
 */
static void set_identity(lua_State *L)
{
	static const char *const rank[] = { "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", NULL };
	static const char *const size[] = { "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
					    NULL };
	static const char *const local[] = { "LOCAL_RANK", "SLURM_LOCALID",
					     "OMPI_COMM_WORLD_LOCAL_RANK", NULL };
	char host[256];

	lherd_set_integer(L, "rank", env_int("HERD_RANK", rank, 0));
	lherd_set_integer(L, "size", env_int("HERD_WORLD_SIZE", size, 1));
	lherd_set_integer(L, "local_rank", env_int("HERD_LOCAL_RANK", local, 0));
	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	lherd_set_string(L, "host", host);
}

/* herd.tty([fd]) -> whether fd (default 1, stdout) is a terminal. */
static int lherd_tty(lua_State *L)
{
	lua_Integer fd = luaL_optinteger(L, 1, STDOUT_FILENO);

	luaL_argcheck(L, fd >= 0 && fd <= INT32_MAX, 1, "a file descriptor");
	lua_pushboolean(L, isatty((int)fd));
	return 1;
}

/*
 * herd.columns([fd]) -> the width of the terminal on fd (default 1,
 * stdout): its window's when fd is a terminal, else $COLUMNS when that is
 * a positive number (a pipe into a pager), else 80.  What help() wraps to.
 */
static int lherd_columns(lua_State *L)
{
	lua_Integer fd = luaL_optinteger(L, 1, STDOUT_FILENO);
	const char *env = getenv("COLUMNS");
	struct winsize ws;
	long n = 0;
	char *end;

	luaL_argcheck(L, fd >= 0 && fd <= INT32_MAX, 1, "a file descriptor");
	if (ioctl((int)fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
		n = ws.ws_col;
	} else if (env != NULL) {
		n = strtol(env, &end, 10);
		if (end == env || *end != '\0' || n <= 0 || n > 100000)
			n = 0;
	}
	lua_pushinteger(L, n > 0 ? n : 80);
	return 1;
}

/* herd.clock() -> seconds of CLOCK_MONOTONIC, to the nanosecond: for timing. */
static int lherd_clock(lua_State *L)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
	return 1;
}

/*
 * herd.write_file(path, text) -> true | nil, msg, status: text written to
 * path as a new file (herd_file_write: a temporary file beside it renamed
 * over it; a device, a FIFO or a symbolic link at path is refused), as
 * every Lua module of herd writes its files, so that a file that cannot be
 * written fails the same way everywhere.
 */
static int lherd_write_file(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	size_t len;
	const char *text = luaL_checklstring(L, 2, &len);
	herd_status st = herd_file_write(path, text, len, 0644);

	if (st != HERD_OK)
		return lherd_failf(L, st, "%s", shell_last_error());
	lua_pushboolean(L, 1);
	return 1;
}

static const luaL_Reg herd_funcs[] = {
	{ "version", lherd_version },
	{ "write_file", lherd_write_file },
	{ "tty", lherd_tty },
	{ "columns", lherd_columns },
	{ "clock", lherd_clock },
	{ "discover", lherd_discover },
	{ NULL, NULL }
};

/*
 * The package.preload loader of an embedded module: upvalue 1 is its
 * entry in herd_lua_modules.  Chunk names read "lua/herd_pretty.lua" so
 * that errors point at the file the module is built from.
 */
static int load_embedded(lua_State *L)
{
	const struct herd_lua_module *m =
		(const struct herd_lua_module *)lua_touserdata(L, lua_upvalueindex(1));
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	luaL_addstring(&b, "@lua/");
	for (const char *p = m->name; *p; p++)
		luaL_addchar(&b, *p == '.' ? '_' : *p);
	luaL_addstring(&b, ".lua");
	luaL_pushresult(&b);
	if (luaL_loadbuffer(L, m->source, m->len, lua_tostring(L, -1)) != LUA_OK)
		return lua_error(L);
	lua_pushstring(L, m->name);
	lua_call(L, 1, 1);
	return 1;
}

static void preload_modules(lua_State *L)
{
	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
	for (const struct herd_lua_module *m = herd_lua_modules; m->name; m++) {
		lua_pushlightuserdata(L, (void *)m);
		lua_pushcclosure(L, load_embedded, 1);
		lua_setfield(L, -2, m->name);
	}
	lua_pop(L, 1);
}

int luaopen_herd(lua_State *L)
{
	lherd_open_object(L);
	lherd_open_cluster(L);
	preload_modules(L);
	luaL_newlib(L, herd_funcs);
	lherd_open_alloc(L);
	lherd_open_ckpt(L);
	lherd_open_health(L);
	lherd_open_telemetry(L);
	lherd_open_hostlist(L);
	lherd_open_telemetry(L);
	lherd_open_buffer(L);
	lherd_open_msgpack(L);
	lherd_open_store(L);
	lherd_open_comm(L);
	lherd_open_job(L);
	lherd_open_serve(L);
	lherd_open_bench(L);
	lherd_open_json(L);
	set_identity(L);
	/* the Lua modules of lua/, as herd.pretty, herd.plot, herd.experiment */
	for (const struct herd_lua_module *m = herd_lua_modules; m->name; m++) {
		if (strncmp(m->name, "herd.", 5) != 0)
			continue;
		lua_getglobal(L, "require");
		lua_pushstring(L, m->name);
		lua_call(L, 1, 1);
		lua_setfield(L, -2, m->name + 5);
	}
	/* help(x) at the prompt and in scripts, as herd.help(x) */
	lua_getfield(L, -1, "help");
	lua_setglobal(L, "help");
	return 1;
}
