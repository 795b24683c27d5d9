#!/usr/bin/env python3
"""Tables of this folder's runs (2 x H200, one GPU per rank) and enqueue.svg: bench/enqueue.cu's
microseconds per step in modes default, ordered and nccl beside the blocking calls of the same
run, on a log scale (bench/svg_bars.py). Usage: table.py (from any folder)."""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import svg_bars  # noqa: E402

os.chdir(os.path.dirname(os.path.abspath(__file__)))  # reads and writes this folder's files from any directory

load = lambda f: json.load(open(f))
CASES = [("halo step, 8 KiB", lambda j: j["halo_us"]["8KiB"]), ("halo step, 4 MiB", lambda j: j["halo_us"]["4MiB"]),
         ("8 B ping-pong, one way", lambda j: j["pingpong_8B_one_way_us"])]
RUNS = [("c22", "default"), ("c22", "ordered"), ("c24", "default"), ("c24", "nccl")]

print("bench/enqueue.cu, us per step, blocking / enqueued (speedup), rounds 1 and 2")
print("| case | " + " | ".join(f"{run.upper()} CUDAMPI_ENQUEUE={mode}" for run, mode in RUNS) + " |")
print("|---" * (len(RUNS) + 1) + "|")
for name, get in CASES:
    cells = []
    for run, mode in RUNS:
        r = [get(load(f"{run}-enqueue-{mode}-{k}.json")) for k in (1, 2)]
        cells.append(", ".join(f"{x['blocking']:.1f} / {x['enqueued']:.1f} ({x['blocking'] / x['enqueued']:.2f}x)" for x in r))
    print(f"| {name} | " + " | ".join(cells) + " |")

print()
print("Device ping-pong, one way, us: the CUDA IPC floor (bench/floor) and cudampi (bench/pingpong), C22 and C23")
floors = {run: {r["size"]: r["pingpong_us"] for f in (f"{run}-floor.json", f"{run}-floor2.json") if os.path.exists(f) for r in load(f)["results"]} for run in ("c22", "c23")}
pp = {run: {r["size"]: r["device_shim_us"] for r in load(f"{run}-pingpong.json")["results"] if r.get("device_shim_us")} for run in ("c22", "c23")}
print("| bytes | floor C22 | cudampi C22 | ratio | floor C23 | cudampi C23 | ratio |")
print("|---|---|---|---|---|---|---|")
for s in sorted(pp["c22"]):
    row = [str(s)]
    for run in ("c22", "c23"):
        f, v = floors[run].get(s), pp[run].get(s)
        row += [f"{f:.2f}" if f else "-", f"{v:.2f}" if v else "-", f"{v / f:.2f}" if f and v else "-"]
    print("| " + " | ".join(row) + " |")

print()
print("Served device windows at 64 MiB (C23), host time / device time (bandwidth rows: device / host)")
METRICS = ["put_fence", "get_fence", "put_lat", "get_lat", "acc_lat", "put_bw", "get_bw"]
print("| run | " + " | ".join(METRICS) + " | bad results |")
print("|---" * (len(METRICS) + 2) + "|")
for name in ("rma-ipc0-1", "rma-ipc0-2", "rma-nodes-shm-1", "rma-nodes-shm-2"):
    d = load(f"c23-{name}.json")
    r = d["results"][0]
    ratio = lambda m: r[m]["device_both"] / r[m]["host"] if m.endswith("bw") else r[m]["host"] / r[m]["device_both"]
    print(f"| {name[4:]} | " + " | ".join(f"{ratio(m):.2f}" for m in METRICS) + f" | {d['check_errors']} |")
d = load("c23-rma-1g.json")
print()
print("A 4- and 8-byte operation in a fence epoch on a 1 GiB window (C23, mapped), us per epoch: host / device window and buffers")
for r in d["results"]:
    print(f"| {r['size']} B | put {r['put_fence']['host']:.2f} / {r['put_fence']['device_both']:.2f} | get {r['get_fence']['host']:.2f} / {r['get_fence']['device_both']:.2f} |")

BARS = [(legend, color, "{group}", lambda key, get, way=way: statistics.median(get(load(f"{key}-{k}.json"))[way] for k in (1, 2)))
        for way, color, legend in (("blocking", "#888", "blocking calls (same run)"), ("enqueued", "#2a6", "enqueued"))]
GROUPS = [(f"{run}-enqueue-{mode}", f"{run.upper()} {mode}") for run, mode in RUNS]
svg_bars.draw("enqueue.svg", "bench/enqueue.cu, one GPU per rank, 2 x H200, Open MPI 4.1.6, 2026-11-29: us per step (log, median of 2)",
              GROUPS, CASES, BARS, hi=1e4, legend_x=200)
