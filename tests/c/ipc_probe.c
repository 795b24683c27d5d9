// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_IPC=1,CUDAMPI_IPC_BYTES=0,CUDAMPI_IPC_SAME_GPU_BYTES=0 timeout=120 nodes=no
/* Probes and the receives after them when device messages cross over CUDA IPC (every device
 * message from 1056 bytes on): the probe must report the true size, and the receives that follow
 * must get the messages in MPI's order. Rank 0 sends rank 1, without waiting for it, host and
 * device messages on several tags, one of them a host message of exactly an envelope's size.
 * Rank 1 then probes out of order (MPI_Probe on a tag behind an earlier message of another tag,
 * MPI_Iprobe, MPI_Mprobe, MPI_Improbe, with and without wildcards) and receives with MPI_Recv
 * (from MPI_ANY_TAG, which must give the earlier message first), MPI_Irecv, MPI_Mrecv,
 * MPI_Imrecv, MPI_Sendrecv, MPI_Sendrecv_replace, a strided datatype, and a buffer too small
 * (MPI_ERR_TRUNCATE, buffer unchanged). Buffers are poisoned; every byte, count, source and tag
 * is compared with what was sent. */
#include "common.h"

#define SLACK 16

struct msg {
    int tag, seed, kind;
    size_t n;
};

/* In the order rank 0 sends them. */
static const struct msg sent[] = {
    {1, 11, MEM_HOST, 400},
    {2, 12, MEM_DEVICE, 4099},
    {1, 13, MEM_HOST, 1056},
    {3, 14, MEM_DEVICE, (1 << 20) + 5},
    {4, 15, MEM_DEVICE, 1024 * sizeof(double)},
    {5, 16, MEM_DEVICE, 200000},
    {6, 17, MEM_DEVICE, 70000},
    {7, 18, MEM_DEVICE, 5000},
    {8, 19, MEM_DEVICE, 3000},
};
#define NSENT (sizeof sent / sizeof sent[0])

static const struct msg *by_seed(int seed)
{
    for (size_t i = 0; i < NSENT; i++)
        if (sent[i].seed == seed)
            return &sent[i];
    DIE("no message with seed %d", seed);
    return NULL;
}

/* `b` (capacity `cap` bytes) must hold message `seed` and poison after it. */
static void expect(const void *b, size_t cap, int seed, const char *what)
{
    size_t n = by_seed(seed)->n;
    unsigned char *got = mem_fetch(b, cap);
    unsigned char *exp = malloc(cap);
    for (size_t i = 0; i < cap; i++)
        exp[i] = i < n ? pattern_byte(1, seed, i) : POISON_BYTE;
    check_bytes(got, exp, cap, "%s", what);
    free(got);
    free(exp);
}

static void *poisoned(int kind, size_t n)
{
    void *b = mem_alloc(kind, n);
    mem_poison(b, n);
    return b;
}

static void sender(void)
{
    for (size_t i = 0; i < NSENT; i++) {
        void *s = mem_alloc(sent[i].kind, sent[i].n);
        mem_pattern(s, sent[i].n, 1, sent[i].seed);
        MPI_CHECK(MPI_Send(s, (int)sent[i].n, MPI_BYTE, 1, sent[i].tag, MPI_COMM_WORLD));
        mem_free(s);
    }
    /* What rank 1's MPI_Sendrecv and MPI_Sendrecv_replace send back. */
    int one = 0;
    MPI_Status st;
    MPI_CHECK(MPI_Recv(&one, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, &st));
    CHECK(one == 4242, "Sendrecv's message: got %d, expected 4242", one);
    void *b = poisoned(MEM_DEVICE, 3000);
    MPI_CHECK(MPI_Recv(b, 3000, MPI_BYTE, 1, 10, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_BYTE, 1, 10, 3000, "Sendrecv_replace's message");
    unsigned char *got = mem_fetch(b, 3000);
    unsigned char exp[3000];
    for (size_t i = 0; i < 3000; i++)
        exp[i] = pattern_byte(0, 20, i);
    check_bytes(got, exp, 3000, "Sendrecv_replace's message");
    free(got);
    mem_free(b);
}

static void receiver(void)
{
    MPI_Status st, pst;
    MPI_Message m;
    MPI_Request q;
    int flag = 0;

    /* Tag 2 sits behind a message of tag 1: MPI_ANY_TAG must still give tag 1 first. */
    MPI_CHECK(MPI_Probe(0, 2, MPI_COMM_WORLD, &pst));
    check_status(&pst, MPI_BYTE, 0, 2, 4099, "Probe(0, 2)");
    void *h = poisoned(MEM_HOST, 1000 + SLACK);
    MPI_CHECK(MPI_Recv(h, 1000, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_BYTE, 0, 1, 400, "Recv(0, ANY_TAG) after Probe(0, 2)");
    expect(h, 1000 + SLACK, 11, "Recv(0, ANY_TAG) after Probe(0, 2)");
    mem_free(h);

    while (!flag)
        MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &pst));
    check_status(&pst, MPI_BYTE, 0, 2, 4099, "Iprobe(ANY, ANY)");

    /* A host message of exactly an envelope's size, which is not one. */
    MPI_CHECK(MPI_Mprobe(0, 1, MPI_COMM_WORLD, &m, &pst));
    check_status(&pst, MPI_BYTE, 0, 1, 1056, "Mprobe(0, 1)");
    void *d = poisoned(MEM_DEVICE, 2000);
    MPI_CHECK(MPI_Mrecv(d, 2000, MPI_BYTE, &m, &st));
    CHECK(m == MPI_MESSAGE_NULL, "Mrecv did not set the message to MPI_MESSAGE_NULL");
    check_status(&st, MPI_BYTE, 0, 1, 1056, "Mrecv of Mprobe(0, 1)");
    expect(d, 2000, 13, "Mrecv of Mprobe(0, 1)");
    mem_free(d);

    MPI_CHECK(MPI_Probe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &pst));
    check_status(&pst, MPI_BYTE, 0, 3, (1 << 20) + 5, "Probe(ANY, 3)");
    size_t big = (1 << 20) + 5;
    d = poisoned(MEM_DEVICE, big + SLACK);
    MPI_CHECK(MPI_Irecv(d, (int)big, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &q));
    MPI_CHECK(MPI_Wait(&q, &st));
    check_status(&st, MPI_BYTE, 0, 3, (int)big, "Irecv after Probe(ANY, 3)");
    expect(d, big + SLACK, 14, "Irecv after Probe(ANY, 3)");
    mem_free(d);

    /* The tag-2 message, still held since the first probe. */
    int one = 4242;
    d = poisoned(MEM_DEVICE, 5000);
    MPI_CHECK(MPI_Sendrecv(&one, 1, MPI_INT, 0, 9, d, 5000, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_BYTE, 0, 2, 4099, "Sendrecv of the held tag-2 message");
    expect(d, 5000, 12, "Sendrecv of the held tag-2 message");
    mem_free(d);

    /* Every other double of a device buffer. */
    MPI_CHECK(MPI_Probe(0, 4, MPI_COMM_WORLD, &pst));
    check_status(&pst, MPI_DOUBLE, 0, 4, 1024, "Probe(0, 4) in doubles");
    MPI_Datatype strided;
    MPI_CHECK(MPI_Type_vector(1024, 1, 2, MPI_DOUBLE, &strided));
    MPI_CHECK(MPI_Type_commit(&strided));
    size_t span = 2047 * sizeof(double);
    d = poisoned(MEM_DEVICE, span);
    MPI_CHECK(MPI_Recv(d, 1, strided, 0, 4, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_DOUBLE, 0, 4, 1024, "strided Recv after Probe(0, 4)");
    unsigned char *got = mem_fetch(d, span);
    unsigned char *exp = malloc(span);
    for (size_t i = 0; i < span; i++) {
        size_t el = i / sizeof(double), in = i % sizeof(double);
        exp[i] = el % 2 ? POISON_BYTE : pattern_byte(1, 15, el / 2 * sizeof(double) + in);
    }
    check_bytes(got, exp, span, "strided Recv after Probe(0, 4)");
    free(got);
    free(exp);
    mem_free(d);
    MPI_Type_free(&strided);

    /* Too small: MPI_ERR_TRUNCATE, and the buffer stays as it was. */
    MPI_CHECK(MPI_Probe(0, 5, MPI_COMM_WORLD, &pst));
    check_status(&pst, MPI_BYTE, 0, 5, 200000, "Probe(0, 5)");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    d = poisoned(MEM_DEVICE, 100000);
    int rc = MPI_Recv(d, 100000, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "held 200000 bytes into 100000: class %d, expected MPI_ERR_TRUNCATE", cls);
    got = mem_fetch(d, 100000);
    check_all(got, POISON_BYTE, 100000, "a truncated receive leaves the buffer unchanged");
    free(got);
    mem_free(d);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    flag = 0;
    while (!flag)
        MPI_CHECK(MPI_Improbe(0, 6, MPI_COMM_WORLD, &flag, &m, &pst));
    check_status(&pst, MPI_BYTE, 0, 6, 70000, "Improbe(0, 6)");
    h = poisoned(MEM_HOST, 70000 + SLACK);
    MPI_CHECK(MPI_Imrecv(h, 70000, MPI_BYTE, &m, &q));
    flag = 0;
    while (!flag)
        MPI_CHECK(MPI_Test(&q, &flag, &st));
    check_status(&st, MPI_BYTE, 0, 6, 70000, "Imrecv after Improbe(0, 6)");
    expect(h, 70000 + SLACK, 17, "Imrecv after Improbe(0, 6)");
    mem_free(h);

    MPI_CHECK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &pst));
    check_status(&pst, MPI_BYTE, 0, 7, 5000, "Mprobe(ANY, ANY)");
    d = poisoned(MEM_DEVICE, 5000 + SLACK);
    MPI_CHECK(MPI_Mrecv(d, 5000, MPI_BYTE, &m, &st));
    check_status(&st, MPI_BYTE, 0, 7, 5000, "Mrecv after Mprobe(ANY, ANY)");
    expect(d, 5000 + SLACK, 18, "Mrecv after Mprobe(ANY, ANY)");
    mem_free(d);

    MPI_CHECK(MPI_Probe(0, 8, MPI_COMM_WORLD, &pst));
    check_status(&pst, MPI_BYTE, 0, 8, 3000, "Probe(0, 8)");
    d = mem_alloc(MEM_DEVICE, 3000);
    mem_pattern(d, 3000, 0, 20);
    MPI_CHECK(MPI_Sendrecv_replace(d, 3000, MPI_BYTE, 0, 10, 0, 8, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_BYTE, 0, 8, 3000, "Sendrecv_replace of the held tag-8 message");
    expect(d, 3000, 19, "Sendrecv_replace of the held tag-8 message");
    mem_free(d);

    MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &pst));
    CHECK(!flag, "a message is left after all were received");
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_rank == 0)
        sender();
    else if (t_rank == 1)
        receiver();
    return report_and_finalize();
}
