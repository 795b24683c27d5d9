// cudampi-test: ranks=3 without-shim=crash env=OMPI_MCA_osc=^ucx timeout=180
/* Every call with buffers on two GPUs of one process: the send buffer on one GPU and the receive
 * buffer on the other, the parts of a collective likewise, a window on one GPU and the origin
 * buffers on the other, a file written from one and read into the other, in each direction.
 * The calls run from threads in turn (MPI_THREAD_SERIALIZED; multi_gpu_funneled.c: from the
 * main thread alone at MPI_THREAD_FUNNELED) whose current device is each of the two GPUs, and
 * none at all (a thread that never called CUDA). Message sizes cross the paths' thresholds
 * (staged, IPC, chunks). Every result is compared with the bytes the same call gives on host
 * buffers (the patterns), receive buffers poisoned first. Needs two devices (the stand-in has
 * two; on a real machine with one GPU the test says so and passes). */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

#ifndef LEVEL
#define LEVEL MPI_THREAD_SERIALIZED
#endif

#define MAXB (2u << 20)
static const size_t sizes[] = {100, 70000, MAXB};
#define NSIZES 3

static char *buf[2][3]; /* [gpu][role]: 0 send, 1 receive, 2 window / spare */
static char *hsend, *hrecv;
static unsigned char *want;
static MPI_Comm comm;
static int seedc, file_tag;

static int next_rank(void) { return (t_rank + 1) % t_size; }
static int prev_rank(void) { return (t_rank + t_size - 1) % t_size; }

static void poison_dev(char *p, size_t n) { mem_poison(p, n); }

/* A thread of the turn "without CUDA": the helpers' copies make a context current, so it is
 * unset again before every MPI call. */
static __thread int bare_thread;
static void bare(void)
{
    if (bare_thread && !host_mode()) CU_CHECK(cuCtxSetCurrent(NULL));
}
#define CALL(call)                                                                              \
    do {                                                                                        \
        bare();                                                                                 \
        MPI_CHECK(call);                                                                        \
    } while (0)

static void p2p(int a, int b, size_t n, const char *who)
{
    int s = ++seedc;
    mem_pattern(buf[a][0], n, t_rank, s);
    poison_dev(buf[b][1], n + 16);
    MPI_Status st;
    CALL(MPI_Sendrecv(buf[a][0], (int)n, MPI_BYTE, next_rank(), 1, buf[b][1], (int)n, MPI_BYTE, prev_rank(), 1, comm, &st));
    check_pattern(buf[b][1], n, prev_rank(), s, "%s: MPI_Sendrecv GPU %d -> GPU %d, %zu bytes", who, a, b, n);
    unsigned char *tail = mem_fetch(buf[b][1] + n, 16);
    check_all(tail, POISON_BYTE, 16, "%s: MPI_Sendrecv slack", who);
    free(tail);

    s = ++seedc;
    mem_pattern(buf[a][0], n, t_rank, s);
    poison_dev(buf[b][1], n);
    MPI_Request rq[2];
    CALL(MPI_Irecv(buf[b][1], (int)n, MPI_BYTE, prev_rank(), 2, comm, &rq[0]));
    CALL(MPI_Isend(buf[a][0], (int)n, MPI_BYTE, next_rank(), 2, comm, &rq[1]));
    MPI_Status sts[2];
    CALL(MPI_Waitall(2, rq, sts));
    check_pattern(buf[b][1], n, prev_rank(), s, "%s: MPI_Isend/MPI_Irecv GPU %d -> GPU %d, %zu bytes", who, a, b, n);
}

static void collectives(int a, int b, size_t n, const char *who)
{
    int s = ++seedc;
    size_t count = n / 4;
    mem_pattern(buf[a][0], count * 4, t_rank, s);
    poison_dev(buf[b][1], count * 4);
    CALL(MPI_Allreduce(buf[a][0], buf[b][1], (int)count, MPI_UNSIGNED, MPI_SUM, comm));
    memset(want, 0, count * 4);
    for (int q = 0; q < t_size; q++) {
        pattern_fill(hsend, count * 4, q, s);
        for (size_t i = 0; i < count; i++) ((unsigned *)want)[i] += ((unsigned *)hsend)[i];
    }
    mem_get(hrecv, buf[b][1], count * 4);
    check_bytes(hrecv, want, count * 4, "%s: MPI_Allreduce GPU %d -> GPU %d, %zu bytes", who, a, b, count * 4);

    s = ++seedc;
    size_t each = n / (size_t)t_size;
    mem_pattern(buf[a][0], each, t_rank, s);
    poison_dev(buf[b][1], each * (size_t)t_size);
    CALL(MPI_Allgather(buf[a][0], (int)each, MPI_BYTE, buf[b][1], (int)each, MPI_BYTE, comm));
    for (int q = 0; q < t_size; q++) pattern_fill(want + (size_t)q * each, each, q, s);
    mem_get(hrecv, buf[b][1], each * (size_t)t_size);
    check_bytes(hrecv, want, each * (size_t)t_size, "%s: MPI_Allgather GPU %d -> GPU %d, %zu bytes each", who, a, b, each);

    s = ++seedc;
    int root = seedc % t_size;
    if (t_rank == root) mem_pattern(buf[b][1], n, root, s);
    else poison_dev(buf[b][1], n);
    CALL(MPI_Bcast(buf[b][1], (int)n, MPI_BYTE, root, comm));
    check_pattern(buf[b][1], n, root, s, "%s: MPI_Bcast on GPU %d, %zu bytes", who, b, n);
}

/* A window on GPU w (made once per GPU); the origin buffers on GPU o. */
static MPI_Win win[2];

static void one_sided(int w, int o, size_t n, const char *who)
{
    size_t half = MAXB / 2, m = n < half ? n : half - 64;
    int s_put = ++seedc, s_get = ++seedc, s_acc = ++seedc, s_base = ++seedc;
    /* the window: [0, half) put by the previous rank; [half, ...) read by the next one */
    poison_dev(buf[w][2], m);
    mem_pattern(buf[w][2] + half, m, t_rank, s_get);
    mem_pattern(buf[o][0], m, t_rank, s_put);
    poison_dev(buf[o][1], m);
    CALL(MPI_Win_fence(0, win[w]));
    CALL(MPI_Put(buf[o][0], (int)m, MPI_BYTE, next_rank(), 0, (int)m, MPI_BYTE, win[w]));
    CALL(MPI_Get(buf[o][1], (int)m, MPI_BYTE, prev_rank(), (MPI_Aint)half, (int)m, MPI_BYTE, win[w]));
    CALL(MPI_Win_fence(0, win[w]));
    check_pattern(buf[w][2], m, prev_rank(), s_put, "%s: MPI_Put GPU %d -> window on GPU %d, %zu bytes", who, o, w, m);
    check_pattern(buf[o][1], m, prev_rank(), s_get, "%s: MPI_Get window on GPU %d -> GPU %d, %zu bytes", who, w, o, m);

    /* accumulate, contiguous and as a vector (every other int), into [0, 8 * k) */
    size_t k = m / 8 ? m / 8 : 1;
    MPI_Datatype vec;
    MPI_Type_vector((int)k, 1, 2, MPI_UNSIGNED, &vec);
    MPI_Type_commit(&vec);
    for (int dt = 0; dt < 2; dt++) {
        mem_pattern(buf[w][2], k * 8, t_rank, s_base + dt);
        mem_pattern(buf[o][0], k * 8, t_rank, s_acc + dt);
        CALL(MPI_Win_fence(0, win[w]));
        if (dt == 0)
            CALL(MPI_Accumulate(buf[o][0], (int)k, MPI_UNSIGNED, next_rank(), 0, (int)k, MPI_UNSIGNED, MPI_SUM, win[w]));
        else
            CALL(MPI_Accumulate(buf[o][0], 1, vec, next_rank(), 0, 1, vec, MPI_SUM, win[w]));
        CALL(MPI_Win_fence(0, win[w]));
        unsigned *exp = (unsigned *)want, *add = (unsigned *)hsend;
        pattern_fill(want, k * 8, t_rank, s_base + dt);
        pattern_fill(hsend, k * 8, prev_rank(), s_acc + dt);
        for (size_t i = 0; i < (dt ? 2 * k : k); i += dt ? 2 : 1) exp[i] += add[i];
        mem_get(hrecv, buf[w][2], k * 8);
        check_bytes(hrecv, want, k * 8, "%s: MPI_Accumulate (%s) GPU %d -> window on GPU %d, %zu ints", who,
                    dt ? "vector" : "contiguous", o, w, k);
    }
    MPI_Type_free(&vec);
}

static void file_io(int a, int b, size_t n, const char *who)
{
    char path[256];
    snprintf(path, sizeof path, "%s/cudampi-multi-gpu-%d.bin", t_env("TMPDIR", "/tmp"), file_tag);
    MPI_File fh;
    CALL(MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    int s = ++seedc;
    mem_pattern(buf[a][0], n, t_rank, s);
    poison_dev(buf[b][1], n);
    MPI_Status st;
    CALL(MPI_File_write_at_all(fh, (MPI_Offset)(n * (size_t)t_rank), buf[a][0], (int)n, MPI_BYTE, &st));
    CALL(MPI_File_sync(fh));
    MPI_Barrier(comm);
    CALL(MPI_File_sync(fh));
    CALL(MPI_File_read_at_all(fh, (MPI_Offset)(n * (size_t)prev_rank()), buf[b][1], (int)n, MPI_BYTE, &st));
    check_pattern(buf[b][1], n, prev_rank(), s, "%s: MPI_File write from GPU %d, read into GPU %d, %zu bytes", who, a, b, n);
    CALL(MPI_File_close(&fh));
}

/* One round of every call, both ways between the GPUs. */
static void every_call(const char *who)
{
    for (int z = 0; z < NSIZES; z++)
        for (int a = 0; a < 2; a++) {
            p2p(a, 1 - a, sizes[z], who);
            collectives(a, 1 - a, sizes[z], who);
            one_sided(a, 1 - a, sizes[z], who);
            file_io(a, 1 - a, sizes[z], who);
        }
}

static void set_device(int g)
{
    if (!host_mode()) CUDA_CHECK(cudaSetDevice(g));
}

struct turn {
    int device; /* -1: the thread never calls CUDA */
    const char *who;
};

static void *in_turn(void *vp)
{
    struct turn *t = (struct turn *)vp;
    if (t->device >= 0) set_device(t->device);
    bare_thread = t->device < 0;
    every_call(t->who);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init_thread(&argc, &argv, LEVEL);
    if ((!host_mode() && test_device_count() < 2) || provided < LEVEL) {
        if (t_rank == 0) note("needs 2 GPUs and thread level %d (has %d GPU(s), level %d): skipped", LEVEL, test_device_count(), provided);
        return report_and_finalize();
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    file_tag = (int)getpid();
    MPI_Bcast(&file_tag, 1, MPI_INT, 0, comm);
    for (int g = 0; g < 2; g++) {
        set_device(g);
        for (int r = 0; r < 3; r++) buf[g][r] = (char *)mem_alloc(MEM_DEVICE, MAXB + 64);
        MPI_CHECK(MPI_Win_create(buf[g][2], MAXB, 1, MPI_INFO_NULL, comm, &win[g]));
    }
    hsend = (char *)xmalloc(MAXB + 64);
    hrecv = (char *)xmalloc(MAXB + 64);
    want = (unsigned char *)xmalloc(MAXB + 64);
    /* the main thread's current device: the first GPU, then the second */
    set_device(0);
    every_call("main thread on GPU 0");
    set_device(1);
    every_call("main thread on GPU 1");
    if (LEVEL >= MPI_THREAD_SERIALIZED) {
        struct turn turns[] = {{-1, "a thread without CUDA"}, {0, "a thread on GPU 0"}, {1, "a thread on GPU 1"}};
        for (int i = 0; i < 3; i++) {
            pthread_t tid;
            pthread_create(&tid, NULL, in_turn, &turns[i]);
            pthread_join(tid, NULL);
        }
    }
    for (int g = 0; g < 2; g++) MPI_Win_free(&win[g]);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
