// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=1,CUDAMPI_PIPELINE_BYTES=0,CUDAMPI_PIPELINE_CHUNK=64K,CUDAMPI_POOL_BYTES=1M timeout=120
/* Two ranks send each other windows of chunked device messages (6 MiB each way) far larger
 * than the pinned pool of sixteen chunks, in osu_bibw's pattern: each posts its receives, then
 * its sends, then completes them all (MPI_Waitall with the receives first, with the sends
 * first, and MPI_Wait one by one). Each send waits for pinned buffers while the peer sits in its
 * own sends; it must take the peer's chunks meanwhile, or both give up after 1 ms and stage the
 * rest through pageable memory. So beyond the bytes and statuses, which are compared with the
 * sender's pattern in poisoned buffers, at most a quarter of the chunks may have gone through
 * pageable memory (cudampi_get_stats); the receives' own staging buffers, which hold only
 * envelopes, must not take the pool either. Two ranks only: a third one spinning in
 * MPI_Barrier on a two-core machine stalls the pair for milliseconds. */
#include "common.h"
#include "../../include/cudampi.h"

#define W 16
#define N ((5 << 16) + 123) /* six chunks of 64 KiB, the last one short */
#define SLACK 16

typedef int (*stats_fn)(struct cudampi_stats *);

static void exchange(int peer, int round)
{
    void *rb[W], *sb[W];
    MPI_Request q[2 * W];
    for (int k = 0; k < W; k++) {
        rb[k] = mem_alloc(MEM_DEVICE, N + SLACK);
        mem_poison(rb[k], N + SLACK);
        sb[k] = mem_alloc(MEM_DEVICE, N);
        mem_pattern(sb[k], N, peer, round * W + k);
    }
    /* round 1 lists the sends first in the array it completes */
    MPI_Request *recvs = round == 1 ? q + W : q, *sends = round == 1 ? q : q + W;
    for (int k = 0; k < W; k++)
        MPI_CHECK(MPI_Irecv(rb[k], N, MPI_BYTE, peer, k, MPI_COMM_WORLD, &recvs[k]));
    /* neither rank is still checking the last round when the other sends */
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < W; k++)
        MPI_CHECK(MPI_Isend(sb[k], N, MPI_BYTE, peer, k, MPI_COMM_WORLD, &sends[k]));
    MPI_Status st[2 * W];
    if (round < 2) {
        MPI_CHECK(MPI_Waitall(2 * W, q, st));
    } else {
        for (int k = 0; k < 2 * W; k++)
            MPI_CHECK(MPI_Wait(&q[k], &st[k]));
    }
    unsigned char *exp = malloc(N + SLACK);
    for (int k = 0; k < W; k++) {
        check_status(&st[recvs - q + k], MPI_BYTE, peer, k, N, "round %d message %d", round, k);
        unsigned char *got = mem_fetch(rb[k], N + SLACK);
        for (size_t i = 0; i < N; i++)
            exp[i] = pattern_byte(t_rank, round * W + k, i);
        memset(exp + N, POISON_BYTE, SLACK);
        check_bytes(got, exp, N + SLACK, "round %d message %d", round, k);
        free(got);
        mem_free(rb[k]);
        mem_free(sb[k]);
    }
    free(exp);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    struct cudampi_stats a, z;
    memset(&a, 0, sizeof a);
    if (get)
        get(&a);
    int peer = 1 - t_rank, rounds = 3;
    for (int round = 0; round < rounds; round++)
        exchange(peer, round);
    memset(&z, 0, sizeof z);
    if (get && !t_host_mode) {
        get(&z);
        unsigned long long chunks = (unsigned long long)rounds * W * ((N + 65535) / 65536);
        unsigned long long fallbacks = z.pageable_fallbacks - a.pageable_fallbacks;
        CHECK(z.chunked_bytes_sent - a.chunked_bytes_sent == (unsigned long long)rounds * W * N,
              "chunked bytes sent: %llu, expected %llu", (unsigned long long)(z.chunked_bytes_sent - a.chunked_bytes_sent),
              (unsigned long long)rounds * W * N);
        CHECK(fallbacks * 4 <= chunks, "%llu of %llu chunks went through pageable memory", fallbacks, chunks);
        if (getenv("CUDAMPI_TEST_VERBOSE"))
            printf("rank %d: %llu of %llu chunks through pageable memory\n", t_rank, fallbacks, chunks);
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    return report_and_finalize();
}
