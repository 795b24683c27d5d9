// cudampi-test: ranks=1,2,3,4 without-shim=crash nccl=yes timeout=180
/* coll_nccl.c -- device collectives that cudampi may run on NCCL, and the ones it must not.
 *
 * Every call is checked byte for byte against the expected bytes and against the same call on
 * host buffers in the same run (coll_util.c: poisoned receive buffers, SLACK poisoned bytes
 * after them that must stay poison, send buffers that must come back unchanged), in every
 * mode. The counter cudampi_stats.nccl_calls (and nccl_bytes) is read around every call:
 *   mode nccl (CMTEST_MODE=nccl: the harness points CUDAMPI_NCCL_LIB at the stand-in NCCL and
 *   sets CUDAMPI_NCCL_BYTES=0 and FAKECUDA_DEVICES=4): a call of NCCL_TABLE that is eligible
 *   raises nccl_calls by exactly one on every rank and nccl_bytes by the bytes of the largest
 *   buffer this rank passes (rank_bytes); every other call of NCCL_TABLE leaves both
 *   unchanged;
 *   calls outside the table (NEXT) are checked for correctness only;
 *   other modes: both stay 0 (unless a real NCCL is reachable: GPU machines; then not checked).
 * Eligible (the contract of cudampi's NCCL path): NCCL loaded on every rank; an
 * intracommunicator whose ranks use different GPUs (each rank selects device rank % count, so
 * FAKECUDA_DEVICES >= ranks); on EVERY rank every buffer significant there is device memory
 * (MPI_IN_PLACE counts as the receive buffer; Reduce's recvbuf matters only at the root, Bcast
 * has one buffer); a predefined datatype or a contiguous derived type of one; for reductions
 * MPI_SUM/PROD/MIN/MAX on a type NCCL reduces (int8, uint8, int32, uint32, long, long long,
 * int64, unsigned long, uint64, float, double under their MPI names); in place included (an
 * in-place Alltoall(v) sends from a copy the communicator takes first).
 *
 * Sections:
 *  1. sweep on a dup of MPI_COMM_WORLD: every blocking call of NCCL_TABLE for every (op, type)
 *     NCCL carries (15 MPI type names x SUM/PROD/MIN/MAX), half of them in place, so that every
 *     type and every op meets in place and not, roots 0 and size-1 and Reduce's non-root
 *     recvbuf as a device buffer, NULL and freed device memory; data movement over every such
 *     type and MPI_BYTE/CHAR/SHORT/UNSIGNED_SHORT/WCHAR/C_BOOL/LONG_DOUBLE/2INT and a contiguous
 *     derived type; counts 1, 37 and 1001; the _c forms (MPI-4 libraries) over every type with
 *     the ops rotating; one case of about 1 MiB per call (2 MiB for Allgather's receive buffer;
 *     device buffers against the expected bytes only: MPICH takes seconds for a host 1 MiB
 *     reduction with 4 ranks on 2 cores); the v forms, Gather(v), Scatter(v) and
 *     Reduce_scatter over every type (data movement: every third), their _c forms on a few;
 *     the NEXT calls (nonblocking and persistent forms) on a few types, correctness only.
 *     Host runs go to a dup of the communicator (see twin());
 *  2. fallbacks, correct and not on NCCL: user-defined ops (commutative sum on MPI_INT,
 *     non-commutative affine on a contiguous type, struct max), MINLOC/MAXLOC on MPI_2INT,
 *     bitwise and logical ops, MPI_SHORT/UNSIGNED_SHORT/INT16_T/UINT16_T, non-contiguous
 *     derived types (vector, resized); MPI_UNSIGNED_LONG_LONG: correctness only (not in the
 *     contract's list); data movement of the predefined types with holes MPI_DOUBLE_INT and
 *     MPI_SHORT_INT with COLL_NCCL_HOLES=1 (correctness only; left out by default: cudampi's
 *     staged path writes their holes in device receive buffers);
 *  3. mixed placements: rank 0 host and the rest device, the reverse, host send + device
 *     receive, device send + host receive, and device buffers with host receive buffers on the
 *     non-roots; which of them stay eligible (one rank; MPI_IN_PLACE; Reduce's non-roots) is
 *     worked out per case from every rank's placement (rank_device);
 *  4. MPI_Comm_split into halves (ranks in reverse order) and into single ranks;
 *  5. 20 rounds of communicator made (dup or split, members and order varying) / collectives /
 *     freed, to catch leaks and a cache that outlives a freed communicator whose handle MPI
 *     reuses;
 *  6. two communicators whose MPI_Iallreduce the ranks start in opposite orders, completed by
 *     one MPI_Waitall (37 elements and 1 MiB);
 *  7. a blocking device collective between an MPI_Isend of 4 MiB of device memory and its
 *     MPI_Wait (the receiver runs the collective first, then MPI_Recv);
 *  8. an intercommunicator (Allreduce, Bcast): staged;
 *  9. every rank on device 0 (a new communicator): staged; back on its own device: NCCL again.
 * An MPI whose MAX/MIN compares an unsigned type as signed (host buffers, plain MPI: Open MPI
 * 4.1.4 MPI_UNSIGNED_LONG; MPICH 4.0.2 every unsigned type) gets values below half the range
 * for that type (noted): NCCL compares them right, and the two could not agree. Rank 0 ends with a
 * summary of the counter mismatches by call. COLL_ONLY=text runs only the cases whose label
 * contains text (not sections 8 and 7's message); COLL_DEBUG=1 notes every call. */
#include "common.h"
#include "coll_util.c"
#include "ipc_stats.h"

/* ==== THE TABLE ==============================================================================
 * The calls cudampi runs on NCCL when the call is eligible: {collective, form, sweep}. A call in
 * this table has its counter checked; sweep FULL: every (type, op) NCCL carries, ROT: every
 * type (data movement: every third) with the ops rotating, FEW: a few types (the _c forms
 * decide as the blocking ones do; MPICH with 4 ranks on 2 cores takes about 10 ms a call, and
 * the sweep is what that budget allows). To move a call to NCCL, move its
 * line from NEXT to NCCL_TABLE (and give rank_bytes its rule, if it has one).
 * The first version: Allreduce, Reduce, Bcast, Allgather, Reduce_scatter_block, Alltoall;
 * docs/design.md adds the blocking v forms, Gather(v), Scatter(v) and Reduce_scatter. */
enum { FULL, ROT, FEW };
struct callform {
    int coll, form, sweep;
};
static const struct callform NCCL_TABLE[] = {
    {C_ALLREDUCE, M_BLOCK, FULL},   {C_REDUCE, M_BLOCK, FULL},   {C_BCAST, M_BLOCK, FULL},
    {C_ALLGATHER, M_BLOCK, FULL},   {C_ALLTOALL, M_BLOCK, FULL}, {C_REDUCE_SCATTER_BLOCK, M_BLOCK, FULL},
    {C_ALLREDUCE, M_BLOCK_C, ROT},  {C_REDUCE, M_BLOCK_C, ROT},  {C_BCAST, M_BLOCK_C, ROT},
    {C_ALLGATHER, M_BLOCK_C, ROT},  {C_ALLTOALL, M_BLOCK_C, ROT}, {C_REDUCE_SCATTER_BLOCK, M_BLOCK_C, ROT},
    /* next: the v forms, Gather/Scatter, Reduce_scatter */
    {C_ALLGATHERV, M_BLOCK, ROT},   {C_ALLTOALLV, M_BLOCK, ROT}, {C_GATHER, M_BLOCK, ROT},
    {C_GATHERV, M_BLOCK, ROT},      {C_SCATTER, M_BLOCK, ROT},   {C_SCATTERV, M_BLOCK, ROT},
    {C_REDUCE_SCATTER, M_BLOCK, ROT},
    {C_ALLGATHERV, M_BLOCK_C, FEW}, {C_ALLTOALLV, M_BLOCK_C, FEW}, {C_GATHER, M_BLOCK_C, FEW},
    {C_GATHERV, M_BLOCK_C, FEW},    {C_SCATTER, M_BLOCK_C, FEW},  {C_SCATTERV, M_BLOCK_C, FEW},
    {C_REDUCE_SCATTER, M_BLOCK_C, FEW},
};
/* Calls run for correctness only (a few types each), the candidates for the table. */
static const struct callform NEXT[] = {
    {C_ALLREDUCE, M_NB, ROT}, {C_REDUCE, M_NB, ROT}, {C_BCAST, M_NB, ROT}, {C_ALLGATHER, M_NB, ROT},
    {C_ALLTOALL, M_NB, ROT}, {C_REDUCE_SCATTER_BLOCK, M_NB, ROT},
    {C_ALLREDUCE, M_INIT, ROT}, {C_REDUCE, M_INIT, ROT}, {C_BCAST, M_INIT, ROT}, {C_ALLGATHER, M_INIT, ROT},
    {C_ALLTOALL, M_INIT, ROT}, {C_REDUCE_SCATTER_BLOCK, M_INIT, ROT},
    {C_ALLREDUCE, M_NB_C, ROT}, {C_BCAST, M_INIT_C, ROT},
};
#define NTABLE ((int)(sizeof NCCL_TABLE / sizeof NCCL_TABLE[0]))
#define NNEXT ((int)(sizeof NEXT / sizeof NEXT[0]))

/* nccl_bytes of one call on this rank: the bytes of the largest buffer this rank passes, the
 * measure CUDAMPI_NCCL_BYTES compares with (src/engine/jobs.rs, Shape::bytes; include/cudampi.h
 * calls it "the bytes this rank contributed", which for Allgather would be n x size, not
 * P x n x size). UNKNOWN_BYTES: no rule here (only the count of calls is checked): the calls
 * whose sizes differ by rank. */
#define UNKNOWN_BYTES UINT64_MAX
static uint64_t rank_bytes(const struct ccase *c)
{
    uint64_t es = type_size(c->rt->dt), n = (uint64_t)c->n, P = (uint64_t)c->P, sum = 0;
    for (int i = 0; i < c->P; i++) sum += (uint64_t)c->rc[i];
    switch (c->coll) {
    case C_ALLREDUCE:
    case C_REDUCE: return n * es;
    case C_BCAST: return (uint64_t)c->rcount * type_size(c->rdt);
    case C_ALLGATHER:
    case C_ALLTOALL:
    case C_REDUCE_SCATTER_BLOCK:
    case C_GATHER:
    case C_SCATTER: return P * n * es;
    case C_ALLGATHERV:
    case C_REDUCE_SCATTER: return sum * es;
    }
    return UNKNOWN_BYTES;
}
/* ============================================================================================ */

static const char *form_name[] = {"", " (nonblocking)", " (persistent)", " (_c)",
                                  " (nonblocking _c)", " (persistent _c)"};

static int form_available(int form)
{
    switch (form) {
    case M_BLOCK:
    case M_NB: return 1;
#ifdef HAVE_COLL_INIT
    case M_INIT: return 1;
#endif
#ifdef HAVE_COLL_C
    case M_BLOCK_C:
    case M_NB_C:
    case M_INIT_C: return 1;
#endif
    }
    return 0;
}
static int form_persistent(int form) { return form == M_INIT || form == M_INIT_C; }
static int form_nonblocking(int form) { return form == M_NB || form == M_NB_C; }

static int in_table(int coll, int form)
{
    for (int i = 0; i < NTABLE; i++)
        if (NCCL_TABLE[i].coll == coll && NCCL_TABLE[i].form == form) return 1;
    return 0;
}

static int is_red_coll(int coll) { return coll_is_reduction(coll); }

/* ---- the counters ------------------------------------------------------------------------- */

typedef int (*stats_sized_fn)(struct cudampi_stats *, size_t);
static stats_sized_fn g_stats;
static int g_nccl_mode;      /* CMTEST_MODE=nccl: the counters are checked exactly */
static int g_nccl_off;       /* no NCCL can be in use: the counters must stay 0 */
static int g_distinct;       /* the ranks of MPI_COMM_WORLD use different devices */
static uint64_t g_expected_calls, g_seen_calls;

static void nccl_counters(uint64_t *calls, uint64_t *bytes)
{
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    if (g_stats) g_stats(&s, sizeof s);
    *calls = s.nccl_calls;
    *bytes = s.nccl_bytes;
}

enum { X_NCCL, X_STAGED, X_ANY }; /* on NCCL, on the staged path, not checked */
static const char *x_name[] = {"on NCCL", "staged (not NCCL)", "either"};

/* counter mismatches by call and form: [coll][form][0: expected NCCL, did not; 1: expected
 * staged, went to NCCL; 2: bytes differ], and the first label of each (printed at the end) */
static int g_miss[C_NCOLL][6][3];
static char g_miss_label[C_NCOLL][6][3][160];
static int g_cur_coll = -1, g_cur_form = -1; /* of the call being checked (-1: not a table case) */

static void tally(int kind, const char *label)
{
    if (g_cur_coll < 0 || g_cur_form < 0) return;
    if (!g_miss[g_cur_coll][g_cur_form][kind]++)
        snprintf(g_miss_label[g_cur_coll][g_cur_form][kind], 160, "%s", label);
}

static void print_tally(void)
{
    static const char *kn[3] = {"expected on NCCL, was not", "expected staged, went to NCCL",
                                "nccl_bytes not this rank's largest buffer"};
    for (int co = 0; co < C_NCOLL; co++)
        for (int f = 0; f < 6; f++)
            for (int k = 0; k < 3; k++)
                if (g_miss[co][f][k])
                    note("counter summary: MPI_%s%s: %d calls %s (first: %s)", coll_name_tab[co],
                         form_name[f], g_miss[co][f][k], kn[k], g_miss_label[co][f][k]);
}

/* Check the counter deltas of `rounds` calls with expectation x (bytes: per call). */
static void check_delta(int x, const char *what, const char *label, int rounds, uint64_t dc,
                        uint64_t db, uint64_t bytes)
{
    if (x != X_ANY) g_seen_calls += dc;
    if (g_nccl_mode) {
        if (x == X_NCCL && dc != (uint64_t)rounds) tally(0, label);
        else if (x == X_NCCL && bytes != UNKNOWN_BYTES && db != (uint64_t)rounds * bytes) tally(2, label);
        if (x == X_STAGED && dc != 0) tally(1, label);
        if (x == X_NCCL) {
            g_expected_calls += (uint64_t)rounds;
            CHECK(dc == (uint64_t)rounds, "%s: %s: nccl_calls rose by %llu, expected %d (eligible)",
                  what, label, (unsigned long long)dc, rounds);
            if (bytes != UNKNOWN_BYTES)
                CHECK(db == (uint64_t)rounds * bytes,
                      "%s: %s: nccl_bytes rose by %llu, expected %llu (this rank's largest buffer)",
                      what, label, (unsigned long long)db, (unsigned long long)rounds * bytes);
        } else if (x == X_STAGED) {
            CHECK(dc == 0 && db == 0,
                  "%s: %s: nccl_calls rose by %llu (nccl_bytes %llu), expected 0 (not eligible)",
                  what, label, (unsigned long long)dc, (unsigned long long)db);
        }
    } else if (g_nccl_off) {
        CHECK(dc == 0 && db == 0, "%s: %s: nccl_calls rose by %llu outside mode nccl", what,
              label, (unsigned long long)dc);
    }
}

/* ---- types -------------------------------------------------------------------------------- */

/* The types NCCL reduces, each with its values for SUM, PROD and the other ops. */
#define NRED 15
enum { R_SCHAR, R_INT8, R_UCHAR, R_UINT8, R_INT, R_INT32, R_UNSIGNED, R_UINT32, R_LONG, R_LLONG,
       R_INT64, R_ULONG, R_UINT64, R_FLOAT, R_DOUBLE }; /* the order of nccl_types_init */
static struct ttype T_RED[NRED][3]; /* [type][0: full range, 1: VT_R_SUM, 2: VT_R_PROD] */
static int range_of(int opid) { return opid == OP_SUM || opid == OP_USUM ? 1 : (opid == OP_PROD ? 2 : 0); }

/* data movement: eligible types (predefined or contiguous of one predefined type) */
#define NMOVE_MAX 32
static struct ttype T_MOVE[NMOVE_MAX];
static int n_move;
/* fallback types for reductions, and the types with holes */
static struct ttype T_I16[3], T_U16[3], T_INT16[3], T_UINT16[3], T_ULL[3], T_2INT, T_DOUBLE_INT,
    T_SHORT_INT, T_CONTIG;

static void tt_num(struct ttype *t3, MPI_Datatype dt, const char *name, int vt)
{
    static const int flags[3] = {0, VT_R_SUM, VT_R_PROD};
    for (int r = 0; r < 3; r++) {
        tt_basic(&t3[r], dt, name, vt | flags[r]);
        if (t3[r].size != (size_t)vt_num(vt, NULL, NULL) || t3[r].extent != (MPI_Aint)t3[r].size)
            DIE("%s: size %zu extent %ld, expected %d bytes", name, t3[r].size, (long)t3[r].extent,
                vt_num(vt, NULL, NULL));
    }
}

/* the data-movement test type of dt */
static const struct ttype *TM(MPI_Datatype dt)
{
    for (int i = 0; i < n_move; i++)
        if (T_MOVE[i].dt == dt) return &T_MOVE[i];
    DIE("no data-movement type %s", type_name(dt));
    return NULL;
}

static void move_add(MPI_Datatype dt, const char *name)
{
    if (n_move >= NMOVE_MAX) DIE("too many types");
    tt_basic(&T_MOVE[n_move], dt, name, VT_BYTES);
    if (T_MOVE[n_move].extent != (MPI_Aint)T_MOVE[n_move].size) {
        if (t_rank == 0) note("%s has holes here (size %zu, extent %ld): left out", name,
                              T_MOVE[n_move].size, (long)T_MOVE[n_move].extent);
        return;
    }
    n_move++;
}

/* a predefined pair type with a hole: data at [0, a) and [off, off + b) */
static int tt_holes(struct ttype *t, MPI_Datatype dt, const char *name, size_t a, size_t off, size_t b)
{
    tt_basic(t, dt, name, VT_BYTES);
    if (t->size != a + b || t->extent <= (MPI_Aint)(off + b - 1)) return 0;
    t->nseg = 2;
    t->seg_off[0] = 0, t->seg_len[0] = a;
    t->seg_off[1] = off, t->seg_len[1] = b;
    return 1;
}

/* Does MPI's MAX and MIN of unsigned type dt compare as unsigned? Open MPI 4.1.4 compares
 * MPI_UNSIGNED_LONG as signed, MPICH 4.0.2 every unsigned type (host buffers, plain MPI, in
 * MPI_Allreduce as in MPI_Reduce_local). Probed with MPI_Reduce_local. */
static int unsigned_ops_ok(MPI_Datatype dt, size_t size)
{
    uint64_t hi = (uint64_t)1 << (8 * size - 1), a[2] = {hi, 1}, b[2] = {1, hi};
    unsigned char in[16], io[16];
    memcpy(in, &a[0], size), memcpy(in + size, &a[1], size);
    memcpy(io, &b[0], size), memcpy(io + size, &b[1], size);
    MPI_CHECK(MPI_Reduce_local(in, io, 2, dt, MPI_MAX));
    int ok = memcmp(io, &hi, size) == 0 && memcmp(io + size, &hi, size) == 0;
    memcpy(io, &b[0], size), memcpy(io + size, &b[1], size);
    MPI_CHECK(MPI_Reduce_local(in, io, 2, dt, MPI_MIN));
    uint64_t one = 1;
    return ok && memcmp(io, &one, size) == 0 && memcmp(io + size, &one, size) == 0;
}

/* an unsigned type whose MAX/MIN this MPI gets wrong takes the smaller values of SUM */
static void unsigned_quirk(struct ttype *t3)
{
    int sg = 1, fl = 1;
    vt_num(t3[0].vt, &sg, &fl);
    if (sg || fl || unsigned_ops_ok(t3[0].dt, t3[0].size)) return;
    if (t_rank == 0)
        note("this MPI's MPI_MAX/MPI_MIN compare %s as signed (host buffers, plain MPI): its MAX "
             "and MIN cases use values below 2^%zu", t3[0].name, 8 * t3[0].size - 2);
    t3[0] = t3[1];
}

static void usum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt; /* MPI_INT only */
    const uint32_t *a = (const uint32_t *)in;
    uint32_t *b = (uint32_t *)inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

static void nccl_types_init(void)
{
    int i = 0;
#define RED(dt, vt) tt_num(T_RED[i++], dt, #dt, vt)
    RED(MPI_SIGNED_CHAR, VT_I8);
    RED(MPI_INT8_T, VT_I8);
    RED(MPI_UNSIGNED_CHAR, VT_U8);
    RED(MPI_UINT8_T, VT_U8);
    RED(MPI_INT, VT_I32);
    RED(MPI_INT32_T, VT_I32);
    RED(MPI_UNSIGNED, VT_U32);
    RED(MPI_UINT32_T, VT_U32);
    RED(MPI_LONG, VT_I64);
    RED(MPI_LONG_LONG, VT_I64);
    RED(MPI_INT64_T, VT_I64);
    RED(MPI_UNSIGNED_LONG, VT_U64);
    RED(MPI_UINT64_T, VT_U64);
    RED(MPI_FLOAT, VT_F32);
    RED(MPI_DOUBLE, VT_F64);
#undef RED
    if (i != NRED) DIE("NRED");
    for (int k = 0; k < NRED; k++) unsigned_quirk(T_RED[k]);
    tt_num(T_I16, MPI_SHORT, "MPI_SHORT", VT_I16);
    tt_num(T_U16, MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", VT_U16);
    tt_num(T_INT16, MPI_INT16_T, "MPI_INT16_T", VT_I16);
    tt_num(T_UINT16, MPI_UINT16_T, "MPI_UINT16_T", VT_U16);
    tt_num(T_ULL, MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", VT_U64);
    unsigned_quirk(T_U16);
    unsigned_quirk(T_UINT16);
    tt_basic(&T_2INT, MPI_2INT, "MPI_2INT", VT_2INT);

    for (int k = 0; k < NRED; k++) move_add(T_RED[k][0].dt, T_RED[k][0].name);
    move_add(MPI_BYTE, "MPI_BYTE");
    move_add(MPI_CHAR, "MPI_CHAR");
    move_add(MPI_SHORT, "MPI_SHORT");
    move_add(MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT");
    move_add(MPI_WCHAR, "MPI_WCHAR");
    move_add(MPI_C_BOOL, "MPI_C_BOOL");
    move_add(MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE");
    move_add(MPI_2INT, "MPI_2INT");
    MPI_Datatype c3;
    MPI_CHECK(MPI_Type_contiguous(3, MPI_SHORT, &c3));
    MPI_CHECK(MPI_Type_commit(&c3));
    tt_basic(&T_CONTIG, c3, "contiguous(3 x MPI_SHORT)", VT_BYTES);
    T_MOVE[n_move++] = T_CONTIG;

    if (!tt_holes(&T_DOUBLE_INT, MPI_DOUBLE_INT, "MPI_DOUBLE_INT", 8, 8, 4)) T_DOUBLE_INT.dt = MPI_DATATYPE_NULL;
    if (!tt_holes(&T_SHORT_INT, MPI_SHORT_INT, "MPI_SHORT_INT", 2, 4, 4)) T_SHORT_INT.dt = MPI_DATATYPE_NULL;

    MPI_CHECK(MPI_Op_create(usum_fn, 1, &t_user_op[OP_USUM]));
}

static void nccl_types_free(void)
{
    MPI_Type_free(&T_CONTIG.dt);
    MPI_Op_free(&t_user_op[OP_USUM]);
}

/* ---- cases -------------------------------------------------------------------------------- */

struct ncase {
    struct ccase c;
    int form;
    int cls;      /* what the type and op allow: X_NCCL (eligible), X_STAGED, X_ANY */
    int same_gpu; /* built while every rank uses device 0 */
    int x;        /* expectation of the current run */
};
struct clist {
    struct ncase *k;
    int n, cap;
};
static int g_seed = 1;
static int g_holes; /* COLL_NCCL_HOLES=1: predefined types with holes too */
static const char *g_section = "";

static void cl_free(struct clist *l)
{
    free(l->k);
    memset(l, 0, sizeof *l);
}

/* Add a case; root_last: root size-1 (else 0). Returns it, or NULL when left out. */
static struct ncase *add(struct clist *l, int coll, int form, const struct ttype *t, int opid,
                         int n, int root_last, int inplace, int insig, MPI_Comm comm, int cls)
{
    if (!form_available(form)) return NULL;
    if (inplace && !coll_allows_inplace(coll)) inplace = 0;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->k = (struct ncase *)realloc(l->k, (size_t)l->cap * sizeof *l->k);
        if (!l->k) DIE("out of memory");
    }
    struct ncase *k = &l->k[l->n];
    memset(k, 0, sizeof *k);
    struct ccase *c = &k->c;
    int P = 1;
    MPI_Comm_size(comm, &P);
    c->coll = coll;
    c->opid = coll_is_reduction(coll) ? opid : OP_NONE;
    c->n = n;
    c->root = root_last ? P - 1 : 0;
    c->inplace = inplace;
    c->insig = insig;
    c->comm = comm;
    c->st = c->rt = t;
    c->seed = g_seed++;
    if (coll == C_REDUCE && inplace && quirk_mpich40_reduce_inplace()) c->root = 0;
    /* predefined types with holes: what lands in the holes is compared with the host run only */
    c->host_only = t == &T_DOUBLE_INT || t == &T_SHORT_INT;
    k->form = form;
    k->cls = cls;
    char sfx[160];
    snprintf(sfx, sizeof sfx, "%s%s", form_name[form], g_section);
    t_case_suffix = sfx;
    int keep = case_keep(c, form);
    t_case_suffix = NULL;
    if (!keep) return NULL;
    l->n++;
    return k;
}

/* ---- placements --------------------------------------------------------------------------- */

enum { PL_HOST, PL_DEV, PL_MIX0H, PL_MIX0D, PL_HS_DR, PL_DS_HR, PL_DEV_NRH, PL_N };
static const char *pl_name[PL_N] = {
    "host buffers", "device buffers", "rank 0 host, the others device",
    "rank 0 device, the others host", "host send, device receive", "device send, host receive",
    "device, host receive buffers on the non-roots"};

static void place(int pl, int me, int root, int *sk, int *rk)
{
    const int H = MEM_HOST, D = MEM_DEVICE;
    switch (pl) {
    case PL_HOST: *sk = H, *rk = H; break;
    case PL_DEV: *sk = D, *rk = D; break;
    case PL_MIX0H: *sk = *rk = me == 0 ? H : D; break;
    case PL_MIX0D: *sk = *rk = me == 0 ? D : H; break;
    case PL_HS_DR: *sk = H, *rk = D; break;
    case PL_DS_HR: *sk = D, *rk = H; break;
    case PL_DEV_NRH: *sk = D, *rk = me == root ? D : H; break;
    }
}

static int is_dev(int kind) { return !host_mode() && mem_kind_is_device(kind); }

/* Are this rank's significant buffers all device memory? (after coll_plan) */
static int local_device(const struct ccase *c)
{
    int co = c->coll, nonroot = c->me != c->root;
    int s_sig = c->sarg == ARG_BUF && !((co == C_SCATTER || co == C_SCATTERV) && nonroot);
    int r_sig = c->rarg == ARG_BUF &&
                !((co == C_REDUCE || co == C_GATHER || co == C_GATHERV) && nonroot);
    return (!s_sig || is_dev(c->s_kind)) && (!r_sig || is_dev(c->r_kind));
}

/* The same for rank r of the communicator, from the description alone (every rank knows every
 * rank's placement), so that no extra collective runs between the calls. prep() checks it
 * against local_device() for its own rank. */
static int rank_device(const struct ccase *c, int pl, int r)
{
    int co = c->coll, isroot = r == c->root, sk = 0, rk = 0;
    place(pl, r, c->root, &sk, &rk);
    if (co == C_BCAST) return is_dev(isroot ? sk : rk);
    int rooted_recv = co == C_REDUCE || co == C_GATHER || co == C_GATHERV;
    int rooted_send = co == C_SCATTER || co == C_SCATTERV;
    int s_inplace = c->inplace && !rooted_send && (!rooted_recv || isroot);
    int r_inplace = c->inplace && rooted_send && isroot;
    int s_sig = !s_inplace && !(rooted_send && !isroot);
    int r_sig = !r_inplace && !(rooted_recv && !isroot);
    return (!s_sig || is_dev(sk)) && (!r_sig || is_dev(rk));
}

static int expectation(const struct ncase *k, int all_device)
{
    if (!in_table(k->c.coll, k->form)) return X_ANY;
    if (!all_device) return X_STAGED;
    if (k->cls != X_NCCL) return k->cls;
    if (!g_distinct || k->same_gpu) return X_STAGED;
    return X_NCCL;
}

/* Place, plan, allocate and fill a case; find whether every rank passes device memory. */
static void prep(struct ncase *k, int pl)
{
    struct ccase *c = &k->c;
    int me = 0;
    MPI_Comm_rank(c->comm, &me);
    place(pl, me, c->root, &c->sk, &c->rk);
    coll_plan(c);
    case_alloc(c);
    case_fill(c, c->seed);
    case_make_freed(c);
    int all = 1;
    for (int r = 0; r < c->P; r++) all &= rank_device(c, pl, r);
    CHECK(rank_device(c, pl, c->me) == local_device(c), "%s: %s: rank_device() disagrees with the plan",
          pl_name[pl], c->label);
    k->x = expectation(k, all);
}

static int t_debug = -1;

/* Run one prepared case to completion (persistent: 2 rounds), check it, record it in t. */
static void run_prepared(struct ncase *k, const char *what, struct trace *t)
{
    struct ccase *c = &k->c;
    int rounds = form_persistent(k->form) ? 2 : 1, rc = MPI_SUCCESS;
    char w[200];
    snprintf(w, sizeof w, "%s, expected %s", what, x_name[k->x]);
    if (t_debug < 0) t_debug = atoi(t_env("COLL_DEBUG", "0"));
    if (form_persistent(k->form)) {
        rc = coll_start(c, k->form);
        CHECK(rc == MPI_SUCCESS && c->req != MPI_REQUEST_NULL, "%s: %s: init returned %d", w,
              c->label, rc);
    }
    for (int r = 0; r < rounds; r++) {
        uint64_t c0, b0, c1, b1;
        if (r > 0) case_fill(c, c->seed + 1000 * r);
        double t0 = MPI_Wtime();
        nccl_counters(&c0, &b0);
        if (form_persistent(k->form)) {
            if (rc == MPI_SUCCESS) {
                MPI_CHECK(MPI_Start(&c->req));
                MPI_CHECK(MPI_Wait(&c->req, MPI_STATUS_IGNORE));
            }
        } else {
            rc = coll_start(c, k->form);
            if (form_nonblocking(k->form) && rc == MPI_SUCCESS)
                MPI_CHECK(MPI_Wait(&c->req, MPI_STATUS_IGNORE));
        }
        nccl_counters(&c1, &b1);
        if (t_debug) note("%s: %s (%.2f ms, nccl_calls +%llu)", w, c->label, 1e3 * (MPI_Wtime() - t0),
                          (unsigned long long)(c1 - c0));
        g_cur_coll = c->coll, g_cur_form = k->form;
        check_delta(k->x, w, c->label, 1, c1 - c0, b1 - b0, rank_bytes(c));
        g_cur_coll = g_cur_form = -1;
        case_check(c, t, w, rc);
    }
    if (form_persistent(k->form) && c->req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Request_free(&c->req));
    case_free(c);
}

/* Every placement but PL_DEV runs on a twin of the communicator (a dup per placement, made at
 * its first case): cudampi's agreement asks less often on a communicator that saw no device
 * memory lately (docs/design.md, "What it costs"), so host runs (and PL_MIX0H with one rank) on
 * the communicator itself would send the device calls after them to the staged path. */
#define MAXTWIN 32
static MPI_Comm g_twin_of[MAXTWIN], g_twin[MAXTWIN];
static int g_twin_pl[MAXTWIN], g_ntwin;

static MPI_Comm twin(MPI_Comm c, int pl)
{
    for (int i = 0; i < g_ntwin; i++)
        if (g_twin_of[i] == c && g_twin_pl[i] == pl) return g_twin[i];
    if (g_ntwin == MAXTWIN) DIE("too many twins");
    g_twin_of[g_ntwin] = c;
    g_twin_pl[g_ntwin] = pl;
    MPI_CHECK(MPI_Comm_dup(c, &g_twin[g_ntwin])); /* every rank of c is at the same case */
    return g_twin[g_ntwin++];
}

/* MPI_Comm_free, and its twins' (a later communicator may get the same handle) */
static void comm_release(MPI_Comm *c)
{
    for (int i = 0; i < g_ntwin; i++)
        if (g_twin_of[i] == *c) {
            MPI_CHECK(MPI_Comm_free(&g_twin[i]));
            g_twin_of[i] = g_twin_of[g_ntwin - 1], g_twin[i] = g_twin[g_ntwin - 1];
            g_twin_pl[i] = g_twin_pl[g_ntwin - 1];
            g_ntwin--;
            i--;
        }
    MPI_CHECK(MPI_Comm_free(c));
}

static void run_list(struct clist *l, int pl, struct trace *t)
{
    for (int i = 0; i < l->n; i++) {
        struct ncase *k = &l->k[i];
        MPI_Comm own = k->c.comm;
        if (pl != PL_DEV) k->c.comm = twin(own, pl);
        prep(k, pl);
        run_prepared(k, pl_name[pl], t);
        k->c.comm = own;
    }
}

/* Run the list on host buffers, then in each placement; compare each with the host run. */
static void run_placements(struct clist *l, const int *pls, int npl)
{
    struct trace ref = {0};
    run_list(l, PL_HOST, &ref);
    for (int p = 0; p < npl; p++) {
        struct trace got = {0};
        run_list(l, pls[p], &got);
        trace_compare(&ref, &got, pl_name[pls[p]]);
        trace_free(&got);
    }
    trace_free(&ref);
}

/* ---- section 1: the sweep ----------------------------------------------------------------- */

static const int COUNTS[3] = {1, 37, 1001};
static const int RED_OPS[4] = {OP_SUM, OP_PROD, OP_MAX, OP_MIN};


/* A reduction call over the (type, op) pairs NCCL carries. full: every pair once, in place for
 * half of them, so that every type and every op meets in place and not, roots 0 and size-1
 * (Reduce) and each count; else (ROT): every type once, the ops and the rest rotating. */
static void sweep_reduction(struct clist *l, int coll, int form, MPI_Comm comm, int full)
{
    for (int ti = 0; ti < NRED; ti++)
        for (int oi = 0; oi < 4; oi++) {
            if (!full && oi != (ti + coll) % 4) continue;
            int op = RED_OPS[oi], inplace = full ? (ti + oi) % 2 : (ti >> 2) % 2;
            add(l, coll, form, &T_RED[ti][range_of(op)], op, COUNTS[(ti + oi) % 3],
                ((ti >> 1) + oi) % 2, inplace, (ti + oi + 1) % 3, comm, X_NCCL);
        }
}

/* A data-movement call over the types (full: every one; else every third), in place or not
 * (Bcast: root 0 or size-1) alternating. */
static void sweep_move(struct clist *l, int coll, int form, MPI_Comm comm, int full)
{
    for (int ti = 0; ti < n_move; ti++) {
        if (!full && ti % 3 != coll % 3) continue;
        int var = (ti + (ti >= NRED)) % 2;
        add(l, coll, form, &T_MOVE[ti], OP_NONE, COUNTS[ti % 3], coll == C_BCAST ? var : ti % 2,
            coll == C_BCAST ? 0 : var, (ti / 2) % 3, comm, X_NCCL);
    }
}

/* one case of about 1 MiB per call */
static void add_large(struct clist *l, int coll, int form, MPI_Comm comm)
{
    int P = 1;
    MPI_Comm_size(comm, &P);
    switch (coll) {
    case C_ALLREDUCE: add(l, coll, form, &T_RED[R_FLOAT][1], OP_SUM, 262147, 0, 1, 0, comm, X_NCCL); break;
    case C_REDUCE: add(l, coll, form, &T_RED[R_DOUBLE][0], OP_MAX, 131075, 1, 0, 0, comm, X_NCCL); break;
    case C_BCAST: add(l, coll, form, TM(MPI_BYTE), OP_NONE, 1048579, 1, 0, 0, comm, X_NCCL); break;
    case C_ALLGATHER: add(l, coll, form, TM(MPI_INT), OP_NONE, 524293 / P, 0, 1, 0, comm, X_NCCL); break;
    case C_ALLTOALL: add(l, coll, form, TM(MPI_INT64_T), OP_NONE, 131075 / P, 0, 0, 0, comm, X_NCCL); break;
    case C_REDUCE_SCATTER_BLOCK:
        add(l, coll, form, &T_RED[R_UNSIGNED][1], OP_SUM, 262147 / P, 0, form == M_BLOCK, 0, comm, X_NCCL);
        break;
    }
}

/* a few cases of a call: for the calls outside the table, and the smaller sections
 * (which: a number that picks different types, in place or not, roots) */
static void few_types(struct clist *l, int coll, int form, MPI_Comm comm, int n, int which)
{
    int v = which % 2;
    if (is_red_coll(coll)) {
        if (which % 3 == 0) add(l, coll, form, &T_RED[R_INT64][1], OP_SUM, n, 1 - v, v, 2, comm, X_NCCL);
        if (which % 3 == 1) add(l, coll, form, &T_RED[R_FLOAT][0], OP_MAX, n, v, 1 - v, 1, comm, X_NCCL);
        if (which % 3 == 2) add(l, coll, form, &T_RED[R_UINT8][2], OP_PROD, n + 2, v, v, 0, comm, X_NCCL);
    } else {
        if (which % 2 == 0) add(l, coll, form, TM(MPI_BYTE), OP_NONE, n, 1, 1, 1, comm, X_NCCL);
        if (which % 2 == 1) add(l, coll, form, TM(MPI_DOUBLE), OP_NONE, n + 2, 0, 0, 2, comm, X_NCCL);
    }
}

static void section_sweep(MPI_Comm comm)
{
    struct clist l = {0}, large = {0};
    g_section = "";
    for (int i = 0; i < NTABLE; i++) {
        int coll = NCCL_TABLE[i].coll, form = NCCL_TABLE[i].form;
        int full = NCCL_TABLE[i].sweep == FULL;
        if (NCCL_TABLE[i].sweep == FEW) {
            for (int w = 0; w < 2; w++) few_types(&l, coll, form, comm, 37, i + w);
            continue;
        }
        if (is_red_coll(coll)) sweep_reduction(&l, coll, form, comm, full);
        else sweep_move(&l, coll, form, comm, full);
        if (full || (coll == C_BCAST && form == M_BLOCK_C)) add_large(&large, coll, form, comm);
    }
    for (int i = 0; i < NNEXT; i++)
        for (int w = 0; w < 2; w++) few_types(&l, NEXT[i].coll, NEXT[i].form, comm, 37, i + w);
    if (t_rank == 0) note("sweep: %d cases, host and device buffers", l.n);
    const int pls[] = {PL_DEV};
    run_placements(&l, pls, 1);
    cl_free(&l);
    /* the large cases on device buffers only, against the expected bytes (which cover every
     * byte here): MPICH takes seconds for a 1 MiB reduction with 4 ranks on 2 cores */
    if (t_rank == 0) note("sweep: %d large cases, device buffers", large.n);
    struct trace t = {0};
    run_list(&large, PL_DEV, &t);
    trace_free(&t);
    cl_free(&large);
}

/* ---- section 2: fallbacks ----------------------------------------------------------------- */

static void section_fallbacks(MPI_Comm comm)
{
    struct clist l = {0};
    g_section = " [fallback]";
    static const int rcolls[] = {C_ALLREDUCE, C_REDUCE, C_REDUCE_SCATTER_BLOCK};
    static const int mcolls[] = {C_BCAST, C_ALLGATHER, C_ALLTOALL};
    /* every kind on every reduction call, in place or not by turns; the _c forms: the user op,
     * MINLOC, MPI_SHORT and a vector */
    for (int f = 0; f < 2; f++) {
        int form = f ? M_BLOCK_C : M_BLOCK;
        for (int ci = 0; ci < 3; ci++) {
            int coll = rcolls[ci];
            if (f) {
                add(&l, coll, form, &T_RED[R_INT][1], OP_USUM, 37, ci % 2, ci % 2, 0, comm, X_STAGED);
                add(&l, coll, form, &T_2INT, OP_MINLOC, 37, 0, 1 - ci % 2, 0, comm, X_STAGED);
                add(&l, coll, form, &T_I16[1], OP_SUM, 37, 1, 0, 1, comm, X_STAGED);
                continue;
            }
            for (int var = ci % 2; var < 2; var += 2) {
                int n = COUNTS[1 + var];
                /* user-defined ops, on an eligible type and on derived ones */
                add(&l, coll, form, &T_RED[R_INT][1], OP_USUM, n, var, var, 0, comm, X_STAGED);
                add(&l, coll, form, &TT_AFFINE, OP_AFFINE, n, var, var, 1, comm, X_STAGED);
                add(&l, coll, form, &TT_MAXS, OP_MAXS, n, 1 - var, var, 2, comm, X_STAGED);
                /* MINLOC / MAXLOC */
                add(&l, coll, form, &T_2INT, var ? OP_MAXLOC : OP_MINLOC, n, var, var, 0, comm, X_STAGED);
                /* bitwise and logical ops on types NCCL reduces */
                add(&l, coll, form, &T_RED[R_INT][0], var ? OP_BAND : OP_BOR, n, var, 1 - var, 1, comm, X_STAGED);
                add(&l, coll, form, &T_RED[R_UINT64][0], OP_BXOR, n, 1 - var, var, 2, comm, X_STAGED);
                add(&l, coll, form, &T_RED[R_UCHAR][0], var ? OP_LAND : OP_LOR, n, var, var, 0, comm, X_STAGED);
                add(&l, coll, form, &T_RED[R_INT8][0], OP_LXOR, n, var, 1 - var, 0, comm, X_STAGED);
                /* types NCCL lacks */
                add(&l, coll, form, &T_I16[1], OP_SUM, n, var, var, 1, comm, X_STAGED);
                add(&l, coll, form, &T_U16[0], OP_MAX, n, 1 - var, 1 - var, 2, comm, X_STAGED);
                add(&l, coll, form, &T_INT16[2], OP_PROD, n, var, var, 0, comm, X_STAGED);
                add(&l, coll, form, &T_UINT16[0], OP_MIN, n, var, 1 - var, 0, comm, X_STAGED);
                /* not in the contract's list although NCCL has uint64: correctness only */
                add(&l, coll, form, &T_ULL[1], OP_SUM, n, var, var, 0, comm, X_ANY);
            }
        }
        for (int ci = 0; ci < 3; ci++) {
            int coll = mcolls[ci];
            if (f) {
                add(&l, coll, form, &TT_VEC, OP_NONE, 37, 1, 0, 0, comm, X_STAGED);
                continue;
            }
            for (int var = ci % 2; var < 2; var += 2) {
                int n = COUNTS[1 + var], bc = coll == C_BCAST;
                add(&l, coll, form, &TT_VEC, OP_NONE, n, var, bc ? 0 : var, 0, comm, X_STAGED);
                add(&l, coll, form, &TT_RESIZED, OP_NONE, n, 1 - var, bc ? 0 : 1 - var, 0, comm, X_STAGED);
                /* predefined, but with a hole: correctness only. Left out unless
                 * COLL_NCCL_HOLES=1: cudampi's staged path writes the holes of these types in
                 * a device receive buffer (found by this test; not an NCCL matter) */
                if (!g_holes) continue;
                if (T_DOUBLE_INT.dt != MPI_DATATYPE_NULL)
                    add(&l, coll, form, &T_DOUBLE_INT, OP_NONE, n, var, bc ? 0 : var, 0, comm, X_ANY);
                if (T_SHORT_INT.dt != MPI_DATATYPE_NULL)
                    add(&l, coll, form, &T_SHORT_INT, OP_NONE, n, 1 - var, 0, 0, comm, X_ANY);
            }
        }
    }
    if (t_rank == 0) note("fallbacks: %d cases", l.n);
    const int pls[] = {PL_DEV};
    run_placements(&l, pls, 1);
    cl_free(&l);
}

/* ---- section 3: mixed placements ---------------------------------------------------------- */

static void section_mixed(MPI_Comm comm)
{
    struct clist l = {0};
    g_section = " [placements]";
    for (int i = 0; i < NTABLE; i++) {
        int coll = NCCL_TABLE[i].coll, form = NCCL_TABLE[i].form;
        if (form != M_BLOCK && coll != C_ALLREDUCE) continue; /* the _c forms decide alike */
        for (int var = i % 2; var < 2; var += 2) {
            if (is_red_coll(coll)) {
                add(&l, coll, form, &T_RED[R_INT32][1], OP_SUM, 37, var, var, var, comm, X_NCCL);
                if (coll == C_REDUCE) /* every kind of non-root recvbuf, for PL_DEV_NRH */
                    for (int ins = 0; ins < 3; ins++)
                        if (ins != var)
                            add(&l, coll, form, &T_RED[R_DOUBLE][0], OP_MIN, 1001, ins % 2, 0, ins, comm, X_NCCL);
            } else {
                add(&l, coll, form, TM(MPI_UNSIGNED), OP_NONE, 37, var, coll == C_BCAST ? 0 : var, 0, comm, X_NCCL);
            }
        }
    }
    if (t_rank == 0) note("placements: %d cases", l.n);
    const int pls[] = {PL_MIX0H, PL_MIX0D, PL_HS_DR, PL_DS_HR, PL_DEV_NRH};
    run_placements(&l, pls, 5);
    cl_free(&l);
}

/* ---- section 4: split communicators ------------------------------------------------------- */

static void small_sweep(MPI_Comm comm, const char *section)
{
    struct clist l = {0};
    g_section = section;
    static int which;
    for (int i = 0; i < NTABLE; i++)
        if (NCCL_TABLE[i].form == M_BLOCK || NCCL_TABLE[i].coll == C_ALLREDUCE)
            few_types(&l, NCCL_TABLE[i].coll, NCCL_TABLE[i].form, comm, 37, which++);
    for (int i = 0; i < NTABLE; i++) /* and a rooted call's other root */
        if (coll_has_root(NCCL_TABLE[i].coll) && NCCL_TABLE[i].form == M_BLOCK)
            add(&l, NCCL_TABLE[i].coll, NCCL_TABLE[i].form,
                is_red_coll(NCCL_TABLE[i].coll) ? &T_RED[R_UINT64][0] : TM(MPI_LONG), OP_MAX, 101,
                which % 2, 0, 0, comm, X_NCCL);
    const int pls[] = {PL_DEV};
    run_placements(&l, pls, 1);
    cl_free(&l);
}

static void section_split(void)
{
    MPI_Comm half, single;
    int color = t_rank < (t_size + 1) / 2 ? 0 : 1;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, t_size - t_rank, &half)); /* reversed order */
    small_sweep(half, " [halves]");
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, t_rank, 0, &single));
    small_sweep(single, " [single rank]");
    /* the halves again, after the singles were made */
    small_sweep(half, " [halves again]");
    comm_release(&single);
    comm_release(&half);
}

/* ---- section 5: communicators made and freed ---------------------------------------------- */

static void section_rounds(void)
{
    for (int r = 0; r < 20; r++) {
        MPI_Comm c;
        if (r % 2 == 0) {
            MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        } else {
            /* members and order change from round to round while the handle may be reused */
            int color = (r / 2) % 2 ? t_rank % 2 : 0, key = (r % 4 == 1) ? -t_rank : t_rank;
            MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
        }
        char sec[40];
        snprintf(sec, sizeof sec, " [round %d]", r);
        struct clist l = {0};
        g_section = sec;
        add(&l, C_ALLREDUCE, M_BLOCK, &T_RED[R_INT64][1], OP_SUM, 37 + r, 0, r % 3 == 1, 0, c, X_NCCL);
        add(&l, C_BCAST, M_BLOCK, TM(MPI_BYTE), OP_NONE, 101 + r, r % 2, 0, 0, c, X_NCCL);
        if (r % 5 == 4) add(&l, C_REDUCE_SCATTER_BLOCK, M_BLOCK, &T_RED[R_DOUBLE][0], OP_MAX, 3, 0, 0, 0, c, X_NCCL);
        struct trace t = {0};
        run_list(&l, PL_DEV, &t); /* checked against the expected bytes */
        trace_free(&t);
        cl_free(&l);
        comm_release(&c);
    }
}

/* ---- section 6: two communicators, nonblocking, opposite orders --------------------------- */

static void section_two_comms(void)
{
    MPI_Comm a, b;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &b));
    for (int big = 0; big < 2; big++) {
        struct trace tr[2] = {{0}, {0}};
        int seed0 = g_seed;
        for (int p = 0; p < 2; p++) {
            int pl = p ? PL_DEV : PL_HOST;
            g_seed = seed0; /* the same cases in both runs */
            struct clist l = {0};
            g_section = " [two communicators]";
            struct ncase *ka = add(&l, C_ALLREDUCE, M_NB, &T_RED[R_INT][1], OP_SUM, big ? 262147 : 37, 0, 0, 0, a, X_NCCL);
            struct ncase *kb = add(&l, C_ALLREDUCE, M_NB, &T_RED[R_DOUBLE][0], OP_MAX, big ? 131075 : 1001, 0, 1, 0, b, X_NCCL);
            if (!ka || !kb) { /* COLL_ONLY */
                cl_free(&l);
                continue;
            }
            ka = &l.k[0], kb = &l.k[1]; /* realloc */
            prep(ka, pl);
            prep(kb, pl);
            uint64_t c0, b0, c1, b1;
            nccl_counters(&c0, &b0);
            struct ncase *first = t_rank % 2 ? kb : ka, *second = t_rank % 2 ? ka : kb;
            int rc1 = coll_start(&first->c, first->form);
            int rc2 = coll_start(&second->c, second->form);
            int rca = t_rank % 2 ? rc2 : rc1, rcb = t_rank % 2 ? rc1 : rc2;
            MPI_Request rq[2] = {first->c.req, second->c.req};
            MPI_Status st[2];
            MPI_CHECK(MPI_Waitall(2, rq, st));
            first->c.req = rq[0], second->c.req = rq[1];
            nccl_counters(&c1, &b1);
            int nn = (ka->x == X_NCCL) + (kb->x == X_NCCL);
            int x = ka->x == X_ANY || kb->x == X_ANY ? X_ANY : (nn == 2 ? X_NCCL : (nn == 0 ? X_STAGED : X_ANY));
            uint64_t eb = rank_bytes(&ka->c);
            if (eb != UNKNOWN_BYTES && rank_bytes(&kb->c) != UNKNOWN_BYTES) eb += rank_bytes(&kb->c);
            else eb = UNKNOWN_BYTES;
            if (x == X_NCCL) { /* two calls: check_delta counts per call */
                g_expected_calls += 2;
                g_seen_calls += c1 - c0;
                if (g_nccl_mode) {
                    CHECK(c1 - c0 == 2, "%s: two Iallreduce: nccl_calls rose by %llu, expected 2", pl_name[pl],
                          (unsigned long long)(c1 - c0));
                    if (eb != UNKNOWN_BYTES)
                        CHECK(b1 - b0 == eb, "%s: two Iallreduce: nccl_bytes rose by %llu, expected %llu",
                              pl_name[pl], (unsigned long long)(b1 - b0), (unsigned long long)eb);
                }
            } else {
                check_delta(x, pl_name[pl], "two Iallreduce in opposite orders", 1, c1 - c0, b1 - b0, 0);
            }
            case_check(&ka->c, &tr[p], pl_name[pl], rca);
            case_check(&kb->c, &tr[p], pl_name[pl], rcb);
            case_free(&ka->c);
            case_free(&kb->c);
            cl_free(&l);
        }
        trace_compare(&tr[0], &tr[1], "two communicators, device buffers");
        trace_free(&tr[0]);
        trace_free(&tr[1]);
    }
    comm_release(&a);
    comm_release(&b);
}

/* ---- section 7: a collective while a large device Isend is pending ------------------------ */

static void section_isend(MPI_Comm comm)
{
    if (t_size < 2) return;
    const size_t big = ((size_t)4 << 20) + 3;
    struct trace tr[2] = {{0}, {0}};
    int seed0 = g_seed;
    for (int p = 0; p < 2; p++) {
        int pl = p ? PL_DEV : PL_HOST, kind = p ? MEM_DEVICE : MEM_HOST;
        g_seed = seed0; /* the same cases in both runs */
        char what[120];
        snprintf(what, sizeof what, "%s, collective inside Isend/Wait", pl_name[pl]);
        void *sb = NULL, *rb = NULL;
        if (t_rank == 0) {
            sb = mem_alloc(kind, big);
            mem_pattern(sb, big, 0, 4242);
        } else if (t_rank == 1) {
            rb = mem_alloc(kind, big + SLACK);
            mem_poison(rb, big + SLACK);
        }
        struct clist l = {0};
        g_section = " [inside Isend/Wait]";
        add(&l, C_ALLREDUCE, M_BLOCK, &T_RED[R_ULONG][1], OP_SUM, 1001, 0, 0, 0, comm, X_NCCL);
        add(&l, C_BCAST, M_BLOCK, TM(MPI_BYTE), OP_NONE, 65539, 1, 0, 0, comm, X_NCCL);
        for (int i = 0; i < l.n; i++) prep(&l.k[i], pl);
        MPI_Request rq = MPI_REQUEST_NULL;
        MPI_Status st;
        status_init(&st);
        if (t_rank == 0) MPI_CHECK(MPI_Isend(sb, (int)big, MPI_BYTE, 1, 91, MPI_COMM_WORLD, &rq));
        /* prepared before the Isend: between Isend and Wait only the device collectives */
        for (int i = 0; i < l.n; i++) run_prepared(&l.k[i], what, &tr[p]);
        if (t_rank == 0) MPI_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        if (t_rank == 1) MPI_CHECK(MPI_Recv(rb, (int)big, MPI_BYTE, 0, 91, MPI_COMM_WORLD, &st));
        if (t_rank == 1) {
            unsigned char *got = mem_fetch(rb, big + SLACK), *exp = pattern_new(big, 0, 4242);
            check_bytes(got, exp, big, "%s: the 4 MiB message", what);
            check_all(got + big, POISON_BYTE, SLACK, "%s: slack after the 4 MiB message", what);
            check_status(&st, MPI_BYTE, 0, 91, (int)big, "%s: MPI_Recv", what);
            free(got);
            free(exp);
        }
        if (t_rank == 0) {
            unsigned char *got = mem_fetch(sb, big), *exp = pattern_new(big, 0, 4242);
            check_bytes(got, exp, big, "%s: the send buffer of the 4 MiB message", what);
            free(got);
            free(exp);
        }
        mem_free(sb);
        mem_free(rb);
        cl_free(&l);
    }
    trace_compare(&tr[0], &tr[1], "collective inside Isend/Wait, device buffers");
    trace_free(&tr[0]);
    trace_free(&tr[1]);
}

/* ---- section 8: an intercommunicator ------------------------------------------------------ */

static void section_inter(void)
{
    if (t_size < 2) return;
    int n0 = (t_size + 1) / 2, g = t_rank < n0 ? 0 : 1, lrank = 0;
    MPI_Comm local, inter;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, g, t_rank, &local));
    MPI_CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, g ? 0 : n0, 4711, &inter));
    MPI_Comm_rank(local, &lrank);
    const int n = 37;
    const size_t nb = n * sizeof(int32_t), bn = 1001;
    unsigned char *res[2][2];
    for (int p = 0; p < 2; p++) {
        int kind = p ? MEM_DEVICE : MEM_HOST;
        char what[80];
        snprintf(what, sizeof what, "intercommunicator, %s", pl_name[p ? PL_DEV : PL_HOST]);
        /* Allreduce: each group gets the sum of the other group's buffers */
        int32_t hs[37], exp[37];
        for (int i = 0; i < n; i++) {
            hs[i] = 1000 * t_rank + i;
            exp[i] = 0;
            for (int r = g ? 0 : n0; r < (g ? n0 : t_size); r++) exp[i] += 1000 * r + i;
        }
        void *s = mem_alloc(kind, nb), *r = mem_alloc(kind, nb + SLACK);
        mem_put(s, hs, nb);
        mem_poison(r, nb + SLACK);
        uint64_t c0, b0, c1, b1;
        nccl_counters(&c0, &b0);
        int rc = MPI_Allreduce(s, r, n, MPI_INT, MPI_SUM, inter);
        nccl_counters(&c1, &b1);
        CHECK(rc == MPI_SUCCESS, "%s: MPI_Allreduce returned %d", what, rc);
        check_delta(in_table(C_ALLREDUCE, M_BLOCK) ? X_STAGED : X_ANY, what, "MPI_Allreduce", 1, c1 - c0, b1 - b0, 0);
        res[0][p] = mem_fetch(r, nb + SLACK);
        check_bytes(res[0][p], exp, nb, "%s: MPI_Allreduce result", what);
        check_all(res[0][p] + nb, POISON_BYTE, SLACK, "%s: MPI_Allreduce slack", what);
        unsigned char *sg = mem_fetch(s, nb);
        check_bytes(sg, hs, nb, "%s: MPI_Allreduce send buffer changed", what);
        free(sg);
        mem_free(s);
        mem_free(r);
        /* Bcast from group 0's first rank */
        int isroot = g == 0 && lrank == 0;
        void *b = mem_alloc(kind, bn + SLACK);
        mem_poison(b, bn + SLACK);
        if (isroot) mem_pattern(b, bn, 0, 77);
        int root = g == 0 ? (isroot ? MPI_ROOT : MPI_PROC_NULL) : 0;
        nccl_counters(&c0, &b0);
        rc = MPI_Bcast(b, (int)bn, MPI_BYTE, root, inter);
        nccl_counters(&c1, &b1);
        CHECK(rc == MPI_SUCCESS, "%s: MPI_Bcast returned %d", what, rc);
        check_delta(in_table(C_BCAST, M_BLOCK) ? X_STAGED : X_ANY, what, "MPI_Bcast", 1, c1 - c0, b1 - b0, 0);
        res[1][p] = mem_fetch(b, bn + SLACK);
        if (g == 1 || isroot) {
            unsigned char *e = pattern_new(bn, 0, 77);
            check_bytes(res[1][p], e, bn, "%s: MPI_Bcast buffer", what);
            free(e);
        } else {
            check_all(res[1][p], POISON_BYTE, bn, "%s: MPI_Bcast buffer of a non-root in the root's group", what);
        }
        check_all(res[1][p] + bn, POISON_BYTE, SLACK, "%s: MPI_Bcast slack", what);
        mem_free(b);
    }
    check_bytes(res[0][1], res[0][0], nb + SLACK, "intercommunicator MPI_Allreduce: device vs host run");
    check_bytes(res[1][1], res[1][0], bn + SLACK, "intercommunicator MPI_Bcast: device vs host run");
    for (int i = 0; i < 2; i++) free(res[i][0]), free(res[i][1]);
    MPI_CHECK(MPI_Comm_free(&inter));
    MPI_CHECK(MPI_Comm_free(&local));
}

/* ---- section 9: every rank on the same device --------------------------------------------- */

static void section_same_gpu(void)
{
    if (t_size < 2 || host_mode() || test_device_count() < 1) return;
    int mine = 0;
    CUDA_CHECK(cudaGetDevice(&mine));
    for (int same = 1; same >= 0; same--) {
        CUDA_CHECK(cudaSetDevice(same ? 0 : mine));
        MPI_Comm c;
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        struct clist l = {0};
        g_section = same ? " [every rank on device 0]" : " [own devices again]";
        add(&l, C_ALLREDUCE, M_BLOCK, &T_RED[R_INT][1], OP_SUM, 37, 0, 0, 0, c, X_NCCL);
        add(&l, C_BCAST, M_BLOCK, TM(MPI_DOUBLE), OP_NONE, 1001, 1, 0, 0, c, X_NCCL);
        add(&l, C_ALLGATHER, M_BLOCK, TM(MPI_INT), OP_NONE, 37, 0, 1, 0, c, X_NCCL);
        for (int i = 0; i < l.n; i++) l.k[i].same_gpu = same;
        const int pls[] = {PL_DEV};
        run_placements(&l, pls, 1);
        cl_free(&l);
        comm_release(&c);
    }
}

/* ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    const char *mode = t_env("CMTEST_MODE", "");
    int ndev = test_device_count();
    if (ndev > 0) CUDA_CHECK(cudaSetDevice(t_rank % ndev));
    g_distinct = ndev >= t_size;
    g_stats = (stats_sized_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats_sized");
    g_nccl_mode = strcmp(mode, "nccl") == 0 && !host_mode();
    if (g_nccl_mode) {
        CHECK(shim_loaded() && g_stats, "mode nccl without cudampi_get_stats_sized (shim %s)",
              shim_loaded() ? "loaded" : "not loaded");
        CHECK(g_distinct, "mode nccl needs a device per rank: FAKECUDA_DEVICES=%d, %d ranks", ndev, t_size);
        struct cudampi_stats s;
        int got = g_stats ? g_stats(&s, sizeof s) : 0;
        if (!CHECK(got >= (int)(offsetof(struct cudampi_stats, nccl_bytes) + sizeof s.nccl_bytes),
                   "mode nccl: the shim's struct cudampi_stats has %d bytes, no nccl_calls", got))
            g_nccl_mode = 0; /* one failure, not one per call */
        if (t_rank == 0)
            note("mode nccl: CUDAMPI_NCCL_LIB=%s CUDAMPI_NCCL_BYTES=%s, %d devices",
                 t_env("CUDAMPI_NCCL_LIB", "(unset)"), t_env("CUDAMPI_NCCL_BYTES", "(unset)"), ndev);
    } else {
        /* outside mode nccl the counters must stay 0, unless an NCCL is reachable (a GPU
         * machine with libnccl.so.2 installed) */
        void *h = NULL;
        int off = strcmp(t_env("CUDAMPI_NCCL", "1"), "0") == 0;
        if (!off && !getenv("CUDAMPI_NCCL_LIB")) {
            h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
            off = h == NULL;
            if (h) dlclose(h);
        }
        g_nccl_off = off;
        if (!off && t_rank == 0) note("an NCCL is reachable outside mode nccl: counters not checked");
    }

    coll_types_init();
    nccl_types_init();
    g_holes = atoi(t_env("COLL_NCCL_HOLES", "0"));
    if (!g_holes && t_rank == 0)
        note("left out: data movement of MPI_DOUBLE_INT / MPI_SHORT_INT (cudampi's staged path "
             "writes their holes in device receive buffers; COLL_NCCL_HOLES=1 runs them)");
    MPI_Comm comm;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));

    double t0 = MPI_Wtime(), t1;
#define SECTION(name, call)                                                                     \
    do {                                                                                        \
        call;                                                                                   \
        t1 = MPI_Wtime();                                                                       \
        if (t_rank == 0) note("%s: %.2f s", name, t1 - t0);                                     \
        t0 = t1;                                                                                \
    } while (0)
    SECTION("sweep", section_sweep(comm));
    SECTION("fallbacks", section_fallbacks(comm));
    SECTION("mixed placements", section_mixed(comm));
    SECTION("split communicators", section_split());
    SECTION("communicators made and freed", section_rounds());
    SECTION("two communicators", section_two_comms());
    SECTION("inside Isend/Wait", section_isend(comm));
    SECTION("intercommunicator", section_inter());
    SECTION("same device", section_same_gpu());
    /* the first communicator still works after all that */
    SECTION("again on the first communicator", small_sweep(comm, " [first communicator again]"));

    uint64_t calls = 0, bytes = 0;
    nccl_counters(&calls, &bytes);
    if (t_rank == 0) print_tally();
    if (g_nccl_off) CHECK(calls == 0, "nccl_calls is %llu outside mode nccl", (unsigned long long)calls);
    if (g_nccl_mode)
        CHECK(g_seen_calls == g_expected_calls, "nccl_calls rose by %llu in checked calls, expected %llu",
              (unsigned long long)g_seen_calls, (unsigned long long)g_expected_calls);
    note("nccl_calls %llu (nccl_bytes %llu); %llu expected in checked calls%s", (unsigned long long)calls,
         (unsigned long long)bytes, (unsigned long long)g_expected_calls,
         g_nccl_mode ? "" : " (not mode nccl: 0 expected)");

    comm_release(&comm);
    nccl_types_free();
    coll_types_free();
    return report_and_finalize();
}
