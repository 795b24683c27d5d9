// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx timeout=120
/* One-sided communication on device memory: every RMA communication call (MPI_Put, MPI_Get,
 * MPI_Accumulate on float/short/unsigned char/uint64/int with MAX/MIN/SUM/BXOR/REPLACE,
 * MPI_Get_accumulate, MPI_Fetch_and_op incl. MPI_NO_OP, MPI_Compare_and_swap, the request forms
 * and the large-count forms where the symbol exists) in fence, PSCW, lock/unlock and
 * lock_all/flush epochs (rma_ops.h), with the window and the origin/result buffers in host or
 * device memory: host/host is the reference, and device window + device buffers, host window +
 * device buffers, device window + host buffers must give the same bytes in the window and in
 * every (poisoned) result buffer. The reference is checked against values computed from the
 * operations (where the library's own MPI_BXOR accumulate on 64-bit integers is wrong, as Open
 * MPI 5.0.11's is, a window cudampi maps is held to the computed bytes). A window over device memory reports its device base (MPI_WIN_BASE), its size
 * (MPI_WIN_SIZE) and MPI_WIN_UNIFIED where cudampi maps it (one node, IPC on) or its owners
 * serve it, MPI_WIN_SEPARATE with CUDAMPI_RMA_RING=0 (MPI_WIN_MODEL); MPI_Win_create_c serves it too. The same runs with the memory
 * attached to a dynamic window, origins naming it by the target's MPI_Get_address: the same
 * bytes, the same model, and the same device range attached to a second window is accepted
 * where an overlapping one is refused with MPI_ERR_RMA_ATTACH. MPI_Win_free (after
 * MPI_Win_detach) leaves the last remote updates in device memory. Open MPI's UCX one-sided component is left out (env=), as on the
 * GPU machine, where it cannot create windows even on host memory; Open MPI 4.1's one-sided
 * progress sometimes stalls for 8-16 s on 2 shared cores, on host memory without cudampi too
 * (timeout=). There is no run without cudampi: Open MPI's single-copy one-sided path gets
 * EFAULT on device memory and retries forever instead of crashing. */
#include "common.h"
#include "rma_ops.h"

typedef int (*win_create_c_fn)(void *, MPI_Aint, MPI_Aint, MPI_Info, MPI_Comm, MPI_Win *);

/* A window over `winbuf` (WIN_BYTES), created over it or (dynamic) attached to a dynamic
 * window, with the origins' base of each target set (rma_target_base). */
static MPI_Win open_window(char *winbuf, int win_kind, int dynamic, int use_c)
{
    MPI_Win win;
    win_create_c_fn create_c = (win_create_c_fn)rma_sym("MPI_Win_create_c");
    rma_target_base = 0;
    if (dynamic) {
        MPI_CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        MPI_CHECK(MPI_Win_attach(win, winbuf, WIN_BYTES));
        /* Origins name target memory by the address MPI_Get_address gave at the target;
         * differences of such addresses are those of the memory. */
        MPI_Aint mine, later, *all = malloc(sizeof(MPI_Aint) * (size_t)t_size);
        MPI_CHECK(MPI_Get_address(winbuf, &mine));
        MPI_CHECK(MPI_Get_address(winbuf + 4000, &later));
        CHECK(MPI_Aint_diff(later, mine) == 4000, "MPI_Get_address difference within attached memory: %ld",
              (long)MPI_Aint_diff(later, mine));
        if (!mem_kind_is_device(win_kind) || host_mode())
            CHECK(mine == (MPI_Aint)winbuf, "MPI_Get_address of host memory: %#lx, not %p", (long)mine, (void *)winbuf);
        MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD));
        rma_target_base = all[(t_rank + 1) % t_size];
        free(all);
    } else if (use_c && create_c) {
        MPI_CHECK(create_c(winbuf, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    } else {
        MPI_CHECK(MPI_Win_create(winbuf, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    void *base = NULL;
    int *model = NULL, flag = 0;
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    if (!dynamic) CHECK(flag && base == winbuf, "MPI_WIN_BASE %p, window memory %p", base, (void *)winbuf);
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && model, "MPI_WIN_MODEL missing");
    /* A created device window is mapped by every rank when all run on one node with IPC on,
     * else served by its owners, and device memory attached to a dynamic window is served
     * (MPI_WIN_UNIFIED either way); with CUDAMPI_RMA_RING=0 it has a public copy
     * (MPI_WIN_SEPARATE). */
    int want = windows_carried(MPI_COMM_WORLD) ? MPI_WIN_UNIFIED : MPI_WIN_SEPARATE;
    if (flag && model && mem_kind_is_device(win_kind) && !host_mode())
        CHECK(*model == want, "MPI_WIN_MODEL of a %s device window is %d, not %s", dynamic ? "dynamic" : "created", *model,
              want == MPI_WIN_UNIFIED ? "MPI_WIN_UNIFIED" : "MPI_WIN_SEPARATE");
    if (!dynamic) {
        MPI_Aint *size = NULL;
        MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag));
        CHECK(flag && size && *size == WIN_BYTES, "MPI_WIN_SIZE %ld, not %d", size ? (long)*size : -1L, WIN_BYTES);
    }
    return win;
}

static void run(struct trace *t, int win_kind, int buf_kind, int dynamic, int use_c)
{
    char *winbuf = (char *)mem_alloc(win_kind, WIN_BYTES);
    char *origin = (char *)mem_alloc(buf_kind, RESULT_BYTES);
    char *result = (char *)mem_alloc(buf_kind, RESULT_BYTES);
    mem_pattern(winbuf, WIN_BYTES, t_rank, 99);
    MPI_Win win = open_window(winbuf, win_kind, dynamic, use_c);
    for (int e = 0; e < N_EPOCHS; e++) rma_epoch(t, win, winbuf, origin, result, e);

    /* A last passive update, then MPI_Win_free (a dynamic window's memory detached first): it
     * reaches the window memory. */
    int target = (t_rank + 1) % t_size;
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
    MPI_CHECK(MPI_Put(origin, 16, MPI_INT, target, MPI_Aint_add(rma_target_base, (MPI_Aint)REGION * t_rank + 4864), 16,
                      MPI_INT, win));
    MPI_CHECK(MPI_Win_unlock(target, win));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (dynamic) MPI_CHECK(MPI_Win_detach(win, winbuf));
    MPI_CHECK(MPI_Win_free(&win));
    trace_mem(t, "window after MPI_Win_free", winbuf, WIN_BYTES, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    mem_free(winbuf);
    mem_free(origin);
    mem_free(result);
}

/* Device memory attached twice: the same range to a second window is accepted, a range that
 * overlaps it without being it is refused with MPI_ERR_RMA_ATTACH (host memory: accepted, as
 * by the library). */
static void attach_twice(void)
{
    MPI_Win a, b;
    MPI_CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &a));
    MPI_CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &b));
    MPI_CHECK(MPI_Win_set_errhandler(b, MPI_ERRORS_RETURN));
    char *dev = (char *)mem_alloc(MEM_DEVICE, 8192);
    MPI_CHECK(MPI_Win_attach(a, dev, 8192));
    MPI_CHECK(MPI_Win_attach(b, dev, 8192));
    int rc = MPI_Win_attach(b, dev + 1024, 1024);
    if (host_mode()) {
        CHECK(rc == MPI_SUCCESS, "MPI_Win_attach of overlapping host memory: %s", error_name(error_class(rc)));
        if (rc == MPI_SUCCESS) MPI_CHECK(MPI_Win_detach(b, dev + 1024));
    } else {
        CHECK(error_class(rc) == MPI_ERR_RMA_ATTACH, "MPI_Win_attach of overlapping device memory: %s, expected MPI_ERR_RMA_ATTACH",
              error_name(error_class(rc)));
    }
    MPI_CHECK(MPI_Win_detach(b, dev));
    MPI_CHECK(MPI_Win_detach(a, dev));
    MPI_CHECK(MPI_Win_free(&b));
    MPI_CHECK(MPI_Win_free(&a));
    mem_free(dev);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    struct trace ref = {0};
    run(&ref, MEM_HOST, MEM_HOST, 0, 0);
    for (int e = 0; e < N_EPOCHS; e++) rma_expect(&ref, e);
    static const struct { int win, buf, dynamic; const char *what; } runs[] = {
        {MEM_DEVICE, MEM_DEVICE, 0, "device window, device buffers"},
        {MEM_HOST, MEM_DEVICE, 0, "host window, device buffers"},
        {MEM_DEVICE, MEM_HOST, 0, "device window, host buffers"},
        {MEM_HOST, MEM_HOST, 1, "dynamic window, host memory and buffers"},
        {MEM_DEVICE, MEM_DEVICE, 1, "dynamic window, device memory and buffers"},
        {MEM_DEVICE, MEM_HOST, 1, "dynamic window, device memory, host buffers"},
    };
    /* A window cudampi carries out operations on combines MPI_BXOR with MPI_Reduce_local:
     * compared against the computed bytes, which the library's own run may not have
     * (rma_bxor_fixed). */
    struct trace fixed = {0};
    int carried = windows_carried(MPI_COMM_WORLD), wrong = rma_bxor_fixed(&ref, &fixed);
    if (wrong && carried) note("the library's own MPI_BXOR accumulates left %d bytes other than computed; device windows are held to the computed bytes", wrong);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct trace got = {0};
        run(&got, runs[i].win, runs[i].buf, runs[i].dynamic, i == 0);
        int computed = carried && runs[i].win == MEM_DEVICE;
        trace_compare(computed ? &fixed : &ref, &got, runs[i].what);
        trace_free(&got);
    }
    trace_free(&fixed);
    attach_twice();
    trace_free(&ref);
    return report_and_finalize();
}
