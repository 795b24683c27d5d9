// cudampi-test: ranks=2,4 without-shim=pass
/* A plain host-memory MPI program (no CUDA calls, no CUDA headers): point-to-point in all
 * send modes, ANY_SOURCE receives, MPI_PROC_NULL, a Sendrecv ring, Sendrecv_replace, probes,
 * derived datatypes (vector, indexed, struct, resized), truncation with MPI_ERRORS_RETURN.
 * It must behave identically with and without the shim, and the shim must not load CUDA into
 * a program that does not: at the end libcuda.so.1 must not be loaded
 * (dlopen(..., RTLD_NOLOAD) returns NULL). If libcuda was already loaded at start (the link
 * line pulled it in), that last check cannot be made and is skipped with a note. */
#define COMMON_NO_CUDA
#include "common.h"

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
