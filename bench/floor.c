/* bench/floor.c -- what the GPU itself allows between ranks 0 and 1 of one node: the floors that
 * cudampi's device figures are divided by. No device buffer ever reaches MPI: each rank exports
 * its device buffer once with CUDA IPC, the peer maps it once, and MPI (the library's own PMPI
 * functions, bypassing the shim, found as bench/bw.c finds them) carries only 4-byte tokens.
 *
 *   copy       rank 1 copies SIZE bytes from rank 0's mapped buffer into its own on its stream and
 *              synchronises: the copy alone, no MPI
 *   msg        one IPC message at a time: rank 0 sends a token, rank 1 copies, synchronises and
 *              acknowledges; time per message on rank 0 (the floor of osu_latency's one-way time
 *              plus an acknowledgement, and of osu_bw with a window of 1)
 *   window     osu_bw's shape: rank 0 sends W tokens, rank 1 receives each and starts its copy at
 *              once (one stream, one destination buffer per message), synchronises once after the
 *              W-th and acknowledges; bandwidth = W * SIZE / time (the floor of osu_bw -W)
 *   pingpong   osu_latency's shape: each rank in turn copies the message from the other's buffer,
 *              synchronises and sends a token; one-way time = round trip / 2
 *
 * Build (real GPU):
 *   mpicc -O2 bench/floor.c -o build/floor -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -lcuda -ldl -lm
 * (stand-in driver: -Itests/fixture/include -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib)
 * Run: mpirun -np 2 build/floor [-m MIN:MAX] [-w WINDOW] [-i ITERS] [-x WARMUP] [-r REPS] [-c] [-o out.json]
 *
 * Sizes 1 B .. 64 MiB by powers of 4 (MAX and 8 B always included), WINDOW 64 (cut to 1 GiB / SIZE),
 * ITERS 100 (a tenth above 1 MiB, at least 10), WARMUP 10, REPS 5: each figure is the median of
 * REPS timed blocks of ITERS. -c fills rank 0's buffer with a pattern per size and has rank 1
 * compare every byte it copied (exit status 1 on a mismatch), so a floor that moved nothing
 * cannot pass for one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "machine.h"

static mpi_send_fn real_send;
static mpi_recv_fn real_recv;
static const char *real_lib = "(not found: MPI_* used instead)";

static void find_real(void) { real_send_recv(&real_send, &real_recv, &real_lib); }

#define CU(call)                                                                                 \
    do {                                                                                         \
        CUresult rc_ = (call);                                                                   \
        if (rc_ != CUDA_SUCCESS) {                                                               \
            fprintf(stderr, "floor: %s failed with %d (line %d)\n", #call, (int)rc_, __LINE__);  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
        }                                                                                        \
    } while (0)

static int me, peer;
static CUstream stream;
static void token_send(void) { int t = 1; real_send(&t, 1, MPI_INT, peer, 7, MPI_COMM_WORLD); }
static void token_recv(void) { int t; real_recv(&t, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
static void copy(CUdeviceptr dst, CUdeviceptr src, size_t n) { CU(cuMemcpyAsync(dst, src, n, stream)); }
static void sync_stream(void) { CU(cuStreamSynchronize(stream)); }

enum shape { COPY, MSG, WINDOW, PINGPONG };

/* One timed block of `iters` repetitions of `shape` (rank 0's clock; rank 1's for COPY), in
 * seconds per repetition. Message k of a window lands at dst + k * n; `theirs` is the peer's
 * exported buffer mapped here. */
static double block(enum shape shape, int iters, size_t n, int w, CUdeviceptr dst, CUdeviceptr theirs)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = wall_seconds();
    for (int i = 0; i < iters; i++) {
        switch (shape) {
        case COPY:
            if (me == 1) {
                copy(dst, theirs, n);
                sync_stream();
            }
            break;
        case MSG:
        case WINDOW:
            if (me == 0) {
                for (int k = 0; k < w; k++) token_send();
                token_recv();
            } else {
                for (int k = 0; k < w; k++) {
                    token_recv();
                    copy(dst + (size_t)k * n, theirs, n);
                }
                sync_stream();
                token_send();
            }
            break;
        case PINGPONG:
            if (me == 0) {
                token_send();
                token_recv();
                copy(dst, theirs, n);
                sync_stream();
            } else {
                token_recv();
                copy(dst, theirs, n);
                sync_stream();
                token_send();
            }
            break;
        }
    }
    double t = (wall_seconds() - t0) / iters;
    double r = t;
    MPI_Bcast(&r, 1, MPI_DOUBLE, shape == COPY ? 1 : 0, MPI_COMM_WORLD);
    return shape == PINGPONG ? r / 2 : r;
}

static int check_copy(size_t n, CUdeviceptr dst, int seed)
{
    unsigned char *h = malloc(n ? n : 1);
    int bad = 0;
    CU(cuMemcpyDtoH(h, dst, n));
    for (size_t k = 0; k < n; k++)
        if (h[k] != (unsigned char)(k * 7 + seed)) bad++;
    free(h);
    return bad;
}

int main(int argc, char **argv)
{
    size_t lo = 1, hi = 64 << 20, cap = 1ul << 30;
    int window = 64, iters = 100, warmup = 10, reps = 5, check = 0, nranks, opt, errors = 0;
    const char *out = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "m:w:i:x:r:o:ch")) != -1) {
        switch (opt) {
        case 'm': {
            char *colon = strchr(optarg, ':');
            lo = parse_size(optarg);
            hi = colon ? parse_size(colon + 1) : lo;
            break;
        }
        case 'w': window = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'x': warmup = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'o': out = optarg; break;
        case 'c': check = 1; break;
        default:
            if (me == 0) fprintf(stderr, "usage: floor [-m MIN:MAX] [-w WINDOW] [-i ITERS] [-x WARMUP] [-r REPS] [-c] [-o out.json]\n");
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (nranks != 2 || lo < 1 || hi < lo || window < 1 || iters < 1 || reps < 1) {
        if (me == 0) fprintf(stderr, "floor: needs exactly 2 ranks and sizes 1 <= MIN <= MAX\n");
        MPI_Finalize();
        return 2;
    }
    find_real();
    struct machine m;
    machine_gather(&m, me, nranks);
    if (!m.have_dev) {
        if (me == 0) fprintf(stderr, "floor: no GPU\n");
        MPI_Finalize();
        return 1;
    }
    cudaFree(0); /* the primary context, current from here on */
    peer = 1 - me;
    CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    /* Each rank exports one buffer of the largest size; rank 1 receives a window into an arena
     * of one buffer per message, the window cut to 1 GiB / SIZE as bench/bw.c cuts its own. */
    size_t arena = (size_t)window * hi < cap ? (size_t)window * hi : (cap > hi ? cap : hi);
    CUdeviceptr exported, dst, theirs;
    CU(cuMemAlloc(&exported, hi));
    CU(cuMemAlloc(&dst, me == 1 ? arena : hi));
    CUipcMemHandle h, hp;
    CU(cuIpcGetMemHandle(&h, exported));
    MPI_Sendrecv(&h, sizeof h, MPI_BYTE, peer, 1, &hp, sizeof hp, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* cuda.h names the current entry point so behind a macro; the stand-in driver's header
     * declares it by that name alone */
    CU(cuIpcOpenMemHandle_v2(&theirs, hp, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));

    FILE *json = NULL;
    if (me == 0 && out && !(json = fopen(out, "w"))) {
        fprintf(stderr, "floor: cannot write %s\n", out);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (me == 0) {
        machine_print(&m, "floor", NULL, real_lib);
        printf("# CUDA IPC between the ranks; MPI carries 4-byte tokens only. Times in us, bandwidth in MB/s\n");
        printf("%-10s %10s %10s %10s %12s %12s %6s %12s\n", "size", "copy_us", "msg_us", "pp_us", "copy_mbs",
               "msg_mbs", "win", "window_mbs");
    }
    if (json) {
        fprintf(json, "{\n  \"benchmark\": \"floor\",\n");
        machine_json(json, &m, NULL, real_lib, nranks);
        fprintf(json, "  \"parameters\": {\"window\": %d, \"iterations\": %d, \"warmup\": %d, \"reps\": %d},\n  \"results\": [",
                window, iters, warmup, reps);
    }
    int first = 1;
    /* powers of 4 from MIN, MAX, and 8 bytes (the size small-message latencies are quoted at) */
    size_t sizes[40];
    int nsz = 0;
    for (size_t n = lo; nsz < 36; n *= 4) {
        if (lo <= 8 && n > 8 && (nsz == 0 || sizes[nsz - 1] < 8)) sizes[nsz++] = 8;
        sizes[nsz++] = n < hi ? n : hi;
        if (n >= hi) break;
    }
    for (int i = 0; i < nsz; i++) {
        size_t n = sizes[i];
        if (i > 0 && n == sizes[i - 1]) continue;
        int it = n > (1 << 20) ? iters / 10 : iters;
        if (it < 10) it = 10;
        int w = (int)((size_t)window * n > arena ? arena / n : (size_t)window);
        if (check) {
            if (me == 0) {
                unsigned char *p = malloc(n);
                for (size_t k = 0; k < n; k++) p[k] = (unsigned char)(k * 7 + (int)(n & 0xff));
                CU(cuMemcpyHtoD(exported, p, n));
                free(p);
            } else {
                CU(cuMemsetD8(dst, 0x5a, n));
            }
        }
        double res[4];
        for (int s = 0; s < 4; s++) {
            double v[64];
            int nw = s == WINDOW ? w : 1;
            block((enum shape)s, warmup, n, nw, dst, theirs);
            for (int r = 0; r < reps && r < 64; r++) v[r] = block((enum shape)s, it, n, nw, dst, theirs);
            res[s] = median(v, reps < 64 ? reps : 64);
            if (s == COPY && check && me == 1) errors += check_copy(n, dst, (int)(n & 0xff));
        }
        if (me == 0) {
            double mbs[3] = {n / res[COPY] / 1e6, n / res[MSG] / 1e6, (double)w * n / res[WINDOW] / 1e6};
            printf("%-10zu %10.2f %10.2f %10.2f %12.0f %12.0f %6d %12.0f\n", n, res[COPY] * 1e6, res[MSG] * 1e6,
                   res[PINGPONG] * 1e6, mbs[0], mbs[1], w, mbs[2]);
            if (json)
                fprintf(json, "%s\n    {\"size\": %zu, \"copy_us\": %.3f, \"msg_us\": %.3f, \"pingpong_us\": %.3f, "
                              "\"copy_mbs\": %.1f, \"msg_mbs\": %.1f, \"window\": %d, \"window_mbs\": %.1f}",
                        first ? "" : ",", n, res[COPY] * 1e6, res[MSG] * 1e6, res[PINGPONG] * 1e6, mbs[0], mbs[1], w, mbs[2]);
            fflush(stdout);
        }
        first = 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (json) {
        fprintf(json, "\n  ],\n  \"check_errors\": %d\n}\n", errors);
        fclose(json);
    }
    if (me == 0 && check) printf("# data check: %d wrong bytes\n", errors);
    MPI_Barrier(MPI_COMM_WORLD);
    cuIpcCloseMemHandle(theirs);
    cuMemFree(dst);
    cuMemFree(exported);
    MPI_Finalize();
    return errors ? 1 : 0;
}
