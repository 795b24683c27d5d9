// cudampi-test: ranks=2 without-shim=pass timeout=120
/* A host-only MPI-IO program: io_calls.c's host run alone (every family of MPI_File reads and
 * writes on host buffers, the file and the read buffers checked against the expected layout),
 * which must behave alike with and without cudampi. Without CUDA in the process. */
#define COMMON_NO_CUDA
#define IO_HOST_ONLY
#include "io_calls.c"
