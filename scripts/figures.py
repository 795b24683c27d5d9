#!/usr/bin/env python3
"""The README's table of current figures, from the newest bench/suite.sh results folder.

    scripts/figures.py                      print the block (markdown) to stdout
    scripts/figures.py --update README.md   rewrite the block between the markers in place
    scripts/figures.py --check README.md    exit 1 when the block in README.md is not current
    scripts/figures.py --results DIR ...    use DIR instead of the newest folder

The newest folder is the one under bench/results/ (or a subfolder of one) whose latency.json
(written by bench/suite.sh) has the latest machine.date_utc. The table takes the one-way
latency from latency.json and latency-staged.json, the bandwidth from bw.json and
bw-staged.json, and the GPU's floor (a manual CUDA IPC copy per message, bench/floor) from floor.json. The line above
the table gives the date, the machine and the MPI from the JSON, and the library commit from
the folder's README.md (its first "commit <hash>"). The plots are the folder's latency.png and
bandwidth.png. Python 3 standard library only.
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"
SIZES = [8, 4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def load(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def newest(results):
    """The suite folder with the latest date, by latency.json's machine.date_utc: a folder of
    bench/results or one of its subfolders (a run's placements, say per-gpu)."""
    best = None
    names = []
    for name in sorted(os.listdir(results)):
        if os.path.isdir(os.path.join(results, name)):
            names.append(name)
            names += [os.path.join(name, sub) for sub in sorted(os.listdir(os.path.join(results, name)))]
    for name in names:
        folder = os.path.join(results, name)
        lat = load(folder, "latency") if os.path.isdir(folder) else None
        if not lat or "machine" not in lat or "results" not in lat:
            continue
        key = (lat["machine"].get("date_utc", ""), name)
        if best is None or key > best[0]:
            best = (key, folder)
    return best[1] if best else None


def human(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def commit_of(folder):
    path = os.path.join(folder, "README.md")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        m = re.search(r"\bcommit ([0-9a-f]{7,40})\b", f.read())
    return m.group(1) if m else None


def by_size(d, key):
    if not d:
        return {}
    return {r["size"]: r.get(key) for r in d.get("results", []) if r.get(key) is not None}


def us(v):
    if v is None:
        return "–"
    return "%.2f" % v if v < 100 else "%.0f" % v


def gbs(mbs):
    if mbs is None:
        return "–"
    v = mbs / 1000.0
    return "%.2f" % v if v < 10 else ("%.1f" % v if v < 100 else "%.0f" % v)


def block(folder, rel):
    """The markdown between the markers; rel is the folder as a link from the target file."""
    lat = load(folder, "latency")
    bw, floor = load(folder, "bw"), load(folder, "floor")
    lat_staged, bw_staged = load(folder, "latency-staged"), load(folder, "bw-staged")
    m = lat["machine"]
    date = m.get("date_utc", "?").replace("T", " ").rstrip("Z")[:16] + " UTC"
    devices = {r.get("device") for r in m.get("ranks", [])}
    gpus = "%d × %s" % (m.get("cuda_devices", 0), m.get("gpu", "?"))
    placement = "one GPU per rank" if len(devices) == len(m.get("ranks", [])) > 1 else "ranks sharing one GPU"
    mpi = m.get("mpi", "?").split(", package")[0]
    nccl = lat.get("parameters", {}).get("nccl") or ""
    nccl = nccl if nccl.startswith("NCCL") else ""
    commit = commit_of(folder)
    lib = m.get("shim") or "cudampi"
    if commit:
        lib += " (commit %s)" % commit

    # (heading, figures by size, unit): NCCL only where it ran
    cols = [
        ("latency µs: cudampi", by_size(lat, "device_shim_us"), us),
        ("staging only", by_size(lat_staged, "device_shim_us"), us),
        ("recipe, pageable", by_size(lat, "manual_pageable_us"), us),
        ("IPC floor", by_size(floor, "pingpong_us"), us),
        ("NCCL", by_size(lat, "nccl_us"), us),
        ("bandwidth GB/s: cudampi", by_size(bw, "device_shim_mbs"), gbs),
        ("staging only", by_size(bw_staged, "device_shim_mbs"), gbs),
        ("recipe, pinned", by_size(bw, "manual_pinned_mbs"), gbs),
        ("IPC floor", by_size(floor, "window_mbs"), gbs),
        ("NCCL", by_size(bw, "nccl_mbs"), gbs),
        ("host MPI", by_size(bw, "host_real_mbs"), gbs),
    ]
    cols = [c for c in cols if c[1]]
    out = [BEGIN,
           "<!-- generated by scripts/figures.py from %s; do not edit by hand -->" % rel,
           "",
           "Measured %s on %s (%s), CUDA driver %s, %s%s, two ranks, with %s; "
           "`bench/suite.sh` output in [`%s`](%s)." % (
               date, gpus, placement, m.get("cuda_driver", "?"), mpi,
               (", " + nccl) if nccl else "", lib, rel, rel),
           "",
           "| message | %s |" % " | ".join(c[0] for c in cols),
           "|---" * (len(cols) + 1) + "|"]
    for s in SIZES:
        if not any(s in c[1] for c in cols):
            continue
        out.append("| %s | %s |" % (human(s), " | ".join(fmt(c.get(s)) for _, c, fmt in cols)))
    out.append("")
    notes = []
    for r in lat.get("small_interleaved", []):
        if r.get("bytes") == 8:
            notes.append(
                "At 8 bytes, with the ways interleaved over %d rounds, cudampi took %.2f µs against %.2f "
                "for the pageable recipe and %.2f for the pinned one, and was faster than the pageable "
                "recipe in %d of %d rounds." % (
                    r["reps"], r["device_shim_us"]["median"], r["manual_pageable_us"]["median"],
                    r["manual_pinned_us"]["median"], r["device_faster_than_pageable"], r["reps"]))
    paths = load(folder, "paths")
    if paths:
        shapes = [(n, w) for n, w in (("latency", " in latency"), ("bw", " one way"), ("bibw", " both ways"))
                  if any(r["benchmark"] == n for r in paths["results"])]
        rows = {n: [r for r in paths["results"] if r["benchmark"] == n] for n, _ in shapes}
        listed = lambda items: ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]
        notes.append("In alternating runs of the device way up to %s (`paths.json`), the defaults' speed was at least, "
                     "as a share of staging-only's, %s; they were as fast or faster in %s pairs of runs." % (
                         human(max(r["size"] for r in paths["results"])),
                         listed(["%.2fx%s" % (min(r["default_speed_of_staging"] for r in rows[n]), w) for n, w in shapes]),
                         listed(["%d of %d" % (sum(r["default_not_slower_pairs"] for r in rows[n]), sum(r["pairs"] for r in rows[n]))
                                 for n, _ in shapes])))
    over = {o["buffer"]: o["diff_ns_per_call"] for o in lat.get("overhead", []) if o.get("size") == 8}
    if "malloc 64 B" in over and "malloc max" in over:
        notes.append("A host buffer through cudampi costs %+.1f ns per call from a 64-byte `malloc` block and "
                     "%+.1f ns from a large, `mmap`-backed one." % (over["malloc 64 B"], over["malloc max"]))
    if notes:
        out += [" ".join(notes), ""]
    plots = [p for p in ("latency.png", "bandwidth.png") if os.path.exists(os.path.join(folder, p))]
    if plots:
        out.append(" ".join("![%s](%s/%s)" % (p[:-4], rel, p) for p in plots))
        out.append("")
    out.append(END)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", help="results folder (default: the newest under bench/results)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--update", metavar="FILE", help="rewrite the block between the markers in FILE")
    g.add_argument("--check", metavar="FILE", help="exit 1 when FILE's block is not what would be written")
    a = ap.parse_args()

    folder = os.path.abspath(a.results) if a.results else newest(RESULTS)
    if not folder or not load(folder, "latency"):
        print("figures: no bench/suite.sh results (latency.json) found", file=sys.stderr)
        return 2
    target = a.update or a.check
    base = os.path.dirname(os.path.abspath(target)) if target else ROOT
    rel = os.path.relpath(folder, base).replace(os.sep, "/")
    text = block(folder, rel)
    if not target:
        print(text)
        return 0
    with open(target) as f:
        doc = f.read()
    i, j = doc.find(BEGIN), doc.find(END)
    if i < 0 or j < i:
        print("figures: %s has no %s ... %s block" % (target, BEGIN, END), file=sys.stderr)
        return 2
    new = doc[:i] + text + doc[j + len(END):]
    if a.check:
        if new != doc:
            print("figures: the block in %s is not current (run scripts/figures.py --update %s)" % (target, target),
                  file=sys.stderr)
            return 1
        return 0
    if new != doc:
        with open(target, "w") as f:
            f.write(new)
    print("figures: %s from %s" % (target, rel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
