// cudampi-test: ranks=2 without-shim=crash forced=no nodes=no env=OMPI_MCA_osc=^ucx timeout=180
/* multi_gpu.c at MPI_THREAD_FUNNELED: every call from the main thread, whose current device is
 * the first GPU, then the second. */
#define LEVEL MPI_THREAD_FUNNELED
#include "multi_gpu.c"
