"""Seed 001 the direct way: under cudampi, mpi4py sends a Numba device array itself
(comm.Send(device_array, dest=1)), with no IPC handle and no copy in the program. Rank 1
receives into its own device array, runs the seed's kernel on it and sends it back.

    scripts/cudampi-run -n 2 python3 examples/python/numba_direct.py
"""
import numpy as np
from mpi4py import MPI
from numba import cuda

from common import check, finish, local_rank


@cuda.jit()
def kernel(array_on_gpu):
    array_on_gpu[0] = 0.5


def main():
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    cuda.select_device(local_rank() % len(cuda.gpus))
    n = 100
    data = np.arange(n, dtype=np.float64) + 1.0
    if rank == 0:
        device_array = cuda.to_device(data)
        comm.Send(device_array, dest=1)
        back = cuda.to_device(np.full(n, -1.0))
        comm.Recv(back, source=1)
        want = data.copy()
        want[0] = 0.5
        check(np.array_equal(back.copy_to_host(), want), "rank 1's array came back wrong")
    elif rank == 1:
        received = cuda.to_device(np.full(n, -1.0))  # poisoned
        comm.Recv(received, source=0)
        check(np.array_equal(received.copy_to_host(), data), "rank 1 received the wrong array")
        kernel[32, 32](received)
        comm.Send(received, dest=0)  # the kernel ran on the legacy default stream: ordered
    finish("numba_direct.py", "a Numba device array sent, changed by a kernel on rank 1, and sent back")


if __name__ == "__main__":
    main()
