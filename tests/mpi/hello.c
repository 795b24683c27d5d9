// cudampi-test: ranks=4 without-shim=pass link=yes
// Smoke test for an MPI installation (tests/mpi/setup.sh), and the "mpi-hello" row of the
// matrix: a host-only program that must run the same with the shim preloaded or linked.
// Checks what the shim's tests lean on, so a transport problem shows up here first:
//   - a token travels once around the ring (small eager messages),
//   - rank 0 and 1 swap an 8 MiB message (rendezvous / single-copy path),
//   - an allreduce,
//   - one-sided MPI_Put inside fences (RMA component selection).
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (8u << 20)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = -1, size = 0, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* ring */
    int token = 1000;
    if (size > 1) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += 1;
            MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
        }
    }
    if (rank == 0 && token != 1000 + size - 1) bad |= 1;

    /* large exchange between ranks 0 and 1 */
    if (size > 1 && rank < 2) {
        unsigned char *s = malloc(BIG), *r = malloc(BIG);
        for (unsigned i = 0; i < BIG; i++) s[i] = (unsigned char)(i * 7 + rank + 1);
        memset(r, 0xA5, BIG);
        MPI_Sendrecv(s, BIG, MPI_BYTE, 1 - rank, 9, r, BIG, MPI_BYTE, 1 - rank, 9,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (unsigned i = 0; i < BIG; i++)
            if (r[i] != (unsigned char)(i * 7 + (1 - rank) + 1)) { bad |= 2; break; }
        free(s);
        free(r);
    }

    /* allreduce */
    int sum = 0, one = rank + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (sum != size * (size + 1) / 2) bad |= 4;

    /* one-sided: every rank puts its rank+1 into slot `rank` of rank 0's window */
    int *win_buf = NULL;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)(size * sizeof(int)), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &win_buf, &win);
    for (int i = 0; i < size; i++) win_buf[i] = -1;
    MPI_Win_fence(0, win);
    MPI_Put(&one, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    if (rank == 0)
        for (int i = 0; i < size; i++)
            if (win_buf[i] != i + 1) { bad |= 8; break; }
    MPI_Win_free(&win);

    int all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = '\0';
        printf("hello: %d ranks, ring token %d, allreduce %d, %s (bad=0x%x)\n", size, token,
               sum, all_bad ? "WRONG" : "ok", all_bad);
        printf("hello: %s\n", lib);
    }
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
