#!/bin/sh
# A stand-in for OpenWrt's uclient-fetch, through curl: it takes what the
# rpcd plugin gives (-q, -T SECONDS, -O FILE with - for standard output, and
# one URL) and fails as uclient-fetch does when no answer or an error
# status comes back. Each URL is appended to $KP_FETCH_LOG when that is set,
# so a test sees what was fetched.

set -eu

out=-
timeout=10
url=
while [ $# -gt 0 ]; do
	case "$1" in
	-q) ;;
	-T) timeout=$2; shift ;;
	-O) out=$2; shift ;;
	-*) echo "uclient-fetch stand-in: $1 is not here" >&2; exit 1 ;;
	*) url=$1 ;;
	esac
	shift
done
[ -z "${KP_FETCH_LOG:-}" ] || printf '%s\n' "$url" >>"$KP_FETCH_LOG"
exec curl -sSf --max-time "$timeout" -o "$out" "$url"
