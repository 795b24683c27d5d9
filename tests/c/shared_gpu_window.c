// cudampi-test: ranks=2,3 without-shim=crash env=FAKECUDA_DEVICES=1 timeout=120 nodes=no
/* Windows of device messages of several sizes on a node with one GPU, which every rank shares:
 * IPC between them takes messages from CUDAMPI_IPC_SAME_GPU_BYTES (1 MiB) on, and the smaller
 * ones are staged; a receiver knows this from the handshake's records and completes its smaller
 * receives as staged ones, in the real MPI_Waitall, and the larger ones ahead of them. Each
 * rank posts, in one window, receives from its left neighbour of 8 KiB, 64 KiB, 256 KiB,
 * 1 MiB + 4 KiB and 4 MiB, then sends of the same sizes to its right neighbour, largest first,
 * and completes all of them with one MPI_Waitall; every message lands in a poisoned device
 * buffer and is compared byte for byte, with its status. Where one GPU is visible, rank 0 also
 * checks from cudampi_get_stats which sizes went over IPC: the two from 1 MiB by default, every
 * one with CUDAMPI_IPC_SAME_GPU_BYTES=0, none with CUDAMPI_IPC=0. */
#include "ipc_stats.h"

#define ROUNDS 3
static const size_t sizes[] = {8u << 10, 64u << 10, 256u << 10, (1u << 20) + (4u << 10), 4u << 20};
#define N (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int left = (t_rank + t_size - 1) % t_size, right = (t_rank + 1) % t_size;
    void *send[N], *recv[N];
    for (size_t i = 0; i < N; i++) {
        send[i] = mem_alloc(MEM_DEVICE, sizes[i]);
        recv[i] = mem_alloc(MEM_DEVICE, sizes[i]);
    }
    stats_fn get = stats_lookup();
    unsigned long long before = ipc_sent(get);
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Request req[2 * N];
        MPI_Status st[2 * N];
        for (size_t i = 0; i < N; i++) {
            mem_pattern(send[i], sizes[i], t_rank, round * 10 + (int)i);
            mem_poison(recv[i], sizes[i]);
        }
        for (size_t i = 0; i < N; i++)
            MPI_CHECK(MPI_Irecv(recv[i], (int)sizes[i], MPI_BYTE, left, (int)i, MPI_COMM_WORLD, &req[i]));
        for (size_t i = N; i-- > 0;)
            MPI_CHECK(MPI_Isend(send[i], (int)sizes[i], MPI_BYTE, right, (int)i, MPI_COMM_WORLD, &req[N + i]));
        MPI_CHECK(MPI_Waitall((int)(2 * N), req, st));
        for (size_t i = 0; i < N; i++) {
            check_status(&st[i], MPI_BYTE, left, (int)i, (int)sizes[i], "round %d, %zu bytes", round, sizes[i]);
            unsigned char *want = pattern_new(sizes[i], left, round * 10 + (int)i), *have = mem_fetch(recv[i], sizes[i]);
            check_bytes(have, want, sizes[i], "round %d, %zu bytes from rank %d", round, sizes[i], left);
            free(want);
            free(have);
        }
    }
    /* With several GPUs visible, which messages take IPC depends on where the ranks run. */
    if (t_rank == 0 && !host_mode() && test_device_count() == 1) {
        CHECK(get != NULL, "cudampi_get_stats not exported");
        const char *ipc = getenv("CUDAMPI_IPC"), *same = getenv("CUDAMPI_IPC_SAME_GPU_BYTES");
        unsigned long long want = 0;
        for (size_t i = 0; i < N; i++) {
            int off = ipc && strcmp(ipc, "0") == 0, every = same && strcmp(same, "0") == 0;
            if (!off && (every || sizes[i] >= (1u << 20)))
                want += ROUNDS * sizes[i];
        }
        unsigned long long sent = ipc_sent(get) - before;
        CHECK(sent == want, "%llu bytes went over IPC, expected %llu", sent, want);
    }
    for (size_t i = 0; i < N; i++) {
        mem_free(send[i]);
        mem_free(recv[i]);
    }
    return report_and_finalize();
}
