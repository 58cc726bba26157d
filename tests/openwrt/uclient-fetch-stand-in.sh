#!/bin/sh
# A stand-in for OpenWrt's uclient-fetch, through curl: it takes what the
# rpcd plugin gives (-q, -T SECONDS, -O FILE with - for standard output, and
# one URL) and ends as uclient-fetch.c does: an answer other than 200, 204
# or 206 writes no body, says "HTTP error CODE" on standard error and exits
# 8; no connection says "Connection error: ..." and exits 4; with -q it
# says neither (its messages are all behind "if (!quiet)"). Each URL is
# appended to $KP_FETCH_LOG when that is set, so a test sees what was
# fetched.

set -eu

out=-
timeout=10
url=
quiet=
while [ $# -gt 0 ]; do
	case "$1" in
	-q) quiet=1 ;;
	-T) timeout=$2; shift ;;
	-O) out=$2; shift ;;
	-*) echo "uclient-fetch stand-in: $1 is not here" >&2; exit 1 ;;
	*) url=$1 ;;
	esac
	shift
done
[ -z "${KP_FETCH_LOG:-}" ] || printf '%s\n' "$url" >>"$KP_FETCH_LOG"
body=$(mktemp)
trap 'rm -f "$body"' EXIT
code=$(curl -s --max-time "$timeout" -o "$body" -w '%{http_code}' "$url") || code=000
case "$code" in
200 | 204 | 206)
	[ -n "$quiet" ] || echo "Writing to stdout" >&2
	if [ "$out" = - ]; then cat "$body"; else cat "$body" >"$out"; fi
	;;
000)
	[ -n "$quiet" ] || echo "Connection error: Connection failed" >&2
	exit 4
	;;
*)
	[ -n "$quiet" ] || echo "HTTP error $code" >&2
	exit 8
	;;
esac
