/* bench/threads.c -- aggregate device bandwidth with several threads per rank at
 * MPI_THREAD_MULTIPLE, against one thread on the same GPU(s), in one run.
 *
 * Two ranks. For T threads (1, 2, 4 and 8, each count in turn), every thread has its own
 * duplicate of MPI_COMM_WORLD and its own buffers, and exchanges with the other rank's thread of
 * the same number: per iteration a window of W messages of SIZE bytes each way (MPI_Irecv x W,
 * MPI_Isend x W, MPI_Waitall), ITERS iterations after WARM untimed ones; the threads start
 * together (a barrier of their own) and the time is the slowest thread's. Aggregate bandwidth
 * = both directions' bytes of all threads / time, in GB/s (10^9 bytes/s), the median of REPS
 * repetitions. Ways: "device" (cudaMalloc buffers through the shim) and "host" (malloc buffers;
 * with the shim preloaded it passes them straight through): the host row says how the MPI itself
 * scales with threads. The last iteration's bytes are checked on every thread (a pattern of the
 * thread and the sender) in one more, untimed iteration; a wrong byte fails the run (exit
 * status 1). Without the shim the device row is left out (0).
 *
 * Options: -s SIZE (default 4M), -w W (default 4), -i ITERS (default 20), -r REPS (default 3),
 * -t "1 2 4 8" (the thread counts), -j FILE (JSON).
 * Build (real GPU): mpicc -O2 bench/threads.c -o build/threads -I$CUDA/include -L$CUDA/lib64
 *                   -lcudart -lpthread -ldl
 * Build (stand-in): mpicc -O2 -DFAKECUDA_FIXTURE bench/threads.c -o build/threads
 *                   -Itests/fixture/include -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib
 *                   -lcudart -lcuda -lpthread -ldl */
#define _GNU_SOURCE
#include <mpi.h>
#include <cuda_runtime.h>
#ifdef FAKECUDA_FIXTURE
#include <cuda.h>
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "machine.h"

#define MAXT 8
#define MAXW 16

static size_t size = 4u << 20;
static int window = 4, iters = 20, reps = 3, warm = 2, rank, peer;
static int nthreads, device = -1;
static pthread_barrier_t start;
static MPI_Comm comms[MAXT];
static char *sbuf[2][MAXT][MAXW], *rbuf[2][MAXT][MAXW]; /* [way][thread][message] */
static double times[MAXT];
static long bad[MAXT];

static unsigned char byte_of(int sender, int t, int it, int k, size_t i)
{
    uint64_t x = ((uint64_t)sender << 48) ^ ((uint64_t)t << 40) ^ ((uint64_t)it << 20) ^ ((uint64_t)k << 12) ^ (i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 29;
    return (unsigned char)(1 + (x * 0xBF58476D1CE4E5B9ull >> 56) % 251);
}

struct job {
    int t, way;
};

static void fill(int way, char *dst, int t, int it, int k, unsigned char *tmp)
{
    for (size_t i = 0; i < size; i += 4096) tmp[i] = byte_of(rank, t, it, k, i);
    if (way == 0) cudaMemcpy(dst, tmp, size, cudaMemcpyHostToDevice);
    else memcpy(dst, tmp, size);
}

static void *run(void *vp)
{
    struct job *j = (struct job *)vp;
    int t = j->t, way = j->way;
    MPI_Comm c = comms[t];
    unsigned char *tmp = calloc(1, size);
    /* the thread's own current device: the rank's (machine_gather picked it) */
    if (device >= 0) cudaSetDevice(device);
    MPI_Request rq[2 * MAXW];
    MPI_Status st[2 * MAXW];
    double t0 = 0;
    /* the timed iterations, then one more with the pattern, checked */
    for (int it = -warm; it <= iters; it++) {
        if (it == iters) {
            times[t] = wall_seconds() - t0;
            for (int k = 0; k < window; k++) fill(way, sbuf[way][t][k], t, it, k, tmp);
        }
        if (it == 0) {
            pthread_barrier_wait(&start);
            t0 = wall_seconds();
        }
        for (int k = 0; k < window; k++) MPI_Irecv(rbuf[way][t][k], (int)size, MPI_BYTE, peer, k, c, &rq[k]);
        for (int k = 0; k < window; k++) MPI_Isend(sbuf[way][t][k], (int)size, MPI_BYTE, peer, k, c, &rq[window + k]);
        MPI_Waitall(2 * window, rq, st);
    }
    for (int k = 0; k < window; k++) {
        if (way == 0) cudaMemcpy(tmp, rbuf[way][t][k], size, cudaMemcpyDeviceToHost);
        else memcpy(tmp, rbuf[way][t][k], size);
        for (size_t i = 0; i < size; i += 4096)
            if (tmp[i] != byte_of(peer, t, iters, k, i) && bad[t]++ == 0 && getenv("THREADS_DEBUG"))
                fprintf(stderr, "rank %d way %d thread %d msg %d byte %zu: %d, expected %d\n", rank, way, t, k, i, tmp[i], byte_of(peer, t, iters, k, i));
    }
    free(tmp);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, nranks;
    int counts[8] = {1, 2, 4, 8}, ncounts = 4;
    const char *json = NULL;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) size = parse_size(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc) window = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-j") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            ncounts = 0;
            for (char *s = strtok(argv[++i], " ,"); s && ncounts < 8; s = strtok(NULL, " ,")) counts[ncounts++] = atoi(s);
        }
    }
    if (window > MAXW) window = MAXW;
    if (nranks != 2 || provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "bench/threads: needs 2 ranks and MPI_THREAD_MULTIPLE (got %d ranks, level %d)\n", nranks, provided);
        MPI_Finalize();
        return 2;
    }
    peer = 1 - rank;
    struct machine m;
    machine_gather(&m, rank, nranks);
    device = m.have_dev ? m.me.dev : -1;
    const char *real_lib = "";
    real_mpi_library(&real_lib);
    typedef const char *(*version_fn)(void);
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    int maxt = 1;
    for (int i = 0; i < ncounts; i++) {
        if (counts[i] > MAXT) counts[i] = MAXT;
        if (counts[i] > maxt) maxt = counts[i];
    }
    for (int t = 0; t < maxt; t++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
        for (int k = 0; k < window; k++) {
            cudaMalloc((void **)&sbuf[0][t][k], size);
            cudaMalloc((void **)&rbuf[0][t][k], size);
            sbuf[1][t][k] = malloc(size);
            rbuf[1][t][k] = malloc(size);
            memset(sbuf[1][t][k], 1, size);
        }
    }
    static const char *ways[2] = {"device", "host"};
    double gbs[2][8];
    long wrong = 0;
    memset(gbs, 0, sizeof gbs);
    for (int way = ver ? 0 : 1; way < 2; way++) /* device buffers need the shim */
        for (int c = 0; c < ncounts; c++) {
            nthreads = counts[c];
            double v[16];
            for (int r = 0; r < reps && r < 16; r++) {
                pthread_barrier_init(&start, NULL, (unsigned)nthreads);
                pthread_t tid[MAXT];
                struct job jobs[MAXT];
                MPI_Barrier(MPI_COMM_WORLD);
                for (int t = 0; t < nthreads; t++) {
                    jobs[t] = (struct job){t, way};
                    pthread_create(&tid[t], NULL, run, &jobs[t]);
                }
                double slowest = 0;
                for (int t = 0; t < nthreads; t++) {
                    pthread_join(tid[t], NULL);
                    if (times[t] > slowest) slowest = times[t];
                    wrong += bad[t];
                    bad[t] = 0;
                }
                pthread_barrier_destroy(&start);
                double all = 0;
                MPI_Allreduce(&slowest, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                v[r] = 2.0 * (double)size * window * iters * nthreads / all / 1e9;
            }
            gbs[way][c] = median(v, reps < 16 ? reps : 16);
        }
    long wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        machine_print(&m, "threads", ver ? ver() : NULL, real_lib);
        printf("# %zu bytes a message, %d a window each way, %d iterations, median of %d; GB/s both ways, all threads\n",
               size, window, iters, reps);
        printf("%-8s", "way");
        for (int c = 0; c < ncounts; c++) printf(" %8d thr", counts[c]);
        printf("   %s\n", "ratio to 1 thread");
        for (int way = 0; way < 2; way++) {
            printf("%-8s", ways[way]);
            for (int c = 0; c < ncounts; c++) printf(" %12.2f", gbs[way][c]);
            printf("  ");
            for (int c = 0; c < ncounts; c++) printf(" %.2fx", gbs[way][c] / gbs[way][0]);
            printf("\n");
        }
        printf("# %ld wrong bytes in the checked messages\n", wrong_all);
        if (json) {
            FILE *f = fopen(json, "w");
            if (f) {
                fprintf(f, "{\n  \"bench\": \"threads\",\n");
                machine_json(f, &m, ver ? ver() : NULL, real_lib, nranks);
                fprintf(f, "  \"bytes\": %zu, \"window\": %d, \"iterations\": %d, \"repetitions\": %d, \"wrong_bytes\": %ld,\n",
                        size, window, iters, reps, wrong_all);
                fprintf(f, "  \"threads\": [");
                for (int c = 0; c < ncounts; c++) fprintf(f, "%s%d", c ? ", " : "", counts[c]);
                fprintf(f, "],\n  \"gb_per_s\": {");
                for (int way = 0; way < 2; way++) {
                    fprintf(f, "%s\"%s\": [", way ? ", " : "", ways[way]);
                    for (int c = 0; c < ncounts; c++) fprintf(f, "%s%.3f", c ? ", " : "", gbs[way][c]);
                    fprintf(f, "]");
                }
                fprintf(f, "}\n}\n");
                fclose(f);
            }
        }
    }
    for (int t = 0; t < maxt; t++) {
        for (int k = 0; k < window; k++) {
            cudaFree(sbuf[0][t][k]);
            cudaFree(rbuf[0][t][k]);
            free(sbuf[1][t][k]);
            free(rbuf[1][t][k]);
        }
        MPI_Comm_free(&comms[t]);
    }
    MPI_Finalize();
    return wrong_all ? 1 : 0;
}
