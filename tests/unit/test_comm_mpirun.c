/*
 * Bootstrap under a real Open MPI launcher: `mpirun -n 3` starts this
 * program again as ranks, which find their identity in Open MPI's
 * variables (OMPI_COMM_WORLD_RANK/SIZE), meet in the store named by
 * HERD_STORE, and allreduce.  Reported skipped (77) where mpirun is absent.
 */
#include "comm_harness.h"

#define NRANKS 3
#define COUNT 1009

/* A rank started by mpirun. */
static int run_as_rank(void)
{
	herd_comm *comm = NULL;
	int32_t in[COUNT], out[COUNT];
	int rank, size;

	CHECK_OK(herd_comm_init_env(&comm, NULL));
	if (comm == NULL)
		return 1;
	rank = herd_comm_rank(comm);
	size = herd_comm_size(comm);
	CHECK_INT(rank, atoi(getenv("OMPI_COMM_WORLD_RANK")));
	CHECK_INT(size, NRANKS);
	for (int i = 0; i < COUNT; i++)
		in[i] = rank * 1000 + i;
	CHECK_OK(herd_comm_allreduce(comm, in, out, COUNT, HERD_INT32, HERD_SUM));
	for (int i = 0; i < COUNT; i++)
		if (out[i] != 3000 + NRANKS * i) {
			CHECK_INT(out[i], 3000 + NRANKS * i);
			break;
		}
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
	return test_failures == 0 ? 0 : 1;
}

static void test_comm_init_env_under_real_mpirun(void)
{
	char self[4096], cmd[8192];
	ssize_t n;
	int rc;

	if (system("command -v mpirun >/dev/null 2>&1") != 0)
		TEST_SKIP("mpirun not found");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0);
	if (n <= 0)
		return;
	self[n] = '\0';
	harness_start();
	setenv("HERD_STORE", harness_address(), 1);
	setenv("HERD_JOB_SECRET", HARNESS_SECRET, 1);
	setenv("HERD_TIMEOUT", "60", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
	snprintf(cmd, sizeof(cmd),
		 "timeout 90 mpirun --oversubscribe --mca btl self,vader -n %d %s", NRANKS, self);
	rc = system(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	if (!(WIFEXITED(rc) && WEXITSTATUS(rc) == 0))
		fprintf(stderr, "mpirun -n %d exited with status %d\n", NRANKS, rc);
	harness_stop();
}

int main(void)
{
	if (getenv("OMPI_COMM_WORLD_RANK") != NULL)
		return run_as_rank();
	TEST_RUN(test_comm_init_env_under_real_mpirun);
	return TEST_DONE();
}
