/* bench/machine.h: what the benchmarks record about the machine they ran on, and their shared
 * option parsing and clock; medians and the MPI library's own functions come from real.h.
 * Included by bench/pingpong.c, bw.c, coll.c, floor.c and turns.c after <mpi.h>, <cuda_runtime.h>,
 * <dlfcn.h>, <time.h> and, with FAKECUDA_FIXTURE, <cuda.h>. */
#ifndef CUDAMPI_BENCH_MACHINE_H
#define CUDAMPI_BENCH_MACHINE_H

struct rankinfo {
    char host[64];
    char gpu[96];
    int dev;
    int pad;
};

#include "real.h"

/* Seconds on the monotonic clock. */
static inline double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void clean(char *s) /* keep a string JSON- and table-safe */
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) *s = ' ';
}

static void gpu_name(int dev, char *name, size_t len)
{
    snprintf(name, len, "(none)");
    if (dev < 0) return;
#ifdef FAKECUDA_FIXTURE
    /* the stand-in runtime has no cudaGetDeviceProperties; its driver names the device */
    CUdevice d;
    if (cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&d, dev) == CUDA_SUCCESS) cuDeviceGetName(name, (int)len, d);
#else
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
        size_t k = strnlen(p.name, sizeof p.name);
        if (k >= len) k = len - 1;
        memcpy(name, p.name, k);
        name[k] = 0;
    }
#endif
    clean(name);
}

static void cuda_version_str(int v, char *s, size_t len)
{
    if (v > 0)
        snprintf(s, len, "%d.%d", v / 1000, (v % 1000) / 10);
    else
        snprintf(s, len, "unknown");
}

static void utc_now(char *s, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(s, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K') v *= 1024;
    if (*end == 'm' || *end == 'M') v *= 1024 * 1024;
    if (*end == 'g' || *end == 'G') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

/* -d as the OSU micro-benchmarks take it: "-d cuda [D|H] [D|H]" (default D D) or "-d host": where
 * ranks 0 and 1 keep the buffers of the column that goes through MPI as the program sees it.
 * The letters after "cuda" are taken from argv here, so call this from getopt's 'd' case. */
static inline int parse_placement(const char *arg, int argc, char **argv, char place[2])
{
    if (!strcmp(arg, "host")) {
        place[0] = place[1] = 'H';
        return 1;
    }
    if (strcmp(arg, "cuda")) return 0;
    place[0] = place[1] = 'D';
    for (int r = 0; r < 2 && optind < argc && (!strcmp(argv[optind], "D") || !strcmp(argv[optind], "H")); r++)
        place[r] = argv[optind++][0];
    return 1;
}

struct machine {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING]; /* first line of MPI_Get_library_version */
    struct rankinfo me;
    struct rankinfo *all; /* every rank's, on rank 0 only */
    int ndev, have_dev, drv, rt;
    char date[32], drvs[16], rts[16];
};

/* Collective over MPI_COMM_WORLD: each rank takes GPU (node-local rank % devices) and the
 * ranks' descriptions are gathered on rank 0. */
static void machine_gather(struct machine *m, int rank, int nranks)
{
    int len;
    memset(m, 0, sizeof *m);
    MPI_Get_library_version(m->lib, &len);
    char *nl = strchr(m->lib, '\n');
    if (nl) *nl = 0;
    clean(m->lib);
    MPI_Comm node;
    int lrank = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_free(&node);
    m->me.dev = -1;
    if (cudaGetDeviceCount(&m->ndev) == cudaSuccess && m->ndev > 0) {
        m->me.dev = lrank % m->ndev;
        m->have_dev = cudaSetDevice(m->me.dev) == cudaSuccess;
    }
    cudaDriverGetVersion(&m->drv);
    cudaRuntimeGetVersion(&m->rt);
    gethostname(m->me.host, sizeof m->me.host - 1);
    clean(m->me.host);
    gpu_name(m->have_dev ? m->me.dev : -1, m->me.gpu, sizeof m->me.gpu);
    m->all = rank == 0 ? calloc((size_t)nranks, sizeof *m->all) : NULL;
    MPI_Gather(&m->me, (int)sizeof m->me, MPI_BYTE, m->all, (int)sizeof m->me, MPI_BYTE, 0, MPI_COMM_WORLD);
    utc_now(m->date, sizeof m->date);
    cuda_version_str(m->drv, m->drvs, sizeof m->drvs);
    cuda_version_str(m->rt, m->rts, sizeof m->rts);
}

/* The table header's first lines (rank 0). `shim` is cudampi's version, or NULL. */
static void machine_print(const struct machine *m, const char *bench, const char *shim, const char *real_lib)
{
    printf("# cudampi %s: %s\n", bench, m->lib);
    printf("# shim: %s; real MPI calls from %s\n", shim ? shim : "not loaded", real_lib);
    printf("# %s, GPU %d: %s; CUDA driver %s, runtime %s; %s\n", m->me.host, m->me.dev, m->me.gpu, m->drvs,
           m->rts, m->date);
}

/* The JSON "machine" member, with its trailing comma and newline. */
static void machine_json(FILE *f, const struct machine *m, const char *shim, const char *real_lib, int nranks)
{
    fprintf(f, "  \"machine\": {\"hostname\": \"%s\", \"date_utc\": \"%s\", \"gpu\": \"%s\", "
               "\"cuda_driver\": \"%s\", \"cuda_driver_version\": %d, \"cuda_runtime\": \"%s\", "
               "\"cuda_runtime_version\": %d, \"cuda_devices\": %d,\n",
            m->me.host, m->date, m->me.gpu, m->drvs, m->drv, m->rts, m->rt, m->ndev);
    fprintf(f, "    \"mpi\": \"%s\", \"real_mpi_lib\": \"%s\", \"shim\": ", m->lib, real_lib);
    if (shim)
        fprintf(f, "\"%s\",\n", shim);
    else
        fprintf(f, "null,\n");
    fprintf(f, "    \"ranks\": [");
    for (int r = 0; r < nranks; r++)
        fprintf(f, "%s{\"rank\": %d, \"host\": \"%s\", \"device\": %d, \"gpu\": \"%s\"}", r ? ", " : "", r,
                m->all[r].host, m->all[r].dev, m->all[r].gpu);
    fprintf(f, "]},\n");
}

#endif
