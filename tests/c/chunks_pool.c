// cudampi-test: ranks=2,3 without-shim=skip env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=1,CUDAMPI_PIPELINE_BYTES=0,CUDAMPI_PIPELINE_CHUNK=64K,CUDAMPI_POOL_BYTES=256K timeout=120
/* chunks_p2p with a pinned pool of four chunks: a message's chunks wait for pinned buffers that
 * earlier chunks give back, and when the receiver takes none (it sits in MPI_Barrier with its
 * MPI_Irecv pending) the rest of the message goes through pageable memory instead of waiting. */
#define CHUNKED 1
#include "ipc_p2p.c"
