// cudampi-test: ranks=1,2,4 env=CUDAMPI_ENQUEUE=nccl timeout=120 nccl=yes forced=no
/* MPI's matching for the enqueue calls where device messages go on NCCL (mode nccl: the
 * stand-in NCCL, a device per rank), which pairs sends and receives by order alone; elsewhere
 * the same calls go through MPI, and both must give the same bytes and statuses. Every receive
 * buffer is poisoned and larger than its message unless the case says otherwise; bytes past
 * the message must stay poisoned.
 *   0. each rank to itself: tags 61, 62, 63 sent, 63, 61, 62 received, one
 *      MPIX_Waitall_enqueue; in mode nccl, then a send to itself waited for, its buffer
 *      overwritten on the stream, and only then the receive;
 *   1. tags out of order, nonblocking: rank 0 sends tags 1, 2, 3 (100 B, 5000 B, 70000 B) to
 *      rank 1, which posts tag 3, then 1, then 2 with 80000-byte buffers;
 *   2. the same with blocking calls: tags 7, 8 sent, 8 received first;
 *   3. MPI_ANY_SOURCE and MPI_ANY_TAG: every other rank sends 512 * rank bytes with tag
 *      100 + rank to rank 0, which receives them in whatever order they match;
 *   4. mixed memory: device into host, host into device, a device send with gaps, and a device
 *      message into a host datatype with gaps;
 *   5. a message longer than its receive (MPI_ERR_TRUNCATE with MPI_ERRORS_RETURN), then the
 *      next message of the pair still right; a zero-byte message between device ones;
 *   6. in mode nccl, cudampi_stats.nccl_calls rose by every device message's operation. */
#include "stream_calls.h"

static cudaStream_t stream;
static MPI_Comm scomm;
static unsigned long long on_nccl; /* device operations this rank expects on NCCL */

/* A buffer of `n` bytes of `kind` holding the pattern of (this rank, seed). */
static void *filled(int kind, size_t n, int seed)
{
    void *b = mem_alloc(kind, n ? n : 1);
    unsigned char *h = pattern_new(n, t_rank, seed);
    if (kind == MEM_HOST)
        memcpy(b, h, n);
    else {
        CUDA_CHECK(cudaMemcpyAsync(b, h, n, cudaMemcpyHostToDevice, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    free(h);
    return b;
}

static void *poisoned(int kind, size_t n)
{
    void *b = mem_alloc(kind, n);
    if (kind == MEM_HOST)
        memset(b, POISON_BYTE, n);
    else {
        CUDA_CHECK(cudaMemsetAsync(b, POISON_BYTE, n, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    return b;
}

/* The stream's view of `n` bytes at `b`, read after everything queued so far. */
static unsigned char *read_back(const void *b, int kind, size_t n)
{
    unsigned char *h = xmalloc(n ? n : 1);
    if (kind == MEM_HOST) {
        CUDA_CHECK(cudaStreamSynchronize(stream));
        memcpy(h, b, n);
    } else {
        CUDA_CHECK(cudaMemcpyAsync(h, b, n, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    return h;
}

/* The message of (from, seed), `n` bytes, at the start of `room` bytes of `b`; poison after. */
static void check_message(const void *b, int kind, size_t n, size_t room, int from, int seed, const char *what)
{
    unsigned char *have = read_back(b, kind, room), *want = pattern_new(n, from, seed);
    check_bytes(have, want, n, "%s: the message", what);
    check_all(have + n, POISON_BYTE, room - n, "%s: past the message", what);
    free(have);
    free(want);
}

static int nccl_mode;

static void to_self(void)
{
    static const size_t n[3] = {300, 6000, 50000};
    const size_t room = 60000;
    void *s[3], *r[3];
    MPI_Request q[6];
    MPI_Status st[6];
    for (int i = 0; i < 3; i++) {
        s[i] = filled(MEM_DEVICE, n[i], 61 + i);
        MPI_CHECK(p_MPIX_Isend_enqueue(s[i], (int)n[i], MPI_BYTE, t_rank, 61 + i, scomm, &q[i]));
    }
    static const int order[3] = {63, 61, 62};
    for (int i = 0; i < 3; i++) {
        r[i] = poisoned(MEM_DEVICE, room);
        MPI_CHECK(p_MPIX_Irecv_enqueue(r[i], (int)room, MPI_BYTE, t_rank, order[i], scomm, &q[3 + i]));
    }
    for (int i = 0; i < 6; i++)
        status_init(&st[i]);
    MPI_CHECK(p_MPIX_Waitall_enqueue(6, q, st));
    for (int i = 0; i < 3; i++) {
        int t = order[i];
        check_status(&st[3 + i], MPI_BYTE, t_rank, t, (int)n[t - 61], "to itself, tag %d", t);
        check_message(r[i], MEM_DEVICE, n[t - 61], room, t_rank, t, "to itself");
        mem_free(r[i]);
        mem_free(s[i]);
    }
    if (!nccl_mode)
        return;
    /* Mode nccl copies a message to the rank itself at the send, so the send's wait may come
     * before the receive is posted (which MPI leaves unsafe in general). */
    void *b = filled(MEM_DEVICE, 8, 64), *a = poisoned(MEM_DEVICE, 16);
    MPI_Request w;
    MPI_Status one;
    status_init(&one);
    MPI_CHECK(p_MPIX_Isend_enqueue(b, 8, MPI_BYTE, t_rank, 64, scomm, &w));
    MPI_CHECK(p_MPIX_Wait_enqueue(&w, MPI_STATUS_IGNORE));
    CUDA_CHECK(cudaMemsetAsync(b, 0xEE, 8, stream));
    MPI_CHECK(p_MPIX_Irecv_enqueue(a, 16, MPI_BYTE, t_rank, 64, scomm, &w));
    MPI_CHECK(p_MPIX_Wait_enqueue(&w, &one));
    check_status(&one, MPI_BYTE, t_rank, 64, 8, "to itself, waited for before the receive");
    check_message(a, MEM_DEVICE, 8, 16, t_rank, 64, "to itself, waited for before the receive");
    mem_free(a);
    mem_free(b);
    /* Copies on the stream, not NCCL: NCCL takes a send to the rank itself only in one group
     * with its receive. */
}

static void out_of_order(void)
{
    if (t_size < 2)
        return;
    static const size_t n[3] = {100, 5000, 70000};
    const size_t room = 80000;
    if (t_rank == 0) {
        void *s[3];
        MPI_Request q[3];
        for (int i = 0; i < 3; i++) {
            s[i] = filled(MEM_DEVICE, n[i], 1 + i);
            MPI_CHECK(p_MPIX_Isend_enqueue(s[i], (int)n[i], MPI_BYTE, 1, 1 + i, scomm, &q[i]));
        }
        MPI_CHECK(p_MPIX_Waitall_enqueue(3, q, MPI_STATUSES_IGNORE));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        for (int i = 0; i < 3; i++)
            mem_free(s[i]);
        on_nccl += 3;
    } else if (t_rank == 1) {
        static const int order[3] = {3, 1, 2};
        void *r[3];
        MPI_Request q[3];
        MPI_Status st[3];
        for (int i = 0; i < 3; i++) {
            r[i] = poisoned(MEM_DEVICE, room);
            status_init(&st[i]);
            MPI_CHECK(p_MPIX_Irecv_enqueue(r[i], (int)room, MPI_BYTE, 0, order[i], scomm, &q[i]));
        }
        MPI_CHECK(p_MPIX_Waitall_enqueue(3, q, st));
        for (int i = 0; i < 3; i++) {
            int t = order[i];
            check_status(&st[i], MPI_BYTE, 0, t, (int)n[t - 1], "out of order, tag %d", t);
            check_message(r[i], MEM_DEVICE, n[t - 1], room, 0, t, "out of order, nonblocking");
            mem_free(r[i]);
        }
        on_nccl += 3;
    }
}

static void blocking_out_of_order(void)
{
    if (t_size < 2)
        return;
    if (t_rank == 0) {
        void *a = filled(MEM_DEVICE, 1000, 7), *b = filled(MEM_DEVICE, 2000, 8);
        MPI_CHECK(p_MPIX_Send_enqueue(a, 1000, MPI_BYTE, 1, 7, scomm));
        MPI_CHECK(p_MPIX_Send_enqueue(b, 2000, MPI_BYTE, 1, 8, scomm));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        mem_free(a);
        mem_free(b);
        on_nccl += 2;
    } else if (t_rank == 1) {
        void *a = poisoned(MEM_DEVICE, 3000), *b = poisoned(MEM_DEVICE, 3000);
        MPI_Status sa, sb;
        status_init(&sa);
        status_init(&sb);
        MPI_CHECK(p_MPIX_Recv_enqueue(b, 3000, MPI_BYTE, 0, 8, scomm, &sb));
        MPI_CHECK(p_MPIX_Recv_enqueue(a, 3000, MPI_BYTE, 0, 7, scomm, &sa));
        check_status(&sb, MPI_BYTE, 0, 8, 2000, "blocking, tag 8 first");
        check_status(&sa, MPI_BYTE, 0, 7, 1000, "blocking, tag 7 second");
        check_message(b, MEM_DEVICE, 2000, 3000, 0, 8, "blocking, tag 8");
        check_message(a, MEM_DEVICE, 1000, 3000, 0, 7, "blocking, tag 7");
        mem_free(a);
        mem_free(b);
        on_nccl += 2;
    }
}

static void any_source(void)
{
    const size_t room = 4096;
    if (t_rank != 0) {
        size_t n = 512 * (size_t)t_rank;
        void *s = filled(MEM_DEVICE, n, 100 + t_rank);
        MPI_CHECK(p_MPIX_Send_enqueue(s, (int)n, MPI_BYTE, 0, 100 + t_rank, scomm));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        mem_free(s);
        on_nccl += 1;
        return;
    }
    int seen[64] = {0};
    for (int k = 1; k < t_size; k++) {
        void *r = poisoned(MEM_DEVICE, room);
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(p_MPIX_Recv_enqueue(r, (int)room, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, scomm, &st));
        int from = st.MPI_SOURCE;
        CHECK(from > 0 && from < t_size && !seen[from], "any source: message %d came from rank %d", k, from);
        if (from > 0 && from < t_size) {
            seen[from] = 1;
            check_status(&st, MPI_BYTE, from, 100 + from, 512 * from, "any source, from rank %d", from);
            check_message(r, MEM_DEVICE, 512 * (size_t)from, room, from, 100 + from, "any source");
        }
        mem_free(r);
        on_nccl += 1;
    }
}

static void mixed_memory(void)
{
    if (t_size < 2)
        return;
    /* A vector of 64 blocks of 16 bytes, 32 apart. */
    MPI_Datatype vec;
    MPI_CHECK(MPI_Type_vector(64, 16, 32, MPI_BYTE, &vec));
    MPI_CHECK(MPI_Type_commit(&vec));
    const size_t n = 1024, span = 64 * 32;
    if (t_rank == 0) {
        void *d = filled(MEM_DEVICE, n, 20), *h = filled(MEM_HOST, n, 21), *g = filled(MEM_DEVICE, span, 22), *e = filled(MEM_DEVICE, n, 23);
        MPI_CHECK(p_MPIX_Send_enqueue(d, (int)n, MPI_BYTE, 1, 20, scomm));
        MPI_CHECK(p_MPIX_Send_enqueue(h, (int)n, MPI_BYTE, 1, 21, scomm));
        MPI_CHECK(p_MPIX_Send_enqueue(g, 1, vec, 1, 22, scomm));
        MPI_CHECK(p_MPIX_Send_enqueue(e, (int)n, MPI_BYTE, 1, 23, scomm));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        mem_free(d);
        mem_free(h);
        mem_free(g);
        mem_free(e);
        on_nccl += 2;
    } else if (t_rank == 1) {
        void *h = poisoned(MEM_HOST, 2 * n), *d = poisoned(MEM_DEVICE, 2 * n), *c = poisoned(MEM_DEVICE, 2 * n), *gh = poisoned(MEM_HOST, span);
        MPI_Status st[4];
        for (int i = 0; i < 4; i++)
            status_init(&st[i]);
        MPI_CHECK(p_MPIX_Recv_enqueue(h, (int)(2 * n), MPI_BYTE, 0, 20, scomm, &st[0]));
        MPI_CHECK(p_MPIX_Recv_enqueue(d, (int)(2 * n), MPI_BYTE, 0, 21, scomm, &st[1]));
        MPI_CHECK(p_MPIX_Recv_enqueue(c, (int)(2 * n), MPI_BYTE, 0, 22, scomm, &st[2]));
        MPI_CHECK(p_MPIX_Recv_enqueue(gh, 1, vec, 0, 23, scomm, &st[3]));
        check_status(&st[0], MPI_BYTE, 0, 20, (int)n, "device into host");
        check_status(&st[1], MPI_BYTE, 0, 21, (int)n, "host into device");
        check_status(&st[2], MPI_BYTE, 0, 22, (int)n, "device with gaps into device");
        check_status(&st[3], vec, 0, 23, 1, "device into host with gaps");
        check_message(h, MEM_HOST, n, 2 * n, 0, 20, "device into host");
        check_message(d, MEM_DEVICE, n, 2 * n, 0, 21, "host into device");
        /* The sender's vector: blocks of 16 of its pattern, 32 apart, arrive packed. */
        unsigned char *have = read_back(c, MEM_DEVICE, 2 * n), *src = pattern_new(span, 0, 22), *want = xmalloc(n);
        for (size_t b = 0; b < 64; b++)
            memcpy(want + 16 * b, src + 32 * b, 16);
        check_bytes(have, want, n, "device with gaps into device: the message");
        check_all(have + n, POISON_BYTE, n, "device with gaps into device: past the message");
        free(have);
        free(src);
        /* The packed message lands in the blocks; the gaps keep their poison. */
        have = read_back(gh, MEM_HOST, span);
        unsigned char *msg = pattern_new(n, 0, 23);
        for (size_t b = 0; b < 64; b++) {
            check_bytes(have + 32 * b, msg + 16 * b, 16, "device into host with gaps: block %zu", b);
            check_all(have + 32 * b + 16, POISON_BYTE, 16, "device into host with gaps: gap %zu", b);
        }
        free(have);
        free(msg);
        free(want);
        mem_free(h);
        mem_free(d);
        mem_free(c);
        mem_free(gh);
        on_nccl += 2;
    }
    MPI_CHECK(MPI_Type_free(&vec));
}

static void truncated(void)
{
    if (t_size < 2)
        return;
    if (t_rank == 0) {
        void *a = filled(MEM_DEVICE, 1000, 30), *z = filled(MEM_DEVICE, 0, 31), *b = filled(MEM_DEVICE, 64, 32);
        MPI_CHECK(p_MPIX_Send_enqueue(a, 1000, MPI_BYTE, 1, 30, scomm));
        MPI_CHECK(p_MPIX_Send_enqueue(z, 0, MPI_BYTE, 1, 31, scomm));
        MPI_CHECK(p_MPIX_Send_enqueue(b, 64, MPI_BYTE, 1, 32, scomm));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        mem_free(a);
        mem_free(z);
        mem_free(b);
        on_nccl += 2;
    } else if (t_rank == 1) {
        void *a = poisoned(MEM_DEVICE, 500), *z = poisoned(MEM_DEVICE, 16), *b = poisoned(MEM_DEVICE, 128);
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Comm_set_errhandler(scomm, MPI_ERRORS_RETURN));
        int rc = p_MPIX_Recv_enqueue(a, 500, MPI_BYTE, 0, 30, scomm, &st);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "a message of 1000 bytes into 500 gave class %d, expected MPI_ERR_TRUNCATE", cls);
        MPI_CHECK(MPI_Comm_set_errhandler(scomm, MPI_ERRORS_ARE_FATAL));
        status_init(&st);
        MPI_CHECK(p_MPIX_Recv_enqueue(z, 16, MPI_BYTE, 0, 31, scomm, &st));
        check_status(&st, MPI_BYTE, 0, 31, 0, "zero bytes after a truncated message");
        check_message(z, MEM_DEVICE, 0, 16, 0, 31, "zero bytes");
        status_init(&st);
        MPI_CHECK(p_MPIX_Recv_enqueue(b, 128, MPI_BYTE, 0, 32, scomm, &st));
        check_status(&st, MPI_BYTE, 0, 32, 64, "the message after a truncated one");
        check_message(b, MEM_DEVICE, 64, 128, 0, 32, "after a truncated message");
        mem_free(a);
        mem_free(z);
        mem_free(b);
        on_nccl += 2;
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stream_calls_lookup();
    nccl_mode = stream_nccl_mode();
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    MPIX_Stream ms;
    stream_comm(stream, &ms, &scomm);
    unsigned long long before = stream_nccl_calls();
    to_self();
    out_of_order();
    blocking_out_of_order();
    any_source();
    mixed_memory();
    truncated();
    stream_nccl_check(before, on_nccl);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    MPI_CHECK(MPI_Comm_free(&scomm));
    MPI_CHECK(p_MPIX_Stream_free(&ms));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return report_and_finalize();
}
