// cudampi-test: ranks=2,3 without-shim=skip
/* MPI-4 large-count functions looked up by symbol, as mpi4py does (weak references): cudampi
 * exports every _c function it interposes, so a program finds them even on an MPI-3 library
 * (Open MPI 4.1). There the call must go to the int-count function when the counts fit, and
 * fail with MPI_ERR_COUNT when one does not. On an MPI-4 library the library's own _c function
 * serves it. Device buffers: Send_c/Recv_c, Isend_c/Irecv_c + Waitall, Allreduce_c, Bcast_c,
 * Gatherv_c and Alltoallv_c (whose count and displacement arrays narrow too), compared with the
 * expected values; then a count of 2^31 on a library without MPI_Send_c.
 * Without the shim an MPI-3 library has none of these symbols: a note, then PASS. */
#include "common.h"

typedef int (*send_c_fn)(const void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_c_fn)(void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*isend_c_fn)(const void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*irecv_c_fn)(void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*allreduce_c_fn)(const void *, void *, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*bcast_c_fn)(void *, MPI_Count, MPI_Datatype, int, MPI_Comm);
typedef int (*gatherv_c_fn)(const void *, MPI_Count, MPI_Datatype, void *, const MPI_Count *, const MPI_Aint *,
                            MPI_Datatype, int, MPI_Comm);
typedef int (*alltoallv_c_fn)(const void *, const MPI_Count *, const MPI_Aint *, MPI_Datatype, void *,
                              const MPI_Count *, const MPI_Aint *, MPI_Datatype, MPI_Comm);

static void values(double *v, int n, int rank, int seed)
{
    for (int i = 0; i < n; i++) v[i] = i * 0.5 + rank * 1000.0 + seed;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    send_c_fn send_c = (send_c_fn)dlsym(RTLD_DEFAULT, "MPI_Send_c");
    recv_c_fn recv_c = (recv_c_fn)dlsym(RTLD_DEFAULT, "MPI_Recv_c");
    isend_c_fn isend_c = (isend_c_fn)dlsym(RTLD_DEFAULT, "MPI_Isend_c");
    irecv_c_fn irecv_c = (irecv_c_fn)dlsym(RTLD_DEFAULT, "MPI_Irecv_c");
    allreduce_c_fn allreduce_c = (allreduce_c_fn)dlsym(RTLD_DEFAULT, "MPI_Allreduce_c");
    bcast_c_fn bcast_c = (bcast_c_fn)dlsym(RTLD_DEFAULT, "MPI_Bcast_c");
    gatherv_c_fn gatherv_c = (gatherv_c_fn)dlsym(RTLD_DEFAULT, "MPI_Gatherv_c");
    alltoallv_c_fn alltoallv_c = (alltoallv_c_fn)dlsym(RTLD_DEFAULT, "MPI_Alltoallv_c");
    if (!send_c || !recv_c || !isend_c || !irecv_c || !allreduce_c || !bcast_c || !gatherv_c || !alltoallv_c) {
        CHECK(!shim_loaded(), "the shim is loaded but a _c function is missing");
        note("no MPI_Send_c & co. in the process (MPI-3 library, no shim): nothing to test");
        return report_and_finalize();
    }
    const int has = library_has("MPI_Send_c");
    if (t_rank == 0) note("the MPI library %s MPI_Send_c", has ? "has its own" : "lacks");

    enum { N = 3000 };
    const int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    double *want = xmalloc(N * sizeof(double)), *got = xmalloc(N * sizeof(double));
    double *out = mem_alloc(MEM_DEVICE, N * sizeof(double)), *in = mem_alloc(MEM_DEVICE, N * sizeof(double));

    /* Send_c / Recv_c around a ring, even ranks first */
    values(want, N, t_rank, 1);
    mem_put(out, want, N * sizeof(double));
    mem_poison(in, N * sizeof(double));
    MPI_Status st;
    if (t_rank % 2 == 0) {
        MPI_CHECK(send_c(out, N, MPI_DOUBLE, right, 1, MPI_COMM_WORLD));
        MPI_CHECK(recv_c(in, N, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &st));
    } else {
        MPI_CHECK(recv_c(in, N, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &st));
        MPI_CHECK(send_c(out, N, MPI_DOUBLE, right, 1, MPI_COMM_WORLD));
    }
    values(want, N, left, 1);
    mem_get(got, in, N * sizeof(double));
    check_bytes(got, want, N * sizeof(double), "Send_c/Recv_c from rank %d", left);
    check_status(&st, MPI_DOUBLE, left, 1, N, "Recv_c status");

    /* Isend_c / Irecv_c + Waitall */
    values(want, N, t_rank, 2);
    mem_put(out, want, N * sizeof(double));
    mem_poison(in, N * sizeof(double));
    MPI_Request r[2];
    MPI_CHECK(irecv_c(in, N, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &r[0]));
    MPI_CHECK(isend_c(out, N, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &r[1]));
    MPI_CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    values(want, N, left, 2);
    mem_get(got, in, N * sizeof(double));
    check_bytes(got, want, N * sizeof(double), "Isend_c/Irecv_c from rank %d", left);

    /* Allreduce_c, Bcast_c */
    values(want, N, t_rank, 3);
    mem_put(out, want, N * sizeof(double));
    mem_poison(in, N * sizeof(double));
    MPI_CHECK(allreduce_c(out, in, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int q = 0; q < t_size; q++) s += i * 0.5 + q * 1000.0 + 3;
        want[i] = s;
    }
    mem_get(got, in, N * sizeof(double));
    check_bytes(got, want, N * sizeof(double), "Allreduce_c");
    values(want, N, t_size - 1, 4);
    if (t_rank == t_size - 1) mem_put(in, want, N * sizeof(double));
    else mem_poison(in, N * sizeof(double));
    MPI_CHECK(bcast_c(in, N, MPI_DOUBLE, t_size - 1, MPI_COMM_WORLD));
    mem_get(got, in, N * sizeof(double));
    check_bytes(got, want, N * sizeof(double), "Bcast_c");

    /* Gatherv_c to the last rank: rank q sends q + 1 values, placed in reverse rank order */
    {
        const int root = t_size - 1, mine = t_rank + 1;
        MPI_Count *counts = xmalloc(t_size * sizeof(MPI_Count));
        MPI_Aint *displs = xmalloc(t_size * sizeof(MPI_Aint));
        int total = 0;
        for (int q = t_size - 1; q >= 0; q--) {
            counts[q] = q + 1;
            displs[q] = total;
            total += q + 1;
        }
        double *mine_v = xmalloc(mine * sizeof(double));
        values(mine_v, mine, t_rank, 5);
        mem_put(out, mine_v, mine * sizeof(double));
        mem_poison(in, N * sizeof(double));
        MPI_CHECK(gatherv_c(out, mine, MPI_DOUBLE, in, counts, displs, MPI_DOUBLE, root, MPI_COMM_WORLD));
        if (t_rank == root) {
            for (int q = 0; q < t_size; q++) values(want + displs[q], q + 1, q, 5);
            mem_get(got, in, total * sizeof(double));
            check_bytes(got, want, total * sizeof(double), "Gatherv_c at the root");
        }
        free(mine_v);
        free(counts);
        free(displs);
    }

    /* Alltoallv_c: rank r sends q + 1 values to rank q, packed back to back */
    {
        MPI_Count *sc = xmalloc(t_size * sizeof(MPI_Count)), *rc = xmalloc(t_size * sizeof(MPI_Count));
        MPI_Aint *sd = xmalloc(t_size * sizeof(MPI_Aint)), *rd = xmalloc(t_size * sizeof(MPI_Aint));
        MPI_Aint so = 0, ro = 0;
        for (int q = 0; q < t_size; q++) {
            sc[q] = q + 1, sd[q] = so, so += q + 1;
            rc[q] = t_rank + 1, rd[q] = ro, ro += t_rank + 1;
        }
        for (int q = 0; q < t_size; q++) values(want + sd[q], q + 1, t_rank, 6 + q);
        mem_put(out, want, so * sizeof(double));
        mem_poison(in, N * sizeof(double));
        MPI_CHECK(alltoallv_c(out, sc, sd, MPI_DOUBLE, in, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD));
        for (int q = 0; q < t_size; q++) values(want + rd[q], t_rank + 1, q, 6 + t_rank);
        mem_get(got, in, ro * sizeof(double));
        check_bytes(got, want, ro * sizeof(double), "Alltoallv_c");
        free(sc);
        free(rc);
        free(sd);
        free(rd);
    }

    /* A count that needs the large-count function: MPI_ERR_COUNT where the library lacks it
     * (MPI_PROC_NULL: nothing would be transferred anyway). */
    if (!has) {
        char byte = 0;
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        int rc = send_c(&byte, (MPI_Count)1 << 31, MPI_BYTE, MPI_PROC_NULL, 5, MPI_COMM_WORLD);
        CHECK(error_class(rc) == MPI_ERR_COUNT, "MPI_Send_c with a count of 2^31 on a library without it: "
              "class %s, expected MPI_ERR_COUNT", error_name(error_class(rc)));
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    }
    mem_free(out);
    mem_free(in);
    free(want);
    free(got);
    return report_and_finalize();
}
