// cudampi-test: ranks=2 without-shim=crash
/* Matched probes and probes followed by receives into device buffers:
 *   MPI_Mprobe + MPI_Get_count + MPI_Mrecv, MPI_Probe + MPI_Recv, an MPI_Improbe loop +
 *   MPI_Mrecv, an MPI_Iprobe loop + MPI_Recv, and MPI_Mrecv of MPI_MESSAGE_NO_PROC (from an
 *   MPI_Mprobe on MPI_PROC_NULL) into a device buffer, which must stay untouched.
 * Run with placements H->H (reference), D->D, H->D, D->H, managed->pool; the received bytes
 * (with poisoned slack) and statuses are compared with the host run and the pattern. */
#include "common.h"

#define SLACK 16
static MPI_Comm comm;

enum { P_MPROBE, P_PROBE, P_IMPROBE, P_IPROBE, P_N };
static const char *pname[] = {"Mprobe+Mrecv", "Probe+Recv", "Improbe loop+Mrecv", "Iprobe loop+Recv"};

static void run(int skind, int rkind, const char *plname, struct trace *tr)
{
    MPI_Datatype types[2] = {MPI_INT, MPI_CHAR};
    const int counts[2][4] = {{0, 5, 70000, 3}, {1, 1024 * 1024 + 1, 17, 0}};
    int seed = 0;
    char label[160];
    for (int how = 0; how < P_N; how++)
        for (int ti = 0; ti < 2; ti++)
            for (int ci = 0; ci < 4; ci++) {
                MPI_Datatype dt = types[ti];
                int count = counts[ti][ci];
                size_t n = (size_t)count * type_size(dt);
                int tag = 50 + (++seed);
                snprintf(label, sizeof label, "%s %s count %d", pname[how], type_name(dt), count);
                if (t_rank == 1) {
                    void *s = mem_alloc(skind, n);
                    mem_pattern(s, n, t_rank, seed);
                    MPI_CHECK(MPI_Send(s, count, dt, 0, tag, comm));
                    mem_free(s);
                } else if (t_rank == 0) {
                    MPI_Status pst, st;
                    MPI_Message msg = MPI_MESSAGE_NULL;
                    int flag = 0;
                    status_init(&pst);
                    switch (how) {
                    case P_MPROBE:
                        MPI_CHECK(MPI_Mprobe(1, tag, comm, &msg, &pst));
                        break;
                    case P_PROBE:
                        MPI_CHECK(MPI_Probe(MPI_ANY_SOURCE, tag, comm, &pst));
                        break;
                    case P_IMPROBE:
                        while (!flag) MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &pst));
                        break;
                    case P_IPROBE:
                        while (!flag) MPI_CHECK(MPI_Iprobe(1, MPI_ANY_TAG, comm, &flag, &pst));
                        break;
                    }
                    check_status(&pst, dt, 1, tag, count, "%s: %s probe status", plname, label);
                    int got = status_count(&pst, dt);
                    if (got < 0 || got > count) got = count;
                    size_t rb = (size_t)got * type_size(dt) + SLACK;
                    void *r = mem_alloc(rkind, rb);
                    mem_poison(r, rb);
                    status_init(&st);
                    if (how == P_MPROBE || how == P_IMPROBE)
                        MPI_CHECK(MPI_Mrecv(r, got, dt, &msg, &st));
                    else
                        MPI_CHECK(MPI_Recv(r, got, dt, pst.MPI_SOURCE, pst.MPI_TAG, comm, &st));
                    CHECK(msg == MPI_MESSAGE_NULL, "%s: %s: message handle not reset", plname, label);
                    check_status(&st, dt, 1, tag, count, "%s: %s receive status", plname, label);
                    unsigned char *h = mem_fetch(r, rb), *e = (unsigned char *)xmalloc(rb);
                    pattern_fill(e, n, 1, seed);
                    poison_fill(e + n, SLACK);
                    check_bytes(h, e, rb, "%s: %s", plname, label);
                    trace_add(tr, label, h, rb, &st, dt, MPI_SUCCESS);
                    free(h);
                    free(e);
                    mem_free(r);
                }
            }

    /* MPI_MESSAGE_NO_PROC */
    {
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Mprobe(MPI_PROC_NULL, 3, comm, &msg, &st));
        CHECK(msg == MPI_MESSAGE_NO_PROC, "%s: Mprobe(PROC_NULL) did not give MPI_MESSAGE_NO_PROC",
              plname);
        check_status(&st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0, "%s: Mprobe(PROC_NULL)", plname);
        void *r = mem_alloc(rkind, 64);
        mem_poison(r, 64);
        status_init(&st);
        MPI_CHECK(MPI_Mrecv(r, 16, MPI_INT, &msg, &st));
        check_status(&st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0, "%s: Mrecv(NO_PROC)", plname);
        unsigned char *h = mem_fetch(r, 64);
        check_all(h, POISON_BYTE, 64, "%s: Mrecv(MPI_MESSAGE_NO_PROC) must not touch the buffer",
                  plname);
        trace_add(tr, "Mrecv NO_PROC", h, 64, &st, MPI_INT, MPI_SUCCESS);
        free(h);
        mem_free(r);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    const int pl[5][2] = {{MEM_HOST, MEM_HOST},     {MEM_DEVICE, MEM_DEVICE}, {MEM_HOST, MEM_DEVICE},
                          {MEM_DEVICE, MEM_HOST},   {MEM_MANAGED, MEM_POOL}};
    const char *pn[5] = {"H->H", "D->D", "H->D", "D->H", "managed->pool"};
    struct trace ref = {0};
    run(pl[0][0], pl[0][1], pn[0], &ref);
    for (int p = 1; p < 5; p++) {
        struct trace got = {0};
        run(pl[p][0], pl[p][1], pn[p], &got);
        trace_compare(&ref, &got, pn[p]);
        trace_free(&got);
    }
    trace_free(&ref);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
