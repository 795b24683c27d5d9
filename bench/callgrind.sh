#!/usr/bin/env bash
# bench/callgrind.sh — what cudampi adds to an MPI call on host buffers, in instructions: the
# steadier twin of bench/pingpong's nanoseconds. bench/overhead.c (MPI_Send, MPI_Irecv and
# MPI_Wait on a malloc'd 8-byte buffer with MPI_PROC_NULL, N times) runs as one MPI singleton
# under `valgrind --tool=callgrind`, with and without the shim, for two values of N; the
# difference of the totals divided by the difference of N is per loop, free of start-up costs.
# bench/overhead_f.F90 does the same through mpif.h, where MPIFORT can build it.
#
#   bench/callgrind.sh [-o out.json]
#
# Environment: MPICC (default mpicc), MPIFORT (default mpifort), SHIM (default target/release/libcudampi.so),
# FIXTURE_LIB (the stand-in driver's folder, when the machine has no CUDA driver: the shim then
# loads it as it would the real one).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=
[ "${1:-}" = -o ] && out=${2:?-o needs a file}
MPICC=${MPICC:-mpicc}
MPIFORT=${MPIFORT:-mpifort}
SHIM=${SHIM:-$ROOT/target/release/libcudampi.so}
command -v valgrind >/dev/null || { echo "callgrind: valgrind is not installed"; exit 1; }
[ -f "$SHIM" ] || { echo "callgrind: no shim at $SHIM"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$MPICC -O2 -o "$work/overhead" "$ROOT/bench/overhead.c"
lo=1000 hi=21000
# instructions PROGRAM PRELOAD N: the program's total instruction count
instructions() {
    LD_PRELOAD=$2 LD_LIBRARY_PATH=${FIXTURE_LIB:-${LD_LIBRARY_PATH:-}} valgrind --tool=callgrind \
        --callgrind-out-file="$work/cg.out" "$1" "$3" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
# per_loop PROGRAM PRELOAD: instructions per loop
per_loop() {
    echo $(( $(instructions "$1" "$2" $hi) - $(instructions "$1" "$2" $lo) ))
}
n=$((hi - lo))
shimv=$(grep -a -o -m1 'cudampi [0-9][0-9.]*[0-9]' "$SHIM" | head -1)
# report WHAT PLAIN SHIM: one line per program
report() {
    awk -v what="$1" -v p="$2" -v s="$3" -v n="$n" -v shimv="$shimv" 'BEGIN {
        printf "instructions per loop of MPI_Send + MPI_Irecv + MPI_Wait on a host buffer, %s (callgrind, %d loops)\n", what, n
        printf "  plain MPI %.1f, under %s %.1f: +%.1f per loop, +%.1f per call\n", p / n, shimv, s / n, (s - p) / n, (s - p) / n / 3
    }'
}
plain=$(per_loop "$work/overhead" "")
shim=$(per_loop "$work/overhead" "$SHIM")
report C "$plain" "$shim"
fortran=
if $MPIFORT -O2 -o "$work/overhead_f" "$ROOT/bench/overhead_f.F90" 2>/dev/null; then
    fplain=$(per_loop "$work/overhead_f" "")
    fshim=$(per_loop "$work/overhead_f" "$SHIM")
    report "Fortran (mpif.h)" "$fplain" "$fshim"
    fortran=$(awk -v p="$fplain" -v s="$fshim" -v n="$n" 'BEGIN {
        printf ", \"fortran_plain_per_loop\": %.1f, \"fortran_shim_per_loop\": %.1f, \"fortran_added_per_call\": %.1f", p / n, s / n, (s - p) / n / 3 }')
else
    echo "callgrind: $MPIFORT could not build bench/overhead_f.F90; Fortran skipped"
fi
if [ -n "$out" ]; then
    awk -v p="$plain" -v s="$shim" -v n="$n" -v shimv="$shimv" -v f="$fortran" 'BEGIN {
        printf "{\"bench\": \"callgrind\", \"loops\": %d, \"calls_per_loop\": 3, \"plain_per_loop\": %.1f, " \
               "\"shim_per_loop\": %.1f, \"added_per_call\": %.1f%s, \"shim\": \"%s\"}\n", n, p / n, s / n, (s - p) / n / 3, f, shimv
    }' > "$out"
fi
