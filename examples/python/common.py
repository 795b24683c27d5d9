"""What every example here shares: the rank's GPU and the verdict.

Each example checks its results by value and ends with `finish`, which prints one line per
example on rank 0, "PASS name: ..." or "FAIL name: ...", and exits non-zero on failure.
"""
import sys

import numpy
from mpi4py import MPI

# numba-cuda releases that register an overload for numpy.row_stack fail to compile any kernel
# under NumPy 2.5, which removed that alias of vstack (seen on the GPU machine: numba-cuda with
# NumPy 2.5.2). Restoring the alias lets them start; nothing here uses it.
if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack

_failures = []


def local_rank(comm=MPI.COMM_WORLD):
    """The rank among the ranks on this node: choose the GPU with local_rank % ngpus."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    r = node.Get_rank()
    node.Free()
    return r


def check(ok, what):
    """Record a failed check (and say which) unless ok."""
    if not ok:
        _failures.append(what)
        print("FAIL rank %d: %s" % (MPI.COMM_WORLD.Get_rank(), what), file=sys.stderr, flush=True)
    return ok


def finish(name, summary="", comm=MPI.COMM_WORLD):
    """Gather the verdict of every rank; rank 0 prints it. Exits 1 on any failure."""
    failed = comm.allreduce(len(_failures), op=MPI.SUM)
    if comm.Get_rank() == 0:
        print("%s %s: %s" % ("FAIL" if failed else "PASS", name,
                             "%d failed checks" % failed if failed else summary), flush=True)
    if failed:
        sys.exit(1)
