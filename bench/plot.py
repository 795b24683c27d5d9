#!/usr/bin/env python3
"""Plots and the short table of a bench/suite.sh results folder.

    bench/plot.py DIR

Reads DIR/latency.json, bw.json, bibw.json, coll.json and datatypes.json (whichever exist; the
runs with the fast paths off, latency-staged.json, bw-staged.json and bibw-staged.json, and the
floor of floor.json join them as curves of their own), writes DIR/latency.png, bandwidth.png,
coll.png and datatypes.png when matplotlib is installed, and prints the table: selected sizes of
every benchmark, each way side by side, then cudampi's figures as ratios of the floor. The
suite's alternating runs of the device way (NAME-alt-K-s.json and -d.json) become
DIR/paths.json and a table of their own: the defaults against staging-only.
"""
import json
import math
import os
import statistics
import sys

WAYS = [  # (suffix of the JSON key, label)
    ("host_real", "host MPI"),
    ("manual_pageable", "manual, pageable"),
    ("manual_pinned", "manual, pinned"),
    ("device_shim", "cudampi"),
    ("device_staged", "cudampi, staging"),
    ("nccl", "NCCL"),
    ("floor", "IPC floor"),
]

# bench/suite.sh's runs of cudampi's device way alone: (file suffix, way)
PATHS = [("staged", "device_staged")]

# bench/suite.sh's alternating runs, NAME-alt-K-M.json (M: s staging-only, d the defaults):
# (benchmark, unit, whether less is faster)
ALTERNATING = [("latency", "us", True), ("bw", "mbs", False), ("bibw", "mbs", False)]

# floor.json's figure that bounds each benchmark: (benchmark, floor key, unit)
FLOORS = [("latency", "pingpong_us", "us"), ("bw", "window_mbs", "mbs")]

# bench/coll's collectives (its -l keys), in its order; keys it may add later go last
COLLECTIVES = ["allreduce", "bcast", "alltoall", "allgather", "reduce_scatter_block", "reduce"]


def coll_names(coll):
    """The collectives present in a coll.json, in bench/coll's order."""
    found = {r["collective"] for r in coll["results"]}
    return [c for c in COLLECTIVES if c in found] + sorted(found - set(COLLECTIVES))


def coll_title(c):
    """MPI_Allreduce, MPI_Reduce_scatter_block, ..."""
    return "MPI_" + c.capitalize()


def load(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def merge(main, extra, way, unit, key=None):
    """Adds `extra`'s figure `key` (default: its device way) to `main`'s rows as `way`."""
    if not main or not extra:
        return
    rows = {r["size"]: r for r in main["results"]}
    for r in extra["results"]:
        v = r.get(key or "device_shim_" + unit)
        if v is None:
            continue
        if r["size"] not in rows:
            rows[r["size"]] = {"size": r["size"]}
            main["results"].append(rows[r["size"]])
        rows[r["size"]][way + "_" + unit] = v
    main["results"].sort(key=lambda r: r["size"])
    main["check_errors"] = main.get("check_errors", 0) + extra.get("check_errors", 0)


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def series(rows, unit):
    """{label: ([sizes], [values])} for the ways present in rows."""
    out = {}
    for key, label in WAYS:
        pts = [(r["size"], r.get(key + "_" + unit)) for r in rows]
        pts = [(s, v) for s, v in pts if v is not None and not math.isnan(v)]
        if pts:
            out[label] = ([s for s, _ in pts], [v for _, v in pts])
    return out


def table(title, rows, unit, sizes, fmt):
    rows = {r["size"]: r for r in rows}
    present = [(k, l) for k, l in WAYS if any(r.get(k + "_" + unit) is not None for r in rows.values())]
    print("\n%s" % title)
    print("  %-8s" % "size" + "".join(" %16s" % l for _, l in present))
    for s in sizes:
        r = rows.get(s)
        if r is None:
            continue
        cells = []
        for k, _ in present:
            v = r.get(k + "_" + unit)
            cells.append(" %16s" % ("-" if v is None else fmt % v))
        print("  %-8s" % human(s) + "".join(cells))


def ratios(title, rows, unit, sizes):
    """cudampi's figures over the floor's: bandwidth shares (1.0 = the floor) or times (x)."""
    rows = {r["size"]: r for r in rows}
    if not any(r.get("floor_" + unit) for r in rows.values()):
        return
    print("\n%s, of the IPC floor" % title)
    print("  %-8s %16s %16s %16s" % ("size", "floor", "cudampi", "cudampi, staging"))
    for s in sizes:
        r = rows.get(s)
        if r is None or not r.get("floor_" + unit):
            continue
        f = r["floor_" + unit]
        cells = []
        for k in ("device_shim", "device_staged"):
            v = r.get(k + "_" + unit)
            cells.append(" %16s" % ("-" if v is None else "%.2fx" % (v / f)))
        print("  %-8s %16s" % (human(s), ("%.2f us" if unit == "us" else "%.0f MB/s") % f) + "".join(cells))


def alternating(folder):
    """The alternating runs as paths.json's content, or None where there are none. For each
    benchmark and size: each setting's median over its runs, the defaults' speed as a share of
    staging-only's (above 1: the defaults faster), and in how many neighbouring pairs of runs
    (1-2, 3-4, ...) the defaults were at least as fast."""
    rows, first = [], None
    for name, unit, less in ALTERNATING:
        runs = []
        for k in range(1, 100):
            found = [(m, load(folder, "%s-alt-%d-%s" % (name, k, m))) for m in "sd"]
            found = [(m, d) for m, d in found if d]
            if not found:
                break
            m, d = found[0]
            first = first or d
            runs.append((m, {r["size"]: r.get("device_shim_" + unit) for r in d["results"]}))
        pairs = [(runs[i], runs[i + 1]) for i in range(0, len(runs) - 1, 2) if runs[i][0] != runs[i + 1][0]]
        for size in sorted({s for _, r in runs for s in r}):
            got = {m: [r[size] for mm, r in runs if mm == m and r.get(size)] for m in "sd"}
            if not got["s"] or not got["d"]:
                continue
            dv, sv = statistics.median(got["d"]), statistics.median(got["s"])
            ahead = 0
            for a, b in pairs:
                x = {a[0]: a[1].get(size), b[0]: b[1].get(size)}
                if x["d"] and x["s"] and (x["d"] <= x["s"] if less else x["d"] >= x["s"]):
                    ahead += 1
            rows.append({"benchmark": name, "size": size, "unit": unit, "default": dv, "staging": sv,
                         "default_speed_of_staging": sv / dv if less else dv / sv,
                         "default_not_slower_pairs": ahead, "pairs": len(pairs), "runs": len(runs)})
    if not rows:
        return None
    return {"bench": "paths", "order": "staging-only, the defaults, the defaults, staging-only, ...",
            "machine": first.get("machine", {}), "results": rows}


def alternating_table(paths, sizes):
    print("\nthe defaults against staging-only, the device way alone in alternating runs:"
          " the defaults' speed as a share of staging-only's (pairs of runs in which they were at least as fast)")
    names = [n for n, _, _ in ALTERNATING if any(r["benchmark"] == n for r in paths["results"])]
    print("  %-8s" % "size" + "".join(" %16s" % n for n in names))
    rows = {(r["benchmark"], r["size"]): r for r in paths["results"]}
    for s in sizes:
        cells = [rows.get((n, s)) for n in names]
        if not any(cells):
            continue
        print("  %-8s" % human(s) + "".join(" %16s" % ("-" if r is None else "%.3f (%d/%d)" % (
            r["default_speed_of_staging"], r["default_not_slower_pairs"], r["pairs"])) for r in cells))


def machine_line(d):
    m = d.get("machine", {})
    return "%s, %s, CUDA driver %s; %s; %s; %s" % (
        m.get("hostname", "?"), m.get("gpu", "?"), m.get("cuda_driver", "?"),
        m.get("mpi", "?").split(", package")[0], m.get("shim") or "cudampi not loaded", m.get("date_utc", "?"))


def plots(folder, lat, bw, bibw, coll, dt=None):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is not installed: no plots")
        return []
    made = []

    def axes_loglog(ax, title, ylabel):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)

    def panel(ax, rows, unit, title, ylabel):
        for label, (x, y) in series(rows, unit).items():
            ax.plot(x, y, marker="o", label=label)
        axes_loglog(ax, title, ylabel)
        ax.legend()

    def save(fig, name, d):
        fig.text(0.01, 0.01, machine_line(d), fontsize=7)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        fig.savefig(os.path.join(folder, name), dpi=120)
        plt.close(fig)
        made.append(name)

    if lat:
        fig, ax = plt.subplots(figsize=(8, 5))
        panel(ax, lat["results"], "us", "one-way latency, rank 0 <-> rank 1", "us")
        save(fig, "latency.png", lat)
    if bw or bibw:
        fig, axs = plt.subplots(1, 2, figsize=(13, 5))
        for ax, d, title in ((axs[0], bw, "bandwidth, rank 0 -> rank 1"), (axs[1], bibw, "bi-directional bandwidth")):
            if d:
                panel(ax, d["results"], "mbs", title, "MB/s")
            else:
                ax.set_visible(False)
        save(fig, "bandwidth.png", bw or bibw)
    if coll:
        names = coll_names(coll)
        ncol = min(len(names), 3)
        nrow = (len(names) + ncol - 1) // ncol
        fig, axs = plt.subplots(nrow, ncol, figsize=(6 * ncol, 5 * nrow), squeeze=False)
        for k, ax in enumerate(axs.flat):
            if k >= len(names):
                ax.set_visible(False)
                continue
            c = names[k]
            panel(ax, [r for r in coll["results"] if r["collective"] == c], "us",
                  "%s, %d ranks" % (coll_title(c), coll["parameters"]["nranks"]), "us per call")
        save(fig, "coll.png", coll)
    if dt:
        res = dt["results"]
        keys = [("device_shim_us", "cudampi"), ("manual_us", "manual cudaMemcpy2D"), ("host_us", "host MPI")]
        fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(res)), 5))
        width = 0.8 / len(keys)
        for k, (key, label) in enumerate(keys):
            xs = [i + (k - 1) * width for i, r in enumerate(res) if r.get(key)]
            ys = [r[key] for r in res if r.get(key)]
            ax.bar(xs, ys, width, label=label)
        ax.set_xticks(range(len(res)))
        ax.set_xticklabels([r["case"] for r in res], rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("us per exchange (median)")
        ax.set_title("non-contiguous datatypes, %d ranks" % dt["parameters"]["nranks"])
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend()
        save(fig, "datatypes.png", dt)
    return made


def datatypes_table(dt):
    print("\n## non-contiguous datatypes, us per exchange (median)")
    print("%-26s %12s %10s %10s %10s %8s" % ("case", "payload B", "cudampi", "manual", "host", "cud/man"))
    for r in dt["results"]:
        dev, man, host = r.get("device_shim_us"), r.get("manual_us"), r.get("host_us")
        f = lambda v: "%10.1f" % v if v is not None else "%10s" % "-"
        ratio = "%8.2f" % (dev / man) if dev and man else "%8s" % "-"
        print("%-26s %12d %s %s %s %s" % (r["case"], r["payload_bytes"], f(dev), f(man), f(host), ratio))


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    lat, bw, bibw, coll = (load(folder, n) for n in ("latency", "bw", "bibw", "coll"))
    for name, d, unit in (("latency", lat, "us"), ("bw", bw, "mbs"), ("bibw", bibw, "mbs")):
        for suffix, way in PATHS:
            merge(d, load(folder, "%s-%s" % (name, suffix)), way, unit)
    floor = load(folder, "floor")
    for name, key, unit in FLOORS:
        merge({"latency": lat, "bw": bw}[name], floor, "floor", unit, key)
    dt = load(folder, "datatypes")
    made = plots(folder, lat, bw, bibw, coll, dt)
    if made:
        print("plots: " + ", ".join(os.path.join(folder, m) for m in made))
    first = lat or bw or bibw or coll or dt
    if not first:
        print("plot: no results in %s" % folder)
        return 1
    print("\n# %s" % machine_line(first))
    if lat:
        for o in lat.get("overhead", []):
            if o["size"] == 8:
                print("host 8 B through cudampi, %s buffer: %+.1f ns per call (ping-pong), %+.1f ns (MPI_Send to MPI_PROC_NULL)"
                      % (o["buffer"], o["diff_ns_per_call"], o["proc_null_diff_ns"]))
        table("one-way latency, us", lat["results"], "us", [8, 4096, 65536, 1 << 20, 16 << 20, 64 << 20], "%.2f")
        part = lat.get("breakdown_8B")
        if part:
            print("\nwhere 8 B go, us: query %.2f; cudampi send copy %.2f, receive copy %.2f, turn-around %.2f; "
                  "recipe send copy %.2f, receive copy %.2f, turn-around %.2f" % (
                      part["pointer_query_us"], part["d2h_pinned_us"], part["h2d_pinned_async_sync_us"],
                      part["turnaround_pinned_us"], part["d2h_pageable_us"], part["h2d_pageable_us"],
                      part["turnaround_pageable_us"]))
    big = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 4096, 65536]
    if bw:
        table("bandwidth, MB/s", bw["results"], "mbs", sorted(big), "%.0f")
    if bibw:
        table("bi-directional bandwidth, MB/s", bibw["results"], "mbs", sorted(big), "%.0f")
    if coll:
        for c in coll_names(coll):
            rows = [r for r in coll["results"] if r["collective"] == c]
            if rows:
                table("%s, us per call" % coll_title(c), rows, "us", [8, 4096, 65536, 1 << 20, 16 << 20, 64 << 20], "%.2f")
    if dt:
        datatypes_table(dt)
    if lat:
        ratios("one-way latency (times)", lat["results"], "us", [8, 4096, 32768, 1 << 20, 4 << 20, 16 << 20, 64 << 20])
    if bw:
        ratios("bandwidth (shares)", bw["results"], "mbs", [65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20])
    paths = alternating(folder)
    if paths:
        with open(os.path.join(folder, "paths.json"), "w") as f:
            json.dump(paths, f, indent=1)
        alternating_table(paths, sorted([1 << (2 * k) for k in range(11)] + [8]))
    bad = sum(d.get("check_errors", 0) for d in (lat, bw, bibw, coll, floor) if d)
    bad += sum(1 for r in (dt or {}).get("results", []) if r.get("checked") is False)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
