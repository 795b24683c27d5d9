// cudampi-test: ranks=2,3,4 without-shim=crash nccl=yes nccl-ranks=2 timeout=240 forced=no
/* Collectives over an INTERCOMMUNICATOR on device buffers, each compared byte for byte with the
 * same collective on host buffers in the same run and with the expected bytes.
 * MPI_COMM_WORLD is split into two groups (ranks [0, ceil(n/2)) and the rest; 1+1, 2+1, 2+2
 * ranks) joined by MPI_Intercomm_create. Collectives, blocking and nonblocking:
 *   MPI_Bcast / MPI_Ibcast and MPI_Reduce / MPI_Ireduce with the root in either group: the root
 *   passes MPI_ROOT, the rest of its group MPI_PROC_NULL (their buffers, and the root's send
 *   buffer for Reduce, are insignificant: passed as NULL, FREED device memory, or a real buffer
 *   that must come back unchanged), the other group the root's rank;
 *   MPI_Gather / MPI_Igather and MPI_Scatter / MPI_Iscatter the same way;
 *   MPI_Allreduce / MPI_Iallreduce (each group receives the reduction over the OTHER group, in
 *   its rank order: also with the non-commutative user op), MPI_Allgather / MPI_Iallgather
 *   (the other group's blocks), MPI_Alltoall / MPI_Ialltoall (block j to / from remote rank j);
 * counts 1 and 3001; MPI_INT / MPI_DOUBLE (reductions with integer data, exact) and a strided
 * vector type received against MPI_INT sent; nonblocking ones four at a time, completed by
 * changing Wait / Test / Waitany / ... methods.
 * Placements: device/device, host send + device receive, device send + host receive (Bcast:
 * the root's buffer is the "send" one) vs host/host. Received bytes start poisoned, SLACK bytes
 * after the span stay poison, send buffers unchanged.
 * Plain-MPI limits worked around: MPICH rejects NULL buffers from MPI_PROC_NULL ranks (MPICH
 * 4.0 also the MPI_ROOT's NULL send buffer): those pass freed device memory; MPICH's
 * intercommunicator MPI_Ibcast from a root other than 0 delivers nothing: left out there. */
#include "common.h"
#include "coll_util.c"

static int g_color, g_lsize, g_rsize;
static int g_lworld[MAXP], g_rworld[MAXP]; /* world ranks of the local / remote group */

/* Plan an intercommunicator case (c->root: the root's rank in group c->rgroup). */
static void inter_plan(struct ccase *c)
{
    MPI_Comm_rank(c->comm, &c->me);
    c->P = g_lsize;
    const int me = c->me, n = c->n, Q = g_rsize;
    const struct ttype *st = c->st, *rt = c->rt;
    c->vt = coll_is_reduction(c->coll) ? rt->vt : VT_BYTES;
    c->sdt = st->dt;
    c->rdt = rt->dt;
    c->sarg = c->rarg = ARG_BUF;
    c->s_kind = c->sk;
    c->r_kind = c->rk;
    c->s_arrays_null = c->r_arrays_null = 0;
    memset(&c->sin, 0, sizeof c->sin);
    memset(&c->rin, 0, sizeof c->rin);
    memset(&c->rout, 0, sizeof c->rout);
    const int sn = conv_count(n, rt, st);
    const size_t sext = (size_t)st->extent, rext = (size_t)rt->extent;
    const int ins = (c->insig == INS_NULL) ? ARG_NULL : (c->insig == INS_FREED ? ARG_FREED : ARG_BUF);
    const int myid = g_lworld[me];
    const int inroot = g_color == c->rgroup, isroot = inroot && me == c->root;
    /* MPICH rejects a NULL buffer with count > 0 even from an MPI_PROC_NULL rank (MPICH 4.0
     * also the MPI_ROOT's NULL send buffer of Reduce): those pass freed device memory instead */
    const int insp = (inroot && ins == ARG_NULL && (!isroot || lib_is_mpich40())) ? ARG_FREED : ins;
    const int rootid = inroot ? g_lworld[c->root] : g_rworld[c->root];
    c->call_root = inroot ? (isroot ? MPI_ROOT : MPI_PROC_NULL) : c->root;
    c->scount = sn;
    c->rcount = n;
    c->sspan = (size_t)sn * sext;
    c->rspan = (size_t)n * rext;

    switch (c->coll) {
    case C_BCAST:
        c->sarg = ARG_NONE;
        if (isroot) {
            c->r_kind = c->sk;
            c->rdt = st->dt;
            c->rcount = sn;
            c->rspan = (size_t)sn * sext;
            seg_data(&c->rin, 0, st, sn, myid, 0, 0);
        } else if (inroot) {
            c->rarg = insp;
        } else {
            seg_data(&c->rout, 0, rt, n, rootid, 0, 0);
        }
        break;
    case C_REDUCE:
        if (isroot) {
            c->sarg = insp;
            seg_red(&c->rout, 0, rt, n, 0, Q, g_rworld, 0);
        } else if (inroot) {
            c->sarg = c->rarg = insp;
        } else {
            seg_data(&c->sin, 0, st, n, myid, 0, 0);
            c->rarg = ins;
        }
        break;
    case C_ALLREDUCE:
        seg_data(&c->sin, 0, st, n, myid, 0, 0);
        seg_red(&c->rout, 0, rt, n, 0, Q, g_rworld, 0);
        break;
    case C_GATHER:
        if (isroot) {
            c->sarg = insp;
            c->rspan = (size_t)Q * (size_t)n * rext;
            for (int j = 0; j < Q; j++) seg_data(&c->rout, (size_t)j * n * rext, rt, n, g_rworld[j], 0, 0);
        } else if (inroot) {
            c->sarg = c->rarg = insp;
        } else {
            seg_data(&c->sin, 0, st, sn, myid, 0, 0);
            c->rarg = ins;
        }
        break;
    case C_SCATTER:
        if (isroot) {
            c->sspan = (size_t)Q * (size_t)sn * sext;
            for (int j = 0; j < Q; j++) seg_data(&c->sin, (size_t)j * sn * sext, st, sn, myid, j, 0);
            c->rarg = insp;
        } else if (inroot) {
            c->sarg = c->rarg = insp;
        } else {
            c->sarg = ins;
            seg_data(&c->rout, 0, rt, n, rootid, me, 0);
        }
        break;
    case C_ALLGATHER:
        seg_data(&c->sin, 0, st, sn, myid, 0, 0);
        c->rspan = (size_t)Q * (size_t)n * rext;
        for (int j = 0; j < Q; j++) seg_data(&c->rout, (size_t)j * n * rext, rt, n, g_rworld[j], 0, 0);
        break;
    case C_ALLTOALL:
        c->sspan = (size_t)Q * (size_t)sn * sext;
        c->rspan = (size_t)Q * (size_t)n * rext;
        for (int j = 0; j < Q; j++) {
            seg_data(&c->sin, (size_t)j * sn * sext, st, sn, myid, j, 0);
            seg_data(&c->rout, (size_t)j * n * rext, rt, n, g_rworld[j], me, 0);
        }
        break;
    default:
        DIE("inter_plan: %s", coll_name_tab[c->coll]);
    }
    if (c->sarg != ARG_BUF) c->sspan = 0;
    if (c->rarg != ARG_BUF) c->rspan = 0;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size < 2 || t_size > 2 * MAXP) {
        if (t_rank == 0) note("an intercommunicator needs 2 or more ranks: nothing to test");
        return report_and_finalize();
    }
    coll_types_init();
    int first1 = (t_size + 1) / 2; /* group 0: [0, first1), group 1: [first1, size) */
    g_color = t_rank < first1 ? 0 : 1;
    MPI_Comm local, inter;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, g_color, t_rank, &local));
    MPI_CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, g_color == 0 ? first1 : 0, 77, &inter));
    int flag = 0;
    MPI_Comm_test_inter(inter, &flag);
    CHECK(flag, "MPI_Intercomm_create did not give an intercommunicator");
    MPI_Comm_size(inter, &g_lsize);
    MPI_Comm_remote_size(inter, &g_rsize);
    for (int i = 0; i < g_lsize; i++) g_lworld[i] = (g_color == 0 ? 0 : first1) + i;
    for (int i = 0; i < g_rsize; i++) g_rworld[i] = (g_color == 0 ? first1 : 0) + i;
    {   /* the ranks are as computed */
        MPI_Group lg, rg, wg;
        MPI_Comm_group(inter, &lg);
        MPI_Comm_remote_group(inter, &rg);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        int idx[MAXP], w[MAXP];
        for (int i = 0; i < MAXP; i++) idx[i] = i;
        MPI_Group_translate_ranks(lg, g_lsize, idx, wg, w);
        for (int i = 0; i < g_lsize; i++) CHECK(w[i] == g_lworld[i], "local rank %d is world %d", i, w[i]);
        MPI_Group_translate_ranks(rg, g_rsize, idx, wg, w);
        for (int i = 0; i < g_rsize; i++) CHECK(w[i] == g_rworld[i], "remote rank %d is world %d", i, w[i]);
        MPI_Group_free(&lg);
        MPI_Group_free(&rg);
        MPI_Group_free(&wg);
    }
    int gsize[2] = {first1, t_size - first1};

    static const int colls[] = {C_BCAST,  C_REDUCE,    C_GATHER, C_SCATTER,
                                C_ALLREDUCE, C_ALLGATHER, C_ALLTOALL};
    static const int counts[] = {1, 3001};
    struct ccase *cases = (struct ccase *)calloc(128, sizeof *cases);
    int nc = 0;
    for (int ci = 0; ci < 7; ci++)
        for (int k = 0; k < 2; k++)
            for (int g = 0; g < 2; g++) { /* root group for rooted ones; variant otherwise */
                int coll = colls[ci];
                struct ccase *c = &cases[nc];
                memset(c, 0, sizeof *c);
                c->coll = coll;
                c->n = counts[k];
                c->comm = inter;
                c->inter = 1;
                c->rgroup = g;
                c->root = (k + g) % 2 ? gsize[g] - 1 : 0;
                c->insig = (ci + k + g) % 3;
                if (coll_is_reduction(coll)) {
                    int u = (ci + k + g) % 3;
                    if (u == 0) c->st = c->rt = &TT_INT, c->opid = OP_SUM;
                    else if (u == 1) c->st = c->rt = &TT_DOUBLE, c->opid = OP_MAX;
                    else c->st = c->rt = &TT_AFFINE, c->opid = OP_AFFINE;
                } else {
                    int u = (ci + k + g) % 3;
                    c->st = u == 2 ? &TT_DOUBLE : &TT_INT;
                    c->rt = u == 0 ? &TT_VEC : c->st;
                    c->opid = OP_NONE;
                }
                c->seed = nc + 1;
                char suffix[64];
                snprintf(suffix, sizeof suffix, " (root: rank %d of group %d)", c->root, g);
                t_case_suffix = coll_has_root(coll) ? suffix : NULL;
                int keep = case_keep(c, M_BLOCK);
                t_case_suffix = NULL;
                if (!keep) continue;
                nc++;
            }

    run_all_placements(cases, nc, M_BLOCK, inter_plan, coll_start);
    /* the same cases, nonblocking (less what the MPI cannot do nonblocking) */
    int nnb = 0;
    for (int i = 0; i < nc; i++) {
        const char *why = coll_quirk(&cases[i], M_NB);
        if (why) {
            if (t_rank == 0) note("left out (nonblocking): %s: %s", cases[i].label, why);
            continue;
        }
        cases[nnb++] = cases[i];
    }
    run_batched_all_placements(cases, nnb, M_NB, 4, inter_plan, coll_start);

    free(cases);
    coll_types_free();
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    return report_and_finalize();
}
