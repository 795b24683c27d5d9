/* bench/pingpong.c -- OSU-style ping-pong between ranks 0 and 1 (osu_latency), six ways side by
 * side:
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
 *   (e) nccl     ncclSend/ncclRecv on device buffers, each followed by a stream synchronisation:
 *                the GPU-native reference, where NCCL loads and the two ranks have GPUs of
 *                their own (bench/nccl.h)
 *
 * Each rank sends from one buffer and receives into another (as osu_latency does). -d cuda
 * [D|H] [D|H] (default D D) or -d host: where ranks 0 and 1 keep the buffers of ways (c) and
 * (d); a rank whose buffers are on the host sends and receives them with the real MPI in (d).
 * -d cuda D H on one GPU times one rank's device costs without two processes sharing the GPU.
 * -c checks the data: every message carries a pattern that depends on the iteration and the
 * sender, the receive buffer is poisoned first, and the receiver compares every byte (times
 * then include the filling and checking).
 *
 * Then, for 8-byte device messages, where the time goes: the driver calls cudampi makes for
 * one staged send and one staged receive, and the manual recipe's copies, each timed alone and
 * in the order a ping-pong turn-around issues them (a receive's copy to the device followed at
 * once by the next send's copy from it), medians over -r repetitions on rank 0.
 *
 * Then, for 1- and 8-byte messages, ways (c) and (d) interleaved: the sweep times one way after
 * another, and at these sizes they differ by about as much as one measurement drifts from run
 * to run. So -r rounds each run device(shim), manual-page and manual-pin once at the sweep's
 * -i/-x (the first way rotating from round to round), and the block "small messages, ways
 * interleaved" gives each way's median and minimum over the rounds, device(shim)'s median
 * minus each recipe's (negative: cudampi faster), and in how many rounds device(shim) beat
 * manual-page (and manual-pin) of the same round. Needs the device way and pinned memory.
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
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -lcuda -ldl -lm
 * Run:
 *   mpirun -np 2 -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/pingpong \
 *          [-d cuda D D] [-m MIN:MAX] [-S SIZE,SIZE..] [-i ITERS] [-x WARMUP] [-r REPS]
 *          [-n OVERHEAD_ITERS] [-c] [-o out.json] [-f]
 *   MPICH: mpirun -np 2 -genv LD_PRELOAD $PWD/target/release/libcudampi.so build/pingpong ...
 *
 * -S adds sizes to the sweep (e.g. -S 8 for the 8-byte latency); sizes take k/M/G suffixes.
 * -W host,real,device,pageable,pinned,nccl sweeps only the ways named (default: all).
 * -f runs the device column without the shim (crashes a non-CUDA-aware MPI).
 * Defaults: sizes 1 B .. 16 MiB by powers of 4, ITERS 1000 (a tenth above 64 KiB, at least
 * 10), WARMUP 100 (likewise), REPS 11, OVERHEAD_ITERS 20000. Latencies are one-way (half the
 * round trip) in microseconds, on rank 0. Each rank uses GPU (node-local rank % device count).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef const char *(*version_fn)(void);

#include "machine.h"

static int rank, nranks;
static mpi_send_fn real_send;
static mpi_recv_fn real_recv;
static const char *real_lib = "(not found)";

static void find_real(void) { real_send_recv(&real_send, &real_recv, &real_lib); }
#include "nccl.h"

enum way { W_HOST, W_REAL, W_DEVICE, W_PAGEABLE, W_PINNED, W_NCCL, W_N };
static const char *way_key[W_N] = {"host_shim_us", "host_real_us", "device_shim_us",
                                   "manual_pageable_us", "manual_pinned_us", "nccl_us"};
static const char *way_name[W_N] = {"host(shim)", "host(real)", "device(shim)", "manual-page", "manual-pin", "nccl"};
static const char *way_arg[W_N] = {"host", "real", "device", "pageable", "pinned", "nccl"};

static char place[2] = {'D', 'D'}; /* -d: ways (c) and (d): buffers on ranks 0 and 1 */

/* Ranks 0 and 1: a send and a receive buffer of each kind. */
struct bufs {
    char *ds, *dr; /* device */
    char *hs, *hr; /* malloc */
    char *ps, *pr; /* cudaMallocHost */
    char *scratch; /* -c: device contents copied back here */
};

/* Is this way's data in device memory on this rank? */
static int on_device(int way)
{
    return way == W_NCCL || ((way == W_DEVICE || way == W_PAGEABLE || way == W_PINNED) && (rank > 1 || place[rank] == 'D'));
}

/* -c: the pattern of iteration i from rank `from`, written into this rank's send buffer */
static long errors;
static unsigned char pat(int i, int from, size_t k) { return (unsigned char)(k * 7 + (size_t)i * 13 + (size_t)from * 101 + 1); }
static void fill(int way, size_t size, int i, struct bufs *b, char *sbuf)
{
    for (size_t k = 0; k < size; k++) b->scratch[k] = (char)pat(i, rank, k);
    if (on_device(way)) cudaMemcpy(sbuf, b->scratch, size, cudaMemcpyHostToDevice);
    else memcpy(sbuf, b->scratch, size);
}
static void poison(int way, size_t size, char *rbuf)
{
    if (on_device(way)) cudaMemset(rbuf, 0xee, size);
    else memset(rbuf, 0xee, size);
}
static void verify(int way, size_t size, int i, struct bufs *b, const char *rbuf)
{
    const unsigned char *got = (const unsigned char *)rbuf;
    if (on_device(way)) {
        cudaMemcpy(b->scratch, rbuf, size, cudaMemcpyDeviceToHost);
        got = (const unsigned char *)b->scratch;
    }
    for (size_t k = 0; k < size; k++)
        if (got[k] != pat(i, 1 - rank, k)) {
            if (errors < 5)
                fprintf(stderr, "pingpong: rank %d: %s, %zu B, iteration %d: byte %zu is 0x%02x, expected 0x%02x\n",
                        rank, way_name[way], size, i, k, got[k], pat(i, 1 - rank, k));
            errors++;
            return;
        }
}

static void nccl_pp(int send, char *buf, size_t size, int peer)
{
    if (send)
        nccl_check(nccl.send(buf, size, NCCL_CHAR, peer, nccl.comm, nccl.stream), "ncclSend");
    else
        nccl_check(nccl.recv(buf, size, NCCL_CHAR, peer, nccl.comm, nccl.stream), "ncclRecv");
    nccl_sync();
}

/* One message of the ping-pong, in the way's terms: send (dir 1) or receive (dir 0). */
static void step(int way, int dir, size_t size, struct bufs *b, char *sbuf, char *rbuf)
{
    const int peer = 1 - rank, n = (int)size;
    char *stage = way == W_PINNED ? (dir ? b->ps : b->pr) : (dir ? b->hs : b->hr);
    if ((way == W_PAGEABLE || way == W_PINNED) && !on_device(way)) way = W_REAL; /* nothing to stage here */
    switch (way) {
    case W_HOST:
    case W_DEVICE:
        if (dir) MPI_Send(sbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        else MPI_Recv(rbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    case W_REAL:
        if (dir) real_send(sbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        else real_recv(rbuf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    case W_PAGEABLE:
    case W_PINNED:
        /* seed 000: cudaMemcpy(s_buf_h, s_buf_d); MPI_Send(s_buf_h) / MPI_Recv(r_buf_h);
         * cudaMemcpy(r_buf_d, r_buf_h) -- around the real MPI */
        if (dir) {
            cudaMemcpy(stage, sbuf, size, cudaMemcpyDeviceToHost);
            real_send(stage, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        } else {
            real_recv(stage, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            cudaMemcpy(rbuf, stage, size, cudaMemcpyHostToDevice);
        }
        break;
    case W_NCCL: nccl_pp(dir, dir ? sbuf : rbuf, size, peer); break;
    }
}

/* One ping-pong measurement: returns one-way latency in microseconds (rank 0; others 0).
 * `host` replaces the malloc'd buffers of the host ways (the overhead runs pass a small one). */
static double pingpong(int way, size_t size, int iters, int warmup, struct bufs *b, char *host, int check)
{
    char *sbuf = on_device(way) ? b->ds : host ? host : b->hs;
    char *rbuf = on_device(way) ? b->dr : host ? host : b->hr;
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 1) return 0;
    for (int i = -warmup; i < iters; i++) {
        if (i == 0) t0 = MPI_Wtime();
        if (check) {
            fill(way, size, i, b, sbuf);
            poison(way, size, rbuf);
            cudaDeviceSynchronize(); /* cudaMemset is on the legacy stream, NCCL on a non-blocking one */
        }
        if (rank == 0) {
            step(way, 1, size, b, sbuf, rbuf);
            step(way, 0, size, b, sbuf, rbuf);
        } else {
            step(way, 0, size, b, sbuf, rbuf);
            if (check) verify(way, size, i, b, rbuf);
            step(way, 1, size, b, sbuf, rbuf);
        }
        if (check && rank == 0) verify(way, size, i, b, rbuf);
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


static void json_num(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, "null");
    else
        fprintf(f, "%.4f", v);
}

/* ---- where an 8-byte device message's time goes ---- */

enum part { P_QUERY, P_D2H_PINNED, P_H2D_PINNED, P_TURN_PINNED, P_D2H_PAGE, P_H2D_PAGE, P_TURN_PAGE, P_N };
static const char *part_key[P_N] = {"pointer_query_us", "d2h_pinned_us", "h2d_pinned_async_sync_us",
                                    "turnaround_pinned_us", "d2h_pageable_us", "h2d_pageable_us",
                                    "turnaround_pageable_us"};
static const char *part_what[P_N] = {
    "cuPointerGetAttribute(MEMORY_TYPE) on the device buffer (cudampi, per call on a device buffer)",
    "cuMemcpyDtoH into pinned memory (cudampi's staged send)",
    "cuMemcpyHtoDAsync from pinned + cuStreamSynchronize (cudampi's staged receive)",
    "the two above back to back (a ping-pong turn-around under cudampi)",
    "cudaMemcpy device -> pageable (the manual recipe's send)",
    "cudaMemcpy pageable -> device (the recipe's receive; returns before the DMA ends)",
    "the two recipe copies back to back (its turn-around)"};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Rank 0 alone (rank 1 waits in the barrier): each part's mean over `iters`, median over reps. */
static void breakdown(struct bufs *b, int iters, int reps, double out[P_N])
{
    const size_t n = 8;
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)b->ds;
    double *v = malloc(sizeof(double) * (size_t)reps);
    for (int p = 0; p < P_N; p++) {
        for (int r = 0; r < reps; r++) {
            double t0 = now_us();
            for (int i = 0; i < iters; i++) {
                unsigned int mt = 0;
                switch (p) {
                case P_QUERY: cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d); break;
                case P_TURN_PINNED:
                case P_H2D_PINNED:
                    cuMemcpyHtoDAsync(d, b->pr, n, NULL);
                    cuStreamSynchronize(NULL);
                    if (p == P_H2D_PINNED) break;
                    /* fall through */
                case P_D2H_PINNED: cuMemcpyDtoH(b->ps, d, n); break;
                case P_TURN_PAGE:
                case P_H2D_PAGE:
                    cudaMemcpy(b->ds, b->hr, n, cudaMemcpyHostToDevice);
                    if (p == P_H2D_PAGE) break;
                    /* fall through */
                case P_D2H_PAGE: cudaMemcpy(b->hs, b->ds, n, cudaMemcpyDeviceToHost); break;
                }
            }
            cudaDeviceSynchronize();
            v[r] = (now_us() - t0) / iters;
        }
        out[p] = median(v, reps);
    }
    free(v);
}

/* ---- small device messages, ways interleaved ---- */

/* device(shim) first: the differences and the round-by-round wins are taken against it */
enum { I_WAYS = 3, I_SIZES = 2 };
static const int iway[I_WAYS] = {W_DEVICE, W_PAGEABLE, W_PINNED};
static const size_t isize[I_SIZES] = {1, 8};

struct inter {
    size_t size;
    double med[I_WAYS], min[I_WAYS]; /* one-way us over the rounds */
    int wins[I_WAYS];                /* rounds where device(shim) was faster than way j of the same round */
};

/* Every rank runs the rounds (pingpong() has barriers); the numbers mean something on rank 0.
 * Back to back, the ways of a round see the same machine state, so a drift between rounds
 * moves them together instead of into one way's median. */
static void interleaved(struct bufs *b, int iters, int warmup, int reps, int check, struct inter out[I_SIZES])
{
    double *v = malloc(sizeof(double) * (size_t)reps * I_WAYS); /* v[j * reps + r]: way j, round r */
    for (int s = 0; s < I_SIZES; s++) {
        struct inter *o = &out[s];
        memset(o, 0, sizeof *o);
        o->size = isize[s];
        for (int r = 0; r < reps; r++) {
            /* rotate which way goes first, so that no way always follows the same one */
            for (int k = 0; k < I_WAYS; k++) {
                int j = (r + k) % I_WAYS;
                v[j * reps + r] = pingpong(iway[j], isize[s], iters, warmup, b, NULL, check);
            }
            for (int j = 1; j < I_WAYS; j++) o->wins[j] += v[r] < v[j * reps + r];
        }
        for (int j = 0; j < I_WAYS; j++) {
            o->med[j] = median(v + j * reps, reps); /* sorts: the minimum is then first */
            o->min[j] = v[j * reps];
        }
    }
    free(v);
}

static void interleaved_print(const struct inter in[I_SIZES], int iters, int reps, int check)
{
    printf("\n# small messages, ways interleaved: one-way us, median (min) of %d rounds of %d iterations%s\n", reps,
           iters, check ? "; -c: includes filling and checking the buffers" : "");
    printf("# dev-page, dev-pin: device(shim)'s median minus the recipe's (negative: cudampi faster);\n"
           "# dev<page, dev<pin: rounds in which device(shim) was faster than that recipe\n");
    printf("# %6s", "bytes");
    for (int j = 0; j < I_WAYS; j++) printf(" %17s", way_name[iway[j]]);
    printf(" %9s %9s %9s %9s\n", "dev-page", "dev-pin", "dev<page", "dev<pin");
    for (int s = 0; s < I_SIZES; s++) {
        const struct inter *o = &in[s];
        printf("  %6zu", o->size);
        for (int j = 0; j < I_WAYS; j++) printf("  %7.2f (%6.2f)", o->med[j], o->min[j]);
        printf(" %+9.2f %+9.2f", o->med[0] - o->med[1], o->med[0] - o->med[2]);
        for (int j = 1; j < I_WAYS; j++) {
            char k[32];
            snprintf(k, sizeof k, "%d/%d", o->wins[j], reps);
            printf(" %9s", k);
        }
        printf("\n");
    }
    fflush(stdout);
}

static void interleaved_json(FILE *f, const struct inter in[I_SIZES], int iters, int reps)
{
    fprintf(f, "  \"small_interleaved\": [\n");
    for (int s = 0; s < I_SIZES; s++) {
        const struct inter *o = &in[s];
        fprintf(f, "    {\"bytes\": %zu, \"reps\": %d, \"iterations\": %d", o->size, reps, iters);
        for (int j = 0; j < I_WAYS; j++) {
            fprintf(f, ", \"%s\": {\"median\": ", way_key[iway[j]]);
            json_num(f, o->med[j]);
            fprintf(f, ", \"min\": ");
            json_num(f, o->min[j]);
            fprintf(f, "}");
        }
        fprintf(f, ", \"device_minus_pageable_us\": ");
        json_num(f, o->med[0] - o->med[1]);
        fprintf(f, ", \"device_minus_pinned_us\": ");
        json_num(f, o->med[0] - o->med[2]);
        fprintf(f, ", \"device_faster_than_pageable\": %d, \"device_faster_than_pinned\": %d}%s\n", o->wins[1],
                o->wins[2], s + 1 < I_SIZES ? "," : "");
    }
    fprintf(f, "  ],\n");
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: pingpong [-d cuda [D|H] [D|H] | -d host] [-m MIN:MAX] [-S SIZES] [-i ITERS] "
                        "[-x WARMUP] [-r REPS] [-n OVERHEAD_ITERS] [-W WAYS] [-c] [-o out.json] [-f]\n");
}

int main(int argc, char **argv)
{
    size_t minsz = 1, maxsz = 16u << 20;
    int iters = 1000, warmup = 100, reps = 11, oiters = 20000, force_dev = 0, check = 0, ways = (1 << W_N) - 1;
    const char *out = NULL, *extra = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    int opt;
    while ((opt = getopt(argc, argv, "d:m:S:i:x:r:n:o:W:cfh")) != -1) {
        switch (opt) {
        case 'd':
            if (parse_placement(optarg, argc, argv, place)) break;
            usage();
            MPI_Finalize();
            return 2;
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
        case 'W':
            ways = 0;
            for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ","))
                for (int w = 0; w < W_N; w++)
                    if (!strcmp(t, way_arg[w])) ways |= 1 << w;
            break;
        case 'c': check = 1; break;
        case 'f': force_dev = 1; break;
        default:
            usage();
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (minsz < 1) minsz = 1;
    if (maxsz < 8) maxsz = 8; /* the overhead runs and the breakdown use up to 8 bytes */
    if (iters < 1 || warmup < 0 || reps < 1 || oiters < 10) {
        usage();
        MPI_Finalize();
        return 2;
    }
    if (nranks < 2) {
        if (rank == 0) fprintf(stderr, "pingpong: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    find_real();
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    int shim = ver != NULL;

    struct machine m;
    machine_gather(&m, rank, nranks);
    int have_dev = m.have_dev, have_pinned = 0;

    struct bufs b;
    memset(&b, 0, sizeof b);
    b.hs = malloc(maxsz);
    b.hr = malloc(maxsz);
    b.scratch = malloc(maxsz);
    if (!b.hs || !b.hr || !b.scratch) {
        fprintf(stderr, "pingpong: rank %d: cannot allocate 3 x %zu bytes\n", rank, maxsz);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(b.hs, 1, maxsz);
    memset(b.hr, 1, maxsz);
    if (have_dev && (cudaMalloc((void **)&b.ds, maxsz) != cudaSuccess || cudaMalloc((void **)&b.dr, maxsz) != cudaSuccess))
        have_dev = 0;
    if (have_dev) {
        cudaMemcpy(b.ds, b.hs, maxsz, cudaMemcpyHostToDevice);
        cudaMemcpy(b.dr, b.hs, maxsz, cudaMemcpyHostToDevice);
        if (cudaMallocHost((void **)&b.ps, maxsz) == cudaSuccess && cudaMallocHost((void **)&b.pr, maxsz) == cudaSuccess) {
            memset(b.ps, 1, maxsz);
            memset(b.pr, 1, maxsz);
            have_pinned = 1;
        }
    }
    /* ranks 0 and 1 must agree on what runs */
    int mine[2] = {rank <= 1 ? have_dev : 1, rank <= 1 ? have_pinned : 1}, lo[2];
    MPI_Allreduce(mine, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    have_dev = lo[0];
    have_pinned = lo[1];
    int dev_ok = (have_dev || (place[0] == 'H' && place[1] == 'H')) && (shim || force_dev);
    nccl_open(&m, rank, nranks);

    if (rank == 0) {
        machine_print(&m, "pingpong", shim ? ver() : NULL, real_lib);
        printf("# ranks: %d (ping-pong between 0 and 1)%s%s\n", nranks, have_dev ? "" : "; no GPU: device columns skipped",
               check ? "; checking the data (-c)" : "");
        printf("# device(shim) buffers: rank 0 %s, rank 1 %s (-d); nccl: %s\n", place[0] == 'D' ? "device" : "host",
               place[1] == 'D' ? "device" : "host", nccl.why);
        if (have_dev && !dev_ok) printf("# device-buffer column skipped: the shim is not loaded (use -f to force)\n");
        fflush(stdout);
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
    char *smallbuf = malloc(64);
    memset(smallbuf, 1, 64);
    for (int ob = 0; ob < 2; ob++) {
        char *obuf = ob == 0 ? smallbuf : b.hs;
        double *ds = malloc(sizeof(double) * reps), *dr = malloc(sizeof(double) * reps),
               *dd = malloc(sizeof(double) * reps), *ps = malloc(sizeof(double) * reps),
               *pr = malloc(sizeof(double) * reps), *pd = malloc(sizeof(double) * reps);
        for (int sz = 1; sz <= 8; sz *= 2) {
            for (int r = 0; r < reps; r++) {
                /* alternate the order to cancel drift */
                double x, y;
                if (r & 1) {
                    y = pingpong(W_REAL, (size_t)sz, oiters, oiters / 10, &b, obuf, 0);
                    x = pingpong(W_HOST, (size_t)sz, oiters, oiters / 10, &b, obuf, 0);
                } else {
                    x = pingpong(W_HOST, (size_t)sz, oiters, oiters / 10, &b, obuf, 0);
                    y = pingpong(W_REAL, (size_t)sz, oiters, oiters / 10, &b, obuf, 0);
                }
                ds[r] = x;
                dr[r] = y;
                /* one-way latency difference / 2 calls on the one-way path = per call */
                dd[r] = (x - y) * 1000.0 / 2.0;
                double u = proc_null_ns(0, obuf, sz, oiters * 5);
                double w = proc_null_ns(1, obuf, sz, oiters * 5);
                ps[r] = u;
                pr[r] = w;
                pd[r] = u - w;
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
            for (int c = a; c > 0 && sizes[c - 1] > sizes[c]; c--) {
                size_t t = sizes[c];
                sizes[c] = sizes[c - 1];
                sizes[c - 1] = t;
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
            if (!(ways >> w & 1)) continue;
            if (w == W_DEVICE && !dev_ok) continue;
            if ((w == W_PAGEABLE || w == W_PINNED) && !have_dev) continue;
            if (w == W_PINNED && !have_pinned) continue;
            if (w == W_NCCL && !nccl.on) continue;
            res[i][w] = pingpong(w, s, it, wu, &b, NULL, check);
        }
    }

    /* ---- 8-byte breakdown ---- */
    double part[P_N];
    int have_part = have_dev && have_pinned;
    MPI_Barrier(MPI_COMM_WORLD);
    if (have_part && rank == 0) breakdown(&b, iters, reps, part);
    MPI_Barrier(MPI_COMM_WORLD);

    /* ---- 1 and 8 bytes, device(shim) and the recipes interleaved ---- */
    /* the sweep's counts at these sizes; every rank takes part, as in the sweep */
    struct inter inter[I_SIZES];
    int have_inter = dev_ok && have_dev && have_pinned;
    int iit = iters < 10 ? 10 : iters, iwu = warmup < 2 ? 2 : warmup;
    if (have_inter) {
        interleaved(&b, iit, iwu, reps, check, inter);
        if (rank == 0) interleaved_print(inter, iit, reps, check);
    }

    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("\n# one-way latency in us (bandwidth MB/s = bytes / latency)%s\n",
               check ? "; -c: includes filling and checking the buffers" : "");
        printf("# %10s", "bytes");
        for (int w = 0; w < W_N; w++) printf(" %12s", way_name[w]);
        printf(" %10s %10s\n", "dev MB/s", "pin MB/s");
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
        if (have_part) {
            printf("\n# where an 8-byte device message's time goes (rank 0 alone; mean over %d, median of %d)\n",
                   iters, reps);
            for (int p = 0; p < P_N; p++) printf("  %8.2f us  %s\n", part[p], part_what[p]);
        }
        if (check) printf("# data check: %s (%ld bad messages)\n", total ? "FAILED" : "passed", total);
        fflush(stdout);
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) {
                perror(out);
            } else {
                fprintf(f, "{\n  \"bench\": \"pingpong\",\n  \"unit\": \"us one-way latency (half the round trip)\",\n");
                machine_json(f, &m, shim ? ver() : NULL, real_lib, nranks);
                fprintf(f, "  \"parameters\": {\"iterations\": %d, \"warmup\": %d, \"overhead_reps\": %d, "
                           "\"overhead_iterations\": %d, \"check\": %s, \"placement\": \"%c %c\", \"nccl\": \"%s\"},\n",
                        iters, warmup, reps, oiters, check ? "true" : "false", place[0], place[1], nccl.why);
                fprintf(f, "  \"check_errors\": %ld,\n", check ? total : 0);
                fprintf(f, "  \"overhead\": [\n");
                for (int i = 0; i < nov; i++)
                    fprintf(f,
                            "    {\"buffer\": \"%s\", \"size\": %d, \"host_shim_us\": %.4f, \"host_real_us\": %.4f, "
                            "\"diff_ns_per_call\": %.1f, \"proc_null_shim_ns\": %.1f, "
                            "\"proc_null_real_ns\": %.1f, \"proc_null_diff_ns\": %.1f}%s\n",
                            ov[i].buffer, ov[i].size, ov[i].shim_us, ov[i].real_us, ov[i].diff_ns_call,
                            ov[i].pn_shim_ns, ov[i].pn_real_ns, ov[i].pn_diff_ns,
                            i + 1 < nov ? "," : "");
                fprintf(f, "  ],\n  \"breakdown_8B\": ");
                if (have_part) {
                    fprintf(f, "{");
                    for (int p = 0; p < P_N; p++) {
                        fprintf(f, "%s\"%s\": ", p ? ", " : "", part_key[p]);
                        json_num(f, part[p]);
                    }
                    fprintf(f, "},\n");
                } else {
                    fprintf(f, "null,\n");
                }
                if (have_inter)
                    interleaved_json(f, inter, iit, reps);
                else
                    fprintf(f, "  \"small_interleaved\": null,\n");
                fprintf(f, "  \"results\": [\n");
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
    nccl_close();
    free(res);
    free(m.all);
    free(b.hs);
    free(b.hr);
    free(b.scratch);
    if (b.ps) cudaFreeHost(b.ps);
    if (b.pr) cudaFreeHost(b.pr);
    if (b.ds) cudaFree(b.ds);
    if (b.dr) cudaFree(b.dr);
    MPI_Finalize();
    return total ? 1 : 0;
}
