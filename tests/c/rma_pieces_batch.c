// cudampi-test: ranks=2 env=OMPI_MCA_osc=^ucx env=CUDAMPI_IPC=0 env=CUDAMPI_RMA_RING=64K env=CUDAMPI_RMA_BATCH=2 timeout=120 forced=no
/* rma_pieces with the pieces of a put written two at a time before one flush of the library's
 * window (CUDAMPI_RMA_BATCH=2): the same bytes as the same run on host windows and buffers. */
#include "rma_pieces.c"
