// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx env=CUDAMPI_IPC=0 env=CUDAMPI_RMA_RING=64K timeout=120
/* One-sided operations on device windows that the owners serve (CUDAMPI_IPC=0), each larger
 * than an entry of the owner's mailbox ring (a 64 KiB ring: entries of at most 16 KiB, head
 * and byte runs included), so that every operation goes in many pieces: contiguous puts and
 * gets, puts and gets whose datatype has gaps (thousands of runs, several pieces' worth of run
 * list alone), an accumulate of doubles and a get-accumulate of ints cut at whole elements, in
 * a fence epoch and a lock epoch, both ranks at once, each on the other. The window and every result buffer must
 * hold the same bytes as the same run on host windows and buffers, with the origin and result
 * buffers in device memory and in host memory. */
#include "common.h"

#define WIN (1 << 20)
#define RES (512 << 10)
#define PUT_N 300000
#define ACC_AT 700000
#define ACC_N 20000     /* doubles */
#define GACC_AT 600000
#define GACC_N 25000    /* ints */
#define GET_AT 870000
#define GET_N 170000

/* Values that sums keep exact: no NaN whose payload two libraries could pass on differently. */
static void numbers(unsigned char *b, int seed)
{
    double *d = (double *)(b + ACC_AT);
    for (int i = 0; i < ACC_N; i++)
        d[i] = (double)((i * 7 + seed + t_rank * 3) % 1000) * 0.25;
}

static void int_numbers(unsigned char *b, int seed)
{
    int *v = (int *)(b + GACC_AT);
    for (int i = 0; i < GACC_N; i++)
        v[i] = (i * 13 + seed + t_rank) % 100000 - 50000;
}

struct outcome {
    unsigned char *win, *res;
};

static struct outcome run(int win_kind, int buf_kind)
{
    int peer = 1 - t_rank;
    unsigned char *winbuf = mem_alloc(win_kind, WIN), *origin = mem_alloc(buf_kind, WIN), *result = mem_alloc(buf_kind, RES);
    unsigned char *h = pattern_new(WIN, t_rank, 1);
    numbers(h, 1);
    int_numbers(h, 1);
    mem_put(winbuf, h, WIN);
    free(h);
    h = pattern_new(WIN, t_rank, 2);
    numbers(h, 2);
    int_numbers(h, 2);
    mem_put(origin, h, WIN);
    free(h);
    mem_poison(result, RES);
    CUDA_CHECK(cudaDeviceSynchronize());

    MPI_Win win;
    MPI_CHECK(MPI_Win_create(winbuf, WIN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    /* 5000 blocks of 3 doubles every 5 (200,000 bytes of span) and 2000 blocks of 2 doubles
     * every 6 (95,968 bytes). */
    MPI_Datatype wide, narrow;
    MPI_CHECK(MPI_Type_vector(5000, 3, 5, MPI_DOUBLE, &wide));
    MPI_CHECK(MPI_Type_vector(2000, 2, 6, MPI_DOUBLE, &narrow));
    MPI_CHECK(MPI_Type_commit(&wide));
    MPI_CHECK(MPI_Type_commit(&narrow));

    MPI_CHECK(MPI_Win_fence(0, win));
    MPI_CHECK(MPI_Put(origin, PUT_N, MPI_BYTE, peer, 0, PUT_N, MPI_BYTE, win));
    MPI_CHECK(MPI_Put(origin + 400000, 1, wide, peer, 400000, 1, wide, win));
    MPI_CHECK(MPI_Accumulate(origin + ACC_AT, ACC_N, MPI_DOUBLE, peer, ACC_AT, ACC_N, MPI_DOUBLE, MPI_SUM, win));
    MPI_CHECK(MPI_Get(result, GET_N, MPI_BYTE, peer, GET_AT, GET_N, MPI_BYTE, win));
    MPI_CHECK(MPI_Get(result + 200000, 4000, MPI_DOUBLE, peer, 300000, 1, narrow, win));
    MPI_CHECK(MPI_Win_fence(0, win));

    /* Second epoch: a get-accumulate of ints, a get whose result datatype has gaps (its
     * poisoned gaps must survive), a put with gaps at the origin only. */
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win));
    MPI_CHECK(MPI_Get_accumulate(origin + GACC_AT, GACC_N, MPI_INT, result + 240000, GACC_N, MPI_INT, peer, GACC_AT, GACC_N, MPI_INT, MPI_SUM, win));
    MPI_CHECK(MPI_Get(result + 360000, 1, narrow, peer, 100000, 4000, MPI_DOUBLE, win));
    MPI_CHECK(MPI_Put(origin + 500000, 1, narrow, peer, 880000, 4000, MPI_DOUBLE, win));
    MPI_CHECK(MPI_Win_unlock(peer, win));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    /* The owner's own lock makes the peers' updates its own, whatever the memory model. */
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win));
    MPI_CHECK(MPI_Win_unlock(t_rank, win));

    struct outcome o = {mem_fetch(winbuf, WIN), mem_fetch(result, RES)};
    MPI_CHECK(MPI_Win_free(&win));
    MPI_CHECK(MPI_Type_free(&wide));
    MPI_CHECK(MPI_Type_free(&narrow));
    mem_free(winbuf);
    mem_free(origin);
    mem_free(result);
    return o;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2)
        DIE("two ranks");
    struct outcome ref = run(MEM_HOST, MEM_HOST);
    static const struct {
        int win, buf;
        const char *what;
    } ways[] = {{MEM_DEVICE, MEM_DEVICE, "device window, device buffers"}, {MEM_DEVICE, MEM_HOST, "device window, host buffers"}};
    for (size_t k = 0; k < sizeof ways / sizeof ways[0]; k++) {
        struct outcome o = run(ways[k].win, ways[k].buf);
        check_bytes(o.win, ref.win, WIN, "%s: the window vs the host run", ways[k].what);
        check_bytes(o.res, ref.res, RES, "%s: the results vs the host run", ways[k].what);
        free(o.win);
        free(o.res);
    }
    /* The reference must have moved bytes: the peer's put landed in this rank's window. */
    unsigned char *put = pattern_new(PUT_N, 1 - t_rank, 2);
    check_bytes(ref.win, put, PUT_N, "host run: the peer's put");
    free(put);
    free(ref.win);
    free(ref.res);
    return report_and_finalize();
}
