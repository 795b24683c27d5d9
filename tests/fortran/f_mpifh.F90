! cudampi-test: ranks=2,3 without-shim=crash link=yes nccl=yes extra-src=tests/fortran/fhelp.c
! Device buffers through the mpif.h binding: the steps of calls.inc.
#define BINDING 1
#include "calls.inc"
