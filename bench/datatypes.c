/* bench/datatypes.c -- non-contiguous datatypes on device buffers, three ways side by side:
 *
 *   (a) device   device buffers handed to MPI with the derived datatype (needs the shim:
 *                dlsym(RTLD_DEFAULT, "cudampi_version"); skipped without it)
 *   (b) manual   the recipe without the shim: cudaMemcpy2D (or cudaMemcpy where the block is
 *                contiguous) packs the payload into pinned host memory, the MPI library's own
 *                function moves it as plain doubles, cudaMemcpy2D unpacks it on the device
 *   (c) host     host buffers with the same datatypes through the MPI library's own function
 *                (found as bench/coll.c finds it, bypassing the shim): the host ceiling
 *
 * Cases (every rank exchanges with rank ^ 1; run on an even number of ranks):
 *   column N      one column of an N x N row-major double matrix, MPI_Type_vector(N, 1, N,
 *                 MPI_DOUBLE), MPI_Sendrecv of column 0 into column N-1 (-n N,N,..: default
 *                 1024,4096,16384)
 *   yz/xz/xy C    a face of a C^3 double cube [x][y][z] (-c C: default 512) with
 *                 MPI_Type_create_subarray, MPI_Sendrecv of face 0 into face C-1: y-z is one
 *                 contiguous block, x-z C rows of C doubles, x-y C^2 single doubles
 *   pencil G      MPI_Alltoallw transpose of a G^3 double grid from x-slabs to y-slabs (-g G:
 *                 default 256; G divisible by the ranks): each peer's send block a subarray of
 *                 the x-slab (a pitched block), each receive block one of the y-slab (whole
 *                 x-planes), as heFFTe and P3DFFT build them; the manual way packs each peer's
 *                 block with cudaMemcpy2D and moves them with the library's MPI_Alltoall
 *   indexed N     an MPI_Type_indexed of N irregular blocks of 1-4 doubles with gaps of 0-3
 *                 doubles (-b N,N,..: default 1024,16384), MPI_Sendrecv from the first half of
 *                 an array into the second: no pitched copy fits it, so the manual way stages
 *                 the type's whole span (one cudaMemcpy each way, the gaps read first so that
 *                 the copy back keeps them) and the library packs on the host
 *
 * Each call is timed alone between MPI_Barriers; the table shows, per way, the median over
 * ITERS (-i, default 20) calls after WARMUP (-x, default 3) untimed ones, the maximum over the
 * ranks, in microseconds, and the device way's ratio to the manual recipe. -k checks the data
 * once per case: the device way's receive region, copied back, must equal the host way's.
 * -o FILE writes the results as JSON.
 *
 * Build (stand-in driver, no GPU):
 *   mpicc -O2 -DFAKECUDA_FIXTURE bench/datatypes.c -o build/datatypes -Itests/fixture/include \
 *         -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib -lcudart -lcuda -ldl
 * Build (real GPU):
 *   mpicc -O2 bench/datatypes.c -o build/datatypes -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl
 * Run:
 *   mpirun -np 2 -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/datatypes \
 *          [-n 1024,4096,16384] [-b 1024,16384] [-c 512] [-g 256] [-i ITERS] [-x WARMUP] [-k] [-o out.json]
 *   Stand-in sizes: -n 64,256 -b 64,512 -c 32 -g 32 -i 3 -x 1
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "machine.h"

typedef int (*sendrecv_fn)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int, MPI_Comm,
                           MPI_Status *);
typedef int (*alltoall_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int (*alltoallw_fn)(const void *, const int *, const int *, const MPI_Datatype *, void *, const int *,
                            const int *, const MPI_Datatype *, MPI_Comm);
typedef const char *(*version_fn)(void);

static int rank, nranks, peer, iters = 20, warmup = 3, check;
static sendrecv_fn real_sendrecv = (sendrecv_fn)MPI_Sendrecv;
static alltoall_fn real_alltoall = (alltoall_fn)MPI_Alltoall;
static alltoallw_fn real_alltoallw = (alltoallw_fn)MPI_Alltoallw;
static const char *real_lib = "(not found: MPI_* used instead)";
static int shim;

enum { W_DEVICE, W_MANUAL, W_HOST, W_N };
static const char *way_key[W_N] = {"device_shim_us", "manual_us", "host_us"};

#define MAXROWS 16
struct row {
    char name[48];
    size_t payload;
    double us[W_N];
    int checked; /* -1 not checked, 0 mismatch, 1 equal */
};
static struct row rows[MAXROWS];
static int nrows;

static void die(const char *what)
{
    fprintf(stderr, "datatypes: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#define CU(call)                                                                                     \
    do {                                                                                             \
        if ((call) != cudaSuccess) die(#call);                                                       \
    } while (0)

static void find_real(void)
{
    const char *path = NULL;
    void *h = real_mpi_library(&path);
    if (!h) return;
    sendrecv_fn s = (sendrecv_fn)dlsym(h, "PMPI_Sendrecv");
    alltoall_fn a = (alltoall_fn)dlsym(h, "PMPI_Alltoall");
    alltoallw_fn w = (alltoallw_fn)dlsym(h, "PMPI_Alltoallw");
    if (s && a && w) {
        real_sendrecv = s;
        real_alltoall = a;
        real_alltoallw = w;
        real_lib = path;
    }
}

/* Times op(arg) ITERS times after WARMUP; the median over the iterations, max over the ranks. */
static double timed(void (*op)(void *), void *arg)
{
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < warmup + iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = wall_seconds();
        op(arg);
        double t1 = wall_seconds();
        if (i >= warmup) t[i - warmup] = (t1 - t0) * 1e6;
    }
    double mine = median(t, iters), worst = 0;
    free(t);
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

/* ---- point-to-point: a block of a device array, sent with a datatype, received with another */
struct p2p {
    MPI_Datatype send_type, recv_type;
    char *dev, *host;       /* the array on the device and on the host */
    char *psend, *precv;    /* pinned packed buffers of the manual way */
    size_t bytes;           /* payload */
    /* the payload as `rows` rows of `width` bytes `pitch` apart, from `send_at` / `recv_at` */
    size_t width, height, pitch, send_at, recv_at;
    /* nonzero: no pitched layout; the manual way stages this span from send_at / recv_at */
    size_t span;
};

static void p2p_device(void *a)
{
    struct p2p *p = a;
    MPI_Sendrecv(p->dev, 1, p->send_type, peer, 1, p->dev, 1, p->recv_type, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void p2p_manual(void *a)
{
    struct p2p *p = a;
    if (p->span) {
        CU(cudaMemcpy(p->psend, p->dev + p->send_at, p->span, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(p->precv, p->dev + p->recv_at, p->span, cudaMemcpyDeviceToHost));
        real_sendrecv(p->psend, 1, p->send_type, peer, 2, p->precv, 1, p->send_type, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CU(cudaMemcpy(p->dev + p->recv_at, p->precv, p->span, cudaMemcpyHostToDevice));
        return;
    }
    CU(cudaMemcpy2D(p->psend, p->width, p->dev + p->send_at, p->pitch, p->width, p->height, cudaMemcpyDeviceToHost));
    real_sendrecv(p->psend, (int)(p->bytes / 8), MPI_DOUBLE, peer, 2, p->precv, (int)(p->bytes / 8), MPI_DOUBLE, peer, 2,
                  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CU(cudaMemcpy2D(p->dev + p->recv_at, p->pitch, p->precv, p->width, p->width, p->height, cudaMemcpyHostToDevice));
}

static void p2p_host(void *a)
{
    struct p2p *p = a;
    real_sendrecv(p->host, 1, p->send_type, peer, 3, p->host, 1, p->recv_type, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void fill(char *dev, char *host, size_t n)
{
    for (size_t i = 0; i < n; i++) host[i] = (char)(i * 131 + (size_t)rank * 7 + (i >> 12));
    if (dev) CU(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));
}

/* Compares the device array with the host one after one call of each on the same contents. */
static int compare(char *dev, char *host, size_t n)
{
    char *got = malloc(n);
    if (!got) die("malloc");
    CU(cudaMemcpy(got, dev, n, cudaMemcpyDeviceToHost));
    int same = memcmp(got, host, n) == 0, all = 0;
    free(got);
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

static void run_p2p(const char *name, struct p2p *p, size_t array)
{
    MPI_Type_commit(&p->send_type);
    MPI_Type_commit(&p->recv_type);
    CU(cudaMalloc((void **)&p->dev, array));
    p->host = malloc(array);
    CU(cudaMallocHost((void **)&p->psend, p->span ? p->span : p->bytes));
    CU(cudaMallocHost((void **)&p->precv, p->span ? p->span : p->bytes));
    if (!p->host) die("malloc");
    fill(p->dev, p->host, array);
    struct row *r = &rows[nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->payload = p->bytes;
    r->checked = -1;
    if (check && shim) {
        p2p_device(p);
        p2p_host(p);
        r->checked = compare(p->dev, p->host, array);
    }
    r->us[W_DEVICE] = shim ? timed(p2p_device, p) : -1;
    r->us[W_MANUAL] = timed(p2p_manual, p);
    r->us[W_HOST] = timed(p2p_host, p);
    CU(cudaFree(p->dev));
    CU(cudaFreeHost(p->psend));
    CU(cudaFreeHost(p->precv));
    free(p->host);
    MPI_Type_free(&p->send_type);
    MPI_Type_free(&p->recv_type);
}

static void column(size_t n)
{
    struct p2p p = {0};
    MPI_Type_vector((int)n, 1, (int)n, MPI_DOUBLE, &p.send_type);
    MPI_Type_vector((int)n, 1, (int)n, MPI_DOUBLE, &p.recv_type);
    /* the receive type is the same column shifted to the last one */
    MPI_Datatype t = p.recv_type;
    MPI_Aint di = (MPI_Aint)((n - 1) * 8);
    int bl = 1;
    MPI_Type_create_hindexed(1, &bl, &di, t, &p.recv_type);
    MPI_Type_free(&t);
    p.bytes = n * 8;
    p.width = 8, p.height = n, p.pitch = n * 8, p.send_at = 0, p.recv_at = (n - 1) * 8;
    char name[48];
    snprintf(name, sizeof name, "column %zu", n);
    run_p2p(name, &p, n * n * 8);
}

static void indexed(size_t n)
{
    struct p2p p = {0};
    int *bl = malloc(n * sizeof *bl), *di = malloc(n * sizeof *di), at = 0;
    if (!bl || !di) die("malloc");
    for (size_t i = 0; i < n; i++) {
        bl[i] = 1 + (int)((i * 7) % 4);
        di[i] = at + (int)(i % 3);
        at = di[i] + bl[i] + (int)((i * 5) % 2);
        p.bytes += (size_t)bl[i] * 8;
    }
    MPI_Type_indexed((int)n, bl, di, MPI_DOUBLE, &p.send_type);
    free(bl);
    free(di);
    MPI_Aint lb, extent;
    MPI_Type_get_true_extent(p.send_type, &lb, &extent);
    p.span = (size_t)extent;
    MPI_Aint shift = (MPI_Aint)p.span;
    int one = 1;
    MPI_Type_create_hindexed(1, &one, &shift, p.send_type, &p.recv_type);
    p.send_at = 0, p.recv_at = p.span;
    char name[48];
    snprintf(name, sizeof name, "indexed %zu", n);
    run_p2p(name, &p, 2 * p.span);
}

/* face of a c^3 cube: dim 0 (y-z, x fixed), 1 (x-z, y fixed), 2 (x-y, z fixed) */
static void face(size_t c, int dim)
{
    struct p2p p = {0};
    int sizes[3] = {(int)c, (int)c, (int)c}, sub[3] = {(int)c, (int)c, (int)c}, s0[3] = {0, 0, 0}, s1[3] = {0, 0, 0};
    sub[dim] = 1;
    s1[dim] = (int)c - 1;
    MPI_Type_create_subarray(3, sizes, sub, s0, MPI_ORDER_C, MPI_DOUBLE, &p.send_type);
    MPI_Type_create_subarray(3, sizes, sub, s1, MPI_ORDER_C, MPI_DOUBLE, &p.recv_type);
    p.bytes = c * c * 8;
    size_t stride[3] = {c * c * 8, c * 8, 8};
    /* the payload as pitched rows: y-z one block, x-z c rows of c doubles, x-y c^2 doubles */
    if (dim == 0) p.width = c * c * 8, p.height = 1, p.pitch = p.width;
    if (dim == 1) p.width = c * 8, p.height = c, p.pitch = c * c * 8;
    if (dim == 2) p.width = 8, p.height = c * c, p.pitch = c * 8;
    p.send_at = 0, p.recv_at = (c - 1) * stride[dim];
    static const char *names[3] = {"y-z", "x-z", "x-y"};
    char name[48];
    snprintf(name, sizeof name, "%s face %zu^3", names[dim], c);
    run_p2p(name, &p, c * c * c * 8);
}

/* ---- MPI_Alltoallw transpose of x-slabs (g/P, g, g) into y-slabs (g, g/P, g) */
struct pencil {
    size_t g, b; /* grid edge, slab thickness g / ranks */
    MPI_Datatype *st, *rt;
    int *counts, *displs;
    char *dsend, *drecv, *hsend, *hrecv, *psend, *precv;
    size_t slab;
};

static void pencil_device(void *a)
{
    struct pencil *p = a;
    MPI_Alltoallw(p->dsend, p->counts, p->displs, p->st, p->drecv, p->counts, p->displs, p->rt, MPI_COMM_WORLD);
}

static void pencil_host(void *a)
{
    struct pencil *p = a;
    real_alltoallw(p->hsend, p->counts, p->displs, p->st, p->hrecv, p->counts, p->displs, p->rt, MPI_COMM_WORLD);
}

static void pencil_manual(void *a)
{
    struct pencil *p = a;
    size_t g = p->g, b = p->b, block = b * b * g * 8;
    /* peer q's block of the x-slab: for each of b x-planes, b*g contiguous doubles at y = q*b */
    for (int q = 0; q < nranks; q++)
        CU(cudaMemcpy2D(p->psend + (size_t)q * block, b * g * 8, p->dsend + (size_t)q * b * g * 8, g * g * 8, b * g * 8, b,
                        cudaMemcpyDeviceToHost));
    real_alltoall(p->psend, (int)(block / 8), MPI_DOUBLE, p->precv, (int)(block / 8), MPI_DOUBLE, MPI_COMM_WORLD);
    /* peer q's block of the y-slab is x-planes q*b .. q*b+b-1, contiguous: one copy for all */
    CU(cudaMemcpy(p->drecv, p->precv, p->slab, cudaMemcpyHostToDevice));
}

static void pencil(size_t g)
{
    struct pencil p = {0};
    if (g % (size_t)nranks) die("-g must be divisible by the number of ranks");
    p.g = g, p.b = g / (size_t)nranks, p.slab = p.b * g * g * 8;
    p.st = malloc(sizeof(MPI_Datatype) * (size_t)nranks);
    p.rt = malloc(sizeof(MPI_Datatype) * (size_t)nranks);
    p.counts = malloc(sizeof(int) * (size_t)nranks);
    p.displs = malloc(sizeof(int) * (size_t)nranks);
    for (int q = 0; q < nranks; q++) {
        int ssz[3] = {(int)p.b, (int)g, (int)g}, sub[3] = {(int)p.b, (int)p.b, (int)g}, ss[3] = {0, q * (int)p.b, 0};
        int rsz[3] = {(int)g, (int)p.b, (int)g}, rs[3] = {q * (int)p.b, 0, 0};
        MPI_Type_create_subarray(3, ssz, sub, ss, MPI_ORDER_C, MPI_DOUBLE, &p.st[q]);
        MPI_Type_create_subarray(3, rsz, sub, rs, MPI_ORDER_C, MPI_DOUBLE, &p.rt[q]);
        MPI_Type_commit(&p.st[q]);
        MPI_Type_commit(&p.rt[q]);
        p.counts[q] = 1;
        p.displs[q] = 0;
    }
    CU(cudaMalloc((void **)&p.dsend, p.slab));
    CU(cudaMalloc((void **)&p.drecv, p.slab));
    CU(cudaMallocHost((void **)&p.psend, p.slab));
    CU(cudaMallocHost((void **)&p.precv, p.slab));
    p.hsend = malloc(p.slab);
    p.hrecv = malloc(p.slab);
    if (!p.hsend || !p.hrecv) die("malloc");
    fill(p.dsend, p.hsend, p.slab);
    fill(p.drecv, p.hrecv, p.slab);
    struct row *r = &rows[nrows++];
    snprintf(r->name, sizeof r->name, "pencil %zu^3 alltoallw", g);
    r->payload = p.slab;
    r->checked = -1;
    if (check && shim) {
        pencil_device(&p);
        pencil_host(&p);
        r->checked = compare(p.drecv, p.hrecv, p.slab);
    }
    r->us[W_DEVICE] = shim ? timed(pencil_device, &p) : -1;
    r->us[W_MANUAL] = timed(pencil_manual, &p);
    r->us[W_HOST] = timed(pencil_host, &p);
    for (int q = 0; q < nranks; q++) {
        MPI_Type_free(&p.st[q]);
        MPI_Type_free(&p.rt[q]);
    }
    CU(cudaFree(p.dsend));
    CU(cudaFree(p.drecv));
    CU(cudaFreeHost(p.psend));
    CU(cudaFreeHost(p.precv));
    free(p.hsend);
    free(p.hrecv);
    free(p.st);
    free(p.rt);
    free(p.counts);
    free(p.displs);
}

static int parse_list(const char *s, size_t *out, int max)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        out[n++] = strtoul(p, (char **)&p, 10);
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t cols[8] = {1024, 4096, 16384}, cube = 512, grid = 256, blocks[8] = {1024, 16384};
    int ncols = 3, nblocks = 2;
    const char *out = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "n:b:c:g:i:x:ko:h")) != -1) {
        switch (opt) {
        case 'n': ncols = parse_list(optarg, cols, 8); break;
        case 'b': nblocks = parse_list(optarg, blocks, 8); break;
        case 'c': cube = parse_size(optarg); break;
        case 'g': grid = parse_size(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'x': warmup = atoi(optarg); break;
        case 'k': check = 1; break;
        case 'o': out = optarg; break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: datatypes [-n N,N,..] [-b N,N,..] [-c CUBE] [-g GRID] [-i ITERS] [-x WARMUP] [-k] [-o out.json]\n");
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (ncols < 0 || nblocks < 0 || iters < 1 || warmup < 0 || nranks % 2) {
        if (rank == 0) fprintf(stderr, "datatypes: bad arguments, or an odd number of ranks\n");
        MPI_Finalize();
        return 2;
    }
    peer = rank ^ 1;
    find_real();
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    shim = ver != NULL;
    struct machine m;
    machine_gather(&m, rank, nranks);
    if (!m.have_dev) die("no GPU");

    for (int i = 0; i < ncols; i++)
        if (cols[i] > 0) column(cols[i]);
    if (cube > 1)
        for (int d = 0; d < 3; d++) face(cube, d);
    if (grid > 0) pencil(grid);
    for (int i = 0; i < nblocks; i++)
        if (blocks[i] > 0) indexed(blocks[i]);

    if (rank == 0) {
        machine_print(&m, "datatypes", shim ? ver() : NULL, real_lib);
        printf("# ranks: %d; median of %d calls after %d, max over ranks, us per exchange%s\n", nranks, iters, warmup,
               check ? "; data checked (-k)" : "");
        printf("%-24s %12s %12s %12s %12s %10s %6s\n", "case", "payload B", "device", "manual", "host", "dev/man", "check");
        for (int i = 0; i < nrows; i++) {
            struct row *r = &rows[i];
            printf("%-24s %12zu %12.1f %12.1f %12.1f %10.2f %6s\n", r->name, r->payload, r->us[W_DEVICE], r->us[W_MANUAL],
                   r->us[W_HOST], r->us[W_DEVICE] > 0 ? r->us[W_DEVICE] / r->us[W_MANUAL] : -1,
                   r->checked < 0 ? "-" : r->checked ? "ok" : "DIFF");
        }
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) {
                perror(out);
            } else {
                fprintf(f, "{\n  \"bench\": \"datatypes\",\n  \"unit\": \"us per exchange, median over iterations, max over ranks\",\n");
                machine_json(f, &m, shim ? ver() : NULL, real_lib, nranks);
                fprintf(f, "  \"parameters\": {\"nranks\": %d, \"iterations\": %d, \"warmup\": %d, \"check\": %s},\n", nranks,
                        iters, warmup, check ? "true" : "false");
                fprintf(f, "  \"results\": [\n");
                for (int i = 0; i < nrows; i++) {
                    struct row *r = &rows[i];
                    fprintf(f, "    {\"case\": \"%s\", \"payload_bytes\": %zu", r->name, r->payload);
                    for (int w = 0; w < W_N; w++)
                        if (r->us[w] >= 0)
                            fprintf(f, ", \"%s\": %.3f", way_key[w], r->us[w]);
                        else
                            fprintf(f, ", \"%s\": null", way_key[w]);
                    fprintf(f, ", \"checked\": %s}%s\n", r->checked < 0 ? "null" : r->checked ? "true" : "false",
                            i + 1 < nrows ? "," : "");
                }
                fprintf(f, "  ]\n}\n");
                fclose(f);
            }
        }
    }
    int bad = 0;
    for (int i = 0; i < nrows; i++) bad |= rows[i].checked == 0;
    MPI_Finalize();
    return bad;
}
