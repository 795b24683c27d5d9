// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_POOL_BYTES=1048576 timeout=300
/* Messages much larger than the shim's staging pool (bounded to 1 MiB by the harness through
 * CUDAMPI_POOL_BYTES) must still arrive intact: 3 MiB + 5 bytes and 32 MiB, device->device,
 * device->host, host->device (compared with host->host), with MPI_Send and MPI_Ssend, a
 * strided datatype spanning 32 MiB, an MPI_Sendrecv exchange where both directions stage at
 * once, and MPI_Sendrecv_replace. */
#include "common.h"

#define SLACK 16
static MPI_Comm comm;

enum { OP_SEND, OP_SSEND, OP_VECTOR, OP_SENDRECV, OP_REPLACE, OP_N };
static const char *opname[] = {"Send", "Ssend", "vector Send", "Sendrecv", "Sendrecv_replace"};

/* Rank r's result of one operation, as host bytes (NULL when r only sent). */
static unsigned char *op(int o, size_t n, int sk, int rk, int seed, size_t *outlen)
{
    int peer = 1 - t_rank;
    unsigned char *res = NULL;
    *outlen = 0;
    if (o == OP_SEND || o == OP_SSEND) {
        if (t_rank == 0) {
            void *s = mem_alloc(sk, n);
            mem_pattern(s, n, 0, seed);
            if (o == OP_SEND)
                MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, 1, seed, comm));
            else
                MPI_CHECK(MPI_Ssend(s, (int)n, MPI_BYTE, 1, seed, comm));
            mem_free(s);
        } else {
            void *r = mem_alloc(rk, n + SLACK);
            mem_poison(r, n + SLACK);
            MPI_Status st;
            MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, 0, seed, comm, &st));
            check_status(&st, MPI_BYTE, 0, seed, (int)n, "%s %zu", opname[o], n);
            res = mem_fetch(r, n + SLACK);
            *outlen = n + SLACK;
            mem_free(r);
        }
    } else if (o == OP_VECTOR) {
        /* n/2 bytes of data in 64-byte blocks every 128 bytes: span ~n */
        int blocks = (int)(n / 128);
        MPI_Datatype vt;
        MPI_Type_vector(blocks, 64, 128, MPI_BYTE, &vt);
        MPI_Type_commit(&vt);
        size_t span = (size_t)blocks * 128;
        if (t_rank == 0) {
            void *s = mem_alloc(sk, span);
            mem_pattern(s, span, 0, seed);
            MPI_CHECK(MPI_Send(s, 1, vt, 1, seed, comm));
            mem_free(s);
        } else {
            void *r = mem_alloc(rk, span + SLACK);
            mem_gap(r, span + SLACK, seed);
            MPI_CHECK(MPI_Recv(r, 1, vt, 0, seed, comm, MPI_STATUS_IGNORE));
            res = mem_fetch(r, span + SLACK);
            *outlen = span + SLACK;
            mem_free(r);
        }
        MPI_Type_free(&vt);
    } else if (o == OP_SENDRECV) {
        void *s = mem_alloc(sk, n), *r = mem_alloc(rk, n + SLACK);
        mem_pattern(s, n, t_rank, seed);
        mem_poison(r, n + SLACK);
        MPI_Status st;
        MPI_CHECK(MPI_Sendrecv(s, (int)n, MPI_BYTE, peer, seed, r, (int)n, MPI_BYTE, peer, seed,
                               comm, &st));
        check_status(&st, MPI_BYTE, peer, seed, (int)n, "Sendrecv %zu", n);
        res = mem_fetch(r, n + SLACK);
        *outlen = n + SLACK;
        mem_free(s);
        mem_free(r);
    } else {
        void *b = mem_alloc(rk, n + SLACK);
        mem_pattern(b, n, t_rank, seed);
        mem_poison((char *)b + n, SLACK);
        MPI_Status st;
        MPI_CHECK(MPI_Sendrecv_replace(b, (int)n, MPI_BYTE, peer, seed, peer, seed, comm, &st));
        check_status(&st, MPI_BYTE, peer, seed, (int)n, "Sendrecv_replace %zu", n);
        res = mem_fetch(b, n + SLACK);
        *outlen = n + SLACK;
        mem_free(b);
    }
    return res;
}

/* What rank t_rank must hold after op o. */
static unsigned char *expected(int o, size_t n, int seed, size_t len)
{
    unsigned char *e = (unsigned char *)xmalloc(len);
    int peer = 1 - t_rank;
    if (o == OP_VECTOR) {
        unsigned char *s = pattern_new(len, 0, seed);
        gap_fill(e, len, seed);
        for (size_t off = 0; off + 128 <= len - SLACK; off += 128) memcpy(e + off, s + off, 64);
        free(s);
    } else {
        pattern_fill(e, n, o == OP_SEND || o == OP_SSEND ? 0 : peer, seed);
        poison_fill(e + n, len - n);
    }
    return e;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (t_rank == 0)
        note("CUDAMPI_POOL_BYTES=%s", t_env("CUDAMPI_POOL_BYTES", "(unset)"));
    const size_t sizes[2] = {3 * 1024 * 1024 + 5, 32 * 1024 * 1024};
    const int pl[4][2] = {{MEM_HOST, MEM_HOST}, {MEM_DEVICE, MEM_DEVICE}, {MEM_DEVICE, MEM_HOST},
                          {MEM_HOST, MEM_DEVICE}};
    const char *pn[4] = {"H->H", "D->D", "D->H", "H->D"};
    int seed = 0;
    if (t_rank < 2) {
        for (int si = 0; si < 2; si++)
            for (int o = 0; o < OP_N; o++) {
                size_t n = sizes[si];
                seed++;
                size_t rlen = 0, len = 0;
                unsigned char *ref = op(o, n, MEM_HOST, MEM_HOST, seed, &rlen);
                unsigned char *exp = ref ? expected(o, n, seed, rlen) : NULL;
                if (ref) check_bytes(ref, exp, rlen, "%s %zu bytes H->H", opname[o], n);
                for (int p = 1; p < 4; p++) {
                    if (o == OP_REPLACE && p > 1) break; /* one buffer: host or device */
                    unsigned char *got = op(o, n, pl[p][0], pl[p][1], seed, &len);
                    if (got) {
                        check_bytes(got, exp, len, "%s %zu bytes %s vs pattern", opname[o], n, pn[p]);
                        check_bytes(got, ref, len, "%s %zu bytes %s vs host run", opname[o], n, pn[p]);
                        free(got);
                    }
                }
                free(ref);
                free(exp);
            }
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
