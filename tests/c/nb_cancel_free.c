// cudampi-test: ranks=2 without-shim=crash link=yes timeout=120
/* Cancelled and freed requests on device buffers, each sequence run on host buffers first and
 * then on device buffers, results compared (and with the sender's pattern):
 *  1. MPI_Cancel of a device MPI_Irecv that nothing matches, completed by MPI_Wait and by an
 *     MPI_Test loop: MPI_Test_cancelled true, the device buffer still all poison; the message
 *     sent afterwards with the same tag goes to the next receive, not to the cancelled one.
 *     MPI_Cancel of a device MPI_Irecv that was already matched: not cancelled, data there.
 *  2. MPI_Request_free of an ACTIVE device MPI_Irecv (eager and rendezvous sizes): the message
 *     sent afterwards must land in the device buffer while the rank only makes progress calls
 *     (MPI_Test on another request, MPI_Iprobe; at most 10 s).
 *  3. MPI_Request_free of ACTIVE device MPI_Isends, two in a row, received only after both
 *     were freed: both messages arrive intact (a staging buffer given back at the free would
 *     be reused by the second send).
 *  4. Under the shim: once all that completed, cudampi_get_stats reports staging_leased = 0
 *     and requests_tracked = 0 (after progress calls, at most 10 s).
 *  5. Freed active receives (device, eager and rendezvous; and a host one) on rank 0 whose
 *     messages rank 1 sends with MPI_Ssend before the end: after MPI_Finalize, rank 0 reads the
 *     buffers; they must hold the messages. So main ends by itself: the failure counts are
 *     reduced before MPI_Finalize, rank 0 adds its post-finalize checks and prints the one
 *     PASS/FAIL line, and every rank's exit code says whether it saw failures. */
#include "common.h"
#include "../../include/cudampi.h"

#define SLACK 16
#define BIGN ((1 << 20) + 3) /* MPI_INTs: a rendezvous-size message */
#define SMALLN 1000
#define TAG_ACK 32000
#define TAG_NEVER 32001
#define PROGRESS_SECONDS 10.0

static MPI_Comm comm;

#define STATS_UNSET 0xA5A5A5A5A5A5A5A5ull
typedef int (*stats_fn)(struct cudampi_stats *);

static int get_stats(struct cudampi_stats *s)
{
    if (!shim_loaded()) return 0;
    stats_fn f = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    if (!CHECK(f != NULL, "the shim is loaded but does not export cudampi_get_stats")) return 0;
    memset(s, 0xA5, sizeof *s);
    if (!CHECK(f(s) == 0, "cudampi_get_stats failed")) return 0;
    if (!CHECK(s->staging_leased != STATS_UNSET && s->requests_tracked != STATS_UNSET,
               "cudampi_get_stats does not fill staging_leased / requests_tracked"))
        return 0;
    return 1;
}

static void send_ack(int to) { MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, to, TAG_ACK, comm)); }
static void recv_ack(int from)
{
    MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, from, TAG_ACK, comm, MPI_STATUS_IGNORE));
}

static unsigned char *expect_pattern(size_t n, int src, int seed)
{
    unsigned char *e = (unsigned char *)xmalloc(n + SLACK);
    pattern_fill(e, n, src, seed);
    poison_fill(e + n, SLACK);
    return e;
}

/* ---- 1. cancel -------------------------------------------------------------------------- */
static void part_cancel(struct trace *tr, int kind, int count, int use_test, int seed)
{
    size_t n = (size_t)count * sizeof(int);
    char label[160];
    snprintf(label, sizeof label, "cancelled Irecv INT count %d (%s)", count,
             use_test ? "Test loop" : "Wait");
    if (t_rank == 1) {
        void *r1 = mem_alloc(kind, n + SLACK), *r2 = mem_alloc(kind, n + SLACK);
        mem_poison(r1, n + SLACK);
        mem_poison(r2, n + SLACK);
        MPI_Request rq;
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Irecv(r1, count, MPI_INT, use_test ? MPI_ANY_SOURCE : 0, seed, comm, &rq));
        MPI_CHECK(MPI_Cancel(&rq));
        int rc;
        if (use_test) {
            int flag = 0;
            do
                rc = MPI_Test(&rq, &flag, &st);
            while (rc == MPI_SUCCESS && !flag);
        } else {
            rc = MPI_Wait(&rq, &st);
        }
        CHECK(rc == MPI_SUCCESS && rq == MPI_REQUEST_NULL, "%s: completion returned %s", label,
              error_name(error_class(rc)));
        int cancelled = -1;
        MPI_CHECK(MPI_Test_cancelled(&st, &cancelled));
        CHECK(cancelled == 1, "%s: MPI_Test_cancelled says %d", label, cancelled);
        unsigned char *got = mem_fetch(r1, n + SLACK);
        check_all(got, POISON_BYTE, n + SLACK, "%s: buffer of the cancelled receive", label);
        trace_add(tr, label, got, n + SLACK, NULL, MPI_INT, rc);
        trace_add(tr, "cancelled flag", &cancelled, sizeof cancelled, NULL, MPI_INT, MPI_SUCCESS);
        free(got);

        /* the message with that tag, sent now, goes to the next receive */
        send_ack(0);
        status_init(&st);
        MPI_CHECK(MPI_Irecv(r2, count, MPI_INT, 0, seed, comm, &rq));
        rc = MPI_Wait(&rq, &st);
        snprintf(label, sizeof label, "receive after the cancelled one, INT count %d", count);
        got = mem_fetch(r2, n + SLACK);
        unsigned char *exp = expect_pattern(n, 0, seed);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        check_status(&st, MPI_INT, 0, seed, count, "%s", label);
        trace_add(tr, label, got, n + SLACK, &st, MPI_INT, rc);
        free(got);
        got = mem_fetch(r1, n + SLACK);
        check_all(got, POISON_BYTE, n + SLACK, "%s: cancelled receive's buffer afterwards", label);
        free(got);
        free(exp);
        mem_free(r1);
        mem_free(r2);
    } else {
        void *s = mem_alloc(kind, n);
        mem_pattern(s, n, 0, seed);
        recv_ack(1);
        MPI_CHECK(MPI_Send(s, count, MPI_INT, 1, seed, comm));
        mem_free(s);
    }
}

/* MPI_Cancel of a receive that already matched: not cancelled, the data arrived. */
static void part_cancel_late(struct trace *tr, int kind, int seed)
{
    const int count = 100; /* eager: matched while rank 1 waits for the later ack */
    size_t n = count * sizeof(int);
    if (t_rank == 1) {
        void *r = mem_alloc(kind, n + SLACK);
        mem_poison(r, n + SLACK);
        MPI_Request rq;
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Irecv(r, count, MPI_INT, 0, seed, comm, &rq));
        send_ack(0);
        recv_ack(0); /* sent after the data: messages from one sender do not overtake */
        MPI_CHECK(MPI_Cancel(&rq));
        int rc = MPI_Wait(&rq, &st), cancelled = -1;
        MPI_CHECK(MPI_Test_cancelled(&st, &cancelled));
        const char *label = "Cancel of a matched Irecv INT count 100";
        CHECK(cancelled == 0, "%s: MPI_Test_cancelled says %d", label, cancelled);
        unsigned char *got = mem_fetch(r, n + SLACK), *exp = expect_pattern(n, 0, seed);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        check_status(&st, MPI_INT, 0, seed, count, "%s", label);
        trace_add(tr, label, got, n + SLACK, &st, MPI_INT, rc);
        free(got);
        free(exp);
        mem_free(r);
    } else {
        void *s = mem_alloc(kind, n);
        mem_pattern(s, n, 0, seed);
        recv_ack(1);
        MPI_CHECK(MPI_Send(s, count, MPI_INT, 1, seed, comm));
        send_ack(1);
        mem_free(s);
    }
}

/* ---- 2. freed active receive, progress calls only ------------------------------------------ */
static void part_free_recv(struct trace *tr, int kind, int count, int seed)
{
    size_t n = (size_t)count * sizeof(int);
    char label[160];
    snprintf(label, sizeof label, "freed active Irecv INT count %d, after progress calls", count);
    if (t_rank == 1) {
        void *r = mem_alloc(kind, n + SLACK);
        mem_poison(r, n + SLACK);
        MPI_Request rq, other;
        MPI_CHECK(MPI_Irecv(r, count, MPI_INT, 0, seed, comm, &rq));
        MPI_CHECK(MPI_Request_free(&rq));
        CHECK(rq == MPI_REQUEST_NULL, "%s: MPI_Request_free did not set MPI_REQUEST_NULL", label);
        int dummy = 0;
        MPI_CHECK(MPI_Irecv(&dummy, 1, MPI_INT, 0, TAG_NEVER, comm, &other));
        send_ack(0);
        unsigned char *exp = expect_pattern(n, 0, seed), *got = (unsigned char *)xmalloc(n + SLACK);
        double t0 = MPI_Wtime();
        int calls = 0, landed = 0;
        while (MPI_Wtime() - t0 < PROGRESS_SECONDS) {
            for (int i = 0; i < 50; i++, calls++) {
                int flag = 0;
                MPI_Status st;
                MPI_CHECK(MPI_Test(&other, &flag, &st));
                MPI_CHECK(MPI_Iprobe(0, TAG_NEVER + 1, comm, &flag, &st));
            }
            mem_get(got, r, n + SLACK);
            if (memcmp(got, exp, n + SLACK) == 0) {
                landed = 1;
                break;
            }
        }
        if (!landed)
            note("%s: not all there after %d progress calls (%.1f s)", label, calls, MPI_Wtime() - t0);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        trace_add(tr, label, got, n + SLACK, NULL, MPI_INT, MPI_SUCCESS);
        MPI_Status st;
        MPI_CHECK(MPI_Cancel(&other));
        MPI_CHECK(MPI_Wait(&other, &st));
        free(got);
        free(exp);
        mem_free(r);
        send_ack(0); /* rank 0 may free its send buffer */
    } else {
        void *s = mem_alloc(kind, n);
        mem_pattern(s, n, 0, seed);
        recv_ack(1);
        MPI_CHECK(MPI_Send(s, count, MPI_INT, 1, seed, comm));
        recv_ack(1);
        mem_free(s);
    }
}

/* ---- 3. freed active sends ----------------------------------------------------------------- */
static void part_free_send(struct trace *tr, int kind, int count, int seed)
{
    size_t n = (size_t)count * sizeof(int);
    char label[160];
    if (t_rank == 0) {
        void *s1 = mem_alloc(kind, n), *s2 = mem_alloc(kind, n);
        mem_pattern(s1, n, 0, seed);
        mem_pattern(s2, n, 0, seed + 1);
        MPI_Request rq;
        MPI_CHECK(MPI_Isend(s1, count, MPI_INT, 1, seed, comm, &rq));
        MPI_CHECK(MPI_Request_free(&rq));
        CHECK(rq == MPI_REQUEST_NULL, "freed Isend: MPI_Request_free did not set MPI_REQUEST_NULL");
        MPI_CHECK(MPI_Isend(s2, count, MPI_INT, 1, seed + 1, comm, &rq));
        MPI_CHECK(MPI_Request_free(&rq));
        send_ack(1); /* only now does rank 1 post its receives */
        recv_ack(1); /* both arrived: the send buffers may go */
        mem_free(s1);
        mem_free(s2);
    } else {
        recv_ack(0);
        for (int i = 0; i < 2; i++) {
            void *r = mem_alloc(kind, n + SLACK);
            mem_poison(r, n + SLACK);
            MPI_Status st;
            status_init(&st);
            int rc = MPI_Recv(r, count, MPI_INT, 0, seed + i, comm, &st);
            snprintf(label, sizeof label, "freed active Isend #%d INT count %d", i + 1, count);
            unsigned char *got = mem_fetch(r, n + SLACK), *exp = expect_pattern(n, 0, seed + i);
            check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
            check_status(&st, MPI_INT, 0, seed + i, count, "%s", label);
            trace_add(tr, label, got, n + SLACK, &st, MPI_INT, rc);
            free(got);
            free(exp);
            mem_free(r);
        }
        send_ack(0);
    }
}

static void run(int kind, struct trace *tr)
{
    part_cancel(tr, kind, SMALLN, 0, 101);
    part_cancel(tr, kind, BIGN, 1, 102);
    part_cancel_late(tr, kind, 103);
    part_free_recv(tr, kind, SMALLN, 111);
    part_free_recv(tr, kind, BIGN, 112);
    part_free_send(tr, kind, SMALLN, 121);
    part_free_send(tr, kind, BIGN, 123);
    MPI_CHECK(MPI_Barrier(comm));
}

/* ---- 4. nothing left staged ---------------------------------------------------------------- */
static void check_nothing_tracked(void)
{
    struct cudampi_stats s;
    if (!get_stats(&s)) return;
    double t0 = MPI_Wtime();
    MPI_Request other;
    int dummy = 0;
    MPI_CHECK(MPI_Irecv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, TAG_NEVER, comm, &other));
    while ((s.staging_leased || s.requests_tracked) && MPI_Wtime() - t0 < PROGRESS_SECONDS) {
        int flag;
        MPI_Status st;
        MPI_CHECK(MPI_Test(&other, &flag, &st));
        MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER + 1, comm, &flag, &st));
        if (!get_stats(&s)) break;
    }
    MPI_Status st;
    MPI_CHECK(MPI_Cancel(&other));
    MPI_CHECK(MPI_Wait(&other, &st));
    note("after every request completed: staging_leased %llu, requests_tracked %llu (%.2f s of "
         "progress calls)", (unsigned long long)s.staging_leased,
         (unsigned long long)s.requests_tracked, MPI_Wtime() - t0);
    CHECK(s.staging_leased == 0, "%llu staging buffers still leased after every request completed",
          (unsigned long long)s.staging_leased);
    CHECK(s.requests_tracked == 0, "%llu requests still tracked after every request completed",
          (unsigned long long)s.requests_tracked);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("nb_cancel_free runs on 2 ranks, not %d", t_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    const char *libname = mpi_library_name(); /* cached now: printed after MPI_Finalize */

    struct trace ref = {0}, got = {0};
    run(MEM_HOST, &ref);
    run(MEM_DEVICE, &got);
    trace_compare(&ref, &got, "device");
    CHECK(ref.n > 0 || t_rank == 0, "rank %d recorded nothing", t_rank);
    trace_free(&ref);
    trace_free(&got);
    check_nothing_tracked();

    /* ---- 5. freed receives completed only by the end: checked after MPI_Finalize ---- */
    struct {
        int kind, count, seed;
        void *buf;
    } pf[3] = {{MEM_DEVICE, SMALLN, 201, NULL}, {MEM_DEVICE, BIGN, 202, NULL}, {MEM_HOST, SMALLN, 203, NULL}};
    if (t_rank == 0) {
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)pf[i].count * sizeof(int);
            pf[i].buf = mem_alloc(pf[i].kind, n + SLACK);
            mem_poison(pf[i].buf, n + SLACK);
            MPI_Request rq;
            MPI_CHECK(MPI_Irecv(pf[i].buf, pf[i].count, MPI_INT, 1, pf[i].seed, comm, &rq));
            MPI_CHECK(MPI_Request_free(&rq));
        }
        send_ack(1);
    } else {
        recv_ack(0);
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)pf[i].count * sizeof(int);
            void *s = mem_alloc(pf[i].kind, n);
            mem_pattern(s, n, 1, pf[i].seed);
            MPI_CHECK(MPI_Ssend(s, pf[i].count, MPI_INT, 0, pf[i].seed, comm));
            mem_free(s);
        }
    }
    MPI_Comm_free(&comm);

    int total = 0;
    MPI_Allreduce(&t_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int shim = shim_loaded();
    MPI_Finalize();

    int post = 0;
    if (t_rank == 0) {
        int before = t_failures;
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)pf[i].count * sizeof(int);
            unsigned char *g = mem_fetch(pf[i].buf, n + SLACK), *e = expect_pattern(n, 1, pf[i].seed);
            check_bytes(g, e, n + SLACK, "freed active Irecv (%s, INT count %d), read after MPI_Finalize",
                        mem_kind_name(pf[i].kind), pf[i].count);
            free(g);
            free(e);
            mem_free(pf[i].buf);
        }
        post = t_failures - before;
        if (total + post)
            printf("FAIL nb_cancel_free (%d failed checks, %d of them after MPI_Finalize; shim %s, "
                   "%s memory, %d ranks, %s)\n", total + post, post, shim ? "loaded" : "not loaded",
                   host_mode() ? "host-mode" : "device", t_size, libname);
        else
            printf("PASS nb_cancel_free\n");
        fflush(stdout);
    }
    return (total + post) ? 1 : 0;
}
