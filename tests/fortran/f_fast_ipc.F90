! cudampi-test: ranks=2 without-shim=skip extra-src=tests/fortran/fhelp.c env=CUDAMPI_IPC=1,CUDAMPI_IPC_BYTES=0,CUDAMPI_IPC_SAME_GPU_BYTES=0,CUDAMPI_PIPELINE=0
! Device messages over CUDA IPC from a `use mpi` program, into device and host arrays.
#define BINDING 2
#include "fast.inc"
