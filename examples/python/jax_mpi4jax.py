"""Seed 004 on GPUs: mpi4jax hands MPI the device pointers of JAX arrays when
MPI4JAX_USE_CUDA_MPI=1, which crashes a non-CUDA-aware MPI and works under cudampi, with no copy
to the host in mpi4jax. The seed's advice holds: mpi4jax and mpi4py get communicators of their
own (comm_jax = comm.Clone()), so JAX's lazy execution cannot interleave their messages. Checked
by value: a send/receive of a JAX array next to an mpi4py send/receive of a NumPy array, then
mpi4jax.allreduce and mpi4jax.allgather. (Not mpi4jax.bcast: with MPI4JAX_USE_CUDA_MPI=1 its
non-root ranks std::memcpy between two device buffers in mpi4jax 0.9.1, which crashes on any
MPI, CUDA-aware or not.)

    MPI4JAX_USE_CUDA_MPI=1 scripts/cudampi-run -n 2 python3 examples/python/jax_mpi4jax.py
"""
import os

os.environ.setdefault("MPI4JAX_USE_CUDA_MPI", "1")
# every process sees every GPU of the node: no process may take most of each one's memory
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import mpi4jax  # noqa: E402
from common import check, finish, local_rank  # noqa: E402

comm = MPI.COMM_WORLD
comm_jax = comm.Clone()
rank, size = comm.Get_rank(), comm.Get_size()
gpus = jax.devices("gpu")
gpu = gpus[local_rank() % len(gpus)]

with jax.default_device(gpu):
    # the seed's example, with values to check: rank 0 sends, rank 1 receives, each library on
    # its own communicator
    arr_np = np.arange(100.0).reshape(10, 10) + 7 * rank
    arr_jax = jnp.arange(100.0).reshape(10, 10) + 1000 * (rank + 1)
    if rank == 0:
        mpi4jax.send(arr_jax, dest=1, comm=comm_jax)
        comm.Send(arr_np, dest=1)
    elif rank == 1:
        got_jax = mpi4jax.recv(jnp.zeros((10, 10)), source=0, comm=comm_jax)
        got_np = np.empty((10, 10))
        comm.Recv(got_np, source=0)
        check(np.array_equal(np.asarray(got_jax), np.arange(100.0).reshape(10, 10) + 1000),
              "mpi4jax.recv gave the wrong array")
        check(got_jax.devices() == {gpu}, "the received JAX array is not on the rank's GPU")
        check(np.array_equal(got_np, np.arange(100.0).reshape(10, 10)), "mpi4py's Recv gave the wrong array")

    # collectives of mpi4jax on device arrays
    x = jnp.full((1 << 16,), float(rank + 1))
    total = mpi4jax.allreduce(x, op=MPI.SUM, comm=comm_jax)
    check(np.all(np.asarray(total) == size * (size + 1) / 2), "mpi4jax.allreduce gave %s" % np.asarray(total)[:3])
    y = jnp.arange(1000.0) * (rank + 3)
    everyone = mpi4jax.allgather(y, comm=comm_jax)
    check(np.array_equal(np.asarray(everyone), np.stack([np.arange(1000.0) * (r + 3) for r in range(size)])),
          "mpi4jax.allgather gave the wrong array")

comm_jax.Free()
finish("jax_mpi4jax.py", "mpi4jax %s send/recv, allreduce, allgather of JAX GPU arrays with MPI4JAX_USE_CUDA_MPI=%s"
       % (mpi4jax.__version__, os.environ["MPI4JAX_USE_CUDA_MPI"]))
