/*
 * shell/lua_bench.c - herd.bench(op, opts): `herd bench OP --json` from
 * Lua, its records as tables.
 *
 *   local recs = assert(herd.bench("allreduce", {n = 4, minbytes = "1K", maxbytes = "1M"}))
 *   recs[1].size, recs[1].out_of_place.busbw, recs[1].in_place.time_us,
 *   recs[1].out_of_place.p99_us
 *
 * The benchmark runs as `herd bench` does, in a child process of this very
 * program (so its numbers are the command's: same code, same launch of its
 * ranks); each JSON line it prints becomes one record, with herd bench's
 * field names (JSON null: the field is absent).  Options are herd bench's
 * long options, with the same meaning and defaults: minbytes, maxbytes
 * (bytes, or sizes such as "64M"), stepfactor, stepbytes, iters,
 * warmup_iters, check, datatype, op, root, average, run_cycles, transport,
 * algo, timeout; n (np too; not both) the number of ranks, as -n; size
 * sets minbytes and maxbytes at once.  What
 * the benchmark says on stderr reaches this process's stderr.  A benchmark
 * that fails returns nil, a message with its exit status, and
 * "HERD_EIO" (herd bench's own message, for a value it refuses, is on
 * stderr); an unknown option raises.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lua_herd.h"
#include "shell.h"

extern char **environ;

static const char *const bench_options[] = {
	"minbytes", "maxbytes", "stepfactor", "stepbytes", "iters", "warmup_iters", "check",
	"datatype", "op", "root", "average", "run_cycles", "n", "np", "transport", "algo",
	"timeout", "size", NULL
};

/* The longest a benchmark may run when timeout is not given (herd bench's
 * own deadline of a --np run, and a minute to report). */
#define BENCH_WAIT_S (3600 + 60)

/* "--name=value" for an option of the table at arg, kept on the stack. */
static void push_flag(lua_State *L, int arg, const char *name, const char *flag)
{
	int t = lua_getfield(L, arg, name);

	if (t == LUA_TNIL) {
		lua_pop(L, 1);
		return;
	}
	if (t == LUA_TBOOLEAN)
		lua_pushstring(L, lua_toboolean(L, -1) ? "1" : "0");
	else if (t == LUA_TNUMBER && lua_isinteger(L, -1))
		lua_pushfstring(L, "%I", lua_tointeger(L, -1));
	else if (t == LUA_TNUMBER || t == LUA_TSTRING)
		lua_pushstring(L, lua_tostring(L, -1));
	else
		luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a number or a "
						      "string", name));
	lua_pushfstring(L, "--%s=%s", flag, lua_tostring(L, -1));
	lua_replace(L, -3);
	lua_pop(L, 1);
}

/* The deadline of the whole run: the timeout option's seconds (a call's
 * deadline in herd bench, and with np the run's) plus a minute, else an hour. */
static int run_deadline_s(lua_State *L, int arg)
{
	int s = BENCH_WAIT_S;

	if (!lua_isnoneornil(L, arg) && lua_getfield(L, arg, "timeout") == LUA_TNUMBER) {
		lua_Number t = lua_tonumber(L, -1);

		if (t > 0 && t < 2e6)
			s = (int)t + 60;
	}
	if (!lua_isnoneornil(L, arg))
		lua_pop(L, 1);
	return s;
}

/* herd.bench(op[, opts]) -> an array of records, or nil, msg, "HERD_EIO". */
static int lherd_bench(lua_State *L)
{
	const char *op = luaL_checkstring(L, 1);
	char self[PATH_MAX];
	const char **argv;
	int base, nargs, fds[2], status = 0, deadline_s;
	posix_spawn_file_actions_t fa;
	luaL_Buffer out;
	pid_t pid;
	int64_t deadline;
	bool timed_out = false;
	size_t n = 0;

	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		lherd_check_keys(L, 2, bench_options);
		lua_getfield(L, 2, "n");
		lua_getfield(L, 2, "np");
		luaL_argcheck(L, lua_isnil(L, -1) || lua_isnil(L, -2), 2, "options 'n' and 'np' "
			      "are one option (the number of ranks); give one");
		lua_pop(L, 2);
	}
	deadline_s = run_deadline_s(L, 2);
	if (shell_self_program(self, sizeof(self)) == NULL)
		return luaL_error(L, "herd.bench: cannot find this program: %s", strerror(errno));
	base = lua_gettop(L);
	lua_pushstring(L, self);
	lua_pushliteral(L, "bench");
	lua_pushvalue(L, 1);
	lua_pushliteral(L, "--json");
	if (!lua_isnoneornil(L, 2)) {
		for (const char *const *o = bench_options; *o != NULL; o++) {
			if (strcmp(*o, "size") == 0) {
				push_flag(L, 2, "size", "minbytes");
				push_flag(L, 2, "size", "maxbytes");
			} else if (strcmp(*o, "n") == 0) {
				push_flag(L, 2, "n", "np");
			} else {
				push_flag(L, 2, *o, *o);
			}
		}
	}
	nargs = lua_gettop(L) - base;
	argv = (const char **)lua_newuserdatauv(L, (size_t)(nargs + 1) * sizeof(*argv), 0);
	for (int i = 0; i < nargs; i++)
		argv[i] = lua_tostring(L, base + 1 + i);
	argv[nargs] = NULL;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return luaL_error(L, "herd.bench: cannot create a pipe for the results: %s",
				  strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	errno = posix_spawn(&pid, self, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (errno != 0) {
		int e = errno;

		close(fds[0]);
		return luaL_error(L, "herd.bench: cannot start %s: %s", self, strerror(e));
	}
	/* Read everything it prints, up to the deadline (errors below must not
	 * leave the child: no Lua error is raised until it is reaped). */
	luaL_buffinit(L, &out);
	deadline = lherd_now_ms() + (int64_t)deadline_s * 1000;
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		int64_t left = deadline - lherd_now_ms();
		char *dst;
		ssize_t got;

		if (left <= 0) {
			timed_out = true;
			kill(pid, SIGTERM);
			break;
		}
		if (poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left) < 0 && errno != EINTR)
			break;
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		dst = luaL_prepbuffsize(&out, 65536);
		got = read(fds[0], dst, 65536);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		luaL_addsize(&out, (size_t)got);
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	luaL_pushresult(&out);
	if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		lua_pushnil(L);
		if (timed_out)
			lua_pushfstring(L, "herd bench %s did not end within %d s", op, deadline_s);
		else if (WIFEXITED(status))
			lua_pushfstring(L, "herd bench %s exited with status %d", op, WEXITSTATUS(status));
		else
			lua_pushfstring(L, "herd bench %s was killed by signal %d", op, WTERMSIG(status));
		lua_pushstring(L, herd_status_name(timed_out ? HERD_ETIMEDOUT : HERD_EIO));
		return 3;
	}
	lua_newtable(L); /* the records, under the output */
	{
		const char *s = lua_tostring(L, -2);

		for (const char *line = s; *line != '\0';) {
			const char *end = strchr(line, '\n');
			size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
			json_error_t jerr;
			void **held = lherd_hold(L, lherd_json_release);

			*held = len > 0 ? json_loadb(line, len, 0, &jerr) : NULL;
			if (len > 0 && *held == NULL)
				return luaL_error(L, "herd.bench: line %d of herd bench's output is not "
						  "JSON: %s", (int)n + 1, jerr.text);
			if (*held != NULL) {
				lherd_push_json(L, *held);
				lua_rawseti(L, -3, (lua_Integer)++n);
			}
			lherd_drop(L, -1);
			lua_pop(L, 1);
			line += len + (end != NULL);
		}
	}
	return 1;
}

void lherd_open_bench(lua_State *L)
{
	lua_pushcfunction(L, lherd_bench);
	lua_setfield(L, -2, "bench");
}
