#!/usr/bin/env python3
"""The tables of a scripts/gpu-nccl.sh results folder: NCCL against cudampi's staged path.

    bench/nccl_table.py DIR                 write DIR/summary.txt and DIR/summary.json, print
                                            the short table
    bench/nccl_table.py DIR --annotate      first add DIR/meta.json (the run's date, GPU, MPI,
                                            NCCL, ranks) to every JSON of bench/coll in DIR as
                                            its member "gpu_nccl", with the run's label and
                                            settings
    bench/nccl_table.py DIR --markdown      print the short table as markdown
    bench/nccl_table.py DIR --update FILE   replace FILE's block between <!-- nccl:begin --> and
                                            <!-- nccl:end --> with a short table (a row per
                                            collective), a link to the full one and the plot
    bench/nccl_table.py DIR --plot          also draw DIR/nccl.png (needs matplotlib): per
                                            collective, time against size for NCCL, cudampi,
                                            cudampi staged and the host MPI

Reads the bench/coll runs that scripts/gpu-nccl.sh writes (whichever exist):
    coll-nccl.json        the defaults: cudampi runs a device collective on NCCL from
                          CUDAMPI_NCCL_BYTES (8 KiB) up, stages below
    coll-staged.json      CUDAMPI_NCCL=0: cudampi's staged path alone, as before NCCL
    coll-nccl-every.json  CUDAMPI_NCCL_BYTES=0: NCCL at every size (where it crosses staging)
    coll-socket.json      the defaults with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: NCCL over its
                          socket transport, as between nodes (staged: from coll-staged.json)
    coll-host.json        -d host: host buffers through cudampi against the MPI's own call
and gives, per collective and size, NCCL's own time (bench/coll's nccl way: the GPU-native
reference), cudampi with NCCL (the device way of the defaults), cudampi staged, cudampi with
NCCL at every size, and the ratios of cudampi's times to NCCL's; the share of the timed device
calls that NCCL ran in cudampi (bench/coll's via-nccl) stands beside them. Sizes are bench/coll's
(bytes per rank; Reduce_scatter_block: bytes each rank receives). Python 3 standard library only.
"""
import argparse
import json
import os
import sys

COLLECTIVES = ["allreduce", "bcast", "alltoall", "allgather", "reduce_scatter_block", "reduce"]

# (file stem, label, settings)
RUNS = [
    ("coll-nccl", "defaults", "cudampi's defaults (NCCL from CUDAMPI_NCCL_BYTES up, 8 KiB)"),
    ("coll-staged", "staged", "CUDAMPI_NCCL=0"),
    ("coll-nccl-every", "nccl-every-size", "CUDAMPI_NCCL_BYTES=0"),
    ("coll-socket", "socket", "cudampi's defaults; NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 for the ranks"),
    ("coll-host", "host-buffers", "cudampi's defaults, -d host (host buffers)"),
    ("coll-nb", "nonblocking", "cudampi's defaults, -n (MPI_I... then MPI_Wait)"),
    ("check-coll", "data-check", "CUDAMPI_NCCL_BYTES=0, -c"),
]

# the short table's sizes (bench/coll's default sizes are 8 * 4^k, and the largest)
SHORT_SIZES = [8, 32 << 10, 512 << 10, 8 << 20]


def load(folder, stem):
    path = os.path.join(folder, stem + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def title(c):
    return "MPI_" + c.capitalize()


def rows_of(d, c):
    """{size: row} of collective c in a bench/coll JSON."""
    if not d:
        return {}
    return {r["size"]: r for r in d.get("results", []) if r.get("collective") == c}


def val(rows, size, key):
    r = rows.get(size)
    return None if r is None else r.get(key)


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_us(v):
    if v is None:
        return "-"
    return "%.2f" % v if v < 1000 else "%.0f" % v


def fmt_x(v):
    return "-" if v is None else "%.2fx" % v


def fmt_share(v):
    return "-" if v is None else "%.0f%%" % (100 * v)


def nccl_version(runs, meta):
    for d in runs.values():
        v = (d or {}).get("parameters", {}).get("nccl") or ""
        if v.startswith("NCCL "):
            return v[5:]
    return meta.get("nccl") or "unknown"


def header(runs, meta):
    """The lines that say when, where and with what (date, GPU, MPI, NCCL, ranks)."""
    first = next((d for d in runs.values() if d), {})
    m = first.get("machine", {})
    nranks = first.get("parameters", {}).get("nranks", meta.get("nranks", "?"))
    gpu = meta.get("gpu") or m.get("gpu", "?")
    return {
        "date_utc": meta.get("date_utc") or m.get("date_utc", "?"),
        "host": meta.get("hostname") or m.get("hostname", "?"),
        "gpu": gpu,
        "gpus": meta.get("gpus", m.get("cuda_devices")),
        "cuda_driver": m.get("cuda_driver", "?"),
        "mpi": meta.get("mpi") or m.get("mpi", "?").split(", package")[0],
        "nccl": nccl_version(runs, meta),
        "nccl_lib": meta.get("nccl_lib", "?"),
        "shim": m.get("shim") or meta.get("shim") or "?",
        "nranks": nranks,
        "stand_in": bool(meta.get("stand_in")),
    }


def header_lines(h, runs=None):
    out = ["date %s; host %s; GPU %s (%s); CUDA driver %s" % (h["date_utc"], h["host"], h["gpu"], h["gpus"], h["cuda_driver"]),
           "MPI %s; NCCL %s (%s); %s; %s ranks, one GPU each" % (h["mpi"], h["nccl"], h["nccl_lib"], h["shim"], h["nranks"])]
    if h["stand_in"]:
        out.append("STAND-IN (no GPU: tests/fixture's CUDA and NCCL): the times mean nothing")
    cut = [stem for stem, d in (runs or {}).items() if d and d.get("complete") is False]
    if cut:
        out.append("INCOMPLETE (stopped before their largest size): " + ", ".join(cut))
    return out


def table_rows(runs):
    """Per collective and size, the figures of the main table."""
    out = []
    dflt, staged, every = runs.get("coll-nccl"), runs.get("coll-staged"), runs.get("coll-nccl-every")
    for c in COLLECTIVES:
        rd, rs, re_ = rows_of(dflt, c), rows_of(staged, c), rows_of(every, c)
        for size in sorted(set(rd) | set(rs) | set(re_)):
            # NCCL's own time: the defaults' run, else any other run's (the same NCCL call)
            nccl = val(rd, size, "nccl_us")
            if nccl is None:
                nccl = val(rs, size, "nccl_us") or val(re_, size, "nccl_us")
            row = {
                "collective": c, "size": size, "nccl_us": nccl,
                "cudampi_us": val(rd, size, "device_shim_us"),
                "cudampi_nccl_share": val(rd, size, "device_shim_nccl_share"),
                "staged_us": val(rs, size, "device_shim_us"),
                "every_us": val(re_, size, "device_shim_us"),
                "every_nccl_share": val(re_, size, "device_shim_nccl_share"),
                "manual_pinned_us": val(rs, size, "manual_pinned_us") or val(rd, size, "manual_pinned_us"),
                "host_real_us": val(rs, size, "host_real_us") or val(rd, size, "host_real_us"),
            }
            if all(row[k] is None for k in ("nccl_us", "cudampi_us", "staged_us", "every_us")):
                continue
            row["cudampi_over_nccl"] = ratio(row["cudampi_us"], nccl)
            row["staged_over_nccl"] = ratio(row["staged_us"], nccl)
            row["every_over_nccl"] = ratio(row["every_us"], nccl)
            row["staged_over_cudampi"] = ratio(row["staged_us"], row["cudampi_us"])
            out.append(row)
    return out


def crossings(rows):
    """Per collective: the smallest size from which cudampi with NCCL at every size is at least
    as fast as cudampi staged at every larger size too (None: never; 0: at every size)."""
    out = {}
    for c in COLLECTIVES:
        pts = [(r["size"], r["every_us"], r["staged_us"]) for r in rows
               if r["collective"] == c and r["every_us"] is not None and r["staged_us"] is not None]
        if not pts:
            continue
        pts.sort()
        cross = None
        for s, e, st in reversed(pts):
            if e <= st:
                cross = s
            else:
                break
        out[c] = cross
    return out


def socket_rows(runs):
    sock, staged = runs.get("coll-socket"), runs.get("coll-staged")
    out = []
    for c in COLLECTIVES:
        rk, rs = rows_of(sock, c), rows_of(staged, c)
        for size in sorted(rk):
            row = {"collective": c, "size": size, "nccl_socket_us": val(rk, size, "nccl_us"),
                   "cudampi_socket_us": val(rk, size, "device_shim_us"),
                   "cudampi_nccl_share": val(rk, size, "device_shim_nccl_share"),
                   "staged_us": val(rs, size, "device_shim_us")}
            row["cudampi_over_nccl"] = ratio(row["cudampi_socket_us"], row["nccl_socket_us"])
            row["staged_over_nccl"] = ratio(row["staged_us"], row["nccl_socket_us"])
            out.append(row)
    return out


def host_rows(runs):
    host = runs.get("coll-host")
    out = []
    for c in COLLECTIVES:
        for size, r in sorted(rows_of(host, c).items()):
            real, shim = r.get("host_real_us"), r.get("device_shim_us")
            out.append({"collective": c, "size": size, "host_real_us": real, "host_shim_us": shim,
                        "shim_over_real": ratio(shim, real),
                        "shim_minus_real_us": shim - real if shim is not None and real is not None else None})
    return out


def text_table(cols, rows, first_col="collective"):
    """cols: [(heading, key, formatter)]; plain text, right-aligned."""
    widths = [max(len(h), *(len(f(r.get(k))) if k else 0 for r in rows)) if rows else len(h) for h, k, f in cols]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, ((h, _, _), w) in enumerate(zip(cols, widths)))]
    for r in rows:
        lines.append("  ".join(f(r.get(k)).rjust(w) if i else f(r.get(k)).ljust(w)
                               for i, ((_, k, f), w) in enumerate(zip(cols, widths))))
    return lines


def md_table(cols, rows):
    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f(r.get(k)) for _, k, f in cols) + " |")
    return lines


ident = lambda v: "-" if v is None else str(v)
size_fmt = lambda v: "-" if v is None else human(v)

MAIN_COLS = [
    ("collective", "collective", ident), ("size", "size", size_fmt),
    ("NCCL us", "nccl_us", fmt_us),
    ("cudampi us", "cudampi_us", fmt_us), ("on NCCL", "cudampi_nccl_share", fmt_share),
    ("staged us", "staged_us", fmt_us),
    ("NCCL-every us", "every_us", fmt_us),
    ("cudampi/NCCL", "cudampi_over_nccl", fmt_x), ("staged/NCCL", "staged_over_nccl", fmt_x),
    ("every/NCCL", "every_over_nccl", fmt_x),
    ("host MPI us", "host_real_us", fmt_us), ("manual-pin us", "manual_pinned_us", fmt_us),
]
SHORT_COLS = [
    ("collective", "collective", ident), ("size", "size", size_fmt),
    ("NCCL us", "nccl_us", fmt_us), ("cudampi us", "cudampi_us", fmt_us),
    ("on NCCL", "cudampi_nccl_share", fmt_share), ("staged us", "staged_us", fmt_us),
    ("cudampi/NCCL", "cudampi_over_nccl", fmt_x), ("staged/NCCL", "staged_over_nccl", fmt_x),
]
SOCKET_COLS = [
    ("collective", "collective", ident), ("size", "size", size_fmt),
    ("NCCL socket us", "nccl_socket_us", fmt_us), ("cudampi us", "cudampi_socket_us", fmt_us),
    ("on NCCL", "cudampi_nccl_share", fmt_share), ("staged us", "staged_us", fmt_us),
    ("cudampi/NCCL", "cudampi_over_nccl", fmt_x), ("staged/NCCL", "staged_over_nccl", fmt_x),
]
HOST_COLS = [
    ("collective", "collective", ident), ("size", "size", size_fmt),
    ("host MPI us", "host_real_us", fmt_us), ("via cudampi us", "host_shim_us", fmt_us),
    ("cudampi/MPI", "shim_over_real", fmt_x),
    ("difference us", "shim_minus_real_us", lambda v: "-" if v is None else "%+.2f" % v),
]


def short_rows(rows):
    sizes = set(SHORT_SIZES)
    biggest = {}
    for r in rows:
        biggest[r["collective"]] = max(biggest.get(r["collective"], 0), r["size"])
    sizes_of = lambda c: sizes | {biggest.get(c, 0)}
    return [r for r in rows if r["size"] in sizes_of(r["collective"])]


# the README's table: one row per collective, cudampi's time as a multiple of NCCL's at these sizes
WIDE_SIZES = [32 << 10, 2 << 20, 64 << 20]


def wide_table(rows):
    """Markdown, a row per collective: cudampi/NCCL at WIDE_SIZES, then NCCL's and the staged
    path's times at the largest of them."""
    big = WIDE_SIZES[-1]
    head = ["collective"] + ["cudampi/NCCL %s" % human(z) for z in WIDE_SIZES] + \
           ["NCCL us %s" % human(big), "cudampi us %s" % human(big), "staged us %s" % human(big)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in COLLECTIVES:
        at = {r["size"]: r for r in rows if r["collective"] == c}
        if not at:
            continue
        cells = [title(c)] + [fmt_x(at.get(z, {}).get("cudampi_over_nccl")) for z in WIDE_SIZES]
        cells += [fmt_us(at.get(big, {}).get(k)) for k in ("nccl_us", "cudampi_us", "staged_us")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def annotate(folder, meta):
    """Adds meta (and the run's label and settings) to every bench/coll JSON of the folder."""
    for stem, label, settings in RUNS:
        path = os.path.join(folder, stem + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            d = json.load(f)
        d["gpu_nccl"] = dict(meta, run=label, settings=settings)
        with open(path + ".tmp", "w") as f:
            json.dump(d, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)


def plot(folder, rows, h):
    """DIR/nccl.png: one panel per collective, microseconds per call against bytes, log-log."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("nccl_table: matplotlib is not installed; no plot", file=sys.stderr)
        return
    curves = [("nccl_us", "NCCL", "k"), ("cudampi_us", "cudampi", "tab:blue"),
              ("staged_us", "cudampi staged (CUDAMPI_NCCL=0)", "tab:orange"), ("host_real_us", "host MPI, host buffers", "tab:gray")]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for ax, c in zip(axes.flat, COLLECTIVES):
        rs = [r for r in rows if r["collective"] == c]
        for key, label, color in curves:
            pts = [(r["size"], r[key]) for r in rs if r.get(key)]
            if pts:
                ax.loglog(*zip(*pts), marker="o", ms=3, label=label, color=color)
        ax.set_title(title(c))
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("us per call")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("%s: %s x %s, %s ranks, %s, NCCL %s" % (h.get("date_utc"), h.get("gpus"), h.get("gpu"), h.get("nranks"), h.get("mpi"), h.get("nccl")), fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "nccl.png"), dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--annotate", action="store_true", help="add DIR/meta.json to every bench/coll JSON")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--plot", action="store_true", help="draw DIR/nccl.png (matplotlib)")
    ap.add_argument("--update", metavar="FILE", help="replace FILE's nccl:begin/end block with the markdown")
    a = ap.parse_args()
    meta = {}
    mp = os.path.join(a.folder, "meta.json")
    if os.path.exists(mp):
        with open(mp) as f:
            meta = json.load(f)
    if a.annotate:
        annotate(a.folder, meta)
    runs = {stem: load(a.folder, stem) for stem, _, _ in RUNS}
    if not any(runs.values()):
        print("nccl_table: no bench/coll results in %s" % a.folder, file=sys.stderr)
        return 2
    h = header(runs, meta)
    rows, sock, host = table_rows(runs), socket_rows(runs), host_rows(runs)
    cross = crossings(rows)
    cross_lines = ["%-24s %s" % (title(c), "never (up to the largest size)" if s is None else
                                 "at every size" if s == min(r["size"] for r in rows if r["collective"] == c)
                                 else "from %s up" % human(s)) for c, s in cross.items()]

    if a.plot:
        plot(a.folder, rows, h)
    if a.markdown or a.update:
        out = ["Measured %s on %s x %s, %s ranks (one GPU each), %s, NCCL %s, %s." % (
            h["date_utc"], h["gpus"], h["gpu"], h["nranks"], h["mpi"], h["nccl"], h["shim"]), ""]
        out += wide_table(rows) if a.update else md_table(SHORT_COLS, short_rows(rows))
        if a.update:
            out += ["", "Every size and collective: [summary.txt](%s/summary.txt)." % os.path.relpath(
                a.folder, os.path.dirname(os.path.abspath(a.update)) or ".")]
        if cross_lines:
            out += ["", "From which size on cudampi with NCCL at every size (`CUDAMPI_NCCL_BYTES=0`) is at least as "
                    "fast as its staged path (`CUDAMPI_NCCL=0`) at every larger size too: " +
                    "; ".join(l.split(None, 1)[0] + " " + l.split(None, 1)[1].strip() for l in cross_lines) + "."]
        if not a.update:
            print("\n".join(out))
            return 0
        rel = os.path.relpath(a.folder, os.path.dirname(os.path.abspath(a.update)) or ".")
        block = ["<!-- nccl:begin -->",
                 "<!-- generated by bench/nccl_table.py --update from %s; do not edit by hand -->" % rel, ""] + out
        if os.path.exists(os.path.join(a.folder, "nccl.png")):
            block += ["", "![collectives](%s/nccl.png)" % rel]
        block += ["", "<!-- nccl:end -->"]
        with open(a.update) as f:
            text = f.read()
        b, e = text.find("<!-- nccl:begin -->"), text.find("<!-- nccl:end -->")
        if b < 0 or e < b:
            print("nccl_table: %s has no nccl:begin/end block" % a.update, file=sys.stderr)
            return 2
        with open(a.update, "w") as f:
            f.write(text[:b] + "\n".join(block) + text[e + len("<!-- nccl:end -->"):])
        return 0

    # summary.txt: everything; summary.json: the same as data
    txt = ["gpu-nccl summary"] + header_lines(h, runs) + [
        "times: us per call, mean over the iterations, max over the ranks, median of the rounds (bench/coll)",
        "NCCL: bench/coll's own NCCL call; cudampi: device buffers through cudampi with its defaults "
        "(on NCCL: share of the timed calls NCCL ran); staged: CUDAMPI_NCCL=0; NCCL-every: CUDAMPI_NCCL_BYTES=0",
        ""]
    txt += text_table(MAIN_COLS, rows)
    if cross_lines:
        txt += ["", "where NCCL at every size (CUDAMPI_NCCL_BYTES=0) is as fast as staging, and stays so:"] + \
               ["  " + l for l in cross_lines]
    if sock:
        txt += ["", "NCCL kept off its intra-node transports (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: sockets, as "
                    "between nodes), cudampi's defaults; staged from the CUDAMPI_NCCL=0 run:"]
        txt += text_table(SOCKET_COLS, sock)
    if host:
        txt += ["", "host buffers (-d host): the MPI's own call against the same call through cudampi:"]
        txt += text_table(HOST_COLS, host)
    with open(os.path.join(a.folder, "summary.txt"), "w") as f:
        f.write("\n".join(txt) + "\n")
    with open(os.path.join(a.folder, "summary.json"), "w") as f:
        json.dump({"bench": "gpu-nccl", "header": h, "meta": meta,
                   "runs": {stem: (label, settings, runs[stem] is not None) for stem, label, settings in RUNS},
                   "results": rows, "crossings": {c: s for c, s in cross.items()},
                   "socket": sock, "host_buffers": host}, f, indent=1)
        f.write("\n")

    # the short table, printed
    out = header_lines(h, runs) + [""] + text_table(SHORT_COLS, short_rows(rows))
    if cross_lines:
        out += ["NCCL at every size as fast as staging:"] + ["  " + l for l in cross_lines]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
