"""Real download clients for bench/wan.py's client scenarios (throttled,
lossy, resets, hls-ytdlp): how each is called, directly and through a proxy,
to write one URL into one file, and how a run of it is timed and checked.

  curl      curl -sS -f -o FILE [--proxy URL | --noproxy '*'] URL
  wget      wget --no-config -q -O FILE [-e use_proxy=on -e http_proxy=URL |
            --no-proxy] URL (wget's own retries and resumes left as they are)
  ffmpeg    ffmpeg [-http_proxy URL] -f data -i URL -map 0 -c copy -f data FILE:
            the raw "data" demuxer and muxer copy any bytes as they come, so
            the output is the object itself (a media file remuxed would not
            be byte for byte); ffmpeg asks with an open Range (bytes=0-)
  yt-dlp    a pinned release from PyPI in a virtual environment the bench
            makes (--ytdlp-spec, --venv-dir); --downloader native, no
            --http-chunk-size, --proxy URL or --proxy ""
  chromium  headless Chromium's download manager (bench/chromium_download.py)

Each runs in the client's network namespace with no proxy variables in its
environment: a row's proxy is the one on its command line, or none.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, BENCH_DIR)

import kpbench  # noqa: E402  (found through the path set just above)

CLIENTS = ("curl", "wget", "ffmpeg", "yt-dlp", "chromium")
CHROMIUM_DOWNLOAD = os.path.join(BENCH_DIR, "chromium_download.py")
# A current release, pinned so that runs months apart run the same client;
# --ytdlp-spec chooses another.
YTDLP_SPEC = "yt-dlp==2026.10.26"
PACKAGES = {"curl": "curl", "wget": "wget", "ffmpeg": "ffmpeg", "chromium": "chromium"}


class Client:
    """One program that downloads a URL into a file."""

    def __init__(self, name, program, make_argv, version_argv):
        self.name = name
        self.program = program
        self._make_argv = make_argv
        self._version_argv = version_argv
        self.version = None
        self.startup_s = None

    def argv(self, url, proxy, out, timeout):
        """proxy: http://HOST:PORT, or None for direct."""
        return self._make_argv(url, proxy, out, timeout)

    def probe(self):
        """Its version, and how long asking for it took: a floor under every
        run's wall time that no proxy changes."""
        started = time.monotonic()
        done = subprocess.run(self._version_argv, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=120)
        self.startup_s = time.monotonic() - started
        lines = [x for x in done.stdout.splitlines() if x.strip()]
        first = lines[0].strip() if lines else "?"
        # The lines go on with copyright, features or libraries.
        words = {"ffmpeg": 3, "wget": 3, "curl": 2, "chromium": 2}.get(self.name)
        self.version = " ".join(first.split()[:words]) if words else first
        return self.version


def curl_client(program):
    def argv(url, proxy, out, _timeout):
        return [program, "-sS", "-f", "-o", out,
                *(["--proxy", proxy] if proxy else ["--noproxy", "*"]), url]
    return Client("curl", program, argv, [program, "--version"])


def wget_client(program):
    def argv(url, proxy, out, _timeout):
        return [program, "--no-config", "-q", "-O", out,
                *(["-e", "use_proxy=on", "-e", f"http_proxy={proxy}"] if proxy
                  else ["--no-proxy"]), url]
    return Client("wget", program, argv, [program, "--version"])


def ffmpeg_client(program):
    def argv(url, proxy, out, _timeout):
        return [program, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
                *(["-http_proxy", proxy] if proxy else []),
                "-f", "data", "-i", url, "-map", "0", "-c", "copy", "-f", "data", out]
    return Client("ffmpeg", program, argv, [program, "-version"])


def ytdlp_client(program):
    def argv(url, proxy, out, _timeout):
        return [program, "--no-config", "--no-cache-dir", "--no-part", "--no-progress",
                "--no-playlist", "--downloader", "native", "--fixup", "never", "--no-mtime",
                "--proxy", proxy or "", "-o", out, url]
    return Client("yt-dlp", program, argv, [program, "--version"])


def chromium_client(program):
    def argv(url, proxy, out, timeout):
        return [sys.executable, CHROMIUM_DOWNLOAD, "--chromium", program, "--out", out,
                "--proxy", proxy or "", "--timeout", f"{timeout:g}", url]
    return Client("chromium", program, argv, [program, "--version"])


def ytdlp_program(spec, venv_dir):
    """yt-dlp as spec says (a pinned release by default) in a virtual
    environment under venv_dir, made on first use and kept; None, with the
    reason told, when it cannot be made or PyPI cannot be reached."""
    name = re.sub(r"[^A-Za-z0-9.]+", "-", spec).strip("-")
    venv = os.path.join(venv_dir, f"venv-{name}")
    program = os.path.join(venv, "bin", "yt-dlp")
    marker = os.path.join(venv, "installed-spec")
    try:
        with open(marker) as f:
            if f.read().strip() == spec and os.access(program, os.X_OK):
                return program
    except OSError:
        pass
    print(f"installing {spec} from PyPI into {venv} ...", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(venv_dir, exist_ok=True)
    made = subprocess.run([sys.executable, "-m", "venv", venv], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    if made.returncode:
        print(f"wan: no virtual environment for yt-dlp (Debian: apt-get install "
              f"python3-venv): {made.stdout.strip()[-300:]}", file=sys.stderr)
        return None
    try:
        pip = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install",
                              "--quiet", "--disable-pip-version-check", "--timeout", "30",
                              "--retries", "2", spec], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pip = None
    if pip is None or pip.returncode or not os.access(program, os.X_OK):
        why = pip.stdout.strip().splitlines()[-1] if pip and pip.stdout.strip() else "timed out"
        print(f"wan: pip could not install {spec} ({why}); yt-dlp rows are skipped",
              file=sys.stderr)
        return None
    with open(marker, "w") as f:
        f.write(spec + "\n")
    return program


def make_clients(names, ytdlp_spec, venv_dir):
    """The clients named that this machine has, in the order named; a
    missing one is skipped with a message."""
    clients = []
    for name in names:
        if name == "yt-dlp":
            program = ytdlp_program(ytdlp_spec, venv_dir)
            if program:
                clients.append(ytdlp_client(program))
            continue
        found = shutil.which(name) or shutil.which(name, path="/usr/bin:/bin")
        if not found:
            print(f"wan: {name} is not installed (Debian: apt-get install {PACKAGES[name]}); "
                  f"its runs are skipped", file=sys.stderr)
            continue
        clients.append({"curl": curl_client, "wget": wget_client, "ffmpeg": ffmpeg_client,
                        "chromium": chromium_client}[name](found))
    for client in clients:
        client.probe()
        print(f"client {client.name}: {client.version} ({client.program}; start-up "
              f"{client.startup_s:.2f} s)", flush=True)
    return clients


def client_env():
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run_client(netns, client, url, proxy, out, log, timeout):
    """One download in the namespace: wall time, exit status, what was
    written (size and SHA-256) and the end of the client's output."""
    argv = client.argv(url, proxy, out, timeout)
    started = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(kpbench.netns_argv(netns, argv), stdout=f,
                                stderr=subprocess.STDOUT, env=client_env(),
                                start_new_session=True)
        try:
            # The Chromium driver stops itself at the timeout; the grace is its.
            status = proc.wait(timeout + 30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = "timeout"
    seconds = time.monotonic() - started
    exists = os.path.exists(out)
    with open(log, errors="replace") as f:
        output = f.read()
    result = {"argv": " ".join(argv), "status": status, "seconds": seconds,
              "bytes": os.path.getsize(out) if exists else None,
              "sha256": sha256_file(out) if exists else None,
              "output_tail": output[-600:] if status else None}
    if client.name == "chromium":
        last = output.strip().splitlines()[-1:] if output.strip() else []
        try:
            driver = json.loads(last[0]) if last else {}
        except ValueError:
            driver = {}
        if "begin" in driver and "end" in driver:
            result["download_s"] = driver["end"] - driver["begin"]
        if "navigate" in driver:
            # The browser's own start-up, before it asked for anything.
            result["browser_start_s"] = driver["navigate"] - driver["started"]
    return result
