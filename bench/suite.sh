#!/usr/bin/env bash
# bench/suite.sh — the whole benchmark suite in one call, on 2 ranks with the shim preloaded:
#   latency     bench/pingpong   (osu_latency; plus the shim's host-buffer cost and the 8-byte
#                                 breakdown of where a device message's time goes)
#   bw, bibw    bench/bw, -b     (osu_bw, osu_bibw)
#   coll        bench/coll       (osu_allreduce, osu_bcast, osu_alltoall, osu_allgather,
#                                 osu_reduce_scatter, osu_reduce)
#   rma         bench/rma        MPI_Put and MPI_Get latency and bandwidth, device windows and
#                                 origins against host ones (Open MPI: OMPI_MCA_osc=^ucx unless set)
#   datatypes   bench/datatypes  (a matrix column, cube faces, an MPI_Alltoallw pencil
#                                 transpose and irregular indexed blocks, against cudaMemcpy2D or
#                                 span staging by hand)
#   floor       bench/floor      what the GPU allows: a manual CUDA IPC copy per message (one at a
#                                 time, a window, a ping-pong) with MPI carrying tokens only
#   io          bench/io         MPI_File_write_at_all and read_at_all of up to BENCH_IO_MAX
#                                 bytes in all (default 1G; the disk of TMPDIR needs that much)
# each with its ways side by side in the same run: host buffers on the plain MPI, the manual
# recipe through pageable and through pinned memory, device buffers through cudampi as
# configured (the defaults, unless CUDAMPI_* say otherwise), and NCCL where it loads; then
# cudampi's device way again with the fast paths off (CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0: plain
# staging) as a column of its own, and up to 1 MiB both settings again in alternating runs of the
# device way alone (paths.json: the defaults' speed as a share of staging-only's). The table gives
# cudampi's figures also as ratios of the floor. Writes one JSON per benchmark and, where
# matplotlib is installed, PNG plots (bench/plot.py) into the results folder, then prints a short
# table last.
#
#   bench/suite.sh [--check] [--quick] [-o DIR]
#
#   --check   first the data-check runs (-c, small sizes): every received byte compared
#   --quick   tiny sizes and few iterations, no timed runs beyond them (CI runs --quick --check
#             on the stand-in driver so the suite cannot rot; it asserts no timing)
#   -o DIR    results folder (default bench/results/<UTC date>-<host>)
#
# Environment: MPICC (default mpicc), MPIRUN (default mpirun, options included), MPI_FAMILY
# (openmpi or mpich; default: from `mpirun --version`), SHIM (default
# target/release/libcudampi.so), CUDA_HOME (default /usr/local/cuda) or FIXTURE_LIB and
# FIXTURE_INC (the stand-in driver), CUDAMPI_BENCH_NCCL (the NCCL library; looked for when
# unset), BENCH_ONLY (the benchmarks to time, of "floor latency bw bibw coll rma io datatypes";
# default all), BENCH_IO_MAX (the largest file of bench/io, default 1G), BENCH_PAIRS (pairs of
# alternating runs, default 2),
# CUDAMPI_* (given to the ranks).
# Exit status 1 when a benchmark failed or a data check found a wrong byte.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0 quick=0 out=
while [ $# -gt 0 ]; do
    case $1 in
    --check) check=1 ;;
    --quick) quick=1 ;;
    -o) out=${2:?-o needs a folder}; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "suite: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$ROOT/bench/results/$(date -u +%Y-%m-%d)-$(hostname -s)}
mkdir -p "$out/bin"
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
SHIM=${SHIM:-$ROOT/target/release/libcudampi.so}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
if [ -z "${MPI_FAMILY:-}" ]; then
    if ${MPIRUN%% *} --version 2>&1 | grep -qi 'open mpi\|open-mpi\|openrte'; then MPI_FAMILY=openmpi; else MPI_FAMILY=mpich; fi
fi

if [ ! -f "$SHIM" ]; then
    echo "suite: the shim $SHIM does not exist (cargo build --release, or set SHIM)"
    exit 1
fi

# ---- build -------------------------------------------------------------------------------------
if [ -n "${FIXTURE_LIB:-}" ]; then
    cflags=(-I"$FIXTURE_INC") libs=(-L"$FIXTURE_LIB" -Wl,-rpath,"$FIXTURE_LIB" -lcudart -lcuda)
else
    cuda=${CUDA_HOME:-/usr/local/cuda}
    cl=$cuda/lib64
    [ -d "$cl" ] || cl=$cuda/lib
    # the driver's libcuda at run time; the toolkit's stub only satisfies the link
    cflags=(-I"$cuda/include") libs=(-L"$cl" -Wl,-rpath,"$cl" -L"$cl/stubs" -lcudart -lcuda)
fi
for b in pingpong bw coll floor rma io datatypes; do
    if ! $MPICC -O2 -Wall "${cflags[@]}" -o "$out/bin/$b" "$ROOT/bench/$b.c" "${libs[@]}" -ldl -lm >"$out/$b.build.log" 2>&1; then
        echo "suite: building bench/$b.c failed:"
        tail -20 "$out/$b.build.log"
        exit 1
    fi
    rm -f "$out/$b.build.log"
done

# ---- NCCL --------------------------------------------------------------------------------------
if [ -z "${CUDAMPI_BENCH_NCCL:-}" ] && [ -z "${FIXTURE_LIB:-}" ]; then
    CUDAMPI_BENCH_NCCL=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }')
    if [ -z "$CUDAMPI_BENCH_NCCL" ] && command -v python3 >/dev/null; then
        # the copy PyTorch's wheels bring (nvidia-nccl-cu*)
        CUDAMPI_BENCH_NCCL=$(python3 -c 'import nvidia.nccl, os; d = list(nvidia.nccl.__path__)[0]; print(os.path.join(d, "lib", "libnccl.so.2"))' 2>/dev/null)
        [ -f "$CUDAMPI_BENCH_NCCL" ] || CUDAMPI_BENCH_NCCL=
    fi
fi
export CUDAMPI_BENCH_NCCL=${CUDAMPI_BENCH_NCCL:-}

# ---- runs --------------------------------------------------------------------------------------
# ranks PROGRAM ARGS...: the program on 2 ranks with the shim preloaded and CUDAMPI_* passed
ranks() {
    local -a cmd env=(LD_PRELOAD="$SHIM" CUDAMPI_BENCH_NCCL="$CUDAMPI_BENCH_NCCL") kv
    read -r -a cmd <<<"$MPIRUN"
    while IFS= read -r kv; do env+=("$kv"); done < <(env | grep -E '^CUDAMPI_[A-Z0-9_]*=' | grep -v '^CUDAMPI_BENCH_NCCL=')
    for kv in "${env[@]}"; do
        if [ "$MPI_FAMILY" = openmpi ]; then cmd+=(-x "$kv"); else cmd+=(-genv "${kv%%=*}" "${kv#*=}"); fi
    done
    env LD_PRELOAD= "${cmd[@]}" -n 2 "$@"
}
failed=0
# run NAME ARGS...: one benchmark run, output to NAME.txt in the results folder
run() {
    local name=$1 rc
    shift
    echo "== $name: $*"
    ranks "$@" >"$out/$name.txt" 2>&1
    rc=$?
    grep -E '^# data check|^(bw|coll|pingpong|bench): ' "$out/$name.txt" | sed 's/^/   /'
    if [ $rc != 0 ]; then
        echo "   FAILED (exit status $rc); the end of $name.txt:"
        tail -15 "$out/$name.txt" | sed 's/^/   | /'
        failed=1
    fi
}

B=$out/bin
# want NAME: the benchmark is among BENCH_ONLY (default: all); --check checks only those too
want() { case " ${BENCH_ONLY:-floor latency bw bibw coll rma io datatypes} " in *" $1 "*) ;; *) return 1 ;; esac; }
if [ $check = 1 ]; then
    want latency && run check-latency "$B/pingpong" -c -m 1:256k -i 20 -x 2 -r 3 -n 200
    want bw && run check-bw "$B/bw" -c -m 1:256k -i 10 -x 2 -w 16
    want bibw && run check-bibw "$B/bw" -b -c -m 1:256k -i 10 -x 2 -w 16
    want coll && run check-coll "$B/coll" -c -m 8:256k -i 10 -x 2
    want floor && run check-floor "$B/floor" -c -m 1:256k -i 10 -x 2 -r 1
    want rma && OMPI_MCA_osc=${OMPI_MCA_osc-^ucx} run check-rma "$B/rma" -c -m 8:256k -i 10 -x 2
    want io && run check-io "$B/io" -c -m 64k:4M -i 2
    want datatypes && run check-datatypes "$B/datatypes" -k -n 64,256 -b 64,512 -c 32 -g 32 -i 3 -x 1
    # the fast paths for every size, so that these small sizes take them too
    want bibw && CUDAMPI_IPC=0 CUDAMPI_PIPELINE=1 CUDAMPI_PIPELINE_BYTES=0 CUDAMPI_PIPELINE_CHUNK=64k run check-bw-chunks "$B/bw" -b -c -m 1k:256k -i 10 -x 2 -w 16 -W device
    want bibw && CUDAMPI_PIPELINE=0 CUDAMPI_IPC=1 CUDAMPI_IPC_BYTES=0 CUDAMPI_IPC_SAME_GPU_BYTES=0 run check-bw-ipc "$B/bw" -b -c -m 1k:256k -i 10 -x 2 -w 16 -W device
fi
# staged NAME ARGS...: cudampi's device way alone with the fast paths off (NAME-staged)
staged() {
    local name=$1
    shift
    CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0 run "$name-staged" "$@" -W device -o "$out/$name-staged.json"
}
# alternate NAME ARGS...: cudampi's device way alone, with the fast paths off and by default, in
# BENCH_PAIRS pairs of runs (default 2) in the order off, default, default, off, off, default, ...
# (NAME-alt-1-s, -2-d, -3-d, -4-s, -5-s, ...): separate runs drift by more than the two settings
# differ at small sizes, and in this order a drift weighs on both alike
alternate() {
    local name=$1 k
    shift
    for k in $(seq $((2 * ${BENCH_PAIRS:-2}))); do
        case $((k % 4)) in
        0 | 1) CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0 run "$name-alt-$k-s" "$@" -W device -o "$out/$name-alt-$k-s.json" ;;
        *) run "$name-alt-$k-d" "$@" -W device -o "$out/$name-alt-$k-d.json" ;;
        esac
    done
}
if [ $quick = 1 ]; then
    run floor "$B/floor" -m 1:64k -i 10 -x 1 -r 1 -o "$out/floor.json"
    run latency "$B/pingpong" -m 1:64k -S 8 -i 20 -x 2 -r 3 -n 200 -o "$out/latency.json"
    staged latency "$B/pingpong" -m 1:64k -S 8 -i 20 -x 2 -r 1 -n 10
    run bw "$B/bw" -m 1:64k -i 5 -x 1 -w 16 -o "$out/bw.json"
    staged bw "$B/bw" -m 1:64k -i 5 -x 1 -w 16
    run bibw "$B/bw" -b -m 1:64k -i 5 -x 1 -w 16 -o "$out/bibw.json"
    alternate latency "$B/pingpong" -m 1:4k -i 20 -x 2 -r 1 -n 10
    alternate bw "$B/bw" -m 1:4k -i 5 -x 1 -w 16
    run coll "$B/coll" -m 8:64k -i 5 -x 1 -o "$out/coll.json"
    OMPI_MCA_osc=${OMPI_MCA_osc-^ucx} run rma "$B/rma" -m 8:64k -i 5 -x 1 --json "$out/rma.json"
    run io "$B/io" -m 64k:1M -i 1 -o "$out/io.json"
    run datatypes "$B/datatypes" -k -n 256,1024 -b 256,1024 -c 64 -g 64 -i 5 -x 1 -o "$out/datatypes.json"
else
    want floor && run floor "$B/floor" -m 1:64M -o "$out/floor.json"
    want latency && run latency "$B/pingpong" -m 1:64M -S 8 -o "$out/latency.json"
    want latency && staged latency "$B/pingpong" -m 1:64M -S 8 -r 3 -n 10
    want latency && alternate latency "$B/pingpong" -m 1:1M -S 8 -r 1 -n 10
    want bw && run bw "$B/bw" -m 1:64M -o "$out/bw.json"
    want bw && staged bw "$B/bw" -m 1:64M
    want bw && alternate bw "$B/bw" -m 1:1M
    want bibw && run bibw "$B/bw" -b -m 1:64M -o "$out/bibw.json"
    want bibw && staged bibw "$B/bw" -b -m 1:64M
    want bibw && alternate bibw "$B/bw" -b -m 1:1M
    want coll && run coll "$B/coll" -m 8:64M -r 3 -o "$out/coll.json"
    want rma && OMPI_MCA_osc=${OMPI_MCA_osc-^ucx} run rma "$B/rma" -m 8:64M --json "$out/rma.json"
    want io && run io "$B/io" -m 1M:"${BENCH_IO_MAX:-1G}" -o "$out/io.json"
    want datatypes && run datatypes "$B/datatypes" -k -o "$out/datatypes.json"
fi

# ---- plots and the table -----------------------------------------------------------------------
if command -v python3 >/dev/null; then
    python3 "$ROOT/bench/plot.py" "$out" || failed=1
else
    echo "suite: no python3: no plots, no summary table (the JSON files are in $out)"
fi
echo "results: $out"
exit $failed
