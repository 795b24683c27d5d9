#!/usr/bin/env python3
"""enqueue.svg from the JSON files here: microseconds per case, blocking against enqueued, on a
log scale (no plotting library needed)."""
import json
import math

RUNS = [("shared-immediate.json", "2 ranks, 1 GPU, made in the call"), ("shared-ordered.json", "2 ranks, 1 GPU, ordered"),
        ("self-ordered.json", "1 rank to itself, ordered")]
CASES = [("halo 8 KiB", lambda j: j["halo_us"]["8KiB"]), ("halo 4 MiB", lambda j: j["halo_us"]["4MiB"]),
         ("ping-pong 8 B", lambda j: j["pingpong_8B_one_way_us"])]
W, H, TOP, LEFT, BOTTOM = 900, 420, 40, 70, 90
lo, hi = 1.0, 1e6
y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">bench/enqueue.cu on one H200, Open MPI 4.1.6, 2026-11-29: us per step (log)</text>']
for e in range(0, 7):
    v = 10 ** e
    out.append(f'<line x1="{LEFT}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
group = (W - LEFT - 20) / len(RUNS)
for g, (f, label) in enumerate(RUNS):
    j = json.load(open(f))
    x0 = LEFT + 10 + g * group
    out.append(f'<text x="{x0 + group / 2 - 10:.0f}" y="{H - 20}" text-anchor="middle">{label}</text>')
    for c, (name, get) in enumerate(CASES):
        for k, (way, color) in enumerate((("blocking", "#888"), ("enqueued", "#2a6"))):
            v = get(j)[way]
            x = x0 + c * (group - 20) / 3 + k * 22
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="20" height="{y(lo) - y(v):.1f}" fill="{color}"><title>{name} {way}: {v:.1f} us</title></rect>')
        out.append(f'<text x="{x0 + c * (group - 20) / 3 + 21:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{name}</text>')
out.append(f'<rect x="{W - 170}" y="30" width="12" height="12" fill="#888"/><text x="{W - 152}" y="40">blocking calls</text>')
out.append(f'<rect x="{W - 170}" y="48" width="12" height="12" fill="#2a6"/><text x="{W - 152}" y="58">enqueue calls</text></svg>')
open("enqueue.svg", "w").write("\n".join(out) + "\n")
