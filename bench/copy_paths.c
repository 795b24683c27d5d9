/* Where the time of a staged device message goes: the building blocks cudampi uses, timed one
 * by one in a single process (no MPI), so the ping-pong figures can be explained and the
 * staging strategy chosen from data.
 *
 *   pointer queries  cuPointerGetAttributes with 1 and 6 attributes on host (stack, small and
 *                    large malloc, pinned) and device pointers; cuCtxGetCurrent
 *   copies           device->host into pinned and pageable memory; host->device from pinned and
 *                    pageable memory, each with and without a stream synchronisation after it
 *   completion       ways to learn that an 8-byte copy on the legacy stream is done: the
 *                    synchronous copy, cuStreamSynchronize, polling cuStreamQuery or an event,
 *                    and polling a host word that cuStreamWriteValue32 sets after the copy
 *                    (no driver call while waiting); alone and as a ping-pong turn-around
 *   small writes     copies of 4 B to 1 KiB to the device: the copy engine against the stream's
 *                    own memory writes (cuStreamBatchMemOp or one call each) with the flag
 *   waits by size    copies of 8 B to 8 KiB each way, waited for each way above, plus a flag
 *                    that a second copy sets (4 bytes from a device ring of distinct values, so
 *                    the copy engine rather than the stream's front end writes it), checked
 *                    against a read from another, non-blocking stream
 *   kernel writes    copies of 8 B to 2 KiB to the device written by a kernel (PTX loaded at run
 *                    time): from its launch parameters, or read from mapped pinned memory
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


/* ---- completion of small copies ---- */

enum wait { WAIT_SYNC_COPY, WAIT_STREAM_SYNC, WAIT_STREAM_QUERY, WAIT_EVENT_QUERY, WAIT_EVENT_SYNC, WAIT_FLAG, WAIT_N,
            WAIT_RING = WAIT_N, WAIT_ALL };
static const char *wait_name[WAIT_ALL] = {"sync copy", "StreamSync", "spin StreamQuery", "spin EventQuery",
                                          "EventSync", "spin WriteValue flag", "spin ring-copy flag"};

static CUevent ev;
static volatile uint32_t *flag_host;
static CUdeviceptr flag_dev;
static uint32_t flag_seq;
/* RING words of device memory holding 1..RING: copying word v-1 to the flag sets it to v. */
#define RING 1024
static CUdeviceptr ring_dev;

/* Spins until the GPU has set the flag to want. */
static void spin_flag(uint32_t want)
{
    while (*flag_host != want) {}
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
}

static void wait_done(enum wait w)
{
    switch (w) {
    case WAIT_SYNC_COPY: break;
    case WAIT_STREAM_SYNC: check(cuStreamSynchronize(0), "cuStreamSynchronize"); break;
    case WAIT_STREAM_QUERY:
        while (cuStreamQuery(0) == CUDA_ERROR_NOT_READY) {}
        break;
    case WAIT_EVENT_QUERY:
        check(cuEventRecord(ev, 0), "cuEventRecord");
        while (cuEventQuery(ev) == CUDA_ERROR_NOT_READY) {}
        break;
    case WAIT_EVENT_SYNC:
        check(cuEventRecord(ev, 0), "cuEventRecord");
        check(cuEventSynchronize(ev), "cuEventSynchronize");
        break;
    case WAIT_FLAG: {
        uint32_t want = ++flag_seq;
        check(cuStreamWriteValue32(0, flag_dev, want, 0), "cuStreamWriteValue32");
        spin_flag(want);
        break;
    }
    case WAIT_RING: {
        uint32_t want = ++flag_seq % RING + 1;
        check(cuMemcpyDtoHAsync((void *)flag_host, ring_dev + 4 * (want - 1), 4, 0), "ring DtoHAsync");
        spin_flag(want);
        break;
    }
    default: break;
    }
}

static void d2h(enum wait w, void *host, CUdeviceptr dev, size_t n)
{
    if (w == WAIT_SYNC_COPY) check(cuMemcpyDtoH(host, dev, n), "DtoH");
    else check(cuMemcpyDtoHAsync(host, dev, n, 0), "DtoHAsync");
    wait_done(w);
}

static void h2d(enum wait w, CUdeviceptr dev, const void *host, size_t n)
{
    if (w == WAIT_SYNC_COPY) check(cuMemcpyHtoD(dev, host, n), "HtoD");
    else check(cuMemcpyHtoDAsync(dev, host, n, 0), "HtoDAsync");
    wait_done(w);
}

/* The received 8 bytes written by the stream itself (no copy engine), then the flag. */
static void h2d_write64(CUdeviceptr dev, const void *host)
{
    uint64_t v;
    memcpy(&v, host, 8);
    check(cuStreamWriteValue64(0, dev, v, 0), "cuStreamWriteValue64");
    wait_done(WAIT_FLAG);
}

/* How the stream writes the bytes: one cuStreamBatchMemOp of writes that each keep the default
 * fence, then the flag (cudampi's way); the same batch with the writes after the first
 * unfenced (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER); or one cuStreamWriteValue call per
 * write, unfenced, then the fenced flag. Writes are 64-bit, 32-bit for a last 4 bytes. */
enum batch { B_FENCED, B_FIRST_FENCED, B_CALLS, B_N };
static const char *batch_name[B_N] = {"batch", "first fenced", "calls"};

/* n bytes (a multiple of 4, at most 1 KiB) written by the stream's own memory writes, then
 * the flag; returns the driver's answer (the flag is waited for only when it took them all). */
static CUresult h2d_batch(CUdeviceptr dev, const void *host, size_t n, enum batch how)
{
    CUstreamBatchMemOpParams ops[130];
    unsigned k = 0;
    memset(ops, 0, sizeof(ops[0]) * ((n + 7) / 8 + 1));
    for (size_t at = 0; at < n; at += 8, k++) {
        int wide = n - at >= 8;
        struct CUstreamMemOpWriteValueParams_st *w = &ops[k].writeValue;
        w->operation = wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
        w->address = dev + at;
        if (wide)
            memcpy(&w->value64, (const char *)host + at, 8);
        else
            memcpy(&w->value, (const char *)host + at, 4);
        w->flags = how != B_FENCED && k ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER : 0;
    }
    uint32_t want = ++flag_seq;
    ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[k].writeValue.address = flag_dev;
    ops[k].writeValue.value = want;
    CUresult rc = CUDA_SUCCESS;
    if (how == B_CALLS) {
        for (unsigned i = 0; i <= k && !rc; i++) {
            struct CUstreamMemOpWriteValueParams_st *w = &ops[i].writeValue;
            rc = w->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? cuStreamWriteValue64(0, w->address, w->value64, w->flags)
                                                                : cuStreamWriteValue32(0, w->address, w->value, w->flags);
        }
    } else {
        rc = cuStreamBatchMemOp(0, k + 1, ops, 0);
    }
    if (rc != CUDA_SUCCESS) return rc;
    spin_flag(want);
    return CUDA_SUCCESS;
}

/* Copies to the device of 4 B to 1 KiB: the copy engine waited by the flag against stream
 * memory writes built each way, alone and followed by an 8-byte copy back (as an
 * MPI_Allreduce's copy back followed by the next call's copy out, or a ping-pong's
 * turn-around). A way the driver refuses at a size is named with its error. */
static void writes_study(CUdeviceptr dev, void *pinned, FILE *js)
{
    static const size_t sizes[] = {4, 8, 16, 32, 64, 256, 1024};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    CUresult refused[B_N][NS];
    long bad = 0;
    for (int b = 0; b < B_N; b++)
        for (unsigned s = 0; s < NS; s++) {
            refused[b][s] = CUDA_SUCCESS;
            for (uint32_t i = 1; i <= 20 && !refused[b][s]; i++) {
                unsigned char want[1024], got[1024];
                for (size_t x = 0; x < sizes[s]; x++) want[x] = (unsigned char)(x * 7 + i * 13 + s + (unsigned)b);
                memcpy(pinned, want, sizes[s]);
                refused[b][s] = h2d_batch(dev, pinned, sizes[s], (enum batch)b);
                memset(pinned, 0xee, sizes[s]);
                d2h(WAIT_FLAG, pinned, dev, sizes[s]);
                memcpy(got, pinned, sizes[s]);
                bad += !refused[b][s] && memcmp(got, want, sizes[s]) != 0;
            }
        }
    printf("\nsmall copies to the device (us per call; alone / followed by an 8-byte copy back); batches' data check: "
           "%ld wrong\n  %6s %15s", bad, "bytes", "copy+flag");
    for (int b = 0; b < B_N; b++) printf(" %15s", batch_name[b]);
    printf("\n");
    if (js) fprintf(js, ",\n  \"writes_us\": {\"check_wrong\": %ld, \"rows\": [", bad);
    const long it = 4000;
    for (unsigned s = 0; s < NS; s++) {
        size_t n = sizes[s];
        double c = TIME_NS(it, h2d(WAIT_FLAG, dev, pinned, n)) / 1e3;
        double ct = TIME_NS(it, { h2d(WAIT_FLAG, dev, pinned, n); d2h(WAIT_FLAG, pinned, dev, 8); }) / 1e3;
        printf("  %6zu %7.2f/%7.2f", n, c, ct);
        if (js) fprintf(js, "%s\n    {\"bytes\": %zu, \"copy_flag\": [%.3f, %.3f]", s ? "," : "", n, c, ct);
        for (int b = 0; b < B_N; b++) {
            if (refused[b][s]) {
                const char *e = "?";
                cuGetErrorName(refused[b][s], &e);
                printf(" %15.15s", e);
                if (js) fprintf(js, ", \"%s\": \"%s\"", batch_name[b], e);
                continue;
            }
            double a = TIME_NS(it, h2d_batch(dev, pinned, n, (enum batch)b)) / 1e3;
            double t = TIME_NS(it, { h2d_batch(dev, pinned, n, (enum batch)b); d2h(WAIT_FLAG, pinned, dev, 8); }) / 1e3;
            printf(" %7.2f/%7.2f", a, t);
            if (js) fprintf(js, ", \"%s\": [%.3f, %.3f]", batch_name[b], a, t);
        }
        printf("\n");
        if (js) fprintf(js, "}");
    }
    if (js) fprintf(js, "\n  ]}");
}

/* A non-blocking stream, and pinned memory it reads device bytes back into. */
#define SEEN_MAX 8192
static CUstream other;
static unsigned char *seen;

/* A way of copying n bytes from host to dev, complete on return. */
typedef void (*to_device)(int way, CUdeviceptr dev, const void *host, size_t n);

/* Of 100 copies made `way` of `copy` (sizes taken in turn, distinct bytes each time), how many
 * were not all there when another, non-blocking stream read them back right after. */
static long wrong_of_100(to_device copy, int way, CUdeviceptr dev, void *pinned, const size_t *sizes, unsigned ns)
{
    long bad = 0;
    for (uint32_t i = 1; i <= 100; i++) {
        size_t n = sizes[i % ns];
        for (size_t x = 0; x < n; x++) ((unsigned char *)pinned)[x] = (unsigned char)(x * 3 + i * 29 + (unsigned)way);
        copy(way, dev, pinned, n);
        memset(seen, 0xee, n);
        check(cuMemcpyDtoHAsync(seen, dev, n, other), "other DtoHAsync");
        check(cuStreamSynchronize(other), "other sync");
        bad += memcmp(seen, pinned, n) != 0;
    }
    return bad;
}

static void h2d_way(int w, CUdeviceptr dev, const void *host, size_t n)
{
    h2d((enum wait)w, dev, host, n);
}

/* Copies of 8 B to 8 KiB each way, waited for every way, against the recipe's pageable copies.
 * First a check that each wait on a copy to the device means the data landed. */
static void waits_by_size(CUdeviceptr dev, void *pinned, void *pageable, FILE *js)
{
    static const size_t sizes[] = {8, 32, 128, 512, 2048, SEEN_MAX};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    long bad[WAIT_ALL];
    for (int w = 0; w < WAIT_ALL; w++) bad[w] = wrong_of_100(h2d_way, w, dev, pinned, sizes, NS);
    printf("\nwaits by size (us per call); data read back on a non-blocking stream after each wait, rounds wrong of 100:");
    for (int w = 0; w < WAIT_ALL; w++) printf(" %ld", bad[w]);
    printf("\n");
    if (js) {
        fprintf(js, ",\n  \"waits_by_size_us\": {\"bytes\": [");
        for (unsigned s = 0; s < NS; s++) fprintf(js, "%s%zu", s ? ", " : "", sizes[s]);
        fprintf(js, "], \"check_wrong\": [");
        for (int w = 0; w < WAIT_ALL; w++) fprintf(js, "%s%ld", w ? ", " : "", bad[w]);
        fprintf(js, "]");
    }
    const long it = 3000;
    for (int dir = 0; dir < 2; dir++) {
        printf("  %-22s", dir ? "DtoH into pinned" : "HtoD from pinned");
        for (unsigned s = 0; s < NS; s++) printf(" %8zu", sizes[s]);
        printf("\n");
        for (int w = 0; w <= WAIT_ALL; w++) {
            const char *name = w < WAIT_ALL ? wait_name[w] : "pageable (recipe)";
            printf("  %-22s", name);
            if (js) fprintf(js, ",\n    \"%s %s\": [", dir ? "dtoh" : "htod", name);
            for (unsigned s = 0; s < NS; s++) {
                size_t n = sizes[s];
                double t;
                if (w == WAIT_ALL)
                    t = dir ? TIME_NS(it, check(cuMemcpyDtoH(pageable, dev, n), "DtoH page"))
                            : TIME_NS(it, check(cuMemcpyHtoD(dev, pageable, n), "HtoD page"));
                else
                    t = dir ? TIME_NS(it, d2h((enum wait)w, pinned, dev, n)) : TIME_NS(it, h2d((enum wait)w, dev, pinned, n));
                printf(" %8.2f", t / 1e3);
                if (js) fprintf(js, "%s%.3f", s ? ", " : "", t / 1e3);
            }
            printf("\n");
            if (js) fprintf(js, "]");
        }
    }
    if (js) fprintf(js, "\n  }");
}

/* ---- copies to the device written by a kernel ---- */

/* put_params writes its own parameter bytes (the data travels in the launch, as a stream
 * write's value does); get_mapped reads them from pinned host memory mapped for the device.
 * One thread per 8 bytes. */
static const char kernels_ptx[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry put_params(.param .u64 dst, .param .u32 n, .param .align 8 .b8 data[2048])\n"
    "{\n .reg .pred %p;\n .reg .b32 %r<3>;\n .reg .b64 %rd<8>;\n"
    " mov.u32 %r1, %tid.x;\n ld.param.u32 %r2, [n];\n setp.ge.u32 %p, %r1, %r2;\n @%p bra DONE;\n"
    " mul.wide.u32 %rd1, %r1, 8;\n mov.u64 %rd2, data;\n add.u64 %rd3, %rd2, %rd1;\n ld.param.u64 %rd4, [%rd3];\n"
    " ld.param.u64 %rd5, [dst];\n add.u64 %rd6, %rd5, %rd1;\n st.global.u64 [%rd6], %rd4;\n"
    "DONE:\n ret;\n}\n"
    ".visible .entry get_mapped(.param .u64 dst, .param .u64 src, .param .u32 n)\n"
    "{\n .reg .pred %p;\n .reg .b32 %r<3>;\n .reg .b64 %rd<8>;\n"
    " mov.u32 %r1, %tid.x;\n ld.param.u32 %r2, [n];\n setp.ge.u32 %p, %r1, %r2;\n @%p bra DONE;\n"
    " mul.wide.u32 %rd1, %r1, 8;\n ld.param.u64 %rd2, [src];\n add.u64 %rd3, %rd2, %rd1;\n ld.global.u64 %rd4, [%rd3];\n"
    " ld.param.u64 %rd5, [dst];\n add.u64 %rd6, %rd5, %rd1;\n st.global.u64 [%rd6], %rd4;\n"
    "DONE:\n ret;\n}\n";

static CUfunction k_put, k_get;
static CUdeviceptr mapped_dev;

enum kway { K_PUT_FLAG, K_PUT_SYNC, K_GET_FLAG, K_N };
static const char *kway_name[K_N] = {"params kernel + flag", "params kernel + sync", "mapped kernel + flag"};

static void h2d_kernel(int k, CUdeviceptr dev, const void *host, size_t n)
{
    unsigned words = (unsigned)(n / 8);
    if (k == K_GET_FLAG) {
        void *args[] = {&dev, &mapped_dev, &words};
        check(cuLaunchKernel(k_get, 1, 1, 1, words, 1, 1, 0, 0, args, NULL), "launch get_mapped");
    } else {
        unsigned char data[2048];
        memcpy(data, host, n);
        void *args[] = {&dev, &words, data};
        check(cuLaunchKernel(k_put, 1, 1, 1, words, 1, 1, 0, 0, args, NULL), "launch put_params");
    }
    wait_done(k == K_PUT_SYNC ? WAIT_STREAM_SYNC : WAIT_FLAG);
}

/* Copies of 8 B to 2 KiB to the device by a kernel, against the copy engine waited by the flag,
 * each way first checked as the waits are. */
static void kernel_study(CUdeviceptr dev, void *pinned, FILE *js)
{
    static const size_t sizes[] = {8, 32, 128, 512, 2048};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    CUmodule mod;
    char log[4096] = "";
    CUjit_option opt[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[] = {log, (void *)(uintptr_t)sizeof log};
    CUresult rc = cuModuleLoadDataEx(&mod, kernels_ptx, 2, opt, val);
    if (rc != CUDA_SUCCESS) {
        printf("\nkernel writes: module not loaded (%d): %s\n", rc, log);
        return;
    }
    check(cuModuleGetFunction(&k_put, mod, "put_params"), "put_params");
    check(cuModuleGetFunction(&k_get, mod, "get_mapped"), "get_mapped");
    check(cuMemHostGetDevicePointer(&mapped_dev, pinned, 0), "mapped pinned");
    long bad[K_N];
    for (int k = 0; k < K_N; k++) bad[k] = wrong_of_100(h2d_kernel, k, dev, pinned, sizes, NS);
    printf("\nkernel writes to the device (us per call); rounds wrong of 100: %ld %ld %ld\n  %-22s", bad[0], bad[1], bad[2],
           "bytes");
    for (unsigned s = 0; s < NS; s++) printf(" %8zu", sizes[s]);
    printf("\n");
    if (js) fprintf(js, ",\n  \"kernel_writes_us\": {\"check_wrong\": [%ld, %ld, %ld]", bad[0], bad[1], bad[2]);
    const long it = 3000;
    for (int k = -1; k < K_N; k++) {
        const char *name = k < 0 ? "copy + flag" : kway_name[k];
        printf("  %-22s", name);
        if (js) fprintf(js, ",\n    \"%s\": [", name);
        for (unsigned s = 0; s < NS; s++) {
            size_t n = sizes[s];
            double t = k < 0 ? TIME_NS(it, h2d(WAIT_FLAG, dev, pinned, n)) : TIME_NS(it, h2d_kernel(k, dev, pinned, n));
            printf(" %8.2f", t / 1e3);
            if (js) fprintf(js, "%s%.3f", s ? ", " : "", t / 1e3);
        }
        printf("\n");
        if (js) fprintf(js, "]");
    }
    if (js) fprintf(js, "\n  }");
    cuModuleUnload(mod);
}

static void completion_study(void *dev_, void *pinned, void *pageable, FILE *js)
{
    CUdeviceptr dev = (CUdeviceptr)(uintptr_t)dev_;
    unsigned int flags = 0;
    int memops = -1;
    CUdevice d;
    cuCtxGetFlags(&flags);
    cuCtxGetDevice(&d);
    cuDeviceGetAttribute(&memops, (CUdevice_attribute)92 /* CAN_USE_STREAM_MEM_OPS(_V1) */, d);
    printf("\ncompletion of an 8-byte copy (us per call; context flags 0x%x, sched %s; stream mem ops %d)\n", flags,
           (flags & 7) == CU_CTX_SCHED_SPIN ? "spin" : (flags & 7) == CU_CTX_SCHED_YIELD ? "yield"
           : (flags & 7) == CU_CTX_SCHED_BLOCKING_SYNC ? "blocking" : "auto", memops);
    check(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(cuMemHostAlloc((void **)&seen, SEEN_MAX, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc seen");
    void *fh;
    check(cuMemHostAlloc(&fh, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc flag");
    check(cuMemHostGetDevicePointer(&flag_dev, fh, 0), "cuMemHostGetDevicePointer");
    flag_host = fh;
    *flag_host = 0;
    {
        uint32_t ring[RING];
        for (uint32_t i = 0; i < RING; i++) ring[i] = i + 1;
        check(cuMemAlloc(&ring_dev, sizeof ring), "cuMemAlloc ring");
        check(cuMemcpyHtoD(ring_dev, ring, sizeof ring), "ring HtoD");
    }
    /* Does the flag way deliver the data? 200 rounds of distinct values both ways. */
    long bad = 0;
    for (uint32_t i = 1; i <= 200; i++) {
        uint64_t v = 0x0101010101010101ull * (i & 0xff) + i, got = 0;
        memcpy(pinned, &v, 8);
        h2d(WAIT_FLAG, dev, pinned, 8);
        memset(pinned, 0xee, 8);
        d2h(WAIT_FLAG, pinned, dev, 8);
        memcpy(&got, pinned, 8);
        if (got != v) bad++;
        v ^= 0xffff;
        memcpy(pageable, &v, 8);
        h2d_write64(dev, pageable);
        d2h(WAIT_FLAG, pinned, dev, 8);
        memcpy(&got, pinned, 8);
        if (got != v) bad++;
    }
    printf("  flag way data check: %ld of 400 rounds wrong\n", bad);
    printf("  %-22s %10s %10s %12s\n", "wait", "DtoH", "HtoD", "HtoD+DtoH");
    if (js) fprintf(js, ",\n  \"completion_us\": {\"check_wrong\": %ld", bad);
    const long it = 4000;
    for (int w = 0; w < WAIT_N; w++) {
        double a = TIME_NS(it, d2h(w, pinned, dev, 8)) / 1e3;
        double b = TIME_NS(it, h2d(w, dev, pinned, 8)) / 1e3;
        double c = TIME_NS(it, { h2d(w, dev, pinned, 8); d2h(w, pinned, dev, 8); }) / 1e3;
        printf("  %-22s %10.2f %10.2f %12.2f\n", wait_name[w], a, b, c);
        if (js) fprintf(js, ",\n    \"%s\": [%.3f, %.3f, %.3f]", wait_name[w], a, b, c);
    }
    double wv = TIME_NS(it, h2d_write64(dev, pinned)) / 1e3;
    double wvt = TIME_NS(it, { h2d_write64(dev, pinned); d2h(WAIT_FLAG, pinned, dev, 8); }) / 1e3;
    double pg = TIME_NS(it, check(cuMemcpyHtoD(dev, pageable, 8), "HtoD page")) / 1e3;
    double pgf = TIME_NS(it, { check(cuMemcpyHtoD(dev, pageable, 8), "HtoD page"); wait_done(WAIT_FLAG); }) / 1e3;
    double pgt = TIME_NS(it, { check(cuMemcpyHtoD(dev, pageable, 8), "HtoD page"); d2h(WAIT_FLAG, pinned, dev, 8); }) / 1e3;
    double rec = TIME_NS(it, { check(cuMemcpyHtoD(dev, pageable, 8), "HtoD page"); check(cuMemcpyDtoH(pageable, dev, 8), "DtoH page"); }) / 1e3;
    printf("  %-22s %10s %10.2f %12.2f\n", "WriteValue64 + flag", "", wv, wvt);
    printf("  %-22s %10s %10.2f %12.2f   (DtoH by flag)\n", "pageable HtoD + flag", "", pgf, pgt);
    printf("  %-22s %10s %10.2f %12.2f   (not waited for; the recipe's turn-around)\n", "pageable HtoD", "", pg, rec);
    if (js)
        fprintf(js, ",\n    \"write64_flag\": [null, %.3f, %.3f], \"pageable_flag\": [null, %.3f, %.3f], \"pageable\": [null, %.3f, %.3f]\n  }",
                wv, wvt, pgf, pgt, pg, rec);
    writes_study(dev, pinned, js);
    waits_by_size(dev, pinned, pageable, js);
    kernel_study(dev, pinned, js);
    cuEventDestroy(ev);
    cuStreamDestroy(other);
    cuMemFreeHost(seen);
    cuMemFree(ring_dev);
    cuMemFreeHost(fh);
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
    check(cuMemHostAlloc(&pinned, maxn, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
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
    if (js) fprintf(js, "\n  ]");
    completion_study(dev, pinned, pageable, js);
    if (js) {
        fprintf(js, "\n}\n");
        fclose(js);
    }
    return 0;
}
