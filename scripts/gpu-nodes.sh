#!/usr/bin/env bash
# scripts/gpu-nodes.sh — device messages between nodes, measured on one machine: bench/bw with
# each rank a node of its own (tests/mpi/as-node.sh, so that cudampi takes its between-nodes
# path while the MPI moves the bytes), 64 messages in flight, one way and both ways (-b), over
# Open MPI's shared memory and over TCP, host buffers through the real MPI beside device
# buffers through cudampi; then the tables of bench/nodes_table.py.
#
# Needs the prebuilt shim (SHIM, default target/release/libcudampi.so), CUDA (CUDA_HOME,
# default /usr/local/cuda), Open MPI's mpicc and mpirun on the PATH (MPICC and MPIRUN, the
# latter with its options, override them) and `unshare -u` (root, or a user namespace).
# Shared memory runs as the MPI finds it; NODES_SHM_ENV adds settings to those runs only
# (NODES_SHM_ENV=OMPI_MCA_btl_vader_single_copy_mechanism=none: the sender moves the data, as
# on a network). CUDAMPI_* in the environment reach every rank.
#
# Environment: NODES_SIZES (bench/bw -m, default 64K:64M), NODES_CAP (bench/bw -B, default 4G:
# 64 messages even at 64 MiB), NODES_ROUNDS (bench/bw -r, default 1: the ways in turn, medians),
# NODES_CHECK=1 (bench/bw -c: every message's bytes compared; the times then include it),
# NODES_TRANSPORTS (default "shm tcp"), NODES_TIMEOUT (seconds per run, default 150),
# NODES_RUN (the folder's name under the output, default "run"), SHIM, CUDA_HOME, MPICC,
# MPIRUN, FIXTURE_LIB and FIXTURE_INC (the stand-in driver instead of CUDA).
# Output, under $OUT if set, else build/gpu-nodes/: NODES_RUN/bw-shm.json, bw-shm-both.json,
# bw-tcp.json, bw-tcp-both.json with their printed tables (.txt), and nodes.png.
#
#   scripts/gpu-nodes.sh                                        (on the GPU machine)
#   NODES_RUN=after NODES_SHM_ENV=OMPI_MCA_btl_vader_single_copy_mechanism=none scripts/gpu-nodes.sh
#   stand-in (the figures mean nothing there):
#     . build/mpi/ompi4.env; FIXTURE_LIB=build/fixture/lib FIXTURE_INC=tests/fixture/include \
#         NODES_SIZES=1M:4M scripts/gpu-nodes.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
SHIM=${SHIM:-target/release/libcudampi.so}
case $SHIM in /*) ;; *) SHIM=$ROOT/$SHIM ;; esac
CUDA=${CUDA_HOME:-/usr/local/cuda}
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
RES=${OUT:-$ROOT/build/gpu-nodes}
DIR=$RES/${NODES_RUN:-run}
mkdir -p "$DIR"
BIN=$(mktemp -d "${TMPDIR:-/tmp}/gpu-nodes.XXXXXX")
trap 'rm -rf "$BIN"' EXIT

[ -f "$SHIM" ] || { echo "gpu-nodes: no shim at $SHIM" >&2; exit 1; }
tests/mpi/as-node.sh --check || { echo "gpu-nodes: unshare -u is refused here: no rank can be a node of its own" >&2; exit 1; }
if [ -n "${FIXTURE_LIB:-}" ]; then
    lib=$(cd "$FIXTURE_LIB" && pwd)
    cflags=(-I"$ROOT/${FIXTURE_INC:-tests/fixture/include}")
    libs=(-L"$lib" -Wl,-rpath,"$lib" -lcudart -lcuda)
else
    cflags=(-I"$CUDA/include")
    libs=(-L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64" -lcudart)
fi
$MPICC -O2 "${cflags[@]}" -o "$BIN/bw" bench/bw.c "${libs[@]}" -ldl -lm || exit 1

read -r -a launch <<<"$MPIRUN"
fwd=(-x LD_PRELOAD="$SHIM" -x CUDAMPI_BENCH_NCCL=)
for v in $(compgen -e); do
    case $v in CUDAMPI_*) fwd+=(-x "$v") ;; esac
done
failed=0
for tr in ${NODES_TRANSPORTS:-shm tcp}; do
    # the launcher's own choice of transports, but for TCP's
    run=() extra=()
    for ((i = 0; i < ${#launch[@]}; i++)); do
        if [ "$tr" = tcp ] && [ "${launch[i]}" = --mca ] && [ "${launch[i + 1]:-}" = btl ]; then
            i=$((i + 2))
            continue
        fi
        run+=("${launch[i]}")
    done
    case $tr in
    shm) for kv in ${NODES_SHM_ENV:-}; do extra+=(-x "$kv"); done ;;
    tcp) extra=(--mca btl tcp,self) ;;
    *) echo "gpu-nodes: unknown transport $tr (shm, tcp)" >&2; exit 2 ;;
    esac
    for both in "" -b; do
        f=$DIR/bw-$tr${both:+-both}
        if [ -n "$both" ]; then echo "== $tr, both ways"; else echo "== $tr, one way"; fi
        timeout "${NODES_TIMEOUT:-150}" "${run[@]}" -n 2 "${extra[@]}" "${fwd[@]}" tests/mpi/as-node.sh "$BIN/bw" $both \
            -m "${NODES_SIZES:-64K:64M}" -W host,device -B "${NODES_CAP:-4G}" -r "${NODES_ROUNDS:-1}" ${NODES_CHECK:+-c} -o "$f.json" >"$f.txt" 2>&1 || {
            echo "   failed (rc $?): $f.txt"
            failed=1
        }
        grep -E '^ +[0-9]+ ' "$f.txt"
    done
done
python3 bench/nodes_table.py "$RES" "$(basename "$DIR")"
exit $failed
