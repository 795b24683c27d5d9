/* tests/c/stream_calls.h -- MPICH's stream-ordered calls for the stream tests, looked up at run
 * time: without cudampi the MPI may lack them, and the program must still build (the run
 * without the shim then fails, or the MPI refuses a CUDA stream). */
#ifndef STREAM_CALLS_H
#define STREAM_CALLS_H

#include "common.h"
#include "../../include/cudampi-ext/mpi-ext.h"

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

#endif
