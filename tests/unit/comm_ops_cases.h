/*
 * tests/unit/comm_ops_cases.h - the public collectives checked end to end
 * with real processes (comm_harness.h): one communicator per session (a
 * size, a transport, an algorithm), and inside it every operation, element
 * type and reduction, in place and out of place, against references in
 * double precision.
 *
 * Inputs are small integers (products of 1, 2 and -1), so every float sum
 * and product is exact whatever the order of the reduction, and the only
 * rounding is the one the type itself does (float16/bfloat16 and AVG).
 */
#ifndef HERD_COMM_OPS_CASES_H
#define HERD_COMM_OPS_CASES_H

#include <stdbool.h>

#include "comm/algo/algo.h"
#include "comm_harness.h"
#include "dtype_value.h"
#include "herd/comm.h"

typedef struct ops_session {
	char scope[64];
	const char *transport;     /* "auto" or "tcp" */
	const char *algo;          /* "auto", "ring", "rd" */
	bool matrix;               /* every call x dtype x op x count */
	bool allreduce_matrix;     /* the same for allreduce alone */
	size_t matrix_block;       /* herd__algo_block_bytes in the matrix; 0: default */
	size_t large;              /* elements of the large cases; 0: none */
} ops_session;

/* Joins a communicator with explicit transport and algorithm options. */
static inline herd_status ops_comm(herd_comm **out, const ops_session *s, int rank, int size)
{
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	herd_comm_opts co = HERD_COMM_OPTS_INIT;
	herd_store *root = NULL, *sub = NULL;
	herd_status st;

	*out = NULL;
	so.secret = HARNESS_SECRET;
	so.timeout_ms = 30000;
	st = herd_store_connect(&root, harness_address(), &so);
	if (st == HERD_OK)
		st = herd_store_prefix(&sub, root, s->scope);
	co.transport = s->transport;
	co.algo = s->algo;
	co.timeout_ms = 60000;
	if (st == HERD_OK)
		st = herd_comm_init(out, sub, rank, size, &co);
	herd_store_free(sub);
	herd_store_free(root);
	return st;
}

/* ---- values ----------------------------------------------------------------- */

static inline int64_t ops_input(int r, size_t i, herd_dtype dt, int op)
{
	bool is_signed = dt == HERD_INT8 || dt == HERD_INT32 || dt == HERD_INT64 ||
			 herd_dtype_is_float(dt);
	uint64_t h = (uint64_t)r * 2654435761u + i * 40503u + (uint64_t)dt * 977u;

	h ^= h >> 13;
	if (op == HERD_PROD) {
		int64_t v = (int64_t)(h % 3) + 1;
		return v == 3 ? (is_signed ? -1 : 1) : v;
	}
	return is_signed ? (int64_t)(h % 11) - 5 : (int64_t)(h % 11);
}

/* The reduction over p ranks of element i (before the type's rounding). */
static inline double ops_expected(int p, size_t i, herd_dtype dt, int op)
{
	double acc = (double)ops_input(0, i, dt, op);

	for (int r = 1; r < p; r++) {
		double v = (double)ops_input(r, i, dt, op);

		switch (op) {
		case HERD_SUM: case HERD_AVG: acc += v; break;
		case HERD_PROD: acc *= v; break;
		case HERD_MIN: acc = v < acc ? v : acc; break;
		case HERD_MAX: acc = v > acc ? v : acc; break;
		default: break;
		}
	}
	if (op == HERD_AVG)
		acc = herd_dtype_is_float(dt) ? acc / p : (double)((int64_t)acc / p);
	return acc;
}

static inline void ops_fill(void *buf, int r, size_t from, size_t n, herd_dtype dt, int op)
{
	for (size_t i = 0; i < n; i++)
		dtype_put(buf, i, dt, (double)ops_input(r, from + i, dt, op));
}

/* Whether element i is v as the type stores it, bit for bit. */
static inline bool ops_same(const void *got, size_t i, herd_dtype dt, double v)
{
	size_t es = herd_dtype_size(dt);
	unsigned char want[8];

	dtype_put(want, 0, dt, v);
	return memcmp((const unsigned char *)got + i * es, want, es) == 0;
}

/* Counts the elements of got[0..n) that are not want(i); reports the first. */
#define OPS_VERIFY(what, got, n, dt, want_expr)                                          \
	do {                                                                             \
		size_t bad_ = 0, first_ = 0;                                             \
		for (size_t i = 0; i < (n); i++) {                                       \
			if (!ops_same((got), i, (dt), (want_expr)) && bad_++ == 0)       \
				first_ = i;                                              \
		}                                                                        \
		test_checks++;                                                           \
		if (bad_) {                                                              \
			size_t i = first_;                                               \
			TEST_FAIL_("%s: %zu of %zu elements wrong, first [%zu] = %g, "  \
				   "expected %g", (what), bad_, (size_t)(n), i,          \
				   dtype_value((got), i, (dt)), (double)(want_expr));        \
		}                                                                        \
	} while (0)

static inline void *ops_alloc(size_t bytes)
{
	void *p = malloc(bytes + 64);

	if (p == NULL) {
		fprintf(stderr, "out of memory\n");
		exit(3);
	}
	memset(p, 0xa5, bytes + 64);
	return p;
}

/* ---- one call of each operation, checked ------------------------------------ */

static inline void ops_allreduce(herd_comm *c, herd_dtype dt, int op, size_t n, bool inplace,
				 const char *tag)
{
	int r = herd_comm_rank(c), p = herd_comm_size(c);
	size_t es = herd_dtype_size(dt);
	void *in = ops_alloc(n * es), *out = inplace ? in : ops_alloc(n * es);
	char what[160];

	snprintf(what, sizeof(what), "%s: allreduce %s %s n=%zu %s rank %d", tag,
		 herd_dtype_name(dt), herd_redop_name((herd_redop)op), n,
		 inplace ? "in place" : "out of place", r);
	ops_fill(in, r, 0, n, dt, op);
	CHECK_OK(herd_comm_allreduce(c, in, out, n, dt, (herd_redop)op));
	OPS_VERIFY(what, out, n, dt, ops_expected(p, i, dt, op));
	if (!inplace) {
		/* the input is left alone */
		OPS_VERIFY(what, in, n, dt, (double)ops_input(r, i, dt, op));
		free(out);
	}
	free(in);
}

static inline void ops_reduce(herd_comm *c, herd_dtype dt, int op, size_t n, bool inplace,
			      int root, const char *tag)
{
	int r = herd_comm_rank(c), p = herd_comm_size(c);
	size_t es = herd_dtype_size(dt);
	void *in = ops_alloc(n * es), *out = inplace ? in : ops_alloc(n * es);
	char what[160];

	snprintf(what, sizeof(what), "%s: reduce %s %s n=%zu %s root %d rank %d", tag,
		 herd_dtype_name(dt), herd_redop_name((herd_redop)op), n,
		 inplace ? "in place" : "out of place", root, r);
	ops_fill(in, r, 0, n, dt, op);
	if (!inplace)
		memset(out, 0x5a, n * es);
	CHECK_OK(herd_comm_reduce(c, in, out, n, dt, (herd_redop)op, root));
	if (r == root) {
		OPS_VERIFY(what, out, n, dt, ops_expected(p, i, dt, op));
	} else {
		/* off the root neither buffer is written */
		OPS_VERIFY(what, in, n, dt, (double)ops_input(r, i, dt, op));
		if (!inplace) {
			size_t changed = 0;

			for (size_t k = 0; k < n * es; k++)
				changed += ((unsigned char *)out)[k] != 0x5a;
			CHECK_INT(changed, 0);
		}
	}
	if (!inplace)
		free(out);
	free(in);
}

static inline void ops_broadcast(herd_comm *c, herd_dtype dt, size_t n, bool inplace, int root,
				 const char *tag)
{
	int r = herd_comm_rank(c);
	size_t es = herd_dtype_size(dt);
	void *out = ops_alloc(n * es), *in = NULL;
	char what[160];

	snprintf(what, sizeof(what), "%s: broadcast %s n=%zu root %d rank %d", tag,
		 herd_dtype_name(dt), n, root, r);
	if (r == root) {
		in = inplace ? out : ops_alloc(n * es);
		ops_fill(in, root, 0, n, dt, HERD_SUM);
	}
	CHECK_OK(herd_comm_broadcast(c, in, out, n, dt, root));
	OPS_VERIFY(what, out, n, dt, (double)ops_input(root, i, dt, HERD_SUM));
	if (in != NULL && in != out)
		free(in);
	free(out);
}

static inline void ops_allgather(herd_comm *c, herd_dtype dt, size_t n, bool inplace,
				 const char *tag)
{
	int r = herd_comm_rank(c), p = herd_comm_size(c);
	size_t es = herd_dtype_size(dt);
	char *out = ops_alloc((size_t)p * n * es);
	void *in = inplace ? out + (size_t)r * n * es : ops_alloc(n * es);
	char what[160];

	snprintf(what, sizeof(what), "%s: allgather %s n=%zu %s rank %d", tag, herd_dtype_name(dt),
		 n, inplace ? "in place" : "out of place", r);
	ops_fill(in, r, 0, n, dt, HERD_SUM);
	CHECK_OK(herd_comm_allgather(c, in, out, n, dt));
	OPS_VERIFY(what, out, (size_t)p * n, dt, (double)ops_input((int)(i / n), i % n, dt, HERD_SUM));
	if (!inplace)
		free(in);
	free(out);
}

/* Rank r's input: element j of block b is input(r, b * n + j). */
static inline void ops_reduce_scatter(herd_comm *c, herd_dtype dt, int op, size_t n,
				      bool inplace, const char *tag)
{
	int r = herd_comm_rank(c), p = herd_comm_size(c);
	size_t es = herd_dtype_size(dt);
	char *in = ops_alloc((size_t)p * n * es);
	void *out = inplace ? in + (size_t)r * n * es : ops_alloc(n * es);
	char what[160];

	snprintf(what, sizeof(what), "%s: reduce_scatter %s %s n=%zu %s rank %d", tag,
		 herd_dtype_name(dt), herd_redop_name((herd_redop)op), n,
		 inplace ? "in place" : "out of place", r);
	ops_fill(in, r, 0, (size_t)p * n, dt, op);
	CHECK_OK(herd_comm_reduce_scatter(c, in, out, n, dt, (herd_redop)op));
	OPS_VERIFY(what, out, n, dt, ops_expected(p, (size_t)r * n + i, dt, op));
	if (!inplace)
		free(out);
	free(in);
}

/* kind 0: alltoall, 1: gather, 2: scatter.  Block b of rank r's big
 * sending buffer holds input(r, b * n + j). */
static inline void ops_move(herd_comm *c, int kind, herd_dtype dt, size_t n, int root,
			    const char *tag)
{
	static const char *const names[] = { "alltoall", "gather", "scatter" };
	int r = herd_comm_rank(c), p = herd_comm_size(c);
	size_t es = herd_dtype_size(dt), all = (size_t)p * n;
	bool big_in = kind != 1, big_out = kind != 2;
	void *in = ops_alloc((big_in ? all : n) * es), *out = ops_alloc((big_out ? all : n) * es);
	char what[160];
	herd_status st;

	snprintf(what, sizeof(what), "%s: %s %s n=%zu root %d rank %d", tag, names[kind],
		 herd_dtype_name(dt), n, root, r);
	ops_fill(in, r, 0, big_in ? all : n, dt, HERD_SUM);
	if (kind == 0)
		st = herd_comm_alltoall(c, in, out, n, dt);
	else if (kind == 1)
		st = herd_comm_gather(c, in, out, n, dt, root);
	else
		st = herd_comm_scatter(c, in, out, n, dt, root);
	CHECK_OK(st);
	if (kind == 0)
		OPS_VERIFY(what, out, all, dt,
			   (double)ops_input((int)(i / n), (size_t)r * n + i % n, dt, HERD_SUM));
	else if (kind == 1 && r == root)
		OPS_VERIFY(what, out, all, dt, (double)ops_input((int)(i / n), i % n, dt, HERD_SUM));
	else if (kind == 2)
		OPS_VERIFY(what, out, n, dt, (double)ops_input(root, (size_t)r * n + i, dt, HERD_SUM));
	free(in);
	free(out);
}

/* Each rank sends to the next and receives from the previous, with
 * sendrecv, then with send and recv in an order that cannot deadlock. */
static inline void ops_p2p(herd_comm *c, size_t n, const char *tag)
{
	int r = herd_comm_rank(c), p = herd_comm_size(c);
	int next = (r + 1) % p, prev = (r + p - 1) % p;
	int32_t *in = ops_alloc(n * 4), *out = ops_alloc(n * 4);
	char what[160];

	snprintf(what, sizeof(what), "%s: sendrecv n=%zu rank %d", tag, n, r);
	ops_fill(in, r, 0, n, HERD_INT32, HERD_SUM);
	CHECK_OK(herd_comm_sendrecv(c, in, n, next, out, n, prev, HERD_INT32));
	OPS_VERIFY(what, out, n, HERD_INT32, (double)ops_input(prev, i, HERD_INT32, HERD_SUM));
	if (p > 1) {
		memset(out, 0, n * 4);
		snprintf(what, sizeof(what), "%s: send/recv n=%zu rank %d", tag, n, r);
		if (r % 2 == 0) {
			CHECK_OK(herd_comm_send(c, in, n, HERD_INT32, next));
			CHECK_OK(herd_comm_recv(c, out, n, HERD_INT32, prev));
		} else {
			CHECK_OK(herd_comm_recv(c, out, n, HERD_INT32, prev));
			CHECK_OK(herd_comm_send(c, in, n, HERD_INT32, next));
		}
		OPS_VERIFY(what, out, n, HERD_INT32, (double)ops_input(prev, i, HERD_INT32, HERD_SUM));
	}
	CHECK_OK(herd_comm_barrier(c));
	free(in);
	free(out);
}

/* ---- a session: every operation on one communicator --------------------------- */

static const size_t ops_counts[] = { 0, 1, 1009 };
#define OPS_NCOUNTS (sizeof(ops_counts) / sizeof(ops_counts[0]))

static inline void ops_session_rank(int rank, int size, void *arg)
{
	const ops_session *s = arg;
	herd_comm *c = NULL;
	char tag[96];
	int k = 0;

	snprintf(tag, sizeof(tag), "%d ranks over %s, algo %s", size, s->transport, s->algo);
	CHECK_OK(ops_comm(&c, s, rank, size));
	if (c == NULL)
		return;
	if (s->matrix_block)
		herd__algo_block_bytes = s->matrix_block;
	for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++) {
		for (size_t ci = 0; ci < OPS_NCOUNTS; ci++) {
			size_t n = ops_counts[ci];

			for (int op = 0; op < HERD_REDOP_COUNT; op++, k++) {
				if (s->matrix || s->allreduce_matrix)
					ops_allreduce(c, (herd_dtype)dt, op, n, k % 2, tag);
				if (!s->matrix)
					continue;
				ops_reduce(c, (herd_dtype)dt, op, n, k % 3 == 0, k % size, tag);
				ops_reduce_scatter(c, (herd_dtype)dt, op, n, k % 2 == 0, tag);
			}
			if (!s->matrix)
				continue;
			ops_broadcast(c, (herd_dtype)dt, n, k % 2, (k + 1) % size, tag);
			ops_allgather(c, (herd_dtype)dt, n, k % 2 == 0, tag);
			for (int kind = 0; kind < 3; kind++)
				ops_move(c, kind, (herd_dtype)dt, n, (k + kind) % size, tag);
		}
	}
	herd__algo_block_bytes = HERD__ALGO_BLOCK;
	ops_p2p(c, 0, tag);
	ops_p2p(c, 1009, tag);
	if (s->large > 0) {
		size_t n = s->large, per = n / (size_t)size;

		ops_allreduce(c, HERD_FLOAT32, HERD_SUM, n, false, tag);
		ops_allreduce(c, HERD_BFLOAT16, HERD_AVG, n, true, tag);
		ops_allreduce(c, HERD_INT64, HERD_MAX, n / 2, true, tag);
		ops_allreduce(c, HERD_FLOAT16, HERD_PROD, n, false, tag);
		ops_reduce(c, HERD_FLOAT64, HERD_SUM, n / 2, false, size - 1, tag);
		ops_reduce(c, HERD_FLOAT16, HERD_AVG, n, true, 0, tag);
		ops_broadcast(c, HERD_UINT8, 4 * n + 3, false, size / 2, tag);
		ops_allgather(c, HERD_FLOAT32, per, false, tag);
		ops_reduce_scatter(c, HERD_FLOAT32, HERD_SUM, per, true, tag);
		ops_reduce_scatter(c, HERD_BFLOAT16, HERD_SUM, per, false, tag);
		ops_move(c, 0, HERD_INT32, per / (size_t)size + 1, 0, tag);
		ops_move(c, 1, HERD_FLOAT64, per / 2, size - 1, tag);
		ops_p2p(c, n, tag);
	}
	CHECK_OK(herd_comm_finalize(c));
	herd_comm_free(c);
}

/* Runs a session on each size, reporting how long each took.  "auto"
 * sessions check allreduce over the whole matrix (its tiniest vectors take
 * their own algorithm) and the large cases; forced ones everything, the
 * ring with blocks of 512 bytes in the matrix, so that its counts of 1009
 * cross slices too. */
static inline void ops_run_sessions(const char *transport, const char *algo, size_t large,
				    const int *sizes, size_t nsizes)
{
	bool is_auto = strcmp(algo, "auto") == 0;

	for (size_t i = 0; i < nsizes; i++) {
		ops_session s = { .transport = transport, .algo = algo, .matrix = !is_auto,
				  .allreduce_matrix = true, .large = large };

		if (strcmp(algo, "ring") == 0)
			s.matrix_block = 512;
		double t0 = now_s();

		harness_scope(s.scope, sizeof(s.scope), "ops");
		CHECK_INT(run_ranks(sizes[i], ops_session_rank, &s, 90000, NULL, NULL, 0, NULL), 0);
		printf("     %d ranks over %s, algo %s, %s%s: %.2f s\n", sizes[i], transport, algo,
		       is_auto ? "allreduce x dtype x op" : "every call x dtype x op",
		       large ? ", large cases" : "", now_s() - t0);
	}
}

#endif /* HERD_COMM_OPS_CASES_H */
