#!/usr/bin/env python3
"""ordered.svg from the JSON files here: microseconds per case in mode ordered, the library before
(before-*.json, host functions) against after (*.json, tickets), beside the blocking calls of
the same run, on a log scale (bench/svg_bars.py, no plotting library needed)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import svg_bars  # noqa: E402

RUNS = [("self-ordered", "1 rank to itself"), ("shared-ordered", "2 ranks, 1 GPU")]
CASES = [("halo 8 KiB", lambda j: j["halo_us"]["8KiB"]), ("halo 4 MiB", lambda j: j["halo_us"]["4MiB"]),
         ("ping-pong 8 B", lambda j: j["pingpong_8B_one_way_us"])]
BARS = [(legend, color, "{group}", lambda run, get, way=way, prefix=prefix: get(json.load(open(prefix + run + ".json")))[way])
        for way, prefix, color, legend in (("blocking", "", "#888", "blocking calls"), ("enqueued", "before-", "#c63", "ordered, host functions (70ffc4a)"),
                                           ("enqueued", "", "#2a6", "ordered, tickets (7d2a99f)"))]
svg_bars.draw("ordered.svg", "bench/enqueue.cu, mode ordered, one H200, Open MPI 4.1.6, 2026-11-29: us per step (log)", RUNS, CASES, BARS, hi=1e4, legend_x=260)
