#!/bin/bash
# call M1: a lone byte or aligned 16-bit value set by a memset (n20) against the copy (n19,
# 9a516df): bench/pingpong's 1- and 8-byte ping-pong, ways interleaved over 11 rounds, in four
# alternating runs (n19 n20 n20 n19), one GPU per rank; then gpu-check step 1 with n20 on the
# device-receive tests, one GPU per rank and both ranks on GPU 0
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/m1; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; } > $D/machine.txt
mpicc -O2 -I/usr/local/cuda/include -o /tmp/pingpong bench/pingpong.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -lcuda -ldl -lm || exit 1
k=0
for m in n19 n20 n20 n19; do
  k=$((k + 1))
  env LD_PRELOAD= timeout 120 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to none -x LD_PRELOAD=$R/build/gpu-lib/$m/libcudampi.so \
    /tmp/pingpong -d cuda D D -m 1:16 -i 1000 -x 100 -r 11 -n 1000 -o $D/pingpong-$k-$m.json > $D/pingpong-$k-$m.txt 2>&1
  echo "run $k $m:"; grep -A4 "ways interleaved" $D/pingpong-$k-$m.txt | grep -E "^ +(1|8) "
done
echo "pingpong done at $(( $(date +%s) - T0 )) s"
env SHIM=$R/build/gpu-lib/n20/libcudampi.so GPU_CHECK_STEPS="1" GPU_CHECK_MPIS=system GPU_CHECK_BENCH=0 GPU_CHECK_LIMIT=200 GPU_CHECK_PLACES="shared per" \
    GPU_CHECK_TESTS="small_writes small_writes_shared p2p_blocking p2p_datatypes p2p_status coll_blocking coll_vw nb_completion nb_halo held_requests fast_pingpong dtype_payload memkinds errors faults" \
    OUT=$D/check bash scripts/gpu-check.sh > /dev/null 2>&1
grep -E "passed|FAIL" $D/check/summary.txt | tail -8
cp $D/check/summary.txt $D/gpu-check-summary.txt; rm -rf $D/check
echo "elapsed $(( $(date +%s) - T0 )) s"
