/* bench/nccl.h: NCCL as the GPU-native reference column of the benchmarks, loaded at run time
 * (dlopen), so the benchmarks build and run where there is no NCCL (the column shows "-").
 * Included by bench/pingpong.c, bench/bw.c and bench/coll.c after <mpi.h>, <cuda_runtime.h>
 * and machine.h.
 *
 * The library: $CUDAMPI_BENCH_NCCL if set, else libnccl.so.2 from the loader's search path
 * (bench/suite.sh finds the one that PyTorch's wheels bring and sets the variable). NCCL runs
 * only when every rank has a GPU of its own: two ranks on one GPU are refused by NCCL. */
#ifndef CUDAMPI_BENCH_NCCL_H
#define CUDAMPI_BENCH_NCCL_H

#include <dlfcn.h>

/* The parts of nccl.h the benchmarks use (NCCL 2.x ABI). */
typedef struct nccl_comm *nccl_comm_t;
typedef struct {
    char internal[128];
} nccl_id_t;
enum { NCCL_CHAR = 0, NCCL_FLOAT32 = 7 };
enum { NCCL_SUM = 0 };

static struct {
    int on; /* 1 on every rank when the communicator is up */
    int version;
    nccl_comm_t comm;
    cudaStream_t stream;
    int (*get_version)(int *);
    int (*get_unique_id)(nccl_id_t *);
    int (*comm_init_rank)(nccl_comm_t *, int, nccl_id_t, int);
    int (*comm_destroy)(nccl_comm_t);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cudaStream_t);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t); /* recvcount */
    int (*reduce)(const void *, void *, size_t, int, int, int, nccl_comm_t, cudaStream_t);    /* op, root */
    int (*send)(const void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*recv)(void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*group_start)(void);
    int (*group_end)(void);
    const char *(*error_string)(int);
    char why[160]; /* why the column is off, for the table header */
} nccl;

/* Collective over MPI_COMM_WORLD (m from machine_gather). Leaves nccl.on = 0 on every rank
 * when any rank cannot take part. */
static void nccl_open(const struct machine *m, int rank, int nranks)
{
    const char *path = getenv("CUDAMPI_BENCH_NCCL");
    void *h = NULL;
    int ok = m->have_dev;
    snprintf(nccl.why, sizeof nccl.why, "no GPU");
    if (ok) {
        h = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(nccl.why, sizeof nccl.why, "no NCCL library (%s)", path && *path ? path : "libnccl.so.2");
            ok = 0;
        }
    }
    if (h) {
#define NCCL_SYM(field, name) *(void **)&nccl.field = dlsym(h, name), ok = ok && nccl.field
        NCCL_SYM(get_version, "ncclGetVersion");
        NCCL_SYM(get_unique_id, "ncclGetUniqueId");
        NCCL_SYM(comm_init_rank, "ncclCommInitRank");
        NCCL_SYM(comm_destroy, "ncclCommDestroy");
        NCCL_SYM(all_reduce, "ncclAllReduce");
        NCCL_SYM(broadcast, "ncclBroadcast");
        NCCL_SYM(all_gather, "ncclAllGather");
        NCCL_SYM(reduce_scatter, "ncclReduceScatter");
        NCCL_SYM(reduce, "ncclReduce");
        NCCL_SYM(send, "ncclSend");
        NCCL_SYM(recv, "ncclRecv");
        NCCL_SYM(group_start, "ncclGroupStart");
        NCCL_SYM(group_end, "ncclGroupEnd");
        NCCL_SYM(error_string, "ncclGetErrorString");
#undef NCCL_SYM
        if (!ok) snprintf(nccl.why, sizeof nccl.why, "NCCL library without the functions used");
    }
    /* every rank's GPU must be its own */
    if (rank == 0)
        for (int a = 0; a < nranks; a++)
            for (int b = a + 1; b < nranks; b++)
                if (m->all[a].dev == m->all[b].dev && !strcmp(m->all[a].host, m->all[b].host)) {
                    snprintf(nccl.why, sizeof nccl.why, "ranks %d and %d share GPU %d", a, b, m->all[a].dev);
                    ok = 0;
                }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Bcast(nccl.why, (int)sizeof nccl.why, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!all) return;
    nccl_id_t id;
    memset(&id, 0, sizeof id);
    if (rank == 0) nccl.get_unique_id(&id);
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    int rc = cudaStreamCreateWithFlags(&nccl.stream, cudaStreamNonBlocking) == cudaSuccess ? 0 : -1;
    if (rc == 0) rc = nccl.comm_init_rank(&nccl.comm, nranks, id, rank);
    ok = rc == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        snprintf(nccl.why, sizeof nccl.why, "ncclCommInitRank failed (%s)",
                 rc > 0 ? nccl.error_string(rc) : "no stream");
        return;
    }
    nccl.get_version(&nccl.version);
    nccl.on = 1;
    snprintf(nccl.why, sizeof nccl.why, "NCCL %d.%d.%d", nccl.version / 10000, nccl.version / 100 % 100,
             nccl.version % 100);
}

static void nccl_close(void)
{
    if (!nccl.on) return;
    nccl.comm_destroy(nccl.comm);
    cudaStreamDestroy(nccl.stream);
    nccl.on = 0;
}

/* Stops the benchmark on an NCCL error: a figure from a failed call would be meaningless. */
static void nccl_check(int rc, const char *what)
{
    if (rc == 0) return;
    fprintf(stderr, "bench: NCCL %s failed: %s\n", what, nccl.error_string(rc));
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void nccl_sync(void)
{
    if (cudaStreamSynchronize(nccl.stream) != cudaSuccess) {
        fprintf(stderr, "bench: cudaStreamSynchronize after NCCL failed\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

#endif
