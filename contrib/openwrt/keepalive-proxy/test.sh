#!/bin/sh
# Run by the openwrt/packages CI in an OpenWrt container once the package is
# installed, as "sh test.sh PKG_NAME PKG_VERSION": the binary reports the
# package's version, starts, and proxies one request. The origin is the
# daemon's own stats listener, so nothing else needs to be installed.
# KP_TEST_PORT and KP_TEST_STATS_PORT move the two ports used.

set -eu

name=${1:?usage: test.sh PKG_NAME PKG_VERSION}
version=${2:?usage: test.sh PKG_NAME PKG_VERSION}
case "$name" in
keepalive-proxy | keepalive-proxy-openssl) ;;
*) exit 0 ;;
esac

got=$(keepalive-proxy --version | head -n 1)
if [ "$got" != "keepalive-proxy $version" ]; then
	echo "--version says '$got', the package is $version" >&2
	exit 1
fi
if [ "$name" = keepalive-proxy-openssl ] && keepalive-proxy --version | grep -q '^TLS: none'; then
	echo "the -openssl variant was built without TLS" >&2
	exit 1
fi

port=${KP_TEST_PORT:-19250}
stats=${KP_TEST_STATS_PORT:-$((port + 1))}
out=$(mktemp)
keepalive-proxy -p "$port" --stats-listen "127.0.0.1:$stats" --grace 0 &
pid=$!
trap 'kill "$pid" 2>/dev/null || :; rm -f "$out"' EXIT

# fetch URL: through the proxy, to standard output
fetch() {
	if command -v uclient-fetch >/dev/null 2>&1; then
		http_proxy="http://127.0.0.1:$port" uclient-fetch -q -O - "$1"
	elif command -v wget >/dev/null 2>&1; then
		http_proxy="http://127.0.0.1:$port" wget -q -O - "$1"
	else
		curl -sf -x "http://127.0.0.1:$port" "$1"
	fi
}

i=0
while [ "$i" -lt 20 ]; do
	if fetch "http://127.0.0.1:$stats/metrics" >"$out" 2>/dev/null; then
		break
	fi
	sleep 1
	i=$((i + 1))
done
if ! grep -q '^keepalive_proxy_requests_total 1$' "$out"; then
	echo "no proxied request counted:" >&2
	cat "$out" >&2
	exit 1
fi
echo "keepalive-proxy $version: started, and proxied one request"
