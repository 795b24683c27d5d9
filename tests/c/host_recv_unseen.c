// cudampi-test: ranks=2 without-shim=crash timeout=180
/* Device messages received into host buffers by MPI_Irecv, completed by calls that ask for no
 * status (MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE), while no other request of the receiver is
 * one cudampi keeps. Under the fast paths such a message arrives as an envelope, and the
 * receiver must tell it from the buffer alone, since MPI reports no size. Rank 0 sends two
 * messages from device memory (MPI_BYTE and MPI_DOUBLE receives, sizes 4 KiB to 1 MiB, each
 * with a pattern of its own); rank 1 completes them through each of MPI_Wait, MPI_Test,
 * MPI_Waitall, MPI_Testall, MPI_Waitany, MPI_Testany, MPI_Waitsome and MPI_Testsome, and
 * compares every byte and the poisoned slack after it. Then the same with a third receive
 * through a vector datatype in the same MPI_Waitall, and host messages whose first bytes are
 * the envelope's fixed text (of an envelope's size and larger), which must arrive unchanged.
 * First of all, the job's first device message lands in a receive posted before it was sent
 * (a barrier between): the receive is watched though no envelope had yet been sent to anyone. */
#include "common.h"

#define SLACK 16

enum { WAIT, TEST, WAITALL, TESTALL, WAITANY, TESTANY, WAITSOME, TESTSOME, CALLS };
static const char *call_name[CALLS] = {"MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Testall",
                                       "MPI_Waitany", "MPI_Testany", "MPI_Waitsome", "MPI_Testsome"};

/* Completes the n requests of q with `call`, asking for no status. */
static void complete(int call, int n, MPI_Request *q)
{
    int flag = 0, index, outcount, indices[8], left = n;
    switch (call) {
    case WAIT:
        for (int i = 0; i < n; i++)
            MPI_CHECK(MPI_Wait(&q[i], MPI_STATUS_IGNORE));
        break;
    case TEST:
        for (int i = 0; i < n; i++)
            for (flag = 0; !flag;)
                MPI_CHECK(MPI_Test(&q[i], &flag, MPI_STATUS_IGNORE));
        break;
    case WAITALL:
        MPI_CHECK(MPI_Waitall(n, q, MPI_STATUSES_IGNORE));
        break;
    case TESTALL:
        while (!flag)
            MPI_CHECK(MPI_Testall(n, q, &flag, MPI_STATUSES_IGNORE));
        break;
    case WAITANY:
        while (left > 0) {
            MPI_CHECK(MPI_Waitany(n, q, &index, MPI_STATUS_IGNORE));
            CHECK(index >= 0 && index < n, "MPI_Waitany index %d", index);
            left--;
        }
        break;
    case TESTANY:
        while (left > 0) {
            MPI_CHECK(MPI_Testany(n, q, &index, &flag, MPI_STATUS_IGNORE));
            if (flag && index != MPI_UNDEFINED)
                left--;
        }
        break;
    case WAITSOME:
    case TESTSOME:
        while (left > 0) {
            if (call == WAITSOME)
                MPI_CHECK(MPI_Waitsome(n, q, &outcount, indices, MPI_STATUSES_IGNORE));
            else
                MPI_CHECK(MPI_Testsome(n, q, &outcount, indices, MPI_STATUSES_IGNORE));
            if (outcount != MPI_UNDEFINED)
                left -= outcount;
        }
        break;
    }
    for (int i = 0; i < n; i++)
        CHECK(q[i] == MPI_REQUEST_NULL, "%s: request %d not freed", call_name[call], i);
}

/* The pattern of (rank 0, seed) in the first n bytes of got, then poison. */
static void expect(const unsigned char *got, size_t n, int seed, const char *what, size_t bytes)
{
    unsigned char *exp = malloc(n + SLACK);
    pattern_fill(exp, n, 0, seed);
    memset(exp + n, POISON_BYTE, SLACK);
    check_bytes(got, exp, n + SLACK, "%s, %zu bytes", what, bytes);
    free(exp);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    const size_t sizes[] = {4096 + 8, (256 << 10) + 8, (1 << 20) + 8};
    const size_t most = (1 << 20) + 8;
    void *d[3] = {NULL, NULL, NULL};
    unsigned char *h[3];
    for (int i = 0; i < 3; i++) {
        if (t_rank == 0)
            d[i] = mem_alloc(MEM_DEVICE, 2 * most);
        h[i] = malloc(2 * most + SLACK);
    }
    int seed = 1;

    /* The job's first device message, into a receive posted before it was sent: under the fast
     * paths the first envelope that reaches rank 1. */
    {
        MPI_Request q = MPI_REQUEST_NULL;
        if (t_rank == 1) {
            memset(h[0], POISON_BYTE, most + SLACK);
            MPI_CHECK(MPI_Irecv(h[0], (int)most, MPI_BYTE, 0, 30, MPI_COMM_WORLD, &q));
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0) {
            mem_pattern(d[0], most, 0, seed);
            MPI_CHECK(MPI_Send(d[0], (int)most, MPI_BYTE, 1, 30, MPI_COMM_WORLD));
        } else if (t_rank == 1) {
            MPI_CHECK(MPI_Waitall(1, &q, MPI_STATUSES_IGNORE));
            expect(h[0], most, seed, "first envelope, receive posted before it was sent", most);
        }
        seed++;
    }

    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s];
        for (int call = 0; call < CALLS; call++, seed += 2) {
            if (t_rank == 0) {
                mem_pattern(d[0], n, 0, seed);
                mem_pattern(d[1], n, 0, seed + 1);
                MPI_CHECK(MPI_Send(d[0], (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
                MPI_CHECK(MPI_Send(d[1], (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD));
            } else if (t_rank == 1) {
                MPI_Request q[2];
                memset(h[0], POISON_BYTE, n + SLACK);
                memset(h[1], POISON_BYTE, n + SLACK);
                MPI_CHECK(MPI_Irecv(h[0], (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &q[0]));
                MPI_CHECK(MPI_Irecv(h[1], (int)(n / 8), MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, &q[1]));
                complete(call, 2, q);
                expect(h[0], n, seed, call_name[call], n);
                expect(h[1], n, seed + 1, call_name[call], n);
            }
        }
    }

    /* A receive through a vector datatype (blocks of 32 bytes every 64) beside two packed ones
     * in one MPI_Waitall without statuses. */
    for (int s = 0; s < 3; s++, seed += 3) {
        size_t n = sizes[s] & ~(size_t)31, blocks = n / 32;
        if (t_rank == 0) {
            for (int i = 0; i < 3; i++)
                mem_pattern(d[i], n, 0, seed + i);
            for (int i = 0; i < 3; i++)
                MPI_CHECK(MPI_Send(d[i], (int)n, MPI_BYTE, 1, 10 + i, MPI_COMM_WORLD));
        } else if (t_rank == 1) {
            MPI_Datatype vec;
            MPI_CHECK(MPI_Type_vector((int)blocks, 32, 64, MPI_BYTE, &vec));
            MPI_CHECK(MPI_Type_commit(&vec));
            MPI_Request q[3];
            for (int i = 0; i < 3; i++)
                memset(h[i], POISON_BYTE, 2 * n + SLACK);
            MPI_CHECK(MPI_Irecv(h[0], (int)n, MPI_BYTE, 0, 10, MPI_COMM_WORLD, &q[0]));
            MPI_CHECK(MPI_Irecv(h[1], 1, vec, 0, 11, MPI_COMM_WORLD, &q[1]));
            MPI_CHECK(MPI_Irecv(h[2], (int)n, MPI_BYTE, 0, 12, MPI_COMM_WORLD, &q[2]));
            MPI_CHECK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
            expect(h[0], n, seed, "MPI_Waitall beside a vector receive", n);
            expect(h[2], n, seed + 2, "MPI_Waitall beside a vector receive", n);
            unsigned char *packed = malloc(n), *exp = malloc(2 * n);
            pattern_fill(packed, n, 0, seed + 1);
            memset(exp, POISON_BYTE, 2 * n);
            for (size_t b = 0; b < blocks; b++)
                memcpy(exp + 64 * b, packed + 32 * b, 32);
            check_bytes(h[1], exp, 64 * (blocks - 1) + 32, "vector receive, %zu bytes", n);
            free(packed);
            free(exp);
            MPI_CHECK(MPI_Type_free(&vec));
        }
    }

    /* Host messages that begin with the envelope's fixed text, with and without statuses. */
    static const char text[16] = "cudampi-ipc-v4\0";
    const size_t look[] = {1056, 4096};
    for (int s = 0; s < 2; s++) {
        for (int with_status = 0; with_status < 2; with_status++, seed++) {
            size_t n = look[s];
            unsigned char *m = malloc(n);
            pattern_fill(m, n, 0, seed);
            memcpy(m, text, sizeof text);
            if (t_rank == 0) {
                MPI_CHECK(MPI_Send(m, (int)n, MPI_BYTE, 1, 20, MPI_COMM_WORLD));
            } else if (t_rank == 1) {
                MPI_Request q;
                MPI_Status st;
                memset(h[0], POISON_BYTE, n + SLACK);
                MPI_CHECK(MPI_Irecv(h[0], (int)n, MPI_BYTE, 0, 20, MPI_COMM_WORLD, &q));
                MPI_CHECK(MPI_Wait(&q, with_status ? &st : MPI_STATUS_IGNORE));
                if (with_status)
                    check_status(&st, MPI_BYTE, 0, 20, (int)n, "host message like an envelope");
                unsigned char *exp = malloc(n + SLACK);
                memcpy(exp, m, n);
                memset(exp + n, POISON_BYTE, SLACK);
                check_bytes(h[0], exp, n + SLACK, "host message of %zu bytes like an envelope, %s", n,
                            with_status ? "with status" : "without");
                free(exp);
            }
            free(m);
        }
    }
    for (int i = 0; i < 3; i++) {
        if (d[i])
            mem_free(d[i]);
        free(h[i]);
    }
    return report_and_finalize();
}
