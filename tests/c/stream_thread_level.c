// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_ENQUEUE=ordered timeout=60
/* The stream-ordered engine (CUDAMPI_ENQUEUE=ordered) makes MPI calls from a thread of its own:
 * a program that initialised with MPI_Init and without CUDAMPI_THREAD_MULTIPLE gets
 * MPI_ERR_OTHER from an enqueue call, with one cudampi: line, and nothing is sent; the same
 * communicator then serves blocking device messages as before. */
#include "common.h"
#include "../../include/cudampi-ext/mpi-ext.h"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int level = -1;
    MPI_Query_thread(&level);
    int (*set_hex)(MPI_Info, const char *, const void *, int) = dlsym(RTLD_DEFAULT, "MPIX_Info_set_hex");
    int (*create)(MPI_Info, MPIX_Stream *) = dlsym(RTLD_DEFAULT, "MPIX_Stream_create");
    int (*comm_create)(MPI_Comm, MPIX_Stream, MPI_Comm *) = dlsym(RTLD_DEFAULT, "MPIX_Stream_comm_create");
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm) = dlsym(RTLD_DEFAULT, "MPIX_Send_enqueue");
    int (*stream_free)(MPIX_Stream *) = dlsym(RTLD_DEFAULT, "MPIX_Stream_free");
    if (!set_hex || !create || !comm_create || !send || !stream_free) {
        fprintf(stderr, "the MPIX stream calls are not provided\n");
        return 3;
    }
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    MPI_Info info;
    MPIX_Stream ms;
    MPI_Comm comm;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPI_CHECK(set_hex(info, "value", &s, sizeof s));
    MPI_CHECK(create(info, &ms));
    MPI_Info_free(&info);
    MPI_CHECK(comm_create(MPI_COMM_WORLD, ms, &comm));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const size_t n = 4096;
    void *b = mem_alloc(MEM_DEVICE, n);
    if (level != MPI_THREAD_MULTIPLE) {
        int rc = send(b, (int)n, MPI_BYTE, 1 - t_rank, 5, comm);
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
    MPI_CHECK(stream_free(&ms));
    CUDA_CHECK(cudaStreamDestroy(s));
    return report_and_finalize();
}
