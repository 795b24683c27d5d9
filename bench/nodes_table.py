#!/usr/bin/env python3
"""Tables and plot of bench/bw runs with each rank a node of its own (tests/mpi/as-node.sh).

    bench/nodes_table.py DIR [RUN ...]

DIR holds one folder per build or setting (RUN, default: every folder with bw-*.json), each
with bw-shm.json, bw-shm-both.json, bw-tcp.json and bw-tcp-both.json (bench/bw -o, one way and
-b, over Open MPI's shared-memory transport and over TCP). Prints, per transport and direction,
the host MPI's MB/s and cudampi's with their ratio for every RUN side by side (markdown), and
writes DIR/nodes.png (cudampi / host MPI against the message size) when matplotlib is there.
Runs of several rounds (bench/bw -r) give each way's median and, as the ratio, the median of
the rounds' own ratios (device_to_host_median).
"""
import json
import os
import sys

CASES = [("bw-shm", "shared memory, one way"), ("bw-shm-both", "shared memory, both ways"),
         ("bw-tcp", "TCP, one way"), ("bw-tcp-both", "TCP, both ways")]


def load(path):
    try:
        with open(path) as f:
            return {r["size"]: r for r in json.load(f)["results"]}
    except (OSError, ValueError, KeyError):
        return None


def ratio(r):
    """cudampi / host MPI: the median of the rounds' ratios where the run had rounds."""
    r = r or {}
    if r.get("device_to_host_median"):
        return r["device_to_host_median"]
    h, d = r.get("host_real_mbs"), r.get("device_shim_mbs")
    return d / h if h and d else None


def size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = sys.argv[1]
    runs = sys.argv[2:] or sorted(d for d in os.listdir(top) if os.path.isfile(os.path.join(top, d, "bw-shm.json")))
    data = {(run, key): load(os.path.join(top, run, key + ".json")) for run in runs for key, _ in CASES}
    for key, title in CASES:
        have = [run for run in runs if data[run, key]]
        if not have:
            continue
        print(f"\n{title} (MB/s, host MPI / cudampi, ratio)\n")
        print("| bytes | " + " | ".join(have) + " |")
        print("|---|" + "---|" * len(have))
        for n in sorted(set().union(*(data[run, key].keys() for run in have))):
            cells = []
            for run in have:
                r = data[run, key].get(n)
                h, d = (r or {}).get("host_real_mbs"), (r or {}).get("device_shim_mbs")
                cells.append(f"{h:,.0f} / {d:,.0f} ({ratio(r):.2f}x)" if h and d else "-")
            print(f"| {size(n)} | " + " | ".join(cells) + " |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(CASES), figsize=(4 * len(CASES), 3.4), sharey=True)
    for ax, (key, title) in zip(axes, CASES):
        for run in runs:
            rows = sorted((data[run, key] or {}).values(), key=lambda r: r["size"])
            pts = [(r["size"], ratio(r)) for r in rows if ratio(r)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=run)
        ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("bytes")
    axes[0].set_ylabel("cudampi / host MPI")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(top, "nodes.png"), dpi=110)


if __name__ == "__main__":
    main()
