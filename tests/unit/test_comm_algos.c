/*
 * The collective algorithms (sdk/comm/algo/) on their own, with threads
 * as ranks and an in-process stand-in for herd__p2p_exchange: every
 * operation, every element type and reduction, sizes 1 to 8, counts from 0
 * to several slices, both algorithms, in place and out of place, against
 * references computed in double precision.
 *
 * The stand-in is this file's own (it defines herd__p2p_exchange,
 * herd_comm_rank, herd_comm_size and herd__comm_place, so the core's
 * objects are not linked); each rank picks its algorithm with tune.c's
 * table, as ops.c does.  Its ranks share no memory: the world has no
 * collective transport.  Its ranks count as one host; algorithm "auto/tcp" is
 * "auto" with every pair over TCP, which takes allreduce's halving-doubling
 * for 4 and 8 ranks.  Messages are queued per ordered pair; a receive
 * checks the length the sender sent.  Before its sends an exchange first takes
 * whatever has already arrived, so an algorithm that reduces into a buffer
 * it is sending in the same step is caught sending the wrong data.  The
 * real transports are tested with real processes in test_comm_ops*.c.
 */
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "comm/algo/algo.h"
#include "test.h"
#include "dtype_value.h"

/* ---- the stand-in communicator -------------------------------------------- */

#define MAX_RANKS 8

typedef struct msg {
	struct msg *next;
	size_t len;
	unsigned char data[];
} msg;

typedef struct world {
	int size;
	herd__place place;      /* force from the algorithm; any_tcp for "auto/tcp" */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	msg *head[MAX_RANKS][MAX_RANKS], *tail[MAX_RANKS][MAX_RANKS]; /* [from][to] */
	int bad_len;
	size_t sent, sent_across;   /* bytes sent, and between hosts ("hosts:" layouts) */
} world;

/* The last run_ranks' bytes sent, and those between hosts. */
static size_t last_sent, last_sent_across;

struct herd_comm {
	world *w;
	int rank;
};

int herd_comm_rank(const herd_comm *comm)
{
	return comm->rank;
}

int herd_comm_size(const herd_comm *comm)
{
	return comm->w->size;
}

/* The world's placement: one host, every pair over shared memory unless
 * the world is "auto/tcp", no collective transport. */
const herd__place *herd__comm_place(const herd_comm *comm)
{
	return &comm->w->place;
}

static void deliver(const herd__xfer *x, const msg *m, world *w)
{
	if (m->len != x->len) {
		__atomic_add_fetch(&w->bad_len, 1, __ATOMIC_SEQ_CST);
		return;
	}
	if (x->len == 0)
		return;
	if (x->sink.reduce_with != NULL)
		herd__reduce(x->sink.dst, x->sink.reduce_with, m->data,
			     x->len / herd_dtype_size(x->sink.dtype), x->sink.dtype, x->sink.op);
	else
		memcpy(x->sink.dst, m->data, x->len);
}

/* Takes the next message from `from` to `to`; waits when wait. */
static msg *take(world *w, int from, int to, bool wait)
{
	msg *m;

	pthread_mutex_lock(&w->mu);
	while ((m = w->head[from][to]) == NULL && wait)
		pthread_cond_wait(&w->cv, &w->mu);
	if (m != NULL) {
		w->head[from][to] = m->next;
		if (m->next == NULL)
			w->tail[from][to] = NULL;
	}
	pthread_mutex_unlock(&w->mu);
	return m;
}

herd_status herd__p2p_exchange(herd_comm *comm, const herd__xfer *sends, size_t nsends,
			       const herd__xfer *recvs, size_t nrecvs)
{
	world *w = comm->w;
	bool got[16] = { false };

	if (nrecvs > 16)
		return herd__error(HERD_EINTERNAL, "stand-in: too many receives");
	/* receives whose message is there already go first */
	for (size_t i = 0; i < nrecvs; i++) {
		bool earlier_same_peer = false;
		msg *m;

		for (size_t j = 0; j < i; j++)
			earlier_same_peer |= recvs[j].peer == recvs[i].peer && !got[j];
		if (earlier_same_peer)
			continue;
		m = take(w, recvs[i].peer, comm->rank, false);
		if (m != NULL) {
			deliver(&recvs[i], m, w);
			free(m);
			got[i] = true;
		}
	}
	for (size_t i = 0; i < nsends; i++) {
		msg *m = malloc(sizeof(*m) + sends[i].len);

		if (m == NULL)
			return herd__error(HERD_ENOMEM, "stand-in");
		m->next = NULL;
		m->len = sends[i].len;
		if (sends[i].len)
			memcpy(m->data, sends[i].buf, sends[i].len);
		pthread_mutex_lock(&w->mu);
		w->sent += sends[i].len;
		if (w->place.nhosts > 1 &&
		    w->place.host_of[comm->rank] != w->place.host_of[sends[i].peer])
			w->sent_across += sends[i].len;
		if (w->tail[comm->rank][sends[i].peer])
			w->tail[comm->rank][sends[i].peer]->next = m;
		else
			w->head[comm->rank][sends[i].peer] = m;
		w->tail[comm->rank][sends[i].peer] = m;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
	}
	for (size_t i = 0; i < nrecvs; i++) {
		msg *m;

		if (got[i])
			continue;
		m = take(w, recvs[i].peer, comm->rank, true);
		deliver(&recvs[i], m, w);
		free(m);
	}
	return HERD_OK;
}

/* ---- running p ranks ------------------------------------------------------- */

typedef struct rank_ctx {
	herd_comm comm;
	herd__op op;
	herd_status st;
} rank_ctx;

static void *rank_main(void *arg)
{
	rank_ctx *c = arg;

	if (c->op.run == NULL)
		c->op.run = herd__tune_pick(&c->comm, &c->op, &c->op.algo);
	c->st = c->op.run(&c->comm, &c->op);
	return NULL;
}

/*
 * The hosts of algorithm "hosts:LAYOUT" (e.g. "hosts:3+1", "hosts:2+2/rr"):
 * rank counts per host, ranks numbered host by host, or with "/rr" dealt
 * out round-robin (rank r on the r-th host that still has room).  Fills
 * the placement's host tables in tables (4 * MAX_RANKS + 1 ints); returns
 * the rank count.
 */
static int hosts_layout(const char *algo, herd__place *pl, int *tables)
{
	int n[MAX_RANKS], nh = 0, p = 0, *host_of = tables, *start = tables + MAX_RANKS;
	int *ranks = start + MAX_RANKS + 1, next[MAX_RANKS];
	const char *s = algo + strlen("hosts:");
	bool rr = strstr(algo, "/rr") != NULL;

	while (*s >= '1' && *s <= '9') {
		n[nh++] = *s++ - '0';
		if (*s == '+')
			s++;
	}
	start[0] = 0;
	pl->max_local = 0;
	for (int h = 0; h < nh; h++) {
		start[h + 1] = start[h] + n[h];
		next[h] = start[h];
		pl->max_local = n[h] > pl->max_local ? n[h] : pl->max_local;
	}
	p = start[nh];
	for (int r = 0, cur = 0; r < p; r++) {
		while (next[cur] == start[cur + 1])
			cur = rr ? (cur + 1) % nh : cur + 1;
		host_of[r] = cur;
		ranks[next[cur]++] = r;
		if (rr)
			cur = (cur + 1) % nh;
	}
	pl->nhosts = nh;
	pl->host_of = host_of;
	pl->host_start = start;
	pl->host_ranks = ranks;
	return p;
}

/*
 * The world's placement for algorithm algo: "auto", "ring", "rd" on one
 * host ("auto/tcp": every pair over TCP), or a "hosts:" layout, forced
 * with ",ring", ",rd" or ",hier".  Returns the layout's rank count (0 for one
 * host); tables as for hosts_layout.
 */
static int place_of(const char *algo, herd__place *pl, int *tables)
{
	int p = 0;

	memset(pl, 0, sizeof(*pl));
	pl->force = strcmp(algo, "ring") == 0 ? HERD__CLASS_BANDWIDTH
		    : strcmp(algo, "rd") == 0 ? HERD__CLASS_LATENCY : HERD__CLASS_ANY;
	pl->one_host = true;
	pl->any_tcp = strcmp(algo, "auto/tcp") == 0;
	if (strncmp(algo, "hosts:", 6) == 0) {
		p = hosts_layout(algo, pl, tables);
		pl->one_host = false;
		pl->any_tcp = true;
		/* links of 25 us and 1 Gbit/s, as if given */
		pl->net_lat_s = 25e-6;
		pl->net_byte_s = 8e-9;
		pl->net_from = HERD__NET_GIVEN;
		if (strstr(algo, ",ring") != NULL)
			pl->force = HERD__CLASS_BANDWIDTH;
		if (strstr(algo, ",hier") != NULL)
			pl->force = HERD__CLASS_HIER;
		if (strstr(algo, ",rd") != NULL)
			pl->force = HERD__CLASS_LATENCY;
	}
	return p;
}

/* Runs ops[r] on rank r, all at once; every rank must succeed and every
 * message must have been taken with the length it was sent with. */
static int run_ranks(int p, const char *algo, herd__op *ops)
{
	world w = { .size = p };
	int tables[4 * MAX_RANKS + 1];

	int layout = place_of(algo, &w.place, tables);

	if (layout > 0)
		w.size = layout;
	rank_ctx ctx[MAX_RANKS];
	pthread_t t[MAX_RANKS];
	int bad = 0;

	if (w.size != p) {
		TEST_FAIL_("layout %s has %d ranks, the case %d", algo, w.size, p);
		return 1;
	}
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	for (int r = 0; r < p; r++) {
		ctx[r].comm.w = &w;
		ctx[r].comm.rank = r;
		ctx[r].op = ops[r];
		pthread_create(&t[r], NULL, rank_main, &ctx[r]);
	}
	for (int r = 0; r < p; r++) {
		pthread_join(t[r], NULL);
		if (ctx[r].st != HERD_OK) {
			TEST_FAIL_("rank %d of %d: %s", r, p, herd_status_name(ctx[r].st));
			bad++;
		}
	}
	for (int a = 0; a < p; a++) {
		for (int b = 0; b < p; b++) {
			if (w.head[a][b] != NULL) {
				TEST_FAIL_("%d ranks: a message from %d to %d was never received",
					   p, a, b);
				bad++;
				while (w.head[a][b]) {
					msg *m = w.head[a][b];

					w.head[a][b] = m->next;
					free(m);
				}
			}
		}
	}
	last_sent = w.sent;
	last_sent_across = w.sent_across;
	if (w.bad_len) {
		TEST_FAIL_("%d ranks: %d messages received with the wrong length", p, w.bad_len);
		bad++;
	}
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
	return bad;
}

/* ---- values and references ------------------------------------------------- */

/* Rank r's element i: small integers, so that every float sum and product
 * is exact (PROD uses 1, 2 and -1: at most 2^8). */
static int64_t input(int r, size_t i, herd_dtype dt, herd_redop op)
{
	bool is_signed = dt == HERD_INT8 || dt == HERD_INT32 || dt == HERD_INT64 || herd_dtype_is_float(dt);
	uint64_t h = (uint64_t)r * 2654435761u + i * 40503u + (uint64_t)dt * 977u;

	h ^= h >> 13;
	if (op == HERD_PROD) {
		int64_t v = (int64_t)(h % 3) + 1;  /* 1, 2, 3 -> 1, 2, -1 */
		return v == 3 ? (is_signed ? -1 : 1) : v;
	}
	return is_signed ? (int64_t)(h % 11) - 5 : (int64_t)(h % 11);
}

/* The reduction over p ranks of element i, as the type stores it. */
static double expected(int p, size_t i, herd_dtype dt, herd_redop op)
{
	double acc = (double)input(0, i, dt, op);

	for (int r = 1; r < p; r++) {
		double v = (double)input(r, i, dt, op);

		switch (op) {
		case HERD_SUM: case HERD_AVG: acc += v; break;
		case HERD_PROD: acc *= v; break;
		case HERD_MIN: acc = v < acc ? v : acc; break;
		case HERD_MAX: acc = v > acc ? v : acc; break;
		default: break;
		}
	}
	if (op == HERD_AVG) {
		if (herd_dtype_is_float(dt))
			acc /= p;
		else
			acc = (double)((int64_t)acc / p);  /* toward zero */
	}
	return acc;
}

static void fill(void *buf, int r, size_t n, herd_dtype dt, herd_redop op)
{
	for (size_t i = 0; i < n; i++)
		dtype_put(buf, i, dt, (double)input(r, i, dt, op));
}

/* Element i of got must be the reference v rounded into the type. */
static bool same(const void *got, size_t i, herd_dtype dt, double v)
{
	size_t es = herd_dtype_size(dt);
	unsigned char want[8];

	/* v may need rounding into a narrow type: put does it double -> float
	 * -> narrow, which is exact here as v = sum / p has few bits */
	dtype_put(want, 0, dt, v);
	return memcmp((const unsigned char *)got + i * es, want, es) == 0;
}

static int failures_shown;

#define EXPECT_ELEM(buf, i, dt, v, ...)                                                 \
	do {                                                                            \
		if (!same((buf), (i), (dt), (v))) {                                     \
			bad++;                                                          \
			if (failures_shown++ < 10) {                                    \
				TEST_FAIL_(__VA_ARGS__);                                \
				fprintf(stderr, "    element %zu: got %g, expected %g\n", \
					(size_t)(i), dtype_value((buf), (i), (dt)), (double)(v)); \
			}                                                               \
		}                                                                       \
	} while (0)

/* The algorithm the next cases run on every rank; NULL: tune.c picks. */
static herd__op_fn case_run;

/* A call of one rank; run_ranks picks its algorithm with tune.c unless
 * case_run names one. */
static void op_set(herd__op *o, herd__op_kind kind, herd_dtype dt, herd_redop op, int root,
		   size_t count, const void *sendbuf, void *recvbuf)
{
	memset(o, 0, sizeof(*o));
	o->fp.kind = (uint8_t)kind;
	o->fp.dtype = (uint8_t)dt;
	o->fp.redop = (uint8_t)op;
	o->fp.root = root;
	o->fp.count = count;
	o->count = count;
	o->sendbuf = sendbuf;
	o->recvbuf = recvbuf;
	o->run = case_run;
}

/* ---- one case of each operation -------------------------------------------- */

/* "auto" is "rd" for every small case but allreduce's tiniest (one-shot):
 * the small matrices force each algorithm, the large cases and allreduce
 * also let size decide. */
static const char *const algos[] = { "auto", "ring", "rd", "auto/tcp" };
#define NALGOS (sizeof(algos) / sizeof(algos[0]))

/* One allreduce; run: the algorithm every rank runs, NULL for tune.c's
 * choice (which must then be the two-level one on a "hosts:" layout). */
static int case_allreduce_with(int p, const char *algo, herd_dtype dt, herd_redop op, size_t n,
			       bool inplace, herd__op_fn run);

static int case_allreduce(int p, const char *algo, herd_dtype dt, herd_redop op, size_t n,
			  bool inplace)
{
	return case_allreduce_with(p, algo, dt, op, n, inplace, NULL);
}

static int case_allreduce_with(int p, const char *algo, herd_dtype dt, herd_redop op, size_t n,
			       bool inplace, herd__op_fn run)
{
	size_t es = herd_dtype_size(dt);
	void *in[MAX_RANKS], *out[MAX_RANKS];
	herd__op ops[MAX_RANKS];
	int bad = 0;

	for (int r = 0; r < p; r++) {
		in[r] = malloc(n * es + 1);
		out[r] = inplace ? in[r] : malloc(n * es + 1);
		fill(in[r], r, n, dt, op);
		op_set(&ops[r], HERD__OP_ALLREDUCE, dt, op, -1, n, in[r], out[r]);
		ops[r].run = run != NULL ? run : case_run;
	}
	if (ops[0].run == NULL && strncmp(algo, "hosts:", 6) == 0 && strstr(algo, ",ring") == NULL &&
	    strstr(algo, ",rd") == NULL) {
		int tables[4 * MAX_RANKS + 1];
		world w = { .size = p };
		herd_comm c = { &w, 0 };

		place_of(algo, &w.place, tables);
		if (herd__tune_pick(&c, &ops[0], &ops[0].algo) != herd__algo_allreduce_hier) {
			TEST_FAIL_("allreduce of %zu elements on %s: auto did not take the "
				   "two-level algorithm", n, algo);
			bad++;
		}
	}
	bad += run_ranks(p, algo, ops);
	for (int r = 0; r < p; r++) {
		for (size_t i = 0; i < n && !bad; i++)
			EXPECT_ELEM(out[r], i, dt, expected(p, i, dt, op),
				    "allreduce %s %s p=%d n=%zu %s algo=%s rank %d", herd_dtype_name(dt),
				    herd_redop_name(op), p, n, inplace ? "in-place" : "out-of-place",
				    algo, r);
		if (!inplace)
			free(out[r]);
		free(in[r]);
	}
	return bad;
}

static int case_reduce(int p, const char *algo, herd_dtype dt, herd_redop op, size_t n,
		       bool inplace, int root)
{
	size_t es = herd_dtype_size(dt);
	void *in[MAX_RANKS], *out[MAX_RANKS];
	herd__op ops[MAX_RANKS];
	int bad = 0;

	for (int r = 0; r < p; r++) {
		in[r] = malloc(n * es + 1);
		fill(in[r], r, n, dt, op);
		/* off the root, recvbuf is NULL or the input: neither may be written */
		out[r] = inplace ? in[r] : r == root ? malloc(n * es + 1) : NULL;
		op_set(&ops[r], HERD__OP_REDUCE, dt, op, root, n, in[r], out[r]);
	}
	bad += run_ranks(p, algo, ops);
	for (int r = 0; r < p; r++) {
		for (size_t i = 0; i < n && !bad; i++) {
			if (r == root)
				EXPECT_ELEM(out[r], i, dt, expected(p, i, dt, op),
					    "reduce %s %s p=%d n=%zu %s algo=%s root %d",
					    herd_dtype_name(dt), herd_redop_name(op), p, n,
					    inplace ? "in-place" : "out-of-place", algo, root);
			else
				EXPECT_ELEM(in[r], i, dt, (double)input(r, i, dt, op),
					    "reduce p=%d n=%zu algo=%s: rank %d's input changed", p, n,
					    algo, r);
		}
		if (!inplace)
			free(out[r]);
		free(in[r]);
	}
	return bad;
}

static int case_broadcast(int p, const char *algo, herd_dtype dt, size_t n, bool inplace,
			  int root)
{
	size_t es = herd_dtype_size(dt);
	void *in = malloc(n * es + 1), *out[MAX_RANKS];
	herd__op ops[MAX_RANKS];
	int bad = 0;

	fill(in, root, n, dt, HERD_SUM);
	for (int r = 0; r < p; r++) {
		out[r] = r == root && inplace ? in : malloc(n * es + 1);
		op_set(&ops[r], HERD__OP_BROADCAST, dt, 0, root, n, r == root ? in : NULL, out[r]);
	}
	bad += run_ranks(p, algo, ops);
	for (int r = 0; r < p; r++) {
		for (size_t i = 0; i < n && !bad; i++)
			EXPECT_ELEM(out[r], i, dt, (double)input(root, i, dt, HERD_SUM),
				    "broadcast %s p=%d n=%zu algo=%s root %d rank %d",
				    herd_dtype_name(dt), p, n, algo, root, r);
		if (out[r] != in)
			free(out[r]);
	}
	free(in);
	return bad;
}

static int case_allgather(int p, const char *algo, herd_dtype dt, size_t n, bool inplace)
{
	size_t es = herd_dtype_size(dt);
	void *in[MAX_RANKS], *out[MAX_RANKS];
	herd__op ops[MAX_RANKS];
	int bad = 0;

	for (int r = 0; r < p; r++) {
		out[r] = malloc((size_t)p * n * es + 1);
		in[r] = inplace ? (char *)out[r] + (size_t)r * n * es : malloc(n * es + 1);
		fill(in[r], r, n, dt, HERD_SUM);
		op_set(&ops[r], HERD__OP_ALLGATHER, dt, 0, -1, n, in[r], out[r]);
	}
	bad += run_ranks(p, algo, ops);
	for (int r = 0; r < p; r++) {
		for (size_t i = 0; i < (size_t)p * n && !bad; i++)
			EXPECT_ELEM(out[r], i, dt, (double)input((int)(i / n), i % n, dt, HERD_SUM),
				    "allgather %s p=%d n=%zu %s algo=%s rank %d", herd_dtype_name(dt),
				    p, n, inplace ? "in-place" : "out-of-place", algo, r);
		if (!inplace)
			free(in[r]);
		free(out[r]);
	}
	return bad;
}

/* Rank r's input is blocks of n: element j of block b is input(r, b*n + j). */
static int case_reduce_scatter(int p, const char *algo, herd_dtype dt, herd_redop op, size_t n,
			       bool inplace)
{
	size_t es = herd_dtype_size(dt);
	void *in[MAX_RANKS], *out[MAX_RANKS];
	herd__op ops[MAX_RANKS];
	int bad = 0;

	for (int r = 0; r < p; r++) {
		in[r] = malloc((size_t)p * n * es + 1);
		fill(in[r], r, (size_t)p * n, dt, op);
		out[r] = inplace ? (char *)in[r] + (size_t)r * n * es : malloc(n * es + 1);
		op_set(&ops[r], HERD__OP_REDUCE_SCATTER, dt, op, -1, n, in[r], out[r]);
	}
	bad += run_ranks(p, algo, ops);
	for (int r = 0; r < p; r++) {
		for (size_t i = 0; i < n && !bad; i++)
			EXPECT_ELEM(out[r], i, dt, expected(p, (size_t)r * n + i, dt, op),
				    "reduce_scatter %s %s p=%d n=%zu %s algo=%s rank %d",
				    herd_dtype_name(dt), herd_redop_name(op), p, n,
				    inplace ? "in-place" : "out-of-place", algo, r);
		if (!inplace)
			free(out[r]);
		free(in[r]);
	}
	return bad;
}

/* alltoall (kind 0), gather (1), scatter (2).  Rank r's block b of a
 * sending buffer holds input(r, b*n + j). */
static int case_move(int kind, int p, const char *algo, herd_dtype dt, size_t n, int root)
{
	size_t es = herd_dtype_size(dt), all = (size_t)p * n;
	void *in[MAX_RANKS], *out[MAX_RANKS];
	herd__op ops[MAX_RANKS];
	const herd__op_kind kinds[3] = { HERD__OP_ALLTOALL, HERD__OP_GATHER, HERD__OP_SCATTER };
	int bad = 0;

	for (int r = 0; r < p; r++) {
		bool big_in = kind == 0 || kind == 2, big_out = kind == 0 || kind == 1;

		in[r] = malloc((big_in ? all : n) * es + 1);
		out[r] = malloc((big_out ? all : n) * es + 1);
		fill(in[r], r, big_in ? all : n, dt, HERD_SUM);
		op_set(&ops[r], kinds[kind], dt, 0, kind ? root : -1, n, in[r], out[r]);
	}
	bad += run_ranks(p, algo, ops);
	for (int r = 0; r < p; r++) {
		for (size_t i = 0; i < n && !bad; i++) {
			if (kind == 0) {
				for (int b = 0; b < p; b++)
					EXPECT_ELEM(out[r], (size_t)b * n + i, dt,
						    (double)input(b, (size_t)r * n + i, dt, HERD_SUM),
						    "alltoall %s p=%d n=%zu algo=%s rank %d block %d",
						    herd_dtype_name(dt), p, n, algo, r, b);
			} else if (kind == 1 && r == root) {
				for (int b = 0; b < p; b++)
					EXPECT_ELEM(out[r], (size_t)b * n + i, dt,
						    (double)input(b, i, dt, HERD_SUM),
						    "gather %s p=%d n=%zu root %d block %d",
						    herd_dtype_name(dt), p, n, root, b);
			} else if (kind == 2) {
				EXPECT_ELEM(out[r], i, dt, (double)input(root, (size_t)r * n + i, dt,
									   HERD_SUM),
					    "scatter %s p=%d n=%zu root %d rank %d",
					    herd_dtype_name(dt), p, n, root, r);
			}
		}
		free(in[r]);
		free(out[r]);
	}
	return bad;
}

/* ---- the matrix ------------------------------------------------------------- */

/* Under the sanitizers (several times slower) the sizes the process tests
 * use; otherwise also 5 and 8. */
#ifdef __SANITIZE_ADDRESS__
static const int sizes[] = { 1, 2, 3, 4, 7 };
#else
static const int sizes[] = { 1, 2, 3, 4, 5, 7, 8 };
#endif
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_allreduce_every_dtype_op_size_and_algorithm(void)
{
	static const size_t counts[] = { 0, 1, 2, 5, 13, 1009 };
	int bad = 0;

	for (size_t s = 0; s < NSIZES; s++)
		for (size_t a = 0; a < NALGOS; a++)
			for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
				for (int op = 0; op < HERD_REDOP_COUNT; op++)
					for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
						bad += case_allreduce(sizes[s], algos[a], (herd_dtype)dt,
								      (herd_redop)op, counts[c],
								      (c + (size_t)op) % 2 == 1);
	CHECK_INT(bad, 0);
}

/*
 * The two-level allreduce on hosts of uneven rank counts and rank orders
 * that are not host by host: every type and reduction, counts 0, 1, a
 * prime and several MiB, in place and out of place; the algorithm is
 * called directly for the small counts (tune.c takes it from 64 KiB), and
 * "auto" must take it for the large ones, "hier" for any.
 */
static void test_two_level_allreduce_on_uneven_hosts(void)
{
	/* Under the sanitizers (several times slower) four of the eight. */
	static const char *const layouts[] = { "hosts:3+1", "hosts:2+1+1", "hosts:2+2/rr",
					      "hosts:3+3+2/rr",
#ifndef __SANITIZE_ADDRESS__
					      "hosts:1+3", "hosts:2+2", "hosts:4+4", "hosts:1+2+1/rr"
#endif
	};
	static const size_t counts[] = { 0, 1, 2, 7, 1009 };
	int bad = 0;

	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		herd__place pl;
		int tables[4 * MAX_RANKS + 1], p = hosts_layout(layouts[l], &pl, tables);

		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
			for (int op = 0; op < HERD_REDOP_COUNT; op++)
				for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
					bad += case_allreduce_with(p, layouts[l], (herd_dtype)dt,
								   (herd_redop)op, counts[c],
								   (c + (size_t)op) % 2 == 1,
								   herd__algo_allreduce_hier);
		/* "hier" takes it at every size */
		{
			char hier[64];

			snprintf(hier, sizeof(hier), "%s,hier", layouts[l]);
			bad += case_allreduce_with(p, hier, HERD_FLOAT32, HERD_SUM, 1, false, NULL);
			bad += case_allreduce_with(p, hier, HERD_FLOAT16, HERD_AVG, 7, true, NULL);
			bad += case_allreduce_with(p, hier, HERD_INT8, HERD_MAX, 1009, false, NULL);
		}
		/* several MiB: "auto" takes the two-level algorithm */
		bad += case_allreduce_with(p, layouts[l], HERD_FLOAT32, HERD_SUM,
					   (3u << 20) / 4 + 4099, l % 2 == 0, NULL);
		bad += case_allreduce_with(p, layouts[l], HERD_BFLOAT16, HERD_AVG, (1u << 20) + 17,
					   l % 2 == 1, NULL);
		bad += case_allreduce_with(p, layouts[l], HERD_INT64, HERD_MIN, 300007, true, NULL);
	}
	CHECK_INT(bad, 0);
}

/* Whether tune.c picks want for a float32 call of count elements on a
 * "hosts:" layout; says why not when it does not. */
static bool picks(const char *algo, herd__op_kind kind, size_t count, herd__op_fn want)
{
	int tables[4 * MAX_RANKS + 1];
	world w = { 0 };
	herd_comm c = { &w, 0 };
	herd__op o;
	char why[1024];

	w.size = place_of(algo, &w.place, tables);
	op_set(&o, kind, HERD_FLOAT32, HERD_SUM, 0, count, NULL, NULL);
	o.run = NULL;
	if (herd__tune_pick(&c, &o, &o.algo) == want)
		return true;
	herd__tune_explain(&c, &o, why, sizeof(why));
	fprintf(stderr, "  on %s: %s\n", algo, why);
	return false;
}

/*
 * The two-level reduce_scatter and allgather on the same layouts: every
 * type (and reduction), blocks of 0, 1, a prime and 70001 elements (more
 * than a MiB for the wide types), in place and out of place, called
 * directly; "auto" takes them for large blocks on even hosts and "hier"
 * for any, and a host's link carries each other host's block once.
 */
static void test_two_level_reduce_scatter_and_allgather(void)
{
	static const char *const layouts[] = { "hosts:3+1", "hosts:2+1+1", "hosts:2+2/rr",
					      "hosts:3+3+2/rr",
#ifndef __SANITIZE_ADDRESS__
					      "hosts:1+3", "hosts:4+4", "hosts:1+2+1/rr"
#endif
	};
	static const size_t counts[] = { 0, 1, 7, 1009 };
	int bad = 0;

	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		herd__place pl;
		int tables[4 * MAX_RANKS + 1], p = hosts_layout(layouts[l], &pl, tables);
		char hier[64];

		case_run = NULL;
		snprintf(hier, sizeof(hier), "%s,hier", layouts[l]);
		/* where hosts hold as many ranks, the two-level shape sends
		 * fewer bytes between hosts than the ring (3 + 1: as many) */
		if (p % pl.nhosts == 0 && p / pl.nhosts == pl.max_local) {
			CHECK(picks(layouts[l], HERD__OP_ALLGATHER, 1u << 16,
				    herd__algo_allgather_hier));
			CHECK(picks(layouts[l], HERD__OP_REDUCE_SCATTER, 1u << 16,
				    herd__algo_reduce_scatter_hier));
		}
		CHECK(picks(hier, HERD__OP_REDUCE_SCATTER, 1, herd__algo_reduce_scatter_hier));
		bad += case_allgather(p, layouts[l], HERD_BFLOAT16, 70001, l % 2 == 0);
		bad += case_reduce_scatter(p, layouts[l], HERD_FLOAT32, HERD_AVG, 70001, l % 2 == 1);
		bad += case_reduce_scatter(p, hier, HERD_INT32, HERD_MAX, 3, false);
		case_run = herd__algo_allgather_hier;
		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				bad += case_allgather(p, layouts[l], (herd_dtype)dt, counts[c],
						      (c + (size_t)dt) % 2 == 0);
		case_run = herd__algo_reduce_scatter_hier;
		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
			for (int op = 0; op < HERD_REDOP_COUNT; op++)
				for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
					bad += case_reduce_scatter(p, layouts[l], (herd_dtype)dt,
								   (herd_redop)op, counts[c],
								   (c + (size_t)op) % 2 == 1);
		bad += case_reduce_scatter(p, layouts[l], HERD_INT64, HERD_SUM, 70001, true);
	}
	/* 2 + 2 dealt round-robin: each host receives the other's two blocks,
	 * one per local rank: 4 blocks sent between hosts (a ring host by host
	 * sends 6), and each rank passes its two to its neighbour: 12 in all */
	case_run = herd__algo_allgather_hier;
	bad += case_allgather(4, "hosts:2+2/rr", HERD_INT32, 4096, false);
	CHECK(last_sent == 12 * 4096 * 4 && last_sent_across == 4 * 4096 * 4);
	case_run = herd__algo_reduce_scatter_hier;
	bad += case_reduce_scatter(4, "hosts:2+2/rr", HERD_INT32, HERD_SUM, 4096, false);
	CHECK(last_sent == 12 * 4096 * 4 && last_sent_across == 4 * 4096 * 4);
	/* 4 + 4: a flat ring sends 7 blocks over each host's link, this 4 */
	case_run = herd__algo_allgather_hier;
	bad += case_allgather(8, "hosts:4+4", HERD_INT32, 1000, false);
	CHECK(last_sent_across == 2 * 4 * 1000 * 4);
	case_run = NULL;
	CHECK_INT(bad, 0);
}

/*
 * Recursive doubling and halving-doubling pair ranks by position, host by
 * host: on hosts dealt out round-robin and uneven ones every rank still
 * gets the exact result, in place and out of place, with the fold of a
 * rank count that is no power of two; on 2 + 2 dealt round-robin an 8-byte
 * recursive doubling sends half its messages between the hosts.
 */
static void test_rd_and_hd_by_position(void)
{
	static const char *const rd_layouts[] = { "hosts:2+2/rr,rd", "hosts:3+1/rr,rd",
						 "hosts:3+3+2/rr,rd", "hosts:1+2+1/rr,rd",
						 "hosts:2+1+1,rd" };
	static const char *const hd_layouts[] = { "hosts:2+2/rr", "hosts:4+4/rr",
						 "hosts:2+2+2+2/rr", "hosts:3+1/rr" };
	int bad = 0;

	for (size_t l = 0; l < sizeof(rd_layouts) / sizeof(rd_layouts[0]); l++) {
		herd__place pl;
		int tables[4 * MAX_RANKS + 1], p = hosts_layout(rd_layouts[l], &pl, tables);

		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++) {
			bad += case_allreduce(p, rd_layouts[l], (herd_dtype)dt,
					      (herd_redop)(dt % HERD_REDOP_COUNT), 1 + (size_t)dt * 37,
					      dt % 2 == 0);
			bad += case_reduce_scatter(p, rd_layouts[l], (herd_dtype)dt,
						   dt % 2 ? HERD_SUM : HERD_MIN, 5, dt % 2 == 1);
		}
	}
	case_run = herd__algo_allreduce_hd;
	for (size_t l = 0; l < sizeof(hd_layouts) / sizeof(hd_layouts[0]); l++) {
		herd__place pl;
		int tables[4 * MAX_RANKS + 1], p = hosts_layout(hd_layouts[l], &pl, tables);

		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
			bad += case_allreduce(p, hd_layouts[l], (herd_dtype)dt,
					      (herd_redop)(dt % HERD_REDOP_COUNT), 1009 + (size_t)dt,
					      dt % 2 == 1);
		bad += case_allreduce(p, hd_layouts[l], HERD_FLOAT32, HERD_AVG, (1u << 20) + 3, false);
	}
	case_run = NULL;
	bad += case_allreduce(4, "hosts:2+2/rr,rd", HERD_FLOAT64, HERD_SUM, 1, false);
	CHECK(last_sent == 8 * 8 && last_sent_across == 4 * 8);
	CHECK_INT(bad, 0);
}

/*
 * The binomial trees of broadcast and reduce run root's host first, then
 * host by host: on 2 + 2 dealt round-robin (hosts 0, 2 | 1, 3) the vector
 * crosses between the hosts once, whichever the root; in rank order it
 * would cross twice from root 0 (0 -> 2 in one step, 0 -> 1 and 2 -> 3
 * in the next).  On 4 hosts of 2 dealt round-robin, 3 times (once into
 * each other host), where in rank order 6 of the 7 sends cross.
 */
static void test_trees_cross_between_hosts_once(void)
{
	int bad = 0;

	for (int root = 0; root < 4; root++) {
		bad += case_broadcast(4, "hosts:2+2/rr", HERD_INT32, 1000, root % 2 == 0, root);
		CHECK(last_sent == 3 * 4000 && last_sent_across == 4000);
		bad += case_reduce(4, "hosts:2+2/rr", HERD_INT32, HERD_SUM, 1000, root % 2 == 1, root);
		CHECK(last_sent == 3 * 4000 && last_sent_across == 4000);
	}
	for (int root = 0; root < 8; root++) {
		bad += case_broadcast(8, "hosts:2+2+2+2/rr", HERD_FLOAT64, 33, false, root);
		CHECK(last_sent == 7 * 33 * 8 && last_sent_across == 3 * 33 * 8);
		bad += case_reduce(8, "hosts:2+2+2+2/rr", HERD_FLOAT64, HERD_MIN, 33, false, root);
		CHECK(last_sent == 7 * 33 * 8 && last_sent_across == 3 * 33 * 8);
		bad += case_broadcast(8, "hosts:3+3+2/rr", HERD_FLOAT64, 33, false, root);
		bad += case_reduce(8, "hosts:3+1+2+2", HERD_FLOAT32, HERD_AVG, 33, true, root);
		bad += case_reduce(8, "hosts:3+3+2/rr", HERD_FLOAT16, HERD_PROD, 33, false, root);
	}
	CHECK_INT(bad, 0);
}

/*
 * The rings and the broadcast chain run host by host whatever the
 * numbering: on hosts whose ranks are dealt out round-robin, and on uneven
 * ones, every ring operation still gives every rank the right result (and
 * each its own block), and fewer bytes cross between hosts.
 */
static void test_rings_follow_the_hosts(void)
{
	static const char *const layouts[] = { "hosts:2+2/rr,ring", "hosts:3+1/rr,ring",
					      "hosts:3+3+2/rr,ring", "hosts:1+2+1/rr,ring",
					      "hosts:2+2,ring" };
	int bad = 0;

	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		herd__place pl;
		int tables[4 * MAX_RANKS + 1], p = hosts_layout(layouts[l], &pl, tables);

		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++) {
			bad += case_allreduce(p, layouts[l], (herd_dtype)dt, (herd_redop)(dt % HERD_REDOP_COUNT),
					      1009 + (size_t)dt, dt % 2 == 0);
			bad += case_reduce_scatter(p, layouts[l], (herd_dtype)dt,
						   dt % 2 ? HERD_SUM : HERD_MAX, 1009, dt % 2 == 1);
			bad += case_allgather(p, layouts[l], (herd_dtype)dt, 1009, dt % 2 == 0);
			bad += case_broadcast(p, layouts[l], (herd_dtype)dt, 1009 + (size_t)dt * 97,
					      dt % 2 == 1, dt % p);
			bad += case_reduce(p, layouts[l], (herd_dtype)dt, HERD_SUM, 1009, dt % 2 == 0,
					   (dt + 1) % p);
		}
		bad += case_allreduce(p, layouts[l], HERD_FLOAT32, HERD_SUM, (3u << 20) / 4 + 7, false);
	}
	/* 2 + 2 dealt round-robin: a ring in rank order would cross between
	 * the hosts at every hop; host by host, at half of them. */
	bad += case_allgather(4, "hosts:2+2/rr,ring", HERD_INT32, 4096, false);
	CHECK(last_sent > 0 && last_sent_across * 2 == last_sent);
	/* the chain broadcast from rank 0 (0, 2 | 1, 3): one hop of three between */
	bad += case_broadcast(4, "hosts:2+2/rr,ring", HERD_INT32, 300001, false, 0);
	CHECK(last_sent > 0 && last_sent_across * 3 == last_sent);
	CHECK_INT(bad, 0);
}

/* Several slices of real size, a ragged last one, in place and not. */
static void test_allreduce_large_spans_slices(void)
{
	int bad = 0;
	/* two slices and a ragged third for 2 ranks, one ragged one beyond */
	size_t n = 2 * (HERD__ALGO_BLOCK / 4) + 12345;

	for (size_t s = 1; s < 4; s++) {
		bad += case_allreduce(sizes[s], "ring", HERD_FLOAT32, HERD_SUM, n, false);
		bad += case_allreduce(sizes[s], "auto", HERD_INT32, HERD_MAX, n, true);
		bad += case_allreduce(sizes[s], "auto", HERD_BFLOAT16, HERD_AVG, n, true);
		bad += case_allreduce(sizes[s], "rd", HERD_FLOAT64, HERD_PROD, n / 4, false);
		bad += case_allreduce(sizes[s], "auto/tcp", HERD_FLOAT32, HERD_SUM, n, false);
		bad += case_allreduce(sizes[s], "auto/tcp", HERD_FLOAT16, HERD_AVG, n, true);
	}
	CHECK_INT(bad, 0);
}

/*
 * With blocks of 40 bytes (10 float32, 5 float64...), a thousand elements
 * run through dozens of slices: every boundary of the sliced, pipelined
 * ring (and of the chunked chain broadcast) is crossed, for every type.
 */
static void test_ring_algorithms_with_tiny_blocks_cross_many_slices(void)
{
	static const size_t counts[] = { 7, 1009 };
	int bad = 0;

	herd__algo_block_bytes = 40;
	for (size_t s = 1; s < NSIZES; s++) {
		for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++) {
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
				size_t n = counts[c];
				bool inplace = (dt + (int)c) % 2 == 0;

				for (int op = 0; op < HERD_REDOP_COUNT; op++) {
					bad += case_allreduce(sizes[s], "ring", (herd_dtype)dt,
							      (herd_redop)op, n, (op + dt) % 2 == 0);
					bad += case_allreduce(sizes[s], "auto/tcp", (herd_dtype)dt,
							      (herd_redop)op, n, (op + dt) % 2 == 1);
				}
				bad += case_reduce(sizes[s], "ring", (herd_dtype)dt, HERD_AVG, n, inplace,
						   (dt + 1) % sizes[s]);
				bad += case_reduce_scatter(sizes[s], "ring", (herd_dtype)dt,
							   dt % 2 ? HERD_SUM : HERD_MIN, n, inplace);
				bad += case_allgather(sizes[s], "ring", (herd_dtype)dt, n, !inplace);
				bad += case_broadcast(sizes[s], "ring", (herd_dtype)dt, n, inplace,
						      dt % sizes[s]);
			}
		}
	}
	herd__algo_block_bytes = HERD__ALGO_BLOCK;
	CHECK_INT(bad, 0);
}

static void test_reduce_every_root_dtype_and_algorithm(void)
{
	static const size_t counts[] = { 0, 1, 3, 1009 };
	int bad = 0;

	for (size_t s = 0; s < NSIZES; s++)
		for (int a = 1; a < 3; a++)
			for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++)
				for (int op = 0; op < HERD_REDOP_COUNT; op++)
					for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
						bad += case_reduce(sizes[s], algos[a], (herd_dtype)dt,
								   (herd_redop)op, counts[c], c % 2 == 1,
								   (int)(c + (size_t)op) % sizes[s]);
	for (size_t s = 1; s < 4; s++)
		bad += case_reduce(sizes[s], "ring", HERD_FLOAT16, HERD_SUM, 300001, s % 2,
				   sizes[s] - 1);
	CHECK_INT(bad, 0);
}

static void test_broadcast_every_root_and_algorithm(void)
{
	static const size_t counts[] = { 0, 1, 3, 1009, 300001 };
	int bad = 0;

	for (size_t s = 0; s < NSIZES; s++)
		for (int a = 0; a < 3; a++)
			for (int root = 0; root < sizes[s]; root++)
				for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
					if (counts[c] > 2000 && root != 0 && root != sizes[s] - 1)
						continue;
					bad += case_broadcast(sizes[s], algos[a],
							      (herd_dtype)((root + (int)c) % HERD_DTYPE_COUNT),
							      counts[c], c % 2 == 0, root);
				}
	CHECK_INT(bad, 0);
}

static void test_allgather_and_reduce_scatter_every_size_and_algorithm(void)
{
	static const size_t counts[] = { 0, 1, 2, 7, 1009 };
	static const herd_dtype big_types[] = { HERD_INT64, HERD_FLOAT32, HERD_BFLOAT16 };
	int bad = 0;

	for (size_t s = 0; s < NSIZES; s++) {
		for (int a = 1; a < 3; a++) {
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
				for (int dt = 0; dt < HERD_DTYPE_COUNT; dt++) {
					bad += case_allgather(sizes[s], algos[a], (herd_dtype)dt,
							      counts[c], (dt + (int)c) % 2 == 0);
					for (int op = 0; op < HERD_REDOP_COUNT; op++)
						bad += case_reduce_scatter(sizes[s], algos[a],
									   (herd_dtype)dt, (herd_redop)op,
									   counts[c], (op + (int)c) % 2 == 0);
				}
			}
		}
		/* more than one slice of the blocks */
		for (int k = 0; k < 3; k++) {
			herd_dtype dt = big_types[k];
			size_t n = 70001;

			bad += case_allgather(sizes[s], algos[1 + k % 2], dt, n, k % 2 == 0);
			bad += case_reduce_scatter(sizes[s], algos[1 + k % 2], dt,
						   k == 2 ? HERD_AVG : HERD_SUM, n, k % 2 == 1);
		}
	}
	CHECK_INT(bad, 0);
}

static void test_alltoall_gather_scatter(void)
{
	static const size_t counts[] = { 0, 1, 5, 1009, 70001 };
	int bad = 0;

	for (size_t s = 0; s < NSIZES; s++)
		for (int a = 0; a < 3; a++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
				for (int kind = 0; kind < 3; kind++)
					bad += case_move(kind, sizes[s], algos[a],
							 (herd_dtype)((int)c * 3 % HERD_DTYPE_COUNT),
							 counts[c], (int)c % sizes[s]);
	CHECK_INT(bad, 0);
}

static void test_barrier_and_sendrecv_ring(void)
{
	int bad = 0;

	for (size_t s = 0; s < NSIZES; s++) {
		int p = sizes[s];
		herd__op ops[MAX_RANKS];
		int32_t out[MAX_RANKS][3], in[MAX_RANKS][3];

		for (int r = 0; r < p; r++)
			op_set(&ops[r], HERD__OP_BARRIER, HERD_UINT8, 0, -1, 0, NULL, NULL);
		bad += run_ranks(p, "auto", ops);
		for (int r = 0; r < p; r++) {
			for (int k = 0; k < 3; k++)
				in[r][k] = r * 10 + k;
			op_set(&ops[r], HERD__OP_SENDRECV, HERD_INT32, 0, -1, 3, in[r], out[r]);
			ops[r].recvcount = 3;
			ops[r].peer = (r + 1) % p;
			ops[r].peer2 = (r + p - 1) % p;
		}
		bad += run_ranks(p, "auto", ops);
		for (int r = 0; r < p; r++)
			for (int k = 0; k < 3; k++)
				if (out[r][k] != ((r + p - 1) % p) * 10 + k)
					bad++;
	}
	CHECK_INT(bad, 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* TEST_RUN, with the time each test took. */
#define TIMED_RUN(fn)                                                  \
	do {                                                           \
		double t0_ = now_s();                                  \
		TEST_RUN(fn);                                          \
		printf("     (%.1f s)\n", now_s() - t0_);              \
	} while (0)

int main(void)
{
	TIMED_RUN(test_allreduce_every_dtype_op_size_and_algorithm);
	TIMED_RUN(test_allreduce_large_spans_slices);
	TIMED_RUN(test_two_level_allreduce_on_uneven_hosts);
	TIMED_RUN(test_rings_follow_the_hosts);
	TIMED_RUN(test_two_level_reduce_scatter_and_allgather);
	TIMED_RUN(test_trees_cross_between_hosts_once);
	TIMED_RUN(test_rd_and_hd_by_position);
	TIMED_RUN(test_ring_algorithms_with_tiny_blocks_cross_many_slices);
	TIMED_RUN(test_reduce_every_root_dtype_and_algorithm);
	TIMED_RUN(test_broadcast_every_root_and_algorithm);
	TIMED_RUN(test_allgather_and_reduce_scatter_every_size_and_algorithm);
	TIMED_RUN(test_alltoall_gather_scatter);
	TIMED_RUN(test_barrier_and_sendrecv_ring);
	return TEST_DONE();
}
