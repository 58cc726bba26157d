#!/bin/sh
# shellcheck disable=SC3043
# Settings changed on the router reach the running daemon: the init script
# started under uci-procd-harness.sh, which decides as procd's
# instance_update() and instance_restart() do, with the real binary.
#   1. start: the daemon listens on the configured port;
#   2. uci set ...port=...; uci commit; reload: it listens on the new port,
#      and the old one is closed (with a reload_signal, procd would only
#      have signalled the old process, which keeps its old port);
#   3. a reload with nothing changed leaves the same process running;
#   4. a changed users file restarts it, and the new password is the one
#      that works;
#   5. stop: the process is gone.
#
# Usage: test_reload.sh KEEPALIVE-PROXY-BINARY
# Exits 77 (skipped) without python3 or curl.

set -eu

bin=${1:?usage: $0 KEEPALIVE-PROXY-BINARY}
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
init="$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.init"
if ! command -v python3 >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "skipped: needs python3 and curl"
	exit 77
fi

work=$(mktemp -d)
export KP_PROCD_STATE="$work/procd" KP_UCI_FILE="$work/keepalive-proxy" KP_PROG="$bin"
cleanup()
{
	sh "$here/uci-procd-harness.sh" "$init" "$KP_UCI_FILE" rc stop >/dev/null 2>&1 || :
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failed=0
mkdir -p "$work/bin"
ln -s "$here/uci-stand-in.sh" "$work/bin/uci"
PATH="$work/bin:$PATH"

# Two ports nothing listens on now.
ports=$(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
port1=${ports% *}
port2=${ports#* }

listening()
{
	python3 -c '
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(s.connect_ex(("127.0.0.1", int(sys.argv[1]))))' "$1"
}

# wait_for PORT yes|no: until it listens (or does not), at most 10 s.
wait_for()
{
	local i=0
	while [ "$i" -lt 100 ]; do
		if listening "$1"; then [ "$2" = yes ] && return 0; else [ "$2" = no ] && return 0; fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

pid_of() { cat "$KP_PROCD_STATE/main/pid" 2>/dev/null || echo none; }

rc()
{
	sh "$here/uci-procd-harness.sh" "$init" "$KP_UCI_FILE" rc "$1" >>"$work/procd.log" 2>&1
}

result()
{
	if [ "$1" = 0 ]; then
		echo "ok   $2"
	else
		echo "FAIL $2"
		sed 's/^/  procd: /' "$work/procd.log"
		sed 's/^/  daemon: /' "$KP_PROCD_STATE/main.log" 2>/dev/null || :
		failed=$((failed + 1))
	fi
}

printf 'u:first\n' >"$work/users"
chmod 600 "$work/users"
cat >"$KP_UCI_FILE" <<EOF
config keepalive-proxy 'main'
	option enabled '1'
	option port '$port1'
	option bind '127.0.0.1'
	option grace '0'
	option auth_file '$work/users'
EOF

rc start
wait_for "$port1" yes
result $? "start: listening on the configured port"
first=$(pid_of)

uci set keepalive-proxy.main.port="$port2"
uci commit keepalive-proxy
rc reload
ok=0
wait_for "$port2" yes || ok=1
wait_for "$port1" no || ok=1
result $ok "uci set port, commit, reload: listening on the new port, the old one closed"
second=$(pid_of)

rc reload
[ "$(pid_of)" = "$second" ] && listening "$port2"
result $? "reload with nothing changed: the same process, still listening"

# curl's answer through the proxy to a URL nobody serves: 407 without the
# right password, 502 (or 504) with it.
status()
{
	curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$port2" \
		-U "$1" "http://127.0.0.1:1/" || :
}
printf 'u:second\n' >"$work/users"
rc reload
ok=0
[ "$(pid_of)" != "$second" ] || ok=1
wait_for "$port2" yes || ok=1
[ "$(status u:first)" = 407 ] || ok=1
case "$(status u:second)" in 502 | 504) ;; *) ok=1 ;; esac
result $ok "a changed users file: restarted, and the new password works"

last=$(pid_of)
rc stop
ok=0
i=0
while kill -0 "$last" 2>/dev/null && [ "$i" -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
! kill -0 "$last" 2>/dev/null || ok=1
result $ok "stop: the daemon is gone"

[ "$first" != "$second" ] || echo "note: the port change kept pid $first"
[ "$failed" = 0 ] || { echo "$failed case(s) failed"; exit 1; }
echo "all cases passed"
