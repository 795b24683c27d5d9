// cudampi-test: ranks=2,3 without-shim=crash nccl=yes timeout=150 forced=no
/* coll_nccl_errors.c -- NCCL failing under a device collective: the call reports it through the
 * communicator's error handler (MPI_ERRORS_RETURN here: a code of class MPI_ERR_OTHER on every
 * rank, after one cudampi line), nothing hangs, and the communicator goes on with correct
 * results on the staged path; a communicator whose NCCL fails to start stays staged, correct.
 *
 * The stand-in NCCL fails on request (tests/fixture/fakenccl.c): FAKENCCL_FAIL=cN makes the N-th
 * NCCL collective of the process fail asynchronously (its peers then see a remote error), and
 * FAKENCCL_FAIL_INIT=1 makes ncclCommInitRank fail on every rank; both are read at each call,
 * so the test sets them with setenv at the point it wants. Outside mode nccl every call must
 * succeed with the right bytes (no NCCL is loaded in CI; on a GPU machine a real one may be,
 * which fails nothing), and the counter is not looked at.
 * Checks, 2 and 3 ranks: 1. an Allreduce of 4 KiB of ints on device memory runs (on NCCL in
 * mode nccl); 2. rank 0's next NCCL operation fails: every rank's Allreduce returns an error of
 * class MPI_ERR_OTHER (mode nccl) or succeeds (other modes); 3. the next Allreduce and Bcast on
 * the same communicator succeed with the right bytes, staged (nccl_calls unchanged); 4. a new
 * communicator whose NCCL fails to start: correct and staged; 5. a further new communicator,
 * failures off: on NCCL again (mode nccl); 6. on it, an MPI_Iallreduce whose NCCL operation
 * fails: MPI_Wait returns MPI_ERR_OTHER on every rank, and the Allreduce and Iallreduce after
 * it succeed, staged. */
#include "common.h"
#include "ipc_stats.h"

#define N 1024

static unsigned long long nccl_calls(stats_fn get)
{
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    return get && get(&s) == 0 ? s.nccl_calls : 0;
}

/* An Allreduce (MPI_SUM of ints) on device buffers, blocking or (`nb`) MPI_Iallreduce and
 * MPI_Wait: its return code (MPI_Wait's); the result is checked when it succeeded. */
static int allreduce_as(MPI_Comm comm, int seed, const char *what, int nb)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *in = xmalloc(N * sizeof(int)), *out = xmalloc(N * sizeof(int)), *want = xmalloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        in[i] = seed + 7 * rank + i;
        want[i] = 0;
        for (int r = 0; r < size; r++) want[i] += seed + 7 * r + i;
    }
    int *dsend = mem_alloc(MEM_DEVICE, N * sizeof(int)), *drecv = mem_alloc(MEM_DEVICE, N * sizeof(int));
    mem_put(dsend, in, N * sizeof(int));
    mem_poison(drecv, N * sizeof(int));
    int rc;
    if (nb) {
        MPI_Request req;
        rc = MPI_Iallreduce(dsend, drecv, N, MPI_INT, MPI_SUM, comm, &req);
        CHECK(rc == MPI_SUCCESS, "%s: MPI_Iallreduce returned %d", what, rc);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Allreduce(dsend, drecv, N, MPI_INT, MPI_SUM, comm);
    }
    if (rc == MPI_SUCCESS) {
        mem_get(out, drecv, N * sizeof(int));
        check_bytes(out, want, N * sizeof(int), "%s: %s result", what, nb ? "Iallreduce" : "Allreduce");
    }
    mem_free(dsend);
    mem_free(drecv);
    free(in);
    free(out);
    free(want);
    return rc;
}

static int allreduce(MPI_Comm comm, int seed, const char *what) { return allreduce_as(comm, seed, what, 0); }
static int iallreduce(MPI_Comm comm, int seed, const char *what) { return allreduce_as(comm, seed, what, 1); }

static void bcast(MPI_Comm comm, int seed, const char *what)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    const size_t n = 64 << 10;
    unsigned char *want = pattern_new(n, 0, seed), *got = xmalloc(n);
    unsigned char *d = mem_alloc(MEM_DEVICE, n);
    if (rank == 0) mem_put(d, want, n);
    else mem_poison(d, n);
    int rc = MPI_Bcast(d, (int)n, MPI_BYTE, 0, comm);
    CHECK(rc == MPI_SUCCESS, "%s: Bcast returned %d", what, rc);
    mem_get(got, d, n);
    check_bytes(got, want, n, "%s: Bcast result", what);
    mem_free(d);
    free(want);
    free(got);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = stats_lookup();
    const int nccl = strcmp(t_env("CMTEST_MODE", ""), "nccl") == 0 && get;
    MPI_Comm comm;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));

    unsigned long long before = nccl_calls(get);
    CHECK(allreduce(comm, 1, "first") == MPI_SUCCESS, "first Allreduce failed");
    CHECK(!nccl || nccl_calls(get) - before == 1, "first Allreduce: %llu NCCL calls, expected 1", nccl_calls(get) - before);

    /* Rank 0's next NCCL collective fails: the process has made exactly one so far (the first
     * Allreduce; the sends and receives that connect a new communicator are not counted). */
    if (t_rank == 0) setenv("FAKENCCL_FAIL", "c2", 1);
    before = nccl_calls(get);
    int rc = allreduce(comm, 2, "failing");
    if (nccl) {
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER, "failing Allreduce: returned %d (class %d), expected MPI_ERR_OTHER",
              rc, cls);
    } else {
        CHECK(rc == MPI_SUCCESS, "Allreduce returned %d without NCCL", rc);
    }
    CHECK(!nccl || nccl_calls(get) == before, "failing Allreduce counted as run on NCCL");
    unsetenv("FAKENCCL_FAIL");

    /* The communicator goes on, staged, with the right bytes. */
    before = nccl_calls(get);
    CHECK(allreduce(comm, 3, "after the failure") == MPI_SUCCESS, "Allreduce after the failure failed");
    bcast(comm, 4, "after the failure");
    CHECK(!nccl || nccl_calls(get) == before, "%llu NCCL calls after the failure, expected none", nccl_calls(get) - before);

    /* NCCL fails to start on a new communicator: staged, correct. */
    setenv("FAKENCCL_FAIL_INIT", "1", 1);
    MPI_Comm c2;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    MPI_CHECK(MPI_Comm_set_errhandler(c2, MPI_ERRORS_RETURN));
    before = nccl_calls(get);
    CHECK(allreduce(c2, 5, "NCCL failed to start") == MPI_SUCCESS, "Allreduce where NCCL failed to start failed");
    CHECK(allreduce(c2, 6, "NCCL failed to start, again") == MPI_SUCCESS, "second Allreduce where NCCL failed to start failed");
    CHECK(!nccl || nccl_calls(get) == before, "NCCL counted where it failed to start");
    unsetenv("FAKENCCL_FAIL_INIT");
    MPI_Comm_free(&c2);

    /* A new communicator with nothing failing: NCCL again. */
    MPI_Comm c3;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c3));
    MPI_CHECK(MPI_Comm_set_errhandler(c3, MPI_ERRORS_RETURN));
    before = nccl_calls(get);
    CHECK(allreduce(c3, 7, "fresh communicator") == MPI_SUCCESS, "Allreduce on a fresh communicator failed");
    bcast(c3, 8, "fresh communicator");
    CHECK(!nccl || nccl_calls(get) - before == 2, "fresh communicator: %llu NCCL calls, expected 2", nccl_calls(get) - before);

    /* 6. A nonblocking collective whose NCCL operation fails (rank 0's fifth collective: two
     * on comm, Allreduce and Bcast on c3, then this one): MPI_Wait reports it on every rank;
     * the communicator's next agreement stages, and so does the nonblocking call after it. */
    if (t_rank == 0) setenv("FAKENCCL_FAIL", "c5", 1);
    rc = iallreduce(c3, 9, "failing nonblocking");
    unsetenv("FAKENCCL_FAIL");
    if (nccl) {
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER, "failing Iallreduce: MPI_Wait returned %d (class %d), expected MPI_ERR_OTHER",
              rc, cls);
    } else {
        CHECK(rc == MPI_SUCCESS, "Iallreduce returned %d without NCCL", rc);
    }
    before = nccl_calls(get);
    CHECK(allreduce(c3, 10, "after the failing Iallreduce") == MPI_SUCCESS, "Allreduce after the failing Iallreduce failed");
    CHECK(iallreduce(c3, 11, "after the failing Iallreduce") == MPI_SUCCESS, "Iallreduce after the failing one failed");
    CHECK(!nccl || nccl_calls(get) == before, "%llu NCCL calls after the failing Iallreduce, expected none", nccl_calls(get) - before);
    MPI_Comm_free(&c3);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
