// cudampi-test: ranks=1,2,3,4 without-shim=skip nccl=yes nccl-ranks=2 timeout=240 forced=no
/* Persistent collectives (MPI-4) on device buffers, each compared byte for byte with the same
 * persistent collective on host buffers in the same run and with the expected bytes:
 *   MPI_Bcast_init, MPI_Reduce_init, MPI_Allreduce_init, MPI_Gather(v)_init,
 *   MPI_Scatter(v)_init, MPI_Allgather(v)_init, MPI_Alltoall(v,w)_init,
 *   MPI_Reduce_scatter(_block)_init, MPI_Scan_init, MPI_Exscan_init;
 * counts 1 and 2001; MPI_INT / MPI_DOUBLE reductions on integer data and the user-defined ops
 * (non-commutative affine composition, struct max with a hole); derived types (strided vector,
 * resized) for the data movers; v/w forms with gapped, reverse-ordered displacements;
 * MPI_IN_PLACE wherever allowed; insignificant buffers as NULL / FREED device memory / a real
 * buffer that must stay unchanged.
 * Four requests at a time (the batch) are initialised once and then run for three rounds with NEW data
 * every round (send buffers rewritten, receive buffers poisoned again: a shim that staged the
 * send data only at init, or copied the result back only once, fails), started by MPI_Startall
 * or MPI_Start one by one, completed by Wait / Waitall / Test loops / Waitany / Testall /
 * Waitsome / Testany, and finally freed with MPI_Request_free (inactive). A request that is
 * initialised on device buffers and freed without ever being started must not disturb anything;
 * MPI_Barrier_init runs once.
 * Placements: device/device, host send + device receive, device send + host receive vs
 * host/host.
 * Plain-MPI bugs worked around (host buffers, no shim; see coll_util.c): MPICH's MPI_Testall
 * returns MPI_ERR_IN_STATUS for persistent collectives (Test loops instead); MPICH 4.0 runs
 * one request at a time and leaves out Gather/Scatter/Allgather_init and in-place
 * Alltoallw_init; in-place Reduce only at root 0 there.
 * Needs the MPI-4 functions: the header must declare them (MPI_VERSION >= 4, or Open MPI 5)
 * and the library must export MPI_Allreduce_init (dlsym); otherwise a note and PASS. Hence
 * without-shim=skip: on Open MPI 4.1 nothing would crash. */
#include "common.h"
#include "coll_util.c"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
#ifdef HAVE_COLL_INIT
    if (!have_sym("MPI_Allreduce_init")) {
        if (t_rank == 0) note("the library does not export MPI_Allreduce_init: nothing to test");
        return report_and_finalize();
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    coll_types_init();

    static const int colls[] = {C_BCAST,     C_REDUCE,    C_ALLREDUCE, C_GATHER,  C_GATHERV,
                                C_SCATTER,   C_SCATTERV,  C_ALLGATHER, C_ALLGATHERV,
                                C_ALLTOALL,  C_ALLTOALLV, C_ALLTOALLW, C_REDUCE_SCATTER_BLOCK,
                                C_REDUCE_SCATTER, C_SCAN, C_EXSCAN};
    const int ncolls = (int)(sizeof colls / sizeof colls[0]);
    const struct ttype *pairs[][2] = {{&TT_INT, &TT_INT}, {&TT_INT, &TT_VEC},
                                      {&TT_DOUBLE, &TT_DOUBLE}, {&TT_RESIZED, &TT_VEC},
                                      {&TT_BYTE, &TT_BYTE}};
    const int npairs = (int)(sizeof pairs / sizeof pairs[0]);
    static const int counts[] = {1, 2001};

    struct ccase *cases = (struct ccase *)calloc(128, sizeof *cases);
    int nc = 0;
    for (int k = 0; k < 2; k++)
        for (int ci = 0; ci < ncolls; ci++)
            for (int var = 0; var < 2; var++) {
                int coll = colls[ci];
                if (var && !coll_allows_inplace(coll)) continue;
                struct ccase *c = &cases[nc];
                memset(c, 0, sizeof *c);
                c->coll = coll;
                c->n = counts[k];
                c->comm = comm;
                c->inplace = var;
                c->root = ((ci + k + var) % 2) ? t_size - 1 : 0;
                c->insig = (k + ci + var) % 3;
                if (coll_is_reduction(coll)) {
                    int u = (ci + k + var) % 4;
                    if (u == 0) c->st = c->rt = &TT_INT, c->opid = OP_SUM;
                    else if (u == 1) c->st = c->rt = &TT_DOUBLE, c->opid = OP_PROD;
                    else if (u == 2) c->st = c->rt = &TT_AFFINE, c->opid = OP_AFFINE;
                    else c->st = c->rt = &TT_MAXS, c->opid = OP_MAXS;
                } else {
                    int pi = (ci + k + var) % npairs;
                    c->st = pairs[pi][0];
                    c->rt = pairs[pi][1];
                    c->opid = OP_NONE;
                }
                if (coll == C_REDUCE && c->inplace && quirk_mpich40_reduce_inplace()) c->root = 0;
                c->seed = nc + 1;
                if (!case_keep(c, M_INIT)) continue;
                nc++;
            }

    int batch = 4;
    if (lib_is_mpich40()) {
        batch = 1;
        if (t_rank == 0)
            note("MPICH 4.0: one persistent collective active at a time (with several active, "
                 "restarted ones deliver stale data or none, on host buffers)");
    }
    run_persistent_all_placements(cases, nc, M_INIT, batch, 3, coll_plan, coll_start);

    /* initialised on device buffers, freed without a start */
    for (int i = 0; i < 3 && i * 5 < nc; i++) {
        struct ccase *c = &cases[i * 5];
        c->sk = c->rk = MEM_DEVICE;
        coll_plan(c);
        case_alloc(c);
        case_fill(c, c->seed);
        case_make_freed(c);
        MPI_CHECK(coll_start(c, M_INIT));
        MPI_CHECK(MPI_Request_free(&c->req));
        CHECK(c->req == MPI_REQUEST_NULL, "%s: Request_free of a never-started request", c->label);
        if (c->rbuf) { /* nothing may have been written */
            unsigned char *got = mem_fetch(c->rbuf, c->rspan + SLACK);
            check_bytes(got, c->rimg, c->rspan + SLACK, "%s: never started, receive buffer changed",
                        c->label);
            free(got);
        }
        case_free(c);
    }
    MPI_Request br;
    MPI_CHECK(MPI_Barrier_init(comm, MPI_INFO_NULL, &br));
    MPI_CHECK(MPI_Start(&br));
    MPI_CHECK(MPI_Wait(&br, MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Request_free(&br));

    free(cases);
    coll_types_free();
    MPI_Comm_free(&comm);
#else
    if (t_rank == 0) note("mpi.h declares no persistent collectives (MPI_VERSION %d): nothing to test", MPI_VERSION);
#endif
    return report_and_finalize();
}
