// cudampi-test: ranks=2 without-shim=crash
/* MPI_THREAD_MULTIPLE: 4 threads per rank do blocking device send/recv concurrently, each
 * with its own tag; the threads never touch CUDA themselves (no current context in them), the
 * device buffers are allocated by the main thread. Thread i on rank 0 sends when i is even
 * and receives when i is odd; rank 1 mirrors it. Sizes vary per iteration (up to 1 MiB + 3).
 * Every received buffer is compared with the pattern and with the same run on host buffers.
 * If the MPI provides less than MPI_THREAD_MULTIPLE the body is skipped (with a note). */
#include "common.h"
#include <pthread.h>

#define NT 4
#define ITERS 6
#define SLACK 16
static MPI_Comm comm;
static const size_t sizes[ITERS] = {1, 4096, 65537, 7, 1024 * 1024 + 3, 300000};

struct targ {
    int id, kind;
    void *buf[ITERS];       /* allocated by the main thread */
    unsigned char *got[ITERS]; /* host copies of received buffers (main thread fills) */
    int rc;
};

static void *worker(void *vp)
{
    struct targ *a = (struct targ *)vp;
    int peer = 1 - t_rank;
    int sender = (a->id % 2 == 0) == (t_rank == 0);
    a->rc = MPI_SUCCESS;
    for (int it = 0; it < ITERS; it++) {
        int n = (int)sizes[(it + a->id) % ITERS];
        int tag = 100 * a->id + it;
        int rc;
        if (sender)
            rc = MPI_Send(a->buf[it], n, MPI_BYTE, peer, tag, comm);
        else {
            MPI_Status st;
            rc = MPI_Recv(a->buf[it], n, MPI_BYTE, peer, tag, comm, &st);
            if (rc == MPI_SUCCESS && (st.MPI_TAG != tag || st.MPI_SOURCE != peer)) rc = -12345;
        }
        if (rc != MPI_SUCCESS && a->rc == MPI_SUCCESS) a->rc = rc;
    }
    return NULL;
}

/* One run with memory kind `kind`; returns received bytes per (thread, iteration). */
static void run(int kind, struct targ *ta)
{
    int peer = 1 - t_rank;
    for (int i = 0; i < NT; i++) {
        struct targ *a = &ta[i];
        memset(a, 0, sizeof *a);
        a->id = i;
        a->kind = kind;
        int sender = (i % 2 == 0) == (t_rank == 0);
        for (int it = 0; it < ITERS; it++) {
            size_t n = sizes[(it + i) % ITERS];
            a->buf[it] = mem_alloc(kind, n + SLACK);
            if (sender)
                mem_pattern(a->buf[it], n, t_rank, 1000 * i + it);
            else
                mem_poison(a->buf[it], n + SLACK);
        }
    }
    MPI_Barrier(comm);
    pthread_t th[NT];
    for (int i = 0; i < NT; i++)
        if (pthread_create(&th[i], NULL, worker, &ta[i]) != 0) DIE("pthread_create");
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NT; i++) {
        struct targ *a = &ta[i];
        CHECK(a->rc == MPI_SUCCESS, "%s thread %d: MPI call returned %d", mem_kind_name(kind), i,
              a->rc);
        int sender = (i % 2 == 0) == (t_rank == 0);
        for (int it = 0; it < ITERS; it++) {
            size_t n = sizes[(it + i) % ITERS];
            if (!sender) {
                a->got[it] = mem_fetch(a->buf[it], n + SLACK);
                unsigned char *e = (unsigned char *)xmalloc(n + SLACK);
                pattern_fill(e, n, peer, 1000 * i + it);
                poison_fill(e + n, SLACK);
                check_bytes(a->got[it], e, n + SLACK, "%s thread %d iteration %d (%zu bytes)",
                            mem_kind_name(kind), i, it, n);
                free(e);
            }
            mem_free(a->buf[it]);
        }
    }
}

int main(int argc, char **argv)
{
    int provided = test_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (t_rank == 0)
            note("MPI provides thread level %d < MPI_THREAD_MULTIPLE: test body skipped", provided);
    } else if (t_rank < 2) {
        static struct targ ref[NT], dev[NT];
        run(MEM_HOST, ref);
        for (int rep = 0; rep < 3; rep++) {
            run(rep == 2 ? MEM_POOL : MEM_DEVICE, dev);
            for (int i = 0; i < NT; i++)
                for (int it = 0; it < ITERS; it++) {
                    if (ref[i].got[it] && dev[i].got[it])
                        check_bytes(dev[i].got[it], ref[i].got[it],
                                    sizes[(it + i) % ITERS] + SLACK,
                                    "thread %d iteration %d vs host run", i, it);
                    free(dev[i].got[it]);
                }
        }
        for (int i = 0; i < NT; i++)
            for (int it = 0; it < ITERS; it++) free(ref[i].got[it]);
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
