/* tests/c/late_write.h -- the program's work on device memory still running when an MPI call
 * starts, on the stand-in driver, whose holds make a stream busy (fakecuda_stream_hold): a
 * stream is held while a thread writes this rank's pattern into the memory 30 ms later, on a
 * stream that waits for nothing, then ends the hold. A real GPU has no holds: there
 * late_write_start starts nothing (tests/gpu/stream_order.cu does it with kernels). */
#ifndef LATE_WRITE_H
#define LATE_WRITE_H

#include "common.h"
#include <pthread.h>
#include <unistd.h>

typedef unsigned long long (*late_hold_fn)(cudaStream_t);
typedef int (*late_release_fn)(cudaStream_t, unsigned long long);

struct late_write {
    void *buf;
    size_t n;
    int seed;
    /* The held stream, and whether it is this header's own (made and destroyed here). */
    cudaStream_t busy;
    int own_busy;
    cudaStream_t side;
    unsigned long long ticket;
    late_release_fn release;
    pthread_t thread;
};

/* Whether the driver has holds (and CUDA is in use at all). */
T_UNUSED static int late_write_possible(void)
{
    return !host_mode() && dlsym(RTLD_DEFAULT, "fakecuda_stream_hold") && dlsym(RTLD_DEFAULT, "fakecuda_stream_release");
}

static void *late_write_run(void *arg)
{
    struct late_write *w = arg;
    usleep(30000);
    unsigned char *h = pattern_new(w->n, t_rank, w->seed);
    CUDA_CHECK(cudaMemcpyAsync(w->buf, h, w->n, cudaMemcpyHostToDevice, w->side));
    CUDA_CHECK(cudaStreamSynchronize(w->side));
    free(h);
    w->release(w->busy, w->ticket);
    return NULL;
}

/* Holds `busy` (NULL: a blocking stream of its own) and starts the thread that writes pattern
 * `seed` into `n` bytes at `buf`; 0 where the driver has no holds, having started nothing. */
T_UNUSED static int late_write_start(struct late_write *w, cudaStream_t busy, void *buf, size_t n, int seed)
{
    late_hold_fn hold = (late_hold_fn)dlsym(RTLD_DEFAULT, "fakecuda_stream_hold");
    memset(w, 0, sizeof *w);
    w->release = (late_release_fn)dlsym(RTLD_DEFAULT, "fakecuda_stream_release");
    if (!hold || !w->release || host_mode())
        return 0;
    w->buf = buf;
    w->n = n;
    w->seed = seed;
    w->busy = busy;
    w->own_busy = busy == NULL;
    if (w->own_busy)
        CUDA_CHECK(cudaStreamCreate(&w->busy));
    CUDA_CHECK(cudaStreamCreateWithFlags(&w->side, cudaStreamNonBlocking));
    w->ticket = hold(w->busy);
    pthread_create(&w->thread, NULL, late_write_run, w);
    return 1;
}

/* Waits for the writer; the hold has ended. */
T_UNUSED static void late_write_finish(struct late_write *w)
{
    pthread_join(w->thread, NULL);
    if (w->own_busy)
        CUDA_CHECK(cudaStreamDestroy(w->busy));
    CUDA_CHECK(cudaStreamDestroy(w->side));
}

#endif
