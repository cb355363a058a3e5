/*
 * examples/pipeline_1f1b.c - a toy model cut into pipeline stages on the
 * pp dimension of a grid, run with the one-forward-one-backward schedule
 * (1F1B, as Megatron-LM and DeepSpeed run it), checked against the same
 * computation on one rank, its bubble measured against the formula.
 *
 * Stage s holds one layer, y = tanh(x W_s) with W_s D x D; the last stage
 * takes the mean squared error against the targets.  The batch is M
 * micro-batches of B rows.  Stage s runs min(P - s - 1, M) forwards
 * (warm-up), then alternates one forward and one backward, then the
 * backwards left (cool-down).  Activations go to the next stage and
 * gradients to the previous one as sends and receives on the pp group, a
 * forward's send paired with the receipt of a backward's gradient in one
 * sendrecv (and the reverse), as Megatron pairs them, so that no two
 * stages wait on each other.  A forward takes --work-ms of "accelerator"
 * time and a backward twice that: on P stages the pipeline's bubble, the
 * part of the time a stage waits, is then (P - 1) / (M + P - 1).  With
 * more ranks than stages the grid's dp groups take their own
 * micro-batches and sum their gradients.
 *
 *   herd launch -n 4 -- build/bin/example_pipeline_1f1b --micro 8
 *
 * Options: --micro M (8), --work-ms W (20), --stages P (4: the pp size; the
 * ranks beyond P make dp).  Rank 0 prints the loss and
 * the largest difference of any stage's weight gradient from one rank's,
 * each stage's measured bubble and the formula's; the exit status is 1
 * when a difference exceeds 1e-9.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "herd.h"
#include "toy_math.h"

#define D 8          /* the width */
#define B 4          /* rows per micro-batch */
#define MMAX 64      /* micro-batches on all replicas */
#define PMAX 16      /* stages */

typedef struct stage {
	int s, p, m;                  /* this stage, the stages, micro-batches here */
	int first;                    /* this replica's first micro-batch */
	double w[D * D], dw[D * D];
	double x[MMAX][B * D];        /* each micro-batch's input, kept for backward */
	double y[MMAX][B * D];        /* and output */
	double loss;
	int work_ms;
	double busy_s;
	herd_comm *pp;
} stage;

static double x0[MMAX][B * D], target[MMAX][B * D];
static double weights[PMAX][D * D];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The accelerator's time for one pass: slept, and counted as busy. */
static void work(stage *st, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	double t = now();

	while (ms > 0 && nanosleep(&ts, &ts) != 0)
		;
	st->busy_s += now() - t;
}

/* y = tanh(x W) for micro-batch i (its input already in st->x[i]). */
static void forward(stage *st, int i)
{
	toy_gemm(B, D, D, st->x[i], D, 0, st->w, D, 0, st->y[i], D);
	for (int k = 0; k < B * D; k++)
		st->y[i][k] = tanh(st->y[i][k]);
}

/* The loss's gradient for micro-batch i at the last stage, into g. */
static void loss_grad(stage *st, int i, int total, double *g)
{
	for (int k = 0; k < B * D; k++) {
		double e = st->y[i][k] - target[st->first + i][k];

		st->loss += 0.5 * e * e / (total * B);
		g[k] = e / (total * B);
	}
}

/* Given g = dL/dy of micro-batch i: dW += x^T (g * (1 - y^2)); dx into dx. */
static void backward(stage *st, int i, double *g, double *dx)
{
	double du[B * D], dwi[D * D];

	for (int k = 0; k < B * D; k++)
		du[k] = g[k] * (1 - st->y[i][k] * st->y[i][k]);
	toy_gemm(D, D, B, st->x[i], D, 1, du, D, 0, dwi, D);
	for (int k = 0; k < D * D; k++)
		st->dw[k] += dwi[k];
	toy_gemm(B, D, D, du, D, 0, st->w, D, 1, dx, D);
}

static int fail(const char *what)
{
	fprintf(stderr, "pipeline_1f1b: %s: %s\n", what, herd_last_error());
	return -1;
}

/* The input of micro-batch i: the data at stage 0, else the previous stage's. */
static int recv_forward(stage *st, int i)
{
	if (st->s == 0) {
		memcpy(st->x[i], x0[st->first + i], sizeof(st->x[i]));
		return 0;
	}
	return herd_comm_recv(st->pp, st->x[i], B * D, HERD_FLOAT64, st->s - 1) == HERD_OK
	       ? 0 : fail("recv from the previous stage");
}

static int send_forward(stage *st, int i)
{
	if (st->s == st->p - 1)
		return 0;
	return herd_comm_send(st->pp, st->y[i], B * D, HERD_FLOAT64, st->s + 1) == HERD_OK
	       ? 0 : fail("send to the next stage");
}

/* The forward of i sent on while the gradient of j comes back (into g). */
static int send_forward_recv_backward(stage *st, int i, int j, int total, double *g)
{
	if (st->s == st->p - 1) {
		loss_grad(st, j, total, g);
		return 0;
	}
	return herd_comm_sendrecv(st->pp, st->y[i], B * D, st->s + 1, g, B * D, st->s + 1,
				  HERD_FLOAT64) == HERD_OK ? 0 : fail("sendrecv with the next stage");
}

/* The gradient dx sent back while the input of micro-batch i comes (i < 0: none). */
static int send_backward_recv_forward(stage *st, const double *dx, int i)
{
	if (st->s == 0)
		return i >= 0 ? recv_forward(st, i) : 0;
	if (i < 0)
		return herd_comm_send(st->pp, dx, B * D, HERD_FLOAT64, st->s - 1) == HERD_OK
		       ? 0 : fail("send to the previous stage");
	return herd_comm_sendrecv(st->pp, dx, B * D, st->s - 1, st->x[i], B * D, st->s - 1,
				  HERD_FLOAT64) == HERD_OK ? 0 : fail("sendrecv with the previous stage");
}

static int recv_backward(stage *st, int j, int total, double *g)
{
	if (st->s == st->p - 1) {
		loss_grad(st, j, total, g);
		return 0;
	}
	return herd_comm_recv(st->pp, g, B * D, HERD_FLOAT64, st->s + 1) == HERD_OK
	       ? 0 : fail("recv from the next stage");
}

/* The 1F1B schedule of this stage over its m micro-batches, of total in all. */
static int run_1f1b(stage *st, int total)
{
	int warm = st->p - st->s - 1 < st->m ? st->p - st->s - 1 : st->m;
	int rest = st->m - warm, f = 0, b = 0;
	double g[B * D], dx[B * D];

	for (; f < warm; f++) {
		if (recv_forward(st, f) != 0)
			return -1;
		work(st, st->work_ms);
		forward(st, f);
		if (send_forward(st, f) != 0)
			return -1;
	}
	if (rest > 0 && recv_forward(st, f) != 0)
		return -1;
	for (int k = 0; k < rest; k++, f++, b++) {
		work(st, st->work_ms);
		forward(st, f);
		if (send_forward_recv_backward(st, f, b, total, g) != 0)
			return -1;
		work(st, 2 * st->work_ms);
		backward(st, b, g, dx);
		if (send_backward_recv_forward(st, dx, k + 1 < rest ? f + 1 : -1) != 0)
			return -1;
	}
	for (; b < st->m; b++) {
		if (recv_backward(st, b, total, g) != 0)
			return -1;
		work(st, 2 * st->work_ms);
		backward(st, b, g, dx);
		if (send_backward_recv_forward(st, dx, -1) != 0)
			return -1;
	}
	return 0;
}

/* One rank: every stage in turn over every micro-batch; dW of stage s into dw[s]. */
static double one_rank(int p, int total, double (*dw)[D * D])
{
	static stage st;
	double loss = 0;

	for (int s = 0; s < p; s++)
		memset(dw[s], 0, sizeof(dw[s]));
	for (int i = 0; i < total; i++) {
		double act[B * D], g[B * D], dx[B * D];
		static double xs[PMAX][B * D], ys[PMAX][B * D];

		memcpy(act, x0[i], sizeof(act));
		for (int s = 0; s < p; s++) {
			memcpy(xs[s], act, sizeof(act));
			toy_gemm(B, D, D, act, D, 0, weights[s], D, 0, ys[s], D);
			for (int k = 0; k < B * D; k++)
				ys[s][k] = tanh(ys[s][k]);
			memcpy(act, ys[s], sizeof(act));
		}
		for (int k = 0; k < B * D; k++) {
			double e = act[k] - target[i][k];

			loss += 0.5 * e * e / (total * B);
			g[k] = e / (total * B);
		}
		for (int s = p - 1; s >= 0; s--) {
			memcpy(st.w, weights[s], sizeof(st.w));
			memcpy(st.x[0], xs[s], sizeof(st.x[0]));
			memcpy(st.y[0], ys[s], sizeof(st.y[0]));
			memset(st.dw, 0, sizeof(st.dw));
			backward(&st, 0, g, dx);
			for (int k = 0; k < D * D; k++)
				dw[s][k] += st.dw[k];
			memcpy(g, dx, sizeof(g));
		}
	}
	return loss;
}

int main(int argc, char **argv)
{
	herd_comm *world = NULL, *dp = NULL;
	herd_comm_grid *grid = NULL;
	herd_grid_dim dims[1] = { { "pp", 4 } };
	static stage st;
	static double ref_dw[PMAX][D * D];
	double t0, t1, ref_loss, worst, bubble, mean = 0, most = 0;
	int m = 8, ndp, total, rank, bad = 0;
	uint64_t seed = 11;

	memset(&st, 0, sizeof(st));
	st.work_ms = 20;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--micro") == 0)
			m = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--work-ms") == 0)
			st.work_ms = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--stages") == 0)
			dims[0].size = atoi(argv[i + 1]);
	}
	if (herd_comm_init_env(&world, NULL) != HERD_OK ||
	    herd_comm_grid_create(&grid, world, dims, 1, NULL) != HERD_OK ||
	    herd_comm_grid_group(grid, "pp", &st.pp) != HERD_OK) {
		fprintf(stderr, "pipeline_1f1b: %s\n", herd_last_error());
		herd_comm_free(world);
		return 1;
	}
	if (herd_comm_grid_group(grid, "dp", &dp) != HERD_OK)
		dp = NULL;
	rank = herd_comm_rank(world);
	ndp = dp != NULL ? herd_comm_size(dp) : 1;
	st.p = herd_comm_size(st.pp);
	st.s = herd_comm_rank(st.pp);
	st.m = m;
	total = m * ndp;
	if (m < 1 || total > MMAX || st.p > PMAX || st.work_ms < 0) {
		fprintf(stderr, "pipeline_1f1b: --micro 1 to %d in all replicas, --stages at "
			"most %d, --work-ms 0 or more\n", MMAX, PMAX);
		return 2;
	}
	st.first = (dp != NULL ? herd_comm_rank(dp) : 0) * m;
	for (int i = 0; i < total; i++)
		for (int k = 0; k < B * D; k++) {
			x0[i][k] = toy_rand(&seed, 1.0);
			target[i][k] = toy_rand(&seed, 0.8);
		}
	for (int s = 0; s < st.p; s++)
		for (int k = 0; k < D * D; k++)
			weights[s][k] = toy_rand(&seed, 0.6);
	memcpy(st.w, weights[st.s], sizeof(st.w));
	if (rank == 0)
		printf("%s", herd_comm_grid_explain(grid));
	if (herd_comm_barrier(st.pp) != HERD_OK)
		return fail("barrier"), 1;
	t0 = now();
	if (run_1f1b(&st, total) != 0 || herd_comm_barrier(st.pp) != HERD_OK)
		return 1;
	t1 = now();
	bubble = 1 - st.busy_s / (t1 - t0);
	/* The gradients summed over dp; the loss, the last stage's, over everyone. */
	if ((dp != NULL && herd_comm_allreduce(dp, st.dw, st.dw, D * D, HERD_FLOAT64, HERD_SUM)
	     != HERD_OK) ||
	    herd_comm_allreduce(world, &st.loss, &st.loss, 1, HERD_FLOAT64, HERD_SUM) != HERD_OK)
		return fail("allreduce"), 1;
	ref_loss = one_rank(st.p, total, ref_dw);
	worst = toy_max_diff(st.dw, ref_dw[st.s], D * D);
	if (herd_comm_allreduce(world, &worst, &worst, 1, HERD_FLOAT64, HERD_MAX) != HERD_OK ||
	    herd_comm_allreduce(world, &bubble, &mean, 1, HERD_FLOAT64, HERD_SUM) != HERD_OK ||
	    herd_comm_allreduce(world, &bubble, &most, 1, HERD_FLOAT64, HERD_MAX) != HERD_OK)
		return fail("allreduce"), 1;
	mean /= herd_comm_size(world);
	bad = !(worst <= 1e-9) || fabs(st.loss - ref_loss) > 1e-12;
	if (rank == 0) {
		printf("pp=%d x dp=%d, %d micro-batches of %d rows per replica, 1F1B, %d ms a "
		       "forward and %d a backward\n", st.p, ndp, m, B, st.work_ms, 2 * st.work_ms);
		printf("loss %.12f on the pipeline, %.12f on one rank; every weight gradient "
		       "within %.3g of one rank's (%s)\n", st.loss, ref_loss, worst,
		       bad ? "MISMATCH" : "match");
		printf("bubble: %.3f of the time on average over the stages (at most %.3f); "
		       "(P - 1) / (M + P - 1) = %.3f; %.3f s in all\n", mean, most,
		       (double)(st.p - 1) / (m + st.p - 1), t1 - t0);
	}
	herd_comm_finalize(world);
	herd_comm_grid_free(grid);
	herd_comm_free(world);
	return bad ? 1 : 0;
}
