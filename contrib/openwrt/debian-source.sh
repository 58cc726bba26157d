#!/bin/sh
# Fetches Debian source packages and unpacks each into DIR/NAME, for the
# builds that compile a library for another C library or CPU
# (build-musl.sh, build-cross.sh).
#
# Usage: contrib/openwrt/debian-source.sh DIR NAME...
#
# The sources come from the archive the machine's binaries come from. When
# no deb-src entry is configured, one is added for each configured mirror,
# which needs root.

set -eu

dir=${1:?usage: $0 DIR NAME...}
shift
[ $# -gt 0 ] || {
	echo "usage: $0 DIR NAME..." >&2
	exit 2
}

if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		sed 's/^Types: deb$/Types: deb-src/' "$f"
		echo
	done >"$dir/src.sources"
	mv "$dir/src.sources" /etc/apt/sources.list.d/keepalive-proxy-src.sources
	apt-get update -qq
fi
# apt-get checks the files against the archive's signed index; the .dsc's own
# signature needs the maintainer's key, which a build machine has no need for.
cd "$dir"
apt-get source -qq --download-only "$@" >/dev/null 2>&1
for name in "$@"; do
	dpkg-source --no-check -x -q "${name}"_*.dsc "$name" >/dev/null
done
