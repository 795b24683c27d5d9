#!/usr/bin/env bash
# scripts/gpu-enqueue.sh — the stream-ordered calls on the GPU machine, in one call: the C tests
# named in ENQ_TESTS (default stream_enqueue, stream_immediate and stream_halo) through
# scripts/gpu-check.sh step 1 (its GPU_CHECK_PLACES and GPU_CHECK_MPIS apply; steps 1 and 5,
# the wheels' MPIs when carried), then bench/enqueue.cu with the system MPI, once per placement
# (one rank exchanging with itself, both ranks on GPU 0, and one GPU per rank where there are
# two) and mode. Prints the tables, then `N passed, N failed` and the benchmark's rows last.
#
# Environment: SHIM (default target/release/libcudampi.so), CUDA_HOME, MPICC, MPIRUN, OUT (the
# JSON, tables and gpu-check's summary land there when set), ENQ_ITERS (default 200),
# ENQ_MODES (default "default": CUDAMPI_ENQUEUE unset; also "ordered" or "immediate"),
# ENQ_ORDERED_ITERS (iterations of mode ordered on one GPU, default 20), ENQ_CASES (cases of
# stream_enqueue, e.g. "1 2 3 3b 4 5 6": each also runs alone, ENQ_CASE_TIMEOUT seconds at most,
# default 30, to find which one stalls).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CUDA=${CUDA_HOME:-/usr/local/cuda}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
SHIM=${SHIM:-target/release/libcudampi.so}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
RES=${OUT:-$(mktemp -d)}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/enqueue.XXXXXX")
passed=0
failed=0

tests=${ENQ_TESTS:-stream_enqueue stream_immediate stream_halo}
echo "== tests: $tests"
mkdir -p "$RES/check"
OUT=$RES/check GPU_CHECK_STEPS=${GPU_CHECK_STEPS:-1 5} GPU_CHECK_BENCH=0 GPU_CHECK_TESTS=$tests \
    SHIM=$SHIM scripts/gpu-check.sh >"$RES/check.txt" 2>&1
grep -E '^ *(PASS|FAIL|SKIP)' "$RES/check.txt" | tail -40
line=$(grep -Eo '[0-9]+ passed, [0-9]+ failed' "$RES/check.txt" | tail -1)
passed=$((passed + ${line%% passed*}))
failed=$((failed + $(sed -E 's/.* ([0-9]+) failed/\1/' <<<"$line")))

for c in ${ENQ_CASES:-}; do
    OUT=$RES/check-$c GPU_CHECK_STEPS=1 GPU_CHECK_PLACES=shared GPU_CHECK_BENCH=0 GPU_CHECK_TESTS=stream_enqueue \
        GPU_CHECK_TIMEOUT=${ENQ_CASE_TIMEOUT:-30} STREAM_CASES=$c SHIM=$SHIM scripts/gpu-check.sh >"$RES/check-$c.txt" 2>&1
    if grep -Eq '^ *PASS' "$RES/check-$c.txt" && ! grep -Eq '^ *FAIL' "$RES/check-$c.txt"; then
        echo "PASS stream_enqueue case $c alone"
        passed=$((passed + 1))
    else
        echo "FAIL stream_enqueue case $c alone"
        failed=$((failed + 1))
    fi
done

echo '#include <mpi.h>' >"$BIN/mpiinc.c"
mpih=$($MPICC -M "$BIN/mpiinc.c" 2>/dev/null | tr ' \\' '\n\n' | grep -m1 '/mpi\.h$')
if ! "$CUDA/bin/nvcc" -O2 -c bench/enqueue.cu -I"$(dirname "$mpih")" -o "$BIN/enqueue.o" ||
    ! $MPICC "$BIN/enqueue.o" -o "$BIN/enqueue" -L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -lcudart -lstdc++ -ldl -lm; then
    echo "FAIL bench/enqueue.cu (build)"
    failed=$((failed + 1))
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
places=(self shared)
[ "$ngpu" -ge 2 ] && places+=(per)
read -ra modes <<<"${ENQ_MODES:-default}"
runs=()
for place in "${places[@]}"; do
    for mode in "${modes[@]}"; do
        [ -x "$BIN/enqueue" ] || break
        echo "== bench/enqueue, $place, mode $mode"
        args=(-x LD_PRELOAD="$SHIM")
        [ "$place" = per ] && args+=(-x BENCH_GPU_PER_RANK=1)
        np=2
        [ "$place" = self ] && np=1
        [ "$mode" = default ] || args+=(-x CUDAMPI_ENQUEUE="$mode")
        it=${ENQ_ITERS:-200}
        case $place.$mode in self.ordered | shared.ordered) it=${ENQ_ORDERED_ITERS:-20} ;; esac
        name=enqueue-$place-$mode
        runs+=("$name")
        if env LD_PRELOAD= $MPIRUN "${args[@]}" -n "$np" "$BIN/enqueue" -i "$it" -o "$RES/$name.json" >"$RES/$name.txt" 2>&1; then
            passed=$((passed + 1))
        else
            echo "FAIL bench/enqueue ($place, $mode)"
            failed=$((failed + 1))
        fi
        cat "$RES/$name.txt"
    done
done
rm -rf "$BIN"
echo
echo "$passed passed, $failed failed"
for name in "${runs[@]}"; do
    echo "-- $name"
    grep -E '^(case|halo|8 B)' "$RES/$name.txt"
done
