// cudampi-test: ranks=2 without-shim=skip link=yes timeout=120
/* MPI-4 partitioned communication on device buffers: both ranks MPI_Psend_init to the other and
 * MPI_Precv_init from it (8 partitions of MPI_INT, 1000 and 65536 per partition), two rounds
 * each with new data. In every round, after MPI_Start, each partition's data is written only
 * just before it is marked ready (a shim that staged the whole buffer at MPI_Start sends stale
 * bytes), with MPI_Pready, MPI_Pready_range and MPI_Pready_list, in two halves; between the
 * halves and at the end the receiver polls MPI_Parrived, and whenever it reports a partition,
 * that partition's bytes must already be in the receive buffer (read from device memory).
 * After MPI_Wait the whole buffer (with poisoned slack) must equal the pattern and the host
 * run's. Placements device->device, host->device, device->host, compared with host->host.
 * Without partitioned calls (Open MPI 4.1: compile time; otherwise no MPI_Psend_init in the
 * library) the test notes it and passes. No run without the shim: on Open MPI 4.1 nothing
 * would reach MPI to crash. */
#include "common.h"

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_PARTITIONED 1 /* Open MPI 5 declares them although MPI_VERSION is 3 */
#endif

#ifdef HAVE_PARTITIONED
#define SLACK 16
#define NPART 8
#define POLL_SECONDS 10.0

static MPI_Comm comm;
/* Open MPI 5.0.11 (part/persist): MPI_Parrived polled while the peer has marked only some
 * partitions ready makes the NEXT round's MPI_Wait on the send request hang in about half the
 * runs (also without cudampi, host buffers). There, Parrived is polled only once every
 * partition is marked ready. */
#ifdef OMPI_MAJOR_VERSION
static const int midpoll = 0;
#else
static const int midpoll = 1;
#endif

/* Poll MPI_Parrived on partitions [lo, hi] until all arrived (or the time limit); every newly
 * arrived partition's bytes are compared with exp. seen[] remembers those already checked. */
static void poll_arrivals(MPI_Request rreq, void *r, const unsigned char *exp, size_t pbytes,
                          int lo, int hi, int *seen, const char *label, double limit, int must)
{
    double t0 = MPI_Wtime();
    unsigned char *buf = (unsigned char *)xmalloc(pbytes);
    for (;;) {
        int missing = 0;
        for (int p = lo; p <= hi; p++) {
            if (seen[p]) continue;
            int flag = 0;
            MPI_CHECK(MPI_Parrived(rreq, p, &flag));
            if (!flag) {
                missing++;
                continue;
            }
            seen[p] = 1;
            mem_get(buf, (char *)r + (size_t)p * pbytes, pbytes);
            check_bytes(buf, exp + (size_t)p * pbytes, pbytes,
                        "%s: partition %d when MPI_Parrived reported it", label, p);
        }
        if (!missing) break;
        if (MPI_Wtime() - t0 > limit) {
            if (must)
                CHECK(0, "%s: %d of partitions %d..%d not arrived after %.0f s of MPI_Parrived",
                      label, missing, lo, hi, limit);
            break;
        }
    }
    free(buf);
}

/* write partition p of the send buffer (fresh pattern) */
static void write_part(void *s, const unsigned char *fresh, size_t pbytes, int p)
{
    mem_put((char *)s + (size_t)p * pbytes, fresh + (size_t)p * pbytes, pbytes);
}

static void part_case(struct trace *tr, int skind, int rkind, int perpart, int seed)
{
    int peer = 1 - t_rank, tag = seed;
    size_t pbytes = (size_t)perpart * sizeof(int), n = NPART * pbytes;
    void *s = mem_alloc(skind, n), *r = mem_alloc(rkind, n + SLACK);
    MPI_Request sreq = MPI_REQUEST_NULL, rreq = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Precv_init(r, NPART, (MPI_Count)perpart, MPI_INT, peer, tag, comm, MPI_INFO_NULL, &rreq));
    MPI_CHECK(MPI_Psend_init(s, NPART, (MPI_Count)perpart, MPI_INT, peer, tag, comm, MPI_INFO_NULL, &sreq));
    char label[160];
    for (int round = 0; round < 2; round++) {
        int rseed = seed * 8 + round;
        snprintf(label, sizeof label, "%d partitions x %d INT round %d rank %d", NPART, perpart,
                 round, t_rank);
        unsigned char *fresh = pattern_new(n, t_rank, rseed);
        unsigned char *exp = (unsigned char *)xmalloc(n + SLACK);
        pattern_fill(exp, n, peer, rseed);
        poison_fill(exp + n, SLACK);
        /* stale bytes in the send buffer at MPI_Start: every partition is rewritten later */
        mem_pattern(s, n, t_rank, rseed + 1000);
        mem_poison(r, n + SLACK);
        int seen[NPART] = {0};

        MPI_CHECK(MPI_Start(&rreq));
        MPI_CHECK(MPI_Start(&sreq));
        /* first half: 3, then 0..2 */
        write_part(s, fresh, pbytes, 3);
        MPI_CHECK(MPI_Pready(3, sreq));
        for (int p = 0; p <= 2; p++) write_part(s, fresh, pbytes, p);
        MPI_CHECK(MPI_Pready_range(0, 2, sreq));
        /* the peer marked its first half ready too; an MPI may still send nothing before
         * every partition is ready (MPICH does), so this poll is short and need not see any */
        if (midpoll) poll_arrivals(rreq, r, exp, pbytes, 0, 3, seen, label, 0.05, 0);
        int early = 0;
        for (int p = 0; p < NPART; p++) early += seen[p];
        /* second half: 7 and 5 as a list, then 4 and 6 one by one */
        int list[2] = {7, 5};
        write_part(s, fresh, pbytes, 7);
        write_part(s, fresh, pbytes, 5);
        MPI_CHECK(MPI_Pready_list(2, list, sreq));
        write_part(s, fresh, pbytes, 4);
        MPI_CHECK(MPI_Pready(4, sreq));
        write_part(s, fresh, pbytes, 6);
        MPI_CHECK(MPI_Pready(6, sreq));
        poll_arrivals(rreq, r, exp, pbytes, 0, NPART - 1, seen, label, POLL_SECONDS, 1);
        if (midpoll && round == 0 && perpart == 1000 && skind == MEM_HOST && rkind == MEM_HOST) {
            note("host run: MPI_Parrived reported %d of %d partitions before the peer marked "
                 "all ready", early, NPART);
        }

        MPI_Status st;
        status_init(&st);
        int rc = MPI_Wait(&rreq, &st);
        CHECK(rc == MPI_SUCCESS, "%s: receive MPI_Wait returned %s", label, error_name(error_class(rc)));
        MPI_CHECK(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        CHECK(rreq != MPI_REQUEST_NULL && sreq != MPI_REQUEST_NULL,
              "%s: a partitioned request was freed by its completion", label);
        unsigned char *got = mem_fetch(r, n + SLACK);
        check_bytes(got, exp, n + SLACK, "%s vs pattern", label);
        /* the status's source, tag and count are not compared: MPIs differ in what they set
         * for partitioned receives; the error class is */
        trace_add(tr, label, got, n + SLACK, NULL, MPI_INT, rc);
        unsigned char *sg = mem_fetch(s, n);
        check_bytes(sg, fresh, n, "%s: send buffer changed", label);
        free(sg);
        free(got);
        free(exp);
        free(fresh);
        /* the peer's next round must not start before both completed this one */
        MPI_CHECK(MPI_Barrier(comm));
    }
    MPI_CHECK(MPI_Request_free(&rreq));
    MPI_CHECK(MPI_Request_free(&sreq));
    mem_free(s);
    mem_free(r);
}

static void run(int skind, int rkind, struct trace *tr)
{
    part_case(tr, skind, rkind, 1000, 1);
    part_case(tr, skind, rkind, 65536, 2);
    MPI_CHECK(MPI_Barrier(comm));
}
#endif

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    if (t_size != 2) DIE("nb_partitioned runs on 2 ranks, not %d", t_size);
#ifndef HAVE_PARTITIONED
    if (t_rank == 0) note("mpi.h has no partitioned communication (MPI-4): nothing tested");
    return report_and_finalize();
#else
    if (!dlsym(RTLD_DEFAULT, "MPI_Psend_init")) {
        if (t_rank == 0) note("the MPI library does not export MPI_Psend_init: nothing tested");
        return report_and_finalize();
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (!midpoll && t_rank == 0)
        note("Open MPI: MPI_Parrived polled only after every partition is marked ready "
             "(polling earlier hangs Open MPI 5.0's next round)");
    const int place[3][2] = {{MEM_DEVICE, MEM_DEVICE}, {MEM_HOST, MEM_DEVICE}, {MEM_DEVICE, MEM_HOST}};
    const char *place_name[3] = {"D->D", "H->D", "D->H"};
    struct trace ref = {0};
    run(MEM_HOST, MEM_HOST, &ref);
    for (int p = 0; p < 3; p++) {
        struct trace got = {0};
        run(place[p][0], place[p][1], &got);
        trace_compare(&ref, &got, place_name[p]);
        trace_free(&got);
    }
    CHECK(ref.n > 0, "rank %d recorded nothing", t_rank);
    trace_free(&ref);
    MPI_Comm_free(&comm);
    return report_and_finalize();
#endif
}
