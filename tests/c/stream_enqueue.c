// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_THREAD_MULTIPLE=1,CUDAMPI_ENQUEUE=ordered timeout=120 nccl=yes
/* MPICH's stream-ordered calls under cudampi, on every MPI: a stream made from a cudaStream_t
 * (MPIX_Info_set_hex), a stream communicator, and MPIX_Send/Recv/Isend/Irecv/Wait/Waitall/
 * Allreduce_enqueue on device and host buffers. The program initialises with MPI_Init:
 * CUDAMPI_THREAD_MULTIPLE=1 has cudampi ask for the thread level its progress thread needs.
 * Every receive buffer is poisoned; what the stream holds is read back by a copy queued on the
 * stream after the operation, then the stream is synchronised.
 *   1. ping-pong of 8 B, 4 KiB and 1 MiB, blocking enqueue calls: the send buffer is
 *      overwritten on the stream right after MPIX_Send_enqueue (the send took the bytes before);
 *      statuses name source, tag and size;
 *   2. the same from host memory;
 *   3. 16 MPIX_Isend_enqueue and 16 MPIX_Irecv_enqueue each way, received in reverse tag
 *      order, completed by one MPIX_Waitall_enqueue with statuses; a receive buffer larger
 *      than the message keeps its poison past it;
 *   3b. mixed: a device message of 1 MiB sent with MPI_Send (over CUDA IPC where cudampi takes
 *      that path) is received with MPIX_Recv_enqueue, and one sent with MPIX_Send_enqueue is
 *      received with MPI_Recv;
 *   4. the send waits for earlier work: the stream is held (the stand-in's hold) while another
 *      thread writes the buffer 30 ms later, then released;
 *   5. MPIX_Allreduce_enqueue (sum of doubles, out of place and in place), against
 *      MPI_Allreduce of the same values on host memory; in mode nccl (a GPU per rank) both
 *      run on NCCL (cudampi_stats.nccl_calls);
 *   6. errors: an enqueue on MPI_COMM_WORLD and on a communicator of a stream without a CUDA
 *      stream (MPI_ERR_OTHER), MPIX_Wait_enqueue on an ordinary request (MPI_ERR_REQUEST), a
 *      device buffer with a datatype that has gaps (MPI_ERR_TYPE; made in the call, it is
 *      served), freeing a stream that a
 *      communicator still uses (MPI_ERR_OTHER), a stream value that is not hexadecimal.
 * Cases 1-6 run on a non-blocking stream, then 1-3b and 5 again on a blocking one. */
#include "ipc_stats.h"
#include "late_write.h"
#include "stream_calls.h"

/* STREAM_CASES=1,3b runs only those cases (all by default), to isolate one on a GPU. */
static int wanted(const char *c)
{
    const char *list = getenv("STREAM_CASES");
    if (!list || !*list)
        return 1;
    size_t n = strlen(c);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, c, n))
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    if (t_rank == 0)
        printf("note: case %s skipped (STREAM_CASES=%s)\n", c, list);
    return 0;
}

static cudaStream_t stream;
static MPI_Comm scomm;
static int peer;

static void expect_dev(const void *dev, size_t n, int from, int seed, const char *what)
{
    unsigned char *have = xmalloc(n ? n : 1), *want = pattern_new(n, from, seed);
    CUDA_CHECK(cudaMemcpyAsync(have, dev, n, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    check_bytes(have, want, n, "%s (%zu bytes)", what, n);
    free(have);
    free(want);
}

/* Case 1 and 2: a blocking ping-pong in stream order. */
static void pingpong(int kind, size_t n, int seed)
{
    void *s = mem_alloc(kind, n), *r = mem_alloc(kind, n);
    int device = mem_kind_is_device(kind);
    for (int k = 0; k < 3; k++) {
        int tag = seed + k;
        MPI_Status st;
        status_init(&st);
        mem_pattern(s, n, t_rank, tag);
        mem_poison(r, n);
        if (t_rank == 0) {
            MPI_CHECK(p_MPIX_Send_enqueue(s, (int)n, MPI_BYTE, peer, tag, scomm));
            if (device)
                CUDA_CHECK(cudaMemsetAsync(s, 0xEE, n, stream));
            MPI_CHECK(p_MPIX_Recv_enqueue(r, (int)n, MPI_BYTE, peer, tag, scomm, &st));
        } else {
            MPI_CHECK(p_MPIX_Recv_enqueue(r, (int)n, MPI_BYTE, peer, tag, scomm, &st));
            MPI_CHECK(p_MPIX_Send_enqueue(s, (int)n, MPI_BYTE, peer, tag, scomm));
            if (device)
                CUDA_CHECK(cudaMemsetAsync(s, 0xEE, n, stream));
        }
        if (device) {
            expect_dev(r, n, peer, tag, "ping-pong from device memory");
        } else {
            CUDA_CHECK(cudaStreamSynchronize(stream));
            unsigned char *want = pattern_new(n, peer, tag);
            check_bytes(r, want, n, "ping-pong from host memory (%zu bytes)", n);
            free(want);
        }
        check_status(&st, MPI_BYTE, peer, tag, (int)n, "ping-pong status, %zu bytes", n);
    }
    mem_free(s);
    mem_free(r);
}

/* Case 3: many operations in flight, one MPIX_Waitall_enqueue. */
static void window(void)
{
    enum { N = 16 };
    const size_t n = 3000, cap = 4096;
    char *s = mem_alloc(MEM_DEVICE, N * n), *r = mem_alloc(MEM_DEVICE, N * cap);
    MPI_Request q[2 * N];
    MPI_Status st[2 * N];
    for (int i = 0; i < N; i++)
        mem_pattern(s + i * n, n, t_rank, 300 + i);
    mem_poison(r, N * cap);
    for (int i = 0; i < N; i++)
        MPI_CHECK(p_MPIX_Irecv_enqueue(r + i * cap, (int)cap, MPI_BYTE, peer, 300 + (N - 1 - i), scomm, &q[i]));
    for (int i = 0; i < N; i++)
        MPI_CHECK(p_MPIX_Isend_enqueue(s + i * n, (int)n, MPI_BYTE, peer, 300 + i, scomm, &q[N + i]));
    for (int i = 0; i < 2 * N; i++)
        status_init(&st[i]);
    MPI_CHECK(p_MPIX_Waitall_enqueue(2 * N, q, st));
    for (int i = 0; i < 2 * N; i++)
        CHECK(q[i] == MPI_REQUEST_NULL, "request %d is not MPI_REQUEST_NULL after MPIX_Waitall_enqueue", i);
    unsigned char *have = xmalloc(N * cap);
    CUDA_CHECK(cudaMemcpyAsync(have, r, N * cap, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < N; i++) {
        int tag = 300 + (N - 1 - i);
        unsigned char *want = pattern_new(n, peer, tag);
        check_bytes(have + i * cap, want, n, "window, receive %d (tag %d)", i, tag);
        check_all(have + i * cap + n, POISON_BYTE, cap - n, "window, receive %d past the message", i);
        check_status(&st[i], MPI_BYTE, peer, tag, (int)n, "window, receive %d", i);
        free(want);
    }
    free(have);
    mem_free(s);
    mem_free(r);
}

/* Case 3b: enqueue calls meet plain ones. */
static void mixed(void)
{
    const size_t n = 1 << 20;
    void *b = mem_alloc(MEM_DEVICE, n);
    for (int way = 0; way < 2; way++) {
        int tag = 400 + way;
        MPI_Status st;
        status_init(&st);
        if (t_rank == way) {
            mem_pattern(b, n, t_rank, tag);
            if (way == 0)
                MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, peer, tag, scomm));
            else
                MPI_CHECK(p_MPIX_Send_enqueue(b, (int)n, MPI_BYTE, peer, tag, scomm));
            CUDA_CHECK(cudaStreamSynchronize(stream));
        } else {
            mem_poison(b, n);
            if (way == 0) {
                MPI_CHECK(p_MPIX_Recv_enqueue(b, (int)n, MPI_BYTE, peer, tag, scomm, &st));
                expect_dev(b, n, peer, tag, "MPI_Send received by MPIX_Recv_enqueue");
            } else {
                MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, peer, tag, scomm, &st));
                unsigned char *have = mem_fetch(b, n), *want = pattern_new(n, peer, tag);
                check_bytes(have, want, n, "MPIX_Send_enqueue received by MPI_Recv");
                free(have);
                free(want);
            }
            check_status(&st, MPI_BYTE, peer, tag, (int)n, "mixed, way %d", way);
        }
    }
    mem_free(b);
}

/* Case 4: the copy out of the send buffer waits for the work queued before it. */
static void held(void)
{
    const size_t n = 8192;
    if (!late_write_possible())
        return; /* a real GPU: no holds */
    void *b = mem_alloc(MEM_DEVICE, n);
    if (t_rank == 0) {
        mem_poison(b, n);
        struct late_write w;
        late_write_start(&w, stream, b, n, 77);
        MPI_CHECK(p_MPIX_Send_enqueue(b, (int)n, MPI_BYTE, peer, 77, scomm));
        late_write_finish(&w);
        CUDA_CHECK(cudaStreamSynchronize(stream));
    } else {
        mem_poison(b, n);
        MPI_CHECK(p_MPIX_Recv_enqueue(b, (int)n, MPI_BYTE, peer, 77, scomm, MPI_STATUS_IGNORE));
        expect_dev(b, n, peer, 77, "a send queued behind earlier work");
    }
    mem_free(b);
}

/* Case 5. */
static void allreduce(void)
{
    const int count = 1 << 14;
    size_t n = count * sizeof(double);
    double *h = xmalloc(n), *want = xmalloc(n), *got = xmalloc(n);
    for (int i = 0; i < count; i++)
        h[i] = (double)((i * 7 + t_rank * 13) % 1000) / 8.0;
    MPI_CHECK(MPI_Allreduce(h, want, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    double *s = mem_alloc(MEM_DEVICE, n), *r = mem_alloc(MEM_DEVICE, n);
    stats_fn get = stats_lookup();
    struct cudampi_stats before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    if (get)
        get(&before);
    mem_put(s, h, n);
    mem_poison(r, n);
    MPI_CHECK(p_MPIX_Allreduce_enqueue(s, r, count, MPI_DOUBLE, MPI_SUM, scomm));
    CUDA_CHECK(cudaMemcpyAsync(got, r, n, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    check_bytes(got, want, n, "MPIX_Allreduce_enqueue, sum of %d doubles", count);
    MPI_CHECK(p_MPIX_Allreduce_enqueue(MPI_IN_PLACE, s, count, MPI_DOUBLE, MPI_SUM, scomm));
    CUDA_CHECK(cudaMemcpyAsync(got, s, n, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    check_bytes(got, want, n, "MPIX_Allreduce_enqueue in place, sum of %d doubles", count);
    if (get && !strcmp(t_env("CMTEST_MODE", ""), "nccl")) {
        get(&after);
        CHECK(after.nccl_calls - before.nccl_calls == 2, "mode nccl: %llu enqueued allreduces ran on NCCL, expected 2",
              (unsigned long long)(after.nccl_calls - before.nccl_calls));
    }
    mem_free(s);
    mem_free(r);
    free(h);
    free(want);
    free(got);
}

static void expect_class(int rc, int cls, const char *what)
{
    CHECK(error_class(rc) == cls, "%s: error class %s, expected %s", what, error_name(error_class(rc)), error_name(cls));
}

/* Case 6. */
static void errors(void)
{
    void *d = mem_alloc(MEM_DEVICE, 64);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(scomm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    expect_class(p_MPIX_Send_enqueue(d, 4, MPI_BYTE, peer, 1, MPI_COMM_WORLD), MPI_ERR_OTHER, "an enqueue on MPI_COMM_WORLD");

    MPIX_Stream plain;
    MPI_Comm pcomm;
    MPI_CHECK(p_MPIX_Stream_create(MPI_INFO_NULL, &plain));
    MPI_CHECK(p_MPIX_Stream_comm_create(MPI_COMM_WORLD, plain, &pcomm));
    MPI_Comm_set_errhandler(pcomm, MPI_ERRORS_RETURN);
    expect_class(p_MPIX_Send_enqueue(d, 4, MPI_BYTE, peer, 1, pcomm), MPI_ERR_OTHER, "an enqueue on a stream without a CUDA stream");
    int rc = p_MPIX_Stream_free(&plain);
    CHECK(rc != MPI_SUCCESS, "MPIX_Stream_free of a stream a communicator uses succeeded");
    MPI_CHECK(MPI_Comm_free(&pcomm));
    MPI_CHECK(p_MPIX_Stream_free(&plain));
    CHECK(plain == MPIX_STREAM_NULL, "MPIX_Stream_free did not set MPIX_STREAM_NULL");

    MPI_Request q;
    int x = 5, y = 0;
    MPI_CHECK(MPI_Irecv(&y, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &q));
    expect_class(p_MPIX_Wait_enqueue(&q, MPI_STATUS_IGNORE), MPI_ERR_REQUEST, "MPIX_Wait_enqueue on an ordinary request");
    MPI_CHECK(MPI_Send(&x, 1, MPI_INT, 0, 9, MPI_COMM_SELF));
    MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    CHECK(y == 5, "the ordinary request still completes (got %d)", y);

    /* Made in the call, the operation takes every datatype cudampi's MPI_Send takes. */
    if (strcmp(t_env("CUDAMPI_ENQUEUE", ""), "immediate") != 0) {
        MPI_Datatype gaps;
        MPI_Type_vector(2, 1, 2, MPI_INT, &gaps);
        MPI_Type_commit(&gaps);
        expect_class(p_MPIX_Send_enqueue(d, 1, gaps, peer, 1, scomm), MPI_ERR_TYPE, "a device buffer with a datatype that has gaps");
        MPI_Type_free(&gaps);
    }

    MPI_Info info;
    MPIX_Stream bad;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPI_Info_set(info, "value", "not-hex!");
    rc = p_MPIX_Stream_create(info, &bad);
    CHECK(rc != MPI_SUCCESS, "MPIX_Stream_create with a value that is not hexadecimal succeeded");
    MPI_Info_free(&info);
    mem_free(d);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    peer = 1 - t_rank;
    stream_calls_lookup();
    static const size_t sizes[] = {8, 4096, 1 << 20};
    /* A blocking stream (cudaStreamCreate's) waits for the legacy default stream's work and that
     * stream for it: nothing cudampi does for an enqueued operation may sit on the legacy
     * stream behind the program's stream, which waits for that very operation. */
    for (int blocking = 0; blocking < 2; blocking++) {
        if (blocking)
            CUDA_CHECK(cudaStreamCreate(&stream));
        else
            CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        MPIX_Stream mstream;
        stream_comm(stream, &mstream, &scomm);
        if (wanted("1"))
            for (int i = 0; i < 3; i++)
                pingpong(MEM_DEVICE, sizes[i], 10 * (i + 1));
        if (wanted("2"))
            pingpong(MEM_HOST, 4096, 50);
        if (wanted("3"))
            window();
        if (wanted("3b"))
            mixed();
        /* The writer's copy is legacy-stream work, which a blocking stream held for it waits for. */
        if (wanted("4") && !blocking)
            held();
        if (wanted("5"))
            allreduce();
        if (wanted("6") && !blocking)
            errors();
        MPI_CHECK(MPI_Comm_free(&scomm));
        MPI_CHECK(p_MPIX_Stream_free(&mstream));
        CUDA_CHECK(cudaStreamDestroy(stream));
    }
    return report_and_finalize();
}
