// cudampi-test: ranks=2 without-shim=crash
/* Plain host pages are remembered between calls; the shim must still see device memory that
 * the driver later maps at the same address. Rank 0 sends from a large mmap'd host block (so
 * the shim asks the driver once and remembers the page), unmaps it, allocates device memory
 * until the driver hands out that very address, and sends from it: the receiver must get the
 * device bytes (without the shim, or with a stale memory of the page, MPI reads the device
 * pointer and crashes). Each receive is compared with the bytes the sender put there.
 * The host block is 1 GiB and the device blocks 512 MiB, so the freed block is usually the
 * highest hole the kernel can place them in: the stand-in driver, which maps with
 * mmap(NULL, ...), then reuses it; a real driver maps inside its own reservations and may not. */
#include "common.h"
#include <sys/mman.h>

#define BLOCK (1ul << 30)
#define DEVBLOCK (BLOCK / 2)
#define N 4096

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int reused = 0;
    for (int round = 0; round < 3; round++) {
        int seed = 10 + round;
        if (t_rank == 0) {
            unsigned char *h = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (h == MAP_FAILED) DIE("mmap failed");
            pattern_fill(h, N, 0, seed);
            for (int i = 0; i < 3; i++) MPI_CHECK(MPI_Send(h, N, MPI_BYTE, 1, seed, MPI_COMM_WORLD));
            munmap(h, BLOCK);
            /* Allocate until the driver maps device memory where the host block was. */
            void *held[4];
            int nheld = 0, hit = -1;
            for (; nheld < 4; nheld++) {
                held[nheld] = mem_alloc(MEM_DEVICE, DEVBLOCK);
                if ((unsigned char *)held[nheld] <= h && (unsigned char *)held[nheld] + DEVBLOCK >= h + N) {
                    hit = nheld++;
                    break;
                }
            }
            int same = hit >= 0 && !t_host_mode;
            unsigned char *d = hit >= 0 ? (unsigned char *)held[hit] : (unsigned char *)held[0];
            /* the old address itself when it is device memory now */
            unsigned char *src = same ? h : d;
            mem_pattern(src, N, 0, seed + 100);
            MPI_CHECK(MPI_Send(&same, 1, MPI_INT, 1, 99, MPI_COMM_WORLD));
            MPI_CHECK(MPI_Send(src, N, MPI_BYTE, 1, seed + 100, MPI_COMM_WORLD));
            reused += same;
            for (int i = 0; i < nheld; i++) mem_free(held[i]);
        } else {
            unsigned char *got = malloc(N), *exp = malloc(N);
            for (int i = 0; i < 3; i++) {
                memset(got, POISON_BYTE, N);
                MPI_CHECK(MPI_Recv(got, N, MPI_BYTE, 0, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                pattern_fill(exp, N, 0, seed);
                check_bytes(got, exp, N, "host block send %d", i);
            }
            int same = 0;
            MPI_CHECK(MPI_Recv(&same, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            memset(got, POISON_BYTE, N);
            MPI_CHECK(MPI_Recv(got, N, MPI_BYTE, 0, seed + 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            /* `same`: the sender used the old host address, now inside the device block. */
            pattern_fill(exp, N, 0, seed + 100);
            check_bytes(got, exp, N, "send from device memory at a remembered host address (round %d, reused %d)", round, same);
            reused += same;
            free(got);
            free(exp);
        }
    }
    if (t_rank == 0) note("host_cache: the driver mapped device memory at the host block's address in %d of 3 rounds", reused);
    /* Whether the kernel placed the device block in the freed hole depends on the process's
     * other mappings; it did under most MPIs of the matrix. The bytes are checked either way. */
    return report_and_finalize();
}
