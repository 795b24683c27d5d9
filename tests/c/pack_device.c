// cudampi-test: ranks=1 without-shim=crash timeout=180
/* MPI_Pack / MPI_Unpack (native, external32, and the large-count _c forms where the process
 * has them) on device buffers, compared byte for byte with the same calls on host buffers.
 *
 * For each datatype (predefined, contiguous, vector with gaps, indexed, struct, resized with a
 * negative lower bound) and count 0, 1, 3: two packs append to one packed buffer, from two
 * places of a patterned typed region, starting at a non-zero, unaligned position; then two
 * unpacks read them back in the other order into a region poisoned with the gap pattern
 * (guards before and after, the datatype's gaps). Placements in->out: host->host (the
 * reference, done by the library alone), device->host, host->device, device->device. Every
 * byte of the packed buffer (poisoned outside what the library writes) and of the unpacked
 * region, every position and every return code must equal the reference. Bad arguments
 * (negative count, a position past the size) must give the reference's error class. */
#include "common.h"

#define GUARD 128   /* bytes before and after the typed data */
#define ROOM 320    /* bytes each of the two typed places spans, lower bound included */
#define LB_ROOM 64  /* room for a negative lower bound before a typed place */
#define REGION (2 * GUARD + 2 * ROOM)
#define OUTSZ 2048
#define P0 5

enum { MODE_NATIVE, MODE_EXTERNAL, MODE_LARGE, MODE_N };
static const char *mode_name[MODE_N] = {"native", "external32", "large-count"};

typedef int (*pack_c_t)(const void *, int64_t, MPI_Datatype, void *, int64_t, int64_t *, MPI_Comm);
typedef int (*unpack_c_t)(const void *, int64_t, int64_t *, void *, int64_t, MPI_Datatype, MPI_Comm);
static pack_c_t pack_c;
static unpack_c_t unpack_c;

struct dtype {
    const char *name;
    MPI_Datatype dt;
    int is_struct;
};
static struct dtype types[8];
static int ntypes;

static void add_type(const char *name, MPI_Datatype dt, int commit)
{
    if (commit) MPI_CHECK(MPI_Type_commit(&dt));
    types[ntypes].name = name;
    types[ntypes].dt = dt;
    types[ntypes].is_struct = strstr(name, "struct") != NULL || strstr(name, "resized") != NULL;
    ntypes++;
}

static void make_types(void)
{
    MPI_Datatype t;
    add_type("int", MPI_INT, 0);
    add_type("double", MPI_DOUBLE, 0);
    MPI_CHECK(MPI_Type_contiguous(3, MPI_INT, &t));
    add_type("contiguous", t, 1);
    MPI_CHECK(MPI_Type_vector(3, 2, 3, MPI_INT, &t));
    add_type("vector", t, 1);
    int bl[3] = {2, 1, 3}, dis[3] = {0, 4, 7};
    MPI_CHECK(MPI_Type_indexed(3, bl, dis, MPI_INT, &t));
    add_type("indexed", t, 1);
    struct s3 { int a; double b[2]; short c[3]; };
    int sbl[3] = {1, 2, 3};
    MPI_Aint sdis[3] = {offsetof(struct s3, a), offsetof(struct s3, b), offsetof(struct s3, c)};
    MPI_Datatype sty[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT};
    MPI_CHECK(MPI_Type_create_struct(3, sbl, sdis, sty, &t));
    add_type("struct", t, 1);
    /* Data before the buffer pointer: an int at -8, two at +4, lower bound -8, extent 32. */
    int rbl[2] = {1, 2};
    MPI_Aint rdis[2] = {-8, 4};
    MPI_Datatype rty[2] = {MPI_INT, MPI_INT}, inner;
    MPI_CHECK(MPI_Type_create_struct(2, rbl, rdis, rty, &inner));
    MPI_CHECK(MPI_Type_create_resized(inner, -8, 32, &t));
    MPI_Type_free(&inner);
    add_type("resized-neg-lb", t, 1);
}

/* The two typed places in a region (offsets of the buffer pointers). */
static size_t place(int which) { return GUARD + LB_ROOM + (size_t)which * ROOM; }

static int do_pack(int mode, const void *in, int count, MPI_Datatype dt, void *out, MPI_Aint *pos)
{
    if (mode == MODE_EXTERNAL) return MPI_Pack_external("external32", in, count, dt, out, OUTSZ, pos);
    if (mode == MODE_LARGE) {
        int64_t p = *pos;
        int rc = pack_c(in, count, dt, out, OUTSZ, &p, MPI_COMM_WORLD);
        *pos = (MPI_Aint)p;
        return rc;
    }
    int p = (int)*pos;
    int rc = MPI_Pack(in, count, dt, out, OUTSZ, &p, MPI_COMM_WORLD);
    *pos = p;
    return rc;
}

static int do_unpack(int mode, const void *in, MPI_Aint insize, MPI_Aint *pos, void *out, int count, MPI_Datatype dt)
{
    if (mode == MODE_EXTERNAL) return MPI_Unpack_external("external32", in, insize, pos, out, count, dt);
    if (mode == MODE_LARGE) {
        int64_t p = *pos;
        int rc = unpack_c(in, insize, &p, out, count, dt, MPI_COMM_WORLD);
        *pos = (MPI_Aint)p;
        return rc;
    }
    int p = (int)*pos;
    int rc = MPI_Unpack(in, (int)insize, &p, out, count, dt, MPI_COMM_WORLD);
    *pos = p;
    return rc;
}

struct result {
    int rc[2];
    MPI_Aint pos[2];
    unsigned char *bytes; /* packed buffer (OUTSZ) or unpacked region (REGION) */
};

static void result_check(const struct result *got, const struct result *ref, size_t n, const char *what)
{
    for (int i = 0; i < 2; i++) {
        CHECK(error_class(got->rc[i]) == error_class(ref->rc[i]), "%s call %d: class %d, host %d", what, i,
              error_class(got->rc[i]), error_class(ref->rc[i]));
        CHECK(got->pos[i] == ref->pos[i], "%s call %d: position %ld, host %ld", what, i, (long)got->pos[i],
              (long)ref->pos[i]);
    }
    check_bytes(got->bytes, ref->bytes, n, "%s", what);
}

/* Two packs: from place 0, then from place 1, appended from P0. */
static struct result run_pack(int mode, struct dtype *t, int count, int inkind, int outkind)
{
    struct result r;
    unsigned char *in = mem_alloc(inkind, REGION);
    unsigned char *out = mem_alloc(outkind, OUTSZ);
    mem_pattern(in, REGION, 0, 11);
    mem_poison(out, OUTSZ);
    MPI_Aint pos = P0;
    r.rc[0] = do_pack(mode, in + place(0), count, t->dt, out, &pos);
    r.pos[0] = pos;
    r.rc[1] = do_pack(mode, in + place(1), count, t->dt, out, &pos);
    r.pos[1] = pos;
    r.bytes = mem_fetch(out, OUTSZ);
    mem_free(in);
    mem_free(out);
    return r;
}

/* Two unpacks of `packed` (what run_pack made on the host): the first goes to place 1, the
 * second to place 0, in a region poisoned with the gap pattern. */
static struct result run_unpack(int mode, struct dtype *t, int count, const unsigned char *packed, MPI_Aint end,
                                int inkind, int outkind)
{
    struct result r;
    unsigned char *in = mem_alloc(inkind, OUTSZ);
    unsigned char *out = mem_alloc(outkind, REGION);
    mem_put(in, packed, OUTSZ);
    mem_gap(out, REGION, 7);
    MPI_Aint pos = P0;
    r.rc[0] = do_unpack(mode, in, end, &pos, out + place(1), count, t->dt);
    r.pos[0] = pos;
    r.rc[1] = do_unpack(mode, in, end, &pos, out + place(0), count, t->dt);
    r.pos[1] = pos;
    r.bytes = mem_fetch(out, REGION);
    mem_free(in);
    mem_free(out);
    return r;
}

static const int placements[3][2] = {{MEM_DEVICE, MEM_HOST}, {MEM_HOST, MEM_DEVICE}, {MEM_DEVICE, MEM_DEVICE}};

static void case_one(int mode, struct dtype *t, int count)
{
    char what[160];
    struct result ref = run_pack(mode, t, count, MEM_HOST, MEM_HOST);
    CHECK(ref.rc[0] == MPI_SUCCESS && ref.rc[1] == MPI_SUCCESS, "host pack %s %s x%d failed", mode_name[mode], t->name, count);
    if (count > 0)
        CHECK(ref.pos[1] > ref.pos[0] && ref.pos[0] > P0, "host pack %s %s x%d wrote nothing", mode_name[mode], t->name, count);
    for (int k = 0; k < 3; k++) {
        snprintf(what, sizeof what, "pack %s %s x%d %s->%s", mode_name[mode], t->name, count,
                 mem_kind_name(placements[k][0]), mem_kind_name(placements[k][1]));
        struct result got = run_pack(mode, t, count, placements[k][0], placements[k][1]);
        result_check(&got, &ref, OUTSZ, what);
        free(got.bytes);
    }
    struct result uref = run_unpack(mode, t, count, ref.bytes, ref.pos[1], MEM_HOST, MEM_HOST);
    CHECK(uref.rc[0] == MPI_SUCCESS && uref.rc[1] == MPI_SUCCESS, "host unpack %s %s x%d failed", mode_name[mode], t->name, count);
    CHECK(uref.pos[1] == ref.pos[1], "host unpack %s %s x%d ends at %ld, not %ld", mode_name[mode], t->name, count,
          (long)uref.pos[1], (long)ref.pos[1]);
    for (int k = 0; k < 3; k++) {
        snprintf(what, sizeof what, "unpack %s %s x%d %s->%s", mode_name[mode], t->name, count,
                 mem_kind_name(placements[k][0]), mem_kind_name(placements[k][1]));
        struct result got = run_unpack(mode, t, count, ref.bytes, ref.pos[1], placements[k][0], placements[k][1]);
        result_check(&got, &uref, REGION, what);
        free(got.bytes);
    }
    free(ref.bytes);
    free(uref.bytes);
}

/* Arguments the library refuses or treats specially: the device run must answer as the host. */
static void bad_arguments(void)
{
    int in[8], out_h[8];
    pattern_fill(in, sizeof in, 0, 3);
    int *in_d = mem_alloc(MEM_DEVICE, sizeof in), *out_d = mem_alloc(MEM_DEVICE, sizeof out_h);
    mem_put(in_d, in, sizeof in);
    struct { const char *what; int count, outsize, pos; } cases[] = {
        {"negative count", -1, 32, 0},
        {"position past outsize, nothing to pack", 0, 16, 20},
        {"position past outsize", 1, 16, 20},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int ph = cases[c].pos, pd = cases[c].pos;
        poison_fill(out_h, sizeof out_h);
        mem_poison(out_d, sizeof out_h);
        int rh = MPI_Pack(in, cases[c].count, MPI_INT, out_h, cases[c].outsize, &ph, MPI_COMM_WORLD);
        int rd = MPI_Pack(in_d, cases[c].count, MPI_INT, out_d, cases[c].outsize, &pd, MPI_COMM_WORLD);
        CHECK(error_class(rd) == error_class(rh), "pack, %s: class %d, host %d", cases[c].what, error_class(rd), error_class(rh));
        CHECK(pd == ph, "pack, %s: position %d, host %d", cases[c].what, pd, ph);
        unsigned char *got = mem_fetch(out_d, sizeof out_h);
        check_bytes(got, out_h, sizeof out_h, "pack, %s", cases[c].what);
        free(got);
        ph = pd = cases[c].pos;
        pattern_fill(out_h, sizeof out_h, 0, 5);
        mem_put(out_d, out_h, sizeof out_h);
        rh = MPI_Unpack(in, cases[c].outsize, &ph, out_h, cases[c].count, MPI_INT, MPI_COMM_WORLD);
        rd = MPI_Unpack(in_d, cases[c].outsize, &pd, out_d, cases[c].count, MPI_INT, MPI_COMM_WORLD);
        CHECK(error_class(rd) == error_class(rh), "unpack, %s: class %d, host %d", cases[c].what, error_class(rd), error_class(rh));
        CHECK(pd == ph, "unpack, %s: position %d, host %d", cases[c].what, pd, ph);
    }
    mem_free(in_d);
    mem_free(out_d);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    pack_c = (pack_c_t)dlsym(RTLD_DEFAULT, "MPI_Pack_c");
    unpack_c = (unpack_c_t)dlsym(RTLD_DEFAULT, "MPI_Unpack_c");
    if (!pack_c || !unpack_c) note("no MPI_Pack_c/MPI_Unpack_c in this process: large-count forms not tested");
    make_types();
    static const int counts[] = {0, 1, 3};
    /* MPICH 4.0 and 5.0 stop (SIGILL) in MPI_Unpack_external on struct types, host buffers
     * alike. */
    int external_structs = strstr(mpi_library_name(), "MPICH") == NULL;
    if (!external_structs) note("MPICH: struct types not tested in external32 (the library stops on them)");
    for (int mode = 0; mode < MODE_N; mode++) {
        if (mode == MODE_LARGE && (!pack_c || !unpack_c)) continue;
        for (int i = 0; i < ntypes; i++)
            if (mode != MODE_EXTERNAL || external_structs || !types[i].is_struct)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) case_one(mode, &types[i], counts[c]);
    }
    bad_arguments();
    for (int i = 0; i < ntypes; i++)
        if (types[i].dt != MPI_INT && types[i].dt != MPI_DOUBLE) MPI_Type_free(&types[i].dt);
    return report_and_finalize();
}
