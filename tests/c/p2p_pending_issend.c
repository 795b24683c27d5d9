// cudampi-test: ranks=2 without-shim=pass timeout=90
/* Synchronous sends left pending while other calls look at them, on host buffers: the calls
 * and the order of mpi4py.util.pkl5 (mpi4py's test_util_pkl5, TestMPISelf, then COMM_WORLD).
 * Each message is pkl5's pair: an MPI_LONG_LONG header holding the length, then the bytes,
 * both MPI_Issend with tag 0.
 *   A. (testGetStatusAll) 19 messages to self on MPI_COMM_SELF, all 38 Issends pending:
 *      MPI_Request_get_status_all must say "not complete" and free nothing; then MPI_Probe,
 *      MPI_Get_elements and MPI_Recv take each message, MPI_Request_get_status_all is polled
 *      until it says complete, and MPI_Testall frees the requests.
 *   B. (testISSendAndRecv) one message at a time to self: MPI_Testall says not complete, the
 *      message is received (probe path), MPI_Waitall completes the sends; and to MPI_PROC_NULL.
 *   C. (testMProbe, testIMProbe) the same with MPI_Mprobe/MPI_Mrecv and MPI_Improbe/MPI_Imrecv.
 *   D. A ring on MPI_COMM_WORLD: Issends to the right, MPI_Improbe/MPI_Imrecv from the left.
 * MPI_Request_get_status_all (MPI 4.1) is looked up by symbol, as mpi4py's wheel binds it, and
 * left out where nothing defines it (the library alone, before 4.1), as mpi4py skips it. Under
 * cudampi it always resolves and must work: when it fails, part A is abandoned as mpi4py's test
 * is (its 38 sends stay unmatched on MPI_COMM_SELF), and part B then receives part A's messages
 * instead of its own and would wait forever for its own synchronous sends; every message is
 * checked before any wait, so the test reports that instead of hanging. */
#define COMMON_NO_CUDA
#include "common.h"

#define NMSG 19
#define SLACK 16
#define TAG 0

typedef int (*get_status_all_fn)(int, MPI_Request *, int *, MPI_Status *);
static get_status_all_fn get_status_all;

/* lengths differ from part to part too: a message of another part never passes for this one */
static size_t msg_len(int part, int i) { return 1 + (size_t)((part * NMSG + i) * 37 % 211); }

static long long hdr[4][NMSG];
static unsigned char *payload[4][NMSG]; /* per part A-D: a message of one part is not another's */

/* pkl5's send: header, then the bytes, as two pending synchronous sends */
static void issend_msg(MPI_Comm comm, int dest, int part, int i, MPI_Request *two)
{
    MPI_CHECK(MPI_Issend(&hdr[part][i], 1, MPI_LONG_LONG, dest, TAG, comm, &two[0]));
    MPI_CHECK(MPI_Issend(payload[part][i], (int)msg_len(part, i), MPI_BYTE, dest, TAG, comm, &two[1]));
}

/* Checks a received message against message i; a message of another part means that the sends
 * of that part were left unmatched, and waiting for this part's synchronous sends would hang. */
static void check_msg(long long got_hdr, const unsigned char *buf, int part, int i, int from, const char *how)
{
    size_t n = msg_len(part, i);
    int same = got_hdr == (long long)n;
    CHECK(same, "%s message %d: the header says %lld bytes, the message sent has %zu", how, i, got_hdr, n);
    if (same) same = check_bytes(buf, payload[part][i], n, "%s message %d", how, i);
    if (!same)
        DIE("%s received another message than message %d (from rank %d): the synchronous sends of an "
            "earlier part are still unmatched; waiting for this part's sends would never end",
            how, i, from);
}

/* pkl5's recv: MPI_Probe, MPI_Get_elements of the header type, MPI_Recv of header and bytes */
static void recv_probe(MPI_Comm comm, int src, int part, int i, const char *how)
{
    MPI_Status st;
    MPI_CHECK(MPI_Probe(src, TAG, comm, &st));
    int n = -1;
    MPI_CHECK(MPI_Get_elements(&st, MPI_LONG_LONG, &n));
    CHECK(n == 1, "%s message %d: the probed header holds %d elements", how, i, n);
    CHECK(st.MPI_SOURCE == src && st.MPI_TAG == TAG, "%s message %d: probe status source %d tag %d", how, i,
          st.MPI_SOURCE, st.MPI_TAG);
    long long h = -1;
    MPI_CHECK(MPI_Recv(&h, 1, MPI_LONG_LONG, st.MPI_SOURCE, st.MPI_TAG, comm, &st));
    size_t cap = (h >= 0 && h < 4096 ? (size_t)h : 0) + SLACK;
    unsigned char *buf = (unsigned char *)xmalloc(cap);
    poison_fill(buf, cap);
    MPI_CHECK(MPI_Recv(buf, (int)(cap - SLACK), MPI_BYTE, src, TAG, comm, &st));
    int count = -1;
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(count == (int)(cap - SLACK), "%s message %d: received %d bytes, header said %zu", how, i, count, cap - SLACK);
    check_msg(h, buf, part, i, src, how);
    check_all(buf + cap - SLACK, POISON_BYTE, SLACK, "%s message %d: past the end", how, i);
    free(buf);
}

/* pkl5's mprobe and mrecv (blocking) or improbe and imrecv, whose requests join `more` */
static void recv_matched(MPI_Comm comm, int src, int part, int i, int nonblocking, MPI_Request *more, const char *how,
                         long long *h, unsigned char *buf)
{
    MPI_Message m[2];
    MPI_Status st;
    for (int k = 0; k < 2; k++) {
        if (nonblocking) {
            int flag = 0;
            double t0 = MPI_Wtime();
            while (!flag && MPI_Wtime() - t0 < 20) MPI_CHECK(MPI_Improbe(src, TAG, comm, &flag, &m[k], &st));
            if (!flag) DIE("%s message %d: MPI_Improbe found nothing in 20 s", how, i);
        } else {
            MPI_CHECK(MPI_Mprobe(src, TAG, comm, &m[k], &st));
        }
        int n = -1;
        MPI_CHECK(MPI_Get_elements(&st, k == 0 ? MPI_LONG_LONG : MPI_BYTE, &n));
        CHECK(n == (k == 0 ? 1 : (int)msg_len(part, i)), "%s message %d part %d: %d elements probed", how, i, k, n);
    }
    if (nonblocking) {
        MPI_CHECK(MPI_Imrecv(h, 1, MPI_LONG_LONG, &m[0], &more[0]));
        MPI_CHECK(MPI_Imrecv(buf, (int)msg_len(part, i), MPI_BYTE, &m[1], &more[1]));
    } else {
        MPI_CHECK(MPI_Mrecv(h, 1, MPI_LONG_LONG, &m[0], &st));
        MPI_CHECK(MPI_Mrecv(buf, (int)msg_len(part, i), MPI_BYTE, &m[1], &st));
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK(count == (int)msg_len(part, i), "%s message %d: Mrecv status says %d bytes", how, i, count);
    }
    CHECK(m[0] == MPI_MESSAGE_NULL && m[1] == MPI_MESSAGE_NULL, "%s message %d: messages not set to null", how, i);
}

static int all_null(const MPI_Request *r, int n)
{
    for (int k = 0; k < n; k++)
        if (r[k] != MPI_REQUEST_NULL) return 0;
    return 1;
}

static int none_null(const MPI_Request *r, int n)
{
    for (int k = 0; k < n; k++)
        if (r[k] == MPI_REQUEST_NULL) return 0;
    return 1;
}

/* A. mpi4py's testGetStatusAll; returns 0 when it had to be abandoned */
static int part_a(MPI_Comm comm, int me)
{
    MPI_Request r[2 * NMSG];
    MPI_Status st[2 * NMSG];
    for (int i = 0; i < NMSG; i++) issend_msg(comm, me, 0, i, &r[2 * i]);
    if (get_status_all) {
        int flag = -1;
        int rc = get_status_all(2 * NMSG, r, &flag, st);
        if (rc != MPI_SUCCESS) {
            char es[MPI_MAX_ERROR_STRING];
            int el = 0;
            es[0] = 0;
            MPI_Error_string(rc, es, &el);
            CHECK(rc == MPI_SUCCESS, "MPI_Request_get_status_all on %d pending Issends returned %d (%s, class %s); "
                  "abandoning them as mpi4py's test does", 2 * NMSG, rc, es, error_name(error_class(rc)));
            return 0;
        }
        CHECK(flag == 0, "MPI_Request_get_status_all says %d before any message was received", flag);
        CHECK(none_null(r, 2 * NMSG), "MPI_Request_get_status_all freed a request");
    } else {
        note("MPI_Request_get_status_all is not defined here (the MPI library without cudampi): left out, as mpi4py does");
    }
    MPI_CHECK(MPI_Barrier(comm));
    for (int i = 0; i < NMSG; i++) recv_probe(comm, me, 0, i, "A (probe, recv)");
    int flag = 0;
    if (get_status_all) {
        double t0 = MPI_Wtime();
        while (!flag && MPI_Wtime() - t0 < 20) {
            for (int k = 0; k < 2 * NMSG; k++) status_init(&st[k]);
            MPI_CHECK(get_status_all(2 * NMSG, r, &flag, st));
        }
        CHECK(flag == 1, "MPI_Request_get_status_all still says %d 20 s after every message was received", flag);
        CHECK(none_null(r, 2 * NMSG), "MPI_Request_get_status_all freed a request");
        for (int k = 0; flag && k < 2 * NMSG; k++)
            CHECK(st[k].MPI_ERROR == MPI_SUCCESS || st[k].MPI_ERROR == 424242 /* left as status_init set it */,
                  "MPI_Request_get_status_all: status %d has error %d", k, st[k].MPI_ERROR);
    }
    if (!flag) MPI_CHECK(MPI_Waitall(2 * NMSG, r, MPI_STATUSES_IGNORE));
    flag = 0;
    MPI_CHECK(MPI_Testall(2 * NMSG, r, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag == 1 && all_null(r, 2 * NMSG), "A: MPI_Testall after completion: flag %d, requests %s", flag,
          all_null(r, 2 * NMSG) ? "freed" : "not freed");
    return 1;
}

/* B. mpi4py's testISSendAndRecv on this comm (to self, then to MPI_PROC_NULL) */
static void part_b(MPI_Comm comm, int me)
{
    MPI_Request r[2];
    for (int i = 0; i < NMSG; i++) {
        issend_msg(comm, me, 1, i, r);
        int flag = -1;
        MPI_CHECK(MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE));
        CHECK(flag == 0 && none_null(r, 2), "B message %d: MPI_Testall before the receive: flag %d", i, flag);
        recv_probe(comm, me, 1, i, "B (Issend to self)");
        MPI_CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(all_null(r, 2), "B message %d: MPI_Waitall left a request", i);
    }
    MPI_Status st;
    long long h = 7;
    MPI_CHECK(MPI_Issend(&h, 1, MPI_LONG_LONG, MPI_PROC_NULL, TAG, comm, &r[0]));
    MPI_CHECK(MPI_Wait(&r[0], &st));
    CHECK(r[0] == MPI_REQUEST_NULL, "B: Issend to MPI_PROC_NULL not freed");
    h = 42;
    MPI_CHECK(MPI_Recv(&h, 1, MPI_LONG_LONG, MPI_PROC_NULL, TAG, comm, &st));
    check_status(&st, MPI_LONG_LONG, MPI_PROC_NULL, MPI_ANY_TAG, 0, "B: receive from MPI_PROC_NULL");
    CHECK(h == 42, "B: a receive from MPI_PROC_NULL wrote %lld", h);
}

/* C. mpi4py's testMProbe/testIMProbe on this comm, to self */
static void part_c(MPI_Comm comm, int me)
{
    for (int nb = 0; nb < 2; nb++)
        for (int i = 0; i < NMSG; i++) {
            MPI_Request r[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            long long h = -1;
            unsigned char *buf = (unsigned char *)xmalloc(msg_len(2, i) + SLACK);
            poison_fill(buf, msg_len(2, i) + SLACK);
            issend_msg(comm, me, 2, i, r);
            const char *how = nb ? "C (Improbe, Imrecv)" : "C (Mprobe, Mrecv)";
            recv_matched(comm, me, 2, i, nb, &r[2], how, &h, buf);
            MPI_CHECK(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
            check_msg(h, buf, 2, i, me, how);
            check_all(buf + msg_len(2, i), POISON_BYTE, SLACK, "%s message %d: past the end", how, i);
            free(buf);
        }
}

/* D. a ring on MPI_COMM_WORLD: Issend to the right, Improbe/Imrecv from the left */
static void part_d(void)
{
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    for (int i = 0; i < NMSG; i++) {
        MPI_Request r[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        long long h = -1;
        unsigned char *buf = (unsigned char *)xmalloc(msg_len(3, i) + SLACK);
        poison_fill(buf, msg_len(3, i) + SLACK);
        issend_msg(MPI_COMM_WORLD, right, 3, i, r);
        recv_matched(MPI_COMM_WORLD, left, 3, i, i % 2, &r[2], "D (ring)", &h, buf);
        if (get_status_all) {
            int flag = 0;
            double t0 = MPI_Wtime();
            while (!flag && MPI_Wtime() - t0 < 20) MPI_CHECK(get_status_all(4, r, &flag, MPI_STATUSES_IGNORE));
            CHECK(flag == 1, "D message %d: MPI_Request_get_status_all never says complete", i);
        }
        MPI_CHECK(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
        check_msg(h, buf, 3, i, left, "D (ring)");
        check_all(buf + msg_len(3, i), POISON_BYTE, SLACK, "D message %d: past the end", i);
        free(buf);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    /* errors come back as codes, as in mpi4py */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    get_status_all = (get_status_all_fn)dlsym(RTLD_DEFAULT, "MPI_Request_get_status_all");
    if (shim_loaded()) CHECK(get_status_all != NULL, "cudampi is loaded but MPI_Request_get_status_all is not defined");
    for (int i = 0; i < NMSG; i++) {
        for (int part = 0; part < 4; part++) {
            /* the same on every rank: the ring compares with its own copy */
            hdr[part][i] = (long long)msg_len(part, i);
            payload[part][i] = (unsigned char *)xmalloc(msg_len(part, i));
            pattern_fill(payload[part][i], msg_len(part, i), 0, 100 * part + i);
        }
    }

    part_a(MPI_COMM_SELF, 0);
    part_b(MPI_COMM_SELF, 0);
    part_c(MPI_COMM_SELF, 0);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    part_d();

    for (int i = 0; i < NMSG; i++)
        for (int part = 0; part < 4; part++) free(payload[part][i]);
    return report_and_finalize();
}
