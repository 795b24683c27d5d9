// cudampi-test: ranks=2 without-shim=crash link=yes timeout=120
/* Persistent point-to-point requests on device buffers: MPI_Send_init, MPI_Ssend_init,
 * MPI_Bsend_init (attached buffer), MPI_Rsend_init (receives started first, then a zero-byte
 * handshake) and MPI_Send_init_c (MPI-4), each with MPI_Recv_init(_c), both ranks sending to
 * each other. Every request is started for several rounds, alternately by MPI_Start + MPI_Wait,
 * MPI_Startall + MPI_Waitall and MPI_Start + an MPI_Testall loop. Between rounds the send data
 * CHANGES (a shim that staged the send buffer only at init sends stale bytes) and the receive
 * buffer is poisoned again (a shim that copied back only once leaves poison). A strided
 * MPI_Type_vector request checks that gap bytes keep their values in every round. Inactive
 * requests are freed with MPI_Request_free, including ones never started.
 * Placements device->device, host->device, device->host, each compared with host->host in
 * the same run (bytes with poisoned slack, statuses) and with the sender's pattern.
 * Under the shim, cudampi_get_stats must report the requests while they exist
 * (requests_tracked) and, once all are freed, staging_leased = requests_tracked = 0. */
#include "common.h"
#include "../../include/cudampi.h"

#if MPI_VERSION >= 4
#define HAVE_C_CALLS 1
#endif

#define SLACK 16
#define TAG_ACK 32000
#define BIG ((1 << 20) + 3)
#define NROUNDS 3

static MPI_Comm comm;
static int have_c = 0;
static int bsend_restart_ok = 1; /* Open MPI 4.1 resends stale bytes from a restarted Bsend_init */

#define STATS_UNSET 0xA5A5A5A5A5A5A5A5ull
typedef int (*stats_fn)(struct cudampi_stats *);

/* Returns 1 and fills *s when the shim is loaded and answers; 0 otherwise. */
static int get_stats(struct cudampi_stats *s)
{
    if (!shim_loaded()) return 0;
    stats_fn f = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    if (!CHECK(f != NULL, "the shim is loaded but does not export cudampi_get_stats")) return 0;
    memset(s, 0xA5, sizeof *s);
    if (!CHECK(f(s) == 0, "cudampi_get_stats failed")) return 0;
    CHECK(s->staging_leased != STATS_UNSET && s->requests_tracked != STATS_UNSET,
          "cudampi_get_stats does not fill staging_leased / requests_tracked");
    return 1;
}

enum { P_SEND, P_SSEND, P_BSEND, P_RSEND, P_SEND_C, P_N };
static const char *pname[] = {"Send_init", "Ssend_init", "Bsend_init", "Rsend_init",
                              "Send_init_c/Recv_init_c"};
static const char *how_name[NROUNDS] = {"Start+Wait", "Startall+Waitall", "Start+Testall loop"};

static void handshake(void)
{
    int peer = 1 - t_rank;
    MPI_CHECK(MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, TAG_ACK, NULL, 0, MPI_BYTE, peer, TAG_ACK,
                           comm, MPI_STATUS_IGNORE));
}

/* Stats while device persistent requests exist (shim only, CUDA memory). */
static void check_tracked_at_least(int n, const char *when)
{
    struct cudampi_stats s;
    if (host_mode() || !get_stats(&s)) return;
    CHECK(s.requests_tracked >= (uint64_t)n,
          "%s: cudampi reports %llu requests tracked, %d persistent device requests exist", when,
          (unsigned long long)s.requests_tracked, n);
}

/* One pair of persistent requests (send to the peer, receive from it), NROUNDS rounds.
 * dt is a predefined type, or a vector (then elements = count, expected built with gaps). */
static void persist_case(struct trace *tr, int skind, int rkind, int mode, MPI_Datatype dt,
                         int count, int seed, int is_vector)
{
    int peer = 1 - t_rank;
    MPI_Aint lb = 0, ext = 0;
    MPI_Type_get_extent(dt, &lb, &ext);
    size_t n = (size_t)count * (size_t)ext; /* span of the buffer */
    const int blk = 3, stride = 5, nblk = is_vector ? (int)(ext / (int)sizeof(int) + stride - blk) / stride : 0;
    int stag = 2 * seed + t_rank, rtag = 2 * seed + peer;
    void *s = mem_alloc(skind, n), *r = mem_alloc(rkind, n + SLACK);
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}; /* [0] receive, [1] send */
    int rc = MPI_ERR_OTHER;
    char label[200];

    if (mode != P_SEND_C) rc = MPI_Recv_init(r, count, dt, peer, rtag, comm, &rq[0]);
#ifdef HAVE_C_CALLS
    else rc = MPI_Recv_init_c(r, (MPI_Count)count, dt, peer, rtag, comm, &rq[0]);
#endif
    CHECK(rc == MPI_SUCCESS, "%s: receive init returned %s", pname[mode], error_name(error_class(rc)));
    switch (mode) {
    case P_SEND: rc = MPI_Send_init(s, count, dt, peer, stag, comm, &rq[1]); break;
    case P_SSEND: rc = MPI_Ssend_init(s, count, dt, peer, stag, comm, &rq[1]); break;
    case P_BSEND: rc = MPI_Bsend_init(s, count, dt, peer, stag, comm, &rq[1]); break;
    case P_RSEND: rc = MPI_Rsend_init(s, count, dt, peer, stag, comm, &rq[1]); break;
#ifdef HAVE_C_CALLS
    case P_SEND_C: rc = MPI_Send_init_c(s, (MPI_Count)count, dt, peer, stag, comm, &rq[1]); break;
#endif
    }
    CHECK(rc == MPI_SUCCESS, "%s: send init returned %s", pname[mode], error_name(error_class(rc)));
    /* (nothing is staged for an empty message) */
    int staged_both = skind == MEM_DEVICE && rkind == MEM_DEVICE && n > 0;
    if (staged_both) check_tracked_at_least(2, pname[mode]);

    for (int round = 0; round < NROUNDS; round++) {
        int rseed = seed * 16 + round;
        snprintf(label, sizeof label, "%s %s count %d round %d (%s) rank %d", pname[mode],
                 is_vector ? "vector" : type_name(dt), count, round,
                 mode == P_RSEND ? "Start, handshake, Start+Waitall" : how_name[round], t_rank);
        /* new send data every round; the receive buffer poisoned (gaps: gap pattern) again */
        mem_pattern(s, n, t_rank, rseed);
        unsigned char *exp = (unsigned char *)xmalloc(n + SLACK);
        if (is_vector) {
            unsigned char *pat = pattern_new(n, peer, rseed);
            gap_fill(exp, n, rseed);
            for (int c = 0; c < count; c++)
                for (int b = 0; b < nblk; b++) {
                    size_t off = (size_t)c * (size_t)ext + (size_t)b * stride * sizeof(int);
                    memcpy(exp + off, pat + off, blk * sizeof(int));
                }
            free(pat);
            unsigned char *init = (unsigned char *)xmalloc(n + SLACK);
            gap_fill(init, n, rseed);
            poison_fill(init + n, SLACK);
            mem_put(r, init, n + SLACK);
            free(init);
        } else {
            pattern_fill(exp, n, peer, rseed);
            mem_poison(r, n + SLACK);
        }
        poison_fill(exp + n, SLACK);

        MPI_Status st[2];
        status_init(&st[0]);
        status_init(&st[1]);
        if (mode == P_RSEND) {
            MPI_CHECK(MPI_Start(&rq[0]));
            handshake(); /* the peer's receive is started too */
            MPI_CHECK(MPI_Start(&rq[1]));
            MPI_CHECK(MPI_Waitall(2, rq, st));
        } else if (round == 0) {
            MPI_CHECK(MPI_Start(&rq[0]));
            MPI_CHECK(MPI_Start(&rq[1]));
            MPI_CHECK(MPI_Wait(&rq[0], &st[0]));
            MPI_CHECK(MPI_Wait(&rq[1], &st[1]));
        } else if (round == 1) {
            MPI_Request both[2] = {rq[1], rq[0]}; /* send first: order must not matter */
            MPI_CHECK(MPI_Startall(2, both));
            MPI_Status bst[2];
            MPI_CHECK(MPI_Waitall(2, both, bst));
            rq[1] = both[0];
            rq[0] = both[1];
            st[0] = bst[1];
        } else {
            MPI_CHECK(MPI_Start(&rq[1]));
            MPI_CHECK(MPI_Start(&rq[0]));
            int flag = 0;
            while (!flag) MPI_CHECK(MPI_Testall(2, rq, &flag, st));
        }
        if (mode == P_BSEND) handshake(); /* our buffered message was received */
        CHECK(rq[0] != MPI_REQUEST_NULL && rq[1] != MPI_REQUEST_NULL,
              "%s: a persistent request was freed by its completion", label);

        unsigned char *got = mem_fetch(r, n + SLACK);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        if (is_vector) {
            check_status(&st[0], dt, peer, rtag, count, "%s", label);
            trace_add(tr, label, got, n + SLACK, &st[0], MPI_BYTE, MPI_SUCCESS);
        } else {
            check_status(&st[0], dt, peer, rtag, count, "%s", label);
            trace_add(tr, label, got, n + SLACK, &st[0], dt, MPI_SUCCESS);
        }
        /* the send buffer is unchanged */
        unsigned char *sg = mem_fetch(s, n), *se = pattern_new(n, t_rank, rseed);
        check_bytes(sg, se, n, "%s: send buffer changed", label);
        free(sg);
        free(se);
        free(got);
        free(exp);
    }
    if (staged_both) check_tracked_at_least(2, "after the rounds");
    MPI_CHECK(MPI_Request_free(&rq[0]));
    MPI_CHECK(MPI_Request_free(&rq[1]));
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL,
          "%s: MPI_Request_free did not set MPI_REQUEST_NULL", pname[mode]);
    mem_free(s);
    mem_free(r);
}

/* Persistent requests that are never started, then freed. */
static void never_started(int skind, int rkind)
{
    int peer = 1 - t_rank;
    void *s = mem_alloc(skind, 4096), *r = mem_alloc(rkind, 4096);
    mem_pattern(s, 4096, t_rank, 77);
    mem_poison(r, 4096);
    MPI_Request rq[4];
    MPI_CHECK(MPI_Send_init(s, 1024, MPI_INT, peer, 31000, comm, &rq[0]));
    MPI_CHECK(MPI_Ssend_init(s, 1024, MPI_INT, peer, 31001, comm, &rq[1]));
    MPI_CHECK(MPI_Recv_init(r, 1024, MPI_INT, peer, 31000, comm, &rq[2]));
    MPI_CHECK(MPI_Recv_init(r, 1024, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &rq[3]));
    for (int i = 0; i < 4; i++) {
        MPI_CHECK(MPI_Request_free(&rq[i]));
        CHECK(rq[i] == MPI_REQUEST_NULL, "never-started request %d not set to MPI_REQUEST_NULL", i);
    }
    unsigned char *got = mem_fetch(r, 4096);
    check_all(got, POISON_BYTE, 4096, "receive buffer of never-started requests");
    free(got);
    mem_free(s);
    mem_free(r);
}

/* Does the library send the current data when a persistent buffered send of a rendezvous-
 * size message is started again? (Open MPI 4.1.4 does not: the second start delivers stale
 * and zero bytes.) Host buffers only. */
static int probe_bsend_restart(void)
{
    const int n = 40000;
    int peer = 1 - t_rank, ok = 1;
    unsigned char *a = (unsigned char *)xmalloc(n), *b = (unsigned char *)xmalloc(n);
    MPI_Request rq[2];
    MPI_CHECK(MPI_Recv_init(b, n, MPI_BYTE, peer, 31500, comm, &rq[0]));
    MPI_CHECK(MPI_Bsend_init(a, n, MPI_BYTE, peer, 31500, comm, &rq[1]));
    for (int round = 0; round < 2; round++) {
        memset(a, round + 1, n);
        memset(b, POISON_BYTE, n);
        MPI_CHECK(MPI_Startall(2, rq));
        MPI_Status sts[2];
        MPI_CHECK(MPI_Waitall(2, rq, sts));
        handshake();
        for (int i = 0; i < n; i++)
            if (b[i] != round + 1) ok = 0;
    }
    MPI_CHECK(MPI_Request_free(&rq[0]));
    MPI_CHECK(MPI_Request_free(&rq[1]));
    free(a);
    free(b);
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    return all;
}

static void run(int skind, int rkind, struct trace *tr)
{
    struct {
        MPI_Datatype dt;
        int count;
    } cases[4] = {{MPI_INT, 0}, {MPI_CHAR, 1}, {MPI_DOUBLE, 4095}, {MPI_INT, BIG}};
    int seed = 0;
    for (int mode = 0; mode < P_N; mode++) {
        if (mode == P_SEND_C && !have_c) continue;
        for (int c = 0; c < 4; c++) {
            ++seed;
            /* the largest count with every other mode only, to keep the run short */
            if (cases[c].count == BIG && mode % 2) continue;
            if (mode == P_BSEND && !bsend_restart_ok && cases[c].count * type_size(cases[c].dt) > 1024)
                continue;
            persist_case(tr, skind, rkind, mode, cases[c].dt, cases[c].count, seed, 0);
        }
    }
    MPI_Datatype vt;
    MPI_CHECK(MPI_Type_vector(1000, 3, 5, MPI_INT, &vt));
    MPI_CHECK(MPI_Type_commit(&vt));
    persist_case(tr, skind, rkind, P_SEND, vt, 3, ++seed, 1);
    persist_case(tr, skind, rkind, P_RSEND, vt, 1, ++seed, 1);
    MPI_Type_free(&vt);
    never_started(skind, rkind);
    MPI_CHECK(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("nb_persistent runs on 2 ranks, not %d", t_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
#ifdef HAVE_C_CALLS
    have_c = dlsym(RTLD_DEFAULT, "MPI_Send_init_c") != NULL;
    if (!have_c && t_rank == 0) note("the MPI library does not export MPI_Send_init_c: skipped");
#else
    if (t_rank == 0) note("mpi.h has no large-count (_c) calls: Send_init_c skipped");
#endif

    int packsz = 0;
    MPI_Pack_size(BIG, MPI_INT, comm, &packsz);
    int bsize = packsz + 4 * MPI_BSEND_OVERHEAD + 4096;
    void *battach = xmalloc((size_t)bsize);
    MPI_CHECK(MPI_Buffer_attach(battach, bsize));

    bsend_restart_ok = probe_bsend_restart();
    if (!bsend_restart_ok && t_rank == 0)
        note("this MPI sends stale data when a persistent buffered send of 40000 bytes is started "
             "again (host buffers): Bsend_init cases only up to 1 KiB");

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

    struct cudampi_stats s;
    if (get_stats(&s)) {
        note("after every request was freed: staging_leased %llu, requests_tracked %llu",
             (unsigned long long)s.staging_leased, (unsigned long long)s.requests_tracked);
        CHECK(s.staging_leased == 0, "%llu staging buffers still leased after all requests were freed",
              (unsigned long long)s.staging_leased);
        CHECK(s.requests_tracked == 0, "%llu requests still tracked after all were freed",
              (unsigned long long)s.requests_tracked);
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
