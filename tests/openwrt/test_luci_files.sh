#!/bin/sh
# The LuCI app's files agree with each other and with what exists: its JSON
# parses; the menu's view is a file under htdocs; the rpcd plugin is named
# as LuCI names them, luci.<app>, after its ubus object, and is written
# with jshn; the ACL grants the methods the plugin lists (run for real, on
# jshn-stand-in.sh, see luci-plugin.sh), those that change nothing as reads
# only, and the UCI config the package installs; the view calls only what
# the ACL grants, and its settings are options the init script reads; its
# translation template holds every string of the view and menu, as LuCI's
# i18n-scan.pl writes one; the Makefile depends on packages the feed
# defines.
#
# Usage: test_luci_files.sh
# Exits 77 (skipped) without python3.

set -eu

here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null 2>&1; then
	echo "skipped: this test needs python3"
	exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sh "$here/luci-plugin.sh" "$work"

python3 - "$here/../../contrib/openwrt" "$work" "$here" <<'EOF'
import difflib, glob, json, os, re, shutil, subprocess, sys

feed, offrouter, here = sys.argv[1], sys.argv[2], sys.argv[3]
app = os.path.join(feed, "luci-app-keepalive-proxy")
root = os.path.join(app, "root")
views = os.path.join(app, "htdocs/luci-static/resources/view")
init = open(os.path.join(feed, "keepalive-proxy/files/keepalive-proxy.init")).read()
# UCI configs the feed installs, by name: /etc/config/NAME
configs = {"keepalive-proxy": os.path.join(feed, "keepalive-proxy/files/keepalive-proxy.config")}
# Objects rpcd itself has, with the methods the app may use of them: none.
rpcd_builtin = {}
failed = 0


def check(name, ok, why=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else "\n  " + why))
    failed += not ok


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as e:
        check("%s is JSON" % os.path.relpath(path, app), False, str(e))
        return {}


menus = glob.glob(os.path.join(root, "usr/share/luci/menu.d/*.json"))
acls = glob.glob(os.path.join(root, "usr/share/rpcd/acl.d/*.json"))
check("a menu file and an ACL file", len(menus) == 1 and len(acls) == 1, "%s %s" % (menus, acls))
acl = {}
for path in acls:
    acl.update(load(path))
for path in menus:
    for entry, m in load(path).items():
        action = m.get("action", {})
        if action.get("type") == "view":
            js = os.path.join(views, action["path"] + ".js")
            check("menu %s: view %s.js exists" % (entry, action["path"]), os.path.isfile(js), js)
        for name in m.get("depends", {}).get("acl", []):
            check("menu %s: ACL %s is granted by a file" % (entry, name), name in acl)
        for name in m.get("depends", {}).get("uci", {}):
            check("menu %s: UCI config %s is installed" % (entry, name), name in configs)

# What the ACLs grant: ubus object -> methods, and UCI configs.
granted, uci = {}, set()
for name, a in acl.items():
    for mode in ("read", "write"):
        for obj, methods in a.get(mode, {}).get("ubus", {}).items():
            granted.setdefault(obj, set()).update(methods)
        uci.update(a.get(mode, {}).get("uci", []))
for name in uci:
    check("ACL: UCI config %s is installed" % name, name in configs)


def ubus(mode):
    return {m for a in acl.values() for m in a.get(mode, {}).get("ubus", {}).get("luci.keepalive-proxy", [])}


# A page open with read access only must not make a CA or restart the
# daemon, and may check the host.
check("ACL: the methods that change nothing are granted for reading",
      ubus("read") == {"status", "ca_certificate", "check_host"}
      and ubus("write") == {"make_ca", "restart"},
      "read %s, write %s" % (sorted(ubus("read")), sorted(ubus("write"))))
# rpcd's "rc init" runs /etc/init.d/NAME ACTION for any NAME (rpcd rc.c);
# an ACL names methods, never their arguments, so granting it would let
# the holder stop or disable the firewall. The plugin's restart is for this
# service alone.
check("ACL: no rpcd rc object (rc init would reach every service)",
      all("rc" not in a.get(mode, {}).get("ubus", {}) for a in acl.values() for mode in ("read", "write")),
      json.dumps(acl))

# Each granted object is an rpcd plugin here whose list matches, or rpcd's own.
plugins = os.path.join(root, "usr/libexec/rpcd")
listed = {}
for obj, methods in granted.items():
    path = os.path.join(plugins, obj)
    if obj in rpcd_builtin:
        check("ACL: %s.%s is rpcd's own" % (obj, ",".join(sorted(methods))),
              methods <= rpcd_builtin[obj])
        continue
    if not os.access(path, os.X_OK):
        check("ACL: object %s is an executable rpcd plugin" % obj, False, path)
        continue
    # Run as rpcd runs it, with jshn-stand-in.sh for libubox's jshn.sh.
    out = subprocess.run([os.path.join(offrouter, obj), "list"], capture_output=True,
                         text=True).stdout
    try:
        listed[obj] = set(json.loads(out))
    except ValueError as e:
        check("plugin %s: list prints JSON" % obj, False, "%s: %r" % (e, out))
        continue
    check("ACL: %s grants the methods its plugin lists" % obj, listed[obj] == methods,
          "listed %s, granted %s" % (sorted(listed[obj]), sorted(methods)))
check("every rpcd plugin is granted in the ACL",
      set(os.listdir(plugins)) <= set(granted), str(os.listdir(plugins)))
# LuCI's own plugins are luci.<name> (luci, luci.rpc-style objects); the
# object is the file's name, so the file is named so.
for name in os.listdir(plugins):
    check("rpcd plugin %s is named luci.<app>" % name, name.startswith("luci."))
    src = open(os.path.join(plugins, name)).read()
    check("rpcd plugin %s is written with jshn" % name,
          re.search(r"^\. /usr/share/libubox/jshn\.sh$", src, re.M) is not None
          and all(f in src for f in ("json_init", "json_add_", "json_dump", "json_load")))

# The view: what it calls, and the options it edits.
for js in glob.glob(os.path.join(views, "*.js")):
    src = open(js).read()
    name = os.path.basename(js)
    calls = re.findall(r"rpc\.declare\(\{\s*object:\s*'([^']+)',\s*method:\s*'([^']+)'", src)
    check("%s declares its rpc calls" % name, len(calls) >= 4, str(calls))
    for obj, method in calls:
        check("%s calls %s.%s, which the ACL grants" % (name, obj, method),
              method in granted.get(obj, ()))
    maps = re.findall(r"new form\.Map\('([^']+)'", src)
    check("%s edits installed UCI configs the ACL grants" % name,
          maps and all(m in configs and m in uci for m in maps), str(maps))
    options = re.findall(r"form\.(?:Value|Flag|DynamicList|ListValue), '([a-z_]+)'", src)
    check("%s has settings" % name, len(options) >= 8, str(options))
    for option in options:
        # The init script's validate_section types every option it reads.
        read = re.search(r"['\"]%s:[a-z$]" % option, init)
        check("%s: the init script reads option %s" % (name, option), bool(read))
        check("%s: option %s is in the shipped config" % (name, option),
              re.search(r"^\s*#?(option|list) %s " % option,
                        open(configs["keepalive-proxy"]).read(), re.M) is not None)

# The translation template, where luci.mk looks (po/templates/, named after
# the app without "luci-app-"): every string the view and menu hand to _()
# or N_() is a msgid, and the file is what LuCI's i18n-scan.pl makes of
# them (luci-pot.py follows it; with xgettext and msguniq, from gettext).
pot_path = os.path.join(app, "po/templates/keepalive-proxy.pot")
pot = open(pot_path).read() if os.path.isfile(pot_path) else ""
check("po/templates/keepalive-proxy.pot exists", bool(pot), pot_path)
msgids = set()
for m in re.finditer(r'^(msgid|msgid_plural) ((?:"(?:[^"\\]|\\.)*"\n?)+)', pot, re.M):
    msgids.add("".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))).replace('\\"', '"'))
quoted = r"'((?:[^'\\]|\\.)*)'"
wanted = set()
for js in glob.glob(os.path.join(views, "*.js")):
    src = open(js).read()
    wanted.update(re.findall(r"\b_\(\s*" + quoted, src))
    for single, plural in re.findall(r"\bN_\([^,]+,\s*" + quoted + r",\s*" + quoted, src):
        wanted.update((single, plural))
for path in menus:
    wanted.update(m.get("title", "") for m in load(path).values())
# As written: i18n-scan.pl trims and collapses spaces in a msgid, so a
# string with spaces at its ends would never be found translated.
wanted = {w.replace("\\'", "'") for w in wanted if w}
check("the template has every string of the view and the menu (%d)" % len(wanted),
      wanted and wanted <= msgids, str(sorted(wanted - msgids)[:10]))
if shutil.which("xgettext") and shutil.which("msguniq"):
    made = subprocess.run([sys.executable, os.path.join(here, "luci-pot.py"), app],
                          capture_output=True, text=True)
    check("the template is what i18n-scan.pl makes of the app (luci-pot.py)",
          made.returncode == 0 and made.stdout == pot,
          made.stderr or "".join(difflib.unified_diff(pot.splitlines(True), made.stdout.splitlines(True),
                                                     "committed", "made", n=1))[:2000]
          + "\n  to make it anew: python3 tests/openwrt/luci-pot.py "
          "contrib/openwrt/luci-app-keepalive-proxy > " + os.path.relpath(pot_path, os.path.dirname(feed)))
else:
    print("ok   the template is what i18n-scan.pl makes of it (not checked: no xgettext and msguniq)")

# The Makefile's dependencies on the daemon name packages the feed defines.
make = open(os.path.join(app, "Makefile")).read()
daemon = open(os.path.join(feed, "keepalive-proxy/Makefile")).read()
deps = re.search(r"^LUCI_DEPENDS:=(.*)$", make, re.M).group(1)
for pkg in re.findall(r"(keepalive-proxy[\w-]*)", deps):
    check("Makefile: %s is a package of the feed" % pkg,
          re.search(r"^define Package/%s$" % re.escape(pkg), daemon, re.M) is not None)

if failed:
    sys.exit("%d case(s) failed" % failed)
print("all cases passed")
EOF
