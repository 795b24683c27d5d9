// cudampi-test: ranks=2 without-shim=crash timeout=120 env=CUDAMPI_PIPELINE=0
/* Many device receives pending at once. Rank 1 posts N MPI_Irecv's of
 * 1 KiB, each into its own slice of one poisoned buffer and each with its own tag, then rank 0
 * sends the N messages (each slice its own pattern) with MPI_Send, and rank 1 completes the
 * receives with one MPI_Waitall. The same program runs on host buffers first, then on device
 * buffers; every received byte and status is checked, and the device run must take at most
 * MAX_RATIO times the host run (each the best of REPS runs, timed from the first post to the
 * last completion on both ranks). With cudampi that measures what a pending device request
 * costs as their number grows: 2,000 of them took 0.5 s, 10,000 20.5 s and 20,000 129 s when
 * the stand-in driver looked allocations up in a list and every staging buffer was one more
 * entry there (host buffers: well under a second).
 *
 * CUDAMPI_PENDING=N overrides N (default 20,000), CUDAMPI_PENDING_REPS the repetitions. */
#include "common.h"

#define MSG 1024
#define MAX_RATIO 5.0

static double run(int kind, int n, unsigned char *expect, int check)
{
    size_t total = (size_t)n * MSG;
    unsigned char *buf = mem_alloc(kind, total);
    MPI_Request *req = xmalloc((size_t)n * sizeof *req);
    MPI_Status *st = xmalloc((size_t)n * sizeof *st);
    if (t_rank == 0)
        mem_put(buf, expect, total);
    else
        mem_poison(buf, total);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (t_rank == 1) {
        for (int i = 0; i < n; i++)
            MPI_CHECK(MPI_Irecv(buf + (size_t)i * MSG, MSG, MPI_BYTE, 0, i, MPI_COMM_WORLD, &req[i]));
    }
    /* Every receive is posted before the first send. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        for (int i = 0; i < n; i++)
            MPI_CHECK(MPI_Send(buf + (size_t)i * MSG, MSG, MPI_BYTE, 1, i, MPI_COMM_WORLD));
    } else {
        MPI_CHECK(MPI_Waitall(n, req, st));
    }
    double t = MPI_Wtime() - t0, slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (t_rank == 1 && check) {
        unsigned char *got = mem_fetch(buf, total);
        for (int i = 0; i < n; i++) {
            if (!check_bytes(got + (size_t)i * MSG, expect + (size_t)i * MSG, MSG, "%s receive %d of %d",
                             mem_kind_name(kind), i, n))
                break;
            if (!check_status(&st[i], MPI_BYTE, 0, i, MSG, "%s receive %d", mem_kind_name(kind), i))
                break;
        }
        free(got);
    }
    free(st);
    free(req);
    mem_free(buf);
    return slowest;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("needs 2 ranks");
    int n = atoi(t_env("CUDAMPI_PENDING", "20000"));
    int reps = atoi(t_env("CUDAMPI_PENDING_REPS", "3"));
    if (n < 1 || reps < 1) DIE("bad CUDAMPI_PENDING=%d or CUDAMPI_PENDING_REPS=%d", n, reps);
    unsigned char *expect = xmalloc((size_t)n * MSG);
    for (int i = 0; i < n; i++)
        pattern_fill(expect + (size_t)i * MSG, MSG, 0, i);

    double best[2] = {1e30, 1e30};
    int kinds[2] = {MEM_HOST, MEM_DEVICE};
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            double t = run(kinds[k], n, expect, r == 0);
            if (t < best[k]) best[k] = t;
        }
    double ratio = best[1] / best[0];
    if (t_rank == 0)
        note("%d pending receives of %d bytes: host buffers %.3f s, device buffers %.3f s (%.1fx; best of %d)",
             n, MSG, best[0], best[1], ratio, reps);
    if (t_rank == 0 && shim_loaded() && !host_mode())
        CHECK(ratio <= MAX_RATIO, "%d pending device receives took %.3f s, %.1f times the %.3f s on host buffers",
              n, best[1], ratio, best[0]);
    free(expect);
    return report_and_finalize();
}
