#!/usr/bin/env python3
"""The table and enqueue.svg from the JSON here: bench/enqueue with one rank exchanging with
itself, CUDAMPI_ENQUEUE=immediate and =nccl, two rounds in turn; each JSON holds the same run's
blocking figures (cudaStreamSynchronize and blocking calls). Usage: table.py (any directory)."""
import json
import os

os.chdir(os.path.dirname(os.path.abspath(__file__)))
CASES = [("halo_us", "8KiB", "halo step, 8 KiB halos"), ("halo_us", "4MiB", "halo step, 4 MiB halos"), ("pingpong_8B_one_way_us", None, "8 B ping-pong between kernels, one way")]
runs = {(m, n): json.load(open(f"enqueue-self-{m}-{n}.json")) for m in ("immediate", "nccl") for n in (1, 2)}


def pick(d, key, sub):
    x = d[key]
    return x[sub] if sub else x


print("| us per step (rounds 1, 2) | blocking calls | enqueued, mode immediate | blocking calls | enqueued, mode nccl |")
print("|---|---|---|---|---|")
for key, sub, name in CASES:
    cells = []
    for m in ("immediate", "nccl"):
        for w in ("blocking", "enqueued"):
            cells.append(", ".join(f"{pick(runs[(m, n)], key, sub)[w]:.1f}" for n in (1, 2)))
    print(f"| {name} | " + " | ".join(cells) + " |")
print("\nsame results (both ways end with the same domain):", all(r["same_results"] for r in runs.values()))

W, H, L, B, TOP = 640, 320, 60, 60, 40
hi = 1000.0
import math
y = lambda v: TOP + (H - TOP - B) * (1 - math.log10(v) / math.log10(hi))
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">bench/enqueue, one rank exchanging with itself, one H100 (us, log scale)</text>']
for v in (1, 10, 100, 1000):
    svg.append(f'<line x1="{L}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
bars = [("blocking", "nccl", "blocking", "#888888"), ("enqueued, immediate", "immediate", "enqueued", "#4878a8"), ("enqueued, nccl", "nccl", "enqueued", "#d08040")]
gw = (W - L - 20) / len(CASES)
for g, (key, sub, name) in enumerate(CASES):
    x0 = L + 10 + g * gw
    for k, (label, m, w, color) in enumerate(bars):
        v = min(pick(runs[(m, n)], key, sub)[w] for n in (1, 2))
        svg.append(f'<rect x="{x0 + 30 * k:.1f}" y="{y(v):.1f}" width="26" height="{y(1) - y(v):.1f}" fill="{color}"><title>{label}: {v:.1f} us</title></rect>')
    svg.append(f'<text x="{x0 + 45:.1f}" y="{H - B + 16}" text-anchor="middle">{name.split(",")[0] if sub is None else name.replace("halo step, ", "halo ")}</text>')
for k, (label, _, _, color) in enumerate(bars):
    svg.append(f'<rect x="{W - 170}" y="{36 + 16 * k}" width="12" height="12" fill="{color}"/><text x="{W - 152}" y="{46 + 16 * k}">{label}</text>')
svg.append("</svg>")
open("enqueue.svg", "w").write("\n".join(svg) + "\n")
