// cudampi-test: ranks=2 without-shim=crash link=yes timeout=120
/* Nonblocking point-to-point calls on device buffers, every sequence run first on host buffers
 * (the reference) and then with placements device->device, host->device, device->host; the
 * received bytes (with poisoned slack), statuses and error classes must equal the host run's,
 * and the host run must equal the sender's pattern.
 *   - MPI_Isend / MPI_Issend / MPI_Ibsend (attached buffer) / MPI_Irsend (receiver posts first,
 *     then a zero-byte handshake) x MPI_Irecv, and their large-count _c forms (MPI-4) x
 *     MPI_Irecv_c; counts 0, 1, 4095 of MPI_CHAR, MPI_INT, MPI_DOUBLE and 1 Mi + 3 once per
 *     call (the type rotating; of the _c sends only MPI_Isend_c); completed alternately by
 *     MPI_Wait and by an MPI_Test loop;
 *   - MPI_Imrecv after MPI_Mprobe and after an MPI_Improbe loop (and MPI_Imrecv_c);
 *   - MPI_Isendrecv and MPI_Isendrecv_replace (and their _c forms), both ranks at once;
 *   - a strided MPI_Type_vector: the receive buffer's gap bytes must keep their values;
 *   - MPI_ANY_SOURCE / MPI_ANY_TAG receives: status source/tag/count as in the host run;
 *   - several device receives outstanding at once, matched out of order, and a send to self;
 *   - truncation on an MPI_ERRORS_RETURN communicator: MPI_ERR_TRUNCATE from MPI_Wait (or in
 *     its status), nothing written past the posted count, a device buffer left unchanged,
 *     later messages intact.
 * MPI-4 calls are compiled only where mpi.h declares them and used only where the library
 * exports them (dlsym); a note says what was skipped. */
#include "common.h"

#if MPI_VERSION >= 4
#define HAVE_C_CALLS 1 /* large-count bindings: MPICH 4+ (Open MPI 5 has none) */
#endif

#define SLACK 16
#define TAG_ACK 32000
#define BIG ((1 << 20) + 3)

static MPI_Comm comm, errcomm;
static int have_c = 0;
#ifdef HAVE_ISENDRECV
static int have_isendrecv = 0;
static int isendrecv_status_ok = 1; /* MPICH 4.0 and 5.0 leave MPI_Isendrecv's status stale */
#endif

enum { S_ISEND, S_ISSEND, S_IBSEND, S_IRSEND, S_N };
static const char *sname[] = {"Isend", "Issend", "Ibsend", "Irsend"};
enum { R_IRECV, R_MPROBE, R_IMPROBE, R_N };
static const char *rname[] = {"Irecv", "Mprobe+Imrecv", "Improbe+Imrecv"};
enum { C_WAIT, C_TEST };
static const char *cname[] = {"Wait", "Test loop"};

/* Complete one request with MPI_Wait or a loop of MPI_Test; returns the call's return code. */
static int complete(MPI_Request *rq, MPI_Status *st, int how)
{
    if (how == C_WAIT) return MPI_Wait(rq, st);
    int flag = 0, rc;
    do
        rc = MPI_Test(rq, &flag, st);
    while (rc == MPI_SUCCESS && !flag);
    return rc;
}

/* Expected receive buffer: the sender's pattern, then poisoned slack. */
static unsigned char *expect_pattern(size_t n, int src, int seed)
{
    unsigned char *e = (unsigned char *)xmalloc(n + SLACK);
    pattern_fill(e, n, src, seed);
    poison_fill(e + n, SLACK);
    return e;
}

/* ---- one send mode x one receive mode, src -> dst --------------------------------------- */
static void one_p2p(struct trace *tr, int skind, int rkind, int smode, int rmode, int large,
                    MPI_Datatype dt, int count, int src, int seed)
{
    int dst = 1 - src, tag = seed;
    size_t n = (size_t)count * type_size(dt);
    int how = seed & 1 ? C_TEST : C_WAIT;
    char label[200];
    snprintf(label, sizeof label, "%s%s x %s%s %s count %d %d->%d (%s)", sname[smode],
             large ? "_c" : "", rname[rmode], large ? "_c" : "", type_name(dt), count, src, dst,
             cname[how]);
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Status st;
    status_init(&st);
    if (t_rank == src) {
        void *s = mem_alloc(skind, n);
        mem_pattern(s, n, src, seed);
        if (smode == S_IRSEND)
            MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, dst, TAG_ACK, comm, MPI_STATUS_IGNORE));
        int rc = MPI_ERR_OTHER;
        if (!large) {
            switch (smode) {
            case S_ISEND: rc = MPI_Isend(s, count, dt, dst, tag, comm, &rq); break;
            case S_ISSEND: rc = MPI_Issend(s, count, dt, dst, tag, comm, &rq); break;
            case S_IBSEND: rc = MPI_Ibsend(s, count, dt, dst, tag, comm, &rq); break;
            case S_IRSEND: rc = MPI_Irsend(s, count, dt, dst, tag, comm, &rq); break;
            }
        }
#ifdef HAVE_C_CALLS
        else {
            MPI_Count c = count;
            switch (smode) {
            case S_ISEND: rc = MPI_Isend_c(s, c, dt, dst, tag, comm, &rq); break;
            case S_ISSEND: rc = MPI_Issend_c(s, c, dt, dst, tag, comm, &rq); break;
            case S_IBSEND: rc = MPI_Ibsend_c(s, c, dt, dst, tag, comm, &rq); break;
            case S_IRSEND: rc = MPI_Irsend_c(s, c, dt, dst, tag, comm, &rq); break;
            }
        }
#endif
        CHECK(rc == MPI_SUCCESS, "%s: send call returned %s", label, error_name(error_class(rc)));
        rc = complete(&rq, &st, how);
        CHECK(rc == MPI_SUCCESS && rq == MPI_REQUEST_NULL, "%s: send completion returned %s",
              label, error_name(error_class(rc)));
        if (smode == S_IBSEND) /* wait until received: the attached space is free again */
            MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, dst, TAG_ACK, comm, MPI_STATUS_IGNORE));
        mem_free(s);
    } else {
        void *r = mem_alloc(rkind, n + SLACK);
        mem_poison(r, n + SLACK);
        int rc = MPI_ERR_OTHER;
        if (rmode == R_IRECV) {
            if (!large) rc = MPI_Irecv(r, count, dt, src, tag, comm, &rq);
#ifdef HAVE_C_CALLS
            else rc = MPI_Irecv_c(r, (MPI_Count)count, dt, src, tag, comm, &rq);
#endif
        } else {
            MPI_Message msg = MPI_MESSAGE_NULL;
            MPI_Status pst;
            status_init(&pst);
            int flag = 0;
            if (rmode == R_MPROBE)
                MPI_CHECK(MPI_Mprobe(src, tag, comm, &msg, &pst));
            else
                while (!flag) MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, tag, comm, &flag, &msg, &pst));
            check_status(&pst, dt, src, tag, count, "%s: probe status", label);
            if (!large) rc = MPI_Imrecv(r, count, dt, &msg, &rq);
#ifdef HAVE_C_CALLS
            else rc = MPI_Imrecv_c(r, (MPI_Count)count, dt, &msg, &rq);
#endif
            CHECK(msg == MPI_MESSAGE_NULL, "%s: Imrecv left the message handle set", label);
        }
        CHECK(rc == MPI_SUCCESS, "%s: receive call returned %s", label, error_name(error_class(rc)));
        if (smode == S_IRSEND)
            MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, src, TAG_ACK, comm));
        rc = complete(&rq, &st, how);
        CHECK(rq == MPI_REQUEST_NULL, "%s: request not freed by completion", label);
        if (smode == S_IBSEND) MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, src, TAG_ACK, comm));
        unsigned char *got = mem_fetch(r, n + SLACK), *exp = expect_pattern(n, src, seed);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        check_status(&st, dt, src, tag, count, "%s", label);
        trace_add(tr, label, got, n + SLACK, &st, dt, rc);
        free(got);
        free(exp);
        mem_free(r);
    }
}

/* ---- MPI_Isendrecv / MPI_Isendrecv_replace (and _c): both ranks exchange ---------------- */
#ifdef HAVE_ISENDRECV
static void one_exchange(struct trace *tr, int skind, int rkind, int replace, int large,
                         MPI_Datatype dt, int count, int seed)
{
    int peer = 1 - t_rank;
    size_t n = (size_t)count * type_size(dt);
    int how = seed & 1 ? C_TEST : C_WAIT;
    char label[200];
    snprintf(label, sizeof label, "%s%s %s count %d rank %d (%s)",
             replace ? "Isendrecv_replace" : "Isendrecv", large ? "_c" : "", type_name(dt), count,
             t_rank, cname[how]);
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Status st;
    status_init(&st);
    int stag = seed * 2 + t_rank, rtag = seed * 2 + peer, rc = MPI_ERR_OTHER;
    void *s = NULL, *r;
    if (replace) {
        /* one buffer: rank 0 holds the send kind, rank 1 the receive kind */
        r = mem_alloc(t_rank == 0 ? skind : rkind, n + SLACK);
        mem_poison(r, n + SLACK);
        mem_pattern(r, n, t_rank, seed);
        if (!large)
            rc = MPI_Isendrecv_replace(r, count, dt, peer, stag, peer, rtag, comm, &rq);
#ifdef HAVE_C_CALLS
        else
            rc = MPI_Isendrecv_replace_c(r, (MPI_Count)count, dt, peer, stag, peer, rtag, comm, &rq);
#endif
    } else {
        s = mem_alloc(skind, n);
        mem_pattern(s, n, t_rank, seed);
        r = mem_alloc(rkind, n + SLACK);
        mem_poison(r, n + SLACK);
        if (!large)
            rc = MPI_Isendrecv(s, count, dt, peer, stag, r, count, dt, peer, rtag, comm, &rq);
#ifdef HAVE_C_CALLS
        else
            rc = MPI_Isendrecv_c(s, (MPI_Count)count, dt, peer, stag, r, (MPI_Count)count, dt,
                                 peer, rtag, comm, &rq);
#endif
    }
    CHECK(rc == MPI_SUCCESS, "%s: call returned %s", label, error_name(error_class(rc)));
    rc = complete(&rq, &st, how);
    unsigned char *got = mem_fetch(r, n + SLACK), *exp = expect_pattern(n, peer, seed);
    check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
    if (isendrecv_status_ok) {
        check_status(&st, dt, peer, rtag, count, "%s", label);
        trace_add(tr, label, got, n + SLACK, &st, dt, rc);
    } else {
        trace_add(tr, label, got, n + SLACK, NULL, dt, rc);
    }
    if (s) {
        /* the send buffer must be unchanged */
        unsigned char *sg = mem_fetch(s, n), *se = pattern_new(n, t_rank, seed);
        check_bytes(sg, se, n, "%s: send buffer changed", label);
        free(sg);
        free(se);
    }
    free(got);
    free(exp);
    mem_free(s);
    mem_free(r);
}
#endif

/* ---- strided vector: gap bytes of the receive buffer keep their values ------------------- */
static void one_vector(struct trace *tr, int skind, int rkind, int nblk, int count, int src, int seed)
{
    int dst = 1 - src, tag = seed;
    const int blk = 3, stride = 5; /* MPI_INTs */
    MPI_Datatype vt;
    MPI_CHECK(MPI_Type_vector(nblk, blk, stride, MPI_INT, &vt));
    MPI_CHECK(MPI_Type_commit(&vt));
    MPI_Aint lb = 0, ext = 0;
    MPI_Type_get_extent(vt, &lb, &ext);
    size_t span = (size_t)((nblk - 1) * stride + blk) * sizeof(int) + (size_t)(count - 1) * (size_t)ext;
    char label[200];
    snprintf(label, sizeof label, "vector(%d,%d,%d,INT) count %d %d->%d", nblk, blk, stride, count,
             src, dst);
    MPI_Request rq;
    MPI_Status st;
    status_init(&st);
    if (t_rank == src) {
        void *s = mem_alloc(skind, span);
        mem_pattern(s, span, src, seed);
        MPI_CHECK(MPI_Isend(s, count, vt, dst, tag, comm, &rq));
        MPI_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        mem_free(s);
    } else {
        void *r = mem_alloc(rkind, span + SLACK);
        unsigned char *exp = (unsigned char *)xmalloc(span + SLACK);
        gap_fill(exp, span, seed);
        poison_fill(exp + span, SLACK);
        mem_put(r, exp, span + SLACK);
        unsigned char *pat = pattern_new(span, src, seed);
        for (int c = 0; c < count; c++)
            for (int b = 0; b < nblk; b++) {
                size_t off = (size_t)c * (size_t)ext + (size_t)b * stride * sizeof(int);
                memcpy(exp + off, pat + off, blk * sizeof(int));
            }
        int rc = MPI_Irecv(r, count, vt, src, tag, comm, &rq);
        CHECK(rc == MPI_SUCCESS, "%s: Irecv returned %s", label, error_name(error_class(rc)));
        rc = MPI_Wait(&rq, &st);
        unsigned char *got = mem_fetch(r, span + SLACK);
        check_bytes(got, exp, span + SLACK, "%s vs pattern and gaps", label);
        check_status(&st, vt, src, tag, count, "%s", label);
        /* the type is freed below: the trace compares the status's count in bytes */
        trace_add(tr, label, got, span + SLACK, &st, MPI_BYTE, rc);
        free(got);
        free(pat);
        free(exp);
        mem_free(r);
    }
    MPI_Type_free(&vt);
}

/* ---- MPI_ANY_SOURCE / MPI_ANY_TAG receive ------------------------------------------------- */
static void one_any(struct trace *tr, int skind, int rkind, int count, int src, int seed)
{
    int dst = 1 - src, tag = seed;
    size_t n = (size_t)count * sizeof(double);
    char label[200];
    snprintf(label, sizeof label, "ANY_SOURCE/ANY_TAG Irecv DOUBLE count %d %d->%d", count, src, dst);
    MPI_Request rq;
    MPI_Status st;
    status_init(&st);
    if (t_rank == src) {
        void *s = mem_alloc(skind, n);
        mem_pattern(s, n, src, seed);
        MPI_CHECK(MPI_Isend(s, count, MPI_DOUBLE, dst, tag, comm, &rq));
        MPI_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        mem_free(s);
    } else {
        void *r = mem_alloc(rkind, n + SLACK);
        mem_poison(r, n + SLACK);
        MPI_CHECK(MPI_Irecv(r, count, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &rq));
        int rc = MPI_Wait(&rq, &st);
        unsigned char *got = mem_fetch(r, n + SLACK), *exp = expect_pattern(n, src, seed);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        check_status(&st, MPI_DOUBLE, src, tag, count, "%s", label);
        trace_add(tr, label, got, n + SLACK, &st, MPI_DOUBLE, rc);
        free(got);
        free(exp);
        mem_free(r);
    }
}

/* ---- several receives outstanding, matched out of order; a send to self ------------------- */
#define NMULTI 5
static void multi(struct trace *tr, int skind, int rkind, int seed)
{
    const int cnt[NMULTI] = {3, 70000, 0, 4095, 129};
    int src = 0, dst = 1;
    char label[200];
    if (t_rank == src) {
        void *s[NMULTI];
        MPI_Request rq[NMULTI];
        MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, dst, TAG_ACK, comm, MPI_STATUS_IGNORE));
        for (int i = NMULTI - 1; i >= 0; i--) { /* reverse order of the posted receives */
            size_t n = (size_t)cnt[i] * sizeof(int);
            s[i] = mem_alloc(skind, n);
            mem_pattern(s[i], n, src, seed + i);
            MPI_CHECK(MPI_Isend(s[i], cnt[i], MPI_INT, dst, seed + i, comm, &rq[i]));
        }
        MPI_Status sst[NMULTI];
        MPI_CHECK(MPI_Waitall(NMULTI, rq, sst));
        for (int i = 0; i < NMULTI; i++) mem_free(s[i]);
    } else {
        void *r[NMULTI];
        MPI_Request rq[NMULTI];
        MPI_Status st[NMULTI];
        for (int i = 0; i < NMULTI; i++) {
            size_t n = (size_t)cnt[i] * sizeof(int);
            r[i] = mem_alloc(rkind, n + SLACK);
            mem_poison(r[i], n + SLACK);
            status_init(&st[i]);
            MPI_CHECK(MPI_Irecv(r[i], cnt[i], MPI_INT, src, seed + i, comm, &rq[i]));
        }
        MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, src, TAG_ACK, comm));
        int rc = MPI_Waitall(NMULTI, rq, st);
        CHECK(rc == MPI_SUCCESS, "multi: Waitall returned %s", error_name(error_class(rc)));
        for (int i = 0; i < NMULTI; i++) {
            size_t n = (size_t)cnt[i] * sizeof(int);
            snprintf(label, sizeof label, "%d outstanding Irecvs, #%d INT count %d", NMULTI, i, cnt[i]);
            unsigned char *got = mem_fetch(r[i], n + SLACK), *exp = expect_pattern(n, src, seed + i);
            check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
            check_status(&st[i], MPI_INT, src, seed + i, cnt[i], "%s", label);
            trace_add(tr, label, got, n + SLACK, &st[i], MPI_INT, MPI_SUCCESS);
            free(got);
            free(exp);
            mem_free(r[i]);
        }
    }

    /* every rank: Isend to itself from skind, Irecv from itself into rkind, Waitall */
    {
        const int count = 33333;
        size_t n = (size_t)count * sizeof(int);
        int tag = seed + NMULTI;
        void *s = mem_alloc(skind, n), *r = mem_alloc(rkind, n + SLACK);
        mem_pattern(s, n, t_rank, tag);
        mem_poison(r, n + SLACK);
        MPI_Request rq[2];
        MPI_Status st[2];
        status_init(&st[0]);
        status_init(&st[1]);
        MPI_CHECK(MPI_Isend(s, count, MPI_INT, t_rank, tag, comm, &rq[0]));
        MPI_CHECK(MPI_Irecv(r, count, MPI_INT, t_rank, tag, comm, &rq[1]));
        int rc = MPI_Waitall(2, rq, st);
        snprintf(label, sizeof label, "Isend+Irecv to self INT count %d rank %d", count, t_rank);
        unsigned char *got = mem_fetch(r, n + SLACK), *exp = expect_pattern(n, t_rank, tag);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        check_status(&st[1], MPI_INT, t_rank, tag, count, "%s", label);
        trace_add(tr, label, got, n + SLACK, &st[1], MPI_INT, rc);
        free(got);
        free(exp);
        mem_free(s);
        mem_free(r);
    }
}

/* ---- truncation on an MPI_ERRORS_RETURN communicator ------------------------------------ */
static void truncation(struct trace *tr, int skind, int rkind, int seed)
{
    const int sent = 1000, posted = 600, after = 77;
    int src = 0, dst = 1;
    char label[200];
    if (t_rank == src) {
        void *s = mem_alloc(skind, sent * sizeof(int));
        mem_pattern(s, sent * sizeof(int), src, seed);
        MPI_Request rq;
        MPI_CHECK(MPI_Isend(s, sent, MPI_INT, dst, seed, errcomm, &rq));
        MPI_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        mem_pattern(s, after * sizeof(int), src, seed + 1);
        MPI_CHECK(MPI_Isend(s, after, MPI_INT, dst, seed + 1, errcomm, &rq));
        MPI_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        mem_free(s);
    } else {
        size_t rb = (size_t)sent * sizeof(int) + SLACK;
        void *r = mem_alloc(rkind, rb);
        mem_poison(r, rb);
        MPI_Request rq;
        MPI_Status st;
        status_init(&st);
        int rc = MPI_Irecv(r, posted, MPI_INT, src, seed, errcomm, &rq);
        CHECK(rc == MPI_SUCCESS, "truncation: Irecv returned %s", error_name(error_class(rc)));
        /* MPICH 4.0 raises MPI_Wait's errors on MPI_COMM_WORLD, not on the request's
         * communicator: errors return there too while this receive completes */
        MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        rc = MPI_Wait(&rq, &st);
        MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        /* MPI_Wait returns the error; some MPIs also put it in the status (status_init put
         * 424242 there, not a valid error code to ask the class of) */
        int cls = error_class(rc);
        int scls = st.MPI_ERROR == 424242 ? -1 : error_class(st.MPI_ERROR);
        CHECK(cls == MPI_ERR_TRUNCATE || (rc == MPI_SUCCESS && scls == MPI_ERR_TRUNCATE),
              "truncation: Wait returned %s, status error %s; expected MPI_ERR_TRUNCATE",
              error_name(cls), error_name(scls));
        if (skind == MEM_HOST && rkind == MEM_HOST)
            note("truncated receive (host run): MPI_Wait returned %s, status error field %s",
                 error_name(cls), scls == -1 ? "not set" : error_name(scls));
        snprintf(label, sizeof label, "truncated Irecv INT %d of %d", posted, sent);
        unsigned char *got = mem_fetch(r, rb);
        /* never past the posted count */
        unsigned char *pois = (unsigned char *)xmalloc(rb);
        poison_fill(pois, rb);
        size_t pb = (size_t)posted * sizeof(int);
        check_bytes(got + pb, pois, rb - pb, "%s: bytes past the posted count", label);
        /* MPI leaves a truncated buffer's contents undefined (MPICH 4 writes nothing, Open MPI
         * the prefix); cudampi leaves a truncated device receive buffer unchanged */
        if (mem_kind_is_device(mem_real_kind(r)))
            check_bytes(got, pois, pb, "%s: truncated device receive buffer must stay unchanged", label);
        trace_add(tr, label, "", 0, NULL, MPI_INT, rc);
        free(got);

        /* the next message arrives intact */
        mem_poison(r, rb);
        status_init(&st);
        MPI_CHECK(MPI_Irecv(r, sent, MPI_INT, src, seed + 1, errcomm, &rq));
        rc = MPI_Wait(&rq, &st);
        CHECK(rc == MPI_SUCCESS, "after truncation: Wait returned %s", error_name(error_class(rc)));
        snprintf(label, sizeof label, "message after the truncated one, INT %d", after);
        got = mem_fetch(r, rb);
        unsigned char *exp = (unsigned char *)xmalloc(rb);
        poison_fill(exp, rb);
        pattern_fill(exp, after * sizeof(int), src, seed + 1);
        check_bytes(got, exp, rb, "%s vs pattern", label);
        check_status(&st, MPI_INT, src, seed + 1, after, "%s", label);
        trace_add(tr, label, got, rb, &st, MPI_INT, rc);
        free(got);
        free(exp);
        free(pois);
        mem_free(r);
    }
}

/* ---- the whole sequence on one placement ------------------------------------------------- */
static void run(int skind, int rkind, struct trace *tr)
{
    MPI_Datatype types[3] = {MPI_CHAR, MPI_INT, MPI_DOUBLE};
    const int counts[4] = {0, 1, 4095, BIG};
    int seed = 0;

    for (int large = 0; large < 2; large++) {
        if (large && !have_c) continue;
        for (int sm = 0; sm < S_N; sm++)
            for (int ti = 0; ti < 3; ti++)
                for (int ci = 0; ci < 4; ci++) {
                    ++seed;
                    /* the largest count once per send mode (types rotate), and with the
                     * _c calls for Isend_c only, to keep the run short */
                    if (counts[ci] == BIG && (ti != sm % 3 || (large && sm != S_ISEND))) continue;
                    one_p2p(tr, skind, rkind, sm, R_IRECV, large, types[ti], counts[ci],
                            seed & 1, seed);
                }
        for (int rm = R_MPROBE; rm < R_N; rm++)
            for (int ti = 0; ti < 3; ti++)
                for (int ci = 0; ci < 4; ci++) {
                    ++seed;
                    if (counts[ci] == BIG && (ti != rm % 3 || large)) continue;
                    one_p2p(tr, skind, rkind, S_ISEND, rm, large, types[ti], counts[ci],
                            seed & 1, seed);
                }
    }
#ifdef HAVE_ISENDRECV
    if (have_isendrecv)
        for (int large = 0; large < 2; large++) {
            if (large && !have_c) continue;
            for (int replace = 0; replace < 2; replace++)
                for (int ti = 0; ti < 3; ti++)
                    for (int ci = 0; ci < 4; ci++) {
                        ++seed;
                        if (counts[ci] == BIG && (ti != (replace + large) % 3 || (large && replace)))
                            continue;
                        one_exchange(tr, skind, rkind, replace, large, types[ti], counts[ci], seed);
                    }
        }
#endif
    seed = 20000;
    one_vector(tr, skind, rkind, 7, 2, 0, ++seed);
    one_vector(tr, skind, rkind, 7, 2, 1, ++seed);
    one_vector(tr, skind, rkind, 40000, 3, 0, ++seed);
    one_any(tr, skind, rkind, 1, 1, ++seed);
    one_any(tr, skind, rkind, 5000, 0, ++seed);
    one_any(tr, skind, rkind, 0, 1, ++seed);
    seed = 21000;
    multi(tr, skind, rkind, seed);
    seed = 22000;
    truncation(tr, skind, rkind, seed);
    MPI_CHECK(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("nb_calls runs on 2 ranks, not %d", t_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &errcomm);
    MPI_Comm_set_errhandler(errcomm, MPI_ERRORS_RETURN);

#ifdef HAVE_C_CALLS
    have_c = dlsym(RTLD_DEFAULT, "MPI_Isend_c") != NULL;
    if (!have_c && t_rank == 0) note("the MPI library does not export MPI_Isend_c: _c calls skipped");
#else
    if (t_rank == 0) note("mpi.h has no large-count (_c) calls: skipped");
#endif
#ifdef HAVE_ISENDRECV
    have_isendrecv = dlsym(RTLD_DEFAULT, "MPI_Isendrecv") != NULL;
    if (!have_isendrecv && t_rank == 0)
        note("the MPI library does not export MPI_Isendrecv: Isendrecv(_replace) skipped");
#else
    if (t_rank == 0) note("mpi.h has no MPI_Isendrecv: Isendrecv(_replace) skipped");
#endif

#ifdef HAVE_ISENDRECV
    if (have_isendrecv) {
        isendrecv_status_ok = isendrecv_sets_status(comm);
        if (!isendrecv_status_ok && t_rank == 0)
            note("this MPI does not set MPI_Isendrecv's status: Isendrecv statuses not compared");
    }
#endif

    int packsz = 0;
    MPI_Pack_size(BIG, MPI_DOUBLE, comm, &packsz);
    int bsize = packsz + 4 * MPI_BSEND_OVERHEAD + 4096;
    void *battach = xmalloc((size_t)bsize);
    MPI_CHECK(MPI_Buffer_attach(battach, bsize));

    const int place[3][2] = {{MEM_DEVICE, MEM_DEVICE}, {MEM_HOST, MEM_DEVICE}, {MEM_DEVICE, MEM_HOST}};
    const char *place_name[3] = {"D->D", "H->D", "D->H"};
    struct trace ref = {0};
    run(MEM_HOST, MEM_HOST, &ref);
    for (int p = 0; p < 3; p++) {
        struct trace got = {0};
        run(place[p][0], place[p][1], &got);
        trace_compare(&ref, &got, place_name[p]);
        trace_free(&got);
    }
    CHECK(ref.n > 0, "rank %d recorded nothing", t_rank);
    trace_free(&ref);

    int bsz = 0;
    void *bptr = NULL;
    MPI_CHECK(MPI_Buffer_detach(&bptr, &bsz));
    free(battach);
    MPI_Comm_free(&errcomm);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
