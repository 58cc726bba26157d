#!/usr/bin/python3
"""HTTP caching behaviour: the http-tests/cache-tests suite (cache-tests.fyi)
run through no cache, squid, nginx and keepalive-proxy, side by side.

The suite is a Node.js origin server that is told, per test, how to answer
each request, and a command-line client that sends each test's requests and
checks what came back against what a cache (RFC 9111) should have done: came
from the cache or not, which headers were kept, which request went to the
origin as a conditional one, and so on. Every test has a kind: "required" (a
"must" of the specification; a kind left out counts as required), "optimal"
(a cache that misses it is correct, only less useful) and "check" (it records
what the cache does where the specification does not decide). Tests depend
on others ("depends_on"); a test whose dependency did not pass is not counted
as failed but as a dependency failure, as on cache-tests.fyi.

Rows, each against a fresh origin server of the suite on a free loopback
port, one row after another:

  direct           the client talks straight to the origin: no cache at all.
                   The baseline; it fails the few required tests that expect
                   a shared cache to answer from its store.
  squid            Debian's squid (apt-get install squid) started by this run
                   with its own configuration in the run's directory (never
                   the system's service): squid -N -f CONF, a forward proxy on
                   127.0.0.1 (http_access allow localhost), memory cache only
                   (cache_mem 8 MB, no cache_dir), the generic refresh_pattern
                   lines of Debian's stock configuration, cache_effective_user
                   proxy when started as root. The client uses it as its HTTP
                   proxy.
  nginx            nginx (Debian nginx-light) started by this run with its
                   own configuration, pid file, logs and temporary paths: a
                   reverse proxy with proxy_cache (a shared cache, 8 MB of
                   keys, revalidation with conditional requests on) in front
                   of the origin. The client takes nginx for the origin.
  keepalive-proxy  --kp-binary (default build/keepalive-proxy) started
                   with -p PORT and --kp-args, used by the client as its HTTP
                   proxy like squid. It has no cache, so it should score like
                   "direct": every test whose outcome differs from direct's is
                   listed after the table (and saved). A test that changes
                   class is a bug of the proxy. The stale-close tests differ
                   in outcome only, and rightly: their origin closes the
                   connection without answering, which a client talking to
                   it directly sees as a network error ("fetch failed") and
                   a proxy must turn into a 502 (keepalive-proxy first
                   replays the GET once on a fresh connection, since the
                   dead one was a pooled one).

How the suite is run. Its client (test-engine/cli.mjs) reads the base URL
from npm_config_base and prints the results as JSON: {test id: true, or
[error name, message]}; 365 of its 370 tests run (5 are for browsers only).
It uses Node's built-in fetch, which ignores HTTP_PROXY, so this run gives
node a small module of its own to load first (node --import): for the
forward proxies it makes the suite's own undici send every request, also
those of the interim-response tests that build their own undici Agent, to
the proxy in absolute form (a ProxyAgent with proxyTunnel off: no CONNECT).
Before the first proxied row a probe checks that requests really leave in
that form. The origin (test-engine/server/server.mjs) listens on every
address; a second small module makes it listen on 127.0.0.1 only. The test
metadata (kinds, dependencies) comes from the suite's tests/index.mjs, read
by node at the start of the run.

The suite. --suite DIR names a checkout of https://github.com/http-tests/
cache-tests (git clone it). When DIR has no node_modules this run does
"npm install --omit=dev" there first. Made and checked with the suite's
commit b55b8bd (2026-07-20, package version 0.4.5, undici 7.30.2 from npm)
on Node 20.20.2 and on Debian 12's Node 18.20.4 (apt-get install -y nodejs
npm), with the same results, test by test, on both. The suite asks for Node
14.8 or later, but since commit aca2b85 (2025-03-05) it depends on undici 7,
which wants Node 20.18.1: on Node 18 it fails to load for want of a global
File, which the module above supplies from node:buffer. Without that, the
four interim-response tests and any forward proxy would need Node 20 (the
last commit without undici is 4ef6cc6, 2025-02-03; since dda5ccd,
2025-01-21, the client has no proxy support of its own).

A run of all four rows takes about 4 minutes: the suite waits seconds
inside many tests (for responses to become stale), 25 tests at a time.

Output: a table (row, tests, passes, required failures, optional failures,
other, then checks answered yes/no and what "other" is made of: dependency,
setup and harness failures) and a JSON file (--out) with, per row, its
configuration, its counts, the ids of failing tests by class with the
suite's message, and the raw results; plus the tests where keepalive-proxy
differs from direct. On the machine it was made on (suite b55b8bd): direct
22 passes, 6 required and 25 optional failures; squid 5.7 183, 18 and 40;
nginx 1.22.1 158, 33 and 34; keepalive-proxy as direct.

    python3 bench/cache_tests.py --suite /tmp/cache-tests
    python3 bench/cache_tests.py --suite /tmp/cache-tests --only direct,keepalive-proxy \\
        --kp-binary build/keepalive-proxy --kp-args=--no-splice
"""

import argparse
import datetime
import json
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpbench as kb  # noqa: E402

ROWS = ("direct", "squid", "nginx", "keepalive-proxy")
FORWARD_PROXIES = ("squid", "keepalive-proxy")

# Classes a test result falls into, in the table's order.
PASS, FAIL, OPTIONAL_FAIL, YES, NO = "pass", "fail", "optional_fail", "yes", "no"
DEPENDENCY, SETUP, HARNESS, RETRY, UNTESTED = (
    "dependency_fail", "setup_fail", "harness_fail", "retry", "untested")
OTHER = (DEPENDENCY, SETUP, HARNESS, RETRY)

# Loaded by node before the suite's client. It finds undici where the suite
# installed it, so that the Agent class patched here is the one the suite's
# tests import.
CLIENT_PRELOAD = r"""
// Written by bench/cache_tests.py.
import { createRequire } from 'node:module'
import { File } from 'node:buffer'
import path from 'node:path'

// Node 18 has File only in node:buffer; undici 7 (the suite's, for the
// interim-response tests) needs it global.
if (globalThis.File === undefined) globalThis.File = File

// Route the suite's requests through the forward proxy in CT_FORWARD_PROXY,
// in absolute form.
if (process.env.CT_FORWARD_PROXY) {
  const fromSuite = createRequire(path.join(process.env.CT_SUITE_DIR, 'package.json'))
  const undici = fromSuite('undici')
  const viaProxy = new undici.ProxyAgent({ uri: process.env.CT_FORWARD_PROXY, proxyTunnel: false })
  undici.setGlobalDispatcher(viaProxy)
  // The interim-response tests fetch with `new Agent().compose(interceptor)`;
  // give them the proxy with the same interceptor instead of a direct agent.
  undici.Agent.prototype.compose = function (...interceptors) {
    return viaProxy.compose(...interceptors)
  }
}
"""

# Loaded by node before the suite's origin server: listen on loopback only.
SERVER_PRELOAD = r"""
// Written by bench/cache_tests.py: the origin listens on 127.0.0.1 only.
import http from 'node:http'

const listen = http.Server.prototype.listen
http.Server.prototype.listen = function (port, ...rest) {
  if (rest.length === 0 && (typeof port === 'number' || typeof port === 'string')) {
    return listen.call(this, Number(port), '127.0.0.1')
  }
  return listen.call(this, port, ...rest)
}
"""

# Prints the suite's tests as JSON: id, kind, dependencies, suite.
METADATA_SCRIPT = r"""
import { pathToFileURL } from 'node:url'
import path from 'node:path'

const index = await import(pathToFileURL(path.join(process.argv[2], 'tests', 'index.mjs')).href)
const out = []
for (const suite of index.default) {
  for (const test of suite.tests) {
    out.push({ id: test.id, suite: suite.id, name: test.name, kind: test.kind || 'required',
               depends_on: test.depends_on || [], browser_only: test.browser_only === true })
  }
}
process.stdout.write(JSON.stringify(out))
"""

# Fetches one URL through the preload, for the probe.
PROBE_SCRIPT = r"""
const res = await fetch(process.argv[2])
process.stdout.write(String(res.status))
"""

CLIENT_TIMEOUT = 600  # seconds for one row's client run


def node_env(extra):
    """The environment for the suite's node processes: ours without any
    proxy or npm configuration that could change what they do."""
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and not k.startswith("npm_")}
    env.update(extra)
    return env


def run_checked(argv, what, **kw):
    out = subprocess.run(argv, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        kb.die(f"{what} failed (exit {out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


# ---------------------------------------------------------------------------
# The suite.

class Suite:
    def __init__(self, directory, node, workdir):
        self.dir = os.path.abspath(directory)
        self.node = node
        self.workdir = workdir
        if not os.path.isfile(os.path.join(self.dir, "test-engine", "cli.mjs")):
            kb.die(f"{self.dir} is not a cache-tests checkout (no test-engine/cli.mjs); "
                   "git clone https://github.com/http-tests/cache-tests")
        self.client_preload = self._write("client-preload.mjs", CLIENT_PRELOAD)
        self.server_preload = self._write("server-preload.mjs", SERVER_PRELOAD)

    def _write(self, name, text):
        path = self.workdir.join(name)
        with open(path, "w") as f:
            f.write(text.lstrip())
        return path

    def install(self):
        if os.path.isdir(os.path.join(self.dir, "node_modules", "undici")):
            return
        npm = kb.require_program("npm")
        print(f"npm install in {self.dir} ...", file=sys.stderr)
        # npm keeps the environment as it is: it may need a proxy to reach
        # its registry.
        run_checked([npm, "install", "--omit=dev", "--no-audit", "--no-fund"],
                    "npm install", cwd=self.dir)

    def describe(self):
        info = {"dir": self.dir}
        try:
            info["commit"] = subprocess.run(
                ["git", "-C", self.dir, "log", "-1", "--format=%H %cs"],
                capture_output=True, text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            info["commit"] = None
        try:
            with open(os.path.join(self.dir, "package.json")) as f:
                info["version"] = json.load(f).get("version")
            with open(os.path.join(self.dir, "node_modules", "undici", "package.json")) as f:
                info["undici"] = json.load(f).get("version")
        except (OSError, ValueError):
            pass
        info["node"] = run_checked([self.node, "--version"], "node --version").strip()
        return info

    def metadata(self):
        script = self._write("metadata.mjs", METADATA_SCRIPT)
        text = run_checked([self.node, script, self.dir], "reading the suite's tests",
                           cwd=self.dir, env=node_env({}))
        return {t["id"]: t for t in json.loads(text)}

    def start_origin(self, name):
        for _attempt in range(3):
            port = kb.free_port()
            env = node_env({"npm_config_port": str(port), "npm_config_protocol": "http",
                            "npm_config_pidfile": self.workdir.join(f"origin-{name}.pid")})
            proc = kb.Process(f"origin ({name})",
                              [self.node, "--import", self.server_preload,
                               os.path.join(self.dir, "test-engine", "server", "server.mjs")],
                              cwd=self.dir, env=env,
                              log_path=self.workdir.join(f"origin-{name}.log"))
            if kb.wait_listening("127.0.0.1", port, timeout=15, proc=proc):
                return proc, port
            tail = proc.log_tail()
            proc.stop()
        kb.die(f"the suite's server did not start:\n{tail}")

    def client_argv(self):
        return [self.node, "--no-warnings", "--import", self.client_preload,
                os.path.join(self.dir, "test-engine", "cli.mjs")]

    def client_env(self, base_url, proxy_url):
        # cli.mjs takes npm's configuration from the environment; an empty
        # test id means every test.
        env = node_env({"npm_config_base": base_url, "npm_package_config_id": "",
                        "CT_SUITE_DIR": self.dir})
        if proxy_url:
            env["CT_FORWARD_PROXY"] = proxy_url
        return env

    def run_client(self, name, base_url, proxy_url):
        """The suite's client, every test; its results {id: true | [name, msg]}."""
        log = self.workdir.join(f"client-{name}.err")
        with open(log, "w") as err:
            out = subprocess.run(self.client_argv(), cwd=self.dir,
                                 env=self.client_env(base_url, proxy_url),
                                 stdout=subprocess.PIPE, stderr=err, text=True,
                                 timeout=CLIENT_TIMEOUT)
        try:
            results = json.loads(out.stdout)
        except ValueError:
            results = None
        if out.returncode != 0 or not isinstance(results, dict):
            kb.die(f"the suite's client failed for {name} (exit {out.returncode}):\n"
                   f"{out.stdout[-1500:]}{kb.tail_of(log)}")
        return results, kb.tail_of(log, 200)

    def probe_absolute_form(self):
        """Send one request through the preload to a listener of ours and
        check that it arrives as a proxy request in absolute form, not as a
        CONNECT (an undici too old for proxyTunnel: false) or not at all."""
        script = self._write("probe.mjs", PROBE_SCRIPT)
        seen = []
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            listener.settimeout(20)
            port = listener.getsockname()[1]

            def answer():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    conn.settimeout(10)
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    seen.append(data.split(b"\r\n", 1)[0].decode(errors="replace"))
                    conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

            thread = threading.Thread(target=answer, daemon=True)
            thread.start()
            # The listener's own port: a request that bypassed the proxy
            # would arrive too, in origin form.
            target = f"http://127.0.0.1:{port}/cache-tests-probe"
            out = subprocess.run(self.client_argv()[:-1] + [script, target],
                                 cwd=self.dir, env=self.client_env("", f"http://127.0.0.1:{port}"),
                                 capture_output=True, text=True, timeout=30)
            thread.join(5)
        want = f"GET {target} HTTP/1.1"
        if not seen or seen[0] != want or out.stdout.strip() != "204":
            kb.die("the suite's client does not send its requests to a forward proxy in "
                   f"absolute form with this node and undici: the proxy saw {seen!r}, "
                   f"not {want!r}; node said: {out.stdout.strip()} {out.stderr.strip()[-1500:]}")


# ---------------------------------------------------------------------------
# The caches.

def squid_version(program):
    out = subprocess.run([program, "-v"], capture_output=True, text=True)
    return out.stdout.splitlines()[0].strip() if out.stdout else None


def start_squid(workdir):
    program = kb.require_program("squid")
    d = workdir.join("squid")
    os.makedirs(d, exist_ok=True)
    user_line = ""
    if os.geteuid() == 0:
        # Squid will not keep running as root; it becomes proxy (Debian's
        # user for it), which must still write its logs and pid file here.
        entry = pwd.getpwnam("proxy")
        os.chown(d, entry.pw_uid, entry.pw_gid)
        user_line = "cache_effective_user proxy"
    for _attempt in range(3):
        port = kb.free_port()
        conf = os.path.join(d, "squid.conf")
        # Memory cache only: no cache_dir. The refresh_pattern lines are the
        # generic ones of Debian's stock squid.conf (no heuristic freshness
        # for URLs with a query; 20% of the Last-Modified age, at most three
        # days, for the rest).
        text = f"""
http_port 127.0.0.1:{port}
{user_line}
pid_filename {d}/squid.pid
cache_log {d}/cache.log
access_log stdio:{d}/access.log
cache_store_log none
netdb_filename none
coredump_dir {d}
cache_mem 8 MB
maximum_object_size_in_memory 512 KB
memory_cache_shared off
http_access allow localhost
http_access deny all
refresh_pattern -i (/cgi-bin/|\\?) 0 0% 0
refresh_pattern . 0 20% 4320
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 0 seconds
"""
        with open(conf, "w") as f:
            f.write(text.lstrip())
        os.chmod(conf, 0o644)
        proc = kb.Process("squid", [program, "-N", "-f", conf],
                          log_path=os.path.join(d, "squid.out"))
        if kb.wait_listening("127.0.0.1", port, timeout=30, proc=proc):
            return proc, port, {"program": program, "version": squid_version(program),
                                "mode": "forward proxy", "config": text.strip().splitlines()}
        tail = proc.log_tail() + kb.tail_of(os.path.join(d, "cache.log"))
        proc.stop()
    kb.die(f"squid did not start:\n{tail}")


def nginx_version(program):
    out = subprocess.run([program, "-v"], capture_output=True, text=True)
    return out.stderr.strip().split("/", 1)[-1] or None


def start_nginx(workdir, origin_port):
    program = kb.require_program("nginx", "nginx-light")
    d = workdir.join("nginx")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    user_line = ""
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("www-data")
            user_line = "user www-data;"
        except KeyError:
            user_line = "user nobody;"
    for _attempt in range(3):
        port = kb.free_port()
        conf = os.path.join(d, "nginx.conf")
        text = f"""
{user_line}
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/tmp_body;
    proxy_temp_path {d}/tmp_proxy;
    fastcgi_temp_path {d}/tmp_fastcgi;
    uwsgi_temp_path {d}/tmp_uwsgi;
    scgi_temp_path {d}/tmp_scgi;
    proxy_cache_path {d}/cache levels=1:2 keys_zone=cachetests:8m max_size=64m inactive=60m;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{origin_port};
            proxy_http_version 1.1;
            proxy_cache cachetests;
            proxy_cache_revalidate on;
        }}
    }}
}}
"""
        with open(conf, "w") as f:
            f.write(text.lstrip())
        os.chmod(conf, 0o644)
        proc = kb.Process("nginx", [program, "-p", d, "-c", conf, "-e", f"{d}/error.log",
                                    "-g", "daemon off;"],
                          log_path=os.path.join(d, "nginx.out"))
        if kb.wait_listening("127.0.0.1", port, timeout=15, proc=proc):
            return proc, port, {"program": program, "version": nginx_version(program),
                                "mode": "reverse proxy", "config": text.strip().splitlines()}
        tail = proc.log_tail() + kb.tail_of(os.path.join(d, "error.log"))
        proc.stop()
    kb.die(f"nginx did not start:\n{tail}")


def kp_version(binary):
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def start_keepalive_proxy(workdir, binary, extra_args):
    for _attempt in range(3):
        port = kb.free_port()
        argv = [binary, "-p", str(port)] + extra_args
        proc = kb.Process("keepalive-proxy", argv,
                          log_path=workdir.join(f"keepalive-proxy-{port}.log"))
        if kb.wait_listening("127.0.0.1", port, timeout=15, proc=proc):
            return proc, port, {"program": binary, "version": kp_version(binary),
                                "build": kb.build_commit(os.path.dirname(binary)),
                                "mode": "forward proxy", "argv": argv}
        tail = proc.log_tail()
        proc.stop()
    kb.die(f"keepalive-proxy did not start:\n{tail}")


# ---------------------------------------------------------------------------
# Results.

def classify(tests, results):
    """{test id: class} the way the suite's own result pages count: a test
    whose dependency did not pass (or say yes) is a dependency failure;
    a setup error is a setup failure (or a retry, when the cache retried);
    an aborted request is a harness failure; otherwise by the test's kind."""
    memo = {}

    def one(test_id, stack=()):
        if test_id in memo:
            return memo[test_id]
        result = results.get(test_id)
        test = tests.get(test_id)
        if result is None or test is None:
            return UNTESTED
        cls = None
        for dep in test["depends_on"]:
            if dep in stack or one(dep, stack + (test_id,)) not in (PASS, YES):
                cls = DEPENDENCY
                break
        if cls is None and result is not True:
            name = result[0] if isinstance(result, list) and result else None
            detail = result[1] if isinstance(result, list) and len(result) > 1 else None
            if name == "Setup":
                cls = RETRY if detail == "retry" else SETUP
            elif name == "AbortError":
                cls = HARNESS
        if cls is None:
            kind = test["kind"]
            if kind == "optimal":
                cls = PASS if result is True else OPTIONAL_FAIL
            elif kind == "check":
                cls = YES if result is True else NO
            else:
                cls = PASS if result is True else FAIL
        memo[test_id] = cls
        return cls

    return {test_id: one(test_id) for test_id in results}


def detail_of(result):
    if result is True:
        return "pass"
    if isinstance(result, list):
        return ": ".join(str(x) for x in result)
    return str(result)


def summarize(tests, results):
    classes = classify(tests, results)
    counts = {c: 0 for c in (PASS, FAIL, OPTIONAL_FAIL, YES, NO) + OTHER + (UNTESTED,)}
    for cls in classes.values():
        counts[cls] += 1
    failing = {}
    for test_id in sorted(classes):
        cls = classes[test_id]
        if cls in (PASS, YES):
            continue
        failing.setdefault(cls, []).append(
            {"id": test_id, "kind": tests.get(test_id, {}).get("kind"),
             "detail": detail_of(results[test_id])})
    summary = {
        "tests": len(results),
        "passes": counts[PASS],
        "required_failures": counts[FAIL],
        "optional_failures": counts[OPTIONAL_FAIL],
        "checks_yes": counts[YES],
        "checks_no": counts[NO],
        "other": sum(counts[c] for c in OTHER + (UNTESTED,)),
        "counts": counts,
    }
    return summary, classes, failing


def differences(tests, base, other):
    """Tests whose class or raw outcome differs between two rows' results."""
    base_cls = classify(tests, base["results"])
    other_cls = classify(tests, other["results"])
    out = []
    for test_id in sorted(set(base["results"]) | set(other["results"])):
        b, o = base["results"].get(test_id), other["results"].get(test_id)
        b_ok, o_ok = b is True, o is True
        b_name = None if b_ok or not isinstance(b, list) else b[0]
        o_name = None if o_ok or not isinstance(o, list) else o[0]
        if base_cls.get(test_id) != other_cls.get(test_id) or b_ok != o_ok or b_name != o_name:
            out.append({"id": test_id, "kind": tests.get(test_id, {}).get("kind"),
                        "direct": base_cls.get(test_id, UNTESTED),
                        "direct_detail": detail_of(b),
                        "proxy": other_cls.get(test_id, UNTESTED),
                        "proxy_detail": detail_of(o)})
    return out


def print_summary(rows, order):
    columns = [("row", "row", None), ("tests", "tests", None), ("passes", "passes", None),
               ("required fail", "required_failures", None),
               ("optional fail", "optional_failures", None), ("other", "other", None),
               ("checks Y/N", "checks", None), ("dependency", "dependency", None),
               ("setup", "setup", None), ("harness", "harness", None)]
    table = []
    for name in order:
        if name in rows:
            s = rows[name]["summary"]
            c = s["counts"]
            table.append(dict(s, row=name, checks=f"{s['checks_yes']}/{s['checks_no']}",
                              dependency=c[DEPENDENCY], setup=c[SETUP],
                              harness=c[HARNESS] + c[RETRY] + c[UNTESTED]))
    kb.print_table("cache-tests per row (dependencies honoured, as on cache-tests.fyi)",
                   columns, table)
    print("other = dependency (a test it depends on did not pass) + setup (the test could "
          "not be set up) + harness (aborted requests, retries)")


# ---------------------------------------------------------------------------

def run_row(name, suite, args, workdir, started):
    origin, origin_port = suite.start_origin(name)
    started.append(origin)
    origin_url = f"http://127.0.0.1:{origin_port}"
    cache = None
    try:
        if name == "direct":
            base, proxy_url, config = origin_url, None, {"mode": "no cache"}
        elif name == "squid":
            cache, port, config = start_squid(workdir)
            base, proxy_url = origin_url, f"http://127.0.0.1:{port}"
        elif name == "nginx":
            cache, port, config = start_nginx(workdir, origin_port)
            base, proxy_url = f"http://127.0.0.1:{port}", None
        else:
            cache, port, config = start_keepalive_proxy(workdir, args.kp_binary, args.kp_args)
            base, proxy_url = origin_url, f"http://127.0.0.1:{port}"
        if cache:
            started.append(cache)
        config.update({"base_url": base, "forward_proxy": proxy_url})
        t0 = time.monotonic()
        results, stderr_tail = suite.run_client(name, base, proxy_url)
        seconds = time.monotonic() - t0
        if cache and cache.poll() is not None:
            print(f"warning: {name} exited during the run (exit {cache.poll()})", file=sys.stderr)
            config["exited_during_run"] = cache.poll()
    finally:
        if cache:
            # nginx's master ends its worker and cache processes itself;
            # squid -N is one process.
            cache.stop()
        origin.stop()
    return {"config": config, "seconds": round(seconds, 1), "results": results,
            "client_stderr_tail": stderr_tail.splitlines()[-20:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", required=True, metavar="DIR",
                    help="a checkout of github.com/http-tests/cache-tests "
                         "(npm install is run there when node_modules is missing)")
    ap.add_argument("--only", default=",".join(ROWS), metavar="NAME,...",
                    help=f"rows to run, of {','.join(ROWS)} (default all)")
    ap.add_argument("--kp-binary", default=os.path.join("build", "keepalive-proxy"),
                    help="keepalive-proxy binary (default build/keepalive-proxy)")
    ap.add_argument("--kp-args", default="",
                    help="extra arguments for keepalive-proxy, one string: --kp-args=\"-m 4 -t 5\"")
    ap.add_argument("--node", default="node", help="node program to run the suite with")
    ap.add_argument("--out", default=os.path.join("bench", "results", "cache-tests.json"),
                    help="JSON results file (default bench/results/cache-tests.json)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the run's directory (configs, logs of every program)")
    args = ap.parse_args()

    wanted = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in ROWS]
    if unknown or not wanted:
        kb.die(f"--only: unknown row(s) {', '.join(unknown) or '(none given)'}; "
               f"known: {', '.join(ROWS)}")
    order = [n for n in ROWS if n in wanted]
    args.kp_args = shlex.split(args.kp_args)
    if "keepalive-proxy" in order:
        args.kp_binary = os.path.abspath(args.kp_binary)
        if not os.access(args.kp_binary, os.X_OK):
            kb.die(f"{args.kp_binary} is not an executable; build it or give --kp-binary")
    node = shutil.which(args.node)
    if not node:
        kb.die(f"{args.node} not found (Debian: apt-get install -y nodejs npm)")
    args.node = node
    for row, program, package in (("squid", "squid", "squid"), ("nginx", "nginx", "nginx-light")):
        if row in order:
            kb.require_program(program, package)

    kb.exit_on_sigterm()
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    workdir = kb.Workdir(prefix="cache-tests-", keep=args.keep)
    started = []
    rows = {}
    try:
        suite = Suite(args.suite, args.node, workdir)
        suite.install()
        suite_info = suite.describe()
        tests = suite.metadata()
        print(f"suite {suite_info.get('commit')} (undici {suite_info.get('undici')}), "
              f"node {suite_info['node']}, {len(tests)} tests", file=sys.stderr)
        if any(n in FORWARD_PROXIES for n in order):
            suite.probe_absolute_form()
        for name in order:
            print(f"{name} ...", file=sys.stderr, flush=True)
            row = run_row(name, suite, args, workdir, started)
            row["summary"], row["classes"], row["failing"] = summarize(tests, row["results"])
            rows[name] = row
            s = row["summary"]
            print(f"{name}: {s['tests']} tests, {s['passes']} passes, "
                  f"{s['required_failures']} required and {s['optional_failures']} optional "
                  f"failures, {s['other']} other, in {row['seconds']} s",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        for proc in reversed(started):
            proc.stop()
        workdir.cleanup()

    print_summary(rows, order)
    diffs = None
    if "direct" in rows and "keepalive-proxy" in rows:
        diffs = differences(tests, rows["direct"], rows["keepalive-proxy"])
        if diffs:
            print(f"\nkeepalive-proxy differs from direct in {len(diffs)} test(s):")
            for d in diffs:
                print(f"  {d['id']} ({d['kind']}): direct {d['direct']} "
                      f"[{d['direct_detail']}], keepalive-proxy {d['proxy']} "
                      f"[{d['proxy_detail']}]")
        else:
            print("\nkeepalive-proxy scores exactly like direct.")

    record = {
        "bench": "cache_tests",
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "started": started_at,
        "machine": kb.machine_info(),
        "repo": kb.repo_version(),
        "suite": suite_info,
        "rows": {},
        "keepalive_proxy_vs_direct": diffs,
    }
    for name in order:
        row = rows[name]
        record["rows"][name] = {
            "config": row["config"], "seconds": row["seconds"], "summary": row["summary"],
            "failing": row["failing"], "results": row["results"],
            "client_stderr_tail": row["client_stderr_tail"]}
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # The results name no directory of this machine: the run's and the
    # suite's become RUN and SUITE, paths in this checkout relative ones.
    text = json.dumps(record, indent=1, sort_keys=True)
    text = text.replace(str(workdir.path), "RUN").replace(os.path.abspath(args.suite), "SUITE")
    text = kb.without_machine_paths(text)
    with open(out, "w") as f:
        f.write(text + "\n")
    print(f"\nresults written to {out}")


if __name__ == "__main__":
    main()
