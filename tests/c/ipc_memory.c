// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_IPC=1,CUDAMPI_IPC_SAME_GPU_BYTES=0,CUDAMPI_IPC_POOL_BYTES=128M timeout=600 mpis=ompi4,mpich4 forced=no
/* Memory stays bounded when every message comes from a fresh device buffer: 10,000 times, rank 0
 * allocates a device buffer, sends it to rank 1 and frees it, and rank 1 does the same with its
 * receive buffer, with sizes cycling through 64 KiB + 3, 1 MiB and 5 MiB (over CUDA IPC where
 * the ranks share a node, staged otherwise). Each message carries its iteration number, checked
 * at every receive, and every 997th message is compared byte for byte. Both ranks print the
 * device memory in use (cudaMemGetInfo) and their resident host memory after 100 iterations
 * and at the end. The sender may run ahead of the receiver by as much exported memory as
 * CUDAMPI_IPC_POOL_BYTES allows (128 MiB here), so growth beyond that plus 64 MiB fails the
 * test: one mapping or staging buffer kept per program buffer would add gigabytes.
 * What it checks is cudampi's own caches, so it runs on one MPI of each family, in the default
 * mode (IPC inside the node) and with each rank a node (staged and chunked): 10,000 rounds take
 * one to two minutes a run on the stand-in driver, and modes ipc and chunks would repeat
 * the first, since this test pins its path. */
#include "common.h"
#include <unistd.h>

#define ITERS 10000
#define WARMUP 100
#define LIMIT ((128u + 64u) << 20)

static const size_t sizes[] = {(64 << 10) + 3, 1 << 20, 5 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static size_t device_used(void)
{
    size_t free_b = 0, total = 0;
    if (host_mode() || cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return 0;
    return total - free_b;
}

static size_t host_resident(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    unsigned char *pattern[NSIZES];
    for (size_t k = 0; k < NSIZES; k++)
        pattern[k] = pattern_new(sizes[k], 1, (int)k + 1);
    size_t dev0 = 0, host0 = 0;
    for (int i = 0; i < ITERS && t_rank < 2; i++) {
        if (i == WARMUP) {
            dev0 = device_used();
            host0 = host_resident();
        }
        size_t k = (size_t)i % NSIZES, n = sizes[k];
        void *b = mem_alloc(MEM_DEVICE, n);
        if (t_rank == 0) {
            mem_put(b, pattern[k], n);
            mem_put(b, &i, sizeof i);
            MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, i % 7, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, i % 7, MPI_COMM_WORLD, &st));
            int stamp = -1;
            mem_get(&stamp, b, sizeof stamp);
            CHECK(stamp == i, "message %d carries iteration %d", i, stamp);
            if (i % 997 == 0) {
                unsigned char *got = mem_fetch(b, n);
                memcpy(pattern[k], &i, sizeof i);
                check_bytes(got, pattern[k], n, "message %d (%zu bytes)", i, n);
                free(got);
            }
        }
        mem_free(b);
        if (t_failures)
            break;
    }
    size_t dev1 = device_used(), host1 = host_resident();
    if (t_rank < 2) {
        printf("rank %d: after %d iterations device memory in use %zu -> %zu bytes, host resident %zu -> %zu bytes\n", t_rank,
               WARMUP, dev0, dev1, host0, host1);
        CHECK(dev1 <= dev0 + LIMIT, "device memory grew by %zu bytes over %d iterations", dev1 - dev0, ITERS - WARMUP);
        CHECK(host1 <= host0 + LIMIT, "host memory grew by %zu bytes over %d iterations", host1 - host0, ITERS - WARMUP);
    }
    for (size_t k = 0; k < NSIZES; k++)
        free(pattern[k]);
    return report_and_finalize();
}
