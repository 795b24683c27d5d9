// cudampi-gpu-test: ranks=2 (real GPU only; built with nvcc and run by scripts/gpu-check.sh)
/* Stream ordering of the shim's staging copies, on a real GPU.
 *
 * The rule the shim documents: work the program queued on the legacy default stream, or on any
 * blocking stream (cudaStreamCreate, the per-thread default stream), is ordered before the
 * shim's device->host copy of a send buffer; work on a cudaStreamNonBlocking stream must be
 * synchronised by the program before the MPI call. And when a blocking receive into a device
 * buffer returns, the data is in device memory for work on any stream.
 *
 * Sender side (rank 0 -> rank 1, 4 MiB): the device buffer is poisoned, a kernel that first
 * spins ~50 ms then writes the pattern is queued, and MPI_Send(device buffer) follows at once:
 *   1. kernel on the legacy default stream                          -> must arrive correct
 *   2. kernel on a blocking stream (cudaStreamCreate)                -> must arrive correct
 *   3. kernel on cudaStreamPerThread                                 -> must arrive correct
 *   4. kernel on a non-blocking stream + cudaStreamSynchronize       -> must arrive correct
 *   5. kernel on a non-blocking stream, NOT synchronised             -> informational only
 * Receiver side (host buffer on rank 0 -> device buffer on rank 1):
 *   6. MPI_Recv, then at once a kernel on a non-blocking stream copies the buffer  -> correct
 *   7. MPI_Recv, then at once a kernel on the legacy default stream copies it      -> correct
 * and with 8-byte messages, which the shim writes with the stream's own memory writes, and
 * 1-byte ones, which it sets with a memset:
 *   8. 200 times: MPI_Recv, then at once a kernel on a non-blocking stream copies it -> correct
 *   9. a kernel on a blocking stream spins ~50 ms, then writes the receive buffer; MPI_Recv
 *      follows at once: the message must land after the kernel's write            -> correct
 * and with windows of receives, whose copies one MPI_Waitall waits for together:
 *  10. 64 MPI_Irecv of 64 KiB into one device buffer, MPI_Waitall, then at once a kernel on a
 *      non-blocking stream copies the buffer                                       -> correct
 *  11. the same with 256 receives of 16 KiB                                         -> correct
 * Prints one line per case and PASS stream_order / FAIL stream_order; exit 0 on pass.
 *
 * Build: nvcc -O2 -c tests/gpu/stream_order.cu -I<dir of mpi.h> -o stream_order.o
 *        mpicc stream_order.o -o stream_order -L$CUDA/lib64 -lcudart -lstdc++
 */
#include <mpi.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (4u << 20)
#define SPIN_NS 50000000ull
#define POISON 0xA5

static __device__ unsigned long long now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void slow_fill(unsigned char *p, size_t n, int seed, unsigned long long spin)
{
    if (threadIdx.x == 0 && spin) {
        unsigned long long t0 = now_ns();
        while (now_ns() - t0 < spin) {
        }
    }
    __syncthreads();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)(1 + (i * 31 + (size_t)seed * 7) % 127);
}

__global__ void copy_bytes(unsigned char *dst, const unsigned char *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static unsigned char expect(size_t i, int seed) { return (unsigned char)(1 + (i * 31 + (size_t)seed * 7) % 127); }

static int rank, failures;

#define CK(call)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));          \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                       \
        }                                                                                       \
    } while (0)

/* number of wrong bytes; how many of them still poison */
static size_t verify(const unsigned char *h, int seed, size_t *poison)
{
    size_t bad = 0;
    *poison = 0;
    for (size_t i = 0; i < N; i++)
        if (h[i] != expect(i, seed)) {
            bad++;
            if (h[i] == POISON) (*poison)++;
        }
    return bad;
}

static void report(int id, const char *what, size_t bad, size_t poison, int informational)
{
    if (bad == 0)
        printf("  ok    %d. %s\n", id, what);
    else if (informational)
        printf("  info  %d. %s: %zu of %u bytes stale (%zu still poison) -- expected: the "
               "program must synchronise such a stream\n", id, what, bad, N, poison);
    else {
        printf("  FAIL  %d. %s: %zu of %u bytes wrong (%zu still poison: the copy ran before "
               "the kernel)\n", id, what, bad, N, poison);
        failures++;
    }
    if (informational && bad == 0)
        printf("        (%d. is informational: it happened to be ordered this time)\n", id);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "stream_order: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));

    unsigned char *d, *d2, *h;
    CK(cudaMalloc((void **)&d, N));
    CK(cudaMalloc((void **)&d2, N));
    h = (unsigned char *)malloc(N);
    cudaStream_t blocking, nonblocking;
    CK(cudaStreamCreate(&blocking));
    CK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    const char *names[8] = {"",
                            "kernel on the legacy default stream, then MPI_Send",
                            "kernel on a blocking stream (cudaStreamCreate), then MPI_Send",
                            "kernel on cudaStreamPerThread, then MPI_Send",
                            "kernel on a non-blocking stream + cudaStreamSynchronize, then MPI_Send",
                            "kernel on a non-blocking stream, NOT synchronised, then MPI_Send",
                            "MPI_Recv into device memory, then a kernel on a non-blocking stream reads it",
                            "MPI_Recv into device memory, then a kernel on the legacy stream reads it"};
    if (rank == 0) printf("stream_order: %d ranks, %d device(s), %u bytes\n", size, ndev, N);

    /* sender-side cases */
    for (int c = 1; c <= 5; c++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            CK(cudaMemset(d, POISON, N));
            CK(cudaDeviceSynchronize());
            cudaStream_t s = c == 1 ? (cudaStream_t)0 : c == 2 ? blocking
                                                     : c == 3 ? cudaStreamPerThread : nonblocking;
            slow_fill<<<128, 256, 0, s>>>(d, N, c, SPIN_NS);
            CK(cudaGetLastError());
            if (c == 4) CK(cudaStreamSynchronize(s));
            MPI_Send(d, (int)N, MPI_BYTE, 1, c, MPI_COMM_WORLD);
            CK(cudaDeviceSynchronize());
        } else if (rank == 1) {
            memset(h, 0, N);
            MPI_Recv(h, (int)N, MPI_BYTE, 0, c, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            size_t poison, bad = verify(h, c, &poison);
            report(c, names[c], bad, poison, c == 5);
        }
    }

    /* receiver-side cases */
    for (int c = 6; c <= 7; c++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (size_t i = 0; i < N; i++) h[i] = expect(i, c);
            MPI_Send(h, (int)N, MPI_BYTE, 1, c, MPI_COMM_WORLD);
        } else if (rank == 1) {
            CK(cudaMemset(d, POISON, N));
            CK(cudaMemset(d2, 0, N));
            CK(cudaDeviceSynchronize());
            MPI_Recv(d, (int)N, MPI_BYTE, 0, c, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            cudaStream_t s = c == 6 ? nonblocking : (cudaStream_t)0;
            copy_bytes<<<128, 256, 0, s>>>(d2, d, N);
            CK(cudaGetLastError());
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(h, d2, N, cudaMemcpyDeviceToHost));
            size_t poison, bad = verify(h, c, &poison);
            report(c, names[c], bad, poison, 0);
        }
    }

    /* receiver-side cases with 8-byte and 1-byte messages */
    for (int k = 0; k < 4; k++) {
        const int c = 8 + k % 2;
        const size_t len = k < 2 ? 8 : 1;
        const int rounds = c == 8 ? 200 : 5;
        const char *what = c == 8 ? "MPI_Recv into device memory, then a kernel on a non-blocking stream reads it"
                                  : "kernel on a blocking stream writes the buffer, then MPI_Recv into it";
        int wrong = 0;
        for (int r = 0; r < rounds; r++) {
            int seed = c * 1000 + r;
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                for (size_t i = 0; i < len; i++) h[i] = expect(i, seed);
                MPI_Send(h, (int)len, MPI_BYTE, 1, c, MPI_COMM_WORLD);
            } else if (rank == 1) {
                CK(cudaMemset(d, POISON, 64));
                CK(cudaMemset(d2, 0, 64));
                CK(cudaDeviceSynchronize());
                if (c == 9) {
                    slow_fill<<<1, 64, 0, blocking>>>(d, 64, seed + 1, SPIN_NS);
                    CK(cudaGetLastError());
                }
                MPI_Recv(d, (int)len, MPI_BYTE, 0, c, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                copy_bytes<<<1, 64, 0, nonblocking>>>(d2, d, 8);
                CK(cudaGetLastError());
                CK(cudaStreamSynchronize(nonblocking));
                CK(cudaMemcpy(h, d2, 8, cudaMemcpyDeviceToHost));
                CK(cudaDeviceSynchronize());
                for (size_t i = 0; i < len; i++)
                    if (h[i] != expect(i, seed)) {
                        wrong++;
                        break;
                    }
            }
        }
        if (rank == 1) {
            printf("  %-5s %d. %zu-byte messages: %s: %d of %d rounds wrong\n", wrong ? "FAIL" : "ok", c, len, what, wrong,
                   rounds);
            failures += wrong != 0;
            fflush(stdout);
        }
    }

    /* receiver-side cases with windows of receives */
    for (int c = 10; c <= 11; c++) {
        const int parts = c == 10 ? 64 : 256;
        const size_t part = N / parts;
        MPI_Request reqs[256];
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (size_t i = 0; i < N; i++) h[i] = expect(i, c);
            for (int k = 0; k < parts; k++)
                MPI_Isend(h + k * part, (int)part, MPI_BYTE, 1, c, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(parts, reqs, MPI_STATUSES_IGNORE);
        } else if (rank == 1) {
            CK(cudaMemset(d, POISON, N));
            CK(cudaMemset(d2, 0, N));
            CK(cudaDeviceSynchronize());
            for (int k = 0; k < parts; k++)
                MPI_Irecv(d + k * part, (int)part, MPI_BYTE, 0, c, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(parts, reqs, MPI_STATUSES_IGNORE);
            copy_bytes<<<128, 256, 0, nonblocking>>>(d2, d, N);
            CK(cudaGetLastError());
            CK(cudaStreamSynchronize(nonblocking));
            CK(cudaMemcpy(h, d2, N, cudaMemcpyDeviceToHost));
            size_t poison, bad = verify(h, c, &poison);
            report(c, c == 10 ? "64 MPI_Irecv of 64 KiB into device memory, MPI_Waitall, then a kernel on a non-blocking stream reads them"
                              : "256 MPI_Irecv of 16 KiB into device memory, MPI_Waitall, then a kernel on a non-blocking stream reads them",
                   bad, poison, 0);
        }
    }

    MPI_Bcast(&failures, 1, MPI_INT, 1, MPI_COMM_WORLD);
    if (rank == 0) printf("%s stream_order\n", failures ? "FAIL" : "PASS");
    cudaStreamDestroy(blocking);
    cudaStreamDestroy(nonblocking);
    cudaFree(d);
    cudaFree(d2);
    free(h);
    MPI_Finalize();
    return failures ? 1 : 0;
}
