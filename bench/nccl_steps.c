/* bench/nccl_steps.c — what a blocking device collective on NCCL costs above NCCL's own call,
 * step by step: each way adds one of the steps cudampi's engine takes, so that the table shows
 * where the microseconds between bench/coll's nccl column and its device(shim) column go.
 *
 * Ways, each timed alone between barriers (mean over the iterations, max over the ranks, median
 * of the rounds, the ways in turn within a round), on device buffers of each rank's own GPU:
 *   nccl       one group with the collective on a non-blocking stream, cuStreamSynchronize
 *              (bench/coll's nccl column)
 *   +order     first cuEventRecord on the legacy default stream and cuStreamWaitEvent of the
 *              NCCL stream on it (the program's earlier work comes first)
 *   +spin      completion by cuEventRecord on the NCCL stream and cuEventQuery in a loop, with
 *              ncclCommGetAsyncError every 64 polls and at the end, instead of the synchronize
 *   +locate    cuPointerGetAttributes (six attributes) of each buffer first
 *   +agree     a host MPI_Allreduce of five long longs (MPI_MAX) on the communicator first
 *   idle-order +locate, but ordering after the legacy stream only when cuStreamQuery says it
 *              has work left
 *   cudampi    the program's own MPI call on the device buffers (under the shim: NCCL or
 *              staging, as it decides)
 * Collectives: MPI_Allreduce (MPI_FLOAT, MPI_SUM) and MPI_Bcast (root 0).
 *
 *   mpirun -n 2 [-x LD_PRELOAD=libcudampi.so] nccl_steps [-m MIN:MAX] [-i ITERS] [-r ROUNDS]
 *          [-o FILE.json]
 * Needs NCCL (CUDAMPI_BENCH_NCCL or libnccl.so.2) and a GPU per rank; prints a table per
 * collective and writes JSON (machine, MPI, NCCL, date, every figure). Build:
 *   mpicc -O2 -I$CUDA/include bench/nccl_steps.c -L$CUDA/lib64 -lcudart -lcuda -ldl -lm */
#define _GNU_SOURCE
#include <mpi.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "machine.h"
#include "nccl.h"

enum { W_NCCL, W_ORDER, W_SPIN, W_LOCATE, W_AGREE, W_IDLE, W_SHIM, W_N };
static const char *way_name[W_N] = {"nccl", "+order", "+spin", "+locate", "+agree", "idle-order", "cudampi"};
static const char *way_key[W_N] = {"nccl", "order", "spin", "locate", "agree", "idle_order", "cudampi"};
enum { C_ALLREDUCE, C_BCAST, C_N };
static const char *coll_name[C_N] = {"MPI_Allreduce", "MPI_Bcast"};

static int (*async_error)(nccl_comm_t, int *);
static CUevent ready, done;

static void die(const char *what)
{
    fprintf(stderr, "nccl_steps: %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void cu(CUresult rc, const char *what)
{
    if (rc != CUDA_SUCCESS) die(what);
}

static void locate(const void *p)
{
    CUpointer_attribute a[6] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                                CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned type = 0;
    CUcontext ctx = NULL;
    int managed = 0, ordinal = 0;
    CUdeviceptr start = 0;
    size_t len = 0;
    void *out[6] = {&type, &ctx, &managed, &ordinal, &start, &len};
    cu(cuPointerGetAttributes(6, a, out, (CUdeviceptr)(uintptr_t)p), "cuPointerGetAttributes");
}

static void one(int way, int c, float *send, float *recv, size_t bytes, MPI_Comm comm)
{
    size_t n = bytes / sizeof(float);
    if (way == W_SHIM) {
        if (c == C_ALLREDUCE) MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, comm);
        else MPI_Bcast(recv, (int)bytes, MPI_BYTE, 0, comm);
        return;
    }
    if (way >= W_AGREE && way != W_IDLE) {
        long long mine[5] = {0, 1, 0, (long long)bytes, 0}, all[5];
        MPI_Allreduce(mine, all, 5, MPI_LONG_LONG, MPI_MAX, comm);
    }
    if (way >= W_LOCATE) {
        if (c == C_ALLREDUCE) locate(send);
        locate(recv);
    }
    CUstream s = (CUstream)nccl.stream;
    if ((way >= W_ORDER && way != W_IDLE) || (way == W_IDLE && cuStreamQuery(NULL) != CUDA_SUCCESS)) {
        cu(cuEventRecord(ready, NULL), "cuEventRecord");
        cu(cuStreamWaitEvent(s, ready, 0), "cuStreamWaitEvent");
    }
    nccl_check(nccl.group_start(), "ncclGroupStart");
    if (c == C_ALLREDUCE) nccl_check(nccl.all_reduce(send, recv, n, NCCL_FLOAT32, NCCL_SUM, nccl.comm, nccl.stream), "ncclAllReduce");
    else nccl_check(nccl.broadcast(recv, recv, bytes, NCCL_CHAR, 0, nccl.comm, nccl.stream), "ncclBroadcast");
    nccl_check(nccl.group_end(), "ncclGroupEnd");
    if (way == W_NCCL || way == W_ORDER) {
        nccl_sync();
        return;
    }
    cu(cuEventRecord(done, s), "cuEventRecord");
    int state = 0;
    for (unsigned spins = 1;; spins++) {
        CUresult q = cuEventQuery(done);
        if (q == CUDA_SUCCESS) break;
        if (q != CUDA_ERROR_NOT_READY) die("cuEventQuery");
        if (spins % 64 == 0 && (async_error(nccl.comm, &state) != 0 || state != 0)) die("ncclCommGetAsyncError");
    }
    if (async_error(nccl.comm, &state) != 0 || state != 0) die("ncclCommGetAsyncError");
}

/* mean µs per call of one way on this rank, max over the ranks (on every rank) */
static double measure(int way, int c, float *send, float *recv, size_t bytes, int iters, MPI_Comm comm)
{
    int warm = iters / 10 + 2;
    double t = 0;
    for (int i = 0; i < warm + iters; i++) {
        MPI_Barrier(comm);
        double t0 = wall_seconds();
        one(way, c, send, recv, bytes, comm);
        if (i >= warm) t += wall_seconds() - t0;
    }
    double mine = t / iters * 1e6, worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    return worst;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, iters = 200, rounds = 5, opt;
    size_t minsz = 8, maxsz = (size_t)16 << 20;
    const char *out = NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "m:i:r:o:h")) != -1) {
        switch (opt) {
        case 'm': {
            char *colon = strchr(optarg, ':');
            minsz = parse_size(optarg);
            maxsz = colon ? parse_size(colon + 1) : minsz;
            break;
        }
        case 'i': iters = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'o': out = optarg; break;
        default:
            if (rank == 0) fprintf(stderr, "usage: nccl_steps [-m MIN:MAX] [-i ITERS] [-r ROUNDS] [-o FILE.json]\n");
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (minsz < 8 || maxsz < minsz || iters < 1 || rounds < 1 || rounds > 99) {
        if (rank == 0) fprintf(stderr, "nccl_steps: bad sizes, iterations or rounds\n");
        MPI_Finalize();
        return 2;
    }
    typedef const char *(*version_fn)(void);
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    const char *shim = ver ? ver() : NULL, *real_lib = "(not found)";
    real_mpi_library(&real_lib);
    struct machine m;
    machine_gather(&m, rank, nranks);
    nccl_open(&m, rank, nranks);
    if (!nccl.on) {
        if (rank == 0) printf("nccl_steps: no NCCL column (%s): nothing to compare\n", nccl.why);
        MPI_Finalize();
        return 0;
    }
    void *h = dlopen(getenv("CUDAMPI_BENCH_NCCL") && *getenv("CUDAMPI_BENCH_NCCL") ? getenv("CUDAMPI_BENCH_NCCL") : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    *(void **)&async_error = h ? dlsym(h, "ncclCommGetAsyncError") : NULL;
    if (!async_error) die("ncclCommGetAsyncError lookup");
    cu(cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    cu(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    float *send, *recv;
    if (cudaMalloc((void **)&send, maxsz) != cudaSuccess || cudaMalloc((void **)&recv, maxsz) != cudaSuccess) die("cudaMalloc");
    cudaMemset(send, 1, maxsz);
    cudaMemset(recv, 1, maxsz);
    cudaDeviceSynchronize();

    int nsz = 0;
    size_t sizes[40];
    for (size_t s = minsz; s <= maxsz && nsz < 39; s *= 8) sizes[nsz++] = s;
    if (sizes[nsz - 1] != maxsz) sizes[nsz++] = maxsz;
    static double fig[C_N][40][W_N];
    double *per = malloc(sizeof(double) * (size_t)rounds);
    for (int c = 0; c < C_N; c++)
        for (int i = 0; i < nsz; i++) {
            int it = sizes[i] >= ((size_t)1 << 20) ? iters / 4 + 1 : iters;
            double r[W_N][99];
            for (int k = 0; k < rounds; k++)
                for (int w = 0; w < W_N; w++) r[w][k] = measure(w, c, send, recv, sizes[i], it, MPI_COMM_WORLD);
            for (int w = 0; w < W_N; w++) {
                memcpy(per, r[w], sizeof(double) * (size_t)rounds);
                fig[c][i][w] = median(per, rounds);
            }
        }
    if (rank == 0) {
        machine_print(&m, "nccl_steps", shim, real_lib);
        printf("# ranks: %d; %d iterations (a quarter from 1 MiB), median of %d rounds; %s\n", nranks, iters, rounds, nccl.why);
        for (int c = 0; c < C_N; c++) {
            printf("\n# %s: us per call, each call alone between barriers, max over the ranks\n#%11s", coll_name[c], "bytes");
            for (int w = 0; w < W_N; w++) printf(" %11s", way_name[w]);
            printf("\n");
            for (int i = 0; i < nsz; i++) {
                printf("%12zu", sizes[i]);
                for (int w = 0; w < W_N; w++) printf(" %11.2f", fig[c][i][w]);
                printf("\n");
            }
        }
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) die("opening the JSON file");
            fprintf(f, "{\"bench\": \"nccl_steps\", \"ranks\": %d, \"iterations\": %d, \"rounds\": %d, \"nccl\": \"%s\", \"machine\": ", nranks, iters, rounds, nccl.why);
            machine_json(f, &m, shim, real_lib, nranks);
            fprintf(f, ", \"collectives\": [");
            for (int c = 0; c < C_N; c++) {
                fprintf(f, "%s{\"name\": \"%s\", \"sizes\": [", c ? ", " : "", coll_name[c]);
                for (int i = 0; i < nsz; i++) {
                    fprintf(f, "%s{\"bytes\": %zu", i ? ", " : "", sizes[i]);
                    for (int w = 0; w < W_N; w++) fprintf(f, ", \"%s_us\": %.3f", way_key[w], fig[c][i][w]);
                    fprintf(f, "}");
                }
                fprintf(f, "]}");
            }
            fprintf(f, "]}\n");
            fclose(f);
            printf("# wrote %s\n", out);
        }
    }
    free(per);
    cudaFree(send);
    cudaFree(recv);
    nccl_close();
    MPI_Finalize();
    return 0;
}
