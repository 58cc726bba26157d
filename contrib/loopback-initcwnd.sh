#!/bin/sh
# Raise the initial congestion window (initcwnd) and initial receive window
# (initrwnd) on the loopback routes, or put them back with --reset.
#
# Why: keepalive-proxy keeps the long-haul connections to origins warm, but a
# downloader that opens a new connection per chunk still opens it to the
# proxy, over loopback, and every such connection starts in slow start with
# the kernel's default window of 10 segments. Loopback round trips are short,
# so this costs little, yet it is still a handful of round trips per chunk
# before the client-side hop runs at full speed. Starting loopback
# connections with a large window removes slow start from that hop as well.
# A large initrwnd lets the receiving end advertise a matching window at once,
# so the sender's first flight is not held back by the peer.
#
# Usage (as root):
#   loopback-initcwnd.sh          set both windows to 100 segments
#   loopback-initcwnd.sh N        set both windows to N segments
#   loopback-initcwnd.sh --reset  remove the settings (kernel defaults)
#
# The routes are changed in the running kernel only; the change is gone after
# a reboot or after the loopback interface is taken down and up again.

set -eu

usage()
{
	echo "usage: $0 [N | --reset]   (N: segments, default 100)" >&2
	exit 2
}

windows=100
reset=no
case $# in
0) ;;
1)
	case $1 in
	--reset) reset=yes ;;
	-h | --help) usage ;;
	'' | *[!0-9]*) usage ;;
	*) windows=$1 ;;
	esac
	;;
*) usage ;;
esac

if [ "$reset" = no ] && [ "$windows" -lt 1 ]; then
	usage
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "$0: must be run as root" >&2
	exit 1
fi
if ! command -v ip >/dev/null 2>&1; then
	echo "$0: the ip command (iproute2) is required" >&2
	exit 1
fi

if [ "$reset" = yes ]; then
	extra=""
else
	extra="initcwnd $windows initrwnd $windows"
fi

run()
{
	echo "+ ip $*"
	ip "$@"
}

# IPv4. A connection to 127.0.0.1 uses the host route for 127.0.0.1 itself,
# which is more specific than 127.0.0.0/8, so both routes are changed; the
# /8 route covers the rest of the loopback block. A route is re-created with
# the same attributes it had, plus (or minus) the two windows.
for dst in 127.0.0.0/8 127.0.0.1; do
	if [ -n "$(ip -4 route show table local type local "$dst" dev lo)" ]; then
		# $extra is deliberately split into words.
		# shellcheck disable=SC2086
		run route change local "$dst" dev lo proto kernel scope host \
			src 127.0.0.1 table local $extra
	else
		echo "IPv4 local route $dst on lo not found; skipped"
	fi
done

# IPv6. The kernel installs the ::1 local route with metric 0, and a metric
# of 0 given from user space means "the default" (1024), so "ip -6 route
# change" cannot name that route and fails. Try it only when the route has
# some other metric; otherwise explain.
route6=$(ip -6 route show table local type local ::1 dev lo 2>/dev/null || true)
if [ -z "$route6" ]; then
	echo "IPv6 local route ::1 on lo not found; skipped"
else
	metric=$(printf '%s\n' "$route6" | sed -n 's/.* metric \([0-9][0-9]*\).*/\1/p' | head -n 1)
	if [ -z "$metric" ] || [ "$metric" -eq 0 ]; then
		echo "IPv6 local route ::1 has metric 0, which cannot be changed in"
		echo "place; IPv6 loopback keeps the kernel defaults."
		if [ "$reset" = no ]; then
			echo "Bind the proxy to 127.0.0.1 to benefit from this setting."
		fi
	else
		# shellcheck disable=SC2086
		run -6 route change local ::1 dev lo proto kernel metric "$metric" \
			table local $extra ||
			echo "IPv6 local route ::1 could not be changed; skipped"
	fi
fi

echo
echo "Loopback routes now:"
ip -4 route show table local type local dev lo
ip -6 route show table local type local dev lo 2>/dev/null || true
