#!/bin/bash
# call E1: one H100 shared by both ranks; the library as submitted (n13). Below the sizes the
# fast paths take, are the defaults (d) slower than staging-only (s)? Against them: staging-only
# run again (t: how far two runs of one setting land apart) and the defaults with every fast
# path's threshold raised above the sweep (l: the defaults' process layout, handshake and watch,
# with no message taking a fast path). bench/bw one way and both ways, bench/pingpong, 1 B-1 MiB,
# device way alone, 8 rounds in balanced rotating order. Then bench/exchange, defaults against
# fast paths off, alternated.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/e1; mkdir -p $D
LIB=$R/build/gpu-lib/n13/libcudampi.so
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; lscpu | grep "Model name"; } > $D/machine.txt
cl=/usr/local/cuda/lib64
mpicc -O2 -I/usr/local/cuda/include -o /tmp/bw bench/bw.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
mpicc -O2 -I/usr/local/cuda/include -o /tmp/pingpong bench/pingpong.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
mpicc -O2 -o /tmp/exchange bench/exchange.c -ldl || exit 1
one() { # variant shape round
  local v=$1 shape=$2 k=$3 extra=
  case $v in
    s|t) extra="-x CUDAMPI_IPC=0 -x CUDAMPI_PIPELINE=0" ;;
    l) extra="-x CUDAMPI_IPC_BYTES=1G -x CUDAMPI_IPC_SAME_GPU_BYTES=1G -x CUDAMPI_PIPELINE_BYTES=1G" ;;
  esac
  local cmd="/tmp/bw -m 1:1M -W device -o $D/$shape-$k-$v.json"
  [ $shape = bibw ] && cmd="/tmp/bw -b -m 1:1M -W device -o $D/$shape-$k-$v.json"
  [ $shape = lat ] && cmd="/tmp/pingpong -m 1:1M -W device -i 100 -x 10 -r 1 -o $D/$shape-$k-$v.json"
  env LD_PRELOAD= timeout 60 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core $extra -x LD_PRELOAD=$LIB $cmd > /dev/null 2>&1 || echo "$shape $k $v failed"
}
orders=("s t l d" "t d s l" "d l t s" "l s d t" "d l t s" "l s d t" "s t l d" "t d s l")
for shape in bibw bw lat; do
  for k in 1 2 3 4 5 6 7 8; do
    for v in ${orders[$((k-1))]}; do one $v $shape $k; done
  done
  echo "$shape done at $(( $(date +%s) - T0 )) s"
done
python3 - $D <<'PY' | tee $D/summary.txt
import json, glob, statistics, sys, collections, math
d = sys.argv[1]
for shape, key, better in (("bibw", "device_shim_mbs", 1), ("bw", "device_shim_mbs", 1), ("lat", "device_shim_us", -1)):
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))
    for f in glob.glob(f"{d}/{shape}-*.json"):
        k, v = f.rsplit("/", 1)[1][:-5].split("-")[1:]
        for r in json.load(open(f))["results"]:
            if r.get(key): runs[r["size"]][v][int(k)] = r[key]
    unit = "MB/s" if better > 0 else "us"
    print(f"\n{shape} {unit}: medians of 8 rounds; t, l, d as speed relative to s (>1 faster), (rounds at least as fast as s in the same round); spread of t/s over rounds")
    for size in sorted(runs):
        x = runs[size]
        if not all(len(x[v]) for v in "stld"): continue
        m = {v: statistics.median(x[v].values()) for v in "stld"}
        rel = lambda v: (m[v] / m["s"]) ** better
        wins = {v: sum((x[v][k] / x["s"][k]) ** better >= 1 for k in x[v] if k in x["s"]) for v in "tld"}
        ts = sorted((x["t"][k] / x["s"][k]) ** better for k in x["t"] if k in x["s"])
        ds = sorted((x["d"][k] / x["s"][k]) ** better for k in x["d"] if k in x["s"])
        print(f"  {size:>8} s {m['s']:10.2f} | t {rel('t'):.3f} ({wins['t']}) l {rel('l'):.3f} ({wins['l']}) d {rel('d'):.3f} ({wins['d']}) | t/s {ts[0]:.2f}-{ts[-1]:.2f} d/s {ds[0]:.2f}-{ds[-1]:.2f}")
PY
echo "sweeps done at $(( $(date +%s) - T0 )) s"
for k in 1 2 3 4; do
  for m in d off; do
    [ $(( $(date +%s) - T0 )) -gt 560 ] && break 2
    extra=; [ $m = off ] && extra="-x CUDAMPI_IPC=0 -x CUDAMPI_PIPELINE=0"
    r=$(env LD_PRELOAD= timeout 40 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core $extra -x LD_PRELOAD=$LIB /tmp/exchange 100000 4096 20 2>&1 | tail -1)
    echo "$k $m $r"
  done
done > $D/exchange.txt 2>&1
sed 's/interleaved over 20 rounds: //' $D/exchange.txt | cut -c1-160
echo "elapsed $(( $(date +%s) - T0 )) s"
