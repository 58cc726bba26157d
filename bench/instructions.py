#!/usr/bin/env python3
"""Instructions the daemon runs per proxied request, counted by callgrind.

Wall-clock rates on a shared 2-core machine swing by 10% from run to run
(bench/loopback.py); instruction counts do not. The same requests (N
keep-alive GETs on 10 connections for a 600-byte answer from a small
origin of this script's own, on loopback) are sent to the daemon under
valgrind --tool=callgrind twice, N and 2N of them; the difference of the
two totals divided by N leaves start-up and shutdown out.

    bench/instructions.py build/keepalive-proxy [--read-ahead ...]

Extra arguments go to the daemon. Needs valgrind.
"""
import http.server
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

BODY = b"x" * 600
CONNECTIONS = 10
REQUESTS = 2000


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def instructions(binary, extra, origin_port, n, workdir):
    """Total instructions callgrind counted in the daemon for n requests."""
    port = free_port()
    out = os.path.join(workdir, f"callgrind.{n}")
    daemon = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
         "-p", str(port)] + extra,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.1)
        request = (f"GET http://127.0.0.1:{origin_port}/f HTTP/1.1\r\n"
                   f"Host: 127.0.0.1:{origin_port}\r\n\r\n").encode()

        def client(count):
            with socket.create_connection(("127.0.0.1", port)) as c:
                for _ in range(count):
                    c.sendall(request)
                    got = b""
                    while not got.endswith(BODY):
                        chunk = c.recv(65536)
                        if not chunk:
                            raise RuntimeError("the proxy closed the connection")
                        got += chunk

        threads = [threading.Thread(target=client, args=(n // CONNECTIONS,))
                   for _ in range(CONNECTIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        daemon.terminate()
        daemon.wait()
    with open(out) as f:
        return int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1))


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    binary, extra = sys.argv[1], sys.argv[2:]
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as workdir:
        once = instructions(binary, extra, origin.server_port, REQUESTS, workdir)
        twice = instructions(binary, extra, origin.server_port, 2 * REQUESTS, workdir)
    print(f"{binary} {' '.join(extra)}: {(twice - once) / REQUESTS:.0f} instructions per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
