/* mpi-ext.h of cudampi: put this directory first on the include path (pkg-config --cflags
 * cudampi does) and a program that asks whether its MPI is CUDA-aware at compile time is told
 * yes, as it is at run time once libcudampi.so is loaded.
 *
 * It includes the MPI library's own mpi-ext.h where there is one (Open MPI's, which says
 * MPIX_CUDA_AWARE_SUPPORT 0 for a build without CUDA), then sets MPIX_CUDA_AWARE_SUPPORT to 1
 * and declares the queries cudampi answers: MPIX_Query_cuda_support() (Open MPI's) and
 * MPIX_GPU_query_support() (MPICH's), with MPIX_GPU_SUPPORT_CUDA. MPICH has no mpi-ext.h; its
 * mpi.h declares both functions, with the same prototypes.
 *
 * It also declares MPICH's stream-ordered calls (MPIX_Stream_create, MPIX_Stream_comm_create,
 * MPIX_Send_enqueue, ...), which cudampi serves on every MPI, for libraries whose mpi.h lacks
 * them (all but MPICH 4.1 and later, which defines MPIX_STREAM_NULL). */
#ifndef CUDAMPI_MPI_EXT_H
#define CUDAMPI_MPI_EXT_H 1

#if defined(__has_include_next)
#if __has_include_next(<mpi-ext.h>)
#include_next <mpi-ext.h>
#endif
#endif

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#undef MPIX_CUDA_AWARE_SUPPORT
#define MPIX_CUDA_AWARE_SUPPORT 1
int MPIX_Query_cuda_support(void);

#ifndef MPIX_GPU_SUPPORT_CUDA
#define MPIX_GPU_SUPPORT_CUDA 0
#endif
int MPIX_GPU_query_support(int gpu_type, int *is_supported);

#ifndef MPIX_STREAM_NULL
typedef int MPIX_Stream;
#define MPIX_STREAM_NULL ((MPIX_Stream)0x3c000000)
int MPIX_Info_set_hex(MPI_Info info, const char *key, const void *value, int value_size);
int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream);
int MPIX_Stream_free(MPIX_Stream *stream);
int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm *newcomm);
int MPIX_Send_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                      MPI_Status *status);
int MPIX_Isend_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                       MPI_Request *request);
int MPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                       MPI_Request *request);
int MPIX_Wait_enqueue(MPI_Request *request, MPI_Status *status);
int MPIX_Waitall_enqueue(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int MPIX_Allreduce_enqueue(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm);
#endif

#ifdef __cplusplus
}
#endif

#endif /* CUDAMPI_MPI_EXT_H */
