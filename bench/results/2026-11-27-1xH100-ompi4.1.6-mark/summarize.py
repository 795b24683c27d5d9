"""Summarises k1- to k4-exchange.txt into exchange.json, exchange.txt and exchange.png."""
import json, re, statistics, sys
pat = re.compile(r"^(\d+) (\S+) (\d+) .*exchange real ([\d.]+) ns, cudampi ([\d.]+) ns .*\(([+-][\d.]+)%.*ping-pong real ([\d.]+) ns, cudampi ([\d.]+) ns .*\(([+-]?[\d.]+) ns")
runs = []
for call in ("k1", "k2", "k3", "k4"):
    for line in open(f"{call}-exchange.txt"):
        m = pat.match(line)
        if m:
            k, build, size, real, shim, pct, pr, ps, dns = m.groups()
            runs.append(dict(call=call.upper(), round=int(k), build=build, size=int(size), real_ns=float(real), cudampi_ns=float(shim),
                             added_pct=float(pct), pingpong_real_ns=float(pr), pingpong_cudampi_ns=float(ps), pingpong_added_ns=float(dns)))
meta = dict(date="2026-11-27", machine="nvidia-h100-x1: 1 x NVIDIA H100 80GB HBM3 (driver 580.159.04), 16 cores", mpi="Open MPI 4.1.6 (Ubuntu)",
            builds=dict(n16="b74f397 (the library as submitted; src as 14a3319)", n17="7d42a5a (completion reads host buffers only once an envelope may have come)",
                        n17off="n17 with CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0", n16off="n16 with CUDAMPI_IPC=0 CUDAMPI_PIPELINE=0", n18="a host receive that no envelope fits goes to MPI unwatched"),
            what="bench/exchange 100000 SIZE 20: host Irecv+Isend+Waitall exchange through cudampi against PMPI in the same process, 20 alternated rounds; added_pct is the median of the rounds' ratios")
json.dump(dict(meta=meta, runs=runs), open("exchange.json", "w"), indent=1)
out = []
pooled = sorted(r["added_pct"] for r in runs if r["build"] == "n16" and r["size"] == 4096)
for call in ("K1", "K2", "K3", "K4"):
    for size in (4096, 16384):
        for b in ("n16", "n16off", "n17", "n17off", "n18"):
            xs = sorted(r["added_pct"] for r in runs if r["call"] == call and r["build"] == b and r["size"] == size)
            ps = [r["pingpong_added_ns"] for r in runs if r["call"] == call and r["build"] == b and r["size"] == size]
            if xs:
                out.append(f"{call} {size:>5} B {b:<7} runs {len(xs):>2}: exchange median {statistics.median(xs):+.2f}% (range {xs[0]:+.1f} to {xs[-1]:+.1f}); ping-pong median {statistics.median(ps):+.1f} ns")
out.append(f"K1-K4 pooled n16, 4 KiB, {len(pooled)} runs: median {statistics.median(pooled):+.2f}%, {sum(x > 3 for x in pooled)} above +3%")
open("exchange.txt", "w").write("\n".join(out) + "\n")
print("\n".join(out))
try:
    import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, ax = plt.subplots(figsize=(11, 4))
cols = [(c, b) for c in ("K1", "K2", "K3", "K4") for b in ("n16", "n16off", "n17", "n17off", "n18") if any(r["call"] == c and r["build"] == b for r in runs)]
for i, (c, b) in enumerate(cols):
    ys = [r["added_pct"] for r in runs if r["call"] == c and r["build"] == b and r["size"] == 4096]
    if ys:
        ax.scatter([i] * len(ys), ys, s=14)
        ax.hlines(statistics.median(ys), i - 0.3, i + 0.3, color="k")
ax.axhline(3, ls="--", color="r", lw=0.8)
ax.set_xticks(range(len(cols)), [f"{c} {b}" for c, b in cols], rotation=30, fontsize=8)
ax.set_ylabel("4 KiB exchange, added over PMPI (%)")
ax.set_title("cudampi on host buffers, 1 x H100 host, Open MPI 4.1.6, 2026-11-27")
fig.tight_layout(); fig.savefig("exchange.png", dpi=110)
