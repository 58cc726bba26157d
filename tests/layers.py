#!/usr/bin/env python3
"""Which module includes which, in layers, and whether any include a circle.

A module is a header under include/kp/ with the .c files that implement it:
a .c file belongs to the module of the first project header it includes
when that header's name starts its own (tls_openssl.c and tls_none.c are
both "tls"), and is a module of its own otherwise (main.c). A private
header beside the sources (src/client_priv.h) is its module's
("client"), what it includes is the module's, and no other module may
include it. Module A
depends on module B when a file of A includes B's header. Headers
generated at build time (dashboard.h) count as modules without sources.

A circle means no module in it can be built, tested or read without the
others: the lower one must answer the upper one through what it is handed
(a callback, an ops table), never by including it. The layers print top
first: a module includes only modules on lower lines.

A module's wing is the folder of src/ its sources are in: src/origin/,
src/readahead/, src/tls/, or the core (src/ itself, and headers without
sources). Some includes are forbidden whatever the layers say (FORBIDDEN
below): a breach fails the check as a circle does, naming the rule.

  python3 tests/layers.py [ROOT]          layers; exit 1 on a circle or a breach
  python3 tests/layers.py --edges [ROOT]  and every include between modules

Reads text only; standard library only.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"kp/([A-Za-z0-9_/]+)\.h"', re.M)
PRIVATE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)_priv\.h"', re.M)

# The client side of the core: what the origin and TLS wings serve.
CLIENT_SIDE = {"client", "exchange", "memconn", "server", "stats_page", "tunnel", "main"}

# (who may not include, what, why). A set of modules, or a wing's name.
FORBIDDEN = [
    (
        {"client", "exchange", "dispatch", "upstream", "memconn"},
        "readahead",
        "read-ahead and split hang off the exchange's hooks (exchange_hooks), "
        "and the request path below them never knows they exist",
    ),
    (
        "core",
        "readahead",
        "the core reaches read-ahead only through readahead.h, from server and "
        "main, which build it and hand its hooks to the exchange",
    ),
    (
        "origin",
        CLIENT_SIDE | {"readahead"},
        "connections to origins serve the exchange and answer it through "
        "callbacks; they never reach up into the client side",
    ),
    (
        "tls",
        CLIENT_SIDE | {"origin", "readahead"},
        "TLS is a library to whoever calls it: it knows neither clients, "
        "origins' connections nor read-ahead",
    ),
]

# Includes the rules above allow by name: who includes what, and why.
ALLOWED = {
    ("server", "readahead"): "server builds read-ahead and gives its hooks to the exchange",
}


def sources(root):
    """(path, text) of every .c and private .h under src/, and .h under include/kp/."""
    for top, exts in (("src", (".c", "_priv.h")), (os.path.join("include", "kp"), (".h",))):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(exts):
                    p = os.path.join(d, f)
                    with open(p, encoding="utf-8", errors="replace") as fh:
                        yield p, fh.read()


def module_of(path, text):
    name = os.path.splitext(os.path.basename(path))[0]
    if path.endswith("_priv.h"):
        return name[: -len("_priv")]
    if path.endswith(".h"):
        return name
    first = INCLUDE.search(text)
    if first:
        own = os.path.basename(first.group(1))
        if name == own or name.startswith(own + "_"):
            return own
    return name


def wings(root):
    """Each module's wing: the folder under src/ its sources are in, or "core"."""
    wing = {}
    for path, text in sources(root):
        parts = os.path.relpath(path, root).split(os.sep)
        if path.endswith(".c"):
            wing[module_of(path, text)] = parts[1] if len(parts) > 2 else "core"
    return wing


def members(side, wing, deps):
    """The modules a rule's side names: a set of modules, or every module of a wing."""
    if isinstance(side, str):
        return {m for m in deps if wing.get(m, "core") == side}
    found = set()
    for s in side:
        found |= members(s, wing, deps) if s in ("core", "origin", "readahead", "tls") else {s}
    return found


def private_breaches(root):
    """(who, what, why) for every private header included by another module."""
    found = []
    for path, text in sources(root):
        mod = module_of(path, text)
        for owner in PRIVATE.findall(text):
            if owner != mod:
                found.append((mod, owner + "_priv",
                              "a private header is its module's own: ask the module "
                              "through its header in include/kp/"))
    return found


def breaches(deps, wing):
    """(who, what, why) for every include a rule forbids and none allows."""
    found = []
    for who, what, why in FORBIDDEN:
        whom = members(what, wing, deps)
        for m in sorted(members(who, wing, deps)):
            for d in sorted(deps.get(m, ())):
                if d in whom and (m, d) not in ALLOWED and d != m:
                    found.append((m, d, why))
    return sorted(set(found))


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
    wing = wings(root)
    print("layers, top first (a module includes only modules on lower lines),")
    print("by wing (src/ is the core; src/origin/, src/readahead/, src/tls/):")
    for n in range(max(level.values()), -1, -1):
        row = sorted(m for m in level if level[m] == n)
        by_wing = {}
        for m in row:
            by_wing.setdefault(wing.get(m, "core"), []).append(m)
        if row:
            print(f"  {n:2d}  " + "; ".join(
                f"{w}: {' '.join(by_wing[w])}" for w in ("core", "origin", "readahead", "tls")
                if w in by_wing))
    if edges:
        print("\nincludes:")
        for m in sorted(deps):
            if deps[m]:
                print(f"  {m} -> {' '.join(sorted(deps[m]))}")
    found = circles(deps)
    forbidden = breaches(deps, wing) + private_breaches(root)
    print()
    for comp in found:
        print("circle: " + " <-> ".join(comp))
    for m, d, why in forbidden:
        print(f"forbidden: {m} ({wing.get(m, 'core')}) includes {d} ({wing.get(d, 'core')}): {why}")
    if found or forbidden:
        return 1
    print("no circles, no forbidden includes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
