// cudampi-test: ranks=2 without-shim=crash
/* Statuses and edge cases of blocking receives on device buffers, each sequence run on host
 * buffers first and then on device placements, results compared:
 *  - MPI_ANY_SOURCE / MPI_ANY_TAG receives: status source/tag/count as in the host run;
 *  - MPI_PROC_NULL send, receive and sendrecv: status source PROC_NULL, tag ANY_TAG, count 0,
 *    device buffer untouched;
 *  - zero-count messages (also from a NULL buffer), received with count 0 and count > 0;
 *  - a receive count larger than the message: only the message's bytes change;
 *  - truncation on a communicator with MPI_ERRORS_RETURN: a too-small device receive returns
 *    the class a too-small host receive returns (MPI_ERR_TRUNCATE), bytes past the receive
 *    count keep their poison, and the next message still arrives intact. */
#include "common.h"

#define SLACK 32
static MPI_Comm comm;

struct place {
    const char *name;
    int skind, rkind;
};

static void run(const struct place *pl, struct trace *tr)
{
    int seed = 1000;
    char label[128];
    MPI_Status st;
    const int others = t_size - 1;

    /* 1. ANY_SOURCE / ANY_TAG: every rank > 0 sends (3*rank+1) ints with tag 100+rank to 0 */
    {
        int maxcount = 3 * t_size + 1;
        size_t rb = (size_t)maxcount * sizeof(int) + SLACK;
        for (int variant = 0; variant < 3; variant++) {
            seed++;
            MPI_Barrier(comm); /* no message of the next variant overtakes this one's */
            if (t_rank > 0) {
                int count = 3 * t_rank + 1;
                void *s = mem_alloc(pl->skind, (size_t)count * sizeof(int));
                mem_pattern(s, (size_t)count * sizeof(int), t_rank, seed + t_rank);
                MPI_CHECK(MPI_Send(s, count, MPI_INT, 0, 100 + t_rank, comm));
                mem_free(s);
            } else {
                /* results keyed by source, so arrival order does not matter */
                unsigned char **got = (unsigned char **)calloc((size_t)t_size, sizeof *got);
                MPI_Status *sts = (MPI_Status *)calloc((size_t)t_size, sizeof *sts);
                for (int i = 0; i < others; i++) {
                    void *r = mem_alloc(pl->rkind, rb);
                    mem_poison(r, rb);
                    status_init(&st);
                    int src = variant == 1 ? i + 1 : MPI_ANY_SOURCE;
                    int tag = variant == 2 ? 100 + i + 1 : MPI_ANY_TAG;
                    if (variant == 2) src = MPI_ANY_SOURCE;
                    MPI_CHECK(MPI_Recv(r, maxcount, MPI_INT, src, tag, comm, &st));
                    int s = st.MPI_SOURCE;
                    if (!CHECK(s >= 1 && s < t_size && !got[s], "%s: ANY receive variant %d: "
                               "source %d", pl->name, variant, s)) {
                        mem_free(r);
                        continue;
                    }
                    got[s] = mem_fetch(r, rb);
                    sts[s] = st;
                    mem_free(r);
                }
                for (int s = 1; s < t_size; s++) {
                    if (!got[s]) continue;
                    int count = 3 * s + 1;
                    size_t n = (size_t)count * sizeof(int);
                    unsigned char *exp = (unsigned char *)xmalloc(rb);
                    pattern_fill(exp, n, s, seed + s);
                    poison_fill(exp + n, rb - n);
                    snprintf(label, sizeof label, "ANY variant %d from %d", variant, s);
                    check_bytes(got[s], exp, rb, "%s: %s", pl->name, label);
                    check_status(&sts[s], MPI_INT, s, 100 + s, count, "%s: %s", pl->name, label);
                    trace_add(tr, label, got[s], rb, &sts[s], MPI_INT, MPI_SUCCESS);
                    free(exp);
                    free(got[s]);
                }
                free(got);
                free(sts);
            }
        }
    }

    /* 2. MPI_PROC_NULL: send, recv, sendrecv on device buffers (every rank, locally) */
    {
        size_t n = 256;
        void *b = mem_alloc(pl->rkind, n);
        void *s = mem_alloc(pl->skind, n);
        mem_poison(b, n);
        mem_pattern(s, n, t_rank, ++seed);
        MPI_CHECK(MPI_Send(s, 64, MPI_INT, MPI_PROC_NULL, 7, comm));
        status_init(&st);
        MPI_CHECK(MPI_Recv(b, 64, MPI_INT, MPI_PROC_NULL, 7, comm, &st));
        check_status(&st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0, "%s: Recv from PROC_NULL",
                     pl->name);
        trace_mem(tr, "Recv PROC_NULL", b, n, &st, MPI_INT, MPI_SUCCESS);
        status_init(&st);
        MPI_CHECK(MPI_Sendrecv(s, 64, MPI_INT, MPI_PROC_NULL, 8, b, 64, MPI_INT, MPI_PROC_NULL, 8,
                               comm, &st));
        check_status(&st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0, "%s: Sendrecv PROC_NULL",
                     pl->name);
        trace_mem(tr, "Sendrecv PROC_NULL", b, n, &st, MPI_INT, MPI_SUCCESS);
        status_init(&st);
        MPI_CHECK(MPI_Sendrecv_replace(b, 64, MPI_INT, MPI_PROC_NULL, 9, MPI_PROC_NULL, 9, comm,
                                       &st));
        check_status(&st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0,
                     "%s: Sendrecv_replace PROC_NULL", pl->name);
        unsigned char *h = mem_fetch(b, n);
        check_all(h, POISON_BYTE, n, "%s: PROC_NULL receives must not touch the buffer", pl->name);
        free(h);
        h = mem_fetch(s, n);
        unsigned char *e = pattern_new(n, t_rank, seed);
        check_bytes(h, e, n, "%s: PROC_NULL send must not touch the buffer", pl->name);
        free(h);
        free(e);
        mem_free(b);
        mem_free(s);
    }

    /* 3. zero-count messages; 4. receive count larger than the message */
    if (t_rank < 2) {
        int peer = 1 - t_rank;
        size_t rb = 400 * sizeof(int);
        if (t_rank == 1) {
            void *s = mem_alloc(pl->skind, 100 * sizeof(int));
            mem_pattern(s, 100 * sizeof(int), t_rank, ++seed);
            MPI_CHECK(MPI_Send(s, 0, MPI_INT, peer, 20, comm));
            MPI_CHECK(MPI_Send(NULL, 0, MPI_INT, peer, 21, comm));
            MPI_CHECK(MPI_Send(s, 0, MPI_INT, peer, 22, comm));
            MPI_CHECK(MPI_Send(s, 100, MPI_INT, peer, 23, comm));
            MPI_CHECK(MPI_Send(s, 1, MPI_INT, peer, 24, comm));
            mem_free(s);
        } else {
            ++seed;
            void *r = mem_alloc(pl->rkind, rb);
            mem_poison(r, rb);
            status_init(&st);
            MPI_CHECK(MPI_Recv(r, 0, MPI_INT, peer, 20, comm, &st));
            check_status(&st, MPI_INT, peer, 20, 0, "%s: zero-count recv", pl->name);
            trace_mem(tr, "zero count, recv count 0", r, rb, &st, MPI_INT, MPI_SUCCESS);
            status_init(&st);
            MPI_CHECK(MPI_Recv(r, 10, MPI_INT, peer, 21, comm, &st));
            check_status(&st, MPI_INT, peer, 21, 0, "%s: zero-count (NULL) recv count 10", pl->name);
            trace_mem(tr, "zero count from NULL, recv count 10", r, rb, &st, MPI_INT, MPI_SUCCESS);
            status_init(&st);
            MPI_CHECK(MPI_Recv(r, 400, MPI_INT, peer, 22, comm, &st));
            check_status(&st, MPI_INT, peer, 22, 0, "%s: zero-count recv count 400", pl->name);
            unsigned char *h = mem_fetch(r, rb);
            check_all(h, POISON_BYTE, rb, "%s: zero-count receives must not touch the buffer",
                      pl->name);
            free(h);
            trace_mem(tr, "zero count, recv count 400", r, rb, &st, MPI_INT, MPI_SUCCESS);
            /* 100 ints into a 400-int receive */
            status_init(&st);
            MPI_CHECK(MPI_Recv(r, 400, MPI_INT, peer, 23, comm, &st));
            check_status(&st, MPI_INT, peer, 23, 100, "%s: short message", pl->name);
            unsigned char *exp = (unsigned char *)xmalloc(rb);
            pattern_fill(exp, 100 * sizeof(int), peer, seed);
            poison_fill(exp + 100 * sizeof(int), rb - 100 * sizeof(int));
            h = mem_fetch(r, rb);
            check_bytes(h, exp, rb, "%s: 100 ints into a 400-int receive", pl->name);
            free(h);
            trace_mem(tr, "100 ints, recv count 400", r, rb, &st, MPI_INT, MPI_SUCCESS);
            /* one int with MPI_ANY_TAG into the same buffer: only the first int changes */
            status_init(&st);
            MPI_CHECK(MPI_Recv(r, 400, MPI_INT, peer, MPI_ANY_TAG, comm, &st));
            check_status(&st, MPI_INT, peer, 24, 1, "%s: one int", pl->name);
            h = mem_fetch(r, rb);
            check_bytes(h, exp, rb, "%s: 1 int into a 400-int receive", pl->name);
            free(h);
            free(exp);
            trace_mem(tr, "1 int, recv count 400", r, rb, &st, MPI_INT, MPI_SUCCESS);
            mem_free(r);
        }
    }

    /* 5. truncation with MPI_ERRORS_RETURN */
    if (t_rank < 2) {
        int peer = 1 - t_rank;
        seed++;
        if (t_rank == 1) {
            void *s = mem_alloc(pl->skind, 100 * sizeof(int));
            mem_pattern(s, 100 * sizeof(int), t_rank, seed);
            MPI_CHECK(MPI_Send(s, 100, MPI_INT, peer, 30, comm));
            mem_pattern(s, 50 * sizeof(int), t_rank, seed + 1);
            MPI_CHECK(MPI_Send(s, 50, MPI_INT, peer, 31, comm));
            mem_free(s);
        } else {
            size_t rb = 60 * sizeof(int) + SLACK;
            void *r = mem_alloc(pl->rkind, rb);
            mem_poison(r, rb);
            status_init(&st);
            int rc = MPI_Recv(r, 60, MPI_INT, peer, 30, comm, &st);
            int cls = error_class(rc);
            CHECK(cls == MPI_ERR_TRUNCATE, "%s: truncated receive returned class %s, expected "
                  "MPI_ERR_TRUNCATE %s", pl->name, error_name(cls), error_name(MPI_ERR_TRUNCATE));
            unsigned char *h = mem_fetch(r, rb);
            check_all(h + 60 * sizeof(int), POISON_BYTE, SLACK,
                      "%s: bytes past a truncated receive must keep their poison", pl->name);
            /* what lands inside the receive count on truncation is not defined by MPI: recorded
             * as error class + slack only, and the source/tag of the status */
            trace_add(tr, "truncated receive (slack)", h + 60 * sizeof(int), SLACK, NULL,
                      MPI_INT, rc);
            int srctag[2] = {st.MPI_SOURCE, st.MPI_TAG};
            trace_add(tr, "truncated receive (source, tag)", srctag, sizeof srctag, NULL, MPI_INT,
                      MPI_SUCCESS);
            free(h);
            /* the next message still arrives intact */
            mem_poison(r, rb);
            status_init(&st);
            MPI_CHECK(MPI_Recv(r, 60, MPI_INT, peer, 31, comm, &st));
            check_status(&st, MPI_INT, peer, 31, 50, "%s: message after truncation", pl->name);
            unsigned char *exp = (unsigned char *)xmalloc(rb);
            pattern_fill(exp, 50 * sizeof(int), peer, seed + 1);
            poison_fill(exp + 50 * sizeof(int), rb - 50 * sizeof(int));
            h = mem_fetch(r, rb);
            check_bytes(h, exp, rb, "%s: message after truncation", pl->name);
            trace_add(tr, "message after truncation", h, rb, &st, MPI_INT, MPI_SUCCESS);
            free(h);
            free(exp);
            mem_free(r);
        }
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    const struct place pls[] = {
        {"H->H", MEM_HOST, MEM_HOST},
        {"D->D", MEM_DEVICE, MEM_DEVICE},
        {"H->D", MEM_HOST, MEM_DEVICE},
        {"D->H", MEM_DEVICE, MEM_HOST},
        {"managed->pool", MEM_MANAGED, MEM_POOL},
    };
    struct trace ref = {0};
    run(&pls[0], &ref);
    for (int i = 1; i < (int)(sizeof pls / sizeof pls[0]); i++) {
        struct trace got = {0};
        MPI_Barrier(comm);
        run(&pls[i], &got);
        trace_compare(&ref, &got, pls[i].name);
        trace_free(&got);
    }
    trace_free(&ref);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
