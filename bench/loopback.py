#!/usr/bin/python3
"""Overhead of a forward proxy on loopback: small requests, many at once.

An nginx on 127.0.0.1 serves a ~600-byte index.html. wrk (one thread) drives
it with 100 and then 1000 keep-alive connections: first directly (the
ceiling), then through each proxy with absolute-form requests
(bench/absolute.lua). Every row reports requests/s, its ratio to the direct
row of the same run and concurrency, latency percentiles, wrk's socket errors
and non-2xx answers, the proxy's CPU time per request and how many TCP
connections the origin accepted (nginx's stub_status counters, free per
request, unlike an access log), which shows how well a proxy pools.

keepalive-proxy is measured twice: with its default idle-pool caps (-m 8 per
host, -M 256 in all), which are smaller than the number of exchanges in
flight, and with both caps raised to the concurrency. With --old-build-dir
each keepalive-proxy row runs with the old binary and with the new, both up
at once and their runs taking turns, so that a change can be checked for
cost in one run.

Run as root: python3 bench/loopback.py [--duration 10] [--quick]
"""

import argparse
import collections
import os
import shlex
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpbench as kb  # noqa: E402

INDEX_SIZE = 600


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0,
                    help="seconds per measured wrk run (10-30 sensible; default 10)")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="unmeasured wrk run before each row, seconds (default 2)")
    ap.add_argument("--quick", action="store_true",
                    help="3 s runs with a 1 s warm-up (wrk counts whole seconds), for a "
                         "smoke test")
    ap.add_argument("--connections", default="100,1000",
                    help="wrk -c values, comma-separated (default 100,1000)")
    ap.add_argument("--wrk-timeout", type=float, default=10.0,
                    help="wrk --timeout: slower answers count as timeouts and leave the "
                         "latency histogram (default 10 s)")
    ap.add_argument("--nginx-workers", type=int, default=1,
                    help="nginx worker_processes (default 1: wrk, proxy and nginx share "
                         "two cores)")
    ap.add_argument("--build-dir", default=os.path.join(kb.REPO_ROOT, "build"))
    ap.add_argument("--old-build-dir", metavar="DIR", help=kb.OLD_BUILD_HELP)
    kb.add_proxy_arguments(ap)
    ap.add_argument("--kp-args", action="append", default=None, metavar="ARGS",
                    help="measure keepalive-proxy with these extra flags only, instead "
                         "of the default and raised-cap rows; repeatable, a row each "
                         "('' for none), so that a flag can be compared with its absence "
                         "in one run")
    ap.add_argument("--max-wait-quiet", type=float, default=300.0, metavar="SECONDS",
                    help="before each row, wait up to this long for other processes on the "
                         "machine to go quiet (default 300; 0: do not wait)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measured runs per row; the row shows the run with the median "
                         "req/s (default 1)")
    ap.add_argument("--noisy", type=float, default=0.10, metavar="SHARE",
                    help="measure a row again when other processes used more than this share "
                         "of a core during it (default 0.10)")
    ap.add_argument("--noisy-retries", type=int, default=3,
                    help="at most this many repeats of a noisy row (default 3)")
    ap.add_argument("--profile", metavar="DIR",
                    help="afterwards, profile each keepalive-proxy row at the first "
                         "concurrency under the same load: perf record (report in "
                         "DIR/perf-*.txt) and strace -c (syscalls per request)")
    ap.add_argument("--profile-seconds", type=float, default=5.0,
                    help="perf sampling time; strace gets 3 s (default 5)")
    ap.add_argument("--out", default=os.path.join(kb.BENCH_DIR, "results", "loopback.jsonl"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.warmup = 3.0, 1.0
    args.connections = [int(c) for c in args.connections.split(",") if c]
    args.external = kb.external_proxies(args)
    return args


def index_html():
    """An HTML page of INDEX_SIZE bytes."""
    head = "<!DOCTYPE html>\n<html><head><title>kpbench</title></head><body>\n"
    tail = "</body></html>\n"
    filler = ("<p>keepalive-proxy loopback benchmark page.</p>\n" * 20)
    return (head + filler)[:INDEX_SIZE - len(tail)] + tail


def proxy_rows(args, connections):
    """(label, recipe name, extra flags) for every proxy this run measures at
    the given concurrency."""
    rows = []
    for name in kb.chosen_proxies(args):
        if name != "keepalive-proxy":
            rows.append((name, name, []))
        elif args.kp_args is not None:
            rows += [(f"keepalive-proxy {text}".strip(), name, shlex.split(text))
                     for text in args.kp_args]
        else:
            rows.append(("keepalive-proxy (default caps)", name, []))
            caps = str(connections)
            rows.append((f"keepalive-proxy -m {caps} -M {caps}", name, ["-m", caps, "-M", caps]))
    return rows


# One proxy row: its recipe (None for a --proxy) and flags, the build
# directory of a keepalive-proxy, which binary that is ("old", "new" or
# None) and a proxy already running (a --proxy).
Entry = collections.namedtuple("Entry", "label name extra build_dir binary running")


def proxy_turns(args, connections, external=()):
    """proxy_rows() and the running --proxy ones as groups of rows measured
    together, their runs taking turns: a keepalive-proxy row's old and new
    binary with --old-build-dir, every other row alone."""
    turns = []
    for label, name, extra in proxy_rows(args, connections):
        binaries = kb.old_and_new(args) if name == "keepalive-proxy" else [(None, None)]
        turns.append([Entry(f"{label} ({which})" if which else label, name, extra, build,
                            which, None) for which, build in binaries])
    return turns + [[Entry(p.name, None, [], None, None, p)] for p in external]


def measure(args, nginx, workdir, connections, proxies=(None,)):
    """--repeat quiet runs through each of proxies (None: direct), the
    proxies taking turns (first, second, first, second, ...); per proxy the
    run with the median req/s, with every run's req/s beside it."""
    runs = [[] for _ in proxies]
    for _ in range(max(1, args.repeat)):
        for mine, proxy in zip(runs, proxies):
            mine.append(measure_quiet(args, nginx, workdir, connections, proxy))
    rows = []
    for mine in runs:
        ranked = sorted(mine, key=lambda r: r["rps"])
        row = ranked[(len(ranked) - 1) // 2]
        row["rps_runs"] = [r["rps"] for r in mine]
        row["rps_all"] = " ".join(f"{r['rps']:.0f}" for r in mine)
        rows.append(row)
    return rows


def measure_quiet(args, nginx, workdir, connections, proxy=None):
    """measure_once(), again while other processes disturbed it; the
    quietest attempt is kept."""
    row, attempts = kb.least_disturbed(
        lambda: measure_once(args, nginx, workdir, connections, proxy),
        args.noisy, args.noisy_retries)
    row["attempts"] = attempts
    return row


def measure_once(args, nginx, workdir, connections, proxy=None):
    """Warm up, then one measured wrk run with the origin's counters and the
    proxy's CPU time read around it."""
    target = nginx.url("index.html")
    connect_url, target_arg = (f"http://{proxy.address}/", target) if proxy else (target, None)
    log = workdir.join("wrk.log")
    if args.warmup > 0:
        kb.run_wrk(connect_url, target_arg, connections, args.warmup, args.wrk_timeout, log)
    pids = proxy.pids() if proxy else []
    kb.wait_quiet(args.max_wait_quiet)
    before = nginx.counters()
    cpu_before = kb.total_cpu_seconds(pids)
    foreign = kb.ForeignLoad()
    result = kb.run_wrk(connect_url, target_arg, connections, args.duration, args.wrk_timeout,
                        log)
    foreign_share = foreign.share()
    cpu = kb.total_cpu_seconds(pids) - cpu_before if pids else None
    origin = kb.Nginx.counters_delta(before, nginx.counters())

    seconds = result["duration_us"] / 1e6
    requests = result["requests"]
    errors = result["errors"]
    pct = result["latency_us"]["percentiles"]
    row = {
        "connections": connections,
        "requests": requests,
        "rps": requests / seconds if seconds else 0.0,
        "p50_ms": pct["50"] / 1000.0,
        "p90_ms": pct["90"] / 1000.0,
        "p99_ms": pct["99"] / 1000.0,
        "p999_ms": pct["99.9"] / 1000.0,
        "mean_ms": result["latency_us"]["mean"] / 1000.0,
        "errors": {k: errors[k] for k in ("connect", "read", "write", "timeout")},
        "socket_errors": sum(errors[k] for k in ("connect", "read", "write", "timeout")),
        "non_2xx": errors["status"],
        "origin_connections": origin["accepts"],
        "origin_requests": origin["requests"],
        "duration_s": seconds,
        "foreign_cpu_share": foreign_share,
    }
    row["errors_text"] = "/".join(str(errors[k]) for k in ("connect", "read", "write", "timeout"))
    if cpu is not None and requests:
        row["proxy_cpu_s"] = cpu
        row["proxy_cpu_us_per_req"] = cpu / requests * 1e6
        row["proxy_cpu_util"] = cpu / seconds
        rss = kb.total_rss_kib(pids)
        if rss:
            row["proxy_rss_kib_after"] = rss.get("rss")
    return row


def background_wrk(proxy, nginx, connections, seconds, timeout):
    argv = kb.wrk_argv(f"http://{proxy.address}/", nginx.url("index.html"), connections,
                       seconds, timeout)
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def perf_profile(args, proxy, nginx, connections, prefix):
    """perf record of the proxy under load; the flat report goes to a file and
    its top lines to stdout."""
    data = f"{prefix}.data"
    wrk = background_wrk(proxy, nginx, connections, args.profile_seconds + 4, args.wrk_timeout)
    try:
        time.sleep(2)
        subprocess.run(["perf", "record", "-g", "-F", "2000", "-o", data, "-p", str(proxy.pid),
                        "--", "sleep", str(args.profile_seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        wrk.wait()
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio"],
                            capture_output=True, text=True).stdout
    flat = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "-g", "none",
                           "--percent-limit", "0.7"], capture_output=True, text=True).stdout
    with open(f"{prefix}.txt", "w") as f:
        f.write(report)
    with open(f"{prefix}-flat.txt", "w") as f:
        f.write(flat)
    print(f"\nperf, {proxy.name} ({args.profile_seconds:g} s at -c{connections}); "
          f"full report: {prefix}.txt")
    print("\n".join([line for line in flat.splitlines()
                     if line.strip() and not line.startswith("#")][:30]))


def strace_profile(args, proxy, nginx, connections, prefix):
    """System calls per request: strace -c for 3 s under load, divided by the
    requests the origin saw meanwhile. strace slows the proxy down a lot; the
    counts per request are what matter, not the rate."""
    out = f"{prefix}.txt"
    wrk = background_wrk(proxy, nginx, connections, 8, args.wrk_timeout)
    try:
        time.sleep(2)
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(proxy.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached
        before = nginx.counters()
        time.sleep(3)
        origin = kb.Nginx.counters_delta(before, nginx.counters())
        tracer.send_signal(signal.SIGINT)
        tracer.wait()
    finally:
        wrk.wait()
    rows = []
    with open(out) as f:
        for line in f:
            fields = line.split()
            # % time, seconds, usecs/call, calls, [errors], syscall
            if len(fields) >= 5 and fields[0][0].isdigit() and fields[3].isdigit():
                rows.append({"syscall": fields[-1], "calls": int(fields[3]),
                             "errors": int(fields[4]) if len(fields) == 6 else 0})
    requests = max(1, origin["requests"])
    for r in rows:
        r["per_request"] = r["calls"] / requests
    total = next((r for r in rows if r["syscall"] == "total"), None)
    print(f"\nstrace -c, {proxy.name}, 3 s at -c{connections}: {origin['requests']} requests "
          f"reached the origin, {origin['accepts']} new origin connections; file: {out}")
    kb.print_table(None, [("syscall", "syscall", None), ("calls", "calls", None),
                          ("errors", "errors", None), ("per request", "per_request", "{:.2f}")],
                   [r for r in rows if r is not total] + ([total] if total else []))


def profile(args, nginx, workdir):
    connections = args.connections[0]
    out_dir = os.path.abspath(args.profile)
    os.makedirs(out_dir, exist_ok=True)
    kp_rows = [e for turn in proxy_turns(args, connections) for e in turn
               if e.name == "keepalive-proxy"]
    for n, e in enumerate(kp_rows):
        proxy = kb.start_proxy(e.name, workdir, build_dir=e.build_dir, extra_args=e.extra)
        proxy.name = e.label
        try:
            kb.wait_quiet(args.max_wait_quiet)
            perf_profile(args, proxy, nginx, connections, os.path.join(out_dir, f"perf-{n}"))
            strace_profile(args, proxy, nginx, connections, os.path.join(out_dir, f"strace-{n}"))
        finally:
            proxy.stop()


COLUMNS = [
    ("conns", "connections", None),
    ("path", "label", None),
    ("req/s", "rps", "{:.0f}"),
    ("ratio", "ratio", "{:.2f}"),
    ("req/s runs", "rps_all", None),
    ("p50 ms", "p50_ms", "{:.2f}"),
    ("p99 ms", "p99_ms", "{:.2f}"),
    ("sock err c/r/w/t", "errors_text", None),
    ("non-2xx", "non_2xx", None),
    ("origin conns", "origin_connections", None),
    ("proxy CPU us/req", "proxy_cpu_us_per_req", "{:.1f}"),
    ("proxy CPU", "proxy_cpu_util", "{:.0%}"),
    ("other CPU", "foreign_cpu_share", "{:.0%}"),
]


def main():
    args = parse_args()
    kb.require_root()
    kb.exit_on_sigterm()
    kb.require_program("wrk")
    kb.raise_fd_limit()
    results = kb.Results(args.out, "loopback")
    workdir = kb.Workdir(prefix="kpbench-loopback-", keep=args.keep)
    nginx = None
    external = []
    table = []
    try:
        nginx = kb.Nginx(workdir, workers=args.nginx_workers, access_log=False,
                         worker_connections=max(4096, 2 * max(args.connections) + 256))
        with open(os.path.join(nginx.root, "index.html"), "w") as f:
            f.write(index_html())
        nginx.start()
        for address, cmd in args.external:
            external.append(kb.external_proxy(address, cmd, workdir=workdir))
        common = {"build_dir": os.path.abspath(args.build_dir),
                  "old_build_dir": args.old_build_dir and os.path.abspath(args.old_build_dir),
                  "duration_s_asked": args.duration, "warmup_s": args.warmup,
                  "repeat": args.repeat, "nginx_workers": args.nginx_workers, "wrk_threads": 1,
                  "body_bytes": INDEX_SIZE}

        for connections in args.connections:
            print(f"-- {connections} connections: direct", file=sys.stderr, flush=True)
            direct = measure(args, nginx, workdir, connections)[0]
            direct.update(label="direct (nginx)", proxy=None, ratio=1.0)
            table.append(direct)
            results.write(dict(common, **direct))

            for turn in proxy_turns(args, connections, external):
                print(f"-- {connections} connections: {', '.join(e.label for e in turn)}",
                      file=sys.stderr, flush=True)
                proxies = []
                try:
                    for e in turn:
                        proxies.append(e.running or kb.start_proxy(
                            e.name, workdir, build_dir=e.build_dir, extra_args=e.extra))
                    rows = measure(args, nginx, workdir, connections, proxies)
                finally:
                    for e, proxy in zip(turn, proxies):
                        if e.running is None:
                            proxy.stop()
                for row, proxy, e in zip(rows, proxies, turn):
                    row.update(label=e.label, proxy=e.name or proxy.address, proxy_args=e.extra,
                               ratio=row["rps"] / direct["rps"] if direct["rps"] else None)
                    if e.name == "keepalive-proxy":
                        row.update(binary=e.binary, binary_build_dir=os.path.abspath(e.build_dir),
                                   binary_commit=kb.build_commit(e.build_dir))
                    table.append(row)
                    results.write(dict(common, **row))

        columns = COLUMNS if args.repeat > 1 else [c for c in COLUMNS if c[1] != "rps_all"]
        kb.print_table(
            f"loopback: GET of a {INDEX_SIZE}-byte file, wrk -t1, {args.duration:g} s per run; "
            f"nginx worker_processes {args.nginx_workers}; ratio = req/s / direct req/s "
            f"at the same concurrency"
            + (f"; {args.repeat} runs per row, the median shown" if args.repeat > 1 else ""),
            columns, table)
        print("sock err c/r/w/t: wrk's connect/read/write/timeout errors; origin conns: TCP "
              "connections nginx accepted during the measured run\n"
              "(read errors about as many as origin connections: the proxy closed the client "
              "connection after each response and wrk reconnected);\n"
              "proxy CPU / other CPU: share of one core used by the proxy / by processes "
              "this run did not start plus hypervisor steal, during the measured run")
        if args.out:
            print(f"results appended to {args.out}")
        if args.profile:
            profile(args, nginx, workdir)
    finally:
        for p in external:
            p.stop()
        if nginx:
            nginx.stop()
        workdir.cleanup()


if __name__ == "__main__":
    main()
