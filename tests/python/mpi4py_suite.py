# Runs mpi4py's own test suite (its test/main.py) and writes, for each rank, what happened to
# every test into OUTDIR/rank<N>.txt, line by line as it happens (flushed), so that a run that
# is killed for hanging still shows which test it was in:
#     start <test id>
#     ok|FAIL|ERROR|xfail|xpass <test id> <seconds>
#     skip <test id> <seconds> <reason>
#       ! <exception>                              (after FAIL and ERROR)
#     counts run=N errors=N failures=N skipped=N     (last line, when the run ends)
# A test that has run for WATCHDOG seconds (env MPI4PY_SUITE_WATCHDOG, default 60; 0: none)
# is taken for a hang: the Python stack of every thread goes to stderr (faulthandler) and the
# rank exits with status 1, which ends the job (its record then ends with "start <test id>").
# unittest's own output (progress, tracebacks, "Ran N tests") goes to OUTDIR/rank<N>.log, so
# that what the job prints on stderr is what mpi4py and the libraries print outside the tests.
#
#   python3 mpi4py_suite.py OUTDIR TESTDIR [main.py options...]
import faulthandler
import os
import sys
import time
import traceback
import unittest

outdir, testdir = sys.argv[1], os.path.abspath(sys.argv[2])
sys.argv = [os.path.join(testdir, "main.py"), *sys.argv[3:]]
sys.path.insert(0, testdir)
sys.dont_write_bytecode = True
watchdog = float(os.environ.get("MPI4PY_SUITE_WATCHDOG", "60"))

import main  # noqa: E402  (mpi4py's test/main.py)


class Result(unittest.TextTestResult):
    out = None
    t0 = 0.0

    def _write(self, line):
        if self.out is None:
            from mpi4py import MPI

            rank = MPI.COMM_WORLD.Get_rank()
            self.out = open(os.path.join(outdir, f"rank{rank}.txt"), "w", encoding="utf-8")
        self.out.write(line + "\n")
        self.out.flush()

    def _end(self, what, test, why=""):
        faulthandler.cancel_dump_traceback_later()
        name = test.id() if hasattr(test, "id") else test
        self._write(f"{what} {name} {time.monotonic() - self.t0:.2f}{' ' + why if why else ''}")

    def startTest(self, test):
        self.t0 = time.monotonic()
        self._write(f"start {test.id()}")
        if watchdog > 0:
            faulthandler.dump_traceback_later(watchdog, repeat=False, file=sys.stderr, exit=True)
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._end("ok", test)

    def _why(self, err):
        text = "".join(traceback.format_exception_only(err[0], err[1])).strip()
        self._write("  ! " + text.replace("\n", "\n  ! "))
        frames = traceback.extract_tb(err[2])
        if frames:
            self._write(f"  @ {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}")

    def addError(self, test, err):
        super().addError(test, err)
        self._end("ERROR", test)
        self._why(err)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._end("FAIL", test)
        self._why(err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._end("skip", test, " ".join(str(reason).split()) or "-")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._end("xfail", test)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._end("xpass", test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failure = issubclass(err[0], test.failureException)
            self._write(f"{'FAIL' if failure else 'ERROR'} {subtest.id()} 0")
            self._why(err)

    def stopTestRun(self):
        super().stopTestRun()
        faulthandler.cancel_dump_traceback_later()
        self._write(
            f"counts run={self.testsRun} errors={len(self.errors)} "
            f"failures={len(self.failures)} skipped={len(self.skipped)}"
        )


def array_library_fixes():
    """Two faults of the GPU array libraries against mpi4py 4.1.2's test/arrayimpl.py, where no
    MPI call is involved, mended so that the CuPy and Numba runs test MPI (see docs/python.md):
    CuPy 14 under NumPy 2 refuses a Python -1 (alone or in a list) for an unsigned array (the
    NumPy arrays of arrayimpl cast first, the CuPy ones do not), and numba-cuda 0.68 calls
    numpy.row_stack, which NumPy 2.5 removed (it was vstack under another name)."""
    numpy = sys.modules.get("numpy")
    if "numba" in sys.modules and numpy is not None and not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack
    arrayimpl = sys.modules.get("arrayimpl")
    cupy_array = getattr(arrayimpl, "GPUArrayCuPy", None)
    if cupy_array is not None and numpy is not None:
        init = cupy_array.__init__

        def cast_then_init(self, arg, typecode, *args, **kwargs):
            scalar = isinstance(arg, (int, float, complex))
            if isinstance(arg, (list, tuple, range)):
                arg = numpy.asarray(arg).astype(typecode)
            init(self, 0 if scalar else arg, typecode, *args, **kwargs)
            if scalar:
                self.array.fill(numpy.asarray(arg).astype(typecode)[()])

        cupy_array.__init__ = cast_then_init


class Runner(unittest.TextTestRunner):
    resultclass = Result

    def __init__(self, *args, **kwargs):
        array_library_fixes()
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        kwargs["stream"] = open(os.path.join(outdir, f"rank{rank}.log"), "w", encoding="utf-8")
        super().__init__(*args, **kwargs)


main.main(module=None, testRunner=Runner)
