/* bench/rma_batches.c -- the MPI library's own one-sided bandwidth (MPI_Put, MPI_Get on host
 * windows, no cudampi needed) by how many bytes are in flight before each MPI_Win_flush:
 * operations of PIECE bytes, PER of them before a flush, PIECE from 4 MiB to 64 MiB and PER 1,
 * 4 or 16, every operation to bytes of its own of a window of TOTAL bytes (1 GiB by default).
 * Rank 0 is the origin, rank 1 the target, waiting in MPI_Barrier, in a MPI_Win_lock_all epoch.
 *
 * It measures what cudampi's served device windows ride on: their owners' mailboxes take an
 * operation in pieces of a quarter of the ring (4 MiB of the default 16 MiB), each written and
 * flushed before the next, between pinned host buffers; bench/rma's host window, against which
 * they are compared, has its 16 operations of the size in flight before one flush. So each
 * pattern runs on plain host memory (malloc) and on pinned memory (cudaHostRegister of window
 * and origin, as the mailbox and the staging buffers are), where CUDA is there.
 *
 * Every round moves TOTAL bytes; the figure is the median over ROUNDS rounds after one more,
 * in GB/s (10^9 bytes per second).
 *
 * Build (real GPU):
 *   mpicc -O2 bench/rma_batches.c -o build/rma_batches -I/usr/local/cuda/include \
 *         -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -ldl -lm
 * Build (stand-in driver): as bench/rma.c.
 * Run (Open MPI whose UCX one-sided component cannot run: add --mca osc ^ucx):
 *   mpirun -np 2 build/rma_batches [-T TOTAL] [-r ROUNDS] [--json FILE | -o FILE]
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "machine.h"

enum { N_PIECE = 3, N_PER = 3, N_MEM = 2, N_OP = 2 };
static const size_t piece_bytes[N_PIECE] = {4u << 20, 16u << 20, 64u << 20};
static const int per_flush[N_PER] = {1, 4, 16};
static const char *mem_name[N_MEM] = {"malloc", "pinned"};
static const char *op_name[N_OP] = {"put", "get"};

static int rank;

/* TOTAL bytes of anonymous memory, touched, and pinned for `pin`; NULL where it cannot be. */
static char *memory(size_t n, int pin)
{
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    memset(p, rank + 1, n);
    if (pin && cudaHostRegister(p, n, cudaHostRegisterPortable) != cudaSuccess) {
        munmap(p, n);
        return NULL;
    }
    return p;
}

static void release(char *p, size_t n, int pin)
{
    if (!p) return;
    if (pin) cudaHostUnregister(p);
    munmap(p, n);
}

/* GB/s of one pattern, median of `rounds` (rank 0; 0 elsewhere). */
static double measure(MPI_Win win, char *origin, size_t total, int op, size_t piece, int per, int rounds)
{
    double *t = calloc((size_t)rounds, sizeof *t);
    int count = (int)piece;
    for (int r = -1; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0)
            for (size_t at = 0; at + piece <= total;) {
                for (int k = 0; k < per && at + piece <= total; k++, at += piece)
                    if (op)
                        MPI_Get(origin + at, count, MPI_BYTE, 1, (MPI_Aint)at, count, MPI_BYTE, win);
                    else
                        MPI_Put(origin + at, count, MPI_BYTE, 1, (MPI_Aint)at, count, MPI_BYTE, win);
                MPI_Win_flush(1, win);
            }
        if (r >= 0) t[r] = MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double med = median(t, rounds);
    free(t);
    return rank == 0 && med > 0 ? (double)(total / piece * piece) / med / 1e9 : 0;
}

int main(int argc, char **argv)
{
    size_t total = 1u << 30;
    int rounds = 5, nranks;
    const char *out = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int bad = nranks != 2;
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!v) bad = 1;
        else if (!strcmp(o, "-T")) total = parse_size(argv[++a]);
        else if (!strcmp(o, "-r")) rounds = atoi(argv[++a]);
        else if (!strcmp(o, "--json") || !strcmp(o, "-o")) out = argv[++a];
        else bad = 1;
    }
    if (bad || rounds < 1 || total < piece_bytes[N_PIECE - 1] || total > (size_t)1 << 31) {
        if (rank == 0) fprintf(stderr, "usage: rma_batches [-T TOTAL (64M..2G)] [-r ROUNDS] [--json FILE | -o FILE] (2 ranks)\n");
        MPI_Finalize();
        return 2;
    }
    const char *real_lib = "the MPI library";
    real_mpi_library(&real_lib);
    struct machine m;
    machine_gather(&m, rank, nranks);

    double res[N_MEM][N_OP][N_PIECE][N_PER];
    int have[N_MEM];
    for (int mem = 0; mem < N_MEM; mem++) {
        int pin = mem == 1;
        char *buf = memory(total, pin && m.have_dev);
        int ok = buf != NULL && (!pin || m.have_dev), all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        have[mem] = all;
        if (!all) {
            release(buf, total, pin && m.have_dev);
            continue;
        }
        MPI_Win win;
        MPI_Win_create(buf, rank == 1 ? (MPI_Aint)total : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_lock_all(0, win);
        for (int op = 0; op < N_OP; op++)
            for (int p = 0; p < N_PIECE; p++)
                for (int k = 0; k < N_PER; k++)
                    res[mem][op][p][k] = measure(win, buf, total, op, piece_bytes[p], per_flush[k], rounds);
        MPI_Win_unlock_all(win);
        MPI_Win_free(&win);
        release(buf, total, pin);
    }

    if (rank == 0) {
        machine_print(&m, "rma_batches", NULL, real_lib);
        printf("# host windows, %zu bytes a round, median of %d rounds: GB/s\n", total, rounds);
        printf("# %-6s %-3s %10s", "memory", "op", "piece");
        for (int k = 0; k < N_PER; k++) printf("  %3d per flush", per_flush[k]);
        printf("\n");
        for (int mem = 0; mem < N_MEM; mem++)
            for (int op = 0; op < N_OP && have[mem]; op++)
                for (int p = 0; p < N_PIECE; p++) {
                    printf("  %-6s %-3s %10zu", mem_name[mem], op_name[op], piece_bytes[p]);
                    for (int k = 0; k < N_PER; k++) printf("  %13.2f", res[mem][op][p][k]);
                    printf("\n");
                }
        if (out) {
            FILE *f = fopen(out, "w");
            if (!f) {
                perror(out);
            } else {
                fprintf(f, "{\n  \"bench\": \"rma_batches\",\n  \"unit\": \"GB/s (10^9 bytes per second), median of rounds\",\n");
                machine_json(f, &m, NULL, real_lib, nranks);
                fprintf(f, "  \"parameters\": {\"total\": %zu, \"rounds\": %d},\n  \"results\": [\n", total, rounds);
                int first = 1;
                for (int mem = 0; mem < N_MEM; mem++)
                    for (int op = 0; op < N_OP && have[mem]; op++)
                        for (int p = 0; p < N_PIECE; p++)
                            for (int k = 0; k < N_PER; k++) {
                                fprintf(f, "%s    {\"memory\": \"%s\", \"op\": \"%s\", \"piece\": %zu, \"per_flush\": %d, \"gbps\": %.3f}",
                                        first ? "" : ",\n", mem_name[mem], op_name[op], piece_bytes[p], per_flush[k], res[mem][op][p][k]);
                                first = 0;
                            }
                fprintf(f, "\n  ]\n}\n");
                fclose(f);
            }
        }
    }
    MPI_Finalize();
    return 0;
}
