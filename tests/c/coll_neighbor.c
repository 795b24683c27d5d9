// cudampi-test: ranks=1,2,3,4 without-shim=crash nccl=yes nccl-ranks=2 timeout=240 forced=no
/* Neighborhood collectives on device buffers, each compared byte for byte with the same
 * collective on host buffers in the same run and with the expected bytes:
 *   MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v,w), blocking and nonblocking
 *   (MPI_Ineighbor_*, four at a time, completed by changing Wait / Test / Waitany / ... methods),
 *   and, where the library has them, persistent (MPI_Neighbor_*_init, three rounds with new
 *   data) and large-count (MPI_Neighbor_*_c) forms;
 * on four topologies: a periodic 1-D Cartesian ring (with 1 or 2 ranks the left and right
 * neighbours are the same process, or the process itself), a NON-periodic 1-D Cartesian line
 * (MPI_PROC_NULL neighbours at the ends: their receive blocks must stay untouched), a periodic
 * 2-D Cartesian grid from MPI_Dims_create, and a distributed graph from
 * MPI_Dist_graph_create_adjacent with self edges, ranks of different degree and neighbour lists
 * in no sorted order;
 * counts 1 and 1501; MPI_INT / MPI_DOUBLE and derived types (strided vector received against
 * MPI_INT sent, resized); v/w forms with uneven counts (some zero) and displacements that put
 * the blocks in reverse order with gaps (gap bytes keep their values); Alltoallw with a
 * different datatype per neighbour and MPI_Aint byte displacements.
 * Received bytes start poisoned, SLACK bytes after the span stay poison, send buffers come back
 * unchanged. Placements: device/device, host send + device receive, device send + host receive
 * vs host/host. */
#include "common.h"
#include "coll_util.c"

#define NTOPO 4
static const char *topo_name[NTOPO] = {"periodic ring", "non-periodic line", "periodic 2-D grid",
                                       "dist graph"};
struct topo {
    MPI_Comm comm;
    int dup; /* a process is in-neighbour more than once (periodic dimension of size 1 or 2) */
    int uneven; /* some rank's in-degree differs from its out-degree (same on all ranks) */
    int nin, nout;
    int in_id[MAXP], in_blk[MAXP]; /* source rank (or MPI_PROC_NULL) and its send-block index */
    int out_id[MAXP];
};
static struct topo topos[NTOPO];

static int graph_edge(int i, int j) { return (3 * i + j) % 4 != 1; }

static struct topo *topo_of(MPI_Comm c)
{
    for (int t = 0; t < NTOPO; t++)
        if (topos[t].comm == c) return &topos[t];
    DIE("no topology for this communicator");
    return NULL;
}

/* neighbour block counts (in units): from sender `src`'s send block b */
static int ncnt(int src, int b, int n)
{
    return ((src + 2 * b) % 4 == 3) ? 0 : n + ((src + b) % 3) * (n / 2 + 1);
}


static void neighbor_plan(struct ccase *c)
{
    struct topo *tp = topo_of(c->comm);
    MPI_Comm_rank(c->comm, &c->me);
    MPI_Comm_size(c->comm, &c->P);
    const int me = c->me, n = c->n, nin = tp->nin, nout = tp->nout;
    const struct ttype *st = c->st, *rt = c->rt;
    c->vt = VT_BYTES;
    c->sdt = st->dt;
    c->rdt = rt->dt;
    c->sarg = c->rarg = ARG_BUF;
    c->s_kind = c->sk;
    c->r_kind = c->rk;
    c->s_arrays_null = c->r_arrays_null = 0;
    memset(&c->sin, 0, sizeof c->sin);
    memset(&c->rin, 0, sizeof c->rin);
    memset(&c->rout, 0, sizeof c->rout);
    const size_t sext = (size_t)st->extent, rext = (size_t)rt->extent;
    int cnt[MAXP];
    c->scount = conv_count(n, rt, st);
    c->rcount = n;

    switch (c->coll) {
    case C_NEIGHBOR_ALLGATHER:
    case C_NEIGHBOR_ALLGATHERV: {
        int v = c->coll == C_NEIGHBOR_ALLGATHERV;
        if (v) c->scount = conv_count(ncnt(me, 0, n), rt, st);
        c->sspan = (size_t)c->scount * sext;
        seg_data(&c->sin, 0, st, c->scount, me, 0, 0);
        for (int k = 0; k < nin; k++)
            cnt[k] = (v && tp->in_id[k] != MPI_PROC_NULL) ? ncnt(tp->in_id[k], 0, n) : n;
        int span = v ? gapped_displs(nin, cnt, c->rd) : packed_displs(nin, cnt, c->rd);
        memcpy(c->rc, cnt, sizeof(int) * (size_t)nin);
        c->rspan = (size_t)span * rext;
        for (int k = 0; k < nin; k++)
            if (tp->in_id[k] != MPI_PROC_NULL)
                seg_data(&c->rout, (size_t)c->rd[k] * rext, rt, cnt[k], tp->in_id[k], 0, 0);
        break;
    }
    case C_NEIGHBOR_ALLTOALL:
    case C_NEIGHBOR_ALLTOALLV: {
        int v = c->coll == C_NEIGHBOR_ALLTOALLV;
        int scnt[MAXP];
        for (int b = 0; b < nout; b++) scnt[b] = conv_count(v ? ncnt(me, b, n) : n, rt, st);
        for (int k = 0; k < nin; k++)
            cnt[k] = (v && tp->in_id[k] != MPI_PROC_NULL) ? ncnt(tp->in_id[k], tp->in_blk[k], n) : n;
        int ss = v ? gapped_displs(nout, scnt, c->sd) : packed_displs(nout, scnt, c->sd);
        int rs = v ? gapped_displs(nin, cnt, c->rd) : packed_displs(nin, cnt, c->rd);
        memcpy(c->sc, scnt, sizeof(int) * (size_t)nout);
        memcpy(c->rc, cnt, sizeof(int) * (size_t)nin);
        c->sspan = (size_t)ss * sext;
        c->rspan = (size_t)rs * rext;
        for (int b = 0; b < nout; b++) seg_data(&c->sin, (size_t)c->sd[b] * sext, st, scnt[b], me, b, 0);
        for (int k = 0; k < nin; k++)
            if (tp->in_id[k] != MPI_PROC_NULL)
                seg_data(&c->rout, (size_t)c->rd[k] * rext, rt, cnt[k], tp->in_id[k], tp->in_blk[k], 0);
        break;
    }
    case C_NEIGHBOR_ALLTOALLW: {
        size_t spos = 0, rpos = 0;
        for (int b = nout - 1; b >= 0; b--) {
            const struct ttype *ts = w_type(me, b, 0);
            c->sty[b] = ts->dt;
            c->sc[b] = (int)((size_t)ncnt(me, b, n) * 24 / ts->size);
            spos += 3 + 4 * (size_t)(b % 3);
            c->sda[b] = (MPI_Aint)spos;
            seg_data(&c->sin, spos, ts, c->sc[b], me, b, 0);
            spos += (size_t)c->sc[b] * (size_t)ts->extent;
        }
        for (int k = nin - 1; k >= 0; k--) {
            const struct ttype *tr = w_type(me, k, 1);
            int units = tp->in_id[k] != MPI_PROC_NULL ? ncnt(tp->in_id[k], tp->in_blk[k], n) : n;
            c->rty[k] = tr->dt;
            c->rc[k] = (int)((size_t)units * 24 / tr->size);
            rpos += 5 + 4 * (size_t)(k % 2);
            c->rda[k] = (MPI_Aint)rpos;
            if (tp->in_id[k] != MPI_PROC_NULL)
                seg_data(&c->rout, rpos, tr, c->rc[k], tp->in_id[k], tp->in_blk[k], 0);
            rpos += (size_t)c->rc[k] * (size_t)tr->extent;
        }
        c->sspan = spos + 7;
        c->rspan = rpos + 3;
        break;
    }
    default:
        DIE("neighbor_plan: %s", coll_name_tab[c->coll]);
    }
}

#if defined(HAVE_COLL_INIT) && (MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5))
#define HAVE_NEIGHBOR_INIT 1
#endif

static int neighbor_start(struct ccase *c, int mode)
{
    const void *s = case_sarg(c);
    void *r = case_rarg(c);
    MPI_Comm cm = c->comm;
    MPI_Request *q = &c->req;
    MPI_Datatype sdt = c->sdt, rdt = c->rdt;
    const int *sc = c->sc, *sd = c->sd, *rc = c->rc, *rd = c->rd;
    const MPI_Datatype *sty = c->sty, *rty = c->rty;
    const int sn = c->scount, rn = c->rcount;
    struct topo *tp = topo_of(cm);
    const MPI_Aint *wsd = c->sda, *wrd = c->rda; /* Alltoallw: bytes */
#ifdef HAVE_NEIGHBOR_INIT
    MPI_Info inf = MPI_INFO_NULL;
#endif
#ifdef HAVE_COLL_C
    /* kept in the case: a nonblocking call may read them until completion */
    MPI_Count *scc = c->scc, *rcc = c->rcc;
    MPI_Aint *sdc = c->sda, *rdc = c->rda; /* (Alltoallw: already the byte displacements) */
    int w = c->coll == C_NEIGHBOR_ALLTOALLW;
    for (int i = 0; i < tp->nout; i++) scc[i] = sc[i], sdc[i] = w ? sdc[i] : sd[i];
    for (int i = 0; i < tp->nin; i++) rcc[i] = rc[i], rdc[i] = w ? rdc[i] : rd[i];
#endif
    (void)tp;
    switch (mode) {
    case M_BLOCK:
        switch (c->coll) {
        case C_NEIGHBOR_ALLGATHER: return MPI_Neighbor_allgather(s, sn, sdt, r, rn, rdt, cm);
        case C_NEIGHBOR_ALLGATHERV: return MPI_Neighbor_allgatherv(s, sn, sdt, r, rc, rd, rdt, cm);
        case C_NEIGHBOR_ALLTOALL: return MPI_Neighbor_alltoall(s, sn, sdt, r, rn, rdt, cm);
        case C_NEIGHBOR_ALLTOALLV: return MPI_Neighbor_alltoallv(s, sc, sd, sdt, r, rc, rd, rdt, cm);
        case C_NEIGHBOR_ALLTOALLW: return MPI_Neighbor_alltoallw(s, sc, wsd, sty, r, rc, wrd, rty, cm);
        }
        break;
    case M_NB:
        switch (c->coll) {
        case C_NEIGHBOR_ALLGATHER: return MPI_Ineighbor_allgather(s, sn, sdt, r, rn, rdt, cm, q);
        case C_NEIGHBOR_ALLGATHERV: return MPI_Ineighbor_allgatherv(s, sn, sdt, r, rc, rd, rdt, cm, q);
        case C_NEIGHBOR_ALLTOALL: return MPI_Ineighbor_alltoall(s, sn, sdt, r, rn, rdt, cm, q);
        case C_NEIGHBOR_ALLTOALLV: return MPI_Ineighbor_alltoallv(s, sc, sd, sdt, r, rc, rd, rdt, cm, q);
        case C_NEIGHBOR_ALLTOALLW: return MPI_Ineighbor_alltoallw(s, sc, wsd, sty, r, rc, wrd, rty, cm, q);
        }
        break;
#ifdef HAVE_NEIGHBOR_INIT
    case M_INIT:
        switch (c->coll) {
        case C_NEIGHBOR_ALLGATHER: return MPI_Neighbor_allgather_init(s, sn, sdt, r, rn, rdt, cm, inf, q);
        case C_NEIGHBOR_ALLGATHERV: return MPI_Neighbor_allgatherv_init(s, sn, sdt, r, rc, rd, rdt, cm, inf, q);
        case C_NEIGHBOR_ALLTOALL: return MPI_Neighbor_alltoall_init(s, sn, sdt, r, rn, rdt, cm, inf, q);
        case C_NEIGHBOR_ALLTOALLV: return MPI_Neighbor_alltoallv_init(s, sc, sd, sdt, r, rc, rd, rdt, cm, inf, q);
        case C_NEIGHBOR_ALLTOALLW: return MPI_Neighbor_alltoallw_init(s, sc, wsd, sty, r, rc, wrd, rty, cm, inf, q);
        }
        break;
#endif
#ifdef HAVE_COLL_C
    case M_BLOCK_C:
        switch (c->coll) {
        case C_NEIGHBOR_ALLGATHER: return MPI_Neighbor_allgather_c(s, sn, sdt, r, rn, rdt, cm);
        case C_NEIGHBOR_ALLGATHERV: return MPI_Neighbor_allgatherv_c(s, sn, sdt, r, rcc, rdc, rdt, cm);
        case C_NEIGHBOR_ALLTOALL: return MPI_Neighbor_alltoall_c(s, sn, sdt, r, rn, rdt, cm);
        case C_NEIGHBOR_ALLTOALLV: return MPI_Neighbor_alltoallv_c(s, scc, sdc, sdt, r, rcc, rdc, rdt, cm);
        case C_NEIGHBOR_ALLTOALLW: return MPI_Neighbor_alltoallw_c(s, scc, wsd, sty, r, rcc, wrd, rty, cm);
        }
        break;
    case M_NB_C:
        switch (c->coll) {
        case C_NEIGHBOR_ALLGATHER: return MPI_Ineighbor_allgather_c(s, sn, sdt, r, rn, rdt, cm, q);
        case C_NEIGHBOR_ALLGATHERV: return MPI_Ineighbor_allgatherv_c(s, sn, sdt, r, rcc, rdc, rdt, cm, q);
        case C_NEIGHBOR_ALLTOALL: return MPI_Ineighbor_alltoall_c(s, sn, sdt, r, rn, rdt, cm, q);
        case C_NEIGHBOR_ALLTOALLV: return MPI_Ineighbor_alltoallv_c(s, scc, sdc, sdt, r, rcc, rdc, rdt, cm, q);
        case C_NEIGHBOR_ALLTOALLW: return MPI_Ineighbor_alltoallw_c(s, scc, wsd, sty, r, rcc, wrd, rty, cm, q);
        }
        break;
#endif
    }
    DIE("neighbor_start: %s has no form %d here", coll_name_tab[c->coll], mode);
    return MPI_ERR_OTHER;
}

static void make_cart(struct topo *tp, int ndims, int periodic)
{
    int dims[2] = {0, 0}, periods[2] = {periodic, periodic};
    MPI_CHECK(MPI_Dims_create(t_size, ndims, dims));
    MPI_CHECK(MPI_Cart_create(MPI_COMM_WORLD, ndims, dims, periods, 0, &tp->comm));
    tp->nin = tp->nout = 2 * ndims;
    for (int d = 0; d < ndims; d++) {
        int src = MPI_PROC_NULL, dst = MPI_PROC_NULL;
        MPI_CHECK(MPI_Cart_shift(tp->comm, d, 1, &src, &dst));
        /* block 2d: the negative neighbour, 2d+1: the positive one; what arrives in block 2d
         * is what the negative neighbour sent to ITS positive neighbour (its block 2d+1) */
        tp->in_id[2 * d] = src, tp->in_blk[2 * d] = 2 * d + 1;
        tp->in_id[2 * d + 1] = dst, tp->in_blk[2 * d + 1] = 2 * d;
        tp->out_id[2 * d] = src;
        tp->out_id[2 * d + 1] = dst;
    }
    tp->dup = 0;
    for (int a = 0; a < tp->nin; a++)
        for (int b = a + 1; b < tp->nin; b++)
            if (tp->in_id[a] != MPI_PROC_NULL && tp->in_id[a] == tp->in_id[b]) tp->dup = 1;
}

static void make_graph(struct topo *tp)
{
    const int P = t_size, me = t_rank;
    int srcs[MAXP], dsts[MAXP];
    tp->nin = tp->nout = 0;
    for (int j = P - 1; j >= 0; j--) /* destinations in descending order */
        if (graph_edge(me, j)) dsts[tp->nout++] = j;
    for (int t = 0; t < P; t++) { /* sources rotated: me+1, me+2, ... */
        int i = (me + 1 + t) % P;
        if (graph_edge(i, me)) srcs[tp->nin++] = i;
    }
    /* (through a volatile: gcc warns about reading the MPI_UNWEIGHTED sentinel as an array) */
    int *volatile unweighted_v = MPI_UNWEIGHTED;
    int *unw = unweighted_v;
    MPI_CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, tp->nin, srcs, unw, tp->nout, dsts,
                                             unw, MPI_INFO_NULL, 0, &tp->comm));
    for (int b = 0; b < tp->nout; b++) tp->out_id[b] = dsts[b];
    int uneven = tp->nin != tp->nout;
    MPI_CHECK(MPI_Allreduce(&uneven, &tp->uneven, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    for (int k = 0; k < tp->nin; k++) {
        int i = srcs[k], pos = 0;
        tp->in_id[k] = i;
        /* position of me in i's destination list (descending order) */
        for (int j = P - 1; j > me; j--)
            if (graph_edge(i, j)) pos++;
        tp->in_blk[k] = pos;
    }
    /* the library reports the neighbours in the order given */
    int indeg = -1, outdeg = -1, w = -1, gs[MAXP], gd[MAXP], gsw[MAXP], gdw[MAXP];
    MPI_CHECK(MPI_Dist_graph_neighbors_count(tp->comm, &indeg, &outdeg, &w));
    CHECK(indeg == tp->nin && outdeg == tp->nout, "dist graph degrees %d/%d, gave %d/%d", indeg,
          outdeg, tp->nin, tp->nout);
    MPI_CHECK(MPI_Dist_graph_neighbors(tp->comm, MAXP, gs, gsw, MAXP, gd, gdw));
    for (int k = 0; k < tp->nin && k < indeg; k++) CHECK(gs[k] == srcs[k], "source %d is %d", k, gs[k]);
    for (int b = 0; b < tp->nout && b < outdeg; b++) CHECK(gd[b] == dsts[b], "destination %d is %d", b, gd[b]);
}

/* The cases for one form (mode). Neighbor_alltoall(v,w) on a topology where one process is an
 * in-neighbour twice (periodic dimension of size 1 or 2): the standard pairs the blocks by
 * direction (block 2d receives what the negative neighbour sent in its block 2d+1); MPICH 4.0
 * pairs them otherwise, so there the receive buffer is compared with the host run only; Open
 * MPI's nonblocking / persistent forms (libnbc) then fail with MPI_ERR_TRUNCATE, so those cases
 * are left out there. MPICH 4.0's Neighbor_alltoallw on a graph whose in- and out-degrees
 * differ leaves blocks unwritten (host buffers): left out there. */
static int build_cases(struct ccase *cases, int mode)
{
    static const int colls[] = {C_NEIGHBOR_ALLGATHER, C_NEIGHBOR_ALLGATHERV, C_NEIGHBOR_ALLTOALL,
                                C_NEIGHBOR_ALLTOALLV, C_NEIGHBOR_ALLTOALLW};
    const struct ttype *pairs[][2] = {{&TT_INT, &TT_INT}, {&TT_INT, &TT_VEC},
                                      {&TT_DOUBLE, &TT_DOUBLE}, {&TT_RESIZED, &TT_VEC},
                                      {&TT_INT, &TT_RESIZED}};
    static const int counts[] = {1, 1501};
    int nc = 0;
    for (int t = 0; t < NTOPO; t++)
        for (int ci = 0; ci < 5; ci++)
            for (int k = 0; k < 2; k++) {
                struct ccase *c = &cases[nc];
                memset(c, 0, sizeof *c);
                c->coll = colls[ci];
                c->n = counts[k];
                c->comm = topos[t].comm;
                int pi = (t + ci + 2 * k) % 5;
                c->st = pairs[pi][0];
                c->rt = pairs[pi][1];
                if (c->coll == C_NEIGHBOR_ALLTOALLW) c->st = c->rt = &TT_VEC; /* per block */
                c->opid = OP_NONE;
                c->seed = nc + 1;
                char suffix[64];
                snprintf(suffix, sizeof suffix, " on the %s", topo_name[t]);
                t_case_suffix = suffix;
                int keep = case_keep(c, mode);
                t_case_suffix = NULL;
                if (!keep) continue;
                if (c->coll == C_NEIGHBOR_ALLTOALLW && topos[t].uneven && lib_is_mpich40()) {
                    if (t_rank == 0 && k == 0)
                        note("left out: %s: MPICH 4.0's Neighbor_alltoallw leaves blocks unwritten "
                             "when in- and out-degree differ", c->label);
                    continue;
                }
                int pairing = topos[t].dup && c->coll >= C_NEIGHBOR_ALLTOALL;
                if (pairing && lib_is_ompi() && mode != M_BLOCK && mode != M_BLOCK_C) {
                    if (t_rank == 0 && k == 0)
                        note("left out: %s: Open MPI's nonblocking/persistent form fails with "
                             "MPI_ERR_TRUNCATE when a neighbour appears twice", c->label);
                    continue;
                }
                if (pairing && lib_is_mpich40()) {
                    c->host_only = 1;
                    if (t_rank == 0 && k == 0)
                        note("%s: compared with the host run only (MPICH 4.0 pairs the blocks "
                             "of a neighbour that appears twice otherwise than the standard)",
                             c->label);
                }
                nc++;
            }
    return nc;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size > MAXP / 2) DIE("at most %d ranks", MAXP / 2);
    coll_types_init();
    make_cart(&topos[0], 1, 1);
    make_cart(&topos[1], 1, 0);
    make_cart(&topos[2], 2, 1);
    make_graph(&topos[3]);

    struct ccase *cases = (struct ccase *)calloc(64, sizeof *cases);
    int nc = build_cases(cases, M_BLOCK);
    run_all_placements(cases, nc, M_BLOCK, neighbor_plan, neighbor_start);
    nc = build_cases(cases, M_NB);
    run_batched_all_placements(cases, nc, M_NB, 4, neighbor_plan, neighbor_start);
#ifdef HAVE_NEIGHBOR_INIT
    if (have_sym("MPI_Neighbor_alltoallv_init")) {
        nc = build_cases(cases, M_INIT);
        run_persistent_all_placements(cases, nc, M_INIT, lib_is_mpich40() ? 1 : 4, 3,
                                      neighbor_plan, neighbor_start);
    } else if (t_rank == 0) {
        note("the library has no MPI_Neighbor_alltoallv_init: persistent forms not tested");
    }
#endif
#ifdef HAVE_COLL_C
    if (have_sym("MPI_Neighbor_alltoallv_c")) {
        nc = build_cases(cases, M_BLOCK_C);
        run_all_placements(cases, nc, M_BLOCK_C, neighbor_plan, neighbor_start);
        nc = build_cases(cases, M_NB_C);
        run_batched_all_placements(cases, nc, M_NB_C, 4, neighbor_plan, neighbor_start);
    } else if (t_rank == 0) {
        note("the library has no MPI_Neighbor_alltoallv_c: large-count forms not tested");
    }
#endif

    free(cases);
    for (int t = 0; t < NTOPO; t++) MPI_Comm_free(&topos[t].comm);
    coll_types_free();
    return report_and_finalize();
}
