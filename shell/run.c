/*
 * shell/run.c - running Lua code as lua.c does: a message handler that adds
 * a traceback, errors reported as "progname: message", and SIGINT turned
 * into a count hook that raises "interrupted!" inside the running code.
 */
#include <lauxlib.h>
#include <lua.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "herd.h"
#include "shell.h"

const char *shell_progname = "herd";
const char *shell_command = "herd";

/* The state running code, for the signal handler; set around each call. */
static lua_State *global_L = NULL;

const char *shell_last_error(void)
{
	const char *msg = herd_last_error();
	size_t n = strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_");

	/* "herd_ckpt_add_tensor: ..." names the C function the program
	 * called, which whoever runs it never did. */
	if (strncmp(msg, "herd_", 5) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
		return msg + n + 2;
	return msg;
}

void shell_message(const char *pname, const char *msg)
{
	if (pname)
		fprintf(stderr, "%s: ", pname);
	fprintf(stderr, "%s\n", msg);
	fflush(stderr);
}

int shell_report(lua_State *L, int status)
{
	if (status != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		if (msg == NULL)
			msg = "(error object is not a string)";
		shell_message(shell_progname, msg);
		lua_pop(L, 1);
	}
	return status;
}

/* The message handler: the error message with a traceback appended. */
static int msghandler(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (msg == NULL) {
		/* An error object with __tostring gives its text; others their type. */
		if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
			return 1;
		msg = lua_pushfstring(L, "(error object is a %s value)",
				      luaL_typename(L, 1));
	}
	luaL_traceback(L, L, msg, 1);
	return 1;
}

/*
 * The hook set by the SIGINT handler: stops the code at its next instruction.
 * The message carries no position: where the hook fires (a line of the chunk,
 * or the return from a C function such as io.write) depends on when the
 * signal came; the traceback says where.
 */
static void lstop(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	lua_sethook(L, NULL, 0, 0);
	lua_pushliteral(L, "interrupted!");
	lua_error(L);
}

/*
 * SIGINT while code runs.  The handler is reset first, so that a second
 * Ctrl-C before the hook fires (code stuck in C) ends the program as usual.
 * lua_sethook is the one Lua call meant to be safe from a signal handler.
 */
static void laction(int sig)
{
	int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
	signal(sig, SIG_DFL);
	if (global_L != NULL)
		lua_sethook(global_L, lstop, flag, 1);
	/* communicators aborted, the session's jobs stopped (interrupt.c) */
	shell_interrupt_signal();
}

int shell_docall(lua_State *L, int narg, int nres)
{
	int base = lua_gettop(L) - narg;
	lua_pushcfunction(L, msghandler);
	lua_insert(L, base);
	global_L = L;
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = laction;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old);
	int status = lua_pcall(L, narg, nres, base);
	sigaction(SIGINT, &old, NULL);
	/* A Ctrl-C that came too late to be raised must not hit later code
	 * (a hook the code set for itself stays). */
	if (lua_gethook(L) == lstop)
		lua_sethook(L, NULL, 0, 0);
	global_L = NULL;
	lua_remove(L, base);
	return status;
}
