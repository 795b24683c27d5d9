// cudampi-test: ranks=2 timeout=120
/* (No run without cudampi: the kernel answers a device pointer in read(2)/write(2) with EFAULT
 * instead of a crash, and the ranks then disagree on collective file calls and hang.) */
/* MPI-IO with device buffers: every family of MPI_File reads and writes, run once on host
 * buffers and once on device buffers, each run in a file of its own, and compared result by
 * result (trace_compare: bytes, statuses, error classes):
 *   explicit offsets (write_at/read_at and _all), individual file pointers (write/read and
 *   _all after MPI_File_seek), shared file pointers (write_shared/read_shared one rank after
 *   the other, write_ordered/read_ordered), split collectives (write_at_all_begin/_end,
 *   write_all_begin/_end, write_ordered_begin/_end and the reads), nonblocking (iwrite_at,
 *   iread_at, their _all forms, iwrite/iread and _all, iwrite_shared/iread_shared, completed
 *   with MPI_Wait, MPI_Test in a loop and MPI_Waitall), the _c forms (looked up by name: Open
 *   MPI's headers declare none, cudampi serves them by narrowing), a read past the end of the
 *   file (the status counts less than asked; the rest of the buffer keeps its poison), and a
 *   read with MPI_STATUS_IGNORE.
 * Each family runs with a contiguous memory type (MPI_INT) and a vector of ints (blocks of 3 in
 * strides of 5), whose gaps must keep their poison on reads. After each family's writes rank 0
 * records the whole file (read with stdio), so the files are compared byte for byte; the host
 * run's file and read buffers are also checked against the expected layout (rank r's packed
 * data at 16 + r * bytes). Receive buffers are poisoned before every read; a nonblocking read
 * is fetched right after its completion call returns. Where a call fails on host buffers (a
 * library's MPI-IO that cannot run here), the note says so and the device run must fail alike.
 * io_host.c runs this program's host run alone, with and without cudampi. */
#include "common.h"
#include <unistd.h>

#define HEAD 16
#define NI 2003        /* ints of the contiguous variant */
#define VB 300         /* blocks of the vector variant */
#define VLEN 3
#define VSTRIDE 5

static MPI_Comm comm;
static int host_failures; /* calls that failed in the host run */

struct variant {
    const char *name;
    MPI_Datatype mt; /* memory type */
    int count;
    size_t bytes; /* data bytes per rank */
    size_t span;  /* memory bytes per rank */
};
static struct variant V[2];

static void variants(void)
{
    V[0] = (struct variant){"int", MPI_INT, NI, NI * sizeof(int), NI * sizeof(int)};
    MPI_Datatype vec;
    MPI_Type_vector(VB, VLEN, VSTRIDE, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    V[1] = (struct variant){"vector", vec, 1, VB * VLEN * sizeof(int),
                            ((VB - 1) * VSTRIDE + VLEN) * sizeof(int)};
}

/* Is byte i of a variant's memory span data (not a gap)? */
static int is_data(const struct variant *v, size_t i)
{
    return v->mt == MPI_INT || (i % (VSTRIDE * sizeof(int))) < VLEN * sizeof(int);
}

/* The packed bytes rank r writes with seed `seed`. */
static void packed(const struct variant *v, int r, int seed, unsigned char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < v->span; i++)
        if (is_data(v, i)) out[k++] = pattern_byte(r, seed, i);
}

/* What a read of `got` packed bytes leaves in a poisoned buffer. */
static void unpacked(const struct variant *v, const unsigned char *data, size_t got, unsigned char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < v->span; i++) {
        out[i] = POISON_BYTE;
        if (is_data(v, i) && k < got) out[i] = data[k++];
    }
}

struct run {
    int kind;
    const char *path;
    MPI_File fh;
    struct trace tr;
    int check; /* the host run: check against the expected layout */
};

/* What a file call's status says: the count and the elements, in bytes and in `dt`. A file
 * status means nothing else (libraries leave MPI_SOURCE, MPI_TAG and the cancelled flag as
 * they were, or fill them with whatever their memory held). */
static void record_status(struct run *R, const char *what, const MPI_Status *st, MPI_Datatype dt)
{
    int c[4] = {-1, -1, -1, -1};
    if (st) {
        MPI_Get_count(st, MPI_BYTE, &c[0]);
        MPI_Get_elements(st, MPI_BYTE, &c[1]);
        MPI_Get_count(st, dt, &c[2]);
        MPI_Get_elements(st, dt, &c[3]);
    }
    char label[240];
    snprintf(label, sizeof label, "%s: status", what);
    trace_add(&R->tr, label, c, sizeof c, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
}

/* Records a write's result (and status, if any). */
static void record(struct run *R, const char *what, int rc, const MPI_Status *st, MPI_Datatype dt)
{
    if (rc != MPI_SUCCESS && R->kind == MEM_HOST) {
        host_failures++;
        note("host run: %s failed with %s", what, error_name(error_class(rc)));
    }
    trace_add(&R->tr, what, "", 0, NULL, MPI_DATATYPE_NULL, rc);
    if (st) record_status(R, what, st, dt);
}

/* Rank 0 records the file (what `what` wrote) and, in the host run, checks its layout. */
static void record_file(struct run *R, const char *what, const struct variant *v, int seed)
{
    MPI_File_sync(R->fh);
    MPI_Barrier(comm);
    MPI_File_sync(R->fh);
    if (t_rank != 0) return;
    size_t n = HEAD + (size_t)t_size * v->bytes;
    unsigned char *got = (unsigned char *)xmalloc(n + 1);
    memset(got, 0, n + 1);
    FILE *f = fopen(R->path, "rb");
    size_t have = f ? fread(got, 1, n + 1, f) : 0;
    if (f) fclose(f);
    char label[200];
    snprintf(label, sizeof label, "%s %s: file", what, v->name);
    trace_add(&R->tr, label, got, have, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    if (R->check && host_failures == 0) {
        unsigned char *exp = (unsigned char *)xmalloc(n);
        memset(exp, 0, HEAD);
        for (int r = 0; r < t_size; r++) packed(v, r, seed, exp + HEAD + r * v->bytes);
        if (CHECK(have == n, "%s: the file holds %zu bytes, expected %zu", label, have, n))
            check_bytes(got, exp, n, "%s", label);
        free(exp);
    }
    free(got);
}

/* Records a read buffer and its status; in the host run checks it held rank `from`'s data. */
static void record_read(struct run *R, const char *what, const struct variant *v, void *buf,
                        MPI_Status *st, int rc, int seed, int from, size_t got)
{
    char label[200];
    snprintf(label, sizeof label, "%s %s: read", what, v->name);
    trace_mem(&R->tr, label, buf, v->span, NULL, MPI_DATATYPE_NULL, rc);
    if (st) record_status(R, label, st, v->mt);
    if (R->check && rc == MPI_SUCCESS) {
        unsigned char *data = (unsigned char *)xmalloc(v->bytes), *exp = (unsigned char *)xmalloc(v->span);
        packed(v, from, seed, data);
        unpacked(v, data, got, exp);
        unsigned char *h = mem_fetch(buf, v->span);
        if (!check_bytes(h, exp, v->span, "%s", label) && st) {
            int n = -1;
            MPI_Get_count(st, MPI_BYTE, &n);
            note("%s: status counts %d bytes, error field %d", label, n, st->MPI_ERROR);
        }
        free(h);
        free(data);
        free(exp);
    }
}

static MPI_Offset my_offset(const struct variant *v) { return HEAD + (MPI_Offset)t_rank * (MPI_Offset)v->bytes; }

/* An empty file. The barrier first: the library may truncate on one rank while another still
 * reads (MPI_File_set_size orders no other rank's accesses). */
static void fresh(struct run *R)
{
    MPI_Barrier(comm);
    MPI_File_set_size(R->fh, 0);
    MPI_File_seek(R->fh, 0, MPI_SEEK_SET);
    MPI_File_seek_shared(R->fh, 0, MPI_SEEK_SET);
}

static void *wbuf(const struct run *R, const struct variant *v, int seed)
{
    void *b = mem_alloc(R->kind, v->span);
    mem_pattern(b, v->span, t_rank, seed);
    return b;
}

static void *rbuf(const struct run *R, const struct variant *v)
{
    void *b = mem_alloc(R->kind, v->span);
    mem_poison(b, v->span);
    return b;
}

/* The families. Each writes rank r's data at HEAD + r * bytes, records the file, reads it back
 * into a poisoned buffer and records that. */
enum fam {
    F_AT, F_AT_ALL, F_IND, F_ALL, F_SHARED, F_ORDERED, F_SPLIT_AT, F_SPLIT_ALL, F_SPLIT_ORD,
    F_I_AT, F_I_AT_ALL, F_I, F_I_ALL, F_I_SHARED, F_NFAM
};
static const char *fam_name[F_NFAM] = {"at", "at_all", "individual", "all", "shared", "ordered",
                                       "split_at_all", "split_all", "split_ordered", "iat",
                                       "iat_all", "i", "iall", "ishared"};

/* One rank after the other, for the shared file pointer's order. */
#define IN_TURN(stmt)                                                                           \
    for (int turn_ = 0; turn_ < t_size; turn_++) {                                             \
        if (turn_ == t_rank) { stmt; }                                                         \
        MPI_Barrier(comm);                                                                     \
    }

/* Completes a request in one of three ways, by `how`. */
static int complete(MPI_Request *rq, MPI_Status *st, int how)
{
    if (how == 0) return MPI_Wait(rq, st);
    if (how == 1) {
        int flag = 0, rc;
        do rc = MPI_Test(rq, &flag, st);
        while (rc == MPI_SUCCESS && !flag);
        return rc;
    }
    return MPI_Waitall(1, rq, st);
}

static void family(struct run *R, int f, const struct variant *v, int seed)
{
    const char *w = fam_name[f];
    MPI_File fh = R->fh;
    MPI_Offset off = my_offset(v);
    MPI_Status st;
    MPI_Request rq;
    int rc = MPI_SUCCESS;
    fresh(R);
    void *b = wbuf(R, v, seed);
    status_init(&st);
    switch (f) {
    case F_AT: rc = MPI_File_write_at(fh, off, b, v->count, v->mt, &st); break;
    case F_AT_ALL: rc = MPI_File_write_at_all(fh, off, b, v->count, v->mt, &st); break;
    case F_IND: MPI_File_seek(fh, off, MPI_SEEK_SET); rc = MPI_File_write(fh, b, v->count, v->mt, &st); break;
    case F_ALL: MPI_File_seek(fh, off, MPI_SEEK_SET); rc = MPI_File_write_all(fh, b, v->count, v->mt, &st); break;
    case F_SHARED:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        IN_TURN(rc = MPI_File_write_shared(fh, b, v->count, v->mt, &st));
        break;
    case F_ORDERED:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        rc = MPI_File_write_ordered(fh, b, v->count, v->mt, &st);
        break;
    case F_SPLIT_AT:
        rc = MPI_File_write_at_all_begin(fh, off, b, v->count, v->mt);
        if (rc == MPI_SUCCESS) rc = MPI_File_write_at_all_end(fh, b, &st);
        break;
    case F_SPLIT_ALL:
        MPI_File_seek(fh, off, MPI_SEEK_SET);
        rc = MPI_File_write_all_begin(fh, b, v->count, v->mt);
        if (rc == MPI_SUCCESS) rc = MPI_File_write_all_end(fh, b, &st);
        break;
    case F_SPLIT_ORD:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        rc = MPI_File_write_ordered_begin(fh, b, v->count, v->mt);
        if (rc == MPI_SUCCESS) rc = MPI_File_write_ordered_end(fh, b, &st);
        break;
    case F_I_AT:
        rc = MPI_File_iwrite_at(fh, off, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 0);
        break;
    case F_I_AT_ALL:
        rc = MPI_File_iwrite_at_all(fh, off, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 2);
        break;
    case F_I:
        MPI_File_seek(fh, off, MPI_SEEK_SET);
        rc = MPI_File_iwrite(fh, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 1);
        break;
    case F_I_ALL:
        MPI_File_seek(fh, off, MPI_SEEK_SET);
        rc = MPI_File_iwrite_all(fh, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 0);
        break;
    case F_I_SHARED:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        IN_TURN(rc = MPI_File_iwrite_shared(fh, b, v->count, v->mt, &rq);
                if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 0));
        break;
    }
    char label[200];
    snprintf(label, sizeof label, "write %s %s", w, v->name);
    record(R, label, rc, &st, v->mt);
    mem_free(b);
    record_file(R, w, v, seed);

    b = rbuf(R, v);
    status_init(&st);
    switch (f) {
    case F_AT: rc = MPI_File_read_at(fh, off, b, v->count, v->mt, &st); break;
    case F_AT_ALL: rc = MPI_File_read_at_all(fh, off, b, v->count, v->mt, &st); break;
    case F_IND: MPI_File_seek(fh, off, MPI_SEEK_SET); rc = MPI_File_read(fh, b, v->count, v->mt, &st); break;
    case F_ALL: MPI_File_seek(fh, off, MPI_SEEK_SET); rc = MPI_File_read_all(fh, b, v->count, v->mt, &st); break;
    case F_SHARED:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        IN_TURN(rc = MPI_File_read_shared(fh, b, v->count, v->mt, &st));
        break;
    case F_ORDERED:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        rc = MPI_File_read_ordered(fh, b, v->count, v->mt, &st);
        break;
    case F_SPLIT_AT:
        rc = MPI_File_read_at_all_begin(fh, off, b, v->count, v->mt);
        if (rc == MPI_SUCCESS) rc = MPI_File_read_at_all_end(fh, b, &st);
        break;
    case F_SPLIT_ALL:
        MPI_File_seek(fh, off, MPI_SEEK_SET);
        rc = MPI_File_read_all_begin(fh, b, v->count, v->mt);
        if (rc == MPI_SUCCESS) rc = MPI_File_read_all_end(fh, b, &st);
        break;
    case F_SPLIT_ORD:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        rc = MPI_File_read_ordered_begin(fh, b, v->count, v->mt);
        if (rc == MPI_SUCCESS) rc = MPI_File_read_ordered_end(fh, b, &st);
        break;
    case F_I_AT:
        rc = MPI_File_iread_at(fh, off, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 0);
        break;
    case F_I_AT_ALL:
        rc = MPI_File_iread_at_all(fh, off, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 1);
        break;
    case F_I:
        MPI_File_seek(fh, off, MPI_SEEK_SET);
        rc = MPI_File_iread(fh, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 2);
        break;
    case F_I_ALL:
        MPI_File_seek(fh, off, MPI_SEEK_SET);
        rc = MPI_File_iread_all(fh, b, v->count, v->mt, &rq);
        if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 0);
        break;
    case F_I_SHARED:
        MPI_File_seek_shared(fh, HEAD, MPI_SEEK_SET);
        IN_TURN(rc = MPI_File_iread_shared(fh, b, v->count, v->mt, &rq);
                if (rc == MPI_SUCCESS) rc = complete(&rq, &st, 1));
        break;
    }
    snprintf(label, sizeof label, "%s", w);
    record_read(R, label, v, b, &st, rc, seed, t_rank, v->bytes);
    if (rc != MPI_SUCCESS && R->kind == MEM_HOST) {
        host_failures++;
        note("host run: read %s %s failed with %s", w, v->name, error_name(error_class(rc)));
    }
    mem_free(b);
}

/* Reads past the end of the file, and a read with MPI_STATUS_IGNORE. */
static void edges(struct run *R, const struct variant *v, int seed)
{
    fresh(R);
    void *b = wbuf(R, v, seed);
    int rc = MPI_File_write_at_all(R->fh, my_offset(v), b, v->count, v->mt, MPI_STATUS_IGNORE);
    record(R, "edges: write", rc, NULL, MPI_DATATYPE_NULL);
    mem_free(b);
    record_file(R, "edges", v, seed);
    b = rbuf(R, v);
    rc = MPI_File_read_at(R->fh, my_offset(v), b, v->count, v->mt, MPI_STATUS_IGNORE);
    record_read(R, "status ignored", v, b, NULL, rc, seed, t_rank, v->bytes);
    mem_free(b);
    /* 48 bytes before the end: every rank reads the last rank's tail. Contiguous memory
     * only: MPICH 4.0 counts the whole request for a vector read past the end of the file. */
    if (v->mt != MPI_INT) return;
    MPI_Offset end = HEAD + (MPI_Offset)t_size * (MPI_Offset)v->bytes, tail = 48;
    b = rbuf(R, v);
    MPI_Status st;
    status_init(&st);
    rc = MPI_File_read_at(R->fh, end - tail, b, v->count, v->mt, &st);
    const char *label = "past the end";
    trace_mem(&R->tr, label, b, v->span, NULL, MPI_DATATYPE_NULL, rc);
    record_status(R, label, &st, v->mt);
    if (R->check && rc == MPI_SUCCESS) {
        int n = -1;
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(n == (int)tail, "read past the end of the file: %d bytes counted, expected %d", n, (int)tail);
        unsigned char *data = (unsigned char *)xmalloc(v->bytes), *exp = (unsigned char *)xmalloc(v->span);
        packed(v, t_size - 1, seed, data);
        unpacked(v, data + v->bytes - tail, tail, exp);
        unsigned char *h = mem_fetch(b, v->span);
        check_bytes(h, exp, v->span, "read past the end %s", v->name);
        free(h);
        free(data);
        free(exp);
    }
    mem_free(b);
}

/* The large-count forms, found by name (absent without cudampi on Open MPI). */
typedef int (*rw_at_c)(MPI_File, MPI_Offset, void *, int64_t, MPI_Datatype, MPI_Status *);
typedef int (*rw_c)(MPI_File, void *, int64_t, MPI_Datatype, MPI_Status *);
typedef int (*irw_at_c)(MPI_File, MPI_Offset, void *, int64_t, MPI_Datatype, MPI_Request *);
typedef int (*begin_c)(MPI_File, void *, int64_t, MPI_Datatype);

static void large_count(struct run *R, const struct variant *v, int seed)
{
    rw_at_c write_at_all = (rw_at_c)dlsym(RTLD_DEFAULT, "MPI_File_write_at_all_c");
    rw_at_c read_at = (rw_at_c)dlsym(RTLD_DEFAULT, "MPI_File_read_at_c");
    rw_c write = (rw_c)dlsym(RTLD_DEFAULT, "MPI_File_write_c");
    rw_c read_all = (rw_c)dlsym(RTLD_DEFAULT, "MPI_File_read_all_c");
    irw_at_c iread_at = (irw_at_c)dlsym(RTLD_DEFAULT, "MPI_File_iread_at_c");
    begin_c read_all_begin = (begin_c)dlsym(RTLD_DEFAULT, "MPI_File_read_all_begin_c");
    if (!write_at_all || !read_at || !write || !read_all || !iread_at || !read_all_begin) {
        if (t_rank == 0 && R->kind == MEM_HOST) note("the library has no MPI_File_*_c: large-count forms skipped");
        return;
    }
    MPI_Status st;
    MPI_Request rq;
    /* write_at_all_c, then read_at_c, iread_at_c, and read_all_begin_c with the plain _end */
    fresh(R);
    void *b = wbuf(R, v, seed);
    status_init(&st);
    int rc = write_at_all(R->fh, my_offset(v), b, v->count, v->mt, &st);
    record(R, "write_at_all_c", rc, &st, v->mt);
    mem_free(b);
    record_file(R, "write_at_all_c", v, seed);
    b = rbuf(R, v);
    status_init(&st);
    rc = read_at(R->fh, my_offset(v), b, v->count, v->mt, &st);
    record_read(R, "read_at_c", v, b, &st, rc, seed, t_rank, v->bytes);
    mem_free(b);
    b = rbuf(R, v);
    status_init(&st);
    rc = iread_at(R->fh, my_offset(v), b, v->count, v->mt, &rq);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&rq, &st);
    record_read(R, "iread_at_c", v, b, &st, rc, seed, t_rank, v->bytes);
    mem_free(b);
    b = rbuf(R, v);
    status_init(&st);
    MPI_File_seek(R->fh, my_offset(v), MPI_SEEK_SET);
    rc = read_all_begin(R->fh, b, v->count, v->mt);
    if (rc == MPI_SUCCESS) rc = MPI_File_read_all_end(R->fh, b, &st);
    record_read(R, "read_all_begin_c", v, b, &st, rc, seed, t_rank, v->bytes);
    mem_free(b);
    /* write_c through the individual pointer */
    fresh(R);
    b = wbuf(R, v, seed + 1);
    MPI_File_seek(R->fh, my_offset(v), MPI_SEEK_SET);
    rc = write(R->fh, b, v->count, v->mt, &st);
    record(R, "write_c", rc, &st, v->mt);
    mem_free(b);
    record_file(R, "write_c", v, seed + 1);
    b = rbuf(R, v);
    status_init(&st);
    MPI_File_seek(R->fh, my_offset(v), MPI_SEEK_SET);
    rc = read_all(R->fh, b, v->count, v->mt, &st);
    record_read(R, "read_all_c", v, b, &st, rc, seed + 1, t_rank, v->bytes);
    mem_free(b);
}

static void one_run(struct run *R, const char *dir)
{
    static char path[512];
    if (t_rank == 0)
        snprintf(path, sizeof path, "%s/cudampi-io-%d-%s.dat", dir, (int)getpid(), mem_kind_name(R->kind));
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, comm);
    R->path = path;
    int rc = MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &R->fh);
    if (rc != MPI_SUCCESS) DIE("MPI_File_open(%s) failed: %s", path, error_name(error_class(rc)));
    int seed = 10;
    for (int vi = 0; vi < 2; vi++) {
        for (int f = 0; f < F_NFAM; f++) family(R, f, &V[vi], seed++);
        edges(R, &V[vi], seed++);
        large_count(R, &V[vi], seed++);
    }
    MPI_File_close(&R->fh);
    MPI_Barrier(comm);
    if (t_rank == 0) unlink(path);
}

#ifndef IO_HOST_ONLY
/* A freed device buffer in a file call: MPI_ERR_BUFFER through the file's error handler,
 * which returns (MPI_ERRORS_RETURN is the default for files), and the program goes on; the
 * file is left as it was. With cudampi only (without it the library would crash or fail in
 * read(2)/write(2)). */
static int raised; /* calls of the file's error handler */
static void count_raised(MPI_File *fh, int *code, ...)
{
    (void)fh;
    (void)code;
    raised++;
}

static void freed_buffer(const char *dir)
{
    char path[512];
    if (t_rank == 0) snprintf(path, sizeof path, "%s/cudampi-io-%d-freed.dat", dir, (int)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, comm);
    MPI_File fh;
    MPI_CHECK(MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    void *f = mem_alloc(MEM_DEVICE, 4096);
    mem_free(f); /* cudaFree */
    MPI_Request rq = MPI_REQUEST_NULL;
    int rc = MPI_File_write_at(fh, 0, f, 16, MPI_BYTE, MPI_STATUS_IGNORE);
    CHECK(error_class(rc) == MPI_ERR_BUFFER, "MPI_File_write_at from a freed device buffer: class %s", error_name(error_class(rc)));
    rc = MPI_File_read_at(fh, 0, f, 16, MPI_BYTE, MPI_STATUS_IGNORE);
    CHECK(error_class(rc) == MPI_ERR_BUFFER, "MPI_File_read_at into a freed device buffer: class %s", error_name(error_class(rc)));
    rc = MPI_File_iread_at(fh, 0, f, 16, MPI_BYTE, &rq);
    CHECK(error_class(rc) == MPI_ERR_BUFFER, "MPI_File_iread_at into a freed device buffer: class %s", error_name(error_class(rc)));
    CHECK(rq == MPI_REQUEST_NULL || MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS, "the failed MPI_File_iread_at left a request");
    /* the same once more, with an error handler of the program's own */
    MPI_Errhandler eh;
    MPI_File_create_errhandler(count_raised, &eh);
    MPI_File_set_errhandler(fh, eh);
    rc = MPI_File_write_at(fh, 0, f, 16, MPI_BYTE, MPI_STATUS_IGNORE);
    rc |= MPI_File_read_at(fh, 0, f, 16, MPI_BYTE, MPI_STATUS_IGNORE);
    CHECK(raised == 2 && rc != MPI_SUCCESS, "the file's own error handler ran %d times for 2 refused calls", raised);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    MPI_Offset size = -1;
    MPI_File_get_size(fh, &size);
    CHECK(size == 0, "the failed writes left %lld bytes in the file", (long long)size);
    /* A nonblocking read whose device buffer is freed before its completion: the copy to the
     * device fails in MPI_Wait, which raises the error on the file's own handler, as the
     * library raises the errors of a file request. */
    unsigned char bytes[16];
    memset(bytes, 0x5a, sizeof bytes);
    MPI_Barrier(comm); /* every rank has looked at the empty file */
    MPI_CHECK(MPI_File_write_at(fh, 16 * t_rank, bytes, 16, MPI_BYTE, MPI_STATUS_IGNORE));
    MPI_Barrier(comm);
    MPI_File_create_errhandler(count_raised, &eh);
    MPI_File_set_errhandler(fh, eh);
    raised = 0;
    void *g = mem_alloc(MEM_DEVICE, 4096);
    rc = MPI_File_iread_at(fh, 16 * t_rank, g, 16, MPI_BYTE, &rq);
    CHECK(rc == MPI_SUCCESS, "MPI_File_iread_at into a device buffer: class %s", error_name(error_class(rc)));
    mem_free(g);
    rc = rc == MPI_SUCCESS ? MPI_Wait(&rq, MPI_STATUS_IGNORE) : MPI_SUCCESS;
    CHECK(error_class(rc) == MPI_ERR_BUFFER && raised == 1,
          "MPI_Wait of a read into device memory freed meanwhile: class %s, the file's handler ran %d times",
          error_name(error_class(rc)), raised);
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    MPI_File_close(&fh);
}
#endif

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    variants();
    const char *dir = t_env("TMPDIR", "/tmp");
    struct run host = {MEM_HOST, NULL, MPI_FILE_NULL, {0}, 1};
    one_run(&host, dir);
    int any = 0;
    MPI_Allreduce(&host_failures, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any && t_rank == 0) note("MPI-IO calls fail on host buffers with this library: the device run must fail alike");
#ifndef IO_HOST_ONLY
    struct run dev = {MEM_DEVICE, NULL, MPI_FILE_NULL, {0}, 0};
    one_run(&dev, dir);
    trace_compare(&host.tr, &dev.tr, "device buffers");
    trace_free(&dev.tr);
    if (shim_loaded() && !host_mode()) freed_buffer(dir);
#endif
    trace_free(&host.tr);
    MPI_Type_free(&V[1].mt);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
