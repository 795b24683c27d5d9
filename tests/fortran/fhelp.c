/* The C side of the Fortran tests: memory of each kind and the test state of tests/c/common.h,
 * behind BIND(C) names (calls.inc declares them). Device memory is whatever mem_alloc gives
 * the C tests: the stand-in driver's in CI, cudaMalloc on the GPU machine. */
#include "common.h"
#include "../../include/cudampi.h"

void ft_after_init(void) { t_after_init(); }

/* device: 0 host (malloc), 1 device (cudaMalloc) */
void *ft_alloc(int device, size_t bytes) { return mem_alloc(device ? MEM_DEVICE : MEM_HOST, bytes); }
void ft_free(void *p) { mem_free(p); }
void ft_put(void *dst, const void *src, size_t n) { mem_put(dst, src, n); }
void ft_get(void *dst, const void *src, size_t n) { mem_get(dst, src, n); }
int ft_shim_loaded(void) { return shim_loaded(); }

/* cudampi_get_stats into *s; 0 without cudampi. */
static int stats(struct cudampi_stats *s)
{
    int (*get)(struct cudampi_stats *) = (int (*)(struct cudampi_stats *))dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    return get && get(s) == 0;
}

/* Fortran calls cudampi served itself (cudampi_get_stats), or -1 without cudampi. */
long long ft_fortran_calls(void)
{
    struct cudampi_stats s;
    if (!stats(&s)) return -1;
    return (long long)s.fortran_calls;
}

/* Whether cudampi watches receives into host memory for envelopes (a fast path is on): its
 * persistent host receives are then requests of its own, whose completion calls it serves. */
int ft_host_receives_watched(void)
{
    const char *off = getenv("CUDAMPI_DISABLE"), *ipc = getenv("CUDAMPI_IPC"), *pipe = getenv("CUDAMPI_PIPELINE");
    if (!shim_loaded() || (off && strcmp(off, "1") == 0)) return 0;
    return !(ipc && strcmp(ipc, "0") == 0 && pipe && strcmp(pipe, "0") == 0);
}

/* Device collectives NCCL ran (cudampi_get_stats), or -1 without cudampi. */
long long ft_nccl_calls(void)
{
    struct cudampi_stats s;
    if (!stats(&s)) return -1;
    return (long long)s.nccl_calls;
}

/* In mode nccl (the stand-in NCCL at every size, a device per rank), how many of the device
 * run's six collectives (Allreduce, the same in place, Iallreduce, Reduce, Bcast, Alltoall) run
 * on NCCL, through every binding: all of them; -1 in the other modes (not checked). */
int ft_nccl_expected(void)
{
    const char *mode = getenv("CMTEST_MODE");
    if (!shim_loaded() || !mode || strcmp(mode, "nccl") != 0) return -1;
    return 6;
}

/* Whether the device run's buffers are device memory under cudampi. */
int ft_expect_served(void) { return shim_loaded() && !host_mode(); }

/* Bytes received over CUDA IPC and in chunks (cudampi_get_stats), or -1 without cudampi. */
long long ft_fast_bytes(void)
{
    struct cudampi_stats s;
    if (!stats(&s)) return -1;
    return (long long)(s.ipc_bytes_received + s.chunked_bytes_received);
}
