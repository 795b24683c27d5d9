! cudampi-test: ranks=2,3 env=OMPI_MCA_osc=^ucx timeout=120 extra-src=tests/fortran/fhelp.c
! One-sided and MPI-IO calls on device buffers through the use mpi binding: the steps of rma_io.inc.
#define BINDING 2
#include "rma_io.inc"
