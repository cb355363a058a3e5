/*
 * bench/mpi_init_barrier.c - Open MPI's side of bench/launch_compare.sh:
 * MPI_Init, one MPI_Barrier, MPI_Finalize, as bench/launch_barrier.c does
 * with herd.
 */
#include <stdio.h>

#include <mpi.h>

int main(int argc, char **argv)
{
	if (MPI_Init(&argc, &argv) != MPI_SUCCESS || MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
		fprintf(stderr, "mpi_init_barrier: MPI failed\n");
		return 1;
	}
	MPI_Finalize();
	return 0;
}
