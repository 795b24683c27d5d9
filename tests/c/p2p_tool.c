// cudampi-test: ranks=2 without-shim=crash tool=tests/c/pmpi_tool.c
/* A PMPI tool (tests/c/pmpi_tool.c, intercepting MPI_Send and MPI_Recv) is preloaded beside
 * the shim, in both orders. Device send/recv must still deliver correct bytes, and the tool
 * must see the calls: exactly the host-buffer calls the program made, and at least one call
 * (and at least the bytes, unless the fast paths, on unless CUDAMPI_IPC=0 and
 * CUDAMPI_PIPELINE=0, send envelopes instead) per device-buffer call. Found through dlsym(RTLD_DEFAULT, "pmpi_tool_calls"); the test fails
 * when the tool is not loaded. */
#include "common.h"

typedef int (*calls_fn)(void);
typedef long long (*bytes_fn)(void);
#define N_MSG 5
#define SLACK 16

static void phase(int kind, int seed, int *ncalls, long long *nbytes)
{
    const int counts[N_MSG] = {1, 100, 4099, 65536, 300001};
    int peer = 1 - t_rank;
    *ncalls = 0;
    *nbytes = 0;
    for (int i = 0; i < N_MSG; i++) {
        int c = counts[i];
        size_t n = (size_t)c * sizeof(int);
        void *s = mem_alloc(kind, n), *r = mem_alloc(kind, n + SLACK);
        mem_pattern(s, n, t_rank, seed + i);
        mem_poison(r, n + SLACK);
        MPI_Status st;
        if (t_rank == 0) {
            MPI_CHECK(MPI_Send(s, c, MPI_INT, peer, i, MPI_COMM_WORLD));
            MPI_CHECK(MPI_Recv(r, c, MPI_INT, peer, i, MPI_COMM_WORLD, &st));
        } else {
            MPI_CHECK(MPI_Recv(r, c, MPI_INT, peer, i, MPI_COMM_WORLD, &st));
            MPI_CHECK(MPI_Send(s, c, MPI_INT, peer, i, MPI_COMM_WORLD));
        }
        *ncalls += 2;
        *nbytes += 2 * (long long)n;
        check_status(&st, MPI_INT, peer, i, c, "%s message %d", mem_kind_name(kind), i);
        unsigned char *h = mem_fetch(r, n + SLACK), *e = (unsigned char *)xmalloc(n + SLACK);
        pattern_fill(e, n, peer, seed + i);
        poison_fill(e + n, SLACK);
        check_bytes(h, e, n + SLACK, "%s message %d (%d ints) with the tool loaded",
                    mem_kind_name(kind), i, c);
        free(h);
        free(e);
        mem_free(s);
        mem_free(r);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    calls_fn calls = (calls_fn)dlsym(RTLD_DEFAULT, "pmpi_tool_calls");
    bytes_fn bytes = (bytes_fn)dlsym(RTLD_DEFAULT, "pmpi_tool_bytes");
    if (t_rank == 0) {
        const char *pre = getenv("LD_PRELOAD");
        note("LD_PRELOAD=%s", pre ? pre : "(unset)");
    }
    CHECK(calls != NULL && bytes != NULL, "the PMPI tool is not loaded (preload libpmpi_tool.so)");
    if (t_rank < 2) {
        int c0 = calls ? calls() : 0;
        long long b0 = bytes ? bytes() : 0;
        int nc;
        long long nb;
        phase(MEM_HOST, 10, &nc, &nb);
        int c1 = calls ? calls() : 0;
        long long b1 = bytes ? bytes() : 0;
        if (calls) {
            CHECK(c1 - c0 == nc, "host phase: tool saw %d calls, the program made %d", c1 - c0, nc);
            CHECK(b1 - b0 == nb, "host phase: tool saw %lld bytes, the program moved %lld",
                  b1 - b0, nb);
        }
        phase(MEM_DEVICE, 20, &nc, &nb);
        int c2 = calls ? calls() : 0;
        long long b2 = bytes ? bytes() : 0;
        if (calls) {
            CHECK(c2 - c1 >= nc, "device phase: tool saw %d calls, the program made %d", c2 - c1,
                  nc);
            /* Over CUDA IPC only envelopes go through MPI_Send: a tool under the shim sees
             * those. Chunks follow an envelope through MPI_Isend, which the tool does not count. */
            const char *ipc = getenv("CUDAMPI_IPC"), *chunks = getenv("CUDAMPI_PIPELINE");
            if (ipc && strcmp(ipc, "0") == 0 && chunks && strcmp(chunks, "0") == 0)
                CHECK(b2 - b1 >= nb, "device phase: tool saw %lld bytes, the program moved %lld",
                      b2 - b1, nb);
            if (c2 - c1 != nc)
                note("device phase: tool saw %d calls for %d program calls", c2 - c1, nc);
        }
    }
    return report_and_finalize();
}
