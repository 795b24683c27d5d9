// cudampi-test: ranks=2 without-shim=crash env=FAKECUDA_DEVICES=2,CUDAMPI_TEST_GPU_PER_RANK=1,CUDAMPI_IPC_AWAITED_BYTES=16K timeout=120 nodes=no
/* Where IPC starts between ranks with GPUs of their own: rank 0 sends rank 1 device messages of
 * 1056 bytes, 8 KiB, 16 KiB - 1, 16 KiB, 16 KiB + 1 and 64 KiB, with MPI_Send and with
 * MPI_Isend, into poisoned device buffers; every byte and status is compared with the pattern
 * sent. Where the two ranks run on different GPUs, rank 0 then checks from cudampi_get_stats
 * which of them went over IPC: from CUDAMPI_IPC_BYTES on (16 KiB by default, as the variable
 * sets it otherwise), none with CUDAMPI_IPC=0. A default below 16 KiB, or one above it, fails.
 * (CUDAMPI_IPC_AWAITED_BYTES=16K keeps the smaller ones from going over IPC to rank 1 because it
 * waits in its receive: tests/c/ipc_awaited.c.)
 * Then both ranks send each other 4000 bytes before either receives, 20 times, as programs do
 * that count on MPI sending small messages eagerly (every MPI here does at that size): staged,
 * the sends complete at once; over IPC (the forced mode), each waits out its patience and then
 * completes from exported memory. Either way every exchange completes with the right bytes. */
#include "ipc_stats.h"

static const size_t sizes[] = {1056, 8u << 10, (16u << 10) - 1, 16u << 10, (16u << 10) + 1, 64u << 10};
#define N (sizeof sizes / sizeof sizes[0])

/* CUDAMPI_IPC_BYTES as cudampi reads it: a number with an optional K, M or G (powers of 1024). */
static size_t ipc_from(void)
{
    const char *v = getenv("CUDAMPI_IPC_BYTES");
    if (!v || !*v)
        return 16u << 10;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    switch (*end) {
    case 'k': case 'K': n <<= 10; break;
    case 'm': case 'M': n <<= 20; break;
    case 'g': case 'G': n <<= 30; break;
    }
    return (size_t)n;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = stats_lookup();
    unsigned long long before = ipc_sent(get);
    for (int way = 0; way < 2; way++) {
        for (size_t i = 0; i < N; i++) {
            void *buf = mem_alloc(MEM_DEVICE, sizes[i]);
            int seed = way * 10 + (int)i;
            if (t_rank == 0) {
                mem_pattern(buf, sizes[i], 0, seed);
                if (way == 0) {
                    MPI_CHECK(MPI_Send(buf, (int)sizes[i], MPI_BYTE, 1, seed, MPI_COMM_WORLD));
                } else {
                    MPI_Request r;
                    MPI_CHECK(MPI_Isend(buf, (int)sizes[i], MPI_BYTE, 1, seed, MPI_COMM_WORLD, &r));
                    MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
                }
            } else if (t_rank == 1) {
                MPI_Status st;
                mem_poison(buf, sizes[i]);
                MPI_CHECK(MPI_Recv(buf, (int)sizes[i], MPI_BYTE, 0, seed, MPI_COMM_WORLD, &st));
                check_status(&st, MPI_BYTE, 0, seed, (int)sizes[i], "%zu bytes, %s", sizes[i], way ? "MPI_Isend" : "MPI_Send");
                unsigned char *want = pattern_new(sizes[i], 0, seed), *have = mem_fetch(buf, sizes[i]);
                check_bytes(have, want, sizes[i], "%zu bytes, %s", sizes[i], way ? "MPI_Isend" : "MPI_Send");
                free(want);
                free(have);
            }
            mem_free(buf);
        }
    }
    /* Which messages take IPC depends on whether the ranks share a GPU. */
    int dev = -1, other = -1;
    if (!host_mode())
        CUDA_CHECK(cudaGetDevice(&dev));
    MPI_CHECK(MPI_Sendrecv(&dev, 1, MPI_INT, 1 - t_rank, 99, &other, 1, MPI_INT, 1 - t_rank, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (t_rank == 0 && !host_mode() && dev != other) {
        CHECK(get != NULL, "cudampi_get_stats not exported");
        const char *ipc = getenv("CUDAMPI_IPC");
        int off = ipc && strcmp(ipc, "0") == 0;
        unsigned long long want = 0;
        for (size_t i = 0; i < N; i++)
            if (!off && sizes[i] >= ipc_from())
                want += 2 * sizes[i];
        unsigned long long sent = ipc_sent(get) - before;
        CHECK(sent == want, "%llu bytes went over IPC, expected %llu (from %zu bytes)", sent, want, ipc_from());
    }
    /* Both send first. */
    enum { EAGER = 4000, ROUNDS = 20 };
    void *out = mem_alloc(MEM_DEVICE, EAGER), *in = mem_alloc(MEM_DEVICE, EAGER);
    for (int r = 0; r < ROUNDS; r++) {
        mem_pattern(out, EAGER, t_rank, 100 + r);
        mem_poison(in, EAGER);
        MPI_CHECK(MPI_Send(out, EAGER, MPI_BYTE, 1 - t_rank, 100 + r, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Recv(in, EAGER, MPI_BYTE, 1 - t_rank, 100 + r, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        unsigned char *want = pattern_new(EAGER, 1 - t_rank, 100 + r), *have = mem_fetch(in, EAGER);
        check_bytes(have, want, EAGER, "both sending first, round %d", r);
        free(want);
        free(have);
    }
    mem_free(out);
    mem_free(in);
    return report_and_finalize();
}
