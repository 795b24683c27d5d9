// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_IPC=1,CUDAMPI_IPC_BYTES=0,CUDAMPI_IPC_SAME_GPU_BYTES=0 timeout=120
/* Held messages received by the receives that are neither MPI_Recv nor MPI_Irecv: persistent
 * receives (MPI_Start, MPI_Startall) and, where the MPI has them, MPI_Isendrecv and
 * MPI_Isendrecv_replace. With the IPC fast path forced every device message from 1056 bytes on
 * travels as a 1056-byte envelope, and an MPI_Probe that finds one receives it and every earlier
 * message from the same source on the communicator, and holds them: they are no longer in MPI's
 * queue, so a receive that matches one must be served from the held messages.
 *
 * Rank 0 posts with MPI_Isend, without waiting, messages to rank 1 on tags 1..9 (device and
 * host, 300 bytes to 1 MiB + 5). Rank 1 probes tag 9, which holds them all (the probe's count
 * must be the true size), then receives:
 *   tag 1      MPI_Recv_init, MPI_Start, MPI_Wait (device message into host memory); the same
 *              request started again for a message rank 0 sends only then, which is not held;
 *   tag 2      MPI_Startall of two persistent receives, the other one for a message (tag 21)
 *              that is not held, completed by MPI_Waitany twice;
 *   tag 3      a persistent receive completed by an MPI_Test loop;
 *   tags 4, 5  a persistent receive and an MPI_Irecv completed by one MPI_Waitall;
 *   tag 6      MPI_Isendrecv: the status describes the message received; rank 0 receives
 *              and checks the send half;
 *   tag 7      MPI_Isendrecv_replace on a device buffer: rank 0 receives the buffer's original
 *              content, rank 1 ends with the held message;
 *   tags 8, 9  one persistent receive from MPI_ANY_SOURCE and MPI_ANY_TAG started twice: it
 *              gets them in MPI's order.
 * Before all that, with MPI_ERRORS_RETURN, MPI_Sendrecv and MPI_Sendrecv_replace on tag 3 and
 * MPI_Isendrecv and MPI_Isendrecv_replace on tags 6 and 7, each sending to a rank that does not
 * exist, must fail with MPI_ERR_RANK and leave the held message they matched for the cases
 * above.
 * Every receive buffer is poisoned; every byte, the poison after the message, the count, source
 * and tag are compared. Rank 1 tells rank 0, on a communicator of their own, when to send the
 * messages that are not held and where to receive the send halves.
 *
 * A receive that misses its held message waits for MPI to deliver it, which never happens.
 * Rather than hang, rank 1 gives each receive LIMIT seconds (polling MPI_Request_get_status,
 * which leaves the request as it is); one that did not complete is reported, rank 0 sends a
 * filler message that completes it, and rank 1 takes the held message with MPI_Recv, so the
 * remaining cases still run and report. Where MPI_Request_get_status makes a completed
 * persistent receive inactive (MPICH 5.0, without cudampi too) a watchdog replaces the polling:
 * the first receive not complete in LIMIT seconds is reported and the test stops.
 * The MPI_Isendrecv cases need an MPI that has it (MPI-4 or Open MPI 5); where MPI leaves its
 * status unset (MPICH 4.0 and 5.0, without cudampi too) only the bytes of those are compared. */
#include "common.h"
#include <signal.h>
#include <unistd.h>


#define SLACK 16
#define LIMIT 5 /* seconds a receive may take */

/* The held messages: tag t, seed 10 + t, pattern of rank 0, in this order. */
enum { T_START = 1, T_STARTALL, T_TEST, T_WAITALL, T_IRECV, T_ISENDRECV, T_REPLACE, T_ANY1, T_ANY2, NTAGS };
static const struct {
    int kind;
    size_t n;
} held[NTAGS] = {
    [T_START] = {MEM_DEVICE, 5000},
    [T_STARTALL] = {MEM_HOST, 300},
    [T_TEST] = {MEM_DEVICE, 70000},
    [T_WAITALL] = {MEM_DEVICE, (1 << 20) + 5},
    [T_IRECV] = {MEM_HOST, 2000},
    [T_ISENDRECV] = {MEM_DEVICE, 4099},
    [T_REPLACE] = {MEM_DEVICE, 200000},
    [T_ANY1] = {MEM_HOST, 1500},
    [T_ANY2] = {MEM_DEVICE, 6000},
};
#define SEED(t) (10 + (t))

/* Messages that are not held: rank 0 sends them when rank 1 asks. */
#define TAG_AGAIN T_START /* the second start of the tag-1 persistent receive */
#define SEED_AGAIN 31
#define N_AGAIN 3333
#define TAG_FRESH 21 /* the other persistent receive of MPI_Startall */
#define SEED_FRESH 32
#define N_FRESH 9000
#define SEED_FILLER 99 /* what rank 0 sends to complete a receive that missed its message */
/* The send halves, rank 1 to rank 0. */
#define TAG_HALF 106
#define SEED_HALF 41
#define N_HALF 3000
#define TAG_REPLACE_HALF 107
#define SEED_REPLACE_HALF 42

/* Rank 1's orders to rank 0, on comm `ctl`. */
enum { CMD_SEND = 1, CMD_HALF, CMD_DONE };

static MPI_Comm ctl;
static int have_isendrecv = 0;
#ifdef HAVE_ISENDRECV
static int isendrecv_status_ok = 1; /* MPICH 4.0 and 5.0 leave MPI_Isendrecv's status unset */
#endif

static int sent(int t) { return have_isendrecv || (t != T_ISENDRECV && t != T_REPLACE); }

static void *poisoned(int kind, size_t n)
{
    void *b = mem_alloc(kind, n);
    mem_poison(b, n);
    return b;
}

/* `b` (of `cap` bytes, any kind) must hold the n bytes of pattern (rank, seed), then poison. */
static void expect(const void *b, size_t cap, size_t n, int rank, int seed, const char *what)
{
    unsigned char *got = mem_fetch(b, cap);
    unsigned char *exp = xmalloc(cap);
    for (size_t i = 0; i < cap; i++)
        exp[i] = i < n ? pattern_byte(rank, seed, i) : POISON_BYTE;
    check_bytes(got, exp, cap, "%s", what);
    free(got);
    free(exp);
}

static void order(int op, int tag, int kind, int seed, size_t n)
{
    int c[5] = {op, tag, kind, seed, (int)n};
    MPI_CHECK(MPI_Send(c, 5, MPI_INT, 0, 0, ctl));
}

/* ---- rank 0 ------------------------------------------------------------------------------ */

static void sender(void)
{
    MPI_Request q[NTAGS];
    MPI_Status st[NTAGS];
    void *b[NTAGS] = {0};
    int nq = 0;
    for (int t = 1; t < NTAGS; t++) {
        if (!sent(t)) continue;
        b[t] = mem_alloc(held[t].kind, held[t].n);
        mem_pattern(b[t], held[t].n, 0, SEED(t));
        MPI_CHECK(MPI_Isend(b[t], (int)held[t].n, MPI_BYTE, 1, t, MPI_COMM_WORLD, &q[nq++]));
    }
    for (;;) {
        int c[5];
        MPI_CHECK(MPI_Recv(c, 5, MPI_INT, 1, 0, ctl, MPI_STATUS_IGNORE));
        int op = c[0], tag = c[1], kind = c[2], seed = c[3];
        size_t n = (size_t)c[4];
        if (op == CMD_DONE) break;
        if (op == CMD_SEND) {
            void *s = mem_alloc(kind, n);
            mem_pattern(s, n, 0, seed);
            MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
            mem_free(s);
        } else if (op == CMD_HALF) {
            char what[100];
            snprintf(what, sizeof what, "%s's send half (tag %d), received by rank 0",
                     tag == TAG_HALF ? "MPI_Isendrecv" : "MPI_Isendrecv_replace", tag);
            MPI_Status rst;
            void *r = poisoned(kind, n + SLACK);
            MPI_CHECK(MPI_Recv(r, (int)(n + SLACK), MPI_BYTE, 1, tag, MPI_COMM_WORLD, &rst));
            check_status(&rst, MPI_BYTE, 1, tag, (int)n, "%s", what);
            expect(r, n + SLACK, n, 1, seed, what);
            mem_free(r);
        }
    }
    MPI_CHECK(MPI_Waitall(nq, q, st));
    for (int t = 1; t < NTAGS; t++)
        mem_free(b[t]);
}

/* ---- rank 1 ------------------------------------------------------------------------------ */

/* The receive `what` did not complete: rank 0 sends a filler that completes it, and the held
 * message of tag `tag` it missed is taken with MPI_Recv (and must be intact). */
static void missed(const char *what, int tag, int waited)
{
    size_t n = held[tag].n;
    t_fail(__FILE__, __LINE__,
           "%s: not complete after %d s: the held message of tag %d (%zu bytes) did not reach it",
           what, waited, tag, n);
    order(CMD_SEND, tag, MEM_HOST, SEED_FILLER, n);
    char label[200];
    snprintf(label, sizeof label, "%s: the held message of tag %d taken by MPI_Recv instead", what, tag);
    MPI_Status st;
    void *h = poisoned(MEM_HOST, n + SLACK);
    MPI_CHECK(MPI_Recv(h, (int)(n + SLACK), MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_BYTE, 0, tag, (int)n, "%s", label);
    expect(h, n + SLACK, n, 0, SEED(tag), label);
    mem_free(h);
}

/* A receive waited for: its request, the held message it must get (tag; 0: one not held). */
struct want {
    MPI_Request *q;
    int tag;
    const char *what;
    int ok; /* set by settle: completed in time */
};

/* Where MPI_Request_get_status cannot poll (MPICH 5.0 makes a completed persistent receive
 * inactive, without cudampi too), a watchdog instead: the completion call that follows must
 * return within LIMIT seconds, or the test reports the receive and stops. */
static int poll_ok = 1;
static char alarm_msg[600];
static size_t alarm_len;

static void on_alarm(int sig)
{
    (void)sig;
    if (write(2, alarm_msg, alarm_len) < 0) _exit(2);
    _exit(1);
}

static void settled(void)
{
    if (!poll_ok) alarm(0);
}

/* Gives the requests LIMIT seconds to complete, without completing them; those that do not
 * are reported and completed by a filler (missed), and their `ok` stays 0. The caller then
 * completes the requests and calls settled(). */
static void settle(struct want *w, int n)
{
    int left = n;
    for (int i = 0; i < n; i++)
        w[i].ok = !poll_ok;
    if (!poll_ok) {
        int at = snprintf(alarm_msg, sizeof alarm_msg, "FAIL rank %d: held_requests.c: ", t_rank);
        for (int i = 0; i < n && at < (int)sizeof alarm_msg; i++)
            at += snprintf(alarm_msg + at, sizeof alarm_msg - at, "%s%s", i ? " / " : "", w[i].what);
        if (at < (int)sizeof alarm_msg)
            snprintf(alarm_msg + at, sizeof alarm_msg - at,
                     ": not complete after %d s; stopping\n", LIMIT);
        alarm_len = strlen(alarm_msg);
        alarm(LIMIT);
        return;
    }
    double t0 = MPI_Wtime();
    while (left > 0 && MPI_Wtime() - t0 < LIMIT)
        for (int i = 0; i < n; i++)
            if (!w[i].ok) {
                int flag = 0;
                MPI_CHECK(MPI_Request_get_status(*w[i].q, &flag, MPI_STATUS_IGNORE));
                if (flag) {
                    w[i].ok = 1;
                    left--;
                }
            }
    for (int i = 0; i < n; i++)
        if (!w[i].ok) {
            if (w[i].tag > 0)
                missed(w[i].what, w[i].tag, LIMIT);
            else
                DIE("%s: a message that is not held did not arrive in %d s", w[i].what, LIMIT);
        }
}

static void persistent_twice(void)
{
    /* A device message into host memory, then the same request for a message not held. */
    const char *what1 =
        "MPI_Recv_init(0, tag 1) + MPI_Start + MPI_Wait, held device message into host memory";
    const char *what2 = "the same persistent receive started again, message not held";
    size_t cap = held[T_START].n + SLACK;
    void *h = poisoned(MEM_HOST, cap);
    MPI_Request p;
    MPI_Status st;
    MPI_CHECK(MPI_Recv_init(h, (int)cap, MPI_BYTE, 0, T_START, MPI_COMM_WORLD, &p));
    MPI_CHECK(MPI_Start(&p));
    struct want w = {&p, T_START, what1, 0};
    settle(&w, 1);
    status_init(&st);
    MPI_CHECK(MPI_Wait(&p, &st));
    settled();
    if (w.ok) {
        check_status(&st, MPI_BYTE, 0, T_START, (int)held[T_START].n, "%s", what1);
        expect(h, cap, held[T_START].n, 0, SEED(T_START), what1);
    }

    mem_poison(h, cap);
    MPI_CHECK(MPI_Start(&p));
    order(CMD_SEND, TAG_AGAIN, MEM_DEVICE, SEED_AGAIN, N_AGAIN);
    w = (struct want){&p, 0, what2, 0};
    settle(&w, 1);
    status_init(&st);
    MPI_CHECK(MPI_Wait(&p, &st));
    settled();
    check_status(&st, MPI_BYTE, 0, TAG_AGAIN, N_AGAIN, "%s", what2);
    expect(h, cap, N_AGAIN, 0, SEED_AGAIN, what2);
    MPI_CHECK(MPI_Request_free(&p));
    CHECK(p == MPI_REQUEST_NULL, "MPI_Request_free did not set the request to MPI_REQUEST_NULL");
    mem_free(h);
}

static void startall_waitany(void)
{
    /* [0]: the held host message of tag 2 into device memory; [1]: a device message that is not
     * held (tag 21) into host memory. */
    const char *what[2] = {"MPI_Startall, persistent receive [0] of the held tag-2 message",
                           "MPI_Startall, persistent receive [1] of tag 21, not held"};
    const int tag[2] = {T_STARTALL, TAG_FRESH}, seed[2] = {SEED(T_STARTALL), SEED_FRESH};
    const size_t n[2] = {held[T_STARTALL].n, N_FRESH};
    void *b[2] = {poisoned(MEM_DEVICE, n[0] + SLACK), poisoned(MEM_HOST, n[1] + SLACK)};
    MPI_Request p[2];
    for (int i = 0; i < 2; i++)
        MPI_CHECK(MPI_Recv_init(b[i], (int)(n[i] + SLACK), MPI_BYTE, 0, tag[i], MPI_COMM_WORLD, &p[i]));
    MPI_CHECK(MPI_Startall(2, p));
    order(CMD_SEND, TAG_FRESH, MEM_DEVICE, SEED_FRESH, N_FRESH);
    struct want w[2] = {{&p[0], T_STARTALL, what[0], 0}, {&p[1], 0, what[1], 0}};
    settle(w, 2);
    int seen[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        int idx = -5;
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Waitany(2, p, &idx, &st));
        if (!CHECK(idx == 0 || idx == 1, "MPI_Waitany call %d after MPI_Startall: index %d", k + 1, idx))
            continue;
        CHECK(!seen[idx], "MPI_Waitany after MPI_Startall gave index %d twice", idx);
        seen[idx] = 1;
        if (w[idx].ok)
            check_status(&st, MPI_BYTE, 0, tag[idx], (int)n[idx], "%s (MPI_Waitany call %d)",
                         what[idx], k + 1);
    }
    settled();
    for (int i = 0; i < 2; i++) {
        if (w[i].ok)
            expect(b[i], n[i] + SLACK, n[i], 0, seed[i], what[i]);
        MPI_CHECK(MPI_Request_free(&p[i]));
        mem_free(b[i]);
    }
}

static void test_loop(void)
{
    const char *what = "persistent receive of the held tag-3 message, MPI_Test loop";
    size_t n = held[T_TEST].n;
    void *d = poisoned(MEM_DEVICE, n + SLACK);
    MPI_Request p;
    MPI_Status st;
    MPI_CHECK(MPI_Recv_init(d, (int)(n + SLACK), MPI_BYTE, 0, T_TEST, MPI_COMM_WORLD, &p));
    MPI_CHECK(MPI_Start(&p));
    int flag = 0;
    double t0 = MPI_Wtime();
    status_init(&st);
    while (!flag && MPI_Wtime() - t0 < LIMIT)
        MPI_CHECK(MPI_Test(&p, &flag, &st));
    if (!flag) {
        missed(what, T_TEST, LIMIT);
        while (!flag)
            MPI_CHECK(MPI_Test(&p, &flag, &st));
    } else {
        check_status(&st, MPI_BYTE, 0, T_TEST, (int)n, "%s", what);
        expect(d, n + SLACK, n, 0, SEED(T_TEST), what);
    }
    /* Complete, so inactive: MPI_Test gives flag 1 again. */
    flag = 0;
    MPI_CHECK(MPI_Test(&p, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1, "%s: MPI_Test of the inactive request gave flag %d", what, flag);
    MPI_CHECK(MPI_Request_free(&p));
    mem_free(d);
}

static void waitall_mixed(void)
{
    /* A persistent receive (held 1 MiB + 5 device message into device memory) and a plain
     * MPI_Irecv (held host message into device memory), completed together. */
    const char *what[2] = {"persistent receive of the held tag-4 message in MPI_Waitall",
                           "MPI_Irecv of the held tag-5 message in MPI_Waitall"};
    const int tag[2] = {T_WAITALL, T_IRECV};
    size_t n[2] = {held[T_WAITALL].n, held[T_IRECV].n};
    void *b[2] = {poisoned(MEM_DEVICE, n[0] + SLACK), poisoned(MEM_DEVICE, n[1] + SLACK)};
    MPI_Request q[2];
    MPI_Status st[2];
    MPI_CHECK(MPI_Recv_init(b[0], (int)(n[0] + SLACK), MPI_BYTE, 0, T_WAITALL, MPI_COMM_WORLD, &q[0]));
    MPI_Request p = q[0];
    MPI_CHECK(MPI_Start(&q[0]));
    MPI_CHECK(MPI_Irecv(b[1], (int)(n[1] + SLACK), MPI_BYTE, 0, T_IRECV, MPI_COMM_WORLD, &q[1]));
    struct want w[2] = {{&q[0], T_WAITALL, what[0], 0}, {&q[1], T_IRECV, what[1], 0}};
    settle(w, 2);
    status_init(&st[0]);
    status_init(&st[1]);
    MPI_CHECK(MPI_Waitall(2, q, st));
    settled();
    CHECK(q[0] == p, "MPI_Waitall changed the persistent request's handle");
    CHECK(q[1] == MPI_REQUEST_NULL, "MPI_Waitall did not set the MPI_Irecv request to MPI_REQUEST_NULL");
    for (int i = 0; i < 2; i++) {
        if (w[i].ok) {
            check_status(&st[i], MPI_BYTE, 0, tag[i], (int)n[i], "%s", what[i]);
            expect(b[i], n[i] + SLACK, n[i], 0, SEED(tag[i]), what[i]);
        }
        mem_free(b[i]);
    }
    MPI_CHECK(MPI_Request_free(&q[0]));
}

#ifdef HAVE_ISENDRECV
/* Completes a nonblocking send-receive whose receive matches the held message of `tag`, into
 * `buf`: the buffer must hold that message and, where MPI fills the status, the status must
 * describe it. */
static void wait_sendrecv(MPI_Request *q, int tag, const char *what, const void *buf)
{
    size_t n = held[tag].n;
    MPI_Status st;
    struct want w = {q, tag, what, 0};
    settle(&w, 1);
    status_init(&st);
    MPI_CHECK(MPI_Wait(q, &st));
    settled();
    if (w.ok) {
        if (isendrecv_status_ok)
            check_status(&st, MPI_BYTE, 0, tag, (int)n, "%s", what);
        expect(buf, n + SLACK, n, 0, SEED(tag), what);
    }
}

static void isendrecv(void)
{
    /* Receive half: the held device message of tag 6 into host memory; send half: a device
     * buffer to rank 0. */
    const char *what = "MPI_Isendrecv, receive half of the held tag-6 message";
    size_t n = held[T_ISENDRECV].n;
    void *s = mem_alloc(MEM_DEVICE, N_HALF);
    mem_pattern(s, N_HALF, 1, SEED_HALF);
    void *h = poisoned(MEM_HOST, n + SLACK);
    MPI_Request q;
    order(CMD_HALF, TAG_HALF, MEM_DEVICE, SEED_HALF, N_HALF);
    MPI_CHECK(MPI_Isendrecv(s, N_HALF, MPI_BYTE, 0, TAG_HALF, h, (int)(n + SLACK), MPI_BYTE, 0,
                            T_ISENDRECV, MPI_COMM_WORLD, &q));
    wait_sendrecv(&q, T_ISENDRECV, what, h);
    unsigned char *got = mem_fetch(s, N_HALF), *exp = pattern_new(N_HALF, 1, SEED_HALF);
    check_bytes(got, exp, N_HALF, "MPI_Isendrecv changed its send buffer");
    free(got);
    free(exp);
    mem_free(s);
    mem_free(h);
}

static void isendrecv_replace(void)
{
    /* A device buffer: its content goes to rank 0, the held device message of tag 7 replaces
     * it. */
    const char *what = "MPI_Isendrecv_replace, receive half of the held tag-7 message";
    size_t n = held[T_REPLACE].n;
    void *d = poisoned(MEM_DEVICE, n + SLACK);
    mem_pattern(d, n, 1, SEED_REPLACE_HALF);
    MPI_Request q;
    order(CMD_HALF, TAG_REPLACE_HALF, MEM_HOST, SEED_REPLACE_HALF, n);
    MPI_CHECK(MPI_Isendrecv_replace(d, (int)n, MPI_BYTE, 0, TAG_REPLACE_HALF, 0, T_REPLACE,
                                    MPI_COMM_WORLD, &q));
    wait_sendrecv(&q, T_REPLACE, what, d);
    mem_free(d);
}
#endif

/* `rc` of a send to a rank that does not exist must be of class MPI_ERR_RANK. */
static void rank_error(int rc, const char *call, int tag)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "%s to a rank that does not exist, receiving the held tag-%d message: error class %d",
          call, tag, cls);
}

/* Send-receives whose receive matches a held message but whose send fails (a rank that does not
 * exist): the call fails and the message stays held for the receive that comes later. */
static void failed_sends(void)
{
    const int nowhere = t_size + 7;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    void *d = poisoned(MEM_DEVICE, held[T_TEST].n + SLACK);
    void *h = poisoned(MEM_HOST, held[T_TEST].n + SLACK);
    rank_error(MPI_Sendrecv(h, 8, MPI_BYTE, nowhere, 99, d, (int)held[T_TEST].n + SLACK, MPI_BYTE, 0, T_TEST,
                            MPI_COMM_WORLD, MPI_STATUS_IGNORE),
               "MPI_Sendrecv", T_TEST);
    rank_error(MPI_Sendrecv_replace(d, (int)held[T_TEST].n, MPI_BYTE, nowhere, 99, 0, T_TEST, MPI_COMM_WORLD,
                                    MPI_STATUS_IGNORE),
               "MPI_Sendrecv_replace", T_TEST);
#ifdef HAVE_ISENDRECV
    if (have_isendrecv) {
        MPI_Request q = MPI_REQUEST_NULL;
        rank_error(MPI_Isendrecv(h, 8, MPI_BYTE, nowhere, 99, d, (int)held[T_TEST].n, MPI_BYTE, 0, T_ISENDRECV,
                                 MPI_COMM_WORLD, &q),
                   "MPI_Isendrecv", T_ISENDRECV);
        rank_error(MPI_Isendrecv_replace(d, 8, MPI_BYTE, nowhere, 99, 0, T_REPLACE, MPI_COMM_WORLD, &q),
                   "MPI_Isendrecv_replace", T_REPLACE);
    }
#endif
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    mem_free(d);
    mem_free(h);
}

static void wildcard_twice(void)
{
    /* Only tags 8 and 9 are still held: MPI_ANY_SOURCE/MPI_ANY_TAG must take 8, then 9. */
    const char *what[2] = {"MPI_Recv_init(ANY_SOURCE, ANY_TAG), first start: held tag 8 (host message)",
                           "MPI_Recv_init(ANY_SOURCE, ANY_TAG), second start: held tag 9 (device message)"};
    size_t cap = held[T_ANY2].n + SLACK;
    void *d = mem_alloc(MEM_DEVICE, cap);
    MPI_Request p;
    MPI_CHECK(MPI_Recv_init(d, (int)cap, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &p));
    for (int k = 0; k < 2; k++) {
        int t = k == 0 ? T_ANY1 : T_ANY2;
        MPI_Status st;
        mem_poison(d, cap);
        MPI_CHECK(MPI_Start(&p));
        struct want w = {&p, t, what[k], 0};
        settle(&w, 1);
        status_init(&st);
        MPI_CHECK(MPI_Wait(&p, &st));
        settled();
        if (w.ok) {
            check_status(&st, MPI_BYTE, 0, t, (int)held[t].n, "%s", what[k]);
            expect(d, cap, held[t].n, 0, SEED(t), what[k]);
        }
    }
    MPI_CHECK(MPI_Request_free(&p));
    mem_free(d);
}

static void receiver(void)
{
    MPI_Status st;
    /* Holds every message rank 0 sent, tag 9 (a device message: an envelope) the last. */
    MPI_CHECK(MPI_Probe(0, T_ANY2, MPI_COMM_WORLD, &st));
    check_status(&st, MPI_BYTE, 0, T_ANY2, (int)held[T_ANY2].n, "MPI_Probe(0, tag 9)");

    failed_sends();
    persistent_twice();
    startall_waitany();
    test_loop();
    waitall_mixed();
#ifdef HAVE_ISENDRECV
    if (have_isendrecv) {
        isendrecv();
        isendrecv_replace();
    }
#endif
    wildcard_twice();

    int flag = 0;
    MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag, "a message is left after all were received (source %d tag %d)", st.MPI_SOURCE, st.MPI_TAG);
    order(CMD_DONE, 0, 0, 0, 0);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("held_requests runs on 2 ranks, not %d", t_size);
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &ctl));
#ifdef HAVE_ISENDRECV
    have_isendrecv = dlsym(RTLD_DEFAULT, "MPI_Isendrecv") != NULL;
    if (have_isendrecv) {
        isendrecv_status_ok = isendrecv_sets_status(ctl);
        if (!isendrecv_status_ok && t_rank == 0)
            note("this MPI does not set MPI_Isendrecv's status: "
                 "MPI_Isendrecv(_replace) statuses not checked");
    } else if (t_rank == 0) {
        note("the MPI library does not export MPI_Isendrecv: MPI_Isendrecv(_replace) skipped");
    }
#else
    if (t_rank == 0) note("mpi.h has no MPI_Isendrecv: MPI_Isendrecv(_replace) skipped");
#endif
    {
        /* Does MPI_Request_get_status leave a completed persistent receive active? Host
         * buffers, on ctl. */
        int one = 1, got = 0, flag = 0;
        if (t_rank == 0) {
            MPI_CHECK(MPI_Send(&one, 1, MPI_INT, 1, 20, ctl));
        } else {
            MPI_Request p;
            MPI_Status st;
            MPI_CHECK(MPI_Recv_init(&got, 1, MPI_INT, 0, 20, ctl, &p));
            MPI_CHECK(MPI_Start(&p));
            while (!flag)
                MPI_CHECK(MPI_Request_get_status(p, &flag, MPI_STATUS_IGNORE));
            status_init(&st);
            MPI_CHECK(MPI_Wait(&p, &st));
            MPI_CHECK(MPI_Request_free(&p));
            poll_ok = st.MPI_SOURCE == 0 && st.MPI_TAG == 20 && got == 1;
            if (!poll_ok) {
                note("MPI_Request_get_status makes a completed persistent receive inactive here: "
                     "a receive that does not complete in %d s stops the test", LIMIT);
                signal(SIGALRM, on_alarm);
            }
        }
    }
    if (t_rank == 0)
        sender();
    else
        receiver();
    MPI_Comm_free(&ctl);
    return report_and_finalize();
}
