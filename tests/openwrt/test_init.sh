#!/bin/sh
# shellcheck disable=SC3043
# The OpenWrt init script maps UCI options onto the flags keepalive-proxy
# takes: each case is a UCI file and the command line procd must be given;
# the flags are then handed to the real binary, which must accept them
# (it starts, and is stopped after a moment).
#
# Usage: test_init.sh KEEPALIVE-PROXY-BINARY

set -eu

bin=${1:?usage: $0 KEEPALIVE-PROXY-BINARY}
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
init="$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.init"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
failed=0

# check NAME UCI-TEXT EXPECTED-WORDS [tls]
check()
{
	local name="$1" got want needs="${4:-}"
	printf '%s\n' "$2" > "$work/uci"
	got=$(sh "$here/uci-procd-harness.sh" "$init" "$work/uci" 2>/dev/null | tr '\n' ' ')
	want="$3"
	if [ "$got" != "$want" ]; then
		echo "FAIL $name"
		echo "  got:  $got"
		echo "  want: $want"
		failed=$((failed + 1))
		return 0
	fi
	if [ "$needs" = tls ] && [ "$have_tls" = no ]; then
		echo "ok   $name (mapping only: the binary has no TLS)"
		return 0
	fi
	[ -z "$got" ] || accepted "$name" "$got"
	echo "ok   $name"
}

# The binary takes the words (the port swapped for a free one, and no -u
# unless we are root); still running after a second means it started. Ports
# come from below the kernel's ephemeral range, and a taken one is retried.
attempt=0

accepted()
{
	local name="$1" words="$2" tries=0
	while [ "$tries" -lt 5 ]; do
		attempt=$((attempt + 1))
		run_once "$words" $((20000 + ($$ * 7 + attempt * 2) % 12000))
		[ "$status" = 124 ] && return 0
		grep -q "Address already in use" "$work/log" || break
		tries=$((tries + 1))
	done
	echo "FAIL $name: the binary refused $args (exit $status)"
	sed 's/^/  /' "$work/log"
	failed=$((failed + 1))
}

# run_once WORDS PORT: sets args and status
run_once()
{
	local port="$2"
	args=
	# shellcheck disable=SC2086
	set -- $1   # the recorded words, split again
	shift       # the program path
	while [ $# -gt 0 ]; do
		case "$1" in
		-p) args="$args -p $port"; shift ;;
		# The package creates its user; here, as root, an existing one.
		--user) [ "$(id -u)" = 0 ] && args="$args --user nobody"; shift ;;
		--auth-file) printf 'u:p\n' > "$work/users"; chmod 600 "$work/users"
			args="$args --auth-file $work/users"; shift ;;
		--stats-listen) args="$args --stats-listen 127.0.0.1:$((port + 1))"; shift ;;
		--ca-cert|--upstream-ca) args="$args $1 $work/ca/ca.crt"; shift ;;
		--ca-key) args="$args --ca-key $work/ca/ca.key"; shift ;;
		-b) args="$args -b 127.0.0.1"; shift ;;
		*) args="$args $1" ;;
		esac
		shift
	done
	# shellcheck disable=SC2086
	if timeout 1 "$bin" $args >"$work/log" 2>&1; then
		status=0
	else
		status=$?
	fi
}

# A CA for the interception case, if the binary has TLS.
if "$bin" --make-ca "$work/ca" --intercept example.com >/dev/null 2>&1; then
	have_tls=yes
else
	have_tls=no
fi

check "the shipped default: loopback only" \
	"$(cat "$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.config")" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --idle-timeout 50 --max-idle-per-host 8 --max-idle 256 --tcp-keepalive 15 --grace 4 --user keepalive-proxy "

check "LAN with an allow list, a password file and the stats page" \
"config keepalive-proxy 'main'
	option port '3128'
	option bind '192.168.1.1'
	list allow '192.168.1.0/24'
	list allow 'fd00::/8'
	option auth_file '/etc/keepalive-proxy/users'
	option congestion 'reno'
	option upstream_rcvbuf '8388608'
	option stats_listen '127.0.0.1:9251'
	option verbose '2'" \
	"/usr/sbin/keepalive-proxy -p 3128 -b 192.168.1.1 --allow 192.168.1.0/24 --allow fd00::/8 --auth-file /etc/keepalive-proxy/users --upstream-rcvbuf 8388608 --congestion reno --stats-listen 127.0.0.1:9251 -v -v "

check "disabled" \
"config keepalive-proxy 'main'
	option enabled '0'
	option port '3128'" \
	""

check "empty options are left out" \
"config keepalive-proxy 'main'
	option grace ''
	option congestion ''" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 "

check "HTTPS pooling for a CDN" \
"config keepalive-proxy 'main'
	list intercept '*.googlevideo.com'
	list intercept '192.0.2.7'
	option ca_cert '/etc/keepalive-proxy/ca.crt'
	option ca_key '/etc/keepalive-proxy/ca.key'
	option upstream_ca '/etc/ssl/certs/ca-certificates.crt'
	option leaf_cache '64'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --intercept *.googlevideo.com --intercept 192.0.2.7 --ca-cert /etc/keepalive-proxy/ca.crt --ca-key /etc/keepalive-proxy/ca.key --upstream-ca /etc/ssl/certs/ca-certificates.crt --leaf-cache 64 " \
	tls

check "HTTPS pooling with the CA make_ca wrote" \
"config keepalive-proxy 'main'
	list intercept '*.googlevideo.com'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --intercept *.googlevideo.com --ca-cert /etc/keepalive-proxy/ca.crt --ca-key /etc/keepalive-proxy/ca.key " \
	tls

check "HTTPS pooling with the CA in ca_dir" \
"config keepalive-proxy 'main'
	list intercept 'cdn.example.com'
	option ca_dir '/srv/kp-ca'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --intercept cdn.example.com --ca-cert /srv/kp-ca/ca.crt --ca-key /srv/kp-ca/ca.key " \
	tls

check "a CA with nothing to intercept is no flag" \
"config keepalive-proxy 'main'
	option ca_dir '/srv/kp-ca'
	option ca_cert '/etc/keepalive-proxy/ca.crt'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 "

check "read-ahead with a router's memory" \
"config keepalive-proxy 'main'
	option read_ahead '1'
	option read_ahead_memory '16777216'
	option read_ahead_depth '1'
	option read_ahead_ttl '10'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --read-ahead --read-ahead-memory 16777216 --read-ahead-depth 1 --read-ahead-ttl 10 "

check "split downloads from two hosts, on two connections" \
"config keepalive-proxy 'main'
	list split '*.googlevideo.com'
	list split '192.0.2.7'
	option split_size '4194304'
	option split_connections '2'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --split *.googlevideo.com --split 192.0.2.7 --split-size 4194304 --split-connections 2 "

check "five connections per download is refused by validation" \
"config keepalive-proxy 'main'
	list split 'cdn.example.com'
	option split_connections '5'" \
	""

check "read-ahead off is no flag" \
"config keepalive-proxy 'main'
	option read_ahead '0'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 "

# procd_add_validation's types refuse what the daemon would refuse: no
# instance is sent, so procd starts nothing, and the reason goes to the log.
check "a port out of range is refused by validation" \
"config keepalive-proxy 'main'
	option port '70000'" \
	""

check "an allow entry that is no CIDR is refused by validation" \
"config keepalive-proxy 'main'
	list allow '192.168.1.0/24'
	list allow '192.168.1.0/33'" \
	""

check "booleans as UCI writes them" \
"config keepalive-proxy 'main'
	option enabled 'yes'
	option read_ahead 'on'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --read-ahead "

# Every option the shipped config names, set or commented out, has a type
# in the validation, and the validation names nothing the config lacks.
printf "config keepalive-proxy 'main'\n" >"$work/uci"
sh "$here/uci-procd-harness.sh" "$init" "$work/uci" service_triggers 2>"$work/triggers" >/dev/null
typed=$(sed -n 's/^validate //p' "$work/triggers" | cut -d' ' -f1 | sort -u)
named=$(sed -n 's/^[[:space:]#]*\(option\|list\) \([a-z_]*\) .*/\2/p' \
	"$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.config" | sort -u)
if [ -n "$typed" ] && [ "$typed" = "$named" ]; then
	echo "ok   every option in the config has a type in procd_add_validation"
else
	echo "FAIL the config's options and the validation's differ:"
	printf '%s\n' "$typed" >"$work/typed"
	printf '%s\n' "$named" >"$work/named"
	diff "$work/named" "$work/typed" | sed 's/^/  /' || :
	failed=$((failed + 1))
fi

# "make_ca" writes the CA into ca_dir, limited to the intercept list as
# written: a file here that *.example.com matches must not turn the
# pattern into its name.
if [ "$have_tls" = yes ]; then
	printf "config keepalive-proxy 'main'\n\tlist intercept '*.example.com'\n\toption ca_dir '%s'\n" \
		"$work/made" > "$work/uci"
	: > "$work/x.example.com"
	if (cd "$work" && sh "$here/uci-procd-harness.sh" "$init" "$work/uci" make_ca "$bin") \
		>"$work/log" 2>&1 && [ -f "$work/made/ca.key" ] &&
		openssl x509 -in "$work/made/ca.crt" -noout -text | grep -q 'DNS:example\.com$'; then
		echo "ok   make_ca into ca_dir"
	else
		echo "FAIL make_ca into ca_dir"
		sed 's/^/  /' "$work/log"
		failed=$((failed + 1))
	fi
else
	echo "ok   make_ca into ca_dir (skipped: the binary has no TLS)"
fi

[ "$failed" = 0 ] || { echo "$failed case(s) failed"; exit 1; }
echo "all cases passed"
