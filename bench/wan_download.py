#!/usr/bin/env python3
"""The downloader of bench/wan.py, run inside the client's network namespace.

It behaves like a segment downloader: a file fetched as byte ranges, one after
another, every range on a TCP connection of its own, either straight from the
origin or through an HTTP proxy (absolute-form requests). It prints one JSON
object on stdout; all times are CLOCK_MONOTONIC seconds, which every network
namespace shares, so bench/wan.py can line them up with its own clock.

Modes:
  chunks  fetch --chunks ranges of --chunk-size bytes, --workers of them at
          once (each with its own run of ranges), a range every --interval
          seconds start-to-start (0: back-to-back), from --start-at on;
          with --reuse, over one kept-alive connection per worker instead;
          with --arrivals, every range in a thread of its own that starts at
          its due time whether or not earlier ones have finished (requests
          overlapping the responses still arriving), in rounds of
          --round-size ranges --round-gap seconds apart; with --chain, each
          worker starts its next range as soon as the previous response's
          head has arrived, in rounds likewise
  rtt     --count TCP connects to the origin; connect() takes one round trip
  stream  one plain GET over one connection, progress sampled as it arrives,
          stopped after --max-seconds if that comes first (a lossy path)
  hls     an HLS player's fetches: the media playlist --path on a connection of
          its own, then the segments it lists, in order, back-to-back, each a
          plain GET on a new connection (with --reuse, everything over one
          kept-alive connection); --chunks caps the segments fetched (0: all)

With --tls the origin speaks HTTPS: direct, or through the proxy by CONNECT
(which a proxy tunnels, or keepalive-proxy may intercept), verified against
--cafile and the origin's name or address, ALPN http/1.1, requests in
origin form; no TLS session is kept from one connection to the next, as a
downloader that starts afresh for every chunk keeps none either.
"""

import argparse
import json
import socket
import ssl
import sys
import threading
import time
import urllib.parse

RECV_BUFFER = 4 << 20
IO_TIMEOUT = 60.0
TLS = None   # an ssl.SSLContext with --tls


class FetchError(Exception):
    pass


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("chunks", "rtt", "stream", "hls"))
    p.add_argument("--origin", required=True, help="HOST:PORT of the origin")
    p.add_argument("--path", default="/file.bin")
    p.add_argument("--proxy", help="HOST:PORT of an HTTP proxy; absent: direct")
    p.add_argument("--chunk-size", type=int, default=2 << 20)
    p.add_argument("--chunks", type=int, default=64, help="per worker")
    p.add_argument("--first-chunk", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--interval", type=float, default=0.0)
    p.add_argument("--reuse", action="store_true",
                   help="keep one connection per worker instead of one per chunk (a reference)")
    p.add_argument("--arrivals", action="store_true",
                   help="start each range at its due time, finished or not")
    p.add_argument("--chain", action="store_true",
                   help="start a worker's next range when the previous head arrived")
    p.add_argument("--round-size", type=int, default=0,
                   help="arrivals, chain: ranges per round (per worker for chain)")
    p.add_argument("--round-gap", type=float, default=0.0,
                   help="arrivals: seconds from one round's start to the next")
    p.add_argument("--start-at", type=float, default=0.0, help="CLOCK_MONOTONIC seconds")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--sample", type=float, default=0.05, help="stream: seconds between samples")
    p.add_argument("--max-seconds", type=float, default=0.0,
                   help="stream: stop reading after this long (0: read it all)")
    p.add_argument("--tls", action="store_true", help="the origin speaks HTTPS")
    p.add_argument("--cafile", help="with --tls: the CA certificates to trust")
    return p.parse_args()


def tls_context(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def open_connection(host, port, proxy):
    """A connection to the origin: TCP, or TCP and TLS, straight or by CONNECT."""
    if not TLS:
        return socket.create_connection(split_hostport(proxy) if proxy else (host, port),
                                        timeout=IO_TIMEOUT)
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if proxy:
        sock = socket.create_connection(split_hostport(proxy), timeout=IO_TIMEOUT)
        sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        head, extra = read_head(sock)
        status, _headers = parse_head(head)
        if status != 200 or extra:
            sock.close()
            raise FetchError(f"CONNECT answered {status}")
    else:
        sock = socket.create_connection((host, port), timeout=IO_TIMEOUT)
    return TLS.wrap_socket(sock, server_hostname=host)


def split_hostport(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def read_head(sock):
    """The response head, and whatever body bytes came with it."""
    data = bytearray()
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(data[:end]).decode("latin-1"), bytes(data[end + 4:])
        if len(data) > 65536:
            raise FetchError("response head too long")
        piece = sock.recv(65536)
        if not piece:
            raise FetchError("connection closed before the response head" if not data
                             else "connection closed inside the response head")
        data += piece


def parse_head(head):
    lines = head.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise FetchError(f"bad status line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


def get(origin, proxy, path, first=None, last=None, on_progress=None, keep=None, on_head=None,
        body=None, deadline=None):
    """One request on a fresh connection, or on keep["sock"] when keep is a
    dict (the connection stays open there for the next request). Returns
    timings, sizes and the Content-Type; a range response must be a 206 of
    exactly the bytes asked for. The body is counted and dropped, or
    appended to body, a bytearray, for a caller that reads it. Past
    deadline (CLOCK_MONOTONIC) the body is left unread and the answer
    marked truncated."""
    host, port = split_hostport(origin)
    authority = f"{host}:{port}"
    target = f"http://{authority}{path}" if proxy and not TLS else path
    lines = [f"GET {target} HTTP/1.1", f"Host: {authority}", "User-Agent: kp-wan-bench",
             "Accept: */*"]
    if first is not None:
        lines.append(f"Range: bytes={first}-{last}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()

    t_start = time.monotonic()
    sock = keep.get("sock") if keep is not None else None
    if sock is None:
        sock = open_connection(host, port, proxy)
    reusable = False
    try:
        t_connected = time.monotonic()
        sock.sendall(request)
        head, early = read_head(sock)
        got = len(early)
        if body is not None:
            body += early
        t_head = time.monotonic()
        if on_head:
            on_head()
        status, headers = parse_head(head)
        length = headers.get("content-length")
        if length is None or not length.isdigit():
            raise FetchError(f"status {status} without a usable Content-Length")
        length = int(length)
        if first is not None:
            if status != 206:
                raise FetchError(f"status {status}, expected 206")
            if length != last - first + 1:
                raise FetchError(f"206 of {length} bytes, expected {last - first + 1}")
            want_range = f"bytes {first}-{last}/"
            if not headers.get("content-range", "").startswith(want_range):
                raise FetchError(f"Content-Range {headers.get('content-range')!r}")
        elif status != 200:
            raise FetchError(f"status {status}, expected 200")
        buf = memoryview(bytearray(RECV_BUFFER))
        truncated = False
        while got < length:
            if deadline and time.monotonic() > deadline:
                truncated = True
                break
            n = sock.recv_into(buf, min(RECV_BUFFER, length - got))
            if n == 0:
                raise FetchError(f"connection closed after {got} of {length} body bytes")
            got += n
            if body is not None:
                body += buf[:n]
            if on_progress:
                on_progress(got)
        t_end = time.monotonic()
        reusable = headers.get("connection", "").lower() != "close" and not truncated
    finally:
        if keep is not None and reusable:
            keep["sock"] = sock
        else:
            sock.close()
            if keep is not None:
                keep["sock"] = None
    return {"start": t_start, "connected": t_connected, "head": t_head, "end": t_end,
            "bytes": got, "status": status, "content_type": headers.get("content-type"),
            "truncated": truncated}


def run_worker(args, worker, results):
    first_chunk = args.first_chunk + worker * args.chunks
    base = args.start_at or time.monotonic()
    keep = {} if args.reuse else None
    for i in range(args.chunks):
        due = base + i * args.interval
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        fetch_one(args, first_chunk + i, due, results, worker, keep=keep)


def fetch_one(args, index, due, results, worker=0, on_head=None, keep=None):
    """Range index, recorded in results with its timings or its error."""
    first = index * args.chunk_size
    last = first + args.chunk_size - 1
    record = {"worker": worker, "index": index, "due": due}
    try:
        record.update(get(args.origin, args.proxy, args.path, first, last, on_head=on_head,
                          keep=keep))
    except (OSError, FetchError) as e:
        record.update({"error": f"{type(e).__name__}: {e}", "end": time.monotonic()})
        if on_head:
            on_head()
    results.append(record)


def run_chain(args, worker, results):
    """One worker: each range starts when the previous one's head arrived."""
    base = args.start_at or time.monotonic()
    per_round = args.round_size or args.chunks
    threads = []
    for i in range(args.chunks):
        if i % per_round == 0:
            due = base + (i // per_round) * args.round_gap
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        head = threading.Event()
        index = args.first_chunk + worker * args.chunks + i
        t = threading.Thread(target=fetch_one,
                             args=(args, index, time.monotonic(), results, worker, head.set))
        t.start()
        threads.append(t)
        head.wait(IO_TIMEOUT)
    for t in threads:
        t.join()


def run_arrivals(args, results):
    """Each range in a thread of its own, started at its due time."""
    base = args.start_at or time.monotonic()
    per_round = args.round_size or args.chunks
    threads = []
    for i in range(args.chunks):
        due = base + (i // per_round) * args.round_gap + (i % per_round) * args.interval
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t = threading.Thread(target=fetch_one, args=(args, args.first_chunk + i, due, results))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def mode_chunks(args):
    if args.start_at:
        delay = args.start_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    results = []
    if args.arrivals or args.chain:
        if args.arrivals:
            run_arrivals(args, results)
        else:
            threads = [threading.Thread(target=run_chain, args=(args, w, results))
                       for w in range(args.workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        results.sort(key=lambda r: r["index"])
        return {"chunks": results, "errors": sum(1 for r in results if "error" in r)}
    threads = [threading.Thread(target=run_worker, args=(args, w, results))
               for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort(key=lambda r: (r["index"], r["worker"]))
    return {"chunks": results, "errors": sum(1 for r in results if "error" in r)}


def mode_rtt(args):
    times = []
    for _ in range(args.count):
        t0 = time.monotonic()
        with socket.create_connection(split_hostport(args.origin), timeout=IO_TIMEOUT):
            times.append(time.monotonic() - t0)
        time.sleep(0.02)
    return {"connect_s": times}


def mode_stream(args):
    samples = []
    state = {"next": 0.0}

    def progress(got):
        now = time.monotonic()
        if now >= state["next"]:
            samples.append((now, got))
            state["next"] = now + args.sample

    deadline = time.monotonic() + args.max_seconds if args.max_seconds else None
    result = get(args.origin, args.proxy, args.path, on_progress=progress, deadline=deadline)
    samples.append((result["end"], result["bytes"]))
    result["samples"] = samples
    return result


def playlist_segments(text, playlist_path):
    """The segments of an HLS media playlist as paths on the origin, in
    order: every line that is neither blank nor a tag or comment is a URI
    (RFC 8216, 4.1), relative ones resolved against the playlist's. The
    playlist's query, the run's tag, goes along to segments without one of
    their own, so the origin's log can tell one run's requests from
    another's; a player would not do that, the origin does not care."""
    if not text.startswith("#EXTM3U"):
        raise FetchError("the playlist does not start with #EXTM3U")
    base, _, query = playlist_path.partition("?")
    paths = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = urllib.parse.urlsplit(urllib.parse.urljoin(base, line))
        path = parts.path + ("?" + parts.query if parts.query else "?" + query if query else "")
        paths.append(path)
    if not paths:
        raise FetchError("the playlist lists no segment")
    return paths


def mode_hls(args):
    keep = {} if args.reuse else None
    text = bytearray()
    playlist = get(args.origin, args.proxy, args.path, keep=keep, body=text)
    if playlist["content_type"] != "application/vnd.apple.mpegurl":
        raise FetchError(f"playlist served as {playlist['content_type']!r}")
    paths = playlist_segments(text.decode("utf-8"), args.path)
    listed = len(paths)
    if args.chunks:
        paths = paths[:args.chunks]
    results = []
    for index, path in enumerate(paths):
        record = {"worker": 0, "index": index, "due": time.monotonic(), "path": path}
        try:
            record.update(get(args.origin, args.proxy, path, keep=keep))
        except (OSError, FetchError) as e:
            record.update({"error": f"{type(e).__name__}: {e}", "end": time.monotonic()})
        results.append(record)
    return {"playlist": playlist, "segments_listed": listed, "chunks": results,
            "errors": sum(1 for r in results if "error" in r)}


def main():
    global TLS
    args = parse_args()
    if args.tls:
        TLS = tls_context(args.cafile)
    try:
        out = {"chunks": mode_chunks, "rtt": mode_rtt, "stream": mode_stream,
               "hls": mode_hls}[args.mode](args)
    except (OSError, FetchError) as e:
        out = {"fatal": f"{type(e).__name__}: {e}"}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
