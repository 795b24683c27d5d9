// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx env=CUDAMPI_RMA_RING=0 env=CUDAMPI_IPC=0 nodes=no timeout=120
/* The public-copy path that CUDAMPI_RMA_RING=0 keeps for windows over device memory (with IPC
 * off, no window is mapped either): rma_device's runs, every RMA call in every synchronisation
 * mode, must leave the bytes the host windows leave, and a created device window reports
 * MPI_WIN_SEPARATE. */
#include "rma_device.c"
