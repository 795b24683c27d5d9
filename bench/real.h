/* bench/real.h: the MPI library's own functions under a preloaded cudampi, and medians: what
 * the benchmarks share that needs no CUDA (bench/machine.h includes it; bench/exchange.c, built
 * without CUDA, includes it alone). Include after <mpi.h>, <dlfcn.h> and <stdlib.h>. */
#ifndef CUDAMPI_BENCH_REAL_H
#define CUDAMPI_BENCH_REAL_H

/* The MPI library's own handle: the library that defines MPI_Comm_rank (cudampi does not
 * intercept it) opened again with RTLD_NOLOAD, so that dlsym in that handle alone finds the
 * real PMPI functions under a preloaded cudampi too. NULL when not found; else *path names it. */
static inline void *real_mpi_library(const char **path)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Comm_rank");
    if (!sym || !dladdr(sym, &di) || !di.dli_fname) return NULL;
    void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_NOW);
    if (h) *path = di.dli_fname;
    return h;
}

typedef int (*mpi_send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*mpi_recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);

/* The library's own PMPI_Send and PMPI_Recv (both or neither), else MPI_Send and MPI_Recv;
 * *lib names the library when they were found, and is left alone otherwise. */
static inline void real_send_recv(mpi_send_fn *send, mpi_recv_fn *recv, const char **lib)
{
    const char *path = NULL;
    void *h = real_mpi_library(&path);
    mpi_send_fn s = h ? (mpi_send_fn)dlsym(h, "PMPI_Send") : NULL;
    mpi_recv_fn r = h ? (mpi_recv_fn)dlsym(h, "PMPI_Recv") : NULL;
    *send = s && r ? s : (mpi_send_fn)MPI_Send;
    *recv = s && r ? r : (mpi_recv_fn)MPI_Recv;
    if (s && r) *lib = path;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (sorts them). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
