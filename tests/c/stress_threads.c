// cudampi-test: ranks=3,4 without-shim=crash nccl=yes nccl-ranks=3 forced=all env=CUDAMPI_STRESS_SECONDS=3 timeout=120
/* Threads and GPUs in one process, every path at MPI_THREAD_MULTIPLE: each rank runs
 * CUDAMPI_STRESS_THREADS threads (default 4) for CUDAMPI_STRESS_SECONDS (default 4) or exactly
 * CUDAMPI_STRESS_ROUNDS rounds, of the operations CUDAMPI_STRESS_OPS names on the memory kinds
 * CUDAMPI_STRESS_KINDS names (default all of both), of sizes up to CUDAMPI_STRESS_MAX_BYTES
 * (default all). In each round thread t of every rank draws the same operation and
 * message size from the seed (CUDAMPI_STRESS_SEED, else from the clock; printed, and a failing
 * run prints the line that replays it), and each rank draws its own buffer kinds (host, device,
 * managed, pinned) and completion calls. With 3 or 4 ranks every rank sends to its next and its
 * previous rank, so a rank's senders and receivers differ.
 *   sendrecv   MPI_Sendrecv to next from previous, then the other way, on the thread's comm
 *   nonblock   MPI_Irecv/MPI_Isend both ways in a random order, completed by MPI_Waitall,
 *              MPI_Testall, MPI_Waitany or MPI_Waitsome
 *   persist    MPI_Recv_init/MPI_Send_init both ways, started twice with new bytes each time
 *   probe      on ONE communicator shared by all threads: MPI_Isend to both neighbours with the
 *              thread's own tag, received with MPI_ANY_SOURCE by MPI_Mprobe+MPI_Mrecv,
 *              MPI_Improbe, or MPI_Probe+MPI_Recv (the status says whose bytes to expect)
 *   anytag     two messages to next with different tags, received with MPI_ANY_TAG (in order)
 *              from previous, after an MPI_Iprobe loop with MPI_ANY_SOURCE and MPI_ANY_TAG
 *   allreduce  MPI_Allreduce (MPI_UNSIGNED sum; in place at times) or MPI_Iallreduce
 *   bcast      MPI_Bcast from a rotating root
 *   allgather  MPI_Allgather
 *   rma        on the thread's window (its memory kind drawn per rank): in one fence epoch a
 *              put into next's window and a get from previous's window of what it wrote there
 *              before the epoch, then MPI_Accumulate (sum) into next's window in the next one
 * Sizes straddle every path's threshold (envelope, awaited IPC, IPC, IPC on a shared GPU,
 * chunks, NCCL). Every byte received is compared with what the same run gives on host buffers
 * (the patterns; CUDAMPI_TEST_MEM=host runs it on host memory without the shim), receive buffers
 * are poisoned with slack past the message, which must stay poisoned. */
#include "common.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define MAXT 16
#define SLACK 16
#define NBUF 4                 /* buffers per kind and thread: two to send, two to receive */
#define MAXB (4u << 20)        /* largest message */
#define WINB (1u << 20)        /* a thread's window: put region, get region, accumulate region */
#define TAGS 512

static const size_t sizes[] = {1, 33, 1055, 1057, 4099, 8191, 8197, 16383, 16389,
                               65539, 262147, (1u << 20) - 1, (1u << 20) + 5, (2u << 20) + 3, MAXB};
#define NSIZES (sizeof sizes / sizeof sizes[0])
static size_t sizes_on[NSIZES];
static int nsizes_on;
static const int kinds[] = {MEM_HOST, MEM_DEVICE, MEM_MANAGED, MEM_PINNED};
#define NKINDS 4
static int kinds_on[NKINDS], nkinds_on; /* CUDAMPI_STRESS_KINDS: a choice, default all */

enum op { SENDRECV, NONBLOCK, PERSIST, PROBE, ANYTAG, ALLREDUCE, BCAST, ALLGATHER, RMA, NOPS };
static const char *op_names[] = {"sendrecv", "nonblock", "persist", "probe", "anytag",
                                 "allreduce", "bcast", "allgather", "rma"};

static uint64_t seed;
static int nthreads, seconds, fixed_rounds;
static int ops_on[NOPS], nops_on, windows = 1; /* CUDAMPI_STRESS_OPS: a comma-separated choice, default all */
static MPI_Comm shared_comm;
static atomic_long messages, bytes_checked, op_counts[NOPS];

struct thread {
    int t;
    MPI_Comm comm;
    MPI_Win win;
    int win_kind;
    char *win_mem;
    char *buf[NKINDS][NBUF];
    unsigned char *scratch, *want;
    int round, op;
    size_t n;
    unsigned agreed; /* a draw every rank makes alike for this round */
    int failures;
    long rounds;
};

static int next_rank(void) { return (t_rank + 1) % t_size; }
static int prev_rank(void) { return (t_rank + t_size - 1) % t_size; }

/* The same stream of draws on every rank for (thread, round); `salt` keeps streams apart. */
static uint64_t draw(uint64_t *s) { return t_mix64(*s += 0x9E3779B97F4A7C15ull); }
static uint64_t stream(int t, int round, uint64_t salt)
{
    return t_mix64(seed ^ ((uint64_t)t << 48) ^ ((uint64_t)round << 8) ^ salt);
}
/* Seed of the pattern of message j of (thread, round), whoever sends it. */
static int mseed(int t, int round, int j)
{
    return (int)(t_mix64(seed ^ 0x5eedull ^ ((uint64_t)t << 40) ^ ((uint64_t)round << 4) ^ (uint64_t)j) & 0x7fffffff);
}

static void failf(struct thread *th, const char *fmt, ...) T_PRINTF(2, 3);
static void failf(struct thread *th, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (th->failures++ < 8)
        fprintf(stderr, "FAIL rank %d thread %d round %d (%s, %zu bytes): %s\n", t_rank, th->t,
                th->round, op_names[th->op], th->n, msg);
}

static void mpi_ok(struct thread *th, int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char es[MPI_MAX_ERROR_STRING];
        int len = 0;
        es[0] = 0;
        MPI_Error_string(rc, es, &len);
        failf(th, "%s returned %d (%s)", what, rc, es);
    }
}
#define OK(th, call) mpi_ok(th, (call), #call)

/* A buffer of a kind this rank draws; `slot` keeps the buffers of one operation apart. */
static char *pick(struct thread *th, uint64_t *r, int slot, int *kind)
{
    int k = kinds_on[draw(r) % nkinds_on];
    if (kind) *kind = kinds[k];
    return th->buf[k][slot];
}

static void poison(struct thread *th, char *p, size_t n)
{
    memset(th->scratch, POISON_BYTE, n + SLACK);
    mem_put(p, th->scratch, n + SLACK);
}

/* Compares n bytes at p (any kind) with `want`, and the slack after them with the poison. */
static void expect(struct thread *th, const char *p, size_t n, const unsigned char *want, const char *what)
{
    mem_get(th->scratch, p, n + SLACK);
    atomic_fetch_add(&messages, 1);
    atomic_fetch_add(&bytes_checked, (long)n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (th->scratch[i] != want[i] && bad++ == 0) first = i;
    if (bad)
        failf(th, "%s into %p: %zu of %zu bytes differ (first at %zu: 0x%02x, expected 0x%02x)", what,
              (const void *)p, bad, n, first, th->scratch[first], want[first]);
    for (size_t i = n; i < n + SLACK; i++)
        if (th->scratch[i] != POISON_BYTE) {
            failf(th, "%s: byte %zu past the message was written", what, i);
            break;
        }
}

static void expect_pattern(struct thread *th, const char *p, size_t n, int src, int s, const char *what)
{
    pattern_fill(th->want, n, src, s);
    expect(th, p, n, th->want, what);
}

static void fill(char *p, size_t n, int rank, int s, struct thread *th)
{
    pattern_fill(th->scratch, n, rank, s);
    mem_put(p, th->scratch, n);
}

/* ---- point-to-point -------------------------------------------------------------------- */

static void op_sendrecv(struct thread *th, uint64_t *r)
{
    size_t n = th->n;
    int nx = next_rank(), pv = prev_rank();
    for (int dir = 0; dir < 2; dir++) {
        char *s = pick(th, r, 0, NULL), *d = pick(th, r, 2, NULL);
        int to = dir ? pv : nx, from = dir ? nx : pv;
        fill(s, n, t_rank, mseed(th->t, th->round, dir), th);
        poison(th, d, n);
        MPI_Status st;
        OK(th, MPI_Sendrecv(s, (int)n, MPI_BYTE, to, dir, d, (int)n + (int)(draw(r) % 2) * SLACK,
                            MPI_BYTE, from, dir, th->comm, &st));
        if (status_count(&st, MPI_BYTE) != (int)n || st.MPI_SOURCE != from)
            failf(th, "status count %d source %d", status_count(&st, MPI_BYTE), st.MPI_SOURCE);
        expect_pattern(th, d, n, from, mseed(th->t, th->round, dir), "MPI_Sendrecv");
    }
}

/* Completes `n` requests the way this rank drew. */
static void complete(struct thread *th, uint64_t *r, int n, MPI_Request *rq, MPI_Status *st)
{
    switch (draw(r) % 4) {
    case 0:
        OK(th, MPI_Waitall(n, rq, st));
        break;
    case 1: {
        int flag = 0;
        while (!flag) OK(th, MPI_Testall(n, rq, &flag, st));
        break;
    }
    case 2:
        for (int i = 0; i < n; i++) {
            int idx = -1;
            MPI_Status s1;
            OK(th, MPI_Waitany(n, rq, &idx, &s1));
            if (idx >= 0 && idx < n) st[idx] = s1;
        }
        break;
    default: {
        int done = 0;
        while (done < n) {
            int out = 0, idx[8];
            MPI_Status s8[8];
            OK(th, MPI_Waitsome(n, rq, &out, idx, s8));
            if (out == MPI_UNDEFINED) break;
            for (int i = 0; i < out; i++) st[idx[i]] = s8[i];
            done += out;
        }
    }
    }
}

/* Send and receive buffers for both directions: s[dir] to send, d[dir] to receive into. */
static void pick_both_ways(struct thread *th, uint64_t *r, char *s[2], char *d[2])
{
    for (int dir = 0; dir < 2; dir++) {
        s[dir] = pick(th, r, dir, NULL);
        d[dir] = pick(th, r, 2 + dir, NULL);
    }
}

static void op_nonblock(struct thread *th, uint64_t *r)
{
    size_t n = th->n;
    int nx = next_rank(), pv = prev_rank();
    char *s[2], *d[2];
    MPI_Request rq[4];
    MPI_Status st[4];
    pick_both_ways(th, r, s, d);
    for (int dir = 0; dir < 2; dir++) {
        fill(s[dir], n, t_rank, mseed(th->t, th->round, dir), th);
        poison(th, d[dir], n);
    }
    int recv_first = (int)(draw(r) % 2);
    for (int step = 0; step < 2; step++) {
        if (step == recv_first) {
            OK(th, MPI_Irecv(d[0], (int)n + SLACK, MPI_BYTE, pv, 0, th->comm, &rq[0]));
            OK(th, MPI_Irecv(d[1], (int)n, MPI_BYTE, nx, 1, th->comm, &rq[1]));
        } else {
            OK(th, MPI_Isend(s[0], (int)n, MPI_BYTE, nx, 0, th->comm, &rq[2]));
            OK(th, MPI_Isend(s[1], (int)n, MPI_BYTE, pv, 1, th->comm, &rq[3]));
        }
    }
    complete(th, r, 4, rq, st);
    if (status_count(&st[0], MPI_BYTE) != (int)n || status_count(&st[1], MPI_BYTE) != (int)n)
        failf(th, "status counts %d %d", status_count(&st[0], MPI_BYTE), status_count(&st[1], MPI_BYTE));
    expect_pattern(th, d[0], n, pv, mseed(th->t, th->round, 0), "MPI_Irecv from previous");
    expect_pattern(th, d[1], n, nx, mseed(th->t, th->round, 1), "MPI_Irecv from next");
}

static void op_persist(struct thread *th, uint64_t *r)
{
    size_t n = th->n;
    int nx = next_rank(), pv = prev_rank();
    char *s[2], *d[2];
    MPI_Request rq[4];
    MPI_Status st[4];
    pick_both_ways(th, r, s, d);
    OK(th, MPI_Recv_init(d[0], (int)n, MPI_BYTE, pv, 0, th->comm, &rq[0]));
    OK(th, MPI_Recv_init(d[1], (int)n, MPI_BYTE, nx, 1, th->comm, &rq[1]));
    OK(th, MPI_Send_init(s[0], (int)n, MPI_BYTE, nx, 0, th->comm, &rq[2]));
    OK(th, MPI_Send_init(s[1], (int)n, MPI_BYTE, pv, 1, th->comm, &rq[3]));
    for (int start = 0; start < 2; start++) {
        for (int dir = 0; dir < 2; dir++) {
            fill(s[dir], n, t_rank, mseed(th->t, th->round, 2 * start + dir), th);
            poison(th, d[dir], n);
        }
        OK(th, MPI_Startall(4, rq));
        complete(th, r, 4, rq, st);
        expect_pattern(th, d[0], n, pv, mseed(th->t, th->round, 2 * start), "persistent receive from previous");
        expect_pattern(th, d[1], n, nx, mseed(th->t, th->round, 2 * start + 1), "persistent receive from next");
    }
    for (int i = 0; i < 4; i++) OK(th, MPI_Request_free(&rq[i]));
}

static void op_probe(struct thread *th, uint64_t *r)
{
    size_t n = th->n;
    int nx = next_rank(), pv = prev_rank();
    int tag = th->t * TAGS + th->round % TAGS;
    char *s[2];
    MPI_Request rq[2];
    for (int dir = 0; dir < 2; dir++) {
        s[dir] = pick(th, r, dir, NULL);
        fill(s[dir], n, t_rank, mseed(th->t, th->round, dir), th);
    }
    /* to next the message of direction 0, to previous that of direction 1 */
    OK(th, MPI_Isend(s[0], (int)n, MPI_BYTE, nx, tag, shared_comm, &rq[0]));
    OK(th, MPI_Isend(s[1], (int)n, MPI_BYTE, pv, tag, shared_comm, &rq[1]));
    int got_from[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        char *d = pick(th, r, 2 + i, NULL);
        poison(th, d, n);
        MPI_Status st;
        int how = (int)(draw(r) % 3);
        if (how == 0) {
            MPI_Message m;
            OK(th, MPI_Mprobe(MPI_ANY_SOURCE, tag, shared_comm, &m, &st));
            OK(th, MPI_Mrecv(d, (int)n + SLACK, MPI_BYTE, &m, &st));
        } else if (how == 1) {
            MPI_Message m;
            int flag = 0;
            while (!flag) OK(th, MPI_Improbe(MPI_ANY_SOURCE, tag, shared_comm, &flag, &m, &st));
            MPI_Request q;
            OK(th, MPI_Imrecv(d, (int)n, MPI_BYTE, &m, &q));
            OK(th, MPI_Wait(&q, &st));
        } else {
            OK(th, MPI_Probe(MPI_ANY_SOURCE, tag, shared_comm, &st));
            if (status_count(&st, MPI_BYTE) != (int)n)
                failf(th, "MPI_Probe counted %d bytes", status_count(&st, MPI_BYTE));
            OK(th, MPI_Recv(d, (int)n, MPI_BYTE, st.MPI_SOURCE, tag, shared_comm, &st));
        }
        int src = st.MPI_SOURCE;
        if ((src != pv && src != nx) || st.MPI_TAG != tag || status_count(&st, MPI_BYTE) != (int)n) {
            failf(th, "status source %d tag %d count %d", src, st.MPI_TAG, status_count(&st, MPI_BYTE));
            continue;
        }
        /* previous sent us its direction 0, next its direction 1 (the same rank with 2 ranks) */
        int dir = src == pv && got_from[0] < 0 ? 0 : 1;
        got_from[dir] = src;
        expect_pattern(th, d, n, src, mseed(th->t, th->round, dir), how == 0 ? "MPI_Mrecv" : how == 1 ? "MPI_Imrecv" : "MPI_Recv after MPI_Probe");
    }
    MPI_Status sts[2];
    OK(th, MPI_Waitall(2, rq, sts));
}

static void op_anytag(struct thread *th, uint64_t *r)
{
    size_t n = th->n;
    int nx = next_rank(), pv = prev_rank();
    char *s[2];
    MPI_Request rq[2];
    for (int j = 0; j < 2; j++) {
        s[j] = pick(th, r, j, NULL);
        fill(s[j], n, t_rank, mseed(th->t, th->round, j), th);
        OK(th, MPI_Isend(s[j], (int)n, MPI_BYTE, nx, 100 + j, th->comm, &rq[j]));
    }
    MPI_Status st;
    int flag = 0;
    /* next may already send this thread its next round's messages */
    while (!flag) OK(th, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, th->comm, &flag, &st));
    if (st.MPI_SOURCE != nx && (st.MPI_SOURCE != pv || st.MPI_TAG != 100 || status_count(&st, MPI_BYTE) != (int)n))
        failf(th, "MPI_Iprobe: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, status_count(&st, MPI_BYTE));
    for (int j = 0; j < 2; j++) {
        char *d = pick(th, r, 2 + j, NULL);
        poison(th, d, n);
        OK(th, MPI_Recv(d, (int)n + SLACK, MPI_BYTE, pv, MPI_ANY_TAG, th->comm, &st));
        if (st.MPI_SOURCE != pv || st.MPI_TAG != 100 + j || status_count(&st, MPI_BYTE) != (int)n)
            failf(th, "MPI_ANY_TAG receive %d: source %d tag %d count %d", j, st.MPI_SOURCE, st.MPI_TAG, status_count(&st, MPI_BYTE));
        expect_pattern(th, d, n, pv, mseed(th->t, th->round, j), "MPI_Recv with MPI_ANY_TAG");
    }
    MPI_Status sts[2];
    OK(th, MPI_Waitall(2, rq, sts));
}

/* ---- collectives ----------------------------------------------------------------------- */

static void op_allreduce(struct thread *th, uint64_t *r)
{
    size_t count = th->n / 4 ? th->n / 4 : 1, n = count * 4;
    char *s = pick(th, r, 0, NULL), *d = pick(th, r, 2, NULL);
    /* in place or not, each rank its own way; blocking or not, all alike */
    int how = th->agreed % 2 ? 1 : draw(r) % 2 ? 2 : 0;
    int s0 = mseed(th->t, th->round, 0);
    unsigned *want = (unsigned *)th->want;
    memset(want, 0, n);
    for (int q = 0; q < t_size; q++) {
        pattern_fill(th->scratch, n, q, s0);
        for (size_t i = 0; i < count; i++) want[i] += ((unsigned *)th->scratch)[i];
    }
    if (how == 2) {
        fill(d, n, t_rank, s0, th);
        memset(th->scratch, POISON_BYTE, SLACK);
        mem_put(d + n, th->scratch, SLACK);
        OK(th, MPI_Allreduce(MPI_IN_PLACE, d, (int)count, MPI_UNSIGNED, MPI_SUM, th->comm));
    } else {
        fill(s, n, t_rank, s0, th);
        poison(th, d, n);
        if (how == 0) {
            OK(th, MPI_Allreduce(s, d, (int)count, MPI_UNSIGNED, MPI_SUM, th->comm));
        } else {
            MPI_Request q;
            OK(th, MPI_Iallreduce(s, d, (int)count, MPI_UNSIGNED, MPI_SUM, th->comm, &q));
            OK(th, MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
    }
    expect(th, d, n, th->want, how == 2 ? "MPI_Allreduce in place" : how == 1 ? "MPI_Iallreduce" : "MPI_Allreduce");
}

static void op_bcast(struct thread *th, uint64_t *r)
{
    size_t n = th->n;
    int root = th->round % t_size;
    char *d = pick(th, r, 2, NULL);
    int s0 = mseed(th->t, th->round, 0);
    if (t_rank == root) {
        fill(d, n, root, s0, th);
        memset(th->scratch, POISON_BYTE, SLACK);
        mem_put(d + n, th->scratch, SLACK);
    } else {
        poison(th, d, n);
    }
    OK(th, MPI_Bcast(d, (int)n, MPI_BYTE, root, th->comm));
    expect_pattern(th, d, n, root, s0, "MPI_Bcast");
}

static void op_allgather(struct thread *th, uint64_t *r)
{
    size_t each = th->n / (size_t)t_size ? th->n / (size_t)t_size : 1, n = each * (size_t)t_size;
    char *s = pick(th, r, 0, NULL), *d = pick(th, r, 2, NULL);
    int s0 = mseed(th->t, th->round, 0);
    fill(s, each, t_rank, s0, th);
    poison(th, d, n);
    OK(th, MPI_Allgather(s, (int)each, MPI_BYTE, d, (int)each, MPI_BYTE, th->comm));
    for (int q = 0; q < t_size; q++) pattern_fill(th->want + (size_t)q * each, each, q, s0);
    expect(th, d, n, th->want, "MPI_Allgather");
}

/* ---- one-sided ------------------------------------------------------------------------- */

static void op_rma(struct thread *th, uint64_t *r)
{
    size_t third = WINB / 3 & ~(size_t)63, n = th->n < third - SLACK ? th->n : third - SLACK;
    size_t count = n / 4 ? n / 4 : 1;
    int nx = next_rank(), pv = prev_rank();
    char *o = pick(th, r, 0, NULL), *g = pick(th, r, 2, NULL), *a = pick(th, r, 1, NULL);
    int s_put = mseed(th->t, th->round, 0), s_get = mseed(th->t, th->round, 1);
    int s_acc = mseed(th->t, th->round, 2), s_base = mseed(th->t, th->round, 3);
    /* before the epoch: this rank's get region and accumulate base, its put region poisoned */
    poison(th, th->win_mem, n);
    fill(th->win_mem + third, n, t_rank, s_get, th);
    fill(th->win_mem + 2 * third, count * 4, t_rank, s_base, th);
    fill(o, n, t_rank, s_put, th);
    fill(a, count * 4, t_rank, s_acc, th);
    poison(th, g, n);
    OK(th, MPI_Win_fence(0, th->win));
    OK(th, MPI_Put(o, (int)n, MPI_BYTE, nx, 0, (int)n, MPI_BYTE, th->win));
    OK(th, MPI_Get(g, (int)n, MPI_BYTE, pv, (MPI_Aint)third, (int)n, MPI_BYTE, th->win));
    OK(th, MPI_Win_fence(0, th->win));
    OK(th, MPI_Accumulate(a, (int)count, MPI_UNSIGNED, nx, (MPI_Aint)(2 * third), (int)count,
                          MPI_UNSIGNED, MPI_SUM, th->win));
    OK(th, MPI_Win_fence(0, th->win));
    expect_pattern(th, th->win_mem, n, pv, s_put, "MPI_Put into this rank's window");
    expect_pattern(th, g, n, pv, s_get, "MPI_Get");
    unsigned *want = (unsigned *)th->want;
    pattern_fill(th->want, count * 4, t_rank, s_base);
    pattern_fill(th->scratch, count * 4, pv, s_acc);
    for (size_t i = 0; i < count; i++) want[i] += ((unsigned *)th->scratch)[i];
    mem_get(th->scratch, th->win_mem + 2 * third, count * 4);
    atomic_fetch_add(&messages, 1);
    if (memcmp(th->scratch, th->want, count * 4) != 0) failf(th, "MPI_Accumulate: the window holds other sums");
    /* nobody reads this window again before the next round's first fence */
}

/* ---- the threads ----------------------------------------------------------------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker(void *vp)
{
    struct thread *th = (struct thread *)vp;
    double start = now();
    for (int round = 0;; round++) {
        if (fixed_rounds ? round >= fixed_rounds : round % 8 == 0) {
            if (fixed_rounds) break;
            int over = now() - start > seconds, any = 0;
            OK(th, MPI_Allreduce(&over, &any, 1, MPI_INT, MPI_MAX, th->comm));
            if (any) break;
        }
        uint64_t same = stream(th->t, round, 1), own = stream(th->t, round, 2 + (uint64_t)t_rank);
        th->round = round;
        th->op = ops_on[draw(&same) % nops_on];
        th->n = sizes_on[draw(&same) % nsizes_on];
        th->agreed = (unsigned)draw(&same);
        atomic_fetch_add(&op_counts[th->op], 1);
        switch (th->op) {
        case SENDRECV: op_sendrecv(th, &own); break;
        case NONBLOCK: op_nonblock(th, &own); break;
        case PERSIST: op_persist(th, &own); break;
        case PROBE: op_probe(th, &own); break;
        case ANYTAG: op_anytag(th, &own); break;
        case ALLREDUCE: op_allreduce(th, &own); break;
        case BCAST: op_bcast(th, &own); break;
        case ALLGATHER: op_allgather(th, &own); break;
        case RMA: op_rma(th, &own); break;
        }
        th->rounds = round + 1;
    }
    return NULL;
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int main(int argc, char **argv)
{
    int provided = test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (t_rank == 0) note("the MPI provides thread level %d, not MPI_THREAD_MULTIPLE: skipped", provided);
        return report_and_finalize();
    }
    nthreads = env_int("CUDAMPI_STRESS_THREADS", 4);
    nthreads = nthreads < 1 ? 1 : nthreads > MAXT ? MAXT : nthreads;
    seconds = env_int("CUDAMPI_STRESS_SECONDS", 4);
    fixed_rounds = env_int("CUDAMPI_STRESS_ROUNDS", 0);
    const char *ov = getenv("CUDAMPI_STRESS_OPS");
    for (int o = 0; o < NOPS; o++)
        if (!ov || !*ov || strstr(ov, op_names[o])) ops_on[nops_on++] = o;
    if (!nops_on) DIE("CUDAMPI_STRESS_OPS=%s names no operation", ov);
    /* CUDAMPI_STRESS_MAX_BYTES: leave out the larger sizes (a long run of many messages) */
    size_t most = (size_t)strtoull(t_env("CUDAMPI_STRESS_MAX_BYTES", "0"), NULL, 0);
    for (size_t i = 0; i < NSIZES; i++)
        if (!most || sizes[i] <= most) sizes_on[nsizes_on++] = sizes[i];
    if (!nsizes_on) DIE("CUDAMPI_STRESS_MAX_BYTES=%zu leaves no size", most);
    const char *kv = getenv("CUDAMPI_STRESS_KINDS");
    for (int k = 0; k < NKINDS; k++)
        if (!kv || !*kv || strstr(kv, mem_kind_name(kinds[k]))) kinds_on[nkinds_on++] = k;
    if (!nkinds_on) DIE("CUDAMPI_STRESS_KINDS=%s names no memory kind", kv);
    const char *sv = getenv("CUDAMPI_STRESS_SEED");
    unsigned long long s = sv && *sv ? strtoull(sv, NULL, 0) : (unsigned long long)time(NULL) * 2654435761ull % 1000000007ull;
    MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    seed = s;
    if (t_rank == 0)
        note("seed %llu, %d threads, %d ranks, %s", s, nthreads, t_size,
             fixed_rounds ? "fixed rounds" : "time-boxed");

    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &shared_comm));
    struct thread th[MAXT];
    pthread_t tid[MAXT];
    memset(th, 0, sizeof th);
    for (int t = 0; t < nthreads; t++) {
        th[t].t = t;
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &th[t].comm));
        for (int k = 0; k < NKINDS; k++)
            for (int b = 0; b < NBUF; b++) th[t].buf[k][b] = (char *)mem_alloc(kinds[k], MAXB + SLACK);
        th[t].scratch = (unsigned char *)xmalloc(MAXB + SLACK);
        th[t].want = (unsigned char *)xmalloc(MAXB + SLACK);
        uint64_t w = stream(t, -1, 7 + (uint64_t)t_rank);
        th[t].win_kind = kinds[kinds_on[draw(&w) % nkinds_on]];
        th[t].win_mem = (char *)mem_alloc(th[t].win_kind, WINB + SLACK);
        /* Open MPI 4.1's one-sided components refuse MPI_THREAD_MULTIPLE (pt2pt) or a node
         * without UCX's transports (ucx, rdma in mode nodes): then no round does one-sided */
        MPI_Comm_set_errhandler(th[t].comm, MPI_ERRORS_RETURN);
        int made = MPI_Win_create(th[t].win_mem, WINB, 1, MPI_INFO_NULL, th[t].comm, &th[t].win) == MPI_SUCCESS, all = 0;
        MPI_Allreduce(&made, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (made) MPI_Win_free(&th[t].win);
            th[t].win = MPI_WIN_NULL;
            windows = 0;
        }
    }
    if (!windows) {
        int o = 0;
        for (int i = 0; i < nops_on; i++)
            if (ops_on[i] != RMA) ops_on[o++] = ops_on[i];
        nops_on = o;
        if (t_rank == 0) note("this MPI makes no window at MPI_THREAD_MULTIPLE: no one-sided rounds");
        if (!nops_on) return report_and_finalize();
    }
    double t0 = now();
    for (int t = 0; t < nthreads; t++) pthread_create(&tid[t], NULL, worker, &th[t]);
    long rounds = 0;
    int failures = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(tid[t], NULL);
        rounds += th[t].rounds;
        failures += th[t].failures;
    }
    double el = now() - t0;
    t_failures += failures;
    long totals[2] = {atomic_load(&messages), atomic_load(&bytes_checked)}, all[2];
    MPI_Allreduce(totals, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int bad = 0;
    MPI_Allreduce(&failures, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t_rank == 0) {
        char ops[256];
        int at = 0;
        for (int o = 0; o < NOPS; o++)
            at += snprintf(ops + at, sizeof ops - (size_t)at, " %s %ld", op_names[o], atomic_load(&op_counts[o]));
        note("%ld rounds per rank in %.1f s, %ld messages and results checked (%.1f MB) on all ranks, %d wrong; rank 0's rounds:%s",
             rounds, el, all[0], all[1] / 1e6, bad, ops);
        if (bad)
            note("replay: CUDAMPI_STRESS_SEED=%llu CUDAMPI_STRESS_THREADS=%d CUDAMPI_STRESS_ROUNDS=%ld%s%s%s%s"
                 " CUDAMPI_STRESS_MAX_BYTES=%zu", s, nthreads, th[0].rounds, ov && *ov ? " CUDAMPI_STRESS_OPS=" : "",
                 ov && *ov ? ov : "", kv && *kv ? " CUDAMPI_STRESS_KINDS=" : "", kv && *kv ? kv : "", most);
    }
    for (int t = 0; t < nthreads; t++) {
        if (th[t].win != MPI_WIN_NULL) MPI_Win_free(&th[t].win);
        mem_free(th[t].win_mem);
        for (int k = 0; k < NKINDS; k++)
            for (int b = 0; b < NBUF; b++) mem_free(th[t].buf[k][b]);
        free(th[t].scratch);
        free(th[t].want);
        MPI_Comm_free(&th[t].comm);
    }
    MPI_Comm_free(&shared_comm);
    return report_and_finalize();
}
