#!/usr/bin/env python3
"""Which module includes which, in layers, and whether any include a circle.

A module is a header under include/kp/ with the .c files that implement it:
a .c file belongs to the module of the first project header it includes
when that header's name starts its own (tls_openssl.c and tls_none.c are
both "tls"), and is a module of its own otherwise (main.c). Module A
depends on module B when a file of A includes B's header. Headers
generated at build time (dashboard.h) count as modules without sources.

A circle means no module in it can be built, tested or read without the
others: the lower one must answer the upper one through what it is handed
(a callback, an ops table), never by including it. The layers print top
first: a module includes only modules on lower lines.

  python3 tests/layers.py [ROOT]          layers; exit 1 on a circle
  python3 tests/layers.py --edges [ROOT]  and every include between modules

Reads text only; standard library only.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"kp/([A-Za-z0-9_/]+)\.h"', re.M)


def sources(root):
    """(path, text) of every .c under src/ and .h under include/kp/."""
    for top, ext in (("src", ".c"), (os.path.join("include", "kp"), ".h")):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(ext):
                    p = os.path.join(d, f)
                    with open(p, encoding="utf-8", errors="replace") as fh:
                        yield p, fh.read()


def module_of(path, text):
    name = os.path.splitext(os.path.basename(path))[0]
    if path.endswith(".h"):
        return name
    first = INCLUDE.search(text)
    if first:
        own = os.path.basename(first.group(1))
        if name == own or name.startswith(own + "_"):
            return own
    return name


def graph(root):
    deps = {}
    for path, text in sources(root):
        mod = module_of(path, text)
        out = deps.setdefault(mod, set())
        for inc in INCLUDE.findall(text):
            inc = os.path.basename(inc)
            deps.setdefault(inc, set())
            if inc != mod:
                out.add(inc)
    return deps


def circles(deps):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(1000, 4 * len(deps)))
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found


def layers(deps):
    """Layer 0 includes nothing of ours; layer n includes layers below n."""
    level = {}

    def depth(v, seen=()):
        if v in level:
            return level[v]
        if v in seen:
            return 0
        level[v] = 1 + max((depth(w, seen + (v,)) for w in deps[v]), default=-1)
        return level[v]

    for v in deps:
        depth(v)
    return level


def main(argv):
    edges = "--edges" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    deps = graph(root)
    if not deps:
        print(f"layers: no sources under {root}", file=sys.stderr)
        return 2
    level = layers(deps)
    print("layers, top first (a module includes only modules on lower lines):")
    for n in range(max(level.values()), -1, -1):
        row = sorted(m for m in level if level[m] == n)
        if row:
            print(f"  {n:2d}  " + " ".join(row))
    if edges:
        print("\nincludes:")
        for m in sorted(deps):
            if deps[m]:
                print(f"  {m} -> {' '.join(sorted(deps[m]))}")
    found = circles(deps)
    if found:
        print()
        for comp in found:
            print("circle: " + " <-> ".join(comp))
        return 1
    print("\nno circles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
