// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_STATS=1 env=CUDAMPI_POOL_BYTES=8M env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=0
/* cudampi's own API (include/cudampi.h) reports what the shim did: after rank 0 sends a device
 * buffer of N bytes to rank 1's device buffer, rank 0 counts one device-buffer call and N bytes
 * staged device->host, rank 1 one call and N bytes host->device; both pools hold pinned memory
 * (the message fits CUDAMPI_POOL_BYTES) and their high-water mark covers N. A host-buffer
 * exchange then adds host calls (counted because CUDAMPI_STATS=1) and no device bytes; a
 * message larger than the pool bound counts a pageable fallback. cudampi_cuda_active() is 1.
 * cudampi_get_stats_sized, which cudampi.h's cudampi_get_stats(out) calls, writes no byte past
 * the size it is given, as for a program built against a shorter, older struct.
 * The functions are looked up with dlsym: the shim is preloaded, not linked. Staging is what it
 * counts, so the fast paths are off (ipc_p2p and chunks_p2p check their counters). */
#include "common.h"
#include "../../include/cudampi.h"

typedef int (*stats_fn)(struct cudampi_stats *);
typedef int (*active_fn)(void);
typedef int (*sized_fn)(struct cudampi_stats *, size_t);

/* An older struct: the fields up to requests_tracked. The sized call fills exactly them, the
 * same values as the full struct, and leaves the bytes after them alone. */
static void sized(sized_fn get_sized, stats_fn get)
{
    struct cudampi_stats full, part;
    const size_t old = offsetof(struct cudampi_stats, requests_tracked) + sizeof full.requests_tracked;
    memset(&part, 0x5C, sizeof part);
    int rc = get_sized(&part, old);
    CHECK(get(&full) == 0, "cudampi_get_stats failed");
    CHECK(rc == (int)old, "cudampi_get_stats_sized(.., %zu) returned %d", old, rc);
    CHECK(part.device_calls == full.device_calls && part.requests_tracked == full.requests_tracked,
          "sized counters differ from the full struct's");
    check_all((unsigned char *)&part + old, 0x5C, sizeof part - old, "bytes past the size given to cudampi_get_stats_sized");
    rc = get_sized(&part, sizeof part + 64);
    CHECK(rc == (int)sizeof part, "cudampi_get_stats_sized with room to spare returned %d, struct is %zu bytes", rc, sizeof part);
    CHECK(get_sized(NULL, sizeof part) == -1, "cudampi_get_stats_sized(NULL, ..) should return -1");
}

static struct cudampi_stats snapshot(stats_fn get)
{
    struct cudampi_stats s;
    memset(&s, 0xA5, sizeof s);
    CHECK(get(&s) == 0, "cudampi_get_stats failed");
    return s;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
    active_fn active = (active_fn)dlsym(RTLD_DEFAULT, "cudampi_cuda_active");
    if (!CHECK(get && active, "cudampi_get_stats / cudampi_cuda_active not exported"))
        return report_and_finalize();
    CHECK(get(NULL) == -1, "cudampi_get_stats(NULL) should return -1");
    sized_fn get_sized = (sized_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats_sized");
    if (CHECK(get_sized != NULL, "cudampi_get_stats_sized not exported"))
        sized(get_sized, get);

    const size_t n = 100000;
    void *d = mem_alloc(MEM_DEVICE, n);
    mem_pattern(d, n, t_rank, 1);
    CHECK(active() == 1, "cudampi_cuda_active() = %d with device memory in use", active());

    struct cudampi_stats a = snapshot(get);
    if (t_rank == 0)
        MPI_CHECK(MPI_Send(d, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
    else
        MPI_CHECK(MPI_Recv(d, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    struct cudampi_stats b = snapshot(get);
    CHECK(b.device_calls == a.device_calls + 1, "device calls %llu -> %llu", (unsigned long long)a.device_calls,
          (unsigned long long)b.device_calls);
    if (t_rank == 0)
        CHECK(b.bytes_to_host == a.bytes_to_host + n && b.bytes_to_device == a.bytes_to_device,
              "sender staged %llu bytes to host, %llu to device", (unsigned long long)(b.bytes_to_host - a.bytes_to_host),
              (unsigned long long)(b.bytes_to_device - a.bytes_to_device));
    else
        CHECK(b.bytes_to_device == a.bytes_to_device + n && b.bytes_to_host == a.bytes_to_host,
              "receiver staged %llu bytes to device, %llu to host", (unsigned long long)(b.bytes_to_device - a.bytes_to_device),
              (unsigned long long)(b.bytes_to_host - a.bytes_to_host));
    CHECK(b.pool_high_water >= n && b.pool_bytes_held >= n && b.pool_bytes_held <= (8u << 20),
          "pool high water %llu, held %llu", (unsigned long long)b.pool_high_water, (unsigned long long)b.pool_bytes_held);
    CHECK(b.pageable_fallbacks == a.pageable_fallbacks, "a fitting message fell back to pageable memory");
    if (t_rank == 1) {
        unsigned char *got = malloc(n), *exp = malloc(n);
        mem_get(got, d, n);
        for (size_t i = 0; i < n; i++) exp[i] = pattern_byte(0, 1, i);
        check_bytes(got, exp, n, "device receive");
        free(got);
        free(exp);
    }

    /* host buffers: counted as host calls, no bytes staged */
    char h[64];
    memset(h, t_rank + 1, sizeof h);
    if (t_rank == 0)
        MPI_CHECK(MPI_Send(h, 64, MPI_BYTE, 1, 6, MPI_COMM_WORLD));
    else
        MPI_CHECK(MPI_Recv(h, 64, MPI_BYTE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    struct cudampi_stats c = snapshot(get);
    CHECK(c.host_calls == b.host_calls + 1, "host calls %llu -> %llu", (unsigned long long)b.host_calls,
          (unsigned long long)c.host_calls);
    CHECK(c.bytes_to_host == b.bytes_to_host && c.bytes_to_device == b.bytes_to_device && c.device_calls == b.device_calls,
          "a host-buffer exchange changed the device counters");

    /* larger than the 8 MiB pool bound: staged through pageable memory */
    const size_t big = 12u << 20;
    void *dbig = mem_alloc(MEM_DEVICE, big);
    mem_pattern(dbig, big, t_rank, 2);
    if (t_rank == 0)
        MPI_CHECK(MPI_Send(dbig, (int)big, MPI_BYTE, 1, 7, MPI_COMM_WORLD));
    else
        MPI_CHECK(MPI_Recv(dbig, (int)big, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    struct cudampi_stats e = snapshot(get);
    CHECK(e.pageable_fallbacks == c.pageable_fallbacks + 1, "pageable fallbacks %llu -> %llu",
          (unsigned long long)c.pageable_fallbacks, (unsigned long long)e.pageable_fallbacks);
    CHECK(e.pool_bytes_held <= (8u << 20), "pool holds %llu bytes over its 8 MiB bound", (unsigned long long)e.pool_bytes_held);
    mem_free(dbig);
    mem_free(d);
    return report_and_finalize();
}
