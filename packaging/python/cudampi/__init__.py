"""cudampi: makes any MPI CUDA-aware. This package carries the library (libcudampi.so), its
headers and cudampi-run; preload the library under an MPI program, or start the program with
`cudampi-run -n 2 python3 prog.py`, as the project's README says."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path():
    """The path of libcudampi.so, for LD_PRELOAD or -L."""
    return os.path.join(_HERE, "lib", "libcudampi.so")


def include_path():
    """The folder of cudampi.h; cudampi-ext/ in it holds the mpi-ext.h for MPIs without one."""
    return os.path.join(_HERE, "include")


def run_script():
    """The path of the cudampi-run script this package carries."""
    return os.path.join(_HERE, "bin", "cudampi-run")


def run_main():
    """The cudampi-run console script: the package's cudampi-run, which finds the library
    beside it, with the same arguments and environment."""
    script = run_script()
    os.execv("/bin/bash", ["bash", script] + sys.argv[1:])
