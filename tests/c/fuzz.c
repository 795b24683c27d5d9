// cudampi-test: ranks=2 without-shim=skip nccl=yes timeout=240
/* Random calls, each made twice: once on host buffers (the oracle) and once with device buffers
 * holding the same bytes, under MPI_ERRORS_RETURN. Both runs must return the same error class
 * from every call and, where every call succeeded, leave the same bytes in every buffer (send
 * buffers included) and the same statuses; receive buffers start poisoned, device buffers are
 * surrounded by poisoned guard bytes that must stay intact, and cudampi prints nothing where the
 * host run succeeded. Each case is one of:
 *
 *   p2p       MPI_Send/Ssend/Bsend, MPI_Isend/Issend/Ibsend + MPI_Wait, MPI_Send_init +
 *             MPI_Start, matched by MPI_Recv, MPI_Irecv, MPI_Recv_init, MPI_Probe or MPI_Iprobe +
 *             MPI_Recv, MPI_Mprobe + MPI_Mrecv, MPI_Improbe + MPI_Imrecv; MPI_PROC_NULL,
 *             MPI_ANY_SOURCE, MPI_ANY_TAG, truncation
 *   sendrecv  MPI_Sendrecv, MPI_Sendrecv_replace, MPI_Isendrecv(_replace) in both directions,
 *             each direction active or MPI_PROC_NULL
 *   coll      the intracommunicator collectives with buffers (not the neighbor ones), blocking,
 *             nonblocking and persistent (MPI-4), MPI_IN_PLACE where allowed, v and w forms,
 *             reductions with predefined ops, MPI_Reduce_local
 *   pack      bytes MPI_Pack'ed on the host sent and received as MPI_PACKED from and into
 *             device memory, MPI_Unpack'ed on the host
 *
 * with counts 0, small, medium (tens of KiB) and, where the call is rejected or goes to
 * MPI_PROC_NULL, negative or huge; predefined and derived (contiguous, vector, indexed, struct,
 * resized) datatypes; buffers in device, stream-ordered pool, managed or host memory, NULL or
 * MPI_IN_PLACE. A fifth to a quarter of the cases carry one invalid argument (negative count,
 * MPI_DATATYPE_NULL, an uncommitted datatype, a rank out of range or MPI_ANY_SOURCE as a
 * destination, a negative tag, NULL with a positive count, a root out of range, MPI_OP_NULL,
 * an op undefined for the type, the same buffer as send and receive buffer): only arguments
 * every MPI here rejects locally, on the rank(s) that make the call, and the peer makes no
 * matching call; collectives carry it on both ranks.
 *
 * Both ranks draw every case from the same generator, so their calls pair up. The host run and
 * the device run use communicators of their own; a message left over in either is reported.
 * One difference is expected: a huge count with an invalid rank or root over a device buffer
 * reaches past the allocation, which cudampi refuses (MPI_ERR_BUFFER, one `cudampi` line)
 * before the library sees the other argument; host memory has no such check. An in-place
 * reduce-scatter is compared on its result only (`defined`). In mode nccl (a GPU per rank, NCCL
 * at every size) the nonblocking collectives follow the last agreement onto NCCL whatever
 * their buffers and datatypes: the cases test what such a call does with gaps, host memory
 * and invalid arguments there. What the plain
 * MPIs crash, hang or vary on with host memory is left out where it is drawn, with the reason.
 *
 * Environment: CUDAMPI_FUZZ_SEED (default 1, so that make test runs the same cases each time;
 * "clock" draws one from the clock on rank 0, printed),
 * CUDAMPI_FUZZ_CASES (default 2000: a second or two on the stand-in), CUDAMPI_FUZZ_ONLY=N (run case N only: the generator of a
 * case depends on the seed and N alone), CUDAMPI_FUZZ_FIRST=N (start at case N),
 * CUDAMPI_FUZZ_VERBOSE=1 (a note per case and call).
 * Device runs need the shim: without it (or with CUDAMPI_TEST_MEM=host) both runs use host
 * memory, which checks the oracle's own logic on a plain MPI. */
#include "common.h"
#include <fcntl.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#define GUARD 64
#define MAXB 4
#define HUGE_COUNT (INT_MAX / 4)

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_COLL_INIT 1
#endif

static MPI_Comm comms[2]; /* the host run's, the device run's */
static int peer, have_init, have_isendrecv, verbose, is_mpich, is_mpich40, is_ompi;
static unsigned long long seed;

/* ---- the generator: one stream per case, the same on both ranks --------------------------- */

static uint64_t rng;
static uint64_t rnd(void) { return t_mix64(rng++ ^ 0x5DEECE66Dull); }
static int pick(int n) { return (int)(rnd() % (uint64_t)n); }
static int chance(int pct) { return pick(100) < pct; }

/* ---- datatypes ----------------------------------------------------------------------------- */

enum { TY_INT, TY_DOUBLE, TY_CHAR, TY_BYTE, TY_CONTIG, TY_VECTOR, TY_INDEXED, TY_STRUCT,
       TY_RESIZED, TY_GOOD, TY_NULL = TY_GOOD, TY_UNCOMMITTED, TY_ALL };
struct ftype {
    MPI_Datatype t;
    const char *name;
    MPI_Aint extent, true_lb, true_extent;
    int reducible; /* by MPI_SUM etc.: made of MPI_INT or MPI_DOUBLE alone */
    int integer;   /* ... and by MPI_BAND etc. */
};
static struct ftype types[TY_ALL];

static void types_init(void)
{
    MPI_Datatype t;
    types[TY_INT] = (struct ftype){MPI_INT, "int", 0, 0, 0, 1, 1};
    types[TY_DOUBLE] = (struct ftype){MPI_DOUBLE, "double", 0, 0, 0, 1, 0};
    types[TY_CHAR] = (struct ftype){MPI_CHAR, "char", 0, 0, 0, 0, 0};
    types[TY_BYTE] = (struct ftype){MPI_BYTE, "byte", 0, 0, 0, 0, 0};
    MPI_Type_contiguous(3, MPI_INT, &t);
    types[TY_CONTIG] = (struct ftype){t, "contig(3 int)", 0, 0, 0, 1, 1};
    MPI_Type_vector(3, 2, 3, MPI_INT, &t);
    types[TY_VECTOR] = (struct ftype){t, "vector(3x2/3 int)", 0, 0, 0, 0, 0};
    int bl[3] = {2, 1, 3}, dp[3] = {0, 3, 5};
    MPI_Type_indexed(3, bl, dp, MPI_INT, &t);
    types[TY_INDEXED] = (struct ftype){t, "indexed(2,1,3 int)", 0, 0, 0, 0, 0};
    int sl[3] = {1, 1, 2};
    MPI_Aint sd[3] = {0, 8, 20};
    MPI_Datatype st[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT};
    MPI_Type_create_struct(3, sl, sd, st, &t);
    types[TY_STRUCT] = (struct ftype){t, "struct(char,double,2 short)", 0, 0, 0, 0, 0};
    MPI_Datatype r;
    MPI_Type_create_resized(MPI_INT, 0, 12, &r);
    types[TY_RESIZED] = (struct ftype){r, "int resized to 12", 0, 0, 0, 0, 0};
    for (int i = TY_CONTIG; i < TY_GOOD; i++) MPI_Type_commit(&types[i].t);
    types[TY_NULL] = (struct ftype){MPI_DATATYPE_NULL, "MPI_DATATYPE_NULL", 0, 0, 0, 0, 0};
    MPI_Type_vector(2, 1, 2, MPI_INT, &t);
    types[TY_UNCOMMITTED] = (struct ftype){t, "an uncommitted vector", 0, 0, 0, 0, 0};
    for (int i = 0; i < TY_ALL; i++) {
        MPI_Aint lb;
        if (i == TY_NULL) {
            types[i].extent = types[i].true_extent = 4;
            continue;
        }
        MPI_Type_get_extent(types[i].t, &lb, &types[i].extent);
        MPI_Type_get_true_extent(types[i].t, &types[i].true_lb, &types[i].true_extent);
    }
}

/* Bytes that `count` elements of type `ty` span from the buffer's start (0 for none). */
static size_t span(long long count, int ty)
{
    if (count <= 0 || count > HUGE_COUNT / 2) return 0;
    const struct ftype *f = &types[ty];
    return (size_t)(f->true_lb + (count - 1) * f->extent + f->true_extent);
}

static long long small_count(void)
{
    int r = pick(100);
    if (r < 10) return 0;
    if (r < 85) return 1 + pick(12);
    return 200 + pick(1800); /* tens of KiB: past the eager limits, into chunks */
}

/* ---- buffers ------------------------------------------------------------------------------- */

enum { BK_NULL = MEM_NKINDS, BK_INPLACE, BK_NONE };
enum { FILL_POISON, FILL_PATTERN };

struct fbuf {
    int kind;   /* memory kind of the device run (MEM_*), or BK_* */
    size_t n;   /* bytes the call may touch */
    int fill;
    char *base; /* GUARD, n bytes, GUARD */
    void *p;
};

struct outcome {
    int n;
    const char *name[8];
    int cls[8];
    int nst;
    MPI_Status st[4];
    MPI_Datatype stdt[4];
    unsigned char *snap[MAXB];
    int lines; /* cudampi lines on stderr */
};

static void rec_status(struct outcome *o, const MPI_Status *st, MPI_Datatype dt)
{
    if (o->nst < 4) {
        o->st[o->nst] = *st;
        o->stdt[o->nst] = dt;
    }
    o->nst++;
}

static int rec(struct outcome *o, const char *name, int rc)
{
    if (o->n < 8) {
        o->name[o->n] = name;
        o->cls[o->n] = error_class(rc);
    }
    o->n++;
    return rc;
}

/* Drawn for both ranks (the generator stays in step), this rank's returned. */
static int memory_kind_for_device_run(void)
{
    int k[2];
    for (int i = 0; i < 2; i++) {
        int r = pick(100);
        k[i] = r < 60 ? MEM_DEVICE : r < 75 ? MEM_POOL : r < 85 ? MEM_MANAGED : MEM_HOST;
    }
    return k[t_rank & 1];
}

static const char *bk_name(int k)
{
    return k == BK_NULL ? "NULL" : k == BK_INPLACE ? "IN_PLACE" : k == BK_NONE ? "-" : mem_kind_name(k);
}

static void buf_alloc(struct fbuf *b, int device_run, int rank, int seed_)
{
    b->base = NULL;
    b->p = b->kind == BK_NULL ? NULL : b->kind == BK_INPLACE ? MPI_IN_PLACE : NULL;
    if (b->kind >= MEM_NKINDS) return;
    int kind = device_run && !host_mode() && shim_loaded() ? b->kind : MEM_HOST;
    size_t all = b->n + 2 * GUARD;
    b->base = (char *)mem_alloc(kind, all);
    b->p = b->base + GUARD;
    unsigned char *h = (unsigned char *)xmalloc(all);
    poison_fill(h, all);
    if (b->fill == FILL_PATTERN) pattern_fill(h + GUARD, b->n, rank, seed_);
    mem_put(b->base, h, all);
    free(h);
}

/* ---- stderr capture ------------------------------------------------------------------------ */

static int cap_fd = -1, cap_saved = -1;

static void capture_begin(void)
{
    char path[] = "/tmp/cudampi-fuzz-XXXXXX";
    fflush(stderr);
    cap_fd = mkstemp(path);
    if (cap_fd < 0) DIE("mkstemp: %s", strerror(errno));
    unlink(path);
    cap_saved = dup(2);
    dup2(cap_fd, 2);
}

/* Restores stderr, passes on what was captured and returns its lines that start "cudampi". */
static int capture_end(void)
{
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    off_t len = lseek(cap_fd, 0, SEEK_END);
    char *buf = (char *)xmalloc((size_t)len + 1);
    ssize_t got = pread(cap_fd, buf, (size_t)len, 0);
    close(cap_fd);
    buf[got > 0 ? got : 0] = 0;
    if (got > 0) fputs(buf, stderr);
    int lines = 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, "cudampi", 7) == 0) lines++;
    free(buf);
    return lines;
}

/* ---- cases --------------------------------------------------------------------------------- */

enum { FAM_P2P, FAM_SENDRECV, FAM_COLL, FAM_PACK };

/* invalid arguments */
enum { BAD_NONE, BAD_COUNT, BAD_TYPE_NULL, BAD_TYPE_UNCOMMITTED, BAD_RANK, BAD_ANY_DEST, BAD_TAG,
       BAD_NULLBUF, BAD_HUGE_RANK, BAD_ROOT, BAD_OP_NULL, BAD_OP_TYPE, BAD_ALIAS, BAD_N };
static const char *bad_name[BAD_N] = {"none", "negative count", "MPI_DATATYPE_NULL", "uncommitted datatype",
                                      "rank out of range", "MPI_ANY_SOURCE as destination",
                                      "negative tag", "NULL buffer with count > 0",
                                      "huge count and rank out of range", "root out of range",
                                      "MPI_OP_NULL", "op undefined for the type",
                                      "send buffer = receive buffer"};

enum { S_SEND, S_SSEND, S_BSEND, S_ISEND, S_ISSEND, S_IBSEND, S_SEND_INIT, S_N };
static const char *s_name[S_N] = {"MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Isend", "MPI_Issend", "MPI_Ibsend", "MPI_Send_init"};
enum { R_RECV, R_IRECV, R_RECV_INIT, R_PROBE, R_IPROBE, R_MPROBE, R_IMPROBE, R_N };
static const char *r_name[R_N] = {"MPI_Recv", "MPI_Irecv", "MPI_Recv_init", "MPI_Probe+MPI_Recv", "MPI_Iprobe+MPI_Recv",
                                  "MPI_Mprobe+MPI_Mrecv", "MPI_Improbe+MPI_Imrecv"};
enum { SR_SENDRECV, SR_REPLACE, SR_ISENDRECV, SR_IREPLACE, SR_N };
static const char *sr_name[SR_N] = {"MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Isendrecv", "MPI_Isendrecv_replace"};
enum { C_BCAST, C_REDUCE, C_ALLREDUCE, C_REDUCE_LOCAL, C_SCAN, C_EXSCAN, C_RSB, C_RS, C_GATHER,
       C_GATHERV, C_SCATTER, C_SCATTERV, C_ALLGATHER, C_ALLGATHERV, C_ALLTOALL, C_ALLTOALLV,
       C_ALLTOALLW, C_N };
static const char *c_name[C_N] = {"Bcast", "Reduce", "Allreduce", "Reduce_local", "Scan", "Exscan",
                                  "Reduce_scatter_block", "Reduce_scatter", "Gather", "Gatherv",
                                  "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
                                  "Alltoallv", "Alltoallw"};
#define NOPS 7
static MPI_Op op_handle(int i)
{
    MPI_Op ops[NOPS] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR};
    return ops[i];
}
static const char *op_names[NOPS] = {"SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "BXOR"};

struct fcase {
    int idx, fam, op, mode, bad, bad_side;
    char desc[400];
    struct fbuf b[MAXB];
    int nb;
    /* p2p: the sender's and receiver's calls; sendrecv: per rank */
    int sender, sop, rop, ty, rty, tag, rtag;
    long long cnt, rcnt;
    int dest, src;
    /* sendrecv: what rank r sends (count, active) */
    long long sr_cnt[2];
    int sr_active[2], sr_anysrc;
    /* coll */
    int root, inplace, opi;
    MPI_Op mop;
    int m[2][2];  /* counts: rank r sends m[r][j] to j (v and w forms) */
    int mt[2][2]; /* types of the w forms */
    int d[2];     /* element displacements of the v forms */
    int gap;      /* elements (v forms) or 8-byte words (w form) between blocks */
    int ignored_null;
    /* pack */
    int pk_count2, pk_ty2, pk_size;
};

static int ranks_bad(void) { return t_size + 1 + pick(5); }

/* ---- p2p ------------------------------------------------------------------------------------ */

static void gen_p2p(struct fcase *c)
{
    c->sender = pick(2);
    c->sop = pick(S_N);
    c->rop = pick(R_N);
    c->ty = pick(TY_GOOD);
    c->cnt = small_count();
    c->rcnt = chance(8) && c->cnt > 0 ? pick((int)c->cnt) : c->cnt + (chance(30) ? pick(5) : 0);
    /* MPICH 5.0: a buffered send of a few bytes into a receive of 0 elements is reported
     * truncated in some runs and not in others (host memory, no shim: 1 run in 10) */
    if (is_mpich && !is_mpich40 && (c->sop == S_BSEND || c->sop == S_IBSEND) && c->rcnt == 0) c->rcnt = c->cnt;
    c->tag = 100 + c->idx % 20000;
    c->rtag = chance(30) ? MPI_ANY_TAG : c->tag;
    int proc_null = chance(12);
    /* MPICH 4.0: a persistent collective hangs after a persistent send to MPI_PROC_NULL
     * (host memory) */
    if (is_mpich40 && c->sop == S_SEND_INIT) proc_null = 0;
    c->dest = proc_null ? MPI_PROC_NULL : 1 - c->sender;
    c->src = proc_null ? MPI_PROC_NULL : chance(30) ? MPI_ANY_SOURCE : c->sender;
    if (proc_null && chance(40)) c->cnt = c->rcnt = HUGE_COUNT; /* nothing is transferred */
    c->bad = BAD_NONE;
    if (chance(25)) {
        c->bad_side = pick(2); /* 0: the sender's call, 1: the receiver's */
        int probe = c->rop >= R_PROBE;
        static const int sbad[] = {BAD_COUNT, BAD_TYPE_NULL, BAD_TYPE_UNCOMMITTED, BAD_RANK,
                                   BAD_ANY_DEST, BAD_TAG, BAD_NULLBUF, BAD_HUGE_RANK};
        static const int rbad[] = {BAD_COUNT, BAD_TYPE_NULL, BAD_TYPE_UNCOMMITTED, BAD_RANK, BAD_TAG,
                                   BAD_NULLBUF, BAD_HUGE_RANK};
        static const int pbad[] = {BAD_RANK, BAD_TAG}; /* a probe's own arguments */
        c->bad = c->bad_side == 0 ? sbad[pick(8)] : probe ? pbad[pick(2)] : rbad[pick(7)];
        if (c->dest == MPI_PROC_NULL || c->cnt == HUGE_COUNT) { /* undo: one invalid argument */
            c->dest = 1 - c->sender;
            c->src = c->sender;
            c->cnt = c->rcnt = 1 + pick(8);
        }
        /* MPICH checks no datatype, buffer or tag of a call that moves nothing */
        if (c->cnt == 0) c->cnt = 1 + pick(8);
        c->rcnt = c->cnt;
        long long *cnt = c->bad_side ? &c->rcnt : &c->cnt;
        int *ty = c->bad_side ? &c->rty : &c->ty;
        c->rty = c->ty;
        switch (c->bad) {
        case BAD_COUNT: *cnt = -1 - pick(100); break;
        case BAD_TYPE_NULL: *ty = TY_NULL; break;
        case BAD_TYPE_UNCOMMITTED: *ty = TY_UNCOMMITTED; break;
        case BAD_RANK: *(c->bad_side ? &c->src : &c->dest) = ranks_bad(); break;
        case BAD_ANY_DEST: c->dest = MPI_ANY_SOURCE; break;
        case BAD_TAG:
            if (c->bad_side) c->rtag = -5 - pick(50);
            else c->tag = -1 - pick(50);
            break;
        case BAD_NULLBUF: /* Open MPI 5 refuses NULL for predefined datatypes only */
            c->ty = c->rty = pick(TY_CONTIG);
            break;
        case BAD_HUGE_RANK:
            *cnt = HUGE_COUNT;
            *(c->bad_side ? &c->src : &c->dest) = ranks_bad();
            break;
        }
    } else {
        c->rty = c->ty;
    }
    /* buffers: 0 the sender's, 1 the receiver's */
    int me_sends = t_rank == c->sender;
    c->nb = 2;
    c->b[0].kind = memory_kind_for_device_run();
    c->b[0].n = span(c->cnt, c->ty) + 8;
    c->b[0].fill = me_sends ? FILL_PATTERN : FILL_POISON;
    c->b[1].kind = memory_kind_for_device_run();
    /* Open MPI writes a truncated message past the posted count (host memory): room for
     * all of it */
    c->b[1].n = (c->bad ? span(c->rcnt, c->rty) : span(c->rcnt > c->cnt ? c->rcnt : c->cnt, c->rty)) + 8;
    c->b[1].fill = FILL_POISON;
    if (c->bad == BAD_NULLBUF) c->b[c->bad_side].kind = BK_NULL;
    else if (c->cnt == 0 && chance(30)) c->b[0].kind = BK_NULL;
    if (c->bad == BAD_NONE && c->rcnt == 0 && chance(30)) c->b[1].kind = BK_NULL;
    snprintf(c->desc, sizeof c->desc,
             "p2p rank %d %s(%s, %lld x %s, dest %d, tag %d) -> rank %d %s(%s, %lld x %s, source %d, tag %d), invalid: %s%s",
             c->sender, s_name[c->sop], bk_name(c->b[0].kind), c->cnt, types[c->ty].name, c->dest, c->tag,
             1 - c->sender, r_name[c->rop], bk_name(c->b[1].kind), c->rcnt, types[c->rty].name, c->src, c->rtag,
             bad_name[c->bad], c->bad ? (c->bad_side ? " (receiver)" : " (sender)") : "");
}

static void wait_rec(struct outcome *o, const char *name, int rc, MPI_Request *q, MPI_Datatype dt, int with_status)
{
    rec(o, name, rc);
    if (rc != MPI_SUCCESS) return;
    MPI_Status st;
    status_init(&st);
    rec(o, "MPI_Wait", MPI_Wait(q, with_status ? &st : MPI_STATUS_IGNORE));
    if (with_status) rec_status(o, &st, dt);
}

static void persistent_rec(struct outcome *o, const char *name, int rc, MPI_Request *q, MPI_Datatype dt, int with_status)
{
    rec(o, name, rc);
    if (rc != MPI_SUCCESS) return;
    if (rec(o, "MPI_Start", MPI_Start(q)) == MPI_SUCCESS) {
        MPI_Status st;
        status_init(&st);
        rec(o, "MPI_Wait", MPI_Wait(q, with_status ? &st : MPI_STATUS_IGNORE));
        if (with_status) rec_status(o, &st, dt);
    }
    if (*q != MPI_REQUEST_NULL) rec(o, "MPI_Request_free", MPI_Request_free(q));
}

static void run_p2p(struct fcase *c, MPI_Comm comm, struct outcome *o)
{
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Status st, pst;
    if (t_rank == c->sender) {
        if (c->bad && c->bad_side == 1) return; /* the receive is refused: nothing to match */
        MPI_Datatype t = types[c->ty].t;
        void *b = c->b[0].p;
        int n = (int)c->cnt;
        switch (c->sop) {
        case S_SEND: rec(o, "MPI_Send", MPI_Send(b, n, t, c->dest, c->tag, comm)); break;
        case S_SSEND: rec(o, "MPI_Ssend", MPI_Ssend(b, n, t, c->dest, c->tag, comm)); break;
        case S_BSEND: rec(o, "MPI_Bsend", MPI_Bsend(b, n, t, c->dest, c->tag, comm)); break;
        case S_ISEND: wait_rec(o, "MPI_Isend", MPI_Isend(b, n, t, c->dest, c->tag, comm, &q), &q, t, 0); break;
        case S_ISSEND: wait_rec(o, "MPI_Issend", MPI_Issend(b, n, t, c->dest, c->tag, comm, &q), &q, t, 0); break;
        case S_IBSEND: wait_rec(o, "MPI_Ibsend", MPI_Ibsend(b, n, t, c->dest, c->tag, comm, &q), &q, t, 0); break;
        case S_SEND_INIT:
            persistent_rec(o, "MPI_Send_init", MPI_Send_init(b, n, t, c->dest, c->tag, comm, &q), &q, t, 0);
            break;
        }
        return;
    }
    if (c->bad && c->bad_side == 0) return; /* the send is refused */
    MPI_Datatype t = types[c->rty].t;
    void *b = c->b[1].p;
    int n = (int)c->rcnt, flag = 0, rc;
    MPI_Message msg = MPI_MESSAGE_NULL;
    status_init(&st);
    status_init(&pst);
    switch (c->rop) {
    case R_RECV:
        if (rec(o, "MPI_Recv", MPI_Recv(b, n, t, c->src, c->rtag, comm, &st)) == MPI_SUCCESS) rec_status(o, &st, t);
        break;
    case R_IRECV: wait_rec(o, "MPI_Irecv", MPI_Irecv(b, n, t, c->src, c->rtag, comm, &q), &q, t, 1); break;
    case R_RECV_INIT:
        persistent_rec(o, "MPI_Recv_init", MPI_Recv_init(b, n, t, c->src, c->rtag, comm, &q), &q, t, 1);
        break;
    case R_PROBE:
    case R_IPROBE:
        if (c->rop == R_PROBE)
            rc = rec(o, "MPI_Probe", MPI_Probe(c->src, c->rtag, comm, &pst));
        else
            while ((rc = MPI_Iprobe(c->src, c->rtag, comm, &flag, &pst)) == MPI_SUCCESS && !flag) {
            }
        if (c->rop == R_IPROBE) rec(o, "MPI_Iprobe", rc);
        if (rc != MPI_SUCCESS) break;
        rec_status(o, &pst, t);
        if (rec(o, "MPI_Recv", MPI_Recv(b, n, t, pst.MPI_SOURCE, pst.MPI_TAG, comm, &st)) == MPI_SUCCESS)
            rec_status(o, &st, t);
        break;
    case R_MPROBE:
    case R_IMPROBE:
        if (c->rop == R_MPROBE)
            rc = rec(o, "MPI_Mprobe", MPI_Mprobe(c->src, c->rtag, comm, &msg, &pst));
        else
            while ((rc = MPI_Improbe(c->src, c->rtag, comm, &flag, &msg, &pst)) == MPI_SUCCESS && !flag) {
            }
        if (c->rop == R_IMPROBE) rec(o, "MPI_Improbe", rc);
        if (rc != MPI_SUCCESS) break;
        rec_status(o, &pst, t);
        if (c->rop == R_MPROBE) {
            if (rec(o, "MPI_Mrecv", MPI_Mrecv(b, n, t, &msg, &st)) == MPI_SUCCESS) rec_status(o, &st, t);
        } else {
            wait_rec(o, "MPI_Imrecv", MPI_Imrecv(b, n, t, &msg, &q), &q, t, 1);
        }
        break;
    }
}

/* ---- sendrecv ------------------------------------------------------------------------------- */

static void gen_sendrecv(struct fcase *c)
{
    c->op = pick(have_isendrecv ? SR_N : 2);
    c->ty = c->rty = pick(TY_GOOD);
    for (int r = 0; r < 2; r++) {
        c->sr_active[r] = !chance(15);
        c->sr_cnt[r] = small_count();
    }
    /* MPICH 5.0's MPI_Isendrecv_replace of a derived datatype delivers varying bytes (host
     * memory) */
    if (is_mpich && c->op == SR_IREPLACE) c->ty = c->rty = pick(TY_CONTIG);
    /* Open MPI's MPI_Sendrecv_replace writes a longer message past the buffer (host memory):
     * one count for both ranks */
    if (c->op == SR_REPLACE || c->op == SR_IREPLACE) c->sr_cnt[1] = c->sr_cnt[0];
    c->sr_anysrc = chance(30);
    /* MPICH 5.0: a buffered send of a few bytes into a receive of 0 elements is reported
     * truncated in some runs and not in others (host memory, no shim: 1 run in 10) */
    if (is_mpich && !is_mpich40 && (c->sop == S_BSEND || c->sop == S_IBSEND) && c->rcnt == 0) c->rcnt = c->cnt;
    c->tag = 100 + c->idx % 20000;
    c->rtag = chance(30) ? MPI_ANY_TAG : c->tag;
    /* a receive expects what the peer sends, sometimes more, sometimes less (truncation) */
    c->rcnt = chance(8) ? -2 : chance(30) ? 3 : 0; /* added to the peer's count */
    /* Open MPI 5's MPI_Isendrecv reports no truncation (host memory: the message is written
     * past the posted count and the call succeeds) */
    if (is_ompi && c->op >= SR_ISENDRECV && c->rcnt < 0) c->rcnt = 0;
    c->bad = BAD_NONE;
    if (chance(20)) { /* on both ranks: each refuses its call before sending */
        static const int bads[] = {BAD_COUNT, BAD_TYPE_NULL, BAD_TYPE_UNCOMMITTED, BAD_RANK, BAD_TAG, BAD_NULLBUF};
        int replace = c->op == SR_REPLACE || c->op == SR_IREPLACE;
        /* Open MPI's MPI_Sendrecv_replace does not check its buffer against NULL (it crashes) */
        c->bad = bads[pick(replace ? 5 : 6)];
        c->bad_side = pick(2); /* 0: the send arguments, 1: the receive arguments */
        c->sr_active[0] = c->sr_active[1] = 1;
        for (int r = 0; r < 2; r++)
            if (c->sr_cnt[r] == 0) c->sr_cnt[r] = 1 + pick(8);
        if (c->op == SR_REPLACE || c->op == SR_IREPLACE) c->bad_side = c->bad == BAD_RANK || c->bad == BAD_TAG ? c->bad_side : 0;
        switch (c->bad) {
        case BAD_COUNT: c->sr_cnt[0] = c->sr_cnt[1] = -1 - pick(9); break;
        case BAD_TYPE_NULL: (c->bad_side ? &c->rty : &c->ty)[0] = TY_NULL; break;
        case BAD_TYPE_UNCOMMITTED: (c->bad_side ? &c->rty : &c->ty)[0] = TY_UNCOMMITTED; break;
        case BAD_RANK: break;
        case BAD_TAG:
            if (c->bad_side) c->rtag = -5 - pick(9);
            else c->tag = -1 - pick(9);
            break;
        case BAD_NULLBUF: c->ty = c->rty = pick(TY_CONTIG); break;
        }
        if (c->op == SR_REPLACE || c->op == SR_IREPLACE) c->rty = c->ty;
        c->rcnt = 0;
    }
    long long mine = c->sr_cnt[t_rank], in = c->sr_cnt[peer];
    long long rcount = c->bad == BAD_COUNT ? mine : in + c->rcnt < 0 ? 0 : in + c->rcnt;
    c->cnt = mine;
    int replace = c->op == SR_REPLACE || c->op == SR_IREPLACE;
    if (replace) rcount = mine; /* one buffer, one count */
    c->nb = replace ? 1 : 2;
    c->b[0].kind = memory_kind_for_device_run();
    c->b[0].n = (span(mine, c->ty) > span(rcount, c->rty) ? span(mine, c->ty) : span(rcount, c->rty)) + 8;
    c->b[0].fill = FILL_PATTERN;
    c->b[1].kind = memory_kind_for_device_run();
    c->b[1].n = span(rcount > in ? rcount : in, c->rty) + 8; /* room for a truncated message */
    c->b[1].fill = FILL_POISON;
    c->rcnt = rcount;
    if (c->bad == BAD_NULLBUF) c->b[replace ? 0 : c->bad_side].kind = BK_NULL;
    snprintf(c->desc, sizeof c->desc,
             "sendrecv %s, rank 0 sends %lld%s, rank 1 sends %lld%s, of %s / receives %s, "
             "count adjust %s, source %s, tag %d/%d, buffers %s %s, invalid: %s%s",
             sr_name[c->op], c->sr_cnt[0], c->sr_active[0] ? "" : " to MPI_PROC_NULL", c->sr_cnt[1],
             c->sr_active[1] ? "" : " to MPI_PROC_NULL", types[c->ty].name, types[c->rty].name,
             c->rcnt == mine ? "=" : "+", c->sr_anysrc ? "any" : "peer", c->tag, c->rtag,
             bk_name(c->b[0].kind), replace ? "" : bk_name(c->b[1].kind), bad_name[c->bad],
             c->bad ? (c->bad_side ? " (receive side)" : " (send side)") : "");
}

static void run_sendrecv(struct fcase *c, MPI_Comm comm, struct outcome *o)
{
    int dest = c->sr_active[t_rank] ? peer : MPI_PROC_NULL;
    int src = c->sr_active[peer] ? (c->sr_anysrc ? MPI_ANY_SOURCE : peer) : MPI_PROC_NULL;
    if (c->bad == BAD_RANK) {
        if (c->bad_side) src = t_size + 3;
        else dest = t_size + 3;
    }
    MPI_Datatype st_ = types[c->ty].t, rt = types[c->rty].t;
    int sn = (int)c->cnt, rn = (int)c->rcnt;
    MPI_Status st;
    MPI_Request q = MPI_REQUEST_NULL;
    status_init(&st);
    switch (c->op) {
    case SR_SENDRECV:
        if (rec(o, "MPI_Sendrecv", MPI_Sendrecv(c->b[0].p, sn, st_, dest, c->tag, c->b[1].p, rn, rt, src, c->rtag, comm, &st)) == MPI_SUCCESS)
            rec_status(o, &st, rt);
        break;
    case SR_REPLACE:
        if (rec(o, "MPI_Sendrecv_replace", MPI_Sendrecv_replace(c->b[0].p, sn, st_, dest, c->tag, src, c->rtag, comm, &st)) == MPI_SUCCESS)
            rec_status(o, &st, rt);
        break;
#ifdef HAVE_ISENDRECV
    case SR_ISENDRECV:
        wait_rec(o, "MPI_Isendrecv", MPI_Isendrecv(c->b[0].p, sn, st_, dest, c->tag, c->b[1].p, rn, rt, src, c->rtag, comm, &q), &q, rt, 0);
        break;
    case SR_IREPLACE:
        wait_rec(o, "MPI_Isendrecv_replace", MPI_Isendrecv_replace(c->b[0].p, sn, st_, dest, c->tag, src, c->rtag, comm, &q), &q, rt, 0);
        break;
#endif
    }
    (void)q;
}

/* ---- collectives ---------------------------------------------------------------------------- */

static int coll_rooted(int op)
{
    return op == C_BCAST || op == C_REDUCE || op == C_GATHER || op == C_GATHERV || op == C_SCATTER || op == C_SCATTERV;
}
static int coll_reduces(int op)
{
    return op == C_REDUCE || op == C_ALLREDUCE || op == C_REDUCE_LOCAL || op == C_SCAN || op == C_EXSCAN ||
           op == C_RSB || op == C_RS;
}
static int coll_inplace_ok(int op) { return op != C_BCAST && op != C_REDUCE_LOCAL; }

/* Per-rank layout of a collective: send buffer b[0], receive buffer b[1]. */
static void gen_coll(struct fcase *c)
{
    c->op = pick(C_N);
    c->mode = c->op == C_REDUCE_LOCAL ? 0 : pick(have_init ? 3 : 2);
    c->root = pick(2);
    c->opi = 0;
    if (coll_reduces(c->op)) {
        static const int red[] = {TY_INT, TY_DOUBLE, TY_CONTIG};
        c->ty = red[pick(3)];
        c->opi = pick(types[c->ty].integer ? NOPS : 4);
    } else {
        c->ty = pick(TY_GOOD);
    }
    c->mop = op_handle(c->opi);
    c->cnt = small_count();
    c->inplace = coll_inplace_ok(c->op) && chance(25);
    /* MPICH 4.0: in-place MPI_Reduce at a root other than 0 segfaults on host buffers; its
     * in-place MPI_Ialltoallw / MPI_Alltoallw_init deliver wrong bytes; its Gather_init,
     * Scatter_init and Allgather_init deliver stale data. */
    if (is_mpich40 && c->inplace && c->op == C_REDUCE) c->root = 0;
    if (is_mpich40 && c->inplace && c->op == C_ALLTOALLW && c->mode) c->inplace = 0;
    /* Open MPI's (libnbc) in-place MPI_Ialltoallv/w leave a later collective hanging */
    if (is_ompi && c->inplace && (c->op == C_ALLTOALLV || c->op == C_ALLTOALLW) && c->mode) c->inplace = 0;
    if (is_mpich40 && c->mode == 2 && (c->op == C_GATHER || c->op == C_SCATTER || c->op == C_ALLGATHER)) c->mode = 1;
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 2; j++) {
            c->m[r][j] = (int)(chance(50) ? c->cnt : small_count());
            c->mt[r][j] = pick(TY_GOOD);
        }
    if (c->inplace) /* in place, what j sends to r and r to j share one block */
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < r; j++) {
                c->m[r][j] = c->m[j][r];
                c->mt[r][j] = c->mt[j][r];
            }
    c->bad = BAD_NONE;
    if (chance(20)) {
        int choices[8], nc = 0;
        /* MPICH does not check the count of a reduction: a negative one crashes it */
        if (!(is_mpich && coll_reduces(c->op))) choices[nc++] = BAD_COUNT;
        /* MPICH 5.0 asserts on a reduction of MPI_DATATYPE_NULL */
        if (!(is_mpich && !is_mpich40 && coll_reduces(c->op))) choices[nc++] = BAD_TYPE_NULL;
        /* Open MPI checks the receive type of a scatter, gather and the like for
         * MPI_DATATYPE_NULL but not for being committed (rank 0 then crashes) */
        if (coll_reduces(c->op) || c->op == C_BCAST) choices[nc++] = BAD_TYPE_UNCOMMITTED;
        if (coll_rooted(c->op)) choices[nc++] = BAD_ROOT;
        if (coll_reduces(c->op)) {
            choices[nc++] = BAD_OP_NULL;
            if (!types[c->ty].integer) choices[nc++] = BAD_OP_TYPE;
        }
        /* the one collective every MPI here refuses aliased buffers for (Open MPI's alltoall
         * forms, for one, run with them and overwrite the data they still have to send) */
        if (c->op == C_ALLREDUCE) choices[nc++] = BAD_ALIAS;
        c->bad = choices[pick(nc)];
        if (c->cnt == 0) c->cnt = 1 + pick(8);
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 2; j++)
                if (c->m[r][j] == 0) c->m[r][j] = 1;
        c->inplace = 0;
        switch (c->bad) {
        case BAD_COUNT:
            c->cnt = -1 - pick(9);
            for (int r = 0; r < 2; r++)
                for (int j = 0; j < 2; j++) c->m[r][j] = (int)c->cnt;
            break;
        case BAD_TYPE_NULL:
        case BAD_TYPE_UNCOMMITTED:
            c->ty = c->bad == BAD_TYPE_NULL ? TY_NULL : TY_UNCOMMITTED;
            for (int r = 0; r < 2; r++)
                for (int j = 0; j < 2; j++) c->mt[r][j] = c->ty;
            break;
        case BAD_ROOT:
            c->root = ranks_bad();
            if (chance(30)) c->cnt = HUGE_COUNT;
            break;
        case BAD_OP_NULL: c->mop = MPI_OP_NULL; break;
        case BAD_OP_TYPE: c->mop = MPI_BAND; break;
        }
    }
    int gap = c->gap = pick(3);
    int first = pick(2); /* which rank's block comes first in the v forms */
    long long n = c->cnt;
    int me = t_rank, is_root = me == c->root;
    size_t s = 0, r = 0;
    int sfill = FILL_PATTERN;
    size_t one = span(n, c->ty), two = span(2 * n, c->ty);
    /* Gatherv etc.: at rank me, the v-counts are c->m[j][...] as laid out below */
    switch (c->op) {
    case C_BCAST: s = one; sfill = is_root ? FILL_PATTERN : FILL_POISON; break;
    case C_REDUCE: case C_ALLREDUCE: case C_SCAN: case C_EXSCAN: s = r = one; break;
    case C_REDUCE_LOCAL: s = r = one; break;
    case C_RSB: s = two; r = c->inplace ? two : one; break;
    case C_RS: {
        /* recvcounts: m[0][0], m[0][1] on every rank */
        long long tot = (long long)(c->m[0][0] > 0 ? c->m[0][0] : 0) + (c->m[0][1] > 0 ? c->m[0][1] : 0);
        s = span(tot, c->ty);
        r = c->inplace ? s : span(c->m[0][me], c->ty);
        break;
    }
    case C_GATHER: s = one; r = two; break;
    case C_SCATTER: s = two; r = one; break;
    case C_ALLGATHER: s = one; r = two; break;
    case C_ALLTOALL: s = r = two; break;
    case C_GATHERV: case C_ALLGATHERV: {
        /* rank j contributes m[j][0]; blocks at d[j] (both per rank j) */
        int a = c->m[0][0] > 0 ? c->m[0][0] : 0, b = c->m[1][0] > 0 ? c->m[1][0] : 0;
        c->d[first] = 0;
        c->d[1 - first] = (first == 0 ? a : b) + gap;
        long long end0 = c->d[0] + a, end1 = c->d[1] + b;
        s = span(c->m[me][0], c->ty);
        r = span(end0 > end1 ? end0 : end1, c->ty);
        break;
    }
    case C_SCATTERV: {
        int a = c->m[0][0] > 0 ? c->m[0][0] : 0, b = c->m[1][0] > 0 ? c->m[1][0] : 0;
        c->d[first] = 0;
        c->d[1 - first] = (first == 0 ? a : b) + gap;
        long long end0 = c->d[0] + a, end1 = c->d[1] + b;
        s = span(end0 > end1 ? end0 : end1, c->ty);
        r = span(c->m[me][0], c->ty);
        break;
    }
    case C_ALLTOALLV: {
        /* sends m[me][j] at sd[j]; receives m[j][me] at rd[j]: blocks in order, gap between */
        long long so = 0, ro = 0;
        for (int j = 0; j < 2; j++) {
            so += (c->m[me][j] > 0 ? c->m[me][j] : 0) + gap;
            ro += (c->m[j][me] > 0 ? c->m[j][me] : 0) + gap;
        }
        s = span(so, c->ty);
        r = span(ro, c->ty);
        if (c->inplace) s = r;
        break;
    }
    case C_ALLTOALLW: {
        size_t so = 0, ro = 0;
        for (int j = 0; j < 2; j++) {
            so += (span(c->m[me][j], c->mt[me][j]) + 8 * gap + 7) / 8 * 8;
            ro += (span(c->m[j][me], c->mt[j][me]) + 8 * gap + 7) / 8 * 8;
        }
        s = so;
        r = ro;
        break;
    }
    }
    c->nb = 2;
    c->b[0].kind = memory_kind_for_device_run();
    c->b[0].n = s + 8;
    c->b[0].fill = sfill;
    c->b[1].kind = memory_kind_for_device_run();
    c->b[1].n = r + 8;
    c->b[1].fill = c->op == C_REDUCE_LOCAL ? FILL_PATTERN : FILL_POISON;
    c->ignored_null = 0;
    if (c->inplace) {
        /* the receive buffer holds this rank's contribution */
        int scatter = c->op == C_SCATTER || c->op == C_SCATTERV;
        if (scatter) {
            if (is_root) c->b[1].kind = BK_INPLACE;
        } else if (!coll_rooted(c->op) || is_root) {
            c->b[0].kind = BK_INPLACE;
            c->b[1].fill = FILL_PATTERN;
        }
    } else if (c->bad == BAD_NONE && chance(20)) {
        /* an insignificant buffer passed as NULL */
        if ((c->op == C_REDUCE || c->op == C_GATHER || c->op == C_GATHERV) && !is_root) c->b[1].kind = BK_NULL, c->ignored_null = 1;
        if ((c->op == C_SCATTER || c->op == C_SCATTERV) && !is_root) c->b[0].kind = BK_NULL, c->ignored_null = 1;
    }
    if (c->bad == BAD_ALIAS) c->b[1].kind = BK_NONE, c->b[0].n = (s > r ? s : r) + 8;
    char mt[64] = "", name[48];
    if (c->op == C_ALLTOALLW)
        snprintf(mt, sizeof mt, ", types %d,%d,%d,%d", c->mt[0][0], c->mt[0][1], c->mt[1][0], c->mt[1][1]);
    snprintf(name, sizeof name, "%s%s%s", c->mode == 1 ? "I" : "", c_name[c->op], c->mode == 2 ? "_init" : "");
    if (c->mode == 1) name[1] = (char)(name[1] | 0x20); /* Ibcast, Iallreduce, ... */
    snprintf(c->desc, sizeof c->desc,
             "coll MPI_%s(%lld x %s, counts %d,%d,%d,%d%s, gap %d, root %d, op %s, %s%s -> %s), invalid: %s",
             name, c->cnt, types[c->ty].name, c->m[0][0], c->m[0][1], c->m[1][0], c->m[1][1], mt, c->gap,
             c->root, c->bad == BAD_OP_NULL ? "NULL" : c->bad == BAD_OP_TYPE ? "BAND" : op_names[c->opi],
             c->inplace ? "in place, " : "", bk_name(c->b[0].kind), bk_name(c->b[1].kind), bad_name[c->bad]);
}

/* Blocking, nonblocking + MPI_Wait, or persistent init + MPI_Start + MPI_Wait + free. */
#ifdef HAVE_COLL_INIT
#define COLL(o, mode, NAME, INAME, ...)                                                           \
    ((mode) == 0   ? (void)rec(o, "MPI_" #NAME, MPI_##NAME(__VA_ARGS__, comm))                    \
     : (mode) == 1 ? wait_rec(o, "MPI_" #INAME, MPI_##INAME(__VA_ARGS__, comm, &q), &q, MPI_INT, 0) \
                   : persistent_rec(o, "MPI_" #NAME "_init",                                      \
                                    MPI_##NAME##_init(__VA_ARGS__, comm, MPI_INFO_NULL, &q), &q, MPI_INT, 0))
#else
#define COLL(o, mode, NAME, INAME, ...)                                                           \
    ((mode) == 0 ? (void)rec(o, "MPI_" #NAME, MPI_##NAME(__VA_ARGS__, comm))                      \
                 : wait_rec(o, "MPI_" #INAME, MPI_##INAME(__VA_ARGS__, comm, &q), &q, MPI_INT, 0))
#endif

static void run_coll(struct fcase *c, MPI_Comm comm, struct outcome *o)
{
    MPI_Request q = MPI_REQUEST_NULL;
    void *sb = c->b[0].p, *rb = c->bad == BAD_ALIAS ? c->b[0].p : c->b[1].p;
    MPI_Datatype t = types[c->ty].t;
    int n = (int)c->cnt, R = c->root, me = t_rank, md = c->mode;
    MPI_Op op = c->mop;
    int cnt[2], sd[2], rc_[2], rd[2];
    MPI_Datatype st[2], rt[2];
    switch (c->op) {
    case C_BCAST: COLL(o, md, Bcast, Ibcast, sb, n, t, R); break;
    case C_REDUCE: COLL(o, md, Reduce, Ireduce, sb, rb, n, t, op, R); break;
    case C_ALLREDUCE: COLL(o, md, Allreduce, Iallreduce, sb, rb, n, t, op); break;
    case C_REDUCE_LOCAL: rec(o, "MPI_Reduce_local", MPI_Reduce_local(sb, rb, n, t, op)); break;
    case C_SCAN: COLL(o, md, Scan, Iscan, sb, rb, n, t, op); break;
    case C_EXSCAN: COLL(o, md, Exscan, Iexscan, sb, rb, n, t, op); break;
    case C_RSB: COLL(o, md, Reduce_scatter_block, Ireduce_scatter_block, sb, rb, n, t, op); break;
    case C_RS:
        cnt[0] = c->m[0][0];
        cnt[1] = c->m[0][1];
        COLL(o, md, Reduce_scatter, Ireduce_scatter, sb, rb, cnt, t, op);
        break;
    case C_GATHER: COLL(o, md, Gather, Igather, sb, n, t, rb, n, t, R); break;
    case C_SCATTER: COLL(o, md, Scatter, Iscatter, sb, n, t, rb, n, t, R); break;
    case C_ALLGATHER: COLL(o, md, Allgather, Iallgather, sb, n, t, rb, n, t); break;
    case C_ALLTOALL: COLL(o, md, Alltoall, Ialltoall, sb, n, t, rb, n, t); break;
    case C_GATHERV:
        cnt[0] = c->m[0][0];
        cnt[1] = c->m[1][0];
        COLL(o, md, Gatherv, Igatherv, sb, c->m[me][0], t, rb, cnt, c->d, t, R);
        break;
    case C_ALLGATHERV:
        cnt[0] = c->m[0][0];
        cnt[1] = c->m[1][0];
        COLL(o, md, Allgatherv, Iallgatherv, sb, c->m[me][0], t, rb, cnt, c->d, t);
        break;
    case C_SCATTERV:
        cnt[0] = c->m[0][0];
        cnt[1] = c->m[1][0];
        COLL(o, md, Scatterv, Iscatterv, sb, cnt, c->d, t, rb, c->m[me][0], t, R);
        break;
    case C_ALLTOALLV: {
        int gap = c->gap, so = 0, ro = 0;
        for (int j = 0; j < 2; j++) {
            cnt[j] = c->m[me][j];
            rc_[j] = c->m[j][me];
            sd[j] = so;
            rd[j] = ro;
            so += (cnt[j] > 0 ? cnt[j] : 0) + gap;
            ro += (rc_[j] > 0 ? rc_[j] : 0) + gap;
        }
        COLL(o, md, Alltoallv, Ialltoallv, sb, cnt, sd, t, rb, rc_, rd, t);
        break;
    }
    case C_ALLTOALLW: {
        int so = 0, ro = 0;
        for (int j = 0; j < 2; j++) {
            cnt[j] = c->m[me][j];
            rc_[j] = c->m[j][me];
            st[j] = types[c->mt[me][j]].t;
            rt[j] = types[c->mt[j][me]].t;
            sd[j] = so;
            rd[j] = ro;
            so += (int)((span(cnt[j], c->mt[me][j]) + 8 * c->gap + 7) / 8 * 8);
            ro += (int)((span(rc_[j], c->mt[j][me]) + 8 * c->gap + 7) / 8 * 8);
        }
        COLL(o, md, Alltoallw, Ialltoallw, sb, cnt, sd, st, rb, rc_, rd, rt);
        break;
    }
    }
}

/* ---- pack ----------------------------------------------------------------------------------- */

static void gen_pack(struct fcase *c)
{
    c->sender = pick(2);
    c->ty = pick(TY_GOOD);
    c->pk_ty2 = pick(TY_GOOD);
    c->cnt = small_count();
    c->pk_count2 = (int)small_count();
    c->tag = 100 + c->idx % 20000;
    int s1 = 0, s2 = 0;
    MPI_Pack_size((int)c->cnt, types[c->ty].t, MPI_COMM_WORLD, &s1);
    MPI_Pack_size(c->pk_count2, types[c->pk_ty2].t, MPI_COMM_WORLD, &s2);
    c->pk_size = s1 + s2;
    c->sop = pick(3);
    c->rop = pick(3);
    int me_sends = t_rank == c->sender;
    c->nb = 3;
    c->b[0].kind = memory_kind_for_device_run(); /* the packed message */
    c->b[0].n = (size_t)c->pk_size + 8;
    c->b[0].fill = FILL_POISON;
    c->b[1].kind = MEM_HOST; /* unpacked: first part */
    c->b[1].n = span(c->cnt, c->ty) + 8;
    c->b[1].fill = me_sends ? FILL_PATTERN : FILL_POISON;
    c->b[2].kind = MEM_HOST; /* second part */
    c->b[2].n = span(c->pk_count2, c->pk_ty2) + 8;
    c->b[2].fill = me_sends ? FILL_PATTERN : FILL_POISON;
    c->bad = BAD_NONE;
    static const char *ways[3] = {"blocking", "nonblocking", "persistent"};
    snprintf(c->desc, sizeof c->desc, "pack rank %d packs %lld x %s + %d x %s (%d bytes), sends MPI_PACKED %s from %s, receives %s",
             c->sender, c->cnt, types[c->ty].name, c->pk_count2, types[c->pk_ty2].name, c->pk_size,
             ways[c->sop], bk_name(c->b[0].kind), ways[c->rop]);
}

static void run_pack(struct fcase *c, MPI_Comm comm, struct outcome *o)
{
    unsigned char *h = (unsigned char *)xmalloc((size_t)c->pk_size + 1);
    int pos = 0;
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Status st;
    status_init(&st);
    if (t_rank == c->sender) {
        rec(o, "MPI_Pack", MPI_Pack(c->b[1].p, (int)c->cnt, types[c->ty].t, h, c->pk_size, &pos, comm));
        rec(o, "MPI_Pack", MPI_Pack(c->b[2].p, c->pk_count2, types[c->pk_ty2].t, h, c->pk_size, &pos, comm));
        mem_put(c->b[0].p, h, (size_t)pos);
        if (c->sop == 0) rec(o, "MPI_Send", MPI_Send(c->b[0].p, pos, MPI_PACKED, peer, c->tag, comm));
        else if (c->sop == 1) wait_rec(o, "MPI_Isend", MPI_Isend(c->b[0].p, pos, MPI_PACKED, peer, c->tag, comm, &q), &q, MPI_PACKED, 0);
        else persistent_rec(o, "MPI_Send_init", MPI_Send_init(c->b[0].p, pos, MPI_PACKED, peer, c->tag, comm, &q), &q, MPI_PACKED, 0);
    } else {
        if (c->rop == 0) {
            if (rec(o, "MPI_Recv", MPI_Recv(c->b[0].p, c->pk_size, MPI_PACKED, peer, c->tag, comm, &st)) == MPI_SUCCESS)
                rec_status(o, &st, MPI_PACKED);
        } else if (c->rop == 1) {
            wait_rec(o, "MPI_Irecv", MPI_Irecv(c->b[0].p, c->pk_size, MPI_PACKED, peer, c->tag, comm, &q), &q, MPI_PACKED, 1);
        } else {
            persistent_rec(o, "MPI_Recv_init", MPI_Recv_init(c->b[0].p, c->pk_size, MPI_PACKED, peer, c->tag, comm, &q), &q, MPI_PACKED, 1);
        }
        mem_get(h, c->b[0].p, (size_t)c->pk_size);
        rec(o, "MPI_Unpack", MPI_Unpack(h, c->pk_size, &pos, c->b[1].p, (int)c->cnt, types[c->ty].t, comm));
        rec(o, "MPI_Unpack", MPI_Unpack(h, c->pk_size, &pos, c->b[2].p, c->pk_count2, types[c->pk_ty2].t, comm));
    }
    free(h);
}

/* ---- one case, twice ------------------------------------------------------------------------ */

static void gen_case(struct fcase *c, int idx)
{
    memset(c, 0, sizeof *c);
    c->idx = idx;
    rng = t_mix64(seed) ^ t_mix64((uint64_t)idx * 0x9E3779B97F4A7C15ull + 1);
    int f = pick(100);
    c->fam = f < 35 ? FAM_P2P : f < 50 ? FAM_SENDRECV : f < 90 ? FAM_COLL : FAM_PACK;
    for (int i = 0; i < MAXB; i++) c->b[i].kind = BK_NONE;
    switch (c->fam) {
    case FAM_P2P: gen_p2p(c); break;
    case FAM_SENDRECV: gen_sendrecv(c); break;
    case FAM_COLL: gen_coll(c); break;
    case FAM_PACK: gen_pack(c); break;
    }
}

static void run_once(struct fcase *c, int device_run, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < c->nb; i++) buf_alloc(&c->b[i], device_run, t_rank, c->idx * 8 + i);
    MPI_Comm comm = comms[device_run];
    capture_begin();
    switch (c->fam) {
    case FAM_P2P: run_p2p(c, comm, o); break;
    case FAM_SENDRECV: run_sendrecv(c, comm, o); break;
    case FAM_COLL: run_coll(c, comm, o); break;
    case FAM_PACK: run_pack(c, comm, o); break;
    }
    o->lines = capture_end();
    for (int i = 0; i < c->nb; i++) {
        struct fbuf *b = &c->b[i];
        if (!b->base) continue;
        size_t all = b->n + 2 * GUARD;
        unsigned char *h = mem_fetch(b->base, all);
        unsigned char *e = (unsigned char *)xmalloc(GUARD);
        poison_fill(e, GUARD);
        check_bytes(h, e, GUARD, "case %d (%s run): guard bytes before buffer %d: %s", c->idx,
                    device_run ? "device" : "host", i, c->desc);
        check_bytes(h + GUARD + b->n, e, GUARD, "case %d (%s run): guard bytes after buffer %d: %s",
                    c->idx, device_run ? "device" : "host", i, c->desc);
        free(e);
        o->snap[i] = (unsigned char *)xmalloc(b->n);
        memcpy(o->snap[i], h + GUARD, b->n);
        free(h);
        mem_free(b->base);
        b->base = NULL;
    }
}

static int all_ok(const struct outcome *o)
{
    for (int i = 0; i < o->n && i < 8; i++)
        if (o->cls[i] != MPI_SUCCESS) return 0;
    return 1;
}

/* A huge count with an invalid argument, on a buffer in device memory (of the device run). */
static int huge_refused(const struct fcase *c)
{
    if (c->bad != BAD_HUGE_RANK && !(c->bad == BAD_ROOT && c->cnt == HUGE_COUNT)) return 0;
    for (int i = 0; i < c->nb; i++)
        if (mem_kind_is_device(c->b[i].kind)) return 1;
    return 0;
}

/* Bytes of buffer i that the calls define. An in-place reduce-scatter takes its input from the
 * receive buffer and defines only the result at its start: the rest is the library's scratch
 * space (MPI-4.1 6.10), which host MPI's algorithms leave in their own state. */
static size_t defined(const struct fcase *c, int i)
{
    if (c->fam != FAM_COLL || !c->inplace || i != 1 || (c->op != C_RSB && c->op != C_RS)) return c->b[i].n;
    size_t result = span(c->op == C_RSB ? c->cnt : c->m[0][t_rank], c->ty);
    return result < c->b[i].n ? result : c->b[i].n;
}

static int compare(struct fcase *c, struct outcome *h, struct outcome *d)
{
    int ok = 1;
    const char *sd = c->desc;
    ok &= CHECK(h->lines == 0, "case %d: %d cudampi lines in the host run: %s", c->idx, h->lines, sd);
    if (!CHECK(h->n == d->n, "case %d: %d calls in the device run, %d in the host run: %s", c->idx, d->n, h->n, sd))
        return 0;
    for (int i = 0; i < h->n && i < 8; i++) {
        /* A count that reaches past the end of the device allocation, in a call the host run
         * refuses for another argument: on host memory such a count is no error the library
         * could see, on device memory cudampi finds it first. MPI_ERR_BUFFER and one line. */
        if (huge_refused(c) && h->cls[i] != MPI_SUCCESS && d->cls[i] == MPI_ERR_BUFFER) {
            ok &= CHECK(d->lines == 1, "case %d: %s: MPI_ERR_BUFFER with %d cudampi lines, expected 1: %s", c->idx,
                        h->name[i], d->lines, sd);
            continue;
        }
        ok &= CHECK(h->cls[i] == d->cls[i], "case %d: %s: device run class %s, host run %s: %s", c->idx,
                    h->name[i], error_name(d->cls[i]), error_name(h->cls[i]), sd);
    }
    if (!all_ok(h) || !ok) return ok;
    ok &= CHECK(d->lines == 0, "case %d: %d cudampi lines for calls that succeeded: %s", c->idx, d->lines, sd);
    for (int i = 0; i < c->nb; i++)
        if (h->snap[i])
            ok &= check_bytes(d->snap[i], h->snap[i], defined(c, i), "case %d: buffer %d (%s) after the calls: %s",
                              c->idx, i, bk_name(c->b[i].kind), sd);
    for (int i = 0; i < h->nst && i < 4; i++)
        ok &= check_status_same(&h->st[i], &d->st[i], h->stdt[i], "case %d: status %d: %s", c->idx, i, sd);
    return ok;
}

/* Messages that an erroneous call sent anyway (or a receive failed to take): taken off the
 * communicator of run k, waiting `idle` polls for late ones, so no later receive matches them. */
static void drain(int k, int idle_polls, int idx)
{
    for (int idle = 0; idle < idle_polls;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[k], &flag, &st);
        if (!flag) {
            if (++idle < idle_polls) usleep(2000);
            continue;
        }
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        void *tmp = xmalloc((size_t)bytes + 1);
        MPI_Recv(tmp, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comms[k], MPI_STATUS_IGNORE);
        free(tmp);
        CHECK(0, "%s run: a message of %d bytes with tag %d (case %d) was left unreceived (seen after case %d)",
              k ? "device" : "host", bytes, st.MPI_TAG, st.MPI_TAG - 100, idx);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("needs 2 ranks");
    peer = 1 - t_rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int k = 0; k < 2; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]);
        MPI_Comm_set_errhandler(comms[k], MPI_ERRORS_RETURN);
    }
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING] = 0;
    is_ompi = strstr(lib, "Open MPI") != NULL;
    is_mpich = strstr(lib, "MPICH Version:") != NULL;
    is_mpich40 = is_mpich && strstr(lib, "4.0.");
#ifdef HAVE_COLL_INIT
    /* MPICH 4.0's persistent collectives hang after other calls on the communicator (host
     * memory) */
    have_init = library_has("MPI_Allreduce_init") && !is_mpich40;
#endif
#ifdef HAVE_ISENDRECV
    /* MPICH 4.0's MPI_Isendrecv(_replace) crash on derived datatypes and exit with an
     * MPI_PROC_NULL peer (host memory) */
    have_isendrecv = library_has("MPI_Isendrecv") && !is_mpich40;
#endif
    verbose = atoi(t_env("CUDAMPI_FUZZ_VERBOSE", "0"));
    const char *s = getenv("CUDAMPI_FUZZ_SEED");
    seed = !s || !*s ? 1ull
         : strcmp(s, "clock") == 0 ? (unsigned long long)time(NULL) * 1000003ull ^ (unsigned long long)getpid()
                                   : strtoull(s, NULL, 0);
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    int ncases = atoi(t_env("CUDAMPI_FUZZ_CASES", "2000"));
    int only = atoi(t_env("CUDAMPI_FUZZ_ONLY", "-1"));
    int first = atoi(t_env("CUDAMPI_FUZZ_FIRST", "0"));
    if (t_rank == 0)
        note("seed %llu (CUDAMPI_FUZZ_SEED=%llu repeats this run), %d cases%s%s", seed, seed, ncases,
             have_init ? "" : ", no persistent collectives", have_isendrecv ? "" : ", no MPI_Isendrecv");
    types_init();
    int bsize = 4 << 20;
    void *battach = xmalloc((size_t)bsize);
    MPI_Buffer_attach(battach, bsize);

    int counts[4] = {0}, failed = 0;
    double t0 = MPI_Wtime();
    for (int i = 0; i < ncases; i++) {
        if ((only >= 0 && i != only) || i < first) continue;
        struct fcase c;
        struct outcome o[2];
        gen_case(&c, i);
        if (verbose && t_rank == 0) note("case %d: %s", i, c.desc);
        for (int k = 0; k < 2; k++) {
            run_once(&c, k, &o[k]);
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            drain(k, 1, i);
        }
        counts[c.fam]++;
        if (verbose)
            for (int k = 0; k < o[0].n && k < 8; k++)
                note("case %d: %s: %s / %s", i, o[0].name[k], error_name(o[0].cls[k]), error_name(o[1].cls[k]));
        if (!compare(&c, &o[0], &o[1])) failed++;
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < MAXB; j++) free(o[k].snap[j]);
    }
    for (int k = 0; k < 2; k++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        drain(k, 10, ncases);
    }
    if (t_rank == 0)
        note("seed %llu: %d cases (p2p %d, sendrecv %d, collective %d, pack %d) in %.1f s, %d differ on rank 0", seed,
             counts[0] + counts[1] + counts[2] + counts[3], counts[0], counts[1], counts[2], counts[3], MPI_Wtime() - t0, failed);
    MPI_Buffer_detach(&battach, &bsize);
    free(battach);
    for (int i = TY_CONTIG; i < TY_ALL; i++)
        if (i != TY_NULL) MPI_Type_free(&types[i].t);
    for (int k = 0; k < 2; k++) MPI_Comm_free(&comms[k]);
    return report_and_finalize();
}
