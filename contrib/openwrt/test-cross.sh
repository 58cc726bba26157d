#!/bin/sh
# Runs what build-cross.sh built under qemu-user: every unit test, then the
# daemon for one proxied request to a small origin on loopback, whose body
# must come back byte for byte.
#
# Usage: contrib/openwrt/test-cross.sh OUTDIR
#
# Needs qemu-user, python3 (the origin) and curl. Prints a line per test and
# a count; exits non-zero when any test fails or the body differs. All of
# them run under qemu 7.2 (Debian 12), splice(2) included; a test that fails
# only for want of a system call in another qemu is reported with the
# emulator's own message (see its output below the failure), not skipped.

set -eu

out=$(cd "${1:?usage: $0 OUTDIR}" && pwd)
[ -f "$out/cross.env" ] || { echo "$out/cross.env missing: run build-cross.sh first" >&2; exit 1; }
setting()
{
	sed -n "s/^$1=//p" "$out/cross.env"
}
arch=$(setting arch)
qemu=$(setting qemu)
sysroot=$(setting sysroot)
command -v "$qemu" >/dev/null || { echo "$qemu missing (apt-get install qemu-user)" >&2; exit 1; }

work=$(mktemp -d)
origin=
proxy=
cleanup()
{
	for p in $proxy $origin; do
		if kill "$p" 2>/dev/null; then
			wait "$p" 2>/dev/null || true
		fi
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The guest's loader finds the target's libc under the sysroot and libev
# beside the binaries; -E sets the variable for the guest alone.
run()
{
	"$qemu" -L "$sysroot" -E LD_LIBRARY_PATH="$out/lib" "$@"
}

passed=0
failed=0
failures=
for t in "$out"/unit/unit_*; do
	name=${t##*/}
	rc=0
	run "$t" > "$work/$name.log" 2>&1 || rc=$?
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok   $name: $(sed -n 's/^\[  PASSED  \] \([0-9]*\).*/\1/p' "$work/$name.log") cases"
	else
		failed=$((failed + 1))
		failures="$failures $name"
		echo "FAIL $name (exit $rc):"
		grep -E '^\[  (FAILED|ERROR)|^qemu|Unsupported|not implemented' "$work/$name.log" ||
			tail -n 20 "$work/$name.log"
	fi
done

# A free port: bound, read back and released; the daemon binds it next.
free_port()
{
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Binary and larger than one read, so the relay and the port's byte order are
# both on the path.
mkdir "$work/www"
head -c 300000 /dev/urandom > "$work/www/blob"
oport=$(free_port)
python3 -m http.server -b 127.0.0.1 -d "$work/www" "$oport" > "$work/origin.log" 2>&1 &
origin=$!
pport=$(free_port)
# Not through run(): $! must be the emulator itself, the daemon's process.
"$qemu" -L "$sysroot" -E LD_LIBRARY_PATH="$out/lib" "$out/keepalive-proxy" -p "$pport" \
	> "$work/proxy.log" 2>&1 &
proxy=$!

# Ready when the daemon says it listens and the origin answers, at most ~10 s.
i=0
until grep -q ' listening on ' "$work/proxy.log" &&
	curl -s -o /dev/null "http://127.0.0.1:$oport/"; do
	i=$((i + 1))
	if [ "$i" -gt 50 ] || ! kill -0 "$proxy" 2>/dev/null; then
		echo "the daemon or the origin did not come up:" >&2
		cat "$work/proxy.log" "$work/origin.log" >&2
		exit 1
	fi
	sleep 0.2
done

if curl -sS -f -x "http://127.0.0.1:$pport" -o "$work/got" "http://127.0.0.1:$oport/blob" &&
	cmp -s "$work/www/blob" "$work/got"; then
	passed=$((passed + 1))
	echo "ok   proxied request: $(wc -c < "$work/got") bytes came back whole"
else
	failed=$((failed + 1))
	failures="$failures proxied-request"
	echo "FAIL proxied request: the body did not come back whole"
	cat "$work/proxy.log"
fi

echo "$arch under $("$qemu" --version | head -n 1): $(wc -c < "$out/keepalive-proxy") bytes stripped"
echo "$passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
	echo "failed:$failures" >&2
	exit 1
fi
