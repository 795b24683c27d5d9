// cudampi-test: ranks=2 without-shim=skip env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=1,CUDAMPI_PIPELINE_BYTES=0,CUDAMPI_PIPELINE_CHUNK=64K timeout=120
/* ipc_probe's checks with device messages sent in chunks instead (CUDAMPI_PIPELINE=1, every
 * message from 1056 bytes on, 64 KiB chunks): probes report the true size, and every receive
 * form that follows gets the messages in MPI's order. */
#include "ipc_probe.c"
