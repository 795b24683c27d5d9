"""Grouped bar charts on a log scale as SVG, with no plotting library: the results folders'
plot scripts (bench/results/*/plot_svg.py) describe their groups, cases and bars and call draw."""
import math


def draw(path, title, groups, cases, bars, hi, legend_x, lo=1.0):
    """Writes the chart to `path`. `groups`: (key, label) along the x axis; `cases`: (name, get)
    within each group, `get` picking a case's figures from a JSON; `bars`: (label, color, tip,
    value) per case, `tip` the bar's hover text after the case's name (`{group}` stands for the
    group's label) and `value(key, get)` its height in microseconds; the y axis runs from `lo`
    to `hi`."""
    W, H, TOP, LEFT, BOTTOM = 900, 420, 40, 70, 90
    y = lambda v: TOP + (H - TOP - BOTTOM) * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for e in range(0, round(math.log10(hi)) + 1):
        v = 10 ** e
        out.append(f'<line x1="{LEFT}" x2="{W - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    group = (W - LEFT - 20) / len(groups)
    for g, (key, label) in enumerate(groups):
        x0 = LEFT + 10 + g * group
        out.append(f'<text x="{x0 + group / 2 - 10:.0f}" y="{H - 20}" text-anchor="middle">{label}</text>')
        for c, (case, get) in enumerate(cases):
            for k, (_, color, tip, value) in enumerate(bars):
                v = value(key, get)
                x = x0 + c * (group - 20) / len(cases) + k * 22
                out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="20" height="{y(lo) - y(v):.1f}" fill="{color}"><title>{case} {tip.format(group=label)}: {v:.1f} us</title></rect>')
            out.append(f'<text x="{x0 + c * (group - 20) / len(cases) + 11 * len(bars) - 1:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{case}</text>')
    for k, (name, color, _, _) in enumerate(bars):
        out.append(f'<rect x="{W - legend_x}" y="{30 + 18 * k}" width="12" height="12" fill="{color}"/><text x="{W - legend_x + 18}" y="{40 + 18 * k}">{name}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")
