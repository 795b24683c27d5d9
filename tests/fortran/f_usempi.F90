! cudampi-test: ranks=2,3 without-shim=crash link=yes nccl=yes extra-src=tests/fortran/fhelp.c
! Device buffers through the `use mpi` binding: the steps of calls.inc.
#define BINDING 2
#include "calls.inc"
