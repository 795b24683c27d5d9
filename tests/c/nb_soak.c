// cudampi-test: ranks=2 without-shim=crash link=yes timeout=240
/* Soak: 100,000 nonblocking device operations. Two ranks each run 25,000 iterations of one
 * device MPI_Irecv from the other rank and one device MPI_Isend to it (2 x 25,000 x 2 =
 * 100,000 operations), 8 iterations (16 requests) to a window, the window completed with
 * MPI_Waitall (every 61st window with an MPI_Testall loop, every 11th with MPI_Waitsome, every
 * 13th with MPI_Waitany, to stress every completion path's bookkeeping). Sizes are small
 * (1 byte to 4 KiB), every 500th message 64 KiB + 3, every 5,000th 1 MiB. Every 97th iteration
 * and every large one is checked: the sender writes the iteration's pattern first, the
 * receiver poisons its buffer first, and after the window the buffer must hold the pattern and
 * intact slack, the status the right source, tag and count. The same iterations run first on
 * host buffers and the sampled results are compared with the device run.
 *
 * With cudampi loaded (cudampi_get_stats, looked up with dlsym), after sampled windows and at
 * the end: staging_leased and requests_tracked (struct cudampi_stats of include/cudampi.h)
 * must be 0, since no request is outstanding, and pool_bytes_held must stay under 64 MiB.
 * Rank 0 prints "staging_leased=N requests_tracked=N" for the log.
 * CUDAMPI_SOAK_ITERS overrides the iteration count (per rank). */
#include "common.h"
#include "../../include/cudampi.h"
#include <time.h>

#define SLACK 16
#define WIN 8 /* iterations per window: 16 requests */
#define BIG (1 << 20)
#define POOL_LIMIT (64ull << 20)

typedef int (*stats_fn)(struct cudampi_stats *);
static stats_fn get_stats;
#define UNSET 0xA5A5A5A5A5A5A5A5ull

static MPI_Comm comm;
static int iters = 25000;

static size_t size_of(int i)
{
    static const size_t small[8] = {1, 8, 3, 64, 100, 256, 1000, 4096};
    if (i % 5000 == 4999) return BIG;
    if (i % 500 == 250) return 65536 + 3;
    return small[(i * 7 + i / 8) % 8];
}
static int sampled(int i) { return i % 97 == 0 || size_of(i) > 4096 || i == iters - 1; }
static int tag_of(int i) { return i % 30000; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Read the stats; returns 0 when the shim is not loaded. */
static int stats(struct cudampi_stats *s)
{
    memset(s, 0xA5, sizeof *s);
    if (!get_stats) return 0;
    CHECK(get_stats(s) == 0, "cudampi_get_stats failed");
    return 1;
}

static void check_idle(const char *when, int verbose)
{
    struct cudampi_stats s;
    if (!stats(&s)) return;
    if (!CHECK(s.staging_leased != UNSET && s.requests_tracked != UNSET,
               "%s: cudampi_get_stats did not fill staging_leased / requests_tracked", when))
        return;
    CHECK(s.staging_leased == 0, "%s: staging_leased = %llu with no request outstanding", when,
          (unsigned long long)s.staging_leased);
    CHECK(s.requests_tracked == 0, "%s: requests_tracked = %llu with no request outstanding",
          when, (unsigned long long)s.requests_tracked);
    CHECK(s.pool_bytes_held <= POOL_LIMIT, "%s: pool holds %llu bytes (more than 64 MiB)", when,
          (unsigned long long)s.pool_bytes_held);
    if (verbose) {
        note("%s: staging_leased=%llu requests_tracked=%llu pool_bytes_held=%llu "
             "pool_high_water=%llu device_calls=%llu bytes_to_host=%llu bytes_to_device=%llu "
             "pageable_fallbacks=%llu errors=%llu",
             when, (unsigned long long)s.staging_leased, (unsigned long long)s.requests_tracked,
             (unsigned long long)s.pool_bytes_held, (unsigned long long)s.pool_high_water,
             (unsigned long long)s.device_calls, (unsigned long long)s.bytes_to_host,
             (unsigned long long)s.bytes_to_device, (unsigned long long)s.pageable_fallbacks,
             (unsigned long long)s.errors);
        if (t_rank == 0) {
            printf("staging_leased=%llu requests_tracked=%llu\n",
                   (unsigned long long)s.staging_leased, (unsigned long long)s.requests_tracked);
            fflush(stdout);
        }
    }
}

static void complete_window(int win, MPI_Request *rq, int n, MPI_Status *st)
{
    int flag = 0, idx = -1, out = 0, done = 0, ids[2 * WIN];
    MPI_Status one[2 * WIN];
    if (win % 61 == 60) { /* rarely: MPICH 4.0's Testall loop takes ms per window */
        do
            MPI_CHECK(MPI_Testall(n, rq, &flag, st));
        while (!flag);
    } else if (win % 11 == 10) {
        while (done < n) {
            for (int j = 0; j < n; j++) status_init(&one[j]);
            MPI_CHECK(MPI_Waitsome(n, rq, &out, ids, one));
            if (!CHECK(out != MPI_UNDEFINED && out > 0, "window %d: Waitsome outcount %d", win, out))
                break;
            for (int j = 0; j < out; j++) st[ids[j]] = one[j];
            done += out;
        }
    } else if (win % 13 == 12) {
        while (done < n) {
            status_init(&one[0]);
            MPI_CHECK(MPI_Waitany(n, rq, &idx, &one[0]));
            if (!CHECK(idx != MPI_UNDEFINED && idx >= 0 && idx < n, "window %d: Waitany index %d",
                       win, idx))
                break;
            st[idx] = one[0];
            done++;
        }
    } else {
        MPI_CHECK(MPI_Waitall(n, rq, st));
    }
    for (int j = 0; j < n; j++)
        CHECK(rq[j] == MPI_REQUEST_NULL, "window %d: request %d still active", win, j);
}

/* One pass; records the sampled received buffers in tr. */
static void pass(int kind, struct trace *tr)
{
    int peer = 1 - t_rank;
    void *sb[WIN], *rb[WIN];
    for (int j = 0; j < WIN; j++) {
        sb[j] = mem_alloc(kind, BIG + SLACK);
        rb[j] = mem_alloc(kind, BIG + SLACK);
        mem_pattern(sb[j], BIG, t_rank, -1 - j); /* unsampled sends carry this */
    }
    unsigned char *e = (unsigned char *)xmalloc(BIG + SLACK);
    int nchecked = 0;
    double t0 = now();
    for (int base = 0, win = 0; base < iters; base += WIN, win++) {
        MPI_Request rq[2 * WIN];
        MPI_Status st[2 * WIN];
        int n = 0, its[WIN];
        for (int j = 0; j < WIN && base + j < iters; j++) {
            int i = base + j;
            size_t sz = size_of(i);
            its[j] = i;
            if (sampled(i)) {
                mem_pattern(sb[j], sz, t_rank, i);
                mem_poison(rb[j], sz + SLACK);
            }
            MPI_CHECK(MPI_Irecv(rb[j], (int)sz, MPI_BYTE, peer, tag_of(i), comm, &rq[n]));
            status_init(&st[n]);
            n++;
            MPI_CHECK(MPI_Isend(sb[j], (int)sz, MPI_BYTE, peer, tag_of(i), comm, &rq[n]));
            status_init(&st[n]);
            n++;
        }
        complete_window(win, rq, n, st);
        for (int j = 0; j < n / 2; j++) {
            int i = its[j];
            if (!sampled(i)) continue;
            size_t sz = size_of(i);
            char lab[96];
            snprintf(lab, sizeof lab, "iteration %d (%zu bytes)", i, sz);
            unsigned char *g = mem_fetch(rb[j], sz + SLACK);
            pattern_fill(e, sz, peer, i);
            poison_fill(e + sz, SLACK);
            check_bytes(g, e, sz + SLACK, "%s %s receive", lab, mem_kind_name(kind));
            check_status(&st[2 * j], MPI_BYTE, peer, tag_of(i), (int)sz, "%s", lab);
            trace_add(tr, lab, g, sz + SLACK, &st[2 * j], MPI_BYTE, MPI_SUCCESS);
            free(g);
            /* put the default data back into the send buffer */
            mem_pattern(sb[j], sz, t_rank, -1 - j);
            nchecked++;
        }
        if (win % 64 == 63) {
            char when[64];
            snprintf(when, sizeof when, "%s pass, after window %d", mem_kind_name(kind), win);
            check_idle(when, 0);
        }
    }
    double dt = now() - t0;
    if (t_rank == 0)
        note("%s pass: %d iterations, %d nonblocking operations on this rank, %.2f s (%.1f us per "
             "operation), %d receives checked",
             mem_kind_name(kind), iters, 2 * iters, dt, dt * 1e6 / (2.0 * iters), nchecked);
    free(e);
    for (int j = 0; j < WIN; j++) {
        mem_free(sb[j]);
        mem_free(rb[j]);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (t_size < 2) DIE("needs 2 ranks");
    iters = atoi(t_env("CUDAMPI_SOAK_ITERS", "25000"));
    if (iters < 1) iters = 1;
    get_stats = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    if (t_rank == 0 && !get_stats) note("cudampi not loaded: no counters to check");
    if (t_rank < 2) {
        struct trace ref = {0}, got = {0};
        pass(MEM_HOST, &ref);
        check_idle("after the host pass", 0);
        pass(MEM_DEVICE, &got);
        trace_compare(&ref, &got, "device pass vs host pass");
        trace_free(&ref);
        trace_free(&got);
        check_idle("at the end", 1);
        if (t_rank == 0 && !get_stats) {
            printf("stats: cudampi not loaded\n");
            fflush(stdout);
        }
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
