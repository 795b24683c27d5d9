// cudampi-test: ranks=2,3 without-shim=skip env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=1,CUDAMPI_PIPELINE_BYTES=0,CUDAMPI_PIPELINE_CHUNK=64K timeout=120
/* ipc_p2p's checks with device messages sent in chunks instead (CUDAMPI_PIPELINE=1, every
 * message from 1056 bytes on, 64 KiB chunks): the envelope and the chunks that follow it keep
 * MPI's order and wildcards, land in device and host buffers, truncate cleanly, and the sender
 * never waits for the receiver. */
#define CHUNKED 1
#include "ipc_p2p.c"
