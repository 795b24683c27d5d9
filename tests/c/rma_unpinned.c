// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx env=CUDAMPI_IPC=0 timeout=120
/* A device window whose owners serve it (CUDAMPI_IPC=0) when host memory cannot be pinned:
 * on the stand-in driver, FAKECUDA_PINNED_LIMIT=1 (read at every call) makes every pinning
 * fail from the window's creation on. The mailbox then works in pageable memory: a put and a
 * get in a fence epoch, each way, must move the bytes they name, and
 * MPI_Win_create must say so in one line that starts with "cudampi" and names the mailbox,
 * once per process, not at the second window. On a GPU the variable means nothing, pinning
 * works and no such line may appear. */
#include "common.h"
#include "capture.h"
#include <dlfcn.h>

#define BYTES (256 << 10)
#define PUT_AT 1000
#define PUT_N 70000
#define GET_AT 90000
#define GET_N 50000

static void exchange(MPI_Win win, unsigned char *winbuf, int seed)
{
    int peer = 1 - t_rank;
    unsigned char *put = pattern_new(PUT_N, t_rank, seed + 1);
    unsigned char *src = mem_alloc(MEM_DEVICE, PUT_N), *dst = mem_alloc(MEM_DEVICE, GET_N);
    mem_put(src, put, PUT_N);
    mem_poison(dst, GET_N);
    unsigned char *mine = pattern_new(BYTES, t_rank, seed);
    mem_put(winbuf, mine, BYTES);
    MPI_CHECK(MPI_Win_fence(0, win));
    MPI_CHECK(MPI_Put(src, PUT_N, MPI_BYTE, peer, PUT_AT, PUT_N, MPI_BYTE, win));
    MPI_CHECK(MPI_Get(dst, GET_N, MPI_BYTE, peer, GET_AT, GET_N, MPI_BYTE, win));
    MPI_CHECK(MPI_Win_fence(0, win));

    /* What this window must hold: its own pattern under the peer's put. */
    unsigned char *peer_put = pattern_new(PUT_N, peer, seed + 1);
    memcpy(mine + PUT_AT, peer_put, PUT_N);
    unsigned char *got = mem_fetch(winbuf, BYTES);
    check_bytes(got, mine, BYTES, "window after the peer's put, seed %d", seed);
    unsigned char *theirs = pattern_new(BYTES, peer, seed);
    unsigned char *got_get = mem_fetch(dst, GET_N);
    check_bytes(got_get, theirs + GET_AT, GET_N, "get from the peer's window, seed %d", seed);
    free(put);
    free(mine);
    free(peer_put);
    free(got);
    free(theirs);
    free(got_get);
    mem_free(src);
    mem_free(dst);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int stand_in = dlsym(RTLD_DEFAULT, "fakecuda_stream_hold") != NULL;
    setenv("FAKECUDA_PINNED_LIMIT", "1", 1);
    for (int round = 0; round < 2; round++) {
        unsigned char *winbuf = mem_alloc(MEM_DEVICE, BYTES);
        MPI_Win win;
        capture_begin();
        int rc = MPI_Win_create(winbuf, BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        int lines = capture_end("mailbox");
        MPI_CHECK(rc);
        int want = stand_in && round == 0 && !host_mode();
        CHECK(lines == want, "window %d: %d lines of cudampi about its mailbox, %d expected (stand-in driver: %d)", round, lines, want, stand_in);
        exchange(win, winbuf, 10 * round + 3);
        MPI_CHECK(MPI_Win_free(&win));
        mem_free(winbuf);
    }
    unsetenv("FAKECUDA_PINNED_LIMIT");
    return report_and_finalize();
}
