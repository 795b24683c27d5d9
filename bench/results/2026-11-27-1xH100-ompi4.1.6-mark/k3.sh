#!/bin/bash
# call K3: one H100 shared by both ranks, the library as submitted (n16, b74f397; this session's HEAD builds to the same bytes).
# gpu-check step 1 (host-receive, completion, IPC and chunk tests); bench/exchange of n16 and
# n16 with the fast paths off, 12 rounds alternated, 4 KiB; the suite (floor, latency, bw, bibw,
# 4 pairs of alternating runs)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/k3; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; lscpu | grep "Model name"; } > $D/machine.txt
env SHIM=$R/build/gpu-lib/n16/libcudampi.so GPU_CHECK_STEPS="1" GPU_CHECK_MPIS=system GPU_CHECK_BENCH=0 GPU_CHECK_LIMIT=110 GPU_CHECK_PLACES=shared \
    GPU_CHECK_TESTS="host_recv_unseen host_recv_kinds nb_completion nb_send_window nb_halo held_requests p2p_blocking fast_pingpong ipc_p2p ipc_direct ipc_same_gpu shared_gpu_window chunks_p2p threads" \
    OUT=$D/check bash scripts/gpu-check.sh > /dev/null 2>&1
grep -E "passed|FAIL" $D/check/summary.txt | tail -6
cp $D/check/summary.txt $D/gpu-check-summary.txt; rm -rf $D/check
echo "check done at $(( $(date +%s) - T0 )) s"
mpicc -O2 -o /tmp/exchange bench/exchange.c -ldl || exit 1
run() { # label lib extra size
  env LD_PRELOAD= timeout 40 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core $3 -x LD_PRELOAD=$R/build/gpu-lib/$2/libcudampi.so /tmp/exchange 100000 $4 20 2>&1 | tail -1
}
for k in $(seq 12); do
  o="n16 n16off"; [ $((k % 2)) = 0 ] && o="n16off n16"
  for m in $o; do
    extra=; [ $m = n16off ] && extra="-x CUDAMPI_IPC=0 -x CUDAMPI_PIPELINE=0"
    echo "$k $m 4096 $(run $m ${m%off} "$extra" 4096)"
  done
done > $D/exchange.txt 2>&1
sed 's/interleaved over 20 rounds: //' $D/exchange.txt | cut -c1-160
echo "exchange done at $(( $(date +%s) - T0 )) s"
left=$(( 585 - ($(date +%s) - T0) ))
env MPIRUN="mpirun --oversubscribe --allow-run-as-root" SHIM=$R/build/gpu-lib/n16/libcudampi.so BENCH_ONLY="floor latency bw bibw" BENCH_PAIRS=4 \
    timeout $left bash bench/suite.sh -o $D/suite > $D/suite-tables.txt 2>&1
echo "suite rc $? after $(( $(date +%s) - T0 )) s"
rm -rf $D/suite/bin
[ -f $D/suite/paths.json ] || python3 bench/plot.py $D/suite > /dev/null 2>&1
sed -n '/^the defaults against staging-only/,$p' $D/suite-tables.txt | head -16
cd $OUT && tar czf k3-suite.tgz k3/suite && rm -rf k3/suite
echo "elapsed $(( $(date +%s) - T0 )) s"
