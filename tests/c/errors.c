// cudampi-test: ranks=2 without-shim=skip
/* Error behaviour on a communicator with MPI_ERRORS_RETURN. With device buffers the shim must
 * return the error class the same call returns on host buffers, never crash, and lose nothing:
 *   - MPI_DATATYPE_NULL (send and receive)       -> as the host call (MPI_ERR_TYPE)
 *   - count -1 (send and receive)                 -> as the host call (MPI_ERR_COUNT)
 *   - NULL buffer, count > 0                      -> as the same call made on the real MPI
 *                                                    library directly (PMPI_Send, bypassing
 *                                                    the shim): MPI_ERR_BUFFER on both here
 *   - a freed device buffer (cudaFree, then MPI_Send) -> MPI_ERR_BUFFER, no crash (shim only)
 *   - staging that cannot be allocated: a 2^30-byte contiguous type, count 2^30 (2^60 bytes),
 *     on a device buffer, send and receive    -> MPI_ERR_NO_MEM (shim only)
 * After every error a normal device send/recv pair in both directions must deliver correct
 * bytes. Erroneous calls use their own tags; any message they sent anyway is reported.
 * The shim-only cases are skipped when the shim is not loaded or in CUDAMPI_TEST_MEM=host
 * mode (there the "device" buffer is malloc memory). Nothing here tests MPI_ERRORS_ARE_FATAL. */
#include "common.h"
#include <unistd.h>

#define TAG_OK 10
#define TAG_ERR 1000      /* + case number: tags of erroneous calls */
#define TAG_NOMEM_SAFETY 2000

static MPI_Comm comm;
static int peer;

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);

/* PMPI_Send of the MPI library itself (bypassing any interposer): the library that defines
 * MPI_Comm_rank, which the shim does not intercept. */
static send_fn real_pmpi_send(void)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Comm_rank");
    if (!sym || !dladdr(sym, &di) || !di.dli_fname) return NULL;
    if (strstr(di.dli_fname, "cudampi")) return NULL;
    void *h = dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return NULL;
    return (send_fn)dlsym(h, "PMPI_Send");
}

static int seq;
/* A normal device exchange in both directions, checked. */
static void exchange_ok(const char *after)
{
    size_t n = 3000 * sizeof(int);
    int seed = 500 + (++seq);
    void *s = mem_alloc(MEM_DEVICE, n), *r = mem_alloc(MEM_DEVICE, n + 16);
    mem_pattern(s, n, t_rank, seed);
    mem_poison(r, n + 16);
    MPI_Status st;
    for (int dir = 0; dir < 2; dir++) {
        if (t_rank == dir)
            MPI_CHECK(MPI_Send(s, 3000, MPI_INT, peer, TAG_OK, comm));
        else
            MPI_CHECK(MPI_Recv(r, 3000, MPI_INT, peer, TAG_OK, comm, &st));
    }
    check_status(&st, MPI_INT, peer, TAG_OK, 3000, "exchange after %s", after);
    unsigned char *h = mem_fetch(r, n + 16), *e = (unsigned char *)xmalloc(n + 16);
    pattern_fill(e, n, peer, seed);
    poison_fill(e + n, 16);
    check_bytes(h, e, n + 16, "device exchange after %s", after);
    free(h);
    free(e);
    mem_free(s);
    mem_free(r);
}

static void expect_same(const char *what, int host_rc, int dev_rc, int documented)
{
    int hc = error_class(host_rc), dc = error_class(dev_rc);
    CHECK(hc != MPI_SUCCESS, "%s on a host buffer succeeded (the MPI does not check?)", what);
    CHECK(dc == hc, "%s: device buffer gave class %s, host buffer %s", what, error_name(dc),
          error_name(hc));
    if (hc != documented)
        note("%s: host call gives class %s (not %s); the test only requires the same class", what,
             error_name(hc), error_name(documented));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int shim_cases = shim_loaded() && !host_mode();
    if (t_rank == 0 && !shim_cases)
        note("shim not loaded or host mode: freed-buffer and no-memory cases skipped");

    if (t_rank < 2) {
        peer = 1 - t_rank;
        void *h = mem_alloc(MEM_HOST, 4096), *d = mem_alloc(MEM_DEVICE, 4096);
        mem_pattern(h, 4096, t_rank, 1);
        mem_pattern(d, 4096, t_rank, 1);
        exchange_ok("start");

        /* 1. MPI_DATATYPE_NULL */
        int rh = MPI_Send(h, 4, MPI_DATATYPE_NULL, peer, TAG_ERR + 1, comm);
        int rd = MPI_Send(d, 4, MPI_DATATYPE_NULL, peer, TAG_ERR + 1, comm);
        expect_same("MPI_Send with MPI_DATATYPE_NULL", rh, rd, MPI_ERR_TYPE);
        exchange_ok("Send(MPI_DATATYPE_NULL)");
        rh = MPI_Recv(h, 4, MPI_DATATYPE_NULL, peer, TAG_ERR + 2, comm, MPI_STATUS_IGNORE);
        rd = MPI_Recv(d, 4, MPI_DATATYPE_NULL, peer, TAG_ERR + 2, comm, MPI_STATUS_IGNORE);
        expect_same("MPI_Recv with MPI_DATATYPE_NULL", rh, rd, MPI_ERR_TYPE);
        exchange_ok("Recv(MPI_DATATYPE_NULL)");

        /* 2. count -1 */
        rh = MPI_Send(h, -1, MPI_INT, peer, TAG_ERR + 3, comm);
        rd = MPI_Send(d, -1, MPI_INT, peer, TAG_ERR + 3, comm);
        expect_same("MPI_Send with count -1", rh, rd, MPI_ERR_COUNT);
        exchange_ok("Send(count -1)");
        rh = MPI_Recv(h, -1, MPI_INT, peer, TAG_ERR + 4, comm, MPI_STATUS_IGNORE);
        rd = MPI_Recv(d, -1, MPI_INT, peer, TAG_ERR + 4, comm, MPI_STATUS_IGNORE);
        expect_same("MPI_Recv with count -1", rh, rd, MPI_ERR_COUNT);
        exchange_ok("Recv(count -1)");

        /* 3. NULL buffer, count > 0: MPI_Send (through the shim when loaded) vs the real PMPI */
        {
            send_fn real = real_pmpi_send();
            int rs = MPI_Send(NULL, 4, MPI_INT, peer, TAG_ERR + 5, comm);
            if (CHECK(real != NULL, "cannot find the MPI library's own PMPI_Send")) {
                int rr = real(NULL, 4, MPI_INT, peer, TAG_ERR + 5, comm);
                CHECK(error_class(rs) == error_class(rr),
                      "MPI_Send(NULL, 4) gave class %s, the real PMPI_Send %s",
                      error_name(error_class(rs)), error_name(error_class(rr)));
                if (error_class(rr) != MPI_ERR_BUFFER)
                    note("PMPI_Send(NULL, 4) gives class %s", error_name(error_class(rr)));
            }
            exchange_ok("Send(NULL, 4)");
        }

        /* 4. a freed device buffer */
        if (shim_cases) {
            void *f = mem_alloc(MEM_DEVICE, 4096);
            mem_pattern(f, 4096, t_rank, 2);
            mem_free(f); /* cudaFree */
            int rc = MPI_Send(f, 16, MPI_INT, peer, TAG_ERR + 6, comm);
            CHECK(error_class(rc) == MPI_ERR_BUFFER, "MPI_Send on a freed device buffer: class %s, "
                  "expected MPI_ERR_BUFFER %s", error_name(error_class(rc)),
                  error_name(MPI_ERR_BUFFER));
            exchange_ok("Send(freed device buffer)");
        }

        /* 5. staging that cannot be allocated: 2^60 bytes */
        if (shim_cases) {
            MPI_Datatype big;
            MPI_CHECK(MPI_Type_contiguous(1 << 30, MPI_BYTE, &big));
            MPI_CHECK(MPI_Type_commit(&big));
            int rc = MPI_Send(d, 1 << 30, big, peer, TAG_ERR + 7, comm);
            CHECK(error_class(rc) == MPI_ERR_NO_MEM, "MPI_Send of 2^60 bytes from a device "
                  "buffer: class %s, expected MPI_ERR_NO_MEM %s", error_name(error_class(rc)),
                  error_name(MPI_ERR_NO_MEM));
            exchange_ok("Send(2^60 bytes)");
            /* the receive side: a message with this tag exists, so a shim that (wrongly) went on
             * to the real MPI_Recv does not hang; it must be left for the drain below */
            MPI_CHECK(MPI_Send(h, 1, MPI_INT, peer, TAG_NOMEM_SAFETY, comm));
            MPI_Barrier(comm);
            rc = MPI_Recv(d, 1 << 30, big, peer, TAG_NOMEM_SAFETY, comm, MPI_STATUS_IGNORE);
            CHECK(error_class(rc) == MPI_ERR_NO_MEM, "MPI_Recv of 2^60 bytes into a device "
                  "buffer: class %s, expected MPI_ERR_NO_MEM %s", error_name(error_class(rc)),
                  error_name(MPI_ERR_NO_MEM));
            exchange_ok("Recv(2^60 bytes)");
            MPI_Type_free(&big);
        }

        /* the device buffer given to failing calls is unchanged */
        unsigned char *got = mem_fetch(d, 4096), *e = pattern_new(4096, t_rank, 1);
        check_bytes(got, e, 4096, "device buffer after the erroneous calls");
        free(got);
        free(e);

        /* drain: messages erroneous calls sent anyway */
        MPI_Barrier(comm);
        int safety = 0;
        for (int tries = 0; tries < 50; tries++) {
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(peer, MPI_ANY_TAG, comm, &flag, &st);
            if (!flag) {
                if (safety || !shim_cases) break;
                usleep(2000);
                continue;
            }
            int bytes = 0;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            void *tmp = xmalloc((size_t)bytes + 1);
            MPI_Recv(tmp, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
            free(tmp);
            if (st.MPI_TAG == TAG_NOMEM_SAFETY)
                safety = 1;
            else
                CHECK(0, "an erroneous call (tag %d) sent a message of %d bytes anyway",
                      st.MPI_TAG, bytes);
        }
        if (shim_cases)
            CHECK(safety, "the message for the failed 2^60-byte receive was consumed by it");
        mem_free(h);
        mem_free(d);
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
