#!/bin/bash
# call Q4: 2 x H200, one GPU per rank, the library with IPC from 8 KiB by default (n15):
# gpu-check step 1 for the point-to-point, completion, IPC, chunk, fault and thread tests, step 3
# (stream_order) and step 4 (bench/suite.sh --check: floor, latency, bandwidth both ways,
# collectives, datatypes, every way side by side), GPU_CHECK_PLACES=per.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/q4; mkdir -p $D
TESTS="ipc_direct ipc_p2p ipc_probe ipc_memory ipc_same_gpu shared_gpu_window nb_send_window nb_completion nb_order nb_halo nb_pending nb_persistent nb_partitioned nb_calls nb_cancel_free host_recv_kinds host_recv_unseen held_requests p2p_blocking p2p_datatypes p2p_mprobe p2p_sendrecv p2p_status p2p_pending_issend fast_pingpong threads nb_threads alloc_kinds memkinds chunks_p2p chunks_exchange faults errors large"
env SHIM=$R/build/gpu-lib/n15/libcudampi.so GPU_CHECK_STEPS="1 3 4" GPU_CHECK_MPIS=system GPU_CHECK_LIMIT=470 GPU_CHECK_PLACES=per \
    GPU_CHECK_TESTS="$TESTS" BENCH_ONLY="floor latency bw bibw coll datatypes" OUT=$D bash scripts/gpu-check.sh > $D/gpu-check.out 2>&1
grep -E "passed|FAIL|SKIP" $D/summary.txt | tail -12
sed -n '/key numbers/,$p' $D/gpu-check.out | head -40
cd $D && mkdir -p per-gpu && tar xzf bench.tar.gz -C per-gpu --strip-components=1 2>/dev/null; rm -rf per-gpu/bin
ls per-gpu | head -50 | tr '\n' ' '
cd $OUT && tar czf q4.tgz q4/per-gpu q4/summary.txt && [ -n "$(grep FAIL q4/summary.txt)" ] && cp q4/logs.tar.gz $OUT/q4-logs.tgz
rm -rf q4/per-gpu q4/bench.tar.gz q4/logs.tar.gz
echo "elapsed $(( $(date +%s) - T0 )) s"
