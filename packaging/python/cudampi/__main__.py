"""python -m cudampi info: the library's version, where its files are, the MPI that cudampi-run
would start (and that the ranks would load), and whether a CUDA driver and NCCL are found."""
import ctypes
import os
import shutil
import subprocess
import sys

from . import include_path, library_path, run_script


def _library():
    try:
        lib = ctypes.CDLL(library_path())
        lib.cudampi_version.restype = ctypes.c_char_p
        return lib.cudampi_version().decode(), None
    except (OSError, AttributeError) as e:
        return None, str(e)


def _mpi():
    run = (os.environ.get("MPIRUN") or "mpirun").split()
    exe = shutil.which(run[0])
    if not exe:
        return "none: %s is not on PATH (set MPIRUN, or put the MPI's bin on PATH)" % run[0]
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20, env=dict(os.environ, LD_PRELOAD=""))
        first = next((l.strip() for l in (out.stdout + out.stderr).splitlines() if l.strip()), "?")
    except (OSError, subprocess.SubprocessError) as e:
        first = "did not answer --version (%s)" % e
    return "%s (%s)" % (first, exe)


def _cuda():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no: libcuda.so.1 is not on the loader's path (no GPU driver): device buffers cannot exist"
    v = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(v)) != 0:
        return "libcuda.so.1 loads, but cuDriverGetVersion failed"
    return "yes: driver API %d.%d" % (v.value // 1000, v.value % 1000 // 10)


def _nccl():
    candidates = [os.environ.get("CUDAMPI_NCCL_LIB")]
    try:
        import nvidia.nccl  # the NVIDIA wheels' copy, as PyTorch brings it

        candidates += [os.path.join(p, "lib", "libnccl.so.2") for p in nvidia.nccl.__path__]
    except ImportError:
        pass
    candidates.append("libnccl.so.2")
    for c in filter(None, candidates):
        try:
            nccl = ctypes.CDLL(c)
        except OSError:
            continue
        v = ctypes.c_int(0)
        got = nccl.ncclGetVersion(ctypes.byref(v)) == 0
        code = v.value
        ver = "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100) if got and code >= 10000 else "?"
        return "yes: NCCL %s (%s)%s" % (ver, c, "" if c == candidates[0] or c == "libnccl.so.2" else "; set CUDAMPI_NCCL_LIB to it for the ranks")
    return "no: collectives on device buffers are staged through host memory (CUDAMPI_NCCL_LIB names a libnccl.so.2)"


def info():
    version, why = _library()
    print("cudampi      %s" % (version or "cannot be loaded: %s" % why))
    print("library      %s" % library_path())
    print("headers      %s" % include_path())
    print("cudampi-run  %s" % (shutil.which("cudampi-run") or run_script()))
    print("MPI          %s" % _mpi())
    print("CUDA         %s" % _cuda())
    print("NCCL         %s" % _nccl())
    return 0 if version else 1


def main(argv):
    if argv[:1] == ["info"]:
        try:
            return info()
        except BrokenPipeError:
            # the reader (| head) has gone: quiet, as other command-line tools are
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    print("usage: python -m cudampi info", file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))
