/* Shared helpers for the cudampi C tests (tests/c/NAME.c).
 *
 * Every test program:
 *   - includes this header FIRST (it defines _GNU_SOURCE for RTLD_DEFAULT/RTLD_NOLOAD);
 *   - calls test_init(&argc, &argv) (or test_init_thread) instead of MPI_Init;
 *   - counts failures with CHECK(cond, fmt, ...) / check_bytes(...);
 *   - ends with `return report_and_finalize();`, which reduces the failure counts, prints
 *     one `PASS <test>` or `FAIL <test>` line on rank 0, finalizes MPI and gives the exit code.
 *
 * Memory kinds: mem_alloc(kind, bytes) with MEM_HOST (malloc), MEM_DEVICE (cudaMalloc),
 * MEM_MANAGED (cudaMallocManaged), MEM_PINNED (cudaMallocHost), MEM_POOL (cudaMallocAsync on
 * the legacy default stream + sync), MEM_REGISTERED (malloc + cudaHostRegister) and MEM_VMM
 * (driver API cuMemCreate/cuMemAddressReserve/cuMemMap/cuMemSetAccess). mem_put/mem_get copy
 * between a host buffer and memory of any kind (cudaMemcpy for device-side kinds, memcpy for
 * host-side kinds); they accept interior pointers of a mem_alloc'ed block.
 *
 * Environment:
 *   CUDAMPI_TEST_MEM=host        every kind is plain malloc and no CUDA function is called:
 *                                runs a test on a plain MPI without the shim to prove its logic.
 *   CUDAMPI_TEST_GPU_PER_RANK=1  test_init selects GPU (rank % device count).
 *
 * A test that must not reference CUDA at all (host_only.c) defines COMMON_NO_CUDA before
 * including this header; then only MEM_HOST exists.
 */
#ifndef CUDAMPI_TEST_COMMON_H
#define CUDAMPI_TEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef COMMON_NO_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#endif

#if defined(__GNUC__)
#define T_UNUSED __attribute__((unused))
#define T_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define T_UNUSED
#define T_PRINTF(a, b)
#endif

/* ------------------------------------------------------------------------------------------ */
/* global state                                                                               */

static int t_rank = -1, t_size = 0;
static int t_failures = 0;      /* failed checks on this rank */
static int t_host_mode = 0;     /* CUDAMPI_TEST_MEM=host */
#define T_MAX_PRINTED_FAILURES 40

T_UNUSED static void t_vfail(const char *file, int line, const char *fmt, va_list ap)
{
    t_failures++;
    if (t_failures > T_MAX_PRINTED_FAILURES) {
        if (t_failures == T_MAX_PRINTED_FAILURES + 1)
            fprintf(stderr, "FAIL rank %d: (further failures not printed)\n", t_rank);
        return;
    }
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "FAIL rank %d: %s:%d %s\n", t_rank, base, line, msg);
    fflush(stderr);
}

T_UNUSED T_PRINTF(3, 4) static int t_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t_vfail(file, line, fmt, ap);
    va_end(ap);
    return 0;
}

/* CHECK(cond, fmt, ...): count (and print) a failure when cond is false; evaluates to cond. */
#define CHECK(cond, fmt, ...)                                                                   \
    ((cond) ? 1                                                                                 \
            : t_fail(__FILE__, __LINE__, "check `%s` failed: " fmt, #cond, ##__VA_ARGS__))

/* note(...): an informational line (not a failure). */
T_UNUSED T_PRINTF(1, 2) static void note(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "note rank %d: %s\n", t_rank, msg);
    fflush(stderr);
}

/* Fatal: a test cannot continue (setup failed). Counts as failure; aborts all ranks. */
T_UNUSED T_PRINTF(3, 4) static void t_die(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t_vfail(file, line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL rank %d: aborting\n", t_rank);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}
#define DIE(...) t_die(__FILE__, __LINE__, __VA_ARGS__)

/* MPI_CHECK(call): the call must return MPI_SUCCESS (counted failure otherwise). */
#define MPI_CHECK(call)                                                                         \
    do {                                                                                        \
        int rc_ = (call);                                                                       \
        if (rc_ != MPI_SUCCESS) {                                                               \
            char es_[MPI_MAX_ERROR_STRING];                                                     \
            int el_ = 0;                                                                        \
            es_[0] = 0;                                                                         \
            MPI_Error_string(rc_, es_, &el_);                                                   \
            t_fail(__FILE__, __LINE__, "%s returned %d (%s)", #call, rc_, es_);                 \
        }                                                                                       \
    } while (0)

#ifndef COMMON_NO_CUDA
#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        cudaError_t ce_ = (call);                                                               \
        if (ce_ != cudaSuccess)                                                                 \
            DIE("%s returned %d (%s)", #call, (int)ce_, cudaGetErrorString(ce_));              \
    } while (0)
#define CU_CHECK(call)                                                                          \
    do {                                                                                        \
        CUresult cr_ = (call);                                                                  \
        if (cr_ != CUDA_SUCCESS)                                                                \
            DIE("%s returned CUresult %d", #call, (int)cr_);                                    \
    } while (0)
#endif

/* ------------------------------------------------------------------------------------------ */
/* environment probes                                                                         */

/* The shim exports cudampi_version(); when it is loaded (preload or link) this is non-NULL. */
T_UNUSED static int shim_loaded(void)
{
    return dlsym(RTLD_DEFAULT, "cudampi_version") != NULL;
}

T_UNUSED static int host_mode(void) { return t_host_mode; }

/* Does the MPI library itself (the object defining MPI_Comm_rank) have `name`? */
T_UNUSED static int library_has(const char *name)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Comm_rank");
    if (!sym || !dladdr(sym, &di) || !di.dli_fname) return 0;
    void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_NOW);
    int has = h && dlsym(h, name);
    if (h) dlclose(h);
    return has;
}

T_UNUSED static const char *t_env(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return (v && *v) ? v : dflt;
}

/* First line of MPI_Get_library_version, for notes. */
T_UNUSED static const char *mpi_library_name(void)
{
    static char buf[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    if (!buf[0]) {
        MPI_Get_library_version(buf, &len);
        buf[MPI_MAX_LIBRARY_VERSION_STRING] = 0;
        char *nl = strchr(buf, '\n');
        if (nl) *nl = 0;
        nl = strchr(buf, ',');
        if (nl && nl - buf > 12) *nl = 0;
        for (char *c = buf; *c; c++)
            if (*c == '\t') *c = ' ';
    }
    return buf;
}

T_UNUSED static int test_device_count(void)
{
#ifndef COMMON_NO_CUDA
    if (!t_host_mode) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
        return n;
    }
#endif
    return 0;
}

static void t_after_init(void)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    const char *m = getenv("CUDAMPI_TEST_MEM");
    t_host_mode = (m && strcmp(m, "host") == 0);
    if (t_rank == 0)
        fprintf(stderr, "note: %s: shim %s, memory %s, %d ranks, %s\n",
                program_invocation_short_name, shim_loaded() ? "loaded" : "not loaded",
                t_host_mode ? "host-mode (CUDAMPI_TEST_MEM=host)" : "CUDA", t_size,
                mpi_library_name());
#ifndef COMMON_NO_CUDA
    if (!t_host_mode && strcmp(t_env("CUDAMPI_TEST_GPU_PER_RANK", "0"), "1") == 0) {
        int n = 0;
        CUDA_CHECK(cudaGetDeviceCount(&n));
        if (n > 0) CUDA_CHECK(cudaSetDevice(t_rank % n));
    }
#endif
}

T_UNUSED static void test_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    t_after_init();
}

/* Returns the provided thread level. */
T_UNUSED static int test_init_thread(int *argc, char ***argv, int required)
{
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, required, &provided);
    t_after_init();
    return provided;
}

#define report_and_finalize() t_report_and_finalize(__FILE__)
T_UNUSED static int t_report_and_finalize(const char *file)
{
    int total = 0;
    MPI_Allreduce(&t_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    char *dot = strrchr(name, '.');
    if (dot) *dot = 0;
    if (t_rank == 0) {
        if (total)
            printf("FAIL %s (%d failed checks; shim %s, %s memory, %d ranks, %s)\n", name, total,
                   shim_loaded() ? "loaded" : "not loaded", t_host_mode ? "host-mode" : "device",
                   t_size, mpi_library_name());
        else
            printf("PASS %s\n", name);
        fflush(stdout);
    }
    MPI_Finalize();
    return total ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* patterns                                                                                   */

#define POISON_BYTE 0xA5

static inline uint64_t t_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Data pattern byte: values 1..127 (never zero, never the poison, never a gap value). */
static inline unsigned char pattern_byte(int rank, int seed, size_t i)
{
    uint64_t h = t_mix64(t_mix64(((uint64_t)(uint32_t)rank << 32) ^ (uint32_t)seed) + (i >> 3));
    return (unsigned char)(1 + ((h >> (8 * (i & 7))) & 0xff) % 127);
}

/* Fill a HOST buffer with the (rank, seed) pattern; byte i depends on (rank, seed, i). */
T_UNUSED static void pattern_fill(void *buf, size_t n, int rank, int seed)
{
    unsigned char *b = (unsigned char *)buf;
    uint64_t k = t_mix64(((uint64_t)(uint32_t)rank << 32) ^ (uint32_t)seed);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t h = t_mix64(k + (i >> 3));
        for (size_t j = 0; j < 8 && i + j < n; j++)
            b[i + j] = (unsigned char)(1 + ((h >> (8 * j)) & 0xff) % 127);
    }
}

/* Gap pattern byte: values 0x80..0xFE except the poison 0xA5: disjoint from data patterns. */
static inline unsigned char gap_byte(int seed, size_t i)
{
    uint64_t h = t_mix64(t_mix64(0xC0FFEEull ^ (uint32_t)seed) + i);
    unsigned char v = (unsigned char)(0x80 + (h & 0xff) % 0x7f);
    return v == POISON_BYTE ? (unsigned char)(POISON_BYTE + 1) : v;
}

T_UNUSED static void gap_fill(void *buf, size_t n, int seed)
{
    unsigned char *b = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++) b[i] = gap_byte(seed, i);
}

T_UNUSED static void poison_fill(void *buf, size_t n) { memset(buf, POISON_BYTE, n); }

/* Compare n bytes; on mismatch record ONE failure naming the first differing offset and the
 * number of differing bytes. Returns 1 when equal. */
T_UNUSED T_PRINTF(6, 7) static int t_check_bytes(const char *file, int line, const void *got,
                                                const void *exp, size_t n, const char *fmt, ...)
{
    const unsigned char *g = (const unsigned char *)got, *e = (const unsigned char *)exp;
    if (n == 0 || memcmp(g, e, n) == 0) return 1;
    size_t first = (size_t)-1, last = 0, bad = 0;
    for (size_t i = 0; i < n; i++)
        if (g[i] != e[i]) {
            if (first == (size_t)-1) first = i;
            last = i;
            bad++;
        }
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    t_fail(file, line,
           "%s: %zu of %zu bytes differ (first at %zu: got 0x%02x expected 0x%02x%s; last at %zu)",
           what, bad, n, first, g[first], e[first],
           g[first] == POISON_BYTE ? " = poison, never written" : "", last);
    return 0;
}
#define check_bytes(got, exp, n, ...) t_check_bytes(__FILE__, __LINE__, got, exp, n, __VA_ARGS__)

/* Check that n bytes all equal byte value v. */
#define check_all(got, v, n, ...)                                                               \
    do {                                                                                        \
        size_t n_ = (n);                                                                        \
        unsigned char *e_ = (unsigned char *)malloc(n_ ? n_ : 1);                               \
        memset(e_, (v), n_);                                                                    \
        t_check_bytes(__FILE__, __LINE__, got, e_, n_, __VA_ARGS__);                            \
        free(e_);                                                                               \
    } while (0)

/* Check that n bytes of p (device or host memory) hold rank's pattern for seed. */
#define check_pattern(p, n, rank, seed, ...)                                                    \
    do {                                                                                        \
        size_t n_ = (n);                                                                        \
        unsigned char *want_ = pattern_new(n_, (rank), (seed)), *have_ = mem_fetch((p), n_);     \
        t_check_bytes(__FILE__, __LINE__, have_, want_, n_, __VA_ARGS__);                       \
        free(want_);                                                                            \
        free(have_);                                                                            \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* statuses                                                                                   */

/* Put recognisable garbage in a status before a call. */
T_UNUSED static void status_init(MPI_Status *st)
{
    memset(st, 0x5A, sizeof *st);
    st->MPI_SOURCE = -777;
    st->MPI_TAG = -777;
    st->MPI_ERROR = 424242;
}

T_UNUSED static int status_count(const MPI_Status *st, MPI_Datatype dt)
{
    int c = -999;
    MPI_Get_count(st, dt, &c);
    return c;
}

/* Compare two statuses (host run vs device run): SOURCE, TAG, ERROR field, count, cancelled. */
#define check_status_same(a, b, dt, ...) t_check_status_same(__FILE__, __LINE__, a, b, dt, __VA_ARGS__)
T_UNUSED T_PRINTF(6, 7) static int t_check_status_same(const char *file, int line,
                                                      const MPI_Status *a, const MPI_Status *b,
                                                      MPI_Datatype dt, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int ca = status_count(a, dt), cb = status_count(b, dt);
    int xa = -1, xb = -1;
    MPI_Test_cancelled(a, &xa);
    MPI_Test_cancelled(b, &xb);
    if (a->MPI_SOURCE != b->MPI_SOURCE || a->MPI_TAG != b->MPI_TAG ||
        a->MPI_ERROR != b->MPI_ERROR || ca != cb || xa != xb) {
        t_fail(file, line,
               "%s: status differs from the host run: source %d/%d tag %d/%d error %d/%d "
               "count %d/%d cancelled %d/%d (host/other)",
               what, a->MPI_SOURCE, b->MPI_SOURCE, a->MPI_TAG, b->MPI_TAG, a->MPI_ERROR,
               b->MPI_ERROR, ca, cb, xa, xb);
        return 0;
    }
    return 1;
}

/* Check a status against expected source/tag/count (count in units of dt). */
#define check_status(st, dt, src, tag, count, ...)                                              \
    t_check_status(__FILE__, __LINE__, st, dt, src, tag, count, __VA_ARGS__)
T_UNUSED T_PRINTF(8, 9) static int t_check_status(const char *file, int line, const MPI_Status *st,
                                                 MPI_Datatype dt, int src, int tag, int count,
                                                 const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int c = status_count(st, dt);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || c != count) {
        t_fail(file, line, "%s: status source %d tag %d count %d, expected %d %d %d", what,
               st->MPI_SOURCE, st->MPI_TAG, c, src, tag, count);
        return 0;
    }
    return 1;
}

T_UNUSED static int error_class(int rc)
{
    int cls = -1;
    if (rc == MPI_SUCCESS) return MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls;
}

T_UNUSED static const char *error_name(int cls)
{
    static char buf[8][MPI_MAX_ERROR_STRING + 16];
    static int slot;
    char *b = buf[slot++ & 7];
    int len = 0;
    char s[MPI_MAX_ERROR_STRING];
    s[0] = 0;
    if (MPI_Error_string(cls, s, &len) != MPI_SUCCESS) strcpy(s, "?");
    snprintf(b, MPI_MAX_ERROR_STRING + 16, "%d (%.*s)", cls, 60, s);
    return b;
}

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_ISENDRECV 1 /* Open MPI 5 declares MPI_Isendrecv although MPI_VERSION is 3 */

/* Whether the library fills in MPI_Isendrecv's status (MPICH 4.0.2 and 5.0 do not: the status
 * keeps what an earlier receive left): host buffers exchanged with rank 1 - t_rank on `comm`;
 * both ranks get the same answer. */
T_UNUSED static int isendrecv_sets_status(MPI_Comm comm)
{
    int a[3] = {1, 2, 3}, b[3], ok, all;
    MPI_Request q;
    MPI_Status st;
    MPI_CHECK(MPI_Sendrecv(a, 3, MPI_INT, 1 - t_rank, 9, b, 3, MPI_INT, 1 - t_rank, 9, comm, &st));
    status_init(&st);
    MPI_CHECK(MPI_Isendrecv(a, 2, MPI_INT, 1 - t_rank, 10 + t_rank, b, 3, MPI_INT, 1 - t_rank, 11 - t_rank, comm, &q));
    MPI_CHECK(MPI_Wait(&q, &st));
    ok = st.MPI_SOURCE == 1 - t_rank && st.MPI_TAG == 11 - t_rank && status_count(&st, MPI_INT) == 2;
    MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm));
    return all;
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* memory kinds                                                                               */

enum mem_kind {
    MEM_HOST = 0,
    MEM_DEVICE,
    MEM_MANAGED,
    MEM_PINNED,
    MEM_POOL,
    MEM_REGISTERED,
    MEM_VMM,
    MEM_NKINDS
};

T_UNUSED static const char *mem_kind_name(int kind)
{
    static const char *names[] = {"host", "device", "managed", "pinned", "pool", "registered", "vmm"};
    return (kind >= 0 && kind < MEM_NKINDS) ? names[kind] : "?";
}

/* Short placement letter: H for host-side kinds, D for device-side ones. */
T_UNUSED static int mem_kind_is_device(int kind)
{
    return kind == MEM_DEVICE || kind == MEM_MANAGED || kind == MEM_POOL || kind == MEM_VMM;
}

struct t_alloc {
    char *base;
    size_t bytes;   /* usable bytes */
    size_t mapped;  /* VMM: reserved/mapped size */
    int kind;       /* requested kind */
    int real_kind;  /* MEM_HOST in host mode */
    int device;     /* device current at allocation (CUDA kinds) */
    unsigned long long handle;
    int in_use;
};
#define T_MAX_ALLOCS 1024
static struct t_alloc t_allocs[T_MAX_ALLOCS];

static struct t_alloc *t_find(const void *p)
{
    const char *c = (const char *)p;
    for (int i = 0; i < T_MAX_ALLOCS; i++)
        if (t_allocs[i].in_use && c >= t_allocs[i].base &&
            (c < t_allocs[i].base + t_allocs[i].bytes || c == t_allocs[i].base))
            return &t_allocs[i];
    return NULL;
}

/* Allocate; returns NULL (with a note) when the kind is not available. Never zero bytes. */
T_UNUSED static void *mem_try_alloc(int kind, size_t bytes)
{
    size_t n = bytes ? bytes : 1;
    int slot = -1;
    for (int i = 0; i < T_MAX_ALLOCS; i++)
        if (!t_allocs[i].in_use) {
            slot = i;
            break;
        }
    if (slot < 0) DIE("too many live allocations");
    struct t_alloc *a = &t_allocs[slot];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->bytes = n;
    a->real_kind = t_host_mode ? MEM_HOST : kind;
    a->device = 0;
#ifndef COMMON_NO_CUDA
    if (a->real_kind != MEM_HOST && cudaGetDevice(&a->device) != cudaSuccess) a->device = 0;
#endif
    void *p = NULL;
    switch (a->real_kind) {
    case MEM_HOST:
        p = malloc(n);
        break;
#ifndef COMMON_NO_CUDA
    case MEM_DEVICE:
        if (cudaMalloc(&p, n) != cudaSuccess) p = NULL;
        break;
    case MEM_MANAGED:
        if (cudaMallocManaged(&p, n, cudaMemAttachGlobal) != cudaSuccess) p = NULL;
        break;
    case MEM_PINNED:
        if (cudaMallocHost(&p, n) != cudaSuccess) p = NULL;
        break;
    case MEM_POOL:
        if (cudaMallocAsync(&p, n, (cudaStream_t)0) != cudaSuccess ||
            cudaStreamSynchronize((cudaStream_t)0) != cudaSuccess)
            p = NULL;
        break;
    case MEM_REGISTERED:
        p = malloc(n);
        if (p && cudaHostRegister(p, n, cudaHostRegisterDefault) != cudaSuccess) {
            free(p);
            p = NULL;
        }
        break;
    case MEM_VMM: {
        int dev = 0;
        CUdevice cudev;
        CUmemAllocationProp prop;
        size_t gran = 0;
        CUdeviceptr dp = 0;
        CUmemGenericAllocationHandle h = 0;
        CUmemAccessDesc acc;
        if (cudaGetDevice(&dev) != cudaSuccess || cuInit(0) != CUDA_SUCCESS ||
            cuDeviceGet(&cudev, dev) != CUDA_SUCCESS)
            break;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = (int)cudev;
        if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
                CUDA_SUCCESS ||
            gran == 0)
            break;
        size_t sz = (n + gran - 1) / gran * gran;
        if (cuMemCreate(&h, sz, &prop, 0) != CUDA_SUCCESS) break;
        if (cuMemAddressReserve(&dp, sz, gran, 0, 0) != CUDA_SUCCESS) {
            cuMemRelease(h);
            break;
        }
        if (cuMemMap(dp, sz, 0, h, 0) != CUDA_SUCCESS) {
            cuMemAddressFree(dp, sz);
            cuMemRelease(h);
            break;
        }
        memset(&acc, 0, sizeof acc);
        acc.location = prop.location;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (cuMemSetAccess(dp, sz, &acc, 1) != CUDA_SUCCESS) {
            cuMemUnmap(dp, sz);
            cuMemAddressFree(dp, sz);
            cuMemRelease(h);
            break;
        }
        a->mapped = sz;
        a->handle = (unsigned long long)h;
        p = (void *)(uintptr_t)dp;
        break;
    }
#endif
    default:
        p = NULL;
    }
    if (!p) {
        note("could not allocate %zu bytes of %s memory", bytes, mem_kind_name(kind));
        return NULL;
    }
    a->base = (char *)p;
    a->in_use = 1;
    return p;
}

T_UNUSED static void *mem_alloc(int kind, size_t bytes)
{
    void *p = mem_try_alloc(kind, bytes);
    if (!p) DIE("mem_alloc(%s, %zu) failed", mem_kind_name(kind), bytes);
    return p;
}

T_UNUSED static void mem_free(void *p)
{
    if (!p) return;
    struct t_alloc *a = t_find(p);
    if (!a || a->base != (char *)p) DIE("mem_free(%p): not a mem_alloc'ed block", p);
    switch (a->real_kind) {
    case MEM_HOST:
        free(p);
        break;
#ifndef COMMON_NO_CUDA
    case MEM_DEVICE:
    case MEM_MANAGED: {
        int cur = a->device;
        CUDA_CHECK(cudaGetDevice(&cur));
        if (cur != a->device) CUDA_CHECK(cudaSetDevice(a->device));
        CUDA_CHECK(cudaFree(p));
        if (cur != a->device) CUDA_CHECK(cudaSetDevice(cur));
        break;
    }
    case MEM_PINNED:
        CUDA_CHECK(cudaFreeHost(p));
        break;
    case MEM_POOL:
        CUDA_CHECK(cudaFreeAsync(p, (cudaStream_t)0));
        CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)0));
        break;
    case MEM_REGISTERED:
        CUDA_CHECK(cudaHostUnregister(p));
        free(p);
        break;
    case MEM_VMM:
        CU_CHECK(cuMemUnmap((CUdeviceptr)(uintptr_t)p, a->mapped));
        CU_CHECK(cuMemAddressFree((CUdeviceptr)(uintptr_t)p, a->mapped));
        CU_CHECK(cuMemRelease((CUmemGenericAllocationHandle)a->handle));
        break;
#endif
    }
    a->in_use = 0;
}

/* Kind of the block holding p (MEM_HOST for pointers this header did not allocate). */
T_UNUSED static int mem_real_kind(const void *p)
{
    struct t_alloc *a = t_find(p);
    return a ? a->real_kind : MEM_HOST;
}

#ifndef COMMON_NO_CUDA
/* cudaMemcpy with the device that owns the device-side block current (a block allocated on
 * another device than the current one is copied with its own device made current). */
static void t_dev_copy(struct t_alloc *a, void *dst, const void *src, size_t n,
                       enum cudaMemcpyKind kind)
{
    int cur = a->device;
    CUDA_CHECK(cudaGetDevice(&cur));
    if (cur != a->device) CUDA_CHECK(cudaSetDevice(a->device));
    CUDA_CHECK(cudaMemcpy(dst, src, n, kind));
    if (cur != a->device) CUDA_CHECK(cudaSetDevice(cur));
}
#endif

/* Copy n bytes from host memory src into memory dst of any kind. */
T_UNUSED static void mem_put(void *dst, const void *src, size_t n)
{
    if (n == 0) return;
    struct t_alloc *a = t_find(dst);
#ifndef COMMON_NO_CUDA
    if (a && mem_kind_is_device(a->real_kind)) {
        t_dev_copy(a, dst, src, n, cudaMemcpyHostToDevice);
        return;
    }
#endif
    (void)a;
    memcpy(dst, src, n);
}

/* Copy n bytes from memory src of any kind into host memory dst. */
T_UNUSED static void mem_get(void *dst, const void *src, size_t n)
{
    if (n == 0) return;
    struct t_alloc *a = t_find(src);
#ifndef COMMON_NO_CUDA
    if (a && mem_kind_is_device(a->real_kind)) {
        t_dev_copy(a, dst, src, n, cudaMemcpyDeviceToHost);
        return;
    }
#endif
    (void)a;
    memcpy(dst, src, n);
}

T_UNUSED static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) DIE("malloc(%zu) failed", n);
    return p;
}

/* Fill memory of any kind with the data pattern / the poison / the gap pattern. */
T_UNUSED static void mem_pattern(void *p, size_t n, int rank, int seed)
{
    unsigned char *h = (unsigned char *)xmalloc(n);
    pattern_fill(h, n, rank, seed);
    mem_put(p, h, n);
    free(h);
}
T_UNUSED static void mem_poison(void *p, size_t n)
{
    unsigned char *h = (unsigned char *)xmalloc(n);
    poison_fill(h, n);
    mem_put(p, h, n);
    free(h);
}
T_UNUSED static void mem_gap(void *p, size_t n, int seed)
{
    unsigned char *h = (unsigned char *)xmalloc(n);
    gap_fill(h, n, seed);
    mem_put(p, h, n);
    free(h);
}
/* Host copy of n bytes of memory of any kind (free() it). */
T_UNUSED static unsigned char *mem_fetch(const void *p, size_t n)
{
    unsigned char *h = (unsigned char *)xmalloc(n);
    mem_get(h, p, n);
    return h;
}

/* Expected pattern bytes as a fresh host buffer (free() it). */
T_UNUSED static unsigned char *pattern_new(size_t n, int rank, int seed)
{
    unsigned char *h = (unsigned char *)xmalloc(n);
    pattern_fill(h, n, rank, seed);
    return h;
}

T_UNUSED static size_t type_size(MPI_Datatype dt)
{
    int s = 0;
    MPI_Type_size(dt, &s);
    return (size_t)s;
}

T_UNUSED static const char *type_name(MPI_Datatype dt)
{
    static char buf[4][MPI_MAX_OBJECT_NAME];
    static int slot;
    char *b = buf[slot++ & 3];
    int len = 0;
    b[0] = 0;
    MPI_Type_get_name(dt, b, &len);
    if (!b[0]) strcpy(b, "derived");
    return b;
}

/* ------------------------------------------------------------------------------------------ */
/* traces: record what a sequence of operations produced (received bytes, statuses, error      */
/* classes) on host buffers, then the same sequence on other memory kinds, and compare.        */

struct trace_rec {
    char label[256];
    unsigned char *bytes; /* owned */
    size_t n;
    int has_status;
    MPI_Status st;
    MPI_Datatype dt;
    int err_class;
};
struct trace {
    struct trace_rec *r;
    int n, cap;
};

/* Record a result. bytes are copied (host memory); st may be NULL; rc is an MPI return code. */
T_UNUSED static void trace_add(struct trace *t, const char *label, const void *bytes, size_t n,
                               const MPI_Status *st, MPI_Datatype dt, int rc)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 32;
        t->r = (struct trace_rec *)realloc(t->r, (size_t)t->cap * sizeof *t->r);
        if (!t->r) DIE("out of memory");
    }
    struct trace_rec *r = &t->r[t->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->bytes = (unsigned char *)xmalloc(n);
    if (n) memcpy(r->bytes, bytes, n);
    r->n = n;
    if (st) {
        r->has_status = 1;
        r->st = *st;
        r->dt = dt;
    }
    r->err_class = error_class(rc);
}

/* Record the n bytes of memory p of any kind. */
T_UNUSED static void trace_mem(struct trace *t, const char *label, const void *p, size_t n,
                               const MPI_Status *st, MPI_Datatype dt, int rc)
{
    unsigned char *h = mem_fetch(p, n);
    trace_add(t, label, h, n, st, dt, rc);
    free(h);
}

T_UNUSED static void trace_free(struct trace *t)
{
    for (int i = 0; i < t->n; i++) free(t->r[i].bytes);
    free(t->r);
    memset(t, 0, sizeof *t);
}

/* Compare a run against the host reference run; `what` names the run (e.g. "D->D"). */
T_UNUSED static int trace_compare(const struct trace *ref, const struct trace *got, const char *what)
{
    int ok = 1;
    if (!CHECK(ref->n == got->n, "%s: %d results, host run had %d", what, got->n, ref->n)) return 0;
    for (int i = 0; i < ref->n; i++) {
        const struct trace_rec *a = &ref->r[i], *b = &got->r[i];
        if (!CHECK(strcmp(a->label, b->label) == 0, "%s: result %d is '%s', host run '%s'", what,
                   i, b->label, a->label)) {
            ok = 0;
            continue;
        }
        if (!CHECK(a->err_class == b->err_class, "%s: %s: error class %s, host run %s", what,
                   a->label, error_name(b->err_class), error_name(a->err_class)))
            ok = 0;
        if (!CHECK(a->n == b->n, "%s: %s: %zu bytes, host run %zu", what, a->label, b->n, a->n))
            ok = 0;
        else if (!check_bytes(b->bytes, a->bytes, a->n, "%s: %s vs host run", what, a->label))
            ok = 0;
        if (a->has_status &&
            !check_status_same(&a->st, &b->st, a->dt, "%s: %s", what, a->label))
            ok = 0;
    }
    return ok;
}

#endif /* CUDAMPI_TEST_COMMON_H */
