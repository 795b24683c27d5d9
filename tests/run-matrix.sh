#!/usr/bin/env bash
# tests/run-matrix.sh — run every C test on every MPI installation, print a table MPI x test, and
# as the very last line "N passed, N failed". Exit status 1 when anything failed.
#
#   tests/run-matrix.sh [--mpi NAME]... [--test NAME]... [--dir DIR] [--list]
#
#   --mpi NAME   only this MPI (repeatable); the MPIs are the build/mpi/<name>.env files that
#                tests/mpi/setup.sh wrote (ompi4 mpich4 ompi5 mpich5 mpich5abi)
#   --test NAME  only this test (repeatable; NAME without .c)
#   --dir DIR    where the tests are (repeatable; default tests/c, c_examples, tests/fortran and
#                tests/scripts); tests/mpi/hello.c always joins as
#                the row "mpi-hello" (a host-only program: the shim must pass it through)
#   --list       print the tests with their parsed headers and exit
#
# Fast paths: the default mode "shim" runs cudampi as a user gets it, with IPC and chunks on at
# their default thresholds. On the MPIs in FORCED_MPIS (default "ompi4 mpich4"; empty: none)
# every C test that runs preloaded runs twice more, in mode "ipc" (CUDAMPI_IPC_BYTES=0
# CUDAMPI_IPC_SAME_GPU_BYTES=0: every device message GPU to GPU) and mode "chunks"
# (CUDAMPI_IPC=0 CUDAMPI_PIPELINE_BYTES=0 CUDAMPI_PIPELINE_CHUNK=64K: every device message in
# chunks); a test's env= still wins, so a test that pins a path keeps it, and one with forced=no
# (collectives, which take no point-to-point path) runs in neither. A test with the header
# key nccl=yes runs once more on EVERY MPI, in mode "nccl" (after shim/ipc/chunks): cudampi with
# the stand-in NCCL (CUDAMPI_NCCL_LIB=$FIXTURE_NCCL CUDAMPI_NCCL_BYTES=0: every eligible device
# collective on NCCL) and a device per rank (FAKECUDA_DEVICES=4 CUDAMPI_TEST_GPU_PER_RANK=1);
# again a test's env= wins. Every C test of 2 ranks or more also runs on the MPIs in NODES_MPIS
# (default every MPI but mpich5abi, which is MPICH 5 again through the MPI-5 ABI, whose path
# between nodes is mpich5's), at its smallest rank count from 2, in mode
# "nodes": each rank a node of its own (tests/mpi/as-node.sh: a UTS namespace whose host name
# is nodeR), so that cudampi takes its between-nodes path while the MPI still moves the bytes
# (Open MPI 4's shared memory without its single-copy mechanism, as over a network: the sender
# moves the data once the receiver has matched, which cudampi's chunked sends must allow);
# where `unshare -u` is refused (or CUDAMPI_TEST_NODES=0) the mode is left out, and the
# summary says so.
#
# Environment: SHIM (default target/release/libcudampi.so), FIXTURE_LIB (build/fixture/lib),
# FIXTURE_INC (tests/fixture/include), FIXTURE_NCCL (build/fixture/nccl/libnccl.so.2, the
# stand-in NCCL that `make fixture` builds), CUDAMPI_* (e.g. CUDAMPI_DEBUG, CUDAMPI_STATS: forwarded
# to the with-shim runs; a test's env= wins over them),
# CARGO_TEST_RC (exit status of an earlier `cargo test`; counted as one more result).
#
# ---- Contract with the test programs ---------------------------------------------------------
# A test is a file DIR/<name>.c (or a Fortran DIR/<name>.F90, whose header starts with "!", or a
# bash script DIR/<name>.sh, header "#") with, within its first 10 lines, a header comment
#     // cudampi-test: ranks=2 without-shim=crash [key=value ...]
#   ranks=N | ranks=2,4     rank counts; the test runs once per count (default 2)
#   without-shim=crash      run once with no shim: it must exit non-zero or die by a signal
#                           (proves the fixture: a device pointer reached MPI); a time-out is
#                           not a crash and fails the cell
#   without-shim=pass       ... it must exit 0 (host-only tests)
#   without-shim=skip       no run without the shim (the default)
#   link=yes                also build <name>.link, linked -Wl,--no-as-needed -lcudampi -lmpi
#                           instead of preloaded, and run it
#   link=only               build <name> itself linked so (a program that calls what only
#                           cudampi defines); every mode runs it, the shim preloaded as well
#   include=DIR[,DIR]       more include directories, first on the path (relative to the repo)
#   mpis=ompi4,mpich4       run only on these MPIs (the others show "-")
#   env=NAME=VALUE[,NAME=VALUE]   extra environment for the runs (repeatable); given to the
#                           no-shim run too, since it may configure the fixture
#   timeout=SECONDS         per run (default 60)
#   extra-src=PATH[,PATH]   more sources compiled into the test (relative to the repo or DIR)
#   tool=PATH               a PMPI tool: built as build/tests/<mpi>/lib<base>.so and preloaded;
#                           the with-shim run becomes two runs, tool before and tool after the
#                           shim in LD_PRELOAD, both must pass; the no-shim run preloads the tool
#   nccl=yes                also run in mode "nccl" on every MPI (C and Fortran tests): the shim with
#                           CUDAMPI_NCCL_LIB=$FIXTURE_NCCL, CUDAMPI_NCCL_BYTES=0,
#                           FAKECUDA_DEVICES=4 and CUDAMPI_TEST_GPU_PER_RANK=1 (test_init puts
#                           rank r on device r % 4; env= wins over each of them). Where the
#                           stand-in NCCL does not exist (make fixture builds it) the mode fails
#                           with a line in its log saying so
#   nccl-ranks=2,4          the rank counts of mode nccl (default: all of ranks=; a count that
#                           ranks= lacks is ignored)
#   nodes=no                not in mode nodes: a test of what only happens inside a node (CUDA
#                           IPC, ranks sharing a GPU)
#   forced=no               not in modes ipc and chunks: a test that takes no point-to-point
#                           path (collectives) or whose env= pins its own, which they would run
#                           as mode shim does
#   forced=all              modes ipc and chunks on every MPI, not only those of FORCED_MPIS (the
#                           thread stress test, whose races depend on the MPI as much as the path)
#   unknown keys are ignored.
# Build: $MPICC -O1 -g -Wall -I DIR -I tests/c -I $FIXTURE_INC -o build/tests/<mpi>/<name> <src>
#        -L$FIXTURE_LIB -Wl,-rpath,$FIXTURE_LIB -lcudart -lcuda -lpthread -ldl -lm
#        A .F90 test is built with $MPIFORT (-cpp; its extra-src C files with $MPICC -c first) on
#        the MPIs that have one (the wheels do not: "-" there). A .sh test is not built: it runs
#        once (mode "script") with bash, the MPI's variables (MPICC, MPIRUN, MPI_FAMILY, ...),
#        SHIM, FIXTURE_LIB, FIXTURE_INC and SCRATCH (an empty folder of its own) exported, and
#        passes when it exits 0 (77: does not apply to this MPI, "-"); ranks=, without-shim=,
#        link= and tool= do not apply.
# Run:   $MPIRUN -n N build/tests/<mpi>/<name>, stdin /dev/null, a time limit, LD_PRELOAD of the
#        shim (Open MPI: forwarded with -x), CMTEST_MPI=<mpi> CMTEST_MODE=<mode> set for the
#        program. A test passes when it exits 0; it should print what it compared on failure.
# Logs:  build/logs/<mpi>/<name>.<mode>.log, mode: build, build-link, build-tool, noshim, shim,
#        link, tool-first, tool-last, ipc, chunks, nccl, nodes (with "-np<N>" appended when ranks lists
#        several counts).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=tests/mpi/lib.sh
. tests/mpi/lib.sh

SHIM=${SHIM:-target/release/libcudampi.so}
FIXTURE_LIB=${FIXTURE_LIB:-build/fixture/lib}
FIXTURE_INC=${FIXTURE_INC:-tests/fixture/include}
FIXTURE_NCCL=${FIXTURE_NCCL:-build/fixture/nccl/libnccl.so.2}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
case $FIXTURE_NCCL in /*) ;; *) FIXTURE_NCCL=$ROOT/$FIXTURE_NCCL ;; esac
case $FIXTURE_LIB in /*) ;; *) FIXTURE_LIB=$ROOT/$FIXTURE_LIB ;; esac
case $FIXTURE_INC in /*) ;; *) FIXTURE_INC=$ROOT/$FIXTURE_INC ;; esac

MPI_ORDER=(ompi4 mpich4 ompi5 mpich5 mpich5abi)
read -ra FORCED <<<"${FORCED_MPIS-ompi4 mpich4}"
read -ra NODES_ON <<<"${NODES_MPIS-ompi4 mpich4 ompi5 mpich5}"
# The variables of each forced mode.
FORCE_ipc=(CUDAMPI_IPC=1 CUDAMPI_IPC_BYTES=0 CUDAMPI_IPC_SAME_GPU_BYTES=0)
FORCE_chunks=(CUDAMPI_IPC=0 CUDAMPI_PIPELINE=1 CUDAMPI_PIPELINE_BYTES=0 CUDAMPI_PIPELINE_CHUNK=64K)
FORCE_nccl=(CUDAMPI_NCCL_LIB="$FIXTURE_NCCL" CUDAMPI_NCCL_BYTES=0 FAKECUDA_DEVICES=4 CUDAMPI_TEST_GPU_PER_RANK=1)
FORCE_nodes=(OMPI_MCA_btl_vader_single_copy_mechanism=none)
# Mode nodes: every rank a node of its own (tests/mpi/as-node.sh), where the machine allows it.
AS_NODES=no
[ "${CUDAMPI_TEST_NODES:-1}" != 0 ] && tests/mpi/as-node.sh --check && AS_NODES=yes
TEST_DIRS=()
HELLO=tests/mpi/hello.c
want_mpi=()
want_test=()
list_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --mpi) want_mpi+=("${2:?--mpi needs a name}"); shift ;;
    --mpi=*) want_mpi+=("${1#*=}") ;;
    --test) want_test+=("${2:?--test needs a name}"); shift ;;
    --test=*) want_test+=("${1#*=}") ;;
    --dir) TEST_DIRS+=("${2:?--dir needs a directory}"); shift ;;
    --dir=*) TEST_DIRS+=("${1#*=}") ;;
    --list) list_only=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-matrix: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#TEST_DIRS[@]} -gt 0 ] || TEST_DIRS=(tests/c c_examples tests/fortran tests/scripts)
for i in "${!TEST_DIRS[@]}"; do
    [ -d "${TEST_DIRS[$i]}" ] || { echo "run-matrix: no directory ${TEST_DIRS[$i]}" >&2; exit 2; }
    TEST_DIRS[$i]=$(cd "${TEST_DIRS[$i]}" && pwd) # absolute from here on
done
TEST_DIR=${TEST_DIRS[0]}

LOGS=build/logs
RESULTS=$LOGS/results.tsv
mkdir -p "$LOGS"
: >"$RESULTS"
ulimit -c 0 # the no-shim runs crash on purpose; no core files

is_fortran() { [[ $1 == *.F90 ]]; }
is_script() { [[ $1 == *.sh ]]; }

in_list() { # in_list WORD LIST...
    local w=$1 x
    shift
    for x in "$@"; do [ "$x" = "$w" ] && return 0; done
    return 1
}

# ---- tests and their headers -----------------------------------------------------------------

# parse_header FILE: set H_* from the header line; returns 1 when FILE has no header.
parse_header() {
    local f=$1 line tok k v part toks parts
    H_RANKS=(2) H_NOSHIM=skip H_LINK=no H_MPIS=() H_ENV=() H_TIMEOUT=60 H_EXTRA=() H_INCLUDE=() H_TOOL= H_BAD=
    H_NCCL=no H_NCCL_RANKS=() H_NODES=yes H_FORCED=yes
    line=$(head -n 10 "$f" | grep -m1 'cudampi-test:') || return 1
    line=${line#*cudampi-test:}
    line=${line%%\*/*}
    read -ra toks <<<"$line"
    for tok in "${toks[@]}"; do
        k=${tok%%=*}
        v=${tok#*=}
        case $k in
        ranks)
            IFS=, read -ra H_RANKS <<<"$v"
            for part in "${H_RANKS[@]}"; do [[ $part =~ ^[1-9][0-9]*$ ]] || H_BAD="bad ranks=$v"; done
            ;;
        without-shim)
            case $v in crash | pass | skip) H_NOSHIM=$v ;; *) H_BAD="bad without-shim=$v" ;; esac ;;
        link) case $v in yes | true | 1) H_LINK=yes ;; only) H_LINK=only ;; *) H_LINK=no ;; esac ;;
        include) IFS=, read -ra parts <<<"$v"; H_INCLUDE+=("${parts[@]}") ;;
        mpis) IFS=, read -ra H_MPIS <<<"$v" ;;
        timeout) [[ $v =~ ^[1-9][0-9]*$ ]] && H_TIMEOUT=$v || H_BAD="bad timeout=$v" ;;
        extra-src) IFS=, read -ra parts <<<"$v"; H_EXTRA+=("${parts[@]}") ;;
        tool) H_TOOL=$v ;;
        nccl) case $v in yes | true | 1) H_NCCL=yes ;; *) H_NCCL=no ;; esac ;;
        nodes) case $v in no | false | 0) H_NODES=no ;; *) H_NODES=yes ;; esac ;;
        forced) case $v in no | false | 0) H_FORCED=no ;; all) H_FORCED=all ;; *) H_FORCED=yes ;; esac ;;
        nccl-ranks)
            IFS=, read -ra H_NCCL_RANKS <<<"$v"
            for part in "${H_NCCL_RANKS[@]}"; do [[ $part =~ ^[1-9][0-9]*$ ]] || H_BAD="bad nccl-ranks=$v"; done
            ;;
        env)
            # NAME=VALUE,NAME=VALUE; a comma not followed by NAME= belongs to the value
            IFS=, read -ra parts <<<"$v"
            for part in "${parts[@]}"; do
                if [[ $part =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || [ ${#H_ENV[@]} = 0 ]; then
                    H_ENV+=("$part")
                else
                    H_ENV[${#H_ENV[@]} - 1]+=",$part"
                fi
            done
            ;;
        esac
    done
    return 0
}

# resolve PATH: a path from a header, relative to the repo root or else to the test directory
resolve() {
    if [[ $1 == /* ]]; then echo "$1"; elif [ -e "$1" ]; then echo "$ROOT/$1"; elif [ -e "$TEST_DIR/$1" ]; then echo "$TEST_DIR/$1"; else echo "$ROOT/$1"; fi
}

TESTS=() # name:path
if [ -f "$HELLO" ]; then TESTS+=("mpi-hello:$ROOT/$HELLO"); fi
for d in "${TEST_DIRS[@]}"; do
    for f in "$d"/*.c "$d"/*.F90 "$d"/*.sh; do
        [ -e "$f" ] || continue
        head -n 10 "$f" | grep -q 'cudampi-test:' || continue # helpers, tools: no header
        n=$(basename "${f%.*}")
        TESTS+=("$n:$f")
    done
done
if [ ${#want_test[@]} -gt 0 ]; then
    sel=()
    for t in "${TESTS[@]}"; do in_list "${t%%:*}" "${want_test[@]}" && sel+=("$t"); done
    for w in "${want_test[@]}"; do
        found=0
        for t in "${TESTS[@]}"; do [ "${t%%:*}" = "$w" ] && found=1; done
        [ $found = 1 ] || echo "run-matrix: no test named '$w' in ${TEST_DIRS[*]}" >&2
    done
    TESTS=("${sel[@]+"${sel[@]}"}")
fi

if [ $list_only = 1 ]; then
    for t in "${TESTS[@]+"${TESTS[@]}"}"; do
        parse_header "${t#*:}"
        nccl=
        [ "$H_NCCL" = yes ] && nccl=" nccl=yes${H_NCCL_RANKS[0]+ nccl-ranks=$(IFS=,; echo "${H_NCCL_RANKS[*]}")}"
        printf '%-24s ranks=%s without-shim=%s link=%s timeout=%s%s%s%s%s%s%s\n' "${t%%:*}" \
            "$(IFS=,; echo "${H_RANKS[*]}")" "$H_NOSHIM" "$H_LINK" "$H_TIMEOUT" \
            "${H_MPIS[0]+ mpis=$(IFS=,; echo "${H_MPIS[*]}")}" "${H_ENV[0]+ env=$(IFS=' '; echo "${H_ENV[*]}")}" \
            "${H_EXTRA[0]+ extra-src=$(IFS=,; echo "${H_EXTRA[*]}")}" "${H_TOOL:+ tool=$H_TOOL}" "$nccl" \
            "${H_BAD:+  !! $H_BAD}"
    done
    exit 0
fi

# ---- MPIs --------------------------------------------------------------------------------------

MPIS=()
for f in build/mpi/*.env; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .env)
    in_list "$n" "${MPI_ORDER[@]}" || MPI_ORDER+=("$n")
done
for n in "${MPI_ORDER[@]}"; do
    [ -f "build/mpi/$n.env" ] || continue
    if [ ${#want_mpi[@]} -gt 0 ] && ! in_list "$n" "${want_mpi[@]}"; then continue; fi
    MPIS+=("$n")
done
for w in "${want_mpi[@]+"${want_mpi[@]}"}"; do
    in_list "$w" "${MPIS[@]+"${MPIS[@]}"}" || echo "run-matrix: MPI '$w' is not set up (no build/mpi/$w.env; run tests/mpi/setup.sh)" >&2
done

# ---- one cell ------------------------------------------------------------------------------------

# The link variant finds the shim under test through a private directory of symlinks, so
# SHIM=... overrides it too (the library's SONAME is libcudampi.so.0).
SHIM_LINKDIR=$ROOT/build/tests/shimlib
mkdir -p "$SHIM_LINKDIR"
ln -sfn "$SHIM" "$SHIM_LINKDIR/libcudampi.so"
ln -sfn "$SHIM" "$SHIM_LINKDIR/libcudampi.so.0"

now_ns() { date +%s%N; }

# launch LOG NP TIMEOUT PRELOAD EXTRA_ENV_NAME... -- BINARY
# Runs BINARY under $MPIRUN with LD_PRELOAD=PRELOAD (unset when empty); the variables named
# before "--" must be exported already, and are forwarded (-x for Open MPI).
launch() {
    local log=$1 np=$2 secs=$3 preload=$4 fwd=() v cmd
    shift 4
    while [ "$1" != -- ]; do fwd+=("$1"); shift; done
    shift
    read -ra cmd <<<"$MPIRUN"
    if [ -n "$preload" ]; then fwd+=(LD_PRELOAD); fi
    if [ -n "$MPI_ENV_FLAG" ]; then
        for v in "${fwd[@]+"${fwd[@]}"}"; do cmd+=("$MPI_ENV_FLAG" "$v"); done
    fi
    {
        echo "# $(date -u +%FT%TZ) $MPI_NAME ($MPI_VERSION), $np ranks, ${secs}s limit"
        echo "# LD_PRELOAD=${preload:-(none)}"
        for v in "${fwd[@]+"${fwd[@]}"}"; do [ "$v" = LD_PRELOAD ] || echo "# $v=${!v}"; done
        echo "# ${cmd[*]} -n $np $*"
    } >"$log.head"
    # LD_PRELOAD is given to the launcher (and so to the ranks) only, not to setsid/timeout
    local rc pre=(env -u LD_PRELOAD) t0
    [ -n "$preload" ] && pre=(env LD_PRELOAD="$preload")
    t0=$(now_ns)
    cudampi_run "$secs" "$log.body" "${pre[@]}" "${cmd[@]}" -n "$np" "$@"
    rc=$?
    {
        cat "$log.head" "$log.body"
        echo "# exit status $rc after $(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')s"
    } >"$log"
    rm -f "$log.head" "$log.body"
    return $rc
}

# run_script NAME SRC: a .sh test on the current MPI; prints "STATUS<TAB>DETAIL".
run_script() {
    local name=$1 src=$2 logdir=$LOGS/$MPI_NAME rc e
    local log=$logdir/$name.script.log
    mkdir -p "$logdir"
    rm -f "$logdir/$name".*.log
    export SCRATCH=$ROOT/build/tests/$MPI_NAME/$name
    rm -rf "$SCRATCH"
    mkdir -p "$SCRATCH"
    for e in "${H_ENV[@]+"${H_ENV[@]}"}"; do export "${e%%=*}=${e#*=}"; done
    export SHIM FIXTURE_LIB FIXTURE_INC MPICC MPIRUN MPI_FAMILY MPI_NAME
    cudampi_run "$H_TIMEOUT" "$log" bash "$src"
    rc=$?
    echo "# exit status $rc" >>"$log"
    if [ $rc = 0 ]; then printf 'pass\t\n'; elif [ $rc = 77 ]; then printf -- '-\t%s\n' "$log"; elif [ $rc = 124 ]; then printf 'FAIL(script-timeout)\t%s\n' "$log"; else printf 'FAIL(script)\t%s\n' "$log"; fi
}

# run_cell NAME SRC: build and run one test on the current MPI; prints "STATUS<TAB>DETAIL".
run_cell() {
    local name=$1 src=$2 bindir=build/tests/$MPI_NAME logdir=$LOGS/$MPI_NAME
    local bin=$ROOT/$bindir/$name tool_so= extra=() e np rc mode sfx preload fwd=() v
    local failed_modes=() first_log=
    mkdir -p "$bindir" "$logdir"
    rm -f "$logdir/$name".*.log

    for e in "${H_EXTRA[@]+"${H_EXTRA[@]}"}"; do extra+=("$(resolve "$e")"); done
    : >"$logdir/$name.build.log"
    local cflags=() linked=()
    for e in "${H_INCLUDE[@]+"${H_INCLUDE[@]}"}"; do cflags+=(-I "$(resolve "$e")"); done
    cflags+=(-O1 -g -Wall -I "$(dirname "$src")" -I "$ROOT/tests/c" -I "$FIXTURE_INC")
    # shellcheck disable=SC2206
    [ "$H_LINK" = only ] && linked=(-Wl,--no-as-needed -L"$SHIM_LINKDIR" -Wl,-rpath,"$SHIM_LINKDIR" -lcudampi $MPI_LINK_LIB)
    local cudalibs=(-L"$FIXTURE_LIB" -Wl,-rpath,"$FIXTURE_LIB" -lcudart -lcuda -lpthread -ldl -lm)

    # build: C with $MPICC; Fortran (.F90) with $MPIFORT, its extra C sources compiled first
    local cc=$MPICC objs=() o
    if is_fortran "$src"; then
        cc=$MPIFORT
        for e in "${extra[@]+"${extra[@]}"}"; do
            o=$ROOT/$bindir/$name.$(basename "$e").o
            if ! $MPICC "${cflags[@]}" -c -o "$o" "$e" >"$logdir/$name.build.log" 2>&1; then
                printf 'FAIL(build)\t%s\n' "$logdir/$name.build.log"
                return
            fi
            objs+=("$o")
        done
        extra=("${objs[@]}")
        mkdir -p "$bindir/$name.mod"
        cflags=(-O1 -g -cpp -ffree-line-length-none -fallow-argument-mismatch -w -I "$(dirname "$src")"
            -J "$ROOT/$bindir/$name.mod")
    fi
    if ! $cc "${cflags[@]}" -o "$bin" "$src" "${extra[@]+"${extra[@]}"}" "${linked[@]+"${linked[@]}"}" "${cudalibs[@]}" \
        >>"$logdir/$name.build.log" 2>&1; then
        printf 'FAIL(build)\t%s\n' "$logdir/$name.build.log"
        return
    fi
    if [ "$H_LINK" = yes ]; then
        # shellcheck disable=SC2086
        if ! $cc "${cflags[@]}" -o "$bin.link" "$src" "${extra[@]+"${extra[@]}"}" \
            -Wl,--no-as-needed -L"$SHIM_LINKDIR" -Wl,-rpath,"$SHIM_LINKDIR" -lcudampi $MPI_LINK_LIB \
            "${cudalibs[@]}" >"$logdir/$name.build-link.log" 2>&1; then
            printf 'FAIL(build-link)\t%s\n' "$logdir/$name.build-link.log"
            return
        fi
    fi
    if [ -n "$H_TOOL" ]; then
        tool_so=$ROOT/$bindir/lib$(basename "$H_TOOL" .c).so
        if ! $MPICC "${cflags[@]}" -shared -fPIC -o "$tool_so" "$(resolve "$H_TOOL")" "${cudalibs[@]}" \
            >"$logdir/$name.build-tool.log" 2>&1; then
            printf 'FAIL(build-tool)\t%s\n' "$logdir/$name.build-tool.log"
            return
        fi
    fi

    # forwarded: the header's env= to every run (it may configure the fixture as well as the
    # shim), the caller's CUDAMPI_* to the with-shim runs
    local envfwd=()
    export CMTEST_MPI=$MPI_NAME
    for e in "${H_ENV[@]+"${H_ENV[@]}"}"; do
        export "${e%%=*}=${e#*=}"
        in_list "${e%%=*}" "${envfwd[@]+"${envfwd[@]}"}" || envfwd+=("${e%%=*}")
    done
    fwd=("${envfwd[@]+"${envfwd[@]}"}")
    for v in $(compgen -e); do
        case $v in CUDAMPI_*) in_list "$v" "${fwd[@]+"${fwd[@]}"}" || fwd+=("$v") ;; esac
    done

    local modes=()
    [ "$H_NOSHIM" != skip ] && modes+=(noshim)
    if [ -n "$tool_so" ]; then modes+=(tool-first tool-last); else modes+=(shim); fi
    [ "$H_LINK" = yes ] && modes+=(link)
    if [ -z "$tool_so" ] && ! is_fortran "$src" && { [ "$H_FORCED" = all ] || { [ "$H_FORCED" = yes ] && in_list "$MPI_NAME" "${FORCED[@]+"${FORCED[@]}"}"; }; }; then
        modes+=(ipc chunks)
    fi
    [ "$H_NCCL" = yes ] && modes+=(nccl)
    [ -z "$tool_so" ] && ! is_fortran "$src" && [ "$AS_NODES" = yes ] && [ "$H_NODES" = yes ] && in_list "$MPI_NAME" "${NODES_ON[@]+"${NODES_ON[@]}"}" && modes+=(nodes)
    # mode nodes at the smallest rank count from 2 alone: the between-nodes path is the same
    # for more ranks, and CI's time is bounded
    local nodes_np=
    for np in "${H_RANKS[@]}"; do [ "$np" -ge 2 ] && { nodes_np=$np; break; }; done

    for np in "${H_RANKS[@]}"; do
        sfx=
        [ ${#H_RANKS[@]} -gt 1 ] && sfx=-np$np
        for mode in "${modes[@]}"; do
            if [ "$mode" = nccl ] && [ ${#H_NCCL_RANKS[@]} -gt 0 ] && ! in_list "$np" "${H_NCCL_RANKS[@]}"; then
                continue
            fi
            [ "$mode" = nodes ] && [ "$np" != "$nodes_np" ] && continue
            local log=$logdir/$name.$mode$sfx.log exe=$bin
            local wrap=()
            [ "$mode" = nodes ] && wrap=("$ROOT/tests/mpi/as-node.sh")
            export CMTEST_MODE=$mode
            case $mode in
            noshim) preload=$tool_so ;;
            shim) preload=$SHIM ;;
            tool-first) preload=$tool_so:$SHIM ;;
            tool-last) preload=$SHIM:$tool_so ;;
            link) preload=$tool_so exe=$bin.link ;;
            ipc | chunks | nodes) preload=$SHIM ;;
            nccl) preload=${tool_so:+$tool_so:}$SHIM ;;
            esac
            if [ "$mode" = noshim ]; then
                launch "$log" "$np" "$H_TIMEOUT" "$preload" CMTEST_MPI CMTEST_MODE "${envfwd[@]+"${envfwd[@]}"}" -- "$exe"
            else
                if [ ! -f "$SHIM" ]; then
                    echo "run-matrix: the shim $SHIM does not exist (cargo build --release)" >"$log"
                    printf 'FAIL(%s)\t%s\n' "$mode" "$log"
                    return
                fi
                local force=() modefwd=("${fwd[@]+"${fwd[@]}"}")
                case $mode in
                ipc) force=("${FORCE_ipc[@]}") ;;
                chunks) force=("${FORCE_chunks[@]}") ;;
                nccl) force=("${FORCE_nccl[@]}") ;;
                nodes) force=("${FORCE_nodes[@]}") ;;
                esac
                for e in "${force[@]+"${force[@]}"}"; do
                    in_list "${e%%=*}" "${envfwd[@]+"${envfwd[@]}"}" && continue
                    in_list "${e%%=*}" "${modefwd[@]}" || modefwd+=("${e%%=*}")
                done
                if [ "$mode" = nccl ] && [ ! -f "$FIXTURE_NCCL" ] &&
                    ! in_list CUDAMPI_NCCL_LIB "${envfwd[@]+"${envfwd[@]}"}"; then
                    echo "run-matrix: mode nccl needs the stand-in NCCL $FIXTURE_NCCL, which does not exist (make fixture builds it)" >"$log"
                    (exit 1)
                else
                    (
                        for e in "${force[@]+"${force[@]}"}"; do
                            in_list "${e%%=*}" "${envfwd[@]+"${envfwd[@]}"}" || export "${e%%=*}=${e#*=}"
                        done
                        launch "$log" "$np" "$H_TIMEOUT" "$preload" CMTEST_MPI CMTEST_MODE "${modefwd[@]}" -- "${wrap[@]+"${wrap[@]}"}" "$exe"
                    )
                fi
            fi
            rc=$?
            # every mode runs even after a failure (which ones failed tells fixture problems
            # from shim problems), except after a time-out
            local what=
            if [ "$mode" = noshim ] && [ "$H_NOSHIM" = crash ]; then
                if [ $rc = 0 ]; then
                    echo "# run-matrix: expected a crash without the shim, but it exited 0 (does the fixture catch device pointers?)" >>"$log"
                    what=no-crash
                fi
            elif [ $rc != 0 ]; then
                what=$mode
            fi
            [ $rc = 124 ] && what=$mode-timeout
            if [ -n "$what" ]; then
                in_list "$what" "${failed_modes[@]+"${failed_modes[@]}"}" || failed_modes+=("$what")
                [ -n "$first_log" ] || first_log=$log
                [ $rc = 124 ] && break 2
            fi
        done
    done
    if [ ${#failed_modes[@]} = 0 ]; then
        printf 'pass\t\n'
    else
        printf 'FAIL(%s)\t%s\n' "$(IFS=,; echo "${failed_modes[*]}")" "$first_log"
    fi
}

# ---- the matrix ----------------------------------------------------------------------------------

if [ ${#MPIS[@]} = 0 ]; then
    echo "run-matrix: no MPI installation is set up (tests/mpi/setup.sh writes build/mpi/<name>.env)"
fi
[ -f "$SHIM" ] || echo "run-matrix: warning: the shim $SHIM does not exist; every with-shim run will fail"
[ -d "$FIXTURE_LIB" ] || echo "run-matrix: warning: the fixture $FIXTURE_LIB does not exist; builds will fail"

for mpi in "${MPIS[@]+"${MPIS[@]}"}"; do
    (
        cudampi_clear_mpi_env
        # shellcheck disable=SC1090
        . "build/mpi/$mpi.env"
        if ! command -v "${MPICC%% *}" >/dev/null; then
            echo "run-matrix: $mpi: $MPICC is gone; run tests/mpi/setup.sh --force"
        fi
        for t in "${TESTS[@]+"${TESTS[@]}"}"; do
            name=${t%%:*} src=${t#*:}
            parse_header "$src"
            if { [ ${#H_MPIS[@]} -gt 0 ] && ! in_list "$mpi" "${H_MPIS[@]}"; } ||
                { is_fortran "$src" && [ -z "${MPIFORT:-}" ]; }; then
                printf '%s\t%s\t-\t\t0\n' "$mpi" "$name" >>"$RESULTS"
                continue
            fi
            t0=$(now_ns)
            if [ -n "$H_BAD" ]; then
                echo "run-matrix: $src: $H_BAD" >"$LOGS/$name.header.log"
                res=$(printf 'FAIL(header)\t%s' "$LOGS/$name.header.log")
            elif is_script "$src"; then
                res=$(run_script "$name" "$src")
            else
                res=$(run_cell "$name" "$src")
            fi
            secs=$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
            printf '%s\t%s\t%s\t%s\n' "$mpi" "$name" "$res" "$secs" >>"$RESULTS"
            printf '  %-10s %-28s %-18s %5ss\n' "$mpi" "$name" "${res%%$'\t'*}" "$secs"
        done
    )
done

# ---- report --------------------------------------------------------------------------------------

passed=0 failed=0
failures=()
if [ -n "${CARGO_TEST_RC:-}" ]; then
    if [ "$CARGO_TEST_RC" = 0 ]; then
        passed=$((passed + 1))
        echo "cargo test --release: pass"
    else
        failed=$((failed + 1))
        echo "cargo test --release: FAIL (exit status $CARGO_TEST_RC)"
        [ -f "$LOGS/cargo-test.log" ] && failures+=("cargo test|$LOGS/cargo-test.log")
    fi
fi

if [ ${#MPIS[@]} -gt 0 ]; then
    declare -A ST LOG
    declare -A CW # column widths
    w=4
    for t in "${TESTS[@]+"${TESTS[@]}"}"; do
        name=${t%%:*}
        [ ${#name} -gt $w ] && w=${#name}
    done
    for mpi in "${MPIS[@]}"; do CW[$mpi]=${#mpi}; done
    while IFS=$'\t' read -r mpi name st log _; do
        ST[$mpi/$name]=$st
        LOG[$mpi/$name]=$log
        [ ${#st} -gt "${CW[$mpi]:-0}" ] && CW[$mpi]=${#st}
    done <"$RESULTS"
    echo
    printf "%-${w}s" test
    for mpi in "${MPIS[@]}"; do printf "  %-${CW[$mpi]}s" "$mpi"; done
    echo
    for t in "${TESTS[@]+"${TESTS[@]}"}"; do
        name=${t%%:*}
        printf "%-${w}s" "$name"
        for mpi in "${MPIS[@]}"; do
            st=${ST[$mpi/$name]:--}
            case $st in
            pass) passed=$((passed + 1)) ;;
            -) ;;
            *) failed=$((failed + 1)); failures+=("$mpi $name $st|${LOG[$mpi/$name]:-}") ;;
            esac
            printf "  %-${CW[$mpi]}s" "$st"
        done
        echo
    done
    echo
    echo "MPIs:"
    for mpi in "${MPIS[@]}"; do
        printf '  %-10s %s\n' "$mpi" "$(cudampi_clear_mpi_env; . "build/mpi/$mpi.env"; echo "$MPI_VERSION: $MPIRUN")"
    done
    echo "shim: $SHIM"
    [ "$AS_NODES" = yes ] || echo "mode nodes: left out (unshare -u refused here, or CUDAMPI_TEST_NODES=0)"
else
    failed=$((failed + 1))
fi

if [ ${#failures[@]} -gt 0 ]; then
    n=30
    [ ${#failures[@]} -gt 8 ] && n=12
    for f in "${failures[@]}"; do
        echo
        echo "---- ${f%%|*}: tail of ${f#*|}"
        # control characters (a NUL from a dying rank, escape sequences) become '?'
        [ -f "${f#*|}" ] && tail -n $n "${f#*|}" | cut -c1-300 |
            LC_ALL=C tr '\000-\010\013\014\016-\037\177' '?' | sed 's/^/  | /'
    done
fi
echo
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
