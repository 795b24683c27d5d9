/* bench/rma.c -- one-sided latency and bandwidth (MPI_Put, MPI_Get) between rank 0 (origin)
 * and rank 1 (target), four ways side by side in one run, same sizes:
 *
 *   host          the window and the origin buffer in host memory (malloc): the host ceiling
 *   dev-origin    host window, origin/result buffer in device memory (cudaMalloc)
 *   dev-window    window over device memory, host origin buffer
 *   dev-both      window and origin buffer in device memory
 *
 * The device ways need cudampi (dlsym(RTLD_DEFAULT, "cudampi_version")) and are skipped
 * without it unless -f. Each size gets windows of WINDOW times that size (MPI_Win_create, disp
 * unit 1). Metrics, each a table and a JSON member:
 *
 *   put_lat, get_lat   one MPI_Put (MPI_Get) and MPI_Win_flush, in a MPI_Win_lock_all epoch;
 *                      us per operation, mean over ITERS after WARMUP
 *   acc_lat            one MPI_Accumulate (MPI_SUM of size/8 doubles) and MPI_Win_flush, likewise
 *   put_fence          MPI_Win_fence, MPI_Put, MPI_Win_fence on both ranks: the time until the
 *                      data is in the target's window memory, a device window's copy included
 *   get_fence          the same with MPI_Get
 *   put_bw, get_bw     WINDOW operations, then one MPI_Win_flush; MB/s (10^6 bytes per second);
 *                      each operation on bytes of its own at both ends (windows and origin
 *                      buffers of WINDOW times the size; before 2026-12-07, all on the same bytes)
 *
 * A device window's remote updates reach its device memory at the target's synchronisation
 * calls (here MPI_Win_fence, and MPI_Win_sync once after the passive-target loops), which the
 * flush-based figures leave out. -c checks, after each way and size, that the target's window
 * holds the last put's bytes and the origin the last get's.
 *
 * Build (stand-in driver, no GPU):
 *   mpicc -O2 bench/rma.c -o build/rma -Itests/fixture/include \
 *         -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib -lcudart -lcuda -ldl -lm
 * Build (real GPU):
 *   mpicc -O2 bench/rma.c -o build/rma -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl -lm
 * Run (Open MPI whose UCX one-sided component cannot run: add --mca osc ^ucx):
 *   mpirun -np 2 -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/rma \
 *          [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-w WINDOW] [-W BYTES] [-c] [-f] [--json FILE | -o FILE]
 *
 * -W BYTES makes the target's window at least BYTES (-W 1G -m 4:4: a 4-byte operation on a
 * window of 1 GiB, where a synchronisation that copies the window shows).
 * Sizes take k/M/G suffixes (powers of 1024). Defaults: 8 B .. 64 MiB by powers of 4, ITERS
 * 100 and WARMUP 10 up to 64 KiB, shrinking in proportion above (at least 4 and 2), WINDOW 16.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda_runtime.h>
#ifdef FAKECUDA_FIXTURE
#include <cuda.h>
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "machine.h"

enum { W_HOST, W_DEV_ORIGIN, W_DEV_WINDOW, W_DEV_BOTH, W_N };
static const char *way_name[W_N] = {"host", "dev-origin", "dev-window", "dev-both"};
static const char *way_key[W_N] = {"host", "device_origin", "device_window", "device_both"};
static const int way_dev_win[W_N] = {0, 0, 1, 1}, way_dev_buf[W_N] = {0, 1, 0, 1};

enum { M_PUT_LAT, M_GET_LAT, M_ACC_LAT, M_PUT_FENCE, M_GET_FENCE, M_PUT_BW, M_GET_BW, M_N };
static const char *metric_key[M_N] = {"put_lat", "get_lat", "acc_lat", "put_fence", "get_fence", "put_bw", "get_bw"};
static const char *metric_title[M_N] = {
    "MPI_Put + MPI_Win_flush (lock_all epoch): us per operation",
    "MPI_Get + MPI_Win_flush (lock_all epoch): us per operation",
    "MPI_Accumulate (MPI_SUM of doubles) + MPI_Win_flush (lock_all epoch): us per operation",
    "MPI_Win_fence, MPI_Put, MPI_Win_fence: us per epoch",
    "MPI_Win_fence, MPI_Get, MPI_Win_fence: us per epoch",
    "MPI_Put bandwidth (WINDOW puts per flush): MB/s",
    "MPI_Get bandwidth (WINDOW gets per flush): MB/s",
};

typedef const char *(*version_fn)(void);

static int rank, nranks;
static long errors;

static void *alloc(int device, size_t n)
{
    void *p = NULL;
    if (device) {
        if (cudaMalloc(&p, n) != cudaSuccess) return NULL;
    } else {
        p = malloc(n);
    }
    return p;
}

static void release(int device, void *p)
{
    if (device)
        cudaFree(p);
    else
        free(p);
}

static void fill(int device, void *p, size_t n, unsigned char v)
{
    if (device) {
        cudaMemset(p, v, n);
        cudaDeviceSynchronize();
    } else {
        memset(p, v, n);
    }
}

/* Whether n bytes at p (any memory) all equal v. */
static int all_equal(int device, const void *p, size_t n, unsigned char v)
{
    unsigned char *h = malloc(n);
    if (device)
        cudaMemcpy(h, p, n, cudaMemcpyDeviceToHost);
    else
        memcpy(h, p, n);
    size_t i = 0;
    while (i < n && h[i] == v) i++;
    free(h);
    return i == n;
}

/* Measures every metric of one way at one size into res[M_N]. */
static size_t win_least = 0; /* -W: the target's window holds at least this many bytes */

static void measure(int w, size_t size, int iters, int warmup, int window, int check, double *res)
{
    int dw = way_dev_win[w] && rank == 1, db = way_dev_buf[w] && rank == 0;
    /* The bandwidth rows give each operation in flight bytes of its own, at the origin and at
     * the target: WINDOW operations on the same bytes before one flush would be conflicting
     * accesses, and the same 64 MiB moved 16 times stays partly in the processor's caches. */
    size_t span = size * (size_t)window, wsize = span > win_least ? span : win_least;
    void *winbuf = alloc(dw, wsize), *buf = alloc(db, span);
    if (!winbuf || !buf) {
        fprintf(stderr, "rma: rank %d: cannot allocate %zu bytes\n", rank, winbuf ? span : wsize);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill(dw, winbuf, span, 0x11);
    fill(db, buf, span, 0x22);
    MPI_Win win;
    MPI_Win_create(winbuf, rank == 1 ? (MPI_Aint)wsize : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int count = (int)size;

    /* Passive target: rank 0 works, rank 1 waits in the barrier (which progresses MPI). */
    MPI_Win_lock_all(0, win);
    double t[5] = {0, 0, 0, 0, 0};
    if (rank == 0) {
        for (int m = 0; m < 5; m++) {
            /* m: put, get, put window, get window, accumulate */
            int get = m == 1 || m == 3, per = m == 2 || m == 3 ? window : 1;
            if (m == 4 && size < sizeof(double)) continue;
            for (int i = -warmup; i < iters; i++) {
                double t0 = MPI_Wtime();
                for (int k = 0; k < per; k++) {
                    char *at = (char *)buf + (size_t)k * size;
                    MPI_Aint disp = (MPI_Aint)k * (MPI_Aint)size;
                    if (m == 4)
                        MPI_Accumulate(buf, count / 8, MPI_DOUBLE, 1, 0, count / 8, MPI_DOUBLE, MPI_SUM, win);
                    else if (get)
                        MPI_Get(at, count, MPI_BYTE, 1, disp, count, MPI_BYTE, win);
                    else
                        MPI_Put(at, count, MPI_BYTE, 1, disp, count, MPI_BYTE, win);
                }
                MPI_Win_flush(1, win);
                if (i >= 0) t[m] += MPI_Wtime() - t0;
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(win);
    MPI_Win_unlock_all(win);
    res[M_PUT_LAT] = t[0] * 1e6 / iters;
    res[M_GET_LAT] = t[1] * 1e6 / iters;
    res[M_PUT_BW] = t[2] > 0 ? (double)size * window * iters / t[2] / 1e6 : NAN;
    res[M_GET_BW] = t[3] > 0 ? (double)size * window * iters / t[3] / 1e6 : NAN;
    res[M_ACC_LAT] = t[4] > 0 ? t[4] * 1e6 / iters : NAN;

    /* Active target: the fence makes the put visible in the target's window memory. */
    if (check) fill(db, buf, size, 0x33);
    double tf = 0;
    MPI_Win_fence(0, win);
    for (int i = -warmup; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) MPI_Put(buf, count, MPI_BYTE, 1, 0, count, MPI_BYTE, win);
        MPI_Win_fence(0, win);
        if (i >= 0) tf += MPI_Wtime() - t0;
    }
    double mx = 0;
    MPI_Allreduce(&tf, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    res[M_PUT_FENCE] = mx * 1e6 / iters;
    tf = 0;
    for (int i = -warmup; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) MPI_Get(buf, count, MPI_BYTE, 1, 0, count, MPI_BYTE, win);
        MPI_Win_fence(0, win);
        if (i >= 0) tf += MPI_Wtime() - t0;
    }
    MPI_Allreduce(&tf, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    res[M_GET_FENCE] = mx * 1e6 / iters;
    if (check) {
        if (rank == 1 && !all_equal(dw, winbuf, size, 0x33)) {
            fprintf(stderr, "rma: %s, %zu bytes: the target's window does not hold the put's bytes\n", way_name[w], size);
            errors++;
        }
        if (rank == 1) fill(dw, winbuf, size, 0x44);
        /* The owner's store is published at the fence. */
        MPI_Win_fence(0, win);
        if (rank == 0) MPI_Get(buf, count, MPI_BYTE, 1, 0, count, MPI_BYTE, win);
        MPI_Win_fence(0, win);
        if (rank == 0 && !all_equal(db, buf, size, 0x44)) {
            fprintf(stderr, "rma: %s, %zu bytes: the get's result does not hold the target's bytes\n", way_name[w], size);
            errors++;
        }
    }
    MPI_Win_free(&win);
    release(dw, winbuf);
    release(db, buf);
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: rma [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-w WINDOW] [-W BYTES] [-c] [-f] [--json FILE | -o FILE]\n");
}

int main(int argc, char **argv)
{
    size_t minsz = 8, maxsz = 64u << 20;
    int iters = 100, warmup = 10, window = 16, check = 0, force_dev = 0;
    const char *out = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int bad = nranks != 2;
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(o, "-c")) check = 1;
        else if (!strcmp(o, "-f")) force_dev = 1;
        else if (!v) bad = 1;
        else if (!strcmp(o, "-m")) {
            const char *c = strchr(v, ':');
            if (c) {
                char lo[32];
                snprintf(lo, sizeof lo, "%.*s", (int)(c - v), v);
                minsz = parse_size(lo);
                maxsz = parse_size(c + 1);
            } else {
                maxsz = parse_size(v);
            }
            a++;
        } else if (!strcmp(o, "-i")) iters = atoi(argv[++a]);
        else if (!strcmp(o, "-x")) warmup = atoi(argv[++a]);
        else if (!strcmp(o, "-w")) window = atoi(argv[++a]);
        else if (!strcmp(o, "-W")) win_least = parse_size(argv[++a]);
        else if (!strcmp(o, "--json") || !strcmp(o, "-o")) out = argv[++a];
        else bad = 1;
    }
    if (minsz < 1) minsz = 1;
    if (bad || iters < 1 || warmup < 0 || window < 1 || maxsz < minsz || maxsz > (size_t)1 << 30) {
        usage();
        MPI_Finalize();
        return 2;
    }
    const char *real_lib = "the MPI library";
    real_mpi_library(&real_lib);
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    int shim = ver != NULL;
    struct machine m;
    machine_gather(&m, rank, nranks);
    int run[W_N];
    for (int w = 0; w < W_N; w++) run[w] = w == W_HOST || (m.have_dev && (shim || force_dev));

    int nsz = 0, its[80];
    size_t sizes[80];
    for (size_t s = minsz; s <= maxsz && nsz < 79; s *= 4) sizes[nsz++] = s;
    if (sizes[nsz - 1] != maxsz) sizes[nsz++] = maxsz;
    double (*res)[W_N][M_N] = calloc((size_t)nsz, sizeof *res);
    for (int i = 0; i < nsz; i++) {
        size_t s = sizes[i];
        int it = iters, wu = warmup;
        if (s > 65536) {
            it = (int)(iters * 65536.0 / s);
            wu = (int)(warmup * 65536.0 / s);
            if (it < 4) it = 4;
            if (wu < 2) wu = 2;
        }
        its[i] = it;
        for (int w = 0; w < W_N; w++) {
            if (run[w])
                measure(w, s, it, wu, window, check, res[i][w]);
            else
                for (int k = 0; k < M_N; k++) res[i][w][k] = NAN;
        }
    }

    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        machine_print(&m, "rma", shim ? ver() : NULL, real_lib);
        if (check) printf("# data check: %s (%ld bad results)\n", total ? "FAILED" : "passed", total);
        for (int k = 0; k < M_N; k++) {
            printf("\n# %s\n# %10s %6s", metric_title[k], "bytes", "iters");
            for (int w = 0; w < W_N; w++) printf(" %12s", way_name[w]);
            printf("\n");
            for (int i = 0; i < nsz; i++) {
                printf("  %10zu %6d", sizes[i], its[i]);
                for (int w = 0; w < W_N; w++)
                    if (isnan(res[i][w][k]))
                        printf(" %12s", "-");
                    else
                        printf(" %12.2f", res[i][w][k]);
                printf("\n");
            }
        }
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) {
                perror(out);
            } else {
                fprintf(f, "{\n  \"bench\": \"rma\",\n  \"unit\": \"lat, fence: us per operation (mean); bw: MB/s\",\n");
                machine_json(f, &m, shim ? ver() : NULL, real_lib, nranks);
                fprintf(f, "  \"parameters\": {\"iterations\": %d, \"warmup\": %d, \"min_size\": %zu, \"max_size\": %zu, "
                           "\"window\": %d, \"window_bytes_at_least\": %zu, \"check\": %s, \"force_device\": %s},\n",
                        iters, warmup, minsz, maxsz, window, win_least, check ? "true" : "false", force_dev ? "true" : "false");
                fprintf(f, "  \"check_errors\": %ld,\n  \"results\": [\n", check ? total : 0);
                for (int i = 0; i < nsz; i++) {
                    fprintf(f, "    {\"size\": %zu, \"iterations\": %d", sizes[i], its[i]);
                    for (int k = 0; k < M_N; k++) {
                        fprintf(f, ", \"%s\": {", metric_key[k]);
                        for (int w = 0; w < W_N; w++) {
                            fprintf(f, "%s\"%s\": ", w ? ", " : "", way_key[w]);
                            if (isnan(res[i][w][k]))
                                fprintf(f, "null");
                            else
                                fprintf(f, "%.3f", res[i][w][k]);
                        }
                        fprintf(f, "}");
                    }
                    fprintf(f, "}%s\n", i + 1 < nsz ? "," : "");
                }
                fprintf(f, "  ]\n}\n");
                fclose(f);
                printf("# wrote %s\n", out);
            }
        }
        fflush(stdout);
    }
    free(res);
    free(m.all);
    MPI_Finalize();
    return total ? 1 : 0;
}
