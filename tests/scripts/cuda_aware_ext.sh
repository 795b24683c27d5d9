# cudampi-test: timeout=120
# The CUDA-awareness answer at compile time: `make install` into a scratch prefix, then
# tests/scripts/cuda_aware_program.c (which has `#error` unless MPIX_CUDA_AWARE_SUPPORT is 1
# in <mpi-ext.h>) must fail to build with the MPI's own flags alone, build with those of
# `pkg-config --cflags --libs cudampi` (cudampi's mpi-ext.h first on the include path, which
# includes the library's own where it has one), and run unchanged on 2 ranks: linked
# against cudampi, it is told yes by MPIX_Query_cuda_support(), MPIX_GPU_query_support() and
# the mpi_memory_alloc_kinds of MPI_INFO_ENV.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
prefix=$SCRATCH/prefix
src=tests/scripts/cuda_aware_program.c
make -s install PREFIX="$prefix" LIB="$SHIM" >"$SCRATCH/install.log" 2>&1 || { cat "$SCRATCH/install.log"; exit 1; }
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cflags=$(pkg-config --cflags cudampi) || exit 1
libs=$(pkg-config --libs cudampi) || exit 1
echo "pkg-config --cflags cudampi: $cflags"
case "$cflags" in
"-I$prefix/include/cudampi-ext "*) ;;
*) echo "FAILED: cudampi's mpi-ext.h directory is not first: $cflags"; exit 1 ;;
esac
if $MPICC -o "$SCRATCH/plain" "$src" >"$SCRATCH/plain.log" 2>&1; then
    echo "FAILED: the program built without cudampi's flags (the check must refuse it)"
    exit 1
fi
echo "without cudampi's flags the build is refused: $(grep -m1 -E 'error' "$SCRATCH/plain.log")"
# shellcheck disable=SC2086 # the flags are words
$MPICC $cflags -o "$SCRATCH/aware" "$src" $libs -Wl,-rpath,"$prefix/lib" || { echo "FAILED: build with pkg-config's flags"; exit 1; }
read -ra mpirun <<<"$MPIRUN"
out=$(timeout 90 "${mpirun[@]}" -n 2 "$SCRATCH/aware" 2>&1 </dev/null)
rc=$?
echo "$out"
if [ $rc != 0 ] || ! grep -q 'cuda-aware program: ok' <<<"$out"; then
    echo "FAILED: the program exited $rc"
    exit 1
fi
echo "cuda_aware_ext: ok"
