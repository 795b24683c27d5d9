// cudampi-test: ranks=2 without-shim=skip timeout=120
/* Faulty calls with device buffers, on communicators with MPI_ERRORS_RETURN. Every case behaves
 * as the same call on host buffers (the oracle: its error class, made in the same run), or,
 * where host memory has no analogue, returns MPI_ERR_BUFFER with one `cudampi` line on stderr.
 * Nothing may crash, hang or be overwritten: device receive buffers are surrounded by guard
 * bytes that must keep their poison, and after every case a normal device exchange in both
 * directions must deliver correct bytes. Erroneous calls use tags of their own; the drain at
 * the end reports any message they sent anyway (or consumed when they should not have).
 *
 *   unseen_freed  device memory freed before MPI ever saw it, and unmapped host memory:
 *                 MPI_ERR_BUFFER (point-to-point, nonblocking, collective), not a crash inside
 *                 MPI; count 0 succeeds as on host memory
 *
 *   count0_truncate  a device receive of 0 elements meets a 4 MiB message: MPI_ERR_TRUNCATE as
 *                 on host memory (Open MPI writes the message past the posted count, into memory
 *                 that follows a host buffer), blocking and nonblocking, and neither the device
 *                 buffer, its guards nor cudampi's own memory takes any of it
 *
 *   bad_types     an uncommitted datatype, a handle that names no datatype (Open MPI), MPI_DATATYPE_NULL
 *                 and an aliased send and receive buffer, on point-to-point calls and
 *                 MPI_Allreduce: the class the host call gets in the same run (the shim's own
 *                 library calls must not raise through MPI_COMM_SELF's fatal handler), the
 *                 guards and the peer's queue untouched
 *
 *   bottom        MPI_BOTTOM with a struct datatype holding absolute device addresses:
 *                 MPI_Send/MPI_Recv, MPI_Isend/MPI_Irecv and MPI_Bcast deliver the bytes the
 *                 same calls deliver on host memory
 *
 * Shim-only cases (no host analogue) are skipped without the shim and in CUDAMPI_TEST_MEM=host
 * mode. */
#include "common.h"
#include "capture.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define TAG_OK 10
#define GUARD 256 /* poisoned bytes before and after every device receive buffer */

static MPI_Comm comm;
static int peer, shim_cases;

/* ---- guarded device receive buffers -------------------------------------------------------- */

struct guarded {
    char *base; /* the allocation: GUARD bytes, n bytes, GUARD bytes */
    void *p;    /* what the receive is given */
    size_t n;
};

static struct guarded guarded_new(int kind, size_t n)
{
    struct guarded g;
    g.base = (char *)mem_alloc(kind, n + 2 * GUARD);
    g.p = g.base + GUARD;
    g.n = n;
    mem_poison(g.base, n + 2 * GUARD);
    return g;
}

/* The guards still hold the poison, and so does the body when `body` is set (a failed call). */
static void guarded_check(struct guarded *g, int body, const char *what)
{
    size_t all = g->n + 2 * GUARD;
    unsigned char *h = mem_fetch(g->base, all);
    unsigned char *e = (unsigned char *)xmalloc(all);
    poison_fill(e, all);
    check_bytes(h, e, GUARD, "%s: guard bytes before the receive buffer", what);
    check_bytes(h + GUARD + g->n, e, GUARD, "%s: guard bytes after the receive buffer", what);
    if (body) check_bytes(h + GUARD, e, g->n, "%s: receive buffer of a failed call", what);
    free(h);
    free(e);
}

static void guarded_free(struct guarded *g) { mem_free(g->base); }

/* ---- helpers ------------------------------------------------------------------------------- */

static int seq;
/* A normal device exchange in both directions, checked. */
static void exchange_ok(const char *after)
{
    size_t n = 3000 * sizeof(int);
    int seed = 500 + (++seq);
    void *s = mem_alloc(MEM_DEVICE, n);
    struct guarded r = guarded_new(MEM_DEVICE, n);
    mem_pattern(s, n, t_rank, seed);
    MPI_Status st;
    for (int dir = 0; dir < 2; dir++) {
        if (t_rank == dir)
            MPI_CHECK(MPI_Send(s, 3000, MPI_INT, peer, TAG_OK, comm));
        else
            MPI_CHECK(MPI_Recv(r.p, 3000, MPI_INT, peer, TAG_OK, comm, &st));
    }
    check_status(&st, MPI_INT, peer, TAG_OK, 3000, "exchange after %s", after);
    unsigned char *h = mem_fetch(r.p, n), *e = pattern_new(n, peer, seed);
    check_bytes(h, e, n, "device exchange after %s", after);
    guarded_check(&r, 0, after);
    free(h);
    free(e);
    mem_free(s);
    guarded_free(&r);
}

/* A call with no host analogue: MPI_ERR_BUFFER and one cudampi line. */
static void expect_refused(const char *what, int rc, int lines)
{
    CHECK(error_class(rc) == MPI_ERR_BUFFER, "%s: class %s, expected MPI_ERR_BUFFER %s", what,
          error_name(error_class(rc)), error_name(MPI_ERR_BUFFER));
    CHECK(lines == 1, "%s: %d lines from cudampi on stderr, expected 1", what, lines);
}

/* Messages that must be left for the drain (the peer sent them for a receive that failed). */
#define MAX_LEFT 16
static int left_tags[MAX_LEFT], n_left;

/* The peer sends one int with `tag` that a failing receive here must not consume. */
static void leave_message(int tag, int receiver)
{
    static int one = 1;
    if (t_rank != receiver)
        MPI_CHECK(MPI_Send(&one, 1, MPI_INT, peer, tag, comm));
    else if (n_left < MAX_LEFT)
        left_tags[n_left++] = tag;
    MPI_CHECK(MPI_Barrier(comm));
}

/* Receives whatever is left: each expected message once; anything else was sent by a call that
 * should have failed. */
static void drain(void)
{
    MPI_CHECK(MPI_Barrier(comm));
    int found[MAX_LEFT] = {0};
    for (int idle = 0; idle < 20;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(peer, MPI_ANY_TAG, comm, &flag, &st);
        if (!flag) {
            idle++;
            usleep(2000);
            continue;
        }
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        void *tmp = xmalloc((size_t)bytes + 1);
        MPI_Recv(tmp, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
        free(tmp);
        int expected = 0;
        for (int i = 0; i < n_left; i++)
            if (left_tags[i] == st.MPI_TAG && !found[i]) found[i] = expected = 1;
        CHECK(expected, "an erroneous call (tag %d) sent a message of %d bytes anyway", st.MPI_TAG,
              bytes);
    }
    for (int i = 0; i < n_left; i++)
        CHECK(found[i], "the message with tag %d was consumed by a receive that failed",
              left_tags[i]);
}

/* Whether n bytes equal to `needle` lie in memory of the shim's own (its writable segments and
 * the anonymous mapping right after them, where its .bss continues). */
static int shim_memory_has(const void *needle, size_t n)
{
    Dl_info di;
    char shim[4096];
    void *sym = dlsym(RTLD_DEFAULT, "cudampi_version");
    if (!sym || !dladdr(sym, &di) || !di.dli_fname || !realpath(di.dli_fname, shim)) return 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return 0;
    char line[8192];
    int found = 0, after_shim = 0;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8], path[4096] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095s", &lo, &hi, perms, path) < 3) continue;
        int ours = strcmp(path, shim) == 0;
        if ((ours || (after_shim && !path[0])) && perms[0] == 'r' && perms[1] == 'w')
            found = memmem((void *)lo, hi - lo, needle, n) != NULL;
        after_shim = ours;
    }
    fclose(maps);
    return found;
}

/* ---- unseen_freed -------------------------------------------------------------------------- */

/* Device memory freed before any MPI call saw it: the shim cannot have remembered its range.
 * Runs first, before any other device buffer reaches MPI. */
static void unseen_freed(void)
{
    if (!shim_cases) return;
    int rc, lines;
    void *f = mem_alloc(MEM_DEVICE, 4096);
    mem_free(f);

    capture_begin();
    rc = MPI_Send(f, 1024, MPI_INT, peer, 101, comm);
    lines = capture_end(NULL);
    expect_refused("MPI_Send from device memory freed before MPI saw it", rc, lines);

    capture_begin();
    rc = MPI_Send((char *)f + 512, 16, MPI_INT, peer, 102, comm);
    lines = capture_end(NULL);
    expect_refused("MPI_Send from inside freed device memory", rc, lines);

    MPI_Request q = MPI_REQUEST_NULL;
    capture_begin();
    rc = MPI_Isend(f, 1024, MPI_INT, peer, 103, comm, &q);
    lines = capture_end(NULL);
    expect_refused("MPI_Isend from freed device memory", rc, lines);
    if (rc == MPI_SUCCESS) MPI_Wait(&q, MPI_STATUS_IGNORE);

    leave_message(104, 0);
    if (t_rank == 0) {
        capture_begin();
        rc = MPI_Recv(f, 1024, MPI_INT, peer, 104, comm, MPI_STATUS_IGNORE);
        lines = capture_end(NULL);
        expect_refused("MPI_Recv into freed device memory", rc, lines);
    }

    /* nothing to transfer: as on host memory */
    rc = MPI_Send(f, 0, MPI_INT, peer, 105, comm);
    CHECK(rc == MPI_SUCCESS, "MPI_Send of 0 elements from freed device memory: class %s",
          error_name(error_class(rc)));
    MPI_CHECK(MPI_Recv(NULL, 0, MPI_INT, peer, 105, comm, MPI_STATUS_IGNORE));

    /* a collective, on both ranks alike */
    int out[4];
    capture_begin();
    rc = MPI_Allreduce(f, out, 4, MPI_INT, MPI_SUM, comm);
    lines = capture_end(NULL);
    expect_refused("MPI_Allreduce from freed device memory", rc, lines);

    /* host memory that is no longer mapped */
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno))) {
        munmap(m, 4 * page);
        capture_begin();
        rc = MPI_Send(m, 64, MPI_INT, peer, 106, comm);
        lines = capture_end(NULL);
        expect_refused("MPI_Send from unmapped memory", rc, lines);
    }
    exchange_ok("calls on freed device memory");
}

/* ---- count0_truncate ----------------------------------------------------------------------- */

#define BIG (4 << 20)

static void count0_truncate(void)
{
    int tag = 200, rc_host, rc_dev;
    unsigned char *msg = pattern_new(BIG, 0, 77);
    /* the host oracle's overrun lands in its own buffer */
    void *host = xmalloc(2 * BIG);
    struct guarded d = guarded_new(MEM_DEVICE, 64);
    for (int nonblocking = 0; nonblocking < 2; nonblocking++, tag += 10) {
        if (t_rank == 0) {
            MPI_CHECK(MPI_Send(msg, BIG, MPI_BYTE, peer, tag, comm));
            MPI_CHECK(MPI_Send(msg, BIG, MPI_BYTE, peer, tag + 1, comm));
        } else {
            MPI_Request q;
            MPI_Status st;
            if (nonblocking) {
                rc_host = MPI_Irecv(host, 0, MPI_BYTE, peer, tag, comm, &q);
                if (rc_host == MPI_SUCCESS) rc_host = MPI_Wait(&q, &st);
                rc_dev = MPI_Irecv(d.p, 0, MPI_BYTE, peer, tag + 1, comm, &q);
                if (rc_dev == MPI_SUCCESS) rc_dev = MPI_Wait(&q, &st);
            } else {
                rc_host = MPI_Recv(host, 0, MPI_BYTE, peer, tag, comm, &st);
                rc_dev = MPI_Recv(d.p, 0, MPI_BYTE, peer, tag + 1, comm, &st);
            }
            const char *what = nonblocking ? "MPI_Irecv of 0 bytes, 4 MiB arriving" : "MPI_Recv of 0 bytes, 4 MiB arriving";
            CHECK(error_class(rc_host) != MPI_SUCCESS, "%s succeeded on host memory", what);
            CHECK(error_class(rc_dev) == error_class(rc_host), "%s: device buffer gave class %s, host buffer %s", what,
                  error_name(error_class(rc_dev)), error_name(error_class(rc_host)));
            guarded_check(&d, 1, what);
            CHECK(!shim_memory_has(msg, 256), "%s: the message was written into cudampi's own memory", what);
        }
        MPI_CHECK(MPI_Barrier(comm));
        exchange_ok("a truncated receive of 0 elements");
    }
    guarded_free(&d);
    free(host);
    free(msg);
}


/* ---- bad_types ----------------------------------------------------------------------------- */

#ifdef OPEN_MPI
/* A handle that names no datatype: the address of zeroed memory (Open MPI's handles are
 * pointers, and its calls refuse such a datatype). MPICH's own calls crash or assert on a
 * handle that names no datatype, so there is no baseline to compare with there. */
static MPI_Datatype bogus_type(void)
{
    static long zeros[512];
    MPI_Datatype t;
    void *h = zeros;
    memcpy(&t, &h, sizeof h);
    return t;
}
#endif

static void same_class(const char *what, int rc_host, int rc_dev)
{
    CHECK(error_class(rc_host) != MPI_SUCCESS, "%s succeeded on host memory", what);
    CHECK(error_class(rc_dev) == error_class(rc_host), "%s: device buffer gave class %s, host buffer %s", what,
          error_name(error_class(rc_dev)), error_name(error_class(rc_host)));
}

static void bad_p2p(MPI_Datatype t, const char *name, int tag)
{
    char what[160];
    int host[64], rc_host, rc_dev;
    struct guarded d = guarded_new(MEM_DEVICE, sizeof host);
    /* sends: neither may reach the peer (the drain would report it) */
    snprintf(what, sizeof what, "MPI_Send of 4 elements of %s", name);
    rc_host = MPI_Send(host, 4, t, peer, tag, comm);
    rc_dev = MPI_Send(d.p, 4, t, peer, tag, comm);
    same_class(what, rc_host, rc_dev);
    MPI_Request q = MPI_REQUEST_NULL;
    snprintf(what, sizeof what, "MPI_Isend of 4 elements of %s", name);
    rc_host = MPI_Isend(host, 4, t, peer, tag, comm, &q);
    if (rc_host == MPI_SUCCESS) rc_host = MPI_Wait(&q, MPI_STATUS_IGNORE);
    rc_dev = MPI_Isend(d.p, 4, t, peer, tag, comm, &q);
    if (rc_dev == MPI_SUCCESS) rc_dev = MPI_Wait(&q, MPI_STATUS_IGNORE);
    same_class(what, rc_host, rc_dev);
    /* receives: the peer's message stays queued */
    leave_message(tag + 1, 0);
    if (t_rank == 0) {
        snprintf(what, sizeof what, "MPI_Recv of 4 elements of %s", name);
        rc_host = MPI_Recv(host, 4, t, peer, tag + 1, comm, MPI_STATUS_IGNORE);
        rc_dev = MPI_Recv(d.p, 4, t, peer, tag + 1, comm, MPI_STATUS_IGNORE);
        same_class(what, rc_host, rc_dev);
        snprintf(what, sizeof what, "MPI_Irecv of 4 elements of %s", name);
        rc_host = MPI_Irecv(host, 4, t, peer, tag + 1, comm, &q);
        if (rc_host == MPI_SUCCESS) MPI_Cancel(&q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        rc_dev = MPI_Irecv(d.p, 4, t, peer, tag + 1, comm, &q);
        if (rc_dev == MPI_SUCCESS) MPI_Cancel(&q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        same_class(what, rc_host, rc_dev);
    }
    guarded_check(&d, 1, name);
    guarded_free(&d);
}

static void bad_allreduce(void *send_host, void *recv_host, void *send_dev, void *recv_dev, MPI_Datatype t,
                          const char *what)
{
    int rc_host = MPI_Allreduce(send_host, recv_host, 4, t, MPI_SUM, comm);
    int rc_dev = MPI_Allreduce(send_dev, recv_dev, 4, t, MPI_SUM, comm);
    same_class(what, rc_host, rc_dev);
}

static void bad_types(void)
{
    MPI_Datatype unc;
    MPI_Type_vector(2, 1, 2, MPI_INT, &unc);
    bad_p2p(unc, "an uncommitted vector type", 300);
#ifdef OPEN_MPI
    bad_p2p(bogus_type(), "a handle that names no datatype", 310);
#endif
    bad_p2p(MPI_DATATYPE_NULL, "MPI_DATATYPE_NULL", 320);
    MPI_Type_free(&unc);
    exchange_ok("calls with bad datatypes");

    int host[2][16];
    struct guarded d = guarded_new(MEM_DEVICE, sizeof host);
    void *s = mem_alloc(MEM_DEVICE, sizeof host[0]);
#if defined(OPEN_MPI) || (defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 50000000)
    /* MPICH 5.0 asserts on it, on host memory too */
    bad_allreduce(host[0], host[1], s, d.p, MPI_DATATYPE_NULL, "MPI_Allreduce of MPI_DATATYPE_NULL");
#endif
#ifdef OPEN_MPI
    bad_allreduce(host[0], host[1], s, d.p, bogus_type(), "MPI_Allreduce of a handle that names no datatype");
#endif
    guarded_check(&d, 1, "MPI_Allreduce with bad datatypes");
    mem_pattern(d.p, sizeof host[0], t_rank, 9);
    unsigned char *want = pattern_new(sizeof host[0], t_rank, 9);
    memcpy(host[0], want, sizeof host[0]);
    bad_allreduce(host[0], host[0], d.p, d.p, MPI_INT, "MPI_Allreduce with the same send and receive buffer");
    unsigned char *got = mem_fetch(d.p, sizeof host[0]);
    check_bytes(got, want, sizeof host[0], "an aliased MPI_Allreduce's buffer");
    free(got);
    free(want);
    mem_free(s);
    guarded_free(&d);
    exchange_ok("collectives with bad arguments");
}

/* ---- bottom -------------------------------------------------------------------------------- */

#define BOT_INTS 10

/* A struct type of two blocks at absolute addresses base + 8 and base + 64. */
static MPI_Datatype absolute_type(void *base)
{
    MPI_Aint at[2];
    int len[2] = {3, BOT_INTS - 3};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT}, t;
    MPI_CHECK(MPI_Get_address((char *)base + 8, &at[0]));
    MPI_CHECK(MPI_Get_address((char *)base + 64, &at[1]));
    MPI_CHECK(MPI_Type_create_struct(2, len, at, types, &t));
    MPI_CHECK(MPI_Type_commit(&t));
    return t;
}

/* What the blocks of absolute_type hold when `from` fills them and the rest keeps `into`. */
static void bottom_expect(unsigned char *into, const unsigned char *from)
{
    memcpy(into + 8, from + 8, 3 * sizeof(int));
    memcpy(into + 64, from + 64, (BOT_INTS - 3) * sizeof(int));
}

static void bottom_kind(int kind, int way)
{
    const size_t n = 128;
    const char *ways[3] = {"MPI_Send/MPI_Recv", "MPI_Isend/MPI_Irecv", "MPI_Bcast"};
    char what[160];
    snprintf(what, sizeof what, "%s of MPI_BOTTOM with absolute %s addresses", ways[way], mem_kind_name(kind));
    struct guarded g = guarded_new(kind, n);
    unsigned char *src = pattern_new(n, 0, 40 + way);
    if (t_rank == 0) mem_put(g.p, src, n);
    MPI_Datatype t = absolute_type(g.p);
    MPI_Request q;
    if (way == 2) {
        MPI_CHECK(MPI_Bcast(MPI_BOTTOM, 1, t, 0, comm));
    } else if (way == 1) {
        if (t_rank == 0)
            MPI_CHECK(MPI_Isend(MPI_BOTTOM, 1, t, peer, 400, comm, &q));
        else
            MPI_CHECK(MPI_Irecv(MPI_BOTTOM, 1, t, peer, 400, comm, &q));
        MPI_CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    } else if (t_rank == 0) {
        MPI_CHECK(MPI_Send(MPI_BOTTOM, 1, t, peer, 400, comm));
    } else {
        MPI_CHECK(MPI_Recv(MPI_BOTTOM, 1, t, peer, 400, comm, MPI_STATUS_IGNORE));
    }
    unsigned char *got = mem_fetch(g.p, n), *want = xmalloc(n);
    if (t_rank == 0) {
        memcpy(want, src, n);
    } else {
        poison_fill(want, n);
        bottom_expect(want, src);
    }
    check_bytes(got, want, n, "%s", what);
    guarded_check(&g, 0, what);
    MPI_Type_free(&t);
    free(got);
    free(want);
    free(src);
    guarded_free(&g);
}

static void bottom(void)
{
    for (int way = 0; way < 3; way++) {
        bottom_kind(MEM_HOST, way);
        bottom_kind(MEM_DEVICE, way);
    }
    exchange_ok("MPI_BOTTOM");
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size < 2) DIE("needs 2 ranks");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    shim_cases = shim_loaded() && !host_mode();
    if (t_rank == 0 && !shim_cases)
        note("shim not loaded or host mode: the cases without a host analogue are skipped");
    if (t_rank < 2) {
        peer = 1 - t_rank;
        unseen_freed();
        exchange_ok("start");
        count0_truncate();
        bad_types();
        bottom();
        drain();
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
