#!/bin/sh
# Builds keepalive-proxy against musl, linked dynamically against a libev
# built for musl, as an OpenWrt router runs it; llhttp is built in.
#
# Usage: contrib/openwrt/build-musl.sh OUTDIR
#
# Leaves OUTDIR/keepalive-proxy (stripped) and OUTDIR/libev.so* beside it;
# run it with LD_LIBRARY_PATH=OUTDIR. Needs musl-tools, cmake, make,
# dpkg-dev and node-llhttp, and fetches libev's Debian source package
# (apt-get source libev) into a scratch directory: adding a deb-src entry
# for the configured Debian mirror when there is none, which needs root.

set -eu

out=${1:?usage: $0 OUTDIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

command -v musl-gcc >/dev/null || { echo "musl-gcc missing (apt-get install musl-tools)" >&2; exit 1; }

# libev's source, from the same archive the binaries come from.
sh "$here/contrib/openwrt/debian-source.sh" "$work" libev

# libev for musl, shared, as OpenWrt's libev package is.
(cd "$work/libev" && CC=musl-gcc CFLAGS="-O2" ./configure -q --prefix="$work/musl" \
	--enable-shared --disable-static >/dev/null && make -s >/dev/null 2>&1 && make -s install >/dev/null)

# keepalive-proxy with llhttp built in; MinSizeRel as a router build would be.
# The plain package's build: no TLS (the host's OpenSSL is built for glibc).
# musl-gcc is a wrapper: CMake finds no musl-gcc-ar for link-time
# optimisation, and the host's gcc-ar is the same compiler's. No build
# RPATH: it would name the temporary libev directory, gone after this
# script and free for anyone on the machine to create.
CC=musl-gcc cmake -S "$here" -B "$work/build" -DCMAKE_BUILD_TYPE=MinSizeRel -DCMAKE_SKIP_BUILD_RPATH=ON \
	-DCMAKE_C_COMPILER_AR="$(command -v gcc-ar)" -DCMAKE_C_COMPILER_RANLIB="$(command -v gcc-ranlib)" \
	-DKP_BUILD_TESTS=OFF -DKP_BUILD_BENCH=OFF -DKP_WERROR=ON -DKP_TLS=OFF \
	-DLIBEV_INCLUDE_DIR="$work/musl/include" -DLIBEV_LIBRARY="$work/musl/lib/libev.so" >/dev/null
cmake --build "$work/build" -j2 >/dev/null

cp "$work/build/keepalive-proxy" "$out/"
strip "$out/keepalive-proxy"
cp -P "$work/musl/lib"/libev.so* "$out/"
echo "built $out/keepalive-proxy ($(wc -c < "$out/keepalive-proxy") bytes stripped) and" \
	"$(cd "$out" && echo libev.so*)"
