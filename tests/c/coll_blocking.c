// cudampi-test: ranks=1,2,3,4 without-shim=crash nccl=yes timeout=240 forced=no
/* Blocking collectives on device buffers (intra-communicator), each compared byte for byte with
 * the same collective on host buffers in the same run and with the expected result:
 *   MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Reduce_local, MPI_Gather, MPI_Scatter,
 *   MPI_Allgather, MPI_Alltoall, MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Scan,
 *   MPI_Exscan (the v/w forms and derived datatypes are in coll_vw.c);
 * counts 0, 1, 97, 8191 elements of MPI_BYTE / MPI_INT / MPI_DOUBLE (256 KiB buffers for
 * Alltoall at 4 ranks), 1 MiB for Bcast, 256 KiB for Allreduce; reductions MPI_SUM, MPI_PROD,
 * MPI_MAX, MPI_MIN, MPI_BXOR on integer-valued MPI_INT / MPI_DOUBLE data (exact in any order);
 * placements: device send + device receive, host send + device receive, device send + host
 * receive (Bcast: device root + device others, host root + device others, device root + host
 * others; Reduce_local: inbuf / inoutbuf), compared with host + host;
 * MPI_IN_PLACE wherever the standard allows it (Reduce at the root, Allreduce, Gather and
 * Scatter at the root, Allgather, Alltoall, Reduce_scatter(_block), Scan, Exscan), root 0 and
 * root size-1;
 * insignificant buffers: the receive buffer of Reduce/Gather and the send buffer of Scatter on
 * non-root ranks passed as NULL, as a pointer to FREED device memory (the shim must not look at
 * it), or as a real buffer that must come back unchanged;
 * user-defined ops (MPI_Op_create): a non-commutative op (composition of affine maps) on a
 * contiguous type and a commutative struct max on a struct type with a hole, in Reduce,
 * Allreduce, Scan, Exscan, Reduce_local, Reduce_scatter_block, with and without MPI_IN_PLACE.
 * Receive buffers start poisoned; SLACK bytes after the used span must stay poison; send
 * buffers must come back unchanged; Exscan's result on rank 0 and the rest of an in-place
 * Reduce_scatter buffer are undefined and not compared. MPI_Barrier needs no buffer.
 * Plain-MPI bugs worked around (host buffers, no shim): MPICH 4.0's in-place Reduce at a root
 * other than 0 segfaults (root 0 there); MPICH's in-place Reduce_scatter fails when a rank's
 * count exceeds the sum of the counts before it (the counts here avoid that). */
#include "common.h"
#include "coll_util.c"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    coll_types_init();

    static const int colls[] = {C_BCAST,   C_REDUCE,  C_ALLREDUCE, C_REDUCE_LOCAL,
                                C_GATHER,  C_SCATTER, C_ALLGATHER, C_ALLTOALL,
                                C_REDUCE_SCATTER_BLOCK, C_REDUCE_SCATTER, C_SCAN, C_EXSCAN};
    static const int counts[] = {0, 1, 97, 8191};
    const struct ttype *move_types[] = {&TT_INT, &TT_BYTE, &TT_DOUBLE, &TT_INT};
    static const int int_ops[] = {OP_SUM, OP_MAX, OP_MIN, OP_BXOR};
    static const int dbl_ops[] = {OP_SUM, OP_PROD, OP_MAX, OP_MIN};
    const int ncolls = (int)(sizeof colls / sizeof colls[0]);
    const int ncounts = (int)(sizeof counts / sizeof counts[0]);

    struct ccase *cases = (struct ccase *)calloc(512, sizeof *cases);
    int nc = 0;
    for (int ci = 0; ci < ncolls; ci++) {
        int coll = colls[ci];
        for (int k = 0; k < ncounts; k++) {
            for (int var = 0; var < 2; var++) {
                if (var == 1 && (!coll_allows_inplace(coll) || counts[k] == 0)) continue;
                struct ccase *c = &cases[nc];
                memset(c, 0, sizeof *c);
                c->coll = coll;
                c->n = counts[k];
                c->comm = comm;
                c->inplace = var;
                c->root = ((k + var) % 2) ? t_size - 1 : 0;
                c->insig = (k + var) % 3;
                if (coll == C_REDUCE && var && quirk_mpich40_reduce_inplace()) c->root = 0;
                if (coll_is_reduction(coll)) {
                    int dbl = (k + ci) % 2;
                    c->st = c->rt = dbl ? &TT_DOUBLE : &TT_INT;
                    c->opid = dbl ? dbl_ops[(k + var) % 4] : int_ops[(k + var) % 4];
                } else {
                    c->st = c->rt = move_types[k];
                    c->opid = OP_NONE;
                }
                c->seed = nc + 1;
                if (!case_keep(c, M_BLOCK)) continue;
                nc++;
            }
        }
    }
    /* user-defined ops */
    static const int ucolls[] = {C_REDUCE, C_ALLREDUCE, C_SCAN, C_EXSCAN, C_REDUCE_LOCAL,
                                 C_REDUCE_SCATTER_BLOCK};
    static const int ucounts[] = {1, 6007};
    for (int ui = 0; ui < 6; ui++)
        for (int u = 0; u < 2; u++)
            for (int k = 0; k < 2; k++) {
                struct ccase *c = &cases[nc];
                memset(c, 0, sizeof *c);
                c->coll = ucolls[ui];
                c->n = ucounts[k];
                c->comm = comm;
                c->inplace = coll_allows_inplace(c->coll) && (k == u);
                c->root = k == 1 ? t_size - 1 : 0;
                c->insig = (k + u) % 3;
                if (c->coll == C_REDUCE && c->inplace && quirk_mpich40_reduce_inplace()) c->root = 0;
                c->st = c->rt = u ? &TT_MAXS : &TT_AFFINE;
                c->opid = u ? OP_MAXS : OP_AFFINE;
                c->seed = nc + 1;
                if (!case_keep(c, M_BLOCK)) continue;
                nc++;
            }

    /* large buffers: Bcast of 1 MiB (131075 doubles), in-place Allreduce of 256 KiB (MPICH
     * takes seconds per 1 MiB Allreduce with 4 ranks on 2 cores) */
    for (int k = 0; k < 3; k += 2) {
        struct ccase *c = &cases[nc];
        memset(c, 0, sizeof *c);
        c->coll = k == 0 ? C_BCAST : C_ALLREDUCE;
        c->n = k == 0 ? 131075 : 32771;
        c->comm = comm;
        c->inplace = k == 2;
        c->root = t_size - 1;
        c->st = c->rt = &TT_DOUBLE;
        c->opid = k == 0 ? OP_NONE : OP_SUM;
        c->seed = nc + 1;
        if (!case_keep(c, M_BLOCK)) continue;
        nc++;
    }

    run_all_placements(cases, nc, M_BLOCK, coll_plan, coll_start);
    MPI_CHECK(MPI_Barrier(comm));

    free(cases);
    coll_types_free();
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
