// cudampi-test: ranks=2 without-shim=pass env=OMPI_MCA_osc=^ucx timeout=120
/* One-sided communication on host memory, no CUDA: every RMA communication call in fence,
 * PSCW, lock/unlock and lock_all/flush epochs (rma_ops.h), checked against values computed
 * from the operations; MPI_WIN_BASE and MPI_WIN_MODEL as the library reports them. It must
 * behave the same with and without cudampi (no extra output). Open MPI 4.1's one-sided
 * progress sometimes stalls for 8-16 s on 2 shared cores, without cudampi too (timeout=). */
#define COMMON_NO_CUDA
#include "common.h"
#include "rma_ops.h"

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    struct trace t = {0};
    char *winbuf = (char *)mem_alloc(MEM_HOST, WIN_BYTES);
    char *origin = (char *)mem_alloc(MEM_HOST, RESULT_BYTES);
    char *result = (char *)mem_alloc(MEM_HOST, RESULT_BYTES);
    MPI_Win win;
    MPI_CHECK(MPI_Win_create(winbuf, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    void *base = NULL;
    int *model = NULL, flag = 0;
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == winbuf, "MPI_WIN_BASE %p, window memory %p", base, (void *)winbuf);
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && model && (*model == MPI_WIN_SEPARATE || *model == MPI_WIN_UNIFIED), "MPI_WIN_MODEL");
    for (int e = 0; e < N_EPOCHS; e++) {
        rma_epoch(&t, win, winbuf, origin, result, e);
        rma_expect(&t, e);
    }
    MPI_CHECK(MPI_Win_free(&win));
    mem_free(winbuf);
    mem_free(origin);
    mem_free(result);
    trace_free(&t);
    return report_and_finalize();
}
