// cudampi-test: ranks=2 without-shim=crash link=yes
/* Seed 000 ("CUDA aware MPI"), made into a complete program exactly as a user writes it for a
 * CUDA-aware MPI: device buffers go straight into MPI_Send / MPI_Recv.
 *
 *     //MPI rank 0
 *     MPI_Send(s_buf_d,size,MPI_CHAR,1,100,MPI_COMM_WORLD);
 *     //MPI rank n-1
 *     MPI_Recv(r_buf_d,size,MPI_CHAR,0,100,MPI_COMM_WORLD, &status);
 *
 * With a non-CUDA-aware MPI this crashes (the MPI dereferences device memory). With
 * LD_PRELOAD=libcudampi.so (or linked with -lcudampi) it runs unchanged.
 *
 * Build: mpicc seed000.c -o seed000 -I$CUDA/include -L$CUDA/lib64 -lcudart
 * Run:   mpirun -np 2 ./seed000 [bytes]          (default 1 MiB)
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

    char *host = (char *)malloc(size);
    if (myrank == 0) {
        char *s_buf_d;
        for (int i = 0; i < size; i++) host[i] = expected_byte(i);
        cudaMalloc((void **)&s_buf_d, size);
        cudaMemcpy(s_buf_d, host, size, cudaMemcpyHostToDevice);
        //MPI rank 0
        MPI_Send(s_buf_d, size, MPI_CHAR, last, 100, MPI_COMM_WORLD);
        cudaFree(s_buf_d);
    } else if (myrank == last) {
        char *r_buf_d;
        cudaMalloc((void **)&r_buf_d, size);
        cudaMemset(r_buf_d, 0, size);
        //MPI rank n-1
        MPI_Recv(r_buf_d, size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &status);
        cudaMemcpy(host, r_buf_d, size, cudaMemcpyDeviceToHost);
        int count = -1, bad = 0, first = -1;
        MPI_Get_count(&status, MPI_CHAR, &count);
        for (int i = 0; i < size; i++)
            if (host[i] != expected_byte(i)) {
                if (first < 0) first = i;
                bad++;
            }
        if (bad || count != size) {
            ok = 0;
            printf("seed000: MISMATCH: received %d bytes, %d of %d wrong", count, bad, size);
            if (first >= 0)
                printf(" (first at %d: got %d, expected %d)", first, host[first],
                       expected_byte(first));
            printf("\n");
        } else {
            printf("seed000: received %d bytes correctly on device buffer\n", size);
        }
        fflush(stdout);
        cudaFree(r_buf_d);
    }
    free(host);
    MPI_Bcast(&ok, 1, MPI_INT, last, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
