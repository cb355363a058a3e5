/*
 * herd_comm_explain and herd_comm_nccl_runtime, through the public API
 * only: the text of the algorithm a call would take on communicators of
 * one rank and of two ranks (threads of this process over a file store),
 * the same on both ranks; what is ignored and what is refused; a buffer
 * too small cuts the text short; and the NCCL line of `herd --version`.
 */
#include <pthread.h>

#include "test.h"

/* One rank of a communicator of n, as a thread. */
typedef struct rank_thread {
	pthread_t thread;
	const char *dir;
	const char *algo;       /* herd_comm_opts.algo */
	int rank, n;
	herd_comm_op op;
	size_t count;
	herd_status st;
	char text[1024];
	char error[512];
} rank_thread;

static void *rank_main(void *arg)
{
	rank_thread *t = arg;
	herd_store *store = NULL;
	herd_comm *comm = NULL;
	herd_comm_opts opts = HERD_COMM_OPTS_INIT;

	opts.algo = t->algo;
	t->st = herd_store_open_file(&store, t->dir, NULL);
	if (t->st == HERD_OK)
		t->st = herd_comm_init(&comm, store, t->rank, t->n, &opts);
	if (t->st == HERD_OK)
		t->st = herd_comm_explain(comm, t->op, t->count, HERD_FLOAT32, HERD_SUM, 0, t->text,
					  sizeof(t->text));
	if (t->st == HERD_OK)
		t->st = herd_comm_finalize(comm);
	if (t->st != HERD_OK)
		snprintf(t->error, sizeof(t->error), "%s", herd_last_error());
	herd_comm_free(comm);
	herd_store_free(store);
	return NULL;
}

/* The text of op on count elements on each rank of a communicator of n
 * with algo. */
static void explain_on_ranks(int n, const char *algo, herd_comm_op op, size_t count,
			     rank_thread *t)
{
	char *dir = make_tmpdir();

	for (int r = 0; r < n; r++) {
		t[r] = (rank_thread){ .dir = dir, .algo = algo, .rank = r, .n = n, .op = op,
				      .count = count };
		CHECK_INT(pthread_create(&t[r].thread, NULL, rank_main, &t[r]), 0);
	}
	for (int r = 0; r < n; r++) {
		pthread_join(t[r].thread, NULL);
		if (t[r].st != HERD_OK)
			fprintf(stderr, "rank %d: %s: %s\n", r, herd_status_name(t[r].st),
				t[r].error);
		CHECK_INT(t[r].st, HERD_OK);
	}
	rm_tree(dir);
}

static void test_comm_explain_one_rank_needs_no_peer(void)
{
	rank_thread t[1];

	explain_on_ranks(1, "auto", HERD_COMM_OP_ALLREDUCE, 1000, t);
	CHECK_STR(t[0].text, "4000 bytes (sized as 4000) on 1 ranks, 1 host with at most 1 "
		  "ranks, algo auto: local (no peer needed)");
}

static void test_comm_explain_two_ranks_say_the_same_choice_and_why(void)
{
	rank_thread t[2];

	explain_on_ranks(2, "auto", HERD_COMM_OP_ALLREDUCE, 2, t);
	CHECK_STR(t[0].text, "8 bytes (sized as 8) on 2 ranks, 1 host with at most 2 ranks, "
		  "algo auto: shared-memory direct, small");
	CHECK_STR(t[1].text, t[0].text);
	/* allgather is sized by all the blocks together; a forced class says only that */
	explain_on_ranks(2, "ring", HERD_COMM_OP_ALLGATHER, 16, t);
	CHECK_STR(t[0].text, "64 bytes (sized as 128) on 2 ranks, 1 host with at most 2 ranks, "
		  "algo ring: ring");
	CHECK_STR(t[1].text, t[0].text);
}

static void test_comm_explain_refuses_what_no_call_takes(void)
{
	herd_store *store = NULL;
	herd_comm *comm = NULL;
	char *dir = make_tmpdir();
	char buf[256], small[16];

	CHECK_OK(herd_store_open_file(&store, dir, NULL));
	CHECK_OK(herd_comm_init(&comm, store, 0, 1, NULL));
	CHECK_ERR(herd_comm_explain(NULL, HERD_COMM_OP_ALLREDUCE, 1, HERD_FLOAT32, HERD_SUM, 0, buf,
				    sizeof(buf)), HERD_EINVAL, "herd_comm_explain: comm is NULL");
	CHECK_ERR(herd_comm_explain(comm, HERD_COMM_OP_ALLREDUCE, 1, HERD_FLOAT32, HERD_SUM, 0,
				    NULL, sizeof(buf)), HERD_EINVAL, "buf is NULL or cap is 0");
	CHECK_ERR(herd_comm_explain(comm, HERD_COMM_OP_ALLREDUCE, 1, HERD_FLOAT32, HERD_SUM, 0, buf,
				    0), HERD_EINVAL, "buf is NULL or cap is 0");
	CHECK_ERR(herd_comm_explain(comm, (herd_comm_op)0, 1, HERD_FLOAT32, HERD_SUM, 0, buf,
				    sizeof(buf)), HERD_EINVAL, "op 0 is not a herd_comm_op");
	CHECK_STR(buf, "");
	CHECK_ERR(herd_comm_explain(comm, (herd_comm_op)13, 1, HERD_FLOAT32, HERD_SUM, 0, buf,
				    sizeof(buf)), HERD_EINVAL, "op 13 is not a herd_comm_op");
	CHECK_ERR(herd_comm_explain(comm, HERD_COMM_OP_ALLGATHER, 1, (herd_dtype)99, HERD_SUM, 0,
				    buf, sizeof(buf)), HERD_EINVAL, "dtype 99 is not a herd_dtype");
	CHECK_ERR(herd_comm_explain(comm, HERD_COMM_OP_ALLREDUCE, 1, HERD_FLOAT32, (herd_redop)99,
				    0, buf, sizeof(buf)), HERD_EINVAL, "op 99 is not a herd_redop");
	CHECK_ERR(herd_comm_explain(comm, HERD_COMM_OP_REDUCE, 1, HERD_FLOAT32, HERD_SUM, 1, buf,
				    sizeof(buf)), HERD_EINVAL, "root 1 is out of range");
	/* a reduction and a root where the call takes none are ignored */
	CHECK_OK(herd_comm_explain(comm, HERD_COMM_OP_ALLGATHER, 1, HERD_FLOAT32, (herd_redop)99,
				   7, buf, sizeof(buf)));
	CHECK_OK(herd_comm_explain(comm, HERD_COMM_OP_BARRIER, 5, (herd_dtype)99, HERD_SUM, 7, buf,
				   sizeof(buf)));
	CHECK(strncmp(buf, "0 bytes (sized as 0) on 1 ranks", 31) == 0);
	/* cut short, terminated */
	CHECK_OK(herd_comm_explain(comm, HERD_COMM_OP_ALLREDUCE, 1000, HERD_FLOAT32, HERD_SUM, 0,
				   small, sizeof(small)));
	CHECK_STR(small, "4000 bytes (siz");
	herd_comm_free(comm);
	herd_store_free(store);
	rm_tree(dir);
}

static void test_comm_nccl_runtime_names_the_library_or_why_there_is_none(void)
{
	char buf[HERD_COMM_NCCL_RUNTIME_LEN];
	const char *text = herd_comm_nccl_runtime(buf);

	CHECK(text == buf);
	CHECK(strlen(text) > 0);
	CHECK(strncmp(text, "NCCL ", 5) == 0 || strstr(text, "libnccl") != NULL ||
	      strcmp(text, "this libherd was built without NCCL") == 0);
}

int main(void)
{
	TEST_RUN(test_comm_explain_one_rank_needs_no_peer);
	TEST_RUN(test_comm_explain_two_ranks_say_the_same_choice_and_why);
	TEST_RUN(test_comm_explain_refuses_what_no_call_takes);
	TEST_RUN(test_comm_nccl_runtime_names_the_library_or_why_there_is_none);
	return TEST_DONE();
}
