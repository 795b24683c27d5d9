! cudampi-test: ranks=2,3 without-shim=crash link=yes nccl=yes extra-src=tests/fortran/fhelp.c
! Device buffers through the `use mpi_f08` binding: the steps of calls.inc.
#define BINDING 3
#include "calls.inc"
