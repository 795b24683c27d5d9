// cudampi-test: ranks=2,3 without-shim=skip link=yes
/* Every MPI-4 function cudampi exports is served on every MPI, including those the library
 * lacks (Open MPI 4.1 has none of them; Open MPI 5 lacks the _c forms and MPI-4.1's calls; MPICH
 * 4.0 lacks MPI-4.1's): looked up by symbol as mpi4py's wheels do, each is run on host and on
 * device buffers and compared with the values it must produce, with poisoned receive buffers.
 *   - MPI_Isendrecv, MPI_Isendrecv_replace (status: source, tag, count)
 *   - MPI_Ialltoallv_c, MPI_Iallgatherv_c (count arrays narrowed, completed by Test loops)
 *   - MPI_Allreduce_init, MPI_Bcast_init, MPI_Alltoallv_init_c, started three times each, one
 *     completed by Waitall together with a pending Irecv, one by Waitany, one by Test loops
 *   - MPI_Psend_init/MPI_Precv_init with partitions marked ready in reverse order
 *     (MPI_Pready, MPI_Pready_range, MPI_Pready_list) and MPI_Parrived, started twice
 *   - MPI_Request_get_status_any/all/some on pending and completed receives, which stay
 *     active until MPI_Waitall. */
#include "common.h"

typedef int (*isendrecv_fn)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int, MPI_Comm,
                            MPI_Request *);
typedef int (*isendrecv_replace_fn)(void *, int, MPI_Datatype, int, int, int, int, MPI_Comm, MPI_Request *);
typedef int (*ialltoallv_c_fn)(const void *, const MPI_Count *, const MPI_Aint *, MPI_Datatype, void *, const MPI_Count *,
                               const MPI_Aint *, MPI_Datatype, MPI_Comm, MPI_Request *);
typedef int (*iallgatherv_c_fn)(const void *, MPI_Count, MPI_Datatype, void *, const MPI_Count *, const MPI_Aint *,
                                MPI_Datatype, MPI_Comm, MPI_Request *);
typedef int (*allreduce_init_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*bcast_init_fn)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*alltoallv_init_c_fn)(const void *, const MPI_Count *, const MPI_Aint *, MPI_Datatype, void *,
                                   const MPI_Count *, const MPI_Aint *, MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*psend_init_fn)(const void *, int, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*precv_init_fn)(void *, int, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*pready_fn)(int, MPI_Request);
typedef int (*pready_range_fn)(int, int, MPI_Request);
typedef int (*pready_list_fn)(int, const int *, MPI_Request);
typedef int (*parrived_fn)(MPI_Request, int, int *);
typedef int (*get_status_any_fn)(int, MPI_Request *, int *, int *, MPI_Status *);
typedef int (*get_status_all_fn)(int, MPI_Request *, int *, MPI_Status *);
typedef int (*get_status_some_fn)(int, MPI_Request *, int *, int *, MPI_Status *);

#define LOOK(type, name) type name##_f = (type)dlsym(RTLD_DEFAULT, "MPI_" #name)

enum { N = 64, PARTS = 4 };

static double value(int rank, int round, int i) { return rank * 1000.0 + round * 100.0 + i * 0.25; }

/* A buffer of n doubles of `kind`: filled with value(rank, round, .) or poisoned. */
static double *buffer(int kind, int n, int rank, int round)
{
    double *h = xmalloc(n * sizeof(double)), *b = mem_alloc(kind, n * sizeof(double));
    for (int i = 0; i < n; i++) h[i] = value(rank, round, i);
    if (rank >= 0) mem_put(b, h, n * sizeof(double));
    else mem_poison(b, n * sizeof(double));
    free(h);
    return b;
}

static void expect(const double *b, int n, double (*want)(int), const char *what, const char *kind)
{
    double *h = xmalloc(n * sizeof(double));
    mem_get(h, b, n * sizeof(double));
    int bad = 0;
    for (int i = 0; i < n && bad < 3; i++)
        if (h[i] != want(i)) {
            CHECK(0, "%s (%s): element %d is %g, expected %g", what, kind, i, h[i], want(i));
            bad++;
        }
    free(h);
}

static int g_rank, g_round;
static double from_left(int i) { return value((t_rank + t_size - 1) % t_size, g_round, i); }
static double sum_all(int i)
{
    double s = 0;
    for (int r = 0; r < t_size; r++) s += value(r, g_round, i);
    return s;
}
static double from_root(int i) { return value(0, g_round, i); }
/* Alltoallv: rank r sends block j (2 elements per peer j, at 2*j) to rank j. */
static double block_from(int i) { return value(i / 2, g_round, 2 * t_rank + i % 2); }
/* Allgatherv: rank r contributes r+1 elements, placed at r*(r+1)/2. */
static double gathered(int i)
{
    int r = 0;
    while ((r + 1) * (r + 2) / 2 <= i) r++;
    return value(r, g_round, i - r * (r + 1) / 2);
}
static double from_peer(int i) { return value(g_rank, g_round, i); }

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    LOOK(isendrecv_fn, Isendrecv);
    LOOK(isendrecv_replace_fn, Isendrecv_replace);
    LOOK(ialltoallv_c_fn, Ialltoallv_c);
    LOOK(iallgatherv_c_fn, Iallgatherv_c);
    LOOK(allreduce_init_fn, Allreduce_init);
    LOOK(bcast_init_fn, Bcast_init);
    LOOK(alltoallv_init_c_fn, Alltoallv_init_c);
    LOOK(psend_init_fn, Psend_init);
    LOOK(precv_init_fn, Precv_init);
    LOOK(pready_fn, Pready);
    LOOK(pready_range_fn, Pready_range);
    LOOK(pready_list_fn, Pready_list);
    LOOK(parrived_fn, Parrived);
    LOOK(get_status_any_fn, Request_get_status_any);
    LOOK(get_status_all_fn, Request_get_status_all);
    LOOK(get_status_some_fn, Request_get_status_some);
    if (!Isendrecv_f || !Isendrecv_replace_f || !Ialltoallv_c_f || !Iallgatherv_c_f || !Allreduce_init_f || !Bcast_init_f ||
        !Alltoallv_init_c_f || !Psend_init_f || !Precv_init_f || !Pready_f || !Pready_range_f || !Pready_list_f ||
        !Parrived_f || !Request_get_status_any_f || !Request_get_status_all_f || !Request_get_status_some_f) {
        CHECK(!shim_loaded(), "the shim is loaded but an MPI-4 function is missing");
        note("MPI-4 functions missing and no shim: nothing to test");
        return report_and_finalize();
    }
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    const int kinds[] = {MEM_HOST, MEM_DEVICE};
    /* MPICH's own MPI_Isendrecv leaves the status as it was; cudampi's reports the receive. */
    const int sr_status = !library_has("MPI_Isendrecv");
    const int own_pcoll = !library_has("MPI_Bcast_init");

    for (int ki = 0; ki < 2; ki++) {
        const int kind = kinds[ki];
        const char *kn = mem_kind_name(kind);
        g_round = 1;

        /* Isendrecv around the ring. */
        {
            double *s = buffer(kind, N, t_rank, 1), *r = buffer(kind, N, -1, 0);
            MPI_Request q;
            MPI_Status st;
            status_init(&st);
            MPI_CHECK(Isendrecv_f(s, N, MPI_DOUBLE, right, 7, r, N, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &q));
            MPI_CHECK(MPI_Wait(&q, &st));
            CHECK(q == MPI_REQUEST_NULL, "Isendrecv (%s): the request is not freed", kn);
            if (sr_status) check_status(&st, MPI_DOUBLE, left, 7, N, "Isendrecv (%s)", kn);
            expect(r, N, from_left, "Isendrecv", kn);
            mem_free(s);
            mem_free(r);
        }
        /* Isendrecv_replace, completed by a Test loop. */
        {
            double *b = buffer(kind, N, t_rank, 1);
            MPI_Request q;
            MPI_Status st;
            int flag = 0;
            status_init(&st);
            MPI_CHECK(Isendrecv_replace_f(b, N, MPI_DOUBLE, right, 8, left, 8, MPI_COMM_WORLD, &q));
            while (!flag) MPI_CHECK(MPI_Test(&q, &flag, &st));
            if (sr_status) check_status(&st, MPI_DOUBLE, left, 8, N, "Isendrecv_replace (%s)", kn);
            expect(b, N, from_left, "Isendrecv_replace", kn);
            mem_free(b);
        }
        /* Ialltoallv_c and Iallgatherv_c, completed together by Testall. */
        {
            const int n = 2 * t_size, tot = t_size * (t_size + 1) / 2;
            double *s = buffer(kind, n, t_rank, 1), *r = buffer(kind, n, -1, 0);
            double *gs = buffer(kind, t_rank + 1, t_rank, 1), *gr = buffer(kind, tot, -1, 0);
            MPI_Count *counts = xmalloc(t_size * sizeof(MPI_Count)), *gcounts = xmalloc(t_size * sizeof(MPI_Count));
            MPI_Aint *displs = xmalloc(t_size * sizeof(MPI_Aint)), *gdispls = xmalloc(t_size * sizeof(MPI_Aint));
            for (int j = 0; j < t_size; j++) {
                counts[j] = 2;
                displs[j] = 2 * j;
                gcounts[j] = j + 1;
                gdispls[j] = j * (j + 1) / 2;
            }
            MPI_Request q[2];
            int flag = 0;
            MPI_CHECK(Ialltoallv_c_f(s, counts, displs, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD, &q[0]));
            MPI_CHECK(Iallgatherv_c_f(gs, t_rank + 1, MPI_DOUBLE, gr, gcounts, gdispls, MPI_DOUBLE, MPI_COMM_WORLD, &q[1]));
            while (!flag) MPI_CHECK(MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE));
            expect(r, n, block_from, "Ialltoallv_c", kn);
            expect(gr, tot, gathered, "Iallgatherv_c", kn);
            free(counts), free(gcounts), free(displs), free(gdispls);
            mem_free(s), mem_free(r), mem_free(gs), mem_free(gr);
        }
        /* Persistent collectives, three starts each. */
        {
            const int n = 2 * t_size;
            double *as = buffer(kind, N, t_rank, 1), *ar = buffer(kind, N, -1, 0);
            double *bb = buffer(kind, N, t_rank, 1);
            double *vs = buffer(kind, n, t_rank, 1), *vr = buffer(kind, n, -1, 0);
            MPI_Count *counts = xmalloc(t_size * sizeof(MPI_Count));
            MPI_Aint *displs = xmalloc(t_size * sizeof(MPI_Aint));
            for (int j = 0; j < t_size; j++) counts[j] = 2, displs[j] = 2 * j;
            MPI_Request ar_q, bc_q, av_q;
            MPI_CHECK(Allreduce_init_f(as, ar, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &ar_q));
            MPI_CHECK(Bcast_init_f(bb, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bc_q));
            MPI_CHECK(Alltoallv_init_c_f(vs, counts, displs, MPI_DOUBLE, vr, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, &av_q));
            for (int round = 1; round <= 3; round++) {
                g_round = round;
                double *h = xmalloc(N * sizeof(double));
                for (int i = 0; i < N; i++) h[i] = value(t_rank, round, i);
                mem_put(as, h, N * sizeof(double));
                mem_put(bb, h, N * sizeof(double));
                mem_put(vs, h, n * sizeof(double));
                free(h);
                mem_poison(ar, N * sizeof(double));
                mem_poison(vr, n * sizeof(double));
                /* A message from the left that is sent only after the collectives completed there. */
                double token = -1, mine = round;
                MPI_Request both[2];
                MPI_CHECK(MPI_Irecv(&token, 1, MPI_DOUBLE, left, 30 + round, MPI_COMM_WORLD, &both[1]));
                MPI_CHECK(MPI_Start(&ar_q));
                MPI_Request two[2] = {bc_q, av_q};
                MPI_CHECK(MPI_Startall(2, two));
                both[0] = ar_q;
                /* Waitany on the Bcast and the Alltoallv: both complete, in some order (MPICH
                 * 4.0's own persistent collectives stay active after Waitany: Waitall there). */
                if (own_pcoll) {
                    for (int k = 0; k < 2; k++) {
                        int idx = -1;
                        MPI_CHECK(MPI_Waitany(2, two, &idx, MPI_STATUS_IGNORE));
                        CHECK(idx == 0 || idx == 1, "Waitany on persistent collectives (%s): index %d", kn, idx);
                    }
                    int idx = 7;
                    MPI_CHECK(MPI_Waitany(2, two, &idx, MPI_STATUS_IGNORE));
                    CHECK(idx == MPI_UNDEFINED, "Waitany on completed persistent collectives (%s): index %d", kn, idx);
                } else {
                    MPI_CHECK(MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
                }
                MPI_CHECK(MPI_Send(&mine, 1, MPI_DOUBLE, right, 30 + round, MPI_COMM_WORLD));
                MPI_CHECK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
                ar_q = both[0];
                CHECK(ar_q != MPI_REQUEST_NULL && two[0] == bc_q && two[1] == av_q, "persistent requests (%s) were freed", kn);
                CHECK(token == round, "Irecv beside a persistent collective (%s): got %g", kn, token);
                expect(ar, N, sum_all, "Allreduce_init", kn);
                expect(bb, N, from_root, "Bcast_init", kn);
                expect(vr, n, block_from, "Alltoallv_init_c", kn);
            }
            MPI_CHECK(MPI_Request_free(&ar_q));
            MPI_CHECK(MPI_Request_free(&bc_q));
            MPI_CHECK(MPI_Request_free(&av_q));
            free(counts), free(displs);
            mem_free(as), mem_free(ar), mem_free(bb), mem_free(vs), mem_free(vr);
        }
        /* Partitioned: each rank sends to the right and receives from the left. */
        {
            const int per = N / PARTS;
            double *s = buffer(kind, N, t_rank, 1), *r = buffer(kind, N, -1, 0);
            MPI_Request ps, pr;
            MPI_CHECK(Precv_init_f(r, PARTS, per, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &pr));
            MPI_CHECK(Psend_init_f(s, PARTS, per, MPI_DOUBLE, right, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &ps));
            for (int round = 1; round <= 2; round++) {
                g_round = round;
                double *h = xmalloc(N * sizeof(double));
                for (int i = 0; i < N; i++) h[i] = value(t_rank, round, i);
                mem_put(s, h, N * sizeof(double));
                free(h);
                mem_poison(r, N * sizeof(double));
                MPI_CHECK(MPI_Start(&pr));
                MPI_CHECK(MPI_Start(&ps));
                int list[1] = {1};
                MPI_CHECK(Pready_f(PARTS - 1, ps));
                MPI_CHECK(Pready_range_f(2, PARTS - 2, ps));
                MPI_CHECK(Pready_list_f(1, list, ps));
                MPI_CHECK(Pready_f(0, ps));
                int arrived = 0;
                while (!arrived) MPI_CHECK(Parrived_f(pr, PARTS - 1, &arrived));
                MPI_Request q[2] = {ps, pr};
                MPI_Status st[2];
                MPI_CHECK(MPI_Waitall(2, q, st));
                CHECK(q[0] == ps && q[1] == pr, "partitioned requests (%s) were freed", kn);
                g_rank = left;
                expect(r, N, from_peer, "Psend_init/Precv_init", kn);
            }
            MPI_CHECK(MPI_Request_free(&ps));
            MPI_CHECK(MPI_Request_free(&pr));
            mem_free(s), mem_free(r);
        }
        /* Request_get_status_any/all/some: receives from the left, answered in two steps. */
        {
            double *r0 = buffer(kind, N, -1, 0), *r1 = buffer(kind, N, -1, 0), *s = buffer(kind, N, t_rank, 1);
            MPI_Request q[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            MPI_Status st[3];
            int flag = -1, idx = -1, out = -1, indices[3];
            g_round = 1;
            MPI_CHECK(MPI_Irecv(r0, N, MPI_DOUBLE, left, 20, MPI_COMM_WORLD, &q[0]));
            MPI_CHECK(MPI_Irecv(r1, N, MPI_DOUBLE, left, 21, MPI_COMM_WORLD, &q[2]));
            MPI_CHECK(Request_get_status_all_f(3, q, &flag, st));
            CHECK(flag == 0, "Request_get_status_all before any send (%s): flag %d", kn, flag);
            MPI_CHECK(Request_get_status_some_f(3, q, &out, indices, st));
            CHECK(out == 0, "Request_get_status_some before any send (%s): outcount %d", kn, out);
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_CHECK(MPI_Send(s, N, MPI_DOUBLE, right, 20, MPI_COMM_WORLD));
            do MPI_CHECK(Request_get_status_any_f(3, q, &idx, &flag, &st[0]));
            while (!flag);
            CHECK(idx == 0, "Request_get_status_any (%s): index %d", kn, idx);
            check_status(&st[0], MPI_DOUBLE, left, 20, N, "Request_get_status_any (%s)", kn);
            MPI_CHECK(Request_get_status_some_f(3, q, &out, indices, st));
            CHECK(out == 1 && indices[0] == 0, "Request_get_status_some (%s): outcount %d", kn, out);
            CHECK(q[0] != MPI_REQUEST_NULL, "Request_get_status_any (%s) freed the request", kn);
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_CHECK(MPI_Send(s, N, MPI_DOUBLE, right, 21, MPI_COMM_WORLD));
            do MPI_CHECK(Request_get_status_all_f(3, q, &flag, st));
            while (!flag);
            check_status(&st[2], MPI_DOUBLE, left, 21, N, "Request_get_status_all (%s)", kn);
            MPI_CHECK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
            expect(r0, N, from_left, "Irecv after Request_get_status_any", kn);
            expect(r1, N, from_left, "Irecv after Request_get_status_all", kn);
            mem_free(r0), mem_free(r1), mem_free(s);
        }
    }
    return report_and_finalize();
}
