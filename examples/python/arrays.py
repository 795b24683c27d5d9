"""GPU arrays straight into mpi4py under cudampi: CuPy arrays or PyTorch tensors through
Send/Recv, Isend/Irecv, Allreduce (also in place), Bcast and Alltoall, each result checked by
value against the same computation in NumPy. With "numpy" the same calls run on host arrays.

    scripts/cudampi-run -n 2 python3 examples/python/arrays.py cupy|torch|numpy

mpi4py hands MPI the device pointer of any object with __cuda_array_interface__; cudampi
stages it. No synchronisation is needed here: CuPy's and PyTorch's default stream is the legacy
default stream, on which cudampi's copies are ordered (see docs/python.md).
"""
import sys

import numpy as np
from mpi4py import MPI

from common import check, finish, local_rank

lib = sys.argv[1] if len(sys.argv) > 1 else "cupy"
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = 1 << 15  # elements per message and per Alltoall block
POISON = -7.0

if lib == "cupy":
    import cupy as xp

    xp.cuda.Device(local_rank() % xp.cuda.runtime.getDeviceCount()).use()
    to_gpu, to_host = xp.asarray, xp.asnumpy

    def poisoned(count):
        return xp.full(count, POISON, dtype=xp.float64)

elif lib == "torch":
    import torch

    torch.cuda.set_device(local_rank() % torch.cuda.device_count())

    def to_gpu(a):
        return torch.from_numpy(a).cuda()

    def to_host(t):
        return t.cpu().numpy()

    def poisoned(count):
        return torch.full((count,), POISON, dtype=torch.float64, device="cuda")

elif lib == "numpy":
    to_gpu, to_host = np.array, np.asarray

    def poisoned(count):
        return np.full(count, POISON)

else:
    sys.exit("arrays.py: the array library is cupy, torch or numpy, not %r" % lib)


def values(r, seed, count=n):
    """What rank r contributes in step `seed`: distinct per rank, step and element."""
    return np.arange(count, dtype=np.float64) * 0.5 + r * 1000.0 + seed


def same(got, want, what):
    got = to_host(got)
    return check(np.array_equal(got, want), "%s (%s): first difference at %s" % (
        what, lib, np.flatnonzero(got != want)[:1]))


right, left = (rank + 1) % size, (rank - 1) % size

# Send/Recv around a ring (even ranks send first)
out, into = to_gpu(values(rank, 1)), poisoned(n)
if rank % 2 == 0:
    comm.Send(out, dest=right, tag=1)
    comm.Recv(into, source=left, tag=1)
else:
    comm.Recv(into, source=left, tag=1)
    comm.Send(out, dest=right, tag=1)
same(into, values(left, 1), "Send/Recv")

# Isend/Irecv both ways, then Waitall
out, from_left, from_right = to_gpu(values(rank, 2)), poisoned(n), poisoned(n)
reqs = [comm.Irecv(from_left, source=left, tag=2), comm.Irecv(from_right, source=right, tag=3),
        comm.Isend(out, dest=right, tag=2), comm.Isend(out, dest=left, tag=3)]
MPI.Request.Waitall(reqs)
same(from_left, values(left, 2), "Irecv from the left")
same(from_right, values(right, 2), "Irecv from the right")

# Allreduce, then Allreduce in place
total = poisoned(n)
comm.Allreduce(to_gpu(values(rank, 3)), total, op=MPI.SUM)
same(total, sum(values(r, 3) for r in range(size)), "Allreduce")
inplace = to_gpu(values(rank, 4))
comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.MAX)
same(inplace, values(size - 1, 4), "Allreduce in place")

# Bcast from the last rank
buf = to_gpu(values(rank, 5)) if rank == size - 1 else poisoned(n)
comm.Bcast(buf, root=size - 1)
same(buf, values(size - 1, 5), "Bcast")

# Alltoall: block j of rank r goes to rank j
blocks = to_gpu(np.concatenate([values(rank, 6 + j) for j in range(size)]))
got = poisoned(n * size)
comm.Alltoall(blocks, got)
same(got, np.concatenate([values(r, 6 + rank) for r in range(size)]), "Alltoall")

finish("arrays.py %s" % lib, "%d ranks, Send/Recv, Isend/Irecv, Allreduce, Bcast, Alltoall on %s arrays of %d doubles"
       % (size, lib, n))
