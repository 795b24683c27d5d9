/* bench/coll.c -- OSU-style latency of MPI_Allreduce (MPI_FLOAT, MPI_SUM), MPI_Bcast (root 0),
 * MPI_Alltoall, MPI_Allgather, MPI_Reduce_scatter_block (MPI_FLOAT, MPI_SUM) and MPI_Reduce
 * (MPI_FLOAT, MPI_SUM, root 0) (osu_allreduce, osu_bcast, osu_alltoall, osu_allgather,
 * osu_reduce_scatter, osu_reduce) on any number of ranks, five ways side by side in one run,
 * same sizes:
 *
 *   (a) host     host buffers through the MPI library's own PMPI_Allreduce/PMPI_Bcast/
 *                PMPI_Alltoall/PMPI_Allgather/PMPI_Reduce_scatter_block/PMPI_Reduce, bypassing
 *                the shim even when it is preloaded (found via dladdr(MPI_Comm_rank) ->
 *                dlopen(RTLD_NOLOAD) -> dlsym, as bench/pingpong.c does): the host ceiling
 *   (b) device   device buffers (cudaMalloc) through MPI_Allreduce/MPI_Bcast/MPI_Alltoall/
 *                MPI_Allgather/MPI_Reduce_scatter_block/MPI_Reduce: needs the shim
 *                (dlsym(RTLD_DEFAULT, "cudampi_version")); skipped without it unless -f.
 *                cudampi runs these on NCCL where it can (CUDAMPI_NCCL, CUDAMPI_NCCL_BYTES);
 *                where the shim has the counter (struct cudampi_stats.nccl_calls), the column
 *                via-nccl (JSON: device_shim_nccl_share) gives the share of rank 0's timed
 *                device calls that NCCL ran
 *   (c) manual, pageable   the recipe without the shim: cudaMemcpy device -> malloc'd host
 *                buffer, the host collective through the real PMPI function, cudaMemcpy the
 *                result back to the device (Bcast: the root copies out, the others copy in;
 *                Reduce: every rank copies out, the root copies in)
 *   (d) manual, pinned     the same with cudaMallocHost buffers (COLL_PINNED=register: anonymous
 *                memory pinned with cudaHostRegister, as cudampi pins its own; register-huge:
 *                the same with transparent huge pages asked for)
 *   (e) nccl     ncclAllReduce, ncclBroadcast, ncclAllGather, ncclReduceScatter, ncclReduce,
 *                and for Alltoall one group of ncclSend/ncclRecv per peer, on device buffers,
 *                then a stream synchronisation: the GPU-native reference, where NCCL loads and
 *                every rank has a GPU of its own (bench/nccl.h)
 *
 * -d cuda [D|H] [D|H] (default D D) or -d host: where rank 0 and the other ranks keep the
 * buffers of ways (b), (c) and (d), as the OSU benchmarks' -d takes it; ranks whose buffers are
 * on the host call the real collective on them in (c) and (d), so -d host leaves (c) and (d) out
 * (they would time (a) again). -d cuda D H on one GPU times rank 0's device costs without two
 * processes sharing the GPU.
 *
 * Sizes are bytes per rank: the Allreduce vector (size / 4 floats), the Bcast message, the
 * Alltoall block each rank sends to each other rank, the Allgather block each rank sends (their
 * receive buffers hold size * ranks bytes), the Reduce_scatter_block block each rank receives
 * (size / 4 floats; the send buffers hold size * ranks bytes), the Reduce vector (size / 4
 * floats). The reductions skip sizes below 4 bytes.
 * Each call is timed alone between MPI_Barriers; the time per call is averaged over ITERS
 * calls after WARMUP untimed ones, and the table shows the maximum of that average over the
 * ranks (MPI_Reduce MAX), in microseconds.
 *
 * -B times the calls back to back instead: after the warm-up, one MPI_Barrier, then ITERS calls in
 * a row and a cudaDeviceSynchronize, averaged over the ITERS. A recipe's copy to the device that
 * returns before it is done (cudaMemcpy from pageable memory) then delays the next call's copy
 * from the device, as it does in a program's loop, instead of finishing in the barrier.
 *
 * -n makes every MPI collective call of ways (a) to (d) the nonblocking form with the same
 * arguments, waited for at once: MPI_Iallreduce, MPI_Ibcast, MPI_Ialltoall, MPI_Iallgather,
 * MPI_Ireduce_scatter_block or MPI_Ireduce, then MPI_Wait. (a) and the recipes' host collective
 * call the real library's PMPI_I... and PMPI_Wait (found as the blocking ones are; where that
 * library lacks one of them, MPI_I... and MPI_Wait are used instead), (b) the program's MPI_I...
 * and MPI_Wait, which the shim serves: the path of a program's nonblocking device collectives,
 * against the host's own nonblocking calls. A nonblocking start cannot ask the other ranks
 * whether to run on NCCL: cudampi runs it as the communicator's last blocking collective agreed,
 * so (b) makes one untimed blocking call of the same collective and size before its warm-up
 * (without it every nonblocking device call would be staged; via-nccl tells which ran where).
 * (e) is unchanged (NCCL's calls are asynchronous already). The collectives keep their names in the tables and the JSON; the header says
 * "# calls: nonblocking", the JSON's parameters "nonblocking": true.
 *
 * -r ROUNDS (default 1) runs the ways in turn ROUNDS times at each size, the first way rotating
 * from round to round, and reports each way's median over the rounds: at small sizes the
 * device and recipe ways differ by about as much as one measurement drifts during a run. With
 * more than one round, the columns dev<page and dev<pin count the rounds in which device(shim)
 * was at least as fast as the recipe through pageable (pinned) memory of the same round.
 *
 * -c checks the data: before every call the inputs are refilled with values that depend on
 * the iteration and the rank (the reductions: small integers, so that the float sum is exact in
 * any order), and after it every rank (Reduce: the root) compares its whole result (device
 * results copied back first; the manual ways are checked in device memory, where the recipe
 * leaves them) with the host computation; mismatches are reported on stderr and the exit
 * status is 1. Filling and checking happen outside the timed calls. -c -n checks the nonblocking
 * calls' results the same way.
 *
 * Build (stand-in driver, no GPU):
 *   mpicc -O2 bench/coll.c -o build/coll -Itests/fixture/include \
 *         -Lbuild/fixture/lib -Wl,-rpath,$PWD/build/fixture/lib -lcudart -lcuda -ldl
 * Build (real GPU):
 *   mpicc -O2 bench/coll.c -o build/coll -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl
 * Run:
 *   mpirun -np N -x LD_PRELOAD=$PWD/target/release/libcudampi.so build/coll \
 *          [-d cuda D D] [-m MIN:MAX] [-2] [-l allreduce,bcast,alltoall,allgather,reduce_scatter_block,reduce]
 *          [-i ITERS] [-x WARMUP] [-r ROUNDS] [-B] [-n] [-c] [-f] [-o out.json]
 *   MPICH: LD_PRELOAD=$PWD/target/release/libcudampi.so mpirun -n N build/coll ...
 *
 * Sizes take k/M/G suffixes (powers of 1024). Defaults: 8 B .. 64 MiB by powers of 4 (-2: by
 * powers of 2; MAX is always included), ITERS 100 and WARMUP 10 up to 64 KiB, above that both
 * shrink in proportion to the size (at least 4 iterations and 2 warm-ups). -f runs the
 * device way without the shim (a non-CUDA-aware MPI crashes; a CUDA-aware one gives its own
 * figure). Each rank uses GPU (node-local rank % device count).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <cuda_runtime.h>
#ifdef FAKECUDA_FIXTURE
#include <cuda.h>
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*alltoall_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int (*reduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
/* the nonblocking forms (-n): the same arguments and a request */
typedef int (*iallreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
typedef int (*ibcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
typedef int (*ialltoall_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Request *);
typedef int (*ireduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Request *);
typedef int (*wait_fn)(MPI_Request *, MPI_Status *);
typedef const char *(*version_fn)(void);

static int rank, nranks;
static int nonblocking; /* -n: MPI_I... then MPI_Wait at once instead of the blocking calls */
static allreduce_fn real_allreduce;
static bcast_fn real_bcast;
static alltoall_fn real_alltoall;
static alltoall_fn real_allgather;
static allreduce_fn real_reduce_scatter_block; /* the same signature, recvcount for count */
static reduce_fn real_reduce;
static iallreduce_fn real_iallreduce;
static ibcast_fn real_ibcast;
static ialltoall_fn real_ialltoall;
static ialltoall_fn real_iallgather;
static iallreduce_fn real_ireduce_scatter_block;
static ireduce_fn real_ireduce;
static wait_fn real_wait; /* the real library's requests are waited for by the real library */
static const char *real_lib = "(not found: MPI_* used instead)";

/* The real library's PMPI functions: the library that defines MPI_Comm_rank (the shim does not
 * intercept it) opened again with RTLD_NOLOAD, then dlsym in that handle alone. Each set (the
 * blocking functions; the nonblocking ones with PMPI_Wait) is taken whole or not at all, and
 * real_lib names the library where the set that this run calls (-n: the nonblocking one) came
 * from it. */
static void find_real(void)
{
    Dl_info di;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Comm_rank");
    real_allreduce = (allreduce_fn)MPI_Allreduce;
    real_bcast = (bcast_fn)MPI_Bcast;
    real_alltoall = (alltoall_fn)MPI_Alltoall;
    real_allgather = (alltoall_fn)MPI_Allgather;
    real_reduce_scatter_block = (allreduce_fn)MPI_Reduce_scatter_block;
    real_reduce = (reduce_fn)MPI_Reduce;
    real_iallreduce = (iallreduce_fn)MPI_Iallreduce;
    real_ibcast = (ibcast_fn)MPI_Ibcast;
    real_ialltoall = (ialltoall_fn)MPI_Ialltoall;
    real_iallgather = (ialltoall_fn)MPI_Iallgather;
    real_ireduce_scatter_block = (iallreduce_fn)MPI_Ireduce_scatter_block;
    real_ireduce = (ireduce_fn)MPI_Ireduce;
    real_wait = (wait_fn)MPI_Wait;
    if (!sym || !dladdr(sym, &di) || !di.dli_fname) return;
    void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_NOW);
    if (!h) return;
    allreduce_fn ar = (allreduce_fn)dlsym(h, "PMPI_Allreduce");
    bcast_fn bc = (bcast_fn)dlsym(h, "PMPI_Bcast");
    alltoall_fn aa = (alltoall_fn)dlsym(h, "PMPI_Alltoall");
    alltoall_fn ag = (alltoall_fn)dlsym(h, "PMPI_Allgather");
    allreduce_fn rs = (allreduce_fn)dlsym(h, "PMPI_Reduce_scatter_block");
    reduce_fn rd = (reduce_fn)dlsym(h, "PMPI_Reduce");
    if (ar && bc && aa && ag && rs && rd) {
        real_allreduce = ar;
        real_bcast = bc;
        real_alltoall = aa;
        real_allgather = ag;
        real_reduce_scatter_block = rs;
        real_reduce = rd;
        if (!nonblocking) real_lib = di.dli_fname;
    }
    iallreduce_fn iar = (iallreduce_fn)dlsym(h, "PMPI_Iallreduce");
    ibcast_fn ibc = (ibcast_fn)dlsym(h, "PMPI_Ibcast");
    ialltoall_fn iaa = (ialltoall_fn)dlsym(h, "PMPI_Ialltoall");
    ialltoall_fn iag = (ialltoall_fn)dlsym(h, "PMPI_Iallgather");
    iallreduce_fn irs = (iallreduce_fn)dlsym(h, "PMPI_Ireduce_scatter_block");
    ireduce_fn ird = (ireduce_fn)dlsym(h, "PMPI_Ireduce");
    wait_fn wt = (wait_fn)dlsym(h, "PMPI_Wait");
    if (iar && ibc && iaa && iag && irs && ird && wt) {
        real_iallreduce = iar;
        real_ibcast = ibc;
        real_ialltoall = iaa;
        real_iallgather = iag;
        real_ireduce_scatter_block = irs;
        real_ireduce = ird;
        real_wait = wt;
        if (nonblocking) real_lib = di.dli_fname;
    }
}

#include "machine.h"
#include "nccl.h"
#include "../include/cudampi.h"

/* The shim's count of device collectives that NCCL ran (struct cudampi_stats.nccl_calls), read
 * through cudampi_get_stats_sized found with dlsym: -1 without the shim or where its struct has
 * no such field yet. */
typedef int (*stats_fn)(struct cudampi_stats *, size_t);
static stats_fn shim_stats;
static long long shim_nccl_calls(void)
{
    struct cudampi_stats st;
    if (!shim_stats) return -1;
    memset(&st, 0, sizeof st);
    int got = shim_stats(&st, sizeof st);
    if (got < (int)(offsetof(struct cudampi_stats, nccl_calls) + sizeof st.nccl_calls)) return -1;
    return (long long)st.nccl_calls;
}

/* ---- data for -c ----
 * Byte messages are base[s .. s+n) with base[x] = x + 3 (x >> 8) (mod 256), period 65536, and
 * s < 256 chosen from the iteration (and for Alltoall the source and destination ranks), so
 * that two messages with different s differ in their first byte already and a shifted copy
 * differs everywhere. Allreduce inputs are small integers (exact float sums). */
static unsigned char *base;
static void make_base(size_t n)
{
    base = malloc(n + 256);
    for (size_t x = 0; x < n + 256; x++) base[x] = (unsigned char)(x + 3 * (x >> 8));
}
static unsigned seed(int iter, int src, int dst)
{
    return (7u + (unsigned)iter * 131u + (unsigned)src * 29u + (unsigned)dst * 53u) & 255u;
}
static float ar_value(int r, int iter, size_t j) { return (float)((j + 13u * (unsigned)r + 3u * (unsigned)iter + 1u) & 63u); }

enum coll { C_ALLREDUCE, C_BCAST, C_ALLTOALL, C_ALLGATHER, C_REDUCE_SCATTER_BLOCK, C_REDUCE, C_N };
static const char *coll_key[C_N] = {"allreduce", "bcast", "alltoall", "allgather", "reduce_scatter_block", "reduce"};
static const char *coll_title[C_N] = {"MPI_Allreduce (MPI_FLOAT, MPI_SUM)", "MPI_Bcast (root 0)",
                                      "MPI_Alltoall (bytes per rank pair)", "MPI_Allgather (bytes per rank)",
                                      "MPI_Reduce_scatter_block (MPI_FLOAT, MPI_SUM; bytes each rank receives)",
                                      "MPI_Reduce (MPI_FLOAT, MPI_SUM, root 0)"};
/* the reductions: MPI_FLOAT vectors of size / 4 elements (Reduce_scatter_block: per rank) */
static int reduces(int c) { return c == C_ALLREDUCE || c == C_REDUCE_SCATTER_BLOCK || c == C_REDUCE; }
/* the bytes of this rank's send (0) or receive (1) buffer at size; Bcast has one buffer */
static size_t span(int c, size_t size, int recv)
{
    const size_t fl = size / sizeof(float) * sizeof(float);
    switch (c) {
    case C_ALLREDUCE:
    case C_REDUCE: return fl;
    case C_REDUCE_SCATTER_BLOCK: return recv ? fl : fl * (size_t)nranks;
    case C_ALLGATHER: return recv ? size * (size_t)nranks : size;
    case C_ALLTOALL: return size * (size_t)nranks;
    default: return size;
    }
}
enum way { W_HOST, W_DEVICE, W_PAGEABLE, W_PINNED, W_NCCL, W_N };
static const char *way_key[W_N] = {"host_real_us", "device_shim_us", "manual_pageable_us", "manual_pinned_us",
                                   "nccl_us"};
static const char *way_name[W_N] = {"host(real)", "device(shim)", "manual-page", "manual-pin", "nccl"};

static char place[2] = {'D', 'D'}; /* -d: ways (b)-(d): buffers on rank 0 and the others */

/* Is this way's data in device memory on this rank? */
static int on_device(int w) { return w != W_HOST && (w == W_NCCL || place[rank == 0 ? 0 : 1] == 'D'); }

struct bufs {
    char *dsend, *drecv; /* device */
    char *hsend, *hrecv; /* malloc */
    char *psend, *precv; /* cudaMallocHost */
    char *scratch;       /* -c: inputs built here, device results copied back here */
};

static long errors;
static void report(int c, int w, size_t size, int iter, size_t off, double got, double want)
{
    if (errors < 5)
        fprintf(stderr, "coll: rank %d: %s, %s, %zu B, iteration %d: element %zu is %g, expected %g\n", rank,
                coll_key[c], way_name[w], size, iter, off, got, want);
    errors++;
}

/* The MPI calls of one_call: real (1), the real library's function (host(real) and the recipes'
 * host collective), or (0) the program's MPI_ one (device(shim): the shim's where it is
 * preloaded). With -n the nonblocking form with the same arguments, then MPI_Wait at once (the
 * real library's request waited for by the real PMPI_Wait, the shim's by the shim's MPI_Wait), so
 * that the two columns time the path a program's MPI_I... and MPI_Wait take. */
static void wait_now(int real, MPI_Request *q) { (real ? real_wait : (wait_fn)MPI_Wait)(q, MPI_STATUS_IGNORE); }

/* MPI_Allreduce, or (rsb) MPI_Reduce_scatter_block, whose recvcount is cnt: one signature */
static void do_allreduce(int real, int rsb, const void *s, void *r, int cnt)
{
    MPI_Request q;
    if (!nonblocking) {
        allreduce_fn f = real ? (rsb ? real_reduce_scatter_block : real_allreduce)
                              : (rsb ? (allreduce_fn)MPI_Reduce_scatter_block : (allreduce_fn)MPI_Allreduce);
        f(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        return;
    }
    iallreduce_fn f = real ? (rsb ? real_ireduce_scatter_block : real_iallreduce)
                           : (rsb ? (iallreduce_fn)MPI_Ireduce_scatter_block : (iallreduce_fn)MPI_Iallreduce);
    f(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
    wait_now(real, &q);
}

static void do_bcast(int real, void *buf, int n)
{
    MPI_Request q;
    if (!nonblocking) {
        (real ? real_bcast : (bcast_fn)MPI_Bcast)(buf, n, MPI_CHAR, 0, MPI_COMM_WORLD);
        return;
    }
    (real ? real_ibcast : (ibcast_fn)MPI_Ibcast)(buf, n, MPI_CHAR, 0, MPI_COMM_WORLD, &q);
    wait_now(real, &q);
}

/* MPI_Alltoall, or (gather) MPI_Allgather: one signature */
static void do_alltoall(int real, int gather, const void *s, void *r, int n)
{
    MPI_Request q;
    if (!nonblocking) {
        alltoall_fn f = real ? (gather ? real_allgather : real_alltoall)
                             : (gather ? (alltoall_fn)MPI_Allgather : (alltoall_fn)MPI_Alltoall);
        f(s, n, MPI_CHAR, r, n, MPI_CHAR, MPI_COMM_WORLD);
        return;
    }
    ialltoall_fn f = real ? (gather ? real_iallgather : real_ialltoall)
                          : (gather ? (ialltoall_fn)MPI_Iallgather : (ialltoall_fn)MPI_Ialltoall);
    f(s, n, MPI_CHAR, r, n, MPI_CHAR, MPI_COMM_WORLD, &q);
    wait_now(real, &q);
}

static void do_reduce(int real, const void *s, void *r, int cnt)
{
    MPI_Request q;
    if (!nonblocking) {
        (real ? real_reduce : (reduce_fn)MPI_Reduce)(s, r, cnt, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        return;
    }
    (real ? real_ireduce : (ireduce_fn)MPI_Ireduce)(s, r, cnt, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, &q);
    wait_now(real, &q);
}

/* one call of collective c, way w; size in bytes per rank (see the header) */
static void one_call(int c, int w, size_t size, struct bufs *b)
{
    const int n = (int)size, cnt = (int)(size / sizeof(float));
    const size_t a2a = size * (size_t)nranks, arb = (size_t)cnt * sizeof(float);
    if ((w == W_PAGEABLE || w == W_PINNED) && !on_device(w)) w = W_HOST; /* nothing to stage here */
    char *hs = w == W_PINNED ? b->psend : b->hsend, *hr = w == W_PINNED ? b->precv : b->hrecv;
    char *ds = on_device(w) ? b->dsend : b->hsend, *dr = on_device(w) ? b->drecv : b->hrecv;
    if (w == W_NCCL) {
        nccl_check(nccl.group_start(), "ncclGroupStart");
        if (c == C_ALLREDUCE)
            nccl_check(nccl.all_reduce(ds, dr, (size_t)cnt, NCCL_FLOAT32, NCCL_SUM, nccl.comm, nccl.stream), "ncclAllReduce");
        else if (c == C_BCAST)
            nccl_check(nccl.broadcast(dr, dr, size, NCCL_CHAR, 0, nccl.comm, nccl.stream), "ncclBroadcast");
        else if (c == C_ALLGATHER)
            nccl_check(nccl.all_gather(ds, dr, size, NCCL_CHAR, nccl.comm, nccl.stream), "ncclAllGather");
        else if (c == C_REDUCE_SCATTER_BLOCK)
            nccl_check(nccl.reduce_scatter(ds, dr, (size_t)cnt, NCCL_FLOAT32, NCCL_SUM, nccl.comm, nccl.stream),
                       "ncclReduceScatter");
        else if (c == C_REDUCE)
            nccl_check(nccl.reduce(ds, dr, (size_t)cnt, NCCL_FLOAT32, NCCL_SUM, 0, nccl.comm, nccl.stream), "ncclReduce");
        else
            for (int p = 0; p < nranks; p++) {
                nccl_check(nccl.send(ds + (size_t)p * size, size, NCCL_CHAR, p, nccl.comm, nccl.stream), "ncclSend");
                nccl_check(nccl.recv(dr + (size_t)p * size, size, NCCL_CHAR, p, nccl.comm, nccl.stream), "ncclRecv");
            }
        nccl_check(nccl.group_end(), "ncclGroupEnd");
        nccl_sync();
        return;
    }
    switch (c) {
    case C_ALLREDUCE:
        if (w == W_HOST)
            do_allreduce(1, 0, b->hsend, b->hrecv, cnt);
        else if (w == W_DEVICE)
            do_allreduce(0, 0, ds, dr, cnt);
        else {
            cudaMemcpy(hs, b->dsend, arb, cudaMemcpyDeviceToHost);
            do_allreduce(1, 0, hs, hr, cnt);
            cudaMemcpy(b->drecv, hr, arb, cudaMemcpyHostToDevice);
        }
        break;
    case C_BCAST: /* one buffer: the receive one */
        if (w == W_HOST)
            do_bcast(1, b->hrecv, n);
        else if (w == W_DEVICE)
            do_bcast(0, dr, n);
        else {
            if (rank == 0) cudaMemcpy(hr, b->drecv, size, cudaMemcpyDeviceToHost);
            do_bcast(1, hr, n);
            if (rank != 0) cudaMemcpy(b->drecv, hr, size, cudaMemcpyHostToDevice);
        }
        break;
    case C_ALLTOALL:
    case C_ALLGATHER: { /* one signature; Alltoall sends a block to every rank, Allgather one */
        const int gather = c == C_ALLGATHER;
        size_t out = gather ? size : a2a;
        if (w == W_HOST)
            do_alltoall(1, gather, b->hsend, b->hrecv, n);
        else if (w == W_DEVICE)
            do_alltoall(0, gather, ds, dr, n);
        else {
            cudaMemcpy(hs, b->dsend, out, cudaMemcpyDeviceToHost);
            do_alltoall(1, gather, hs, hr, n);
            cudaMemcpy(b->drecv, hr, a2a, cudaMemcpyHostToDevice);
        }
        break;
    }
    case C_REDUCE_SCATTER_BLOCK: /* cnt floats received, cnt * ranks sent */
        if (w == W_HOST)
            do_allreduce(1, 1, b->hsend, b->hrecv, cnt);
        else if (w == W_DEVICE)
            do_allreduce(0, 1, ds, dr, cnt);
        else {
            cudaMemcpy(hs, b->dsend, arb * (size_t)nranks, cudaMemcpyDeviceToHost);
            do_allreduce(1, 1, hs, hr, cnt);
            cudaMemcpy(b->drecv, hr, arb, cudaMemcpyHostToDevice);
        }
        break;
    case C_REDUCE: /* the result on rank 0 only */
        if (w == W_HOST)
            do_reduce(1, b->hsend, b->hrecv, cnt);
        else if (w == W_DEVICE)
            do_reduce(0, ds, dr, cnt);
        else {
            cudaMemcpy(hs, b->dsend, arb, cudaMemcpyDeviceToHost);
            do_reduce(1, hs, hr, cnt);
            if (rank == 0) cudaMemcpy(b->drecv, hr, arb, cudaMemcpyHostToDevice);
        }
        break;
    }
}

/* -c: this rank's inputs for iteration i (into the host or the device send buffer) */
static void fill(int c, int w, size_t size, int i, struct bufs *b)
{
    const size_t a2a = size * (size_t)nranks;
    char *dst = !on_device(w) ? (c == C_BCAST ? b->hrecv : b->hsend) : b->scratch;
    size_t bytes = 0;
    switch (c) {
    case C_ALLREDUCE:
    case C_REDUCE_SCATTER_BLOCK: /* element j of the whole send vector (block j / cnt goes to that rank) */
    case C_REDUCE: {
        float *f = (float *)dst;
        bytes = span(c, size, 0);
        for (size_t j = 0; j < bytes / sizeof(float); j++) f[j] = ar_value(rank, i, j);
        break;
    }
    case C_BCAST:
        if (rank != 0) return;
        memcpy(dst, base + seed(i, 0, 0), size);
        bytes = size;
        break;
    case C_ALLTOALL:
        for (int p = 0; p < nranks; p++) memcpy(dst + (size_t)p * size, base + seed(i, rank, p), size);
        bytes = a2a;
        break;
    case C_ALLGATHER:
        memcpy(dst, base + seed(i, rank, 0), size);
        bytes = size;
        break;
    }
    if (on_device(w)) cudaMemcpy(c == C_BCAST ? b->drecv : b->dsend, b->scratch, bytes, cudaMemcpyHostToDevice);
}

/* -c: poison this rank's result buffer before the call (the root's Bcast buffer is its input) */
static void poison(int c, int w, size_t size, struct bufs *b)
{
    size_t bytes = span(c, size, 1);
    if (c == C_BCAST && rank == 0) return;
    if (!on_device(w))
        memset(b->hrecv, 0xee, bytes);
    else
        cudaMemset(b->drecv, 0xee, bytes);
}

/* -c: compare this rank's result of iteration i with the host computation */
static void verify(int c, int w, size_t size, int i, struct bufs *b)
{
    const size_t cnt = size / sizeof(float);
    size_t bytes = span(c, size, 1);
    const char *got = b->hrecv;
    if (c == C_BCAST && rank == 0) return; /* the root's buffer is its input */
    if (c == C_REDUCE && rank != 0) return; /* the result is the root's alone */
    if (on_device(w)) {
        cudaMemcpy(b->scratch, b->drecv, bytes, cudaMemcpyDeviceToHost);
        got = b->scratch;
    }
    switch (c) {
    case C_ALLREDUCE:
    case C_REDUCE_SCATTER_BLOCK:
    case C_REDUCE: {
        /* this rank's block of the sum: Reduce_scatter_block's starts at rank * cnt */
        const size_t at = c == C_REDUCE_SCATTER_BLOCK ? (size_t)rank * cnt : 0;
        const float *f = (const float *)got;
        for (size_t j = 0; j < cnt; j++) {
            float want = 0;
            for (int r = 0; r < nranks; r++) want += ar_value(r, i, at + j);
            if (f[j] != want) {
                report(c, w, size, i, j, f[j], want);
                return;
            }
        }
        break;
    }
    case C_BCAST:
    case C_ALLTOALL:
    case C_ALLGATHER:
        for (int q = 0; q < (c == C_BCAST ? 1 : nranks); q++) {
            const unsigned char *g = (const unsigned char *)got + (size_t)q * size;
            const unsigned char *want = c == C_BCAST ? base + seed(i, 0, 0)
                                        : c == C_ALLGATHER ? base + seed(i, q, 0)
                                                           : base + seed(i, q, rank);
            if (memcmp(g, want, size)) {
                size_t off = 0;
                while (g[off] == want[off]) off++;
                report(c, w, size, i, (size_t)q * size + off, g[off], want[off]);
                return;
            }
        }
        break;
    }
}

static int counted;      /* the shim counts the calls NCCL ran (via-nccl) */
/* The timings' MPI_Reduce runs on a duplicate of MPI_COMM_WORLD, so that the timed calls'
 * communicator sees the timed calls alone: cudampi decides per communicator, in an agreement
 * among its ranks, whether a collective runs on NCCL, and asks less often on a communicator
 * whose last agreements found host buffers only (src/engine/agreement.rs). */
static MPI_Comm ctl = MPI_COMM_NULL;
static long long on_nccl; /* of the last measure()'s timed calls, those NCCL ran (device way) */
static int back_to_back; /* -B */
static int sync_device;  /* every rank has a usable device: -B ends with cudaDeviceSynchronize */

/* ITERS calls in a row after one barrier (-B), us per call on this rank */
static double measure_in_a_row(int c, int w, size_t size, int iters, int warmup, struct bufs *b)
{
    for (int i = 0; i < warmup; i++) one_call(c, w, size, b);
    if (sync_device) cudaDeviceSynchronize();
    MPI_Barrier(MPI_COMM_WORLD);
    long long n0 = counted ? shim_nccl_calls() : 0;
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) one_call(c, w, size, b);
    if (sync_device) cudaDeviceSynchronize();
    double t = (MPI_Wtime() - t0) * 1e6 / iters;
    on_nccl = counted ? shim_nccl_calls() - n0 : 0;
    return t;
}

/* time per call in microseconds, max over the ranks (valid on rank 0); on_nccl: how many of the
 * timed calls NCCL ran in cudampi (the warm-up ones are not counted) */
static double measure(int c, int w, size_t size, int iters, int warmup, int check, struct bufs *b)
{
    double sum = 0, avg, mx = 0;
    long long n0 = 0;
    if (nonblocking && w == W_DEVICE) {
        /* -n: a nonblocking start cannot ask the other ranks whether to run on NCCL, so cudampi
         * runs it as the communicator's last blocking collective agreed (src/engine/flight.rs),
         * and the timed communicator sees no other device collective: one untimed blocking
         * call of the same collective and size comes first, as in a program whose nonblocking
         * collectives follow a blocking one (without it they would always be staged) */
        nonblocking = 0;
        one_call(c, w, size, b);
        nonblocking = 1;
    }
    if (back_to_back && !check) {
        avg = measure_in_a_row(c, w, size, iters, warmup, b);
        MPI_Reduce(&avg, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, ctl);
        return mx;
    }
    for (int i = -warmup; i < iters; i++) {
        if (i == 0 && counted) n0 = shim_nccl_calls();
        if (check) {
            fill(c, w, size, i, b);
            poison(c, w, size, b);
            /* the poisoning cudaMemset runs on the legacy stream, NCCL on a non-blocking one */
            cudaDeviceSynchronize();
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        one_call(c, w, size, b);
        double t = MPI_Wtime() - t0;
        if (i >= 0) sum += t;
        if (check) verify(c, w, size, i, b);
    }
    on_nccl = counted ? shim_nccl_calls() - n0 : 0;
    avg = sum * 1e6 / iters;
    MPI_Reduce(&avg, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, ctl);
    return mx;
}

/* The JSON "environment" member (rank 0's CUDAMPI_*, NCCL_* and COLL_* variables: the engine
 * the device way ran on), with its trailing comma and newline. */
extern char **environ;
static void env_json(FILE *f)
{
    int first = 1;
    fprintf(f, "  \"environment\": {");
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "CUDAMPI_", 8) && strncmp(*e, "NCCL_", 5) && strncmp(*e, "COLL_", 5)) continue;
        char kv[512];
        snprintf(kv, sizeof kv, "%s", *e);
        clean(kv);
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = 0;
        fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ", kv, eq + 1);
        first = 0;
    }
    fprintf(f, "},\n");
}

static const char *pinned_kind(void);

/* What the JSON file holds (-o), gathered for write_json. */
struct json_ctx {
    const char *path;
    const struct machine *m;
    const char *shim;
    int iters, warmup, factor, rounds, check, force_dev, *want, nsz, *its;
    size_t minsz, maxsz, *sizes;
    double (*res)[C_N][W_N], (*via)[C_N];
    int (*wins)[C_N][2];
};

/* Writes the JSON file (rank 0) with the rows of the first `done` sizes; "complete" is false
 * while the run goes on (bench/coll rewrites the file after each size, so that a run stopped
 * by a time limit leaves what it measured), and check_errors then counts rank 0's alone. */
static void write_json(const struct json_ctx *J, int done, long errs, int complete)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.part", J->path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        return;
    }
    fprintf(f, "{\n  \"bench\": \"coll\",\n  \"unit\": \"us per call, mean over iterations, max over ranks\",\n");
    machine_json(f, J->m, J->shim, real_lib, nranks);
    fprintf(f, "  \"parameters\": {\"nranks\": %d, \"iterations\": %d, \"warmup\": %d, \"min_size\": %zu, "
               "\"max_size\": %zu, \"size_factor\": %d, \"rounds\": %d, \"bcast_root\": 0, \"reduce_root\": 0, \"check\": %s, "
               "\"force_device\": %s, \"placement\": \"%c %c\", \"nccl\": \"%s\", \"pinned\": \"%s\", \"timing\": \"%s\", \"nonblocking\": %s, \"collectives\": [",
            nranks, J->iters, J->warmup, J->minsz, J->maxsz, J->factor, J->rounds, J->check ? "true" : "false",
            J->force_dev ? "true" : "false", place[0], place[1], nccl.why, pinned_kind(),
            back_to_back && !J->check ? "back_to_back" : "alone", nonblocking ? "true" : "false");
    for (int c = 0, first = 1; c < C_N; c++)
        if (J->want[c]) {
            fprintf(f, "%s\"%s\"", first ? "" : ", ", coll_key[c]);
            first = 0;
        }
    fprintf(f, "]},\n");
    env_json(f);
    fprintf(f, "  \"complete\": %s,\n", complete ? "true" : "false");
    fprintf(f, "  \"check_errors\": %ld,\n  \"results\": [\n", errs);
    int nrow = 0, rows = 0;
    for (int c = 0; c < C_N; c++) rows += J->want[c] ? done : 0;
    for (int c = 0; c < C_N; c++) {
        if (!J->want[c]) continue;
        for (int i = 0; i < done; i++) {
            fprintf(f, "    {\"collective\": \"%s\", \"size\": %zu, \"iterations\": %d", coll_key[c], J->sizes[i],
                    J->its[i]);
            for (int w = 0; w < W_N; w++) {
                fprintf(f, ", \"%s\": ", way_key[w]);
                if (isnan(J->res[i][c][w]))
                    fprintf(f, "null");
                else
                    fprintf(f, "%.3f", J->res[i][c][w]);
            }
            if (J->rounds > 1 && J->wins[i][c][0] >= 0)
                fprintf(f, ", \"device_not_slower_than_pageable_rounds\": %d", J->wins[i][c][0]);
            if (J->rounds > 1 && J->wins[i][c][1] >= 0)
                fprintf(f, ", \"device_not_slower_than_pinned_rounds\": %d", J->wins[i][c][1]);
            if (!isnan(J->via[i][c])) fprintf(f, ", \"device_shim_nccl_share\": %.3f", J->via[i][c]);
            fprintf(f, "}%s\n", ++nrow < rows ? "," : "");
        }
    }
    fprintf(f, "  ]\n}\n");
    if (fclose(f) != 0 || rename(tmp, J->path) != 0) perror(J->path);
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: coll [-d cuda [D|H] [D|H] | -d host] [-m MIN:MAX] [-2] [-l allreduce,bcast,alltoall,allgather,reduce_scatter_block,reduce] "
                        "[-i ITERS] [-x WARMUP] [-r ROUNDS] [-B] [-n] [-c] [-f] [-o out.json]\n");
}

/* The pinned recipe's buffers: cudaMallocHost, or with COLL_PINNED=register (or
 * register-huge) anonymous memory pinned with cudaHostRegister, as cudampi's staging pool pins
 * it (register-huge asks for transparent huge pages first): to tell whether a gap between
 * device(shim) and manual-pin comes from the kind of pinned memory. */
static const char *pinned_kind(void)
{
    const char *k = getenv("COLL_PINNED");
    return k && *k ? k : "cudaMallocHost";
}

static int pinned_alloc(char **p, size_t bytes)
{
    const char *k = pinned_kind();
    if (strcmp(k, "cudaMallocHost") == 0)
        return cudaMallocHost((void **)p, bytes) == cudaSuccess;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
#ifdef MADV_HUGEPAGE
    if (strcmp(k, "register-huge") == 0)
        madvise(m, bytes, MADV_HUGEPAGE);
#endif
    if (cudaHostRegister(m, bytes, cudaHostRegisterPortable) != cudaSuccess) {
        munmap(m, bytes);
        return 0;
    }
    *p = m;
    return 1;
}

static void pinned_free(char *p, size_t bytes)
{
    if (!p)
        return;
    if (strcmp(pinned_kind(), "cudaMallocHost") == 0) {
        cudaFreeHost(p);
        return;
    }
    cudaHostUnregister(p);
    munmap(p, bytes);
}

int main(int argc, char **argv)
{
    size_t minsz = 8, maxsz = 64u << 20;
    int iters = 100, warmup = 10, rounds = 1, check = 0, force_dev = 0, factor = 4, want[C_N] = {1, 1, 1, 1, 1, 1};
    const char *out = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    int opt, bad = 0;
    while ((opt = getopt(argc, argv, "d:m:2l:i:x:r:Bncfo:h")) != -1) {
        switch (opt) {
        case 'd': bad |= !parse_placement(optarg, argc, argv, place); break;
        case 'm': {
            char *c = strchr(optarg, ':');
            if (c) {
                *c = 0;
                minsz = parse_size(optarg);
                maxsz = parse_size(c + 1);
            } else
                maxsz = parse_size(optarg);
            break;
        }
        case '2': factor = 2; break;
        case 'l': {
            char *save = NULL;
            for (int k = 0; k < C_N; k++) want[k] = 0;
            for (char *t = strtok_r(optarg, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int k = 0;
                while (k < C_N && strcmp(t, coll_key[k])) k++;
                if (k == C_N) bad = 1; else want[k] = 1;
            }
            break;
        }
        case 'i': iters = atoi(optarg); break;
        case 'x': warmup = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'B': back_to_back = 1; break;
        case 'n': nonblocking = 1; break;
        case 'c': check = 1; break;
        case 'f': force_dev = 1; break;
        case 'o': out = optarg; break;
        default:
            usage();
            MPI_Finalize();
            return opt == 'h' ? 0 : 2;
        }
    }
    if (minsz < 1) minsz = 1;
    if (bad || iters < 1 || warmup < 0 || rounds < 1 || rounds > 99 || maxsz < minsz || maxsz > (size_t)1 << 30) {
        usage();
        MPI_Finalize();
        return 2;
    }
    find_real();
    MPI_Comm_dup(MPI_COMM_WORLD, &ctl);
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    int shim = ver != NULL;
    *(void **)&shim_stats = dlsym(RTLD_DEFAULT, "cudampi_get_stats_sized");
    counted = shim && shim_nccl_calls() >= 0;

    struct machine m;
    machine_gather(&m, rank, nranks);
    int have_dev = m.have_dev;

    /* sizes */
    int nsz = 0;
    size_t sizes[80];
    for (size_t s = minsz; s <= maxsz && nsz < 79; s *= (size_t)factor) sizes[nsz++] = s;
    if (sizes[nsz - 1] != maxsz) sizes[nsz++] = maxsz;

    /* buffers: Alltoall, Allgather and Reduce_scatter_block need size * ranks, the others size */
    size_t bytes = maxsz * (size_t)(want[C_ALLTOALL] || want[C_ALLGATHER] || want[C_REDUCE_SCATTER_BLOCK] ? nranks : 1);
    struct bufs b;
    memset(&b, 0, sizeof b);
    int have_pinned = 0;
    b.hsend = malloc(bytes);
    b.hrecv = malloc(bytes);
    if (!b.hsend || !b.hrecv) {
        fprintf(stderr, "coll: rank %d: cannot allocate 2 x %zu bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(b.hsend, 1, bytes);
    memset(b.hrecv, 1, bytes);
    if (have_dev && (cudaMalloc((void **)&b.dsend, bytes) != cudaSuccess ||
                     cudaMalloc((void **)&b.drecv, bytes) != cudaSuccess))
        have_dev = 0;
    if (have_dev) {
        cudaMemset(b.dsend, 1, bytes);
        cudaMemset(b.drecv, 1, bytes);
        if (pinned_alloc(&b.psend, bytes) && pinned_alloc(&b.precv, bytes)) {
            memset(b.psend, 1, bytes);
            memset(b.precv, 1, bytes);
            have_pinned = 1;
        }
    }
    if (check) {
        make_base(maxsz);
        b.scratch = malloc(bytes);
    }
    /* every rank must run the same ways */
    int mine[2] = {have_dev, have_pinned}, lo[2];
    MPI_Allreduce(mine, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    have_dev = lo[0];
    have_pinned = lo[1];
    sync_device = have_dev;
    int dev_ok = (have_dev || (place[0] == 'H' && place[1] == 'H')) && (shim || force_dev);
    nccl_open(&m, rank, nranks);

    if (rank == 0) {
        machine_print(&m, "coll", shim ? ver() : NULL, real_lib);
        printf("# ranks: %d; iterations %d, warm-up %d (fewer above 64 KiB)%s\n", nranks, iters, warmup,
               check ? "; checking the data (-c)" : "");
        if (rounds > 1) printf("# each way's median over %d rounds, the ways in turn\n", rounds);
        printf("# manual-pin buffers: %s (COLL_PINNED)\n", pinned_kind());
        printf("# timing: %s\n", back_to_back && !check ? "the calls back to back after one barrier, then cudaDeviceSynchronize (-B)"
                                                        : "each call alone between barriers");
        printf("# calls: %s\n", nonblocking ? "nonblocking (MPI_I... then MPI_Wait at once, -n; device(shim) after one untimed "
                                               "blocking call, whose agreement cudampi's nonblocking ones follow; nccl unchanged)"
                                             : "blocking");
        printf("# device(shim) buffers: rank 0 %s, the others %s (-d); nccl: %s\n",
               place[0] == 'D' ? "device" : "host", place[1] == 'D' ? "device" : "host", nccl.why);
        printf("# environment:");
        int any = 0;
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, "CUDAMPI_", 8) || !strncmp(*e, "NCCL_", 5)) printf(" %s", *e), any = 1;
        printf("%s\n", any ? "" : " no CUDAMPI_* or NCCL_* variables");
        if (!have_dev) printf("# no usable CUDA device on every rank: device and manual columns skipped\n");
        if (have_dev && !dev_ok) printf("# device column skipped: the shim is not loaded (use -f to force)\n");
        fflush(stdout);
    }

    double (*res)[C_N][W_N] = calloc((size_t)nsz, sizeof *res);
    int (*wins)[C_N][2] = calloc((size_t)nsz, sizeof *wins); /* rounds device(shim) <= page, pin */
    double (*via)[C_N] = calloc((size_t)nsz, sizeof *via); /* share of rank 0's device calls on NCCL */
    int *its = calloc((size_t)nsz, sizeof *its);
    struct json_ctx J = {out, &m, shim ? ver() : NULL, iters, warmup, factor, rounds, check, force_dev, want, nsz, its,
                         minsz, maxsz, sizes, res, via, wins};
    for (int i = 0; i < nsz; i++) {
        size_t s = sizes[i];
        int it = iters, wu = warmup;
        if (s > 65536) {
            it = (int)((double)iters * 65536 / (double)s);
            wu = (int)((double)warmup * 65536 / (double)s);
            if (it < 4) it = 4;
            if (wu < 2) wu = 2;
        }
        its[i] = it;
        for (int c = 0; c < C_N; c++) {
            int run[W_N];
            for (int w = 0; w < W_N; w++) {
                res[i][c][w] = NAN;
                run[w] = want[c] && !(reduces(c) && s < sizeof(float)) && !(w == W_DEVICE && !dev_ok) &&
                         !((w == W_PAGEABLE || w == W_PINNED) && (!have_dev || (place[0] == 'H' && place[1] == 'H'))) &&
                         !(w == W_PINNED && !have_pinned) &&
                         !(w == W_NCCL && !nccl.on);
            }
            double t[100][W_N];
            long long dev_nccl = 0;
            via[i][c] = NAN;
            for (int r = 0; r < rounds; r++)
                for (int k = 0; k < W_N; k++) {
                    int w = (k + r) % W_N;
                    if (!run[w]) continue;
                    t[r][w] = measure(c, w, s, it, wu, check, &b);
                    if (w == W_DEVICE) dev_nccl += on_nccl;
                }
            if (run[W_DEVICE] && counted) via[i][c] = (double)dev_nccl / ((double)rounds * it);
            for (int w = 0; w < W_N; w++) {
                if (!run[w]) continue;
                double v[100];
                for (int r = 0; r < rounds; r++) v[r] = t[r][w];
                res[i][c][w] = median(v, rounds);
            }
            for (int k = 0; k < 2; k++) {
                int w = k ? W_PINNED : W_PAGEABLE;
                wins[i][c][k] = -1;
                if (!run[W_DEVICE] || !run[w]) continue;
                wins[i][c][k] = 0;
                for (int r = 0; r < rounds; r++) wins[i][c][k] += t[r][W_DEVICE] <= t[r][w];
            }
        }
        if (rank == 0 && out && i + 1 < nsz) write_json(&J, i + 1, check ? errors : 0, 0);
    }

    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (out) {
            write_json(&J, nsz, check ? total : 0, 1);
            printf("# wrote %s\n", out);
        }
        if (check) printf("# data check: %s (%ld bad results)\n", total ? "FAILED" : "passed", total);
        for (int c = 0; c < C_N; c++) {
            if (!want[c]) continue;
            printf("\n# %s: us per call, mean over the iterations, max over %d ranks%s\n", coll_title[c], nranks,
                   rounds > 1 ? ", median of the rounds" : "");
            printf("# %10s %6s", "bytes", "iters");
            for (int w = 0; w < W_N; w++) printf(" %13s", way_name[w]);
            if (rounds > 1) printf(" %9s %9s", "dev<page", "dev<pin");
            if (counted) printf(" %8s", "via-nccl");
            printf("\n");
            for (int i = 0; i < nsz; i++) {
                printf("  %10zu %6d", sizes[i], its[i]);
                for (int w = 0; w < W_N; w++)
                    if (isnan(res[i][c][w]))
                        printf(" %13s", "-");
                    else
                        printf(" %13.2f", res[i][c][w]);
                for (int k = 0; rounds > 1 && k < 2; k++)
                    if (wins[i][c][k] < 0)
                        printf(" %9s", "-");
                    else
                        printf(" %6d/%-2d", wins[i][c][k], rounds);
                if (counted) {
                    if (isnan(via[i][c]))
                        printf(" %8s", "-");
                    else
                        printf(" %7.0f%%", 100 * via[i][c]);
                }
                printf("\n");
            }
        }
        fflush(stdout);
    }
    free(res);
    free(wins);
    free(via);
    free(its);
    nccl_close();
    MPI_Comm_free(&ctl);
    free(m.all);
    free(b.hsend);
    free(b.hrecv);
    free(b.scratch);
    free(base);
    pinned_free(b.psend, bytes);
    pinned_free(b.precv, bytes);
    if (b.dsend) cudaFree(b.dsend);
    if (b.drecv) cudaFree(b.drecv);
    MPI_Finalize();
    return total ? 1 : 0;
}
