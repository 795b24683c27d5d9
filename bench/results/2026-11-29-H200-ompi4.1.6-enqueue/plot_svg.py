#!/usr/bin/env python3
"""enqueue.svg from the JSON files here: microseconds per case, blocking against enqueued, on a
log scale (bench/svg_bars.py, no plotting library needed)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import svg_bars  # noqa: E402

RUNS = [("shared-immediate.json", "2 ranks, 1 GPU, made in the call"), ("shared-ordered.json", "2 ranks, 1 GPU, ordered"),
        ("self-ordered.json", "1 rank to itself, ordered")]
CASES = [("halo 8 KiB", lambda j: j["halo_us"]["8KiB"]), ("halo 4 MiB", lambda j: j["halo_us"]["4MiB"]),
         ("ping-pong 8 B", lambda j: j["pingpong_8B_one_way_us"])]
BARS = [(legend, color, way, lambda f, get, way=way: get(json.load(open(f)))[way])
        for legend, color, way in (("blocking calls", "#888", "blocking"), ("enqueue calls", "#2a6", "enqueued"))]
svg_bars.draw("enqueue.svg", "bench/enqueue.cu on one H200, Open MPI 4.1.6, 2026-11-29: us per step (log)", RUNS, CASES, BARS, hi=1e6, legend_x=170)
