// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_THREAD_MULTIPLE=1,CUDAMPI_ENQUEUE=immediate timeout=120 nccl=yes
/* stream_enqueue.c with the enqueue calls made in the call (CUDAMPI_ENQUEUE=immediate, the
 * default where another rank shares the GPU): the stream is synchronised, then cudampi's own
 * MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Waitall and MPI_Allreduce do the work. Same
 * cases, same checks. */
#include "stream_enqueue.c"
