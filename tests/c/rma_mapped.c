// cudampi-test: ranks=3 env=OMPI_MCA_osc=^ucx timeout=240
/* One-sided communication that touches a few bytes of large device windows: 1 GiB per rank
 * where cudampi carries out the operations (windows mapped inside a node, served by their
 * owners elsewhere), 16 MiB where it keeps a public copy (CUDAMPI_RMA_RING=0: there every
 * synchronisation compares the window). Each run makes windows over
 * MPI_COMM_WORLD, a duplicate, a split with the ranks reversed and a subset the last rank takes
 * no part in, and on each runs one epoch of every synchronisation mode, touching bytes at the
 * start, the middle and the end of the window: MPI_Put and MPI_Get of bytes and of a vector
 * with gaps on both sides and of a type without gaps whose typemap runs out of address order,
 * MPI_Accumulate of doubles from every origin into one target at
 * once, MPI_Fetch_and_op and MPI_Get_accumulate on one counter from every origin (the sums of
 * the fetched values are compared, their order being the library's), MPI_Compare_and_swap,
 * MPI_Rput/MPI_Rget, MPI_Accumulate with MPI_MAX. The host-window run is the reference; device
 * windows with device and with host buffers, and windows whose parts are device memory on some
 * ranks and host memory on others, must leave the same bytes in every window spot and every
 * (poisoned) result buffer. */
#include "common.h"
#include "rma_ops.h"

#define SPOT 1024
#define N_SPOTS 3
static size_t win_bytes;
static int carried; /* windows_carried(MPI_COMM_WORLD): the size of the windows */

static size_t spot(int i) { return i == 0 ? 64 : i == 1 ? win_bytes / 2 + 8 : win_bytes - SPOT; }

/* The origin buffer: 256 pattern bytes, 8 doubles, 8 ints, one int64 1. */
#define O_DOUBLES 256
#define O_INTS 320
#define O_ONE 352

static void fill_origin(char *origin, int r)
{
    unsigned char h[SPOT];
    pattern_fill(h, sizeof h, r, 5);
    for (int i = 0; i < 8; i++) ((double *)(h + O_DOUBLES))[i] = (r + 1) * 0.5 + i;
    for (int i = 0; i < 8; i++) ((int *)(h + O_INTS))[i] = (r * 37 + i * 11) % 23;
    *(int64_t *)(h + O_ONE) = 1;
    mem_put(origin, h, sizeof h);
}

static void sequence(struct trace *t, MPI_Comm comm, int part_kind, int buf_kind, const char *what)
{
    int r, n;
    MPI_CHECK(MPI_Comm_rank(comm, &r));
    MPI_CHECK(MPI_Comm_size(comm, &n));
    int right = (r + 1) % n, left = (r + n - 1) % n;
    char label[160];
    char *mem = (char *)mem_alloc(part_kind, win_bytes);
    for (int s = 0; s < N_SPOTS; s++) {
        unsigned char *p = pattern_new(SPOT, r, s);
        memset(p, 0, 32); /* counters at the start of each spot */
        memset(p + 256, 0, 64); /* the doubles every origin adds to: sums exact in any order */
        mem_put(mem + spot(s), p, SPOT);
        free(p);
    }
    char *origin = (char *)mem_alloc(buf_kind, SPOT), *result = (char *)mem_alloc(buf_kind, SPOT);
    fill_origin(origin, r);
    mem_poison(result, SPOT);
    MPI_Datatype vec, rev;
    MPI_CHECK(MPI_Type_vector(8, 1, 2, MPI_INT, &vec));
    MPI_CHECK(MPI_Type_commit(&vec));
    /* eight ints without gaps whose typemap lists the second four first */
    int rev_len[2] = {4, 4}, rev_at[2] = {4, 0};
    MPI_CHECK(MPI_Type_indexed(2, rev_len, rev_at, MPI_INT, &rev));
    MPI_CHECK(MPI_Type_commit(&rev));
    MPI_Win win;
    MPI_CHECK(MPI_Win_create(mem, (MPI_Aint)win_bytes, 1, MPI_INFO_NULL, comm, &win));
    int64_t fetched[2] = {0, 0};
    int64_t *fetch_at = (int64_t *)xmalloc(2 * sizeof(int64_t));

    /* fence: bytes at the end, a vector at the start, doubles and a counter at rank 0 */
    MPI_CHECK(MPI_Win_fence(0, win));
    MPI_CHECK(MPI_Put(origin, 64, MPI_BYTE, right, (MPI_Aint)spot(2) + 64, 64, MPI_BYTE, win));
    MPI_CHECK(MPI_Get(result, 64, MPI_BYTE, left, (MPI_Aint)spot(1) + 40, 64, MPI_BYTE, win));
    MPI_CHECK(MPI_Put(origin + O_INTS - 64, 1, vec, right, (MPI_Aint)spot(0) + 128, 1, vec, win));
    MPI_CHECK(MPI_Get(result + 64, 8, MPI_INT, left, (MPI_Aint)spot(2) + 300, 1, vec, win));
    MPI_CHECK(MPI_Put(origin + 160, 1, rev, right, (MPI_Aint)spot(2) + 512, 8, MPI_INT, win));
    MPI_CHECK(MPI_Get(result + 256, 8, MPI_INT, left, (MPI_Aint)spot(0) + 256, 1, rev, win));
    MPI_CHECK(MPI_Accumulate(origin + O_DOUBLES, 8, MPI_DOUBLE, 0, (MPI_Aint)spot(1) + 256, 8, MPI_DOUBLE, MPI_SUM, win));
    MPI_CHECK(MPI_Fetch_and_op(origin + O_ONE, result + 128, MPI_INT64_T, 0, (MPI_Aint)spot(0), MPI_SUM, win));
    MPI_CHECK(MPI_Win_fence(0, win));

    /* post-start-complete-wait: each rank exposes to its left neighbour, accesses its right */
    MPI_Group all, from, to;
    MPI_CHECK(MPI_Win_get_group(win, &all));
    MPI_CHECK(MPI_Group_incl(all, 1, &left, &from));
    MPI_CHECK(MPI_Group_incl(all, 1, &right, &to));
    MPI_CHECK(MPI_Win_post(from, 0, win));
    MPI_CHECK(MPI_Win_start(to, 0, win));
    MPI_CHECK(MPI_Put(origin + 32, 32, MPI_BYTE, right, (MPI_Aint)spot(1) + 600, 32, MPI_BYTE, win));
    MPI_CHECK(MPI_Get(result + 136, 32, MPI_BYTE, right, (MPI_Aint)spot(0) + 700, 32, MPI_BYTE, win));
    MPI_CHECK(MPI_Win_complete(win));
    MPI_CHECK(MPI_Win_wait(win));
    MPI_CHECK(MPI_Group_free(&from));
    MPI_CHECK(MPI_Group_free(&to));
    MPI_CHECK(MPI_Group_free(&all));

    /* exclusive lock on rank 0: a counter every origin adds to; a compare-and-swap on the right
     * neighbour that succeeds (its compare value is the bytes there) */
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    MPI_CHECK(MPI_Get_accumulate(origin + O_ONE, 1, MPI_INT64_T, result + 168, 1, MPI_INT64_T, 0, (MPI_Aint)spot(0) + 8, 1,
                                 MPI_INT64_T, MPI_SUM, win));
    MPI_CHECK(MPI_Win_unlock(0, win));
    MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    unsigned char *expect = pattern_new(SPOT, right, 2);
    char *compare = (char *)mem_alloc(buf_kind, 8);
    mem_put(compare, expect + 800, 8);
    free(expect);
    MPI_CHECK(MPI_Compare_and_swap(origin + 8, compare, result + 176, MPI_INT64_T, right, (MPI_Aint)spot(2) + 800, win));
    MPI_CHECK(MPI_Win_unlock(right, win));

    /* lock_all: request-based put and get, then MPI_MAX into the right neighbour */
    MPI_CHECK(MPI_Win_lock_all(0, win));
    MPI_Request reqs[2];
    MPI_CHECK(MPI_Rput(origin + 128, 16, MPI_INT, right, (MPI_Aint)spot(2) + 128, 16, MPI_INT, win, &reqs[0]));
    MPI_CHECK(MPI_Rget(result + 184, 64, MPI_BYTE, left, (MPI_Aint)spot(1) + 900, 64, MPI_BYTE, win, &reqs[1]));
    MPI_CHECK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
    MPI_CHECK(MPI_Win_flush_all(win));
    MPI_CHECK(MPI_Accumulate(origin + O_INTS, 8, MPI_INT, right, (MPI_Aint)spot(0) + 512, 8, MPI_INT, MPI_MAX, win));
    MPI_CHECK(MPI_Win_unlock_all(win));
    MPI_CHECK(MPI_Barrier(comm));

    /* a window on a subset of ranks on different nodes may still lie on one node */
    int *model = NULL, flag = 0, here = windows_carried(comm);
    MPI_CHECK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    if (mem_kind_is_device(part_kind) && !host_mode() && flag && model)
        CHECK(*model == (here ? MPI_WIN_UNIFIED : MPI_WIN_SEPARATE), "%s: MPI_WIN_MODEL %d", what, *model);
    MPI_CHECK(MPI_Win_free(&win));

    /* The fetched counter values, in whatever order the origins came: their sum. */
    unsigned char *res = mem_fetch(result, SPOT);
    memcpy(&fetch_at[0], res + 128, 8);
    memcpy(&fetch_at[1], res + 168, 8);
    memset(res + 128, 0, 8);
    memset(res + 168, 0, 8);
    MPI_CHECK(MPI_Allreduce(fetch_at, fetched, 2, MPI_INT64_T, MPI_SUM, comm));
    snprintf(label, sizeof label, "%s: results", what);
    trace_add(t, label, res, SPOT, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    snprintf(label, sizeof label, "%s: sums of the fetched counters", what);
    trace_add(t, label, fetched, sizeof fetched, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    free(res);
    for (int s = 0; s < N_SPOTS; s++) {
        snprintf(label, sizeof label, "%s: window bytes %zu..%zu", what, spot(s), spot(s) + SPOT);
        trace_mem(t, label, mem + spot(s), SPOT, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    }
    free(fetch_at);
    MPI_CHECK(MPI_Type_free(&vec));
    MPI_CHECK(MPI_Type_free(&rev));
    mem_free(compare);
    mem_free(origin);
    mem_free(result);
    mem_free(mem);
}

/* `sequence` on every communicator; `part` gives the kind of a rank's part from its rank. */
static void every_comm(struct trace *t, int (*part)(int), int buf_kind)
{
    MPI_Comm dup, reversed, subset;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, 0, t_size - t_rank, &reversed));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, t_rank < t_size - 1 ? 0 : MPI_UNDEFINED, t_rank, &subset));
    sequence(t, MPI_COMM_WORLD, part(t_rank), buf_kind, "world");
    sequence(t, dup, part(t_rank), buf_kind, "dup");
    sequence(t, reversed, part(t_rank), buf_kind, "reversed");
    if (subset != MPI_COMM_NULL) {
        sequence(t, subset, part(t_rank), buf_kind, "subset");
        MPI_CHECK(MPI_Comm_free(&subset));
    }
    MPI_CHECK(MPI_Comm_free(&reversed));
    MPI_CHECK(MPI_Comm_free(&dup));
}

static int host_part(int r) { (void)r; return MEM_HOST; }
static int device_part(int r) { (void)r; return MEM_DEVICE; }
static int mixed_part(int r) { return r % 2 ? MEM_HOST : MEM_DEVICE; }

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    carried = windows_carried(MPI_COMM_WORLD);
    win_bytes = carried ? (size_t)1 << 30 : (size_t)16 << 20;
    if (t_rank == 0) note("windows of %zu MiB", win_bytes >> 20);
    struct trace ref = {0};
    every_comm(&ref, host_part, MEM_HOST);
    static const struct { int (*part)(int); int buf; const char *what; } runs[] = {
        {device_part, MEM_DEVICE, "device windows, device buffers"},
        {device_part, MEM_HOST, "device windows, host buffers"},
        {mixed_part, MEM_DEVICE, "device and host parts, device buffers"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct trace got = {0};
        every_comm(&got, runs[i].part, runs[i].buf);
        trace_compare(&ref, &got, runs[i].what);
        trace_free(&got);
    }
    trace_free(&ref);
    return report_and_finalize();
}
