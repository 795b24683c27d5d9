/* tests/c/stream_calls.h -- MPICH's stream-ordered calls for the stream tests, looked up at run
 * time: without cudampi the MPI may lack them, and the program must still build (the run
 * without the shim then fails, or the MPI refuses a CUDA stream). */
#ifndef STREAM_CALLS_H
#define STREAM_CALLS_H

#include "common.h"
#include "../../include/cudampi-ext/mpi-ext.h"
#include "../../include/cudampi.h"

#define FN(name, ...) static int (*p_##name)(__VA_ARGS__)
FN(MPIX_Info_set_hex, MPI_Info, const char *, const void *, int);
FN(MPIX_Stream_create, MPI_Info, MPIX_Stream *);
FN(MPIX_Stream_free, MPIX_Stream *);
FN(MPIX_Stream_comm_create, MPI_Comm, MPIX_Stream, MPI_Comm *);
FN(MPIX_Send_enqueue, const void *, int, MPI_Datatype, int, int, MPI_Comm);
FN(MPIX_Recv_enqueue, void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
FN(MPIX_Isend_enqueue, const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
FN(MPIX_Irecv_enqueue, void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
FN(MPIX_Wait_enqueue, MPI_Request *, MPI_Status *);
FN(MPIX_Waitall_enqueue, int, MPI_Request *, MPI_Status *);
FN(MPIX_Allreduce_enqueue, const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
#undef FN

static void *stream_call(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "%s: not provided by this MPI\n", name);
        exit(3);
    }
    return f;
}

/* Looks every call up; exits with 3 where one is missing. */
T_UNUSED static void stream_calls_lookup(void)
{
#define LOOKUP(name) p_##name = (__typeof__(p_##name))stream_call(#name)
    LOOKUP(MPIX_Info_set_hex);
    LOOKUP(MPIX_Stream_create);
    LOOKUP(MPIX_Stream_free);
    LOOKUP(MPIX_Stream_comm_create);
    LOOKUP(MPIX_Send_enqueue);
    LOOKUP(MPIX_Recv_enqueue);
    LOOKUP(MPIX_Isend_enqueue);
    LOOKUP(MPIX_Irecv_enqueue);
    LOOKUP(MPIX_Wait_enqueue);
    LOOKUP(MPIX_Waitall_enqueue);
    LOOKUP(MPIX_Allreduce_enqueue);
#undef LOOKUP
}

/* An MPIX stream over the CUDA stream `s` (info type cudaStream_t, its handle in hex), and a
 * duplicate of MPI_COMM_WORLD over it. */
T_UNUSED static void stream_comm(cudaStream_t s, MPIX_Stream *ms, MPI_Comm *comm)
{
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPI_CHECK(p_MPIX_Info_set_hex(info, "value", &s, sizeof s));
    MPI_CHECK(p_MPIX_Stream_create(info, ms));
    MPI_Info_free(&info);
    MPI_CHECK(p_MPIX_Stream_comm_create(MPI_COMM_WORLD, *ms, comm));
}

/* Whether the run is the harness's mode nccl: cudampi with NCCL and a GPU per rank, where the
 * enqueued device messages go on NCCL. */
T_UNUSED static int stream_nccl_mode(void)
{
    const char *lib = getenv("CUDAMPI_NCCL_LIB");
    return lib && *lib && getenv("CUDAMPI_TEST_GPU_PER_RANK");
}

/* cudampi_stats.nccl_calls so far (0 where cudampi is not loaded). */
T_UNUSED static unsigned long long stream_nccl_calls(void)
{
    typedef int (*stats_fn)(struct cudampi_stats *);
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    if (get)
        get(&s);
    return (unsigned long long)s.nccl_calls;
}

/* In mode nccl, checks that nccl_calls rose from `before` by `expected`; elsewhere rank 0 notes
 * that the calls went through MPI. */
T_UNUSED static void stream_nccl_check(unsigned long long before, unsigned long long expected)
{
    if (stream_nccl_mode()) {
        unsigned long long rose = stream_nccl_calls() - before;
        CHECK(rose == expected, "nccl_calls rose by %llu, expected %llu (every device operation on NCCL)", rose, expected);
    } else if (t_rank == 0) {
        printf("note: no NCCL here (mode %s): the enqueue calls went through MPI\n", getenv("CMTEST_MODE") ? getenv("CMTEST_MODE") : "?");
    }
}

#endif
