#!/usr/bin/env bash
# scripts/gpu-latency.sh — where a small device message's time goes, on the GPU machine:
# bench/copy_paths (the driver's small copies and the ways to learn that one is done, single
# process), then bench/pingpong with rank 0's buffers on the device and rank 1's on the host
# (-d cuda D H), so that one GPU serves the whole measurement without two processes sharing
# it, once per case. Each case is "LABEL|SHIM|VAR=VALUE ...":
#
#   scripts/gpu-latency.sh "now|build/gpu-lib/libcudampi.so|" \
#                          "ordered|build/gpu-lib/libcudampi.so|CUDAMPI_ORDERED_RECV_BYTES=64K"
#
# Environment: PP_PLACE (default "D H"; "D D" on two GPUs), PP_ARGS (default -m 1:4k -S 8
# -i 2000 -x 200 -r 5), COLL_ARGS (when set, bench/coll runs too, with these options and the
# same placement, after each case's ping-pong), MPICC, MPIRUN (default the system Open MPI's),
# CUDA_HOME, OUT (the JSON and tables land there when set).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
PLACE=${PP_PLACE:-D H}
read -ra PPARGS <<<"${PP_ARGS:--m 1:4k -S 8 -i 2000 -x 200 -r 5}"
RES=${OUT:-$(mktemp -d)}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/latency.XXXXXX")
LIBS=(-L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -L"$CUDA/lib64/stubs" -lcudart -lcuda)
cc -O2 -I"$CUDA/include" -o "$BIN/copy_paths" "$ROOT/bench/copy_paths.c" "${LIBS[@]}" || exit 1
$MPICC -O2 -I"$CUDA/include" -o "$BIN/pingpong" "$ROOT/bench/pingpong.c" "${LIBS[@]}" -ldl -lm || exit 1
$MPICC -O2 -I"$CUDA/include" -o "$BIN/coll" "$ROOT/bench/coll.c" "${LIBS[@]}" -ldl -lm || exit 1
echo "== copy_paths"
"$BIN/copy_paths" -o "$RES/copy_paths.json" | tee "$RES/copy_paths.txt"
n=0
for case in "$@"; do
    IFS='|' read -r label shim vars <<<"$case"
    case $shim in /*) ;; *) shim=$ROOT/$shim ;; esac
    args=(-x LD_PRELOAD="$shim" -x CUDAMPI_BENCH_NCCL=)
    for kv in $vars; do args+=(-x "$kv"); done
    n=$((n + 1))
    echo "== $label: pingpong -d cuda $PLACE ${PPARGS[*]} $vars"
    # shellcheck disable=SC2086
    env LD_PRELOAD= $MPIRUN "${args[@]}" -n 2 "$BIN/pingpong" -d cuda $PLACE "${PPARGS[@]}" \
        -o "$RES/pingpong-$n.json" 2>&1 | tee "$RES/pingpong-$n.txt" | grep -vE '^#  *(overhead|host)'
    if [ -n "${COLL_ARGS:-}" ]; then
        echo "== $label: coll -d cuda $PLACE $COLL_ARGS $vars"
        # shellcheck disable=SC2086
        env LD_PRELOAD= $MPIRUN "${args[@]}" -n 2 "$BIN/coll" -d cuda $PLACE $COLL_ARGS \
            -o "$RES/coll-$n.json" 2>&1 | tee "$RES/coll-$n.txt"
    fi
done
rm -rf "$BIN"
