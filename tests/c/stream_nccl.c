// cudampi-test: ranks=2,4 env=CUDAMPI_ENQUEUE=nccl timeout=120 nccl=yes
/* MPIX_Send/Recv/Isend/Irecv_enqueue with CUDAMPI_ENQUEUE=nccl: where every rank has a GPU of
 * its own and NCCL (mode nccl: the stand-in NCCL, a device per rank), device buffers move on
 * NCCL on the program's stream; elsewhere the calls are made through MPI. Both must give the
 * same bytes, which a copy queued on the stream after the operations reads back:
 *   1. ping-pong of 8 B, 4 KiB and 1 MiB + 3 with blocking enqueue calls, the send buffer
 *      overwritten on the stream right after MPIX_Send_enqueue; statuses name source, tag and
 *      count;
 *   2. a ring halo, 5 steps: each step writes its edges on the stream, posts MPIX_Irecv_enqueue
 *      from both neighbours and MPIX_Isend_enqueue to both, one MPIX_Waitall_enqueue with
 *      statuses, then copies what arrived into a history on the stream, checked at the end;
 *   3. in mode nccl, cudampi_stats.nccl_calls rose by every device operation (stream_matched
 *      tests MPI's matching there: tags, MPI_ANY_SOURCE, larger and shorter receives). */
#include "stream_calls.h"

static cudaStream_t stream;
static MPI_Comm scomm;

static void fill(void *dev, size_t n, int seed)
{
    unsigned char *h = pattern_new(n, t_rank, seed);
    CUDA_CHECK(cudaMemcpyAsync(dev, h, n, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    free(h);
}

static unsigned char *read_back(const void *dev, size_t n)
{
    unsigned char *h = xmalloc(n);
    CUDA_CHECK(cudaMemcpyAsync(h, dev, n, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return h;
}

static void pingpong(size_t n, int seed)
{
    if (t_rank > 1)
        return;
    int peer = 1 - t_rank;
    char *s = mem_alloc(MEM_DEVICE, n), *r = mem_alloc(MEM_DEVICE, n);
    for (int k = 0; k < 3; k++) {
        int tag = seed + k;
        MPI_Status st;
        status_init(&st);
        fill(s, n, tag);
        CUDA_CHECK(cudaMemsetAsync(r, POISON_BYTE, n, stream));
        if (t_rank == 0) {
            MPI_CHECK(p_MPIX_Send_enqueue(s, (int)n, MPI_BYTE, peer, tag, scomm));
            CUDA_CHECK(cudaMemsetAsync(s, 0xEE, n, stream));
            MPI_CHECK(p_MPIX_Recv_enqueue(r, (int)n, MPI_BYTE, peer, tag, scomm, &st));
        } else {
            MPI_CHECK(p_MPIX_Recv_enqueue(r, (int)n, MPI_BYTE, peer, tag, scomm, &st));
            MPI_CHECK(p_MPIX_Send_enqueue(s, (int)n, MPI_BYTE, peer, tag, scomm));
            CUDA_CHECK(cudaMemsetAsync(s, 0xEE, n, stream));
        }
        unsigned char *have = read_back(r, n), *want = pattern_new(n, peer, tag);
        check_bytes(have, want, n, "ping-pong, %zu bytes, round %d", n, k);
        free(have);
        free(want);
        check_status(&st, MPI_BYTE, peer, tag, (int)n, "ping-pong status, %zu bytes", n);
    }
    mem_free(s);
    mem_free(r);
}

static void halo(size_t n, int steps)
{
    int left = (t_rank + t_size - 1) % t_size, right = (t_rank + 1) % t_size;
    char *edges = mem_alloc(MEM_DEVICE, 2 * n), *ghosts = mem_alloc(MEM_DEVICE, 2 * n), *history = mem_alloc(MEM_DEVICE, 2 * n * steps);
    CUDA_CHECK(cudaMemsetAsync(ghosts, POISON_BYTE, 2 * n, stream));
    for (int k = 0; k < steps; k++) {
        unsigned char *h = xmalloc(2 * n), *a = pattern_new(n, t_rank, 1000 + 2 * k), *b = pattern_new(n, t_rank, 1001 + 2 * k);
        memcpy(h, a, n);
        memcpy(h + n, b, n);
        /* Pageable memory: the copy is done with the host buffer when it returns. */
        CUDA_CHECK(cudaMemcpyAsync(edges, h, 2 * n, cudaMemcpyHostToDevice, stream));
        free(h);
        free(a);
        free(b);
        MPI_Request q[4];
        MPI_Status st[4];
        /* Tag 0 goes rightwards (edge 1), tag 1 leftwards (edge 0). With two ranks both
         * neighbours are one: each pair posts in the same order on both sides. */
        MPI_CHECK(p_MPIX_Irecv_enqueue(ghosts, (int)n, MPI_BYTE, left, 0, scomm, &q[0]));
        MPI_CHECK(p_MPIX_Irecv_enqueue(ghosts + n, (int)n, MPI_BYTE, right, 1, scomm, &q[1]));
        MPI_CHECK(p_MPIX_Isend_enqueue(edges + n, (int)n, MPI_BYTE, right, 0, scomm, &q[2]));
        MPI_CHECK(p_MPIX_Isend_enqueue(edges, (int)n, MPI_BYTE, left, 1, scomm, &q[3]));
        for (int i = 0; i < 4; i++)
            status_init(&st[i]);
        MPI_CHECK(p_MPIX_Waitall_enqueue(4, q, st));
        check_status(&st[0], MPI_BYTE, left, 0, (int)n, "halo step %d, from the left", k);
        check_status(&st[1], MPI_BYTE, right, 1, (int)n, "halo step %d, from the right", k);
        CUDA_CHECK(cudaMemcpyAsync(history + 2 * n * k, ghosts, 2 * n, cudaMemcpyDeviceToDevice, stream));
    }
    unsigned char *have = read_back(history, 2 * n * steps);
    for (int k = 0; k < steps; k++) {
        unsigned char *l = pattern_new(n, left, 1001 + 2 * k), *r = pattern_new(n, right, 1000 + 2 * k);
        check_bytes(have + 2 * n * k, l, n, "halo step %d: the left neighbour's edge", k);
        check_bytes(have + 2 * n * k + n, r, n, "halo step %d: the right neighbour's edge", k);
        free(l);
        free(r);
    }
    free(have);
    mem_free(edges);
    mem_free(ghosts);
    mem_free(history);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stream_calls_lookup();
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    MPIX_Stream ms;
    stream_comm(stream, &ms, &scomm);
    unsigned long long before = stream_nccl_calls();
    static const size_t sizes[] = {8, 4096, (1 << 20) + 3};
    for (int i = 0; i < 3; i++)
        pingpong(sizes[i], 10 * (i + 1));
    halo(3000, 5);
    unsigned long long ops = (t_rank < 2 ? 3 * 3 * 2 : 0) + 5 * 4;
    stream_nccl_check(before, ops);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    MPI_CHECK(MPI_Comm_free(&scomm));
    MPI_CHECK(p_MPIX_Stream_free(&ms));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return report_and_finalize();
}
