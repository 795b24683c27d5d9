/* A program that refuses to build unless its MPI says it is CUDA-aware, as many GPU codes do,
 * and asks again at run time: MPIX_Query_cuda_support(), MPIX_GPU_query_support() and MPI
 * 4.1's memory allocation kinds on MPI_INFO_ENV. Built by cuda_aware_ext.sh with the flags of
 * pkg-config --cflags --libs cudampi; it prints "cuda-aware program: ok" on rank 0. */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <string.h>

#if !defined(MPIX_CUDA_AWARE_SUPPORT) || !MPIX_CUDA_AWARE_SUPPORT
#error "This MPI library is not CUDA-aware"
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, ok = 1, supported = -1, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (MPIX_Query_cuda_support() != 1) {
        printf("rank %d: MPIX_Query_cuda_support() = %d\n", rank, MPIX_Query_cuda_support());
        ok = 0;
    }
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) != MPI_SUCCESS || supported != 1) {
        printf("rank %d: MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) gives %d\n", rank, supported);
        ok = 0;
    }
    char kinds[MPI_MAX_INFO_VAL + 1] = "";
    MPI_Info_get(MPI_INFO_ENV, "mpi_memory_alloc_kinds", MPI_MAX_INFO_VAL, kinds, &flag);
    if (!flag || !strstr(kinds, "cuda:device")) {
        printf("rank %d: mpi_memory_alloc_kinds of MPI_INFO_ENV is \"%s\" (found %d)\n", rank, kinds, flag);
        ok = 0;
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0 && all) printf("cuda-aware program: ok (mpi_memory_alloc_kinds = %s)\n", kinds);
    MPI_Finalize();
    return all ? 0 : 1;
}
