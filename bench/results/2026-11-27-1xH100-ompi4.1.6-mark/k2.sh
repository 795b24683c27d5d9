#!/bin/bash
# call K2: one H100 shared by both ranks; bench/exchange of n16 (the last landing) and n17
# (7d42a5a), 4 KiB, 14 rounds alternated, the order swapped each round
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^ucx
R=$PWD; T0=$(date +%s); D=$OUT/k2; mkdir -p $D
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mpirun --version | head -1; nproc; lscpu | grep "Model name"; } > $D/machine.txt
mpicc -O2 -o /tmp/exchange bench/exchange.c -ldl || exit 1
for k in $(seq 14); do
  o="n16 n17"; [ $((k % 2)) = 0 ] && o="n17 n16"
  for m in $o; do
    [ $(( $(date +%s) - T0 )) -gt 280 ] && break 2
    r=$(env LD_PRELOAD= timeout 40 mpirun --oversubscribe --allow-run-as-root -n 2 --bind-to core -x LD_PRELOAD=$R/build/gpu-lib/$m/libcudampi.so /tmp/exchange 100000 4096 20 2>&1 | tail -1)
    echo "$k $m 4096 $r"
  done
done > $D/exchange.txt 2>&1
sed 's/interleaved over 20 rounds: //' $D/exchange.txt | cut -c1-110
echo "elapsed $(( $(date +%s) - T0 )) s"
