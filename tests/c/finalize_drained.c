// cudampi-test: ranks=2 without-shim=skip timeout=180
/* MPI_Finalize leaves nothing of cudampi's own protocol in the MPI's unexpected queue. Device
 * messages of 100 KB go from each rank to the other, 100 of them sent with MPI_Isend in reverse
 * tag order to receives posted in tag order (inside a node the receiver copies them over IPC
 * from the sender's buffer, and a sender whose receiver took them in another order moves them
 * into exported memory, released later by a message of cudampi's), then 100 in tag order,
 * then 10 with blocking MPI_Send/MPI_Recv, then 6 of 2 MiB in reverse order (in chunks where
 * IPC does not reach). Every message is checked byte for byte. After MPI_Finalize,
 * cudampi_get_stats' own_messages_unreceived, the messages of cudampi's own that the finalize
 * found unreceived and had to drop, must be 0 on every rank: before cudampi drained them,
 * MPICH over UCX printed a warning for each of them (98 for this test's first round). */
#include "common.h"
#include "../../include/cudampi.h"

typedef int (*sized_fn)(struct cudampi_stats *, size_t);

enum { N = 100, SMALL = 100000, LARGE = 2 << 20, NLARGE = 6 };

/* n messages of `bytes` to the peer and n from it, sent in reverse tag order when `reverse`,
 * blocking when `blocking`; checks every received byte. */
static void round_trip(char *sbuf, char *rbuf, char *host, char *want, int n, size_t bytes, int reverse, int blocking, int seed)
{
    int peer = 1 - t_rank;
    for (int i = 0; i < n; i++) {
        pattern_fill(host + (size_t)i * bytes, bytes, t_rank, seed + i);
        pattern_fill(want + (size_t)i * bytes, bytes, peer, seed + i);
    }
    mem_put(sbuf, host, (size_t)n * bytes);
    poison_fill(host, (size_t)n * bytes);
    mem_put(rbuf, host, (size_t)n * bytes);
    if (blocking) {
        for (int i = 0; i < n; i++) {
            if (t_rank == 0) {
                MPI_Send(sbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, peer, i, MPI_COMM_WORLD);
                MPI_Recv(rbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, peer, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, peer, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, peer, i, MPI_COMM_WORLD);
            }
        }
    } else {
        MPI_Request *req = xmalloc(2 * (size_t)n * sizeof *req);
        for (int i = 0; i < n; i++)
            MPI_Irecv(rbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, peer, i, MPI_COMM_WORLD, &req[i]);
        for (int k = 0; k < n; k++) {
            int i = reverse ? n - 1 - k : k;
            MPI_Isend(sbuf + (size_t)i * bytes, (int)bytes, MPI_BYTE, peer, i, MPI_COMM_WORLD, &req[n + i]);
        }
        MPI_Waitall(2 * n, req, MPI_STATUSES_IGNORE);
        free(req);
    }
    mem_get(host, rbuf, (size_t)n * bytes);
    check_bytes(host, want, (size_t)n * bytes, "%d messages of %zu bytes (%s%s)", n, bytes, blocking ? "blocking" : "nonblocking",
                reverse ? ", reverse order" : "");
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    size_t most = (size_t)N * SMALL > (size_t)NLARGE * LARGE ? (size_t)N * SMALL : (size_t)NLARGE * LARGE;
    char *sbuf = mem_alloc(MEM_DEVICE, most), *rbuf = mem_alloc(MEM_DEVICE, most);
    char *host = xmalloc(most), *want = xmalloc(most);
    round_trip(sbuf, rbuf, host, want, N, SMALL, 1, 0, 1);
    round_trip(sbuf, rbuf, host, want, N, SMALL, 0, 0, 1000);
    round_trip(sbuf, rbuf, host, want, 10, SMALL, 0, 1, 2000);
    round_trip(sbuf, rbuf, host, want, NLARGE, LARGE, 1, 0, 3000);
    int failures = 0;
    MPI_Allreduce(&t_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();

    sized_fn get = (sized_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats_sized");
    struct cudampi_stats st;
    memset(&st, 0xA5, sizeof st);
    int got = get ? get(&st, sizeof st) : -1;
    int ok = failures == 0;
    if (got != (int)sizeof st) {
        printf("FAIL rank %d: cudampi_get_stats_sized filled %d of %zu bytes: no own_messages_unreceived\n", t_rank, got, sizeof st);
        ok = 0;
    } else if (st.own_messages_unreceived != 0) {
        printf("FAIL rank %d: MPI_Finalize found %llu messages of cudampi's own unreceived\n", t_rank,
               (unsigned long long)st.own_messages_unreceived);
        ok = 0;
    }
    if (t_rank == 0)
        printf("%s finalize_drained\n", ok ? "PASS" : "FAIL");
    fflush(stdout);
    return ok ? 0 : 1;
}
