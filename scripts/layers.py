#!/usr/bin/env python3
"""The import graph of src/, and the check that its layers only import downward.

Reads every `use` statement and every `crate::`, `super::` and `self::` path in the Rust code of
src/ (comments and strings left out), resolves each to the file of the module it names, and
prints the file-level graph. It fails (exit 1) when

  - a file imports a file of a higher layer (LAYERS below, lowest first), or
  - files form an import circle of more than two files (a pair that calls each other inside
    one folder is allowed: a module and the submodule that serves it).

Usage: scripts/layers.py [--graph] [--quiet] [SRC]
"""

import os
import re
import sys

# Lowest first. A file belongs to the layer of the first entry that is a prefix of its path
# relative to src/; a file may import its own layer and the layers below it.
LAYERS = [
    ("base", ["base/"]),
    ("cuda", ["cuda/"]),
    ("mpi", ["mpi/"]),
    ("compat", ["compat/"]),
    ("staging", ["staging/"]),
    ("fastpath", ["fastpath/"]),
    ("engine", ["engine/"]),
    ("streams", ["streams/"]),
    ("requests", ["requests/"]),
    ("handlers", ["handlers/"]),
    ("entry", ["entry/", "lib.rs"]),
]


def strip(text):
    """Rust source without comments, string and char literals (their contents become spaces)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or text.startswith("'\\u{", i):
            i = text.find("'", i + 2) + 1
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def modules(src):
    """{module path tuple: file} and {file: module path tuple} for every .rs file of src/."""
    by_path, by_file = {}, {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib"):
                parts = parts[:-1]
            by_path[tuple(parts)] = rel
            by_file[rel] = tuple(parts)
    return by_path, by_file


def use_paths(tree):
    """The paths of one use tree: `a::{b, c::{d, self}}` -> a::b, a::c::d, a::c."""
    tree = re.sub(r"\s+", "", tree)
    depth, start = 0, None
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                prefix, inner = tree[:start], tree[start + 1:i]
                parts, d, s = [], 0, 0
                for j, ch in enumerate(inner):
                    d += ch == "{"
                    d -= ch == "}"
                    if ch == "," and d == 0:
                        parts.append(inner[s:j])
                        s = j + 1
                parts.append(inner[s:])
                res = []
                for p in filter(None, parts):
                    for q in use_paths(p):
                        res.append(prefix[:-2] if q == "self" else prefix + q)
                return res
    return [re.sub(r"\bas\w+$", "", tree.split(" as ")[0])]


def resolve(segs, here, by_path, children, macros, exports, depth=0):
    """The file a path names, or None: `segs` is a list of segments, `here` the module path
    of the code it appears in. A name that a module re-exports (`pub use`) resolves to the file
    that defines it."""
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        base, rest = (), segs[1:]
    elif head == "super":
        base, rest = here, segs
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif head == "self":
        base, rest = here, segs[1:]
    elif head in children.get(here, ()):
        base, rest = here, segs
    else:
        return None
    if len(rest) == 1 and rest[0].endswith("!") and not base:
        return macros.get(rest[0][:-1])
    k = 0
    while k < len(rest) and base + tuple(rest[:k + 1]) in by_path:
        k += 1
    mod = base + tuple(rest[:k])
    if mod not in by_path:
        return None
    if k < len(rest) and depth < 8:
        target = exports.get(mod, {}).get(rest[k])
        if target:
            return resolve(target + rest[k + 1:], mod, by_path, children, macros, exports, depth + 1) or by_path[mod]
    return by_path[mod]


def scopes(text, here):
    """(module path, code) for the code of a file outside inline modules and for each inline
    module (`mod tests { ... }`), whose `super` is the file's own module."""
    out, rest, pos = [], [], 0
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += (text[i] == "{") - (text[i] == "}")
            i += 1
        rest.append(text[pos:m.start()])
        out += scopes(text[m.end():i - 1], here + (m.group(1),))
        pos = i
    rest.append(text[pos:])
    return [(here, "".join(rest))] + out


def uses(code):
    """Every path of `use` statements, as (path, is_pub)."""
    res = []
    for m in re.finditer(r"(\bpub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);", code):
        res += [(p, bool(m.group(1))) for p in use_paths(m.group(2))]
    return res


def graph(src):
    by_path, by_file = modules(src)
    children = {}
    for p in by_path:
        if p:
            children.setdefault(p[:-1], set()).add(p[-1])
    texts = {f: strip(open(os.path.join(src, f), encoding="utf-8").read()) for f in by_file}
    macros, exports = {}, {}
    for f, t in texts.items():
        for m in re.finditer(r"#\[macro_export\]\s*(?:#\[[^\]]*\]\s*)*macro_rules!\s*(\w+)", t):
            macros[m.group(1)] = f
        here = by_file[f]
        for p, pub in uses(scopes(t, here)[0][1]):
            segs = [s for s in p.split("::") if s]
            if pub and segs and segs[-1] != "*":
                if segs[0] not in ("crate", "super", "self") and segs[0] not in children.get(here, ()):
                    continue
                if segs[0] == "self":
                    segs = list(here) and ["crate"] + list(here) + segs[1:]
                elif segs[0] == "super":
                    base = list(here)
                    while segs and segs[0] == "super":
                        base, segs = base[:-1], segs[1:]
                    segs = ["crate"] + base + segs
                elif segs[0] != "crate":
                    segs = ["crate"] + list(here) + segs
                exports.setdefault(here, {})[segs[-1]] = segs
    edges = {f: set() for f in by_file}
    for f, t in texts.items():
        for here, code in scopes(t, by_file[f]):
            paths, aliases = [], {}
            used = [p for p, _ in uses(code)]
            for p in used:
                paths.append(p)
                segs = [s for s in p.split("::") if s]
                if segs and segs[-1] != "*":
                    aliases[segs[-1]] = segs
            code = re.sub(r"\buse\s+[^;]+;", ";", code)
            names = "|".join(re.escape(a) for a in aliases)
            pattern = r"(?<![\w:$])((?:\$?crate|super|self%s)(?:\s*::\s*\w+!?)+)" % ("|" + names if names else "")
            through = set()
            for m in re.finditer(pattern, code):
                segs = [s for s in re.sub(r"\s+", "", m.group(1)).lstrip("$").split("::") if s]
                if segs[0] in aliases:
                    through.add(segs[0])
                    segs = aliases[segs[0]] + segs[1:]
                paths.append("::".join(segs))
            for p in paths:
                segs = [s for s in p.split("::") if s]
                target = resolve(segs, here, by_path, children, macros, exports)
                # `use a::b;` of a module only names it: what counts is what is used through it,
                # which may be defined elsewhere and re-exported by the module.
                if target and by_path.get(tuple(segs[1:]) if segs[0] == "crate" else None) == target and p in used and segs[-1] in through:
                    continue
                if target and target != f:
                    edges[f].add(target)
    return edges


def layer(f):
    for i, (name, prefixes) in enumerate(LAYERS):
        if any(f == p or f.startswith(p) for p in prefixes):
            return i, name
    return None, None


def circles(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def main(argv):
    show = "--graph" in argv
    quiet = "--quiet" in argv
    args = [a for a in argv if not a.startswith("--")]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    edges = graph(src)
    problems = []
    for f in sorted(edges):
        lf, _ = layer(f)
        if lf is None:
            problems.append(f"{f}: in no layer (add its folder to LAYERS in scripts/layers.py)")
            continue
        for t in sorted(edges[f]):
            lt, nt = layer(t)
            if lt is not None and lt > lf:
                problems.append(f"{f} imports {t}, of the higher layer {nt}")
    for comp in circles(edges):
        if len(comp) > 2 or os.path.dirname(comp[0]) != os.path.dirname(comp[1]):
            problems.append("import circle: " + " <-> ".join(comp))
    if show:
        for i, (name, _) in enumerate(LAYERS):
            files = [f for f in sorted(edges) if layer(f)[0] == i]
            if files:
                print(f"[{name}]")
                for f in files:
                    print(f"  {f} -> {', '.join(sorted(edges[f])) or '-'}")
        stray = [f for f in sorted(edges) if layer(f)[0] is None]
        if stray:
            print("[no layer]")
            for f in stray:
                print(f"  {f} -> {', '.join(sorted(edges[f])) or '-'}")
    for p in problems:
        print("layers: " + p)
    if not quiet:
        n = sum(len(e) for e in edges.values())
        print(f"layers: {len(edges)} files, {n} imports, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
