#!/usr/bin/env python3
"""Tables and served.svg from the JSON here: bench/rma at 64 MiB, cudampi's served device windows
(window and buffers on the GPU) against host windows of the same run, as host time / device
time (bandwidth: device / host), so that 1 is the host's speed. Usage: table.py (in this folder)."""
import json
import statistics
import os

os.chdir(os.path.dirname(os.path.abspath(__file__)))  # reads and writes this folder's files from any directory

METRICS = [("put_fence", "MPI_Put in a fence epoch"), ("get_fence", "MPI_Get in a fence epoch"), ("put_lat", "MPI_Put + MPI_Win_flush"),
           ("get_lat", "MPI_Get + MPI_Win_flush"), ("acc_lat", "MPI_Accumulate (sum of doubles) + MPI_Win_flush"),
           ("put_bw", "MPI_Put, 16 in flight, then a flush (bandwidth)"), ("get_bw", "MPI_Get, 16 in flight, then a flush (bandwidth)")]
SETS = [("rma-ipc0-{}.json", (1, 2, 3), "one node, CUDAMPI_IPC=0"), ("rma-nodes-shm-{}.json", (1, 2, 3), "each rank a node, shared memory"),
        ("rma-nodes-shm-ring64M-{}.json", (1, 2), "each rank a node, CUDAMPI_RMA_RING=64M")]
# Entries of whole pieces tile the ring (009bdf3): C16 before (a9f95cd) and after in turn, two
# rounds each of IPC off and each rank a node; C18 after, three rounds each.
AFTER = [("rma-c16-before-{}.json", ("ipc0-1", "ipc0-2", "nodes-shm-1", "nodes-shm-2"), "C16 before (a9f95cd)"),
         ("rma-c16-after-{}.json", ("ipc0-1", "ipc0-2", "nodes-shm-1", "nodes-shm-2"), "C16 after (009bdf3)"),
         ("rma-c18-ipc0-{}.json", (1, 2, 3), "C18 after, one node, CUDAMPI_IPC=0"), ("rma-c18-nodes-shm-{}.json", (1, 2, 3), "C18 after, each rank a node")]


def ratio(r, m):
    x = r[m]
    return x["device_both"] / x["host"] if m.endswith("bw") else x["host"] / x["device_both"]


def columns(sets):
    cols = []
    for pattern, rounds, label in sets:
        runs = [json.load(open(pattern.format(n)))["results"][0] for n in rounds]
        cols.append((label, {m: [ratio(r, m) for r in runs] for m, _ in METRICS}))
    return cols


def table(cols):
    print("| operation, 64 MiB | " + " | ".join(c[0] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for m, name in METRICS:
        cells = [f"{statistics.median(c[1][m]):.2f} ({', '.join(f'{v:.2f}' for v in c[1][m])})" for c in cols]
        print(f"| {name} | " + " | ".join(cells) + " |")


before, after = columns(SETS), columns(AFTER)
table(before)
print()
table(after)
print()
print("| host window alone (C18) | operations per flush | put + flush, us | get + flush, us | put bandwidth, MB/s | get bandwidth, MB/s |")
print("|---|---|---|---|---|---|")
for w in (1, 4, 16):
    for r in json.load(open(f"host-c18-w{w}.json"))["results"]:
        print(f"| {r['size'] >> 20} MiB | {w} | {r['put_lat']['host']:.0f} | {r['get_lat']['host']:.0f} | {r['put_bw']['host']:.0f} | {r['get_bw']['host']:.0f} |")

# The plot: the served path before the cut (C8, 7d2a99f) and after (C18, 009bdf3).
cols = [(f"C8 before (7d2a99f), {label}", vals) for label, vals in before[:2]] + after[2:]
W, H, TOP, LEFT, BOTTOM = 900, 400, 40, 60, 130
y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - v / 1.5)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">served device windows, 64 MiB, one H200, Open MPI 4.1.6, 2026-11-29: host time / device time (medians)</text>']
for v in (0, 0.5, 0.9, 1.0, 1.5):
    out.append(f'<line x1="{LEFT}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{"#c33" if v == 0.9 else "#ddd"}"/><text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
group = (W - LEFT - 20) / len(METRICS)
colors = ["#9bd", "#9c9", "#248", "#174"]
for i, (m, name) in enumerate(METRICS):
    x0 = LEFT + 10 + i * group
    for k, (label, vals) in enumerate(cols):
        v = statistics.median(vals[m])
        out.append(f'<rect x="{x0 + 18 * k:.1f}" y="{y(v):.1f}" width="16" height="{y(0) - y(v):.1f}" fill="{colors[k]}"><title>{name}, {label}: {v:.2f}</title></rect>')
    out.append(f'<text x="{x0 + 26:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{m}</text>')
for k, (label, _) in enumerate(cols):
    out.append(f'<rect x="{LEFT + 10}" y="{H - 76 + 16 * k}" width="12" height="12" fill="{colors[k]}"/><text x="{LEFT + 28}" y="{H - 66 + 16 * k}">{label}</text>')
out.append("</svg>")
open("served.svg", "w").write("\n".join(out) + "\n")
