#!/bin/sh
# Cross-builds keepalive-proxy and its unit tests for a router's CPU with
# Debian's cross compiler, so that test-cross.sh can run them under
# qemu-user: most small routers are 32-bit MIPS, and big-endian, which is
# where byte order, 32-bit sizes and alignment go wrong first.
#
# Usage: contrib/openwrt/build-cross.sh ARCH OUTDIR
#
# ARCH is mips (big-endian) or mipsel. Leaves in OUTDIR:
#   keepalive-proxy      the daemon (stripped), TLS off as the router build
#   lib/libev.so*        libev, shared as OpenWrt's package is
#   unit/unit_*          the unit tests, cmocka linked in
#   cross.env            what test-cross.sh needs to know of the target
#   toolchain.cmake      the CMake toolchain file the build used
# Needs gcc-ARCH-linux-gnu, libc6-dev-ARCH-cross, cmake, make, dpkg-dev and
# node-llhttp (whose generated C is built for the target), and fetches the
# Debian source packages of libev and cmocka (apt-get source) into a
# scratch directory: adding a deb-src entry for the configured Debian
# mirror when there is none, which needs root. Debian has no big-endian
# mips port to take cmocka from, so it is built here too.

set -eu

arch=${1:?usage: $0 ARCH OUTDIR}
out=${2:?usage: $0 ARCH OUTDIR}
case "$arch" in
mips | mipsel) triple=$arch-linux-gnu ;;
*) echo "$0: ARCH must be mips or mipsel, not $arch" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
sysroot=/usr/$triple
prefix=$work/target

command -v "$triple-gcc" >/dev/null ||
	{ echo "$triple-gcc missing (apt-get install gcc-$triple libc6-dev-$arch-cross)" >&2; exit 1; }

sh "$here/contrib/openwrt/debian-source.sh" "$work" libev cmocka

# Everything found for the target comes from the cross libc or from what is
# built here; only programs come from the host. The emulator lets ctest run
# the tests too, for whoever keeps a build tree.
cat > "$out/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $arch)
set(CMAKE_C_COMPILER $triple-gcc)
set(CMAKE_FIND_ROOT_PATH $sysroot $prefix)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-$arch -L $sysroot)
EOF
# The host's .pc files describe the host's libraries.
PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig
export PKG_CONFIG_LIBDIR

(cd "$work/libev" && CC=$triple-gcc CFLAGS="-O2" ./configure -q --host="$triple" \
	--prefix="$prefix" --enable-shared --disable-static >/dev/null &&
	make -s >/dev/null 2>&1 && make -s install >/dev/null)

# Static, so the test binaries need nothing beside them but libev.
cmake -S "$work/cmocka" -B "$work/cmocka-build" -DCMAKE_TOOLCHAIN_FILE="$out/toolchain.cmake" \
	-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DWITH_STATIC_LIB=ON \
	-DWITH_EXAMPLES=OFF -DUNIT_TESTING=OFF >/dev/null
cmake --build "$work/cmocka-build" -j2 >/dev/null
cmake --install "$work/cmocka-build" >/dev/null

# MinSizeRel as a router build would be; -Werror so that a warning only the
# 32-bit target raises (a format width, a narrowing) fails here. No build
# RPATH: it would name this script's temporary directory (libev is found
# beside the binaries, in OUTDIR/lib).
cmake -S "$here" -B "$work/build" -DCMAKE_TOOLCHAIN_FILE="$out/toolchain.cmake" \
	-DCMAKE_BUILD_TYPE=MinSizeRel -DCMAKE_SKIP_BUILD_RPATH=ON -DKP_BUILD_TESTS=ON -DKP_BUILD_BENCH=OFF \
	-DKP_WERROR=ON -DKP_TLS=OFF \
	-DLIBEV_INCLUDE_DIR="$prefix/include" -DLIBEV_LIBRARY="$prefix/lib/libev.so" \
	-DCMOCKA_INCLUDE_DIR="$prefix/include" -DCMOCKA_LIBRARY="$prefix/lib/libcmocka-static.a" \
	>/dev/null
# The daemon and the unit tests; the end-to-end tests drive the host's
# processes and sockets and stay native. So does unit_delayline_link: it
# tests the benchmark's WAN emulator, which runs on the benchmarking host and
# counts with __int128, which 32-bit targets lack.
units=$(cmake --build "$work/build" --target help |
	sed -n 's/^\.\.\. \(unit_[a-z_]*\).*/\1/p' | grep -vx unit_delayline_link)
# shellcheck disable=SC2086 # one word per target
cmake --build "$work/build" -j2 --target keepalive-proxy $units >/dev/null

rm -rf "${out:?}/lib" "${out:?}/unit"
mkdir -p "$out/lib" "$out/unit"
cp "$work/build/keepalive-proxy" "$out/"
"$triple-strip" "$out/keepalive-proxy"
cp -P "$prefix/lib"/libev.so* "$out/lib/"
for u in $units; do
	cp "$work/build/tests/unit/$u" "$out/unit/"
done
cat > "$out/cross.env" <<EOF
arch=$arch
qemu=qemu-$arch
sysroot=$sysroot
EOF
echo "built $out/keepalive-proxy for $arch ($(wc -c < "$out/keepalive-proxy") bytes stripped)," \
	"$(cd "$out/lib" && echo libev.so*) and $(echo "$units" | wc -w) unit tests"
