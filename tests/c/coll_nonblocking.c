// cudampi-test: ranks=1,2,3,4 without-shim=crash nccl=yes timeout=240 forced=no
/* Nonblocking collectives on device buffers, each compared byte for byte with the same
 * collective on host buffers in the same run and with the expected bytes:
 *   MPI_Ibcast, MPI_Ireduce, MPI_Iallreduce, MPI_Igather(v), MPI_Iscatter(v), MPI_Iallgather(v),
 *   MPI_Ialltoall(v,w), MPI_Ireduce_scatter(_block), MPI_Iscan, MPI_Iexscan;
 * counts 0, 1, 3001; MPI_INT / MPI_DOUBLE reductions (integer data, exact) and user-defined ops
 * (non-commutative affine composition, struct max over a type with a hole); MPI_BYTE / MPI_INT /
 * MPI_DOUBLE and derived types (strided vector, resized) for the data movers; v/w forms with
 * gapped, reverse-ordered displacements whose gap bytes must keep their values; MPI_IN_PLACE
 * wherever allowed; insignificant buffers on non-root ranks as NULL / FREED device memory / a
 * real buffer that must stay unchanged.
 * Five collectives at a time are started one after another with their buffers live together,
 * then completed by one of MPI_Wait (in order, and in reverse order), MPI_Waitall, an MPI_Test
 * loop, MPI_Waitany, an MPI_Testall loop, MPI_Waitsome, an MPI_Testany loop (changing from batch
 * to batch); the requests must be MPI_REQUEST_NULL afterwards and the results must be in the
 * (device) receive buffers at completion; send buffers unchanged; poisoned slack untouched.
 * Placements: device/device, host send + device receive, device send + host receive vs
 * host/host.
 * Plain-MPI bugs worked around (host buffers, no shim; coll_quirk() in coll_util.c, a note
 * names each case left out): Open MPI's in-place Ialltoallv/w with 4 ranks and large blocks;
 * MPICH 4.0's in-place Ialltoallw, its single-process Iallgatherv, its in-place Reduce at a
 * root other than 0. */
#include "common.h"
#include "coll_util.c"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    coll_types_init();

    static const int colls[] = {C_BCAST,     C_REDUCE,    C_ALLREDUCE, C_GATHER,  C_GATHERV,
                                C_SCATTER,   C_SCATTERV,  C_ALLGATHER, C_ALLGATHERV,
                                C_ALLTOALL,  C_ALLTOALLV, C_ALLTOALLW, C_REDUCE_SCATTER_BLOCK,
                                C_REDUCE_SCATTER, C_SCAN, C_EXSCAN};
    const int ncolls = (int)(sizeof colls / sizeof colls[0]);
    const struct ttype *pairs[][2] = {{&TT_INT, &TT_INT},    {&TT_DOUBLE, &TT_DOUBLE},
                                      {&TT_INT, &TT_VEC},    {&TT_BYTE, &TT_BYTE},
                                      {&TT_RESIZED, &TT_VEC}, {&TT_VEC, &TT_VEC},
                                      {&TT_INT, &TT_RESIZED}};
    const int npairs = (int)(sizeof pairs / sizeof pairs[0]);
    static const int int_ops[] = {OP_SUM, OP_MAX, OP_MIN, OP_BXOR};
    static const int dbl_ops[] = {OP_SUM, OP_PROD, OP_MAX, OP_MIN};
    static const int counts[] = {0, 1, 3001};

    struct ccase *cases = (struct ccase *)calloc(256, sizeof *cases);
    int nc = 0;
    for (int k = 0; k < 3; k++)
        for (int ci = 0; ci < ncolls; ci++)
            for (int var = 0; var < 2; var++) {
                int coll = colls[ci];
                if (var && (k == 0 || !coll_allows_inplace(coll))) continue;
                struct ccase *c = &cases[nc];
                memset(c, 0, sizeof *c);
                c->coll = coll;
                c->n = counts[k];
                c->comm = comm;
                c->inplace = var;
                c->root = ((ci + var) % 2) ? t_size - 1 : 0;
                c->insig = (k + ci + var) % 3;
                if (coll_is_reduction(coll)) {
                    int dbl = (k + ci + var) % 2;
                    c->st = c->rt = dbl ? &TT_DOUBLE : &TT_INT;
                    c->opid = dbl ? dbl_ops[(ci + var) % 4] : int_ops[(ci + k) % 4];
                } else {
                    int pi = (ci + 2 * k + var) % npairs;
                    c->st = pairs[pi][0];
                    c->rt = pairs[pi][1];
                    c->opid = OP_NONE;
                }
                if (coll == C_REDUCE && c->inplace && quirk_mpich40_reduce_inplace()) c->root = 0;
                c->seed = nc + 1;
                if (!case_keep(c, M_NB)) continue;
                nc++;
            }
    /* user-defined ops */
    static const int ucolls[] = {C_REDUCE, C_ALLREDUCE, C_SCAN, C_EXSCAN, C_REDUCE_SCATTER_BLOCK};
    for (int ui = 0; ui < 5; ui++)
        for (int u = 0; u < 2; u++) {
            struct ccase *c = &cases[nc];
            memset(c, 0, sizeof *c);
            c->coll = ucolls[ui];
            c->n = u ? 777 : 2001;
            c->comm = comm;
            c->inplace = (ui + u) % 2;
            c->root = u ? t_size - 1 : 0;
            c->insig = (ui + u) % 3;
            c->st = c->rt = u ? &TT_MAXS : &TT_AFFINE;
            c->opid = u ? OP_MAXS : OP_AFFINE;
            if (c->coll == C_REDUCE && c->inplace && quirk_mpich40_reduce_inplace()) c->root = 0;
            c->seed = nc + 1;
            if (!case_keep(c, M_NB)) continue;
            nc++;
        }

    run_batched_all_placements(cases, nc, M_NB, 5, coll_plan, coll_start);

    free(cases);
    coll_types_free();
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
