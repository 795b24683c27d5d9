/* bench/overhead.c -- N calls of MPI_Send(8 bytes of a malloc'd buffer, MPI_PROC_NULL) and N of
 * MPI_Irecv + MPI_Wait from MPI_PROC_NULL: the path of a host buffer through MPI with nothing
 * on the wire, for bench/callgrind.sh, which counts the instructions per call with and
 * without the shim. One rank: MPI_Init as a singleton or under mpirun -n 1.
 *
 *   overhead N
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 1000;
    char *buf = malloc(64);
    for (int i = 0; i < 64; i++) buf[i] = (char)i;
    MPI_Request req;
    for (long i = 0; i < n; i++) {
        MPI_Send(buf, 8, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
        MPI_Irecv(buf, 8, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
