#!/usr/bin/env python3
"""Password guessing against --auth-file hashes does not slow other clients.

A private nginx serves a small file on loopback; keepalive-proxy requires
Basic proxy authentication against a users file holding a bcrypt hash
(cost --cost). One honest client (127.0.0.1) sends --requests requests one
after another with the right password: alone; while --guessers clients
from another address (127.0.0.2, in a process of their own) each keep a
request without credentials in flight (answered 407 at once: the same
churn of connections, no hash to check); and while they each keep a wrong
guess in flight instead (a new password each time). The honest client's
latencies are compared, and what the others got back (407: refused after a
hash check, or for no credentials; 429: refused unseen; 503: the check
queue was full) is counted. Not a test: nothing here passes or fails on
speed.
"""

import argparse
import base64
import collections
import http.client
import multiprocessing
import os
import statistics
import sys
import threading
import time
import warnings

import kpbench as kb

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # libxcrypt through Python: deprecated in 3.11, still in Debian 12


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.path.join(kb.REPO_ROOT, "build"))
    p.add_argument("--requests", type=int, default=300, help="honest requests per phase")
    p.add_argument("--guessers", type=int, default=50, help="other clients, each one in flight")
    p.add_argument("--cost", type=int, default=10, help="bcrypt cost (log2 of rounds)")
    return p.parse_args()


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def ask(proxy_port, url, auth, source=None):
    """One request through the proxy on a connection of its own: (status, seconds)."""
    start = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=30,
                                   source_address=(source, 0) if source else None)
    try:
        c.request("GET", url, headers={"Proxy-Authorization": auth} if auth else {})
        r = c.getresponse()
        r.read()
        return r.status, time.monotonic() - start
    finally:
        c.close()


def honest(proxy_port, url, auth, n):
    times = []
    for _ in range(n):
        status, seconds = ask(proxy_port, url, auth)
        if status != 200:
            kb.die(f"the honest client got {status}")
        times.append(seconds)
    return times


def crowd_main(port, url, n, guess, stop, results):
    """n clients from 127.0.0.2, each keeping one request in flight until stop."""
    got = collections.Counter()
    lock = threading.Lock()

    def one(k):
        i = 0
        while not stop.is_set():
            i += 1
            try:
                status, _ = ask(port, url, basic("ann", f"guess {k} {i}") if guess else None,
                                source="127.0.0.2")
            except OSError:
                status = "error"
            with lock:
                got[status] += 1

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(dict(got))


def crowd(port, url, n, guess):
    stop, results = multiprocessing.Event(), multiprocessing.Queue()
    proc = multiprocessing.Process(target=crowd_main, args=(port, url, n, guess, stop, results))
    proc.start()
    time.sleep(1.0)
    return proc, stop, results


def crowd_stop(c):
    proc, stop, results = c
    stop.set()
    got = results.get(timeout=120)
    proc.join(60)
    return got


def summary(times):
    times = sorted(times)
    return (statistics.median(times) * 1e3, times[max(0, int(len(times) * 0.99) - 1)] * 1e3,
            times[-1] * 1e3)


def main():
    args = parse_args()
    workdir = kb.Workdir(prefix="kpbench-auth-")
    nginx = kb.Nginx(workdir, files={"small.bin": 600}).start()
    users = workdir.join("users")
    with open(users, "w") as f:
        salt = crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << args.cost)
        f.write(f"ann:{crypt.crypt('right password', salt)}\n")
    os.chmod(users, 0o600)
    proxy = kb.start_proxy("keepalive-proxy", workdir, build_dir=args.build_dir,
                           extra_args=["--auth-file", users])
    url = f"http://127.0.0.1:{nginx.port}/small.bin"
    good = basic("ann", "right password")
    try:
        t0 = time.monotonic()
        ask(proxy.port, url, basic("ann", "wrong"))      # one check, to time a hash
        one_hash = time.monotonic() - t0
        ask(proxy.port, url, good)                       # the right password, now cached
        alone = honest(proxy.port, url, good, args.requests)
        noise = crowd(proxy.port, url, args.guessers, guess=False)
        with_noise = honest(proxy.port, url, good, args.requests)
        noise_got = crowd_stop(noise)
        guessers = crowd(proxy.port, url, args.guessers, guess=True)
        with_guessers = honest(proxy.port, url, good, args.requests)
        guess_got = crowd_stop(guessers)
    finally:
        proxy.stop()
        nginx.stop()
        workdir.cleanup()

    print(f"bcrypt cost {args.cost}: one wrong password took {one_hash * 1e3:.1f} ms "
          "(checked on the proxy's worker thread)")
    print(f"{'honest client, ' + str(args.requests) + ' requests':44s}  p50 ms  p99 ms  max ms")
    for label, times in (("alone", alone),
                         (f"{args.guessers} others without credentials", with_noise),
                         (f"{args.guessers} others guessing passwords", with_guessers)):
        p50, p99, top = summary(times)
        print(f"  {label:42s}  {p50:6.2f}  {p99:6.2f}  {top:6.2f}")
    for label, got in (("without credentials", noise_got), ("guessing", guess_got)):
        print(f"others {label} got: " +
              ", ".join(f"{k}: {v}" for k, v in sorted(got.items(), key=str)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
