/* mpi-ext.h of cudampi: put this directory first on the include path (pkg-config --cflags
 * cudampi does) and a program that asks whether its MPI is CUDA-aware at compile time is told
 * yes, as it is at run time once libcudampi.so is loaded.
 *
 * It includes the MPI library's own mpi-ext.h where there is one (Open MPI's, which says
 * MPIX_CUDA_AWARE_SUPPORT 0 for a build without CUDA), then sets MPIX_CUDA_AWARE_SUPPORT to 1
 * and declares the queries cudampi answers: MPIX_Query_cuda_support() (Open MPI's) and
 * MPIX_GPU_query_support() (MPICH's), with MPIX_GPU_SUPPORT_CUDA. MPICH has no mpi-ext.h; its
 * mpi.h declares both functions, with the same prototypes. */
#ifndef CUDAMPI_MPI_EXT_H
#define CUDAMPI_MPI_EXT_H 1

#if defined(__has_include_next)
#if __has_include_next(<mpi-ext.h>)
#include_next <mpi-ext.h>
#endif
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* CUDAMPI_MPI_EXT_H */
