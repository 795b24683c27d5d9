/* bench/handoff.cu: what it costs a stream to hand work to a host thread and wait for its
 * answer, the mechanism under the stream-ordered calls (src/cuda/ordered.rs), with no MPI.
 *
 * Per step: a short kernel, then the hand-off, then the stream waits on the GPU
 * (cuStreamWaitValue32 on a word of device memory) until the helper thread has written the
 * step's number with cuStreamWriteValue32 on a non-blocking stream of its own. Hand-offs:
 *   hostfn   cuLaunchHostFunc: the driver's thread runs a function that sets a flag and wakes
 *            the helper (futex); the stream goes on once the function has returned
 *   ticket   cuStreamWriteValue32 of the step's number into a word of pinned, mapped host
 *            memory, which the helper polls (spinning, then yielding)
 * The main thread, bound to CPU 0, queues every step and then waits for the stream; the helper
 * runs on CPU 0 too ("same": a rank's threads bound to its core) or on the others ("apart"),
 * and the main thread's wait is the context's default (spin/yield) or blocking.
 * Each row's steps must all be released in order (checked: the stream's last wait needs every
 * number), or the row hangs; the kernel alone gives the floor per step.
 *
 * Build (on the GPU machine): nvcc -O2 -o handoff bench/handoff.cu -lcuda
 * Run: ./handoff [-n STEPS] [-c CYCLES] [-o FILE]   (defaults 2000 steps, 10000 cycles per kernel)
 * Prints a table; writes the JSON with the date, GPU, driver and every figure. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <atomic>

#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_) {                                                              \
            fprintf(stderr, "handoff: %s failed: %d\n", #x, (int)r_);          \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

__global__ void spin(long long cycles)
{
    long long t = clock64();
    while (clock64() - t < cycles) {
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int steps = 2000;
static std::atomic<unsigned> fired;
static std::atomic<int> futex_word;
static volatile unsigned *ticket_word;
static CUdeviceptr gate;
static CUstream helper_stream;
static CUcontext ctx;
static int way_ticket, helper_same;

static void pin(int same)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (same || n < 2)
        CPU_SET(0, &s);
    else
        for (int c = 1; c < n && c < CPU_SETSIZE; c++)
            CPU_SET(c, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void CUDART_CB host_function(void *arg)
{
    fired.store((unsigned)(size_t)arg);
    futex_word.store(1);
    syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *helper(void *unused)
{
    (void)unused;
    pin(helper_same);
    CK(cuCtxSetCurrent(ctx));
    unsigned done = 0;
    while (done < (unsigned)steps) {
        unsigned seen;
        if (way_ticket) {
            for (int k = 0; (seen = *ticket_word) == done; k++)
                if (k > 2000)
                    sched_yield();
        } else {
            while ((seen = fired.load()) == done) {
                futex_word.store(0);
                if (fired.load() != done)
                    break;
                syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
            }
            seen = fired.load();
        }
        for (unsigned n = done + 1; n <= seen; n++)
            CK(cuStreamWriteValue32(helper_stream, gate, n, 0));
        done = seen;
    }
    return NULL;
}

struct row {
    const char *way, *helper, *wait;
    double step_us, queue_us, kernel_us;
};

int main(int argc, char **argv)
{
    long long cycles = 10000;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            cycles = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-n STEPS] [-c CYCLES] [-o FILE]\n", argv[0]);
            return 2;
        }
    }
    cudaSetDevice(0);
    cudaFree(0);
    CK(cuCtxGetCurrent(&ctx));
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    char gpu[256];
    CK(cuDeviceGetName(gpu, sizeof gpu, dev));
    int driver = 0;
    cuDriverGetVersion(&driver);
    CK(cuMemAlloc(&gate, 4));
    void *page;
    if (cudaHostAlloc(&page, 4096, cudaHostAllocMapped) != cudaSuccess)
        return 1;
    ticket_word = (volatile unsigned *)page;
    CUdeviceptr ticket_dev;
    CK(cuMemHostGetDevicePointer(&ticket_dev, page, 0));
    CK(cuStreamCreate(&helper_stream, CU_STREAM_NON_BLOCKING));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    struct row rows[8];
    int nrows = 0;
    printf("handoff: %s, driver %d, %d steps, kernel of %lld cycles\n", gpu, driver, steps, cycles);
    printf("%-8s %-7s %-10s %12s %12s %12s\n", "hand-off", "helper", "main waits", "us/step", "queue us", "kernel us");
    for (int blocking = 0; blocking < 2; blocking++) {
        if (blocking) {
            cudaDeviceSynchronize();
            CK(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
        }
        for (int w = 0; w < 2; w++)
            for (int same = 1; same >= 0; same--) {
                pin(1);
                way_ticket = w;
                helper_same = same;
                *ticket_word = 0;
                fired.store(0);
                CK(cuMemsetD32(gate, 0, 1));
                cudaDeviceSynchronize();
                pthread_t th;
                pthread_create(&th, NULL, helper, NULL);
                double t0 = now_us();
                for (int n = 1; n <= steps; n++) {
                    spin<<<1, 1, 0, s>>>(cycles);
                    if (w)
                        CK(cuStreamWriteValue32((CUstream)s, ticket_dev, n, 0));
                    else
                        CK(cuLaunchHostFunc((CUstream)s, host_function, (void *)(size_t)n));
                    CK(cuStreamWaitValue32((CUstream)s, gate, n, CU_STREAM_WAIT_VALUE_GEQ));
                }
                double t1 = now_us();
                CK(cuStreamSynchronize((CUstream)s));
                double t2 = now_us();
                pthread_join(th, NULL);
                double t3 = now_us();
                for (int n = 1; n <= steps; n++)
                    spin<<<1, 1, 0, s>>>(cycles);
                cudaStreamSynchronize(s);
                double t4 = now_us();
                struct row r = {w ? "ticket" : "hostfn", same ? "same" : "apart", blocking ? "blocking" : "default",
                                (t2 - t0) / steps, (t1 - t0) / steps, (t4 - t3) / steps};
                rows[nrows++] = r;
                printf("%-8s %-7s %-10s %12.2f %12.2f %12.2f\n", r.way, r.helper, r.wait, r.step_us, r.queue_us, r.kernel_us);
            }
    }
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f)
            return 1;
        time_t t = time(NULL);
        char date[32];
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        fprintf(f, "{\"bench\": \"handoff\", \"date\": \"%s\", \"gpu\": \"%s\", \"driver\": %d, \"steps\": %d, \"cycles\": %lld, \"rows\": [", date, gpu,
                driver, steps, cycles);
        for (int i = 0; i < nrows; i++)
            fprintf(f, "%s\n  {\"handoff\": \"%s\", \"helper\": \"%s\", \"main_wait\": \"%s\", \"us_per_step\": %.3f, \"queue_us\": %.3f, \"kernel_us\": %.3f}",
                    i ? "," : "", rows[i].way, rows[i].helper, rows[i].wait, rows[i].step_us, rows[i].queue_us, rows[i].kernel_us);
        fprintf(f, "\n]}\n");
        fclose(f);
    }
    return 0;
}
