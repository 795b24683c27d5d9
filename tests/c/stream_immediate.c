// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_ENQUEUE=immediate timeout=120 nccl=yes
/* stream_enqueue.c with the enqueue calls made in the call (CUDAMPI_ENQUEUE=immediate, the
 * default): the stream is synchronised, then cudampi's own MPI_Send, MPI_Recv, MPI_Isend,
 * MPI_Irecv, MPI_Waitall and MPI_Allreduce do the work (MPIX_Allreduce_enqueue still runs on
 * NCCL on the stream in mode nccl). No progress thread: the program's MPI_Init is enough, no
 * MPI_THREAD_MULTIPLE. Same cases, same checks. */
#include "stream_enqueue.c"
