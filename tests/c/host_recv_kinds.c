// cudampi-test: ranks=2 without-shim=skip timeout=120
/* Device messages received into host buffers by the receives that are neither MPI_Recv nor
 * MPI_Irecv: a persistent MPI_Recv_init started twice, and (MPI-4 libraries) MPI_Isendrecv and
 * MPI_Isendrecv_replace. Under the fast paths (the harness's ipc and chunks modes) such a
 * message arrives as an envelope, and these receives must still deliver the data and the true
 * count. Rank 0 sends 256 KiB + 5 bytes from device memory with MPI_Send, each time with a
 * pattern of its own; rank 1 compares every byte, the poisoned slack after it, and the count.
 * The sendrecv forms also carry a small host message the other way. MPICH leaves the status of
 * an MPI_Isendrecv request unset (4.0.2 and 5.0.2, without cudampi too), so there only the bytes
 * are compared. */
#include "common.h"

#define N ((256 << 10) + 5)
#define SLACK 16

static void expect(const unsigned char *got, const MPI_Status *st, int seed, const char *what)
{
    if (st)
        check_status(st, MPI_BYTE, 0, seed, N, "%s", what);
    unsigned char *exp = malloc(N + SLACK);
    for (size_t i = 0; i < N; i++)
        exp[i] = pattern_byte(1, seed, i);
    memset(exp + N, POISON_BYTE, SLACK);
    check_bytes(got, exp, N + SLACK, "%s", what);
    free(exp);
}

static int mpich(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strstr(v, "MPICH") != NULL;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    void *d = t_rank == 0 ? mem_alloc(MEM_DEVICE, N) : NULL;
    unsigned char *h = malloc(N + SLACK);
    MPI_Status st;
    MPI_Request q;

    /* a persistent receive into host memory, started twice */
    if (t_rank == 1)
        MPI_CHECK(MPI_Recv_init(h, N, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &q));
    for (int seed = 1; seed <= 2; seed++) {
        if (t_rank == 0) {
            mem_pattern(d, N, 1, seed);
            MPI_CHECK(MPI_Send(d, N, MPI_BYTE, 1, seed, MPI_COMM_WORLD));
        } else if (t_rank == 1) {
            memset(h, POISON_BYTE, N + SLACK);
            MPI_CHECK(MPI_Start(&q));
            MPI_CHECK(MPI_Wait(&q, &st));
            expect(h, &st, seed, seed == 1 ? "MPI_Recv_init, first start" : "MPI_Recv_init, second start");
        }
    }
    if (t_rank == 1)
        MPI_CHECK(MPI_Request_free(&q));

#if MPI_VERSION >= 4
    for (int seed = 3; seed <= 4; seed++) {
        int small = 1000 + seed, back = -1;
        if (t_rank == 0) {
            /* MPI_Isendrecv_replace sends back the whole buffer */
            int n = seed == 3 ? (int)sizeof small : N;
            unsigned char *hb = malloc(N);
            mem_pattern(d, N, 1, seed);
            MPI_CHECK(MPI_Sendrecv(d, N, MPI_BYTE, 1, seed, hb, n, MPI_BYTE, 1, seed, MPI_COMM_WORLD, &st));
            memcpy(&back, hb, sizeof back);
            CHECK(back == small, "the message back from rank 1: %d, expected %d", back, small);
            free(hb);
        } else if (t_rank == 1) {
            memset(h, POISON_BYTE, N + SLACK);
            if (seed == 3) {
                MPI_CHECK(MPI_Isendrecv(&small, 1, MPI_INT, 0, seed, h, N, MPI_BYTE, 0, seed, MPI_COMM_WORLD, &q));
            } else {
                /* the message out is the first 4 bytes of the buffer the message in replaces */
                memcpy(h, &small, sizeof small);
                MPI_CHECK(MPI_Isendrecv_replace(h, N, MPI_BYTE, 0, seed, 0, seed, MPI_COMM_WORLD, &q));
            }
            MPI_CHECK(MPI_Wait(&q, &st));
            /* MPICH 4.0 and 5.0 leave the status of an MPI_Isendrecv request unset, without
             * cudampi too */
            expect(h, mpich() ? NULL : &st, seed, seed == 3 ? "MPI_Isendrecv" : "MPI_Isendrecv_replace");
        }
    }
#endif
    free(h);
    if (d)
        mem_free(d);
    return report_and_finalize();
}
