/* Where the time of a staged device message goes: the building blocks cudampi uses, timed one
 * by one in a single process (no MPI), so the ping-pong figures can be explained and the
 * staging strategy chosen from data.
 *
 *   pointer queries  cuPointerGetAttributes with 1 and 6 attributes on host (stack, small and
 *                    large malloc, pinned) and device pointers; cuCtxGetCurrent
 *   copies           device->host into pinned and pageable memory; host->device from pinned and
 *                    pageable memory, each with and without a stream synchronisation after it
 *
 * Build: cc -O2 bench/copy_paths.c -I$CUDA/include -L$CUDA/lib64 -lcuda -lcudart -o copy_paths
 * Run:   ./copy_paths [-o out.json]      (prints a table; sizes 8 B .. 4 MiB)
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define REPS 7
/* Median over REPS batches of the per-iteration time of BODY, in ns. */
#define TIME_NS(iters, BODY)                                      \
    ({                                                            \
        double r_[REPS];                                          \
        for (int rep_ = 0; rep_ < REPS; rep_++) {                 \
            double t0_ = now_ns();                                \
            for (long it_ = 0; it_ < (iters); it_++) { BODY; }    \
            r_[rep_] = (now_ns() - t0_) / (double)(iters);        \
        }                                                         \
        qsort(r_, REPS, sizeof r_[0], cmp_double);                \
        r_[REPS / 2];                                             \
    })

static void check(CUresult rc, const char *what)
{
    if (rc != CUDA_SUCCESS) {
        const char *s = "?";
        cuGetErrorName(rc, &s);
        fprintf(stderr, "copy_paths: %s failed: %s\n", what, s);
        exit(1);
    }
}

static double query_ns(const void *p, int nattr)
{
    CUpointer_attribute attrs[6] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    uint64_t v[6];
    void *data[6];
    for (int i = 0; i < 6; i++) data[i] = &v[i];
    return TIME_NS(20000, {
        memset(v, 0, sizeof v);
        cuPointerGetAttributes(nattr, attrs, data, (CUdeviceptr)(uintptr_t)p);
    });
}

int main(int argc, char **argv)
{
    const char *json = NULL;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-o") && i + 1 < argc) json = argv[++i];

    cudaSetDevice(0);
    cudaFree(0);
    const size_t maxn = 4u << 20;
    void *dev, *pinned, *pageable = malloc(maxn), *small = malloc(64), *large = malloc(maxn);
    char stackbuf[64];
    check(cuMemAlloc((CUdeviceptr *)&dev, maxn), "cuMemAlloc");
    check(cuMemHostAlloc(&pinned, maxn, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    memset(pageable, 1, maxn);
    memset(large, 1, maxn);
    memset(small, 1, 64);
    memset(stackbuf, 1, sizeof stackbuf);

    /* Which mapping holds device memory: tells whether host and device address ranges can be
     * told apart from the process's own mappings. */
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    int nv = 0;
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
        if (strstr(line, "nvidia")) nv++;
        if ((uintptr_t)dev >= lo && (uintptr_t)dev < hi) printf("device %p in mapping: %s", dev, line);
        if ((uintptr_t)pinned >= lo && (uintptr_t)pinned < hi) printf("pinned %p in mapping: %s", pinned, line);
    }
    if (maps) fclose(maps);
    printf("%d mappings name an nvidia device file\n\n", nv);

    FILE *js = json ? fopen(json, "w") : NULL;
    if (js) fprintf(js, "{\n  \"queries_ns\": {");

    printf("pointer queries (ns per call, median of %d batches)\n", REPS);
    struct { const char *name; const void *p; } q[] = {
        {"stack", stackbuf}, {"malloc_64B", small}, {"malloc_4MiB", large}, {"pinned", pinned}, {"device", dev}};
    for (unsigned i = 0; i < sizeof q / sizeof q[0]; i++) {
        double one = query_ns(q[i].p, 1), six = query_ns(q[i].p, 6);
        printf("  %-12s 1 attribute %7.1f   6 attributes %7.1f\n", q[i].name, one, six);
        if (js) fprintf(js, "%s\n    \"%s\": {\"one\": %.1f, \"six\": %.1f}", i ? "," : "", q[i].name, one, six);
    }
    /* Other ways to ask about a large malloc block (memory the driver does not know). */
    {
        unsigned int mt = 0;
        CUdeviceptr base;
        size_t sz;
        struct cudaPointerAttributes pa;
        double single = TIME_NS(20000, cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)large));
        double range = TIME_NS(20000, cuMemGetAddressRange(&base, &sz, (CUdeviceptr)(uintptr_t)large));
        double rt = TIME_NS(20000, cudaPointerGetAttributes(&pa, large));
        printf("  malloc_4MiB   cuPointerGetAttribute %7.1f   cuMemGetAddressRange %7.1f   cudaPointerGetAttributes %7.1f\n",
               single, range, rt);
    }
    CUcontext cur;
    double getcur = TIME_NS(100000, cuCtxGetCurrent(&cur));
    printf("  cuCtxGetCurrent %7.1f\n", getcur);
    if (js) fprintf(js, ",\n    \"ctx_get_current\": %.1f\n  },\n  \"copies_us\": [", getcur);

    printf("\ncopies (us per call)\n%10s %10s %10s %10s %10s %12s %12s %14s\n", "bytes", "DtoH pin", "DtoH page",
           "HtoD pin", "HtoD page", "HtoD page+sy", "HtoDAsync+sy", "DtoHAsync+sy");
    int first = 1;
    for (size_t n = 8; n <= maxn; n *= 4) {
        long it = n <= 65536 ? 2000 : 200;
        double d2h_pin = TIME_NS(it, check(cuMemcpyDtoH(pinned, (CUdeviceptr)(uintptr_t)dev, n), "DtoH")) / 1e3;
        double d2h_page = TIME_NS(it, check(cuMemcpyDtoH(pageable, (CUdeviceptr)(uintptr_t)dev, n), "DtoH")) / 1e3;
        double h2d_pin = TIME_NS(it, check(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dev, pinned, n), "HtoD")) / 1e3;
        double h2d_page = TIME_NS(it, check(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dev, pageable, n), "HtoD")) / 1e3;
        cuStreamSynchronize(0);
        double h2d_page_sync = TIME_NS(it, {
            check(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dev, pageable, n), "HtoD");
            check(cuStreamSynchronize(0), "sync");
        }) / 1e3;
        double h2d_async = TIME_NS(it, {
            check(cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dev, pinned, n, 0), "HtoDAsync");
            check(cuStreamSynchronize(0), "sync");
        }) / 1e3;
        double d2h_async = TIME_NS(it, {
            check(cuMemcpyDtoHAsync(pinned, (CUdeviceptr)(uintptr_t)dev, n, 0), "DtoHAsync");
            check(cuStreamSynchronize(0), "sync");
        }) / 1e3;
        printf("%10zu %10.2f %10.2f %10.2f %10.2f %12.2f %12.2f %14.2f\n", n, d2h_pin, d2h_page, h2d_pin, h2d_page,
               h2d_page_sync, h2d_async, d2h_async);
        if (js)
            fprintf(js,
                    "%s\n    {\"bytes\": %zu, \"dtoh_pinned\": %.3f, \"dtoh_pageable\": %.3f, \"htod_pinned\": %.3f, "
                    "\"htod_pageable\": %.3f, \"htod_pageable_sync\": %.3f, \"htod_async_sync\": %.3f, "
                    "\"dtoh_async_sync\": %.3f}",
                    first ? "" : ",", n, d2h_pin, d2h_page, h2d_pin, h2d_page, h2d_page_sync, h2d_async, d2h_async);
        first = 0;
    }
    if (js) {
        fprintf(js, "\n  ]\n}\n");
        fclose(js);
    }
    return 0;
}
