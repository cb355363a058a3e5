/*
 * examples/grid_tp_dp.c - a toy transformer-style block trained on a grid
 * of tensor parallelism (tp) times data parallelism (dp), checked against
 * the same training on one rank.
 *
 * The model is L residual MLP blocks, h' = h + tanh(h A) B, with A (D x H)
 * split by columns and B (H x D) by rows over the tp group (Megatron-LM's
 * column- then row-parallel pair): each tp rank computes its part of
 * tanh(h A) B and one allreduce over tp per block sums the parts, forward;
 * backward, one allreduce over tp per block sums the parts of the input's
 * gradient.  Each dp group's ranks take their own rows of the batch and
 * sum their gradients with an allreduce over dp.  Every rank also trains
 * the whole model on the whole batch alone, and the two must agree to the
 * last few bits of float64 (the sums differ only in their order).
 *
 *   herd launch -n 4 -- build/bin/example_grid_tp_dp            (tp=2, dp=2)
 *   herd launch -n 8 -- build/bin/example_grid_tp_dp --tp 4     (tp=4, dp=2)
 *
 * Options: --tp T (2; it must divide 16, the hidden width), --steps S (5).
 * Rank 0 prints the grid, the loss of each step on the grid and on one
 * rank, and the largest difference of any weight; the exit status is 1
 * when a difference exceeds 1e-9.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd.h"
#include "toy_math.h"

#define D 8          /* the model's width */
#define H 16         /* the hidden width, split over tp */
#define L 2          /* blocks */
#define N 4          /* rows of the batch per dp replica */
#define NMAX 64      /* rows on one rank: N times dp at most */
#define LR 0.2

typedef struct model {
	int h0, hc;               /* this rank's hidden columns: [h0, h0 + hc) */
	double a[L][D * H];       /* A_l's columns h0.., D x hc */
	double b[L][H * D];       /* B_l's rows h0.., hc x D */
} model;

/* The weights from the seed, this rank's shard of them. */
static void init_model(model *m, int h0, int hc)
{
	uint64_t s = 42;

	m->h0 = h0;
	m->hc = hc;
	for (int l = 0; l < L; l++) {
		for (int i = 0; i < D; i++)
			for (int j = 0; j < H; j++) {
				double v = toy_rand(&s, 0.5);

				if (j >= h0 && j < h0 + hc)
					m->a[l][i * hc + j - h0] = v;
			}
		for (int i = 0; i < H; i++)
			for (int j = 0; j < D; j++) {
				double v = toy_rand(&s, 0.5);

				if (i >= h0 && i < h0 + hc)
					m->b[l][(i - h0) * D + j] = v;
			}
	}
}

/* Sums buf over comm in place; nothing when comm is NULL (one rank). */
static int sum(herd_comm *comm, double *buf, size_t n)
{
	if (comm == NULL || herd_comm_allreduce(comm, buf, buf, n, HERD_FLOAT64, HERD_SUM) == HERD_OK)
		return 0;
	fprintf(stderr, "grid_tp_dp: %s\n", herd_last_error());
	return -1;
}

/*
 * One step of SGD on rows x[0..n) with targets t, of ntot rows in all
 * replicas: forward, backward, the gradients summed over dp, the update.
 * *loss: this replica's part of the mean squared error.
 */
static int step(model *m, const double *x, const double *t, int n, int ntot, herd_comm *tp,
		herd_comm *dp, double *loss)
{
	static double h[L + 1][NMAX * D], s[L][NMAX * H], g[NMAX * D], tmp[NMAX * D];
	static double du[NMAX * H], grad[L][D * H + H * D];
	int hc = m->hc;

	memcpy(h[0], x, sizeof(double) * (size_t)(n * D));
	for (int l = 0; l < L; l++) {
		toy_gemm(n, hc, D, h[l], D, 0, m->a[l], hc, 0, s[l], hc);
		for (int i = 0; i < n * hc; i++)
			s[l][i] = tanh(s[l][i]);
		toy_gemm(n, D, hc, s[l], hc, 0, m->b[l], D, 0, tmp, D);
		if (sum(tp, tmp, (size_t)(n * D)) != 0)      /* the block's one allreduce */
			return -1;
		for (int i = 0; i < n * D; i++)
			h[l + 1][i] = h[l][i] + tmp[i];
	}
	*loss = 0;
	for (int i = 0; i < n * D; i++) {
		double e = h[L][i] - t[i];

		*loss += 0.5 * e * e / ntot;
		g[i] = e / ntot;
	}
	for (int l = L - 1; l >= 0; l--) {
		double *da = grad[l], *db = grad[l] + D * hc;

		toy_gemm(hc, D, n, s[l], hc, 1, g, D, 0, db, D);         /* S^T G */
		toy_gemm(n, hc, D, g, D, 0, m->b[l], D, 1, du, hc);      /* G B^T */
		for (int i = 0; i < n * hc; i++)
			du[i] *= 1 - s[l][i] * s[l][i];
		toy_gemm(D, hc, n, h[l], D, 1, du, hc, 0, da, hc);       /* h^T dU */
		toy_gemm(n, D, hc, du, hc, 0, m->a[l], hc, 1, tmp, D);   /* dU A^T */
		if (sum(tp, tmp, (size_t)(n * D)) != 0)      /* backward's one allreduce */
			return -1;
		for (int i = 0; i < n * D; i++)
			g[i] += tmp[i];
	}
	for (int l = 0; l < L; l++) {
		if (sum(dp, grad[l], (size_t)(D * hc + hc * D)) != 0)
			return -1;
		for (int i = 0; i < D * hc; i++)
			m->a[l][i] -= LR * grad[l][i];
		for (int i = 0; i < hc * D; i++)
			m->b[l][i] -= LR * grad[l][D * hc + i];
	}
	return 0;
}

/* The largest difference between m and the same shard of the whole model. */
static double shard_diff(const model *m, const model *whole)
{
	double worst = 0;

	for (int l = 0; l < L; l++)
		for (int i = 0; i < D; i++) {
			double d = toy_max_diff(&m->a[l][i * m->hc], &whole->a[l][i * H + m->h0],
						(size_t)m->hc);

			worst = d > worst ? d : worst;
		}
	for (int l = 0; l < L; l++) {
		double d = toy_max_diff(m->b[l], &whole->b[l][m->h0 * D], (size_t)(m->hc * D));

		worst = d > worst ? d : worst;
	}
	return worst;
}

int main(int argc, char **argv)
{
	herd_comm *world = NULL, *tp = NULL, *dp = NULL;
	herd_comm_grid *grid = NULL;
	herd_grid_dim dims[1] = { { "tp", 2 } };
	static model mine, whole;
	static double x[NMAX * D], t[NMAX * D];
	int steps = 5, ntp, ndp, rank, bad = 0;
	double worst = 0;
	uint64_t s = 7;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--tp") == 0)
			dims[0].size = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--steps") == 0)
			steps = atoi(argv[i + 1]);
	}
	if (dims[0].size < 1 || H % dims[0].size != 0 || steps < 1) {
		fprintf(stderr, "grid_tp_dp: --tp must divide %d and --steps be 1 or more\n", H);
		return 2;
	}
	if (herd_comm_init_env(&world, NULL) != HERD_OK ||
	    herd_comm_grid_create(&grid, world, dims, 1, NULL) != HERD_OK ||
	    herd_comm_grid_group(grid, "tp", &tp) != HERD_OK) {
		fprintf(stderr, "grid_tp_dp: %s\n", herd_last_error());
		herd_comm_free(world);
		return 1;
	}
	/* dp is there when the world is more than one tp group. */
	if (herd_comm_grid_group(grid, "dp", &dp) != HERD_OK)
		dp = NULL;
	rank = herd_comm_rank(world);
	ntp = herd_comm_size(tp);
	ndp = dp != NULL ? herd_comm_size(dp) : 1;
	if (N * ndp > NMAX) {
		fprintf(stderr, "grid_tp_dp: at most %d replicas\n", NMAX / N);
		return 2;
	}
	if (rank == 0)
		printf("%s", herd_comm_grid_explain(grid));
	/* The whole batch: replica k takes rows k*N..; targets a smooth function. */
	for (int i = 0; i < N * ndp * D; i++)
		x[i] = toy_rand(&s, 1.0);
	for (int i = 0; i < N * ndp; i++)
		for (int j = 0; j < D; j++)
			t[i * D + j] = sin(x[i * D + (j + 1) % D]) * 0.5;
	init_model(&mine, herd_comm_rank(tp) * (H / ntp), H / ntp);
	init_model(&whole, 0, H);
	for (int k = 0; k < steps && !bad; k++) {
		int row = (dp != NULL ? herd_comm_rank(dp) : 0) * N;
		double loss = 0, ref = 0;

		if (step(&mine, x + row * D, t + row * D, N, N * ndp, tp, dp, &loss) != 0 ||
		    sum(dp, &loss, 1) != 0 || step(&whole, x, t, N * ndp, N * ndp, NULL, NULL, &ref))
			bad = 1;
		else if (rank == 0)
			printf("step %d: loss %.12f on the grid, %.12f on one rank\n", k + 1, loss, ref);
	}
	worst = shard_diff(&mine, &whole);
	if (!bad && herd_comm_allreduce(world, &worst, &worst, 1, HERD_FLOAT64, HERD_MAX) != HERD_OK)
		bad = 1;
	if (!bad && rank == 0)
		printf("tp=%d x dp=%d: after %d steps every weight is within %.3g of one rank's "
		       "(%s)\n", ntp, ndp, steps, worst, worst <= 1e-9 ? "match" : "MISMATCH");
	if (!bad)
		herd_comm_finalize(world);
	herd_comm_grid_free(grid);
	herd_comm_free(world);
	return bad || worst > 1e-9 ? 1 : 0;
}
