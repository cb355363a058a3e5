/*
 * shell/lua_comm.c - herd.comm, the Lua face of a herd_comm: a herd.Comm,
 * and herd.Request for its nonblocking operations.
 *
 *   local c = herd.comm()                      -- the job's ranks, from the environment
 *   local b = herd.buffer("float32", 1 << 20):fill(c:rank())
 *   c:allreduce(b)                             -- in place, sum
 *   c:allreduce(b, out, "max")                 -- out of place
 *   local total = c:allreduce(3.5)             -- a number, a table of numbers
 *   local all = c:allgather({host = herd.host}) -- any msgpack value, rank order
 *   local r = c:iallreduce(b); ...; r:wait()
 *
 * herd.comm() with no argument is the job's world, joined through the
 * environment as herd_comm_init_env does (herd's, torchrun's, Slurm's or
 * Open MPI's variables) on first use and the same object afterwards;
 * herd.comm{...} joins a new one: store (a herd.Store) with rank and size
 * for herd_comm_init, or none for the environment; timeout (seconds),
 * transport, algo, socket_ifname as herd_comm_opts.
 *
 * Ranks count from 0, as HERD_RANK and MPI do; roots and peers are ranks.
 * Buffers are herd.Buffer and collectives work on their memory, with no
 * copy through Lua values: an output buffer is optional, and without one
 * the operation is in place where that has a meaning (allreduce, reduce,
 * broadcast) or writes into a new buffer of the right size it returns
 * (allgather, reduce_scatter, alltoall, gather on the root).  Values in
 * rank order are Lua arrays: element 1 is rank 0's.
 *
 * Misuse raises: a wrong type, a closed object, a call with the peers
 * after c:finalize() (only close, rank, size, host, error and abort
 * remain), buffers of different dtypes, an output buffer too small, an
 * unknown reduction, a root out of range.  A failure of the communicator (a dead peer, a deadline, a
 * mismatch between ranks, an abort) returns nil, herd's message (naming
 * the rank), and the status name; the communicator is broken from then on.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

#define LHERD_COMM "herd.Comm"
#define LHERD_REQUEST "herd.Request"
#define LHERD_GRID "herd.Grid"

/* The registry key of the world communicator, herd.comm(). */
static const char world_key = 'w';

/* User value 1: what must outlive the communicator (its herd.Store, or
 * the herd.Comm it was split from, whose store it uses). */
typedef struct lcomm {
	herd_comm *comm;  /* NULL once closed */
	int children;     /* open communicators split from this one */
	bool finalized;   /* c:finalize() was called: only local calls remain */
} lcomm;

typedef struct lrequest {
	herd_comm_request *req;  /* NULL once complete */
	lherd_block *blocks[2];
} lrequest;

/* A grid (c:grid): its layout and explanation; user value 1, its groups'
 * herd.Comm objects by dimension name. */
typedef struct lgrid {
	herd_comm_grid *grid;    /* NULL once closed; holds no group */
	int rank;                /* this rank's, in the communicator it was laid on */
} lgrid;

static const lherd_type comm_type, request_type, grid_type;

/* The open communicator at arg, for what stays local (rank, size, host,
 * error, abort): allowed after finalize too. */
static herd_comm *check_local(lua_State *L, int arg)
{
	return ((lcomm *)lherd_check(L, arg, &comm_type))->comm;
}

/* The communicator at arg for a call with the peers: raises once closed,
 * and once finalized, as a closed file raises for a read. */
static herd_comm *check_comm(lua_State *L, int arg)
{
	lcomm *c = (lcomm *)lherd_check(L, arg, &comm_type);

	if (c->finalized)
		luaL_error(L, "attempt to use a finalized %s (close it; rank, size, host, error "
			   "and abort remain)", LHERD_COMM);
	return c->comm;
}

static void comm_release(lua_State *L)
{
	lcomm *c = (lcomm *)lua_touserdata(L, 1), *parent;

	shell_interrupt_remove(c->comm);
	herd_comm_free(c->comm);
	c->comm = NULL;
	lua_getiuservalue(L, 1, 1);
	parent = (lcomm *)lherd_test(L, -1, &comm_type);
	if (parent != NULL)
		parent->children--;
	lua_pop(L, 1);
}

/* c:close() -> true; raises while communicators split from c are open,
 * since they use its store. */
static int comm_close(lua_State *L)
{
	lcomm *c = (lcomm *)lherd_check(L, 1, &comm_type);

	if (c->children > 0)
		return luaL_error(L, "%d communicator%s split from this one %s open: close %s first",
				  c->children, c->children == 1 ? "" : "s",
				  c->children == 1 ? "is" : "are", c->children == 1 ? "it" : "them");
	lua_settop(L, 1);
	comm_release(L);
	lua_pushboolean(L, 1);
	return 1;
}

static void comm_describe(lua_State *L)
{
	lcomm *c = (lcomm *)lua_touserdata(L, 1);

	lua_pushfstring(L, "rank %d of %d", herd_comm_rank(c->comm), herd_comm_size(c->comm));
}

/* The value on top (nret 1) or true (nret 0), or the failure triple. */
static int result(lua_State *L, herd_status st, int nret)
{
	if (nret == 0 || st != HERD_OK)
		return lherd_result(L, st);
	return nret;
}

/* ------------------------------------------------------------ arguments */

static herd_redop check_op(lua_State *L, int arg)
{
	herd_redop op = HERD_SUM;

	if (!lua_isnoneornil(L, arg) &&
	    herd_redop_parse(luaL_checkstring(L, arg), &op) != HERD_OK)
		luaL_argerror(L, arg, lua_pushfstring(L, "unknown reduction '%s' (sum, prod, "
						      "min, max, avg)", lua_tostring(L, arg)));
	return op;
}

static int check_rank(lua_State *L, herd_comm *comm, int arg, const char *what)
{
	lua_Integer r = luaL_checkinteger(L, arg);

	if (r < 0 || r >= herd_comm_size(comm))
		luaL_argerror(L, arg, lua_pushfstring(L, "%s %I out of range (ranks 0..%d)", what,
						      r, herd_comm_size(comm) - 1));
	return (int)r;
}

/*
 * The output buffer at arg when there is one, else a new buffer of count
 * elements of send's dtype pushed on the stack (nil count: in place, send
 * itself).  Raises on a dtype that differs or an output smaller than count.
 */
static lherd_buffer *output(lua_State *L, int arg, lherd_buffer *send, size_t count,
			    bool in_place)
{
	lherd_buffer *out = arg == 0 || lua_isnoneornil(L, arg) ? NULL
							       : lherd_check_buffer(L, arg);

	if (out == NULL)
		return in_place ? send : lherd_new_buffer(L, send->dtype, count);
	if (out->dtype != send->dtype)
		luaL_argerror(L, arg, lua_pushfstring(L, "a %s buffer for %s data",
						      herd_dtype_name(out->dtype),
						      herd_dtype_name(send->dtype)));
	if (out->count < count)
		luaL_argerror(L, arg, lua_pushfstring(L, "the buffer holds %I elements; %I needed",
						      (lua_Integer)out->count, (lua_Integer)count));
	lua_pushvalue(L, arg);
	return out;
}

/* count / size, raising unless it divides. */
static size_t block_count(lua_State *L, herd_comm *comm, const lherd_buffer *b, int arg)
{
	size_t n = (size_t)herd_comm_size(comm);

	if (b->count % n != 0)
		luaL_argerror(L, arg, lua_pushfstring(L, "%I elements do not split into %d blocks",
						      (lua_Integer)b->count, (int)n));
	return b->count / n;
}

/* ------------------------------------------------ numbers and tables */

/*
 * allreduce and reduce of plain numbers: the values at arg (a number or an
 * array of numbers) in a scratch buffer, int64 when every value is an
 * integer, else float64.  Leaves the buffer on the stack.
 */
static lherd_buffer *numbers_in(lua_State *L, int arg)
{
	lua_Integer n = lua_istable(L, arg) ? luaL_len(L, arg) : 1;
	bool ints = true;
	lherd_buffer *b;

	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_istable(L, arg))
			lua_geti(L, arg, i);
		else
			lua_pushvalue(L, arg);
		if (lua_type(L, -1) != LUA_TNUMBER)
			luaL_argerror(L, arg, lua_pushfstring(L, "element %I is a %s, not a number",
							      i, luaL_typename(L, -1)));
		ints = ints && lua_isinteger(L, -1);
		lua_pop(L, 1);
	}
	b = lherd_new_buffer(L, ints ? HERD_INT64 : HERD_FLOAT64, (size_t)n);
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_istable(L, arg))
			lua_geti(L, arg, i);
		else
			lua_pushvalue(L, arg);
		lherd_store_elem(L, b, (size_t)i - 1, -1);
		lua_pop(L, 1);
	}
	return b;
}

/* Pushes the scratch buffer's values as the argument was given. */
static int numbers_out(lua_State *L, int arg, const lherd_buffer *b)
{
	if (!lua_istable(L, arg)) {
		lherd_push_elem(L, b, 0);
		return 1;
	}
	lua_createtable(L, (int)b->count, 0);
	for (size_t i = 0; i < b->count; i++) {
		lherd_push_elem(L, b, i);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

/* ------------------------------------------------------------- methods */

static int comm_rank(lua_State *L)
{
	lua_pushinteger(L, herd_comm_rank(check_local(L, 1)));
	return 1;
}

static int comm_size(lua_State *L)
{
	lua_pushinteger(L, herd_comm_size(check_local(L, 1)));
	return 1;
}

/* c:host([rank]) -> the host name of a rank (default this one). */
static int comm_host(lua_State *L)
{
	herd_comm *comm = check_local(L, 1);
	int r = lua_isnoneornil(L, 2) ? herd_comm_rank(comm) : check_rank(L, comm, 2, "rank");
	const char *host = NULL;

	(void)herd_comm_host(comm, r, &host);
	lua_pushstring(L, host);
	return 1;
}

static int comm_barrier(lua_State *L)
{
	return result(L, herd_comm_barrier(check_comm(L, 1)), 0);
}

/* c:allreduce(buf[, out][, op]) -> out (buf in place); c:allreduce(x[, op])
 * for a number or an array of numbers -> the same shape, reduced. */
static int comm_allreduce(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_test_buffer(L, 2), *recv;
	int oparg = send != NULL && lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	herd_redop op = check_op(L, oparg);
	herd_status st;

	if (send == NULL) {
		lherd_buffer *b = numbers_in(L, 2);

		st = herd_comm_allreduce(comm, b->data, b->data, b->count, b->dtype, op);
		return st != HERD_OK ? lherd_fail(L, st) : numbers_out(L, 2, b);
	}
	if (oparg == 4) {
		recv = output(L, 3, send, send->count, true);
	} else {
		recv = send;
		lua_pushvalue(L, 2);
	}
	st = herd_comm_allreduce(comm, send->data, recv->data, send->count, send->dtype, op);
	return result(L, st, 1);
}

/* c:reduce(buf[, out], op, root) -> out on the root (buf in place), and
 * true elsewhere; for numbers, the reduced value on the root, nil elsewhere. */
static int comm_reduce(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_test_buffer(L, 2), *recv;
	int oparg = send != NULL && lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	herd_redop op = check_op(L, oparg);
	int root = check_rank(L, comm, oparg + 1, "root");
	bool at_root = root == herd_comm_rank(comm);
	herd_status st;

	if (send == NULL) {
		lherd_buffer *b = numbers_in(L, 2);

		st = herd_comm_reduce(comm, b->data, b->data, b->count, b->dtype, op, root);
		if (st != HERD_OK)
			return lherd_fail(L, st);
		if (!at_root)
			return lua_pushnil(L), 1;
		return numbers_out(L, 2, b);
	}
	if (oparg == 4) {
		recv = output(L, 3, send, send->count, true);
	} else {
		recv = send;
		lua_pushvalue(L, 2);
	}
	st = herd_comm_reduce(comm, send->data, recv->data, send->count, send->dtype, op, root);
	if (st == HERD_OK && !at_root)
		lua_pushboolean(L, 1);
	return result(L, st, 1);
}

/* Moves the msgpack bytes of a value from root to every rank and pushes it. */
static int broadcast_value(lua_State *L, herd_comm *comm, int arg, int root)
{
	uint64_t len = 0;
	size_t slen = 0;
	const char *bytes = NULL;
	luaL_Buffer b;
	char *p;
	herd_status st;

	if (root == herd_comm_rank(comm)) {
		lherd_msgpack_push(L, arg);
		bytes = lua_tolstring(L, -1, &slen);
		len = slen;
	}
	st = herd_comm_broadcast(comm, &len, &len, 1, HERD_UINT64, root);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	if (bytes != NULL) {
		/* the root's copy lands in scratch memory (a Lua string is constant) */
		st = herd_comm_broadcast(comm, bytes, lua_newuserdatauv(L, slen + 1, 0), slen,
					 HERD_UINT8, root);
		if (st != HERD_OK)
			return lherd_fail(L, st);
		lua_pushvalue(L, arg);
		return 1;
	}
	if (len > HERD_STORE_VALUE_MAX * 16ull)
		return lherd_failf(L, HERD_EFORMAT, "comm:broadcast: a value of %I bytes from the root",
				   (lua_Integer)len);
	p = luaL_buffinitsize(L, &b, (size_t)len);
	st = herd_comm_broadcast(comm, NULL, p, (size_t)len, HERD_UINT8, root);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	luaL_pushresultsize(&b, (size_t)len);
	if (!lherd_msgpack_decode(L, lua_tostring(L, -1), (size_t)len))
		return lherd_failf(L, HERD_EFORMAT, "comm:broadcast: the root's value does not decode");
	return 1;
}

/* c:broadcast(buf, root) -> buf, with root's contents; c:broadcast(v, root)
 * for any msgpack value -> root's value. */
static int comm_broadcast(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *b = lherd_test_buffer(L, 2);
	int root = check_rank(L, comm, 3, "root");

	if (b == NULL)
		return broadcast_value(L, comm, 2, root);
	lua_pushvalue(L, 2);
	return result(L, herd_comm_broadcast(comm, b->data, b->data, b->count, b->dtype, root),
		      1);
}

/* Every rank's value, msgpack-encoded, in an array by rank. */
static int allgather_value(lua_State *L, herd_comm *comm, int arg)
{
	int n = herd_comm_size(comm);
	uint64_t mine, max = 0, *lens;
	size_t slen;
	const char *bytes;
	char *pad, *all;
	herd_status st;

	lherd_msgpack_push(L, arg);
	bytes = lua_tolstring(L, -1, &slen);
	mine = slen;
	lens = (uint64_t *)lua_newuserdatauv(L, (size_t)n * sizeof(*lens), 0);
	st = herd_comm_allgather(comm, &mine, lens, 1, HERD_UINT64);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	for (int i = 0; i < n; i++)
		max = lens[i] > max ? lens[i] : max;
	if (max > HERD_STORE_VALUE_MAX)
		return lherd_failf(L, HERD_EFORMAT, "comm:allgather: a value of %I bytes (at most %d)",
				   (lua_Integer)max, (int)HERD_STORE_VALUE_MAX);
	pad = (char *)lua_newuserdatauv(L, (size_t)max + 1, 0);
	memcpy(pad, bytes, slen);
	all = (char *)lua_newuserdatauv(L, (size_t)n * (size_t)max + 1, 0);
	st = herd_comm_allgather(comm, pad, all, (size_t)max, HERD_UINT8);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		if (!lherd_msgpack_decode(L, all + (size_t)i * max, (size_t)lens[i]))
			return lherd_failf(L, HERD_EFORMAT, "comm:allgather: rank %d's value does not "
					   "decode", i);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

/* c:allgather(buf[, out]) -> out (size * #buf elements, rank order);
 * c:allgather(v) for any msgpack value -> an array of every rank's value. */
static int comm_allgather(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_test_buffer(L, 2), *recv;

	if (send == NULL)
		return allgather_value(L, comm, 2);
	recv = output(L, 3, send, send->count * (size_t)herd_comm_size(comm), false);
	return result(L, herd_comm_allgather(comm, send->data, recv->data, send->count,
					     send->dtype), 1);
}

/* c:reduce_scatter(buf[, out][, op]) -> out: this rank's block of the reduction. */
static int comm_reduce_scatter(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	int oparg = lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	herd_redop op = check_op(L, oparg);
	size_t count = block_count(L, comm, send, 2);
	lherd_buffer *recv = output(L, oparg == 4 ? 3 : 0, send, count, false);

	return result(L, herd_comm_reduce_scatter(comm, send->data, recv->data, count,
						  send->dtype, op), 1);
}

/* c:alltoall(buf[, out]) -> out: block j of rank i lands in block i of rank j. */
static int comm_alltoall(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	size_t count = block_count(L, comm, send, 2);
	lherd_buffer *recv = output(L, 3, send, send->count, false);

	return result(L, herd_comm_alltoall(comm, send->data, recv->data, count, send->dtype), 1);
}

/* c:gather(buf[, out], root) -> out on the root (size * #buf), true elsewhere. */
static int comm_gather(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2), *recv = NULL;
	int rootarg = lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	int root = check_rank(L, comm, rootarg, "root");
	herd_status st;

	if (root == herd_comm_rank(comm))
		recv = output(L, rootarg == 4 ? 3 : 0, send,
			      send->count * (size_t)herd_comm_size(comm), false);
	else
		lua_pushboolean(L, 1);
	st = herd_comm_gather(comm, send->data, recv ? recv->data : NULL, send->count,
			      send->dtype, root);
	return result(L, st, 1);
}

/* c:scatter(buf or nil, out, root) -> out: block `rank` of root's buf. */
static int comm_scatter(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *recv = lherd_check_buffer(L, 3), *send = NULL;
	int root = check_rank(L, comm, 4, "root");

	if (root == herd_comm_rank(comm)) {
		send = lherd_check_buffer(L, 2);
		if (send->dtype != recv->dtype || send->count < recv->count * (size_t)herd_comm_size(comm))
			return luaL_argerror(L, 2, "the root's buffer must hold size * #out elements "
					     "of out's dtype");
	}
	lua_pushvalue(L, 3);
	return result(L, herd_comm_scatter(comm, send ? send->data : NULL, recv->data,
					   recv->count, recv->dtype, root), 1);
}

/* c:send(buf or value, peer) -> true.  A value that is not a buffer goes
 * as its msgpack bytes, for c:recv(peer). */
static int comm_send(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *b = lherd_test_buffer(L, 2);
	int peer = check_rank(L, comm, 3, "peer");
	uint64_t len;
	size_t slen;
	const char *bytes;
	herd_status st;

	if (b != NULL)
		return result(L, herd_comm_send(comm, b->data, b->count, b->dtype, peer), 0);
	lherd_msgpack_push(L, 2);
	bytes = lua_tolstring(L, -1, &slen);
	len = slen;
	st = herd_comm_send(comm, &len, 1, HERD_UINT64, peer);
	if (st == HERD_OK)
		st = herd_comm_send(comm, bytes, slen, HERD_UINT8, peer);
	return result(L, st, 0);
}

/* c:recv(buf, peer) -> buf, filled; c:recv(peer) -> the value peer sent. */
static int comm_recv(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *b = lherd_test_buffer(L, 2);
	uint64_t len;
	luaL_Buffer lb;
	char *p;
	herd_status st;
	int peer;

	if (b != NULL) {
		peer = check_rank(L, comm, 3, "peer");
		lua_pushvalue(L, 2);
		return result(L, herd_comm_recv(comm, b->data, b->count, b->dtype, peer), 1);
	}
	peer = check_rank(L, comm, 2, "peer");
	st = herd_comm_recv(comm, &len, 1, HERD_UINT64, peer);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	if (len > HERD_STORE_VALUE_MAX * 16ull)
		return lherd_failf(L, HERD_EFORMAT, "comm:recv: a value of %I bytes from rank %d",
				   (lua_Integer)len, peer);
	p = luaL_buffinitsize(L, &lb, (size_t)len);
	st = herd_comm_recv(comm, p, (size_t)len, HERD_UINT8, peer);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	luaL_pushresultsize(&lb, (size_t)len);
	if (!lherd_msgpack_decode(L, lua_tostring(L, -1), (size_t)len))
		return lherd_failf(L, HERD_EFORMAT, "comm:recv: rank %d's value does not decode", peer);
	return 1;
}

/* c:split(color[, key]) -> a new herd.Comm of the ranks of the same color,
 * ordered by key then rank; nil for a color of nil. */
static int comm_split(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	int color = lua_isnoneornil(L, 2) ? HERD_COMM_SPLIT_NONE
					  : (int)luaL_checkinteger(L, 2);
	int key = (int)luaL_optinteger(L, 3, herd_comm_rank(comm));
	herd_comm **slot;
	herd_status st;

	luaL_argcheck(L, lua_isnoneornil(L, 2) || color >= 0, 2, "a color of 0 or more");
	slot = &((lcomm *)lherd_new(L, &comm_type, sizeof(lcomm), 1))->comm;
	st = herd_comm_split(slot, comm, color, key);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	if (*slot == NULL)
		return lua_pushnil(L), 1;
	shell_interrupt_add_comm(*slot);
	lua_pushvalue(L, 1);
	lua_setiuservalue(L, -2, 1);
	((lcomm *)lua_touserdata(L, 1))->children++;
	return 1;
}

/* The dimensions of c:grid's table into dims, and its order. */
static size_t grid_dims(lua_State *L, int arg, herd_grid_dim *dims, const char **order)
{
	size_t n = 0;

	luaL_checktype(L, arg, LUA_TTABLE);
	*order = NULL;
	lua_pushnil(L);
	while (lua_next(L, arg) != 0) {
		const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
		lua_Integer size;
		int isint;

		if (name == NULL)
			luaL_argerror(L, arg, "a grid's keys are dimension names (tp = 4) and order");
		if (strcmp(name, "order") == 0) {
			if (lua_type(L, -1) != LUA_TSTRING)
				luaL_argerror(L, arg, "order is a string of names, innermost first "
					      "(\"tp-dp-pp\")");
			*order = lua_tostring(L, -1);   /* a string of the table: anchored there */
			lua_pop(L, 1);
			continue;
		}
		size = lua_tointegerx(L, -1, &isint);
		if (!isint || strlen(name) >= HERD_GRID_NAME_MAX)
			luaL_argerror(L, arg, lua_pushfstring(L, "%s = %s: a dimension is a short "
				      "name and a whole number", name, luaL_typename(L, -1)));
		if (n == HERD_GRID_MAX_DIMS)
			luaL_argerror(L, arg, lua_pushfstring(L, "more than %d dimensions",
							      HERD_GRID_MAX_DIMS));
		snprintf(dims[n].name, sizeof(dims[n].name), "%s", name);
		dims[n++].size = size < INT32_MIN ? INT32_MIN : size > INT32_MAX ? INT32_MAX
										 : (int)size;
		lua_pop(L, 1);
	}
	return n;
}

/* c:grid{tp = 4, pp = 2[, order = "tp-cp-ep-dp-pp"]} -> a herd.Grid, its
 * groups herd.Comm objects split from c; the failure triple on a grid that
 * does not fit or differs between ranks (on every rank). */
static int comm_grid(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	herd_grid_dim dims[HERD_GRID_MAX_DIMS];
	const char *order;
	size_t n = grid_dims(L, 2, dims, &order);
	const herd_grid *layout;
	lgrid *g;
	herd_status st;

	g = (lgrid *)lherd_new(L, &grid_type, sizeof(lgrid), 1);
	g->rank = herd_comm_rank(comm);
	st = herd_comm_grid_create(&g->grid, comm, dims, n, order);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	layout = herd_comm_grid_layout(g->grid);
	lua_createtable(L, 0, (int)herd_grid_ndims(layout));
	for (size_t d = 0; d < herd_grid_ndims(layout); d++) {
		const char *name = herd_grid_dim_at(layout, d)->name;
		lcomm *c = (lcomm *)lherd_new(L, &comm_type, sizeof(lcomm), 1);

		herd_comm_grid_take(g->grid, name, &c->comm);
		shell_interrupt_add_comm(c->comm);
		lua_pushvalue(L, 1);
		lua_setiuservalue(L, -2, 1);
		((lcomm *)lua_touserdata(L, 1))->children++;
		lua_setfield(L, -2, name);
	}
	lua_setiuservalue(L, -2, 1);
	return 1;
}

/* c:finalize() -> true, or the failure triple; either way only close and
 * the local calls remain (a collective after it raises). */
static int comm_finalize(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);

	((lcomm *)lua_touserdata(L, 1))->finalized = true;
	return result(L, herd_comm_finalize(comm), 0);
}

/* c:abort(): pending and later calls, here and on the peers, fail at once. */
static int comm_abort(lua_State *L)
{
	herd_comm_abort(check_local(L, 1));
	return 0;
}

/* c:error() -> nil while the communicator works, else its message and status. */
static int comm_error(lua_State *L)
{
	herd_status st = herd_comm_async_error(check_local(L, 1));

	if (st == HERD_OK)
		return lua_pushnil(L), 1;
	lherd_fail(L, st);
	lua_remove(L, -3);
	return 2;
}

/* ----------------------------------------------------------- requests */

static void request_release(lua_State *L)
{
	lrequest *r = (lrequest *)lua_touserdata(L, 1);

	/* A request dropped unfinished still owns memory the operation writes:
	 * wait for it (within the communicator's deadline) before letting go. */
	if (r->req != NULL)
		(void)herd_comm_request_wait(r->req);
	r->req = NULL;
	for (int i = 0; i < 2; i++) {
		lherd_block_unref(r->blocks[i]);
		r->blocks[i] = NULL;
	}
}

/* The outcome of a finished request: its result (user value 1), or failure. */
static int request_done(lua_State *L, lrequest *r, herd_status st)
{
	r->req = NULL;
	for (int i = 0; i < 2; i++) {
		lherd_block_unref(r->blocks[i]);
		r->blocks[i] = NULL;
	}
	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_getiuservalue(L, 1, 1);
	return 1;
}

/* r:wait() -> the operation's result (its output buffer, or true), or nil, msg, status. */
static int request_wait(lua_State *L)
{
	lrequest *r = (lrequest *)lherd_check(L, 1, &request_type);

	return request_done(L, r, herd_comm_request_wait(r->req));
}

/* r:test() -> false while it runs; then as r:wait(). */
static int request_test(lua_State *L)
{
	lrequest *r = (lrequest *)lherd_check(L, 1, &request_type);
	bool done = false;
	herd_status st = herd_comm_request_test(r->req, &done);

	if (!done && st == HERD_OK)
		return lua_pushboolean(L, 0), 1;
	return request_done(L, r, st);
}

/* What a nonblocking call needs besides its buffers. */
struct ispec {
	herd_redop op;
	int root;
	size_t count;
};

typedef herd_status (*istart_fn)(herd_comm *comm, lherd_buffer *send, lherd_buffer *recv,
				 const struct ispec *x, herd_comm_request **req);

/*
 * Starts a nonblocking operation: pushes a request that holds the blocks
 * of send and recv until it completes; its result is the value at res.
 */
static int start(lua_State *L, herd_comm *comm, lherd_buffer *send, lherd_buffer *recv,
		 int res, istart_fn st_fn, const struct ispec *s)
{
	lrequest *r;
	herd_status st;

	res = lua_absindex(L, res);
	r = (lrequest *)lherd_new(L, &request_type, sizeof(*r), 1);
	lua_pushvalue(L, res);
	lua_setiuservalue(L, -2, 1);
	st = st_fn(comm, send, recv, s, &r->req);
	if (st != HERD_OK)
		return lherd_fail(L, st);
	if (send != NULL)
		r->blocks[0] = lherd_block_ref(send->block);
	if (recv != NULL && recv != send)
		r->blocks[1] = lherd_block_ref(recv->block);
	return 1;
}

static herd_status i_allreduce(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
			       const struct ispec *x, herd_comm_request **q)
{
	return herd_comm_iallreduce(c, s->data, r->data, s->count, s->dtype, x->op, q);
}

static herd_status i_reduce(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
			    const struct ispec *x, herd_comm_request **q)
{
	return herd_comm_ireduce(c, s->data, r->data, s->count, s->dtype, x->op, x->root, q);
}

static herd_status i_broadcast(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
			       const struct ispec *x, herd_comm_request **q)
{
	(void)r;
	return herd_comm_ibroadcast(c, s->data, s->data, s->count, s->dtype, x->root, q);
}

static herd_status i_allgather(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
			       const struct ispec *x, herd_comm_request **q)
{
	(void)x;
	return herd_comm_iallgather(c, s->data, r->data, s->count, s->dtype, q);
}

static herd_status i_reduce_scatter(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
				    const struct ispec *x, herd_comm_request **q)
{
	return herd_comm_ireduce_scatter(c, s->data, r->data, x->count, s->dtype, x->op, q);
}

static herd_status i_alltoall(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
			      const struct ispec *x, herd_comm_request **q)
{
	return herd_comm_ialltoall(c, s->data, r->data, x->count, s->dtype, q);
}

static herd_status i_barrier(herd_comm *c, lherd_buffer *s, lherd_buffer *r,
			     const struct ispec *x, herd_comm_request **q)
{
	(void)s, (void)r, (void)x;
	return herd_comm_ibarrier(c, q);
}

/* c:iallreduce(buf[, out][, op]) -> a herd.Request whose wait() gives out. */
static int comm_iallreduce(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	int oparg = lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	struct ispec x = { check_op(L, oparg), 0, 0 };
	lherd_buffer *recv = oparg == 4 ? output(L, 3, send, send->count, true) : send;

	return start(L, comm, send, recv, oparg == 4 ? 3 : 2, i_allreduce, &x);
}

/* c:ireduce(buf[, out], op, root) */
static int comm_ireduce(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	int oparg = lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	struct ispec x = { check_op(L, oparg), check_rank(L, comm, oparg + 1, "root"), 0 };
	lherd_buffer *recv = oparg == 4 ? output(L, 3, send, send->count, true) : send;

	return start(L, comm, send, recv, oparg == 4 ? 3 : 2, i_reduce, &x);
}

/* c:ibroadcast(buf, root) */
static int comm_ibroadcast(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *b = lherd_check_buffer(L, 2);
	struct ispec x = { HERD_SUM, check_rank(L, comm, 3, "root"), 0 };

	return start(L, comm, b, b, 2, i_broadcast, &x);
}

/* c:iallgather(buf[, out]) */
static int comm_iallgather(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	struct ispec x = { HERD_SUM, 0, 0 };
	lherd_buffer *recv = output(L, 3, send, send->count * (size_t)herd_comm_size(comm), false);

	return start(L, comm, send, recv, -1, i_allgather, &x);
}

/* c:ireduce_scatter(buf[, out][, op]) */
static int comm_ireduce_scatter(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	int oparg = lherd_test_buffer(L, 3) != NULL ? 4 : 3;
	struct ispec x = { check_op(L, oparg), 0, block_count(L, comm, send, 2) };
	lherd_buffer *recv = output(L, oparg == 4 ? 3 : 0, send, x.count, false);

	return start(L, comm, send, recv, -1, i_reduce_scatter, &x);
}

/* c:ialltoall(buf[, out]) */
static int comm_ialltoall(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	lherd_buffer *send = lherd_check_buffer(L, 2);
	struct ispec x = { HERD_SUM, 0, block_count(L, comm, send, 2) };
	lherd_buffer *recv = output(L, 3, send, send->count, false);

	return start(L, comm, send, recv, -1, i_alltoall, &x);
}

/* c:ibarrier() */
static int comm_ibarrier(lua_State *L)
{
	herd_comm *comm = check_comm(L, 1);
	struct ispec x = { HERD_SUM, 0, 0 };

	lua_pushboolean(L, 1);
	return start(L, comm, NULL, NULL, -1, i_barrier, &x);
}

/* ------------------------------------------------------------ herd.comm */

static const char *const comm_options[] = {
	"store", "rank", "size", "timeout", "transport", "algo", "socket_ifname", NULL
};

/* herd.comm([opts]) -> a herd.Comm, or nil, msg, status. */
static int lherd_comm(lua_State *L)
{
	herd_comm_opts o = HERD_COMM_OPTS_INIT;
	herd_store *store = NULL;
	lua_Integer rank = -1, size = -1;
	lcomm *c;
	herd_status st;

	if (lua_isnoneornil(L, 1)) {
		if (lua_rawgetp(L, LUA_REGISTRYINDEX, &world_key) != LUA_TNIL &&
		    ((lcomm *)lua_touserdata(L, -1))->comm != NULL)
			return 1;
		lua_pop(L, 1);
		c = (lcomm *)lherd_new(L, &comm_type, sizeof(*c), 1);
		st = herd_comm_init_env(&c->comm, NULL);
		if (st != HERD_OK)
			return lherd_fail(L, st);
		shell_interrupt_add_comm(c->comm);
		lua_pushvalue(L, -1);
		lua_rawsetp(L, LUA_REGISTRYINDEX, &world_key);
		return 1;
	}
	luaL_checktype(L, 1, LUA_TTABLE);
	lherd_check_keys(L, 1, comm_options);
	o.transport = lherd_opt_string(L, 1, "transport");
	o.algo = lherd_opt_string(L, 1, "algo");
	o.socket_ifname = lherd_opt_string(L, 1, "socket_ifname");
	o.timeout_ms = lherd_opt_ms(L, 1, "timeout");
	if (lua_getfield(L, 1, "store") != LUA_TNIL) {
		store = lherd_check_store(L, -1);
		size = lherd_opt_integer(L, 1, "size", 1, INT32_MAX, 0);
		luaL_argcheck(L, size >= 1, 1, "options 'rank' and 'size' come with 'store'");
		rank = lherd_opt_integer(L, 1, "rank", 0, size - 1, -1);
		luaL_argcheck(L, rank >= 0, 1, "options 'rank' and 'size' come with 'store'");
	}
	c = (lcomm *)lherd_new(L, &comm_type, sizeof(*c), 1);
	if (store != NULL) {
		/* the store object stays alive as long as the communicator */
		lua_pushvalue(L, -2);
		lua_setiuservalue(L, -2, 1);
		st = herd_comm_init(&c->comm, store, (int)rank, (int)size, &o);
	} else {
		st = herd_comm_init_env(&c->comm, &o);
	}
	if (st != HERD_OK)
		return lherd_fail(L, st);
	shell_interrupt_add_comm(c->comm);
	return 1;
}

static const luaL_Reg comm_methods[] = {
	{ "rank", comm_rank },
	{ "size", comm_size },
	{ "host", comm_host },
	{ "barrier", comm_barrier },
	{ "allreduce", comm_allreduce },
	{ "reduce", comm_reduce },
	{ "broadcast", comm_broadcast },
	{ "allgather", comm_allgather },
	{ "reduce_scatter", comm_reduce_scatter },
	{ "alltoall", comm_alltoall },
	{ "gather", comm_gather },
	{ "scatter", comm_scatter },
	{ "send", comm_send },
	{ "recv", comm_recv },
	{ "split", comm_split },
	{ "grid", comm_grid },
	{ "iallreduce", comm_iallreduce },
	{ "ireduce", comm_ireduce },
	{ "ibroadcast", comm_ibroadcast },
	{ "iallgather", comm_iallgather },
	{ "ireduce_scatter", comm_ireduce_scatter },
	{ "ialltoall", comm_ialltoall },
	{ "ibarrier", comm_ibarrier },
	{ "finalize", comm_finalize },
	{ "abort", comm_abort },
	{ "error", comm_error },
	{ "close", comm_close },
	{ NULL, NULL }
};

static const luaL_Reg request_methods[] = {
	{ "wait", request_wait },
	{ "test", request_test },
	{ NULL, NULL }
};

/* ---------------------------------------------------------------- grids */

static const herd_grid *check_grid(lua_State *L, int arg)
{
	return herd_comm_grid_layout(((lgrid *)lherd_check(L, arg, &grid_type))->grid);
}

/* The dimension named at arg of g. */
static size_t grid_dim(lua_State *L, const herd_grid *g, int arg)
{
	size_t d;

	if (herd_grid_find(g, luaL_checkstring(L, arg), &d) != HERD_OK)
		luaL_argerror(L, arg, herd_last_error());
	return d;
}

/* A rank of g at arg, default this one's. */
static int grid_rank_arg(lua_State *L, const herd_grid *g, int arg)
{
	lua_Integer r = luaL_optinteger(L, arg, ((lgrid *)lua_touserdata(L, 1))->rank);

	luaL_argcheck(L, r >= 0 && r < herd_grid_size(g), arg, "a rank of the grid");
	return (int)r;
}

/* g:group(name) -> the herd.Comm of this rank's group along name; nil and
 * the message when the grid has no such dimension. */
static int grid_group(lua_State *L)
{
	const herd_grid *g = check_grid(L, 1);
	size_t d;

	if (herd_grid_find(g, luaL_checkstring(L, 2), &d) != HERD_OK)
		return lherd_fail(L, HERD_ENOTFOUND);
	lua_getiuservalue(L, 1, 1);
	lua_getfield(L, -1, lua_tostring(L, 2));
	return 1;
}

/* g:coords([rank]) -> {tp = 0, dp = 1, ...}: a rank's coordinates. */
static int grid_coords(lua_State *L)
{
	const herd_grid *g = check_grid(L, 1);
	int coords[HERD_GRID_MAX_DIMS];

	herd_grid_coords(g, grid_rank_arg(L, g, 2), coords);
	lua_createtable(L, 0, (int)herd_grid_ndims(g));
	for (size_t d = 0; d < herd_grid_ndims(g); d++) {
		lua_pushinteger(L, coords[d]);
		lua_setfield(L, -2, herd_grid_dim_at(g, d)->name);
	}
	return 1;
}

/* g:ranks(name[, rank]) -> the ranks of a rank's group along name, by coordinate. */
static int grid_ranks(lua_State *L)
{
	const herd_grid *g = check_grid(L, 1);
	size_t d = grid_dim(L, g, 2);
	int size = herd_grid_dim_at(g, d)->size, ranks[1 << 12];

	luaL_argcheck(L, size <= (int)(sizeof(ranks) / sizeof(ranks[0])), 2, "a group too large");
	herd_grid_group(g, d, grid_rank_arg(L, g, 3), ranks, NULL);
	lua_createtable(L, size, 0);
	for (int k = 0; k < size; k++) {
		lua_pushinteger(L, ranks[k]);
		lua_rawseti(L, -2, k + 1);
	}
	return 1;
}

/* g:dims() -> {{name = "tp", size = 4}, ...}, innermost first. */
static int grid_dims_list(lua_State *L)
{
	const herd_grid *g = check_grid(L, 1);

	lua_createtable(L, (int)herd_grid_ndims(g), 0);
	for (size_t d = 0; d < herd_grid_ndims(g); d++) {
		lua_createtable(L, 0, 2);
		lua_pushstring(L, herd_grid_dim_at(g, d)->name);
		lua_setfield(L, -2, "name");
		lua_pushinteger(L, herd_grid_dim_at(g, d)->size);
		lua_setfield(L, -2, "size");
		lua_rawseti(L, -2, (lua_Integer)d + 1);
	}
	return 1;
}

/* g:explain() -> the grid's groups, links and warnings as text. */
static int grid_explain(lua_State *L)
{
	lgrid *g = (lgrid *)lherd_check(L, 1, &grid_type);

	lua_pushstring(L, herd_comm_grid_explain(g->grid));
	return 1;
}

static void grid_release(lua_State *L)
{
	lgrid *g = (lgrid *)lua_touserdata(L, 1);

	herd_comm_grid_free(g->grid);
	g->grid = NULL;
}

static void grid_describe(lua_State *L)
{
	const herd_grid *g = herd_comm_grid_layout(((lgrid *)lua_touserdata(L, 1))->grid);
	luaL_Buffer b;

	luaL_buffinit(L, &b);
	for (size_t d = 0; d < herd_grid_ndims(g); d++) {
		lua_pushfstring(L, "%s%s=%d", d ? "," : "", herd_grid_dim_at(g, d)->name,
				herd_grid_dim_at(g, d)->size);
		luaL_addvalue(&b);
	}
	luaL_pushresult(&b);
}

static const luaL_Reg grid_methods[] = {
	{ "group", grid_group },
	{ "coords", grid_coords },
	{ "ranks", grid_ranks },
	{ "dims", grid_dims_list },
	{ "explain", grid_explain },
	{ NULL, NULL }
};

static const lherd_type grid_type = {
	.name = LHERD_GRID,
	.methods = grid_methods,
	.release = grid_release,
	.describe = grid_describe,
};

static const lherd_type comm_type = {
	.name = LHERD_COMM,
	.methods = comm_methods,
	.release = comm_release,
	.describe = comm_describe,
};

static const lherd_type request_type = {
	.name = LHERD_REQUEST,
	.methods = request_methods,
	.release = request_release,
};

herd_comm *lherd_check_comm(lua_State *L, int arg)
{
	return check_comm(L, arg);
}

herd_status lherd_comm_finish(lua_State *L)
{
	lcomm *c;
	herd_status st = HERD_OK;

	if (lua_rawgetp(L, LUA_REGISTRYINDEX, &world_key) != LUA_TNIL) {
		c = (lcomm *)lua_touserdata(L, -1);
		if (c->comm != NULL && !c->finalized && herd_comm_async_error(c->comm) == HERD_OK)
			st = herd_comm_finalize(c->comm);
	}
	lua_pop(L, 1);
	return st;
}

void lherd_open_comm(lua_State *L)
{
	lherd_register(L, &comm_type);
	lherd_register(L, &request_type);
	lherd_register(L, &grid_type);
	lua_pushcfunction(L, lherd_comm);
	lua_setfield(L, -2, "comm");
}
