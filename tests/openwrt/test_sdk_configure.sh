#!/bin/sh
# shellcheck disable=SC3043
# The package's configure and build as an OpenWrt SDK runs them: the flags
# include/cmake.mk passes to every CMake package (Build/Configure/Default),
# with a staging directory that holds the target's libraries, and llhttp's
# sources unpacked from upstream's release layout (src/*.c, include/llhttp.h)
# into the build directory, as the package's Makefile does.
#
# The lines of cmake.mk modelled here (openwrt.git, include/cmake.mk):
#   CMAKE_FIND_ROOT_PATH:=$(STAGING_DIR)/usr;$(TOOLCHAIN_ROOT_DIR)
#   -DCMAKE_FIND_ROOT_PATH="$(CMAKE_FIND_ROOT_PATH)"
#   -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER
#   -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY
#   -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY
#   -DCMAKE_PREFIX_PATH=$(STAGING_DIR)
#   -DCMAKE_INSTALL_PREFIX=/usr  -DCMAKE_STRIP=:  -DCMAKE_SKIP_RPATH=TRUE
#   PKG_INSTALL:=1, and Build/Install/Default: DESTDIR="$(PKG_INSTALL_DIR)" ... install
# With those, a find_path() for a directory named on the command line is
# looked for under the staging directory, and fails, unless it says
# NO_CMAKE_FIND_ROOT_PATH. The target here is the build host itself, so the
# staging directory holds links to the host's libev and OpenSSL; both
# variants are configured, built and installed into a DESTDIR, where the
# daemon must then be.
#
# Usage: test_sdk_configure.sh SOURCE-DIR
# Exits 77 (skipped) without cmake, a C compiler, libev or llhttp's sources
# from Debian's node-llhttp (the stand-in for upstream's release here).

set -eu

src=${1:?usage: $0 SOURCE-DIR}
case "$src" in /*) ;; *) src="$(pwd)/$src" ;; esac
llhttp_c=/usr/share/llhttp
llhttp_h=/usr/share/include/llhttp/llhttp.h
ev_h=$(for d in /usr/include /usr/include/libev; do [ -f "$d/ev.h" ] && echo "$d/ev.h"; done | head -n 1)
ev_so=$(cc -print-file-name=libev.so 2>/dev/null || :)
if ! command -v cmake >/dev/null 2>&1 || [ -z "$ev_h" ] || [ ! -e "$ev_so" ] ||
	[ "$ev_so" = libev.so ] || [ ! -f "$llhttp_c/llhttp.c" ] || [ ! -f "$llhttp_h" ]; then
	echo "skipped: needs cmake, cc, libev and Debian's node-llhttp"
	exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

# STAGING_DIR/usr as the SDK fills it: headers and libraries only.
staging="$work/staging_dir/target"
mkdir -p "$staging/usr/include" "$staging/usr/lib" "$work/toolchain"
ln -s "$ev_h" "$staging/usr/include/ev.h"
for f in "$(dirname "$ev_so")"/libev.so*; do ln -s "$f" "$staging/usr/lib/"; done

# OpenSSL, for the -openssl variant: its headers (two directories on Debian,
# one of them per architecture) and libraries.
have_ssl=no
ssl_so=$(cc -print-file-name=libssl.so 2>/dev/null || :)
if [ -d /usr/include/openssl ] && [ "$ssl_so" != libssl.so ] && [ -e "$ssl_so" ]; then
	have_ssl=yes
	mkdir -p "$staging/usr/include/openssl"
	multiarch=$(cc -print-multiarch 2>/dev/null || :)
	for f in /usr/include/openssl/* ${multiarch:+/usr/include/$multiarch/openssl/*}; do
		[ -e "$f" ] && ln -sf "$f" "$staging/usr/include/openssl/"
	done
	for f in "$(dirname "$ssl_so")"/libssl.so* "$(dirname "$ssl_so")"/libcrypto.so*; do
		ln -sf "$f" "$staging/usr/lib/"
	done
fi

# PKG_BUILD_DIR: the package's sources, and llhttp's release unpacked into
# it as upstream's tarball lays it out.
build_dir="$work/build_dir/keepalive-proxy-test"
mkdir -p "$build_dir/llhttp/src" "$build_dir/llhttp/include"
cp "$llhttp_c"/*.c "$build_dir/llhttp/src/"
cp "$llhttp_h" "$build_dir/llhttp/include/"

failed=0

# variant NAME KP_TLS
variant()
{
	local name="$1" tls="$2" bdir="$build_dir/$1" dest="$work/ipkg-install-$1"
	mkdir -p "$bdir"
	if ! (cd "$bdir" && cmake \
		--no-warn-unused-cli \
		-DCMAKE_SYSTEM_NAME=Linux \
		-DCMAKE_SYSTEM_VERSION=1 \
		-DCMAKE_SYSTEM_PROCESSOR="$(uname -m)" \
		-DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_C_FLAGS_RELEASE="-DNDEBUG" \
		-DCMAKE_FIND_ROOT_PATH="$staging/usr;$work/toolchain" \
		-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER \
		-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY \
		-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
		-DCMAKE_STRIP=: \
		-DCMAKE_INSTALL_PREFIX=/usr \
		-DCMAKE_PREFIX_PATH="$staging" \
		-DCMAKE_SKIP_RPATH=TRUE \
		-DCMAKE_FIND_USE_PACKAGE_REGISTRY=FALSE \
		-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=FALSE \
		-DKP_BUILD_TESTS=OFF -DKP_BUILD_BENCH=OFF \
		-DLLHTTP_SOURCE_DIR="$build_dir/llhttp/src" \
		-DKP_TLS="$tls" \
		"$src" >"$work/configure-$name.log" 2>&1); then
		echo "FAIL $name: configure stopped, as in the SDK"
		sed 's/^/  /' "$work/configure-$name.log" | tail -n 20
		failed=$((failed + 1))
		return 0
	fi
	if ! cmake --build "$bdir" -j2 >"$work/build-$name.log" 2>&1 ||
		! DESTDIR="$dest" cmake --install "$bdir" >>"$work/build-$name.log" 2>&1; then
		echo "FAIL $name: build or install"
		tail -n 20 "$work/build-$name.log" | sed 's/^/  /'
		failed=$((failed + 1))
		return 0
	fi
	if [ ! -x "$dest/usr/bin/keepalive-proxy" ]; then
		echo "FAIL $name: no usr/bin/keepalive-proxy in PKG_INSTALL_DIR"
		failed=$((failed + 1))
		return 0
	fi
	# The variant is what was asked for.
	if "$dest/usr/bin/keepalive-proxy" --version | grep -q '^TLS: none'; then got=OFF; else got=ON; fi
	if [ "$got" != "$tls" ]; then
		echo "FAIL $name: KP_TLS=$tls built a binary with TLS $got"
		failed=$((failed + 1))
		return 0
	fi
	echo "ok   $name: configured, built and installed with cmake.mk's flags"
}

variant nossl OFF
if [ "$have_ssl" = yes ]; then
	variant openssl ON
else
	echo "ok   openssl: not tried, no OpenSSL headers here"
fi
[ "$failed" = 0 ]
