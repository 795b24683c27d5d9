#!/bin/bash
# call M2: one H100 shared by both ranks, n20 (a lone byte set by a memset): gpu-check step 3
# (tests/gpu/stream_order.cu, now with 1-byte receives read at once from a non-blocking stream)
# and step 1 on the device-receive tests
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/m2; mkdir -p $D
env SHIM=$R/build/gpu-lib/n20/libcudampi.so GPU_CHECK_STEPS="1 3" GPU_CHECK_MPIS=system GPU_CHECK_BENCH=0 GPU_CHECK_LIMIT=200 \
    GPU_CHECK_TESTS="small_writes small_writes_shared p2p_blocking coll_blocking nb_completion held_requests fast_pingpong memkinds" \
    OUT=$D/check bash scripts/gpu-check.sh > /dev/null 2>&1
grep -E "PASS|FAIL|passed" $D/check/summary.txt | tail -14
grep -E "^ +(ok|FAIL) +(8|9)\." $D/check/gpu-check.log | head; grep -h -E "^ +(ok|FAIL)" $D/check/gpu-check.log | head -20
cp $D/check/summary.txt $D/gpu-check-summary.txt; grep -E "^ +(ok|FAIL|note)" $D/check/gpu-check.log > $D/stream_order.txt; rm -rf $D/check
echo "elapsed $(( $(date +%s) - T0 )) s"
