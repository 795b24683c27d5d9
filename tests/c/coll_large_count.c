// cudampi-test: ranks=1,2,3,4 without-shim=skip nccl=yes nccl-ranks=2,3 timeout=240 forced=no
/* Large-count (MPI-4 "_c") collectives on device buffers, each compared byte for byte with the
 * same call on host buffers in the same run and with the expected bytes:
 *   blocking MPI_Bcast_c, MPI_Reduce_c, MPI_Allreduce_c, MPI_Reduce_local_c, MPI_Gather(v)_c,
 *   MPI_Scatter(v)_c, MPI_Allgather(v)_c, MPI_Alltoall(v,w)_c, MPI_Reduce_scatter(_block)_c,
 *   MPI_Scan_c, MPI_Exscan_c (MPI_Count counts, MPI_Count / MPI_Aint count and displacement
 *   arrays); the nonblocking MPI_I..._c forms (four at a time, mixed completion) and the
 *   persistent ..._init_c forms (three rounds with new data) where the library has them;
 * counts 1 and 2049; MPI_INT / MPI_DOUBLE reductions on integer data and the user-defined ops
 * (non-commutative affine composition, struct max with a hole); derived types (strided vector,
 * resized) for the data movers; v/w forms with gapped, reverse-ordered displacements;
 * MPI_IN_PLACE wherever allowed; insignificant buffers (non-root receive buffers of Gather(v) /
 * Reduce, send buffers of Scatter(v), and their count/displacement arrays) as NULL / FREED device
 * memory / a real buffer that must stay unchanged.
 * Placements: device/device, host send + device receive, device send + host receive vs
 * host/host. The neighbourhood _c forms are in coll_neighbor.c.
 * Needs mpi.h to declare the _c functions (MPI_VERSION >= 4: MPICH 4 and 5; Open MPI 4.1 and
 * 5.0 do not) and the library to export MPI_Allreduce_c (dlsym); otherwise a note and PASS.
 * Hence without-shim=skip: on Open MPI nothing would crash. Plain-MPI bugs worked around as in
 * the other coll_ tests (coll_quirk() in coll_util.c). */
#include "common.h"
#include "coll_util.c"

#ifdef HAVE_COLL_C
static int build(struct ccase *cases, MPI_Comm comm, int mode)
{
    static const int colls[] = {C_BCAST,     C_REDUCE,    C_ALLREDUCE, C_REDUCE_LOCAL, C_GATHER,
                                C_GATHERV,   C_SCATTER,   C_SCATTERV,  C_ALLGATHER,  C_ALLGATHERV,
                                C_ALLTOALL,  C_ALLTOALLV, C_ALLTOALLW, C_REDUCE_SCATTER_BLOCK,
                                C_REDUCE_SCATTER, C_SCAN, C_EXSCAN};
    const int ncolls = (int)(sizeof colls / sizeof colls[0]);
    const struct ttype *pairs[][2] = {{&TT_INT, &TT_INT}, {&TT_INT, &TT_VEC},
                                      {&TT_DOUBLE, &TT_DOUBLE}, {&TT_RESIZED, &TT_VEC},
                                      {&TT_BYTE, &TT_BYTE}};
    const int npairs = (int)(sizeof pairs / sizeof pairs[0]);
    static const int counts[] = {1, 2049};
    int nc = 0;
    for (int k = 0; k < 2; k++)
        for (int ci = 0; ci < ncolls; ci++)
            for (int var = 0; var < 2; var++) {
                int coll = colls[ci];
                if (mode != M_BLOCK_C && coll == C_REDUCE_LOCAL) continue;
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
                    if (u == 0) c->st = c->rt = &TT_INT, c->opid = OP_BXOR;
                    else if (u == 1) c->st = c->rt = &TT_DOUBLE, c->opid = OP_SUM;
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
                if (!case_keep(c, mode)) continue;
                nc++;
            }
    return nc;
}
#endif

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
#ifdef HAVE_COLL_C
    if (!have_sym("MPI_Allreduce_c")) {
        if (t_rank == 0) note("the library does not export MPI_Allreduce_c: nothing to test");
        return report_and_finalize();
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    coll_types_init();
    struct ccase *cases = (struct ccase *)calloc(128, sizeof *cases);

    int nc = build(cases, comm, M_BLOCK_C);
    run_all_placements(cases, nc, M_BLOCK_C, coll_plan, coll_start);

    if (have_sym("MPI_Iallreduce_c")) {
        nc = build(cases, comm, M_NB_C);
        run_batched_all_placements(cases, nc, M_NB_C, 4, coll_plan, coll_start);
    } else if (t_rank == 0) {
        note("no MPI_Iallreduce_c: nonblocking _c forms not tested");
    }
    if (have_sym("MPI_Allreduce_init_c")) {
        nc = build(cases, comm, M_INIT_C);
        run_persistent_all_placements(cases, nc, M_INIT_C, lib_is_mpich40() ? 1 : 4, 3, coll_plan,
                                      coll_start);
    } else if (t_rank == 0) {
        note("no MPI_Allreduce_init_c: persistent _c forms not tested");
    }

    free(cases);
    coll_types_free();
    MPI_Comm_free(&comm);
#else
    if (t_rank == 0)
        note("mpi.h declares no large-count collectives (MPI_VERSION %d): nothing to test", MPI_VERSION);
#endif
    return report_and_finalize();
}
