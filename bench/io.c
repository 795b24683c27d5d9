/* bench/io.c -- a collective file write and read, MPI_File_write_at_all then
 * MPI_File_read_at_all, of SIZE bytes in all (each rank SIZE / ranks at offset rank * that),
 * three ways side by side in one run, same file, same sizes:
 *
 *   (a) host     host buffers (malloc, touched) through MPI_File_*_at_all: the host ceiling
 *                (cudampi passes host buffers straight to the library)
 *   (b) device   device buffers (cudaMalloc) through MPI_File_*_at_all: needs the shim
 *                (dlsym(RTLD_DEFAULT, "cudampi_version")); skipped without it unless -f
 *   (c) recipe   the manual way without the shim: cudaMemcpy device -> pinned host buffer
 *                (cudaMallocHost), the host call, and for the read cudaMemcpy back
 *
 * Each call is timed alone between MPI_Barriers (the write without MPI_File_sync: what the
 * library hands the file system, usually its page cache); the time per call is the maximum
 * over the ranks, the median over ITERS calls after one untimed call, and the table shows it
 * as bandwidth, SIZE / time, in GB/s (10^9 bytes per second).
 *
 * -m MIN:MAX   total sizes, by powers of 4 from MIN to MAX (MAX always included); k/M/G
 *              suffixes (powers of 1024). Default 1M:1G.
 * -i ITERS     timed calls per size and way (default 5; at least 1)
 * -D DIR       where the file goes (default $TMPDIR or /tmp); it is deleted at the end. The
 *              disk needs MAX bytes free, and each rank MAX / ranks bytes of memory per way.
 * -c           checks the data: after every read each rank compares what it read (device
 *              reads copied back) with what was written; mismatches go to stderr and the exit
 *              status is 1
 * -f           runs the device way without the shim (a non-CUDA-aware MPI fails or crashes)
 * -o FILE, --json FILE   writes the results as JSON
 *
 * Budget: every size costs (ITERS + 1) writes and reads per way; with the defaults 1 GiB
 * on one H100 machine is a few seconds per way when the page cache takes the file.
 *
 * Build (stand-in driver, no GPU):
 *   mpicc -O2 bench/io.c -o build/io -Itests/fixture/include \
 *         -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib -lcudart -lcuda -ldl
 * Build (real GPU):
 *   mpicc -O2 bench/io.c -o build/io -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl
 * Run:
 *   mpirun -np 2 -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/io [-m 1M:1G] [-i 5] [-D DIR] [-c] [--json io.json]
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
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "machine.h"

typedef const char *(*version_fn)(void);

enum { W_HOST, W_DEVICE, W_RECIPE, W_N };
static const char *way_key[W_N] = {"host", "device", "recipe_pinned"};
static const char *way_head[W_N] = {"host", "device", "recipe"};

static int rank, nranks;

struct bufs {
    unsigned char *host, *pinned, *expect, *scratch;
    void *dev;
};

static unsigned char pattern(size_t i, int iter) { return (unsigned char)((i * 131u + (size_t)rank * 17u + (size_t)iter * 7u) >> 3); }

static void fill(struct bufs *b, int way, size_t n, int iter)
{
    for (size_t i = 0; i < n; i++) b->expect[i] = pattern(i, iter);
    if (way == W_HOST)
        memcpy(b->host, b->expect, n);
    else
        cudaMemcpy(b->dev, b->expect, n, cudaMemcpyHostToDevice);
}

/* What a read left, compared with what was written; returns the mismatches. */
static long check_read(struct bufs *b, int way, size_t n)
{
    const unsigned char *got = b->host;
    if (way != W_HOST) {
        cudaMemcpy(b->scratch, b->dev, n, cudaMemcpyDeviceToHost);
        got = b->scratch;
    }
    long bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != b->expect[i];
    if (bad) fprintf(stderr, "rank %d: %s read: %ld of %zu bytes differ\n", rank, way_key[way], bad, n);
    return bad;
}

/* One timed call: seconds, max over the ranks. */
static double timed(MPI_File fh, int way, int write, struct bufs *b, size_t n, MPI_Offset off)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = wall_seconds();
    int rc;
    if (way == W_RECIPE) {
        if (write) {
            cudaMemcpy(b->pinned, b->dev, n, cudaMemcpyDeviceToHost);
            rc = MPI_File_write_at_all(fh, off, b->pinned, (int)n, MPI_BYTE, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_File_read_at_all(fh, off, b->pinned, (int)n, MPI_BYTE, MPI_STATUS_IGNORE);
            cudaMemcpy(b->dev, b->pinned, n, cudaMemcpyHostToDevice);
        }
    } else {
        void *p = way == W_HOST ? (void *)b->host : b->dev;
        rc = write ? MPI_File_write_at_all(fh, off, p, (int)n, MPI_BYTE, MPI_STATUS_IGNORE)
                   : MPI_File_read_at_all(fh, off, p, (int)n, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    double t = wall_seconds() - t0, tmax = 0;
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        fprintf(stderr, "rank %d: %s %s failed: %s\n", rank, way_key[way], write ? "write" : "read", s);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t minsz = 1 << 20, maxsz = (size_t)1 << 30;
    int iters = 5, check = 0, force_dev = 0;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", *out = NULL;
    static struct option longopts[] = {{"json", required_argument, NULL, 'o'}, {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "m:i:D:cfo:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm': {
            char *colon = strchr(optarg, ':');
            if (colon) {
                *colon = 0;
                minsz = parse_size(optarg);
                maxsz = parse_size(colon + 1);
            } else {
                minsz = maxsz = parse_size(optarg);
            }
            break;
        }
        case 'i': iters = atoi(optarg) < 1 ? 1 : atoi(optarg); break;
        case 'D': dir = optarg; break;
        case 'c': check = 1; break;
        case 'f': force_dev = 1; break;
        case 'o': out = optarg; break;
        default:
            if (rank == 0) fprintf(stderr, "usage: io [-m MIN:MAX] [-i ITERS] [-D DIR] [-c] [-f] [-o|--json FILE]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (minsz < (size_t)nranks) minsz = (size_t)nranks;
    if (maxsz < minsz) maxsz = minsz;
    /* each rank's share must fit an int count of MPI_BYTE */
    if (maxsz / (size_t)nranks > (size_t)INT32_MAX) maxsz = (size_t)INT32_MAX * (size_t)nranks;

    struct machine m;
    machine_gather(&m, rank, nranks);
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    const char *real_lib = "(the library's MPI_File_*_at_all)";

    size_t sizes[64];
    int nsz = 0;
    for (size_t s = minsz; s < maxsz && nsz < 63; s *= 4) sizes[nsz++] = s;
    sizes[nsz++] = maxsz;

    size_t share = maxsz / (size_t)nranks;
    struct bufs b = {0};
    b.host = malloc(share);
    b.expect = malloc(share);
    b.scratch = malloc(share);
    memset(b.host, 1, share);
    int have[W_N] = {1, 0, 0};
    if (m.have_dev && cudaMalloc(&b.dev, share) == cudaSuccess) {
        cudaMemset(b.dev, 1, share);
        have[W_DEVICE] = ver != NULL || force_dev;
        if (cudaMallocHost((void **)&b.pinned, share) == cudaSuccess) {
            memset(b.pinned, 1, share);
            have[W_RECIPE] = 1;
        }
    }
    int lo[W_N];
    MPI_Allreduce(have, lo, W_N, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    memcpy(have, lo, sizeof have);

    char path[512];
    snprintf(path, sizeof path, "%s/cudampi-bench-io-%d.dat", dir, (int)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        if (rank == 0) fprintf(stderr, "io: cannot open %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    if (rank == 0) {
        machine_print(&m, "io", ver ? ver() : NULL, real_lib);
        printf("# ranks: %d; file %s; %d timed calls per size and way, median of the max over ranks%s\n", nranks, path, iters,
               check ? "; checking the data (-c)" : "");
        printf("# ways: host (malloc), device (cudaMalloc%s), recipe (cudaMemcpy through cudaMallocHost)\n",
               have[W_DEVICE] ? "" : ": skipped, no shim");
        printf("%12s", "bytes");
        for (int d = 0; d < 2; d++)
            for (int w = 0; w < W_N; w++) printf(" %8s %-6s", d ? "read" : "write", way_head[w]);
        printf("   GB/s\n");
    }

    double (*res)[2][W_N] = calloc((size_t)nsz, sizeof *res);
    long errors = 0;
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < nsz; i++) {
        size_t n = sizes[i] / (size_t)nranks;
        MPI_Offset off = (MPI_Offset)rank * (MPI_Offset)n;
        for (int w = 0; w < W_N; w++) {
            res[i][0][w] = res[i][1][w] = NAN;
            if (!have[w]) continue;
            for (int d = 0; d < 2; d++) {
                for (int k = -1; k < iters; k++) {
                    if (d == 0 && check) fill(&b, w, n, k + 2);
                    if (d == 1 && check) {
                        /* the file holds the last write's pattern */
                        for (size_t j = 0; j < n; j++) b.expect[j] = pattern(j, iters + 1);
                    }
                    double s = timed(fh, w, d == 0, &b, n, off);
                    if (k >= 0) t[k] = s;
                    if (d == 1 && check) errors += check_read(&b, w == W_RECIPE ? W_DEVICE : w, n);
                }
                res[i][d][w] = median(t, iters);
            }
        }
        if (rank == 0) {
            printf("%12zu", sizes[i]);
            for (int d = 0; d < 2; d++)
                for (int w = 0; w < W_N; w++) {
                    if (isnan(res[i][d][w]))
                        printf(" %15s", "-");
                    else
                        printf(" %15.2f", (double)sizes[i] / res[i][d][w] / 1e9);
                }
            printf("\n");
            fflush(stdout);
        }
    }
    MPI_File_close(&fh);

    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && check) printf("# data check: %ld bytes differ\n", total);
    if (rank == 0 && out) {
        FILE *f = fopen(out, "w");
        if (!f) {
            perror(out);
        } else {
            fprintf(f, "{\n  \"bench\": \"io\",\n  \"unit\": \"seconds per call, max over ranks, median over iterations; GB/s = size / seconds / 1e9\",\n");
            machine_json(f, &m, ver ? ver() : NULL, real_lib, nranks);
            fprintf(f, "  \"parameters\": {\"nranks\": %d, \"iterations\": %d, \"min_size\": %zu, \"max_size\": %zu, "
                       "\"size_factor\": 4, \"dir\": \"%s\", \"calls\": [\"MPI_File_write_at_all\", \"MPI_File_read_at_all\"], "
                       "\"sync\": false, \"check\": %s, \"force_device\": %s},\n",
                    nranks, iters, minsz, maxsz, dir, check ? "true" : "false", force_dev ? "true" : "false");
            fprintf(f, "  \"check_errors\": %ld,\n  \"results\": [\n", check ? total : 0);
            for (int i = 0; i < nsz; i++) {
                fprintf(f, "    {\"size\": %zu", sizes[i]);
                for (int d = 0; d < 2; d++)
                    for (int w = 0; w < W_N; w++) {
                        fprintf(f, ", \"%s_%s_s\": ", d ? "read" : "write", way_key[w]);
                        if (isnan(res[i][d][w]))
                            fprintf(f, "null");
                        else
                            fprintf(f, "%.6f", res[i][d][w]);
                        fprintf(f, ", \"%s_%s_gbps\": ", d ? "read" : "write", way_key[w]);
                        if (isnan(res[i][d][w]))
                            fprintf(f, "null");
                        else
                            fprintf(f, "%.3f", (double)sizes[i] / res[i][d][w] / 1e9);
                    }
                fprintf(f, "}%s\n", i + 1 < nsz ? "," : "");
            }
            fprintf(f, "  ]\n}\n");
            fclose(f);
        }
    }
    free(t);
    free(res);
    if (b.dev) cudaFree(b.dev);
    if (b.pinned) cudaFreeHost(b.pinned);
    free(b.host);
    free(b.expect);
    free(b.scratch);
    MPI_Finalize();
    return total ? 1 : 0;
}
