#!/usr/bin/env python3
"""The WAN benchmark: a segment downloader over an emulated long, fast path,
directly and through keepalive-proxy and the other proxies installed.

    sudo bench/wan.py --build-dir build          everything, about 15 minutes
    sudo bench/wan.py --build-dir build --quick  fewer chunks, keepalive-proxy only, a few minutes

Each round-trip time gets a fresh testbed: two network namespaces joined by
kp-delayline (bench/delayline.c), the WAN emulator, which gives the path its
delay, bottleneck rate and drop-tail queue. The client side ("cli") holds the
downloader and the proxies, which talk over its loopback; the origin side
("org") holds a private nginx. Every chunk is a Range request on a new client
connection, the way segment downloaders work, or in the hls scenario a
playlist's segment fetched with a plain GET, the way HLS players do; the
question is how close each proxy gets to what the path allows. The client
scenarios (throttled, lossy, resets, hls-ytdlp) run real downloaders
instead (curl, wget, ffmpeg, yt-dlp, headless Chromium: bench/wan_clients.py)
against the bench's own origin (bench/wan_origin.py), which can throttle
answers or cut them with a reset, and check every byte they wrote. The
parent scenario reaches the origin through a parent proxy (microsocks,
dante, squid) beside the origin or beside the client, each chunk fetched
by a curl of its own. Other scripts (bench/clients.py) import the testbed
from here.

Tables go to stdout, one JSON object per row to --out. See bench/README.md.
"""

import argparse
import hashlib
import glob
import json
import math
import os
import pwd
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

BENCH_DIR = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, BENCH_DIR)

import kpbench  # noqa: E402  (found through the path set just above)
import wan_clients  # noqa: E402
import wan_origin  # noqa: E402

DOWNLOADER = os.path.join(BENCH_DIR, "wan_download.py")
INITCWND_SCRIPT = os.path.join(kpbench.REPO_ROOT, "contrib", "loopback-initcwnd.sh")
CLI_ADDR = "10.77.0.1"
ORG_ADDR = "10.77.0.2"
FILE = "file.bin"
LONG_FILE = "long.bin"
LONGFAT_FILE = "longfat.bin"
SHARE_FILE = "share.bin"   # the share scenario's file, --share-size bytes
MTU = 1500
# IPv4 and TCP headers with the timestamp option: a full segment carries
# 1448 payload bytes in 1500 on the wire.
HEADER_BYTES = 52
SCENARIOS = ("back-to-back", "hls", "paced", "early-close", "parallel", "overlap", "long-fat",
             "https", "throttled", "lossy", "resets", "hls-ytdlp", "parent", "share")
# Real clients against the bench's own origin: run only when named, since
# they need more installed and take long (a throttled direct download of
# 32 MiB alone is half a minute per client).
CLIENT_SCENARIOS = ("throttled", "lossy", "resets", "hls-ytdlp")
# Scenarios that run only when named: the client scenarios, parent,
# which needs the parent proxies' packages, and share, a baseline kept for
# a feature to come rather than a number the proxy is held to today.
NAMED_ONLY = CLIENT_SCENARIOS + ("parent", "share")
# Scenarios with a testbed of their own (their RTT, rate and loss are theirs).
OWN_BED = ("overlap", "long-fat", "lossy")
ORIGIN_PROGRAM = os.path.join(BENCH_DIR, "wan_origin.py")
# The client scenarios' object on the bench's own origins, and the origin
# each scenario uses. Each origin has a fixed port in the origin's namespace,
# so that a --split pattern that names a port can be written down.
OBJECT = "object.bin"
SCENARIO_ORIGIN = {"throttled": "paced", "lossy": "plain", "resets": "reset", "parent": "paced"}
ORIGIN_PORTS = {"paced": 8001, "plain": 8002, "reset": 8003}
# The hls scenario's media playlist and its segments, under the origin's root.
HLS_PLAYLIST = "hls/index.m3u8"
# What an HLS origin says its files are (RFC 8216, 4): players and
# downloaders tell a playlist by its Content-Type.
HLS_TYPES = {"m3u8": "application/vnd.apple.mpegurl", "ts": "video/mp2t"}
# The playlist's nominal segment duration; a downloader does not wait for it.
HLS_SEGMENT_SECONDS = 2.0
# Buffers big enough for one bandwidth-delay product at 100 ms and 500 Mbit/s
# (6.25 MB) several times over; the kernel defaults stop at 4 and 6 MB.
TCP_MEM_MAX = 32 << 20
DOWNLOADERS = set()   # downloader processes not yet collected
# The parent scenario: the parent proxies it can start, where a parent may
# run, and its two parts.
PARENTS = ("microsocks", "dante", "squid")
PARENT_PLACES = ("origin", "client")
PARENT_PARTS = ("chunks", "throttled", "https")
# Program and Debian package of every daemon the parent scenario starts.
DAEMON_PROGRAMS = {"microsocks": ("microsocks", "microsocks"), "dante": ("danted", "dante-server"),
                   "squid": ("squid", "squid"), "privoxy": ("privoxy", "privoxy")}
# privoxy's forwarding to each SOCKS parent. forward-socks5t sends the
# request right behind the SOCKS connect request, before the reply (Tor's
# "optimistic data"); microsocks 1.0.3 drops what comes with its connect
# request, so each request through it hangs: plain forward-socks5 there.
PRIVOXY_SOCKS = {"microsocks": "forward-socks5", "dante": "forward-socks5t"}
# What curl tells of each chunk (-w): status, body bytes, seconds to the
# TCP connect (to the proxy where there is one), to the first byte, in all.
CURL_WRITE_OUT = "%{http_code} %{size_download} %{time_connect} %{time_starttransfer} " \
                 "%{time_total}\\n"
# The share scenario's two parts: several clients after the same file a
# moment apart, and a media player's probe (the first two bytes) and whole
# GET at once.
SHARE_PARTS = ("clients", "probe-and-play")
# The share scenario's squid: a forward proxy that caches, in memory only
# (no cache_dir), with room for the whole file, and squid's defaults
# otherwise: collapsed_forwarding off, so requests that arrive before the
# first answer's head each go to the origin, and range_offset_limit 0, so a
# Range request is passed on as it is and its 206 not stored. These lines
# replace start_squid's "cache deny all" and "cache_mem 0 MB". With no
# cache_dir, maximum_object_size (4 MB) does not keep squid 5 from storing
# a 32 MiB object in memory. A request that comes after the head, while
# the body is still arriving, squid 5.7 serves from that one fetch as it
# arrives, and logs it TCP_MISS with no server address ("-:-"); one after
# the fetch is complete, TCP_MEM_HIT, or TCP_REFRESH_UNMODIFIED (a 304
# from the origin) when its heuristic (no refresh_pattern: 20% of the
# time since Last-Modified) finds the copy stale.
SQUID_CACHE_LINES = ("cache_mem 256 MB", "maximum_object_size_in_memory 64 MB")


class HelpFormatter(argparse.HelpFormatter):
    """Shows a default only where there is one and the text does not say it."""

    def _get_help_string(self, action):
        text = action.help or ""
        unset = (None, [], "", False, argparse.SUPPRESS)
        if action.default not in unset and "default" not in text:
            text += " (default: %(default)s)"
        return text


def parse_args():
    p = argparse.ArgumentParser(
        description="WAN benchmark: chunked downloads over an emulated long, fast path.",
        formatter_class=HelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(kpbench.REPO_ROOT, "build"),
                   help="CMake build directory with keepalive-proxy and bench/kp-delayline")
    p.add_argument("--old-build-dir", metavar="DIR",
                   help=kpbench.OLD_BUILD_HELP + "; a row run once runs old, then new")
    p.add_argument("--scenario", action="append", choices=SCENARIOS,
                   help="run only this scenario (repeatable; default: all but "
                   + ", ".join(NAMED_ONLY) + ", which run when named)")
    p.add_argument("--rtt-ms", default="50,100", help="round-trip times, comma-separated")
    p.add_argument("--rate-mbit", type=float, default=500, help="bottleneck rate")
    p.add_argument("--queue-bytes", type=int,
                   help="bottleneck queue (default: one bandwidth-delay product, >= 64 KiB)")
    p.add_argument("--chunk-size", type=int, default=2 << 20, help="bytes per chunk")
    p.add_argument("--chunks", type=int, help="back-to-back chunks (default 64, quick 16)")
    p.add_argument("--paced-chunks", type=int, help="paced chunks (default 12, quick 4)")
    p.add_argument("--paced-interval", type=float, default=6.0, help="seconds, start to start")
    p.add_argument("--early-chunks", type=int, help="early-close chunks (default 20, quick 5)")
    p.add_argument("--early-interval", type=float, default=3.0, help="seconds, start to start")
    p.add_argument("--early-keepalive", type=float, default=2.0,
                   help="origin's keepalive_timeout in the early-close scenario, seconds")
    p.add_argument("--parallel-workers", type=int, default=4, help="downloaders at once")
    p.add_argument("--parallel-chunks", type=int,
                   help="parallel chunks per downloader (default 16, quick 4)")
    p.add_argument("--overlap-rtt-ms", type=float, default=250,
                   help="overlap: round-trip time of its own testbed")
    p.add_argument("--overlap-requests", type=int,
                   help="overlap: requests per round (default 24, quick 12)")
    p.add_argument("--overlap-rounds", type=int, help="overlap: rounds (default 3, quick 1)")
    p.add_argument("--overlap-interval", type=float, default=0.1,
                   help="overlap: seconds between request starts within a round")
    p.add_argument("--overlap-gap", type=float, default=12.0,
                   help="overlap: seconds from one round's start to the next; longer than a "
                   "round plus the origin's keepalive_timeout, so every round starts cold")
    p.add_argument("--overlap-size", type=int, default=256 << 10,
                   help="overlap: bytes per response")
    p.add_argument("--overlap-workers", type=int, default=4,
                   help="overlap, chained: downloaders at once (like yt-dlp -N 4)")
    p.add_argument("--overlap-chain", type=int, default=8,
                   help="overlap, chained: requests per downloader and round")
    p.add_argument("--longfat-rtt-ms", type=float, default=200,
                   help="long-fat: round-trip time of its own testbed")
    p.add_argument("--longfat-rate-mbit", type=float, default=1000,
                   help="long-fat: bottleneck rate (the highest the emulator sustains here)")
    p.add_argument("--longfat-size", type=int, help="long-fat: bytes downloaded (default "
                   "512 MiB, quick 128 MiB)")
    p.add_argument("--longfat-rcvbuf", type=int, default=64 << 20,
                   help="long-fat: the --upstream-rcvbuf the proxy gets in its own row")
    p.add_argument("--loss", type=float, default=0.0, metavar="PCT",
                   help="random packet loss in each direction, percent, on every testbed "
                   "but lossy's (which has --lossy-loss)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the emulator's loss generator and of the generated objects")
    p.add_argument("--object-size", type=size_arg, help="throttled, lossy, resets: the object "
                   "downloaded, bytes or with K, M, G (default 32M, quick 8M)")
    p.add_argument("--pace-rate", type=float, default=1e6,
                   help="throttled: bytes a second of the origin's paced answers")
    p.add_argument("--pace-free-max", type=size_arg, default=10 << 20,
                   help="throttled: the longest bounded range the origin sends at line rate")
    p.add_argument("--reset-bytes", type=size_arg, default=3 << 20,
                   help="resets: body bytes each answer gets before the origin's RST; "
                   "0 to use --reset-share instead")
    p.add_argument("--reset-share", type=float, default=0.5,
                   help="resets, with --reset-bytes 0: share of each answer sent before the RST")
    p.add_argument("--throttled-clients", default="curl,wget,ffmpeg,yt-dlp,chromium",
                   help="throttled: clients, comma-separated, from "
                   + ",".join(wan_clients.CLIENTS))
    p.add_argument("--lossy-clients", default="curl", help="lossy: clients, comma-separated")
    p.add_argument("--resets-clients", default="curl", help="resets: clients, comma-separated")
    p.add_argument("--lossy-rtt-ms", type=float, default=100,
                   help="lossy: round-trip time of its own testbed")
    p.add_argument("--lossy-loss", type=float, default=0.1, metavar="PCT",
                   help="lossy: random loss in each direction on its testbed, percent")
    p.add_argument("--lossy-repeats", type=int,
                   help="lossy: downloads per client and row (default 5, quick 2)")
    p.add_argument("--resets-downloads", type=int, default=3,
                   help="resets: downloads per client and row")
    p.add_argument("--ytdlp-spec", default=wan_clients.YTDLP_SPEC,
                   help="what pip installs for the yt-dlp client")
    p.add_argument("--venv-dir", default=os.path.join(BENCH_DIR, "results"),
                   help="where the yt-dlp virtual environment is made and kept")
    p.add_argument("--client-timeout", type=float, default=600,
                   help="seconds one client download may take")
    p.add_argument("--parent-place", default=",".join(PARENT_PLACES),
                   help="parent: where the parent proxy runs, comma-separated: origin (in the "
                   "origin's namespace, the client's hop to it crossing the path, as with "
                   "ssh -D to a far server) or client (in the client's namespace, the origin "
                   "across the path, as an office proxy)")
    p.add_argument("--parents", default=",".join(PARENTS),
                   help="parent: the parent proxies, comma-separated, from " + ",".join(PARENTS))
    p.add_argument("--parent-parts", default="chunks,throttled",
                   help="parent: what to measure, comma-separated: chunks (--chunks ranges of "
                   "--chunk-size, each by a curl of its own), throttled (the throttled "
                   "scenario's object, --split through the parent) and https (the chunks "
                   "over HTTPS, keepalive-proxy intercepting, with and without the parent; "
                   "not by default) (default: chunks,throttled)")
    p.add_argument("--parent-client", choices=("model", "curl"), default="model",
                   help="parent, chunks: the downloader of every row that speaks HTTP to "
                   "what it talks to (the model downloader, bench/wan_download.py, or a curl "
                   "per chunk, every range's bytes compared); rows straight through a SOCKS "
                   "parent always use curl")
    p.add_argument("--parent-squid-conf", action="append", default=[], metavar="LINE",
                   help="parent: a line added to the parent squid's configuration "
                   "(repeatable), e.g. --parent-squid-conf='pipeline_prefetch 4'")
    p.add_argument("--parent-repeats", type=int, default=1,
                   help="parent: runs of each chunks row, the rows taking turns; tables show "
                   "the median")
    p.add_argument("--share-clients", type=int, default=4,
                   help="share, clients: curls after the same file, each a plain GET")
    p.add_argument("--share-size", type=size_arg, default=32 << 20,
                   help="share: bytes of the file, or with K, M, G (default 32M)")
    p.add_argument("--share-gap", type=float, default=0.3,
                   help="share, clients: seconds from one client's start to the next's")
    p.add_argument("--share-parts", default=",".join(SHARE_PARTS),
                   help="share: what to measure, comma-separated: clients (--share-clients "
                   "curls, --share-gap apart) and probe-and-play (a curl asking for bytes 0-1 "
                   "and one asking for the whole file, at the same moment)")
    p.add_argument("--share-repeats", type=int, default=1,
                   help="share: runs of each row and part, the rows taking turns")
    p.add_argument("--proxies", help="built-in proxies to run, comma-separated, from "
                   + ",".join(kpbench.PROXY_RECIPES) + " (default: all installed; quick: "
                   "keepalive-proxy)")
    p.add_argument("--proxy", action="append", default=[], metavar="HOST:PORT",
                   help="another proxy, reachable from the client namespace (repeatable)")
    p.add_argument("--proxy-cmd", action="append", default=[], metavar="CMD",
                   help="shell command starting the --proxy of the same position inside the "
                   "client namespace, once per measured row (repeatable)")
    p.add_argument("--kp-args", default="", help="extra arguments for keepalive-proxy")
    p.add_argument("--kp-row", action="append", default=[], metavar="ARGS",
                   help="another keepalive-proxy row, started with these extra arguments and "
                   "labelled by them, next to the plain one, e.g. --kp-row=--read-ahead or "
                   "--kp-row='--split 10.77.0.2 --split-connections 4' (split as a shell "
                   "would; repeatable)")
    p.add_argument("--lo-initcwnd", type=int, default=100,
                   help="segments for the raised-loopback-window rows of back-to-back; 0: none")
    p.add_argument("--cc", help="TCP congestion control in both namespaces "
                   "(default: what new namespaces inherit from the host)")
    p.add_argument("--slow-start-after-idle", type=int, choices=(0, 1),
                   help="net.ipv4.tcp_slow_start_after_idle in both namespaces "
                   "(default: the kernel's, 1)")
    p.add_argument("--delayline-fifo", type=int, default=10,
                   help="SCHED_FIFO priority of the emulator, 0 for ordinary scheduling")
    p.add_argument("--out", default=os.path.join(BENCH_DIR, "results", "wan.jsonl"),
                   help="JSON-lines file the rows are appended to ('' for none)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="plot per-chunk times of the back-to-back run (at 50 ms if measured)")
    p.add_argument("--verify-only", action="store_true",
                   help="only set up each testbed and check the emulator (RTT and rate)")
    p.add_argument("--quick", action="store_true",
                   help="fewer chunks, only keepalive-proxy among the built-in proxies")
    p.add_argument("--keep-workdir", action="store_true", help="keep configs and logs")
    p.add_argument("--max-late", type=float, default=1.0,
                   help="measure a row again when the emulator wrote more than this percentage "
                   "of its packets over 1 ms late")
    p.add_argument("--retries", type=int, default=2,
                   help="how often a row is measured again for that reason")
    p.add_argument("--quiet-cores", type=float, default=0.3,
                   help="before each measurement, wait until at most this many cores are busy")
    p.add_argument("--quiet-timeout", type=float, default=120,
                   help="wait at most this long for an idle machine, seconds (0: do not wait)")
    args = p.parse_args()

    try:
        args.rtts = [float(x) for x in args.rtt_ms.split(",") if x.strip()]
    except ValueError:
        p.error(f"--rtt-ms wants numbers: {args.rtt_ms!r}")
    if not args.rtts or min(args.rtts) <= 0 or args.rate_mbit <= 0:
        p.error("--rtt-ms and --rate-mbit must be positive")
    if not (0 <= args.loss <= 100 and 0 <= args.lossy_loss <= 100):
        p.error("--loss and --lossy-loss are percentages, 0 to 100")
    if not 0 <= args.reset_share < 1:
        p.error("--reset-share must be at least 0 and below 1")
    for name in ("throttled_clients", "lossy_clients", "resets_clients"):
        wanted = [c.strip() for c in getattr(args, name).split(",") if c.strip()]
        unknown = [c for c in wanted if c not in wan_clients.CLIENTS]
        if unknown:
            p.error(f"unknown clients {unknown}; known: {', '.join(wan_clients.CLIENTS)}")
        setattr(args, name, wanted)
    for name, known in (("parent_place", PARENT_PLACES), ("parents", PARENTS),
                        ("parent_parts", PARENT_PARTS), ("share_parts", SHARE_PARTS)):
        wanted = [x.strip() for x in getattr(args, name).split(",") if x.strip()]
        unknown = [x for x in wanted if x not in known]
        if unknown or not wanted:
            p.error(f"--{name.replace('_', '-')} takes some of {', '.join(known)}")
        setattr(args, name, wanted)
    if args.parent_repeats < 1:
        p.error("--parent-repeats must be at least 1")
    if args.share_clients < 1 or args.share_repeats < 1:
        p.error("--share-clients and --share-repeats must be at least 1")
    if args.share_size < 2 or args.share_gap < 0:
        # The probe asks for bytes 0-1.
        p.error("--share-size must be at least 2 and --share-gap not negative")
    if len(args.proxy_cmd) > len(args.proxy):
        p.error("each --proxy-cmd needs a --proxy HOST:PORT to go with it")
    defaults = {"chunks": (64, 16), "paced_chunks": (12, 4), "early_chunks": (20, 5),
                "parallel_chunks": (16, 4), "overlap_requests": (24, 12),
                "overlap_rounds": (3, 1), "longfat_size": (512 << 20, 128 << 20),
                "object_size": (32 << 20, 8 << 20), "lossy_repeats": (5, 2)}
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    default = [s for s in SCENARIOS if s not in NAMED_ONLY]
    args.scenarios = [s for s in SCENARIOS if s in (args.scenario or default)]
    if args.verify_only:
        args.scenarios = []
    if args.proxies is not None:
        wanted = [x.strip() for x in args.proxies.split(",") if x.strip()]
        unknown = [x for x in wanted if x not in kpbench.PROXY_RECIPES]
        if unknown:
            p.error(f"unknown proxies {unknown}; known: {', '.join(kpbench.PROXY_RECIPES)}")
        args.builtin = kpbench.installed_proxies(wanted)
        for name in wanted:
            if name not in args.builtin:
                package = kpbench.PROXY_RECIPES[name][1]
                print(f"wan: {name} is not installed (Debian: apt-get install {package}); "
                      f"its row is skipped", file=sys.stderr)
    elif args.quick:
        args.builtin = ["keepalive-proxy"]
    else:
        args.builtin = kpbench.installed_proxies()
    return args


def size_arg(text):
    """A size in bytes: a number, or one with K, M or G (powers of 1024)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(float(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " "))


def run(argv, check=True, **kw):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout.strip()}")
    return done


def loadavg():
    """1, 5 and 15 minute load: other work on the machine skews every row."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def wait_quiet(args):
    """Waits until the machine has been nearly idle for a second: on two
    cores, someone else's benchmark changes every number. Where loopback and
    bulk count only other programs' CPU, this counts every busy core, this
    run's idle emulator and origin and the kernel's packet work included:
    whatever runs can delay the emulator's packets. The rows are bounded by
    the emulated path, not by CPU, so --quiet-cores (0.3) allows more than
    those benchmarks do. /proc/stat is cheap to read: half-second samples,
    two in a row, see that the whole second was calm. Returns the seconds
    waited and the load seen last."""
    return kpbench.wait_quiet(args.quiet_timeout, args.quiet_cores, meter=kpbench.MachineLoad,
                              sample=0.5, file=sys.stdout)


def ms(seconds):
    return None if seconds is None else seconds * 1e3


def median(values):
    return statistics.median(values) if values else None


# ---------------------------------------------------------------------------
# The emulator.

class Delayline:
    """kp-delayline as a child process; its stdout carries the counters."""

    def __init__(self, binary, workdir, tun_a, tun_b, rtt_ms, rate_mbit, queue_bytes, fifo,
                 loss_pct=0.0, seed=1):
        argv = [binary, "--tun-a", tun_a, "--tun-b", tun_b, "--rtt-ms", f"{rtt_ms:g}",
                "--rate-mbit", f"{rate_mbit:g}", "--mtu", str(MTU), "--txqueuelen", "10000"]
        if queue_bytes:
            argv += ["--queue-bytes", str(queue_bytes)]
        if loss_pct:
            argv += ["--loss", f"{loss_pct / 100:g}", "--seed", str(seed)]
        if fifo:
            argv += ["--fifo", str(fifo)]
        self.argv = argv
        self.log = workdir.join(f"delayline-{tun_a}.log")
        self.log_start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        self.proc = kpbench.Process("kp-delayline", argv, log_path=self.log)
        deadline = time.monotonic() + 10
        while "ready" not in self._lines():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("kp-delayline did not start:\n" + self.proc.log_tail())
            time.sleep(0.02)

    def _lines(self):
        with open(self.log, errors="replace") as f:
            f.seek(self.log_start)
            return f.read().splitlines()

    def _reports(self):
        """The reports written so far. A line can be read while the emulator
        is still writing it (a report longer than stdio's buffer goes out in
        pieces): such a line is left for the next read."""
        reports = []
        for line in self._lines():
            if line.startswith("{"):
                try:
                    reports.append(json.loads(line))
                except ValueError:
                    pass
        return reports

    def snapshot(self):
        """The counters now (SIGUSR1 makes it print them)."""
        before = len(self._reports())
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            reports = self._reports()
            if len(reports) > before:
                return reports[-1]
            time.sleep(0.01)
        return None

    def stop(self):
        self.proc.stop()
        reports = self._reports()
        return reports[-1] if reports and reports[-1].get("final") else None


def late_share(dl):
    """Share of the packets the emulator wrote more than 1 ms after their
    time: near 0 on a quiet machine; more means something else held the
    CPUs and the row measured that as well."""
    if not dl:
        return None
    packets = dl["a_to_b"]["packets"] + dl["b_to_a"]["packets"]
    late = dl["a_to_b"]["late_over_1ms"] + dl["b_to_a"]["late_over_1ms"]
    return late / packets if packets else 0.0


def add_deltas(a, b):
    if a is None or b is None:
        return b if a is None else a
    return {d: {k: a[d][k] + b[d][k] for k in a[d]} for d in a}


def delayline_delta(before, after):
    """What the emulator did between two snapshots, per direction."""
    if not before or not after:
        return None
    out = {}
    for d in ("a_to_b", "b_to_a"):
        out[d] = {k: after[d][k] - before[d][k]
                  for k in ("packets", "bytes", "drops", "lost", "ring_full", "write_errors",
                            "late_over_1ms")}
    return out


# ---------------------------------------------------------------------------
# The testbed: namespaces, emulator, origin.

class Testbed:
    def __init__(self, args, rtt_ms, workdir, index, rate_mbit=None, scenarios=None,
                 loss_pct=None):
        # Names unique to this run and testbed (at most 15 characters).
        tag = f"kpw{os.getpid()}{index}"
        self.args = args
        self.rtt_ms = rtt_ms
        self.rate_mbit = rate_mbit or args.rate_mbit
        # Loss in each direction, percent; bench/clients.py's args have none.
        self.loss_pct = loss_pct if loss_pct is not None else getattr(args, "loss", 0.0)
        self.scenarios = scenarios if scenarios is not None else args.scenarios
        self.workdir = workdir
        self.ns_cli, self.ns_org = tag + "c", tag + "o"
        self.tun_cli, self.tun_org = tag + "a", tag + "b"
        self.namespaces = []
        self.delayline = None
        self.origin = None
        self.origin_early = None
        self.lo_raised = False
        self.origin_tls = None   # nginx on HTTPS, port 443 (the https scenario)
        self.own_origins = {}    # bench/wan_origin.py by mode (the client scenarios)
        self.pki = None
        self.mem_max = TCP_MEM_MAX
        self.info = {}
        self.verification = None

    def ns(self, ns, *argv, check=True):
        return run(["ip", "netns", "exec", ns] + list(argv), check=check)

    def sysctl(self, ns, key, value=None):
        if value is None:
            return self.ns(ns, "sysctl", "-n", key).stdout.strip()
        self.ns(ns, "sysctl", "-qw", f"{key}={value}")
        return value

    def setup(self, data_dir, delayline_bin):
        for ns in (self.ns_cli, self.ns_org):
            run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
        self.delayline = Delayline(delayline_bin, self.workdir, self.tun_cli, self.tun_org,
                                   self.rtt_ms, self.rate_mbit, self.args.queue_bytes,
                                   self.args.delayline_fifo, self.loss_pct,
                                   getattr(self.args, "seed", 1))
        # What a new namespace starts with, before this run raises anything.
        self.kernel_defaults = {k: self.sysctl(self.ns_cli, k)
                                for k in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")}
        # Several bandwidth-delay products, whatever the path.
        bdp = self.rate_mbit * 1e6 / 8 * self.rtt_ms / 1e3
        self.mem_max = TCP_MEM_MAX
        while self.mem_max < 2 * bdp:
            self.mem_max *= 2
        sysctls = {
            "net.ipv4.tcp_rmem": f"4096 131072 {self.mem_max}",
            "net.ipv4.tcp_wmem": f"4096 16384 {self.mem_max}",
            # A new connection must not start from what an earlier run left
            # in the route metrics cache (ssthresh above all).
            "net.ipv4.tcp_no_metrics_save": "1",
        }
        if self.args.cc:
            sysctls["net.ipv4.tcp_congestion_control"] = self.args.cc
        if self.args.slow_start_after_idle is not None:
            sysctls["net.ipv4.tcp_slow_start_after_idle"] = str(self.args.slow_start_after_idle)
        for ns, tun, local, peer in ((self.ns_cli, self.tun_cli, CLI_ADDR, ORG_ADDR),
                                     (self.ns_org, self.tun_org, ORG_ADDR, CLI_ADDR)):
            # The fd kp-delayline holds keeps working after the move.
            run(["ip", "link", "set", tun, "netns", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            for key, value in sysctls.items():
                self.sysctl(ns, key, value)
            # No IPv6 on the link: no router solicitations or DAD in the counters.
            self.sysctl(ns, f"net.ipv6.conf.{tun}.disable_ipv6", "1")
            run(["ip", "-n", ns, "addr", "add", local, "peer", peer, "dev", tun])
            run(["ip", "-n", ns, "link", "set", tun, "up"])
        link = run(["ip", "-n", self.ns_cli, "-d", "link", "show", self.tun_cli]).stdout
        self.info = {
            "rtt_ms": self.rtt_ms, "rate_mbit": self.rate_mbit, "loss_pct": self.loss_pct,
            "loss_seed": getattr(self.args, "seed", 1) if self.loss_pct else None,
            "delayline": " ".join(self.delayline.argv),
            "tun_link": " ".join(link.split()),
            "sysctl": {ns_name: {k: self.sysctl(ns, k) for k in (
                "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
                "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_no_metrics_save")}
                for ns_name, ns in (("cli", self.ns_cli), ("org", self.ns_org))},
        }
        first = self.delayline.snapshot()
        if first:
            self.info["queue_bytes"] = first["config"]["queue_bytes"]
            self.info["ring_bytes"] = first["config"]["ring_bytes"]

        self.origin = self._nginx(data_dir, "75s")
        self.origin_early = None
        if "early-close" in self.scenarios or "overlap" in self.scenarios:
            self.origin_early = self._nginx(data_dir, f"{self.args.early_keepalive:g}s")
        if "https" in self.scenarios or ("parent" in self.scenarios and
                                         "https" in self.args.parent_parts):
            # Port 443 in the origin's namespace: every proxy lets CONNECT go there.
            self.pki = kpbench.TestPKI(self.workdir, [ORG_ADDR],
                                       kpbench.find_binary(self.args.build_dir, "keepalive-proxy"))
            self.origin_tls = self._nginx(data_dir, "75s", port=443, tls=self.pki)
        for scenario, mode in SCENARIO_ORIGIN.items():
            if scenario in self.scenarios and mode not in self.own_origins:
                self.own_origins[mode] = OwnOrigin(self.args, self.workdir, self.ns_org, mode)

    def _nginx(self, data_dir, keepalive_timeout, port=None, tls=None):
        origin = kpbench.Nginx(self.workdir, listen=ORG_ADDR, netns=self.ns_org,
                               keepalive_timeout=keepalive_timeout, port=port, tls=tls,
                               types=HLS_TYPES)
        log_body_bytes(origin)
        # Hard links: every origin serves the same files without copies.
        for parent, dirs, files in os.walk(data_dir):
            into = os.path.join(origin.root, os.path.relpath(parent, data_dir))
            for name in dirs:
                os.makedirs(os.path.join(into, name), mode=0o755, exist_ok=True)
            for name in files:
                os.link(os.path.join(parent, name), os.path.join(into, name))
        return origin.start()

    def set_lo_windows(self, segments):
        """contrib/loopback-initcwnd.sh inside the client namespace."""
        argv = ["sh", INITCWND_SCRIPT] + ([str(segments)] if segments else ["--reset"])
        out = self.ns(self.ns_cli, *argv).stdout
        routes = run(["ip", "-n", self.ns_cli, "-4", "route", "show", "table", "local",
                      "type", "local", "dev", "lo"]).stdout
        if segments and f"initcwnd {segments}" not in routes:
            raise RuntimeError(f"loopback-initcwnd.sh did not change the routes:\n{out}")
        self.lo_raised = bool(segments)
        return routes.strip()

    def download(self, mode, *extra, origin=None):
        """Starts the downloader in the client namespace; collect() its result."""
        origin = origin or self.origin
        argv = [sys.executable, DOWNLOADER, mode, "--origin", f"{ORG_ADDR}:{origin.port}"]
        argv += [str(x) for x in extra]
        proc = subprocess.Popen(kpbench.netns_argv(self.ns_cli, argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        DOWNLOADERS.add(proc)
        return proc

    def teardown(self):
        final = None
        # Downloaders still running after an interruption: ours, by PID.
        for proc in list(DOWNLOADERS):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            DOWNLOADERS.discard(proc)
        for origin in (self.origin, self.origin_early, self.origin_tls,
                       *self.own_origins.values()):
            if origin:
                origin.stop()
        self.own_origins = {}
        if self.delayline:
            final = self.delayline.stop()
        for ns in reversed(self.namespaces):
            run(["ip", "netns", "del", ns], check=False)
        self.namespaces = []
        return final


class OwnOrigin:
    """bench/wan_origin.py in the origin's namespace, serving OBJECT of
    --object-size generated bytes in one of its modes, with its request log."""

    def __init__(self, args, workdir, netns, mode):
        self.mode = mode
        self.port = ORIGIN_PORTS[mode]
        self.log = workdir.join(f"origin-{mode}-{netns}.jsonl")
        argv = [sys.executable, ORIGIN_PROGRAM, "--listen", f"{ORG_ADDR}:{self.port}",
                "--mode", mode, "--seed", str(args.seed), "--log", self.log,
                "--object", f"{OBJECT}={args.object_size}"]
        if mode == "paced":
            argv += ["--pace-rate", f"{args.pace_rate:g}",
                     "--pace-free-max", str(args.pace_free_max)]
        elif mode == "reset":
            argv += (["--reset-bytes", str(args.reset_bytes)] if args.reset_bytes
                     else ["--reset-share", f"{args.reset_share:g}"])
        self.argv = argv
        self.proc = kpbench.Process(f"origin-{mode}", argv, netns=netns,
                                    log_path=workdir.join(f"origin-{mode}-{netns}.out"))
        # Generating the object takes a moment.
        if not kpbench.wait_listening(ORG_ADDR, self.port, timeout=120, netns=netns,
                                      proc=self.proc):
            tail = self.proc.log_tail()
            self.proc.stop()
            raise RuntimeError(f"wan_origin.py ({mode}) did not start:\n{tail}")

    def url(self, path):
        return f"http://{ORG_ADDR}:{self.port}/{path.lstrip('/')}"

    def log_mark(self):
        return os.path.getsize(self.log) if os.path.exists(self.log) else 0

    def requests_since(self, mark, tag):
        """The logged requests since mark whose target carries ?run=tag."""
        time.sleep(0.2)   # a request cut by the client is logged as it ends
        out = []
        with open(self.log, errors="replace") as f:
            f.seek(mark)
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                query = urllib.parse.urlsplit(r.get("target") or "").query
                if urllib.parse.parse_qs(query).get("run") == [tag]:
                    out.append(r)
        return out

    def stop(self):
        if self.proc:
            self.proc.stop()
            self.proc = None


def collect(proc, timeout=900):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError("downloader timed out")
    DOWNLOADERS.discard(proc)
    try:
        result = json.loads(out)
    except ValueError:
        raise RuntimeError(f"downloader printed no result:\n{out}\n{err}")
    if "fatal" in result:
        raise RuntimeError(f"downloader failed: {result['fatal']}")
    return result


# ---------------------------------------------------------------------------
# What every row is measured through.

class Row:
    def __init__(self, label, kind, name=None, command=None, extra=(), build_dir=None,
                 binary=None):
        self.label = label      # as printed
        self.kind = kind        # direct, reuse (direct on one connection), builtin, external
        self.name = name        # proxy name or HOST:PORT
        self.command = command
        self.extra = list(extra)   # keepalive-proxy flags of this row alone
        self.build_dir = build_dir  # keepalive-proxy's, if not --build-dir's
        self.binary = binary        # "old" or "new" with --old-build-dir
        self.about = {}             # for the JSON rows: which binary, from what commit
        if binary:
            self.about = {"binary": binary, "binary_build_dir": os.path.abspath(build_dir),
                          "binary_commit": kpbench.build_commit(build_dir)}

    def start(self, bed, args, workdir):
        if self.kind in ("direct", "reuse"):
            return None
        if self.kind == "builtin":
            extra = (shlex.split(args.kp_args) + self.extra
                     if self.name == "keepalive-proxy" else ())
            return kpbench.start_proxy(self.name, workdir, self.build_dir or args.build_dir,
                                       host="127.0.0.1", netns=bed.ns_cli, extra_args=extra,
                                       raise_errors=True)
        return kpbench.external_proxy(self.name, self.command, netns=bed.ns_cli, workdir=workdir)


def paired(args, rows):
    """rows with, under --old-build-dir, every keepalive-proxy row twice, the
    old binary's then the new one's, labelled so; the others as they are."""
    out = []
    for row in rows:
        if row.name != "keepalive-proxy" or not args.old_build_dir:
            out.append(row)
            continue
        out += [Row(f"{row.label} ({which})", row.kind, row.name, row.command, row.extra,
                    build_dir, which) for which, build_dir in kpbench.old_and_new(args)]
    return out


def turns(rows):
    """rows in groups whose repeated runs take turns: a row's old and new
    binary together, every other row alone."""
    groups = []
    for row in rows:
        if row.binary == "new" and groups and groups[-1][-1].binary == "old":
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def make_rows(args):
    rows = [Row("direct", "direct")]
    for name in args.builtin:
        rows.append(Row(name, "builtin", name))
        if name == "keepalive-proxy":
            rows += kp_rows(args)
    if "keepalive-proxy" not in args.builtin:
        rows += kp_rows(args)
    for i, address in enumerate(args.proxy):
        command = args.proxy_cmd[i] if i < len(args.proxy_cmd) else None
        rows.append(Row(f"proxy {address}", "external", address, command))
    return rows


def kp_rows(args):
    """The --kp-row rows: keepalive-proxy with flags of their own."""
    return [Row(f"keepalive-proxy {text}", "builtin", "keepalive-proxy", extra=shlex.split(text))
            for text in args.kp_row]


def write_hls(data_dir, source, count, size, seconds=HLS_SEGMENT_SECONDS):
    """A VOD media playlist HLS_PLAYLIST of count segments of size bytes,
    cut in order from source: what an HLS origin serves, bytes aside."""
    directory = os.path.join(data_dir, os.path.dirname(HLS_PLAYLIST))
    os.makedirs(directory, mode=0o755, exist_ok=True)
    names = [f"seg{i:05d}.ts" for i in range(count)]
    with open(source, "rb") as f:
        for name in names:
            data = f.read(size)
            if len(data) != size:
                raise RuntimeError(f"{source} is too short for {count} segments of {size} B")
            with open(os.path.join(directory, name), "wb") as out:
                os.fchmod(out.fileno(), 0o644)
                out.write(data)
    lines = ["#EXTM3U", "#EXT-X-VERSION:3",
             f"#EXT-X-TARGETDURATION:{math.ceil(seconds)}", "#EXT-X-MEDIA-SEQUENCE:0",
             "#EXT-X-PLAYLIST-TYPE:VOD"]
    for name in names:
        lines += [f"#EXTINF:{seconds:.3f},", name]
    lines.append("#EXT-X-ENDLIST")
    with open(os.path.join(data_dir, HLS_PLAYLIST), "w") as f:
        os.fchmod(f.fileno(), 0o644)
        f.write("\n".join(lines) + "\n")


def write_tagged_playlist(root, tag, count, seconds=HLS_SEGMENT_SECONDS):
    """A copy of HLS_PLAYLIST under root whose segment URIs carry
    ?run=tag; returns its path below root."""
    name = os.path.join(os.path.dirname(HLS_PLAYLIST), f"{tag}.m3u8")
    lines = ["#EXTM3U", "#EXT-X-VERSION:3",
             f"#EXT-X-TARGETDURATION:{math.ceil(seconds)}", "#EXT-X-MEDIA-SEQUENCE:0",
             "#EXT-X-PLAYLIST-TYPE:VOD"]
    for i in range(count):
        lines += [f"#EXTINF:{seconds:.3f},", f"seg{i:05d}.ts?run={tag}"]
    lines.append("#EXT-X-ENDLIST")
    with open(os.path.join(root, name), "w") as f:
        os.fchmod(f.fileno(), 0o644)
        f.write("\n".join(lines) + "\n")
    return name


def log_body_bytes(origin):
    """Adds $body_bytes_sent to the end of a kpbench.Nginx's access log
    format, before it starts: $bytes_sent, already there, counts the heads
    too, and what an origin pays for a file is its body bytes. At the end,
    where parsers that split the line's first fields off (origin_log,
    bench/clients.py, kpbench's connections_since) do not see it. A format
    not as expected is left alone; origin_transfers then has no body
    bytes to give."""
    with open(origin.conf) as f:
        conf = f.read()
    old = '$bytes_sent "$request"\';'
    if old in conf:
        with open(origin.conf, "w") as f:
            f.write(conf.replace(old, '$bytes_sent "$request" $body_bytes_sent\';'))


def split_request(field):
    """The quoted request and the body bytes after it, if logged."""
    if field.endswith('"'):
        return field, None
    request, _, body = field.rpartition(" ")
    return request, int(body) if body.isdigit() else None


def origin_log(origin, mark):
    """Access log lines since mark: (connection serial, status, request)."""
    entries = []
    for line in origin.log_lines_since(mark):
        parts = line.split(" ", 4)
        if len(parts) == 5:
            entries.append((parts[0], parts[2], split_request(parts[4])[0]))
    return entries


def origin_transfers(origin, mark, tag):
    """The requests since mark whose target carries ?run=tag, each with its
    connection, status, bytes sent (head and body) and body bytes sent
    (None where the log does not have them)."""
    out = []
    for line in origin.log_lines_since(mark):
        parts = line.split(" ", 4)
        if len(parts) != 5:
            continue
        request, body = split_request(parts[4])
        if f"run={tag} " not in request and f"run={tag}\"" not in request:
            continue
        out.append({"conn": parts[0], "status": parts[2],
                    "bytes_sent": int(parts[3]) if parts[3].isdigit() else None,
                    "body_bytes": body, "request": request.strip('"')})
    return out


def origin_connections(entries, tag):
    mine = [e for e in entries if f"run={tag} " in e[2] or f"run={tag}\"" in e[2]]
    return len({e[0] for e in mine}), len(mine)


def chunk_times(result):
    return [c["end"] - c["start"] for c in result["chunks"] if "error" not in c]


def chunk_span(result):
    chunks = result["chunks"]
    first = min(c.get("start", c["due"]) for c in chunks)
    return first, max(c["end"] for c in chunks) - first


def warm_span(result):
    """From the second chunk's start to the last chunk's end: the part of a
    sequential run that a warm upstream connection can speed up."""
    chunks = sorted(result["chunks"], key=lambda c: c.get("start", c["due"]))
    if len(chunks) < 2:
        return None
    return max(c["end"] for c in chunks) - chunks[1].get("start", chunks[1]["due"])


def errors_of(result):
    return [f"chunk {c['index']}: {c['error']}" for c in result["chunks"] if "error" in c]


def tag_for(scenario, row, rtt, variant=""):
    text = f"{scenario}-{rtt:g}-{row.label}{variant}"
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text)


def overlap_count(results):
    """How many pairs of chunks from different rows were in flight at once:
    rows run side by side, phase-shifted, and should never meet."""
    spans = sorted((c.get("start", c["due"]), c["end"], n)
                   for n, r in enumerate(results) for c in r["chunks"])
    count = 0
    for i, (s, e, n) in enumerate(spans):
        for s2, _e2, n2 in spans[i + 1:]:
            if s2 >= e:
                break
            count += n2 != n
    return count


# ---------------------------------------------------------------------------
# The parent scenario's daemons: parent proxies (microsocks, dante, squid)
# and the proxies that forward to them (privoxy, squid), each started by the
# row that uses it, with a configuration and logs of its own in the run's
# work directory, and stopped by its PID.

def daemon_program(kind):
    """The program of a daemon kind, or None if it is not installed."""
    program = DAEMON_PROGRAMS[kind][0]
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin")


class Daemon:
    """One daemon of one row. configure(daemon, port) writes its
    configuration into daemon.dir and returns its argv; it listens on
    host:port in netns. A port taken meanwhile: another one, three times."""

    serial = 0

    def __init__(self, kind, workdir, netns, host, configure, owner=None):
        self.kind = kind
        self.netns = netns
        self.host = host
        self.port = None
        self.proc = None
        self.shm_name = None   # squid's service name (-n), which names its shared memory
        tail = ""
        for _attempt in range(3):
            Daemon.serial += 1
            self.dir = workdir.join(f"{kind}-{Daemon.serial}")
            os.makedirs(self.dir)
            if owner:
                entry = pwd.getpwnam(owner)
                os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            port = kpbench.free_port()
            self.argv = configure(self, port)
            self.log = os.path.join(self.dir, f"{kind}.out")
            # A session of its own (kpbench.Process): stop() finds the
            # workers danted forks by it.
            self.proc = kpbench.Process(kind, self.argv, netns=netns, log_path=self.log)
            if kpbench.wait_listening(host, port, timeout=20, netns=netns, proc=self.proc):
                self.port = port
                return
            tail = self.proc.log_tail() + self.extra_log_tail()
            self.stop()
        raise kpbench.ProxyStartError(f"{kind} did not start in {netns} on {host}:\n{tail}")

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    def file(self, name):
        return os.path.join(self.dir, name)

    def read(self, name=None):
        try:
            with open(self.file(name) if name else self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def extra_log_tail(self):
        for name in ("cache.log", "danted.log"):
            text = self.read(name)
            if text:
                return "".join(text.splitlines(True)[-10:])
        return ""

    def stop(self):
        """SIGTERM to the daemon itself, which ends its own workers (danted's
        children; signalled all at once they would die before the mother
        and fill its log with complaints); whatever is left of the session
        this run started after 5 s gets SIGKILL."""
        if self.proc:
            sid = self.proc.pid
            self.proc.stop()
            deadline = time.monotonic() + 5
            while kpbench.session_pids(sid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if kpbench.session_pids(sid):
                try:
                    os.killpg(sid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc = None
        if self.shm_name:
            # Shared memory squid named after this run's own service name.
            for path in glob.glob(f"/dev/shm/{self.shm_name}-*"):
                os.unlink(path)


def start_microsocks(workdir, netns, host):
    program = daemon_program("microsocks")

    def configure(_d, port):
        return [program, "-i", host, "-p", str(port)]
    return Daemon("microsocks", workdir, netns, host, configure)


def start_dante(workdir, netns, host, external):
    """danted with one mother process, no authentication, sessions from
    loopback and the testbed's addresses to the testbed's addresses, each
    session's start and end logged."""
    program = daemon_program("dante")

    def configure(d, port):
        conf = d.file("danted.conf")
        with open(conf, "w") as f:
            f.write(f"""logoutput: {d.file('danted.log')}
internal: {host} port = {port}
external: {external}
clientmethod: none
socksmethod: none
user.privileged: root
user.unprivileged: nobody
client pass {{ from: 127.0.0.0/8 to: 0.0.0.0/0 log: error }}
client pass {{ from: 10.77.0.0/16 to: 0.0.0.0/0 log: error }}
socks pass {{ from: 0.0.0.0/0 to: 10.77.0.0/16 log: connect disconnect error }}
socks block {{ from: 0.0.0.0/0 to: 0.0.0.0/0 log: connect error }}
""")
        return [program, "-f", conf, "-N", "1", "-p", d.file("danted.pid")]
    return Daemon("dante", workdir, netns, host, configure)


def start_squid(workdir, netns, host, peer=None, extra=(), cache_lines=None):
    """squid as it forwards, caching nothing (the README's squid row), with
    a service name of its own (-n) so that its shared memory cannot meet
    another squid's, an access log that names each client connection and
    each connection squid made, and with peer (HOST:PORT) every request
    sent to that parent squid and none direct; extra: further lines of
    configuration. Each has a host name of its
    own (visible_hostname), or the parent would take the child's Via for a
    forwarding loop of its own and answer 403. cache_lines: a squid that
    caches (the share scenario's), with these lines in place of "cache deny
    all" and "cache_mem 0 MB"."""
    program = daemon_program("squid")
    user = "proxy" if _has_user("proxy") else "nobody"

    def configure(d, port):
        d.shm_name = f"kpw{os.getpid()}q{Daemon.serial}"
        peer_lines = ""
        if peer:
            peer_host, _, peer_port = peer.rpartition(":")
            peer_lines = (f"cache_peer {peer_host} parent {peer_port} 0 no-query no-digest "
                          f"default\nnever_direct allow all\n")
        conf = d.file("squid.conf")
        caching = ("cache deny all\ncache_mem 0 MB" if cache_lines is None
                   else "\n".join(cache_lines))
        with open(conf, "w") as f:
            f.write(f"""http_port {host}:{port}
workers 1
pid_filename {d.dir}/squid.pid
cache_log {d.dir}/cache.log
logformat kp %ts.%03tu %>a:%>p %Ss/%03>Hs %rm %ru %<a:%<lp
access_log stdio:{d.dir}/access.log kp
buffered_logs off
cache_store_log none
netdb_filename none
coredump_dir {d.dir}
{caching}
memory_cache_shared off
acl benchnet src 127.0.0.0/8 10.77.0.0/16
http_access allow benchnet
http_access deny all
server_persistent_connections on
client_persistent_connections on
server_idle_pconn_timeout 60 seconds
client_idle_pconn_timeout 120 seconds
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 0 seconds
cache_effective_user {user}
visible_hostname {d.shm_name}
{peer_lines}""" + "".join(line + "\n" for line in extra))
        os.chmod(conf, 0o644)
        return [program, "-N", "-n", d.shm_name, "-f", conf]
    return Daemon("squid", workdir, netns, host, configure, owner=user)


def _has_user(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def start_privoxy(workdir, netns, forward):
    """privoxy on the client's loopback with forward (a forward-socks5t or
    forward line) and its connections shared between clients."""
    program = daemon_program("privoxy")

    def configure(d, port):
        conf = d.file("config")
        templates = ("templdir /etc/privoxy/templates\n"
                     if os.path.isdir("/etc/privoxy/templates") else "")
        with open(conf, "w") as f:
            f.write(f"""listen-address 127.0.0.1:{port}
confdir {d.dir}
{templates}debug 512
debug 4096
debug 8192
{forward}
connection-sharing 1
keep-alive-timeout 300
default-server-timeout 60
socket-timeout 300
forwarded-connect-retries 0
tolerate-pipelining 1
toggle 0
enable-remote-toggle 0
enable-remote-http-toggle 0
enable-edit-actions 0
accept-intercepted-requests 0
""")
        return [program, "--no-daemon", "--pidfile", d.file("privoxy.pid"), conf]
    return Daemon("privoxy", workdir, netns, "127.0.0.1", configure)


def parent_sessions(daemon):
    """What a parent's log says it did: sessions (SOCKS sessions, or
    client connections to squid), requests (squid) and the connections it
    made onwards (squid: distinct local ports)."""
    if daemon.kind == "microsocks":
        return {"sessions": daemon.read().count(": connected to ")}
    if daemon.kind == "dante":
        return {"sessions": daemon.read("danted.log").count(" tcp/connect [: ")}
    clients, onward, requests = set(), set(), 0
    for line in daemon.read("access.log").splitlines():
        parts = line.split()
        # A connection that sent no request (the probe that saw it listen)
        # is logged with method "-" or NONE.
        if len(parts) < 6 or parts[3] in ("-", "NONE"):
            continue
        requests += 1
        clients.add(parts[1])
        onward.add(parts[5])
    return {"sessions": len(clients), "requests": requests, "onward_connections": len(onward)}


class ParentRow:
    """A row of the parent scenario: the client (curl) straight to the
    origin, straight through the parent, or through a proxy on its own
    loopback (front: privoxy, squid, keepalive-proxy) that forwards to the
    parent, or to the origin when the row has no parent."""

    def __init__(self, label, parent=None, front=None, kp_args=(), https=False):
        self.label = label
        self.parent = parent
        self.front = front
        self.kp_args = list(kp_args)
        self.https = https   # keepalive-proxy intercepts the origin, reached over HTTPS

    @property
    def socks_straight(self):
        """Whether the client talks SOCKS itself (which only curl does here)."""
        return self.front is None and self.parent not in (None, "squid")

    def start(self, bench, bed, place):
        """Starts the row's daemons; a Running with curl's proxy options."""
        run = Running()
        try:
            if self.parent:
                run.parent = start_parent(self.parent, bench.workdir, bed, place,
                                          bench.args.parent_squid_conf)
                run.parent_url = parent_url(run.parent)
            hop = run.parent.address if run.parent else None
            if self.front is None:
                run.curl_args = (["--noproxy", "*"] if not hop else
                                 ["--socks5-hostname", hop] if self.parent != "squid" else
                                 ["--proxy", f"http://{hop}"])
                run.http_proxy = hop if self.parent == "squid" else None
                return run
            if self.front == "privoxy":
                forward = (f"forward / {hop}" if self.parent == "squid"
                           else f"{PRIVOXY_SOCKS[self.parent]} / {hop} .")
                run.front = start_privoxy(bench.workdir, bed.ns_cli, forward)
                run.front_config = forward
            elif self.front == "squid":
                run.front = start_squid(bench.workdir, bed.ns_cli, "127.0.0.1", peer=hop)
                run.front_config = f"cache_peer {hop} parent ... no-query default, never_direct"
            else:
                args = bench.args
                extra = shlex.split(args.kp_args)
                if run.parent_url:
                    extra += ["--parent", run.parent_url]
                if self.https:
                    extra += bed.pki.intercept_args([ORG_ADDR])
                extra += self.kp_args
                run.kp = kpbench.start_proxy("keepalive-proxy", bench.workdir, args.build_dir,
                                             host="127.0.0.1", netns=bed.ns_cli,
                                             extra_args=extra, raise_errors=True)
                run.front_config = " ".join(extra)
                run.kp_log = run.kp.process.log_path
                run.curl_args = ["--proxy", f"http://{run.kp.address}"]
                run.http_proxy = run.kp.address
                return run
            run.curl_args = ["--proxy", f"http://{run.front.address}"]
            run.http_proxy = run.front.address
            return run
        except BaseException:
            run.stop()
            raise


class Running:
    """A row's daemons while it is measured."""

    def __init__(self):
        self.parent = None
        self.parent_url = None
        self.front = None
        self.front_config = None
        self.kp = None
        self.kp_log = None
        self.curl_args = []
        self.http_proxy = None   # HOST:PORT of the HTTP proxy the client talks to, if any
        self.cpu = {}

    def sample_cpu(self):
        """CPU seconds each daemon of the row has used since it started
        (every thread and child process of its session)."""
        for what, pid in (("kp", self.kp.pid if self.kp else None),
                          ("front", self.front.proc.pid if self.front and self.front.proc
                           else None),
                          ("parent", self.parent.proc.pid if self.parent and self.parent.proc
                           else None)):
            if pid:
                self.cpu[what] = round(kpbench.total_cpu_seconds(kpbench.session_pids(pid)), 3)

    def stop(self):
        """The client's side first, then the parent."""
        for d in (self.kp, self.front, self.parent):
            if d:
                d.stop()


def start_parent(name, workdir, bed, place, squid_extra=()):
    """A parent proxy beside the origin (in the origin's namespace, on its
    address) or beside the client (on the client's loopback)."""
    netns, host, external = ((bed.ns_org, ORG_ADDR, ORG_ADDR) if place == "origin"
                             else (bed.ns_cli, "127.0.0.1", CLI_ADDR))
    if name == "microsocks":
        return start_microsocks(workdir, netns, host)
    if name == "dante":
        return start_dante(workdir, netns, host, external)
    return start_squid(workdir, netns, host, extra=squid_extra)


def parent_url(daemon):
    return f"{'http' if daemon.kind == 'squid' else 'socks5h'}://{daemon.address}"


def run_curl(argv, env):
    """One curl run to its end, what its -w CURL_WRITE_OUT said read back:
    exit, status, bytes, connect_s, head_s, curl_s, and error when it failed."""
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)
    c = {"exit": done.returncode}
    fields = done.stdout.split()
    if len(fields) == 5:
        c.update(status=int(fields[0]), bytes=int(float(fields[1])), connect_s=float(fields[2]),
                 head_s=float(fields[3]), curl_s=float(fields[4]))
    if done.returncode:
        c["error"] = f"curl exit {done.returncode}: {done.stderr.strip()[:200]}"
    return c


def curl_chunks(spec):
    """Run inside the client's namespace (wan.py --curl-chunks SPEC): the
    ranges one after another, each by a curl of its own, so each on a new
    connection; then every range's bytes compared with the file's. Prints
    one JSON object (CLOCK_MONOTONIC times, as wan_download.py's)."""
    env = wan_clients.client_env()
    size = spec["chunk_size"]
    started = time.monotonic()
    subprocess.run([spec["curl"], "--version"], stdout=subprocess.DEVNULL, env=env)
    startup = time.monotonic() - started
    chunks = []
    for i in range(spec["chunks"]):
        first = i * size
        out = os.path.join(spec["dir"], f"chunk-{i}")
        argv = [spec["curl"], "-q", "-sS", "--max-time", str(spec["max_time"]), "-o", out,
                "-r", f"{first}-{first + size - 1}", "-w", CURL_WRITE_OUT,
                *spec["proxy_args"], spec["url"]]
        start = time.monotonic()
        c = {"index": i, "worker": 0, "due": start, "start": start, **run_curl(argv, env),
             "end": time.monotonic()}
        if "error" not in c and c.get("status") != 206:
            c["error"] = f"status {c.get('status')}, expected 206"
        elif "error" not in c and c.get("bytes") != size:
            c["error"] = f"{c.get('bytes')} bytes, expected {size}"
        chunks.append(c)
    with open(spec["expect"], "rb") as f:
        for c in chunks:
            out = os.path.join(spec["dir"], f"chunk-{c['index']}")
            if "error" not in c:
                f.seek(c["index"] * size)
                want = f.read(size)
                with open(out, "rb") as g:
                    got = g.read()
                if got != want:
                    at = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b),
                              min(len(got), len(want)))
                    c["error"] = f"wrong bytes from offset {at} of the range"
            if os.path.exists(out):
                os.unlink(out)
    print(json.dumps({"chunks": chunks, "curl_startup_s": startup}))
    return 0


def share_fetch(spec):
    """Run inside the client's namespace (wan.py --share-fetch SPEC): a
    curl per client, each started at its offset (seconds) from a common
    start, all at once on connections of their own; then every client's
    bytes checked: a whole GET by size and SHA-256 against the file, a
    range by comparing it with the file's bytes there. Prints one JSON
    object (CLOCK_MONOTONIC times, as wan_download.py's)."""
    env = wan_clients.client_env()
    # Once before the clock starts, so that no client pays for loading curl.
    subprocess.run([spec["curl"], "--version"], stdout=subprocess.DEVNULL, env=env)
    base = time.monotonic() + 0.2
    clients = [dict(c, index=i) for i, c in enumerate(spec["clients"])]

    def fetch(c):
        out = os.path.join(spec["dir"], f"client-{c['index']}")
        argv = [spec["curl"], "-q", "-sS", "--max-time", str(spec["max_time"]), "-o", out,
                "-w", CURL_WRITE_OUT, *(["-r", c["range"]] if c["range"] else []),
                *spec["proxy_args"], spec["url"]]
        time.sleep(max(0.0, base + c["offset"] - time.monotonic()))
        c["start"] = time.monotonic()
        c.update(run_curl(argv, env))
        c["end"] = time.monotonic()
        c["out"] = out

    threads = [threading.Thread(target=fetch, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        out = c.pop("out")
        exists = os.path.exists(out)
        c["bytes"] = os.path.getsize(out) if exists else None
        if exists and not c["range"]:
            c["sha256"] = wan_clients.sha256_file(out)
        if "error" in c:
            pass
        elif c["range"]:
            first, last = (int(x) for x in c["range"].split("-"))
            with open(spec["expect"], "rb") as f:
                f.seek(first)
                want = f.read(last - first + 1)
            with open(out, "rb") as g:
                got = g.read(len(want) + 1)
            if c.get("status") != 206:
                c["error"] = f"status {c.get('status')}, expected 206"
            elif got != want:
                c["error"] = f"{len(got)} bytes, not the file's bytes {c['range']}"
        elif c.get("status") != 200:
            c["error"] = f"status {c.get('status')}, expected 200"
        elif c["bytes"] != spec["size"] or c["sha256"] != spec["sha256"]:
            c["error"] = f"{c['bytes']} bytes, not the file (size or SHA-256 differ)"
        if exists and not spec["keep"]:
            os.unlink(out)
    print(json.dumps({"clients": clients}))
    return 0


def joined(values):
    """One value if the runs agree, else all of them: 1, or 1/2/1."""
    values = ["-" if v is None else str(v) for v in values]
    return values[0] if len(set(values)) == 1 else "/".join(values)


def daemon_logs(running):
    """The end of each of a row's daemons' logs, for a row that went wrong."""
    logs = {}
    if running.kp_log and os.path.exists(running.kp_log):
        logs["keepalive-proxy"] = kpbench.tail_of(running.kp_log, 40)
    for d in (running.front, running.parent):
        if d:
            for name in (None, "cache.log", "danted.log"):
                text = d.read(name)
                if text:
                    logs[f"{d.kind}/{name or 'out'}"] = text[-3000:]
    return logs


# ---------------------------------------------------------------------------
# Scenarios. Each returns table rows (dicts) and writes JSON lines.

class Bench:
    def __init__(self, args, results, workdir):
        self.args = args
        self.results = results
        self.workdir = workdir
        self.base_rows = make_rows(args)   # each keepalive-proxy row once
        self.rows = paired(args, self.base_rows)
        self.chunk_bits = args.chunk_size * 8
        self.rate_bps = args.rate_mbit * 1e6
        self.plot_series = {}
        self.paced_extra = {}
        self.summary = []
        self.env = {}
        self.load = None   # a kpbench.MachineLoad since quiet()
        self.clients = {}  # wan_clients.Client by name, made in main()
        self.object_sha = None   # SHA-256 of OBJECT, as the origins generate it
        self.hls_sha = None      # of the hls segments, concatenated
        self.share_sha = None    # of SHARE_FILE
        self.downloads = 0

    def ideal_chunk(self, rtt_s):
        return self.chunk_bits / self.rate_bps + rtt_s

    def record(self, bed, scenario, row, variant, values, result, dl):
        record = {"scenario": scenario, "proxy": row.label, "variant": variant, **row.about,
                  "testbed": bed.info, "verification": bed.verification,
                  "chunk_size": self.args.chunk_size, "delayline_delta": dl,
                  "loadavg_after": loadavg(), "machine_load": result.get("env", self.env)}
        record.update(values)
        t0 = min(c.get("start", c["due"]) for c in result["chunks"])
        record["chunks"] = [
            {"index": c["index"], "worker": c["worker"],
             "start_ms": round(ms(c.get("start", c["due"]) - t0), 3),
             "ms": round(ms(c["end"] - c["start"]), 3) if "error" not in c else None,
             "head_ms": round(ms(c["head"] - c["start"]), 3) if "head" in c else None,
             "bytes": c.get("bytes"), "error": c.get("error")}
            for c in result["chunks"]]
        self.results.write(record)

    def quiet(self):
        """Before a measurement: wait for an idle machine, then start counting
        how busy it is, so each row can say what else was going on."""
        waited, load = wait_quiet(self.args)
        self.env = {"waited_for_idle_s": round(waited, 1), "busy_cores_before": load}
        self.load = kpbench.MachineLoad()

    def busy_during(self):
        """Cores busy on average, machine-wide, since quiet(): this run's own
        processes and the kernel's packet work included."""
        busy, stolen = self.load.cores()
        self.env["busy_cores_during"] = round(busy, 2)
        self.env["stolen_cores_during"] = round(stolen, 3)

    def kept_time(self, what, dl, attempt):
        """Whether the emulator kept time well enough for the measurement
        to count; if not, says so, and the caller measures again."""
        share = late_share(dl)
        if share is None or share <= self.args.max_late / 100 or attempt >= self.args.retries:
            return True
        self.env.setdefault("discarded_late_shares", []).append(round(share, 4))
        print(f"  {what}: the emulator wrote {share:.1%} of the packets more than 1 ms late "
              f"({self.env.get('stolen_cores_during', 0):.2f} cores stolen by the hypervisor, "
              f"{self.env.get('busy_cores_during', 0):.2f} busy); measuring again", flush=True)
        return False

    def sequential(self, bed, scenario, row, variant, extra, origin=None, mode="chunks",
                   path=None):
        """One row on its own: proxy up, downloader, proxy down; again if
        the emulator fell behind. keepalive-proxy's counters, read just
        before it stops, are left in self.counters."""
        origin = origin or bed.origin
        discarded = []
        self.counters = None
        for attempt in range(self.args.retries + 1):
            self.quiet()
            proxy = row.start(bed, self.args, self.workdir)
            try:
                # A tag of its own per attempt: the origin log counts only this one.
                again = f"-{attempt}" if attempt else ""
                tag = tag_for(scenario, row, bed.rtt_ms, variant + again)
                mark = origin.log_mark()
                before = bed.delayline.snapshot()
                argv = ["--path", f"/{path or FILE}?run={tag}"]
                if mode == "hls":
                    # The run's tag in the segment URIs, as a CDN's token
                    # would be: a player asks for exactly what is listed.
                    argv = ["--path", "/" + write_tagged_playlist(
                        (origin or bed.origin).root, tag, self.args.chunks) + f"?run={tag}"]
                if mode == "chunks":
                    argv += ["--chunk-size", self.args.chunk_size]
                argv += extra
                if row.kind == "reuse":
                    argv.append("--reuse")
                if proxy:
                    argv += ["--proxy", proxy.address]
                result = collect(bed.download(mode, *argv, origin=origin))
                self.busy_during()
                after = bed.delayline.snapshot()
                if proxy and row.name == "keepalive-proxy":
                    self.counters = kpbench.keepalive_counters(proxy)
            finally:
                if proxy:
                    proxy.stop()
            dl = delayline_delta(before, after)
            self.env["discarded_late_shares"] = discarded
            if self.kept_time(row.label + variant, dl, attempt):
                break
        entries = origin_log(origin, mark)
        conns, requests = origin_connections(entries, tag)
        return result, requests, conns, dl

    def https(self, bed):
        """back-to-back over HTTPS: every other proxy tunnels (each chunk pays
        TCP and TLS handshakes and slow start on the path), keepalive-proxy
        both tunnels and, in a row of its own, intercepts the origin."""
        intercept = bed.pki.intercept_args([ORG_ADDR])
        rows = self.base_rows + [Row("keepalive-proxy intercepting", "builtin",
                                     "keepalive-proxy", extra=intercept)]
        # Each --kp-row intercepting too: what its flags do inside HTTPS.
        rows += [Row(f"keepalive-proxy intercepting {text}", "builtin", "keepalive-proxy",
                     extra=intercept + shlex.split(text)) for text in self.args.kp_row]
        rows = paired(self.args, rows)
        self.back_to_back(bed, scenario="https", rows=rows, origin=bed.origin_tls,
                          extra=["--tls", "--cafile", bed.pki.bundle])

    def hls(self, bed):
        """An HLS player's fetches: the playlist, then its segments in
        order, each a plain GET on a new connection: a proxy that reads
        ahead follows the playlist. Each run gets a copy of the playlist
        whose segment URIs carry its tag, so the origin's log tells runs
        apart while the player asks for exactly what is listed."""
        self.back_to_back(bed, scenario="hls", mode="hls", path=HLS_PLAYLIST)

    def back_to_back(self, bed, scenario="back-to-back", rows=None, origin=None, extra=(),
                     mode="chunks", path=None):
        args = self.args
        rtt = bed.rtt_ms / 1e3
        n = args.chunks
        ideal = self.ideal_chunk(rtt)
        limit = n * ideal
        rows = rows or self.rows
        # The reference: every chunk over one connection kept open, what a
        # proxy that cost nothing at all would achieve.
        plan = [(row, False) for row in rows]
        plan.insert(1, (Row("direct, 1 connection", "reuse"), False))
        if args.lo_initcwnd:
            plan += [(row, True) for row in rows if row.kind != "direct"]
        table, direct_total, reused = [], None, {}
        for row, raised in plan:
            if raised and not reused.get(row.label, True):
                # Every chunk opened its own origin connection: the long
                # haul's slow start dwarfs anything the loopback hop could win.
                print(f"  {row.label}: no raised-loopback row, it reused no origin "
                      f"connection", flush=True)
                continue
            if raised != bed.lo_raised:
                routes = bed.set_lo_windows(args.lo_initcwnd if raised else 0)
                print(f"  loopback routes in the client namespace now: "
                      f"{' | '.join(routes.splitlines())}", flush=True)
            variant = f" +lo iw{args.lo_initcwnd}" if raised else ""
            try:
                result, requests, conns, dl = self.sequential(
                    bed, scenario, row, variant, ["--chunks", n, *extra], origin=origin,
                    mode=mode, path=path)
            except kpbench.ProxyStartError as e:
                skipped(row.label + variant, e)
                continue
            times = chunk_times(result)
            _first, total = chunk_span(result)
            warm = warm_span(result)
            if row.kind == "direct":
                direct_total = total
            if not raised:
                reused[row.label] = conns < n
            values = {
                "rtt_ms": bed.rtt_ms, "rate_mbit": args.rate_mbit, "chunks": n,
                "lo_initcwnd": (args.lo_initcwnd if raised else
                                "-" if row.kind == "reuse" else "default"),
                "total_s": total, "limit_s": limit, "share_of_limit": limit / total,
                "share_of_limit_after_first": (n - 1) * ideal / warm if warm else None,
                "speedup": direct_total / total if direct_total else None,
                "median_chunk_ms": ms(median(times)), "ideal_chunk_ms": ms(ideal),
                "median_over_ideal": median(times) / ideal if times else None,
                "p90_chunk_ms": ms(sorted(times)[int(len(times) * 0.9)]) if times else None,
                "first_chunk_ms": ms(times[0]) if times else None,
                "origin_connections": conns, "origin_requests": requests,
                "errors": len(errors_of(result)),
                "error_list": errors_of(result)[:5],
                "queue_drops": dl["b_to_a"]["drops"] if dl else None,
                "busy_cores": self.env.get("busy_cores_during"),
                "emulator_late_share": late_share(dl),
            }
            playlist = result.get("playlist")
            if playlist:
                values["playlist_ms"] = ms(playlist["end"] - playlist["start"])
                values["total_with_playlist_s"] = (max(c["end"] for c in result["chunks"])
                                                   - playlist["start"])
            self.record(bed, scenario, row, variant, values, result, dl)
            table.append(dict(values, proxy=row.label + variant))
            if scenario == "back-to-back":
                self.plot_series.setdefault(bed.rtt_ms, []).append(
                    (row.label + variant, [(c["index"], ms(c["end"] - c["start"]))
                                           for c in result["chunks"] if "error" not in c]))
            print(f"  {row.label + variant}: {total:.2f} s", flush=True)
        if bed.lo_raised:
            bed.set_lo_windows(0)
        if mode == "hls":
            what = (f"{scenario}: playlist, then {n} segments of {args.chunk_size} B, each a "
                    f"plain GET on a new connection (total: segments only)")
            playlist_columns = [("playlist ms", "playlist_ms", "{:.0f}")]
        else:
            what = f"{scenario}: {n} x {args.chunk_size} B, each chunk a new connection"
            playlist_columns = []
        kpbench.print_table(
            f"{what}, RTT {bed.rtt_ms:g} ms, {args.rate_mbit:g} Mbit/s; "
            f"L = {n} x (chunk/rate + RTT) = {limit:.3f} s, chunk/rate + RTT = {ms(ideal):.2f} ms",
            [("proxy", "proxy", None), ("lo iw", "lo_initcwnd", None),
             *playlist_columns,
             ("total s", "total_s", "{:.2f}"), ("speedup", "speedup", "{:.2f}x"),
             ("% of L", "share_of_limit", "{:.1%}"),
             ("% of L after 1st", "share_of_limit_after_first", "{:.1%}"),
             ("median chunk ms", "median_chunk_ms", "{:.1f}"),
             ("median/ideal", "median_over_ideal", "{:.3f}"),
             ("first chunk ms", "first_chunk_ms", "{:.0f}"),
             ("p90 ms", "p90_chunk_ms", "{:.1f}"),
             ("origin conns", "origin_connections", None), ("errors", "errors", None),
             ("queue drops", "queue_drops", None), ("cpu busy", "busy_cores", "{:.2f}"),
             ("late>1ms", "emulator_late_share", "{:.2%}")], table)
        self.summary.append((scenario, bed.rtt_ms, table))

    def cold_chunk_estimate(self, rtt_s):
        """How long a chunk takes on a new connection: one round trip for the
        handshake, then slow start from 10 segments, doubling each round trip,
        until the chunk is through."""
        rounds, sent = 0, 0
        while sent < self.args.chunk_size:
            rounds += 1
            sent = 10 * (MTU - HEADER_BYTES) * (2 ** rounds - 1)
        return (1 + rounds) * rtt_s + self.chunk_bits / self.rate_bps

    def side_by_side(self, bed, scenario, n, interval, origin):
        """The rows at once, phase-shifted so that each row's chunks fall in
        the others' idle time: the wall time of one row instead of one per
        row. Every row's first chunk is cold, so each gets a slot of a cold
        chunk's length; rows that do not fit into one interval run in a
        further group afterwards. Overlaps are counted and reported. A group
        during which the emulator fell behind is measured again."""
        args = self.args
        slot = self.cold_chunk_estimate(bed.rtt_ms / 1e3) * 1.15 + 0.02
        per_group = max(1, int(interval // slot))
        groups = [self.rows[i:i + per_group] for i in range(0, len(self.rows), per_group)]
        if len(groups) > 1:
            print(f"  {len(self.rows)} rows in {len(groups)} groups of at most {per_group}: "
                  f"a cold chunk takes about {slot:.2f} s here", flush=True)
        results, overlaps, entries, dl_total = [], 0, [], None
        for group in groups:
            discarded = []
            for attempt in range(args.retries + 1):
                self.quiet()
                proxies = {}
                try:
                    offset = interval / len(group)
                    for row in group:
                        proxies[row.label] = row.start(bed, args, self.workdir)
                    mark = origin.log_mark()
                    before = bed.delayline.snapshot()
                    base = time.monotonic() + 1.0
                    procs = []
                    for k, row in enumerate(group):
                        tag = tag_for(scenario, row, bed.rtt_ms, f"-{attempt}" if attempt else "")
                        argv = ["--path", f"/{FILE}?run={tag}",
                                "--chunk-size", args.chunk_size, "--chunks", n,
                                "--interval", interval, "--start-at", f"{base + k * offset:.6f}"]
                        if proxies[row.label]:
                            argv += ["--proxy", proxies[row.label].address]
                        procs.append((row, tag, bed.download("chunks", *argv, origin=origin)))
                    done = [(row, tag, collect(p)) for row, tag, p in procs]
                    self.busy_during()
                    after = bed.delayline.snapshot()
                finally:
                    for proxy in proxies.values():
                        if proxy:
                            proxy.stop()
                dl = delayline_delta(before, after)
                self.env["discarded_late_shares"] = discarded
                if self.kept_time(", ".join(r.label for r in group), dl, attempt):
                    break
            done = [(row, tag, dict(r, env=dict(self.env))) for row, tag, r in done]
            overlaps += overlap_count([r for _row, _tag, r in done])
            results += done
            entries += origin_log(origin, mark)
            dl_total = add_deltas(dl_total, dl)
        return results, entries, overlaps, dl_total

    def paced(self, bed):
        args = self.args
        rtt = bed.rtt_ms / 1e3
        n, interval = args.paced_chunks, args.paced_interval
        ideal = self.ideal_chunk(rtt)
        results, entries, overlaps, dl = self.side_by_side(bed, "paced", n, interval, bed.origin)
        table = []
        for row, tag, result in results:
            times = chunk_times(result)
            conns, requests = origin_connections(entries, tag)
            extra = sum(times) - len(times) * ideal
            self.paced_extra[(bed.rtt_ms, row.label)] = extra / max(len(times), 1)
            values = {
                "rtt_ms": bed.rtt_ms, "rate_mbit": args.rate_mbit, "chunks": n,
                "interval_s": interval, "origin_connections": conns,
                "origin_requests": requests,
                "errors": len(errors_of(result)), "error_list": errors_of(result)[:5],
                "first_chunk_ms": ms(times[0]) if times else None,
                "median_chunk_ms": ms(median(times)), "max_chunk_ms": ms(max(times, default=None)),
                "ideal_chunk_ms": ms(ideal), "extra_per_chunk_ms": ms(extra / max(len(times), 1)),
                "chunk_ms": " ".join(f"{ms(t):.0f}" for t in times),
                "overlapping_chunk_pairs": overlaps, "emulator_late_share": late_share(dl),
            }
            self.record(bed, "paced", row, "", values, result, dl)
            table.append(dict(values, proxy=row.label))
        kpbench.print_table(
            f"paced: {n} chunks, one every {interval:g} s (start to start), RTT {bed.rtt_ms:g} ms; "
            f"chunk/rate + RTT = {ms(ideal):.2f} ms; rows ran side by side, phase-shifted "
            f"(chunk pairs of different rows in flight together: {overlaps}; "
            f"emulator late >1 ms: {late_share(dl) or 0:.2%} of packets)",
            [("proxy", "proxy", None), ("origin conns", "origin_connections", None),
             ("errors", "errors", None), ("first ms", "first_chunk_ms", "{:.0f}"),
             ("median ms", "median_chunk_ms", "{:.1f}"), ("max ms", "max_chunk_ms", "{:.0f}"),
             ("extra/chunk ms", "extra_per_chunk_ms", "{:.1f}"),
             ("per-chunk ms", "chunk_ms", None)], table)
        self.summary.append(("paced", bed.rtt_ms, table))

    def early_close(self, bed):
        args = self.args
        rtt = bed.rtt_ms / 1e3
        n, interval = args.early_chunks, args.early_interval
        ideal = self.ideal_chunk(rtt)
        results, entries, overlaps, dl = self.side_by_side(bed, "early-close", n, interval,
                                                           bed.origin_early)
        table = []
        for row, tag, result in results:
            times = chunk_times(result)
            conns, requests = origin_connections(entries, tag)
            extra = sum(times) - len(times) * ideal
            paced = self.paced_extra.get((bed.rtt_ms, row.label))
            values = {
                "rtt_ms": bed.rtt_ms, "rate_mbit": args.rate_mbit, "chunks": n,
                "interval_s": interval, "origin_keepalive_s": args.early_keepalive,
                "errors": len(errors_of(result)), "error_list": errors_of(result)[:5],
                "origin_connections": conns, "origin_requests": requests,
                "sum_chunk_s": sum(times),
                "extra_s": extra, "extra_per_chunk_ms": ms(extra / max(len(times), 1)),
                "paced_extra_per_chunk_ms": ms(paced),
                "median_chunk_ms": ms(median(times)), "max_chunk_ms": ms(max(times, default=None)),
                "overlapping_chunk_pairs": overlaps, "emulator_late_share": late_share(dl),
            }
            self.record(bed, "early-close", row, "", values, result, dl)
            table.append(dict(values, proxy=row.label))
        kpbench.print_table(
            f"early-close: origin closes idle connections after {args.early_keepalive:g} s, "
            f"{n} chunks one every {interval:g} s, RTT {bed.rtt_ms:g} ms; extra = sum of chunk "
            f"times - {n} x {ms(ideal):.2f} ms (pairs in flight together: {overlaps}; "
            f"emulator late >1 ms: {late_share(dl) or 0:.2%} of packets)",
            [("proxy", "proxy", None), ("errors", "errors", None),
             ("origin conns", "origin_connections", None),
             ("median ms", "median_chunk_ms", "{:.1f}"), ("max ms", "max_chunk_ms", "{:.0f}"),
             ("sum s", "sum_chunk_s", "{:.2f}"), ("extra s", "extra_s", "{:.2f}"),
             ("extra/chunk ms", "extra_per_chunk_ms", "{:.1f}"),
             ("paced extra/chunk ms", "paced_extra_per_chunk_ms", "{:.1f}")], table)
        self.summary.append(("early-close", bed.rtt_ms, table))

    def parallel(self, bed):
        args = self.args
        rtt = bed.rtt_ms / 1e3
        workers, n = args.parallel_workers, args.parallel_chunks
        total_bits = workers * n * self.chunk_bits
        link_bound = rtt + total_bits / self.rate_bps
        worker_bound = n * self.ideal_chunk(rtt)
        limit = max(link_bound, worker_bound)
        table = []
        rows = list(self.rows)
        rows.insert(1, Row("direct, 1 conn each", "reuse"))
        for row in rows:
            try:
                result, requests, conns, dl = self.sequential(
                    bed, "parallel", row, "", ["--chunks", n, "--workers", workers])
            except kpbench.ProxyStartError as e:
                skipped(row.label, e)
                continue
            times = chunk_times(result)
            _first, total = chunk_span(result)
            values = {
                "rtt_ms": bed.rtt_ms, "rate_mbit": args.rate_mbit, "workers": workers,
                "chunks_per_worker": n, "total_s": total, "limit_s": limit,
                "link_bound_s": link_bound, "worker_bound_s": worker_bound,
                "share_of_limit": limit / total, "origin_connections": conns,
                "origin_requests": requests,
                "errors": len(errors_of(result)), "error_list": errors_of(result)[:5],
                "median_chunk_ms": ms(median(times)),
                "queue_drops": dl["b_to_a"]["drops"] if dl else None,
                "busy_cores": self.env.get("busy_cores_during"),
                "emulator_late_share": late_share(dl),
            }
            self.record(bed, "parallel", row, "", values, result, dl)
            table.append(dict(values, proxy=row.label))
            print(f"  {row.label}: {total:.2f} s", flush=True)
        kpbench.print_table(
            f"parallel: {workers} downloaders x {n} chunks, each chunk a new connection, "
            f"RTT {bed.rtt_ms:g} ms; limit = max(RTT + all bytes / rate = {link_bound:.3f} s, "
            f"{n} x (chunk/rate + RTT) = {worker_bound:.3f} s) = {limit:.3f} s",
            [("proxy", "proxy", None), ("total s", "total_s", "{:.2f}"),
             ("% of limit", "share_of_limit", "{:.1%}"),
             ("median chunk ms", "median_chunk_ms", "{:.1f}"),
             ("origin conns", "origin_connections", None), ("errors", "errors", None),
             ("queue drops", "queue_drops", None), ("cpu busy", "busy_cores", "{:.2f}"),
             ("late>1ms", "emulator_late_share", "{:.2%}")], table)
        self.summary.append(("parallel", bed.rtt_ms, table))

    def overlap(self, bed):
        """Requests that start while earlier responses are still arriving,
        each on a new client connection, in rounds that begin with no
        pooled connection: whichever connection is ready first serves a
        request, against binding each request to the connect it caused.
        Two patterns: arrivals at a steady pace (a page loader finding
        resources), and downloaders that ask for the next range as soon as
        the previous response's head is in (yt-dlp -N)."""
        args = self.args
        rounds = args.overlap_rounds
        rows = list(self.base_rows)
        at = next((i for i, r in enumerate(rows) if r.name == "keepalive-proxy"), None)
        if at is not None:
            rows.insert(at + 1, Row("keepalive-proxy --no-connect-race", "builtin",
                                    "keepalive-proxy", extra=["--no-connect-race"]))
        rows = paired(args, rows)
        per_round = args.overlap_requests
        chained = args.overlap_workers * args.overlap_chain
        patterns = [
            (f"arrivals: {per_round} a round, one every {args.overlap_interval:g} s",
             per_round * rounds,
             ["--chunks", per_round * rounds, "--arrivals", "--interval", args.overlap_interval,
              "--round-size", per_round, "--round-gap", args.overlap_gap]),
            (f"chained: {args.overlap_workers} downloaders x {args.overlap_chain} a round, "
             f"next on the previous head", chained * rounds,
             ["--chunks", args.overlap_chain * rounds, "--workers", args.overlap_workers,
              "--chain", "--round-size", args.overlap_chain, "--round-gap",
              args.overlap_gap]),
        ]
        saved_chunk = args.chunk_size
        args.chunk_size = args.overlap_size
        try:
            for pattern, n, extra in patterns:
                table = [self.overlap_row(bed, row, pattern, n, extra) for row in rows]
                # Each binary against its own --no-connect-race row; direct
                # against the (new) last.
                binds = {r.get("binary"): r for r in table if "--no-connect-race" in r["proxy"]}
                for r in table:
                    bind = binds.get(r.get("binary")) or next(reversed(binds.values()), None)
                    if bind and bind.get("mean_ms") and r.get("mean_ms"):
                        r["saved_ms"] = bind["mean_ms"] - r["mean_ms"]
                kpbench.print_table(
                    f"overlap, {pattern}; {rounds} rounds of {args.overlap_size} B responses, "
                    f"each request on a new connection, each round cold (origin "
                    f"keepalive_timeout {args.early_keepalive:g} s); RTT {bed.rtt_ms:g} ms, "
                    f"{bed.rate_mbit:g} Mbit/s; saved = mean of the --no-connect-race row - mean",
                    [("proxy", "proxy", None), ("mean ms", "mean_ms", "{:.0f}"),
                     ("median ms", "median_ms", "{:.0f}"),
                     ("mean to head ms", "mean_head_ms", "{:.0f}"),
                     ("saved ms", "saved_ms", "{:.0f}"),
                     ("on freed-up", "freed_share", "{:.1%}"), ("new", "on_new", None),
                     ("pooled", "on_reused", None), ("freed", "on_freed", None),
                     ("connects", "connects", None), ("unused", "connects_unused", None),
                     ("origin conns", "origin_connections", None), ("errors", "errors", None)],
                    table)
                self.summary.append(("overlap", bed.rtt_ms, table))
        finally:
            args.chunk_size = saved_chunk

    def overlap_row(self, bed, row, pattern, n, extra):
        result, requests, conns, dl = self.sequential(
            bed, "overlap", row, f" {pattern.split(':')[0]}", extra, origin=bed.origin_early)
        done = [c for c in result["chunks"] if "error" not in c]
        times = [c["end"] - c["start"] for c in done]
        waits = [c["head"] - c["start"] for c in done]
        values = {
            "rtt_ms": bed.rtt_ms, "rate_mbit": bed.rate_mbit, "pattern": pattern,
            "requests": n, "response_bytes": self.args.overlap_size,
            "mean_ms": ms(statistics.mean(times)) if times else None,
            "median_ms": ms(median(times)),
            "mean_head_ms": ms(statistics.mean(waits)) if waits else None,
            "origin_connections": conns, "origin_requests": requests,
            "errors": len(errors_of(result)), "error_list": errors_of(result)[:5],
            "emulator_late_share": late_share(dl),
        }
        c = self.counters
        if c and c.get("requests"):
            values.update({
                "freed_share": c["freed-up"] / c["requests"], "on_new": c["new"],
                "on_reused": c["on reused"], "on_freed": c["freed-up"],
                "connects": c["connects"], "connects_unused": c["unused"],
            })
        self.record(bed, "overlap", row, f" {pattern}", values, result, dl)
        print(f"  {row.label}, {pattern}: mean {values['mean_ms'] or 0:.0f} ms per request",
              flush=True)
        return dict(values, proxy=row.label, binary=row.binary)

    def long_fat(self, bed):
        """One large download over a long fat path: direct and through the
        proxy, with the namespace's default buffer maxima, with raised ones,
        and with --upstream-rcvbuf. The origin side is tuned like a CDN
        (large send buffers); only the receiving side varies."""
        args = self.args
        rtt = bed.rtt_ms / 1e3
        raised = 128 << 20
        default_rmem = bed.kernel_defaults["net.ipv4.tcp_rmem"]
        default_wmem = bed.kernel_defaults["net.ipv4.tcp_wmem"]
        bed.sysctl(bed.ns_org, "net.ipv4.tcp_wmem", f"4096 16384 {2 * raised}")
        kp = next((r for r in self.base_rows if r.name == "keepalive-proxy"), None)
        rcv = args.longfat_rcvbuf
        # Debian 12's kernel (6.1) and most older ones stop autotuning at 6 MiB;
        # newer kernels at 32 MiB: both are measured, whatever this one does.
        old_rmem, old_wmem = "4096 131072 6291456", "4096 16384 4194304"
        settings = [
            (f"this kernel's maxima ({int(default_rmem.split()[2]) >> 20} MiB)", default_rmem,
             default_wmem, None),
            ("tcp_rmem max 6 MiB (older kernels)", old_rmem, old_wmem, None),
            (f"tcp_rmem/wmem max {raised >> 20} MiB", f"4096 131072 {raised}",
             f"4096 16384 {raised}", None),
            (f"6 MiB maxima, --upstream-rcvbuf {rcv >> 20} MiB", old_rmem, old_wmem, rcv),
        ]
        table = []
        for setting, rmem, wmem, rcvbuf in settings:
            bed.sysctl(bed.ns_cli, "net.ipv4.tcp_rmem", rmem)
            bed.sysctl(bed.ns_cli, "net.ipv4.tcp_wmem", wmem)
            rmem_max = rcvbuf or int(rmem.split()[2])
            rows = [Row("direct", "direct")] if rcvbuf is None else []
            if kp:
                rows.append(Row("keepalive-proxy" + (f" --upstream-rcvbuf {rcvbuf}" if rcvbuf
                                                     else ""), "builtin", "keepalive-proxy",
                                extra=["--upstream-rcvbuf", str(rcvbuf)] if rcvbuf else []))
            for row in paired(args, rows):
                result, _requests, conns, dl = self.sequential(
                    bed, "long-fat", row, f" {setting}", [], mode="stream", path=LONGFAT_FILE)
                steady = steady_mbit(result)
                # At most one receive buffer in flight per round trip; the
                # kernel advertises only part of it (the rest pays for its
                # bookkeeping), so the real cap is lower still.
                cap = rmem_max * 8 / rtt / 1e6
                values = {
                    "rtt_ms": bed.rtt_ms, "rate_mbit": bed.rate_mbit, "setting": setting,
                    "tcp_rmem": rmem, "upstream_rcvbuf": rcvbuf,
                    "bytes": result["bytes"], "total_s": result["end"] - result["start"],
                    "overall_mbit": result["bytes"] * 8 / (result["end"] - result["start"]) / 1e6,
                    "steady_mbit": steady, "share_of_rate": steady / bed.rate_mbit if steady
                    else None, "cap_mbit": cap, "origin_connections": conns,
                    "queue_drops": dl["b_to_a"]["drops"] if dl else None,
                    "emulator_late_share": late_share(dl),
                }
                result["chunks"] = [{"index": 0, "worker": 0, "due": result["start"],
                                     "start": result["start"],
                                     "end": result["end"], "bytes": result["bytes"]}]
                self.record(bed, "long-fat", row, f" {setting}", values, result, dl)
                table.append(dict(values, proxy=row.label))
                print(f"  {row.label}, {setting}: {steady or 0:.0f} Mbit/s steady", flush=True)
        bed.sysctl(bed.ns_cli, "net.ipv4.tcp_rmem", f"4096 131072 {bed.mem_max}")
        bed.sysctl(bed.ns_cli, "net.ipv4.tcp_wmem", f"4096 16384 {bed.mem_max}")
        kpbench.print_table(
            f"long-fat: one download of {args.longfat_size} B, RTT {bed.rtt_ms:g} ms, "
            f"{bed.rate_mbit:g} Mbit/s (bandwidth-delay product "
            f"{bed.rate_mbit * 1e6 / 8 * rtt / 1e6:.0f} MB); cap = receive buffer maximum / RTT; "
            f"steady = payload rate over the second half; overall = bytes / total time",
            [("proxy", "proxy", None), ("receive side", "setting", None),
             ("cap Mbit/s", "cap_mbit", "{:.0f}"), ("steady Mbit/s", "steady_mbit", "{:.0f}"),
             ("% of link", "share_of_rate", "{:.1%}"),
             ("overall Mbit/s", "overall_mbit", "{:.0f}"), ("total s", "total_s", "{:.2f}"),
             ("queue drops", "queue_drops", None), ("late>1ms", "emulator_late_share", "{:.2%}")],
            table)
        self.summary.append(("long-fat", bed.rtt_ms, table))

    # -----------------------------------------------------------------------
    # Client scenarios: real downloaders, every byte they write checked.

    def throttled(self, bed):
        """An origin that throttles whole-object answers to --pace-rate (no
        Range, or an open one, or a range over --pace-free-max) and serves
        bounded ranges at line rate, as some video sites do. Each client
        downloads the object once per row."""
        args = self.args
        self.client_scenario(
            bed, "throttled", args.throttled_clients, bed.own_origins["paced"], OBJECT,
            self.object_sha, 1,
            f"throttled: one download of {args.object_size} B per client and row; the origin "
            f"paces answers without a Range, with an open one or over {args.pace_free_max} B "
            f"to {args.pace_rate / 1e6:g} MB/s, bounded ranges at line rate")

    def lossy(self, bed):
        """The object from a plain origin over a path that loses packets at
        random: loss makes one run differ from the next, so each row has
        --lossy-repeats runs and shows their median and spread."""
        args = self.args
        self.client_scenario(
            bed, "lossy", args.lossy_clients, bed.own_origins["plain"], OBJECT, self.object_sha,
            args.lossy_repeats,
            f"lossy: {args.lossy_repeats} downloads of {args.object_size} B per client and row "
            f"from a plain origin, random loss {bed.loss_pct:g}% each way")

    def resets(self, bed):
        """An origin that cuts every answer longer than the cut with a RST:
        what counts is how many downloads complete byte-exact."""
        args = self.args
        cut = (f"{args.reset_bytes} B" if args.reset_bytes
               else f"{args.reset_share:.0%} of its body")
        if args.reset_bytes and args.reset_bytes >= args.object_size:
            print(f"  resets: the object ({args.object_size} B) is no longer than --reset-bytes "
                  f"({args.reset_bytes} B), so no answer is cut", flush=True)
        self.client_scenario(
            bed, "resets", args.resets_clients, bed.own_origins["reset"], OBJECT,
            self.object_sha, args.resets_downloads,
            f"resets: {args.resets_downloads} downloads of {args.object_size} B per client and "
            f"row; the origin resets every answer after {cut}")

    def hls_ytdlp(self, bed):
        """yt-dlp on the hls scenario's playlist: the playlist, then each
        segment a plain GET, on a new connection each (yt-dlp from PyPI
        without extras speaks HTTP through urllib, which keeps none)."""
        args = self.args

        def playlist(tag):
            return write_tagged_playlist(bed.origin.root, tag, args.chunks)

        self.client_scenario(
            bed, "hls-ytdlp", ["yt-dlp"], bed.origin, None, self.hls_sha, 1,
            f"hls-ytdlp: yt-dlp on a playlist of {args.chunks} segments of {args.chunk_size} B "
            f"(nginx origin; output = the segments concatenated)", prepare=playlist)

    def client_scenario(self, bed, scenario, names, origin, path, expected, repeats, title,
                        prepare=None):
        """Every client through every row, repeats downloads each; one
        table row per client and row."""
        clients = [self.clients[n] for n in names if n in self.clients]
        if not clients:
            print(f"  {scenario}: none of the clients {', '.join(names)} is available; skipped",
                  flush=True)
            return
        table = []
        for client in clients:
            direct = None
            for turn in turns(self.rows):
                measured = self.client_rows(bed, scenario, client, turn, origin, path, expected,
                                            repeats, prepare)
                for row, values in zip(turn, measured):
                    if row.kind == "direct":
                        direct = values["median_s"]
                    if direct and values["median_s"]:
                        values["speedup"] = direct / values["median_s"]
                    self.results.write(dict(values, **row.about, testbed=bed.info,
                                            verification=bed.verification))
                    table.append(values)
                    ok = values["median_s"]
                    print(f"  {client.name}, {row.label}: {values['ok']} exact"
                          + (f", median {ok:.2f} s" if ok else "")
                          + (f" ({values['note']})" if values.get("note") else ""), flush=True)
        spread = repeats > 1
        kpbench.print_table(
            f"{title}; RTT {bed.rtt_ms:g} ms, {bed.rate_mbit:g} Mbit/s; seconds = the client's "
            f"wall time, start-up included; speedup = direct's median / the row's; origin "
            f"columns summed over the runs; unbounded = requests the origin did not see as a "
            f"bounded range of at most {self.args.pace_free_max} B",
            [("client", "client", None), ("row", "proxy", None), ("exact", "ok", None),
             ("median s", "median_s", "{:.2f}"),
             *([("min s", "min_s", "{:.2f}"), ("max s", "max_s", "{:.2f}")] if spread else []),
             ("MB/s", "mbyte_s", "{:.1f}"), ("speedup", "speedup", "{:.1f}x"),
             ("start-up s", "startup_s", "{:.2f}"),
             ("origin reqs", "origin_requests", None), ("conns", "origin_connections", None),
             ("unbounded", "unbounded_requests", None), ("paced", "paced_answers", None),
             ("cut", "cut_answers", None), ("lost pkts", "lost_packets", None),
             ("late>1ms", "emulator_late_share", "{:.2%}"), ("note", "note", None)], table)
        self.summary.append((scenario, bed.rtt_ms, table))

    def client_rows(self, bed, scenario, client, rows, origin, path, expected, repeats,
                    prepare):
        """repeats downloads through each of rows, the rows taking turns
        (first, second, first, second, ...); the values of each row."""
        runs = {row.label: [] for row in rows}
        failures = {}
        for i in range(repeats):
            for row in rows:
                if row.label in failures:
                    continue
                try:
                    runs[row.label].append(self.client_run(bed, scenario, client, row, origin,
                                                           path, expected, i, prepare))
                except kpbench.ProxyStartError as e:
                    failures[row.label] = "proxy did not start: " + " | ".join(
                        x for x in str(e).splitlines()[1:] if x.strip())[:300]
        return [self.client_values(bed, scenario, client, row, runs[row.label],
                                   failures.get(row.label)) for row in rows]

    def client_run(self, bed, scenario, client, row, origin, path, expected, i, prepare):
        """The client's i-th download through row; again if the emulator
        fell behind."""
        args = self.args
        discarded = []
        for attempt in range(args.retries + 1):
            self.quiet()
            proxy = row.start(bed, args, self.workdir)
            self.downloads += 1
            out = self.workdir.join(f"download-{self.downloads}")
            log = self.workdir.join(f"client-{self.downloads}.log")
            tag = tag_for(scenario, row, bed.rtt_ms,
                          f"-{client.name}-{i}" + (f"-{attempt}" if attempt else ""))
            url = origin.url(prepare(tag) if prepare else path) + f"?run={tag}"
            counters = None
            try:
                mark = origin.log_mark()
                before = bed.delayline.snapshot()
                r = wan_clients.run_client(
                    bed.ns_cli, client, url, f"http://{proxy.address}" if proxy else None,
                    out, log, args.client_timeout)
                self.busy_during()
                after = bed.delayline.snapshot()
                if proxy and row.name == "keepalive-proxy":
                    counters = kpbench.keepalive_counters(proxy)
            finally:
                if proxy:
                    proxy.stop()
                if os.path.exists(out) and not args.keep_workdir:
                    os.unlink(out)
            dl = delayline_delta(before, after)
            self.env["discarded_late_shares"] = discarded
            if self.kept_time(f"{row.label}, {client.name}", dl, attempt):
                break
        r.update(origin_stats(origin, mark, tag, args.pace_free_max))
        r.update(url=url, exact=r["status"] == 0 and r["sha256"] == expected,
                 lost_packets=(dl["a_to_b"]["lost"] + dl["b_to_a"]["lost"]) if dl else None,
                 emulator_late_share=late_share(dl), delayline_delta=dl,
                 kp_counters=counters, env=dict(self.env))
        if not r["exact"]:
            r["why"] = (f"{r['bytes']} B written, not the object" if r["status"] == 0
                        else f"exit {r['status']}: "
                        + " ".join((r.get("output_tail") or "").split())[-160:])
        return r

    def client_values(self, bed, scenario, client, row, runs, failure):
        """One table row: a client's downloads through a row, summed up."""
        ok = [r["seconds"] for r in runs if r["exact"]]
        values = {
            "scenario": scenario, "client": client.name, "client_version": client.version,
            "client_program": client.program, "startup_s": client.startup_s,
            "proxy": row.label, "rtt_ms": bed.rtt_ms, "rate_mbit": bed.rate_mbit,
            "loss_pct": bed.loss_pct, "object_bytes": self.args.object_size,
            "runs": len(runs), "exact_runs": len(ok), "ok": f"{len(ok)}/{len(runs)}",
            "median_s": median(ok), "min_s": min(ok, default=None), "max_s": max(ok, default=None),
            "seconds_all": [r["seconds"] if r["exact"] else None for r in runs],
            "run_list": runs,
        }
        if ok and scenario != "hls-ytdlp":
            values["mbyte_s"] = self.args.object_size / median(ok) / 1e6
        elif ok:
            values["mbyte_s"] = self.args.chunks * self.args.chunk_size / median(ok) / 1e6
        for key in ("origin_requests", "origin_connections", "unbounded_requests",
                    "paced_answers", "cut_answers", "lost_packets"):
            found = [r[key] for r in runs if r.get(key) is not None]
            values[key] = sum(found) if found else None
        shares = [r["emulator_late_share"] for r in runs if r["emulator_late_share"] is not None]
        values["emulator_late_share"] = max(shares) if shares else None
        values["note"] = failure or next((r["why"] for r in runs if not r["exact"]), None)
        return values

    # ------------------------------------------------------------------
    # Through a parent proxy.

    def parent(self, bed):
        """Origins reached through a parent proxy (microsocks, dante, squid)
        beside the origin (the client's hops to it cross the path, as with
        ssh -D to a far server) or beside the client (the origin across the
        path, as an office proxy): the client straight through the parent,
        privoxy and squid forwarding to it, keepalive-proxy --parent, and
        keepalive-proxy without a parent on the same path."""
        args = self.args
        missing = sorted(k for k in set(args.parents) | {"privoxy"} if not daemon_program(k))
        for kind in missing:
            program, package = DAEMON_PROGRAMS[kind]
            print(f"  parent: {program} is not installed (Debian: apt-get install {package}); "
                  f"its rows are skipped", flush=True)
        parents = [p for p in args.parents if p not in missing]
        self.curl = shutil.which("curl") or shutil.which("curl", path="/usr/bin:/bin")
        if not self.curl:
            print("  parent: curl is not installed (Debian: apt-get install curl); skipped",
                  flush=True)
            return
        self.parent_targets = []
        for place in args.parent_place:
            if "chunks" in args.parent_parts:
                self.parent_chunks(bed, place, parents, "privoxy" not in missing)
            if "throttled" in args.parent_parts:
                self.parent_throttled(bed, place, parents)
            if "https" in args.parent_parts:
                self.parent_chunks(bed, place, parents, False, https=True)
        if self.parent_targets:
            kpbench.print_table(
                f"parent: targets, RTT {bed.rtt_ms:g} ms",
                [("parent beside", "place", None), ("parent", "parent", None),
                 ("target", "target", None), ("measured", "measured", None),
                 ("met", "met", None)], self.parent_targets)

    def parent_chunks(self, bed, place, parents, with_privoxy, https=False):
        """The chunks part; with https, the same ranges over HTTPS with
        keepalive-proxy intercepting the origin, its rows alone (no other
        proxy here opens the TLS), with and without each parent."""
        args = self.args
        n = args.chunks
        rtt = bed.rtt_ms / 1e3
        ideal = self.ideal_chunk(rtt)
        limit = n * ideal
        kp = "keepalive-proxy"
        if https:
            rows = [ParentRow("keepalive-proxy intercepting (no parent)", front=kp, https=True),
                    ParentRow("keepalive-proxy intercepting --read-ahead (no parent)", front=kp,
                              kp_args=["--read-ahead"], https=True)]
            for p in parents:
                rows += [ParentRow("keepalive-proxy intercepting --parent", parent=p, front=kp,
                                   https=True),
                         ParentRow("keepalive-proxy intercepting --parent --read-ahead", parent=p,
                                   front=kp, kp_args=["--read-ahead"], https=True)]
        else:
            rows = [ParentRow("direct (no proxy)"),
                    ParentRow("keepalive-proxy (no parent)", front=kp),
                    ParentRow("keepalive-proxy --read-ahead (no parent)", front=kp,
                              kp_args=["--read-ahead"])]
        for p in parents if not https else ():
            rows.append(ParentRow("straight through the parent", parent=p))
            if with_privoxy:
                rows.append(ParentRow("privoxy " + ("forward" if p == "squid"
                                                    else PRIVOXY_SOCKS[p]),
                                      parent=p, front="privoxy"))
            if p == "squid":
                rows.append(ParentRow("squid cache_peer parent", parent=p, front="squid"))
            rows += [ParentRow("keepalive-proxy --parent", parent=p, front=kp),
                     ParentRow("keepalive-proxy --parent --read-ahead", parent=p, front=kp,
                               kp_args=["--read-ahead"])]
        runs = {id(row): [] for row in rows}
        failed = set()
        for rep in range(args.parent_repeats):
            for row in rows:
                if id(row) in failed:
                    continue
                try:
                    values = self.parent_chunk_run(bed, place, row, rep, limit, ideal)
                except kpbench.ProxyStartError as e:
                    skipped(f"{row.parent or '-'}: {row.label}", e)
                    failed.add(id(row))
                    continue
                runs[id(row)].append(values)
                print(f"  beside the {place}, {row.parent or '-'}, {row.label} "
                      f"({values['client']}): {values['total_s']:.2f} s, {values['exact']} "
                      f"{'exact' if values['bytes_checked'] else 'whole'}, origin conns "
                      f"{values['origin_connections']}, parent sessions "
                      f"{values.get('parent_sessions', '-')}", flush=True)
        table = []
        for row in rows:
            done = runs[id(row)]
            if not done:
                continue
            totals = [v["total_s"] for v in done]
            table.append({
                "parent": row.parent or "-", "proxy": row.label, "runs": len(done),
                "client": done[0]["client"],
                "total_s": median(totals), "min_s": min(totals), "max_s": max(totals),
                "share_of_limit": limit / median(totals),
                "median_chunk_ms": median([v["median_chunk_ms"] for v in done
                                           if v["median_chunk_ms"] is not None]),
                "first_chunk_ms": median([v["first_chunk_ms"] for v in done
                                          if v["first_chunk_ms"] is not None]),
                "ok": f"{sum(n - v['errors'] for v in done)}/{n * len(done)}",
                "errors": sum(v["errors"] for v in done),
                "parent_cpu_s": median([v["parent_cpu_s"] for v in done
                                        if v["parent_cpu_s"] is not None]),
                "origin_connections": joined(v["origin_connections"] for v in done),
                "parent_sessions": joined(v.get("parent_sessions") for v in done),
                "emulator_late_share": max((v["emulator_late_share"] or 0) for v in done),
            })
        spread = args.parent_repeats > 1
        kpbench.print_table(
            f"parent beside the {place}{', HTTPS intercepted' if https else ''}: "
            f"{n} x {args.chunk_size} B, each on a new client "
            f"connection, RTT {bed.rtt_ms:g} ms, {bed.rate_mbit:g} Mbit/s; "
            f"L = {limit:.3f} s; " + (f"median of {args.parent_repeats} runs; " if spread else "")
            + "parent sessions: SOCKS sessions, or client connections to squid",
            [("parent", "parent", None), ("row", "proxy", None), ("client", "client", None),
             ("total s", "total_s", "{:.2f}"),
             *([("min s", "min_s", "{:.2f}"), ("max s", "max_s", "{:.2f}")] if spread else []),
             ("% of L", "share_of_limit", "{:.1%}"),
             ("median chunk ms", "median_chunk_ms", "{:.1f}"),
             ("first chunk ms", "first_chunk_ms", "{:.0f}"),
             ("ok", "ok", None), ("origin conns", "origin_connections", None),
             ("parent sessions", "parent_sessions", None),
             ("parent cpu s", "parent_cpu_s", "{:.2f}"),
             ("late>1ms", "emulator_late_share", "{:.2%}")], table)
        self.parent_chunk_targets(place, parents, table, "intercepting " if https else "")

    def parent_chunk_targets(self, place, parents, table, mode=""):
        def total(parent, label):
            return next((r["total_s"] for r in table
                         if r["parent"] == parent and r["proxy"] == label), None)

        def add(parent, target, measured, met):
            self.parent_targets.append({"place": place, "parent": parent, "target": target,
                                        "measured": measured,
                                        "met": "-" if met is None else "yes" if met else "NO"})

        base = total("-", f"keepalive-proxy {mode}(no parent)")
        base_ra = total("-", f"keepalive-proxy {mode}--read-ahead (no parent)")
        for p in parents:
            for label, ref, what in (
                    (f"keepalive-proxy {mode}--parent", base, "without a parent"),
                    (f"keepalive-proxy {mode}--parent --read-ahead", base_ra,
                     "--read-ahead without a parent")):
                mine = total(p, label)
                if mine and ref:
                    add(p, f"{label}: within 10% of {what}",
                        f"{mine:.2f} s vs {ref:.2f} s ({mine / ref - 1:+.1%})", mine <= 1.1 * ref)
            mine = total(p, "keepalive-proxy --parent --read-ahead")
            privoxy = next((r["total_s"] for r in table
                            if r["parent"] == p and r["proxy"].startswith("privoxy")), None)
            if mine and privoxy:
                add(p, "--parent --read-ahead: at most half of privoxy's time",
                    f"{mine:.2f} s vs {privoxy:.2f} s ({mine / privoxy:.0%})",
                    mine <= 0.5 * privoxy)

    def parent_client(self, row):
        if row.https:
            return "model"   # the curl per chunk speaks plain HTTP only here
        return "curl" if self.args.parent_client == "curl" or row.socks_straight else "model"

    def parent_chunk_run(self, bed, place, row, rep, limit, ideal):
        """One run of a chunks row: its daemons up, the downloader (the
        model one, or a curl per chunk), its daemons down; again if the
        emulator fell behind."""
        args = self.args
        n, size = args.chunks, args.chunk_size
        client = self.parent_client(row)
        discarded = []
        for attempt in range(args.retries + 1):
            self.quiet()
            running = row.start(self, bed, place)
            counters = None
            try:
                tag = tag_for("parent", row, bed.rtt_ms,
                              f"-{place}-{row.parent or 'none'}-{rep}"
                              + (f"-{attempt}" if attempt else ""))
                origin = bed.origin_tls if row.https else bed.origin
                mark = origin.log_mark()
                before = bed.delayline.snapshot()
                if client == "curl":
                    outdir = self.workdir.join(f"chunks-{tag}")
                    os.makedirs(outdir, exist_ok=True)
                    spec = {"curl": self.curl, "chunks": n, "chunk_size": size, "max_time": 60,
                            "url": bed.origin.url(FILE) + f"?run={tag}",
                            "proxy_args": running.curl_args, "dir": outdir,
                            "expect": os.path.join(bed.origin.root, FILE)}
                    proc = subprocess.Popen(
                        kpbench.netns_argv(bed.ns_cli, [sys.executable,
                                                        os.path.realpath(__file__),
                                                        "--curl-chunks", json.dumps(spec)]),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    DOWNLOADERS.add(proc)
                else:
                    proc = bed.download("chunks", "--path", f"/{FILE}?run={tag}",
                                        "--chunk-size", size, "--chunks", n,
                                        *(["--proxy", running.http_proxy]
                                          if running.http_proxy else []),
                                        *(["--tls", "--cafile", bed.pki.bundle]
                                          if row.https else []), origin=origin)
                result = collect(proc, timeout=n * 70 + 60)
                self.busy_during()
                after = bed.delayline.snapshot()
                if running.kp:
                    counters = kpbench.keepalive_counters(running.kp)
                running.sample_cpu()
            finally:
                running.stop()
            dl = delayline_delta(before, after)
            self.env["discarded_late_shares"] = discarded
            if self.kept_time(f"{row.parent or '-'}, {row.label}", dl, attempt):
                break
        conns, requests = origin_connections(origin_log(origin, mark), tag)
        chunks = result["chunks"]
        for c in chunks:
            if client == "model" and "error" not in c:
                c.update(curl_s=c["end"] - c["start"], head_s=c["head"] - c["start"],
                         connect_s=c["connected"] - c["start"])
        ok = [c for c in chunks if "error" not in c]
        times = [c["curl_s"] for c in ok]
        total = max(c["end"] for c in chunks) - min(c["start"] for c in chunks)
        t0 = min(c["start"] for c in chunks)
        values = {
            "scenario": "parent", "part": "https" if row.https else "chunks", "place": place,
            "parent": row.parent,
            "proxy": row.label, "client": client, "rep": rep, "rtt_ms": bed.rtt_ms,
            "rate_mbit": bed.rate_mbit, "chunk_count": n, "chunk_size": size, "total_s": total,
            "fetch_sum_s": sum(c.get("curl_s", 0) for c in chunks),
            "curl_startup_s": result.get("curl_startup_s"), "cpu_s": running.cpu,
            "parent_cpu_s": running.cpu.get("parent"),
            "bytes_checked": client == "curl",
            "limit_s": limit, "share_of_limit": limit / total,
            "median_chunk_ms": ms(median(times)), "ideal_chunk_ms": ms(ideal),
            "first_chunk_ms": ms(chunks[0].get("curl_s")) if "error" not in chunks[0] else None,
            "exact": f"{len(ok)}/{n}", "errors": n - len(ok),
            "error_list": [f"chunk {c['index']}: {c['error']}" for c in chunks
                           if "error" in c][:8],
            "origin_connections": conns, "origin_requests": requests,
            "parent_url": running.parent_url, "front_config": running.front_config,
            "curl_args": running.curl_args if client == "curl" else None,
            "http_proxy": running.http_proxy, "kp_counters": counters,
            "queue_drops": dl["b_to_a"]["drops"] if dl else None,
            "emulator_late_share": late_share(dl), "delayline_delta": dl,
            "busy_cores": self.env.get("busy_cores_during"), "env": dict(self.env),
            "testbed": bed.info, "verification": bed.verification,
            "chunks": [{"index": c["index"], "start_ms": round(ms(c["start"] - t0), 3),
                        "process_ms": round(ms(c["end"] - c["start"]), 3),
                        "ms": round(ms(c["curl_s"]), 3) if "curl_s" in c else None,
                        "head_ms": round(ms(c["head_s"]), 3) if "head_s" in c else None,
                        "connect_ms": round(ms(c["connect_s"]), 3) if "connect_s" in c else None,
                        "bytes": c.get("bytes"), "error": c.get("error")} for c in chunks],
        }
        if running.parent:
            values.update({f"parent_{k}": v for k, v in parent_sessions(running.parent).items()})
        if running.front and running.front.kind == "squid":
            values.update({f"front_{k}": v for k, v in parent_sessions(running.front).items()})
        if running.kp_log:
            values["kp_log_tail"] = kpbench.tail_of(running.kp_log, 10)
        if values["errors"]:
            values["logs"] = daemon_logs(running)
        self.results.write(values)
        return values

    def parent_throttled(self, bed, place, parents):
        """The throttled scenario's object (the origin paces whole answers to
        --pace-rate) through each parent: curl straight through the parent,
        and curl through keepalive-proxy --parent URL --split ORIGIN."""
        args = self.args
        origin = bed.own_origins["paced"]
        curl = self.curl

        def argv(url, proxy_args, out, timeout):
            return [curl, "-q", "-sS", "-f", "--max-time", f"{timeout:g}", "-o", out,
                    *proxy_args, url]
        client = wan_clients.Client("curl", curl, argv, [curl, "--version"])
        client.probe()
        kp, split = "keepalive-proxy", ["--split", ORG_ADDR]
        rows = [ParentRow(f"keepalive-proxy --split {ORG_ADDR} (no parent)", front=kp,
                          kp_args=split)]
        for p in parents:
            rows += [ParentRow("curl straight through the parent", parent=p),
                     ParentRow(f"keepalive-proxy --parent --split {ORG_ADDR}", parent=p,
                               front=kp, kp_args=split)]
        table = []
        straight = {}
        for row in rows:
            try:
                values = self.parent_throttled_run(bed, place, row, client, origin)
            except kpbench.ProxyStartError as e:
                skipped(f"{row.parent or '-'}: {row.label}", e)
                continue
            if row.front is None:
                straight[row.parent] = values["seconds"] if values["exact"] else None
            elif straight.get(row.parent) and values["exact"]:
                values["speedup"] = straight[row.parent] / values["seconds"]
                self.parent_targets.append({
                    "place": place, "parent": row.parent,
                    "target": "throttled, --parent --split: >= 15x curl straight through "
                              "the parent",
                    "measured": f"{values['seconds']:.2f} s vs {straight[row.parent]:.2f} s "
                                f"({values['speedup']:.1f}x)",
                    "met": "yes" if values["speedup"] >= 15 else "NO"})
            self.results.write(values)
            table.append(values)
            print(f"  beside the {place}, {row.parent or '-'}, {row.label}: "
                  f"{values['seconds']:.2f} s, exact {values['exact']}", flush=True)
        kpbench.print_table(
            f"parent beside the {place}, throttled origin: one download of "
            f"{args.object_size} B by curl; the origin paces answers without a bounded range "
            f"of at most {args.pace_free_max} B to {args.pace_rate / 1e6:g} MB/s; "
            f"speedup = curl straight through the same parent / the row",
            [("parent", "parent", None), ("row", "proxy", None), ("exact", "exact", None),
             ("seconds", "seconds", "{:.2f}"), ("MB/s", "mbyte_s", "{:.1f}"),
             ("speedup", "speedup", "{:.1f}x"), ("origin reqs", "origin_requests", None),
             ("conns", "origin_connections", None),
             ("unbounded", "unbounded_requests", None), ("paced", "paced_answers", None),
             ("parent sessions", "parent_sessions", None),
             ("parent cpu s", "parent_cpu_s", "{:.2f}"),
             ("late>1ms", "emulator_late_share", "{:.2%}")], table)

    def parent_throttled_run(self, bed, place, row, client, origin):
        args = self.args
        discarded = []
        for attempt in range(args.retries + 1):
            self.quiet()
            running = row.start(self, bed, place)
            self.downloads += 1
            out = self.workdir.join(f"download-{self.downloads}")
            log = self.workdir.join(f"client-{self.downloads}.log")
            tag = tag_for("parent-throttled", row, bed.rtt_ms,
                          f"-{place}-{row.parent or 'none'}" + (f"-{attempt}" if attempt else ""))
            url = origin.url(OBJECT) + f"?run={tag}"
            counters = None
            try:
                mark = origin.log_mark()
                before = bed.delayline.snapshot()
                r = wan_clients.run_client(bed.ns_cli, client, url, running.curl_args, out, log,
                                           args.client_timeout)
                self.busy_during()
                after = bed.delayline.snapshot()
                if running.kp:
                    counters = kpbench.keepalive_counters(running.kp)
                running.sample_cpu()
            finally:
                running.stop()
                if os.path.exists(out) and not args.keep_workdir:
                    os.unlink(out)
            dl = delayline_delta(before, after)
            self.env["discarded_late_shares"] = discarded
            if self.kept_time(f"{row.parent or '-'}, {row.label}", dl, attempt):
                break
        r.update(origin_stats(origin, mark, tag, args.pace_free_max))
        exact = r["status"] == 0 and r["sha256"] == self.object_sha
        r.update({
            "scenario": "parent", "part": "throttled", "place": place, "parent": row.parent,
            "proxy": row.label, "client": client.name, "client_version": client.version,
            "rtt_ms": bed.rtt_ms, "rate_mbit": bed.rate_mbit, "url": url,
            "object_bytes": args.object_size, "exact": exact,
            "mbyte_s": args.object_size / r["seconds"] / 1e6 if exact else None,
            "parent_url": running.parent_url, "front_config": running.front_config,
            "curl_args": running.curl_args, "kp_counters": counters, "cpu_s": running.cpu,
            "parent_cpu_s": running.cpu.get("parent"),
            "emulator_late_share": late_share(dl), "delayline_delta": dl, "env": dict(self.env),
            "testbed": bed.info, "verification": bed.verification})
        if running.parent:
            r.update({f"parent_{k}": v for k, v in parent_sessions(running.parent).items()})
        if running.kp_log:
            r["kp_log_tail"] = kpbench.tail_of(running.kp_log, 10)
        if not exact:
            r["why"] = (f"{r['bytes']} B written, not the object" if r["status"] == 0
                        else f"exit {r['status']}: "
                        + " ".join((r.get("output_tail") or "").split())[-160:])
            r["logs"] = daemon_logs(running)
        return r

    # ------------------------------------------------------------------
    # Several clients after the same bytes.

    def share(self, bed):
        """What the origin pays when several clients ask for the same bytes
        at about the same time: the baseline for a proxy that would share
        one origin fetch between them. clients: --share-clients curls,
        --share-gap apart, each a plain GET of the same file on a
        connection of its own; probe-and-play: a media player's probe
        (Range: bytes=0-1) and its whole GET at the same moment. Direct,
        through keepalive-proxy with and without --read-ahead, and through
        a squid that caches (SQUID_CACHE_LINES), which may serve a later
        client from what it stored for an earlier one: its access log's
        codes (TCP_MISS, TCP_HIT, TCP_MEM_HIT) say so. Every run gets a
        tag of its own, so the origin's log counts its requests and their
        body bytes alone; every client's bytes are checked."""
        args = self.args
        self.curl = shutil.which("curl") or shutil.which("curl", path="/usr/bin:/bin")
        if not self.curl:
            print("  share: curl is not installed (Debian: apt-get install curl); skipped",
                  flush=True)
            return
        kp = "keepalive-proxy"
        rows = paired(args, [Row("direct", "direct"), Row(kp, "builtin", kp),
                             Row(f"{kp} --read-ahead", "builtin", kp, extra=["--read-ahead"])])
        if daemon_program("squid"):
            rows.append(Row("squid (caching)", "squid-cache", "squid"))
        else:
            print("  share: squid is not installed (Debian: apt-get install squid); its row is "
                  "skipped", flush=True)
        runs, failed = [], set()
        for rep in range(args.share_repeats):
            for part in args.share_parts:
                for row in rows:
                    if row.label in failed:
                        continue
                    try:
                        values = self.share_run(bed, row, part, rep)
                    except kpbench.ProxyStartError as e:
                        skipped(row.label, e)
                        failed.add(row.label)
                        continue
                    runs.append(values)
                    print(f"  {row.label}, {part}, run {rep + 1}: origin "
                          f"{values['origin_requests']} requests, "
                          f"{values['files_worth'] or 0:.2f} files' worth, "
                          f"{values['total_s']:.2f} s, exact {values['exact']}"
                          + (f", squid {values['squid_codes_summary']}"
                             if values.get("squid_codes_summary") else ""), flush=True)
        order = {row.label: i for i, row in enumerate(rows)}
        runs.sort(key=lambda v: (SHARE_PARTS.index(v["part"]), order[v["proxy"]], v["rep"]))
        kpbench.print_table(
            f"share: one file of {args.share_size} B; clients: {args.share_clients} curls "
            f"{args.share_gap:g} s apart, each a plain GET; probe-and-play: a probe (bytes 0-1) "
            f"and a whole GET at the same moment; each client on a connection of its own, "
            f"RTT {bed.rtt_ms:g} ms, {bed.rate_mbit:g} Mbit/s. Origin bytes: nginx's "
            f"$body_bytes_sent for the run's requests; files' worth = origin bytes / file size. "
            f"squid caches in memory ({', '.join(SQUID_CACHE_LINES)}; collapsed_forwarding off, "
            f"its default)",
            [("row", "proxy", None), ("part", "part", None), ("run", "run", None),
             ("origin reqs", "origin_requests", None),
             ("origin conns", "origin_connections", None),
             ("statuses", "origin_statuses", None),
             ("origin bytes", "origin_body_bytes", None),
             ("files' worth", "files_worth", "{:.2f}"), ("total s", "total_s", "{:.2f}"),
             ("client s", "client_s_text", None), ("exact", "exact", None),
             ("squid codes", "squid_codes_summary", None),
             ("late>1ms", "emulator_late_share", "{:.2%}")], runs)

    def share_proxy(self, bed, row):
        """The row's proxy, started for one run (None: direct)."""
        if row.kind == "squid-cache":
            return start_squid(self.workdir, bed.ns_cli, "127.0.0.1",
                               cache_lines=SQUID_CACHE_LINES)
        return row.start(bed, self.args, self.workdir)

    def share_run(self, bed, row, part, rep):
        """One run of a row and part: its proxy up (a fresh one, with an
        empty cache), the clients (share_fetch, in the client's
        namespace), the proxy down; again if the emulator fell behind.
        Writes the JSON row and returns it."""
        args = self.args
        size = args.share_size
        if part == "clients":
            clients = [{"name": f"client {i + 1}", "offset": i * args.share_gap, "range": None}
                       for i in range(args.share_clients)]
        else:
            clients = [{"name": "probe", "offset": 0.0, "range": "0-1"},
                       {"name": "player", "offset": 0.0, "range": None}]
        discarded = []
        for attempt in range(args.retries + 1):
            self.quiet()
            proxy = self.share_proxy(bed, row)
            counters = None
            kp_log = proxy.process.log_path if row.kind == "builtin" else None
            try:
                tag = tag_for("share", row, bed.rtt_ms,
                              f"-{part}-{rep}" + (f"-{attempt}" if attempt else ""))
                url = bed.origin.url(SHARE_FILE) + f"?run={tag}"
                curl_args = (["--proxy", f"http://{proxy.address}"] if proxy
                             else ["--noproxy", "*"])
                outdir = self.workdir.join(f"share-{tag}")
                os.makedirs(outdir, exist_ok=True)
                spec = {"curl": self.curl, "url": url, "proxy_args": curl_args, "dir": outdir,
                        "max_time": args.client_timeout, "clients": clients,
                        "expect": os.path.join(bed.origin.root, SHARE_FILE), "size": size,
                        "sha256": self.share_sha, "keep": args.keep_workdir}
                mark = bed.origin.log_mark()
                before = bed.delayline.snapshot()
                proc = subprocess.Popen(
                    kpbench.netns_argv(bed.ns_cli, [sys.executable, os.path.realpath(__file__),
                                                    "--share-fetch", json.dumps(spec)]),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                DOWNLOADERS.add(proc)
                result = collect(proc, timeout=args.client_timeout + 60)
                self.busy_during()
                after = bed.delayline.snapshot()
                if proxy and row.name == "keepalive-proxy":
                    counters = kpbench.keepalive_counters(proxy)
            finally:
                if proxy:
                    proxy.stop()
            if not args.keep_workdir and os.path.isdir(outdir) and not os.listdir(outdir):
                os.rmdir(outdir)
            dl = delayline_delta(before, after)
            self.env["discarded_late_shares"] = discarded
            if self.kept_time(f"{row.label}, {part}", dl, attempt):
                break
        # A request the proxy's stop cut short is logged once nginx sees
        # the connection gone: a few round trips.
        time.sleep(max(0.3, 4 * bed.rtt_ms / 1e3))
        transfers = origin_transfers(bed.origin, mark, tag)
        bodies = [t["body_bytes"] for t in transfers]
        body = sum(bodies) if None not in bodies else None
        done = result["clients"]
        t0 = min(c["start"] for c in done)
        ok = [c for c in done if "error" not in c]
        values = {
            "scenario": "share", "part": part, "proxy": row.label, **row.about,
            "kp_args": row.extra if row.name == "keepalive-proxy" else None,
            "rep": rep, "run": rep + 1, "rtt_ms": bed.rtt_ms, "rate_mbit": bed.rate_mbit,
            "file_bytes": size, "file_sha256": self.share_sha, "client_count": len(done),
            "gap_s": args.share_gap if part == "clients" else 0.0, "url": url,
            "curl_args": curl_args,
            "origin_requests": len(transfers),
            "origin_connections": len({t["conn"] for t in transfers}),
            "origin_statuses": ",".join(t["status"] for t in transfers) or "-",
            "origin_body_bytes": body,
            "origin_bytes_sent": sum(t["bytes_sent"] or 0 for t in transfers),
            "files_worth": round(body / size, 2) if body is not None else None,
            "origin_transfers": transfers,
            "total_s": max(c["end"] for c in done) - t0,
            "client_s": [c.get("curl_s") for c in done],
            "client_s_text": " ".join("-" if c.get("curl_s") is None else f"{c['curl_s']:.2f}"
                                      for c in done),
            "exact": f"{len(ok)}/{len(done)}", "errors": len(done) - len(ok),
            "error_list": [f"{c['name']}: {c['error']}" for c in done if "error" in c],
            "clients": [{"name": c["name"], "range": c["range"],
                         "start_ms": round(ms(c["start"] - t0), 3),
                         "process_ms": round(ms(c["end"] - c["start"]), 3),
                         "ms": round(ms(c["curl_s"]), 3) if "curl_s" in c else None,
                         "head_ms": round(ms(c["head_s"]), 3) if "head_s" in c else None,
                         "connect_ms": round(ms(c["connect_s"]), 3) if "connect_s" in c else None,
                         "status": c.get("status"), "bytes": c.get("bytes"),
                         "sha256": c.get("sha256"), "error": c.get("error")} for c in done],
            "kp_counters": counters,
            "queue_drops": dl["b_to_a"]["drops"] if dl else None,
            "emulator_late_share": late_share(dl), "delayline_delta": dl,
            "busy_cores": self.env.get("busy_cores_during"), "env": dict(self.env),
            "testbed": bed.info, "verification": bed.verification,
        }
        if row.kind == "squid-cache":
            # Its access log (kp format): time, client, code/status, method,
            # URL, server side. squid logs URLs without their query
            # (strip_query_terms), but each run has a squid of its own: its
            # requests for the file are the run's.
            lines = [line for line in proxy.read("access.log").splitlines()
                     if len(line.split()) >= 5 and f"/{SHARE_FILE}" in line.split()[4]]
            codes = [line.split()[2] for line in lines]
            values.update({
                "squid_config": list(SQUID_CACHE_LINES), "squid_log": lines,
                "squid_codes": codes,
                "squid_codes_summary": " ".join(f"{code}x{codes.count(code)}"
                                                for code in dict.fromkeys(codes)) or "-",
            })
        if kp_log:
            values["kp_log_tail"] = kpbench.tail_of(kp_log, 20 if values["errors"] else 10)
        self.results.write(values)
        return values


def skipped(label, error):
    """A row whose proxy did not start (a flag it does not know yet, say):
    said, and left out of the table, while the run goes on."""
    lines = [x for x in str(error).splitlines()[1:] if x.strip()]
    print(f"  {label}: skipped, the proxy did not start: {' | '.join(lines)[:300]}",
          flush=True)


def origin_stats(origin, mark, tag, free_max):
    """What the origin saw of one download: requests, connections, and
    from the bench's own origin what kind of requests they were."""
    if not isinstance(origin, OwnOrigin):
        conns, requests = origin_connections(origin_log(origin, mark), tag)
        return {"origin_requests": requests, "origin_connections": conns}
    reqs = origin.requests_since(mark, tag)
    gets = [r for r in reqs if r.get("method") == "GET"]
    bounded = [r["length"] for r in gets if r.get("range_kind") in ("bounded", "suffix")]
    return {
        "origin_requests": len(reqs),
        "origin_connections": len({r["conn"] for r in reqs}),
        "unbounded_requests": sum(
            not wan_origin.is_bounded(r.get("range_kind"), r.get("first"), r.get("last"),
                                      free_max) for r in gets),
        "paced_answers": sum(bool(r.get("paced")) for r in reqs),
        "cut_answers": sum(r.get("outcome") == "reset" for r in reqs),
        "if_range_requests": sum(bool(r.get("if_range")) for r in reqs),
        "max_range_bytes": max(bounded, default=None),
        "origin_body_bytes": sum(r.get("sent") or 0 for r in reqs),
        # What was asked, in order: connection, Range (- for none), If-Range, outcome.
        "origin_request_list": [
            f"c{r['conn']} {r.get('method')} {r.get('range') or '-'}"
            + (" if-range" if r.get("if_range") else "") + f" {r.get('status')}"
            + (f" {r.get('outcome')}" if r.get("outcome") not in (None, "ok") else "")
            for r in reqs][:200],
    }


def steady_mbit(stream):
    """Payload rate of a stream download over its second half, Mbit/s."""
    samples = stream.get("samples") or []
    if not samples:
        return None
    t0, t_end = stream["head"], stream["end"]
    mid_time = t0 + (t_end - t0) / 2
    mid = next((x for x in samples if x[0] >= mid_time), None)
    if not mid or t_end <= mid[0]:
        return None
    return (stream["bytes"] - mid[1]) * 8 / (t_end - mid[0]) / 1e6


def print_targets(summary):
    """keepalive-proxy against the numbers the project holds it to. A
    check with a fourth element applies only to the rows it accepts."""
    def split(r):
        return "--split" in r["proxy"]

    def exact(r):
        return r["runs"] > 0 and r["exact_runs"] == r["runs"]

    def speedup(r):
        return f"{r['speedup']:.1f}x" if r.get("speedup") else "-"

    checks = {
        "back-to-back": [
            ("total >= 92% of L", lambda r: r["share_of_limit"] >= 0.92,
             lambda r: f"{r['share_of_limit']:.1%}"),
            ("median chunk <= 1.03 x (chunk/rate + RTT)", lambda r: r["median_over_ideal"] <= 1.03,
             lambda r: f"{r['median_over_ideal']:.3f}"),
            ("1 origin connection", lambda r: r["origin_connections"] == 1,
             lambda r: str(r["origin_connections"])),
        ],
        "paced": [("1 origin connection", lambda r: r["origin_connections"] == 1,
                   lambda r: str(r["origin_connections"]))],
        "early-close": [("0 errors", lambda r: r["errors"] == 0, lambda r: str(r["errors"]))],
        "parallel": [
            ("<= 4 origin connections", lambda r: r["origin_connections"] <= 4,
             lambda r: str(r["origin_connections"])),
            (">= 90% of the limit", lambda r: r["share_of_limit"] >= 0.90,
             lambda r: f"{r['share_of_limit']:.1%}"),
        ],
        "overlap": [("0 errors", lambda r: r["errors"] == 0, lambda r: str(r["errors"]))],
        # Tunnelled, keepalive-proxy is a tunnel like any other; intercepting, it pools.
        "https": [
            ("intercepting: 1 origin connection",
             lambda r: "intercepting" not in r["proxy"] or r["origin_connections"] == 1,
             lambda r: str(r["origin_connections"])),
        ],
        "throttled": [
            ("byte-exact", exact, lambda r: r["ok"]),
            (">= 15x direct", lambda r: (r.get("speedup") or 0) >= 15, speedup, split),
            ("only bounded ranges at the origin", lambda r: r["unbounded_requests"] == 0,
             lambda r: ("-" if r["unbounded_requests"] is None
                        else f"{r['unbounded_requests']} unbounded"), split),
        ],
        "lossy": [
            ("byte-exact", exact, lambda r: r["ok"]),
            ("median >= 3x direct", lambda r: (r.get("speedup") or 0) >= 3, speedup, split),
        ],
        "resets": [
            ("every download complete and byte-exact", exact, lambda r: r["ok"], split),
        ],
        "hls-ytdlp": [("byte-exact", exact, lambda r: r["ok"])],
    }
    rows = []
    for scenario, rtt, table in summary:
        for r in table:
            if not r["proxy"].startswith("keepalive-proxy"):
                continue
            for name, test, show, *applies in checks.get(scenario, ()):
                if applies and not applies[0](r):
                    continue
                row = r["proxy"] + (f", {r['client']}" if "client" in r else "")
                rows.append({"scenario": scenario, "rtt": f"{rtt:g} ms", "row": row,
                             "target": name, "measured": show(r),
                             "met": "yes" if test(r) else "NO"})
    if rows:
        kpbench.print_table("targets (keepalive-proxy)",
                            [("scenario", "scenario", None), ("RTT", "rtt", None),
                             ("row", "row", None), ("target", "target", None),
                             ("measured", "measured", None), ("met", "met", None)], rows)


# ---------------------------------------------------------------------------
# Emulator verification, printed with every run.

def verify(bed, args, long_size):
    wait_quiet(args)
    rtt = collect(bed.download("rtt", "--count", 10))
    connect_ms = sorted(ms(t) for t in rtt["connect_s"])
    ping = bed.ns(bed.ns_cli, "ping", "-q", "-c", "10", "-i", "0.2", ORG_ADDR, check=False).stdout
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", ping)
    ping_avg = float(m.group(2)) if m else None
    before = bed.delayline.snapshot()
    cpu_before, t_before = kpbench.cpu_seconds(bed.delayline.proc.pid), time.monotonic()
    long_path = LONGFAT_FILE if "long-fat" in bed.scenarios else LONG_FILE
    # Sized for about 5 s at the rate; on a lossy path that can take minutes,
    # so the check stops reading after 15 s.
    stream = collect(bed.download("stream", "--path", f"/{long_path}", "--max-seconds", 15))
    emulator_cores = ((kpbench.cpu_seconds(bed.delayline.proc.pid) - cpu_before)
                      / (time.monotonic() - t_before))
    after = bed.delayline.snapshot()
    samples = stream["samples"]
    t0, t_end = stream["head"], stream["end"]
    total_rate = stream["bytes"] * 8 / (t_end - stream["start"]) / 1e6
    # The second half of the transfer: slow start is long over by then.
    mid_time = t0 + (t_end - t0) / 2
    mid = next(s for s in samples if s[0] >= mid_time)
    steady = (stream["bytes"] - mid[1]) * 8 / (t_end - mid[0]) / 1e6 if t_end > mid[0] else None
    wire = steady * MTU / (MTU - HEADER_BYTES) if steady else None
    dl = delayline_delta(before, after)
    v = {
        "loss_pct": bed.loss_pct,
        "connect_ms_median": statistics.median(connect_ms), "connect_ms": connect_ms,
        "ping_avg_ms": ping_avg, "stream_bytes": stream["bytes"],
        "stream_truncated": bool(stream.get("truncated")),
        "stream_total_mbit": total_rate, "stream_steady_payload_mbit": steady,
        "stream_steady_wire_mbit": wire, "stream_delayline": dl,
        "late_us_avg": after["b_to_a"]["late_us_avg"] if after else None,
        "emulator_cores": emulator_cores,
    }
    s = bed.info["sysctl"]
    queue = bed.info.get("queue_bytes")
    print(f"\n=== Testbed: RTT {bed.rtt_ms:g} ms, {bed.rate_mbit:g} Mbit/s each way, drop-tail "
          f"queue {queue} bytes ({queue * 8 / (bed.rate_mbit * 1e6) * 1e3:.1f} ms at the "
          f"rate), MTU {MTU} ===")
    print(f"  emulator: {bed.info['delayline']}")
    print(f"  random loss: {bed.loss_pct:g}% of the packets in each direction"
          + (f", seed {bed.info['loss_seed']}" if bed.loss_pct else "")
          + (f"; during the check {dl['a_to_b']['lost']} lost client to origin, "
             f"{dl['b_to_a']['lost']} origin to client" if dl and bed.loss_pct else ""))
    print(f"  load average now: {' '.join(f'{x:.2f}' for x in loadavg())} "
          f"(anything else running on the machine skews the numbers)")
    print(f"  TCP: congestion control {s['org']['net.ipv4.tcp_congestion_control']} (origin) / "
          f"{s['cli']['net.ipv4.tcp_congestion_control']} (client side); "
          f"tcp_rmem/tcp_wmem max raised to {bed.mem_max} in both namespaces by this run; "
          f"tcp_slow_start_after_idle {s['org']['net.ipv4.tcp_slow_start_after_idle']}; "
          f"tcp_no_metrics_save 1")
    print(f"  measured RTT: TCP connect median {v['connect_ms_median']:.2f} ms over "
          f"{len(connect_ms)} connects (min {connect_ms[0]:.2f}, max {connect_ms[-1]:.2f}); "
          f"ping avg {ping_avg if ping_avg is not None else '-'} ms; configured {bed.rtt_ms:g} ms")
    drops = dl["b_to_a"]["drops"] if dl else "-"
    cut = " (stopped after 15 s)" if stream.get("truncated") else ""
    print(f"  one connection, {stream['bytes'] / 1e6:.0f} MB{cut}: {total_rate:.1f} Mbit/s overall, "
          f"{steady:.1f} Mbit/s payload over the second half = {wire:.1f} Mbit/s on the wire "
          f"(x {MTU}/{MTU - HEADER_BYTES}); configured {bed.rate_mbit:g} Mbit/s "
          f"({wire / bed.rate_mbit:.1%}); queue drops {drops}, "
          f"mean emulator lateness {v['late_us_avg']} us; emulator CPU "
          f"{emulator_cores:.2f} cores", flush=True)
    return v


# ---------------------------------------------------------------------------
# Plot.

def plot(path, series, rtt_ms, ideal_ms, workdir):
    gnuplot = kpbench.require_program("gnuplot", "gnuplot-nox")
    terminals = run([gnuplot, "-e", "set terminal"], check=False).stdout
    terminal = "pngcairo" if "pngcairo" in terminals else "png"
    plots = []
    for n, (label, points) in enumerate(series):
        data = workdir.join(f"plot-{n}.dat")
        with open(data, "w") as f:
            for index, value in points:
                f.write(f"{index} {value:.3f}\n")
        plots.append(f"'{data}' using 1:2 with linespoints title '{label}'")
    plots.append(f"{ideal_ms:.3f} with lines dashtype 2 lc rgb 'black' "
                 f"title 'chunk/rate + RTT'")
    script = f"""
set terminal {terminal} size 1300,650
set output '{os.path.abspath(path)}'
set title "Back-to-back chunk downloads, each on a new connection: RTT {rtt_ms:g} ms"
set xlabel "chunk index"
set ylabel "chunk download time (ms)"
set logscale y
set yrange [{ideal_ms * 0.6:.1f}:*]
set grid
set autoscale xfix
set offsets 0.5, 0.5, 0, 0
set key outside right top vertical box
plot {", ".join(plots)}
"""
    script_path = workdir.join("plot.gp")
    with open(script_path, "w") as f:
        f.write(script)
    out = run([gnuplot, script_path], check=False)
    if out.returncode:
        print(f"gnuplot failed:\n{out.stdout}", file=sys.stderr)
    else:
        print(f"\nplot written to {path}")


# ---------------------------------------------------------------------------

ALLOWED_CC = "net.ipv4.tcp_allowed_congestion_control"


def read_sysctl(key):
    with open("/proc/sys/" + key.replace(".", "/")) as f:
        return f.read().strip()


def write_sysctl(key, value):
    with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
        f.write(value)


def allow_congestion_control(name):
    """A namespace other than the host's may only pick a congestion control
    the host allows; add name to the host's list for the run if needed.
    Returns the list to restore, or None when nothing was changed."""
    available = read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    if name not in available:
        # Loading it is as far as the bench goes: modprobe tcp_NAME by hand.
        raise RuntimeError(f"congestion control {name} not available (have: "
                           f"{' '.join(available)}); try modprobe tcp_{name}")
    allowed = read_sysctl(ALLOWED_CC)
    if name in allowed.split():
        return None
    write_sysctl(ALLOWED_CC, f"{allowed} {name}")
    print(f"host {ALLOWED_CC} temporarily '{allowed} {name}' (restored at the end)")
    return allowed


def testbed_plan(args):
    """(RTT, rate, scenarios, loss) per testbed: the classic scenarios at
    every --rtt-ms with --loss, overlap, long-fat and lossy on testbeds of
    their own."""
    plan = []
    classic = [s for s in args.scenarios if s not in OWN_BED]
    if classic or not args.scenarios:
        plan += [(rtt, args.rate_mbit, classic, args.loss) for rtt in args.rtts]
    if "overlap" in args.scenarios:
        plan.append((args.overlap_rtt_ms, args.rate_mbit, ["overlap"], args.loss))
    if "long-fat" in args.scenarios:
        plan.append((args.longfat_rtt_ms, args.longfat_rate_mbit, ["long-fat"], args.loss))
    if "lossy" in args.scenarios:
        plan.append((args.lossy_rtt_ms, args.rate_mbit, ["lossy"], args.lossy_loss))
    return plan


def on_sigterm(_sig, _frame):
    raise KeyboardInterrupt


def main():
    args = parse_args()
    kpbench.require_root()
    kpbench.require_program("nginx", "nginx-light")
    kpbench.require_program("ip", "iproute2")
    delayline_bin = kpbench.find_binary(args.build_dir, "kp-delayline")
    kpbench.find_binary(args.build_dir, "keepalive-proxy")
    if args.old_build_dir:
        kpbench.find_binary(args.old_build_dir, "keepalive-proxy")
    if not os.path.exists("/dev/net/tun"):
        kpbench.die("/dev/net/tun is missing (modprobe tun)")
    kpbench.raise_fd_limit()
    signal.signal(signal.SIGTERM, on_sigterm)
    # Started in the background by a shell, SIGINT arrives ignored; Ctrl-C
    # and kill -INT must still clean up.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    results = kpbench.Results(args.out or None, "wan")
    workdir = kpbench.Workdir(prefix="kpwan-", keep=args.keep_workdir)
    bench = Bench(args, results, workdir)
    beds = "; ".join(f"{', '.join(sc) or 'check only'} at {rtt:g} ms, {rate:g} Mbit/s"
                     + (f", loss {loss:g}% each way" if loss else "")
                     for rtt, rate, sc, loss in testbed_plan(args))
    rows = ", ".join(r.label for r in bench.rows)
    if args.scenarios == ["parent"]:
        rows = f"parents {', '.join(args.parents)} beside the {' and the '.join(args.parent_place)}"
    if args.scenarios == ["share"]:
        rows = "direct, keepalive-proxy, keepalive-proxy --read-ahead, squid (caching)"
    print(f"WAN bench: {beds}; rows: {rows}")
    print(f"command: {results.common['command']}")
    print(f"machine: {json.dumps(results.common['machine'])}", flush=True)

    started = time.monotonic()
    bed = None
    allowed_before = None
    try:
        if args.cc:
            allowed_before = allow_congestion_control(args.cc)
        data_dir = workdir.join("data")
        os.makedirs(data_dir)
        os.chmod(data_dir, 0o755)
        chunks_needed = max(args.chunks, args.paced_chunks, args.early_chunks,
                            args.parallel_workers * args.parallel_chunks)
        overlap_chunks = args.overlap_rounds * max(args.overlap_requests,
                                                   args.overlap_workers * args.overlap_chain)
        file_size = max(chunks_needed * args.chunk_size, overlap_chunks * args.overlap_size)
        kpbench.write_file(os.path.join(data_dir, FILE), file_size)
        if "hls" in args.scenarios or "hls-ytdlp" in args.scenarios:
            write_hls(data_dir, os.path.join(data_dir, FILE), args.chunks, args.chunk_size)
            with open(os.path.join(data_dir, FILE), "rb") as f:
                bench.hls_sha = hashlib.sha256(f.read(args.chunks * args.chunk_size)).hexdigest()
        wanted = set()
        for scenario, names in (("throttled", args.throttled_clients),
                                ("lossy", args.lossy_clients), ("resets", args.resets_clients),
                                ("hls-ytdlp", ["yt-dlp"])):
            if scenario in args.scenarios:
                wanted.update(names)
        if wanted:
            order = [c for c in wan_clients.CLIENTS if c in wanted]
            bench.clients = {c.name: c for c in wan_clients.make_clients(
                order, args.ytdlp_spec, args.venv_dir)}
        if any(s in args.scenarios for s in SCENARIO_ORIGIN):
            bench.object_sha = wan_origin.object_sha256(args.object_size, args.seed)
        if "share" in args.scenarios:
            kpbench.write_file(os.path.join(data_dir, SHARE_FILE), args.share_size)
            bench.share_sha = wan_clients.sha256_file(os.path.join(data_dir, SHARE_FILE))
        # About five seconds at the configured rate for the one-connection check.
        long_size = int(args.rate_mbit * 1e6 / 8 * 5)
        kpbench.write_file(os.path.join(data_dir, LONG_FILE), long_size)
        if "long-fat" in args.scenarios:
            kpbench.write_file(os.path.join(data_dir, LONGFAT_FILE), args.longfat_size)
        for index, (rtt_ms, rate_mbit, scenarios, loss) in enumerate(testbed_plan(args)):
            bed = Testbed(args, rtt_ms, workdir, index, rate_mbit, scenarios, loss)
            bed.setup(data_dir, delayline_bin)
            bed.verification = verify(bed, args, long_size)
            for scenario in scenarios:
                print(f"\n--- {scenario}, RTT {rtt_ms:g} ms ---", flush=True)
                getattr(bench, scenario.replace("-", "_"))(bed)
            final = bed.teardown()
            bed = None
            if final:
                d = final["b_to_a"]
                print(f"\n  emulator totals (origin to client): {d['packets']} packets, "
                      f"{d['drops']} queue drops, max backlog {d['max_backlog']} bytes, "
                      f"ring full {d['ring_full']}, writes late by more than 1 ms "
                      f"{d['late_over_1ms']}, mean lateness {d['late_us_avg']} us")
        print_targets(bench.summary)
        if args.plot:
            rtt_ms = 50.0 if 50.0 in bench.plot_series else next(iter(bench.plot_series), None)
            if rtt_ms is None:
                print("no back-to-back run to plot", file=sys.stderr)
            else:
                plot(args.plot, bench.plot_series[rtt_ms], rtt_ms,
                     ms(bench.ideal_chunk(rtt_ms / 1e3)), workdir)
    except KeyboardInterrupt:
        print("\ninterrupted; cleaning up", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"\nwan: {e}", file=sys.stderr)
        return 1
    finally:
        if bed:
            bed.teardown()
        if allowed_before is not None:
            write_sysctl(ALLOWED_CC, allowed_before)
            print(f"restored {ALLOWED_CC} = {allowed_before}")
        workdir.cleanup()
    print(f"\nwall time {time.monotonic() - started:.0f} s; rows appended to {args.out}"
          if args.out else f"\nwall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--curl-chunks"]:
        # The parent scenario's downloader, run by this script inside the
        # client's namespace.
        sys.exit(curl_chunks(json.loads(sys.argv[2])))
    if sys.argv[1:2] == ["--share-fetch"]:
        # The share scenario's clients, likewise.
        sys.exit(share_fetch(json.loads(sys.argv[2])))
    sys.exit(main())
