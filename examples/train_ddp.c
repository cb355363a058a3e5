/*
 * examples/train_ddp.c - data-parallel training with checkpoints that
 * survive the death of a rank.
 *
 * Logistic regression on synthetic data: every rank generates its own
 * samples from the seed and its rank, computes the gradient of its part of
 * each batch, and the ranks sum their gradients with an allreduce, so that
 * every rank applies the same update to the same weights.  Every K steps
 * the weights are checkpointed (asynchronously: training goes on while the
 * writer thread writes).  Started again by `herd launch --restarts R`
 * after a failure (HERD_RESTART_COUNT > 0), it resumes from the newest
 * committed checkpoint and, from there, computes exactly what the first
 * run would have computed.
 *
 *   herd launch -n 2 --restarts 1 -- build/bin/example_train_ddp \
 *       --dir ckpt --steps 200 --every 20 --out weights.txt
 *
 * Options: --dir DIR (checkpoints, default train_ddp.ckpt), --steps S (200),
 * --every K (20), --seed N (1), --out FILE (rank 0 writes the final weights,
 * one float64 per line as the hex of its bits, then the loss), and, to
 * demonstrate a failure, --kill-rank R --kill-at T: in the first run only
 * (HERD_RESTART_COUNT 0), rank R kills itself with SIGKILL after step T.
 *
 * Determinism: the gradient sums are exact.  Each rank rounds its local
 * gradient to 64-bit fixed point (units of 2^-40) and the ranks sum those
 * integers, which is associative: the result does not depend on the
 * reduction order or algorithm, and it is the same on every rank.  Batches
 * are a function of the step alone, and the checkpoint holds everything
 * else (the weights; the step is the checkpoint's), so a resumed run
 * repeats the uninterrupted one bit for bit.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <herd.h>

#define FEATURES 16
#define SAMPLES 512          /* per rank */
#define BATCH 32             /* per rank and step */
#define LEARNING_RATE 0.5
#define FIXED_ONE 1099511627776.0   /* 2^40: the gradient's fixed-point unit */

struct options {
	const char *dir, *out;
	int64_t steps, every, kill_at;
	int kill_rank;
	uint64_t seed;
};

/* splitmix64: a stream of random numbers from any 64-bit seed. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* A uniform number in [-1, 1) from a seed and two indices. */
static double uniform(uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t x = mix(mix(mix(seed) ^ a) ^ b);

	return (double)(x >> 11) / 4503599627370496.0 - 1.0;
}

/* This rank's samples: features x, labels y from hidden true weights. */
static void make_data(uint64_t seed, int rank, double x[SAMPLES][FEATURES], double *y)
{
	double truth[FEATURES + 1];

	for (int j = 0; j <= FEATURES; j++)
		truth[j] = 3.0 * uniform(seed, 1000000, (uint64_t)j);
	for (int i = 0; i < SAMPLES; i++) {
		double z = truth[FEATURES];

		for (int j = 0; j < FEATURES; j++) {
			x[i][j] = uniform(seed, (uint64_t)rank + 1, (uint64_t)i * FEATURES + (uint64_t)j);
			z += truth[j] * x[i][j];
		}
		/* Labels with a little noise, so that the problem is not separable. */
		y[i] = z + 0.5 * uniform(seed, 2000000 + (uint64_t)rank, (uint64_t)i) > 0 ? 1.0 : 0.0;
	}
}

static double sigmoid(double z)
{
	return 1.0 / (1.0 + exp(-z));
}

/* The gradient of this rank's part of batch `step`, in fixed point; the
 * local loss sum in *loss. */
static void local_gradient(const double *w, double x[SAMPLES][FEATURES], const double *y,
			   int64_t step, int64_t *grad, double *loss)
{
	double g[FEATURES + 1] = { 0 };

	*loss = 0;
	for (int b = 0; b < BATCH; b++) {
		int i = (int)(((uint64_t)step * BATCH + (uint64_t)b) % SAMPLES);
		double z = w[FEATURES], p, e;

		for (int j = 0; j < FEATURES; j++)
			z += w[j] * x[i][j];
		p = sigmoid(z);
		e = p - y[i];
		for (int j = 0; j < FEATURES; j++)
			g[j] += e * x[i][j];
		g[FEATURES] += e;
		*loss -= y[i] > 0 ? log(p + 1e-12) : log(1 - p + 1e-12);
	}
	for (int j = 0; j <= FEATURES; j++)
		grad[j] = llround(g[j] * FIXED_ONE);
}

static int usage(const char *msg)
{
	fprintf(stderr, "example_train_ddp: %s\n"
		"usage: example_train_ddp [--dir DIR] [--steps S] [--every K] [--seed N]\n"
		"                         [--out FILE] [--kill-rank R --kill-at T]\n", msg);
	return 2;
}

static int parse(int argc, char **argv, struct options *o)
{
	o->dir = "train_ddp.ckpt";
	o->out = NULL;
	o->steps = 200;
	o->every = 20;
	o->seed = 1;
	o->kill_rank = -1;
	o->kill_at = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v == NULL)
			return usage("every option takes a value");
		i++;
		if (strcmp(a, "--dir") == 0)
			o->dir = v;
		else if (strcmp(a, "--out") == 0)
			o->out = v;
		else if (strcmp(a, "--steps") == 0)
			o->steps = strtoll(v, NULL, 10);
		else if (strcmp(a, "--every") == 0)
			o->every = strtoll(v, NULL, 10);
		else if (strcmp(a, "--seed") == 0)
			o->seed = strtoull(v, NULL, 10);
		else if (strcmp(a, "--kill-rank") == 0)
			o->kill_rank = atoi(v);
		else if (strcmp(a, "--kill-at") == 0)
			o->kill_at = strtoll(v, NULL, 10);
		else
			return usage("unknown option");
	}
	if (o->steps < 1 || o->every < 1)
		return usage("--steps and --every must be 1 or more");
	return 0;
}

static int write_weights(const char *path, const double *w, double loss)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		perror(path);
		return 1;
	}
	for (int j = 0; j <= FEATURES; j++) {
		uint64_t bits;

		memcpy(&bits, &w[j], sizeof(bits));
		fprintf(f, "%016" PRIx64 "\n", bits);
	}
	fprintf(f, "loss %.17g\n", loss);
	return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static double x[SAMPLES][FEATURES];
	double y[SAMPLES], w[FEATURES + 1] = { 0 }, loss = 0, batch_loss = 0;
	int64_t grad[FEATURES + 2], sum[FEATURES + 2], start = 0;
	uint64_t shape[1] = { FEATURES + 1 };
	herd_comm *comm = NULL, *ckcomm = NULL;
	herd_ckpt_opts co = HERD_CKPT_OPTS_INIT;
	herd_ckpt *ck = NULL;
	const char *restart = getenv("HERD_RESTART_COUNT");
	int restarts = restart != NULL ? atoi(restart) : 0, rank, size, rc = 1;
	struct options o;
	herd_status st;

	if (parse(argc, argv, &o) != 0)
		return 2;
	if (herd_comm_init_env(&comm, NULL) != HERD_OK)
		goto fail;
	rank = herd_comm_rank(comm);
	size = herd_comm_size(comm);
	make_data(o.seed, rank, x, y);

	/* The checkpoint gets a communicator of its own: its writer thread
	 * commits in the background while this thread runs allreduces. */
	if (herd_comm_split(&ckcomm, comm, 0, rank) != HERD_OK)
		goto fail;
	co.keep_last = 3;
	if (herd_ckpt_open(&ck, o.dir, ckcomm, &co) != HERD_OK ||
	    herd_ckpt_add_tensor(ck, "weights", w, HERD_FLOAT64, 1, shape, NULL, NULL) != HERD_OK)
		goto fail;
	if (restarts > 0) {
		int64_t step;

		st = herd_ckpt_restore(ck, HERD_CKPT_LATEST, &step);
		if (st == HERD_OK) {
			start = step;
			if (rank == 0)
				printf("restart %d: resumed from step %" PRId64 "\n", restarts, step);
		} else if (st == HERD_ENOTFOUND) {
			if (rank == 0)
				printf("restart %d: no checkpoint yet, starting over\n", restarts);
		} else {
			/* HERD_ECORRUPT among them: steps exist and none verifies.
			 * Starting over would overwrite them; a person decides. */
			goto fail;
		}
	}

	for (int64_t step = start + 1; step <= o.steps; step++) {
		local_gradient(w, x, y, step, grad, &batch_loss);
		/* The loss travels with the gradient, in the same fixed point. */
		grad[FEATURES + 1] = llround(batch_loss * FIXED_ONE);
		if (herd_comm_allreduce(comm, grad, sum, FEATURES + 2, HERD_INT64, HERD_SUM) != HERD_OK)
			goto fail;
		for (int j = 0; j <= FEATURES; j++)
			w[j] -= LEARNING_RATE * ((double)sum[j] / FIXED_ONE) / (double)(BATCH * size);
		loss = (double)sum[FEATURES + 1] / FIXED_ONE / (double)(BATCH * size);
		if (rank == 0 && step % o.every == 0)
			printf("step %" PRId64 ": loss %.6f\n", step, loss);
		if (restarts == 0 && rank == o.kill_rank && step == o.kill_at) {
			fflush(stdout);
			raise(SIGKILL);
		}
		/* herd_ckpt_save_async returns once w is copied, so the next
		 * update may change it at once. */
		if (step % o.every == 0 && herd_ckpt_save_async(ck, step) != HERD_OK)
			goto fail;
	}
	if (herd_ckpt_wait(ck) != HERD_OK)
		goto fail;
	if (rank == 0 && o.out != NULL && write_weights(o.out, w, loss) != 0)
		goto out;
	if (rank == 0)
		printf("done: %" PRId64 " steps on %d ranks, loss %.6f\n", o.steps, size, loss);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "example_train_ddp: %s\n", herd_last_error());
out:
	if (ck != NULL && herd_ckpt_wait(ck) != HERD_OK && rc == 0) {
		fprintf(stderr, "example_train_ddp: %s\n", herd_last_error());
		rc = 1;
	}
	herd_ckpt_free(ck);
	if (rc == 0 && (herd_comm_finalize(ckcomm) != HERD_OK || herd_comm_finalize(comm) != HERD_OK)) {
		fprintf(stderr, "example_train_ddp: %s\n", herd_last_error());
		rc = 1;
	}
	herd_comm_free(ckcomm);
	herd_comm_free(comm);
	return rc;
}
