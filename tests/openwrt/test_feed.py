#!/usr/bin/env python3
"""The OpenWrt feed in contrib/openwrt, checked by the rules OpenWrt's build
system applies to it, each quoted from its source (openwrt.git) where it is
modelled:

1. scan.mk finds every package Makefile (or the package does not exist);
2. the LuCI package depends on the daemon under every selection of the
   daemon's variants, as package-pack.mk writes the package's Depends and as
   package-metadata.pl writes menuconfig's select; and the Config.in that
   package-metadata.pl writes for the feed has no recursive dependency for
   kconfig, and resolves each selection of the variants beside the LuCI app
   to the variant asked for;
3. every file the config can name lives under a path sysupgrade keeps, as
   package-pack.mk turns conffiles into /lib/upgrade/keep.d and sysupgrade
   reads it;
4. the package's version is the one the binary reports, and the package's
   test.sh (run by the openwrt/packages CI) passes with the built binary;
5. every script under contrib/ carries its run bit;
6. built from a checkout with USE_SOURCE_DIR, the package's prepare and
   CMake configure write nothing into the checkout, as package.mk and
   cmake.mk run them; and PKG_LICENSE names the licences of what is built
   in, with a licence file for each.

Usage: test_feed.py SOURCE-DIR KEEPALIVE-PROXY-BINARY
"""

import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import tempfile

failed = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        if detail:
            print("  " + detail.replace("\n", "\n  "))
        failed.append(what)


def makefiles(feed):
    for root, _, files in os.walk(feed):
        if "Makefile" in files:
            yield os.path.join(root, "Makefile")


# --- 1. scan.mk -------------------------------------------------------------
# include/scan.mk:
#   GREP_STRING=(Build/DefaultTargets|BuildPackage|KernelPackage)
#   find -L $(SCAN_DIR) ... -name Makefile | xargs grep -aHE 'call $(GREP_STRING)'
def scan_mk(feed):
    for mk in makefiles(feed):
        found = subprocess.run(
            ["grep", "-aHE", "call (Build/DefaultTargets|BuildPackage|KernelPackage)", mk],
            stdout=subprocess.DEVNULL).returncode == 0
        check(found, f"scan.mk indexes {os.path.relpath(mk, feed)}")


# --- reading package Makefiles ----------------------------------------------
def make_vars(text):
    """Top-level NAME:=value and the bodies of 'define NAME ... endef'."""
    lines = text.replace("\\\n", " ").split("\n")
    top, blocks, cur, body = {}, {}, None, []
    for line in lines:
        if cur is not None:
            if line.strip() == "endef":
                blocks[cur] = body
                cur, body = None, []
            else:
                body.append(line)
            continue
        m = re.match(r"define\s+(\S+)", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"([A-Za-z_][A-Za-z0-9_/.-]*)\s*(\+?:?=)\s*(.*)$", line)
        if m:
            top[m.group(1)] = m.group(3).strip()
    return top, blocks


def block_vars(body):
    out = {}
    for line in body:
        m = re.match(r"\s*([A-Z_]+)\s*(\+?:?=)\s*(.*)$", line)
        if m:
            val = m.group(3).strip()
            out[m.group(1)] = (out.get(m.group(1), "") + " " + val).strip() \
                if m.group(2) == "+=" else val
    return out


def packages(feed):
    """name -> {depends: [...], provides: [...], conflicts: [...], variant,
    default_variant}"""
    pkgs = {}
    for mk in makefiles(feed):
        top, blocks = make_vars(open(mk).read())
        if "LUCI_DEPENDS" in top:
            name = os.path.basename(os.path.dirname(mk))
            pkgs[name] = {"depends": top["LUCI_DEPENDS"].split(), "provides": [],
                          "conflicts": [], "variant": None, "default_variant": False}
            continue
        for bname, body in blocks.items():
            m = re.fullmatch(r"Package/([^/]+)", bname)
            if not m or m.group(1).endswith("/Default"):
                continue
            v = block_vars(body)
            default_name = f"Package/{m.group(1).split('-openssl')[0]}/Default"
            if default_name in blocks and default_name != bname:
                v = {**block_vars(blocks[default_name]), **v}
            pkgs[m.group(1)] = {
                "depends": v.get("DEPENDS", "").split(),
                "provides": v.get("PROVIDES", "").split(),
                "conflicts": v.get("CONFLICTS", "").split(),
                "variant": v.get("VARIANT"),
                "default_variant": v.get("DEFAULT_VARIANT") == "1",
            }
    return pkgs


# --- 2. dependencies --------------------------------------------------------
# include/package-pack.mk, the package's Depends field:
#   strip_deps=$(strip $(subst +,,$(filter-out @%,$(1))))
#   filter_deps=$(foreach dep,$(call strip_deps,$(1)),$(if $(findstring :,$(dep)),$(call dep_if,$(dep)),$(dep)))
#   dep_if=$(if $(findstring !,$(1)),$(call dep_neg,$(1)),$(call dep_pos,$(1)))
#   dep_confvar: the condition before ':' without '!', '(' and ')', split at
#   '||', each part's '&&'-joined CONFIG_ symbols all set
def filter_deps(depends, config):
    out = []
    for dep in depends:
        if dep.startswith("@"):
            continue
        dep = dep.replace("+", "")
        if ":" not in dep:
            out.append(dep)
            continue
        cond, val = dep.split(":", 1)
        bare = re.sub(r"[!()]", "", cond)
        confvar = any(all(config.get(sym) for sym in alt.split("&&"))
                      for alt in bare.split("||"))
        if ("!" in cond) != confvar:
            out.append(val)
    return out


# scripts/package-metadata.pl, mconf_depends(), for a "+name" that is a
# virtual package (provided by several variants):
#   $depend = shift @vdeps;   (the default variant first)
#   $condition = ... "PACKAGE_${vdeps[0]}<PACKAGE_$pkgname"
#   ... "$depend if $condition"  as a select
# Kconfig tristates: n=0, m=1, y=2.
def kconfig_true(condition, config):
    """An '&&' of SYMBOL, !SYMBOL and A<B terms, as Kconfig reads them."""
    for term in filter(None, (t.strip() for t in condition.split("&&"))):
        if "<" in term:
            a, b = term.split("<", 1)
            if not config.get(a, 0) < config.get(b, 0):
                return False
        elif term.startswith("!"):
            if config.get(term[1:], 0):
                return False
        elif not config.get(term, 0):
            return False
    return True


def menuconfig_selects(pkgname, depends, pkgs, config):
    """The daemon packages menuconfig turns on for PKGNAME's '+' depends."""
    selected = {}
    for dep in depends:
        if not dep.startswith("+"):
            continue
        name, condition = dep.lstrip("+@"), ""
        if ":" in name:
            condition, name = name.split(":", 1)
        providers = [n for n, p in pkgs.items() if n == name or name in p["provides"]]
        if not providers:
            continue
        providers.sort(key=lambda n: not pkgs[n]["default_variant"])
        chosen, others = providers[0], [n for n in providers[1:] if n != pkgname]
        condition = "&&".join([condition] + [f"PACKAGE_{o}<PACKAGE_{pkgname}" for o in others])
        if kconfig_true(condition, config):
            selected[chosen] = config.get("PACKAGE_" + pkgname, 0)
    return selected


def dependencies(feed):
    pkgs = packages(feed)
    luci = [n for n in pkgs if n.startswith("luci-app-")]
    daemons = [n for n in pkgs if n.startswith("keepalive-proxy")]
    check(bool(luci) and len(daemons) == 2, "the feed has the LuCI app and both daemon variants",
          f"found {sorted(pkgs)}")
    for name in daemons:
        check(name == "keepalive-proxy" or "keepalive-proxy" in pkgs[name]["provides"],
              f"{name} satisfies a dependency on keepalive-proxy")
    for app in luci:
        deps = pkgs[app]["depends"]
        for plain in (0, 1, 2):
            for ssl in (0, 1, 2):
                if not plain and not ssl:
                    continue
                config = {"PACKAGE_keepalive-proxy": plain,
                          "PACKAGE_keepalive-proxy-openssl": ssl,
                          "PACKAGE_" + app: 2}
                built = [n for n in daemons if config["PACKAGE_" + n]]
                got = filter_deps(deps, config)
                ok = any(d == "keepalive-proxy" or d in built for d in got)
                check(ok, f"{app}'s Depends names the daemon when built with "
                          f"{' and '.join(built)} (tristates {plain}/{ssl})",
                      f"Depends: {', '.join(got) or '(none)'}")
        # In an image: with the LuCI app built in, a daemon is built in too.
        for ssl in (0, 1, 2):
            config = {"PACKAGE_keepalive-proxy-openssl": ssl, "PACKAGE_" + app: 2}
            sel = menuconfig_selects(app, deps, pkgs, config)
            inside = {n for n, v in sel.items() if v == 2}
            if ssl == 2:
                inside.add("keepalive-proxy-openssl")
            check(bool(inside), f"menuconfig puts a daemon in the image beside {app} "
                                f"(keepalive-proxy-openssl={'nmy'[ssl]})",
                  f"selected: {sel}")


# --- 2b. kconfig, on the Config.in package-metadata.pl writes -----------------
# scripts/package-metadata.pl, print_package_config_category(), writes for
# each package "config PACKAGE_<name>", then:
#   mconf_depends(): "+dep" is "select PACKAGE_dep"; a virtual "+dep" selects
#     its default variant "if PACKAGE_<other variant><PACKAGE_<name>"; a
#     "+COND:dep" adds "if COND"; a plain "dep" is "depends on PACKAGE_dep"
#     ("PACKAGE_a||PACKAGE_b" for a virtual one, "!(COND) || ..." with a
#     condition), and a selected package's own plain depends are repeated
#     under the select's condition ($only_dep);
#   mconf_conflicts(): each name in CONFLICTS that is a package becomes
#     "depends on m || (PACKAGE_<that> != y)".
# kconfig then refuses a symbol that reaches itself through what its value
# is computed from (scripts/config/symbol.c, sym_check_deps(): the symbols
# of its "depends on" and its reverse dependency, that is every symbol that
# selects it and the select's "if"): "recursive dependency detected!". And
# sym_calc_value() gives a tristate the value the user set, n if none,
# capped by its "depends on", then raised to its reverse dependency.
# Tristates: n=0, m=1, y=2; "&&" the minimum, "||" the maximum, "!" 2-x,
# "A<B" and "A!=y" y when true, else n.
def config_in(pkgs):
    """{symbol: {"depends": [expr], "selects": [(symbol, condition)]}}"""
    vpackage = {}
    for name, p in pkgs.items():
        vpackage.setdefault(name, []).insert(0, name)
        for v in p["provides"]:
            vpackage.setdefault(v, []).append(name)
    entries = {"PACKAGE_" + n: {"depends": [], "selects": []} for n in pkgs}

    def add(pkgname, depends, only_dep, parent_condition):
        e = entries["PACKAGE_" + pkgname]
        for dep in depends:
            flags, dep = re.match(r"([@+]*)(.*)", dep).groups()
            condition = parent_condition
            if ":" in dep:
                cond, dep = dep.split(":", 1)
                condition = f"{condition} && {cond}" if condition else cond
            if "+" in flags:
                variants = sorted(vpackage.get(dep, []), key=lambda n: not pkgs[n]["default_variant"])
                if variants:
                    dep, others = variants[0], variants[1:]
                    rule = "&&".join(f"PACKAGE_{o}<PACKAGE_{pkgname}" for o in others)
                    if rule:
                        condition = f"{condition} && {rule}" if condition else rule
                if dep in pkgs:
                    add(pkgname, [d for d in pkgs[dep]["depends"] if not d.startswith("+")],
                        True, condition)
                if not only_dep:
                    e["selects"].append((dep if "@" in flags else "PACKAGE_" + dep, condition))
                continue
            if vpackage.get(dep):
                dep = "||".join("PACKAGE_" + v for v in vpackage[dep])
            elif "@" not in flags:
                dep = "PACKAGE_" + dep
            e["depends"].append(f"!({condition}) || {dep}" if condition else dep)

    for name, p in pkgs.items():
        add(name, p["depends"], False, "")
        for other in p["conflicts"]:
            if other in pkgs:
                entries["PACKAGE_" + name]["depends"].append(f"m || (PACKAGE_{other} != y)")
    return entries


def kexpr_tokens(text):
    return re.findall(r"&&|\|\||!=|[!()<=]|[A-Za-z0-9_.-]+", text)


def kexpr_value(text, value):
    """A Kconfig expression's tristate; value(SYMBOL) gives a symbol's."""
    toks, pos = kexpr_tokens(text), [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def atom():
        t = take()
        if t == "!":
            return 2 - atom()
        if t == "(":
            v = disj()
            take()
            return v
        a = {"n": 0, "m": 1, "y": 2}.get(t, None)
        a = value(t) if a is None else a
        if peek() in ("<", "!=", "="):
            op, b = take(), take()
            b = {"n": 0, "m": 1, "y": 2}.get(b, None) if b in ("n", "m", "y") else value(b)
            return 2 if {"<": a < b, "!=": a != b, "=": a == b}[op] else 0
        return a

    def conj():
        v = atom()
        while peek() == "&&":
            take()
            v = min(v, atom())
        return v

    def disj():
        v = conj()
        while peek() == "||":
            take()
            v = max(v, conj())
        return v

    return disj()


def kexpr_symbols(text):
    return {t for t in kexpr_tokens(text) if t.startswith("PACKAGE_")}


def kconfig_cycle(entries):
    """A recursive dependency as sym_check_deps() finds one, or None."""
    edges = {s: set() for s in entries}
    for s, e in entries.items():
        for d in e["depends"]:
            edges[s] |= kexpr_symbols(d)
        for target, cond in e["selects"]:
            if target in edges:
                edges[target] |= {s} | kexpr_symbols(cond)
    state = {}

    def visit(s, path):
        state[s] = 1
        for t in sorted(edges[s]):
            if t not in edges:
                continue
            if state.get(t) == 1:
                return path[path.index(t):] + [t] if t in path else [s, t]
            if not state.get(t):
                found = visit(t, path + [t])
                if found:
                    return found
        state[s] = 2
        return None

    for s in sorted(edges):
        if not state.get(s):
            found = visit(s, [s])
            if found:
                return found
    return None


def kconfig_resolve(entries, user):
    """Every symbol's tristate for the user's values, as sym_calc_value()
    settles them. (With a recursive dependency kconfig's answer depends on
    the order it computes symbols in, which this does not follow: the cycle
    is refused first.)"""
    val = {s: user.get(s, 0) for s in entries}
    get = lambda s: val.get(s, 0)
    for _ in range(50):
        changed = False
        for s in sorted(entries):
            visible = min([kexpr_value(d, get) for d in entries[s]["depends"]] or [2])
            reverse = max([min(get(by), kexpr_value(cond, get) if cond else 2)
                           for by, e in entries.items() for t, cond in e["selects"] if t == s]
                          or [0])
            new = max(min(user.get(s, 0), visible), reverse)
            changed |= new != val[s]
            val[s] = new
        if not changed:
            break
    return val


def kconfig(feed):
    pkgs = packages(feed)
    entries = config_in(pkgs)
    cycle = kconfig_cycle(entries)
    listing = "\n".join(f"config {s}\n" + "".join(f"  depends on {d}\n" for d in e["depends"])
                        + "".join(f"  select {t}{' if ' + c if c else ''}\n" for t, c in e["selects"])
                        for s, e in sorted(entries.items()))
    check(cycle is None, "kconfig finds no recursive dependency in the feed's Config.in",
          "recursive dependency detected: " + " -> ".join(cycle or []) + "\n" + listing)
    plain = next((n for n, p in pkgs.items() if n.startswith("keepalive-proxy") and p["default_variant"]), None)
    ssl = next((n for n, p in pkgs.items() if n.startswith("keepalive-proxy") and not p["default_variant"]), None)
    if not plain or not ssl:
        check(False, "the feed has a default and an -openssl variant", str(sorted(pkgs)))
        return
    for app in (n for n in pkgs if n.startswith("luci-app-")):
        for asked in ((), (plain,), (ssl,), (plain, ssl)):
            user = {"PACKAGE_" + n: 2 for n in asked + (app,)}
            got = kconfig_resolve(entries, user)
            tls = ssl in asked
            want = ssl if tls else plain
            other = plain if tls else ssl
            ok = got["PACKAGE_" + want] == 2 and got["PACKAGE_" + other] != 2 and got["PACKAGE_" + app] == 2
            check(ok, f"kconfig, {app}=y with {' and '.join(n + '=y' for n in asked) or 'no variant'} "
                      f"asked: {want} built in, {other} not",
                  "resolved: " + ", ".join(f"{s}={'nmy'[v]}" for s, v in sorted(got.items())) + "\n" + listing)


# --- 3. what sysupgrade keeps -----------------------------------------------
# include/package-pack.mk:
#   KEEP_$(1):=$(strip $(call Package/$(1)/conffiles))
#   for x in $$(KEEP_$(1)); do [ -f "$$(IDIR_$(1))/$$$$x" ] || keepfiles="... $$$$x"; done
#   ... echo $$$$x >> $$(IDIR_$(1))/lib/upgrade/keep.d/$(1)
# package/base-files/files/sbin/sysupgrade, list_static_conffiles():
#   find $(sed -ne '/^[[:space:]]*$/d; /^#/d; p' /etc/sysupgrade.conf /lib/upgrade/keep.d/* ...) \( -type f -o -type l \)
# so an entry that is a directory keeps every file under it; one the
# package ships as a file is kept when it changed (list_changed_conffiles).
def kept_paths(feed):
    _, blocks = make_vars(open(os.path.join(feed, "keepalive-proxy", "Makefile")).read())
    entries = [l.strip() for l in blocks.get("Package/keepalive-proxy/conffiles", []) if l.strip()]
    return entries


def is_kept(path, entries):
    for e in entries:
        if path == e.rstrip("/") or path.startswith(e.rstrip("/") + "/"):
            return True
    return False


def config_paths(feed):
    """Absolute paths the config file names, set or in comments, and the
    init script's defaults (a default in a validation tuple, ca_dir's files)."""
    paths = set()
    cfg = os.path.join(feed, "keepalive-proxy", "files", "keepalive-proxy.config")
    for line in open(cfg):
        m = re.match(r"\s*#?\s*(option|list)\s+(\S+)\s+(.*)$", line)
        if not m:
            continue
        try:
            value = shlex.split(m.group(3))[0]
        except (ValueError, IndexError):
            continue
        if value.startswith("/") and m.group(2) != "user":
            paths.add((m.group(2), value))
    init = open(os.path.join(feed, "keepalive-proxy", "files", "keepalive-proxy.init")).read()
    for name, default in re.findall(r"'([a-z_]+):[a-z()0-9,]+:(/[^']*)'", init):
        paths.add((name, default))
        if name == "ca_dir":
            paths.update({("ca_cert", default + "/ca.crt"), ("ca_key", default + "/ca.key")})
    return paths


def kept(feed):
    entries = kept_paths(feed)
    check("/etc/config/keepalive-proxy" in entries, "the UCI file is a conffile")
    paths = config_paths(feed)
    check(any(n == "auth_file" for n, _ in paths) and any(n == "ca_dir" for n, _ in paths),
          "the config names the users file and the CA directory",
          f"named: {sorted(paths)}")
    for name, path in sorted(paths):
        check(is_kept(path, entries), f"{name} {path} survives sysupgrade",
              f"kept: {entries}")


# --- 4. version and test.sh --------------------------------------------------
def version(src, feed, binary):
    top, _ = make_vars(open(os.path.join(feed, "keepalive-proxy", "Makefile")).read())
    cmake = re.search(r"project\(keepalive-proxy VERSION (\S+)", open(os.path.join(src, "CMakeLists.txt")).read())
    reported = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    check(cmake and top.get("PKG_VERSION") == cmake.group(1),
          "PKG_VERSION is the project's version",
          f"PKG_VERSION {top.get('PKG_VERSION')}, CMakeLists.txt {cmake and cmake.group(1)}")
    check(reported == f"keepalive-proxy {top.get('PKG_VERSION')}",
          "keepalive-proxy --version prints PKG_VERSION", f"it printed {reported!r}")
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(binary), os.path.join(tmp, "keepalive-proxy"))
        socks = [socket.socket() for _ in range(2)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        port, stats = (s.getsockname()[1] for s in socks)
        for s in socks:
            s.close()
        env = dict(os.environ, PATH=tmp + ":" + os.environ["PATH"], KP_TEST_PORT=str(port),
                   KP_TEST_STATS_PORT=str(stats))
        test_sh = os.path.join(feed, "keepalive-proxy", "test.sh")
        variant = "keepalive-proxy-openssl" if "TLS: none" not in \
            subprocess.run([binary, "--version"], capture_output=True, text=True).stdout \
            else "keepalive-proxy"
        good = subprocess.run(["sh", test_sh, variant, top.get("PKG_VERSION", "")],
                              env=env, cwd=tmp, capture_output=True, text=True, timeout=60)
        check(good.returncode == 0, f"test.sh {variant} passes with the built binary",
              good.stdout + good.stderr)
        bad = subprocess.run(["sh", test_sh, variant, "0.0.0-not-this"],
                             env=env, cwd=tmp, capture_output=True, text=True, timeout=60)
        check(bad.returncode != 0, "test.sh fails for a version the binary does not report")


# --- 5. run bits --------------------------------------------------------------
def run_bits(src):
    for root, _, files in os.walk(os.path.join(src, "contrib")):
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                if fh.read(2) != b"#!":
                    continue
            check(bool(os.stat(path).st_mode & stat.S_IXUSR),
                  f"{os.path.relpath(path, src)} can be run")


# --- 6. USE_SOURCE_DIR, and the licences --------------------------------------
# include/package.mk, for a build from a checkout (USE_SOURCE_DIR=DIR):
#   Build/Prepare/Default: rm -rf $(PKG_BUILD_DIR);
#     ln -snf $(USE_SOURCE_DIR) $(PKG_BUILD_DIR); touch $(PKG_BUILD_DIR)/.source_dir
#   PKG_BUILD_DIR ?= $(BUILD_DIR)/$(if $(BUILD_VARIANT),$(PKG_NAME)-$(BUILD_VARIANT)/)$(PKG_NAME)$(if $(PKG_VERSION),-$(PKG_VERSION))
# and include/cmake.mk:
#   CMAKE_BINARY_DIR = $(PKG_BUILD_DIR)$(if $(CMAKE_BINARY_SUBDIR),/$(CMAKE_BINARY_SUBDIR))
#   CMAKE_SOURCE_DIR = $(PKG_BUILD_DIR)$(if $(CMAKE_SOURCE_SUBDIR),/$(CMAKE_SOURCE_SUBDIR))
#   Build/Configure/Default: mkdir -p $(CMAKE_BINARY_DIR); (cd $(CMAKE_BINARY_DIR);
#     cmake ... $(CMAKE_OPTIONS) $(CMAKE_SOURCE_DIR))
# These rules are written below as small stand-ins for rules.mk, package.mk
# and cmake.mk (the Makefile's own text is what GNU make reads), the
# package's Build/Prepare and cmake.mk's configure are run for real, and
# the checkout, a copy of this one, must come out as it went in.
STUB_RULES = """\
BUILD_DIR := $(TOPDIR)/build_dir
DL_DIR := $(TOPDIR)/dl
INCLUDE_DIR := $(TOPDIR)/include
TAR := tar
"""
STUB_PACKAGE = """\
PKG_BUILD_DIR ?= $(BUILD_DIR)/$(if $(BUILD_VARIANT),$(PKG_NAME)-$(BUILD_VARIANT)/)$(PKG_NAME)$(if $(PKG_VERSION),-$(PKG_VERSION))
PKG_INSTALL_DIR ?= $(PKG_BUILD_DIR)/ipkg-install
ifdef USE_SOURCE_DIR
define Build/Prepare/Default
	rm -rf $(PKG_BUILD_DIR)
	mkdir -p $(dir $(PKG_BUILD_DIR))
	ln -snf $(USE_SOURCE_DIR) $(PKG_BUILD_DIR)
	touch $(PKG_BUILD_DIR)/.source_dir
endef
endif
Download =
BuildPackage =
"""
STUB_CMAKE = """\
CMAKE_BINARY_DIR = $(PKG_BUILD_DIR)$(if $(CMAKE_BINARY_SUBDIR),/$(CMAKE_BINARY_SUBDIR))
CMAKE_SOURCE_DIR = $(PKG_BUILD_DIR)$(if $(CMAKE_SOURCE_SUBDIR),/$(CMAKE_SOURCE_SUBDIR))
define Build/Configure/Default
	mkdir -p $(CMAKE_BINARY_DIR)
	cd $(CMAKE_BINARY_DIR) && cmake --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release $(CMAKE_OPTIONS) $(CMAKE_SOURCE_DIR)
endef
"""
DRIVER = """\
include $(PACKAGE_MAKEFILE)
.PHONY: prepare configure vars
prepare:
	$(Build/Prepare)
configure:
	$(Build/Configure/Default)
vars:
	@echo PKG_LICENSE=$(PKG_LICENSE)
	@echo PKG_LICENSE_FILES=$(PKG_LICENSE_FILES)
	@echo PKG_BUILD_DIR=$(PKG_BUILD_DIR)
"""


def files_under(top):
    found = set()
    for root, dirs, names in os.walk(top):
        found.update(os.path.relpath(os.path.join(root, n), top) for n in names + dirs)
    return found


def source_dir_build(src, feed):
    import shutil
    makefile = os.path.join(feed, "keepalive-proxy", "Makefile")
    top, _ = make_vars(open(makefile).read())
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("rules.mk", STUB_RULES), ("include/package.mk", STUB_PACKAGE),
                           ("include/cmake.mk", STUB_CMAKE), ("driver.mk", DRIVER)):
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        # The checkout: this one's sources, without its build trees.
        checkout = os.path.join(tmp, "checkout")
        shutil.copytree(src, checkout, symlinks=True,
                        ignore=lambda d, names: [n for n in names if n.startswith(("build", ".git", "Testing"))
                                                 or (d == src and n == "keepalive-proxy")])
        # llhttp's release as upstream lays it out: LICENSE, src/*.c, include/.
        release = os.path.join(tmp, "release", "llhttp-release")
        os.makedirs(os.path.join(release, "src"))
        os.makedirs(os.path.join(release, "include"))
        have_llhttp = os.path.isfile("/usr/share/llhttp/llhttp.c") and \
            os.path.isfile("/usr/share/include/llhttp/llhttp.h")
        if have_llhttp:
            for c in os.listdir("/usr/share/llhttp"):
                if c.endswith(".c"):
                    shutil.copy(os.path.join("/usr/share/llhttp", c), os.path.join(release, "src"))
            shutil.copy("/usr/share/include/llhttp/llhttp.h", os.path.join(release, "include"))
        open(os.path.join(release, "LICENSE"), "w").write("MIT\n")
        os.makedirs(os.path.join(tmp, "dl"))
        subprocess.run(["tar", "-czf", os.path.join(tmp, "dl", f"llhttp-release-v{top.get('LLHTTP_VERSION')}.tar.gz"),
                        "-C", os.path.dirname(release), "llhttp-release"], check=True)
        before = files_under(checkout)
        make = ["make", "-s", "-C", os.path.dirname(makefile), "-f", os.path.join(tmp, "driver.mk"),
                "TOPDIR=" + tmp, "PACKAGE_MAKEFILE=" + makefile, "USE_SOURCE_DIR=" + checkout,
                "BUILD_VARIANT=nossl"]
        prep = subprocess.run(make + ["prepare"], capture_output=True, text=True)
        conf = None
        if prep.returncode == 0 and have_llhttp and shutil.which("cmake"):
            conf = subprocess.run(make + ["configure"], capture_output=True, text=True, timeout=120)
        new = sorted(files_under(checkout) - before)
        check(prep.returncode == 0, "USE_SOURCE_DIR: the package's Build/Prepare runs",
              prep.stdout + prep.stderr)
        check(conf is None or conf.returncode == 0,
              "USE_SOURCE_DIR: cmake.mk's configure runs on the prepared tree",
              "" if conf is None else (conf.stdout + conf.stderr)[-3000:])
        check(not new, "USE_SOURCE_DIR: prepare%s write nothing into the checkout"
              % (" and configure" if conf is not None else ""),
              "new in the checkout: " + ", ".join(new[:20]))
        # The licences, read as the package states them, of what it unpacks.
        out = subprocess.run(make + ["vars"], capture_output=True, text=True).stdout
        vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        licences = vals.get("PKG_LICENSE", "").split()
        files = vals.get("PKG_LICENSE_FILES", "").split()
        check(licences == ["ISC", "MIT"], "PKG_LICENSE is ISC (keepalive-proxy) and MIT (llhttp, built in)",
              f"PKG_LICENSE={vals.get('PKG_LICENSE')}")
        # Relative to PKG_BUILD_DIR: the tarball's own LICENSE, and llhttp's
        # where Build/Prepare unpacked it.
        build = vals.get("PKG_BUILD_DIR", "")
        check("LICENSE" in files and "llhttp/LICENSE" in files
              and os.path.isfile(os.path.join(build, "llhttp/LICENSE"))
              and os.path.isfile(os.path.join(src, "LICENSE")),
              "PKG_LICENSE_FILES names LICENSE and llhttp/LICENSE, which Build/Prepare unpacked",
              f"PKG_LICENSE_FILES={vals.get('PKG_LICENSE_FILES')}; in {build}: "
              f"{sorted(os.listdir(build)) if os.path.isdir(build) else 'nothing'}")


def main():
    src, binary = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    feed = os.path.join(src, "contrib", "openwrt")
    scan_mk(feed)
    dependencies(feed)
    kconfig(feed)
    kept(feed)
    version(src, feed, binary)
    run_bits(src)
    source_dir_build(src, feed)
    if failed:
        print(f"{len(failed)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
