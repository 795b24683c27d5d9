! cudampi-test: ranks=2 without-shim=skip extra-src=tests/fortran/fhelp.c env=CUDAMPI_IPC=0,CUDAMPI_PIPELINE=1,CUDAMPI_PIPELINE_BYTES=0,CUDAMPI_PIPELINE_CHUNK=64K
! Device messages in chunks from a `use mpi_f08` program, into device and host arrays.
#define BINDING 3
#include "fast.inc"
