# cudampi-test: timeout=400
# The handshake at MPI_Init: ranks that agree run their program with nothing of the handshake
# in their messages (tests/scripts/handshake_program.c receives with wildcards on the tags the
# handshake uses); ranks whose fast paths or NCCL switch differ (or the sizes they take from,
# where on), or a rank without cudampi, stop the job at MPI_Init with one cudampi line naming
# what differs or which rank, well before any time-out.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
prog=$SCRATCH/handshake_program
$MPICC -O1 -Wall -o "$prog" tests/scripts/handshake_program.c || exit 1
read -ra mpirun <<<"$MPIRUN"
fwd=()
if [ -n "${MPI_ENV_FLAG:-}" ]; then
    for v in LD_PRELOAD CUDAMPI_HANDSHAKE_WAIT; do fwd+=("$MPI_ENV_FLAG" "$v"); done
fi
export CUDAMPI_HANDSHAKE_WAIT=3
failed=0

# run NAME EXPECT PATTERN -- MPMD-ARGS...: EXPECT is ok (exit 0, the program's "ok", no line
# of cudampi) or stop (non-zero exit within 60 s, exactly one cudampi line, matching PATTERN).
run() {
    local name=$1 expect=$2 pattern=$3 out=$SCRATCH/$1.log rc t0 t1 lines
    shift 4
    t0=$(date +%s)
    LD_PRELOAD=$SHIM timeout 120 "${mpirun[@]}" "${fwd[@]}" "$@" >"$out" 2>&1 </dev/null
    rc=$?
    t1=$(date +%s)
    lines=$(grep -c '^cudampi' "$out")
    case $expect in
    ok) if [ $rc = 0 ] && grep -q 'handshake program: ok' "$out" && [ "$lines" = 0 ]; then echo "$name: ok"; return; fi ;;
    stop) if [ $rc != 0 ] && [ $rc != 124 ] && [ $((t1 - t0)) -lt 60 ] && [ "$lines" = 1 ] && grep -q "^cudampi.*$pattern" "$out"; then
            echo "$name: stopped in $((t1 - t0)) s: $(grep '^cudampi' "$out")"
            return
        fi ;;
    esac
    echo "$name: FAILED (exit $rc after $((t1 - t0)) s, $lines cudampi lines, expected $expect $pattern); output:"
    sed 's/^/    /' "$out"
    failed=1
}

run agree ok '' -- -n 2 "$prog"
run agree-off ok '' -- -n 1 env CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0 "$prog" : -n 1 env CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0 "$prog"
run ipc-differs stop 'rank 0 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1, rank 1 has CUDAMPI_IPC=0 CUDAMPI_PIPELINE=1' -- \
    -n 1 "$prog" : -n 1 env CUDAMPI_IPC=0 "$prog"
run pipeline-differs stop 'rank 2 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=0' -- -n 2 "$prog" : -n 1 env CUDAMPI_PIPELINE=0 "$prog"
run bytes-differ stop 'rank 0 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1 CUDAMPI_IPC_BYTES=16384, rank 1 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1 CUDAMPI_IPC_BYTES=0' -- \
    -n 1 "$prog" : -n 1 env CUDAMPI_IPC_BYTES=0 "$prog"
run same-gpu-bytes-differ stop 'rank 1 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1 CUDAMPI_IPC_SAME_GPU_BYTES=0' -- \
    -n 1 "$prog" : -n 1 env CUDAMPI_IPC_SAME_GPU_BYTES=0 "$prog"
run bytes-off-agree ok '' -- -n 1 env CUDAMPI_IPC=0 "$prog" : -n 1 env CUDAMPI_IPC=0 CUDAMPI_IPC_BYTES=0 "$prog"
run nccl-differs stop 'rank 0 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1 CUDAMPI_NCCL=1, rank 1 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1 CUDAMPI_NCCL=0' -- \
    -n 1 "$prog" : -n 1 env CUDAMPI_NCCL=0 "$prog"
run nccl-bytes-differ stop 'rank 1 has CUDAMPI_IPC=1 CUDAMPI_PIPELINE=1 CUDAMPI_NCCL_BYTES=0' -- \
    -n 1 "$prog" : -n 1 env CUDAMPI_NCCL_BYTES=0 "$prog"
run nccl-off-agree ok '' -- -n 1 env CUDAMPI_NCCL=0 "$prog" : -n 1 env CUDAMPI_NCCL=0 CUDAMPI_NCCL_BYTES=0 "$prog"
run rank1-without stop 'rank 1 sent no handshake' -- -n 1 "$prog" : -n 1 env -u LD_PRELOAD "$prog"
run rank0-without stop 'rank 0 did not answer' -- -n 1 env -u LD_PRELOAD "$prog" : -n 1 "$prog"
exit $failed
