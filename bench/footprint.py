#!/usr/bin/python3
"""Footprint: binary size, idle memory, and memory per idle client connection.

1. keepalive-proxy's binary: size as built, size of a stripped copy, and
   size(1)'s text/data/bss; the other programs' installed (already stripped)
   binaries for comparison.
2. Memory of each program freshly started and idle: VmRSS, and Pss and
   private memory (Private_Clean + Private_Dirty) from smaps_rollup. VmRSS
   counts every shared page mapped (glibc and the rest), so a process that
   does nothing at all, /bin/sleep, is measured in the same run as the floor.
3. The same with --connections (default 10,000) client connections open and
   silent: a helper process opens them, sends nothing, and holds them; once
   the program has accepted all of them (its open descriptors say so) memory
   is read again. Per connection = (with - idle) / accepted.
   nginx, serving directly, is the reference for what an idle connection can
   cost. --after-request sends one request per connection first and measures
   the connections idle between requests instead.
4. --tls: the same over HTTPS. nginx serves TLS (certificates made by the
   run), clients send CONNECT and complete TLS through each proxy (a tunnel,
   or keepalive-proxy intercepting 127.0.0.1), so a held connection costs
   what an idle TLS connection costs. With --after-request --all-at-once the
   requests go out on every connection before any answer is read, so
   keepalive-proxy opens, and then pools, one upstream TLS connection per
   client: per conn is then a client and a pooled upstream TLS connection.
5. --pooled: what an idle pooled plain upstream connection costs
   keepalive-proxy. A fresh one, with pool caps raised to --connections,
   gets every client's request (a proxied GET) before any answer is read,
   so that most requests wait for a connection of their own and it opens
   nearly one per request, pooled once answered; then the clients close.
   Once two trims have passed (the spare buffers and request states a
   burst leaves are freed then), per pooled = (RSS with only the pool -
   idle) / the pooled count its /stats page reports.

With --after-request and --pooled, one run shows an idle client connection
and an idle pooled upstream connection side by side with nginx's idle
connection, and says whether each is within the 1 KiB target:

    python3 bench/footprint.py --connections 5000 --after-request --pooled

Run as root: python3 bench/footprint.py [--connections 10000]
"""

import argparse
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpbench as kb  # noqa: E402

KIB = 1024

# Runs in its own process: holds the connections, so their descriptors count
# against its limit, not ours, and its memory stays out of the measurement.
HOLDER = r'''
import json, resource, select, socket, ssl, sys
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
request = bytes.fromhex(sys.argv[4]) if len(sys.argv) > 4 else b""
# {"tls": {"authority": CONNECT target or "", "cafile": ..., "sni": ...} or None,
#  "all_at_once": bool}
options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
tls = options.get("tls")
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
family = socket.AF_INET6 if ":" in host else socket.AF_INET

def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside the response body")
        body += chunk
    return head.split(b"\r\n", 1)[0].decode(errors="replace")

def secure(s):
    """CONNECT (when through a proxy), then TLS, over s."""
    if tls["authority"]:
        a = tls["authority"]
        s.sendall(f"CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n".encode())
        answer = read_response(s)
        if " 200 " not in answer + " ":
            raise ConnectionError(f"CONNECT: {answer}")
    ctx = ssl.create_default_context(cafile=tls["cafile"])
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(s, server_hostname=tls["sni"])

all_at_once = bool(options.get("all_at_once"))
socks, error, status = [], "", ""
for i in range(count):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect((host, port))
        if tls:
            s = secure(s)
        if request and not all_at_once:
            s.sendall(request)
            status = read_response(s)
    except (OSError, ConnectionError) as e:
        error = f"connection {i + 1}: {e}"
        s.close()
        break
    socks.append(s)
if request and all_at_once and not error:
    try:
        for s in socks:
            s.sendall(request)
        for s in socks:
            status = read_response(s)
    except (OSError, ConnectionError) as e:
        error = f"all at once: {e}"
print(f"OPENED {len(socks)} {status}|{error}", flush=True)

poller = select.poll()
for s in socks:
    poller.register(s, select.POLLIN | select.POLLRDHUP)
for line in sys.stdin:
    if line.strip() == "check":
        # Anything readable on a silent connection is an end of file, a reset
        # or an error answer: the program gave up on it.
        gone = len(poller.poll(0))
        print(f"ALIVE {len(socks) - gone}", flush=True)
    else:
        break
'''


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=10000,
                    help="idle client connections to hold (default 10000)")
    ap.add_argument("--after-request", action="store_true",
                    help="send one request on each connection first (a proxied GET of a "
                         "small file), then hold it idle")
    ap.add_argument("--accept-timeout", type=float, default=120.0,
                    help="give up waiting for accepts after this many seconds (default 120)")
    ap.add_argument("--build-dir", default=os.path.join(kb.REPO_ROOT, "build"))
    kb.add_proxy_arguments(ap, proxy_help="also measure a proxy already listening there "
                                          "(repeatable); its memory is known only with "
                                          "--proxy-cmd")
    ap.add_argument("--kp-args", default="", metavar="ARGS",
                    help="extra flags for keepalive-proxy")
    ap.add_argument("--no-nginx", action="store_true", help="skip the nginx reference row")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds to wait after the last connection before memory is read "
                         "(default 1; keepalive-proxy gives a burst's memory back within "
                         "about 10 s)")
    ap.add_argument("--tls", action="store_true",
                    help="HTTPS: CONNECT and TLS through each proxy (keepalive-proxy "
                         "intercepting), nginx serving TLS")
    ap.add_argument("--all-at-once", action="store_true",
                    help="with --tls --after-request: send every request before reading any "
                         "answer, so keepalive-proxy pools one upstream connection per client")
    ap.add_argument("--pooled", action="store_true",
                    help="also measure keepalive-proxy holding only idle pooled plain upstream "
                         "connections, about one opened per client request (not with --tls)")
    ap.add_argument("--trim-wait", type=float, default=12.0,
                    help="with --pooled: seconds between the clients' close and the reading "
                         "(default 12: two of keepalive-proxy's 5 s trims)")
    ap.add_argument("--out", default=os.path.join(kb.BENCH_DIR, "results", "footprint.jsonl"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    if args.pooled and args.tls:
        ap.error("--pooled measures plain upstream connections: leave out --tls")
    args.external = kb.external_proxies(args)
    return args


# ---------------------------------------------------------------------------
# Binary sizes.

def size_sections(path):
    """text, data and bss as size(1) (Berkeley format) reports them."""
    out = subprocess.run(["size", path], capture_output=True, text=True)
    try:
        text, data, bss = (int(v) for v in out.stdout.splitlines()[1].split()[:3])
        return {"text": text, "data": data, "bss": bss}
    except (IndexError, ValueError):
        return {}


def shared_libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True)
    return [line.split()[0] for line in out.stdout.splitlines()
            if line.strip() and "vdso" not in line and "ld-linux" not in line]


def binary_rows(args, workdir):
    rows = []
    kp = kb.find_binary(args.build_dir, "keepalive-proxy")
    stripped = workdir.join("keepalive-proxy.stripped")
    shutil.copyfile(kp, stripped)
    subprocess.run(["strip", stripped], check=True)
    rows.append(dict(program="keepalive-proxy", path=kp, bytes=os.path.getsize(kp),
                     stripped_bytes=os.path.getsize(stripped), libs=shared_libraries(kp),
                     **size_sections(kp)))
    for name in kb.installed_proxies(None) + ["nginx"]:
        program = kb.PROXY_RECIPES[name][0] if name in kb.PROXY_RECIPES else "nginx"
        if program is None:
            continue
        path = shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin")
        if path:
            path = os.path.realpath(path)
            rows.append(dict(program=name, path=path, bytes=os.path.getsize(path),
                             libs=shared_libraries(path), **size_sections(path)))
    for row in rows:
        row["kib"] = row["bytes"] / KIB
        if "stripped_bytes" in row:
            row["stripped_kib"] = row["stripped_bytes"] / KIB
        row["nlibs"] = len(row["libs"])
    return rows


# ---------------------------------------------------------------------------
# Memory.

def memory(pids):
    m = kb.total_rss_kib(pids)
    return {"rss": m.get("rss"), "pss": m.get("pss"), "private": m.get("private")}


def total_fds(pids):
    return sum(kb.open_fds(p) for p in pids)


def settle_fds(pids, seconds=0.5):
    """The descriptor count once it has stopped changing."""
    last, stable_since = None, time.monotonic()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = total_fds(pids)
        if now != last:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= seconds:
            break
        time.sleep(0.1)
    return last


def wait_accepted(pids_of, base_fds, want, timeout):
    """Wait until the program holds want more descriptors than base_fds, or
    the count has not grown for 5 s. Returns how many more it holds."""
    deadline = time.monotonic() + timeout
    best, grew_at = 0, time.monotonic()
    while time.monotonic() < deadline:
        held = total_fds(pids_of()) - base_fds
        if held > best:
            best, grew_at = held, time.monotonic()
        if held >= want or time.monotonic() - grew_at > 5:
            break
        time.sleep(0.2)
    return max(0, total_fds(pids_of()) - base_fds)


class Holder:
    """The helper process holding the client connections."""

    def __init__(self, host, port, count, request=b"", tls=None, all_at_once=False):
        argv = [sys.executable, "-c", HOLDER, host, str(port), str(count), request.hex(),
                json.dumps({"tls": tls, "all_at_once": all_at_once})]
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, start_new_session=True)
        self.pid = self.popen.pid

    def opened(self, timeout):
        """(connections opened, status line of the last answer, first error)."""
        line = self._line(timeout)
        if not line.startswith("OPENED "):
            return 0, "", f"helper said {line!r}"
        count, _, rest = line[len("OPENED "):].partition(" ")
        status, _, error = rest.partition("|")
        return int(count), status, error

    def alive(self):
        self.popen.stdin.write("check\n")
        self.popen.stdin.flush()
        line = self._line(60)
        return int(line.split()[1]) if line.startswith("ALIVE ") else None

    def _line(self, timeout):
        ready, _, _ = select.select([self.popen.stdout], [], [], timeout)
        return self.popen.stdout.readline().strip() if ready else ""

    def close(self):
        if self.popen.poll() is None:
            try:
                self.popen.stdin.close()
            except OSError:
                pass
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def measure_program(args, label, pids_of, host, port, request, tls=None):
    """Idle memory, memory holding args.connections silent clients, and
    memory after they are gone, of the processes pids_of() returns."""
    time.sleep(1.0)  # let start-up work (helpers, lazy allocations) finish
    pids = pids_of()
    row = {"label": label, "pids": pids}
    if not pids:
        row["note"] = "memory unknown: not started by this run"
    else:
        row["idle"] = memory(pids)
    base_fds = settle_fds(pids) if pids else 0

    holder = Holder(host, port, args.connections, request, tls,
                    all_at_once=bool(tls) and args.all_at_once)
    try:
        opened, status, error = holder.opened(args.accept_timeout + 60)
        row.update(opened=opened, answer=status or None)
        notes = [error] if error else []
        if pids:
            accepted = wait_accepted(pids_of, base_fds, opened, args.accept_timeout)
            time.sleep(args.settle)
            alive = holder.alive()
            row.update(accepted=accepted, alive=alive, loaded=memory(pids_of()))
            if alive is not None and alive < opened:
                notes.append(f"{opened - alive} of {opened} connections closed by the program")
            if accepted < opened:
                notes.append(f"only {accepted} more descriptors held")
            counted = min(accepted, alive if alive is not None else accepted)
            if counted > 0:
                for key in ("rss", "private", "pss"):
                    if row["loaded"].get(key) is not None and row["idle"].get(key) is not None:
                        row[f"{key}_per_conn_kib"] = (row["loaded"][key] - row["idle"][key]) / counted
                row["counted"] = counted
        row["note"] = "; ".join(notes) or row.get("note")
    finally:
        holder.close()
    if pids:
        settle_fds(pids_of(), seconds=1.0)
        time.sleep(max(0.0, args.settle - 1.0))
        row["after_close"] = memory(pids_of())
    return row


def read_stats(host, port):
    """keepalive-proxy's /stats page, as a dict; {} when it cannot be read."""
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"GET /stats HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return json.loads(data.split(b"\r\n\r\n", 1)[1])
    except (OSError, ValueError, IndexError):
        return {}


def measure_pooled(args, workdir, nginx):
    """keepalive-proxy, fresh; every client's request sent before any answer
    is read, so it pools about one upstream connection per request; the
    clients closed; memory once only the pool is left, per pooled one."""
    stats_port = kb.free_port()
    extra = ["--max-clients", str(args.connections + 5000), "--client-timeout", "3600",
             "-m", str(args.connections), "-M", str(args.connections), "-t", "3600",
             "--stats-listen", f"127.0.0.1:{stats_port}"] + args.kp_args.split()
    print("-- keepalive-proxy, pooled upstreams", file=sys.stderr, flush=True)
    proxy = kb.start_proxy("keepalive-proxy", workdir, build_dir=args.build_dir, extra_args=extra)
    row = {"label": "keepalive-proxy", "args": extra}
    try:
        time.sleep(1.0)
        row["idle"] = memory(proxy.pids())
        holder = Holder(proxy.host, proxy.port, args.connections, origin_request(nginx, True),
                        all_at_once=True)
        try:
            opened, status, error = holder.opened(args.accept_timeout + 60)
            row.update(opened=opened, answer=status or None, note=error or None)
            time.sleep(args.settle)
            row["loaded"] = memory(proxy.pids())
        finally:
            holder.close()
        settle_fds(proxy.pids(), seconds=1.0)
        time.sleep(args.trim_wait)
        stats = read_stats("127.0.0.1", stats_port)
        row["after_close"] = memory(proxy.pids())
        row.update(pooled=stats.get("idle_upstream_connections"),
                   clients_left=stats.get("clients"),
                   upstream_connects=stats.get("upstream_connects_total"))
        if not stats:
            row["note"] = "; ".join(filter(None, [row["note"], "no /stats answer"]))
        elif row["pooled"]:
            for key in ("rss", "private", "pss"):
                if row["after_close"].get(key) is not None and row["idle"].get(key) is not None:
                    row[f"{key}_per_pooled_kib"] = ((row["after_close"][key] - row["idle"][key])
                                                    / row["pooled"])
    finally:
        proxy.stop()
    return row


def flatten(row):
    """The nested memory dicts as table cells."""
    out = dict(row)
    for phase in ("idle", "loaded", "after_close"):
        for key, value in (row.get(phase) or {}).items():
            out[f"{phase}_{key}"] = value
    return out


def origin_request(nginx, through_proxy):
    target = nginx.url("small.html")
    host = target.split("/")[2]
    # Inside TLS (tunnelled or intercepted) requests are in origin form.
    line = target if through_proxy and nginx.scheme == "http" else "/small.html"
    return f"GET {line} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


MEMORY_COLUMNS = [
    ("program", "label", None),
    ("idle RSS KiB", "idle_rss", None),
    ("idle Pss", "idle_pss", None),
    ("idle private", "idle_private", None),
    ("held conns", "counted", None),
    ("RSS with conns", "loaded_rss", None),
    ("private with", "loaded_private", None),
    ("RSS KiB/conn", "rss_per_conn_kib", "{:.2f}"),
    ("private KiB/conn", "private_per_conn_kib", "{:.2f}"),
    ("RSS after close", "after_close_rss", None),
    ("note", "note", None),
]

POOLED_COLUMNS = [
    ("program", "label", None),
    ("idle RSS KiB", "idle_rss", None),
    ("clients", "opened", None),
    ("RSS with clients and pool", "loaded_rss", None),
    ("upstream connects", "upstream_connects", None),
    ("pooled", "pooled", None),
    ("RSS with pool only", "after_close_rss", None),
    ("private with pool", "after_close_private", None),
    ("RSS KiB/pooled", "rss_per_pooled_kib", "{:.2f}"),
    ("private KiB/pooled", "private_per_pooled_kib", "{:.2f}"),
    ("note", "note", None),
]

BINARY_COLUMNS = [
    ("program", "program", None),
    ("binary", "path", None),
    ("size KiB", "kib", "{:.1f}"),
    ("stripped KiB", "stripped_kib", "{:.1f}"),
    ("text", "text", None),
    ("data", "data", None),
    ("bss", "bss", None),
    ("shared libs", "nlibs", None),
]


def check_targets(binaries, rows, pooled, after_request):
    kp_bin = binaries[0]
    kp = next((r for r in rows if r["label"].startswith("keepalive-proxy")), None)
    ref = next((r for r in rows if r["label"].startswith("nginx")), None)
    lines = [("stripped binary <= 150 KiB", kp_bin["stripped_kib"], 150, "KiB")]
    if kp and kp.get("idle"):
        lines.append(("idle daemon <= 1.5 MiB RSS", kp["idle"]["rss"] / KIB, 1.5, "MiB"))
    if kp and kp.get("rss_per_conn_kib") is not None:
        state = "idle between requests" if after_request else "open, nothing sent yet"
        lines.append((f"<= 1 KiB RSS per idle client connection ({state})",
                      kp["rss_per_conn_kib"], 1, "KiB"))
    if pooled and pooled.get("rss_per_pooled_kib") is not None:
        lines.append(("<= 1 KiB RSS per idle pooled plain upstream connection",
                      pooled["rss_per_pooled_kib"], 1, "KiB"))
    print("\nkeepalive-proxy targets:")
    for what, value, limit, unit in lines:
        print(f"  {what}: {value:.2f} {unit} -> {'met' if value <= limit else 'MISSED'}")
    if ref and ref.get("rss_per_conn_kib") is not None:
        print(f"  (nginx, for reference: {ref['rss_per_conn_kib']:.2f} KiB RSS per idle "
              f"connection)")


def main():
    args = parse_args()
    kb.require_root()
    kb.exit_on_sigterm()
    kb.raise_fd_limit()
    results = kb.Results(args.out, "footprint")
    workdir = kb.Workdir(prefix="kpbench-footprint-", keep=args.keep)
    nginx = None
    rows = []
    try:
        binaries = binary_rows(args, workdir)
        for b in binaries:
            results.write(dict(b, kind="binary"))

        common = {"build_dir": os.path.abspath(args.build_dir),
                  "connections_asked": args.connections,
                  "after_request": args.after_request, "tls": args.tls,
                  "all_at_once": args.all_at_once}
        # The floor: a process that only sleeps.
        sleeper = kb.Process("sleep", ["/bin/sleep", "600"])
        try:
            time.sleep(0.5)
            rows.append({"label": "/bin/sleep (floor)", "idle": memory([sleeper.pid]),
                         "note": "shared glibc pages make up most of its RSS"})
        finally:
            sleeper.stop()

        # nginx serves the --after-request requests and is the reference row.
        pki = (kb.TestPKI(workdir, ["127.0.0.1"], kb.find_binary(args.build_dir, "keepalive-proxy"))
               if args.tls else None)
        nginx = kb.Nginx(workdir, access_log=False, files={"small.html": 600},
                         worker_connections=args.connections + 1024, keepalive_timeout="3600s",
                         tls=pki)
        nginx.start()

        def tls_for(through_proxy):
            if not pki:
                return None
            return {"authority": f"127.0.0.1:{nginx.port}" if through_proxy else "",
                    "cafile": pki.bundle, "sni": "127.0.0.1"}

        kp_extra = ["--max-clients", str(args.connections + 5000), "--client-timeout", "3600"]
        if pki:
            # Every upstream connection a client's request opened stays pooled.
            kp_extra += pki.intercept_args(["127.0.0.1"]) + [
                "--connect-ports", str(nginx.port), "-m", str(args.connections),
                "-M", str(args.connections), "-t", "3600"]
        kp_extra += args.kp_args.split()
        for name in kb.chosen_proxies(args):
            print(f"-- {name}", file=sys.stderr, flush=True)
            extra = kp_extra if name == "keepalive-proxy" else []
            proxy = kb.start_proxy(name, workdir, build_dir=args.build_dir, extra_args=extra)
            try:
                request = origin_request(nginx, True) if args.after_request else b""
                row = measure_program(args, name, proxy.pids, proxy.host, proxy.port, request,
                                      tls_for(True))
                row["args"] = extra
                if row.get("accepted", 0) < row.get("opened", 0):
                    # Say why, when the program said so (keepalive-proxy sizes its
                    # client cap to the open-file limit and logs the result).
                    said = [line.split(": ", 1)[-1] for line in
                            proxy.process.log_tail(50).splitlines() if "limit" in line]
                    if said:
                        row["note"] = f"{row['note']}: {said[-1].strip()}"
            finally:
                proxy.stop()
            rows.append(row)

        for address, cmd in args.external:
            proxy = kb.external_proxy(address, cmd, workdir=workdir)
            print(f"-- {proxy.name}", file=sys.stderr, flush=True)
            try:
                request = origin_request(nginx, True) if args.after_request else b""
                rows.append(measure_program(args, proxy.name, proxy.pids, proxy.host,
                                            proxy.port, request, tls_for(True)))
            finally:
                proxy.stop()

        if not args.no_nginx:
            # A fresh one: the origin above has served the proxies and grown.
            print("-- nginx", file=sys.stderr, flush=True)
            reference = kb.Nginx(workdir, access_log=False, files={"small.html": 600},
                                 worker_connections=args.connections + 1024,
                                 keepalive_timeout="3600s", tls=pki).start()
            try:
                request = origin_request(reference, False) if args.after_request else b""
                rows.append(measure_program(
                    args, "nginx (reference, 1 worker)",
                    lambda: kb.session_pids(reference.proc.pid),
                    reference.listen, reference.port, request, tls_for(False)))
            finally:
                reference.stop()

        pooled = None
        if args.pooled and "keepalive-proxy" in kb.chosen_proxies(args):
            pooled = measure_pooled(args, workdir, nginx)

        for row in rows:
            results.write(dict(common, kind="memory", **row))
        if pooled:
            results.write(dict(common, kind="pooled", **pooled))

        kb.print_table("binaries (installed ones are already stripped; text/data/bss from "
                       "size(1), bytes)", BINARY_COLUMNS, binaries)
        state = ("idle after one request each" if args.after_request
                 else "open, nothing sent")
        if args.tls:
            state += (", over TLS (keepalive-proxy intercepting"
                      + (", one pooled upstream TLS connection each)" if args.all_at_once
                         else ")"))
        kb.print_table(f"memory, KiB: fresh and idle, then holding {args.connections} client "
                       f"connections ({state}), then after they closed; private = "
                       f"Private_Clean + Private_Dirty; per conn = (with - idle) / held",
                       MEMORY_COLUMNS, [flatten(r) for r in rows])
        if pooled:
            title = (f"memory, KiB: keepalive-proxy, fresh and idle, then {args.connections} "
                     f"clients' requests sent all at once (nearly one upstream connection "
                     f"opened for each, pooled once answered), then the clients closed and "
                     f"{args.trim_wait:g} s waited; per pooled = (with pool only - idle) / "
                     f"pooled, as /stats counts them")
            kb.print_table(title, POOLED_COLUMNS, [flatten(pooled)])
        if not args.tls:
            # The targets are the plain daemon's; a TLS run measures something else.
            check_targets(binaries, rows, pooled, args.after_request)
        if args.out:
            print(f"results appended to {args.out}")
    finally:
        if nginx:
            nginx.stop()
        workdir.cleanup()


if __name__ == "__main__":
    main()
