#!/usr/bin/env python3
"""Drives the keepalive-proxy page on LuCI's own JavaScript in headless
Chromium over the DevTools protocol (a small websocket client, Python's
standard library only) and checks what a router owner would see and what
the router would be left with. Run by test_luci_real.sh:

  luci-real-driver.py CHROMIUM BASE-URL WORK-DIR SCREENSHOT

BASE-URL is luci-rpcd.py's; WORK-DIR/etc/config/keepalive-proxy the UCI
file it writes on Save & Apply.
"""
import base64
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

chromium, base, work, screenshot = sys.argv[1:5]
uci_file = os.path.join(work, "etc/config/keepalive-proxy")
page_url = base + "/cgi-bin/luci/admin/services/keepalive-proxy"
failed = 0


def check(name, ok, why=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else "\n  " + str(why)[:1500]), flush=True)
    failed += not ok
    return ok


class DevTools:
    """One page's DevTools websocket: send commands, collect events."""

    def __init__(self, ws_url):
        host, port, path = re.match(r"ws://([^:/]+):(\d+)(/.*)", ws_url).groups()
        self.sock = socket.create_connection((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, host, port, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("no websocket: %r" % head)
        self.next_id, self.events = 0, []

    def _send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                               bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                               bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("DevTools closed the connection")
            buf += chunk
        return buf

    def _recv(self):
        msg = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            data = self._exact(n)
            if b0 & 0x0f in (1, 2, 0):
                msg += data
                if b0 & 0x80:
                    return json.loads(msg)

    def call(self, method, **params):
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = self._recv()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def js(self, expr):
        """The value of a JavaScript expression (awaited if a promise)."""
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr[:200], r["exceptionDetails"].get("exception", {})
                                           .get("description", r["exceptionDetails"])))
        return r["result"].get("value")

    def wait(self, expr, seconds=20):
        """Waits until the expression is true; returns it, or None."""
        end = time.time() + seconds
        while time.time() < end:
            try:
                v = self.js(expr)
            except RuntimeError:
                v = None
            if v:
                return v
            time.sleep(0.2)
        return None


def post(path, **query):
    url = base + path + "?" + "&".join("%s=%s" % kv for kv in query.items())
    return urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST")).read()


def calls():
    return json.loads(urllib.request.urlopen(base + "/test/log").read())


profile = tempfile.mkdtemp()
browser = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", "--user-data-dir=" + profile,
                            "--remote-debugging-port=0", "--window-size=1200,1700", "about:blank"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    ws = None
    for line in browser.stderr:
        m = re.search(r"DevTools listening on (ws://\S+)", line)
        if m:
            ws = m.group(1)
            break
    if not ws:
        sys.exit("Chromium gave no DevTools address")
    port = re.match(r"ws://[^:]+:(\d+)", ws).group(1)
    targets = json.loads(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port).read())
    page = DevTools(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
    page.call("Runtime.enable")
    page.call("Page.enable")
    page.call("Emulation.setDeviceMetricsOverride", width=1200, height=1700, deviceScaleFactor=1,
              mobile=False)

    def load():
        page.call("Page.navigate", url=page_url)
        return page.wait("document.querySelector('#cbi-keepalive-proxy') != null && "
                         "document.getElementById('kp-requests') && "
                         "document.getElementById('kp-requests').textContent != '-'", 30)

    def field(option):
        return "document.getElementById('widget.cbid.keepalive-proxy.main.%s') || " \
               "document.getElementById('cbid.keepalive-proxy.main.%s')" % (option, option)

    def button(option):
        return "document.querySelector('output[for=\"cbid.keepalive-proxy.main.%s\"] button')" % option

    def tab(name):
        page.js("document.querySelector('[data-tab=\"%s\"]') && "
                "(document.querySelector('.cbi-tabmenu [data-tab=\"%s\"] a') || {click(){}}).click()"
                % (name, name))

    def notes():
        return page.js("Array.from(document.querySelectorAll('#maincontent .alert-message'), "
                       "e => e.textContent).join('\\n')") or ""

    def type_into(expr, text, enter=False):
        page.js("(() => { const e = %s; e.focus(); e.value = %s; "
                "e.dispatchEvent(new Event('input', {bubbles: true})); "
                "e.dispatchEvent(new Event('keyup', {bubbles: true})); "
                "e.dispatchEvent(new Event('blur', {bubbles: true})); %s })()"
                % (expr, json.dumps(text),
                   "e.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', keyCode: 13, "
                   "bubbles: true}));" if enter else ""))

    # --- render ---------------------------------------------------------------------
    check("the page renders on LuCI's modules, with numbers from the plugin", load(),
          page.js("document.body.innerText.slice(0, 600)"))
    labels = page.js("Array.from(document.querySelectorAll('.cbi-value-title'), e => e.textContent.trim())")
    for label in ("Enabled", "Port", "Listen address", "Allowed clients", "Users file",
                  "Stats listener", "Hosts to intercept", "CA directory", "Create the CA",
                  "CA certificate", "Read ahead"):
        check("the form has the field " + label, label in labels, labels)
    check("the port shows the UCI file's value",
          page.js("(%s).value" % field("port")) == "3128", page.js("(%s).value" % field("port")))
    items = page.js("Array.from(document.querySelectorAll('[data-name=\"allow\"] .item > input'), "
                    "e => e.value)")
    check("the allowed clients show the UCI file's list", items == ["127.0.0.1", "192.168.1.0/24"], items)
    check("the status shows the daemon's numbers",
          page.js("document.getElementById('kp-status').textContent").find("keepalive-proxy") >= 0
          and page.js("document.getElementById('kp-requests').textContent") == "2",
          page.js("document.getElementById('kp-status').innerText"))
    check("the host check shows its report",
          "Nothing on this router limits" in (page.js("document.getElementById('kp-check-report').textContent") or "")
          or "Something on this router limits" in (page.js("document.getElementById('kp-check-report').textContent") or ""),
          page.js("document.getElementById('kp-check-report').textContent"))
    check("no field of the UCI file is flagged",
          page.js("document.querySelectorAll('.cbi-input-invalid').length") == 0,
          page.js("Array.from(document.querySelectorAll('.cbi-input-invalid'), e => (e.id || '') + ' ' + "
                  "e.parentNode.outerHTML.slice(0, 600))"))

    # --- a datatype refusal: LuCI's validation.js, and Save refused -----------------
    before = open(uci_file).read()
    type_into(field("port"), "70000")
    check("a port of 70000 is flagged by LuCI's datatype check",
          page.wait("(%s).classList.contains('cbi-input-invalid')" % field("port"), 5),
          page.js("(%s).outerHTML" % field("port")))
    page.js("document.querySelector('.cbi-page-actions .cbi-button-save').click()")
    check("Save is refused while a field is invalid",
          page.wait("/invalid/i.test(document.body.innerText)", 5) and
          not [c for c in calls() if c[0] == "uci" and c[1] == "set"],
          [notes(), [c for c in calls() if c[0] == "uci"]])
    page.js("L.ui.hideModal()")
    type_into(field("port"), "3128")
    check("the port is valid again", page.wait("!(%s).classList.contains('cbi-input-invalid')" % field("port"), 5))

    # --- a DynamicList entry validated alone -----------------------------------------
    tab("https")
    adder = "document.querySelector('[data-name=\"intercept\"] .add-item input')"
    type_into(adder, "bad host!")
    check("a bad entry for the hosts to intercept is flagged, on its own",
          page.wait("(%s).classList.contains('cbi-input-invalid')" % adder, 5),
          page.js("(%s).outerHTML" % adder))
    type_into(adder, "cdn.example.org", enter=True)
    shown = page.js("Array.from(document.querySelectorAll('[data-name=\"intercept\"] .item > input'), "
                    "e => e.value)")
    check("a good entry is added beside the saved one (validate sees one entry, not the list)",
          shown == ["*.googlevideo.com", "cdn.example.org"] and
          not page.js("(%s).classList.contains('cbi-input-invalid')" % adder), shown)
    tab("general")
    allow = "document.querySelector('[data-name=\"allow\"] .add-item input')"
    type_into(allow, "10.0.0.0/33")
    check("a bad network in the allowed clients is flagged (or(ipaddr(1),cidr))",
          page.wait("(%s).classList.contains('cbi-input-invalid')" % allow, 5))
    type_into(allow, "")

    # --- Create CA with an edited list: Save & Apply first ----------------------------
    tab("https")
    page.js("(%s).click()" % button("_make_ca"))
    check("Create CA with an edited list asks for Save & Apply, and makes no CA",
          page.wait("/Save & Apply first/.test(document.body.innerText)", 10)
          and not os.path.exists(os.path.join(work, "ca")), notes())
    # Save stages the change in the session: still not applied.
    page.js("document.querySelector('.cbi-page-actions .cbi-button-save').click()")
    end = time.time() + 10
    while time.time() < end and not [c for c in calls() if c[0] == "uci" and c[1] == "set"]:
        time.sleep(0.2)
    check("Save stages the list in the session, the UCI file is unchanged",
          page.wait("document.querySelectorAll('[data-name=\"intercept\"] .item').length == 2", 10)
          and [c for c in calls() if c[0] == "uci" and c[1] == "set"] and open(uci_file).read() == before,
          [c for c in calls() if c[0] == "uci"])
    page.js("document.querySelectorAll('.alert-message').forEach(e => e.remove())")
    page.js("(%s).click()" % button("_make_ca"))
    check("Create CA with a saved, not applied list asks for Save & Apply",
          page.wait("/Save & Apply first/.test(document.body.innerText)", 10)
          and not os.path.exists(os.path.join(work, "ca")), notes())

    # --- Save & Apply writes the UCI file ---------------------------------------------
    page.js("document.querySelector('.cbi-page-actions .cbi-button-apply').click()")
    applied = page.wait("/Configuration changes applied/.test(document.body.innerText)", 20)
    page.wait("document.readyState == 'loading' || !document.getElementById('cbi-keepalive-proxy')", 5)
    after = open(uci_file).read()
    check("Save & Apply writes the UCI file, the list as uci writes one",
          applied and "\tlist intercept '*.googlevideo.com'\n\tlist intercept 'cdn.example.org'\n" in after
          and "\toption port '3128'\n" in after and "\tlist allow '192.168.1.0/24'\n" in after, after)
    check("Save & Apply writes no option for the buttons", "_make_ca" not in after and "_download_ca" not in after,
          after)
    check("Save & Apply confirms the apply",
          [c[1] for c in calls() if c[0] == "admin/uci"][-2:] == ["apply_rollback", "confirm"],
          [c for c in calls() if c[0] == "admin/uci"])

    # --- the CA buttons, after the page reloaded ---------------------------------------
    check("the page reloads after the apply", load())
    tab("https")
    page.js("(%s).click()" % button("_make_ca"))
    tls = subprocess.run(["keepalive-proxy", "-V"], capture_output=True, text=True).stdout
    if "TLS: none" in tls or "TLS:" not in tls:
        check("Create CA without TLS says to install keepalive-proxy-openssl",
              page.wait("/keepalive-proxy-openssl/.test(document.body.innerText)", 10), notes())
    else:
        made = page.wait("/A new CA is in/.test(document.body.innerText)", 15)
        check("Create CA with the applied list makes the CA and says where",
              made and os.path.exists(os.path.join(work, "ca/ca.crt")), notes())
        restarted = os.path.join(work, "init.log")
        check("Create CA restarts keepalive-proxy through the plugin, and nothing through rc",
              page.wait("1", 1) and ["luci.keepalive-proxy", "restart", {}, 0] in calls()
              and not [c for c in calls() if c[0] == "rc"]
              and os.path.exists(restarted) and open(restarted).read() == "keepalive-proxy restart\n",
              [c for c in calls() if c[1] == "restart" or c[0] == "rc"])
        page.js("window.kpOffered = []; const create = URL.createObjectURL; "
                "URL.createObjectURL = (b) => { window.kpOffered.push(b); return create.call(URL, b); }; "
                "document.addEventListener('click', (ev) => { if (ev.target.matches('a[download]')) "
                "{ ev.preventDefault(); window.kpOfferedName = ev.target.getAttribute('download'); } }, true)")
        page.js("(%s).click()" % button("_download_ca"))
        page.wait("window.kpOffered.length > 0", 10)
        pem = page.js("window.kpOffered.length ? window.kpOffered[0].text() : null")
        check("Download certificate offers ca.crt as a file",
              pem == open(os.path.join(work, "ca/ca.crt")).read()
              and page.js("window.kpOfferedName") == "keepalive-proxy-ca.crt", pem)

    page.js("window.scrollTo(0, 0)")
    tab("general")
    time.sleep(0.5)
    shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    check("the screenshot has LuCI's bootstrap stylesheet applied",
          page.js("getComputedStyle(document.querySelector('header')).position") in ("fixed", "sticky", "relative")
          and page.js("Array.from(document.styleSheets).some(s => /bootstrap\\/cascade\\.css$/.test(s.href))"))

    # --- an RPC error shown; polling goes on and recovers -----------------------------
    # (LuCI's own Save, refused above, leaves a rejection of its own: only
    # what happens from here on counts.)
    page.call("Runtime.evaluate", expression="1")
    mark = len(page.events)
    post("/test/fail", object="luci.keepalive-proxy", method="status", count=2, code=7)
    shown = page.wait("/ubus code 7: Request timeout/.test(document.getElementById('kp-status').textContent) "
                      "&& document.getElementById('kp-requests').textContent == '-'", 15)
    check("a failed status call is shown, without the numbers from before", shown,
          page.js("document.getElementById('kp-status').innerText"))
    check("the poll goes on and the numbers come back",
          page.wait("document.getElementById('kp-requests').textContent == '2' && "
                    "!/ubus code/.test(document.getElementById('kp-status').textContent)", 20),
          page.js("document.getElementById('kp-status').innerText"))

    # --- an expired session: LuCI asks for a new login; no stale numbers ---------------
    post("/test/expire")
    expired = page.wait("/Session expired/.test(document.body.innerText) && "
                        "document.getElementById('kp-requests').textContent == '-'", 15)
    check("an expired session: LuCI asks to log in again, the page shows the error, not stale numbers",
          expired, page.js("document.getElementById('kp-status').innerText"))
    time.sleep(1)
    page.call("Runtime.evaluate", expression="1")
    errors = [e["params"]["exceptionDetails"] for e in page.events[mark:]
              if e.get("method") == "Runtime.exceptionThrown"]
    check("no uncaught error or unhandled rejection from the failed calls",
          not errors, json.dumps(errors)[:1500])
finally:
    browser.terminate()
    try:
        browser.wait(10)
    except subprocess.TimeoutExpired:
        browser.kill()
    subprocess.run(["rm", "-rf", profile])

if failed:
    sys.exit("%d case(s) failed" % failed)
print("all cases passed")
