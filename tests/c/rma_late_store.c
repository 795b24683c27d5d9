// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx timeout=120
/* The owner's own work on its device window is still running when it opens an epoch, and a
 * peer's put lands only after it: on the stand-in driver, whose holds make a blocking stream
 * busy, a thread of the owner stores a pattern into its window 30 ms after the owner's
 * synchronisation call started, then ends the hold. The synchronisation call must wait for
 * that work (the program issued it before the call), so the peer's put, made after the call,
 * wins where the two overlap, and the store stays where it does not. For a window created over
 * device memory and for device memory attached to a dynamic window (which its owner serves
 * whatever the node layout), each with the call that opens the epoch being MPI_Win_fence,
 * MPI_Win_post and MPI_Win_unlock of the owner's own lock. Every mode of the matrix runs it:
 * created windows are mapped with IPC and served by their owners without. On a GPU, where no
 * hold exists, only the plain exchange runs (rma_device's dynamic case is the same race there,
 * and failed 1 run in 2 with MPICH 5 before the fix). */
#include "late_write.h"

#define BYTES 4096
#define PUT_AT 1024
#define PUT_BYTES 2048

enum { FENCE, POST, UNLOCK_OWN };
static const char *const opener[] = {"MPI_Win_fence", "MPI_Win_post", "MPI_Win_unlock of its own lock"};

static void epoch(MPI_Win win, unsigned char *winbuf, MPI_Aint target_base, int how, int seed)
{
    int owner = 1, origin = 0;
    unsigned char *put = pattern_new(PUT_BYTES, origin, seed + 1);
    MPI_Group world, peer;
    MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_CHECK(MPI_Group_incl(world, 1, t_rank == owner ? &origin : &owner, &peer));
    mem_poison(winbuf, BYTES);
    CUDA_CHECK(cudaDeviceSynchronize());
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == owner) {
        struct late_write w;
        int late = late_write_start(&w, NULL, winbuf, BYTES, seed);
        if (!late)
            mem_pattern(winbuf, BYTES, t_rank, seed);
        switch (how) {
        case FENCE:
            MPI_CHECK(MPI_Win_fence(0, win));
            MPI_CHECK(MPI_Win_fence(0, win));
            break;
        case POST:
            MPI_CHECK(MPI_Win_post(peer, 0, win));
            MPI_CHECK(MPI_Win_wait(win));
            break;
        case UNLOCK_OWN:
            MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, owner, 0, win));
            MPI_CHECK(MPI_Win_unlock(owner, win));
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, owner, 0, win));
            MPI_CHECK(MPI_Win_unlock(owner, win));
            break;
        }
        if (late)
            late_write_finish(&w);
        unsigned char *want = pattern_new(BYTES, t_rank, seed);
        memcpy(want + PUT_AT, put, PUT_BYTES);
        unsigned char *got = mem_fetch(winbuf, BYTES);
        check_bytes(got, want, BYTES, "%s window, the owner's store still running at %s, then a peer's put", target_base ? "dynamic" : "created",
                    opener[how]);
        free(got);
        free(want);
    } else {
        unsigned char *src = mem_alloc(MEM_DEVICE, PUT_BYTES);
        mem_put(src, put, PUT_BYTES);
        switch (how) {
        case FENCE:
            MPI_CHECK(MPI_Win_fence(0, win));
            MPI_CHECK(MPI_Put(src, PUT_BYTES, MPI_BYTE, owner, target_base + PUT_AT, PUT_BYTES, MPI_BYTE, win));
            MPI_CHECK(MPI_Win_fence(0, win));
            break;
        case POST:
            MPI_CHECK(MPI_Win_start(peer, 0, win));
            MPI_CHECK(MPI_Put(src, PUT_BYTES, MPI_BYTE, owner, target_base + PUT_AT, PUT_BYTES, MPI_BYTE, win));
            MPI_CHECK(MPI_Win_complete(win));
            break;
        case UNLOCK_OWN:
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, owner, 0, win));
            MPI_CHECK(MPI_Put(src, PUT_BYTES, MPI_BYTE, owner, target_base + PUT_AT, PUT_BYTES, MPI_BYTE, win));
            MPI_CHECK(MPI_Win_unlock(owner, win));
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            break;
        }
        mem_free(src);
    }
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    free(put);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2)
        DIE("two ranks");
    unsigned char *winbuf = mem_alloc(MEM_DEVICE, BYTES);
    int seed = 10;
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        MPI_Win win;
        MPI_Aint base = 0;
        if (dynamic) {
            MPI_CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            MPI_CHECK(MPI_Win_attach(win, winbuf, BYTES));
            MPI_Aint mine;
            MPI_CHECK(MPI_Get_address(winbuf, &mine));
            /* The origin names the owner's memory by the address the owner's MPI_Get_address gave. */
            MPI_CHECK(MPI_Bcast(&mine, 1, MPI_AINT, 1, MPI_COMM_WORLD));
            base = mine;
        } else {
            MPI_CHECK(MPI_Win_create(winbuf, BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        }
        for (int how = FENCE; how <= UNLOCK_OWN; how++)
            epoch(win, winbuf, base, how, seed += 10);
        if (dynamic)
            MPI_CHECK(MPI_Win_detach(win, winbuf));
        MPI_CHECK(MPI_Win_free(&win));
    }
    mem_free(winbuf);
    return report_and_finalize();
}
