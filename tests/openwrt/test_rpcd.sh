#!/bin/sh
# shellcheck disable=SC3043
# The LuCI app's rpcd plugin against the real daemon: keepalive-proxy runs
# with its stats listener on loopback, requests go through it to a Python
# origin, and "call status" must give the numbers /stats gives, and the
# bound of their fetch memory as the init script maps it. Then what
# the plugin refuses (a stats listener off loopback, a CA for nothing),
# when the binary has TLS, the CA it makes and the certificate it hands out,
# and the host check's report, judged with the saved flags.
#
# Real: the plugin, run as rpcd runs it (arguments as JSON on standard
# input), and the binary under test; for restart, the init script under
# uci-procd-harness.sh, which starts and stops the daemon as procd does.
# Stand-ins: libubox's jshn.sh
# (jshn-stand-in.sh, which the plugin sources in its place, see
# luci-plugin.sh), and first in PATH uci and uclient-fetch (uci-stand-in.sh
# and uclient-fetch-stand-in.sh, see each), and keepalive-proxy, a link to
# the binary.
#
# Usage: test_rpcd.sh KEEPALIVE-PROXY-BINARY
# Exits 77 (skipped) without python3 or curl.

set -eu

bin=${1:?usage: $0 KEEPALIVE-PROXY-BINARY}
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
here=$(cd "$(dirname "$0")" && pwd)

for tool in python3 curl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "skipped: this test needs $tool"
		exit 77
	fi
done

# shellcheck source=tests/openwrt/background.sh
. "$here/background.sh"
failed=0

mkdir "$work/bin" "$work/fetch" "$work/www" "$work/rpcd"
sh "$here/luci-plugin.sh" "$work/rpcd"
plugin="$work/rpcd/luci.keepalive-proxy"
ln -s "$bin" "$work/bin/keepalive-proxy"
ln -s "$here/uci-stand-in.sh" "$work/bin/uci"
ln -s "$here/uclient-fetch-stand-in.sh" "$work/fetch/uclient-fetch"
export KP_UCI_FILE="$work/uci" KP_FETCH_LOG="$work/fetched"
router_path="$work/fetch:$work/bin:$PATH"

fail()
{
	echo "FAIL $1"
	[ -z "${2:-}" ] || sed 's/^/  /' "$2"
	failed=$((failed + 1))
}

# uci TEXT: the router's /etc/config/keepalive-proxy, section main
set_uci()
{
	printf "config keepalive-proxy 'main'\n%s\n" "$1" >"$work/uci"
}

# call METHOD [PATH] [INPUT]: the plugin's answer, in $work/out, as rpcd
# would run it: the arguments with the caller's session, as JSON on stdin.
call()
{
	printf '%s' "${3:-"{\"ubus_rpc_session\":\"0123456789abcdef0123456789abcdef\"}"}" |
		PATH="${2:-$router_path}" "$plugin" call "$1" >"$work/out"
}

# check NAME PYTHON-EXPRESSION: the expression must be true of the answer
# (j) and of what /stats said (s), both parsed as JSON.
check()
{
	if python3 - "$work/out" "$work/stats" "$2" >"$work/why" 2>&1 <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
try:
    s = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    s = None
if not eval(sys.argv[3]):
    sys.exit("not so: %s\nthe plugin said: %s" % (sys.argv[3], json.dumps(j)[:2000]))
EOF
	then
		echo "ok   $1"
	else
		fail "$1" "$work/why"
	fi
}

# --- list: the methods the ACL grants ---------------------------------------
"$plugin" list >"$work/out"
check "list names the five methods, make_ca's argument an array, restart's none" \
	'sorted(j) == ["ca_certificate", "check_host", "make_ca", "restart", "status"] and j["make_ca"] == {"intercept": []} and j["restart"] == {}'

# --- the daemon, an origin, and traffic -------------------------------------
printf 'hello\n' >"$work/www/a.txt"
if ! started origin "Serving HTTP" python3 -u -m http.server --bind 127.0.0.1 \
	--protocol HTTP/1.1 --directory "$work/www" 0; then
	fail "the Python origin did not start" "$work/origin.log"
	exit 1
fi
origin="127.0.0.1:$(printf '%s\n' "$line" | sed -n 's/.* port \([0-9]*\) .*/\1/p')"

# Ports below the kernel's ephemeral range, another pair when one is taken.
attempt=0
while :; do
	attempt=$((attempt + 1))
	port=$((20000 + ($$ * 7 + attempt * 2) % 12000))
	stats=$((port + 1))
	# A parent, for its numbers, that the requests below do not take.
	if started proxy "listening on" "$bin" -p "$port" -b 127.0.0.1 \
		--stats-listen "127.0.0.1:$stats" --direct 127.0.0.1 --parent socks5h://127.0.0.1:9; then
		break
	fi
	if [ "$attempt" -ge 5 ] || ! grep -q "Address already in use" "$work/proxy.log"; then
		fail "keepalive-proxy did not start" "$work/proxy.log"
		exit 1
	fi
done

# Two requests on one client connection.
if ! curl -sSf -x "http://127.0.0.1:$port" -o /dev/null -o /dev/null \
	"http://$origin/a.txt" "http://$origin/a.txt" 2>"$work/why"; then
	fail "requests through the proxy" "$work/why"
fi

# --- status: the daemon's numbers --------------------------------------------
set_uci "	option stats_listen '127.0.0.1:$stats'"
call status
curl -sSf "http://127.0.0.1:$stats/stats" >"$work/stats"
check "status gives what /stats gives" \
	'all(j["stats"][k] == s[k] for k in ("requests_total", "upstream_reused_total", "requests_on_new_connection_total", "bytes_to_clients_total", "idle_upstream_connections", "saved_seconds_total", "errors_total", "idle_per_host", "fetch_memory_bytes", "fetch_records_bytes", "fetch_throttled_total"))'
check "status counts the two requests" 'j["stats"]["requests_total"] == 2'
check "status gives each parent's numbers as /stats has them" \
	'j["stats"]["parents"] == s["parents"] and [p["parent"] for p in s["parents"]] == ["socks5h://127.0.0.1:9"] and "handshakes" in s["parents"][0]'
check "status keeps the keys of idle_per_host as /stats has them (jshn would not)" \
	'list(j["stats"]["idle_per_host"]) == list(s["idle_per_host"]) and any(":" in k for k in s["idle_per_host"])'
check "status names the listener and the binary" \
	'j["listen"] == "127.0.0.1:'"$stats"'" and j["version"].startswith("keepalive-proxy ")'
# The bound of the memory gauge, as the init script maps it: fetch_memory,
# else read_ahead_memory (its former name), else empty for the default.
check "status: no fetch_memory set, the daemon's default (empty)" 'j["fetch_memory"] == ""'
set_uci "	option stats_listen '127.0.0.1:$stats'
	option read_ahead_memory '24M'"
call status
check "status: an older config's read_ahead_memory is the fetch memory" \
	'j["fetch_memory"] == "24M" and "stats" in j'
set_uci "	option stats_listen '127.0.0.1:$stats'
	option read_ahead_memory '24M'
	option fetch_memory '48M'"
call status
check "status: fetch_memory wins over read_ahead_memory" 'j["fetch_memory"] == "48M"'
# The applied parent, as the daemon labels it: a user and password in the
# URL (which the init script refuses) never reach the page, nor does
# parent_password.
check "status: no parent set, none (empty)" 'j["parent"] == ""'
set_uci "	option stats_listen '127.0.0.1:$stats'
	option parent 'socks5h://10.0.0.5:1080'
	option parent_user 'me'
	option parent_password 'S3cret-pw'"
call status
check "status names the applied parent, and nothing of its credentials" \
	'j["parent"] == "socks5h://10.0.0.5:1080" and "S3cret" not in json.dumps(j) and "stats" in j'
set_uci "	option stats_listen '127.0.0.1:$stats'
	option parent 'http://me:p@ss@proxy.example:3128'"
call status
check "status: a parent URL with a user and password is named without them" \
	'j["parent"] == "http://proxy.example:3128" and "p@ss" not in json.dumps(j) and "me:" not in json.dumps(j)'
set_uci "	option stats_listen '127.0.0.1:$stats'"
if grep -qxF "http://127.0.0.1:$stats/stats" "$work/fetched"; then
	echo "ok   status fetched /stats with uclient-fetch, from loopback"
else
	fail "status did not fetch http://127.0.0.1:$stats/stats with uclient-fetch" "$work/fetched"
fi
if command -v wget >/dev/null 2>&1; then
	call status "$work/bin:$PATH"
	check "status through wget, where uclient-fetch is missing" \
		'j["stats"]["requests_total"] == s["requests_total"]'
fi

# --- status: what it refuses ---------------------------------------------------
: >"$work/fetched"
set_uci "	option stats_listen '192.168.1.1:$stats'"
call status
check "a LAN stats listener is refused" '"not on loopback" in j["error"] and "stats" not in j'
set_uci "	option stats_listen '0.0.0.0:$stats'"
call status
check "a wildcard stats listener is refused" '"not on loopback" in j["error"]'
set_uci "	option stats_listen '127.0.0.1.example.com:$stats'"
call status
check "a name that starts like loopback is refused" '"not on loopback" in j["error"]'
set_uci "	option stats_listen '127.0.0.1:$stats/stats?x'"
call status
check "a port that is no number is refused" '"not on loopback" in j["error"]'
if [ -s "$work/fetched" ]; then
	fail "a refused listener was fetched all the same" "$work/fetched"
fi
set_uci "	option port '9250'"
call status
check "no stats listener: said so, with the binary's version" \
	'"is off" in j["error"] and j["version"].startswith("keepalive-proxy ")'
kill "$pid"
wait "$pid" 2>/dev/null || :
set_uci "	option stats_listen '127.0.0.1:$stats'"
call status
check "a stopped daemon: said so" '"no answer" in j["error"]'

# A stats page that asks for credentials (the daemon's, with a users file
# and stats_auth 1): the page is told why and what to set, not left empty.
if started asking "Serving" python3 -u -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Basic realm=\"keepalive-proxy stats\"")
        self.send_header("Content-Length", "0")
        self.end_headers()
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("Serving on port %d" % s.server_port, flush=True)
s.serve_forever()'; then
	asking=$(printf '%s\n' "$line" | sed -n 's/.* port \([0-9]*\).*/\1/p')
	set_uci "	option stats_listen '127.0.0.1:$asking'"
	call status
	check "a stats page that asks for credentials: said so, with stats_auth to set" \
		'"asks for a user and password" in j["error"] and "stats_auth to 0" in j["error"] and "stats" not in j'
else
	fail "the Python server answering 401 did not start" "$work/asking.log"
fi
# The same with the daemon itself, once it asks (--stats-no-auth is the
# flag that says otherwise).
if "$bin" --help 2>&1 | grep -q -e --stats-no-auth; then
	printf 'u:p\n' >"$work/users"
	chmod 600 "$work/users"
	for how in ask no-auth; do
		attempt=0
		while :; do
			attempt=$((attempt + 1))
			port=$((20000 + ($$ * 7 + attempt * 2 + 100) % 12000))
			stats=$((port + 1))
			# shellcheck disable=SC2046
			if started "proxy-$how" "listening on" "$bin" -p "$port" -b 127.0.0.1 \
				--auth-file "$work/users" --stats-listen "127.0.0.1:$stats" \
				$([ "$how" = no-auth ] && echo --stats-no-auth); then
				break
			fi
			if [ "$attempt" -ge 5 ]; then
				fail "keepalive-proxy with a users file did not start" "$work/proxy-$how.log"
				break
			fi
		done
		set_uci "	option stats_listen '127.0.0.1:$stats'"
		call status
		if [ "$how" = ask ]; then
			check "keepalive-proxy with a users file asks for credentials: said so" \
				'"asks for a user and password" in j["error"] and "stats" not in j'
		else
			check "keepalive-proxy with a users file and --stats-no-auth: the numbers" \
				'"error" not in j and "requests_total" in j["stats"]'
		fi
		kill "$pid"
		wait "$pid" 2>/dev/null || :
	done
else
	echo "ok   the daemon's own 401 (skipped: this binary has no --stats-no-auth yet)"
fi

# --- the CA --------------------------------------------------------------------
set_uci "	option ca_dir '$work/ca'"
call make_ca
if [ -z "$("$bin" -V | sed -n '/^TLS: none/d; s/^TLS: //p')" ]; then
	check "make_ca without TLS points to keepalive-proxy-openssl" \
		'"keepalive-proxy-openssl" in j["error"]'
	echo "ok   the CA itself (skipped: the binary has no TLS)"
else
	check "make_ca with nothing to intercept is refused" '"hosts to intercept" in j["error"]'
	# A file here that *.example.com matches must not become the pattern.
	: >"$work/x.example.com"
	set_uci "	option ca_dir '$work/ca'
	list intercept '*.example.com'
	list intercept 'cdn.example.net'"
	call make_ca "" '{"intercept":["*.example.com","cdn.example.net","more.example.org"],"ubus_rpc_session":"x"}'
	check "make_ca refuses a list that is not the applied one: Save & Apply first" \
		'"Save & Apply first" in j["error"] and "ca_dir" not in j and "intercept" not in j'
	if [ -e "$work/ca" ]; then
		fail "make_ca made a CA for a list that is not applied"
	fi
	(cd "$work" && call make_ca "" '{"intercept":["*.example.com","cdn.example.net"],"ubus_rpc_session":"x"}')
	check "make_ca writes the CA into ca_dir" \
		'j["ca_dir"] == "'"$work/ca"'" and "Wrote a new CA" in j["message"]'
	if openssl x509 -in "$work/ca/ca.crt" -noout -ext nameConstraints >"$work/why" 2>&1 &&
		grep -q 'DNS:example\.com$' "$work/why" && grep -q 'DNS:cdn\.example\.net$' "$work/why"; then
		echo "ok   the CA is limited to the saved intercept list"
	else
		fail "the CA is not limited to *.example.com and cdn.example.net" "$work/why"
	fi
	call make_ca
	check "make_ca keeps an existing CA" '"has a CA already" in j["error"]'
	call ca_certificate
	check "ca_certificate gives ca.crt as it is" \
		'j["pem"] == open("'"$work/ca/ca.crt"'").read() and j["path"] == "'"$work/ca/ca.crt"'"'
	cat "$work/ca/ca.key" "$work/ca/ca.crt" >"$work/both.pem"
	set_uci "	option ca_cert '$work/both.pem'"
	call ca_certificate
	check "ca_certificate never hands out a key" \
		'j["pem"] == open("'"$work/ca/ca.crt"'").read() and "PRIVATE" not in j["pem"]'
fi
set_uci "	option ca_dir '$work/none'"
call ca_certificate
check "ca_certificate before there is a CA" '"create the CA first" in j["error"]'

# --- check_host: the binary's report, with the flags it judges --------------
set_uci "	option port '9250'"
call check_host
check "check_host gives the report, judged for the default listen address" \
	'"error" not in j and j["flags"] == "-b 127.0.0.1" and j["report"]["findings"] and all(f["status"] in ("ok", "note", "limits", "unknown") and f["what"] for f in j["report"]["findings"])'
# Each of these shows in the report (-u as buffers never "passed as root");
# --congestion names none the kernel has, so something limits, and exit 1
# must still be a report.
set_uci "	option bind '192.168.1.1'
	list allow '192.168.1.0/24'
	list allow 'fd00::/8'
	option user 'nobody'
	option max_clients '10000000'
	option upstream_rcvbuf '1073741824'
	option upstream_sndbuf '1073741824'
	option congestion 'nosuchcc'"
call check_host
check "check_host: exit 1, something limits, is a report" \
	'"error" not in j and j["report"]["limited"] is True'
check "check_host passes -b, --allow and -u as the init script does" \
	'j["flags"] == "-b 192.168.1.1 --allow 192.168.1.0/24 --allow fd00::/8 --user nobody --max-clients 10000000 --upstream-rcvbuf 1073741824 --upstream-sndbuf 1073741824 --congestion nosuchcc"'
check "check_host judges the saved flags" \
	'{f["key"]: f for f in j["report"]["findings"]}["congestion"]["status"] == "limits" and all(t in json.dumps(j["report"]) for t in ("--max-clients 10000000", "--upstream-rcvbuf 1024 MiB", "--upstream-sndbuf 1024 MiB", "nosuchcc", "listens on 192.168.1.1")) and "passed as root" not in json.dumps(j["report"])'
# Under the open-file limit procd gives the daemon (2 x max_clients + 32),
# not the plugin's own.
set_uci "	option max_clients '100'"
call check_host
check "check_host judges the open-file limit the init script gives the daemon" \
	'{f["key"]: f for f in j["report"]["findings"]}["fd_limit"]["value"] == "232" and {f["key"]: f for f in j["report"]["findings"]}["fd_limit"]["status"] == "ok"'
set_uci "	option max_clients 'many'"
call check_host
check "check_host: a setting the daemon refuses gives its reason" \
	'"report" not in j and "max clients must be" in j["error"]'
# A binary from before the host check: it knows no --check-host.
mkdir "$work/old"
cat >"$work/old/keepalive-proxy" <<'EOF'
#!/bin/sh
[ "$1" = --help ] && { echo "usage: keepalive-proxy [options]"; exit 0; }
echo "keepalive-proxy: unknown option $1 (see --help)" >&2
exit 2
EOF
chmod +x "$work/old/keepalive-proxy"
set_uci "	option port '9250'"
call check_host "$work/old:$router_path"
check "check_host: a binary without the host check is named too old" \
	'"report" not in j and "too old" in j["error"]'

# --- restart: this service and no other -------------------------------------
# The init scripts under $IPKG_INSTROOT: keepalive-proxy's, run by
# uci-procd-harness.sh as procd would (rc.common's restart: stop, then
# start), and the firewall's, which must never be called.
init="$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.init"
mkdir -p "$work/root/etc/init.d"
export KP_PROCD_STATE="$work/procd" KP_PROG="$bin" KP_INIT_LOG="$work/init.log"
cat >"$work/root/etc/init.d/keepalive-proxy" <<EOF2
#!/bin/sh
echo "keepalive-proxy \$*" >>"\$KP_INIT_LOG"
exec sh "$here/uci-procd-harness.sh" "$init" "\$KP_UCI_FILE" rc "\$1"
EOF2
cat >"$work/root/etc/init.d/firewall" <<'EOF2'
#!/bin/sh
echo "firewall $*" >>"$KP_INIT_LOG"
EOF2
chmod +x "$work/root/etc/init.d/keepalive-proxy" "$work/root/etc/init.d/firewall"
port=$((20000 + ($$ * 7 + 300) % 12000))
set_uci "	option port '$port'
	option bind '127.0.0.1'
	option grace '0'"
sh "$here/uci-procd-harness.sh" "$init" "$KP_UCI_FILE" rc start >"$work/procd.log" 2>&1 || :
pid_of() { cat "$KP_PROCD_STATE/main/pid" 2>/dev/null || echo none; }
before=$(pid_of)
: >"$work/init.log"
export IPKG_INSTROOT="$work/root"
call restart "" '{"name":"firewall","action":"stop","ubus_rpc_session":"x"}'
unset IPKG_INSTROOT
check "restart restarts keepalive-proxy, whatever service the call names" \
	'"error" not in j and j["restarted"] is True'
i=0
while ! curl -s -o /dev/null "http://127.0.0.1:$port/" && [ "$i" -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ "$(cat "$work/init.log")" = "keepalive-proxy restart" ] && [ "$before" != none ] &&
	[ "$(pid_of)" != "$before" ] && ! kill -0 "$before" 2>/dev/null && [ "$i" -lt 50 ]; then
	echo "ok   restart ran keepalive-proxy's init script alone: a new daemon listens, the old one is gone"
else
	echo "FAIL restart did not restart keepalive-proxy alone (pid $before, now $(pid_of))"
	sed 's/^/  init: /' "$work/init.log"
	sed 's/^/  procd: /' "$work/procd.log"
	failed=$((failed + 1))
fi
sh "$here/uci-procd-harness.sh" "$init" "$KP_UCI_FILE" rc stop >/dev/null 2>&1 || :
export IPKG_INSTROOT="$work/none"
call restart
unset IPKG_INSTROOT
check "restart without the init script: said so" '"is the keepalive-proxy package installed" in j["error"]'

[ "$failed" = 0 ] || { echo "$failed case(s) failed"; exit 1; }
echo "all cases passed"
