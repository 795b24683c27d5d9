#!/bin/bash
# call F1: 2 x H200. n14: an IPC send from the program's buffer records an interprocess event
# instead of waiting for the GPU; the receiver's copy waits for it on the GPU. gpu-check steps 1
# (IPC, window, completion, thread tests, both ranks on one GPU and one GPU per rank) and 3
# (stream_order) with every device message over IPC, then step 3 with the defaults; then the
# floor, and n13 (the library before) against n14, one GPU per rank, alternated: bench/pingpong
# and bench/bw one way, the device way alone, 1 KiB-64 MiB.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/f1; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; } > $D/machine.txt
TESTS="ipc_direct ipc_p2p ipc_probe ipc_same_gpu ipc_memory shared_gpu_window nb_send_window nb_completion nb_order nb_halo host_recv_kinds host_recv_unseen p2p_blocking fast_pingpong threads alloc_kinds"
env SHIM=$R/build/gpu-lib/n14/libcudampi.so GPU_CHECK_STEPS="1 3" GPU_CHECK_MPIS=system GPU_CHECK_BENCH=0 GPU_CHECK_LIMIT=240 \
    CUDAMPI_IPC_BYTES=0 CUDAMPI_IPC_SAME_GPU_BYTES=0 GPU_CHECK_TESTS="$TESTS" OUT=$D/ck1 bash scripts/gpu-check.sh > /dev/null 2>&1
env SHIM=$R/build/gpu-lib/n14/libcudampi.so GPU_CHECK_STEPS="3" GPU_CHECK_MPIS=system GPU_CHECK_BENCH=0 GPU_CHECK_LIMIT=60 \
    OUT=$D/ck2 bash scripts/gpu-check.sh > /dev/null 2>&1
for c in ck1 ck2; do grep -E "passed|FAIL" $D/$c/summary.txt | tail -8; cp $D/$c/summary.txt $D/gpu-check-summary-$c.txt; done
[ -n "$(grep -h FAIL $D/ck*/summary.txt)" ] && tar czf $OUT/f1-logs.tgz -C $D ck1/logs.tar.gz ck2/logs.tar.gz 2>/dev/null
rm -rf $D/ck1 $D/ck2
echo "checks done at $(( $(date +%s) - T0 )) s"
cl=/usr/local/cuda/lib64
for b in bw pingpong floor; do
  mpicc -O2 -I/usr/local/cuda/include -o /tmp/$b bench/$b.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
done
env LD_PRELOAD= mpirun --oversubscribe --allow-run-as-root -n 2 /tmp/floor -m 1K:64M -o $D/floor.json > $D/floor.txt 2>&1
one() { # lib shape round
  local lib=$1 shape=$2 k=$3 args
  case $shape in lat) args="/tmp/pingpong -m 1K:64M -r 1 -n 10" ;; bw) args="/tmp/bw -m 64K:64M" ;; esac
  env LD_PRELOAD= timeout 90 mpirun --oversubscribe --allow-run-as-root -n 2 -x LD_PRELOAD=$R/build/gpu-lib/$lib/libcudampi.so \
    $args -W device -o $D/$shape-$k-$lib.json > /dev/null 2>&1 || echo "$shape $k $lib failed"
}
for shape in lat bw; do
  for k in 1 2 3 4; do
    case $((k % 2)) in 1) o="n13 n14" ;; 0) o="n14 n13" ;; esac
    for v in $o; do one $v $shape $k; done
  done
  echo "$shape done at $(( $(date +%s) - T0 )) s"
done
python3 - $D <<'PY' | tee $D/summary.txt
import json, glob, statistics, sys, collections
d = sys.argv[1]
fl = {r["size"]: r for r in json.load(open(f"{d}/floor.json"))["results"]}
for shape, key, less in (("lat", "device_shim_us", True), ("bw", "device_shim_mbs", False)):
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))
    for f in glob.glob(f"{d}/{shape}-*.json"):
        k, v = f.rsplit("/", 1)[1][:-5].split("-")[1:]
        for r in json.load(open(f))["results"]:
            if r.get(key): runs[r["size"]][v][int(k)] = r[key]
    fk = "pp_us" if less else "window_mbs"
    print(f"\n{shape} ({'us one way' if less else 'MB/s'}): medians of 4 runs each, n14 against n13 (rounds n14 better), the floor ({fk})")
    for size in sorted(runs):
        a, b = runs[size]["n13"], runs[size]["n14"]
        ma, mb = statistics.median(a.values()), statistics.median(b.values())
        better = sum((b[k] < a[k]) if less else (b[k] > a[k]) for k in b if k in a)
        f = fl.get(size, {}).get(fk)
        print(f"  {size:>9}  n13 {ma:10.2f}  n14 {mb:10.2f}  ({better}/{len(b)})  floor {f if f is not None else '-'}")
PY
cd $OUT && tar czf f1.tgz f1/*.json && rm -f f1/lat-*.json f1/bw-*.json
echo "elapsed $(( $(date +%s) - T0 )) s"
