// cudampi-test: ranks=2,3 without-shim=crash link=yes timeout=300
/* Blocking point-to-point: MPI_Send / MPI_Ssend / MPI_Bsend / MPI_Rsend (and MPI_Send_c /
 * MPI_Recv_c under MPI-4) x MPI_Recv, for placements device->device, host->device,
 * device->host, each compared with the same transfer host->host done in the same run.
 * Counts 0, 1, 8, 4095, 65536, 4 Mi + 3 elements of MPI_CHAR, MPI_INT, MPI_DOUBLE.
 *
 * Rsend needs the receive posted before the send starts; the shim does not take device
 * buffers in nonblocking calls yet, so the Rsend receiver posts MPI_Irecv on a HOST buffer
 * (placements host->host and device->host only), then tells the sender with a zero-byte
 * message. No device buffer is ever given to a nonblocking call here. */
#include "common.h"

enum { M_SEND, M_SSEND, M_BSEND, M_RSEND, M_SEND_C, M_NMODES };
static const char *mode_name[] = {"Send", "Ssend", "Bsend", "Rsend", "Send_c/Recv_c"};

#define SLACK 16 /* poisoned bytes after every receive buffer: must stay poison */
#define TAG_ACK 30000

static MPI_Comm comm;

struct result {
    unsigned char *bytes; /* received bytes + SLACK, copied back to the host */
    MPI_Status st;
};

/* One transfer src -> dst. On dst fills *res (caller frees res->bytes). */
static void one_case(int mode, MPI_Datatype dt, int count, int src, int dst, int skind, int rkind,
                     int tag, int seed, struct result *res)
{
    size_t bytes = (size_t)count * type_size(dt);
    if (t_rank == src) {
        void *sbuf = mem_alloc(skind, bytes);
        mem_pattern(sbuf, bytes, src, seed);
        switch (mode) {
        case M_SEND:
            MPI_CHECK(MPI_Send(sbuf, count, dt, dst, tag, comm));
            break;
        case M_SSEND:
            MPI_CHECK(MPI_Ssend(sbuf, count, dt, dst, tag, comm));
            break;
        case M_BSEND:
            MPI_CHECK(MPI_Bsend(sbuf, count, dt, dst, tag, comm));
            /* wait until it was received, so attached space never runs out */
            MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, dst, TAG_ACK, comm, MPI_STATUS_IGNORE));
            break;
        case M_RSEND:
            MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, dst, TAG_ACK, comm, MPI_STATUS_IGNORE));
            MPI_CHECK(MPI_Rsend(sbuf, count, dt, dst, tag, comm));
            break;
#if MPI_VERSION >= 4
        case M_SEND_C:
            MPI_CHECK(MPI_Send_c(sbuf, (MPI_Count)count, dt, dst, tag, comm));
            break;
#endif
        }
        mem_free(sbuf);
    } else if (t_rank == dst) {
        void *rbuf = mem_alloc(rkind, bytes + SLACK);
        mem_poison(rbuf, bytes + SLACK);
        status_init(&res->st);
        switch (mode) {
        case M_RSEND: {
            MPI_Request rq;
            MPI_CHECK(MPI_Irecv(rbuf, count, dt, src, tag, comm, &rq));
            MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, src, TAG_ACK, comm));
            MPI_CHECK(MPI_Wait(&rq, &res->st));
            break;
        }
#if MPI_VERSION >= 4
        case M_SEND_C:
            MPI_CHECK(MPI_Recv_c(rbuf, (MPI_Count)count, dt, src, tag, comm, &res->st));
            break;
#endif
        default:
            MPI_CHECK(MPI_Recv(rbuf, count, dt, src, tag, comm, &res->st));
            if (mode == M_BSEND) MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, src, TAG_ACK, comm));
        }
        res->bytes = mem_fetch(rbuf, bytes + SLACK);
        mem_free(rbuf);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    MPI_Datatype types[3] = {MPI_CHAR, MPI_INT, MPI_DOUBLE};
    const int counts[] = {0, 1, 8, 4095, 65536, 4 * 1024 * 1024 + 3};
    const int ncounts = (int)(sizeof counts / sizeof counts[0]);
    /* placements compared with host->host: {send kind, recv kind} */
    const int place[3][2] = {{MEM_DEVICE, MEM_DEVICE}, {MEM_HOST, MEM_DEVICE}, {MEM_DEVICE, MEM_HOST}};
    const char *place_name[3] = {"D->D", "H->D", "D->H"};

    /* Bsend buffer big enough for the largest message */
    int packsz = 0;
    MPI_Pack_size(counts[ncounts - 1], MPI_DOUBLE, comm, &packsz);
    int bsize = packsz + 4 * MPI_BSEND_OVERHEAD + 4096;
    void *battach = xmalloc((size_t)bsize);
    MPI_CHECK(MPI_Buffer_attach(battach, bsize));

    /* pairs: ring edges (0->1, 1->0 for two ranks) */
    int npairs = t_size == 2 ? 2 : t_size;
    int ncase = 0, nchecked = 0;

    for (int mode = 0; mode < M_NMODES; mode++) {
#if MPI_VERSION < 4
        if (mode == M_SEND_C) continue;
#endif
        for (int ti = 0; ti < 3; ti++) {
            MPI_Datatype dt = types[ti];
            for (int ci = 0; ci < ncounts; ci++) {
                int count = counts[ci];
                for (int pi = 0; pi < npairs; pi++) {
                    /* the biggest messages only on the first pair, to keep the run short */
                    if (ci == ncounts - 1 && pi > 0) continue;
                    int src = pi % t_size, dst = (pi + 1) % t_size;
                    if (t_size == 2 && pi == 1) src = 1, dst = 0;
                    int seed = ++ncase;
                    int tag = seed % 20000;
                    if (t_rank != src && t_rank != dst) continue;
                    size_t bytes = (size_t)count * type_size(dt);

                    struct result ref = {0}, got = {0};
                    one_case(mode, dt, count, src, dst, MEM_HOST, MEM_HOST, tag, seed, &ref);
                    unsigned char *exp = NULL;
                    if (t_rank == dst) {
                        exp = (unsigned char *)xmalloc(bytes + SLACK);
                        pattern_fill(exp, bytes, src, seed);
                        poison_fill(exp + bytes, SLACK);
                        check_bytes(ref.bytes, exp, bytes + SLACK, "%s %s count %d %d->%d H->H",
                                    mode_name[mode], type_name(dt), count, src, dst);
                        check_status(&ref.st, dt, src, tag, count, "%s %s count %d H->H",
                                     mode_name[mode], type_name(dt), count);
                    }
                    for (int p = 0; p < 3; p++) {
                        int sk = place[p][0], rk = place[p][1];
                        if (mode == M_RSEND && rk != MEM_HOST) continue; /* see top comment */
                        one_case(mode, dt, count, src, dst, sk, rk, tag, seed, &got);
                        if (t_rank == dst) {
                            check_bytes(got.bytes, ref.bytes, bytes + SLACK,
                                        "%s %s count %d %d->%d %s vs host run", mode_name[mode],
                                        type_name(dt), count, src, dst, place_name[p]);
                            check_bytes(got.bytes, exp, bytes + SLACK,
                                        "%s %s count %d %d->%d %s vs pattern", mode_name[mode],
                                        type_name(dt), count, src, dst, place_name[p]);
                            check_status_same(&ref.st, &got.st, dt, "%s %s count %d %d->%d %s",
                                              mode_name[mode], type_name(dt), count, src, dst,
                                              place_name[p]);
                            free(got.bytes);
                            nchecked++;
                        }
                    }
                    free(ref.bytes);
                    free(exp);
                }
            }
        }
    }

    int bsz = 0;
    void *bptr = NULL;
    MPI_CHECK(MPI_Buffer_detach(&bptr, &bsz));
    CHECK(bptr == battach && bsz == bsize, "Buffer_detach gave %p/%d, attached %p/%d", bptr, bsz,
          battach, bsize);
    free(battach);
    CHECK(nchecked > 0 || t_size > 2, "rank %d compared nothing", t_rank);
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
