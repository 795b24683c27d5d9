/* bench/exchange.c -- what cudampi costs a program that uses host buffers only: 2 ranks, each
 * iteration an MPI_Irecv + MPI_Isend + MPI_Waitall exchange of SIZE bytes (a halo exchange),
 * then an 8-byte blocking ping-pong (MPI_Send/MPI_Recv), both on malloc'd buffers.
 *
 *   mpirun -n 2 exchange [ITERS] [SIZE] [ROUNDS]     (defaults 200000, 4096 and 20)
 *
 * Prints on rank 0: "exchange SIZE B: X ns per iteration; ping-pong 8 B: Y ns per call (one
 * way); shim loaded|not loaded", the best of 3 repetitions through the MPI_* functions. Run it
 * with and without the shim preloaded, alternating, and compare the runs.
 *
 * Where the shim is loaded, a second line compares the two routes within the one process:
 * ROUNDS rounds, each timing ITERS / 10 iterations through the MPI library's own PMPI
 * functions (bench/real.h: dladdr(MPI_Comm_rank) -> dlopen(RTLD_NOLOAD) -> dlsym, which
 * bypasses cudampi) and as many through MPI_* (cudampi), the first route
 * alternating from round to round: "interleaved over R rounds: exchange real X ns, cudampi Y
 * ns per iteration (+P%, median of the rounds' ratios); ping-pong real A ns, cudampi B ns per
 * call (+D ns, median of the rounds' differences)". Both routes then share the placement, the
 * machine's state and the library, which separate runs, moving by 10% from one to the next
 * on a busy host, do not.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "real.h"

typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*waitall_fn)(int, MPI_Request *, MPI_Status *);
typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);

struct route {
    irecv_fn irecv;
    isend_fn isend;
    waitall_fn waitall;
    send_fn send;
    recv_fn recv;
};

static int rank, peer, n;
static char *s, *r;

/* The MPI library's own functions, or 0 where it cannot be opened again. */
static int real_route(struct route *rt)
{
    const char *path = NULL;
    void *h = real_mpi_library(&path);
    if (!h) return 0;
    rt->irecv = (irecv_fn)dlsym(h, "PMPI_Irecv");
    rt->isend = (isend_fn)dlsym(h, "PMPI_Isend");
    rt->waitall = (waitall_fn)dlsym(h, "PMPI_Waitall");
    rt->send = (send_fn)dlsym(h, "PMPI_Send");
    rt->recv = (recv_fn)dlsym(h, "PMPI_Recv");
    return rt->irecv && rt->isend && rt->waitall && rt->send && rt->recv;
}

/* Seconds for `iters` exchanges through rt. */
static double exchange(const struct route *rt, long iters)
{
    MPI_Request q[2];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        rt->irecv(r, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[0]);
        rt->isend(s, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[1]);
        rt->waitall(2, q, MPI_STATUSES_IGNORE);
    }
    return MPI_Wtime() - t0;
}

/* Seconds for `iters` 8-byte round trips through rt. */
static double pingpong(const struct route *rt, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            rt->send(s, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
            rt->recv(r, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            rt->recv(r, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            rt->send(s, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    n = argc > 2 ? atoi(argv[2]) : 4096;
    int rounds = argc > 3 ? atoi(argv[3]) : 20;
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "exchange: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = 1 - rank;
    s = malloc((size_t)n);
    r = malloc((size_t)n);
    memset(s, rank + 1, (size_t)n);
    struct route mpi = {(irecv_fn)MPI_Irecv, (isend_fn)MPI_Isend, (waitall_fn)MPI_Waitall, (send_fn)MPI_Send,
                        (recv_fn)MPI_Recv};
    double best_x = 1e30, best_p = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double x = exchange(&mpi, iters), p = pingpong(&mpi, iters);
        if (x < best_x) best_x = x;
        if (p < best_p) best_p = p;
    }
    if (r[0] != (char)(peer + 1)) {
        fprintf(stderr, "exchange: rank %d received %d, expected %d\n", rank, r[0], peer + 1);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int shim = dlsym(RTLD_DEFAULT, "cudampi_version") != NULL;
    if (rank == 0)
        printf("exchange %d B: %.1f ns per iteration; ping-pong 8 B: %.1f ns per call (one way); shim %s\n", n,
               best_x / (double)iters * 1e9, best_p / (double)iters / 2 * 1e9, shim ? "loaded" : "not loaded");
    struct route real;
    if (shim && real_route(&real) && rounds > 0) {
        long k = iters / 10 > 0 ? iters / 10 : 1;
        double *xr = malloc(sizeof(double) * (size_t)rounds), *xs = malloc(sizeof(double) * (size_t)rounds);
        double *pr = malloc(sizeof(double) * (size_t)rounds), *ps = malloc(sizeof(double) * (size_t)rounds);
        double *ratio = malloc(sizeof(double) * (size_t)rounds), *diff = malloc(sizeof(double) * (size_t)rounds);
        for (int i = 0; i < rounds; i++) {
            const struct route *first = i % 2 ? &mpi : &real, *second = i % 2 ? &real : &mpi;
            double a = exchange(first, k), b = exchange(second, k);
            xr[i] = (i % 2 ? b : a) / (double)k * 1e9;
            xs[i] = (i % 2 ? a : b) / (double)k * 1e9;
            a = pingpong(first, k);
            b = pingpong(second, k);
            pr[i] = (i % 2 ? b : a) / (double)k / 2 * 1e9;
            ps[i] = (i % 2 ? a : b) / (double)k / 2 * 1e9;
            ratio[i] = xs[i] / xr[i];
            diff[i] = ps[i] - pr[i];
        }
        if (rank == 0)
            printf("interleaved over %d rounds: exchange real %.1f ns, cudampi %.1f ns per iteration (%+.1f%%, median of "
                   "the rounds' ratios); ping-pong real %.1f ns, cudampi %.1f ns per call (%+.1f ns, median of the "
                   "rounds' differences)\n",
                   rounds, median(xr, rounds), median(xs, rounds), (median(ratio, rounds) - 1) * 100, median(pr, rounds),
                   median(ps, rounds), median(diff, rounds));
        free(xr), free(xs), free(pr), free(ps), free(ratio), free(diff);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
