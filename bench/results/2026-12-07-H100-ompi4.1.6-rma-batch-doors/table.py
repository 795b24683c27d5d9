#!/usr/bin/env python3
"""Tables and batch.svg from the JSON here. Part 1: bench/rma at 16 and 64 MiB, cudampi's served
device windows (window and buffers on the GPU, IPC off or each rank a node) against host windows
of the same run, as host time / device time (bandwidth: device / host), so that 1 is the host's
speed, with a put's pieces written one (CUDAMPI_RMA_BATCH=1, the order kept) or two (=2, the
build tried) before each flush of the library's window. Part 2: bench/floor and bench/pingpong
under MPS on the one GPU, device messages with CUDAMPI_IPC_SAME_GPU_BYTES=0, staged (push 0)
against written into the receiver's buffer (CUDAMPI_IPC_PUSH=1). Usage: table.py (any directory)."""
import json
import os
import statistics

os.chdir(os.path.dirname(os.path.abspath(__file__)))

METRICS = [("put_fence", "MPI_Put in a fence epoch"), ("get_fence", "MPI_Get in a fence epoch"), ("put_lat", "MPI_Put + MPI_Win_flush"),
           ("get_lat", "MPI_Get + MPI_Win_flush"), ("acc_lat", "MPI_Accumulate (sum of doubles) + MPI_Win_flush"),
           ("put_bw", "MPI_Put, 16 in flight, then a flush (bandwidth)"), ("get_bw", "MPI_Get, 16 in flight, then a flush (bandwidth)")]
SETS = [(t, b) for t in ("ipc0", "nodes") for b in (1, 2)]
LABEL = {"ipc0": "one node, IPC off", "nodes": "each rank a node"}


def ratio(r, m):
    x = r[m]
    return x["device_both"] / x["host"] if m.endswith("bw") else x["host"] / x["device_both"]


def rows(t, b, size):
    out = []
    for n in (1, 2):
        for r in json.load(open(f"rma-{t}-b{b}-{n}.json"))["results"]:
            if r["size"] == size:
                out.append(r)
    return out


medians = {}
for size in (16 << 20, 64 << 20):
    print(f"\n| {size >> 20} MiB, host / device | " + " | ".join(f"{LABEL[t]}, batch {b}" for t, b in SETS) + " |")
    print("|---" * (len(SETS) + 1) + "|")
    for m, name in METRICS:
        cells = []
        for t, b in SETS:
            v = [ratio(r, m) for r in rows(t, b, size)]
            medians[(size, m, t, b)] = statistics.median(v)
            cells.append(f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})")
        print(f"| {name} | " + " | ".join(cells) + " |")

print("\n| MPS, one H100 | 8 B | 128 B | 512 B | 2 KiB | 8 KiB |")
print("|---|---|---|---|---|---|")
floor = {r["size"]: r for r in json.load(open("mps-floor.json"))["results"]}
print("| floor: one IPC copy, ping-pong one way (us) | " + " | ".join(f"{floor[s]['pingpong_us']:.1f}" for s in (8, 128, 512, 2048, 8192)) + " |")
for p in (0, 1):
    vals = []
    for s in (8, 128, 512, 2048, 8192):
        v = [next(r for r in json.load(open(f"mps-pp-push{p}-{n}.json"))["results"] if r["size"] == s)["device_shim_us"] for n in (1, 2)]
        vals.append(f"{statistics.median(v):.1f} ({', '.join(f'{x:.1f}' for x in v)})")
    print(f"| cudampi, CUDAMPI_IPC_PUSH={p}, one way (us) | " + " | ".join(vals) + " |")

# batch.svg: put and get bandwidth at 64 MiB, device / host, batch 1 against 2.
W, H, L, B = 640, 320, 60, 60
bars = [(t, m) for t in ("ipc0", "nodes") for m in ("put_bw", "get_bw")]
y = lambda v: H - B - v * (H - B - 40)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">Served device windows, 64 MiB, 16 operations per flush: device / host bandwidth (H100)</text>']
for v in (0, 0.25, 0.5, 0.75, 1.0):
    svg.append(f'<line x1="{L}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
gw = (W - L - 20) / len(bars)
for g, (t, m) in enumerate(bars):
    x0 = L + 10 + g * gw
    for k, (b, color) in enumerate(((1, "#4878a8"), (2, "#d08040"))):
        v = medians[(64 << 20, m, t, b)]
        svg.append(f'<rect x="{x0 + 30 * k:.1f}" y="{y(v):.1f}" width="26" height="{y(0) - y(v):.1f}" fill="{color}"><title>batch {b}: {v:.2f}</title></rect>')
    svg.append(f'<text x="{x0 + 28:.1f}" y="{H - B + 16}" text-anchor="middle">{m.split("_")[0]}, {LABEL[t]}</text>')
for k, (b, color) in enumerate(((1, "#4878a8"), (2, "#d08040"))):
    svg.append(f'<rect x="{W - 150}" y="{36 + 16 * k}" width="12" height="12" fill="{color}"/><text x="{W - 132}" y="{46 + 16 * k}">CUDAMPI_RMA_BATCH={b}</text>')
svg.append("</svg>")
open("batch.svg", "w").write("\n".join(svg) + "\n")
