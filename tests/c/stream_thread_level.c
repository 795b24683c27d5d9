// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_ENQUEUE=ordered timeout=60
/* The stream-ordered engine (CUDAMPI_ENQUEUE=ordered) makes MPI calls from a thread of its own:
 * a program that initialised with MPI_Init and without CUDAMPI_THREAD_MULTIPLE gets
 * MPI_ERR_OTHER from an enqueue call, with one cudampi: line, and nothing is sent; the same
 * communicator then serves blocking device messages as before. */
#include "stream_calls.h"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int level = -1;
    MPI_Query_thread(&level);
    stream_calls_lookup();
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    MPIX_Stream ms;
    MPI_Comm comm;
    stream_comm(s, &ms, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const size_t n = 4096;
    void *b = mem_alloc(MEM_DEVICE, n);
    if (level != MPI_THREAD_MULTIPLE) {
        int rc = p_MPIX_Send_enqueue(b, (int)n, MPI_BYTE, 1 - t_rank, 5, comm);
        CHECK(error_class(rc) == MPI_ERR_OTHER, "an ordered enqueue below MPI_THREAD_MULTIPLE: error class %s", error_name(error_class(rc)));
    }
    /* Nothing was sent: the next message on the communicator is the blocking one. */
    if (t_rank == 0) {
        mem_pattern(b, n, 0, 6);
        MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 1, 6, comm));
    } else {
        MPI_Status st;
        mem_poison(b, n);
        MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, 0, MPI_ANY_TAG, comm, &st));
        check_status(&st, MPI_BYTE, 0, 6, (int)n, "the blocking message after the refused enqueue");
        unsigned char *have = mem_fetch(b, n), *want = pattern_new(n, 0, 6);
        check_bytes(have, want, n, "the blocking message after the refused enqueue");
        free(have);
        free(want);
    }
    mem_free(b);
    MPI_CHECK(MPI_Comm_free(&comm));
    MPI_CHECK(p_MPIX_Stream_free(&ms));
    CUDA_CHECK(cudaStreamDestroy(s));
    return report_and_finalize();
}
