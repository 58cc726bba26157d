#!/usr/bin/env python3
"""The layering check can fail: one include added to a copy of the sources
breaks a rule, and tests/layers.py must exit 1 naming it.

  python3 tests/layers_guard.py ROOT

Each case copies src/ and include/ to a scratch folder, adds one line after
the first include of one file, and runs the check on the copy; the tree
itself is never touched. Standard library only.
"""

import contextlib
import io
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402

# (file to change, the include added, what the check must print)
CASES = [
    ("src/client.c", '#include "kp/readahead.h"', "forbidden: client (core) includes readahead"),
    ("src/exchange.c", '#include "kp/ra_split.h"', "forbidden: exchange (core) includes ra_split"),
    ("src/memconn.c", '#include "kp/ra_store.h"', "forbidden: memconn (core) includes ra_store"),
    ("src/origin/dispatch.c", '#include "kp/ra_fetch.h"',
     "forbidden: dispatch (origin) includes ra_fetch"),
    ("src/origin/upstream.c", '#include "kp/exchange.h"',
     "forbidden: upstream (origin) includes exchange"),
    ("src/tls/tls_openssl.c", '#include "kp/dispatch.h"',
     "forbidden: tls (tls) includes dispatch"),
    ("src/stats_page.c", '#include "kp/ra_store.h"',
     "forbidden: stats_page (core) includes ra_store"),
    ("src/origin/dispatch_priv.h", '#include "kp/exchange.h"',
     "forbidden: dispatch (origin) includes exchange"),
    ("src/server.c", '#include "client_priv.h"',
     "forbidden: server (core) includes client_priv"),
]


def check(root):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = layers.main(["layers.py", root])
    return rc, out.getvalue()


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    failed = 0
    rc, text = check(root)
    if rc != 0:
        print("the tree itself does not pass the check:\n" + text)
        return 1
    for path, line, want in CASES:
        with tempfile.TemporaryDirectory() as scratch:
            for top in ("src", "include"):
                shutil.copytree(os.path.join(root, top), os.path.join(scratch, top))
            target = os.path.join(scratch, path)
            with open(target, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            first = next(i for i, t in enumerate(lines) if t.startswith('#include "kp/'))
            lines.insert(first + 1, line)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines))
            rc, text = check(scratch)
        if rc != 1 or want not in text:
            failed += 1
            print(f"FAIL {path} + {line}: exit {rc}, expected 1 and \"{want}\"")
        else:
            print(f"ok   {path} + {line}: {want}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
