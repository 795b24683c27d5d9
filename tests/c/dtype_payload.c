// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_STATS=1
/* Derived datatypes on device buffers move their payload, not their span, and never write a
 * gap. For every type constructor and nestings of two and three levels (vector of indexed,
 * subarray of struct, vector of vector of indexed, resized with a negative lower bound, a
 * 3-level subarray face, Fortran order, a negative stride, out-of-order displacements), a
 * message goes rank 0 -> rank 1 from a patterned device allocation into one filled with a gap
 * pattern, blocking, nonblocking, persistent (twice), after MPI_Mprobe, and as a send-receive
 * (and MPI_Sendrecv_replace) both ways; the same
 * is done on host buffers, and the whole device allocation (gaps and margins included) must
 * equal the host one byte for byte. A shorter message (one element fewer) and a message of
 * plain doubles ending mid-element check that only the bytes that arrived are written.
 * Two types whose span is hundreds of times their payload (a matrix column, a cube's x-y face)
 * take the packed staging buffer. MPI_Pack and MPI_Unpack of device buffers match the host's, and so does MPI_(I)alltoallw of
 * subarray blocks into a buffer with gaps between them. A datatype freed and its handle reused
 * for another layout is seen afresh.
 *
 * cudampi's counters: a receive copies exactly the payload to the device (bytes_to_device),
 * a send exactly the payload to the host (bytes_to_host), also for a type of many small blocks
 * that fill most of its span, which the pack kernel copies in one launch both ways (its runs
 * counted; CUDAMPI_PACK_KERNEL=0: one copy of the span); a type with no strided form (a pair
 * type with padding inside) keeps the span copy. */
#include "common.h"
#include "../../include/cudampi.h"

#define MARGIN 64

typedef int (*stats_fn)(struct cudampi_stats *);
static stats_fn get_stats;
static MPI_Comm comm;

/* What a send copies to the host: its payload, its span, either, or its payload through the
 * pack kernel (many small blocks: the kernel's runs counted too; with CUDAMPI_PACK_KERNEL=0,
 * one copy of the span instead). */
enum { PAYLOAD, SPAN, ANY, KERNEL };

struct tcase {
    const char *name;
    MPI_Datatype dt;
    int count;
    int send_copies;
    int doubles; /* made of doubles only: a message of plain doubles may fill it */
    int light;   /* a large span: blocking and nonblocking only, for time */
};

#define MAXCASES 40
static struct tcase cases[MAXCASES];
static int ncases;

static void add(const char *name, MPI_Datatype dt, int count, int send_copies, int doubles)
{
    MPI_Type_commit(&dt);
    cases[ncases++] = (struct tcase){name, dt, count, send_copies, doubles, 0};
}

static void layout(MPI_Datatype dt, int count, long *lo, size_t *len)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(dt, &lb, &ext);
    MPI_Type_get_true_extent(dt, &tlb, &text);
    long first = (long)tlb, last = (long)tlb + (long)(count - 1) * (long)ext;
    long hi = (first > last ? first : last) + (long)text;
    /* The buffer address itself lies in the allocation, as a program's does. */
    *lo = first < last ? first : last;
    if (*lo > 0) *lo = 0;
    if (hi < 1) hi = 1;
    *len = (size_t)(hi - *lo);
}

struct counters {
    uint64_t to_host, to_device, kernel_runs;
};

/* The pack kernel is on unless CUDAMPI_PACK_KERNEL=0. */
static int pack_kernel(void) { return strcmp(t_env("CUDAMPI_PACK_KERNEL", "1"), "0") != 0; }

static struct counters counters(void)
{
    struct cudampi_stats s;
    struct counters c = {0, 0, 0};
    if (get_stats && get_stats(&s) == 0) {
        c.to_host = s.bytes_to_host;
        c.to_device = s.bytes_to_device;
        c.kernel_runs = s.kernel_runs;
    }
    return c;
}

enum { BLOCKING, NONBLOCKING, PERSISTENT, MATCHED, MODES };
static const char *mode_name[] = {"blocking", "nonblocking", "persistent", "MPI_Mprobe + MPI_Mrecv"};

static void send_one(void *buf, int count, MPI_Datatype dt, int mode, int tag)
{
    MPI_Request r;
    switch (mode) {
    case BLOCKING:
    case MATCHED:
        MPI_CHECK(MPI_Send(buf, count, dt, 1, tag, comm));
        break;
    case NONBLOCKING:
        MPI_CHECK(MPI_Isend(buf, count, dt, 1, tag, comm, &r));
        MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        break;
    case PERSISTENT:
        MPI_CHECK(MPI_Send_init(buf, count, dt, 1, tag, comm, &r));
        MPI_CHECK(MPI_Start(&r));
        MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Start(&r));
        MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Request_free(&r));
        break;
    }
}

/* Receives into buf (whose allocation `alloc` of `total` bytes is re-filled with the gap
 * pattern before a persistent request's second start); returns the count of elements of the
 * last message. */
static int recv_one(void *buf, int count, MPI_Datatype dt, int mode, int tag, void *alloc, size_t total, int seed)
{
    MPI_Request r;
    MPI_Status st;
    int n = -1;
    switch (mode) {
    case BLOCKING:
        MPI_CHECK(MPI_Recv(buf, count, dt, 0, tag, comm, &st));
        break;
    case NONBLOCKING:
        MPI_CHECK(MPI_Irecv(buf, count, dt, 0, tag, comm, &r));
        MPI_CHECK(MPI_Wait(&r, &st));
        break;
    case MATCHED: {
        MPI_Message msg;
        MPI_CHECK(MPI_Mprobe(0, tag, comm, &msg, &st));
        MPI_CHECK(MPI_Mrecv(buf, count, dt, &msg, &st));
        break;
    }
    case PERSISTENT:
        MPI_CHECK(MPI_Recv_init(buf, count, dt, 0, tag, comm, &r));
        MPI_CHECK(MPI_Start(&r));
        MPI_CHECK(MPI_Wait(&r, &st));
        mem_gap(alloc, total, seed);
        MPI_CHECK(MPI_Start(&r));
        MPI_CHECK(MPI_Wait(&r, &st));
        MPI_CHECK(MPI_Request_free(&r));
        break;
    }
    MPI_Get_count(&st, MPI_BYTE, &n);
    return n;
}

/* One message rank 0 -> rank 1 of `sendcount` elements (or `doubles` plain doubles when > 0)
 * into `c->count` elements, on device buffers and then on host buffers. */
static void one_way(const struct tcase *c, int mode, int sendcount, int doubles, int seed)
{
    long lo;
    size_t len;
    layout(c->dt, c->count, &lo, &len);
    size_t total = len + 2 * MARGIN;
    size_t payload = type_size(c->dt) * (size_t)c->count;
    size_t sent = doubles > 0 ? (size_t)doubles * 8 : type_size(c->dt) * (size_t)sendcount;
    int tag = 100 + seed;
    char what[200];
    snprintf(what, sizeof what, "%s x%d, %s, %s", c->name, c->count, mode_name[mode],
             doubles > 0 ? "plain doubles" : sendcount < c->count ? "one element fewer" : "whole");
    if (t_rank == 0) {
        unsigned char *d = mem_alloc(MEM_DEVICE, total);
        unsigned char *h = pattern_new(total, 0, seed);
        mem_put(d, h, total);
        struct counters before = counters();
        if (doubles > 0)
            send_one(d + MARGIN, doubles, MPI_DOUBLE, mode, tag);
        else
            send_one(d + MARGIN - lo, sendcount, c->dt, mode, tag);
        struct counters after = counters();
        size_t times = mode == PERSISTENT ? 2 : 1;
        if (get_stats && doubles == 0 && c->send_copies != ANY) {
            long slo;
            size_t slen;
            layout(c->dt, sendcount, &slo, &slen);
            int kernel = c->send_copies == KERNEL && pack_kernel();
            size_t want = (c->send_copies == PAYLOAD || kernel ? sent : slen) * times;
            CHECK(after.to_host - before.to_host == want, "%s: the send copied %llu bytes to the host, expected %zu (payload %zu, span %zu)",
                  what, (unsigned long long)(after.to_host - before.to_host), want, sent * times, slen * times);
            if (kernel)
                CHECK(after.kernel_runs > before.kernel_runs, "%s: the pack kernel copied no run", what);
        }
        if (doubles > 0)
            send_one(h + MARGIN, doubles, MPI_DOUBLE, mode, tag);
        else
            send_one(h + MARGIN - lo, sendcount, c->dt, mode, tag);
        mem_free(d);
        free(h);
    } else if (t_rank == 1) {
        unsigned char *d = mem_alloc(MEM_DEVICE, total);
        unsigned char *h = xmalloc(total);
        mem_gap(d, total, seed);
        gap_fill(h, total, seed);
        struct counters before = counters();
        int nd = recv_one(d + MARGIN - lo, c->count, c->dt, mode, tag, d, total, seed);
        struct counters after = counters();
        int nh = recv_one(h + MARGIN - lo, c->count, c->dt, mode, tag, NULL, 0, seed);
        CHECK(nd == nh && (size_t)nh == sent, "%s: %d bytes reported on the device, %d on the host, %zu sent", what, nd, nh, sent);
        unsigned char *got = mem_fetch(d, total);
        check_bytes(got, h, total, "%s: device allocation against the host one", what);
        size_t times = mode == PERSISTENT ? 2 : 1;
        if (get_stats && c->send_copies != ANY && doubles == 0)
            CHECK(after.to_device - before.to_device == sent * times,
                  "%s: the receive copied %llu bytes to the device, expected the %zu bytes that arrived (payload %zu, span %zu)",
                  what, (unsigned long long)(after.to_device - before.to_device), sent * times, payload, len);
        if (get_stats && c->send_copies == KERNEL && pack_kernel() && doubles == 0)
            CHECK(after.kernel_runs > before.kernel_runs, "%s: the pack kernel unpacked no run", what);
        free(got);
        mem_free(d);
        free(h);
    }
}

/* Both ranks send each other c->count elements with MPI_Sendrecv, device then host. */
static void exchange(const struct tcase *c, int seed)
{
    long lo;
    size_t len;
    layout(c->dt, c->count, &lo, &len);
    size_t total = len + 2 * MARGIN;
    int peer = 1 - t_rank;
    unsigned char *ds = mem_alloc(MEM_DEVICE, total), *dr = mem_alloc(MEM_DEVICE, total);
    unsigned char *hs = pattern_new(total, t_rank, seed), *hr = xmalloc(total);
    mem_put(ds, hs, total);
    mem_gap(dr, total, seed);
    gap_fill(hr, total, seed);
    struct counters before = counters();
    MPI_CHECK(MPI_Sendrecv(ds + MARGIN - lo, c->count, c->dt, peer, 7, dr + MARGIN - lo, c->count, c->dt, peer, 7, comm, MPI_STATUS_IGNORE));
    struct counters after = counters();
    MPI_CHECK(MPI_Sendrecv(hs + MARGIN - lo, c->count, c->dt, peer, 8, hr + MARGIN - lo, c->count, c->dt, peer, 8, comm, MPI_STATUS_IGNORE));
    unsigned char *got = mem_fetch(dr, total);
    check_bytes(got, hr, total, "%s x%d, MPI_Sendrecv: device allocation against the host one", c->name, c->count);
    free(got);
    /* MPI_Sendrecv_replace: the received blocks replace the sent ones, the gaps stay. */
    mem_put(ds, hs, total);
    MPI_CHECK(MPI_Sendrecv_replace(ds + MARGIN - lo, c->count, c->dt, peer, 9, peer, 9, comm, MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Sendrecv_replace(hs + MARGIN - lo, c->count, c->dt, peer, 10, peer, 10, comm, MPI_STATUS_IGNORE));
    got = mem_fetch(ds, total);
    check_bytes(got, hs, total, "%s x%d, MPI_Sendrecv_replace: device allocation against the host one", c->name, c->count);
    size_t payload = type_size(c->dt) * (size_t)c->count;
    if (get_stats && c->send_copies == PAYLOAD)
        CHECK(after.to_host - before.to_host == payload && after.to_device - before.to_device == payload,
              "%s x%d, MPI_Sendrecv: %llu bytes to the host and %llu to the device, expected the payload %zu each (span %zu)", c->name,
              c->count, (unsigned long long)(after.to_host - before.to_host), (unsigned long long)(after.to_device - before.to_device),
              payload, len);
    free(got);
    free(hs);
    free(hr);
    mem_free(ds);
    mem_free(dr);
}

/* MPI_Pack from and MPI_Unpack into device buffers, against the host's (rank 0 alone). */
static void packing(const struct tcase *c, int seed)
{
    long lo;
    size_t len;
    layout(c->dt, c->count, &lo, &len);
    size_t total = len + 2 * MARGIN;
    int bound = 0;
    MPI_Pack_size(c->count, c->dt, comm, &bound);
    unsigned char *d = mem_alloc(MEM_DEVICE, total), *h = pattern_new(total, 0, seed);
    mem_put(d, h, total);
    unsigned char *pd = xmalloc((size_t)bound), *ph = xmalloc((size_t)bound);
    int posd = 0, posh = 0;
    MPI_CHECK(MPI_Pack(d + MARGIN - lo, c->count, c->dt, pd, bound, &posd, comm));
    MPI_CHECK(MPI_Pack(h + MARGIN - lo, c->count, c->dt, ph, bound, &posh, comm));
    if (CHECK(posd == posh, "%s: MPI_Pack of the device buffer reached %d, the host's %d", c->name, posd, posh))
        check_bytes(pd, ph, (size_t)posh, "%s: MPI_Pack of the device buffer against the host's", c->name);
    /* Unpack the host's packed bytes into gap-filled buffers. */
    mem_gap(d, total, seed + 1);
    gap_fill(h, total, seed + 1);
    posd = posh = 0;
    MPI_CHECK(MPI_Unpack(ph, bound, &posd, d + MARGIN - lo, c->count, c->dt, comm));
    MPI_CHECK(MPI_Unpack(ph, bound, &posh, h + MARGIN - lo, c->count, c->dt, comm));
    unsigned char *got = mem_fetch(d, total);
    check_bytes(got, h, total, "%s: MPI_Unpack into the device buffer against the host's", c->name);
    free(got);
    free(pd);
    free(ph);
    free(h);
    mem_free(d);
}

static void build(void)
{
    MPI_Datatype t, u, v;

    MPI_Type_vector(64, 1, 64, MPI_DOUBLE, &t);
    add("column vector(64,1,64,double)", t, 1, PAYLOAD, 1);
    MPI_Type_vector(64, 1, 64, MPI_DOUBLE, &t);
    MPI_Type_create_resized(t, 0, 8, &u);
    MPI_Type_free(&t);
    add("columns resized to one double", u, 3, PAYLOAD, 1);

    MPI_Type_vector(8, 2, 5, MPI_INT, &t);
    add("vector(8,2,5,int)", t, 3, PAYLOAD, 0);

    MPI_Type_create_hvector(6, 1, -24, MPI_DOUBLE, &t);
    add("hvector(6,1,-24 bytes,double)", t, 2, PAYLOAD, 1);

    MPI_Type_contiguous(7, MPI_SHORT, &t);
    add("contiguous(7,short)", t, 4, PAYLOAD, 0);

    {
        int bl[3] = {3, 1, 2}, di[3] = {10, 0, 5};
        MPI_Type_indexed(3, bl, di, MPI_DOUBLE, &t);
        add("indexed({3,1,2},{10,0,5},double)", t, 2, PAYLOAD, 1);
    }
    {
        MPI_Aint di[3] = {40, 0, -16};
        int bl[3] = {2, 1, 1};
        MPI_Type_create_hindexed(3, bl, di, MPI_INT, &t);
        add("hindexed({2,1,1},{40,0,-16},int)", t, 2, PAYLOAD, 0);
    }
    {
        /* Irregular blocks, too many for one copy each: the pack kernel, in 4-byte words for
         * int, in bytes for char blocks of odd lengths at odd places; gaps of every size. */
        int bl[150], di[150], at = 0;
        for (int i = 0; i < 150; i++) {
            bl[i] = 1 + (i * 7) % 5;
            di[i] = at + i % 4;
            at = di[i] + bl[i] + (i % 3 == 0 ? 9 : 1);
        }
        MPI_Type_indexed(150, bl, di, MPI_INT, &t);
        add("indexed(150 irregular blocks, int)", t, 2, KERNEL, 0);
        MPI_Type_indexed(150, bl, di, MPI_CHAR, &t);
        add("indexed(150 irregular blocks, char)", t, 3, KERNEL, 0);
    }
    {
        int di[4] = {6, 0, 12, 3};
        MPI_Type_create_indexed_block(4, 2, di, MPI_INT, &t);
        add("indexed_block(4,2,{6,0,12,3},int)", t, 2, PAYLOAD, 0);
    }
    {
        MPI_Aint di[3] = {32, 0, 16};
        MPI_Type_create_hindexed_block(3, 1, di, MPI_DOUBLE, &t);
        add("hindexed_block(3,1,{32,0,16},double)", t, 2, PAYLOAD, 1);
    }
    {
        int bl[3] = {1, 2, 3};
        MPI_Aint di[3] = {0, 8, 24};
        MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_Type_create_struct(3, bl, di, ty, &t);
        MPI_Type_create_resized(t, 0, 32, &u);
        MPI_Type_free(&t);
        MPI_Type_dup(u, &v);
        add("struct{int;double[2];char[3]} resized to 32", u, 5, PAYLOAD, 0);
        add("dup of it, 40 of them (dense: the pack kernel)", v, 40, KERNEL, 0);
    }
    {
        int sizes[3] = {8, 16, 16}, sub[3] = {8, 1, 16}, starts[3] = {0, 5, 0};
        MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
        add("subarray x-z face of 8x16x16 doubles", t, 1, PAYLOAD, 1);
        int sub2[3] = {8, 16, 1}, starts2[3] = {0, 0, 7};
        MPI_Type_create_subarray(3, sizes, sub2, starts2, MPI_ORDER_C, MPI_DOUBLE, &t);
        add("subarray x-y face of 8x16x16 doubles (3 levels)", t, 1, PAYLOAD, 1);
    }
    {
        int sizes[2] = {10, 12}, sub[2] = {4, 5}, starts[2] = {3, 2};
        MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_FORTRAN, MPI_INT, &t);
        add("subarray 4x5 of 10x12 ints, Fortran order", t, 2, PAYLOAD, 0);
    }
    {
        int bl[2] = {2, 1}, di[2] = {0, 3};
        MPI_Type_indexed(2, bl, di, MPI_INT, &t);
        MPI_Type_vector(5, 1, 3, t, &u);
        add("vector(5,1,3) of indexed({2,1},{0,3},int)", u, 2, PAYLOAD, 0);
        MPI_Type_vector(4, 1, 3, t, &u);
        MPI_Type_create_hvector(3, 1, 1000, u, &v);
        MPI_Type_free(&u);
        add("hvector(3,1,1000) of vector(4,1,3) of indexed (3 levels)", v, 1, PAYLOAD, 0);
        MPI_Type_free(&t);
    }
    {
        int bl[2] = {1, 1};
        MPI_Aint di[2] = {0, 8};
        MPI_Datatype ty[2] = {MPI_DOUBLE, MPI_INT};
        MPI_Type_create_struct(2, bl, di, ty, &t);
        MPI_Type_create_resized(t, 0, 16, &u);
        MPI_Type_free(&t);
        int sizes[2] = {6, 6}, sub[2] = {3, 2}, starts[2] = {1, 2};
        MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, u, &v);
        MPI_Type_free(&u);
        add("subarray 3x2 of 6x6 struct{double;int}", v, 1, PAYLOAD, 0);
    }
    {
        MPI_Aint di[2] = {-40, 8};
        MPI_Type_create_hindexed_block(2, 1, di, MPI_DOUBLE, &t);
        MPI_Type_create_resized(t, -40, 64, &u);
        MPI_Type_free(&t);
        add("hindexed_block({-40,8},double) resized to lb -40, extent 64", u, 3, PAYLOAD, 1);
    }
    /* Spans of several MiB around a small payload stage through a packed buffer. */
    MPI_Type_vector(1024, 1, 1024, MPI_DOUBLE, &t);
    add("column of a 1024x1024 matrix (sparse span)", t, 1, PAYLOAD, 1);
    {
        int sizes[3] = {96, 96, 96}, sub[3] = {96, 96, 1}, starts[3] = {0, 0, 95};
        MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
        add("x-y face of 96^3 doubles (sparse span)", t, 1, PAYLOAD, 1);
        cases[ncases - 1].light = cases[ncases - 2].light = 1;
    }
    MPI_Type_vector(4, 1, 2, MPI_SHORT_INT, &t);
    add("vector(4,1,2,MPI_SHORT_INT) (no strided form: padding inside the pair)", t, 2, ANY, 0);
}

/* MPI_Alltoallw (blocking and nonblocking) of subarray blocks of a ROWS x COLS matrix into a
 * ROWS x (COLS + t_size) one: one column of gap after each peer's block stays untouched, and
 * the counters count the payload. */
#define ROWS 6
#define COLS 8
static void alltoallw(int seed)
{
    int w = COLS / t_size, rw = COLS + t_size;
    MPI_Datatype *st = xmalloc(sizeof(MPI_Datatype) * (size_t)t_size), *rt = xmalloc(sizeof(MPI_Datatype) * (size_t)t_size);
    int *counts = xmalloc(sizeof(int) * (size_t)t_size), *displs = xmalloc(sizeof(int) * (size_t)t_size);
    for (int p = 0; p < t_size; p++) {
        int sizes[2] = {ROWS, COLS}, sub[2] = {ROWS, w}, starts[2] = {0, p * w};
        MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &st[p]);
        int rsizes[2] = {ROWS, rw}, rstarts[2] = {0, p * (w + 1)};
        MPI_Type_create_subarray(2, rsizes, sub, rstarts, MPI_ORDER_C, MPI_DOUBLE, &rt[p]);
        MPI_Type_commit(&st[p]);
        MPI_Type_commit(&rt[p]);
        counts[p] = 1;
        displs[p] = 0;
    }
    size_t sbytes = ROWS * COLS * 8, rbytes = (size_t)ROWS * (size_t)rw * 8, payload = (size_t)ROWS * (size_t)w * 8 * (size_t)t_size;
    for (int nb = 0; nb < 2; nb++) {
        unsigned char *ds = mem_alloc(MEM_DEVICE, sbytes), *dr = mem_alloc(MEM_DEVICE, rbytes);
        unsigned char *hs = pattern_new(sbytes, t_rank, seed + nb), *hr = xmalloc(rbytes);
        mem_put(ds, hs, sbytes);
        mem_gap(dr, rbytes, seed + nb);
        gap_fill(hr, rbytes, seed + nb);
        struct counters before = counters();
        if (nb) {
            MPI_Request r;
            MPI_CHECK(MPI_Ialltoallw(ds, counts, displs, st, dr, counts, displs, rt, comm, &r));
            MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            MPI_CHECK(MPI_Alltoallw(ds, counts, displs, st, dr, counts, displs, rt, comm));
        }
        struct counters after = counters();
        MPI_CHECK(MPI_Alltoallw(hs, counts, displs, st, hr, counts, displs, rt, comm));
        unsigned char *got = mem_fetch(dr, rbytes);
        check_bytes(got, hr, rbytes, "%s of subarray blocks: device receive buffer against the host one", nb ? "MPI_Ialltoallw" : "MPI_Alltoallw");
        if (get_stats)
            CHECK(after.to_host - before.to_host == payload && after.to_device - before.to_device == payload,
                  "%s: %llu bytes to the host and %llu to the device, expected the payload %zu each (receive span %zu)",
                  nb ? "MPI_Ialltoallw" : "MPI_Alltoallw", (unsigned long long)(after.to_host - before.to_host),
                  (unsigned long long)(after.to_device - before.to_device), payload, rbytes);
        free(got);
        free(hs);
        free(hr);
        mem_free(ds);
        mem_free(dr);
    }
    for (int p = 0; p < t_size; p++) {
        MPI_Type_free(&st[p]);
        MPI_Type_free(&rt[p]);
    }
    free(st);
    free(rt);
    free(counts);
    free(displs);
}

/* A freed datatype's handle, reused for another layout, is not taken for the old one. */
static void reuse(int seed)
{
    for (int round = 0; round < 3; round++) {
        MPI_Datatype t;
        if (round % 2 == 0)
            MPI_Type_vector(16, 1, 8, MPI_DOUBLE, &t);
        else {
            int bl[2] = {8, 8}, di[2] = {100, 0};
            MPI_Type_indexed(2, bl, di, MPI_DOUBLE, &t);
        }
        MPI_Type_commit(&t);
        struct tcase c = {round % 2 ? "indexed after a freed vector" : "vector after a freed indexed", t, 1, PAYLOAD, 1, 0};
        one_way(&c, BLOCKING, 1, 0, seed + round);
        MPI_Type_free(&t);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    get_stats = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    build();
    int seed = 1;
    for (int i = 0; i < ncases; i++) {
        const struct tcase *c = &cases[i];
        for (int mode = 0; mode < MODES; mode++)
            if (!c->light || mode == BLOCKING || mode == NONBLOCKING) one_way(c, mode, c->count, 0, seed++);
        if (c->count > 1)
            one_way(c, BLOCKING, c->count - 1, 0, seed++);
        if (c->doubles) {
            /* Three doubles short of the whole: the last element ends early. */
            int n = (int)(type_size(c->dt) * (size_t)c->count / 8) - 3;
            if (n > 0) {
                one_way(c, BLOCKING, 0, n, seed++);
                if (!c->light) one_way(c, NONBLOCKING, 0, n, seed++);
            }
        }
        if (c->light) continue;
        exchange(c, seed++);
        if (t_rank == 0) packing(c, seed);
        seed++;
    }
    reuse(seed);
    alltoallw(seed + 10);
    for (int i = 0; i < ncases; i++) MPI_Type_free(&cases[i].dt);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
