// cudampi-test: ranks=2,3 without-shim=skip env=CUDAMPI_IPC=1 timeout=120 nodes=no
/* IPC to a rank that copies on the sender's GPU waits for large messages: two processes on one
 * GPU take turns on it, and an IPC message makes them switch twice. Each rank uses GPU
 * (rank % device count), so with two GPUs ranks 0 and 2 share one and rank 1 has the other.
 * Rank 0 sends every other rank device messages of 256 KiB (above CUDAMPI_IPC_BYTES, below
 * CUDAMPI_IPC_SAME_GPU_BYTES), first into device buffers, then into host buffers, each
 * acknowledged by the receiver, and then one of 8 MiB. cudampi_get_stats on rank 0 tells which
 * went over IPC: the first message to a rank does when the node has several GPUs (nothing is
 * known of it yet; with one GPU every rank shares it); after that, a rank sharing rank 0's GPU, or receiving into host memory (copied on the sender's GPU),
 * gets the small messages staged and the 8 MiB one over IPC, while a rank on another GPU
 * receiving into device memory keeps getting them over IPC. With CUDAMPI_IPC_SAME_GPU_BYTES=0
 * (the matrix's forced IPC mode) every message goes over IPC. Every byte is compared with
 * what was sent into a poisoned buffer. */
#include "ipc_stats.h"

#define SMALL (256u << 10)
#define LARGE (8u << 20)
#define ROUNDS 6

static stats_fn get_stats;

/* Rank 0 sends one message of n bytes to r, which takes it into memory of kind `kind` and
 * acknowledges it; returns the bytes the send put on IPC. */
static unsigned long long one(void *src, size_t n, int r, int kind, int seed)
{
    if (t_rank == 0) {
        mem_pattern(src, n, r, seed);
        unsigned long long before = ipc_sent(get_stats);
        MPI_CHECK(MPI_Send(src, (int)n, MPI_BYTE, r, seed, MPI_COMM_WORLD));
        unsigned long long sent = ipc_sent(get_stats) - before;
        int ack = 0;
        MPI_CHECK(MPI_Recv(&ack, 1, MPI_INT, r, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(ack == seed, "rank %d acknowledged %d, expected %d", r, ack, seed);
        return sent;
    }
    if (t_rank != r)
        return 0;
    void *b = mem_alloc(kind, n);
    mem_poison(b, n);
    MPI_Status st;
    MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, seed, MPI_COMM_WORLD, &st));
    int got = -1;
    MPI_Get_count(&st, MPI_BYTE, &got);
    CHECK(got == (int)n, "%s receive of %zu bytes: count %d", mem_kind_name(kind), n, got);
    unsigned char *want = pattern_new(n, t_rank, seed), *have = mem_fetch(b, n);
    check_bytes(have, want, n, "%s receive of %zu bytes, seed %d", mem_kind_name(kind), n, seed);
    free(want);
    free(have);
    mem_free(b);
    MPI_CHECK(MPI_Send(&seed, 1, MPI_INT, 0, seed, MPI_COMM_WORLD));
    return 0;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int ndev = 1;
    if (!host_mode()) {
        CUDA_CHECK(cudaGetDeviceCount(&ndev));
        CUDA_CHECK(cudaSetDevice(t_rank % ndev));
    }
    int *dev = xmalloc(sizeof(int) * (size_t)t_size), mine = t_rank % ndev;
    MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, dev, 1, MPI_INT, MPI_COMM_WORLD));
    get_stats = stats_lookup();
    const char *same = getenv("CUDAMPI_IPC_SAME_GPU_BYTES");
    int forced = same && strcmp(same, "0") == 0;
    if (t_rank == 0)
        CHECK(get_stats != NULL, "cudampi_get_stats not exported");

    void *src = t_rank == 0 ? mem_alloc(MEM_DEVICE, LARGE) : NULL;
    int seed = 1;
    for (int r = 1; r < t_size; r++) {
        const int kinds[2] = {MEM_DEVICE, MEM_HOST};
        for (int k = 0; k < 2; k++) {
            /* shared: whether r's copies run on rank 0's GPU */
            int shared = kinds[k] == MEM_HOST || dev[r] == dev[0];
            for (int i = 0; i < ROUNDS; i++, seed++) {
                unsigned long long sent = one(src, SMALL, r, kinds[k], seed);
                if (t_rank != 0 || host_mode())
                    continue;
                /* The first device message to r finds nothing known of it, unless the node has
                 * one GPU. The first host one follows the device messages' releases: staged when
                 * they said shared. */
                int ipc = forced || (i == 0 ? (k == 0 && ndev > 1) || dev[r] != dev[0] : !shared);
                unsigned long long want = ipc ? SMALL : 0;
                if (i == 0 || i == ROUNDS - 1)
                    CHECK(sent == want, "message %d of 256 KiB to rank %d (GPU %d, rank 0 on GPU %d), %s receive: %llu bytes over IPC, expected %llu",
                          i + 1, r, dev[r], dev[0], mem_kind_name(kinds[k]), sent, want);
            }
        }
        unsigned long long sent = one(src, LARGE, r, MEM_DEVICE, seed++);
        if (t_rank == 0 && !host_mode())
            CHECK(sent == LARGE, "8 MiB to rank %d: %llu bytes over IPC, expected all", r, sent);
    }
    if (src)
        mem_free(src);
    free(dev);
    return report_and_finalize();
}
