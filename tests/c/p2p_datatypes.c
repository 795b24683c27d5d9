// cudampi-test: ranks=2 without-shim=crash
/* Derived datatypes on device buffers: contiguous, vector (stride with gaps), indexed, struct,
 * subarray, hvector with a negative stride, MPI_Type_create_resized with a negative and with a
 * positive lower bound (data before / after the buffer pointer). Every message goes 0->1 and
 * 1->0 with placements H->H (reference), D->D, H->D, D->H (and managed), and some pairs mix
 * types of the same signature (vector -> contiguous ints and back).
 *
 * The test knows each type's typemap as a list of byte blocks, so it computes independently
 * what must arrive where. The receive allocation (type span plus margins on both sides) is
 * filled with a gap pattern disjoint from the data patterns; after the receive EVERY byte is
 * checked: blocks hold the sender's bytes, gaps and margins still hold the gap pattern, and
 * the whole allocation equals the host run's byte for byte. */
#include "common.h"

#define MARGIN 64

struct blk {
    long disp;
    int len;
};
struct dtype {
    const char *name;
    MPI_Datatype dt;
    long extent;
    int nb;
    struct blk b[8];
};

static MPI_Comm comm;

enum { T_INT, T_CONTIG, T_VECTOR, T_INDEXED, T_STRUCT, T_SUBARRAY, T_NEGSTRIDE, T_RESIZED_NEG,
       T_RESIZED_POS, T_N };
static struct dtype types[T_N];

struct s3 {
    int a;
    double b[2];
    char c[3];
};

static void build_types(void)
{
    MPI_Datatype tmp;
    struct dtype *t;

    t = &types[T_INT];
    *t = (struct dtype){"MPI_INT", MPI_INT, 4, 1, {{0, 4}}};

    t = &types[T_CONTIG];
    *t = (struct dtype){"contiguous(5,int)", MPI_DATATYPE_NULL, 20, 1, {{0, 20}}};
    MPI_Type_contiguous(5, MPI_INT, &t->dt);

    t = &types[T_VECTOR];
    *t = (struct dtype){"vector(4,3,5,int)", MPI_DATATYPE_NULL, 72, 4,
                        {{0, 12}, {20, 12}, {40, 12}, {60, 12}}};
    MPI_Type_vector(4, 3, 5, MPI_INT, &t->dt);

    t = &types[T_INDEXED];
    *t = (struct dtype){"indexed({2,1,3},{0,4,9},double)", MPI_DATATYPE_NULL, 96, 3,
                        {{0, 16}, {32, 8}, {72, 24}}};
    {
        int bl[3] = {2, 1, 3}, di[3] = {0, 4, 9};
        MPI_Type_indexed(3, bl, di, MPI_DOUBLE, &t->dt);
    }

    t = &types[T_STRUCT];
    *t = (struct dtype){"struct{int;double[2];char[3]} resized", MPI_DATATYPE_NULL,
                        (long)sizeof(struct s3), 3,
                        {{offsetof(struct s3, a), 4}, {offsetof(struct s3, b), 16},
                         {offsetof(struct s3, c), 3}}};
    {
        int bl[3] = {1, 2, 3};
        MPI_Aint di[3] = {offsetof(struct s3, a), offsetof(struct s3, b), offsetof(struct s3, c)};
        MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_Type_create_struct(3, bl, di, ty, &tmp);
        MPI_Type_create_resized(tmp, 0, (MPI_Aint)sizeof(struct s3), &t->dt);
        MPI_Type_free(&tmp);
    }

    t = &types[T_SUBARRAY];
    *t = (struct dtype){"subarray 4x6 int [1:3,2:5]", MPI_DATATYPE_NULL, 96, 2, {{32, 12}, {56, 12}}};
    {
        int sizes[2] = {4, 6}, sub[2] = {2, 3}, starts[2] = {1, 2};
        MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &t->dt);
    }

    /* blocks at 0, -16, -32 in this (typemap) order; lb -32, ub 8 */
    t = &types[T_NEGSTRIDE];
    *t = (struct dtype){"hvector(3,2,-16,int)", MPI_DATATYPE_NULL, 40, 3,
                        {{0, 8}, {-16, 8}, {-32, 8}}};
    MPI_Type_create_hvector(3, 2, -16, MPI_INT, &t->dt);

    /* data at -8 and 4 (before the buffer pointer), lb -12, extent 28 */
    t = &types[T_RESIZED_NEG];
    *t = (struct dtype){"resized(hindexed{-8,4},lb=-12,ext=28)", MPI_DATATYPE_NULL, 28, 2,
                        {{-8, 4}, {4, 4}}};
    {
        int bl[2] = {1, 1};
        MPI_Aint di[2] = {-8, 4};
        MPI_Type_create_hindexed(2, bl, di, MPI_INT, &tmp);
        MPI_Type_create_resized(tmp, -12, 28, &t->dt);
        MPI_Type_free(&tmp);
    }

    /* data starts 16 bytes after the pointer, lb 8, extent 48 */
    t = &types[T_RESIZED_POS];
    *t = (struct dtype){"resized(hindexed{16:2,40:1},lb=8,ext=48)", MPI_DATATYPE_NULL, 48, 2,
                        {{16, 8}, {40, 4}}};
    {
        int bl[2] = {2, 1};
        MPI_Aint di[2] = {16, 40};
        MPI_Type_create_hindexed(2, bl, di, MPI_INT, &tmp);
        MPI_Type_create_resized(tmp, 8, 48, &t->dt);
        MPI_Type_free(&tmp);
    }

    for (int i = 1; i < T_N; i++) MPI_Type_commit(&types[i].dt);

    /* the block lists must describe what MPI built */
    for (int i = 0; i < T_N; i++) {
        t = &types[i];
        long sum = 0;
        for (int k = 0; k < t->nb; k++) sum += t->b[k].len;
        MPI_Aint lb, ext;
        MPI_Type_get_extent(t->dt, &lb, &ext);
        CHECK((long)type_size(t->dt) == sum, "%s: MPI size %zu, block list %ld", t->name,
              type_size(t->dt), sum);
        CHECK((long)ext == t->extent, "%s: MPI extent %ld, expected %ld", t->name, (long)ext,
              t->extent);
    }
}

/* Where count elements of t lie relative to the buffer pointer: [lo, hi). */
static void span_of(const struct dtype *t, int count, long *lo, long *hi)
{
    *lo = 0;
    *hi = 0;
    int first = 1;
    for (int k = 0; k < count; k++)
        for (int j = 0; j < t->nb; j++) {
            long a = k * t->extent + t->b[j].disp, z = a + t->b[j].len;
            if (first || a < *lo) *lo = a;
            if (first || z > *hi) *hi = z;
            first = 0;
        }
}

/* Allocation geometry: the pointer handed to MPI is alloc + off. */
static size_t alloc_size(const struct dtype *t, int count, long *off)
{
    long lo, hi;
    span_of(t, count, &lo, &hi);
    *off = MARGIN - lo;
    return (size_t)(hi - lo) + 2 * MARGIN;
}

/* Concatenate the blocks of count elements at base (typemap order). Returns bytes. */
static size_t pack(const struct dtype *t, int count, const unsigned char *base, unsigned char *out)
{
    size_t n = 0;
    for (int k = 0; k < count; k++)
        for (int j = 0; j < t->nb; j++) {
            memcpy(out + n, base + k * t->extent + t->b[j].disp, (size_t)t->b[j].len);
            n += (size_t)t->b[j].len;
        }
    return n;
}
static size_t unpack(const struct dtype *t, int count, const unsigned char *in, unsigned char *base)
{
    size_t n = 0;
    for (int k = 0; k < count; k++)
        for (int j = 0; j < t->nb; j++) {
            memcpy(base + k * t->extent + t->b[j].disp, in + n, (size_t)t->b[j].len);
            n += (size_t)t->b[j].len;
        }
    return n;
}

struct xfer {
    int st, sc, rt, rc; /* send type/count, recv type/count */
};

/* One message src->dst of x. Receiver records the whole receive allocation in tr. */
static void one(const struct xfer *x, int src, int dst, int skind, int rkind, int seed,
                const char *pname, struct trace *tr)
{
    const struct dtype *S = &types[x->st], *R = &types[x->rt];
    char label[192];
    snprintf(label, sizeof label, "%s x%d -> %s x%d, %d->%d", S->name, x->sc, R->name, x->rc, src,
             dst);
    if (t_rank == src) {
        long off;
        size_t n = alloc_size(S, x->sc, &off);
        unsigned char *a = (unsigned char *)mem_alloc(skind, n);
        mem_pattern(a, n, src, seed);
        MPI_CHECK(MPI_Send(a + off, x->sc, S->dt, dst, seed % 30000, comm));
        /* the send buffer must be unchanged */
        unsigned char *h = mem_fetch(a, n), *e = pattern_new(n, src, seed);
        check_bytes(h, e, n, "%s %s: send buffer modified", pname, label);
        free(h);
        free(e);
        mem_free(a);
    } else if (t_rank == dst) {
        long soff, roff;
        size_t sn = alloc_size(S, x->sc, &soff), rn = alloc_size(R, x->rc, &roff);
        /* expected: the sender's allocation, packed, unpacked into a gap-filled allocation */
        unsigned char *sa = pattern_new(sn, src, seed);
        unsigned char *packed = (unsigned char *)xmalloc(type_size(S->dt) * (size_t)x->sc);
        size_t np = pack(S, x->sc, sa + soff, packed);
        unsigned char *exp = (unsigned char *)xmalloc(rn);
        gap_fill(exp, rn, seed);
        size_t nu = type_size(R->dt) * (size_t)x->rc;
        if (CHECK(np == nu, "%s: signature mismatch in the test itself (%zu vs %zu)", label, np, nu))
            unpack(R, x->rc, packed, exp + roff);

        unsigned char *a = (unsigned char *)mem_alloc(rkind, rn);
        mem_gap(a, rn, seed);
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Recv(a + roff, x->rc, R->dt, src, seed % 30000, comm, &st));
        unsigned char *got = mem_fetch(a, rn);
        check_bytes(got, exp, rn, "%s %s: every byte of the receive allocation", pname, label);
        check_status(&st, R->dt, src, seed % 30000, x->rc, "%s %s", pname, label);
        trace_add(tr, label, got, rn, &st, R->dt, MPI_SUCCESS);
        free(got);
        free(exp);
        free(packed);
        free(sa);
        mem_free(a);
    }
}

static void run(int skind, int rkind, const char *pname, struct trace *tr)
{
    static const struct xfer cross[] = {
        {T_VECTOR, 3, T_INT, 36},       {T_INT, 36, T_VECTOR, 3},
        {T_NEGSTRIDE, 6, T_VECTOR, 3},  {T_SUBARRAY, 2, T_RESIZED_NEG, 6},
        {T_RESIZED_POS, 5, T_CONTIG, 3}, {T_CONTIG, 6, T_NEGSTRIDE, 5},
        {T_VECTOR, 2000, T_RESIZED_NEG, 12000},
    };
    const int counts[] = {1, 3, 20000};
    int seed = 0;
    for (int dir = 0; dir < 2; dir++) {
        int src = dir, dst = 1 - dir;
        for (int ti = 0; ti < T_N; ti++)
            for (int ci = 0; ci < 3; ci++) {
                struct xfer x = {ti, counts[ci], ti, counts[ci]};
                one(&x, src, dst, skind, rkind, ++seed, pname, tr);
            }
        for (int i = 0; i < (int)(sizeof cross / sizeof cross[0]); i++)
            one(&cross[i], src, dst, skind, rkind, ++seed, pname, tr);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    build_types();
    if (t_rank < 2) {
        struct trace ref = {0};
        run(MEM_HOST, MEM_HOST, "H->H", &ref);
        const int pl[4][2] = {{MEM_DEVICE, MEM_DEVICE}, {MEM_HOST, MEM_DEVICE},
                              {MEM_DEVICE, MEM_HOST}, {MEM_MANAGED, MEM_POOL}};
        const char *pn[4] = {"D->D", "H->D", "D->H", "managed->pool"};
        for (int p = 0; p < 4; p++) {
            struct trace got = {0};
            run(pl[p][0], pl[p][1], pn[p], &got);
            trace_compare(&ref, &got, pn[p]);
            trace_free(&got);
        }
        trace_free(&ref);
    }
    for (int i = 1; i < T_N; i++) MPI_Type_free(&types[i].dt);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
