# cudampi-test: mpis=ompi4 timeout=900
# The packages, installed as a user installs them, used with nothing of the repository's build
# tree on any path: the wheel (pip wheel . through the repository's build backend, checked with
# auditwheel where it can be installed) into a fresh venv, then `python -m cudampi info`, the
# demo program (c_examples/seed000.c, device buffers of the stand-in driver) and mpi4py on
# device memory (tests/python/device_cai.py, mpi4py and NumPy installed into the venv) through
# the venv's cudampi-run; the Debian package (packaging/deb/build.sh) with dpkg -i, the demo
# through /usr/bin/cudampi-run and linked with pkg-config's -lcudampi, then dpkg -r. Run on one
# MPI (Open MPI 4.1 from Debian): the packages do not depend on it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
failed=0
fail() { echo "   -> FAILED: $*"; failed=1; }
# A clean environment: the system's PATH and the stand-in driver, nothing of the repository.
clean() { env -i HOME="$HOME" PATH="$1:/usr/local/bin:/usr/bin:/bin" LD_LIBRARY_PATH="$FIXTURE_LIB" "${@:2}"; }

echo "== the wheel"
dist=$SCRATCH/dist
# The backend packages the library the harness runs (cargo built it already; without
# CUDAMPI_PREBUILT_LIB it runs cargo build itself).
CUDAMPI_PREBUILT_LIB=$SHIM python3 -m pip wheel -q --no-deps --no-build-isolation -w "$dist" . || { echo "pip wheel failed"; exit 1; }
wheel=$(ls "$dist"/cudampi-*.whl)
echo "   $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"
tag=$(basename "$wheel" .whl | sed 's/.*-py3-none-//')
tools=$repo/build/py-tools
if ! PYTHONPATH=$tools python3 -c 'import auditwheel' 2>/dev/null; then
    exec 9>"$repo/build/py-tools.lock"
    flock 9
    PYTHONPATH=$tools python3 -c 'import auditwheel' 2>/dev/null ||
        python3 -m pip install -q --disable-pip-version-check --target "$tools" auditwheel >/dev/null 2>&1
fi
if PYTHONPATH=$tools python3 -c 'import auditwheel' 2>/dev/null; then
    shown=$(PYTHONPATH=$tools python3 -m auditwheel show "$wheel" 2>&1)
    echo "$shown" | sed -n '1,4p' | sed 's/^/   /'
    grep -q "\"$tag\"" <<<"$shown" || fail "auditwheel does not find the wheel consistent with its tag $tag"
else
    echo "   auditwheel could not be installed here: the tag ($tag) is not checked"
fi

venv=$SCRATCH/venv
python3 -m venv --without-pip "$venv" || { echo "python3 -m venv failed"; exit 1; }
python3 -m pip --python "$venv/bin/python" install -q --disable-pip-version-check --no-deps --no-index "$wheel" || fail "pip install of the wheel"
# mpi4py and NumPy from PyPI (binary wheels), into the same venv
mpi4py=yes
python3 -m pip --python "$venv/bin/python" install -q --disable-pip-version-check --only-binary=:all: 'mpi4py>=4.1' numpy ||
    { echo "   cannot install mpi4py and numpy into the venv: the mpi4py run is left out"; mpi4py=no; }

out=$(clean "$venv/bin" python -m cudampi info 2>&1)
echo "$out" | sed 's/^/   /'
grep -q "^cudampi  *cudampi [0-9]" <<<"$out" || fail "python -m cudampi info: no version"
grep -q "^library  *$venv/" <<<"$out" || fail "python -m cudampi info: the library is not the venv's"
grep -q "^CUDA  *yes" <<<"$out" || fail "python -m cudampi info: the stand-in driver was not found"
clean "$venv/bin" python -c 'import cudampi, os, sys; p = cudampi.library_path(); sys.exit(0 if os.path.isfile(p) and p.startswith(sys.prefix) and os.path.isfile(os.path.join(cudampi.include_path(), "cudampi.h")) else 1)' ||
    fail "cudampi.library_path()/include_path() do not point into the venv"

demo=$SCRATCH/seed000
$MPICC -O2 -o "$demo" c_examples/seed000.c -I"$FIXTURE_INC" -L"$FIXTURE_LIB" -Wl,-rpath,"$FIXTURE_LIB" -lcudart -lcuda || { echo "cannot build the demo"; exit 1; }
mpi_bin=$(dirname "$(command -v "${MPIRUN%% *}")")
# Open MPI's mpirun forwards only what -x names (cudampi-run adds LD_PRELOAD and CUDAMPI_*)
fwd=$MPIRUN
[ "$MPI_FAMILY" = openmpi ] && fwd="$MPIRUN -x LD_LIBRARY_PATH -x MPI4PY_LIBMPI"
run() { # run NAME PATH-FIRST CMD...: one run in the clean environment, expected to pass
    local name=$1 first=$2 rc
    shift 2
    echo "== $name"
    clean "$first:$mpi_bin" MPIRUN="$fwd" MPI4PY_LIBMPI="$MPI_LIBDIR/libmpi.so.40" timeout 120 "$@" >"$SCRATCH/run.log" 2>&1
    rc=$?
    tail -n 4 "$SCRATCH/run.log" | sed 's/^/   /'
    [ $rc = 0 ] || fail "$name (exit status $rc)"
}
run "demo through the wheel's cudampi-run" "$venv/bin" cudampi-run -n 2 "$demo"
[ $mpi4py = yes ] && run "mpi4py on device memory through the wheel's cudampi-run" "$venv/bin" cudampi-run -n 2 python "$repo/tests/python/device_cai.py"

echo "== the Debian package"
deb=$(packaging/deb/build.sh "$dist") || { echo "packaging/deb/build.sh failed"; exit 1; }
echo "   $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"
dpkg-deb -f "$deb" Depends Recommends | sed 's/^/   /'
dpkg-deb -f "$deb" Depends | grep -q 'mpi' && fail "the package requires an MPI"
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
    echo "   not root: dpkg -i is not tried"
elif dpkg-query -W cudampi >/dev/null 2>&1; then
    echo "   a cudampi package is installed already: left alone, dpkg -i not tried"
else
    trap 'dpkg -r cudampi >/dev/null 2>&1' EXIT
    trap 'exit 1' INT TERM # through the EXIT trap: the package does not outlive the test
    dpkg -i "$deb" >/dev/null || fail "dpkg -i"
    multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    [ -f "/usr/lib/$multi/libcudampi.so.0" ] || fail "no /usr/lib/$multi/libcudampi.so.0"
    flags=$(clean /usr/bin pkg-config --cflags --libs cudampi) || fail "pkg-config cudampi"
    echo "   pkg-config: $flags"
    run "demo through /usr/bin/cudampi-run" /usr/bin cudampi-run -n 2 "$demo"
    # shellcheck disable=SC2086
    $MPICC -O2 -o "$SCRATCH/seed000.link" c_examples/seed000.c -I"$FIXTURE_INC" $flags -L"$FIXTURE_LIB" -Wl,-rpath,"$FIXTURE_LIB" -lcudart -lcuda ||
        fail "cannot link the demo with pkg-config's flags"
    # shellcheck disable=SC2086
    run "demo linked with -lcudampi from the package" /usr/bin $fwd -n 2 "$SCRATCH/seed000.link"
    dpkg -r cudampi >/dev/null || fail "dpkg -r"
    trap - EXIT INT TERM
    [ ! -e "/usr/lib/$multi/libcudampi.so.0" ] || fail "dpkg -r left the library"
fi
exit $failed
