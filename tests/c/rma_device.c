// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx timeout=120
/* One-sided communication on device memory: every RMA communication call (MPI_Put, MPI_Get,
 * MPI_Accumulate on float/short/unsigned char/uint64/int with MAX/MIN/SUM/BXOR/REPLACE,
 * MPI_Get_accumulate, MPI_Fetch_and_op incl. MPI_NO_OP, MPI_Compare_and_swap, the request forms
 * and the large-count forms where the symbol exists) in fence, PSCW, lock/unlock and
 * lock_all/flush epochs (rma_ops.h), with the window and the origin/result buffers in host or
 * device memory: host/host is the reference, and device window + device buffers, host window +
 * device buffers, device window + host buffers must give the same bytes in the window and in
 * every (poisoned) result buffer. The reference is checked against values computed from the
 * operations. A window over device memory reports its device base (MPI_WIN_BASE) and
 * MPI_WIN_SEPARATE (MPI_WIN_MODEL); MPI_Win_create_c serves it too; device memory attached to
 * a dynamic window is refused with MPI_ERR_RMA_ATTACH; MPI_Win_free leaves the last remote
 * updates in device memory. Open MPI's UCX one-sided component is left out (env=), as on the
 * GPU machine, where it cannot create windows even on host memory; Open MPI 4.1's one-sided
 * progress sometimes stalls for 8-16 s on 2 shared cores, on host memory without cudampi too
 * (timeout=). There is no run without cudampi: Open MPI's single-copy one-sided path gets
 * EFAULT on device memory and retries forever instead of crashing. */
#include "common.h"
#include "rma_ops.h"

typedef int (*win_create_c_fn)(void *, MPI_Aint, MPI_Aint, MPI_Info, MPI_Comm, MPI_Win *);

static void run(struct trace *t, int win_kind, int buf_kind, int use_c)
{
    char *winbuf = (char *)mem_alloc(win_kind, WIN_BYTES);
    char *origin = (char *)mem_alloc(buf_kind, RESULT_BYTES);
    char *result = (char *)mem_alloc(buf_kind, RESULT_BYTES);
    mem_pattern(winbuf, WIN_BYTES, t_rank, 99);
    MPI_Win win;
    win_create_c_fn create_c = (win_create_c_fn)rma_sym("MPI_Win_create_c");
    if (use_c && create_c)
        MPI_CHECK(create_c(winbuf, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    else
        MPI_CHECK(MPI_Win_create(winbuf, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    void *base = NULL;
    int *model = NULL, flag = 0;
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == winbuf, "MPI_WIN_BASE %p, window memory %p", base, (void *)winbuf);
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && model, "MPI_WIN_MODEL missing");
    if (flag && model && mem_kind_is_device(win_kind) && !host_mode())
        CHECK(*model == MPI_WIN_SEPARATE, "MPI_WIN_MODEL of a device window is %d, not MPI_WIN_SEPARATE", *model);
    for (int e = 0; e < N_EPOCHS; e++) rma_epoch(t, win, winbuf, origin, result, e);

    /* A last passive update, then MPI_Win_free: it reaches the window memory. */
    int target = (t_rank + 1) % t_size;
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
    MPI_CHECK(MPI_Put(origin, 16, MPI_INT, target, (MPI_Aint)REGION * t_rank + 4864, 16, MPI_INT, win));
    MPI_CHECK(MPI_Win_unlock(target, win));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_CHECK(MPI_Win_free(&win));
    trace_mem(t, "window after MPI_Win_free", winbuf, WIN_BYTES, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    mem_free(winbuf);
    mem_free(origin);
    mem_free(result);
}

static void attach_refused(void)
{
    MPI_Win win;
    MPI_CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    void *dev = mem_alloc(MEM_DEVICE, 4096);
    int rc = MPI_Win_attach(win, dev, 4096);
    if (host_mode()) {
        CHECK(rc == MPI_SUCCESS, "MPI_Win_attach of host memory: %s", error_name(error_class(rc)));
        if (rc == MPI_SUCCESS) MPI_CHECK(MPI_Win_detach(win, dev));
    } else {
        CHECK(error_class(rc) == MPI_ERR_RMA_ATTACH, "MPI_Win_attach of device memory: %s, expected MPI_ERR_RMA_ATTACH",
              error_name(error_class(rc)));
    }
    MPI_CHECK(MPI_Win_free(&win));
    mem_free(dev);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    struct trace ref = {0};
    run(&ref, MEM_HOST, MEM_HOST, 0);
    for (int e = 0; e < N_EPOCHS; e++) rma_expect(&ref, e);
    static const struct { int win, buf; const char *what; } runs[] = {
        {MEM_DEVICE, MEM_DEVICE, "device window, device buffers"},
        {MEM_HOST, MEM_DEVICE, "host window, device buffers"},
        {MEM_DEVICE, MEM_HOST, "device window, host buffers"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct trace got = {0};
        run(&got, runs[i].win, runs[i].buf, i == 0);
        trace_compare(&ref, &got, runs[i].what);
        trace_free(&got);
    }
    attach_refused();
    trace_free(&ref);
    return report_and_finalize();
}
