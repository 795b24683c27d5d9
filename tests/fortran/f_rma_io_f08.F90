! cudampi-test: ranks=2,3 env=OMPI_MCA_osc=^ucx timeout=120 extra-src=tests/fortran/fhelp.c
! One-sided and MPI-IO calls on device buffers through the use mpi_f08 binding: the steps of rma_io.inc.
#define BINDING 3
#include "rma_io.inc"
