#!/bin/bash
# call Q5: issue 26's single call with the library as submitted (n16, b74f397; gpu-check steps
# 1 2 3 4 6, one GPU per rank)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
T0=$(date +%s)
env SHIM=$PWD/build/gpu-lib/n16/libcudampi.so GPU_CHECK_STEPS="1 2 3 4 6" GPU_CHECK_PLACES=per GPU_CHECK_MPIS=system \
    BENCH_ONLY="floor latency bw bibw coll datatypes" bash scripts/gpu-check.sh > /dev/null 2>&1
tail -75 $OUT/summary.txt 2>/dev/null || tail -45 $OUT/gpu-check.log
grep -q FAIL $OUT/summary.txt || rm -f $OUT/logs.tar.gz
echo "elapsed $(( $(date +%s) - T0 )) s"
