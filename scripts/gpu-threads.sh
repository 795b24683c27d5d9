#!/usr/bin/env bash
# scripts/gpu-threads.sh — the threads-and-GPUs checks on the lent GPU machine (real CUDA, no
# cargo), in one call:
#   1. tests/c/stress_threads at 3 ranks and 8 threads, STRESS_SECONDS (default 20) a run, on
#      the system MPI (Open MPI 4.1.6 there) and the MPICH 5 wheel, all ranks on GPU 0, in the
#      default mode, with CUDAMPI_IPC=0 (staged and chunks), and with CUDAMPI_IPC=0 and only the
#      point-to-point and probe rounds; with 2+ GPUs again with a GPU per rank (rank 2 shares
#      GPU 0 with rank 0 on two GPUs). A run is killed after RUN_TIMEOUT (default 150) seconds;
#      STRESS_MODES chooses among the three modes.
#   2. tests/c/multi_gpu and multi_gpu_funneled at 2 and 3 ranks (each process drives two GPUs;
#      with one GPU they say so and pass: recorded SKIP)
#   3. bench/threads: aggregate device bandwidth at 4 MiB with 1, 2, 4 and 8 threads per rank,
#      2 ranks, on each MPI -> JSON (BENCH_ITERS, BENCH_REPS; BENCH=0 leaves it out)
# Prints a table and `N passed, N failed` last. Output: $OUT (default build/gpu-threads):
# gpu-threads.log, summary.txt, threads-<mpi>.json and .txt, logs.tar.gz (every run's log).
# Needs SHIM (default .gpu/libcudampi.so, else target/release/libcudampi.so), CUDA_HOME
# (default /usr/local/cuda) and, for MPICH 5, build/wheels/mpich-*.whl (tests/mpi/setup.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CUDA=${CUDA_HOME:-/usr/local/cuda}
SHIM=${SHIM:-}
[ -z "$SHIM" ] && { [ -f .gpu/libcudampi.so ] && SHIM=$ROOT/.gpu/libcudampi.so || SHIM=$ROOT/target/release/libcudampi.so; }
SECS=${STRESS_SECONDS:-20}
RES=${OUT:-$ROOT/build/gpu-threads}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-threads.XXXXXX")
mkdir -p "$RES" "$WORK/bin" "$WORK/logs"
exec > >(tee "$RES/gpu-threads.log") 2>&1
T0=$(date +%s)
RESULTS=$WORK/results.tsv
: >"$RESULTS"
el() { echo $(($(date +%s) - T0)); }
record() { # record STATUS NAME MPI NOTE
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$RESULTS"
    printf '  [%4ss] %-5s %-8s %-44s %s\n' "$(el)" "$1" "$3" "$2" "${4:-}"
}
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $NGPU GPU(s)"
echo "   shim $SHIM"

declare -A CC RUN FAM
MPIS=()
if command -v mpicc >/dev/null; then
    CC[system]=$(command -v mpicc) RUN[system]="$(command -v mpirun) --allow-run-as-root --oversubscribe --bind-to none" FAM[system]=openmpi
    MPIS+=(system)
    echo "   system: $(mpirun --version 2>&1 | head -1)"
fi
if ls build/wheels/mpich-*.whl >/dev/null 2>&1; then
    env -u LD_PRELOAD tests/mpi/setup.sh mpich5 >"$WORK/setup.log" 2>&1
    if [ -f build/mpi/mpich5.env ]; then
        mapfile -t v < <(. build/mpi/mpich5.env; printf '%s\n' "$MPICC" "$MPIRUN" "$MPI_VERSION")
        CC[mpich5]=${v[0]} RUN[mpich5]=${v[1]} FAM[mpich5]=mpich
        MPIS+=(mpich5)
        echo "   mpich5: ${v[2]} (wheel)"
    else
        tail -5 "$WORK/setup.log"
    fi
fi
CFLAGS=(-O1 -g -I tests/c -I "$CUDA/include")
LIBS=(-L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -lcudart -lcuda -lpthread -ldl -lm)

# launch MPI NP LOG VAR=VAL... -- PROGRAM ARGS
launch() {
    local m=$1 np=$2 log=$3 cmd
    shift 3
    read -r -a cmd <<<"${RUN[$m]}"
    cmd+=(-np "$np")
    while [ "$1" != -- ]; do
        if [ "${FAM[$m]}" = openmpi ]; then cmd+=(-x "$1"); else cmd+=(-genv "${1%%=*}" "${1#*=}"); fi
        shift
    done
    shift
    timeout "${RUN_TIMEOUT:-150}" "${cmd[@]}" "$@" >"$log" 2>&1 </dev/null
}

for m in "${MPIS[@]}"; do
    for t in stress_threads multi_gpu multi_gpu_funneled; do
        "${CC[$m]}" "${CFLAGS[@]}" -o "$WORK/bin/$t.$m" "tests/c/$t.c" "${LIBS[@]}" >"$WORK/$t.$m.build.log" 2>&1 ||
            { record FAIL "build $t" "$m" "$(head -3 "$WORK/$t.$m.build.log" | tr '\n' ' ')"; }
    done
    "${CC[$m]}" -O2 -I "$CUDA/include" -o "$WORK/bin/threads.$m" bench/threads.c "${LIBS[@]}" >"$WORK/threads.$m.build.log" 2>&1 ||
        record FAIL "build bench/threads" "$m" "$(head -3 "$WORK/threads.$m.build.log" | tr '\n' ' ')"
done

# 1. the stress test
places=(shared)
[ "$NGPU" -ge 2 ] && places+=(per)
for m in "${MPIS[@]}"; do
    for place in "${places[@]}"; do
        for mode in ${STRESS_MODES:-default ipc0 ipc0-p2p}; do
            envs=(LD_PRELOAD="$SHIM" CUDAMPI_STRESS_THREADS=8 CUDAMPI_STRESS_SECONDS="$SECS")
            [ "$m" = system ] && envs+=(OMPI_MCA_osc=^ucx)
            [ "$mode" != default ] && envs+=(CUDAMPI_IPC=0)
            [ "$mode" = ipc0-p2p ] && envs+=(CUDAMPI_STRESS_OPS=sendrecv,nonblock,persist,probe,anytag)
            [ "$place" = per ] && envs+=(CUDAMPI_TEST_GPU_PER_RANK=1)
            log=$WORK/logs/stress-$m-$place-$mode.log
            launch "$m" 3 "$log" "${envs[@]}" -- "$WORK/bin/stress_threads.$m"
            rc=$?
            line=$(grep -o '[0-9]* rounds per rank.*wrong' "$log" | head -1)
            if [ $rc = 0 ] && grep -q '^PASS' "$log"; then record PASS "stress 3x8 $place $mode" "$m" "$line"
            else record FAIL "stress 3x8 $place $mode" "$m" "rc $rc; $line $(grep -m2 'FAIL\|error' "$log" | tr '\n' ' ' | cut -c1-200)"; fi
        done
    done
done

# 2. two GPUs in one process
for m in "${MPIS[@]}"; do
    for t in multi_gpu multi_gpu_funneled; do
        for np in 2 3; do
            log=$WORK/logs/$t-$m-np$np.log
            envs=(LD_PRELOAD="$SHIM")
            [ "$m" = system ] && envs+=(OMPI_MCA_osc=^ucx)
            launch "$m" "$np" "$log" "${envs[@]}" -- "$WORK/bin/$t.$m"
            rc=$?
            if [ $rc = 0 ] && grep -q 'skipped' "$log"; then record SKIP "$t np$np" "$m" "$(grep -o 'needs 2 GPUs[^:]*' "$log" | head -1)"
            elif [ $rc = 0 ] && grep -q '^PASS' "$log"; then record PASS "$t np$np" "$m"
            else record FAIL "$t np$np" "$m" "rc $rc; $(grep -m2 'FAIL\|error' "$log" | tr '\n' ' ' | cut -c1-200)"; fi
        done
    done
done

# 3. aggregate bandwidth by threads (BENCH=0: not run)
for m in "${MPIS[@]}"; do
    [ "${BENCH:-1}" = 0 ] && break
    log=$RES/threads-$m.txt
    launch "$m" 2 "$log" LD_PRELOAD="$SHIM" -- "$WORK/bin/threads.$m" -s 4M -w 4 -i "${BENCH_ITERS:-20}" -r "${BENCH_REPS:-5}" -t "1 2 4 8" -j "$RES/threads-$m.json"
    rc=$?
    if [ $rc = 0 ]; then record PASS "bench/threads 4 MiB" "$m" "$(grep '^device' "$log" | tr -s ' ')"
    else record FAIL "bench/threads 4 MiB" "$m" "rc $rc; $(tail -2 "$log" | tr '\n' ' ')"; fi
done

echo
echo "== bench/threads (GB/s both ways, all threads of a rank pair)"
for m in "${MPIS[@]}"; do echo "-- $m"; grep -v '^#' "$RES/threads-$m.txt" 2>/dev/null; done
{
    echo "== summary $(date -u +%FT%TZ), $NGPU GPU(s)"
    awk -F'\t' '{printf "%-5s %-8s %-44s %s\n", $1, $3, $2, $4}' "$RESULTS"
} | tee "$RES/summary.txt"
np=$(grep -c '^PASS' "$RESULTS")
nf=$(grep -c '^FAIL' "$RESULTS")
ns=$(grep -c '^SKIP' "$RESULTS")
tar czf "$RES/logs.tar.gz" -C "$WORK" logs
echo "$np passed, $nf failed, $ns skipped"
[ "$nf" = 0 ]
