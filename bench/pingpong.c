/* bench/pingpong.c -- OSU-style ping-pong between ranks 0 and 1, four ways side by side:
 *
 *   (a) host     host buffers through MPI_Send/MPI_Recv as the program sees them (through the
 *                shim when it is preloaded or linked)
 *   (b) real     host buffers through the MPI library's own PMPI_Send/PMPI_Recv, bypassing the
 *                shim (found via dladdr(MPI_Comm_rank) -> dlopen(RTLD_NOLOAD) -> dlsym; the
 *                shim does not intercept MPI_Comm_rank, so that symbol lives in libmpi)
 *   (c) device   device buffers (cudaMalloc) through MPI_Send/MPI_Recv: needs the shim (without
 *                it a non-CUDA-aware MPI crashes; skipped unless -f)
 *   (d) manual   seed 000's recipe: cudaMemcpy to a host buffer around the real MPI call, once
 *                with a pageable (malloc) buffer, once with a pinned (cudaMallocHost) one
 *
 * plus the shim's per-call cost on host buffers for 1..8-byte messages: the median over -r
 * repetitions of (a) minus (b), interleaved, and of MPI_Send to MPI_PROC_NULL through the
 * shim minus the same call on the real library.
 *
 * Build (stand-in driver, no GPU):
 *   mpicc -O2 bench/pingpong.c -o build/pingpong -Itests/fixture/include \
 *         -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib -lcudart -lcuda -ldl -lm
 * Build (real GPU):
 *   mpicc -O2 bench/pingpong.c -o build/pingpong -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl -lm
 * Run:
 *   mpirun -np 2 -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/pingpong \
 *          [-m MIN:MAX] [-S SIZE,SIZE..] [-i ITERS] [-x WARMUP] [-r REPS] [-n OVERHEAD_ITERS]
 *          [-o out.json] [-f]
 *   MPICH: mpirun -np 2 -genv LD_PRELOAD $PWD/target/release/libcudampi.so build/pingpong ...
 *
 * -S adds sizes to the sweep (e.g. -S 8 for the 8-byte latency); sizes take k/M/G suffixes.
 * -f runs the device column without the shim (crashes a non-CUDA-aware MPI).
 * Defaults: sizes 1 B .. 16 MiB by powers of 4, ITERS 1000 (a tenth above 64 KiB, at least
 * 10), WARMUP 100 (likewise), REPS 11, OVERHEAD_ITERS 20000. Latencies are one-way (half the
 * round trip) in microseconds, on rank 0. Each rank uses GPU (rank % device count).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef const char *(*version_fn)(void);

static int rank, nranks;
static send_fn real_send;
static recv_fn real_recv;
static const char *real_lib = "(not found)";

static void find_real(void)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Comm_rank");
    real_send = (send_fn)MPI_Send;
    real_recv = (recv_fn)MPI_Recv;
    if (!sym || !dladdr(sym, &di) || !di.dli_fname) return;
    void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_NOW);
    if (!h) return;
    send_fn s = (send_fn)dlsym(h, "PMPI_Send");
    recv_fn r = (recv_fn)dlsym(h, "PMPI_Recv");
    if (s && r) {
        real_send = s;
        real_recv = r;
        real_lib = di.dli_fname;
    }
}

enum way { W_HOST, W_REAL, W_DEVICE, W_PAGEABLE, W_PINNED, W_N };
static const char *way_key[W_N] = {"host_shim_us", "host_real_us", "device_shim_us",
                                   "manual_pageable_us", "manual_pinned_us"};

/* One ping-pong measurement: returns one-way latency in microseconds (rank 0; others 0). */
static double pingpong(int way, size_t size, int iters, int warmup, void *dbuf, void *hbuf)
{
    int peer = 1 - rank;
    int n = (int)size;
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 1) return 0;
    for (int i = -warmup; i < iters; i++) {
        if (i == 0) t0 = MPI_Wtime();
        switch (way) {
        case W_HOST:
        case W_DEVICE: {
            void *b = way == W_HOST ? hbuf : dbuf;
            if (rank == 0) {
                MPI_Send(b, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(b, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(b, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(b, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            }
            break;
        }
        case W_REAL:
            if (rank == 0) {
                real_send(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                real_recv(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                real_recv(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                real_send(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            }
            break;
        case W_PAGEABLE:
        case W_PINNED:
            /* seed 000: cudaMemcpy(s_buf_h, s_buf_d) ; MPI_Send(s_buf_h) / MPI_Recv(r_buf_h) ;
             * cudaMemcpy(r_buf_d, r_buf_h) -- around the real MPI */
            if (rank == 0) {
                cudaMemcpy(hbuf, dbuf, size, cudaMemcpyDeviceToHost);
                real_send(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                real_recv(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                cudaMemcpy(dbuf, hbuf, size, cudaMemcpyHostToDevice);
            } else {
                real_recv(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                cudaMemcpy(dbuf, hbuf, size, cudaMemcpyHostToDevice);
                cudaMemcpy(hbuf, dbuf, size, cudaMemcpyDeviceToHost);
                real_send(hbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            }
            break;
        }
    }
    double t = MPI_Wtime() - t0;
    return t * 1e6 / iters / 2.0;
}

/* Time `iters` MPI_Send calls to MPI_PROC_NULL; ns per call. */
static double proc_null_ns(int real, void *buf, int n, int iters)
{
    double t0 = MPI_Wtime();
    if (real)
        for (int i = 0; i < iters; i++) real_send(buf, n, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    else
        for (int i = 0; i < iters; i++) MPI_Send(buf, n, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    return (MPI_Wtime() - t0) * 1e9 / iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K') v *= 1024;
    if (*end == 'm' || *end == 'M') v *= 1024 * 1024;
    if (*end == 'g' || *end == 'G') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

static void json_num(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, "null");
    else
        fprintf(f, "%.4f", v);
}

int main(int argc, char **argv)
{
    size_t minsz = 1, maxsz = 16u << 20;
    int iters = 1000, warmup = 100, reps = 11, oiters = 20000, force_dev = 0;
    const char *out = NULL, *extra = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    int opt;
    while ((opt = getopt(argc, argv, "m:S:i:x:r:n:o:fh")) != -1) {
        switch (opt) {
        case 'm': {
            char *c = strchr(optarg, ':');
            if (c) {
                *c = 0;
                minsz = parse_size(optarg);
                maxsz = parse_size(c + 1);
            } else
                maxsz = parse_size(optarg);
            break;
        }
        case 'S': extra = optarg; break;
        case 'i': iters = atoi(optarg); break;
        case 'x': warmup = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'n': oiters = atoi(optarg); break;
        case 'o': out = optarg; break;
        case 'f': force_dev = 1; break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: pingpong [-m MIN:MAX] [-S SIZES] [-i ITERS] [-x WARMUP] [-r REPS] "
                                "[-n OVERHEAD_ITERS] [-o out.json] [-f]\n");
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (minsz < 1) minsz = 1;
    if (nranks < 2) {
        if (rank == 0) fprintf(stderr, "pingpong: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    find_real();
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    int shim = ver != NULL;

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    for (char *c = lib; *c; c++)
        if (*c == '\t' || *c == '"') *c = ' ';

    int ndev = 0, have_dev = 0;
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) {
        cudaSetDevice(rank % ndev);
        have_dev = 1;
    }
    int dev_ok = have_dev && (shim || force_dev);

    void *dbuf = NULL, *hbuf = NULL, *pinned = NULL;
    if (have_dev && cudaMalloc(&dbuf, maxsz) != cudaSuccess) {
        dbuf = NULL;
        have_dev = dev_ok = 0;
    }
    hbuf = malloc(maxsz);
    memset(hbuf, 1, maxsz);
    if (have_dev) {
        cudaMemcpy(dbuf, hbuf, maxsz, cudaMemcpyHostToDevice);
        if (cudaMallocHost(&pinned, maxsz) != cudaSuccess) pinned = NULL;
        else memset(pinned, 1, maxsz);
    }

    if (rank == 0) {
        printf("# cudampi pingpong: %s\n", lib);
        printf("# shim: %s; real MPI calls from %s\n", shim ? ver() : "not loaded", real_lib);
        printf("# CUDA devices: %d%s; ranks: %d (ping-pong between 0 and 1)\n", ndev,
               have_dev ? "" : " (device columns skipped)", nranks);
        if (have_dev && !dev_ok)
            printf("# device-buffer column skipped: the shim is not loaded (use -f to force)\n");
    }

    /* ---- per-call overhead on host buffers, 1..8 bytes ---- */
    /* Twice: from a small malloc block (the brk heap) and from the large sweep buffer (an
     * mmap'd block): the shim recognises the first as host memory by itself and asks the CUDA
     * driver about the second. */
    struct ovh {
        int size;
        const char *buffer;
        double shim_us, real_us, diff_ns_call, pn_shim_ns, pn_real_ns, pn_diff_ns;
    } ov[8];
    int nov = 0;
    void *smallbuf = malloc(64);
    memset(smallbuf, 1, 64);
    for (int ob = 0; ob < 2; ob++) {
        void *obuf = ob == 0 ? smallbuf : hbuf;
        double *ds = malloc(sizeof(double) * reps), *dr = malloc(sizeof(double) * reps),
               *dd = malloc(sizeof(double) * reps), *ps = malloc(sizeof(double) * reps),
               *pr = malloc(sizeof(double) * reps), *pd = malloc(sizeof(double) * reps);
        for (int sz = 1; sz <= 8; sz *= 2) {
            for (int r = 0; r < reps; r++) {
                /* alternate the order to cancel drift */
                double a, b;
                if (r & 1) {
                    b = pingpong(W_REAL, (size_t)sz, oiters, oiters / 10, dbuf, obuf);
                    a = pingpong(W_HOST, (size_t)sz, oiters, oiters / 10, dbuf, obuf);
                } else {
                    a = pingpong(W_HOST, (size_t)sz, oiters, oiters / 10, dbuf, obuf);
                    b = pingpong(W_REAL, (size_t)sz, oiters, oiters / 10, dbuf, obuf);
                }
                ds[r] = a;
                dr[r] = b;
                /* one-way latency difference / 2 calls on the one-way path = per call */
                dd[r] = (a - b) * 1000.0 / 2.0;
                double x = proc_null_ns(0, obuf, sz, oiters * 5);
                double y = proc_null_ns(1, obuf, sz, oiters * 5);
                ps[r] = x;
                pr[r] = y;
                pd[r] = x - y;
            }
            struct ovh *o = &ov[nov++];
            o->size = sz;
            o->buffer = ob == 0 ? "malloc 64 B" : "malloc max";
            o->shim_us = median(ds, reps);
            o->real_us = median(dr, reps);
            o->diff_ns_call = median(dd, reps);
            o->pn_shim_ns = median(ps, reps);
            o->pn_real_ns = median(pr, reps);
            o->pn_diff_ns = median(pd, reps);
        }
        free(ds); free(dr); free(dd); free(ps); free(pr); free(pd);
    }
    free(smallbuf);
    if (rank == 0) {
        printf("\n# host-buffer cost of passing through the shim (median of %d reps, %d iters)\n",
               reps, oiters);
        printf("# %-12s %6s %12s %12s %14s %14s %14s %14s\n", "buffer", "bytes", "shim us", "real us",
               "diff ns/call", "PROC_NULL shim", "PROC_NULL real", "diff ns/call");
        for (int i = 0; i < nov; i++)
            printf("  %-12s %6d %12.3f %12.3f %14.1f %14.1f %14.1f %14.1f\n", ov[i].buffer, ov[i].size, ov[i].shim_us,
                   ov[i].real_us, ov[i].diff_ns_call, ov[i].pn_shim_ns, ov[i].pn_real_ns,
                   ov[i].pn_diff_ns);
    }

    /* ---- size sweep ---- */
    int nsz = 0;
    size_t sizes[96];
    for (size_t s = minsz; s <= maxsz && nsz < 64; s *= 4) sizes[nsz++] = s;
    if (extra) {
        char *copy = strdup(extra), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t && nsz < 96; t = strtok_r(NULL, ",", &save)) {
            size_t v = parse_size(t);
            int dup = 0;
            for (int k = 0; k < nsz; k++) dup |= sizes[k] == v;
            if (v >= 1 && v <= maxsz && !dup) sizes[nsz++] = v;
        }
        free(copy);
        for (int a = 1; a < nsz; a++) /* insertion sort */
            for (int b = a; b > 0 && sizes[b - 1] > sizes[b]; b--) {
                size_t t = sizes[b];
                sizes[b] = sizes[b - 1];
                sizes[b - 1] = t;
            }
    }
    double (*res)[W_N] = calloc((size_t)nsz, sizeof *res);
    for (int i = 0; i < nsz; i++) {
        size_t s = sizes[i];
        int it = s > 65536 ? iters / 10 : iters, wu = s > 65536 ? warmup / 10 : warmup;
        if (it < 10) it = 10;
        if (wu < 2) wu = 2;
        for (int w = 0; w < W_N; w++) {
            res[i][w] = NAN;
            if (w == W_DEVICE && !dev_ok) continue;
            if ((w == W_PAGEABLE || w == W_PINNED) && !have_dev) continue;
            if (w == W_PINNED && !pinned) continue;
            res[i][w] = pingpong(w, s, it, wu, dbuf, w == W_PINNED ? pinned : hbuf);
        }
    }
    if (rank == 0) {
        printf("\n# one-way latency in us (bandwidth MB/s = bytes / latency)\n");
        printf("# %10s %12s %12s %12s %12s %12s %10s %10s\n", "bytes", "host(shim)",
               "host(real)", "device(shim)", "manual-page", "manual-pin", "dev MB/s", "pin MB/s");
        for (int i = 0; i < nsz; i++) {
            printf("  %10zu", sizes[i]);
            for (int w = 0; w < W_N; w++)
                if (isnan(res[i][w]))
                    printf(" %12s", "-");
                else
                    printf(" %12.2f", res[i][w]);
            double bd = res[i][W_DEVICE], bp = res[i][W_PINNED];
            if (isnan(bd)) printf(" %10s", "-"); else printf(" %10.1f", sizes[i] / bd);
            if (isnan(bp)) printf(" %10s\n", "-"); else printf(" %10.1f\n", sizes[i] / bp);
        }
        fflush(stdout);
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) {
                perror(out);
            } else {
                fprintf(f, "{\n  \"bench\": \"pingpong\",\n  \"mpi\": \"%s\",\n", lib);
                fprintf(f, "  \"shim\": ");
                if (shim)
                    fprintf(f, "\"%s\",\n", ver());
                else
                    fprintf(f, "null,\n");
                fprintf(f, "  \"cuda_devices\": %d,\n  \"ranks\": %d,\n", ndev, nranks);
                fprintf(f, "  \"iterations\": %d,\n  \"warmup\": %d,\n  \"overhead_reps\": %d,\n"
                           "  \"overhead_iterations\": %d,\n", iters, warmup, reps, oiters);
                fprintf(f, "  \"overhead\": [\n");
                for (int i = 0; i < nov; i++)
                    fprintf(f,
                            "    {\"buffer\": \"%s\", \"size\": %d, \"host_shim_us\": %.4f, \"host_real_us\": %.4f, "
                            "\"diff_ns_per_call\": %.1f, \"proc_null_shim_ns\": %.1f, "
                            "\"proc_null_real_ns\": %.1f, \"proc_null_diff_ns\": %.1f}%s\n",
                            ov[i].buffer, ov[i].size, ov[i].shim_us, ov[i].real_us, ov[i].diff_ns_call,
                            ov[i].pn_shim_ns, ov[i].pn_real_ns, ov[i].pn_diff_ns,
                            i + 1 < nov ? "," : "");
                fprintf(f, "  ],\n  \"results\": [\n");
                for (int i = 0; i < nsz; i++) {
                    fprintf(f, "    {\"size\": %zu", sizes[i]);
                    for (int w = 0; w < W_N; w++) {
                        fprintf(f, ", \"%s\": ", way_key[w]);
                        json_num(f, res[i][w]);
                    }
                    fprintf(f, "}%s\n", i + 1 < nsz ? "," : "");
                }
                fprintf(f, "  ]\n}\n");
                fclose(f);
                printf("# wrote %s\n", out);
            }
        }
    }
    free(res);
    free(hbuf);
    if (pinned) cudaFreeHost(pinned);
    if (dbuf) cudaFree(dbuf);
    MPI_Finalize();
    return 0;
}
