#!/usr/bin/env python3
"""Downloads one URL with headless Chromium, as a browser user would: the
page navigates to the file and the browser's download manager saves it.

    chromium_download.py --out FILE [--proxy http://HOST:PORT] URL

bench/wan.py runs it as a client in the client's network namespace. It
starts Chromium with --remote-debugging-pipe and speaks the DevTools
protocol over that pipe (NUL-separated JSON on file descriptors 3 and 4, no
websocket needed): Browser.setDownloadBehavior sends downloads to a
directory of its own, Page.navigate goes to the URL, and
Browser.downloadProgress says when the download completed or failed.
--proxy becomes --proxy-server; without it Chromium goes direct
(--no-proxy-server). The profile is a fresh temporary one, removed
afterwards. Prints one JSON object (Chromium's version, the download's
state, bytes and CLOCK_MONOTONIC times); exit status 0 only when the
download completed and was moved to --out.
"""

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Quiet: none of the browser's own traffic (updates, metrics, sync, safe
# browsing lists) belongs in a benchmark, and the test path reaches nothing
# else anyway.
QUIET_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection",
    "--metrics-recording-only", "--no-pings", "--disable-breakpad",
    "--disable-features=OptimizationHints,MediaRouter,Translate,DownloadBubble",
    "--password-store=basic", "--use-mock-keychain",
]


class DevTools:
    """The DevTools protocol over Chromium's pipe."""

    def __init__(self, to_browser, from_browser):
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.to_browser, data):]
        return self.next_id

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium in time")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if not ready:
                continue
            piece = os.read(self.from_browser, 1 << 16)
            if not piece:
                raise EOFError("Chromium closed its DevTools pipe")
            self.buffer += piece
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method, params=None, session=None, timeout=30.0):
        wanted = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def event(self, deadline):
        if self.events:
            return self.events.pop(0)
        while True:
            message = self.receive(deadline)
            if "method" in message:
                return message


def find_chromium(name):
    for candidate in ([name] if name else ["chromium", "chromium-browser", "google-chrome"]):
        path = shutil.which(candidate)
        if path:
            return path
    return None


def download(args, workdir):
    chromium = find_chromium(args.chromium)
    if not chromium:
        raise RuntimeError("Chromium not found (Debian: apt-get install chromium)")
    downloads = os.path.join(workdir, "downloads")
    os.makedirs(downloads)
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()

    def child_fds():
        # Chromium reads commands on fd 3 and writes on fd 4. Copies first,
        # so that neither dup2 overwrites a pipe end still needed.
        a, b = os.dup(to_browser_r), os.dup(from_browser_w)
        os.dup2(a, 3)
        os.dup2(b, 4)

    argv = [chromium, *QUIET_FLAGS, "--remote-debugging-pipe",
            f"--user-data-dir={os.path.join(workdir, 'profile')}",
            f"--proxy-server={args.proxy}" if args.proxy else "--no-proxy-server",
            "about:blank"]
    log = open(os.path.join(workdir, "chromium.log"), "wb")
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            preexec_fn=child_fds, close_fds=False, start_new_session=True)
    os.close(to_browser_r)
    os.close(from_browser_w)
    result = {"url": args.url, "proxy": args.proxy or None, "started": started}
    try:
        tools = DevTools(to_browser_w, from_browser_r)
        result["version"] = tools.call("Browser.getVersion").get("product")
        tools.call("Browser.setDownloadBehavior",
                   {"behavior": "allowAndName", "downloadPath": downloads, "eventsEnabled": True})
        target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = tools.call("Target.attachToTarget",
                             {"targetId": target, "flatten": True})["sessionId"]
        result["navigate"] = time.monotonic()
        nav = tools.call("Page.navigate", {"url": args.url}, session)
        if not nav.get("isDownload"):
            # A page rendered (an error page, say) instead of a download.
            raise RuntimeError("navigation started no download"
                               + (f": {nav['errorText']}" if nav.get("errorText") else ""))
        deadline = started + args.timeout
        while True:
            message = tools.event(deadline)
            params = message.get("params", {})
            if message["method"] == "Browser.downloadWillBegin":
                result["begin"] = time.monotonic()
                result["suggested_filename"] = params.get("suggestedFilename")
            elif message["method"] == "Browser.downloadProgress":
                if params.get("state") == "inProgress":
                    continue
                result.update(end=time.monotonic(), state=params.get("state"),
                              bytes=params.get("receivedBytes"),
                              total_bytes=params.get("totalBytes"))
                if params.get("state") != "completed":
                    raise RuntimeError(f"download {params.get('state')} after "
                                       f"{params.get('receivedBytes')} bytes")
                shutil.move(os.path.join(downloads, params["guid"]), args.out)
                break
        try:
            tools.call("Browser.close", timeout=5)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
    finally:
        os.close(to_browser_w)
        os.close(from_browser_r)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            # Its session holds the renderer and helper processes too.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--out", required=True, help="where the downloaded file goes")
    p.add_argument("--proxy", default="", help="http://HOST:PORT; empty: direct")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for everything")
    p.add_argument("--chromium", help="the browser's program (default: chromium)")
    p.add_argument("--keep-profile", action="store_true",
                   help="keep the temporary profile and Chromium's log")
    args = p.parse_args()
    workdir = tempfile.mkdtemp(prefix="kp-chromium-")
    status = 0
    try:
        result = download(args, workdir)
    except (OSError, EOFError, TimeoutError, RuntimeError, KeyError) as e:
        result = {"error": f"{type(e).__name__}: {e}"}
        try:
            with open(os.path.join(workdir, "chromium.log"), errors="replace") as f:
                result["log_tail"] = f.read()[-800:]
        except OSError:
            pass
        status = 1
    finally:
        if args.keep_profile:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
