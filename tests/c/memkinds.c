// cudampi-test: ranks=2 without-shim=crash env=FAKECUDA_DEVICES=2
/* Every kind of CUDA memory as send and as receive buffer, against every other kind:
 *   host (malloc), cudaMalloc, cudaMallocManaged, cudaMallocHost (pinned), malloc +
 *   cudaHostRegister, cudaMallocAsync (stream-ordered pool), driver-API VMM (cuMemCreate +
 *   cuMemAddressReserve + cuMemMap + cuMemSetAccess, size rounded to the granularity), and
 *   cudaMalloc on ANOTHER device than the current one (skipped with a note when there is only
 *   one device; the fixture makes two with FAKECUDA_DEVICES=2).
 * Plus: a send and a receive done from a freshly created pthread that never touched CUDA (no
 * current context) on device buffers allocated by the main thread.
 * Every transfer is checked against the pattern and against the same transfer host->host. */
#include "common.h"
#include <pthread.h>

#define K_OTHERDEV MEM_NKINDS /* cudaMalloc on another device */
#define NK (MEM_NKINDS + 1)
#define SLACK 16

static MPI_Comm comm;
static int other_dev = -1; /* device used for K_OTHERDEV, -1 if none */

static const char *kname(int k) { return k == K_OTHERDEV ? "device-other" : mem_kind_name(k); }

static void *alloc_kind(int k, size_t n)
{
    if (k != K_OTHERDEV) return mem_try_alloc(k, n);
    if (host_mode()) return mem_try_alloc(MEM_HOST, n);
    int cur = 0;
    CUDA_CHECK(cudaGetDevice(&cur));
    CUDA_CHECK(cudaSetDevice(other_dev));
    void *p = mem_try_alloc(MEM_DEVICE, n);
    CUDA_CHECK(cudaSetDevice(cur)); /* the buffer is used while `cur` is current */
    return p;
}

/* availability of each kind on this rank (agreed over all ranks) */
static int avail[NK];

static void probe_kinds(void)
{
    int ndev = test_device_count();
    if (!host_mode()) {
        int cur = 0;
        CUDA_CHECK(cudaGetDevice(&cur));
        if (ndev >= 2) other_dev = (cur + 1) % ndev;
    }
    for (int k = 0; k < NK; k++) {
        int ok = 1;
        if (k == K_OTHERDEV && !host_mode() && other_dev < 0) {
            ok = 0;
            if (t_rank == 0) note("only %d device(s): skipping buffers on another device", ndev);
        } else {
            void *p = alloc_kind(k, 4096);
            ok = p != NULL;
            mem_free(p);
        }
        int all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
        avail[k] = all;
        if (!all && t_rank == 0) note("memory kind %s not available: skipped", kname(k));
    }
    /* the kinds the brief requires must exist (VMM and another device may be missing) */
    for (int k = MEM_DEVICE; k <= MEM_VMM; k++)
        CHECK(avail[k], "memory kind %s could not be allocated", kname(k));
}

/* One transfer 0->1 (dir 0) or 1->0 (dir 1) with kinds sk -> rk; records on the receiver. */
static void xfer(int dir, int sk, int rk, size_t n, int seed, unsigned char **out)
{
    int src = dir, dst = 1 - dir;
    if (t_rank == src) {
        void *s = alloc_kind(sk, n);
        mem_pattern(s, n, src, seed);
        MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, dst, seed % 30000, comm));
        unsigned char *h = mem_fetch(s, n), *e = pattern_new(n, src, seed);
        check_bytes(h, e, n, "%s send buffer modified", kname(sk));
        free(h);
        free(e);
        mem_free(s);
    } else if (t_rank == dst) {
        void *r = alloc_kind(rk, n + SLACK);
        mem_poison(r, n + SLACK);
        MPI_Status st;
        status_init(&st);
        MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, src, seed % 30000, comm, &st));
        check_status(&st, MPI_BYTE, src, seed % 30000, (int)n, "%s->%s %zu bytes", kname(sk),
                     kname(rk), n);
        *out = mem_fetch(r, n + SLACK);
        mem_free(r);
    }
}

/* ---- sends and receives from a thread without CUDA context ---- */
struct targ {
    void *buf;
    int count, peer, tag, recv;
    int rc;
    int had_ctx; /* -1 unknown */
};

static void *thread_main(void *vp)
{
    struct targ *a = (struct targ *)vp;
    a->had_ctx = -1;
#ifndef COMMON_NO_CUDA
    if (!host_mode()) {
        CUcontext c = NULL;
        if (cuCtxGetCurrent(&c) == CUDA_SUCCESS) a->had_ctx = c != NULL;
    }
#endif
    if (a->recv)
        a->rc = MPI_Recv(a->buf, a->count, MPI_BYTE, a->peer, a->tag, comm, MPI_STATUS_IGNORE);
    else
        a->rc = MPI_Send(a->buf, a->count, MPI_BYTE, a->peer, a->tag, comm);
    return NULL;
}

static void thread_xfer(int kind, size_t n, int seed)
{
    for (int dir = 0; dir < 2; dir++) {
        int src = dir, dst = 1 - dir;
        if (t_rank != src && t_rank != dst) continue;
        void *b = mem_alloc(kind, n + SLACK);
        if (t_rank == src)
            mem_pattern(b, n, src, seed + dir);
        else
            mem_poison(b, n + SLACK);
        struct targ a = {b, (int)n, t_rank == src ? dst : src, 900 + dir, t_rank == dst, -1, -1};
        pthread_t th;
        if (pthread_create(&th, NULL, thread_main, &a) != 0) DIE("pthread_create failed");
        pthread_join(th, NULL);
        CHECK(a.rc == MPI_SUCCESS, "%s from a new thread returned %d", a.recv ? "MPI_Recv" : "MPI_Send",
              a.rc);
        if (a.had_ctx == 1)
            note("the new thread had a current CUDA context already (test assumption not met)");
        if (t_rank == dst) {
            unsigned char *h = mem_fetch(b, n + SLACK), *e = (unsigned char *)xmalloc(n + SLACK);
            pattern_fill(e, n, src, seed + dir);
            poison_fill(e + n, SLACK);
            check_bytes(h, e, n + SLACK, "%s %zu bytes %d->%d sent/received on context-less threads",
                        mem_kind_name(kind), n, src, dst);
            free(h);
            free(e);
        }
        mem_free(b);
    }
}

int main(int argc, char **argv)
{
    int provided = test_init_thread(&argc, &argv, MPI_THREAD_SERIALIZED);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    probe_kinds();

    const size_t sizes[] = {1, 4097, 1024 * 1024 + 7};
    int seed = 0;
    if (t_rank < 2) {
        for (int si = 0; si < 3; si++) {
            size_t n = sizes[si];
            for (int dir = 0; dir < 2; dir++) {
                unsigned char *ref = NULL;
                int rseed = ++seed;
                xfer(dir, MEM_HOST, MEM_HOST, n, rseed, &ref);
                unsigned char *exp = NULL;
                if (t_rank == 1 - dir) {
                    exp = (unsigned char *)xmalloc(n + SLACK);
                    pattern_fill(exp, n, dir, rseed);
                    poison_fill(exp + n, SLACK);
                    check_bytes(ref, exp, n + SLACK, "host->host %zu bytes", n);
                }
                for (int sk = 0; sk < NK; sk++)
                    for (int rk = 0; rk < NK; rk++) {
                        if (!avail[sk] || !avail[rk] || (sk == MEM_HOST && rk == MEM_HOST)) continue;
                        unsigned char *got = NULL;
                        xfer(dir, sk, rk, n, rseed, &got);
                        if (got) {
                            check_bytes(got, exp, n + SLACK, "%s->%s %zu bytes %d->%d vs pattern",
                                        kname(sk), kname(rk), n, dir, 1 - dir);
                            check_bytes(got, ref, n + SLACK, "%s->%s %zu bytes %d->%d vs host run",
                                        kname(sk), kname(rk), n, dir, 1 - dir);
                            free(got);
                        }
                    }
                free(ref);
                free(exp);
            }
        }
    }

    if (provided < MPI_THREAD_SERIALIZED) {
        if (t_rank == 0)
            note("MPI provides thread level %d < MPI_THREAD_SERIALIZED: skipping the "
                 "context-less thread part", provided);
    } else if (t_rank < 2) {
        thread_xfer(MEM_DEVICE, 4099, 700);
        thread_xfer(MEM_DEVICE, 2 * 1024 * 1024 + 1, 710);
        if (avail[MEM_POOL]) thread_xfer(MEM_POOL, 5000, 720);
        if (avail[MEM_VMM]) thread_xfer(MEM_VMM, 5000, 730);
        if (avail[MEM_MANAGED]) thread_xfer(MEM_MANAGED, 5000, 740);
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
