"""Seed 001 as written: rank 0 puts an array on its GPU and sends rank 1 a CUDA IPC handle to it
(a small pickled host object); rank 1 opens the handle and runs a kernel on rank 0's memory.
This needs no CUDA-aware MPI, so it runs the same with and without cudampi; numba_direct.py is
the direct way cudampi enables. Both ranks must be on one node.

    scripts/cudampi-run -n 2 python3 examples/python/numba_ipc.py
"""
import numpy as np
from mpi4py import MPI
from numba import cuda

from common import check, finish, local_rank


@cuda.jit()
def kernel(array_on_gpu):
    array_on_gpu[0] = 0.5  # FAST!


def main():
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    cuda.select_device(local_rank() % len(cuda.gpus))
    if rank == 0:
        input_array = np.zeros((100,), dtype=np.float64)
        gpu_input_array = cuda.to_device(input_array)
        comm.send(gpu_input_array.get_ipc_handle(), dest=1)
        comm.Barrier()  # rank 1 has written through the handle
        got = gpu_input_array.copy_to_host()
        want = input_array.copy()
        want[0] = 0.5
        check(np.array_equal(got, want), "rank 1's kernel did not write through the IPC handle: %s" % got[:3])
    elif rank == 1:
        handle = comm.recv(source=0)
        received_gpu_input_array = handle.open()  # FAST
        kernel[32, 32](received_gpu_input_array)
        cuda.synchronize()
        handle.close()
        comm.Barrier()
    else:
        comm.Barrier()
    finish("numba_ipc.py", "rank 1 wrote 0.5 into rank 0's GPU array through a CUDA IPC handle")


if __name__ == "__main__":
    main()
