#!/bin/sh
# Runs the musl build from build-musl.sh for one proxied request and prints
# its stripped size and its resident memory when idle.
#
# Usage: contrib/openwrt/smoke-musl.sh OUTDIR
#
# The origin is the binary's own stats page, so nothing else is needed but
# curl. Exits non-zero when the request does not come back, or when the
# binary carries interception code.

set -eu

out=$(cd "${1:?usage: $0 OUTDIR}" && pwd)
port=$((20000 + $$ % 20000))
stats=$((port + 1))
log=$(mktemp)
LD_LIBRARY_PATH="$out" "$out/keepalive-proxy" -p "$port" --stats-listen "127.0.0.1:$stats" 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; rm -f "$log"' EXIT INT TERM
for _ in 1 2 3 4 5 6 7 8 9 10; do
	curl -s -o /dev/null "http://127.0.0.1:$stats/stats" && break
	sleep 0.2
done
sleep 1
rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
body=$(curl -sS -f -x "http://127.0.0.1:$port" "http://127.0.0.1:$stats/metrics")
case "$body" in
*keepalive_proxy_requests_total*) ;;
*) echo "the proxied request did not come back: $body" >&2; cat "$log" >&2; exit 1 ;;
esac
# The build has no TLS, so it must carry none of interception's code: its
# messages are the visible part (see KP_TLS in CMakeLists.txt).
for m in "CONNECT inside an intercepted connection" "refused the certificate made for" \
	"cannot make a certificate for this host"; do
	if grep -qF "$m" "$out/keepalive-proxy"; then
		echo "interception code in a build without TLS: \"$m\"" >&2
		exit 1
	fi
done
# A library path baked in would be the build machine's, not the router's.
if readelf -d "$out/keepalive-proxy" | grep -qE '\((RPATH|RUNPATH)\)'; then
	echo "the binary names a library path of the build: $(readelf -d "$out/keepalive-proxy" | grep -E 'R(UN)?PATH')" >&2
	exit 1
fi
echo "musl build: $(wc -c < "$out/keepalive-proxy") bytes stripped ($(( $(wc -c < "$out/keepalive-proxy") / 1024 )) KiB), idle RSS $rss KiB, a proxied request OK"
readelf -d "$out/keepalive-proxy" | awk '/NEEDED/ { print "  needs " $NF }'
