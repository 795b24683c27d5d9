#!/usr/bin/env bash
# bench/callgrind.sh — what cudampi adds to an MPI call on host buffers, in instructions: the
# steadier twin of bench/pingpong's nanoseconds. bench/overhead.c (MPI_Send, MPI_Irecv and
# MPI_Wait on a malloc'd 8-byte buffer with MPI_PROC_NULL, N times) runs as one MPI singleton
# under `valgrind --tool=callgrind`, with and without the shim, for two values of N; the
# difference of the totals divided by the difference of N is per loop, free of start-up costs.
#
#   bench/callgrind.sh [-o out.json]
#
# Environment: MPICC (default mpicc), SHIM (default target/release/libcudampi.so),
# FIXTURE_LIB (the stand-in driver's folder, when the machine has no CUDA driver: the shim then
# loads it as it would the real one).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=
[ "${1:-}" = -o ] && out=${2:?-o needs a file}
MPICC=${MPICC:-mpicc}
SHIM=${SHIM:-$ROOT/target/release/libcudampi.so}
command -v valgrind >/dev/null || { echo "callgrind: valgrind is not installed"; exit 1; }
[ -f "$SHIM" ] || { echo "callgrind: no shim at $SHIM"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$MPICC -O2 -o "$work/overhead" "$ROOT/bench/overhead.c"
lo=1000 hi=21000
# instructions PRELOAD N: the program's total instruction count
instructions() {
    LD_PRELOAD=$1 LD_LIBRARY_PATH=${FIXTURE_LIB:-${LD_LIBRARY_PATH:-}} valgrind --tool=callgrind \
        --callgrind-out-file="$work/cg.out" "$work/overhead" "$2" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
plain=$(( ($(instructions "" $hi) - $(instructions "" $lo)) ))
shim=$(( ($(instructions "$SHIM" $hi) - $(instructions "$SHIM" $lo)) ))
n=$((hi - lo))
awk -v p="$plain" -v s="$shim" -v n="$n" -v lib="$($MPICC -showme:version 2>/dev/null || $MPICC -v 2>&1 | head -1)" \
    -v out="$out" -v shimv="$(grep -a -o -m1 'cudampi [0-9][0-9.]*[0-9]' "$SHIM" | head -1)" 'BEGIN {
    printf "instructions per loop of MPI_Send + MPI_Irecv + MPI_Wait on a host buffer (callgrind, %d loops)\n", n
    printf "  plain MPI %.1f, under %s %.1f: +%.1f per loop, +%.1f per call\n", p / n, shimv, s / n, (s - p) / n, (s - p) / n / 3
    if (out != "") {
        printf "{\"bench\": \"callgrind\", \"loops\": %d, \"calls_per_loop\": 3, \"plain_per_loop\": %.1f, " \
               "\"shim_per_loop\": %.1f, \"added_per_call\": %.1f, \"shim\": \"%s\"}\n", n, p / n, s / n, (s - p) / n / 3, shimv > out
    }
}'
