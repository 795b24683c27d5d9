// cudampi-test: ranks=2,3 without-shim=crash env=FAKECUDA_DEVICES=3,CUDAMPI_TEST_GPU_PER_RANK=1,CUDAMPI_IPC_PUSH=1 timeout=120 nodes=no
/* Device messages smaller than an envelope (1056 bytes) between ranks with GPUs of their own,
 * with CUDAMPI_IPC_PUSH=1:
 * a sender whose receiver waits for the message in a blocking receive also writes it straight
 * into the receiver's buffer, and the receive needs no copy when the message MPI matched holds
 * those very bytes. Every receive buffer is poisoned and compared with the pattern sent.
 *   1. rank 1 waits in MPI_Recv, then rank 0 sends 1, 2, 3, 8, 100, 1024 and 1055 bytes (and
 *      ints): each is written into rank 1's buffer (cudampi_get_stats, on different GPUs);
 *   2. a ping-pong of 8 bytes, 300 rounds;
 *   3. the receive matches an earlier message, not the one written into its buffer: a host
 *      message with the same tag sent first (other bytes, and the same bytes), and a message
 *      with the same tag on another communicator sent first;
 *   4. MPI_ANY_SOURCE and MPI_ANY_TAG with every other rank sending to rank 0 at once;
 *   5. a message larger than the receive (MPI_ERR_TRUNCATE): nothing past the receive buffer
 *      is written;
 *   6. another message matched, after one was written into the buffer: a shorter one (the
 *      bytes past it are the buffer's own again) and a longer one (truncated: the whole buffer
 *      is its own again). */
#include "ipc_stats.h"
#include <unistd.h>

static int dev_differs;

static void expect(void *buf, size_t n, int from, int seed, const char *what)
{
    check_pattern(buf, n, from, seed, "%s (%zu bytes, seed %d)", what, n, seed);
}

/* Case 1: rank 1 waits before rank 0 sends; returns the bytes rank 0 sent. */
static size_t waited_sends(void)
{
    static const size_t sizes[] = {1, 2, 3, 8, 100, 1024, 1055};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int ints = 0; ints < 2; ints++) {
            size_t n = sizes[i];
            if (ints && n % 4)
                continue;
            MPI_Datatype dt = ints ? MPI_INT : MPI_BYTE;
            int count = (int)(ints ? n / 4 : n), seed = 10 + (int)i * 2 + ints;
            void *b = mem_alloc(MEM_DEVICE, n);
            if (t_rank == 0) {
                mem_pattern(b, n, 0, seed);
                usleep(20000);
                MPI_CHECK(MPI_Send(b, count, dt, 1, seed, MPI_COMM_WORLD));
                total += n;
            } else if (t_rank == 1) {
                MPI_Status st;
                mem_poison(b, n);
                MPI_CHECK(MPI_Recv(b, count, dt, 0, seed, MPI_COMM_WORLD, &st));
                check_status(&st, dt, 0, seed, count, "waited-for %zu bytes", n);
                expect(b, n, 0, seed, ints ? "waited-for ints" : "waited-for bytes");
            }
            mem_free(b);
        }
    }
    return total;
}

static void pingpong(size_t n, int rounds)
{
    void *s = mem_alloc(MEM_DEVICE, n), *r = mem_alloc(MEM_DEVICE, n);
    for (int k = 0; k < rounds && t_rank < 2; k++) {
        int seed = 1000 + k, peer = 1 - t_rank;
        if (t_rank == 0) {
            mem_pattern(s, n, 0, seed);
            MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
            mem_poison(r, n);
            MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (k % 50 == 0 || k == rounds - 1)
                expect(r, n, 1, seed, "ping-pong, the answer");
        } else {
            mem_poison(r, n);
            MPI_CHECK(MPI_Recv(r, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (k % 50 == 0 || k == rounds - 1)
                expect(r, n, 0, seed, "ping-pong, the question");
            mem_pattern(s, n, 1, seed);
            MPI_CHECK(MPI_Send(s, (int)n, MPI_BYTE, peer, seed, MPI_COMM_WORLD));
        }
    }
    mem_free(s);
    mem_free(r);
}

/* Case 3: rank 1 waits in a receive on `wait_on` while rank 0 first sends `first` (from host
 * memory, or from device memory on `first_on`) with the same tag, then the device message the
 * receive would take. `same`: both carry the same bytes. */
static void earlier_matched(MPI_Comm wait_on, MPI_Comm first_on, int first_kind, int same, const char *what)
{
    const size_t n = 64;
    int tag = 70, seed_first = 71, seed_then = same ? 71 : 72;
    void *first = mem_alloc(first_kind, n), *then = mem_alloc(MEM_DEVICE, n);
    void *x = mem_alloc(MEM_DEVICE, n), *y = mem_alloc(MEM_DEVICE, n);
    if (t_rank == 0) {
        mem_pattern(first, n, 0, seed_first);
        mem_pattern(then, n, 0, seed_then);
        usleep(20000);
        MPI_CHECK(MPI_Send(first, (int)n, MPI_BYTE, 1, tag, first_on));
        MPI_CHECK(MPI_Send(then, (int)n, MPI_BYTE, 1, tag, wait_on));
    } else if (t_rank == 1) {
        mem_poison(x, n);
        mem_poison(y, n);
        if (first_on == wait_on) {
            MPI_CHECK(MPI_Recv(x, (int)n, MPI_BYTE, 0, tag, wait_on, MPI_STATUS_IGNORE));
            MPI_CHECK(MPI_Recv(y, (int)n, MPI_BYTE, 0, tag, wait_on, MPI_STATUS_IGNORE));
            expect(x, n, 0, seed_first, what);
            expect(y, n, 0, seed_then, what);
        } else {
            MPI_CHECK(MPI_Recv(y, (int)n, MPI_BYTE, 0, tag, wait_on, MPI_STATUS_IGNORE));
            MPI_CHECK(MPI_Recv(x, (int)n, MPI_BYTE, 0, tag, first_on, MPI_STATUS_IGNORE));
            expect(y, n, 0, seed_then, what);
            expect(x, n, 0, seed_first, what);
        }
    }
    mem_free(first);
    mem_free(then);
    mem_free(x);
    mem_free(y);
}

/* Case 4: every other rank sends to rank 0, which waits with wildcards. */
static void all_to_one(void)
{
    const size_t n = 200;
    void *b = mem_alloc(MEM_DEVICE, n);
    for (int round = 0; round < 10; round++) {
        if (t_rank == 0) {
            int seen[64] = {0};
            for (int k = 1; k < t_size; k++) {
                MPI_Status st;
                mem_poison(b, n);
                MPI_CHECK(MPI_Recv(b, (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                int from = st.MPI_SOURCE;
                CHECK(from > 0 && from < t_size && from < 64, "a wildcard receive names rank %d", from);
                if (from <= 0 || from >= t_size || from >= 64)
                    continue;
                seen[from]++;
                check_status(&st, MPI_BYTE, from, 300 + round * 64 + from, (int)n, "all to one, round %d", round);
                expect(b, n, from, 300 + round * 64 + from, "all to one, wildcards");
            }
            for (int r = 1; r < t_size && r < 64; r++)
                CHECK(seen[r] == 1, "round %d: %d messages from rank %d", round, seen[r], r);
        } else {
            mem_pattern(b, n, t_rank, 300 + round * 64 + t_rank);
            usleep(5000);
            MPI_CHECK(MPI_Send(b, (int)n, MPI_BYTE, 0, 300 + round * 64 + t_rank, MPI_COMM_WORLD));
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
    mem_free(b);
}

/* Case 5: 8 bytes into a receive of 4; the 60 bytes after it stay poisoned. */
static void too_large(MPI_Comm comm)
{
    const size_t whole = 64;
    void *b = mem_alloc(MEM_DEVICE, whole);
    if (t_rank == 0) {
        mem_pattern(b, 8, 0, 90);
        usleep(20000);
        MPI_CHECK(MPI_Send(b, 8, MPI_BYTE, 1, 90, comm));
    } else if (t_rank == 1) {
        mem_poison(b, whole);
        int rc = MPI_Recv(b, 4, MPI_BYTE, 0, 90, comm, MPI_STATUS_IGNORE);
        CHECK(error_class(rc) == MPI_ERR_TRUNCATE, "8 bytes into a receive of 4 gave %s", error_name(error_class(rc)));
        unsigned char *have = mem_fetch(b, whole);
        check_all(have + 4, POISON_BYTE, whole - 4, "the bytes after a truncated receive");
        free(have);
    }
    mem_free(b);
}

/* Case 6: rank 1 waits on `comm` while rank 0 first sends 64 device bytes with the same tag on
 * MPI_COMM_WORLD (written into rank 1's buffer, whose receive they do not match), then `m` host
 * bytes on `comm`, which the receive takes: only their bytes of the buffer change (none where
 * they are more than 64, MPI_ERR_TRUNCATE). */
static void other_matched(MPI_Comm comm, size_t m)
{
    const size_t n = 64;
    int tag = 95;
    void *written = mem_alloc(MEM_DEVICE, n), *taken = mem_alloc(MEM_HOST, m);
    void *x = mem_alloc(MEM_DEVICE, n), *y = mem_alloc(MEM_DEVICE, n);
    if (t_rank == 0) {
        mem_pattern(written, n, 0, 96);
        mem_pattern(taken, m, 0, 97);
        usleep(20000);
        MPI_CHECK(MPI_Send(written, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Send(taken, (int)m, MPI_BYTE, 1, tag, comm));
    } else if (t_rank == 1) {
        mem_poison(x, n);
        mem_poison(y, n);
        MPI_Status st;
        int rc = MPI_Recv(x, (int)n, MPI_BYTE, 0, tag, comm, &st);
        size_t got = m > n ? 0 : m;
        if (m > n) {
            CHECK(error_class(rc) == MPI_ERR_TRUNCATE, "%zu bytes into a receive of %zu gave %s", m, n, error_name(error_class(rc)));
        } else {
            CHECK(rc == MPI_SUCCESS, "a receive of %zu bytes gave %s", m, error_name(error_class(rc)));
            check_status(&st, MPI_BYTE, 0, tag, (int)m, "another message of %zu bytes matched first", m);
            expect(x, m, 0, 97, "another message matched first");
        }
        unsigned char *have = mem_fetch(x, n);
        check_all(have + got, POISON_BYTE, n - got, "the bytes a message of %zu bytes did not bring, after a sender wrote 64", m);
        free(have);
        MPI_CHECK(MPI_Recv(y, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(y, n, 0, 96, "the message written into another receive's buffer");
    }
    mem_free(written);
    mem_free(taken);
    mem_free(x);
    mem_free(y);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    stats_fn get = stats_lookup();
    int dev = -1, other = -1;
    if (!host_mode())
        CUDA_CHECK(cudaGetDevice(&dev));
    if (t_rank < 2)
        MPI_CHECK(MPI_Sendrecv(&dev, 1, MPI_INT, 1 - t_rank, 99, &other, 1, MPI_INT, 1 - t_rank, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    const char *ipc = getenv("CUDAMPI_IPC"), *push = getenv("CUDAMPI_IPC_PUSH");
    dev_differs = !host_mode() && get && dev != other && !(ipc && strcmp(ipc, "0") == 0) && push && strcmp(push, "1") == 0;

    unsigned long long before = ipc_sent(get);
    size_t sent = waited_sends();
    if (t_rank == 0 && dev_differs)
        CHECK(ipc_sent(get) - before == sent, "%llu of the %zu bytes sent to a waiting receiver were written into its buffer", ipc_sent(get) - before, sent);
    pingpong(8, 300);
    MPI_Comm dup;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    earlier_matched(MPI_COMM_WORLD, MPI_COMM_WORLD, MEM_HOST, 0, "a host message with the same tag sent first");
    earlier_matched(MPI_COMM_WORLD, MPI_COMM_WORLD, MEM_HOST, 1, "a host message with the same tag and bytes sent first");
    earlier_matched(dup, MPI_COMM_WORLD, MEM_DEVICE, 0, "the same tag on another communicator sent first");
    MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    too_large(dup);
    other_matched(dup, 10);
    other_matched(dup, 100);
    MPI_CHECK(MPI_Comm_free(&dup));
    all_to_one();
    return report_and_finalize();
}
