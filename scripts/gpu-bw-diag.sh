#!/usr/bin/env bash
# scripts/gpu-bw-diag.sh — bench/bw and bench/bw -b at large sizes through chosen builds of the
# shim and settings, with CUDAMPI_STATS, on 2 ranks with one GPU each: where the chunked path
# stands against host MPI, and how many chunks fell back to pageable memory. Each case is one
# argument, "LABEL|SHIM|VAR=VALUE VAR=VALUE ...":
#
#   scripts/gpu-bw-diag.sh "new|build/gpu-lib/libcudampi.so|CUDAMPI_PIPELINE=1" \
#                          "chunk 4M|build/gpu-lib/libcudampi.so|CUDAMPI_PIPELINE=1 CUDAMPI_PIPELINE_CHUNK=4M"
#
# Environment: BW_SIZES (default 4M:64M), BW_ITERS (bench/bw -i, default 2560: 40 iterations at
# 4 MiB, 10 at 16 MiB), BW_WAYS (default host,device), MPICC, MPIRUN (default the system
# Open MPI's), CUDA_HOME. Prints, per case, both tables' rows and each rank's fallback count.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
SIZES=${BW_SIZES:-4M:64M}
ITERS=${BW_ITERS:-2560}
WAYS=${BW_WAYS:-host,device}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/bw-diag.XXXXXX")
$MPICC -O2 -I"$CUDA/include" -o "$BIN/bw" "$ROOT/bench/bw.c" -L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -L"$CUDA/lib64/stubs" -lcudart -lcuda -ldl -lm || exit 1
for case in "$@"; do
    IFS='|' read -r label shim vars <<<"$case"
    case $shim in /*) ;; *) shim=$ROOT/$shim ;; esac
    args=(-x LD_PRELOAD="$shim" -x CUDAMPI_STATS=1 -x CUDAMPI_BENCH_NCCL=)
    for kv in $vars; do args+=(-x "$kv"); done
    for b in "" -b; do
        echo "== $label: bw ${b:-(one way)} $vars"
        env LD_PRELOAD= $MPIRUN "${args[@]}" -n 2 "$BIN/bw" $b -m "$SIZES" -W "$WAYS" -i "$ITERS" 2>&1 |
            grep -E '^ +[0-9]+ |pageable fallbacks|rror' | sed -E 's/stats: .*pinned pool high-water ([0-9]+) bytes \(holding [0-9]+\), ([0-9]+) pageable fallbacks.*/pool high-water \1, \2 pageable fallbacks/'
    done
done
rm -rf "$BIN"
