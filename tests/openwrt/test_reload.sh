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
#   5. a parent proxy with a password set with uci: the daemon sends an
#      HTTP parent the user and password, which neither its command line
#      nor procd's holds; a new password, committed and reloaded, restarts
#      it, and the parent is sent the new one;
#   6. stop: the process is gone, and the file of the parent's password.
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
parent_pid=
cleanup()
{
	sh "$here/uci-procd-harness.sh" "$init" "$KP_UCI_FILE" rc stop >/dev/null 2>&1 || :
	[ -z "$parent_pid" ] || kill "$parent_pid" 2>/dev/null || :
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

# An HTTP parent that answers every request itself, with the credentials
# it was sent (Proxy-Authorization, decoded), or "none".
python3 -u -c '
import base64, http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        auth = self.headers.get("Proxy-Authorization", "")
        body = base64.b64decode(auth[6:]) if auth.startswith("Basic ") else b"none"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("port", s.server_port, flush=True)
s.serve_forever()' >"$work/parent.log" 2>&1 &
parent_pid=$!
i=0
while ! grep -q '^port ' "$work/parent.log" && [ "$i" -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
parent_port=$(sed -n 's/^port //p' "$work/parent.log")

# sent_to_parent: what the parent was sent as credentials, for a request
# through the proxy (the users file's u:second to the proxy itself).
sent_to_parent()
{
	curl -s --max-time 5 -x "http://127.0.0.1:$port2" -U u:second "http://origin.example/" || :
}
# holds PID WORDS...: the process's command line, or procd's record of
# it, has one of the words.
holds()
{
	local pid="$1" word
	shift
	for word in "$@"; do
		tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -e "$word" && return 0
		grep -qF -e "$word" "$KP_PROCD_STATE/main/command" && return 0
	done
	return 1
}

password1='first s3cret:@/%'
password2='second:s3cret'
uci set keepalive-proxy.main.parent="http://127.0.0.1:$parent_port"
uci set keepalive-proxy.main.parent_user=me
uci set keepalive-proxy.main.parent_password="$password1"
uci commit keepalive-proxy
rc reload
ok=0
wait_for "$port2" yes || ok=1
third=$(pid_of)
credentials="$KP_PROCD_STATE/.run/main.parents"
[ "$(sent_to_parent)" = "me:$password1" ] || ok=1
! holds "$third" "$password1" s3cret me: || ok=1
[ "$(stat -c %a "$credentials" 2>&1)" = 600 ] || ok=1
result $ok "a parent with a password: the parent is sent it, the command line holds none, its file is mode 600"
if [ "$ok" != 0 ]; then
	echo "  the parent was sent: $(sent_to_parent)"
	echo "  command line: $( (tr '\0' ' ' <"/proc/$third/cmdline") 2>/dev/null)"
	stat -c '  %A %U %n' "$credentials" 2>&1
fi

uci set keepalive-proxy.main.parent_password="$password2"
uci commit keepalive-proxy
rc reload
ok=0
wait_for "$port2" yes || ok=1
[ "$(pid_of)" != "$third" ] || ok=1
[ "$(sent_to_parent)" = "me:$password2" ] || ok=1
! holds "$(pid_of)" "$password2" s3cret me: || ok=1
result $ok "a new parent password, committed and reloaded: restarted, and the parent is sent the new one"

last=$(pid_of)
rc stop
ok=0
i=0
while kill -0 "$last" 2>/dev/null && [ "$i" -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
! kill -0 "$last" 2>/dev/null || ok=1
[ ! -e "$credentials" ] || ok=1
result $ok "stop: the daemon is gone, and the file of the parent's password"

[ "$first" != "$second" ] || echo "note: the port change kept pid $first"
[ "$failed" = 0 ] || { echo "$failed case(s) failed"; exit 1; }
echo "all cases passed"
