// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_IPC=1,CUDAMPI_IPC_BYTES=0,CUDAMPI_IPC_SAME_GPU_BYTES=0,CUDAMPI_PIPELINE_WAIT=60000000 timeout=120 nodes=no
/* IPC from the program's own buffers: the receiver copies each message straight from the
 * sender's device buffer, and the send completes only once it has. The sender's patience is
 * set to 60 s here, so a send that waited for its receiver where the receiver could not copy
 * (rather than the receiver copying while the sender waits) runs past the time limit.
 *   1. blocking ping-pong of 1056 B, 64 KiB + 3 and 1 MiB + 5: the sender overwrites its buffer
 *      as soon as MPI_Send returns, and the receiver must still get what was sent;
 *   2. both ranks post 8 receives and 8 sends, then MPI_Waitall on their sends before their
 *      receives (osu_bibw's order): each rank, waiting in its sends, copies the other's
 *      messages meanwhile;
 *   3. MPI_Isend, MPI_Irecv, MPI_Wait on the send, then on the receive (a halo exchange);
 *   3b. one MPI_Waitall over both ranks' 8 receives then 8 sends: the receive copies it queues
 *      must be done before its sends wait for the peer's, or both ranks wait forever;
 *   3c. osu_bw's shape: rank 0 sends 8 messages, rank 1 receives them, one MPI_Waitall each;
 *   4. the sender offsets into an allocation (the message starts 4099 bytes into it);
 *   5. MPI_Test does not wait: rank 0 polls its MPI_Isend with MPI_Test while rank 1 sleeps
 *      200 ms before its MPI_Recv, so MPI_Test must report the send incomplete at least once.
 *   6. the program's work on the send buffer is still running when MPI_Send starts (on the
 *      stand-in driver, whose holds make a blocking stream busy: a thread writes the pattern
 *      30 ms later, then ends the hold; on a GPU tests/gpu/stream_order.cu does it with
 *      kernels): the receiver must get what that work wrote, and MPI_Isend the same.
 * Every receive buffer is poisoned, with slack after it, and compared with the pattern sent;
 * cudampi_get_stats must show the bytes over IPC. */
#include "common.h"
#include "late_write.h"
#include "../../include/cudampi.h"
#include <unistd.h>

#define SLACK 16
#define WINDOW 8

typedef int (*stats_fn)(struct cudampi_stats *);

static void expect_pattern(void *b, size_t n, int rank, int seed, const char *what)
{
    unsigned char *got = mem_fetch(b, n + SLACK);
    unsigned char *exp = malloc(n + SLACK);
    for (size_t i = 0; i < n; i++)
        exp[i] = pattern_byte(rank, seed, i);
    memset(exp + n, POISON_BYTE, SLACK);
    check_bytes(got, exp, n + SLACK, "%s (%zu bytes, seed %d)", what, n, seed);
    free(got);
    free(exp);
}

static void pingpong(size_t n, int seed)
{
    int peer = 1 - t_rank;
    void *s = mem_alloc(MEM_DEVICE, n), *r = mem_alloc(MEM_DEVICE, n + SLACK);
    for (int round = 0; round < 2; round++) {
        mem_poison(r, n + SLACK);
        if (t_rank == round) {
            mem_pattern(s, n, t_rank, seed + round);
            MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
            mem_pattern(s, n, t_rank + 100, seed + round); /* at once */
        } else {
            MPI_Status st;
            MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, &st));
            check_status(&st, MPI_BYTE, peer, seed, (int)n, "ping-pong %zu", n);
            expect_pattern(r, n, peer, seed + round, "ping-pong");
        }
    }
    mem_free(s);
    mem_free(r);
}

enum shape { SENDS_FIRST, HALO, ONE_WAITALL, ONE_WAY };

static void windows(size_t n, int seed, enum shape shape)
{
    int peer = 1 - t_rank, w = shape == HALO ? 1 : WINDOW;
    void *s[WINDOW], *r[WINDOW];
    MPI_Request sq[WINDOW], rq[WINDOW], all[2 * WINDOW];
    const char *what[] = {"both ways, sends waited first", "halo exchange", "both ways, one MPI_Waitall", "one way, a window"};
    for (int i = 0; i < w; i++) {
        s[i] = mem_alloc(MEM_DEVICE, n);
        r[i] = mem_alloc(MEM_DEVICE, n + SLACK);
        mem_pattern(s[i], n, t_rank, seed + i);
        mem_poison(r[i], n + SLACK);
    }
    if (shape == HALO) {
        MPI_CHECK(MPI_Isend(s[0], (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, &sq[0]));
        MPI_CHECK(MPI_Irecv(r[0], (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, &rq[0]));
        MPI_CHECK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    } else if (shape == ONE_WAY) {
        for (int i = 0; i < w; i++) {
            if (t_rank == 0)
                MPI_CHECK(MPI_Isend(s[i], (int)n, MPI_BYTE, peer, seed + i, MPI_COMM_WORLD, &sq[i]));
            else
                MPI_CHECK(MPI_Irecv(r[i], (int)n, MPI_BYTE, peer, seed + i, MPI_COMM_WORLD, &rq[i]));
        }
        MPI_CHECK(MPI_Waitall(w, t_rank == 0 ? sq : rq, MPI_STATUSES_IGNORE));
    } else {
        for (int i = 0; i < w; i++)
            MPI_CHECK(MPI_Irecv(r[i], (int)n, MPI_BYTE, peer, seed + i, MPI_COMM_WORLD, &rq[i]));
        for (int i = 0; i < w; i++)
            MPI_CHECK(MPI_Isend(s[i], (int)n, MPI_BYTE, peer, seed + i, MPI_COMM_WORLD, &sq[i]));
        if (shape == ONE_WAITALL) {
            for (int i = 0; i < w; i++) {
                all[i] = rq[i];
                all[w + i] = sq[i];
            }
            MPI_CHECK(MPI_Waitall(2 * w, all, MPI_STATUSES_IGNORE));
        } else {
            MPI_CHECK(MPI_Waitall(w, sq, MPI_STATUSES_IGNORE));
            MPI_CHECK(MPI_Waitall(w, rq, MPI_STATUSES_IGNORE));
        }
    }
    for (int i = 0; i < w; i++) {
        mem_pattern(s[i], n, t_rank + 100, seed + i);
        if (shape != ONE_WAY || t_rank == 1)
            expect_pattern(r[i], n, peer, seed + i, what[shape]);
        mem_free(s[i]);
        mem_free(r[i]);
    }
}

static void offset_in_allocation(size_t n, int seed)
{
    const size_t off = 4099;
    int peer = 1 - t_rank;
    if (t_rank == 0) {
        unsigned char *s = mem_alloc(MEM_DEVICE, n + off);
        mem_pattern(s + off, n, t_rank, seed);
        MPI_CHECK(MPI_Send(s + off, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
        mem_free(s);
    } else {
        void *r = mem_alloc(MEM_DEVICE, n + SLACK);
        mem_poison(r, n + SLACK);
        MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect_pattern(r, n, peer, seed, "from inside an allocation");
        mem_free(r);
    }
}

static void test_polls(size_t n, int seed)
{
    int peer = 1 - t_rank;
    if (t_rank == 0) {
        void *s = mem_alloc(MEM_DEVICE, n);
        mem_pattern(s, n, t_rank, seed);
        MPI_Request q;
        MPI_CHECK(MPI_Isend(s, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, &q));
        int flag = 0;
        long polls = 0;
        while (!flag) {
            MPI_CHECK(MPI_Test(&q, &flag, MPI_STATUS_IGNORE));
            polls++;
        }
        CHECK(polls > 1, "MPI_Test waited for the receiver: the send completed at the first of %ld polls", polls);
        mem_free(s);
    } else {
        usleep(200000);
        void *r = mem_alloc(MEM_DEVICE, n + SLACK);
        mem_poison(r, n + SLACK);
        MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect_pattern(r, n, peer, seed, "polled with MPI_Test");
        mem_free(r);
    }
}

static void work_still_running(size_t n, int seed)
{
    if (!late_write_possible())
        return;
    int peer = 1 - t_rank;
    void *b = mem_alloc(MEM_DEVICE, n + SLACK);
    for (int nonblocking = 0; nonblocking < 2; nonblocking++) {
        mem_poison(b, n + SLACK);
        if (t_rank == 0) {
            struct late_write w;
            late_write_start(&w, NULL, b, n, seed + nonblocking);
            if (nonblocking) {
                MPI_Request q;
                MPI_CHECK(MPI_Isend(b, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, &q));
                MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
            } else {
                MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
            }
            late_write_finish(&w);
        } else {
            MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            expect_pattern(b, n, peer, seed + nonblocking, nonblocking ? "MPI_Isend while the program's work runs" : "MPI_Send while the program's work runs");
        }
    }
    mem_free(b);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    struct cudampi_stats before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    if (get)
        get(&before);
    const size_t sizes[] = {1056, (64 << 10) + 3, (1 << 20) + 5};
    int seed = 10;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        pingpong(sizes[k], seed += 10);
        windows(sizes[k], seed += 10, SENDS_FIRST);
        windows(sizes[k], seed += 10, HALO);
        windows(sizes[k], seed += 10, ONE_WAITALL);
        windows(sizes[k], seed += 10, ONE_WAY);
    }
    offset_in_allocation(200000, seed += 10);
    test_polls(300000, seed += 10);
    work_still_running(65536, seed += 10);
    if (get)
        get(&after);
    if (!host_mode() && get)
        CHECK(after.ipc_bytes_sent > before.ipc_bytes_sent, "no byte went over CUDA IPC (sent %llu -> %llu)",
              (unsigned long long)before.ipc_bytes_sent, (unsigned long long)after.ipc_bytes_sent);
    return report_and_finalize();
}
