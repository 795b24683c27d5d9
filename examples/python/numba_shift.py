"""Seed 003 made right: rank 0's random array is scattered over the ranks' GPUs, each rank
shifts its part by -0.5 with a kernel, and the parts are gathered back on rank 0 -- all in
device memory, with mpi4py's Scatter and Gather under cudampi. The seed's notebook called an
undefined kernel (`scale`) and printed the mean of the unshifted data (0.51); here the kernel is
`shift`, and rank 0 checks every element against NumPy's a - 0.5 and prints the mean (near 0).

    scripts/cudampi-run -n 4 python3 examples/python/numba_shift.py
"""
import numpy
import mpi4py.MPI as MPI
from numba import cuda

from common import check, finish, local_rank


@cuda.jit
def shift(a, v):
    """Shift all values in v by a."""
    i = cuda.grid(1)
    if i < v.shape[0]:
        v[i] += a


comm = MPI.COMM_WORLD
my_rank = comm.Get_rank()
number_of_ranks = comm.Get_size()
# several ranks on one node: each takes its own GPU (the seed's cuda.select_device advice)
cuda.select_device(local_rank() % len(cuda.gpus))

N = 1000
a_partial = cuda.to_device(numpy.full(N, -1.0))  # poisoned; Scatter overwrites it
if my_rank == 0:
    a_host = numpy.random.default_rng(2026).random(N * number_of_ranks)
    a = cuda.to_device(a_host)
else:
    a_host = None
    a = cuda.device_array(0)  # the send buffer matters on rank 0 only

comm.Scatter(a, a_partial, root=0)

block = 256
grid = N // block if N % block == 0 else N // block + 1
shift[grid, block](-0.5, a_partial)

comm.Gather(a_partial, a, root=0)

if my_rank == 0:
    result = a.copy_to_host()
    check(numpy.array_equal(result, a_host - 0.5), "gathered result differs from a - 0.5")
    print("The average of a is %.2f (before the shift %.2f)" % (numpy.mean(result), numpy.mean(a_host)))
finish("numba_shift.py", "%d ranks: Scatter, shift by -0.5 on each GPU, Gather; every element checked" % number_of_ranks)
