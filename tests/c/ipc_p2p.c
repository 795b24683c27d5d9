// cudampi-test: ranks=2,3 without-shim=skip env=CUDAMPI_IPC=1,CUDAMPI_IPC_BYTES=0,CUDAMPI_IPC_SAME_GPU_BYTES=0 timeout=120
/* Device messages over CUDA IPC (CUDAMPI_IPC=1, every message from 1056 bytes on): rank 0 sends
 * to every other rank device buffers of 1056, 4099 and 1 MiB + 5 bytes with MPI_Send, MPI_Isend
 * and MPI_Ssend; the receivers take them into poisoned device and host buffers with MPI_Recv and
 * MPI_Irecv, from MPI_ANY_SOURCE with MPI_ANY_TAG too, each followed on the same tag by a small
 * host message that must arrive after it. Every byte and status is compared with the pattern
 * the sender wrote, and cudampi_get_stats must show the bytes went over IPC (with each rank a
 * node of its own, run-matrix's mode nodes: none over IPC, some in chunks). Then a receive
 * smaller than the message fails with MPI_ERR_TRUNCATE (MPI_ERRORS_RETURN) and leaves the buffer
 * unchanged, and the sender must not wait on the receiver: rank 0 sends with MPI_Isend + MPI_Wait
 * before an MPI_Barrier that the receiver reaches with its MPI_Irecv still pending. */
#include "common.h"
#include "../../include/cudampi.h"

#define SLACK 16

typedef int (*stats_fn)(struct cudampi_stats *);

static void one(size_t n, int how, int rkind, int any, int seed)
{
    if (t_rank == 0) {
        void *s = mem_alloc(MEM_DEVICE, n);
        for (int r = 1; r < t_size; r++) {
            mem_pattern(s, n, r, seed);
            MPI_Request q;
            if (how == 0)
                MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, r, seed, MPI_COMM_WORLD));
            else if (how == 1) {
                MPI_CHECK(MPI_Isend(s, (int)n, MPI_BYTE, r, seed, MPI_COMM_WORLD, &q));
                MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
            } else
                MPI_CHECK(MPI_Ssend(s, (int)n, MPI_BYTE, r, seed, MPI_COMM_WORLD));
            /* overwritten at once: the receiver must still get what was sent */
            mem_pattern(s, n, r + 100, seed);
            int after = seed * 7 + r;
            MPI_CHECK(MPI_Send(&after, 1, MPI_INT, r, seed, MPI_COMM_WORLD));
        }
        mem_free(s);
        return;
    }
    void *b = mem_alloc(rkind, n + SLACK);
    mem_poison(b, n + SLACK);
    MPI_Status st;
    int src = any ? MPI_ANY_SOURCE : 0, tag = any ? MPI_ANY_TAG : seed;
    if (how == 1) {
        MPI_Request q;
        MPI_CHECK(MPI_Irecv(b, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &q));
        MPI_CHECK(MPI_Wait(&q, &st));
    } else {
        MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st));
    }
    check_status(&st, MPI_BYTE, 0, seed, (int)n, "IPC %zu bytes how %d kind %d any %d", n, how, rkind, any);
    unsigned char *got = mem_fetch(b, n + SLACK);
    unsigned char *exp = malloc(n + SLACK);
    for (size_t i = 0; i < n; i++)
        exp[i] = pattern_byte(t_rank, seed, i);
    memset(exp + n, POISON_BYTE, SLACK);
    check_bytes(got, exp, n + SLACK, "IPC %zu bytes how %d kind %d any %d", n, how, rkind, any);
    int after = -1;
    MPI_CHECK(MPI_Recv(&after, 1, MPI_INT, src, tag, MPI_COMM_WORLD, &st));
    CHECK(after == seed * 7 + t_rank, "the host message after the device one: got %d, expected %d", after, seed * 7 + t_rank);
    free(got);
    free(exp);
    mem_free(b);
}

static void truncation(void)
{
    const size_t n = 200000;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (t_rank == 0) {
        void *s = mem_alloc(MEM_DEVICE, n);
        mem_pattern(s, n, 1, 90);
        MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, 1, 90, MPI_COMM_WORLD));
        mem_free(s);
    } else if (t_rank == 1) {
        void *b = mem_alloc(MEM_DEVICE, n / 2);
        mem_poison(b, n / 2);
        int rc = MPI_Recv(b, (int)(n / 2), MPI_BYTE, 0, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "receive of %zu into %zu bytes returned class %d, expected MPI_ERR_TRUNCATE", n, n / 2, cls);
        unsigned char *got = mem_fetch(b, n / 2);
        check_all(got, POISON_BYTE, n / 2, "truncated receive buffer must stay unchanged");
        free(got);
        mem_free(b);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Plain MPI completes this: the receive is posted before the barrier. */
static void no_wait_on_receiver(void)
{
    const size_t n = 3 << 20;
    void *b = mem_alloc(MEM_DEVICE, n);
    MPI_Request q;
    if (t_rank == 0) {
        mem_pattern(b, n, 1, 91);
        MPI_CHECK(MPI_Isend(b, (int)n, MPI_BYTE, 1, 91, MPI_COMM_WORLD, &q));
        MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    } else {
        mem_poison(b, n);
        if (t_rank == 1)
            MPI_CHECK(MPI_Irecv(b, (int)n, MPI_BYTE, 0, 91, MPI_COMM_WORLD, &q));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 1) {
            MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
            unsigned char *got = mem_fetch(b, n);
            unsigned char *exp = malloc(n);
            for (size_t i = 0; i < n; i++)
                exp[i] = pattern_byte(1, 91, i);
            check_bytes(got, exp, n, "Isend/Wait before Barrier, Irecv/Barrier/Wait");
            free(got);
            free(exp);
        }
    }
    mem_free(b);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    struct cudampi_stats a, z;
    memset(&a, 0, sizeof a);
    if (get)
        get(&a);
    const size_t sizes[] = {1056, 4099, (1 << 20) + 5};
    int seed = 1;
    for (int si = 0; si < 3; si++)
        for (int how = 0; how < 3; how++)
            for (int any = 0; any < 2; any++)
                for (int k = 0; k < 2; k++)
                    one(sizes[si], how, k ? MEM_HOST : MEM_DEVICE, any, seed++);
    truncation();
    no_wait_on_receiver();
    memset(&z, 0, sizeof z);
    /* Each rank a node of its own (run-matrix mode nodes): no IPC between nodes; the largest
     * message goes in chunks instead. */
    int nodes = strcmp(t_env("CMTEST_MODE", ""), "nodes") == 0;
    if (get && !t_host_mode) {
        get(&z);
#ifdef CHUNKED
        unsigned long long sent = z.chunked_bytes_sent - a.chunked_bytes_sent, received = z.chunked_bytes_received - a.chunked_bytes_received;
#else
        unsigned long long sent = z.ipc_bytes_sent - a.ipc_bytes_sent, received = z.ipc_bytes_received - a.ipc_bytes_received;
        if (nodes) {
            CHECK(sent == 0 && received == 0, "bytes over CUDA IPC between nodes (sent %llu, received %llu)", sent, received);
            sent = z.chunked_bytes_sent - a.chunked_bytes_sent;
            received = z.chunked_bytes_received - a.chunked_bytes_received;
        }
#endif
        if (t_rank == 0)
            CHECK(sent > 0, "no bytes took the fast path (sent %llu)", sent);
        else
            CHECK(received > 0, "no bytes came by the fast path (received %llu)", received);
    }
    return report_and_finalize();
}
