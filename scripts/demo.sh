#!/usr/bin/env bash
# scripts/demo.sh — `make demo`: seed 000's program (c_examples/seed000.c, device buffers
# passed straight to MPI_Send/MPI_Recv) run with 2 ranks, first WITHOUT the shim (a
# non-CUDA-aware MPI crashes on the device pointer), then WITH LD_PRELOAD=libcudampi.so
# (the data arrives intact). Exit status 0 when the run with the shim succeeded.
#
# CUDA: the real GPU when nvidia-smi works and a CUDA toolkit is found (CUDA_HOME,
# /usr/local/cuda, or nvcc on the PATH); otherwise the stand-in driver of tests/fixture, whose
# "device" memory faults on any host access exactly like GPU memory.
# MPI: the system mpicc/mpirun when present, else build/mpi/<name>.env from tests/mpi/setup.sh
# (ompi4, mpich4, ompi5, mpich5 in that order). DEMO_MPI=<name> picks an env file explicitly.
# Environment: SHIM (default target/release/libcudampi.so), DEMO_BYTES (default 1048576),
# DEMO_TIMEOUT (seconds per run, default 60).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
SHIM=${SHIM:-target/release/libcudampi.so}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
BYTES=${DEMO_BYTES:-1048576}
TMO=${DEMO_TIMEOUT:-60}
WORK=$ROOT/build/demo
mkdir -p "$WORK"

say() { printf '\n== %s\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

# ---- CUDA: real GPU or the stand-in driver -----------------------------------------------------
CUDA=""
for c in "${CUDA_HOME:-}" /usr/local/cuda "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x/x)")")"; do
    [ -n "$c" ] && [ -f "$c/include/cuda_runtime.h" ] && { CUDA=$c; break; }
done
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && [ -n "$CUDA" ]; then
    MODE=gpu
    CUDA_LIB=$CUDA/lib64
    [ -d "$CUDA_LIB" ] || CUDA_LIB=$CUDA/lib
    CFLAGS=(-I"$CUDA/include")
    LIBS=(-L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" -lcudart)
    say "CUDA: real GPU — $(nvidia-smi -L | head -1); toolkit $CUDA"
else
    MODE=fixture
    FIX_INC=${FIXTURE_INC:-$ROOT/tests/fixture/include}
    FIX_LIB=${FIXTURE_LIB:-$ROOT/build/fixture/lib}
    case $FIX_LIB in /*) ;; *) FIX_LIB=$ROOT/$FIX_LIB ;; esac
    CFLAGS=(-I"$FIX_INC")
    LIBS=(-L"$FIX_LIB" -Wl,-rpath,"$FIX_LIB" -lcudart -lcuda)
    say "CUDA: NO GPU here — using the stand-in CUDA driver (tests/fixture, $FIX_LIB): its device"
    echo "   memory is mapped PROT_NONE, so host code that dereferences it crashes as on a real GPU"
fi

# ---- build what is needed (make demo already did; a direct call builds here) -----------------
if [ -z "${MAKELEVEL:-}" ]; then
    targets=()
    command -v cargo >/dev/null && targets+=(build)
    [ $MODE = fixture ] && targets+=(fixture)
    command -v mpicc >/dev/null && command -v mpirun >/dev/null || targets+=(mpis)
    if [ ${#targets[@]} -gt 0 ]; then
        say "make ${targets[*]}"
        make -s "${targets[@]}" || echo "demo: make ${targets[*]} failed; going on with what exists"
    fi
fi
[ -f "$SHIM" ] || die "$SHIM does not exist (cargo build --release, or make build)"

[ $MODE = gpu ] || [ -f "$FIX_LIB/libcuda.so.1" ] || die "no GPU here and no stand-in driver in $FIX_LIB (make fixture)"

# ---- MPI ----------------------------------------------------------------------------------------
MPICC="" MPIRUN=() FAMILY="" MPI_DESC=""
use_env() { # use_env NAME: take MPICC/MPIRUN/MPI_FAMILY from build/mpi/NAME.env
    local f=$ROOT/build/mpi/$1.env
    [ -f "$f" ] || return 1
    # shellcheck disable=SC1090
    . "$f"
    [ -x "$MPICC" ] || command -v "$MPICC" >/dev/null || return 1
    read -r -a MPIRUN <<<"$MPIRUN"
    FAMILY=$MPI_FAMILY
    MPI_DESC="$MPI_VERSION (build/mpi/$1.env)"
    for kv in ${MPI_RUN_ENV:-}; do export "${kv?}"; done
}
if [ -n "${DEMO_MPI:-}" ]; then
    use_env "$DEMO_MPI" || die "no usable build/mpi/$DEMO_MPI.env"
elif command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    MPICC=$(command -v mpicc)
    if mpirun --version 2>&1 | grep -qi "open mpi\|open-mpi\|openrte"; then
        FAMILY=openmpi
        MPIRUN=(mpirun --oversubscribe)
        [ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
    else
        FAMILY=mpich
        MPIRUN=(mpirun)
    fi
    MPI_DESC="system $(mpirun --version 2>&1 | grep -m1 -iE 'open mpi|version' | sed 's/^ *//')"
else
    for n in ompi4 mpich4 ompi5 mpich5; do use_env "$n" && break; done
    [ -n "$MPICC" ] || die "no MPI: neither mpicc/mpirun on the PATH nor build/mpi/*.env (make mpis)"
fi
say "MPI: $MPI_DESC"

# env_args VAR=VALUE...: the launcher arguments that give the ranks these variables
env_args() {
    local kv
    for kv in "$@"; do
        if [ "$FAMILY" = openmpi ]; then printf '%s\n' -x "$kv"; else printf '%s\n' -genv "${kv%%=*}" "${kv#*=}"; fi
    done
}

# ---- build seed000 --------------------------------------------------------------------------------
BIN=$WORK/seed000-$MODE
say "build: $MPICC c_examples/seed000.c ${CFLAGS[*]} ${LIBS[*]}"
"$MPICC" -O2 -o "$BIN" c_examples/seed000.c "${CFLAGS[@]}" "${LIBS[@]}" >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; die "cannot build c_examples/seed000.c"; }

sig_name() { kill -l "$1" 2>/dev/null || echo "?"; }

# ---- 1. without the shim ----------------------------------------------------------------------------
say "1. WITHOUT the shim: mpirun -np 2 seed000 $BYTES  (a non-CUDA-aware MPI is handed a device pointer)"
timeout --kill-after=5 "$TMO" "${MPIRUN[@]}" -np 2 "$BIN" "$BYTES" >"$WORK/noshim.log" 2>&1 </dev/null
rc=$?
grep -m3 -E '^seed000|[Ss]egmentation|signal [0-9]+|SIGSEGV|exited on signal|Abort|Fatal error|errno' \
    "$WORK/noshim.log" | cut -c1-160 | sed 's/^/   | /'
if [ $rc = 0 ]; then
    echo "   -> exit status 0: it did NOT crash (is this MPI CUDA-aware?)"
elif [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "   -> timed out after ${TMO}s"
else
    s=""
    [ $rc -gt 128 ] && s=" = signal $((rc - 128)) (SIG$(sig_name $((rc - 128))))"
    grep -q 'signal 11\|Segmentation' "$WORK/noshim.log" && [ -z "$s" ] && s=" (a rank died of SIGSEGV)"
    echo "   -> crashed as expected: exit status $rc$s   (full output: $WORK/noshim.log)"
fi

# ---- 2. with the shim -----------------------------------------------------------------------------------
mapfile -t PRE < <(env_args "LD_PRELOAD=$SHIM")
say "2. WITH the shim: mpirun -np 2 ${PRE[*]} seed000 $BYTES"
timeout --kill-after=5 "$TMO" "${MPIRUN[@]}" -np 2 "${PRE[@]}" "$BIN" "$BYTES" >"$WORK/shim.log" 2>&1 </dev/null
rc=$?
grep -v '^\s*$' "$WORK/shim.log" | tail -n 5 | sed 's/^/   | /'
if [ $rc = 0 ] && grep -q 'received .* correctly on device buffer' "$WORK/shim.log"; then
    echo "   -> OK: the device buffer arrived intact through $(basename "$SHIM") ($MODE)"
    exit 0
fi
echo "   -> FAILED: exit status $rc (full output: $WORK/shim.log)"
exit 1
