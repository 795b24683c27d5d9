"""mpi4py on device memory with no GPU array library: an object exposing
__cuda_array_interface__ over memory from cudaMalloc (through ctypes), so the same test runs on
the stand-in driver in CI and on a real GPU. Send/Recv, Allreduce, Bcast and Alltoall results
are compared with NumPy's; then a send from device memory freed since its last use must fail
with MPI_ERR_BUFFER (and a cudampi: line), not crash.

    mpirun -n 2 -x LD_PRELOAD=libcudampi.so python3 tests/python/device_cai.py
Environment: CUDART, the CUDA runtime library to load (default: libcudart.so, .13, .12).
"""
import ctypes
import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
from common import check, finish, local_rank  # noqa: E402


def load_cudart():
    names = [os.environ["CUDART"]] if os.environ.get("CUDART") else ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    sys.exit("device_cai.py: cannot load the CUDA runtime (%s); set CUDART" % ", ".join(names))


cudart = load_cudart()
H2D, D2H = 1, 2


class DeviceArray:
    """count doubles of device memory, as mpi4py sees a CuPy array."""

    def __init__(self, count):
        ptr = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(count * 8)) == 0, "cudaMalloc"
        self.ptr, self.count = ptr.value, count

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.count,), "typestr": "<f8", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}

    def put(self, a):
        a = np.ascontiguousarray(a, dtype=np.float64)
        assert cudart.cudaMemcpy(ctypes.c_void_p(self.ptr), ctypes.c_void_p(a.ctypes.data),
                                 ctypes.c_size_t(a.nbytes), H2D) == 0, "cudaMemcpy"
        return self

    def get(self):
        out = np.empty(self.count)
        assert cudart.cudaMemcpy(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(self.ptr),
                                 ctypes.c_size_t(out.nbytes), D2H) == 0, "cudaMemcpy"
        return out

    def free(self):
        cudart.cudaFree(ctypes.c_void_p(self.ptr))


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
ndev = ctypes.c_int(0)
if cudart.cudaGetDeviceCount(ctypes.byref(ndev)) == 0 and ndev.value > 0:
    cudart.cudaSetDevice(local_rank() % ndev.value)
n = 4096


def values(r, seed, count=n):
    return np.arange(count, dtype=np.float64) * 0.25 + r * 100.0 + seed


def device(a):
    return DeviceArray(len(a)).put(a)


def poisoned(count=n):
    return device(np.full(count, -5.0))


def same(arr, want, what):
    got = arr.get()
    return check(np.array_equal(got, want), "%s: first difference at %s" % (what, np.flatnonzero(got != want)[:1]))


right, left = (rank + 1) % size, (rank - 1) % size
into = poisoned()
comm.Sendrecv(device(values(rank, 1)), dest=right, recvbuf=into, source=left)
same(into, values(left, 1), "Sendrecv")

if size >= 2:
    into = poisoned()
    if rank == 0:
        comm.Send(device(values(0, 2)), dest=1, tag=7)
    elif rank == 1:
        comm.Recv(into, source=0, tag=7)
        same(into, values(0, 2), "Send/Recv")

total = poisoned()
comm.Allreduce(device(values(rank, 3)), total, op=MPI.SUM)
same(total, sum(values(r, 3) for r in range(size)), "Allreduce")

buf = device(values(rank, 4)) if rank == 0 else poisoned()
comm.Bcast(buf, root=0)
same(buf, values(0, 4), "Bcast")

got = poisoned(n * size)
comm.Alltoall(device(np.concatenate([values(rank, 10 + j) for j in range(size)])), got)
same(got, np.concatenate([values(r, 10 + rank) for r in range(size)]), "Alltoall")

# Device memory used, then freed, then passed again: a clear error through the communicator's
# error handler instead of a crash in MPI.
# (mpi4py passes no buffer at all for MPI_PROC_NULL, so the rank sends to itself.)
gone, back = device(values(rank, 20)), poisoned()
comm.Sendrecv(gone, dest=rank, recvbuf=back, source=rank)
same(back, values(rank, 20), "Sendrecv to itself")
gone.free()
comm.Set_errhandler(MPI.ERRORS_RETURN)
try:
    comm.Sendrecv(gone, dest=rank, recvbuf=back, source=rank)
    cls = MPI.SUCCESS
except MPI.Exception as e:
    cls = e.Get_error_class()
check(cls == MPI.ERR_BUFFER, "a send from freed device memory gave error class %d, not MPI_ERR_BUFFER" % cls)
comm.Set_errhandler(MPI.ERRORS_ARE_FATAL)

finish("device_cai.py", "%d ranks: Sendrecv, Send/Recv, Allreduce, Bcast, Alltoall on device memory; freed memory refused" % size)
