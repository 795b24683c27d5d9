// cudampi-test: ranks=2 without-shim=crash timeout=240 env=CUDAMPI_IPC=0
/* Long-running device traffic must not grow the process, and a receive that the MPI overruns
 * must not damage it.
 *
 * 1. cudaMalloc / MPI_Send / MPI_Recv / cudaFree, CHURN_ITERS times (default 10000), message
 *    sizes cycling over 1 B .. 256 KiB + 3 (staging classes 4 KiB to 512 KiB): host resident
 *    memory (/proc/self/statm) and free device memory (cudaMemGetInfo) are read after a warm-up
 *    of 1000 iterations and at the end, printed, and may not grow beyond what cudampi's pinned
 *    staging pool took on (bounded by CUDAMPI_POOL_BYTES, and filled further when chunked
 *    sends run ahead of the receiver; the shim's host-page cache is bounded too; a freed
 *    device buffer must leave nothing behind). IPC stays off: its exported arenas are device
 *    memory that the stand-in driver keeps in host pages, so they would count as resident;
 *    ipc_memory is this loop for IPC, bounded by CUDAMPI_IPC_POOL_BYTES.
 *    Every 97th message is checked byte for byte. Every 16th, rank 1 acknowledges on
 *    MPI_COMM_WORLD, so that rank 0's sends run at most 16 messages ahead. Without it, in
 *    some runs on MPICH 4.0 with every message in chunks, rank 0's pool grew by
 *    61 MiB (its sends ran far ahead) and both ranks' resident memory by 9-10 MiB besides,
 *    where other runs grew 0.3 MiB: how far a sender ran ahead, not a leak, which grows with
 *    the iterations.
 * 2. Truncated receives: rank 0 sends 1 MiB, rank 1 posts 4 KiB of a 1 MiB device buffer, 50
 *    times. Open MPI writes the whole message past the posted count; staged, that lands behind
 *    the 4 KiB staging buffer. Each receive must return MPI_ERR_TRUNCATE and leave the device
 *    buffer's poison alone, and the process must then still pass a normal exchange and a burst
 *    of heap allocations. (In host mode, on the plain MPI, the 1 MiB buffer absorbs the
 *    overrun itself.) */
#include "common.h"
#include "../../include/cudampi.h"

#include <unistd.h>

static MPI_Comm comm;

static size_t resident_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t device_free_bytes(void)
{
    if (host_mode()) return 0;
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return fr;
}

/* Pinned bytes cudampi's staging pool holds (0 without cudampi): the pool keeps buffers for
 * reuse up to CUDAMPI_POOL_BYTES (api_stats checks that bound), and a sender whose chunked
 * messages run ahead of the receiver fills it further, so its growth is not a leak. */
static double pool_mib(void)
{
    typedef int (*stats_fn)(struct cudampi_stats *);
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    struct cudampi_stats s;
    if (!get || get(&s) != 0) return 0;
    return (double)s.pool_bytes_held / 1048576.0;
}

static void churn(int iters)
{
    static const size_t sizes[] = {1, 100, 4096, 4099, 65536, 200000, 262147};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]), warm = 1000;
    size_t rss0 = 0, dev0 = 0;
    double pool0 = 0;
    for (int i = 0; i < iters; i++) {
        if (i == warm) {
            rss0 = resident_bytes();
            dev0 = device_free_bytes();
            pool0 = pool_mib();
        }
        size_t n = sizes[i % nsizes];
        int check = i % 97 == 0;
        void *b = mem_alloc(MEM_DEVICE, n);
        if (t_rank == 0) {
            if (check) mem_pattern(b, n, 0, i);
            MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, i & 0x7fff, comm));
        } else if (t_rank == 1) {
            if (check) mem_poison(b, n);
            MPI_Status st;
            MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, i & 0x7fff, comm, &st));
            if (check) {
                unsigned char *g = mem_fetch(b, n), *e = pattern_new(n, 0, i);
                check_bytes(g, e, n, "churn iteration %d (%zu bytes)", i, n);
                free(g);
                free(e);
            }
        }
        mem_free(b);
        if (i % 16 == 15) {
            if (t_rank == 1) MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_WORLD));
            if (t_rank == 0) MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
    }
    size_t rss1 = resident_bytes(), dev1 = device_free_bytes();
    double pooled = pool_mib() - pool0;
    double grew = ((double)rss1 - (double)rss0) / 1048576.0 - (pooled > 0 ? pooled : 0);
    double lost = ((double)dev0 - (double)dev1) / 1048576.0;
    printf("churn rank %d: %d iterations; host resident %.1f -> %.1f MiB (%+.1f, of which the "
           "staging pool %+.1f); device free %.1f -> %.1f MiB (%+.1f)\n",
           t_rank, iters, rss0 / 1048576.0, rss1 / 1048576.0, grew + (pooled > 0 ? pooled : 0),
           pooled, dev0 / 1048576.0, dev1 / 1048576.0, -lost);
    fflush(stdout);
    CHECK(grew < 8.0, "host resident memory grew by %.1f MiB over %d iterations, besides the staging pool", grew, iters - warm);
    CHECK(lost < 4.0, "free device memory fell by %.1f MiB over %d iterations", lost, iters - warm);
}

static void overrun(int rounds)
{
    const size_t n = 1 << 20, t = 4096;
    MPI_Comm errcomm;
    MPI_Comm_dup(comm, &errcomm);
    MPI_Comm_set_errhandler(errcomm, MPI_ERRORS_RETURN);
    /* MPICH raises request errors through MPI_COMM_WORLD's handler */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    void *b = mem_alloc(MEM_DEVICE, n);
    for (int r = 0; r < rounds; r++) {
        if (t_rank == 0) {
            mem_pattern(b, n, 0, r);
            MPI_Send(b, (int)n, MPI_BYTE, 1, r, errcomm);
        } else if (t_rank == 1) {
            mem_poison(b, n);
            MPI_Request rq;
            int rc;
            if (r % 2) {
                rc = MPI_Recv(b, (int)t, MPI_BYTE, 0, r, errcomm, MPI_STATUS_IGNORE);
            } else {
                MPI_CHECK(MPI_Irecv(b, (int)t, MPI_BYTE, 0, r, errcomm, &rq));
                rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
            }
            CHECK(error_class(rc) == MPI_ERR_TRUNCATE, "truncated receive %d returned %s", r,
                  error_name(error_class(rc)));
            if (mem_real_kind(b) != MEM_HOST) {
                unsigned char *g = mem_fetch(b, n);
                check_all(g, POISON_BYTE, n, "truncated receive %d: device buffer must stay unchanged", r);
                free(g);
            }
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    /* the process is intact: a normal exchange and a burst of allocations */
    if (t_rank == 0) {
        mem_pattern(b, n, 0, 4242);
        MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, 4242, errcomm));
    } else if (t_rank == 1) {
        mem_poison(b, n);
        MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, 4242, errcomm, MPI_STATUS_IGNORE));
        unsigned char *g = mem_fetch(b, n), *e = pattern_new(n, 0, 4242);
        check_bytes(g, e, n, "exchange after the truncated receives");
        free(g);
        free(e);
    }
    void *blocks[256];
    for (int i = 0; i < 256; i++) blocks[i] = xmalloc((size_t)(i * 37 % 5000) + 1);
    for (int i = 0; i < 256; i++) free(blocks[i]);
    mem_free(b);
    MPI_Comm_free(&errcomm);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size < 2) DIE("needs 2 ranks");
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    overrun(50);
    churn(atoi(t_env("CHURN_ITERS", "10000")));
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
