/*
 * shell/cmd_bench.c - `herd bench OP`: a benchmark of one collective over a
 * range of sizes, with the columns, the timing and the bandwidth formulas
 * of nccl-tests, so its tables read side by side with theirs.
 *
 * Ranks.  With -n N (--np N) the command launches N copies of itself on this host
 * as a job (herd_job_launch, as `herd launch -n N` would), which join with
 * herd_comm_init_env like any program; it forwards what they write on
 * stderr as "[rank R] ...", waits for the job with a deadline, and reports
 * the job's first failure.  Rank 0's standard output is the command's.  Without -n, a process started by
 * herd launch, srun, mpirun or torchrun joins the ranks it was given
 * (herd_comm_init_env), and -n, if given, must be their number; anywhere
 * else -n 1 is implied.  nccl-tests' -n (iterations) is --iters here.
 *
 * Timing, per size and for out-of-place then in-place: fill the inputs,
 * warmup calls, a barrier, `iters` timed calls; the time of a call is the
 * elapsed time over iters, the maximum over ranks, in microseconds.  On a
 * GPU, as nccl-tests without -z 1, the calls that have a stream-ordered
 * form (allreduce, reduce, broadcast, allgather, reduce_scatter) are
 * queued on the legacy default stream and waited for once, after the
 * warmup and after the timed calls; -z 1 makes every call blocking.  With
 * -c 1 the inputs are filled again (bench_data.h) and one more call is
 * checked element by element against the exact expected result; #wrong is
 * the sum over ranks of the elements that differ.
 *
 * Sizes and bandwidths are nccl-tests' (its getCollByteCount and getBw):
 *
 *   op              count column       size column      algbw bytes    busbw
 *   allreduce       size / es          count * es       count * es     x 2(n-1)/n
 *   broadcast       size / es          count * es       count * es     x 1
 *   reduce          size / es          count * es       count * es     x 1
 *   sendrecv        size / es          count * es       count * es     x 1
 *   allgather       per rank: c        c * n * es       c * n * es     x (n-1)/n
 *   reduce_scatter  per rank: c        c * n * es       c * n * es     x (n-1)/n
 *   alltoall        per pair: c        c * n * es       c * n * es     x (n-1)/n
 *
 * with c = size / es / n rounded down to a multiple of 16 bytes' worth of
 * elements, es the element size, algbw = bytes / time in GB/s (10^9).
 * sendrecv sends to rank + 1 and receives from rank - 1.  alltoall and
 * sendrecv have no in-place form in herd/comm.h: their in-place columns say
 * N/A and do not count in the average.
 *
 * --json prints, instead of the table, one JSON object per size and line
 * (JSON Lines), with the fields of a row:
 *   {"op":"allreduce","ranks":4,"size":1024,"count":256,"type":"float32",
 *    "redop":"sum","root":-1,
 *    "out_of_place":{"time_us":12.3,"median_us":11.9,"p99_us":20.1,
 *                    "algbw":0.08,"busbw":0.12,"wrong":0},
 *    "in_place":{...}}
 * "wrong" is null without -c 1, "in_place" null where there is none.
 * With --json each timed call is also timed by itself, from the end of the
 * one before (a clock read after each, which the table's loop does not
 * pay): "median_us" and "p99_us" are each rank's median and 99th
 * percentile (nearest rank) of its iters calls, combined over the ranks as
 * -a says (by default the slowest rank's), where an average hides a few
 * slow calls (a busy machine).  They are null for calls queued on a GPU
 * stream.
 *
 * Exit status: 0; 1 when a call failed, an element was wrong, the ranks
 * ran past the deadline or --device gpu found no GPU; 2 for a usage error;
 * 141 (128 + SIGPIPE) when the reader of the output went away.
 *
 * Said once for the job, not once per rank: that the machine is busy (by
 * the launcher of --np, else by rank 0), that --device gpu has no GPU (by
 * the launcher of --np, else by the lowest rank without one, after every
 * rank has looked).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "herd.h"
#include "herd/comm.h"
#include "herd/device.h"
#include "herd/job.h"
#include "bench_data.h"
#include "shell.h"

static const char bench_usage[] =
	"usage: herd bench OP [options]\n"
	"  OP is allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall\n"
	"  or sendrecv (nccl-tests' names work too: all_reduce, all_gather, and\n"
	"  all_reduce_perf...).  Options (nccl-tests' letters, but -n; SIZE takes K,\n"
	"  M, G; never abbreviated):\n"
	"  -n, --np, -np N          number of ranks, started here (default: those of\n"
	"                           herd launch, srun, mpirun or torchrun, else 1);\n"
	"                           not nccl-tests' -n, whose iterations are --iters\n"
	"                           here: -n 20 starts 20 ranks.  Under a launcher it\n"
	"                           must be the launcher's count (it joins its ranks)\n"
	"  -b, --minbytes SIZE      smallest size (default 32M)\n"
	"  -e, --maxbytes SIZE      largest size (default 32M)\n"
	"  -f, --stepfactor N       multiply the size by N from row to row (default 2)\n"
	"  -i, --stepbytes SIZE     add SIZE from row to row instead\n"
	"  --iters N                timed calls per size (default 20)\n"
	"  -w, --warmup_iters N     untimed calls before them (default 5)\n"
	"  -c, --check 0|1          check every result, count wrong elements (default 1)\n"
	"  -d, --datatype TYPE      float32 (default), float16, bfloat16, float64,\n"
	"                           float8_e4m3, float8_e5m2, int8, uint8, int32,\n"
	"                           uint32, int64, uint64\n"
	"  -o, --op OP              reduction: sum (default), prod, min, max, avg\n"
	"  -r, --root N             root of broadcast and reduce (default 0)\n"
	"  -a, --average 0|1|2|3    time reported: rank 0's, the mean, the fastest or\n"
	"                           (default 3, unlike nccl-tests' 1) the slowest rank's\n"
	"  -N, --run_cycles N       run the whole sweep N times (default 1)\n"
	"  -t, --nthreads 1         nccl-tests' threads per process: herd runs one\n"
	"  -g, --ngpus 1            nccl-tests' GPUs per thread: herd uses one per rank\n"
	"  --transport auto|tcp     default HERD_TRANSPORT, else auto\n"
	"  --algo auto|ring|rd|hier default HERD_ALGO, else auto\n"
	"  --timeout SEC            deadline of each call, and with -n of the run\n"
	"                           (default: calls HERD_TIMEOUT or 300 s, run 3600 s)\n"
	"  --device host|gpu        where the buffers are (default host); gpu: each\n"
	"                           rank's GPU (its local rank among the GPUs it\n"
	"                           sees), filled and checked by kernels, the calls\n"
	"                           through NCCL\n"
	"  -z, --blocking 0|1       with --device gpu: 0 (default) queues the calls\n"
	"                           that have a stream-ordered form and waits once\n"
	"                           after all, as nccl-tests; 1 waits for each call\n"
	"                           (every call on host memory does)\n"
	"  --json                   one JSON object per size and line, not a table,\n"
	"                           with each call's median and 99th percentile\n"
	"  --explain                say, per size, which algorithm runs the call and\n"
	"                           why (a \"# algorithm\" line above the table)\n"
	"Without -n or a launcher's variables it runs one rank and says so.  It\n"
	"warns on stderr when the machine is busy (load average above 0.5 per CPU\n"
	"it does not use), as the figures are then noisy.\n"
	"Columns, formulas and JSON fields are nccl-tests'; see shell/cmd_bench.c.\n"
	"Exit status:\n"
	"  0    every call ran and every checked result was right\n"
	"  1    a call failed, a result was wrong (#wrong), the ranks ran past\n"
	"       the deadline, or --device gpu found no GPU\n"
	"  2    a usage error (and --device gpu in a herd built without CUDA)\n"
	"  141  the reader of the output went away (... --json | head -1), as\n"
	"       yes | head does\n";

/* Deadline of a --np run when --timeout is not given. */
#define BENCH_RUN_DEADLINE_S 3600
#define BENCH_MAX_RANKS 1024
/* How a rank started by --np tells its launcher that the calls worked but
 * results were wrong (the launcher exits 1 either way). */
#define BENCH_EXIT_WRONG 3

struct bench_args {
	const struct bench_op *op;
	size_t minbytes, maxbytes, stepbytes;
	long stepfactor;
	int iters, warmup, check, root, np, json, timeout_s, average, cycles, explain;
	int gpu;           /* --device gpu: buffers in the rank's GPU memory */
	int blocking;      /* -z 1: no stream-ordered calls on a GPU */
	herd_dtype dtype;
	herd_redop redop;
	const char *transport, *algo;
	/* the arguments of -n/--np: what the ranks of --np do not get */
	const char *np_args[16];
	int n_np_args;
};

/* The buffers and counts of one size, in elements. */
struct bench_shape {
	size_t count;      /* the count column */
	size_t size;       /* the size column, bytes */
	size_t send_count; /* elements of the send buffer */
	size_t recv_count; /* elements of the receive buffer */
	double bw_bytes;   /* bytes per call for algbw */
};

/* What one rank's benchmark works on. */
struct bench_ctx {
	const struct bench_args *args;
	herd_comm *comm;
	int rank, nranks;
	herd_dtype dtype;
	size_t es;
	int broken;     /* a call failed: the communicator can only be aborted */
	uint64_t wrong; /* wrong elements, summed over ranks */
	bench_pattern pat;
	struct bench_shape shape;
	unsigned char *send, *recv;   /* device memory with --device gpu */
	int queued;     /* GPU calls on the legacy default stream, stream-ordered */
	double *call_us; /* --json: [iters] each timed call's time, NULL otherwise */
};

/* One collective: its sizes, bandwidth factor and its fill, run and check
 * for out-of-place (inplace 0) and in-place (1). */
struct bench_op {
	const char *name;
	herd_comm_op kind;   /* herd's call, for --explain */
	int reduces, rooted, has_inplace;
	int per_rank; /* count is size / n (allgather, reduce_scatter, alltoall) */
	double (*busbw_factor)(int n);
	void (*fill)(struct bench_ctx *c, int inplace);
	herd_status (*run)(struct bench_ctx *c, int inplace);
	size_t (*check)(const struct bench_ctx *c, int inplace);
};

/* ------------------------------------------------------------ formulas */

static double factor_one(int n)
{
	(void)n;
	return 1.0;
}

static double factor_allreduce(int n)
{
	return 2.0 * (n - 1) / n;
}

static double factor_gather(int n)
{
	return (double)(n - 1) / n;
}

static void shape_of(const struct bench_op *op, size_t bytes, size_t es, int n,
		     struct bench_shape *s)
{
	size_t count = bytes / es;
	if (!op->per_rank) {
		s->count = s->send_count = s->recv_count = count;
		s->size = count * es;
		s->bw_bytes = (double)s->size;
		return;
	}
	size_t align = 16 / es;
	size_t per = count / (size_t)n / align * align;
	s->count = per;
	s->size = per * (size_t)n * es;
	s->bw_bytes = (double)s->size;
	s->send_count = strcmp(op->name, "allgather") == 0 ? per : per * (size_t)n;
	s->recv_count = strcmp(op->name, "reduce_scatter") == 0 ? per : per * (size_t)n;
}

/* ------------------------------------------------------ the operations */

static unsigned char *elem(unsigned char *buf, const struct bench_ctx *c, size_t i)
{
	return buf + i * c->es;
}

/* allreduce, reduce: recv = op(send) (in-place: in recv). */
static void fill_reduce(struct bench_ctx *c, int inplace)
{
	size_t n = c->shape.count;
	bench_fill(inplace ? c->recv : c->send, n, c->dtype, c->pat, c->rank, 0);
	if (!inplace)
		bench_clear(c->recv, n, c->dtype);
}

static size_t check_allreduce(const struct bench_ctx *c, int inplace)
{
	(void)inplace;
	return bench_check_reduce(c->recv, c->shape.count, c->dtype, c->args->redop, c->nranks,
				  0);
}

static herd_status run_allreduce(struct bench_ctx *c, int inplace)
{
	const void *send = inplace ? c->recv : c->send;

	if (c->queued)
		return herd_comm_allreduce_stream(c->comm, send, c->recv, c->shape.count,
						  c->dtype, c->args->redop, NULL);
	return herd_comm_allreduce(c->comm, send, c->recv, c->shape.count, c->dtype,
				   c->args->redop);
}

static herd_status run_reduce(struct bench_ctx *c, int inplace)
{
	const void *send = inplace ? c->recv : c->send;

	if (c->queued)
		return herd_comm_reduce_stream(c->comm, send, c->recv, c->shape.count, c->dtype,
					       c->args->redop, c->args->root, NULL);
	return herd_comm_reduce(c->comm, send, c->recv, c->shape.count, c->dtype,
				c->args->redop, c->args->root);
}

static size_t check_reduce(const struct bench_ctx *c, int inplace)
{
	return c->rank == c->args->root ? check_allreduce(c, inplace) : 0;
}

/* broadcast: recv = root's send (in-place: root's recv). */
static void fill_broadcast(struct bench_ctx *c, int inplace)
{
	size_t n = c->shape.count;
	bench_clear(c->recv, n, c->dtype);
	if (c->rank == c->args->root)
		bench_fill(inplace ? c->recv : c->send, n, c->dtype, c->pat, c->rank, 0);
}

static herd_status run_broadcast(struct bench_ctx *c, int inplace)
{
	const void *send = inplace ? c->recv : c->send;

	if (c->queued)
		return herd_comm_broadcast_stream(c->comm, send, c->recv, c->shape.count,
						  c->dtype, c->args->root, NULL);
	return herd_comm_broadcast(c->comm, send, c->recv, c->shape.count, c->dtype,
				   c->args->root);
}

static size_t check_broadcast(const struct bench_ctx *c, int inplace)
{
	(void)inplace;
	return bench_check_copy(c->recv, c->shape.count, c->dtype, c->pat, c->args->root, 0);
}

/* allgather: block r of recv = rank r's send (in-place: the send block is
 * recv's own block). */
static void fill_allgather(struct bench_ctx *c, int inplace)
{
	size_t per = c->shape.count;
	bench_clear(c->recv, per * (size_t)c->nranks, c->dtype);
	bench_fill(inplace ? elem(c->recv, c, per * (size_t)c->rank) : c->send, per, c->dtype,
		   c->pat, c->rank, 0);
}

static herd_status run_allgather(struct bench_ctx *c, int inplace)
{
	size_t per = c->shape.count;
	const void *send = inplace ? elem(c->recv, c, per * (size_t)c->rank) : c->send;

	if (c->queued)
		return herd_comm_allgather_stream(c->comm, send, c->recv, per, c->dtype, NULL);
	return herd_comm_allgather(c->comm, send, c->recv, per, c->dtype);
}

static size_t check_allgather(const struct bench_ctx *c, int inplace)
{
	(void)inplace;
	size_t per = c->shape.count, wrong = 0;
	for (int r = 0; r < c->nranks; r++)
		wrong += bench_check_copy(c->recv + (size_t)r * per * c->es, per, c->dtype, c->pat,
					  r, 0);
	return wrong;
}

/* reduce_scatter: recv = block rank of op(send) (in-place: recv is send's
 * own block). */
static void fill_reduce_scatter(struct bench_ctx *c, int inplace)
{
	size_t per = c->shape.count;
	bench_fill(c->send, per * (size_t)c->nranks, c->dtype, c->pat, c->rank, 0);
	if (!inplace)
		bench_clear(c->recv, per, c->dtype);
}

static unsigned char *rs_out(const struct bench_ctx *c, int inplace)
{
	return inplace ? c->send + c->shape.count * (size_t)c->rank * c->es : c->recv;
}

static herd_status run_reduce_scatter(struct bench_ctx *c, int inplace)
{
	if (c->queued)
		return herd_comm_reduce_scatter_stream(c->comm, c->send, rs_out(c, inplace),
						       c->shape.count, c->dtype, c->args->redop,
						       NULL);
	return herd_comm_reduce_scatter(c->comm, c->send, rs_out(c, inplace), c->shape.count,
					c->dtype, c->args->redop);
}

static size_t check_reduce_scatter(const struct bench_ctx *c, int inplace)
{
	size_t per = c->shape.count;
	return bench_check_reduce(rs_out(c, inplace), per, c->dtype, c->args->redop, c->nranks,
				  per * (size_t)c->rank);
}

/* alltoall: block i of recv = block rank of rank i's send. */
static void fill_alltoall(struct bench_ctx *c, int inplace)
{
	(void)inplace;
	size_t all = c->shape.count * (size_t)c->nranks;
	bench_fill(c->send, all, c->dtype, c->pat, c->rank, 0);
	bench_clear(c->recv, all, c->dtype);
}

static herd_status run_alltoall(struct bench_ctx *c, int inplace)
{
	(void)inplace;
	return herd_comm_alltoall(c->comm, c->send, c->recv, c->shape.count, c->dtype);
}

static size_t check_alltoall(const struct bench_ctx *c, int inplace)
{
	(void)inplace;
	size_t per = c->shape.count, wrong = 0;
	for (int i = 0; i < c->nranks; i++)
		wrong += bench_check_copy(c->recv + (size_t)i * per * c->es, per, c->dtype, c->pat,
					  i, per * (size_t)c->rank);
	return wrong;
}

/* sendrecv: to rank + 1, from rank - 1. */
static void fill_sendrecv(struct bench_ctx *c, int inplace)
{
	(void)inplace;
	bench_fill(c->send, c->shape.count, c->dtype, c->pat, c->rank, 0);
	bench_clear(c->recv, c->shape.count, c->dtype);
}

static int prev_rank(const struct bench_ctx *c)
{
	return (c->rank + c->nranks - 1) % c->nranks;
}

static herd_status run_sendrecv(struct bench_ctx *c, int inplace)
{
	(void)inplace;
	size_t n = c->shape.count;
	return herd_comm_sendrecv(c->comm, c->send, n, (c->rank + 1) % c->nranks, c->recv, n,
				  prev_rank(c), c->dtype);
}

static size_t check_sendrecv(const struct bench_ctx *c, int inplace)
{
	(void)inplace;
	return bench_check_copy(c->recv, c->shape.count, c->dtype, c->pat, prev_rank(c), 0);
}

static const struct bench_op bench_ops[] = {
	{ "allreduce", HERD_COMM_OP_ALLREDUCE, 1, 0, 1, 0, factor_allreduce, fill_reduce,
	  run_allreduce, check_allreduce },
	{ "allgather", HERD_COMM_OP_ALLGATHER, 0, 0, 1, 1, factor_gather, fill_allgather,
	  run_allgather, check_allgather },
	{ "reduce_scatter", HERD_COMM_OP_REDUCE_SCATTER, 1, 0, 1, 1, factor_gather,
	  fill_reduce_scatter, run_reduce_scatter, check_reduce_scatter },
	{ "broadcast", HERD_COMM_OP_BROADCAST, 0, 1, 1, 0, factor_one, fill_broadcast,
	  run_broadcast, check_broadcast },
	{ "reduce", HERD_COMM_OP_REDUCE, 1, 1, 1, 0, factor_one, fill_reduce, run_reduce,
	  check_reduce },
	{ "alltoall", HERD_COMM_OP_ALLTOALL, 0, 0, 0, 1, factor_gather, fill_alltoall,
	  run_alltoall, check_alltoall },
	{ "sendrecv", HERD_COMM_OP_SENDRECV, 0, 0, 0, 0, factor_one, fill_sendrecv, run_sendrecv,
	  check_sendrecv },
};

/* An operation by herd's name or nccl-tests' (all_reduce, all_reduce_perf):
 * underscores and a _perf suffix aside, the names are the same. */
static const struct bench_op *find_op(const char *name)
{
	char plain[32];
	size_t k = 0, n = strlen(name);

	if (n > 5 && strcmp(name + n - 5, "_perf") == 0)
		n -= 5;
	for (size_t i = 0; i < n && k + 1 < sizeof(plain); i++)
		if (name[i] != '_')
			plain[k++] = name[i];
	plain[k] = '\0';
	for (size_t i = 0; i < sizeof(bench_ops) / sizeof(bench_ops[0]); i++) {
		char want[32];
		size_t m = 0;

		for (const char *p = bench_ops[i].name; *p != '\0' && m + 1 < sizeof(want); p++)
			if (*p != '_')
				want[m++] = *p;
		want[m] = '\0';
		if (strcmp(want, plain) == 0)
			return &bench_ops[i];
	}
	return NULL;
}

/* -------------------------------------------------------- command line */

enum { OPT_ITERS = 256, OPT_JSON, OPT_TRANSPORT, OPT_ALGO, OPT_TIMEOUT, OPT_DEVICE, OPT_EXPLAIN };

static const char short_options[] = ":b:e:f:i:n:w:c:d:t:g:a:N:o:r:z:h";

static const struct option long_options[] = {
	{ "minbytes", required_argument, NULL, 'b' },
	{ "maxbytes", required_argument, NULL, 'e' },
	{ "stepfactor", required_argument, NULL, 'f' },
	{ "stepbytes", required_argument, NULL, 'i' },
	{ "iters", required_argument, NULL, OPT_ITERS },
	{ "warmup_iters", required_argument, NULL, 'w' },
	{ "check", required_argument, NULL, 'c' },
	{ "datatype", required_argument, NULL, 'd' },
	{ "nthreads", required_argument, NULL, 't' },
	{ "ngpus", required_argument, NULL, 'g' },
	{ "average", required_argument, NULL, 'a' },
	{ "run_cycles", required_argument, NULL, 'N' },
	{ "op", required_argument, NULL, 'o' },
	{ "root", required_argument, NULL, 'r' },
	{ "np", required_argument, NULL, 'n' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "algo", required_argument, NULL, OPT_ALGO },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "device", required_argument, NULL, OPT_DEVICE },
	{ "blocking", required_argument, NULL, 'z' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* mpirun's -np, which getopt_long would read as -n p. */
static const shell_habit habits[] = {
	{ "-np", true, "-n", NULL },
	{ NULL, false, NULL, NULL }
};

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "herd bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'herd bench --help' for more information.\n");
	return SHELL_EXIT_USAGE;
}

/* An operation that is none of bench_ops, with the nearest one, as a
 * mistyped command is answered (shell_nearest). */
static int unknown_op(const char *word)
{
	const char *near = shell_nearest(word, &bench_ops[0].name,
					 sizeof(bench_ops) / sizeof(*bench_ops), sizeof(*bench_ops));
	char msg[160];

	if (near == NULL)
		return usage_error("unknown operation '%s' (allreduce, allgather, reduce_scatter, "
				   "broadcast, reduce, alltoall, sendrecv)", word);
	snprintf(msg, sizeof(msg), "unknown operation '%.64s'; did you mean '%s'?", word, near);
	return usage_error("%s", msg);
}

/* The option's name as written, for messages ("-b", "--np"). */
static const char *opt_name(int c, char *buf, size_t cap)
{
	for (const struct option *o = long_options; o->name; o++)
		if (o->val == c && c >= OPT_ITERS) {
			snprintf(buf, cap, "--%s", o->name);
			return buf;
		}
	snprintf(buf, cap, "-%c", c);
	return buf;
}

/* One option with its value; -1 to go on, else the exit status. */
static int parse_option(int c, const char *v, struct bench_args *a)
{
	char name[32];
	int bad = 0;
	int f;
	switch (c) {
	case 'b': bad = bench_parse_size(v, &a->minbytes); break;
	case 'e': bad = bench_parse_size(v, &a->maxbytes); break;
	case 'i': bad = bench_parse_size(v, &a->stepbytes) || a->stepbytes == 0; break;
	case 'f':
		bad = shell_parse_int(v, 1, 1 << 20, &f);
		if (!bad)
			a->stepfactor = f;
		break;
	case OPT_ITERS: bad = shell_parse_int(v, 1, INT_MAX, &a->iters); break;
	case 'w': bad = shell_parse_int(v, 0, INT_MAX, &a->warmup); break;
	case 'c': bad = shell_parse_int(v, 0, 1, &a->check); break;
	case 'z': bad = shell_parse_int(v, 0, 1, &a->blocking); break;
	case 'r': bad = shell_parse_int(v, 0, BENCH_MAX_RANKS - 1, &a->root); break;
	case 'n':
		/* -n and --np are one option: the number of ranks */
		if (shell_parse_int(v, 1, BENCH_MAX_RANKS, &f) != 0) {
			bad = 1;
		} else if (a->np != 0 && a->np != f) {
			char msg[160];

			snprintf(msg, sizeof(msg), "-n/--np %s: the number of ranks is %d already "
				 "(timed calls per size: --iters)", v, a->np);
			return usage_error("%s", msg);
		} else {
			a->np = f;
		}
		break;
	case OPT_TIMEOUT: bad = shell_parse_int(v, 1, INT_MAX / 1000, &a->timeout_s); break;
	case 'd':
		if (herd_dtype_parse(v, &a->dtype) != HERD_OK)
			return usage_error("%s", shell_last_error());
		break;
	case 't':
	case 'g':
		/* nccl-tests' threads per process and GPUs per thread: herd has
		 * one of each per rank, and more ranks for more. */
		if (shell_parse_int(v, 1, 1, &f) == 0)
			break;
		if (c == 't' && herd_dtype_parse(v, &(herd_dtype){ 0 }) == HERD_OK)
			return usage_error("-t %s: -t is nccl-tests' thread count; the datatype "
					   "is -d", v);
		return usage_error(c == 't' ? "-t %s: herd bench runs one thread per rank; "
				   "start more ranks with -n N or a launcher"
				   : "-g %s: herd bench uses one GPU per rank; start more ranks "
				   "with -n N or a launcher", v);
	case 'a': bad = shell_parse_int(v, 0, 3, &a->average); break;
	case 'N':
		if (strcmp(v, "0") == 0)
			return usage_error("-N %s: nccl-tests' 0 (run forever) is not offered; give "
					   "a number of cycles", v);
		bad = shell_parse_int(v, 1, 1000000, &a->cycles);
		break;
	case 'o':
		if (herd_redop_parse(v, &a->redop) != HERD_OK)
			return usage_error("%s", shell_last_error());
		break;
	case OPT_TRANSPORT:
		bad = strcmp(v, "auto") != 0 && strcmp(v, "tcp") != 0;
		a->transport = v;
		break;
	case OPT_ALGO:
		bad = strcmp(v, "auto") != 0 && strcmp(v, "ring") != 0 && strcmp(v, "rd") != 0 &&
		      strcmp(v, "hier") != 0;
		a->algo = v;
		break;
	case OPT_DEVICE:
		bad = strcmp(v, "host") != 0 && strcmp(v, "gpu") != 0;
		a->gpu = strcmp(v, "gpu") == 0;
		break;
	default:
		break;
	}
	if (bad) {
		fprintf(stderr, "herd bench: bad value '%s' for %s\n"
			"Try 'herd bench --help' for more information.\n", v,
			opt_name(c, name, sizeof(name)));
		return SHELL_EXIT_USAGE;
	}
	return -1;
}

/* Parses argv (argv[0] is "bench"); returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct bench_args *a)
{
	*a = (struct bench_args){ .minbytes = 32u << 20, .maxbytes = 32u << 20,
				  .stepfactor = 2, .iters = 20, .warmup = 5, .check = 1,
				  .dtype = HERD_FLOAT32, .redop = HERD_SUM, .average = 3,
				  .cycles = 1 };
	char name[32];
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
		if (c == 'h') {
			fputs(bench_usage, stdout);
			return SHELL_EXIT_OK;
		}
		if (c == ':') {
			if (optopt)
				return usage_error("option '%s' needs a value",
						   opt_name(optopt, name, sizeof(name)));
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		}
		if (c == '?') {
			if (optopt) {
				snprintf(name, sizeof(name), "-%c", optopt);
				return usage_error("unrecognized option '%s'", name);
			}
			return usage_error("unrecognized option '%s'", argv[optind - 1]);
		}
		if (c == OPT_JSON || c == OPT_EXPLAIN) {
			*(c == OPT_JSON ? &a->json : &a->explain) = 1;
			continue;
		}
		/* The arguments that gave the rank count: not the ranks'. */
		if (c == 'n' && a->n_np_args + 2 <= (int)(sizeof(a->np_args) / sizeof(*a->np_args))) {
			a->np_args[a->n_np_args++] = argv[optind - 1];
			if (optarg == argv[optind - 1] && optind >= 2)
				a->np_args[a->n_np_args++] = argv[optind - 2];
		}
		int st = parse_option(c, optarg, a);
		if (st >= 0)
			return st;
	}
	if (optind >= argc)
		return usage_error("%s", "which operation? (allreduce, allgather, ...)");
	a->op = find_op(argv[optind]);
	if (a->op == NULL)
		return unknown_op(argv[optind]);
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (a->minbytes > a->maxbytes)
		return usage_error("%s", "-b (minbytes) is larger than -e (maxbytes)");
	if (a->minbytes < herd_dtype_size(a->dtype)) {
		char msg[128];

		snprintf(msg, sizeof(msg), "-b %zu: under one %s element (%zu bytes); the rows "
			 "would move nothing", a->minbytes, herd_dtype_name(a->dtype),
			 herd_dtype_size(a->dtype));
		return usage_error("%s", msg);
	}
	return -1;
}

/* The next size of the sweep; 0 after the last. */
static size_t next_size(const struct bench_args *a, size_t size)
{
	size_t next;
	if (a->stepbytes > 0 || a->stepfactor <= 1) {
		size_t step = a->stepbytes > 0 ? a->stepbytes : 1u << 20;
		if (size > SIZE_MAX - step)
			return 0;
		next = size + step;
	} else {
		if (size == 0)
			return 0; /* 0 * factor: a sweep from 0 has one row */
		if (size > SIZE_MAX / (size_t)a->stepfactor)
			return 0;
		next = size * (size_t)a->stepfactor;
	}
	return next <= a->maxbytes ? next : 0;
}

/* ------------------------------------------------------------ one rank */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct bench_result {
	double time_us, algbw, busbw;
	double median_us, p99_us;   /* --json: per call; negative when not measured */
	uint64_t wrong;
};

/*
 * On a GPU herd_device_fill and herd_device_verify make nccl-tests' data:
 * a rank's contribution from (seed, index, rank) and the reduction of all
 * of them checked element by element.  Each block of the allgather and
 * reduce_scatter buffers has its own seed, so that a block is checked from
 * index 0; the broadcast's and allgather's copies are "reductions" of one
 * rank, as are the alltoall's blocks (one seed per sender and receiver)
 * and the sendrecv's buffer.  Seeds differ between sizes and between out
 * of place and in place, so that what an earlier call left is never taken
 * for a result.
 */
static uint64_t gpu_seed(const struct bench_ctx *c, int inplace)
{
	return (uint64_t)c->shape.size * 2 + (uint64_t)inplace;
}

/* The seed of the alltoall block rank from sends to rank to. */
static uint64_t pair_seed(const struct bench_ctx *c, uint64_t seed, int from, int to)
{
	return seed + 1 + (uint64_t)from * (uint64_t)c->nranks + (uint64_t)to;
}

static unsigned char *gpu_block(unsigned char *buf, const struct bench_ctx *c, int b)
{
	return buf + (size_t)b * c->shape.count * c->es;
}

static herd_status gpu_fill(struct bench_ctx *c, int inplace)
{
	const char *op = c->args->op->name;
	uint64_t seed = gpu_seed(c, inplace);
	size_t n = c->shape.count;
	herd_status st = HERD_OK;

	if (strcmp(op, "broadcast") == 0)
		return c->rank != c->args->root ? HERD_OK
			: herd_device_fill(inplace ? c->recv : c->send, n, c->dtype, HERD_SUM, 0,
					   1, seed, NULL);
	if (strcmp(op, "allgather") == 0)
		return herd_device_fill(inplace ? gpu_block(c->recv, c, c->rank) : c->send, n,
					c->dtype, HERD_SUM, 0, 1, seed + 1 + (uint64_t)c->rank,
					NULL);
	if (strcmp(op, "reduce_scatter") == 0) {
		for (int b = 0; b < c->nranks && st == HERD_OK; b++)
			st = herd_device_fill(gpu_block(c->send, c, b), n, c->dtype, c->args->redop,
					      c->rank, c->nranks, seed + 1 + (uint64_t)b, NULL);
		return st;
	}
	if (strcmp(op, "alltoall") == 0) {
		for (int b = 0; b < c->nranks && st == HERD_OK; b++)
			st = herd_device_fill(gpu_block(c->send, c, b), n, c->dtype, HERD_SUM, 0, 1,
					      pair_seed(c, seed, c->rank, b), NULL);
		return st;
	}
	if (strcmp(op, "sendrecv") == 0)
		return herd_device_fill(c->send, n, c->dtype, HERD_SUM, 0, 1,
					seed + 1 + (uint64_t)c->rank, NULL);
	return herd_device_fill(inplace ? c->recv : c->send, n, c->dtype, c->args->redop,
				c->rank, c->nranks, seed, NULL);
}

static herd_status gpu_check(const struct bench_ctx *c, int inplace, uint64_t *wrong)
{
	const char *op = c->args->op->name;
	uint64_t seed = gpu_seed(c, inplace), w = 0;
	size_t n = c->shape.count;
	herd_status st = HERD_OK;

	*wrong = 0;
	if (strcmp(op, "broadcast") == 0)
		return herd_device_verify(c->recv, n, c->dtype, HERD_SUM, 1, seed, NULL, wrong);
	if (strcmp(op, "allgather") == 0) {
		for (int b = 0; b < c->nranks && st == HERD_OK; b++) {
			st = herd_device_verify(gpu_block(c->recv, c, b), n, c->dtype, HERD_SUM, 1,
						seed + 1 + (uint64_t)b, NULL, &w);
			*wrong += w;
		}
		return st;
	}
	if (strcmp(op, "reduce_scatter") == 0)
		return herd_device_verify(inplace ? gpu_block(c->send, c, c->rank) : c->recv, n,
					  c->dtype, c->args->redop, c->nranks,
					  seed + 1 + (uint64_t)c->rank, NULL, wrong);
	if (strcmp(op, "alltoall") == 0) {
		for (int b = 0; b < c->nranks && st == HERD_OK; b++) {
			st = herd_device_verify(gpu_block(c->recv, c, b), n, c->dtype, HERD_SUM, 1,
						pair_seed(c, seed, b, c->rank), NULL, &w);
			*wrong += w;
		}
		return st;
	}
	if (strcmp(op, "sendrecv") == 0)
		return herd_device_verify(c->recv, n, c->dtype, HERD_SUM, 1,
					  seed + 1 + (uint64_t)prev_rank(c), NULL, wrong);
	if (strcmp(op, "reduce") == 0 && c->rank != c->args->root)
		return HERD_OK;
	return herd_device_verify(c->recv, n, c->dtype, c->args->redop, c->nranks, seed, NULL,
				  wrong);
}

/*
 * The inputs of a call, and the count of wrong elements of its result: on
 * the host by the operation's own fill and check (bench_data.h), on a GPU
 * by herd/device.h (gpu_fill, gpu_check).
 */
static herd_status fill(struct bench_ctx *c, int inplace)
{
	if (!c->args->gpu) {
		c->args->op->fill(c, inplace);
		return HERD_OK;
	}
	return gpu_fill(c, inplace);
}

static herd_status check(const struct bench_ctx *c, int inplace, uint64_t *wrong)
{
	if (!c->args->gpu) {
		*wrong = c->args->op->check(c, inplace);
		return HERD_OK;
	}
	return gpu_check(c, inplace, wrong);
}

/* After calls queued on a GPU's stream: waits until they are done, and
 * returns the failure of any (the communicator's, which the watchdog
 * breaks). */
static herd_status settle(struct bench_ctx *c, herd_status st)
{
	if (st != HERD_OK || !c->queued)
		return st;
	st = herd_device_sync(NULL);
	return st != HERD_OK ? st : herd_comm_async_error(c->comm);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/*
 * --json: the median and 99th percentile of the timed calls.  Each rank
 * sorts its own calls' times (each from the end of the call before): the
 * median is the middle one (the mean of the middle two), the 99th
 * percentile the ceil(0.99 n)-th (nearest rank); both are then combined
 * over the ranks as -a says, as the average is (by default the slowest
 * rank's).  Queued GPU calls (no -z 1) have no time of their own: both
 * stay unmeasured.
 */
static herd_status per_call(struct bench_ctx *c, herd_redop how, struct bench_result *res)
{
	const struct bench_args *a = c->args;
	size_t n = (size_t)a->iters, k = (size_t)((double)n * 0.99);
	double q[2];

	if (c->queued)
		return HERD_OK;
	qsort(c->call_us, n, sizeof(double), cmp_double);
	if ((double)k < (double)n * 0.99)
		k++;
	q[0] = n % 2 ? c->call_us[n / 2] : (c->call_us[n / 2 - 1] + c->call_us[n / 2]) / 2;
	q[1] = c->call_us[k > 0 ? k - 1 : 0];
	if (a->average == 0 && c->rank != 0)
		q[0] = q[1] = 0;
	herd_status st = herd_comm_allreduce(c->comm, q, q, 2, HERD_FLOAT64, how);
	if (st != HERD_OK)
		return st;
	res->median_us = q[0];
	res->p99_us = q[1];
	return HERD_OK;
}

/* Runs and times one size in one placement; the result is every rank's. */
static herd_status measure(struct bench_ctx *c, int inplace, struct bench_result *res)
{
	const struct bench_args *a = c->args;
	herd_status st = fill(c, inplace);
	for (int i = 0; i < a->warmup && st == HERD_OK; i++)
		st = a->op->run(c, inplace);
	st = settle(c, st);
	if (st == HERD_OK)
		st = herd_comm_barrier(c->comm);
	if (st != HERD_OK)
		return st;
	double t0 = now_s();
	if (c->call_us != NULL) {
		/* --json: each call timed by itself as well (per_call). */
		double prev = t0;
		for (int i = 0; i < a->iters && st == HERD_OK; i++) {
			st = a->op->run(c, inplace);
			double t = now_s();
			c->call_us[i] = (t - prev) * 1e6;
			prev = t;
		}
	} else {
		for (int i = 0; i < a->iters && st == HERD_OK; i++)
			st = a->op->run(c, inplace);
	}
	st = settle(c, st);
	double us = (now_s() - t0) * 1e6 / a->iters;
	/* -a: rank 0's time (the others add 0), the mean, the fastest, the slowest. */
	static const herd_redop how[] = { HERD_SUM, HERD_AVG, HERD_MIN, HERD_MAX };
	if (a->average == 0 && c->rank != 0)
		us = 0;
	if (st == HERD_OK)
		st = herd_comm_allreduce(c->comm, &us, &us, 1, HERD_FLOAT64, how[a->average]);
	res->median_us = res->p99_us = -1;
	if (st == HERD_OK && c->call_us != NULL)
		st = per_call(c, how[a->average], res);
	if (st != HERD_OK)
		return st;
	res->time_us = us;
	res->algbw = us > 0 ? c->shape.bw_bytes / 1e9 / (us * 1e-6) : 0;
	res->busbw = res->algbw * a->op->busbw_factor(c->nranks);
	res->wrong = 0;
	if (!a->check)
		return HERD_OK;
	st = fill(c, inplace);
	if (st == HERD_OK)
		st = a->op->run(c, inplace);
	if (st != HERD_OK)
		return st;
	uint64_t wrong = 0;
	st = check(c, inplace, &wrong);
	if (st != HERD_OK)
		return st;
	if (wrong > 0)
		fprintf(stderr, "herd bench: rank %d: %llu wrong elements in %s of %zu B (%s)\n",
			c->rank, (unsigned long long)wrong, a->op->name, c->shape.size,
			inplace ? "in-place" : "out-of-place");
	st = herd_comm_allreduce(c->comm, &wrong, &res->wrong, 1, HERD_UINT64, HERD_SUM);
	return st;
}

static const char *setting(const char *given, const char *env)
{
	const char *v = given ? given : shell_env(env);
	return v && v[0] ? v : "auto";
}

/* The host of rank r, NULL when there is none. */
static const char *host_of(herd_comm *comm, int r)
{
	const char *host = NULL;

	return herd_comm_host(comm, r, &host) == HERD_OK ? host : NULL;
}

/* "vm" when every rank is on host vm, else "3 hosts". */
static void hosts_label(herd_comm *comm, int n, char *buf, size_t cap)
{
	int distinct = 0;
	for (int r = 0; r < n; r++) {
		const char *h = host_of(comm, r);
		int seen = 0;
		for (int q = 0; q < r && !seen; q++) {
			const char *o = host_of(comm, q);
			seen = h && o && strcmp(h, o) == 0;
		}
		distinct += !seen;
	}
	const char *h0 = host_of(comm, 0);
	if (distinct <= 1)
		snprintf(buf, cap, "%s", h0 ? h0 : "?");
	else
		snprintf(buf, cap, "%d hosts", distinct);
}

/* --explain: per size, the algorithm libherd takes for the call (the same
 * choice on every rank) and why; on device memory NCCL chooses. */
static void print_explain(const struct bench_ctx *c)
{
	const struct bench_args *a = c->args;

	if (a->gpu) {
		printf("# algorithm: NCCL's own choice (device memory)\n");
		return;
	}
	for (size_t size = a->minbytes; size != 0; size = next_size(a, size)) {
		struct bench_shape s;
		char why[1024];

		shape_of(a->op, size, c->es, c->nranks, &s);
		if (herd_comm_explain(c->comm, a->op->kind, s.count, c->dtype, a->redop, a->root,
				      why, sizeof(why)) != HERD_OK)
			snprintf(why, sizeof(why), "unknown (%s)", shell_last_error());
		printf("# algorithm at %zu B: %s\n", s.size, why);
	}
}

static void print_header(const struct bench_ctx *c)
{
	const struct bench_args *a = c->args;
	char hosts[256];
	hosts_label(c->comm, c->nranks, hosts, sizeof(hosts));
	printf("# herd bench %s: %d %s on %s, transport %s, algo %s\n", a->op->name, c->nranks,
	       c->nranks == 1 ? "rank" : "ranks", hosts, setting(a->transport, "HERD_TRANSPORT"),
	       setting(a->algo, "HERD_ALGO"));
	if (a->stepbytes > 0 || a->stepfactor <= 1)
		printf("#  minBytes %zu maxBytes %zu step: %zu(bytes)", a->minbytes, a->maxbytes,
		       a->stepbytes > 0 ? a->stepbytes : (size_t)1 << 20);
	else
		printf("#  minBytes %zu maxBytes %zu step: %ld(factor)", a->minbytes, a->maxbytes,
		       a->stepfactor);
	printf(" warmup iters: %d iters: %d validation: %d\n", a->warmup, a->iters, a->check);
	printf("#\n"
	       "#                                                              out-of-place"
	       "                       in-place\n"
	       "#       size         count      type   redop    root"
	       "     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
	       "#        (B)    (elements)                          "
	       "     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
}

static void print_result(const struct bench_args *a, const struct bench_result *r)
{
	if (r == NULL) {
		printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
		return;
	}
	char t[32];
	if (r->time_us >= 10000.0)
		snprintf(t, sizeof(t), "%7.0f", r->time_us);
	else if (r->time_us >= 100.0)
		snprintf(t, sizeof(t), "%7.1f", r->time_us);
	else
		snprintf(t, sizeof(t), "%7.2f", r->time_us);
	printf("  %7s  %6.2f  %6.2f", t, r->algbw, r->busbw);
	if (a->check)
		printf("  %5llu", (unsigned long long)r->wrong);
	else
		printf("  %5s", "N/A");
}

static void json_result(const struct bench_args *a, const char *key,
			const struct bench_result *r)
{
	printf(",\"%s\":", key);
	if (r == NULL) {
		printf("null");
		return;
	}
	printf("{\"time_us\":%.3f,", r->time_us);
	if (r->median_us >= 0)
		printf("\"median_us\":%.3f,\"p99_us\":%.3f,", r->median_us, r->p99_us);
	else
		printf("\"median_us\":null,\"p99_us\":null,");
	printf("\"algbw\":%.6g,\"busbw\":%.6g,\"wrong\":", r->algbw, r->busbw);
	if (a->check)
		printf("%llu}", (unsigned long long)r->wrong);
	else
		printf("null}");
}

static void print_row(const struct bench_ctx *c, const struct bench_result *oop,
		      const struct bench_result *ip)
{
	const struct bench_args *a = c->args;
	const char *redop = a->op->reduces ? herd_redop_name(a->redop) : "none";
	int root = a->op->rooted ? a->root : -1;
	if (a->json) {
		printf("{\"op\":\"%s\",\"ranks\":%d,\"size\":%zu,\"count\":%zu,\"type\":\"%s\","
		       "\"redop\":\"%s\",\"root\":%d",
		       a->op->name, c->nranks, c->shape.size, c->shape.count,
		       herd_dtype_name(a->dtype), redop, root);
		json_result(a, "out_of_place", oop);
		json_result(a, "in_place", ip);
		printf("}\n");
	} else {
		printf("%12zu  %12zu  %8s  %6s  %6d", c->shape.size, c->shape.count,
		       herd_dtype_name(a->dtype), redop, root);
		print_result(a, oop);
		print_result(a, ip);
		printf("\n");
	}
	fflush(stdout);
}

/* Page-aligned and touched, so that the first timed call pays no faults. */
static unsigned char *alloc_buffer(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		bytes = 64;
	if (posix_memalign(&p, 4096, bytes) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void report(const struct bench_ctx *c, const char *what, herd_status st)
{
	fprintf(stderr, "herd bench: rank %d: %s: %s: %s\n", c->rank, what,
		herd_status_name(st), shell_last_error());
}

/* One pass over the sizes; adds to the totals.  HERD_OK, or the failure
 * (said, and the communicator marked broken). */
static herd_status sweep_once(struct bench_ctx *c, double *bw_sum, int *bw_n, uint64_t *wrong)
{
	const struct bench_args *a = c->args;

	for (size_t size = a->minbytes; size != 0; size = next_size(a, size)) {
		struct bench_result res[2];

		shape_of(a->op, size, c->es, c->nranks, &c->shape);
		for (int inplace = 0; inplace < 2; inplace++) {
			if (inplace && !a->op->has_inplace)
				break;
			herd_status st = measure(c, inplace, &res[inplace]);
			if (st != HERD_OK) {
				char what[128];
				snprintf(what, sizeof(what), "%s of %zu B (%s)", a->op->name,
					 c->shape.size, inplace ? "in-place" : "out-of-place");
				report(c, what, st);
				c->broken = 1;
				return st;
			}
			*bw_sum += res[inplace].busbw;
			(*bw_n)++;
			*wrong += res[inplace].wrong;
		}
		if (c->rank == 0)
			print_row(c, &res[0], a->op->has_inplace ? &res[1] : NULL);
	}
	return HERD_OK;
}

/*
 * --device gpu: the rank's GPU (its local rank, HERD_LOCAL_RANK or
 * LOCAL_RANK, among the GPUs it sees) and its buffers there.
 */
static herd_status alloc_gpu(struct bench_ctx *c, size_t send_bytes, size_t recv_bytes)
{
	const char *lr = shell_env("HERD_LOCAL_RANK");
	int n = 0, local;
	void *s = NULL, *r = NULL;
	herd_status st;

	if (lr == NULL)
		lr = getenv("LOCAL_RANK");
	local = lr != NULL ? atoi(lr) : 0;
	st = herd_device_count(&n);
	if (st == HERD_OK)
		st = herd_device_set((local > 0 ? local : 0) % n);
	if (st == HERD_OK)
		st = herd_device_alloc(&s, send_bytes);
	if (st == HERD_OK)
		st = herd_device_alloc(&r, recv_bytes);
	if (st != HERD_OK) {
		herd_device_free(s);
		return st;
	}
	c->send = s;
	c->recv = r;
	return HERD_OK;
}

static void free_buffers(struct bench_ctx *c)
{
	if (c->args->gpu) {
		herd_device_free(c->send);
		herd_device_free(c->recv);
	} else {
		free(c->send);
		free(c->recv);
	}
	c->send = c->recv = NULL;
	free(c->call_us);
	c->call_us = NULL;
}

/* The sweep (-N times), on a joined communicator; the exit status. */
static int sweep(struct bench_ctx *c)
{
	const struct bench_args *a = c->args;
	struct bench_shape big;
	shape_of(a->op, a->maxbytes, c->es, c->nranks, &big);
	c->queued = a->gpu && !a->blocking;
	if (a->gpu) {
		herd_status st = alloc_gpu(c, big.send_count * c->es, big.recv_count * c->es);

		if (st != HERD_OK) {
			report(c, "--device gpu", st);
			return SHELL_EXIT_FAILURE;
		}
	} else {
		c->send = alloc_buffer(big.send_count * c->es);
		c->recv = alloc_buffer(big.recv_count * c->es);
	}
	if (c->send == NULL || c->recv == NULL) {
		fprintf(stderr, "herd bench: rank %d: cannot allocate %zu + %zu bytes\n", c->rank,
			big.send_count * c->es, big.recv_count * c->es);
		return SHELL_EXIT_FAILURE;
	}
	if (a->json) {
		c->call_us = calloc((size_t)a->iters, sizeof(double));
		if (c->call_us == NULL) {
			fprintf(stderr, "herd bench: rank %d: cannot allocate the times of %d calls\n",
				c->rank, a->iters);
			return SHELL_EXIT_FAILURE;
		}
	}
	if (a->gpu && !a->op->has_inplace) {
		/* alltoall and sendrecv are point-to-point calls in NCCL, which a
		 * first device collective gives their communicator. */
		herd_status st = herd_comm_allreduce(c->comm, c->recv, c->recv, 1, HERD_UINT8,
						     HERD_MAX);

		if (st != HERD_OK) {
			report(c, "--device gpu", st);
			free_buffers(c);
			return SHELL_EXIT_FAILURE;
		}
	}
	if (c->rank == 0 && !a->json)
		print_header(c);
	if (c->rank == 0 && a->explain)
		print_explain(c);
	double bw_sum = 0;
	int bw_n = 0;
	uint64_t wrong = 0;
	for (int cycle = 0; cycle < a->cycles; cycle++)
		if (sweep_once(c, &bw_sum, &bw_n, &wrong) != HERD_OK)
			return SHELL_EXIT_FAILURE;
	c->wrong = wrong;
	if (c->rank == 0 && !a->json) {
		if (a->check)
			printf("# Out of bounds values : %llu %s\n", (unsigned long long)wrong,
			       wrong ? "FAILED" : "OK");
		else
			printf("# Out of bounds values : N/A (not checked)\n");
		printf("# Avg bus bandwidth    : %g\n#\n", bw_n ? bw_sum / bw_n : 0.0);
		fflush(stdout);
	}
	return wrong ? SHELL_EXIT_FAILURE : SHELL_EXIT_OK;
}

/*
 * Figures taken while other work runs are noisy: says so when the load
 * average exceeds, by 0.5, what the CPUs this run does not use could
 * carry (as bench/compare.sh does before it measures).  Said once for the
 * job: by the launcher of --np before its ranks start, else by rank 0 of
 * whatever started the ranks, for its own machine.
 */
static void warn_if_busy(int local_ranks)
{
	double load;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/proc/loadavg", "r");

	if (f == NULL)
		return;
	if (fscanf(f, "%lf", &load) == 1 && load > 0.5 && cpus > 0 &&
	    load - 0.5 > (double)(cpus - local_ranks > 0 ? cpus - local_ranks : 0))
		fprintf(stderr, "herd bench: warning: this machine is busy (load average %.2f on "
			"%ld CPUs): the figures will be noisy\n", load, cpus);
	fclose(f);
}

/* The ranks of the communicator on rank 0's host, rank 0 included. */
static int ranks_with_rank0(const herd_comm *comm)
{
	const char *h0 = NULL, *h = NULL;
	int n = 0;

	if (herd_comm_host(comm, 0, &h0) != HERD_OK)
		return 1;
	for (int r = 0; r < herd_comm_size(comm); r++)
		if (herd_comm_host(comm, r, &h) == HERD_OK && strcmp(h, h0) == 0)
			n++;
	return n;
}

/*
 * --device gpu where this process has no GPU to use: why (for the reason,
 * herd discover's words: "no GPU: NVIDIA driver not found: ..."), into
 * why[cap], and the exit status, 2 for a herd built without CUDA on a
 * machine with a driver, else 1; -1 when there is a GPU.
 */
static int gpu_unusable(char *why, size_t cap)
{
	int n = 0;
	herd_status st = herd_device_count(&n);

	if (st == HERD_OK)
		return -1;
	if (st == HERD_EUNAVAIL) {
		snprintf(why, cap, "--device gpu: this herd was built without CUDA");
		return SHELL_EXIT_USAGE;
	}
	snprintf(why, cap, "--device gpu: %s", shell_last_error());
	return SHELL_EXIT_FAILURE;
}

/*
 * --device gpu on ranks that another launcher started: every rank looks
 * for its GPU, and the lowest rank that has none says why, once for the
 * job, before every rank ends.  -1 to go on, else the rank's exit status.
 */
static int gpu_agree(struct bench_ctx *c)
{
	char why[512];
	const char *host = NULL;
	int bad = gpu_unusable(why, sizeof(why));
	int32_t first = bad >= 0 ? c->rank : INT32_MAX;
	herd_status st = herd_comm_allreduce(c->comm, &first, &first, 1, HERD_INT32, HERD_MIN);

	if (st != HERD_OK) {
		report(c, "--device gpu", st);
		c->broken = 1;
		return SHELL_EXIT_FAILURE;
	}
	if (first == INT32_MAX)
		return -1;
	if (first == c->rank) {
		herd_comm_host(c->comm, c->rank, &host);
		fprintf(stderr, "herd bench: rank %d (%s): %s\n", c->rank,
			host != NULL ? host : "?", why);
	}
	return bad >= 0 ? bad : SHELL_EXIT_FAILURE;
}

/* A rank: join the ranks of the environment, sweep, leave. */
static int run_rank(const struct bench_args *a)
{
	/* A rank of --np (its launcher's job) says "wrong results" apart. */
	const char *launcher = shell_env("HERD_BENCH_LAUNCHER");
	int by_np = launcher != NULL && strcmp(launcher, "1") == 0;
	herd_comm_opts opts = HERD_COMM_OPTS_INIT;
	opts.transport = a->transport;
	opts.algo = a->algo;
	if (a->timeout_s > 0)
		opts.timeout_ms = a->timeout_s * 1000;
	struct bench_ctx c = { .args = a, .dtype = a->dtype, .es = herd_dtype_size(a->dtype),
			       .pat = bench_pattern_for(a->op->reduces, a->redop) };
	herd_status st = herd_comm_init_env(&c.comm, &opts);
	if (st != HERD_OK) {
		fprintf(stderr, "herd bench: joining the ranks: %s: %s\n", herd_status_name(st),
			shell_last_error());
		return SHELL_EXIT_FAILURE;
	}
	c.rank = herd_comm_rank(c.comm);
	c.nranks = herd_comm_size(c.comm);
	int status = -1;
	/* The ranks of --np were checked by their launcher. */
	if (!by_np && c.rank == 0)
		warn_if_busy(ranks_with_rank0(c.comm));
	if (!by_np && a->gpu)
		status = gpu_agree(&c);
	if (status < 0 && a->root >= c.nranks) {
		if (c.rank == 0)
			fprintf(stderr, "herd bench: root %d is not one of the %d ranks\n",
				a->root, c.nranks);
		status = SHELL_EXIT_USAGE;
	}
	if (status < 0)
		status = sweep(&c);
	if (!c.broken) {
		st = herd_comm_finalize(c.comm);
		if (st != HERD_OK && status == SHELL_EXIT_OK) {
			report(&c, "finalize", st);
			status = SHELL_EXIT_FAILURE;
		}
	} else {
		herd_comm_abort(c.comm);
	}
	herd_comm_free(c.comm);
	free_buffers(&c);
	if (status == SHELL_EXIT_FAILURE && !c.broken && c.wrong && by_np) {
		status = BENCH_EXIT_WRONG;
	}
	return status;
}

/* ---------------------------------------------------- the --np launcher */

/* What the ranks' output sink shares with the launcher's thread. */
struct bench_job {
	int np;
	int wake[2];              /* written once when stdout's reader went away */
	atomic_int reader_gone;
	atomic_int write_errno;   /* the first error writing stdout, but EPIPE */
};

/*
 * The ranks' output, line by line, on the job's supervisor thread: what a
 * rank writes on stdout is the command's (only rank 0 writes there), its
 * stderr is forwarded as "[rank R] ...".  Once nobody reads stdout any more
 * (`| head`), nothing more is shown and the launcher is woken to end.
 */
static void bench_output(void *userdata, int rank, const char *host, herd_job_stream stream,
			 const char *line, size_t len)
{
	struct bench_job *b = userdata;

	(void)host;
	if (atomic_load(&b->reader_gone))
		return;
	if (stream == HERD_JOB_STDOUT) {
		struct iovec iov[2] = { { (void *)line, len }, { "\n", 1 } };
		ssize_t w = writev(STDOUT_FILENO, iov, 2);

		if (w < 0 && errno == EPIPE) {
			atomic_store(&b->reader_gone, 1);
			if (write(b->wake[1], "x", 1) < 0) {
				/* the pipe holds a byte already */
			}
		} else if (w < 0 && atomic_load(&b->write_errno) == 0) {
			atomic_store(&b->write_errno, errno);
		}
		return;
	}
	if (b->np > 1)
		fprintf(stderr, "[rank %d] %.*s\n", rank, (int)len, line);
	else
		fprintf(stderr, "%.*s\n", (int)len, line);
}

/* argv of a rank: this program, "bench", the arguments less -n/--np. */
static const char **rank_argv(const struct bench_args *a, int argc, char **argv, const char *exe)
{
	const char **out = calloc((size_t)argc + 2, sizeof(*out));
	if (out == NULL)
		return NULL;
	int k = 0;
	out[k++] = exe;
	out[k++] = argv[0];
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < argc)
				out[k++] = argv[i++];
			break;
		}
		bool rank_count = false;

		for (int j = 0; j < a->n_np_args && !rank_count; j++)
			rank_count = argv[i] == a->np_args[j];
		if (!rank_count)
			out[k++] = argv[i];
	}
	out[k] = NULL;
	return out;
}

/* The ranks still running, as " 0 2 3", into buf. */
static void running_ranks(const herd_job *job, char *buf, size_t cap)
{
	size_t o = 0;

	buf[0] = '\0';
	for (int r = 0; r < herd_job_size(job) && o < cap; r++) {
		herd_job_rank_status rs;

		if (herd_job_rank(job, r, &rs) == HERD_OK && rs.state == HERD_JOB_RANK_RUNNING) {
			int n = snprintf(buf + o, cap - o, " %d", r);

			if (n < 0)
				break;
			o += (size_t)n;
		}
	}
}

/*
 * Waits for the job until it is over, its deadline passes or stdout's
 * reader goes away, sleeping on the job's descriptor and the sink's pipe;
 * returns the command's exit status.
 */
static int wait_job(herd_job *job, struct bench_job *b, int deadline_s)
{
	int64_t end = (int64_t)(now_s() * 1000) + (int64_t)deadline_s * 1000;
	int status = 0;
	char ranks[256];

	for (;;) {
		struct pollfd p[2] = { { .fd = herd_job_fd(job), .events = POLLIN },
				       { .fd = b->wake[0], .events = POLLIN } };
		int64_t left = end - (int64_t)(now_s() * 1000);

		if (atomic_load(&b->reader_gone)) {
			/* Nobody reads the results any more: end as quietly as
			 * `yes | head`. */
			herd_job_kill(job);
			return 128 + SIGPIPE;
		}
		if (herd_job_wait(job, 0, &status) == HERD_OK)
			break;
		if (left <= 0) {
			running_ranks(job, ranks, sizeof(ranks));
			herd_job_kill(job);
			fprintf(stderr, "herd bench: the ranks ran past the deadline of %d s; "
				"killed:%s (--timeout SEC sets the deadline)\n", deadline_s, ranks);
			return SHELL_EXIT_FAILURE;
		}
		poll(p, 2, left > INT_MAX ? INT_MAX : (int)left);
	}
	if (status == 0)
		return SHELL_EXIT_OK;
	if (status == BENCH_EXIT_WRONG)
		fprintf(stderr, "herd bench: some results were wrong (the #wrong column)\n");
	else
		fprintf(stderr, "herd bench: %s\n", herd_job_failure(job) != NULL
			? herd_job_failure(job) : "a rank failed");
	return SHELL_EXIT_FAILURE;
}

/* Runs np ranks of this command on this host as a job (herd_job_launch);
 * they join with herd_comm_init_env, like any program. */
static int run_local(const struct bench_args *a, int argc, char **argv)
{
	static const char *const rank_env[] = { "HERD_BENCH_LAUNCHER=1", NULL };
	struct bench_job b = { .np = a->np, .wake = { -1, -1 } };
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	herd_job *job = NULL;
	int status = SHELL_EXIT_FAILURE;
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char **child_argv;

	if (len <= 0) {
		fprintf(stderr, "herd bench: cannot find this program: %s\n", strerror(errno));
		return SHELL_EXIT_FAILURE;
	}
	exe[len] = '\0';
	child_argv = rank_argv(a, argc, argv, exe);
	if (child_argv == NULL || pipe2(b.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "herd bench: %s\n", child_argv == NULL ? "out of memory"
									 : strerror(errno));
		goto out;
	}
	/* A reader gone shows as EPIPE in the sink, not a dead launcher. */
	signal(SIGPIPE, SIG_IGN);
	spec.argv = child_argv;
	spec.env = rank_env;
	spec.nranks = a->np;
	spec.herd_program = exe;
	spec.output = bench_output;
	spec.output_userdata = &b;
	fflush(stdout);
	if (herd_job_launch(&job, &spec) != HERD_OK) {
		fprintf(stderr, "herd bench: starting %d ranks: %s\n", a->np, shell_last_error());
		goto out;
	}
	status = wait_job(job, &b, a->timeout_s > 0 ? a->timeout_s : BENCH_RUN_DEADLINE_S);
	herd_job_free(job);
	if (atomic_load(&b.write_errno) != 0) {
		fprintf(stderr, "herd bench: cannot write to standard output: %s\n",
			strerror(atomic_load(&b.write_errno)));
		if (status == SHELL_EXIT_OK)
			status = SHELL_EXIT_FAILURE;
	}
out:
	if (b.wake[0] >= 0)
		close(b.wake[0]);
	if (b.wake[1] >= 0)
		close(b.wake[1]);
	free(child_argv);
	return status;
}

/* The launchers' variables: a rank, and the number of ranks beside it. */
static const struct {
	const char *rank, *size, *by;
} launchers[] = {
	{ "HERD_RANK", "HERD_WORLD_SIZE", "herd launch" },
	{ "RANK", "WORLD_SIZE", "torchrun" },
	{ "SLURM_PROCID", "SLURM_NTASKS", "srun" },
	{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun" },
};

/* Whether a launcher gave this process a rank (the variables that
 * herd_comm_init_env reads first): its index in launchers, or -1. */
static int launched(void)
{
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const char *v = i == 0 ? shell_env(launchers[i].rank) : getenv(launchers[i].rank);

		if (v != NULL && v[0] != '\0')
			return (int)i;
	}
	return -1;
}

/*
 * -n/--np in a process a launcher started: the number of ranks it was
 * given says nothing new (it joins them), another one is refused where the
 * launcher started more than one, since this process is one rank already (-n of nccl-tests' habit, the
 * iterations, is --iters).  -1 to go on, else the exit status.
 */
static int np_under_launcher(struct bench_args *a, int l)
{
	const char *size = getenv(launchers[l].size);
	char msg[512];

	if (size != NULL && atoi(size) == a->np) {
		a->np = 0;
		return -1;
	}
	/* One rank alone (an srun --pty shell, herd launch -n 1 of a
	 * controller): -n starts its ranks here, as without a launcher. */
	if (size == NULL || atoi(size) <= 1)
		return -1;
	snprintf(msg, sizeof(msg), "-n %d: this process is a rank that %s started (%s=%s); -n "
		 "and --np start ranks only where no launcher did (timed calls per size: "
		 "--iters)", a->np, launchers[l].by, launchers[l].size, size != NULL ? size : "?");
	return usage_error("%s", msg);
}

int cmd_bench(int argc, char **argv)
{
	struct bench_args a;
	shell_args args;
	char **given;
	int status, l = launched(), alone;
	char why[512];

	/* Every option in full, and -np read as -n, before getopt_long would
	 * take a prefix for an option. */
	status = shell_args_check("bench", argc, argv, short_options, long_options, habits,
				  &args);
	if (status != 0) {
		shell_args_free(&args);
		return status;
	}
	/* getopt_long reorders what it parses: the ranks get argv as written. */
	given = calloc((size_t)args.argc + 1, sizeof(*given));
	if (given == NULL) {
		shell_args_free(&args);
		shell_message(shell_command, "out of memory");
		return SHELL_EXIT_FAILURE;
	}
	memcpy(given, args.argv, (size_t)args.argc * sizeof(*given));
	status = parse_args(args.argc, args.argv, &a);
	if (status < 0 && a.np > 0 && l >= 0)
		status = np_under_launcher(&a, l);
	alone = status < 0 && a.np == 0 && l < 0;
	if (alone)
		a.np = 1;
	if (status < 0 && a.np > 0 && a.root >= a.np)
		status = usage_error("%s", "the root (-r) is not one of the -n ranks");
	/* The launcher of -n looks for a GPU once, for all its ranks. */
	if (status < 0 && a.np > 0 && a.gpu && (status = gpu_unusable(why, sizeof(why))) >= 0) {
		if (status == SHELL_EXIT_USAGE)
			usage_error("%s", why);
		else
			fprintf(stderr, "herd bench: %s\n", why);
	}
	if (status < 0 && alone)
		fprintf(stderr, "herd bench: running one rank (no -n and no launcher's "
			"variables); -n N runs N here, and herd launch, srun, mpirun or "
			"torchrun start more\n");
	if (status < 0 && a.np > 0)
		warn_if_busy(a.np);
	if (status < 0)
		status = a.np > 0 ? run_local(&a, args.argc, given) : run_rank(&a);
	free(given);
	shell_args_free(&args);
	return status;
}
