/*
 * shell/lua_serve.c - herd.serve{...}, the Lua face of herd_serve_start: a
 * herd.Service, replicas of a command behind HAProxy.
 *
 *   local svc <close> = herd.serve{cmd = {"build/bin/example_replica"},
 *                                  port = 8080, min_replicas = 2,
 *                                  max_replicas = 4, target = 4,
 *                                  health = "/health"}
 *   svc:wait_ready(2, 30)           -- true once 2 replicas are in the balancer
 *   svc:status().replicas[1].state  -- "ready"; requests, errors, in_flight...
 *   svc:scale(3); svc:restart{rolling = true}; svc:stop()
 *
 * Options, with herd serve's meaning and defaults: cmd (an array of
 * strings or one string), port (required), bind ("127.0.0.1"), replicas
 * (a count: min and max alike), or min_replicas (default 1) and
 * max_replicas (default min_replicas): a range, starting at its minimum, target, cooldown (seconds, 30),
 * replica_port, replica_conns, health ("/path" or "tcp"), start_timeout
 * (seconds, 60), grace (seconds, 10), restarts (3), hosts | hostfile |
 * slurm = true, gpus_per_replica, env ({NAME = value} or {"NAME=value"}),
 * prefix ("[%h:r%r] "), output ("print", the default: replicas' lines to
 * this process's stdout and stderr; or "none"), and events ("print", the
 * default: each decision to stderr as "herd serve: ..."; or "none": only
 * in status().events).
 *
 * Methods, each nil, msg, status on failure: status() (herd_serve_status
 * as a table), wait_ready(n, timeout) (seconds), scale(n),
 * restart{rolling = true} (or restart(true)), stop(), wait(timeout) (true
 * when it ended, and whether it failed), id(), failure().  Collecting or
 * closing the Service stops it.
 */
#include <string.h>

#include "herd.h"
#include "lua_herd.h"
#include "shell.h"

#define LHERD_SERVICE "herd.Service"

typedef struct lsvc {
	herd_serve *svc;
} lsvc;

static const lherd_type service_type;

static lsvc *check_service(lua_State *L, int arg)
{
	return (lsvc *)lherd_check(L, arg, &service_type);
}

static void service_release(lua_State *L)
{
	lsvc *s = (lsvc *)lua_touserdata(L, 1);

	/* Drained while Ctrl-C can still kill it at once, then forgotten. */
	if (s->svc != NULL)
		(void)herd_serve_stop(s->svc);
	shell_interrupt_remove(s->svc);
	herd_serve_free(s->svc);
	s->svc = NULL;
}

static void service_describe(lua_State *L)
{
	lsvc *s = (lsvc *)lua_touserdata(L, 1);

	lua_pushfstring(L, "service %s", herd_serve_id(s->svc));
}

/* svc:status() -> table | nil, msg, status */
static int service_status(lua_State *L)
{
	lsvc *s = check_service(L, 1);
	char *text = NULL;
	void **held, **doc;
	herd_status st = herd_serve_status(s->svc, &text);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	held = lherd_hold(L, NULL);
	*held = text;
	doc = lherd_hold(L, lherd_json_release);
	*doc = lherd_json_parse(text, strlen(text));
	if (*doc == NULL)
		return lherd_failf(L, HERD_EFORMAT, "the service's status is not JSON");
	lherd_push_json(L, *doc);
	return 1;
}

static int ok_or_fail(lua_State *L, herd_status st)
{
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, 1);
	return 1;
}

/* svc:wait_ready(n [, timeout]) -> true | nil, msg, status */
static int service_wait_ready(lua_State *L)
{
	lsvc *s = check_service(L, 1);
	int n = (int)luaL_checkinteger(L, 2);
	int ms = lherd_check_seconds(L, 3, HERD_TIMEOUT_NONE);

	return ok_or_fail(L, herd_serve_wait_ready(s->svc, n, ms));
}

/* svc:scale(n) -> true | nil, msg, status */
static int service_scale(lua_State *L)
{
	lsvc *s = check_service(L, 1);

	return ok_or_fail(L, herd_serve_scale(s->svc, (int)luaL_checkinteger(L, 2)));
}

/* svc:restart{rolling = true} or svc:restart(rolling) -> true | nil, msg, status */
static int service_restart(lua_State *L)
{
	lsvc *s = check_service(L, 1);
	bool rolling;

	if (lua_istable(L, 2)) {
		lua_getfield(L, 2, "rolling");
		rolling = lua_toboolean(L, -1);
		lua_pop(L, 1);
	} else {
		rolling = lua_toboolean(L, 2);
	}
	return ok_or_fail(L, herd_serve_restart(s->svc, rolling));
}

/* svc:stop() -> true | nil, msg, status */
static int service_stop(lua_State *L)
{
	return ok_or_fail(L, herd_serve_stop(check_service(L, 1)->svc));
}

/* svc:wait([timeout]) -> true, failed | nil, msg, status */
static int service_wait(lua_State *L)
{
	lsvc *s = check_service(L, 1);
	bool failed = false;
	herd_status st = herd_serve_wait(s->svc, lherd_check_seconds(L, 2, HERD_TIMEOUT_NONE), &failed);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, 1);
	lua_pushboolean(L, failed);
	return 2;
}

static int service_id(lua_State *L)
{
	lua_pushstring(L, herd_serve_id(check_service(L, 1)->svc));
	return 1;
}

/* svc:failure() -> why it failed, or nil */
static int service_failure(lua_State *L)
{
	const char *f = herd_serve_failure(check_service(L, 1)->svc);

	if (f == NULL)
		lua_pushnil(L);
	else
		lua_pushstring(L, f);
	return 1;
}

static void print_event(void *userdata, const char *line)
{
	(void)userdata;
	fprintf(stderr, "herd serve: %s\n", line);
}

static void no_event(void *userdata, const char *line)
{
	(void)userdata;
	(void)line;
}

static void no_output(void *userdata, int rank, const char *host, herd_job_stream stream,
		      const char *line, size_t len)
{
	(void)userdata;
	(void)rank;
	(void)host;
	(void)stream;
	(void)line;
	(void)len;
}

static const char *const serve_options[] = {
	"cmd", "port", "bind", "replicas", "min_replicas", "max_replicas", "target", "cooldown",
	"replica_port", "replica_conns", "health", "start_timeout", "grace", "restarts", "hosts",
	"hostfile", "slurm", "gpus_per_replica", "env", "prefix", "output", "events", NULL
};

/* herd.serve{...} -> a herd.Service once HAProxy and the first replicas started,
 * or nil, msg, status. */
static int lherd_serve(lua_State *L)
{
	herd_serve_spec spec = HERD_SERVE_SPEC_INIT;
	const char *out, *events, **argv;
	int argc, n;
	lsvc *s;
	herd_status st;

	luaL_checktype(L, 1, LUA_TTABLE);
	lherd_check_keys(L, 1, serve_options);
	spec.port = (int)lherd_opt_integer(L, 1, "port", 1, 65535, 0);
	luaL_argcheck(L, spec.port > 0, 1, "option 'port' (the front door's) is required");
	spec.bind = lherd_opt_string(L, 1, "bind");
	n = (int)lherd_opt_integer(L, 1, "replicas", 1, 1024, 0);
	spec.min_replicas = (int)lherd_opt_integer(L, 1, "min_replicas", 1, 1024, n ? n : 1);
	spec.max_replicas = (int)lherd_opt_integer(L, 1, "max_replicas", 1, 1024,
						   n ? n : spec.min_replicas);
	luaL_argcheck(L, n == 0 || (n == spec.min_replicas && n == spec.max_replicas), 1,
		      "option 'replicas' is a count; a range is 'min_replicas' and "
		      "'max_replicas'");
	luaL_argcheck(L, spec.min_replicas <= spec.max_replicas, 1, "option 'min_replicas' is "
		      "more than 'max_replicas'");
	spec.target = (int)lherd_opt_integer(L, 1, "target", 0, 1000000, 0);
	spec.cooldown_ms = lherd_opt_ms(L, 1, "cooldown");
	spec.replica_port = (int)lherd_opt_integer(L, 1, "replica_port", 1, 65535, 0);
	spec.replica_conns = (int)lherd_opt_integer(L, 1, "replica_conns", 0, 1000000, 0);
	spec.health = lherd_opt_string(L, 1, "health");
	spec.start_timeout_ms = lherd_opt_ms(L, 1, "start_timeout");
	spec.grace_ms = lherd_opt_ms(L, 1, "grace");
	spec.restarts = (int)lherd_opt_integer(L, 1, "restarts", 0, 1000000, 3);
	spec.gpus_per_replica = (int)lherd_opt_integer(L, 1, "gpus_per_replica", 0, 1024, 0);
	spec.where = lherd_where_option(L, 1, &spec.hosts);
	out = lherd_opt_string(L, 1, "output");
	luaL_argcheck(L, out == NULL || strcmp(out, "print") == 0 || strcmp(out, "none") == 0, 1,
		      "option 'output' must be \"print\" or \"none\"");
	events = lherd_opt_string(L, 1, "events");
	luaL_argcheck(L, events == NULL || strcmp(events, "print") == 0 ||
		      strcmp(events, "none") == 0, 1, "option 'events' must be \"print\" or "
		      "\"none\"");
	spec.output = out != NULL && strcmp(out, "none") == 0 ? no_output : herd_job_output_stdio;
	spec.output_userdata = (void *)lherd_opt_string(L, 1, "prefix");
	if (spec.output_userdata == NULL)
		spec.output_userdata = (void *)"[%h:r%r] ";
	spec.event = events != NULL && strcmp(events, "none") == 0 ? no_event : print_event;
	argv = lherd_cmd_option(L, 1, &argc);               /* stack: ..., argv */
	spec.env = lherd_env_option(L, 1, false);           /* ..., argv, env */
	spec.argv = argv;
	s = (lsvc *)lherd_new(L, &service_type, sizeof(*s), 0);
	st = herd_serve_start(&s->svc, &spec);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	shell_interrupt_add_service(s->svc);
	return 1;
}

static const luaL_Reg service_methods[] = {
	{ "status", service_status },
	{ "wait_ready", service_wait_ready },
	{ "scale", service_scale },
	{ "restart", service_restart },
	{ "stop", service_stop },
	{ "wait", service_wait },
	{ "id", service_id },
	{ "failure", service_failure },
	{ NULL, NULL }
};

static const lherd_type service_type = {
	.name = LHERD_SERVICE,
	.methods = service_methods,
	.release = service_release,
	.describe = service_describe,
};

void lherd_open_serve(lua_State *L)
{
	lherd_register(L, &service_type);
	lua_pushcfunction(L, lherd_serve);
	lua_setfield(L, -2, "serve");
}
