// cudampi-test: ranks=2,3,4 without-shim=crash nccl=yes timeout=150
/* coll_nccl_nb.c -- nonblocking and persistent collectives on NCCL.
 *
 * A nonblocking start may not wait for the other ranks, so it follows the communicator's last
 * agreement (the one made inside its last eligible blocking collective, or a persistent
 * collective's initialization): where that chose NCCL, every rank runs the call on NCCL,
 * whatever its buffers are this time (host memory goes through scratch memory on its GPU).
 * A persistent collective agrees at its initialization and runs every start that way.
 *
 * Every result is compared byte for byte with the same collective, blocking, on host buffers
 * over a second communicator (poisoned receive buffers on both sides, so bytes the call must
 * not write are compared too). Mode nccl (the stand-in NCCL, CUDAMPI_NCCL_BYTES=0): the counter
 * cudampi_stats.nccl_calls must rise by exactly the calls expected on NCCL, on every rank;
 * other modes: results only (no NCCL is loaded in CI; a GPU machine may have a real one).
 *
 *  1. before any agreement: an MPI_Iallreduce is staged;
 *  2. after a blocking device MPI_Allreduce (on NCCL): every nonblocking collective NCCL runs
 *     (Iallreduce, in place too, Ireduce, Ibcast, Iallgather(v), Ialltoall(v), Igather(v),
 *     Iscatter(v), Ireduce_scatter(_block)), all started, then one MPI_Waitall;
 *  3. the completion calls: MPI_Test, Testall, Testany, Testsome, Waitany, Waitsome,
 *     MPI_Request_get_status, and MPI_Request_free of an active request;
 *  4. rank 0 with host buffers (pageable), the others with device buffers: on NCCL on every
 *     rank, through scratch memory on rank 0;
 *  5. persistent: MPI_Allreduce_init and MPI_Bcast_init on device buffers, started three
 *     times with new data (MPI_Start, MPI_Startall); with rank 0's buffers in host memory the
 *     initialization agrees on staging;
 *  6. a blocking Allreduce with rank 0's buffers on the host (staged) puts the communicator's
 *     nonblocking collectives back on the staged path;
 *  7. two communicators whose MPI_Iallreduce the ranks start in opposite orders, one
 *     MPI_Waitall; and a nonblocking collective between an MPI_Isend of device memory and its
 *     MPI_Wait, whose receiver runs the collective first;
 *  8. the schedule of blocking reductions: after 9 agreements on NCCL in a row (a fresh
 *     communicator), the next MPI_Allreduce goes to NCCL without asking, even with rank 0's
 *     buffers on the host (through scratch memory); the next asks, and rank 0's detour starts
 *     the streak afresh, so an MPI_Allreduce with rank 0 on the host after it is staged. */
#include "common.h"
#include "ipc_stats.h"

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_COLL_INIT 1
#endif

enum { K_ALLREDUCE, K_INPLACE, K_REDUCE, K_BCAST, K_ALLGATHER, K_ALLGATHERV, K_ALLTOALL, K_ALLTOALLV,
       K_GATHER, K_GATHERV, K_SCATTER, K_SCATTERV, K_RSB, K_RS, K_N };
static const char *kname[K_N] = {"Iallreduce", "Iallreduce (in place)", "Ireduce", "Ibcast", "Iallgather",
                                 "Iallgatherv", "Ialltoall", "Ialltoallv", "Igather", "Igatherv", "Iscatter",
                                 "Iscatterv", "Ireduce_scatter_block", "Ireduce_scatter"};
enum { BLOCKING, NONBLOCKING, PERSISTENT };

static stats_fn g_get;
static int g_nccl; /* mode nccl: counters checked */
static int P, me;

static unsigned long long nccl_calls(void)
{
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    return g_get && g_get(&s) == 0 ? s.nccl_calls : 0;
}

/* One collective's arguments on this rank, in ints: sizes, counts and displacements. */
struct call {
    int kind, n, root;
    size_t scount, rcount; /* ints in the send and the receive buffer */
    int sc[8], sd[8], rc[8], rd[8];
};

static struct call describe(int kind, int n)
{
    struct call c = {kind, n, 0, 0, 0, {0}, {0}, {0}, {0}};
    int s = 0, r = 0;
    switch (kind) {
    case K_ALLREDUCE:
    case K_INPLACE:
    case K_REDUCE:
    case K_BCAST: c.scount = c.rcount = (size_t)n; break;
    case K_ALLGATHER:
    case K_GATHER: c.scount = (size_t)n, c.rcount = (size_t)n * P; break;
    case K_ALLTOALL:
    case K_RSB: c.scount = (size_t)n * P, c.rcount = (size_t)(kind == K_RSB ? n : n * P); break;
    case K_SCATTER: c.scount = (size_t)n * P, c.rcount = (size_t)n; break;
    case K_ALLGATHERV:
    case K_GATHERV:
        /* rank r gives n + r ints, placed with a gap of 3 ints after each block */
        for (int i = 0; i < P; i++) c.rc[i] = n + i, c.rd[i] = r, r += n + i + 3;
        c.scount = (size_t)(n + me), c.rcount = (size_t)r;
        break;
    case K_SCATTERV:
        for (int i = 0; i < P; i++) c.sc[i] = n + i, c.sd[i] = s, s += n + i + 2;
        c.scount = (size_t)s, c.rcount = (size_t)(n + me);
        break;
    case K_ALLTOALLV:
        /* rank i sends n + (i + j) % 3 ints to rank j */
        for (int j = 0; j < P; j++) {
            c.sc[j] = n + (me + j) % 3, c.sd[j] = s, s += c.sc[j] + 1;
            c.rc[j] = n + (j + me) % 3, c.rd[j] = r, r += c.rc[j] + 2;
        }
        c.scount = (size_t)s, c.rcount = (size_t)r;
        break;
    case K_RS:
        for (int i = 0; i < P; i++) c.rc[i] = n + i, s += n + i;
        c.scount = (size_t)s, c.rcount = (size_t)(n + me);
        break;
    }
    if (kind == K_GATHERV || kind == K_SCATTERV) c.root = P - 1;
    if (kind == K_BCAST) c.root = P > 2 ? 1 : 0;
    return c;
}

/* Issues the call: blocking (req unused), nonblocking or persistent initialization. */
static int issue(const struct call *c, int how, const void *sb, void *rb, MPI_Comm comm, MPI_Request *req)
{
    const int n = c->n;
    const void *s = c->kind == K_INPLACE ? MPI_IN_PLACE : sb;
    MPI_Datatype T = MPI_INT;
    switch (how * 100 + c->kind) {
    case BLOCKING * 100 + K_ALLREDUCE:
    case BLOCKING * 100 + K_INPLACE: return MPI_Allreduce(s, rb, n, T, MPI_SUM, comm);
    case NONBLOCKING * 100 + K_ALLREDUCE:
    case NONBLOCKING * 100 + K_INPLACE: return MPI_Iallreduce(s, rb, n, T, MPI_SUM, comm, req);
    case BLOCKING * 100 + K_REDUCE: return MPI_Reduce(s, rb, n, T, MPI_MAX, c->root, comm);
    case NONBLOCKING * 100 + K_REDUCE: return MPI_Ireduce(s, rb, n, T, MPI_MAX, c->root, comm, req);
    case BLOCKING * 100 + K_BCAST: return MPI_Bcast(rb, n, T, c->root, comm);
    case NONBLOCKING * 100 + K_BCAST: return MPI_Ibcast(rb, n, T, c->root, comm, req);
    case BLOCKING * 100 + K_ALLGATHER: return MPI_Allgather(s, n, T, rb, n, T, comm);
    case NONBLOCKING * 100 + K_ALLGATHER: return MPI_Iallgather(s, n, T, rb, n, T, comm, req);
    case BLOCKING * 100 + K_ALLGATHERV: return MPI_Allgatherv(s, n + me, T, rb, c->rc, c->rd, T, comm);
    case NONBLOCKING * 100 + K_ALLGATHERV: return MPI_Iallgatherv(s, n + me, T, rb, c->rc, c->rd, T, comm, req);
    case BLOCKING * 100 + K_ALLTOALL: return MPI_Alltoall(s, n, T, rb, n, T, comm);
    case NONBLOCKING * 100 + K_ALLTOALL: return MPI_Ialltoall(s, n, T, rb, n, T, comm, req);
    case BLOCKING * 100 + K_ALLTOALLV: return MPI_Alltoallv(s, c->sc, c->sd, T, rb, c->rc, c->rd, T, comm);
    case NONBLOCKING * 100 + K_ALLTOALLV: return MPI_Ialltoallv(s, c->sc, c->sd, T, rb, c->rc, c->rd, T, comm, req);
    case BLOCKING * 100 + K_GATHER: return MPI_Gather(s, n, T, rb, n, T, c->root, comm);
    case NONBLOCKING * 100 + K_GATHER: return MPI_Igather(s, n, T, rb, n, T, c->root, comm, req);
    case BLOCKING * 100 + K_GATHERV: return MPI_Gatherv(s, n + me, T, rb, c->rc, c->rd, T, c->root, comm);
    case NONBLOCKING * 100 + K_GATHERV: return MPI_Igatherv(s, n + me, T, rb, c->rc, c->rd, T, c->root, comm, req);
    case BLOCKING * 100 + K_SCATTER: return MPI_Scatter(s, n, T, rb, n, T, c->root, comm);
    case NONBLOCKING * 100 + K_SCATTER: return MPI_Iscatter(s, n, T, rb, n, T, c->root, comm, req);
    case BLOCKING * 100 + K_SCATTERV: return MPI_Scatterv(s, c->sc, c->sd, T, rb, n + me, T, c->root, comm);
    case NONBLOCKING * 100 + K_SCATTERV: return MPI_Iscatterv(s, c->sc, c->sd, T, rb, n + me, T, c->root, comm, req);
    case BLOCKING * 100 + K_RSB: return MPI_Reduce_scatter_block(s, rb, n, T, MPI_SUM, comm);
    case NONBLOCKING * 100 + K_RSB: return MPI_Ireduce_scatter_block(s, rb, n, T, MPI_SUM, comm, req);
    case BLOCKING * 100 + K_RS: return MPI_Reduce_scatter(s, rb, c->rc, T, MPI_SUM, comm);
    case NONBLOCKING * 100 + K_RS: return MPI_Ireduce_scatter(s, rb, c->rc, T, MPI_SUM, comm, req);
#ifdef HAVE_COLL_INIT
    case PERSISTENT * 100 + K_ALLREDUCE: return MPI_Allreduce_init(s, rb, n, T, MPI_SUM, comm, MPI_INFO_NULL, req);
    case PERSISTENT * 100 + K_BCAST: return MPI_Bcast_init(rb, n, T, c->root, comm, MPI_INFO_NULL, req);
#endif
    }
    DIE("no call for kind %d, mode %d", c->kind, how);
    return MPI_ERR_OTHER;
}

/* The call's buffers on this rank (device, or host memory where `host`) and their host twins. */
struct run {
    struct call c;
    int *sbuf, *rbuf;   /* what the call gets */
    int *hs, *hr;       /* the twin's */
    MPI_Request req;
};

static void fill(struct run *r, int seed)
{
    size_t sb = r->c.scount * sizeof(int), rb = r->c.rcount * sizeof(int);
    int *v = xmalloc(sb + sizeof(int));
    for (size_t i = 0; i < r->c.scount; i++) v[i] = (int)(seed * 1000003 + me * 7919 + (int)i * 13) % 100003;
    memcpy(r->hs, v, sb);
    mem_put(r->sbuf, v, sb);
    memset(r->hr, POISON_BYTE, rb);
    mem_poison(r->rbuf, rb);
    if (r->c.kind == K_INPLACE || r->c.kind == K_BCAST) { /* one buffer: the data is in the receive buffer */
        if (r->c.kind == K_INPLACE || me == r->c.root) {
            memcpy(r->hr, v, rb);
            mem_put(r->rbuf, v, rb);
        }
    }
    free(v);
}

static struct run *prepare(int kind, int n, int host, int seed)
{
    struct run *r = calloc(1, sizeof *r);
    r->c = describe(kind, n);
    size_t sb = r->c.scount * sizeof(int) + 4, rb = r->c.rcount * sizeof(int) + 4;
    int k = host ? MEM_HOST : MEM_DEVICE;
    r->sbuf = mem_alloc(k, sb);
    r->rbuf = mem_alloc(k, rb);
    r->hs = xmalloc(sb);
    r->hr = xmalloc(rb);
    r->req = MPI_REQUEST_NULL;
    fill(r, seed);
    return r;
}

/* The twin on host buffers (blocking, on `hcomm`), then the byte comparison. */
static void verify(struct run *r, MPI_Comm hcomm, const char *what)
{
    MPI_CHECK(issue(&r->c, BLOCKING, r->hs, r->hr, hcomm, NULL));
    size_t rb = r->c.rcount * sizeof(int);
    unsigned char *got = xmalloc(rb + 1);
    mem_get(got, r->rbuf, rb);
    check_bytes(got, r->hr, rb, "%s: %s (n %d): receive buffer", what, kname[r->c.kind], r->c.n);
    free(got);
}

static void release(struct run *r)
{
    mem_free(r->sbuf);
    mem_free(r->rbuf);
    free(r->hs);
    free(r->hr);
    free(r);
}

static void expect_calls(unsigned long long before, unsigned long long n, const char *what)
{
    if (!g_nccl) return;
    unsigned long long d = nccl_calls() - before;
    CHECK(d == n, "%s: nccl_calls rose by %llu, expected %llu", what, d, n);
}

/* A blocking Allreduce on device buffers (host ones on rank 0 if `host0`): the agreement that
 * sets the communicator's path. */
static void agree(MPI_Comm comm, MPI_Comm hcomm, int host0, const char *what)
{
    unsigned long long before = nccl_calls();
    struct run *r = prepare(K_ALLREDUCE, 4096, host0 && me == 0, 99);
    MPI_CHECK(issue(&r->c, BLOCKING, r->sbuf, r->rbuf, comm, NULL));
    verify(r, hcomm, what);
    expect_calls(before, host0 ? 0 : 1, what);
    release(r);
}

/* Section 2 and 4: every kind started, then one MPI_Waitall. */
static void all_kinds(MPI_Comm comm, MPI_Comm hcomm, int host0, int nccl, const char *what)
{
    struct run *r[K_N];
    MPI_Request req[K_N];
    unsigned long long before = nccl_calls();
    for (int k = 0; k < K_N; k++) {
        r[k] = prepare(k, 1000 + 17 * k, host0 && me == 0, k + 1);
        MPI_CHECK(issue(&r[k]->c, NONBLOCKING, r[k]->sbuf, r[k]->rbuf, comm, &req[k]));
    }
    MPI_CHECK(MPI_Waitall(K_N, req, MPI_STATUSES_IGNORE));
    expect_calls(before, nccl ? K_N : 0, what);
    for (int k = 0; k < K_N; k++) {
        CHECK(req[k] == MPI_REQUEST_NULL, "%s: %s: request not freed by MPI_Waitall", what, kname[k]);
        verify(r[k], hcomm, what);
        release(r[k]);
    }
}

/* Section 3: the completion calls. */
static void completions(MPI_Comm comm, MPI_Comm hcomm)
{
    const char *what = "completion calls";
    unsigned long long before = nccl_calls();
    struct run *a = prepare(K_ALLREDUCE, 20000, 0, 31), *b = prepare(K_BCAST, 30000, 0, 32), *c = prepare(K_ALLGATHER, 5000, 0, 33);
    int flag = 0, idx, out, idxs[3], done = 0;
    /* MPI_Test */
    MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, comm, &a->req));
    while (!flag) MPI_CHECK(MPI_Test(&a->req, &flag, MPI_STATUS_IGNORE));
    CHECK(a->req == MPI_REQUEST_NULL, "MPI_Test: request not freed");
    verify(a, hcomm, "MPI_Test");
    /* MPI_Request_get_status, then MPI_Wait */
    fill(a, 41);
    MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, comm, &a->req));
    for (flag = 0; !flag;) MPI_CHECK(MPI_Request_get_status(a->req, &flag, MPI_STATUS_IGNORE));
    CHECK(a->req != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
    MPI_CHECK(MPI_Wait(&a->req, MPI_STATUS_IGNORE));
    verify(a, hcomm, "MPI_Request_get_status");
    /* MPI_Testall, MPI_Waitany, MPI_Testany, MPI_Waitsome, MPI_Testsome over three */
    for (int round = 0; round < 4; round++) {
        fill(a, 50 + round), fill(b, 60 + round), fill(c, 70 + round);
        MPI_Request rq[3];
        MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, comm, &rq[0]));
        MPI_CHECK(issue(&b->c, NONBLOCKING, b->sbuf, b->rbuf, comm, &rq[1]));
        MPI_CHECK(issue(&c->c, NONBLOCKING, c->sbuf, c->rbuf, comm, &rq[2]));
        for (done = 0; done < 3;) {
            switch (round) {
            case 0:
                MPI_CHECK(MPI_Testall(3, rq, &flag, MPI_STATUSES_IGNORE));
                if (flag) done = 3;
                break;
            case 1:
                MPI_CHECK(MPI_Waitany(3, rq, &idx, MPI_STATUS_IGNORE));
                CHECK(idx >= 0 && idx < 3, "MPI_Waitany: index %d", idx);
                done++;
                break;
            case 2:
                MPI_CHECK(MPI_Testany(3, rq, &idx, &flag, MPI_STATUS_IGNORE));
                if (flag) {
                    CHECK(idx >= 0 && idx < 3, "MPI_Testany: index %d", idx);
                    done++;
                }
                break;
            case 3:
                if (done % 2) MPI_CHECK(MPI_Testsome(3, rq, &out, idxs, MPI_STATUSES_IGNORE));
                else MPI_CHECK(MPI_Waitsome(3, rq, &out, idxs, MPI_STATUSES_IGNORE));
                CHECK(out != MPI_UNDEFINED, "MPI_Waitsome/Testsome: no active request left, %d done", done);
                if (out == MPI_UNDEFINED) done = 3;
                else done += out;
                break;
            }
        }
        for (int i = 0; i < 3; i++) CHECK(rq[i] == MPI_REQUEST_NULL, "round %d: request %d not freed", round, i);
        verify(a, hcomm, what);
        verify(b, hcomm, what);
        verify(c, hcomm, what);
    }
    /* MPI_Request_free of an active request: the operation still completes; the communicator
     * goes on (a blocking collective orders after it on every path). */
    fill(a, 80);
    MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, comm, &a->req));
    MPI_CHECK(MPI_Request_free(&a->req));
    CHECK(a->req == MPI_REQUEST_NULL, "MPI_Request_free left the handle");
    /* queued after the freed one, so done after it: the wait also sees the freed one done */
    fill(b, 81);
    MPI_CHECK(issue(&b->c, NONBLOCKING, b->sbuf, b->rbuf, comm, &b->req));
    MPI_CHECK(MPI_Wait(&b->req, MPI_STATUS_IGNORE));
    verify(b, hcomm, "after MPI_Request_free");
    expect_calls(before, 2 + 4 * 3 + 2, what);
    /* `a` stays allocated: its freed request may deliver as late as MPI_Finalize (staged). */
    release(b);
    release(c);
}

#ifdef HAVE_COLL_INIT
/* Section 5: persistent collectives. */
static void persistent(MPI_Comm comm, MPI_Comm hcomm, int host0, const char *what)
{
    unsigned long long before = nccl_calls();
    struct run *a = prepare(K_ALLREDUCE, 8192, host0 && me == 0, 90), *b = prepare(K_BCAST, 12345, host0 && me == 0, 91);
    MPI_CHECK(issue(&a->c, PERSISTENT, a->sbuf, a->rbuf, comm, &a->req));
    MPI_CHECK(issue(&b->c, PERSISTENT, b->sbuf, b->rbuf, comm, &b->req));
    for (int round = 0; round < 3; round++) {
        fill(a, 100 + round), fill(b, 200 + round);
        if (round == 1) {
            MPI_Request rq[2] = {a->req, b->req};
            MPI_CHECK(MPI_Startall(2, rq));
            MPI_CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            CHECK(rq[0] == a->req && rq[1] == b->req, "%s: MPI_Waitall changed a persistent request", what);
        } else {
            MPI_CHECK(MPI_Start(&a->req));
            MPI_CHECK(MPI_Start(&b->req));
            int flag = 0;
            while (!flag) MPI_CHECK(MPI_Test(&b->req, &flag, MPI_STATUS_IGNORE));
            MPI_CHECK(MPI_Wait(&a->req, MPI_STATUS_IGNORE));
        }
        verify(a, hcomm, what);
        verify(b, hcomm, what);
    }
    MPI_CHECK(MPI_Request_free(&a->req));
    MPI_CHECK(MPI_Request_free(&b->req));
    expect_calls(before, host0 ? 0 : 6, what);
    release(a);
    release(b);
}
#endif

/* Section 7a: two communicators, opposite orders. */
static void two_comms(MPI_Comm hcomm)
{
    MPI_Comm x, y;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &x));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &y));
    agree(x, hcomm, 0, "two communicators: first agreement");
    agree(y, hcomm, 0, "two communicators: second agreement");
    unsigned long long before = nccl_calls();
    struct run *a = prepare(K_ALLREDUCE, 262147, 0, 5), *b = prepare(K_ALLREDUCE, 37, 0, 6);
    MPI_Request rq[2];
    if (me % 2) {
        MPI_CHECK(issue(&b->c, NONBLOCKING, b->sbuf, b->rbuf, y, &rq[1]));
        MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, x, &rq[0]));
    } else {
        MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, x, &rq[0]));
        MPI_CHECK(issue(&b->c, NONBLOCKING, b->sbuf, b->rbuf, y, &rq[1]));
    }
    MPI_CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    expect_calls(before, 2, "two communicators in opposite orders");
    verify(a, hcomm, "two communicators");
    verify(b, hcomm, "two communicators");
    release(a);
    release(b);
    MPI_Comm_free(&x);
    MPI_Comm_free(&y);
}

/* Section 7b: rank 0 sends 4 MiB of device memory to rank 1 and runs an Iallreduce before
 * waiting for the send; rank 1 runs the Iallreduce to its end first, then receives. */
static void between_send_and_wait(MPI_Comm comm, MPI_Comm hcomm)
{
    const size_t bytes = 4 << 20;
    unsigned char *want = pattern_new(bytes, 0, 17), *got = xmalloc(bytes);
    void *d = mem_alloc(MEM_DEVICE, bytes);
    struct run *a = prepare(K_ALLREDUCE, 65536, 0, 7);
    MPI_Request s = MPI_REQUEST_NULL;
    if (me == 0) {
        mem_put(d, want, bytes);
        MPI_CHECK(MPI_Isend(d, (int)bytes, MPI_BYTE, 1, 5, comm, &s));
    }
    MPI_CHECK(issue(&a->c, NONBLOCKING, a->sbuf, a->rbuf, comm, &a->req));
    MPI_CHECK(MPI_Wait(&a->req, MPI_STATUS_IGNORE));
    if (me == 0) MPI_CHECK(MPI_Wait(&s, MPI_STATUS_IGNORE));
    if (me == 1) {
        mem_poison(d, bytes);
        MPI_CHECK(MPI_Recv(d, (int)bytes, MPI_BYTE, 0, 5, comm, MPI_STATUS_IGNORE));
        mem_get(got, d, bytes);
        check_bytes(got, want, bytes, "device message around an Iallreduce");
    }
    verify(a, hcomm, "Iallreduce between a send and its wait");
    release(a);
    mem_free(d);
    free(want);
    free(got);
}

static void section(const char *what)
{
    if (getenv("COLL_DEBUG") && t_rank == 0) note("section: %s", what);
}

/* Section 8. */
static void schedule(MPI_Comm hcomm)
{
    MPI_Comm z;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &z));
    static const struct { int host0, calls; const char *what; } steps[] = {
        {0, 1, "agreement 1"}, {0, 1, "agreement 2"}, {0, 1, "agreement 3"}, {0, 1, "agreement 4"},
        {0, 1, "agreement 5"}, {0, 1, "agreement 6"}, {0, 1, "agreement 7"}, {0, 1, "agreement 8"},
        {0, 1, "agreement 9"},
        {1, 1, "in the gap after 9 agreements, rank 0 on the host"},
        {0, 1, "the agreement after the gap"},
        {1, 0, "rank 0 on the host after the streak started afresh"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        unsigned long long before = nccl_calls();
        struct run *r = prepare(K_ALLREDUCE, 30000, steps[i].host0 && me == 0, 300 + (int)i);
        MPI_CHECK(issue(&r->c, BLOCKING, r->sbuf, r->rbuf, z, NULL));
        verify(r, hcomm, steps[i].what);
        expect_calls(before, (unsigned long long)steps[i].calls, steps[i].what);
        release(r);
    }
    MPI_Comm_free(&z);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    g_get = stats_lookup();
    g_nccl = strcmp(t_env("CMTEST_MODE", ""), "nccl") == 0 && g_get;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm comm, hcomm;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &hcomm));

    /* 1. no agreement yet: staged */
    section("1 before any agreement");
    unsigned long long before = nccl_calls();
    struct run *r = prepare(K_ALLREDUCE, 50000, 0, 3);
    MPI_CHECK(issue(&r->c, NONBLOCKING, r->sbuf, r->rbuf, comm, &r->req));
    MPI_CHECK(MPI_Wait(&r->req, MPI_STATUS_IGNORE));
    verify(r, hcomm, "before any agreement");
    release(r);
    expect_calls(before, 0, "Iallreduce before any agreement");

    /* 2. every kind on NCCL after an agreement that chose it */
    section("2 every kind");
    agree(comm, hcomm, 0, "agreement on NCCL");
    all_kinds(comm, hcomm, 0, 1, "device buffers");
    /* 3. */
    section("3 completion calls");
    completions(comm, hcomm);
    /* 4. rank 0 on the host: still NCCL everywhere */
    section("4 rank 0 on the host");
    all_kinds(comm, hcomm, 1, 1, "rank 0 with host buffers");
#ifdef HAVE_COLL_INIT
    /* 5. */
    section("5 persistent");
    persistent(comm, hcomm, 0, "persistent, device buffers");
    persistent(comm, hcomm, 1, "persistent, rank 0 on the host");
#endif
    /* 6. back to staging */
    section("6 back to staging");
    agree(comm, hcomm, 1, "agreement on staging");
    all_kinds(comm, hcomm, 0, 0, "after an agreement on staging");
    /* 7. */
    section("7 two communicators, send and wait");
    two_comms(hcomm);
    agree(comm, hcomm, 0, "agreement on NCCL again");
    between_send_and_wait(comm, hcomm);
    section("8 the schedule of blocking reductions");
    schedule(hcomm);

    MPI_Comm_free(&comm);
    MPI_Comm_free(&hcomm);
    return report_and_finalize();
}
