#!/usr/bin/env python3
"""Tables and a plot of one-sided communication on device windows, from one results folder.

The folder holds, for each placement PLACE (per: one GPU per rank; shared: both ranks on one
GPU), bench/rma's JSON with 1 GiB windows (rma-1g-PLACE.json, `-W 1G -m 4:8`), at 64 MiB
(rma-64m-PLACE.json) and bench/floor's at 64 MiB (floor-PLACE.json). Prints markdown tables:
small operations on the 1 GiB window against the host window, and 64 MiB against the GPU's
floor (one CUDA IPC copy between the ranks); writes rma.png beside them.

A folder of served windows (peers cannot map the memory) holds instead bench/rma's JSON of
each transport T (rma-T.json: ipc0, one node with CUDAMPI_IPC=0; nodes-shm and nodes-tcp, each
rank a node of its own) and rma-1g-ipc0.json: the tables compare cudampi's device windows with
the host windows of the same run (host time / device time: 1 is the host's bandwidth), and
served.png plots that ratio at 64 MiB.

Usage: bench/rma_table.py DIR
"""

import json
import os
import sys

METRICS = [
    ("put_fence", "MPI_Put in a fence epoch"),
    ("get_fence", "MPI_Get in a fence epoch"),
    ("put_lat", "MPI_Put + MPI_Win_flush"),
    ("get_lat", "MPI_Get + MPI_Win_flush"),
    ("acc_lat", "MPI_Accumulate (MPI_SUM, doubles) + MPI_Win_flush"),
]


def load(path):
    with open(path) as f:
        return json.load(f)


def row(data, size):
    return next(r for r in data["results"] if r["size"] == size)


def bars(d, name, groups, ylabel, title, mark=None):
    """A bar per metric for each (label, values) group, written to d/name (without matplotlib,
    nothing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / max(1, len(groups))
    for i, (label, values) in enumerate(groups):
        ax.bar([k + i * width for k in range(len(values))], values, width, label=label)
    ax.set_xticks([k + width * (len(groups) - 1) / 2 for k in range(len(METRICS))])
    ax.set_xticklabels([t.replace(" + MPI_Win_flush", "\n+ flush").replace(" in a fence epoch", "\nfence epoch") for _, t in METRICS], fontsize=7)
    ax.axhline(1.0, color="gray", lw=0.8)
    if mark:
        ax.axhline(mark, color="gray", lw=0.8, ls=":")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, name), dpi=120)


SERVED = [("ipc0", "one node, CUDAMPI_IPC=0"), ("nodes-shm", "each rank a node, shared memory"), ("nodes-tcp", "each rank a node, TCP")]


def served(d):
    """The tables and plot of a served-windows folder."""
    runs = [(t, title, load(os.path.join(d, f"rma-{t}.json"))) for t, title in SERVED if os.path.exists(os.path.join(d, f"rma-{t}.json"))]
    m = runs[0][2]["machine"]
    print(f"\n### Served windows: {m['gpu']}, {m['mpi'].split(',')[0]}, {m['date_utc'][:10]}\n")
    print("64 MiB, us: host window and buffers / device window and buffers (host time / device time)\n")
    print("| operation | " + " | ".join(title for _, title, _ in runs) + " |\n|---|" + "---|" * len(runs))
    ratios = {}
    for key, title in METRICS:
        cells = []
        for t, _, data in runs:
            r = row(data, 64 << 20)[key]
            ratios.setdefault(t, []).append(r["host"] / r["device_both"])
            cells.append(f"{r['host']:,.0f} / {r['device_both']:,.0f} ({r['host'] / r['device_both']:.2f}x)")
        print(f"| {title} | {' | '.join(cells)} |")
    small = os.path.join(d, "rma-1g-ipc0.json")
    if os.path.exists(small):
        data = load(small)
        print("\nSmall operations on a window of 1 GiB (one node, CUDAMPI_IPC=0), us: device window and buffers / host window and buffers\n")
        print("| operation | 4 B | 8 B |\n|---|---|---|")
        for key, title in METRICS:
            cells = []
            for size in (4, 8):
                r = row(data, size)[key]
                cells.append("-" if r["host"] is None or r["device_both"] is None else f"{r['device_both']:.2f} / {r['host']:.2f}")
            print(f"| {title} | {' | '.join(cells)} |")
    bars(d, "served.png", [(title, ratios[t]) for t, title, _ in runs], "host time / cudampi time",
         "64 MiB one-sided operations on served device windows (1 = the host window)", 0.9)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    if os.path.exists(os.path.join(d, "rma-ipc0.json")):
        return served(d)
    places = [p for p in ("per", "shared") if os.path.exists(os.path.join(d, f"rma-1g-{p}.json"))]
    ratios = {}
    for place in places:
        small = load(os.path.join(d, f"rma-1g-{place}.json"))
        big = load(os.path.join(d, f"rma-64m-{place}.json"))
        floor = row(load(os.path.join(d, f"floor-{place}.json")), 64 << 20)["copy_us"]
        m = small["machine"]
        print(f"\n### {place}: {m['gpu']}, {m['mpi'].split(',')[0]}, {m['date_utc'][:10]}\n")
        print("Small operations on a window of 1 GiB, us (device window and buffers / host window and buffers):\n")
        print("| operation | 4 B | 8 B |\n|---|---|---|")
        for key, title in METRICS:
            cells = []
            for size in (4, 8):
                r = row(small, size)[key]
                if r["host"] is None or r["device_both"] is None:
                    cells.append("-")
                else:
                    cells.append(f"{r['device_both']:.2f} / {r['host']:.2f} ({r['device_both'] / r['host']:.1f}x)")
            print(f"| {title} | {' | '.join(cells)} |")
        print(f"\n64 MiB, us (device window and buffers; the floor, one CUDA IPC copy: {floor:.1f} us):\n")
        print("| operation | host window, host buffers | cudampi, device | floor / cudampi |\n|---|---|---|---|")
        for key, title in METRICS:
            r = row(big, 64 << 20)[key]
            ratios.setdefault(place, []).append((title, floor / r["device_both"]))
            print(f"| {title} | {r['host']:,.0f} | {r['device_both']:,.1f} | {floor / r['device_both']:.2f}x |")
    names = {"per": "one GPU per rank", "shared": "both ranks on one GPU"}
    bars(d, "rma.png", [(names[p], [v for _, v in rs]) for p, rs in ratios.items()], "IPC copy floor / cudampi",
         "64 MiB one-sided operations on device windows (higher is better, 1 = the floor)")


if __name__ == "__main__":
    main()
