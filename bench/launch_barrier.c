/*
 * bench/launch_barrier.c - the smallest useful rank of a job: join the
 * communicator the launcher describes (herd_comm_init_env), pass one
 * barrier, leave.  bench/launch_compare.sh times `herd launch -n N` of it
 * against `mpirun -np N` of bench/mpi_init_barrier.c: startup cost, end to
 * end.  Exits 1 with the error on stderr when a step fails.
 */
#include <stdio.h>

#include <herd.h>

int main(void)
{
	herd_comm *comm = NULL;
	herd_status st;

	st = herd_comm_init_env(&comm, NULL);
	if (st == HERD_OK)
		st = herd_comm_barrier(comm);
	if (st == HERD_OK)
		st = herd_comm_finalize(comm);
	if (st != HERD_OK)
		fprintf(stderr, "launch_barrier: %s: %s\n", herd_status_name(st), herd_last_error());
	herd_comm_free(comm);
	return st == HERD_OK ? 0 : 1;
}
