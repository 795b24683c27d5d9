// cudampi-test: ranks=2 without-shim=crash link=yes timeout=120
/* Completion order through MPI_Waitany / MPI_Testany / MPI_Waitsome / MPI_Testsome on device
 * receives. Rank 1 posts one MPI_Irecv per slot of a 10-slot array (distinct tags, sizes from
 * 1 byte to 1 MiB, device buffers except one host buffer, one slot MPI_REQUEST_NULL), all
 * poisoned. Rank 0 sends the messages in a fixed permuted order.
 *
 * Ordered: before each message rank 1 sends rank 0 a zero-byte "go", so only one message is
 *   ever in flight and the completion order is determined: every call must report exactly the
 *   slot just sent (Testany/Testsome are called until they report something), its data must be
 *   in the device buffer when the call returns, every slot not yet reported must still be
 *   poison, and a last call must report MPI_UNDEFINED.
 * Free: rank 0 sends everything at once; the calls are repeated until MPI_UNDEFINED; every
 *   slot is reported exactly once, never the null one, with its data in place when reported.
 * The order, data and statuses are compared with the same run on host buffers. */
#include "common.h"

#define SLACK 16
#define NS 10
#define NULLSLOT 2
#define HOSTSLOT 5
#define TAG_GO 999
static const size_t ssize[NS] = {1, 4096 + 5, 0, 65536 + 7, 33, 1000, 1 << 20, 2, 777, 300000};
static const int perm[NS - 1] = {6, 0, 9, 3, 5, 1, 8, 4, 7};

enum { O_WAITANY, O_TESTANY, O_WAITSOME, O_TESTSOME, O_N };
static const char *oname[O_N] = {"Waitany", "Testany", "Waitsome", "Testsome"};

static MPI_Comm comm;

static int tag_of(int seed, int slot) { return (seed * NS + slot) % 30000; }

/* One completion call; returns how many indices it reported in idx (0: nothing yet,
 * -1: MPI_UNDEFINED). */
static int one_call(int m, MPI_Request *rq, int *idx, MPI_Status *st)
{
    int flag = 0, out = 0, i = -1;
    switch (m) {
    case O_WAITANY:
        MPI_CHECK(MPI_Waitany(NS, rq, &i, st));
        if (i == MPI_UNDEFINED) return -1;
        idx[0] = i;
        return 1;
    case O_TESTANY:
        MPI_CHECK(MPI_Testany(NS, rq, &i, &flag, st));
        if (!flag) return 0;
        if (i == MPI_UNDEFINED) return -1;
        idx[0] = i;
        return 1;
    case O_WAITSOME:
        MPI_CHECK(MPI_Waitsome(NS, rq, &out, idx, st));
        return out == MPI_UNDEFINED ? -1 : out;
    case O_TESTSOME:
        MPI_CHECK(MPI_Testsome(NS, rq, &out, idx, st));
        return out == MPI_UNDEFINED ? -1 : out;
    }
    return -1;
}

static void expected(unsigned char *e, int slot, int seed)
{
    pattern_fill(e, ssize[slot], 0, tag_of(seed, slot));
    poison_fill(e + ssize[slot], SLACK);
}

/* ordered: 1 = handshake per message */
static void run(int m, int ordered, int kind, int seed, struct trace *tr)
{
    void *buf[NS] = {0};
    MPI_Request rq[NS];
    char lab[200];
    const char *how = ordered ? "ordered" : "free";
    for (int s = 0; s < NS; s++) {
        rq[s] = MPI_REQUEST_NULL;
        if (s == NULLSLOT) continue;
        buf[s] = mem_alloc(s == HOSTSLOT ? MEM_HOST : kind, ssize[s] + SLACK);
    }
    if (t_rank == 0) {
        for (int s = 0; s < NS; s++)
            if (buf[s]) mem_pattern(buf[s], ssize[s], 0, tag_of(seed, s));
        MPI_Request sq[NS - 1];
        for (int k = 0; k < NS - 1; k++) {
            int s = perm[k];
            if (ordered) {
                MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, comm, MPI_STATUS_IGNORE));
                MPI_CHECK(MPI_Isend(buf[s], (int)ssize[s], MPI_BYTE, 1, tag_of(seed, s), comm, &sq[0]));
                MPI_CHECK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));
            } else {
                MPI_CHECK(MPI_Isend(buf[s], (int)ssize[s], MPI_BYTE, 1, tag_of(seed, s), comm, &sq[k]));
            }
        }
        MPI_Status sst[NS - 1];
        if (!ordered) MPI_CHECK(MPI_Waitall(NS - 1, sq, sst));
    } else if (t_rank == 1) {
        for (int s = 0; s < NS; s++) {
            if (!buf[s]) continue;
            mem_poison(buf[s], ssize[s] + SLACK);
            MPI_CHECK(MPI_Irecv(buf[s], (int)ssize[s], MPI_BYTE, 0, tag_of(seed, s), comm, &rq[s]));
        }
        int reported[NS] = {0}, order[NS], norder = 0;
        unsigned char *at[NS] = {0};
        MPI_Status stat[NS];
        int k = 0, calls = 0, go = 0; /* go: "go" messages sent */
        unsigned char *e = (unsigned char *)xmalloc((1 << 20) + SLACK);
        for (;;) {
            if (ordered && k < NS - 1 && go == k) {
                MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, comm));
                go++;
            }
            int idx[NS];
            MPI_Status st[NS];
            for (int i = 0; i < NS; i++) status_init(&st[i]);
            int out = one_call(m, rq, idx, st);
            calls++;
            if (out < 0) break;
            if (!CHECK(out <= NS && norder + out <= NS - 1, "%s %s: %d more reported, %d before",
                       oname[m], how, out, norder))
                break;
            if (ordered && out > 0)
                CHECK(out == 1 && idx[0] == perm[k],
                      "%s ordered: reported %d slots, first %d; expected slot %d (message %d)",
                      oname[m], out, idx[0], perm[k], k);
            for (int j = 0; j < out; j++) {
                int s = idx[j];
                if (!CHECK(s >= 0 && s < NS && s != NULLSLOT, "%s %s: reported index %d", oname[m],
                           how, s))
                    continue;
                if (!CHECK(!reported[s], "%s %s: slot %d reported twice", oname[m], how, s))
                    continue;
                reported[s] = 1;
                order[norder++] = s;
                /* the data must be there now */
                at[s] = mem_fetch(buf[s], ssize[s] + SLACK);
                stat[s] = st[j];
                CHECK(rq[s] == MPI_REQUEST_NULL, "%s %s: slot %d reported but not freed", oname[m],
                      how, s);
            }
            if (ordered && out > 0) {
                k++;
                /* every slot not reported yet: its message was not even sent */
                for (int s = 0; s < NS; s++) {
                    if (!buf[s] || reported[s]) continue;
                    unsigned char *g = mem_fetch(buf[s], ssize[s] + SLACK);
                    check_all(g, POISON_BYTE, ssize[s] + SLACK,
                              "%s ordered, after %d messages: slot %d (not sent yet)", oname[m], k, s);
                    free(g);
                }
            }
            if (!CHECK(calls < 10000000, "%s %s: no end", oname[m], how)) break;
        }
        CHECK(norder == NS - 1, "%s %s: %d slots reported, expected %d", oname[m], how, norder,
              NS - 1);
        if (ordered) {
            snprintf(lab, sizeof lab, "%s ordered: completion order", oname[m]);
            trace_add(tr, lab, order, (size_t)norder * sizeof(int), NULL, MPI_BYTE, MPI_SUCCESS);
        }
        for (int s = 0; s < NS; s++) {
            if (!buf[s] || !at[s]) continue;
            snprintf(lab, sizeof lab, "%s %s: slot %d (%zu bytes) when reported", oname[m], how, s,
                     ssize[s]);
            expected(e, s, seed);
            check_bytes(at[s], e, ssize[s] + SLACK, "%s", lab);
            check_status(&stat[s], MPI_BYTE, 0, tag_of(seed, s), (int)ssize[s], "%s", lab);
            trace_add(tr, lab, at[s], ssize[s] + SLACK, &stat[s], MPI_BYTE, MPI_SUCCESS);
            free(at[s]);
        }
        free(e);
    }
    for (int s = 0; s < NS; s++) mem_free(buf[s]);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (t_size < 2) DIE("needs 2 ranks");
    int seed = 0;
    for (int ordered = 1; ordered >= 0; ordered--)
        for (int m = 0; m < O_N; m++) {
            struct trace ref = {0}, got = {0};
            seed++;
            run(m, ordered, MEM_HOST, seed, &ref);
            for (int rep = 0; rep < 2; rep++) {
                run(m, ordered, MEM_DEVICE, seed, &got);
                char what[64];
                snprintf(what, sizeof what, "%s %s device run %d", oname[m],
                         ordered ? "ordered" : "free", rep);
                trace_compare(&ref, &got, what);
                trace_free(&got);
            }
            trace_free(&ref);
        }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
