// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=0,CUDAMPI_ORDERED_RECV_BYTES=0
/* Small copies to the device are written by the GPU's stream memory writes (at most two 64- or
 * 32-bit writes: whole 4-byte words at 4-byte aligned addresses; 32 when the ranks share the
 * node's one GPU, as in small_writes_shared), a lone byte or 2 bytes at an even address by a
 * memset, everything else by a copy.
 * Each case below lands in a device buffer whose surroundings are poisoned, and is compared
 * with the same operation on host buffers or with the bytes sent:
 *   - MPI_Recv of 1 to 1024 bytes (MPI_BYTE) at offsets 0, 1, 2, 4 and 8 from an aligned
 *     address: the message lands, the bytes before and after it keep the poison;
 *   - a receive posted for more than arrives: only what arrived is written;
 *   - derived datatypes with gaps (vectors of 2 and 5 single ints, one of 3-short blocks, one
 *     of 1056-byte blocks): the gaps keep their device values, as on a host buffer;
 *   - MPI_Allreduce (MPI_INT, MPI_SUM) of 1 to 65 elements and MPI_Alltoall of 8 bytes per
 *     pair, device send and receive, against the host result;
 *   - windows of MPI_Irecv completed by one MPI_Waitall: the stream writes a call's receives
 *     only when it can write every one of them, in 512 bytes at most, else all are copied;
 *     single bytes are set by memsets in any window;
 *   - managed memory staged on request (CUDAMPI_MANAGED=stage, set here before MPI_Init):
 *     the stream's memory writes do not take it, so it is copied.
 * cudampi_get_stats' bytes_stream_written must grow by exactly the bytes of the eligible
 * device receives (none of the managed ones), so the test fails when the writes are not used
 * or used where they must not be. */
#include "common.h"
#include "../../include/cudampi.h"

#define GUARD 64
#define AREA (GUARD + 1024 + 8 + GUARD)
static int off(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}

/* At most two writes, or 32 where the ranks share one GPU and know it: every rank runs on
 * this node here with the same environment, so one GPU (the node's, or the one
 * CUDA_VISIBLE_DEVICES names) means it is shared, which the fast paths' handshake tells
 * cudampi unless both are off. */
static int max_writes(void)
{
    static int n;
    if (!n) {
        int devices = 0;
        cudaGetDeviceCount(&devices);
        int knows = !(off("CUDAMPI_IPC") && off("CUDAMPI_PIPELINE"));
        const char *visible = getenv("CUDA_VISIBLE_DEVICES");
        n = devices == 1 && (!visible || !strchr(visible, ',')) && knows ? 32 : 2;
    }
    return n;
}
#define MAX_WRITES max_writes()

typedef int (*stats_fn)(struct cudampi_stats *);
static stats_fn get_stats;

static unsigned long long written(void)
{
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    return get_stats && get_stats(&s) == 0 ? s.bytes_stream_written : 0;
}

/* The stream writes (8 bytes where aligned, else 4) that `len` bytes at `addr` take; a
 * number above MAX_WRITES when they cannot be written that way. */
static int writes_for(uintptr_t addr, size_t len)
{
    if (len % 4 || addr % 4)
        return MAX_WRITES + 1;
    int n = 0;
    for (uintptr_t a = addr, end = addr + len; a < end; n++)
        a += a % 8 == 0 && end - a >= 8 ? 8 : 4;
    return n;
}

/* A receive of one byte, or of two at an even address, set by one memset. */
static int set_by_memset(uintptr_t addr, size_t len)
{
    return len == 1 || (len == 2 && addr % 2 == 0);
}

/* Whether a receive of one run is written by the stream rather than copied. */
static int eligible(uintptr_t addr, size_t len)
{
    return writes_for(addr, len) <= MAX_WRITES || set_by_memset(addr, len);
}

/* Rank 0 sends `len` pattern bytes; rank 1 receives them (posted for `posted` bytes) at
 * offset GUARD + off of a poisoned area of memory `kind`. Returns the bytes rank 1 expects
 * the stream to have written. */
static unsigned long long recv_case(int kind, size_t len, size_t posted, size_t off, int seed)
{
    if (t_rank == 0) {
        unsigned char *p = pattern_new(len, 0, seed);
        MPI_CHECK(MPI_Send(p, (int)len, MPI_BYTE, 1, seed, MPI_COMM_WORLD));
        free(p);
        return 0;
    }
    if (t_rank != 1)
        return 0;
    unsigned char *area = mem_alloc(kind, AREA);
    mem_poison(area, AREA);
    MPI_Status st;
    MPI_CHECK(MPI_Recv(area + GUARD + off, (int)posted, MPI_BYTE, 0, seed, MPI_COMM_WORLD, &st));
    CHECK(status_count(&st, MPI_BYTE) == (int)len, "%s receive of %zu bytes: count %d", mem_kind_name(kind), len,
          status_count(&st, MPI_BYTE));
    unsigned char *want = xmalloc(AREA), *p = pattern_new(len, 0, seed);
    poison_fill(want, AREA);
    memcpy(want + GUARD + off, p, len);
    unsigned char *have = mem_fetch(area, AREA);
    check_bytes(have, want, AREA, "%s receive of %zu bytes (posted %zu) at offset %zu", mem_kind_name(kind), len,
                posted, off);
    free(want);
    free(p);
    free(have);
    mem_free(area);
    return kind == MEM_DEVICE && eligible((uintptr_t)(area + GUARD + off), len) ? len : 0;
}

/* A vector datatype received into device memory whose gaps hold other bytes, against the
 * same receive into host memory. Returns the bytes the stream should have written. */
static unsigned long long vector_case(int count, int blocklen, int stride, MPI_Datatype old, int seed)
{
    MPI_Datatype t;
    MPI_CHECK(MPI_Type_vector(count, blocklen, stride, old, &t));
    MPI_CHECK(MPI_Type_commit(&t));
    MPI_Aint lb, extent;
    MPI_CHECK(MPI_Type_get_true_extent(t, &lb, &extent));
    int size = 0;
    MPI_CHECK(MPI_Type_size(t, &size));
    unsigned long long expect = 0;
    if (t_rank == 0) {
        unsigned char *p = pattern_new((size_t)extent, 0, seed);
        MPI_CHECK(MPI_Send(p, 1, t, 1, seed, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Send(p, 1, t, 1, seed, MPI_COMM_WORLD));
        free(p);
    } else if (t_rank == 1) {
        unsigned char *host = xmalloc(AREA + (size_t)extent), *dev = mem_alloc(MEM_DEVICE, AREA + (size_t)extent);
        gap_fill(host, AREA + (size_t)extent, seed);
        mem_gap(dev, AREA + (size_t)extent, seed);
        MPI_CHECK(MPI_Recv(host + GUARD, 1, t, 0, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Recv(dev + GUARD, 1, t, 0, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        unsigned char *have = mem_fetch(dev, AREA + (size_t)extent);
        check_bytes(have, host, AREA + (size_t)extent, "vector(%d, %d, %d) of %s into device memory", count, blocklen,
                    stride, type_name(old));
        size_t run = (size_t)blocklen * type_size(old), pitch = (size_t)stride * type_size(old);
        int writes = 0;
        for (int b = 0; b < count; b++)
            writes += writes_for((uintptr_t)(dev + GUARD) + (size_t)b * pitch, run);
        if (writes <= MAX_WRITES)
            expect = (unsigned long long)size;
        free(have);
        free(host);
        mem_free(dev);
    }
    MPI_Type_free(&t);
    return expect;
}

/* Rank 1 posts `k` receives of `len` bytes into slots of a poisoned device area and completes
 * them with one MPI_Waitall (statuses ignored); rank 0 sends them. Returns the bytes the stream
 * should have written: all of them where every receive is set by a memset, or where every one
 * can be written and they come to at most 512 bytes, else none. */
static unsigned long long window_case(int k, size_t len, int seed)
{
    size_t slot = (len + 8 + 7) / 8 * 8, bytes = GUARD + (size_t)k * slot;
    if (t_rank == 0) {
        for (int i = 0; i < k; i++) {
            unsigned char *p = pattern_new(len, i, seed);
            MPI_CHECK(MPI_Send(p, (int)len, MPI_BYTE, 1, seed, MPI_COMM_WORLD));
            free(p);
        }
        return 0;
    }
    if (t_rank != 1)
        return 0;
    unsigned char *area = mem_alloc(MEM_DEVICE, bytes), *want = xmalloc(bytes);
    mem_poison(area, bytes);
    poison_fill(want, bytes);
    MPI_Request *r = xmalloc(sizeof *r * (size_t)k);
    int all = 1, set = 1;
    for (int i = 0; i < k; i++) {
        unsigned char *at = area + GUARD + (size_t)i * slot, *p = pattern_new(len, i, seed);
        MPI_CHECK(MPI_Irecv(at, (int)len, MPI_BYTE, 0, seed, MPI_COMM_WORLD, &r[i]));
        memcpy(want + GUARD + (size_t)i * slot, p, len);
        all &= eligible((uintptr_t)at, len);
        set &= set_by_memset((uintptr_t)at, len);
        free(p);
    }
    MPI_CHECK(MPI_Waitall(k, r, MPI_STATUSES_IGNORE));
    unsigned char *have = mem_fetch(area, bytes);
    check_bytes(have, want, bytes, "MPI_Waitall over %d receives of %zu bytes into device memory", k, len);
    free(have);
    free(want);
    free(r);
    mem_free(area);
    return set || (all && (size_t)k * len <= 512) ? (unsigned long long)k * len : 0;
}

/* Frees a collective's device buffers; returns the bytes the stream should have written into
 * `dout`. */
static unsigned long long release(void *din, void *dout, size_t bytes)
{
    unsigned long long expect = eligible((uintptr_t)dout, bytes) ? bytes : 0;
    mem_free(din);
    mem_free(dout);
    return expect;
}

/* MPI_Allreduce of n ints, device buffers against host buffers. */
static unsigned long long allreduce_case(int n, int seed)
{
    size_t bytes = (size_t)n * sizeof(int);
    int *in = xmalloc(bytes), *ref = xmalloc(bytes);
    unsigned char *p = pattern_new(bytes, t_rank, seed);
    for (int i = 0; i < n; i++)
        in[i] = (int)(p[i * 4] | p[i * 4 + 1] << 8 | p[i * 4 + 2] << 16);
    free(p);
    poison_fill(ref, bytes);
    MPI_CHECK(MPI_Allreduce(in, ref, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    unsigned char *din = mem_alloc(MEM_DEVICE, bytes), *dout = mem_alloc(MEM_DEVICE, bytes + GUARD);
    mem_put(din, in, bytes);
    mem_poison(dout, bytes + GUARD);
    MPI_CHECK(MPI_Allreduce(din, dout, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    unsigned char *have = mem_fetch(dout, bytes + GUARD), *want = xmalloc(bytes + GUARD);
    poison_fill(want, bytes + GUARD);
    memcpy(want, ref, bytes);
    check_bytes(have, want, bytes + GUARD, "MPI_Allreduce of %d ints on device buffers against host buffers", n);
    unsigned char *sent = mem_fetch(din, bytes);
    check_bytes(sent, in, bytes, "MPI_Allreduce's device send buffer afterwards");
    free(sent);
    free(have);
    free(want);
    free(in);
    free(ref);
    return release(din, dout, bytes);
}

/* MPI_Alltoall of 8 bytes per pair, device buffers against host buffers. */
static unsigned long long alltoall_case(int seed)
{
    size_t bytes = 8 * (size_t)t_size;
    unsigned char *in = pattern_new(bytes, t_rank, seed), *ref = xmalloc(bytes);
    poison_fill(ref, bytes);
    MPI_CHECK(MPI_Alltoall(in, 8, MPI_BYTE, ref, 8, MPI_BYTE, MPI_COMM_WORLD));
    unsigned char *din = mem_alloc(MEM_DEVICE, bytes), *dout = mem_alloc(MEM_DEVICE, bytes);
    mem_put(din, in, bytes);
    mem_poison(dout, bytes);
    MPI_CHECK(MPI_Alltoall(din, 8, MPI_BYTE, dout, 8, MPI_BYTE, MPI_COMM_WORLD));
    unsigned char *have = mem_fetch(dout, bytes);
    check_bytes(have, ref, bytes, "MPI_Alltoall of 8 bytes per pair on device buffers against host buffers");
    free(have);
    free(in);
    free(ref);
    return release(din, dout, bytes);
}

int main(int argc, char **argv)
{
    setenv("CUDAMPI_MANAGED", "stage", 1);
    test_init(&argc, &argv);
    get_stats = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    static const size_t lens[] = {1, 2, 3, 4, 8, 12, 16, 60, 64, 100, 252, 256, 260, 1024};
    static const size_t offs[] = {0, 1, 2, 4, 8};
    int seed = 1;
    unsigned long long before = written(), expect = 0;

    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
            expect += recv_case(MEM_DEVICE, lens[l], lens[l], offs[o], seed++);
    /* Posted for more than arrives: only the arrived bytes are written. */
    expect += recv_case(MEM_DEVICE, 8, 64, 0, seed++);
    expect += recv_case(MEM_DEVICE, 100, 1024, 4, seed++);

    expect += vector_case(2, 1, 3, MPI_INT, seed++);     /* two 4-byte runs: stream writes */
    expect += vector_case(5, 1, 3, MPI_INT, seed++);     /* five: copied */
    expect += vector_case(4, 3, 5, MPI_SHORT, seed++);   /* 6-byte runs: copied */
    expect += vector_case(3, 1056, 1100, MPI_BYTE, seed++);

    static const int counts[] = {1, 2, 3, 4, 5, 16, 65};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        expect += allreduce_case(counts[i], seed++);
    expect += alltoall_case(seed++);

    expect += window_case(2, 16, seed++);
    expect += window_case(64, 8, seed++);
    expect += window_case(65, 8, seed++);
    expect += window_case(2, 256, seed++);
    expect += window_case(3, 256, seed++);
    expect += window_case(3, 1, seed++);
    expect += window_case(600, 1, seed++); /* more than 512 bytes: set all the same */

    unsigned long long got = written() - before;
    if (shim_loaded() && !host_mode())
        CHECK(got == expect, "bytes_stream_written grew by %llu, expected %llu (the eligible device receives)", got,
              expect);

    /* Managed memory, staged on request: copied, never written by the stream. */
    before = written();
    static const size_t mlens[] = {1, 2, 4, 8, 64, 256};
    for (size_t l = 0; l < sizeof mlens / sizeof mlens[0]; l++)
        recv_case(MEM_MANAGED, mlens[l], mlens[l], 0, seed++);
    got = written() - before;
    if (shim_loaded() && !host_mode())
        CHECK(got == 0, "bytes_stream_written grew by %llu over staged managed receives", got);
    return report_and_finalize();
}
