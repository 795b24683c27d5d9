// cudampi-test: ranks=2 without-shim=pass
/* Seed 000's manual recipe for a MPI that is not CUDA-aware: stage the device buffer through
 * host memory with cudaMemcpy around the MPI call.
 *
 *     //MPI rank 0
 *     cudaMemcpy(s_buf_h,s_buf_d,size,cudaMemcpyDeviceToHost);
 *     MPI_Send(s_buf_h,size,MPI_CHAR,1,100,MPI_COMM_WORLD);
 *     //MPI rank 1
 *     MPI_Recv(r_buf_h,size,MPI_CHAR,0,100,MPI_COMM_WORLD, &status);
 *     cudaMemcpy(r_buf_d,r_buf_h,size,cudaMemcpyHostToDevice);
 *
 * Works with any MPI, with or without the shim (MPI only ever sees host buffers).
 *
 * Build: mpicc seed000_manual.c -o seed000_manual -I$CUDA/include -L$CUDA/lib64 -lcudart
 * Run:   mpirun -np 2 ./seed000_manual [bytes]   (default 1 MiB)
 */
#include <mpi.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static char expected_byte(size_t i) { return (char)(1 + (i * 7 + i / 251) % 127); }

int main(int argc, char **argv)
{
    int myrank, nranks, ok = 1;
    MPI_Status status;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &myrank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int size = argc > 1 ? atoi(argv[1]) : 1 << 20;
    int last = nranks - 1;

    if (myrank == 0) {
        char *s_buf_d, *s_buf_h = (char *)malloc(size);
        for (int i = 0; i < size; i++) s_buf_h[i] = expected_byte(i);
        cudaMalloc((void **)&s_buf_d, size);
        cudaMemcpy(s_buf_d, s_buf_h, size, cudaMemcpyHostToDevice);
        for (int i = 0; i < size; i++) s_buf_h[i] = 0; /* the staging copy below refills it */
        //MPI rank 0
        cudaMemcpy(s_buf_h, s_buf_d, size, cudaMemcpyDeviceToHost);
        MPI_Send(s_buf_h, size, MPI_CHAR, last, 100, MPI_COMM_WORLD);
        cudaFree(s_buf_d);
        free(s_buf_h);
    } else if (myrank == last) {
        char *r_buf_d, *r_buf_h = (char *)malloc(size), *check = (char *)malloc(size);
        cudaMalloc((void **)&r_buf_d, size);
        cudaMemset(r_buf_d, 0, size);
        //MPI rank n-1
        MPI_Recv(r_buf_h, size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &status);
        cudaMemcpy(r_buf_d, r_buf_h, size, cudaMemcpyHostToDevice);
        /* verify what landed on the device */
        cudaMemcpy(check, r_buf_d, size, cudaMemcpyDeviceToHost);
        int count = -1, bad = 0, first = -1;
        MPI_Get_count(&status, MPI_CHAR, &count);
        for (int i = 0; i < size; i++)
            if (check[i] != expected_byte(i)) {
                if (first < 0) first = i;
                bad++;
            }
        if (bad || count != size) {
            ok = 0;
            printf("seed000_manual: MISMATCH: received %d bytes, %d of %d wrong", count, bad, size);
            if (first >= 0)
                printf(" (first at %d: got %d, expected %d)", first, check[first],
                       expected_byte(first));
            printf("\n");
        } else {
            printf("seed000_manual: received %d bytes correctly, staged through host memory\n",
                   size);
        }
        fflush(stdout);
        cudaFree(r_buf_d);
        free(r_buf_h);
        free(check);
    }
    MPI_Bcast(&ok, 1, MPI_INT, last, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
