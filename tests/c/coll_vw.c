// cudampi-test: ranks=1,2,3,4 without-shim=crash nccl=yes timeout=240 forced=no
/* Blocking v/w collectives and derived datatypes on device buffers, each compared byte for byte
 * with the same collective on host buffers in the same run and with the expected bytes:
 *   MPI_Gatherv, MPI_Scatterv, MPI_Allgatherv, MPI_Alltoallv, MPI_Alltoallw with uneven counts
 *   (some zero) and displacements that put the blocks in REVERSE rank order with GAPS between
 *   them (Alltoallw: byte displacements with odd gaps, a different datatype per peer: MPI_INT,
 *   a strided MPI_Type_vector, a resized type with a hole after every element);
 *   MPI_Bcast, MPI_Gather, MPI_Scatter, MPI_Allgather, MPI_Alltoall with derived datatypes: the
 *   strided vector and the resized type, on one or both sides (e.g. 6n MPI_INT sent, n vectors
 *   received; resized types sent, vectors received);
 *   MPI_IN_PLACE in every one of them (at the root for Gatherv / Scatterv / Gather / Scatter);
 *   insignificant buffers on non-root ranks (Gatherv receive buffer, Scatterv send buffer, and
 *   their count/displacement arrays) passed as NULL or as FREED device memory, or as a real
 *   buffer that must come back unchanged.
 * The gap bytes between blocks and the holes inside the derived types are filled with gap_fill
 * and must keep their values in device memory exactly as in host memory; received bytes start
 * poisoned; SLACK bytes after the span stay poison; send buffers come back unchanged.
 * Placements: device/device, host send + device receive, device send + host receive vs
 * host/host. */
#include "common.h"
#include "coll_util.c"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    coll_types_init();

    /* {send type, receive type}: the receive element's size is a multiple of the send one's */
    const struct ttype *pairs[][2] = {{&TT_INT, &TT_INT},     {&TT_DOUBLE, &TT_DOUBLE},
                                      {&TT_INT, &TT_VEC},     {&TT_RESIZED, &TT_VEC},
                                      {&TT_INT, &TT_RESIZED}, {&TT_BYTE, &TT_DOUBLE},
                                      {&TT_VEC, &TT_VEC},     {&TT_RESIZED, &TT_RESIZED}};
    const int npairs = (int)(sizeof pairs / sizeof pairs[0]);
    static const int vcolls[] = {C_GATHERV, C_SCATTERV, C_ALLGATHERV, C_ALLTOALLV, C_ALLTOALLW};
    static const int dcolls[] = {C_BCAST, C_GATHER, C_SCATTER, C_ALLGATHER, C_ALLTOALL};
    static const int counts[] = {1, 37, 1501};

    struct ccase *cases = (struct ccase *)calloc(256, sizeof *cases);
    int nc = 0;
    for (int set = 0; set < 2; set++)
        for (int ci = 0; ci < 5; ci++)
            for (int k = 0; k < 3; k++)
                for (int var = 0; var < 2; var++) {
                    int coll = set == 0 ? vcolls[ci] : dcolls[ci];
                    if (var && !coll_allows_inplace(coll)) {
                        if (coll != C_BCAST) continue;
                    }
                    struct ccase *c = &cases[nc];
                    memset(c, 0, sizeof *c);
                    c->coll = coll;
                    c->n = counts[k];
                    c->comm = comm;
                    c->inplace = coll_allows_inplace(coll) ? var : 0;
                    c->root = ((k + var) % 2) ? t_size - 1 : 0;
                    c->insig = (k + var + ci) % 3;
                    /* v forms: every pair in turn; derived-type set: pairs 2.. (a derived type
                     * on at least one side) */
                    int pi = set == 0 ? (k * 2 + var + ci) % npairs
                                      : 2 + (k * 2 + var + ci) % (npairs - 2);
                    c->st = pairs[pi][0];
                    c->rt = pairs[pi][1];
                    if (coll == C_ALLTOALLW) c->st = c->rt = &TT_VEC; /* per-peer types: w_type() */
                    c->opid = OP_NONE;
                    c->seed = nc + 1;
                    if (!case_keep(c, M_BLOCK)) continue;
                    nc++;
                }

    run_all_placements(cases, nc, M_BLOCK, coll_plan, coll_start);

    free(cases);
    coll_types_free();
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
