# cudampi-test: timeout=900
# Conformance: mpi4py's own test suite (test/main.py of mpi4py 4.1.2) on 2 ranks with host
# buffers, once without cudampi and once preloaded through scripts/cudampi-run. Both runs must
# end, every test must end the same way in both (so the same numbers of tests run, errors,
# failures and skips on each rank), and the run with cudampi must print nothing more: its
# stderr and stdout are those of the run without (lines sorted, as two ranks interleave them;
# durations masked), and no line of cudampi's own.
#
# One difference is expected and allowed, test by test: a test that mpi4py skips because the
# MPI library lacks an MPI-4 function (its reasons "mpi-isendrecv", "mpi-p2p-part") runs and
# passes under cudampi, which serves every function it exports (src/compat/). mpi4py's wheel
# binds those functions weakly (PyMPI_WEAK_CALL) and calls whichever resolve at run time, which
# is why the wheel, not a build from the sdist, is what is tested here.
#
# In `make test` (tests/run-matrix.sh, once per MPI): the binary wheel of mpi4py 4.1.2 and the
# sdist (for its test/ folder) are fetched with pip once into build/mpi4py-4.1.2/ (cached; exit
# 77 when neither pip nor the cache can give them). Run on the MPIs in MPI4PY_SUITE_MPIS
# (default "ompi4 mpich4", a few minutes each on 2 cores), "-" (77) on the others. Debian's
# MPICH calls its library libmpich.so.12; the wheel opens libmpi.so.12, so a link of that name
# goes into a folder on LD_LIBRARY_PATH and MPI4PY_MPIABI names the module.
#
# By hand (e.g. on a GPU machine with mpi4py installed and no network):
#   tests/scripts/mpi4py_suite.sh [options] [-- more test/main.py options]
#     --tests DIR     mpi4py's test/ folder (from the sdist: .gpu/mpi4py-test/test)
#     --installed     the mpi4py python3 imports (default: the cached wheel, fetched if needed)
#     --mpi NAME      an MPI of the test matrix (build/mpi/NAME.env); default: $MPIRUN or
#                     mpirun on the PATH, the family from its --version
#     --lib PATH      libcudampi.so (default $SHIM, else target/release/libcudampi.so)
#     --out DIR       where the runs are written (default build/mpi4py-suite)
#     --only MODE     one run: noshim (without cudampi) or shim (with it)
#     --against DIR   compare this run (shim) with the noshim run saved in DIR by an earlier call
#                     (e.g. a host-array run without cudampi against a --cupy run with it)
#     --np N          ranks (default 2)
#   Host arrays are "--no-cupy --no-numba" (and "--no-numpy" in make test); options after
#   "--" come later and win: "-- --cupy" adds CuPy arrays to the host ones (CuPy needs numpy,
#   and mpi4py.util.sync needs the array module, so neither can be left out). Compared with a
#   host-array run (--against), a test that skipped there for want of the array library this
#   run asks for (reason "cupy" or "numba") may pass here; a library's version line in the
#   banner is left out of the comparison.
#   Each run prints its four counts on one line per rank; the exit status is 0 when the runs
#   compare equal as above.
#
# Environment: MPI4PY_SUITE_MPIS, MPI4PY_SUITE_ARGS (more options for test/main.py, e.g.
# "-i test_util_pkl5"), MPI4PY_SUITE_LIMIT (seconds the run with cudampi may take, in place of
# the limit below), MPI4PY_SUITE_WATCHDOG (seconds one test may take before the Python
# stacks are dumped and the rank exits, default 60). Each run leaves in OUT/MODE/: rank<N>.txt
# (test by test, tests/python/mpi4py_suite.py), rank<N>.log (unittest's own output), and
# OUT/MODE.out, OUT/MODE.err (the job's stdout and stderr).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
VERSION=4.1.2
# shellcheck source=tests/mpi/lib.sh
. tests/mpi/lib.sh

# mpi4py's skip reasons for an MPI-4 function the library lacks and cudampi serves
SERVED_SKIPS="mpi-isendrecv mpi-p2p-part"

# ---- options -------------------------------------------------------------------------------------
matrix=0
[ -n "${SCRATCH:-}" ] && [ -n "${MPI_NAME:-}" ] && [ $# = 0 ] && matrix=1
tests= installed=0 mpi= lib=${SHIM:-} out= only= against= np=2 user_args=()
while [ $# -gt 0 ]; do
    case $1 in
    --tests) tests=$(cd "${2:?--tests needs a folder}" && pwd) || exit 2; shift ;;
    --installed) installed=1 ;;
    --mpi) mpi=${2:?--mpi needs a name}; shift ;;
    --lib) lib=${2:?--lib needs a path}; shift ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --only) only=${2:?--only needs noshim or shim}; shift ;;
    --against) against=${2:?--against needs a folder}; shift ;;
    --np) np=${2:?--np needs a number}; shift ;;
    --) shift; user_args=("$@"); break ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mpi4py_suite: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case $only in "" | noshim | shim) ;; *) echo "mpi4py_suite: --only noshim or --only shim" >&2; exit 2 ;; esac
if [ -n "$against" ]; then
    against=$(cd "$against" && pwd) || exit 2
    [ -f "$against/noshim/rank0.txt" ] || { echo "mpi4py_suite: no saved run without cudampi in $against" >&2; exit 2; }
    [ "$only" = noshim ] && { echo "mpi4py_suite: --against compares a run with cudampi" >&2; exit 2; }
    only=shim
fi

if [ $matrix = 1 ]; then
    read -ra want <<<"${MPI4PY_SUITE_MPIS-ompi4 mpich4}"
    case " ${want[*]} " in *" $MPI_NAME "*) ;; *)
        echo "mpi4py_suite: not run on $MPI_NAME (MPI4PY_SUITE_MPIS=\"${want[*]}\"): skipped"
        exit 77 ;;
    esac
    out=$SCRATCH
else
    if [ -n "$mpi" ]; then
        [ -f "build/mpi/$mpi.env" ] || { echo "mpi4py_suite: no build/mpi/$mpi.env" >&2; exit 2; }
        cudampi_clear_mpi_env
        # shellcheck disable=SC1090
        . "build/mpi/$mpi.env"
    else
        MPIRUN=${MPIRUN:-mpirun} MPI_NAME=${MPI_NAME:-default} MPI_LIBDIR=${MPI_LIBDIR:-}
        if [ -z "${MPI_FAMILY:-}" ]; then
            MPI_FAMILY=mpich
            ${MPIRUN%% *} --version 2>&1 | grep -qi 'open mpi\|open-mpi\|openrte' && MPI_FAMILY=openmpi
        fi
    fi
    out=${out:-$ROOT/build/mpi4py-suite}
    mkdir -p "$out" && out=$(cd "$out" && pwd)
    FIXTURE_LIB=${FIXTURE_LIB:-}
    [ -z "$FIXTURE_LIB" ] && [ -d "$ROOT/build/fixture/lib" ] && [ ! -e /dev/nvidiactl ] && FIXTURE_LIB=$ROOT/build/fixture/lib
fi
lib=${lib:-$ROOT/target/release/libcudampi.so}
case $lib in /*) ;; *) lib=$ROOT/$lib ;; esac
if [ "$only" != noshim ] && [ ! -f "$lib" ]; then echo "mpi4py_suite: no $lib (cargo build --release, or --lib)" >&2; exit 2; fi
if [ "$MPI_NAME" = mpich5abi ]; then echo "mpi4py_suite: the mpi4py wheel has no module for the MPI-5 ABI: skipped"; exit 77; fi

PY=$(command -v python3) || { echo "mpi4py_suite: no python3: skipped"; exit 77; }
tag=$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
cache=$ROOT/build/mpi4py-$VERSION
site=$cache/site-$tag # the wheel, extracted (pure files: no pip install, no dependencies)

# ---- mpi4py: the wheel and the suite, fetched once -----------------------------------------------
fetch() {
    local whl sdist tmp
    mkdir -p "$cache/dist"
    if [ $installed = 0 ] && [ ! -f "$site/mpi4py/__init__.py" ]; then
        whl=$(ls "$cache/dist/mpi4py-$VERSION-$tag-$tag-"*.whl 2>/dev/null | head -n 1)
        if [ -z "$whl" ]; then
            "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
                -d "$cache/dist" "mpi4py==$VERSION" || return 1
            whl=$(ls "$cache/dist/mpi4py-$VERSION-$tag-$tag-"*.whl 2>/dev/null | head -n 1)
            [ -n "$whl" ] || { echo "mpi4py_suite: pip gave no $tag wheel" >&2; return 1; }
        fi
        tmp=$site.tmp
        rm -rf "$tmp"
        "$PY" -m zipfile -e "$whl" "$tmp" && mv "$tmp" "$site" || return 1
    fi
    if [ -z "$tests" ]; then
        tests=$cache/test # test/ of the sdist (the wheel has none)
        if [ ! -f "$tests/main.py" ]; then
            sdist=$cache/dist/mpi4py-$VERSION.tar.gz
            if [ ! -f "$sdist" ]; then
                # --no-binary for mpi4py alone: pip prepares the sdist's metadata (setuptools and
                # Cython wheels into a throw-away environment, seconds); it builds nothing
                "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary=mpi4py \
                    -d "$cache/dist" "mpi4py==$VERSION" || return 1
            fi
            tmp=$cache/test.tmp
            rm -rf "$tmp" && mkdir -p "$tmp"
            tar -xzf "$sdist" -C "$tmp" --strip-components=2 "mpi4py-$VERSION/test" && mv "$tmp" "$tests" || return 1
        fi
    fi
}
mkdir -p "$ROOT/build"
exec 9>"$ROOT/build/mpi4py.lock" # one fetch at a time
flock 9
if ! fetch; then
    echo "mpi4py_suite: cannot get mpi4py $VERSION (wheel for $tag and sdist; no pip or no network, and nothing in $cache): skipped"
    exit 77
fi
flock -u 9
[ -f "$tests/main.py" ] || { echo "mpi4py_suite: no main.py in $tests" >&2; exit 2; }

# ---- how mpi4py finds this MPI -----------------------------------------------------------------
ld=${FIXTURE_LIB:-}
if [ $installed = 0 ]; then
    # MPI4PY_MPIABI picks the wheel's module (MPI.openmpi.*.so or MPI.mpich.*.so), which opens
    # libmpi.so.40 or libmpi.so.12
    case $MPI_FAMILY in openmpi) abi=openmpi libmpi=libmpi.so.40 ;; *) abi=mpich libmpi=libmpi.so.12 ;; esac
    if [ -n "$MPI_LIBDIR" ] && [ ! -e "$MPI_LIBDIR/$libmpi" ] && [ "$abi" = mpich ] && [ -e "$MPI_LIBDIR/libmpich.so.12" ]; then
        mkdir -p "$out/lib"
        ln -sfn "$MPI_LIBDIR/libmpich.so.12" "$out/lib/libmpi.so.12"
        ld=$ld:$out/lib
    fi
    case $MPI_LIBDIR in "" | /usr/lib* | /lib*) ;; *) ld=$ld:$MPI_LIBDIR ;; esac
    export PYTHONPATH=$site MPI4PY_MPIABI=$abi
fi
ld=${ld#:}
[ -n "$ld" ] && export LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MPI4PY_SUITE_WATCHDOG=${MPI4PY_SUITE_WATCHDOG:-60}
run=$MPIRUN
if [ "$MPI_FAMILY" = openmpi ]; then
    for v in PYTHONPATH MPI4PY_MPIABI LD_LIBRARY_PATH MPI4PY_SUITE_WATCHDOG; do [ -n "${!v:-}" ] && run="$run -x $v"; done
fi

# ---- what runs -----------------------------------------------------------------------------------
# Left out, in both runs alike, for the time they take on 2 cores: dynproc and spawn (process
# management: minutes), the file tests on COMM_WORLD (a minute and more; test_io's COMM_SELF
# classes, which make the same calls, still run) and TestDatatypePickle.
args=(--no-cupy --no-numba)
[ $matrix = 1 ] && args+=(--no-numpy)
args+=(-e test_dynproc -e test_spawn -x 'test_io.*World.*' -x TestDatatypePickle)
case $MPI_NAME in
mpich4)
    # MPICH 4.0's passive-target atomics break mpi4py.util.sync on more than one rank, with no
    # cudampi at all: "cannot acquire already held mutex", then a hang in
    # TestConditionMutexWorld.testWaitForNotify (mpi4py's own skips start at newer MPICHs)
    args+=(-x 'test_util_sync.*World*') ;;
esac
# shellcheck disable=SC2206
args+=(${MPI4PY_SUITE_ARGS:-} "${user_args[@]+"${user_args[@]}"}")

# skip reasons of the array libraries this run adds (with --against a host-array run)
ARRAY_SKIPS=
for a in "${user_args[@]+"${user_args[@]}"}"; do
    case $a in --cupy) ARRAY_SKIPS="$ARRAY_SKIPS cupy" ;; --numba) ARRAY_SKIPS="$ARRAY_SKIPS numba" ;; esac
done
[ -n "$against" ] || ARRAY_SKIPS=

# suite MODE LIMIT: one run into $out/MODE*; sets SECS and RC
suite() {
    local mode=$1 limit=$2 dir=$out/$1 t0 pid left
    local cmd=(env -u LD_PRELOAD $run -n "$np")
    rm -rf "$dir" "$out/$mode.out" "$out/$mode.err" && mkdir -p "$dir"
    # shellcheck disable=SC2086
    [ "$mode" = shim ] && cmd=(env MPIRUN="$run" CUDAMPI_LIB="$lib" scripts/cudampi-run -n "$np")
    t0=$(date +%s%N)
    # a session of its own: ranks a killed launcher leaves behind are found and killed
    setsid timeout -k 10 "$limit" "${cmd[@]}" "$PY" tests/python/mpi4py_suite.py "$dir" "$tests" "${args[@]}" \
        >"$out/$mode.out" 2>"$out/$mode.err" </dev/null &
    pid=$!
    wait $pid
    RC=$?
    left=$(ps -eo pid=,sid=,stat= | awk -v s="$pid" '$2 == s && $3 !~ /^Z/ { print $1 }')
    # shellcheck disable=SC2086
    [ -z "$left" ] || kill -KILL $left 2>/dev/null
    SECS=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
}

ranks() { seq 0 $((np - 1)); }

# counts DIR: the counts of each rank on one line ("rank0 run=.. errors=.. failures=..
# skipped=.. | rank1 ..."); a rank that did not finish gets its counts so far and where it stopped
counts() {
    local d=$1 r f line
    for r in $(ranks); do
        f=$d/rank$r.txt
        [ "$r" = 0 ] || printf ' | '
        if [ ! -f "$f" ]; then printf 'rank%s: no record' "$r"; continue; fi
        line=$(grep '^counts ' "$f" | tail -n 1)
        if [ -n "$line" ]; then
            printf 'rank%s %s' "$r" "${line#counts }"
        else
            awk -v r="$r" '$1 == "start" { n++; cur = $2; done = 0 } $1 ~ /^(ok|skip|FAIL|ERROR|xfail|xpass)$/ { done = 1 }
                $1 == "ERROR" { e++ } $1 == "FAIL" { fl++ } $1 == "skip" { s++ }
                END { printf "rank%d INCOMPLETE run=%d errors=%d failures=%d skipped=%d%s", r, n, e, fl, s, done ? "" : ", stuck in " cur }' "$f"
        fi
    done
}

complete() { # complete DIR: every rank wrote its counts
    local r
    for r in $(ranks); do grep -q '^counts ' "$1/rank$r.txt" 2>/dev/null || return 1; done
}

# outcomes DIR RANK: "test-id outcome reason" per test, sorted (reason: a skip's, else "-")
outcomes() {
    awk '$1 ~ /^(ok|skip|FAIL|ERROR|xfail|xpass)$/ { r = "-"; if ($1 == "skip" && NF > 3) { r = $4; for (i = 5; i <= NF; i++) r = r "_" $i } print $2, $1, r }' \
        "$1/rank$2.txt" 2>/dev/null | sort -k1,1
}

# printed MODE DIR: the job's stdout and stderr, lines sorted (ranks interleave them), durations
# masked
printed() {
    cat "$2/$1.out" "$2/$1.err" 2>/dev/null | sed -E 's/[0-9]+(\.[0-9]+)?s\b/Ns/g' |
        if [ -n "$ARRAY_SKIPS" ]; then grep -vE '^\[[0-9]+@[^]]*\] (cupy|numba) '; else cat; fi | LC_ALL=C sort
}

echo "mpi4py_suite: mpi4py $VERSION ($([ $installed = 1 ] && echo installed || echo "wheel, $abi module")) on $MPI_NAME, $np ranks, $PY"
echo "mpi4py_suite: $tests/main.py ${args[*]}"

base=$out
if [ -n "$against" ]; then
    base=$against
    echo "without cudampi: $(counts "$base/noshim") (saved in $base)"
elif [ "$only" != shim ]; then
    suite noshim 480
    echo "without cudampi: $(counts "$out/noshim"); ${SECS}s, exit status $RC"
    if [ "$RC" != 0 ] || ! complete "$out/noshim"; then
        echo "mpi4py_suite: FAILED: the suite itself fails on $MPI_NAME without cudampi (exit status $RC); nothing to compare with. $out/noshim.err:"
        grep -h -A1 -E '^(ERROR|FAIL) ' "$out"/noshim/rank*.txt | head -n 40
        tail -n 40 "$out/noshim.err"
        exit 1
    fi
    if grep -q '^counts run=0 ' "$out/noshim/rank0.txt"; then
        echo "mpi4py_suite: FAILED: no test ran (see the options to test/main.py above)"
        exit 1
    fi
    [ "$only" = noshim ] && exit 0
fi
base_secs=$(awk '$1 ~ /^(ok|skip|FAIL|ERROR|xfail|xpass)$/ { s += $3 } END { printf "%d", s }' "$base/noshim/rank0.txt")

# the run with cudampi may take longer, not without end: twice the baseline and two minutes, at
# most 8 minutes (a test that hangs ends sooner: the watchdog)
# (a run that adds device arrays moves many small device messages on top: up to 20 minutes)
limit=$(awk -v s="$base_secs" 'BEGIN { l = 2 * s + 120; if (l > 480) l = 480; printf "%d", l }')
[ -z "$ARRAY_SKIPS" ] || limit=1200
limit=${MPI4PY_SUITE_LIMIT:-$limit}
suite shim "$limit"
why=
{ [ "$RC" = 124 ] || [ "$RC" = 137 ]; } && why=" (timed out after ${limit}s)"
grep -q '^Timeout (' "$out/shim.err" && why=" (a test ran past the ${MPI4PY_SUITE_WATCHDOG}s watchdog: hung)"
echo "with cudampi:    $(counts "$out/shim"); ${SECS}s, exit status $RC$why"

failed=0
[ "$RC" = 0 ] || failed=1
complete "$out/shim" || failed=1
# test by test; a skip for a function cudampi serves may become a pass, nothing else may change
allowed=0 array_runs=0
for r in $(ranks); do
    diffs=$(join -a 1 -a 2 -e '(none)' -o 0,1.2,2.2,1.3,2.3 <(outcomes "$base/noshim" "$r") <(outcomes "$out/shim" "$r") | awk '$2 != $3')
    [ -n "$diffs" ] || continue
    served=$(awk -v ok=" $SERVED_SKIPS " '$2 == "skip" && $3 == "ok" && index(ok, " " $4 " ")' <<<"$diffs")
    arrays=$(awk -v ok=" $ARRAY_SKIPS " '$2 == "skip" && $3 == "ok" && index(ok, " " $4 " ")' <<<"$diffs")
    other=$(awk -v ok=" $SERVED_SKIPS $ARRAY_SKIPS " '!($2 == "skip" && $3 == "ok" && index(ok, " " $4 " "))' <<<"$diffs")
    [ -z "$arrays" ] || array_runs=$((array_runs + $(grep -c . <<<"$arrays")))
    [ -z "$served" ] || allowed=$((allowed + $(grep -c . <<<"$served")))
    [ -n "$other" ] || continue
    failed=1
    changed=$(awk '$3 != "(none)"' <<<"$other")
    missed=$(awk '$3 == "(none)"' <<<"$other" | grep -c .)
    echo "rank $r: $(grep -c . <<<"$changed") tests end differently, $missed not reached with cudampi (test, without, with, skip reasons without and with):"
    [ -z "$changed" ] || head -n 60 <<<"$changed" | sed 's/^/    /'
done
[ $array_runs = 0 ] || echo "mpi4py_suite: $array_runs test runs (all ranks) skipped without cudampi for want of an array library this run adds ($(tr ' ' , <<<"${ARRAY_SKIPS# }")) pass with it"
[ $allowed = 0 ] || echo "mpi4py_suite: $allowed test runs (all ranks) skipped without cudampi for a function the MPI library lacks ($(tr ' ' , <<<"$SERVED_SKIPS")) pass with it: served by cudampi"
# unittest's own output goes to rank<N>.log: what the job prints is mpi4py's banner, and
# whatever else a library writes
# (a run that did not end prints its stacks: reported below instead)
pdiff=
complete "$out/shim" && pdiff=$(diff <(printed noshim "$base") <(printed shim "$out"))
if [ -n "$pdiff" ]; then
    failed=1
    echo "mpi4py_suite: the run with cudampi prints differently (stdout and stderr, lines sorted; < without, > with):"
    head -n 40 <<<"$pdiff" | sed 's/^/    /'
fi
# cudampi's own lines ("cudampi: ...", "cudampi[N]: ...") have no place in a host-only run
mine=$(grep -hE '(^|[^[:alnum:]_./-])cudampi(\[[0-9]+\])?:' "$out/shim.out" "$out/shim.err" "$out"/shim/rank*.log 2>/dev/null)
if [ -n "$mine" ]; then
    failed=1
    echo "mpi4py_suite: cudampi printed in a host-only run (distinct lines):"
    sed 's/cudampi\[[0-9]*\]/cudampi[N]/' <<<"$mine" | sort | uniq -c | sort -rn | head -n 30
fi
if grep -q '^  ! ' "$out"/shim/rank*.txt 2>/dev/null; then
    echo "exceptions with cudampi (distinct):"
    grep -h '^  ! ' "$out"/shim/rank*.txt | sort | uniq -c | sort -rn | head -n 30
fi
if [ $failed = 0 ]; then
    echo "mpi4py_suite: PASS: every test ends the same way with and without cudampi, and prints the same"
    exit 0
fi
if ! complete "$out/shim"; then
    echo "mpi4py_suite: the run with cudampi did not finish; the end of $out/shim.err:"
    grep -v '^  File ' "$out/shim.err" | tail -n 25
    grep -A12 -m1 'most recent call first' "$out/shim.err" | head -n 30
fi
echo "mpi4py_suite: FAILED: cudampi changes what mpi4py's suite sees on $MPI_NAME (logs: $out)"
exit 1
