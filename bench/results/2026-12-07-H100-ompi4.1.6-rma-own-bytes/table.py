#!/usr/bin/env python3
"""Tables from the JSON here. Part 1: bench/rma_batches, the MPI library's own one-sided bandwidth on
host windows by bytes in flight per flush, malloc and pinned memory. Part 2: bench/rma at 16 and
64 MiB, cudampi's served device windows (window and buffers on the GPU, CUDAMPI_IPC=0, one node or
each rank a node) against host windows of the same run: host time / device time (bandwidth:
device / host), so that 1 is the host window's speed; the bandwidth rows with each operation in
flight on bytes of its own (rma-ipc0-N, rma-nodes-N) and, from the bench before this change, all
16 on the same bytes (rma-old-ipc0). Usage: table.py (any directory)."""
import json
import os
import statistics

os.chdir(os.path.dirname(os.path.abspath(__file__)))

b = json.load(open("batches.json"))
print(f"| library alone, host windows, GB/s | 1 per flush | 4 per flush | 16 per flush |")
print("|---|---|---|---|")
cells = {}
for r in b["results"]:
    cells.setdefault((r["memory"], r["op"], r["piece"]), {})[r["per_flush"]] = r["gbps"]
for (mem, op, piece), v in cells.items():
    print(f"| {mem}, {op}, pieces of {piece >> 20} MiB | " + " | ".join(f"{v[k]:.2f}" for k in (1, 4, 16)) + " |")

METRICS = [("put_fence", "MPI_Put in a fence epoch"), ("get_fence", "MPI_Get in a fence epoch"), ("put_lat", "MPI_Put + MPI_Win_flush"),
           ("get_lat", "MPI_Get + MPI_Win_flush"), ("acc_lat", "MPI_Accumulate (sum of doubles) + MPI_Win_flush"),
           ("put_bw", "MPI_Put, 16 in flight, then a flush"), ("get_bw", "MPI_Get, 16 in flight, then a flush")]
SETS = [("one node, IPC off", ["rma-ipc0-1.json", "rma-ipc0-2.json", "rma-ipc0-3.json"]), ("each rank a node", ["rma-nodes-1.json", "rma-nodes-2.json"]),
        ("one node, IPC off, bench before: 16 on the same bytes", ["rma-old-ipc0.json"])]


def ratio(r, m):
    x = r[m]
    return x["device_both"] / x["host"] if m.endswith("bw") else x["host"] / x["device_both"]


for size in (16 << 20, 64 << 20):
    print(f"\n| {size >> 20} MiB, host / device | " + " | ".join(s for s, _ in SETS) + " |")
    print("|---" * (len(SETS) + 1) + "|")
    for m, name in METRICS:
        row = []
        for _, files in SETS:
            v = [ratio(r, m) for f in files for r in json.load(open(f))["results"] if r["size"] == size]
            row.append(f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})" if v else "-")
        print(f"| {name} | " + " | ".join(row) + " |")
    print(f"\n| {size >> 20} MiB, bandwidth, MB/s (host window / device window) | " + " | ".join(s for s, _ in SETS) + " |")
    print("|---" * (len(SETS) + 1) + "|")
    for m in ("put_bw", "get_bw"):
        row = []
        for _, files in SETS:
            v = [f"{r[m]['host']:.0f} / {r[m]['device_both']:.0f}" for f in files for r in json.load(open(f))["results"] if r["size"] == size]
            row.append(", ".join(v))
        print(f"| {m} | " + " | ".join(row) + " |")

# bandwidth.svg: 64 MiB, 16 operations per flush, GB/s medians: host window and cudampi's served
# device window, each operation on bytes of its own (one node, IPC off) and, with the bench
# before, all 16 on the same bytes.
W, H, L, B, TOP = 640, 320, 60, 60, 40
cases = [("own bytes", SETS[0][1]), ("same bytes", SETS[2][1])]
groups = [(m, f"{m.split('_')[0]}, {c}") for m in ("put_bw", "get_bw") for c, _ in cases]
y = lambda v: H - B - v / 16 * (H - B - TOP)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">64 MiB, 16 operations per flush, IPC off, one H100: GB/s (medians)</text>']
for v in (0, 4, 8, 12, 16):
    svg.append(f'<line x1="{L}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
gw = (W - L - 20) / len(groups)
for g, (m, label) in enumerate(groups):
    files = cases[g % 2][1]
    x0 = L + 10 + g * gw
    for k, (way, color) in enumerate((("host", "#999999"), ("device_both", "#4878a8"))):
        v = statistics.median(r[m][way] for f in files for r in json.load(open(f))["results"] if r["size"] == 64 << 20) / 1000
        svg.append(f'<rect x="{x0 + 30 * k:.1f}" y="{y(v):.1f}" width="26" height="{y(0) - y(v):.1f}" fill="{color}"><title>{way}: {v:.2f} GB/s</title></rect>')
    svg.append(f'<text x="{x0 + 28:.1f}" y="{H - B + 16}" text-anchor="middle">{label}</text>')
for k, (name, color) in enumerate((("host window, host buffers", "#999999"), ("cudampi, device window and buffers", "#4878a8"))):
    svg.append(f'<rect x="{W - 230}" y="{36 + 16 * k}" width="12" height="12" fill="{color}"/><text x="{W - 212}" y="{46 + 16 * k}">{name}</text>')
svg.append("</svg>")
open("bandwidth.svg", "w").write("\n".join(svg) + "\n")
