// cudampi-test: ranks=2 without-shim=crash timeout=120
/* A window of many device sends outstanding at once. Rank 0 posts NSEND device MPI_Isend's of
 * BYTES bytes (each from its own slice of one device buffer, each slice its own pattern) and
 * completes them with one MPI_Waitall; rank 1 receives them one by one with MPI_Recv into a
 * poisoned device buffer, checks every message and its status, and goes straight to
 * MPI_Finalize: no collective call after the window, since one would let rank 1 progress what
 * rank 0 still waits for. Each rank reports its own checks and exits non-zero on a failure; a
 * rank stuck in MPI_Waitall makes the run time out.
 *
 * 300 sends of 100,000 bytes hung rank 0 in the real MPI_Waitall on MPICH 5.0 while rank 1 sat
 * in MPI_Finalize: MPICH's finalize waits in a PMI barrier without progressing the
 * shared-memory acknowledgements rank 1 still held for rank 0 (host programs without cudampi
 * hang the same way when their sends are posted 20 us apart; cudampi's MPI_Finalize makes a
 * barrier first on MPICH). A round with the receives posted first (device MPI_Irecv's
 * completed by one MPI_Waitall) and blocking sends runs before the window.
 * CUDAMPI_SEND_WINDOW=N,BYTES overrides the window. */
#include "common.h"

static void window(unsigned char *buf, const unsigned char *expect, int n, size_t bytes, int posted_recvs)
{
    MPI_Request *req = xmalloc((size_t)n * sizeof *req);
    MPI_Status *st = xmalloc((size_t)n * sizeof *st);
    size_t total = (size_t)n * bytes;
    if (t_rank == 0)
        mem_put(buf, expect, total);
    else
        mem_poison(buf, total);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        for (int i = 0; i < n; i++) {
            if (posted_recvs)
                MPI_CHECK(MPI_Send(buf + (size_t)i * bytes, (int)bytes, MPI_BYTE, 1, i, MPI_COMM_WORLD));
            else
                MPI_CHECK(MPI_Isend(buf + (size_t)i * bytes, (int)bytes, MPI_BYTE, 1, i, MPI_COMM_WORLD, &req[i]));
        }
        if (!posted_recvs)
            MPI_CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
        note("%d %s of %zu bytes completed", n,
             posted_recvs ? "sends to posted device receives" : "device Isends in one Waitall", bytes);
    } else {
        for (int i = 0; i < n; i++) {
            if (posted_recvs)
                MPI_CHECK(MPI_Irecv(buf + (size_t)i * bytes, (int)bytes, MPI_BYTE, 0, i, MPI_COMM_WORLD, &req[i]));
            else
                MPI_CHECK(MPI_Recv(buf + (size_t)i * bytes, (int)bytes, MPI_BYTE, 0, i, MPI_COMM_WORLD, &st[i]));
        }
        if (posted_recvs)
            MPI_CHECK(MPI_Waitall(n, req, st));
        unsigned char *got = mem_fetch(buf, total);
        for (int i = 0; i < n; i++) {
            check_bytes(got + (size_t)i * bytes, expect + (size_t)i * bytes, bytes, "%s message %d of %d",
                        posted_recvs ? "posted receive" : "window", i, n);
            check_status(&st[i], MPI_BYTE, 0, i, (int)bytes, "message %d", i);
        }
        free(got);
    }
    free(st);
    free(req);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int n = 300;
    size_t bytes = 100000;
    const char *w = getenv("CUDAMPI_SEND_WINDOW");
    if (w && *w) {
        n = atoi(w);
        const char *c = strchr(w, ',');
        if (c) bytes = (size_t)strtoull(c + 1, NULL, 0);
    }
    if (t_size != 2) DIE("needs 2 ranks");
    size_t total = (size_t)n * bytes;
    unsigned char *buf = mem_alloc(MEM_DEVICE, total);
    unsigned char *expect = xmalloc(total);
    for (int i = 0; i < n; i++)
        pattern_fill(expect + (size_t)i * bytes, bytes, 0, i);

    window(buf, expect, n, bytes, 1);
    window(buf, expect, n, bytes, 0);

    free(expect);
    mem_free(buf);
    /* No collective before MPI_Finalize (see the top): each rank judges its own checks. */
    if (t_failures)
        printf("FAIL nb_send_window (rank %d: %d failed checks; %s)\n", t_rank, t_failures, mpi_library_name());
    else if (t_rank == 1)
        printf("PASS nb_send_window\n");
    fflush(stdout);
    MPI_Finalize();
    return t_failures ? 1 : 0;
}
