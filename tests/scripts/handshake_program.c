/* The program tests/scripts/handshake.sh launches: a barrier, then rank 1 sends rank 0 two
 * messages on the tags cudampi's handshake uses, which rank 0 receives with wildcards and
 * compares, then an allreduce. Prints "handshake program: ok" on rank 0 when all is as sent. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    int sent[2][4] = {{11, 12, 13, 14}, {21, 22, 23, 24}};
    if (rank == 1) {
        MPI_Send(sent[0], 4, MPI_INT, 0, 32001, MPI_COMM_WORLD);
        MPI_Send(sent[1], 4, MPI_INT, 0, 32002, MPI_COMM_WORLD);
    } else if (rank == 0 && size > 1) {
        for (int k = 0; k < 2; k++) {
            int got[8];
            memset(got, 0x5a, sizeof got);
            MPI_Status st;
            MPI_Recv(got, 8, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            int n;
            MPI_Get_count(&st, MPI_INT, &n);
            if (st.MPI_SOURCE != 1 || st.MPI_TAG != 32001 + k || n != 4 || memcmp(got, sent[k], sizeof sent[k])) {
                printf("handshake program: message %d: source %d tag %d count %d, first int %d\n", k, st.MPI_SOURCE, st.MPI_TAG, n, got[0]);
                bad = 1;
            }
        }
    }
    int sum = 0, one = rank + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (sum != size * (size + 1) / 2) {
        printf("handshake program: allreduce gave %d\n", sum);
        bad = 1;
    }
    if (rank == 0 && !bad) printf("handshake program: ok\n");
    MPI_Finalize();
    return bad;
}
