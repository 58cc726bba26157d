"""Shared plumbing for the benchmarks in this directory.

Every benchmark starts its own processes (origin, proxies, clients), records
their PIDs and ends exactly those, so a run never disturbs a system service or
another run. Ports are picked free, results go to stdout as a table and to a
JSON-lines file, one object per measured row, each carrying the command line
and the machine it came from: a number without its circumstances is not worth
keeping. For the same reason a benchmark can wait for the machine to go quiet,
record how much CPU others took while it measured, and measure again when
that was too much (wait_quiet, ForeignLoad, MachineLoad, least_disturbed).
"""

import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)


def die(message):
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(2)


def require_root():
    if os.geteuid() != 0:
        die("run as root (the benchmarks create namespaces, raise limits and bind ports)")


def exit_on_sigterm():
    """Turn SIGTERM into SystemExit, so the finally blocks that stop a
    benchmark's children run; they live in sessions of their own and would
    outlive it otherwise."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def require_program(name, package=None):
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if not path:
        die(f"{name} not found (Debian: apt-get install {package or name})")
    return path


def find_binary(build_dir, name):
    """A program built by CMake, looked for where the build puts it."""
    for candidate in (os.path.join(build_dir, name), os.path.join(build_dir, "bench", name)):
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    die(f"{name} not found in {build_dir}; build first: cmake -S . -B build && cmake --build build")


def free_port(host="127.0.0.1"):
    """A port nobody listens on now. Another program could take it before we
    bind it; the starters below retry on that rare event."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def netns_argv(netns, argv):
    return ["ip", "netns", "exec", netns] + list(argv) if netns else list(argv)


def wait_listening(host, port, timeout=10.0, netns=None, proc=None):
    """True once something accepts on host:port (checked from inside netns)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if netns:
            probe = ("import socket,sys\n"
                     "s=socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)\n"
                     "s.settimeout(0.5)\n"
                     "sys.exit(s.connect_ex((sys.argv[1],int(sys.argv[2]))))\n")
            ok = subprocess.call(netns_argv(netns, [sys.executable, "-c", probe, host, str(port)]),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                ok = s.connect_ex((host, port)) == 0
        if ok:
            return True
        time.sleep(0.05)
    return False


class Process:
    """A child process this run started; stop() ends it by its PID only."""

    def __init__(self, name, argv, netns=None, log_path=None, cwd=None, env=None, group=False):
        self.name = name
        # group: signal the whole process group this child leads, for a shell
        # command whose real work runs in a grandchild.
        self.group = group
        self.argv = netns_argv(netns, argv)
        self.log_path = log_path
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            # Its own session, so a Ctrl-C aimed at the benchmark reaches the
            # benchmark first and it can end its children in order.
            self.popen = subprocess.Popen(self.argv, stdout=out, stderr=out, cwd=cwd, env=env,
                                          start_new_session=True)
        finally:
            if log_path:
                out.close()
        self.pid = self.popen.pid

    def poll(self):
        return self.popen.poll()

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.popen.poll() is not None:
            return self.popen.returncode
        kill = os.killpg if self.group else os.kill
        try:
            kill(self.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            kill(self.pid, signal.SIGKILL)
            return self.popen.wait()

    def log_tail(self, lines=20):
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


class Workdir:
    """A private temporary directory for one run's configs and logs."""

    def __init__(self, prefix="kpbench-", keep=False):
        self.path = tempfile.mkdtemp(prefix=prefix)
        # nginx workers drop root for nobody/www-data and must read the files.
        os.chmod(self.path, 0o755)
        self.keep = keep

    def join(self, *parts):
        return os.path.join(self.path, *parts)

    def cleanup(self):
        if self.keep:
            print(f"kept work directory {self.path}", file=sys.stderr)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


class Nginx:
    """A private nginx: own config, pid file, logs and document root.

    files: {name: size_in_bytes} created sparse-free under the document root
    (written once, so they sit in the page cache during the run).
    The access log records nginx's connection serial number, so
    connections_since(mark) tells how many origin TCP connections a proxy used.
    types: {file name extension: media type}; given, they replace nginx's
    built-in few, and other files are served as application/octet-stream.
    """

    STATUS_PATH = "/kpbench-status"

    def __init__(self, workdir, listen="127.0.0.1", port=None, netns=None, files=None,
                 workers=1, keepalive_timeout="75s", access_log=True, worker_connections=4096,
                 sendfile=True, tls=None, types=None):
        self.nginx = require_program("nginx", "nginx-light")
        self.dir = workdir.join(f"nginx-{port or 'auto'}-{id(self):x}")
        self.root = os.path.join(self.dir, "www")
        os.makedirs(self.root)
        self.listen = listen
        self.port = port or free_port(listen if netns is None else "127.0.0.1")
        self.netns = netns
        self.access_log = os.path.join(self.dir, "access.log")
        for name, size in (files or {}).items():
            write_file(os.path.join(self.root, name), size)
        host = f"[{listen}]" if ":" in listen else listen
        log_line = (f"access_log {self.access_log} kp;" if access_log else "access_log off;")
        # tls: a TestPKI; HTTPS with its origin certificate, TLS 1.2 and 1.3, tickets on.
        self.scheme = "https" if tls else "http"
        tls_lines = (f"ssl_certificate {tls.origin_cert}; ssl_certificate_key {tls.origin_key};\n"
                     f"        ssl_protocols TLSv1.2 TLSv1.3;" if tls else "")
        types_line = ("types { " + " ".join(f"{t} {e};" for e, t in types.items()) + " }"
                      if types else "")
        config = f"""
daemon off;
worker_processes {workers};
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
worker_rlimit_nofile {min(worker_connections * 2 + 64, fd_hard_limit())};
events {{ worker_connections {worker_connections}; }}
http {{
    default_type application/octet-stream;
    {types_line}
    log_format kp '$connection $connection_requests $status $bytes_sent "$request"';
    {log_line}
    sendfile {'on' if sendfile else 'off'};
    tcp_nopush on;
    keepalive_timeout {keepalive_timeout};
    keepalive_requests 1000000;
    client_body_temp_path {self.dir}/tmp_body;
    proxy_temp_path {self.dir}/tmp_proxy;
    fastcgi_temp_path {self.dir}/tmp_fastcgi;
    uwsgi_temp_path {self.dir}/tmp_uwsgi;
    scgi_temp_path {self.dir}/tmp_scgi;
    server {{
        listen {host}:{self.port} backlog=4096{' ssl' if tls else ''};
        {tls_lines}
        root {self.root};
        location = {self.STATUS_PATH} {{ stub_status; access_log off; }}
    }}
}}
"""
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(config)
        self.proc = None

    def start(self):
        self.proc = Process("nginx", [self.nginx, "-p", self.dir, "-c", self.conf],
                            netns=self.netns, log_path=os.path.join(self.dir, "nginx.out"))
        if not wait_listening(self.listen, self.port, netns=self.netns, proc=self.proc):
            tail = self.proc.log_tail() + tail_of(os.path.join(self.dir, "error.log"))
            self.proc.stop()
            die(f"nginx did not start on {self.listen}:{self.port}:\n{tail}")
        return self

    def stop(self):
        if self.proc:
            # SIGQUIT: nginx's graceful stop; SIGTERM would do as well.
            self.proc.stop(signal.SIGQUIT)
            self.proc = None

    def url(self, path, host=None):
        h = host or self.listen
        h = f"[{h}]" if ":" in h else h
        return f"{self.scheme}://{h}:{self.port}/{path.lstrip('/')}"

    def log_mark(self):
        """Where the access log ends now; pass to connections_since()."""
        try:
            return os.path.getsize(self.access_log)
        except FileNotFoundError:
            return 0

    def log_lines_since(self, mark):
        # nginx writes a log line when the request ends; give it a moment.
        time.sleep(0.2)
        try:
            with open(self.access_log, "rb") as f:
                f.seek(mark)
                return f.read().decode(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def connections_since(self, mark):
        """Distinct origin TCP connections that carried requests since mark."""
        return len({line.split()[0] for line in self.log_lines_since(mark) if line.strip()})

    def counters(self):
        """nginx's own totals since start: {"accepts": TCP connections
        accepted, "requests": requests read, "active": open connections}.

        They cost nothing per request, unlike the access log, so they can be
        read around a throughput measurement. Each call is itself one
        connection and one request; counters_delta() takes that out."""
        out = subprocess.run(netns_argv(self.netns, [
            "curl", "-sS", "--noproxy", "*", "--max-time", "10",
            self.url(self.STATUS_PATH)]), capture_output=True, text=True)
        lines = out.stdout.splitlines()
        try:
            accepts, _handled, requests = (int(v) for v in lines[2].split())
            active = int(lines[0].split(":")[1])
        except (IndexError, ValueError):
            die(f"unexpected nginx status answer: {out.stdout!r} {out.stderr.strip()}")
        return {"accepts": accepts, "requests": requests, "active": active}

    @staticmethod
    def counters_delta(before, after):
        """Connections and requests made between two counters() calls. Each
        answer already counts its own connection and request, so the
        difference holds exactly one extra of each: the second call's."""
        return {"accepts": after["accepts"] - before["accepts"] - 1,
                "requests": after["requests"] - before["requests"] - 1}


class TestPKI:
    """Certificates for HTTPS benchmarks, made fresh in the work directory:
    an origin CA and a certificate for the origin's names (IP addresses or
    DNS names), and keepalive-proxy's own interception CA (--make-ca), with
    a bundle of both for clients that go either way."""

    def __init__(self, workdir, names, kp_binary):
        openssl = require_program("openssl", "openssl")
        d = workdir.join(f"pki-{id(self):x}")
        os.makedirs(d)
        self.origin_ca = os.path.join(d, "origin-ca.crt")
        self.origin_cert = os.path.join(d, "origin.crt")
        self.origin_key = os.path.join(d, "origin.key")
        ca_key, csr, ext = (os.path.join(d, n) for n in ("origin-ca.key", "origin.csr", "ext"))
        sans = ",".join((f"IP:{n}" if n.replace(".", "").isdigit() or ":" in n else f"DNS:{n}")
                        for n in names)
        with open(ext, "w") as f:
            f.write(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for argv in (
                [openssl, "req", "-x509", *ec, "-keyout", ca_key, "-out", self.origin_ca,
                 "-days", "7", "-subj", "/CN=kpbench origin CA",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign"],
                [openssl, "req", *ec, "-keyout", self.origin_key, "-out", csr,
                 "-subj", f"/CN={names[0]}"],
                [openssl, "x509", "-req", "-in", csr, "-CA", self.origin_ca, "-CAkey", ca_key,
                 "-CAcreateserial", "-out", self.origin_cert, "-days", "7", "-extfile", ext]):
            subprocess.run(argv, check=True, capture_output=True)
        kp_dir = os.path.join(d, "kp-ca")
        subprocess.run([kp_binary, "--make-ca", kp_dir]
                       + [a for n in names for a in ("--intercept", n)],
                       check=True, capture_output=True)
        self.kp_ca = os.path.join(kp_dir, "ca.crt")
        self.kp_key = os.path.join(kp_dir, "ca.key")
        self.bundle = os.path.join(d, "bundle.crt")
        with open(self.bundle, "w") as out:
            for path in (self.origin_ca, self.kp_ca):
                with open(path) as f:
                    out.write(f.read())

    def intercept_args(self, names):
        """keepalive-proxy flags that intercept names, trusting the origin CA."""
        args = ["--ca-cert", self.kp_ca, "--ca-key", self.kp_key, "--upstream-ca", self.origin_ca]
        for n in names:
            args += ["--intercept", n]
        return args


def write_file(path, size):
    """A file of pseudo-random bytes (incompressible, not all zero)."""
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        os.fchmod(f.fileno(), 0o644)
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def tail_of(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except FileNotFoundError:
        return ""


# ---------------------------------------------------------------------------
# Proxies. Each recipe starts one proxy on host:port (inside netns if given)
# with a configuration written for the benchmark: no caching, no filtering, no
# logging per request, persistent upstream connections on where the proxy has
# them, and a generous connection limit. A recipe returns a Process.

class Proxy:
    """A proxy under test: where it listens and, if this run started it, its process."""

    def __init__(self, name, host, port, process=None):
        self.name = name
        self.host = host
        self.port = port
        self.process = process

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    @property
    def pid(self):
        return self.process.pid if self.process else None

    def pids(self):
        """The processes to account this proxy's CPU and memory to: the one
        started and everything it spawned. Empty for a proxy this run did
        not start."""
        return session_pids(self.process.pid) if self.process else []

    def stop(self):
        if self.process:
            self.process.stop()
            self.process = None


def _start_keepalive_proxy(workdir, host, port, netns, build_dir, extra_args=()):
    binary = find_binary(build_dir, "keepalive-proxy")
    argv = [binary, "-b", host, "-p", str(port)] + list(extra_args)
    return Process("keepalive-proxy", argv, netns=netns,
                   log_path=workdir.join(f"keepalive-proxy-{port}.log"))


# The recipes below size every proxy for the largest load any benchmark puts on
# it: 10,000 idle clients in bench/footprint.py, 1,000 busy ones in
# bench/loopback.py.
MAX_CLIENTS = 12000


def _listen_spec(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _proxy_dir(workdir, name, port, owner=None):
    """A directory for one proxy's config, pid file and logs. owner: a user the
    proxy switches to after start and who must still write there."""
    path = workdir.join(f"{name}-{port}")
    os.makedirs(path, exist_ok=True)
    if owner:
        import pwd
        entry = pwd.getpwnam(owner)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def _write_config(path, text):
    with open(path, "w") as f:
        f.write(text.lstrip())
    os.chmod(path, 0o644)
    return path


def _start_tinyproxy(workdir, host, port, netns):
    d = _proxy_dir(workdir, "tinyproxy", port)
    # Tinyproxy has no upstream keep-alive: every request opens a connection
    # to the origin, whatever we configure. One thread per client.
    # No ConnectPort line means CONNECT may reach any port. Without a User
    # line it stays root, which can read and write the work directory.
    conf = _write_config(os.path.join(d, "tinyproxy.conf"), f"""
Port {port}
Listen {host}
Timeout 600
MaxClients {MAX_CLIENTS}
LogLevel Error
LogFile "{d}/tinyproxy.log"
PidFile "{d}/tinyproxy.pid"
Allow 127.0.0.0/8
Allow ::1
Allow 10.0.0.0/8
DisableViaHeader Yes
""")
    return Process("tinyproxy", [require_program("tinyproxy"), "-d", "-c", conf], netns=netns,
                   log_path=os.path.join(d, "tinyproxy.out"))


def _start_squid(workdir, host, port, netns):
    # Squid refuses to run as root and switches to its own user (proxy on
    # Debian), which must keep writing its logs and pid file here.
    d = _proxy_dir(workdir, "squid", port, owner="proxy")
    # No cache_dir: no disk cache. "cache deny all" keeps responses out of the
    # memory cache too. No Safe_ports/SSL_ports rules: CONNECT to any port.
    conf = _write_config(os.path.join(d, "squid.conf"), f"""
http_port {_listen_spec(host, port)}
workers 1
pid_filename {d}/squid.pid
cache_log {d}/cache.log
access_log none
cache_store_log none
netdb_filename none
coredump_dir {d}
cache deny all
cache_mem 0 MB
memory_cache_shared off
acl benchnet src 127.0.0.0/8 ::1 10.0.0.0/8
http_access allow benchnet
http_access deny all
server_persistent_connections on
client_persistent_connections on
server_idle_pconn_timeout 60 seconds
client_idle_pconn_timeout 120 seconds
max_filedescriptors {min(MAX_CLIENTS * 2 + 1024, fd_hard_limit())}
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 0 seconds
""")
    return Process("squid", [require_program("squid"), "-N", "-f", conf], netns=netns,
                   log_path=os.path.join(d, "squid.out"))


def _start_privoxy(workdir, host, port, netns):
    d = _proxy_dir(workdir, "privoxy", port)
    # No actionsfile and no filterfile: nothing to block, rewrite or buffer,
    # and no limit-connect action, so CONNECT may reach any port. The stock
    # templates are still needed for error pages. Without
    # default-server-timeout Privoxy never reuses a connection to a server
    # that, like nginx, sends no "Keep-Alive: timeout=" hint; it stays below
    # nginx's 75 s so the origin is not the first to close. Buffer sizes are
    # Privoxy's defaults.
    conf = _write_config(os.path.join(d, "privoxy.conf"), f"""
confdir {d}
templdir /etc/privoxy/templates
logdir {d}
logfile privoxy.log
listen-address {_listen_spec(host, port)}
permit-access 127.0.0.0/8
permit-access [::1]
permit-access 10.0.0.0/8
toggle 0
enable-remote-toggle 0
enable-remote-http-toggle 0
enable-edit-actions 0
accept-intercepted-requests 0
forwarded-connect-retries 0
keep-alive-timeout 60
default-server-timeout 50
connection-sharing 1
tolerate-pipelining 1
socket-timeout 300
max-client-connections {MAX_CLIENTS}
listen-backlog 4096
""")
    return Process("privoxy", [require_program("privoxy"), "--no-daemon", "--pidfile",
                               os.path.join(d, "privoxy.pid"), conf],
                   netns=netns, log_path=os.path.join(d, "privoxy.out"))


# name -> (program to look for, Debian package, starter), in table order.
PROXY_RECIPES = {
    "keepalive-proxy": (None, None, _start_keepalive_proxy),
    "tinyproxy": ("tinyproxy", "tinyproxy", _start_tinyproxy),
    "squid": ("squid", "squid", _start_squid),
    "privoxy": ("privoxy", "privoxy", _start_privoxy),
}


def installed_proxies(names=None):
    """The proxy names this machine can run, in table order."""
    result = []
    for name, (program, _package, _starter) in PROXY_RECIPES.items():
        if names is not None and name not in names:
            continue
        if program is None or shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin"):
            result.append(name)
    return result


class ProxyStartError(RuntimeError):
    """A proxy that did not start (an option it does not know, say), for a
    caller that goes on without it."""


def start_proxy(name, workdir, build_dir="build", host="127.0.0.1", port=None, netns=None,
                extra_args=(), raise_errors=False):
    """Start a known proxy and wait until it accepts connections. One that
    does not start ends the benchmark with its log's tail, or with
    raise_errors raises ProxyStartError carrying it."""
    if name not in PROXY_RECIPES:
        die(f"no recipe for proxy {name!r}; known: {', '.join(PROXY_RECIPES)}")
    _program, _package, starter = PROXY_RECIPES[name]
    for _attempt in range(3):
        # Inside a namespace the address may not exist out here; a port free
        # on our loopback is as good a guess as any in a fresh namespace.
        p = port or free_port(host if netns is None else "127.0.0.1")
        if name == "keepalive-proxy":
            process = starter(workdir, host, p, netns, build_dir, extra_args)
        else:
            process = starter(workdir, host, p, netns)
        if wait_listening(host, p, netns=netns, proc=process):
            return Proxy(name, host, p, process)
        tail = process.log_tail()
        process.stop()
        if port:
            break
    message = f"{name} did not start on {host}:{p}:\n{tail}"
    if raise_errors:
        raise ProxyStartError(message)
    die(message)


COUNTERS_LINE = re.compile(r": (clients \d+, requests \d+ .*)$")
COUNTER = re.compile(r"([a-z][a-z0-9 -]*?) \(?(\d+(?:\.\d+)?)")


def keepalive_counters(proxy, timeout=3.0):
    """keepalive-proxy's counters: SIGUSR1, then the line it logs, parsed
    into {"requests": 12, "freed-up": 3, ...}; None if no line came."""
    if not proxy.process or not proxy.process.log_path:
        return None

    def lines():
        try:
            with open(proxy.process.log_path, errors="replace") as f:
                return [m.group(1) for m in map(COUNTERS_LINE.search, f) if m]
        except OSError:
            return []

    before = len(lines())
    os.kill(proxy.pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = lines()
        if len(found) > before:
            return {k.strip(): float(v) if "." in v else int(v)
                    for k, v in COUNTER.findall(found[-1].replace(",", " ,"))}
        time.sleep(0.02)
    return None


def external_proxy(address, command=None, netns=None, workdir=None):
    """--proxy HOST:PORT, optionally started by --proxy-cmd COMMAND."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        die(f"--proxy wants HOST:PORT, not {address!r}")
    host = host.strip("[]")
    process = None
    if command:
        log = workdir.join(f"external-{port}.log") if workdir else None
        process = Process("external", ["sh", "-c", command], netns=netns, log_path=log,
                          group=True)
    if not wait_listening(host, int(port), netns=netns, proc=process):
        if process:
            process.stop()
        die(f"nothing accepts connections on {address}")
    return Proxy(f"proxy {address}", host, int(port), process)


def add_proxy_arguments(ap, proxy_help="also measure a proxy already listening there "
                                       "(repeatable)"):
    """--proxies, --proxy and --proxy-cmd: the proxies a benchmark on this
    machine's loopback measures. chosen_proxies() and external_proxies()
    read them."""
    ap.add_argument("--proxies", default=None,
                    help="comma-separated recipes to run (default: keepalive-proxy and "
                         "every installed one; 'none' for only --proxy)")
    ap.add_argument("--proxy", action="append", default=[], metavar="HOST:PORT",
                    help=proxy_help)
    ap.add_argument("--proxy-cmd", action="append", default=[], metavar="COMMAND",
                    help="shell command starting the matching --proxy (same order)")


def chosen_proxies(args):
    """The recipes --proxies names (all of them without it) that this machine
    can run, in table order."""
    if args.proxies is None:
        return installed_proxies()
    return installed_proxies([n for n in args.proxies.split(",") if n])


def external_proxies(args):
    """(HOST:PORT, command starting it or None) for each --proxy, in order;
    dies on a --proxy-cmd without its --proxy, so call it with the parsing."""
    if len(args.proxy_cmd) > len(args.proxy):
        die("each --proxy-cmd needs a --proxy")
    commands = args.proxy_cmd + [None] * (len(args.proxy) - len(args.proxy_cmd))
    return list(zip(args.proxy, commands))


# ---------------------------------------------------------------------------
# Load. wrk drives request rates with absolute.lua, which prints its counts
# as JSON (see there).

WRK_SCRIPT = os.path.join(BENCH_DIR, "absolute.lua")


def wrk_argv(url, target, connections, seconds, timeout=None, latency=False):
    """One wrk thread keeping connections open to url for seconds (whole
    ones, at least one: wrk takes no fractions). With a target, requests go
    in absolute form for that URL, as to a proxy listening at url; without,
    url is the origin itself. timeout: wrk's, seconds; None keeps wrk's
    own."""
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s"]
    if timeout is not None:
        argv.append(f"--timeout={timeout:g}s")
    if latency:
        argv.append("--latency")
    argv += ["-s", WRK_SCRIPT, url]
    if target:
        argv += ["--", target]
    return argv


def run_wrk(url, target, connections, seconds, timeout=None, log_path=None):
    """One wrk run as wrk_argv() describes it: the numbers absolute.lua
    printed, as a dict. wrk's whole output, its latency distribution
    included, is appended to log_path if given."""
    argv = wrk_argv(url, target, connections, seconds, timeout, latency=True)
    out = subprocess.run(argv, capture_output=True, text=True)
    if log_path:
        with open(log_path, "a") as f:
            f.write(f"$ {' '.join(argv)}\n{out.stdout}{out.stderr}\n")
    for line in out.stdout.splitlines():
        if line.startswith("KPBENCH-RESULT "):
            return json.loads(line.split(" ", 1)[1])
    die(f"wrk printed no result (exit {out.returncode}):\n{out.stdout}{out.stderr}")


# ---------------------------------------------------------------------------
# Results.

def machine_info():
    info = {"kernel": platform.release(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_kib"] = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    info["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return info


def repo_version():
    """git describe of the checkout the benchmarks run from ("-dirty" when
    the working tree has changes); None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", REPO_ROOT, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def build_commit(build_dir):
    """git describe of the source tree a CMake build directory was made
    from ("-dirty" when that tree has changes), so that a row says which
    code its binary is; None when it cannot be told."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            source = next((line.split("=", 1)[1].strip() for line in f
                           if line.startswith("CMAKE_HOME_DIRECTORY:")), None)
        out = subprocess.run(["git", "-C", source, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, TypeError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def old_and_new(args):
    """With --old-build-dir, the two binaries every keepalive-proxy row runs
    with, in the order their runs take turns: [("old", DIR), ("new", DIR)];
    without it, [(None, --build-dir)]."""
    if not getattr(args, "old_build_dir", None):
        return [(None, args.build_dir)]
    return [("old", args.old_build_dir), ("new", args.build_dir)]


OLD_BUILD_HELP = ("a second build directory, the old binary to compare with: every "
                  "keepalive-proxy row then runs twice, labelled '(old)' (this one) and "
                  "'(new)' (--build-dir), their runs taking turns (old, new, old, new, ...)")


class Results:
    """Appends one JSON object per row to a JSON-lines file."""

    def __init__(self, path, bench):
        self.path = path
        self.bench = bench
        self.common = {
            "bench": bench,
            "command": " ".join(shlex.quote(a) for a in sys.argv),
            "machine": machine_info(),
            "repo": repo_version(),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def write(self, row):
        if not self.path:
            return
        record = dict(self.common)
        record.update(row)
        with open(self.path, "a") as f:
            f.write(without_machine_paths(json.dumps(record, sort_keys=True)) + "\n")


# The checkout this file lives in, and where temporary run directories go.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMP_RUN = re.compile(re.escape(tempfile.gettempdir()) + r"/[A-Za-z0-9._-]+")


def without_machine_paths(text):
    """Rows name no directory of the machine that measured them: paths in
    the checkout become relative ones, anything under the temporary
    directory (a run's configs, an old build) RUN."""
    return TEMP_RUN.sub("RUN", text.replace(CHECKOUT + os.sep, ""))


def _looks_numeric(cell):
    try:
        float(cell.rstrip("%x"))
        return True
    except ValueError:
        return cell == "-"


def print_table(title, columns, rows, file=sys.stdout):
    """columns: [(header, key, format)]; rows: dicts. Missing values print '-'."""
    cells = [[h for h, _k, _f in columns]]
    for row in rows:
        line = []
        for _h, key, fmt in columns:
            value = row.get(key)
            line.append("-" if value is None else (fmt.format(value) if fmt else str(value)))
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    # Numbers line up on the right, words on the left.
    left = [not all(_looks_numeric(r[i]) for r in cells[1:]) for i in range(len(columns))]
    if title:
        print(f"\n{title}", file=file)
    for n, line in enumerate(cells):
        print("  ".join(c.ljust(w) if left[i] else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths))).rstrip(), file=file)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=file)
    file.flush()


# ---------------------------------------------------------------------------
# Process accounting.

def cpu_seconds(pid):
    """utime + stime of a process, in seconds (children excluded)."""
    fields = _stat_fields(pid)
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _stat_fields(pid):
    """/proc/PID/stat from field 3 (state) on; the command name before it may
    hold spaces and parentheses."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def session_pids(sid):
    """Live processes of session sid, the leader first. Process starts every
    child in a session of its own, so this is that child and whatever it
    spawned (nginx's workers, a shell's command), and nothing else."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(_stat_fields(entry)[3]) == sid:
                found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue  # ended while we looked
    return sorted(found, key=lambda p: (p != sid, p))


def total_cpu_seconds(pids):
    """cpu_seconds() summed; a process that has ended counts as nothing."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def total_rss_kib(pids):
    """rss_kib() summed key by key over several processes."""
    total = {}
    for pid in pids:
        try:
            for key, value in rss_kib(pid).items():
                total[key] = total.get(key, 0) + value
        except OSError:
            pass
    return total


def open_fds(pid):
    """How many file descriptors a process has open (threads share them)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _cpu_snapshot():
    """{(pid, start time): CPU seconds} of every user-space process that is
    not this benchmark or one of its descendants."""
    me = os.getpid()
    parent, start, cpu = {}, {}, {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            f = _stat_fields(entry)
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(f[1])
        start[pid] = int(f[19])
        cpu[pid] = (int(f[11]) + int(f[12])) / ticks
    snapshot = {}
    for pid in cpu:
        p, ours, kernel = pid, False, False
        while p > 1:
            if p == me:
                ours = True
                break
            if p == 2:
                kernel = True  # kthreads: softirq work is done for whoever
                break
            p = parent.get(p, 0)
        if not ours and not kernel and pid != 2:
            snapshot[(pid, start[pid])] = cpu[pid]
    return snapshot


def _steal_seconds():
    """CPU time the hypervisor gave to someone else, all CPUs, since boot."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class ForeignLoad:
    """CPU time lost to others during a measurement: used by processes this
    run did not start, or stolen by the hypervisor from this virtual machine.

    The benchmarks share the machine; a number taken while something else
    kept a core busy is not comparable with one taken on a quiet machine.
    Processes that start and end between two snapshots go unseen."""

    def __init__(self):
        self.started = time.monotonic()
        self.before = _cpu_snapshot()
        self.steal_before = _steal_seconds()

    def steal_seconds(self):
        return _steal_seconds() - self.steal_before

    def cpu_seconds(self):
        after = _cpu_snapshot()
        used = sum(max(0.0, cpu - self.before.get(key, 0.0)) for key, cpu in after.items())
        return used + self.steal_seconds()

    def share(self):
        """Foreign CPU seconds per second of wall time (1.0 = one full core)."""
        elapsed = time.monotonic() - self.started
        return self.cpu_seconds() / elapsed if elapsed > 0 else 0.0


def _cpu_jiffies():
    """Busy, total and stolen jiffies of all CPUs together, from /proc/stat.
    Busy is user, nice, system, irq and softirq time; steal is time the
    hypervisor gave to someone else, which in a virtual machine stalls
    everything at once."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v[:7]) - v[3] - v[4], sum(v), v[7]


class MachineLoad:
    """Cores busy machine-wide since it was made: every process, this run's
    own included, and the kernel's interrupt and packet work, which
    ForeignLoad leaves out. It costs one read of /proc/stat, so it can be
    sampled often."""

    def __init__(self):
        self.before = _cpu_jiffies()

    def cores(self):
        """(busy cores, cores stolen by the hypervisor), on average since
        this was made; 1.0 is one full core."""
        after = _cpu_jiffies()
        total = after[1] - self.before[1]
        if not total:
            return 0.0, 0.0
        scale = os.cpu_count() / total
        return (after[0] - self.before[0]) * scale, (after[2] - self.before[2]) * scale

    def share(self):
        """Busy cores, steal left out: the unit of ForeignLoad.share(), so
        either can be wait_quiet()'s meter."""
        return self.cores()[0]


def wait_quiet(max_wait=300.0, threshold=0.05, meter=ForeignLoad, sample=1.0, span=1.0,
               file=sys.stderr):
    """Wait until the machine has been quiet for span seconds: each sample
    of that span (sample seconds long, measured with meter, ForeignLoad or
    MachineLoad) shows at most threshold cores busy. After max_wait seconds
    it gives up and the caller measures anyway; max_wait 0 does not wait at
    all. Returns the seconds waited and the load of the last sample (None
    when it did not wait), for the caller to record. A wait of more than a
    few seconds, and giving up, are told on file.

    The defaults suit the benchmarks that keep both cores busy themselves
    (loopback, bulk) and whose numbers are CPU per request or per byte:
    every cycle another program takes comes out of theirs. Their meter
    counts only processes this run did not start, plus hypervisor steal,
    and 0.05 of a core over a second is low enough that no other program
    is doing real work, yet leaves room for an idle system's timers and
    daemons, which would otherwise keep a run waiting for nothing. Process
    CPU times come in clock ticks (10 ms), so a sample of a whole second
    resolves a hundredth of a core. bench/wan.py passes its own values."""
    if max_wait <= 0:
        return 0.0, None
    program = os.path.basename(sys.argv[0])
    started = time.monotonic()
    needed = max(1, round(span / sample))
    calm, told = 0, False
    while True:
        load = meter()
        time.sleep(sample)
        busy = load.share()
        calm = calm + 1 if busy <= threshold else 0
        waited = time.monotonic() - started
        if calm >= needed:
            if told:
                print(f"{program}: quiet after {waited:.0f} s ({busy:.2f} cores busy)",
                      file=file, flush=True)
            return waited, busy
        if waited >= max_wait:
            print(f"{program}: warning: {busy:.2f} cores still busy after {waited:.0f} s; "
                  f"measuring anyway", file=file, flush=True)
            return waited, busy
        if not told and waited > 5:
            print(f"{program}: waiting for the machine to go quiet ({busy:.2f} cores busy, "
                  f"at most {threshold:g} wanted)...", file=file, flush=True)
            told = True


def least_disturbed(measure, noisy, retries):
    """measure() again while other processes took more than noisy of a core
    during it (the "foreign_cpu_share" of the dict it returns, a
    ForeignLoad.share()), at most retries times more: the machine is shared.
    Returns the least disturbed result and how many attempts were made."""
    best = None
    attempts = 1 + max(0, retries)
    for attempt in range(1, attempts + 1):
        result = measure()
        share = result["foreign_cpu_share"]
        if best is None or share < best["foreign_cpu_share"]:
            best = result
        if share <= noisy or attempt == attempts:
            return best, attempt
        print(f"   other processes took {share:.0%} of a core; measuring again",
              file=sys.stderr, flush=True)


def rss_kib(pid):
    """Resident set (VmRSS) and its private part, in KiB."""
    result = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                result["rss"] = int(line.split()[1])
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            private = 0
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    private += int(line.split()[1])
                elif line.startswith("Pss:"):
                    result["pss"] = int(line.split()[1])
            result["private"] = private
    except OSError:
        pass
    return result


def fd_hard_limit():
    """The open-file limit no process of ours can go beyond: asking a child
    for more (squid's max_filedescriptors, nginx's worker_rlimit_nofile) only
    earns an error when the hard limit cannot be raised, e.g. in a container
    without CAP_SYS_RESOURCE."""
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return (1 << 20) if hard == resource.RLIM_INFINITY else hard


def raise_fd_limit(want=65536):
    """Raise this process's open-file limit, which its children inherit: to
    want (hard limit too, when allowed), else as far as the hard limit goes.
    Returns the soft limit in force."""
    import resource
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        new_hard = hard if hard == resource.RLIM_INFINITY else max(hard, want)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, new_hard))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
