// cudampi-test: ranks=2 without-shim=crash env=CUDAMPI_ORDERED_RECV_BYTES=0,FAKECUDA_DEVICES=1 nodes=no
/* small_writes on a node with one GPU that both ranks share: there a copy to the device of up
 * to 16 KiB waits for the GPU to switch from the other process, so receives of up to 32 writes
 * (256 bytes of whole 4-byte words) are written by the stream instead. The test fails when such
 * a receive is copied, or when one needing more writes is not. The fast paths stay on: their
 * handshake tells a rank that another runs on its node; every message here is below their
 * thresholds. */
#include "small_writes.c"
