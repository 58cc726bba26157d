#!/usr/bin/env python3
"""A router's web side for LuCI's own JavaScript, NOT OpenWrt's code: it
answers as uhttpd (with its ubus plugin), rpcd and the luci dispatcher do,
for what the keepalive-proxy page and LuCI's modules ask, modelled on their
sources (uhttpd ubus.c; rpcd session.c, uci.c, plugin.c; luci-base's
ucode header.ut, view.ut, controller/admin/uci.uc). Python's standard
library only.

  luci-rpcd.py LUCI-SOURCE APP-DIR WORK-DIR

LUCI-SOURCE is a checkout of openwrt/luci; APP-DIR the LuCI app
(contrib/openwrt/luci-app-keepalive-proxy); WORK-DIR holds etc/config/ (the
UCI files, written on Save & Apply), rpcd/ (the plugins to run) and
path (the PATH the plugins run with). It listens on 127.0.0.1, a free
port, and prints "listening on PORT" once it does.

  GET  /cgi-bin/luci/admin/services/keepalive-proxy  the page: LuCI's header
       template, as luci-theme-bootstrap's header.ut, then view.ut's loader
  GET  /cgi-bin/luci/admin/menu, .../admin/translations/en
  GET  /luci-static/...        luci-base's and the theme's htdocs, the app's
  POST /ubus/                  JSON-RPC as uhttpd-mod-ubus: "list", "call"
       with [session, object, method, args], one or a batch. A call is
       refused with -32002 "Access denied" unless the session's ACL grants
       it (session.access, as uh_ubus_allowed asks rpcd).
  POST /cgi-bin/luci/admin/uci/{apply_rollback,apply_unchecked,confirm,revert}

ubus objects: session (access, as rpcd's session.c, with the ACLs rpcd
gives root from luci-base's acl.d file and the app's); uci (get, set, add,
delete, changes, apply, confirm, rollback, revert: staged changes are the
session's until applied, then written as a UCI file); the app's rpcd
plugins, run as rpcd's plugin.c runs them ("list", then "call METHOD" with
the arguments and ubus_rpc_session as JSON on standard input; an answer
that is no JSON object is ubus status 2, an empty one 5).
Stand-ins, for what has no part here: "rc init" is recorded and answered,
not run (no procd, no init scripts); "luci getFeatures" answers {}; "file
list" finds nothing (no preload classes).

For the test: POST /test/fail?object=O&method=M&count=N&code=C makes the
next N calls of O.M end with ubus status C; POST /test/expire ends the
session, as rpcd does after its timeout; GET /test/log gives every call.
"""
import fnmatch
import glob
import http.server
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.parse

luci_src, app_dir, work = sys.argv[1:4]
config_dir = os.path.join(work, "etc/config")
plugin_dir = os.path.join(work, "rpcd")
plugin_path = open(os.path.join(work, "path")).read().strip()
acl_files = [os.path.join(luci_src, "modules/luci-base/root/usr/share/rpcd/acl.d/luci-base.json")] + \
    sorted(glob.glob(os.path.join(app_dir, "root/usr/share/rpcd/acl.d/*.json")))
menu_files = sorted(glob.glob(os.path.join(app_dir, "root/usr/share/luci/menu.d/*.json")))

NULL_SID = "0" * 32
lock = threading.Lock()
log = []            # every call: [object, method, args, status]
failing = {}        # "object.method" -> [count, code]
apply_state = {"sid": None, "snapshot": None}

# ubus status codes (libubus.h)
OK, INVALID_COMMAND, INVALID_ARGUMENT, METHOD_NOT_FOUND, NOT_FOUND, NO_DATA, \
    PERMISSION_DENIED, TIMEOUT = range(8)


# ---- sessions and ACLs, as rpcd's session.c ----------------------------------

# rpcd's own acl.d file, unauthenticated.json, as its package installs it:
# what lets any session ask session.access (and log in).
RPCD_ACL = {"unauthenticated": {"description": "Access controls for unauthenticated requests",
                                "read": {"ubus": {"session": ["access", "login"]}}}}


def acls_for(login_read, login_write):
    """(scope, object, function) patterns, as rpc_login_setup_acls grants them
    for a login whose read and write lists are given (None: the default
    session, which gets the group "unauthenticated" only)."""
    grants = set()

    def permitted(perm, group):
        if login_read is None:
            return group == "unauthenticated"
        lists = {"read": login_read, "write": login_write}
        if any(fnmatch.fnmatchcase(group, p[1:].strip()) for p in lists[perm] if p.startswith("!")):
            return False
        if any(fnmatch.fnmatchcase(group, p) for p in lists[perm] if p and not p.startswith("!")):
            return True
        return perm == "read" and permitted("write", group)

    for acl in [RPCD_ACL] + [json.load(open(path)) for path in acl_files]:
        for group, spec in acl.items():
            for perm in ("read", "write"):
                if not isinstance(spec.get(perm), dict) or not permitted(perm, group):
                    continue
                for scope, objs in spec[perm].items():
                    if isinstance(objs, dict):
                        for obj, funcs in objs.items():
                            for f in funcs if isinstance(funcs, list) else []:
                                grants.add((scope, obj, f))
                    elif isinstance(objs, list):
                        for obj in objs:
                            grants.add((scope, obj, perm))
                    grants.add(("access-group", group, perm))
    return grants


def allowed(sid, scope, obj, func):
    ses = sessions.get(sid)
    return ses is not None and any(
        s == scope and fnmatch.fnmatchcase(obj, o) and fnmatch.fnmatchcase(func, f)
        for s, o, f in ses["acls"])


# root's login in rpcd's config: read and write "*"
SID = secrets.token_hex(16)
sessions = {
    NULL_SID: {"acls": acls_for(None, None), "delta": {}},
    SID: {"acls": acls_for(["*"], ["*"]), "delta": {}},
}


# ---- UCI files ------------------------------------------------------------------

def uci_words(line):
    out, word, quote, i, have = [], "", None, 0, False
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(line):
                i += 1
                word += line[i]
            else:
                word += c
        elif c in "'\"":
            quote, have = c, True
        elif c == "#":
            break
        elif c.isspace():
            if have:
                out.append(word)
            word, have = "", False
        elif c == "\\" and i + 1 < len(line):
            i += 1
            word, have = word + line[i], True
        else:
            word, have = word + c, True
        i += 1
    if have:
        out.append(word)
    return out


def uci_read(config):
    """[ { ".name", ".type", ".anonymous", option: str or [str] } ] in order."""
    sections = []
    path = os.path.join(config_dir, config)
    if not os.path.exists(path):
        return None
    for line in open(path):
        w = uci_words(line)
        if not w:
            continue
        if w[0] == "config":
            name = w[2] if len(w) > 2 else "cfg%02x%04x" % (len(sections), 0)
            sections.append({".type": w[1], ".name": name, ".anonymous": len(w) < 3})
        elif w[0] == "option" and sections and len(w) > 2:
            sections[-1][w[1]] = w[2]
        elif w[0] == "list" and sections and len(w) > 2:
            cur = sections[-1].get(w[1])
            sections[-1][w[1]] = (cur if isinstance(cur, list) else []) + [w[2]]
    return sections


def uci_quote(v):
    return "'" + v.replace("'", "'\\''") + "'"


def uci_write(config, sections):
    """As libuci's uci_export writes a package on commit."""
    out = ""
    for s in sections:
        out += "\nconfig %s" % s[".type"]
        if not s[".anonymous"]:
            out += " " + uci_quote(s[".name"])
        out += "\n"
        for k, v in s.items():
            if k.startswith("."):
                continue
            if isinstance(v, list):
                out += "".join("\tlist %s %s\n" % (k, uci_quote(i)) for i in v)
            else:
                out += "\toption %s %s\n" % (k, uci_quote(v))
    out += "\n"
    with open(os.path.join(config_dir, config), "w") as f:
        f.write(out)


def uci_apply_delta(sections, delta):
    for change in delta:
        cmd, sec = change[0], change[1]
        s = next((x for x in sections if x[".name"] == sec), None)
        if cmd == "add":
            sections.append({".type": change[2], ".name": sec, ".anonymous": True})
        elif cmd == "remove" and s is not None:
            if len(change) == 2:
                sections.remove(s)
            else:
                s.pop(change[2], None)
        elif cmd == "set" and s is not None:
            s[change[2]] = change[3]
        elif cmd == "list-add" and s is not None:
            cur = s.get(change[2])
            s[change[2]] = (cur if isinstance(cur, list) else []) + [change[3]]
    return sections


def uci_view(sid, config):
    sections = uci_read(config)
    if sections is None:
        return None
    return uci_apply_delta(sections, sessions[sid]["delta"].get(config, []))


def dump_section(s, index=None):
    d = {".anonymous": s[".anonymous"], ".type": s[".type"], ".name": s[".name"]}
    if index is not None:
        d[".index"] = index
    d.update({k: v for k, v in s.items() if not k.startswith(".")})
    return d


def uci_call(sid, method, args):
    config = args.get("config")
    ses = sessions[sid]
    if method in ("get", "state"):
        if config is None:
            return INVALID_ARGUMENT, None
        if not allowed(sid, "uci", config, "read"):
            return PERMISSION_DENIED, None
        sections = uci_view(sid, config)
        if sections is None:
            return NOT_FOUND, None
        if "section" in args:
            s = next((x for x in sections if x[".name"] == args["section"]), None)
            if s is None:
                return NOT_FOUND, None
            if "option" in args:
                if args["option"] not in s:
                    return NOT_FOUND, None
                return OK, {"value": s[args["option"]]}
            return OK, {"values": dump_section(s)}
        return OK, {"values": {s[".name"]: dump_section(s, i) for i, s in enumerate(sections)
                               if args.get("type") in (None, s[".type"])}}
    if method in ("set", "add", "delete"):
        if config is None:
            return INVALID_ARGUMENT, None
        if not allowed(sid, "uci", config, "write"):
            return PERMISSION_DENIED, None
        sections = uci_view(sid, config)
        if sections is None:
            return NOT_FOUND, None
        delta = ses["delta"].setdefault(config, [])
        if method == "add":
            name = args.get("name") or "cfg%06x" % secrets.randbits(24)
            delta.append(["add", name, args.get("type")])
            for k, v in (args.get("values") or {}).items():
                delta.extend(set_changes(name, k, v))
            return OK, {"section": name}
        s = next((x for x in sections if x[".name"] == args.get("section")), None)
        if s is None:
            return NOT_FOUND, None
        if method == "set":
            for k, v in (args.get("values") or {}).items():
                if isinstance(v, list) and k in s:
                    delta.append(["remove", s[".name"], k])
                if isinstance(v, list):
                    delta.extend(["list-add", s[".name"], k, str(i)] for i in v)
                elif s.get(k) != str(v):
                    delta.append(["set", s[".name"], k, str(v)])
            return OK, None
        opts = args.get("options") or ([args["option"]] if "option" in args else None)
        if opts is None:
            delta.append(["remove", s[".name"]])
        else:
            delta.extend(["remove", s[".name"], o] for o in opts if o in s)
        return OK, None
    if method == "changes":
        if config is not None:
            if not allowed(sid, "uci", config, "read"):
                return PERMISSION_DENIED, None
            return OK, {"changes": ses["delta"].get(config, [])}
        return OK, {"changes": {c: d for c, d in ses["delta"].items()
                                if d and allowed(sid, "uci", c, "read")}}
    if method == "revert":
        if not allowed(sid, "uci", config or "", "write"):
            return PERMISSION_DENIED, None
        ses["delta"].pop(config, None)
        return OK, None
    if method == "apply":
        rollback = bool(args.get("rollback"))
        if apply_state["sid"] and rollback:
            return PERMISSION_DENIED, None
        changed = [c for c, d in ses["delta"].items() if d]
        if not changed:
            return NO_DATA, None
        if not all(allowed(sid, "uci", c, "write") for c in changed):
            return PERMISSION_DENIED, None
        snapshot = {}
        for c in changed:
            snapshot[c] = open(os.path.join(config_dir, c)).read()
            uci_write(c, uci_view(sid, c))
            ses["delta"][c] = []
        if rollback:
            apply_state.update(sid=sid, snapshot=snapshot)
        return OK, None
    if method == "confirm":
        if not apply_state["sid"]:
            return NO_DATA, None
        if apply_state["sid"] != sid:
            return PERMISSION_DENIED, None
        apply_state.update(sid=None, snapshot=None)
        return OK, None
    if method == "rollback":
        if not apply_state["sid"]:
            return NO_DATA, None
        if apply_state["sid"] != sid:
            return PERMISSION_DENIED, None
        for c, text in apply_state["snapshot"].items():
            with open(os.path.join(config_dir, c), "w") as f:
                f.write(text)
        apply_state.update(sid=None, snapshot=None)
        return OK, None
    return METHOD_NOT_FOUND, None


def set_changes(section, k, v):
    if isinstance(v, list):
        return [["list-add", section, k, str(i)] for i in v]
    return [["set", section, k, str(v)]]


# ---- rpcd plugins, as plugin.c runs them ------------------------------------------

def plugins():
    objs = {}
    for path in sorted(glob.glob(os.path.join(plugin_dir, "*"))):
        out = subprocess.run([path, "list"], capture_output=True, text=True,
                             env={"PATH": plugin_path}).stdout
        try:
            objs[os.path.basename(path)] = json.loads(out)
        except ValueError:
            pass
    return objs


def plugin_call(obj, method, args, sid):
    if method not in objects[obj]:
        return METHOD_NOT_FOUND, None
    msg = dict(args, ubus_rpc_session=sid)
    try:
        out = subprocess.run([os.path.join(plugin_dir, obj), "call", method],
                             input=json.dumps(msg, separators=(",", ":")), capture_output=True,
                             text=True, timeout=30, env={"PATH": plugin_path, **plugin_env}).stdout
    except subprocess.TimeoutExpired:
        return TIMEOUT, None
    if not out.strip():
        return NO_DATA, None
    try:
        answer = json.loads(out)
    except ValueError:
        return INVALID_ARGUMENT, None
    return (OK, answer) if isinstance(answer, dict) else (INVALID_ARGUMENT, None)


plugin_env = {k: v for k, v in os.environ.items() if k.startswith("KP_") or k == "IPKG_INSTROOT"}
objects = {"session": {"access": {}}, "uci": {}, "luci": {"getFeatures": {}},
           "file": {"list": {}}, "rc": {"init": {}, "list": {}}}
objects.update(plugins())


def ubus_call(sid, obj, method, args):
    """The ubus status and data of a call that passed uhttpd's checks."""
    key = obj + "." + method
    with lock:
        if key in failing and failing[key][0] > 0:
            failing[key][0] -= 1
            return failing[key][1], None
    if obj == "session" and method == "access":
        ses = args.get("ubus_rpc_session")
        if ses not in sessions:
            return NOT_FOUND, None
        if "object" in args and "function" in args:
            return OK, {"access": allowed(ses, args.get("scope", "ubus"), args["object"], args["function"])}
        return OK, {}
    if obj == "uci":
        with lock:
            return uci_call(sid, method, args)
    if obj == "luci" and method == "getFeatures":
        return OK, {}
    if obj == "file" and method == "list":
        return NOT_FOUND, None
    if obj == "rc" and method == "init":
        return OK, None
    if obj in plugins_found:
        return plugin_call(obj, method, args, sid)
    return METHOD_NOT_FOUND, None


plugins_found = set(objects) - {"session", "uci", "luci", "file", "rc"}


def jsonrpc(req):
    """One JSON-RPC request as uhttpd's ubus plugin answers it (legacy /ubus)."""
    rid = req.get("id") if isinstance(req, dict) else None
    reply = {"jsonrpc": "2.0", "id": rid}

    def error(code, message):
        reply["error"] = {"code": code, "message": message}
        return reply

    if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or "method" not in req:
        return error(-32700, "Parse error")
    if req["method"] == "list":
        reply["result"] = sorted(objects)
        return reply
    if req["method"] != "call":
        return error(-32601, "Method not found")
    p = req.get("params")
    if not isinstance(p, list) or len(p) < 4 or not isinstance(p[3], dict):
        return error(-32700, "Parse error")
    sid, obj, method, args = p[:4]
    if obj not in objects:
        return error(-32000, "Object not found")
    if not allowed(sid, "ubus", obj, method):
        with lock:
            log.append([obj, method, args, "-32002"])
        return error(-32002, "Access denied")
    if "ubus_rpc_session" in args:
        return error(-32602, "Invalid parameters")
    status, data = ubus_call(sid, obj, method, dict(args, ubus_rpc_session=sid))
    with lock:
        log.append([obj, method, args, status])
    reply["result"] = [status] + ([data] if data else [])
    return reply


# ---- the page, as luci's dispatcher renders a view -----------------------------------

def env():
    return {
        "media": "/luci-static/bootstrap", "resource": "/luci-static/resources",
        "scriptname": "/cgi-bin/luci", "pathinfo": "/admin/services/keepalive-proxy",
        "documentroot": "/www", "requestpath": ["admin", "services", "keepalive-proxy"],
        "dispatchpath": ["admin", "services", "keepalive-proxy"], "pollinterval": 5,
        "ubuspath": "/ubus/", "sessionid": SID, "token": TOKEN,
        "nodespec": menu_node(), "apply_rollback": 90, "apply_holdoff": 1,
        "apply_timeout": 5, "apply_display": 1, "rollback_token": None,
    }


TOKEN = secrets.token_hex(16)

# header.ut of luci-base, with luci-theme-bootstrap's header.ut and
# footer.ut around view.ut; what these print for a router is given here:
# hostname "OpenWrt", language "en", no warnings (a root password is set).
PAGE = """<!DOCTYPE html>
<html lang="en">
	<head>
		<meta charset="utf-8">
		<title>OpenWrt - Keepalive Proxy - LuCI</title>
		<script>
			var mediaQuery = window.matchMedia('(prefers-color-scheme: dark)'),
			    rootElement = document.querySelector(':root'),
			    setDarkMode = function(match) { rootElement.setAttribute('data-darkmode', match.matches) };

			mediaQuery.addEventListener('change', setDarkMode);
			setDarkMode(mediaQuery);
		</script>
		<meta name="viewport" content="initial-scale=1.0">
		<link rel="stylesheet" href="/luci-static/bootstrap/cascade.css">
		<link rel="stylesheet" media="only screen and (max-device-width: 854px)" href="/luci-static/bootstrap/mobile.css" />
		<script src="/cgi-bin/luci/admin/translations/en"></script>
		<script src="/luci-static/resources/cbi.js"></script>
	</head>

	<body class="lang_en Keepalive Proxy" data-page="admin-services-keepalive-proxy">
		<header>
			<a class="brand" href="/">OpenWrt</a>
			<ul class="nav" id="topmenu" style="display:none"></ul>
			<div id="indicators" class="pull-right"></div>
		</header>

		<div id="maincontent" class="container">
			<div id="tabmenu" style="display:none"></div>

<script src="/luci-static/resources/luci.js?v=git-test"></script>
<script>
	L = new LuCI(%(env)s);
</script>

<div id="view">
	<div class="spinning">Loading view…</div>
	<script>
		L.require('ui').then(function(ui) {
			ui.instantiateView('keepalive-proxy');
		});
	</script>
</div>

		</div>
		<footer>
			<span>Powered by LuCI (git-test) / OpenWrt</span>
			<ul class="breadcrumb pull-right" id="modemenu" style="display:none"></ul>
		</footer>
		<script>L.require('menu-bootstrap')</script>
	</body>
</html>
"""


def menu_node():
    """The app's menu entry, "satisfied" as the dispatcher decides it: its
    ACL groups granted to the session, its UCI configs present."""
    entries = {}
    for path in menu_files:
        entries.update(json.load(open(path)))
    node = dict(entries["admin/services/keepalive-proxy"])
    dep = node.get("depends", {})
    node["satisfied"] = all(allowed(SID, "access-group", g, "read") for g in dep.get("acl", [])) \
        and all(os.path.exists(os.path.join(config_dir, c)) for c in dep.get("uci", {}))
    node["readonly"] = not all(allowed(SID, "access-group", g, "write") for g in dep.get("acl", []))
    return node


def menu_tree():
    page = menu_node()
    first = {"type": "firstchild"}
    return {"satisfied": True, "children": {"admin": {
        "title": "Administration", "satisfied": True, "action": first, "children": {
            "status": {"title": "Status", "order": 10, "satisfied": True, "action": first},
            "system": {"title": "System", "order": 20, "satisfied": True, "action": first},
            "services": {"title": "Services", "order": 40, "satisfied": True, "action": first,
                         "children": {"keepalive-proxy": page}},
            "network": {"title": "Network", "order": 50, "satisfied": True, "action": first},
            "logout": {"title": "Logout", "order": 999, "satisfied": True,
                       "action": {"type": "function"}}}}}}


STATIC = [
    ("/luci-static/resources/view/", os.path.join(app_dir, "htdocs/luci-static/resources/view/")),
    ("/luci-static/resources/menu-bootstrap.js",
     os.path.join(luci_src, "themes/luci-theme-bootstrap/htdocs/luci-static/resources/menu-bootstrap.js")),
    ("/luci-static/resources/", os.path.join(luci_src, "modules/luci-base/htdocs/luci-static/resources/")),
    ("/luci-static/bootstrap/", os.path.join(luci_src, "themes/luci-theme-bootstrap/htdocs/luci-static/bootstrap/")),
]
TYPES = {".js": "application/javascript", ".css": "text/css", ".svg": "image/svg+xml",
         ".png": "image/png", ".gif": "image/gif"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, code, body, ctype="application/json"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        if code != 204:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        if path == "/cgi-bin/luci/admin/services/keepalive-proxy":
            text = PAGE % {"env": json.dumps(env()).replace("/", "\\/")}
            return self.send(200, text, "text/html; charset=UTF-8")
        if path == "/cgi-bin/luci/admin/translations/en":
            return self.send(200, "window.TR={};", "application/javascript; charset=UTF-8")
        if path == "/cgi-bin/luci/admin/menu":
            return self.send(200, json.dumps(menu_tree()))
        if path == "/ubus/" or path == "/ubus":
            return self.send(404, "")
        if path == "/test/log":
            with lock:
                return self.send(200, json.dumps(log))
        for prefix, base in STATIC:
            if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
                file = base if not prefix.endswith("/") else os.path.join(base, path[len(prefix):])
                if ".." not in path and os.path.isfile(file):
                    ext = os.path.splitext(file)[1]
                    return self.send(200, open(file, "rb").read(), TYPES.get(ext, "text/plain"))
                break
        self.send(404, "not found", "text/plain")

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        form = dict(urllib.parse.parse_qsl(url.query))
        if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            form.update(urllib.parse.parse_qsl(body.decode()))
        if path in ("/ubus/", "/ubus"):
            try:
                req = json.loads(body)
            except ValueError:
                return self.send(200, json.dumps({"jsonrpc": "2.0", "id": None,
                                                  "error": {"code": -32700, "message": "Parse error"}}))
            answer = [jsonrpc(r) for r in req] if isinstance(req, list) else jsonrpc(req)
            return self.send(200, json.dumps(answer))
        if path.startswith("/cgi-bin/luci/admin/uci/"):
            return self.uci_controller(path.rsplit("/", 1)[1], form)
        if path == "/test/fail":
            with lock:
                failing[form["object"] + "." + form["method"]] = [int(form["count"]), int(form["code"])]
            return self.send(200, "{}")
        if path == "/test/expire":
            with lock:
                sessions.pop(SID, None)
            return self.send(200, "{}")
        self.send(404, "not found", "text/plain")

    # controller/admin/uci.uc: a ubus status as an HTTP status
    STATUS = {OK: (200, "OK"), INVALID_COMMAND: (400, "Invalid command"),
              INVALID_ARGUMENT: (400, "Invalid argument"), METHOD_NOT_FOUND: (404, "Method not found"),
              NOT_FOUND: (404, "Not found"), NO_DATA: (204, "No data"),
              PERMISSION_DENIED: (403, "Permission denied"), TIMEOUT: (504, "Timeout")}

    def uci_controller(self, action, form):
        # The dispatcher's "post" actions want the session's token.
        if action != "confirm" and (form.get("sid") != SID or form.get("token") != TOKEN):
            return self.send(403, "Forbidden", "text/plain")
        with lock:
            if action == "apply_rollback":
                status, _ = uci_call(SID, "apply", {"rollback": True, "timeout": 90})
                log.append(["admin/uci", action, {}, status])
                if status == OK:
                    apply_state["token"] = secrets.token_hex(16)
                    return self.send(200, json.dumps({"token": apply_state["token"]}),
                                     "application/json; charset=UTF-8")
            elif action == "apply_unchecked":
                status, _ = uci_call(SID, "apply", {"rollback": False})
            elif action == "confirm":
                if not apply_state["sid"]:
                    status = NO_DATA
                elif form.get("token") != apply_state.get("token"):
                    status = PERMISSION_DENIED
                else:
                    status, _ = uci_call(apply_state["sid"], "confirm", {})
            elif action == "revert":
                status = OK
                for c in list(sessions[SID]["delta"]):
                    status, _ = uci_call(SID, "revert", {"config": c})
            else:
                return self.send(404, "not found", "text/plain")
            if action != "apply_rollback":
                log.append(["admin/uci", action, {}, status])
        code, msg = self.STATUS.get(status, (500, "Unknown error"))
        self.send(code, "" if code == 204 else msg, "text/plain")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening on %d" % server.server_address[1], flush=True)
server.serve_forever()
