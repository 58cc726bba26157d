#!/usr/bin/env python3
"""Real downloaders over bench/wan.py's emulated path: yt-dlp (Debian's and
the newest from PyPI) and ffmpeg, directly and through keepalive-proxy,
keepalive-proxy --read-ahead and squid.

    sudo bench/clients.py --build-dir build

The testbed is wan.py's own (two network namespaces, kp-delayline between
them, a private nginx as the origin), by default at 50 ms and 500 Mbit/s
with CUBIC and slow start after idle, as origins usually run. The origin
serves an HLS stream that ffmpeg encodes at setup, a real MPEG-TS cut into
segments of about --segment-size bytes, and a file of --file-size
pseudo-random bytes. Each client runs as a program in the client namespace;
its wall time is the number, and what it wrote is checked byte for byte.
Tables go to stdout, one JSON object per run to --out. See bench/README.md.
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, BENCH_DIR)

import kpbench  # noqa: E402  (found through the path set just above)
import wan  # noqa: E402

CLIENTS = ("yt-dlp-debian", "yt-dlp-pypi", "ffmpeg")
FRAME_RATE = 30


def parse_args():
    p = argparse.ArgumentParser(
        description="Real clients (yt-dlp, ffmpeg) over the WAN benchmark's emulated path.",
        formatter_class=wan.HelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(kpbench.REPO_ROOT, "build"),
                   help="CMake build directory with keepalive-proxy and bench/kp-delayline")
    p.add_argument("--rtt-ms", default="50", help="round-trip times, comma-separated")
    p.add_argument("--rate-mbit", type=float, default=500, help="bottleneck rate")
    p.add_argument("--queue-bytes", type=int,
                   help="bottleneck queue (default: one bandwidth-delay product, >= 64 KiB)")
    p.add_argument("--cc", default="cubic", help="TCP congestion control in both namespaces")
    p.add_argument("--slow-start-after-idle", type=int, choices=(0, 1), default=1,
                   help="net.ipv4.tcp_slow_start_after_idle in both namespaces")
    p.add_argument("--delayline-fifo", type=int, default=10,
                   help="SCHED_FIFO priority of the emulator, 0 for ordinary scheduling")
    p.add_argument("--segments", type=int, default=32, help="HLS segments")
    p.add_argument("--segment-seconds", type=int, default=2, help="HLS segment duration")
    p.add_argument("--segment-size", type=int, default=2 << 20,
                   help="bytes a segment should have; sets the stream's bit rate")
    p.add_argument("--file-size", type=int, default=64 << 20,
                   help="the file yt-dlp fetches in chunks")
    p.add_argument("--http-chunk-size", default="2M", help="yt-dlp's --http-chunk-size")
    p.add_argument("--clients", default=",".join(CLIENTS),
                   help="clients to run, comma-separated, from " + ",".join(CLIENTS))
    p.add_argument("--proxies", default="keepalive-proxy,squid",
                   help="built-in proxies, comma-separated, from " + ",".join(kpbench.PROXY_RECIPES)
                   + "; one not installed is skipped")
    p.add_argument("--kp-row", action="append", metavar="ARGS",
                   help="another keepalive-proxy row with these extra arguments (repeatable; "
                   "default: one with --read-ahead; --kp-row= for none)")
    p.add_argument("--kp-args", default="", help="extra arguments for every keepalive-proxy row")
    p.add_argument("--proxy", action="append", default=[], metavar="HOST:PORT",
                   help="another proxy, reachable from the client namespace (repeatable)")
    p.add_argument("--proxy-cmd", action="append", default=[], metavar="CMD",
                   help="shell command starting the --proxy of the same position inside the "
                   "client namespace, once per measured run (repeatable)")
    p.add_argument("--cache-dir", default=os.path.join(BENCH_DIR, "results", "clients-cache"),
                   help="where the virtual environment with yt-dlp from PyPI is kept")
    p.add_argument("--pypi-spec", default="yt-dlp",
                   help="what pip installs there; \"yt-dlp[default]\" adds requests and so "
                   "connection reuse")
    p.add_argument("--timeout", type=float, default=600, help="seconds one client run may take")
    p.add_argument("--out", default=os.path.join(BENCH_DIR, "results", "clients.jsonl"),
                   help="JSON-lines file the runs are appended to ('' for none)")
    p.add_argument("--max-late", type=float, default=1.0,
                   help="run again when the emulator wrote more than this percentage of its "
                   "packets over 1 ms late")
    p.add_argument("--retries", type=int, default=2, help="how often, at most, for that reason")
    p.add_argument("--quiet-cores", type=float, default=0.3,
                   help="before each run, wait until at most this many cores are busy")
    p.add_argument("--quiet-timeout", type=float, default=120,
                   help="wait at most this long for an idle machine, seconds (0: do not wait)")
    p.add_argument("--keep-workdir", action="store_true", help="keep configs, logs and outputs")
    args = p.parse_args()
    try:
        args.rtts = [float(x) for x in args.rtt_ms.split(",") if x.strip()]
    except ValueError:
        p.error(f"--rtt-ms wants numbers: {args.rtt_ms!r}")
    if not args.rtts or min(args.rtts) <= 0 or args.rate_mbit <= 0:
        p.error("--rtt-ms and --rate-mbit must be positive")
    if len(args.proxy_cmd) > len(args.proxy):
        p.error("each --proxy-cmd needs a --proxy HOST:PORT to go with it")
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in args.clients if c not in CLIENTS]
    if unknown:
        p.error(f"unknown clients {unknown}; known: {', '.join(CLIENTS)}")
    wanted = [x.strip() for x in args.proxies.split(",") if x.strip()]
    unknown = [x for x in wanted if x not in kpbench.PROXY_RECIPES]
    if unknown:
        p.error(f"unknown proxies {unknown}; known: {', '.join(kpbench.PROXY_RECIPES)}")
    args.builtin = kpbench.installed_proxies(wanted)
    for name in wanted:
        if name not in args.builtin:
            print(f"clients: {name} is not installed (Debian: apt-get install "
                  f"{kpbench.PROXY_RECIPES[name][1]}); its rows are skipped", file=sys.stderr)
    args.kp_row = [x for x in (args.kp_row if args.kp_row is not None else ["--read-ahead"])
                   if x.strip()]
    # What wan.Testbed and wan.verify read besides the above.
    args.scenarios = []
    return args


def run(argv, timeout=None):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def sha256_of(paths):
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def client_env():
    """The environment without proxy variables: a row's proxy is the one on
    its command line, or none."""
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


# ---------------------------------------------------------------------------
# The clients.

def pypi_ytdlp(args):
    """yt-dlp from PyPI in a virtual environment of its own, installed anew
    at the newest release on every run. None, with the reason told, when the
    environment cannot be made or PyPI cannot be reached."""
    venv = os.path.join(args.cache_dir, "yt-dlp-venv")
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        os.makedirs(args.cache_dir, exist_ok=True)
        made = run([sys.executable, "-m", "venv", venv], timeout=300)
        if made.returncode:
            print(f"clients: no virtual environment for yt-dlp from PyPI (Debian: apt-get "
                  f"install python3-venv): {made.stdout.strip()[-300:]}", file=sys.stderr)
            return None
    print(f"installing {args.pypi_spec} from PyPI into {venv} ...", flush=True)
    # --force-reinstall: an upgrade that cannot reach the index keeps what
    # is installed and succeeds, which would hide an old yt-dlp.
    try:
        pip = run([python, "-m", "pip", "install", "--upgrade", "--force-reinstall", "--quiet",
                   "--disable-pip-version-check", "--timeout", "30", "--retries", "2",
                   args.pypi_spec], timeout=600)
    except subprocess.TimeoutExpired:
        pip = None
    if pip is None or pip.returncode:
        why = pip.stdout.strip().splitlines()[-1] if pip and pip.stdout.strip() else "timed out"
        print(f"clients: PyPI is unreachable or pip failed ({why}); running the Debian yt-dlp "
              f"only", file=sys.stderr)
        return None
    return os.path.join(venv, "bin", "yt-dlp")


class Case:
    """One client doing one download; argv(url, proxy URL or None, output file)."""

    def __init__(self, name, client, program, argv, what, reference):
        self.name = name
        self.client = client      # CLIENTS entry
        self.program = program    # what --version is asked of
        self.argv = argv
        self.what = what          # "hls" or "file": which limit L applies
        self.reference = reference   # sha256 the output must have; None: the direct run's


def ytdlp_argv(program, chunk_size=None):
    def argv(url, proxy, out):
        a = [program, "--no-config", "--no-cache-dir", "--no-part", "--no-progress",
             "--no-playlist", "--downloader", "native", "--fixup", "never",
             "--proxy", proxy or "", "-o", out]
        if chunk_size:
            a += ["--http-chunk-size", chunk_size]
        return a + [url]
    return argv


def ffmpeg_argv(program, multiple):
    def argv(url, proxy, out):
        a = [program, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
             "-http_multiple", str(multiple)]
        if proxy:
            a += ["-http_proxy", proxy]
        return a + ["-i", url, "-map", "0", "-c", "copy", "-f", "mpegts", out]
    return argv


def make_cases(args, hls_sha, file_sha):
    cases = []
    programs = []
    if "yt-dlp-debian" in args.clients:
        debian = shutil.which("yt-dlp", path="/usr/bin:/bin")
        if debian:
            programs.append(("yt-dlp (Debian)", "yt-dlp-debian", debian))
        else:
            print("clients: Debian's yt-dlp is not installed (apt-get install yt-dlp); "
                  "skipped", file=sys.stderr)
    if "yt-dlp-pypi" in args.clients:
        pypi = pypi_ytdlp(args)
        if pypi:
            programs.append(("yt-dlp (PyPI)", "yt-dlp-pypi", pypi))
    for label, client, program in programs:
        cases.append(Case(f"{label} hls", client, program, ytdlp_argv(program), "hls", hls_sha))
        cases.append(Case(f"{label} file --http-chunk-size {args.http_chunk_size}", client,
                          program, ytdlp_argv(program, args.http_chunk_size), "file",
                          file_sha))
    if "ffmpeg" in args.clients:
        program = kpbench.require_program("ffmpeg")
        for multiple in (0, 1):
            cases.append(Case(f"ffmpeg -http_multiple {multiple} hls", "ffmpeg", program,
                              ffmpeg_argv(program, multiple), "hls", None))
    return cases


def version_of(program):
    """The first line a program prints for its version, and how long that
    took: a floor under every run's time that no proxy changes."""
    ffmpeg = os.path.basename(program) == "ffmpeg"
    started = time.monotonic()
    out = run([program, "-version" if ffmpeg else "--version"], timeout=60)
    seconds = time.monotonic() - started
    first = out.stdout.strip().splitlines()[0] if out.stdout.strip() else "?"
    # ffmpeg's line goes on with its copyright.
    return (" ".join(first.split()[:3]) if ffmpeg else first), seconds


# ---------------------------------------------------------------------------
# The data.

def make_stream(directory, args):
    """A real MPEG-TS for the HLS cases: ffmpeg's test pattern in H.264 at a
    constant rate (x264 pads with filler) that makes a segment about
    --segment-size bytes, a key frame at every segment start, cut by
    ffmpeg's own HLS muxer into a VOD playlist. Returns the segment files in
    playlist order."""
    seconds = args.segment_seconds
    # MPEG-TS costs about 4% on top of the video.
    bitrate = int(args.segment_size * 8 / seconds / 1.04)
    gop = FRAME_RATE * seconds
    os.makedirs(directory, mode=0o755)
    playlist = os.path.join(directory, os.path.basename(wan.HLS_PLAYLIST))
    argv = [kpbench.require_program("ffmpeg"), "-nostdin", "-hide_banner", "-loglevel", "error",
            "-f", "lavfi", "-i", f"testsrc2=size=1280x720:rate={FRAME_RATE}",
            "-t", str(args.segments * seconds),
            "-c:v", "libx264", "-preset", "ultrafast", "-b:v", str(bitrate),
            "-minrate", str(bitrate), "-maxrate", str(bitrate), "-bufsize", str(bitrate),
            "-x264-params", "nal-hrd=cbr:force-cfr=1",
            "-g", str(gop), "-keyint_min", str(gop), "-sc_threshold", "0",
            "-f", "hls", "-hls_time", str(seconds), "-hls_playlist_type", "vod",
            "-hls_segment_filename", os.path.join(directory, "seg%05d.ts"), playlist]
    started = time.monotonic()
    made = run(argv, timeout=1800)
    if made.returncode:
        raise RuntimeError(f"ffmpeg could not make the test stream:\n{made.stdout}")
    with open(playlist) as f:
        names = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    paths = [os.path.join(directory, n) for n in names]
    for path in [playlist] + paths:
        os.chmod(path, 0o644)
    sizes = [os.path.getsize(p) for p in paths]
    print(f"test stream: {len(paths)} segments of {seconds} s, {min(sizes)} to {max(sizes)} B "
          f"(mean {sum(sizes) / len(sizes):.0f}), made in {time.monotonic() - started:.0f} s",
          flush=True)
    return paths


# ---------------------------------------------------------------------------
# Measuring.

class Runner:
    def __init__(self, args, results, workdir, rows):
        self.args = args
        self.results = results
        self.workdir = workdir
        self.rows = rows
        self.count = 0

    def measure(self, bed, case, row, url):
        """One client run through one row, again if the emulator fell behind."""
        args = self.args
        discarded = []
        for attempt in range(args.retries + 1):
            waited, load_before = wan.wait_quiet(args)
            self.count += 1
            out = self.workdir.join(f"out-{self.count}")
            log = self.workdir.join(f"client-{self.count}.log")
            proxy = row.start(bed, args, self.workdir)
            try:
                argv = case.argv(url, f"http://{proxy.address}" if proxy else None, out)
                mark = bed.origin.log_mark()
                before = bed.delayline.snapshot()
                load = kpbench.MachineLoad()
                started = time.monotonic()
                with open(log, "w") as f:
                    try:
                        done = subprocess.run(kpbench.netns_argv(bed.ns_cli, argv), stdout=f,
                                              stderr=subprocess.STDOUT, env=client_env(),
                                              timeout=args.timeout, start_new_session=True)
                        status = done.returncode
                    except subprocess.TimeoutExpired:
                        status = "timeout"
                seconds = time.monotonic() - started
                busy, stolen = load.cores()
                after = bed.delayline.snapshot()
            finally:
                if proxy:
                    proxy.stop()
            dl = wan.delayline_delta(before, after)
            share = wan.late_share(dl)
            if share is None or share <= args.max_late / 100 or attempt >= args.retries:
                break
            discarded.append(round(share, 4))
            print(f"  {case.name}, {row.label}: the emulator wrote {share:.1%} of the packets "
                  f"more than 1 ms late ({busy:.2f} cores busy); running again", flush=True)
            if os.path.exists(out):
                os.unlink(out)
        lines = bed.origin.log_lines_since(mark)
        exists = os.path.exists(out)
        size = os.path.getsize(out) if exists else None
        digest = sha256_of([out]) if exists else None
        if exists and not args.keep_workdir:
            os.unlink(out)
        with open(log, errors="replace") as f:
            tail = f.read()[-600:]
        return {
            "argv": " ".join(shlex.quote(a) for a in argv), "status": status,
            "seconds": seconds, "bytes": size, "sha256": digest,
            "origin_connections": len({line.split()[0] for line in lines if line.strip()}),
            "origin_requests": len([line for line in lines if line.strip()]),
            "busy_cores": round(busy, 2), "stolen_cores": round(stolen, 3),
            "waited_for_idle_s": round(waited, 1), "busy_cores_before": load_before,
            "discarded_late_shares": discarded, "emulator_late_share": share,
            "delayline_delta": dl, "output_tail": tail if status else None,
        }

    def case(self, bed, case, urls, limits, versions):
        url = urls[case.what]
        table = []
        reference = case.reference
        direct = None
        for row in self.rows:
            r = self.measure(bed, case, row, url)
            if row.kind == "direct":
                direct = r["seconds"] if r["status"] == 0 else None
                if reference is None:
                    reference = r["sha256"] if r["status"] == 0 else None
            exact = r["status"] == 0 and r["sha256"] is not None and r["sha256"] == reference
            version, startup = versions[case.program]
            values = dict(r, client=case.name, program=case.program, version=version,
                          startup_s=startup, proxy=row.label, rtt_ms=bed.rtt_ms,
                          rate_mbit=bed.rate_mbit, limit_s=limits[case.what],
                          over_limit=r["seconds"] / limits[case.what],
                          ratio=r["seconds"] / direct if direct and r["status"] == 0 else None,
                          exact="yes" if exact else "NO", reference_sha256=reference,
                          testbed=bed.info, verification=bed.verification)
            self.results.write(values)
            table.append(values)
            note = "" if exact else (f"  (exit {r['status']}, output differs)" if r["status"] == 0
                                     else f"  (exit {r['status']}): {r['output_tail']}")
            print(f"  {case.name}, {row.label}: {r['seconds']:.2f} s{note}", flush=True)
        return table


def print_tables(bed, tables, limits, rows):
    columns = [("client", "client", None), ("row", "proxy", None),
               ("seconds", "seconds", "{:.2f}"), ("/direct", "ratio", "{:.2f}x"),
               ("/L", "over_limit", "{:.2f}"), ("start-up s", "startup_s", "{:.2f}"),
               ("origin conns", "origin_connections", None),
               ("origin reqs", "origin_requests", None), ("bytes", "bytes", None),
               ("exact", "exact", None), ("cpu busy", "busy_cores", "{:.2f}"),
               ("late>1ms", "emulator_late_share", "{:.2%}")]
    kpbench.print_table(
        f"clients, RTT {bed.rtt_ms:g} ms, {bed.rate_mbit:g} Mbit/s: seconds = the client's wall "
        f"time, start-up included; /direct = seconds / the direct row's; "
        f"L(hls) = {limits['hls']:.3f} s, L(file) = {limits['file']:.3f} s "
        f"(segments or chunks x (size/rate + RTT))",
        columns, [r for table in tables for r in table])
    summary = []
    for table in tables:
        line = {"client": table[0]["client"]}
        for r in table:
            line[r["proxy"]] = (f"{r['seconds']:.2f}" + (f" ({r['ratio']:.2f}x)" if r["ratio"]
                                                        and r["proxy"] != "direct" else ""))
        summary.append(line)
    kpbench.print_table(f"summary, RTT {bed.rtt_ms:g} ms: seconds (proxied / direct)",
                        [("client", "client", None)] + [(r.label, r.label, None) for r in rows],
                        summary)


def main():
    args = parse_args()
    kpbench.require_root()
    kpbench.require_program("nginx", "nginx-light")
    kpbench.require_program("ip", "iproute2")
    kpbench.require_program("ffmpeg")
    delayline_bin = kpbench.find_binary(args.build_dir, "kp-delayline")
    kpbench.find_binary(args.build_dir, "keepalive-proxy")
    if not os.path.exists("/dev/net/tun"):
        kpbench.die("/dev/net/tun is missing (modprobe tun)")
    kpbench.raise_fd_limit()
    signal.signal(signal.SIGTERM, wan.on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    results = kpbench.Results(args.out or None, "clients")
    workdir = kpbench.Workdir(prefix="kpclients-", keep=args.keep_workdir)
    rows = wan.make_rows(args)
    print(f"clients bench: RTT {args.rtt_ms} ms, {args.rate_mbit:g} Mbit/s, {args.cc}, "
          f"slow start after idle {args.slow_start_after_idle}; rows: "
          f"{', '.join(r.label for r in rows)}")
    print(f"command: {results.common['command']}", flush=True)
    started = time.monotonic()
    bed = None
    allowed_before = None
    try:
        if args.cc:
            allowed_before = wan.allow_congestion_control(args.cc)
        data_dir = workdir.join("data")
        os.makedirs(data_dir)
        os.chmod(data_dir, 0o755)
        segments = make_stream(os.path.join(data_dir, os.path.dirname(wan.HLS_PLAYLIST)), args)
        kpbench.write_file(os.path.join(data_dir, wan.FILE), args.file_size)
        long_size = int(args.rate_mbit * 1e6 / 8 * 5)
        kpbench.write_file(os.path.join(data_dir, wan.LONG_FILE), long_size)
        hls_bytes = sum(os.path.getsize(p) for p in segments)
        cases = make_cases(args, sha256_of(segments),
                           sha256_of([os.path.join(data_dir, wan.FILE)]))
        if not cases:
            raise RuntimeError("no client to run")
        chunk = parse_size(args.http_chunk_size)
        chunks = -(-args.file_size // chunk)
        versions = {}
        for index, rtt_ms in enumerate(args.rtts):
            bed = wan.Testbed(args, rtt_ms, workdir, index, args.rate_mbit, scenarios=[])
            bed.setup(data_dir, delayline_bin)
            bed.verification = wan.verify(bed, args, long_size)
            for case in cases:
                if case.program not in versions:
                    versions[case.program] = version_of(case.program)
            rtt, rate = rtt_ms / 1e3, args.rate_mbit * 1e6
            limits = {"hls": len(segments) * rtt + hls_bytes * 8 / rate,
                      "file": chunks * rtt + args.file_size * 8 / rate}
            urls = {"hls": bed.origin.url(wan.HLS_PLAYLIST), "file": bed.origin.url(wan.FILE)}
            runner = Runner(args, results, workdir, rows)
            tables = []
            for case in cases:
                print(f"\n--- {case.name} ({versions[case.program][0]}), RTT {rtt_ms:g} ms ---",
                      flush=True)
                tables.append(runner.case(bed, case, urls, limits, versions))
            print_tables(bed, tables, limits, rows)
            bed.teardown()
            bed = None
    except KeyboardInterrupt:
        print("\ninterrupted; cleaning up", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"\nclients: {e}", file=sys.stderr)
        return 1
    finally:
        if bed:
            bed.teardown()
        if allowed_before is not None:
            wan.write_sysctl(wan.ALLOWED_CC, allowed_before)
            print(f"restored {wan.ALLOWED_CC} = {allowed_before}")
        workdir.cleanup()
    print(f"\nwall time {time.monotonic() - started:.0f} s"
          + (f"; runs appended to {args.out}" if args.out else ""))
    return 0


def parse_size(text):
    """yt-dlp's sizes: a number with an optional K, M or G (powers of 1024)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)i?B?", text.strip(), re.IGNORECASE)
    if not m:
        raise RuntimeError(f"--http-chunk-size: cannot read {text!r}")
    return int(float(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " "))


if __name__ == "__main__":
    sys.exit(main())
