#!/usr/bin/env bash
# scripts/gpu-nccl.sh — cudampi's NCCL engine for blocking device collectives, on the lent GPU
# machine (real CUDA, no cargo), in one call of at most GPU_NCCL_LIMIT seconds.
#
# Needs the prebuilt shim (SHIM, default target/release/libcudampi.so), CUDA (CUDA_HOME, default
# /usr/local/cuda), mpicc/mpirun on the PATH (the system Open MPI there; MPICC and MPIRUN, the
# latter with its options, override them) and an NCCL: CUDAMPI_NCCL_LIB if set, else the
# libnccl.so.2 that PyTorch's wheels bring (python3 -c 'import nvidia.nccl'), else one the loader
# knows (ldconfig -p). Every rank has a GPU of its own: NRANKS (default: the number of GPUs, at
# least 2) ranks, rank r on GPU r % count (the tests with CUDAMPI_TEST_GPU_PER_RANK=1, bench/coll
# by itself).
#
# Steps, in this order (a run never outlasts the limit: each gets at most the time left, and a
# step that finds no time left is SKIPPED, so the summary is always printed):
#   tests    tests/c/coll_nccl_nb.c, tests/c/coll_nccl.c, tests/c/coll_nccl_sizes.c and
#            tests/c/coll_blocking.c, built against the real CUDA, run with the shim preloaded,
#            CUDAMPI_NCCL_LIB set, CUDAMPI_NCCL_BYTES=0 (NCCL at every size; the test's env=
#            header wins, as coll_nccl_sizes's 8K) and CMTEST_MODE=nccl (coll_nccl and
#            coll_nccl_sizes check cudampi_stats.nccl_calls exactly), on NRANKS ranks and on 2; the
#            step ends after GPU_NCCL_TESTS_SHARE percent of the limit (default 40), so that the
#            figures keep their time
#   check    bench/coll -c (every result compared with the host computation) with
#            CUDAMPI_NCCL_BYTES=0, NRANKS ranks, 8 B .. 4 MiB; must pass, and every timed device
#            call must have run on NCCL (bench/coll's via-nccl, where the shim counts it)
#   figures  bench/coll -m 8:64M -r 3 (sizes by powers of 4, all six collectives, five ways side
#            by side) with the defaults (coll-nccl), with CUDAMPI_NCCL=0 (coll-staged: the staged
#            path as before), with CUDAMPI_NCCL_BYTES=0 (coll-nccl-every: where NCCL crosses
#            staging); the defaults with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 for the ranks,
#            32k:64M (coll-socket: NCCL's socket transport, as between nodes; from 32k rather than
#            64k, so that its sizes, 32k * 4^k, are those of the other runs); bench/coll -d host
#            -r 5 8:64M with the defaults (coll-host: what host buffers pay going through cudampi);
#            bench/nccl_steps with the defaults (nccl-steps: what each step of a blocking
#            collective on NCCL adds to NCCL's own call), only when GPU_NCCL_FIGURES names steps;
#            bench/coll -n with the defaults (coll-nb: the nonblocking forms, MPI_I... then
#            MPI_Wait at once; run after coll-nccl-every), only when GPU_NCCL_FIGURES names nb
# At the end bench/nccl_table.py makes the tables (per collective and size: NCCL's own time,
# cudampi with NCCL, cudampi staged, NCCL at every size, the ratios to NCCL) from the JSON files,
# and the script prints the short table and, last, `N passed, N failed, N skipped`.
#
# Output, under $OUT if set, else build/gpu-nccl/: gpu-nccl.log (all printed), results.tsv,
# coll-*.json and check-coll.json (bench/coll -o, each with a member "gpu_nccl": date, GPU
# (nvidia-smi), MPI, NCCL, ranks, the run's settings; a run stopped by the limit leaves the
# sizes it finished, with "complete": false), coll-*.txt and check-coll.txt (their
# tables), meta.json, summary.txt (the full tables), summary.json, logs/ (build and test logs).
# bench/nccl_table.py DIR [--markdown] makes the tables again from such a folder.
#
#   2 GPUs:  scripts/gpu-nccl.sh                  (NRANKS=2)
#   4 GPUs:  scripts/gpu-nccl.sh                  (NRANKS=4, the tests again on 2 ranks)
#   stand-in (no GPU, to try the script; the times mean nothing):
#            make fixture; . build/mpi/ompi4.env    (exports MPICC and MPIRUN)
#            FIXTURE_LIB=build/fixture/lib FIXTURE_INC=tests/fixture/include FAKECUDA_DEVICES=4 \
#                GPU_NCCL_QUICK=1 scripts/gpu-nccl.sh
#
# Environment: GPU_NCCL_LIMIT (seconds, default 560), GPU_NCCL_STEPS (default "tests check
# figures"), GPU_NCCL_TIMEOUT (cap of one test run, default 150; a test's timeout= header wins
# when smaller), GPU_NCCL_TESTS_SHARE (default 40), GPU_NCCL_SOCKET_MIN (default 32k), NRANKS,
# GPU_NCCL_MAX (largest size of the figures, default 64M; GPU_NCCL_EVERY_MAX for coll-nccl-every
# alone, whose point is where NCCL overtakes staging), GPU_NCCL_ROUNDS (bench/coll -r of the
# figures, default 3; 9 settle points a few microseconds apart), GPU_NCCL_FIGURES (which figure runs,
# default "nccl staged every socket host"; also nb and steps), GPU_NCCL_QUICK=1 (small sizes, few
# iterations, one round), SHIM, CUDA_HOME, MPICC, MPIRUN, FIXTURE_LIB, FIXTURE_INC and
# FIXTURE_NCCL (the stand-in CUDA and NCCL instead of the real ones; FAKECUDA_DEVICES GPUs,
# default 2), CUDAMPI_* (passed to every run, except CUDAMPI_NCCL, CUDAMPI_NCCL_BYTES and
# CUDAMPI_TEST_*, which each run sets or leaves at cudampi's default itself).
set -uo pipefail
case ${1:-} in
-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "gpu-nccl: no arguments (see --help; the environment sets everything)" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
T0=$(date +%s)
LIMIT=${GPU_NCCL_LIMIT:-560}
TMO=${GPU_NCCL_TIMEOUT:-150}
CUDA=${CUDA_HOME:-/usr/local/cuda}
SHIM=${SHIM:-target/release/libcudampi.so}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
RES=${OUT:-$ROOT/build/gpu-nccl}
mkdir -p "$RES/logs"
# what an earlier call left here would be taken for this call's results
rm -f "$RES"/coll-*.json "$RES"/coll-*.txt "$RES"/check-coll.* "$RES"/*.part "$RES"/summary.* "$RES"/meta.json "$RES"/logs/*
LOGS=$RES/logs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-nccl.XXXXXX")
BIN=$WORK/bin
mkdir -p "$BIN"
RESULTS=$RES/results.tsv
: >"$RESULTS"
STEPS=" ${GPU_NCCL_STEPS:-tests check figures} "
QUICK=${GPU_NCCL_QUICK:-0}
RESERVE=15 # seconds kept for the tables and the summary

exec > >(tee "$RES/gpu-nccl.log") 2>&1

el() { echo $(($(date +%s) - T0)); }
left() { echo $((LIMIT - RESERVE - $(el))); }
say() { printf '\n== [%4ss] %s\n' "$(el)" "$*"; }
step() { [[ $STEPS == *" $1 "* ]]; }
# record STATUS NAME SECONDS NOTE
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$RESULTS"
    printf '  [%4ss] %-5s %-46s %6ss %s\n' "$(el)" "$1" "$2" "$3" "${4:-}"
}
# shellcheck source=tests/mpi/lib.sh
. "$ROOT/tests/mpi/lib.sh" # cudampi_run SECONDS LOG CMD...: own session, time limit, leftovers killed

# ---- the machine -------------------------------------------------------------------------------
say "gpu-nccl on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), limit ${LIMIT}s"
STAND_IN=0
if [ -n "${FIXTURE_LIB:-}" ]; then
    STAND_IN=1
    FIXTURE_INC=${FIXTURE_INC:-tests/fixture/include}
    case $FIXTURE_LIB in /*) ;; *) FIXTURE_LIB=$ROOT/$FIXTURE_LIB ;; esac
    case $FIXTURE_INC in /*) ;; *) FIXTURE_INC=$ROOT/$FIXTURE_INC ;; esac
    export FAKECUDA_DEVICES=${FAKECUDA_DEVICES:-2}
    NGPU=$FAKECUDA_DEVICES
    GPU_NAME="stand-in (tests/fixture, FAKECUDA_DEVICES=$NGPU)"
    DRIVER=stand-in
    CFLAGS=(-I"$FIXTURE_INC")
    LIBS=(-L"$FIXTURE_LIB" -Wl,-rpath,"$FIXTURE_LIB" -lcudart -lcuda)
    echo "   stand-in CUDA: $FIXTURE_LIB, $NGPU fake GPUs: the times mean nothing"
else
    NGPU=0 GPU_NAME=none DRIVER=?
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/   GPU /'
        NGPU=$(nvidia-smi -L | grep -c '^GPU')
        GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
        DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
    else
        echo "   nvidia-smi: no GPU visible"
    fi
    [ -x "$CUDA/bin/nvcc" ] && echo "   CUDA: $CUDA, $("$CUDA/bin/nvcc" --version | grep -o 'release [0-9.]*' | head -1)"
    [ -f "$CUDA/include/cuda_runtime.h" ] || echo "   CUDA: no $CUDA/include/cuda_runtime.h (set CUDA_HOME)"
    cl=$CUDA/lib64
    [ -d "$cl" ] || cl=$CUDA/lib
    CFLAGS=(-I"$CUDA/include")
    # libcuda: the driver's at run time; the toolkit's stub only satisfies the link
    LIBS=(-L"$cl" -Wl,-rpath,"$cl" -L"$cl/stubs" -lcudart -lcuda)
fi
if [ -n "${NRANKS:-}" ]; then
    N=$NRANKS
elif [ "$NGPU" -ge 2 ]; then
    N=$NGPU
else
    N=2
fi
[ "$NGPU" -lt "$N" ] && echo "   NOTE: $N ranks on $NGPU GPU(s): ranks share a GPU, NCCL refuses such communicators"
echo "   ranks: $N$([ "$N" != 2 ] && echo " (the tests also on 2)")"
if [ -f "$SHIM" ]; then
    SHIM_VERSION=$(grep -a -o -m1 'cudampi [0-9][0-9.]*[0-9]' "$SHIM" | head -1)
    echo "   shim: $SHIM ($SHIM_VERSION)"
else
    SHIM_VERSION=missing
    echo "   shim: $SHIM is MISSING (build it where cargo is, and carry it)"
    record FAIL "shim library present" 0 "$SHIM missing"
fi

# ---- MPI ------------------------------------------------------------------------------------------
MPICC=${MPICC:-mpicc}
if [ -z "${MPIRUN:-}" ]; then
    MPIRUN=$(command -v mpirun || echo mpirun)
    if $MPIRUN --version 2>&1 | grep -qi 'open mpi\|open-mpi\|openrte'; then
        MPIRUN+=" --oversubscribe"
        [ "$(id -u)" = 0 ] && MPIRUN+=" --allow-run-as-root"
    fi
fi
read -r -a RUNCMD <<<"$MPIRUN"
MPI_VERSION=$(env LD_PRELOAD= "${RUNCMD[0]}" --version 2>&1 | grep -v '^\s*$' | head -1)
if echo "$MPI_VERSION" | grep -qi 'open mpi\|open-mpi\|openrte'; then MPI_FAMILY=openmpi; else MPI_FAMILY=mpich; fi
echo "   MPI: $MPI_VERSION ($MPI_FAMILY): $MPICC; $MPIRUN"

# ---- NCCL -----------------------------------------------------------------------------------------
NCCL_LIB=${CUDAMPI_NCCL_LIB:-}
if [ -z "$NCCL_LIB" ] && [ $STAND_IN = 1 ]; then
    NCCL_LIB=${FIXTURE_NCCL:-$ROOT/build/fixture/nccl/libnccl.so.2}
fi
if [ -z "$NCCL_LIB" ] && command -v python3 >/dev/null; then
    # the copy PyTorch's wheels bring (nvidia-nccl-cu*)
    NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; d = list(nvidia.nccl.__path__)[0]; print(os.path.join(d, "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -f "$NCCL_LIB" ] || NCCL_LIB=
fi
[ -z "$NCCL_LIB" ] && NCCL_LIB=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }')
NCCL_VERSION=unknown
if [ -n "$NCCL_LIB" ] && [ -f "$NCCL_LIB" ]; then
    v=$(grep -a -o -m1 'NCCL version [0-9][0-9.]*[0-9]' "$NCCL_LIB" 2>/dev/null | head -1)
    [ -z "$v" ] && command -v python3 >/dev/null &&
        v=$(python3 -c 'import importlib.metadata as m; print(next(d.version for d in m.distributions() if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl")))' 2>/dev/null)
    NCCL_VERSION=${v#NCCL version }
    NCCL_VERSION=${NCCL_VERSION:-unknown}
    echo "   NCCL: $NCCL_LIB ($NCCL_VERSION)"
else
    echo "   NCCL: no libnccl.so.2 found (set CUDAMPI_NCCL_LIB)"
    record FAIL "NCCL library found" 0 "no libnccl.so.2 (CUDAMPI_NCCL_LIB, python3 nvidia.nccl, ldconfig)"
    NCCL_LIB=
fi

# ---- launching ------------------------------------------------------------------------------------
# the caller's CUDAMPI_* for every run, less those that each run sets itself
PASSENV=()
while IFS= read -r kv; do PASSENV+=("$kv"); done < <(env | grep -E '^CUDAMPI_[A-Z0-9_]*=' |
    grep -vE '^CUDAMPI_(NCCL|NCCL_BYTES|NCCL_LIB|BENCH_NCCL|TEST_[A-Z0-9_]*)=')
BASEENV=(LD_PRELOAD="$SHIM" CUDAMPI_NCCL_LIB="$NCCL_LIB" CUDAMPI_BENCH_NCCL="$NCCL_LIB")
[ $STAND_IN = 1 ] && BASEENV+=(FAKECUDA_DEVICES="$FAKECUDA_DEVICES")

# mpi_cmd NP VAR=VAL... -- PROGRAM ARGS...: sets CMD to the launch command line. mpirun itself
# runs without the shim and without the NCCL settings of the caller's shell (Open MPI hands its
# environment to local ranks): each run's ranks get exactly BASEENV, PASSENV and VAR=VAL...
mpi_cmd() {
    local np=$1 kv
    shift
    CMD=(env -u CUDAMPI_NCCL -u CUDAMPI_NCCL_BYTES -u CUDAMPI_NCCL_LIB -u CUDAMPI_BENCH_NCCL -u CMTEST_MODE
        -u CUDAMPI_TEST_GPU_PER_RANK -u NCCL_P2P_DISABLE -u NCCL_SHM_DISABLE LD_PRELOAD= "${RUNCMD[@]}" -np "$np")
    local -a ev=("${BASEENV[@]}" "${PASSENV[@]+"${PASSENV[@]}"}")
    while [ $# -gt 0 ] && [ "$1" != -- ]; do ev+=("$1"); shift; done
    shift
    for kv in "${ev[@]}"; do
        if [ "$MPI_FAMILY" = openmpi ]; then CMD+=(-x "$kv"); else CMD+=(-genv "${kv%%=*}" "${kv#*=}"); fi
    done
    CMD+=("$@")
}

# check NAME CAP LOG CMD...: runs CMD for at most CAP seconds (and no longer than the time left)
# and records PASS (status 0), FAIL or SKIP (no time left). Returns CMD's status.
check() {
    local name=$1 cap=$2 log=$3 t rc secs note
    shift 3
    secs=$(left)
    if [ "$secs" -lt 10 ]; then
        record SKIP "$name" 0 "time limit (${LIMIT}s) reached"
        return 125
    fi
    [ "$cap" -lt "$secs" ] && secs=$cap
    t=$(date +%s%N)
    cudampi_run "$secs" "$log" "$@"
    rc=$?
    t=$(awk -v a="$t" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    case $rc in
    0) note="rc 0" ;;
    124 | 137) note="TIMED OUT after ${secs}s" ;;
    *) note="rc $rc" ;;
    esac
    if [ $rc = 0 ]; then
        record PASS "$name" "$t" "$note"
    else
        record FAIL "$name" "$t" "$note; $(basename "$log")"
        grep -E '^FAIL|rror|signal|Segmentation|Abort|timed out' "$log" | head -6 | cut -c1-200 | sed 's/^/           | /'
    fi
    return $rc
}

# ---- tests ------------------------------------------------------------------------------------------
# hdr FILE KEY: the value of KEY= in the test's header line
hdr() { head -n 10 "$1" | grep -m1 'cudampi-test:' | grep -o "$2=[^ ]*" | sed "s/^$2=//"; }
if step tests; then
    TESTS_END=$(($(el) + LIMIT * ${GPU_NCCL_TESTS_SHARE:-40} / 100))
    say "tests: coll_nccl_nb, coll_nccl, coll_nccl_sizes and coll_blocking, mode nccl, one GPU per rank (until ${TESTS_END}s)"
    nps=("$N")
    [ "$N" != 2 ] && nps+=(2)
    for t in coll_nccl_nb coll_nccl coll_nccl_sizes coll_blocking; do
        src=tests/c/$t.c
        if [ ! -f "$src" ]; then
            record SKIP "$t" 0 "$src does not exist (yet)"
            continue
        fi
        if ! $MPICC -O1 -g -I tests/c "${CFLAGS[@]}" -o "$BIN/$t" "$src" "${LIBS[@]}" -lpthread -ldl -lm \
            >"$LOGS/$t.build.log" 2>&1; then
            record FAIL "$t (build)" 0 "logs/$t.build.log"
            tail -5 "$LOGS/$t.build.log" | sed 's/^/           | /'
            continue
        fi
        cap=$(hdr "$src" timeout)
        [ -n "$cap" ] && [ "$cap" -lt "$TMO" ] || cap=$TMO
        bytes=$(hdr "$src" env | grep -o 'CUDAMPI_NCCL_BYTES=[^,]*' | cut -d= -f2)
        for np in "${nps[@]}"; do
            c=$((TESTS_END - $(el)))
            [ "$c" -gt "$cap" ] && c=$cap
            if [ "$c" -lt 10 ]; then
                record SKIP "$t, $np ranks" 0 "the tests' share of the limit (${GPU_NCCL_TESTS_SHARE:-40}%) is spent"
                continue
            fi
            mpi_cmd "$np" CUDAMPI_NCCL_BYTES="${bytes:-0}" CMTEST_MODE=nccl CUDAMPI_TEST_GPU_PER_RANK=1 -- "$BIN/$t"
            check "$t, $np ranks" "$c" "$LOGS/$t.np$np.log" "${CMD[@]}"
            # the test's own verdict line
            grep -E '^(PASS|FAIL) [a-z_]+ \(' "$LOGS/$t.np$np.log" | head -1 | cut -c1-160 | sed 's/^/           | /'
        done
    done
fi

# ---- bench/coll ---------------------------------------------------------------------------------------
BENCH_OK=0
if step check || step figures; then
    if $MPICC -O2 -Wall "${CFLAGS[@]}" -o "$BIN/coll" bench/coll.c "${LIBS[@]}" -ldl -lm >"$LOGS/coll.build.log" 2>&1; then
        BENCH_OK=1
    else
        record FAIL "bench/coll (build)" 0 "logs/coll.build.log"
        tail -5 "$LOGS/coll.build.log" | sed 's/^/           | /'
    fi
fi
# bench NAME VAR=VAL... -- ARGS...: bench/coll on N ranks, its table in NAME.txt, its JSON in
# NAME.json; PASS when it exits 0 and wrote the JSON
bench() {
    local name=$1 rc
    shift
    local -a ev=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do ev+=("$1"); shift; done
    shift
    mpi_cmd "$N" "${ev[@]+"${ev[@]}"}" -- "$BIN/coll" "$@" -o "$RES/$name.json"
    echo "   $name: ${ev[*]:-(the defaults)} bench/coll $*"
    check "bench/coll $name" 100000 "$RES/$name.txt" "${CMD[@]}"
    rc=$?
    if [ $rc = 0 ] && [ ! -s "$RES/$name.json" ]; then
        record FAIL "bench/coll $name: JSON written" 0 "no $name.json"
        rc=1
    elif [ $rc != 0 ] && [ -s "$RES/$name.json" ]; then
        # bench/coll rewrites its JSON after each size ("complete": false until the end)
        echo "           | the sizes it finished are in $name.json (\"complete\": false)"
    fi
    grep -E '^# (data check|nccl|device)|^coll: ' "$RES/$name.txt" 2>/dev/null | head -4 | sed 's/^/           | /'
    return $rc
}

if [ $QUICK = 1 ]; then
    MAX=${GPU_NCCL_MAX:-256k} CHECK_MAX=64k ITER=(-i 5 -x 1) ROUNDS=1 HOST_ROUNDS=1 STEPS_ARGS=(-m 8:64k -i 10 -r 1)
else
    MAX=${GPU_NCCL_MAX:-64M} CHECK_MAX=4M ITER=() ROUNDS=${GPU_NCCL_ROUNDS:-3} HOST_ROUNDS=5 STEPS_ARGS=()
fi

if [ $BENCH_OK = 1 ] && step check; then
    say "check: bench/coll -c, NCCL at every size (CUDAMPI_NCCL_BYTES=0), $N ranks"
    if bench check-coll CUDAMPI_NCCL_BYTES=0 -- -c -m 8:"$CHECK_MAX" -i 3 -x 1; then
        # every timed device call on NCCL (bench/coll's device_shim_nccl_share, where counted)
        share=$(python3 -c '
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["results"] if r.get("device_shim_us") is not None]
s = [r["device_shim_nccl_share"] for r in rows if "device_shim_nccl_share" in r]
print("none" if not s else "%d %d %s" % (sum(1 for v in s if v >= 1), len(s),
      ",".join("%s/%d" % (r["collective"], r["size"]) for r in rows if r.get("device_shim_nccl_share", 1) < 1)[:300]))
' "$RES/check-coll.json" 2>&1)
        if [ "$share" = none ]; then
            record SKIP "bench/coll -c: device calls on NCCL" 0 "the shim does not count NCCL's calls"
        elif [ "$(echo "$share" | awk '{ print ($1 == $2 && $2 > 0) }')" = 1 ]; then
            record PASS "bench/coll -c: device calls on NCCL" 0 "$(echo "$share" | awk '{ print $1 " of " $2 }') sizes x collectives all on NCCL"
        else
            record FAIL "bench/coll -c: device calls on NCCL" 0 "on NCCL in $(echo "$share" | awk '{ print $1 " of " $2 "; not: " $3 }')"
        fi
    fi
fi

if [ $BENCH_OK = 1 ] && step figures; then
    FIG=" ${GPU_NCCL_FIGURES:-nccl staged every socket host} "
    say "figures: bench/coll -m 8:$MAX -r $ROUNDS, $N ranks (${FIG# })"
    [[ $FIG == *" nccl "* ]] && bench coll-nccl -- -m 8:"$MAX" -r $ROUNDS "${ITER[@]+"${ITER[@]}"}"
    [[ $FIG == *" staged "* ]] && bench coll-staged CUDAMPI_NCCL=0 -- -m 8:"$MAX" -r $ROUNDS "${ITER[@]+"${ITER[@]}"}"
    [[ $FIG == *" every "* ]] && bench coll-nccl-every CUDAMPI_NCCL_BYTES=0 -- -m 8:"${GPU_NCCL_EVERY_MAX:-$MAX}" -r $ROUNDS "${ITER[@]+"${ITER[@]}"}"
    [[ $FIG == *" nb "* ]] && bench coll-nb -- -n -m 8:"$MAX" -r $ROUNDS "${ITER[@]+"${ITER[@]}"}"
    smin=${GPU_NCCL_SOCKET_MIN:-32k}
    if [[ $FIG == *" socket "* ]]; then
        say "figures: NCCL over sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), $smin:$MAX"
        bench coll-socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- -m "$smin":"$MAX" -r $ROUNDS "${ITER[@]+"${ITER[@]}"}"
    fi
    if [[ $FIG == *" steps "* ]]; then
        say "figures: bench/nccl_steps (what each step of a blocking collective on NCCL adds), $N ranks"
        if $MPICC -O2 -Wall "${CFLAGS[@]}" -o "$BIN/nccl_steps" bench/nccl_steps.c "${LIBS[@]}" -ldl -lm >"$LOGS/nccl_steps.build.log" 2>&1; then
            mpi_cmd "$N" -- "$BIN/nccl_steps" -o "$RES/nccl-steps.json" "${STEPS_ARGS[@]}"
            check "bench/nccl_steps" 100000 "$RES/nccl-steps.txt" "${CMD[@]}"
        else
            record FAIL "bench/nccl_steps (build)" 0 "logs/nccl_steps.build.log"
        fi
    fi
    if [[ $FIG == *" host "* ]]; then
        say "figures: host buffers through cudampi (-d host), 8:$MAX -r $HOST_ROUNDS"
        bench coll-host -- -d host -m 8:"$MAX" -r $HOST_ROUNDS "${ITER[@]+"${ITER[@]}"}"
    fi
fi

# ---- the tables and the summary -----------------------------------------------------------------------
np=$(grep -c '^PASS' "$RESULTS")
nf=$(grep -c '^FAIL' "$RESULTS")
ns=$(grep -c '^SKIP' "$RESULTS")
GPU_NAME=$GPU_NAME NGPU=$NGPU DRIVER=$DRIVER MPI_VERSION=$MPI_VERSION NCCL_VERSION=$NCCL_VERSION NCCL_LIB=$NCCL_LIB \
    SHIM_VERSION=$SHIM_VERSION N=$N STAND_IN=$STAND_IN NP=$np NF=$nf NS=$ns LIMIT=$LIMIT QUICK=$QUICK \
    python3 - "$RES/meta.json" "$RESULTS" <<'EOF'
import glob, json, os, socket, sys, time
e = os.environ
nccl = e["NCCL_VERSION"]
# the version NCCL itself gave bench/coll (ncclGetVersion), where a run got that far
for p in sorted(glob.glob(os.path.join(os.path.dirname(sys.argv[1]), "*coll*.json"))):
    try:
        v = json.load(open(p)).get("parameters", {}).get("nccl", "")
    except ValueError:
        continue
    if v.startswith("NCCL "):
        nccl = v[5:]
        break
checks = []
for line in open(sys.argv[2]):
    st, name, secs, note = (line.rstrip("\n").split("\t") + [""] * 4)[:4]
    checks.append({"status": st, "name": name, "seconds": float(secs or 0), "note": note})
meta = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "hostname": socket.gethostname(),
        "gpu": e["GPU_NAME"], "gpus": int(e["NGPU"]), "driver": e["DRIVER"], "mpi": e["MPI_VERSION"],
        "nccl": nccl, "nccl_lib": e["NCCL_LIB"], "shim": e["SHIM_VERSION"], "nranks": int(e["N"]),
        "stand_in": e["STAND_IN"] == "1", "quick": e["QUICK"] == "1", "limit_s": int(e["LIMIT"]),
        "passed": int(e["NP"]), "failed": int(e["NF"]), "skipped": int(e["NS"]), "checks": checks}
json.dump(meta, open(sys.argv[1], "w"), indent=1)
EOF
TABLE=$WORK/table.txt
if compgen -G "$RES/coll-*.json" >/dev/null || [ -f "$RES/check-coll.json" ]; then
    python3 bench/nccl_table.py "$RES" --annotate >"$TABLE" 2>&1 || echo "nccl_table.py failed" >>"$TABLE"
else
    echo "(no bench/coll results: no table)" >"$TABLE"
    {
        echo "gpu-nccl summary"
        echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); host $(hostname); GPU $GPU_NAME ($NGPU); driver $DRIVER"
        echo "MPI $MPI_VERSION; NCCL $NCCL_VERSION ($NCCL_LIB); $SHIM_VERSION; $N ranks"
    } >"$RES/summary.txt"
fi
{
    echo
    echo "checks:"
    while IFS=$'\t' read -r st name secs note; do
        printf '  %-5s %-46s %7ss  %s\n' "$st" "$name" "$secs" "$note"
    done <"$RESULTS"
} >>"$RES/summary.txt"
say "summary (full tables: $RES/summary.txt; everything: $RES)"
cat "$TABLE"
rm -rf "$WORK"
echo
echo "$np passed, $nf failed, $ns skipped"
sleep 0.2
[ "$nf" = 0 ]
