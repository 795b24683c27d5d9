/* coll_util.c: shared machinery of the collective tests (tests/c/coll_*.c). NOT a test itself
 * (no cudampi-test header, so the harness skips it); each coll_*.c test includes it right after
 * common.h:
 *     #include "common.h"
 *     #include "coll_util.c"
 *
 * A collective call on one rank is described by a `struct ccase`: which collective, its types,
 * counts, root, MPI_IN_PLACE, and how insignificant buffers are passed (a real buffer, NULL, or
 * a pointer to FREED device memory). coll_plan() turns the description into the layout of the
 * send and receive buffers: a list of segments, each `count` elements of a test type at a byte
 * offset, whose content is
 *   SEG_DATA  bytes of a data stream (id, blk): the pattern_fill of the peer `id`, so the
 *             receiver knows what every sender put in every block;
 *   SEG_RED   the reduction, in a given order of contributors, of value streams;
 *   SEG_UNDEF bytes the standard leaves undefined (not compared).
 * Everything in a buffer that no segment covers (the gaps between v/w blocks, the holes of
 * derived types) is filled with gap_fill and must keep its value; SLACK poisoned bytes follow
 * the used span and must stay poison; bytes a collective writes start as poison. Send buffers
 * must come back unchanged.
 *
 * case_alloc / case_fill / case_make_freed / coll_start / case_check / case_free run one case;
 * case_check compares the receive buffer with the expected image (a failure names the case)
 * and records it in a trace, so a run on device buffers is compared byte for byte with the same
 * run on host buffers (trace_compare). Bytes of a reduction's result that fall in the holes of
 * a struct type are compared with the host run only.
 *
 * Reductions use integer-valued data (MPI_INT, MPI_DOUBLE: |v| <= 8191, so sums and products
 * of up to four values are exact in any order) and two user-defined ops: a NON-commutative
 * composition of affine maps x -> a*x+b (mod 2^32) on a contiguous 2 x uint32 type, and a
 * commutative lexicographic max over a struct {int32 key; (hole); double val} type. The
 * numeric value kinds VT_I8 ... VT_F64 and VT_2INT (with a range flag: see VT_R_SUM) give
 * every C integer and floating type its own values, exact in any order too, for the predefined
 * ops including the bitwise, logical and MINLOC/MAXLOC ones (coll_nccl.c).
 *
 * coll_quirk() lists the bugs of the plain MPIs (seen on host buffers without the shim) that
 * some cases would hit; tests leave those cases out with a note naming them.
 * Debugging: COLL_ONLY=text runs only the cases whose label contains text; COLL_DEBUG=1 prints
 * a note per call (blocking calls with their time). */

#define MAXP 16
#define MAXSEG (4 * MAXP + 8)
#define SLACK 24

/* ------------------------------------------------------------------------------------------ */
/* test types: an MPI datatype plus the byte layout of one element                            */

enum { VT_BYTES, VT_INT, VT_DOUBLE, VT_AFFINE, VT_MAXS };
/* Numeric value kinds: the C types int8_t ... double, and VT_2INT, the {int val; int loc} pair
 * of MPI_2INT (MINLOC/MAXLOC). OR one range flag in to pick values that no reduction of up to 4
 * contributors overflows or rounds:
 *   (none)      the whole range of the type (MIN, MAX, bitwise and logical ops; floats: as SUM)
 *   VT_R_SUM    |v| < max/4 (sums of up to 4 values)
 *   VT_R_PROD   integers -3..3 (unsigned 0..3), floats k/4 with |k| <= 12 (products of 4)
 * About one value in 16 is zero; float values are multiples of 1/4 (exact in any order). */
enum { VT_I8 = 16, VT_U8, VT_I16, VT_U16, VT_I32, VT_U32, VT_I64, VT_U64, VT_F32, VT_F64, VT_2INT };
#define VT_R_SUM 0x100
#define VT_R_PROD 0x200
#define VT_BASE(vt) ((vt) & 0xff)
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_BXOR, OP_AFFINE, OP_MAXS, OP_NONE, OP_BAND, OP_BOR,
       OP_LAND, OP_LOR, OP_LXOR, OP_MINLOC, OP_MAXLOC, OP_USUM, OP_N };
static const char *op_name_tab[OP_N] = {"SUM", "PROD", "MAX", "MIN", "BXOR", "user-affine(noncommutative)",
                                        "user-maxstruct", "-", "BAND", "BOR", "LAND", "LOR", "LXOR",
                                        "MINLOC", "MAXLOC", "user-sum(commutative)"};

struct ttype {
    MPI_Datatype dt;
    const char *name;
    int vt;          /* value kind when used in a reduction */
    size_t size;     /* data bytes of one element */
    MPI_Aint extent; /* lb is 0 for every test type */
    int nseg;
    size_t seg_off[4], seg_len[4]; /* the data bytes of one element */
};

static struct ttype TT_BYTE, TT_INT, TT_DOUBLE, TT_VEC, TT_RESIZED, TT_AFFINE, TT_MAXS;
static MPI_Op t_user_op[OP_N];

struct maxs_elem {
    int32_t key;
    int32_t hole;
    double val;
};

T_UNUSED static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const uint32_t *a = (const uint32_t *)in;
    uint32_t *b = (uint32_t *)inout;
    for (int i = 0; i < *len; i++) { /* inout = in o inout */
        uint32_t a1 = a[2 * i], b1 = a[2 * i + 1], a2 = b[2 * i], b2 = b[2 * i + 1];
        b[2 * i] = a1 * a2;
        b[2 * i + 1] = a1 * b2 + b1;
    }
}

T_UNUSED static void maxs_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const struct maxs_elem *a = (const struct maxs_elem *)in;
    struct maxs_elem *b = (struct maxs_elem *)inout;
    for (int i = 0; i < *len; i++)
        if (a[i].val > b[i].val || (a[i].val == b[i].val && a[i].key > b[i].key)) {
            b[i].key = a[i].key; /* the hole is left alone */
            b[i].val = a[i].val;
        }
}

static void tt_basic(struct ttype *t, MPI_Datatype dt, const char *name, int vt)
{
    MPI_Aint lb = 0;
    memset(t, 0, sizeof *t);
    t->dt = dt;
    t->name = name;
    t->vt = vt;
    t->size = type_size(dt);
    MPI_Type_get_extent(dt, &lb, &t->extent);
    t->nseg = 1;
    t->seg_off[0] = 0;
    t->seg_len[0] = t->size;
}

/* Create the derived test types and the user ops. */
T_UNUSED static void coll_types_init(void)
{
    tt_basic(&TT_BYTE, MPI_BYTE, "MPI_BYTE", VT_BYTES);
    tt_basic(&TT_INT, MPI_INT, "MPI_INT", VT_INT);
    tt_basic(&TT_DOUBLE, MPI_DOUBLE, "MPI_DOUBLE", VT_DOUBLE);

    /* vector: 3 blocks of 2 ints, stride 3 ints: data at 0..8, 12..20, 24..32; holes 8..12 and
     * 20..24; extent 32, size 24 (= 6 ints) */
    MPI_Datatype v;
    MPI_CHECK(MPI_Type_vector(3, 2, 3, MPI_INT, &v));
    MPI_CHECK(MPI_Type_commit(&v));
    memset(&TT_VEC, 0, sizeof TT_VEC);
    TT_VEC.dt = v;
    TT_VEC.name = "vector(3x2 int, stride 3)";
    TT_VEC.vt = VT_BYTES;
    TT_VEC.size = 24;
    TT_VEC.extent = 32;
    TT_VEC.nseg = 3;
    for (int i = 0; i < 3; i++) TT_VEC.seg_off[i] = 12 * (size_t)i, TT_VEC.seg_len[i] = 8;

    /* resized: 3 contiguous ints with extent 16 (a 4-byte hole after every element) */
    MPI_Datatype c3, r;
    MPI_CHECK(MPI_Type_contiguous(3, MPI_INT, &c3));
    MPI_CHECK(MPI_Type_create_resized(c3, 0, 16, &r));
    MPI_CHECK(MPI_Type_commit(&r));
    MPI_Type_free(&c3);
    memset(&TT_RESIZED, 0, sizeof TT_RESIZED);
    TT_RESIZED.dt = r;
    TT_RESIZED.name = "resized(3 int, extent 16)";
    TT_RESIZED.vt = VT_BYTES;
    TT_RESIZED.size = 12;
    TT_RESIZED.extent = 16;
    TT_RESIZED.nseg = 1;
    TT_RESIZED.seg_len[0] = 12;

    MPI_Datatype a;
    MPI_CHECK(MPI_Type_contiguous(2, MPI_UINT32_T, &a));
    MPI_CHECK(MPI_Type_commit(&a));
    tt_basic(&TT_AFFINE, a, "affine(2 x uint32)", VT_AFFINE);

    MPI_Datatype s, types[2] = {MPI_INT32_T, MPI_DOUBLE};
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(struct maxs_elem, key), offsetof(struct maxs_elem, val)};
    MPI_Datatype s0;
    MPI_CHECK(MPI_Type_create_struct(2, bl, disp, types, &s0));
    MPI_CHECK(MPI_Type_create_resized(s0, 0, (MPI_Aint)sizeof(struct maxs_elem), &s));
    MPI_CHECK(MPI_Type_commit(&s));
    MPI_Type_free(&s0);
    memset(&TT_MAXS, 0, sizeof TT_MAXS);
    TT_MAXS.dt = s;
    TT_MAXS.name = "struct{int32 key; hole; double val}";
    TT_MAXS.vt = VT_MAXS;
    TT_MAXS.size = 12;
    TT_MAXS.extent = (MPI_Aint)sizeof(struct maxs_elem);
    TT_MAXS.nseg = 2;
    TT_MAXS.seg_off[0] = 0, TT_MAXS.seg_len[0] = 4;
    TT_MAXS.seg_off[1] = 8, TT_MAXS.seg_len[1] = 8;

    MPI_CHECK(MPI_Op_create(affine_fn, 0, &t_user_op[OP_AFFINE]));
    MPI_CHECK(MPI_Op_create(maxs_fn, 1, &t_user_op[OP_MAXS]));
}

T_UNUSED static void coll_types_free(void)
{
    MPI_Type_free(&TT_VEC.dt);
    MPI_Type_free(&TT_RESIZED.dt);
    MPI_Type_free(&TT_AFFINE.dt);
    MPI_Type_free(&TT_MAXS.dt);
    MPI_Op_free(&t_user_op[OP_AFFINE]);
    MPI_Op_free(&t_user_op[OP_MAXS]);
}

T_UNUSED static MPI_Op op_handle(int opid)
{
    switch (opid) {
    case OP_SUM: return MPI_SUM;
    case OP_PROD: return MPI_PROD;
    case OP_MAX: return MPI_MAX;
    case OP_MIN: return MPI_MIN;
    case OP_BXOR: return MPI_BXOR;
    case OP_BAND: return MPI_BAND;
    case OP_BOR: return MPI_BOR;
    case OP_LAND: return MPI_LAND;
    case OP_LOR: return MPI_LOR;
    case OP_LXOR: return MPI_LXOR;
    case OP_MINLOC: return MPI_MINLOC;
    case OP_MAXLOC: return MPI_MAXLOC;
    case OP_AFFINE:
    case OP_MAXS:
    case OP_USUM: return t_user_op[opid]; /* OP_USUM: created by the test that uses it */
    }
    return MPI_OP_NULL;
}

T_UNUSED static int have_sym(const char *name) { return dlsym(RTLD_DEFAULT, name) != NULL; }

static int t_lib_has(const char *what)
{
    char full[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    full[0] = 0;
    MPI_Get_library_version(full, &len);
    full[MPI_MAX_LIBRARY_VERSION_STRING] = 0;
    return strstr(full, what) != NULL;
}
T_UNUSED static int lib_is_ompi(void) { return t_lib_has("Open MPI"); }
T_UNUSED static int lib_is_mpich40(void) { return t_lib_has("MPICH Version:") && t_lib_has("4.0."); }

/* MPICH 4.0.x (Debian's 4.0.2): MPI_Reduce with MPI_IN_PLACE at a root other than 0 copies from
 * MPI_IN_PLACE (segfault at address -1, plain MPI, host buffers) once the message is large
 * enough for the reduce-scatter/gather algorithm. Tests then use root 0 for in-place Reduce. */
T_UNUSED static int quirk_mpich40_reduce_inplace(void)
{
    static int q = -1;
    if (q < 0) {
        q = lib_is_mpich40();
        if (q && t_rank == 0)
            note("MPICH 4.0: in-place MPI_Reduce only at root 0 (its in-place Reduce at another "
                 "root segfaults on host buffers)");
    }
    return q;
}

/* ------------------------------------------------------------------------------------------ */
/* data streams                                                                               */

/* numeric kinds: bytes of one value, signed, floating */
static int vt_num(int vt, int *is_signed, int *is_float)
{
    static const signed char w[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8};
    int b = VT_BASE(vt);
    if (b < VT_I8 || b > VT_2INT) return 0;
    if (is_signed) *is_signed = b == VT_I8 || b == VT_I16 || b == VT_I32 || b == VT_I64;
    if (is_float) *is_float = b == VT_F32 || b == VT_F64;
    return w[b - VT_I8];
}

/* the first bytes / size values of numeric stream (id, s) (see VT_R_SUM) */
static void num_gen(unsigned char *out, int vt, int id, int s, size_t bytes)
{
    int sg = 0, fl = 0, es = vt_num(vt, &sg, &fl), b = VT_BASE(vt);
    uint64_t k = t_mix64(((uint64_t)(uint32_t)id << 32) ^ (uint32_t)s ^ (0x4E554Dull << 40));
    for (size_t e = 0; e < bytes / (size_t)es; e++) {
        uint64_t h = t_mix64(k + e);
        int zero = ((h >> 52) & 0xf) == 0;
        unsigned char *o = out + e * (size_t)es;
        if (b == VT_2INT) {
            int32_t v[2] = {(int32_t)(h % 9) - 4, (int32_t)((h >> 32) % 2001) - 1000}; /* ties */
            memcpy(o, v, 8);
        } else if (fl) {
            int64_t q = (vt & VT_R_PROD) ? (int64_t)(h % 25) - 12 : (int64_t)h >> (b == VT_F32 ? 42 : 13);
            if (zero) q = 0;
            if (b == VT_F32) {
                float f = (float)q / 4.0f;
                memcpy(o, &f, 4);
            } else {
                double d = (double)q / 4.0;
                memcpy(o, &d, 8);
            }
        } else {
            int w = 8 * es;
            uint64_t raw = h;
            if (vt & VT_R_PROD) raw = sg ? (uint64_t)((int64_t)(h % 7) - 3) : h % 4;
            else if (vt & VT_R_SUM) raw = sg ? (uint64_t)((int64_t)h >> (66 - w)) : h >> (66 - w);
            if (zero) raw = 0;
            memcpy(o, &raw, (size_t)es); /* the low bytes (little-endian) */
        }
    }
}

/* acc = acc op b on numeric values; integers wrap as in two's complement */
static void num_combine(int vt, int opid, unsigned char *acc, const unsigned char *bb, size_t count)
{
    int sg = 0, fl = 0, es = vt_num(vt, &sg, &fl), b = VT_BASE(vt);
    if (opid == OP_USUM) opid = OP_SUM;
    for (size_t e = 0; e < count; e++) {
        unsigned char *x = acc + e * (size_t)es;
        const unsigned char *y = bb + e * (size_t)es;
        if (b == VT_2INT) {
            int32_t p[2], q[2];
            memcpy(p, x, 8);
            memcpy(q, y, 8);
            if (opid != OP_MINLOC && opid != OP_MAXLOC) DIE("op %s on a pair type", op_name_tab[opid]);
            int better = opid == OP_MINLOC ? q[0] < p[0] : q[0] > p[0];
            if (better) p[0] = q[0], p[1] = q[1];
            else if (q[0] == p[0] && q[1] < p[1]) p[1] = q[1];
            memcpy(x, p, 8);
        } else if (fl) {
            double p, q, r = 0;
            if (b == VT_F32) {
                float pf, qf;
                memcpy(&pf, x, 4);
                memcpy(&qf, y, 4);
                p = pf, q = qf;
            } else {
                memcpy(&p, x, 8);
                memcpy(&q, y, 8);
            }
            switch (opid) {
            case OP_SUM: r = p + q; break;
            case OP_PROD: r = p * q; break;
            case OP_MAX: r = p > q ? p : q; break;
            case OP_MIN: r = p < q ? p : q; break;
            default: DIE("op %s on a floating type", op_name_tab[opid]);
            }
            if (b == VT_F32) {
                float rf = (float)r;
                memcpy(x, &rf, 4);
            } else {
                memcpy(x, &r, 8);
            }
        } else {
            uint64_t p = 0, q = 0, r = 0;
            memcpy(&p, x, (size_t)es);
            memcpy(&q, y, (size_t)es);
            int64_t ps = (int64_t)p, qs = (int64_t)q;
            if (sg && es < 8) { /* sign-extend */
                int sh = 64 - 8 * es;
                ps = (int64_t)(p << sh) >> sh;
                qs = (int64_t)(q << sh) >> sh;
            }
            switch (opid) {
            case OP_SUM: r = p + q; break;
            case OP_PROD: r = p * q; break;
            case OP_MAX: r = sg ? (ps > qs ? p : q) : (p > q ? p : q); break;
            case OP_MIN: r = sg ? (ps < qs ? p : q) : (p < q ? p : q); break;
            case OP_BAND: r = p & q; break;
            case OP_BOR: r = p | q; break;
            case OP_BXOR: r = p ^ q; break;
            case OP_LAND: r = p && q; break;
            case OP_LOR: r = p || q; break;
            case OP_LXOR: r = !p != !q; break;
            default: DIE("op %s on an integer type", op_name_tab[opid]);
            }
            memcpy(x, &r, (size_t)es);
        }
    }
}

static size_t vt_esize(int vt)
{
    if (vt_num(vt, NULL, NULL)) return (size_t)vt_num(vt, NULL, NULL);
    switch (vt) {
    case VT_INT: return 4;
    case VT_DOUBLE: return 8;
    case VT_AFFINE: return 8;
    case VT_MAXS: return 12; /* packed: key, val */
    }
    return 1;
}

/* The first `bytes` bytes of stream (id, seed, blk). VT_BYTES: the pattern. Value kinds: packed
 * elements with integer values |v| <= 8191, never zero. */
static void stream_gen(unsigned char *out, int vt, int id, int seed, int blk, size_t bytes)
{
    int s = seed * 64 + blk;
    if (vt_num(vt, NULL, NULL)) {
        num_gen(out, vt, id, s, bytes);
        return;
    }
    if (vt == VT_BYTES) {
        pattern_fill(out, bytes, id, s);
        return;
    }
    size_t es = vt_esize(vt), ne = bytes / es;
    unsigned char *pb = (unsigned char *)xmalloc(4 * ne + 4);
    pattern_fill(pb, 4 * ne, id, s);
    for (size_t e = 0; e < ne; e++) {
        int32_t v0 = ((int32_t)pb[4 * e] - 64) * 128 + pb[4 * e + 1];
        int32_t v1 = ((int32_t)pb[4 * e + 2] - 64) * 128 + pb[4 * e + 3];
        unsigned char *o = out + e * es;
        switch (vt) {
        case VT_INT: memcpy(o, &v0, 4); break;
        case VT_DOUBLE: {
            double d = (double)v0;
            memcpy(o, &d, 8);
            break;
        }
        case VT_AFFINE: {
            uint32_t a = 2u * (uint32_t)v0 + 1u, b = (uint32_t)v1;
            memcpy(o, &a, 4);
            memcpy(o + 4, &b, 4);
            break;
        }
        case VT_MAXS: {
            double val = (double)(v1 % 50); /* ties happen: broken by key */
            memcpy(o, &v0, 4);
            memcpy(o + 4, &val, 8);
            break;
        }
        }
    }
    free(pb);
}

/* acc = acc op b, elementwise on packed value streams (acc is the earlier operand). */
static void elem_combine(int vt, int opid, unsigned char *acc, const unsigned char *b, size_t count)
{
    if (vt_num(vt, NULL, NULL)) {
        num_combine(vt, opid, acc, b, count);
        return;
    }
    size_t es = vt_esize(vt);
    for (size_t e = 0; e < count; e++) {
        unsigned char *x = acc + e * es;
        const unsigned char *y = b + e * es;
        if (vt == VT_INT) {
            int32_t p, q, r = 0;
            memcpy(&p, x, 4);
            memcpy(&q, y, 4);
            switch (opid) {
            case OP_SUM: r = (int32_t)((uint32_t)p + (uint32_t)q); break;
            case OP_PROD: r = (int32_t)((uint32_t)p * (uint32_t)q); break;
            case OP_MAX: r = p > q ? p : q; break;
            case OP_MIN: r = p < q ? p : q; break;
            case OP_BXOR: r = p ^ q; break;
            default: DIE("op %d on MPI_INT", opid);
            }
            memcpy(x, &r, 4);
        } else if (vt == VT_DOUBLE) {
            num_combine(VT_F64, opid, x, y, 1);
        } else if (vt == VT_AFFINE) {
            uint32_t a1, b1, a2, b2;
            memcpy(&a1, x, 4);
            memcpy(&b1, x + 4, 4);
            memcpy(&a2, y, 4);
            memcpy(&b2, y + 4, 4);
            uint32_t ra = a1 * a2, rb = a1 * b2 + b1;
            memcpy(x, &ra, 4);
            memcpy(x + 4, &rb, 4);
        } else if (vt == VT_MAXS) {
            int32_t k1, k2;
            double v1, v2;
            memcpy(&k1, x, 4);
            memcpy(&v1, x + 4, 8);
            memcpy(&k2, y, 4);
            memcpy(&v2, y + 4, 8);
            if (v2 > v1 || (v2 == v1 && k2 > k1)) memcpy(x, y, 12);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* buffer layouts                                                                             */

enum { SEG_DATA, SEG_RED, SEG_UNDEF };
struct seg {
    int kind;
    size_t off; /* bytes */
    const struct ttype *t;
    int count;
    int id, blk;  /* SEG_DATA: stream (id, blk), bytes [sofs, sofs + count * t->size) */
    size_t sofs;
    int nred;     /* SEG_RED: elements [reofs, reofs + count) of streams (red_id, red_blk)... */
    int red_id[MAXP + 1], red_blk[MAXP + 1];
    size_t reofs;
};
struct side {
    int nseg;
    struct seg seg[MAXSEG];
};

static struct seg *side_add(struct side *s, int kind, size_t off, const struct ttype *t, int count)
{
    if (s->nseg >= MAXSEG) DIE("too many segments");
    struct seg *g = &s->seg[s->nseg++];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->off = off;
    g->t = t;
    g->count = count;
    return g;
}
T_UNUSED static void seg_data(struct side *s, size_t off, const struct ttype *t, int count, int id,
                              int blk, size_t sofs)
{
    struct seg *g = side_add(s, SEG_DATA, off, t, count);
    g->id = id;
    g->blk = blk;
    g->sofs = sofs;
}
/* reduction over streams (ids[k], blk) for k = 0..n-1 in this order */
T_UNUSED static struct seg *seg_red(struct side *s, size_t off, const struct ttype *t, int count,
                                    size_t reofs, int n, const int *ids, int blk)
{
    struct seg *g = side_add(s, SEG_RED, off, t, count);
    g->nred = n;
    for (int k = 0; k < n; k++) g->red_id[k] = ids[k], g->red_blk[k] = blk;
    g->reofs = reofs;
    return g;
}
T_UNUSED static void seg_undef(struct side *s, size_t off, const struct ttype *t, int count)
{
    side_add(s, SEG_UNDEF, off, t, count);
}

/* write the packed stream into count elements of t at img + off */
static void lay_write(unsigned char *img, size_t off, const struct ttype *t, int count,
                      const unsigned char *stream)
{
    for (int e = 0; e < count; e++) {
        unsigned char *base = img + off + (size_t)e * (size_t)t->extent;
        for (int s = 0; s < t->nseg; s++) {
            memcpy(base + t->seg_off[s], stream, t->seg_len[s]);
            stream += t->seg_len[s];
        }
    }
}
/* set the data bytes of count elements of t at img + off to v */
static void lay_set(unsigned char *img, size_t off, const struct ttype *t, int count, unsigned char v)
{
    for (int e = 0; e < count; e++) {
        unsigned char *base = img + off + (size_t)e * (size_t)t->extent;
        for (int s = 0; s < t->nseg; s++) memset(base + t->seg_off[s], v, t->seg_len[s]);
    }
}
/* set the hole bytes (inside each element's extent) of count elements of t to v */
static void lay_holes(unsigned char *img, size_t off, const struct ttype *t, int count, unsigned char v)
{
    if ((MPI_Aint)t->size == t->extent) return;
    unsigned char *tmp = (unsigned char *)xmalloc((size_t)t->extent);
    for (int e = 0; e < count; e++) {
        unsigned char *base = img + off + (size_t)e * (size_t)t->extent;
        memcpy(tmp, base, (size_t)t->extent);
        memset(base, v, (size_t)t->extent);
        for (int s = 0; s < t->nseg; s++)
            memcpy(base + t->seg_off[s], tmp + t->seg_off[s], t->seg_len[s]);
    }
    free(tmp);
}

static void seg_write_data(unsigned char *img, const struct seg *g, int vt, int seed)
{
    size_t bytes = (size_t)g->count * g->t->size;
    unsigned char *st = (unsigned char *)xmalloc(g->sofs + bytes + 1);
    stream_gen(st, vt, g->id, seed, g->blk, g->sofs + bytes);
    lay_write(img, g->off, g->t, g->count, st + g->sofs);
    free(st);
}

static void seg_write_red(unsigned char *img, const struct seg *g, int vt, int opid, int seed)
{
    size_t es = vt_esize(vt);
    if (es != g->t->size) DIE("reduction type %s has %zu data bytes, values %zu", g->t->name, g->t->size, es);
    size_t total = (g->reofs + (size_t)g->count) * es;
    unsigned char *acc = (unsigned char *)xmalloc(total + 1), *tmp = (unsigned char *)xmalloc(total + 1);
    stream_gen(acc, vt, g->red_id[0], seed, g->red_blk[0], total);
    for (int k = 1; k < g->nred; k++) {
        stream_gen(tmp, vt, g->red_id[k], seed, g->red_blk[k], total);
        elem_combine(vt, opid, acc + g->reofs * es, tmp + g->reofs * es, (size_t)g->count);
    }
    lay_write(img, g->off, g->t, g->count, acc + g->reofs * es);
    free(acc);
    free(tmp);
}

/* Initial image (span + SLACK bytes): gaps everywhere, poison where `out` will write and in
 * the slack, the segments of `in` written. With exp/mask: the expected image after the call,
 * and the mask (1: compare with expected and with the host run, 2: with the host run only,
 * 0: undefined). */
static void build_image(unsigned char *img, size_t span, const struct side *in,
                        const struct side *out, int vt, int opid, int seed, unsigned char *exp,
                        unsigned char *mask)
{
    gap_fill(img, span, seed);
    poison_fill(img + span, SLACK);
    if (out)
        for (int i = 0; i < out->nseg; i++)
            lay_set(img, out->seg[i].off, out->seg[i].t, out->seg[i].count, POISON_BYTE);
    if (in)
        for (int i = 0; i < in->nseg; i++) seg_write_data(img, &in->seg[i], vt, seed);
    if (!exp) return;
    memcpy(exp, img, span + SLACK);
    memset(mask, 1, span + SLACK);
    if (!out) return;
    for (int i = 0; i < out->nseg; i++) {
        const struct seg *g = &out->seg[i];
        if (g->kind == SEG_DATA) {
            seg_write_data(exp, g, vt, seed);
        } else if (g->kind == SEG_RED) {
            seg_write_red(exp, g, vt, opid, seed);
            lay_holes(mask, g->off, g->t, g->count, 2);
        } else {
            lay_set(mask, g->off, g->t, g->count, 0);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* cases                                                                                      */

enum {
    C_BCAST, C_REDUCE, C_ALLREDUCE, C_REDUCE_LOCAL, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV,
    C_ALLGATHER, C_ALLGATHERV, C_ALLTOALL, C_ALLTOALLV, C_ALLTOALLW, C_REDUCE_SCATTER_BLOCK,
    C_REDUCE_SCATTER, C_SCAN, C_EXSCAN,
    /* intercommunicator and neighborhood forms are planned by their own tests */
    C_NEIGHBOR_ALLGATHER, C_NEIGHBOR_ALLGATHERV, C_NEIGHBOR_ALLTOALL, C_NEIGHBOR_ALLTOALLV,
    C_NEIGHBOR_ALLTOALLW, C_NCOLL
};
static const char *coll_name_tab[C_NCOLL] = {
    "Bcast", "Reduce", "Allreduce", "Reduce_local", "Gather", "Gatherv", "Scatter", "Scatterv",
    "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce_scatter_block",
    "Reduce_scatter", "Scan", "Exscan", "Neighbor_allgather", "Neighbor_allgatherv",
    "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw"};

T_UNUSED static int coll_is_reduction(int coll)
{
    return coll == C_REDUCE || coll == C_ALLREDUCE || coll == C_REDUCE_LOCAL ||
           coll == C_REDUCE_SCATTER_BLOCK || coll == C_REDUCE_SCATTER || coll == C_SCAN ||
           coll == C_EXSCAN;
}
T_UNUSED static int coll_has_root(int coll)
{
    return coll == C_BCAST || coll == C_REDUCE || coll == C_GATHER || coll == C_GATHERV ||
           coll == C_SCATTER || coll == C_SCATTERV;
}
/* MPI_IN_PLACE allowed (at the root for rooted ones) */
T_UNUSED static int coll_allows_inplace(int coll)
{
    return coll != C_BCAST && coll != C_REDUCE_LOCAL && coll < C_NEIGHBOR_ALLGATHER;
}

enum { INS_BUF, INS_NULL, INS_FREED };              /* how insignificant buffers are passed */
enum { ARG_BUF, ARG_INPLACE, ARG_NULL, ARG_FREED, ARG_NONE }; /* what a buffer argument is */
enum { M_BLOCK, M_NB, M_INIT, M_BLOCK_C, M_NB_C, M_INIT_C };

struct ccase {
    /* description (set by the test) */
    int coll, opid, n, root, inplace, insig, seed;
    const struct ttype *st, *rt; /* send and receive types (reductions: the value type) */
    MPI_Comm comm;
    int inter;                   /* intercommunicator: root is MPI_ROOT / MPI_PROC_NULL / rank */
    int rgroup;                  /* intercommunicator: the group (0/1) that holds the root */
    int sk, rk;                  /* memory kinds of the send and the receive buffer */
    char label[240];
    /* the plan */
    int vt, P, me;
    int scount, rcount;
    MPI_Datatype sdt, rdt;
    int sc[MAXP], sd[MAXP], rc[MAXP], rd[MAXP];
    MPI_Datatype sty[MAXP], rty[MAXP];
    /* arrays handed to nonblocking / persistent calls must live until completion / free:
     * large-count copies and MPI_Aint byte displacements are kept here */
    MPI_Count scc[MAXP], rcc[MAXP];
    MPI_Aint sda[MAXP], rda[MAXP];
    int s_arrays_null, r_arrays_null;
    int sarg, rarg; /* ARG_* */
    int s_kind, r_kind;
    size_t sspan, rspan;
    struct side sin, rin, rout;
    int call_root; /* root argument passed (MPI_ROOT/MPI_PROC_NULL for intercomms) */
    int host_only; /* the receive buffer is compared with the host run only (an MPI that
                    * delivers what the standard does not say: see the test) */
    /* run time */
    void *sbuf, *rbuf, *freed;
    unsigned char *simg, *rimg, *rexp, *rmask;
    int cur_seed;
    MPI_Request req;
};

static const char *t_case_suffix = NULL; /* appended to the labels made while it is set */
T_UNUSED static void case_label(struct ccase *c)
{
    char extra[120] = "";
    if (coll_is_reduction(c->coll))
        snprintf(extra, sizeof extra, " op %s", op_name_tab[c->opid]);
    snprintf(c->label, sizeof c->label, "%s%s %s->%s count %d%s%s%s%s", c->inter ? "inter " : "",
             coll_name_tab[c->coll], c->coll == C_ALLTOALLW ? "per-peer types (int/vector/resized)" : c->st->name,
             c->coll == C_ALLTOALLW ? "same" : c->rt->name, c->n, extra,
             coll_has_root(c->coll) ? (c->root == 0 ? " root 0" : " root last") : "",
             c->inplace ? " IN_PLACE" : "",
             c->insig == INS_NULL ? " insignificant=NULL"
                                  : (c->insig == INS_FREED ? " insignificant=freed" : ""));
    if (t_case_suffix) {
        size_t l = strlen(c->label);
        snprintf(c->label + l, sizeof c->label - l, "%s", t_case_suffix);
    }
}

/* element counts of v/w variants: block i -> j. Symmetric (in-place Alltoallv/w needs that),
 * zero for some pairs. */
T_UNUSED static int vcnt(int i, int j, int n)
{
    return ((i + j) % 4 == 3) ? 0 : n + ((i + j) % 3) * (n / 2 + 1);
}
T_UNUSED static int vcnt1(int i, int n) { return vcnt(i, 1, n); }
/* Reduce_scatter recvcounts: uneven, zero for rank 2, rank 0's the largest. (MPICH 4.0.2 and
 * 5.0.2 fail an in-place Reduce_scatter whose recvcounts[r] exceeds the sum of the counts
 * before r on host buffers: "memcpy argument memory ranges overlap" assertion.) */
T_UNUSED static int rscnt(int j, int n)
{
    return j == 0 ? n + 2 * (n / 2 + 1) : (j % 4 == 2 ? 0 : n + (j % 2) * (n / 2 + 1));
}

/* Displacements (in units) of P blocks of cnt[k] units laid out in REVERSE order with a gap of
 * 1 + k % 3 units before block k and one unit after the last; returns the span in units. */
T_UNUSED static int gapped_displs(int P, const int *cnt, int *displ)
{
    int pos = 0;
    for (int k = P - 1; k >= 0; k--) {
        pos += 1 + k % 3;
        displ[k] = pos;
        pos += cnt[k];
    }
    return pos + 1;
}
/* in-order, no gaps */
T_UNUSED static int packed_displs(int P, const int *cnt, int *displ)
{
    int pos = 0;
    for (int k = 0; k < P; k++) displ[k] = pos, pos += cnt[k];
    return pos;
}

static int conv_count(int n, const struct ttype *from, const struct ttype *to)
{
    size_t bytes = (size_t)n * from->size;
    if (bytes % to->size) DIE("count %d of %s is no whole number of %s", n, from->name, to->name);
    return (int)(bytes / to->size);
}

/* Alltoallw: the type used for block i -> j on the send / receive side (all carry 6 ints per
 * unit of 24 bytes) */
T_UNUSED static const struct ttype *w_type(int i, int j, int recv)
{
    int k = recv ? (j + 2 * i) % 3 : (i + 2 * j) % 3;
    return k == 0 ? &TT_INT : (k == 1 ? &TT_VEC : &TT_RESIZED);
}
static const struct ttype *w_tt_s[MAXP], *w_tt_r[MAXP]; /* filled by coll_plan for W */

/* Plan an intra-communicator collective for this rank. */
T_UNUSED static void coll_plan(struct ccase *c)
{
    MPI_Comm_size(c->comm, &c->P);
    MPI_Comm_rank(c->comm, &c->me);
    const int P = c->P, me = c->me, R = c->root, n = c->n;
    if (P > MAXP) DIE("communicator too large");
    const struct ttype *st = c->st, *rt = c->rt;
    c->vt = coll_is_reduction(c->coll) ? rt->vt : VT_BYTES;
    c->sdt = st->dt;
    c->rdt = rt->dt;
    c->sarg = ARG_BUF;
    c->rarg = ARG_BUF;
    c->s_kind = c->sk;
    c->r_kind = c->rk;
    c->sspan = c->rspan = 0;
    c->s_arrays_null = c->r_arrays_null = 0;
    c->call_root = R;
    memset(&c->sin, 0, sizeof c->sin);
    memset(&c->rin, 0, sizeof c->rin);
    memset(&c->rout, 0, sizeof c->rout);
    int ids[MAXP];
    for (int i = 0; i < P; i++) ids[i] = i;
    const int sn = conv_count(n, rt, st); /* send count matching n receive elements */
    const size_t sext = (size_t)st->extent, rext = (size_t)rt->extent;
    int ins = (c->insig == INS_NULL) ? ARG_NULL : (c->insig == INS_FREED ? ARG_FREED : ARG_BUF);
    int cnt[MAXP];

    switch (c->coll) {
    case C_BCAST:
        c->sarg = ARG_NONE;
        if (me == R) {
            c->r_kind = c->sk;
            c->rdt = st->dt;
            c->rcount = sn;
            c->rspan = (size_t)sn * sext;
            seg_data(&c->rin, 0, st, sn, R, 0, 0);
        } else {
            c->rcount = n;
            c->rspan = (size_t)n * rext;
            seg_data(&c->rout, 0, rt, n, R, 0, 0);
        }
        break;
    case C_REDUCE:
    case C_ALLREDUCE:
    case C_SCAN:
    case C_EXSCAN: {
        int isroot = c->coll != C_REDUCE || me == R;
        c->scount = c->rcount = n;
        c->sspan = (size_t)n * sext;
        c->rspan = (size_t)n * rext;
        if (c->inplace && isroot) {
            c->sarg = ARG_INPLACE;
            c->sspan = 0;
            seg_data(&c->rin, 0, rt, n, me, 0, 0);
        } else {
            seg_data(&c->sin, 0, st, n, me, 0, 0);
        }
        if (!isroot) {
            c->rarg = ins; /* Reduce, non-root: recvbuf insignificant (kept unchanged if real) */
        } else if (c->coll == C_SCAN) {
            seg_red(&c->rout, 0, rt, n, 0, me + 1, ids, 0);
        } else if (c->coll == C_EXSCAN) {
            if (me == 0) seg_undef(&c->rout, 0, rt, n);
            else seg_red(&c->rout, 0, rt, n, 0, me, ids, 0);
        } else {
            seg_red(&c->rout, 0, rt, n, 0, P, ids, 0);
        }
        break;
    }
    case C_REDUCE_LOCAL: {
        int pair[2] = {me, me};
        c->scount = c->rcount = n;
        c->sspan = (size_t)n * sext;
        c->rspan = (size_t)n * rext;
        seg_data(&c->sin, 0, st, n, me, 0, 0);
        seg_data(&c->rin, 0, rt, n, me, 1, 0);
        struct seg *g = seg_red(&c->rout, 0, rt, n, 0, 2, pair, 0);
        g->red_blk[1] = 1; /* inoutbuf = inbuf op inoutbuf */
        break;
    }
    case C_GATHER:
    case C_GATHERV:
    case C_ALLGATHER:
    case C_ALLGATHERV: {
        int v = c->coll == C_GATHERV || c->coll == C_ALLGATHERV;
        int isroot = c->coll == C_ALLGATHER || c->coll == C_ALLGATHERV || me == R;
        for (int j = 0; j < P; j++) cnt[j] = v ? vcnt1(j, n) : n;
        int span = v ? gapped_displs(P, cnt, c->rd) : packed_displs(P, cnt, c->rd);
        memcpy(c->rc, cnt, sizeof(int) * (size_t)P);
        c->rcount = n;
        c->scount = conv_count(cnt[me], rt, st);
        c->sspan = (size_t)c->scount * sext;
        if (c->inplace && isroot) {
            c->sarg = ARG_INPLACE;
            c->sspan = 0;
        } else {
            seg_data(&c->sin, 0, st, c->scount, me, 0, 0);
        }
        if (!isroot) {
            c->rarg = ins;
            c->rspan = (size_t)span * rext; /* a real insignificant buffer stays unchanged */
            if (v && c->insig == INS_NULL) c->r_arrays_null = 1;
            break;
        }
        c->rspan = (size_t)span * rext;
        for (int j = 0; j < P; j++) {
            size_t off = (size_t)c->rd[j] * rext;
            if (j == me && c->inplace) seg_data(&c->rin, off, rt, cnt[j], j, 0, 0);
            else seg_data(&c->rout, off, rt, cnt[j], j, 0, 0);
        }
        break;
    }
    case C_SCATTER:
    case C_SCATTERV: {
        int v = c->coll == C_SCATTERV;
        for (int j = 0; j < P; j++) cnt[j] = conv_count(v ? vcnt1(j, n) : n, rt, st);
        int span = v ? gapped_displs(P, cnt, c->sd) : packed_displs(P, cnt, c->sd);
        memcpy(c->sc, cnt, sizeof(int) * (size_t)P);
        c->scount = sn;
        c->rcount = v ? vcnt1(me, n) : n;
        c->sspan = (size_t)span * sext;
        if (me == R) {
            for (int j = 0; j < P; j++) seg_data(&c->sin, (size_t)c->sd[j] * sext, st, cnt[j], R, j, 0);
        } else {
            c->sarg = ins;
            if (v && c->insig == INS_NULL) c->s_arrays_null = 1;
        }
        if (me == R && c->inplace) {
            c->rarg = ARG_INPLACE;
        } else {
            c->rspan = (size_t)c->rcount * rext;
            seg_data(&c->rout, 0, rt, c->rcount, R, me, 0);
        }
        break;
    }
    case C_ALLTOALL:
    case C_ALLTOALLV: {
        int v = c->coll == C_ALLTOALLV;
        int scnt[MAXP], rcnt[MAXP];
        for (int j = 0; j < P; j++) {
            rcnt[j] = v ? vcnt(j, me, n) : n;
            scnt[j] = conv_count(v ? vcnt(me, j, n) : n, rt, st);
        }
        int sspan = v ? gapped_displs(P, scnt, c->sd) : packed_displs(P, scnt, c->sd);
        int rspan = v ? gapped_displs(P, rcnt, c->rd) : packed_displs(P, rcnt, c->rd);
        memcpy(c->sc, scnt, sizeof(int) * (size_t)P);
        memcpy(c->rc, rcnt, sizeof(int) * (size_t)P);
        c->scount = sn;
        c->rcount = n;
        c->rspan = (size_t)rspan * rext;
        if (c->inplace) {
            c->sarg = ARG_INPLACE;
            for (int j = 0; j < P; j++) seg_data(&c->rin, (size_t)c->rd[j] * rext, rt, rcnt[j], me, j, 0);
        } else {
            c->sspan = (size_t)sspan * sext;
            for (int j = 0; j < P; j++) seg_data(&c->sin, (size_t)c->sd[j] * sext, st, scnt[j], me, j, 0);
        }
        for (int j = 0; j < P; j++) seg_data(&c->rout, (size_t)c->rd[j] * rext, rt, rcnt[j], j, me, 0);
        break;
    }
    case C_ALLTOALLW: {
        /* units of 24 bytes (6 ints); byte displacements in reverse order with odd gaps */
        size_t spos = 0, rpos = 0;
        for (int j = P - 1; j >= 0; j--) {
            const struct ttype *ts = w_type(me, j, 0), *tr = w_type(j, me, 1);
            w_tt_s[j] = ts;
            w_tt_r[j] = tr;
            c->sty[j] = ts->dt;
            c->rty[j] = tr->dt;
            c->sc[j] = (int)((size_t)vcnt(me, j, n) * 24 / ts->size);
            c->rc[j] = (int)((size_t)vcnt(j, me, n) * 24 / tr->size);
            spos += 3 + 4 * (size_t)(j % 3);
            rpos += 5 + 4 * (size_t)(j % 2);
            c->sd[j] = (int)spos;
            c->rd[j] = (int)rpos;
            spos += (size_t)c->sc[j] * (size_t)ts->extent;
            rpos += (size_t)c->rc[j] * (size_t)tr->extent;
        }
        c->sspan = spos + 7;
        c->rspan = rpos + 3;
        if (c->inplace) {
            /* the data sent to j is taken from the receive layout of block j */
            c->sarg = ARG_INPLACE;
            c->sspan = 0;
            for (int j = 0; j < P; j++) seg_data(&c->rin, (size_t)c->rd[j], w_tt_r[j], c->rc[j], me, j, 0);
        } else {
            for (int j = 0; j < P; j++) seg_data(&c->sin, (size_t)c->sd[j], w_tt_s[j], c->sc[j], me, j, 0);
        }
        for (int j = 0; j < P; j++) seg_data(&c->rout, (size_t)c->rd[j], w_tt_r[j], c->rc[j], j, me, 0);
        break;
    }
    case C_REDUCE_SCATTER_BLOCK:
    case C_REDUCE_SCATTER: {
        int v = c->coll == C_REDUCE_SCATTER;
        for (int j = 0; j < P; j++) c->rc[j] = v ? rscnt(j, n) : n;
        int total = 0, mine = 0;
        for (int j = 0; j < P; j++) {
            if (j == me) mine = total;
            total += c->rc[j];
        }
        c->rcount = n;
        c->scount = total;
        if (c->inplace) {
            c->sarg = ARG_INPLACE;
            c->rspan = (size_t)total * rext;
            seg_data(&c->rin, 0, rt, total, me, 0, 0);
            seg_red(&c->rout, 0, rt, c->rc[me], (size_t)mine, P, ids, 0);
            seg_undef(&c->rout, (size_t)c->rc[me] * rext, rt, total - c->rc[me]);
        } else {
            c->sspan = (size_t)total * sext;
            seg_data(&c->sin, 0, st, total, me, 0, 0);
            c->rspan = (size_t)c->rc[me] * rext;
            seg_red(&c->rout, 0, rt, c->rc[me], (size_t)mine, P, ids, 0);
        }
        break;
    }
    default:
        DIE("coll_plan: collective %d is not an intra-communicator one", c->coll);
    }
    if (c->sarg != ARG_BUF) c->sspan = 0;
    if (c->rarg != ARG_BUF) c->rspan = 0;
}

/* Allocate the buffers of a planned case (never zero bytes: mem_alloc rounds up). */
T_UNUSED static void case_alloc(struct ccase *c)
{
    c->sbuf = c->rbuf = c->freed = NULL;
    c->simg = c->rimg = c->rexp = c->rmask = NULL;
    if (c->sarg == ARG_BUF) {
        c->sbuf = mem_alloc(c->s_kind, c->sspan + SLACK);
        c->simg = (unsigned char *)xmalloc(c->sspan + SLACK);
    }
    if (c->rarg == ARG_BUF) {
        c->rbuf = mem_alloc(c->r_kind, c->rspan + SLACK);
        c->rimg = (unsigned char *)xmalloc(c->rspan + SLACK);
        c->rexp = (unsigned char *)xmalloc(c->rspan + SLACK);
        c->rmask = (unsigned char *)xmalloc(c->rspan + SLACK);
    }
    c->req = MPI_REQUEST_NULL;
}

/* A pointer to freed device memory for insignificant arguments. Call after every allocation
 * of the batch (the stand-in driver reuses freed device addresses for later allocations). */
T_UNUSED static void case_make_freed(struct ccase *c)
{
    if (c->sarg == ARG_FREED || c->rarg == ARG_FREED) {
        c->freed = mem_alloc(MEM_DEVICE, 4096);
        mem_free(c->freed);
    }
}

/* Fill the buffers for a round with seed `seed`: send data, poisoned receive buffers, and the
 * expected receive image. */
T_UNUSED static void case_fill(struct ccase *c, int seed)
{
    c->cur_seed = seed;
    if (c->sbuf) {
        build_image(c->simg, c->sspan, &c->sin, NULL, c->vt, c->opid, seed, NULL, NULL);
        mem_put(c->sbuf, c->simg, c->sspan + SLACK);
    }
    if (c->rbuf) {
        build_image(c->rimg, c->rspan, &c->rin, &c->rout, c->vt, c->opid, seed, c->rexp, c->rmask);
        if (c->host_only)
            for (size_t i = 0; i < c->rspan + SLACK; i++)
                if (c->rmask[i] == 1) c->rmask[i] = 2;
        mem_put(c->rbuf, c->rimg, c->rspan + SLACK);
    }
}

static const void *case_sarg(struct ccase *c)
{
    switch (c->sarg) {
    case ARG_BUF: return c->sbuf;
    case ARG_INPLACE: return MPI_IN_PLACE;
    case ARG_FREED: return c->freed;
    }
    return NULL;
}
static void *case_rarg(struct ccase *c)
{
    switch (c->rarg) {
    case ARG_BUF: return c->rbuf;
    case ARG_INPLACE: return MPI_IN_PLACE;
    case ARG_FREED: return c->freed;
    }
    return NULL;
}

/* After completion: compare the receive buffer with the expected image, the send buffer with
 * what was put there, and record the receive buffer (masked) in the trace. `what` names the run. */
T_UNUSED static void case_check(struct ccase *c, struct trace *t, const char *what, int rc)
{
    char lab[300];
    snprintf(lab, sizeof lab, "%s seed %d", c->label, c->cur_seed);
    CHECK(rc == MPI_SUCCESS, "%s: %s: returned %d", what, lab, rc);
    if (c->rbuf) {
        size_t n = c->rspan + SLACK;
        unsigned char *got = mem_fetch(c->rbuf, n);
        unsigned char *g1 = (unsigned char *)xmalloc(n), *e1 = (unsigned char *)xmalloc(n);
        for (size_t i = 0; i < n; i++) {
            g1[i] = c->rmask[i] == 1 ? got[i] : 0;
            e1[i] = c->rmask[i] == 1 ? c->rexp[i] : 0;
            if (c->rmask[i] == 0) got[i] = 0;
        }
        check_bytes(g1, e1, n, "%s: %s: receive buffer (%zu used + %d slack bytes) vs expected",
                    what, lab, c->rspan, SLACK);
        trace_add(t, lab, got, n, NULL, MPI_DATATYPE_NULL, rc);
        free(got);
        free(g1);
        free(e1);
    } else {
        trace_add(t, lab, NULL, 0, NULL, MPI_DATATYPE_NULL, rc);
    }
    if (c->sbuf) {
        unsigned char *got = mem_fetch(c->sbuf, c->sspan + SLACK);
        check_bytes(got, c->simg, c->sspan + SLACK, "%s: %s: send buffer changed", what, lab);
        free(got);
    }
}

T_UNUSED static void case_free(struct ccase *c)
{
    mem_free(c->sbuf);
    mem_free(c->rbuf);
    free(c->simg);
    free(c->rimg);
    free(c->rexp);
    free(c->rmask);
    c->sbuf = c->rbuf = NULL;
    c->simg = c->rimg = c->rexp = c->rmask = NULL;
}

/* MPICH 4.0.2 and 5.0.2: MPI_Testall over persistent collective requests returns
 * MPI_ERR_IN_STATUS (every status MPI_SUCCESS) on host buffers, before and at completion. The
 * persistent tests then complete with an MPI_Test loop where they would use MPI_Testall. */
T_UNUSED static int quirk_mpich_testall_persistent(void)
{
    static int q = -1;
    if (q < 0) {
        q = t_lib_has("MPICH Version:");
        if (q && t_rank == 0)
            note("MPICH: persistent collectives completed by MPI_Test loops instead of MPI_Testall "
                 "(its MPI_Testall returns MPI_ERR_IN_STATUS for them)");
    }
    return q;
}

/* Bugs of the plain MPIs (host buffers, no shim) that a case would hit: returns why, or NULL.
 * A test leaves such a case out (with a note). */
T_UNUSED static const char *coll_quirk(const struct ccase *c, int mode)
{
    int P = 0;
    int nb = mode == M_NB || mode == M_NB_C;
    MPI_Comm_size(c->comm, &P);
    if (P == 1 && c->coll == C_ALLTOALLW && !c->inplace && !c->inter && lib_is_ompi())
        return "Open MPI's single-process MPI_Alltoallw (coll/self) scales the byte displacements "
               "by the type extents";
    if (P == 1 && c->coll == C_ALLGATHERV && !c->inplace && lib_is_mpich40() &&
        (mode != M_BLOCK || (c->rt != &TT_INT && c->rt != &TT_DOUBLE && c->rt != &TT_BYTE)))
        return "MPICH 4.0's single-process MPI_Allgatherv ignores the displacement for a derived "
               "receive type (MPI_Iallgatherv, MPI_Allgatherv_c for any type)";
    if ((nb || mode == M_INIT || mode == M_INIT_C) && c->inplace && P >= 4 && c->n > 100 &&
        (c->coll == C_ALLTOALLV || c->coll == C_ALLTOALLW) && lib_is_ompi())
        return "Open MPI's (libnbc) in-place MPI_Ialltoallv/w deliver wrong, varying bytes with 4 "
               "ranks and blocks of tens of KiB";
    if (nb && c->inter && c->coll == C_BCAST && c->root != 0 && t_lib_has("MPICH Version:"))
        return "MPICH's intercommunicator MPI_Ibcast from a root other than rank 0 delivers "
               "nothing";
    int init = mode == M_INIT || mode == M_INIT_C;
    if ((nb || init) && c->coll == C_ALLTOALLW && c->inplace && lib_is_mpich40())
        return "MPICH 4.0's in-place MPI_Ialltoallw / MPI_Alltoallw_init deliver wrong bytes";
    if (init && lib_is_mpich40() &&
        (c->coll == C_GATHER || c->coll == C_SCATTER || c->coll == C_ALLGATHER))
        return "MPICH 4.0's MPI_Gather_init / MPI_Scatter_init / MPI_Allgather_init deliver stale "
               "or no data when started again (or abort)";
    return NULL;
}

/* Keep a case (1) unless coll_quirk() rules it out for this form (`mode`) or, for debugging,
 * COLL_ONLY is set and not in the label. Sets the label. */
T_UNUSED static int case_keep(struct ccase *c, int mode)
{
    case_label(c);
    const char *only = getenv("COLL_ONLY");
    if (only && *only && !strstr(c->label, only)) return 0;
    const char *why = coll_quirk(c, mode);
    if (!why) return 1;
    if (t_rank == 0) note("left out: %s: %s", c->label, why);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* calls                                                                                      */

#if MPI_VERSION >= 4
#define HAVE_COLL_C 1 /* large-count _c forms declared */
#endif
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_COLL_INIT 1 /* persistent collectives declared (Open MPI 5 has them, says MPI 3.1) */
#endif

/* Issue the collective of an intra-communicator case: blocking, nonblocking (c->req),
 * persistent init (c->req, not started), or their large-count _c forms. */
T_UNUSED static int coll_start(struct ccase *c, int mode)
{
    const void *s = case_sarg(c);
    void *r = case_rarg(c);
    const int R = c->call_root;
    MPI_Comm cm = c->comm;
    MPI_Request *q = &c->req;
    MPI_Op op = op_handle(c->opid);
    MPI_Datatype sdt = c->sdt, rdt = c->rdt;
    const int *scp = c->s_arrays_null ? NULL : c->sc, *sdp = c->s_arrays_null ? NULL : c->sd;
    const int *rcp = c->r_arrays_null ? NULL : c->rc, *rdp = c->r_arrays_null ? NULL : c->rd;
    const MPI_Datatype *sty = c->sty, *rty = c->rty;
    const int sn = c->scount, rn = c->rcount;
    int n = c->n;
#ifdef HAVE_COLL_INIT
    MPI_Info inf = MPI_INFO_NULL;
#endif
#ifdef HAVE_COLL_C
    for (int i = 0; i < c->P && i < MAXP; i++)
        c->scc[i] = c->sc[i], c->rcc[i] = c->rc[i], c->sda[i] = c->sd[i], c->rda[i] = c->rd[i];
    const MPI_Count *sccp = c->s_arrays_null ? NULL : c->scc, *rccp = c->r_arrays_null ? NULL : c->rcc;
    const MPI_Aint *sdcp = c->s_arrays_null ? NULL : c->sda, *rdcp = c->r_arrays_null ? NULL : c->rda;
#endif
    if (c->coll == C_REDUCE_SCATTER_BLOCK) n = c->rcount;
    switch (mode) {
    case M_BLOCK:
        switch (c->coll) {
        case C_BCAST: return MPI_Bcast(r, rn, rdt, R, cm);
        case C_REDUCE: return MPI_Reduce(s, r, n, rdt, op, R, cm);
        case C_ALLREDUCE: return MPI_Allreduce(s, r, n, rdt, op, cm);
        case C_REDUCE_LOCAL: return MPI_Reduce_local(s, r, n, rdt, op);
        case C_GATHER: return MPI_Gather(s, sn, sdt, r, rn, rdt, R, cm);
        case C_GATHERV: return MPI_Gatherv(s, sn, sdt, r, rcp, rdp, rdt, R, cm);
        case C_SCATTER: return MPI_Scatter(s, sn, sdt, r, rn, rdt, R, cm);
        case C_SCATTERV: return MPI_Scatterv(s, scp, sdp, sdt, r, rn, rdt, R, cm);
        case C_ALLGATHER: return MPI_Allgather(s, sn, sdt, r, rn, rdt, cm);
        case C_ALLGATHERV: return MPI_Allgatherv(s, sn, sdt, r, rcp, rdp, rdt, cm);
        case C_ALLTOALL: return MPI_Alltoall(s, sn, sdt, r, rn, rdt, cm);
        case C_ALLTOALLV: return MPI_Alltoallv(s, scp, sdp, sdt, r, rcp, rdp, rdt, cm);
        case C_ALLTOALLW: return MPI_Alltoallw(s, scp, sdp, sty, r, rcp, rdp, rty, cm);
        case C_REDUCE_SCATTER_BLOCK: return MPI_Reduce_scatter_block(s, r, n, rdt, op, cm);
        case C_REDUCE_SCATTER: return MPI_Reduce_scatter(s, r, rcp, rdt, op, cm);
        case C_SCAN: return MPI_Scan(s, r, n, rdt, op, cm);
        case C_EXSCAN: return MPI_Exscan(s, r, n, rdt, op, cm);
        }
        break;
    case M_NB:
        switch (c->coll) {
        case C_BCAST: return MPI_Ibcast(r, rn, rdt, R, cm, q);
        case C_REDUCE: return MPI_Ireduce(s, r, n, rdt, op, R, cm, q);
        case C_ALLREDUCE: return MPI_Iallreduce(s, r, n, rdt, op, cm, q);
        case C_GATHER: return MPI_Igather(s, sn, sdt, r, rn, rdt, R, cm, q);
        case C_GATHERV: return MPI_Igatherv(s, sn, sdt, r, rcp, rdp, rdt, R, cm, q);
        case C_SCATTER: return MPI_Iscatter(s, sn, sdt, r, rn, rdt, R, cm, q);
        case C_SCATTERV: return MPI_Iscatterv(s, scp, sdp, sdt, r, rn, rdt, R, cm, q);
        case C_ALLGATHER: return MPI_Iallgather(s, sn, sdt, r, rn, rdt, cm, q);
        case C_ALLGATHERV: return MPI_Iallgatherv(s, sn, sdt, r, rcp, rdp, rdt, cm, q);
        case C_ALLTOALL: return MPI_Ialltoall(s, sn, sdt, r, rn, rdt, cm, q);
        case C_ALLTOALLV: return MPI_Ialltoallv(s, scp, sdp, sdt, r, rcp, rdp, rdt, cm, q);
        case C_ALLTOALLW: return MPI_Ialltoallw(s, scp, sdp, sty, r, rcp, rdp, rty, cm, q);
        case C_REDUCE_SCATTER_BLOCK: return MPI_Ireduce_scatter_block(s, r, n, rdt, op, cm, q);
        case C_REDUCE_SCATTER: return MPI_Ireduce_scatter(s, r, rcp, rdt, op, cm, q);
        case C_SCAN: return MPI_Iscan(s, r, n, rdt, op, cm, q);
        case C_EXSCAN: return MPI_Iexscan(s, r, n, rdt, op, cm, q);
        }
        break;
#ifdef HAVE_COLL_INIT
    case M_INIT:
        switch (c->coll) {
        case C_BCAST: return MPI_Bcast_init(r, rn, rdt, R, cm, inf, q);
        case C_REDUCE: return MPI_Reduce_init(s, r, n, rdt, op, R, cm, inf, q);
        case C_ALLREDUCE: return MPI_Allreduce_init(s, r, n, rdt, op, cm, inf, q);
        case C_GATHER: return MPI_Gather_init(s, sn, sdt, r, rn, rdt, R, cm, inf, q);
        case C_GATHERV: return MPI_Gatherv_init(s, sn, sdt, r, rcp, rdp, rdt, R, cm, inf, q);
        case C_SCATTER: return MPI_Scatter_init(s, sn, sdt, r, rn, rdt, R, cm, inf, q);
        case C_SCATTERV: return MPI_Scatterv_init(s, scp, sdp, sdt, r, rn, rdt, R, cm, inf, q);
        case C_ALLGATHER: return MPI_Allgather_init(s, sn, sdt, r, rn, rdt, cm, inf, q);
        case C_ALLGATHERV: return MPI_Allgatherv_init(s, sn, sdt, r, rcp, rdp, rdt, cm, inf, q);
        case C_ALLTOALL: return MPI_Alltoall_init(s, sn, sdt, r, rn, rdt, cm, inf, q);
        case C_ALLTOALLV: return MPI_Alltoallv_init(s, scp, sdp, sdt, r, rcp, rdp, rdt, cm, inf, q);
        case C_ALLTOALLW: return MPI_Alltoallw_init(s, scp, sdp, sty, r, rcp, rdp, rty, cm, inf, q);
        case C_REDUCE_SCATTER_BLOCK: return MPI_Reduce_scatter_block_init(s, r, n, rdt, op, cm, inf, q);
        case C_REDUCE_SCATTER: return MPI_Reduce_scatter_init(s, r, rcp, rdt, op, cm, inf, q);
        case C_SCAN: return MPI_Scan_init(s, r, n, rdt, op, cm, inf, q);
        case C_EXSCAN: return MPI_Exscan_init(s, r, n, rdt, op, cm, inf, q);
        }
        break;
#endif
#ifdef HAVE_COLL_C
    case M_BLOCK_C:
        switch (c->coll) {
        case C_BCAST: return MPI_Bcast_c(r, rn, rdt, R, cm);
        case C_REDUCE: return MPI_Reduce_c(s, r, n, rdt, op, R, cm);
        case C_ALLREDUCE: return MPI_Allreduce_c(s, r, n, rdt, op, cm);
        case C_REDUCE_LOCAL: return MPI_Reduce_local_c(s, r, n, rdt, op);
        case C_GATHER: return MPI_Gather_c(s, sn, sdt, r, rn, rdt, R, cm);
        case C_GATHERV: return MPI_Gatherv_c(s, sn, sdt, r, rccp, rdcp, rdt, R, cm);
        case C_SCATTER: return MPI_Scatter_c(s, sn, sdt, r, rn, rdt, R, cm);
        case C_SCATTERV: return MPI_Scatterv_c(s, sccp, sdcp, sdt, r, rn, rdt, R, cm);
        case C_ALLGATHER: return MPI_Allgather_c(s, sn, sdt, r, rn, rdt, cm);
        case C_ALLGATHERV: return MPI_Allgatherv_c(s, sn, sdt, r, rccp, rdcp, rdt, cm);
        case C_ALLTOALL: return MPI_Alltoall_c(s, sn, sdt, r, rn, rdt, cm);
        case C_ALLTOALLV: return MPI_Alltoallv_c(s, sccp, sdcp, sdt, r, rccp, rdcp, rdt, cm);
        case C_ALLTOALLW: return MPI_Alltoallw_c(s, sccp, sdcp, sty, r, rccp, rdcp, rty, cm);
        case C_REDUCE_SCATTER_BLOCK: return MPI_Reduce_scatter_block_c(s, r, n, rdt, op, cm);
        case C_REDUCE_SCATTER: return MPI_Reduce_scatter_c(s, r, rccp, rdt, op, cm);
        case C_SCAN: return MPI_Scan_c(s, r, n, rdt, op, cm);
        case C_EXSCAN: return MPI_Exscan_c(s, r, n, rdt, op, cm);
        }
        break;
    case M_NB_C:
        switch (c->coll) {
        case C_BCAST: return MPI_Ibcast_c(r, rn, rdt, R, cm, q);
        case C_REDUCE: return MPI_Ireduce_c(s, r, n, rdt, op, R, cm, q);
        case C_ALLREDUCE: return MPI_Iallreduce_c(s, r, n, rdt, op, cm, q);
        case C_GATHER: return MPI_Igather_c(s, sn, sdt, r, rn, rdt, R, cm, q);
        case C_GATHERV: return MPI_Igatherv_c(s, sn, sdt, r, rccp, rdcp, rdt, R, cm, q);
        case C_SCATTER: return MPI_Iscatter_c(s, sn, sdt, r, rn, rdt, R, cm, q);
        case C_SCATTERV: return MPI_Iscatterv_c(s, sccp, sdcp, sdt, r, rn, rdt, R, cm, q);
        case C_ALLGATHER: return MPI_Iallgather_c(s, sn, sdt, r, rn, rdt, cm, q);
        case C_ALLGATHERV: return MPI_Iallgatherv_c(s, sn, sdt, r, rccp, rdcp, rdt, cm, q);
        case C_ALLTOALL: return MPI_Ialltoall_c(s, sn, sdt, r, rn, rdt, cm, q);
        case C_ALLTOALLV: return MPI_Ialltoallv_c(s, sccp, sdcp, sdt, r, rccp, rdcp, rdt, cm, q);
        case C_ALLTOALLW: return MPI_Ialltoallw_c(s, sccp, sdcp, sty, r, rccp, rdcp, rty, cm, q);
        case C_REDUCE_SCATTER_BLOCK: return MPI_Ireduce_scatter_block_c(s, r, n, rdt, op, cm, q);
        case C_REDUCE_SCATTER: return MPI_Ireduce_scatter_c(s, r, rccp, rdt, op, cm, q);
        case C_SCAN: return MPI_Iscan_c(s, r, n, rdt, op, cm, q);
        case C_EXSCAN: return MPI_Iexscan_c(s, r, n, rdt, op, cm, q);
        }
        break;
    case M_INIT_C:
        switch (c->coll) {
        case C_BCAST: return MPI_Bcast_init_c(r, rn, rdt, R, cm, inf, q);
        case C_REDUCE: return MPI_Reduce_init_c(s, r, n, rdt, op, R, cm, inf, q);
        case C_ALLREDUCE: return MPI_Allreduce_init_c(s, r, n, rdt, op, cm, inf, q);
        case C_GATHER: return MPI_Gather_init_c(s, sn, sdt, r, rn, rdt, R, cm, inf, q);
        case C_GATHERV: return MPI_Gatherv_init_c(s, sn, sdt, r, rccp, rdcp, rdt, R, cm, inf, q);
        case C_SCATTER: return MPI_Scatter_init_c(s, sn, sdt, r, rn, rdt, R, cm, inf, q);
        case C_SCATTERV: return MPI_Scatterv_init_c(s, sccp, sdcp, sdt, r, rn, rdt, R, cm, inf, q);
        case C_ALLGATHER: return MPI_Allgather_init_c(s, sn, sdt, r, rn, rdt, cm, inf, q);
        case C_ALLGATHERV: return MPI_Allgatherv_init_c(s, sn, sdt, r, rccp, rdcp, rdt, cm, inf, q);
        case C_ALLTOALL: return MPI_Alltoall_init_c(s, sn, sdt, r, rn, rdt, cm, inf, q);
        case C_ALLTOALLV: return MPI_Alltoallv_init_c(s, sccp, sdcp, sdt, r, rccp, rdcp, rdt, cm, inf, q);
        case C_ALLTOALLW: return MPI_Alltoallw_init_c(s, sccp, sdcp, sty, r, rccp, rdcp, rty, cm, inf, q);
        case C_REDUCE_SCATTER_BLOCK: return MPI_Reduce_scatter_block_init_c(s, r, n, rdt, op, cm, inf, q);
        case C_REDUCE_SCATTER: return MPI_Reduce_scatter_init_c(s, r, rccp, rdt, op, cm, inf, q);
        case C_SCAN: return MPI_Scan_init_c(s, r, n, rdt, op, cm, inf, q);
        case C_EXSCAN: return MPI_Exscan_init_c(s, r, n, rdt, op, cm, inf, q);
        }
        break;
#endif
    }
    DIE("coll_start: %s has no form %d here", coll_name_tab[c->coll], mode);
    return MPI_ERR_OTHER;
}

/* ------------------------------------------------------------------------------------------ */
/* drivers                                                                                    */

/* Buffer placements: {send kind, receive kind}; 0 is the host reference. */
#define NPLACE 4
static const int place_kind[NPLACE][2] = {
    {MEM_HOST, MEM_HOST}, {MEM_DEVICE, MEM_DEVICE}, {MEM_HOST, MEM_DEVICE}, {MEM_DEVICE, MEM_HOST}};
static const char *place_name[NPLACE] = {"H/H", "D/D", "H send/D recv", "D send/H recv"};

typedef void (*plan_fn)(struct ccase *c);
static int t_coll_debug = -1; /* COLL_DEBUG=1: a note before every call */
typedef int (*start_fn)(struct ccase *c, int mode);

/* Run every case once, blocking form `mode` (M_BLOCK or M_BLOCK_C), placing the buffers as
 * placement p, recording in t. */
T_UNUSED static void run_blocking(struct ccase *cases, int ncase, int p, int mode, plan_fn plan,
                                  start_fn start, struct trace *t)
{
    char what[80];
    snprintf(what, sizeof what, "%s%s", place_name[p], mode == M_BLOCK_C ? " (_c)" : "");
    if (t_coll_debug < 0) t_coll_debug = atoi(t_env("COLL_DEBUG", "0"));
    for (int i = 0; i < ncase; i++) {
        struct ccase *c = &cases[i];
        c->sk = place_kind[p][0];
        c->rk = place_kind[p][1];
        plan(c);
        case_alloc(c);
        case_fill(c, c->seed);
        case_make_freed(c);
        double t0 = MPI_Wtime();
        int rc = start(c, mode);
        if (t_coll_debug) note("%s: %s (%.1f ms)", what, c->label, 1e3 * (MPI_Wtime() - t0));
        case_check(c, t, what, rc);
        case_free(c);
    }
}

/* Run all placements; compare each with the host run. */
T_UNUSED static void run_all_placements(struct ccase *cases, int ncase, int mode, plan_fn plan,
                                        start_fn start)
{
    struct trace ref = {0};
    run_blocking(cases, ncase, 0, mode, plan, start, &ref);
    for (int p = 1; p < NPLACE; p++) {
        struct trace got = {0};
        run_blocking(cases, ncase, p, mode, plan, start, &got);
        trace_compare(&ref, &got, place_name[p]);
        trace_free(&got);
    }
    trace_free(&ref);
}

/* Complete the requests of a batch by method `how` (0 Wait in order, 1 Wait in reverse order,
 * 2 Waitall, 3 MPI_Test loop, 4 Waitany, 5 Testall loop, 6 Waitsome, 7 Testany loop). */
static const char *complete_name[8] = {"Wait", "Wait (reverse order)", "Waitall", "Test loop",
                                       "Waitany", "Testall loop", "Waitsome", "Testany loop"};
T_UNUSED static void complete_batch(struct ccase **b, int nb, int how)
{
    MPI_Request rq[64];
    MPI_Status sts[64];
    int idx[64];
    if (nb > 64) DIE("batch too large");
    for (int i = 0; i < nb; i++) rq[i] = b[i]->req;
    int left = nb, guard = 0;
    switch (how) {
    case 0:
        for (int i = 0; i < nb; i++) MPI_CHECK(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
        break;
    case 1:
        for (int i = nb - 1; i >= 0; i--) MPI_CHECK(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
        break;
    case 2:
        MPI_CHECK(MPI_Waitall(nb, rq, sts));
        break;
    case 3:
        for (int i = 0; i < nb; i++) idx[i] = 0;
        while (left > 0 && guard++ < 100000000) {
            for (int i = 0; i < nb; i++) {
                int flag = 0;
                if (idx[i]) continue; /* done (a persistent request is then inactive) */
                MPI_CHECK(MPI_Test(&rq[i], &flag, MPI_STATUS_IGNORE));
                if (flag) idx[i] = 1, left--;
            }
        }
        break;
    case 4:
        for (int k = 0; k < nb; k++) {
            int i = -1;
            MPI_CHECK(MPI_Waitany(nb, rq, &i, MPI_STATUS_IGNORE));
            CHECK(i != MPI_UNDEFINED || nb == 0, "Waitany gave MPI_UNDEFINED with %d left", nb - k);
        }
        break;
    case 5: {
        int flag = 0;
        while (!flag && guard++ < 100000000) MPI_CHECK(MPI_Testall(nb, rq, &flag, sts));
        break;
    }
    case 6:
        while (left > 0) {
            int outc = 0;
            MPI_CHECK(MPI_Waitsome(nb, rq, &outc, idx, sts));
            if (outc == MPI_UNDEFINED) break;
            left -= outc;
        }
        break;
    case 7:
        while (left > 0 && guard++ < 100000000) {
            int i = -1, flag = 0;
            MPI_CHECK(MPI_Testany(nb, rq, &i, &flag, MPI_STATUS_IGNORE));
            if (flag && i != MPI_UNDEFINED) left--;
            if (flag && i == MPI_UNDEFINED) break;
        }
        break;
    }
    for (int i = 0; i < nb; i++) {
        /* persistent requests stay allocated (inactive); others become MPI_REQUEST_NULL */
        CHECK(rq[i] == MPI_REQUEST_NULL || rq[i] == b[i]->req, "%s: request %d changed handle",
              complete_name[how], i);
        b[i]->req = rq[i];
    }
}

/* Nonblocking (mode M_NB or M_NB_C): cases in batches of `batch` started one after the other,
 * then completed together by a method that changes from batch to batch (complete_batch), then
 * checked. Placement p; records in t. */
T_UNUSED static void run_batched(struct ccase *cases, int ncase, int p, int mode, int batch,
                                 plan_fn plan, start_fn start, struct trace *t)
{
    char what[120];
    struct ccase *b[64];
    if (t_coll_debug < 0) t_coll_debug = atoi(t_env("COLL_DEBUG", "0"));
    for (int i0 = 0, bi = 0; i0 < ncase; i0 += batch, bi++) {
        int nb = ncase - i0 < batch ? ncase - i0 : batch;
        int how = bi % 8;
        snprintf(what, sizeof what, "%s%s, completed by %s", place_name[p],
                 mode == M_NB_C ? " (_c)" : "", complete_name[how]);
        for (int i = 0; i < nb; i++) {
            struct ccase *c = b[i] = &cases[i0 + i];
            c->sk = place_kind[p][0];
            c->rk = place_kind[p][1];
            plan(c);
            case_alloc(c);
        }
        for (int i = 0; i < nb; i++) case_fill(b[i], b[i]->seed);
        for (int i = 0; i < nb; i++) case_make_freed(b[i]);
        int rcs[64];
        for (int i = 0; i < nb; i++) {
            if (t_coll_debug) note("%s: start %s", what, b[i]->label);
            rcs[i] = start(b[i], mode);
            if (rcs[i] != MPI_SUCCESS) b[i]->req = MPI_REQUEST_NULL;
        }
        complete_batch(b, nb, how);
        for (int i = 0; i < nb; i++) {
            CHECK(b[i]->req == MPI_REQUEST_NULL, "%s: %s: request not MPI_REQUEST_NULL after completion",
                  what, b[i]->label);
            case_check(b[i], t, what, rcs[i]);
            case_free(b[i]);
        }
    }
}

T_UNUSED static void run_batched_all_placements(struct ccase *cases, int ncase, int mode,
                                                int batch, plan_fn plan, start_fn start)
{
    struct trace ref = {0};
    run_batched(cases, ncase, 0, mode, batch, plan, start, &ref);
    for (int p = 1; p < NPLACE; p++) {
        struct trace got = {0};
        run_batched(cases, ncase, p, mode, batch, plan, start, &got);
        trace_compare(&ref, &got, place_name[p]);
        trace_free(&got);
    }
    trace_free(&ref);
}

/* Persistent (mode M_INIT or M_INIT_C): per batch, every case initialised once, then `rounds`
 * rounds with NEW data each round (send buffers rewritten, receive buffers poisoned again):
 * started by MPI_Startall (even rounds) or MPI_Start one by one (odd rounds), completed by a
 * method that changes every round, checked; at the end MPI_Request_free. */
T_UNUSED static void run_persistent(struct ccase *cases, int ncase, int p, int mode, int batch,
                                    int rounds, plan_fn plan, start_fn start, struct trace *t)
{
    char what[160];
    struct ccase *b[64];
    MPI_Request rq[64];
    if (t_coll_debug < 0) t_coll_debug = atoi(t_env("COLL_DEBUG", "0"));
    for (int i0 = 0, bi = 0; i0 < ncase; i0 += batch, bi++) {
        int nb = ncase - i0 < batch ? ncase - i0 : batch;
        for (int i = 0; i < nb; i++) {
            struct ccase *c = b[i] = &cases[i0 + i];
            c->sk = place_kind[p][0];
            c->rk = place_kind[p][1];
            plan(c);
            case_alloc(c);
        }
        for (int i = 0; i < nb; i++) case_fill(b[i], b[i]->seed);
        for (int i = 0; i < nb; i++) case_make_freed(b[i]);
        int rcs[64];
        for (int i = 0; i < nb; i++) {
            if (t_coll_debug) note("%s: init %s", place_name[p], b[i]->label);
            rcs[i] = start(b[i], mode);
            CHECK(rcs[i] == MPI_SUCCESS && b[i]->req != MPI_REQUEST_NULL, "%s: %s init returned %d",
                  place_name[p], b[i]->label, rcs[i]);
        }
        for (int r = 0; r < rounds; r++) {
            int how = (bi + r) % 8;
            if (how == 5 && quirk_mpich_testall_persistent()) how = 3;
            snprintf(what, sizeof what, "%s%s, round %d, %s + %s", place_name[p],
                     mode == M_INIT_C ? " (_c)" : "", r, r % 2 ? "Start" : "Startall",
                     complete_name[how]);
            if (r > 0)
                for (int i = 0; i < nb; i++) case_fill(b[i], b[i]->seed + 1000 * r);
            for (int i = 0; i < nb; i++) rq[i] = b[i]->req;
            if (r % 2 == 0) {
                MPI_CHECK(MPI_Startall(nb, rq));
            } else {
                for (int i = 0; i < nb; i++) MPI_CHECK(MPI_Start(&rq[i]));
            }
            complete_batch(b, nb, how);
            for (int i = 0; i < nb; i++) {
                CHECK(b[i]->req == rq[i], "%s: %s: persistent request handle changed", what, b[i]->label);
                case_check(b[i], t, what, rcs[i]);
            }
        }
        for (int i = 0; i < nb; i++) {
            MPI_CHECK(MPI_Request_free(&b[i]->req));
            CHECK(b[i]->req == MPI_REQUEST_NULL, "Request_free left the handle");
            case_free(b[i]);
        }
    }
}

T_UNUSED static void run_persistent_all_placements(struct ccase *cases, int ncase, int mode,
                                                   int batch, int rounds, plan_fn plan,
                                                   start_fn start)
{
    struct trace ref = {0};
    run_persistent(cases, ncase, 0, mode, batch, rounds, plan, start, &ref);
    for (int p = 1; p < NPLACE; p++) {
        struct trace got = {0};
        run_persistent(cases, ncase, p, mode, batch, rounds, plan, start, &got);
        trace_compare(&ref, &got, place_name[p]);
        trace_free(&got);
    }
    trace_free(&ref);
}
