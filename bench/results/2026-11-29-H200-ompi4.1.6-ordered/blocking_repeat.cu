/* blocking_repeat.cu (run C13): does bench/enqueue's blocking halo step end with the same bytes every
 * run? P: the domain copied in as the benchmark then did (pageable cudaMemcpy, kernels on a
 * non-blocking stream); S: that copy waited for; M: staged by hand (host buffers to MPI).
 * Arguments: variants (PSM), runs, halo bytes, steps. */
#include <mpi.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
static const size_t N = 1 << 20;
__global__ void pack(double *halo, const double *u, size_t nh, size_t n, int step)
{ size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; if (i < nh) halo[i] = u[(i * 7) % n] + 0.001 * step; }
__global__ void update(double *u, const double *halo, size_t n, size_t nh)
{ size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; if (i < n) u[i] = 0.5 * u[i] + 0.25 * halo[i % nh] + 1e-6 * (double)(i & 15); }
static unsigned blocks(size_t n) { return (unsigned)((n + 255) / 256); }
static int rank, peer; static cudaStream_t s;
static uint64_t run(char v, size_t hbytes, int iters)
{
    size_t nh = hbytes / 8; double *u, *hs, *hr;
    cudaMalloc(&u, N * 8); cudaMalloc(&hs, hbytes); cudaMalloc(&hr, hbytes);
    double *init = (double *)malloc(N * 8), *hh = (double *)malloc(hbytes), *hh2 = (double *)malloc(hbytes);
    for (size_t i = 0; i < N; i++) init[i] = (double)((i * 31 + rank * 17) % 1000) / 1000.0;
    cudaMemcpy(u, init, N * 8, cudaMemcpyHostToDevice);
    if (v != 'P') cudaDeviceSynchronize();
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < iters; k++) {
        pack<<<blocks(nh), 256, 0, s>>>(hs, u, nh, N, k);
        cudaStreamSynchronize(s);
        MPI_Request q[2];
        if (v == 'M') {
            cudaMemcpy(hh, hs, hbytes, cudaMemcpyDeviceToHost);
            MPI_Irecv(hh2, (int)hbytes, MPI_BYTE, peer, k, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(hh, (int)hbytes, MPI_BYTE, peer, k, MPI_COMM_WORLD, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
            cudaMemcpyAsync(hr, hh2, hbytes, cudaMemcpyHostToDevice, s);
        } else {
            MPI_Irecv(hr, (int)hbytes, MPI_BYTE, peer, k, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(hs, (int)hbytes, MPI_BYTE, peer, k, MPI_COMM_WORLD, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        }
        update<<<blocks(N), 256, 0, s>>>(u, hr, N, nh);
    }
    cudaStreamSynchronize(s);
    cudaMemcpy(init, u, N * 8, cudaMemcpyDeviceToHost);
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)init;
    for (size_t i = 0; i < N * 8; i++) h = (h ^ p[i]) * 1099511628211ull;
    cudaFree(u); cudaFree(hs); cudaFree(hr); free(init); free(hh); free(hh2);
    return h;
}
int main(int argc, char **argv)
{
    int provided, size; MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = size == 2 ? 1 - rank : rank;
    cudaSetDevice(0); cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const char *vs = argc > 1 ? argv[1] : "PSM"; int reps = argc > 2 ? atoi(argv[2]) : 12;
    size_t hb = argc > 3 ? (size_t)atol(argv[3]) : (4 << 20); int it = argc > 4 ? atoi(argv[4]) : 50;
    for (const char *v = vs; *v; v++) {
        uint64_t first = 0; int differ = 0, distinct = 0; uint64_t seen[64]; 
        for (int r = 0; r < reps; r++) {
            uint64_t h = run(*v, hb, it);
            if (r == 0) first = h; if (h != first) differ++;
            int k; for (k = 0; k < distinct; k++) if (seen[k] == h) break;
            if (k == distinct && distinct < 64) seen[distinct++] = h;
        }
        if (rank == 0) printf("race %c halo %zu it %d: %d of %d runs differ from the first, %d distinct\n", *v, hb, it, differ, reps, distinct);
    }
    MPI_Finalize();
}
