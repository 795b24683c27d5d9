#!/bin/bash
# Issue 56 checks and timings, one call. PLACES=shared (one GPU, both ranks) or per (a GPU per rank).
# bash .gpu/lat.sh NAME PLACES
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); NAME=$1; PLACES=$2; D=$OUT/$NAME; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; } > $D/machine.txt
TESTS="ipc_direct ipc_awaited ipc_threshold ipc_same_gpu p2p_blocking p2p_status p2p_mprobe nb_halo nb_order nb_cancel_free held_requests chunks_p2p fast_pingpong"
for v in ${CHECKS-default same0}; do
  extra=(); [ $v = same0 ] && extra=(CUDAMPI_IPC_SAME_GPU_BYTES=0)
  env "${extra[@]}" OUT=$D/check-$v SHIM=$R/.gpu/new.so GPU_CHECK_STEPS="1 3" GPU_CHECK_MPIS=system GPU_CHECK_PLACES=$PLACES GPU_CHECK_LIMIT=200 \
    GPU_CHECK_TESTS="$TESTS" bash scripts/gpu-check.sh > /dev/null 2>&1
  cp $D/check-$v/summary.txt $D/summary-$v.txt 2>/dev/null; rm -rf $D/check-$v
  tail -1 $D/summary-$v.txt
done
echo "checks done at $(( $(date +%s) - T0 )) s"
cl=/usr/local/cuda/lib64
for b in floor pingpong bw; do
  mpicc -O2 -I/usr/local/cuda/include -o /tmp/$b bench/$b.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
done
mpirun --allow-run-as-root -n 2 /tmp/floor -m 8:4M -o $D/floor.json > $D/floor.txt 2>&1
mpirun --allow-run-as-root -n 2 /tmp/floor -m 16:1M -o $D/floor2.json >> $D/floor.txt 2>&1
for k in $(seq ${ROUNDS:-2}); do
  libs="old new"; [ $((k % 2)) = 0 ] && libs="new old"
  for lib in $libs; do
    timeout 120 mpirun --allow-run-as-root -n 2 -x LD_PRELOAD=$R/.gpu/$lib.so /tmp/pingpong -W host,real,device -m 8:4M -S 1024,4096,16384,65536,262144,1048576 -r 3 -n 2000 -o $D/pp-$k-$lib.json > $D/pp-$k-$lib.txt 2>&1 || echo "pp $k $lib failed"
    timeout 120 mpirun --allow-run-as-root -n 2 -x LD_PRELOAD=$R/.gpu/$lib.so /tmp/bw -W device -m 1K:4M -o $D/bw-$k-$lib.json > $D/bw-$k-$lib.txt 2>&1 || echo "bw $k $lib failed"
  done
done
echo "timings done at $(( $(date +%s) - T0 )) s"
python3 - $D ${ROUNDS:-2} <<'PY' | tee $D/table.txt
import json, sys, statistics, collections
d = sys.argv[1]
floor = {r["size"]: r["pingpong_us"] for f in ("floor", "floor2") for r in json.load(open(f"{d}/{f}.json"))["results"]}
lat = collections.defaultdict(lambda: collections.defaultdict(list)); host = collections.defaultdict(lambda: collections.defaultdict(list))
bw = collections.defaultdict(lambda: collections.defaultdict(list))
for k in range(1, int(sys.argv[2]) + 1):
    for lib in ("old", "new"):
        try:
            for r in json.load(open(f"{d}/pp-{k}-{lib}.json"))["results"]:
                if r.get("device_shim_us"): lat[r["size"]][lib].append(r["device_shim_us"])
                if r.get("host_shim_us"): host[r["size"]][lib].append(r["host_shim_us"])
            for r in json.load(open(f"{d}/bw-{k}-{lib}.json"))["results"]:
                if r.get("device_shim_mbs"): bw[r["size"]][lib].append(r["device_shim_mbs"])
        except Exception as e: print("missing", k, lib, e)
m = lambda xs: statistics.median(xs) if xs else float("nan")
print("bytes   floor_us  old_us  new_us  old/floor new/floor | host old/new us | bw MB/s old new")
for s in sorted(lat):
    f = floor.get(s, float("nan"))
    o, n = m(lat[s]["old"]), m(lat[s]["new"])
    print(f"{s:>8} {f:8.2f} {o:7.2f} {n:7.2f} {o/f:9.2f} {n/f:9.2f} | {m(host[s]['old']):6.2f} {m(host[s]['new']):6.2f} | {m(bw[s]['old']):9.0f} {m(bw[s]['new']):9.0f}")
PY
cd $OUT && tar czf $NAME.tgz $NAME && rm -rf $NAME
echo "elapsed $(( $(date +%s) - T0 )) s"
