// cudampi-test: ranks=2,4 without-shim=pass
/* A plain host-memory MPI program (no CUDA calls, no CUDA headers): point-to-point in all
 * send modes, ANY_SOURCE receives, MPI_PROC_NULL, a Sendrecv ring, Sendrecv_replace, probes,
 * derived datatypes (vector, indexed, struct, resized), truncation with MPI_ERRORS_RETURN.
 * Then, with MPI_ERRORS_RETURN, bad arguments (rank, tag, count, datatype, communicator,
 * request) and truncations completed by MPI_Wait, MPI_Test, MPI_Waitall (MPI_ERR_IN_STATUS),
 * MPI_Testall, MPI_Waitany and MPI_Waitsome are made twice: through the library's own symbols
 * (the MPI library's handle, which a preloaded shim cannot stand in front of) and through the
 * program's; return classes and status fields (source, tag, error class, count) must match one
 * for one, and neither pass may write a line on stderr.
 * It must behave identically with and without the shim, and the shim must not load CUDA into
 * a program that does not: at the end libcuda.so.1 must not be loaded
 * (dlopen(..., RTLD_NOLOAD) returns NULL). If libcuda was already loaded at start (the link
 * line pulled it in), that last check cannot be made and is skipped with a note. */
#define COMMON_NO_CUDA
#include "common.h"
#include <unistd.h>

#define SLACK 16
static MPI_Comm comm;

static int cuda_loaded(void)
{
    const char *names[] = {"libcuda.so.1", "libcuda.so"};
    for (int i = 0; i < 2; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

static void recv_check(void *buf, size_t cap, int count, MPI_Datatype dt, int src, int tag,
                       int seed, const char *what)
{
    size_t n = (size_t)count * type_size(dt);
    poison_fill(buf, cap);
    MPI_Status st;
    status_init(&st);
    MPI_CHECK(MPI_Recv(buf, count, dt, src, tag, comm, &st));
    check_status(&st, dt, src, tag, count, "%s", what);
    unsigned char *e = (unsigned char *)xmalloc(cap);
    pattern_fill(e, n, src, seed);
    poison_fill(e + n, cap - n);
    check_bytes(buf, e, cap, "%s", what);
    free(e);
}

/* ---- errors and statuses: the program's calls against the library's own ---------------------- */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*wait_fn)(MPI_Request *, MPI_Status *);
typedef int (*test_fn)(MPI_Request *, int *, MPI_Status *);
typedef int (*waitall_fn)(int, MPI_Request *, MPI_Status *);
typedef int (*testall_fn)(int, MPI_Request *, int *, MPI_Status *);
typedef int (*waitany_fn)(int, MPI_Request *, int *, MPI_Status *);
typedef int (*waitsome_fn)(int, MPI_Request *, int *, int *, MPI_Status *);
typedef int (*probe_fn)(int, int, MPI_Comm, MPI_Status *);
typedef int (*iprobe_fn)(int, int, MPI_Comm, int *, MPI_Status *);
typedef int (*improbe_fn)(int, int, MPI_Comm, int *, MPI_Message *, MPI_Status *);

struct calls {
    send_fn send;
    recv_fn recv;
    isend_fn isend;
    irecv_fn irecv;
    wait_fn wait;
    test_fn test;
    waitall_fn waitall;
    testall_fn testall;
    waitany_fn waitany;
    waitsome_fn waitsome;
    probe_fn probe;
    iprobe_fn iprobe;
    improbe_fn improbe;
};

#define NSEEN 160
struct seen {
    int n;
    int v[NSEEN];
    const char *what[NSEEN];
};

static void see(struct seen *s, const char *what, int v)
{
    if (s->n < NSEEN) {
        s->what[s->n] = what;
        s->v[s->n++] = v;
    }
}

/* A status's source, tag, count (not of a truncated receive: MPI leaves it undefined, and MPICH
 * 4.0 gives one value or another by timing) and, where MPI sets it, its error class. */
static void see_status(struct seen *s, const char *what, const MPI_Status *st, int truncated, int with_error)
{
    int c = -999;
    MPI_Get_count(st, MPI_INT, &c);
    see(s, what, st->MPI_SOURCE);
    see(s, what, st->MPI_TAG);
    if (!truncated) see(s, what, c);
    if (with_error) see(s, what, error_class(st->MPI_ERROR));
}

/* One pass of bad arguments and truncations between ranks 0 and 1 of `c` (tags from `tag0`);
 * every outcome goes to `s` in order. */
static void error_pass(const struct calls *k, MPI_Comm c, int tag0, struct seen *s)
{
    int peer = 1 - t_rank, size = 0;
    MPI_Comm_size(c, &size);
    int sb[128], rb[3 * 64];
    MPI_Status st[3];
    MPI_Request q[3];
    pattern_fill(sb, sizeof sb, t_rank, tag0);

    /* bad arguments: nothing is sent */
    see(s, "Send to rank size", error_class(k->send(sb, 1, MPI_INT, size, tag0, c)));
    see(s, "Send with tag -5", error_class(k->send(sb, 1, MPI_INT, peer, -5, c)));
    see(s, "Send of count -1", error_class(k->send(sb, -1, MPI_INT, peer, tag0, c)));
    see(s, "Send of MPI_DATATYPE_NULL", error_class(k->send(sb, 1, MPI_DATATYPE_NULL, peer, tag0, c)));
    see(s, "Send on MPI_COMM_NULL", error_class(k->send(sb, 1, MPI_INT, peer, tag0, MPI_COMM_NULL)));
    see(s, "Recv from rank -7", error_class(k->recv(rb, 1, MPI_INT, -7, tag0, c, MPI_STATUS_IGNORE)));
    see(s, "Recv of count -1", error_class(k->recv(rb, -1, MPI_INT, peer, tag0, c, MPI_STATUS_IGNORE)));
    see(s, "Irecv with tag -5", error_class(k->irecv(rb, 1, MPI_INT, peer, -5, c, &q[0])));
    see(s, "Probe from rank size", error_class(k->probe(size, tag0, c, &st[0])));
    /* probes that find nothing leave the status as it was (mpi4py's tests count on it) */
    int flag = -1;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status before;
    status_init(&st[1]);
    before = st[1];
    see(s, "Iprobe, nothing sent", error_class(k->iprobe(MPI_ANY_SOURCE, tag0 + 77, c, &flag, &st[1])));
    see(s, "Iprobe, nothing sent: flag", flag);
    see(s, "Iprobe, nothing sent: status unchanged", memcmp(&before, &st[1], sizeof before) == 0);
    flag = -1;
    see(s, "Improbe, nothing sent", error_class(k->improbe(MPI_ANY_SOURCE, tag0 + 77, c, &flag, &msg, &st[1])));
    see(s, "Improbe, nothing sent: flag", flag);
    see(s, "Improbe, nothing sent: status unchanged", memcmp(&before, &st[1], sizeof before) == 0);
    q[0] = MPI_REQUEST_NULL;
    status_init(&st[0]);
    see(s, "Wait on MPI_REQUEST_NULL", error_class(k->wait(&q[0], &st[0])));
    see_status(s, "Wait on MPI_REQUEST_NULL: status", &st[0], 0, 0);

    /* truncations: rank 1 sends 100 ints where 64 are expected, then 10 that fit */
    for (int round = 0; round < 6; round++) {
        int tag = tag0 + 1 + round;
        if (t_rank == 1) {
            for (int m = 0; m < (round >= 2 ? 3 : 1); m++)
                see(s, "Send", error_class(k->send(sb, round < 2 || m == 1 ? 100 : 10 + m, MPI_INT, 0, tag, c)));
            if (round == 3) k->send(sb, 1, MPI_INT, 0, tag0 + 60, c); /* all three sent */
            continue;
        }
        for (int m = 0; m < 3; m++) status_init(&st[m]);
        if (round < 2) { /* Wait, Test on one truncated receive */
            see(s, "Irecv", error_class(k->irecv(rb, 64, MPI_INT, 1, tag, c, &q[0])));
            int flag = 0, rc = MPI_SUCCESS;
            if (round == 0) {
                rc = k->wait(&q[0], &st[0]);
            } else {
                double t0 = MPI_Wtime();
                while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < 20) rc = k->test(&q[0], &flag, &st[0]);
                see(s, "Test: flag", flag);
            }
            see(s, round == 0 ? "Wait on a truncated receive" : "Test on a truncated receive", error_class(rc));
            see_status(s, "... its status", &st[0], 1, 0);
            see(s, "... its request freed", q[0] == MPI_REQUEST_NULL);
            continue;
        }
        /* three receives (10, 100 into 64, 12 ints): Waitall, Testall, Waitany, Waitsome.
         * Testall goes once all three have arrived: with some still on their way, MPICH returns
         * MPI_ERR_IN_STATUS for the truncated one with the flag clear, by timing. */
        if (round == 3) k->recv(rb, 1, MPI_INT, 1, tag0 + 60, c, MPI_STATUS_IGNORE);
        for (int m = 0; m < 3; m++)
            see(s, "Irecv", error_class(k->irecv(rb + 64 * m, m == 1 ? 64 : 16, MPI_INT, 1, tag, c, &q[m])));
        int rc = MPI_SUCCESS, flag = 0, idx = -1, out = 0, ix[3] = {-1, -1, -1};
        switch (round) {
        case 2:
            rc = k->waitall(3, q, st);
            see(s, "Waitall with one truncated receive", error_class(rc));
            break;
        case 3: {
            double t0 = MPI_Wtime();
            while (!flag && MPI_Wtime() - t0 < 20) {
                rc = k->testall(3, q, &flag, st);
                if (rc != MPI_SUCCESS) break;
            }
            see(s, "Testall with one truncated receive", error_class(rc));
            see(s, "... flag", flag);
            break;
        }
        case 4:
        case 5: {
            /* how many complete per call depends on timing: what is compared is each call's
             * class, which requests completed and their statuses, by index */
            MPI_Status by[3], one[3];
            int mask = 0, failed = MPI_SUCCESS, in_status[3] = {0, 0, 0};
            for (int m = 0; m < 3; m++) status_init(&by[m]);
            for (int n = 0; n < 3 && mask != 7; n++) {
                for (int m = 0; m < 3; m++) status_init(&one[m]);
                if (round == 4) {
                    rc = k->waitany(3, q, &idx, &one[0]);
                    out = (idx >= 0 && idx < 3) ? 1 : 0;
                    ix[0] = idx;
                } else {
                    rc = k->waitsome(3, q, &out, ix, one);
                }
                if (rc != MPI_SUCCESS && failed == MPI_SUCCESS) failed = error_class(rc);
                if (out == MPI_UNDEFINED || out <= 0) break;
                for (int m = 0; m < out; m++)
                    if (ix[m] >= 0 && ix[m] < 3) {
                        mask |= 1 << ix[m];
                        by[ix[m]] = one[m];
                        /* MPI sets the error fields only in a call that returns MPI_ERR_IN_STATUS */
                        in_status[ix[m]] = error_class(rc) == MPI_ERR_IN_STATUS;
                        /* where the library leaves a failed request active, free it as a program would */
                        if (q[ix[m]] != MPI_REQUEST_NULL) MPI_Request_free(&q[ix[m]]);
                    }
            }
            see(s, round == 4 ? "Waitany with one truncated receive: first failure" : "Waitsome with one truncated receive: first failure", failed);
            see(s, "... completed", mask);
            for (int m = 0; m < 3; m++)
                /* the others' error fields: set or not by which call completed them (timing) */
                see_status(s, "... a status by index", &by[m], m == 1, m == 1 && in_status[m]);
            rc = MPI_SUCCESS;
            break;
        }
        }
        if (round < 4)
            for (int m = 0; m < 3; m++) see_status(s, "... a status", &st[m], m == 1, error_class(rc) == MPI_ERR_IN_STATUS);
        for (int m = 0; m < 3; m++) see(s, "... request freed", q[m] == MPI_REQUEST_NULL);
    }
    MPI_Barrier(c);
}

/* The library's own function `name`: looked up in the object that defines MPI_Comm_rank, which a
 * preloaded shim does not export. */
static void *library_sym(const char *name)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Comm_rank");
    if (!sym || !dladdr(sym, &di) || !di.dli_fname) DIE("cannot find the MPI library");
    void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_NOW);
    void *f = h ? dlsym(h, name) : NULL;
    if (!f) DIE("%s: no %s", di.dli_fname, name);
    return f;
}

/* Runs error_pass with fd 2 redirected to a file; returns what was written there (malloc'd). */
static char *error_pass_quiet(const struct calls *k, MPI_Comm c, int tag0, struct seen *s)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = tmpfile();
    if (saved < 0 || !f) DIE("cannot redirect stderr");
    dup2(fileno(f), 2);
    error_pass(k, c, tag0, s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(f);
    char *text = (char *)xmalloc((size_t)(n > 0 ? n : 0) + 1);
    rewind(f);
    size_t got = n > 0 ? fread(text, 1, (size_t)n, f) : 0;
    text[got] = 0;
    fclose(f);
    return text;
}

static void errors_and_statuses(void)
{
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, t_rank < 2 ? 0 : MPI_UNDEFINED, t_rank, &pair);
    if (t_rank > 1) {
        MPI_Barrier(comm);
        return;
    }
    MPI_Comm_set_errhandler(pair, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* errors on MPI_COMM_NULL */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    struct calls lib = {
        (send_fn)library_sym("MPI_Send"),         (recv_fn)library_sym("MPI_Recv"),
        (isend_fn)library_sym("MPI_Isend"),       (irecv_fn)library_sym("MPI_Irecv"),
        (wait_fn)library_sym("MPI_Wait"),         (test_fn)library_sym("MPI_Test"),
        (waitall_fn)library_sym("MPI_Waitall"),   (testall_fn)library_sym("MPI_Testall"),
        (waitany_fn)library_sym("MPI_Waitany"),   (waitsome_fn)library_sym("MPI_Waitsome"),
        (probe_fn)library_sym("MPI_Probe"),       (iprobe_fn)library_sym("MPI_Iprobe"),
        (improbe_fn)library_sym("MPI_Improbe"),
    };
    struct calls prog = {MPI_Send,    MPI_Recv,    MPI_Isend,    MPI_Irecv,     MPI_Wait,   MPI_Test,
                         MPI_Waitall, MPI_Testall, MPI_Waitany, MPI_Waitsome, MPI_Probe, MPI_Iprobe,
                         MPI_Improbe};
    static struct seen a, b;
    char *ea = error_pass_quiet(&lib, pair, 100, &a);
    char *eb = error_pass_quiet(&prog, pair, 100, &b); /* the same tags: statuses compare */
    CHECK(a.n == b.n, "errors: %d outcomes through the library's symbols, %d through the program's", a.n, b.n);
    for (int i = 0, bad = 0; i < a.n && i < b.n && bad < 8; i++)
        if (a.v[i] != b.v[i] || a.what[i] != b.what[i])
            bad += !CHECK(a.v[i] == b.v[i] && a.what[i] == b.what[i],
                          "errors, outcome %d (%s): %d through the library's symbols, %d (%s) through the program's",
                          i, a.what[i], a.v[i], b.v[i], b.what[i]);
    CHECK(strcmp(ea, eb) == 0, "errors: stderr differs; through the library's symbols:\n%s\nthrough the program's:\n%s", ea, eb);
    CHECK(eb[0] == 0, "errors with MPI_ERRORS_RETURN printed on stderr: %s", eb);
    /* the classes the standard names, whatever the library: a pass that saw nothing is no pass */
    CHECK(b.n > 0 && b.v[0] == MPI_ERR_RANK, "Send to rank size: class %s", error_name(b.v[0]));
    CHECK(b.v[1] == MPI_ERR_TAG, "Send with tag -5: class %s", error_name(b.v[1]));
    CHECK(b.v[2] == MPI_ERR_COUNT, "Send of count -1: class %s", error_name(b.v[2]));
    CHECK(b.v[3] == MPI_ERR_TYPE, "Send of MPI_DATATYPE_NULL: class %s", error_name(b.v[3]));
    CHECK(b.v[4] == MPI_ERR_COMM, "Send on MPI_COMM_NULL: class %s", error_name(b.v[4]));
    if (t_rank == 0) {
        int in_status = 0, truncate = 0;
        for (int i = 0; i < b.n; i++) {
            in_status += b.v[i] == MPI_ERR_IN_STATUS;
            truncate += b.v[i] == MPI_ERR_TRUNCATE;
        }
        CHECK(in_status >= 1 && truncate >= 3, "errors: MPI_ERR_IN_STATUS seen %d times, MPI_ERR_TRUNCATE %d times",
              in_status, truncate);
    }
    free(ea);
    free(eb);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&pair);
    MPI_Barrier(comm);
}

int main(int argc, char **argv)
{
    int cuda_at_start = cuda_loaded();
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    const int counts[] = {0, 1, 4095, 65536, 1024 * 1024 + 3};
    size_t cap = 1024 * 1024 + 3 + SLACK;
    unsigned char *s = (unsigned char *)xmalloc(cap), *r = (unsigned char *)xmalloc(cap);
    int seed = 0;

    /* 1. blocking modes, 0 -> 1 and 1 -> 0 */
    int bsize = (int)cap + 4 * MPI_BSEND_OVERHEAD;
    void *battach = xmalloc((size_t)bsize);
    MPI_Buffer_attach(battach, bsize);
    for (int mode = 0; mode < 3; mode++)
        for (int ci = 0; ci < 5; ci++)
            for (int dir = 0; dir < 2; dir++) {
                int c = counts[ci], src = dir, dst = 1 - dir;
                seed++;
                if (t_rank == src) {
                    pattern_fill(s, (size_t)c, src, seed);
                    if (mode == 0) MPI_CHECK(MPI_Send(s, c, MPI_CHAR, dst, seed, comm));
                    if (mode == 1) MPI_CHECK(MPI_Ssend(s, c, MPI_CHAR, dst, seed, comm));
                    if (mode == 2) {
                        MPI_CHECK(MPI_Bsend(s, c, MPI_CHAR, dst, seed, comm));
                        MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, dst, 0, comm, MPI_STATUS_IGNORE));
                    }
                } else if (t_rank == dst) {
                    recv_check(r, (size_t)c + SLACK, c, MPI_CHAR, src, seed, seed, "send modes");
                    if (mode == 2) MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, src, 0, comm));
                }
            }
    void *bp;
    int bs;
    MPI_Buffer_detach(&bp, &bs);
    free(battach);

    /* 2. ANY_SOURCE into rank 0, PROC_NULL everywhere */
    seed++;
    if (t_rank == 0) {
        for (int i = 1; i < t_size; i++) {
            MPI_Status st;
            poison_fill(r, 64);
            MPI_CHECK(MPI_Recv(r, 16, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
            unsigned char e[64];
            pattern_fill(e, 4 * (size_t)st.MPI_SOURCE, st.MPI_SOURCE, seed);
            poison_fill(e + 4 * st.MPI_SOURCE, 64 - 4 * (size_t)st.MPI_SOURCE);
            check_status(&st, MPI_INT, st.MPI_SOURCE, 7 + st.MPI_SOURCE, st.MPI_SOURCE, "ANY");
            check_bytes(r, e, 64, "ANY_SOURCE from %d", st.MPI_SOURCE);
        }
    } else {
        pattern_fill(s, 4 * (size_t)t_rank, t_rank, seed);
        MPI_CHECK(MPI_Send(s, t_rank, MPI_INT, 0, 7 + t_rank, comm));
    }
    {
        MPI_Status st;
        poison_fill(r, 64);
        MPI_CHECK(MPI_Send(s, 4, MPI_INT, MPI_PROC_NULL, 1, comm));
        MPI_CHECK(MPI_Recv(r, 4, MPI_INT, MPI_PROC_NULL, 1, comm, &st));
        check_status(&st, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, 0, "PROC_NULL");
        check_all(r, POISON_BYTE, 64, "PROC_NULL receive");
    }

    MPI_Barrier(comm); /* no ring message may meet the ANY_SOURCE/ANY_TAG receives above */

    /* 3. Sendrecv ring and Sendrecv_replace */
    for (int ci = 0; ci < 5; ci++) {
        int c = counts[ci];
        seed++;
        pattern_fill(s, (size_t)c, t_rank, seed);
        poison_fill(r, (size_t)c + SLACK);
        MPI_Status st;
        MPI_CHECK(MPI_Sendrecv(s, c, MPI_BYTE, right, seed, r, c, MPI_BYTE, left, seed, comm, &st));
        check_status(&st, MPI_BYTE, left, seed, c, "Sendrecv ring");
        unsigned char *e = (unsigned char *)xmalloc((size_t)c + SLACK);
        pattern_fill(e, (size_t)c, left, seed);
        poison_fill(e + c, SLACK);
        check_bytes(r, e, (size_t)c + SLACK, "Sendrecv ring %d bytes", c);
        pattern_fill(r, (size_t)c, t_rank, seed);
        MPI_CHECK(MPI_Sendrecv_replace(r, c, MPI_BYTE, right, seed, left, seed, comm, &st));
        check_bytes(r, e, (size_t)c + SLACK, "Sendrecv_replace ring %d bytes", c);
        free(e);
    }

    /* 4. derived datatypes 0 -> 1: vector, indexed, resized struct; probe + recv */
    if (t_rank < 2) {
        MPI_Datatype vec, idx, st3, tmp;
        MPI_Type_vector(100, 3, 7, MPI_INT, &vec);
        int bl[3] = {2, 1, 3}, di[3] = {0, 4, 9};
        MPI_Type_indexed(3, bl, di, MPI_DOUBLE, &idx);
        int sbl[2] = {1, 2};
        MPI_Aint sdi[2] = {0, 8};
        MPI_Datatype sty[2] = {MPI_INT, MPI_DOUBLE};
        MPI_Type_create_struct(2, sbl, sdi, sty, &tmp);
        MPI_Type_create_resized(tmp, -8, 40, &st3);
        MPI_Type_free(&tmp);
        MPI_Datatype dts[3] = {vec, idx, st3};
        for (int i = 0; i < 3; i++) {
            MPI_Type_commit(&dts[i]);
            MPI_Aint lb, ext;
            MPI_Type_get_extent(dts[i], &lb, &ext);
            int count = 5;
            size_t span = (size_t)(count * ext) + 64;
            unsigned char *sb = (unsigned char *)xmalloc(span), *rb = (unsigned char *)xmalloc(span);
            unsigned char *eb = (unsigned char *)xmalloc(span);
            seed++;
            /* reference by local pack/unpack on host */
            pattern_fill(sb, span, 0, seed);
            gap_fill(rb, span, seed);
            gap_fill(eb, span, seed);
            int psz = 0, pos = 0;
            MPI_Pack_size(count, dts[i], comm, &psz);
            void *pk = xmalloc((size_t)psz);
            MPI_Pack(sb + 32, count, dts[i], pk, psz, &pos, comm);
            pos = 0;
            MPI_Unpack(pk, psz, &pos, eb + 32, count, dts[i], comm);
            free(pk);
            if (t_rank == 0) {
                MPI_CHECK(MPI_Send(sb + 32, count, dts[i], 1, seed, comm));
            } else {
                MPI_Status st;
                MPI_CHECK(MPI_Probe(0, seed, comm, &st));
                int got = -1;
                MPI_Get_count(&st, dts[i], &got);
                CHECK(got == count, "probe count %d", got);
                MPI_CHECK(MPI_Recv(rb + 32, count, dts[i], 0, seed, comm, &st));
                check_bytes(rb, eb, span, "datatype %d", i);
            }
            free(sb);
            free(rb);
            free(eb);
            MPI_Type_free(&dts[i]);
        }
    }

    /* 5. truncation with MPI_ERRORS_RETURN, then a good message */
    if (t_rank < 2) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        seed++;
        if (t_rank == 1) {
            pattern_fill(s, 400, 1, seed);
            MPI_CHECK(MPI_Send(s, 100, MPI_INT, 0, 1, comm));
            MPI_CHECK(MPI_Send(s, 50, MPI_INT, 0, 2, comm));
        } else {
            poison_fill(r, 64 * 4 + SLACK);
            int rc = MPI_Recv(r, 64, MPI_INT, 1, 1, comm, MPI_STATUS_IGNORE);
            CHECK(error_class(rc) == MPI_ERR_TRUNCATE, "truncation gave class %s",
                  error_name(error_class(rc)));
            check_all(r + 256, POISON_BYTE, SLACK, "past a truncated receive");
            recv_check(r, 200 + SLACK, 50, MPI_INT, 1, 2, seed, "after truncation");
        }
    }

    /* 6. errors and statuses through the library's symbols and the program's */
    errors_and_statuses();

    free(s);
    free(r);
    int cuda_at_end = cuda_loaded();
    if (cuda_at_start)
        note("libcuda.so.1 was loaded before MPI_Init (linked into the program): the shim's "
             "no-CUDA-loading check is not possible here");
    else
        CHECK(!cuda_at_end, "libcuda.so.1 got loaded into a program that never used CUDA (shim %s)",
              shim_loaded() ? "loaded" : "not loaded");
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
