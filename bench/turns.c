/* bench/turns.c -- which driver calls make two processes that share one GPU pay for taking turns
 * on it. Ranks 0 and 1 ping-pong a 4-byte token over MPI (the library's own PMPI functions);
 * at each turn a rank first runs one GPU operation of SIZE bytes on its legacy default stream and
 * waits for it, then passes the token. The one-way time of a turn is half the round trip. Each
 * operation runs twice: on both ranks ("both": the GPU alternates between the two processes, as
 * in a device ping-pong) and on rank 0 alone ("one": the same work with no alternation). Where
 * "both" costs far more than "one", the operation waits for the GPU to switch processes.
 *
 *   none      no GPU work: the token alone
 *   d2h       cuMemcpyDtoHAsync into pinned memory + cuStreamSynchronize
 *   h2d       cuMemcpyHtoDAsync from pinned memory + cuStreamSynchronize
 *   d2h+h2d   both, one after the other (a staged receive and send's copies)
 *   d2h-sync  cuMemcpyDtoH into pageable memory (the driver's own synchronous copy)
 *   h2d-sync  cuMemcpyHtoD from pageable memory (returns before the DMA ends)
 *   d2d       cuMemcpyDtoDAsync within the rank's own memory + cuStreamSynchronize
 *   memset    cuMemsetD8Async + cuStreamSynchronize
 *   write     cuStreamWriteValue32 into device memory + cuStreamSynchronize (no copy)
 *   query     cuStreamQuery of the idle stream (no work at all)
 *   h2d-nb    h2d on a stream created CU_STREAM_NON_BLOCKING
 *   h2d-ce    h2d as a batch of one (cuMemcpyBatchAsync) with CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE,
 *             the driver's hint to use a copy engine, on the non-blocking stream (batches refuse the
 *             legacy one; CUDA 12.8 and later, skipped without it)
 *   writes    the SIZE bytes written by the stream as 64-bit values (cuStreamBatchMemOp), up to 2 KiB
 *
 * Build (real GPU): mpicc -O2 bench/turns.c -o build/turns -I/usr/local/cuda/include \
 *   -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs -lcudart -lcuda -ldl -lm
 * Run: mpirun -np 2 build/turns [-m MIN:MAX] [-i ITERS] [-r REPS] [-o out.json]
 * Sizes 4 B .. 64 KiB by powers of 4 and 32 KiB (default), ITERS 200, REPS 5 (medians).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <getopt.h>
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
            fprintf(stderr, "turns: %s failed with %d (line %d)\n", #call, (int)rc_, __LINE__);  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
        }                                                                                        \
    } while (0)

enum op { NONE, D2H, H2D, BOTH, D2H_SYNC, H2D_SYNC, D2D, MEMSET, WRITE, QUERY, H2D_NB, H2D_CE, WRITES, OPS };
static const char *op_name[OPS] = {"none", "d2h", "h2d", "d2h+h2d", "d2h-sync", "h2d-sync", "d2d", "memset", "write", "query",
                                   "h2d-nb", "h2d-ce", "writes"};

static CUdeviceptr dev, dev2;
static void *pinned, *pageable;
static CUstream nonblocking;

/* cuMemcpyBatchAsync's attributes, declared here so the program builds against older headers */
struct copy_attrs {
    unsigned src_access_order; /* CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 1 */
    struct { unsigned type; int id; } src_hint, dst_hint;
    unsigned flags;            /* CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE = 1 */
};
typedef CUresult (*batch_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, struct copy_attrs *, size_t *, size_t, CUstream);
static batch_fn batch_copy;

static CUstreamBatchMemOpParams ops64[256];

static void gpu(enum op op, size_t n)
{
    CUstream s = NULL; /* the legacy default stream, as cudampi's copies use */
    switch (op) {
    case NONE: return;
    case D2H: CU(cuMemcpyDtoHAsync(pinned, dev, n, s)); break;
    case H2D: CU(cuMemcpyHtoDAsync(dev, pinned, n, s)); break;
    case BOTH:
        CU(cuMemcpyHtoDAsync(dev, pinned, n, s));
        CU(cuStreamSynchronize(s));
        CU(cuMemcpyDtoHAsync(pinned, dev2, n, s));
        break;
    case D2H_SYNC: CU(cuMemcpyDtoH(pageable, dev, n)); return;
    case H2D_SYNC: CU(cuMemcpyHtoD(dev, pageable, n)); return;
    case D2D: CU(cuMemcpyDtoDAsync(dev2, dev, n, s)); break;
    case MEMSET: CU(cuMemsetD8Async(dev, 0x11, n, s)); break;
    case WRITE: CU(cuStreamWriteValue32(s, dev, 7, 0)); break;
    case QUERY: (void)cuStreamQuery(s); return;
    case H2D_NB:
        CU(cuMemcpyHtoDAsync(dev, pinned, n, nonblocking));
        CU(cuStreamSynchronize(nonblocking));
        return;
    case H2D_CE: {
        CUdeviceptr d = dev, src = (CUdeviceptr)(uintptr_t)pinned;
        size_t len = n, idx = 0;
        struct copy_attrs a = {1, {2, 0}, {1, 0}, 1}; /* stream order; from the host, to the device */
        /* batches refuse the legacy default stream */
        CU(batch_copy(&d, &src, &len, 1, &a, &idx, 1, nonblocking));
        CU(cuStreamSynchronize(nonblocking));
        return;
    }
    case WRITES: {
        unsigned k = (unsigned)(n / 8);
        for (unsigned i = 0; i < k; i++) {
            memset(&ops64[i], 0, sizeof ops64[i]);
            ops64[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            ops64[i].writeValue.address = dev + 8 * i;
            memcpy(&ops64[i].writeValue.value64, (char *)pinned + 8 * i, 8);
        }
        CU(cuStreamBatchMemOp(s, k, ops64, 0));
        break;
    }
    default: return;
    }
    CU(cuStreamSynchronize(s));
}

/* one-way microseconds of a turn, rank 0's clock; `who`: 2 both ranks work, 1 rank 0 alone */
static double turns(int me, enum op op, size_t n, int iters, int who)
{
    int t = 0, peer = 1 - me, work = who == 2 || me == 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = wall_seconds();
    for (int i = 0; i < iters; i++) {
        if (me == 0) {
            if (work) gpu(op, n);
            real_send(&t, 1, MPI_INT, peer, 3, MPI_COMM_WORLD);
            real_recv(&t, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            real_recv(&t, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (work) gpu(op, n);
            real_send(&t, 1, MPI_INT, peer, 3, MPI_COMM_WORLD);
        }
    }
    double us = (wall_seconds() - t0) / iters / 2 * 1e6;
    MPI_Bcast(&us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return us;
}

int main(int argc, char **argv)
{
    size_t lo = 4, hi = 64 << 10;
    int iters = 200, reps = 5, me, nranks, opt;
    const char *out = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "m:i:r:o:")) != -1) {
        switch (opt) {
        case 'm': {
            char *c = strchr(optarg, ':');
            lo = parse_size(optarg);
            hi = c ? parse_size(c + 1) : lo;
            break;
        }
        case 'i': iters = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'o': out = optarg; break;
        default: MPI_Finalize(); return 2;
        }
    }
    if (nranks != 2 || lo < 4 || hi < lo || iters < 1 || reps < 1 || reps > 64) {
        if (me == 0) fprintf(stderr, "turns: needs 2 ranks, 4 <= MIN <= MAX, 1 <= REPS <= 64\n");
        MPI_Finalize();
        return 2;
    }
    find_real();
    struct machine m;
    machine_gather(&m, me, nranks);
    if (!m.have_dev) {
        if (me == 0) fprintf(stderr, "turns: no GPU\n");
        MPI_Finalize();
        return 1;
    }
    cudaFree(0);
    CU(cuMemAlloc(&dev, hi));
    CU(cuMemAlloc(&dev2, hi));
    CU(cuMemAllocHost(&pinned, hi));
    pageable = malloc(hi);
    memset(pageable, 1, hi);
    memset(pinned, 1, hi);
    CU(cuMemsetD8(dev, 1, hi));
    CU(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    batch_copy = (batch_fn)dlsym(RTLD_DEFAULT, "cuMemcpyBatchAsync_v2");

    size_t sizes[32];
    int nsz = 0;
    for (size_t n = lo; n <= hi && nsz < 30; n *= 4) {
        if (n > (32 << 10) && (nsz == 0 || sizes[nsz - 1] < (32 << 10)) && lo <= (32 << 10)) sizes[nsz++] = 32 << 10;
        sizes[nsz++] = n;
    }
    FILE *f = NULL;
    if (me == 0) {
        machine_print(&m, "turns", NULL, real_lib);
        printf("# one-way us per turn, median of %d x %d; both: each rank works at its turn; one: rank 0 alone\n", reps, iters);
        printf("%-9s", "op");
        for (int i = 0; i < nsz; i++) printf(" %8zu/2 %8zu/1", sizes[i], sizes[i]);
        printf("\n");
        if (out && (f = fopen(out, "w"))) {
            fprintf(f, "{\n  \"benchmark\": \"turns\",\n");
            machine_json(f, &m, NULL, real_lib, nranks);
            fprintf(f, "  \"parameters\": {\"iterations\": %d, \"reps\": %d},\n  \"results\": [", iters, reps);
        }
    }
    int first = 1;
    for (int op = 0; op < OPS; op++) {
        if (op == H2D_CE && !batch_copy) continue;
        if (me == 0) printf("%-9s", op_name[op]);
        for (int i = 0; i < nsz; i++) {
            if (op == WRITES && sizes[i] > 2048) break;
            double v[2];
            for (int who = 2; who >= 1; who--) {
                double r[64];
                turns(me, (enum op)op, sizes[i], iters / 10 + 1, who);
                for (int k = 0; k < reps; k++) r[k] = turns(me, (enum op)op, sizes[i], iters, who);
                v[2 - who] = median(r, reps);
            }
            if (me == 0) {
                printf(" %10.2f %10.2f", v[0], v[1]);
                fflush(stdout);
                if (f)
                    fprintf(f, "%s\n    {\"op\": \"%s\", \"size\": %zu, \"both_us\": %.3f, \"one_us\": %.3f}", first ? "" : ",",
                            op_name[op], sizes[i], v[0], v[1]);
                first = 0;
            }
            if (op == NONE || op == WRITE || op == QUERY) break; /* no size */
        }
        if (me == 0) printf("\n");
    }
    if (f) {
        fprintf(f, "\n  ]\n}\n");
        fclose(f);
    }
    cuMemFreeHost(pinned);
    cuMemFree(dev);
    cuMemFree(dev2);
    free(pageable);
    MPI_Finalize();
    return 0;
}
