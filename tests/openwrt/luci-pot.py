#!/usr/bin/env python3
"""The translation template of the LuCI app, made by the rules of LuCI's
build/i18n-scan.pl (openwrt/luci), which every LuCI app's
po/templates/*.pot is made with:

  - the files: *.js, and the JSON under menu.d/ and acl.d/, whose "title"
    and "description" values it rewrites as _("...") calls first;
  - xgettext --from-code=UTF-8 --no-wrap --language=JavaScript, with the
    keywords _:1, _:1,2c, N_:2,3 and N_:2,3,4c;
  - each location comment written as "#: PATH:LINE", one a line; xgettext's
    header and its "#, " flags dropped; a msgid's lines joined, \\n and \\t
    read as spaces, runs of spaces made one, and the ends trimmed; an empty
    msgid dropped;
  - all of it through "msguniq -s" after the header
    msgid "" / msgstr "Content-Type: text/plain; charset=UTF-8", and each
    run of location comments sorted by path, then line.

  luci-pot.py APP-DIR   prints the template; run from the app's parent
                        directory, the locations read
                        luci-app-keepalive-proxy/htdocs/...

Nothing of LuCI's is in here: xgettext and msguniq (GNU gettext) do the
reading, this does what the script does around them.
"""

import os
import re
import subprocess
import sys

KEYWORDS = ["_:1", "_:1,2c", "N_:2,3", "N_:2,3,4c"]


def sources(app):
    for root, _, names in os.walk(app):
        for name in sorted(names):
            path = os.path.join(root, name)
            if name.endswith(".js") or (name.endswith(".json") and
                                        os.path.basename(root) in ("menu.d", "acl.d")):
                yield path


def collapse(s):
    s = re.sub(r"\\(.)", lambda m: {"n": " ", "t": " "}.get(m.group(1), "\\" + m.group(1)), s)
    return re.sub(r" {2,}", " ", s).strip(" ")


def scan(path):
    source = open(path, encoding="utf-8").read()
    if path.endswith(".json"):
        source = re.sub(r'("(?:title|description)")\s*:\s*("(?:[^"\\]|\\.)*")', r"\1: _(\2)", source,
                        flags=re.S)
    cmd = ["xgettext", "--from-code=UTF-8", "--no-wrap", "--language=JavaScript"] + \
        ["--keyword=" + k for k in KEYWORDS] + ["-o", "-", "-"]
    pot = subprocess.run(cmd, input=source, capture_output=True, text=True, check=True).stdout
    pot = re.sub(r"^#: (.+?)\n",
                 lambda m: "".join(f"#: {path}:{n}\n" for n in re.findall(r":(\d+)", m.group(1))),
                 pot, flags=re.M)
    lines = pot.split("\n")
    while lines and not lines[0].startswith("#: "):
        lines.pop(0)
    out = []
    while lines:
        line = lines.pop(0)
        m = re.match(r'^(msg\w+) "(.*)"$', line)
        if m:
            kw, kv = m.groups()
            while lines and re.match(r'^"(.*)"$', lines[0]):
                kv += " " + lines.pop(0)[1:-1]
            kv = collapse(kv)
            if kw != "msgstr" and kv == "":
                while out and out[-1] != "":
                    out.pop()
                while lines and re.match(r'^(?:msg\w+ )?"(.*)"$', lines[0]):
                    lines.pop(0)
                continue
            out.append(f'{kw} "{kv}"')
        elif line.startswith("#, "):
            continue
        else:
            out.append(line)
    return "\n".join([""] + out + [""]) if out else ""


def template(app):
    parent = os.path.dirname(os.path.abspath(app))
    name = os.path.basename(os.path.abspath(app))
    text = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8"\n'
    cwd = os.getcwd()
    os.chdir(parent)
    try:
        for path in sources(name):
            text += scan(path)
    finally:
        os.chdir(cwd)
    uniq = subprocess.run(["msguniq", "-s"], input=text, capture_output=True, text=True,
                          check=True).stdout.split("\n")
    out = []
    while uniq:
        line = uniq.pop(0)
        if line.startswith("#: "):
            locs = [line]
            while uniq and uniq[0].startswith("#: "):
                locs.append(uniq.pop(0))
            locs.sort(key=lambda l: (l[3:].rsplit(":", 1)[0], int(l.rsplit(":", 1)[1])))
            out += locs
            continue
        out.append(line)
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: luci-pot.py APP-DIR")
    sys.stdout.write(template(sys.argv[1]))
