/* bench/bw.c -- OSU-style bandwidth between ranks 0 and 1 (osu_bw; with -b, osu_bibw), five
 * ways side by side in one run, over the same sizes:
 *
 *   (a) host     host buffers through the MPI library's own PMPI_Isend/PMPI_Irecv/PMPI_Waitall,
 *                bypassing the shim even when it is preloaded (found via dladdr(MPI_Comm_rank)
 *                -> dlopen(RTLD_NOLOAD) -> dlsym, as bench/pingpong.c does): the host ceiling
 *   (b) device   device buffers (cudaMalloc) through MPI_Isend/MPI_Irecv/MPI_Waitall: needs the
 *                shim (dlsym(RTLD_DEFAULT, "cudampi_version")); skipped without it unless -f
 *   (c) manual, pageable   the recipe without the shim: the sender cudaMemcpy's each message of
 *                the window to a malloc'd host buffer and then posts its PMPI_Isend; the
 *                receiver, after PMPI_Waitall, cudaMemcpy's each received message to the device
 *   (d) manual, pinned     the same with cudaMallocHost buffers
 *   (e) nccl     ncclSend/ncclRecv of the window in one group on device buffers, then a stream
 *                synchronisation: the GPU-native reference, where NCCL can be loaded and every
 *                rank has a GPU of its own (bench/nccl.h)
 *
 * Per size and way: rank 0 posts a window of W sends, rank 1 the W matching receives, both wait
 * for all of them, then rank 1 sends rank 0 a 4-byte ack (through the real PMPI_Send/PMPI_Recv
 * in every way). Bandwidth = size * W * ITERS / time on rank 0, in MB/s (10^6 bytes/s).
 * -b: both ranks post W receives and W sends and wait for all 2W (no ack); the bandwidth counts
 * both directions, as osu_bibw's does.
 * -d cuda [D|H] [D|H] (default D D) or -d host: where ranks 0 and 1 keep the buffers of way (b),
 * as osu_bw's -d takes it; (b) with host buffers measures what the shim costs on host memory.
 *
 * Every message of a window has its own buffer (the receives never overlap, the manual recipe
 * never overwrites a host buffer that a pending send still reads). Where W * size exceeds
 * -B BYTES (default 1G) that size runs with the window cut to BYTES / size for all four ways;
 * the table's "win" column shows the window used.
 *
 * -c checks the data: each iteration the sender fills message k of the window with a pattern
 * that depends on the iteration, on k and on the sender, the receiver compares every byte (device buffers are
 * copied back first; the manual ways are checked in device memory, where the recipe leaves
 * them); mismatches are reported on stderr and the exit status is 1. The times of a -c run
 * include the filling and checking.
 *
 * Build (stand-in driver, no GPU):
 *   mpicc -O2 bench/bw.c -o build/bw -Itests/fixture/include \
 *         -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib -lcudart -lcuda -ldl
 * Build (real GPU):
 *   mpicc -O2 bench/bw.c -o build/bw -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl
 * Run:
 *   mpirun -np 2 -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/bw \
 *          [-b] [-d cuda D D] [-m MIN:MAX] [-2] [-w WINDOW] [-i ITERS] [-x WARMUP] [-B BYTES]
 *          [-W WAYS] [-r ROUNDS] [-c] [-f] [-o out.json]
 *   MPICH: LD_PRELOAD=$PWD/target/release/libcudampi.so mpirun -n 2 build/bw ...
 *
 * -W host,device,pageable,pinned,nccl runs only the ways named (default: all).
 *
 * -r ROUNDS (default 1) runs the ways in turn ROUNDS times at each size, the first way rotating
 * from round to round, and reports each way's median over the rounds, and the median over the
 * rounds of device(shim) / host(real) within one round (column dev/host, JSON
 * device_to_host_median): the host MPI's own figure moves by a quarter from run to run on a
 * shared machine, and a ratio taken within one round cancels what the machine does meanwhile.
 * The JSON keeps every round's figure (KEY_rounds).
 *
 * Sizes take k/M/G suffixes (powers of 1024). Defaults: 1 B .. 64 MiB by powers of 4 (-2: by
 * powers of 2; MAX is always included), WINDOW 64, ITERS 100 and WARMUP 10 up to 64 KiB,
 * above that both shrink in proportion to the size (at least 4 iterations and 2 warm-ups).
 * -f runs the device way without the shim (a non-CUDA-aware MPI crashes; a CUDA-aware one
 * gives its own figure). Each rank uses GPU (node-local rank % device count); ranks above 1
 * only wait.
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

typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*waitall_fn)(int, MPI_Request *, MPI_Status *);
typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef const char *(*version_fn)(void);

static int rank, nranks;
static isend_fn real_isend;
static irecv_fn real_irecv;
static waitall_fn real_waitall;
static send_fn real_send;
static recv_fn real_recv;
static const char *real_lib = "(not found: MPI_* used instead)";

#include "machine.h"

/* The real library's PMPI functions (real_mpi_library), else the MPI_* ones. */
static void find_real(void)
{
    const char *path = NULL;
    void *h = real_mpi_library(&path);
    isend_fn is = h ? (isend_fn)dlsym(h, "PMPI_Isend") : NULL;
    irecv_fn ir = h ? (irecv_fn)dlsym(h, "PMPI_Irecv") : NULL;
    waitall_fn wa = h ? (waitall_fn)dlsym(h, "PMPI_Waitall") : NULL;
    send_fn s = h ? (send_fn)dlsym(h, "PMPI_Send") : NULL;
    recv_fn r = h ? (recv_fn)dlsym(h, "PMPI_Recv") : NULL;
    int found = is && ir && wa && s && r;
    real_isend = found ? is : (isend_fn)MPI_Isend;
    real_irecv = found ? ir : (irecv_fn)MPI_Irecv;
    real_waitall = found ? wa : (waitall_fn)MPI_Waitall;
    real_send = found ? s : (send_fn)MPI_Send;
    real_recv = found ? r : (recv_fn)MPI_Recv;
    if (found) real_lib = path;
}
#include "nccl.h"

/* ---- data pattern for -c ----
 * Message bytes are base[s .. s+n) with base[x] = x + 3 (x >> 8) (mod 256), period 65536, and
 * s < 256 chosen from the iteration and the window slot, so that two messages with different
 * s differ in their first byte already and a shifted copy differs everywhere. */
static unsigned char *base;
static void make_base(size_t n)
{
    base = malloc(n + 256);
    for (size_t x = 0; x < n + 256; x++) base[x] = (unsigned char)(x + 3 * (x >> 8));
}
static unsigned seed(int iter, int slot, int src)
{
    return (7u + (unsigned)iter * 131u + (unsigned)slot * 29u + (unsigned)src * 97u) & 255u;
}

enum way { W_HOST, W_DEVICE, W_PAGEABLE, W_PINNED, W_NCCL, W_N };
static const char *way_key[W_N] = {"host_real_mbs", "device_shim_mbs", "manual_pageable_mbs",
                                   "manual_pinned_mbs", "nccl_mbs"};
static const char *way_name[W_N] = {"host(real)", "device(shim)", "manual-page", "manual-pin", "nccl"};
static const char *way_arg[W_N] = {"host", "device", "pageable", "pinned", "nccl"};

static int bidir;                  /* -b: both ranks send a window and receive one */
static char place[2] = {'D', 'D'}; /* -d: the shim column's buffers on rank 0 and rank 1 */

/* Is the program's data of this way in device memory on this rank? */
static int on_device(int way) { return way != W_HOST && (way != W_DEVICE || place[rank] == 'D'); }

/* Ranks 0 and 1: the program's data (device and host), the manual recipe's pinned staging
 * buffer; each holds the send slots and, from `half` on in -b runs, the receive slots. */
struct bufs {
    char *dev, *host, *pinned, *scratch;
    size_t half;
};

static long errors;
/* MPI_STATUSES_IGNORE through a variable: GCC's access attributes on MPICH's MPI_Waitall
 * otherwise warn that the constant points at no statuses */
MPI_Status *bw_no_statuses;
static void report(int way, size_t size, int iter, int slot, const unsigned char *got, const unsigned char *want)
{
    size_t off = 0;
    while (off < size && got[off] == want[off]) off++;
    if (off == size) return;
    if (errors < 5)
        fprintf(stderr, "bw: rank %d: %s, %zu B, iteration %d, window slot %d: byte %zu is 0x%02x, expected 0x%02x\n",
                rank, way_name[way], size, iter, slot, off, got[off], want[off]);
    errors++;
}

static void put(int dev, char *dst, const void *src, size_t n)
{
    if (dev)
        cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
    else
        memcpy(dst, src, n);
}

/* One bandwidth measurement of one way at one size; MB/s on rank 0 (both directions counted
 * in -b runs), 0 elsewhere. */
static double bw(int way, size_t size, int win, int iters, int warmup, int check, const struct bufs *b,
                 MPI_Request *req)
{
    const int n = (int)size, peer = 1 - rank, tag = 100, acktag = 101;
    const int sends = bidir || rank == 0, recvs = bidir || rank == 1, dev = on_device(way);
    const int manual = way == W_PAGEABLE || way == W_PINNED;
    const size_t rdelta = bidir ? b->half : 0;
    char *sbuf = dev ? b->dev : b->host, *rbuf = sbuf + rdelta;
    char *ssta = way == W_PINNED ? b->pinned : b->host, *rsta = ssta + rdelta;
    int ack = 0;
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank > 1) return 0;
    if (check && recvs) { /* poison the receive side once */
        if (dev) cudaMemset(rbuf, 0xee, size * (size_t)win);
        else memset(rbuf, 0xee, size * (size_t)win);
        if (manual) memset(rsta, 0xee, size * (size_t)win);
        cudaDeviceSynchronize(); /* cudaMemset is on the legacy stream, NCCL on a non-blocking one */
    }
    for (int i = -warmup; i < iters; i++) {
        if (i == 0) t0 = MPI_Wtime();
        if (check && sends)
            for (int k = 0; k < win; k++) put(dev, sbuf + (size_t)k * size, base + seed(i, k, rank), size);
        int nreq = 0;
        if (way == W_NCCL) {
            nccl_check(nccl.group_start(), "ncclGroupStart");
            for (int k = 0; recvs && k < win; k++)
                nccl_check(nccl.recv(rbuf + (size_t)k * size, size, NCCL_CHAR, peer, nccl.comm, nccl.stream), "ncclRecv");
            for (int k = 0; sends && k < win; k++)
                nccl_check(nccl.send(sbuf + (size_t)k * size, size, NCCL_CHAR, peer, nccl.comm, nccl.stream), "ncclSend");
            nccl_check(nccl.group_end(), "ncclGroupEnd");
            nccl_sync();
        } else {
            for (int k = 0; recvs && k < win; k++) {
                size_t o = (size_t)k * size;
                if (way == W_DEVICE)
                    MPI_Irecv(rbuf + o, n, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[nreq++]);
                else
                    real_irecv((manual ? rsta : rbuf) + o, n, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[nreq++]);
            }
            for (int k = 0; sends && k < win; k++) {
                size_t o = (size_t)k * size;
                if (way == W_DEVICE) {
                    MPI_Isend(sbuf + o, n, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[nreq++]);
                } else if (manual) {
                    cudaMemcpy(ssta + o, sbuf + o, size, cudaMemcpyDeviceToHost);
                    real_isend(ssta + o, n, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[nreq++]);
                } else {
                    real_isend(sbuf + o, n, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[nreq++]);
                }
            }
            if (way == W_DEVICE)
                MPI_Waitall(nreq, req, bw_no_statuses);
            else
                real_waitall(nreq, req, bw_no_statuses);
            for (int k = 0; manual && recvs && k < win; k++)
                cudaMemcpy(rbuf + (size_t)k * size, rsta + (size_t)k * size, size, cudaMemcpyHostToDevice);
        }
        if (!bidir) {
            if (rank == 0)
                real_recv(&ack, 1, MPI_INT, peer, acktag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                real_send(&ack, 1, MPI_INT, peer, acktag, MPI_COMM_WORLD);
        }
        if (check && recvs)
            for (int k = 0; k < win; k++) {
                const unsigned char *got = (const unsigned char *)rbuf + (size_t)k * size;
                if (dev) {
                    cudaMemcpy(b->scratch, got, size, cudaMemcpyDeviceToHost);
                    got = (const unsigned char *)b->scratch;
                }
                const unsigned char *want = base + seed(i, k, peer);
                if (memcmp(got, want, size)) report(way, size, i, k, got, want);
            }
    }
    double t = MPI_Wtime() - t0;
    return rank == 0 ? (double)size * win * iters * (bidir ? 2 : 1) / t / 1e6 : 0;
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: bw [-b] [-d cuda [D|H] [D|H] | -d host] [-m MIN:MAX] [-2] [-w WINDOW] [-i ITERS] "
                        "[-x WARMUP] [-B BYTES] [-W WAYS] [-r ROUNDS] [-c] [-f] [-o out.json]\n");
}

int main(int argc, char **argv)
{
    size_t minsz = 1, maxsz = 64u << 20, cap = 1u << 30;
    int iters = 100, warmup = 10, window = 64, rounds = 1, check = 0, force_dev = 0, factor = 4;
    const char *out = NULL;
    int ways = (1 << W_N) - 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    int opt;
    while ((opt = getopt(argc, argv, "bd:m:2w:i:x:B:W:r:cfo:h")) != -1) {
        switch (opt) {
        case 'b': bidir = 1; break;
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
        case '2': factor = 2; break;
        case 'w': window = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'x': warmup = atoi(optarg); break;
        case 'B': cap = parse_size(optarg); break;
        case 'W':
            ways = 0;
            for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ","))
                for (int w = 0; w < W_N; w++)
                    if (!strcmp(t, way_arg[w])) ways |= 1 << w;
            break;
        case 'r': rounds = atoi(optarg); break;
        case 'c': check = 1; break;
        case 'f': force_dev = 1; break;
        case 'o': out = optarg; break;
        default:
            usage();
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (minsz < 1) minsz = 1;
    if (window < 1 || iters < 1 || warmup < 0 || rounds < 1 || rounds > 99 || maxsz < minsz || maxsz > (size_t)1 << 30) {
        usage();
        MPI_Finalize();
        return 2;
    }
    if (nranks < 2) {
        if (rank == 0) fprintf(stderr, "bw: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    bw_no_statuses = MPI_STATUSES_IGNORE;
    find_real();
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    int shim = ver != NULL;

    struct machine m;
    machine_gather(&m, rank, nranks);
    int have_dev = m.have_dev;

    /* sizes and windows */
    int nsz = 0;
    size_t sizes[80];
    int wins[80];
    for (size_t s = minsz; s <= maxsz && nsz < 79; s *= (size_t)factor) sizes[nsz++] = s;
    if (sizes[nsz - 1] != maxsz) sizes[nsz++] = maxsz;
    size_t bufbytes = 0;
    for (int i = 0; i < nsz; i++) {
        size_t w = cap / sizes[i];
        wins[i] = w >= (size_t)window ? window : w < 1 ? 1 : (int)w;
        if ((size_t)wins[i] * sizes[i] > bufbytes) bufbytes = (size_t)wins[i] * sizes[i];
    }

    /* buffers: uni-directional, rank 0's are the sending slots, rank 1's the receiving ones;
     * -b: both, the receiving slots in the second half */
    char *dbuf = NULL, *hbuf = NULL, *pinned = NULL, *scratch = NULL;
    int dev_ok = 0, have_pinned = 0;
    const size_t half = bufbytes;
    if (bidir) bufbytes *= 2;
    if (rank <= 1) {
        hbuf = malloc(bufbytes);
        if (!hbuf) {
            fprintf(stderr, "bw: rank %d: cannot allocate %zu bytes\n", rank, bufbytes);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        memset(hbuf, 1, bufbytes);
        if (have_dev && cudaMalloc((void **)&dbuf, bufbytes) != cudaSuccess) {
            dbuf = NULL;
            have_dev = 0;
        }
        if (have_dev) {
            cudaMemset(dbuf, 1, bufbytes);
            if (cudaMallocHost((void **)&pinned, bufbytes) == cudaSuccess) {
                memset(pinned, 1, bufbytes);
                have_pinned = 1;
            } else
                pinned = NULL;
        }
        if (check) {
            make_base(maxsz);
            scratch = malloc(maxsz);
        }
    }
    /* ranks 0 and 1 must agree on what runs (the others only vote yes) */
    int lo[2];
    int mine[2] = {rank <= 1 ? have_dev : 1, rank <= 1 ? have_pinned : 1};
    MPI_Allreduce(mine, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    have_dev = lo[0];
    have_pinned = lo[1];
    dev_ok = (have_dev || (place[0] == 'H' && place[1] == 'H')) && (shim || force_dev);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)window);
    nccl_open(&m, rank, nranks);
    const struct bufs b = {dbuf, hbuf, pinned, scratch, half};
    const char *name = bidir ? "bibw" : "bw";

    if (rank == 0) {
        machine_print(&m, name, shim ? ver() : NULL, real_lib);
        printf("# ranks: %d (%s); window %d; iterations %d, warm-up %d (fewer above 64 KiB)%s\n", nranks,
               bidir ? "ranks 0 and 1 send to each other" : "rank 0 sends to rank 1", window, iters, warmup,
               check ? "; checking the data (-c)" : "");
        printf("# device(shim) buffers: rank 0 %s, rank 1 %s (-d); nccl: %s\n", place[0] == 'D' ? "device" : "host",
               place[1] == 'D' ? "device" : "host", nccl.why);
        if (!have_dev) printf("# no usable CUDA device on ranks 0 and 1: device and manual columns skipped\n");
        if (have_dev && !dev_ok) printf("# device column skipped: the shim is not loaded (use -f to force)\n");
        fflush(stdout);
    }

    double (*res)[W_N] = calloc((size_t)nsz, sizeof *res);
    double (*per)[W_N][100] = calloc((size_t)nsz, sizeof *per); /* every round's figure */
    double *ratio = calloc((size_t)nsz, sizeof *ratio);          /* median of device / host */
    int *its = calloc((size_t)nsz, sizeof *its);
    for (int i = 0; i < nsz; i++) {
        size_t s = sizes[i];
        int it = iters, wu = warmup;
        if (s > 65536) {
            it = (int)((double)iters * 65536 / (double)s);
            wu = (int)((double)warmup * 65536 / (double)s);
            if (it < 4) it = 4;
            if (wu < 2) wu = 2;
        }
        its[i] = it;
        int run[W_N];
        for (int w = 0; w < W_N; w++) {
            res[i][w] = NAN;
            run[w] = (ways & 1 << w) && !(w == W_DEVICE && !dev_ok) && !((w == W_PAGEABLE || w == W_PINNED) && !have_dev) &&
                     !(w == W_PINNED && !have_pinned) && !(w == W_NCCL && !nccl.on);
        }
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < W_N; k++) {
                int w = (k + r) % W_N;
                if (run[w]) per[i][w][r] = bw(w, s, wins[i], it, wu, check, &b, req);
            }
        double v[100];
        for (int w = 0; w < W_N; w++) {
            if (!run[w]) continue;
            memcpy(v, per[i][w], sizeof(double) * (size_t)rounds);
            res[i][w] = median(v, rounds);
        }
        ratio[i] = NAN;
        if (run[W_DEVICE] && run[W_HOST] && rank == 0) {
            for (int r = 0; r < rounds; r++) v[r] = per[i][W_DEVICE][r] / per[i][W_HOST][r];
            ratio[i] = median(v, rounds);
        }
    }

    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) {
                perror(out);
            } else {
                fprintf(f, "{\n  \"bench\": \"%s\",\n  \"unit\": \"MB/s (10^6 bytes/s), %s\",\n", name,
                        bidir ? "both directions together" : "rank 0 to rank 1");
                machine_json(f, &m, shim ? ver() : NULL, real_lib, nranks);
                fprintf(f, "  \"parameters\": {\"nranks\": %d, \"window\": %d, \"iterations\": %d, \"warmup\": %d, "
                           "\"min_size\": %zu, \"max_size\": %zu, \"size_factor\": %d, \"window_bytes_cap\": %zu, \"rounds\": %d, "
                           "\"check\": %s, \"force_device\": %s, \"placement\": \"%c %c\", \"nccl\": \"%s\"},\n",
                        nranks, window, iters, warmup, minsz, maxsz, factor, cap, rounds, check ? "true" : "false",
                        force_dev ? "true" : "false", place[0], place[1], nccl.why);
                fprintf(f, "  \"check_errors\": %ld,\n  \"results\": [\n", check ? total : 0);
                for (int i = 0; i < nsz; i++) {
                    fprintf(f, "    {\"size\": %zu, \"window\": %d, \"iterations\": %d", sizes[i], wins[i], its[i]);
                    for (int w = 0; w < W_N; w++) {
                        fprintf(f, ", \"%s\": ", way_key[w]);
                        if (isnan(res[i][w]))
                            fprintf(f, "null");
                        else
                            fprintf(f, "%.3f", res[i][w]);
                    }
                    if (!isnan(ratio[i])) fprintf(f, ", \"device_to_host_median\": %.4f", ratio[i]);
                    for (int w = 0; rounds > 1 && w < W_N; w++) {
                        if (isnan(res[i][w])) continue;
                        fprintf(f, ", \"%s_rounds\": [", way_key[w]);
                        for (int r = 0; r < rounds; r++) fprintf(f, "%s%.3f", r ? ", " : "", per[i][w][r]);
                        fprintf(f, "]");
                    }
                    fprintf(f, "}%s\n", i + 1 < nsz ? "," : "");
                }
                fprintf(f, "  ]\n}\n");
                fclose(f);
                printf("# wrote %s\n", out);
            }
        }
        if (check)
            printf("# data check: %s (%ld bad messages)\n", total ? "FAILED" : "passed", total);
        printf("\n# %s in MB/s (10^6 bytes/s), %s%s\n", bidir ? "bi-directional bandwidth" : "bandwidth",
               bidir ? "both directions together" : "rank 0 -> rank 1",
               check ? "; -c: includes filling and checking the buffers" : "");
        if (rounds > 1) printf("# each way's median over %d rounds, the ways in turn; dev/host: the median of the rounds' ratios\n", rounds);
        printf("# %10s %4s %6s", "bytes", "win", "iters");
        for (int w = 0; w < W_N; w++) printf(" %13s", way_name[w]);
        if (rounds > 1) printf(" %8s", "dev/host");
        printf("\n");
        for (int i = 0; i < nsz; i++) {
            printf("  %10zu %4d %6d", sizes[i], wins[i], its[i]);
            for (int w = 0; w < W_N; w++)
                if (isnan(res[i][w]))
                    printf(" %13s", "-");
                else
                    printf(" %13.2f", res[i][w]);
            if (rounds > 1) printf(" %8.3f", ratio[i]);
            printf("\n");
        }
        fflush(stdout);
    }
    nccl_close();
    free(res);
    free(per);
    free(ratio);
    free(its);
    free(m.all);
    free(req);
    free(hbuf);
    free(scratch);
    free(base);
    if (pinned) cudaFreeHost(pinned);
    if (dbuf) cudaFree(dbuf);
    MPI_Finalize();
    return total ? 1 : 0;
}
