# cudampi-test: timeout=600
# The benchmark suite (bench/suite.sh) at tiny sizes with every data check on, against the
# stand-in driver: builds the benchmarks, runs each way of each of them and writes their JSON,
# so the suite cannot rot; the floor, the staging-only runs, the alternating runs (paths.json)
# and the forced chunked and IPC checks with them. No timing is asserted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bench/suite.sh --quick --check -o "$SCRATCH"
for j in latency bw bibw coll floor latency-staged bw-staged paths; do
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["results"], "no results"' "$SCRATCH/$j.json"
done
