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
 * --state-mib M adds M MiB of optimizer-like state (a moving average of
 * the weights, float64) sharded over the ranks, rank r holding the r-th of
 * `size` contiguous parts: checkpointed with the weights and, after a
 * restart on another number of ranks (herd launch --nodes MIN-MAX),
 * restored resharded; --out then also gets its checksum.  --pace MS makes
 * every step last at least MS milliseconds, to watch a run or lose a node
 * in the middle of one.  --resume resumes from the newest checkpoint in
 * the first run too (a run started from another's checkpoint).
 * --storage-every N: with copies in peers' memory (herd launch
 * --ckpt-peers K), only every N-th step's save goes to storage too; after
 * a restart every rank says which tier it restored from, and why.
 * --auto-interval: after 10 saves, the interval between saves becomes the
 * one herd_ckpt_interval chooses from the save stall measured so far and
 * the job's mean time to failure (HERD_CKPT_MTTF, or this job's failures),
 * rank 0's choice for all; --stall prints the mean stall so far after
 * every save.
 *
 * Elastic: started again on fewer or more ranks, it resumes from the
 * newest committed checkpoint with the new world size (its batches are
 * then those of that many ranks), and computes what a run started on that
 * many ranks from the same checkpoint computes, bit for bit:
 *
 *   herd launch --hosts 'node[1-4]' --nodes 3-4 --restarts 2 -- \
 *       build/bin/example_train_ddp --dir /shared/ckpt --steps 400 --state-mib 256
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
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <herd.h>

#define FEATURES 16
#define SAMPLES 512          /* per rank */
#define BATCH 32             /* per rank and step */
#define LEARNING_RATE 0.5
#define FIXED_ONE 1099511627776.0   /* 2^40: the gradient's fixed-point unit */

struct options {
	const char *dir, *out;
	int64_t steps, every, kill_at, state_mib, pace_ms;
	int kill_rank;
	bool resume;
	int storage_every;
	bool auto_interval, stall;
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
		"                         [--out FILE] [--kill-rank R --kill-at T]\n"
		"                         [--state-mib M] [--pace MS] [--resume]\n"
		"                         [--storage-every N] [--auto-interval] [--stall]\n", msg);
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
	o->state_mib = 0;
	o->pace_ms = 0;
	o->resume = false;
	o->storage_every = 0;
	o->auto_interval = o->stall = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--resume") == 0 || strcmp(a, "--auto-interval") == 0 ||
		    strcmp(a, "--stall") == 0) {
			if (a[2] == 'r')
				o->resume = true;
			else if (a[2] == 'a')
				o->auto_interval = true;
			else
				o->stall = true;
			continue;
		}
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
		else if (strcmp(a, "--state-mib") == 0)
			o->state_mib = strtoll(v, NULL, 10);
		else if (strcmp(a, "--pace") == 0)
			o->pace_ms = strtoll(v, NULL, 10);
		else if (strcmp(a, "--storage-every") == 0)
			o->storage_every = atoi(v);
		else
			return usage("unknown option");
	}
	if (o->steps < 1 || o->every < 1)
		return usage("--steps and --every must be 1 or more");
	if (o->state_mib < 0 || o->state_mib > 65536 || o->pace_ms < 0 || o->pace_ms > 60000)
		return usage("--state-mib is 0 to 65536, --pace 0 to 60000");
	if (o->storage_every < 0)
		return usage("--storage-every must be 1 or more");
	return 0;
}

/* Which tier this rank restored from, and why: one line per rank. */
static void say_tier(const herd_ckpt *ck, int restarts, int rank)
{
	herd_ckpt_restore_info ri;

	if (herd_ckpt_last_restore(ck, &ri) != HERD_OK)
		return;
	if (ri.tier == HERD_CKPT_TIER_PEERS)
		printf("restart %d: rank %d restored step %" PRId64 " from %s (%s, %.1f MiB) in "
		       "%.3f s: %s\n", restarts, rank, ri.step, herd_ckpt_tier_name(ri.tier),
		       ri.from[0] ? ri.from : "nothing to fetch", (double)ri.bytes / 1048576,
		       ri.seconds, ri.why);
	else
		printf("restart %d: rank %d restored step %" PRId64 " from %s in %.3f s: %s\n",
		       restarts, rank, ri.step, herd_ckpt_tier_name(ri.tier), ri.seconds, ri.why);
	fflush(stdout);
}

/* The stall of the saves so far, of the tier the most went to. */
static void say_stall(const herd_ckpt *ck)
{
	herd_ckpt_stats s;
	const herd_ckpt_tier_stats *t;

	if (herd_ckpt_get_stats(ck, &s) != HERD_OK)
		return;
	t = s.peers.saves >= s.storage.saves ? &s.peers : &s.storage;
	if (t->saves == 0)
		return;   /* none has ended yet */
	printf("save stall: mean %.4f s over %" PRIu64 " saves to %s (max %.4f s, busy %.3f s a "
	       "save)\n", t->stall_s / (double)t->saves, t->saves,
	       t == &s.peers ? "peers' memory" : "storage", t->stall_max_s,
	       t->busy_s / (double)t->saves);
	fflush(stdout);
}

/*
 * --auto-interval: rank 0 models the saves so far (the tier most of them
 * went to) and turns the interval herd_ckpt_interval chooses into steps of
 * step_s; every rank takes rank 0's choice (the saves are collective).
 */
static herd_status choose_interval(herd_ckpt *ck, herd_comm *comm, int rank, struct options *o,
				   double step_s, int restarts)
{
	herd_ckpt_interval_model m;
	herd_ckpt_interval_choice c;
	herd_ckpt_stats s;
	herd_ckpt_tier tier;
	char source[160];
	int64_t every = 0, chosen;
	herd_status st;

	if (rank == 0 && herd_ckpt_get_stats(ck, &s) == HERD_OK) {
		tier = s.peers.saves >= s.storage.saves ? HERD_CKPT_TIER_PEERS : HERD_CKPT_TIER_STORAGE;
		if (herd_ckpt_model(ck, tier, &m, source, sizeof(source)) == HERD_OK &&
		    herd_ckpt_interval(&m, &c) == HERD_OK) {
			every = llround(c.interval_s / (step_s > 0 ? step_s : 1));
			if (every < 1)
				every = 1;
			printf("restart %d: interval: every %" PRId64 " steps (%.1f s of training): a "
			       "save to %s stalls %.4f s, a failure costs %.1f s, mean time to failure "
			       "%.0f s (%s); expected ETTR %.4f, set by %s\n", restarts, every,
			       c.interval_s, herd_ckpt_tier_name(tier), m.save_s, m.lost_s, m.mttf_s,
			       source, c.ettr, c.bound[0] ? c.bound : "the optimum");
		} else {
			printf("restart %d: interval: every %" PRId64 " steps kept: %s\n", restarts,
			       o->every, herd_last_error());
		}
		fflush(stdout);
	}
	st = herd_comm_allreduce(comm, &every, &chosen, 1, HERD_INT64, HERD_MAX);
	if (st != HERD_OK)
		return st;
	if (chosen > 0)
		o->every = chosen;
	return HERD_OK;
}

/* Seconds of CLOCK_REALTIME: the ranks of all nodes and the launcher
 * read one clock on one machine, and near enough on a cluster. */
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The state's step: an average of the weights, element i following
 * weight i mod (FEATURES + 1); first is the shard's global index. */
static void state_step(double *m, size_t n, uint64_t first, const double *w)
{
	for (size_t i = 0; i < n; i++)
		m[i] = 0.9 * m[i] + 0.1 * w[(first + i) % (FEATURES + 1)] +
		       1e-9 * (double)((first + i) & 1023);
}

/* The shard's part of the state's checksum: a sum (mod 2^64) of each
 * element's bits times a hash of its global index, which does not depend
 * on how the state is sharded. */
static uint64_t state_sum(const double *m, size_t n, uint64_t first)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t bits;

		memcpy(&bits, &m[i], sizeof(bits));
		sum += bits * (mix(first + i) | 1);
	}
	return sum;
}

static int write_weights(const char *path, const double *w, double loss, bool state,
			 uint64_t checksum)
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
	if (state)
		fprintf(f, "state %016" PRIx64 "\n", checksum);
	return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static double x[SAMPLES][FEATURES];
	double y[SAMPLES], w[FEATURES + 1] = { 0 }, loss = 0, batch_loss = 0;
	int64_t grad[FEATURES + 2], sum[FEATURES + 2], start = 0, saves = 0;
	double t_loop;
	uint64_t shape[1] = { FEATURES + 1 }, state_len = 0, first = 0, part[1], at[1];
	uint64_t checksum = 0, local_sum;
	double *m = NULL, t_main = now_s(), t_restore = 0;
	bool resumed = false;
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
	co.storage_every = o.storage_every;
	if (herd_ckpt_open(&ck, o.dir, ckcomm, &co) != HERD_OK ||
	    herd_ckpt_add_tensor(ck, "weights", w, HERD_FLOAT64, 1, shape, NULL, NULL) != HERD_OK)
		goto fail;
	if (o.state_mib > 0) {
		/* This rank's part of the state: the r-th of size near-equal
		 * ranges (at least one element, as the checkpoint wants). */
		state_len = (uint64_t)o.state_mib << 17;
		first = state_len * (uint64_t)rank / (uint64_t)size;
		part[0] = state_len * (uint64_t)(rank + 1) / (uint64_t)size - first;
		at[0] = first;
		m = calloc(part[0] > 0 ? part[0] : 1, sizeof(*m));
		if (m == NULL) {
			fprintf(stderr, "example_train_ddp: out of memory for the state\n");
			goto out;
		}
		if (herd_ckpt_add_tensor(ck, "state", m, HERD_FLOAT64, 1, &state_len, at, part) !=
		    HERD_OK)
			goto fail;
	}
	if (restarts > 0 || o.resume) {
		int64_t step;
		double t0 = now_s();

		st = herd_ckpt_restore(ck, HERD_CKPT_LATEST, &step);
		t_restore = now_s() - t0;
		if (st == HERD_OK) {
			start = step;
			resumed = true;
			if (rank == 0)
				printf("restart %d: resumed from step %" PRId64 " on %d ranks (started "
				       "at %.3f, restore began at %.3f, restored in %.3f s)\n",
				       restarts, step, size, t_main, t0, t_restore);
			fflush(stdout);
			say_tier(ck, restarts, rank);
		} else if (st == HERD_ENOTFOUND) {
			if (rank == 0)
				printf("restart %d: no checkpoint yet, starting over\n", restarts);
		} else {
			/* HERD_ECORRUPT among them: steps exist and none verifies.
			 * Starting over would overwrite them; a person decides. */
			goto fail;
		}
	}

	t_loop = now_s();
	for (int64_t step = start + 1; step <= o.steps; step++) {
		double t_step = now_s();

		local_gradient(w, x, y, step, grad, &batch_loss);
		/* The loss travels with the gradient, in the same fixed point. */
		grad[FEATURES + 1] = llround(batch_loss * FIXED_ONE);
		if (herd_comm_allreduce(comm, grad, sum, FEATURES + 2, HERD_INT64, HERD_SUM) != HERD_OK)
			goto fail;
		for (int j = 0; j <= FEATURES; j++)
			w[j] -= LEARNING_RATE * ((double)sum[j] / FIXED_ONE) / (double)(BATCH * size);
		loss = (double)sum[FEATURES + 1] / FIXED_ONE / (double)(BATCH * size);
		if (m != NULL)
			state_step(m, part[0], first, w);
		while (o.pace_ms > 0 && now_s() - t_step < (double)o.pace_ms / 1000)
			usleep(1000);
		if (rank == 0 && step % o.every == 0)
			printf("step %" PRId64 ": loss %.6f\n", step, loss);
		if (rank == 0 && resumed && step == start + 1)
			printf("restart %d: first step done at %.3f\n", restarts, now_s());
		if (rank == 0)
			fflush(stdout);
		if (restarts == 0 && rank == o.kill_rank && step == o.kill_at) {
			fflush(stdout);
			raise(SIGKILL);
		}
		/* herd_ckpt_save_async returns once w is copied, so the next
		 * update may change it at once. */
		if (step % o.every != 0)
			continue;
		if (herd_ckpt_save_async(ck, step) != HERD_OK)
			goto fail;
		saves++;
		if (o.stall && rank == 0)
			say_stall(ck);
		if (o.auto_interval && saves == 10 &&
		    choose_interval(ck, comm, rank, &o, (now_s() - t_loop) / (double)(step - start),
				    restarts) != HERD_OK)
			goto fail;
	}
	if (herd_ckpt_wait(ck) != HERD_OK)
		goto fail;
	local_sum = m != NULL ? state_sum(m, part[0], first) : 0;
	if (m != NULL && herd_comm_allreduce(comm, &local_sum, &checksum, 1, HERD_UINT64, HERD_SUM) !=
	    HERD_OK)
		goto fail;
	if (rank == 0 && o.out != NULL && write_weights(o.out, w, loss, m != NULL, checksum) != 0)
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
	free(m);
	return rc;
}
