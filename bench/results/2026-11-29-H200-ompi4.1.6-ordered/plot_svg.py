#!/usr/bin/env python3
"""ordered.svg from the JSON files here: microseconds per case in mode ordered, the library before
(before-*.json, host functions) against after (*.json, tickets), beside the blocking calls of
the same run, on a log scale (no plotting library needed)."""
import json
import math

RUNS = [("self-ordered", "1 rank to itself"), ("shared-ordered", "2 ranks, 1 GPU")]
CASES = [("halo 8 KiB", lambda j: j["halo_us"]["8KiB"]), ("halo 4 MiB", lambda j: j["halo_us"]["4MiB"]),
         ("ping-pong 8 B", lambda j: j["pingpong_8B_one_way_us"])]
BARS = [("blocking", "", "#888", "blocking calls"), ("enqueued", "before-", "#c63", "ordered, host functions (70ffc4a)"),
        ("enqueued", "", "#2a6", "ordered, tickets (7d2a99f)")]
W, H, TOP, LEFT, BOTTOM = 900, 420, 40, 70, 90
lo, hi = 1.0, 1e4
y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">bench/enqueue.cu, mode ordered, one H200, Open MPI 4.1.6, 2026-11-29: us per step (log)</text>']
for e in range(0, 5):
    v = 10 ** e
    out.append(f'<line x1="{LEFT}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
group = (W - LEFT - 20) / len(RUNS)
for g, (name, label) in enumerate(RUNS):
    x0 = LEFT + 10 + g * group
    out.append(f'<text x="{x0 + group / 2 - 10:.0f}" y="{H - 20}" text-anchor="middle">{label}</text>')
    for c, (case, get) in enumerate(CASES):
        for k, (way, prefix, color, _) in enumerate(BARS):
            v = get(json.load(open(prefix + name + ".json")))[way]
            x = x0 + c * (group - 20) / 3 + k * 22
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="20" height="{y(lo) - y(v):.1f}" fill="{color}"><title>{case} {label}: {v:.1f} us</title></rect>')
        out.append(f'<text x="{x0 + c * (group - 20) / 3 + 32:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{case}</text>')
for k, (_, _, color, text) in enumerate(BARS):
    out.append(f'<rect x="{W - 260}" y="{30 + 18 * k}" width="12" height="12" fill="{color}"/><text x="{W - 242}" y="{40 + 18 * k}">{text}</text>')
out.append("</svg>")
open("ordered.svg", "w").write("\n".join(out) + "\n")
