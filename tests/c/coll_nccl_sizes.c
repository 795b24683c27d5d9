// cudampi-test: ranks=2,4 without-shim=crash nccl=yes env=CUDAMPI_NCCL_BYTES=8K timeout=120 forced=no
/* coll_nccl_sizes.c -- which device collectives cudampi moves to NCCL by size, on either side of
 * each threshold, with CUDAMPI_NCCL_BYTES=8K (the default, set here so that the harness's mode
 * nccl, which otherwise sets 0, keeps it): MPI_Allreduce and MPI_Alltoall from 8 KiB of their
 * largest buffer; MPI_Allgather(v) and MPI_Reduce_scatter(_block) from blocks of 512 bytes per
 * rank (a sixteenth of the setting per rank), whatever the number of ranks.
 *
 * Every call's result is compared with bytes computed here (receive buffers poisoned first).
 * Mode nccl (the stand-in NCCL, a GPU per rank): a call at or above its threshold raises
 * cudampi_stats.nccl_calls by exactly one, a call below leaves it unchanged. Other modes: no
 * NCCL is loaded in CI and the counter is not looked at. */
#include "common.h"
#include "ipc_stats.h"

static unsigned long long nccl_calls(stats_fn get)
{
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    return get && get(&s) == 0 ? s.nccl_calls : 0;
}

static int value(int rank, int seed, size_t i) { return (int)((unsigned)seed * 131u + (unsigned)rank * 977u + (unsigned)i * 7u) % 1000; }

enum kind { ALLREDUCE, ALLTOALL, ALLGATHER, ALLGATHERV, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER };
static const char *kind_name[] = {"MPI_Allreduce", "MPI_Alltoall", "MPI_Allgather", "MPI_Allgatherv", "MPI_Reduce_scatter_block",
                                  "MPI_Reduce_scatter"};

/* One call of `k` on device buffers of MPI_INT: `n` ints per rank's block (Allreduce: the
 * vector), checked against the bytes it must give; returns whether it ran on NCCL. */
static int run(enum kind k, int n, int seed, stats_fn get)
{
    const int P = t_size, me = t_rank;
    const size_t total = (size_t)n * (size_t)P;
    const size_t in_n = k == ALLREDUCE ? (size_t)n : k == ALLGATHER || k == ALLGATHERV ? (size_t)n : total;
    const size_t out_n = k == ALLREDUCE || k == REDUCE_SCATTER_BLOCK || k == REDUCE_SCATTER ? (size_t)n : total;
    int *in = xmalloc(in_n * sizeof(int)), *want = xmalloc(out_n * sizeof(int)), *got = xmalloc(out_n * sizeof(int));
    for (size_t i = 0; i < in_n; i++) in[i] = value(me, seed, i);
    for (size_t i = 0; i < out_n; i++) {
        switch (k) {
        case ALLREDUCE:
            want[i] = 0;
            for (int r = 0; r < P; r++) want[i] += value(r, seed, i);
            break;
        case ALLTOALL: /* block p comes from rank p, which sent its block `me` */
            want[i] = value((int)(i / (size_t)n), seed, (size_t)me * (size_t)n + i % (size_t)n);
            break;
        case ALLGATHER:
        case ALLGATHERV:
            want[i] = value((int)(i / (size_t)n), seed, i % (size_t)n);
            break;
        case REDUCE_SCATTER_BLOCK:
        case REDUCE_SCATTER:
            want[i] = 0;
            for (int r = 0; r < P; r++) want[i] += value(r, seed, (size_t)me * (size_t)n + i);
            break;
        }
    }
    int *dsend = mem_alloc(MEM_DEVICE, in_n * sizeof(int)), *drecv = mem_alloc(MEM_DEVICE, out_n * sizeof(int));
    mem_put(dsend, in, in_n * sizeof(int));
    mem_poison(drecv, out_n * sizeof(int));
    int *counts = xmalloc((size_t)P * sizeof(int)), *displs = xmalloc((size_t)P * sizeof(int));
    for (int r = 0; r < P; r++) {
        counts[r] = n;
        displs[r] = r * n;
    }
    unsigned long long before = nccl_calls(get);
    int rc = MPI_ERR_OTHER;
    switch (k) {
    case ALLREDUCE: rc = MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLTOALL: rc = MPI_Alltoall(dsend, n, MPI_INT, drecv, n, MPI_INT, MPI_COMM_WORLD); break;
    case ALLGATHER: rc = MPI_Allgather(dsend, n, MPI_INT, drecv, n, MPI_INT, MPI_COMM_WORLD); break;
    case ALLGATHERV: rc = MPI_Allgatherv(dsend, n, MPI_INT, drecv, counts, displs, MPI_INT, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER_BLOCK: rc = MPI_Reduce_scatter_block(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: rc = MPI_Reduce_scatter(dsend, drecv, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD); break;
    }
    unsigned long long ran = nccl_calls(get) - before;
    CHECK(rc == MPI_SUCCESS, "%s of %d ints per block returned %d", kind_name[k], n, rc);
    mem_get(got, drecv, out_n * sizeof(int));
    check_bytes(got, want, out_n * sizeof(int), "%s of %d ints per block", kind_name[k], n);
    mem_free(dsend);
    mem_free(drecv);
    free(in);
    free(want);
    free(got);
    free(counts);
    free(displs);
    return ran == 1 ? 1 : ran == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = stats_lookup();
    const int nccl = strcmp(t_env("CMTEST_MODE", ""), "nccl") == 0 && get;
    const int P = t_size;
    /* (call, ints per block, whether NCCL runs it): the last call below each threshold and the
     * first at it. */
    const struct {
        enum kind k;
        int n;
        int on;
    } cases[] = {
        {ALLREDUCE, 2048 - 1, 0},
        {ALLREDUCE, 2048, 1},
        {ALLTOALL, 2048 / P - 1, 0},
        {ALLTOALL, 2048 / P, 1},
        {ALLGATHER, 128 - 1, 0},
        {ALLGATHER, 128, 1},
        {ALLGATHERV, 128 - 1, 0},
        {ALLGATHERV, 128, 1},
        {REDUCE_SCATTER_BLOCK, 128 - 1, 0},
        {REDUCE_SCATTER_BLOCK, 128, 1},
        {REDUCE_SCATTER, 128 - 1, 0},
        {REDUCE_SCATTER, 128, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int ran = run(cases[c].k, cases[c].n, (int)c + 1, get);
        CHECK(!nccl || ran == cases[c].on, "%s of %d ints per block among %d ranks: %s NCCL, expected %s", kind_name[cases[c].k],
              cases[c].n, P, ran < 0 ? "counted more than once on" : ran ? "ran on" : "did not run on",
              cases[c].on ? "on NCCL" : "staged");
    }
    if (t_rank == 0) note("mode %s: thresholds %s", nccl ? "nccl" : t_env("CMTEST_MODE", "shim"), nccl ? "checked" : "not checked");
    return report_and_finalize();
}
