#!/usr/bin/python3
"""Memory over time: does keepalive-proxy's resident memory go back after a
burst and stay flat under steady load?

A private nginx serves a small page on loopback. keepalive-proxy is started
once and measured after each step: idle; then --passes runs of wrk -c200
through it, each followed by --rest seconds of quiet (RSS after the pass and
after the rest); then a burst of --burst idle clients that each send half a
request head (each holds an input buffer), RSS with them connected and
--rest seconds after they all left.

With --steady MINUTES the load is one wrk -c200 run for that long instead:
RSS every --every seconds, then 15 s after wrk stopped. Flat means RSS at the
last minute within 10% of RSS at minute 2 (the first minute is warm-up:
buffers, pipes and the upstream pool filling), and back to at most twice the
idle RSS 15 s after the load stopped; both are printed as met or missed.

Run as root (for the fd limit): python3 bench/soak.py [--passes 16] [--quick]
                                python3 bench/soak.py --steady 20
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpbench as kb  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=16, help="wrk passes (default 16)")
    ap.add_argument("--seconds", type=float, default=8.0, help="seconds per pass (default 8)")
    ap.add_argument("--rest", type=float, default=12.0,
                    help="quiet seconds after each step before RSS is read (default 12: the "
                    "proxy frees spares untouched for a whole 5 s period)")
    ap.add_argument("--connections", type=int, default=200, help="wrk -c (default 200)")
    ap.add_argument("--burst", type=int, default=9000, help="idle clients in the burst")
    ap.add_argument("--quick", action="store_true", help="3 passes of 3 s, a burst of 2000")
    ap.add_argument("--steady", type=float, metavar="MINUTES",
                    help="one wrk run this long instead of passes and the burst")
    ap.add_argument("--every", type=float, default=10.0,
                    help="with --steady: seconds between RSS readings (default 10)")
    ap.add_argument("--after", type=float, default=15.0,
                    help="with --steady: seconds after the load for the last reading")
    ap.add_argument("--build-dir", default=os.path.join(kb.REPO_ROOT, "build"))
    ap.add_argument("--kp-args", default="", help="extra arguments for keepalive-proxy")
    ap.add_argument("--out", default=os.path.join(kb.BENCH_DIR, "results", "soak.jsonl"))
    args = ap.parse_args()
    if args.quick:
        args.passes, args.seconds, args.burst = 3, 3.0, 2000
    return args


def burst(proxy, n):
    """n clients that each send half a head; returns them, still open."""
    socks = []
    for _ in range(n):
        s = socket.create_connection((proxy.host, proxy.port))
        s.sendall(b"GET http://127.0.0.1:1/ HTTP/1.1\r\nX-Partial: ")
        socks.append(s)
    return socks


def steady(args, proxy, target, row):
    """One long wrk run, RSS read as it goes; returns the verdict lines."""
    seconds = args.steady * 60
    argv = kb.wrk_argv(f"http://{proxy.address}/", target, args.connections, seconds,
                       None, latency=False)
    start = time.monotonic()
    wrk = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    readings = []   # (minutes since the load began, RSS KiB)
    try:
        next_at = start + args.every
        while wrk.poll() is None:
            time.sleep(max(0.0, min(next_at, start + seconds) - time.monotonic()))
            if wrk.poll() is not None:
                break
            minutes = (time.monotonic() - start) / 60
            readings.append((minutes, row(f"{minutes:5.2f} min under load")["rss_kib"]))
            next_at += args.every
    finally:
        if wrk.poll() is None:
            wrk.terminate()
        out = wrk.communicate()[0]
    requests = None
    for line in out.splitlines():
        if line.startswith("KPBENCH-RESULT "):
            requests = json.loads(line.split(" ", 1)[1]).get("requests")
    time.sleep(args.after)
    after = row(f"{args.after:g} s after the load stopped", requests)["rss_kib"]
    return readings, after


def verdict(args, idle, readings, after):
    """The two rules of a flat soak, as printable lines."""
    def at(minute):
        return min(readings, key=lambda r: abs(r[0] - minute))

    first_minute, first = at(2)
    last_minute, last = readings[-1]
    drift = (last - first) / first
    lines = [
        f"  RSS at {last_minute:.1f} min {last} KiB vs {first} KiB at {first_minute:.1f} min: "
        f"{drift:+.1%} (within 10%: {'met' if abs(drift) <= 0.10 else 'MISSED'})",
        f"  {args.after:g} s after the load: {after} KiB, {after / idle:.2f}x idle {idle} KiB "
        f"(at most 2x: {'met' if after <= 2 * idle else 'MISSED'})",
    ]
    return lines


def main():
    args = parse_args()
    kb.require_root()
    kb.require_program("wrk")
    kb.raise_fd_limit()
    results = kb.Results(args.out, "soak")
    workdir = kb.Workdir(prefix="kpbench-soak-")
    nginx = proxy = None
    rows = []
    try:
        nginx = kb.Nginx(workdir, access_log=False, worker_connections=4096)
        with open(os.path.join(nginx.root, "index.html"), "w") as f:
            f.write("x" * 600)
        nginx.start()
        proxy = kb.start_proxy("keepalive-proxy", workdir, build_dir=args.build_dir,
                               extra_args=args.kp_args.split())
        pid = proxy.pid
        target = nginx.url("index.html")

        def row(step, requests=None):
            mem = kb.rss_kib(pid)
            r = {"step": step, "rss_kib": mem.get("rss"), "private_kib": mem.get("private"),
                 "requests": requests}
            rows.append(r)
            results.write(dict(r, passes=args.passes, seconds=args.seconds,
                               connections=args.connections, burst=args.burst,
                               steady_minutes=args.steady))
            print(f"  {step}: {r['rss_kib']} KiB ({r['private_kib']} KiB private)", flush=True)
            return r

        time.sleep(1)
        idle = row("idle")["rss_kib"]
        if args.steady:
            readings, after = steady(args, proxy, target, row)
            verdict_lines = verdict(args, idle, readings, after)
        for n in range(1, 0 if args.steady else args.passes + 1):
            requests = kb.run_wrk(f"http://{proxy.address}/", target, args.connections,
                                  args.seconds)["requests"]
            row(f"pass {n}", requests)
            time.sleep(args.rest)
            row(f"pass {n} + {args.rest:g} s")
        if not args.steady:
            socks = burst(proxy, args.burst)
            time.sleep(1)
            row(f"{args.burst} idle clients")
            for s in socks:
                s.close()
            time.sleep(args.rest)
            row(f"{args.rest:g} s after they left")
    finally:
        if proxy:
            proxy.stop()
        if nginx:
            nginx.stop()
        workdir.cleanup()
    if args.steady:
        print(f"soak: keepalive-proxy RSS under wrk -c{args.connections} for "
              f"{args.steady:g} min, read every {args.every:g} s")
        print("\n".join(verdict_lines))
        return 0
    kb.print_table(
        f"soak: keepalive-proxy RSS; {args.passes} passes of wrk -c{args.connections} for "
        f"{args.seconds:g} s, each followed by {args.rest:g} s of quiet; then {args.burst} idle "
        f"clients holding half a head each",
        [("step", "step", None), ("RSS KiB", "rss_kib", None),
         ("private KiB", "private_kib", None), ("requests", "requests", None)],
        rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
