// cudampi-test: ranks=2,3 without-shim=crash timeout=120
/* MPIX_Isend_enqueue / MPIX_Irecv_enqueue completed one request at a time by MPIX_Wait_enqueue,
 * in the mode a user gets by default (the calls made at once), several in flight: MPICH returns
 * one built-in request for every send it completed at its post, so the requests of two small
 * sends share a handle, and each wait must still find its own. Each rank sends K small and one
 * large device message to the next rank and receives as many from the previous one, waits for
 * each request alone (sends first, in the order posted, then the receives in reverse), and
 * compares every byte with the patterns. */
#include "stream_calls.h"

#define K 6

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stream_calls_lookup();
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    MPIX_Stream ms;
    MPI_Comm comm;
    stream_comm(s, &ms, &comm);
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
    size_t n[K + 1];
    char *sb[K + 1], *rb[K + 1];
    for (int k = 0; k <= K; k++) {
        n[k] = k < K ? (size_t)(8 + 40 * k) : (size_t)(3u << 20);
        sb[k] = (char *)mem_alloc(MEM_DEVICE, n[k]);
        rb[k] = (char *)mem_alloc(MEM_DEVICE, n[k]);
    }
    for (int round = 0; round < 3; round++) {
        MPI_Request sq[K + 1], rq[K + 1];
        for (int k = 0; k <= K; k++) {
            mem_pattern(sb[k], n[k], t_rank, round * 100 + k);
            mem_poison(rb[k], n[k]);
        }
        for (int k = 0; k <= K; k++)
            MPI_CHECK(p_MPIX_Irecv_enqueue(rb[k], (int)n[k], MPI_BYTE, prev, k, comm, &rq[k]));
        for (int k = 0; k <= K; k++)
            MPI_CHECK(p_MPIX_Isend_enqueue(sb[k], (int)n[k], MPI_BYTE, next, k, comm, &sq[k]));
        for (int k = 0; k <= K; k++) MPI_CHECK(p_MPIX_Wait_enqueue(&sq[k], MPI_STATUS_IGNORE));
        for (int k = K; k >= 0; k--) MPI_CHECK(p_MPIX_Wait_enqueue(&rq[k], MPI_STATUS_IGNORE));
        CUDA_CHECK(cudaStreamSynchronize(s));
        for (int k = 0; k <= K; k++)
            check_pattern(rb[k], n[k], prev, round * 100 + k, "round %d message %d (%zu bytes)", round, k, n[k]);
    }
    for (int k = 0; k <= K; k++) {
        mem_free(sb[k]);
        mem_free(rb[k]);
    }
    MPI_Comm_free(&comm);
    MPI_CHECK(p_MPIX_Stream_free(&ms));
    CUDA_CHECK(cudaStreamDestroy(s));
    return report_and_finalize();
}
