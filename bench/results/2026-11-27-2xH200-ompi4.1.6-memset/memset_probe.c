/* A byte or three put on the device by cuMemsetD8/D16Async (the value travels in the command,
 * as a stream write's does) against a copy from pinned memory, each waited for by a host word
 * the stream writes after it; alone and followed by a 1-byte copy back. Checked by reading back
 * on a non-blocking stream. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s: %d\n", #x, r_); exit(1); } } while (0)
static volatile uint32_t *flag_host; static CUdeviceptr flag_dev; static uint32_t seq;
static void wait_flag(void) { uint32_t w = ++seq; CK(cuStreamWriteValue32(0, flag_dev, w, 0)); while (*flag_host != w) {} __atomic_thread_fence(__ATOMIC_ACQUIRE); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
enum { COPY, MEMSET, WRITE8, WAYS };
static const char *name[WAYS] = {"copy + flag", "memset + flag", "write64 + flag (8 B)"};
static CUdeviceptr dev; static unsigned char *pin, *back;
static void put(int way, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++) pin[i] = (unsigned char)(v + i);
    if (way == COPY) CK(cuMemcpyHtoDAsync(dev + 1, pin, n, 0));
    else if (way == MEMSET) {
        /* at offset 1: one byte, then (for 3) an aligned 16-bit word */
        CK(cuMemsetD8Async(dev + 1, pin[0], 1, 0));
        if (n == 3) { uint16_t h; memcpy(&h, pin + 1, 2); CK(cuMemsetD16Async(dev + 2, h, 1, 0)); }
    } else { uint64_t x; memcpy(&x, pin, 8); CK(cuStreamWriteValue64(0, dev + 8, x, 0)); }
    wait_flag();
}
int main(void) {
    CUdevice d; CUcontext c; CUstream other;
    CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
    CK(cuMemAlloc(&dev, 4096)); CK(cuMemsetD8(dev, 0, 4096));
    CK(cuMemHostAlloc((void **)&pin, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemHostAlloc((void **)&back, 4096, CU_MEMHOSTALLOC_PORTABLE));
    CK(cuMemHostAlloc((void **)&flag_host, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemHostGetDevicePointer(&flag_dev, (void *)flag_host, 0));
    CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    char gname[64]; cuDeviceGetName(gname, 64, d); printf("# %s\n", gname);
    /* correctness: 200 rounds each way, read back on a non-blocking stream */
    for (int way = 0; way < 2; way++) for (size_t n = 1; n <= 3; n += 2) {
        long bad = 0;
        for (int i = 0; i < 200; i++) {
            put(way, n, (unsigned char)(i * 7 + way));
            CK(cuMemcpyDtoHAsync(back, dev, 4, other)); CK(cuStreamSynchronize(other));
            for (size_t k = 0; k < n; k++) bad += back[1 + k] != (unsigned char)(i * 7 + way + k);
            bad += back[0] != 0;
        }
        printf("check %-14s %zu B: %ld wrong of 200\n", name[way], n, bad);
    }
    printf("%-24s %6s %12s %14s\n", "way", "bytes", "alone us", "+1 B back us");
    for (int rep = 0; rep < 2; rep++)
    for (int way = 0; way < WAYS; way++) for (size_t n = 1; n <= 3; n += 2) {
        if (way == WRITE8 && n == 3) continue;
        size_t nn = way == WRITE8 ? 8 : n;
        double alone[7], turn[7];
        for (int r = 0; r < 7; r++) {
            int it = 2000; double t0 = now();
            for (int i = 0; i < it; i++) put(way, nn, (unsigned char)i);
            alone[r] = (now() - t0) / it / 1e3;
            t0 = now();
            for (int i = 0; i < it; i++) { put(way, nn, (unsigned char)i); CK(cuMemcpyDtoHAsync(back, dev + 1, 1, 0)); wait_flag(); }
            turn[r] = (now() - t0) / it / 1e3;
        }
        qsort(alone, 7, sizeof(double), cmp); qsort(turn, 7, sizeof(double), cmp);
        printf("%-24s %6zu %12.2f %14.2f\n", name[way], nn, alone[3], turn[3]);
    }
    return 0;
}
