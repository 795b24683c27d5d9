# cudampi-test: timeout=400
# mpi4py under cudampi, started by scripts/cudampi-run: examples/python/arrays.py on NumPy
# arrays, and tests/python/device_cai.py on device memory of the stand-in driver, which must
# crash without cudampi and pass with it; 2 and 3 ranks. mpi4py and NumPy are installed from
# PyPI into build/py (binary wheels, for the python3 the ranks run). Exit 77: skipped (no
# mpi4py module for this MPI's ABI, or no way to install it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
py=$PWD/build/py
if ! PYTHONPATH=$py python3 -c 'import mpi4py, numpy' 2>/dev/null; then
    mkdir -p build
    exec 9>build/py.lock # one install at a time
    flock 9
    PYTHONPATH=$py python3 -c 'import mpi4py, numpy' 2>/dev/null ||
        python3 -m pip install -q --disable-pip-version-check --only-binary=:all: --target "$py" 'mpi4py>=4.1' numpy ||
        { echo "python: cannot install mpi4py and numpy: skipped"; exit 77; }
fi
# mpi4py's wheel holds one extension per MPI ABI and loads the one for the library that
# MPI4PY_LIBMPI names.
ld=$FIXTURE_LIB
case $MPI_FAMILY in
openmpi) libmpi=$MPI_LIBDIR/libmpi.so.40 ;;
*)
    if [ "$MPI_NAME" = mpich5abi ]; then echo "python: mpi4py has no module for the MPI-5 ABI: skipped"; exit 77; fi
    libmpi=$MPI_LIBDIR/libmpi.so.12
    if [ ! -e "$libmpi" ]; then
        # Debian calls MPICH's library libmpich.so.12; mpi4py's module asks for libmpi.so.12
        mkdir -p "$SCRATCH/lib"
        ln -sf "$MPI_LIBDIR/libmpich.so.12" "$SCRATCH/lib/libmpi.so.12"
        libmpi=$SCRATCH/lib/libmpi.so.12 ld=$ld:$SCRATCH/lib
    fi
    ;;
esac
export PYTHONPATH=$py MPI4PY_LIBMPI=$libmpi LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ "$MPI_FAMILY" = openmpi ] && MPIRUN="$MPIRUN -x PYTHONPATH -x MPI4PY_LIBMPI -x LD_LIBRARY_PATH"
export MPIRUN CUDAMPI_LIB=$SHIM
failed=0
run() { # run EXPECT(pass|crash) NP SHIM(yes|no) SCRIPT ARGS...
    local expect=$1 np=$2 shim=$3 rc
    shift 3
    echo "== $* on $np ranks, ${shim/yes/with}${shim/no/without} cudampi (expect $expect)"
    if [ "$shim" = yes ]; then
        timeout 120 scripts/cudampi-run -n "$np" python3 "$@" 2>&1 | tail -n 8
    else
        # shellcheck disable=SC2086
        timeout 120 env -u LD_PRELOAD $MPIRUN -n "$np" python3 "$@" 2>&1 | tail -n 3
    fi
    rc=${PIPESTATUS[0]}
    if { [ "$expect" = pass ] && [ $rc != 0 ]; } || { [ "$expect" = crash ] && { [ $rc = 0 ] || [ $rc = 124 ]; }; }; then
        echo "   -> FAILED (exit status $rc)"
        failed=1
    fi
}
run pass 2 yes examples/python/arrays.py numpy
run pass 3 yes examples/python/arrays.py numpy
run crash 2 no tests/python/device_cai.py
run pass 2 yes tests/python/device_cai.py
run pass 3 yes tests/python/device_cai.py
exit $failed
