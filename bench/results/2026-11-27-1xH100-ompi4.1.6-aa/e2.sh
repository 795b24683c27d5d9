#!/bin/bash
# call E2: one H100 shared by both ranks; the library as submitted (n13). E1 again with more
# rounds where no fast path is taken: staging-only (s), staging-only again (t), the defaults (d);
# bench/bw both ways and one way and bench/pingpong, 64 B-64 KiB, device way alone, 16 rounds in
# rotating order; per size the paired ratio to s of the same round, its geometric mean and 2
# standard errors. Then bench/exchange, defaults against fast paths off, 8 pairs alternated.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/e2; mkdir -p $D
LIB=$R/build/gpu-lib/n13/libcudampi.so
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; lscpu | grep "Model name"; } > $D/machine.txt
cl=/usr/local/cuda/lib64
mpicc -O2 -I/usr/local/cuda/include -o /tmp/bw bench/bw.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
mpicc -O2 -I/usr/local/cuda/include -o /tmp/pingpong bench/pingpong.c -L$cl -Wl,-rpath,$cl -L$cl/stubs -lcudart -lcuda -ldl -lm || exit 1
mpicc -O2 -o /tmp/exchange bench/exchange.c -ldl || exit 1
one() { # variant shape round
  local v=$1 shape=$2 k=$3 extra=
  case $v in s|t) extra="-x CUDAMPI_IPC=0 -x CUDAMPI_PIPELINE=0" ;; esac
  local cmd="/tmp/bw -m 64:64K -W device -o $D/$shape-$k-$v.json"
  [ $shape = bibw ] && cmd="/tmp/bw -b -m 64:64K -W device -o $D/$shape-$k-$v.json"
  [ $shape = lat ] && cmd="/tmp/pingpong -m 4:64K -W device -i 100 -x 10 -r 1 -o $D/$shape-$k-$v.json"
  env LD_PRELOAD= timeout 60 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core $extra -x LD_PRELOAD=$LIB $cmd > /dev/null 2>&1 || echo "$shape $k $v failed"
}
orders=("s t d" "t d s" "d s t" "s d t" "t s d" "d t s")
for shape in bibw bw lat; do
  for k in $(seq 16); do
    for v in ${orders[$(( (k-1) % 6 ))]}; do one $v $shape $k; done
  done
  echo "$shape done at $(( $(date +%s) - T0 )) s"
done
python3 - $D <<'PY' | tee $D/summary.txt
import json, glob, statistics, sys, collections, math
d = sys.argv[1]
print("speed of t (staging-only again) and d (the defaults) relative to s (staging-only) of the same round, >1 faster:")
print("geometric mean over the rounds, +- 2 standard errors, rounds at least as fast as s")
for shape, key, better in (("bibw", "device_shim_mbs", 1), ("bw", "device_shim_mbs", 1), ("lat", "device_shim_us", -1)):
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))
    for f in glob.glob(f"{d}/{shape}-*.json"):
        k, v = f.rsplit("/", 1)[1][:-5].split("-")[1:]
        for r in json.load(open(f))["results"]:
            if r.get(key): runs[r["size"]][v][int(k)] = r[key]
    print(f"\n{shape} ({'MB/s' if better > 0 else 'us'})")
    for size in sorted(runs):
        x = runs[size]
        out = f"  {size:>6}  s median {statistics.median(x['s'].values()):9.2f}"
        for v in "td":
            ls = [better * math.log(x[v][k] / x["s"][k]) for k in x[v] if k in x["s"]]
            if len(ls) < 3: continue
            mu = statistics.mean(ls); se = statistics.stdev(ls) / math.sqrt(len(ls))
            out += f" | {v} {math.exp(mu):.3f} +-{2*se:.3f} ({sum(l >= 0 for l in ls)}/{len(ls)})"
        print(out)
PY
echo "sweeps done at $(( $(date +%s) - T0 )) s"
for k in $(seq 8); do
  for m in d off; do
    [ $(( $(date +%s) - T0 )) -gt 540 ] && break 2
    extra=; [ $m = off ] && extra="-x CUDAMPI_IPC=0 -x CUDAMPI_PIPELINE=0"
    r=$(env LD_PRELOAD= timeout 40 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core $extra -x LD_PRELOAD=$LIB /tmp/exchange 100000 4096 20 2>&1 | tail -1)
    echo "$k $m $r"
  done
done > $D/exchange.txt 2>&1
sed 's/interleaved over 20 rounds: //' $D/exchange.txt | cut -c1-150
cd $OUT && tar czf e2.tgz e2/*.json && rm -f e2/*-*-*.json
echo "elapsed $(( $(date +%s) - T0 )) s"
