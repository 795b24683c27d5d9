// cudampi-test: ranks=2,3,4 without-shim=crash link=yes timeout=180
/* Halo exchanges with nonblocking point-to-point, as a stencil code does them: every rank posts
 * MPI_Irecv for its halos, then MPI_Isend of its boundary, then one MPI_Waitall over all the
 * requests. Several iterations, the owned data changes every iteration; each configuration is
 * compared byte for byte with the expected neighbour data and with a host-only run of the same
 * exchange in the same program.
 *
 * 1-D: a periodic ring. Each rank owns an array of M doubles and has a left and a right halo
 *      buffer (WMAX doubles + poisoned slack); iteration i exchanges w(i) doubles each way
 *      (1 ... 65536 doubles). Sends go from the start and from the end of the owned array
 *      (interior pointers of the allocation). Placements (owned, left halo, right halo):
 *      HHH (the reference), DDD, DDH, HHD, and by rank parity DHD / HDH, so one MPI_Waitall
 *      holds host and device requests, and neighbours disagree about where their data lives.
 *      With 2 ranks both neighbours are the same rank (distinguished by tag).
 * 2-D: a periodic Cartesian grid (MPI_Dims_create, MPI_Cart_shift). Each rank holds one
 *      (ny+2) x (nx+2) array of doubles with its halos in place: rows are exchanged as
 *      contiguous doubles, columns with an MPI_Type_vector straight from and into the array.
 *      The corners are not exchanged and must stay poison. Placements: all host (reference),
 *      all device, device on even ranks and host on odd ones. Where the grid is one rank wide
 *      the rank exchanges with itself.
 * Received statuses (source, tag, count) are checked and compared with the host run. */
#include "common.h"

#define SLACK 16
#define TAG1_FROM_LEFT 11  /* travels rightwards: fills the receiver's left halo */
#define TAG1_FROM_RIGHT 12 /* travels leftwards: fills the receiver's right halo */

/* ------------------------------------------------------------------------------------------ */
/* 1-D ring                                                                                   */

#define ITERS1 10
static const int widths[5] = {1, 5, 513, 8192 + 1, 65536};
#define WMAX 65536
#define M1 (2 * WMAX + 24) /* owned doubles */

static void ring(MPI_Comm comm, const int kinds[3], struct trace *tr)
{
    int left = (t_rank - 1 + t_size) % t_size, right = (t_rank + 1) % t_size;
    size_t ub = (size_t)M1 * sizeof(double), hb = (size_t)WMAX * sizeof(double) + SLACK;
    char *u = (char *)mem_alloc(kinds[0], ub);
    char *lh = (char *)mem_alloc(kinds[1], hb), *rh = (char *)mem_alloc(kinds[2], hb);
    unsigned char *img = (unsigned char *)xmalloc(ub);
    for (int it = 0; it < ITERS1; it++) {
        int w = widths[it % 5];
        size_t wb = (size_t)w * sizeof(double);
        char lab[200];
        pattern_fill(img, ub, t_rank, it); /* the same data in every configuration */
        mem_put(u, img, ub);
        mem_poison(lh, hb);
        mem_poison(rh, hb);
        MPI_Request rq[4];
        MPI_Status st[4];
        for (int i = 0; i < 4; i++) status_init(&st[i]);
        MPI_CHECK(MPI_Irecv(lh, w, MPI_DOUBLE, left, TAG1_FROM_LEFT, comm, &rq[0]));
        MPI_CHECK(MPI_Irecv(rh, w, MPI_DOUBLE, right, TAG1_FROM_RIGHT, comm, &rq[1]));
        MPI_CHECK(MPI_Isend(u, w, MPI_DOUBLE, left, TAG1_FROM_RIGHT, comm, &rq[2]));
        MPI_CHECK(MPI_Isend(u + ub - wb, w, MPI_DOUBLE, right, TAG1_FROM_LEFT, comm, &rq[3]));
        MPI_CHECK(MPI_Waitall(4, rq, st));

        /* expected: the left neighbour's last w doubles, the right neighbour's first w */
        unsigned char *e = (unsigned char *)xmalloc(ub > hb ? ub : hb);
        unsigned char *g = mem_fetch(lh, hb);
        pattern_fill(e, ub, left, it);
        memmove(e, e + ub - wb, wb);
        poison_fill(e + wb, hb - wb);
        snprintf(lab, sizeof lab, "ring iteration %d, %d doubles: left halo", it, w);
        check_bytes(g, e, hb, "%s (from rank %d)", lab, left);
        check_status(&st[0], MPI_DOUBLE, left, TAG1_FROM_LEFT, w, "%s", lab);
        trace_add(tr, lab, g, hb, &st[0], MPI_DOUBLE, MPI_SUCCESS);
        free(g);

        g = mem_fetch(rh, hb);
        pattern_fill(e, wb, right, it);
        poison_fill(e + wb, hb - wb);
        snprintf(lab, sizeof lab, "ring iteration %d, %d doubles: right halo", it, w);
        check_bytes(g, e, hb, "%s (from rank %d)", lab, right);
        check_status(&st[1], MPI_DOUBLE, right, TAG1_FROM_RIGHT, w, "%s", lab);
        trace_add(tr, lab, g, hb, &st[1], MPI_DOUBLE, MPI_SUCCESS);
        free(g);

        /* the sends left the owned array as it was */
        g = mem_fetch(u, ub);
        snprintf(lab, sizeof lab, "ring iteration %d: owned array after the sends", it);
        check_bytes(g, img, ub, "%s", lab);
        free(g);
        free(e);
        for (int i = 0; i < 4; i++)
            CHECK(rq[i] == MPI_REQUEST_NULL, "ring iteration %d: request %d not freed", it, i);
    }
    free(img);
    mem_free(u);
    mem_free(lh);
    mem_free(rh);
}

/* ------------------------------------------------------------------------------------------ */
/* 2-D grid                                                                                   */

#define ITERS2 8
static const int sizes2[4][2] = {{1, 1}, {4, 3}, {33, 17}, {130, 64}}; /* nx, ny */
enum { TOP, BOTTOM, LEFT, RIGHT }; /* tags: the halo the message fills at its receiver */

/* byte image of a rank's array for iteration it: poison, interior from the (rank, it) pattern */
static void grid_image(unsigned char *img, int rank, int it, int nx, int ny)
{
    size_t rowb = (size_t)(nx + 2) * sizeof(double);
    size_t ib = (size_t)nx * ny * sizeof(double);
    unsigned char *in = pattern_new(ib, rank, it);
    poison_fill(img, rowb * (ny + 2));
    for (int i = 1; i <= ny; i++)
        memcpy(img + i * rowb + sizeof(double), in + (size_t)(i - 1) * nx * sizeof(double),
               (size_t)nx * sizeof(double));
    free(in);
}

static void grid(MPI_Comm cart, int kind, int cfg, struct trace *tr)
{
    int north, south, west, east;
    MPI_Cart_shift(cart, 0, 1, &north, &south);
    MPI_Cart_shift(cart, 1, 1, &west, &east);
    size_t maxb = (size_t)(130 + 2) * (64 + 2) * sizeof(double);
    char *a = (char *)mem_alloc(kind, maxb);
    for (int it = 0; it < ITERS2; it++) {
        int nx = sizes2[it % 4][0], ny = sizes2[it % 4][1];
        size_t rowb = (size_t)(nx + 2) * sizeof(double), ab = rowb * (ny + 2);
        const size_t D = sizeof(double);
        char lab[200];
        MPI_Datatype col;
        MPI_CHECK(MPI_Type_vector(ny, 1, nx + 2, MPI_DOUBLE, &col));
        MPI_CHECK(MPI_Type_commit(&col));
        unsigned char *img = (unsigned char *)xmalloc(ab);
        grid_image(img, t_rank, it, nx, ny);
        mem_put(a, img, ab);
        MPI_Request rq[8];
        MPI_Status st[8];
        for (int i = 0; i < 8; i++) status_init(&st[i]);
        /* receives into the halos */
        MPI_CHECK(MPI_Irecv(a + D, nx, MPI_DOUBLE, north, TOP, cart, &rq[0]));
        MPI_CHECK(MPI_Irecv(a + (ny + 1) * rowb + D, nx, MPI_DOUBLE, south, BOTTOM, cart, &rq[1]));
        MPI_CHECK(MPI_Irecv(a + rowb, 1, col, west, LEFT, cart, &rq[2]));
        MPI_CHECK(MPI_Irecv(a + rowb + (nx + 1) * D, 1, col, east, RIGHT, cart, &rq[3]));
        /* sends of the boundary: row 1 northwards fills the north's bottom halo, ... */
        MPI_CHECK(MPI_Isend(a + rowb + D, nx, MPI_DOUBLE, north, BOTTOM, cart, &rq[4]));
        MPI_CHECK(MPI_Isend(a + ny * rowb + D, nx, MPI_DOUBLE, south, TOP, cart, &rq[5]));
        MPI_CHECK(MPI_Isend(a + rowb + D, 1, col, west, RIGHT, cart, &rq[6]));
        MPI_CHECK(MPI_Isend(a + rowb + nx * D, 1, col, east, LEFT, cart, &rq[7]));
        MPI_CHECK(MPI_Waitall(8, rq, st));

        /* expected image */
        unsigned char *e = (unsigned char *)xmalloc(ab), *nb = (unsigned char *)xmalloc(ab);
        memcpy(e, img, ab);
        grid_image(nb, north, it, nx, ny); /* its last interior row -> my top halo */
        memcpy(e + D, nb + ny * rowb + D, nx * D);
        grid_image(nb, south, it, nx, ny); /* its first interior row -> my bottom halo */
        memcpy(e + (ny + 1) * rowb + D, nb + rowb + D, nx * D);
        grid_image(nb, west, it, nx, ny); /* its last interior column -> my left halo */
        for (int i = 1; i <= ny; i++) memcpy(e + i * rowb, nb + i * rowb + nx * D, D);
        grid_image(nb, east, it, nx, ny); /* its first interior column -> my right halo */
        for (int i = 1; i <= ny; i++) memcpy(e + i * rowb + (nx + 1) * D, nb + i * rowb + D, D);
        unsigned char *g = mem_fetch(a, ab);
        snprintf(lab, sizeof lab, "grid iteration %d, %dx%d: array", it, nx, ny);
        check_bytes(g, e, ab, "%s (neighbours N %d S %d W %d E %d)", lab, north, south, west, east);
        trace_add(tr, lab, g, ab, NULL, MPI_DOUBLE, MPI_SUCCESS);
        const int src[4] = {north, south, west, east};
        for (int i = 0; i < 4; i++) {
            snprintf(lab, sizeof lab, "grid iteration %d, %dx%d: status of halo %d", it, nx, ny, i);
            if (i < 2)
                check_status(&st[i], MPI_DOUBLE, src[i], i, nx, "%s", lab);
            else
                check_status(&st[i], MPI_DOUBLE, src[i], i, ny, "%s", lab);
            trace_add(tr, lab, "", 0, &st[i], MPI_DOUBLE, MPI_SUCCESS);
        }
        free(g);
        free(e);
        free(nb);
        free(img);
        MPI_CHECK(MPI_Type_free(&col));
        (void)cfg;
    }
    mem_free(a);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    /* 1-D: {owned, left halo, right halo}; the last configuration depends on the rank */
    const int cf1[5][3] = {{MEM_HOST, MEM_HOST, MEM_HOST},
                           {MEM_DEVICE, MEM_DEVICE, MEM_DEVICE},
                           {MEM_DEVICE, MEM_DEVICE, MEM_HOST},
                           {MEM_HOST, MEM_HOST, MEM_DEVICE},
                           {-1, -1, -1}};
    const char *cn1[5] = {"HHH", "DDD", "DDH", "HHD", "DHD/HDH by rank"};
    struct trace ref = {0};
    for (int c = 0; c < 5; c++) {
        int k[3];
        if (c == 4) {
            int even = t_rank % 2 == 0;
            k[0] = even ? MEM_DEVICE : MEM_HOST;
            k[1] = even ? MEM_HOST : MEM_DEVICE;
            k[2] = even ? MEM_DEVICE : MEM_HOST;
        } else {
            memcpy(k, cf1[c], sizeof k);
        }
        struct trace got = {0};
        ring(comm, k, c == 0 ? &ref : &got);
        if (c > 0) {
            char what[64];
            snprintf(what, sizeof what, "ring %s (rank %d)", cn1[c], t_rank);
            trace_compare(&ref, &got, what);
        }
        trace_free(&got);
    }
    trace_free(&ref);

    /* 2-D */
    int dims[2] = {0, 0}, periods[2] = {1, 1};
    MPI_Comm cart;
    MPI_Dims_create(t_size, 2, dims);
    MPI_CHECK(MPI_Cart_create(comm, 2, dims, periods, 0, &cart));
    if (t_rank == 0) note("2-D grid %d x %d", dims[0], dims[1]);
    const char *cn2[3] = {"host", "device", "device on even ranks, host on odd"};
    for (int c = 0; c < 3; c++) {
        int kind = c == 0 ? MEM_HOST : c == 1 ? MEM_DEVICE : (t_rank % 2 == 0 ? MEM_DEVICE : MEM_HOST);
        struct trace got = {0};
        grid(cart, kind, c, c == 0 ? &ref : &got);
        if (c > 0) {
            char what[80];
            snprintf(what, sizeof what, "grid %s (rank %d)", cn2[c], t_rank);
            trace_compare(&ref, &got, what);
        }
        trace_free(&got);
    }
    trace_free(&ref);
    MPI_Comm_free(&cart);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
