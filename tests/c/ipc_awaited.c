// cudampi-test: ranks=2 without-shim=crash env=FAKECUDA_DEVICES=2,CUDAMPI_TEST_GPU_PER_RANK=1 timeout=120 nodes=no
/* Device messages below CUDAMPI_IPC_BYTES between ranks with GPUs of their own: they go over
 * IPC from the sender's buffer only to a receiver already waiting for them in a receive (same
 * source and tag, or wildcards), which copies them at once; any other stays an eager, staged
 * message, and one whose receiver does not take it at once is withdrawn after 100 us. Every
 * receive buffer is poisoned and compared with the pattern sent, every status checked.
 *   1. rank 1 waits in MPI_Recv, then rank 0 sends 1056 B, 4 KiB and 16 KiB - 1 (MPI_Send and
 *      MPI_Isend): each goes over IPC (cudampi_get_stats, on different GPUs);
 *   2. a ping-pong of 4 KiB, 200 rounds;
 *   3. both ranks send first, at 1056, 2048 and 4000 bytes (every MPI here sends those
 *      eagerly), 20 rounds each: every send completes (one that waited for its receiver here
 *      would wait for a send of the receiver's);
 *   4. rank 1 waits in MPI_Waitall on 64 receives (tags 0..63), rank 0 sends them in reverse
 *      tag order: what rank 1 cannot take yet is withdrawn, and lands all the same;
 *   5. MPI_ANY_SOURCE and MPI_ANY_TAG: the status names the sender, tag and size;
 *   6. rank 1 waits for tag 2 while rank 0 first sends tag 1, then tag 2; and waits on a
 *      duplicate of MPI_COMM_WORLD while rank 0 first sends on MPI_COMM_WORLD with that tag;
 *   7. a cancelled receive, then the message it would have got; a probe before the receive. */
#include "ipc_stats.h"
#include <unistd.h>

static int dev_differs;

static void expect(void *buf, size_t n, int from, int seed, const char *what)
{
    check_pattern(buf, n, from, seed, "%s (%zu bytes, seed %d)", what, n, seed);
}

/* Case 1: rank 1 waits before rank 0 sends; returns the bytes rank 0 sent. */
static size_t awaited_sends(void)
{
    static const size_t sizes[] = {1056, 4096, (16u << 10) - 1};
    size_t total = 0;
    for (int way = 0; way < 2; way++) {
        for (size_t i = 0; i < 3; i++) {
            size_t n = sizes[i];
            int seed = 10 + way * 3 + (int)i;
            void *b = mem_alloc(MEM_DEVICE, n);
            if (t_rank == 0) {
                mem_pattern(b, n, 0, seed);
                usleep(20000);
                if (way == 0) {
                    MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, seed, MPI_COMM_WORLD));
                } else {
                    MPI_Request q;
                    MPI_CHECK(MPI_Isend(b, (int)n, MPI_BYTE, 1, seed, MPI_COMM_WORLD, &q));
                    MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
                }
                total += n;
            } else {
                MPI_Status st;
                mem_poison(b, n);
                MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, seed, MPI_COMM_WORLD, &st));
                check_status(&st, MPI_BYTE, 0, seed, (int)n, "awaited %zu bytes", n);
                expect(b, n, 0, seed, way ? "awaited, MPI_Isend" : "awaited, MPI_Send");
            }
            mem_free(b);
        }
    }
    return total;
}

static void pingpong(size_t n, int rounds)
{
    void *s = mem_alloc(MEM_DEVICE, n), *r = mem_alloc(MEM_DEVICE, n);
    int peer = 1 - t_rank;
    for (int k = 0; k < rounds; k++) {
        int seed = 1000 + k;
        if (t_rank == 0) {
            mem_pattern(s, n, 0, seed);
            MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
            mem_poison(r, n);
            MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (k % 50 == 0 || k == rounds - 1)
                expect(r, n, 1, seed, "ping-pong, the answer");
        } else {
            mem_poison(r, n);
            MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (k % 50 == 0 || k == rounds - 1)
                expect(r, n, 0, seed, "ping-pong, the question");
            mem_pattern(s, n, 1, seed);
            MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
        }
    }
    mem_free(s);
    mem_free(r);
}

static void both_send_first(void)
{
    static const size_t sizes[] = {1056, 2048, 4000};
    int peer = 1 - t_rank;
    for (size_t i = 0; i < 3; i++) {
        size_t n = sizes[i];
        void *out = mem_alloc(MEM_DEVICE, n), *in = mem_alloc(MEM_DEVICE, n);
        for (int r = 0; r < 20; r++) {
            int seed = 2000 + (int)i * 20 + r;
            mem_pattern(out, n, t_rank, seed);
            mem_poison(in, n);
            MPI_CHECK(MPI_Send(out, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
            MPI_CHECK(MPI_Recv(in, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (r == 0 || r == 19)
                expect(in, n, peer, seed, "both sending first");
        }
        mem_free(out);
        mem_free(in);
    }
}

static void reversed_window(void)
{
    enum { W = 64 };
    const size_t n = 2048;
    void *b[W];
    MPI_Request q[W];
    for (int i = 0; i < W; i++) {
        b[i] = mem_alloc(MEM_DEVICE, n);
        if (t_rank == 0)
            mem_pattern(b[i], n, 0, 3000 + i);
        else
            mem_poison(b[i], n);
    }
    if (t_rank == 0) {
        usleep(20000);
        for (int i = W - 1; i >= 0; i--)
            MPI_CHECK(MPI_Isend(b[i], (int)n, MPI_BYTE, 1, 3000 + i, MPI_COMM_WORLD, &q[W - 1 - i]));
        MPI_CHECK(MPI_Waitall(W, q, MPI_STATUSES_IGNORE));
    } else {
        for (int i = 0; i < W; i++)
            MPI_CHECK(MPI_Irecv(b[i], (int)n, MPI_BYTE, 0, 3000 + i, MPI_COMM_WORLD, &q[i]));
        MPI_Status st[W];
        MPI_CHECK(MPI_Waitall(W, q, st));
        for (int i = 0; i < W; i++) {
            check_status(&st[i], MPI_BYTE, 0, 3000 + i, (int)n, "window, receive %d", i);
            expect(b[i], n, 0, 3000 + i, "window in reverse tag order");
        }
    }
    for (int i = 0; i < W; i++)
        mem_free(b[i]);
}

static void wildcards(void)
{
    const size_t n = 2048;
    void *b = mem_alloc(MEM_DEVICE, n);
    if (t_rank == 0) {
        mem_pattern(b, n, 0, 42);
        usleep(20000);
        MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, 42, MPI_COMM_WORLD));
    } else {
        MPI_Status st;
        mem_poison(b, n);
        MPI_CHECK(MPI_Recv(b, (int)n + 512, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        check_status(&st, MPI_BYTE, 0, 42, (int)n, "MPI_ANY_SOURCE, MPI_ANY_TAG");
        expect(b, n, 0, 42, "MPI_ANY_SOURCE, MPI_ANY_TAG");
    }
    mem_free(b);
}

/* Rank 1 waits for one message while rank 0 first sends another that matches the same source
 * (a later tag, or the same tag on another communicator). */
static void other_first(MPI_Comm wait_on, int wait_tag, MPI_Comm first_on, int first_tag, const char *what)
{
    const size_t n = 2048; /* sent eagerly by every MPI here, or this would deadlock without cudampi */
    void *a = mem_alloc(MEM_DEVICE, n), *w = mem_alloc(MEM_DEVICE, n);
    if (t_rank == 0) {
        mem_pattern(a, n, 0, 51);
        mem_pattern(w, n, 0, 52);
        usleep(20000);
        MPI_CHECK(MPI_Send(a, (int)n, MPI_BYTE, 1, first_tag, first_on));
        MPI_CHECK(MPI_Send(w, (int)n, MPI_BYTE, 1, wait_tag, wait_on));
    } else {
        mem_poison(a, n);
        mem_poison(w, n);
        MPI_CHECK(MPI_Recv(w, (int)n, MPI_BYTE, 0, wait_tag, wait_on, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Recv(a, (int)n, MPI_BYTE, 0, first_tag, first_on, MPI_STATUS_IGNORE));
        expect(w, n, 0, 52, what);
        expect(a, n, 0, 51, what);
    }
    mem_free(a);
    mem_free(w);
}

static void cancel_and_probe(void)
{
    const size_t n = 3000;
    void *b = mem_alloc(MEM_DEVICE, n);
    if (t_rank == 1) {
        MPI_Request q;
        MPI_Status st;
        int cancelled = 0;
        MPI_CHECK(MPI_Irecv(b, (int)n, MPI_BYTE, 0, 61, MPI_COMM_WORLD, &q));
        MPI_CHECK(MPI_Cancel(&q));
        MPI_CHECK(MPI_Wait(&q, &st));
        MPI_CHECK(MPI_Test_cancelled(&st, &cancelled));
        CHECK(cancelled, "a receive cancelled before any message came was not cancelled");
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        mem_pattern(b, n, 0, 61);
        MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, 61, MPI_COMM_WORLD));
        mem_pattern(b, n, 0, 62);
        MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, 62, MPI_COMM_WORLD));
    } else {
        MPI_Status st;
        int count = -1;
        mem_poison(b, n);
        MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(b, n, 0, 61, "after a cancelled receive");
        MPI_CHECK(MPI_Probe(0, 62, MPI_COMM_WORLD, &st));
        MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == (int)n, "MPI_Probe reported %d bytes, sent %zu", count, n);
        mem_poison(b, n);
        MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, 62, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(b, n, 0, 62, "after a probe");
    }
    mem_free(b);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = stats_lookup();
    int dev = -1, other = -1;
    if (!host_mode())
        CUDA_CHECK(cudaGetDevice(&dev));
    MPI_CHECK(MPI_Sendrecv(&dev, 1, MPI_INT, 1 - t_rank, 99, &other, 1, MPI_INT, 1 - t_rank, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    const char *ipc = getenv("CUDAMPI_IPC");
    dev_differs = !host_mode() && get && dev != other && !(ipc && strcmp(ipc, "0") == 0);

    unsigned long long before = ipc_sent(get);
    size_t sent = awaited_sends();
    if (t_rank == 0 && dev_differs)
        CHECK(ipc_sent(get) - before == sent, "%llu of the %zu bytes sent to a waiting receiver went over IPC", ipc_sent(get) - before, sent);
    pingpong(4096, 200);
    both_send_first();
    reversed_window();
    wildcards();
    MPI_Comm dup;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    other_first(MPI_COMM_WORLD, 72, MPI_COMM_WORLD, 71, "a later tag sent first");
    other_first(dup, 73, MPI_COMM_WORLD, 73, "the same tag on another communicator sent first");
    MPI_CHECK(MPI_Comm_free(&dup));
    cancel_and_probe();
    return report_and_finalize();
}
