/* bench/enqueue.cu: stream-ordered MPI (MPICH's MPIX_*_enqueue, served by cudampi) against the
 * same work with blocking calls and stream synchronisations, 2 ranks (or 1, exchanging with
 * itself: the engine's own costs, with no other process on the GPU).
 *
 *   halo   a Jacobi-like step per iteration: a kernel packs a halo of H bytes from the domain,
 *          the ranks exchange halos, a kernel updates the domain from the halo received.
 *          blocking: pack; cudaStreamSynchronize; MPI_Irecv + MPI_Isend + MPI_Waitall; update.
 *          enqueued: pack; MPIX_Irecv_enqueue + MPIX_Isend_enqueue + MPIX_Waitall_enqueue;
 *          update; the host synchronises only after the last iteration.
 *          Both runs start from the same domain and must end with the same bytes (checked).
 *   pingpong  8 bytes between kernels: a kernel writes the message, it goes to the peer, whose
 *          kernel reads it and writes the answer. One way = the round trip / 2.
 *
 * Build (on the GPU machine): nvcc -O2 -c bench/enqueue.cu -I<mpi include dir>, link with the
 * MPI's mpicc and -lcudart; run with cudampi preloaded. Options: -o FILE (JSON), -i ITERS,
 * -v (each measurement on stderr as it ends).
 * Prints a table; writes the JSON with the date, GPU, MPI and every figure. */
#include <mpi.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MPIX_STREAM_NULL
typedef int MPIX_Stream;
#endif
typedef int (*info_set_hex_t)(MPI_Info, const char *, const void *, int);
typedef int (*stream_create_t)(MPI_Info, MPIX_Stream *);
typedef int (*stream_comm_create_t)(MPI_Comm, MPIX_Stream, MPI_Comm *);
typedef int (*stream_free_t)(MPIX_Stream *);
typedef int (*send_enqueue_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_enqueue_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*isend_enqueue_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*irecv_enqueue_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*waitall_enqueue_t)(int, MPI_Request *, MPI_Status *);

static info_set_hex_t info_set_hex;
static stream_create_t stream_create;
static stream_comm_create_t stream_comm_create;
static stream_free_t stream_free;
static send_enqueue_t send_enqueue;
static recv_enqueue_t recv_enqueue;
static isend_enqueue_t isend_enqueue;
static irecv_enqueue_t irecv_enqueue;
static waitall_enqueue_t waitall_enqueue;

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)
#define MK(x)                                                                                      \
    do {                                                                                           \
        int r_ = (x);                                                                              \
        if (r_ != MPI_SUCCESS) {                                                                   \
            fprintf(stderr, "%s:%d %s: error %d\n", __FILE__, __LINE__, #x, r_);                   \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

static void *must(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "%s is missing: run with cudampi preloaded\n", name);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    return f;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

__global__ void pack(double *halo, const double *u, size_t nh, size_t n, int step)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < nh) halo[i] = u[(i * 7) % n] + 0.001 * step;
}

__global__ void update(double *u, const double *halo, size_t n, size_t nh)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) u[i] = 0.5 * u[i] + 0.25 * halo[i % nh] + 1e-6 * (double)(i & 15);
}

__global__ void bump(unsigned long long *m, int from)
{
    m[0] = m[0] * 3 + from + 1;
}

static int rank, peer;
static cudaStream_t s;
static MPI_Comm scomm;
static const size_t N = 1 << 20; /* doubles in the domain */

static unsigned blocks(size_t n) { return (unsigned)((n + 255) / 256); }

/* One run of `iters` halo steps; returns seconds per step; leaves the domain in `out`. */
static double halo(size_t hbytes, int iters, int enqueued, double *out)
{
    size_t nh = hbytes / sizeof(double);
    double *u, *hs, *hr;
    CK(cudaMalloc(&u, N * sizeof(double)));
    CK(cudaMalloc(&hs, hbytes));
    CK(cudaMalloc(&hr, hbytes));
    double *init = (double *)malloc(N * sizeof(double));
    for (size_t i = 0; i < N; i++) init[i] = (double)((i * 31 + rank * 17) % 1000) / 1000.0;
    /* On the stream, as every kernel that reads it: a copy from pageable memory may return before
     * its last bytes land, and a non-blocking stream does not wait for the legacy one. */
    CK(cudaMemcpyAsync(u, init, N * sizeof(double), cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    free(init);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int k = 0; k < iters; k++) {
        pack<<<blocks(nh), 256, 0, s>>>(hs, u, nh, N, k);
        MPI_Request q[2];
        if (enqueued && getenv("BENCH_HALO_SENDRECV")) {
            MK(send_enqueue(hs, (int)hbytes, MPI_BYTE, peer, k, scomm));
            MK(recv_enqueue(hr, (int)hbytes, MPI_BYTE, peer, k, scomm, MPI_STATUS_IGNORE));
        } else if (enqueued) {
            MK(irecv_enqueue(hr, (int)hbytes, MPI_BYTE, peer, k, scomm, &q[0]));
            MK(isend_enqueue(hs, (int)hbytes, MPI_BYTE, peer, k, scomm, &q[1]));
            MK(waitall_enqueue(2, q, MPI_STATUSES_IGNORE));
        } else {
            CK(cudaStreamSynchronize(s));
            MK(MPI_Irecv(hr, (int)hbytes, MPI_BYTE, peer, k, MPI_COMM_WORLD, &q[0]));
            MK(MPI_Isend(hs, (int)hbytes, MPI_BYTE, peer, k, MPI_COMM_WORLD, &q[1]));
            MK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        }
        update<<<blocks(N), 256, 0, s>>>(u, hr, N, nh);
    }
    double queued = now() - t0;
    CK(cudaStreamSynchronize(s));
    double t = (now() - t0) / iters;
    if (getenv("BENCH_VERBOSE") && rank == 0)
        fprintf(stderr, "  halo %zu B %s: the host's loop took %.2f us per step of %.2f\n", hbytes, enqueued ? "enqueued" : "blocking", 1e6 * queued / iters, 1e6 * t);
    CK(cudaMemcpy(out, u, N * sizeof(double), cudaMemcpyDeviceToHost));
    CK(cudaFree(u));
    CK(cudaFree(hs));
    CK(cudaFree(hr));
    return t;
}

/* 8-byte ping-pong between kernels; returns one-way seconds; the final value in *last. */
static double pingpong(int iters, int enqueued, unsigned long long *last)
{
    unsigned long long *m;
    CK(cudaMalloc(&m, 8));
    /* On the stream, for the enqueued form; and done before the blocking form's first receive,
     * whose copy into m (on the legacy stream) would not wait for it. */
    CK(cudaMemsetAsync(m, 0, 8, s));
    CK(cudaStreamSynchronize(s));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int k = 0; k < iters; k++) {
        if (rank == 0) {
            bump<<<1, 1, 0, s>>>(m, 0);
            if (enqueued) {
                MK(send_enqueue(m, 8, MPI_BYTE, peer, 1, scomm));
                MK(recv_enqueue(m, 8, MPI_BYTE, peer, 1, scomm, MPI_STATUS_IGNORE));
            } else {
                CK(cudaStreamSynchronize(s));
                MK(MPI_Send(m, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
                MK(MPI_Recv(m, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            }
        } else {
            if (enqueued) {
                MK(recv_enqueue(m, 8, MPI_BYTE, peer, 1, scomm, MPI_STATUS_IGNORE));
                bump<<<1, 1, 0, s>>>(m, 1);
                MK(send_enqueue(m, 8, MPI_BYTE, peer, 1, scomm));
            } else {
                MK(MPI_Recv(m, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                bump<<<1, 1, 0, s>>>(m, 1);
                CK(cudaStreamSynchronize(s));
                MK(MPI_Send(m, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
            }
        }
    }
    CK(cudaStreamSynchronize(s));
    double t = (now() - t0) / iters / 2;
    CK(cudaMemcpy(last, m, 8, cudaMemcpyDeviceToHost));
    CK(cudaFree(m));
    return t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 5

int main(int argc, char **argv)
{
    const char *json = NULL;
    int iters = 200, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 2) {
        if (rank == 0) fprintf(stderr, "enqueue: 1 or 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    /* One rank exchanges with itself: the enqueue engine's own costs, with no second process
     * on the GPU. */
    peer = size == 2 ? 1 - rank : rank;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    int dev = getenv("BENCH_GPU_PER_RANK") ? rank % ndev : 0;
    CK(cudaSetDevice(dev));
    info_set_hex = (info_set_hex_t)must("MPIX_Info_set_hex");
    stream_create = (stream_create_t)must("MPIX_Stream_create");
    stream_comm_create = (stream_comm_create_t)must("MPIX_Stream_comm_create");
    stream_free = (stream_free_t)must("MPIX_Stream_free");
    send_enqueue = (send_enqueue_t)must("MPIX_Send_enqueue");
    recv_enqueue = (recv_enqueue_t)must("MPIX_Recv_enqueue");
    isend_enqueue = (isend_enqueue_t)must("MPIX_Isend_enqueue");
    irecv_enqueue = (irecv_enqueue_t)must("MPIX_Irecv_enqueue");
    waitall_enqueue = (waitall_enqueue_t)must("MPIX_Waitall_enqueue");

    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    MPI_Info info;
    MPIX_Stream ms;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MK(info_set_hex(info, "value", &s, sizeof s));
    MK(stream_create(info, &ms));
    MPI_Info_free(&info);
    MK(stream_comm_create(MPI_COMM_WORLD, ms, &scomm));

    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    int devs[2] = {dev, -1};
    MPI_Allgather(&dev, 1, MPI_INT, devs, 1, MPI_INT, MPI_COMM_WORLD);

    static const size_t hsizes[] = {8 << 10, 4 << 20};
    double res[2][2], pp[2];
    int same = 1;
    double *a = (double *)malloc(N * sizeof(double)), *b = (double *)malloc(N * sizeof(double));
    for (int h = 0; h < 2; h++) {
        int it = hsizes[h] > (1 << 20) ? iters / 4 : iters;
        for (int e = 0; e < 2; e++) {
            double t[REPS];
            halo(hsizes[h], 10, e, e ? b : a); /* warm-up */
            for (int r = 0; r < REPS; r++) t[r] = halo(hsizes[h], it, e, e ? b : a);
            if (rank == 0 && verbose) fprintf(stderr, "halo %zu B %s: %.2f us\n", hsizes[h], e ? "enqueued" : "blocking", 1e6 * t[0]);
            qsort(t, REPS, sizeof t[0], cmp);
            res[h][e] = t[REPS / 2];
        }
        if (memcmp(a, b, N * sizeof(double))) {
            size_t bad = 0, first = N;
            for (size_t i = 0; i < N; i++)
                if (memcmp(&a[i], &b[i], sizeof(double)) && bad++ == 0) first = i;
            fprintf(stderr, "enqueue: rank %d, %zu-byte halos: %zu of %zu doubles differ, the first at %zu (%.17g blocking, %.17g enqueued)\n", rank,
                    hsizes[h], bad, N, first, a[first], b[first]);
            same = 0;
        }
    }
    unsigned long long va = 0, vb = 0;
    for (int e = 0; e < 2; e++) {
        double t[REPS];
        pingpong(20, e, e ? &vb : &va);
        for (int r = 0; r < REPS; r++) t[r] = pingpong(iters, e, e ? &vb : &va);
        if (rank == 0 && verbose) fprintf(stderr, "pingpong %s: %.2f us\n", e ? "enqueued" : "blocking", 1e6 * t[0]);
        qsort(t, REPS, sizeof t[0], cmp);
        pp[e] = t[REPS / 2];
    }
    if (va != vb) {
        fprintf(stderr, "enqueue: rank %d, ping-pong: %llu blocking, %llu enqueued\n", rank, va, vb);
        same = 0;
    }
    int all_same;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        char date[32];
        time_t tt = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
        const char *place = size == 1 ? "one rank, exchanging with itself" : devs[0] == devs[1] ? "one GPU shared by both ranks" : "one GPU per rank";
        printf("enqueue: %s, %s, %s\n", prop.name, place, lib);
        printf("%-28s %12s %12s %8s\n", "case", "blocking us", "enqueued us", "speedup");
        printf("%-28s %12.2f %12.2f %8.2f\n", "halo step, 8 KiB halos", 1e6 * res[0][0], 1e6 * res[0][1], res[0][0] / res[0][1]);
        printf("%-28s %12.2f %12.2f %8.2f\n", "halo step, 4 MiB halos", 1e6 * res[1][0], 1e6 * res[1][1], res[1][0] / res[1][1]);
        printf("%-28s %12.2f %12.2f %8.2f\n", "8 B ping-pong, one way", 1e6 * pp[0], 1e6 * pp[1], pp[0] / pp[1]);
        printf("results %s\n", all_same ? "identical (domain bytes and ping-pong value)" : "DIFFER");
        if (json) {
            FILE *f = fopen(json, "w");
            if (f) {
                fprintf(f,
                        "{\"date\": \"%s\", \"gpu\": \"%s\", \"placement\": \"%s\", \"mpi\": \"%s\", \"iterations\": %d, "
                        "\"domain_doubles\": %zu, \"same_results\": %s,\n \"halo_us\": {\"8KiB\": {\"blocking\": %.3f, "
                        "\"enqueued\": %.3f}, \"4MiB\": {\"blocking\": %.3f, \"enqueued\": %.3f}},\n \"pingpong_8B_one_way_us\": "
                        "{\"blocking\": %.3f, \"enqueued\": %.3f}}\n",
                        date, prop.name, place, lib, iters, N, all_same ? "true" : "false", 1e6 * res[0][0], 1e6 * res[0][1],
                        1e6 * res[1][0], 1e6 * res[1][1], 1e6 * pp[0], 1e6 * pp[1]);
                fclose(f);
            }
        }
    }
    MPI_Comm_free(&scomm);
    MK(stream_free(&ms));
    CK(cudaStreamDestroy(s));
    free(a);
    free(b);
    MPI_Finalize();
    return all_same ? 0 : 1;
}
