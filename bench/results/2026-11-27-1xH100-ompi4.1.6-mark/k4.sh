#!/bin/bash
# call K4: one H100 shared by both ranks; bench/exchange of n16 (the last landing) and n18 (a
# host receive that no envelope fits goes to MPI unwatched), 4 KiB, 12 rounds, the order
# swapped each round; then gpu-check step 1 with n18 (host-receive, completion, IPC, chunk,
# fault and error tests)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/k4; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; lscpu | grep "Model name"; } > $D/machine.txt
mpicc -O2 -o /tmp/exchange bench/exchange.c -ldl || exit 1
for k in $(seq 12); do
  o="n16 n18"; [ $((k % 2)) = 0 ] && o="n18 n16"
  for m in $o; do
    r=$(env LD_PRELOAD= timeout 40 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core -x LD_PRELOAD=$R/build/gpu-lib/$m/libcudampi.so /tmp/exchange 100000 4096 20 2>&1 | tail -1)
    echo "$k $m 4096 $r"
  done
done > $D/exchange.txt 2>&1
sed 's/interleaved over 20 rounds: //' $D/exchange.txt | cut -c1-200
echo "exchange done at $(( $(date +%s) - T0 )) s"
env SHIM=$R/build/gpu-lib/n18/libcudampi.so GPU_CHECK_STEPS="1" GPU_CHECK_MPIS=system GPU_CHECK_BENCH=0 GPU_CHECK_LIMIT=150 GPU_CHECK_PLACES=shared \
    GPU_CHECK_TESTS="host_recv_unseen host_recv_kinds host_only host_cache errors faults p2p_blocking p2p_status p2p_mprobe nb_completion held_requests fast_pingpong ipc_p2p ipc_direct chunks_p2p small_writes threads" \
    OUT=$D/check bash scripts/gpu-check.sh > /dev/null 2>&1
grep -E "passed|FAIL" $D/check/summary.txt | tail -6
cp $D/check/summary.txt $D/gpu-check-summary.txt; rm -rf $D/check
echo "elapsed $(( $(date +%s) - T0 )) s"
