// Does cuStreamQuery on the legacy default stream see work on blocking streams? and what it costs.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
__global__ void spin(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static const char *q(CUstream s) { CUresult r = cuStreamQuery(s); return r == CUDA_SUCCESS ? "idle" : r == CUDA_ERROR_NOT_READY ? "busy" : "error"; }
int main() {
    cudaFree(0);
    cudaStream_t blk, nb; cudaStreamCreate(&blk); cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    long long c = 200000000; // ~100 ms
    struct { const char *name; cudaStream_t s; } cases[] = {{"legacy", 0}, {"blocking", blk}, {"per-thread", cudaStreamPerThread}, {"non-blocking", nb}};
    for (int i = 0; i < 4; i++) {
        spin<<<1, 1, 0, cases[i].s>>>(c);
        printf("kernel on %-12s: cuStreamQuery(legacy) %s, cuStreamQuery(CU_STREAM_LEGACY) %s, cudaStreamQuery(0) %s\n", cases[i].name, q(0), q(CU_STREAM_LEGACY),
               cudaStreamQuery(0) == cudaSuccess ? "idle" : "busy");
        cudaDeviceSynchronize();
        printf("   after sync: %s\n", q(0));
    }
    // cost when idle
    for (int k = 0; k < 3; k++) {
        double t0 = now(); int n = 100000; for (int i = 0; i < n; i++) cuStreamQuery(0);
        double t1 = now(); for (int i = 0; i < n; i++) cudaStreamQuery(0);
        double t2 = now();
        CUevent ev; cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        double t3 = now(); for (int i = 0; i < 2000; i++) { cuEventRecord(ev, 0); cuStreamSynchronize(0); }
        double t4 = now(); for (int i = 0; i < 2000; i++) { cuStreamSynchronize(0); }
        double t5 = now();
        printf("idle: cuStreamQuery(0) %.3f us, cudaStreamQuery(0) %.3f us, record+sync %.2f us, sync alone %.3f us\n", (t1 - t0) / n, (t2 - t1) / n, (t4 - t3) / 2000, (t5 - t4) / 2000);
    }
    return 0;
}
