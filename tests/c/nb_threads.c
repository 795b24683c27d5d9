// cudampi-test: ranks=2 without-shim=crash link=yes timeout=240
/* MPI_THREAD_MULTIPLE with nonblocking and blocking device point-to-point: 4 threads per rank,
 * thread t on rank 0 talking to thread t on rank 1, each for ITERS iterations of
 *   (a) MPI_Irecv into a device buffer and into a host buffer, MPI_Isend of a device buffer
 *       and of a host buffer, completed together by one MPI_Waitall (thread 3: MPI_Testall
 *       loop), then
 *   (b) blocking MPI_Send / MPI_Recv of a device buffer (rank 0 sends first, rank 1 replies).
 * Threads 0 and 1 use their own duplicated communicator, threads 2 and 3 share one and keep
 * apart by tag. Threads 0 and 2 never call CUDA (no current context in them): the main thread
 * fills their send regions for every iteration beforehand and checks their receive regions
 * afterwards (one allocation per region, one slot per iteration: interior pointers). Threads 1
 * and 3 fill and check their buffers themselves with cudaMemcpy in every iteration, with sizes
 * up to 300,000 bytes. Every received buffer must hold the sender's pattern for that thread and
 * iteration, followed by intact poisoned slack.
 * The whole run is done on host buffers first, then on device buffers (twice), and the
 * receive regions of the CUDA-free threads are compared with the host run. If the MPI provides
 * less than MPI_THREAD_MULTIPLE the body is skipped (with a note). */
#include "common.h"
#include <pthread.h>

#define NT 4
#define ITERS 100
#define SLACK 16
#define PSLOT 4120 /* bytes per iteration slot of a CUDA-free thread's regions */
#define NP 4       /* messages per iteration: device + host nonblocking, and 2 blocking */

static MPI_Comm tcomm[NT];

static size_t pure_size(int t, int it) { return (size_t)(1 + (it * 37 + t * 11) % 4096); }
static size_t cuda_size(int t, int it)
{
    static const size_t s[6] = {1, 64, 4096 + 5, 300000, 777, 65536 + 3};
    return s[(it + t) % 6];
}
/* seed of message m of iteration it of thread t (the same on both ranks) */
static int mseed(int t, int it, int m) { return (t * 1000 + it) * NP + m; }
static int tag(int t, int it, int m) { return (t * 10 + m) * 1000 + it % 1000; }

struct targ {
    int t, kind;
    /* CUDA-free threads: regions of ITERS slots each, one per message kind */
    char *sreg[NP], *rreg[NP];
    /* CUDA threads: single buffers */
    char *sb[NP], *rb[NP];
    int rc;
    int bad; /* failed checks in a CUDA thread */
};

static void identify(const unsigned char *got, const unsigned char *exp, size_t n, const char *what);

static void *worker(void *vp)
{
    struct targ *a = (struct targ *)vp;
    int t = a->t, peer = 1 - t_rank, pure = t % 2 == 0;
    MPI_Comm c = tcomm[t];
    a->rc = MPI_SUCCESS;
    unsigned char *e = pure ? NULL : (unsigned char *)xmalloc(300000 + SLACK);
    for (int it = 0; it < ITERS; it++) {
        size_t n = pure ? pure_size(t, it) : cuda_size(t, it);
        char *s[NP], *r[NP];
        for (int m = 0; m < NP; m++) {
            if (pure) {
                s[m] = a->sreg[m] + (size_t)it * PSLOT;
                r[m] = a->rreg[m] + (size_t)it * PSLOT;
            } else {
                s[m] = a->sb[m];
                r[m] = a->rb[m];
                mem_pattern(s[m], n, t_rank, mseed(t, it, m));
                mem_poison(r[m], n + SLACK);
            }
        }
        int rc[8] = {0};
        MPI_Request rq[4];
        MPI_Status st[4];
        /* (a) nonblocking: messages 0 (device) and 1 (host) */
        rc[0] = MPI_Irecv(r[0], (int)n, MPI_BYTE, peer, tag(t, it, 0), c, &rq[0]);
        rc[1] = MPI_Irecv(r[1], (int)n, MPI_BYTE, peer, tag(t, it, 1), c, &rq[1]);
        rc[2] = MPI_Isend(s[0], (int)n, MPI_BYTE, peer, tag(t, it, 0), c, &rq[2]);
        rc[3] = MPI_Isend(s[1], (int)n, MPI_BYTE, peer, tag(t, it, 1), c, &rq[3]);
        if (t == 3) {
            int flag = 0;
            do
                rc[4] = MPI_Testall(4, rq, &flag, st);
            while (rc[4] == MPI_SUCCESS && !flag);
        } else {
            rc[4] = MPI_Waitall(4, rq, st);
        }
        for (int j = 0; j < 2; j++)
            if (rc[4] == MPI_SUCCESS &&
                (st[j].MPI_SOURCE != peer || st[j].MPI_TAG != tag(t, it, j) ||
                 status_count(&st[j], MPI_BYTE) != (int)n))
                rc[4] = -12345;
        /* (b) blocking: messages 2 (rank 0 -> 1) and 3 (rank 1 -> 0), device */
        MPI_Status bs;
        if (t_rank == 0) {
            rc[5] = MPI_Send(s[2], (int)n, MPI_BYTE, peer, tag(t, it, 2), c);
            rc[6] = MPI_Recv(r[3], (int)n, MPI_BYTE, peer, tag(t, it, 3), c, &bs);
        } else {
            rc[5] = MPI_Recv(r[2], (int)n, MPI_BYTE, peer, tag(t, it, 2), c, &bs);
            rc[6] = MPI_Send(s[3], (int)n, MPI_BYTE, peer, tag(t, it, 3), c);
        }
        if (rc[5] == MPI_SUCCESS && rc[6] == MPI_SUCCESS &&
            (bs.MPI_SOURCE != peer || status_count(&bs, MPI_BYTE) != (int)n))
            rc[6] = -12346;
        for (int j = 0; j < 7; j++)
            if (rc[j] != MPI_SUCCESS && a->rc == MPI_SUCCESS) a->rc = rc[j];
        if (!pure) {
            /* check what arrived, right here in the thread */
            for (int m = 0; m < NP; m++) {
                if (m == 2 && t_rank == 0) continue; /* rank 0 only sends message 2 */
                if (m == 3 && t_rank == 1) continue;
                unsigned char *g = mem_fetch(r[m], n + SLACK);
                pattern_fill(e, n, peer, mseed(t, it, m));
                poison_fill(e + n, SLACK);
                char what[128];
                snprintf(what, sizeof what, "%s thread %d iteration %d message %d (%zu bytes)",
                         mem_kind_name(a->kind), t, it, m, n);
                if (!check_bytes(g, e, n + SLACK, "%s", what)) {
                    a->bad++;
                    identify(g, e, n, what);
                }
                free(g);
            }
        }
    }
    free(e);
    return NULL;
}

/* On a mismatch: whose message do the received bytes at the first wrong offset hold? (a hint
 * for whoever debugs it; at most a few times per run, it is slow) */
static void identify(const unsigned char *got, const unsigned char *exp, size_t n, const char *what)
{
    static int calls;
    if (__sync_fetch_and_add(&calls, 1) >= 4) return;
    size_t off = 0;
    while (off < n && got[off] == exp[off]) off++;
    if (off >= n) return;
    size_t k = n - off < 32 ? n - off : 32;
    if (k < 12) {
        note("%s: too few wrong bytes from offset %zu to tell whose they are", what, off);
        return;
    }
    unsigned char *p = (unsigned char *)xmalloc(300000);
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < NT; t++)
            for (int it = 0; it < ITERS; it++)
                for (int m = 0; m < NP; m++) {
                    size_t sz = t % 2 == 0 ? pure_size(t, it) : cuda_size(t, it);
                    if (sz < off + k) continue;
                    pattern_fill(p, off + k, r, mseed(t, it, m));
                    if (memcmp(p + off, got + off, k) == 0) {
                        note("%s: from offset %zu it holds rank %d's message %d of thread %d, "
                             "iteration %d (%zu bytes)", what, off, r, m, t, it, sz);
                        free(p);
                        return;
                    }
                }
    note("%s: the %zu bytes from offset %zu are no message's of this test at that offset%s", what,
         k, off, got[off] == POISON_BYTE ? " (poison)" : "");
    free(p);
}

static int is_recv(int m) { return m < 2 || (m == 2 && t_rank == 1) || (m == 3 && t_rank == 0); }
static int kind_of(int m, int kind) { return m == 1 ? MEM_HOST : kind; }

/* One run; returns the receive regions of the CUDA-free threads (host copies) in got. */
static void run(int kind, unsigned char *got[NT][NP])
{
    static struct targ ta[NT];
    for (int t = 0; t < NT; t++) {
        struct targ *a = &ta[t];
        memset(a, 0, sizeof *a);
        a->t = t;
        a->kind = kind;
        for (int m = 0; m < NP; m++) {
            if (t % 2 == 0) {
                size_t rb = (size_t)ITERS * PSLOT;
                a->sreg[m] = (char *)mem_alloc(kind_of(m, kind), rb);
                a->rreg[m] = (char *)mem_alloc(kind_of(m, kind), rb);
                unsigned char *img = (unsigned char *)xmalloc(rb);
                poison_fill(img, rb);
                mem_put(a->rreg[m], img, rb);
                for (int it = 0; it < ITERS; it++)
                    pattern_fill(img + (size_t)it * PSLOT, pure_size(t, it), t_rank, mseed(t, it, m));
                mem_put(a->sreg[m], img, rb);
                free(img);
            } else {
                a->sb[m] = (char *)mem_alloc(kind_of(m, kind), 300000 + SLACK);
                a->rb[m] = (char *)mem_alloc(kind_of(m, kind), 300000 + SLACK);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        if (pthread_create(&th[t], NULL, worker, &ta[t]) != 0) DIE("pthread_create");
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    int peer = 1 - t_rank;
    for (int t = 0; t < NT; t++) {
        struct targ *a = &ta[t];
        CHECK(a->rc == MPI_SUCCESS, "%s thread %d: an MPI call returned %d (-12345/6: bad status)",
              mem_kind_name(kind), t, a->rc);
        for (int m = 0; m < NP; m++) {
            if (t % 2 == 0) {
                size_t rb = (size_t)ITERS * PSLOT;
                got[t][m] = mem_fetch(a->rreg[m], rb);
                if (is_recv(m)) {
                    unsigned char *e = (unsigned char *)xmalloc(PSLOT);
                    for (int it = 0; it < ITERS; it++) {
                        size_t n = pure_size(t, it);
                        pattern_fill(e, n, peer, mseed(t, it, m));
                        poison_fill(e + n, PSLOT - n);
                        char what[128];
                        snprintf(what, sizeof what, "%s CUDA-free thread %d iteration %d message %d (%zu bytes)",
                                 mem_kind_name(kind), t, it, m, n);
                        if (!check_bytes(got[t][m] + (size_t)it * PSLOT, e, PSLOT, "%s", what))
                            identify(got[t][m] + (size_t)it * PSLOT, e, n, what);
                    }
                    free(e);
                }
                /* the sends left the send regions alone */
                unsigned char *g = mem_fetch(a->sreg[m], rb), *e = (unsigned char *)xmalloc(rb);
                poison_fill(e, rb);
                for (int it = 0; it < ITERS; it++)
                    pattern_fill(e + (size_t)it * PSLOT, pure_size(t, it), t_rank, mseed(t, it, m));
                /* compare the pattern part of each slot: the slot's tail is not poisoned */
                for (int it = 0; it < ITERS; it++) {
                    size_t off = (size_t)it * PSLOT;
                    if (memcmp(g + off, e + off, pure_size(t, it)) != 0) {
                        check_bytes(g + off, e + off, pure_size(t, it),
                                    "%s CUDA-free thread %d: send region %d, iteration %d after the sends",
                                    mem_kind_name(kind), t, m, it);
                        break;
                    }
                }
                free(g);
                free(e);
                mem_free(a->sreg[m]);
                mem_free(a->rreg[m]);
            } else {
                got[t][m] = NULL;
                mem_free(a->sb[m]);
                mem_free(a->rb[m]);
            }
        }
    }
}

int main(int argc, char **argv)
{
    int provided = test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    for (int t = 0; t < 2; t++) MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[t]);
    MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[2]);
    tcomm[3] = tcomm[2]; /* threads 2 and 3 share a communicator, apart by tag */
    if (t_size < 2) DIE("needs 2 ranks");
    if (provided < MPI_THREAD_MULTIPLE) {
        if (t_rank == 0)
            note("MPI provides thread level %d < MPI_THREAD_MULTIPLE: test body skipped", provided);
    } else if (t_rank < 2) {
        static unsigned char *ref[NT][NP], *dev[NT][NP];
        run(MEM_HOST, ref);
        for (int rep = 0; rep < 2; rep++) {
            run(MEM_DEVICE, dev);
            for (int t = 0; t < NT; t += 2)
                for (int m = 0; m < NP; m++) {
                    if (is_recv(m))
                        check_bytes(dev[t][m], ref[t][m], (size_t)ITERS * PSLOT,
                                    "CUDA-free thread %d message %d vs host run", t, m);
                    free(dev[t][m]);
                }
        }
        for (int t = 0; t < NT; t++)
            for (int m = 0; m < NP; m++) free(ref[t][m]);
    } else {
        /* ranks past 1 only take part in the barriers of run() */
        for (int r = 0; r < 3; r++) MPI_Barrier(MPI_COMM_WORLD);
    }
    for (int t = 0; t < 3; t++) MPI_Comm_free(&tcomm[t]);
    return report_and_finalize();
}
