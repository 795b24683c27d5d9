/* bench/exchange.c -- what cudampi costs a program that uses host buffers only: 2 ranks, each
 * iteration an MPI_Irecv + MPI_Isend + MPI_Waitall exchange of SIZE bytes (a halo exchange),
 * then an 8-byte blocking ping-pong (MPI_Send/MPI_Recv), both on malloc'd buffers. Run it
 * with and without the shim preloaded, alternating, and compare the best of the runs.
 *
 *   mpirun -n 2 exchange [ITERS] [SIZE]     (defaults 200000 and 4096)
 *
 * Prints one line on rank 0: "exchange SIZE B: X ns per iteration; ping-pong 8 B: Y ns per
 * call (one way); shim loaded|not loaded".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int n = argc > 2 ? atoi(argv[2]) : 4096;
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "exchange: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int peer = 1 - rank;
    char *s = malloc((size_t)n), *r = malloc((size_t)n);
    memset(s, rank + 1, (size_t)n);
    MPI_Request q[2];
    double best_x = 1e30, best_p = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            MPI_Irecv(r, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        }
        double t1 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            if (rank == 0) {
                MPI_Send(s, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(r, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(r, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(s, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
            }
        }
        double t2 = MPI_Wtime();
        if ((t1 - t0) < best_x) best_x = t1 - t0;
        if ((t2 - t1) < best_p) best_p = t2 - t1;
    }
    if (r[0] != (char)(peer + 1)) {
        fprintf(stderr, "exchange: rank %d received %d, expected %d\n", rank, r[0], peer + 1);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("exchange %d B: %.1f ns per iteration; ping-pong 8 B: %.1f ns per call (one way); shim %s\n", n,
               best_x / (double)iters * 1e9, best_p / (double)iters / 2 * 1e9,
               dlsym(RTLD_DEFAULT, "cudampi_version") ? "loaded" : "not loaded");
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
