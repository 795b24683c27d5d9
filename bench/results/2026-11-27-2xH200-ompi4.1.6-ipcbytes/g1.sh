#!/bin/bash
# call G1: 2 x H200, one GPU per rank, the library as submitted (n13). Where should IPC start on
# a node whose ranks have GPUs of their own? The defaults (IPC from 64 KiB) against IPC from
# 16 KiB and from 4 KiB (CUDAMPI_IPC_BYTES), and staging-only; bench/pingpong, bench/bw one way
# and both ways, 1-64 KiB, the device way alone, 3 rounds in rotating order.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/g1; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; } > $D/machine.txt
cl=/usr/local/cuda/lib64
for b in bw pingpong; do
  mpicc -O2 -I/usr/local/cuda/include -o /tmp/$b bench/$b.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
done
one() { # variant shape round
  local v=$1 shape=$2 k=$3 extra= args
  case $v in s) extra="-x CUDAMPI_IPC=0 -x CUDAMPI_PIPELINE=0" ;; i16) extra="-x CUDAMPI_IPC_BYTES=16K" ;; i4) extra="-x CUDAMPI_IPC_BYTES=4K" ;; esac
  case $shape in lat) args="/tmp/pingpong -m 1K:64K -S 2048,8192,32768 -r 1 -n 10" ;; bw) args="/tmp/bw -2 -m 1K:64K" ;; bibw) args="/tmp/bw -b -2 -m 1K:64K" ;; esac
  env LD_PRELOAD= timeout 60 mpirun --oversubscribe --allow-run-as-root -n 2 $extra -x LD_PRELOAD=$R/build/gpu-lib/n13/libcudampi.so \
    $args -W device -o $D/$shape-$k-$v.json > /dev/null 2>&1 || echo "$shape $k $v failed"
}
orders=("d i16 i4 s" "i4 s d i16" "i16 d s i4")
for shape in lat bw bibw; do
  for k in 1 2 3; do
    for v in ${orders[$((k-1))]}; do one $v $shape $k; done
  done
  echo "$shape done at $(( $(date +%s) - T0 )) s"
done
python3 - $D <<'PY' | tee $D/summary.txt
import json, glob, statistics, sys, collections
d = sys.argv[1]
for shape, key, less in (("lat", "device_shim_us", True), ("bw", "device_shim_mbs", False), ("bibw", "device_shim_mbs", False)):
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))
    for f in glob.glob(f"{d}/{shape}-*.json"):
        k, v = f.rsplit("/", 1)[1][:-5].split("-")[1:]
        for r in json.load(open(f))["results"]:
            if r.get(key): runs[r["size"]][v][int(k)] = r[key]
    print(f"\n{shape} ({'us one way' if less else 'MB/s'}): medians of 3 rounds: staging-only (s), the defaults (d, IPC from 64 KiB), IPC from 16 KiB (i16), from 4 KiB (i4)")
    for size in sorted(runs):
        m = {v: statistics.median(x.values()) for v, x in runs[size].items()}
        print(f"  {size:>7}  " + "  ".join(f"{v} {m.get(v, float('nan')):10.2f}" for v in ("s", "d", "i16", "i4")))
PY
cd $OUT && tar czf g1.tgz g1/*.json && rm -f g1/lat-*.json g1/bw-*.json g1/bibw-*.json
echo "elapsed $(( $(date +%s) - T0 )) s"
