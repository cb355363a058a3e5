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

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

#include "herd.h"

/*
 * A type of the bindings (shell/lua_object.c).  Its objects are full
 * userdata whose first member is a pointer to what they hold, NULL once
 * closed.  lherd_register builds the metatable once per state:
 *   - __index over the methods, then the field getters (item for a
 *     number key);
 *   - with release: obj:close() (true; raises when already closed, unless
 *     methods has a close of its own), __close and __gc, which all call
 *     release once, with the object at index 1;
 *   - __tostring: "herd.Job (closed)", or "herd.Job (TEXT) (0x...)" where
 *     describe pushes TEXT for an open object at index 1;
 *   - __members: every method and field name with "method" or "field",
 *     which the REPL reads for completion and printing;
 *   - meta: any other metamethods (__len, __eq, ...), or a __tostring of
 *     the type's own in place of the generic one (herd.Buffer's values).
 */
typedef struct lherd_type {
	const char *name;                 /* "herd.Job": the metatable's name */
	const luaL_Reg *methods;          /* may be NULL */
	void (*fields)(lua_State *L);     /* pushes the getters table; may be NULL */
	void (*release)(lua_State *L);    /* frees what the object holds; may be NULL */
	void (*describe)(lua_State *L);   /* pushes a short text; may be NULL */
	const luaL_Reg *meta;             /* may be NULL */
	lua_CFunction item;               /* obj[number], called as (obj, key); may be NULL */
} lherd_type;

void lherd_register(lua_State *L, const lherd_type *t);

/* Pushes a zeroed object of type t (size bytes, nuv user values) and
 * returns it: the safe state before it holds anything (liolib's newprefile). */
void *lherd_new(lua_State *L, const lherd_type *t, size_t size, int nuv);

/* The object at arg, raising unless it is of type t (lherd_to), or unless
 * it is also open (lherd_check: "attempt to use a closed herd.Job");
 * lherd_test gives NULL for a value of another type. */
void *lherd_test(lua_State *L, int arg, const lherd_type *t);
void *lherd_to(lua_State *L, int arg, const lherd_type *t);
void *lherd_check(lua_State *L, int arg, const lherd_type *t);

/*
 * Pushes a holder of memory libherd hands over and returns its slot: the
 * memory, once stored there, is freed with release (NULL: herd_free) when
 * the holder is collected or lherd_drop(L, idx) is called, so that an error
 * raised while it is copied into Lua values cannot leak it.
 */
void **lherd_hold(lua_State *L, void (*release)(void *));
void lherd_open_object(lua_State *L); /* registers the holders' type */
void lherd_drop(lua_State *L, int idx);

/*
 * herd.Buffer (shell/lua_buffer.c): count elements of dtype at data, in a
 * block of memory shared with its views and with the nonblocking
 * operations that use it (each holds a reference; the last frees it).
 */
#define LHERD_BUFFER "herd.Buffer"

typedef struct lherd_block lherd_block;

typedef struct lherd_buffer {
	void *data;          /* NULL once closed */
	size_t count;
	herd_dtype dtype;
	lherd_block *block;
} lherd_buffer;

lherd_block *lherd_block_ref(lherd_block *b);
void lherd_block_unref(lherd_block *b);

/* Pushes a new zeroed buffer. */
lherd_buffer *lherd_new_buffer(lua_State *L, herd_dtype dtype, size_t count);

/* The open buffer at arg, raising otherwise; lherd_test_buffer gives NULL
 * for a value that is not a buffer. */
lherd_buffer *lherd_check_buffer(lua_State *L, int arg);
lherd_buffer *lherd_test_buffer(lua_State *L, int arg);

/* A dtype name argument ("float32", "bf16", ...), raising when unknown. */
herd_dtype lherd_check_dtype(lua_State *L, int arg);

/* Pushes element i (0-based); stores the number at idx into element i,
 * raising when it is not a number or does not fit the dtype. */
void lherd_push_elem(lua_State *L, const lherd_buffer *b, size_t i);
void lherd_store_elem(lua_State *L, lherd_buffer *b, size_t i, int idx);

/* Adds herd.buffer to the herd table on top of the stack. */
void lherd_open_buffer(lua_State *L);

/*
 * Lua values as msgpack (shell/lua_msgpack.c): lherd_msgpack_push pushes
 * the encoding of the value at idx (raising on what cannot be encoded);
 * lherd_msgpack_decode pushes the value of data and returns 1, or pushes
 * nothing and returns 0 when data is not exactly one msgpack value.
 */
void lherd_msgpack_push(lua_State *L, int idx);
int lherd_msgpack_decode(lua_State *L, const char *data, size_t len);
void lherd_open_msgpack(lua_State *L);

/* herd.store (lua_store.c) and herd.comm (lua_comm.c), added to the herd
 * table on top of the stack; the open store or communicator at arg. */
void lherd_open_store(lua_State *L);
void lherd_open_comm(lua_State *L);
herd_store *lherd_check_store(lua_State *L, int arg);
herd_comm *lherd_check_comm(lua_State *L, int arg);

/*
 * The end of a script that ran to its end: the job's world communicator
 * (herd.comm()), when it was opened and still works, is finalized, so that
 * no rank leaves while a peer still exchanges with it.  HERD_OK, or the
 * failure (its message in herd_last_error()).
 */
herd_status lherd_comm_finish(lua_State *L);

/* herd.launch, herd.emit and herd.jobs (lua_job.c); Ctrl-C stops the session's jobs
 * but those launched with detach = true (shell/interrupt.c). */
void lherd_open_job(lua_State *L);
/* herd.serve (shell/lua_serve.c). */
void lherd_open_serve(lua_State *L);
/*
 * The options of herd.launch that herd.serve shares (shell/lua_job.c):
 * cmd (an array of strings or one string) as a NULL-terminated array
 * pushed on the stack (*argc its length), and env ({NAME = value} or
 * {"NAME=value"}) likewise, with HERD_EMIT=1 when emit.
 */
const char **lherd_cmd_option(lua_State *L, int arg, int *argc);
/* hosts (a hostlist) | hostfile | slurm = true, exclusive: where, and in
 * *hosts the hostlist or hostfile (NULL for this node and Slurm). */
herd_job_where lherd_where_option(lua_State *L, int arg, const char **hosts);
const char **lherd_env_option(lua_State *L, int arg, bool emit);

/*
 * herd.json (lua_json.c): lherd_push_json pushes a jansson value (a json_t,
 * as void * so that this header needs no jansson) as Lua values;
 * lherd_json_release is json_decref for lherd_hold.
 */
void lherd_open_json(lua_State *L);
void lherd_push_json(lua_State *L, const void *value);
void *lherd_json_parse(const char *text, size_t len);  /* a json_t, or NULL */
void lherd_json_release(void *p);

/* Adds herd.bench (lua_bench.c) to the herd table on top of the stack. */
void lherd_open_bench(lua_State *L);

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

/*
 * Whether a checkpoint was closed by __close or the collector (at the end
 * of the state, too) while a save it had in flight failed: said on stderr
 * then, and the program's exit status is 1 instead of 0.
 */
bool lherd_ckpt_lost(void);

/* Adds herd.health to the herd table on top of the stack (lua_health.c). */
void lherd_open_health(lua_State *L);

/* Creates the herd.Telemetry metatable and adds herd.telemetry (sample,
 * sampler) to the herd table on top of the stack (lua_telemetry.c). */
void lherd_open_telemetry(lua_State *L);

/* Adds herd.hostlist (expand, compress) to the herd table on top of the
 * stack (lua_hostlist.c). */
void lherd_open_hostlist(lua_State *L);

/*
 * Adds herd.telemetry (sample, sampler, watch) to the herd table on top of
 * the stack, with the herd.Telemetry and herd.TelemetryWatch metatables
 * (lua_telemetry.c).  lherd_push_telemetry pushes a sample as a table with
 * the keys of the packed sample (herd_telemetry_pack), "v" aside.
 */
void lherd_open_telemetry(lua_State *L);
void lherd_push_telemetry(lua_State *L, const herd_telemetry_sample *s);

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

/*
 * Option name of the options table at arg, raising with the option's name
 * when it has another type or is out of range: a string (NULL when
 * absent), a whole number in [min, max] (def when absent), seconds more
 * than 0 as milliseconds (0 when absent).
 */
const char *lherd_opt_string(lua_State *L, int arg, const char *name);
lua_Integer lherd_opt_integer(lua_State *L, int arg, const char *name, lua_Integer min,
			      lua_Integer max, lua_Integer def);
int lherd_opt_ms(lua_State *L, int arg, const char *name);

/* A timeout argument in seconds (0 or more) as ms; absent (none or nil)
 * when the argument is not given. */
int lherd_check_seconds(lua_State *L, int arg, int absent);

/* CLOCK_MONOTONIC in ms, for the deadlines of waits in the bindings. */
int64_t lherd_now_ms(void);

/* Whether the table at idx is an array: its keys exactly 1..*n (an empty
 * table is one), as msgpack and JSON encode it. */
bool lherd_is_array(lua_State *L, int idx, lua_Integer *n);

/* Pushes the status's failure triple: nil, herd_last_error(), status name. */
int lherd_fail(lua_State *L, herd_status status);

/* The failure triple with a message of its own: for a runtime failure that
 * no libherd call reported (a peer's value that will not decode). */
int lherd_failf(lua_State *L, herd_status status, const char *fmt, ...);

/* true for HERD_OK, else the failure triple: what a call that returns
 * nothing else gives Lua. */
int lherd_result(lua_State *L, herd_status st);

/*
 * Raises an argument error on a key of the options table at arg that is not
 * in known (NULL-terminated); the message lists the known keys.
 */
void lherd_check_keys(lua_State *L, int arg, const char *const *known);

#endif /* HERD_SHELL_LUA_HERD_H */
