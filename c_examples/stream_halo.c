// cudampi-test: ranks=2,4 link=only include=include/cudampi-ext nccl=yes nccl-ranks=2
/* A halo exchange in stream order, with MPICH's stream-ordered calls, which cudampi serves on
 * every MPI it supports (Open MPI included, which has none of them).
 *
 * Each rank of a ring owns a strip of a field in device memory, with a ghost cell on each side.
 * A step of a stencil code is: a kernel writes the strip's edges, the edges go to the
 * neighbours' ghosts, a kernel reads the ghosts. Here every one of those happens on one CUDA
 * stream, in order, with no cudaStreamSynchronize between them:
 *
 *     write the edges             (a kernel; here cudaMemsetAsync, a new value each step)
 *     MPIX_Irecv_enqueue x 2      (into the ghosts)
 *     MPIX_Isend_enqueue x 2      (from the edges)
 *     MPIX_Waitall_enqueue
 *     read the ghosts             (a kernel; here cudaMemcpyAsync into a history of ghosts)
 *
 * The host only queues work; the stream runs the exchange after the kernel that wrote the edges
 * and before the one that reads the ghosts. An edge is overwritten on the stream right after
 * its send is queued, so a send that read it late, or a ghost read before its receive landed,
 * shows in the history, which is checked once at the end. A last MPIX_Allreduce_enqueue sums
 * the strips' checksums on the stream.
 *
 * Build: mpicc $(pkg-config --cflags cudampi) stream_halo.c -o stream_halo \
 *            -Wl,--no-as-needed -lcudampi -lmpi -lcudart
 *        (pkg-config's flags put cudampi's mpi-ext.h first, which declares the MPIX calls where
 *        the MPI's mpi.h lacks them)
 * Run:   mpirun -np 4 ./stream_halo [halo bytes] [steps]     (default 8 KiB, 20 steps)
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

/* The byte rank r writes to its edge on side `side` (0 left, 1 right) at step s. */
static unsigned char edge_byte(int r, int side, int s) { return (unsigned char)(1 + (r * 37 + side * 101 + s * 13) % 251); }

int main(int argc, char **argv)
{
    int rank, nranks, devices = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t halo = argc > 1 ? (size_t)atol(argv[1]) : 8192;
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;

    /* One GPU per rank where there are enough; ranks share them otherwise. */
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    CUDA_CHECK(cudaSetDevice(rank % (devices > 0 ? devices : 1)));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    /* The stream as an MPIX stream, and a communicator whose operations run on it. */
    MPI_Info info;
    MPIX_Stream mpi_stream;
    MPI_Comm comm;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPIX_Info_set_hex(info, "value", &stream, sizeof stream);
    MPIX_Stream_create(info, &mpi_stream);
    MPI_Info_free(&info);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, mpi_stream, &comm);

    /* edges[0..1]: what this rank sends left and right; ghosts[0..1]: what it receives from the
     * left and the right neighbour; history: every step's ghosts, as the reading kernel saw them. */
    unsigned char *edges, *ghosts, *history;
    CUDA_CHECK(cudaMalloc((void **)&edges, 2 * halo));
    CUDA_CHECK(cudaMalloc((void **)&ghosts, 2 * halo));
    CUDA_CHECK(cudaMalloc((void **)&history, 2 * halo * (size_t)steps));
    /* On the stream, so that it comes before the receives enqueued there. */
    CUDA_CHECK(cudaMemsetAsync(ghosts, 0xee, 2 * halo, stream));

    for (int s = 0; s < steps; s++) {
        MPI_Request req[4];
        CUDA_CHECK(cudaMemsetAsync(edges, edge_byte(rank, 0, s), halo, stream));
        CUDA_CHECK(cudaMemsetAsync(edges + halo, edge_byte(rank, 1, s), halo, stream));
        /* Tag 0 travels rightwards, tag 1 leftwards: with two ranks both neighbours are one. */
        MPIX_Irecv_enqueue(ghosts, (int)halo, MPI_BYTE, left, 0, comm, &req[0]);
        MPIX_Irecv_enqueue(ghosts + halo, (int)halo, MPI_BYTE, right, 1, comm, &req[1]);
        MPIX_Isend_enqueue(edges + halo, (int)halo, MPI_BYTE, right, 0, comm, &req[2]);
        MPIX_Isend_enqueue(edges, (int)halo, MPI_BYTE, left, 1, comm, &req[3]);
        MPIX_Waitall_enqueue(4, req, MPI_STATUSES_IGNORE);
        CUDA_CHECK(cudaMemcpyAsync(history + 2 * halo * (size_t)s, ghosts, 2 * halo, cudaMemcpyDeviceToDevice, stream));
    }

    /* The sum over the ranks of each rank's count of steps whose ghosts were right, on the
     * stream too: every rank must see nranks * steps. */
    unsigned char *seen = malloc(2 * halo * (size_t)steps);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(seen, history, 2 * halo * (size_t)steps, cudaMemcpyDeviceToHost));
    int good_steps = 0, first_bad = -1;
    for (int s = 0; s < steps; s++) {
        const unsigned char *g = seen + 2 * halo * (size_t)s;
        int ok = 1;
        for (size_t i = 0; i < halo && ok; i++)
            ok = g[i] == edge_byte(left, 1, s) && g[halo + i] == edge_byte(right, 0, s);
        good_steps += ok;
        if (!ok && first_bad < 0)
            first_bad = s;
    }
    int *count;
    CUDA_CHECK(cudaMalloc((void **)&count, 2 * sizeof(int)));
    CUDA_CHECK(cudaMemcpyAsync(count, &good_steps, sizeof(int), cudaMemcpyHostToDevice, stream));
    MPIX_Allreduce_enqueue(count, count + 1, 1, MPI_INT, MPI_SUM, comm);
    int total = -1;
    CUDA_CHECK(cudaMemcpyAsync(&total, count + 1, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    int ok = total == nranks * steps;
    if (first_bad >= 0)
        fprintf(stderr, "rank %d: the ghosts of step %d are not the neighbours' edges\n", rank, first_bad);
    if (rank == 0)
        printf("%s: %d ranks, %zu-byte halos, %d steps in stream order: %d of %d exchanges right\n",
               ok ? "PASS" : "FAIL", nranks, halo, steps, total, nranks * steps);

    MPI_Comm_free(&comm);
    MPIX_Stream_free(&mpi_stream);
    cudaFree(count);
    cudaFree(history);
    cudaFree(ghosts);
    cudaFree(edges);
    cudaStreamDestroy(stream);
    free(seen);
    MPI_Finalize();
    return ok ? 0 : 1;
}
