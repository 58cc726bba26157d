#!/usr/bin/python3
"""Bulk throughput: one large file from nginx through each proxy on loopback.

curl downloads the file (default 1 GiB) to /dev/null: directly (the
ceiling), through each proxy as a plain forwarded GET (curl -x) and through a
CONNECT tunnel to the same http URL (curl -p -x). Over HTTPS (an nginx with a
certificate from a CA the run makes): through a tunnel (https-tunnel), and
through keepalive-proxy intercepting the host (https-intercept), where the
proxy decrypts and re-encrypts every byte. Each path runs --runs times;
the table shows the median and every run. Besides curl's own speed, the
proxy's CPU time (utime + stime of its processes, read from /proc before and
after each download) is divided by the gibibytes moved.

The file is written once and read once before any download, so every run
reads it from the page cache and nginx sends it with sendfile(2).

Run as root: python3 bench/bulk.py [--size 1G] [--runs 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpbench as kb  # noqa: E402

GIB = 1 << 30
MODES = ("plain", "connect", "https-tunnel", "https-intercept")
HTTPS_MODES = ("https-tunnel", "https-intercept")


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    suffix = t[-1] if t and t[-1] in units else ""
    try:
        return int(float(t[:len(t) - len(suffix)]) * units[suffix])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1G, 512M)")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=parse_size, default=GIB,
                    help="file size, e.g. 1G, 256M (default 1G)")
    ap.add_argument("--runs", type=int, default=3, help="downloads per path (default 3)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help=f"comma-separated, from {', '.join(MODES)} (default: all)")
    ap.add_argument("--build-dir", default=os.path.join(kb.REPO_ROOT, "build"))
    kb.add_proxy_arguments(ap)
    ap.add_argument("--kp-args", default="", metavar="ARGS",
                    help="extra flags for keepalive-proxy")
    ap.add_argument("--max-wait-quiet", type=float, default=300.0, metavar="SECONDS",
                    help="before each download, wait up to this long for other processes on "
                         "the machine to go quiet (default 300; 0: do not wait)")
    ap.add_argument("--noisy", type=float, default=0.10, metavar="SHARE",
                    help="download again when other processes used more than this share of a "
                         "core during a run (default 0.10)")
    ap.add_argument("--noisy-retries", type=int, default=3,
                    help="at most this many repeats of a noisy run (default 3)")
    ap.add_argument("--out", default=os.path.join(kb.BENCH_DIR, "results", "bulk.jsonl"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in args.modes) or args.runs < 1:
        ap.error(f"--modes takes {', '.join(MODES)}; --runs at least 1")
    args.external = kb.external_proxies(args)
    return args


def read_through(path):
    """Read the file once so the runs find it in the page cache."""
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 22):
            pass


def curl_env():
    # A proxy from the environment would send the direct runs elsewhere.
    return {k: v for k, v in os.environ.items()
            if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}


def download(url, proxy_address=None, tunnel=False, cacert=None):
    """One curl download to /dev/null: (bytes, bytes/s, HTTP status)."""
    argv = ["curl", "-sS", "-o", "/dev/null", "--max-time", "900",
            "-w", "%{size_download} %{speed_download} %{http_code}"]
    if cacert:
        argv += ["--cacert", cacert]
    if proxy_address:
        argv += ["-x", f"http://{proxy_address}"]
        if tunnel:
            argv.append("-p")
    argv.append(url)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=curl_env())
    out, err = proc.communicate()
    # communicate() has reaped curl; its CPU time is in our children's total.
    size, speed, status = out.decode().split()
    if proc.returncode != 0:
        kb.die(f"curl failed ({proc.returncode}): {' '.join(argv)}\n{err.decode()}")
    return int(size), float(speed), int(status)


def children_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_path(args, nginx, proxy=None, tunnel=False, cacert=None):
    """--runs downloads along one path; one dict per run. A run that other
    processes disturbed is done again (the machine is shared)."""
    runs = []
    for _ in range(args.runs):
        run, _attempts = kb.least_disturbed(
            lambda: download_once(args, nginx, proxy, tunnel, cacert),
            args.noisy, args.noisy_retries)
        runs.append(run)
    return runs


def download_once(args, nginx, proxy, tunnel, cacert=None):
    """One download with the CPU time of the proxy, nginx and curl, and the
    other processes' load, read around it."""
    pids = proxy.pids() if proxy else []
    origin_pids = kb.session_pids(nginx.proc.pid)
    kb.wait_quiet(args.max_wait_quiet)
    cpu_before = kb.total_cpu_seconds(pids)
    origin_before = kb.total_cpu_seconds(origin_pids)
    curl_before = children_cpu()
    foreign = kb.ForeignLoad()
    start = time.monotonic()
    size, speed, status = download(nginx.url("bulk.bin"), proxy.address if proxy else None,
                                   tunnel, cacert)
    wall = time.monotonic() - start
    foreign_share = foreign.share()
    curl_cpu = children_cpu() - curl_before
    origin_cpu = kb.total_cpu_seconds(origin_pids) - origin_before
    if status != 200 or size != args.size:
        kb.die(f"download went wrong: HTTP {status}, {size} of {args.size} bytes "
               f"({'via ' + proxy.name if proxy else 'direct'})")
    run = {"bytes": size, "mbps": speed / 1e6, "wall_s": wall,
           "curl_cpu_s_per_gib": curl_cpu / (size / GIB),
           "nginx_cpu_s_per_gib": origin_cpu / (size / GIB), "foreign_cpu_share": foreign_share}
    if pids:
        run["proxy_cpu_s_per_gib"] = (kb.total_cpu_seconds(pids) - cpu_before) / (size / GIB)
    return run


def summarise(label, mode, runs, direct_mbps):
    median_mbps = statistics.median(r["mbps"] for r in runs)
    row = {"label": label, "mode": mode, "runs": runs, "mbps": median_mbps,
           "mbps_all": " ".join(f"{r['mbps']:.0f}" for r in runs),
           "ratio": median_mbps / direct_mbps if direct_mbps else None,
           "curl_cpu_s_per_gib": statistics.median(r["curl_cpu_s_per_gib"] for r in runs),
           "nginx_cpu_s_per_gib": statistics.median(r["nginx_cpu_s_per_gib"] for r in runs),
           "foreign_cpu_share": max(r["foreign_cpu_share"] for r in runs)}
    cpus = [r["proxy_cpu_s_per_gib"] for r in runs if "proxy_cpu_s_per_gib" in r]
    if cpus:
        row["cpu_s_per_gib"] = statistics.median(cpus)
        row["cpu_all"] = " ".join(f"{c:.2f}" for c in cpus)
    return row


COLUMNS = [
    ("mode", "mode", None),
    ("path", "label", None),
    ("MB/s median", "mbps", "{:.0f}"),
    ("ratio", "ratio", "{:.2f}"),
    ("MB/s runs", "mbps_all", None),
    ("proxy CPU s/GiB", "cpu_s_per_gib", "{:.3f}"),
    ("CPU s/GiB runs", "cpu_all", None),
    ("nginx CPU s/GiB", "nginx_cpu_s_per_gib", "{:.2f}"),
    ("curl CPU s/GiB", "curl_cpu_s_per_gib", "{:.2f}"),
    ("other CPU max", "foreign_cpu_share", "{:.0%}"),
]


def main():
    args = parse_args()
    kb.require_root()
    kb.exit_on_sigterm()
    kb.require_program("curl")
    kb.raise_fd_limit()
    results = kb.Results(args.out, "bulk")
    workdir = kb.Workdir(prefix="kpbench-bulk-", keep=args.keep)
    nginx = nginx_tls = None
    table = []
    try:
        nginx = kb.Nginx(workdir, access_log=False, files={"bulk.bin": args.size})
        read_through(os.path.join(nginx.root, "bulk.bin"))
        nginx.start()
        common = {"build_dir": os.path.abspath(args.build_dir), "size_bytes": args.size,
                  "runs_asked": args.runs}

        def record(row, extra):
            table.append(row)
            results.write(dict(common, **extra, **{k: v for k, v in row.items()
                                                 if k not in ("mbps_all", "cpu_all")}))

        print("-- direct", file=sys.stderr, flush=True)
        direct = summarise("direct (nginx)", "direct", run_path(args, nginx), None)
        direct["ratio"] = 1.0
        record(direct, {"proxy": None})

        pki = nginx_tls = None
        if any(m in HTTPS_MODES for m in args.modes):
            pki = kb.TestPKI(workdir, ["127.0.0.1"],
                             kb.find_binary(args.build_dir, "keepalive-proxy"))
            nginx_tls = kb.Nginx(workdir, access_log=False, tls=pki)
            os.link(os.path.join(nginx.root, "bulk.bin"), os.path.join(nginx_tls.root, "bulk.bin"))
            nginx_tls.start()
            print("-- direct https", file=sys.stderr, flush=True)
            record(summarise("direct (nginx)", "https", run_path(args, nginx_tls,
                                                                cacert=pki.origin_ca),
                             direct["mbps"]), {"proxy": None})

        def measure(proxy, label, mode, extra_record):
            print(f"-- {label} {mode}", file=sys.stderr, flush=True)
            if mode in HTTPS_MODES:
                # Clients trust the origin's CA and keepalive-proxy's: either may answer.
                runs = run_path(args, nginx_tls, proxy, tunnel=True, cacert=pki.bundle)
            else:
                runs = run_path(args, nginx, proxy, tunnel=(mode == "connect"))
            record(summarise(label, mode, runs, direct["mbps"]), extra_record)

        for name in kb.chosen_proxies(args):
            extra = args.kp_args.split() if name == "keepalive-proxy" else []
            if name == "keepalive-proxy" and "--connect-ports" not in extra:
                # The tunnel goes to nginx's port, not 443.
                extra += ["--connect-ports", "*"]
            # Interception is keepalive-proxy's alone, and a start of its own.
            groups = [(extra, [m for m in args.modes if m != "https-intercept"])]
            if name == "keepalive-proxy" and "https-intercept" in args.modes:
                groups.append((extra + pki.intercept_args(["127.0.0.1"]), ["https-intercept"]))
            for group_args, modes in groups:
                if not modes:
                    continue
                proxy = kb.start_proxy(name, workdir, build_dir=args.build_dir,
                                       extra_args=group_args)
                try:
                    for mode in modes:
                        measure(proxy, name, mode, {"proxy": name, "proxy_args": group_args})
                finally:
                    proxy.stop()

        for address, cmd in args.external:
            proxy = kb.external_proxy(address, cmd, workdir=workdir)
            try:
                for mode in args.modes:
                    if mode != "https-intercept":
                        measure(proxy, proxy.name, mode, {"proxy": address, "proxy_cmd": cmd})
            finally:
                proxy.stop()

        kb.print_table(
            f"bulk: {args.size / GIB:g} GiB from nginx (sendfile) to curl -o /dev/null on "
            f"loopback, {args.runs} runs per path; MB = 10^6 bytes; ratio = median MB/s / "
            f"direct median MB/s", COLUMNS, table)
        print("plain: curl -x PROXY URL; connect: curl -p -x PROXY URL (CONNECT tunnel); "
              "https: direct over TLS; https-tunnel: the same through a CONNECT tunnel; "
              "https-intercept: keepalive-proxy --intercept, which decrypts and "
              "re-encrypts;\n"
              "proxy, nginx CPU: utime+stime of their processes, medians;\n"
              "other CPU max: the largest share of one core that processes this run did not "
              "start, plus hypervisor steal, used during one of the runs")
        if args.out:
            print(f"results appended to {args.out}")
    finally:
        for server in (nginx, nginx_tls):
            if server:
                server.stop()
        workdir.cleanup()


if __name__ == "__main__":
    main()
